/* The qualification scratch workspace (core/fs/scratch.h): created 0700
 * under the cache root and emptied when opened; reads and writes beneath it
 * refuse symlinks, "..", non-regular files and oversized files. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs/scratch.h"
#include "fs/tree.h"

struct fixture {
	char base[64];     /* realpath of the temp dir */
	char cache[PATH_MAX];
	struct lz_path ws;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char tmpl[] = "/tmp/lz-scratch-XXXXXX";
	if (f == NULL || mkdtemp(tmpl) == NULL || realpath(tmpl, f->base) == NULL)
		return -1;
	snprintf(f->cache, sizeof(f->cache), "%s/cache", f->base);
	setenv("XDG_CACHE_HOME", f->cache, 1);
	f->ws = (struct lz_path){ .fd = -1 };
	struct lz_err err = { 0, "" };
	if (lz_scratch_open("ws", &f->ws, &err) < 0) {
		fprintf(stderr, "scratch open: %s\n", err.msg);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	lz_path_release(&f->ws);
	struct lz_err err;
	(void)lz_tree_remove(AT_FDCWD, f->base, &err);
	free(f);
	return 0;
}

static void created_owned_and_private(void **state)
{
	struct fixture *f = *state;
	char want[PATH_MAX + 32];
	struct stat st;
	snprintf(want, sizeof(want), "%s/lazaret/ws", f->cache);
	assert_string_equal(f->ws.canonical, want);
	assert_int_equal(stat(want, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(st.st_uid, geteuid());
}

static void write_read_mkdir(void **state)
{
	struct fixture *f = *state;
	struct lz_err err = { 0, "" };
	char *data = NULL;
	size_t len = 0;
	assert_int_equal(lz_scratch_mkdir(&f->ws, ".git", &err), 0);
	assert_int_equal(lz_scratch_mkdir(&f->ws, ".git/hooks", &err), 0);
	assert_int_equal(lz_scratch_write(&f->ws, ".git/config", "a\0b", 3, &err), 0);
	assert_int_equal(lz_scratch_read(&f->ws, ".git/config", 100, &data, &len, &err), 0);
	assert_int_equal(len, 3);
	assert_memory_equal(data, "a\0b", 3);
	free(data);
	/* A write replaces. */
	assert_int_equal(lz_scratch_write(&f->ws, ".git/config", "new", 3, &err), 0);
	assert_int_equal(lz_scratch_read(&f->ws, ".git/config", 100, &data, &len, &err), 0);
	assert_string_equal(data, "new");
	free(data);
	assert_int_equal(lz_scratch_mkdir(&f->ws, ".git", &err), -EEXIST);
}

static void reopening_empties(void **state)
{
	struct fixture *f = *state;
	struct lz_err err = { 0, "" };
	struct lz_path again = { .fd = -1 };
	char *data = NULL;
	size_t len;
	assert_int_equal(lz_scratch_write(&f->ws, "left-over", "x", 1, &err), 0);
	assert_int_equal(lz_scratch_open("ws", &again, &err), 0);
	assert_int_equal(lz_scratch_read(&again, "left-over", 100, &data, &len, &err), -ENOENT);
	lz_path_release(&again);
}

static void symlinks_are_not_followed(void **state)
{
	struct fixture *f = *state;
	struct lz_err err = { 0, "" };
	char *data = NULL;
	size_t len;
	char outside[PATH_MAX];
	snprintf(outside, sizeof(outside), "%s/outside", f->base);
	assert_int_equal(mkdir(outside, 0700), 0);
	/* What a sandbox can plant: a link to a host file, a linked directory. */
	assert_int_equal(symlinkat("/etc/passwd", f->ws.fd, "passwd"), 0);
	assert_int_equal(symlinkat(outside, f->ws.fd, "dir"), 0);
	assert_int_equal(lz_scratch_read(&f->ws, "passwd", 100000, &data, &len, &err), -ELOOP);
	assert_int_equal(lz_scratch_write(&f->ws, "dir/planted", "x", 1, &err), -ELOOP);
	assert_int_equal(lz_scratch_mkdir(&f->ws, "dir/sub", &err), -ELOOP);
	struct stat st;
	char planted[PATH_MAX + 16];
	snprintf(planted, sizeof(planted), "%s/planted", outside);
	assert_int_equal(stat(planted, &st), -1);
	/* Writing over a link replaces the link, never its target. */
	assert_int_equal(lz_scratch_write(&f->ws, "passwd", "mine", 4, &err), 0);
	assert_int_equal(lstat("/etc/passwd", &st), 0);
	assert_true(st.st_size != 4);
}

static void bad_names_and_files(void **state)
{
	struct fixture *f = *state;
	struct lz_err err = { 0, "" };
	char *data = NULL;
	size_t len;
	const char *bad[] = { "", "/etc/passwd", "..", "../x", "a/../b", "a//b", "a/", "./a" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(lz_scratch_read(&f->ws, bad[i], 10, &data, &len, &err), -EINVAL);
		assert_int_equal(lz_scratch_write(&f->ws, bad[i], "x", 1, &err), -EINVAL);
	}
	struct lz_path p = { .fd = -1 };
	assert_int_equal(lz_scratch_open("a/b", &p, &err), -EINVAL);
	assert_int_equal(lz_scratch_open("..", &p, &err), -EINVAL);
	/* A FIFO: refused without blocking. */
	assert_int_equal(mkfifoat(f->ws.fd, "fifo", 0600), 0);
	assert_int_equal(lz_scratch_read(&f->ws, "fifo", 10, &data, &len, &err), -EINVAL);
	assert_int_equal(mkdirat(f->ws.fd, "d", 0700), 0);
	assert_int_equal(lz_scratch_read(&f->ws, "d", 10, &data, &len, &err), -EINVAL);
	/* Larger than asked for. */
	assert_int_equal(lz_scratch_write(&f->ws, "big", "0123456789", 10, &err), 0);
	assert_int_equal(lz_scratch_read(&f->ws, "big", 9, &data, &len, &err), -EFBIG);
	assert_int_equal(lz_scratch_read(&f->ws, "big", 10, &data, &len, &err), 0);
	free(data);
}

static void needs_a_cache_root(void **state)
{
	(void)state;
	char *xdg = strdup(getenv("XDG_CACHE_HOME"));
	char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
	struct lz_path p = { .fd = -1 };
	struct lz_err err = { 0, "" };
	unsetenv("XDG_CACHE_HOME");
	setenv("HOME", "relative", 1);
	assert_int_equal(lz_scratch_open("ws", &p, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "XDG_CACHE_HOME"));
	setenv("XDG_CACHE_HOME", xdg, 1);
	if (home)
		setenv("HOME", home, 1);
	free(xdg);
	free(home);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(created_owned_and_private, setup, teardown),
		cmocka_unit_test_setup_teardown(write_read_mkdir, setup, teardown),
		cmocka_unit_test_setup_teardown(reopening_empties, setup, teardown),
		cmocka_unit_test_setup_teardown(symlinks_are_not_followed, setup, teardown),
		cmocka_unit_test_setup_teardown(bad_names_and_files, setup, teardown),
		cmocka_unit_test_setup_teardown(needs_a_cache_root, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
