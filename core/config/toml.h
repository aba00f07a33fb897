/* Strict decoder for the closed TOML subset of the v1 configuration.
 *
 * No C TOML library ships in Debian 12 (C-REFINEMENT.md), and a general one
 * would accept more than the schema means. This decoder accepts only what the
 * v1 document uses and refuses everything else with a line and column, so no
 * parser default can make an unknown, duplicate or aliased key meaningful
 * (spec 3.2). Schema checks (unknown keys, types, ranges) live in config.c.
 * This header is the decoder's whole public interface; it is implemented by
 * toml.c (document grammar, headers, tables), toml_scan.c (text check, keys,
 * scalar values) and toml_tree.c (the value tree, lookup and release).
 *
 * Accepted: UTF-8 text; comments; bare keys [A-Za-z0-9_-]+; `[a.b]` table
 * headers and `[[a.b]]` array-of-table headers with bare dotted keys;
 * `key = value` with a single bare key; basic strings "..." with the TOML
 * escapes; literal strings '...'; decimal integers (optional sign, no leading
 * zeros, no underscores) in int64 range; true/false; arrays (may span lines,
 * trailing comma allowed, comments allowed); single-line inline tables.
 * Refused: quoted keys, dotted keys in key/value pairs (both can alias a key
 * written another way), multi-line strings, floats, dates and times,
 * hex/octal/binary integers, a byte-order mark, NUL and other control
 * characters, redefinition of any key or table, extending an inline table or
 * a static array, nesting deeper than LZ_TOML_MAX_DEPTH. */
#ifndef LZ_TOML_H
#define LZ_TOML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LZ_TOML_MAX_DEPTH 32

enum lz_toml_kind {
	LZ_TOML_STRING,
	LZ_TOML_INTEGER,
	LZ_TOML_BOOL,
	LZ_TOML_ARRAY,
	LZ_TOML_TABLE,
};

/* 1-based line; 1-based column counted in bytes from the line start. */
struct lz_toml_pos {
	uint32_t line;
	uint32_t column;
};

struct lz_toml_value;

struct lz_toml_entry {
	char *key; /* NUL-terminated bare key */
	struct lz_toml_pos key_pos;
	struct lz_toml_value *value;
};

struct lz_toml_value {
	enum lz_toml_kind kind;
	struct lz_toml_pos pos; /* where the value (or table header) starts */
	union {
		struct {
			char *bytes; /* NUL-terminated; decoded; never contains NUL */
			size_t len;
		} string;
		int64_t integer;
		bool boolean;
		struct {
			struct lz_toml_value **items;
			size_t len;
		} array;
		struct {
			struct lz_toml_entry *entries; /* document order */
			size_t len;
		} table;
	};
};

struct lz_toml_error {
	struct lz_toml_pos pos;
	char msg[160];
};

/* Decodes len bytes (need not be NUL-terminated). On success *ret_root is a
 * LZ_TOML_TABLE owned by the caller. On failure returns -EINVAL (or -ENOMEM)
 * and fills *err when non-NULL; *ret_root is untouched. */
int lz_toml_parse(const char *bytes, size_t len, struct lz_toml_value **ret_root,
		  struct lz_toml_error *err);

/* Frees a tree; accepts NULL. */
void lz_toml_free(struct lz_toml_value *v);

/* Entry of table t named key, or NULL. */
const struct lz_toml_entry *lz_toml_find(const struct lz_toml_value *t, const char *key);

#endif
