/* libFuzzer target for the TOML decoder (core/config/toml.h: toml.c,
 * toml_scan.c, toml_tree.c).
 *
 * Parses arbitrary bytes. On failure the error must be -EINVAL or -ENOMEM
 * with a position inside the document and a short printable-ASCII message.
 * On success the whole tree is walked and every invariant the interface
 * promises is checked (abort() on violation): strings are NUL-terminated,
 * have no interior NUL and are valid UTF-8; keys are bare and unique per
 * table and found by lz_toml_find; positions are 1-based and inside the
 * document; nesting stays bounded. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/toml.h"

struct doc {
	size_t lines;	    /* number of lines (LF count + 1) */
	size_t *line_len;   /* bytes in each line before its LF */
};

static void check(bool ok)
{
	if (!ok)
		abort();
}

static void check_pos(const struct doc *d, struct lz_toml_pos pos)
{
	check(pos.line >= 1 && pos.column >= 1);
	check(pos.line <= d->lines);
	/* A column may point one past the last byte (end of input). */
	check(pos.column <= d->line_len[pos.line - 1] + 1);
}

static bool valid_utf8(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		size_t k;
		uint32_t cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xC2 && c <= 0xDF) {
			k = 2;
			cp = c & 0x1F;
		} else if (c >= 0xE0 && c <= 0xEF) {
			k = 3;
			cp = c & 0x0F;
		} else if (c >= 0xF0 && c <= 0xF4) {
			k = 4;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (n - i < k)
			return false;
		for (size_t j = 1; j < k; j++) {
			if ((s[i + j] & 0xC0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + j] & 0x3F);
		}
		if ((k == 3 && cp < 0x800) || (k == 4 && cp < 0x10000) || cp > 0x10FFFF ||
		    (cp >= 0xD800 && cp <= 0xDFFF))
			return false;
		i += k;
	}
	return true;
}

static bool bare_key(const char *k)
{
	if (!*k)
		return false;
	for (; *k; k++) {
		char c = *k;
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
		      c == '-'))
			return false;
	}
	return true;
}

static void walk(const struct doc *d, const struct lz_toml_value *v, unsigned depth)
{
	/* Headers add up to two levels per key (array of tables), values one. */
	check(depth <= 2 * LZ_TOML_MAX_DEPTH + 1);
	check_pos(d, v->pos);
	switch (v->kind) {
	case LZ_TOML_STRING:
		check(v->string.bytes != NULL);
		check(strlen(v->string.bytes) == v->string.len);
		check(valid_utf8((const unsigned char *)v->string.bytes, v->string.len));
		break;
	case LZ_TOML_INTEGER:
		break;
	case LZ_TOML_BOOL:
		check(v->boolean == true || v->boolean == false);
		break;
	case LZ_TOML_ARRAY:
		check(v->array.len == 0 || v->array.items != NULL);
		for (size_t i = 0; i < v->array.len; i++) {
			check(v->array.items[i] != NULL);
			walk(d, v->array.items[i], depth + 1);
		}
		break;
	case LZ_TOML_TABLE:
		check(v->table.len == 0 || v->table.entries != NULL);
		for (size_t i = 0; i < v->table.len; i++) {
			const struct lz_toml_entry *e = &v->table.entries[i];
			check(e->key != NULL && bare_key(e->key));
			check_pos(d, e->key_pos);
			check(e->value != NULL);
			/* Unique keys: the first entry with this key is this one. */
			check(lz_toml_find(v, e->key) == e);
			for (size_t j = 0; j < i; j++)
				check(strcmp(v->table.entries[j].key, e->key) != 0);
			walk(d, e->value, depth + 1);
		}
		break;
	default:
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct doc d = { .lines = 1 };
	for (size_t i = 0; i < size; i++)
		d.lines += data[i] == '\n';
	d.line_len = calloc(d.lines, sizeof(*d.line_len));
	check(d.line_len != NULL);
	for (size_t i = 0, l = 0; i < size; i++) {
		if (data[i] == '\n')
			l++;
		else
			d.line_len[l]++;
	}

	struct lz_toml_value *root = NULL;
	struct lz_toml_error err;
	memset(&err, 0x5a, sizeof(err));
	int r = lz_toml_parse((const char *)data, size, &root, &err);
	if (r < 0) {
		check(r == -EINVAL || r == -ENOMEM);
		check(root == NULL);
		check_pos(&d, err.pos);
		const char *end = memchr(err.msg, '\0', sizeof(err.msg));
		check(end != NULL && end != err.msg);
		for (const char *c = err.msg; c < end; c++)
			check(*c >= 0x20 && *c < 0x7f);
		free(d.line_len);
		return 0;
	}
	check(r == 0 && root != NULL);
	check(root->kind == LZ_TOML_TABLE);
	walk(&d, root, 0);
	lz_toml_free(root);
	free(d.line_len);
	return 0;
}
