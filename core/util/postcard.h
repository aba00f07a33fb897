/* Postcard encoding in C (C-REFINEMENT.md, "Postcard wire format").
 *
 * The v1 records between the Client CLI and the Host Coordinator (spec 3.3,
 * 3.4; core/wire.h) are Postcard payloads:
 *   - u16, u32, u64 (and lengths): unsigned LEB128 varint, at most 3, 5, 10
 *     bytes;
 *   - i16, i32, i64: zigzag, then as the unsigned varint of the same width;
 *   - u8: one byte; bool: one byte, 0 or 1;
 *   - bytes and strings: varint length, then the bytes (strings UTF-8);
 *   - Option: one byte 0 (None) or 1 (Some, then the value);
 *   - enum: varint u32 discriminant, then the variant's fields;
 *   - fixed arrays: the elements, no length; structs and tuples: the fields
 *     in order.
 *
 * Threat: the bytes come from a less trusted peer (and, on the HC side, may be
 * driven by whatever controls a Client CLI). The reader never reads past its
 * span, accepts only the canonical encoding of every value (no overlong or
 * out-of-range varint, no bool other than 0/1, no invalid UTF-8), and bounds
 * every decoded length by the caller's limit, by LZ_PC_MAX_LEN and by the bytes
 * left, so a length prefix can never drive an allocation or a read. Canonical
 * decoding makes decode-then-encode the identity on every accepted input.
 *
 * Errors: the writer returns -EMSGSIZE when the item does not fit and -EINVAL
 * for a value it must not encode (length over LZ_PC_MAX_LEN, invalid UTF-8);
 * the reader returns -EBADMSG for truncated or malformed input. A failing call
 * consumes and writes nothing, and leaves its ret_ parameters untouched. */
#ifndef LZ_POSTCARD_H
#define LZ_POSTCARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Hard limit on any length or sequence count, whatever the caller allows:
 * a complete v1 record is at most 65,536 bytes (spec 3.8). */
#define LZ_PC_MAX_LEN 65536u

/* Longest canonical varint of each width. */
#define LZ_PC_VARINT_MAX_U16 3
#define LZ_PC_VARINT_MAX_U32 5
#define LZ_PC_VARINT_MAX_U64 10

/* Writer over a caller buffer of cap bytes. The first failure is sticky:
 * every later put returns the same error and writes nothing, so a record can
 * be written as a sequence of puts and checked once with
 * lz_pc_writer_finish. Bytes past len are unspecified after a failure. */
struct lz_pc_writer {
	uint8_t *buf;
	size_t cap;
	size_t len; /* bytes written so far */
	int err;    /* 0 or the first -errno */
};

void lz_pc_writer_init(struct lz_pc_writer *w, uint8_t *buf, size_t cap);

int lz_pc_put_u8(struct lz_pc_writer *w, uint8_t v);
int lz_pc_put_bool(struct lz_pc_writer *w, bool v);
int lz_pc_put_u16(struct lz_pc_writer *w, uint16_t v);
int lz_pc_put_u32(struct lz_pc_writer *w, uint32_t v);
int lz_pc_put_u64(struct lz_pc_writer *w, uint64_t v);
int lz_pc_put_i16(struct lz_pc_writer *w, int16_t v);
int lz_pc_put_i32(struct lz_pc_writer *w, int32_t v);
int lz_pc_put_i64(struct lz_pc_writer *w, int64_t v);
/* Option tag: 0 for None, 1 for Some (the caller then writes the value). */
int lz_pc_put_option(struct lz_pc_writer *w, bool some);
int lz_pc_put_discriminant(struct lz_pc_writer *w, uint32_t v);
/* Sequence length prefix (the caller then writes n elements); n is at most
 * LZ_PC_MAX_LEN. */
int lz_pc_put_seq_len(struct lz_pc_writer *w, size_t n);
/* Fixed array of n bytes: no length prefix. p may be NULL when n == 0. */
int lz_pc_put_fixed(struct lz_pc_writer *w, const void *p, size_t n);
/* Length-prefixed bytes; n at most LZ_PC_MAX_LEN. p may be NULL when n == 0. */
int lz_pc_put_bytes(struct lz_pc_writer *w, const void *p, size_t n);
/* As lz_pc_put_bytes; s[0..n) must be valid UTF-8 (NUL is a valid scalar). */
int lz_pc_put_str(struct lz_pc_writer *w, const char *s, size_t n);

/* Returns w->err; on success stores the encoded length. */
int lz_pc_writer_finish(const struct lz_pc_writer *w, size_t *ret_len);

/* Reader over buf[0..len). Borrowed: byte and string results point into buf
 * and live as long as it does. */
struct lz_pc_reader {
	const uint8_t *buf;
	size_t len;
	size_t pos; /* bytes consumed so far */
};

void lz_pc_reader_init(struct lz_pc_reader *r, const uint8_t *buf, size_t len);

int lz_pc_get_u8(struct lz_pc_reader *r, uint8_t *ret);
int lz_pc_get_bool(struct lz_pc_reader *r, bool *ret);
int lz_pc_get_u16(struct lz_pc_reader *r, uint16_t *ret);
int lz_pc_get_u32(struct lz_pc_reader *r, uint32_t *ret);
int lz_pc_get_u64(struct lz_pc_reader *r, uint64_t *ret);
int lz_pc_get_i16(struct lz_pc_reader *r, int16_t *ret);
int lz_pc_get_i32(struct lz_pc_reader *r, int32_t *ret);
int lz_pc_get_i64(struct lz_pc_reader *r, int64_t *ret);
int lz_pc_get_option(struct lz_pc_reader *r, bool *ret_some);
int lz_pc_get_discriminant(struct lz_pc_reader *r, uint32_t *ret);
/* Sequence count: at most max, LZ_PC_MAX_LEN, and the bytes left (so it
 * suits sequences whose every element encodes to at least one byte, which is
 * what makes the count a safe allocation bound). */
int lz_pc_get_seq_len(struct lz_pc_reader *r, size_t max, size_t *ret);
/* Fixed array of n bytes, copied into ret. */
int lz_pc_get_fixed(struct lz_pc_reader *r, void *ret, size_t n);
/* Length-prefixed bytes of at most max (and LZ_PC_MAX_LEN) bytes; *ret points
 * into the reader's buffer (non-NULL even when the length is 0). */
int lz_pc_get_bytes(struct lz_pc_reader *r, size_t max, const uint8_t **ret, size_t *ret_len);
/* As lz_pc_get_bytes and the bytes must be valid UTF-8. Not NUL-terminated. */
int lz_pc_get_str(struct lz_pc_reader *r, size_t max, const char **ret, size_t *ret_len);
/* 0 when every byte was consumed, -EBADMSG when any byte is left. */
int lz_pc_reader_end(const struct lz_pc_reader *r);

/* Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above
 * U+10FFFF, no truncated sequence. */
bool lz_pc_utf8_valid(const uint8_t *s, size_t n);

#endif
