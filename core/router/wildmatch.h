/* Git's wildmatch (gitignore(5), "PATTERN FORMAT"): '\' escapes, '?' and
 * '[...]' never match '/' with LZ_WM_PATHNAME, '*' stays within a component,
 * "**" between slashes (or at either end) crosses components, anything
 * else like "a**b" is a plain '*'. Brackets take '!' or '^', ranges,
 * "[:class:]"; an unterminated bracket never matches. With LZ_WM_CASEFOLD the
 * text and unescaped pattern characters fold to lower case (ASCII); an
 * escaped or bracketed pattern character is compared as written, which is
 * Git's behaviour. Lengths instead of NUL terminators; recursion is one
 * level per '*' (callers bound pattern length). */
#ifndef LZ_ROUTER_WILDMATCH_H
#define LZ_ROUTER_WILDMATCH_H

#include <stdbool.h>
#include <stdint.h>

enum { LZ_WM_CASEFOLD = 1, LZ_WM_PATHNAME = 2 };

/* ASCII-only case folding, as Git's sane ctype. */
static inline uint8_t lz_ascii_fold(uint8_t c)
{
	return c >= 'A' && c <= 'Z' ? (uint8_t)(c + 32) : c;
}

/* A byte with a meaning in a pattern (everything else is literal). */
static inline bool lz_wm_special(uint8_t c)
{
	return c == '*' || c == '?' || c == '[' || c == '\\';
}

/* Whether the text [t, te) matches the pattern [p, pe). */
bool lz_wildmatch(const uint8_t *p, const uint8_t *pe, const uint8_t *t, const uint8_t *te, unsigned flags);

/* Takes n steps from *left: false, and *left 0, when it has fewer (the
 * one rule of every step count of the ignore-rule matching). */
static inline bool lz_wm_take(uint64_t *left, uint64_t n)
{
	if (*left < n) {
		*left = 0;
		return false;
	}
	*left -= n;
	return true;
}

/* lz_wildmatch within *steps steps of matching (about one a pattern or
 * text byte looked at), taken from *steps: once they run out it answers
 * false and leaves *steps 0, which the caller must take for "too costly
 * to tell", not for "no match" (a match that took the last step leaves 0
 * too). A match costs at most about twice the pattern's length times
 * the text's, plus the text's length times its longest component's. */
bool lz_wildmatch_within(const uint8_t *p, const uint8_t *pe, const uint8_t *t, const uint8_t *te,
			 unsigned flags, uint64_t *steps);

#endif
