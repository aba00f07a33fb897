/* libFuzzer target for core/router/gitcachetree.c (lz_cachetree_*), which
 * checks the cache tree (TREE extension) of an index the sandbox wrote
 * against that index's own entries: every valid node must name the tree
 * Git 2.39's cache-tree.c would write for the entries below it.
 *
 * Input (the seeds in tests/fuzz/corpus/gitcachetree/ are written this
 * way):
 *   byte 0, control:
 *     bits 0-1  the payload: 0 the input's remaining bytes, as they are;
 *               1 the model's cache tree for the entries (below); 2 or 3
 *               the model's cache tree, then byte edits;
 *     bit 2     0: the entries as decoded; 1: put right first (empty
 *               components dropped, an empty path made "a", sorted into
 *               Git's order, a repeated path and stage dropped);
 *     bits 3-4  the order the model writes a node's children in: 0 the
 *               index's, 1 Git's (name length, then bytes: what Git
 *               writes), 2 the index's reversed, 3 the index's rotated
 *               by one;
 *     bits 5-7  7: lz_cachetree_check is not called (the tree is freed
 *               with directories open); otherwise it is.
 *   byte 1, the count of entries (at most 255; fewer if the input ends).
 *   Each entry:
 *     byte A    bits 0-3 the count of its own path bytes (0-15), bits 4-7
 *               half the count of bytes kept from the previous entry's
 *               path (0-30, at most its length) before them;
 *     byte B    bits 0-1 mode (100644, 100755, 120000, 160000), bits 2-4
 *               object ID (0 all zero, 1-7 fixed ones), bits 5-6 stage,
 *               bit 7 intent-to-add;
 *     own path bytes, each mapped (low 4 bits) into a 16-character
 *               alphabet that holds '/' four times and bytes on either
 *               side of it ('-', '.', '0') and above 0x7f.
 *   Then, for payload 0, the payload. For the others: byte k, k node op
 *   bytes, then (payload 2 or 3) up to 16 edits of 4 bytes each.
 *     A node op (one for each node the model writes, in the order written;
 *     0 past the k given): bits 0-1 0 honest (valid unless an entry below
 *     is unmerged, intended to be added or without an object, as Git
 *     writes it), 1 invalid ("-1"), 2 valid all the same, 3 valid with a
 *     lie (bits 4-5: count + 1, count - 1, the ID of the empty tree, one
 *     bit of the ID flipped); bit 2 none of its children written; bit 3
 *     an extra invalid child, named "f" (no directory has that name) or
 *     with bit 4 the name of its first child (a repeated name); bits 6-7
 *     1: one subtree more than written, 2: one fewer.
 *     An edit: op, position (2 bytes, little-endian, modulo the length),
 *     value; op 0 sets the byte, 1 inserts it, 2 deletes the byte, 3 xors
 *     a bit in (bit 2 of op clear) or truncates there (set).
 * Inputs over INPUT_MAX bytes are skipped (the model recurses per node).
 *
 * The model, written from gitformat-index(5) "Cache tree" and Git 2.39's
 * cache-tree.c (update_one, write_one, read_one), plainly: each directory
 * is found by scanning every entry, no state carried between entries.
 *  - The entries: an entry is refused when its path is empty, starts or
 *    ends with '/' or holds "//", or when it is not after the one before
 *    it in Git's order (path bytes as unsigned, a prefix first, then the
 *    stage strictly increasing for one path).
 *  - The directories: the root ("") and each path prefix ending before a
 *    '/'. For each, the entries below it (all for the root; else those
 *    whose path starts with it and '/'), their count, whether one is
 *    unmerged (stage > 0), intended to be added or has the all-zero ID
 *    ("bad": Git writes no tree with it and invalidates each node above
 *    it), and its tree: "tree <size>\0" and, for the entries below it in
 *    index order, "<octal mode> <name>\0<ID>" for one directly in it and
 *    not bad, and once for each subdirectory, where its first entry is,
 *    "40000 <name>\0<the subdirectory's tree ID>"; SHA-1 (OpenSSL).
 *  - The payload, in order: a node is its name up to a NUL (the root's
 *    empty, every other's non-empty without '/', its path the parent's,
 *    '/' and the name, at most LZ_GITINDEX_PATH_MAX), "<count>
 *    <subtrees>\n" as Git's "%d" writes them (digits without a leading
 *    zero, at most INT_MAX; "-1" as the count only), the 20-byte ID when
 *    the count is not -1, then its subtrees' nodes; nothing after the
 *    root's. A malformed node is -EBADMSG; a valid node whose path is no
 *    directory, whose directory is bad, or whose count or ID is not the
 *    directory's is -EILSEQ; the first of them in the payload is the
 *    verdict, 0 when there is none. A child whose name is not after
 *    its previous sibling's in Git's order (cache-tree.c's
 *    subtree_name_cmp: length, then bytes) is -EBADMSG where it begins:
 *    Git writes none, and Git 2.39 reading a name twice dies ("fatal:
 *    cache-tree: internal error") in every command that reads the
 *    index.
 *
 * Checks (each abort()s):
 *  - every entry before the model's first refused one returns 0, that one
 *    -EBADMSG (then no more are given and the tree is freed);
 *  - lz_cachetree_check returns the model's verdict;
 *  - -ENOMEM is accepted anywhere; -E2BIG nowhere (the input is far below
 *    LZ_CACHETREE_MAX_DIRS and LZ_CACHETREE_MAX_BYTES);
 *  - the model's own consistency: the root's count is the number of
 *    entries, every directory's tree is computed, and a payload the model
 *    wrote honestly, in Git's order, and left unedited is accepted by the
 *    model. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "router/gitcachetree.h"
#include "router/gitindex.h"


#define OID_LEN LZ_CACHETREE_OID_LEN
#define INPUT_MAX (64 * 1024)
#define MAX_ENTRIES 255
#define PATH_CAP 48 /* 30 kept + 15 own bytes, and a NUL */
#define MAX_DIRS (1 + MAX_ENTRIES * (PATH_CAP / 2))
#define MAX_EDITS 16

static void check(bool ok)
{
	if (!ok)
		abort();
}

static const char ALPHABET[16] = { 'a', 'b', '/', 'c', '/', '-', '.', '0',
				   '/', 'A', 'z', (char)0xe9, '~', 'd', '/', ' ' };
static const uint32_t MODES[4] = { 0100644, 0100755, 0120000, 0160000 };
static const uint8_t OIDS[8][OID_LEN] = {
	{ 0 },
	{ 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
	  0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11 },
	/* the empty blob */
	{ 0xe6, 0x9d, 0xe2, 0x9b, 0xb2, 0xd1, 0xd6, 0x43, 0x4b, 0x8b,
	  0x29, 0xae, 0x77, 0x5a, 0xd8, 0xc2, 0xe4, 0x8c, 0x53, 0x91 },
	{ 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	  0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff },
	{ 0x01 },
	/* the empty tree */
	{ 0x4b, 0x82, 0x5d, 0xc6, 0x42, 0xcb, 0x6e, 0xb9, 0xa0, 0x60,
	  0xe5, 0x4b, 0xf8, 0xd6, 0x92, 0x88, 0xfb, 0xee, 0x49, 0x04 },
	{ [OID_LEN - 1] = 0x01 },
	{ 0x80 },
};
static const uint8_t EMPTY_TREE[OID_LEN] = { 0x4b, 0x82, 0x5d, 0xc6, 0x42, 0xcb, 0x6e,
					     0xb9, 0xa0, 0x60, 0xe5, 0x4b, 0xf8, 0xd6,
					     0x92, 0x88, 0xfb, 0xee, 0x49, 0x04 };

/* --- a growing byte buffer -------------------------------------------- */

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static void put(struct buf *b, const void *d, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n)
			cap *= 2;
		b->p = realloc(b->p, cap);
		check(b->p != NULL);
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->len, d, n);
	b->len += n;
}

static void put_str(struct buf *b, const char *s)
{
	put(b, s, strlen(s));
}

/* --- the entries ------------------------------------------------------ */

struct ment {
	char path[PATH_CAP];
	size_t len;
	uint32_t mode;
	uint8_t oid[OID_LEN];
	unsigned stage;
	bool ita;
	size_t idx; /* position as decoded: sorting is stable */
};

static struct ment ents[MAX_ENTRIES];
static size_t nents;

static size_t decode_entries(const uint8_t *p, size_t avail, size_t count)
{
	size_t at = 0, prev_len = 0;
	char prev[PATH_CAP];
	nents = 0;
	while (nents < count && avail - at >= 2) {
		uint8_t a = p[at], b = p[at + 1];
		size_t own = a & 15, keep = (size_t)(a >> 4) * 2;
		if (avail - at - 2 < own)
			break;
		if (keep > prev_len)
			keep = prev_len;
		struct ment *e = &ents[nents];
		memcpy(e->path, prev, keep);
		for (size_t j = 0; j < own; j++)
			e->path[keep + j] = ALPHABET[p[at + 2 + j] & 15];
		e->len = keep + own;
		e->mode = MODES[b & 3];
		memcpy(e->oid, OIDS[(b >> 2) & 7], OID_LEN);
		e->stage = (b >> 5) & 3;
		e->ita = (b & 0x80) != 0;
		e->idx = nents;
		memcpy(prev, e->path, e->len);
		prev_len = e->len;
		nents++;
		at += 2 + own;
	}
	return at;
}

/* Git's index order (read-cache.c, cache_name_stage_compare): the path's
 * bytes (unsigned), a prefix before what it is a prefix of. */
static int path_cmp(const char *a, size_t al, const char *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);
	if (c != 0)
		return c;
	return (al > bl) - (al < bl);
}

static int ment_cmp(const void *x, const void *y)
{
	const struct ment *a = x, *b = y;
	int c = path_cmp(a->path, a->len, b->path, b->len);
	if (c != 0)
		return c;
	if (a->stage != b->stage)
		return a->stage < b->stage ? -1 : 1;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static void fix_entries(void)
{
	for (size_t i = 0; i < nents; i++) {
		struct ment *e = &ents[i];
		char out[PATH_CAP];
		size_t n = 0;
		for (size_t j = 0; j < e->len; j++) {
			if (e->path[j] == '/' && (n == 0 || out[n - 1] == '/'))
				continue;
			out[n++] = e->path[j];
		}
		while (n > 0 && out[n - 1] == '/')
			n--;
		if (n == 0)
			out[n++] = 'a';
		memcpy(e->path, out, n);
		e->len = n;
	}
	qsort(ents, nents, sizeof(ents[0]), ment_cmp);
	size_t kept = 0;
	for (size_t i = 0; i < nents; i++) {
		if (kept > 0 && ents[kept - 1].stage == ents[i].stage &&
		    path_cmp(ents[kept - 1].path, ents[kept - 1].len, ents[i].path, ents[i].len) == 0)
			continue;
		ents[kept++] = ents[i];
	}
	nents = kept;
}

static bool path_ok(const struct ment *e)
{
	if (e->len == 0 || e->path[0] == '/' || e->path[e->len - 1] == '/')
		return false;
	for (size_t j = 0; j + 1 < e->len; j++)
		if (e->path[j] == '/' && e->path[j + 1] == '/')
			return false;
	return true;
}

/* The first entry lz_cachetree_entry must refuse; nents for none. */
static size_t first_refused(void)
{
	for (size_t i = 0; i < nents; i++) {
		if (!path_ok(&ents[i]))
			return i;
		if (i > 0) {
			int c = path_cmp(ents[i - 1].path, ents[i - 1].len, ents[i].path, ents[i].len);
			if (c > 0 || (c == 0 && ents[i].stage <= ents[i - 1].stage))
				return i;
		}
	}
	return nents;
}

/* --- the directories -------------------------------------------------- */

struct mdir {
	char path[PATH_CAP];
	size_t len;
	uint32_t count;
	bool bad;
	bool built;
	uint8_t oid[OID_LEN];
};

static struct mdir dirs[MAX_DIRS];
static size_t ndirs;

static size_t find_dir(const char *path, size_t len)
{
	for (size_t d = 0; d < ndirs; d++)
		if (dirs[d].len == len && memcmp(dirs[d].path, path, len) == 0)
			return d;
	return SIZE_MAX;
}

static bool below(const struct ment *e, const struct mdir *d)
{
	return d->len == 0 ||
	       (e->len > d->len && memcmp(e->path, d->path, d->len) == 0 && e->path[d->len] == '/');
}

static bool entry_bad(const struct ment *e)
{
	static const uint8_t zero[OID_LEN];
	return e->stage != 0 || e->ita || memcmp(e->oid, zero, OID_LEN) == 0;
}

static void sha1_tree(const struct buf *body, uint8_t out[OID_LEN])
{
	char head[32];
	int hn = snprintf(head, sizeof(head), "tree %zu", body->len);
	check(hn > 0 && (size_t)hn < sizeof(head));
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	uint8_t full[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	check(md != NULL && EVP_DigestInit_ex(md, EVP_sha1(), NULL) == 1 &&
	      EVP_DigestUpdate(md, head, (size_t)hn + 1) == 1 &&
	      EVP_DigestUpdate(md, body->p ? (const void *)body->p : "", body->len) == 1 &&
	      EVP_DigestFinal_ex(md, full, &n) == 1 && n == OID_LEN);
	EVP_MD_CTX_free(md);
	memcpy(out, full, OID_LEN);
}

/* update_one: the tree of directory d from the entries below it. */
static void build_tree(size_t d)
{
	struct buf body = { 0 };
	size_t base = dirs[d].len ? dirs[d].len + 1 : 0;
	const char *last_sub = NULL;
	size_t last_sub_len = 0;
	for (size_t i = 0; i < nents; i++) {
		const struct ment *e = &ents[i];
		if (!below(e, &dirs[d]))
			continue;
		const char *rel = e->path + base;
		size_t rel_len = e->len - base;
		const char *slash = memchr(rel, '/', rel_len);
		if (slash != NULL) {
			size_t name_len = (size_t)(slash - rel);
			if (last_sub != NULL && last_sub_len == name_len && memcmp(last_sub, rel, name_len) == 0)
				continue; /* the subdirectory is in already */
			last_sub = rel;
			last_sub_len = name_len;
			size_t s = find_dir(e->path, base + name_len);
			check(s != SIZE_MAX);
			if (!dirs[s].built)
				build_tree(s);
			put_str(&body, "40000 ");
			put(&body, rel, name_len);
			put(&body, "", 1);
			put(&body, dirs[s].oid, OID_LEN);
		} else {
			last_sub = NULL;
			if (entry_bad(e))
				continue;
			char mode[16];
			snprintf(mode, sizeof(mode), "%o ", (unsigned)e->mode);
			put_str(&body, mode);
			put(&body, rel, rel_len);
			put(&body, "", 1);
			put(&body, e->oid, OID_LEN);
		}
	}
	sha1_tree(&body, dirs[d].oid);
	dirs[d].built = true;
	free(body.p);
}

static void add_dir(const char *path, size_t len)
{
	if (find_dir(path, len) != SIZE_MAX)
		return;
	check(ndirs < MAX_DIRS);
	struct mdir *d = &dirs[ndirs++];
	memset(d, 0, sizeof(*d));
	memcpy(d->path, path, len);
	d->len = len;
}

static void build_dirs(void)
{
	ndirs = 0;
	add_dir("", 0);
	for (size_t i = 0; i < nents; i++)
		for (size_t j = 0; j < ents[i].len; j++)
			if (ents[i].path[j] == '/')
				add_dir(ents[i].path, j);
	for (size_t d = 0; d < ndirs; d++)
		for (size_t i = 0; i < nents; i++)
			if (below(&ents[i], &dirs[d])) {
				dirs[d].count++;
				dirs[d].bad |= entry_bad(&ents[i]);
			}
	check(dirs[0].count == nents);
	build_tree(0);
	for (size_t d = 0; d < ndirs; d++)
		check(dirs[d].built);
}

/* --- the model writes a payload --------------------------------------- */

struct gen {
	struct buf out;
	const uint8_t *ops;
	size_t nops, at;
	unsigned order;
	bool honest; /* every node as Git writes it */
};

static const char *dir_name(const struct mdir *d, size_t *len)
{
	size_t s = d->len;
	while (s > 0 && d->path[s - 1] != '/')
		s--;
	*len = d->len - s;
	return d->path + s;
}

static bool is_child(const struct mdir *k, const struct mdir *d)
{
	if (k->len <= d->len || (d->len > 0 && (memcmp(k->path, d->path, d->len) != 0 || k->path[d->len] != '/')))
		return false;
	size_t from = d->len ? d->len + 1 : 0;
	return memchr(k->path + from, '/', k->len - from) == NULL;
}

/* cache-tree.c's subtree_name_cmp: the name's length, then its bytes. */
static int git_name_cmp(const void *x, const void *y)
{
	size_t al, bl;
	const char *a = dir_name(&dirs[*(const size_t *)x], &al);
	const char *b = dir_name(&dirs[*(const size_t *)y], &bl);
	if (al != bl)
		return al < bl ? -1 : 1;
	return memcmp(a, b, al);
}

static void gen_node(struct gen *g, size_t d)
{
	uint8_t op = g->at < g->nops ? g->ops[g->at++] : 0;
	const struct mdir *dir = &dirs[d];
	size_t *kids = malloc(sizeof(*kids) * ndirs), nk = 0;
	check(kids != NULL);
	for (size_t k = 0; k < ndirs; k++)
		if (is_child(&dirs[k], dir))
			kids[nk++] = k;
	if (g->order == 1) {
		qsort(kids, nk, sizeof(*kids), git_name_cmp);
	} else if (g->order == 2) {
		for (size_t i = 0; i < nk / 2; i++) {
			size_t t = kids[i];
			kids[i] = kids[nk - 1 - i];
			kids[nk - 1 - i] = t;
		}
	} else if (g->order == 3 && nk > 1) {
		size_t first = kids[0];
		memmove(kids, kids + 1, (nk - 1) * sizeof(*kids));
		kids[nk - 1] = first;
	}
	unsigned kind = op & 3;
	bool drop = op & 4, fake = op & 8;
	bool valid = kind == 0 ? !dir->bad : kind != 1;
	long count = dir->count;
	uint8_t oid[OID_LEN];
	memcpy(oid, dir->oid, OID_LEN);
	if (kind == 3) {
		switch ((op >> 4) & 3) {
		case 0:
			count++;
			break;
		case 1:
			count = count > 0 ? count - 1 : count + 1;
			break;
		case 2:
			memcpy(oid, EMPTY_TREE, OID_LEN);
			if (memcmp(oid, dir->oid, OID_LEN) == 0)
				oid[0] ^= 1;
			break;
		default:
			oid[op % OID_LEN] ^= 0x10;
			break;
		}
	}
	if (drop)
		nk = 0;
	long subtrees = (long)nk + fake;
	if (op >> 6 == 1)
		subtrees++;
	else if (op >> 6 == 2 && subtrees > 0)
		subtrees--;
	if (op != 0 && !(kind == 0 && !drop && !fake && op >> 6 != 1 && op >> 6 != 2))
		g->honest = false;

	size_t name_len;
	const char *name = dir_name(dir, &name_len);
	char nums[48];
	snprintf(nums, sizeof(nums), "%ld %ld\n", valid ? count : -1L, subtrees);
	put(&g->out, name, name_len);
	put(&g->out, "", 1);
	put_str(&g->out, nums);
	if (valid)
		put(&g->out, oid, OID_LEN);
	for (size_t i = 0; i < nk; i++)
		gen_node(g, kids[i]);
	if (fake) {
		if ((op & 0x10) && nk > 0)
			name = dir_name(&dirs[kids[0]], &name_len);
		else
			name = "f", name_len = 1;
		put(&g->out, name, name_len);
		put(&g->out, "", 1);
		put_str(&g->out, "-1 0\n");
	}
	free(kids);
}

static void edit(struct buf *b, const uint8_t e[4])
{
	size_t pos = (size_t)e[1] | (size_t)e[2] << 8;
	uint8_t v = e[3];
	switch (e[0] & 3) {
	case 0:
		if (b->len)
			b->p[pos % b->len] = v;
		break;
	case 1:
		pos %= b->len + 1;
		put(b, "", 1); /* room */
		memmove(b->p + pos + 1, b->p + pos, b->len - 1 - pos);
		b->p[pos] = v;
		break;
	case 2:
		if (b->len) {
			pos %= b->len;
			memmove(b->p + pos, b->p + pos + 1, b->len - pos - 1);
			b->len--;
		}
		break;
	default:
		if (e[0] & 4)
			b->len = pos % (b->len + 1);
		else if (b->len)
			b->p[pos % b->len] ^= (uint8_t)(1u << (v & 7));
		break;
	}
}

/* --- the model reads a payload ---------------------------------------- */

struct mparse {
	const uint8_t *p;
	size_t len, pos;
	char path[LZ_GITINDEX_PATH_MAX + 1];
};

static struct mparse mp;

static bool m_byte(struct mparse *m, uint8_t c)
{
	if (m->pos >= m->len || m->p[m->pos] != c)
		return false;
	m->pos++;
	return true;
}

/* write_one's "%d": "-1" (a count only), or digits without a leading
 * zero, at most INT_MAX. */
static bool m_number(struct mparse *m, bool minus_one, long *ret)
{
	if (minus_one && m->len - m->pos >= 2 && m->p[m->pos] == '-' && m->p[m->pos + 1] == '1') {
		m->pos += 2;
		*ret = -1;
		return true;
	}
	size_t start = m->pos;
	long v = 0;
	while (m->pos < m->len && m->p[m->pos] >= '0' && m->p[m->pos] <= '9') {
		if (v <= INT_MAX)
			v = v * 10 + (m->p[m->pos] - '0');
		m->pos++;
	}
	if (m->pos == start || (m->p[start] == '0' && m->pos - start > 1) || v > INT_MAX)
		return false;
	*ret = v;
	return true;
}

static int m_node(struct mparse *m, size_t depth, size_t parent_len)
{
	const uint8_t *name = m->p + m->pos;
	const uint8_t *nul = memchr(name, 0, m->len - m->pos);
	if (nul == NULL)
		return -EBADMSG;
	size_t name_len = (size_t)(nul - name);
	if (depth == 0 ? name_len != 0 : name_len == 0 || memchr(name, '/', name_len) != NULL)
		return -EBADMSG;
	size_t path_len = depth == 0 ? 0 : parent_len == 0 ? name_len : parent_len + 1 + name_len;
	if (path_len > LZ_GITINDEX_PATH_MAX)
		return -EBADMSG;
	if (depth > 0) {
		if (parent_len > 0)
			m->path[parent_len] = '/';
		memcpy(m->path + path_len - name_len, name, name_len);
	}
	m->pos += name_len + 1;
	long count, subtrees;
	if (!m_number(m, true, &count) || !m_byte(m, ' ') || !m_number(m, false, &subtrees) || !m_byte(m, '\n'))
		return -EBADMSG;
	if (count >= 0) {
		if (m->len - m->pos < OID_LEN)
			return -EBADMSG;
		size_t d = find_dir(m->path, path_len);
		if (d == SIZE_MAX || dirs[d].bad || dirs[d].count != (unsigned long)count ||
		    memcmp(dirs[d].oid, m->p + m->pos, OID_LEN) != 0)
			return -EILSEQ;
		m->pos += OID_LEN;
	}
	/* The previous child's name (offset, length in the payload): each
	 * must come after it in Git's order. */
	size_t prev_at = 0, prev_len = 0;
	bool any = false;
	int rc = 0;
	for (long i = 0; i < subtrees && rc == 0; i++) {
		const uint8_t *cn = m->p + m->pos;
		const uint8_t *cz = memchr(cn, 0, m->len - m->pos);
		if (cz != NULL) {
			size_t cl = (size_t)(cz - cn);
			if (any && (prev_len > cl || (prev_len == cl && memcmp(m->p + prev_at, cn, cl) >= 0)))
				rc = -EBADMSG;
			prev_at = m->pos, prev_len = cl, any = true;
		}
		if (rc == 0)
			rc = m_node(m, depth + 1, path_len);
	}
	return rc;
}

static int model_verdict(const uint8_t *p, size_t len)
{
	mp.p = p;
	mp.len = len;
	mp.pos = 0;
	int rc = m_node(&mp, 0, 0);
	if (rc == 0 && mp.pos != len)
		rc = -EBADMSG;
	return rc;
}

/* --- the run ---------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2 || size > INPUT_MAX)
		return 0;
	uint8_t ctl = data[0];
	unsigned payload_kind = ctl & 3;
	bool fix = ctl & 4, no_check = (ctl >> 5) == 7;
	size_t at = 2 + decode_entries(data + 2, size - 2, data[1]);
	if (fix)
		fix_entries();
	size_t refused = first_refused();

	struct lz_cachetree *ct = NULL;
	int rc = lz_cachetree_new(&ct);
	if (rc == -ENOMEM)
		return 0;
	check(rc == 0 && ct != NULL);
	for (size_t i = 0; i < nents; i++) {
		const struct ment *e = &ents[i];
		rc = lz_cachetree_entry(ct, e->path, e->len, e->mode, e->oid, e->stage, e->ita);
		if (rc == -ENOMEM)
			break;
		if (i < refused) {
			check(rc == 0);
		} else {
			check(rc == -EBADMSG);
			break;
		}
	}
	if (rc != 0 || no_check) {
		lz_cachetree_free(ct);
		return 0;
	}

	build_dirs();
	struct buf payload = { 0 };
	bool honest = false;
	if (payload_kind == 0) {
		put(&payload, data + at, size - at);
	} else {
		struct gen g = { .order = (ctl >> 3) & 3, .honest = true };
		size_t k = at < size ? data[at++] : 0;
		if (k > size - at)
			k = size - at;
		g.ops = data + at;
		g.nops = k;
		at += k;
		gen_node(&g, 0);
		payload = g.out;
		honest = g.honest;
		for (unsigned n = 0; payload_kind >= 2 && n < MAX_EDITS && size - at >= 4; n++, at += 4) {
			edit(&payload, data + at);
			honest = false;
		}
	}
	put(&payload, "", 1); /* never a NULL pointer; not part of the payload */
	payload.len--;

	int want = model_verdict(payload.p, payload.len);
	if (honest && ((ctl >> 3) & 3) == 1) /* as Git writes it, in Git's order */
		check(want == 0);
	rc = lz_cachetree_check(ct, payload.p, payload.len);
	check(rc == want || rc == -ENOMEM);
	lz_cachetree_free(ct);
	free(payload.p);
	return 0;
}
