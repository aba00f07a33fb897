/* Route policy of the enforcement network namespace: the derived policy's
 * entries, the policy-semantic projection of a kernel route, the plan (the
 * projection the policy must produce) and the match of an observation
 * against it (spec 3.7 "Default policy and deny representation", "Linux
 * policy state"; SR-6).
 *
 * Pure: nothing here touches the kernel. The kernel side acts on the CURRENT
 * network namespace: netroutes_install.h creates and deletes routes and
 * loopback denies, netroutes_observe.h reads routes back, netroutes_ipv6.h
 * turns IPv6 off and checks it.
 *
 * Representation (what lz_netroutes_install creates, table main, protocol
 * static, metric 0, TOS 0):
 *   DENY, CANARY_DENY    unicast <prefix> dev lo scope link
 *                        A loopback-unicast deny route: matching packets are
 *                        handed to the loopback device and never leave
 *                        through dev. The kernel needs lo UP (otherwise
 *                        ENETDOWN "Device for nexthop is not up") and flushes
 *                        these routes when lo goes down, so the observation
 *                        (netroutes_observe.h) must come after the last link
 *                        change.
 *                        blackhole, unreachable and prohibit routes are never
 *                        created (SR-6).
 *   ALLOW                unicast <prefix> via <gateway> dev <dev>
 *   CANARY_ALLOW         unicast <prefix> dev lzcanary0 scope link: on-link
 *                        through the attestation veth (canary.h), which
 *                        must exist; the route goes with it at cleanup
 *   EGRESS               unicast <prefix> dev lzegress0 scope link: on-link
 *                        to the egress proxy's link (egresslink.h), present
 *                        only in a policy with allow_domains
 *   HELPER               unicast <prefix> dev <dev> scope link (on-link: the
 *                        slirp4netns /24 and the gateway and DNS /32s)
 * (That is the route representation, LZ_NETROUTES_DENY_AS_ROUTE. With
 * LZ_NETROUTES_DENY_AS_ADDRESS a deny is a loopback address instead, below.)
 * Equal prefixes: a deny beats any other kind (the other is not installed);
 * DENY and CANARY_DENY share one route; two of HELPER, ALLOW and
 * CANARY_ALLOW at the same prefix are refused (two different next hops, no
 * rule says which wins).
 *
 * Observation is a policy-semantic projection (struct lz_kroute): table,
 * destination, TOS, metric, type, scope, next-hop device and gateway, plus a
 * bit set of route features outside that vocabulary (multipath, encap,
 * nexthop objects, source prefixes, ...), any of which makes the route
 * unmatchable. Counters, cache entries (RTM_F_CLONED), metrics such as MTU,
 * preferred source, realms, carrier state and the protocol are left out: they
 * do not decide where a packet goes. Which kernel routes are observed is
 * netroutes_observe.h's.
 *
 * What the sandbox sees: runsc --network=sandbox copies routes into its own
 * netstack when it starts. Release 20240729 copies tap0's main-table routes
 * and only the address-derived routes of lo, so these lo deny routes do not
 * reach the sandbox's stack there; runsc copies lo's main-table routes from
 * release-20260330.0 on (gVisor commit b7386e3). The imported-behaviour
 * attestation (denied canary unreachable from inside) is what catches this.
 * runsc also moves tap0's address into its netstack, and the kernel then
 * drops the connected /24: observe before runsc starts (or install the /24
 * as a static route by giving tap0 its address with noprefixroute).
 *
 * Deny as a loopback address (LZ_NETROUTES_DENY_AS_ADDRESS,
 * lz_netroutes_install_loopback_denies): each DENY/CANARY_DENY prefix P/len
 * becomes the address A/len on lo, scope host, without IFA_F_NOPREFIXROUTE,
 * where A is P + 1 (the network's first host) for len < 31 and P itself for
 * /31 and /32. Why addresses, not routes: measured with runsc 0.0~20240729
 * (--network=sandbox), gVisor imports the enforcement namespace's tap0
 * main-table routes but for lo ONLY the routes derived from lo's own
 * addresses; "10.0.0.0/8 dev lo" is not imported and denies nothing in the
 * sandbox, whereas after "ip addr add 10.0.0.1/8 dev lo" the sandbox shows
 * "10.0.0.0/8 dev lo scope link" and (without an allow) routes 10.250.0.10
 * to dev lo: packets go to the loopback device and are not forwarded. A
 * more-specific allow via tap0 still wins by longest prefix. Side effect: A itself becomes a local
 * address of the sandbox, so a connection to A (one host of the denied
 * prefix) reaches the sandbox itself; it never leaves.
 * What Linux makes of it (observed with iproute2 in a fresh namespace): in
 * table local, protocol kernel, "local A dev lo scope host" and "local P/len
 * dev lo scope host" (one route when len is 32), plus "broadcast
 * <last address of P>" for len < 31; no route in table main. So in the
 * Linux namespace the whole prefix is local ("ip route get" answers "local
 * ... dev lo"), not only A. The projection of
 * such a deny is "local P/len dev lo scope host table local"; the /32 local
 * route and the broadcast are address-derived and left out
 * (netroutes_observe.h).
 * Linux makes no prefix route for a loopback address in 0.0.0.0/8 or
 * 224.0.0.0/4 (only the address's own /32 local route): such denies are
 * left out of the plan, install adds their addresses after it, and
 * lz_netroutes_check_unrouted_denies proves the addresses are there
 * (runsc imports them and routes the whole prefix to lo: measured).
 * A deny of 0.0.0.0/0 has no address form (it is netpolicy's default-allow
 * flag being false: leave the default route out) and is refused.
 *
 * Threat: a route the policy did not ask for (left by a configurator, added by
 * a bug, shadowing from another table), or a deny that silently became
 * something else; either would let the sandbox reach a denied destination. */
#ifndef LZ_NETROUTES_H
#define LZ_NETROUTES_H

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/netprefix.h"
#include "util/err.h"

/* The enforcement side of the canary veth (spec 3.7 "Known-live control"). */
#define LZ_NETROUTES_CANARY_DEV "lzcanary0"
/* The enforcement side of the egress proxy's veth (egresslink.h). */
#define LZ_NETROUTES_EGRESS_DEV "lzegress0"

/* Hard limit on routes in a policy, and on routes, links and addresses read
 * back from the kernel (rtnl.h's LZ_RTNL_DUMP_MAX is the same number). */
#define LZ_NETROUTES_MAX 4096u

/* The kinds of the derived policy, numbered as netpolicy.h's
 * lz_netroute_kind (its v1 encoding), so that a decoded policy converts entry
 * by entry. netpolicy.h represents 0.0.0.0/0 as its ipv4_default_allow flag,
 * not as a route: the caller adds {0.0.0.0/0, ALLOW} when the flag is set and
 * {0.0.0.0/0, DENY} when it is not. */
enum lz_netroutes_kind {
	LZ_NETROUTES_ALLOW = 0,
	LZ_NETROUTES_DENY = 1,
	LZ_NETROUTES_HELPER = 2,
	LZ_NETROUTES_CANARY_ALLOW = 3,
	LZ_NETROUTES_CANARY_DENY = 4,
	LZ_NETROUTES_EGRESS = 5,
};

/* One entry of the derived policy (names distinct from netpolicy.h's, so
 * both headers can be included together). */
struct lz_netroutes_entry {
	struct lz_prefix prefix;
	enum lz_netroutes_kind kind;
};

/* How a deny is represented (see above). */
enum lz_netroutes_deny_as {
	LZ_NETROUTES_DENY_AS_ROUTE = 0,   /* "unicast <prefix> dev lo scope link" */
	LZ_NETROUTES_DENY_AS_ADDRESS = 1, /* an address on lo; what gVisor imports */
};

/* lz_kroute.extra: route features the projection cannot express. */
#define LZ_KROUTE_X_MULTIPATH 0x001u   /* RTA_MULTIPATH */
#define LZ_KROUTE_X_ENCAP 0x002u       /* lightweight tunnel encapsulation */
#define LZ_KROUTE_X_NHID 0x004u        /* nexthop object (RTA_NH_ID) */
#define LZ_KROUTE_X_VIA 0x008u         /* RTA_VIA gateway of another family */
#define LZ_KROUTE_X_SRC 0x010u         /* source-prefix route */
#define LZ_KROUTE_X_IIF 0x020u         /* input-interface route */
#define LZ_KROUTE_X_ONLINK 0x040u      /* RTNH_F_ONLINK */
#define LZ_KROUTE_X_PERVASIVE 0x080u   /* RTNH_F_PERVASIVE */
#define LZ_KROUTE_X_DEAD 0x100u        /* RTNH_F_DEAD: never used for lookup */
#define LZ_KROUTE_X_UNKNOWN_DEV 0x200u /* ifindex with no device here */
#define LZ_KROUTE_X_OTHER 0x400u       /* an attribute this module does not know */

/* Policy-semantic projection of one IPv4 kernel route. Compare with
 * lz_kroute_compare, never memcmp. */
struct lz_kroute {
	uint32_t table;        /* RT_TABLE_* or a number */
	struct lz_prefix dst;  /* host bits zero */
	uint8_t tos;
	uint32_t priority;     /* metric */
	uint8_t type;          /* RTN_* */
	uint8_t scope;         /* RT_SCOPE_* */
	char dev[IF_NAMESIZE]; /* next-hop device, "" when none */
	uint32_t gateway;      /* host byte order, 0 when on-link or none */
	uint32_t extra;        /* LZ_KROUTE_X_*; nonzero never matches a plan */
	uint8_t protocol;      /* RTPROT_*: provenance only, NOT compared */
};

/* Orders by every projected field except protocol; 0 means equal. */
int lz_kroute_compare(const struct lz_kroute *a, const struct lz_kroute *b);

/* ip-route-like text, e.g. "unicast 10.0.0.0/8 dev lo scope link table main". */
#define LZ_KROUTE_STR_MAX 192
void lz_kroute_format(const struct lz_kroute *r, char *out);

/* A DENY or CANARY_DENY in 0.0.0.0/8 or 224.0.0.0/4 shorter than /32: in
 * the address form, Linux makes no route of it (netroutes.h). */
bool lz_netroutes_unrouted_deny(const struct lz_netroutes_entry *e);

/* The projection install produces for routes (dev, gateway in host byte
 * order), with the conflict rules above applied, sorted by lz_kroute_compare.
 * Refuses (EINVAL, naming the entry) an unknown kind, a prefix with host bits,
 * a conflict, an empty or overlong dev, dev "lo", or a zero, loopback or
 * multicast gateway; E2BIG beyond LZ_NETROUTES_MAX. *ret is malloc'ed (NULL
 * when *ret_n is 0); both untouched on failure. */
int lz_netroutes_plan(const struct lz_netroutes_entry *routes, size_t n, const char *dev, uint32_t gateway,
		      struct lz_kroute **ret, size_t *ret_n, struct lz_err *err);

/* The same with the deny representation chosen; lz_netroutes_plan is
 * deny_as LZ_NETROUTES_DENY_AS_ROUTE. With LZ_NETROUTES_DENY_AS_ADDRESS a
 * deny projects to "local <prefix> dev lo scope host table local" (protocol
 * kernel) and a deny of 0.0.0.0/0 is refused with EINVAL. */
int lz_netroutes_plan_as(const struct lz_netroutes_entry *routes, size_t n, const char *dev, uint32_t gateway,
			 enum lz_netroutes_deny_as deny_as, struct lz_kroute **ret, size_t *ret_n,
			 struct lz_err *err);

/* The prefixes that become loopback addresses (see above): those of the
 * DENY and CANARY_DENY entries (other kinds are ignored), equal prefixes
 * once, sorted by lz_prefix_compare. Every entry is checked first: EINVAL for
 * a prefix with host bits or a deny of 0.0.0.0/0, E2BIG beyond
 * LZ_NETROUTES_MAX entries; the message names no operation (the caller
 * prefixes one). *ret is malloc'ed (NULL when *ret_n is 0); both untouched
 * on failure. */
int lz_netroutes_deny_prefixes(const struct lz_netroutes_entry *entries, size_t n, struct lz_prefix **ret,
			       size_t *ret_n, struct lz_err *err);

/* 0 when observed (any order) equals lz_netroutes_plan(derived, ...) exactly,
 * duplicates included; otherwise -EPROTO with the number of missing and
 * unexpected routes and the first of each. Plan refusals are returned as
 * they are. */
int lz_netroutes_match(const struct lz_kroute *observed, size_t n_observed,
		       const struct lz_netroutes_entry *derived, size_t n_derived, const char *dev,
		       uint32_t gateway, struct lz_err *err);

/* The same against lz_netroutes_plan_as(derived, ..., deny_as, ...). */
int lz_netroutes_match_as(const struct lz_kroute *observed, size_t n_observed,
			  const struct lz_netroutes_entry *derived, size_t n_derived, const char *dev,
			  uint32_t gateway, enum lz_netroutes_deny_as deny_as, struct lz_err *err);

#endif
