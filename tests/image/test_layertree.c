/* Unit tests for core/image/layertree.c, the descriptor-relative primitives
 * layer application writes and removes with beneath the staging root.
 *
 * Each test works in its own mkdtemp directory <base>: <base>/root is the
 * staging root, <base>/outside holds a file "secret" that must survive
 * every operation (symlinks planted in the root point at it). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "image/layertree.h"
#include "lz_test.h"
#include "util/cleanup.h"

/* ---- fixture ------------------------------------------------------------- */

struct fixture {
	char base[64];
	int base_fd;
	struct lz_err err;
	struct lz_layertree t; /* root: O_PATH|O_DIRECTORY of base/root */
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	strcpy(f->base, "/tmp/lz-test-layertree-XXXXXX");
	assert_non_null(mkdtemp(f->base));
	f->base_fd = open(f->base, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->base_fd >= 0);
	assert_int_equal(mkdirat(f->base_fd, "root", 0755), 0);
	assert_int_equal(mkdirat(f->base_fd, "outside", 0755), 0);
	int fd =
		openat(f->base_fd, "outside/secret", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "secret", 6), 6);
	close(fd);
	f->t.root = openat(f->base_fd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->t.root >= 0);
	f->t.err = &f->err;
	lz_err_clear(&f->err);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	close(f->t.root);
	close(f->base_fd);
	lz_test_rmtree(f->base);
	free(f);
	return 0;
}

/* ---- helpers ------------------------------------------------------------- */

static void mkdir_root(struct fixture *f, const char *rel)
{
	assert_int_equal(mkdirat(f->t.root, rel, 0755), 0);
}

static void put(struct fixture *f, const char *rel)
{
	int fd = openat(f->t.root, rel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x", 1), 1);
	close(fd);
}

static bool exists(struct fixture *f, const char *rel)
{
	struct stat st;
	return fstatat(f->t.root, rel, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static mode_t perm(int dirfd, const char *rel)
{
	struct stat st;
	assert_int_equal(fstatat(dirfd, rel, &st, AT_SYMLINK_NOFOLLOW), 0);
	return st.st_mode & 07777;
}

/* outside/secret is intact and alone. */
static void assert_outside_untouched(struct fixture *f)
{
	struct stat st;
	assert_int_equal(fstatat(f->base_fd, "outside/secret", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_size, 6);
	assert_int_equal(st.st_mode & 07777, 0644);
	assert_int_equal(fstatat(f->base_fd, "outside/x", &st, AT_SYMLINK_NOFOLLOW), -1);
}

/* ---- open ---------------------------------------------------------------- */

static void test_lz_layertree_open__root_and_symlink(void **state)
{
	struct fixture *f = *state;
	int fd = lz_layertree_open(&f->t, "", O_RDONLY);
	assert_true(fd >= 0);
	struct stat a, b;
	assert_int_equal(fstat(fd, &a), 0);
	assert_int_equal(fstat(f->t.root, &b), 0);
	assert_int_equal(a.st_ino, b.st_ino);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);

	assert_int_equal(symlinkat("../outside", f->t.root, "l"), 0);
	assert_int_equal(lz_layertree_open(&f->t, "l", O_PATH), -ELOOP);
	put(f, "file");
	assert_int_equal(lz_layertree_open(&f->t, "file", O_PATH), -ENOTDIR);
	assert_int_equal(lz_layertree_open(&f->t, "missing", O_PATH), -ENOENT);
	assert_int_equal(f->err.code, 0); /* no message */
}

static void test_lz_layertree_open_dir__creates_implied_dirs_0755(void **state)
{
	struct fixture *f = *state;
	mode_t old = umask(077);
	int fd = -EBADF;
	int r = lz_layertree_open_dir(&f->t, "a/b/c", true, "a/b/c/f", &fd);
	umask(old);
	assert_int_equal(r, 0);
	assert_true(fd >= 0);
	struct stat st, want;
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(fstatat(f->t.root, "a/b/c", &want, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(st.st_ino, want.st_ino);
	close(fd);
	/* Exact mode despite the umask. */
	assert_int_equal(perm(f->t.root, "a"), 0755);
	assert_int_equal(perm(f->t.root, "a/b"), 0755);
	assert_int_equal(perm(f->t.root, "a/b/c"), 0755);

	/* Existing: opened as is. */
	fd = -EBADF;
	assert_int_equal(lz_layertree_open_dir(&f->t, "a/b", false, "a/b/x", &fd), 0);
	assert_true(fd >= 0);
	close(fd);
}

static void test_lz_layertree_open_dir__quiet_without_create(void **state)
{
	struct fixture *f = *state;
	put(f, "file");
	int fd = -EBADF;
	assert_int_equal(lz_layertree_open_dir(&f->t, "x/y", false, "x/y/z", &fd), -ENOENT);
	assert_int_equal(lz_layertree_open_dir(&f->t, "file/y", false, "file/y/z", &fd), -ENOTDIR);
	assert_int_equal(fd, -EBADF);
	assert_int_equal(f->err.code, 0);
	assert_false(exists(f, "x"));
}

static void test_lz_layertree_open_dir__refuses_symlink_and_file(void **state)
{
	struct fixture *f = *state;
	int fd = -EBADF;
	assert_int_equal(symlinkat("../outside", f->t.root, "l"), 0);
	assert_int_equal(lz_layertree_open_dir(&f->t, "l/x", true, "l/x/f", &fd), -EINVAL);
	assert_int_equal(f->err.code, EINVAL);
	assert_string_equal(f->err.msg,
			    "layer entry 'l/x/f' refused: 'l/x' is or crosses a symbolic link");
	/* Also without create: ELOOP is never quiet. */
	assert_int_equal(lz_layertree_open_dir(&f->t, "l", false, "l/f", &fd), -EINVAL);

	put(f, "file");
	assert_int_equal(lz_layertree_open_dir(&f->t, "file/x", true, "file/x/f", &fd), -EINVAL);
	assert_non_null(strstr(f->err.msg, "'file/x' has a non-directory component"));
	assert_int_equal(fd, -EBADF);
	assert_outside_untouched(f);
}

static void test_lz_layertree_dir_error__messages(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(lz_layertree_dir_error(&f->t, EXDEV, "a/b", "a"), -EINVAL);
	assert_string_equal(f->err.msg, "layer entry 'a/b' refused: 'a' escapes the staging root "
					"or crosses a mount");
	assert_int_equal(lz_layertree_dir_error(&f->t, ENOTDIR, "a", ""), -EINVAL);
	assert_string_equal(f->err.msg,
			    "layer entry 'a' refused: '.' has a non-directory component");
	assert_int_equal(lz_layertree_dir_error(&f->t, EACCES, "a/b", "a"), -EACCES);
	assert_int_equal(f->err.code, EACCES);
	assert_non_null(strstr(f->err.msg, "layer entry 'a/b': open directory 'a': "));
}

/* ---- modes --------------------------------------------------------------- */

static void test_lz_layertree_make_dir__exact_mode(void **state)
{
	struct fixture *f = *state;
	mode_t old = umask(077);
	assert_int_equal(lz_layertree_make_dir(f->t.root, "d", 01777), 0);
	umask(old);
	assert_int_equal(perm(f->t.root, "d"), 01777);
	assert_int_equal(lz_layertree_make_dir(f->t.root, "d", 0755), -EEXIST);
}

static void test_lz_layertree_chmod_nofollow__never_follows(void **state)
{
	struct fixture *f = *state;
	put(f, "file");
	assert_int_equal(lz_layertree_chmod_nofollow(f->t.root, "file", 04711), 0);
	assert_int_equal(perm(f->t.root, "file"), 04711);

	assert_int_equal(symlinkat("../outside/secret", f->t.root, "l"), 0);
	int r = lz_layertree_chmod_nofollow(f->t.root, "l", 0777);
	/* fchmodat2 refuses to change a symlink's mode; the fallback says ELOOP. */
	assert_true(r == -EOPNOTSUPP || r == -ELOOP);
	assert_outside_untouched(f);
	assert_int_equal(lz_layertree_chmod_nofollow(f->t.root, "missing", 0755), -ENOENT);
}

/* ---- removal ------------------------------------------------------------- */

static void test_lz_layertree_remove__recursive_without_following(void **state)
{
	struct fixture *f = *state;
	mkdir_root(f, "d");
	put(f, "d/f");
	mkdir_root(f, "d/sub");
	put(f, "d/sub/g");
	assert_int_equal(symlinkat("../../outside", f->t.root, "d/sub/out"), 0);
	assert_int_equal(symlinkat("/", f->t.root, "d/abs"), 0);
	put(f, "keep");

	char path[LZ_LAYER_PATH_MAX + 1] = "d";
	size_t len = 1;
	assert_int_equal(lz_layertree_remove(&f->t, f->t.root, "d", path, &len, "d"), 0);
	assert_false(exists(f, "d"));
	assert_true(exists(f, "keep"));
	assert_string_equal(path, "d"); /* restored */
	assert_int_equal(len, 1);
	assert_outside_untouched(f);

	/* A missing name is not an error; a symlink is removed as a link. */
	assert_int_equal(lz_layertree_remove(&f->t, f->t.root, "d", path, &len, "d"), 0);
	assert_int_equal(symlinkat("../outside", f->t.root, "l"), 0);
	strcpy(path, "l");
	assert_int_equal(lz_layertree_remove(&f->t, f->t.root, "l", path, &len, "l"), 0);
	assert_false(exists(f, "l"));
	assert_outside_untouched(f);
}

/* Removal holds at most two directory descriptors whatever the depth: a
 * 200-level tree is removed with only a handful of descriptors to spare. */
static void test_lz_layertree_remove__deep_tree_bounded_descriptors(void **state)
{
	struct fixture *f = *state;
	enum { DEPTH = 200 };
	int cur = dup(f->t.root);
	assert_true(cur >= 0);
	for (int i = 0; i < DEPTH; i++) {
		assert_int_equal(mkdirat(cur, "d", 0755), 0);
		int fd = openat(cur, "d", O_PATH | O_DIRECTORY | O_CLOEXEC);
		assert_true(fd >= 0);
		close(cur);
		cur = fd;
	}
	int fd = openat(cur, "leaf", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	close(cur);

	/* The lowest free descriptor number, then room for three more. */
	int probe = dup(0);
	assert_true(probe >= 0);
	close(probe);
	struct rlimit old, low;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = (rlim_t)probe + 3;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);

	char path[LZ_LAYER_PATH_MAX + 1] = "d";
	size_t len = 1;
	int r = lz_layertree_remove(&f->t, f->t.root, "d", path, &len, "d");
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	if (r != 0)
		print_error("%s\n", f->err.msg);
	assert_int_equal(r, 0);
	assert_false(exists(f, "d"));
}

static bool keep_listed(const void *ctx, const char *path, size_t len)
{
	for (const char *const *k = ctx; *k; k++)
		if (strlen(*k) == len && memcmp(*k, path, len) == 0)
			return true;
	return false;
}

static int descend_always(void *ctx, const char *path, size_t len)
{
	(void)ctx, (void)path, (void)len;
	return 1;
}

static void test_lz_layertree_prune__removes_what_keep_rejects(void **state)
{
	struct fixture *f = *state;
	mkdir_root(f, "p");
	put(f, "p/keep_file");
	put(f, "p/drop_file");
	mkdir_root(f, "p/keep_dir");
	put(f, "p/keep_dir/inner_keep");
	put(f, "p/keep_dir/inner_drop");
	mkdir_root(f, "p/drop_dir");
	put(f, "p/drop_dir/x");
	assert_int_equal(symlinkat("../outside", f->t.root, "p/drop_link"), 0);
	put(f, "sibling");
	static const char *const kept[] = { "p/keep_file", "p/keep_dir", "p/keep_dir/inner_keep",
					    NULL };

	char path[LZ_LAYER_PATH_MAX + 1] = "p";
	size_t len = 1;
	assert_int_equal(lz_layertree_prune(&f->t, path, &len, "p/.wh..wh..opq", keep_listed, descend_always, (void *)kept),
			 0);
	assert_string_equal(path, "p");
	assert_int_equal(len, 1);
	assert_true(exists(f, "p"));
	assert_true(exists(f, "p/keep_file"));
	assert_true(exists(f, "p/keep_dir/inner_keep"));
	assert_false(exists(f, "p/drop_file"));
	assert_false(exists(f, "p/keep_dir/inner_drop"));
	assert_false(exists(f, "p/drop_dir"));
	assert_false(exists(f, "p/drop_link"));
	assert_true(exists(f, "sibling"));
	assert_outside_untouched(f);
}

static void test_lz_layertree_prune__missing_file_and_symlink(void **state)
{
	struct fixture *f = *state;
	static const char *const none[] = { NULL };
	char path[LZ_LAYER_PATH_MAX + 1] = "missing";
	size_t len = strlen(path);
	assert_int_equal(lz_layertree_prune(&f->t, path, &len, "e", keep_listed, descend_always, (void *)none), 0);

	put(f, "file");
	strcpy(path, "file");
	len = strlen(path);
	assert_int_equal(lz_layertree_prune(&f->t, path, &len, "e", keep_listed, descend_always, (void *)none), 0);
	assert_true(exists(f, "file"));

	assert_int_equal(symlinkat("../outside", f->t.root, "l"), 0);
	strcpy(path, "l");
	len = 1;
	assert_int_equal(lz_layertree_prune(&f->t, path, &len, "l/.wh..wh..opq", keep_listed, descend_always, (void *)none),
			 -EINVAL);
	assert_non_null(strstr(f->err.msg, "'l' is or crosses a symbolic link"));
	assert_outside_untouched(f);
}

/* ---- make_room ----------------------------------------------------------- */

static void test_lz_layertree_make_room__keeps_dir_or_clears(void **state)
{
	struct fixture *f = *state;
	struct lz_layerpath p;
	struct stat st, want;

	mkdir_root(f, "d");
	put(f, "d/inner");
	assert_int_equal(lz_layerpath_parse("d", 1, &p, &f->err), 0);
	assert_int_equal(lz_layertree_make_room(&f->t, f->t.root, &p, true, &st), 1);
	assert_int_equal(fstatat(f->t.root, "d", &want, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(st.st_ino, want.st_ino);
	assert_true(exists(f, "d/inner"));

	/* Not kept: the directory goes, content and all. */
	assert_int_equal(lz_layertree_make_room(&f->t, f->t.root, &p, false, NULL), 0);
	assert_false(exists(f, "d"));

	/* A symlink is cleared as a link, even when keep_dir and aimed at a
	 * directory. */
	assert_int_equal(symlinkat("../outside", f->t.root, "d"), 0);
	assert_int_equal(lz_layertree_make_room(&f->t, f->t.root, &p, true, NULL), 0);
	assert_false(exists(f, "d"));
	assert_outside_untouched(f);

	/* Nothing there: free already. */
	assert_int_equal(lz_layertree_make_room(&f->t, f->t.root, &p, false, NULL), 0);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_lz_layertree_open__root_and_symlink),
		T(test_lz_layertree_open_dir__creates_implied_dirs_0755),
		T(test_lz_layertree_open_dir__quiet_without_create),
		T(test_lz_layertree_open_dir__refuses_symlink_and_file),
		T(test_lz_layertree_dir_error__messages),
		T(test_lz_layertree_make_dir__exact_mode),
		T(test_lz_layertree_chmod_nofollow__never_follows),
		T(test_lz_layertree_remove__recursive_without_following),
		T(test_lz_layertree_remove__deep_tree_bounded_descriptors),
		T(test_lz_layertree_prune__removes_what_keep_rejects),
		T(test_lz_layertree_prune__missing_file_and_symlink),
		T(test_lz_layertree_make_room__keeps_dir_or_clears),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
