/* Unit tests for core/image/layerwhiteout.c: the created set of one layer
 * (paths and their ancestors, the bookkeeping budget) and OCI whiteouts
 * applied against it.
 *
 * Whiteout tests build a "lower" tree directly in <base>/root, mark what
 * "this layer" wrote, apply one whiteout and check what is left. A file
 * <base>/outside/secret, the target of planted symlinks, must survive. */
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
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "image/layerwhiteout.h"
#include "lz_test.h"

/* ---- the created set ----------------------------------------------------- */

static void test_lz_layerwhiteout_is_marker(void **state)
{
	(void)state;
	assert_true(lz_layerwhiteout_is_marker(".wh.x"));
	assert_true(lz_layerwhiteout_is_marker(".wh..wh..opq"));
	assert_true(lz_layerwhiteout_is_marker(".wh."));
	assert_false(lz_layerwhiteout_is_marker(".wh"));
	assert_false(lz_layerwhiteout_is_marker("x.wh.y"));
	assert_false(lz_layerwhiteout_is_marker(""));
}

static void test_lz_layerwhiteout_mark__adds_ancestors(void **state)
{
	(void)state;
	struct lz_layerwhiteout w = { 0 };
	struct lz_err err;
	uint64_t tracked = 0;
	assert_false(lz_layerwhiteout_wrote(&w, "a", 1)); /* empty set */
	assert_int_equal(lz_layerwhiteout_mark(&w, "a/b/c", 5, &tracked, &err), 0);
	assert_int_equal(w.created.n, 3);
	assert_true(lz_layerwhiteout_wrote(&w, "a", 1));
	assert_true(lz_layerwhiteout_wrote(&w, "a/b", 3));
	assert_true(lz_layerwhiteout_wrote(&w, "a/b/c", 5));
	assert_false(lz_layerwhiteout_wrote(&w, "a/b/d", 5));
	assert_false(lz_layerwhiteout_wrote(&w, "a/bc", 4));
	assert_false(lz_layerwhiteout_wrote(&w, "", 0));
	/* Only len bytes of path count. */
	assert_true(lz_layerwhiteout_wrote(&w, "a/b/c/d", 3));
	assert_int_equal(tracked, (5 + 1 + 2 * sizeof(char *)) + (3 + 1 + 2 * sizeof(char *)) +
					  (1 + 1 + 2 * sizeof(char *)));

	/* A sibling adds itself only: its ancestors are present, and are not
	 * charged again; nor is a path marked twice. */
	uint64_t before = tracked;
	assert_int_equal(lz_layerwhiteout_mark(&w, "a/b/d", 5, &tracked, &err), 0);
	assert_int_equal(w.created.n, 4);
	assert_int_equal(tracked - before, 5 + 1 + 2 * sizeof(char *));
	assert_int_equal(lz_layerwhiteout_mark(&w, "a/b/d", 5, &tracked, &err), 0);
	assert_int_equal(tracked - before, 5 + 1 + 2 * sizeof(char *));
	/* The root ("") is never marked. */
	assert_int_equal(lz_layerwhiteout_mark(&w, "", 0, &tracked, &err), 0);
	assert_int_equal(w.created.n, 4);

	lz_layerwhiteout_done(&w);
	assert_null(w.created.slot);
	assert_int_equal(w.created.cap, 0);
	assert_int_equal(w.created.n, 0);
	lz_layerwhiteout_done(&w); /* idempotent */
}

static void test_lz_layerwhiteout_mark__grows(void **state)
{
	(void)state;
	struct lz_layerwhiteout w = { 0 };
	struct lz_err err;
	uint64_t tracked = 0;
	char p[32];
	for (int i = 0; i < 5000; i++) {
		int n = snprintf(p, sizeof(p), "d/%d", i);
		assert_int_equal(lz_layerwhiteout_mark(&w, p, (size_t)n, &tracked, &err), 0);
	}
	assert_int_equal(w.created.n, 5001);
	assert_true(w.created.cap >= 2 * w.created.n);
	assert_int_equal(w.created.cap & (w.created.cap - 1), 0); /* power of two */
	for (int i = 0; i < 5000; i++) {
		int n = snprintf(p, sizeof(p), "d/%d", i);
		assert_true(lz_layerwhiteout_wrote(&w, p, (size_t)n));
	}
	assert_false(lz_layerwhiteout_wrote(&w, "d/5000", 6));
	lz_layerwhiteout_done(&w);
}

static void test_lz_layerwhiteout_mark__budget_e2big(void **state)
{
	(void)state;
	struct lz_layerwhiteout w = { 0 };
	struct lz_err err;
	uint64_t tracked = LZ_LAYER_MAX_TRACKED - 5;
	lz_err_clear(&err);
	assert_int_equal(lz_layerwhiteout_mark(&w, "abc", 3, &tracked, &err), -E2BIG);
	assert_int_equal(err.code, E2BIG);
	assert_string_equal(err.msg, "layer entry 'abc': more than 268435456 bytes of paths");
	assert_int_equal(w.created.n, 0);
	lz_layerwhiteout_done(&w);
}

/* SipHash-2-4's reference vector (the paper's appendix A): key 00..0f,
 * message 00..0e. */
static void test_lz_pathset_hash__siphash_2_4(void **state)
{
	(void)state;
	struct lz_pathset set = { .key = { 0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull }, .keyed = true };
	char msg[15];
	for (int i = 0; i < 15; i++)
		msg[i] = (char)i;
	assert_true(lz_pathset_hash(&set, msg, sizeof(msg)) == 0xa129ca6149be45e5ull);
	assert_true(lz_pathset_hash(&set, msg, 0) == 0x726fdb47dd0e0e31ull);
	assert_true(lz_pathset_hash(&set, msg, 8) == 0x93f5f5799a932462ull);
}

#define COLLIDE_STAGES 12 /* 4096 names */
#define COLLIDE_BLOCK 3
#define COLLIDE_LEN (COLLIDE_STAGES * COLLIDE_BLOCK)

static uint64_t fnv1a_step(uint64_t h, char c)
{
	return (h ^ (unsigned char)c) * 0x100000001b3ull;
}

/* Names of COLLIDE_LEN bytes whose FNV-1a hashes (the set's hash before it
 * was keyed) share their low 16 bits, so their slot in any table of up to
 * 65536: the low bits of FNV-1a's state depend only on its low bits, so
 * two 3-byte blocks that agree there from one state agree from then on,
 * and 12 such pairs chain into 4096 names. (A hostile layer chains 17.) */
static void colliding_names(char names[][COLLIDE_LEN + 1])
{
	static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	const uint32_t k = sizeof(alnum) - 1;
	char pair[COLLIDE_STAGES][2][COLLIDE_BLOCK];
	uint64_t h = 0xcbf29ce484222325ull;
	static uint32_t seen[1 << 16];
	for (int stage = 0; stage < COLLIDE_STAGES; stage++) {
		memset(seen, 0, sizeof(seen));
		bool found = false;
		for (uint32_t b = 0; !found && b < k * k * k; b++) {
			char block[COLLIDE_BLOCK] = { alnum[b / (k * k)], alnum[b / k % k], alnum[b % k] };
			uint64_t x = h;
			for (int i = 0; i < COLLIDE_BLOCK; i++)
				x = fnv1a_step(x, block[i]);
			uint32_t *at = &seen[x & 0xffff];
			if (*at == 0) {
				*at = b + 1;
				continue;
			}
			uint32_t a = *at - 1;
			char first[COLLIDE_BLOCK] = { alnum[a / (k * k)], alnum[a / k % k], alnum[a % k] };
			memcpy(pair[stage][0], first, COLLIDE_BLOCK);
			memcpy(pair[stage][1], block, COLLIDE_BLOCK);
			h = x;
			found = true;
		}
		assert_true(found);
	}
	for (unsigned n = 0; n < 1u << COLLIDE_STAGES; n++) {
		for (int stage = 0; stage < COLLIDE_STAGES; stage++)
			memcpy(names[n] + COLLIDE_BLOCK * stage, pair[stage][(n >> stage) & 1], COLLIDE_BLOCK);
		names[n][COLLIDE_LEN] = '\0';
	}
}

/* The longest run of occupied slots (wrapping around): what the probe of
 * a name that hashes into it walks. */
static size_t longest_run(const struct lz_pathset *s)
{
	size_t best = 0, run = 0;
	for (size_t i = 0; i < 2 * s->cap; i++) {
		run = s->slot[i % s->cap] != NULL ? run + 1 : 0;
		if (run > best)
			best = run;
	}
	return best < s->cap ? best : s->cap;
}

/* Names a layer chose to share their unkeyed slot scatter under the key:
 * no probe run holds more than a few of them (all 4096 in one run before,
 * each insertion walking the others). */
static void test_lz_layerwhiteout_mark__chosen_collisions_scatter(void **state)
{
	(void)state;
	static char names[1u << COLLIDE_STAGES][COLLIDE_LEN + 1];
	colliding_names(names);
	uint64_t low = 0;
	for (unsigned n = 0; n < 1u << COLLIDE_STAGES; n++) { /* the generator's claim */
		uint64_t h = 0xcbf29ce484222325ull;
		for (int i = 0; i < COLLIDE_LEN; i++)
			h = fnv1a_step(h, names[n][i]);
		if (n == 0)
			low = h & 0xffff;
		assert_true((h & 0xffff) == low);
		assert_true(n == 0 || strcmp(names[n], names[n - 1]) != 0);
	}
	struct lz_layerwhiteout w = { 0 };
	struct lz_err err;
	uint64_t tracked = 0;
	for (unsigned n = 0; n < 1u << COLLIDE_STAGES; n++)
		assert_int_equal(lz_layerwhiteout_mark(&w, names[n], COLLIDE_LEN, &tracked, &err), 0);
	assert_int_equal(w.created.n, 1u << COLLIDE_STAGES);
	assert_true(w.created.keyed);
	size_t run = longest_run(&w.created);
	if (run >= 64)
		print_error("a probe run of %zu slots of %zu\n", run, w.created.cap);
	assert_true(run < 64);
	for (unsigned n = 0; n < 1u << COLLIDE_STAGES; n++)
		assert_true(lz_layerwhiteout_wrote(&w, names[n], COLLIDE_LEN));

	/* Another set draws another key. */
	struct lz_layerwhiteout v = { 0 };
	assert_int_equal(lz_layerwhiteout_mark(&v, "a", 1, &tracked, &err), 0);
	assert_true(v.created.key[0] != w.created.key[0] || v.created.key[1] != w.created.key[1]);
	lz_layerwhiteout_done(&v);
	lz_layerwhiteout_done(&w);
}

/* ---- whiteouts ----------------------------------------------------------- */

struct fixture {
	char base[64];
	int base_fd;
	struct lz_err err;
	struct lz_layertree t;
	struct lz_layerwhiteout w;
	uint64_t tracked;
	struct lz_layer_report rep;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	strcpy(f->base, "/tmp/lz-test-whiteout-XXXXXX");
	assert_non_null(mkdtemp(f->base));
	f->base_fd = open(f->base, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->base_fd >= 0);
	assert_int_equal(mkdirat(f->base_fd, "root", 0755), 0);
	assert_int_equal(mkdirat(f->base_fd, "outside", 0755), 0);
	int fd =
		openat(f->base_fd, "outside/secret", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
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
	lz_layerwhiteout_done(&f->w);
	close(f->t.root);
	close(f->base_fd);
	lz_test_rmtree(f->base);
	free(f);
	return 0;
}

static void dir(struct fixture *f, const char *rel)
{
	assert_int_equal(mkdirat(f->t.root, rel, 0755), 0);
}

static void file(struct fixture *f, const char *rel)
{
	int fd = openat(f->t.root, rel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
}

/* Creates nothing: records that this layer wrote rel. */
static void mark(struct fixture *f, const char *rel)
{
	assert_int_equal(lz_layerwhiteout_mark(&f->w, rel, strlen(rel), &f->tracked, &f->err), 0);
}

static int whiteout(struct fixture *f, const char *entry)
{
	struct lz_layerpath p;
	assert_int_equal(lz_layerpath_parse(entry, strlen(entry), &p, &f->err), 0);
	assert_true(lz_layerwhiteout_is_marker(p.name));
	return lz_layerwhiteout_apply(&f->w, &f->t, &p, &f->rep, &f->tracked);
}

static bool exists(struct fixture *f, const char *rel)
{
	struct stat st;
	return fstatat(f->t.root, rel, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static void assert_secret(struct fixture *f)
{
	struct stat st;
	assert_int_equal(fstatat(f->base_fd, "outside/secret", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_true(S_ISREG(st.st_mode));
}

static void test_lz_layerwhiteout_apply__removes_lower(void **state)
{
	struct fixture *f = *state;
	file(f, "f");
	dir(f, "d");
	dir(f, "d/sub");
	file(f, "d/sub/x");
	file(f, "d/other");
	assert_int_equal(symlinkat("../outside", f->t.root, "link"), 0);

	assert_int_equal(whiteout(f, ".wh.f"), 0);
	assert_false(exists(f, "f"));
	assert_int_equal(whiteout(f, "d/.wh.sub"), 0);
	assert_false(exists(f, "d/sub"));
	assert_true(exists(f, "d/other"));
	assert_int_equal(whiteout(f, ".wh.link"), 0); /* the link, not its target */
	assert_false(exists(f, "link"));
	assert_secret(f);
	/* Nothing to hide: a missing name or a missing parent. */
	assert_int_equal(whiteout(f, ".wh.none"), 0);
	assert_int_equal(whiteout(f, "nodir/.wh.x"), 0);
	assert_int_equal(whiteout(f, "d/other/.wh.x"), 0); /* parent not a directory */
	assert_true(exists(f, "d/other"));
	assert_int_equal(f->rep.whiteouts, 6);
}

static void test_lz_layerwhiteout_apply__spares_same_layer(void **state)
{
	struct fixture *f = *state;
	/* This layer's file: a whiteout hides lower layers only. */
	file(f, "mine");
	mark(f, "mine");
	assert_int_equal(whiteout(f, ".wh.mine"), 0);
	assert_true(exists(f, "mine"));

	/* A lower directory this layer wrote into: pruned, not removed. */
	dir(f, "d");
	file(f, "d/lower");
	dir(f, "d/sub");
	file(f, "d/sub/lower");
	file(f, "d/sub/new");
	mark(f, "d/sub/new");
	assert_int_equal(whiteout(f, ".wh.d"), 0);
	assert_true(exists(f, "d/sub/new"));
	assert_false(exists(f, "d/lower"));
	assert_false(exists(f, "d/sub/lower"));
	assert_int_equal(f->rep.whiteouts, 2);
}

static void test_lz_layerwhiteout_apply__opaque(void **state)
{
	struct fixture *f = *state;
	dir(f, "o");
	file(f, "o/a");
	dir(f, "o/b");
	file(f, "o/b/x");
	file(f, "o/c");
	mark(f, "o/c");
	file(f, "keep");
	assert_int_equal(whiteout(f, "o/.wh..wh..opq"), 0);
	assert_true(exists(f, "o"));
	assert_true(exists(f, "o/c"));
	assert_false(exists(f, "o/a"));
	assert_false(exists(f, "o/b"));
	assert_true(exists(f, "keep"));
	assert_int_equal(f->rep.whiteouts, 1);

	/* Opaque at the root prunes the root. */
	assert_int_equal(whiteout(f, ".wh..wh..opq"), 0);
	assert_false(exists(f, "keep"));
	assert_true(exists(f, "o/c"));
	assert_int_equal(f->rep.whiteouts, 2);
}

/* A directory is pruned once per layer: below it only the layer's own
 * entries are left, so a marker repeated there or below walks nothing
 * (hundreds of thousands of markers over one large directory would walk
 * it each time). Seen here through a file no layer entry could have put
 * there after the first prune: the repeated markers leave it. */
static void test_lz_layerwhiteout_apply__a_directory_is_pruned_once(void **state)
{
	struct fixture *f = *state;
	dir(f, "o");
	dir(f, "o/b");
	file(f, "o/a");
	mark(f, "o/b");
	assert_int_equal(whiteout(f, "o/.wh..wh..opq"), 0);
	assert_false(exists(f, "o/a"));
	file(f, "o/late");
	file(f, "o/b/late");
	assert_int_equal(whiteout(f, "o/.wh..wh..opq"), 0);
	assert_int_equal(whiteout(f, "o/b/.wh..wh..opq"), 0);
	assert_int_equal(whiteout(f, "o/.wh.b"), 0); /* written by the layer: pruned, once */
	assert_true(exists(f, "o/late"));
	assert_true(exists(f, "o/b/late"));
	assert_int_equal(f->rep.whiteouts, 4);
	/* another directory is pruned as before */
	dir(f, "p");
	file(f, "p/a");
	assert_int_equal(whiteout(f, "p/.wh..wh..opq"), 0);
	assert_false(exists(f, "p/a"));
}

/* Nested markers listed deepest first: a directory a deeper marker
 * already pruned is not walked again by the prune of one above it (each
 * walk reopened every level from the root: cubic in the depth, a 36 KiB
 * layer took 26 s). Seen through a file planted in the deepest directory
 * after its prune: the markers above leave it. */
static void test_lz_layerwhiteout_apply__nested_markers_walk_each_directory_once(void **state)
{
	struct fixture *f = *state;
	dir(f, "a");
	dir(f, "a/a");
	dir(f, "a/a/a");
	file(f, "a/a/a/low");
	file(f, "a/low");
	mark(f, "a/a/a");
	assert_int_equal(whiteout(f, "a/a/a/.wh..wh..opq"), 0);
	assert_false(exists(f, "a/a/a/low"));
	file(f, "a/a/a/late");
	assert_int_equal(whiteout(f, "a/a/.wh..wh..opq"), 0);
	assert_int_equal(whiteout(f, "a/.wh..wh..opq"), 0);
	assert_true(exists(f, "a/a/a/late"));
	assert_false(exists(f, "a/low")); /* what the layer did not write still goes */
	assert_int_equal(f->rep.whiteouts, 3);
}

static void test_lz_layerwhiteout_apply__aufs_metadata_hides_nothing(void **state)
{
	struct fixture *f = *state;
	file(f, "plnk");
	assert_int_equal(whiteout(f, ".wh..wh.plnk"), 0);
	assert_int_equal(whiteout(f, ".wh..wh..tmp"), 0);
	assert_true(exists(f, "plnk"));
	assert_int_equal(f->rep.whiteouts, 0);
}

static void test_lz_layerwhiteout_apply__refusals(void **state)
{
	struct fixture *f = *state;
	static const char *const empty[] = { ".wh.", ".wh..", ".wh..." };
	for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
		lz_err_clear(&f->err);
		assert_int_equal(whiteout(f, empty[i]), -EINVAL);
		assert_non_null(strstr(f->err.msg, "refused: whiteout names no entry"));
	}
	assert_int_equal(f->rep.whiteouts, 0);

	/* A parent that is a symlink is refused, never followed. */
	assert_int_equal(symlinkat("../outside", f->t.root, "l"), 0);
	lz_err_clear(&f->err);
	assert_int_equal(whiteout(f, "l/.wh.secret"), -EINVAL);
	assert_non_null(strstr(f->err.msg, "is or crosses a symbolic link"));
	assert_int_equal(whiteout(f, "l/.wh..wh..opq"), -EINVAL);
	assert_secret(f);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_layerwhiteout_is_marker),
		cmocka_unit_test(test_lz_layerwhiteout_mark__adds_ancestors),
		cmocka_unit_test(test_lz_layerwhiteout_mark__grows),
		cmocka_unit_test(test_lz_layerwhiteout_mark__budget_e2big),
		cmocka_unit_test(test_lz_pathset_hash__siphash_2_4),
		cmocka_unit_test(test_lz_layerwhiteout_mark__chosen_collisions_scatter),
		T(test_lz_layerwhiteout_apply__removes_lower),
		T(test_lz_layerwhiteout_apply__spares_same_layer),
		T(test_lz_layerwhiteout_apply__opaque),
		T(test_lz_layerwhiteout_apply__a_directory_is_pruned_once),
		T(test_lz_layerwhiteout_apply__nested_markers_walk_each_directory_once),
		T(test_lz_layerwhiteout_apply__aufs_metadata_hides_nothing),
		T(test_lz_layerwhiteout_apply__refusals),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
