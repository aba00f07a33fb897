/* The workspace router on the Runtime Supervisor's side (spec 3.5, SR-13):
 * the RS creates the FUSE mount detached in its own mount namespace,
 * starts the router through its broker (a child in the generation's user,
 * PID and mount namespaces, holding the only /dev/fuse descriptor), then
 * attaches the mount at <gen>/workspace, which the bundle binds as
 * /workspace. The router's end aborts the FUSE connection (every
 * /workspace operation then fails with ENOTCONN) and ends the RS's serve,
 * so the generation is torn down; nothing is copied between backings.
 * Stopping unmounts exactly, then stops the router. */
#ifndef LZ_RSROUTER_H
#define LZ_RSROUTER_H

#include <stdbool.h>

#include "fs/mountns.h"
#include "proc/broker.h"
#include "runtime/rsplan.h"
#include "util/err.h"

struct lz_rsrouter {
	struct lz_broker_child child;
	struct lz_mount_id mount;
	bool mounted;
};

#define LZ_RSROUTER_INIT { .child = LZ_BROKER_CHILD_INIT }

/* Does nothing when the plan does not isolate ignored paths (FR-9). */
int lz_rsrouter_start(const struct lz_rs_plan *p, struct lz_rsrouter *r, struct lz_err *err);

/* Unmounts exactly, then stops the router; safe on a router never
 * started. The router's own failure message, if any, is in err. */
int lz_rsrouter_stop(const struct lz_rs_plan *p, struct lz_rsrouter *r, struct lz_err *err);

#endif
