#include "fs/pathauth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fdutil.h"
#include "util/sys.h"

int lz_path_grammar(const char *path, size_t len, struct lz_err *err)
{
	if (len == 0 || path[0] != '/')
		return lz_err_set(err, EINVAL, "path must be absolute");
	if (len > LZ_PATH_MAX)
		return lz_err_set(err, EINVAL, "path is longer than %d bytes", LZ_PATH_MAX);
	if (memchr(path, '\0', len) != NULL)
		return lz_err_set(err, EINVAL, "path contains a NUL byte");
	if (len == 1)
		return 0;
	if (path[len - 1] == '/')
		return lz_err_set(err, EINVAL, "path must not end with '/'");
	for (size_t i = 1, start = 1; i <= len; i++) {
		if (i < len && path[i] != '/')
			continue;
		size_t n = i - start;
		if (n == 0)
			return lz_err_set(err, EINVAL, "path contains an empty component");
		if ((n == 1 && path[start] == '.') ||
		    (n == 2 && path[start] == '.' && path[start + 1] == '.'))
			return lz_err_set(err, EINVAL, "path contains a '.' or '..' component");
		if (n > 255)
			return lz_err_set(err, EINVAL, "path component longer than 255 bytes");
		start = i + 1;
	}
	return 0;
}

static int record(int fd, const char *canonical, struct lz_path *ret, struct lz_err *err)
{
	struct statx stx;
	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_MNT_ID, &stx) < 0)
		return lz_err_set(err, errno, "stat '%s': %s", canonical, strerror(errno));
	if (!(stx.stx_mask & STATX_MNT_ID))
		return lz_err_set(err, ENOTSUP, "stat '%s': no mount identity", canonical);
	char *label = strdup(canonical);
	if (label == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	*ret = (struct lz_path){
		.fd = fd,
		.canonical = label,
		.dev = makedev(stx.stx_dev_major, stx.stx_dev_minor),
		.ino = stx.stx_ino,
		.mnt_id = stx.stx_mnt_id,
		.mode = stx.stx_mode,
		.uid = stx.stx_uid,
		.nlink = stx.stx_nlink,
	};
	return 0;
}

/* One component beneath dirfd; a trailing symlink is refused, not followed. */
static int open_component(int dirfd, const char *name, unsigned long long resolve,
			  const char *label, struct lz_err *err)
{
	_cleanup_close_ int fd = lz_openat2(dirfd, name, O_PATH | O_CLOEXEC | O_NOFOLLOW, resolve);
	if (fd < 0) {
		int e = errno;
		if (e == EXDEV)
			return lz_err_set(err, e, "'%s' crosses a mount point inside a Lazaret-owned tree",
					  label);
		if (e == ELOOP)
			return lz_err_set(err, e, "'%s' resolves through a symlink", label);
		return lz_err_set(err, e, "open '%s': %s", label, strerror(e));
	}
	struct stat st;
	if (fstat(fd, &st) < 0)
		return lz_err_set(err, errno, "stat '%s': %s", label, strerror(errno));
	if (S_ISLNK(st.st_mode))
		return lz_err_set(err, ELOOP, "'%s' is a symlink", label);
	return TAKE_FD(fd);
}

static const char *next_component(const char *p, char *name, size_t *len)
{
	while (*p == '/')
		p++;
	size_t n = strcspn(p, "/");
	memcpy(name, p, n);
	name[n] = '\0';
	*len = n;
	return p + n;
}

/* A directory we just created gets exactly 0700 whatever the umask was;
 * only ours (owner checked by owned_check afterwards) is ever changed. */
static int fix_mode(int fd, const char *label, struct lz_err *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return lz_err_set(err, errno, "stat '%s': %s", label, strerror(errno));
	if (S_ISDIR(st.st_mode) && st.st_uid == getuid() && (st.st_mode & 07777) != 0700 &&
	    lz_fd_chmod(fd, 0700) < 0)
		return lz_err_set(err, errno, "chmod '%s': %s", label, strerror(errno));
	return 0;
}

static int owned_check(const struct lz_path *p, struct lz_err *err)
{
	if (!S_ISDIR(p->mode))
		return lz_err_set(err, ENOTDIR, "'%s' is not a directory", p->canonical);
	if (p->uid != getuid())
		return lz_err_set(err, EPERM, "'%s' is owned by uid %u, not by you (uid %u)",
				  p->canonical, (unsigned)p->uid, (unsigned)getuid());
	if ((p->mode & 07777) != 0700)
		return lz_err_set(err, EPERM,
				  "'%s' has mode %04o; Lazaret-owned directories must be 0700 "
				  "(chmod 0700 '%s')",
				  p->canonical, (unsigned)(p->mode & 07777), p->canonical);
	return 0;
}

static int walk(const char *canonical, bool create, struct lz_path *ret, struct lz_err *err)
{
	int r = lz_path_grammar(canonical, strlen(canonical), err);
	if (r < 0)
		return lz_err_prefix(err, r, "'%s': ", canonical);

	_cleanup_close_ int dirfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return lz_err_set(err, errno, "open '/': %s", strerror(errno));

	char name[256];
	char prefix[LZ_PATH_MAX + 1] = "";
	size_t prefix_len = 0, n;
	bool created_any = false;
	const char *p = canonical;

	for (;;) {
		p = next_component(p, name, &n);
		if (n == 0)
			break;
		memcpy(prefix + prefix_len, "/", 1);
		memcpy(prefix + prefix_len + 1, name, n + 1);
		prefix_len += n + 1;

		/* Below the first created component we are inside the Lazaret
		 * ownership boundary: no mount crossing either. */
		unsigned long long resolve = created_any ? LZ_RESOLVE_OWNED : LZ_RESOLVE_CONFINED;
		int fd = open_component(dirfd, name, resolve, prefix, err);
		if (fd == -ENOENT && create) {
			if (mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST)
				return lz_err_set(err, errno, "create '%s': %s", prefix, strerror(errno));
			created_any = true;
			fd = open_component(dirfd, name, LZ_RESOLVE_OWNED, prefix, err);
			if (fd >= 0 && (r = fix_mode(fd, prefix, err)) < 0) {
				close(fd);
				return r;
			}
			if (fd >= 0) {
				struct lz_path made = LZ_PATH_INIT;
				r = record(fd, prefix, &made, err);
				if (r < 0) {
					close(fd);
					return r;
				}
				r = owned_check(&made, err);
				made.fd = -EBADF;
				lz_path_release(&made);
				if (r < 0) {
					close(fd);
					return r;
				}
			}
		}
		if (fd < 0)
			return fd;
		lz_close_fdp(&dirfd);
		dirfd = fd;
	}

	struct lz_path out = LZ_PATH_INIT;
	r = record(dirfd, canonical, &out, err);
	if (r < 0)
		return r;
	TAKE_FD(dirfd);
	if (create && (r = owned_check(&out, err)) < 0) {
		lz_path_release(&out);
		return r;
	}
	*ret = out;
	return 0;
}

int lz_path_open(const char *canonical, struct lz_path *ret, struct lz_err *err)
{
	return walk(canonical, false, ret, err);
}

int lz_path_open_owned_root(const char *canonical, struct lz_path *ret, struct lz_err *err)
{
	return walk(canonical, true, ret, err);
}

int lz_path_owned_child(const struct lz_path *parent, const char *name, bool create,
			struct lz_path *ret, struct lz_err *err)
{
	char label[LZ_PATH_MAX + 1];
	size_t n = strlen(name);
	if (n == 0 || n > 255 || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return lz_err_set(err, EINVAL, "invalid directory name '%s'", name);
	if ((size_t)snprintf(label, sizeof(label), "%s/%s",
			     strcmp(parent->canonical, "/") == 0 ? "" : parent->canonical,
			     name) >= sizeof(label))
		return lz_err_set(err, ENAMETOOLONG, "path beneath '%s' is too long", parent->canonical);

	int fd = open_component(parent->fd, name, LZ_RESOLVE_OWNED, label, err);
	if (fd == -ENOENT && create) {
		if (mkdirat(parent->fd, name, 0700) < 0 && errno != EEXIST)
			return lz_err_set(err, errno, "create '%s': %s", label, strerror(errno));
		fd = open_component(parent->fd, name, LZ_RESOLVE_OWNED, label, err);
		int r = fd >= 0 ? fix_mode(fd, label, err) : 0;
		if (r < 0) {
			close(fd);
			return r;
		}
	}
	if (fd < 0)
		return fd;
	struct lz_path out = LZ_PATH_INIT;
	int r = record(fd, label, &out, err);
	if (r < 0) {
		close(fd);
		return r;
	}
	if ((r = owned_check(&out, err)) < 0) {
		lz_path_release(&out);
		return r;
	}
	*ret = out;
	return 0;
}

static bool same_object(const struct lz_path *a, const struct lz_path *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->mnt_id == b->mnt_id;
}

int lz_path_revalidate(const struct lz_path *p, struct lz_err *err)
{
	/* Both the retained descriptor and a fresh walk of the plan (the
	 * canonical label, nothing followed) must be the recorded object. */
	struct lz_path held = LZ_PATH_INIT, now = LZ_PATH_INIT;
	int dup = fcntl(p->fd, F_DUPFD_CLOEXEC, 3);
	if (dup < 0)
		return lz_err_set(err, errno, "revalidate '%s': %s", p->canonical, strerror(errno));
	int r = record(dup, p->canonical, &held, err);
	if (r < 0) {
		close(dup);
		return r;
	}
	bool same = same_object(&held, p);
	lz_path_release(&held);
	if (same) {
		if ((r = walk(p->canonical, false, &now, err)) < 0)
			return lz_err_prefix(err, r, "revalidate: ");
		same = same_object(&now, p);
		lz_path_release(&now);
	}
	if (!same)
		return lz_err_set(err, ESTALE, "'%s' changed identity during loading", p->canonical);
	return 0;
}

bool lz_path_is_beneath(const char *outer, const char *inner)
{
	size_t n = strlen(outer);
	if (strcmp(outer, "/") == 0)
		return strcmp(inner, "/") != 0 && inner[0] == '/';
	return strncmp(outer, inner, n) == 0 && inner[n] == '/';
}

int lz_path_each_link(const char *path, int (*fn)(void *ctx, const char *link, struct lz_err *err), void *ctx,
		      struct lz_err *err)
{
	char done[LZ_PATH_MAX + 1] = "", todo[2 * LZ_PATH_MAX + 2], rest[2 * LZ_PATH_MAX + 2];
	size_t dlen = 0;
	int links = 0;
	if (path[0] != '/' || strlen(path) > LZ_PATH_MAX)
		return lz_err_set(err, EINVAL, "'%s' is not an absolute path of at most %d bytes", path, LZ_PATH_MAX);
	snprintf(todo, sizeof(todo), "%s", path);
	const char *p = todo;
	for (;;) {
		while (*p == '/')
			p++;
		if (*p == '\0')
			return 0;
		size_t clen = strcspn(p, "/");
		if (clen == 1 && p[0] == '.') {
			p += clen;
			continue;
		}
		if (clen == 2 && p[0] == '.' && p[1] == '.') {
			while (dlen > 0 && done[dlen - 1] != '/')
				dlen--;
			if (dlen > 0)
				dlen--;
			done[dlen] = '\0';
			p += clen;
			continue;
		}
		if (dlen + 1 + clen > LZ_PATH_MAX)
			return lz_err_set(err, ENAMETOOLONG, "'%s' resolves past %d bytes", path, LZ_PATH_MAX);
		done[dlen] = '/';
		memcpy(done + dlen + 1, p, clen);
		done[dlen + 1 + clen] = '\0';
		p += clen;
		struct stat st;
		if (lstat(done, &st) < 0)
			return lz_err_set(err, errno, "'%s' (resolving '%s'): %s", done, path, strerror(errno));
		if (!S_ISLNK(st.st_mode)) {
			dlen += 1 + clen;
			continue;
		}
		if (++links > 40)
			return lz_err_set(err, ELOOP, "'%s': more than 40 symbolic links", path);
		int r = fn(ctx, done, err);
		if (r < 0)
			return r;
		char target[LZ_PATH_MAX + 1];
		ssize_t n = readlink(done, target, sizeof(target) - 1);
		if (n < 0)
			return lz_err_set(err, errno, "'%s': %s", done, strerror(errno));
		target[n] = '\0';
		if (target[0] == '/')
			dlen = 0;
		done[dlen] = '\0';
		if ((size_t)snprintf(rest, sizeof(rest), "%s/%s", target, p) >= sizeof(rest))
			return lz_err_set(err, ENAMETOOLONG, "'%s' resolves past %d bytes", path, LZ_PATH_MAX);
		memcpy(todo, rest, strlen(rest) + 1);
		p = todo;
	}
}

bool lz_path_overlaps(const char *a, const char *b)
{
	return strcmp(a, b) == 0 || lz_path_is_beneath(a, b) || lz_path_is_beneath(b, a);
}

void lz_path_release(struct lz_path *p)
{
	if (p == NULL)
		return;
	lz_close_fdp(&p->fd);
	free(p->canonical);
	p->canonical = NULL;
}

int lz_path_check_executable(const struct lz_path *x, struct lz_err *err)
{
	const char *c = x->canonical;
	/* The object as it is now, not as it was opened: a rule's executable
	 * is held from the configuration's load and checked again before
	 * every run (spec 3.8), so a mode, owner or link made since counts. */
	struct stat st;
	if (fstat(x->fd, &st) < 0)
		return lz_err_set(err, errno, "executable '%s': %s", c, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return lz_err_set(err, EINVAL, "executable '%s' is not a regular file", c);
	if (st.st_nlink != 1)
		return lz_err_set(err, EPERM, "executable '%s' has %lu hard links; exactly one hard link is required",
				  c, (unsigned long)st.st_nlink);
	if (st.st_uid != 0 && st.st_uid != getuid())
		return lz_err_set(err, EPERM, "executable '%s' must be owned by root or by you", c);
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return lz_err_set(err, EPERM, "executable '%s' must not grant group or other write", c);
	if (faccessat(x->fd, "", X_OK, AT_EMPTY_PATH | AT_EACCESS) < 0)
		return lz_err_set(err, errno, "executable '%s' is not executable by you: %s", c, strerror(errno));
	return 0;
}
