/* Escaping foreign text (escape.h). */
#include "util/escape.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

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

/* Default-ignorable and blank-rendering code points (Unicode's
 * Default_Ignorable_Code_Point, and the Hangul fillers): soft hyphen,
 * zero-width space and joiners, word joiner and invisible operators,
 * variation selectors, the byte order mark, tags. */
static bool invisible(uint32_t c)
{
	return c == 0x00ad || c == 0x034f || c == 0x115f || c == 0x1160 || c == 0x17b4 || c == 0x17b5 ||
	       (c >= 0x180b && c <= 0x180f) || (c >= 0x200b && c <= 0x200d) || (c >= 0x2060 && c <= 0x2064) ||
	       (c >= 0x206a && c <= 0x206f) || c == 0x3164 || (c >= 0xfe00 && c <= 0xfe0f) || c == 0xfeff ||
	       c == 0xffa0 || (c >= 0xfff0 && c <= 0xfffb) || (c >= 0x1bca0 && c <= 0x1bca3) ||
	       (c >= 0x1d173 && c <= 0x1d17a) || (c >= 0xe0000 && c <= 0xe0fff);
}

/* Blanks other than the ASCII space: no-break and typographic spaces, the
 * ideographic space, the blank braille pattern (padding that looks like
 * nothing can push real lines away and draw others). */
static bool blank(uint32_t c)
{
	return c == 0x00a0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x202f || c == 0x205f ||
	       c == 0x2800 || c == 0x3000;
}

/* Letters of the right-to-left scripts (Hebrew, Arabic, Syriac, Thaana,
 * NKo and the rest of U+0590 to U+08FF, their presentation forms, and the
 * right-to-left blocks of the supplementary planes): a terminal that
 * applies the bidirectional algorithm shows the neutral text around them
 * (slashes, dots, spaces, options) in another order than it runs. */
static bool right_to_left(uint32_t c)
{
	return (c >= 0x0590 && c <= 0x08ff) || (c >= 0xfb1d && c <= 0xfdff) || (c >= 0xfe70 && c <= 0xfefe) ||
	       (c >= 0x10800 && c <= 0x10fff) || (c >= 0x1e800 && c <= 0x1efff);
}

/* The combining marks of the general-purpose blocks (diacritics, the
 * Cyrillic and symbol marks, half marks) and the others that can overlay
 * (Vedic extensions, Bassa Vah, Duployan, musical symbols): they draw
 * over the character before them, so "/" with U+0338 reads as another
 * path and "-" with U+0336 as a struck-out option. */
static bool combining_mark(uint32_t c)
{
	return (c >= 0x0300 && c <= 0x036f) || (c >= 0x0483 && c <= 0x0489) || (c >= 0x1ab0 && c <= 0x1aff) ||
	       (c >= 0x1cd0 && c <= 0x1cff) || (c >= 0x1dc0 && c <= 0x1dff) || (c >= 0x20d0 && c <= 0x20ff) ||
	       (c >= 0xfe20 && c <= 0xfe2f) || (c >= 0x16af0 && c <= 0x16af4) || (c >= 0x1bc9d && c <= 0x1bc9e) ||
	       (c >= 0x1d165 && c <= 0x1d169) || (c >= 0x1d16d && c <= 0x1d172) || (c >= 0x1d17b && c <= 0x1d182) ||
	       (c >= 0x1d185 && c <= 0x1d18b) || (c >= 0x1d1aa && c <= 0x1d1ad);
}

/* Controls, text that reads in another order, and characters that show
 * nothing or change the one before (the developer must see every byte
 * that will run). */
static bool format_control(uint32_t c)
{
	return (c >= 0x80 && c <= 0x9f) || c == 0x200e || c == 0x200f || c == 0x2028 || c == 0x2029 ||
	       (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069) || right_to_left(c) ||
	       combining_mark(c) || invisible(c) || blank(c);
}

size_t lz_escape(const char *in, size_t n, char *out, size_t cap)
{
	const uint8_t *s = (const uint8_t *)in;
	size_t w = 0;
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
			/* cut at a whole piece, and say so */
			size_t written = w;
			while (w > 0 && w + 4 > cap)
				w--;
			while (w > 0 && w < written && ((uint8_t)out[w] & 0xc0) == 0x80)
				w--; /* not inside a UTF-8 sequence */
			if (w + 4 <= cap)
				memcpy(out + w, "...", 3), w += 3;
			break;
		}
		memcpy(out + w, piece, plen);
		w += plen;
		i += step;
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
		lz_escape(in + at, len, line, sizeof(line));
		dprintf(out_fd, "%s%s\n", prefix, line);
		at += len + 1;
	}
}
