/* Router internals shared by router.c (session, publish), router_inode.c
 * (inode table, paths, routing) and router_ops.c (the FUSE operations).
 *
 * Inode table. One struct rt_inode per (backing, st_dev, st_ino): the
 * object a lookup found. Its address is the FUSE node ID (FUSE_ROOT_ID
 * maps to the root, the host backing's root). nlookup counts the
 * kernel's references (lookup/create/readdirplus +1, forget -n); nref
 * counts the router's own (a child's parent pointer, a publish walk). An
 * inode is freed when both reach zero.
 *
 * Descriptors. The kernel may hold far more inodes than the process may
 * hold descriptors, so an inode's O_PATH|O_NOFOLLOW descriptor is a cache
 * entry: at most fd_budget are open, the least recently used is closed
 * first, and an evicted one is reopened by name (a directory by its path
 * from its backing's root with openat2 confined, any other object by one
 * component from its parent's directory) and accepted only when it is
 * the same (st_dev, st_ino, type, generation); otherwise the operation
 * fails ESTALE. The generation (a hash of the object's file handle, which
 * carries the filesystem's inode generation) tells an object from a
 * later one that reuses its inode number once it is gone, which only an
 * inode without a descriptor can meet: such an inode found at that
 * number is stale, is found no more, and the new object gets its own.
 * An object with no name left (unlinked by the router, or by the host:
 * link count 0 when its turn to be evicted comes) cannot be reopened, so
 * it keeps its descriptor until the kernel forgets it; a file the host
 * renamed is renamed here too when the watch reports it.
 * Users take an owned duplicate (rt_inode_fd), so eviction never closes
 * a descriptor in use.
 *
 * Paths. Routing needs the workspace-relative path of a name, and a name
 * is always given relative to a directory, so every inode carries its
 * parent (a counted reference) plus name: the name it was last found,
 * created, linked or renamed at (an unlinked name is dropped). Directories
 * have a single name in a backing, so their chain is a tree; rename
 * re-links it.
 * A directory's path is the same in both backings: the merged directory
 * at P is the object the route of P selects, and its children of the
 * other route live in the other backing at P as well (the "other side",
 * opened by path from that backing's root with openat2 confined, never
 * cached, so a rename or a planted symlink cannot make it stale or
 * escape). Creating an isolated child of a host directory creates the
 * missing directories of P in the isolated backing (mode 0755, like
 * mkdir -p). The converse never happens within one snapshot (below an
 * isolated directory all is isolated), so creating a host-routed child of
 * an isolated directory, an inode the kernel held across a publish, is
 * ESTALE: the router never makes a host directory the policy did not
 * check.
 *
 * Lock order (outer first; never take an earlier one while holding a
 * later one):
 *   0. publish_lock, then se_lock: publish only, around the
 *                  invalidation walk (no request handler takes them).
 *  0a. index_gate  rwlock, writer-preferring. Read: an operation that
 *                  changes a file's bytes (write, fallocate, copy range,
 *                  truncation, O_TRUNC open), from its policy check to
 *                  its syscall. Write: a rename of index.lock and index
 *                  (either way, or exchanged), from the index guard's
 *                  read to the renamed object's new name, so no write
 *                  checked under the old name lands after the check.
 *   1. snap_lock   rwlock, writer-preferring. Read: one pathname
 *                  operation (classification plus its backing syscalls),
 *                  so every operation sees exactly one classifier. Write:
 *                  publish's swap.
 *  1a. lockname_lock mutex. Taken with snap_lock held (read) around the
 *                  check of the object at a control file's lock name and
 *                  the unlink or rename that takes it away
 *                  (rt_policy_lock_take); any later lock may be taken
 *                  while it is held.
 *   2. tree_lock   rwlock. Read: walking parent/name chains. Write:
 *                  changing a directory's parent or name (rename, a
 *                  lookup that finds a directory moved behind our back).
 *   3. table_lock  mutex. The hash table, nlookup, nref, freeing.
 *   4. rt_dir.lock mutex. One directory stream's listing.
 *   5. gitdir_lock mutex. Making a Git directory marker name (taken with
 *                  snap_lock held for reading, nothing after it).
 * The classifier is only called under snap_lock (read); no lock is held
 * while replying to the kernel except snap_lock (read) and rt_dir.lock. */
#ifndef LZ_ROUTER_ROUTER_INT_H
#define LZ_ROUTER_ROUTER_INT_H

#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fuse3/fuse_lowlevel.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "router/router.h"

enum rt_backing { RT_HOST = 0, RT_ISOLATED = 1 };

/* Limits on what the sandbox controls. */
#define RT_MAX_INODES (1u << 22)   /* live inodes; lookup fails ENFILE beyond */
#define RT_MAX_DIRENTS (1u << 20)  /* entries of one merged directory listing */
#define RT_MAX_DIRNAMES (64u << 20) /* name bytes of one listing */
#define RT_MADE_LOCKS 64            /* the sandbox's own control-file locks remembered */

struct rt_inode {
	struct rt_inode *hnext; /* hash chain; table_lock */
	int fd;                 /* cached O_PATH|O_NOFOLLOW, owned, or -EBADF; table_lock */
	struct rt_inode *lru_prev, *lru_next; /* while fd is cached; table_lock */
	enum rt_backing backing;
	dev_t dev;
	ino_t ino;
	mode_t type;       /* S_IFMT bits; constant */
	uint64_t gen;      /* rt_object_gen of its object, 0 unknown; constant */
	uint64_t nlookup;  /* table_lock */
	uint64_t nref;     /* table_lock */
	bool unlinked;     /* its object has no name left (link count 0); table_lock */
	bool pinned_linked; /* its name went, another it has is unknown: fd kept (npinned); table_lock */
	bool stale;        /* another object has its inode number now; table_lock */
	struct rt_inode *parent; /* tree_lock (counted in parent->nref); NULL: unnamed */
	char *name;              /* tree_lock; NULL for the root and an unlinked name */
};

struct rt_dirent {
	uint32_t name_off; /* into rt_dir.names */
	uint16_t name_len;
	uint8_t backing;   /* enum rt_backing, or RT_INCONSISTENT_ENT */
	uint8_t dtype;
	uint64_t ino;
};
#define RT_INCONSISTENT_ENT 2

/* One directory stream: the merged listing taken under one snapshot by
 * its first read and by each read from offset 0, with stable offsets
 * (index + 1) in between, and the directories of both sides it was read
 * from (pinned; readdirplus stats relative to them). */
struct rt_dir {
	pthread_mutex_t lock;
	struct rt_inode *inode;
	int fd[2]; /* O_RDONLY|O_DIRECTORY per backing, -EBADF when absent */
	struct rt_dirent *ents;
	size_t n;
	char *names;
	size_t charged; /* bytes of ents and names, in listing_bytes */
	bool listed;    /* read since opendir: n is the listing's length */
	/* ents and names were let go once a read returned the listing's
	 * end: a read past it returns nothing, one before it lists again */
	bool drained;
};

struct lz_router {
	int root_fd[2]; /* O_PATH|O_DIRECTORY, per backing */
	/* The kernel's path of each root (this process's view), read at the
	 * first rt_inode_place; "" until then. table_lock. */
	char root_path[2][PATH_MAX];
	struct rt_inode root;
	struct lz_router_options opt;

	pthread_rwlock_t snap_lock;
	struct lz_router_classifier cls; /* snap_lock */

	pthread_rwlock_t tree_lock;

	pthread_mutex_t table_lock;
	struct rt_inode **buckets;
	size_t nbuckets;
	size_t ninodes;
	struct rt_inode lru; /* list head: lru.lru_next most recent; table_lock */
	size_t nfds;         /* cached descriptors; table_lock */
	size_t npinned;      /* inodes pinned_linked; table_lock */
	size_t fd_budget;
	size_t fd_limit;     /* RLIMIT_NOFILE's soft limit at start */
	atomic_size_t nopen; /* descriptors of open files and directory streams */
	atomic_size_t listing_bytes; /* held by listings being read (max_listing_bytes) */

	bool kernel_open; /* opt.kernel_open and the kernel has it; set at init */
	atomic_bool host_watched; /* lz_router_host_watched */
	/* a publish could not invalidate every cached name: retried in full by
	 * lz_router_retry_invalidation; set and cleared under publish_lock */
	atomic_bool inval_pending;

	struct fuse_session *se; /* set while serving; se_lock */
	char *mountpoint;        /* when mounted by lz_router_serve; se_lock */
	pthread_mutex_t se_lock; /* guards se for publish and stop; before all others */
	pthread_rwlock_t index_gate; /* lock order 0a */
	/* Held around the check and the making of a Git directory's marker
	 * name (rt_policy_new), so two makers cannot both pass the check. */
	pthread_mutex_t gitdir_lock;
	/* Makes the check of a lock name's object and its removal one step
	 * for every remover (rt_policy_lock_take). */
	pthread_mutex_t lockname_lock;
	/* The lock files of control files the sandbox made (rt_policy_lock_*),
	 * the oldest replaced first; made_lock is taken with nothing after it. */
	pthread_mutex_t made_lock;
	struct rt_made {
		dev_t dev;
		ino_t ino;
		uint64_t gen;
	} made[RT_MADE_LOCKS];
	unsigned made_next;
	pthread_mutex_t publish_lock; /* one publish at a time; outermost */
};

/* router_inode.c */
int rt_table_init(struct lz_router *r);
void rt_table_destroy(struct lz_router *r);
struct rt_inode *rt_inode_get(struct lz_router *r, fuse_ino_t ino);
static inline fuse_ino_t rt_nodeid(struct lz_router *r, struct rt_inode *i)
{
	return i == &r->root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)i;
}
/* A hash of the file handle of the object at dfd/name (name "": dfd's
 * own object, not followed), its inode generation included; 0 when the
 * filesystem gives none. */
uint64_t rt_object_gen(int dfd, const char *name);
/* Finds or adds the inode for (b, st) taking over fd (cached, or closed
 * when the inode has one already; -EBADF: opened on first use, and the
 * object is the one at dfd/name), adds one kernel lookup (when count) or
 * one internal ref (when !count), and links it under parent/name.
 * -EPERM, adding nothing, for a host directory marked casefold (the
 * guards compare names bytewise). */
int rt_inode_obtain(struct lz_router *r, int fd, int dfd, enum rt_backing b, const struct stat *st,
		    struct rt_inode *parent, const char *name, bool count, struct rt_inode **ret);
void rt_inode_forget(struct lz_router *r, struct rt_inode *i, uint64_t n);
void rt_inode_unref(struct lz_router *r, struct rt_inode *i);
void rt_inode_ref(struct lz_router *r, struct rt_inode *i);
/* Every inode want selects, each with one internal ref (the caller
 * unrefs each and frees the array); NULL when out of memory. */
struct rt_inode **rt_inode_collect(struct lz_router *r, bool (*want)(const struct rt_inode *),
				   size_t *ret_n);
/* i's name in name and its parent with one internal ref (NULL: the root
 * or an unlinked name). */
struct rt_inode *rt_inode_name(struct lz_router *r, struct rt_inode *i, char name[NAME_MAX + 1]);
/* The inode of the object (b, st's dev, ino and type; type 0: any) of
 * generation gen (0: unknown), with one internal ref, or NULL. */
struct rt_inode *rt_inode_find(struct lz_router *r, enum rt_backing b, const struct stat *st, uint64_t gen);
/* An owned O_PATH descriptor of i's object (see "Descriptors"): -ESTALE
 * when it was evicted and its name no longer holds it. */
int rt_inode_fd(struct lz_router *r, struct rt_inode *i);
/* openat(2) that, when the process is out of descriptors (the sandbox's
 * open files count too), closes half the cached ones and tries once
 * more. */
int rt_openat(struct lz_router *r, int dfd, const char *path, int flags, mode_t mode);
/* Counts descriptors held for the kernel's open files and directory
 * streams (n < 0: released); the cache keeps out of their way. */
void rt_open_count(struct lz_router *r, int n);
/* The name parent/name of the object (b, st) was unlinked (or renamed
 * over). fd (taken over) is an O_PATH descriptor of the object, cached
 * when the inode has none: an unnamed inode cannot be reopened. */
void rt_inode_unname(struct lz_router *r, enum rt_backing b, const struct stat *st,
		     struct rt_inode *parent, const char *name, int fd);
/* Workspace-relative path of directory d ("" for the root) into buf. */
/* 0 when path (i's, from rt_dir_path, len bytes) still names i's object
 * on its backing, -ESTALE when the host moved it or another object is
 * there, or -EMFILE, -ENFILE, -ENOMEM. */
int rt_inode_at(struct lz_router *r, struct rt_inode *i, const char *path, size_t len);
/* Before a change is judged by i's path: 0 when that path (in path,
 * *ret_len bytes) names i's object, moved there first when the host
 * moved it (the kernel's path of its descriptor, below a directory the
 * router holds an inode of); 1
 * when it has no name left (unlinked: nobody's control file); -ESTALE
 * when it cannot be placed (moved out of the served tree, or below a
 * directory the sandbox has not looked up: a .git directory absorbed
 * into .git/modules/), or -EMFILE, -ENFILE, -ENOMEM. */
int rt_inode_place(struct lz_router *r, struct rt_inode *i, char path[PATH_MAX], size_t *ret_len);
int rt_dir_path(struct lz_router *r, struct rt_inode *d, char *buf, size_t cap, size_t *ret_len);
/* path of d + "/" + name (name: one component). */
int rt_child_path(struct lz_router *r, struct rt_inode *d, const char *name, char *buf, size_t cap,
		  size_t *ret_len);
int rt_check_name(const char *name);
/* Re-links i under parent/name (rename, another hard link); -ELOOP,
 * changing nothing, when i is a directory on parent's own chain (moves
 * seen out of order). */
int rt_inode_relink(struct lz_router *r, struct rt_inode *i, struct rt_inode *parent, const char *name);

/* Routing (caller holds snap_lock for reading). */
int rt_route(struct lz_router *r, const char *path, size_t len, bool is_dir, enum lz_route *ret);
/* An owned directory descriptor of backing b for directory d: d's own
 * object or the other side opened by path. With create, missing
 * isolated directories are made, and the host side of an isolated d is
 * -ESTALE (see "Paths"). -ENOENT when absent. */
int rt_side_dir(struct lz_router *r, struct rt_inode *d, enum rt_backing b, bool create);
/* Resolves name in directory d under the current route: the backing
 * whose entry is visible, an O_PATH fd of it and its stat. -ENOENT for a
 * hidden or absent entry, -EIO for an inconsistent one. */
int rt_resolve(struct lz_router *r, struct rt_inode *d, const char *name, enum rt_backing *ret_b,
	       int *ret_fd, struct stat *ret_st);

/* router_index.c: refuses (-EBUSY) the rename of gitdir/index.lock (at
 * lock_fd, O_PATH) over gitdir/index when the new index tracks a path
 * whose only object is isolated. Caller holds snap_lock for reading. */
int rt_index_guard(struct lz_router *r, struct rt_inode *gitdir, int lock_fd);

/* router_policy.c: the workspace policy for host-backed objects
 * (no implicit host authority). All return 0 or -EPERM (or another
 * -errno when the path cannot be computed); callers hold snap_lock for
 * reading. */
/* The mode the sandbox's mode becomes in backing b (no setuid or setgid
 * bit and no write for others on the host). */
mode_t rt_policy_mode(enum rt_backing b, mode_t mode);
/* An ACL (value: its system.posix_acl_* form; is_default: a default
 * ACL) set on an object in backing b: -EPERM when, on the host, it gives
 * write to others, a named user or a named group, or, a default ACL, to
 * the owning group (its group:: or mask:: entry); -EINVAL when it is no
 * ACL. */
int rt_policy_acl_value(enum rt_backing b, bool is_default, const void *value, size_t size);
/* The mode a new entry of guard g (rt_policy_new) is made with in
 * backing b: rt_policy_mode's, and in a host Git directory or a
 * directory holding control files no group or other write, whatever the
 * umasks. */
mode_t rt_policy_new_mode(enum rt_backing b, enum lz_guard g, mode_t mode);
/* chmod of i (ifd: its O_PATH descriptor) to mode: -EPERM when i is a
 * host directory holding Git control files (LZ_GUARD_HOLDS) and mode
 * grants group or other write it does not have now, or sets or clears
 * the sticky bit. Taking permissions away is allowed. Takes snap_lock. */
int rt_policy_chmod(struct lz_router *r, struct rt_inode *i, int ifd, mode_t mode);
/* Setting (set) or removing a POSIX ACL, access or default, of i:
 * -EPERM on a host directory holding Git control files (and a control
 * file), and for setting a default ACL in Git data too (the control
 * files host Git makes below later inherit it). Takes snap_lock. */
int rt_policy_acl(struct lz_router *r, struct rt_inode *i, bool is_default, bool set);
/* chown of host-backed i (ifd: its O_PATH descriptor) to anyone but the
 * developer (0) or its current owner and group: -EPERM. */
int rt_policy_owner(const struct rt_inode *i, int ifd, uid_t uid, gid_t gid);
/* May a host-backed entry at path (of directory dfd, named name) be made?
 * A special entry (a symlink, FIFO, socket or device) is refused wherever
 * the guard protects, holds, or lies inside a known Git directory.
 * *locked: gitdir_lock was taken (the caller releases it with
 * rt_policy_done after making the entry). *ret_guard (unless NULL): the
 * entry's guard, for rt_policy_new_mode. */
int rt_policy_new(struct lz_router *r, const char *path, size_t len, bool is_dir, bool special,
		  int dfd, const char *name, bool *locked, enum lz_guard *ret_guard);
void rt_policy_done(struct lz_router *r, bool locked);
/* -EPERM when host path is a repository's index ("index" right in a Git
 * directory the guard knows): made, renamed, linked or exchanged there
 * only by Git's index.lock rename (router_index.c). Needs snap_lock. */
int rt_policy_index(struct lz_router *r, const char *path, size_t len);
/* May an object of type mode bear name? Not a FIFO or socket named as a
 * file host Git opens in every worktree directory (.gitignore,
 * .gitattributes, .gitmodules, .mailmap): its open would block host Git
 * (and the router's own ignore-rule reads) or fail. -EPERM. */
int rt_policy_name(mode_t mode, const char *name);
/* 1 when the regular file at src_fd (O_PATH) has exactly the bytes of
 * the regular file ddfd/newname, else 0. */
int rt_policy_unchanged(struct lz_router *r, int src_fd, int ddfd, const char *newname);
/* May the host-backed entry at path be removed or renamed away? */
int rt_policy_remove(struct lz_router *r, const char *path, size_t len, bool is_dir);
/* May the host object of type mode now at from be renamed to to? Into a
 * known Git directory, never a special object, nor a directory from
 * outside one (it could bring one along). */
int rt_policy_move_in(struct lz_router *r, const char *from, size_t flen, const char *to, size_t tlen, mode_t mode);
/* May host-backed inode i be written, truncated or re-moded (or linked
 * elsewhere)? Takes snap_lock unless snap_held. */
int rt_policy_inode(struct lz_router *r, struct rt_inode *i, bool snap_held);
/* Git's lock file of a control file (path is <control>.lock, which Git
 * writes and then renames over the control file): 1, 0 or -errno. */
int rt_policy_is_lock(struct lz_router *r, const char *path, size_t len);
/* Records the object at fd (O_PATH) as a lock file the sandbox made. */
void rt_policy_lock_made(struct lz_router *r, int fd);
/* -EPERM when path is a control file's lock and the object at fd is not
 * one the sandbox made (host Git's, between its write and its rename):
 * it is not written, truncated, removed, replaced, moved or linked. */
int rt_policy_lock_owned(struct lz_router *r, const char *path, size_t len, int fd);
/* Before an unlink or rename that takes the object at dfd/name (path)
 * away: when path is a control file's lock, takes lockname_lock (*held;
 * the caller releases it with rt_policy_lock_release after the system
 * call) and checks, under it, that the object now at the name is fd's
 * and one the sandbox made: -EPERM otherwise. */
int rt_policy_lock_take(struct lz_router *r, const char *path, size_t len, int dfd, const char *name,
			int fd, bool *held);
void rt_policy_lock_release(struct lz_router *r, bool held);

/* router_ops.c */
extern const struct fuse_lowlevel_ops rt_ops;
static inline struct lz_router *rt_req_router(fuse_req_t req)
{
	return fuse_req_userdata(req);
}
static inline void rt_procpath(char buf[32], int fd)
{
	snprintf(buf, 32, "/proc/self/fd/%d", fd);
}
void rt_fill_entry(struct lz_router *r, struct rt_inode *i, const struct stat *st,
		   struct fuse_entry_param *e);

/* router_dir.c: merged directory streams. */
/* Calls fn for each name of the directory open at fd (not "." or ".."),
 * with its d_type; stops at fn's first nonzero return and returns it. */
int rt_scan_names(int fd, int (*fn)(void *arg, const char *name, unsigned char dtype, uint64_t ino),
		  void *arg);
/* Opens backing b's directory at d's path for reading, -ENOENT when the
 * side is absent or not a directory. */
int rt_open_side_rd(struct lz_router *r, struct rt_inode *d, enum rt_backing b, const char *path,
		    size_t len);
/* Whether the other side of directory (path, backing b) holds an entry
 * its route shows (ENOTEMPTY for rmdir, EXDEV for rename). */
int rt_other_side_visible(struct lz_router *r, enum rt_backing b, const char *path, size_t len,
			  bool *ret);
void rt_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void rt_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void rt_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi);
void rt_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void rt_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);

static inline void rt_rdlock_snap(struct lz_router *r)
{
	pthread_rwlock_rdlock(&r->snap_lock);
}
static inline void rt_unlock_snap(struct lz_router *r)
{
	pthread_rwlock_unlock(&r->snap_lock);
}

static inline enum rt_backing rt_backing_of(enum lz_route route)
{
	return route == LZ_ROUTE_ISOLATED ? RT_ISOLATED : RT_HOST;
}

/* Whether an open in a backing failed (errno e) because nothing is there
 * (a missing name or directory, a symlink on the way), not for want of
 * descriptors or memory, which must never read as absence. */
static inline bool rt_absent(int e)
{
	return e == ENOENT || e == ENOTDIR || e == ELOOP;
}

#endif
