/* Route policy of the enforcement network namespace over rtnetlink
 * (spec 3.7 "Default policy and deny representation", "Linux policy state";
 * SR-6).
 *
 * Everything here acts on the CURRENT network namespace: the Runtime
 * Supervisor calls it after entering its own namespaces, while it still holds
 * network-administration capability there.
 *
 * Representation (what lz_netroutes_install creates, table main, protocol
 * static, metric 0, TOS 0):
 *   DENY, CANARY_DENY    unicast <prefix> dev lo scope link
 *                        A loopback-unicast deny route: matching packets are
 *                        handed to the loopback device and never leave
 *                        through dev. The kernel needs lo UP (otherwise
 *                        ENETDOWN "Device for nexthop is not up") and flushes
 *                        these routes when lo goes down, so the observation
 *                        below must come after the last link change.
 *                        blackhole, unreachable and prohibit routes are never
 *                        created (SR-6).
 *   ALLOW                unicast <prefix> via <gateway> dev <dev>
 *   CANARY_ALLOW         unicast <prefix> dev lzcanary0 scope link: on-link
 *                        through the attestation veth (canary.h), which
 *                        must exist; the route goes with it at cleanup
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
 * do not decide where a packet goes. All tables are observed, so a route in
 * table local or default that would take precedence over table main is seen.
 * The only routes left out are the ones the kernel derives from interface
 * addresses in table local (protocol kernel): "local <address>" on the
 * address's device, "local <prefix>" of an address in 127.0.0.0/8 on a
 * loopback device, and "broadcast <broadcast|network address>" of an address
 * on the same device. They deliver to this host and forward nothing. The
 * "local <prefix>" route of any other address on a loopback device is
 * observed: it is a loopback-address deny (below); for a /32 address it is
 * also its "local <address>", which is then observed too. The connected route the
 * kernel adds to table main for the tap0 address IS observed: it has exactly
 * the projection of the HELPER on-link /24, and install treats it as that
 * route (an exclusive create of the same key would fail with EEXIST).
 *
 * Preconditions of install: lo and dev are up, dev holds the sandbox address,
 * and table main holds no route of the plan except that connected route.
 * slirp4netns --configure adds "default via <gateway> dev tap0"; delete it
 * with lz_netroutes_delete before installing a plan that contains 0.0.0.0/0.
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
 * route and the broadcast are address-derived and left out (see above).
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

/* Hard limit on routes in a policy, and on routes, links and addresses read
 * back from the kernel. */
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

/* Creates the plan's routes with NLM_F_CREATE|NLM_F_EXCL: on-link routes
 * first (they make the gateway reachable), then denies, then allows. The
 * first refusal stops and is returned as -errno with the route and the
 * kernel's extended-ack reason in err (EEXIST for a route already there,
 * ENODEV for a missing device, ENETDOWN when lo or dev is down, EPERM without
 * capability). Not transactional: routes created before a failure stay; the
 * caller discards the namespace. */
int lz_netroutes_install(const struct lz_netroutes_entry *routes, size_t n, const char *dev, uint32_t gateway,
			 struct lz_err *err);

/* The same with the deny representation chosen. With
 * LZ_NETROUTES_DENY_AS_ADDRESS the deny step adds loopback addresses as
 * lz_netroutes_install_loopback_denies does (after the on-link routes, before
 * the allows). */
int lz_netroutes_install_as(const struct lz_netroutes_entry *routes, size_t n, const char *dev, uint32_t gateway,
			    enum lz_netroutes_deny_as deny_as, struct lz_err *err);

/* Adds, for every DENY and CANARY_DENY entry (other kinds are ignored, equal
 * prefixes once), the loopback address described above with
 * NLM_F_CREATE|NLM_F_EXCL. Refuses with EINVAL a deny of 0.0.0.0/0 or a
 * prefix with host bits (before touching the kernel), ENODEV/ENETDOWN when lo
 * is missing or down, and otherwise the kernel's errno naming the prefix
 * (EEXIST when the address is already there). Not transactional. */
int lz_netroutes_install_loopback_denies(const struct lz_netroutes_entry *entries, size_t n, struct lz_err *err);

/* Reads every IPv4 route of the current namespace as projections sorted by
 * lz_kroute_compare, without the address-derived table-local entries
 * described above. *ret is malloc'ed (NULL when *ret_n is 0); both untouched
 * on failure. E2BIG beyond LZ_NETROUTES_MAX entries; EAGAIN when the dump
 * kept being interrupted by concurrent changes. */
int lz_netroutes_observe(struct lz_kroute **ret, size_t *ret_n, struct lz_err *err);

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

/* The route the kernel picks for output to dst (host byte order), as
 * RTM_GETROUTE ("ip route get") reports it: dst is dst/32, dev and gateway are
 * the chosen next hop. -ENETUNREACH (or what the kernel says) when none. */
int lz_netroutes_lookup(uint32_t dst, struct lz_kroute *ret, struct lz_err *err);

/* Deletes the one route with exactly this projection (table, destination,
 * TOS, metric, type, scope, device, gateway); any protocol. -ESRCH when there
 * is none, -EINVAL for a projection with extra bits, -ENOTUNIQ when another
 * route shares its table, destination and TOS (the kernel's delete treats
 * metric 0 and a missing gateway as wildcards, so it could pick that one).
 * For removing what a configurator added (slirp4netns's default route) and
 * for tests. */
int lz_netroutes_delete(const struct lz_kroute *route, struct lz_err *err);

/* Writes "1" to /proc/sys/net/ipv6/conf/{default,all}/disable_ipv6 (opened
 * beneath /proc, which must be procfs, without following symlinks or
 * crossing mounts) and reads both back. Returns 0, or 1 when the kernel has
 * no IPv6 at all (no conf directory): then there is nothing to disable and
 * lz_netroutes_ipv6_clean is the check that matters. */
int lz_netroutes_disable_ipv6(struct lz_err *err);

/* *ret = true when the namespace has no IPv6 address other than ::1/128 on a
 * loopback device and no IPv6 route other than ::1/128 through a loopback
 * device (cache entries aside). Untouched on failure. */
int lz_netroutes_ipv6_clean(bool *ret, struct lz_err *err);

#endif
