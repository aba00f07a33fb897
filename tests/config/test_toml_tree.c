/* Unit tests for core/config/toml_tree.c, the value tree of the TOML
 * decoder: nodes, tables with their hash index, arrays, lz_toml_find and
 * lz_toml_free.
 *
 * Keys are passed from buffers that are not NUL-terminated at the key's end,
 * as the parser passes them (a slice of the document). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config/toml_tree.h"

static struct lz_toml_pos at(uint32_t line, uint32_t column)
{
	return (struct lz_toml_pos){ .line = line, .column = column };
}

static struct lz_toml_node *new_int(int64_t i)
{
	struct lz_toml_node *n = lz_toml_node_new(LZ_TOML_INTEGER, at(1, 1), 0);
	assert_non_null(n);
	n->v.integer = i;
	return n;
}

static void add_int(struct lz_toml_node *t, const char *key, int64_t i)
{
	struct lz_toml_node *v = new_int(i);
	assert_int_equal(lz_toml_table_add(t, key, strlen(key), at(1, 1), v), 0);
}

static void test_lz_toml_node_new__empty_node_with_kind_pos_and_flags(void **state)
{
	(void)state;
	struct lz_toml_node *n = lz_toml_node_new(LZ_TOML_TABLE, at(3, 7), LZ_TOML_NODE_IMPLICIT);
	assert_non_null(n);
	assert_ptr_equal(&n->v, (struct lz_toml_value *)n);
	assert_ptr_equal(lz_toml_node_of(&n->v), n);
	assert_int_equal(n->v.kind, LZ_TOML_TABLE);
	assert_int_equal(n->v.pos.line, 3);
	assert_int_equal(n->v.pos.column, 7);
	assert_int_equal(n->flags, LZ_TOML_NODE_IMPLICIT);
	assert_int_equal(n->v.table.len, 0);
	assert_null(n->v.table.entries);
	assert_null(n->index);
	assert_int_equal(n->cap, 0);
	lz_toml_free(&n->v);
}

static void test_lz_toml_node_freep__frees_and_resets(void **state)
{
	(void)state;
	struct lz_toml_node *n = new_int(1);
	lz_toml_node_freep(&n);
	assert_null(n);
	lz_toml_node_freep(&n); /* NULL is accepted */
	assert_null(n);
	{
		_cleanup_toml_node_ struct lz_toml_node *scoped = new_int(2);
		assert_non_null(scoped);
	}
}

static void test_lz_toml_table_add__copies_key_slice_in_document_order(void **state)
{
	(void)state;
	const char doc[] = { 'i', 'm', 'a', 'g', 'e', '=', 'x' }; /* no NUL */
	struct lz_toml_node *t = lz_toml_node_new(LZ_TOML_TABLE, at(1, 1), 0);
	assert_non_null(t);
	struct lz_toml_node *v1 = new_int(10);
	struct lz_toml_node *v2 = new_int(20);
	assert_int_equal(lz_toml_table_add(t, doc, 5, at(2, 3), v1), 0);
	assert_int_equal(lz_toml_table_add(t, doc + 1, 2, at(4, 5), v2), 0);

	assert_int_equal(t->v.table.len, 2);
	const struct lz_toml_entry *e = t->v.table.entries;
	assert_string_equal(e[0].key, "image");
	assert_int_equal(e[0].key_pos.line, 2);
	assert_int_equal(e[0].key_pos.column, 3);
	assert_ptr_equal(e[0].value, &v1->v);
	assert_string_equal(e[1].key, "ma");
	assert_int_equal(e[1].key_pos.line, 4);
	assert_int_equal(e[1].key_pos.column, 5);
	assert_ptr_equal(e[1].value, &v2->v);
	lz_toml_free(&t->v);
}

static void test_lz_toml_table_find__matches_whole_keys_only(void **state)
{
	(void)state;
	struct lz_toml_node *t = lz_toml_node_new(LZ_TOML_TABLE, at(1, 1), 0);
	assert_non_null(t);
	add_int(t, "ab", 1);
	add_int(t, "abc", 2);

	const char slice[] = { 'a', 'b', 'c', 'd' }; /* no NUL */
	struct lz_toml_entry *e = lz_toml_table_find(t, slice, 2);
	assert_non_null(e);
	assert_string_equal(e->key, "ab");
	e = lz_toml_table_find(t, slice, 3);
	assert_non_null(e);
	assert_string_equal(e->key, "abc");
	assert_null(lz_toml_table_find(t, slice, 1));
	assert_null(lz_toml_table_find(t, slice, 4));
	assert_null(lz_toml_table_find(t, "b", 1));
	lz_toml_free(&t->v);
}

static void test_lz_toml_table_find__empty_table(void **state)
{
	(void)state;
	struct lz_toml_node *t = lz_toml_node_new(LZ_TOML_TABLE, at(1, 1), 0);
	assert_non_null(t);
	assert_null(lz_toml_table_find(t, "a", 1));
	assert_null(lz_toml_table_find(t, "", 0));
	lz_toml_free(&t->v);
}

/* The index appears at 8 entries, stays at most half full, and every key is
 * found at its own entry while the index is rebuilt and extended. */
static void test_lz_toml_table_add__indexes_large_tables(void **state)
{
	(void)state;
	struct lz_toml_node *t = lz_toml_node_new(LZ_TOML_TABLE, at(1, 1), 0);
	assert_non_null(t);
	char key[32];
	for (int i = 0; i < 3000; i++) {
		snprintf(key, sizeof(key), "key-%d", i);
		add_int(t, key, i);
		size_t len = t->v.table.len;
		assert_int_equal(len, (size_t)i + 1);
		if (len < 8) {
			assert_null(t->index);
		} else {
			assert_non_null(t->index);
			assert_true(t->index_cap >= 2 * len);
			assert_int_equal(t->index_cap & (t->index_cap - 1), 0);
		}
		/* Just crossed the threshold or a rebuild: all keys so far. */
		if (len == 8 || len == 9 || len == 17 || len == 33 || len == 2049) {
			for (int j = 0; j <= i; j++) {
				snprintf(key, sizeof(key), "key-%d", j);
				struct lz_toml_entry *e = lz_toml_table_find(t, key, strlen(key));
				assert_non_null(e);
				assert_ptr_equal(e, &t->v.table.entries[j]);
			}
		}
	}
	for (int j = 0; j < 3000; j++) {
		snprintf(key, sizeof(key), "key-%d", j);
		struct lz_toml_entry *e = lz_toml_table_find(t, key, strlen(key));
		assert_non_null(e);
		assert_string_equal(e->key, key);
		assert_true(e->value->integer == j);
	}
	assert_null(lz_toml_table_find(t, "key-3000", 8));
	assert_null(lz_toml_table_find(t, "key-", 4));
	struct lz_toml_entry *e = lz_toml_table_find(t, "key-12", 5); /* the slice "key-1" */
	assert_non_null(e);
	assert_string_equal(e->key, "key-1");
	lz_toml_free(&t->v);
}

static void test_lz_toml_table_find__indexed_prefix_slices(void **state)
{
	(void)state;
	struct lz_toml_node *t = lz_toml_node_new(LZ_TOML_TABLE, at(1, 1), 0);
	assert_non_null(t);
	const char *keys[] = { "a", "aa", "aaa", "aaaa", "aaaaa", "aaaaaa", "aaaaaaa", "aaaaaaaa", "b" };
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		add_int(t, keys[i], (int64_t)i);
	assert_non_null(t->index);
	const char slice[] = { 'a', 'a', 'a', 'a', 'a', 'a', 'a', 'a', 'a' }; /* no NUL */
	for (size_t n = 1; n <= 8; n++) {
		struct lz_toml_entry *e = lz_toml_table_find(t, slice, n);
		assert_non_null(e);
		assert_int_equal(strlen(e->key), n);
		assert_true(e->value->integer == (int64_t)n - 1);
	}
	assert_null(lz_toml_table_find(t, slice, 9));
	lz_toml_free(&t->v);
}

static void test_lz_toml_array_push__keeps_order_while_growing(void **state)
{
	(void)state;
	struct lz_toml_node *a = lz_toml_node_new(LZ_TOML_ARRAY, at(1, 1), LZ_TOML_NODE_SEALED);
	assert_non_null(a);
	struct lz_toml_node *items[100];
	for (int i = 0; i < 100; i++) {
		items[i] = new_int(i);
		assert_int_equal(lz_toml_array_push(a, items[i]), 0);
		assert_int_equal(a->v.array.len, (size_t)i + 1);
		assert_true(a->cap >= a->v.array.len);
	}
	for (int i = 0; i < 100; i++) {
		assert_ptr_equal(a->v.array.items[i], &items[i]->v);
		assert_true(a->v.array.items[i]->integer == i);
	}
	assert_int_equal(a->flags, LZ_TOML_NODE_SEALED);
	lz_toml_free(&a->v);
}

/* lz_toml_free releases every kind, nested, including strings and indexed
 * tables (leaks show under the sanitizer build). */
static void test_lz_toml_free__nested_tree(void **state)
{
	(void)state;
	struct lz_toml_node *root = lz_toml_node_new(LZ_TOML_TABLE, at(1, 1), 0);
	assert_non_null(root);
	struct lz_toml_node *arr = lz_toml_node_new(LZ_TOML_ARRAY, at(1, 1), LZ_TOML_NODE_AOT);
	assert_non_null(arr);
	struct lz_toml_node *inner = lz_toml_node_new(LZ_TOML_TABLE, at(1, 1), 0);
	assert_non_null(inner);
	char key[16];
	for (int i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		add_int(inner, key, i);
	}
	struct lz_toml_node *s = lz_toml_node_new(LZ_TOML_STRING, at(1, 1), 0);
	assert_non_null(s);
	s->v.string.bytes = strdup("secret");
	assert_non_null(s->v.string.bytes);
	s->v.string.len = 6;
	assert_int_equal(lz_toml_table_add(inner, "s", 1, at(1, 1), s), 0);
	assert_int_equal(lz_toml_array_push(arr, inner), 0);
	assert_int_equal(lz_toml_table_add(root, "arr", 3, at(1, 1), arr), 0);

	const struct lz_toml_entry *e = lz_toml_find(&root->v, "arr");
	assert_non_null(e);
	assert_int_equal(e->value->kind, LZ_TOML_ARRAY);
	e = lz_toml_find(e->value->array.items[0], "s");
	assert_non_null(e);
	assert_string_equal(e->value->string.bytes, "secret");
	lz_toml_free(&root->v);
	lz_toml_free(NULL);
}

static void test_lz_toml_find__null_non_table_and_missing(void **state)
{
	(void)state;
	struct lz_toml_node *t = lz_toml_node_new(LZ_TOML_TABLE, at(1, 1), 0);
	assert_non_null(t);
	add_int(t, "version", 1);
	const struct lz_toml_entry *e = lz_toml_find(&t->v, "version");
	assert_non_null(e);
	assert_ptr_equal(e, &t->v.table.entries[0]);
	assert_null(lz_toml_find(&t->v, "versio"));
	assert_null(lz_toml_find(&t->v, "version1"));
	assert_null(lz_toml_find(&t->v, NULL));
	assert_null(lz_toml_find(NULL, "version"));
	assert_null(lz_toml_find(e->value, "version")); /* an integer, not a table */
	lz_toml_free(&t->v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_toml_node_new__empty_node_with_kind_pos_and_flags),
		cmocka_unit_test(test_lz_toml_node_freep__frees_and_resets),
		cmocka_unit_test(test_lz_toml_table_add__copies_key_slice_in_document_order),
		cmocka_unit_test(test_lz_toml_table_find__matches_whole_keys_only),
		cmocka_unit_test(test_lz_toml_table_find__empty_table),
		cmocka_unit_test(test_lz_toml_table_add__indexes_large_tables),
		cmocka_unit_test(test_lz_toml_table_find__indexed_prefix_slices),
		cmocka_unit_test(test_lz_toml_array_push__keeps_order_while_growing),
		cmocka_unit_test(test_lz_toml_free__nested_tree),
		cmocka_unit_test(test_lz_toml_find__null_non_table_and_missing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
