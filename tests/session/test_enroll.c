/* The credential enrollment record (core/session/enroll.h; issue 14):
 * canonical round trip, the 8,192-byte bound (8,193 refused before
 * parsing), and malformed records refused with nothing written. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "crypto/x509ca.h"
#include "session/enroll.h"

static struct lz_enroll sample(const uint8_t *csr, size_t len)
{
	struct lz_enroll e = { .csr = csr, .csr_len = len };
	for (int i = 0; i < 32; i++) {
		e.domain_id[i] = (uint8_t)i;
		e.fingerprint[i] = (uint8_t)(0xff - i);
	}
	return e;
}

static void test_lz_enroll__round_trip(void **state)
{
	(void)state;
	uint8_t csr[300], buf[LZ_ENROLL_MAX];
	for (size_t i = 0; i < sizeof(csr); i++)
		csr[i] = (uint8_t)(i * 13);
	struct lz_enroll e = sample(csr, sizeof(csr)), got;
	size_t len = 0, len2 = 0;
	assert_int_equal(lz_enroll_encode(&e, buf, sizeof(buf), &len), 0);
	assert_int_equal(len, 32 + 32 + 2 + sizeof(csr));
	assert_int_equal(lz_enroll_decode(buf, len, &got), 0);
	assert_memory_equal(got.domain_id, e.domain_id, 32);
	assert_memory_equal(got.fingerprint, e.fingerprint, 32);
	assert_int_equal(got.csr_len, sizeof(csr));
	assert_ptr_equal(got.csr, buf + 66); /* borrowed, not copied */
	uint8_t again[LZ_ENROLL_MAX];
	assert_int_equal(lz_enroll_encode(&got, again, sizeof(again), &len2), 0);
	assert_int_equal(len2, len);
	assert_memory_equal(again, buf, len);
}

static void test_lz_enroll_decode__bounds_and_malformed(void **state)
{
	(void)state;
	static uint8_t big[LZ_ENROLL_MAX + 1];
	struct lz_enroll got = { .csr_len = 77 };
	/* 8,193 bytes: refused whatever they hold. */
	assert_int_equal(lz_enroll_decode(big, sizeof(big), &got), -EMSGSIZE);
	uint8_t csr[10] = { 1 }, buf[LZ_ENROLL_MAX];
	struct lz_enroll e = sample(csr, sizeof(csr));
	size_t len = 0;
	assert_int_equal(lz_enroll_encode(&e, buf, sizeof(buf), &len), 0);
	/* A byte more, a byte less, an empty CSR, an overlong length. */
	buf[len] = 0;
	assert_int_equal(lz_enroll_decode(buf, len + 1, &got), -EBADMSG);
	assert_int_equal(lz_enroll_decode(buf, len - 1, &got), -EBADMSG);
	buf[64] = 0;
	assert_int_equal(lz_enroll_decode(buf, 65, &got), -EBADMSG);
	buf[64] = 0x80 | 10;
	buf[65] = 0x00; /* 10 as a two-byte varint: not canonical */
	assert_int_equal(lz_enroll_decode(buf, len + 1, &got), -EBADMSG);
	assert_int_equal(got.csr_len, 77); /* untouched */
	/* A CSR over LZ_X509_CSR_MAX neither encodes nor decodes. */
	static uint8_t huge[LZ_X509_CSR_MAX + 1];
	e = sample(huge, sizeof(huge));
	assert_int_equal(lz_enroll_encode(&e, buf, sizeof(buf), &len), -EINVAL);
	buf[64] = 0x81;
	buf[65] = 0x40; /* 8,193 */
	assert_int_equal(lz_enroll_decode(buf, 66 + 100, &got), -EBADMSG);
	/* No room: -EMSGSIZE. */
	e = sample(csr, sizeof(csr));
	assert_int_equal(lz_enroll_encode(&e, buf, 70, &len), -EMSGSIZE);
}

static void test_lz_enroll_answer__round_trip_and_refusals(void **state)
{
	(void)state;
	uint8_t cert[200], buf[LZ_X509_CERT_MAX + 64], again[sizeof(buf)];
	for (size_t i = 0; i < sizeof(cert); i++)
		cert[i] = (uint8_t)(i * 7);
	struct lz_enroll_answer a = { .issued = true, .cert = cert, .cert_len = sizeof(cert) }, got;
	size_t len = 0, len2 = 0;
	assert_int_equal(lz_enroll_answer_encode(&a, buf, sizeof(buf), &len), 0);
	assert_int_equal(len, 1 + 2 + sizeof(cert));
	assert_int_equal(lz_enroll_answer_decode(buf, len, &got), 0);
	assert_true(got.issued);
	assert_int_equal(got.cert_len, sizeof(cert));
	assert_memory_equal(got.cert, cert, sizeof(cert));
	/* A refusal. */
	a = (struct lz_enroll_answer){ .code = 1, .message = "replayed", .message_len = 8 };
	assert_int_equal(lz_enroll_answer_encode(&a, buf, sizeof(buf), &len), 0);
	assert_int_equal(lz_enroll_answer_decode(buf, len, &got), 0);
	assert_false(got.issued);
	assert_int_equal(got.code, 1);
	assert_int_equal(got.message_len, 8);
	assert_memory_equal(got.message, "replayed", 8);
	assert_int_equal(lz_enroll_answer_encode(&got, again, sizeof(again), &len2), 0);
	assert_int_equal(len2, len);
	assert_memory_equal(again, buf, len);
	/* Values outside the rules: refused by both sides. */
	struct lz_enroll_answer bad[] = {
		{ .issued = true, .cert = cert, .cert_len = 0 },
		{ .issued = true, .cert = cert, .cert_len = LZ_X509_CERT_MAX + 1 },
		{ .code = 0, .message = "x", .message_len = 1 },
		{ .code = 4096, .message = "x", .message_len = 1 },
		{ .code = 5, .message = "\xff", .message_len = 1 },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(lz_enroll_answer_encode(&bad[i], buf, sizeof(buf), &len), -EINVAL);
	static const uint8_t wire[][8] = { { 2 }, { 0, 0 }, { 1, 0, 0 }, { 1, 0x80, 0x20, 0, 0 }, { 1, 5, 1, 'x', 0 } };
	static const size_t wire_len[] = { 1, 2, 3, 5, 5 };
	for (size_t i = 0; i < 5; i++)
		assert_int_equal(lz_enroll_answer_decode(wire[i], wire_len[i], &got), -EBADMSG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_enroll__round_trip),
		cmocka_unit_test(test_lz_enroll_decode__bounds_and_malformed),
		cmocka_unit_test(test_lz_enroll_answer__round_trip_and_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
