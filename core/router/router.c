/* Router lifecycle: construction, the session loop, publication of a new
 * classification with kernel cache invalidation (spec 3.5: "Publication
 * of a changed index or ignore input serializes against new pathname
 * operations and either installs one complete new snapshot or leaves the
 * prior snapshot active"). Design and lock order: router_int.h. */
#include <dirent.h>
#include <errno.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "router/router_int.h"
#include "util/cleanup.h"
#include "util/sys.h"

void lz_router_log(const char *fmt, ...)
{
	static atomic_uint logged;
	if (atomic_load(&logged) > LZ_ROUTER_LOG_LINES)
		return; /* and the count stays put: it never wraps back to logging */
	unsigned n = atomic_fetch_add(&logged, 1);
	char line[1024];
	int k;
	if (n > LZ_ROUTER_LOG_LINES)
		return;
	if (n == LZ_ROUTER_LOG_LINES) {
		k = snprintf(line, sizeof(line), "lazaret-router: %d messages logged; the rest of this "
			     "generation's are not\n", LZ_ROUTER_LOG_LINES);
	} else {
		va_list ap;
		va_start(ap, fmt);
		k = snprintf(line, sizeof(line), "lazaret-router: ");
		k += vsnprintf(line + k, sizeof(line) - (size_t)k - 1, fmt, ap);
		va_end(ap);
		if (k > (int)sizeof(line) - 2)
			k = (int)sizeof(line) - 2;
		line[k++] = '\n';
	}
	(void)!write(STDERR_FILENO, line, (size_t)k); /* one line, one write */
}

void lz_router_options_default(struct lz_router_options *opt)
{
	*opt = (struct lz_router_options){
		.entry_timeout = 1.0,
		.attr_timeout = 1.0,
		.negative_timeout = 1.0,
		.isolated_timeout = 3600.0,
		.watched_timeout = 60.0,
		.keep_cache = true,
		.kernel_open = true,
		.writeback_cache = false,
		.allow_other = false,
		.default_permissions = true,
		.max_threads = 8,
	};
}

static void cls_release(struct lz_router_classifier *c)
{
	if (c->release != NULL)
		c->release(c->ctx);
	*c = (struct lz_router_classifier){ 0 };
}

static bool ascii_letter(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Whether directory name of dirfd ("." itself) matches names without
 * regard to case: a casefold directory (FS_CASEFOLD_FL: ext4, f2fs,
 * tmpfs), or, whatever the file system (vfat, exfat, a CIFS share, WSL's
 * drvfs), its first listed name with an ASCII letter found again with
 * every letter's case flipped, as the same object, when no entry is
 * listed under that name. 1, 0 (or no such name to try, or not a
 * directory), -errno. Reads only: nothing is made to probe with. */
static int folds_case(int dirfd, const char *name)
{
	_cleanup_close_ int fd = lz_openat2(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC, LZ_RESOLVE_CONFINED);
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? 0 : -errno;
	int flags = 0;
	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 && (flags & FS_CASEFOLD_FL))
		return 1;
	int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	if (d == NULL) {
		int e = errno;
		if (dfd >= 0)
			close(dfd);
		return -e;
	}
	char probe[NAME_MAX + 1] = "", flipped[NAME_MAX + 1] = "";
	bool listed = false;
	struct dirent *de;
	for (int pass = 0; pass < 2 && !listed; pass++) {
		rewinddir(d);
		while ((de = readdir(d)) != NULL) {
			if (pass == 1) {
				listed |= strcmp(de->d_name, flipped) == 0;
				continue;
			}
			size_t n = strlen(de->d_name), k;
			for (k = 0; k < n && !ascii_letter(de->d_name[k]); k++)
				;
			if (k == n || n > NAME_MAX)
				continue;
			memcpy(probe, de->d_name, n + 1);
			for (k = 0; k <= n; k++) {
				char c = probe[k];
				flipped[k] = c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A')
					     : c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a')
								    : c;
			}
			break;
		}
		if (probe[0] == '\0')
			break;
	}
	closedir(d);
	struct stat a, b;
	if (probe[0] == '\0' || listed || fstatat(fd, flipped, &b, AT_SYMLINK_NOFOLLOW) < 0 ||
	    fstatat(fd, probe, &a, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int lz_router_new(int host_fd, int isolated_fd, struct lz_router_classifier cls,
		  const struct lz_router_options *opt, lz_router **ret, struct lz_err *err)
{
	if (cls.route == NULL) {
		cls_release(&cls);
		return lz_err_set(err, EINVAL, "router: no classifier");
	}
	struct lz_router *r = calloc(1, sizeof(*r));
	if (r == NULL) {
		cls_release(&cls);
		return lz_err_set(err, ENOMEM, "router: out of memory");
	}
	r->root_fd[0] = r->root_fd[1] = -EBADF;
	r->cls = cls;
	if (opt != NULL)
		r->opt = *opt;
	else
		lz_router_options_default(&r->opt);
	if (r->opt.max_threads == 0)
		r->opt.max_threads = 8;
	if (r->opt.max_index_bytes == 0)
		r->opt.max_index_bytes = LZ_ROUTER_INDEX_MAX;
	if (r->opt.max_listing_bytes == 0)
		r->opt.max_listing_bytes = LZ_ROUTER_LISTINGS_MAX;
	struct rlimit rl;
	r->fd_limit = getrlimit(RLIMIT_NOFILE, &rl) < 0 ? 1024
		      : rl.rlim_cur == RLIM_INFINITY ? 1u << 20
						      : (size_t)rl.rlim_cur;
	r->fd_budget = r->opt.max_cached_fds ? r->opt.max_cached_fds : r->fd_limit / 4;
	if (r->fd_budget < 16)
		r->fd_budget = 16;
	pthread_rwlockattr_t ra;
	pthread_rwlockattr_init(&ra);
	/* a publish must not starve behind a stream of pathname operations */
	pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&r->snap_lock, &ra);
	pthread_rwlock_init(&r->index_gate, &ra); /* an index rename must not starve behind writes */
	pthread_rwlockattr_destroy(&ra);
	pthread_rwlock_init(&r->tree_lock, NULL);
	pthread_mutex_init(&r->table_lock, NULL);
	pthread_mutex_init(&r->se_lock, NULL);
	pthread_mutex_init(&r->publish_lock, NULL);
	pthread_mutex_init(&r->gitdir_lock, NULL);
	pthread_mutex_init(&r->made_lock, NULL);
	pthread_mutex_init(&r->lockname_lock, NULL);

	const int in[2] = { host_fd, isolated_fd };
	static const char *const label[2] = { "host", "isolated" };
	for (int b = 0; b < 2; b++) {
		r->root_fd[b] = openat(in[b], ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (r->root_fd[b] < 0) {
			int e = errno;
			lz_router_free(r);
			return lz_err_set(err, e, "router: %s backing: %s", label[b], strerror(e));
		}
	}
	/* The guard compares Git's names bytewise (.git/hooks, config): where
	 * the host would open .git/HOOKS as .git/hooks it guards nothing. */
	int rc = folds_case(r->root_fd[RT_HOST], ".");
	if (rc == 0)
		rc = folds_case(r->root_fd[RT_HOST], ".git");
	if (rc != 0) {
		lz_router_free(r);
		return rc > 0 ? lz_err_set(err, EOPNOTSUPP,
					   "router: the workspace's file system ignores the case of names (a "
					   "case-insensitive mount or a casefold directory): Git's control files "
					   "cannot be protected there; use a case-sensitive file system")
			      : lz_err_set(err, -rc, "router: host backing: %s", strerror(-rc));
	}
	rc = rt_table_init(r);
	if (rc < 0) {
		lz_router_free(r);
		return lz_err_set(err, -rc, "router: inode table: %s", strerror(-rc));
	}
	*ret = r;
	return 0;
}

void lz_router_free(lz_router *r)
{
	if (r == NULL)
		return;
	rt_table_destroy(r);
	cls_release(&r->cls);
	lz_close_fdp(&r->root_fd[0]);
	lz_close_fdp(&r->root_fd[1]);
	free(r->mountpoint);
	pthread_rwlock_destroy(&r->snap_lock);
	pthread_rwlock_destroy(&r->index_gate);
	pthread_rwlock_destroy(&r->tree_lock);
	pthread_mutex_destroy(&r->table_lock);
	pthread_mutex_destroy(&r->se_lock);
	pthread_mutex_destroy(&r->publish_lock);
	pthread_mutex_destroy(&r->gitdir_lock);
	pthread_mutex_destroy(&r->made_lock);
	pthread_mutex_destroy(&r->lockname_lock);
	free(r);
}

int lz_router_serve(lz_router *r, const char *mountpoint, int fuse_fd, struct lz_err *err)
{
	_cleanup_close_ int devfd = fuse_fd;
	if ((mountpoint == NULL) == (fuse_fd < 0))
		return lz_err_set(err, EINVAL, "router: give a mountpoint or a /dev/fuse descriptor");
	char opts[256];
	snprintf(opts, sizeof(opts), "fsname=lazaret-router,subtype=lazaret%s%s",
		 r->opt.default_permissions ? ",default_permissions" : "",
		 r->opt.allow_other ? ",allow_other" : "");
	char *argv[] = { "lazaret-router", "-o", opts, r->opt.debug ? "-d" : NULL, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(r->opt.debug ? 4 : 3, argv);
	struct fuse_session *se = fuse_session_new(&args, &rt_ops, sizeof(rt_ops), r);
	fuse_opt_free_args(&args);
	if (se == NULL)
		return lz_err_set(err, EINVAL, "router: fuse_session_new failed");
	char devpath[32];
	if (mountpoint == NULL) {
		/* libfuse adopts an open device given as /dev/fd/N */
		snprintf(devpath, sizeof(devpath), "/dev/fd/%d", devfd);
		TAKE_FD(devfd);
	}
	if (fuse_session_mount(se, mountpoint != NULL ? mountpoint : devpath) != 0) {
		fuse_session_destroy(se);
		return lz_err_set(err, EIO, "router: mounting '%s' failed",
				  mountpoint != NULL ? mountpoint : devpath);
	}
	if (r->opt.handle_signals && fuse_set_signal_handlers(se) != 0) {
		fuse_session_unmount(se);
		fuse_session_destroy(se);
		return lz_err_set(err, EIO, "router: installing signal handlers failed");
	}
	pthread_mutex_lock(&r->se_lock);
	r->se = se;
	free(r->mountpoint);
	r->mountpoint = mountpoint != NULL ? strdup(mountpoint) : NULL;
	pthread_mutex_unlock(&r->se_lock);

	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	int rc = -ENOMEM;
	if (cfg != NULL) {
		fuse_loop_cfg_set_max_threads(cfg, r->opt.max_threads);
		fuse_loop_cfg_set_idle_threads(cfg, r->opt.max_threads);
		fuse_loop_cfg_set_clone_fd(cfg, 0);
		rc = fuse_session_loop_mt(se, cfg);
		fuse_loop_cfg_destroy(cfg);
	}

	pthread_mutex_lock(&r->se_lock);
	r->se = NULL;
	pthread_mutex_unlock(&r->se_lock);
	if (r->opt.handle_signals)
		fuse_remove_signal_handlers(se);
	fuse_session_unmount(se);
	fuse_session_destroy(se);
	if (rc < 0)
		return lz_err_set(err, -rc, "router: session loop: %s", strerror(-rc));
	return 0; /* unmounted, stopped, or ended by a signal */
}

void lz_router_stop(lz_router *r)
{
	pthread_mutex_lock(&r->se_lock);
	if (r->se != NULL) {
		fuse_session_exit(r->se);
		/* the loop notices the flag when a request arrives: send one */
		struct statfs sf;
		if (r->mountpoint != NULL)
			(void)statfs(r->mountpoint, &sf);
	}
	pthread_mutex_unlock(&r->se_lock);
}

/* ---- publish ----------------------------------------------------------- */

struct inval_scan {
	struct lz_router *r;
	/* NULL: every name is invalidated (a retry: the old routes are gone) */
	const struct lz_router_classifier *old, *new;
	fuse_ino_t dir;
	const char *path; /* NULL: the directory has no path (deeper than PATH_MAX) */
	size_t len;
};

static bool route_changed(const struct inval_scan *s, const char *path, size_t len)
{
	for (int dir = 0; dir < 2; dir++) {
		enum lz_route a, b;
		int ra = s->old->route(s->old->ctx, path, len, dir, &a);
		int rb = s->new->route(s->new->ctx, path, len, dir, &b);
		if (ra < 0 || rb < 0 || a != b)
			return true;
	}
	return false;
}

static int inval_one(void *arg, const char *name, unsigned char dtype, uint64_t ino)
{
	(void)dtype;
	(void)ino;
	struct inval_scan *s = arg;
	char path[PATH_MAX];
	size_t nl = strlen(name), len = s->len;
	/* a name whose route cannot be compared is invalidated */
	if (s->old != NULL && s->path != NULL && len + nl + 2 <= sizeof(path)) {
		memcpy(path, s->path, len);
		if (len > 0)
			path[len++] = '/';
		memcpy(path + len, name, nl + 1);
		if (!route_changed(s, path, len + nl))
			return 0;
	}
	/* -ENOENT: the kernel has no such entry cached; nothing to do */
	(void)fuse_lowlevel_notify_inval_entry(s->r->se, s->dir, name, nl);
	return 0;
}

static bool is_dir(const struct rt_inode *i)
{
	return S_ISDIR(i->type);
}


/* Visits the entries of one directory the kernel holds, in both backings.
 * Returns false when it could not for now. */
static bool invalidate_dir(struct inval_scan *s, struct rt_inode *d)
{
	char path[PATH_MAX] = "";
	size_t len = 0;
	int rc = rt_dir_path(s->r, d, path, sizeof(path), &len);
	if (rc == -ESTALE)
		return true; /* removed: no name leads into it */
	s->dir = rt_nodeid(s->r, d);
	s->path = rc == 0 ? path : NULL;
	s->len = len;
	bool done = true;
	for (int b = RT_HOST; b <= RT_ISOLATED; b++) {
		/* with no path, only the directory's own backing (by descriptor) */
		if (rc < 0 && d->backing != (enum rt_backing)b)
			continue;
		int fd = rt_open_side_rd(s->r, d, (enum rt_backing)b, path, len);
		/* A shortage leaves the entries unvisited, for a retry; any
		 * other failure means there is nothing there to visit. */
		if (fd < 0) {
			done &= !lz_err_for_now(fd);
			continue;
		}
		done &= !lz_err_for_now(rt_scan_names(fd, inval_one, s));
		close(fd);
	}
	return done;
}

/* For every directory the kernel holds an inode of, invalidates the
 * cached entries (positive or negative) whose route differs between the
 * two classifiers (old NULL: every cached entry). Names in neither
 * backing need nothing: they are absent under both routes. Returns false
 * when some directory could not be visited for now (out of descriptors
 * or memory): its entries may still carry old routes. Caller holds
 * se_lock with a session. */
static bool invalidate(struct lz_router *r, const struct lz_router_classifier *old,
		       const struct lz_router_classifier *new)
{
	size_t n;
	struct rt_inode **dirs = rt_inode_collect(r, is_dir, &n);
	if (dirs == NULL)
		return false;
	bool done = true;
	for (size_t k = 0; k < n; k++) {
		struct inval_scan s = { .r = r, .old = old, .new = new };
		done &= invalidate_dir(&s, dirs[k]);
		rt_inode_unref(r, dirs[k]);
	}
	free(dirs);
	return done;
}

int lz_router_publish(lz_router *r, struct lz_router_classifier cls)
{
	if (cls.route == NULL) {
		cls_release(&cls);
		return -EINVAL;
	}
	pthread_mutex_lock(&r->publish_lock);
	pthread_rwlock_wrlock(&r->snap_lock);
	struct lz_router_classifier old = r->cls;
	r->cls = cls;
	pthread_rwlock_unlock(&r->snap_lock);
	/* The new classifier is r->cls and only a later publish (serialized
	 * by publish_lock) could release it; the old one is ours now. */
	pthread_mutex_lock(&r->se_lock);
	if (r->se != NULL && !invalidate(r, &old, &cls) && !atomic_exchange(&r->inval_pending, true))
		lz_router_log("out of descriptors or memory invalidating the kernel's cached names after a "
			      "classification change; trying again");
	pthread_mutex_unlock(&r->se_lock);
	cls_release(&old);
	pthread_mutex_unlock(&r->publish_lock);
	return 0;
}

int lz_router_route(lz_router *r, const char *path, size_t len, bool is_dir, enum lz_route *ret)
{
	pthread_rwlock_rdlock(&r->snap_lock);
	int rc = rt_route(r, path, len, is_dir, ret);
	pthread_rwlock_unlock(&r->snap_lock);
	return rc;
}

int lz_router_retry_invalidation(lz_router *r)
{
	if (!atomic_load(&r->inval_pending))
		return 0;
	pthread_mutex_lock(&r->publish_lock);
	pthread_mutex_lock(&r->se_lock);
	/* the old routes are gone: every cached name goes */
	if (r->se == NULL || invalidate(r, NULL, NULL)) {
		atomic_store(&r->inval_pending, false);
		lz_router_log("the kernel's cached names follow the classification again");
	}
	pthread_mutex_unlock(&r->se_lock);
	pthread_mutex_unlock(&r->publish_lock);
	return atomic_load(&r->inval_pending) ? 1 : 0;
}

/* ---- host changes ----------------------------------------------------------- */

static bool is_host(const struct rt_inode *i)
{
	return i->backing == RT_HOST;
}

/* Every host-backed inode the kernel holds: its attributes, and the entry
 * it was found at. Caller holds se_lock with a session. */
static void invalidate_host(struct lz_router *r)
{
	size_t n;
	struct rt_inode **all = rt_inode_collect(r, is_host, &n);
	if (all == NULL) {
		lz_router_log("out of memory dropping the kernel's caches");
		return;
	}
	for (size_t k = 0; k < n; k++) {
		struct rt_inode *i = all[k];
		char name[NAME_MAX + 1];
		(void)fuse_lowlevel_notify_inval_inode(r->se, rt_nodeid(r, i), -1, 0);
		struct rt_inode *parent = rt_inode_name(r, i, name);
		if (parent != NULL) {
			(void)fuse_lowlevel_notify_inval_entry(r->se, rt_nodeid(r, parent), name, strlen(name));
			rt_inode_unref(r, parent);
		}
		rt_inode_unref(r, i);
	}
	free(all);
}

void lz_router_host_watched(lz_router *r, bool complete)
{
	pthread_mutex_lock(&r->se_lock);
	bool was = atomic_exchange(&r->host_watched, complete);
	if (was && !complete && r->se != NULL)
		invalidate_host(r);
	pthread_mutex_unlock(&r->se_lock);
}

/* An object the host renamed (or linked) to d/name, known here by another
 * name: that name is renamed too, so its descriptor, once evicted, is
 * reopened where the object now is (a file the sandbox holds open would
 * otherwise fail ESTALE). Caller holds se_lock. */
static void relink_if_moved(struct lz_router *r, struct rt_inode *c, struct rt_inode *d, const char *name)
{
	char was[NAME_MAX + 1];
	struct rt_inode *parent = rt_inode_name(r, c, was);
	if (parent != d || strcmp(was, name) != 0)
		(void)rt_inode_relink(r, c, d, name);
	if (parent != NULL)
		rt_inode_unref(r, parent);
}

void lz_router_host_changed(lz_router *r, dev_t dir_dev, ino_t dir_ino, const char *name,
			    bool attrs_only)
{
	struct stat dst = { .st_dev = dir_dev, .st_ino = dir_ino };
	pthread_mutex_lock(&r->se_lock);
	/* A directory the kernel holds no inode of has no cached entries. */
	struct rt_inode *d = r->se != NULL ? rt_inode_find(r, RT_HOST, &dst, 0) : NULL;
	if (d != NULL) {
		if (!attrs_only)
			(void)fuse_lowlevel_notify_inval_entry(r->se, rt_nodeid(r, d), name, strlen(name));
		_cleanup_close_ int dfd = rt_inode_fd(r, d);
		struct stat st;
		struct rt_inode *c = NULL;
		if (dfd >= 0 && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			c = rt_inode_find(r, RT_HOST, &st, rt_object_gen(dfd, name));
		if (c != NULL) {
			(void)fuse_lowlevel_notify_inval_inode(r->se, rt_nodeid(r, c), -1, 0);
			/* Not a directory: one has children, and a chain of
			 * names taken from events that arrive late could loop. */
			if (!attrs_only && !S_ISDIR(c->type))
				relink_if_moved(r, c, d, name);
			rt_inode_unref(r, c);
		}
		rt_inode_unref(r, d);
	}
	pthread_mutex_unlock(&r->se_lock);
}
