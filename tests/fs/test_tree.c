/* lz_tree_remove: removes trees without following links or leaving its tree. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs/tree.h"

static char base[64];
static int basefd = -1;

static int setup(void **state)
{
	(void)state;
	strcpy(base, "/tmp/lz-tree-XXXXXX");
	if (mkdtemp(base) == NULL)
		return -1;
	basefd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return basefd < 0 ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	struct lz_err err;
	char *slash = strrchr(base, '/');
	int parent = open("/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
	int r = lz_tree_remove(parent, slash + 1, &err);
	close(parent);
	close(basefd);
	return r;
}

static void put(const char *rel, const char *data)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", base, rel);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(data, f);
	fclose(f);
}

static void mk(const char *rel, mode_t mode)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", base, rel);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(chmod(p, mode), 0);
}

static bool exists(const char *abs)
{
	struct stat st;
	return lstat(abs, &st) == 0;
}

static void test_lz_tree_remove__nested_tree_with_readonly_dirs(void **state)
{
	(void)state;
	struct lz_err err;
	mk("t", 0755);
	mk("t/a", 0755);
	mk("t/a/b", 0755);
	put("t/a/b/f", "x");
	put("t/g", "y");
	mk("t/ro", 0700);
	put("t/ro/inner", "z");
	char p[256];
	snprintf(p, sizeof(p), "%s/t/ro", base);
	chmod(p, 0500);
	assert_int_equal(lz_tree_remove(basefd, "t", &err), 0);
	snprintf(p, sizeof(p), "%s/t", base);
	assert_false(exists(p));
}

static void test_lz_tree_remove__many_entries(void **state)
{
	(void)state;
	struct lz_err err;
	char rel[64];
	mk("many", 0755);
	for (int i = 0; i < 2000; i++) {
		snprintf(rel, sizeof(rel), "many/f%04d", i);
		put(rel, "x");
	}
	assert_int_equal(lz_tree_remove(basefd, "many", &err), 0);
	char p[256];
	snprintf(p, sizeof(p), "%s/many", base);
	assert_false(exists(p));
}

static void test_lz_tree_remove__symlink_is_not_followed(void **state)
{
	(void)state;
	struct lz_err err;
	char outside[256], link[256];
	mk("keep", 0755);
	put("keep/precious", "data");
	mk("t", 0755);
	snprintf(outside, sizeof(outside), "%s/keep", base);
	snprintf(link, sizeof(link), "%s/t/link", base);
	assert_int_equal(symlink(outside, link), 0);
	assert_int_equal(lz_tree_remove(basefd, "t", &err), 0);
	snprintf(outside, sizeof(outside), "%s/keep/precious", base);
	assert_true(exists(outside));
}

static void test_lz_tree_remove__top_symlink_removes_only_link(void **state)
{
	(void)state;
	struct lz_err err;
	char target[256], link[256];
	mk("keep", 0755);
	put("keep/precious", "data");
	snprintf(target, sizeof(target), "%s/keep", base);
	snprintf(link, sizeof(link), "%s/l", base);
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(lz_tree_remove(basefd, "l", &err), 0);
	assert_false(exists(link));
	snprintf(target, sizeof(target), "%s/keep/precious", base);
	assert_true(exists(target));
}

static void test_lz_tree_remove__missing_is_success(void **state)
{
	(void)state;
	struct lz_err err;
	assert_int_equal(lz_tree_remove(basefd, "nothing-here", &err), 0);
}

static void test_lz_tree_remove__bad_names(void **state)
{
	(void)state;
	struct lz_err err;
	assert_int_equal(lz_tree_remove(basefd, "", &err), -EINVAL);
	assert_int_equal(lz_tree_remove(basefd, "..", &err), -EINVAL);
	assert_int_equal(lz_tree_remove(basefd, ".", &err), -EINVAL);
	assert_int_equal(lz_tree_remove(basefd, "a/b", &err), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lz_tree_remove__nested_tree_with_readonly_dirs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_tree_remove__many_entries, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_tree_remove__symlink_is_not_followed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_tree_remove__top_symlink_removes_only_link, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_tree_remove__missing_is_success, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_tree_remove__bad_names, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
