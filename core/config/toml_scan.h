/* Scanner of the TOML decoder: the cursor over the document, its positions
 * and error messages, the text check, and the lexical items of the closed
 * subset (toml.h): whitespace, comments, newlines, bare keys and scalar
 * values (basic and literal strings, decimal integers, booleans). toml.c
 * builds tables, arrays and headers on top of it.
 *
 * Threat: the document is untrusted bytes (up to LZ_TOML_MAX_INPUT, not
 * NUL-terminated, may contain NUL). Every error names a line and column and
 * never quotes string values, which may hold secrets.
 *
 * Invariants:
 * - lz_toml_scan_init() validates the whole input before anything is
 *   scanned, so every later step only sees strict UTF-8 without a BOM, NUL
 *   or control characters other than TAB, LF and CR immediately followed by
 *   LF.
 * - off never passes len; line and line_start follow every newline the
 *   cursor crosses, so a position is always (line, off - line_start + 1).
 *
 * Conventions: fallible functions return 0 or -EINVAL/-ENOMEM and then have
 * filled sc->err (when non-NULL) with a position and a message; ret_
 * parameters are untouched on failure. */
#ifndef LZ_TOML_SCAN_H
#define LZ_TOML_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/toml.h"
#include "config/toml_tree.h"

/* Keeps line and column numbers far from uint32_t overflow. */
#define LZ_TOML_MAX_INPUT (16u << 20)

/* The parser reads s, len and off and advances off over single bytes it has
 * peeked (never over a newline); the other fields are the scanner's. */
struct lz_toml_scan {
	const char *s;
	size_t len;
	size_t off;
	uint32_t line;
	size_t line_start; /* offset of the first byte of the current line */
	struct lz_toml_error *err;
	char *scratch; /* decoded basic string being built */
	size_t scratch_cap;
};

/* A bare key: the len bytes at s + off. */
struct lz_toml_key {
	size_t off;
	size_t len;
	struct lz_toml_pos pos;
};

/* Sets sc over the len bytes at bytes (err may be NULL) and validates the
 * whole input: present, at most LZ_TOML_MAX_INPUT bytes, and text as above.
 * -EINVAL on refusal, and sc then holds nothing; after success, release sc
 * with lz_toml_scan_done(). */
int lz_toml_scan_init(struct lz_toml_scan *sc, const char *bytes, size_t len, struct lz_toml_error *err);

/* Frees the scanner's buffer; idempotent. */
void lz_toml_scan_done(struct lz_toml_scan *sc);

/* Position of off, which must be on the current line. */
struct lz_toml_pos lz_toml_scan_pos(const struct lz_toml_scan *sc, size_t off);

/* Records a refusal at off (on the current line) or at pos; returns -EINVAL. */
__attribute__((format(printf, 3, 4))) int lz_toml_scan_fail(struct lz_toml_scan *sc, size_t off,
							      const char *fmt, ...);
__attribute__((format(printf, 3, 4))) int lz_toml_scan_fail_at(struct lz_toml_scan *sc, struct lz_toml_pos pos,
								 const char *fmt, ...);

/* Records "out of memory" at the cursor; returns -ENOMEM. */
int lz_toml_scan_oom(struct lz_toml_scan *sc);

/* The byte at the cursor, or -1 at the end. */
static inline int lz_toml_scan_peek(const struct lz_toml_scan *sc)
{
	return sc->off < sc->len ? (unsigned char)sc->s[sc->off] : -1;
}

/* LF, or the CR of a CRLF (the text check refuses a lone CR). */
static inline bool lz_toml_is_newline(int c)
{
	return c == '\n' || c == '\r';
}

/* Skips spaces and tabs. */
void lz_toml_scan_skip_ws(struct lz_toml_scan *sc);

/* Skips to the end of the line, leaving the newline. */
void lz_toml_scan_skip_comment(struct lz_toml_scan *sc);

/* Steps over the newline at the cursor onto the next line. */
void lz_toml_scan_eat_newline(struct lz_toml_scan *sc);

/* The bare key [A-Za-z0-9_-]+ at the cursor into *k; refuses quoted keys. */
int lz_toml_scan_key(struct lz_toml_scan *sc, struct lz_toml_key *k);

/* The scalar value at the cursor (a string, an integer or a boolean) as a
 * new node owned by the caller, with the cursor after it. Anything else is
 * refused, naming what it looks like (float, date, hex integer, ...), or
 * "expected a value". */
int lz_toml_scan_scalar(struct lz_toml_scan *sc, struct lz_toml_node **ret);

#endif
