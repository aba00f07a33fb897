/* The workspace router on the Runtime Supervisor's side (spec 3.5, SR-13):
 * the RS creates the FUSE mount detached in its own mount namespace and
 * starts the router through its broker (a child in the generation's user,
 * PID and mount namespaces, exec'ing its own program, router/routerproc.h,
 * holding the only /dev/fuse descriptor); the router classifies the
 * workspace while the RS builds the network, and the RS then waits for it
 * to serve and attaches the mount at <gen>/workspace, which the bundle
 * binds as /workspace. The router's end aborts the FUSE connection (every
 * /workspace operation then fails with ENOTCONN) and ends the RS's serve,
 * so the generation is torn down; nothing is copied between backings.
 * Stopping unmounts exactly, then stops the router. The router's standard
 * error is the RS's helper log (a pipe the RS relays to hc.log): it holds
 * no descriptor of a host file it could chmod, chown or touch
 * (router/routerproc.h). */
#ifndef LZ_RSROUTER_H
#define LZ_RSROUTER_H

#include <stdbool.h>

#include "fs/mountns.h"
#include "proc/broker.h"
#include "runtime/rsplan.h"
#include "util/err.h"

struct lz_rsrouter {
	struct lz_broker_child child;
	int ready_fd; /* the router's ready pipe, until it serves */
	int mount_fd; /* the detached FUSE mount, until attached */
	struct lz_mount_id mount;
	bool mounted;
};

#define LZ_RSROUTER_INIT { .child = LZ_BROKER_CHILD_INIT, .ready_fd = -EBADF, .mount_fd = -EBADF }

/* Creates the detached mount and starts the router, log_fd its standard
 * error; returns while it classifies the workspace. */
int lz_rsrouter_start(const struct lz_rs_plan *p, int log_fd, struct lz_rsrouter *r, struct lz_err *err);

/* Waits until the router serves (its own failure message if it ends
 * first), then attaches its mount at the plan's router target. */
int lz_rsrouter_attach(const struct lz_rs_plan *p, struct lz_rsrouter *r, struct lz_err *err);

/* Unmounts exactly, then stops the router; safe on a router never
 * started or attached. The router's own failure message, if any, is in err. */
int lz_rsrouter_stop(const struct lz_rs_plan *p, struct lz_rsrouter *r, struct lz_err *err);

#endif
