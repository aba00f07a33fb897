/* Descriptor-relative removal of a directory tree.
 *
 * Used for staging trees, quarantined prepared artifacts and whiteouts.
 * Nothing is followed: symlinks are unlinked as links, every directory is
 * entered with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_XDEV)
 * relative to its parent, and a directory on another device (a mount) is
 * refused rather than emptied, so a planted mount or link cannot aim the
 * removal elsewhere. */
#ifndef LZ_TREE_H
#define LZ_TREE_H

#include "util/err.h"

/* The depth tree scans (treescan.h) go to. */
#define LZ_TREE_MAX_DEPTH 1024

/* Removes dirfd/name (any type), recursively for directories, at any
 * depth with a bounded number of descriptors. ENOENT is success.
 * Directories are made writable and searchable by their owner first
 * (image trees may contain 0500 directories). */
int lz_tree_remove(int dirfd, const char *name, struct lz_err *err);

struct lz_idmap;

/* lz_tree_remove run by a broker worker inside a user namespace with map:
 * trees with subordinate-owned files (prepared lowers, transient layers)
 * can only be removed by the namespace's root. */
int lz_tree_remove_in_userns(const struct lz_idmap *map, int dirfd, const char *name,
			     struct lz_err *err);

#endif
