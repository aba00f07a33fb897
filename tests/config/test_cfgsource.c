/* Configuration source selection, Storage and Runtime Root derivation, and
 * the safe reader (spec 3.2).
 *
 * Every test works in its own mkdtemp directory under /tmp, removed by the
 * teardown. Tests pass as root (CI) and as a normal user: the foreign-owner
 * case needs root and is skipped otherwise; the unreadable case runs as a
 * normal user directly and, as root, in a child that drops to uid 65534. */
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
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_test.h"

#include "config/cfgsource.h"

#define NOBODY 65534

/* ---- fixture and helpers ------------------------------------------------ */

struct fx {
	char dir[64]; /* "/tmp/lz-test-cfgsource-XXXXXX" */
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -1;
	strcpy(f->dir, "/tmp/lz-test-cfgsource-XXXXXX");
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
	alarm(0); /* a failed non-blocking check must not kill later tests */
	lz_test_rmtree(f->dir);
	free(f);
	return 0;
}

static char *pj(char out[PATH_MAX], const struct fx *f, const char *rel)
{
	int n = snprintf(out, PATH_MAX, "%s/%s", f->dir, rel);
	assert_true(n > 0 && n < PATH_MAX);
	return out;
}

static void mkdir_p(const struct fx *f, const char *rel)
{
	char path[PATH_MAX];
	pj(path, f, rel);
	for (char *s = path + strlen(f->dir) + 1;; s++) {
		if (*s == '/' || *s == '\0') {
			char c = *s;
			*s = '\0';
			if (mkdir(path, 0755) < 0 && errno != EEXIST)
				fail_msg("mkdir '%s': %s", path, strerror(errno));
			*s = c;
			if (c == '\0')
				break;
		}
	}
}

static void write_file(const char *path, const void *bytes, size_t n, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		fail_msg("create '%s': %s", path, strerror(errno));
	for (size_t done = 0; done < n;) {
		ssize_t w = write(fd, (const char *)bytes + done, n - done);
		assert_true(w > 0);
		done += (size_t)w;
	}
	assert_int_equal(fchmod(fd, mode), 0); /* exact, whatever the umask */
	close(fd);
}

static void assert_msg_contains(const struct lz_err *err, const char *needle)
{
	if (strstr(err->msg, needle) == NULL)
		fail_msg("message '%s' lacks '%s'", err->msg, needle);
}

static void assert_msg_lacks(const struct lz_err *err, const char *needle)
{
	if (strstr(err->msg, needle) != NULL)
		fail_msg("message '%s' contains '%s'", err->msg, needle);
}

static bool can_chown(void)
{
	return geteuid() == 0;
}

/* Runs fn(arg) without privileges: directly as a normal user; as root, in a
 * child that drops to uid/gid 65534 (fn only returns a value). */
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

/* Sentinel for "output untouched on failure". */
static char untouched_marker[] = "untouched";

/* ---- lz_cfgsource_select ------------------------------------------------ */

/* Tree used by the selection table. */
static void select_tree(const struct fx *f)
{
	char p[PATH_MAX], q[PATH_MAX];
	write_file(pj(p, f, "explicit.toml"), "x", 1, 0600);
	mkdir_p(f, "xdg/lazaret");
	write_file(pj(p, f, "xdg/lazaret/config.toml"), "x", 1, 0600);
	mkdir_p(f, "home/.config/lazaret");
	write_file(pj(p, f, "home/.config/lazaret/config.toml"), "x", 1, 0600);
	mkdir_p(f, "emptyhome");
	assert_int_equal(symlink(pj(q, f, "explicit.toml"), pj(p, f, "link.toml")), 0);
	assert_int_equal(symlink("explicit.toml", pj(p, f, "rellink.toml")), 0);
	assert_int_equal(symlink(pj(q, f, "xdg"), pj(p, f, "xdglink")), 0);
}

/* "@" at the start of a table value stands for the fixture directory. */
static const char *expand(const struct fx *f, const char *v, char out[PATH_MAX])
{
	if (v == NULL || v[0] != '@')
		return v;
	int n = snprintf(out, PATH_MAX, "%s%s", f->dir, v + 1);
	assert_true(n > 0 && n < PATH_MAX);
	return out;
}

#define UNSET NULL

struct select_case {
	const char *what;
	const char *home, *xdg_config;
	const char *explicit_path;
	bool with_cwd; /* cwd = fixture directory */
	int want;
	const char *want_path; /* on success */
	const char *want_msg;  /* on failure */
};

static const struct select_case select_cases[] = {
	{ "explicit absolute", "@/home", "@/xdg", "@/explicit.toml", false, 0, "@/explicit.toml", NULL },
	{ "explicit relative joins cwd", "@/home", UNSET, "explicit.toml", true, 0, "@/explicit.toml",
	  NULL },
	{ "explicit relative is normalized", "@/home", UNSET, "./xdg/../explicit.toml", true, 0,
	  "@/explicit.toml", NULL },
	{ "explicit symlink resolved to target", "@/home", UNSET, "@/link.toml", false, 0,
	  "@/explicit.toml", NULL },
	{ "explicit relative symlink resolved", "@/home", UNSET, "rellink.toml", true, 0,
	  "@/explicit.toml", NULL },
	{ "explicit needs no HOME", UNSET, UNSET, "@/explicit.toml", false, 0, "@/explicit.toml",
	  NULL },
	{ "XDG_CONFIG_HOME absolute", "@/home", "@/xdg", NULL, false, 0, "@/xdg/lazaret/config.toml",
	  NULL },
	{ "XDG_CONFIG_HOME through a symlink", "@/home", "@/xdglink", NULL, false, 0,
	  "@/xdg/lazaret/config.toml", NULL },
	{ "XDG_CONFIG_HOME absolute needs no HOME", UNSET, "@/xdg", NULL, false, 0,
	  "@/xdg/lazaret/config.toml", NULL },
	{ "XDG_CONFIG_HOME unset", "@/home", UNSET, NULL, false, 0,
	  "@/home/.config/lazaret/config.toml", NULL },
	{ "XDG_CONFIG_HOME empty", "@/home", "", NULL, false, 0, "@/home/.config/lazaret/config.toml",
	  NULL },
	{ "XDG_CONFIG_HOME relative", "@/home", "xdg", NULL, true, 0,
	  "@/home/.config/lazaret/config.toml", NULL },
	{ "XDG_CONFIG_HOME not normalized", "@/home", "@//xdg", NULL, false, -EINVAL, NULL,
	  "XDG_CONFIG_HOME" },
	{ "HOME unset", UNSET, UNSET, NULL, false, -EINVAL, NULL, "HOME is not set" },
	{ "HOME empty", "", UNSET, NULL, false, -EINVAL, NULL, "HOME is not set" },
	{ "HOME unset, XDG relative", UNSET, "xdg", NULL, true, -EINVAL, NULL, "HOME" },
	{ "HOME relative", "home", UNSET, NULL, true, -EINVAL, NULL, "HOME='home'" },
	{ "HOME with a dot-dot", "@/home/../home", UNSET, NULL, false, -EINVAL, NULL, "HOME=" },
	{ "HOME with a trailing slash", "@/home/", UNSET, NULL, false, -EINVAL, NULL, "HOME=" },
	{ "missing fallback file", "@/emptyhome", UNSET, NULL, false, -ENOENT, NULL,
	  "create it or pass --config" },
	{ "missing XDG file", "@/home", "@/emptyhome", NULL, false, -ENOENT, NULL,
	  "create it or pass --config" },
	{ "missing explicit file", "@/home", UNSET, "@/absent.toml", false, -ENOENT, NULL,
	  "create it or pass --config" },
	{ "explicit empty", "@/home", UNSET, "", true, -EINVAL, NULL, "--config" },
	{ "explicit through a file", "@/home", UNSET, "@/explicit.toml/x", false, -ENOTDIR, NULL,
	  "explicit.toml/x" },
};

static void test_lz_cfgsource_select__table(void **state)
{
	struct fx *f = *state;
	select_tree(f);
	for (size_t i = 0; i < sizeof(select_cases) / sizeof(select_cases[0]); i++) {
		const struct select_case *c = &select_cases[i];
		char home[PATH_MAX], xdg[PATH_MAX], expl[PATH_MAX], want[PATH_MAX];
		struct lz_host_env env = {
			.home = expand(f, c->home, home),
			.xdg_config_home = expand(f, c->xdg_config, xdg),
			/* Never consulted for the configuration file. */
			.xdg_data_home = "/nonexistent-data",
			.xdg_runtime_dir = "/nonexistent-run",
		};
		char *path = untouched_marker;
		struct lz_err err = { 0, "" };
		int r = lz_cfgsource_select(&env, expand(f, c->explicit_path, expl),
					    c->with_cwd ? f->dir : NULL, &path, NULL, &err);
		if (r != c->want)
			fail_msg("%s: got %d (%s), want %d", c->what, r, err.msg, c->want);
		if (r == 0) {
			assert_string_equal(path, expand(f, c->want_path, want));
			free(path);
			continue;
		}
		if (path != untouched_marker)
			fail_msg("%s: output written on failure", c->what);
		assert_int_equal(err.code, -c->want);
		if (strstr(err.msg, c->want_msg) == NULL)
			fail_msg("%s: message '%s' lacks '%s'", c->what, err.msg, c->want_msg);
	}
}

/* The "create it" hint belongs to a missing file only. */
static void test_lz_cfgsource_select__hint_only_for_missing_file(void **state)
{
	struct fx *f = *state;
	select_tree(f);
	char bad[PATH_MAX];
	struct lz_host_env env = { 0 };
	char *path = untouched_marker;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_cfgsource_select(&env, pj(bad, f, "explicit.toml/x"), NULL, &path, NULL, &err),
			 -ENOTDIR);
	assert_msg_lacks(&err, "create it");
	assert_true(path == untouched_marker);
}

/* A relative --config cannot be placed without a working directory. (The
 * code reports this as -ENOMEM "out of memory"; only refusal is pinned.) */
static void test_lz_cfgsource_select__relative_without_cwd_refused(void **state)
{
	struct fx *f = *state;
	select_tree(f);
	struct lz_host_env env = { 0 };
	char *path = untouched_marker;
	struct lz_err err = { 0, "" };
	assert_true(lz_cfgsource_select(&env, "explicit.toml", NULL, &path, NULL, &err) < 0);
	assert_true(path == untouched_marker);
}

/* The returned path is canonical even when the target directory is reached
 * through several symlinks. */
static void test_lz_cfgsource_select__chained_symlinks_resolved(void **state)
{
	struct fx *f = *state;
	select_tree(f);
	char a[PATH_MAX], b[PATH_MAX], want[PATH_MAX];
	assert_int_equal(symlink(pj(b, f, "link.toml"), pj(a, f, "link2.toml")), 0);
	struct lz_host_env env = { 0 };
	char *path = NULL;
	assert_int_equal(lz_cfgsource_select(&env, a, NULL, &path, NULL, NULL), 0);
	assert_string_equal(path, pj(want, f, "explicit.toml"));
	free(path);
}

/* ---- lz_cfgsource_storage_root ------------------------------------------ */

struct root_case {
	const char *what;
	const char *home, *xdg, *data_root;
	int want;
	const char *want_path;
	const char *want_msg;
};

static void run_storage_case(const struct root_case *c)
{
	struct lz_host_env env = {
		.home = c->home,
		.xdg_config_home = "/nonexistent-config",
		.xdg_data_home = c->xdg,
		.xdg_runtime_dir = "/run/user/1000",
	};
	char *path = untouched_marker;
	struct lz_err err = { 0, "" };
	int r = lz_cfgsource_storage_root(&env, c->data_root, &path, &err);
	if (r != c->want)
		fail_msg("%s: got %d (%s), want %d", c->what, r, err.msg, c->want);
	if (r == 0) {
		assert_string_equal(path, c->want_path);
		free(path);
		return;
	}
	if (path != untouched_marker)
		fail_msg("%s: output written on failure", c->what);
	if (strstr(err.msg, c->want_msg) == NULL)
		fail_msg("%s: message '%s' lacks '%s'", c->what, err.msg, c->want_msg);
}

static void test_lz_cfgsource_storage_root__data_root_wins(void **state)
{
	(void)state;
	const struct root_case c[] = {
		{ "data_root over XDG", "/home/u", "/xdg", "/srv/lazaret", 0, "/srv/lazaret", NULL },
		{ "data_root without HOME", NULL, NULL, "/srv/lazaret", 0, "/srv/lazaret", NULL },
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		run_storage_case(&c[i]);
}

static void test_lz_cfgsource_storage_root__xdg_data_home_absolute(void **state)
{
	(void)state;
	const struct root_case c[] = {
		{ "XDG absolute", "/home/u", "/data/x", NULL, 0, "/data/x/lazaret", NULL },
		{ "XDG absolute without HOME", NULL, "/data/x", NULL, 0, "/data/x/lazaret", NULL },
		{ "XDG is /", "/home/u", "/", NULL, 0, "/lazaret", NULL },
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		run_storage_case(&c[i]);
}

static void test_lz_cfgsource_storage_root__xdg_unusable_falls_back_to_home(void **state)
{
	(void)state;
	const struct root_case c[] = {
		{ "XDG unset", "/home/u", NULL, NULL, 0, "/home/u/.local/share/lazaret", NULL },
		{ "XDG empty", "/home/u", "", NULL, 0, "/home/u/.local/share/lazaret", NULL },
		{ "XDG relative", "/home/u", "data", NULL, 0, "/home/u/.local/share/lazaret", NULL },
		{ "XDG dot-relative", "/home/u", "./data", NULL, 0, "/home/u/.local/share/lazaret",
		  NULL },
		{ "HOME is /", "/", NULL, NULL, 0, "/.local/share/lazaret", NULL },
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		run_storage_case(&c[i]);
}

static void test_lz_cfgsource_storage_root__home_invalid_refused(void **state)
{
	(void)state;
	const struct root_case c[] = {
		{ "HOME unset", NULL, NULL, NULL, -EINVAL, NULL, "HOME is not set" },
		{ "HOME empty", "", "", NULL, -EINVAL, NULL, "HOME is not set" },
		{ "HOME relative", "home/u", "rel", NULL, -EINVAL, NULL, "HOME='home/u'" },
		{ "HOME dot-dot", "/home/../u", NULL, NULL, -EINVAL, NULL, "HOME=" },
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		run_storage_case(&c[i]);
}

static void test_lz_cfgsource_storage_root__xdg_not_normalized_refused(void **state)
{
	(void)state;
	const struct root_case c[] = {
		{ "XDG double slash", "/home/u", "/data//x", NULL, -EINVAL, NULL, "XDG_DATA_HOME" },
		{ "XDG trailing slash", "/home/u", "/data/", NULL, -EINVAL, NULL, "XDG_DATA_HOME" },
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		run_storage_case(&c[i]);
}

/* ---- lz_cfgsource_runtime_root ------------------------------------------ */

static int runtime(const char *xdg_runtime, char **path, struct lz_err *err)
{
	struct lz_host_env env = { .home = "/home/u", .xdg_runtime_dir = xdg_runtime };
	return lz_cfgsource_runtime_root(&env, path, err);
}

static void test_lz_cfgsource_runtime_root__absolute(void **state)
{
	(void)state;
	char *path = NULL;
	assert_int_equal(runtime("/run/user/1000", &path, NULL), 0);
	assert_string_equal(path, "/run/user/1000/lazaret");
	free(path);
	assert_int_equal(runtime("/", &path, NULL), 0);
	assert_string_equal(path, "/lazaret");
	free(path);
}

static void test_lz_cfgsource_runtime_root__unset_refused(void **state)
{
	(void)state;
	const char *const values[] = { NULL, "" };
	for (size_t i = 0; i < 2; i++) {
		char *path = untouched_marker;
		struct lz_err err = { 0, "" };
		assert_int_equal(runtime(values[i], &path, &err), -EINVAL);
		assert_msg_contains(&err, "XDG_RUNTIME_DIR is not set");
		assert_true(path == untouched_marker);
	}
}

static void test_lz_cfgsource_runtime_root__relative_refused(void **state)
{
	(void)state;
	char *path = untouched_marker;
	struct lz_err err = { 0, "" };
	assert_int_equal(runtime("run/user/1000", &path, &err), -EINVAL);
	assert_msg_contains(&err, "XDG_RUNTIME_DIR='run/user/1000'");
	assert_msg_contains(&err, "absolute");
	assert_true(path == untouched_marker);
}

static void test_lz_cfgsource_runtime_root__not_normalized_refused(void **state)
{
	(void)state;
	const char *const values[] = { "/run//user", "/run/user/", "/run/../tmp" };
	for (size_t i = 0; i < 3; i++) {
		char *path = untouched_marker;
		struct lz_err err = { 0, "" };
		assert_int_equal(runtime(values[i], &path, &err), -EINVAL);
		assert_msg_contains(&err, "XDG_RUNTIME_DIR");
		assert_true(path == untouched_marker);
	}
}

/* ---- lz_cfgfile_read ---------------------------------------------------- */

static void assert_read_refused(const char *path, int want, const char *msg)
{
	struct lz_cfgfile file = { .bytes = untouched_marker };
	struct lz_err err = { 0, "" };
	int r = lz_cfgfile_read(path, &file, &err);
	if (r != want)
		fail_msg("'%s': got %d (%s), want %d", path, r, err.msg, want);
	assert_int_equal(err.code, -want);
	assert_msg_contains(&err, msg);
	assert_true(file.bytes == untouched_marker);
}

static void read_ok(const char *path, struct lz_cfgfile *file)
{
	struct lz_err err = { 0, "" };
	if (lz_cfgfile_read(path, file, &err) != 0)
		fail_msg("'%s' refused: %s", path, err.msg);
}

static void test_lz_cfgfile_read__mode_0600_exact_bytes(void **state)
{
	struct fx *f = *state;
	static const char content[] = "version = 1\n\0binary\xff\xfe tail";
	char path[PATH_MAX];
	write_file(pj(path, f, "c.toml"), content, sizeof(content) - 1, 0600);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);

	struct lz_cfgfile file = { 0 };
	read_ok(path, &file);
	assert_int_equal(file.size, sizeof(content) - 1);
	assert_memory_equal(file.bytes, content, sizeof(content) - 1);
	assert_int_equal(file.bytes[file.size], '\0');
	assert_int_equal(file.dev, st.st_dev);
	assert_int_equal(file.ino, st.st_ino);
	assert_int_equal(file.ctime_sec, st.st_ctim.tv_sec);
	assert_int_equal(file.ctime_nsec, st.st_ctim.tv_nsec);
	lz_cfgfile_release(&file);
	assert_null(file.bytes);
}

static void test_lz_cfgfile_read__mode_0644_ok(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX];
	write_file(pj(path, f, "c.toml"), "abc", 3, 0644);
	struct lz_cfgfile file = { 0 };
	read_ok(path, &file);
	assert_int_equal(file.size, 3);
	assert_string_equal(file.bytes, "abc");
	lz_cfgfile_release(&file);
}

/* Read-only or owner-only variants are fine too: only g/o write matters. */
static void test_lz_cfgfile_read__other_safe_modes_ok(void **state)
{
	struct fx *f = *state;
	static const mode_t modes[] = { 0400, 0444, 0640, 0755 };
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		char path[PATH_MAX], name[32];
		snprintf(name, sizeof(name), "c%zu.toml", i);
		write_file(pj(path, f, name), "z", 1, modes[i]);
		struct lz_cfgfile file = { 0 };
		read_ok(path, &file);
		lz_cfgfile_release(&file);
	}
}

static void test_lz_cfgfile_read__empty_file_ok(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX];
	write_file(pj(path, f, "c.toml"), "", 0, 0600);
	struct lz_cfgfile file = { 0 };
	read_ok(path, &file);
	assert_int_equal(file.size, 0);
	assert_non_null(file.bytes);
	assert_string_equal(file.bytes, "");
	lz_cfgfile_release(&file);
}

static void test_lz_cfgfile_read__group_writable_refused(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX];
	write_file(pj(path, f, "c.toml"), "abc", 3, 0620);
	assert_read_refused(path, -EPERM, "group or other write");
	assert_read_refused(path, -EPERM, "0620");
}

static void test_lz_cfgfile_read__other_writable_refused(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX], path2[PATH_MAX];
	write_file(pj(path, f, "c.toml"), "abc", 3, 0602);
	assert_read_refused(path, -EPERM, "group or other write");
	write_file(pj(path2, f, "d.toml"), "abc", 3, 0666);
	assert_read_refused(path2, -EPERM, "group or other write");
}

static void test_lz_cfgfile_read__hard_link_refused(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX], other[PATH_MAX];
	write_file(pj(path, f, "c.toml"), "abc", 3, 0600);
	assert_int_equal(link(path, pj(other, f, "alias.toml")), 0);
	assert_read_refused(path, -EPERM, "hard link");
	assert_read_refused(other, -EPERM, "hard link");
	/* Back to one link: accepted again. */
	assert_int_equal(unlink(other), 0);
	struct lz_cfgfile file = { 0 };
	read_ok(path, &file);
	lz_cfgfile_release(&file);
}

/* The reader is handed canonical paths: any symlink is refused, never
 * followed, at the end or on the way. */
static void test_lz_cfgfile_read__symlink_refused(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX], link[PATH_MAX], dir[PATH_MAX], dlink[PATH_MAX], through[PATH_MAX];
	write_file(pj(path, f, "c.toml"), "abc", 3, 0600);
	assert_int_equal(symlink(path, pj(link, f, "link.toml")), 0);
	assert_read_refused(link, -ELOOP, "symlink");

	mkdir_p(f, "real");
	write_file(pj(dir, f, "real/c.toml"), "abc", 3, 0600);
	pj(dir, f, "real");
	assert_int_equal(symlink(dir, pj(dlink, f, "dirlink")), 0);
	assert_read_refused(pj(through, f, "dirlink/c.toml"), -ELOOP, "symlink");
	assert_read_refused(through, -ELOOP, "configuration file: ");
}

static void test_lz_cfgfile_read__directory_refused(void **state)
{
	struct fx *f = *state;
	char dir[PATH_MAX];
	mkdir_p(f, "d.toml");
	assert_read_refused(pj(dir, f, "d.toml"), -EINVAL, "not a regular file");
}

/* Opening a FIFO for reading would block until a writer appears; the type
 * check on the O_PATH descriptor must refuse it first. The alarm turns a
 * hang into a failure. */
static void test_lz_cfgfile_read__fifo_refused_without_blocking(void **state)
{
	struct fx *f = *state;
	char fifo[PATH_MAX];
	assert_int_equal(mkfifo(pj(fifo, f, "fifo.toml"), 0600), 0);
	alarm(10);
	assert_read_refused(fifo, -EINVAL, "not a regular file");
	alarm(0);
}

static void test_lz_cfgfile_read__device_refused(void **state)
{
	(void)state;
	alarm(10);
	assert_read_refused("/dev/null", -EINVAL, "not a regular file");
	assert_read_refused("/dev/zero", -EINVAL, "not a regular file");
	alarm(0);
}

static void test_lz_cfgfile_read__socket_refused(void **state)
{
	struct fx *f = *state;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", f->dir);
	assert_true(n > 0 && (size_t)n < sizeof(sa.sun_path));
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s >= 0);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_read_refused(sa.sun_path, -EINVAL, "not a regular file");
	close(s);
}

static void test_lz_cfgfile_read__size_limit_accepted(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX];
	char *buf = malloc(LZ_CONFIG_MAX_BYTES);
	assert_non_null(buf);
	for (size_t i = 0; i < LZ_CONFIG_MAX_BYTES; i++)
		buf[i] = (char)('a' + i % 26);
	write_file(pj(path, f, "big.toml"), buf, LZ_CONFIG_MAX_BYTES, 0600);
	struct lz_cfgfile file = { 0 };
	read_ok(path, &file);
	assert_int_equal(file.size, LZ_CONFIG_MAX_BYTES);
	assert_memory_equal(file.bytes, buf, LZ_CONFIG_MAX_BYTES);
	assert_int_equal(file.bytes[LZ_CONFIG_MAX_BYTES], '\0');
	lz_cfgfile_release(&file);
	free(buf);
}

static void test_lz_cfgfile_read__over_size_limit_refused(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX];
	char *buf = calloc(1, LZ_CONFIG_MAX_BYTES + 1);
	assert_non_null(buf);
	write_file(pj(path, f, "big.toml"), buf, LZ_CONFIG_MAX_BYTES + 1, 0600);
	free(buf);
	assert_read_refused(path, -EFBIG, "larger than 1048576");
}

static void test_lz_cfgfile_read__other_owner_refused(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX];
	write_file(pj(path, f, "c.toml"), "abc", 3, 0644);
	if (!can_chown())
		skip(); /* needs root to give the file away */
	assert_int_equal(chown(path, NOBODY, NOBODY), 0);
	assert_read_refused(path, -EPERM, "owned by uid 65534");
}

static void test_lz_cfgfile_read__missing_refused(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX];
	assert_read_refused(pj(path, f, "absent.toml"), -ENOENT, "configuration file: ");
	assert_read_refused(path, -ENOENT, "absent.toml");
}

static void test_lz_cfgfile_read__not_canonical_refused(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX], dotted[PATH_MAX];
	write_file(pj(path, f, "c.toml"), "abc", 3, 0600);
	assert_read_refused("c.toml", -EINVAL, "absolute");
	assert_read_refused(pj(dotted, f, "./c.toml"), -EINVAL, "'.' or '..'");
}

struct read_arg {
	const char *path;
};

static int read_and_release(void *arg)
{
	struct lz_cfgfile file = { 0 };
	int r = lz_cfgfile_read(((struct read_arg *)arg)->path, &file, NULL);
	lz_cfgfile_release(&file);
	return r;
}

/* Passes every ownership and mode check yet cannot be read: the reopen
 * through the validated descriptor reports the error. */
static void test_lz_cfgfile_read__unreadable_refused(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX], control[PATH_MAX];
	assert_int_equal(chmod(f->dir, 0755), 0); /* let uid 65534 reach it */
	write_file(pj(path, f, "c.toml"), "abc", 3, 0000);
	/* Control: a readable file in the same place is read by the same
	 * unprivileged caller, so the refusal below is the mode's doing. */
	write_file(pj(control, f, "ok.toml"), "abc", 3, 0644);
	struct read_arg ok = { control };
	assert_int_equal(run_unprivileged(read_and_release, &ok), 0);
	struct read_arg a = { path };
	assert_int_equal(run_unprivileged(read_and_release, &a), -EACCES);
	if (getuid() != 0) {
		assert_read_refused(path, -EACCES, "reopen");
	}
}

static void test_lz_cfgfile_release__idempotent(void **state)
{
	(void)state;
	lz_cfgfile_release(NULL);
	struct lz_cfgfile file = { .bytes = malloc(4) };
	lz_cfgfile_release(&file);
	assert_null(file.bytes);
	lz_cfgfile_release(&file);
}

/* ---- lz_host_env_from_process ------------------------------------------- */

static void test_lz_host_env_from_process__reads_environment(void **state)
{
	(void)state;
	char *saved[4];
	static const char *const names[] = { "HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
					     "XDG_RUNTIME_DIR" };
	for (size_t i = 0; i < 4; i++) {
		const char *v = getenv(names[i]);
		saved[i] = v ? strdup(v) : NULL;
	}
	assert_int_equal(setenv("HOME", "/home/test", 1), 0);
	assert_int_equal(setenv("XDG_CONFIG_HOME", "/cfg", 1), 0);
	assert_int_equal(unsetenv("XDG_DATA_HOME"), 0);
	assert_int_equal(setenv("XDG_RUNTIME_DIR", "", 1), 0);

	struct lz_host_env env;
	lz_host_env_from_process(&env);
	assert_string_equal(env.home, "/home/test");
	assert_string_equal(env.xdg_config_home, "/cfg");
	assert_null(env.xdg_data_home);
	assert_string_equal(env.xdg_runtime_dir, "");

	for (size_t i = 0; i < 4; i++) {
		if (saved[i])
			setenv(names[i], saved[i], 1);
		else
			unsetenv(names[i]);
		free(saved[i]);
	}
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_lz_cfgsource_select__table),
		T(test_lz_cfgsource_select__hint_only_for_missing_file),
		T(test_lz_cfgsource_select__relative_without_cwd_refused),
		T(test_lz_cfgsource_select__chained_symlinks_resolved),
		T(test_lz_cfgsource_storage_root__data_root_wins),
		T(test_lz_cfgsource_storage_root__xdg_data_home_absolute),
		T(test_lz_cfgsource_storage_root__xdg_unusable_falls_back_to_home),
		T(test_lz_cfgsource_storage_root__home_invalid_refused),
		T(test_lz_cfgsource_storage_root__xdg_not_normalized_refused),
		T(test_lz_cfgsource_runtime_root__absolute),
		T(test_lz_cfgsource_runtime_root__unset_refused),
		T(test_lz_cfgsource_runtime_root__relative_refused),
		T(test_lz_cfgsource_runtime_root__not_normalized_refused),
		T(test_lz_cfgfile_read__mode_0600_exact_bytes),
		T(test_lz_cfgfile_read__mode_0644_ok),
		T(test_lz_cfgfile_read__other_safe_modes_ok),
		T(test_lz_cfgfile_read__empty_file_ok),
		T(test_lz_cfgfile_read__group_writable_refused),
		T(test_lz_cfgfile_read__other_writable_refused),
		T(test_lz_cfgfile_read__hard_link_refused),
		T(test_lz_cfgfile_read__symlink_refused),
		T(test_lz_cfgfile_read__directory_refused),
		T(test_lz_cfgfile_read__fifo_refused_without_blocking),
		T(test_lz_cfgfile_read__device_refused),
		T(test_lz_cfgfile_read__socket_refused),
		T(test_lz_cfgfile_read__size_limit_accepted),
		T(test_lz_cfgfile_read__over_size_limit_refused),
		T(test_lz_cfgfile_read__other_owner_refused),
		T(test_lz_cfgfile_read__missing_refused),
		T(test_lz_cfgfile_read__not_canonical_refused),
		T(test_lz_cfgfile_read__unreadable_refused),
		T(test_lz_cfgfile_release__idempotent),
		T(test_lz_host_env_from_process__reads_environment),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
