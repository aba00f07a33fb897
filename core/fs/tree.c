#include "fs/tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc/broker.h"
#include "util/cleanup.h"
#include "util/sys.h"

static int remove_at(int dirfd, const char *name, dev_t dev, int depth, struct lz_err *err);

static int empty_dir(int fd, dev_t dev, int depth, struct lz_err *err)
{
	int dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (dup < 0)
		return lz_err_set(err, errno, "dup: %s", strerror(errno));
	DIR *d = fdopendir(dup);
	if (d == NULL) {
		int e = errno;
		close(dup);
		return lz_err_set(err, e, "opendir: %s", strerror(e));
	}
	rewinddir(d); /* the dup shares the offset of an earlier pass */
	int r = 0;
	struct dirent *de;
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (de == NULL) {
			if (errno)
				r = lz_err_set(err, errno, "readdir: %s", strerror(errno));
			break;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if ((r = remove_at(fd, de->d_name, dev, depth + 1, err)) < 0)
			break;
	}
	closedir(d);
	return r;
}

static int remove_at(int dirfd, const char *name, dev_t dev, int depth, struct lz_err *err)
{
	struct stat st;
	if (depth > LZ_TREE_MAX_DEPTH)
		return lz_err_set(err, ELOOP, "tree deeper than %d levels", LZ_TREE_MAX_DEPTH);
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : lz_err_set(err, errno, "stat '%s': %s", name, strerror(errno));
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
			return lz_err_set(err, errno, "unlink '%s': %s", name, strerror(errno));
		return 0;
	}
	if (dev != 0 && st.st_dev != dev)
		return lz_err_set(err, EXDEV, "'%s' is on another filesystem; not removing it", name);
	_cleanup_close_ int fd = lz_openat2(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW,
					    LZ_RESOLVE_OWNED);
	if (fd < 0 && errno == EACCES) {
		/* 0500-style image directories: make them ours to empty. */
		_cleanup_close_ int p = lz_openat2(dirfd, name, O_PATH | O_DIRECTORY | O_CLOEXEC,
						   LZ_RESOLVE_OWNED);
		if (p >= 0 && fchmodat(dirfd, name, 0700, AT_SYMLINK_NOFOLLOW) == 0)
			fd = lz_openat2(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW,
					LZ_RESOLVE_OWNED);
	}
	if (fd < 0)
		return lz_err_set(err, errno, "open '%s': %s", name, strerror(errno));
	if ((st.st_mode & 0700) != 0700 && fchmod(fd, 0700) < 0)
		return lz_err_set(err, errno, "chmod '%s': %s", name, strerror(errno));
	/* Unlinking while reading a directory stream may skip entries; a
	 * second pass picks up what the first one missed. */
	for (int pass = 0; pass < 3; pass++) {
		int r = empty_dir(fd, st.st_dev, depth, err);
		if (r < 0)
			return lz_err_prefix(err, r, "%s/", name);
		if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
			return 0;
		if (errno != ENOTEMPTY)
			break;
	}
	return lz_err_set(err, errno, "rmdir '%s': %s", name, strerror(errno));
}

int lz_tree_remove(int dirfd, const char *name, struct lz_err *err)
{
	if (name[0] == '\0' || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return lz_err_set(err, EINVAL, "invalid name '%s'", name);
	return remove_at(dirfd, name, 0, 0, err);
}

struct remove_arg {
	int dirfd;
	const char *name;
};

static int worker_remove(void *argp, struct lz_err *err)
{
	struct remove_arg *a = argp;
	return lz_tree_remove(a->dirfd, a->name, err);
}

int lz_tree_remove_in_userns(const struct lz_idmap *map, int dirfd, const char *name,
			     struct lz_err *err)
{
	struct remove_arg arg = { dirfd, name };
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	struct lz_broker_spec spec = { .label = "removal worker", .clone_flags = CLONE_NEWUSER,
				       .map = map, .join_pidfd = -1, .fn = worker_remove, .arg = &arg };
	int status = 0;
	int r = lz_broker_spawn(&spec, &child, err);
	if (r < 0 || (r = lz_broker_wait(&child, -1, &status, err)) < 0)
		return r;
	/* A worker killed before it could report has removed nothing for
	 * sure: that is a failure, not a silent success. */
	if (status != 0)
		return lz_err_set(err, EIO, "the removal worker of %s ended with status %d", name, status);
	return 0;
}
