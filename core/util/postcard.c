/* Postcard encoder and decoder (see postcard.h for the rules and the threat).
 *
 * Invariants: w->len <= w->cap and r->pos <= r->len at all times; every
 * reader function works on a copy of the reader and commits it only on
 * success, so a failure consumes nothing. */
#include "util/postcard.h"

#include <errno.h>
#include <string.h>

void lz_pc_writer_init(struct lz_pc_writer *w, uint8_t *buf, size_t cap)
{
	*w = (struct lz_pc_writer){ .buf = buf, .cap = buf ? cap : 0 };
}

static int put_fail(struct lz_pc_writer *w, int err)
{
	w->err = err;
	return err;
}

static int put_raw(struct lz_pc_writer *w, const void *p, size_t n)
{
	if (w->err < 0)
		return w->err;
	if (n > w->cap - w->len)
		return put_fail(w, -EMSGSIZE);
	if (n > 0)
		memcpy(w->buf + w->len, p, n);
	w->len += n;
	return 0;
}

static int put_varint(struct lz_pc_writer *w, uint64_t v)
{
	uint8_t tmp[LZ_PC_VARINT_MAX_U64];
	size_t n = 0;
	do {
		uint8_t b = v & 0x7f;
		v >>= 7;
		tmp[n++] = b | (v ? 0x80 : 0);
	} while (v);
	return put_raw(w, tmp, n);
}

/* Zigzag through 64 bits: sign extension of a narrower value gives the same
 * result as zigzag at its own width, and in that width's range. */
static uint64_t zigzag(int64_t v)
{
	uint64_t u = (uint64_t)v;
	return (u << 1) ^ (0 - (u >> 63));
}

static int64_t unzigzag(uint64_t u)
{
	return (int64_t)((u >> 1) ^ (0 - (u & 1)));
}

int lz_pc_put_u8(struct lz_pc_writer *w, uint8_t v)
{
	return put_raw(w, &v, 1);
}

int lz_pc_put_bool(struct lz_pc_writer *w, bool v)
{
	return lz_pc_put_u8(w, v ? 1 : 0);
}

int lz_pc_put_u16(struct lz_pc_writer *w, uint16_t v)
{
	return put_varint(w, v);
}

int lz_pc_put_u32(struct lz_pc_writer *w, uint32_t v)
{
	return put_varint(w, v);
}

int lz_pc_put_u64(struct lz_pc_writer *w, uint64_t v)
{
	return put_varint(w, v);
}

int lz_pc_put_i16(struct lz_pc_writer *w, int16_t v)
{
	return put_varint(w, zigzag(v));
}

int lz_pc_put_i32(struct lz_pc_writer *w, int32_t v)
{
	return put_varint(w, zigzag(v));
}

int lz_pc_put_i64(struct lz_pc_writer *w, int64_t v)
{
	return put_varint(w, zigzag(v));
}

int lz_pc_put_option(struct lz_pc_writer *w, bool some)
{
	return lz_pc_put_bool(w, some);
}

int lz_pc_put_discriminant(struct lz_pc_writer *w, uint32_t v)
{
	return put_varint(w, v);
}

int lz_pc_put_seq_len(struct lz_pc_writer *w, size_t n)
{
	if (w->err < 0)
		return w->err;
	if (n > LZ_PC_MAX_LEN)
		return put_fail(w, -EINVAL);
	return put_varint(w, n);
}

int lz_pc_put_fixed(struct lz_pc_writer *w, const void *p, size_t n)
{
	return put_raw(w, p, n);
}

int lz_pc_put_bytes(struct lz_pc_writer *w, const void *p, size_t n)
{
	if (w->err < 0)
		return w->err;
	if (n > LZ_PC_MAX_LEN)
		return put_fail(w, -EINVAL);
	size_t start = w->len;
	int r = put_varint(w, n);
	if (r < 0)
		return r;
	r = put_raw(w, p, n);
	if (r < 0)
		w->len = start; /* no partial item, even though the error is sticky */
	return r;
}

int lz_pc_put_str(struct lz_pc_writer *w, const char *s, size_t n)
{
	if (w->err < 0)
		return w->err;
	if (n > 0 && !lz_pc_utf8_valid((const uint8_t *)s, n))
		return put_fail(w, -EINVAL);
	return lz_pc_put_bytes(w, s, n);
}

int lz_pc_writer_finish(const struct lz_pc_writer *w, size_t *ret_len)
{
	if (w->err < 0)
		return w->err;
	*ret_len = w->len;
	return 0;
}

void lz_pc_reader_init(struct lz_pc_reader *r, const uint8_t *buf, size_t len)
{
	*r = (struct lz_pc_reader){ .buf = buf, .len = buf ? len : 0 };
}

/* Canonical LEB128: at most max_bytes bytes, the last byte non-zero unless it
 * is the only one (no overlong form), value at most max. */
static int get_varint(struct lz_pc_reader *r, unsigned max_bytes, uint64_t max, uint64_t *ret)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < max_bytes; i++) {
		if (r->len - r->pos <= i)
			return -EBADMSG;
		uint8_t b = r->buf[r->pos + i];
		uint64_t bits = b & 0x7f;
		if (i == LZ_PC_VARINT_MAX_U64 - 1 && bits > 1)
			return -EBADMSG; /* would shift bits out of 64 */
		v |= bits << (7 * i);
		if (b & 0x80)
			continue;
		if (i > 0 && b == 0)
			return -EBADMSG;
		if (v > max)
			return -EBADMSG;
		r->pos += i + 1;
		*ret = v;
		return 0;
	}
	return -EBADMSG;
}

int lz_pc_get_u8(struct lz_pc_reader *r, uint8_t *ret)
{
	if (r->pos >= r->len)
		return -EBADMSG;
	*ret = r->buf[r->pos++];
	return 0;
}

int lz_pc_get_bool(struct lz_pc_reader *r, bool *ret)
{
	if (r->pos >= r->len || r->buf[r->pos] > 1)
		return -EBADMSG;
	*ret = r->buf[r->pos++] == 1;
	return 0;
}

int lz_pc_get_u16(struct lz_pc_reader *r, uint16_t *ret)
{
	uint64_t v;
	int e = get_varint(r, LZ_PC_VARINT_MAX_U16, UINT16_MAX, &v);
	if (e < 0)
		return e;
	*ret = (uint16_t)v;
	return 0;
}

int lz_pc_get_u32(struct lz_pc_reader *r, uint32_t *ret)
{
	uint64_t v;
	int e = get_varint(r, LZ_PC_VARINT_MAX_U32, UINT32_MAX, &v);
	if (e < 0)
		return e;
	*ret = (uint32_t)v;
	return 0;
}

int lz_pc_get_u64(struct lz_pc_reader *r, uint64_t *ret)
{
	return get_varint(r, LZ_PC_VARINT_MAX_U64, UINT64_MAX, ret);
}

int lz_pc_get_i16(struct lz_pc_reader *r, int16_t *ret)
{
	uint64_t v;
	int e = get_varint(r, LZ_PC_VARINT_MAX_U16, UINT16_MAX, &v);
	if (e < 0)
		return e;
	*ret = (int16_t)unzigzag(v);
	return 0;
}

int lz_pc_get_i32(struct lz_pc_reader *r, int32_t *ret)
{
	uint64_t v;
	int e = get_varint(r, LZ_PC_VARINT_MAX_U32, UINT32_MAX, &v);
	if (e < 0)
		return e;
	*ret = (int32_t)unzigzag(v);
	return 0;
}

int lz_pc_get_i64(struct lz_pc_reader *r, int64_t *ret)
{
	uint64_t v;
	int e = get_varint(r, LZ_PC_VARINT_MAX_U64, UINT64_MAX, &v);
	if (e < 0)
		return e;
	*ret = unzigzag(v);
	return 0;
}

int lz_pc_get_option(struct lz_pc_reader *r, bool *ret_some)
{
	return lz_pc_get_bool(r, ret_some);
}

int lz_pc_get_discriminant(struct lz_pc_reader *r, uint32_t *ret)
{
	return lz_pc_get_u32(r, ret);
}

/* A length or count: at most max, LZ_PC_MAX_LEN and the bytes left after
 * the prefix. */
static int get_len(struct lz_pc_reader *r, size_t max, size_t *ret)
{
	struct lz_pc_reader t = *r;
	uint64_t n;
	int e = get_varint(&t, LZ_PC_VARINT_MAX_U64, UINT64_MAX, &n);
	if (e < 0)
		return e;
	if (n > max || n > LZ_PC_MAX_LEN || n > t.len - t.pos)
		return -EBADMSG;
	*r = t;
	*ret = (size_t)n;
	return 0;
}

int lz_pc_get_seq_len(struct lz_pc_reader *r, size_t max, size_t *ret)
{
	return get_len(r, max, ret);
}

int lz_pc_get_fixed(struct lz_pc_reader *r, void *ret, size_t n)
{
	if (n > r->len - r->pos)
		return -EBADMSG;
	if (n > 0)
		memcpy(ret, r->buf + r->pos, n);
	r->pos += n;
	return 0;
}

int lz_pc_get_bytes(struct lz_pc_reader *r, size_t max, const uint8_t **ret, size_t *ret_len)
{
	struct lz_pc_reader t = *r;
	size_t n;
	int e = get_len(&t, max, &n);
	if (e < 0)
		return e;
	*ret = t.buf + t.pos;
	*ret_len = n;
	t.pos += n;
	*r = t;
	return 0;
}

int lz_pc_get_str(struct lz_pc_reader *r, size_t max, const char **ret, size_t *ret_len)
{
	struct lz_pc_reader t = *r;
	const uint8_t *p;
	size_t n;
	int e = lz_pc_get_bytes(&t, max, &p, &n);
	if (e < 0)
		return e;
	if (!lz_pc_utf8_valid(p, n))
		return -EBADMSG;
	*r = t;
	*ret = (const char *)p;
	*ret_len = n;
	return 0;
}

int lz_pc_reader_end(const struct lz_pc_reader *r)
{
	return r->pos == r->len ? 0 : -EBADMSG;
}

bool lz_pc_utf8_valid(const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint8_t c = s[i];
		size_t k;
		uint32_t cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xC2 && c <= 0xDF) {
			k = 2;
			cp = c & 0x1F;
		} else if (c >= 0xE0 && c <= 0xEF) {
			k = 3;
			cp = c & 0x0F;
		} else if (c >= 0xF0 && c <= 0xF4) {
			k = 4;
			cp = c & 0x07;
		} else {
			return false; /* continuation byte, C0/C1 overlong lead, F5..FF */
		}
		if (n - i < k)
			return false;
		for (size_t j = 1; j < k; j++) {
			if ((s[i + j] & 0xC0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + j] & 0x3F);
		}
		if ((k == 3 && cp < 0x800) || (k == 4 && cp < 0x10000) || cp > 0x10FFFF ||
		    (cp >= 0xD800 && cp <= 0xDFFF))
			return false;
		i += k;
	}
	return true;
}
