/* Strict decoder for the closed TOML subset of the v1 configuration: the
 * document grammar (key/value lines, table headers, arrays, inline tables)
 * and the table model built from it.
 *
 * The grammar (what is accepted, what is refused) is documented in toml.h;
 * this file adds the rules of TOML 1.0 section "Table" and "Array of Tables"
 * about when a header may name an existing key (spec 3.2: no parser default
 * may make a duplicate or aliased key meaningful). The cursor, the text
 * check, keys and scalar values are the scanner's (toml_scan.h); nodes,
 * tables and arrays are the tree's (toml_tree.h).
 *
 * Threat: the document is untrusted bytes (toml_scan.h). Every error names a
 * line and column and never quotes string values, which may hold secrets;
 * key names are quoted, truncated to MSG_NAME_MAX bytes.
 *
 * Invariants:
 * - lz_toml_scan_init() validates the whole input first, so the parser only
 *   ever sees strict UTF-8 without a BOM, NUL or control characters other
 *   than TAB, LF and CR immediately followed by LF.
 * - Every node is owned by exactly one parent or one _cleanup_toml_node_
 *   variable; no failure path leaks.
 * - Depth: a table selected by a header with k keys sits at depth k; each
 *   array or inline table adds one level; nothing may sit deeper than
 *   LZ_TOML_MAX_DEPTH. An array of tables adds one hidden level per key, so
 *   the tree is at most 2 * LZ_TOML_MAX_DEPTH nodes deep and recursion in
 *   parse_value() and lz_toml_free() is bounded. */
#include "config/toml.h"

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "config/toml_scan.h"
#include "config/toml_tree.h"
#include "util/cleanup.h"

/* Longest key or dotted path quoted in a message. */
#define MSG_NAME_MAX 96

struct parser {
	struct lz_toml_scan sc;
	struct lz_toml_node *root;
	struct lz_toml_node *cur; /* table selected by the last header */
	unsigned cur_depth;	  /* number of keys in that header */
};

static int fail_depth(struct lz_toml_scan *sc, struct lz_toml_pos pos)
{
	return lz_toml_scan_fail_at(sc, pos, "nesting deeper than %d levels", LZ_TOML_MAX_DEPTH);
}

/* Writes "a.b.c" for keys[0..n) of document s into buf, truncated with
 * "..." if long. */
static const char *fmt_path(const char *s, const struct lz_toml_key *keys, size_t n, char *buf, size_t size)
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
			memcpy(buf + w, s + keys[i].off, room);
			memcpy(buf + w + room, "...", 4);
			return buf;
		}
		memcpy(buf + w, s + keys[i].off, keys[i].len);
		w += keys[i].len;
	}
	buf[w] = '\0';
	return buf;
}

/* ---- values ---- */

static int parse_value(struct lz_toml_scan *sc, unsigned depth, bool inl, struct lz_toml_node **ret);
static int parse_keyval(struct lz_toml_scan *sc, struct lz_toml_node *t, unsigned depth, bool inl);

/* Whitespace, newlines and comments between array elements; inside an
 * inline table the whole value must stay on one line. */
static int skip_array_space(struct lz_toml_scan *sc, bool inl)
{
	for (;;) {
		lz_toml_scan_skip_ws(sc);
		int c = lz_toml_scan_peek(sc);
		if (c == '#') {
			if (inl)
				return lz_toml_scan_fail(sc, sc->off, "comments are not allowed in inline tables");
			lz_toml_scan_skip_comment(sc);
		} else if (lz_toml_is_newline(c)) {
			if (inl)
				return lz_toml_scan_fail(sc, sc->off, "newlines are not allowed in inline tables");
			lz_toml_scan_eat_newline(sc);
		} else {
			return 0;
		}
	}
}

static int parse_array(struct lz_toml_scan *sc, unsigned depth, bool inl, struct lz_toml_node **ret)
{
	struct lz_toml_pos open = lz_toml_scan_pos(sc, sc->off);
	if (depth > LZ_TOML_MAX_DEPTH)
		return fail_depth(sc, open);
	_cleanup_toml_node_ struct lz_toml_node *a = lz_toml_node_new(LZ_TOML_ARRAY, open, LZ_TOML_NODE_SEALED);
	if (!a)
		return lz_toml_scan_oom(sc);
	sc->off++;

	for (;;) {
		int r = skip_array_space(sc, inl);
		if (r < 0)
			return r;
		if (lz_toml_scan_peek(sc) == ']')
			break;
		if (lz_toml_scan_peek(sc) < 0)
			return lz_toml_scan_fail_at(sc, open, "unterminated array");

		_cleanup_toml_node_ struct lz_toml_node *item = NULL;
		r = parse_value(sc, depth, inl, &item);
		if (r < 0)
			return r;
		if (lz_toml_array_push(a, item) < 0)
			return lz_toml_scan_oom(sc);
		item = NULL;

		r = skip_array_space(sc, inl);
		if (r < 0)
			return r;
		int c = lz_toml_scan_peek(sc);
		if (c == ',') {
			sc->off++;
			continue;
		}
		if (c == ']')
			break;
		if (c < 0)
			return lz_toml_scan_fail_at(sc, open, "unterminated array");
		return lz_toml_scan_fail(sc, sc->off, "expected ',' or ']' in array");
	}
	sc->off++;
	*ret = TAKE_PTR(a);
	return 0;
}

static int skip_inline_ws(struct lz_toml_scan *sc)
{
	lz_toml_scan_skip_ws(sc);
	int c = lz_toml_scan_peek(sc);
	if (lz_toml_is_newline(c))
		return lz_toml_scan_fail(sc, sc->off, "newlines are not allowed in inline tables");
	if (c == '#')
		return lz_toml_scan_fail(sc, sc->off, "comments are not allowed in inline tables");
	return 0;
}

static int parse_inline_table(struct lz_toml_scan *sc, unsigned depth, struct lz_toml_node **ret)
{
	struct lz_toml_pos open = lz_toml_scan_pos(sc, sc->off);
	if (depth > LZ_TOML_MAX_DEPTH)
		return fail_depth(sc, open);
	_cleanup_toml_node_ struct lz_toml_node *t = lz_toml_node_new(LZ_TOML_TABLE, open, LZ_TOML_NODE_SEALED);
	if (!t)
		return lz_toml_scan_oom(sc);
	sc->off++;

	int r = skip_inline_ws(sc);
	if (r < 0)
		return r;
	if (lz_toml_scan_peek(sc) != '}') {
		for (;;) {
			if (lz_toml_scan_peek(sc) < 0)
				return lz_toml_scan_fail_at(sc, open, "unterminated inline table");
			r = parse_keyval(sc, t, depth, true);
			if (r < 0)
				return r;
			r = skip_inline_ws(sc);
			if (r < 0)
				return r;
			int c = lz_toml_scan_peek(sc);
			if (c == '}')
				break;
			if (c < 0)
				return lz_toml_scan_fail_at(sc, open, "unterminated inline table");
			if (c != ',')
				return lz_toml_scan_fail(sc, sc->off, "expected ',' or '}' in inline table");
			size_t comma = sc->off++;
			r = skip_inline_ws(sc);
			if (r < 0)
				return r;
			if (lz_toml_scan_peek(sc) == '}')
				return lz_toml_scan_fail(sc, comma, "trailing comma in inline table");
		}
	}
	sc->off++;
	*ret = TAKE_PTR(t);
	return 0;
}

/* depth is the depth of the container the value goes into. */
static int parse_value(struct lz_toml_scan *sc, unsigned depth, bool inl, struct lz_toml_node **ret)
{
	switch (lz_toml_scan_peek(sc)) {
	case '[':
		return parse_array(sc, depth + 1, inl, ret);
	case '{':
		return parse_inline_table(sc, depth + 1, ret);
	}
	return lz_toml_scan_scalar(sc, ret);
}

/* key = value into table t, which sits at depth. */
static int parse_keyval(struct lz_toml_scan *sc, struct lz_toml_node *t, unsigned depth, bool inl)
{
	struct lz_toml_key k;
	int r = lz_toml_scan_key(sc, &k);
	if (r < 0)
		return r;
	lz_toml_scan_skip_ws(sc);
	int c = lz_toml_scan_peek(sc);
	if (c == '.')
		return lz_toml_scan_fail(sc, sc->off, "dotted keys are only allowed in table headers");
	if (c != '=')
		return lz_toml_scan_fail(sc, sc->off, "expected '=' after key");
	sc->off++;
	lz_toml_scan_skip_ws(sc);

	const char *name = sc->s + k.off;
	if (lz_toml_table_find(t, name, k.len))
		return lz_toml_scan_fail_at(sc, k.pos, "duplicate key '%.*s'",
					    (int)(k.len > MSG_NAME_MAX ? MSG_NAME_MAX : k.len), name);

	_cleanup_toml_node_ struct lz_toml_node *v = NULL;
	r = parse_value(sc, depth, inl, &v);
	if (r < 0)
		return r;
	if (lz_toml_table_add(t, name, k.len, k.pos, v) < 0)
		return lz_toml_scan_oom(sc);
	v = NULL;
	return 0;
}

/* ---- headers ---- */

/* Walks or creates the tables named by keys and selects the target, with
 * the TOML 1.0 rules: a super-table created implicitly may be defined once
 * later; a table is defined by a header at most once; [[x]] appends to an
 * array of tables and a later [x.y] refers to its last element; a value,
 * static array or inline table is never extended or redefined. */
static int apply_header(struct parser *p, struct lz_toml_pos pos, bool aot, const struct lz_toml_key *keys,
			size_t nk)
{
	struct lz_toml_scan *sc = &p->sc;
	char path[MSG_NAME_MAX + 4];
	struct lz_toml_node *t = p->root;

	for (size_t i = 0; i < nk; i++) {
		const struct lz_toml_key *k = &keys[i];
		const char *name = sc->s + k->off;
		bool last = i + 1 == nk;
		struct lz_toml_entry *e = lz_toml_table_find(t, name, k->len);

		if (!e) {
			_cleanup_toml_node_ struct lz_toml_node *n = NULL;
			struct lz_toml_node *next;
			if (last && aot) {
				n = lz_toml_node_new(LZ_TOML_ARRAY, pos, LZ_TOML_NODE_AOT);
				_cleanup_toml_node_ struct lz_toml_node *elem =
					lz_toml_node_new(LZ_TOML_TABLE, pos, 0);
				if (!n || !elem || lz_toml_array_push(n, elem) < 0)
					return lz_toml_scan_oom(sc);
				next = TAKE_PTR(elem);
			} else {
				n = lz_toml_node_new(LZ_TOML_TABLE, pos, last ? 0 : LZ_TOML_NODE_IMPLICIT);
				if (!n)
					return lz_toml_scan_oom(sc);
				next = n;
			}
			if (lz_toml_table_add(t, name, k->len, k->pos, n) < 0)
				return lz_toml_scan_oom(sc);
			n = NULL;
			t = next;
			continue;
		}

		struct lz_toml_node *v = lz_toml_node_of(e->value);
		if (v->v.kind == LZ_TOML_TABLE) {
			if (v->flags & LZ_TOML_NODE_SEALED)
				return lz_toml_scan_fail_at(sc, k->pos, "cannot extend inline table '%s'",
							    fmt_path(sc->s, keys, i + 1, path, sizeof(path)));
			if (last && aot)
				return lz_toml_scan_fail_at(sc, k->pos, "'%s' is a table, not an array of tables",
							    fmt_path(sc->s, keys, i + 1, path, sizeof(path)));
			if (last) {
				if (!(v->flags & LZ_TOML_NODE_IMPLICIT))
					return lz_toml_scan_fail_at(sc, k->pos, "table '%s' defined twice",
								    fmt_path(sc->s, keys, i + 1, path, sizeof(path)));
				v->flags &= ~LZ_TOML_NODE_IMPLICIT;
				v->v.pos = pos;
				e->key_pos = k->pos;
			}
			t = v;
		} else if (v->v.kind == LZ_TOML_ARRAY) {
			if (v->flags & LZ_TOML_NODE_SEALED)
				return lz_toml_scan_fail_at(sc, k->pos, "cannot extend static array '%s'",
							    fmt_path(sc->s, keys, i + 1, path, sizeof(path)));
			if (last && !aot)
				return lz_toml_scan_fail_at(sc, k->pos, "'%s' is an array of tables, not a table",
							    fmt_path(sc->s, keys, i + 1, path, sizeof(path)));
			if (last) {
				_cleanup_toml_node_ struct lz_toml_node *elem =
					lz_toml_node_new(LZ_TOML_TABLE, pos, 0);
				if (!elem || lz_toml_array_push(v, elem) < 0)
					return lz_toml_scan_oom(sc);
				t = TAKE_PTR(elem);
			} else {
				/* An array of tables is never empty. */
				t = lz_toml_node_of(v->v.array.items[v->v.array.len - 1]);
			}
		} else {
			return lz_toml_scan_fail_at(sc, k->pos, "key '%s' already has a value",
						    fmt_path(sc->s, keys, i + 1, path, sizeof(path)));
		}
	}
	p->cur = t;
	p->cur_depth = (unsigned)nk;
	return 0;
}

static int parse_header(struct parser *p)
{
	struct lz_toml_scan *sc = &p->sc;
	struct lz_toml_pos pos = lz_toml_scan_pos(sc, sc->off);
	struct lz_toml_key keys[LZ_TOML_MAX_DEPTH];
	size_t nk = 0;

	sc->off++;
	bool aot = lz_toml_scan_peek(sc) == '[';
	if (aot)
		sc->off++;
	for (;;) {
		struct lz_toml_key k;
		lz_toml_scan_skip_ws(sc);
		int r = lz_toml_scan_key(sc, &k);
		if (r < 0)
			return r;
		if (nk == LZ_TOML_MAX_DEPTH)
			return fail_depth(sc, k.pos);
		keys[nk++] = k;
		lz_toml_scan_skip_ws(sc);
		if (lz_toml_scan_peek(sc) != '.')
			break;
		sc->off++;
	}
	if (lz_toml_scan_peek(sc) != ']')
		return lz_toml_scan_fail(sc, sc->off, aot ? "expected ']]'" : "expected ']'");
	sc->off++;
	if (aot) {
		if (lz_toml_scan_peek(sc) != ']')
			return lz_toml_scan_fail(sc, sc->off, "expected ']]'");
		sc->off++;
	}
	return apply_header(p, pos, aot, keys, nk);
}

/* ---- document ---- */

static int end_line(struct lz_toml_scan *sc, const char *after)
{
	lz_toml_scan_skip_ws(sc);
	int c = lz_toml_scan_peek(sc);
	if (c == '#') {
		lz_toml_scan_skip_comment(sc);
		c = lz_toml_scan_peek(sc);
	}
	if (c < 0)
		return 0;
	if (!lz_toml_is_newline(c))
		return lz_toml_scan_fail(sc, sc->off, "unexpected character after %s", after);
	lz_toml_scan_eat_newline(sc);
	return 0;
}

static int parse_document(struct parser *p)
{
	struct lz_toml_scan *sc = &p->sc;
	while (sc->off < sc->len) {
		lz_toml_scan_skip_ws(sc);
		int c = lz_toml_scan_peek(sc);
		const char *after = "value";
		int r = 0;
		if (c == '[') {
			after = "table header";
			r = parse_header(p);
		} else if (c >= 0 && c != '#' && !lz_toml_is_newline(c)) {
			r = parse_keyval(sc, p->cur, p->cur_depth, false);
		}
		if (r < 0)
			return r;
		r = end_line(sc, after);
		if (r < 0)
			return r;
	}
	return 0;
}

int lz_toml_parse(const char *bytes, size_t len, struct lz_toml_value **ret_root, struct lz_toml_error *err)
{
	assert(ret_root);
	struct parser p = { 0 };

	int r = lz_toml_scan_init(&p.sc, bytes, len, err);
	if (r < 0)
		return r;

	_cleanup_toml_node_ struct lz_toml_node *root =
		lz_toml_node_new(LZ_TOML_TABLE, (struct lz_toml_pos){ 1, 1 }, 0);
	if (!root)
		return lz_toml_scan_oom(&p.sc);
	p.root = p.cur = root;
	r = parse_document(&p);
	lz_toml_scan_done(&p.sc);
	if (r < 0)
		return r;
	*ret_root = &TAKE_PTR(root)->v;
	return 0;
}
