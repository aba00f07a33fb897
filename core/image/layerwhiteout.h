/* OCI whiteouts of one layer (spec 3.6 "Prepared lower"; image-spec
 * layer.md "Whiteouts" and "Opaque Whiteout").
 *
 * A whiteout hides content of lower layers only, never of its own layer, in
 * whichever order the archive lists them. The layer therefore remembers
 * every path it wrote and every ancestor of one (the "created" set), and a
 * whiteout removes only what is not in that set:
 * - D/.wh..wh..opq (opaque) removes the lower content of D;
 * - D/.wh.N removes D/N recursively unless the layer wrote D/N or anything
 *   beneath it; then a directory D/N loses its lower content and a
 *   non-directory written by this layer is kept;
 * - other .wh..wh.* names (AUFS metadata) hide nothing.
 * Whiteout files themselves are never materialised.
 *
 * Threat: a whiteout aimed outside the tree or through a symlink (removal is
 * descriptor-relative and confined, layertree.h), and a path flood growing
 * the created set without bound (the bookkeeping budget). */
#ifndef LZ_LAYERWHITEOUT_H
#define LZ_LAYERWHITEOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "image/layer.h"
#include "image/layerpath.h"
#include "image/layertree.h"
#include "util/err.h"

/* A set of paths: open addressing with linear probing, owned strings.
 * Slots come from SipHash-2-4 under a key of the set's own, drawn from
 * getrandom when it first grows: names a layer chose to collide (in one
 * probe run, each insertion walking all the others) collide only by
 * chance. */
struct lz_pathset {
	char **slot;
	size_t cap; /* power of two, or 0 */
	size_t n;
	uint64_t key[2];
	bool keyed;
};

/* The hash of p[0..n) under set's key (SipHash-2-4). */
uint64_t lz_pathset_hash(const struct lz_pathset *set, const char *p, size_t n);

/* One layer's bookkeeping. Zero-initialised is empty; released by
 * lz_layerwhiteout_done. */
struct lz_layerwhiteout {
	struct lz_pathset created; /* what it wrote, and their ancestors */
	/* Directories its whiteouts pruned: below one, only its own entries
	 * are left, so a marker repeated there (or below) prunes nothing and
	 * is not walked again (a layer of one directory's opaque marker
	 * repeated would otherwise walk it each time: quadratic). */
	struct lz_pathset pruned;
};

void lz_layerwhiteout_done(struct lz_layerwhiteout *w);

/* Whether name (a last path component) is a whiteout marker: it begins with
 * ".wh.". */
bool lz_layerwhiteout_is_marker(const char *name);

/* Remembers that this layer wrote path[0..len): adds it and its ancestors.
 * Each path added is charged to *tracked, the layer's bookkeeping budget
 * (bytes); beyond LZ_LAYER_MAX_TRACKED the layer fails with -E2BIG. -ENOMEM
 * when memory runs out (-errno when the set's key cannot be drawn).
 * Messages name path. */
int lz_layerwhiteout_mark(struct lz_layerwhiteout *w, const char *path, size_t len,
			  uint64_t *tracked, struct lz_err *err);

/* Whether path[0..len) was marked (or is an ancestor of a marked path). */
bool lz_layerwhiteout_wrote(const struct lz_layerwhiteout *w, const char *path, size_t len);

/* Applies the whiteout entry p (its name is a marker) to the tree beneath
 * t's root and counts it in rep->whiteouts (AUFS metadata is not counted).
 * A directory it prunes is remembered, charged to *tracked as marked paths
 * are. A missing parent hides nothing. -EINVAL for a whiteout that names no
 * entry ("", "." or ".."), -E2BIG beyond the bookkeeping budget, otherwise
 * as the removal fails. */
int lz_layerwhiteout_apply(struct lz_layerwhiteout *w, const struct lz_layertree *t, const struct lz_layerpath *p,
			   struct lz_layer_report *rep, uint64_t *tracked);

#endif
