/* Escaping foreign text (escape.h). */
#include "util/escape.h"
#include "util/escape_table.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* Length of the well-formed UTF-8 sequence at s (at most n bytes) and its
 * scalar value, or 0 (Unicode's Table 3-7: no overlong forms, no
 * surrogates, nothing above U+10FFFF). */
static size_t utf8_seq(const uint8_t *s, size_t n, uint32_t *cp)
{
	uint8_t b = s[0];
	size_t len;
	uint32_t v, min;
	if (b >= 0xc2 && b <= 0xdf)
		len = 2, v = b & 0x1f, min = 0x80;
	else if (b >= 0xe0 && b <= 0xef)
		len = 3, v = b & 0x0f, min = 0x800;
	else if (b >= 0xf0 && b <= 0xf4)
		len = 4, v = b & 0x07, min = 0x10000;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (s[i] & 0x3f);
	}
	if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return len;
}

/* Code points the developer could not read as they run: controls, marks
 * that draw nothing or over the character before ("/" with U+0338 reads
 * as another path), format characters and blanks (padding that looks
 * like nothing or like spaces), unassigned ones, and the right-to-left
 * letters and digits that make a terminal show the text around them in
 * another order (escape_table.h says which, by Unicode category). */
static bool format_control(uint32_t c)
{
	size_t lo = 0, hi = sizeof(lz_escape_ranges) / sizeof(lz_escape_ranges[0]);
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c < lz_escape_ranges[mid][0])
			hi = mid;
		else if (c > lz_escape_ranges[mid][1])
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

size_t lz_escape(const char *in, size_t n, char *out, size_t cap)
{
	const uint8_t *s = (const uint8_t *)in;
	size_t w = 0, cut = 0; /* cut: the last end of a piece with room for "..." */
	if (cap == 0)
		return 0;
	for (size_t i = 0; i < n;) {
		char piece[16];
		size_t plen, step = 1;
		uint32_t cp;
		uint8_t b = s[i];
		if (b == '\\')
			plen = (size_t)snprintf(piece, sizeof(piece), "\\\\");
		else if (b == '\t' || b == '\n' || b == '\r' || b == 0x1b)
			plen = (size_t)snprintf(piece, sizeof(piece), "\\%c",
						b == '\t' ? 't' : b == '\n' ? 'n' : b == '\r' ? 'r' : 'e');
		else if (b >= 0x20 && b < 0x7f)
			piece[0] = (char)b, plen = 1;
		else if (b >= 0x80 && (step = utf8_seq(s + i, n - i, &cp)) != 0) {
			if (format_control(cp))
				plen = (size_t)snprintf(piece, sizeof(piece), "\\u{%04X}", (unsigned)cp);
			else
				memcpy(piece, s + i, step), plen = step;
		} else {
			step = 1;
			plen = (size_t)snprintf(piece, sizeof(piece), "\\x%02x", b);
		}
		if (w + plen + 1 > cap) {
			/* cut at a whole piece (an escape or a character), and say so */
			w = cut;
			if (w + 4 <= cap)
				memcpy(out + w, "...", 3), w += 3;
			break;
		}
		memcpy(out + w, piece, plen);
		w += plen;
		i += step;
		if (w + 4 <= cap)
			cut = w;
	}
	out[w] = '\0';
	return w;
}

void lz_escape_lines(int out_fd, const char *prefix, const char *in, size_t n)
{
	char line[LZ_ESCAPE_MAX(4096) + 1];
	for (size_t at = 0; at < n;) {
		const char *nl = memchr(in + at, '\n', n - at);
		size_t len = nl ? (size_t)(nl - (in + at)) : n - at;
		size_t w = lz_escape(in + at, len, line, sizeof(line));
		/* one write a line: another process may append to the same log */
		struct iovec v[3] = { { (void *)prefix, strlen(prefix) }, { line, w }, { "\n", 1 } };
		(void)!writev(out_fd, v, 3);
		at += len + 1;
	}
}

void lz_escape_report_stderr(void *ctx, const char *line)
{
	(void)ctx;
	lz_escape_lines(STDERR_FILENO, "", line, strlen(line));
}
