/* The index-lock guard (spec 3.5): Git replaces a repository's index by
 * renaming index.lock over it. A new index that tracks a path the current
 * snapshot routes to the isolated backing (ignored and untracked) is
 * refused with EBUSY, so `git add -f` of an ignored file fails visibly
 * and changes nothing. Spec 3.5 would accept it where a host object
 * exists at the path, and then route the path to that object; that is
 * what made the host's own ignored files reachable (a `.env`, a
 * node_modules/.bin script: tracked for a moment, written, untracked
 * again, hidden from the developer's `git status` ever after), so no
 * such index is accepted whatever the backings hold. A gitlink is asked
 * about as the directory it stands for. The other ways to change an index
 * are refused by the policy (router_policy.c: rt_policy_index). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <git2.h>

#include "router_int.h"
#include "util/escape.h"
#include "util/sys.h"

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
	/* Bounded before libgit2 reads it whole: no write reaches it while
	 * the guard holds index_gate, so the size read here is the size read. */
	struct stat st;
	if (fstat(lock_fd, &st) < 0)
		return -EIO;
	if ((uintmax_t)st.st_size > r->opt.max_index_bytes) {
		char where[LZ_ESCAPE_MAX(256) + 1]; /* a path the sandbox chose */
		lz_escape(dir, dlen, where, sizeof(where));
		lz_router_log("refused a new index of %jd bytes in '%s' (the router reads at most %zu)",
			      (intmax_t)st.st_size, where, r->opt.max_index_bytes);
		return -EFBIG;
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
		if (e == NULL)
			continue;
		int len = snprintf(path, sizeof(path), "%.*s%s%s", (int)wlen, root, wlen ? "/" : "", e->path);
		if (len < 0 || (size_t)len >= sizeof(path)) {
			rc = -EBUSY; /* a path no snapshot could route */
			continue;
		}
		enum lz_route route;
		bool gitlink = (e->mode & 0170000) == 0160000;
		if (rt_route(r, path, (size_t)len, gitlink, &route) < 0 || route == LZ_ROUTE_ISOLATED)
			rc = -EBUSY; /* unroutable (no Git writes such a path), or ignored */
	}
	git_index_free(idx);
	git_libgit2_shutdown();
	return rc;
}
