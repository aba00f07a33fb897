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
 * must name the trees of its entries, extensions that tell host Git
 * which files to look at are refused, and so are assume-unchanged and
 * skip-worktree marks the current index does not have. The other ways to change an index
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
#include "util/grow.h"
#include "util/sys.h"

/* The guard's time for one index (it holds every write meanwhile):
 * routing is bounded per path, not per index. */
#define GUARD_MS 10000

/* The entries of the current index marked assume-unchanged or
 * skip-worktree (host Git does not look at their files' changes): a new
 * index may keep those marks, not add any. Records of the path's length,
 * the marks and the path, in one arena; at[] in path order. */
struct marked {
	char *arena;
	size_t len, cap;
	size_t *at;
	size_t n, at_cap;
};

#define MARKS (LZ_GITINDEX_ASSUME_UNCHANGED | LZ_GITINDEX_SKIP_WORKTREE)
#define MARK_HDR (sizeof(uint32_t) + 1)

static int mark_entry(void *ctx, const char *path, size_t len, uint32_t mode, unsigned bits)
{
	(void)mode;
	struct marked *m = ctx;
	if (!(bits & MARKS))
		return 0;
	int rc;
	if ((rc = lz_grow(&m->arena, &m->cap, 1, m->len + MARK_HDR + len, SIZE_MAX)) < 0 ||
	    (rc = lz_grow(&m->at, &m->at_cap, sizeof(*m->at), m->n + 1, SIZE_MAX)) < 0)
		return rc;
	uint32_t l = (uint32_t)len;
	m->at[m->n++] = m->len;
	memcpy(m->arena + m->len, &l, sizeof(l));
	m->arena[m->len + sizeof(l)] = (char)(bits & MARKS);
	memcpy(m->arena + m->len + MARK_HDR, path, len);
	m->len += MARK_HDR + len;
	return 0;
}

static int mark_cmp(const struct marked *m, size_t at, const char *path, size_t len)
{
	uint32_t l;
	memcpy(&l, m->arena + at, sizeof(l));
	int c = memcmp(m->arena + at + MARK_HDR, path, l < len ? l : len);
	return c ? c : (l > len) - (l < len);
}

static int mark_order(const void *a, const void *b, void *ctx)
{
	const struct marked *m = ctx;
	size_t bt = *(const size_t *)b;
	uint32_t l;
	memcpy(&l, m->arena + bt, sizeof(l));
	return mark_cmp(m, *(const size_t *)a, m->arena + bt + MARK_HDR, l);
}

/* Whether the current index marks path with every mark in marks. */
static bool marked_as(const struct marked *m, const char *path, size_t len, unsigned marks)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = mark_cmp(m, m->at[mid], path, len);
		if (c == 0)
			return ((unsigned char)m->arena[m->at[mid] + sizeof(uint32_t)] & marks) == marks;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* The current index's marks: none where it cannot be read (a new index
 * then adds none). */
static void read_marks(struct lz_router *r, struct rt_inode *gitdir, struct marked *m)
{
	_cleanup_close_ int dfd = rt_side_dir(r, gitdir, RT_HOST, false);
	_cleanup_close_ int fd =
		dfd < 0 ? -1 : lz_openat2(dfd, "index", O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC, LZ_RESOLVE_CONFINED);
	if (fd < 0 || lz_gitindex_read(fd, r->opt.max_index_bytes, 0, mark_entry, m) < 0) {
		m->n = 0;
		return;
	}
	if (m->n > 1) /* Git writes them in order; a host tool might not */
		qsort_r(m->at, m->n, sizeof(*m->at), mark_order, m);
}

struct guard_walk {
	struct lz_router *r;
	struct rt_inode *gitdir;
	struct marked marked; /* read at the new index's first mark */
	bool marks_read;
	const char *root;
	size_t wlen;
	int64_t until;
	size_t seen;
	char path[PATH_MAX];
};

/* An entry the new index would track, routed as the snapshot routes it:
 * a path Git would not write, one no snapshot could route, or an ignored
 * one refuses the index. */
static int guard_entry(void *ctx, const char *entry, size_t len, uint32_t mode, unsigned bits)
{
	struct guard_walk *w = ctx;
	if (!lz_gitindex_path_ok(entry, len, SIZE_MAX))
		return -EBUSY;
	if ((bits & MARKS) && !w->marks_read) {
		read_marks(w->r, w->gitdir, &w->marked);
		w->marks_read = true;
	}
	if ((bits & MARKS) && !marked_as(&w->marked, entry, len, bits & MARKS))
		return -EPERM;
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
	*w = (struct guard_walk){
		.r = r, .gitdir = gitdir, .root = root, .wlen = wlen, .until = lz_now_ms() + GUARD_MS
	};
	rc = lz_gitindex_read(fd, r->opt.max_index_bytes, LZ_GITINDEX_PLAIN, guard_entry, w);
	free(w->marked.arena);
	free(w->marked.at);
	free(w);
	char why[320];
	why[0] = '\0';
	if (rc == -EFBIG)
		snprintf(why, sizeof(why), "larger than the %zu bytes the router reads", r->opt.max_index_bytes);
	else if (rc == -ETIMEDOUT)
		snprintf(why, sizeof(why), "its paths took more than %d s to check against the ignore rules",
			 GUARD_MS / 1000);
	else if (rc == -E2BIG)
		snprintf(why, sizeof(why), "more than %u directories, or %u MiB of trees or resolve-undo records, to check",
			 LZ_CACHETREE_MAX_DIRS, LZ_CACHETREE_MAX_BYTES >> 20);
	else if (rc == -EILSEQ)
		snprintf(why, sizeof(why), "its cache tree (TREE) names trees other than its entries': host Git "
					   "would commit those");
	else if (rc == -EPERM)
		snprintf(why, sizeof(why), "it marks files assume-unchanged or skip-worktree that the current index "
					   "does not (host git status would not show their changes): set those on the host");
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
