/* Ignored Workspace State classification (spec 3.5 "Ignored Workspace
 * State routing contract"): which backing a workspace pathname routes to.
 *
 * A snapshot is immutable once built: every pathname operation of the
 * router classifies against exactly one snapshot, and a changed index or
 * ignore input yields a complete new snapshot (or none), never a partly
 * updated one. Snapshots are reference counted so that open handles can
 * stay pinned to the one they were opened under. Queries never call into
 * libgit2 and never touch the filesystem: all of Git's ignore inputs are
 * read while building. A snapshot is safe to query from any number of
 * threads; ref and unref are atomic.
 *
 * Routes follow `git status` (spec 3.5): a path is ISOLATED when Git
 * would report it ignored and untracked; everything else, including every
 * tracked path and every directory that holds tracked paths, is HOST.
 * Nested repositories use their own index, .gitignore files, info/exclude
 * and core.ignoreCase inside them; an outer rule that ignores the nested
 * directory isolates all of it.
 *
 * With hide_editor_config, editor configuration (.vscode, .idea, ...) that
 * Git does not track is ISOLATED too: what a host editor would run on
 * opening the workspace is never the sandbox's, and the developer's own
 * untracked settings are not shown.
 *
 * Repositories the sandbox makes stay in the sandbox (no implicit host
 * authority: host Git must never open a repository whose configuration the
 * sandbox wrote). A ".git" component is HOST only directly below a
 * repository root known when the snapshot was built (the workspace's own,
 * nested ones with their Git directories inside the workspace); anywhere
 * else, and at the root of a workspace that is not a repository, it is
 * ISOLATED, so `git init` inside works in sandbox-only storage. Below a
 * known ".git", entries of `modules/` and `worktrees/` that are not known
 * Git directories (or on the way to one) are ISOLATED too: a submodule
 * cloned or a worktree added inside stays inside.
 *
 * LZ_ROUTE_INCONSISTENT (decided at build time, tracked paths only): the
 * index names the path, the host worktree has no object there (no entry,
 * or the way to it is not a directory or is a symlink), and the isolated
 * backing has an entry at the same path. The router answers EIO for it.
 *
 * Known, deliberate divergences from Git (a sandbox-writable input must
 * not make the builder read outside the workspace): an info/exclude that
 * is a symlink is not followed, and a nested repository whose Git
 * directory or common directory lies outside the workspace is treated as
 * an ordinary directory under the outer repository's rules. Symlinked
 * in-tree .gitignore files are not read, as in Git >= 2.32. */
#ifndef LZ_ROUTER_IGNORECLASS_H
#define LZ_ROUTER_IGNORECLASS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

typedef struct lz_ignoreclass lz_ignoreclass;

enum lz_guard {
	LZ_GUARD_NONE,
	/* Inside a known Git directory (refs, logs, the index, objects...):
	 * written and removed as usual, but never made a symlink or a
	 * special file, which host Git would follow or block on (a reflog
	 * linked to ~/.bashrc gets Git's next line appended there). Made
	 * without group or other write, and given no default ACL (what host
	 * Git makes below would inherit it). */
	LZ_GUARD_GITDATA,
	/* A directory holding Git control files (a known Git directory, or
	 * on the way to one or to a control file): not renamed or removed,
	 * so nothing protected moves to where the guard no longer sees it,
	 * and given no group or other write (others could rename a config
	 * in), no change of its sticky bit and no POSIX ACL. */
	LZ_GUARD_HOLDS,
	/* A Git control file or inside a control tree: not created, written,
	 * truncated, re-moded, renamed, linked or removed. */
	LZ_GUARD_CONTROL,
};

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
	 * as the developer's Git resolves it in the workspace, "~/" and the
	 * XDG default included), or NULL for none. It is read by path and
	 * applies to nested repositories too. A missing file is no file. */
	const char *global_excludes;
	/* Editor configuration (EDITOR_NAMES in ignoreclass.c: .vscode,
	 * .idea, ...) at any depth: untracked paths ISOLATED, tracked ones
	 * HOST and guarded CONTROL (host editors run what these name). */
	bool hide_editor_config;
	/* isolate_ignored = false (FR-9): no ignore rule isolates anything;
	 * the rules for .git and editor configuration above still apply. */
	bool share_ignored;
	/* The steps each part of the build's pattern matching may take at
	 * least; 0 for LZ_IGNORECLASS_BUILD_STEPS (a test names fewer). */
	uint64_t build_steps;
};

/* Builds a snapshot from the worktree's index, .gitignore files,
 * info/exclude of the common directory and the global excludes file.
 * In a workspace that is not a Git repository (no upward search) nothing
 * outside nested repositories is ignored; a bare one (the workspace is
 * the Git directory, or its .git file points to one) is classified the
 * same way (its linked worktrees by their own rules) and its Git
 * directory guarded. An index entry whose workspace path (a nested
 * repository's root, '/', the entry) exceeds LZ_PATH_MAX bytes is
 * skipped: no query can name it. -EIO when libgit2 cannot read the
 * repository or its index, -EFBIG for an ignore file over 4 MiB, -E2BIG
 * past the snapshot's limits (4M nodes, 1M patterns) or when its pattern
 * matching would take too many steps (rules written to be slow:
 * lz_wildmatch_within): LZ_IGNORECLASS_BUILD_STEPS to walk the tree, and
 * to decide each path it knows LZ_IGNORECLASS_NODE_STEPS a path (at least
 * LZ_IGNORECLASS_BUILD_STEPS in all); other -errno from the file system;
 * *ret untouched on failure. */
#define LZ_IGNORECLASS_BUILD_STEPS (1ull << 32)
#define LZ_IGNORECLASS_NODE_STEPS (1ull << 14)
int lz_ignoreclass_build(const struct lz_ignoreclass_inputs *in, lz_ignoreclass **ret,
	struct lz_err *err);

/* The route of the workspace-relative path (bytes, '/'-separated, no
 * leading '/', no "." or ".." components, not necessarily UTF-8; "" is the
 * root). is_dir says whether the object the operation names is a
 * directory (not following a symlink), for Git's directory-only patterns.
 * -EINVAL for a malformed path (empty component, "." or "..", a NUL byte),
 * -ENAMETOOLONG past LZ_PATH_MAX bytes or for a component over 255 bytes,
 * -E2BIG when its pattern matching would take more than
 * LZ_IGNORECLASS_QUERY_STEPS steps (rules written to be slow; the same
 * answer for the same path and snapshot). No allocation, no system call. */
#define LZ_IGNORECLASS_QUERY_STEPS (1ull << 24)
int lz_ignoreclass_route(const lz_ignoreclass *snap, const char *path, size_t len, bool is_dir,
	enum lz_route *ret);

/* The guard of a host-backed workspace path (same path rules as
 * lz_ignoreclass_route; is_dir as there). Protected (docs/threat-model.md,
 * "Git control files"), for every Git directory G known at build (each
 * repository's Git and common directory inside the workspace, linked
 * worktrees' administrative directories, submodules' Git directories, bare
 * repositories found in the tree, and a bare workspace's, the workspace
 * root itself when it is one):
 *   CONTROL  G/config, G/config.worktree, G/commondir, G/gitdir, all of G/hooks,
 *            anything under G/modules or G/worktrees that is not a known Git
 *            directory's, a repository root's `.git` file, the files named
 *            by include.path / includeIf.*.path, the tree core.hooksPath
 *            names, and the programs configuration runs when named by a
 *            path inside the workspace (core.fsmonitor, filter drivers,
 *            aliases, ...), as the configuration of each repository read;
 *   HOLDS    G itself, and every directory above a protected path.
 * No allocation, no system call. */
int lz_ignoreclass_guard(const lz_ignoreclass *snap, const char *path, size_t len, bool is_dir,
			 enum lz_guard *ret);

/* The worktree root whose paths the index in Git directory gitdir
 * governs (both workspace-relative, no leading '/', "" is the root), as
 * the build opened it: a repository's own Git directory, a linked
 * worktree's administrative directory, a submodule's directory under
 * modules/. The root is copied into root (cap bytes, NUL-terminated) and
 * its length into *ret_len. -ENOENT when no repository known at build
 * keeps its index there, -ENAMETOOLONG when root does not fit. No
 * allocation, no system call. */
int lz_ignoreclass_index_root(const lz_ignoreclass *snap, const char *gitdir, size_t len, char *root,
			      size_t cap, size_t *ret_len);

/* What the build of snap read of each repository it opened besides the
 * .gitignore files and the global excludes file, for the watch
 * (ignorewatch.c; spec 3.5: a changed index or ignore input publishes):
 * fn gets each repository's Git directory (LZ_IGNORECLASS_READ_GITDIR:
 * its index), then its common directory (LZ_IGNORECLASS_READ_COMMONDIR:
 * info/exclude), len bytes, not NUL-terminated, no final '/'. inside:
 * the path is workspace-relative ("" is the root: a bare workspace's
 * common directory); else absolute (a workspace that is a linked
 * worktree of a repository elsewhere). A directory may come more than
 * once. fn's first nonzero return ends the walk and is returned. No
 * allocation, no system call. */
enum lz_ignoreclass_read { LZ_IGNORECLASS_READ_GITDIR, LZ_IGNORECLASS_READ_COMMONDIR };
int lz_ignoreclass_read_dirs(const lz_ignoreclass *snap,
			     int (*fn)(void *arg, enum lz_ignoreclass_read what, const char *dir, size_t len,
				       bool inside),
			     void *arg);

/* The global excludes file as the developer's Git finds it outside any
 * repository: core.excludesFile of the system, XDG and global
 * configuration ("~/" expanded), else $XDG_CONFIG_HOME/git/ignore or
 * ~/.config/git/ignore (home and xdg_config_home as given; NULL or ""
 * when unset); an empty core.excludesFile names none, one libgit2 cannot
 * resolve ("~user/", no value) refuses (-EINVAL), never the default in
 * its place. A repository's own core.excludesFile is not used: its
 * .git/config travels with the workspace and must not name a host file
 * for the router to read. buf gets "" when there is none. */
int lz_ignoreclass_global_excludes(const char *home, const char *xdg_config_home, char *buf, size_t cap,
				   struct lz_err *err);

lz_ignoreclass *lz_ignoreclass_ref(lz_ignoreclass *snap);
void lz_ignoreclass_unref(lz_ignoreclass *snap); /* accepts NULL */

#endif
