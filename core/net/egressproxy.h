/* The egress proxy: egress by name (spec 3.7 as extended by issue 18,
 * network.allow_domains).
 *
 * The sandbox's only way to a public name is this HTTP proxy at
 * 10.137.55.10:3128 (egress.h builds its link and process). It admits
 *   CONNECT host:port            by the name, then, when the client speaks
 *                                first and speaks TLS, by the ClientHello's
 *                                server name, which must be the same name;
 *   METHOD http://host[:port]/   plain HTTP by the name (a Host header must
 *                                agree), forwarded in origin form with
 *                                "Connection: close";
 * and nothing else: an address instead of a name, a name outside
 * allow_domains or inside deny_domains, a name that does not resolve, or
 * one whose resolved addresses include any address the address policy
 * denies (lz_netpolicy_admits) is refused with an HTTP error status, which
 * clients report as a failed connection. The proxy resolves each name
 * itself, once, with its own resolvers (never the sandbox's DNS), and
 * connects to an address it checked: a second answer cannot move the
 * connection (DNS rebinding). Bytes inside an admitted CONNECT that are not
 * TLS (or a server that speaks first) are relayed as they are: the name and
 * the address were checked, the protocol is the client's.
 *
 * Every refusal is counted, and the first refusal of each destination is
 * one line in hc.log. The proxy is hostile input's first reader: every
 * request head is bounded (LZ_HTTP_HEAD_MAX), and costs work linear in its
 * length however it is cut into packets (as does a ClientHello), every
 * wait has a deadline, and at most a host-sized number of connections
 * (lz_egress_limits_for) are served at once by all the proxies of the
 * Storage Root together (LZ_EGRESS_SLOTS). */
#ifndef LZ_EGRESSPROXY_H
#define LZ_EGRESSPROXY_H

#include <stddef.h>
#include <stdint.h>

#include "net/httphead.h"
#include "net/netpolicy.h"
#include "util/err.h"

#define LZ_EGRESS_MAX_CONNECTIONS 256 /* on any host */
#define LZ_EGRESS_MIN_CONNECTIONS 16  /* on the smallest */
#define LZ_EGRESS_HEAD_MS 30000    /* the client's request head */
#define LZ_EGRESS_DNS_MS 2000      /* each resolver, */
#define LZ_EGRESS_DNS_ROUNDS 2     /* each of them twice when none answers */
#define LZ_EGRESS_CONNECT_MS 10000 /* each upstream address */
/* A relayed connection where no byte moved either way, or a send that
 * found no room, for this long ends: a tunnel nobody uses (a server that
 * went silent, a client that stopped reading) gives its connection slot
 * back instead of holding one of its connection slots forever. */
#define LZ_EGRESS_IDLE_MS (15 * 60 * 1000)

/* What the proxy may hold of the host's TCP memory (docs/threat-model.md,
 * "Hostile bytes at the egress proxy"). Each relayed connection's kernel
 * buffers are fixed (the kernel doubles each), never autotuned: a sandbox
 * that reads fast and then stops cannot grow them. All connections
 * together stay within a quarter of the host's TCP memory pressure
 * threshold (tcp_mem's second value), past which the kernel holds every
 * socket of the host to small buffers (whatever the number of Domains:
 * the connections are the host's slots, lz_egress_config.slots_fd): fewer
 * connections first (full buffers down to 64 connections), then smaller
 * buffers, then fewer connections again, never under
 * LZ_EGRESS_MIN_CONNECTIONS. */
struct lz_egress_limits {
	int upstream_rcvbuf, upstream_sndbuf; /* a download's window, and its upload */
	int sandbox_rcvbuf, sandbox_sndbuf;
	unsigned max_connections;
};
void lz_egress_limits_for(uint64_t tcp_pressure_bytes, struct lz_egress_limits *out);

/* The host's TCP memory pressure threshold in bytes, read from
 * /proc/sys/net/ipv4/tcp_mem (present in the initial network namespace
 * only): 0, or -errno with err set. */
int lz_egress_tcp_pressure(uint64_t *ret_bytes, struct lz_err *err);

struct lz_egress_config {
	const struct lz_netpolicy *policy; /* with a name policy */
	uint32_t resolvers[LZ_NETPOLICY_MAX_RESOLVERS];
	size_t n_resolvers;
	uint16_t dns_port; /* 53 */
	int log_fd;        /* hc.log, or -1 */
	int stats_fd;      /* the counters record (egress.h), or -1 */
	/* The host's connection slots (proc/lockslots.h), shared by every
	 * proxy of the developer's Domains: limits.max_connections is the
	 * budget of all of them together, not of each (LZ_EGRESS_SLOTS). */
	int slots_fd;
	uint64_t generation;
	struct lz_egress_limits limits; /* lz_egress_limits_for */
};

/* The slots file in the Storage Root: empty, its bytes locked by the
 * proxies, one a connection. */
#define LZ_EGRESS_SLOTS "egress.slots"

/* The name check of one request: 0 to go on, -EACCES with why naming the
 * reason (an address instead of a name, not in allow_domains, in
 * deny_domains). */
int lz_egress_check_name(const struct lz_netpolicy *p, const struct lz_http_request *req, struct lz_err *why);

/* The address check of a resolved name: 0 when every address passes the
 * address policy, -EACCES naming the first that does not. */
int lz_egress_check_addrs(const struct lz_netpolicy *p, const uint32_t *addrs, size_t n, struct lz_err *why);

/* The counters record (the Domain Root's egress.stats): exactly
 * "allowed %20llu\nrefused %20llu\n", replaced whole by one pwrite. */
#define LZ_EGRESS_STATS "egress.stats"
#define LZ_EGRESS_STATS_LEN 58
void lz_egress_stats_format(uint64_t allowed, uint64_t refused, char out[LZ_EGRESS_STATS_LEN + 1]);

/* Reads the record beneath domain_root_fd: -ENOENT when there is none (no
 * launch with allow_domains yet), -EBADMSG for anything but the exact
 * form. Outputs untouched on failure. */
int lz_egress_stats_read(int domain_root_fd, uint64_t *ret_allowed, uint64_t *ret_refused, struct lz_err *err);

/* Serves connections accepted on listener, each on a thread of its own,
 * until accept fails for good; returns that error. cfg must outlive it. */
int lz_egress_serve(int listener, const struct lz_egress_config *cfg);

#endif
