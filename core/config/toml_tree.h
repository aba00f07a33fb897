/* The value tree the TOML decoder builds (toml.h shows its public side).
 *
 * A node is a public struct lz_toml_value plus bookkeeping the public
 * interface does not show: the flags the header rules of toml.c need, the
 * capacity of its array or entry vector and, for a table, a hash index of its
 * keys. Internal to the decoder (toml.c, toml_scan.c); everything else reads
 * the tree through toml.h.
 *
 * Ownership: every node is owned by exactly one parent or one
 * _cleanup_toml_node_ variable. lz_toml_table_add and lz_toml_array_push take
 * the child only on success; on failure the caller still owns it and the
 * container is unchanged.
 *
 * Threat: a document made of thousands of keys must not make duplicate
 * detection quadratic; tables with many keys are therefore indexed. */
#ifndef LZ_TOML_TREE_H
#define LZ_TOML_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "config/toml.h"
#include "util/cleanup.h"

enum {
	LZ_TOML_NODE_IMPLICIT = 1u << 0, /* table created as a header's super-table */
	LZ_TOML_NODE_SEALED = 1u << 1,	 /* inline table or static array */
	LZ_TOML_NODE_AOT = 1u << 2,	 /* array created by [[...]] headers */
};

/* The decoder reads v and reads and writes flags; cap, index and index_cap
 * belong to toml_tree.c. */
struct lz_toml_node {
	struct lz_toml_value v; /* first: a value pointer is a node pointer */
	unsigned flags;
	size_t cap;	  /* capacity of array.items or table.entries */
	uint32_t *index;  /* table: open addressing, entry index + 1, 0 = empty */
	size_t index_cap; /* power of two, or 0 */
};

/* The node holding v; every value in a decoded tree is a node. */
static inline struct lz_toml_node *lz_toml_node_of(const struct lz_toml_value *v)
{
	return (struct lz_toml_node *)v;
}

/* An empty node (no string bytes, no items, no entries), or NULL when out of
 * memory. Freed with lz_toml_free(&n->v). */
struct lz_toml_node *lz_toml_node_new(enum lz_toml_kind kind, struct lz_toml_pos pos, unsigned flags);

static inline void lz_toml_node_freep(struct lz_toml_node **np)
{
	if (*np)
		lz_toml_free(&(*np)->v);
	*np = NULL;
}

#define _cleanup_toml_node_ _cleanup_(lz_toml_node_freep)

/* Entry of table t whose key is the n bytes at k (k need not be
 * NUL-terminated), or NULL. */
struct lz_toml_entry *lz_toml_table_find(const struct lz_toml_node *t, const char *k, size_t n);

/* Appends the entry (the n bytes at k) = value to table t; the key is
 * copied. Does not check for a duplicate: the caller has looked it up.
 * -ENOMEM on failure, with the table unchanged and value still the
 * caller's. */
int lz_toml_table_add(struct lz_toml_node *t, const char *k, size_t n, struct lz_toml_pos key_pos,
		      struct lz_toml_node *value);

/* Appends item to array a. -ENOMEM on failure, with the array unchanged
 * and item still the caller's. */
int lz_toml_array_push(struct lz_toml_node *a, struct lz_toml_node *item);

#endif
