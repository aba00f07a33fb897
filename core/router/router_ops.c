/* The router's FUSE operations (spec 3.5), libfuse3 low-level API.
 *
 * Every handler replies exactly once: it computes an rc (0 or -errno)
 * and the one reply is at its end. Pathname operations (those naming an
 * entry of a directory) run under snap_lock (read) so the route and the
 * backing syscalls see one classifier; operations on an inode or an open
 * handle need no route: the object was chosen when it was looked up or
 * opened, which is what pins handles to their backing object across a
 * publish. Objects are reached only through O_PATH|O_NOFOLLOW descriptors
 * by one component, or through /proc/self/fd/N of such a descriptor (for
 * open, xattrs, chmod: the magic link names the object itself and is
 * never a backing symlink's target). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "router/router_int.h"
#include "util/cleanup.h"

/* An open file's handle is its backing descriptor + 1: 0 is the handle
 * of a file the kernel opened without asking (kernel_open). */
static uint64_t fh_of(int fd)
{
	return (uint64_t)fd + 1;
}

static int fd_of(const struct fuse_file_info *fi)
{
	return fi != NULL && fi->fh != 0 ? (int)(fi->fh - 1) : -EBADF;
}

/* The descriptor for I/O on ino's object: the open file's own, else
 * (kernel_open) the object opened now through its O_PATH descriptor with
 * the given flags, in *owned for the caller to close. Never follows: the
 * magic link names the object, and only regular files get here. */
static int io_fd(struct lz_router *r, fuse_ino_t ino, const struct fuse_file_info *fi, int flags,
		 int *owned)
{
	*owned = -EBADF;
	int fd = fd_of(fi);
	struct rt_inode *i = rt_inode_get(r, ino);
	/* Writes to a guarded file fail whoever opened it (a kernel-opened
	 * file was never asked about). */
	int rc = (flags & O_ACCMODE) != O_RDONLY ? rt_policy_inode(r, i, false) : 0;
	if (rc < 0)
		return rc;
	if (fd >= 0)
		return fd;
	if (!S_ISREG(i->type))
		return -EBADF;
	_cleanup_close_ int pfd = rt_inode_fd(r, i);
	if (pfd < 0)
		return pfd;
	char proc[32];
	rt_procpath(proc, pfd);
	fd = rt_openat(r, AT_FDCWD, proc, flags | O_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	return *owned = fd;
}

/* How long the kernel may cache i's entry or attributes: long for the
 * isolated backing, and for the host backing while a watch reports its
 * changes (lz_router_host_changed), else host (entry_timeout or
 * attr_timeout). */
static double cache_timeout(struct lz_router *r, const struct rt_inode *i, double host)
{
	if (i->backing == RT_ISOLATED)
		return r->opt.isolated_timeout;
	return atomic_load(&r->host_watched) ? r->opt.watched_timeout : host;
}

static double rt_attr_timeout(struct lz_router *r, const struct rt_inode *i)
{
	return cache_timeout(r, i, r->opt.attr_timeout);
}

void rt_fill_entry(struct lz_router *r, struct rt_inode *i, const struct stat *st,
		   struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = rt_nodeid(r, i);
	e->generation = 0;
	e->attr = *st;
	e->attr_timeout = rt_attr_timeout(r, i);
	e->entry_timeout = cache_timeout(r, i, r->opt.entry_timeout);
}

static void reply_entry_or_err(fuse_req_t req, int rc, const struct fuse_entry_param *e)
{
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, e);
}

/* ---- lookup and forget ------------------------------------------------ */

/* Resolves and counts one kernel reference. Caller holds snap_lock. */
static int do_lookup(struct lz_router *r, struct rt_inode *d, const char *name,
		     struct fuse_entry_param *e)
{
	enum rt_backing b;
	int fd;
	struct stat st;
	if (!S_ISDIR(d->type))
		return -ENOTDIR;
	int rc = rt_resolve(r, d, name, &b, &fd, &st);
	if (rc < 0)
		return rc;
	struct rt_inode *i;
	rc = rt_inode_obtain(r, fd, -EBADF, b, &st, d, name, true, &i);
	if (rc < 0)
		return rc;
	rt_fill_entry(r, i, &st, e);
	return 0;
}

/* How long the kernel may cache that name is absent in d: long when
 * every object at it would be isolated (only this router creates
 * those, and the kernel sees it do so). Caller holds snap_lock. */
static double negative_timeout(struct lz_router *r, struct rt_inode *d, const char *name)
{
	char path[PATH_MAX];
	size_t len;
	enum lz_route rf, rd;
	if (rt_child_path(r, d, name, path, sizeof(path), &len) == 0 &&
	    rt_route(r, path, len, false, &rf) == 0 && rt_route(r, path, len, true, &rd) == 0 &&
	    rf == LZ_ROUTE_ISOLATED && rd == LZ_ROUTE_ISOLATED)
		return r->opt.isolated_timeout;
	return r->opt.negative_timeout;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct lz_router *r = rt_req_router(req);
	struct rt_inode *d = rt_inode_get(r, parent);
	struct fuse_entry_param e;
	rt_rdlock_snap(r);
	int rc = do_lookup(r, d, name, &e);
	double neg = rc == -ENOENT && r->opt.negative_timeout > 0 ? negative_timeout(r, d, name) : 0;
	rt_unlock_snap(r);
	if (neg > 0) {
		/* A cached negative entry: publish invalidates it when the
		 * name's route changes (router.c). */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = neg;
		fuse_reply_entry(req, &e);
		return;
	}
	reply_entry_or_err(req, rc, &e);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct lz_router *r = rt_req_router(req);
	rt_inode_forget(r, rt_inode_get(r, ino), nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct lz_router *r = rt_req_router(req);
	for (size_t k = 0; k < count; k++)
		rt_inode_forget(r, rt_inode_get(r, forgets[k].ino), forgets[k].nlookup);
	fuse_reply_none(req);
}

/* ---- attributes ---------------------------------------------------------- */

/* The attributes of i's object: through the open file when there is
 * one (an unlinked file's included), else its O_PATH descriptor. */
static int stat_inode(struct lz_router *r, struct rt_inode *i, struct fuse_file_info *fi,
		      struct stat *st)
{
	if (fd_of(fi) >= 0)
		return fstat(fd_of(fi), st) < 0 ? -errno : 0;
	_cleanup_close_ int fd = rt_inode_fd(r, i);
	if (fd < 0)
		return fd;
	return fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct lz_router *r = rt_req_router(req);
	struct rt_inode *i = rt_inode_get(r, ino);
	struct stat st;
	int rc = stat_inode(r, i, fi, &st);
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, rt_attr_timeout(r, i));
}

/* chmod, chown (passed through: IDs the router's user namespace does not
 * map fail with the backing's EINVAL), truncate, and nanosecond times. */
static int do_setattr(struct rt_inode *i, int ifd, const struct stat *attr, int valid,
		      struct fuse_file_info *fi)
{
	char proc[32];
	rt_procpath(proc, ifd);
	if (valid & FUSE_SET_ATTR_MODE) {
		mode_t mode = rt_policy_mode(i->backing, attr->st_mode);
		int rc = fd_of(fi) >= 0 ? fchmod(fd_of(fi), mode) : chmod(proc, mode);
		if (rc < 0)
			return -errno;
	}
	if (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		uid_t uid = (valid & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
		gid_t gid = (valid & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;
		int rc = rt_policy_owner(i, ifd, uid, gid);
		if (rc < 0)
			return rc;
		if (fchownat(ifd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
	}
	if (valid & FUSE_SET_ATTR_SIZE) {
		if (!S_ISREG(i->type))
			return S_ISDIR(i->type) ? -EISDIR : -EINVAL;
		int rc = fd_of(fi) >= 0 ? ftruncate(fd_of(fi), attr->st_size) : truncate(proc, attr->st_size);
		if (rc < 0)
			return -errno;
	}
	if (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
		struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT } };
		if (valid & FUSE_SET_ATTR_ATIME_NOW)
			ts[0].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_ATIME)
			ts[0] = attr->st_atim;
		if (valid & FUSE_SET_ATTR_MTIME_NOW)
			ts[1].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_MTIME)
			ts[1] = attr->st_mtim;
		int rc = fd_of(fi) >= 0 ? futimens(fd_of(fi), ts)
			    : utimensat(ifd, "", ts, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
		if (rc < 0)
			return -errno;
	}
	return 0;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
		       struct fuse_file_info *fi)
{
	struct lz_router *r = rt_req_router(req);
	struct rt_inode *i = rt_inode_get(r, ino);
	_cleanup_close_ int ifd = rt_inode_fd(r, i);
	int rc = ifd < 0 ? ifd : 0;
	bool sized = valid & FUSE_SET_ATTR_SIZE;
	if (sized)
		pthread_rwlock_rdlock(&r->index_gate);
	if (rc == 0 && (valid & (FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID |
				 FUSE_SET_ATTR_GID)))
		rc = rt_policy_inode(r, i, false);
	/* chmod and fchmod both arrive here (fchmod without the handle) */
	if (rc == 0 && (valid & FUSE_SET_ATTR_MODE))
		rc = rt_policy_chmod(r, i, ifd, attr->st_mode);
	if (rc == 0)
		rc = do_setattr(i, ifd, attr, valid, fi);
	if (sized)
		pthread_rwlock_unlock(&r->index_gate);
	struct stat st;
	if (rc == 0 && fstatat(ifd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, rt_attr_timeout(r, i));
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct lz_router *r = rt_req_router(req);
	char buf[PATH_MAX + 1];
	_cleanup_close_ int fd = rt_inode_fd(r, rt_inode_get(r, ino));
	ssize_t n = fd < 0 ? (errno = -fd, -1) : readlinkat(fd, "", buf, sizeof(buf));
	if (n < 0)
		fuse_reply_err(req, errno);
	else if (n == (ssize_t)sizeof(buf))
		fuse_reply_err(req, ENAMETOOLONG);
	else {
		buf[n] = '\0';
		fuse_reply_readlink(req, buf);
	}
}

/* ---- creating entries ---------------------------------------------------- */

struct make_args {
	int kind; /* 0 mknod, 1 mkdir, 2 symlink */
	mode_t mode;
	const char *link;
};

static int make_one(int dfd, const char *name, const struct make_args *a)
{
	int rc;
	switch (a->kind) {
	case 0:
		rc = mknodat(dfd, name, a->mode, 0);
		break;
	case 1:
		rc = mkdirat(dfd, name, a->mode);
		break;
	default:
		rc = symlinkat(a->link, dfd, name);
		break;
	}
	return rc < 0 ? -errno : 0;
}

/* Before a change in directory d is judged by d's path: a host-backed d
 * is placed where the host has it now (rt_inode_place; a .git directory
 * it absorbed into .git/modules/ is judged there, or refuses: ESTALE). */
static int place_dir(struct lz_router *r, struct rt_inode *d)
{
	if (d->backing != RT_HOST)
		return 0;
	char path[PATH_MAX];
	size_t len;
	int rc = rt_inode_place(r, d, path, &len);
	return rc == 1 ? 0 : rc; /* removed: what is made in it fails by itself */
}

/* The backing the current route gives name in directory d (an object of
 * the given type); -EIO for an inconsistent path. */
static int child_backing(struct lz_router *r, struct rt_inode *d, const char *name, bool is_dir,
			 enum rt_backing *ret_b, char path[PATH_MAX], size_t *ret_len)
{
	size_t len;
	enum lz_route route;
	int rc = rt_child_path(r, d, name, path, PATH_MAX, &len);
	if (rc < 0 || (rc = rt_route(r, path, len, is_dir, &route)) < 0)
		return rc;
	if (route == LZ_ROUTE_INCONSISTENT)
		return -EIO;
	*ret_b = rt_backing_of(route);
	*ret_len = len;
	return 0;
}

/* The backing's directory for a new entry name of d with the given type:
 * routes, refuses an inconsistent path, makes the missing directories,
 * and applies the policy for host-backed entries (*locked: release with
 * rt_policy_done once the entry is made; *ret_lock: the name is a
 * control file's lock, see rt_policy_lock_owned; *ret_guard: its guard,
 * for rt_policy_new_mode). */
static int new_entry_dir(struct lz_router *r, struct rt_inode *d, const char *name, bool is_dir,
			 bool special, enum rt_backing *ret_b, bool *locked, bool *ret_lock,
			 enum lz_guard *ret_guard)
{
	char path[PATH_MAX];
	size_t len = 0;
	*locked = false;
	*ret_lock = false;
	*ret_guard = LZ_GUARD_NONE;
	if (!S_ISDIR(d->type))
		return -ENOTDIR;
	int rc = place_dir(r, d);
	if (rc == 0)
		rc = child_backing(r, d, name, is_dir, ret_b, path, &len);
	if (rc < 0)
		return rc;
	int dfd = rt_side_dir(r, d, *ret_b, true);
	if (dfd >= 0 && *ret_b == RT_HOST &&
	    ((rc = rt_policy_is_lock(r, path, len)) < 0 ||
	     (*ret_lock = rc == 1, rc = rt_policy_index(r, path, len)) < 0 ||
	     (rc = rt_policy_new(r, path, len, is_dir, special, dfd, name, locked, ret_guard)) < 0)) {
		close(dfd);
		return rc;
	}
	return dfd;
}

/* The entry just made (or linked) at dfd/name becomes an inode of d
 * (made_lock: a control file's lock the sandbox made, remembered). */
static int adopt_new(struct lz_router *r, struct rt_inode *d, enum rt_backing b, int dfd,
		     const char *name, bool made_lock, struct fuse_entry_param *e)
{
	int fd = rt_openat(r, dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (made_lock)
		rt_policy_lock_made(r, fd);
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	struct rt_inode *i;
	int rc = rt_inode_obtain(r, fd, -EBADF, b, &st, d, name, true, &i);
	if (rc == 0)
		rt_fill_entry(r, i, &st, e);
	return rc;
}

static void make_entry(fuse_req_t req, fuse_ino_t parent, const char *name,
		       const struct make_args *a)
{
	struct lz_router *r = rt_req_router(req);
	struct rt_inode *d = rt_inode_get(r, parent);
	struct fuse_entry_param e;
	enum rt_backing b;
	enum lz_guard g;
	bool locked, lock;
	rt_rdlock_snap(r);
	/* special: a symlink, or a node other than a regular file */
	bool special = a->kind == 2 || (a->kind == 0 && !S_ISREG(a->mode) && (a->mode & S_IFMT) != 0);
	_cleanup_close_ int dfd = new_entry_dir(r, d, name, a->kind == 1, special, &b, &locked, &lock, &g);
	int rc = dfd < 0 ? dfd : 0;
	if (rc == 0) {
		struct make_args pa = *a;
		pa.mode = rt_policy_new_mode(b, g, a->mode);
		rc = make_one(dfd, name, &pa);
	}
	rt_policy_done(r, locked);
	if (rc == 0)
		rc = adopt_new(r, d, b, dfd, name, lock && a->kind == 0, &e);
	rt_unlock_snap(r);
	reply_entry_or_err(req, rc, &e);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	(void)rdev;
	/* Devices are refused (spec 3.5), whiteouts (0/0) included; regular
	 * files, FIFOs and sockets are made with no device number. */
	if (!S_ISREG(mode) && !S_ISFIFO(mode) && !S_ISSOCK(mode)) {
		fuse_reply_err(req, S_ISCHR(mode) || S_ISBLK(mode) ? EPERM : EINVAL);
		return;
	}
	if (rt_policy_name(mode, name) < 0) {
		fuse_reply_err(req, EPERM);
		return;
	}
	struct make_args a = { .kind = 0, .mode = mode };
	make_entry(req, parent, name, &a);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct make_args a = { .kind = 1, .mode = mode };
	make_entry(req, parent, name, &a);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct make_args a = { .kind = 2, .link = link };
	make_entry(req, parent, name, &a);
}

static int open_flags(struct lz_router *r, int flags)
{
	flags &= ~(O_NOFOLLOW | O_CREAT | O_EXCL | O_NOCTTY);
	if (r->opt.writeback_cache) {
		/* The kernel reads to fill pages of write-only files, and
		 * appends itself (with the size it caches). */
		if ((flags & O_ACCMODE) == O_WRONLY)
			flags = (flags & ~O_ACCMODE) | O_RDWR;
		flags &= ~O_APPEND;
	}
	return flags | O_CLOEXEC;
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct lz_router *r = rt_req_router(req);
	struct rt_inode *d = rt_inode_get(r, parent);
	struct fuse_entry_param e;
	enum rt_backing b;
	_cleanup_close_ int fd = -EBADF;
	enum lz_guard g;
	bool locked, lock;
	rt_rdlock_snap(r);
	_cleanup_close_ int dfd = new_entry_dir(r, d, name, false, false, &b, &locked, &lock, &g);
	int rc = dfd < 0 ? dfd : 0;
	if (rc == 0) {
		/* O_NOFOLLOW: a symlink planted at the name fails, it is not
		 * followed into creating its target. A control file's lock is
		 * made, never opened: one that appeared since the kernel's
		 * lookup is host Git's. */
		int fl = open_flags(r, fi->flags) | O_CREAT | (fi->flags & O_EXCL) | O_NOFOLLOW |
			 (lock ? O_EXCL : 0);
		fd = rt_openat(r, dfd, name, fl, rt_policy_new_mode(b, g, mode));
		if (fd < 0)
			rc = errno == EEXIST && lock && !(fi->flags & O_EXCL) ? -EPERM : -errno;
	}
	rt_policy_done(r, locked);
	if (rc == 0)
		rc = adopt_new(r, d, b, dfd, name, lock, &e);
	if (rc == 0) {
		struct stat a;
		/* the object opened is the object adopted (no swap between) */
		if (fstat(fd, &a) < 0 || a.st_ino != e.attr.st_ino || a.st_dev != e.attr.st_dev) {
			rt_inode_forget(r, rt_inode_get(r, e.ino), 1);
			rc = -EAGAIN;
		}
	}
	rt_unlock_snap(r);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	fi->keep_cache = r->opt.keep_cache;
	if (r->kernel_open) {
		/* The kernel sends no RELEASE for a file it has opened itself,
		 * created ones included: hold nothing (fd closes here); I/O
		 * goes through io_fd like every other kernel-opened file. */
		fi->fh = 0;
		(void)fuse_reply_create(req, &e, fi);
		return;
	}
	fi->fh = fh_of(fd);
	rt_open_count(r, 1); /* before the reply: RELEASE may follow at once */
	if (fuse_reply_create(req, &e, fi) == 0)
		fd = -EBADF; /* the handle's now */
	else
		rt_open_count(r, -1);
}

/* ---- removing, renaming, linking -------------------------------------- */

static void remove_entry(fuse_req_t req, fuse_ino_t parent, const char *name, bool dir)
{
	struct lz_router *r = rt_req_router(req);
	struct rt_inode *d = rt_inode_get(r, parent);
	enum rt_backing b;
	_cleanup_close_ int fd = -EBADF, dfd = -EBADF;
	struct stat st;
	rt_rdlock_snap(r);
	int rc = !S_ISDIR(d->type) ? -ENOTDIR : place_dir(r, d);
	if (rc == 0)
		rc = rt_resolve(r, d, name, &b, &fd, &st);
	if (rc == 0 && dir && !S_ISDIR(st.st_mode))
		rc = -ENOTDIR;
	if (rc == 0 && !dir && S_ISDIR(st.st_mode))
		rc = -EISDIR;
	char path[PATH_MAX];
	size_t len;
	if (rc == 0)
		rc = rt_child_path(r, d, name, path, sizeof(path), &len);
	if (rc == 0 && b == RT_HOST)
		rc = rt_policy_remove(r, path, len, dir);
	if (rc == 0 && dir) {
		/* Entries the other side shows make the merged directory
		 * non-empty; hidden ones are retained and do not count. */
		bool visible = false;
		rc = rt_other_side_visible(r, b, path, len, &visible);
		if (rc == 0 && visible)
			rc = -ENOTEMPTY;
	}
	if (rc == 0 && (dfd = rt_side_dir(r, d, b, false)) < 0)
		rc = dfd;
	/* A control file's lock: only the sandbox's own, checked at the name
	 * and unlinked in one step (router_policy.c). */
	bool held = false;
	if (rc == 0 && b == RT_HOST && !dir)
		rc = rt_policy_lock_take(r, path, len, dfd, name, fd, &held);
	if (rc == 0 && unlinkat(dfd, name, dir ? AT_REMOVEDIR : 0) < 0)
		rc = -errno;
	rt_policy_lock_release(r, held);
	if (rc == 0)
		rt_inode_unname(r, b, &st, d, name, TAKE_FD(fd));
	rt_unlock_snap(r);
	fuse_reply_err(req, -rc);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, false);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, true);
}

/* A directory moved within its backing must not leave entries of the
 * other route behind at its old path (they would silently vanish from
 * the view): such a move is cross-backing, EXDEV. */
static int check_dir_move(struct lz_router *r, struct rt_inode *d, const char *name,
			  enum rt_backing b, const struct stat *st)
{
	if (!S_ISDIR(st->st_mode))
		return 0;
	char path[PATH_MAX];
	size_t len;
	bool visible = false;
	int rc = rt_child_path(r, d, name, path, sizeof(path), &len);
	if (rc == 0)
		rc = rt_other_side_visible(r, b, path, len, &visible);
	return rc < 0 ? rc : visible ? -EXDEV : 0;
}

/* The lock-name rules of a host rename (router_policy.c): no exchange
 * with a lock name; a rename onto one never replaces (RENAME_NOREPLACE
 * added to *flags) and brings no object that has another name. 1 when
 * the destination is a lock name, 0 when not, or -errno. */
static int rename_lock_names(struct lz_router *r, const char *spath, size_t slen, const char *dpath,
			     size_t dlen, int sfd, unsigned *flags)
{
	int dlock = rt_policy_is_lock(r, dpath, dlen);
	if (dlock < 0)
		return dlock;
	if (*flags & RENAME_EXCHANGE) {
		int slock = rt_policy_is_lock(r, spath, slen);
		return slock < 0 ? slock : dlock || slock ? -EPERM : 0;
	}
	if (dlock == 0)
		return 0;
	struct stat st;
	if (fstat(sfd, &st) < 0)
		return -errno;
	if (st.st_nlink > 1)
		return -EPERM;
	*flags |= RENAME_NOREPLACE;
	return 1;
}

/* RENAME_EXCHANGE also makes the destination's object (mode) arrive at
 * the source's name (path, directory dfd): it passes what making it
 * there would (rt_policy_new), so no symlink, FIFO or socket takes the
 * place of a directory on the way to a control file (the guard asks
 * about a special object as about a directory: host tools follow a
 * symlink). Neither name is new, so the Git-directory marker check holds
 * nothing to keep: its lock is released at once (the destination's
 * rt_policy_new may take it next). */
static int exchange_arrives(struct lz_router *r, const char *path, size_t len, mode_t mode, int dfd,
			    const char *name, bool index_swap)
{
	bool dir = S_ISDIR(mode), locked = false;
	int rc = index_swap ? 0 : rt_policy_index(r, path, len);
	if (rc == 0)
		rc = rt_policy_new(r, path, len, dir, !dir && !S_ISREG(mode), dfd, name, &locked, NULL);
	rt_policy_done(r, locked);
	return rc;
}

/* Which object of a rename is Git's index.lock arriving at index, by name
 * (the index guard's case, router_index.c): 1 the source, 2 the
 * destination (an exchange the other way round), 0 neither. */
static int index_swap_side(const char *name, const char *newname, unsigned flags)
{
	if (strcmp(name, "index.lock") == 0 && strcmp(newname, "index") == 0)
		return 1;
	if ((flags & RENAME_EXCHANGE) && strcmp(name, "index") == 0 && strcmp(newname, "index.lock") == 0)
		return 2;
	return 0;
}

static int do_rename(struct lz_router *r, struct rt_inode *d, const char *name, struct rt_inode *nd,
		     const char *newname, unsigned flags)
{
	enum rt_backing sb, db, xb = RT_HOST;
	_cleanup_close_ int sfd = -EBADF, xfd = -EBADF, sdfd = -EBADF, ddfd = -EBADF;
	struct stat sst, xst;
	if (!S_ISDIR(d->type) || !S_ISDIR(nd->type))
		return -ENOTDIR;
	char spath[PATH_MAX], dpath[PATH_MAX];
	size_t slen, dlen;
	int rc = place_dir(r, d);
	if (rc == 0 && (rc = place_dir(r, nd)) == 0)
		rc = rt_resolve(r, d, name, &sb, &sfd, &sst);
	if (rc < 0)
		return rc;
	bool sdir = S_ISDIR(sst.st_mode);
	/* the destination's route, for the object that would be there */
	if ((rc = child_backing(r, nd, newname, sdir, &db, dpath, &dlen)) < 0)
		return rc;
	if (db != sb)
		return -EXDEV;
	if (flags & RENAME_EXCHANGE) {
		rc = rt_resolve(r, nd, newname, &xb, &xfd, &xst);
		if (rc < 0)
			return rc;
		if ((rc = child_backing(r, d, name, S_ISDIR(xst.st_mode), &db, spath, &slen)) < 0)
			return rc;
		if (xb != sb || db != sb)
			return -EXDEV;
		if ((rc = check_dir_move(r, nd, newname, xb, &xst)) < 0)
			return rc;
		/* the other object leaves the destination and arrives at the source */
		if (sb == RT_HOST && ((rc = rt_policy_remove(r, dpath, dlen, S_ISDIR(xst.st_mode))) < 0 ||
				      (rc = rt_policy_remove(r, spath, slen, S_ISDIR(xst.st_mode))) < 0 ||
				      (rc = rt_policy_move_in(r, dpath, dlen, spath, slen, xst.st_mode)) < 0))
			return rc;
	}
	/* Nothing guarded leaves, and nothing arrives where the guard would
	 * protect or hold (a directory brings its contents along). */
	if (sb == RT_HOST &&
	    ((!(flags & RENAME_EXCHANGE) && /* else child_backing made it */
	      (rc = rt_child_path(r, d, name, spath, sizeof(spath), &slen)) < 0) ||
	     (rc = rt_policy_remove(r, spath, slen, sdir)) < 0 ||
	     (rc = rt_policy_lock_owned(r, spath, slen, sfd)) < 0))
		return rc;
	if (sb == RT_HOST && (rc = rt_policy_remove(r, dpath, dlen, sdir)) < 0) {
		/* Git rewrites a configuration through its lock file even when
		 * nothing changes (submodule update re-sets core.worktree): a
		 * plain rename that leaves the guarded file's bytes as they are
		 * only removes the source. A write racing the comparison goes
		 * to the removed file, never to the guarded one. */
		if (rc != -EPERM || flags != 0 || !S_ISREG(sst.st_mode))
			return rc;
		if ((ddfd = rt_side_dir(r, nd, sb, false)) < 0 ||
		    (sdfd = rt_side_dir(r, d, sb, false)) < 0 || !rt_policy_unchanged(r, sfd, ddfd, newname))
			return rc;
		bool held = false;
		if ((rc = rt_policy_lock_take(r, spath, slen, sdfd, name, sfd, &held)) == 0 &&
		    unlinkat(sdfd, name, 0) < 0)
			rc = -errno;
		rt_policy_lock_release(r, held);
		if (rc < 0)
			return rc;
		rt_inode_unname(r, sb, &sst, d, name, TAKE_FD(sfd));
		return 0;
	}
	if ((rc = check_dir_move(r, d, name, sb, &sst)) < 0)
		return rc;
	/* Git's index.lock arriving at index, by a rename or an exchange
	 * (either way round; op_rename holds index_gate for these names):
	 * the only way an index changes (rt_policy_index). */
	bool index_swap = false;
	int side = sb == RT_HOST && d == nd ? index_swap_side(name, newname, flags) : 0;
	if (side != 0 && S_ISREG(side == 1 ? sst.st_mode : xst.st_mode)) {
		if ((rc = rt_index_guard(r, d, side == 1 ? sfd : xfd)) < 0)
			return rc;
		index_swap = true;
	}
	if ((sdfd = rt_side_dir(r, d, sb, false)) < 0)
		return sdfd;
	if ((ddfd = rt_side_dir(r, nd, sb, true)) < 0)
		return ddfd;
	if ((rc = rt_policy_name(sst.st_mode, newname)) < 0 ||
	    ((flags & RENAME_EXCHANGE) && (rc = rt_policy_name(xst.st_mode, name)) < 0))
		return rc;
	/* Lock names (router_policy.c): what arrives at one is the sandbox's,
	 * and nothing replaces one; the sandbox's own leaves checked at the
	 * name in the same step as the rename. */
	unsigned fl = flags;
	int dlock = 0;
	bool held = false, locked = false;
	if (sb == RT_HOST && ((rc = dlock = rename_lock_names(r, spath, slen, dpath, dlen, sfd, &fl)) < 0 ||
			      (!(flags & RENAME_EXCHANGE) &&
			       (rc = rt_policy_lock_take(r, spath, slen, sdfd, name, sfd, &held)) < 0) ||
			      (rc = rt_policy_move_in(r, spath, slen, dpath, dlen, sst.st_mode)) < 0 ||
			      ((flags & RENAME_EXCHANGE) &&
			       (rc = exchange_arrives(r, spath, slen, xst.st_mode, sdfd, name, index_swap)) < 0) ||
			      (!index_swap && (rc = rt_policy_index(r, dpath, dlen)) < 0) ||
			      (rc = rt_policy_new(r, dpath, dlen, sdir, !sdir && !S_ISREG(sst.st_mode), ddfd, newname,
						  &locked, NULL)) < 0)) {
		rt_policy_lock_release(r, held);
		return rc;
	}
	/* The object a plain rename replaces loses its name: held for
	 * rt_inode_unname (the kernel may still have it open). */
	struct stat rst;
	_cleanup_close_ int rfd = -EBADF;
	if (!(fl & (RENAME_EXCHANGE | RENAME_NOREPLACE))) {
		rfd = rt_openat(r, ddfd, newname, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
		if (rfd >= 0 && fstat(rfd, &rst) < 0)
			lz_close_fdp(&rfd);
	}
	rc = renameat2(sdfd, name, ddfd, newname, fl) < 0 ? -errno : 0;
	rt_policy_done(r, locked);
	rt_policy_lock_release(r, held);
	if (rc == -EEXIST && dlock == 1 && !(flags & RENAME_NOREPLACE))
		return -EPERM; /* a plain rename refused, as for host Git's lock */
	if (rc < 0)
		return rc;
	if (dlock == 1)
		rt_policy_lock_made(r, sfd);
	if (rfd >= 0 && !(rst.st_dev == sst.st_dev && rst.st_ino == sst.st_ino))
		rt_inode_unname(r, sb, &rst, nd, newname, TAKE_FD(rfd));
	/* Re-link the moved objects (obtain follows an object found under
	 * another parent or name). */
	struct rt_inode *i;
	if (rt_inode_obtain(r, TAKE_FD(sfd), -EBADF, sb, &sst, nd, newname, false, &i) == 0)
		rt_inode_unref(r, i);
	if ((flags & RENAME_EXCHANGE) && rt_inode_obtain(r, TAKE_FD(xfd), -EBADF, xb, &xst, d, name, false, &i) == 0)
		rt_inode_unref(r, i);
	return 0;
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	struct lz_router *r = rt_req_router(req);
	int rc;
	if (flags & RENAME_WHITEOUT)
		rc = -EOPNOTSUPP; /* a whiteout is a device node: never made */
	else if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE))
		rc = -EINVAL;
	else {
		/* Lock order 0a: an index rename holds off every write (by name
		 * here: the objects are looked at under snap_lock). */
		bool gate = index_swap_side(name, newname, flags) != 0;
		if (gate)
			pthread_rwlock_wrlock(&r->index_gate);
		rt_rdlock_snap(r);
		rc = do_rename(r, rt_inode_get(r, parent), name, rt_inode_get(r, newparent), newname,
			       flags);
		rt_unlock_snap(r);
		if (gate)
			pthread_rwlock_unlock(&r->index_gate);
	}
	fuse_reply_err(req, -rc);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct lz_router *r = rt_req_router(req);
	struct rt_inode *i = rt_inode_get(r, ino), *nd = rt_inode_get(r, newparent);
	struct fuse_entry_param e;
	enum rt_backing b = RT_HOST;
	_cleanup_close_ int dfd = -EBADF, ifd = -EBADF;
	char proc[32];
	int rc = S_ISDIR(i->type) ? -EPERM : 0;
	if (rc == 0 && (ifd = rt_inode_fd(r, i)) < 0)
		rc = ifd;
	rt_procpath(proc, ifd);
	char path[PATH_MAX];
	size_t len;
	rt_rdlock_snap(r);
	if (rc == 0)
		rc = place_dir(r, nd);
	if (rc == 0) {
		enum lz_route route;
		if ((rc = rt_child_path(r, nd, newname, path, sizeof(path), &len)) == 0 &&
		    (rc = rt_route(r, path, len, false, &route)) == 0) {
			if (route == LZ_ROUTE_INCONSISTENT)
				rc = -EIO;
			else if ((b = rt_backing_of(route)) != i->backing)
				rc = -EXDEV;
		}
	}
	if (rc == 0 && (dfd = rt_side_dir(r, nd, b, true)) < 0)
		rc = dfd;
	/* A second name for a guarded file would be an unguarded way in. */
	bool locked = false;
	int lock = 0;
	if (rc == 0)
		rc = rt_policy_name(i->type, newname);
	/* A lock name is made only by an exclusive create (router_policy.c):
	 * a linked one would have another name to write it by. */
	if (rc == 0 && b == RT_HOST && (rc = rt_policy_inode(r, i, true)) == 0 &&
	    (rc = rt_child_path(r, nd, newname, path, sizeof(path), &len)) == 0 &&
	    (rc = lock = rt_policy_is_lock(r, path, len)) >= 0)
		rc = lock == 1 ? -EPERM
		     : (rc = rt_policy_index(r, path, len)) < 0
			     ? rc
			     : rt_policy_new(r, path, len, false, !S_ISREG(i->type), dfd, newname, &locked, NULL);
	if (rc == 0 && linkat(AT_FDCWD, proc, dfd, newname, AT_SYMLINK_FOLLOW) < 0)
		rc = -errno;
	rt_policy_done(r, locked);
	if (rc == 0)
		rc = adopt_new(r, nd, b, dfd, newname, false, &e);
	rt_unlock_snap(r);
	reply_entry_or_err(req, rc, &e);
}

/* ---- open files ---------------------------------------------------------- */

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct lz_router *r = rt_req_router(req);
	struct rt_inode *i = rt_inode_get(r, ino);
	if (S_ISDIR(i->type)) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (r->kernel_open && S_ISREG(i->type)) {
		/* ENOSYS with FUSE_CAP_NO_OPEN_SUPPORT: this open and every later
		 * one succeed in the kernel (which checked the caller's access:
		 * default_permissions); io_fd serves their I/O. */
		fuse_reply_err(req, ENOSYS);
		return;
	}
	bool trunc = fi->flags & O_TRUNC;
	if (trunc)
		pthread_rwlock_rdlock(&r->index_gate);
	int rc = (fi->flags & O_ACCMODE) != O_RDONLY || trunc ? rt_policy_inode(r, i, false) : 0;
	_cleanup_close_ int ifd = rc < 0 ? rc : rt_inode_fd(r, i);
	int fd = -1, e = 0;
	if (ifd >= 0) {
		char proc[32];
		rt_procpath(proc, ifd);
		/* The magic link names i's object itself; opening a symlink
		 * object through it fails (ELOOP), it never reaches the link's
		 * target. */
		fd = rt_openat(r, AT_FDCWD, proc, open_flags(r, fi->flags), 0);
		e = errno;
	}
	if (trunc)
		pthread_rwlock_unlock(&r->index_gate);
	if (ifd < 0 || fd < 0) {
		fuse_reply_err(req, ifd < 0 ? -ifd : e);
		return;
	}
	fi->fh = fh_of(fd);
	fi->keep_cache = r->opt.keep_cache;
	rt_open_count(r, 1);
	if (fuse_reply_open(req, fi) < 0) {
		rt_open_count(r, -1);
		close(fd);
	}
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	_cleanup_close_ int owned = -EBADF;
	int fd = io_fd(rt_req_router(req), ino, fi, O_RDONLY, &owned);
	if (fd < 0) {
		fuse_reply_err(req, -fd);
		return;
	}
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = fd;
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

/* The flags a kernel-opened file is written with: the open's own
 * synchronous-write flags (the kernel passes them with each write). */
static int write_flags(const struct fuse_file_info *fi)
{
	return O_WRONLY | (fi != NULL ? fi->flags & (O_SYNC | O_DSYNC) : 0);
}

static void op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
			 struct fuse_file_info *fi)
{
	struct lz_router *r = rt_req_router(req);
	_cleanup_close_ int owned = -EBADF;
	pthread_rwlock_rdlock(&r->index_gate);
	int fd = io_fd(r, ino, fi, write_flags(fi), &owned);
	if (fd < 0) {
		pthread_rwlock_unlock(&r->index_gate);
		fuse_reply_err(req, -fd);
		return;
	}
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = fd;
	out.buf[0].pos = off;
	ssize_t n = fuse_buf_copy(&out, in, 0);
	pthread_rwlock_unlock(&r->index_gate);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	if (fd_of(fi) >= 0) {
		close(fd_of(fi));
		rt_open_count(rt_req_router(req), -1);
	}
	fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	_cleanup_close_ int owned = -EBADF;
	int fd = io_fd(rt_req_router(req), ino, fi, O_RDONLY, &owned);
	int rc = fd < 0 ? fd : (datasync ? fdatasync(fd) : fsync(fd)) < 0 ? -errno : 0;
	fuse_reply_err(req, -rc);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct lz_router *r = rt_req_router(req);
	_cleanup_close_ int owned = -EBADF;
	pthread_rwlock_rdlock(&r->index_gate);
	int fd = io_fd(r, ino, fi, O_WRONLY, &owned);
	int rc = fd < 0 ? fd : fallocate(fd, mode, off, len) < 0 ? -errno : 0;
	pthread_rwlock_unlock(&r->index_gate);
	fuse_reply_err(req, -rc);
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	_cleanup_close_ int owned = -EBADF;
	int fd = io_fd(rt_req_router(req), ino, fi, O_RDONLY, &owned);
	off_t res = fd < 0 ? (errno = -fd, -1) : lseek(fd, off, whence);
	if (res < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_lseek(req, res);
}

static void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			       struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			       struct fuse_file_info *fi_out, size_t len, int flags)
{
	struct lz_router *r = rt_req_router(req);
	/* Same backing only; across, EXDEV (the kernel then falls back to
	 * its own read/write copy through this filesystem, which lands in
	 * the destination's backing like any write). */
	if (rt_inode_get(r, ino_in)->backing != rt_inode_get(r, ino_out)->backing) {
		fuse_reply_err(req, EXDEV);
		return;
	}
	_cleanup_close_ int in_owned = -EBADF, out_owned = -EBADF;
	pthread_rwlock_rdlock(&r->index_gate);
	int in = io_fd(r, ino_in, fi_in, O_RDONLY, &in_owned);
	int out = in < 0 ? in : io_fd(r, ino_out, fi_out, write_flags(fi_out), &out_owned);
	ssize_t n = out < 0 ? (errno = -out, -1)
			    : copy_file_range(in, &off_in, out, &off_out, len, (unsigned)flags);
	int e = errno;
	pthread_rwlock_unlock(&r->index_gate);
	errno = e;
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_write(req, (size_t)n);
}

/* ---- inode-wide ---------------------------------------------------------- */

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct lz_router *r = rt_req_router(req);
	struct statvfs sv;
	_cleanup_close_ int fd = rt_inode_fd(r, ino == 0 ? &r->root : rt_inode_get(r, ino));
	if (fd < 0)
		fuse_reply_err(req, -fd);
	else if (fstatvfs(fd, &sv) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

/* An owned O_PATH descriptor of ino's object and its /proc/self/fd
 * name in proc; on failure replies the error and returns it. */
static int inode_proc(fuse_req_t req, fuse_ino_t ino, char proc[32])
{
	struct lz_router *r = rt_req_router(req);
	int fd = rt_inode_fd(r, rt_inode_get(r, ino));
	if (fd < 0)
		fuse_reply_err(req, -fd);
	else
		rt_procpath(proc, fd);
	return fd;
}

static void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	char proc[32];
	_cleanup_close_ int fd = inode_proc(req, ino, proc);
	if (fd >= 0)
		fuse_reply_err(req, faccessat(AT_FDCWD, proc, mask, AT_EACCESS) < 0 ? errno : 0);
}

/* user.* and POSIX ACLs pass through; every other namespace (security.,
 * trusted., other system.) is not supported. */
static bool xattr_allowed(const char *name)
{
	return strncmp(name, "user.", 5) == 0 || strcmp(name, "system.posix_acl_access") == 0 ||
	       strcmp(name, "system.posix_acl_default") == 0;
}

enum xattr_op { XOP_READ, XOP_SET, XOP_REMOVE };

/* inode_proc for an operation on the attribute name: refuses a name
 * outside xattr_allowed (EOPNOTSUPP) and, to set or remove one, what
 * rt_policy_inode refuses, as chmod: an access ACL's owner, group and
 * other entries are the mode bits, a default ACL those of what host Git
 * makes below, so a guarded object's attributes are its mode. An ACL
 * also passes rt_policy_acl (none on a directory holding control files,
 * no default ACL in Git data), and one set (value[0..size)) passes
 * rt_policy_acl_value (no write for others on the host, nor for the
 * group in a default ACL). */
static int xattr_target(fuse_req_t req, fuse_ino_t ino, const char *name, enum xattr_op op,
			const char *value, size_t size, char proc[32])
{
	struct lz_router *r = rt_req_router(req);
	struct rt_inode *i = rt_inode_get(r, ino);
	int rc = xattr_allowed(name) ? 0 : -EOPNOTSUPP;
	if (rc == 0 && op != XOP_READ)
		rc = rt_policy_inode(r, i, false);
	/* the system. names xattr_allowed lets through are the ACLs */
	if (rc == 0 && op != XOP_READ && strncmp(name, "system.", 7) == 0)
		rc = rt_policy_acl(r, i, strcmp(name, "system.posix_acl_default") == 0, op == XOP_SET);
	if (rc == 0 && op == XOP_SET && strncmp(name, "system.", 7) == 0)
		rc = rt_policy_acl_value(i->backing, strcmp(name, "system.posix_acl_default") == 0, value, size);
	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return rc;
	}
	return inode_proc(req, ino, proc);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char proc[32];
	_cleanup_close_ int fd = xattr_target(req, ino, name, XOP_READ, NULL, 0, proc);
	if (fd < 0)
		return;
	if (size == 0) {
		ssize_t n = getxattr(proc, name, NULL, 0);
		if (n < 0)
			fuse_reply_err(req, errno);
		else
			fuse_reply_xattr(req, (size_t)n);
		return;
	}
	_cleanup_free_ char *buf = malloc(size);
	if (buf == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ssize_t n = getxattr(proc, name, buf, size);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char proc[32];
	_cleanup_close_ int fd = inode_proc(req, ino, proc);
	if (fd < 0)
		return;
	_cleanup_free_ char *all = malloc(XATTR_LIST_MAX), *out = malloc(XATTR_LIST_MAX);
	if (all == NULL || out == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ssize_t n = listxattr(proc, all, XATTR_LIST_MAX);
	if (n < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	size_t m = 0;
	for (ssize_t k = 0; k < n;) {
		size_t l = strnlen(all + k, (size_t)(n - k));
		if (xattr_allowed(all + k) && (ssize_t)(k + (ssize_t)l) < n) {
			memcpy(out + m, all + k, l + 1);
			m += l + 1;
		}
		k += (ssize_t)l + 1;
	}
	if (size == 0)
		fuse_reply_xattr(req, m);
	else if (m > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, out, m);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	char proc[32];
	_cleanup_close_ int fd = xattr_target(req, ino, name, XOP_SET, value, size, proc);
	if (fd >= 0)
		fuse_reply_err(req, setxattr(proc, name, value, size, flags) < 0 ? errno : 0);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	char proc[32];
	_cleanup_close_ int fd = xattr_target(req, ino, name, XOP_REMOVE, NULL, 0, proc);
	if (fd >= 0)
		fuse_reply_err(req, removexattr(proc, name) < 0 ? errno : 0);
}

/* ---- session ------------------------------------------------------------- */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct lz_router *r = userdata;
	conn->want |= conn->capable & FUSE_CAP_READDIRPLUS;
	/* Plus only where the kernel saw lookups follow a listing: with the
	 * caches long, most listings (find, rg) need names only. */
	conn->want |= conn->capable & FUSE_CAP_READDIRPLUS_AUTO;
	conn->want |= conn->capable & (FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	conn->want |= conn->capable & FUSE_CAP_PARALLEL_DIROPS;
	r->kernel_open = r->opt.kernel_open && (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT);
	/* With atomic O_TRUNC the kernel leaves truncation to OPEN, which a
	 * kernel-opened file never sends: the truncation would be lost.
	 * Without it, O_TRUNC arrives as a SETATTR of the size. */
	if (r->kernel_open)
		conn->want &= ~(unsigned)FUSE_CAP_ATOMIC_O_TRUNC;
	if (r->opt.keep_cache)
		conn->want |= conn->capable & FUSE_CAP_AUTO_INVAL_DATA;
	if (r->opt.writeback_cache)
		conn->want |= conn->capable & FUSE_CAP_WRITEBACK_CACHE;
	if (r->opt.default_permissions)
		conn->want |= conn->capable & FUSE_CAP_POSIX_ACL;
	/* No getlk/setlk/flock operations: the kernel keeps POSIX and BSD
	 * locks itself, per open file of this filesystem. */
	conn->want &= ~(unsigned)(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
	conn->time_gran = 1;
}

const struct fuse_lowlevel_ops rt_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.create = op_create,
	.read = op_read,
	.write_buf = op_write_buf,
	/* No flush: the backings are local filesystems, whose close has
	 * nothing to report, and the kernel keeps the locks; ENOSYS makes the
	 * kernel stop sending FLUSH, one round trip fewer per close. */
	.release = op_release,
	.fsync = op_fsync,
	.opendir = rt_opendir,
	.readdir = rt_readdir,
	.readdirplus = rt_readdirplus,
	.releasedir = rt_releasedir,
	.fsyncdir = rt_fsyncdir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.access = op_access,
	.fallocate = op_fallocate,
	.lseek = op_lseek,
	.copy_file_range = op_copy_file_range,
};
