/* Git's wildmatch (wildmatch.h). WM_ABORT_* prune the backtracking: a
 * '*' that failed to place the rest at one offset where the text ran out
 * cannot succeed at a later one. */
#include "router/wildmatch.h"

#include <stddef.h>
#include <string.h>

enum { WM_CASEFOLD = LZ_WM_CASEFOLD, WM_PATHNAME = LZ_WM_PATHNAME };
enum { WM_MATCH = 0, WM_NOMATCH = 1, WM_ABORT_ALL = -1, WM_ABORT_TO_STARSTAR = -2 };

static bool wm_class(const uint8_t *name, size_t n, uint8_t c, unsigned fl, bool *known)
{
	bool upper = c >= 'A' && c <= 'Z', lower = c >= 'a' && c <= 'z';
	bool digit = c >= '0' && c <= '9', alpha = upper || lower;
	bool graph = c >= 0x21 && c <= 0x7e;
	*known = true;
#define IS(lit) (n == sizeof(lit) - 1 && memcmp(name, lit, n) == 0)
	if (IS("alnum"))
		return alpha || digit;
	if (IS("alpha"))
		return alpha;
	if (IS("blank"))
		return c == ' ' || c == '\t';
	if (IS("cntrl"))
		return c < 0x20 || c == 0x7f;
	if (IS("digit"))
		return digit;
	if (IS("graph"))
		return graph;
	if (IS("lower"))
		return lower;
	if (IS("print"))
		return c >= 0x20 && c <= 0x7e;
	if (IS("punct"))
		return graph && !alpha && !digit;
	if (IS("space"))
		return c == ' ' || c == '\t' || c == '\n' || c == '\r';
	if (IS("upper"))
		return upper || ((fl & WM_CASEFOLD) && lower);
	if (IS("xdigit"))
		return digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
#undef IS
	*known = false;
	return false;
}

/* The pattern byte at q, 0 past the end (patterns hold no NUL byte). */
static inline uint8_t at(const uint8_t *q, const uint8_t *pe)
{
	return q < pe ? *q : 0;
}

/* Out of steps: WM_ABORT_ALL unwinds every level at once. */
#define SPEND(n)                                      \
	do {                                          \
		if (!lz_wm_take(left, (uint64_t)(n))) \
			return WM_ABORT_ALL;          \
	} while (0)

static int wm(const uint8_t *p, const uint8_t *pe, const uint8_t *t, const uint8_t *te, unsigned fl,
	      uint64_t *left)
{
	const uint8_t *const p0 = p;
	for (; p < pe; p++, t++) {
		SPEND(1);
		uint8_t pc = *p, tc;
		if (t == te) {
			if (pc != '*')
				return WM_ABORT_ALL;
			tc = 0;
		} else {
			tc = *t;
		}
		if (fl & WM_CASEFOLD) {
			tc = lz_ascii_fold(tc);
			pc = lz_ascii_fold(pc);
		}
		if (pc == '\\') {
			if (p + 1 == pe)
				return WM_NOMATCH;
			if (tc != *++p)
				return WM_NOMATCH;
			continue;
		}
		if (pc == '?') {
			if ((fl & WM_PATHNAME) && tc == '/')
				return WM_NOMATCH;
			continue;
		}
		if (pc == '*') {
			bool match_slash;
			p++;
			if (p < pe && *p == '*') {
				ptrdiff_t before = (p - p0) - 2; /* the byte before the stars */
				const uint8_t *run = p;
				while (p < pe && *p == '*')
					p++;
				SPEND(p - run); /* a run of stars is looked at every time */
				if (!(fl & WM_PATHNAME)) {
					match_slash = true;
				} else if ((before < 0 || p0[before] == '/') &&
					   (p == pe || *p == '/' || (*p == '\\' && at(p + 1, pe) == '/'))) {
					/* "**" + "/" may also match no directory at all:
					 * the first start of the rest, as in the loop
					 * below, and pruned as there (Git keeps only a
					 * match and retries after every later '/':
					 * doubled work for each "**" + "/" that follows). */
					if (p < pe && *p == '/') {
						int z = wm(p + 1, pe, t, te, fl, left);
						if (z == WM_MATCH || z == WM_ABORT_ALL)
							return z;
					}
					match_slash = true;
				} else {
					match_slash = false;
				}
			} else {
				match_slash = !(fl & WM_PATHNAME);
			}
			if (p == pe) {
				if (match_slash)
					return WM_MATCH;
				const uint8_t *s = memchr(t, '/', (size_t)(te - t));
				SPEND((s ? s + 1 : te) - t);
				/* A slash left: left for every later start of an
				 * enclosing '*' in this component too. */
				return s ? WM_ABORT_TO_STARSTAR : WM_MATCH;
			}
			if (!match_slash && *p == '/') {
				/* One '*' then '/': skip to the next slash. */
				const uint8_t *s = memchr(t, '/', (size_t)(te - t));
				SPEND((s ? s + 1 : te) - t);
				/* No slash in the rest: none in what any later
				 * start of an enclosing '*' leaves either, as for a
				 * literal below (Git retries, scanning again). */
				if (s == NULL)
					return WM_ABORT_ALL;
				/* The rest from that slash: what every later start
				 * of an enclosing '*' in this component comes to
				 * too (Git matches it again for each: quadratic in
				 * the component). */
				int m = wm(p, pe, s, te, fl, left);
				return m == WM_NOMATCH ? WM_ABORT_TO_STARSTAR : m;
			}
			for (;;) {
				if (t == te)
					break;
				SPEND(1);
				if (!lz_wm_special(*p)) {
					/* A literal follows: skip text up to its next occurrence. */
					uint8_t want = (fl & WM_CASEFOLD) ? lz_ascii_fold(*p) : *p;
					bool found = false;
					const uint8_t *from = t;
					while (t < te && (match_slash || *t != '/')) {
						uint8_t c = (fl & WM_CASEFOLD) ? lz_ascii_fold(*t) : *t;
						if (c == want) {
							found = true;
							break;
						}
						t++;
					}
					SPEND(t - from);
					/* Not in the rest of the text (of the component): a
					 * later start of any enclosing '*' leaves less text
					 * to search, so stop them all (up to a "**" that may
					 * move past the slash). Git returns NOMATCH here and
					 * backtracks exponentially on "*a*a*a...b"; the
					 * result is the same, only the search is pruned. */
					if (!found)
						return t == te ? WM_ABORT_ALL : WM_ABORT_TO_STARSTAR;
				}
				tc = *t;
				int m = wm(p, pe, t, te, fl, left);
				if (m != WM_NOMATCH) {
					if (!match_slash || m != WM_ABORT_TO_STARSTAR)
						return m;
				} else if (!match_slash && tc == '/') {
					return WM_ABORT_TO_STARSTAR;
				}
				t++;
			}
			return WM_ABORT_ALL;
		}
		if (pc == '[') {
			p++;
			uint8_t c = at(p, pe), prev = 0;
			if (c == '^')
				c = '!';
			bool negated = c == '!', matched = false;
			/* Where the last "[:" that named no class ended: a later
			 * "[:" before it ends there too and names none either
			 * (without it, a bracket of many "[:" is rescanned for each,
			 * quadratic in the pattern at every text position). */
			const uint8_t *no_class_end = p;
			if (negated)
				c = (++p < pe ? *p : 0);
			do {
				SPEND(1);
				if (c == 0)
					return WM_ABORT_ALL;
				if (c == '\\') {
					c = (++p < pe ? *p : 0);
					if (c == 0)
						return WM_ABORT_ALL;
					if (tc == c)
						matched = true;
				} else if (c == '-' && prev && at(p + 1, pe) && at(p + 1, pe) != ']') {
					c = (++p < pe ? *p : 0);
					if (c == '\\') {
						c = (++p < pe ? *p : 0);
						if (c == 0)
							return WM_ABORT_ALL;
					}
					if (tc <= c && tc >= prev)
						matched = true;
					else if ((fl & WM_CASEFOLD) && tc >= 'a' && tc <= 'z') {
						uint8_t up = (uint8_t)(tc - 32);
						if (up <= c && up >= prev)
							matched = true;
					}
					c = 0; /* a range end starts no new range */
				} else if (c == '[' && at(p + 1, pe) == ':' && p < no_class_end) {
					if (tc == c)
						matched = true;
				} else if (c == '[' && at(p + 1, pe) == ':') {
					const uint8_t *s = p + 2;
					p = s;
					while (p < pe && *p != ']')
						p++;
					SPEND(p - s);
					if (p == pe)
						return WM_ABORT_ALL;
					ptrdiff_t n = p - s - 1;
					if (n < 0 || p[-1] != ':') {
						/* No ":]": the '[' is an ordinary member. */
						no_class_end = p;
						p = s - 2;
						c = '[';
						if (tc == c)
							matched = true;
						continue;
					}
					bool known;
					if (wm_class(s, (size_t)n, tc, fl, &known))
						matched = true;
					if (!known)
						return WM_ABORT_ALL;
					c = 0;
				} else if (tc == c) {
					matched = true;
				}
			} while (prev = c, c = (++p < pe ? *p : 0), c != ']');
			if (matched == negated || ((fl & WM_PATHNAME) && tc == '/'))
				return WM_NOMATCH;
			continue;
		}
		if (tc != pc)
			return WM_NOMATCH;
	}
	return t == te ? WM_MATCH : WM_NOMATCH;
}


bool lz_wildmatch(const uint8_t *p, const uint8_t *pe, const uint8_t *t, const uint8_t *te, unsigned flags)
{
	uint64_t unbounded = UINT64_MAX;
	return wm(p, pe, t, te, flags, &unbounded) == WM_MATCH;
}

bool lz_wildmatch_within(const uint8_t *p, const uint8_t *pe, const uint8_t *t, const uint8_t *te,
			 unsigned flags, uint64_t *steps)
{
	return *steps > 0 && wm(p, pe, t, te, flags, steps) == WM_MATCH;
}
