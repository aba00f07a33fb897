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
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs/tree.h"

/* A removal racing this one: the directory named vanish is removed (with
 * its one file, "f") just after the walk stat'ed it, once. */
static const char *vanish;

int fstatat(int dirfd, const char *name, struct stat *st, int flags)
{
	int r = (int)syscall(SYS_newfstatat, dirfd, name, st, flags);
	if (r == 0 && vanish != NULL && strcmp(name, vanish) == 0) {
		char f[256];
		snprintf(f, sizeof(f), "%s/f", name);
		vanish = NULL;
		if (unlinkat(dirfd, f, 0) < 0 || unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
			abort();
	}
	return r;
}

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

/* rel/d/d/... levels directories deep below rel (made here), each
 * level with a file; the deepest directories get mode, the rest 0755.
 * Walks by descriptor: the path is longer than PATH_MAX. */
static void chain(const char *rel, int levels, mode_t deep_mode, int deep_from)
{
	mk(rel, 0755);
	int fd = openat(basefd, rel, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	for (int i = 0; i < levels; i++) {
		int f = openat(fd, "f", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		assert_true(f >= 0);
		close(f);
		assert_int_equal(mkdirat(fd, "d", 0755), 0);
		int next = openat(fd, "d", O_PATH | O_DIRECTORY | O_CLOEXEC);
		assert_true(next >= 0);
		close(fd);
		fd = next;
	}
	/* modes last, deepest first: a 0500 directory takes no new entry */
	close(fd);
	for (int level = levels; level > deep_from; level--) {
		fd = openat(basefd, rel, O_PATH | O_DIRECTORY | O_CLOEXEC);
		for (int i = 0; i < level - 1 && fd >= 0; i++) {
			int next = openat(fd, "d", O_PATH | O_DIRECTORY | O_CLOEXEC);
			close(fd);
			fd = next;
		}
		assert_true(fd >= 0);
		assert_int_equal(fchmodat(fd, "d", deep_mode, 0), 0);
		close(fd);
	}
}

static void assert_gone(const char *rel)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", base, rel);
	assert_false(exists(p));
}

/* A sandbox nests directories thousands deep (mkdir d; cd d): the tree
 * is removed whole, even where its deep directories are read-only. */
static void test_lz_tree_remove__any_depth(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	chain("deep", 3000, 0755, 3000);
	if (lz_tree_remove(basefd, "deep", &err) < 0)
		fail_msg("remove: %s", err.msg);
	assert_gone("deep");
	chain("ro", 400, 0500, 100);
	if (lz_tree_remove(basefd, "ro", &err) < 0)
		fail_msg("remove: %s", err.msg);
	assert_gone("ro");
}

/* Descriptors are bounded whatever the depth: a tree deeper than the
 * descriptor limit is removed under it. */
static void test_lz_tree_remove__deep_tree_under_a_low_descriptor_limit(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	chain("deep", 1200, 0755, 1200);
	struct rlimit old, low;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = 256;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	int r = lz_tree_remove(basefd, "deep", &err);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	if (r < 0)
		fail_msg("remove: %s", err.msg);
	assert_gone("deep");
}

/* Names the removal moves deep directories to may be taken already (the
 * sandbox chose every name in the tree): another one is used, and what
 * held the name is removed too. */
static void test_lz_tree_remove__taken_names_at_the_top(void **state)
{
	(void)state;
	struct lz_err err = { 0, "" };
	chain("deep", 700, 0755, 700);
	put("deep/.lz-deep-0", "taken");
	mk("deep/.lz-deep-1", 0755);
	put("deep/.lz-deep-1/x", "taken");
	if (lz_tree_remove(basefd, "deep", &err) < 0)
		fail_msg("remove: %s", err.msg);
	assert_gone("deep");
}

static void test_lz_tree_remove__missing_is_success(void **state)
{
	(void)state;
	struct lz_err err;
	assert_int_equal(lz_tree_remove(basefd, "nothing-here", &err), 0);
}

/* Two removals of one tree (two Domains' removals share the parked
 * trees): a directory the other took after this one stat'ed it is gone,
 * which is what was wanted, not a failure that leaves the rest. */
static void test_lz_tree_remove__a_directory_removed_meanwhile_is_done(void **state)
{
	(void)state;
	char p[128];
	snprintf(p, sizeof(p), "%s/top", base);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/top/victim", base);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/top/victim/f", base);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/top/other", base);
	assert_int_equal(mkdir(p, 0700), 0);
	struct lz_err err = { 0, "" };
	vanish = "victim";
	int r = lz_tree_remove(basefd, "top", &err);
	assert_null(vanish); /* the race happened */
	if (r != 0)
		fail_msg("%s", err.msg);
	struct stat st;
	assert_int_equal(fstatat(basefd, "top", &st, AT_SYMLINK_NOFOLLOW), -1);
	assert_int_equal(errno, ENOENT);
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
		cmocka_unit_test_setup_teardown(test_lz_tree_remove__any_depth, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_tree_remove__deep_tree_under_a_low_descriptor_limit, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_tree_remove__taken_names_at_the_top, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_tree_remove__missing_is_success, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_tree_remove__a_directory_removed_meanwhile_is_done, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_tree_remove__bad_names, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
