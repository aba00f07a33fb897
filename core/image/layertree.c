/* The staging tree beneath its root (see layertree.h for the contract).
 *
 * Resolution. The staging tree is written only by this worker, so a path can
 * be resolved again from the root, but always with openat2 confined beneath
 * the root without symlinks, magic links or mount crossings
 * (LZ_RESOLVE_OWNED); the final component is then acted on relative to that
 * parent with AT_SYMLINK_NOFOLLOW / O_NOFOLLOW / O_EXCL, or with calls that
 * never follow a final symlink (unlinkat, mkdirat, symlinkat, mknodat,
 * linkat without AT_SYMLINK_FOLLOW).
 *
 * Removal never holds more than two directory descriptors at a time (deep
 * trees must not exhaust RLIMIT_NOFILE): a directory is listed, closed, and
 * re-opened from the root for each level. */
#include "image/layertree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/sys.h"

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452 /* Linux 6.6, same number on every architecture */
#endif

struct names {
	char **v;
	size_t n, cap;
};

static void names_free(struct names *ns)
{
	for (size_t i = 0; i < ns->n; i++)
		free(ns->v[i]);
	free(ns->v);
	*ns = (struct names){ 0 };
}

static int names_push(struct names *ns, const char *s)
{
	if (ns->n == ns->cap) {
		size_t cap = ns->cap ? ns->cap * 2 : 16;
		char **v = reallocarray(ns->v, cap, sizeof(*v));
		if (v == NULL)
			return -ENOMEM;
		ns->v = v;
		ns->cap = cap;
	}
	if ((ns->v[ns->n] = strdup(s)) == NULL)
		return -ENOMEM;
	ns->n++;
	return 0;
}

int lz_layertree_open(const struct lz_layertree *t, const char *rel, int flags)
{
	int fd = lz_openat2(t->root, rel[0] ? rel : ".", flags | O_DIRECTORY | O_CLOEXEC,
			    LZ_RESOLVE_OWNED);
	return fd < 0 ? -errno : fd;
}

int lz_layertree_dir_error(const struct lz_layertree *t, int e, const char *entry, const char *rel)
{
	switch (e) {
	case ELOOP:
		return lz_err_set(t->err, EINVAL,
				  "layer entry '%s' refused: '%s' is or crosses a symbolic link",
				  lz_layerpath_shown(entry), lz_layerpath_shown(rel));
	case EXDEV:
		return lz_err_set(t->err, EINVAL,
				  "layer entry '%s' refused: '%s' escapes the staging root or "
				  "crosses a mount",
				  lz_layerpath_shown(entry), lz_layerpath_shown(rel));
	case ENOTDIR:
		return lz_err_set(t->err, EINVAL,
				  "layer entry '%s' refused: '%s' has a non-directory component",
				  lz_layerpath_shown(entry), lz_layerpath_shown(rel));
	default:
		return lz_layerpath_fail(t->err, e, entry, "open directory", rel);
	}
}

/* fchmodat2 (Linux 6.6) does it in one call; before that, the staging tree
 * has a single writer, so a check that name is not a symlink cannot go
 * stale. */
int lz_layertree_chmod_nofollow(int dirfd, const char *name, mode_t mode)
{
	if (syscall(SYS_fchmodat2, dirfd, name, mode, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	if (errno != ENOSYS)
		return -errno;
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (S_ISLNK(st.st_mode))
		return -ELOOP;
	return fchmodat(dirfd, name, mode, 0) < 0 ? -errno : 0;
}

int lz_layertree_make_dir(int dirfd, const char *name, mode_t mode)
{
	if (mkdirat(dirfd, name, mode) < 0)
		return -errno;
	return lz_layertree_chmod_nofollow(dirfd, name, mode);
}

int lz_layertree_open_dir(const struct lz_layertree *t, const char *rel, bool create,
			  const char *entry, int *ret_fd)
{
	int fd = lz_layertree_open(t, rel, O_PATH);
	if (fd >= 0) {
		*ret_fd = fd;
		return 0;
	}
	if (!create && (fd == -ENOENT || fd == -ENOTDIR))
		return fd;
	if (fd != -ENOENT)
		return lz_layertree_dir_error(t, -fd, entry, rel);

	/* Walk from the root, creating what is missing. */
	_cleanup_close_ int cur = lz_layertree_open(t, "", O_PATH);
	if (cur < 0)
		return lz_layerpath_fail(t->err, -cur, entry, "open directory", "");
	char prefix[LZ_LAYER_PATH_MAX + 1];
	size_t plen = 0;
	for (const char *c = rel; *c;) {
		size_t n = strcspn(c, "/");
		char name[LZ_LAYER_NAME_MAX + 1];
		memcpy(name, c, n);
		name[n] = '\0';
		c += n + (c[n] == '/');
		if (lz_layerpath_push(prefix, &plen, name) < 0)
			return lz_layerpath_fail(t->err, ENAMETOOLONG, entry, "open directory",
						 rel);

		int next =
			lz_openat2(cur, name, O_PATH | O_DIRECTORY | O_CLOEXEC, LZ_RESOLVE_OWNED);
		if (next < 0 && errno == ENOENT) {
			int r = t->implied != NULL ? t->implied(t->implied_ctx, entry, prefix) : 0;
			if (r < 0)
				return r;
			r = lz_layertree_make_dir(cur, name, 0755);
			if (r < 0 && r != -EEXIST)
				return lz_layerpath_fail(t->err, -r, entry, "create directory",
							 prefix);
			next = lz_openat2(cur, name, O_PATH | O_DIRECTORY | O_CLOEXEC,
					  LZ_RESOLVE_OWNED);
		}
		if (next < 0)
			return lz_layertree_dir_error(t, errno, entry, prefix);
		lz_close_fdp(&cur);
		cur = next;
	}
	*ret_fd = TAKE_FD(cur);
	return 0;
}

/* Lists the names in directory fd (consumed), "." and ".." excluded. */
static int list_dir(int fd, struct names *ret)
{
	DIR *d = fdopendir(fd);
	if (d == NULL) {
		int e = errno;
		close(fd);
		return -e;
	}
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (de == NULL) {
			int e = errno;
			closedir(d);
			return -e;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		int r = names_push(ret, de->d_name);
		if (r < 0) {
			closedir(d);
			return r;
		}
	}
}

/* Empties the directory at path (a buffer of capacity LZ_LAYER_PATH_MAX + 1
 * holding *len bytes; restored on return). Symlinks are unlinked, never
 * followed; subdirectories are emptied then removed. */
static int empty_dir(const struct lz_layertree *t, char *path, size_t *len, const char *entry)
{
	_cleanup_(names_free) struct names ns = { 0 };
	_cleanup_(names_free) struct names subs = { 0 };
	int fd = lz_layertree_open(t, path, O_RDONLY);
	if (fd < 0)
		return lz_layertree_dir_error(t, -fd, entry, path);
	_cleanup_close_ int dfd = lz_layertree_open(t, path, O_PATH);
	if (dfd < 0) {
		close(fd);
		return lz_layertree_dir_error(t, -dfd, entry, path);
	}
	int r = list_dir(fd, &ns);
	if (r < 0)
		return lz_layerpath_fail(t->err, -r, entry, "list directory", path);
	for (size_t i = 0; i < ns.n; i++) {
		if (unlinkat(dfd, ns.v[i], 0) == 0 || errno == ENOENT)
			continue;
		if (errno != EISDIR)
			return lz_layerpath_fail(t->err, errno, entry, "remove", ns.v[i]);
		if ((r = names_push(&subs, ns.v[i])) < 0)
			return lz_layerpath_fail(t->err, -r, entry, "remove", ns.v[i]);
	}
	lz_close_fdp(&dfd); /* one descriptor per level at most */

	size_t old = *len;
	for (size_t i = 0; i < subs.n; i++) {
		if (lz_layerpath_push(path, len, subs.v[i]) < 0)
			return lz_layerpath_fail(t->err, ENAMETOOLONG, entry, "remove", path);
		r = empty_dir(t, path, len, entry);
		lz_layerpath_pop(path, len, old);
		if (r < 0)
			return r;
	}
	if (subs.n > 0) {
		dfd = lz_layertree_open(t, path, O_PATH);
		if (dfd < 0)
			return lz_layertree_dir_error(t, -dfd, entry, path);
		for (size_t i = 0; i < subs.n; i++)
			if (unlinkat(dfd, subs.v[i], AT_REMOVEDIR) < 0 && errno != ENOENT)
				return lz_layerpath_fail(t->err, errno, entry, "remove directory",
							 subs.v[i]);
	}
	return 0;
}

int lz_layertree_remove(const struct lz_layertree *t, int dirfd, const char *name, char *path,
			size_t *len, const char *entry)
{
	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR)
		return lz_layerpath_fail(t->err, errno, entry, "remove", path);
	int r = empty_dir(t, path, len, entry);
	if (r < 0)
		return r;
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return lz_layerpath_fail(t->err, errno, entry, "remove directory", path);
	return 0;
}

int lz_layertree_prune(const struct lz_layertree *t, char *path, size_t *len, const char *entry,
		       lz_layertree_keep_fn keep, lz_layertree_descend_fn descend, void *ctx)
{
	_cleanup_(names_free) struct names ns = { 0 };
	_cleanup_(names_free) struct names kept = { 0 };
	int fd = lz_layertree_open(t, path, O_RDONLY);
	if (fd == -ENOENT || fd == -ENOTDIR)
		return 0;
	if (fd < 0)
		return lz_layertree_dir_error(t, -fd, entry, path);
	_cleanup_close_ int dfd = lz_layertree_open(t, path, O_PATH);
	if (dfd < 0) {
		close(fd);
		return lz_layertree_dir_error(t, -dfd, entry, path);
	}
	int r = list_dir(fd, &ns);
	if (r < 0)
		return lz_layerpath_fail(t->err, -r, entry, "list directory", path);

	size_t old = *len;
	for (size_t i = 0; i < ns.n; i++) {
		if (lz_layerpath_push(path, len, ns.v[i]) < 0)
			return lz_layerpath_fail(t->err, ENAMETOOLONG, entry, "remove", path);
		r = 0;
		if (keep(ctx, path, *len)) {
			struct stat st;
			if (fstatat(dfd, ns.v[i], &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISDIR(st.st_mode))
				r = names_push(&kept, ns.v[i]);
		} else {
			r = lz_layertree_remove(t, dfd, ns.v[i], path, len, entry);
		}
		lz_layerpath_pop(path, len, old);
		if (r < 0)
			return r == -ENOMEM
				       ? lz_layerpath_fail(t->err, ENOMEM, entry, "prune", path)
				       : r;
	}
	lz_close_fdp(&dfd);
	for (size_t i = 0; i < kept.n; i++) {
		if (lz_layerpath_push(path, len, kept.v[i]) < 0)
			return lz_layerpath_fail(t->err, ENAMETOOLONG, entry, "prune", path);
		r = descend(ctx, path, *len);
		if (r > 0)
			r = lz_layertree_prune(t, path, len, entry, keep, descend, ctx);
		lz_layerpath_pop(path, len, old);
		if (r < 0)
			return r;
	}
	return 0;
}

int lz_layertree_make_room(const struct lz_layertree *t, int pfd, const struct lz_layerpath *p,
			   bool keep_dir, struct stat *ret_st)
{
	struct stat st;
	if (fstatat(pfd, p->name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return lz_layerpath_fail(t->err, errno, p->full, "stat", p->full);
	}
	if (keep_dir && S_ISDIR(st.st_mode)) {
		if (ret_st)
			*ret_st = st;
		return 1;
	}
	char buf[LZ_LAYER_PATH_MAX + 1];
	size_t len = p->len;
	memcpy(buf, p->full, len + 1);
	int r = lz_layertree_remove(t, pfd, p->name, buf, &len, p->full);
	return r < 0 ? r : 0;
}
