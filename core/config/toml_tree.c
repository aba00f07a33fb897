/* The value tree of the TOML decoder: nodes, tables and arrays, and the
 * public lookup and release of a decoded tree (toml.h).
 *
 * Invariants:
 * - Recursion in lz_toml_free() is bounded by the depth limit the parser
 *   enforces (toml.c): at most 2 * LZ_TOML_MAX_DEPTH nodes deep.
 * - A table with at least INDEX_MIN_ENTRIES entries has an index at most
 *   half full that maps every key to its entry, so lookups stay constant
 *   time on average and duplicate detection linear over a document. */
#include "config/toml_tree.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Tables index their keys once they hold this many. */
#define INDEX_MIN_ENTRIES 8

struct lz_toml_node *lz_toml_node_new(enum lz_toml_kind kind, struct lz_toml_pos pos, unsigned flags)
{
	struct lz_toml_node *n = calloc(1, sizeof(*n));
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
	struct lz_toml_node *n = lz_toml_node_of(v);
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

struct lz_toml_entry *lz_toml_table_find(const struct lz_toml_node *t, const char *k, size_t n)
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
static int index_update(struct lz_toml_node *t)
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

int lz_toml_table_add(struct lz_toml_node *t, const char *k, size_t n, struct lz_toml_pos key_pos,
		      struct lz_toml_node *value)
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

int lz_toml_array_push(struct lz_toml_node *a, struct lz_toml_node *item)
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

const struct lz_toml_entry *lz_toml_find(const struct lz_toml_value *t, const char *key)
{
	if (!t || t->kind != LZ_TOML_TABLE || !key)
		return NULL;
	return lz_toml_table_find(lz_toml_node_of(t), key, strlen(key));
}
