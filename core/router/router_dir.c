/* Merged directory streams (spec 3.5: "Directory lookup and enumeration
 * expose only the entry selected by the current snapshot").
 *
 * opendir reads both sides of the directory (its own backing object and
 * the other backing's directory at the same path, if any); each read from
 * offset 0 lists them: keeps each name only from the side its route
 * selects, sorts bytewise, and deduplicates (a directory-only pattern can
 * select a directory in one backing and a non-directory of the same name
 * in the other: the directory wins, as in lookup). Offsets are indexes
 * into that listing, stable until the stream is read from 0 again, and it
 * is not re-read after a publish (the stream is pinned to its snapshot).
 * readdirplus looks entries up relative to the two directories the
 * listing came from, and only while the current route still selects the
 * side the entry came from; otherwise the name is listed without
 * attributes, so no stale dentry is handed to the kernel. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "router/router_int.h"
#include "util/cleanup.h"
#include "util/sys.h"

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

int rt_scan_names(int fd, int (*fn)(void *arg, const char *name, unsigned char dtype, uint64_t ino),
		  void *arg)
{
	char buf[32768] __attribute__((aligned(8)));
	if (lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	for (;;) {
		long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		for (long k = 0; k < n;) {
			struct linux_dirent64 *de = (struct linux_dirent64 *)(buf + k);
			k += de->d_reclen;
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			int rc = fn(arg, de->d_name, de->d_type, de->d_ino);
			if (rc != 0)
				return rc;
		}
	}
}

int rt_open_side_rd(struct lz_router *r, struct rt_inode *d, enum rt_backing b, const char *path,
		    size_t len)
{
	int fd;
	if (d != NULL && d->backing == b) {
		_cleanup_close_ int pfd = rt_inode_fd(r, d);
		if (pfd < 0)
			return pfd == -ESTALE ? -ENOENT : pfd;
		char proc[32];
		rt_procpath(proc, pfd);
		fd = rt_openat(r, AT_FDCWD, proc, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	} else if (len == 0)
		fd = rt_openat(r, r->root_fd[b], ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	else
		fd = lz_openat2(r->root_fd[b], path, O_RDONLY | O_DIRECTORY | O_CLOEXEC,
				LZ_RESOLVE_CONFINED);
	if (fd >= 0)
		return fd;
	return errno == ENOTDIR || errno == ELOOP || errno == EXDEV ? -ENOENT : -errno;
}

/* d_type, with a stat when the backing does not report it. */
static unsigned char entry_type(int dfd, const char *name, unsigned char dtype)
{
	struct stat st;
	if (dtype != DT_UNKNOWN)
		return dtype;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return DT_UNKNOWN;
	return (unsigned char)IFTODT(st.st_mode);
}

static int join(char *buf, size_t cap, const char *dir, size_t dlen, const char *name, size_t *ret)
{
	size_t nl = strlen(name);
	if (dlen + nl + 2 > cap)
		return -ENAMETOOLONG;
	memcpy(buf, dir, dlen);
	size_t len = dlen;
	if (len > 0)
		buf[len++] = '/';
	memcpy(buf + len, name, nl + 1);
	*ret = len + nl;
	return 0;
}

/* ---- other side visibility (rmdir, directory rename) -------------------- */

struct visible_scan {
	struct lz_router *r;
	enum rt_backing side;
	int fd;
	const char *path;
	size_t len;
};

static int visible_one(void *arg, const char *name, unsigned char dtype, uint64_t ino)
{
	(void)ino;
	struct visible_scan *v = arg;
	char child[PATH_MAX];
	size_t clen;
	enum lz_route route;
	if (join(child, sizeof(child), v->path, v->len, name, &clen) < 0)
		return 1; /* unroutable: count it, refusing is the safe side */
	bool dir = entry_type(v->fd, name, dtype) == DT_DIR;
	if (rt_route(v->r, child, clen, dir, &route) < 0)
		return 1;
	return route != LZ_ROUTE_HOST && route != LZ_ROUTE_ISOLATED ? 1
	       : rt_backing_of(route) == v->side			   ? 1
										   : 0;
}

int rt_other_side_visible(struct lz_router *r, enum rt_backing b, const char *path, size_t len,
			  bool *ret)
{
	enum rt_backing other = b == RT_HOST ? RT_ISOLATED : RT_HOST;
	_cleanup_close_ int fd = rt_open_side_rd(r, NULL, other, path, len);
	if (fd == -ENOENT) {
		*ret = false;
		return 0;
	}
	if (fd < 0)
		return fd;
	struct visible_scan v = { .r = r, .side = other, .fd = fd, .path = path, .len = len };
	int rc = rt_scan_names(fd, visible_one, &v);
	if (rc < 0)
		return rc;
	*ret = rc != 0;
	return 0;
}

/* ---- listing ------------------------------------------------------------- */

struct list_scan {
	struct lz_router *r;
	struct rt_dir *d;
	size_t cap;
	size_t names_len, names_cap;
	enum rt_backing side;
	int fd;
	const char *path;
	size_t len;
};

/* Counts n more bytes of d's listing against the router's bound; false,
 * counting nothing, past it. The sandbox can open any number of streams
 * and leave each one's listing half read (gVisor keeps a directory's
 * stream while it caches the directory). */
static bool charge(struct lz_router *r, struct rt_dir *d, size_t n)
{
	size_t was = atomic_fetch_add(&r->listing_bytes, n);
	if (was + n > r->opt.max_listing_bytes) {
		atomic_fetch_sub(&r->listing_bytes, n);
		return false;
	}
	d->charged += n;
	return true;
}

/* Lets d's listing go (its length stays). */
static void listing_free(struct lz_router *r, struct rt_dir *d)
{
	free(d->ents);
	free(d->names);
	d->ents = NULL;
	d->names = NULL;
	atomic_fetch_sub(&r->listing_bytes, d->charged);
	d->charged = 0;
}

static int list_one(void *arg, const char *name, unsigned char dtype, uint64_t ino)
{
	struct list_scan *s = arg;
	char child[PATH_MAX];
	size_t clen;
	enum lz_route route;
	dtype = entry_type(s->fd, name, dtype);
	if (join(child, sizeof(child), s->path, s->len, name, &clen) < 0)
		return 0; /* too long to route: not shown */
	if (rt_route(s->r, child, clen, dtype == DT_DIR, &route) < 0)
		return 0;
	uint8_t b;
	if (route == LZ_ROUTE_INCONSISTENT)
		b = RT_INCONSISTENT_ENT; /* listed, so that its EIO is seen */
	else if (rt_backing_of(route) == s->side)
		b = (uint8_t)s->side;
	else
		return 0; /* hidden */
	size_t nl = strlen(name);
	if (s->d->n == RT_MAX_DIRENTS || s->names_len + nl + 1 > RT_MAX_DIRNAMES)
		return -EFBIG;
	if (s->d->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		if (!charge(s->r, s->d, (cap - s->cap) * sizeof(struct rt_dirent)))
			return -ENOMEM;
		struct rt_dirent *e = realloc(s->d->ents, cap * sizeof(*e));
		if (e == NULL)
			return -ENOMEM;
		s->d->ents = e;
		s->cap = cap;
	}
	if (s->names_len + nl + 1 > s->names_cap) {
		size_t cap = s->names_cap ? s->names_cap * 2 : 4096;
		while (cap < s->names_len + nl + 1)
			cap *= 2;
		if (!charge(s->r, s->d, cap - s->names_cap))
			return -ENOMEM;
		char *n = realloc(s->d->names, cap);
		if (n == NULL)
			return -ENOMEM;
		s->d->names = n;
		s->names_cap = cap;
	}
	memcpy(s->d->names + s->names_len, name, nl + 1);
	s->d->ents[s->d->n++] = (struct rt_dirent){
		.name_off = (uint32_t)s->names_len, .name_len = (uint16_t)nl, .backing = b,
		.dtype = dtype, .ino = ino };
	s->names_len += nl + 1;
	return 0;
}

static const char *sort_names; /* qsort has no context argument; under sort_lock */
static pthread_mutex_t sort_lock = PTHREAD_MUTEX_INITIALIZER;

static int cmp_ent(const void *a, const void *b)
{
	const struct rt_dirent *x = a, *y = b;
	int c = strcmp(sort_names + x->name_off, sort_names + y->name_off); /* bytewise */
	if (c != 0)
		return c;
	return (y->dtype == DT_DIR) - (x->dtype == DT_DIR); /* directory first */
}

/* Opens d's sides and, when names, lists them. */
static int list_dir(struct lz_router *r, struct rt_inode *di, struct rt_dir *d, bool names)
{
	char path[PATH_MAX];
	size_t len;
	int rc = rt_dir_path(r, di, path, sizeof(path), &len);
	if (rc < 0)
		return rc;
	struct list_scan s = { .r = r, .d = d, .path = path, .len = len };
	for (int b = RT_HOST; b <= RT_ISOLATED; b++) {
		int fd = rt_open_side_rd(r, di, (enum rt_backing)b, path, len);
		if (fd < 0 && (b == (int)di->backing || fd != -ENOENT))
			return fd;
		d->fd[b] = fd < 0 ? -EBADF : fd;
		if (fd < 0 || !names)
			continue;
		s.side = (enum rt_backing)b;
		s.fd = fd;
		if ((rc = rt_scan_names(fd, list_one, &s)) < 0)
			return rc;
	}
	if (d->n > 1) { /* an empty listing has no array (qsort wants one) */
		pthread_mutex_lock(&sort_lock);
		sort_names = d->names;
		qsort(d->ents, d->n, sizeof(*d->ents), cmp_ent);
		pthread_mutex_unlock(&sort_lock);
	}
	size_t m = 0;
	for (size_t k = 0; k < d->n; k++)
		if (m == 0 || strcmp(d->names + d->ents[k].name_off,
				     d->names + d->ents[m - 1].name_off) != 0)
			d->ents[m++] = d->ents[k];
	d->n = m;
	return 0;
}

static int dir_fds(const struct rt_dir *d)
{
	return (d->fd[0] >= 0) + (d->fd[1] >= 0);
}

static void dir_free(struct lz_router *r, struct rt_dir *d)
{
	if (d == NULL)
		return;
	lz_close_fdp(&d->fd[0]);
	lz_close_fdp(&d->fd[1]);
	listing_free(r, d);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

/* (Re)opens d's sides and, when names, lists them under the current
 * snapshot; caller holds d->lock (or owns d). Every read from offset 0
 * sees the directory as it is then, as on any local filesystem: gVisor
 * opens one descriptor per directory when a program first opens it (tar
 * -C, cd) and rewinds it for every later listing (ls, find, rm -r), so a
 * listing taken at opendir would hide every name made since. */
static int dir_relist(struct lz_router *r, struct rt_dir *d, bool names)
{
	rt_open_count(r, -dir_fds(d));
	lz_close_fdp(&d->fd[0]);
	lz_close_fdp(&d->fd[1]);
	listing_free(r, d);
	d->n = 0;
	d->drained = false;
	rt_rdlock_snap(r);
	int rc = list_dir(r, d->inode, d, names);
	rt_unlock_snap(r);
	rt_open_count(r, dir_fds(d));
	return rc;
}

void rt_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct lz_router *r = rt_req_router(req);
	struct rt_inode *di = rt_inode_get(r, ino);
	if (!S_ISDIR(di->type)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	struct rt_dir *d = calloc(1, sizeof(*d));
	if (d == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_init(&d->lock, NULL);
	d->fd[0] = d->fd[1] = -EBADF;
	d->inode = di;
	/* The sides opened now, so that a failure is the open's; listed by
	 * each read from offset 0. */
	int rc = dir_relist(r, d, false);
	if (rc < 0) {
		rt_open_count(r, -dir_fds(d));
		dir_free(r, d);
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	if (fuse_reply_open(req, fi) < 0) {
		rt_open_count(r, -dir_fds(d));
		dir_free(r, d);
	}
}

/* Looks entry e of stream d up for readdirplus: -ENOENT when it is gone or
 * its current route no longer selects the side it was listed from. */
static int plus_lookup(struct lz_router *r, struct rt_dir *d, const struct rt_dirent *e,
		       struct fuse_entry_param *ep)
{
	const char *name = d->names + e->name_off;
	if (e->backing == RT_INCONSISTENT_ENT || d->fd[e->backing] < 0)
		return -ENOENT;
	char path[PATH_MAX];
	size_t len;
	enum lz_route route;
	rt_rdlock_snap(r);
	int rc = rt_child_path(r, d->inode, name, path, sizeof(path), &len);
	if (rc == 0)
		rc = rt_route(r, path, len, e->dtype == DT_DIR, &route);
	if (rc == 0 && (route == LZ_ROUTE_INCONSISTENT || rt_backing_of(route) != e->backing))
		rc = -ENOENT;
	/* No descriptor: a listing names many objects the kernel never
	 * uses; a new inode gets one when first used (by name, checked). */
	struct stat st;
	if (rc == 0 && fstatat(d->fd[e->backing], name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		rc = -errno;
	/* the listing's type decided the route: a swapped entry is left out */
	if (rc == 0 && (IFTODT(st.st_mode) == DT_DIR) != (e->dtype == DT_DIR))
		rc = -ENOENT;
	struct rt_inode *i;
	if (rc == 0) {
		rc = rt_inode_obtain(r, -EBADF, d->fd[e->backing], (enum rt_backing)e->backing, &st, d->inode,
				     name, true, &i);
		if (rc == 0)
			rt_fill_entry(r, i, &st, ep);
	}
	rt_unlock_snap(r);
	return rc;
}

static void do_readdir(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi, bool plus)
{
	struct lz_router *r = rt_req_router(req);
	struct rt_dir *d = (struct rt_dir *)(uintptr_t)fi->fh;
	_cleanup_free_ char *buf = malloc(size);
	if (buf == NULL) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t used = 0;
	pthread_mutex_lock(&d->lock);
	bool past_end = d->drained && off >= 0 && (size_t)off >= d->n + 2;
	if (off == 0 || !d->listed || (d->drained && !past_end)) {
		int rc = dir_relist(r, d, true);
		if (rc < 0) {
			pthread_mutex_unlock(&d->lock);
			fuse_reply_err(req, -rc);
			return;
		}
	}
	d->listed = true;
	size_t k = past_end ? d->n + 2 : off < 0 ? 0 : (size_t)off;
	for (; k < d->n + 2; k++) {
		const char *name = k == 0 ? "." : k == 1 ? ".." : d->names + d->ents[k - 2].name_off;
		struct fuse_entry_param e;
		memset(&e, 0, sizeof(e));
		if (k < 2) {
			e.attr.st_ino = d->inode->ino; /* nonzero: some readers skip 0 */
			e.attr.st_mode = S_IFDIR;
		} else {
			e.attr.st_ino = d->ents[k - 2].ino;
			e.attr.st_mode = (mode_t)DTTOIF(d->ents[k - 2].dtype);
		}
		size_t need;
		if (!plus) {
			need = fuse_add_direntry(req, buf + used, size - used, name, &e.attr, (off_t)k + 1);
			if (need > size - used)
				break;
			used += need;
			continue;
		}
		need = fuse_add_direntry_plus(req, NULL, 0, name, NULL, 0);
		if (need > size - used)
			break;
		bool counted = k >= 2 && plus_lookup(r, d, &d->ents[k - 2], &e) == 0;
		need = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, (off_t)k + 1);
		if (need > size - used) {
			if (counted)
				rt_inode_forget(r, rt_inode_get(r, e.ino), 1);
			break;
		}
		used += need;
	}
	/* The end was returned: the listing goes (gVisor reads a directory
	 * through to its end each time), a read past it returns nothing. */
	if (k == d->n + 2 && !d->drained) {
		listing_free(r, d);
		d->drained = true;
	}
	pthread_mutex_unlock(&d->lock);
	fuse_reply_buf(req, buf, used);
}

void rt_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	do_readdir(req, size, off, fi, false);
}

void rt_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	(void)ino;
	do_readdir(req, size, off, fi, true);
}

void rt_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	struct rt_dir *d = (struct rt_dir *)(uintptr_t)fi->fh;
	rt_open_count(rt_req_router(req), -dir_fds(d));
	dir_free(rt_req_router(req), d);
	fuse_reply_err(req, 0);
}

void rt_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	struct rt_dir *d = (struct rt_dir *)(uintptr_t)fi->fh;
	pthread_mutex_lock(&d->lock);
	int fd = d->fd[d->inode->backing];
	int rc = fd < 0 ? (errno = EIO, -1) : datasync ? fdatasync(fd) : fsync(fd);
	pthread_mutex_unlock(&d->lock);
	fuse_reply_err(req, rc < 0 ? errno : 0);
}
