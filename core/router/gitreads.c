#include "router/gitreads.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <git2.h>

#include "router/ignoreclass_int.h"
#include "util/cleanup.h"
#include "util/fdutil.h"
#include "util/sys.h"

/* Git's own bound on nested includes (config.c, MAX_INCLUDE_DEPTH). */
#define INCLUDE_DEPTH_MAX 10
#define INCLUDES_PER_FILE 16

struct collect {
	struct lz_gitreads *r;
	const char *home;
	const char *ws_real; /* with a final '/' */
};

static void incomplete(struct lz_gitreads *r, const char *fmt, const char *what)
{
	if (!r->complete)
		return;
	r->complete = false;
	snprintf(r->why, sizeof(r->why), fmt, what);
}

/* abs names something beneath the workspace as Git joins paths (no
 * symlink followed: the sandbox makes those). */
static bool beneath_workspace(const struct collect *c, const char *abs)
{
	char p[4096];
	if (snprintf(p, sizeof(p), "%s", abs) >= (int)sizeof(p))
		return false;
	ic_normalize(p);
	size_t n = strlen(p);
	if (n + 1 < sizeof(p) && p[n - 1] != '/')
		memcpy(p + n, "/", 2); /* the workspace itself */
	return strncmp(p, c->ws_real, strlen(c->ws_real)) == 0;
}

/* Adds abs (followed: the developer's own path) unless it is served, is
 * missing, unreadable to Git as well, a directory where only a file is
 * read (as_file: granting it would open the whole tree), or already
 * there. */
static void add(struct collect *c, const char *abs, bool as_file)
{
	struct lz_gitreads *r = c->r;
	if (beneath_workspace(c, abs))
		return; /* served */
	int fd = open(abs, O_PATH | O_CLOEXEC);
	struct stat st, seen;
	if (fd < 0 || fstat(fd, &st) < 0 || (as_file && S_ISDIR(st.st_mode))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	for (size_t i = 0; i < r->n; i++)
		if (fstat(r->fds[i], &seen) == 0 && seen.st_dev == st.st_dev && seen.st_ino == st.st_ino) {
			close(fd);
			return;
		}
	if (r->n == LZ_GITREADS_MAX) {
		close(fd);
		incomplete(r, "more than 64 files and directories to read (the last: %.180s)", abs);
		return;
	}
	r->fds[r->n++] = fd;
}

struct includes {
	char *paths[INCLUDES_PER_FILE];
	size_t n;
	bool more;
};

/* The include.path and includeIf.<condition>.path values of the file
 * itself (not of what it includes: those come with their own file). */
static int include_entry(const git_config_entry *e, void *arg)
{
	struct includes *in = arg;
	size_t n = strlen(e->name);
	bool include = strcmp(e->name, "include.path") == 0 ||
		       (strncmp(e->name, "includeif.", 10) == 0 && n > 15 && strcmp(e->name + n - 5, ".path") == 0);
	if (!include || e->include_depth != 0 || e->value == NULL)
		return 0;
	if (in->n == INCLUDES_PER_FILE) {
		in->more = true;
		return 0;
	}
	in->paths[in->n] = strdup(e->value);
	if (in->paths[in->n] == NULL)
		in->more = true;
	else
		in->n++;
	return 0;
}

/* The file, and the files it includes as Git joins them: "~/" is $HOME,
 * a relative path is relative to the including file's directory. */
static void config_file(struct collect *c, const char *file, int depth)
{
	if (depth > INCLUDE_DEPTH_MAX) {
		incomplete(c->r, "includes nested deeper than Git follows, at %.180s", file);
		return;
	}
	if (access(file, F_OK) < 0)
		return;
	add(c, file, true);
	/* An included file the sandbox may write names nothing to grant:
	 * what it includes stays unreadable, and Git fails rather than read
	 * a file the sandbox chose. */
	if (depth > 0 && beneath_workspace(c, file))
		return;
	git_config *cfg = NULL;
	struct includes in = { .n = 0 };
	if (git_config_open_ondisk(&cfg, file) < 0) {
		git_error_clear(); /* Git cannot read it either */
		return;
	}
	(void)git_config_foreach(cfg, include_entry, &in);
	git_config_free(cfg);
	if (in.more)
		incomplete(c->r, "more includes than counted in %.180s", file);
	const char *slash = strrchr(file, '/');
	size_t dir_len = slash ? (size_t)(slash - file) : 0;
	for (size_t i = 0; i < in.n; i++) {
		const char *v = in.paths[i];
		char abs[4096];
		/* "~user/" is another user's home: not placed */
		if ((v[0] == '~' && v[1] != '/') ||
		    ic_git_join(c->home, file, dir_len, v, strlen(v), abs, sizeof(abs)) < 0)
			incomplete(c->r, "an include that cannot be placed: %.180s", v);
		else
			config_file(c, abs, depth + 1);
		free(in.paths[i]);
	}
}

static void config_at(struct collect *c, const char *dir, const char *name)
{
	char p[4096];
	int k = snprintf(p, sizeof(p), "%s%s%s", dir, dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/", name);
	if (k < 0 || (size_t)k >= sizeof(p))
		incomplete(c->r, "a configuration path too long under %.180s", dir);
	else
		config_file(c, p, 0);
}

int lz_gitreads_collect(int workspace_fd, const char *home, const char *global_excludes, struct lz_gitreads *r,
			struct lz_err *err)
{
	char proc[64], ws_real[4096];
	*r = (struct lz_gitreads){ .n = 0, .complete = true };
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", workspace_fd);
	int pr = lz_fd_path(workspace_fd, ws_real, sizeof(ws_real) - 2); /* room for '/' */
	if (pr < 0)
		return lz_err_set(err, -pr, "the workspace's path: %s",
				  pr == -ENAMETOOLONG ? "unusable" : strerror(-pr));
	size_t k = strlen(ws_real);
	if (k > 1)
		ws_real[k++] = '/';
	ws_real[k] = '\0';
	home = home && home[0] == '/' ? home : NULL;
	struct collect c = { r, home, ws_real };

	/* Spec 3.5: the configuration Git reads for every repository, where
	 * libgit2 itself finds it (HOME and XDG_CONFIG_HOME as it read them
	 * when initialised). */
	add(&c, "/etc", false); /* the system's, and what it includes there */
	int (*const find[])(git_buf *) = { git_config_find_system, git_config_find_xdg, git_config_find_global };
	for (size_t i = 0; i < sizeof(find) / sizeof(find[0]); i++) {
		git_buf path = GIT_BUF_INIT;
		if (find[i](&path) == 0 && path.ptr != NULL && path.ptr[0] == '/')
			config_file(&c, path.ptr, 0);
		git_buf_dispose(&path);
		git_error_clear();
	}
	if (global_excludes && global_excludes[0] == '/')
		add(&c, global_excludes, true);

	/* A linked worktree's Git and common directories lie elsewhere. */
	git_repository *g = NULL;
	if (git_repository_open_ext(&g, proc, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0) {
		git_error_clear();
		return 0;
	}
	const char *gitdir = git_repository_path(g), *common = git_repository_commondir(g);
	add(&c, gitdir, false);
	add(&c, common, false);
	config_at(&c, common, "config");
	config_at(&c, gitdir, "config.worktree");
	git_repository_free(g);
	return 0;
}

void lz_gitreads_close(struct lz_gitreads *r)
{
	for (size_t i = 0; i < r->n; i++)
		lz_close_fdp(&r->fds[i]);
	r->n = 0;
}
