/* What the workspace router's Git reads outside the trees it serves, so
 * that it may read nothing else of the developer's (proc/confine.h; the
 * router parses what the sandbox writes, and a bug there could otherwise
 * copy any file the developer can read into the workspace: docs/threat-
 * model.md).
 *
 * Collected before the router is confined, from the developer's files
 * only (the sandbox cannot write them: the Git control files of the
 * workspace are guarded, ignoreclass.h): the system, XDG and global Git
 * configuration files and every file they include (followed as Git joins
 * them, includeIf entries whatever their condition), the global excludes
 * file, and the workspace repository's Git and common directories with
 * their configuration's includes when they lie outside it (a linked
 * worktree). A file created later, or replaced by a rename (git config
 * --global), is not among them: Git's reading of it fails until the next
 * launch (the router keeps its classification; docs/router.md). */
#ifndef LZ_ROUTER_GITREADS_H
#define LZ_ROUTER_GITREADS_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

#define LZ_GITREADS_MAX 64

struct lz_gitreads {
	int fds[LZ_GITREADS_MAX]; /* O_PATH, each a file or a directory */
	size_t n;
	/* false: something Git would read could not be placed (an include
	 * nested past Git's depth, more than LZ_GITREADS_MAX, a path too
	 * long); why says what, and the caller must not restrict reads */
	bool complete;
	char why[256];
};

/* Into *r (fds closed by lz_gitreads_close), with libgit2 initialised:
 * workspace_fd is the workspace's directory; home (for "~/" in includes;
 * may be NULL) and global_excludes ("" for none) as the router resolved
 * them. -errno only when the workspace cannot be resolved; an incomplete
 * set is not an error. */
int lz_gitreads_collect(int workspace_fd, const char *home, const char *global_excludes, struct lz_gitreads *r,
			struct lz_err *err);

void lz_gitreads_close(struct lz_gitreads *r);

#endif
