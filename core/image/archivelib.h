/* libarchive, opened when first used (archivelib.c, util/lazylib.h). */
#ifndef LZ_IMAGE_ARCHIVELIB_H
#define LZ_IMAGE_ARCHIVELIB_H

#include "util/err.h"

/* Loads libarchive now: 0, or -ENOENT naming the library and the
 * loader's reason. Before this, the first libarchive call loads it, and a
 * missing library then ends the process. */
int lz_archivelib_load(struct lz_err *err);

/* The soname it opens, read off libarchive at build time. */
extern const char lz_archivelib_soname[];

#endif
