/* The Ignored Workspace State router (spec 3.5 "Ignored Workspace State
 * routing contract"): a FUSE filesystem (libfuse3 low-level API) that
 * presents one workspace tree merged from two backings held as retained
 * directory descriptors, the canonical workspace ("host") and the Domain's
 * Ignored Workspace State ("isolated").
 *
 * Every pathname operation asks the classifier for the route of the
 * workspace-relative path and acts in exactly one backing; an entry the
 * current route does not select is hidden (absent from lookup and
 * enumeration) but never deleted or copied. Cross-backing rename, exchange
 * and hard link fail with EXDEV before any change. A backing symlink is
 * never followed while routing: every object is reached from its parent's
 * O_PATH|O_NOFOLLOW descriptor by a single component, and paths of more
 * than one component are resolved with openat2(RESOLVE_BENEATH|
 * RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS) from a backing root.
 *
 * Threat: the sandbox controls names, contents and the shape of both
 * backings (it can plant symlinks and swap directories while the router
 * works). Nothing it does may make the router touch an object outside the
 * two backings, expose a hidden host object, or place bytes in the backing
 * the route did not select. The design notes (inode table, lock order,
 * invalidation) are in router_int.h. */
#ifndef LZ_ROUTER_ROUTER_H
#define LZ_ROUTER_ROUTER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "router/ignoreclass.h"
#include "util/err.h"

typedef struct lz_router lz_router;

/* The classification interface. route() has lz_ignoreclass_route's
 * contract (workspace-relative bytes, no leading '/', "" is the root) and
 * must be safe to call from several threads at once; it must not block
 * on the router. release() (may be NULL) is called exactly once, when
 * the router no longer uses ctx: after a publish replaced it (no pathname
 * operation can still be using it) or when the router is freed. */
struct lz_router_classifier {
	int (*route)(void *ctx, const char *path, size_t len, bool is_dir, enum lz_route *ret);
	/* lz_ignoreclass_guard's contract, for host-backed paths; NULL:
	 * nothing guarded. */
	int (*guard)(void *ctx, const char *path, size_t len, bool is_dir, enum lz_guard *ret);
	/* lz_ignoreclass_index_root's contract; NULL: a worktree's own
	 * ".git" directory governs its parent, nothing else is known. */
	int (*index_root)(void *ctx, const char *gitdir, size_t len, char *root, size_t cap, size_t *ret_len);
	void (*release)(void *ctx);
	void *ctx;
};

/* Wraps an lz_ignoreclass snapshot (router_classify.c). Takes over the
 * caller's reference to snap: released with lz_ignoreclass_unref. */
struct lz_router_classifier lz_router_classifier_ignoreclass(lz_ignoreclass *snap);

struct lz_router_options {
	/* Kernel cache lifetimes in seconds. Route changes are made visible
	 * by lz_router_publish's invalidation, so these bound only how long
	 * a change made directly in a backing (a host tool editing the
	 * workspace) may stay unseen. */
	double entry_timeout;
	double attr_timeout;
	double negative_timeout;
	/* The same three for objects and names of the isolated backing. Only
	 * this router changes that backing (the Domain lock admits one
	 * coordinator, hence one router), so the kernel has seen every change
	 * there, and publication invalidates every name whose route changes:
	 * they can be long. */
	double isolated_timeout;
	/* The same for host-backed objects and entries while a watch reports
	 * every change of the host backing (lz_router_host_watched): each
	 * reported change invalidates what the kernel cached of that name,
	 * so only a change the watch cannot see (through a hard link from
	 * outside the workspace) stays unseen, for at most this long.
	 * Negative entries of host-backed names keep negative_timeout. */
	double watched_timeout;
	/* Keep the page cache across opens (FOPEN_KEEP_CACHE) with
	 * FUSE_CAP_AUTO_INVAL_DATA dropping it when mtime or size changes. */
	bool keep_cache;
	/* Let the kernel open regular files without asking
	 * (FUSE_CAP_NO_OPEN_SUPPORT, where the kernel has it): I/O then
	 * names only the inode and is served through the object's own
	 * descriptor. Saves the OPEN and RELEASE round trips that runsc pays
	 * for every file it looks up (it opens each one). */
	bool kernel_open;
	/* Kernel write-back caching. Off by default: with it the kernel
	 * owns mtime and size, delays writes past close, and turns
	 * O_APPEND and concurrent host writers into lost updates. */
	bool writeback_cache;
	bool allow_other;         /* mount option; the gofer may run as another ID */
	bool default_permissions; /* the kernel checks modes and ACLs against the caller */
	unsigned max_threads;     /* worker threads of the multithreaded loop; 0: 8 */
	/* O_PATH descriptors kept open for inodes the kernel holds; others
	 * are reopened by name on use. 0: a quarter of the RLIMIT_NOFILE soft
	 * limit (runsc keeps a descriptor of ours open per file it caches). */
	unsigned max_cached_fds;
	/* Memory the directory listings being read may hold at once, all
	 * streams together (a listing is kept from a read at offset 0 to
	 * the read that returns its end); past it a read that would list
	 * answers ENOMEM. 0: LZ_ROUTER_LISTINGS_MAX. */
	size_t max_listing_bytes;
	/* The largest new index (index.lock) the guard reads (gitindex.h:
	 * in fixed memory, but the rename holds off every write while it
	 * reads). Larger ones are refused EFBIG. 0: LZ_ROUTER_INDEX_MAX. */
	size_t max_index_bytes;
	bool debug;               /* libfuse's request trace on stderr */
	bool handle_signals;      /* libfuse's SIGINT/SIGTERM/SIGHUP handlers end the loop */
};

/* 256 MiB: five times the index of a checkout of Chromium (about 400,000
 * files), the snapshot's own bound of 2^22 paths at 64 bytes each. */
#define LZ_ROUTER_INDEX_MAX ((size_t)256 << 20)
/* 256 MiB: four listings of a directory of a million entries. */
#define LZ_ROUTER_LISTINGS_MAX ((size_t)256 << 20)
/* Defaults: 1 s timeouts, keep_cache, no write-back cache,
 * default_permissions, no allow_other, 8 threads. */
void lz_router_options_default(struct lz_router_options *opt);

/* A router over the two backing directories. Both descriptors are
 * borrowed (the router keeps its own O_PATH duplicates). The classifier
 * is taken over (released on failure too). */
int lz_router_new(int host_fd, int isolated_fd, struct lz_router_classifier cls,
		  const struct lz_router_options *opt, lz_router **ret, struct lz_err *err);

/* Mounts (when mountpoint is set: fuse_session_mount, which needs to be
 * (namespace) root or fusermount3) or adopts an open /dev/fuse descriptor
 * whose mount the caller already made (fuse_fd >= 0, mountpoint NULL;
 * taken over), then serves requests with the multithreaded loop until the
 * filesystem is unmounted, lz_router_stop is called, or a signal handled
 * by libfuse's handlers ends the session. Returns 0 after a clean end. */
int lz_router_serve(lz_router *r, const char *mountpoint, int fuse_fd, struct lz_err *err);

/* Installs a new classification (taken over) for every later pathname
 * operation: waits for the pathname operations in flight, swaps, releases
 * the old classifier, then invalidates the kernel's cached entries whose
 * route differs between the two (names present in either backing under
 * every directory the kernel holds). Open handles and directory streams
 * keep the objects they were opened on. Callable from any thread other
 * than a request handler, while serving or not. */
int lz_router_publish(lz_router *r, struct lz_router_classifier cls);

/* The route the classification in place gives path (workspace-relative,
 * no leading slash): what the next lookup of it would use (tests and
 * diagnostics). */
int lz_router_route(lz_router *r, const char *path, size_t len, bool is_dir, enum lz_route *ret);

/* When a publish ran out of descriptors or memory before it had visited
 * every directory, some cached entries may still carry the old routes:
 * this drops every name the kernel caches, if it can now. Returns 1 while
 * that stays to do (call again later), 0 when nothing does. Same threads
 * as lz_router_publish. */
int lz_router_retry_invalidation(lz_router *r);

/* Whether a watch reports every change under the host backing (the
 * ignore watch does while it watches every directory). Turning it off
 * invalidates every host-backed entry and attribute the kernel caches. */
void lz_router_host_watched(lz_router *r, bool complete);

/* A change the watch saw: the entry name of the host directory
 * (dir_dev, dir_ino) was created, removed or renamed, or (attrs_only)
 * the object at it was written or had its attributes changed. Drops
 * what the kernel cached of it. */
void lz_router_host_changed(lz_router *r, dev_t dir_dev, ino_t dir_ino, const char *name,
			    bool attrs_only);

/* Ends the session loop from another thread (the mount is left to the
 * caller, who unmounts it). */
void lz_router_stop(lz_router *r);

/* Accepts NULL. Must not be called while lz_router_serve runs. */
void lz_router_free(lz_router *r);

/* A line of the router's in hc.log (its standard error), after
 * "lazaret-router: ": the first LZ_ROUTER_LOG_LINES of the process, then
 * one saying the rest are not logged. The sandbox can make some recur (a
 * rebuild failing and recovering, descriptors exhausted), and hc.log lies
 * in XDG_RUNTIME_DIR, which every launch needs room in. */
#define LZ_ROUTER_LOG_LINES 64
void lz_router_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
