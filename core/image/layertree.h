/* The staging tree beneath its retained root descriptor (spec 3.6 "Prepared
 * lower"): the descriptor-relative primitives layer application writes and
 * removes with.
 *
 * Invariants:
 * - Every path is resolved from the root with openat2(RESOLVE_BENEATH |
 *   RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
 *   (LZ_RESOLVE_OWNED); a final component is acted on relative to its parent
 *   with calls that never follow it. A symlink planted by an earlier entry or
 *   layer is never followed.
 * - Removal follows no symlink (a link is unlinked as a link) and never holds
 *   more than two directory descriptors at a time, whatever the depth.
 * - The staging tree has a single writer (the preparation worker), so a path
 *   may be resolved again from the root.
 *
 * Threat: a hostile layer aiming a write or a removal outside the staging
 * root through a planted symlink, a mount or a "..", or exhausting
 * descriptors with a deep tree.
 *
 * Paths are root-relative ("" is the root), in buffers of capacity
 * LZ_LAYER_PATH_MAX + 1 (layerpath.h). `entry` is the archive entry a call
 * works for: every message names it. */
#ifndef LZ_LAYERTREE_H
#define LZ_LAYERTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "image/layerpath.h"
#include "util/err.h"

/* The staging root (O_PATH|O_DIRECTORY; not owned) and the error object
 * every message goes to (may be NULL).
 *
 * implied, when not NULL, is called before the create walk of
 * lz_layertree_open_dir makes a directory (one an entry implies): each
 * takes an inode and a block like an entry does, so the layer counts it
 * against its bounds. A negative return (its message set) stops the walk
 * before the directory is made and is returned. */
struct lz_layertree {
	int root;
	struct lz_err *err;
	int (*implied)(void *ctx, const char *entry, const char *dir);
	void *implied_ctx;
};

/* Opens rel beneath the root with flags | O_DIRECTORY | O_CLOEXEC. Returns
 * the descriptor or -errno; sets no message. */
int lz_layertree_open(const struct lz_layertree *t, const char *rel, int flags);

/* Describes why rel could not be opened as a directory for entry: a symlink
 * (ELOOP), a mount or escape (EXDEV) or a non-directory component (ENOTDIR)
 * is a refusal, -EINVAL; anything else keeps its errno e. */
int lz_layertree_dir_error(const struct lz_layertree *t, int e, const char *entry, const char *rel);

/* Opens the directory rel (beneath the root) as O_PATH into *ret_fd. With
 * create, missing components are made 0755 (implied directories, each
 * announced to t->implied first); without it, -ENOENT and -ENOTDIR are
 * returned quietly (no message) for the caller to interpret. */
int lz_layertree_open_dir(const struct lz_layertree *t, const char *rel, bool create,
			  const char *entry, int *ret_fd);

/* chmod of dirfd/name that never follows a symlink (-ELOOP for one).
 * Returns 0 or -errno. */
int lz_layertree_chmod_nofollow(int dirfd, const char *name, mode_t mode);

/* mkdirat with an exact mode (umask-proof). Returns 0 or -errno. */
int lz_layertree_make_dir(int dirfd, const char *name, mode_t mode);

/* Removes dirfd/name, whose root-relative path is in path (*len bytes;
 * restored on return), recursively, without following symlinks. A missing
 * name is not an error. */
int lz_layertree_remove(const struct lz_layertree *t, int dirfd, const char *name, char *path,
			size_t *len, const char *entry);

/* Decides whether the child at path (len bytes) survives a prune. */
typedef bool (*lz_layertree_keep_fn)(const void *ctx, const char *path, size_t len);

/* Whether a kept directory at path is pruned in turn: 1 yes, 0 no (it was
 * already), a negative errno (its error set) to stop. */
typedef int (*lz_layertree_descend_fn)(void *ctx, const char *path, size_t len);

/* Prunes the directory at path (*len bytes; restored on return): every
 * child that keep rejects is removed recursively; kept children that are
 * directories are pruned in turn where descend says so, kept
 * non-directories stay. A missing path (or one that is not a directory)
 * is not an error. */
int lz_layertree_prune(const struct lz_layertree *t, char *path, size_t *len, const char *entry,
		       lz_layertree_keep_fn keep, lz_layertree_descend_fn descend, void *ctx);

/* Clears the way for a new entry at pfd/p->name (pfd is p's parent).
 * Returns 1 when an existing directory is kept (keep_dir; its stat in
 * *ret_st when not NULL), 0 when the name is now free. */
int lz_layertree_make_room(const struct lz_layertree *t, int pfd, const struct lz_layerpath *p,
			   bool keep_dir, struct stat *ret_st);

#endif
