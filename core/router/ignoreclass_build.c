/* Building a classification snapshot (design notes in ignoreclass.c): the
 * node table, the ignore files read confined beneath the workspace, and
 * the index through libgit2. */
#include "router/ignoreclass_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <git2.h>

#include "router/gitindex.h"
#include "util/cleanup.h"
#include "util/fdutil.h"
#include "util/grow.h"
#include "util/sys.h"

/* ---- node table ----------------------------------------------------------- */

int ic_grow(void **p, uint32_t *cap, size_t elem, uint32_t need, uint32_t max)
{
	size_t c = *cap;
	int rc = lz_grow(p, &c, elem, need, max);
	*cap = (uint32_t)c; /* at most max */
	return rc;
}

int ic_text_add(lz_ignoreclass *s, const uint8_t *b, size_t n, uint32_t *ret_off)
{
	if (s->n_text + n > TEXT_MAX)
		return -E2BIG;
	/* Allocated even for no bytes (a bare workspace's root guard): the
	 * text's offsets are compared with memcmp, never on NULL. */
	if (s->n_text + n > s->cap_text || s->text == NULL) {
		size_t nc = s->cap_text ? s->cap_text : 4096;
		while (nc < s->n_text + n)
			nc *= 2;
		uint8_t *q = realloc(s->text, nc);
		if (q == NULL)
			return -ENOMEM;
		s->text = q;
		s->cap_text = nc;
	}
	memcpy(s->text + s->n_text, b, n);
	*ret_off = (uint32_t)s->n_text;
	s->n_text += n;
	return 0;
}

static void edge_put(lz_ignoreclass *s, uint32_t id)
{
	const struct node *c = &s->nodes[id];
	bool icase = s->repos[s->nodes[c->parent].repo].icase;
	uint32_t tag = ic_name_hash(c->parent, s->text + c->name_off, c->name_len, icase);
	uint32_t i = tag & s->edge_mask;
	while (s->edges[i].id != NONE)
		i = (i + 1) & s->edge_mask;
	s->edges[i] = (struct edge){ .id = id, .tag = tag };
}

static int edges_resize(lz_ignoreclass *s, uint32_t cap)
{
	struct edge *e = calloc(cap, sizeof(*e));
	if (e == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < cap; i++)
		e[i].id = NONE;
	free(s->edges);
	s->edges = e;
	s->edge_mask = cap - 1;
	for (uint32_t id = 1; id < s->n_nodes; id++)
		edge_put(s, id);
	return 0;
}

static int node_add(lz_ignoreclass *s, uint32_t parent, const uint8_t *n, size_t len,
		    uint32_t *ret)
{
	if (len > NAME_MAX_BYTES || s->nodes[parent].depth >= COMP_MAX - 1)
		return -ENAMETOOLONG;
	int r = ic_grow((void **)&s->nodes, &s->cap_nodes, sizeof(*s->nodes), s->n_nodes + 1, NODES_MAX);
	if (r < 0)
		return r;
	uint32_t off;
	r = ic_text_add(s, n, len, &off);
	if (r < 0)
		return r;
	uint32_t id = s->n_nodes++;
	s->nodes[id] = (struct node){ .parent = parent, .name_off = off, .name_len = (uint16_t)len,
				      .depth = (uint16_t)(s->nodes[parent].depth + 1),
				      .repo = s->nodes[parent].repo };
	if ((uint64_t)s->n_nodes * 2 > (uint64_t)s->edge_mask + 1) {
		r = edges_resize(s, (s->edge_mask + 1) * 2);
		if (r < 0)
			return r;
	} else {
		edge_put(s, id);
	}
	*ret = id;
	return 0;
}

static int node_get(lz_ignoreclass *s, uint32_t parent, const uint8_t *n, size_t len,
		    uint32_t *ret)
{
	uint32_t id = ic_lookup(s, parent, n, len);
	if (id != NONE) {
		*ret = id;
		return 0;
	}
	return node_add(s, parent, n, len, ret);
}

/* ---- ignore files ----------------------------------------------------------- */

/* One gitignore line (no newline) -> a compiled pattern (gitignore(5)). */
static int pattern_add(lz_ignoreclass *s, const uint8_t *b, size_t n)
{
	/* Trailing spaces go unless escaped with a backslash; a line ending
	 * in a lone backslash keeps everything. */
	size_t cut = SIZE_MAX;
	for (size_t i = 0; i < n; i++) {
		if (b[i] == ' ') {
			if (cut == SIZE_MAX)
				cut = i;
			continue;
		}
		if (b[i] == '\\' && ++i == n) {
			cut = SIZE_MAX;
			break;
		}
		cut = SIZE_MAX;
	}
	if (cut != SIZE_MAX)
		n = cut;
	uint8_t flags = 0;
	if (n && b[0] == '!') {
		flags |= P_NEG;
		b++;
		n--;
	}
	if (n && b[n - 1] == '/') {
		flags |= P_MUSTBEDIR;
		n--;
	}
	if (memchr(b, '/', n) == NULL) {
		flags |= P_BASENAME;
	} else if (b[0] == '/') {
		b++;
		n--;
	}
	if (n == 0 || n > PATTERN_LEN_MAX)
		return 0; /* matches no name / refused */
	size_t lit = 0;
	while (lit < n && !lz_wm_special(b[lit]))
		lit++;
	uint8_t kind = K_GLOB;
	if (lit == n)
		kind = K_LITERAL;
	else if (b[0] == '*') {
		size_t i = 1;
		while (i < n && !lz_wm_special(b[i]))
			i++;
		if (i == n)
			kind = K_SUFFIX;
	}
	int r = ic_grow((void **)&s->pats, &s->cap_pats, sizeof(*s->pats), s->n_pats + 1, PATTERNS_MAX);
	if (r < 0)
		return r;
	uint32_t off;
	r = ic_text_add(s, b, n, &off);
	if (r < 0)
		return r;
	s->pats[s->n_pats++] = (struct pat){ .off = off, .len = (uint32_t)n,
					     .prefix = (uint32_t)lit, .flags = flags, .kind = kind };
	return 0;
}

static int patterns_parse(lz_ignoreclass *s, const uint8_t *buf, size_t len, uint32_t *ret_first,
			  uint32_t *ret_n)
{
	uint32_t first = s->n_pats;
	size_t i = 0;
	if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0)
		i = 3;
	while (i < len) {
		const uint8_t *nl = memchr(buf + i, '\n', len - i);
		size_t e = nl ? (size_t)(nl - buf) : len;
		if (e > i && buf[i] != '#') {
			size_t end = e;
			if (buf[end - 1] == '\r')
				end--;
			const uint8_t *z = memchr(buf + i, '\0', end - i); /* Git reads C strings */
			if (z)
				end = (size_t)(z - buf);
			int r = pattern_add(s, buf + i, end - i);
			if (r < 0)
				return r;
		}
		i = e + 1;
	}
	*ret_first = first;
	*ret_n = s->n_pats - first;
	return 0;
}

/* Reads fd (a regular file, at most IGNORE_FILE_MAX bytes) into patterns.
 * Anything but a regular file counts as no file. */
static int patterns_read_fd(lz_ignoreclass *s, int fd, uint32_t *first, uint32_t *n)
{
	struct stat st;
	*first = s->n_pats;
	*n = 0;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return 0;
	if (st.st_size > (off_t)IGNORE_FILE_MAX)
		return -EFBIG;
	_cleanup_free_ uint8_t *buf = malloc((size_t)st.st_size + 1);
	if (buf == NULL)
		return -ENOMEM;
	size_t got = 0;
	for (;;) {
		ssize_t k = read(fd, buf + got, (size_t)st.st_size + 1 - got);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			break;
		got += (size_t)k;
		if (got > (size_t)st.st_size)
			return -EFBIG; /* grew while read */
	}
	return patterns_parse(s, buf, got, first, n);
}

/* Whether an open's errno means there is no file to read there: missing,
 * a symlink anywhere on the way, a non-directory parent, or a socket. */
static bool no_file(int e)
{
	return e == ENOENT || e == ENOTDIR || e == ELOOP || e == EACCES || e == EXDEV || e == EISDIR ||
	       e == ENXIO;
}

/* Opens name beneath dirfd, confined; "no file" (no_file) is 1. Never
 * blocks: a FIFO the sandbox put where an ignore file would be is opened
 * O_NONBLOCK, then counts as no file (patterns_read_fd). */
static int open_confined(int dirfd, const char *name, int flags, int *ret_fd)
{
	if (!(flags & O_PATH)) /* openat2 refuses O_NONBLOCK with O_PATH */
		flags |= O_NONBLOCK;
	int fd = lz_openat2(dirfd, name, flags | O_CLOEXEC, LZ_RESOLVE_CONFINED);
	if (fd < 0) {
		int e = errno;
		if (no_file(e))
			return 1;
		return -e;
	}
	*ret_fd = fd;
	return 0;
}

/* ---- build ------------------------------------------------------------------ */

struct build {
	lz_ignoreclass *s;
	int ws_fd;
	struct lz_err *err;
	char ws_real[LZ_PATH_MAX + 2]; /* the workspace's host path, with a final '/' */
	char path[LZ_PATH_MAX + 1];
	size_t len;
	uint16_t starts[COMP_MAX];
	uint64_t steps; /* what pattern matching may still take (ignoreclass.h) */
	uint64_t min_steps; /* what each part may take at least */
};

/* Pattern matching ran out of steps at path (a directory or file name
 * below the workspace): rules written to be slow, or beyond what any
 * real tree needs. */
static int too_costly(struct lz_err *err, const char *path)
{
	return lz_err_set(err, E2BIG,
			  "the workspace's ignore rules take too long to match (stopped at '%.200s'): look for "
			  "a .gitignore with many long wildcard patterns",
			  path);
}

static int git_fail(struct lz_err *err, const char *what, const char *where)
{
	const git_error *e = git_error_last();
	return lz_err_set(err, EIO, "ignoreclass: %s '%s': %s", what, where,
			  e && e->message ? e->message : "libgit2 error");
}

/* A path a query can name and Git writes (gitindex.h). */
static bool index_path_ok(const char *p, size_t len)
{
	return len > 0 && len <= LZ_PATH_MAX && lz_gitindex_path_ok(p, len, NAME_MAX_BYTES);
}

/* The index's entries become tracked nodes: each is relative to the
 * repository's root (b->path), so its node has the root's path, '/', then
 * the entry. One whose workspace path is longer than LZ_PATH_MAX is
 * skipped, as the walk skips such directories: no query can name it (the
 * router answers ENAMETOOLONG first), and decide_all builds every node's
 * path in a buffer of that size. */
struct index_walk {
	struct build *b;
	uint32_t root;
	size_t root_room;
};

static int index_entry(void *ctx, const char *path, size_t len, uint32_t mode, unsigned bits)
{
	(void)bits;
	struct index_walk *w = ctx;
	lz_ignoreclass *s = w->b->s;
	if (!index_path_ok(path, len) || w->root_room + len > LZ_PATH_MAX)
		return 0;
	const uint8_t *p = (const uint8_t *)path;
	size_t at = 0;
	uint32_t cur = w->root;
	while (at < len) {
		const uint8_t *sl = memchr(p + at, '/', len - at);
		size_t end = sl ? (size_t)(sl - p) : len;
		if (cur != w->root)
			s->nodes[cur].flags |= N_BELOW;
		int r = node_get(s, cur, p + at, end - at, &cur);
		if (r < 0)
			return r;
		at = end + 1;
	}
	s->nodes[cur].flags |= N_TRACKED;
	if (mode == GIT_FILEMODE_COMMIT)
		s->nodes[cur].flags |= N_GITLINK;
	return 0;
}

/* The repository's index (none: nothing tracked), as libgit2 finds it:
 * "index" in its Git directory (a linked worktree's own). */
static int read_index(git_repository *g, struct index_walk *w)
{
	const char *gitdir = git_repository_path(g);
	_cleanup_close_ int dfd = open(gitdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return lz_err_set(w->b->err, errno, "ignoreclass: read index of '%s': %s", gitdir, strerror(errno));
	_cleanup_close_ int fd = openat(dfd, "index", O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return lz_err_set(w->b->err, errno, "ignoreclass: read index of '%s': %s", gitdir, strerror(errno));
	int r = lz_gitindex_read(fd, UINT64_MAX, 0, index_entry, w);
	if (r == -E2BIG)
		return lz_err_set(w->b->err, E2BIG, "ignoreclass: index of '%s' too large", gitdir);
	if (r == -EBADMSG)
		return lz_err_set(w->b->err, EIO, "ignoreclass: read index of '%s': not an index Git and libgit2 "
				  "read alike (changed, cut short, split or sparse)", gitdir);
	if (r < 0)
		return lz_err_set(w->b->err, -r, "ignoreclass: read index of '%s': %s", gitdir, strerror(-r));
	return 0;
}

/* Records directory abs (as libgit2 gives it, a final '/') in the text:
 * workspace-relative when inside (*ret_in), else absolute; no final '/'.
 * 0, 1 when it is too long to record, or -errno. */
static int read_dir_add(struct build *b, const char *abs, uint32_t *ret_off, uint32_t *ret_len, bool *ret_in)
{
	const char *rel;
	size_t rl;
	bool in = ic_ws_relative(b->ws_real, abs, &rel, &rl);
	if (!in) {
		rel = abs;
		rl = strlen(abs);
		while (rl > 1 && abs[rl - 1] == '/')
			rl--;
	}
	if (rl > LZ_PATH_MAX)
		return 1; /* not recorded: no watch can name it */
	int r = ic_text_add(b->s, (const uint8_t *)rel, rl, ret_off);
	if (r < 0)
		return r;
	*ret_len = (uint32_t)rl;
	*ret_in = in;
	return 0;
}

/* Loads a repository's index, core.ignoreCase and info/exclude into repo
 * ri rooted at node root. */
static int repo_load(struct build *b, git_repository *g, uint32_t root)
{
	lz_ignoreclass *s = b->s;
	int r = ic_grow((void **)&s->repos, &s->cap_repos, sizeof(*s->repos), s->n_repos + 1, REPOS_MAX);
	if (r < 0)
		return lz_err_set(b->err, -r, "ignoreclass: too many nested repositories");
	uint32_t ri = s->n_repos++;
	s->repos[ri] = (struct repo){ .root = root };
	/* Which worktree the repository's index governs (the index-lock
	 * guard, lz_ignoreclass_index_root). */
	const char *rel;
	size_t rl;
	if (ic_ws_relative(b->ws_real, git_repository_path(g), &rel, &rl)) {
		struct repo *rp = &s->repos[ri];
		if ((r = ic_text_add(s, (const uint8_t *)rel, rl, &rp->gitdir_off)) < 0 ||
		    (r = ic_text_add(s, (const uint8_t *)b->path, b->len, &rp->root_off)) < 0)
			return lz_err_set(b->err, -r, "ignoreclass: repository paths: %s", strerror(-r));
		rp->gitdir_len = (uint32_t)rl;
		rp->root_len = (uint32_t)b->len;
	}

	/* Where its index and info/exclude are: the watch's inputs. */
	struct repo *rd = &s->repos[ri];
	int r1 = read_dir_add(b, git_repository_path(g), &rd->idx_dir_off, &rd->idx_dir_len, &rd->idx_in);
	int r2 = r1 < 0 ? 0 : read_dir_add(b, git_repository_commondir(g), &rd->com_dir_off, &rd->com_dir_len,
					   &rd->com_in);
	if (r1 < 0 || r2 < 0)
		return lz_err_set(b->err, -(r1 < 0 ? r1 : r2), "ignoreclass: repository paths: %s",
				  strerror(-(r1 < 0 ? r1 : r2)));
	rd->read = r1 == 0 && r2 == 0;

	git_config *cfg = NULL;
	int icase = 0;
	if (git_repository_config_snapshot(&cfg, g) < 0)
		return git_fail(b->err, "read configuration of", git_repository_path(g));
	r = git_config_get_bool(&icase, cfg, "core.ignorecase");
	git_config_free(cfg);
	if (r < 0 && r != GIT_ENOTFOUND)
		return git_fail(b->err, "read core.ignoreCase of", git_repository_path(g));
	s->repos[ri].icase = r == 0 && icase;
	/* Children of root are now governed by this repository (root has
	 * none yet: callers open a repository only where no node lies below). */
	s->nodes[root].repo = ri;
	if (root != 0)
		s->nodes[root].flags |= N_REPO_ROOT;
	if ((r = ic_guard_repo(s, g, b->ws_fd, b->ws_real, b->path, b->len)) < 0)
		return r == -EIO ? git_fail(b->err, "read configuration of", git_repository_path(g))
				 : lz_err_set(b->err, -r, "ignoreclass: guards of '%s'",
					      git_repository_path(g));

	/* Read as Git reads it, one entry at a time (gitindex.h): libgit2
	 * held a nested index, which is the sandbox's to write (the
	 * workspace's own changes only by the guarded rename), whole and
	 * more, and hashed its paths into a table it could make collide. */
	struct index_walk iw = { .b = b, .root = root, .root_room = b->len ? b->len + 1 : 0 };
	if ((r = read_index(g, &iw)) < 0)
		return r;

	/* info/exclude of the common directory (a linked worktree's too). */
	const char *common = git_repository_commondir(g);
	_cleanup_close_ int cfd = open(common, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cfd >= 0) {
		_cleanup_close_ int fd = -EBADF;
		r = open_confined(cfd, "info/exclude", O_RDONLY, &fd);
		if (r == 0)
			r = patterns_read_fd(s, fd, &s->repos[ri].info_first, &s->repos[ri].info_n);
		if (r < 0)
			return lz_err_set(b->err, -r, "ignoreclass: read '%s/info/exclude'", common);
	}
	return 0;
}

static int walk_dir(struct build *b, uint32_t node, bool excluded);

/* Opens the directory at b->path as a repository when it holds a .git
 * entry (directory or gitfile, not a symlink). 1 opened and walked, 0 not
 * a repository. */
static int nested_try(struct build *b, uint32_t parent, uint32_t *child)
{
	_cleanup_close_ int dfd = -EBADF;
	int r = open_confined(b->ws_fd, b->path, O_PATH | O_DIRECTORY, &dfd);
	if (r != 0)
		return r > 0 ? 0 : lz_err_set(b->err, -r, "ignoreclass: open '%s'", b->path);
	struct stat st;
	if (fstatat(dfd, ".git", &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
		return 0;
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", dfd);
	git_repository *g = NULL;
	if (git_repository_open_ext(&g, proc, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0)
		return 0; /* not a valid repository: an ordinary directory to Git */
	/* Only repositories whose Git directories lie inside the workspace:
	 * the sandbox writes nested .git files, and an arbitrary host
	 * repository's index and info/exclude must not become observable
	 * through routes. Anything else stays an ordinary directory. */
	size_t wl = strlen(b->ws_real);
	if (git_repository_is_bare(g) || strncmp(git_repository_path(g), b->ws_real, wl) != 0 ||
	    strncmp(git_repository_commondir(g), b->ws_real, wl) != 0) {
		git_repository_free(g);
		return 0;
	}
	if (*child == NONE && (r = node_add(b->s, parent, (const uint8_t *)b->path + b->starts[b->s->nodes[parent].depth],
					   b->len - b->starts[b->s->nodes[parent].depth], child)) < 0) {
		git_repository_free(g);
		return lz_err_set(b->err, -r, "ignoreclass: '%s'", b->path);
	}
	r = repo_load(b, g, *child);
	git_repository_free(g);
	if (r < 0)
		return r;
	r = walk_dir(b, *child, false);
	return r < 0 ? r : 1;
}

struct dent {
	size_t off;
	uint16_t len;
};

/* Visits the directory of node (path b->path): reads its .gitignore unless
 * excluded, and recurses as Git's traversal would. In excluded mode only
 * directories leading to tracked paths are visited (for gitlinks below). */
static int walk_dir(struct build *b, uint32_t node, bool excluded)
{
	lz_ignoreclass *s = b->s;
	_cleanup_close_ int fd = -EBADF;
	int r = open_confined(b->ws_fd, b->len ? b->path : ".", O_RDONLY | O_DIRECTORY, &fd);
	if (r != 0)
		return r > 0 ? 0 : lz_err_set(b->err, -r, "ignoreclass: open '%s'", b->path);

	/* A bare repository in the tree (HEAD, objects, refs): host Git opens
	 * it from any directory inside, so its control files are guarded. */
	struct stat hst, ost, rst;
	if (b->len && fstatat(fd, "HEAD", &hst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(hst.st_mode) &&
	    fstatat(fd, "objects", &ost, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(ost.st_mode) &&
	    fstatat(fd, "refs", &rst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(rst.st_mode) &&
	    (r = ic_guard_add(s, b->path, b->len, G_GITDIR)) < 0)
		return lz_err_set(b->err, -r, "ignoreclass: '%s'", b->path);

	/* Outside every repository (a workspace that is not one) no ignore
	 * file applies; the walk only finds nested repositories. */
	if (!excluded && (s->is_repo || s->nodes[node].repo != 0)) {
		_cleanup_close_ int gfd = -EBADF;
		r = open_confined(fd, ".gitignore", O_RDONLY | O_NOFOLLOW, &gfd);
		if (r == 0)
			r = patterns_read_fd(s, gfd, &s->nodes[node].list_first, &s->nodes[node].list_n);
		if (r < 0)
			return lz_err_set(b->err, -r, "ignoreclass: read '%s/.gitignore'", b->path);
	}

	/* Collect the subdirectories, then close before recursing: one
	 * descriptor at a time whatever the depth. */
	_cleanup_free_ char *names = NULL;
	_cleanup_free_ struct dent *ents = NULL;
	size_t n_names = 0, cap_names = 0;
	uint32_t n_ents = 0, cap_ents = 0;
	{
		int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		if (dfd < 0)
			return lz_err_set(b->err, errno, "ignoreclass: dup");
		DIR *d = fdopendir(dfd);
		if (d == NULL) {
			close(dfd);
			return lz_err_set(b->err, errno, "ignoreclass: opendir '%s'", b->path);
		}
		struct dirent *de;
		errno = 0;
		while ((de = readdir(d)) != NULL) {
			const char *nm = de->d_name;
			size_t nl = strlen(nm);
			if ((nl == 1 && nm[0] == '.') || (nl == 2 && nm[0] == '.' && nm[1] == '.'))
				continue;
			bool isdir = de->d_type == DT_DIR;
			if (de->d_type == DT_UNKNOWN) {
				struct stat st;
				isdir = fstatat(fd, nm, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
			}
			if (!isdir || is_dotgit((const uint8_t *)nm, nl, s->repos[s->nodes[node].repo].icase))
				continue;
			if (n_names + nl > cap_names) {
				size_t nc = cap_names ? cap_names * 2 : 1024;
				while (nc < n_names + nl)
					nc *= 2;
				char *q = realloc(names, nc);
				if (q == NULL) {
					closedir(d);
					return lz_err_set(b->err, ENOMEM, "ignoreclass: out of memory");
				}
				names = q;
				cap_names = nc;
			}
			if ((r = ic_grow((void **)&ents, &cap_ents, sizeof(*ents), n_ents + 1, NODES_MAX)) < 0) {
				closedir(d);
				return lz_err_set(b->err, -r, "ignoreclass: '%s' too large", b->path);
			}
			memcpy(names + n_names, nm, nl);
			ents[n_ents++] = (struct dent){ .off = n_names, .len = (uint16_t)nl };
			n_names += nl;
			errno = 0;
		}
		int e = errno;
		closedir(d);
		if (e != 0)
			return lz_err_set(b->err, e, "ignoreclass: readdir '%s'", b->path);
	}
	lz_close_fdp(&fd);

	size_t saved = b->len;
	uint32_t comp = s->nodes[node].depth;
	for (uint32_t i = 0; i < n_ents; i++) {
		const uint8_t *nm = (const uint8_t *)names + ents[i].off;
		size_t nl = ents[i].len;
		size_t start = saved ? saved + 1 : 0;
		if (start + nl > LZ_PATH_MAX || comp >= COMP_MAX - 1)
			continue; /* no query can name it */
		if (saved)
			b->path[saved] = '/';
		memcpy(b->path + start, nm, nl);
		b->len = start + nl;
		b->path[b->len] = '\0';
		b->starts[comp] = (uint16_t)start;

		uint32_t child = ic_lookup(s, node, nm, nl);
		uint16_t cf = child == NONE ? 0 : s->nodes[child].flags;
		bool gitlink = (cf & (N_TRACKED | N_GITLINK)) == (N_TRACKED | N_GITLINK);
		bool ex = !gitlink && (excluded || ic_match_chain(s, node, (const uint8_t *)b->path, b->starts,
								   comp, b->len, true, &b->steps));
		if (b->steps == 0)
			return too_costly(b->err, b->path);
		if (gitlink) {
			r = nested_try(b, node, &child);
		} else if (ex) {
			r = (cf & N_BELOW) ? walk_dir(b, child, true) : 0;
		} else {
			r = 0;
			if (!(cf & N_BELOW))
				r = nested_try(b, node, &child);
			if (r == 0) {
				if (child == NONE && (r = node_add(s, node, nm, nl, &child)) < 0)
					r = lz_err_set(b->err, -r, "ignoreclass: '%s'", b->path);
				else
					r = walk_dir(b, child, false);
			}
		}
		if (r < 0)
			return r;
	}
	b->len = saved;
	b->path[saved] = '\0';
	return 0;
}

/* Marks tracked paths that have an object in the isolated backing but none
 * in the host worktree (LZ_ROUTE_INCONSISTENT). Walks the isolated tree
 * only where the node tree has tracked paths. */
static int iso_walk(struct build *b, int iso_fd, uint32_t node)
{
	lz_ignoreclass *s = b->s;
	_cleanup_close_ int fd = -EBADF;
	int r = open_confined(iso_fd, b->len ? b->path : ".", O_RDONLY | O_DIRECTORY, &fd);
	if (r != 0)
		return r > 0 ? 0 : lz_err_set(b->err, -r, "ignoreclass: open isolated '%s'", b->path);
	DIR *d = fdopendir(TAKE_FD(fd));
	if (d == NULL)
		return lz_err_set(b->err, errno, "ignoreclass: opendir isolated '%s'", b->path);
	size_t saved = b->len;
	struct dirent *de;
	r = 0;
	while (r >= 0 && (de = readdir(d)) != NULL) {
		size_t nl = strlen(de->d_name);
		if (nl <= 2 && de->d_name[0] == '.' && de->d_name[nl - 1] == '.')
			continue;
		uint32_t child = ic_lookup(s, node, (const uint8_t *)de->d_name, nl);
		if (child == NONE)
			continue;
		size_t start = saved ? saved + 1 : 0;
		if (start + nl > LZ_PATH_MAX)
			continue;
		if (saved)
			b->path[saved] = '/';
		memcpy(b->path + start, de->d_name, nl + 1);
		b->len = start + nl;
		struct node *c = &s->nodes[child];
		if (c->flags & N_TRACKED) {
			int hfd = lz_openat2(b->ws_fd, b->path, O_PATH | O_NOFOLLOW | O_CLOEXEC,
					     LZ_RESOLVE_CONFINED);
			if (hfd >= 0)
				close(hfd);
			else if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
				c->flags |= N_INCONS;
			else
				r = lz_err_set(b->err, errno, "ignoreclass: open '%s'", b->path);
		}
		if (r >= 0 && (c->flags & (N_BELOW | N_REPO_ROOT)) && de->d_type != DT_REG)
			r = iso_walk(b, iso_fd, child);
		b->len = saved;
		b->path[saved] = '\0';
	}
	closedir(d);
	return r;
}

/* Precomputes each node's own pattern decisions (as a directory and as a
 * non-directory), exactly what a query would compute at that component.
 * Every node's path fits LZ_PATH_MAX (repo_load, walk_dir); one that did
 * not would name nothing a query can ask for, and is left undecided
 * rather than overrun path. */
static int decide_all(lz_ignoreclass *s, uint64_t *steps, struct lz_err *err)
{
	uint32_t chain[COMP_MAX];
	uint8_t path[LZ_PATH_MAX + 1];
	uint16_t starts[COMP_MAX];
	for (uint32_t id = 1; id < s->n_nodes; id++) {
		uint32_t k = 0;
		size_t total = 0;
		for (uint32_t n = id; n != 0 && k < COMP_MAX; n = s->nodes[n].parent) {
			chain[k++] = n;
			total += s->nodes[n].name_len + (total ? 1u : 0u);
		}
		if (k == 0 || k > COMP_MAX - 1 || total > LZ_PATH_MAX)
			continue;
		size_t len = 0;
		for (uint32_t j = k, comp = 0; j-- > 0; comp++) {
			const struct node *nd = &s->nodes[chain[j]];
			if (len)
				path[len++] = '/';
			starts[comp] = (uint16_t)len;
			memcpy(path + len, s->text + nd->name_off, nd->name_len);
			len += nd->name_len;
		}
		struct node *nd = &s->nodes[id];
		uint32_t comp = nd->depth - 1u;
		if (ic_match_chain(s, nd->parent, path, starts, comp, len, true, steps))
			nd->flags |= N_EX_DIR;
		if (ic_match_chain(s, nd->parent, path, starts, comp, len, false, steps))
			nd->flags |= N_EX_FILE;
		if (*steps == 0) {
			path[len] = '\0';
			return too_costly(err, (const char *)path);
		}
	}
	return 0;
}

static inline void snap_freep(lz_ignoreclass **p)
{
	ic_snap_free(*p);
}

static inline void git_repository_freep(git_repository **p)
{
	git_repository_free(*p);
}

static int build(struct build *b, const struct lz_ignoreclass_inputs *in)
{
	lz_ignoreclass *s = b->s;
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", in->workspace_fd);
	int pr = lz_fd_path(in->workspace_fd, b->ws_real, sizeof(b->ws_real) - 2); /* room for '/' */
	if (pr < 0)
		return lz_err_set(b->err, -pr, "ignoreclass: resolve '%s'", proc);
	size_t k = strlen(b->ws_real);
	if (k > 1)
		b->ws_real[k++] = '/';
	b->ws_real[k] = '\0';
	_cleanup_(git_repository_freep) git_repository *g = NULL;
	int r = git_repository_open_ext(&g, proc, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL);
	if (r < 0 && r != GIT_ENOTFOUND)
		return git_fail(b->err, "open repository", proc);
	if (g != NULL && git_repository_is_bare(g)) {
		/* A bare workspace (the workspace is the Git directory, or its
		 * .git file points to one inside with linked worktrees beside
		 * it): no path is its worktree's, so it is classified as a
		 * workspace that is not a repository (the walk finds the linked
		 * worktrees and nested repositories), but host Git opens it from
		 * anywhere inside: its control files are guarded like any
		 * known Git directory's (docs/threat-model.md). */
		if ((r = ic_guard_repo(s, g, b->ws_fd, b->ws_real, "", 0)) < 0)
			return r == -EIO ? git_fail(b->err, "read configuration of", git_repository_path(g))
					 : lz_err_set(b->err, -r, "ignoreclass: guards of '%s'",
						      git_repository_path(g));
		git_repository_free(TAKE_PTR(g));
	}
	s->is_repo = g != NULL;

	if (in->global_excludes != NULL) {
		_cleanup_close_ int fd = open(in->global_excludes, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0 && errno != ENOENT && errno != ENOTDIR && errno != ENXIO)
			return lz_err_set(b->err, errno, "ignoreclass: open '%s'", in->global_excludes);
		if (fd >= 0 && (r = patterns_read_fd(s, fd, &s->glob_first, &s->glob_n)) < 0)
			return lz_err_set(b->err, -r, "ignoreclass: read '%s'", in->global_excludes);
	}
	if (g == NULL)
		s->n_repos = 1; /* the placeholder governs; nested ones come next */
	else if ((r = repo_load(b, g, 0)) < 0)
		return r;
	git_repository_free(TAKE_PTR(g));
	if ((r = walk_dir(b, 0, false)) < 0)
		return r;
	if (in->isolated_fd >= 0) {
		b->len = 0;
		b->path[0] = '\0';
		if ((r = iso_walk(b, in->isolated_fd, 0)) < 0)
			return r;
	}
	/* Deciding every path costs in proportion to the tree: a large real
	 * tree must not run out where a small one written to be slow does. */
	uint64_t per_node = (uint64_t)s->n_nodes * LZ_IGNORECLASS_NODE_STEPS;
	b->steps = per_node > b->min_steps ? per_node : b->min_steps;
	return decide_all(s, &b->steps, b->err);
}

int lz_ignoreclass_build(const struct lz_ignoreclass_inputs *in, lz_ignoreclass **ret,
			 struct lz_err *err)
{
	if (in == NULL || ret == NULL || in->workspace_fd < 0)
		return lz_err_set(err, EINVAL, "ignoreclass: no workspace descriptor");
	_cleanup_(snap_freep) lz_ignoreclass *s = calloc(1, sizeof(*s));
	_cleanup_free_ struct build *b = calloc(1, sizeof(*b));
	if (s == NULL || b == NULL)
		return lz_err_set(err, ENOMEM, "ignoreclass: out of memory");
	s->refs = 1;
	s->hide_editor = in->hide_editor_config;
	s->share_ignored = in->share_ignored;
	/* The root node and the root repository's placeholder. */
	int r = ic_grow((void **)&s->nodes, &s->cap_nodes, sizeof(*s->nodes), 1, NODES_MAX);
	if (r < 0 || (r = ic_grow((void **)&s->repos, &s->cap_repos, sizeof(*s->repos), 1, REPOS_MAX)) < 0)
		return lz_err_set(err, -r, "ignoreclass: out of memory");
	s->nodes[0] = (struct node){ .parent = NONE, .repo = 0 };
	s->n_nodes = 1;
	s->repos[0] = (struct repo){ .root = 0 };
	s->n_repos = 0; /* repo_load claims index 0 for the workspace */
	if ((r = edges_resize(s, 1024)) < 0)
		return lz_err_set(err, -r, "ignoreclass: out of memory");
	b->s = s;
	b->ws_fd = in->workspace_fd;
	b->min_steps = in->build_steps ? in->build_steps : LZ_IGNORECLASS_BUILD_STEPS;
	b->steps = b->min_steps;
	b->err = err;

	if (git_libgit2_init() < 0)
		return git_fail(err, "initialise", "libgit2");
	r = build(b, in);
	git_libgit2_shutdown();
	if (r < 0)
		return r;
	if (s->n_repos == 0)
		s->n_repos = 1; /* not a repository: the placeholder stays */
	*ret = TAKE_PTR(s);
	return 0;
}

int lz_ignoreclass_global_excludes(const char *home, const char *xdg_config_home, char *buf, size_t cap,
				   struct lz_err *err)
{
	if (cap == 0)
		return lz_err_set(err, EINVAL, "global excludes: no room");
	buf[0] = '\0';
	if (git_libgit2_init() < 0)
		return git_fail(err, "initialise", "libgit2");
	git_config *cfg = NULL;
	git_buf path = GIT_BUF_INIT;
	int r = 0, n = -1, g = 0;
	if (git_config_open_default(&cfg) < 0) {
		r = git_fail(err, "read", "the global Git configuration");
	} else if ((g = git_config_get_path(&path, cfg, "core.excludesfile")) == 0) {
		/* Git reads no file for an empty value, not the default. */
		if (path.ptr[0] != '\0')
			n = snprintf(buf, cap, "%s", path.ptr);
	} else if (g != GIT_ENOTFOUND) {
		/* Set but not usable ("~user/", no value): the default in its
		 * place would be another file than the developer's Git reads. */
		const git_error *e = git_error_last();
		r = lz_err_set(err, EINVAL,
			       "core.excludesFile in your Git configuration: %s; write it as an absolute path "
			       "or ~/ path",
			       e && e->message ? e->message : "not a usable path");
	} else if (xdg_config_home && xdg_config_home[0] == '/') {
		n = snprintf(buf, cap, "%s/git/ignore", xdg_config_home);
	} else if (home && home[0] == '/') {
		n = snprintf(buf, cap, "%s/.config/git/ignore", home);
	}
	if (r == 0 && n >= 0 && ((size_t)n >= cap || buf[0] != '/')) {
		r = lz_err_set(err, (size_t)n >= cap ? ENAMETOOLONG : EINVAL,
			       "core.excludesFile must be an absolute path: %.200s", buf);
		buf[0] = '\0';
	}
	git_buf_dispose(&path);
	git_config_free(cfg);
	git_libgit2_shutdown();
	return r;
}

