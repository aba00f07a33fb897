#include "net/netprefix.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

uint32_t lz_prefix_mask(uint8_t len)
{
	return len == 0 ? 0 : ~(uint32_t)0 << (32 - len);
}

/* Decimal 0..max without sign or leading zeros; advances *i. */
static int parse_decimal(const char *s, size_t len, size_t *i, unsigned max, unsigned *ret)
{
	size_t start = *i;
	unsigned v = 0;
	while (*i < len && s[*i] >= '0' && s[*i] <= '9') {
		if (*i - start >= 3)
			return -EINVAL;
		v = v * 10 + (unsigned)(s[*i] - '0');
		(*i)++;
	}
	if (*i == start || (s[start] == '0' && *i - start > 1) || v > max)
		return -EINVAL;
	*ret = v;
	return 0;
}

int lz_ipv4_parse(const char *text, size_t len, uint32_t *ret)
{
	char prefix[LZ_PREFIX_STR_MAX];
	struct lz_prefix p;
	if (len == 0 || len > LZ_IPV4_STR_MAX - 1)
		return -EINVAL;
	memcpy(prefix, text, len);
	memcpy(prefix + len, "/32", 3);
	if (lz_prefix_parse(prefix, len + 3, &p, NULL) < 0)
		return -EINVAL;
	*ret = p.addr;
	return 0;
}

int lz_prefix_parse(const char *s, size_t len, struct lz_prefix *ret, bool *ret_had_host_bits)
{
	uint32_t addr = 0;
	unsigned v, plen;
	size_t i = 0;

	for (int octet = 0; octet < 4; octet++) {
		if (parse_decimal(s, len, &i, 255, &v) < 0)
			return -EINVAL;
		addr = addr << 8 | v;
		if (i >= len || s[i] != (octet < 3 ? '.' : '/'))
			return -EINVAL;
		i++;
	}
	if (parse_decimal(s, len, &i, 32, &plen) < 0 || i != len)
		return -EINVAL;
	ret->len = (uint8_t)plen;
	ret->addr = addr & lz_prefix_mask(ret->len);
	if (ret_had_host_bits)
		*ret_had_host_bits = ret->addr != addr;
	return 0;
}

void lz_prefix_format(struct lz_prefix p, char *out)
{
	snprintf(out, LZ_PREFIX_STR_MAX, "%u.%u.%u.%u/%u", p.addr >> 24, (p.addr >> 16) & 0xff,
		 (p.addr >> 8) & 0xff, p.addr & 0xff, p.len);
}

void lz_ipv4_format(uint32_t a, char *out)
{
	snprintf(out, LZ_IPV4_STR_MAX, "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff);
}

bool lz_prefix_contains(struct lz_prefix outer, struct lz_prefix inner)
{
	return outer.len <= inner.len && (inner.addr & lz_prefix_mask(outer.len)) == outer.addr;
}

bool lz_prefix_intersects(struct lz_prefix a, struct lz_prefix b)
{
	return lz_prefix_contains(a, b) || lz_prefix_contains(b, a);
}

bool lz_prefix_equal(struct lz_prefix a, struct lz_prefix b)
{
	return a.addr == b.addr && a.len == b.len;
}

int lz_prefix_compare(struct lz_prefix a, struct lz_prefix b)
{
	if (a.addr != b.addr)
		return a.addr < b.addr ? -1 : 1;
	return (a.len > b.len) - (a.len < b.len);
}
