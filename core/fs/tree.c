#include "fs/tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc/broker.h"
#include "util/cleanup.h"
#include "util/fdutil.h"
#include "util/sys.h"

/* A tree removal holds two descriptors per level it has entered and goes
 * at most HOIST_DEPTH levels below its top: a directory deeper than that
 * is moved (renamed, never followed) into the top directory under a fresh
 * name and emptied from there in a later pass. A sandbox can nest
 * directories thousands deep; such a tree is removed with bounded
 * descriptors and stack, and anything left by an interrupted removal lies
 * inside the tree, where the next one finds it. */
#define HOIST_DEPTH 64
#define IDLE_PASSES 3 /* passes that moved nothing up, before giving up */

struct removal {
	int top;         /* the directory being removed, once open */
	dev_t dev;       /* its filesystem: nothing on another is entered */
	unsigned long hoisted, serial;
};

static int remove_at(struct removal *rm, int dirfd, const char *name, int depth, struct lz_err *err);

static int empty_dir(struct removal *rm, int fd, int depth, struct lz_err *err)
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
		if ((r = remove_at(rm, fd, de->d_name, depth + 1, err)) < 0)
			break;
	}
	closedir(d);
	return r;
}

/* Makes the directory dirfd/name, stat'ed as st, 0700 through a
 * descriptor of that object, never by its name again: a writer racing the
 * removal could have put a hard link to another file there. 0, or -1 with
 * errno (ENOENT: it went meanwhile; ESTALE: another object is there). */
static int own_dir(int dirfd, const char *name, const struct stat *st)
{
	_cleanup_close_ int p =
		lz_openat2(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, LZ_RESOLVE_OWNED);
	struct stat now;
	if (p < 0 || fstat(p, &now) < 0)
		return -1;
	if (now.st_dev != st->st_dev || now.st_ino != st->st_ino) {
		errno = ESTALE;
		return -1;
	}
	return lz_fd_chmod(p, 0700);
}

/* Moves the directory dirfd/name into the top directory. Moving a
 * directory to another parent rewrites its "..": it must be writable.
 * One that went meanwhile (another removal of the same tree) is done. */
static int hoist(struct removal *rm, int dirfd, const char *name, const struct stat *st, struct lz_err *err)
{
	if ((st->st_mode & 0700) != 0700 && own_dir(dirfd, name, st) < 0)
		return errno == ENOENT ? 0 : lz_err_set(err, errno, "chmod '%s': %s", name, strerror(errno));
	for (;;) {
		char fresh[40];
		snprintf(fresh, sizeof(fresh), ".lz-deep-%lu", rm->serial++);
		if (renameat2(dirfd, name, rm->top, fresh, RENAME_NOREPLACE) == 0) {
			rm->hoisted++;
			return 0;
		}
		if (errno == ENOENT)
			return 0;
		if (errno != EEXIST)
			return lz_err_set(err, errno, "move '%s' up: %s", name, strerror(errno));
	}
}

static int remove_at(struct removal *rm, int dirfd, const char *name, int depth, struct lz_err *err)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : lz_err_set(err, errno, "stat '%s': %s", name, strerror(errno));
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
			return lz_err_set(err, errno, "unlink '%s': %s", name, strerror(errno));
		return 0;
	}
	if (depth > 0 && st.st_dev != rm->dev)
		return lz_err_set(err, EXDEV, "'%s' is on another filesystem; not removing it", name);
	if (depth > HOIST_DEPTH)
		return hoist(rm, dirfd, name, &st, err);
	_cleanup_close_ int fd = lz_openat2(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW,
					    LZ_RESOLVE_OWNED);
	/* 0500-style image directories: make them ours to empty. */
	if (fd < 0 && errno == EACCES && own_dir(dirfd, name, &st) == 0)
		fd = lz_openat2(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW, LZ_RESOLVE_OWNED);
	/* Gone since the stat: removed by another removal of the same tree
	 * (two Domains' removals share the parked trees), as missing is. */
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return lz_err_set(err, errno, "open '%s': %s", name, strerror(errno));
	if ((st.st_mode & 0700) != 0700 && fchmod(fd, 0700) < 0)
		return lz_err_set(err, errno, "chmod '%s': %s", name, strerror(errno));
	if (depth == 0) {
		rm->top = fd;
		rm->dev = st.st_dev;
	}
	/* Unlinking while reading a directory stream may skip entries, and
	 * directories moved up land in the top: passes go on while they
	 * move something up, and a few more pick up what one missed. */
	for (int idle = 0; idle < IDLE_PASSES;) {
		unsigned long hoisted = rm->hoisted;
		int r = empty_dir(rm, fd, depth, err);
		if (r < 0)
			return lz_err_prefix(err, r, "%s/", name);
		if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
			return 0;
		if (errno != ENOTEMPTY)
			break;
		idle = rm->hoisted != hoisted ? 0 : idle + 1;
	}
	return lz_err_set(err, errno, "rmdir '%s': %s", name, strerror(errno));
}

int lz_tree_remove(int dirfd, const char *name, struct lz_err *err)
{
	if (name[0] == '\0' || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return lz_err_set(err, EINVAL, "invalid name '%s'", name);
	struct removal rm = { .top = -EBADF };
	return remove_at(&rm, dirfd, name, 0, err);
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
