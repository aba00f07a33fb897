/* libFuzzer target for core/util/escape.c (foreign text for terminals and
 * logs). The first two input bytes choose a short output capacity, the
 * rest is the text.
 * 1. lz_escape with room for LZ_ESCAPE_MAX(n): the output is NUL-terminated
 *    at the returned length, at most LZ_ESCAPE_MAX(n) bytes, printable
 *    ASCII and well-formed UTF-8 only, keeps none of the code points the
 *    header lists as escaped (C1, separators, bidi controls, right-to-left
 *    letters, combining and overlaying marks, invisible characters, blanks
 *    other than the space), uses each escape only where the header says
 *    ("\xNN" only for a control, DEL or a byte that starts no well-formed
 *    sequence; "\u{X}" in upper case, 4 to 6 digits, only for a code point
 *    the input held as well-formed UTF-8 from U+0080 up), decodes
 *    back to exactly the input (one output string is one input string),
 *    and is the same when asked twice.
 * 2. The same text into a short buffer: the output fits (NUL included), is
 *    the whole output when that fits, and otherwise is the whole output cut
 *    at the boundary of an escape or character, followed by "..." when the
 *    buffer has room for it.
 * 3. lz_escape_lines into a memfd (one per process): one output line per
 *    input line (split at '\n', a final '\n' ends the last line), each the
 *    prefix and lz_escape of that line with a 16 KiB cap; for one input in
 *    eight (by the capacity bytes) the text repeated past 4 KiB is also
 *    tried, so long lines get cut.
 * Any violation abort()s. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/escape.h"

#define LINE_CAP (LZ_ESCAPE_MAX(4096) + 1) /* lz_escape_lines' buffer */
#define PREFIX "p> "

static void check(bool ok)
{
	if (!ok)
		abort();
}

/* Well-formed, shortest-form UTF-8 of a scalar value at s (n bytes
 * available): its length and value, or 0. Written from Unicode's Table 3-7,
 * independently of escape.c. */
static size_t utf8_dec(const uint8_t *s, size_t n, uint32_t *cp)
{
	static const struct {
		uint8_t lo, hi;       /* first byte */
		uint8_t lo2, hi2;     /* second byte */
		size_t len;
	} rows[] = {
		{ 0xc2, 0xdf, 0x80, 0xbf, 2 }, { 0xe0, 0xe0, 0xa0, 0xbf, 3 }, { 0xe1, 0xec, 0x80, 0xbf, 3 },
		{ 0xed, 0xed, 0x80, 0x9f, 3 }, { 0xee, 0xef, 0x80, 0xbf, 3 }, { 0xf0, 0xf0, 0x90, 0xbf, 4 },
		{ 0xf1, 0xf3, 0x80, 0xbf, 4 }, { 0xf4, 0xf4, 0x80, 0x8f, 4 },
	};
	if (n == 0)
		return 0;
	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		if (s[0] < rows[r].lo || s[0] > rows[r].hi)
			continue;
		size_t len = rows[r].len;
		if (n < len || s[1] < rows[r].lo2 || s[1] > rows[r].hi2)
			return 0;
		uint32_t v = s[0] & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
		for (size_t i = 1; i < len; i++) {
			if ((s[i] & 0xc0) != 0x80)
				return 0;
			v = v << 6 | (s[i] & 0x3f);
		}
		*cp = v;
		return len;
	}
	return 0;
}

static size_t utf8_enc(uint32_t cp, uint8_t out[4])
{
	if (cp < 0x80) {
		out[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (uint8_t)(0xc0 | cp >> 6);
		out[1] = (uint8_t)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (uint8_t)(0xe0 | cp >> 12);
		out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (uint8_t)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (uint8_t)(0xf0 | cp >> 18);
	out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
	out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
	out[3] = (uint8_t)(0x80 | (cp & 0x3f));
	return 4;
}

/* The code points escape.h names as escaped, written from the header (and
 * the Unicode 14 character database for the script and mark ranges), not
 * from escape_table.h. */
static const uint32_t listed[][2] = {
	{ 0x0080, 0x009f },   /* C1 controls */
	{ 0x00a0, 0x00a0 },   /* no-break space */
	{ 0x00ad, 0x00ad },   /* soft hyphen */
	{ 0x0300, 0x036f },   /* combining diacritical marks */
	{ 0x0483, 0x0489 },   /* combining Cyrillic */
	{ 0x05d0, 0x05ea },   /* Hebrew letters */
	{ 0x0620, 0x063f },   /* Arabic letters */
	{ 0x0641, 0x064a },
	{ 0x061c, 0x061c },   /* Arabic letter mark */
	{ 0x0710, 0x0710 },   /* Syriac letters */
	{ 0x0712, 0x072f },
	{ 0x0780, 0x07a5 },   /* Thaana letters */
	{ 0x07ca, 0x07ea },   /* NKo letters */
	{ 0x0800, 0x0815 },   /* Samaritan letters */
	{ 0x0840, 0x0858 },   /* Mandaic letters */
	{ 0x115f, 0x1160 },   /* Hangul fillers */
	{ 0x1680, 0x1680 },   /* Ogham space mark */
	{ 0x1ab0, 0x1aff },   /* combining marks extended */
	{ 0x1cd4, 0x1cd4 },   /* Vedic overlays */
	{ 0x1ce2, 0x1ce8 },
	{ 0x1dc0, 0x1dff },   /* combining marks supplement */
	{ 0x2000, 0x200f },   /* typographic spaces, zero-width, LRM, RLM */
	{ 0x2028, 0x202f },   /* separators, embeddings, narrow no-break space */
	{ 0x205f, 0x2060 },   /* medium mathematical space, word joiner */
	{ 0x2066, 0x2069 },   /* isolates */
	{ 0x20d0, 0x20ff },   /* combining marks for symbols */
	{ 0x2800, 0x2800 },   /* blank braille pattern */
	{ 0x3000, 0x3000 },   /* ideographic space */
	{ 0x3164, 0x3164 },   /* Hangul filler */
	{ 0xfe00, 0xfe0f },   /* variation selectors */
	{ 0xfe20, 0xfe2f },   /* combining half marks */
	{ 0xfeff, 0xfeff },   /* byte order mark */
	{ 0xffa0, 0xffa0 },   /* halfwidth Hangul filler */
	{ 0x10a39, 0x10a39 }, /* Kharoshthi overlay */
	{ 0x16af0, 0x16af4 }, /* Bassa Vah */
	{ 0x1bc9e, 0x1bc9e }, /* Duployan */
	{ 0x1d167, 0x1d169 }, /* musical overlays */
	{ 0x1e900, 0x1e943 }, /* Adlam letters */
	{ 0xe0000, 0xe007f }, /* tags */
	{ 0xe0100, 0xe01ef }, /* variation selectors supplement */
};

static bool is_listed(uint32_t cp)
{
	for (size_t i = 0; i < sizeof(listed) / sizeof(listed[0]); i++)
		if (cp >= listed[i][0] && cp <= listed[i][1])
			return true;
	return false;
}

static int hexdigit(char c, bool upper)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (!upper && c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (upper && c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decodes the whole output o[0..w) of lz_escape(in[0..n)) and checks it
 * piece by piece against the input; marks each piece boundary in bound
 * (w + 1 entries). */
static void check_decode(const uint8_t *in, size_t n, const char *o, size_t w, bool *bound)
{
	size_t i = 0, k = 0;
	memset(bound, 0, w + 1);
	while (k < w) {
		bound[k] = true;
		uint8_t c = (uint8_t)o[k];
		check(i < n);
		if (c == '\\') {
			check(k + 1 < w);
			char e = o[k + 1];
			if (e == '\\' || e == 't' || e == 'n' || e == 'r' || e == 'e') {
				uint8_t want = e == '\\' ? '\\' : e == 't' ? '\t' : e == 'n' ? '\n' : e == 'r' ? '\r' : 0x1b;
				check(in[i] == want);
				i++;
				k += 2;
			} else if (e == 'x') {
				check(k + 3 < w);
				int hi = hexdigit(o[k + 2], false), lo = hexdigit(o[k + 3], false);
				check(hi >= 0 && lo >= 0);
				uint8_t b = (uint8_t)(hi << 4 | lo);
				check(in[i] == b);
				uint32_t cp;
				/* only what has no kept or named form */
				check((b < 0x20 && b != '\t' && b != '\n' && b != '\r' && b != 0x1b) || b == 0x7f ||
				      (b >= 0x80 && utf8_dec(in + i, n - i, &cp) == 0));
				i++;
				k += 4;
			} else if (e == 'u') {
				check(k + 2 < w && o[k + 2] == '{');
				size_t j = k + 3;
				uint32_t cp = 0;
				while (j < w && o[j] != '}') {
					int d = hexdigit(o[j], true);
					check(d >= 0 && j - (k + 3) < 6);
					cp = cp << 4 | (uint32_t)d;
					j++;
				}
				size_t digits = j - (k + 3);
				check(j < w && digits >= 4 && (digits == 4 || o[k + 3] != '0'));
				uint8_t enc[4];
				size_t len = utf8_enc(cp, enc);
				uint32_t got;
				check(cp >= 0x80 && utf8_dec(in + i, n - i, &got) == len && got == cp &&
				      memcmp(in + i, enc, len) == 0);
				i += len;
				k = j + 1;
			} else {
				check(false);
			}
		} else if (c >= 0x20 && c < 0x7f) {
			check(in[i] == c);
			i++;
			k++;
		} else {
			uint32_t cp;
			size_t len = utf8_dec((const uint8_t *)o + k, w - k, &cp);
			check(len > 0 && !is_listed(cp) && cp >= 0xa0);
			check(n - i >= len && memcmp(in + i, o + k, len) == 0);
			i += len;
			k += len;
		}
	}
	check(k == w && i == n);
	bound[w] = true;
}

static void check_short(const uint8_t *in, size_t n, const char *full, size_t w, const bool *bound,
			size_t cap)
{
	char *o = malloc(cap);
	check(o != NULL);
	size_t t = lz_escape((const char *)in, n, o, cap);
	check(t < cap && o[t] == '\0' && strlen(o) == t);
	if (w < cap) {
		check(t == w && memcmp(o, full, w) == 0);
	} else {
		bool dots = cap >= 4;
		size_t kept = dots ? t - 3 : t;
		check(!dots || (t >= 3 && memcmp(o + kept, "...", 3) == 0));
		check(kept <= w && memcmp(o, full, kept) == 0);
		/* The header's "cut at a whole escape or character". */
		check(bound[kept]);
	}
	free(o);
}

static int memfd = -1;

/* lz_escape_lines of in[0..n) against the line-by-line expectation. */
static void check_lines(const uint8_t *in, size_t n)
{
	check(ftruncate(memfd, 0) == 0 && lseek(memfd, 0, SEEK_SET) == 0);
	lz_escape_lines(memfd, PREFIX, (const char *)in, n);
	off_t end = lseek(memfd, 0, SEEK_CUR);
	check(end >= 0);
	size_t got_n = (size_t)end;
	char *got = malloc(got_n + 1);
	check(got != NULL);
	check(pread(memfd, got, got_n, 0) == (ssize_t)got_n);

	char *line = malloc(LINE_CAP);
	check(line != NULL);
	size_t g = 0;
	for (size_t at = 0; at < n;) {
		const uint8_t *nl = memchr(in + at, '\n', n - at);
		size_t len = nl ? (size_t)(nl - (in + at)) : n - at;
		size_t w = lz_escape((const char *)in + at, len, line, LINE_CAP);
		check(w <= LINE_CAP - 1);
		check(got_n - g >= strlen(PREFIX) + w + 1);
		check(memcmp(got + g, PREFIX, strlen(PREFIX)) == 0);
		g += strlen(PREFIX);
		check(memcmp(got + g, line, w) == 0 && memchr(got + g, '\n', w) == NULL);
		g += w;
		check(got[g] == '\n');
		g++;
		at += len + 1;
	}
	check(g == got_n);
	free(line);
	free(got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (memfd < 0) {
		memfd = memfd_create("fuzz_escape", MFD_CLOEXEC);
		check(memfd >= 0);
	}
	if (size < 2)
		return 0;
	size_t sel = (size_t)data[0] << 8 | data[1];
	const uint8_t *in = data + 2;
	size_t n = size - 2;

	size_t cap = LZ_ESCAPE_MAX(n) + 1;
	char *full = malloc(cap), *again = malloc(cap);
	bool *bound = malloc(cap);
	check(full != NULL && again != NULL && bound != NULL);
	size_t w = lz_escape((const char *)in, n, full, cap);
	check(w <= LZ_ESCAPE_MAX(n) && full[w] == '\0' && strlen(full) == w);
	check(lz_escape((const char *)in, n, again, cap) == w && memcmp(full, again, w + 1) == 0);
	check_decode(in, n, full, w, bound);

	/* every short capacity for short outputs, one chosen one otherwise */
	if (w < 64) {
		for (size_t c = 1; c <= w + 1; c++)
			check_short(in, n, full, w, bound, c);
	} else {
		check_short(in, n, full, w, bound, 1 + sel % (w + 1));
	}
	char zero = 'z';
	check(lz_escape((const char *)in, n, &zero, 0) == 0 && zero == 'z');

	check_lines(in, n);
	if (n > 0 && n < 4096 && (sel & 7) == 0) {
		size_t big = 4097 + sel % 8192;
		uint8_t *rep = malloc(big);
		check(rep != NULL);
		for (size_t i = 0; i < big; i++)
			rep[i] = in[i % n];
		check_lines(rep, big);
		free(rep);
	}
	free(full);
	free(again);
	free(bound);
	return 0;
}
