/* lz_gitsentry_plan (spec 3.5, SR-4): which host Git files the sandbox gets
 * read-only or behind transient storage, and which layouts are refused.
 *
 * Each test gets a fresh mkdtemp directory D; the workspace is D/ws, so
 * "outside the workspace" cases can put repositories in D. Repositories are
 * made by the real git binary with system and global configuration
 * disabled; tests skip when git is missing. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs/gitsentry.h"
#include "fs/tree.h"

/* ---- fixture and helpers ------------------------------------------------ */

struct fx {
	char dir[256]; /* canonical D */
	char ws[512];  /* canonical D/ws */
	int wsfd;
};

static bool have_git;

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -1;
	char tmpl[] = "/tmp/lz-test-gitsentry-XXXXXX", canon[PATH_MAX];
	if (mkdtemp(tmpl) == NULL || realpath(tmpl, canon) == NULL ||
	    strlen(canon) >= sizeof(f->dir)) {
		free(f);
		return -1;
	}
	memcpy(f->dir, canon, strlen(canon) + 1);
	snprintf(f->ws, sizeof(f->ws), "%s/ws", f->dir);
	if (mkdir(f->ws, 0700) < 0)
		return -1;
	f->wsfd = open(f->ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (f->wsfd < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	close(f->wsfd);
	int parent = open("/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
	int r = lz_tree_remove(parent, strrchr(f->dir, '/') + 1, NULL);
	close(parent);
	free(f);
	return r < 0 ? -1 : 0;
}

/* Runs a shell command in D (printf format); fails the test on non-zero. */
static void sh(const struct fx *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sh(const struct fx *f, const char *fmt, ...)
{
	char cmd[8192];
	int n = snprintf(cmd, sizeof(cmd), "cd '%s' && ( ", f->dir);
	va_list ap;
	va_start(ap, fmt);
	n += vsnprintf(cmd + n, sizeof(cmd) - (size_t)n, fmt, ap);
	va_end(ap);
	n += snprintf(cmd + n, sizeof(cmd) - (size_t)n, " ) >/dev/null");
	assert_true(n > 0 && (size_t)n < sizeof(cmd));
	int st = system(cmd);
	if (st != 0)
		fail_msg("command failed (%d): %s", st, cmd);
}

/* First line of a command's output (run in D), without the newline. */
static void sh_out(const struct fx *f, char *out, size_t size, const char *cmd)
{
	char full[8192];
	int k = snprintf(full, sizeof(full), "cd '%s' && %s", f->dir, cmd);
	assert_true(k > 0 && (size_t)k < sizeof(full));
	FILE *p = popen(full, "r");
	assert_non_null(p);
	assert_non_null(fgets(out, (int)size, p));
	out[strcspn(out, "\n")] = '\0';
	assert_int_equal(pclose(p), 0);
}

/* Writes len bytes to D/rel, replacing it. */
static void put(const struct fx *f, const char *rel, const char *bytes, size_t len)
{
	char path[PATH_MAX];
	int k = snprintf(path, sizeof(path), "%s/%s", f->dir, rel);
	assert_true(k > 0 && (size_t)k < sizeof(path));
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, bytes, len), (ssize_t)len);
	close(fd);
}

static void put_str(const struct fx *f, const char *rel, const char *s)
{
	put(f, rel, s, strlen(s));
}

/* After a test replaced D/ws itself. */
static void reopen_ws(struct fx *f)
{
	close(f->wsfd);
	f->wsfd = open(f->ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->wsfd >= 0);
}

static void need_git(void)
{
	if (!have_git)
		skip();
}

/* A repository with one commit at D/rel. */
static void repo(const struct fx *f, const char *rel)
{
	sh(f, "git init -q '%s' && git -C '%s' commit -q --allow-empty -m init", rel, rel);
}

static int plan(const struct fx *f, struct lz_gitsentry_mount **m, size_t *n, struct lz_err *err)
{
	lz_err_clear(err);
	return lz_gitsentry_plan(f->wsfd, f->ws, m, n, err);
}

static void assert_mount(const struct fx *f, const struct lz_gitsentry_mount *m,
			 enum lz_gitsentry_kind kind, const char *rel)
{
	char host[PATH_MAX + 16], sandbox[PATH_MAX + 16];
	snprintf(host, sizeof(host), "%s/%s", f->ws, rel);
	snprintf(sandbox, sizeof(sandbox), "/workspace/%s", rel);
	assert_int_equal(m->kind, kind);
	assert_string_equal(m->host_path, host);
	assert_string_equal(m->sandbox_path, sandbox);
	if (kind != LZ_GITSENTRY_READONLY_FILE) {
		assert_true(m->fd < 0);
		return;
	}
	/* The runtime binds this descriptor's object, never the path. */
	struct stat want, got;
	assert_int_equal(fstatat(f->wsfd, rel, &want, AT_SYMLINK_NOFOLLOW), 0);
	assert_true(m->fd >= 0);
	assert_int_equal(fstat(m->fd, &got), 0);
	assert_true(want.st_dev == got.st_dev && want.st_ino == got.st_ino);
}

/* Expects a refusal with code and a message containing needle; checks the
 * result parameters stay untouched. */
static void assert_refused(const struct fx *f, int code, const char *needle)
{
	struct lz_gitsentry_mount sentinel;
	struct lz_gitsentry_mount *m = &sentinel;
	size_t n = 77;
	struct lz_err err;
	assert_int_equal(plan(f, &m, &n, &err), -code);
	assert_int_equal(err.code, code);
	if (strstr(err.msg, needle) == NULL)
		fail_msg("message '%s' lacks '%s'", err.msg, needle);
	assert_ptr_equal(m, &sentinel);
	assert_int_equal(n, 77);
}

#define RO LZ_GITSENTRY_READONLY_FILE
#define TRANSIENT LZ_GITSENTRY_TRANSIENT_DIR

/* The linked worktree of D/ws/main moved to the workspace root: ws/.git is
 * a pointer file to ws/main/.git/worktrees/wt0, whose commondir is "../..". */
static void worktree_at_root(const struct fx *f)
{
	repo(f, "ws/main");
	sh(f, "git -C ws/main worktree add -q ../wt0 && mv ws/wt0/.git ws/.git && rm -rf ws/wt0 && "
	      "git -C ws worktree repair 2>/dev/null");
}

/* ---- ordinary layouts --------------------------------------------------- */

static void test_lz_gitsentry_plan__no_git_entry_empty_plan(void **state)
{
	struct fx *f = *state;
	sh(f, "mkdir ws/src && echo hi > ws/src/a");
	struct lz_gitsentry_mount *m = NULL;
	size_t n = 5;
	struct lz_err err;
	assert_int_equal(plan(f, &m, &n, &err), 0);
	assert_null(m);
	assert_int_equal(n, 0);
}

static void test_lz_gitsentry_plan__git_init_protects_config_and_hooks(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	struct lz_gitsentry_mount *m = NULL;
	size_t n = 0;
	struct lz_err err;
	assert_int_equal(plan(f, &m, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_mount(f, &m[0], RO, ".git/config");
	assert_mount(f, &m[1], TRANSIENT, ".git/hooks");
	lz_gitsentry_free(m, n);
}

static void test_lz_gitsentry_plan__missing_hooks_still_planned(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	sh(f, "rm -rf ws/.git/hooks");
	struct lz_gitsentry_mount *m = NULL;
	size_t n = 0;
	struct lz_err err;
	assert_int_equal(plan(f, &m, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_mount(f, &m[0], RO, ".git/config");
	assert_mount(f, &m[1], TRANSIENT, ".git/hooks");
	lz_gitsentry_free(m, n);
}

static void test_lz_gitsentry_plan__missing_config_plans_hooks_only(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	sh(f, "rm ws/.git/config");
	struct lz_gitsentry_mount *m = NULL;
	size_t n = 0;
	struct lz_err err;
	assert_int_equal(plan(f, &m, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_mount(f, &m[0], TRANSIENT, ".git/hooks");
	lz_gitsentry_free(m, n);
}

static void test_lz_gitsentry_plan__config_worktree_protected(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	sh(f, "git -C ws config extensions.worktreeConfig true && "
	      "git -C ws config --worktree core.fileMode false && test -f ws/.git/config.worktree");
	struct lz_gitsentry_mount *m = NULL;
	size_t n = 0;
	struct lz_err err;
	assert_int_equal(plan(f, &m, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_mount(f, &m[0], RO, ".git/config");
	assert_mount(f, &m[1], RO, ".git/config.worktree");
	assert_mount(f, &m[2], TRANSIENT, ".git/hooks");
	lz_gitsentry_free(m, n);
}

static void test_lz_gitsentry_plan__nested_repository_ignored(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	repo(f, "ws/sub");
	struct lz_gitsentry_mount *m = NULL;
	size_t n = 0;
	struct lz_err err;
	assert_int_equal(plan(f, &m, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_mount(f, &m[0], RO, ".git/config");
	assert_mount(f, &m[1], TRANSIENT, ".git/hooks");
	lz_gitsentry_free(m, n);
}

/* ---- pointer files: linked worktrees, separate git directories ---------- */

static void test_lz_gitsentry_plan__linked_worktree_inside_maps_to_common_dir(void **state)
{
	struct fx *f = *state;
	need_git();
	worktree_at_root(f);
	char common[PATH_MAX], want[PATH_MAX + 16];
	sh_out(f, common, sizeof(common), "cd ws && git rev-parse --path-format=absolute --git-common-dir");
	snprintf(want, sizeof(want), "%s/main/.git", f->ws);
	assert_string_equal(common, want);

	struct lz_gitsentry_mount *m = NULL;
	size_t n = 0;
	struct lz_err err;
	assert_int_equal(plan(f, &m, &n, &err), 0);
	assert_int_equal(n, 4);
	assert_mount(f, &m[0], RO, ".git");
	assert_mount(f, &m[1], RO, "main/.git/worktrees/wt0/commondir");
	assert_mount(f, &m[2], RO, "main/.git/config");
	assert_mount(f, &m[3], TRANSIENT, "main/.git/hooks");
	lz_gitsentry_free(m, n);
}

static void test_lz_gitsentry_plan__linked_worktree_config_worktree_protected(void **state)
{
	struct fx *f = *state;
	need_git();
	worktree_at_root(f);
	sh(f, "cd ws && git config extensions.worktreeConfig true && "
	      "git config --worktree core.fileMode false && "
	      "test -f main/.git/worktrees/wt0/config.worktree && "
	      "git -C main config --worktree core.fileMode false && test -f main/.git/config.worktree");
	struct lz_gitsentry_mount *m = NULL;
	size_t n = 0;
	struct lz_err err;
	assert_int_equal(plan(f, &m, &n, &err), 0);
	assert_int_equal(n, 6);
	assert_mount(f, &m[0], RO, ".git");
	assert_mount(f, &m[1], RO, "main/.git/worktrees/wt0/commondir");
	assert_mount(f, &m[2], RO, "main/.git/config");
	assert_mount(f, &m[3], RO, "main/.git/config.worktree");
	assert_mount(f, &m[4], RO, "main/.git/worktrees/wt0/config.worktree");
	assert_mount(f, &m[5], TRANSIENT, "main/.git/hooks");
	lz_gitsentry_free(m, n);
}

static void test_lz_gitsentry_plan__relative_pointer_normalized(void **state)
{
	struct fx *f = *state;
	need_git();
	worktree_at_root(f);
	put_str(f, "ws/.git", "gitdir: ./main//.git/worktrees/../worktrees/wt0/\n");
	struct lz_gitsentry_mount *m = NULL;
	size_t n = 0;
	struct lz_err err;
	assert_int_equal(plan(f, &m, &n, &err), 0);
	assert_int_equal(n, 4);
	assert_mount(f, &m[0], RO, ".git");
	assert_mount(f, &m[1], RO, "main/.git/worktrees/wt0/commondir");
	assert_mount(f, &m[2], RO, "main/.git/config");
	assert_mount(f, &m[3], TRANSIENT, "main/.git/hooks");
	lz_gitsentry_free(m, n);
}

static void test_lz_gitsentry_plan__separate_git_dir_inside(void **state)
{
	struct fx *f = *state;
	need_git();
	sh(f, "git init -q --separate-git-dir \"$PWD/ws/gd\" ws");
	struct lz_gitsentry_mount *m = NULL;
	size_t n = 0;
	struct lz_err err;
	assert_int_equal(plan(f, &m, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_mount(f, &m[0], RO, ".git");
	assert_mount(f, &m[1], RO, "gd/config");
	assert_mount(f, &m[2], TRANSIENT, "gd/hooks");
	lz_gitsentry_free(m, n);
}

static void test_lz_gitsentry_plan__pointer_with_crlf_accepted(void **state)
{
	struct fx *f = *state;
	need_git();
	sh(f, "git init -q --separate-git-dir \"$PWD/ws/gd\" ws");
	put_str(f, "ws/.git", "gitdir: gd\r\n");
	struct lz_gitsentry_mount *m = NULL;
	size_t n = 0;
	struct lz_err err;
	assert_int_equal(plan(f, &m, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_mount(f, &m[1], RO, "gd/config");
	lz_gitsentry_free(m, n);
}

/* The sandbox cannot see the git directory, so only the pointer (which it
 * could otherwise aim at a configuration of its own) is protected. */
static void test_lz_gitsentry_plan__main_repository_outside_pointer_only(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "main");
	sh(f, "rmdir ws && git -C main worktree add -q ../ws");
	reopen_ws(f);
	struct lz_gitsentry_mount *m = NULL;
	size_t n = 0;
	struct lz_err err;
	assert_int_equal(plan(f, &m, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_mount(f, &m[0], RO, ".git");
	lz_gitsentry_free(m, n);
}

static void test_lz_gitsentry_plan__gitdir_dotdot_escape_not_followed(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "outside");
	sh(f, "mkdir ws/sub");
	static const char *const pointers[] = {
		"gitdir: ../outside/.git\n",
		"gitdir: sub/../../outside/.git\n",
		"gitdir: ../../../../../../../../../../../../outside/.git\n",
	};
	for (size_t i = 0; i < sizeof(pointers) / sizeof(pointers[0]); i++) {
		put_str(f, "ws/.git", pointers[i]);
		struct lz_gitsentry_mount *m = NULL;
		size_t n = 0;
		struct lz_err err;
		assert_int_equal(plan(f, &m, &n, &err), 0);
		assert_int_equal(n, 1);
		assert_mount(f, &m[0], RO, ".git");
		lz_gitsentry_free(m, n);
	}
}

static void test_lz_gitsentry_plan__absolute_pointer_leaving_and_reentering(void **state)
{
	struct fx *f = *state;
	need_git();
	sh(f, "git init -q --separate-git-dir \"$PWD/ws/gd\" ws");
	char p[PATH_MAX + 64];
	snprintf(p, sizeof(p), "gitdir: %s/../ws/gd\n", f->ws);
	put_str(f, "ws/.git", p);
	struct lz_gitsentry_mount *m = NULL;
	size_t n = 0;
	struct lz_err err;
	assert_int_equal(plan(f, &m, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_mount(f, &m[1], RO, "gd/config");
	lz_gitsentry_free(m, n);
}

/* Git honours commondir in a plain .git directory too; the plan follows. */
static void test_lz_gitsentry_plan__commondir_in_main_git_dir_followed(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	repo(f, "ws/other");
	put_str(f, "ws/.git/commondir", "../other/.git\n");
	char common[PATH_MAX], want[PATH_MAX + 16];
	sh_out(f, common, sizeof(common), "cd ws && git rev-parse --path-format=absolute --git-common-dir");
	snprintf(want, sizeof(want), "%s/other/.git", f->ws);
	assert_string_equal(common, want);

	struct lz_gitsentry_mount *m = NULL;
	size_t n = 0;
	struct lz_err err;
	assert_int_equal(plan(f, &m, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_mount(f, &m[0], RO, ".git/commondir");
	assert_mount(f, &m[1], RO, "other/.git/config");
	assert_mount(f, &m[2], TRANSIENT, "other/.git/hooks");
	lz_gitsentry_free(m, n);
}

static void test_lz_gitsentry_plan__commondir_outside_pointers_only(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "outside");
	sh(f, "git init -q --separate-git-dir \"$PWD/ws/gd\" ws && echo \"$PWD/outside/.git\" > ws/gd/commondir");
	struct lz_gitsentry_mount *m = NULL;
	size_t n = 0;
	struct lz_err err;
	assert_int_equal(plan(f, &m, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_mount(f, &m[0], RO, ".git");
	assert_mount(f, &m[1], RO, "gd/commondir");
	lz_gitsentry_free(m, n);
}

/* ---- refusals ----------------------------------------------------------- */

static void test_lz_gitsentry_plan__dotgit_symlink_refused(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "real");
	sh(f, "ln -s ../real/.git ws/.git");
	assert_refused(f, EPERM, "symlink");
}

static void test_lz_gitsentry_plan__dotgit_fifo_refused(void **state)
{
	struct fx *f = *state;
	sh(f, "mkfifo ws/.git");
	assert_refused(f, EPERM, "neither a directory nor a regular file");
}

static void test_lz_gitsentry_plan__dotgit_file_hard_links_refused(void **state)
{
	struct fx *f = *state;
	need_git();
	sh(f, "git init -q --separate-git-dir \"$PWD/ws/gd\" ws && ln ws/.git ws/pointer");
	assert_refused(f, EPERM, "hard links");
}

static void test_lz_gitsentry_plan__config_symlink_refused(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	sh(f, "mv ws/.git/config ws/.git/config.real && ln -s config.real ws/.git/config");
	assert_refused(f, EPERM, "is a symlink");
}

static void test_lz_gitsentry_plan__config_two_hard_links_refused(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	sh(f, "ln ws/.git/config ws/cfg");
	assert_refused(f, EPERM, "has 2 hard links");
}

static void test_lz_gitsentry_plan__config_not_regular_refused(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	sh(f, "rm ws/.git/config && mkdir ws/.git/config");
	assert_refused(f, EPERM, "not a regular file");
}

static void test_lz_gitsentry_plan__hooks_symlink_refused(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	sh(f, "rm -rf ws/.git/hooks && mkdir ws/h && ln -s ../h ws/.git/hooks");
	assert_refused(f, EPERM, "transient storage would land on its target");
}

static void test_lz_gitsentry_plan__hooks_not_directory_refused(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	sh(f, "rm -rf ws/.git/hooks && touch ws/.git/hooks");
	assert_refused(f, EPERM, "not a directory");
}

static void test_lz_gitsentry_plan__commondir_symlink_refused(void **state)
{
	struct fx *f = *state;
	need_git();
	worktree_at_root(f);
	sh(f, "cd ws/main/.git/worktrees/wt0 && mv commondir cd.real && ln -s cd.real commondir");
	assert_refused(f, EPERM, "is a symlink");
}

static void test_lz_gitsentry_plan__commondir_malformed_refused(void **state)
{
	struct fx *f = *state;
	need_git();
	worktree_at_root(f);
	put(f, "ws/main/.git/worktrees/wt0/commondir", "../..\0x\n", 7);
	assert_refused(f, EINVAL, "NUL");
	put_str(f, "ws/main/.git/worktrees/wt0/commondir", "\n");
	assert_refused(f, EINVAL, "names no path");
}

static void test_lz_gitsentry_plan__pointer_without_gitdir_prefix_refused(void **state)
{
	struct fx *f = *state;
	put_str(f, "ws/.git", "worktree: main/.git\n");
	assert_refused(f, EINVAL, "does not start with 'gitdir: '");
	put_str(f, "ws/.git", "gitdir:main/.git\n");
	assert_refused(f, EINVAL, "does not start with 'gitdir: '");
}

static void test_lz_gitsentry_plan__pointer_empty_refused(void **state)
{
	struct fx *f = *state;
	put_str(f, "ws/.git", "");
	assert_refused(f, EINVAL, "does not start");
	put_str(f, "ws/.git", "gitdir: \n");
	assert_refused(f, EINVAL, "names no path");
}

static void test_lz_gitsentry_plan__pointer_huge_refused(void **state)
{
	struct fx *f = *state;
	size_t len = LZ_GITSENTRY_POINTER_MAX + 1;
	char *buf = malloc(len);
	assert_non_null(buf);
	memcpy(buf, "gitdir: ", 8);
	memset(buf + 8, 'a', len - 8);
	put(f, "ws/.git", buf, len);
	free(buf);
	assert_refused(f, EFBIG, "larger than 4096 bytes");
}

static void test_lz_gitsentry_plan__pointer_with_nul_refused(void **state)
{
	struct fx *f = *state;
	put(f, "ws/.git", "gitdir: gd\0/../x\n", 17);
	assert_refused(f, EINVAL, "NUL");
}

static void test_lz_gitsentry_plan__pointer_second_line_refused(void **state)
{
	struct fx *f = *state;
	put_str(f, "ws/.git", "gitdir: gd\nsomething: else\n");
	assert_refused(f, EINVAL, "more than one line");
}

static void test_lz_gitsentry_plan__pointer_component_too_long_refused(void **state)
{
	struct fx *f = *state;
	char buf[8 + 300 + 1];
	memcpy(buf, "gitdir: ", 8);
	memset(buf + 8, 'a', 300);
	buf[308] = '\0';
	put_str(f, "ws/.git", buf);
	assert_refused(f, ENAMETOOLONG, "longer than");
}

static void test_lz_gitsentry_plan__gitdir_through_symlink_refused(void **state)
{
	struct fx *f = *state;
	need_git();
	sh(f, "git init -q --separate-git-dir \"$PWD/ws/gd\" ws && ln -s gd ws/link");
	put_str(f, "ws/.git", "gitdir: link\n");
	assert_refused(f, EPERM, "symlink");
	put_str(f, "ws/.git", "gitdir: link/../gd\n");
	assert_refused(f, EPERM, "symlink");
}

static void test_lz_gitsentry_plan__gitdir_missing_refused(void **state)
{
	struct fx *f = *state;
	put_str(f, "ws/.git", "gitdir: nowhere/.git\n");
	assert_refused(f, ENOENT, "does not exist inside the workspace");
}

static void test_lz_gitsentry_plan__gitdir_not_directory_refused(void **state)
{
	struct fx *f = *state;
	put_str(f, "ws/file", "x\n");
	put_str(f, "ws/.git", "gitdir: file\n");
	assert_refused(f, ENOTDIR, "not a directory");
}

/* A mount inside the workspace is not crossed (RESOLVE_NO_XDEV). Needs a
 * private mount namespace; skipped where one cannot be made. */
static void test_lz_gitsentry_plan__mount_point_refused(void **state)
{
	struct fx *f = *state;
	need_git();
	repo(f, "ws");
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char hooks[PATH_MAX + 16];
		snprintf(hooks, sizeof(hooks), "%s/.git/hooks", f->ws);
		if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount("tmpfs", hooks, "tmpfs", 0, NULL) < 0)
			_exit(77);
		/* The inherited descriptor still names the parent namespace's
		 * mount, where nothing is mounted on the hooks directory. */
		int wsfd = open(f->ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
		struct lz_gitsentry_mount *m = NULL;
		size_t n = 0;
		struct lz_err err;
		int r = lz_gitsentry_plan(wsfd, f->ws, &m, &n, &err);
		if (r == -EPERM && strstr(err.msg, "crosses a mount point") != NULL)
			_exit(0);
		fprintf(stderr, "plan returned %d: %s\n", r, err.msg);
		_exit(1);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_lz_gitsentry_plan__invalid_arguments_refused(void **state)
{
	struct fx *f = *state;
	struct lz_gitsentry_mount *m = NULL;
	size_t n = 0;
	struct lz_err err;
	assert_int_equal(lz_gitsentry_plan(-1, f->ws, &m, &n, &err), -EINVAL);
	assert_int_equal(lz_gitsentry_plan(f->wsfd, NULL, &m, &n, &err), -EINVAL);
	assert_int_equal(lz_gitsentry_plan(f->wsfd, f->ws, NULL, &n, &err), -EINVAL);
	assert_int_equal(lz_gitsentry_plan(f->wsfd, f->ws, &m, NULL, &err), -EINVAL);
	assert_int_equal(lz_gitsentry_plan(f->wsfd, "relative/ws", &m, &n, &err), -EINVAL);
	assert_int_equal(lz_gitsentry_plan(f->wsfd, "/a/../b", &m, &n, &err), -EINVAL);
	assert_null(m);
}

static void test_lz_gitsentry_plan__null_err_allowed(void **state)
{
	struct fx *f = *state;
	put_str(f, "ws/.git", "nonsense\n");
	struct lz_gitsentry_mount *m = NULL;
	size_t n = 0;
	assert_int_equal(lz_gitsentry_plan(f->wsfd, f->ws, &m, &n, NULL), -EINVAL);
	assert_null(m);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	/* Repositories made here must not depend on the developer's Git. */
	setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
	setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1);
	setenv("GIT_AUTHOR_NAME", "lz", 1);
	setenv("GIT_AUTHOR_EMAIL", "lz@example.invalid", 1);
	setenv("GIT_COMMITTER_NAME", "lz", 1);
	setenv("GIT_COMMITTER_EMAIL", "lz@example.invalid", 1);
	static const char *const leak[] = { "GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR",
					    "GIT_INDEX_FILE", "GIT_CEILING_DIRECTORIES",
					    "GIT_DISCOVERY_ACROSS_FILESYSTEM" };
	for (size_t i = 0; i < sizeof(leak) / sizeof(leak[0]); i++)
		unsetenv(leak[i]);
	have_git = system("git --version >/dev/null 2>&1") == 0;

	const struct CMUnitTest tests[] = {
		T(test_lz_gitsentry_plan__no_git_entry_empty_plan),
		T(test_lz_gitsentry_plan__git_init_protects_config_and_hooks),
		T(test_lz_gitsentry_plan__missing_hooks_still_planned),
		T(test_lz_gitsentry_plan__missing_config_plans_hooks_only),
		T(test_lz_gitsentry_plan__config_worktree_protected),
		T(test_lz_gitsentry_plan__nested_repository_ignored),
		T(test_lz_gitsentry_plan__linked_worktree_inside_maps_to_common_dir),
		T(test_lz_gitsentry_plan__linked_worktree_config_worktree_protected),
		T(test_lz_gitsentry_plan__relative_pointer_normalized),
		T(test_lz_gitsentry_plan__separate_git_dir_inside),
		T(test_lz_gitsentry_plan__pointer_with_crlf_accepted),
		T(test_lz_gitsentry_plan__main_repository_outside_pointer_only),
		T(test_lz_gitsentry_plan__gitdir_dotdot_escape_not_followed),
		T(test_lz_gitsentry_plan__absolute_pointer_leaving_and_reentering),
		T(test_lz_gitsentry_plan__commondir_in_main_git_dir_followed),
		T(test_lz_gitsentry_plan__commondir_outside_pointers_only),
		T(test_lz_gitsentry_plan__dotgit_symlink_refused),
		T(test_lz_gitsentry_plan__dotgit_fifo_refused),
		T(test_lz_gitsentry_plan__dotgit_file_hard_links_refused),
		T(test_lz_gitsentry_plan__config_symlink_refused),
		T(test_lz_gitsentry_plan__config_two_hard_links_refused),
		T(test_lz_gitsentry_plan__config_not_regular_refused),
		T(test_lz_gitsentry_plan__hooks_symlink_refused),
		T(test_lz_gitsentry_plan__hooks_not_directory_refused),
		T(test_lz_gitsentry_plan__commondir_symlink_refused),
		T(test_lz_gitsentry_plan__commondir_malformed_refused),
		T(test_lz_gitsentry_plan__pointer_without_gitdir_prefix_refused),
		T(test_lz_gitsentry_plan__pointer_empty_refused),
		T(test_lz_gitsentry_plan__pointer_huge_refused),
		T(test_lz_gitsentry_plan__pointer_with_nul_refused),
		T(test_lz_gitsentry_plan__pointer_second_line_refused),
		T(test_lz_gitsentry_plan__pointer_component_too_long_refused),
		T(test_lz_gitsentry_plan__gitdir_through_symlink_refused),
		T(test_lz_gitsentry_plan__gitdir_missing_refused),
		T(test_lz_gitsentry_plan__gitdir_not_directory_refused),
		T(test_lz_gitsentry_plan__mount_point_refused),
		T(test_lz_gitsentry_plan__invalid_arguments_refused),
		T(test_lz_gitsentry_plan__null_err_allowed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
