/* IPv4 prefixes of the network policy (spec 3.7, SR-6): strict parsing,
 * host-bit normalization, formatting, masks and the set relations. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "net/netprefix.h"

#define P(a, b, c, d, n) \
	((struct lz_prefix){ (uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (uint32_t)(d), (n) })

static struct lz_prefix parse_ok(const char *text, bool *had)
{
	struct lz_prefix p = { 0xdeadbeef, 99 };
	if (lz_prefix_parse(text, strlen(text), &p, had) != 0)
		fail_msg("'%s' refused", text);
	return p;
}

static void assert_refused(const char *text, size_t len)
{
	struct lz_prefix p = { 0xdeadbeef, 99 };
	bool had = true;
	if (lz_prefix_parse(text, len, &p, &had) != -EINVAL)
		fail_msg("'%.*s' accepted", (int)len, text);
	/* Outputs untouched on failure. */
	assert_int_equal(p.addr, 0xdeadbeef);
	assert_int_equal(p.len, 99);
	assert_true(had);
}

static void test_lz_ipv4_parse__strict(void **state)
{
	(void)state;
	uint32_t a = 7;
	assert_int_equal(lz_ipv4_parse("192.0.2.53", 10, &a), 0);
	assert_int_equal(a, 0xc0000235u);
	static const char *const bad[] = { "", "192.0.2", "192.0.2.053", "192.0.2.256", "0x1.2.3.4",
					   "1.2.3.4/32", "1.2.3.4 ", "255.255.255.2555" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		a = 7;
		if (lz_ipv4_parse(bad[i], strlen(bad[i]), &a) != -EINVAL)
			fail_msg("'%s' accepted", bad[i]);
		assert_int_equal(a, 7);
	}
}

static void test_lz_prefix_parse__valid(void **state)
{
	(void)state;
	bool had = true;
	struct lz_prefix p = parse_ok("10.1.0.0/16", &had);
	assert_int_equal(p.addr, 0x0a010000u);
	assert_int_equal(p.len, 16);
	assert_false(had);

	p = parse_ok("192.0.2.128/25", &had);
	assert_int_equal(p.addr, 0xc0000280u);
	assert_int_equal(p.len, 25);
	assert_false(had);

	p = parse_ok("255.255.255.255/32", &had);
	assert_int_equal(p.addr, 0xffffffffu);
	assert_int_equal(p.len, 32);
	assert_false(had);
}

static void test_lz_prefix_parse__host_bits_normalized_and_flagged(void **state)
{
	(void)state;
	bool had = false;
	struct lz_prefix p = parse_ok("10.1.2.3/16", &had);
	assert_int_equal(p.addr, 0x0a010000u);
	assert_int_equal(p.len, 16);
	assert_true(had);

	had = false;
	p = parse_ok("192.0.2.255/31", &had);
	assert_int_equal(p.addr, 0xc00002feu);
	assert_true(had);
}

static void test_lz_prefix_parse__host_bits_flag_optional(void **state)
{
	(void)state;
	struct lz_prefix p = parse_ok("10.1.2.3/8", NULL);
	assert_int_equal(p.addr, 0x0a000000u);
	assert_int_equal(p.len, 8);
}

static void test_lz_prefix_parse__length_zero(void **state)
{
	(void)state;
	bool had = true;
	struct lz_prefix p = parse_ok("0.0.0.0/0", &had);
	assert_int_equal(p.addr, 0);
	assert_int_equal(p.len, 0);
	assert_false(had);

	/* The whole address is host bits at /0 (no undefined 32-bit shift). */
	p = parse_ok("255.1.2.3/0", &had);
	assert_int_equal(p.addr, 0);
	assert_int_equal(p.len, 0);
	assert_true(had);
}

static void test_lz_prefix_parse__length_32(void **state)
{
	(void)state;
	bool had = true;
	struct lz_prefix p = parse_ok("1.2.3.4/32", &had);
	assert_int_equal(p.addr, 0x01020304u);
	assert_int_equal(p.len, 32);
	assert_false(had);
}

static void test_lz_prefix_parse__leading_zeros_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"010.0.0.0/8", "10.00.0.0/8", "10.0.01.0/24", "10.0.0.01/32", "00.0.0.0/8",
		"10.0.0.0/08", "10.0.0.0/00", "0010.0.0.0/8",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_refused(bad[i], strlen(bad[i]));
}

static void test_lz_prefix_parse__octal_and_hex_spellings_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"0x0a.0.0.0/8", "0xa.0.0.0/8", "10.0x1.0.0/16", "012.1.1.1/8", "0a.0.0.0/8",
		"10.0.0.0/0x8", "167772160/8", "10.1/16",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_refused(bad[i], strlen(bad[i]));
}

static void test_lz_prefix_parse__octet_out_of_range_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"256.0.0.0/8", "10.256.0.0/16", "10.0.999.0/24", "10.0.0.300/32", "1000.0.0.0/8",
		"10.0.0.0/33", "10.0.0.0/320", "10.0.0.0/100",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_refused(bad[i], strlen(bad[i]));
}

static void test_lz_prefix_parse__missing_parts_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"", "10.0.0/8", "10.0.0.0", "10.0.0.0/", "/8", "10..0.0/16", ".10.0.0/8",
		"10.0.0./8", "10.0.0.0.0/8", "10.0.0.0./8",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_refused(bad[i], strlen(bad[i]));
}

static void test_lz_prefix_parse__extra_characters_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"10.0.0.0/8x", "10.0.0.0/8/8", "+10.0.0.0/8", "-1.0.0.0/8", "10.0.0.0/-1",
		"10.0.0.0/+8", "10.0.0.0:80/8", "10.0.0.0\\8",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_refused(bad[i], strlen(bad[i]));
}

static void test_lz_prefix_parse__spaces_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {
		" 10.0.0.0/8", "10.0.0.0/8 ", "10.0.0.0 /8", "10.0.0.0/ 8", "10. 0.0.0/8",
		"10.0.0.0/8\n", "\t10.0.0.0/8",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_refused(bad[i], strlen(bad[i]));
}

/* The length argument bounds the text: bytes past it are not read, and a NUL
 * inside it is just another invalid character. */
static void test_lz_prefix_parse__honours_length(void **state)
{
	(void)state;
	struct lz_prefix p = { 0, 0 };
	bool had = true;
	assert_int_equal(lz_prefix_parse("10.0.0.0/8junk", 10, &p, &had), 0);
	assert_int_equal(p.addr, 0x0a000000u);
	assert_int_equal(p.len, 8);
	assert_false(had);

	/* "10.0.0.0/16" cut to "10.0.0.0/1". */
	assert_int_equal(lz_prefix_parse("10.0.0.0/16", 10, &p, &had), 0);
	assert_int_equal(p.len, 1);
	assert_int_equal(p.addr, 0);
	assert_true(had);

	assert_refused("10.0.0.0/8\0", 11);
	assert_refused("10.0\0.0.0/8", 11);
	assert_refused("10.0.0.0/8", 9);
}

static void test_lz_prefix_format__round_trip(void **state)
{
	(void)state;
	static const char *const texts[] = {
		"0.0.0.0/0", "10.0.0.0/8", "10.137.54.0/23", "192.0.2.128/25",
		"255.255.255.255/32", "1.2.3.4/32", "128.0.0.0/1",
	};
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		char out[LZ_PREFIX_STR_MAX];
		bool had = true;
		struct lz_prefix p = parse_ok(texts[i], &had);
		assert_false(had);
		lz_prefix_format(p, out);
		assert_string_equal(out, texts[i]);
		struct lz_prefix q = parse_ok(out, NULL);
		assert_true(lz_prefix_equal(p, q));
	}
}

static void test_lz_prefix_format__normalized_form(void **state)
{
	(void)state;
	char out[LZ_PREFIX_STR_MAX];
	lz_prefix_format(parse_ok("10.1.2.3/16", NULL), out);
	assert_string_equal(out, "10.1.0.0/16");
	lz_prefix_format(LZ_TOPOLOGY_NET, out);
	assert_string_equal(out, "10.137.54.0/23");
}

/* The longest text and its NUL fit the declared buffer; nothing is written
 * past them. */
static void test_lz_prefix_format__longest_fits(void **state)
{
	(void)state;
	char out[LZ_PREFIX_STR_MAX + 4];
	memset(out, '#', sizeof(out));
	lz_prefix_format(P(255, 255, 255, 255, 32), out);
	assert_string_equal(out, "255.255.255.255/32");
	assert_true(sizeof("255.255.255.255/32") <= LZ_PREFIX_STR_MAX);
	for (size_t i = sizeof("255.255.255.255/32"); i < sizeof(out); i++)
		assert_int_equal(out[i], '#');
}

static void test_lz_prefix_contains__relations(void **state)
{
	(void)state;
	struct lz_prefix n8 = P(10, 0, 0, 0, 8);
	struct lz_prefix n16 = P(10, 1, 0, 0, 16);
	struct lz_prefix other16 = P(11, 1, 0, 0, 16);
	struct lz_prefix all = P(0, 0, 0, 0, 0);
	struct lz_prefix host = P(10, 1, 2, 3, 32);

	assert_true(lz_prefix_contains(n8, n16));
	assert_false(lz_prefix_contains(n16, n8)); /* shorter is never inside longer */
	/* ... even when the addresses agree on the longer prefix's bits. */
	assert_false(lz_prefix_contains(P(10, 0, 0, 0, 16), P(10, 0, 0, 0, 8)));
	assert_false(lz_prefix_contains(P(0, 0, 0, 0, 32), P(0, 0, 0, 0, 0)));
	assert_false(lz_prefix_contains(n8, other16));
	assert_true(lz_prefix_contains(n8, n8));
	assert_true(lz_prefix_contains(all, n8));
	assert_true(lz_prefix_contains(all, host));
	assert_true(lz_prefix_contains(all, all));
	assert_false(lz_prefix_contains(host, all));
	assert_true(lz_prefix_contains(n16, host));
	assert_true(lz_prefix_contains(host, host));
	assert_false(lz_prefix_contains(host, P(10, 1, 2, 4, 32)));
	/* Topology: the /23 spans 10.137.54.0 - 10.137.55.255. */
	assert_true(lz_prefix_contains(LZ_TOPOLOGY_NET, P(10, 137, 55, 255, 32)));
	assert_false(lz_prefix_contains(LZ_TOPOLOGY_NET, P(10, 137, 56, 0, 32)));
	assert_false(lz_prefix_contains(LZ_TOPOLOGY_NET, P(10, 137, 53, 255, 32)));
}

static void test_lz_prefix_intersects__relations(void **state)
{
	(void)state;
	struct lz_prefix a = P(192, 0, 2, 0, 24);
	struct lz_prefix b = P(192, 0, 3, 0, 24); /* adjacent */
	struct lz_prefix wide = P(192, 0, 0, 0, 16);

	assert_false(lz_prefix_intersects(a, b));
	assert_false(lz_prefix_intersects(b, a));
	assert_true(lz_prefix_intersects(a, wide));
	assert_true(lz_prefix_intersects(wide, a));
	assert_true(lz_prefix_intersects(a, a));
	assert_true(lz_prefix_intersects(P(0, 0, 0, 0, 0), a));
	assert_true(lz_prefix_intersects(LZ_TOPOLOGY_NET, P(10, 0, 0, 0, 8)));
	assert_false(lz_prefix_intersects(LZ_TOPOLOGY_NET, P(10, 137, 56, 0, 24)));
}

static void test_lz_prefix_equal__address_and_length(void **state)
{
	(void)state;
	assert_true(lz_prefix_equal(P(10, 0, 0, 0, 8), P(10, 0, 0, 0, 8)));
	assert_false(lz_prefix_equal(P(10, 0, 0, 0, 8), P(10, 0, 0, 0, 16)));
	assert_false(lz_prefix_equal(P(10, 0, 0, 0, 8), P(11, 0, 0, 0, 8)));
	assert_true(lz_prefix_equal(parse_ok("10.9.9.9/8", NULL), parse_ok("10.0.0.0/8", NULL)));
}

static void test_lz_prefix_compare__address_then_length(void **state)
{
	(void)state;
	assert_int_equal(lz_prefix_compare(P(10, 0, 0, 0, 8), P(10, 0, 0, 0, 8)), 0);
	assert_true(lz_prefix_compare(P(10, 0, 0, 0, 8), P(11, 0, 0, 0, 8)) < 0);
	assert_true(lz_prefix_compare(P(11, 0, 0, 0, 8), P(10, 0, 0, 0, 8)) > 0);
	/* Same address: shorter first. */
	assert_true(lz_prefix_compare(P(10, 0, 0, 0, 8), P(10, 0, 0, 0, 16)) < 0);
	assert_true(lz_prefix_compare(P(10, 0, 0, 0, 16), P(10, 0, 0, 0, 8)) > 0);
	/* Address dominates length. */
	assert_true(lz_prefix_compare(P(10, 0, 0, 0, 32), P(10, 0, 0, 1, 0)) < 0);
	/* Unsigned order: 128.0.0.0 sorts after 127.255.255.255. */
	assert_true(lz_prefix_compare(P(128, 0, 0, 0, 1), P(127, 255, 255, 255, 32)) > 0);
	assert_true(lz_prefix_compare(P(0, 0, 0, 0, 0), P(255, 255, 255, 255, 32)) < 0);
}

static void test_lz_ipv4_format__dotted_quad(void **state)
{
	(void)state;
	char out[LZ_IPV4_STR_MAX + 4];
	lz_ipv4_format(0, out);
	assert_string_equal(out, "0.0.0.0");
	lz_ipv4_format(0x0a893602u, out);
	assert_string_equal(out, "10.137.54.2");
	/* Unsigned octets: the top bit is not a sign. */
	lz_ipv4_format(0xe0000001u, out);
	assert_string_equal(out, "224.0.0.1");
	/* The longest text and its NUL fit; nothing is written past them. */
	memset(out, '#', sizeof(out));
	lz_ipv4_format(0xffffffffu, out);
	assert_string_equal(out, "255.255.255.255");
	assert_int_equal(sizeof("255.255.255.255"), LZ_IPV4_STR_MAX);
	for (size_t i = LZ_IPV4_STR_MAX; i < sizeof(out); i++)
		assert_int_equal(out[i], '#');
}

static void test_lz_prefix_mask__every_length(void **state)
{
	(void)state;
	/* 0 has no network bits (no shift by 32). */
	assert_int_equal(lz_prefix_mask(0), 0);
	assert_int_equal(lz_prefix_mask(1), 0x80000000u);
	assert_int_equal(lz_prefix_mask(8), 0xff000000u);
	assert_int_equal(lz_prefix_mask(23), 0xfffffe00u);
	assert_int_equal(lz_prefix_mask(31), 0xfffffffeu);
	assert_int_equal(lz_prefix_mask(32), 0xffffffffu);
	for (uint8_t len = 0; len <= 32; len++) {
		uint32_t m = lz_prefix_mask(len);
		assert_int_equal(__builtin_popcount(m), len);
		/* Contiguous from the top: the complement is all low bits. */
		assert_int_equal(~m & (~m + 1u), 0);
		/* The parser's normalization is this mask. */
		char text[LZ_PREFIX_STR_MAX];
		snprintf(text, sizeof(text), "255.255.255.255/%u", len);
		assert_int_equal(parse_ok(text, NULL).addr, m);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_prefix_parse__valid),
		cmocka_unit_test(test_lz_ipv4_parse__strict),
		cmocka_unit_test(test_lz_prefix_parse__host_bits_normalized_and_flagged),
		cmocka_unit_test(test_lz_prefix_parse__host_bits_flag_optional),
		cmocka_unit_test(test_lz_prefix_parse__length_zero),
		cmocka_unit_test(test_lz_prefix_parse__length_32),
		cmocka_unit_test(test_lz_prefix_parse__leading_zeros_refused),
		cmocka_unit_test(test_lz_prefix_parse__octal_and_hex_spellings_refused),
		cmocka_unit_test(test_lz_prefix_parse__octet_out_of_range_refused),
		cmocka_unit_test(test_lz_prefix_parse__missing_parts_refused),
		cmocka_unit_test(test_lz_prefix_parse__extra_characters_refused),
		cmocka_unit_test(test_lz_prefix_parse__spaces_refused),
		cmocka_unit_test(test_lz_prefix_parse__honours_length),
		cmocka_unit_test(test_lz_prefix_format__round_trip),
		cmocka_unit_test(test_lz_prefix_format__normalized_form),
		cmocka_unit_test(test_lz_prefix_format__longest_fits),
		cmocka_unit_test(test_lz_ipv4_format__dotted_quad),
		cmocka_unit_test(test_lz_prefix_mask__every_length),
		cmocka_unit_test(test_lz_prefix_contains__relations),
		cmocka_unit_test(test_lz_prefix_intersects__relations),
		cmocka_unit_test(test_lz_prefix_equal__address_and_length),
		cmocka_unit_test(test_lz_prefix_compare__address_then_length),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
