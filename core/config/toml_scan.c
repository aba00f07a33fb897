/* Scanner of the TOML decoder (toml_scan.h): text check, cursor, errors,
 * keys and scalar values.
 *
 * Strings are decoded into the scanner's scratch buffer and copied into a
 * node of their exact length. Integers are accumulated in uint64_t against
 * the limit of their sign, so INT64_MIN is accepted and nothing overflows.
 * What the subset refuses (floats, dates, hex/octal/binary, underscores,
 * leading zeros, multi-line strings) is recognised and named, so a refusal
 * says why rather than "expected a value". */
#include "config/toml_scan.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

/* ---- errors ---- */

struct lz_toml_pos lz_toml_scan_pos(const struct lz_toml_scan *sc, size_t off)
{
	/* off is on the current line; LZ_TOML_MAX_INPUT keeps this in range. */
	return (struct lz_toml_pos){ .line = sc->line, .column = (uint32_t)(off - sc->line_start + 1) };
}

static int vfail(struct lz_toml_scan *sc, struct lz_toml_pos pos, int code, const char *fmt, va_list ap)
{
	if (sc->err) {
		sc->err->pos = pos;
		vsnprintf(sc->err->msg, sizeof(sc->err->msg), fmt, ap);
	}
	return -code;
}

int lz_toml_scan_fail_at(struct lz_toml_scan *sc, struct lz_toml_pos pos, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfail(sc, pos, EINVAL, fmt, ap);
	va_end(ap);
	return r;
}

int lz_toml_scan_fail(struct lz_toml_scan *sc, size_t off, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfail(sc, lz_toml_scan_pos(sc, off), EINVAL, fmt, ap);
	va_end(ap);
	return r;
}

int lz_toml_scan_oom(struct lz_toml_scan *sc)
{
	if (sc->err) {
		sc->err->pos = lz_toml_scan_pos(sc, sc->off);
		snprintf(sc->err->msg, sizeof(sc->err->msg), "out of memory");
	}
	return -ENOMEM;
}

/* ---- encoding ---- */

/* Refuses a BOM, NUL, control characters other than TAB, LF and CRLF, and
 * anything that is not strict UTF-8 (no overlongs, no surrogates, nothing
 * above U+10FFFF). Leaves the line counter reset for the parser. */
static int check_text(struct lz_toml_scan *sc)
{
	const unsigned char *s = (const unsigned char *)sc->s;
	size_t len = sc->len;

	if (len >= 3 && s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF)
		return lz_toml_scan_fail(sc, 0, "byte-order mark is not allowed");

	for (size_t i = 0; i < len;) {
		unsigned char c = s[i];
		if (c < 0x80) {
			if (c == '\n') {
				i++;
				sc->line++;
				sc->line_start = i;
			} else if (c == '\r') {
				if (i + 1 >= len || s[i + 1] != '\n')
					return lz_toml_scan_fail(sc, i, "carriage return not followed by line feed");
				i++;
			} else if (c == '\0') {
				return lz_toml_scan_fail(sc, i, "NUL is not allowed");
			} else if ((c < 0x20 && c != '\t') || c == 0x7F) {
				return lz_toml_scan_fail(sc, i, "control characters are not allowed");
			} else {
				i++;
			}
			continue;
		}

		size_t n;
		if (c >= 0xC2 && c <= 0xDF)
			n = 2;
		else if (c >= 0xE0 && c <= 0xEF)
			n = 3;
		else if (c >= 0xF0 && c <= 0xF4)
			n = 4;
		else
			return lz_toml_scan_fail(sc, i, "invalid UTF-8");
		if (len - i < n)
			return lz_toml_scan_fail(sc, i, "invalid UTF-8");
		uint32_t cp = c & (0x7Fu >> n);
		for (size_t k = 1; k < n; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return lz_toml_scan_fail(sc, i, "invalid UTF-8");
			cp = (cp << 6) | (s[i + k] & 0x3Fu);
		}
		if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
		    (cp >= 0xD800 && cp <= 0xDFFF))
			return lz_toml_scan_fail(sc, i, "invalid UTF-8");
		i += n;
	}
	sc->line = 1;
	sc->line_start = 0;
	return 0;
}

int lz_toml_scan_init(struct lz_toml_scan *sc, const char *bytes, size_t len, struct lz_toml_error *err)
{
	*sc = (struct lz_toml_scan){
		.s = bytes,
		.len = len,
		.line = 1,
		.err = err,
	};

	if (!bytes && len > 0)
		return lz_toml_scan_fail(sc, 0, "no input");
	if (len > LZ_TOML_MAX_INPUT)
		return lz_toml_scan_fail(sc, 0, "document larger than %u bytes", LZ_TOML_MAX_INPUT);
	return check_text(sc);
}

void lz_toml_scan_done(struct lz_toml_scan *sc)
{
	free(sc->scratch);
	sc->scratch = NULL;
	sc->scratch_cap = 0;
}

/* ---- lexing ---- */

static bool is_bare(int c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '-';
}

static bool is_digit(int c)
{
	return c >= '0' && c <= '9';
}

void lz_toml_scan_skip_ws(struct lz_toml_scan *sc)
{
	while (sc->off < sc->len && (sc->s[sc->off] == ' ' || sc->s[sc->off] == '\t'))
		sc->off++;
}

void lz_toml_scan_skip_comment(struct lz_toml_scan *sc)
{
	while (sc->off < sc->len && !lz_toml_is_newline(sc->s[sc->off]))
		sc->off++;
}

/* check_text() guarantees a CR is followed by LF. */
void lz_toml_scan_eat_newline(struct lz_toml_scan *sc)
{
	sc->off += sc->s[sc->off] == '\r' ? 2 : 1;
	sc->line++;
	sc->line_start = sc->off;
}

int lz_toml_scan_key(struct lz_toml_scan *sc, struct lz_toml_key *k)
{
	int c = lz_toml_scan_peek(sc);
	if (c == '"' || c == '\'')
		return lz_toml_scan_fail(sc, sc->off, "quoted keys are not supported");
	if (!is_bare(c))
		return lz_toml_scan_fail(sc, sc->off, "expected a key");
	k->off = sc->off;
	k->pos = lz_toml_scan_pos(sc, sc->off);
	while (is_bare(lz_toml_scan_peek(sc)))
		sc->off++;
	k->len = sc->off - k->off;
	return 0;
}

/* ---- strings ---- */

static int new_string(struct lz_toml_scan *sc, struct lz_toml_pos pos, const char *bytes, size_t n,
		      struct lz_toml_node **ret)
{
	_cleanup_toml_node_ struct lz_toml_node *v = lz_toml_node_new(LZ_TOML_STRING, pos, 0);
	if (!v)
		return lz_toml_scan_oom(sc);
	v->v.string.bytes = malloc(n + 1);
	if (!v->v.string.bytes)
		return lz_toml_scan_oom(sc);
	if (n > 0)
		memcpy(v->v.string.bytes, bytes, n);
	v->v.string.bytes[n] = '\0';
	v->v.string.len = n;
	*ret = TAKE_PTR(v);
	return 0;
}

static int scratch_reserve(struct lz_toml_scan *sc, size_t need)
{
	if (need <= sc->scratch_cap)
		return 0;
	size_t cap = sc->scratch_cap ? sc->scratch_cap : 64;
	while (cap < need)
		cap *= 2;
	char *s = realloc(sc->scratch, cap);
	if (!s)
		return -ENOMEM;
	sc->scratch = s;
	sc->scratch_cap = cap;
	return 0;
}

static int hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static size_t utf8_encode(char *out, uint32_t cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* Decodes the escape at sc->off (the backslash) into scratch[*n...]. */
static int parse_escape(struct lz_toml_scan *sc, struct lz_toml_pos open, size_t *n)
{
	size_t esc = sc->off++;
	if (sc->off >= sc->len)
		return lz_toml_scan_fail_at(sc, open, "unterminated string");
	char c;
	switch (sc->s[sc->off++]) {
	case 'b': c = '\b'; break;
	case 't': c = '\t'; break;
	case 'n': c = '\n'; break;
	case 'f': c = '\f'; break;
	case 'r': c = '\r'; break;
	case '"': c = '"'; break;
	case '\\': c = '\\'; break;
	case 'u':
	case 'U': {
		size_t digits = sc->s[sc->off - 1] == 'u' ? 4 : 8;
		if (sc->len - sc->off < digits)
			return lz_toml_scan_fail(sc, esc, "invalid unicode escape");
		uint32_t cp = 0;
		for (size_t i = 0; i < digits; i++) {
			int h = hex_value((unsigned char)sc->s[sc->off + i]);
			if (h < 0)
				return lz_toml_scan_fail(sc, esc, "invalid unicode escape");
			cp = (cp << 4) | (uint32_t)h;
		}
		sc->off += digits;
		if (cp == 0)
			return lz_toml_scan_fail(sc, esc, "escaped NUL is not allowed");
		if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return lz_toml_scan_fail(sc, esc, "invalid unicode escape");
		*n += utf8_encode(sc->scratch + *n, cp);
		return 0;
	}
	default:
		return lz_toml_scan_fail(sc, esc, "unknown escape");
	}
	sc->scratch[(*n)++] = c;
	return 0;
}

static int parse_basic_string(struct lz_toml_scan *sc, struct lz_toml_node **ret)
{
	struct lz_toml_pos open = lz_toml_scan_pos(sc, sc->off);
	if (sc->len - sc->off >= 3 && sc->s[sc->off + 1] == '"' && sc->s[sc->off + 2] == '"')
		return lz_toml_scan_fail(sc, sc->off, "multi-line strings are not supported");
	sc->off++;

	size_t n = 0;
	for (;;) {
		if (sc->off >= sc->len)
			return lz_toml_scan_fail_at(sc, open, "unterminated string");
		char c = sc->s[sc->off];
		if (c == '"')
			break;
		if (lz_toml_is_newline(c))
			return lz_toml_scan_fail(sc, sc->off, "newline in string");
		/* An escape decodes to at most 4 bytes. */
		if (scratch_reserve(sc, n + 4) < 0)
			return lz_toml_scan_oom(sc);
		if (c == '\\') {
			int r = parse_escape(sc, open, &n);
			if (r < 0)
				return r;
		} else {
			sc->scratch[n++] = c;
			sc->off++;
		}
	}
	sc->off++;
	return new_string(sc, open, sc->scratch, n, ret);
}

static int parse_literal_string(struct lz_toml_scan *sc, struct lz_toml_node **ret)
{
	struct lz_toml_pos open = lz_toml_scan_pos(sc, sc->off);
	if (sc->len - sc->off >= 3 && sc->s[sc->off + 1] == '\'' && sc->s[sc->off + 2] == '\'')
		return lz_toml_scan_fail(sc, sc->off, "multi-line strings are not supported");
	size_t start = ++sc->off;
	for (;;) {
		if (sc->off >= sc->len)
			return lz_toml_scan_fail_at(sc, open, "unterminated string");
		char c = sc->s[sc->off];
		if (c == '\'')
			break;
		if (lz_toml_is_newline(c))
			return lz_toml_scan_fail(sc, sc->off, "newline in string");
		sc->off++;
	}
	int r = new_string(sc, open, sc->s + start, sc->off - start, ret);
	sc->off++;
	return r;
}

/* ---- words: booleans and integers ---- */

static bool is_word(int c)
{
	return is_bare(c) || c == '+' || c == '.' || c == ':';
}

static bool word_is(const char *w, size_t n, const char *lit)
{
	return n == strlen(lit) && memcmp(w, lit, n) == 0;
}

/* true, false, or a decimal integer; names what else it looks like. */
static int parse_word(struct lz_toml_scan *sc, struct lz_toml_node **ret)
{
	size_t start = sc->off;
	struct lz_toml_pos pos = lz_toml_scan_pos(sc, start);
	while (is_word(lz_toml_scan_peek(sc)))
		sc->off++;
	const char *w = sc->s + start;
	size_t n = sc->off - start;

	if (word_is(w, n, "true") || word_is(w, n, "false")) {
		struct lz_toml_node *v = lz_toml_node_new(LZ_TOML_BOOL, pos, 0);
		if (!v)
			return lz_toml_scan_oom(sc);
		v->v.boolean = w[0] == 't';
		*ret = v;
		return 0;
	}
	const char *special = w + (n > 0 && (w[0] == '+' || w[0] == '-'));
	size_t special_len = n - (size_t)(special - w);
	if (word_is(special, special_len, "inf") || word_is(special, special_len, "nan"))
		return lz_toml_scan_fail(sc, start, "floats are not supported");

	size_t i = 0;
	bool sign = w[0] == '+' || w[0] == '-';
	bool neg = w[0] == '-';
	if (sign)
		i++;
	size_t ds = i;
	while (i < n && is_digit(w[i]))
		i++;
	size_t nd = i - ds;
	if (nd == 0)
		return lz_toml_scan_fail(sc, start, sign ? "invalid integer" : "expected a value");
	if (i < n) {
		char c = w[i];
		if (c == '.' || c == 'e' || c == 'E')
			return lz_toml_scan_fail(sc, start, "floats are not supported");
		if (c == '_')
			return lz_toml_scan_fail(sc, start, "underscores in integers are not supported");
		if ((c == '-' || c == ':') && !sign)
			return lz_toml_scan_fail(sc, start, "dates and times are not supported");
		if ((c == 'x' || c == 'o' || c == 'b') && nd == 1 && w[ds] == '0')
			return lz_toml_scan_fail(sc, start, "only decimal integers are supported");
		return lz_toml_scan_fail(sc, start, "invalid integer");
	}
	if (nd > 1 && w[ds] == '0')
		return lz_toml_scan_fail(sc, start, "leading zeros are not allowed");

	uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	uint64_t acc = 0;
	for (size_t k = ds; k < n; k++) {
		uint64_t d = (uint64_t)(w[k] - '0');
		if (acc > (limit - d) / 10)
			return lz_toml_scan_fail(sc, start, "integer out of range");
		acc = acc * 10 + d;
	}
	struct lz_toml_node *v = lz_toml_node_new(LZ_TOML_INTEGER, pos, 0);
	if (!v)
		return lz_toml_scan_oom(sc);
	if (!neg)
		v->v.integer = (int64_t)acc;
	else if (acc == (uint64_t)INT64_MAX + 1)
		v->v.integer = INT64_MIN;
	else
		v->v.integer = -(int64_t)acc;
	*ret = v;
	return 0;
}

int lz_toml_scan_scalar(struct lz_toml_scan *sc, struct lz_toml_node **ret)
{
	int c = lz_toml_scan_peek(sc);
	if (c == '"')
		return parse_basic_string(sc, ret);
	if (c == '\'')
		return parse_literal_string(sc, ret);
	if (is_word(c))
		return parse_word(sc, ret);
	return lz_toml_scan_fail(sc, sc->off, "expected a value");
}
