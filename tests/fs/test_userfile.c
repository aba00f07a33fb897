/* Reading a user-named file (core/fs/userfile.h): a regular file up to the
 * bound is read whole; a symbolic link, a FIFO, a directory, a missing or
 * unreadable file and an oversized file are refused with their errno, and
 * the result parameters stay untouched. */
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

#include "fs/userfile.h"
#include "lz_test.h"

struct fixture {
	char dir[64];
	char path[PATH_MAX];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -1;
	strcpy(f->dir, "/tmp/lz-userfile-XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	lz_test_rmtree(f->dir);
	free(f);
	return 0;
}

static const char *at(struct fixture *f, const char *name)
{
	snprintf(f->path, sizeof(f->path), "%s/%s", f->dir, name);
	return f->path;
}

static void put(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

/* Calls lz_userfile_read and checks the result parameters stay untouched
 * on failure. */
static int read_file(const char *path, size_t max, char **ret, size_t *ret_len, struct lz_err *err)
{
	char *sentinel = (char *)"untouched";
	*ret = sentinel;
	*ret_len = 4242;
	int r = lz_userfile_read(path, max, ret, ret_len, err);
	if (r < 0) {
		assert_ptr_equal(*ret, sentinel);
		assert_int_equal(*ret_len, 4242);
	}
	return r;
}

static void test_lz_userfile_read__regular_file(void **state)
{
	struct fixture *f = *state;
	char *buf;
	size_t len;
	struct lz_err err = { 0, "" };
	put(at(f, "r.lua"), "return 1\n", 9);
	assert_int_equal(read_file(f->path, LZ_USERFILE_MAX, &buf, &len, &err), 0);
	assert_int_equal(len, 9);
	assert_string_equal(buf, "return 1\n");
	free(buf);
	put(at(f, "empty.lua"), "", 0);
	assert_int_equal(read_file(f->path, LZ_USERFILE_MAX, &buf, &len, &err), 0);
	assert_int_equal(len, 0);
	assert_string_equal(buf, "");
	free(buf);
}

static void test_lz_userfile_read__symlink_refused(void **state)
{
	struct fixture *f = *state;
	char *buf;
	size_t len;
	char target[PATH_MAX];
	struct lz_err err = { 0, "" };
	put(at(f, "real.lua"), "return 1\n", 9);
	strcpy(target, f->path);
	assert_int_equal(symlink(target, at(f, "link.lua")), 0);
	assert_int_equal(read_file(f->path, LZ_USERFILE_MAX, &buf, &len, &err), -ELOOP);
	assert_non_null(strstr(err.msg, "symbolic link"));
	assert_non_null(strstr(err.msg, "link.lua"));
}

static void test_lz_userfile_read__special_files_refused(void **state)
{
	struct fixture *f = *state;
	char *buf;
	size_t len;
	struct lz_err err = { 0, "" };
	assert_int_equal(mkfifo(at(f, "fifo.lua"), 0600), 0);
	/* Must not block on a FIFO without a writer. */
	assert_int_equal(read_file(f->path, LZ_USERFILE_MAX, &buf, &len, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "not a regular file"));
	assert_int_equal(read_file(f->dir, LZ_USERFILE_MAX, &buf, &len, &err), -EINVAL);
	assert_int_equal(read_file("/dev/null", LZ_USERFILE_MAX, &buf, &len, &err), -EINVAL);
}

static void test_lz_userfile_read__missing_and_unreadable(void **state)
{
	struct fixture *f = *state;
	char *buf;
	size_t len;
	struct lz_err err = { 0, "" };
	assert_int_equal(read_file(at(f, "missing.lua"), LZ_USERFILE_MAX, &buf, &len, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "missing.lua"));
	assert_int_equal(read_file("", LZ_USERFILE_MAX, &buf, &len, &err), -EINVAL);
	put(at(f, "secret.lua"), "return 1\n", 9);
	assert_int_equal(chmod(f->path, 0), 0);
	int r = read_file(f->path, LZ_USERFILE_MAX, &buf, &len, &err);
	if (geteuid() == 0) { /* root reads it anyway (scripts/test.sh runs cmocka as root) */
		assert_int_equal(r, 0);
		free(buf);
	} else {
		assert_int_equal(r, -EACCES);
	}
}

static void test_lz_userfile_read__size_bound(void **state)
{
	struct fixture *f = *state;
	char *buf;
	size_t len;
	struct lz_err err = { 0, "" };
	put(at(f, "ten.lua"), "0123456789", 10);
	assert_int_equal(read_file(f->path, 10, &buf, &len, &err), 0);
	assert_int_equal(len, 10);
	free(buf);
	assert_int_equal(read_file(f->path, 9, &buf, &len, &err), -EFBIG);
	assert_non_null(strstr(err.msg, "larger than 9 bytes"));
	/* max above the hard limit is capped at LZ_USERFILE_MAX. */
	size_t big = LZ_USERFILE_MAX + 1;
	char *data = calloc(1, big);
	assert_non_null(data);
	put(at(f, "big.lua"), data, big);
	free(data);
	assert_int_equal(read_file(f->path, SIZE_MAX, &buf, &len, &err), -EFBIG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lz_userfile_read__regular_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_userfile_read__symlink_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_userfile_read__special_files_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_userfile_read__missing_and_unreadable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_userfile_read__size_bound, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
