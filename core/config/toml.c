/* Strict decoder for the closed TOML subset of the v1 configuration.
 *
 * The grammar (what is accepted, what is refused) is documented in toml.h;
 * this file adds the rules of TOML 1.0 section "Table" and "Array of Tables"
 * about when a header may name an existing key (spec 3.2: no parser default
 * may make a duplicate or aliased key meaningful).
 *
 * Threat: the document is untrusted bytes (up to TOML_MAX_INPUT, not
 * NUL-terminated, may contain NUL). Every error names a line and column and
 * never quotes string values, which may hold secrets; key names are quoted.
 *
 * Invariants:
 * - check_text() validates the whole input first, so the parser only ever
 *   sees strict UTF-8 without a BOM, NUL or control characters other than TAB,
 *   LF and CR immediately followed by LF.
 * - Every node is owned by exactly one parent or one _cleanup_node_ variable;
 *   no failure path leaks.
 * - Depth: a table selected by a header with k keys sits at depth k; each
 *   array or inline table adds one level; nothing may sit deeper than
 *   LZ_TOML_MAX_DEPTH. An array of tables adds one hidden level per key, so
 *   the tree is at most 2 * LZ_TOML_MAX_DEPTH nodes deep and recursion in
 *   parse_value() and lz_toml_free() is bounded.
 * - Tables with many keys carry a hash index, so duplicate detection stays
 *   linear on a document made of thousands of keys. */
#include "config/toml.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

/* Keeps line and column numbers far from uint32_t overflow. */
#define TOML_MAX_INPUT (16u << 20)
/* Longest key or dotted path quoted in a message. */
#define MSG_NAME_MAX 96
/* Tables index their keys once they hold this many. */
#define INDEX_MIN_ENTRIES 8

enum {
	NODE_IMPLICIT = 1u << 0, /* table created as a header's super-table */
	NODE_SEALED = 1u << 1,	 /* inline table or static array */
	NODE_AOT = 1u << 2,	 /* array created by [[...]] headers */
};

/* The public value plus bookkeeping the interface does not show. */
struct node {
	struct lz_toml_value v; /* first: a value pointer is a node pointer */
	unsigned flags;
	size_t cap;	  /* capacity of array.items or table.entries */
	uint32_t *index;  /* table: open addressing, entry index + 1, 0 = empty */
	size_t index_cap; /* power of two, or 0 */
};

struct key {
	size_t off;
	size_t len;
	struct lz_toml_pos pos;
};

struct parser {
	const char *s;
	size_t len;
	size_t off;
	uint32_t line;
	size_t line_start; /* offset of the first byte of the current line */
	struct lz_toml_error *err;
	struct node *root;
	struct node *cur;   /* table selected by the last header */
	unsigned cur_depth; /* number of keys in that header */
	char *scratch;	    /* decoded basic string being built */
	size_t scratch_cap;
};

static struct node *to_node(const struct lz_toml_value *v)
{
	return (struct node *)v;
}

static void node_freep(struct node **np)
{
	if (*np)
		lz_toml_free(&(*np)->v);
	*np = NULL;
}

#define _cleanup_node_ _cleanup_(node_freep)

static struct node *node_new(enum lz_toml_kind kind, struct lz_toml_pos pos, unsigned flags)
{
	struct node *n = calloc(1, sizeof(*n));
	if (n) {
		n->v.kind = kind;
		n->v.pos = pos;
		n->flags = flags;
	}
	return n;
}

void lz_toml_free(struct lz_toml_value *v)
{
	if (!v)
		return;
	struct node *n = to_node(v);
	switch (v->kind) {
	case LZ_TOML_STRING:
		free(v->string.bytes);
		break;
	case LZ_TOML_ARRAY:
		for (size_t i = 0; i < v->array.len; i++)
			lz_toml_free(v->array.items[i]);
		free(v->array.items);
		break;
	case LZ_TOML_TABLE:
		for (size_t i = 0; i < v->table.len; i++) {
			free(v->table.entries[i].key);
			lz_toml_free(v->table.entries[i].value);
		}
		free(v->table.entries);
		free(n->index);
		break;
	case LZ_TOML_INTEGER:
	case LZ_TOML_BOOL:
		break;
	}
	free(n);
}

/* ---- errors ---- */

static struct lz_toml_pos pos_at(const struct parser *p, size_t off)
{
	/* off is on the current line; TOML_MAX_INPUT keeps this in range. */
	return (struct lz_toml_pos){ .line = p->line, .column = (uint32_t)(off - p->line_start + 1) };
}

static int vfail(struct parser *p, struct lz_toml_pos pos, int code, const char *fmt, va_list ap)
{
	if (p->err) {
		p->err->pos = pos;
		vsnprintf(p->err->msg, sizeof(p->err->msg), fmt, ap);
	}
	return -code;
}

__attribute__((format(printf, 3, 4))) static int fail_pos(struct parser *p, struct lz_toml_pos pos,
							    const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfail(p, pos, EINVAL, fmt, ap);
	va_end(ap);
	return r;
}

__attribute__((format(printf, 3, 4))) static int fail(struct parser *p, size_t off, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfail(p, pos_at(p, off), EINVAL, fmt, ap);
	va_end(ap);
	return r;
}

static int oom(struct parser *p)
{
	if (p->err) {
		p->err->pos = pos_at(p, p->off);
		snprintf(p->err->msg, sizeof(p->err->msg), "out of memory");
	}
	return -ENOMEM;
}

static int fail_depth(struct parser *p, struct lz_toml_pos pos)
{
	return fail_pos(p, pos, "nesting deeper than %d levels", LZ_TOML_MAX_DEPTH);
}

/* Writes "a.b.c" for keys[0..n) into buf, truncated with "..." if long. */
static const char *fmt_path(const struct parser *p, const struct key *keys, size_t n, char *buf, size_t size)
{
	assert(size >= 8);
	size_t w = 0;
	for (size_t i = 0; i < n; i++) {
		if (i > 0) {
			if (w + 4 >= size) {
				memcpy(buf + w, "...", 4);
				return buf;
			}
			buf[w++] = '.';
		}
		size_t room = size - 4 - w; /* keeps space for "..." and NUL */
		if (keys[i].len > room) {
			memcpy(buf + w, p->s + keys[i].off, room);
			memcpy(buf + w + room, "...", 4);
			return buf;
		}
		memcpy(buf + w, p->s + keys[i].off, keys[i].len);
		w += keys[i].len;
	}
	buf[w] = '\0';
	return buf;
}

/* ---- encoding ---- */

/* Refuses a BOM, NUL, control characters other than TAB, LF and CRLF, and
 * anything that is not strict UTF-8 (no overlongs, no surrogates, nothing
 * above U+10FFFF). Leaves the line counter reset for the parser. */
static int check_text(struct parser *p)
{
	const unsigned char *s = (const unsigned char *)p->s;
	size_t len = p->len;

	if (len >= 3 && s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF)
		return fail(p, 0, "byte-order mark is not allowed");

	for (size_t i = 0; i < len;) {
		unsigned char c = s[i];
		if (c < 0x80) {
			if (c == '\n') {
				i++;
				p->line++;
				p->line_start = i;
			} else if (c == '\r') {
				if (i + 1 >= len || s[i + 1] != '\n')
					return fail(p, i, "carriage return not followed by line feed");
				i++;
			} else if (c == '\0') {
				return fail(p, i, "NUL is not allowed");
			} else if ((c < 0x20 && c != '\t') || c == 0x7F) {
				return fail(p, i, "control characters are not allowed");
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
			return fail(p, i, "invalid UTF-8");
		if (len - i < n)
			return fail(p, i, "invalid UTF-8");
		uint32_t cp = c & (0x7Fu >> n);
		for (size_t k = 1; k < n; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return fail(p, i, "invalid UTF-8");
			cp = (cp << 6) | (s[i + k] & 0x3Fu);
		}
		if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
		    (cp >= 0xD800 && cp <= 0xDFFF))
			return fail(p, i, "invalid UTF-8");
		i += n;
	}
	p->line = 1;
	p->line_start = 0;
	return 0;
}

/* ---- lexing ---- */

static int peek(const struct parser *p)
{
	return p->off < p->len ? (unsigned char)p->s[p->off] : -1;
}

static bool is_newline(int c)
{
	return c == '\n' || c == '\r';
}

static bool is_bare(int c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '-';
}

static bool is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static void skip_ws(struct parser *p)
{
	while (p->off < p->len && (p->s[p->off] == ' ' || p->s[p->off] == '\t'))
		p->off++;
}

static void skip_comment(struct parser *p)
{
	while (p->off < p->len && !is_newline(p->s[p->off]))
		p->off++;
}

/* check_text() guarantees a CR is followed by LF. */
static void eat_newline(struct parser *p)
{
	p->off += p->s[p->off] == '\r' ? 2 : 1;
	p->line++;
	p->line_start = p->off;
}

static int parse_key(struct parser *p, struct key *k)
{
	int c = peek(p);
	if (c == '"' || c == '\'')
		return fail(p, p->off, "quoted keys are not supported");
	if (!is_bare(c))
		return fail(p, p->off, "expected a key");
	k->off = p->off;
	k->pos = pos_at(p, p->off);
	while (is_bare(peek(p)))
		p->off++;
	k->len = p->off - k->off;
	return 0;
}

/* ---- tables and arrays ---- */

static uint32_t hash_key(const char *k, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)k[i]) * 16777619u;
	return h;
}

static bool key_eq(const char *key, const char *k, size_t n)
{
	return strncmp(key, k, n) == 0 && key[n] == '\0';
}

static struct lz_toml_entry *table_find(const struct node *t, const char *k, size_t n)
{
	struct lz_toml_entry *e = t->v.table.entries;
	if (t->index) {
		size_t mask = t->index_cap - 1;
		for (size_t h = hash_key(k, n) & mask;; h = (h + 1) & mask) {
			uint32_t slot = t->index[h];
			if (slot == 0)
				return NULL;
			if (key_eq(e[slot - 1].key, k, n))
				return &e[slot - 1];
		}
	}
	for (size_t i = 0; i < t->v.table.len; i++)
		if (key_eq(e[i].key, k, n))
			return &e[i];
	return NULL;
}

static void index_put(uint32_t *index, size_t cap, const char *key, uint32_t slot)
{
	size_t mask = cap - 1;
	size_t h = hash_key(key, strlen(key)) & mask;
	while (index[h] != 0)
		h = (h + 1) & mask;
	index[h] = slot;
}

/* Keeps the index at most half full. */
static int index_update(struct node *t)
{
	size_t len = t->v.table.len;
	if (len < INDEX_MIN_ENTRIES)
		return 0;
	if (len * 2 <= t->index_cap) {
		index_put(t->index, t->index_cap, t->v.table.entries[len - 1].key, (uint32_t)len);
		return 0;
	}
	size_t cap = t->index_cap ? t->index_cap : 16;
	while (cap < len * 2)
		cap *= 2;
	uint32_t *index = calloc(cap, sizeof(*index));
	if (!index)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++)
		index_put(index, cap, t->v.table.entries[i].key, (uint32_t)(i + 1));
	free(t->index);
	t->index = index;
	t->index_cap = cap;
	return 0;
}

/* Appends key = value. On failure the table is unchanged and the caller
 * still owns value. */
static int table_add(struct node *t, const char *k, size_t n, struct lz_toml_pos key_pos, struct node *value)
{
	size_t len = t->v.table.len;
	if (len == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 4;
		struct lz_toml_entry *e = reallocarray(t->v.table.entries, cap, sizeof(*e));
		if (!e)
			return -ENOMEM;
		t->v.table.entries = e;
		t->cap = cap;
	}
	char *key = strndup(k, n);
	if (!key)
		return -ENOMEM;
	t->v.table.entries[len] = (struct lz_toml_entry){ .key = key, .key_pos = key_pos, .value = &value->v };
	t->v.table.len = len + 1;
	if (index_update(t) < 0) {
		t->v.table.len = len;
		free(key);
		return -ENOMEM;
	}
	return 0;
}

/* On failure the caller still owns item. */
static int array_push(struct node *a, struct node *item)
{
	size_t len = a->v.array.len;
	if (len == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 4;
		struct lz_toml_value **items = reallocarray(a->v.array.items, cap, sizeof(*items));
		if (!items)
			return -ENOMEM;
		a->v.array.items = items;
		a->cap = cap;
	}
	a->v.array.items[len] = &item->v;
	a->v.array.len = len + 1;
	return 0;
}

/* ---- values ---- */

static int parse_value(struct parser *p, unsigned depth, bool inl, struct node **ret);
static int parse_keyval(struct parser *p, struct node *t, unsigned depth, bool inl);

static int new_string(struct parser *p, struct lz_toml_pos pos, const char *bytes, size_t n, struct node **ret)
{
	_cleanup_node_ struct node *v = node_new(LZ_TOML_STRING, pos, 0);
	if (!v)
		return oom(p);
	v->v.string.bytes = malloc(n + 1);
	if (!v->v.string.bytes)
		return oom(p);
	if (n > 0)
		memcpy(v->v.string.bytes, bytes, n);
	v->v.string.bytes[n] = '\0';
	v->v.string.len = n;
	*ret = TAKE_PTR(v);
	return 0;
}

static int scratch_reserve(struct parser *p, size_t need)
{
	if (need <= p->scratch_cap)
		return 0;
	size_t cap = p->scratch_cap ? p->scratch_cap : 64;
	while (cap < need)
		cap *= 2;
	char *s = realloc(p->scratch, cap);
	if (!s)
		return -ENOMEM;
	p->scratch = s;
	p->scratch_cap = cap;
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

/* Decodes the escape at p->off (the backslash) into scratch[*n...]. */
static int parse_escape(struct parser *p, struct lz_toml_pos open, size_t *n)
{
	size_t esc = p->off++;
	if (p->off >= p->len)
		return fail_pos(p, open, "unterminated string");
	char c;
	switch (p->s[p->off++]) {
	case 'b': c = '\b'; break;
	case 't': c = '\t'; break;
	case 'n': c = '\n'; break;
	case 'f': c = '\f'; break;
	case 'r': c = '\r'; break;
	case '"': c = '"'; break;
	case '\\': c = '\\'; break;
	case 'u':
	case 'U': {
		size_t digits = p->s[p->off - 1] == 'u' ? 4 : 8;
		if (p->len - p->off < digits)
			return fail(p, esc, "invalid unicode escape");
		uint32_t cp = 0;
		for (size_t i = 0; i < digits; i++) {
			int h = hex_value((unsigned char)p->s[p->off + i]);
			if (h < 0)
				return fail(p, esc, "invalid unicode escape");
			cp = (cp << 4) | (uint32_t)h;
		}
		p->off += digits;
		if (cp == 0)
			return fail(p, esc, "escaped NUL is not allowed");
		if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return fail(p, esc, "invalid unicode escape");
		*n += utf8_encode(p->scratch + *n, cp);
		return 0;
	}
	default:
		return fail(p, esc, "unknown escape");
	}
	p->scratch[(*n)++] = c;
	return 0;
}

static int parse_basic_string(struct parser *p, struct node **ret)
{
	struct lz_toml_pos open = pos_at(p, p->off);
	if (p->len - p->off >= 3 && p->s[p->off + 1] == '"' && p->s[p->off + 2] == '"')
		return fail(p, p->off, "multi-line strings are not supported");
	p->off++;

	size_t n = 0;
	for (;;) {
		if (p->off >= p->len)
			return fail_pos(p, open, "unterminated string");
		char c = p->s[p->off];
		if (c == '"')
			break;
		if (is_newline(c))
			return fail(p, p->off, "newline in string");
		/* An escape decodes to at most 4 bytes. */
		if (scratch_reserve(p, n + 4) < 0)
			return oom(p);
		if (c == '\\') {
			int r = parse_escape(p, open, &n);
			if (r < 0)
				return r;
		} else {
			p->scratch[n++] = c;
			p->off++;
		}
	}
	p->off++;
	return new_string(p, open, p->scratch, n, ret);
}

static int parse_literal_string(struct parser *p, struct node **ret)
{
	struct lz_toml_pos open = pos_at(p, p->off);
	if (p->len - p->off >= 3 && p->s[p->off + 1] == '\'' && p->s[p->off + 2] == '\'')
		return fail(p, p->off, "multi-line strings are not supported");
	size_t start = ++p->off;
	for (;;) {
		if (p->off >= p->len)
			return fail_pos(p, open, "unterminated string");
		char c = p->s[p->off];
		if (c == '\'')
			break;
		if (is_newline(c))
			return fail(p, p->off, "newline in string");
		p->off++;
	}
	int r = new_string(p, open, p->s + start, p->off - start, ret);
	p->off++;
	return r;
}

static bool is_word(int c)
{
	return is_bare(c) || c == '+' || c == '.' || c == ':';
}

static bool word_is(const char *w, size_t n, const char *lit)
{
	return n == strlen(lit) && memcmp(w, lit, n) == 0;
}

/* true, false, or a decimal integer; names what else it looks like. */
static int parse_word(struct parser *p, struct node **ret)
{
	size_t start = p->off;
	struct lz_toml_pos pos = pos_at(p, start);
	while (is_word(peek(p)))
		p->off++;
	const char *w = p->s + start;
	size_t n = p->off - start;

	if (word_is(w, n, "true") || word_is(w, n, "false")) {
		struct node *v = node_new(LZ_TOML_BOOL, pos, 0);
		if (!v)
			return oom(p);
		v->v.boolean = w[0] == 't';
		*ret = v;
		return 0;
	}
	const char *special = w + (n > 0 && (w[0] == '+' || w[0] == '-'));
	size_t special_len = n - (size_t)(special - w);
	if (word_is(special, special_len, "inf") || word_is(special, special_len, "nan"))
		return fail(p, start, "floats are not supported");

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
		return fail(p, start, sign ? "invalid integer" : "expected a value");
	if (i < n) {
		char c = w[i];
		if (c == '.' || c == 'e' || c == 'E')
			return fail(p, start, "floats are not supported");
		if (c == '_')
			return fail(p, start, "underscores in integers are not supported");
		if ((c == '-' || c == ':') && !sign)
			return fail(p, start, "dates and times are not supported");
		if ((c == 'x' || c == 'o' || c == 'b') && nd == 1 && w[ds] == '0')
			return fail(p, start, "only decimal integers are supported");
		return fail(p, start, "invalid integer");
	}
	if (nd > 1 && w[ds] == '0')
		return fail(p, start, "leading zeros are not allowed");

	uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	uint64_t acc = 0;
	for (size_t k = ds; k < n; k++) {
		uint64_t d = (uint64_t)(w[k] - '0');
		if (acc > (limit - d) / 10)
			return fail(p, start, "integer out of range");
		acc = acc * 10 + d;
	}
	struct node *v = node_new(LZ_TOML_INTEGER, pos, 0);
	if (!v)
		return oom(p);
	if (!neg)
		v->v.integer = (int64_t)acc;
	else if (acc == (uint64_t)INT64_MAX + 1)
		v->v.integer = INT64_MIN;
	else
		v->v.integer = -(int64_t)acc;
	*ret = v;
	return 0;
}

/* Whitespace, newlines and comments between array elements; inside an
 * inline table the whole value must stay on one line. */
static int skip_array_space(struct parser *p, bool inl)
{
	for (;;) {
		skip_ws(p);
		int c = peek(p);
		if (c == '#') {
			if (inl)
				return fail(p, p->off, "comments are not allowed in inline tables");
			skip_comment(p);
		} else if (is_newline(c)) {
			if (inl)
				return fail(p, p->off, "newlines are not allowed in inline tables");
			eat_newline(p);
		} else {
			return 0;
		}
	}
}

static int parse_array(struct parser *p, unsigned depth, bool inl, struct node **ret)
{
	struct lz_toml_pos open = pos_at(p, p->off);
	if (depth > LZ_TOML_MAX_DEPTH)
		return fail_depth(p, open);
	_cleanup_node_ struct node *a = node_new(LZ_TOML_ARRAY, open, NODE_SEALED);
	if (!a)
		return oom(p);
	p->off++;

	for (;;) {
		int r = skip_array_space(p, inl);
		if (r < 0)
			return r;
		if (peek(p) == ']')
			break;
		if (peek(p) < 0)
			return fail_pos(p, open, "unterminated array");

		_cleanup_node_ struct node *item = NULL;
		r = parse_value(p, depth, inl, &item);
		if (r < 0)
			return r;
		if (array_push(a, item) < 0)
			return oom(p);
		item = NULL;

		r = skip_array_space(p, inl);
		if (r < 0)
			return r;
		int c = peek(p);
		if (c == ',') {
			p->off++;
			continue;
		}
		if (c == ']')
			break;
		if (c < 0)
			return fail_pos(p, open, "unterminated array");
		return fail(p, p->off, "expected ',' or ']' in array");
	}
	p->off++;
	*ret = TAKE_PTR(a);
	return 0;
}

static int skip_inline_ws(struct parser *p)
{
	skip_ws(p);
	int c = peek(p);
	if (is_newline(c))
		return fail(p, p->off, "newlines are not allowed in inline tables");
	if (c == '#')
		return fail(p, p->off, "comments are not allowed in inline tables");
	return 0;
}

static int parse_inline_table(struct parser *p, unsigned depth, struct node **ret)
{
	struct lz_toml_pos open = pos_at(p, p->off);
	if (depth > LZ_TOML_MAX_DEPTH)
		return fail_depth(p, open);
	_cleanup_node_ struct node *t = node_new(LZ_TOML_TABLE, open, NODE_SEALED);
	if (!t)
		return oom(p);
	p->off++;

	int r = skip_inline_ws(p);
	if (r < 0)
		return r;
	if (peek(p) != '}') {
		for (;;) {
			if (peek(p) < 0)
				return fail_pos(p, open, "unterminated inline table");
			r = parse_keyval(p, t, depth, true);
			if (r < 0)
				return r;
			r = skip_inline_ws(p);
			if (r < 0)
				return r;
			int c = peek(p);
			if (c == '}')
				break;
			if (c < 0)
				return fail_pos(p, open, "unterminated inline table");
			if (c != ',')
				return fail(p, p->off, "expected ',' or '}' in inline table");
			size_t comma = p->off++;
			r = skip_inline_ws(p);
			if (r < 0)
				return r;
			if (peek(p) == '}')
				return fail(p, comma, "trailing comma in inline table");
		}
	}
	p->off++;
	*ret = TAKE_PTR(t);
	return 0;
}

/* depth is the depth of the container the value goes into. */
static int parse_value(struct parser *p, unsigned depth, bool inl, struct node **ret)
{
	int c = peek(p);
	switch (c) {
	case '"':
		return parse_basic_string(p, ret);
	case '\'':
		return parse_literal_string(p, ret);
	case '[':
		return parse_array(p, depth + 1, inl, ret);
	case '{':
		return parse_inline_table(p, depth + 1, ret);
	}
	if (is_word(c))
		return parse_word(p, ret);
	return fail(p, p->off, "expected a value");
}

/* key = value into table t, which sits at depth. */
static int parse_keyval(struct parser *p, struct node *t, unsigned depth, bool inl)
{
	struct key k;
	int r = parse_key(p, &k);
	if (r < 0)
		return r;
	skip_ws(p);
	int c = peek(p);
	if (c == '.')
		return fail(p, p->off, "dotted keys are only allowed in table headers");
	if (c != '=')
		return fail(p, p->off, "expected '=' after key");
	p->off++;
	skip_ws(p);

	const char *name = p->s + k.off;
	if (table_find(t, name, k.len))
		return fail_pos(p, k.pos, "duplicate key '%.*s'", (int)(k.len > MSG_NAME_MAX ? MSG_NAME_MAX : k.len),
				name);

	_cleanup_node_ struct node *v = NULL;
	r = parse_value(p, depth, inl, &v);
	if (r < 0)
		return r;
	if (table_add(t, name, k.len, k.pos, v) < 0)
		return oom(p);
	v = NULL;
	return 0;
}

/* ---- headers ---- */

/* Walks or creates the tables named by keys and selects the target, with
 * the TOML 1.0 rules: a super-table created implicitly may be defined once
 * later; a table is defined by a header at most once; [[x]] appends to an
 * array of tables and a later [x.y] refers to its last element; a value,
 * static array or inline table is never extended or redefined. */
static int apply_header(struct parser *p, struct lz_toml_pos pos, bool aot, const struct key *keys, size_t nk)
{
	char path[MSG_NAME_MAX + 4];
	struct node *t = p->root;

	for (size_t i = 0; i < nk; i++) {
		const struct key *k = &keys[i];
		const char *name = p->s + k->off;
		bool last = i + 1 == nk;
		struct lz_toml_entry *e = table_find(t, name, k->len);

		if (!e) {
			_cleanup_node_ struct node *n = NULL;
			struct node *next;
			if (last && aot) {
				n = node_new(LZ_TOML_ARRAY, pos, NODE_AOT);
				_cleanup_node_ struct node *elem = node_new(LZ_TOML_TABLE, pos, 0);
				if (!n || !elem || array_push(n, elem) < 0)
					return oom(p);
				next = TAKE_PTR(elem);
			} else {
				n = node_new(LZ_TOML_TABLE, pos, last ? 0 : NODE_IMPLICIT);
				if (!n)
					return oom(p);
				next = n;
			}
			if (table_add(t, name, k->len, k->pos, n) < 0)
				return oom(p);
			n = NULL;
			t = next;
			continue;
		}

		struct node *v = to_node(e->value);
		if (v->v.kind == LZ_TOML_TABLE) {
			if (v->flags & NODE_SEALED)
				return fail_pos(p, k->pos, "cannot extend inline table '%s'",
						fmt_path(p, keys, i + 1, path, sizeof(path)));
			if (last && aot)
				return fail_pos(p, k->pos, "'%s' is a table, not an array of tables",
						fmt_path(p, keys, i + 1, path, sizeof(path)));
			if (last) {
				if (!(v->flags & NODE_IMPLICIT))
					return fail_pos(p, k->pos, "table '%s' defined twice",
							fmt_path(p, keys, i + 1, path, sizeof(path)));
				v->flags &= ~NODE_IMPLICIT;
				v->v.pos = pos;
				e->key_pos = k->pos;
			}
			t = v;
		} else if (v->v.kind == LZ_TOML_ARRAY) {
			if (v->flags & NODE_SEALED)
				return fail_pos(p, k->pos, "cannot extend static array '%s'",
						fmt_path(p, keys, i + 1, path, sizeof(path)));
			if (last && !aot)
				return fail_pos(p, k->pos, "'%s' is an array of tables, not a table",
						fmt_path(p, keys, i + 1, path, sizeof(path)));
			if (last) {
				_cleanup_node_ struct node *elem = node_new(LZ_TOML_TABLE, pos, 0);
				if (!elem || array_push(v, elem) < 0)
					return oom(p);
				t = TAKE_PTR(elem);
			} else {
				/* An array of tables is never empty. */
				t = to_node(v->v.array.items[v->v.array.len - 1]);
			}
		} else {
			return fail_pos(p, k->pos, "key '%s' already has a value",
					fmt_path(p, keys, i + 1, path, sizeof(path)));
		}
	}
	p->cur = t;
	p->cur_depth = (unsigned)nk;
	return 0;
}

static int parse_header(struct parser *p)
{
	struct lz_toml_pos pos = pos_at(p, p->off);
	struct key keys[LZ_TOML_MAX_DEPTH];
	size_t nk = 0;

	p->off++;
	bool aot = peek(p) == '[';
	if (aot)
		p->off++;
	for (;;) {
		struct key k;
		skip_ws(p);
		int r = parse_key(p, &k);
		if (r < 0)
			return r;
		if (nk == LZ_TOML_MAX_DEPTH)
			return fail_depth(p, k.pos);
		keys[nk++] = k;
		skip_ws(p);
		if (peek(p) != '.')
			break;
		p->off++;
	}
	if (peek(p) != ']')
		return fail(p, p->off, aot ? "expected ']]'" : "expected ']'");
	p->off++;
	if (aot) {
		if (peek(p) != ']')
			return fail(p, p->off, "expected ']]'");
		p->off++;
	}
	return apply_header(p, pos, aot, keys, nk);
}

/* ---- document ---- */

static int end_line(struct parser *p, const char *after)
{
	skip_ws(p);
	int c = peek(p);
	if (c == '#') {
		skip_comment(p);
		c = peek(p);
	}
	if (c < 0)
		return 0;
	if (!is_newline(c))
		return fail(p, p->off, "unexpected character after %s", after);
	eat_newline(p);
	return 0;
}

static int parse_document(struct parser *p)
{
	while (p->off < p->len) {
		skip_ws(p);
		int c = peek(p);
		const char *after = "value";
		int r = 0;
		if (c == '[') {
			after = "table header";
			r = parse_header(p);
		} else if (c >= 0 && c != '#' && !is_newline(c)) {
			r = parse_keyval(p, p->cur, p->cur_depth, false);
		}
		if (r < 0)
			return r;
		r = end_line(p, after);
		if (r < 0)
			return r;
	}
	return 0;
}

int lz_toml_parse(const char *bytes, size_t len, struct lz_toml_value **ret_root, struct lz_toml_error *err)
{
	assert(ret_root);
	struct parser p = {
		.s = bytes,
		.len = len,
		.line = 1,
		.err = err,
	};

	if (!bytes && len > 0)
		return fail(&p, 0, "no input");
	if (len > TOML_MAX_INPUT)
		return fail(&p, 0, "document larger than %u bytes", TOML_MAX_INPUT);
	int r = check_text(&p);
	if (r < 0)
		return r;

	_cleanup_node_ struct node *root = node_new(LZ_TOML_TABLE, (struct lz_toml_pos){ 1, 1 }, 0);
	if (!root)
		return oom(&p);
	p.root = p.cur = root;
	r = parse_document(&p);
	free(p.scratch);
	if (r < 0)
		return r;
	*ret_root = &TAKE_PTR(root)->v;
	return 0;
}

const struct lz_toml_entry *lz_toml_find(const struct lz_toml_value *t, const char *key)
{
	if (!t || t->kind != LZ_TOML_TABLE || !key)
		return NULL;
	return table_find(to_node(t), key, strlen(key));
}
