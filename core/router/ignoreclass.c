/* Ignored Workspace State classification snapshot (spec 3.5, "Ignored
 * Workspace State routing contract"; contract in ignoreclass.h).
 *
 * Build (may be slow, may fail, touches the file system and libgit2):
 *   - libgit2 opens the repository (through /proc/self/fd of the retained
 *     workspace descriptor, no upward search) and reads only three things:
 *     the index (tracked paths, gitlinks), core.ignoreCase from the
 *     configuration, and the common directory's path. Everything else is
 *     ours: .gitignore files are read descriptor-relative beneath the
 *     workspace with openat2(LZ_RESOLVE_CONFINED), so a symlinked
 *     .gitignore or a symlinked directory is never followed (Git >= 2.32
 *     does not follow an in-tree .gitignore either); info/exclude is read
 *     beneath the common directory the same way.
 *   - A tree of nodes is built: every directory prefix of an index entry,
 *     every directory the walk visits (non-ignored directories, like Git's
 *     own traversal), and nested repository roots. Each node carries its
 *     .gitignore patterns, its tracked state, whether tracked paths lie
 *     below it, and its precomputed "excluded as a directory / as a
 *     non-directory" decisions.
 *
 * Query (lz_ignoreclass_route: no allocation, no libgit2, no system call):
 * walk the path's components through the node tree (one hash probe each);
 * components beyond the tree are matched against the compiled pattern
 * chain of the deepest known directory. Git's rules reproduced:
 *   - precedence: the deepest .gitignore first, then its parents up to the
 *     repository root, then info/exclude, then the global excludes file;
 *     within a file the last matching line wins; a negation un-ignores;
 *   - once a directory is excluded, everything untracked below it is
 *     ignored and no negation or deeper .gitignore applies (Git neither
 *     descends into nor reads .gitignore files below it);
 *   - a tracked path is never ignored, and a directory holding tracked
 *     paths is host-backed even when a pattern matches it;
 *   - a nested repository's own rules apply inside it; an unpopulated
 *     gitlink's contents are not Git's business (host-backed);
 *   - a ".git" component is host-backed only below a repository root known
 *     at build and not ignored (ignoreclass.h), and below it only known
 *     submodule and worktree Git directories are;
 *   - pattern syntax and wildmatch semantics as in gitignore(5), including
 *     Git's quirks (literal-prefix splitting before "**", ASCII-only case
 *     folding, escaped characters not folded).
 *
 * Threat: the sandbox writes .gitignore files, nested repositories and
 * symlinks to steer classification or to make the builder read host files
 * outside the workspace. Every in-tree read is confined beneath the
 * workspace; sizes and counts are bounded; pattern matching is the
 * backtracking-bounded wildmatch algorithm (no exponential blow-up). */
#include "router/ignoreclass_int.h"

#include <stdlib.h>

/* ---- pattern matching ---------------------------------------------------- */

/* rel: the path below the pattern file's directory; base: its last
 * component (Git's match_basename / match_pathname). */
static bool pat_match(const lz_ignoreclass *s, const struct pat *pt, const uint8_t *rel,
		      size_t rel_len, const uint8_t *base, size_t base_len, bool is_dir, bool icase,
		      uint64_t *steps)
{
	if ((pt->flags & P_MUSTBEDIR) && !is_dir)
		return false;
	const uint8_t *pp = s->text + pt->off;
	unsigned cf = icase ? LZ_WM_CASEFOLD : 0;
	/* A literal compare: a step for each 32 bytes (up to 4096). */
	size_t literal = (pt->flags & P_BASENAME) && pt->kind != K_GLOB ? pt->len : pt->prefix;
	if (!lz_wm_take(steps, literal / 32))
		return false;
	if (pt->flags & P_BASENAME) {
		switch (pt->kind) {
		case K_LITERAL:
			return pt->len == base_len && bytes_eq(pp, base, base_len, icase);
		case K_SUFFIX:
			return pt->len - 1 <= base_len &&
			       bytes_eq(pp + 1, base + base_len - (pt->len - 1), pt->len - 1, icase);
		default:
			return lz_wildmatch_within(pp, pp + pt->len, base, base + base_len, cf, steps);
		}
	}
	size_t pre = pt->prefix;
	if (pre) {
		if (pre > rel_len || !bytes_eq(pp, rel, pre, icase))
			return false;
		if (pre == pt->len && pre == rel_len)
			return true;
	}
	/* The remainder is matched as a pattern of its own: a "**" right after
	 * the literal prefix counts as leading (Git does the same). */
	return lz_wildmatch_within(pp + pre, pp + pt->len, rel + pre, rel + rel_len, cf | LZ_WM_PATHNAME, steps);
}

/* 1 excluded, 0 negated, -1 no pattern matched (or the steps ran out). */
static int list_match(const lz_ignoreclass *s, uint32_t first, uint32_t n, const uint8_t *rel,
		      size_t rel_len, const uint8_t *base, size_t base_len, bool is_dir, bool icase,
		      uint64_t *steps)
{
	for (uint32_t i = n; i-- > 0;) {
		const struct pat *pt = &s->pats[first + i];
		if (!lz_wm_take(steps, 1))
			return -1;
		if (pat_match(s, pt, rel, rel_len, base, base_len, is_dir, icase, steps))
			return (pt->flags & P_NEG) ? 0 : 1;
	}
	return -1;
}

/* Whether the component path[starts[comp] .. end) below directory node
 * dir is excluded by the patterns in effect there. starts[d] is the offset
 * of the component at index d (the first component below a node of
 * depth d). */
bool ic_match_chain(const lz_ignoreclass *s, uint32_t dir, const uint8_t *path, const uint16_t *starts,
		    uint32_t comp, size_t end, bool is_dir, uint64_t *steps)
{
	if (s->share_ignored || (!s->is_repo && s->nodes[dir].repo == 0))
		return false; /* isolation off, or outside every repository */
	const struct repo *r = &s->repos[s->nodes[dir].repo];
	const uint8_t *base = path + starts[comp];
	size_t base_len = end - starts[comp];
	for (uint32_t n = dir;;) {
		const struct node *nd = &s->nodes[n];
		if (nd->list_n) {
			size_t off = starts[nd->depth];
			int m = list_match(s, nd->list_first, nd->list_n, path + off, end - off, base,
					   base_len, is_dir, r->icase, steps);
			if (m >= 0)
				return m;
		}
		if ((nd->flags & N_REPO_ROOT) || n == 0)
			break;
		n = nd->parent;
	}
	size_t off = starts[s->nodes[r->root].depth];
	int m = list_match(s, r->info_first, r->info_n, path + off, end - off, base, base_len, is_dir,
			   r->icase, steps);
	if (m < 0)
		m = list_match(s, s->glob_first, s->glob_n, path + off, end - off, base, base_len,
			       is_dir, r->icase, steps);
	return m > 0 && *steps > 0;
}

/* ---- node table ----------------------------------------------------------- */

uint32_t ic_name_hash(uint32_t parent, const uint8_t *n, size_t len, bool icase)
{
	uint64_t h = 1469598103934665603ull;
	for (int i = 0; i < 4; i++) {
		h ^= (parent >> (8 * i)) & 0xff;
		h *= 1099511628211ull;
	}
	for (size_t i = 0; i < len; i++) {
		h ^= icase ? lz_ascii_fold(n[i]) : n[i];
		h *= 1099511628211ull;
	}
	return (uint32_t)(h ^ (h >> 32));
}

uint32_t ic_lookup(const lz_ignoreclass *s, uint32_t parent, const uint8_t *n, size_t len)
{
	bool icase = s->repos[s->nodes[parent].repo].icase;
	uint32_t tag = ic_name_hash(parent, n, len, icase);
	for (uint32_t i = tag & s->edge_mask;; i = (i + 1) & s->edge_mask) {
		const struct edge *e = &s->edges[i];
		if (e->id == NONE)
			return NONE;
		if (e->tag != tag)
			continue;
		const struct node *c = &s->nodes[e->id];
		if (c->parent == parent && c->name_len == len &&
		    bytes_eq(s->text + c->name_off, n, len, icase))
			return e->id;
	}
}


void ic_snap_free(lz_ignoreclass *s)
{
	if (s == NULL)
		return;
	free(s->nodes);
	free(s->edges);
	free(s->pats);
	free(s->text);
	free(s->repos);
	free(s->guards);
	free(s);
}

/* ---- editor configuration ----------------------------------------------------- */

/* What host editors read, and may run commands from, on opening a folder
 * (docs/threat-model.md, "Editor configuration"). */
static const char *const editor_names[] = {
	".vscode", ".idea", ".fleet", ".zed", ".helix", ".devcontainer", ".devcontainer.json", ".exrc", ".nvimrc",
	".nvim.lua",
};

bool ic_editor_name(const uint8_t *n, size_t len)
{
	for (size_t k = 0; k < sizeof(editor_names) / sizeof(editor_names[0]); k++)
		if (len == strlen(editor_names[k]) && memcmp(n, editor_names[k], len) == 0)
			return true;
	return false;
}

/* ---- query ------------------------------------------------------------------ */

int ic_query_check(const lz_ignoreclass *s, const void *ret, const char *path, size_t len)
{
	if (s == NULL || ret == NULL || (path == NULL && len != 0))
		return -EINVAL;
	if (len > LZ_PATH_MAX)
		return -ENAMETOOLONG;
	const uint8_t *p = (const uint8_t *)path;
	if (len && memchr(p, '\0', len))
		return -EINVAL;
	for (size_t i = 0; len != 0;) {
		const uint8_t *sl = memchr(p + i, '/', len - i);
		size_t e = sl ? (size_t)(sl - p) : len, n = e - i;
		if (n == 0 || (n == 1 && p[i] == '.') || (n == 2 && p[i] == '.' && p[i + 1] == '.'))
			return -EINVAL;
		if (n > NAME_MAX_BYTES)
			return -ENAMETOOLONG;
		if (e == len)
			break;
		i = e + 1;
	}
	return 0;
}

/* Whether a component of p[from..len) is .git. */
static bool dotgit_below(const uint8_t *p, size_t len, size_t from, bool icase)
{
	for (size_t i = from; i < len;) {
		const uint8_t *sl = memchr(p + i, '/', len - i);
		size_t e = sl ? (size_t)(sl - p) : len;
		if (is_dotgit(p + i, e - i, icase))
			return true;
		i = e + 1;
	}
	return false;
}

int lz_ignoreclass_route(const lz_ignoreclass *s, const char *path, size_t len, bool is_dir,
			 enum lz_route *ret)
{
	int rc = ic_query_check(s, ret, path, len);
	if (rc < 0)
		return rc;
	const uint8_t *p = (const uint8_t *)path;
	if (len == 0) {
		*ret = LZ_ROUTE_HOST;
		return 0;
	}

	uint16_t starts[COMP_MAX];
	uint32_t node = 0, real = 0, comp = 0;
	uint64_t steps = LZ_IGNORECLASS_QUERY_STEPS;
	bool excluded = false, editor = false;
	uint16_t last_flags = 0; /* the named path's own node's */
	enum lz_route r;
	for (size_t i = 0;; comp++) {
		const uint8_t *sl = memchr(p + i, '/', len - i);
		size_t e = sl ? (size_t)(sl - p) : len;
		bool last = e == len, dir = !last || is_dir;
		starts[comp] = (uint16_t)i;
		bool icase = s->repos[s->nodes[real].repo].icase;
		if (is_dotgit(p + i, e - i, icase)) {
			/* Host-backed only where a repository root was known at
			 * build (ignoreclass.h): a repository made inside stays
			 * inside. */
			bool known = !excluded && node != NONE &&
				     (node == 0 ? s->is_repo : (s->nodes[node].flags & N_REPO_ROOT) != 0);
			r = known && !ic_guard_isolates(s, p, len, e) ? LZ_ROUTE_HOST : LZ_ROUTE_ISOLATED;
			break;
		}
		editor |= s->hide_editor && ic_editor_name(p + i, e - i);
		uint32_t child = node == NONE ? NONE : ic_lookup(s, node, p + i, e - i);
		if (child != NONE) {
			uint16_t f = s->nodes[child].flags;
			if (last)
				last_flags = f;
			if ((f & N_TRACKED) && last) {
				r = (f & N_INCONS) ? LZ_ROUTE_INCONSISTENT : LZ_ROUTE_HOST;
				break;
			}
			if (!last && (f & N_REPO_ROOT)) {
				node = real = child;
				excluded = false;
			} else if (!last && (f & (N_TRACKED | N_GITLINK)) == (N_TRACKED | N_GITLINK)) {
				/* An unpopulated submodule: Git looks away, but a .git
				 * in it would make it a repository host Git enters
				 * (with a configuration the sandbox wrote). */
				r = dotgit_below(p, len, e + 1, icase) ? LZ_ROUTE_ISOLATED : LZ_ROUTE_HOST;
				break;
			} else if (excluded || (f & (dir ? N_EX_DIR : N_EX_FILE))) {
				if (!(f & N_BELOW)) {
					r = LZ_ROUTE_ISOLATED;
					break;
				}
				if (last) {
					/* A directory holding tracked paths is host-backed;
					 * a non-directory of that name is not tracked. */
					r = is_dir ? LZ_ROUTE_HOST : LZ_ROUTE_ISOLATED;
					break;
				}
				excluded = true;
				node = real = child;
			} else if (last) {
				r = LZ_ROUTE_HOST;
				break;
			} else {
				node = real = child;
			}
		} else {
			bool ex = excluded || ic_match_chain(s, real, p, starts, comp, e, dir, &steps);
			if (steps == 0)
				return -E2BIG; /* rules too costly to tell */
			if (ex) {
				r = LZ_ROUTE_ISOLATED;
				break;
			}
			if (last) {
				r = LZ_ROUTE_HOST;
				break;
			}
			node = NONE;
		}
		i = e + 1;
	}
	/* Editor configuration Git does not track stays in the sandbox. */
	if (editor && r == LZ_ROUTE_HOST && !(last_flags & N_TRACKED) &&
	    !(is_dir && (last_flags & N_BELOW)))
		r = LZ_ROUTE_ISOLATED;
	*ret = r;
	return 0;
}

lz_ignoreclass *lz_ignoreclass_ref(lz_ignoreclass *s)
{
	if (s != NULL)
		__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
	return s;
}

void lz_ignoreclass_unref(lz_ignoreclass *s)
{
	if (s != NULL && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0)
		ic_snap_free(s);
}

