/* A growing array: one doubling rule, bounded, for the arrays a file or a
 * sandbox sizes (each caller names its own bound). */
#ifndef LZ_UTIL_GROW_H
#define LZ_UTIL_GROW_H

#include <errno.h>
#include <stdlib.h>

/* Makes *pp (an array of *cap elements of elem bytes) hold at least need:
 * 0, -E2BIG past max elements, -ENOMEM (*pp and *cap unchanged then). */
static inline int lz_grow(void *pp, size_t *cap, size_t elem, size_t need, size_t max)
{
	void **p = pp;
	if (need <= *cap)
		return 0;
	if (need > max)
		return -E2BIG;
	size_t n = *cap ? *cap : 16;
	while (n < need)
		n = n > max / 2 ? max : n * 2;
	void *q = reallocarray(*p, n, elem);
	if (q == NULL)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

#endif
