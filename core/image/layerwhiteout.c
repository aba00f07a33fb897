/* OCI whiteouts of one layer (see layerwhiteout.h for the rules).
 *
 * Same-layer tracking. OCI whiteouts hide entries of lower layers only. The
 * layer remembers every path it wrote and every ancestor of such a path (the
 * "created" set; a path's ancestors are always in the set when the path is).
 * Removing lower content of a directory D ("pruning" D) deletes each child
 * of D that is not in the set and prunes each child directory that is, so
 * the layer's own entries survive whichever order the archive lists them in:
 * - D/.wh..wh..opq prunes D (children present when the marker is seen that
 *   this layer did not write are removed; later entries are simply written);
 * - D/.wh.N removes D/N recursively when the layer has not written D/N or
 *   anything beneath it; otherwise a directory D/N is pruned and a
 *   non-directory written by this layer is kept.
 * Whiteout files and AUFS metadata (.wh..wh.*) are never materialised.
 * A directory is pruned once per layer: after it, only the layer's own
 * entries are below it, so a later marker there or below prunes nothing. */
#include "image/layerwhiteout.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "util/cleanup.h"

#define WH_META ".wh..wh."
#define WH_META_LEN 8
#define WH_OPAQUE ".wh..wh..opq"

/* ---- the keyed hash ------------------------------------------------------ */

/* SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF",
 * 2012) under the set's key, drawn from getrandom when the set first
 * grows: a layer's author cannot know where its paths land, so cannot
 * choose names that all fall into one probe run. (With FNV-1a, whose low
 * bits depend only on the low bits of its state, 2^17 names sharing their
 * slot are found offline in milliseconds, and each insertion then walks
 * all the others: a layer of them is quadratic.) The hash is taken byte by
 * byte so that every prefix of a path is hashed in one pass
 * (pruned_at_or_above). */
struct sip {
	uint64_t v[4];
	uint64_t m; /* the bytes of the word being filled, little-endian */
	size_t n;   /* bytes taken so far */
};

static uint64_t rotl(uint64_t x, unsigned b)
{
	return (x << b) | (x >> (64 - b));
}

static void sip_round(uint64_t v[4])
{
	v[0] += v[1];
	v[1] = rotl(v[1], 13) ^ v[0];
	v[0] = rotl(v[0], 32);
	v[2] += v[3];
	v[3] = rotl(v[3], 16) ^ v[2];
	v[0] += v[3];
	v[3] = rotl(v[3], 21) ^ v[0];
	v[2] += v[1];
	v[1] = rotl(v[1], 17) ^ v[2];
	v[2] = rotl(v[2], 32);
}

static void sip_word(uint64_t v[4], uint64_t m)
{
	v[3] ^= m;
	sip_round(v);
	sip_round(v);
	v[0] ^= m;
}

static void sip_init(struct sip *s, const uint64_t key[2])
{
	s->v[0] = key[0] ^ 0x736f6d6570736575ull;
	s->v[1] = key[1] ^ 0x646f72616e646f6dull;
	s->v[2] = key[0] ^ 0x6c7967656e657261ull;
	s->v[3] = key[1] ^ 0x7465646279746573ull;
	s->m = 0;
	s->n = 0;
}

static void sip_byte(struct sip *s, char c)
{
	s->m |= (uint64_t)(unsigned char)c << (8 * (s->n & 7));
	if ((++s->n & 7) == 0) {
		sip_word(s->v, s->m);
		s->m = 0;
	}
}

/* The hash of the bytes taken so far; s can take more afterwards. */
static uint64_t sip_final(const struct sip *s)
{
	uint64_t v[4] = { s->v[0], s->v[1], s->v[2], s->v[3] };
	sip_word(v, s->m | (uint64_t)(s->n & 0xff) << 56);
	v[2] ^= 0xff;
	for (int i = 0; i < 4; i++)
		sip_round(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}

uint64_t lz_pathset_hash(const struct lz_pathset *set, const char *p, size_t n)
{
	struct sip s;
	sip_init(&s, set->key);
	for (size_t i = 0; i < n; i++)
		sip_byte(&s, p[i]);
	return sip_final(&s);
}

/* ---- the created set ----------------------------------------------------- */

/* p[0..n), whose hash is h: its slot. */
static char **pathset_slot_h(char **slot, size_t cap, const char *p, size_t n, uint64_t h)
{
	size_t mask = cap - 1;
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		char *k = slot[i];
		/* strncmp stops at k's NUL; p has no NUL within n bytes. */
		if (k == NULL || (strncmp(k, p, n) == 0 && k[n] == '\0'))
			return &slot[i];
	}
}

static char **pathset_slot(const struct lz_pathset *s, char **slot, size_t cap, const char *p, size_t n)
{
	return pathset_slot_h(slot, cap, p, n, lz_pathset_hash(s, p, n));
}

static bool pathset_has(const struct lz_pathset *s, const char *path, size_t len)
{
	return s->cap > 0 && *pathset_slot(s, s->slot, s->cap, path, len) != NULL;
}

bool lz_layerwhiteout_wrote(const struct lz_layerwhiteout *w, const char *path, size_t len)
{
	return pathset_has(&w->created, path, len);
}

/* Returns 1 when added, 0 when already present, -ENOMEM, or -errno when
 * no key could be drawn. */
static int pathset_add(struct lz_pathset *s, const char *p, size_t n)
{
	if (!s->keyed) {
		if (getrandom(s->key, sizeof(s->key), 0) != (ssize_t)sizeof(s->key))
			return errno > 0 ? -errno : -EIO;
		s->keyed = true;
	}
	if ((s->n + 1) * 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		char **slot = calloc(cap, sizeof(*slot));
		if (slot == NULL)
			return -ENOMEM;
		for (size_t i = 0; i < s->cap; i++)
			if (s->slot[i] != NULL)
				*pathset_slot(s, slot, cap, s->slot[i], strlen(s->slot[i])) =
					s->slot[i];
		free(s->slot);
		s->slot = slot;
		s->cap = cap;
	}
	char **at = pathset_slot(s, s->slot, s->cap, p, n);
	if (*at != NULL)
		return 0;
	*at = strndup(p, n);
	if (*at == NULL)
		return -ENOMEM;
	s->n++;
	return 1;
}

static void pathset_done(struct lz_pathset *s)
{
	for (size_t i = 0; i < s->cap; i++)
		free(s->slot[i]);
	free(s->slot);
	*s = (struct lz_pathset){ 0 };
}

void lz_layerwhiteout_done(struct lz_layerwhiteout *w)
{
	pathset_done(&w->created);
	pathset_done(&w->pruned);
}

/* Charges path[0..len) to the bookkeeping budget. */
static int charge(uint64_t *tracked, const char *path, size_t len, struct lz_err *err)
{
	*tracked += len + 1 + 2 * sizeof(char *);
	if (*tracked > LZ_LAYER_MAX_TRACKED)
		return lz_err_set(err, E2BIG, "layer entry '%s': more than %u bytes of paths", path,
				  LZ_LAYER_MAX_TRACKED);
	return 0;
}

int lz_layerwhiteout_mark(struct lz_layerwhiteout *w, const char *path, size_t len,
			  uint64_t *tracked, struct lz_err *err)
{
	while (len > 0) {
		/* Present already, and so are its ancestors: nothing to charge. */
		if (pathset_has(&w->created, path, len))
			return 0;
		int r = charge(tracked, path, len, err);
		if (r < 0)
			return r;
		r = pathset_add(&w->created, path, len);
		if (r < 0)
			return lz_err_set(err, -r, "layer entry '%s': remembering it: %s", path, strerror(-r));
		while (len > 0 && path[len - 1] != '/')
			len--;
		if (len > 0)
			len--;
	}
	return 0;
}

/* ---- whiteouts ----------------------------------------------------------- */

bool lz_layerwhiteout_is_marker(const char *name)
{
	return strncmp(name, LZ_LAYERPATH_WH, LZ_LAYERPATH_WH_LEN) == 0;
}

/* One prune of lower-layer content (prune_lower). */
struct prune_ctx {
	struct lz_layerwhiteout *w;
	const struct lz_layertree *t;
	const char *entry;
	uint64_t *tracked;
};

static bool lower_keeps(const void *ctx, const char *path, size_t len)
{
	const struct prune_ctx *c = ctx;
	return lz_layerwhiteout_wrote(c->w, path, len);
}

/* Remembers each directory a prune walks: below one already walked only
 * this layer's own entries are left, which a later prune keeps, so it is
 * not walked again. Nested markers listed deepest first otherwise walked
 * the same directories once per marker, each level reopened from the
 * root: cubic in the depth (a 36 KiB layer took 26 s). */
static int prune_once(void *ctx, const char *path, size_t len)
{
	struct prune_ctx *c = ctx;
	if (pathset_has(&c->w->pruned, path, len))
		return 0;
	int r = charge(c->tracked, c->entry, len, c->t->err);
	if (r < 0)
		return r;
	if ((r = pathset_add(&c->w->pruned, path, len)) < 0)
		return lz_err_set(c->t->err, -r, "layer entry '%s': remembering '%s': %s", c->entry,
				  lz_layerpath_shown(path), strerror(-r));
	return 1;
}

/* Whether path[0..len) or a directory above it ("" is the root) was
 * pruned: one pass, each prefix hashed as it grows (a deep path's
 * ancestors are not hashed again each). */
static bool pruned_at_or_above(const struct lz_pathset *pruned, const char *path, size_t len)
{
	if (pruned->cap == 0)
		return false;
	struct sip h;
	sip_init(&h, pruned->key);
	for (size_t i = 0; i <= len; i++) {
		if ((i == 0 || i == len || path[i] == '/') &&
		    *pathset_slot_h(pruned->slot, pruned->cap, path, i, sip_final(&h)) != NULL)
			return true;
		if (i < len)
			sip_byte(&h, path[i]);
	}
	return false;
}

/* Removes the lower-layer content of the directory at path: every child not
 * in the created set; children in the set that are directories are pruned
 * in turn. A missing path is not an error. Once per directory and layer
 * (lz_layerwhiteout). */
static int prune_lower(struct lz_layerwhiteout *w, const struct lz_layertree *t, char *path, size_t *len,
		       const char *entry, uint64_t *tracked)
{
	if (pruned_at_or_above(&w->pruned, path, *len))
		return 0;
	struct prune_ctx c = { w, t, entry, tracked };
	int r = prune_once(&c, path, *len);
	return r <= 0 ? r : lz_layertree_prune(t, path, len, entry, lower_keeps, prune_once, &c);
}

int lz_layerwhiteout_apply(struct lz_layerwhiteout *w, const struct lz_layertree *t, const struct lz_layerpath *p,
			   struct lz_layer_report *rep, uint64_t *tracked)
{
	bool opaque = strcmp(p->name, WH_OPAQUE) == 0;
	if (!opaque && strncmp(p->name, WH_META, WH_META_LEN) == 0)
		return 0; /* AUFS metadata: never materialised, hides nothing */
	const char *target = p->name + LZ_LAYERPATH_WH_LEN;
	if (!opaque && (target[0] == '\0' || strcmp(target, ".") == 0 || strcmp(target, "..") == 0))
		return lz_layerpath_refuse(t->err, p->full, "whiteout names no entry");
	rep->whiteouts++;

	_cleanup_close_ int pfd = -EBADF;
	int r = lz_layertree_open_dir(t, p->parent, false, p->full, &pfd);
	if (r == -ENOENT || r == -ENOTDIR)
		return 0; /* nothing below to hide */
	if (r < 0)
		return r;

	char buf[LZ_LAYER_PATH_MAX + 1];
	size_t len = strlen(p->parent);
	memcpy(buf, p->parent, len + 1);
	if (opaque)
		return prune_lower(w, t, buf, &len, p->full, tracked);
	if (lz_layerpath_push(buf, &len, target) < 0)
		return lz_layerpath_fail(t->err, ENAMETOOLONG, p->full, "remove", p->full);
	if (!lz_layerwhiteout_wrote(w, buf, len))
		return lz_layertree_remove(t, pfd, target, buf, &len, p->full);
	struct stat st;
	if (fstatat(pfd, target, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
		return prune_lower(w, t, buf, &len, p->full, tracked);
	return 0; /* written by this layer: a whiteout hides lower layers only */
}
