/* libFuzzer target for core/wire.c and core/postcard.c.
 *
 * 1. Decodes the input as one v1 record. A refusal must be -EBADMSG (or
 *    -ENOMEM) and leave the output untouched; an accepted record must borrow
 *    only bytes inside the input, and re-encode to exactly the input bytes
 *    (canonical form: one encoding per value, none of it ignored).
 * 2. Walks the input as a stream of Postcard items, each an op byte then a
 *    value of the type it names; every value read must re-encode to exactly
 *    the bytes it consumed, and the reader must never pass the end.
 * Any violation abort()s. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/postcard.h"
#include "session/wire.h"

static void check(bool ok)
{
	if (!ok)
		abort();
}

static void check_inside(const uint8_t *data, size_t size, const void *p, size_t len)
{
	if (len == 0)
		return;
	const uint8_t *b = p;
	check(b >= data && b <= data + size && len <= (size_t)(data + size - b));
}

static void check_borrowed(const uint8_t *data, size_t size, const struct lz_wire_msg *m)
{
	switch (m->type) {
	case LZ_WIRE_RUN_COMMAND:
		check(m->owned != NULL && m->run.argc >= 1 && m->run.argc <= LZ_WIRE_MAX_ARGV);
		check(m->run.n_env <= LZ_WIRE_MAX_ENV);
		for (size_t i = 0; i < m->run.argc; i++) {
			check_inside(data, size, m->run.argv[i].ptr, m->run.argv[i].len);
			check(m->run.argv[i].len == 0 || !memchr(m->run.argv[i].ptr, 0, m->run.argv[i].len));
		}
		for (size_t i = 0; i < m->run.n_env; i++) {
			check(m->run.env[i].name.len > 0);
			check_inside(data, size, m->run.env[i].name.ptr, m->run.env[i].name.len);
			check_inside(data, size, m->run.env[i].value.ptr, m->run.env[i].value.len);
		}
		if (m->run.has_cwd)
			check_inside(data, size, m->run.cwd.ptr, m->run.cwd.len);
		check(m->run.terminal ? (m->run.rows && m->run.cols) : (!m->run.rows && !m->run.cols));
		break;
	case LZ_WIRE_INPUT:
	case LZ_WIRE_OUTPUT:
		check(m->input.len >= 1 && m->input.len <= LZ_WIRE_MAX_DATA);
		check_inside(data, size, m->input.ptr, m->input.len);
		break;
	case LZ_WIRE_REFUSED:
		check(m->refused.message_len <= LZ_WIRE_MAX_MESSAGE);
		check_inside(data, size, m->refused.message, m->refused.message_len);
		check(lz_pc_utf8_valid((const uint8_t *)m->refused.message, m->refused.message_len));
		break;
	case LZ_WIRE_RESIZE:
		check(m->resize.rows && m->resize.cols);
		break;
	default:
		check(m->owned == NULL);
		break;
	}
}

static void fuzz_record(const uint8_t *data, size_t size)
{
	struct lz_wire_msg m, sentinel;
	memset(&m, 0x5a, sizeof(m));
	memcpy(&sentinel, &m, sizeof(m));
	int r = lz_wire_decode(data, size, &m);
	if (r < 0) {
		check(r == -EBADMSG || r == -ENOMEM);
		check(memcmp(&m, &sentinel, sizeof(m)) == 0);
		return;
	}
	check(r == 0 && size >= 1 && size <= LZ_WIRE_MAX);
	check((unsigned)m.type <= LZ_WIRE_SESSION_EXIT);
	check_borrowed(data, size, &m);

	uint8_t *buf = malloc(LZ_WIRE_MAX);
	check(buf != NULL);
	size_t len = 0;
	check(lz_wire_encode(&m, buf, LZ_WIRE_MAX, &len) == 0);
	check(len == size && memcmp(buf, data, size) == 0);
	/* One byte less room is too little. */
	size_t unchanged = 12345;
	check(lz_wire_encode(&m, buf, size - 1, &unchanged) == -EMSGSIZE && unchanged == 12345);
	free(buf);

	lz_wire_msg_release(&m);
	check(m.owned == NULL);
	lz_wire_msg_release(&m);
}

enum op { OP_U8, OP_BOOL, OP_U16, OP_U32, OP_U64, OP_I16, OP_I32, OP_I64, OP_BYTES, OP_STR, OP_SEQ, OP_FIXED, OP_COUNT };

/* Reads one item of type op; on success re-encodes it and requires the
 * consumed bytes exactly. */
static bool fuzz_item(struct lz_pc_reader *r, enum op op)
{
	size_t start = r->pos;
	uint8_t out[LZ_PC_MAX_LEN + LZ_PC_VARINT_MAX_U64];
	struct lz_pc_writer w;
	lz_pc_writer_init(&w, out, sizeof(out));
	int e;
	union {
		uint8_t u8;
		bool b;
		uint16_t u16;
		uint32_t u32;
		uint64_t u64;
		int16_t i16;
		int32_t i32;
		int64_t i64;
		uint8_t fixed[7];
	} v;
	const uint8_t *p = NULL;
	const char *s = NULL;
	size_t n = 0;
	switch (op) {
	case OP_U8:
		if ((e = lz_pc_get_u8(r, &v.u8)) == 0)
			lz_pc_put_u8(&w, v.u8);
		break;
	case OP_BOOL:
		if ((e = lz_pc_get_bool(r, &v.b)) == 0)
			lz_pc_put_bool(&w, v.b);
		break;
	case OP_U16:
		if ((e = lz_pc_get_u16(r, &v.u16)) == 0)
			lz_pc_put_u16(&w, v.u16);
		break;
	case OP_U32:
		if ((e = lz_pc_get_u32(r, &v.u32)) == 0)
			lz_pc_put_u32(&w, v.u32);
		break;
	case OP_U64:
		if ((e = lz_pc_get_u64(r, &v.u64)) == 0)
			lz_pc_put_u64(&w, v.u64);
		break;
	case OP_I16:
		if ((e = lz_pc_get_i16(r, &v.i16)) == 0)
			lz_pc_put_i16(&w, v.i16);
		break;
	case OP_I32:
		if ((e = lz_pc_get_i32(r, &v.i32)) == 0)
			lz_pc_put_i32(&w, v.i32);
		break;
	case OP_I64:
		if ((e = lz_pc_get_i64(r, &v.i64)) == 0)
			lz_pc_put_i64(&w, v.i64);
		break;
	case OP_BYTES:
		if ((e = lz_pc_get_bytes(r, SIZE_MAX, &p, &n)) == 0) {
			check(n <= LZ_PC_MAX_LEN && p == r->buf + r->pos - n);
			lz_pc_put_bytes(&w, p, n);
		}
		break;
	case OP_STR:
		if ((e = lz_pc_get_str(r, SIZE_MAX, &s, &n)) == 0) {
			check(lz_pc_utf8_valid((const uint8_t *)s, n));
			lz_pc_put_str(&w, s, n);
		}
		break;
	case OP_SEQ:
		if ((e = lz_pc_get_seq_len(r, SIZE_MAX, &n)) == 0) {
			check(n <= r->len - r->pos);
			lz_pc_put_seq_len(&w, n);
		}
		break;
	case OP_FIXED:
		if ((e = lz_pc_get_fixed(r, v.fixed, sizeof(v.fixed))) == 0)
			lz_pc_put_fixed(&w, v.fixed, sizeof(v.fixed));
		break;
	default:
		abort();
	}
	check(r->pos <= r->len);
	if (e < 0) {
		check(e == -EBADMSG && r->pos == start);
		return false;
	}
	size_t len = 0;
	check(lz_pc_writer_finish(&w, &len) == 0);
	check(len == r->pos - start && memcmp(out, r->buf + start, len) == 0);
	return true;
}

static void fuzz_items(const uint8_t *data, size_t size)
{
	struct lz_pc_reader r;
	lz_pc_reader_init(&r, data, size);
	uint8_t op;
	while (lz_pc_get_u8(&r, &op) == 0) {
		if (!fuzz_item(&r, (enum op)(op % OP_COUNT)))
			break;
	}
	check(lz_pc_reader_end(&r) == 0 || r.pos < r.len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_record(data, size);
	fuzz_items(data, size);
	return 0;
}
