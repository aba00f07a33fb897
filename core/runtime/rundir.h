/* The runtime Domain directory and its generation trees (spec 3.2 runtime
 * roots, SR-10, SR-11).
 *
 *   <Runtime Root>/domains/<Domain ID>/   0700, the retained handle
 *     hc.lock      the Domain flock (kept)
 *     hc.sock      the HC's socket, from publication to the end of serve
 *     hc.log       the HC's standard error, appended (kept)
 *     gen-<N>/     one generation's tree, removed when it ends:
 *       root/ root-upper/ root-work/  the root overlay's mount point and
 *                                     transient layer
 *       anchor/<i>/   State Anchor mount points
 *       empty/        lower for a persistent directory the image lacks
 *       runsc/        runsc --root
 *       bundle/       config.json
 *       sessions/     runsc exec process documents and guest PID files
 *       init          lazaret-init (0555)
 *       escalate      lazaret-escalate (0555)
 *       escalation/   the Escalation Mailbox (escalation/mailbox.h)
 *       resolv.conf   the sandbox's resolver (0444)
 *       runsc.log, slirp4netns.log
 *
 * Every name is created and opened beneath a retained descriptor
 * (openat2 beneath, no symlinks, no mount crossing); a path label is kept
 * only for the trusted tools that need one (runsc, the RS's reopen-and-
 * compare). The Client CLI needs only the socket and log names, so it
 * depends on this module and not on the coordinator. */
#ifndef LZ_RUNDIR_H
#define LZ_RUNDIR_H

#include <stddef.h>
#include <stdint.h>

#include "fs/pathauth.h"
#include "util/err.h"

#define LZ_RUNDIR_SOCKET "hc.sock"
#define LZ_RUNDIR_LOCK "hc.lock"
#define LZ_RUNDIR_LOG "hc.log"
#define LZ_GENDIR_ESCALATE "escalate"
#define LZ_RUNDIR_LOG_TAIL 16384 /* bytes of a failed generation's logs kept in hc.log */

struct sockaddr_un;

/* The HC's socket address beneath the retained runtime Domain directory
 * (named through its descriptor, never a re-resolved path);
 * -ENAMETOOLONG. */
int lz_rundir_socket_addr(const struct lz_path *runtime_domain, struct sockaddr_un *ret);

/* One generation's tree. Descriptors are O_PATH directories, owned. */
struct lz_gendir {
	const struct lz_path *parent; /* the runtime Domain directory; borrowed */
	struct lz_path dir;           /* gen-<N> */
	char name[32];
	int root, root_upper, root_work, anchor, runsc, bundle, sessions, empty;
	int workspace; /* the router's mount point (spec 3.5) */
};

#define LZ_GENDIR_INIT                                                                             \
	{ .dir = LZ_PATH_INIT, .root = -EBADF, .root_upper = -EBADF, .root_work = -EBADF,          \
	  .anchor = -EBADF, .runsc = -EBADF, .bundle = -EBADF, .sessions = -EBADF, .empty = -EBADF,     \
	  .workspace = -EBADF }

/* Creates gen-<generation> and its fixed children beneath the runtime
 * Domain directory; init and resolv.conf are written with their modes.
 * An existing gen-<N> is refused (a stale one is removed first, below). */
int lz_gendir_create(const struct lz_path *runtime_domain, uint64_t generation, const void *init,
		     size_t init_len, const char *resolv_conf, struct lz_gendir *ret, struct lz_err *err);

/* "<gen-N label>/<child>" into out; -ENAMETOOLONG. */
int lz_gendir_label(const struct lz_gendir *g, const char *child, char *out, size_t size);

/* Opens a log beneath the generation for appending (created 0600). */
int lz_gendir_open_log(const struct lz_gendir *g, const char *name, int *ret_fd, struct lz_err *err);

/* Copies the last LZ_RUNDIR_LOG_TAIL bytes of the generation's log name to
 * out_fd between marker lines; a missing log copies nothing. */
void lz_gendir_salvage_log(const struct lz_gendir *g, uint64_t generation, const char *name, int out_fd);

/* Waits up to timeout_ms for the sessions/<name> PID file runsc exec
 * writes once the guest runs (C-REFINEMENT fact 7): the guest leader's PID
 * inside the sandbox, > 0. -ETIMEDOUT. */
int lz_gendir_session_pid(const struct lz_gendir *g, const char *name, int timeout_ms, uint64_t *ret,
			  struct lz_err *err);

/* Takes the Domain flock (hc.lock, created 0600): -EBUSY when another
 * Host Coordinator holds it (spec 3.3: the flock decides the one
 * coordinator). A hold ending within LZ_RUNDIR_LOCK_WAIT_MS (`state list`
 * trying whether the Domain is in use) is waited out. */
#define LZ_RUNDIR_LOCK_WAIT_MS 250
int lz_rundir_lock(const struct lz_path *runtime_domain, int *ret_fd, struct lz_err *err);

/* Closes the descriptors and removes the tree (files a lost RS left owned
 * by namespace IDs are removed from inside a user namespace with the
 * invoking user's map). Accepts an empty gendir; idempotent. */
void lz_gendir_remove(struct lz_gendir *g);

/* The generations whose gen-<N> trees a lost coordinator left beneath the
 * runtime Domain directory (at most max, unordered, max at most INT_MAX);
 * how many, or -errno when the directory cannot be read (never "none").
 * Only the holder of the Domain flock asks: no live HC owns them. */
int lz_rundir_generations(const struct lz_path *runtime_domain, uint64_t *ret, size_t max, struct lz_err *err);

/* Removes gen-<generation> as lz_gendir_remove does, once recovery proved
 * every process of it gone (runtime/leaserecovery.h); err says what
 * stopped it. */
int lz_rundir_remove_generation(const struct lz_path *runtime_domain, uint64_t generation, struct lz_err *err);

/* hc.log past this size is moved to hc.log.1 (one kept) when the next
 * coordinator takes the Domain: what each generation logs is bounded
 * (budgets per generation), and this bounds the generations together in
 * XDG_RUNTIME_DIR, often a small tmpfs. */
#define LZ_RUNDIR_LOG_KEEP (1024 * 1024)
#define LZ_RUNDIR_LOG_OLD "hc.log.1"

/* When log_fd is the Domain's hc.log (same file) and holds more than
 * limit bytes: renames it to hc.log.1 (replacing the one before), makes
 * a new hc.log (0600) and puts it at log_fd. 1 rotated, 0 nothing to do
 * (small, or log_fd is another file), -errno. Flock holder only. */
int lz_rundir_rotate_log(const struct lz_path *runtime_domain, int log_fd, off_t limit, struct lz_err *err);

/* Removes the socket a dead coordinator left (flock holder only). */
void lz_rundir_remove_socket(const struct lz_path *runtime_domain);

#endif
