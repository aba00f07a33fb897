/* libFuzzer target for the entry paths of a hostile layer:
 * core/image/layerpath.c and the bookkeeping of core/image/layerwhiteout.c.
 *
 * 1. The whole input as one entry path (NUL bytes included), then each
 *    '\n'-separated piece of it, through lz_layerpath_parse, against a
 *    model written from layerpath.h: refused (-EINVAL, err code EINVAL,
 *    a message) exactly when the path is empty, over LZ_LAYER_PATH_MAX,
 *    absolute, NUL-bearing, has a ".." component, a component over
 *    LZ_LAYER_NAME_MAX or a ".wh." component that is not last; otherwise
 *    normalised exactly as the model ("./", "." and empty components and
 *    trailing slashes dropped), with len, parent and name agreeing with
 *    full, and parsing full again giving full back.
 * 2. lz_layerpath_push/pop on an accepted path: -ENAMETOOLONG with the
 *    buffer untouched exactly when the result would pass
 *    LZ_LAYER_PATH_MAX, otherwise "full/name"; pop restores the path.
 * 3. Each accepted piece is marked in a struct lz_layerwhiteout: afterwards
 *    it and its ancestors (all, or ~16 of a deep path) are "wrote", and
 *    over all pieces (and their near misses) lz_layerwhiteout_wrote agrees
 *    with a plain table of what was marked; the bookkeeping budget is
 *    charged once per path added, and for nothing already present.
 * 4. Every accepted piece whose name is a marker (lz_layerwhiteout_is_marker
 *    exactly for a ".wh." prefix) is applied to an empty staging tree (one
 *    directory per process, which must stay empty): AUFS metadata
 *    (".wh..wh.*" other than the opaque marker) is ignored and not counted,
 *    ".wh.", ".wh.." and ".wh..." are refused with -EINVAL and not counted,
 *    anything else is counted once and succeeds (nothing below to hide).
 * Any violation abort()s. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image/layer.h"
#include "image/layerpath.h"
#include "image/layertree.h"
#include "image/layerwhiteout.h"
#include "util/err.h"

#define MAX_PIECES 64

static void check(bool ok)
{
	if (!ok)
		abort();
}

/* The model: normalises in[0..len) into out (capacity len + 1) or says
 * it is refused. */
static bool model(const char *in, size_t len, char *out, size_t *out_len)
{
	if (len == 0 || len > LZ_LAYER_PATH_MAX || memchr(in, '\0', len) != NULL || in[0] == '/')
		return false;
	size_t o = 0;
	bool prev_wh = false; /* the last kept component begins with ".wh." */
	for (size_t i = 0; i <= len;) {
		const char *slash = memchr(in + i, '/', len - i);
		size_t j = slash ? (size_t)(slash - in) : len;
		size_t n = j - i;
		const char *c = in + i;
		i = j + 1;
		if (n == 0 || (n == 1 && c[0] == '.'))
			continue;
		if (n == 2 && c[0] == '.' && c[1] == '.')
			return false;
		if (n > LZ_LAYER_NAME_MAX)
			return false;
		if (prev_wh)
			return false;
		if (o > 0)
			out[o++] = '/';
		memcpy(out + o, c, n);
		o += n;
		prev_wh = n >= 4 && memcmp(c, ".wh.", 4) == 0;
	}
	out[o] = '\0';
	*out_len = o;
	return true;
}

static bool is_normal(const char *s, size_t n)
{
	if (n == 0)
		return true;
	if (s[0] == '/' || s[n - 1] == '/')
		return false;
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j < n && s[j] != '/')
			j++;
		size_t c = j - i;
		if (c == 0 || c > LZ_LAYER_NAME_MAX || (c == 1 && s[i] == '.') ||
		    (c == 2 && s[i] == '.' && s[i + 1] == '.'))
			return false;
		i = j + 1;
	}
	return true;
}

/* Parses in[0..len) and checks it against the model; returns whether it
 * was accepted. */
static bool check_parse(const char *in, size_t len, struct lz_layerpath *p)
{
	char *want = malloc(len + 1);
	check(want != NULL);
	size_t want_len = 0;
	bool ok = model(in, len, want, &want_len);
	struct lz_err err = { 0 };
	int r = lz_layerpath_parse(in, len, p, &err);
	if (!ok) {
		check(r == -EINVAL && err.code == EINVAL && err.msg[0] != '\0');
		check(strnlen(err.msg, sizeof(err.msg)) < sizeof(err.msg));
		free(want);
		return false;
	}
	check(r == 0 && err.code == 0);
	check(p->len == want_len && memcmp(p->full, want, want_len + 1) == 0);
	check(p->len <= LZ_LAYER_PATH_MAX && strlen(p->full) == p->len && is_normal(p->full, p->len));
	check(p->name >= p->full && p->name <= p->full + p->len && strchr(p->name, '/') == NULL);
	size_t pl = strlen(p->parent);
	if (p->name == p->full) {
		check(pl == 0);
	} else {
		check((size_t)(p->name - p->full) == pl + 1 && p->full[pl] == '/' &&
		      memcmp(p->parent, p->full, pl) == 0);
	}
	check(p->len == 0 || p->name[0] != '\0');
	/* no ".wh." directory */
	for (const char *c = p->full; c < p->name; c = strchr(c, '/') + 1)
		check(strncmp(c, ".wh.", 4) != 0);
	check(lz_layerwhiteout_is_marker(p->name) == (strncmp(p->name, ".wh.", 4) == 0));
	if (p->len > 0) {
		struct lz_layerpath again;
		check(lz_layerpath_parse(p->full, p->len, &again, NULL) == 0);
		check(again.len == p->len && strcmp(again.full, p->full) == 0 &&
		      strcmp(again.parent, p->parent) == 0 && strcmp(again.name, p->name) == 0);
	}
	free(want);
	return true;
}

static void check_push(const struct lz_layerpath *p, const char *name)
{
	char buf[LZ_LAYER_PATH_MAX + 1], before[LZ_LAYER_PATH_MAX + 1];
	size_t len = p->len, n = strlen(name);
	memcpy(buf, p->full, len + 1);
	memcpy(before, buf, sizeof(buf));
	int r = lz_layerpath_push(buf, &len, name);
	size_t want = p->len + (p->len > 0) + n;
	if (want > LZ_LAYER_PATH_MAX) {
		check(r == -ENAMETOOLONG && len == p->len && memcmp(buf, before, sizeof(buf)) == 0);
		return;
	}
	check(r == 0 && len == want && strlen(buf) == len && memcmp(buf, p->full, p->len) == 0);
	check(p->len == 0 || buf[p->len] == '/');
	check(strcmp(buf + len - n, name) == 0);
	lz_layerpath_pop(buf, &len, p->len);
	check(len == p->len && strcmp(buf, p->full) == 0);
	check(strcmp(lz_layerpath_shown(p->full), p->len ? p->full : ".") == 0);
}

/* What was marked: a plain chained hash table (FNV-1a; the model needs no
 * protection from collisions). */
#define MODEL_BUCKETS 4096
struct node {
	struct node *next;
	size_t n;
	char s[];
};
static struct node *buckets[MODEL_BUCKETS];

static size_t model_bucket(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
	return (size_t)(h % MODEL_BUCKETS);
}

static bool model_has(const char *s, size_t n)
{
	for (struct node *e = buckets[model_bucket(s, n)]; e != NULL; e = e->next)
		if (e->n == n && memcmp(e->s, s, n) == 0)
			return true;
	return false;
}

static void model_add(const char *s, size_t n)
{
	struct node *e = malloc(sizeof(*e) + n + 1);
	check(e != NULL);
	e->n = n;
	memcpy(e->s, s, n);
	e->s[n] = '\0';
	size_t b = model_bucket(s, n);
	e->next = buckets[b];
	buckets[b] = e;
}

static void model_clear(void)
{
	for (size_t b = 0; b < MODEL_BUCKETS; b++) {
		while (buckets[b] != NULL) {
			struct node *e = buckets[b];
			buckets[b] = e->next;
			free(e);
		}
	}
}

/* Marks s[0..n) and its ancestors in the model; returns the charge: each
 * path added. */
static uint64_t model_mark(const char *s, size_t n)
{
	uint64_t charge = 0;
	while (n > 0) {
		if (model_has(s, n))
			break;
		model_add(s, n);
		charge += n + 1 + 2 * sizeof(char *);
		while (n > 0 && s[n - 1] != '/')
			n--;
		if (n > 0)
			n--;
	}
	return charge;
}

static int tree_root = -1;
static char tree_dir[] = "/tmp/fuzz_layerpath.XXXXXX";

static void remove_tree(void)
{
	rmdir(tree_dir);
}

static bool dir_empty(int fd)
{
	int d = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	check(d >= 0);
	DIR *dir = fdopendir(d);
	check(dir != NULL);
	struct dirent *e;
	bool empty = true;
	while ((e = readdir(dir)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			empty = false;
	closedir(dir);
	return empty;
}

static void check_whiteout(struct lz_layerwhiteout *w, const struct lz_layerpath *p, uint64_t *tracked)
{
	struct lz_err err = { 0 };
	struct lz_layertree t = { .root = tree_root, .err = &err };
	struct lz_layer_report rep;
	memset(&rep, 0, sizeof(rep));
	const char *name = p->name;
	bool opaque = strcmp(name, ".wh..wh..opq") == 0;
	bool meta = !opaque && strncmp(name, ".wh..wh.", 8) == 0;
	const char *target = name + 4;
	bool none = !opaque && !meta &&
		    (target[0] == '\0' || strcmp(target, ".") == 0 || strcmp(target, "..") == 0);
	int r = lz_layerwhiteout_apply(w, &t, p, &rep, tracked);
	if (meta) {
		check(r == 0 && rep.whiteouts == 0);
	} else if (none) {
		check(r == -EINVAL && err.code == EINVAL && rep.whiteouts == 0);
	} else {
		check(r == 0 && rep.whiteouts == 1);
	}
	check(rep.skipped_xattrs == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (tree_root < 0) {
		check(mkdtemp(tree_dir) != NULL);
		tree_root = open(tree_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		check(tree_root >= 0);
		atexit(remove_tree);
	}
	const char *in = (const char *)data;
	struct lz_layerpath p;

	if (check_parse(in, size, &p)) {
		check_push(&p, p.name);
		check_push(&p, "x");
	}

	struct lz_layerwhiteout w = { 0 };
	uint64_t tracked = 0, want_tracked = 0;
	struct lz_layerpath *acc = malloc(MAX_PIECES * sizeof(*acc));
	check(acc != NULL);
	size_t n_acc = 0;
	for (size_t at = 0, pieces = 0; at <= size && pieces < MAX_PIECES; pieces++) {
		const char *nl = memchr(in + at, '\n', size - at);
		size_t len = nl ? (size_t)(nl - (in + at)) : size - at;
		struct lz_layerpath *q = &acc[n_acc];
		if (check_parse(in + at, len, q)) {
			n_acc++;
			struct lz_err err = { 0 };
			check(lz_layerwhiteout_mark(&w, q->full, q->len, &tracked, &err) == 0);
			want_tracked += model_mark(q->full, q->len);
			check(tracked == want_tracked);
			check(q->len == 0 || lz_layerwhiteout_wrote(&w, q->full, q->len));
			/* ancestors: every one of a shallow path, about 16 of a
			 * deep one (each lookup hashes the prefix) */
			size_t depth = 0, seen = 0;
			for (size_t k = 0; k < q->len; k++)
				depth += q->full[k] == '/';
			for (size_t k = q->len; k > 0; k--)
				if (q->full[k - 1] == '/' && seen++ % (1 + depth / 16) == 0)
					check(lz_layerwhiteout_wrote(&w, q->full, k - 1));
		}
		at += len + 1;
	}
	for (size_t i = 0; i < n_acc; i++) {
		const struct lz_layerpath *q = &acc[i];
		check(lz_layerwhiteout_wrote(&w, q->full, q->len) == model_has(q->full, q->len));
		/* near misses: a prefix cut mid-component, an extension */
		for (size_t k = 0; k < q->len; k += 1 + q->len / 8)
			check(lz_layerwhiteout_wrote(&w, q->full, k) == model_has(q->full, k));
		char ext[LZ_LAYER_PATH_MAX + 3];
		memcpy(ext, q->full, q->len);
		memcpy(ext + q->len, "/x", 2);
		check(lz_layerwhiteout_wrote(&w, ext, q->len + 2) == model_has(ext, q->len + 2));
	}
	for (size_t i = 0; i < n_acc; i++)
		if (lz_layerwhiteout_is_marker(acc[i].name))
			check_whiteout(&w, &acc[i], &tracked);
	check(dir_empty(tree_root));

	lz_layerwhiteout_done(&w);
	model_clear();
	free(acc);
	return 0;
}
