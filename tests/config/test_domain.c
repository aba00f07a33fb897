/* Domain identity (spec 3.2, FR-1): lz_domain_id against vectors computed
 * independently, its framing and overflow refusal, and lz_hex.
 *
 * The expected digests were produced outside this code base with
 *   python3 -c 'import hashlib, struct; p, w = b"dev", b"/tmp/w";
 *     print(hashlib.sha256(b"lazaret-domain-id-v1" + struct.pack(">I", len(p))
 *       + p + struct.pack(">I", len(w)) + w).hexdigest())'
 * so a change to the context string, the length framing or the byte order
 * fails here rather than silently moving every Domain. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "config/domain.h"

#define VECTOR_DEV "b82f5226039c0213d86a1d5e1f1749dbe19ccd3cd21c21fc941e5b06cf9637bf"
#define VECTOR_EMPTY_PROFILE "5015c3c303575775b89f5d258e8300e881cc578a0271fd582f7e956f584ffa99"
#define VECTOR_DE_VTMPW "4ae5977e271be2c1ec346c5450cb0356012198efc4ce43aad6da1256903e0583"

static void id_hex(const char *profile, size_t plen, const char *ws, size_t wlen,
		   char out[LZ_DOMAIN_ID_HEX_LEN + 1])
{
	uint8_t id[LZ_DOMAIN_ID_LEN];
	assert_int_equal(lz_domain_id(profile, plen, ws, wlen, id), 0);
	lz_hex(id, sizeof(id), out);
}

static void test_lz_domain_id__matches_independent_vector(void **state)
{
	(void)state;
	char hex[LZ_DOMAIN_ID_HEX_LEN + 1];
	id_hex("dev", 3, "/tmp/w", 6, hex);
	assert_string_equal(hex, VECTOR_DEV);
}

static void test_lz_domain_id__empty_profile_matches_vector(void **state)
{
	(void)state;
	char hex[LZ_DOMAIN_ID_HEX_LEN + 1];
	id_hex("", 0, "/tmp/w", 6, hex);
	assert_string_equal(hex, VECTOR_EMPTY_PROFILE);
}

/* The length prefix separates the fields: moving a byte from the profile to
 * the workspace must give another identity. */
static void test_lz_domain_id__framing_separates_fields(void **state)
{
	(void)state;
	char a[LZ_DOMAIN_ID_HEX_LEN + 1], b[LZ_DOMAIN_ID_HEX_LEN + 1];
	id_hex("dev", 3, "/tmp/w", 6, a);
	id_hex("de", 2, "v/tmp/w", 7, b);
	assert_string_equal(b, VECTOR_DE_VTMPW);
	assert_string_not_equal(a, b);
}

/* Only len bytes are hashed, not up to a terminator. */
static void test_lz_domain_id__uses_given_lengths(void **state)
{
	(void)state;
	char hex[LZ_DOMAIN_ID_HEX_LEN + 1];
	id_hex("devXYZ", 3, "/tmp/w/extra", 6, hex);
	assert_string_equal(hex, VECTOR_DEV);
}

static void test_lz_domain_id__deterministic(void **state)
{
	(void)state;
	uint8_t a[LZ_DOMAIN_ID_LEN], b[LZ_DOMAIN_ID_LEN];
	assert_int_equal(lz_domain_id("p", 1, "/w", 2, a), 0);
	assert_int_equal(lz_domain_id("p", 1, "/w", 2, b), 0);
	assert_memory_equal(a, b, sizeof(a));
}

/* A length above 32 bits cannot be framed: -EOVERFLOW, output untouched.
 * The length is checked before any byte is read, so a short buffer is safe. */
static void test_lz_domain_id__profile_length_overflow(void **state)
{
	(void)state;
	uint8_t id[LZ_DOMAIN_ID_LEN];
	uint8_t untouched[LZ_DOMAIN_ID_LEN];
	memset(id, 0xa5, sizeof(id));
	memset(untouched, 0xa5, sizeof(untouched));
	assert_int_equal(lz_domain_id("dev", (size_t)UINT32_MAX + 1, "/tmp/w", 6, id), -EOVERFLOW);
	assert_memory_equal(id, untouched, sizeof(id));
}

static void test_lz_domain_id__workspace_length_overflow(void **state)
{
	(void)state;
	uint8_t id[LZ_DOMAIN_ID_LEN];
	uint8_t untouched[LZ_DOMAIN_ID_LEN];
	memset(id, 0x5a, sizeof(id));
	memset(untouched, 0x5a, sizeof(untouched));
	assert_int_equal(lz_domain_id("dev", 3, "/tmp/w", (size_t)UINT32_MAX + 1, id), -EOVERFLOW);
	assert_memory_equal(id, untouched, sizeof(id));
}

static void test_lz_hex__lowercase_digits(void **state)
{
	(void)state;
	const uint8_t bytes[] = { 0x00, 0x01, 0x7f, 0x80, 0xab, 0xcd, 0xef, 0xff };
	char out[2 * sizeof(bytes) + 1 + 4];
	memset(out, '#', sizeof(out));
	lz_hex(bytes, sizeof(bytes), out);
	assert_string_equal(out, "00017f80abcdefff");
	/* Exactly 2n+1 bytes written. */
	assert_memory_equal(out + 2 * sizeof(bytes) + 1, "####", 4);
}

static void test_lz_hex__empty_input(void **state)
{
	(void)state;
	char out[3] = { '#', '#', '#' };
	lz_hex((const uint8_t *)"", 0, out);
	assert_int_equal(out[0], '\0');
	assert_int_equal(out[1], '#');
}

static void test_lz_unhex__round_trip_and_refusals(void **state)
{
	(void)state;
	uint8_t b[4];
	assert_int_equal(lz_unhex("00ff10Ab", b, 4), 0);
	assert_int_equal(b[0], 0x00);
	assert_int_equal(b[1], 0xff);
	assert_int_equal(b[2], 0x10);
	assert_int_equal(b[3], 0xab);
	char hex[9];
	lz_hex(b, 4, hex);
	assert_string_equal(hex, "00ff10ab");
	assert_int_equal(lz_unhex("00ff10a", b, 4), -EINVAL);   /* short */
	assert_int_equal(lz_unhex("00ff10abc", b, 4), -EINVAL); /* long */
	assert_int_equal(lz_unhex("00fg10ab", b, 4), -EINVAL);  /* not hex */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_unhex__round_trip_and_refusals),
		cmocka_unit_test(test_lz_domain_id__matches_independent_vector),
		cmocka_unit_test(test_lz_domain_id__empty_profile_matches_vector),
		cmocka_unit_test(test_lz_domain_id__framing_separates_fields),
		cmocka_unit_test(test_lz_domain_id__uses_given_lengths),
		cmocka_unit_test(test_lz_domain_id__deterministic),
		cmocka_unit_test(test_lz_domain_id__profile_length_overflow),
		cmocka_unit_test(test_lz_domain_id__workspace_length_overflow),
		cmocka_unit_test(test_lz_hex__lowercase_digits),
		cmocka_unit_test(test_lz_hex__empty_input),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
