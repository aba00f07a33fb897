/* IPv4 prefixes of the network policy (spec 3.7, SR-6).
 *
 * Parsing is strict: dotted-quad with exactly four decimal octets (no
 * leading zeros, so "010.0.0.1" cannot mean octal), '/', a length 0..32. A
 * prefix with host bits set is normalized to its network and the caller is
 * told, so configuration can refuse rather than guess. */
#ifndef LZ_NETPREFIX_H
#define LZ_NETPREFIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lz_prefix {
	uint32_t addr; /* host byte order, host bits zero */
	uint8_t len;
};

/* Product topology (spec 3.7): the sandbox network and canary network. */
#define LZ_TOPOLOGY_NET ((struct lz_prefix){ 0x0a893600u, 23 }) /* 10.137.54.0/23 */

/* Parses "a.b.c.d/n". On success stores the normalized prefix and sets
 * *ret_had_host_bits when the text had bits set beyond the length. */
int lz_prefix_parse(const char *text, size_t len, struct lz_prefix *ret, bool *ret_had_host_bits);

/* "a.b.c.d/n" into out (at least LZ_PREFIX_STR_MAX bytes). */
#define LZ_PREFIX_STR_MAX 20
void lz_prefix_format(struct lz_prefix p, char *out);

/* A strict dotted-quad address "a.b.c.d" (the same octet rules) into *ret,
 * host byte order; -EINVAL otherwise, *ret untouched. */
int lz_ipv4_parse(const char *text, size_t len, uint32_t *ret);

/* "a.b.c.d" of addr (host byte order) into out (at least LZ_IPV4_STR_MAX
 * bytes). */
#define LZ_IPV4_STR_MAX 16
void lz_ipv4_format(uint32_t addr, char *out);

/* The network mask of a prefix length 0..32, host byte order (0 for 0). */
uint32_t lz_prefix_mask(uint8_t len);

bool lz_prefix_contains(struct lz_prefix outer, struct lz_prefix inner);
bool lz_prefix_intersects(struct lz_prefix a, struct lz_prefix b);
bool lz_prefix_equal(struct lz_prefix a, struct lz_prefix b);

/* Ordering for canonical encodings: by address, then length. */
int lz_prefix_compare(struct lz_prefix a, struct lz_prefix b);

#endif
