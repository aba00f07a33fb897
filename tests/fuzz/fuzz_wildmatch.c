/* libFuzzer target for core/router/wildmatch.c (lz_wildmatch), which matches
 * the patterns of .gitignore and exclude files the sandbox writes against
 * workspace paths the sandbox names.
 *
 * The input is a pattern, a NUL byte and a text (which ends at the next
 * NUL, as paths and ignore-file lines do; without a NUL the pattern is its
 * own text). The pattern is cut at PATTERN_LEN_MAX (LZ_PATH_MAX, the bound
 * core/router/ignoreclass_build.c puts on a line) and the text at
 * LZ_PATH_MAX. Every input is matched under all four flag combinations.
 *
 * When both are short, the result must equal a model written from
 * wildmatch.h and gitignore(5) without any of the pruning: a memoized
 * search over (pattern offset, text offset) that tries every split a '*'
 * allows (within a component unless it is a "**" between slashes or at an
 * end under LZ_WM_PATHNAME, where "**" + "/" may also match no directory),
 * with brackets parsed on their own ('!' or '^', ranges, "[:class:]", an
 * unknown class or an unterminated bracket never matching, '?' and
 * brackets never matching '/' under LZ_WM_PATHNAME) and LZ_WM_CASEFOLD
 * folding the text and unescaped, unbracketed pattern bytes only. So the
 * WM_ABORT_* pruning must never change an answer.
 *
 * Long inputs only run (sanitizers, and libFuzzer's -timeout for
 * super-linear matching). Any violation abort()s. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs/pathauth.h"
#include "router/wildmatch.h"

#define PAT_MAX LZ_PATH_MAX
#define TEXT_MAX LZ_PATH_MAX
/* The model's memo table is MODEL_MAX + 1 squared. */
#define MODEL_MAX 128

static void check(bool ok)
{
	if (!ok)
		abort();
}

static const uint8_t *P, *T;
static size_t PL, TL;
static unsigned FL;
/* 0 unknown, 1 no, 2 yes */
static uint8_t memo[MODEL_MAX + 1][MODEL_MAX + 1];

static uint8_t fold(uint8_t c)
{
	return (FL & LZ_WM_CASEFOLD) && c >= 'A' && c <= 'Z' ? (uint8_t)(c + 32) : c;
}

/* A POSIX class by name: 1 member, 0 not, -1 unknown name. */
static int model_class(const uint8_t *n, size_t len, uint8_t c)
{
	static const char *const names[] = { "alnum", "alpha", "blank", "cntrl", "digit", "graph",
					     "lower", "print", "punct", "space", "upper", "xdigit" };
	int which = -1;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == len && memcmp(names[i], n, len) == 0)
			which = (int)i;
	bool up = c >= 'A' && c <= 'Z', low = c >= 'a' && c <= 'z', dig = c >= '0' && c <= '9';
	switch (which) {
	case 0:
		return up || low || dig;
	case 1:
		return up || low;
	case 2:
		return c == ' ' || c == '\t';
	case 3:
		return c < 0x20 || c == 0x7f;
	case 4:
		return dig;
	case 5:
		return c > 0x20 && c < 0x7f;
	case 6:
		return low;
	case 7:
		return c >= 0x20 && c < 0x7f;
	case 8:
		return c > 0x20 && c < 0x7f && !up && !low && !dig;
	case 9:
		return c == ' ' || c == '\t' || c == '\n' || c == '\r';
	case 10:
		return up || ((FL & LZ_WM_CASEFOLD) && low);
	case 11:
		return dig || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
	default:
		return -1;
	}
}

/* The bracket opening at P[p] against the (folded) text byte tc: the
 * offset past its ']' with *in set, or 0 when it is malformed (never
 * matches anything). */
static size_t model_bracket(size_t p, uint8_t tc, bool *in)
{
	bool m = false, neg = false, first = true;
	int prev = -1; /* the last single member, which may start a range */
	p++;
	if (p < PL && (P[p] == '!' || P[p] == '^')) {
		neg = true;
		p++;
	}
	for (;;) {
		if (p >= PL)
			return 0;
		uint8_t c = P[p];
		if (c == ']' && !first)
			break;
		first = false;
		if (c == '\\') {
			if (++p >= PL)
				return 0;
			m |= tc == P[p];
			prev = P[p++];
		} else if (c == '-' && prev >= 0 && p + 1 < PL && P[p + 1] != ']') {
			uint8_t hi = P[p + 1];
			p += 2;
			if (hi == '\\') {
				if (p >= PL)
					return 0;
				hi = P[p++];
			}
			m |= tc >= prev && tc <= hi;
			if ((FL & LZ_WM_CASEFOLD) && tc >= 'a' && tc <= 'z')
				m |= tc - 32 >= prev && tc - 32 <= hi;
			prev = -1;
		} else if (c == '[' && p + 1 < PL && P[p + 1] == ':') {
			size_t q = p + 2;
			while (q < PL && P[q] != ']')
				q++;
			if (q >= PL)
				return 0;
			if (q >= p + 3 && P[q - 1] == ':') {
				int k = model_class(P + p + 2, q - 1 - (p + 2), tc);
				if (k < 0)
					return 0;
				m |= k == 1;
				prev = -1;
				p = q + 1;
			} else {
				m |= tc == '[';
				prev = '[';
				p++;
			}
		} else {
			m |= tc == c;
			prev = c;
			p++;
		}
	}
	*in = m != neg;
	return p + 1;
}

static bool model(size_t p, size_t t)
{
	if (memo[p][t])
		return memo[p][t] == 2;
	bool r = false;
	size_t p_in = p, t_in = t;
	for (;;) {
		if (p == PL) {
			r = t == TL;
			break;
		}
		uint8_t pc = P[p];
		if (t == TL && pc != '*')
			break;
		uint8_t tc = t < TL ? fold(T[t]) : 0;
		if (pc == '*') {
			size_t s = p;
			while (p < PL && P[p] == '*')
				p++;
			bool any = !(FL & LZ_WM_PATHNAME);
			if (p - s >= 2 && (FL & LZ_WM_PATHNAME) && (s == 0 || P[s - 1] == '/') &&
			    (p == PL || P[p] == '/' || (P[p] == '\\' && p + 1 < PL && P[p + 1] == '/'))) {
				any = true;
				if (p < PL && P[p] == '/' && model(p + 1, t)) {
					r = true;
					break;
				}
			}
			for (size_t k = t;; k++) {
				if (model(p, k)) {
					r = true;
					break;
				}
				if (k == TL || (!any && T[k] == '/'))
					break;
			}
			break;
		}
		if (pc == '\\') {
			if (p + 1 == PL || tc != P[p + 1])
				break;
			p += 2;
			t++;
			continue;
		}
		if (pc == '?') {
			if ((FL & LZ_WM_PATHNAME) && tc == '/')
				break;
			p++;
			t++;
			continue;
		}
		if (pc == '[') {
			bool in = false;
			size_t e = model_bracket(p, tc, &in);
			if (e == 0 || !in || ((FL & LZ_WM_PATHNAME) && tc == '/'))
				break;
			p = e;
			t++;
			continue;
		}
		if (fold(pc) != tc)
			break;
		p++;
		t++;
	}
	memo[p_in][t_in] = r ? 2 : 1;
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, '\0', size);
	size_t pl = nul ? (size_t)(nul - data) : size;
	const uint8_t *t = nul ? nul + 1 : data;
	size_t rest = nul ? size - pl - 1 : size;
	const uint8_t *tnul = memchr(t, '\0', rest);
	size_t tl = tnul ? (size_t)(tnul - t) : rest;
	if (pl > PAT_MAX)
		pl = PAT_MAX;
	if (tl > TEXT_MAX)
		tl = TEXT_MAX;

	/* Exact-size copies, so ASan sees any read past either end. */
	uint8_t *pc = malloc(pl ? pl : 1), *tc = malloc(tl ? tl : 1);
	check(pc != NULL && tc != NULL);
	memcpy(pc, data, pl);
	memcpy(tc, t, tl);

	for (unsigned fl = 0; fl < 4; fl++) {
		bool got = lz_wildmatch(pc, pc + pl, tc, tc + tl, fl);
		/* Within a budget: the same answer, or none (steps left 0, and
		 * false) when it ran out; a match never costs more than
		 * wildmatch.h promises: twice the pattern's length times the
		 * text's (a bracket's bytes are looked at twice where a "[:"
		 * names no class), plus the text's length times its longest
		 * component's (a '*' looking for a slash). */
		size_t comp = 0, longest = 0;
		for (size_t i = 0; i < tl; i++) {
			comp = tc[i] == '/' ? 0 : comp + 1;
			longest = comp > longest ? comp : longest;
		}
		uint64_t bound = 2 * (uint64_t)(pl + 1) * (tl + 2) + (uint64_t)(tl + 2) * (longest + 2);
		uint64_t left = bound;
		bool within = lz_wildmatch_within(pc, pc + pl, tc, tc + tl, fl, &left);
		check(left > 0 && within == got);
		uint64_t small = (uint64_t)data[0] % 64;
		within = lz_wildmatch_within(pc, pc + pl, tc, tc + tl, fl, &small);
		check(within ? got : (small == 0 || !got));
		if (pl <= MODEL_MAX && tl <= MODEL_MAX) {
			P = pc;
			PL = pl;
			T = tc;
			TL = tl;
			FL = fl;
			memset(memo, 0, sizeof(memo));
			check(got == model(0, 0));
		}
		/* A pattern with no special byte matches exactly itself. */
		bool plain = true;
		for (size_t i = 0; i < pl && plain; i++)
			plain = !lz_wm_special(pc[i]);
		if (plain) {
			bool eq = pl == tl;
			for (size_t i = 0; i < pl && eq; i++)
				eq = (fl & LZ_WM_CASEFOLD) ? lz_ascii_fold(pc[i]) == lz_ascii_fold(tc[i]) : pc[i] == tc[i];
			check(got == eq);
		}
	}
	free(pc);
	free(tc);
	return 0;
}
