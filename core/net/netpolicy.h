/* Derived network policy, its canonical encodings, its sealed transport, and
 * the attestation and readiness-fingerprint encodings (spec 3.7 "Derived
 * policy and readiness encoding", "Default policy and deny representation";
 * SR-5, SR-6, FR-19, FR-20).
 *
 * The attestation record the RS reports is in netattest.h.
 *
 * Pure mechanisms: nothing here installs a route or talks to the kernel's
 * routing tables. The Host Coordinator derives the policy from trusted
 * configuration, encodes it, digests it and hands the bytes to the Runtime
 * Supervisor in a sealed memfd; the RS verifies seals and digest, installs
 * exactly that policy, and reports an attestation record back.
 *
 * Threat: the RS must install what the HC derived and nothing else, and the
 * HC must not accept readiness that was not observed. So (1) the policy has
 * one canonical encoding, and decoding accepts exactly the policies that
 * derivation can produce (fixed topology routes present with their kinds,
 * configured routes outside the reserved topology, sorted, no duplicates);
 * (2) the memfd must carry exactly the write/shrink/grow/seal seals, so the
 * bytes the digest covers are the bytes that are read; (3) every attestation
 * predicate is a separate observation and the first failing one is named.
 *
 * Fixed v1 topology (spec 3.7), host byte order below:
 *   reserved 10.137.54.0/23; slirp4netns network 10.137.54.0/24; gateway
 *   10.137.54.2; synthetic DNS 10.137.54.3; sandbox 10.137.54.100; canary
 *   network 10.137.55.0/29; enforcement endpoint 10.137.55.1; allowed canary
 *   10.137.55.2; denied canary 10.137.55.3.
 * The topology is implied by the policy version (v1) and is not repeated in
 * the encoding; the routes that depend on it are.
 *
 * ---- Policy semantics ----------------------------------------------------
 * A route set over IPv4 with Linux longest-prefix-match semantics:
 *   ALLOW        normal route via the slirp4netns gateway (default device);
 *   DENY         loopback-unicast route: matching destinations go to a local
 *                unicast loopback route and are not forwarded. Never a
 *                `blackhole` route (SR-6);
 *   HELPER       fixed connectivity-helper routes: 10.137.54.0/24 on-link and
 *                the gateway and DNS /32s. They are more specific than the
 *                RFC 1918 deny (and than any valid configured deny), so they
 *                take precedence over it by longest prefix match;
 *   CANARY_ALLOW 10.137.55.2/32, the allowed canary endpoint;
 *   CANARY_DENY  10.137.55.0/29, the aggregate loopback-unicast canary deny.
 * Flags: ipv4_default_allow is the disposition of 0.0.0.0/0 (true unless a
 * configured deny is 0.0.0.0/0 itself; a /0 is never a route, the flag is
 * its one representation). ipv6_disabled is always true in v1.
 *
 * Derivation rules:
 *   - the default denies 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 and the
 *     five fixed routes are always present;
 *   - the special default denies (no implicit host authority: 0.0.0.0/8,
 *     100.64.0.0/10, 169.254.0.0/16, 192.0.0.0/24, 198.18.0.0/15,
 *     224.0.0.0/4, 240.0.0.0/4) are present unless a configured allow
 *     contains one; the documentation ranges are not denied;
 *   - each address the host holds at launch is a /32 DENY unless it is
 *     loopback, in the reserved topology, under a DENY already, or a
 *     configured allow contains it (then no route: it is an ordinary
 *     deny, not distinguishable after encoding);
 *   - an allow intersecting 10.137.54.0/23, or a deny inside it at /23 or
 *     longer, is refused with -EINVAL (the config loader refuses them too;
 *     this is defence in depth). Broader denies stay valid;
 *   - equal prefixes: DENY WINS. An allow equal to a configured or default
 *     deny yields only the DENY route (SR-6 "resolved in favor of denial";
 *     the config loader refuses an equal configured allow and deny, but an
 *     allow equal to a default deny, e.g. 172.16.0.0/12, reaches here and is
 *     thereby ineffective). A configured deny equal to a default deny or a
 *     repeated prefix collapses into one route;
 *   - a prefix with host bits set or a length above 32 is refused (-EINVAL);
 *   - canonical order: by address, then length, then kind (prefixes are
 *     unique, so the kind never decides);
 *   - at most LZ_NETPOLICY_MAX_ROUTES routes, fixed ones included (-E2BIG).
 *
 * ---- Policy encoding (Postcard, core/postcard.h) --------------------------
 *   struct NetPolicy {
 *       version: u32,              // varint, must be 1
 *       ipv4_default_allow: bool,  // one byte 0/1
 *       ipv6_disabled: bool,       // one byte, must be 1
 *       routes: Vec<Route>,        // varint count, then the routes
 *   }
 *   struct Route {
 *       addr: [u8; 4],             // network byte order (Ipv4Addr)
 *       len: u8,                   // 1..32, host bits of addr zero
 *       kind: RouteKind,           // varint discriminant
 *   }
 *   enum RouteKind { Allow = 0, Deny = 1, Helper = 2, CanaryAllow = 3,
 *                    CanaryDeny = 4 }
 * With a name policy (allow_domains, spec 3.7 as extended by issue 18) the
 * version is 2 and three sequences follow the routes:
 *       allow_names: Vec<String>,  // patterns (egressname.h), sorted, unique
 *       deny_names: Vec<String>,   // likewise; empty unless allow_names is not
 *       resolvers: Vec<[u8; 4]>,   // the proxy's DNS servers, in order; empty:
 *                                  // the host's resolv.conf at launch
 * A version-2 policy has at least one allow name and the fixed EGRESS route
 * 10.137.55.10/32 (the proxy, egresslink.h); a version-1 policy has neither.
 * Digest: SHA-256("lazaret-netpolicy-v1" || encoding), the tag unframed.
 *
 * With a name policy the sandbox has no default route, whatever
 * ipv4_default_allow says: its one way to a public name is the proxy, and
 * ipv4_default_allow is then the disposition the proxy applies to a
 * resolved address (lz_netpolicy_admits).
 *
 * ---- Network readiness fingerprint ---------------------------------------
 *   SHA-256( "lazaret-network-readiness-v1"       (28 bytes, unframed)
 *         || be32(32) || domain_id                (32 bytes)
 *         || be64(generation)
 *         || be32(32) || configuration fingerprint (32 bytes)
 *         || be32(32) || Network Sidecar ID       (32 lowercase hex ASCII
 *                                                  characters, no NUL)
 *         || be32(32) || policy digest            (32 bytes)
 *         || be64(netns_dev) || be64(netns_ino) )
 * be32/be64: big-endian unsigned integers of 4 and 8 bytes. */
#ifndef LZ_NETPOLICY_H
#define LZ_NETPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/netprefix.h"
#include "util/err.h"

#define LZ_NETPOLICY_VERSION 1u
#define LZ_NETPOLICY_VERSION_NAMES 2u
#define LZ_NETPOLICY_MAX_ROUTES 600
#define LZ_NETPOLICY_MAX_NAMES 64
#define LZ_NETPOLICY_NAME_MAX 253
#define LZ_NETPOLICY_MAX_RESOLVERS 4
/* Default denies (3), helpers (3), canary routes (2). */
#define LZ_NETPOLICY_FIXED_ROUTES 8
/* The special default denies (see "Derivation rules"). */
#define LZ_NETPOLICY_SPECIAL_DENIES 7
/* version 1 + flags 2 + count varint 2 + 600 routes of 6 bytes; then two
 * name lists (count 1, each name 2 + 253) and the resolvers (1 + 4 * 4). */
#define LZ_NETPOLICY_ROUTES_ENCODED_MAX (1 + 2 + 2 + LZ_NETPOLICY_MAX_ROUTES * 6)
#define LZ_NETPOLICY_ENCODED_MAX                                                                  \
	(LZ_NETPOLICY_ROUTES_ENCODED_MAX + 2 * (1 + LZ_NETPOLICY_MAX_NAMES * (2 + LZ_NETPOLICY_NAME_MAX)) + \
	 1 + LZ_NETPOLICY_MAX_RESOLVERS * 4)
#define LZ_NETPOLICY_DIGEST_LEN 32

/* Topology addresses (host byte order). */
#define LZ_NET_SLIRP ((struct lz_prefix){ 0x0a893600u, 24 })         /* 10.137.54.0/24 */
#define LZ_NET_GATEWAY 0x0a893602u                                    /* 10.137.54.2 */
#define LZ_NET_DNS 0x0a893603u                                        /* 10.137.54.3 */
#define LZ_NET_SANDBOX 0x0a893664u                                    /* 10.137.54.100 */
#define LZ_NET_CANARY ((struct lz_prefix){ 0x0a893700u, 29 })        /* 10.137.55.0/29 */
#define LZ_NET_ENFORCEMENT 0x0a893701u                                /* 10.137.55.1 */
#define LZ_NET_CANARY_ALLOWED 0x0a893702u                             /* 10.137.55.2 */
#define LZ_NET_CANARY_DENIED 0x0a893703u                              /* 10.137.55.3 */
#define LZ_NET_EGRESS_LOCAL 0x0a893709u                               /* 10.137.55.9 */
#define LZ_NET_EGRESS_PROXY 0x0a89370au                               /* 10.137.55.10 */
#define LZ_NET_EGRESS_PORT 3128
#define LZ_NET_EGRESS_URL "http://10.137.55.10:3128" /* the two above, for clients */

/* Discriminants are part of the v1 encoding: never renumber. */
enum lz_netroute_kind {
	LZ_NETROUTE_ALLOW = 0,
	LZ_NETROUTE_DENY = 1,
	LZ_NETROUTE_HELPER = 2,
	LZ_NETROUTE_CANARY_ALLOW = 3,
	LZ_NETROUTE_CANARY_DENY = 4,
	LZ_NETROUTE_EGRESS = 5,
};

struct lz_netroute {
	struct lz_prefix prefix;
	enum lz_netroute_kind kind;
};

/* The name policy (egress by name); n_allow == 0: none. */
struct lz_netpolicy_names {
	size_t n_allow, n_deny, n_resolvers;
	char allow[LZ_NETPOLICY_MAX_NAMES][LZ_NETPOLICY_NAME_MAX + 1]; /* sorted */
	char deny[LZ_NETPOLICY_MAX_NAMES][LZ_NETPOLICY_NAME_MAX + 1];  /* sorted */
	uint32_t resolvers[LZ_NETPOLICY_MAX_RESOLVERS];                /* host order */
};

/* Plain value, no owned memory (about 40 KiB: allocate it). */
struct lz_netpolicy {
	bool ipv4_default_allow;
	bool ipv6_disabled;
	size_t n_routes;
	struct lz_netroute routes[LZ_NETPOLICY_MAX_ROUTES]; /* canonical order */
	struct lz_netpolicy_names names;
};

/* Derives the policy from a profile's configured prefixes and the host's
 * own IPv4 addresses (host byte order; any array may be NULL when its
 * count is 0). -EINVAL for a refused or malformed prefix, -E2BIG past
 * LZ_NETPOLICY_MAX_ROUTES; err (optional) names the prefix. *ret is
 * untouched on failure. */
int lz_netpolicy_derive(const struct lz_prefix *allow, size_t n_allow, const struct lz_prefix *deny,
			size_t n_deny, const uint32_t *host, size_t n_host, struct lz_netpolicy *ret,
			struct lz_err *err);

/* Adds a name policy to a derived one (no name policy yet): patterns
 * checked (egressname.h), sorted, duplicates refused, a deny list only with
 * an allow list, resolvers neither in 0.0.0.0/8 nor multicast or reserved nor
 * repeated; adds the EGRESS route. -EINVAL or -E2BIG naming the entry; p
 * untouched on failure. Empty allow: nothing changes. */
int lz_netpolicy_set_names(struct lz_netpolicy *p, const char *const *allow, size_t n_allow,
			   const char *const *deny, size_t n_deny, const uint32_t *resolvers,
			   size_t n_resolvers, struct lz_err *err);

/* Whether addr (host byte order) may be a resolver: not in 0.0.0.0/8, not
 * multicast or reserved. */
bool lz_netpolicy_resolver_usable(uint32_t addr);

/* Whether the sandbox gets a default route: ipv4_default_allow and no name
 * policy. */
bool lz_netpolicy_direct_default(const struct lz_netpolicy *p);

/* The address policy's verdict on one destination (host byte order), as
 * the egress proxy applies it to each address a name resolves to: the
 * longest matching route decides (ALLOW admits; DENY and every topology
 * kind refuse), no match falls to ipv4_default_allow; loopback and the
 * reserved topology never pass. */
bool lz_netpolicy_admits(const struct lz_netpolicy *p, uint32_t addr);

/* 0 when p is a policy derivation can produce (the rules above), else
 * -EINVAL with err (optional) naming the first violation. */
int lz_netpolicy_validate(const struct lz_netpolicy *p, struct lz_err *err);

/* Canonical bytes. -EINVAL when p does not validate, -EMSGSIZE when cap is
 * too small; *ret_len untouched on failure. */
int lz_netpolicy_encode(const struct lz_netpolicy *p, uint8_t *buf, size_t cap, size_t *ret_len);

/* Accepts only the canonical encoding of a valid policy: -EBADMSG for
 * truncation, trailing bytes, version != 1, unknown kind, unsorted or
 * duplicate routes, non-canonical Postcard, or any validation failure.
 * *ret untouched on failure. */
int lz_netpolicy_decode(const uint8_t *buf, size_t len, struct lz_netpolicy *ret,
			struct lz_err *err);

/* SHA-256("lazaret-netpolicy-v1" || bytes): the digest of an encoding. */
int lz_netpolicy_digest_bytes(const uint8_t *bytes, size_t len,
			      uint8_t out[LZ_NETPOLICY_DIGEST_LEN]);

/* Encodes p and digests the encoding; -EINVAL when p does not validate. */
int lz_netpolicy_digest(const struct lz_netpolicy *p, uint8_t out[LZ_NETPOLICY_DIGEST_LEN]);

/* Creates a memfd (MFD_ALLOW_SEALING|MFD_CLOEXEC) holding bytes, sealed with
 * exactly F_SEAL_WRITE|F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL. len must be
 * 1..LZ_NETPOLICY_ENCODED_MAX (-EINVAL). The caller owns *ret_fd. */
int lz_netpolicy_to_memfd(const uint8_t *bytes, size_t len, int *ret_fd, struct lz_err *err);

/* Reads a policy from an inherited memfd. Refuses (-EPERM) unless its seals
 * are exactly the four above; -EBADMSG for a size outside
 * 1..LZ_NETPOLICY_ENCODED_MAX, a digest other than expected_digest, or bytes
 * that do not decode. Reads with pread (the shared file offset is not used).
 * fd stays the caller's. *ret untouched on failure. */
int lz_netpolicy_from_memfd(int fd, const uint8_t expected_digest[LZ_NETPOLICY_DIGEST_LEN],
			    struct lz_netpolicy *ret, struct lz_err *err);

/* ---- network readiness fingerprint -------------------------------------- */

#define LZ_NETREADY_FP_LEN 32

/* Layout in the file header. sidecar_id_hex must be exactly 32 lowercase hex
 * characters then NUL (-EINVAL otherwise); -EIO when OpenSSL fails. out is
 * untouched on failure. */
int lz_netready_fingerprint(const uint8_t domain_id[32], uint64_t generation,
			    const uint8_t config_fp[32], const char sidecar_id_hex[33],
			    const uint8_t policy_digest[32], uint64_t netns_dev, uint64_t netns_ino,
			    uint8_t out[LZ_NETREADY_FP_LEN]);

#endif
