/* libgit2, opened when first used (gitlib.c, util/lazylib.h). */
#ifndef LZ_ROUTER_GITLIB_H
#define LZ_ROUTER_GITLIB_H

#include "util/err.h"

/* Loads libgit2 now: 0, or -ENOENT naming the library and the loader's
 * reason. Before this, the first libgit2 call loads it, and a missing
 * library then ends the process. */
int lz_gitlib_open(struct lz_err *err);

/* lz_gitlib_open, then initialises libgit2 for the rest of the process
 * (and its forks). */
int lz_gitlib_load(struct lz_err *err);

/* The soname it opens, read off libgit2 at build time. */
extern const char lz_gitlib_soname[];

#endif
