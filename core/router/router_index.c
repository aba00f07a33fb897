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
 * about as the directory it stands for. What else in the file host Git
 * trusts is checked too (gitindex.h, LZ_GITINDEX_PLAIN): its cache tree
 * must name the trees of its entries, and extensions that tell host Git
 * which files to look at are refused. The other ways to change an index
 * are refused by the policy (router_policy.c: rt_policy_index). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc/spawn.h"
#include "router/gitcachetree.h"
#include "router/gitindex.h"
#include "router_int.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/sys.h"

/* The guard's time for one index (it holds every write meanwhile):
 * routing is bounded per path, not per index. */
#define GUARD_MS 10000

struct guard_walk {
	struct lz_router *r;
	const char *root;
	size_t wlen;
	int64_t until;
	size_t seen;
	char path[PATH_MAX];
};

/* An entry the new index would track, routed as the snapshot routes it:
 * a path Git would not write, one no snapshot could route, or an ignored
 * one refuses the index. */
static int guard_entry(void *ctx, const char *entry, size_t len, uint32_t mode, unsigned stage)
{
	(void)stage;
	struct guard_walk *w = ctx;
	if (!lz_gitindex_path_ok(entry, len, SIZE_MAX))
		return -EBUSY;
	if (++w->seen % 256 == 0 && lz_now_ms() > w->until)
		return -ETIMEDOUT;
	int n = snprintf(w->path, sizeof(w->path), "%.*s%s%.*s", (int)w->wlen, w->root, w->wlen ? "/" : "",
			 (int)len, entry);
	if (n < 0 || (size_t)n >= sizeof(w->path))
		return -EBUSY;
	enum lz_route route;
	bool gitlink = (mode & 0170000) == 0160000;
	if (rt_route(w->r, w->path, (size_t)n, gitlink, &route) < 0 || route == LZ_ROUTE_ISOLATED)
		return -EBUSY;
	return 0;
}

int rt_index_guard(struct lz_router *r, struct rt_inode *gitdir, int lock_fd)
{
	char dir[PATH_MAX], root[PATH_MAX], proc[32];
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
	/* Read as Git will read it (gitindex.h), one entry at a time; no
	 * write reaches it while the guard holds index_gate. Fails closed
	 * when the check cannot be made, and Git says its rename failed: an
	 * index the reader refuses (a split or sparse one, which Git reads)
	 * could track anything. */
	rt_procpath(proc, lock_fd);
	_cleanup_close_ int fd = open(proc, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == EMFILE || errno == ENFILE || errno == ENOMEM ? -EIO : -EBUSY;
	struct guard_walk *w = malloc(sizeof(*w));
	if (w == NULL)
		return -EIO;
	*w = (struct guard_walk){ .r = r, .root = root, .wlen = wlen, .until = lz_now_ms() + GUARD_MS };
	rc = lz_gitindex_read(fd, r->opt.max_index_bytes, LZ_GITINDEX_PLAIN, guard_entry, w);
	free(w);
	char why[320];
	why[0] = '\0';
	if (rc == -EFBIG)
		snprintf(why, sizeof(why), "larger than the %zu bytes the router reads", r->opt.max_index_bytes);
	else if (rc == -ETIMEDOUT)
		snprintf(why, sizeof(why), "its paths took more than %d s to check against the ignore rules",
			 GUARD_MS / 1000);
	else if (rc == -E2BIG)
		snprintf(why, sizeof(why), "more than %u directories or %u MiB of trees to check",
			 LZ_CACHETREE_MAX_DIRS, LZ_CACHETREE_MAX_BYTES >> 20);
	else if (rc == -EILSEQ)
		snprintf(why, sizeof(why), "its cache tree (TREE) names trees other than its entries': host Git "
					   "would commit those");
	else if (rc == -EOPNOTSUPP)
		snprintf(why, sizeof(why), "it carries an untracked cache, an fsmonitor token or a threaded index's "
					   "offsets, which host Git would trust; Git inside writes none unless the "
					   "profile sets GIT_CONFIG_* variables");
	if (why[0] != '\0') {
		char where[LZ_ESCAPE_MAX(256) + 1]; /* a path the sandbox chose */
		lz_escape(dir, dlen, where, sizeof(where));
		lz_router_log("refused a new index in '%s': %s", where, why);
		return rc == -EFBIG ? -EFBIG : -EBUSY;
	}
	if (rc == -ENOMEM || rc == -EIO)
		return -EIO; /* the host's shortage, not the file's */
	return rc < 0 ? -EBUSY : 0;
}
