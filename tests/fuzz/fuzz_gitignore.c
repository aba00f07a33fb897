/* libFuzzer target for the ignore files the sandbox writes (.gitignore,
 * info/exclude) as core/router/ignoreclass_build.c reads them and
 * core/router/ignoreclass.c matches them.
 *
 * Neither offers a buffer entry point (patterns_read_fd reads a file,
 * pat_match is static), so this target compiles both into itself, their
 * public functions renamed fz_*, and drives patterns_parse and pat_match
 * on a snapshot that holds only patterns.
 *
 * Input: one byte of flags (bit 0 core.ignoreCase, bit 1 the path is a
 * directory), two bytes (little-endian) of path length, the path (cut at
 * LZ_PATH_MAX and at a NUL), the ignore file (the rest, at most
 * IGNORE_FILE_MAX bytes).
 *
 * 1. patterns_parse keeps exactly the patterns of a model written from
 *    gitignore(5) and Git's dir.c: a UTF-8 BOM skipped; lines split at
 *    '\n', one '\r' before it dropped, cut at a NUL; empty and '#' lines
 *    skipped; trailing spaces trimmed unless escaped (a line ending in a
 *    lone '\' keeps them); '!' negates; a trailing '/' means directories
 *    only; no other '/' means a basename pattern, otherwise a leading '/'
 *    is dropped; what is left empty or over PATTERN_LEN_MAX is dropped.
 *    Each kept pattern's bytes, flags, literal prefix (up to the first
 *    special byte) and kind (literal: no special byte; suffix: '*' then no
 *    special byte) agree with the model; the text stays within n_text.
 * 2. Each pattern is matched against the path (and its last component as
 *    the basename): pat_match agrees with lz_wildmatch on the whole
 *    pattern for basename patterns (so the literal and suffix shortcuts
 *    are exact), and for pathname patterns with the literal prefix
 *    compared (case folded under ignoreCase) and the remainder given to
 *    lz_wildmatch with LZ_WM_PATHNAME; when the remainder does not start
 *    with "**", that equals lz_wildmatch on the whole pattern. A
 *    directory-only pattern never matches a non-directory.
 * Any violation abort()s. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ic_grow fz_ic_grow
#define ic_text_add fz_ic_text_add
#define lz_ignoreclass_build fz_ignoreclass_build
#define lz_ignoreclass_global_excludes fz_ignoreclass_global_excludes
#define ic_editor_name fz_ic_editor_name
#define ic_lookup fz_ic_lookup
#define ic_match_chain fz_ic_match_chain
#define ic_name_hash fz_ic_name_hash
#define ic_query_check fz_ic_query_check
#define ic_snap_free fz_ic_snap_free
#define lz_ignoreclass_ref fz_ignoreclass_ref
#define lz_ignoreclass_route fz_ignoreclass_route
#define lz_ignoreclass_unref fz_ignoreclass_unref
#include "router/ignoreclass_build.c"
#include "router/ignoreclass.c"

#define MODEL_PATS 4096

static void check(bool ok)
{
	if (!ok)
		abort();
}

struct mpat {
	const uint8_t *b;
	size_t n;
	uint8_t flags;
};

/* Git's trim_trailing_spaces on line[0..*n). */
static void model_trim(const uint8_t *line, size_t *n)
{
	size_t last_space = SIZE_MAX;
	for (size_t i = 0; i < *n; i++) {
		if (line[i] == ' ') {
			if (last_space == SIZE_MAX)
				last_space = i;
		} else if (line[i] == '\\') {
			if (i + 1 == *n)
				return;
			i++;
			last_space = SIZE_MAX;
		} else {
			last_space = SIZE_MAX;
		}
	}
	if (last_space != SIZE_MAX)
		*n = last_space;
}

/* Git's parse_path_pattern (and match_pathname's leading '/'); false when
 * the line yields no pattern here. */
static bool model_line(const uint8_t *b, size_t n, struct mpat *out)
{
	model_trim(b, &n);
	uint8_t flags = 0;
	if (n > 0 && b[0] == '!') {
		flags |= P_NEG;
		b++;
		n--;
	}
	if (n > 0 && b[n - 1] == '/') {
		flags |= P_MUSTBEDIR;
		n--;
	}
	bool slash = false;
	for (size_t i = 0; i < n; i++)
		slash |= b[i] == '/';
	if (!slash) {
		flags |= P_BASENAME;
	} else if (b[0] == '/') {
		b++;
		n--;
	}
	if (n == 0 || n > PATTERN_LEN_MAX)
		return false;
	*out = (struct mpat){ .b = b, .n = n, .flags = flags };
	return true;
}

static size_t model_parse(const uint8_t *buf, size_t len, struct mpat *out, size_t cap)
{
	size_t k = 0, i = 0;
	if (len >= 3 && buf[0] == 0xef && buf[1] == 0xbb && buf[2] == 0xbf)
		i = 3;
	while (i < len) {
		size_t e = i;
		while (e < len && buf[e] != '\n')
			e++;
		size_t end = e;
		if (e > i && buf[i] != '#') {
			if (buf[end - 1] == '\r')
				end--;
			for (size_t j = i; j < end; j++)
				if (buf[j] == '\0') {
					end = j;
					break;
				}
			if (k < cap && model_line(buf + i, end - i, &out[k]))
				k++;
		}
		i = e + 1;
	}
	return k;
}

static bool any_special(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (lz_wm_special(b[i]))
			return true;
	return false;
}

static bool eq_fold(const uint8_t *a, const uint8_t *b, size_t n, bool icase)
{
	for (size_t i = 0; i < n; i++)
		if ((icase ? lz_ascii_fold(a[i]) : a[i]) != (icase ? lz_ascii_fold(b[i]) : b[i]))
			return false;
	return true;
}

static bool model_match(const struct pat *pt, const uint8_t *pp, const uint8_t *rel, size_t rel_len,
			const uint8_t *base, size_t base_len, bool is_dir, bool icase)
{
	if ((pt->flags & P_MUSTBEDIR) && !is_dir)
		return false;
	unsigned cf = icase ? LZ_WM_CASEFOLD : 0;
	if (pt->flags & P_BASENAME)
		return lz_wildmatch(pp, pp + pt->len, base, base + base_len, cf);
	size_t pre = pt->prefix;
	bool split = pre <= rel_len && eq_fold(pp, rel, pre, icase) &&
		     lz_wildmatch(pp + pre, pp + pt->len, rel + pre, rel + rel_len, cf | LZ_WM_PATHNAME);
	if (pre == pt->len || pp[pre] != '*' || pre + 1 == pt->len || pp[pre + 1] != '*') {
		bool whole = lz_wildmatch(pp, pp + pt->len, rel, rel + rel_len, cf | LZ_WM_PATHNAME);
		check(whole == split);
	}
	return split;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3)
		return 0;
	bool icase = data[0] & 1, is_dir = data[0] & 2;
	size_t plen = (size_t)data[1] | (size_t)data[2] << 8;
	data += 3;
	size -= 3;
	if (plen > size)
		plen = size;
	const uint8_t *file = data + plen;
	size_t flen = size - plen;
	if (plen > LZ_PATH_MAX)
		plen = LZ_PATH_MAX;
	const uint8_t *z = memchr(data, '\0', plen);
	if (z != NULL)
		plen = (size_t)(z - data);
	if (flen > IGNORE_FILE_MAX)
		flen = IGNORE_FILE_MAX;

	/* Exact-size copies, so ASan sees any read past either end. */
	uint8_t *path = malloc(plen ? plen : 1), *buf = malloc(flen ? flen : 1);
	check(path != NULL && buf != NULL);
	memcpy(path, data, plen);
	memcpy(buf, file, flen);

	lz_ignoreclass *s = calloc(1, sizeof(*s));
	check(s != NULL);
	uint32_t first = 0, n = 0;
	int r = patterns_parse(s, buf, flen, &first, &n);
	check(r == 0 && first == 0 && n == s->n_pats);

	struct mpat *want = malloc(MODEL_PATS * sizeof(*want));
	check(want != NULL);
	size_t n_want = model_parse(buf, flen, want, MODEL_PATS);
	if (n_want < MODEL_PATS)
		check(n == n_want);

	const uint8_t *base = path;
	for (size_t i = plen; i > 0; i--)
		if (path[i - 1] == '/') {
			base = path + i;
			break;
		}
	size_t base_len = plen - (size_t)(base - path);

	for (uint32_t i = 0; i < n && i < MODEL_PATS; i++) {
		const struct pat *pt = &s->pats[i];
		check(pt->len > 0 && pt->len <= PATTERN_LEN_MAX && (size_t)pt->off + pt->len <= s->n_text);
		const uint8_t *pp = s->text + pt->off;
		check(pt->len == want[i].n && memcmp(pp, want[i].b, pt->len) == 0 && pt->flags == want[i].flags);
		size_t lit = 0;
		while (lit < pt->len && !lz_wm_special(pp[lit]))
			lit++;
		check(pt->prefix == lit);
		uint8_t kind = lit == pt->len ? K_LITERAL
			       : pp[0] == '*' && !any_special(pp + 1, pt->len - 1) ? K_SUFFIX
										: K_GLOB;
		check(pt->kind == kind);
		check(memchr(pp, '\0', pt->len) == NULL);
		check(!(pt->flags & P_BASENAME) || memchr(pp, '/', pt->len) == NULL);

		uint64_t steps = UINT64_MAX;
		bool got = pat_match(s, pt, path, plen, base, base_len, is_dir, icase, &steps);
		check(got == model_match(pt, pp, path, plen, base, base_len, is_dir, icase));
	}

	free(want);
	fz_ic_snap_free(s);
	free(path);
	free(buf);
	return 0;
}
