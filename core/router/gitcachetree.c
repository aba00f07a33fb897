/* Git's cache tree, checked against an index's entries (gitcachetree.h). */
#include "router/gitcachetree.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/evp.h>

#include "router/gitindex.h"
#include "util/grow.h"

#define KEY_LEN 16

/* A directory once its entries are all read. */
struct dir {
	uint8_t key[KEY_LEN]; /* of its path (key_of): the file cannot make two collide */
	uint8_t oid[LZ_CACHETREE_OID_LEN];
	uint32_t entries;
	bool bad; /* an entry below Git leaves out of every tree, or cannot write one for */
};

/* A directory of the path read last, its tree object growing at the end
 * of buf. */
struct frame {
	uint8_t key[KEY_LEN];
	size_t end;	/* its path's length: the root's is 0 */
	size_t buf_off; /* where its tree object begins */
	uint64_t entry_start;
	bool bad;
};

/* A node of the TREE payload whose children are being read. */
struct node {
	uint8_t key[KEY_LEN];
	uint32_t children_left;
	size_t path_len;
	size_t last_at, last_len; /* the name of the child read last; last_len 0 before the first */
};

struct lz_cachetree {
	uint8_t salt[KEY_LEN];
	EVP_MD_CTX *md;
	struct dir *dirs;
	size_t ndirs, dirs_cap;
	struct frame *frames;
	size_t nframes, frames_cap;
	uint8_t *buf;
	size_t buf_len, buf_cap;
	uint64_t entries;
	unsigned prev_stage;
	size_t prev_len;
	char prev[LZ_GITINDEX_PATH_MAX + 1]; /* the path read last */
};

static int append(struct lz_cachetree *ct, const void *b, size_t n)
{
	int rc = lz_grow(&ct->buf, &ct->buf_cap, 1, ct->buf_len + n, LZ_CACHETREE_MAX_BYTES);
	if (rc < 0)
		return rc;
	memcpy(ct->buf + ct->buf_len, b, n);
	ct->buf_len += n;
	return 0;
}

/* SHA-1 of n byte strings one after another; the first out_len bytes. */
static int sha1_of(EVP_MD_CTX *md, size_t n, const void *const part[], const size_t part_len[], uint8_t *out,
		   size_t out_len)
{
	unsigned got = 0;
	uint8_t full[EVP_MAX_MD_SIZE];
	if (EVP_DigestInit_ex(md, EVP_sha1(), NULL) != 1)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (EVP_DigestUpdate(md, part[i], part_len[i]) != 1)
			return -ENOMEM;
	if (EVP_DigestFinal_ex(md, full, &got) != 1 || got != LZ_CACHETREE_OID_LEN)
		return -ENOMEM;
	memcpy(out, full, out_len);
	return 0;
}

/* A directory's key: keyed by the salt, chained from its parent's (the
 * root's has none), so each costs its name's bytes, not its path's. */
static int key_of(struct lz_cachetree *ct, const uint8_t *parent, const void *name, size_t len,
		  uint8_t key[KEY_LEN])
{
	const void *part[] = { ct->salt, name, parent };
	size_t part_len[] = { KEY_LEN, len, KEY_LEN };
	return sha1_of(ct->md, parent ? 3 : 2, part, part_len, key, KEY_LEN);
}

int lz_cachetree_new(struct lz_cachetree **ret)
{
	struct lz_cachetree *ct = calloc(1, sizeof(*ct));
	if (ct == NULL)
		return -ENOMEM;
	/* An empty tree is hashed from a buffer, never from NULL. */
	if ((ct->md = EVP_MD_CTX_new()) == NULL || lz_grow(&ct->buf, &ct->buf_cap, 1, 4096, SIZE_MAX) < 0 ||
	    getrandom(ct->salt, sizeof(ct->salt), 0) != (ssize_t)sizeof(ct->salt)) {
		lz_cachetree_free(ct);
		return -ENOMEM;
	}
	*ret = ct;
	return 0;
}

void lz_cachetree_free(struct lz_cachetree *ct)
{
	if (ct == NULL)
		return;
	EVP_MD_CTX_free(ct->md);
	free(ct->dirs);
	free(ct->frames);
	free(ct->buf);
	free(ct);
}

/* A directory of path opens: the root (end 0), or the one ending at end. */
static int push(struct lz_cachetree *ct, const char *path, size_t end)
{
	int rc = lz_grow(&ct->frames, &ct->frames_cap, sizeof(*ct->frames), ct->nframes + 1, SIZE_MAX / 64);
	if (rc < 0)
		return rc;
	struct frame *f = &ct->frames[ct->nframes];
	*f = (struct frame){ .end = end, .buf_off = ct->buf_len, .entry_start = ct->entries };
	const struct frame *parent = ct->nframes ? f - 1 : NULL;
	size_t start = parent == NULL || parent->end == 0 ? 0 : parent->end + 1;
	if ((rc = key_of(ct, parent ? parent->key : NULL, path + start, end - start, f->key)) < 0)
		return rc;
	ct->nframes++;
	return 0;
}

/* The open directory of the last path closes: its tree is hashed (Git's
 * "tree <size>\0" and the entries), recorded, and entered in its parent
 * as "40000 <name>\0<id>". */
static int close_top(struct lz_cachetree *ct)
{
	struct frame f = ct->frames[ct->nframes - 1];
	int rc = lz_grow(&ct->dirs, &ct->dirs_cap, sizeof(*ct->dirs), ct->ndirs + 1, LZ_CACHETREE_MAX_DIRS);
	if (rc < 0)
		return rc;
	struct dir *d = &ct->dirs[ct->ndirs++];
	char head[32];
	int hn = snprintf(head, sizeof(head), "tree %zu", ct->buf_len - f.buf_off);
	memcpy(d->key, f.key, KEY_LEN);
	const void *part[] = { head, ct->buf + f.buf_off };
	size_t part_len[] = { (size_t)hn + 1, ct->buf_len - f.buf_off };
	if ((rc = sha1_of(ct->md, 2, part, part_len, d->oid, sizeof(d->oid))) < 0)
		return rc;
	d->entries = (uint32_t)(ct->entries - f.entry_start);
	d->bad = f.bad;
	ct->buf_len = f.buf_off;
	if (--ct->nframes == 0)
		return 0;
	struct frame *parent = &ct->frames[ct->nframes - 1];
	size_t start = parent->end == 0 ? 0 : parent->end + 1;
	parent->bad |= f.bad;
	if ((rc = append(ct, "40000 ", 6)) < 0 || (rc = append(ct, ct->prev + start, f.end - start)) < 0 ||
	    (rc = append(ct, "", 1)) < 0)
		return rc;
	return append(ct, d->oid, sizeof(d->oid));
}

int lz_cachetree_entry(struct lz_cachetree *ct, const char *path, size_t len, uint32_t mode,
		       const uint8_t oid[LZ_CACHETREE_OID_LEN], unsigned stage, int intent_to_add)
{
	if (len == 0 || len > LZ_GITINDEX_PATH_MAX || path[0] == '/' || path[len - 1] == '/' ||
	    memmem(path, len, "//", 2) != NULL)
		return -EBADMSG;
	int rc;
	size_t common = 0;
	if (ct->nframes == 0) {
		if ((rc = push(ct, path, 0)) < 0)
			return rc;
	} else {
		/* Git's order: path bytes, a prefix first, then stage. */
		size_t n = len < ct->prev_len ? len : ct->prev_len;
		while (common < n && path[common] == ct->prev[common])
			common++;
		int cmp = common < n ? (unsigned char)path[common] - (unsigned char)ct->prev[common]
				     : (len > ct->prev_len) - (len < ct->prev_len);
		if (cmp < 0 || (cmp == 0 && stage <= ct->prev_stage))
			return -EBADMSG;
	}
	/* The last path's directories this one is not in close: a directory
	 * ending at e holds it when both paths agree through the '/' at e. */
	while (ct->nframes > 1 && common <= ct->frames[ct->nframes - 1].end)
		if ((rc = close_top(ct)) < 0)
			return rc;
	size_t top_end = ct->frames[ct->nframes - 1].end;
	size_t base = ct->nframes == 1 ? 0 : top_end + 1;
	for (const char *sl; (sl = memchr(path + base, '/', len - base)) != NULL;) {
		if ((rc = push(ct, path, (size_t)(sl - path))) < 0)
			return rc;
		base = (size_t)(sl - path) + 1;
	}
	struct frame *leaf = &ct->frames[ct->nframes - 1];
	static const uint8_t null_oid[LZ_CACHETREE_OID_LEN];
	if (stage != 0 || intent_to_add || memcmp(oid, null_oid, sizeof(null_oid)) == 0) {
		leaf->bad = true; /* Git writes no tree with it */
	} else {
		char m[16];
		int mn = snprintf(m, sizeof(m), "%o ", (unsigned)mode);
		if ((rc = append(ct, m, (size_t)mn)) < 0 || (rc = append(ct, path + base, len - base)) < 0 ||
		    (rc = append(ct, "", 1)) < 0 || (rc = append(ct, oid, LZ_CACHETREE_OID_LEN)) < 0)
			return rc;
	}
	ct->entries++;
	memcpy(ct->prev, path, len);
	ct->prev_len = len;
	ct->prev_stage = stage;
	return 0;
}

static int by_key(const void *a, const void *b)
{
	return memcmp(((const struct dir *)a)->key, ((const struct dir *)b)->key, KEY_LEN);
}

/* Git's "%d", nothing else: digits without a leading zero, or "-1" where
 * a count may be invalid. */
static int number(const uint8_t *p, size_t len, size_t *pos, bool minus_one, long *ret)
{
	size_t i = *pos;
	if (minus_one && len - i >= 2 && p[i] == '-' && p[i + 1] == '1') {
		*ret = -1;
		*pos = i + 2;
		return 0;
	}
	long v = 0;
	size_t start = i;
	while (i < len && p[i] >= '0' && p[i] <= '9' && i - start < 10) {
		v = v * 10 + (p[i] - '0');
		i++;
	}
	if (i == start || (p[start] == '0' && i - start > 1) || v > INT_MAX)
		return -EBADMSG;
	*ret = v;
	*pos = i;
	return 0;
}

/* A valid node, by its key: the directory there, with the count and the
 * tree it names. */
static int check_node(const struct lz_cachetree *ct, const uint8_t key[KEY_LEN], long count, const uint8_t *oid)
{
	struct dir want;
	memcpy(want.key, key, KEY_LEN);
	const struct dir *d = bsearch(&want, ct->dirs, ct->ndirs, sizeof(*ct->dirs), by_key);
	if (d == NULL || d->bad || d->entries != (uint64_t)count || memcmp(d->oid, oid, LZ_CACHETREE_OID_LEN) != 0)
		return -EILSEQ;
	return 0;
}

int lz_cachetree_check(struct lz_cachetree *ct, const uint8_t *ext, size_t len)
{
	int rc;
	if (len > LZ_CACHETREE_MAX_BYTES)
		return -E2BIG;
	if (ct->nframes == 0 && (rc = push(ct, "", 0)) < 0) /* no entries: the root's empty tree */
		return rc;
	while (ct->nframes > 0)
		if ((rc = close_top(ct)) < 0)
			return rc;
	qsort(ct->dirs, ct->ndirs, sizeof(*ct->dirs), by_key);
	/* Nodes in Git's order: a node, then its children's subtrees. */
	struct node *stack = NULL;
	size_t depth = 0, cap = 0, pos = 0;
	for (;;) {
		size_t parent_len = depth ? stack[depth - 1].path_len : 0;
		const uint8_t *nul = memchr(ext + pos, 0, len - pos);
		if (nul == NULL) {
			rc = -EBADMSG;
			break;
		}
		size_t name_len = (size_t)(nul - (ext + pos));
		size_t path_len = depth == 0 ? 0 : parent_len + (parent_len ? 1 : 0) + name_len;
		/* The root's name is empty and no other is; none holds '/'. A
		 * node's children come in Git's order (cache-tree.c's
		 * subtree_name_cmp: length, then bytes), each name once: Git
		 * 2.39 reading a name twice dies in every command. */
		if ((depth == 0) != (name_len == 0) || memchr(ext + pos, '/', name_len) != NULL ||
		    path_len > LZ_GITINDEX_PATH_MAX) {
			rc = -EBADMSG;
			break;
		}
		if (depth > 0) {
			struct node *parent = &stack[depth - 1];
			if (parent->last_len > name_len ||
			    (parent->last_len == name_len && memcmp(ext + parent->last_at, ext + pos, name_len) >= 0)) {
				rc = -EBADMSG;
				break;
			}
			parent->last_at = pos;
			parent->last_len = name_len;
		}
		uint8_t key[KEY_LEN];
		if ((rc = key_of(ct, depth ? stack[depth - 1].key : NULL, ext + pos, name_len, key)) < 0)
			break;
		pos += name_len + 1;
		long count, subtrees;
		if ((rc = number(ext, len, &pos, true, &count)) < 0 || pos >= len || ext[pos++] != ' ' ||
		    (rc = number(ext, len, &pos, false, &subtrees)) < 0 || pos >= len || ext[pos++] != '\n') {
			rc = -EBADMSG;
			break;
		}
		if (count >= 0) {
			if (len - pos < LZ_CACHETREE_OID_LEN) {
				rc = -EBADMSG;
				break;
			}
			if ((rc = check_node(ct, key, count, ext + pos)) < 0)
				break;
			pos += LZ_CACHETREE_OID_LEN;
		}
		if ((rc = lz_grow(&stack, &cap, sizeof(*stack), depth + 1, LZ_GITINDEX_PATH_MAX + 1)) < 0)
			break;
		stack[depth] = (struct node){ .children_left = (uint32_t)subtrees, .path_len = path_len, .last_len = 0 };
		memcpy(stack[depth++].key, key, KEY_LEN);
		while (depth > 0 && stack[depth - 1].children_left == 0)
			depth--;
		if (depth == 0) {
			rc = pos == len ? 0 : -EBADMSG;
			break;
		}
		stack[depth - 1].children_left--;
	}
	free(stack);
	return rc;
}
