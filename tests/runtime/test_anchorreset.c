/* State Anchor reset (core/runtime/anchorreset.h, spec 3.9): the run is
 * held to what a plan could name, whoever built its list. The refusals
 * come before anything is touched, so they pass as root and as an
 * ordinary user; the reset that goes through needs the test user's
 * subordinate IDs (its worker removes the layer in a user namespace) and
 * is judged only as far as the environment lets it go elsewhere.
 *
 * Each test gets its own mkdtemp directory D: the Storage Root D/storage,
 * the Domain Root D/domain with anchors for /home and /usr, and a profile
 * that persists only /usr (/home is an anchor an earlier profile left). */
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

#include "lz_test.h"

#include "fs/pathauth.h"
#include "runtime/anchorreset.h"

#define DOMAIN_HEX "5d0c8a1e3b7f4a2c9e6d1b8f0a3c5e7d9b2f4a6c8e0d2b4f6a8c0e2d4b6f8a0c"

struct fx {
	char dir[64];
	struct lz_path storage, domain;
	char *persistent[1];
	struct lz_anchor_reset a;
};

static char *at(const struct fx *f, const char *rel, char *out)
{
	snprintf(out, PATH_MAX, "%s/%s", f->dir, rel);
	return out;
}

static bool exists(const struct fx *f, const char *rel)
{
	char p[PATH_MAX];
	return access(at(f, rel, p), F_OK) == 0;
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char tmpl[] = "/tmp/lz-test-anchorreset-XXXXXX", p[PATH_MAX];
	if (f == NULL || mkdtemp(tmpl) == NULL || realpath(tmpl, f->dir) == NULL)
		return -1;
	static const char *const dirs[] = { "storage", "domain", "domain/anchor", "domain/anchor/home",
					    "domain/anchor/home/upper", "domain/anchor/home/work",
					    "domain/anchor/usr", "domain/anchor/usr/upper", "domain/anchor/usr/work" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (mkdir(at(f, dirs[i], p), 0700) < 0)
			return -1;
	int fd = open(at(f, "domain/anchor/home/upper/notes", p), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	close(fd);
	f->storage = (struct lz_path)LZ_PATH_INIT;
	f->domain = (struct lz_path)LZ_PATH_INIT;
	struct lz_err err = { 0, "" };
	if (lz_path_open(at(f, "storage", p), &f->storage, &err) < 0 ||
	    lz_path_open(at(f, "domain", p), &f->domain, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	f->persistent[0] = "/usr";
	f->a = (struct lz_anchor_reset){ .storage_root = &f->storage, .domain_root = &f->domain,
					 .domain_hex = DOMAIN_HEX, .persistent = f->persistent,
					 .n_persistent = 1 };
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	lz_path_release(&f->storage);
	lz_path_release(&f->domain);
	lz_test_rmtree(f->dir);
	free(f);
	return 0;
}

/* The plan names the anchors it would discard; the run of a list the plan
 * would have refused refuses as well, EINVAL, and touches nothing. */
static void test_lz_anchor_reset_run__refuses_a_directory_the_profile_does_not_persist(void **state)
{
	struct fx *f = *state;
	const char *home[] = { "/home" };
	char **v = NULL;
	size_t k = 0;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_anchor_reset_plan(&f->a, home, 1, &v, &k, &err), -EINVAL);
	err = (struct lz_err){ 0, "" };
	assert_int_equal(lz_anchor_reset_run(&f->a, home, 1, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "/home is not a persistent directory of this profile"));
	assert_non_null(strstr(err.msg, "nothing was reset"));
	assert_true(exists(f, "domain/anchor/home/upper/notes"));
	assert_true(exists(f, "domain/anchor/usr/upper"));
}

/* A foreign anchor goes only with every other: the plan of all. */
static void test_lz_anchor_reset_run__refuses_part_of_every_anchor(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	const char *some[] = { "/home", "/srv" }; /* /srv: no anchor, not persisted */
	assert_int_equal(lz_anchor_reset_run(&f->a, some, 2, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "not of every State Anchor"));
	const char *more[] = { "/home", "/usr", "/srv" };
	err = (struct lz_err){ 0, "" };
	assert_int_equal(lz_anchor_reset_run(&f->a, more, 3, &err), -EINVAL);
	assert_true(exists(f, "domain/anchor/home/upper/notes"));
	assert_true(exists(f, "domain/anchor/usr/upper"));
}

/* The plan names each anchor once, and normalized. */
static void test_lz_anchor_reset_run__refuses_a_list_no_plan_makes(void **state)
{
	struct fx *f = *state;
	struct lz_err err = { 0, "" };
	const char *twice[] = { "/usr", "/usr" };
	assert_int_equal(lz_anchor_reset_run(&f->a, twice, 2, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "/usr is named twice"));
	const char *slash[] = { "/usr/" };
	err = (struct lz_err){ 0, "" };
	assert_int_equal(lz_anchor_reset_run(&f->a, slash, 1, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "/usr/ is not a persistent directory"));
	assert_true(exists(f, "domain/anchor/usr/upper"));
}

/* What the plan of all names, a foreign anchor among them, and what a
 * plan of paths names pass the check: the run goes on to its own steps
 * (the catalog's leases, the ID map, the removal). Where those work (the
 * test user), the anchors are gone; elsewhere the failure is theirs. */
static void test_lz_anchor_reset_run__takes_what_a_plan_names(void **state)
{
	struct fx *f = *state;
	const char *usr[] = { "/usr" };
	char **v = NULL;
	size_t k = 0;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_anchor_reset_plan(&f->a, usr, 1, &v, &k, &err), 0);
	assert_int_equal(k, 1);
	assert_string_equal(v[0], "/usr");
	int r = lz_anchor_reset_run(&f->a, (const char *const *)v, k, &err);
	lz_anchor_reset_free(v, k);
	if (r < 0) {
		assert_int_not_equal(r, -EINVAL);
		assert_null(strstr(err.msg, "persistent directory"));
		assert_true(exists(f, "domain/anchor/usr/upper"));
	} else {
		assert_false(exists(f, "domain/anchor/usr"));
		assert_true(exists(f, "domain/anchor/home/upper/notes"));
	}

	err = (struct lz_err){ 0, "" };
	assert_int_equal(lz_anchor_reset_plan(&f->a, NULL, 0, &v, &k, &err), 0);
	assert_int_equal(k, r < 0 ? 2 : 1);
	assert_string_equal(v[0], "/home");
	r = lz_anchor_reset_run(&f->a, (const char *const *)v, k, &err);
	lz_anchor_reset_free(v, k);
	if (r < 0) {
		assert_int_not_equal(r, -EINVAL);
		assert_null(strstr(err.msg, "persistent directory"));
		assert_true(exists(f, "domain/anchor/home/upper/notes"));
	} else {
		assert_false(exists(f, "domain/anchor/home"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_lz_anchor_reset_run__refuses_a_directory_the_profile_does_not_persist, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_anchor_reset_run__refuses_part_of_every_anchor, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_anchor_reset_run__refuses_a_list_no_plan_makes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_anchor_reset_run__takes_what_a_plan_names, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
