/* Unit tests for core/config/toml.h, the strict TOML subset decoder, through
 * its public interface (the scanner and the tree have their own suites).
 *
 * Every accepted construct is checked with its values and positions; every
 * refusal documented in toml.h is checked with its line, column and message.
 * Documents are copied into exactly-sized heap buffers with no terminating
 * NUL, so AddressSanitizer catches any read past the end. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config/toml.h"

#define SENTINEL ((struct lz_toml_value *)(uintptr_t)0x5a5a)

static int parse_exact(const char *doc, size_t len, struct lz_toml_value **ret_root, struct lz_toml_error *err)
{
	char *copy = malloc(len ? len : 1);
	assert_non_null(copy);
	if (len)
		memcpy(copy, doc, len);
	int r = lz_toml_parse(copy, len, ret_root, err);
	free(copy);
	return r;
}

#define PARSE(doc) parse_ok_at(doc, sizeof(doc) - 1, __LINE__)
#define REFUSED(doc, line, col, msg) refused_at(doc, sizeof(doc) - 1, line, col, msg, __LINE__)

static struct lz_toml_value *parse_ok_at(const char *doc, size_t len, int at)
{
	struct lz_toml_value *root = NULL;
	struct lz_toml_error err = { 0 };
	int r = parse_exact(doc, len, &root, &err);
	if (r != 0)
		print_message("unexpected error %d at %u:%u: %s\n", r, err.pos.line, err.pos.column, err.msg);
	_assert_int_equal(r, 0, __FILE__, at);
	_assert_true(root != NULL, "root", __FILE__, at);
	_assert_int_equal(root->kind, LZ_TOML_TABLE, __FILE__, at);
	return root;
}

static void refused_at(const char *doc, size_t len, uint32_t line, uint32_t col, const char *msg, int at)
{
	struct lz_toml_value *root = SENTINEL;
	struct lz_toml_error err = { 0 };
	int r = parse_exact(doc, len, &root, &err);
	if (r != -EINVAL || err.pos.line != line || err.pos.column != col || !strstr(err.msg, msg))
		print_message("got %d at %u:%u: '%s'; want %u:%u '%s'\n", r, err.pos.line, err.pos.column, err.msg,
			      line, col, msg);
	_assert_int_equal(r, -EINVAL, __FILE__, at);
	_assert_true(root == SENTINEL, "root untouched", __FILE__, at);
	_assert_int_equal(err.pos.line, line, __FILE__, at);
	_assert_int_equal(err.pos.column, col, __FILE__, at);
	_assert_true(strstr(err.msg, msg) != NULL, "message", __FILE__, at);
	_assert_true(memchr(err.msg, '\0', sizeof(err.msg)) != NULL, "message terminated", __FILE__, at);
}

/* Value of key in table t, asserting it exists. */
static const struct lz_toml_value *get(const struct lz_toml_value *t, const char *key)
{
	const struct lz_toml_entry *e = lz_toml_find(t, key);
	if (!e)
		print_message("missing key '%s'\n", key);
	assert_non_null(e);
	assert_string_equal(e->key, key);
	return e->value;
}

static const struct lz_toml_entry *entry(const struct lz_toml_value *t, const char *key)
{
	const struct lz_toml_entry *e = lz_toml_find(t, key);
	assert_non_null(e);
	return e;
}

static void assert_pos(struct lz_toml_pos pos, uint32_t line, uint32_t column)
{
	assert_int_equal(pos.line, line);
	assert_int_equal(pos.column, column);
}

static void assert_str(const struct lz_toml_value *v, const char *want)
{
	assert_int_equal(v->kind, LZ_TOML_STRING);
	assert_int_equal(v->string.len, strlen(want));
	assert_memory_equal(v->string.bytes, want, strlen(want) + 1);
}

static void assert_int(const struct lz_toml_value *v, int64_t want)
{
	assert_int_equal(v->kind, LZ_TOML_INTEGER);
	assert_true(v->integer == want);
}

/* ---- accepted ---- */

static void test_lz_toml_parse__empty_document(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("");
	assert_int_equal(root->table.len, 0);
	assert_pos(root->pos, 1, 1);
	lz_toml_free(root);
}

static void test_lz_toml_parse__null_bytes_with_zero_length(void **state)
{
	(void)state;
	struct lz_toml_value *root = NULL;
	assert_int_equal(lz_toml_parse(NULL, 0, &root, NULL), 0);
	assert_non_null(root);
	assert_int_equal(root->table.len, 0);
	lz_toml_free(root);
}

static void test_lz_toml_parse__comments_and_blank_lines(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("# head\n\n   \t\n  # indented ☃\r\n\n");
	assert_int_equal(root->table.len, 0);
	lz_toml_free(root);
}

static void test_lz_toml_parse__basic_string(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("image = \"oci:/srv/images/dev:latest\"\n");
	const struct lz_toml_entry *e = entry(root, "image");
	assert_pos(e->key_pos, 1, 1);
	assert_pos(e->value->pos, 1, 9);
	assert_str(e->value, "oci:/srv/images/dev:latest");
	lz_toml_free(root);
}

static void test_lz_toml_parse__basic_string_escapes(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("a = \"\\b\\t\\n\\f\\r\\\"\\\\\"\n"
					   "b = \"\\u00e9\\u20AC\\U0001F600\\u0001\"\n");
	assert_str(get(root, "a"), "\b\t\n\f\r\"\\");
	assert_str(get(root, "b"), "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\x01");
	lz_toml_free(root);
}

static void test_lz_toml_parse__literal_string_keeps_backslashes(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("p = 'C:\\dir\\n \"q\"'\n");
	assert_str(get(root, "p"), "C:\\dir\\n \"q\"");
	assert_pos(get(root, "p")->pos, 1, 5);
	lz_toml_free(root);
}

static void test_lz_toml_parse__empty_strings(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("a = \"\"\nb = ''\n");
	assert_str(get(root, "a"), "");
	assert_str(get(root, "b"), "");
	lz_toml_free(root);
}

static void test_lz_toml_parse__utf8_and_tab_in_strings(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("a = \"h\xC3\xA9\tllo \xF0\x9F\x98\x80\"\nb = '\t\xE2\x82\xAC'\n"
					   "c = \"\xC2\x85\"\n");
	assert_str(get(root, "a"), "h\xC3\xA9\tllo \xF0\x9F\x98\x80");
	assert_str(get(root, "b"), "\t\xE2\x82\xAC");
	assert_str(get(root, "c"), "\xC2\x85");
	lz_toml_free(root);
}

static void test_lz_toml_parse__integers(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("a = 0\nb = +1\nc = -42\nd = +0\ne = -0\n"
					   "f = 9223372036854775807\ng = -9223372036854775808\nh = 50000\n");
	assert_int(get(root, "a"), 0);
	assert_int(get(root, "b"), 1);
	assert_int(get(root, "c"), -42);
	assert_int(get(root, "d"), 0);
	assert_int(get(root, "e"), 0);
	assert_int(get(root, "f"), INT64_MAX);
	assert_int(get(root, "g"), INT64_MIN);
	assert_int(get(root, "h"), 50000);
	assert_pos(get(root, "c")->pos, 3, 5);
	lz_toml_free(root);
}

static void test_lz_toml_parse__booleans(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("t = true\nf = false # no\n");
	assert_int_equal(get(root, "t")->kind, LZ_TOML_BOOL);
	assert_true(get(root, "t")->boolean);
	assert_false(get(root, "f")->boolean);
	assert_pos(get(root, "f")->pos, 2, 5);
	lz_toml_free(root);
}

static void test_lz_toml_parse__array_spans_lines_with_comments_and_trailing_comma(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("dirs = [ # first\n"
					   "  \"/root\",\n"
					   "\n"
					   "  # between\n"
					   "  '/usr' , # after\n"
					   "]\n"
					   "next = 1\n");
	const struct lz_toml_value *a = get(root, "dirs");
	assert_int_equal(a->kind, LZ_TOML_ARRAY);
	assert_pos(a->pos, 1, 8);
	assert_int_equal(a->array.len, 2);
	assert_str(a->array.items[0], "/root");
	assert_pos(a->array.items[0]->pos, 2, 3);
	assert_str(a->array.items[1], "/usr");
	assert_pos(a->array.items[1]->pos, 5, 3);
	assert_pos(entry(root, "next")->key_pos, 7, 1);
	lz_toml_free(root);
}

static void test_lz_toml_parse__array_mixed_types_and_nesting(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("m = [1, \"two\", true, [3, []], { k = 4 }]\n");
	const struct lz_toml_value *a = get(root, "m");
	assert_int_equal(a->array.len, 5);
	assert_int(a->array.items[0], 1);
	assert_str(a->array.items[1], "two");
	assert_int_equal(a->array.items[2]->kind, LZ_TOML_BOOL);
	const struct lz_toml_value *inner = a->array.items[3];
	assert_int_equal(inner->kind, LZ_TOML_ARRAY);
	assert_pos(inner->pos, 1, 22);
	assert_int_equal(inner->array.len, 2);
	assert_int_equal(inner->array.items[1]->kind, LZ_TOML_ARRAY);
	assert_int_equal(inner->array.items[1]->array.len, 0);
	assert_pos(a->array.items[4]->pos, 1, 31);
	assert_int(get(a->array.items[4], "k"), 4);
	lz_toml_free(root);
}

static void test_lz_toml_parse__empty_array(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("deny = []\nx = [\n]\n");
	assert_int_equal(get(root, "deny")->kind, LZ_TOML_ARRAY);
	assert_int_equal(get(root, "deny")->array.len, 0);
	assert_int_equal(get(root, "x")->array.len, 0);
	lz_toml_free(root);
}

static void test_lz_toml_parse__inline_table(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("v = { source = \"/a\", destination='/b',ro=true }\n");
	const struct lz_toml_value *t = get(root, "v");
	assert_int_equal(t->kind, LZ_TOML_TABLE);
	assert_pos(t->pos, 1, 5);
	assert_int_equal(t->table.len, 3);
	assert_string_equal(t->table.entries[0].key, "source");
	assert_string_equal(t->table.entries[1].key, "destination");
	assert_string_equal(t->table.entries[2].key, "ro");
	assert_pos(t->table.entries[0].key_pos, 1, 7);
	assert_pos(t->table.entries[0].value->pos, 1, 16);
	assert_pos(t->table.entries[1].key_pos, 1, 22);
	assert_pos(t->table.entries[2].key_pos, 1, 39);
	assert_str(get(t, "destination"), "/b");
	lz_toml_free(root);
}

static void test_lz_toml_parse__empty_and_nested_inline_tables(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("e = {}\nf = {  }\nn = { a = { b = [1, 2] } }\n");
	assert_int_equal(get(root, "e")->table.len, 0);
	assert_int_equal(get(root, "f")->table.len, 0);
	const struct lz_toml_value *b = get(get(get(root, "n"), "a"), "b");
	assert_int_equal(b->array.len, 2);
	assert_pos(b->pos, 3, 17);
	lz_toml_free(root);
}

static void test_lz_toml_parse__array_of_inline_tables(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("[profiles.dev]\n"
					   "volumes = [{ source = \"/a\", destination = \"/b\" },\n"
					   "           { source = \"/c\", destination = \"/d\", read_only = true }]\n");
	const struct lz_toml_value *vols = get(get(get(root, "profiles"), "dev"), "volumes");
	assert_int_equal(vols->array.len, 2);
	assert_pos(vols->array.items[0]->pos, 2, 12);
	assert_pos(vols->array.items[1]->pos, 3, 12);
	assert_str(get(vols->array.items[0], "source"), "/a");
	assert_str(get(vols->array.items[1], "destination"), "/d");
	assert_true(get(vols->array.items[1], "read_only")->boolean);
	assert_pos(entry(vols->array.items[1], "read_only")->key_pos, 3, 49);
	lz_toml_free(root);
}

static void test_lz_toml_parse__table_headers(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("top = 1\n"
					   "[storage]\n"
					   "data_root = \"/d\"\n"
					   "  [runtime] # indented\n"
					   "runsc_dcache = 50000\n");
	assert_int_equal(root->table.len, 3);
	assert_string_equal(root->table.entries[0].key, "top");
	assert_string_equal(root->table.entries[1].key, "storage");
	assert_string_equal(root->table.entries[2].key, "runtime");
	const struct lz_toml_entry *s = entry(root, "storage");
	assert_pos(s->key_pos, 2, 2);
	assert_pos(s->value->pos, 2, 1);
	const struct lz_toml_entry *rt = entry(root, "runtime");
	assert_pos(rt->key_pos, 4, 4);
	assert_pos(rt->value->pos, 4, 3);
	assert_int(get(rt->value, "runsc_dcache"), 50000);
	assert_pos(entry(rt->value, "runsc_dcache")->key_pos, 5, 1);
	assert_null(lz_toml_find(root, "data_root"));
	lz_toml_free(root);
}

static void test_lz_toml_parse__header_whitespace_around_keys(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("[ a . b\t]\nx = 1\n[[ c . d ]]\ny = 2\n");
	const struct lz_toml_entry *b = entry(get(root, "a"), "b");
	assert_pos(b->key_pos, 1, 7);
	assert_int(get(b->value, "x"), 1);
	const struct lz_toml_value *d = get(get(root, "c"), "d");
	assert_int_equal(d->kind, LZ_TOML_ARRAY);
	assert_int(get(d->array.items[0], "y"), 2);
	lz_toml_free(root);
}

static void test_lz_toml_parse__implicit_super_table_defined_later_once(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("[profiles.dev.env]\n"
					   "A = \"B\"\n"
					   "[profiles.dev]\n"
					   "image = \"i\"\n"
					   "[profiles]\n"
					   "default = \"dev\"\n");
	const struct lz_toml_entry *profiles = entry(root, "profiles");
	assert_pos(profiles->key_pos, 5, 2);
	assert_pos(profiles->value->pos, 5, 1);
	const struct lz_toml_entry *dev = entry(profiles->value, "dev");
	assert_pos(dev->key_pos, 3, 11);
	assert_pos(dev->value->pos, 3, 1);
	/* Document order: env was created before image was assigned. */
	assert_string_equal(dev->value->table.entries[0].key, "env");
	assert_string_equal(dev->value->table.entries[1].key, "image");
	assert_str(get(get(dev->value, "env"), "A"), "B");
	assert_str(get(profiles->value, "default"), "dev");
	lz_toml_free(root);
}

static void test_lz_toml_parse__implicit_table_stays_implicit_without_header(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("[a.b.c]\n[a.b.d]\n[a.x]\n");
	const struct lz_toml_value *a = get(root, "a");
	assert_int_equal(a->table.len, 2);
	assert_int_equal(get(a, "b")->table.len, 2);
	assert_pos(a->pos, 1, 1);
	lz_toml_free(root);
}

static void test_lz_toml_parse__array_of_tables_appends(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("[[v]]\n"
					   "s = 1\n"
					   "[v.opt]\n"
					   "o = 1\n"
					   "[[v]]\n"
					   "s = 2\n"
					   "[v.opt]\n"
					   "o = 2\n");
	const struct lz_toml_entry *v = entry(root, "v");
	assert_pos(v->key_pos, 1, 3);
	assert_int_equal(v->value->kind, LZ_TOML_ARRAY);
	assert_pos(v->value->pos, 1, 1);
	assert_int_equal(v->value->array.len, 2);
	const struct lz_toml_value *e0 = v->value->array.items[0];
	const struct lz_toml_value *e1 = v->value->array.items[1];
	assert_pos(e0->pos, 1, 1);
	assert_pos(e1->pos, 5, 1);
	assert_int(get(e0, "s"), 1);
	assert_int(get(get(e0, "opt"), "o"), 1);
	assert_int(get(e1, "s"), 2);
	assert_int(get(get(e1, "opt"), "o"), 2);
	lz_toml_free(root);
}

static void test_lz_toml_parse__nested_array_of_tables(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("[[a]]\n[[a.b]]\nx = 1\n[[a.b]]\nx = 2\n[[a]]\n[[a.b]]\nx = 3\n");
	const struct lz_toml_value *a = get(root, "a");
	assert_int_equal(a->array.len, 2);
	const struct lz_toml_value *b0 = get(a->array.items[0], "b");
	const struct lz_toml_value *b1 = get(a->array.items[1], "b");
	assert_int_equal(b0->array.len, 2);
	assert_int_equal(b1->array.len, 1);
	assert_int(get(b0->array.items[1], "x"), 2);
	assert_int(get(b1->array.items[0], "x"), 3);
	lz_toml_free(root);
}

static void test_lz_toml_parse__array_of_tables_under_defined_table(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("[p]\nx = 1\n[[p.q]]\n[p.r]\n");
	const struct lz_toml_value *p = get(root, "p");
	assert_int_equal(get(p, "q")->kind, LZ_TOML_ARRAY);
	assert_int_equal(get(p, "r")->kind, LZ_TOML_TABLE);
	lz_toml_free(root);
}

static void test_lz_toml_parse__crlf_line_endings(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("a = 1\r\n[t]\r\nb = [\r\n 2,\r\n]\r\n# c\r\nc = 'x'");
	const struct lz_toml_value *t = get(root, "t");
	assert_pos(t->pos, 2, 1);
	assert_pos(get(t, "b")->array.items[0]->pos, 4, 2);
	assert_pos(entry(t, "c")->key_pos, 7, 1);
	assert_pos(get(t, "c")->pos, 7, 5);
	lz_toml_free(root);
}

static void test_lz_toml_parse__no_final_newline_and_tabs(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("\tkey\t=\t\"v\"\t# c");
	const struct lz_toml_entry *e = entry(root, "key");
	assert_pos(e->key_pos, 1, 2);
	assert_pos(e->value->pos, 1, 8);
	lz_toml_free(root);
}

static void test_lz_toml_parse__bare_key_characters(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("A-z_09 = 1\n1234 = 2\n- = 3\n_ = 4\n[true.false]\n");
	assert_int(get(root, "A-z_09"), 1);
	assert_int(get(root, "1234"), 2);
	assert_int(get(root, "-"), 3);
	assert_int(get(root, "_"), 4);
	assert_non_null(lz_toml_find(get(root, "true"), "false"));
	lz_toml_free(root);
}

static void test_lz_toml_parse__columns_count_bytes(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("a = [\"\xC3\xA9\xE2\x82\xAC\", 1]\n");
	/* "é€" is 2 + 3 bytes, so the 1 starts at byte 15. */
	assert_pos(get(root, "a")->array.items[1]->pos, 1, 15);
	lz_toml_free(root);
	REFUSED("a = \"\xC3\xA9\" x\n", 1, 10, "after value");
}

static void test_lz_toml_parse__full_v1_document(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("version = 1\n"
					   "[storage]\n"
					   "data_root = \"/home/u/.local/share/lazaret\"\n"
					   "[runtime]\n"
					   "runsc_dcache = 50000\n"
					   "[profiles.dev]\n"
					   "image = \"oci:/srv/images/dev:latest\"\n"
					   "persistent_dirs = [\"/root\", \"/usr\"]\n"
					   "isolate_ignored = false\n"
					   "[profiles.dev.env]\n"
					   "API_TOKEN = \"HOST_API_TOKEN\"\n"
					   "[[profiles.dev.volumes]]\n"
					   "source = \"/srv/data\"\n"
					   "destination = \"/data\"\n"
					   "read_only = true\n"
					   "[profiles.dev.network]\n"
					   "allow = [\"10.250.0.0/24\"]\n"
					   "deny = []\n"
					   "[[profiles.dev.escalation.auto_approve]]\n"
					   "executable = \"/usr/bin/git\"\n"
					   "args = [\"fetch\", \"--all\"]\n");
	assert_int_equal(root->table.len, 4);
	assert_int(get(root, "version"), 1);
	assert_str(get(get(root, "storage"), "data_root"), "/home/u/.local/share/lazaret");
	assert_int(get(get(root, "runtime"), "runsc_dcache"), 50000);

	const struct lz_toml_value *profiles = get(root, "profiles");
	assert_int_equal(profiles->table.len, 1);
	const struct lz_toml_entry *dev_e = entry(profiles, "dev");
	assert_pos(dev_e->key_pos, 6, 11);
	const struct lz_toml_value *dev = dev_e->value;
	assert_pos(dev->pos, 6, 1);
	const char *order[] = { "image", "persistent_dirs", "isolate_ignored", "env", "volumes", "network", "escalation" };
	assert_int_equal(dev->table.len, sizeof(order) / sizeof(order[0]));
	for (size_t i = 0; i < dev->table.len; i++)
		assert_string_equal(dev->table.entries[i].key, order[i]);

	assert_str(get(dev, "image"), "oci:/srv/images/dev:latest");
	const struct lz_toml_value *pd = get(dev, "persistent_dirs");
	assert_int_equal(pd->array.len, 2);
	assert_str(pd->array.items[1], "/usr");
	assert_pos(pd->array.items[1]->pos, 8, 29);
	assert_false(get(dev, "isolate_ignored")->boolean);

	const struct lz_toml_entry *tok = entry(get(dev, "env"), "API_TOKEN");
	assert_pos(tok->key_pos, 11, 1);
	assert_pos(tok->value->pos, 11, 13);
	assert_str(tok->value, "HOST_API_TOKEN");

	const struct lz_toml_value *vols = get(dev, "volumes");
	assert_int_equal(vols->kind, LZ_TOML_ARRAY);
	assert_int_equal(vols->array.len, 1);
	assert_pos(vols->array.items[0]->pos, 12, 1);
	assert_str(get(vols->array.items[0], "source"), "/srv/data");
	assert_str(get(vols->array.items[0], "destination"), "/data");
	assert_true(get(vols->array.items[0], "read_only")->boolean);

	const struct lz_toml_value *net = get(dev, "network");
	assert_str(get(net, "allow")->array.items[0], "10.250.0.0/24");
	assert_int_equal(get(net, "deny")->array.len, 0);

	const struct lz_toml_value *aa = get(get(dev, "escalation"), "auto_approve");
	assert_int_equal(aa->array.len, 1);
	assert_str(get(aa->array.items[0], "executable"), "/usr/bin/git");
	const struct lz_toml_value *args = get(aa->array.items[0], "args");
	assert_str(args->array.items[0], "fetch");
	assert_str(args->array.items[1], "--all");
	assert_pos(args->array.items[1]->pos, 21, 18);
	lz_toml_free(root);
}

static void test_lz_toml_parse__max_depth_accepted(void **state)
{
	(void)state;
	char doc[256];
	int n = 0;
	n += snprintf(doc + n, sizeof(doc) - n, "a = ");
	for (int i = 0; i < LZ_TOML_MAX_DEPTH; i++)
		doc[n++] = '[';
	for (int i = 0; i < LZ_TOML_MAX_DEPTH; i++)
		doc[n++] = ']';
	struct lz_toml_value *root = parse_ok_at(doc, (size_t)n, __LINE__);
	const struct lz_toml_value *v = get(root, "a");
	for (int i = 1; i < LZ_TOML_MAX_DEPTH; i++) {
		assert_int_equal(v->kind, LZ_TOML_ARRAY);
		assert_int_equal(v->array.len, 1);
		v = v->array.items[0];
	}
	assert_int_equal(v->array.len, 0);
	lz_toml_free(root);

	/* A header of 32 keys; values inside it may be scalars. */
	n = 0;
	doc[n++] = '[';
	for (int i = 0; i < LZ_TOML_MAX_DEPTH; i++)
		n += snprintf(doc + n, sizeof(doc) - n, i ? ".k" : "k");
	n += snprintf(doc + n, sizeof(doc) - n, "]\nx = 1\n");
	root = parse_ok_at(doc, (size_t)n, __LINE__);
	v = root;
	for (int i = 0; i < LZ_TOML_MAX_DEPTH; i++)
		v = get(v, "k");
	assert_int(get(v, "x"), 1);
	lz_toml_free(root);
}

static void test_lz_toml_parse__many_keys_are_indexed(void **state)
{
	(void)state;
	size_t cap = 5000 * 16;
	char *doc = malloc(cap);
	assert_non_null(doc);
	size_t n = 0;
	for (int i = 0; i < 5000; i++)
		n += (size_t)snprintf(doc + n, cap - n, "k%d = %d\n", i, i);
	struct lz_toml_value *root = parse_ok_at(doc, n, __LINE__);
	assert_int_equal(root->table.len, 5000);
	for (int i = 0; i < 5000; i += 7) {
		char key[16];
		snprintf(key, sizeof(key), "k%d", i);
		assert_int(get(root, key), i);
	}
	assert_null(lz_toml_find(root, "k5000"));
	lz_toml_free(root);

	n += (size_t)snprintf(doc + n, cap - n, "k4321 = 0\n");
	refused_at(doc, n, 5001, 1, "duplicate key 'k4321'", __LINE__);
	free(doc);
}

static void test_lz_toml_find__missing_key_and_non_table(void **state)
{
	(void)state;
	struct lz_toml_value *root = PARSE("a = 1\n");
	assert_null(lz_toml_find(root, "b"));
	assert_null(lz_toml_find(root, ""));
	assert_null(lz_toml_find(root, NULL));
	assert_null(lz_toml_find(get(root, "a"), "a"));
	assert_null(lz_toml_find(NULL, "a"));
	lz_toml_free(root);
}

static void test_lz_toml_free__accepts_null(void **state)
{
	(void)state;
	lz_toml_free(NULL);
}

static void test_lz_toml_parse__null_error_object(void **state)
{
	(void)state;
	struct lz_toml_value *root = SENTINEL;
	assert_int_equal(lz_toml_parse("a = ", 4, &root, NULL), -EINVAL);
	assert_true(root == SENTINEL);
}

static void test_lz_toml_parse__null_bytes_with_length(void **state)
{
	(void)state;
	struct lz_toml_value *root = SENTINEL;
	struct lz_toml_error err = { 0 };
	assert_int_equal(lz_toml_parse(NULL, 3, &root, &err), -EINVAL);
	assert_true(root == SENTINEL);
	assert_non_null(strstr(err.msg, "no input"));
}

static void test_lz_toml_parse__oversized_document(void **state)
{
	(void)state;
	size_t len = (16u << 20) + 1;
	char *doc = malloc(len);
	assert_non_null(doc);
	memset(doc, '\n', len);
	struct lz_toml_value *root = SENTINEL;
	struct lz_toml_error err = { 0 };
	assert_int_equal(lz_toml_parse(doc, len, &root, &err), -EINVAL);
	assert_true(root == SENTINEL);
	assert_non_null(strstr(err.msg, "document larger than"));
	free(doc);
}

/* ---- refused: encoding ---- */

static void test_lz_toml_parse__refuses_bom(void **state)
{
	(void)state;
	REFUSED("\xEF\xBB\xBF" "a = 1\n", 1, 1, "byte-order mark");
}

static void test_lz_toml_parse__refuses_nul(void **state)
{
	(void)state;
	REFUSED("a = 1\n\0", 2, 1, "NUL");
	REFUSED("a = \"x\0y\"\n", 1, 7, "NUL");
	REFUSED("a = 'x\0y'\n", 1, 7, "NUL");
	REFUSED("a = 1 # x\0\n", 1, 10, "NUL");
	REFUSED("a\0 = 1\n", 1, 2, "NUL");
}

static void test_lz_toml_parse__refuses_control_characters(void **state)
{
	(void)state;
	REFUSED("a = \"x\x01\"\n", 1, 7, "control character");
	REFUSED("a = 'x\x1b'\n", 1, 7, "control character");
	REFUSED("# bell \x07\n", 1, 8, "control character");
	REFUSED("a = 1\n\x0b", 2, 1, "control character");
	REFUSED("a = \"\x0c\"", 1, 6, "control character");
	REFUSED("a = \"\x7f\"", 1, 6, "control character");
	REFUSED("# del \x7f", 1, 7, "control character");
}

static void test_lz_toml_parse__refuses_lone_carriage_return(void **state)
{
	(void)state;
	REFUSED("a = 1\rb = 2\n", 1, 6, "carriage return");
	REFUSED("a = 1\n\r", 2, 1, "carriage return");
	REFUSED("a = \"x\ry\"", 1, 7, "carriage return");
	REFUSED("# c\r\r\n", 1, 4, "carriage return");
}

static void test_lz_toml_parse__refuses_invalid_utf8(void **state)
{
	(void)state;
	REFUSED("a = \"\x80\"", 1, 6, "invalid UTF-8");		  /* lone continuation */
	REFUSED("a = \"\xC0\xAF\"", 1, 6, "invalid UTF-8");	  /* overlong '/' */
	REFUSED("a = \"\xC1\xBF\"", 1, 6, "invalid UTF-8");	  /* overlong */
	REFUSED("a = \"\xE0\x80\xAF\"", 1, 6, "invalid UTF-8");	  /* overlong 3-byte */
	REFUSED("a = \"\xF0\x80\x80\xAF\"", 1, 6, "invalid UTF-8"); /* overlong 4-byte */
	REFUSED("a = \"\xED\xA0\x80\"", 1, 6, "invalid UTF-8");	  /* surrogate D800 */
	REFUSED("a = \"\xED\xBF\xBF\"", 1, 6, "invalid UTF-8");	  /* surrogate DFFF */
	REFUSED("a = \"\xF4\x90\x80\x80\"", 1, 6, "invalid UTF-8"); /* U+110000 */
	REFUSED("a = \"\xF5\x80\x80\x80\"", 1, 6, "invalid UTF-8");
	REFUSED("a = \"\xFF\"", 1, 6, "invalid UTF-8");
	REFUSED("a = \"\xC3\x28\"", 1, 6, "invalid UTF-8");	  /* bad continuation */
	REFUSED("# x\n# \xE2\x82", 2, 3, "invalid UTF-8");	  /* truncated at EOF */
}

/* ---- refused: strings ---- */

static void test_lz_toml_parse__refuses_unknown_escape(void **state)
{
	(void)state;
	REFUSED("a = \"ab\\qc\"\n", 1, 8, "unknown escape");
	REFUSED("a = \"\\x41\"\n", 1, 6, "unknown escape");
	REFUSED("a = \"\\e\"\n", 1, 6, "unknown escape");
	REFUSED("a = \"\\ \"\n", 1, 6, "unknown escape");
	REFUSED("a = \"x\\\ny\"\n", 1, 7, "unknown escape"); /* line-ending backslash */
	REFUSED("a = \"\\\xC3\xA9\"\n", 1, 6, "unknown escape");
}

static void test_lz_toml_parse__refuses_invalid_unicode_escape(void **state)
{
	(void)state;
	REFUSED("a = \"\\u12\"\n", 1, 6, "invalid unicode escape");
	REFUSED("a = \"\\u12G4\"\n", 1, 6, "invalid unicode escape");
	REFUSED("a = \"\\uD800\"\n", 1, 6, "invalid unicode escape");
	REFUSED("a = \"\\uDFFF\"\n", 1, 6, "invalid unicode escape");
	REFUSED("a = \"\\U00110000\"\n", 1, 6, "invalid unicode escape");
	REFUSED("a = \"\\UFFFFFFFF\"\n", 1, 6, "invalid unicode escape");
	REFUSED("a = \"\\u00e", 1, 6, "invalid unicode escape");
}

static void test_lz_toml_parse__refuses_escaped_nul(void **state)
{
	(void)state;
	REFUSED("a = \"x\\u0000\"\n", 1, 7, "NUL");
	REFUSED("a = \"\\U00000000\"\n", 1, 6, "NUL");
}

static void test_lz_toml_parse__refuses_unterminated_string(void **state)
{
	(void)state;
	REFUSED("a = \"abc", 1, 5, "unterminated string");
	REFUSED("a = \"abc\\", 1, 5, "unterminated string");
	REFUSED("a = 'abc", 1, 5, "unterminated string");
	REFUSED("a = \"abc\nb = 1\"\n", 1, 9, "newline in string");
	REFUSED("a = 'abc\r\n'", 1, 9, "newline in string");
}

static void test_lz_toml_parse__refuses_multiline_strings(void **state)
{
	(void)state;
	REFUSED("a = \"\"\"x\"\"\"\n", 1, 5, "multi-line strings are not supported");
	REFUSED("a = '''x'''\n", 1, 5, "multi-line strings are not supported");
	REFUSED("a = [\"\"\"\n", 1, 6, "multi-line strings are not supported");
}

static void test_lz_toml_parse__messages_never_quote_values(void **state)
{
	(void)state;
	const char *docs[] = {
		"a = \"hunter2\\q\"\n", "a = \"hunter2\\uD800\"\n", "a = \"hunter2\" hunter2\n",
		"a = hunter2\n",	   "a = 'hunter2\n",	    "a = [\"hunter2\" \"x\"]\n",
		"a = { b = \"hunter2\", }\n",
	};
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		struct lz_toml_value *root = SENTINEL;
		struct lz_toml_error err = { 0 };
		assert_int_equal(parse_exact(docs[i], strlen(docs[i]), &root, &err), -EINVAL);
		assert_null(strstr(err.msg, "hunter2"));
	}
}

/* ---- refused: keys ---- */

static void test_lz_toml_parse__refuses_quoted_keys(void **state)
{
	(void)state;
	REFUSED("\"a\" = 1\n", 1, 1, "quoted keys are not supported");
	REFUSED("x = 1\n  'a' = 1\n", 2, 3, "quoted keys are not supported");
	REFUSED("[\"a\"]\n", 1, 2, "quoted keys are not supported");
	REFUSED("[a.'b']\n", 1, 4, "quoted keys are not supported");
	REFUSED("t = { \"a\" = 1 }\n", 1, 7, "quoted keys are not supported");
}

static void test_lz_toml_parse__refuses_dotted_keys_outside_headers(void **state)
{
	(void)state;
	REFUSED("a.b = 1\n", 1, 2, "dotted keys are only allowed in table headers");
	REFUSED("a . b = 1\n", 1, 3, "dotted keys are only allowed in table headers");
	REFUSED("t = { a.b = 1 }\n", 1, 8, "dotted keys are only allowed in table headers");
}

static void test_lz_toml_parse__refuses_bad_keys(void **state)
{
	(void)state;
	REFUSED("= 1\n", 1, 1, "expected a key");
	REFUSED("\xC3\xA9 = 1\n", 1, 1, "expected a key");
	REFUSED("a\xC3\xA9 = 1\n", 1, 2, "expected '='");
	REFUSED("a b = 1\n", 1, 3, "expected '='");
	REFUSED("a\n", 1, 2, "expected '='");
	REFUSED("a", 1, 2, "expected '='");
	REFUSED("a : 1\n", 1, 3, "expected '='");
}

/* ---- refused: values ---- */

static void test_lz_toml_parse__refuses_missing_or_unknown_value(void **state)
{
	(void)state;
	REFUSED("a =\n", 1, 4, "expected a value");
	REFUSED("a = ", 1, 5, "expected a value");
	REFUSED("a = # c\n", 1, 5, "expected a value");
	REFUSED("a = yes\n", 1, 5, "expected a value");
	REFUSED("a = True\n", 1, 5, "expected a value");
	REFUSED("a = truex\n", 1, 5, "expected a value");
	REFUSED("a = .5\n", 1, 5, "expected a value");
	REFUSED("a = }\n", 1, 5, "expected a value");
}

static void test_lz_toml_parse__refuses_floats(void **state)
{
	(void)state;
	REFUSED("a = 1.5\n", 1, 5, "floats are not supported");
	REFUSED("a = -0.0\n", 1, 5, "floats are not supported");
	REFUSED("a = 1e5\n", 1, 5, "floats are not supported");
	REFUSED("a = 6E-3\n", 1, 5, "floats are not supported");
	REFUSED("a = inf\n", 1, 5, "floats are not supported");
	REFUSED("a = +inf\n", 1, 5, "floats are not supported");
	REFUSED("a = -inf\n", 1, 5, "floats are not supported");
	REFUSED("a = nan\n", 1, 5, "floats are not supported");
	REFUSED("a = -nan\n", 1, 5, "floats are not supported");
	REFUSED("a = [1, 2.0]\n", 1, 9, "floats are not supported");
}

static void test_lz_toml_parse__refuses_dates_and_times(void **state)
{
	(void)state;
	REFUSED("a = 1979-05-27\n", 1, 5, "dates and times are not supported");
	REFUSED("a = 07:32:00\n", 1, 5, "dates and times are not supported");
	REFUSED("a = 1979-05-27T07:32:00Z\n", 1, 5, "dates and times are not supported");
	REFUSED("a = 1979-05-27 07:32:00\n", 1, 5, "dates and times are not supported");
}

static void test_lz_toml_parse__refuses_non_decimal_integers(void **state)
{
	(void)state;
	REFUSED("a = 0x1F\n", 1, 5, "only decimal integers");
	REFUSED("a = 0o17\n", 1, 5, "only decimal integers");
	REFUSED("a = 0b101\n", 1, 5, "only decimal integers");
}

static void test_lz_toml_parse__refuses_underscores(void **state)
{
	(void)state;
	REFUSED("a = 1_000\n", 1, 5, "underscores in integers are not supported");
	REFUSED("a = -1_0\n", 1, 5, "underscores in integers are not supported");
}

static void test_lz_toml_parse__refuses_leading_zeros(void **state)
{
	(void)state;
	REFUSED("a = 01\n", 1, 5, "leading zeros are not allowed");
	REFUSED("a = 00\n", 1, 5, "leading zeros are not allowed");
	REFUSED("a = +01\n", 1, 5, "leading zeros are not allowed");
	REFUSED("a = -007\n", 1, 5, "leading zeros are not allowed");
}

static void test_lz_toml_parse__refuses_integer_out_of_range(void **state)
{
	(void)state;
	REFUSED("a = 9223372036854775808\n", 1, 5, "integer out of range");
	REFUSED("a = -9223372036854775809\n", 1, 5, "integer out of range");
	REFUSED("a = +9223372036854775808\n", 1, 5, "integer out of range");
	REFUSED("a = 99999999999999999999999999\n", 1, 5, "integer out of range");
}

static void test_lz_toml_parse__refuses_malformed_integers(void **state)
{
	(void)state;
	REFUSED("a = +\n", 1, 5, "invalid integer");
	REFUSED("a = -\n", 1, 5, "invalid integer");
	REFUSED("a = +x\n", 1, 5, "invalid integer");
	REFUSED("a = 12abc\n", 1, 5, "invalid integer");
	REFUSED("a = 1+2\n", 1, 5, "invalid integer");
	REFUSED("a = -1-2\n", 1, 5, "invalid integer");
}

static void test_lz_toml_parse__refuses_text_after_value(void **state)
{
	(void)state;
	REFUSED("a = 1 2\n", 1, 7, "unexpected character after value");
	REFUSED("a = \"x\"y\n", 1, 8, "unexpected character after value");
	REFUSED("a = true false\n", 1, 10, "unexpected character after value");
	REFUSED("a = [] ]\n", 1, 8, "unexpected character after value");
	REFUSED("a = 1, b = 2\n", 1, 6, "unexpected character after value");
	REFUSED("a = 1 b = 2\n", 1, 7, "unexpected character after value");
}

/* ---- refused: arrays ---- */

static void test_lz_toml_parse__refuses_malformed_arrays(void **state)
{
	(void)state;
	REFUSED("a = [1 2]\n", 1, 8, "expected ',' or ']' in array");
	REFUSED("a = [,]\n", 1, 6, "expected a value");
	REFUSED("a = [1,,2]\n", 1, 8, "expected a value");
	REFUSED("a = [1,\n 2\n", 1, 5, "unterminated array");
	REFUSED("a = [\n", 1, 5, "unterminated array");
	REFUSED("x = 0\na = [[1], [2]", 2, 5, "unterminated array");
	REFUSED("a = [1 # c\n 2]\n", 2, 2, "expected ',' or ']' in array");
}

/* ---- refused: inline tables ---- */

static void test_lz_toml_parse__refuses_inline_table_trailing_comma(void **state)
{
	(void)state;
	REFUSED("t = { a = 1, }\n", 1, 12, "trailing comma in inline table");
	REFUSED("t = { a = 1,}\n", 1, 12, "trailing comma in inline table");
}

static void test_lz_toml_parse__refuses_newline_in_inline_table(void **state)
{
	(void)state;
	REFUSED("t = {\n a = 1 }\n", 1, 6, "newlines are not allowed in inline tables");
	REFUSED("t = { a = 1\n }\n", 1, 12, "newlines are not allowed in inline tables");
	REFUSED("t = { a = 1,\n b = 2 }\n", 1, 13, "newlines are not allowed in inline tables");
	REFUSED("t = { a = [\n1] }\n", 1, 12, "newlines are not allowed in inline tables");
	REFUSED("t = { a = [1,\r\n2] }\n", 1, 14, "newlines are not allowed in inline tables");
	REFUSED("t = [{ a = [1, # c\n2] }]\n", 1, 16, "comments are not allowed in inline tables");
	REFUSED("t = { a = 1 # c\n", 1, 13, "comments are not allowed in inline tables");
}

static void test_lz_toml_parse__refuses_malformed_inline_tables(void **state)
{
	(void)state;
	REFUSED("t = { a = 1 b = 2 }\n", 1, 13, "expected ',' or '}' in inline table");
	REFUSED("t = { a = 1", 1, 5, "unterminated inline table");
	REFUSED("t = { a = 1,", 1, 5, "unterminated inline table");
	REFUSED("t = {", 1, 5, "unterminated inline table");
	REFUSED("t = { , }\n", 1, 7, "expected a key");
	REFUSED("t = { a }\n", 1, 9, "expected '='");
	REFUSED("t = { a = }\n", 1, 11, "expected a value");
	REFUSED("t = { a = 1, a = 2 }\n", 1, 14, "duplicate key 'a'");
}

/* ---- refused: headers ---- */

static void test_lz_toml_parse__refuses_malformed_headers(void **state)
{
	(void)state;
	REFUSED("[]\n", 1, 2, "expected a key");
	REFUSED("[a.]\n", 1, 4, "expected a key");
	REFUSED("[.a]\n", 1, 2, "expected a key");
	REFUSED("[a..b]\n", 1, 4, "expected a key");
	REFUSED("[a\n", 1, 3, "expected ']'");
	REFUSED("[a", 1, 3, "expected ']'");
	REFUSED("[a b]\n", 1, 4, "expected ']'");
	REFUSED("[[a]\n", 1, 5, "expected ']]'");
	REFUSED("[[a] ]\n", 1, 5, "expected ']]'");
	REFUSED("[ [a]]\n", 1, 3, "expected a key");
	REFUSED("[a]]\n", 1, 4, "unexpected character after table header");
	REFUSED("[a] b = 1\n", 1, 5, "unexpected character after table header");
	REFUSED("[[a]] x\n", 1, 7, "unexpected character after table header");
}

static void test_lz_toml_parse__refuses_duplicate_keys(void **state)
{
	(void)state;
	REFUSED("image = \"a\"\nimage = \"b\"\n", 2, 1, "duplicate key 'image'");
	REFUSED("[t]\nx = 1\n  x = 2\n", 3, 3, "duplicate key 'x'");
	/* A header-created sub-table is a key of its parent. */
	REFUSED("[a.b]\n[a]\nb = 1\n", 3, 1, "duplicate key 'b'");
	REFUSED("[[a.b]]\n[a]\nb = 1\n", 3, 1, "duplicate key 'b'");
	REFUSED("[[v]]\ns = 1\ns = 2\n", 3, 1, "duplicate key 's'");
}

static void test_lz_toml_parse__refuses_table_defined_twice(void **state)
{
	(void)state;
	REFUSED("[a]\n[a]\n", 2, 2, "table 'a' defined twice");
	REFUSED("[profiles.dev]\nimage = \"x\"\n[profiles.dev]\n", 3, 11, "table 'profiles.dev' defined twice");
	REFUSED("[a.b]\n[a]\n[a]\n", 3, 2, "table 'a' defined twice");
	REFUSED("[a]\n[a.b]\n[a]\n", 3, 2, "table 'a' defined twice");
	REFUSED("[[v]]\n[v.o]\n[v.o]\n", 3, 4, "table 'v.o' defined twice");
}

static void test_lz_toml_parse__refuses_mixing_tables_and_arrays_of_tables(void **state)
{
	(void)state;
	REFUSED("[[a]]\n[a]\n", 2, 2, "'a' is an array of tables, not a table");
	REFUSED("[a]\n[[a]]\n", 2, 3, "'a' is a table, not an array of tables");
	REFUSED("[a.b]\n[[a]]\n", 2, 3, "'a' is a table, not an array of tables");
	REFUSED("[p]\n[[p.v]]\n[p.v]\n", 3, 4, "'p.v' is an array of tables, not a table");
}

static void test_lz_toml_parse__refuses_header_over_value(void **state)
{
	(void)state;
	REFUSED("a = 1\n[a]\n", 2, 2, "key 'a' already has a value");
	REFUSED("a = 1\n[a.b]\n", 2, 2, "key 'a' already has a value");
	REFUSED("a = \"x\"\n[[a]]\n", 2, 3, "key 'a' already has a value");
	REFUSED("[t]\nk = true\n[t.k.z]\n", 3, 4, "key 't.k' already has a value");
}

static void test_lz_toml_parse__refuses_extending_inline_table(void **state)
{
	(void)state;
	REFUSED("a = {}\n[a]\n", 2, 2, "cannot extend inline table 'a'");
	REFUSED("a = { x = 1 }\n[a.b]\n", 2, 2, "cannot extend inline table 'a'");
	REFUSED("[t]\na = { b = {} }\n[t.a.b.c]\n", 3, 4, "cannot extend inline table 't.a'");
	REFUSED("a = {}\n[[a.b]]\n", 2, 3, "cannot extend inline table 'a'");
	REFUSED("a = {}\n[[a]]\n", 2, 3, "cannot extend inline table 'a'");
}

static void test_lz_toml_parse__refuses_extending_static_array(void **state)
{
	(void)state;
	REFUSED("a = []\n[[a]]\n", 2, 3, "cannot extend static array 'a'");
	REFUSED("a = [{}]\n[a.b]\n", 2, 2, "cannot extend static array 'a'");
	REFUSED("a = [{ x = 1 }]\n[a]\n", 2, 2, "cannot extend static array 'a'");
	REFUSED("[p.dev]\nvolumes = [{ source = \"/a\" }]\n[[p.dev.volumes]]\n", 3, 9,
		"cannot extend static array 'p.dev.volumes'");
}

static void test_lz_toml_parse__long_names_are_truncated_in_messages(void **state)
{
	(void)state;
	char key[201];
	memset(key, 'k', 200);
	key[200] = '\0';
	char doc[1024];
	int n = snprintf(doc, sizeof(doc), "[%s]\n[%s]\n", key, key);
	refused_at(doc, (size_t)n, 2, 2, "...' defined twice", __LINE__);

	/* Many short keys: the path is cut at a key boundary or inside one. */
	n = snprintf(doc, sizeof(doc), "[a]\n[[");
	for (int i = 0; i < 30; i++)
		n += snprintf(doc + n, sizeof(doc) - n, "%sabcdef", i ? "." : "");
	n += snprintf(doc + n, sizeof(doc) - n, "]]\n[[");
	for (int i = 0; i < 30; i++)
		n += snprintf(doc + n, sizeof(doc) - n, "%sabcdef", i ? "." : "");
	n += snprintf(doc + n, sizeof(doc) - n, ".x]]\n[");
	for (int i = 0; i < 30; i++)
		n += snprintf(doc + n, sizeof(doc) - n, "%sabcdef", i ? "." : "");
	n += snprintf(doc + n, sizeof(doc) - n, "]\n");
	refused_at(doc, (size_t)n, 4, 2 + 29 * 7, "'abcdef.abcdef.", __LINE__);
	refused_at(doc, (size_t)n, 4, 2 + 29 * 7, "...' is an array of tables, not a table", __LINE__);

	n = snprintf(doc, sizeof(doc), "%s = 1\n%s = 2\n", key, key);
	refused_at(doc, (size_t)n, 2, 1, "duplicate key 'kkkkkkkk", __LINE__);
}

/* ---- refused: depth ---- */

static void test_lz_toml_parse__refuses_nesting_too_deep(void **state)
{
	(void)state;
	char doc[512];
	int n = snprintf(doc, sizeof(doc), "a = ");
	for (int i = 0; i <= LZ_TOML_MAX_DEPTH; i++)
		doc[n++] = '[';
	for (int i = 0; i <= LZ_TOML_MAX_DEPTH; i++)
		doc[n++] = ']';
	refused_at(doc, (size_t)n, 1, 5 + LZ_TOML_MAX_DEPTH, "nesting deeper than 32 levels", __LINE__);

	n = snprintf(doc, sizeof(doc), "a = ");
	for (int i = 0; i <= LZ_TOML_MAX_DEPTH; i++)
		n += snprintf(doc + n, sizeof(doc) - n, "{b=");
	n += snprintf(doc + n, sizeof(doc) - n, "1");
	for (int i = 0; i <= LZ_TOML_MAX_DEPTH; i++)
		doc[n++] = '}';
	refused_at(doc, (size_t)n, 1, 5 + 3 * LZ_TOML_MAX_DEPTH, "nesting deeper than 32 levels", __LINE__);

	/* 33 keys in a header: the 33rd key is refused. */
	n = 0;
	doc[n++] = '[';
	for (int i = 0; i <= LZ_TOML_MAX_DEPTH; i++)
		n += snprintf(doc + n, sizeof(doc) - n, i ? ".k" : "k");
	n += snprintf(doc + n, sizeof(doc) - n, "]\n");
	refused_at(doc, (size_t)n, 1, 2 + 2 * LZ_TOML_MAX_DEPTH, "nesting deeper than 32 levels", __LINE__);

	/* The header's depth counts: under [k] only 31 more levels fit. */
	n = snprintf(doc, sizeof(doc), "[k]\na = ");
	for (int i = 0; i < LZ_TOML_MAX_DEPTH; i++)
		doc[n++] = '[';
	for (int i = 0; i < LZ_TOML_MAX_DEPTH; i++)
		doc[n++] = ']';
	refused_at(doc, (size_t)n, 2, 4 + LZ_TOML_MAX_DEPTH, "nesting deeper than 32 levels", __LINE__);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_toml_parse__empty_document),
		cmocka_unit_test(test_lz_toml_parse__null_bytes_with_zero_length),
		cmocka_unit_test(test_lz_toml_parse__comments_and_blank_lines),
		cmocka_unit_test(test_lz_toml_parse__basic_string),
		cmocka_unit_test(test_lz_toml_parse__basic_string_escapes),
		cmocka_unit_test(test_lz_toml_parse__literal_string_keeps_backslashes),
		cmocka_unit_test(test_lz_toml_parse__empty_strings),
		cmocka_unit_test(test_lz_toml_parse__utf8_and_tab_in_strings),
		cmocka_unit_test(test_lz_toml_parse__integers),
		cmocka_unit_test(test_lz_toml_parse__booleans),
		cmocka_unit_test(test_lz_toml_parse__array_spans_lines_with_comments_and_trailing_comma),
		cmocka_unit_test(test_lz_toml_parse__array_mixed_types_and_nesting),
		cmocka_unit_test(test_lz_toml_parse__empty_array),
		cmocka_unit_test(test_lz_toml_parse__inline_table),
		cmocka_unit_test(test_lz_toml_parse__empty_and_nested_inline_tables),
		cmocka_unit_test(test_lz_toml_parse__array_of_inline_tables),
		cmocka_unit_test(test_lz_toml_parse__table_headers),
		cmocka_unit_test(test_lz_toml_parse__header_whitespace_around_keys),
		cmocka_unit_test(test_lz_toml_parse__implicit_super_table_defined_later_once),
		cmocka_unit_test(test_lz_toml_parse__implicit_table_stays_implicit_without_header),
		cmocka_unit_test(test_lz_toml_parse__array_of_tables_appends),
		cmocka_unit_test(test_lz_toml_parse__nested_array_of_tables),
		cmocka_unit_test(test_lz_toml_parse__array_of_tables_under_defined_table),
		cmocka_unit_test(test_lz_toml_parse__crlf_line_endings),
		cmocka_unit_test(test_lz_toml_parse__no_final_newline_and_tabs),
		cmocka_unit_test(test_lz_toml_parse__bare_key_characters),
		cmocka_unit_test(test_lz_toml_parse__columns_count_bytes),
		cmocka_unit_test(test_lz_toml_parse__full_v1_document),
		cmocka_unit_test(test_lz_toml_parse__max_depth_accepted),
		cmocka_unit_test(test_lz_toml_parse__many_keys_are_indexed),
		cmocka_unit_test(test_lz_toml_find__missing_key_and_non_table),
		cmocka_unit_test(test_lz_toml_free__accepts_null),
		cmocka_unit_test(test_lz_toml_parse__null_error_object),
		cmocka_unit_test(test_lz_toml_parse__null_bytes_with_length),
		cmocka_unit_test(test_lz_toml_parse__oversized_document),
		cmocka_unit_test(test_lz_toml_parse__refuses_bom),
		cmocka_unit_test(test_lz_toml_parse__refuses_nul),
		cmocka_unit_test(test_lz_toml_parse__refuses_control_characters),
		cmocka_unit_test(test_lz_toml_parse__refuses_lone_carriage_return),
		cmocka_unit_test(test_lz_toml_parse__refuses_invalid_utf8),
		cmocka_unit_test(test_lz_toml_parse__refuses_unknown_escape),
		cmocka_unit_test(test_lz_toml_parse__refuses_invalid_unicode_escape),
		cmocka_unit_test(test_lz_toml_parse__refuses_escaped_nul),
		cmocka_unit_test(test_lz_toml_parse__refuses_unterminated_string),
		cmocka_unit_test(test_lz_toml_parse__refuses_multiline_strings),
		cmocka_unit_test(test_lz_toml_parse__messages_never_quote_values),
		cmocka_unit_test(test_lz_toml_parse__refuses_quoted_keys),
		cmocka_unit_test(test_lz_toml_parse__refuses_dotted_keys_outside_headers),
		cmocka_unit_test(test_lz_toml_parse__refuses_bad_keys),
		cmocka_unit_test(test_lz_toml_parse__refuses_missing_or_unknown_value),
		cmocka_unit_test(test_lz_toml_parse__refuses_floats),
		cmocka_unit_test(test_lz_toml_parse__refuses_dates_and_times),
		cmocka_unit_test(test_lz_toml_parse__refuses_non_decimal_integers),
		cmocka_unit_test(test_lz_toml_parse__refuses_underscores),
		cmocka_unit_test(test_lz_toml_parse__refuses_leading_zeros),
		cmocka_unit_test(test_lz_toml_parse__refuses_integer_out_of_range),
		cmocka_unit_test(test_lz_toml_parse__refuses_malformed_integers),
		cmocka_unit_test(test_lz_toml_parse__refuses_text_after_value),
		cmocka_unit_test(test_lz_toml_parse__refuses_malformed_arrays),
		cmocka_unit_test(test_lz_toml_parse__refuses_inline_table_trailing_comma),
		cmocka_unit_test(test_lz_toml_parse__refuses_newline_in_inline_table),
		cmocka_unit_test(test_lz_toml_parse__refuses_malformed_inline_tables),
		cmocka_unit_test(test_lz_toml_parse__refuses_malformed_headers),
		cmocka_unit_test(test_lz_toml_parse__refuses_duplicate_keys),
		cmocka_unit_test(test_lz_toml_parse__refuses_table_defined_twice),
		cmocka_unit_test(test_lz_toml_parse__refuses_mixing_tables_and_arrays_of_tables),
		cmocka_unit_test(test_lz_toml_parse__refuses_header_over_value),
		cmocka_unit_test(test_lz_toml_parse__refuses_extending_inline_table),
		cmocka_unit_test(test_lz_toml_parse__refuses_extending_static_array),
		cmocka_unit_test(test_lz_toml_parse__long_names_are_truncated_in_messages),
		cmocka_unit_test(test_lz_toml_parse__refuses_nesting_too_deep),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
