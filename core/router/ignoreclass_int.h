/* Internals of the classification snapshot shared by ignoreclass.c (query,
 * pattern chains, reference counting) and ignoreclass_build.c (the node
 * table, ignore files, libgit2); design notes in ignoreclass.c. */
#ifndef LZ_ROUTER_IGNORECLASS_INT_H
#define LZ_ROUTER_IGNORECLASS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fs/pathauth.h" /* LZ_PATH_MAX */
#include "router/ignoreclass.h"
#include "router/wildmatch.h"

#define NONE UINT32_MAX
#define COMP_MAX (LZ_PATH_MAX / 2 + 2)
#define NAME_MAX_BYTES 255

/* Hard limits on what the sandbox controls. */
#define NODES_MAX (1u << 22)
#define PATTERNS_MAX (1u << 20)
#define IGNORE_FILE_MAX (4u << 20)
#define TEXT_MAX (256u << 20)
#define REPOS_MAX 4096u
#define GUARDS_MAX 65536u
/* Longer lines are dropped (a divergence no real ignore file meets): it
 * bounds wildmatch's recursion, one level per '*', on any thread's stack. */
#define PATTERN_LEN_MAX LZ_PATH_MAX

enum {
	N_TRACKED = 1 << 0,   /* an index entry names exactly this path */
	N_GITLINK = 1 << 1,   /* ... as a gitlink (submodule) */
	N_BELOW = 1 << 2,     /* index entries of the same repository lie below */
	N_REPO_ROOT = 1 << 3, /* a nested repository starts here (children: .repo) */
	N_INCONS = 1 << 4,    /* tracked, no host object, an isolated object */
	N_EX_DIR = 1 << 5,    /* patterns exclude this name as a directory */
	N_EX_FILE = 1 << 6,   /* ... as a non-directory */
};

struct node {
	uint32_t parent;
	uint32_t name_off;
	uint32_t list_first, list_n; /* this directory's .gitignore */
	uint32_t repo;               /* repository governing the children */
	uint16_t name_len;
	uint16_t depth; /* components from the workspace root */
	uint16_t flags;
};

enum { P_NEG = 1, P_MUSTBEDIR = 2, P_BASENAME = 4 };
enum { K_GLOB, K_LITERAL, K_SUFFIX };

struct pat {
	uint32_t off, len; /* bytes after '!', leading '/' and trailing '/' */
	uint32_t prefix;   /* literal prefix (pathname patterns) */
	uint8_t flags, kind;
};

struct repo {
	uint32_t root;
	uint32_t info_first, info_n; /* info/exclude of the common directory */
	/* Into text, workspace-relative: the Git directory holding the index
	 * (gitdir_len 0: outside the workspace) and the worktree root the
	 * index governs ("" is the workspace root). */
	uint32_t gitdir_off, gitdir_len, root_off, root_len;
	/* What the build read (lz_ignoreclass_read_dirs): the Git directory
	 * holding the index and the common directory holding info/exclude,
	 * into text, workspace-relative when inside the workspace (*_in),
	 * else absolute; no final '/'. read: repo_load loaded this one. */
	uint32_t idx_dir_off, idx_dir_len, com_dir_off, com_dir_len;
	bool idx_in, com_in, read;
	bool icase;
};

/* A protected workspace path (lz_ignoreclass_guard). */
enum { G_GITDIR, G_FILE, G_TREE };
struct guard {
	uint32_t off, len; /* into text: workspace-relative, no leading '/' */
	uint8_t kind;
};

struct edge {
	uint32_t id, tag;
};

struct lz_ignoreclass {
	unsigned long refs;
	bool is_repo;
	bool hide_editor;
	bool share_ignored;
	struct node *nodes;
	uint32_t n_nodes, cap_nodes;
	struct edge *edges;
	uint32_t edge_mask; /* capacity - 1; capacity a power of two */
	struct pat *pats;
	uint32_t n_pats, cap_pats;
	uint8_t *text;
	size_t n_text, cap_text;
	struct repo *repos;
	uint32_t n_repos, cap_repos;
	uint32_t glob_first, glob_n; /* the global excludes file */
	struct guard *guards;
	uint32_t n_guards, cap_guards;
};

/* ---- byte helpers (ASCII-only folding, as Git's sane ctype) ------------- */

static inline bool bytes_eq(const uint8_t *a, const uint8_t *b, size_t n, bool icase)
{
	if (!icase)
		return memcmp(a, b, n) == 0;
	for (size_t i = 0; i < n; i++)
		if (lz_ascii_fold(a[i]) != lz_ascii_fold(b[i]))
			return false;
	return true;
}

static inline bool is_dotgit(const uint8_t *n, size_t len, bool icase)
{
	return len == 4 && bytes_eq(n, (const uint8_t *)".git", 4, icase);
}


/* ignoreclass.c */
uint32_t ic_name_hash(uint32_t parent, const uint8_t *n, size_t len, bool icase);
uint32_t ic_lookup(const lz_ignoreclass *s, uint32_t parent, const uint8_t *n, size_t len);
/* Whether the component is excluded; the matching's steps are taken from
 * *steps (1 a pattern, lz_wildmatch_within's), which is 0 afterwards when
 * they ran out: the answer is then no answer. */
bool ic_match_chain(const lz_ignoreclass *s, uint32_t dir, const uint8_t *path, const uint16_t *starts,
		    uint32_t comp, size_t end, bool is_dir, uint64_t *steps);
void ic_snap_free(lz_ignoreclass *s);
/* Whether a component names editor configuration (ignoreclass.c). */
bool ic_editor_name(const uint8_t *n, size_t len);
/* The arguments of a query (snapshot and result present, the path by
 * lz_ignoreclass_route's rules): 0 or -EINVAL / -ENAMETOOLONG. */
int ic_query_check(const lz_ignoreclass *s, const void *ret, const char *path, size_t len);

/* ignoreclass_guard.c */
/* Whether path (a known ".git" ends at gitdir_end) lies in G/modules or
 * G/worktrees away from every known Git directory there: ISOLATED. */
bool ic_guard_isolates(const lz_ignoreclass *s, const uint8_t *path, size_t len, size_t gitdir_end);
/* The part of abs (a path libgit2 gives, beneath ws_real, which ends in
 * '/') inside the workspace, without trailing '/' ("" for the workspace
 * itself: a bare workspace's Git directory): false when abs lies
 * outside. */
bool ic_ws_relative(const char *ws_real, const char *abs, const char **ret_rel, size_t *ret_len);
/* Lexically normalizes the absolute path abs in place ("." and empty
 * components vanish, ".." drops one), as Git joins configured paths
 * (also router/gitreads.c). */
void ic_normalize(char *abs);
/* Joins a configured path value (n bytes) as Git does into abs: "~/" is
 * home (when absolute), an absolute value is itself, anything else is
 * relative to base (base_len bytes; NULL: it cannot be placed). 0, or -1
 * when it cannot be placed or does not fit cap. */
int ic_git_join(const char *home, const char *base, size_t base_len, const char *v, size_t n, char *abs, size_t cap);
struct git_repository;
/* Records the guards of repository g whose worktree root is the
 * workspace-relative root (root_len bytes): its Git and common
 * directories, the root's `.git` file, linked worktrees, and the paths its
 * configuration names. ws_real: the workspace's host path with a final
 * '/'; ws_fd: the workspace, for listing worktrees confined. */
int ic_guard_repo(lz_ignoreclass *s, struct git_repository *g, int ws_fd, const char *ws_real,
		  const char *root, size_t root_len);
/* Records a workspace-relative path of the given kind (deduplicated). */
int ic_guard_add(lz_ignoreclass *s, const char *path, size_t len, uint8_t kind);
/* text_add and grow live in ignoreclass_build.c. */
int ic_text_add(lz_ignoreclass *s, const uint8_t *b, size_t n, uint32_t *ret_off);
int ic_grow(void **p, uint32_t *cap, size_t elem, uint32_t need, uint32_t max);

#endif
