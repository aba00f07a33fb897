/* Postcard codec (C-REFINEMENT.md): fixed byte vectors written by hand from
 * the Postcard rules, round trips, and every refusal of the reader and the
 * writer. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/postcard.h"

#define V(...) ((const uint8_t[]){ __VA_ARGS__ }), sizeof((const uint8_t[]){ __VA_ARGS__ })

/* Runs put, then requires exactly want[0..n) in the buffer. */
#define ASSERT_PUT(put, ...)                                                   \
	do {                                                                   \
		uint8_t buf_[32];                                              \
		struct lz_pc_writer w_;                                        \
		lz_pc_writer_init(&w_, buf_, sizeof(buf_));                    \
		assert_int_equal(put, 0);                                      \
		size_t len_ = 0;                                               \
		assert_int_equal(lz_pc_writer_finish(&w_, &len_), 0);          \
		const uint8_t want_[] = { __VA_ARGS__ };                       \
		assert_int_equal(len_, sizeof(want_));                         \
		assert_memory_equal(buf_, want_, sizeof(want_));               \
	} while (0)

static void test_lz_pc_put_u64__fixed_vectors(void **state)
{
	(void)state;
	ASSERT_PUT(lz_pc_put_u64(&w_, 0), 0x00);
	ASSERT_PUT(lz_pc_put_u64(&w_, 1), 0x01);
	ASSERT_PUT(lz_pc_put_u64(&w_, 127), 0x7F);
	ASSERT_PUT(lz_pc_put_u64(&w_, 128), 0x80, 0x01);
	ASSERT_PUT(lz_pc_put_u64(&w_, 300), 0xAC, 0x02);
	ASSERT_PUT(lz_pc_put_u64(&w_, 16383), 0xFF, 0x7F);
	ASSERT_PUT(lz_pc_put_u64(&w_, 16384), 0x80, 0x80, 0x01);
	ASSERT_PUT(lz_pc_put_u64(&w_, 1ull << 32), 0x80, 0x80, 0x80, 0x80, 0x10);
	ASSERT_PUT(lz_pc_put_u64(&w_, UINT64_MAX), 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01);
	ASSERT_PUT(lz_pc_put_u32(&w_, UINT32_MAX), 0xFF, 0xFF, 0xFF, 0xFF, 0x0F);
	ASSERT_PUT(lz_pc_put_u32(&w_, 300), 0xAC, 0x02);
	ASSERT_PUT(lz_pc_put_u16(&w_, UINT16_MAX), 0xFF, 0xFF, 0x03);
	ASSERT_PUT(lz_pc_put_u16(&w_, 80), 0x50);
	ASSERT_PUT(lz_pc_put_discriminant(&w_, 10), 0x0A);
	ASSERT_PUT(lz_pc_put_seq_len(&w_, 4096), 0x80, 0x20);
}

static void test_lz_pc_put_i64__zigzag_vectors(void **state)
{
	(void)state;
	ASSERT_PUT(lz_pc_put_i64(&w_, 0), 0x00);
	ASSERT_PUT(lz_pc_put_i64(&w_, -1), 0x01);
	ASSERT_PUT(lz_pc_put_i64(&w_, 1), 0x02);
	ASSERT_PUT(lz_pc_put_i64(&w_, -2), 0x03);
	ASSERT_PUT(lz_pc_put_i64(&w_, 63), 0x7E);
	ASSERT_PUT(lz_pc_put_i64(&w_, -64), 0x7F);
	ASSERT_PUT(lz_pc_put_i64(&w_, 64), 0x80, 0x01);
	ASSERT_PUT(lz_pc_put_i64(&w_, -150), 0xAB, 0x02);
	ASSERT_PUT(lz_pc_put_i64(&w_, INT64_MAX), 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01);
	ASSERT_PUT(lz_pc_put_i64(&w_, INT64_MIN), 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01);
	ASSERT_PUT(lz_pc_put_i32(&w_, INT32_MIN), 0xFF, 0xFF, 0xFF, 0xFF, 0x0F);
	ASSERT_PUT(lz_pc_put_i32(&w_, INT32_MAX), 0xFE, 0xFF, 0xFF, 0xFF, 0x0F);
	ASSERT_PUT(lz_pc_put_i16(&w_, INT16_MIN), 0xFF, 0xFF, 0x03);
	ASSERT_PUT(lz_pc_put_i16(&w_, INT16_MAX), 0xFE, 0xFF, 0x03);
	ASSERT_PUT(lz_pc_put_i16(&w_, -1), 0x01);
}

static void test_lz_pc_put__bytes_strings_and_small_types(void **state)
{
	(void)state;
	ASSERT_PUT(lz_pc_put_u8(&w_, 0xFF), 0xFF);
	ASSERT_PUT(lz_pc_put_bool(&w_, true), 0x01);
	ASSERT_PUT(lz_pc_put_bool(&w_, false), 0x00);
	ASSERT_PUT(lz_pc_put_option(&w_, true), 0x01);
	ASSERT_PUT(lz_pc_put_option(&w_, false), 0x00);
	ASSERT_PUT(lz_pc_put_bytes(&w_, "hi", 2), 0x02, 0x68, 0x69);
	ASSERT_PUT(lz_pc_put_bytes(&w_, NULL, 0), 0x00);
	ASSERT_PUT(lz_pc_put_str(&w_, "\xC3\xA9", 2), 0x02, 0xC3, 0xA9);
	ASSERT_PUT(lz_pc_put_str(&w_, "", 0), 0x00);
	ASSERT_PUT(lz_pc_put_fixed(&w_, "\x01\x02\x03", 3), 0x01, 0x02, 0x03);
	/* A struct { a: u8, b: Option<u16>, c: bool } is its fields in order. */
	ASSERT_PUT((lz_pc_put_u8(&w_, 7), lz_pc_put_option(&w_, true), lz_pc_put_u16(&w_, 300),
		    lz_pc_put_bool(&w_, true)),
		   0x07, 0x01, 0xAC, 0x02, 0x01);
}

static void test_lz_pc_get__round_trip_unsigned(void **state)
{
	(void)state;
	const uint64_t values[] = { 0, 1, 127, 128, 255, 300, 16383, 16384, 65535, 65536, UINT32_MAX,
				    1ull << 32, (1ull << 63) - 1, 1ull << 63, UINT64_MAX };
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		uint8_t buf[LZ_PC_VARINT_MAX_U64];
		struct lz_pc_writer w;
		lz_pc_writer_init(&w, buf, sizeof(buf));
		assert_int_equal(lz_pc_put_u64(&w, values[i]), 0);
		struct lz_pc_reader r;
		lz_pc_reader_init(&r, buf, w.len);
		uint64_t v64 = 0;
		assert_int_equal(lz_pc_get_u64(&r, &v64), 0);
		assert_true(v64 == values[i]);
		assert_int_equal(lz_pc_reader_end(&r), 0);

		lz_pc_reader_init(&r, buf, w.len);
		uint32_t v32 = 0;
		assert_int_equal(lz_pc_get_u32(&r, &v32), values[i] <= UINT32_MAX ? 0 : -EBADMSG);
		if (values[i] <= UINT32_MAX)
			assert_true(v32 == values[i]);
		else
			assert_int_equal(r.pos, 0);

		lz_pc_reader_init(&r, buf, w.len);
		uint16_t v16 = 0;
		assert_int_equal(lz_pc_get_u16(&r, &v16), values[i] <= UINT16_MAX ? 0 : -EBADMSG);
		if (values[i] <= UINT16_MAX)
			assert_true(v16 == values[i]);
	}
}

static void test_lz_pc_get__round_trip_signed(void **state)
{
	(void)state;
	const int64_t values[] = { 0, -1, 1, -64, 64, INT16_MIN, INT16_MAX, INT32_MIN, INT32_MAX,
				   INT64_MIN, INT64_MAX, -1234567890123ll };
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		uint8_t buf[LZ_PC_VARINT_MAX_U64];
		struct lz_pc_writer w;
		lz_pc_writer_init(&w, buf, sizeof(buf));
		assert_int_equal(lz_pc_put_i64(&w, values[i]), 0);
		struct lz_pc_reader r;
		lz_pc_reader_init(&r, buf, w.len);
		int64_t v64 = 0;
		assert_int_equal(lz_pc_get_i64(&r, &v64), 0);
		assert_true(v64 == values[i]);

		bool fits32 = values[i] >= INT32_MIN && values[i] <= INT32_MAX;
		lz_pc_reader_init(&r, buf, w.len);
		int32_t v32 = 0;
		assert_int_equal(lz_pc_get_i32(&r, &v32), fits32 ? 0 : -EBADMSG);
		if (fits32)
			assert_true(v32 == values[i]);

		bool fits16 = values[i] >= INT16_MIN && values[i] <= INT16_MAX;
		lz_pc_reader_init(&r, buf, w.len);
		int16_t v16 = 0;
		assert_int_equal(lz_pc_get_i16(&r, &v16), fits16 ? 0 : -EBADMSG);
		if (fits16)
			assert_true(v16 == values[i]);
	}
}

static void test_lz_pc_get__fixed_vectors(void **state)
{
	(void)state;
	struct lz_pc_reader r;
	const uint8_t buf[] = { 0xAC, 0x02, 0x01, 0x00, 0x7F, 0x02, 0x68, 0x69, 0x01,
				0x02, 0x03, 0xFF, 0x02, 0xC3, 0xA9, 0x00 };
	lz_pc_reader_init(&r, buf, sizeof(buf));
	uint64_t u;
	assert_int_equal(lz_pc_get_u64(&r, &u), 0);
	assert_true(u == 300);
	bool b;
	assert_int_equal(lz_pc_get_bool(&r, &b), 0);
	assert_true(b);
	assert_int_equal(lz_pc_get_option(&r, &b), 0);
	assert_false(b);
	int64_t i;
	assert_int_equal(lz_pc_get_i64(&r, &i), 0);
	assert_true(i == -64);
	const uint8_t *p;
	size_t n;
	assert_int_equal(lz_pc_get_bytes(&r, 16, &p, &n), 0);
	assert_int_equal(n, 2);
	assert_memory_equal(p, "hi", 2);
	assert_ptr_equal(p, buf + 6);
	uint8_t fixed[3];
	assert_int_equal(lz_pc_get_fixed(&r, fixed, 3), 0);
	assert_memory_equal(fixed, "\x01\x02\x03", 3);
	uint8_t u8;
	assert_int_equal(lz_pc_get_u8(&r, &u8), 0);
	assert_int_equal(u8, 0xFF);
	const char *s;
	assert_int_equal(lz_pc_get_str(&r, 16, &s, &n), 0);
	assert_int_equal(n, 2);
	assert_memory_equal(s, "\xC3\xA9", 2);
	assert_int_equal(lz_pc_reader_end(&r), -EBADMSG);
	assert_int_equal(lz_pc_get_seq_len(&r, 16, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(lz_pc_reader_end(&r), 0);
	/* Past the end nothing reads. */
	assert_int_equal(lz_pc_get_u8(&r, &u8), -EBADMSG);
	assert_int_equal(lz_pc_get_bool(&r, &b), -EBADMSG);
	assert_int_equal(lz_pc_get_u64(&r, &u), -EBADMSG);
	assert_int_equal(lz_pc_get_fixed(&r, fixed, 1), -EBADMSG);
	assert_int_equal(lz_pc_get_fixed(&r, fixed, 0), 0);
}

/* Every varint reader refuses buf and consumes nothing. */
static void assert_varint_refused(const uint8_t *buf, size_t len, unsigned width)
{
	struct lz_pc_reader r;
	lz_pc_reader_init(&r, buf, len);
	uint64_t v64 = 42;
	uint32_t v32 = 42;
	uint16_t v16 = 42;
	int64_t i64 = 42;
	int32_t i32 = 42;
	int16_t i16 = 42;
	if (width >= 64) {
		assert_int_equal(lz_pc_get_u64(&r, &v64), -EBADMSG);
		assert_int_equal(lz_pc_get_i64(&r, &i64), -EBADMSG);
	}
	if (width >= 32) {
		assert_int_equal(lz_pc_get_u32(&r, &v32), -EBADMSG);
		assert_int_equal(lz_pc_get_i32(&r, &i32), -EBADMSG);
		assert_int_equal(lz_pc_get_discriminant(&r, &v32), -EBADMSG);
	}
	assert_int_equal(lz_pc_get_u16(&r, &v16), -EBADMSG);
	assert_int_equal(lz_pc_get_i16(&r, &i16), -EBADMSG);
	assert_int_equal(r.pos, 0);
	assert_true(v64 == 42 && v32 == 42 && v16 == 42 && i64 == 42 && i32 == 42 && i16 == 42);
}

static void test_lz_pc_get_u64__overlong_and_out_of_range(void **state)
{
	(void)state;
	assert_varint_refused(V(0x80, 0x00), 64);             /* 0 in two bytes */
	assert_varint_refused(V(0x81, 0x80, 0x00), 64);       /* 1 in three bytes */
	assert_varint_refused(V(0xAC, 0x82, 0x00), 64);       /* 300 in three bytes */
	assert_varint_refused(V(0x80), 64);                   /* truncated */
	assert_varint_refused(V(0xFF, 0xFF), 64);             /* truncated */
	assert_varint_refused(NULL, 0, 64);                   /* empty */
	/* u64: eleven bytes, or a tenth byte above 1 (bits past 64). */
	assert_varint_refused(V(0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x81, 0x00), 64);
	assert_varint_refused(V(0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01), 64);
	assert_varint_refused(V(0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02), 64);
	assert_varint_refused(V(0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7F), 64);
	/* u32: 2^32 and a sixth byte. */
	assert_varint_refused(V(0x80, 0x80, 0x80, 0x80, 0x10), 32);
	assert_varint_refused(V(0xFF, 0xFF, 0xFF, 0xFF, 0x1F), 32);
	assert_varint_refused(V(0x80, 0x80, 0x80, 0x80, 0x80, 0x01), 32);
	/* u16: 65536 and a fourth byte. */
	assert_varint_refused(V(0x80, 0x80, 0x04), 16);
	assert_varint_refused(V(0xFF, 0xFF, 0x07), 16);
	assert_varint_refused(V(0x80, 0x80, 0x80, 0x01), 16);
}

static void test_lz_pc_get_bool__only_zero_or_one(void **state)
{
	(void)state;
	for (unsigned v = 2; v <= 0xFF; v++) {
		uint8_t byte = (uint8_t)v;
		struct lz_pc_reader r;
		lz_pc_reader_init(&r, &byte, 1);
		bool b = true;
		assert_int_equal(lz_pc_get_bool(&r, &b), -EBADMSG);
		assert_int_equal(lz_pc_get_option(&r, &b), -EBADMSG);
		assert_true(b);
		assert_int_equal(r.pos, 0);
	}
}

static void test_lz_pc_get_bytes__length_limits(void **state)
{
	(void)state;
	struct lz_pc_reader r;
	const uint8_t *p = NULL;
	size_t n = 99;
	/* Length beyond the bytes left. */
	lz_pc_reader_init(&r, V(0x03, 0x61, 0x62));
	assert_int_equal(lz_pc_get_bytes(&r, 16, &p, &n), -EBADMSG);
	assert_int_equal(r.pos, 0);
	/* Length beyond the caller's limit. */
	lz_pc_reader_init(&r, V(0x02, 0x61, 0x62));
	assert_int_equal(lz_pc_get_bytes(&r, 1, &p, &n), -EBADMSG);
	assert_int_equal(lz_pc_get_seq_len(&r, 1, &n), -EBADMSG);
	assert_int_equal(lz_pc_get_bytes(&r, 2, &p, &n), 0);
	/* Overlong length prefix. */
	lz_pc_reader_init(&r, V(0x82, 0x00, 0x61, 0x62));
	assert_int_equal(lz_pc_get_bytes(&r, 16, &p, &n), -EBADMSG);
	/* Huge lengths never wrap the bound check. */
	p = NULL;
	lz_pc_reader_init(&r, V(0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x00));
	assert_int_equal(lz_pc_get_bytes(&r, SIZE_MAX, &p, &n), -EBADMSG);
	assert_int_equal(lz_pc_get_seq_len(&r, SIZE_MAX, &n), -EBADMSG);
	assert_null(p);
	assert_int_equal(n, 2);

	/* LZ_PC_MAX_LEN holds whatever the caller allows, even with the bytes. */
	size_t big = LZ_PC_MAX_LEN + 1 + 3;
	uint8_t *buf = calloc(1, big);
	assert_non_null(buf);
	buf[0] = 0x81; /* 65537 = 0x10001: 0x81 0x80 0x04 */
	buf[1] = 0x80;
	buf[2] = 0x04;
	lz_pc_reader_init(&r, buf, big);
	assert_int_equal(lz_pc_get_bytes(&r, SIZE_MAX, &p, &n), -EBADMSG);
	assert_int_equal(lz_pc_get_seq_len(&r, SIZE_MAX, &n), -EBADMSG);
	buf[0] = 0x80; /* 65536 is allowed */
	lz_pc_reader_init(&r, buf, big - 1);
	assert_int_equal(lz_pc_get_bytes(&r, SIZE_MAX, &p, &n), 0);
	assert_int_equal(n, LZ_PC_MAX_LEN);
	assert_int_equal(lz_pc_reader_end(&r), 0);
	free(buf);
}

static void test_lz_pc_get_seq_len__bounded_by_bytes_left(void **state)
{
	(void)state;
	struct lz_pc_reader r;
	size_t n = 7;
	lz_pc_reader_init(&r, V(0x03, 0x00, 0x00));
	assert_int_equal(lz_pc_get_seq_len(&r, 16, &n), -EBADMSG);
	assert_int_equal(n, 7);
	lz_pc_reader_init(&r, V(0x02, 0x00, 0x00));
	assert_int_equal(lz_pc_get_seq_len(&r, 16, &n), 0);
	assert_int_equal(n, 2);
}

static void test_lz_pc_get_str__invalid_utf8(void **state)
{
	(void)state;
	static const struct {
		const char *bytes;
		size_t len;
	} bad[] = {
		{ "\xC0\x80", 2 },             /* overlong NUL */
		{ "\xC1\xBF", 2 },             /* overlong */
		{ "\xE0\x80\x80", 3 },         /* overlong */
		{ "\xF0\x80\x80\x80", 4 },     /* overlong */
		{ "\xED\xA0\x80", 3 },         /* surrogate U+D800 */
		{ "\xED\xBF\xBF", 3 },         /* surrogate U+DFFF */
		{ "\xF4\x90\x80\x80", 4 },     /* U+110000 */
		{ "\xF5\x80\x80\x80", 4 },     /* lead F5 */
		{ "\xFF", 1 },
		{ "\x80", 1 },                 /* lone continuation */
		{ "a\xE2\x82", 3 },            /* truncated sequence */
		{ "\xE2\x28\xA1", 3 },         /* bad continuation */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint8_t buf[8];
		buf[0] = (uint8_t)bad[i].len;
		memcpy(buf + 1, bad[i].bytes, bad[i].len);
		struct lz_pc_reader r;
		lz_pc_reader_init(&r, buf, 1 + bad[i].len);
		const char *s = NULL;
		size_t n = 0;
		assert_int_equal(lz_pc_get_str(&r, 16, &s, &n), -EBADMSG);
		assert_int_equal(r.pos, 0);
		assert_null(s);
		assert_false(lz_pc_utf8_valid((const uint8_t *)bad[i].bytes, bad[i].len));
		/* The same bytes are fine as bytes. */
		const uint8_t *p;
		assert_int_equal(lz_pc_get_bytes(&r, 16, &p, &n), 0);
		/* And the writer refuses them as a string. */
		struct lz_pc_writer w;
		lz_pc_writer_init(&w, buf, sizeof(buf));
		assert_int_equal(lz_pc_put_str(&w, bad[i].bytes, bad[i].len), -EINVAL);
		assert_int_equal(w.len, 0);
	}
	const char good[] = "a\0\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xED\x9F\xBF\xEE\x80\x80\xF4\x8F\xBF\xBF";
	assert_true(lz_pc_utf8_valid((const uint8_t *)good, sizeof(good) - 1));
}

static void test_lz_pc_reader_end__trailing_byte(void **state)
{
	(void)state;
	struct lz_pc_reader r;
	lz_pc_reader_init(&r, V(0x01, 0x00));
	bool b;
	assert_int_equal(lz_pc_get_bool(&r, &b), 0);
	assert_int_equal(lz_pc_reader_end(&r), -EBADMSG);
	lz_pc_reader_init(&r, NULL, 0);
	assert_int_equal(lz_pc_reader_end(&r), 0);
}

static void test_lz_pc_writer__overflow_at_every_capacity(void **state)
{
	(void)state;
	/* u64 max (10) + bytes "hello" (6) + fixed 3 + bool: 20 bytes. */
	for (size_t cap = 0; cap <= 20; cap++) {
		uint8_t buf[20];
		memset(buf, 0xEE, sizeof(buf));
		struct lz_pc_writer w;
		lz_pc_writer_init(&w, buf, cap);
		lz_pc_put_u64(&w, UINT64_MAX);
		lz_pc_put_bytes(&w, "hello", 5);
		lz_pc_put_fixed(&w, "abc", 3);
		lz_pc_put_bool(&w, true);
		size_t len = 1234;
		if (cap < 20) {
			assert_int_equal(lz_pc_writer_finish(&w, &len), -EMSGSIZE);
			assert_int_equal(len, 1234);
			assert_true(w.len <= cap);
			/* Sticky: a put that would fit still fails. */
			assert_int_equal(lz_pc_put_fixed(&w, NULL, 0), -EMSGSIZE);
			for (size_t i = cap; i < sizeof(buf); i++)
				assert_int_equal(buf[i], 0xEE);
		} else {
			assert_int_equal(lz_pc_writer_finish(&w, &len), 0);
			assert_int_equal(len, 20);
		}
	}
}

static void test_lz_pc_put_bytes__no_partial_item(void **state)
{
	(void)state;
	uint8_t buf[4];
	struct lz_pc_writer w;
	lz_pc_writer_init(&w, buf, 2); /* room for the prefix, not the bytes */
	assert_int_equal(lz_pc_put_bytes(&w, "abc", 3), -EMSGSIZE);
	assert_int_equal(w.len, 0);
	lz_pc_writer_init(&w, NULL, 100);
	assert_int_equal(lz_pc_put_u8(&w, 1), -EMSGSIZE);
}

static void test_lz_pc_put__over_limit_lengths(void **state)
{
	(void)state;
	uint8_t buf[16];
	struct lz_pc_writer w;
	lz_pc_writer_init(&w, buf, sizeof(buf));
	assert_int_equal(lz_pc_put_seq_len(&w, LZ_PC_MAX_LEN + 1), -EINVAL);
	assert_int_equal(lz_pc_put_u8(&w, 0), -EINVAL);
	lz_pc_writer_init(&w, buf, sizeof(buf));
	assert_int_equal(lz_pc_put_bytes(&w, buf, LZ_PC_MAX_LEN + 1), -EINVAL);
	assert_int_equal(w.len, 0);
	size_t len;
	assert_int_equal(lz_pc_writer_finish(&w, &len), -EINVAL);
	lz_pc_writer_init(&w, buf, sizeof(buf));
	assert_int_equal(lz_pc_put_seq_len(&w, LZ_PC_MAX_LEN), 0);
	assert_int_equal(w.len, 3);
	assert_memory_equal(buf, "\x80\x80\x04", 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_pc_put_u64__fixed_vectors),
		cmocka_unit_test(test_lz_pc_put_i64__zigzag_vectors),
		cmocka_unit_test(test_lz_pc_put__bytes_strings_and_small_types),
		cmocka_unit_test(test_lz_pc_get__round_trip_unsigned),
		cmocka_unit_test(test_lz_pc_get__round_trip_signed),
		cmocka_unit_test(test_lz_pc_get__fixed_vectors),
		cmocka_unit_test(test_lz_pc_get_u64__overlong_and_out_of_range),
		cmocka_unit_test(test_lz_pc_get_bool__only_zero_or_one),
		cmocka_unit_test(test_lz_pc_get_bytes__length_limits),
		cmocka_unit_test(test_lz_pc_get_seq_len__bounded_by_bytes_left),
		cmocka_unit_test(test_lz_pc_get_str__invalid_utf8),
		cmocka_unit_test(test_lz_pc_reader_end__trailing_byte),
		cmocka_unit_test(test_lz_pc_writer__overflow_at_every_capacity),
		cmocka_unit_test(test_lz_pc_put_bytes__no_partial_item),
		cmocka_unit_test(test_lz_pc_put__over_limit_lengths),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
