/* Ignored Workspace State classification (spec 3.5 "Ignored Workspace
 * State routing contract"): which backing a workspace pathname routes to.
 *
 * A snapshot is immutable once built: every pathname operation of the
 * router classifies against exactly one snapshot, and a changed index or
 * ignore input yields a complete new snapshot (or none), never a partly
 * updated one. Snapshots are reference counted so that open handles can
 * stay pinned to the one they were opened under. Queries never call into
 * libgit2 and never touch the filesystem: all of Git's ignore inputs are
 * read while building. */
#ifndef LZ_ROUTER_IGNORECLASS_H
#define LZ_ROUTER_IGNORECLASS_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

typedef struct lz_ignoreclass lz_ignoreclass;

enum lz_route {
	LZ_ROUTE_HOST,         /* canonical workspace: tracked or not ignored, and .git */
	LZ_ROUTE_ISOLATED,     /* Domain's Ignored Workspace State: ignored, untracked */
	LZ_ROUTE_INCONSISTENT, /* tracked in the host index with only an isolated object: EIO */
};

struct lz_ignoreclass_inputs {
	/* Retained descriptor of the canonical workspace root (the worktree);
	 * borrowed for the duration of the build only. */
	int workspace_fd;
	/* Retained descriptor of the isolated backing root, used only to
	 * decide LZ_ROUTE_INCONSISTENT; -1 when there is none. */
	int isolated_fd;
	/* Absolute host path of the global excludes file (core.excludesFile
	 * as the developer's Git resolves it), or NULL for none. */
	const char *global_excludes;
};

/* Builds a snapshot from the worktree's index, .gitignore files,
 * info/exclude of the common directory and the global excludes file.
 * A workspace that is not a Git repository classifies everything HOST. */
int lz_ignoreclass_build(const struct lz_ignoreclass_inputs *in, lz_ignoreclass **ret,
	struct lz_err *err);

/* The route of the workspace-relative path (bytes, '/'-separated, no
 * leading '/', no "." or ".." components, not necessarily UTF-8; "" is the
 * root). is_dir says whether the object the operation names is a
 * directory, for Git's directory-only patterns. Never fails for a
 * well-formed path; -EINVAL otherwise. */
int lz_ignoreclass_route(const lz_ignoreclass *snap, const char *path, size_t len, bool is_dir,
	enum lz_route *ret);

lz_ignoreclass *lz_ignoreclass_ref(lz_ignoreclass *snap);
void lz_ignoreclass_unref(lz_ignoreclass *snap); /* accepts NULL */

#endif
