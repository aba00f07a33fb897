/* What the router's Git may read outside the workspace: the developer's
 * configuration files and what they include, a linked worktree's Git
 * directories, and nothing else of the home directory. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_test.h"
#include "lz_child.h"

#include "router/gitlib.h"
#include "proc/confine.h"
#include "router/gitreads.h"
#include "router/ignoreclass.h"

#define FMT(buf, ...) assert_true((size_t)snprintf(buf, sizeof(buf), __VA_ARGS__) < sizeof(buf))

struct fx {
	char dir[PATH_MAX]; /* the home directory */
};

/* libgit2 reads HOME once, when initialised (main): every test's home
 * directory is this one, made anew. */
static char home[64] = "/tmp/lz-gitreads.XXXXXX";

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (f == NULL || mkdir(home, 0700) < 0)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "%s", home);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	lz_test_rmtree(f->dir);
	free(f);
	return 0;
}

static void put(const struct fx *f, const char *rel, const char *text)
{
	char p[PATH_MAX];
	FMT(p, "%s/%s", f->dir, rel);
	for (char *s = p + strlen(f->dir) + 1; (s = strchr(s, '/')) != NULL; s++) {
		*s = '\0';
		(void)mkdir(p, 0755);
		*s = '/';
	}
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* git ARGS... in f->dir/rel, which must succeed (HOME is f->dir). */
static void git(const struct fx *f, const char *rel, char *const *argv)
{
	char cwd[PATH_MAX];
	FMT(cwd, "%s/%s", f->dir, rel);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		if (null < 0 || chdir(cwd) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
			_exit(126);
		setenv("HOME", f->dir, 1);
		execvp("git", argv);
		_exit(127);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static bool holds(const struct lz_gitreads *r, const char *path)
{
	struct stat want, got;
	if (stat(path, &want) < 0)
		return false;
	for (size_t i = 0; i < r->n; i++)
		if (fstat(r->fds[i], &got) == 0 && got.st_dev == want.st_dev && got.st_ino == want.st_ino)
			return true;
	return false;
}

#define HOLDS(r, f, rel, want)                                                                     \
	do {                                                                                       \
		char p_[PATH_MAX];                                                                 \
		FMT(p_, "%s/%s", (f)->dir, (rel));                                                 \
		if (holds((r), p_) != (want))                                                      \
			fail_msg("%s %s among what Git reads", rel, (want) ? "is not" : "is");    \
	} while (0)

static void collect_with(const struct fx *f, const char *ws_rel, const char *excludes, struct lz_gitreads *r)
{
	char ws[PATH_MAX];
	FMT(ws, "%s/%s", f->dir, ws_rel);
	int fd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	struct lz_err err = { 0, "" };
	if (lz_gitreads_collect(fd, f->dir, excludes, r, &err) < 0)
		fail_msg("lz_gitreads_collect: %s", err.msg);
	close(fd);
}

static void collect(const struct fx *f, const char *ws_rel, struct lz_gitreads *r)
{
	char excludes[PATH_MAX];
	FMT(excludes, "%s/ignore-global", f->dir);
	collect_with(f, ws_rel, excludes, r);
}

/* Includes as Git joins them: relative to the including file (also one
 * included itself), "~/", and an includeIf's whatever its condition. */
static void test_lz_gitreads__the_configuration_and_what_it_includes(void **state)
{
	struct fx *f = *state;
	put(f, ".gitconfig",
	    "[include]\n\tpath = inc/a.inc\n[includeIf \"gitdir:/nowhere/\"]\n\tpath = ~/cond.inc\n");
	put(f, "inc/a.inc", "[include]\n\tpath = ../b.inc\n");
	put(f, "b.inc", "[core]\n\tautocrlf = false\n");
	put(f, "cond.inc", "[core]\n\tautocrlf = false\n");
	put(f, "ignore-global", "*.log\n");
	put(f, "secret", "not for the router\n");
	put(f, "ws/file", "x\n");
	struct lz_gitreads r;
	collect(f, "ws", &r);
	assert_true(r.complete);
	HOLDS(&r, f, ".gitconfig", true);
	HOLDS(&r, f, "inc/a.inc", true);
	HOLDS(&r, f, "b.inc", true);
	HOLDS(&r, f, "cond.inc", true);
	HOLDS(&r, f, "ignore-global", true);
	assert_true(holds(&r, "/etc"));
	HOLDS(&r, f, "secret", false);
	HOLDS(&r, f, "", false);
	HOLDS(&r, f, "inc", false);
	HOLDS(&r, f, "ws", false); /* served, not read besides */
	lz_gitreads_close(&r);
}

/* A linked worktree's Git directory and common directory lie outside it,
 * with the repository's configuration and its include. */
static void test_lz_gitreads__a_linked_worktrees_git_directories(void **state)
{
	struct fx *f = *state;
	put(f, "main/file", "x\n");
	git(f, "main", (char *const[]){ "git", "init", "-q", NULL });
	git(f, "main", (char *const[]){ "git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit",
					"-q", "--allow-empty", "-m", "one", NULL });
	git(f, "main", (char *const[]){ "git", "config", "include.path", "../../local.inc", NULL });
	put(f, "local.inc", "[core]\n\tautocrlf = false\n");
	git(f, "main", (char *const[]){ "git", "worktree", "add", "-q", "../wt", NULL });
	struct lz_gitreads r;
	collect(f, "wt", &r);
	assert_true(r.complete);
	HOLDS(&r, f, "main/.git", true);
	HOLDS(&r, f, "main/.git/worktrees/wt", true);
	HOLDS(&r, f, "local.inc", true);
	HOLDS(&r, f, "main", false);
	lz_gitreads_close(&r);
}

/* The workspace's own configuration may include a file beside it, named
 * through its Git directory; such a path is placed as Git joins it. */
static void test_lz_gitreads__an_include_out_of_the_workspace_by_dotdot(void **state)
{
	struct fx *f = *state;
	put(f, "ws/file", "x\n");
	git(f, "ws", (char *const[]){ "git", "init", "-q", NULL });
	git(f, "ws", (char *const[]){ "git", "config", "include.path", "../../team.inc", NULL });
	put(f, "team.inc", "[core]\n\tautocrlf = false\n");
	struct lz_gitreads r;
	collect(f, "ws", &r);
	assert_true(r.complete);
	HOLDS(&r, f, "team.inc", true);
	lz_gitreads_close(&r);
}

/* Nothing that would open a tree where Git reads a file (an excludes file
 * that is a directory), and nothing named by a file the sandbox may write
 * (an include inside the workspace): Git then fails to read it rather
 * than read what the sandbox chose. */
static void test_lz_gitreads__no_directory_and_nothing_the_sandbox_names(void **state)
{
	struct fx *f = *state;
	put(f, ".gitconfig", "[include]\n\tpath = ~/ws/a.inc\n");
	put(f, "ws/a.inc", "[include]\n\tpath = ../secret\n");
	put(f, "secret", "[token]\n\tvalue = not for the router\n"); /* Git parses it */
	struct lz_gitreads r;
	collect_with(f, "ws", f->dir, &r);
	assert_true(r.complete);
	HOLDS(&r, f, ".gitconfig", true);
	HOLDS(&r, f, "secret", false);
	HOLDS(&r, f, "", false);
	lz_gitreads_close(&r);
}

/* More includes than counted: the set cannot be trusted whole, and says
 * so (the router then reads as before). */
static void test_lz_gitreads__too_many_includes_is_incomplete(void **state)
{
	struct fx *f = *state;
	char cfg[4096] = "[include]\n";
	for (int i = 0; i < 17; i++) {
		char line[64], name[32];
		snprintf(line, sizeof(line), "\tpath = i%d.inc\n", i);
		strcat(cfg, line);
		snprintf(name, sizeof(name), "i%d.inc", i);
		put(f, name, "[core]\n\tautocrlf = false\n");
	}
	put(f, ".gitconfig", cfg);
	put(f, "ws/file", "x\n");
	struct lz_gitreads r;
	collect(f, "ws", &r);
	assert_false(r.complete);
	assert_non_null(strstr(r.why, "more includes than counted"));
	lz_gitreads_close(&r);
}

/* In a child confined to what it collected (and the workspace), as the
 * router is: Git reads the configuration, and nothing else of the home
 * directory; with replaced set, ~/.gitconfig is replaced by a rename
 * (as git config --global does) after the collection, and the
 * classification fails saying so rather than going on without it (its
 * guards come from that configuration too). */
struct confined {
	const struct fx *f;
	bool replaced;
};

static void confined_build(void *arg)
{
	const struct confined *c = arg;
	char ws[PATH_MAX + 32], secret[PATH_MAX + 32], cfg[PATH_MAX + 32], next[PATH_MAX + 32];
	snprintf(ws, sizeof(ws), "%s/ws", c->f->dir);
	snprintf(secret, sizeof(secret), "%s/secret", c->f->dir);
	snprintf(cfg, sizeof(cfg), "%s/.gitconfig", c->f->dir);
	snprintf(next, sizeof(next), "%s/.gitconfig.lock", c->f->dir);
	int wfd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(wfd >= 0, "open the workspace");
	struct lz_gitreads r;
	struct lz_err err = { 0, "" };
	CHECK(lz_gitreads_collect(wfd, c->f->dir, "", &r, &err) == 0, "%s", err.msg);
	CHECK(r.complete, "%s", r.why);
	if (c->replaced) {
		int fd = open(next, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		CHECK(fd >= 0 && write(fd, "[core]\n", 7) == 7 && close(fd) == 0, "write the new file");
		CHECK(rename(next, cfg) == 0, "rename: %s", strerror(errno));
	}
	CHECK(lz_confine(&(struct lz_confine){ .read_paths = r.fds, .n_read_paths = r.n, .write_dirs = &wfd,
					       .n_write_dirs = 1 },
			 &err) >= 1,
	      "lz_confine: %s", err.msg);
	lz_gitreads_close(&r);
	CHECK(open(secret, O_RDONLY | O_CLOEXEC) < 0 && errno == EACCES, "read ~/secret");
	struct lz_ignoreclass_inputs in = { .workspace_fd = wfd, .isolated_fd = -1 };
	lz_ignoreclass *snap = NULL;
	int rc = lz_ignoreclass_build(&in, &snap, &err);
	lz_ignoreclass_unref(snap);
	if (!c->replaced) {
		CHECK(rc == 0, "the classification: %s", err.msg);
		return;
	}
	CHECK(rc < 0, "classified without the replaced configuration");
	CHECK(strstr(err.msg, ".gitconfig") != NULL && strstr(err.msg, "ermission denied") != NULL, "%s", err.msg);
}

static void test_lz_gitreads__confined_git_reads_the_configuration_as_collected(void **state)
{
	struct fx *f = *state;
	put(f, ".gitconfig", "[include]\n\tpath = more.inc\n");
	put(f, "more.inc", "[core]\n\tautocrlf = false\n");
	put(f, "secret", "not for the router\n");
	put(f, "ws/.gitignore", "*.log\n");
	git(f, "ws", (char *const[]){ "git", "init", "-q", NULL });
	run_in_child(confined_build, &(struct confined){ f, false });
	run_in_child(confined_build, &(struct confined){ f, true });
}

int main(void)
{
	struct lz_err err = { 0, "" };
	if (mkdtemp(home) == NULL || rmdir(home) < 0 || setenv("HOME", home, 1) < 0 ||
	    unsetenv("XDG_CONFIG_HOME") < 0) {
		perror("home");
		return 1;
	}
	if (lz_gitlib_load(&err) < 0) {
		fprintf(stderr, "libgit2: %s\n", err.msg);
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lz_gitreads__the_configuration_and_what_it_includes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_gitreads__a_linked_worktrees_git_directories, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_gitreads__an_include_out_of_the_workspace_by_dotdot, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_gitreads__no_directory_and_nothing_the_sandbox_names, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_gitreads__too_many_includes_is_incomplete, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_gitreads__confined_git_reads_the_configuration_as_collected,
						setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
