/* Causal child acquisition (spec 3.3 "Host process identity and causal
 * acquisition refinement", steps 2-8).
 *
 * Every Lazaret-owned child that can become durable process ownership is
 * created here, by the one broker of its process (HC or RS):
 *   2. a fail-closed launch barrier (a pipe whose EOF means "never run");
 *   3. clone3(CLONE_PIDFD) of a wrapper that blocks before any target work;
 *   4. the pidfd from clone3 (the only one), waitid(P_PIDFD, WEXITED |
 *      WNOHANG | WNOWAIT): a child that is already gone refuses;
 *   5. fstatfs(pidfd) == PID_FS_MAGIC, fstat for the pidfs device and inode,
 *      boot ID and start time: the v1 pidfs identity (pidref.h);
 *      for a new user namespace, the ID maps are written and verified;
 *   6. the caller's staged hook persists that identity;
 *   7. only then the barrier is released;
 *   8. the wrapper arms its parent-death signal, rechecks the parent's pidfs
 *      identity (closing the arming race), joins namespaces if asked; in a
 *      user namespace (new or joined) it joins a fresh anonymous session
 *      keyring and drops its supplementary groups, or refuses the target;
 *      then it runs or execs the foreground target in place.
 * Step 1 (durable intent) comes before the call and step 9 (commit after
 * readiness) after it; both are the caller's. Signals and waits go through
 * the retained pidfd only. */
#ifndef LZ_BROKER_H
#define LZ_BROKER_H

#include <signal.h>
#include <stdint.h>

#include "proc/pidref.h"
#include "proc/spawn.h"
#include "proc/userns.h"
#include "util/err.h"

struct lz_broker_spec {
	const char *label;
	const char *comm;           /* process name (PR_SET_NAME) of a fn target or wrapper */
	uint64_t clone_flags;       /* e.g. CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS */
	const struct lz_idmap *map; /* required with CLONE_NEWUSER */
	int join_pidfd;             /* >= 0: setns(join_pidfd, join_flags) before the target */
	int join_flags;             /* with CLONE_NEWPID the wrapper forks and relays */
	/* The target: exec (exactly one of exec and fn). */
	const struct lz_spawn *exec;
	int (*fn)(void *arg, struct lz_err *err); /* returns 0 or -errno */
	void *arg;
	/* Step 6; may be NULL. A failure kills the child before release.
	 * pidfd is the child's, lent for the call (its namespaces can be
	 * identified: the maps are written, nothing of the target ran). */
	int (*staged)(void *ctx, const struct lz_pidref *id, int pidfd, struct lz_err *err);
	void *ctx;
};

struct lz_broker_child {
	int pidfd;     /* owned */
	struct lz_pidref id;
	int report_fd; /* owned: fn's error message or exec's errno */
	bool exec;
};

#define LZ_BROKER_CHILD_INIT { .pidfd = -EBADF, .report_fd = -EBADF }

/* Runs steps 2-8. For an exec target it returns after the exec happened
 * (or fails with the exec errno). *ret untouched on failure. */
int lz_broker_spawn(const struct lz_broker_spec *spec, struct lz_broker_child *ret,
		    struct lz_err *err);

/* Waits (timeout_ms < 0: without limit; on timeout the child is killed) and
 * reaps. *ret_status: exit code, or 128 + signal. A fn target's failure
 * message comes back in err with -EIO. Releases the child's descriptors. */
int lz_broker_wait(struct lz_broker_child *child, int timeout_ms, int *ret_status,
		   struct lz_err *err);

/* Whether the child has exited, without reaping it (lz_broker_wait still
 * does): 1 with *ret_status its exit code (CLD_EXITED only; a signal's end
 * is 0 and *ret_status 128 + signal), 0 while it runs, -errno. */
int lz_broker_exited(const struct lz_broker_child *child, int *ret_status);

/* In a fn target: the descriptor its failure message goes back through,
 * for a target that closes every other descriptor it inherited; -1
 * elsewhere. */
int lz_broker_report_fd(void);

/* Spec 3.3: a fork copies the whole process, keys included. Every child
 * of this process's broker that goes on running the parent's image (a fn
 * target; the wrapper that relays a joined PID namespace's target) calls
 * forget(ctx) first, and it wipes what no child needs. NULL: nothing.
 * forget may allocate and free: the process must be single-threaded. */
void lz_broker_forget_in_children(void (*forget)(void *ctx), void *ctx);

/* Signals the exact child through its pidfd. */
int lz_broker_signal(const struct lz_broker_child *child, int sig);

/* Kills, reaps and releases; accepts an empty child. */
void lz_broker_kill(struct lz_broker_child *child);

#endif
