/* The Runtime Supervisor (spec 3.1, 3.3, 3.6, 3.7).
 *
 * The Host Coordinator's broker creates the RS in fresh user, PID and mount
 * namespaces (the user namespace with the verified map); the RS starts in
 * the host's network namespace. As PID 1 of its PID namespace, the RS takes
 * every runsc and slirp4netns process with it when it ends; its
 * parent-death signal ends it when the HC is lost. The RS:
 *   1. makes its mounts private and mounts its own /proc, mounts the root
 *      overlay at <gen>/root and one overlay per persistent directory
 *      (State Anchor) at <gen>/anchor/<n>, and reports their identities;
 *   2. clones slirp4netns through its broker while still in the host
 *      network namespace (the helper keeps it for its sockets), reports the
 *      staged identity and, once the HC echoes it, moves itself into a new
 *      enforcement network namespace and prepares it (the /proc/sys/net/core
 *      shim of C-REFINEMENT fact 3, lo up, IPv6 disabled) before releasing
 *      the helper, which attaches to it (FR-16, spec 3.7);
 *   3. builds the known-live canary (canary.h), waits for slirp4netns's
 *      tap0, installs exactly the derived policy (verified seals and digest)
 *      and checks the installed routes against it;
 *   4. launches a non-detached `runsc run` through its broker, reports the
 *      staged identity and releases it only after the HC's commit
 *      acknowledgement echoes it (spec 3.3 steps 6-7);
 *   5. reads the sandbox init's observations from the init's standard
 *      output, removes the canary by its creation record, observes the
 *      result, drops network administration irreversibly, and reports
 *      readiness with the whole attestation record (netattest.h); the HC
 *      judges it;
 *   6. on STOP, on loss of the HC (control socket EOF: the lease-loss path),
 *      or when runsc ends: stops the container and the helper, unmounts
 *      exactly what it mounted, proves the mounts absent, reports, and
 *      exits.
 * The RS never opens the Domain Store or the Storage Catalog. It runs no
 * sequence of its own: lua/lazaret/runtime/supervisor.lua calls the steps
 * below, and each step refuses to run out of order. */
#ifndef LZ_SUPERVISOR_H
#define LZ_SUPERVISOR_H

#include <stdbool.h>

#include "runtime/rsplan.h"
#include "runtime/rsproto.h"
#include "util/err.h"

#define LZ_RS_STOP_TIMEOUT_MS 10000
#define LZ_RS_TAP_TIMEOUT_MS 20000
#define LZ_RS_INIT_REPORT_TIMEOUT_MS 20000
/* What the helpers' log may add to hc.log in a generation (bytes). */
#define LZ_RS_HELPER_LOG_MAX (256 * 1024)

/* The RS's own state, in the RS process only. */
typedef struct lz_rs lz_rs;

/* The steps, in the only order they accept (each refuses with -EPROTO
 * unless the one before it succeeded): a sequencing mistake can stop the
 * RS, never skip a step. lua/lazaret/runtime/supervisor.lua runs them. */
enum lz_rs_step {
	LZ_RS_STEP_NONE = 0,
	LZ_RS_STEP_MOUNTED,       /* 1. root and State Anchor overlays, MOUNTS sent */
	LZ_RS_STEP_ROUTER,        /* 1. the workspace router started (spec 3.5): it
				   *    classifies while the network is built */
	LZ_RS_STEP_EGRESS_STARTED, /* 1. the egress proxy forked in the host's network
				   *    namespace (nothing without allow_domains) */
	LZ_RS_STEP_HELPER,        /* 2. slirp4netns staged and acknowledged; the
				   *    enforcement namespace and canary built;
				   *    the helper released */
	LZ_RS_STEP_CANARY_LIVE,   /* 3. both canary endpoints answered */
	LZ_RS_STEP_EGRESS_LIVE,   /* 3. the egress proxy's link built and its keyed
				   *    answer checked (nothing without allow_domains) */
	LZ_RS_STEP_POLICY,        /* 3. tap0 configured, exactly the derived policy
				   *    installed and observed, IPv6 clean */
	LZ_RS_STEP_ROUTER_ATTACHED, /* 4. the router serves; its mount attached */
	LZ_RS_STEP_RUNSC,         /* 4. runsc run staged, acknowledged, released */
	LZ_RS_STEP_RUNNING,       /* 4. the container runs */
	LZ_RS_STEP_INIT_REPORTED, /* 5. the init's observations read */
	LZ_RS_STEP_NET_FINISHED,  /* 5. canary removed, observed, CAP_NET_ADMIN dropped */
	LZ_RS_STEP_READY,         /* 5. READY with the attestation record sent */
};

/* Why serving ended. */
enum lz_rs_end {
	LZ_RS_END_STOP = 1,   /* the HC sent STOP */
	LZ_RS_END_HC_LOST,    /* the control socket ended: lease loss (spec 3.6) */
	LZ_RS_END_RUNSC,      /* runsc run ended */
	LZ_RS_END_ROUTER,     /* the workspace router ended (spec 3.5 router loss) */
	LZ_RS_END_HELPER,     /* slirp4netns ended: the sandbox has no network path */
	LZ_RS_END_EGRESS,     /* the egress proxy ended: no way to a name */
	LZ_RS_END_MEMORY,     /* the sandbox's memory passed its limit (memwatch.h) */
};

/* Takes the plan (the broker's fn argument) in the freshly created RS:
 * closes every descriptor but the plan's, standard input and output go to
 * /dev/null. */
int lz_rs_new(const struct lz_rs_plan *plan, lz_rs **ret, struct lz_err *err);
void lz_rs_free(lz_rs *rs);

int lz_rs_mount(lz_rs *rs, struct lz_err *err);
int lz_rs_start_router(lz_rs *rs, struct lz_err *err);
int lz_rs_start_egress(lz_rs *rs, struct lz_err *err);
int lz_rs_start_helper(lz_rs *rs, struct lz_err *err);
int lz_rs_prove_canary(lz_rs *rs, struct lz_err *err);
int lz_rs_attach_egress(lz_rs *rs, struct lz_err *err);
int lz_rs_install_policy(lz_rs *rs, struct lz_err *err);
int lz_rs_attach_router(lz_rs *rs, struct lz_err *err);
int lz_rs_start_runsc(lz_rs *rs, struct lz_err *err);
int lz_rs_await_running(lz_rs *rs, struct lz_err *err);
int lz_rs_read_init_report(lz_rs *rs, struct lz_err *err);
/* Never fails on an observation: each outcome is a predicate of the
 * record, which the HC judges. */
int lz_rs_finish_network(lz_rs *rs, struct lz_err *err);
int lz_rs_report_ready(lz_rs *rs, struct lz_err *err);

/* Serves until STOP, HC loss, the end of runsc or of a helper, or the
 * sandbox's memory past its limit, looked at every
 * LZ_MEMWATCH_INTERVAL_MS (needs READY). */
int lz_rs_serve(lz_rs *rs, enum lz_rs_end *ret, struct lz_err *err);
/* Why serving ended, when the RS itself ended it (LZ_RS_END_MEMORY);
 * "" otherwise. */
const char *lz_rs_end_reason(const lz_rs *rs);

/* Step 6: stops the container and the helper, unmounts exactly what was
 * mounted, proves the mounts absent, discards the transient layer and,
 * while the HC is there, reports STOPPED (or FAILED with the reason).
 * Valid after any step. */
int lz_rs_stop(lz_rs *rs, struct lz_err *err);

/* A step failed: the same release as lz_rs_stop, the canary abandoned, and
 * FAILED with why (while the HC is there). */
void lz_rs_abort(lz_rs *rs, const char *why);

/* The step reached. */
enum lz_rs_step lz_rs_reached(const lz_rs *rs);
/* A step's name, as Lua calls it ("start" for none, which is no step). */
const char *lz_rs_step_name(enum lz_rs_step step);

#endif
