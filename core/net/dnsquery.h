/* A minimal stub resolver for the egress proxy's A lookups (spec 3.7).
 *
 * The proxy resolves an admitted name itself, so the address it connects
 * to is the one DNS gives for that name, not one the sandbox chose. The
 * answer is checked against the query (id, the one question, opcode) and
 * parsed with every offset bounded: compression pointers go strictly
 * backwards (at most 32 jumps), names are at most 255 bytes, CNAME chains
 * inside the answer are followed at most 8 links and never in a loop.
 * Each query goes out on a fresh UDP socket connect()ed to one server, so
 * only that server's datagrams are read, with a random id and source port,
 * and offers EDNS (answers up to 1232 bytes; a server that does not know
 * EDNS is asked again without); an answer truncated even so is asked
 * for again over TCP (RFC 7766) under the same deadline.
 * Names are those of net/egressname.h; addresses are host byte order. */
#ifndef LZ_DNSQUERY_H
#define LZ_DNSQUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define LZ_DNS_MAX_ADDRS 16

/* A query for name's A record (RD set, class IN) into buf[0..cap), with
 * an EDNS OPT record offering 1232-byte answers when edns. -EINVAL for a
 * name lz_egress_name_normalize refuses, -EMSGSIZE when cap is too small;
 * buf and *ret_len untouched on failure. */
int lz_dns_build_query(uint16_t id, const char *name, bool edns, uint8_t *buf, size_t cap, size_t *ret_len);

/* The A addresses the answer buf[0..len) gives for name, in answer order,
 * at most min(cap, LZ_DNS_MAX_ADDRS) (the rest ignored); *ret_n >= 1.
 * -EBADMSG: malformed, or not the answer to this id and question;
 * -EMSGSIZE: truncated (TC); -ENOENT: NXDOMAIN or no A record; -EIO: any
 * other RCODE; -EINVAL: bad name or cap 0. Outputs untouched on failure. */
int lz_dns_parse_answer(const uint8_t *buf, size_t len, uint16_t id, const char *name, uint32_t *addrs, size_t cap,
			size_t *ret_n, struct lz_err *err);

/* Asks servers[0..n) in order on UDP port, each for up to timeout_ms;
 * datagrams that are not the answer are ignored. Returns on the first
 * answer with addresses or -ENOENT; a server answering -EIO, or
 * -EMSGSIZE (truncated, and not answered whole over TCP), or refusing, is
 * passed over. -ETIMEDOUT when no server gave an answer,
 * else the last server's error. Outputs untouched on failure. */
int lz_dns_resolve(const uint32_t *servers, size_t n_servers, uint16_t port, const char *name, int timeout_ms,
		   uint32_t *addrs, size_t cap, size_t *ret_n, struct lz_err *err);

/* The IPv4 addresses of the "nameserver" lines of resolv.conf text, in
 * order, at most cap; comment lines ('#', ';') and other addresses
 * (IPv6, unparsable) skipped. Always 0; *ret_n may be 0. */
int lz_resolvconf_nameservers(const char *text, size_t len, uint32_t *out, size_t cap, size_t *ret_n);

#endif
