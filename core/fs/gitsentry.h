/* Git Sentry planning (spec 3.5 "Filesystem and Git Model", SR-4).
 *
 * The Agent Sandbox sees the Agent Workspace read-write at /workspace. Git
 * Sentry adds narrow protective mounts so the sandbox cannot modify the host
 * repository's configuration or default hook directory, while ordinary Git
 * work (status, add, commit, branch, checkout, merge, rebase, stash) keeps
 * working inside: the index, HEAD, refs and objects stay shared.
 *
 * This module only plans: it examines the workspace's top-level `.git`
 * entry descriptor-relative beneath a retained workspace descriptor
 * (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
 * RESOLVE_NO_XDEV) and returns the mounts to add, each file with a
 * descriptor of the object it checked: the runtime binds that object
 * (runtime/rsplan.h), never the host path, which another Domain's
 * sandbox may be able to replace after the plan.
 *
 * Threat: a sandbox that writes `core.fsmonitor`, `core.hooksPath` or a hook
 * into the host repository, or redirects the host's Git to a configuration
 * it wrote (through the `.git` file or `commondir`), so that the developer's
 * next Git command on the host runs its code. Anything the plan cannot
 * protect faithfully (a symlink or hard link where a protected file should
 * be, a malformed pointer file) is refused, never approximated. */
#ifndef LZ_GITSENTRY_H
#define LZ_GITSENTRY_H

#include <stddef.h>

#include "fs/pathauth.h" /* LZ_PATH_MAX */
#include "util/err.h"

/* Largest `.git` pointer file or `commondir` file accepted. */
#define LZ_GITSENTRY_POINTER_MAX 4096
/* Upper bound on the entries of one plan. */
#define LZ_GITSENTRY_MOUNTS_MAX 8

enum lz_gitsentry_kind {
	/* Bind host_path read-only at sandbox_path. The source is a regular
	 * file with exactly one hard link, checked when planned. */
	LZ_GITSENTRY_READONLY_FILE,
	/* Empty sandbox-local transient storage (tmpfs) at sandbox_path. The
	 * host directory may not exist: the runtime creates the mount point. */
	LZ_GITSENTRY_TRANSIENT_DIR,
};

struct lz_gitsentry_mount {
	enum lz_gitsentry_kind kind;
	/* READONLY_FILE: O_PATH of the object checked (owned); else -EBADF. */
	int fd;
	/* workspace_canonical "/" relative path: a label for the bind source,
	 * never reopened here. */
	char host_path[LZ_PATH_MAX + 1];
	/* "/workspace/" relative path: the destination in the sandbox. */
	char sandbox_path[LZ_PATH_MAX + 1];
};

/* Plans the Git Sentry mounts for the workspace open at workspace_fd (a
 * directory descriptor, O_PATH is enough) whose canonical host path is
 * workspace_canonical. On success *ret is an array of *ret_n entries, to be
 * released with lz_gitsentry_free(); with no `.git` entry it is NULL and
 * *ret_n is 0.
 * Returns -EPERM for a layout that cannot be protected (symlinks, hard
 * links, special files), -EINVAL or -EFBIG for a malformed pointer file,
 * -ENOENT when a pointer names a missing directory inside the workspace,
 * -ENAMETOOLONG past LZ_PATH_MAX, other -errno from the file system. *ret
 * and *ret_n are untouched on failure. */
int lz_gitsentry_plan(int workspace_fd, const char *workspace_canonical,
		      struct lz_gitsentry_mount **ret, size_t *ret_n, struct lz_err *err);

/* Closes the plan's descriptors and frees it; accepts NULL. */
void lz_gitsentry_free(struct lz_gitsentry_mount *m, size_t n);

#endif
