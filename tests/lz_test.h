/* Helpers shared by the cmocka suites (header-only: each suite is its own
 * executable). Fixture trees are removed with the product's own
 * descriptor-relative removal (core/tree.h). */
#ifndef LZ_TEST_H
#define LZ_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fs/tree.h"

/* In a forked child: unshares flags, behind a user namespace that maps
 * the caller to itself (setgroups denied) unless it is root, which needs
 * none. 0, or -1: the child should _exit. */
static inline int lz_test_unshare_as_self(int flags)
{
	uid_t uid = getuid();
	gid_t gid = getgid();
	if (unshare(uid == 0 ? flags : CLONE_NEWUSER | flags) < 0)
		return -1;
	if (uid == 0)
		return 0;
	char map[64];
	const char *files[] = { "/proc/self/setgroups", "/proc/self/uid_map", "/proc/self/gid_map" };
	for (int i = 0; i < 3; i++) {
		if (i == 0)
			snprintf(map, sizeof(map), "deny");
		else
			snprintf(map, sizeof(map), "%u %u 1", i == 1 ? (unsigned)uid : (unsigned)gid,
				 i == 1 ? (unsigned)uid : (unsigned)gid);
		int fd = open(files[i], O_WRONLY | O_CLOEXEC);
		ssize_t n = fd < 0 ? -1 : write(fd, map, strlen(map));
		if (fd >= 0)
			close(fd);
		if (n != (ssize_t)strlen(map))
			return -1;
	}
	return 0;
}

/* Removes the tree at an absolute path (best effort; for fixtures). */
static inline void lz_test_rmtree(const char *path)
{
	char parent[PATH_MAX];
	const char *slash = strrchr(path, '/');
	if (slash == NULL || slash[1] == '\0' || (size_t)(slash - path) >= sizeof(parent))
		return;
	size_t n = slash == path ? 1 : (size_t)(slash - path);
	memcpy(parent, path, n);
	parent[n] = '\0';
	int dfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;
	(void)lz_tree_remove(dfd, slash + 1, NULL);
	close(dfd);
}

/* The whole file at path in a malloc'd buffer (its length in *len), or
 * NULL when it cannot be opened, sized or read whole. */
static inline char *lz_test_read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	off_t size = fd >= 0 ? lseek(fd, 0, SEEK_END) : -1;
	char *buf = size >= 0 ? malloc((size_t)size + 1) : NULL;
	if (buf != NULL && pread(fd, buf, (size_t)size, 0) != (ssize_t)size) {
		free(buf);
		buf = NULL;
	}
	if (fd >= 0)
		close(fd);
	*len = buf != NULL ? (size_t)size : 0;
	return buf;
}

/* A file of the source tree: under $LZ_TEST_SOURCE_DIR when set (the test
 * command runs the suites as the test user from a copy: the checkout may
 * be unreadable to that user), else where the build found it. */
static inline const char *lz_test_source(const char *rel)
{
	static char path[PATH_MAX];
	const char *root = getenv("LZ_TEST_SOURCE_DIR");
	snprintf(path, sizeof(path), "%s/%s", root != NULL && root[0] ? root : LZ_SOURCE_DIR, rel);
	return path;
}

/* A full descriptor table for a moment: the soft limit lowered to 64 and
 * filled (lz_test_fds_fill), then everything given back
 * (lz_test_fds_release). For code that must fail closed on EMFILE. */
struct lz_test_fds {
	struct rlimit was;
	int fds[64];
	int n;
};

static inline int lz_test_fds_fill(struct lz_test_fds *t)
{
	t->n = 0;
	if (getrlimit(RLIMIT_NOFILE, &t->was) < 0)
		return -1;
	struct rlimit low = { 64, t->was.rlim_max };
	if (setrlimit(RLIMIT_NOFILE, &low) < 0)
		return -1;
	int d;
	while (t->n < 64 && (d = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		t->fds[t->n++] = d;
	return 0;
}

static inline int lz_test_fds_release(struct lz_test_fds *t)
{
	while (t->n > 0)
		close(t->fds[--t->n]);
	return setrlimit(RLIMIT_NOFILE, &t->was);
}

#endif
