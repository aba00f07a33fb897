/* Confined path authority (spec 3.2 "Path resolution").
 *
 * A path is turned into a retained descriptor once, by walking from "/" one
 * component at a time with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS); the canonical text is kept only as a label and
 * digest input. Lazaret-owned trees (Storage, Runtime, profile and Domain
 * roots) are created one component at a time with mode 0700, must be owned
 * by the invoking user with mode exactly 0700, and are entered with
 * RESOLVE_NO_XDEV as well, so a mount or symlink planted inside cannot
 * redirect Lazaret's writes. Nothing here re-opens a validated path by name.
 *
 * Threat: a sandbox-writable or foreign directory swapped for a symlink or
 * mount between check and use; a root owned or readable by someone else. */
#ifndef LZ_PATHAUTH_H
#define LZ_PATHAUTH_H

#include <errno.h> /* EBADF in LZ_PATH_INIT */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

#define LZ_PATH_MAX 4096

/* A retained, validated object. fd is O_PATH (directories: O_DIRECTORY). */
struct lz_path {
	int fd;
	char *canonical; /* label only: never reopened by name */
	uint64_t dev;
	uint64_t ino;
	uint64_t mnt_id;
	mode_t mode;
	uid_t uid;
	nlink_t nlink;
};

#define LZ_PATH_INIT { .fd = -EBADF }

/* Strict host-path grammar: absolute, NUL-free, at most LZ_PATH_MAX bytes, no
 * empty, "." or ".." components, no trailing slash (except "/" itself).
 * Returns 0 or -EINVAL with a reason in err. */
int lz_path_grammar(const char *path, size_t len, struct lz_err *err);

/* Opens an existing canonical path (grammar-checked, no symlink anywhere). */
int lz_path_open(const char *canonical, struct lz_path *ret, struct lz_err *err);

/* Opens the directory at canonical, creating missing components with mode
 * 0700 beneath the closest existing ancestor. The final directory and every
 * created component must be a directory owned by the invoking user with mode
 * exactly 0700 (the Lazaret ownership boundary). */
int lz_path_open_owned_root(const char *canonical, struct lz_path *ret, struct lz_err *err);

/* Opens (creating when create is set, mode 0700) the child directory name of
 * a Lazaret-owned root, beneath it, without crossing a mount, and checks the
 * same ownership and mode. name is one component. */
int lz_path_owned_child(const struct lz_path *parent, const char *name, bool create,
			struct lz_path *ret, struct lz_err *err);

/* Re-stats p->fd and compares device, inode and mount with the record. */
int lz_path_revalidate(const struct lz_path *p, struct lz_err *err);

/* True when a is b, an ancestor of b, or a descendant of b (component-wise
 * on canonical paths). */
bool lz_path_overlaps(const char *a, const char *b);

/* True when inner is a strict descendant of outer. */
bool lz_path_is_beneath(const char *outer, const char *inner);

/* Resolves the absolute path as the kernel would, calling fn with the
 * place of every symbolic link met on the way (its directory resolved,
 * then its own name): where a link lies decides who can re-aim it, which
 * the canonical path no longer shows. fn's negative return stops it and
 * is returned; a component that cannot be looked up, more than 40 links or
 * a path past LZ_PATH_MAX fail with the reason in err. */
int lz_path_each_link(const char *path, int (*fn)(void *ctx, const char *link, struct lz_err *err), void *ctx,
		      struct lz_err *err);

/* Spec 3.2, 3.8: an executable the host runs for the sandbox is a regular
 * file with one hard link, owned by root or the caller, not group- or
 * other-writable, and executable by the caller (checked on the opened
 * object, at configuration load and again before every execution). */
int lz_path_check_executable(const struct lz_path *x, struct lz_err *err);

/* Closes the fd and frees the label; accepts an initialized-but-empty path. */
void lz_path_release(struct lz_path *p);

#endif
