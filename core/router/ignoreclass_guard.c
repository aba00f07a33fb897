/* Git control files (no implicit host authority; rule in
 * docs/threat-model.md "Git control files"): the workspace paths through
 * which Git on the host would run a program or read a configuration the
 * sandbox wrote, recorded per snapshot while building, queried per
 * operation by the router (lz_ignoreclass_guard in ignoreclass.h).
 *
 * Why paths and not mounts: a read-only bind protects only what exists at
 * launch; the sandbox can create an absent config, move a directory that
 * holds one, or make a new repository. The router sees every operation,
 * so the rule holds for objects created later too.
 *
 * Pointers in configuration (include.path, core.hooksPath, programs named
 * by path) are resolved lexically, as Git joins them: "~/" is $HOME, a
 * relative include is relative to the including file's directory, a
 * relative program or hooks path to the repository's worktree root. A symlink on
 * the way is not followed (its target is not protected). A conditional
 * include counts whatever its condition, and the worktree's
 * config.worktree whatever extensions.worktreeConfig says: Git on the
 * host evaluates them when it runs, not when the snapshot is built. */
#include "router/ignoreclass_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <git2.h>

#include "util/cleanup.h"
#include "util/sys.h"

/* Files (and the hooks tree) of a Git directory that run programs or
 * redirect Git to another configuration. */
static const char *const control_names[] = { "config", "config.worktree", "commondir", "gitdir",
					     "hooks" };

/* Files of a Git directory that point host Git at other object stores
 * (directories anywhere on the host, an automount or a hung mount
 * included) or rewrite the history it sees. */
static const char *const control_paths[] = { "objects/info/alternates", "objects/info/http-alternates",
					     "info/grafts" };

static bool comp_is(const uint8_t *p, size_t n, const char *name)
{
	return n == strlen(name) && memcmp(p, name, n) == 0;
}

/* b lies strictly below directory a ("" is the workspace root). */
static bool below(const uint8_t *b, size_t blen, const uint8_t *a, size_t alen)
{
	if (alen == 0)
		return blen > 0;
	return blen > alen && b[alen] == '/' && memcmp(a, b, alen) == 0;
}

static size_t comp_end(const uint8_t *p, size_t len, size_t start)
{
	const uint8_t *sl = memchr(p + start, '/', len - start);
	return sl ? (size_t)(sl - p) : len;
}

/* Whether path is, lies below or leads to a known Git directory that lies
 * below the area p[0..area_len). */
static bool near_known(const lz_ignoreclass *s, const uint8_t *p, size_t len, size_t area_len)
{
	for (uint32_t i = 0; i < s->n_guards; i++) {
		const struct guard *g = &s->guards[i];
		const uint8_t *gp = s->text + g->off;
		if (g->kind != G_GITDIR || !below(gp, g->len, p, area_len))
			continue;
		if ((g->len == len && memcmp(gp, p, len) == 0) || below(p, len, gp, g->len) ||
		    below(gp, g->len, p, len))
			return true;
	}
	return false;
}

/* G/modules/<x> or G/worktrees/<x> ...: the area's end, or 0. G may be
 * the workspace root (gitdir_len 0: a bare workspace). */
static size_t admin_area(const uint8_t *p, size_t len, size_t gitdir_len)
{
	size_t s = gitdir_len ? gitdir_len + 1 : 0;
	if (len <= s)
		return 0;
	size_t e = comp_end(p, len, s);
	if (e == len || !(comp_is(p + s, e - s, "modules") || comp_is(p + s, e - s, "worktrees")))
		return 0;
	return e;
}

bool ic_guard_isolates(const lz_ignoreclass *s, const uint8_t *path, size_t len, size_t gitdir_end)
{
	size_t area = admin_area(path, len, gitdir_end);
	return area != 0 && !near_known(s, path, len, area);
}

/* Whether a top-level name of a Git directory is Git's own. A Git
 * directory at the workspace's root (a bare workspace) holds the linked
 * worktrees and other files beside Git's: only its own names are its
 * data. */
static bool git_own_name(const uint8_t *n, size_t len)
{
	static const char *const own[] = { "HEAD",   "objects",	    "refs",	 "packed-refs", "logs",
					   "info",   "branches",    "description", "shallow",	"index",
					   "lfs",    "rr-cache",    "sequencer",   "rebase-merge", "rebase-apply",
					   "COMMIT_EDITMSG", "BISECT_LOG" };
	for (size_t k = 0; k < sizeof(own) / sizeof(own[0]); k++)
		if (comp_is(n, len, own[k]))
			return true;
	return (len > 5 && memcmp(n + len - 5, "_HEAD", 5) == 0) || (len > 5 && memcmp(n + len - 5, ".lock", 5) == 0);
}

/* The guard of path below Git directory gp (gl bytes). */
static enum lz_guard below_gitdir(const lz_ignoreclass *s, const uint8_t *p, size_t len, size_t gl)
{
	size_t st = gl ? gl + 1 : 0, e = comp_end(p, len, st);
	for (size_t k = 0; k < sizeof(control_names) / sizeof(control_names[0]); k++)
		if (comp_is(p + st, e - st, control_names[k]))
			return LZ_GUARD_CONTROL;
	/* such a file, or a directory on the way to one (not moved away) */
	size_t rest = len - st;
	for (size_t k = 0; k < sizeof(control_paths) / sizeof(control_paths[0]); k++) {
		size_t cl = strlen(control_paths[k]);
		if (rest <= cl && memcmp(p + st, control_paths[k], rest) == 0)
			return rest == cl ? LZ_GUARD_CONTROL : control_paths[k][rest] == '/' ? LZ_GUARD_HOLDS
											 : LZ_GUARD_GITDATA;
	}
	size_t area = admin_area(p, len, gl);
	if (area == 0)
		return gl == 0 && !git_own_name(p + st, e - st) ? LZ_GUARD_NONE : LZ_GUARD_GITDATA;
	/* Known Git directories there decide for themselves (and the way to
	 * them HOLDS); nothing else there may be made or changed. */
	return near_known(s, p, len, area) ? LZ_GUARD_NONE : LZ_GUARD_CONTROL;
}

/* Tracked editor configuration (the rest is isolated, ignoreclass.c):
 * CONTROL for a tracked file, HOLDS for a directory holding one. */
static enum lz_guard editor_guard(const lz_ignoreclass *s, const uint8_t *p, size_t len, bool is_dir)
{
	if (!s->hide_editor || len == 0)
		return LZ_GUARD_NONE;
	bool editor = false;
	uint32_t node = 0;
	for (size_t i = 0; i < len && node != NONE;) {
		size_t e = comp_end(p, len, i);
		editor |= ic_editor_name(p + i, e - i);
		node = ic_lookup(s, node, p + i, e - i);
		i = e + 1;
	}
	if (!editor || node == NONE)
		return LZ_GUARD_NONE;
	uint16_t f = s->nodes[node].flags;
	return (f & N_TRACKED) ? LZ_GUARD_CONTROL : (is_dir && (f & N_BELOW)) ? LZ_GUARD_HOLDS : LZ_GUARD_NONE;
}

int lz_ignoreclass_guard(const lz_ignoreclass *s, const char *path, size_t len, bool is_dir,
			 enum lz_guard *ret)
{
	int rc = ic_query_check(s, ret, path, len);
	if (rc < 0)
		return rc;
	const uint8_t *p = (const uint8_t *)path;
	enum lz_guard out = editor_guard(s, p, len, is_dir);
	for (uint32_t i = 0; i < s->n_guards && out != LZ_GUARD_CONTROL; i++) {
		const struct guard *g = &s->guards[i];
		const uint8_t *gp = s->text + g->off;
		enum lz_guard v = LZ_GUARD_NONE;
		if (g->len == len && memcmp(gp, p, len) == 0)
			v = g->kind == G_GITDIR ? LZ_GUARD_HOLDS : LZ_GUARD_CONTROL;
		else if (below(p, len, gp, g->len))
			v = g->kind == G_TREE	  ? LZ_GUARD_CONTROL
			    : g->kind == G_GITDIR ? below_gitdir(s, p, len, g->len)
						  : LZ_GUARD_NONE;
		else if (is_dir && below(gp, g->len, p, len))
			v = LZ_GUARD_HOLDS;
		if (v > out)
			out = v;
	}
	*ret = out;
	return 0;
}

int lz_ignoreclass_index_root(const lz_ignoreclass *s, const char *gitdir, size_t len, char *root,
			      size_t cap, size_t *ret_len)
{
	for (uint32_t i = 0; i < s->n_repos; i++) {
		const struct repo *rp = &s->repos[i];
		if (rp->gitdir_len == 0 || rp->gitdir_len != len || memcmp(s->text + rp->gitdir_off, gitdir, len) != 0)
			continue;
		if (rp->root_len >= cap)
			return -ENAMETOOLONG;
		memcpy(root, s->text + rp->root_off, rp->root_len);
		root[rp->root_len] = '\0';
		*ret_len = rp->root_len;
		return 0;
	}
	return -ENOENT;
}

/* ---- build -------------------------------------------------------------- */

int ic_guard_add(lz_ignoreclass *s, const char *path, size_t len, uint8_t kind)
{
	for (uint32_t i = 0; i < s->n_guards; i++) {
		struct guard *g = &s->guards[i];
		if (g->len == len && memcmp(s->text + g->off, path, len) == 0) {
			if (kind == G_TREE || (kind == G_FILE && g->kind == G_GITDIR))
				g->kind = kind; /* the stronger reading */
			return 0;
		}
	}
	int r = ic_grow((void **)&s->guards, &s->cap_guards, sizeof(*s->guards), s->n_guards + 1,
			GUARDS_MAX);
	uint32_t off = 0;
	if (r == 0)
		r = ic_text_add(s, (const uint8_t *)path, len, &off);
	if (r < 0)
		return r;
	s->guards[s->n_guards++] = (struct guard){ .off = off, .len = (uint32_t)len, .kind = kind };
	return 0;
}

void ic_normalize(char *abs)
{
	char *out = abs;
	for (const char *in = abs; *in;) {
		while (*in == '/')
			in++;
		const char *e = strchrnul(in, '/');
		size_t n = (size_t)(e - in);
		if (n == 0 || (n == 1 && in[0] == '.')) {
		} else if (n == 2 && in[0] == '.' && in[1] == '.') {
			while (out > abs && *--out != '/')
				;
		} else {
			*out++ = '/';
			memmove(out, in, n);
			out += n;
		}
		in = e;
	}
	if (out == abs)
		*out++ = '/';
	*out = '\0';
}

struct cfgscan {
	lz_ignoreclass *s;
	const char *ws_real; /* with a final '/' */
	const char *root_abs; /* worktree root, no final '/' */
	const char *common_abs; /* common directory, no final '/' */
	/* The directory of each level's file (relative includes at depth 0
	 * of the snapshot), by git_config_level_t; NULL where none. */
	const char *level_dir[GIT_CONFIG_LEVEL_APP + 1];
	/* While one file is scanned on its own (scan_file): its directory,
	 * and how deep in includes it lies. */
	const char *file_dir;
	int depth;
	int *files_left; /* scan_file's budget per repository */
	int rc;
};

/* p without its final '/' (but "/" itself). */
static void drop_final_slash(char *p)
{
	size_t n = strlen(p);
	if (n > 1 && p[n - 1] == '/')
		p[n - 1] = '\0';
}

/* The absolute file path p cut to its directory ("/" for one at the root). */
static void cut_to_dir(char *p)
{
	char *slash = strrchr(p, '/');
	if (slash != NULL)
		*(slash == p ? slash + 1 : slash) = '\0';
}

/* Git's own bound on nested includes (config.c, MAX_INCLUDE_DEPTH), and
 * how many files one repository's scan opens on their own (an include
 * cycle or a wide tree of them stays bounded). */
#define INCLUDE_DEPTH_MAX 10
#define INCLUDE_FILES_MAX 64

int ic_git_join(const char *home, const char *base, size_t base_len, const char *v, size_t n, char *abs, size_t cap)
{
	int k;
	if (n >= 2 && v[0] == '~' && v[1] == '/')
		k = home && home[0] == '/' ? snprintf(abs, cap, "%s/%.*s", home, (int)(n - 2), v + 2) : -1;
	else if (n >= 1 && v[0] == '/')
		k = snprintf(abs, cap, "%.*s", (int)n, v);
	else
		k = base ? snprintf(abs, cap, "%.*s/%.*s", (int)base_len, base, (int)n, v) : -1;
	return k < 0 || (size_t)k >= cap ? -1 : 0;
}

/* Adds the workspace path that value (n bytes, as Git would join it to
 * base) names, when inside the workspace. */
static int add_named(struct cfgscan *c, const char *base, const char *v, size_t n, uint8_t kind)
{
	char abs[LZ_PATH_MAX * 2 + 4];
	if (ic_git_join(getenv("HOME"), base, base ? strlen(base) : 0, v, n, abs, sizeof(abs)) < 0)
		return 0; /* nothing Git could open inside the workspace */
	ic_normalize(abs);
	size_t wl = strlen(c->ws_real);
	if (strncmp(abs, c->ws_real, wl) != 0)
		return 0;
	size_t rl = strlen(abs + wl);
	return rl == 0 || rl > LZ_PATH_MAX ? 0 : ic_guard_add(c->s, abs + wl, rl, kind);
}

/* A command Git runs through the shell: every word with a '/' is a path
 * Git may run (relative to the worktree root). */
static int add_command_words(struct cfgscan *c, const char *v)
{
	while (*v) {
		while (*v == ' ' || *v == '\t' || *v == '!' || *v == '"' || *v == '\'')
			v++;
		size_t n = strcspn(v, " \t\"'");
		if (n && memchr(v, '/', n) != NULL) {
			int r = add_named(c, c->root_abs, v, n, G_FILE);
			if (r < 0)
				return r;
		}
		v += n;
	}
	return 0;
}

static bool has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

static bool has_suffix(const char *s, const char *x)
{
	size_t n = strlen(s), k = strlen(x);
	return n >= k && strcmp(s + n - k, x) == 0;
}

/* Configuration keys (libgit2's normalized names) whose values Git runs
 * or follows: 1 a program or command, 2 an include, 3 a tree Git runs or
 * copies hooks from; 0 anything else. Matched here rather than with
 * git_config_foreach_match, whose regex matching leaks in libgit2 1.5. */
static int control_key(const char *k)
{
	static const char *const programs[] = {
		"core.fsmonitor", "core.sshcommand", "core.editor", "core.pager", "core.askpass",
		"core.gitproxy", "sequence.editor", "diff.external", "credential.helper", "gpg.program",
		"core.alternaterefscommand", "interactive.difffilter", "gpg.ssh.defaultkeycommand",
		"imap.tunnel", "uploadpack.packobjectshook",
	};
	/* <section>.<name>.<key>: a tool's command or its executable */
	static const char *const per_name[][2] = {
		{ "difftool.", ".cmd" },      { "difftool.", ".path" },	   { "mergetool.", ".cmd" },
		{ "mergetool.", ".path" },    { "man.", ".cmd" },	   { "man.", ".path" },
		{ "browser.", ".cmd" },	      { "browser.", ".path" },	   { "guitool.", ".cmd" },
		{ "trailer.", ".cmd" },	      { "trailer.", ".command" },  { "tar.", ".command" },
		{ "remote.", ".uploadpack" }, { "remote.", ".receivepack" }, { "submodule.", ".update" },
		{ "sendemail.", "sendmailcmd" }, { "sendemail.", "tocmd" }, { "sendemail.", "cccmd" },
	};
	if (has_prefix(k, "include.") || has_prefix(k, "includeif."))
		return has_suffix(k, ".path") ? 2 : 0;
	if (strcmp(k, "core.hookspath") == 0 || strcmp(k, "init.templatedir") == 0)
		return 3;
	for (size_t i = 0; i < sizeof(programs) / sizeof(programs[0]); i++)
		if (strcmp(k, programs[i]) == 0)
			return 1;
	if (has_prefix(k, "alias.") || has_prefix(k, "pager."))
		return 1;
	for (size_t i = 0; i < sizeof(per_name) / sizeof(per_name[0]); i++)
		if (has_prefix(k, per_name[i][0]) && has_suffix(k, per_name[i][1]))
			return 1;
	if (has_prefix(k, "diff.") && (has_suffix(k, ".textconv") || has_suffix(k, ".command")))
		return 1;
	if (has_prefix(k, "filter.") &&
	    (has_suffix(k, ".clean") || has_suffix(k, ".smudge") || has_suffix(k, ".process")))
		return 1;
	if ((has_prefix(k, "merge.") && has_suffix(k, ".driver")) ||
	    (has_prefix(k, "credential.") && has_suffix(k, ".helper")) ||
	    (has_prefix(k, "gpg.") && has_suffix(k, ".program")))
		return 1;
	return 0;
}

static int scan_include(struct cfgscan *c, const char *base, const char *v);

static int cfg_entry(const git_config_entry *e, void *arg)
{
	struct cfgscan *c = arg;
	const char *v = e->value ? e->value : "";
	int r = 0;
	switch (control_key(e->name)) {
	case 2: {
		/* A relative include is relative to the including file's
		 * directory: known for the file scanned on its own, and for
		 * each level's own file at depth 0. */
		const char *base = NULL;
		if (e->include_depth == 0)
			base = c->file_dir != NULL ? c->file_dir
			       : (int)e->level >= 0 && (int)e->level <= GIT_CONFIG_LEVEL_APP ? c->level_dir[e->level]
										 : NULL;
		r = add_named(c, base, v, strlen(v), G_FILE);
		/* The included file on its own, where its relative paths
		 * are placed; a conditional one whatever its condition:
		 * libgit2 1.5 evaluates no hasconfig: condition, and an
		 * onbranch: one against HEAD when the snapshot is built,
		 * which the sandbox writes; host Git evaluates both when it
		 * runs. */
		if (r >= 0 && e->include_depth == 0)
			r = scan_include(c, base, v);
		break;
	}
	case 3:
		r = add_named(c, c->root_abs, v, strlen(v), G_TREE);
		break;
	case 1:
		r = add_command_words(c, v);
		break;
	default:
		break;
	}
	if (r < 0) {
		c->rc = r;
		return 1;
	}
	return 0;
}

/* The keys of the configuration file abs alone (and of what it includes
 * unconditionally, which libgit2 follows), at include depth depth; a file
 * Git cannot open sets nothing. */
static int scan_file(struct cfgscan *c, const char *abs, int depth)
{
	if (depth > INCLUDE_DEPTH_MAX || *c->files_left <= 0)
		return 0; /* Git refuses to go deeper */
	(*c->files_left)--;
	/* A file that is not there, or that Git cannot read either, sets
	 * nothing; one this process cannot open for want of descriptors or
	 * memory fails the snapshot (never fewer guards). */
	int fd = open(abs, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR || errno == EACCES || errno == ELOOP ? 0 : -errno;
	close(fd);
	git_config *cfg = NULL;
	if (git_config_open_ondisk(&cfg, abs) < 0) {
		const git_error *ge = git_error_last();
		bool unparsable = ge != NULL && ge->klass == GIT_ERROR_CONFIG; /* Git fails on it too */
		git_error_clear();
		return unparsable ? 0 : -EIO;
	}
	char dir[LZ_PATH_MAX * 2 + 4];
	snprintf(dir, sizeof(dir), "%s", abs);
	cut_to_dir(dir);
	struct cfgscan sub = *c;
	sub.file_dir = dir;
	sub.depth = depth;
	sub.rc = 0;
	int r = git_config_foreach(cfg, cfg_entry, &sub);
	git_config_free(cfg);
	if (sub.rc < 0)
		return sub.rc;
	return r < 0 && r != 1 ? -EIO : 0;
}

static int scan_include(struct cfgscan *c, const char *base, const char *v)
{
	char abs[LZ_PATH_MAX * 2 + 4];
	if (ic_git_join(getenv("HOME"), base, base ? strlen(base) : 0, v, strlen(v), abs, sizeof(abs)) < 0)
		return 0; /* nothing Git could open */
	ic_normalize(abs);
	return scan_file(c, abs, c->depth + 1);
}

bool ic_ws_relative(const char *ws_real, const char *abs, const char **ret_rel, size_t *ret_len)
{
	size_t wl = strlen(ws_real), al = strlen(abs);
	if (strncmp(abs, ws_real, wl) != 0)
		return false;
	while (al > wl && abs[al - 1] == '/')
		al--;
	*ret_rel = abs + wl;
	*ret_len = al - wl;
	return true;
}

static int add_abs_dir(lz_ignoreclass *s, const char *ws_real, const char *abs, uint8_t kind,
		       size_t *ret_len, const char **ret_rel)
{
	*ret_len = 0;
	*ret_rel = NULL;
	if (!ic_ws_relative(ws_real, abs, ret_rel, ret_len))
		return 0;
	return ic_guard_add(s, *ret_rel, *ret_len, kind);
}
int lz_ignoreclass_read_dirs(const lz_ignoreclass *s,
			     int (*fn)(void *arg, enum lz_ignoreclass_read what, const char *dir, size_t len,
				       bool inside),
			     void *arg)
{
	for (uint32_t i = 0; i < s->n_repos; i++) {
		const struct repo *rp = &s->repos[i];
		if (!rp->read)
			continue;
		int r = fn(arg, LZ_IGNORECLASS_READ_GITDIR, (const char *)s->text + rp->idx_dir_off, rp->idx_dir_len,
			   rp->idx_in);
		if (r == 0)
			r = fn(arg, LZ_IGNORECLASS_READ_COMMONDIR, (const char *)s->text + rp->com_dir_off,
			       rp->com_dir_len, rp->com_in);
		if (r != 0)
			return r;
	}
	return 0;
}

int ic_guard_repo(lz_ignoreclass *s, git_repository *g, int ws_fd, const char *ws_real,
		  const char *root, size_t root_len)
{
	const char *rel;
	size_t rl;
	int r = add_abs_dir(s, ws_real, git_repository_path(g), G_GITDIR, &rl, &rel);
	if (r < 0 || (r = add_abs_dir(s, ws_real, git_repository_commondir(g), G_GITDIR, &rl, &rel)) < 0)
		return r;

	char p[LZ_PATH_MAX + 1];
	struct stat st;
	int k = snprintf(p, sizeof(p), "%.*s%s.git", (int)root_len, root, root_len ? "/" : "");
	if (k > 0 && (size_t)k < sizeof(p) && fstatat(ws_fd, p, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    !S_ISDIR(st.st_mode) && (r = ic_guard_add(s, p, (size_t)k, G_FILE)) < 0)
		return r;

	/* Linked worktrees' administrative directories (C/worktrees/<x>). */
	if (rel != NULL && (k = snprintf(p, sizeof(p), "%.*s%sworktrees", (int)rl, rel, rl ? "/" : "")) > 0 &&
	    (size_t)k < sizeof(p)) {
		int fd = lz_openat2(ws_fd, p, O_RDONLY | O_DIRECTORY | O_CLOEXEC, LZ_RESOLVE_CONFINED);
		DIR *d = fd < 0 ? NULL : fdopendir(fd);
		if (fd >= 0 && d == NULL)
			close(fd);
		struct dirent *de;
		while (d != NULL && r >= 0 && (de = readdir(d)) != NULL) {
			if (de->d_type != DT_DIR || de->d_name[0] == '.')
				continue;
			char w[LZ_PATH_MAX + 1];
			int n = snprintf(w, sizeof(w), "%s/%s", p, de->d_name);
			if (n > 0 && (size_t)n < sizeof(w))
				r = ic_guard_add(s, w, (size_t)n, G_GITDIR);
		}
		if (d != NULL)
			closedir(d);
		if (r < 0)
			return r;
	}

	/* What the repository's configuration (with the developer's global
	 * one and its includes) runs or follows. */
	git_config *cfg = NULL;
	if (git_repository_config_snapshot(&cfg, g) < 0)
		return -EIO;
	char root_abs[LZ_PATH_MAX * 2 + 2], common_abs[LZ_PATH_MAX + 1];
	snprintf(root_abs, sizeof(root_abs), "%s%.*s", ws_real, (int)root_len, root);
	drop_final_slash(root_abs);
	snprintf(common_abs, sizeof(common_abs), "%s", git_repository_commondir(g));
	drop_final_slash(common_abs);
	int files_left = INCLUDE_FILES_MAX;
	struct cfgscan c = { .s = s, .ws_real = ws_real, .root_abs = root_abs, .common_abs = common_abs,
			     .files_left = &files_left };
	char level_dirs[3][LZ_PATH_MAX + 1];
	int (*const find[3])(git_buf *) = { git_config_find_system, git_config_find_xdg, git_config_find_global };
	const git_config_level_t level[3] = { GIT_CONFIG_LEVEL_SYSTEM, GIT_CONFIG_LEVEL_XDG, GIT_CONFIG_LEVEL_GLOBAL };
	for (int i = 0; i < 3; i++) {
		git_buf path = GIT_BUF_INIT;
		if (find[i](&path) == 0 && path.ptr != NULL && path.ptr[0] == '/' &&
		    strlen(path.ptr) < sizeof(level_dirs[i])) {
			snprintf(level_dirs[i], sizeof(level_dirs[i]), "%s", path.ptr);
			cut_to_dir(level_dirs[i]);
			c.level_dir[level[i]] = level_dirs[i];
		}
		git_buf_dispose(&path);
		git_error_clear();
	}
	c.level_dir[GIT_CONFIG_LEVEL_LOCAL] = common_abs;
	r = git_config_foreach(cfg, cfg_entry, &c);
	git_config_free(cfg);
	if (c.rc < 0)
		return c.rc;
	if (r < 0 && r != 1)
		return -EIO;
	/* The worktree's own configuration, which libgit2 1.5 does not read
	 * (host Git does with extensions.worktreeConfig, which `git
	 * sparse-checkout` sets): read whatever that setting says. */
	char wt[LZ_PATH_MAX * 2 + 4];
	const char *gitdir = git_repository_path(g);
	size_t gl = strlen(gitdir);
	snprintf(wt, sizeof(wt), "%s%sconfig.worktree", gitdir, gl && gitdir[gl - 1] == '/' ? "" : "/");
	return scan_file(&c, wt, 0);
}
