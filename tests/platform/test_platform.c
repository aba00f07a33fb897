/* Platform floor (spec 3.3 "Host process identity"): x86-64 Linux >= 6.9.
 * Release parsing, the floor decision on given values, and this host. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/utsname.h>

#include <cmocka.h>

#include "platform/platform.h"

static void assert_msg_contains(const struct lz_err *err, const char *needle)
{
	if (strstr(err->msg, needle) == NULL)
		fail_msg("message '%s' lacks '%s'", err->msg, needle);
}

static void test_lz_kernel_release_parse__distribution_suffix(void **state)
{
	(void)state;
	unsigned major = 0, minor = 0;
	assert_int_equal(lz_kernel_release_parse("6.18.44-fc-v657", &major, &minor), 0);
	assert_int_equal(major, 6);
	assert_int_equal(minor, 18);
}

static void test_lz_kernel_release_parse__major_minor_only(void **state)
{
	(void)state;
	unsigned major = 0, minor = 0;
	assert_int_equal(lz_kernel_release_parse("10.0", &major, &minor), 0);
	assert_int_equal(major, 10);
	assert_int_equal(minor, 0);
	assert_int_equal(lz_kernel_release_parse("6.9-rc1", &major, &minor), 0);
	assert_int_equal(major, 6);
	assert_int_equal(minor, 9);
}

static void test_lz_kernel_release_parse__malformed_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"", "6", "6.", ".9", "a.b", "6.x", "-6.9", " 6.9", "6 .9", "6,9",
		"v6.9", "99999999999.1", "6.99999999999",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		unsigned major = 77, minor = 88;
		if (lz_kernel_release_parse(bad[i], &major, &minor) != -EINVAL)
			fail_msg("'%s' was accepted", bad[i]);
		/* Outputs untouched on failure. */
		assert_int_equal(major, 77);
		assert_int_equal(minor, 88);
	}
}

static void test_lz_platform_check_values__at_or_above_floor(void **state)
{
	(void)state;
	static const char *const ok[] = { "6.9.0", "6.9", "6.10.1", "6.18.44-fc-v657", "7.0",
					  "12.3.4" };
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct lz_err err = { 0, "" };
		if (lz_platform_check_values("x86_64", ok[i], &err) != 0)
			fail_msg("'%s' refused: %s", ok[i], err.msg);
	}
}

static void test_lz_platform_check_values__too_old(void **state)
{
	(void)state;
	static const char *const old[] = { "6.8.12", "6.8", "5.15", "5.99.0", "4.19.0-25-amd64",
					   "0.1" };
	for (size_t i = 0; i < sizeof(old) / sizeof(old[0]); i++) {
		struct lz_err err = { 0, "" };
		assert_int_equal(lz_platform_check_values("x86_64", old[i], &err), -ENOTSUP);
		assert_int_equal(err.code, ENOTSUP);
		assert_msg_contains(&err, "too old");
		assert_msg_contains(&err, old[i]);
		assert_msg_contains(&err, "6.9");
	}
}

static void test_lz_platform_check_values__wrong_architecture(void **state)
{
	(void)state;
	static const char *const arch[] = { "aarch64", "i686", "x86", "x86_64 ", "X86_64", "" };
	for (size_t i = 0; i < sizeof(arch) / sizeof(arch[0]); i++) {
		struct lz_err err = { 0, "" };
		assert_int_equal(lz_platform_check_values(arch[i], "6.18.0", &err), -ENOTSUP);
		assert_msg_contains(&err, "unsupported architecture");
	}
}

static void test_lz_platform_check_values__garbage_release(void **state)
{
	(void)state;
	static const char *const bad[] = { "garbage", "", "6", "latest" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct lz_err err = { 0, "" };
		assert_int_equal(lz_platform_check_values("x86_64", bad[i], &err), -ENOTSUP);
		assert_msg_contains(&err, "cannot parse kernel release");
	}
}

static void test_lz_platform_check_values__null_err_allowed(void **state)
{
	(void)state;
	assert_int_equal(lz_platform_check_values("aarch64", "6.9", NULL), -ENOTSUP);
	assert_int_equal(lz_platform_check_values("x86_64", "6.9", NULL), 0);
}

/* The supported host (x86-64, Linux 6.18) passes; the same verdict as the
 * value check on uname's own strings. */
static void test_lz_platform_check__this_host(void **state)
{
	(void)state;
	struct utsname u;
	struct lz_err err = { 0, "" };
	assert_int_equal(uname(&u), 0);
	int r = lz_platform_check(&err);
	if (r != 0)
		fail_msg("%s %s refused: %s", u.machine, u.release, err.msg);
	assert_int_equal(lz_platform_check_values(u.machine, u.release, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_kernel_release_parse__distribution_suffix),
		cmocka_unit_test(test_lz_kernel_release_parse__major_minor_only),
		cmocka_unit_test(test_lz_kernel_release_parse__malformed_refused),
		cmocka_unit_test(test_lz_platform_check_values__at_or_above_floor),
		cmocka_unit_test(test_lz_platform_check_values__too_old),
		cmocka_unit_test(test_lz_platform_check_values__wrong_architecture),
		cmocka_unit_test(test_lz_platform_check_values__garbage_release),
		cmocka_unit_test(test_lz_platform_check_values__null_err_allowed),
		cmocka_unit_test(test_lz_platform_check__this_host),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
