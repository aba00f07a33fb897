/* Host names and name patterns of the egress allowlist (spec 3.7):
 * normalization, the refusals, pattern checking, matching, deny wins. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "net/egressname.h"

static void assert_normalized(const char *in, size_t len, const char *want)
{
	char out[LZ_EGRESS_NAME_MAX + 1];
	struct lz_err err = { 0, "" };
	if (lz_egress_name_normalize(in, len, out, &err) != 0)
		fail_msg("'%.*s' refused: %s", (int)len, in, err.msg);
	assert_string_equal(out, want);
}

static void assert_refused(const char *in, size_t len)
{
	char out[LZ_EGRESS_NAME_MAX + 1];
	memset(out, '#', sizeof(out));
	struct lz_err err = { 0, "" };
	if (lz_egress_name_normalize(in, len, out, &err) != -EINVAL)
		fail_msg("'%.*s' accepted", (int)len, in);
	assert_int_equal(err.code, EINVAL);
	assert_true(err.msg[0] != '\0');
	/* out untouched on failure. */
	for (size_t i = 0; i < sizeof(out); i++)
		assert_int_equal(out[i], '#');
}

#define REFUSED(s) assert_refused((s), sizeof(s) - 1)

static void test_lz_egress_name_normalize__valid(void **state)
{
	(void)state;
	assert_normalized("example.com", 11, "example.com");
	assert_normalized("WWW.Example.COM", 15, "www.example.com");
	assert_normalized("a", 1, "a");
	assert_normalized("localhost", 9, "localhost");
	assert_normalized("x-1.y2.z", 8, "x-1.y2.z");
	assert_normalized("123.example.com", 15, "123.example.com");
	assert_normalized("1.2.3.x4", 8, "1.2.3.x4");
	assert_normalized("xn--nxasmq6b.com", 16, "xn--nxasmq6b.com");
	/* The length bounds the input: bytes past it are not read. */
	assert_normalized("example.com junk", 11, "example.com");
}

static void test_lz_egress_name_normalize__one_trailing_dot_stripped(void **state)
{
	(void)state;
	assert_normalized("example.com.", 12, "example.com");
	REFUSED("example.com..");
	REFUSED(".");
	REFUSED("..");
}

static void test_lz_egress_name_normalize__empty_labels_refused(void **state)
{
	(void)state;
	REFUSED("");
	REFUSED(".example.com");
	REFUSED("a..b");
	REFUSED("a..");
}

static void test_lz_egress_name_normalize__bytes_outside_ldh_refused(void **state)
{
	(void)state;
	REFUSED("a_b.com");
	REFUSED("*.example.com");
	REFUSED("a b.com");
	REFUSED("a%2eb.com");
	REFUSED("ex\xc3\xa4mple.com");
	REFUSED("a.com\x80");
	REFUSED("a:80");
	REFUSED("a/b");
	REFUSED("a@b.com");
	REFUSED("[::1]");
	assert_refused("example.com\0evil.com", 20);
	assert_refused("a\0", 2);
	assert_refused("\0", 1);
}

static void test_lz_egress_name_normalize__hyphen_placement(void **state)
{
	(void)state;
	REFUSED("-a.com");
	REFUSED("a-.com");
	REFUSED("a.-com");
	REFUSED("a.com-");
	REFUSED("-");
	assert_normalized("a--b.com", 8, "a--b.com");
}

static void test_lz_egress_name_normalize__numeric_last_label_refused(void **state)
{
	(void)state;
	REFUSED("127.0.0.1");
	REFUSED("10.0.0.1.");
	REFUSED("2130706433");
	REFUSED("0177.0.0.1");
	REFUSED("127.1");
	REFUSED("example.123");
	/* Hex spellings an address parser would accept. */
	REFUSED("0x7f000001");
	REFUSED("0x7f.0.0.0x1");
	REFUSED("1.0X1");
	assert_normalized("0x.com", 6, "0x.com");
	assert_normalized("example.0xg", 11, "example.0xg");
	assert_normalized("example.1a", 10, "example.1a");
}

static void test_lz_egress_name_normalize__length_limits(void **state)
{
	(void)state;
	char label[80], name[300], out[LZ_EGRESS_NAME_MAX + 1];
	memset(label, 'a', sizeof(label));
	assert_normalized(label, 63, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	assert_refused(label, 64);

	/* 4 labels of 63 + 3 dots = 255; trim to 253 with a short last label. */
	size_t n = 0;
	for (int i = 0; i < 3; i++) {
		memset(name + n, 'b', 63);
		n += 63;
		name[n++] = '.';
	}
	memset(name + n, 'c', 61);
	n += 61; /* 253 */
	assert_int_equal(n, LZ_EGRESS_NAME_MAX);
	assert_int_equal(lz_egress_name_normalize(name, n, out, NULL), 0);
	assert_int_equal(strlen(out), LZ_EGRESS_NAME_MAX);
	/* With a trailing dot it is still 253. */
	name[n] = '.';
	assert_int_equal(lz_egress_name_normalize(name, n + 1, out, NULL), 0);
	name[n] = 'c';
	assert_refused(name, n + 1);
}

static void test_lz_egress_pattern_check__valid(void **state)
{
	(void)state;
	assert_int_equal(lz_egress_pattern_check("example.com", NULL), 0);
	assert_int_equal(lz_egress_pattern_check("localhost", NULL), 0);
	assert_int_equal(lz_egress_pattern_check("*.example.com", NULL), 0);
	assert_int_equal(lz_egress_pattern_check("*.a.b.example.co.uk", NULL), 0);
}

static void test_lz_egress_pattern_check__refused(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"", "*", "*.", "*.com", "*foo.com", "a.*.com", "*.*.com", "**.example.com", "Example.com",
		"*.Example.com", "example.com.", "*.example.com.", ".example.com", "1.2.3.4", "*.1.2.3.4",
		"a_b.com", " example.com", "*example.com", "example.*", "*.example..com",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct lz_err err = { 0, "" };
		if (lz_egress_pattern_check(bad[i], &err) != -EINVAL)
			fail_msg("pattern '%s' accepted", bad[i]);
		assert_int_equal(err.code, EINVAL);
		assert_true(err.msg[0] != '\0');
	}
}

static void test_lz_egress_pattern_match__exact_and_wildcard(void **state)
{
	(void)state;
	assert_true(lz_egress_pattern_match("example.com", "example.com"));
	assert_false(lz_egress_pattern_match("example.com", "a.example.com"));
	assert_false(lz_egress_pattern_match("example.com", "example.co"));
	assert_false(lz_egress_pattern_match("example.com", "xexample.com"));

	assert_true(lz_egress_pattern_match("*.example.com", "a.example.com"));
	assert_true(lz_egress_pattern_match("*.example.com", "a.b.example.com"));
	assert_false(lz_egress_pattern_match("*.example.com", "example.com"));
	assert_false(lz_egress_pattern_match("*.example.com", "badexample.com"));
	assert_false(lz_egress_pattern_match("*.example.com", "a.badexample.com"));
	assert_false(lz_egress_pattern_match("*.example.com", "example.com.evil"));
	assert_false(lz_egress_pattern_match("*.example.com", "a.example.com.evil.net"));
	assert_false(lz_egress_pattern_match("*.example.com", ".example.com"));
}

static void test_lz_egress_names_admit__deny_wins(void **state)
{
	(void)state;
	const char *const allow[] = { "*.example.com", "pypi.org" };
	const char *const deny[] = { "evil.example.com", "*.internal.example.com" };

	assert_true(lz_egress_names_admit(allow, 2, deny, 2, "www.example.com"));
	assert_true(lz_egress_names_admit(allow, 2, deny, 2, "pypi.org"));
	assert_false(lz_egress_names_admit(allow, 2, deny, 2, "files.pypi.org"));
	assert_false(lz_egress_names_admit(allow, 2, deny, 2, "example.com"));
	assert_false(lz_egress_names_admit(allow, 2, deny, 2, "evil.example.com"));
	assert_true(lz_egress_names_admit(allow, 2, deny, 2, "a.evil.example.com"));
	assert_false(lz_egress_names_admit(allow, 2, deny, 2, "db.internal.example.com"));
	assert_false(lz_egress_names_admit(allow, 2, deny, 2, "other.org"));
	/* Nothing allowed: nothing admitted. */
	assert_false(lz_egress_names_admit(NULL, 0, NULL, 0, "example.com"));
	assert_true(lz_egress_names_admit(allow, 2, NULL, 0, "evil.example.com"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_egress_name_normalize__valid),
		cmocka_unit_test(test_lz_egress_name_normalize__one_trailing_dot_stripped),
		cmocka_unit_test(test_lz_egress_name_normalize__empty_labels_refused),
		cmocka_unit_test(test_lz_egress_name_normalize__bytes_outside_ldh_refused),
		cmocka_unit_test(test_lz_egress_name_normalize__hyphen_placement),
		cmocka_unit_test(test_lz_egress_name_normalize__numeric_last_label_refused),
		cmocka_unit_test(test_lz_egress_name_normalize__length_limits),
		cmocka_unit_test(test_lz_egress_pattern_check__valid),
		cmocka_unit_test(test_lz_egress_pattern_check__refused),
		cmocka_unit_test(test_lz_egress_pattern_match__exact_and_wildcard),
		cmocka_unit_test(test_lz_egress_names_admit__deny_wins),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
