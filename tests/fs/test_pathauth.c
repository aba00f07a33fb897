/* Confined path authority (spec 3.2 "Path resolution"): the strict host-path
 * grammar, symlink-free opens, the 0700 ownership boundary of Lazaret-owned
 * roots and children, identity revalidation and component-wise overlap.
 *
 * Every test works in its own mkdtemp directory under /tmp, removed by the
 * teardown. Tests run as root in CI and as a normal user on a developer's
 * machine: "another user" cases need root (fchown to 65534) and are skipped
 * otherwise; permission-denied cases run directly as a normal user and, as
 * root, in a child that drops to uid/gid 65534. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_test.h"

#include "fs/pathauth.h"

#define NOBODY 65534

/* ---- fixture and helpers ------------------------------------------------ */

struct fx {
	char dir[64]; /* "/tmp/lz-test-...-XXXXXX" */
};

/* Removes name beneath dfd, depth first, without following symlinks. Modes
 * are widened first so read-only or unsearchable test directories go too. */
static void rm_tree(const char *path)
{
	lz_test_rmtree(path);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -1;
	strcpy(f->dir, "/tmp/lz-test-pathauth-XXXXXX");
	if (mkdtemp(f->dir) == NULL) {
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	rm_tree(f->dir);
	free(f);
	return 0;
}

/* out = fixture dir + "/" + rel */
static char *pj(char out[PATH_MAX], const struct fx *f, const char *rel)
{
	int n = snprintf(out, PATH_MAX, "%s/%s", f->dir, rel);
	assert_true(n > 0 && n < PATH_MAX);
	return out;
}

static void mkdir_mode(const char *path, mode_t mode)
{
	if (mkdir(path, 0700) < 0)
		fail_msg("mkdir '%s': %s", path, strerror(errno));
	assert_int_equal(chmod(path, mode), 0); /* exact, whatever the umask */
}

static void touch(const char *path, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		fail_msg("create '%s': %s", path, strerror(errno));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static mode_t mode_of(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		fail_msg("stat '%s': %s", path, strerror(errno));
	return st.st_mode;
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static void assert_msg_contains(const struct lz_err *err, const char *needle)
{
	if (strstr(err->msg, needle) == NULL)
		fail_msg("message '%s' lacks '%s'", err->msg, needle);
}

static void assert_untouched(const struct lz_path *p)
{
	assert_int_equal(p->fd, -EBADF);
	assert_null(p->canonical);
}

/* Changing ownership needs root; otherwise the single assertion that needs
 * a foreign owner is skipped. */
static bool can_chown(void)
{
	return geteuid() == 0;
}

/* Runs fn(arg) without privileges: directly as a normal user; as root, in a
 * child that drops to uid/gid 65534 (fn must only return a value, never
 * assert). Returns fn's result as -errno. */
static int run_unprivileged(int (*fn)(void *), void *arg)
{
	if (getuid() != 0)
		return fn(arg);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
		    setresuid(NOBODY, NOBODY, NOBODY) < 0)
			_exit(255);
		/* Changing uid cleared "dumpable", which would make /proc/self
		 * root-owned; restore it so only the object under test denies. */
		if (prctl(PR_SET_DUMPABLE, 1) < 0)
			_exit(255);
		int r = fn(arg);
		_exit(r == 0 ? 0 : r < 0 && -r < 250 ? -r : 254);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 255)
		skip(); /* cannot drop privileges here */
	assert_int_not_equal(WEXITSTATUS(status), 254);
	return -WEXITSTATUS(status);
}

/* Path of exactly n bytes: "/xxx.../xxx..." with components under 100. */
static char *path_of_length(size_t n)
{
	char *s = malloc(n + 1);
	assert_non_null(s);
	size_t len = 0;
	while (n - len > 100) {
		s[len++] = '/';
		memset(s + len, 'x', 99);
		len += 99;
	}
	assert_true(n - len >= 2);
	s[len++] = '/';
	memset(s + len, 'y', n - len);
	s[n] = '\0';
	return s;
}

/* ---- lz_path_grammar ---------------------------------------------------- */

static int grammar(const char *path, struct lz_err *err)
{
	return lz_path_grammar(path, strlen(path), err);
}

static void assert_grammar_refused(const char *path, size_t len, const char *why)
{
	struct lz_err err = { 0, "" };
	if (lz_path_grammar(path, len, &err) != -EINVAL)
		fail_msg("'%.*s' accepted", (int)len, path);
	assert_int_equal(err.code, EINVAL);
	assert_msg_contains(&err, why);
}

static void test_lz_path_grammar__root_ok(void **state)
{
	(void)state;
	assert_int_equal(grammar("/", NULL), 0);
}

static void test_lz_path_grammar__ordinary_paths_ok(void **state)
{
	(void)state;
	static const char *const ok[] = { "/a", "/a/b", "/.a", "/..a", "/a.", "/...", "/a b",
					  "/a/b.c/d", "/tmp/w", "/\xff\xfe" };
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct lz_err err = { 0, "" };
		if (grammar(ok[i], &err) != 0)
			fail_msg("'%s' refused: %s", ok[i], err.msg);
	}
}

static void test_lz_path_grammar__relative_refused(void **state)
{
	(void)state;
	assert_grammar_refused("a", 1, "absolute");
	assert_grammar_refused("a/b", 3, "absolute");
	assert_grammar_refused("./a", 3, "absolute");
	assert_grammar_refused("../a", 4, "absolute");
}

static void test_lz_path_grammar__empty_refused(void **state)
{
	(void)state;
	assert_grammar_refused("", 0, "absolute");
	/* len 0 wins over the bytes behind the pointer. */
	assert_grammar_refused("/a", 0, "absolute");
}

static void test_lz_path_grammar__too_long_refused(void **state)
{
	(void)state;
	char *p = path_of_length(LZ_PATH_MAX + 1);
	assert_grammar_refused(p, strlen(p), "longer than 4096");
	free(p);
}

static void test_lz_path_grammar__max_length_ok(void **state)
{
	(void)state;
	char *p = path_of_length(LZ_PATH_MAX);
	assert_int_equal(strlen(p), LZ_PATH_MAX);
	assert_int_equal(grammar(p, NULL), 0);
	free(p);
}

static void test_lz_path_grammar__nul_inside_len_refused(void **state)
{
	(void)state;
	assert_grammar_refused("/a\0b", 4, "NUL");
	assert_grammar_refused("/a\0", 3, "NUL");
	assert_grammar_refused("/a/b\0/c", 7, "NUL");
}

static void test_lz_path_grammar__dot_components_refused(void **state)
{
	(void)state;
	static const char *const bad[] = { "/.", "/..", "/a/.", "/a/..", "/a/./b", "/a/../b",
					   "/./a", "/../a" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_grammar_refused(bad[i], strlen(bad[i]), "'.' or '..'");
}

static void test_lz_path_grammar__empty_component_refused(void **state)
{
	(void)state;
	assert_grammar_refused("//a", 3, "empty component");
	assert_grammar_refused("/a//b", 5, "empty component");
	assert_grammar_refused("/a/b///c", 8, "empty component");
}

static void test_lz_path_grammar__trailing_slash_refused(void **state)
{
	(void)state;
	assert_grammar_refused("/a/", 3, "end with '/'");
	assert_grammar_refused("/a/b/", 5, "end with '/'");
	assert_grammar_refused("//", 2, "end with '/'");
}

static void test_lz_path_grammar__component_too_long_refused(void **state)
{
	(void)state;
	char p[300];
	p[0] = '/';
	memset(p + 1, 'c', 256);
	p[257] = '\0';
	assert_grammar_refused(p, strlen(p), "255");
	/* In the middle too. */
	memcpy(p, "/a/", 3);
	memset(p + 3, 'c', 256);
	memcpy(p + 259, "/b", 3);
	assert_grammar_refused(p, strlen(p), "255");
}

static void test_lz_path_grammar__component_of_255_ok(void **state)
{
	(void)state;
	char p[300];
	p[0] = '/';
	memset(p + 1, 'c', 255);
	p[256] = '\0';
	assert_int_equal(grammar(p, NULL), 0);
}

/* Only len bytes are judged: a refused tail beyond len does not count. */
static void test_lz_path_grammar__honours_length(void **state)
{
	(void)state;
	assert_int_equal(lz_path_grammar("/ab/../", 3, NULL), 0);
	assert_int_equal(lz_path_grammar("/a/b/", 4, NULL), 0);
	assert_int_equal(lz_path_grammar("/a/b/", 5, NULL), -EINVAL);
}

static void test_lz_path_grammar__null_err_allowed(void **state)
{
	(void)state;
	assert_int_equal(grammar("relative", NULL), -EINVAL);
	assert_int_equal(grammar("/a//b", NULL), -EINVAL);
}

/* ---- lz_path_open ------------------------------------------------------- */

static void test_lz_path_open__directory_ok(void **state)
{
	struct fx *f = *state;
	char d[PATH_MAX];
	mkdir_mode(pj(d, f, "dir"), 0755);
	struct stat st;
	assert_int_equal(stat(d, &st), 0);

	struct lz_path p = LZ_PATH_INIT;
	struct lz_err err = { 0, "" };
	if (lz_path_open(d, &p, &err) != 0)
		fail_msg("%s", err.msg);
	assert_true(p.fd >= 0);
	assert_string_equal(p.canonical, d);
	assert_true(S_ISDIR(p.mode));
	assert_int_equal(p.mode & 07777, 0755);
	assert_int_equal(p.dev, st.st_dev);
	assert_int_equal(p.ino, st.st_ino);
	assert_int_equal(p.uid, getuid());
	assert_int_equal(p.nlink, st.st_nlink);
	assert_true(p.mnt_id != 0);
	/* The retained descriptor is an O_PATH, close-on-exec handle. */
	assert_true(fcntl(p.fd, F_GETFL) & O_PATH);
	assert_true(fcntl(p.fd, F_GETFD) & FD_CLOEXEC);
	struct stat viafd;
	assert_int_equal(fstat(p.fd, &viafd), 0);
	assert_int_equal(viafd.st_ino, st.st_ino);
	lz_path_release(&p);
	assert_int_equal(p.fd, -EBADF);
	assert_null(p.canonical);
}

static void test_lz_path_open__regular_file_ok(void **state)
{
	struct fx *f = *state;
	char file[PATH_MAX];
	touch(pj(file, f, "file"), 0640);
	struct stat st;
	assert_int_equal(stat(file, &st), 0);

	struct lz_path p = LZ_PATH_INIT;
	struct lz_err err = { 0, "" };
	if (lz_path_open(file, &p, &err) != 0)
		fail_msg("%s", err.msg);
	assert_true(S_ISREG(p.mode));
	assert_int_equal(p.mode & 07777, 0640);
	assert_int_equal(p.ino, st.st_ino);
	assert_int_equal(p.nlink, 1);
	assert_string_equal(p.canonical, file);
	lz_path_release(&p);
}

/* Spec 3.8: an auto-approve rule's executable is held from the load and
 * checked again before every run, as it is then: write for others or a
 * second hard link (into the workspace, where the sandbox could rewrite
 * the inode) made after the load refuses it. */
static void test_lz_path_check_executable__checks_the_object_as_it_is_now(void **state)
{
	struct fx *f = *state;
	char tool[PATH_MAX], alias[PATH_MAX];
	touch(pj(tool, f, "tool"), 0755);
	struct lz_path x = LZ_PATH_INIT;
	struct lz_err err = { 0, "" };
	if (lz_path_open(tool, &x, &err) != 0 || lz_path_check_executable(&x, &err) != 0)
		fail_msg("%s", err.msg);
	assert_int_equal(chmod(tool, 0777), 0);
	assert_int_equal(lz_path_check_executable(&x, &err), -EPERM);
	assert_non_null(strstr(err.msg, "group or other write"));
	assert_int_equal(chmod(tool, 0755), 0);
	assert_int_equal(lz_path_check_executable(&x, &err), 0);
	assert_int_equal(link(tool, pj(alias, f, "alias")), 0);
	assert_int_equal(lz_path_check_executable(&x, &err), -EPERM);
	assert_non_null(strstr(err.msg, "2 hard links"));
	lz_path_release(&x);
}

static void test_lz_path_open__root_ok(void **state)
{
	(void)state;
	struct lz_path p = LZ_PATH_INIT;
	assert_int_equal(lz_path_open("/", &p, NULL), 0);
	assert_string_equal(p.canonical, "/");
	assert_true(S_ISDIR(p.mode));
	lz_path_release(&p);
}

static void test_lz_path_open__symlink_in_middle_refused(void **state)
{
	struct fx *f = *state;
	char real[PATH_MAX], link[PATH_MAX], through[PATH_MAX];
	mkdir_mode(pj(real, f, "real"), 0700);
	touch(pj(through, f, "real/file"), 0600);
	assert_int_equal(symlink(real, pj(link, f, "link")), 0);
	pj(through, f, "link/file");

	struct lz_path p = LZ_PATH_INIT;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_path_open(through, &p, &err), -ELOOP);
	assert_int_equal(err.code, ELOOP);
	assert_msg_contains(&err, "symlink");
	assert_untouched(&p);

	/* A relative symlink is refused the same way. */
	char rel[PATH_MAX];
	assert_int_equal(symlink("real", pj(rel, f, "rel")), 0);
	assert_int_equal(lz_path_open(pj(through, f, "rel/file"), &p, NULL), -ELOOP);
	assert_untouched(&p);
}

static void test_lz_path_open__symlink_at_end_refused(void **state)
{
	struct fx *f = *state;
	char real[PATH_MAX], link[PATH_MAX], flink[PATH_MAX], file[PATH_MAX], dangling[PATH_MAX];
	mkdir_mode(pj(real, f, "real"), 0700);
	touch(pj(file, f, "file"), 0600);
	assert_int_equal(symlink(real, pj(link, f, "dirlink")), 0);
	assert_int_equal(symlink(file, pj(flink, f, "filelink")), 0);
	assert_int_equal(symlink("/nonexistent-lz", pj(dangling, f, "dangling")), 0);

	const char *const cases[] = { link, flink, dangling };
	for (size_t i = 0; i < 3; i++) {
		struct lz_path p = LZ_PATH_INIT;
		struct lz_err err = { 0, "" };
		assert_int_equal(lz_path_open(cases[i], &p, &err), -ELOOP);
		assert_msg_contains(&err, "is a symlink");
		assert_untouched(&p);
	}
}

/* A magic link (procfs) is a symlink too: never an escape route. */
static void test_lz_path_open__magic_link_refused(void **state)
{
	(void)state;
	char magic[64];
	snprintf(magic, sizeof(magic), "/proc/%d/cwd", (int)getpid());
	struct lz_path p = LZ_PATH_INIT;
	assert_int_equal(lz_path_open(magic, &p, NULL), -ELOOP);
	assert_int_equal(lz_path_open("/proc/self/cwd", &p, NULL), -ELOOP);
	assert_untouched(&p);
}

static void test_lz_path_open__missing_refused(void **state)
{
	struct fx *f = *state;
	char missing[PATH_MAX];
	struct lz_path p = LZ_PATH_INIT;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_path_open(pj(missing, f, "missing/deeper"), &p, &err), -ENOENT);
	assert_int_equal(err.code, ENOENT);
	assert_msg_contains(&err, "missing");
	assert_untouched(&p);
}

static void test_lz_path_open__through_regular_file_refused(void **state)
{
	struct fx *f = *state;
	char file[PATH_MAX], below[PATH_MAX];
	touch(pj(file, f, "file"), 0600);
	struct lz_path p = LZ_PATH_INIT;
	assert_int_equal(lz_path_open(pj(below, f, "file/x"), &p, NULL), -ENOTDIR);
	assert_untouched(&p);
}

static void test_lz_path_open__grammar_refused(void **state)
{
	(void)state;
	static const char *const bad[] = { "relative/path", "/tmp/../etc", "/tmp/", "/tmp//x", "" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct lz_path p = LZ_PATH_INIT;
		struct lz_err err = { 0, "" };
		assert_int_equal(lz_path_open(bad[i], &p, &err), -EINVAL);
		char quoted[64];
		snprintf(quoted, sizeof(quoted), "'%s': ", bad[i]);
		assert_msg_contains(&err, quoted);
		assert_untouched(&p);
	}
}

struct open_arg {
	const char *path;
};

static int open_and_release(void *arg)
{
	struct lz_path p = LZ_PATH_INIT;
	int r = lz_path_open(((struct open_arg *)arg)->path, &p, NULL);
	lz_path_release(&p);
	return r;
}

static void test_lz_path_open__unsearchable_ancestor_refused(void **state)
{
	struct fx *f = *state;
	char locked[PATH_MAX], inner[PATH_MAX];
	assert_int_equal(chmod(f->dir, 0755), 0); /* let uid 65534 reach it */
	mkdir_mode(pj(locked, f, "locked"), 0755);
	mkdir_mode(pj(inner, f, "locked/inner"), 0755);
	assert_int_equal(chmod(locked, 0000), 0);
	struct open_arg a = { inner };
	assert_int_equal(run_unprivileged(open_and_release, &a), -EACCES);
}

/* Ambient paths may cross mounts (only Lazaret-owned trees may not). */
static void test_lz_path_open__crosses_ambient_mount(void **state)
{
	(void)state;
	struct lz_path root = LZ_PATH_INIT, proc = LZ_PATH_INIT;
	assert_int_equal(lz_path_open("/", &root, NULL), 0);
	assert_int_equal(lz_path_open("/proc", &proc, NULL), 0);
	assert_int_not_equal(proc.mnt_id, root.mnt_id);
	lz_path_release(&root);
	lz_path_release(&proc);
}

/* ---- lz_path_open_owned_root -------------------------------------------- */

static void assert_owned_dir(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		fail_msg("stat '%s': %s", path, strerror(errno));
	assert_true(S_ISDIR(st.st_mode));
	if ((st.st_mode & 07777) != 0700)
		fail_msg("'%s' has mode %04o", path, (unsigned)(st.st_mode & 07777));
	assert_int_equal(st.st_uid, getuid());
}

static void creates_under_umask(const struct fx *f, mode_t mask)
{
	char root[PATH_MAX], a[PATH_MAX], ab[PATH_MAX];
	pj(root, f, "a/b/c");
	mode_t old = umask(mask);
	struct lz_path p = LZ_PATH_INIT;
	struct lz_err err = { 0, "" };
	int r = lz_path_open_owned_root(root, &p, &err);
	umask(old);
	if (r != 0)
		fail_msg("%s", err.msg);
	assert_owned_dir(pj(a, f, "a"));
	assert_owned_dir(pj(ab, f, "a/b"));
	assert_owned_dir(root);
	assert_string_equal(p.canonical, root);
	assert_true(S_ISDIR(p.mode));
	assert_int_equal(p.mode & 07777, 0700);
	assert_int_equal(p.uid, getuid());
	struct stat st;
	assert_int_equal(stat(root, &st), 0);
	assert_int_equal(p.ino, st.st_ino);
	lz_path_release(&p);
}

static void test_lz_path_open_owned_root__creates_0700_under_umask_0(void **state)
{
	creates_under_umask(*state, 0);
}

static void test_lz_path_open_owned_root__creates_0700_under_umask_077(void **state)
{
	creates_under_umask(*state, 077);
}

static void test_lz_path_open_owned_root__existing_0700_ok(void **state)
{
	struct fx *f = *state;
	char root[PATH_MAX];
	mkdir_mode(pj(root, f, "root"), 0700);
	struct stat st;
	assert_int_equal(stat(root, &st), 0);
	struct lz_path p = LZ_PATH_INIT;
	assert_int_equal(lz_path_open_owned_root(root, &p, NULL), 0);
	assert_int_equal(p.ino, st.st_ino);
	assert_int_equal(p.dev, st.st_dev);
	/* Opening an existing root creates nothing and changes nothing. */
	assert_int_equal(mode_of(root) & 07777, 0700);
	lz_path_release(&p);
}

static void test_lz_path_open_owned_root__existing_wrong_mode_refused(void **state)
{
	struct fx *f = *state;
	static const mode_t modes[] = { 0755, 0750, 0711, 0701, 0770, 0500, 0600, 01700, 02700 };
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		char root[PATH_MAX], name[32], want[16];
		snprintf(name, sizeof(name), "root%zu", i);
		mkdir_mode(pj(root, f, name), modes[i]);
		struct lz_path p = LZ_PATH_INIT;
		struct lz_err err = { 0, "" };
		assert_int_equal(lz_path_open_owned_root(root, &p, &err), -EPERM);
		assert_msg_contains(&err, "0700");
		snprintf(want, sizeof(want), "mode %04o", (unsigned)modes[i]);
		assert_msg_contains(&err, want);
		assert_untouched(&p);
		/* Refusal never repairs the mode. */
		assert_int_equal(mode_of(root) & 07777, modes[i]);
	}
}

static void test_lz_path_open_owned_root__existing_other_owner_refused(void **state)
{
	struct fx *f = *state;
	char root[PATH_MAX];
	mkdir_mode(pj(root, f, "root"), 0700);
	if (!can_chown())
		skip(); /* needs root to give the directory away */
	assert_int_equal(chown(root, NOBODY, NOBODY), 0);
	struct lz_path p = LZ_PATH_INIT;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_path_open_owned_root(root, &p, &err), -EPERM);
	assert_msg_contains(&err, "owned by uid 65534");
	assert_untouched(&p);
}

static void test_lz_path_open_owned_root__existing_file_refused(void **state)
{
	struct fx *f = *state;
	char root[PATH_MAX];
	touch(pj(root, f, "root"), 0700);
	struct lz_path p = LZ_PATH_INIT;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_path_open_owned_root(root, &p, &err), -ENOTDIR);
	assert_msg_contains(&err, "not a directory");
	assert_untouched(&p);
}

/* The root itself is a symlink to an acceptable 0700 directory: refused,
 * not followed. */
static void test_lz_path_open_owned_root__root_is_symlink_refused(void **state)
{
	struct fx *f = *state;
	char real[PATH_MAX], root[PATH_MAX];
	mkdir_mode(pj(real, f, "real"), 0700);
	assert_int_equal(symlink(real, pj(root, f, "root")), 0);
	struct lz_path p = LZ_PATH_INIT;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_path_open_owned_root(root, &p, &err), -ELOOP);
	assert_msg_contains(&err, "symlink");
	assert_untouched(&p);
}

/* A symlink on the way to the boundary: nothing is created at its target. */
static void test_lz_path_open_owned_root__symlink_ancestor_refused(void **state)
{
	struct fx *f = *state;
	char real[PATH_MAX], link[PATH_MAX], root[PATH_MAX], target[PATH_MAX];
	mkdir_mode(pj(real, f, "real"), 0700);
	assert_int_equal(symlink(real, pj(link, f, "link")), 0);
	struct lz_path p = LZ_PATH_INIT;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_path_open_owned_root(pj(root, f, "link/new/root"), &p, &err), -ELOOP);
	assert_msg_contains(&err, "symlink");
	assert_false(exists(pj(target, f, "real/new")));
	assert_untouched(&p);
}

/* A dangling symlink where a component would be created is not replaced by
 * a directory and its target is not created. */
static void test_lz_path_open_owned_root__dangling_symlink_component_refused(void **state)
{
	struct fx *f = *state;
	char link[PATH_MAX], root[PATH_MAX], target[PATH_MAX];
	pj(target, f, "target");
	assert_int_equal(symlink(target, pj(link, f, "link")), 0);
	struct lz_path p = LZ_PATH_INIT;
	assert_int_equal(lz_path_open_owned_root(pj(root, f, "link/root"), &p, NULL), -ELOOP);
	assert_false(exists(target));
	assert_untouched(&p);
}

/* Ambient ancestors above the boundary need not be 0700 or ours. */
static void test_lz_path_open_owned_root__ambient_0755_ancestor_ok(void **state)
{
	struct fx *f = *state;
	char amb[PATH_MAX], root[PATH_MAX];
	mkdir_mode(pj(amb, f, "home"), 0755);
	struct lz_path p = LZ_PATH_INIT;
	struct lz_err err = { 0, "" };
	if (lz_path_open_owned_root(pj(root, f, "home/share/lazaret"), &p, &err) != 0)
		fail_msg("%s", err.msg);
	assert_int_equal(mode_of(amb) & 07777, 0755); /* ancestor left alone */
	assert_owned_dir(root);
	lz_path_release(&p);
}

static void test_lz_path_open_owned_root__ambient_foreign_ancestor_ok(void **state)
{
	struct fx *f = *state;
	char amb[PATH_MAX], root[PATH_MAX];
	mkdir_mode(pj(amb, f, "shared"), 0777);
	if (!can_chown())
		skip(); /* needs root to give the ancestor away */
	assert_int_equal(chown(amb, NOBODY, NOBODY), 0);
	struct lz_path p = LZ_PATH_INIT;
	struct lz_err err = { 0, "" };
	if (lz_path_open_owned_root(pj(root, f, "shared/lazaret"), &p, &err) != 0)
		fail_msg("%s", err.msg);
	assert_owned_dir(root);
	lz_path_release(&p);
}

static void test_lz_path_open_owned_root__grammar_refused(void **state)
{
	struct fx *f = *state;
	char bad[PATH_MAX];
	snprintf(bad, sizeof(bad), "%s/a/../b", f->dir);
	struct lz_path p = LZ_PATH_INIT;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_path_open_owned_root(bad, &p, &err), -EINVAL);
	assert_int_equal(lz_path_open_owned_root("lazaret", &p, NULL), -EINVAL);
	assert_untouched(&p);
	char a[PATH_MAX];
	assert_false(exists(pj(a, f, "a")));
}

static void test_lz_path_open_owned_root__through_regular_file_refused(void **state)
{
	struct fx *f = *state;
	char file[PATH_MAX], root[PATH_MAX];
	touch(pj(file, f, "file"), 0600);
	struct lz_path p = LZ_PATH_INIT;
	assert_int_equal(lz_path_open_owned_root(pj(root, f, "file/root"), &p, NULL), -ENOTDIR);
	assert_untouched(&p);
}

static int owned_root_and_release(void *arg)
{
	struct lz_path p = LZ_PATH_INIT;
	int r = lz_path_open_owned_root(((struct open_arg *)arg)->path, &p, NULL);
	lz_path_release(&p);
	return r;
}

static void test_lz_path_open_owned_root__uncreatable_refused(void **state)
{
	struct fx *f = *state;
	char ro[PATH_MAX], root[PATH_MAX];
	assert_int_equal(chmod(f->dir, 0755), 0); /* let uid 65534 reach it */
	mkdir_mode(pj(ro, f, "ro"), 0555);
	struct open_arg a = { pj(root, f, "ro/lazaret") };
	assert_int_equal(run_unprivileged(owned_root_and_release, &a), -EACCES);
	assert_false(exists(root));

	/* The message names the component that could not be created. */
	if (getuid() != 0) {
		struct lz_path p = LZ_PATH_INIT;
		struct lz_err err = { 0, "" };
		assert_int_equal(lz_path_open_owned_root(root, &p, &err), -EACCES);
		assert_msg_contains(&err, "create '");
		assert_msg_contains(&err, root);
	}
}

/* ---- lz_path_owned_child ------------------------------------------------ */

static void owned_parent(const struct fx *f, struct lz_path *parent)
{
	char root[PATH_MAX];
	struct lz_err err = { 0, "" };
	if (lz_path_open_owned_root(pj(root, f, "root"), parent, &err) != 0)
		fail_msg("%s", err.msg);
}

static void test_lz_path_owned_child__creates_0700(void **state)
{
	struct fx *f = *state;
	struct lz_path parent = LZ_PATH_INIT, child = LZ_PATH_INIT, again = LZ_PATH_INIT;
	owned_parent(f, &parent);
	char want[PATH_MAX];
	pj(want, f, "root/profiles");

	mode_t old = umask(0);
	struct lz_err err = { 0, "" };
	int r = lz_path_owned_child(&parent, "profiles", true, &child, &err);
	umask(old);
	if (r != 0)
		fail_msg("%s", err.msg);
	assert_string_equal(child.canonical, want);
	assert_owned_dir(want);
	assert_int_equal(child.mode & 07777, 0700);

	/* Existing child, create not requested: the same object. */
	assert_int_equal(lz_path_owned_child(&parent, "profiles", false, &again, NULL), 0);
	assert_int_equal(again.ino, child.ino);
	assert_int_equal(again.dev, child.dev);
	lz_path_release(&again);
	/* Existing child, create requested: still the same object. */
	assert_int_equal(lz_path_owned_child(&parent, "profiles", true, &again, NULL), 0);
	assert_int_equal(again.ino, child.ino);
	lz_path_release(&again);
	lz_path_release(&child);
	lz_path_release(&parent);
}

static void test_lz_path_owned_child__name_of_255_ok(void **state)
{
	struct fx *f = *state;
	struct lz_path parent = LZ_PATH_INIT, child = LZ_PATH_INIT;
	owned_parent(f, &parent);
	char name[256];
	memset(name, 'n', 255);
	name[255] = '\0';
	assert_int_equal(lz_path_owned_child(&parent, name, true, &child, NULL), 0);
	lz_path_release(&child);
	lz_path_release(&parent);
}

static void test_lz_path_owned_child__missing_without_create_refused(void **state)
{
	struct fx *f = *state;
	struct lz_path parent = LZ_PATH_INIT, child = LZ_PATH_INIT;
	owned_parent(f, &parent);
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_path_owned_child(&parent, "absent", false, &child, &err), -ENOENT);
	assert_msg_contains(&err, "absent");
	assert_untouched(&child);
	char p[PATH_MAX];
	assert_false(exists(pj(p, f, "root/absent")));
	lz_path_release(&parent);
}

static void test_lz_path_owned_child__invalid_name_refused(void **state)
{
	struct fx *f = *state;
	struct lz_path parent = LZ_PATH_INIT;
	owned_parent(f, &parent);
	char long_name[300];
	memset(long_name, 'n', 256);
	long_name[256] = '\0';
	const char *const bad[] = { "", ".", "..", "a/b", "/a", "a/", long_name };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct lz_path child = LZ_PATH_INIT;
		struct lz_err err = { 0, "" };
		if (lz_path_owned_child(&parent, bad[i], true, &child, &err) != -EINVAL)
			fail_msg("name '%s' accepted", bad[i]);
		assert_msg_contains(&err, "invalid directory name");
		assert_untouched(&child);
	}
	char a[PATH_MAX];
	assert_false(exists(pj(a, f, "root/a")));
	lz_path_release(&parent);
}

static void test_lz_path_owned_child__symlink_child_refused(void **state)
{
	struct fx *f = *state;
	struct lz_path parent = LZ_PATH_INIT, child = LZ_PATH_INIT;
	owned_parent(f, &parent);
	char real[PATH_MAX], link[PATH_MAX], dangling[PATH_MAX], target[PATH_MAX];
	mkdir_mode(pj(real, f, "real"), 0700);
	assert_int_equal(symlink(real, pj(link, f, "root/link")), 0);
	pj(target, f, "target");
	assert_int_equal(symlink(target, pj(dangling, f, "root/dangling")), 0);

	struct lz_err err = { 0, "" };
	assert_int_equal(lz_path_owned_child(&parent, "link", true, &child, &err), -ELOOP);
	assert_msg_contains(&err, "symlink");
	assert_untouched(&child);
	/* Dangling: create must not follow it and make its target. */
	assert_int_equal(lz_path_owned_child(&parent, "dangling", true, &child, &err), -ELOOP);
	assert_false(exists(target));
	assert_untouched(&child);
	lz_path_release(&parent);
}

static void test_lz_path_owned_child__wrong_mode_refused(void **state)
{
	struct fx *f = *state;
	struct lz_path parent = LZ_PATH_INIT, child = LZ_PATH_INIT;
	owned_parent(f, &parent);
	char c[PATH_MAX];
	mkdir_mode(pj(c, f, "root/domains"), 0755);
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_path_owned_child(&parent, "domains", true, &child, &err), -EPERM);
	assert_msg_contains(&err, "0700");
	assert_untouched(&child);
	lz_path_release(&parent);
}

static void test_lz_path_owned_child__other_owner_refused(void **state)
{
	struct fx *f = *state;
	struct lz_path parent = LZ_PATH_INIT, child = LZ_PATH_INIT;
	owned_parent(f, &parent);
	char c[PATH_MAX];
	mkdir_mode(pj(c, f, "root/domains"), 0700);
	if (!can_chown()) {
		lz_path_release(&parent);
		skip(); /* needs root to give the child away */
	}
	assert_int_equal(chown(c, NOBODY, NOBODY), 0);
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_path_owned_child(&parent, "domains", false, &child, &err), -EPERM);
	assert_msg_contains(&err, "owned by uid 65534");
	assert_untouched(&child);
	lz_path_release(&parent);
}

static void test_lz_path_owned_child__regular_file_refused(void **state)
{
	struct fx *f = *state;
	struct lz_path parent = LZ_PATH_INIT, child = LZ_PATH_INIT;
	owned_parent(f, &parent);
	char c[PATH_MAX];
	touch(pj(c, f, "root/file"), 0700);
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_path_owned_child(&parent, "file", true, &child, &err), -ENOTDIR);
	assert_msg_contains(&err, "not a directory");
	assert_untouched(&child);
	lz_path_release(&parent);
}

/* A mount point as the child: "/" and its "proc" mount stand in for a
 * planted mount, which an unprivileged test cannot create. */
static void test_lz_path_owned_child__mount_point_refused(void **state)
{
	(void)state;
	struct lz_path root = LZ_PATH_INIT, child = LZ_PATH_INIT;
	assert_int_equal(lz_path_open("/", &root, NULL), 0);
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_path_owned_child(&root, "proc", false, &child, &err), -EXDEV);
	assert_msg_contains(&err, "crosses a mount point");
	assert_msg_contains(&err, "'/proc'"); /* label under "/" has no "//" */
	assert_untouched(&child);
	lz_path_release(&root);
}

/* The label would exceed LZ_PATH_MAX: refused before any lookup. */
static void test_lz_path_owned_child__label_too_long_refused(void **state)
{
	struct fx *f = *state;
	char deep[LZ_PATH_MAX + 1];
	size_t len = (size_t)snprintf(deep, sizeof(deep), "%s", f->dir);
	while (len + 1 + 255 <= LZ_PATH_MAX) {
		deep[len++] = '/';
		memset(deep + len, 'd', 255);
		len += 255;
		deep[len] = '\0';
	}
	struct lz_path parent = LZ_PATH_INIT, child = LZ_PATH_INIT;
	struct lz_err err = { 0, "" };
	if (lz_path_open_owned_root(deep, &parent, &err) != 0)
		fail_msg("%s", err.msg);
	char name[256];
	memset(name, 'n', 255);
	name[255] = '\0';
	assert_true(len + 1 + 255 > LZ_PATH_MAX);
	assert_int_equal(lz_path_owned_child(&parent, name, true, &child, &err), -ENAMETOOLONG);
	assert_int_equal(err.code, ENAMETOOLONG);
	/* The 512-byte message holds the long label, not necessarily the end. */
	assert_msg_contains(&err, "path beneath '");
	assert_untouched(&child);
	lz_path_release(&parent);
}

struct child_arg {
	const struct lz_path *parent;
	const char *name;
};

static int owned_child_and_release(void *arg)
{
	struct child_arg *a = arg;
	struct lz_path p = LZ_PATH_INIT;
	int r = lz_path_owned_child(a->parent, a->name, true, &p, NULL);
	lz_path_release(&p);
	return r;
}

static void test_lz_path_owned_child__uncreatable_refused(void **state)
{
	struct fx *f = *state;
	char ro[PATH_MAX], c[PATH_MAX];
	assert_int_equal(chmod(f->dir, 0755), 0); /* let uid 65534 reach it */
	mkdir_mode(pj(ro, f, "ro"), 0555);
	struct lz_path parent = LZ_PATH_INIT;
	assert_int_equal(lz_path_open(ro, &parent, NULL), 0);
	struct child_arg a = { &parent, "new" };
	assert_int_equal(run_unprivileged(owned_child_and_release, &a), -EACCES);
	assert_false(exists(pj(c, f, "ro/new")));
	lz_path_release(&parent);
}

/* ---- lz_path_revalidate ------------------------------------------------- */

static void open_dir(const struct fx *f, const char *rel, struct lz_path *p)
{
	char d[PATH_MAX];
	mkdir_mode(pj(d, f, rel), 0700);
	struct lz_err err = { 0, "" };
	if (lz_path_open(d, p, &err) != 0)
		fail_msg("%s", err.msg);
}

static void test_lz_path_revalidate__unchanged_ok(void **state)
{
	struct lz_path p = LZ_PATH_INIT;
	open_dir(*state, "d", &p);
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_path_revalidate(&p, &err), 0);
	assert_int_equal(lz_path_revalidate(&p, &err), 0);
	lz_path_release(&p);
}

/* The descriptor is the authority: renaming the directory away and putting
 * another in its place leaves the retained object itself. */
static void test_lz_path_revalidate__swapped_directory_refused(void **state)
{
	/* Revalidation reopens through the plan: a directory swapped in under
	 * the same name is another object, and is refused. */
	struct fx *f = *state;
	struct lz_path p = LZ_PATH_INIT;
	open_dir(f, "d", &p);
	char d[PATH_MAX], moved[PATH_MAX];
	assert_int_equal(rename(pj(d, f, "d"), pj(moved, f, "moved")), 0);
	mkdir_mode(d, 0700);
	struct stat st;
	assert_int_equal(stat(d, &st), 0);
	assert_int_not_equal(st.st_ino, p.ino);

	struct lz_err err = { 0, "" };
	assert_int_equal(lz_path_revalidate(&p, &err), -ESTALE);
	assert_msg_contains(&err, "changed identity");
	lz_path_release(&p);
}

static void test_lz_path_revalidate__removed_path_refused(void **state)
{
	struct fx *f = *state;
	struct lz_path p = LZ_PATH_INIT;
	open_dir(f, "d", &p);
	char d[PATH_MAX], moved[PATH_MAX];
	assert_int_equal(rename(pj(d, f, "d"), pj(moved, f, "moved")), 0);
	assert_int_equal(lz_path_revalidate(&p, NULL), -ENOENT);
	lz_path_release(&p);
}

static void test_lz_path_revalidate__inode_mismatch_refused(void **state)
{
	struct lz_path p = LZ_PATH_INIT;
	open_dir(*state, "d", &p);
	p.ino ^= 1;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_path_revalidate(&p, &err), -ESTALE);
	assert_int_equal(err.code, ESTALE);
	assert_msg_contains(&err, "changed identity");
	assert_msg_contains(&err, p.canonical);
	lz_path_release(&p);
}

static void test_lz_path_revalidate__device_mismatch_refused(void **state)
{
	struct lz_path p = LZ_PATH_INIT;
	open_dir(*state, "d", &p);
	p.dev += 1;
	assert_int_equal(lz_path_revalidate(&p, NULL), -ESTALE);
	lz_path_release(&p);
}

static void test_lz_path_revalidate__mount_mismatch_refused(void **state)
{
	struct lz_path p = LZ_PATH_INIT;
	open_dir(*state, "d", &p);
	p.mnt_id += 1;
	assert_int_equal(lz_path_revalidate(&p, NULL), -ESTALE);
	lz_path_release(&p);
}

static void test_lz_path_revalidate__closed_descriptor_refused(void **state)
{
	struct lz_path p = LZ_PATH_INIT;
	open_dir(*state, "d", &p);
	int fd = p.fd;
	p.fd = -EBADF;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_path_revalidate(&p, &err), -EBADF);
	assert_msg_contains(&err, "revalidate");
	p.fd = fd;
	lz_path_release(&p);
}

/* ---- lz_path_release ---------------------------------------------------- */

static void test_lz_path_release__idempotent(void **state)
{
	struct lz_path p = LZ_PATH_INIT;
	lz_path_release(NULL);
	lz_path_release(&p); /* initialized but empty */
	open_dir(*state, "d", &p);
	int fd = p.fd;
	lz_path_release(&p);
	assert_int_equal(fcntl(fd, F_GETFD), -1); /* descriptor really closed */
	assert_int_equal(errno, EBADF);
	lz_path_release(&p);
	assert_int_equal(p.fd, -EBADF);
	assert_null(p.canonical);
}

/* ---- lz_path_overlaps / lz_path_is_beneath ------------------------------ */

static void test_lz_path_overlaps__name_prefix_is_not_ancestor(void **state)
{
	(void)state;
	assert_false(lz_path_overlaps("/a", "/ab"));
	assert_false(lz_path_overlaps("/ab", "/a"));
	assert_false(lz_path_overlaps("/a/b", "/a/bc/d"));
	assert_false(lz_path_overlaps("/srv/data", "/srv/data2"));
	assert_false(lz_path_overlaps("/a", "/b"));
}

static void test_lz_path_overlaps__root_overlaps_everything(void **state)
{
	(void)state;
	assert_true(lz_path_overlaps("/", "/"));
	assert_true(lz_path_overlaps("/", "/a"));
	assert_true(lz_path_overlaps("/a/b/c", "/"));
}

static void test_lz_path_overlaps__equal(void **state)
{
	(void)state;
	assert_true(lz_path_overlaps("/a", "/a"));
	assert_true(lz_path_overlaps("/a/b", "/a/b"));
}

static void test_lz_path_overlaps__ancestor_either_direction(void **state)
{
	(void)state;
	assert_true(lz_path_overlaps("/a", "/a/b"));
	assert_true(lz_path_overlaps("/a/b", "/a"));
	assert_true(lz_path_overlaps("/a", "/a/b/c/d"));
}

static void test_lz_path_is_beneath__strict_descendant_only(void **state)
{
	(void)state;
	assert_true(lz_path_is_beneath("/a", "/a/b"));
	assert_true(lz_path_is_beneath("/a", "/a/b/c"));
	assert_true(lz_path_is_beneath("/", "/a"));
	assert_false(lz_path_is_beneath("/a", "/a"));
	assert_false(lz_path_is_beneath("/", "/"));
	assert_false(lz_path_is_beneath("/a/b", "/a"));
	assert_false(lz_path_is_beneath("/a", "/ab"));
	assert_false(lz_path_is_beneath("/a", "/ab/c"));
	assert_false(lz_path_is_beneath("/a", "/b/a"));
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_lz_path_grammar__root_ok),
		T(test_lz_path_grammar__ordinary_paths_ok),
		T(test_lz_path_grammar__relative_refused),
		T(test_lz_path_grammar__empty_refused),
		T(test_lz_path_grammar__too_long_refused),
		T(test_lz_path_grammar__max_length_ok),
		T(test_lz_path_grammar__nul_inside_len_refused),
		T(test_lz_path_grammar__dot_components_refused),
		T(test_lz_path_grammar__empty_component_refused),
		T(test_lz_path_grammar__trailing_slash_refused),
		T(test_lz_path_grammar__component_too_long_refused),
		T(test_lz_path_grammar__component_of_255_ok),
		T(test_lz_path_grammar__honours_length),
		T(test_lz_path_grammar__null_err_allowed),
		T(test_lz_path_open__directory_ok),
		T(test_lz_path_open__regular_file_ok),
		T(test_lz_path_check_executable__checks_the_object_as_it_is_now),
		T(test_lz_path_open__root_ok),
		T(test_lz_path_open__symlink_in_middle_refused),
		T(test_lz_path_open__symlink_at_end_refused),
		T(test_lz_path_open__magic_link_refused),
		T(test_lz_path_open__missing_refused),
		T(test_lz_path_open__through_regular_file_refused),
		T(test_lz_path_open__grammar_refused),
		T(test_lz_path_open__unsearchable_ancestor_refused),
		T(test_lz_path_open__crosses_ambient_mount),
		T(test_lz_path_open_owned_root__creates_0700_under_umask_0),
		T(test_lz_path_open_owned_root__creates_0700_under_umask_077),
		T(test_lz_path_open_owned_root__existing_0700_ok),
		T(test_lz_path_open_owned_root__existing_wrong_mode_refused),
		T(test_lz_path_open_owned_root__existing_other_owner_refused),
		T(test_lz_path_open_owned_root__existing_file_refused),
		T(test_lz_path_open_owned_root__root_is_symlink_refused),
		T(test_lz_path_open_owned_root__symlink_ancestor_refused),
		T(test_lz_path_open_owned_root__dangling_symlink_component_refused),
		T(test_lz_path_open_owned_root__ambient_0755_ancestor_ok),
		T(test_lz_path_open_owned_root__ambient_foreign_ancestor_ok),
		T(test_lz_path_open_owned_root__grammar_refused),
		T(test_lz_path_open_owned_root__through_regular_file_refused),
		T(test_lz_path_open_owned_root__uncreatable_refused),
		T(test_lz_path_owned_child__creates_0700),
		T(test_lz_path_owned_child__name_of_255_ok),
		T(test_lz_path_owned_child__missing_without_create_refused),
		T(test_lz_path_owned_child__invalid_name_refused),
		T(test_lz_path_owned_child__symlink_child_refused),
		T(test_lz_path_owned_child__wrong_mode_refused),
		T(test_lz_path_owned_child__other_owner_refused),
		T(test_lz_path_owned_child__regular_file_refused),
		T(test_lz_path_owned_child__mount_point_refused),
		T(test_lz_path_owned_child__label_too_long_refused),
		T(test_lz_path_owned_child__uncreatable_refused),
		T(test_lz_path_revalidate__unchanged_ok),
		T(test_lz_path_revalidate__swapped_directory_refused),
		T(test_lz_path_revalidate__removed_path_refused),
		T(test_lz_path_revalidate__inode_mismatch_refused),
		T(test_lz_path_revalidate__device_mismatch_refused),
		T(test_lz_path_revalidate__mount_mismatch_refused),
		T(test_lz_path_revalidate__closed_descriptor_refused),
		T(test_lz_path_release__idempotent),
		T(test_lz_path_overlaps__name_prefix_is_not_ancestor),
		T(test_lz_path_overlaps__root_overlaps_everything),
		T(test_lz_path_overlaps__equal),
		T(test_lz_path_overlaps__ancestor_either_direction),
		T(test_lz_path_is_beneath__strict_descendant_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
