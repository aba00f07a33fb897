/* Layer entry paths (spec 3.6 "Prepared lower"): the validation every entry
 * path and hard-link target passes before anything is written, the
 * root-relative path buffers the tree walks build, and the two messages
 * that name a refused or failing entry.
 *
 * Invariants (layer.h): a parsed path is relative, has no ".." component,
 * is at most LZ_LAYER_PATH_MAX bytes with components of at most
 * LZ_LAYER_NAME_MAX bytes, and has no component beginning with ".wh." other
 * than the last. A leading "./" is stripped; "." and empty components are
 * dropped; "" names the staging root.
 *
 * Threat: path traversal by a hostile archive (absolute paths, "..",
 * embedded NUL bytes, over-long names, whiteout names used as directories). */
#ifndef LZ_LAYERPATH_H
#define LZ_LAYERPATH_H

#include <stddef.h>

#include "image/layer.h"
#include "util/err.h"

/* The OCI whiteout marker prefix (image-spec layer.md "Whiteouts"). */
#define LZ_LAYERPATH_WH ".wh."
#define LZ_LAYERPATH_WH_LEN 4

/* An entry path split for descriptor-relative use. */
struct lz_layerpath {
	char full[LZ_LAYER_PATH_MAX + 1]; /* normalised; "" is the root */
	size_t len;
	char parent[LZ_LAYER_PATH_MAX + 1]; /* "" when the parent is the root */
	const char *name;                   /* last component, inside full */
};

/* Normalises the entry path in[0..len) into p: strips "./" prefixes, drops
 * "." and empty components and trailing slashes ("." and "./" name the
 * root, ""). Refuses, with -EINVAL and a message in err, empty, absolute,
 * NUL-bearing, over-long and ".." paths, over-long components, and a ".wh."
 * component that is not last. p's content is unspecified on failure. */
int lz_layerpath_parse(const char *in, size_t len, struct lz_layerpath *p, struct lz_err *err);

/* Appends "/name" (or "name" to the empty root path) to buf of capacity
 * LZ_LAYER_PATH_MAX + 1; *len is updated. -ENAMETOOLONG, buf untouched,
 * when the result would exceed LZ_LAYER_PATH_MAX bytes. */
int lz_layerpath_push(char *buf, size_t *len, const char *name);

/* Truncates buf back to old bytes (a length *len had before a push). */
void lz_layerpath_pop(char *buf, size_t *len, size_t old);

/* path as shown in messages: "." for the root "". */
const char *lz_layerpath_shown(const char *path);

/* "layer entry '<path>': <op> '<object>': <strerror(e)>", code e (EIO when
 * e <= 0); returns -code. */
int lz_layerpath_fail(struct lz_err *err, int e, const char *path, const char *op,
		      const char *object);

/* "layer entry '<path>' refused: <why>", code EINVAL; returns -EINVAL. */
int lz_layerpath_refuse(struct lz_err *err, const char *path, const char *why);

#endif
