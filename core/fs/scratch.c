/* The qualification scratch workspace; see scratch.h. */
#include "fs/scratch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/file.h"
#include "fs/tree.h"
#include "util/cleanup.h"
#include "util/sys.h"

static int cache_root(char *buf, size_t size, struct lz_err *err)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	int n;
	if (xdg && xdg[0] == '/')
		n = snprintf(buf, size, "%s/lazaret", xdg);
	else if (home && home[0] == '/')
		n = snprintf(buf, size, "%s/.cache/lazaret", home);
	else
		return lz_err_set(err, ENOENT, "no cache directory: set XDG_CACHE_HOME or HOME to an absolute path");
	if (n < 0 || (size_t)n >= size)
		return lz_err_set(err, ENAMETOOLONG, "cache directory path too long");
	return 0;
}

int lz_scratch_open(const char *name, struct lz_path *ret, struct lz_err *err)
{
	char root_path[PATH_MAX];
	_cleanup_(lz_path_release) struct lz_path root = { .fd = -EBADF };
	struct lz_path dir = { .fd = -EBADF };
	int r;
	if (strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, "..") || !name[0])
		return lz_err_set(err, EINVAL, "scratch name '%s' is not one component", name);
	if ((r = cache_root(root_path, sizeof(root_path), err)) < 0 ||
	    (r = lz_path_open_owned_root(root_path, &root, err)) < 0 ||
	    (r = lz_tree_remove(root.fd, name, err)) < 0 ||
	    (r = lz_path_owned_child(&root, name, true, &dir, err)) < 0)
		return r;
	*ret = dir;
	return 0;
}

static bool rel_ok(const char *rel)
{
	if (!rel[0] || rel[0] == '/')
		return false;
	for (const char *c = rel; *c;) {
		size_t n = strcspn(c, "/");
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		c += n;
		if (*c == '/')
			c++;
		else
			break;
	}
	return rel[strlen(rel) - 1] != '/';
}

/* The directory holding rel's last component, and that component. */
static int open_parent(const struct lz_path *s, const char *rel, int *ret_fd, const char **ret_leaf,
		       struct lz_err *err)
{
	if (!rel_ok(rel))
		return lz_err_set(err, EINVAL, "'%s' is not a relative name beneath the scratch directory", rel);
	const char *slash = strrchr(rel, '/');
	if (slash == NULL) {
		*ret_fd = fcntl(s->fd, F_DUPFD_CLOEXEC, 3);
		*ret_leaf = rel;
	} else {
		char parent[PATH_MAX];
		if ((size_t)(slash - rel) >= sizeof(parent))
			return lz_err_set(err, ENAMETOOLONG, "'%s': name too long", rel);
		memcpy(parent, rel, (size_t)(slash - rel));
		parent[slash - rel] = '\0';
		*ret_fd = lz_openat2(s->fd, parent, O_PATH | O_DIRECTORY | O_CLOEXEC, LZ_RESOLVE_OWNED);
		*ret_leaf = slash + 1;
	}
	if (*ret_fd < 0)
		return lz_err_set(err, errno, "'%s': %s", rel, strerror(errno));
	return 0;
}

int lz_scratch_write(const struct lz_path *s, const char *rel, const void *data, size_t len, struct lz_err *err)
{
	_cleanup_close_ int dir = -EBADF;
	const char *leaf;
	int r = open_parent(s, rel, &dir, &leaf, err);
	if (r < 0)
		return r;
	if (unlinkat(dir, leaf, 0) < 0 && errno != ENOENT)
		return lz_err_set(err, errno, "replace '%s': %s", rel, strerror(errno));
	return lz_file_create(dir, leaf, data, len, 0644, LZ_RESOLVE_OWNED, err);
}

int lz_scratch_mkdir(const struct lz_path *s, const char *rel, struct lz_err *err)
{
	_cleanup_close_ int dir = -EBADF;
	const char *leaf;
	int r = open_parent(s, rel, &dir, &leaf, err);
	if (r < 0)
		return r;
	if (mkdirat(dir, leaf, 0755) < 0)
		return lz_err_set(err, errno, "mkdir '%s': %s", rel, strerror(errno));
	return 0;
}

int lz_scratch_read(const struct lz_path *s, const char *rel, size_t max, char **ret, size_t *ret_len,
		    struct lz_err *err)
{
	struct stat st;
	if (!rel_ok(rel))
		return lz_err_set(err, EINVAL, "'%s' is not a relative name beneath the scratch directory", rel);
	if (max > LZ_SCRATCH_READ_MAX)
		max = LZ_SCRATCH_READ_MAX;
	_cleanup_close_ int fd = lz_openat2(s->fd, rel, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC,
					    LZ_RESOLVE_OWNED);
	if (fd < 0 || fstat(fd, &st) < 0)
		return lz_err_set(err, errno, "'%s': %s", rel, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return lz_err_set(err, EINVAL, "'%s' is not a regular file", rel);
	if ((uint64_t)st.st_size > max)
		return lz_err_set(err, EFBIG, "'%s' is larger than %zu bytes", rel, max);
	char shown[PATH_MAX + 2];
	snprintf(shown, sizeof(shown), "'%s'", rel);
	return lz_fd_read_bounded(fd, max, shown, ret, ret_len, err);
}
