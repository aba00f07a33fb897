/* The index-lock guard (spec 3.5): Git replaces a repository's index by
 * renaming index.lock over it. When the new index would track a path
 * whose only object lies in the isolated backing, the path would become
 * host-routed with nothing on the host (an inconsistent index, EIO on
 * every access); the rename is refused with EBUSY instead, so `git add -f`
 * of an ignored, isolated file fails visibly and changes nothing. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <git2.h>

#include "router_int.h"
#include "util/sys.h"

/* Whether the backing root b holds an object at the workspace path: 1
 * or 0, -errno when that cannot be told (descriptors, memory). */
static int present(struct lz_router *r, enum rt_backing b, const char *path)
{
	int fd = lz_openat2(r->root_fd[b], path, O_PATH | O_NOFOLLOW | O_CLOEXEC, LZ_RESOLVE_CONFINED);
	if (fd >= 0) {
		close(fd);
		return 1;
	}
	return rt_absent(errno) || errno == EXDEV ? 0 : -errno; /* EXDEV: a mount on the way */
}

/* Whether libgit2's last failure was the host's (descriptors, memory),
 * not the file's. */
static bool host_failure(void)
{
	const git_error *e = git_error_last();
	return e != NULL && (e->klass == GIT_ERROR_OS || e->klass == GIT_ERROR_NOMEMORY);
}

int rt_index_guard(struct lz_router *r, struct rt_inode *gitdir, int lock_fd)
{
	char dir[PATH_MAX], root[PATH_MAX], path[PATH_MAX], proc[32];
	size_t dlen, wlen = 0;
	int rc = rt_dir_path(r, gitdir, dir, sizeof(dir), &dlen);
	if (rc < 0)
		return rc;
	/* The worktree this index governs, as the snapshot opened its
	 * repository (a linked worktree's administrative directory, a
	 * submodule's under modules/); else a repository made since, in
	 * "<worktree>/.git". An index of no worktree inside governs nothing
	 * here. */
	rc = r->cls.index_root ? r->cls.index_root(r->cls.ctx, dir, dlen, root, sizeof(root), &wlen) : -ENOENT;
	if (rc == -ENOENT) {
		if (dlen < 4 || memcmp(dir + dlen - 4, ".git", 4) != 0 || (dlen > 4 && dir[dlen - 5] != '/'))
			return 0;
		wlen = dlen == 4 ? 0 : dlen - 5;
		memcpy(root, dir, wlen);
	} else if (rc < 0) {
		return -EIO;
	}
	rc = 0;
	rt_procpath(proc, lock_fd);
	/* Fails closed when the check cannot be made, and Git says its rename
	 * failed: an index libgit2 cannot read (a split or sparse index, which
	 * Git reads) could track anything. */
	if (git_libgit2_init() < 0)
		return -EIO;
	git_index *idx = NULL;
	git_error_clear();
	if (git_index_open(&idx, proc) < 0) {
		rc = host_failure() ? -EIO : -EBUSY;
		git_libgit2_shutdown();
		return rc;
	}
	size_t n = git_index_entrycount(idx);
	for (size_t i = 0; i < n && rc == 0; i++) {
		const git_index_entry *e = git_index_get_byindex(idx, i);
		if (e == NULL || (e->mode & 0170000) == 0160000) /* gitlinks are directories */
			continue;
		int len = snprintf(path, sizeof(path), "%.*s%s%s", (int)wlen, root, wlen ? "/" : "", e->path);
		if (len < 0 || (size_t)len >= sizeof(path))
			continue;
		enum lz_route route;
		if (rt_route(r, path, (size_t)len, false, &route) < 0 || route != LZ_ROUTE_ISOLATED)
			continue;
		int isolated = present(r, RT_ISOLATED, path), host = isolated > 0 ? present(r, RT_HOST, path) : 0;
		if (isolated < 0 || host < 0)
			rc = -EIO;
		else if (isolated && !host)
			rc = -EBUSY;
	}
	git_index_free(idx);
	git_libgit2_shutdown();
	return rc;
}
