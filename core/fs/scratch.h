/* The qualification suite's scratch workspace (issue 10, OR-4): one
 * Lazaret-owned directory per name beneath the per-user cache root
 * ($XDG_CACHE_HOME/lazaret, else $HOME/.cache/lazaret; created 0700),
 * emptied when opened, so every run starts from nothing and reuses one
 * Domain. The sandbox writes into it: every access afterwards is
 * descriptor-relative and refuses symlinks, magic links and mounts
 * (LZ_RESOLVE_OWNED), and a read is bounded. Relative names may have
 * several components; none may be "..". */
#ifndef LZ_SCRATCH_H
#define LZ_SCRATCH_H

#include <stddef.h>

#include "fs/pathauth.h"
#include "util/err.h"

#define LZ_SCRATCH_READ_MAX (1u << 20)

/* name: one component. */
int lz_scratch_open(const char *name, struct lz_path *ret, struct lz_err *err);

/* Creates rel (mode 0644; an existing file is replaced, never followed). */
int lz_scratch_write(const struct lz_path *s, const char *rel, const void *data, size_t len, struct lz_err *err);

/* Creates the directory rel (mode 0755). */
int lz_scratch_mkdir(const struct lz_path *s, const char *rel, struct lz_err *err);

/* Reads the regular file rel, at most max (<= LZ_SCRATCH_READ_MAX) bytes:
 * *ret owned, NUL-terminated; -EFBIG when larger. */
int lz_scratch_read(const struct lz_path *s, const char *rel, size_t max, char **ret, size_t *ret_len,
		    struct lz_err *err);

#endif
