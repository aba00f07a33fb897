/* Derived network policy (spec 3.7, SR-6, FR-19): derivation, the canonical
 * Postcard encoding and its digest, the sealed memfd transport, the
 * attestation record and the network readiness fingerprint.
 *
 * Fixed vectors. The default policy (no configured prefixes) is written out
 * by hand from the Postcard rules (core/postcard.h) and the layout in
 * core/netpolicy.h:
 *   01            version: u32 varint 1
 *   01            ipv4_default_allow: bool true
 *   01            ipv6_disabled: bool true
 *   0f            routes: Vec length 15 (varint)
 *   then per route addr [u8;4] big-endian, len u8, kind varint, sorted by
 *   address then length:
 *   00000000 08 01   0.0.0.0/8        Deny
 *   0a000000 08 01   10.0.0.0/8       Deny
 *   0a893600 18 02   10.137.54.0/24   Helper
 *   0a893602 20 02   10.137.54.2/32   Helper
 *   0a893603 20 02   10.137.54.3/32   Helper
 *   0a893700 1d 04   10.137.55.0/29   CanaryDeny
 *   0a893702 20 03   10.137.55.2/32   CanaryAllow
 *   64400000 0a 01   100.64.0.0/10    Deny
 *   a9fe0000 10 01   169.254.0.0/16   Deny
 *   ac100000 0c 01   172.16.0.0/12    Deny
 *   c0000000 18 01   192.0.0.0/24     Deny
 *   c0a80000 10 01   192.168.0.0/16   Deny
 *   c6120000 0f 01   198.18.0.0/15    Deny
 *   e0000000 04 01   224.0.0.0/4      Deny
 *   f0000000 04 01   240.0.0.0/4      Deny
 * The allow 10.250.0.0/24 + deny 198.51.100.0/24 policy adds
 *   0afa0000 18 00   10.250.0.0/24    Allow    (after 10.137.55.2/32)
 *   c6336400 18 01   198.51.100.0/24  Deny     (after 198.18.0.0/15)
 * with the count 11.
 *
 * The digests were computed outside this code base with
 *   python3 -c 'import hashlib; b = bytes.fromhex("<bytes>");
 *     print(hashlib.sha256(b"lazaret-netpolicy-v1" + b).hexdigest())'
 * and the readiness fingerprint with
 *   python3 -c 'import hashlib, struct; be32 = lambda n: struct.pack(">I", n);
 *     be64 = lambda n: struct.pack(">Q", n);
 *     print(hashlib.sha256(b"lazaret-network-readiness-v1"
 *       + be32(32) + bytes(range(32)) + be64(7) + be32(32) + bytes(range(32, 64))
 *       + be32(32) + b"0123456789abcdef0123456789abcdef" + be32(32) + b"\xaa" * 32
 *       + be64(0x1122334455667788) + be64(4026531993)).hexdigest())'
 * so a change to the layout, the tags or the byte order fails here. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "net/netpolicy.h"
#include "net/netattest.h"
#include "fs/file.h"

#define P(a, b, c, d, n) \
	((struct lz_prefix){ (uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (uint32_t)(d), (n) })

#define DEFAULT_HEX                                                                           \
	"0101010f"                                                                            \
	"000000000801" "0a0000000801" "0a8936001802" "0a8936022002" "0a8936032002" "0a8937001d04" \
	"0a8937022003" "644000000a01" "a9fe00001001" "ac1000000c01" "c00000001801" "c0a800001001" \
	"c61200000f01" "e00000000401" "f00000000401"
#define DEFAULT_DIGEST "24bf69dc31395dea9f6bad7497b0e4c430297da0402dd4fdd966f16a496b19ca"

#define ALLOWDENY_HEX                                                                         \
	"01010111"                                                                            \
	"000000000801" "0a0000000801" "0a8936001802" "0a8936022002" "0a8936032002" "0a8937001d04" \
	"0a8937022003" "0afa00001800" "644000000a01" "a9fe00001001" "ac1000000c01" "c00000001801" \
	"c0a800001001" "c61200000f01" "c63364001801" "e00000000401" "f00000000401"
#define ALLOWDENY_DIGEST "769ee3dc94c690e4cbd3fdef8ceefc3404b93f85126fd5d43faa24f07c3569b3"

/* version 1, policy_matches, canaries_live, Some(300) = 01 ac02, Some(echo
 * 00..1f), then nine true bools and egress_proxy_live false. */
#define ATTEST_HEX                                                                   \
	"01" "01" "01" "01ac02"                                                      \
	"01000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"         \
	"010101010101010101" "00"

#define READY_FP "c78b809b6ba122ee3ef9937f56432ed5b611b6738473a2aa417f7d08126e6ad9"

/* What lz_memfd_sealed seals a data memfd with (fs/file.h). */
#define ALL_SEALS (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL | F_SEAL_EXEC)


static size_t unhex(const char *hex, uint8_t *out, size_t cap)
{
	size_t n = strlen(hex) / 2;
	assert_true(n <= cap);
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
		out[i] = (uint8_t)v;
	}
	return n;
}

static void tohex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
	out[2 * n] = '\0';
}

static struct lz_netpolicy *policy_new(void)
{
	struct lz_netpolicy *p = malloc(sizeof(*p));
	assert_non_null(p);
	memset(p, 0x5a, sizeof(*p));
	return p;
}

static struct lz_netpolicy *derive_ok(const struct lz_prefix *allow, size_t na,
				      const struct lz_prefix *deny, size_t nd)
{
	struct lz_netpolicy *p = policy_new();
	struct lz_err err = { 0 };
	if (lz_netpolicy_derive(allow, na, deny, nd, NULL, 0, p, &err) != 0)
		fail_msg("derive refused: %s", err.msg);
	return p;
}

static size_t encode_ok(const struct lz_netpolicy *p, uint8_t *buf)
{
	size_t len = 0;
	assert_int_equal(lz_netpolicy_encode(p, buf, LZ_NETPOLICY_ENCODED_MAX, &len), 0);
	return len;
}

static void assert_encodes_to(const struct lz_netpolicy *p, const char *hex)
{
	uint8_t buf[LZ_NETPOLICY_ENCODED_MAX];
	char got[2 * LZ_NETPOLICY_ENCODED_MAX + 1];
	size_t len = encode_ok(p, buf);
	tohex(buf, len, got);
	assert_string_equal(got, hex);
}

static void assert_digest(const struct lz_netpolicy *p, const char *hex)
{
	uint8_t d[LZ_NETPOLICY_DIGEST_LEN];
	char got[2 * LZ_NETPOLICY_DIGEST_LEN + 1];
	assert_int_equal(lz_netpolicy_digest(p, d), 0);
	tohex(d, sizeof(d), got);
	assert_string_equal(got, hex);
}

/* ---- derivation ---------------------------------------------------------- */

static void test_lz_netpolicy_derive__default_matches_vector(void **state)
{
	(void)state;
	struct lz_netpolicy *p = derive_ok(NULL, 0, NULL, 0);
	assert_true(p->ipv4_default_allow);
	assert_true(p->ipv6_disabled);
	assert_int_equal(p->n_routes, LZ_NETPOLICY_FIXED_ROUTES + LZ_NETPOLICY_SPECIAL_DENIES);
	assert_int_equal(p->routes[0].prefix.addr, P(0, 0, 0, 0, 8).addr);
	assert_int_equal(p->routes[1].prefix.addr, P(10, 0, 0, 0, 8).addr);
	assert_int_equal(p->routes[1].kind, LZ_NETROUTE_DENY);
	assert_int_equal(p->routes[2].kind, LZ_NETROUTE_HELPER);
	assert_int_equal(p->routes[5].kind, LZ_NETROUTE_CANARY_DENY);
	assert_int_equal(p->routes[6].kind, LZ_NETROUTE_CANARY_ALLOW);
	assert_encodes_to(p, DEFAULT_HEX);
	assert_digest(p, DEFAULT_DIGEST);
	free(p);
}

static void test_lz_netpolicy_derive__allow_and_deny_match_vector(void **state)
{
	(void)state;
	struct lz_prefix allow[] = { P(10, 250, 0, 0, 24) };
	struct lz_prefix deny[] = { P(198, 51, 100, 0, 24) };
	struct lz_netpolicy *p = derive_ok(allow, 1, deny, 1);
	assert_int_equal(p->n_routes, 17);
	assert_int_equal(p->routes[7].prefix.addr, P(10, 250, 0, 0, 24).addr);
	assert_int_equal(p->routes[7].kind, LZ_NETROUTE_ALLOW);
	assert_int_equal(p->routes[14].prefix.addr, P(198, 51, 100, 0, 24).addr);
	assert_int_equal(p->routes[14].kind, LZ_NETROUTE_DENY);
	assert_encodes_to(p, ALLOWDENY_HEX);
	assert_digest(p, ALLOWDENY_DIGEST);
	free(p);
}

/* Input order, repetition and a deny repeating a default do not change the
 * canonical bytes. */
static void test_lz_netpolicy_derive__canonical_regardless_of_input_order(void **state)
{
	(void)state;
	struct lz_prefix allow[] = { P(10, 250, 0, 0, 24), P(10, 250, 0, 0, 24) };
	struct lz_prefix deny[] = { P(198, 51, 100, 0, 24), P(192, 168, 0, 0, 16),
				    P(198, 51, 100, 0, 24), P(10, 0, 0, 0, 8) };
	struct lz_netpolicy *p = derive_ok(allow, 2, deny, 4);
	assert_encodes_to(p, ALLOWDENY_HEX);
	free(p);
}

/* SR-6: equal allow and deny resolve to the deny, whichever side comes
 * first in the input; an allow equal to a default deny yields too. */
static void test_lz_netpolicy_derive__equal_prefix_resolves_to_deny(void **state)
{
	(void)state;
	struct lz_prefix allow[] = { P(10, 250, 0, 0, 24), P(198, 51, 100, 0, 24) };
	struct lz_prefix deny[] = { P(198, 51, 100, 0, 24) };
	struct lz_netpolicy *p = derive_ok(allow, 2, deny, 1);
	assert_encodes_to(p, ALLOWDENY_HEX);
	free(p);

	struct lz_prefix rfc1918[] = { P(172, 16, 0, 0, 12) };
	p = derive_ok(rfc1918, 1, NULL, 0);
	assert_encodes_to(p, DEFAULT_HEX);
	free(p);
}

/* A broader deny covering the reserved topology is valid; the helper and
 * canary routes stay more specific. */
static void test_lz_netpolicy_derive__broader_deny_keeps_helpers(void **state)
{
	(void)state;
	struct lz_prefix deny[] = { P(10, 137, 0, 0, 16), P(10, 136, 0, 0, 14) };
	struct lz_netpolicy *p = derive_ok(NULL, 0, deny, 2);
	assert_int_equal(p->n_routes, LZ_NETPOLICY_FIXED_ROUTES + LZ_NETPOLICY_SPECIAL_DENIES + 2);
	assert_int_equal(p->routes[2].prefix.addr, P(10, 136, 0, 0, 14).addr);
	assert_int_equal(p->routes[3].prefix.addr, P(10, 137, 0, 0, 16).addr);
	assert_int_equal(p->routes[4].kind, LZ_NETROUTE_HELPER);
	assert_int_equal(lz_netpolicy_validate(p, NULL), 0);
	free(p);
}

/* A deny of 0.0.0.0/0 is the default disposition, not a route. */
static void test_lz_netpolicy_derive__deny_all_clears_default_allow(void **state)
{
	(void)state;
	struct lz_prefix deny[] = { P(0, 0, 0, 0, 0) };
	struct lz_netpolicy *p = derive_ok(NULL, 0, deny, 1);
	assert_false(p->ipv4_default_allow);
	assert_int_equal(p->n_routes, LZ_NETPOLICY_FIXED_ROUTES + LZ_NETPOLICY_SPECIAL_DENIES);
	uint8_t buf[LZ_NETPOLICY_ENCODED_MAX];
	size_t len = encode_ok(p, buf);
	assert_int_equal(len, 4 + 15 * 6);
	assert_int_equal(buf[1], 0);
	free(p);
}

/* No implicit host authority: the ranges that are not globally routable
 * are denied unless an allow contains one (a more specific allow wins by
 * longest prefix); the host's own addresses are /32 denies, except
 * loopback, the topology, what a deny covers and what an allow contains. */
static void test_lz_netpolicy_derive__special_ranges_and_host_addresses(void **state)
{
	(void)state;
	struct lz_prefix allow[] = { P(100, 64, 0, 0, 10), P(169, 254, 169, 254, 32),
				     P(203, 0, 113, 0, 24) };
	const uint32_t host[] = { P(192, 0, 2, 15, 32).addr,  P(127, 0, 0, 1, 32).addr,
				  P(10, 1, 2, 3, 32).addr,    P(10, 137, 54, 100, 32).addr,
				  P(203, 0, 113, 5, 32).addr, P(192, 0, 2, 15, 32).addr };
	struct lz_netpolicy *p = policy_new();
	struct lz_err err = { 0 };
	assert_int_equal(lz_netpolicy_derive(allow, 3, NULL, 0, host, 6, p, &err), 0);
	bool cgnat_deny = false, link_deny = false, meta_allow = false, host_deny = false;
	for (size_t i = 0; i < p->n_routes; i++) {
		const struct lz_netroute *rt = &p->routes[i];
		cgnat_deny |= lz_prefix_equal(rt->prefix, P(100, 64, 0, 0, 10)) && rt->kind == LZ_NETROUTE_DENY;
		link_deny |= lz_prefix_equal(rt->prefix, P(169, 254, 0, 0, 16)) && rt->kind == LZ_NETROUTE_DENY;
		meta_allow |= lz_prefix_equal(rt->prefix, P(169, 254, 169, 254, 32)) &&
			      rt->kind == LZ_NETROUTE_ALLOW;
		host_deny |= lz_prefix_equal(rt->prefix, P(192, 0, 2, 15, 32)) && rt->kind == LZ_NETROUTE_DENY;
		assert_false(lz_prefix_equal(rt->prefix, P(127, 0, 0, 1, 32)));
		assert_false(lz_prefix_equal(rt->prefix, P(10, 1, 2, 3, 32)));
		assert_false(lz_prefix_equal(rt->prefix, P(203, 0, 113, 5, 32)));
	}
	assert_false(cgnat_deny); /* the allow contains it */
	assert_true(link_deny && meta_allow && host_deny);
	/* defaults 15 - 1 (CGNAT) + host 1 + allows 3 */
	assert_int_equal(p->n_routes, 18);
	assert_int_equal(lz_netpolicy_validate(p, NULL), 0);
	uint8_t buf[LZ_NETPOLICY_ENCODED_MAX];
	size_t len = encode_ok(p, buf);
	struct lz_netpolicy *q = policy_new();
	assert_int_equal(lz_netpolicy_decode(buf, len, q, NULL), 0);
	assert_int_equal(q->n_routes, p->n_routes);
	free(q);

	/* Without the allow, the CGNAT deny must be there: a policy that
	 * lacks it is not one derivation makes. */
	for (size_t i = 0; i < p->n_routes; i++)
		if (lz_prefix_equal(p->routes[i].prefix, P(100, 64, 0, 0, 10))) {
			memmove(&p->routes[i], &p->routes[i + 1], (p->n_routes - i - 1) * sizeof(p->routes[0]));
			p->n_routes--;
			break;
		}
	err = (struct lz_err){ 0 };
	assert_int_equal(lz_netpolicy_validate(p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "100.64.0.0/10"));
	free(p);
}

static void assert_derive_refused(const struct lz_prefix *allow, size_t na,
				  const struct lz_prefix *deny, size_t nd, int code,
				  const char *msg_part)
{
	struct lz_netpolicy *p = policy_new();
	struct lz_netpolicy *sentinel = policy_new();
	struct lz_err err = { 0 };
	assert_int_equal(lz_netpolicy_derive(allow, na, deny, nd, NULL, 0, p, &err), -code);
	assert_int_equal(err.code, code);
	if (msg_part && !strstr(err.msg, msg_part))
		fail_msg("message '%s' lacks '%s'", err.msg, msg_part);
	assert_memory_equal(p, sentinel, sizeof(*p));
	free(p);
	free(sentinel);
}

static void test_lz_netpolicy_derive__allow_intersecting_topology_refused(void **state)
{
	(void)state;
	const struct lz_prefix bad[] = {
		P(10, 137, 54, 0, 24), P(10, 137, 55, 128, 25), P(10, 137, 54, 0, 23),
		P(10, 137, 0, 0, 16),  P(10, 0, 0, 0, 8),       P(0, 0, 0, 0, 0),
		P(10, 137, 55, 2, 32),
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_derive_refused(&bad[i], 1, NULL, 0, EINVAL, "intersects the reserved topology");
}

static void test_lz_netpolicy_derive__deny_inside_topology_refused(void **state)
{
	(void)state;
	const struct lz_prefix bad[] = { P(10, 137, 54, 0, 23), P(10, 137, 54, 0, 24),
					 P(10, 137, 55, 3, 32), P(10, 137, 55, 0, 29) };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_derive_refused(NULL, 0, &bad[i], 1, EINVAL, "inside the reserved topology");
}

static void test_lz_netpolicy_derive__malformed_prefix_refused(void **state)
{
	(void)state;
	const struct lz_prefix host_bits = { 0x0afa0001u, 24 };
	const struct lz_prefix too_long = { 0x0afa0000u, 33 };
	assert_derive_refused(&host_bits, 1, NULL, 0, EINVAL, "not a network");
	assert_derive_refused(NULL, 0, &host_bits, 1, EINVAL, "not a network");
	assert_derive_refused(&too_long, 1, NULL, 0, EINVAL, "not a network");
}

/* 585 distinct configured prefixes fill the 600 routes; one more is too
 * many, but repeats and denies equal to defaults do not count. */
static void test_lz_netpolicy_derive__too_many_routes_refused(void **state)
{
	(void)state;
	enum { N = LZ_NETPOLICY_MAX_ROUTES - LZ_NETPOLICY_FIXED_ROUTES - LZ_NETPOLICY_SPECIAL_DENIES };
	struct lz_prefix *deny = calloc(N + 4, sizeof(*deny));
	assert_non_null(deny);
	for (size_t i = 0; i < N + 1; i++)
		deny[i] = P(100, 64, i >> 8, i & 0xff, 32);
	deny[N + 1] = deny[0];
	deny[N + 2] = P(10, 0, 0, 0, 8);

	struct lz_netpolicy *p = derive_ok(NULL, 0, deny, N);
	assert_int_equal(p->n_routes, LZ_NETPOLICY_MAX_ROUTES);
	uint8_t buf[LZ_NETPOLICY_ENCODED_MAX];
	assert_int_equal(encode_ok(p, buf), LZ_NETPOLICY_ROUTES_ENCODED_MAX);
	struct lz_netpolicy *q = policy_new();
	assert_int_equal(lz_netpolicy_decode(buf, LZ_NETPOLICY_ROUTES_ENCODED_MAX, q, NULL), 0);
	assert_int_equal(q->n_routes, p->n_routes);
	for (size_t i = 0; i < p->n_routes; i++) {
		assert_true(lz_prefix_equal(q->routes[i].prefix, p->routes[i].prefix));
		assert_int_equal(q->routes[i].kind, p->routes[i].kind);
	}
	free(q);
	free(p);

	/* Repeats and a default deny on top of the full set still fit. */
	deny[N] = deny[N + 1];
	p = derive_ok(NULL, 0, deny, N + 3);
	free(p);

	deny[N] = P(100, 64, 255, 255, 32);
	assert_derive_refused(NULL, 0, deny, N + 1, E2BIG, "more than 600 routes");
	/* The same through the allow side. */
	assert_derive_refused(&deny[N], 1, deny, N, E2BIG, "more than 600 routes");
	free(deny);
}

/* ---- validation and encoding --------------------------------------------- */

static void assert_invalid(const struct lz_netpolicy *p)
{
	uint8_t buf[LZ_NETPOLICY_ENCODED_MAX];
	size_t len = 777;
	uint8_t d[LZ_NETPOLICY_DIGEST_LEN];
	assert_int_equal(lz_netpolicy_validate(p, NULL), -EINVAL);
	assert_int_equal(lz_netpolicy_encode(p, buf, sizeof(buf), &len), -EINVAL);
	assert_int_equal(len, 777);
	assert_int_equal(lz_netpolicy_digest(p, d), -EINVAL);
}

static void test_lz_netpolicy_encode__invalid_policy_refused(void **state)
{
	(void)state;
	struct lz_netpolicy *base = derive_ok(NULL, 0, NULL, 0);
	struct lz_netpolicy *p = policy_new();

	memcpy(p, base, sizeof(*p));
	p->ipv6_disabled = false;
	assert_invalid(p);

	memcpy(p, base, sizeof(*p));
	p->routes[2].kind = LZ_NETROUTE_ALLOW; /* helper with the wrong kind */
	assert_invalid(p);

	memcpy(p, base, sizeof(*p));
	p->routes[1].kind = LZ_NETROUTE_ALLOW; /* default deny turned allow */
	assert_invalid(p);

	memcpy(p, base, sizeof(*p));
	p->routes[7].kind = (enum lz_netroute_kind)5;
	assert_invalid(p);

	memcpy(p, base, sizeof(*p));
	p->n_routes = 14; /* a special default deny (240.0.0.0/4) missing */
	assert_invalid(p);

	memcpy(p, base, sizeof(*p));
	p->n_routes = LZ_NETPOLICY_MAX_ROUTES + 1;
	assert_invalid(p);

	memcpy(p, base, sizeof(*p));
	struct lz_netroute t = p->routes[6];
	p->routes[6] = p->routes[7];
	p->routes[7] = t;
	assert_invalid(p);

	/* A non-fixed prefix with a fixed kind, a /0 route, host bits
	 * (198.51.100.0/24 sorts after 198.18.0.0/15, route 12). */
	memcpy(p, base, sizeof(*p));
	memmove(&p->routes[14], &p->routes[13], 2 * sizeof(p->routes[0]));
	p->routes[13] = (struct lz_netroute){ P(198, 51, 100, 0, 24), LZ_NETROUTE_HELPER };
	p->n_routes = 16;
	assert_invalid(p);
	p->routes[13].kind = LZ_NETROUTE_DENY;
	assert_int_equal(lz_netpolicy_validate(p, NULL), 0);
	p->routes[13].prefix.addr |= 1;
	assert_invalid(p);

	memcpy(p, base, sizeof(*p));
	memmove(&p->routes[1], &p->routes[0], 15 * sizeof(p->routes[0]));
	p->routes[0] = (struct lz_netroute){ P(0, 0, 0, 0, 0), LZ_NETROUTE_DENY };
	p->n_routes = 16;
	assert_invalid(p);

	/* Configured routes inside the topology (after 10.0.0.0/8, route 1). */
	memcpy(p, base, sizeof(*p));
	memmove(&p->routes[3], &p->routes[2], 13 * sizeof(p->routes[0]));
	p->routes[2] = (struct lz_netroute){ P(10, 137, 54, 0, 23), LZ_NETROUTE_DENY };
	p->n_routes = 16;
	assert_invalid(p);
	p->routes[2].kind = LZ_NETROUTE_ALLOW;
	assert_invalid(p);

	free(p);
	free(base);
}

static void test_lz_netpolicy_encode__every_short_capacity_refused(void **state)
{
	(void)state;
	struct lz_netpolicy *p = derive_ok(NULL, 0, NULL, 0);
	uint8_t buf[128];
	for (size_t cap = 0; cap < 94; cap++) {
		size_t len = 777;
		assert_int_equal(lz_netpolicy_encode(p, buf, cap, &len), -EMSGSIZE);
		assert_int_equal(len, 777);
	}
	size_t len = 0;
	assert_int_equal(lz_netpolicy_encode(p, buf, 94, &len), 0);
	assert_int_equal(len, 94);
	free(p);
}

/* ---- decoding ------------------------------------------------------------- */

static void assert_decode_refused(const uint8_t *buf, size_t len)
{
	struct lz_netpolicy *p = policy_new();
	struct lz_netpolicy *sentinel = policy_new();
	struct lz_err err = { 0 };
	int r = lz_netpolicy_decode(buf, len, p, &err);
	if (r != -EBADMSG) {
		char hex[2 * LZ_NETPOLICY_ENCODED_MAX + 1];
		tohex(buf, len < LZ_NETPOLICY_ENCODED_MAX ? len : LZ_NETPOLICY_ENCODED_MAX, hex);
		fail_msg("decode of %s returned %d", hex, r);
	}
	assert_int_equal(err.code, EBADMSG);
	assert_true(err.msg[0] != '\0');
	assert_memory_equal(p, sentinel, sizeof(*p));
	free(p);
	free(sentinel);
}

static void test_lz_netpolicy_decode__vectors_round_trip(void **state)
{
	(void)state;
	const char *vectors[] = { DEFAULT_HEX, ALLOWDENY_HEX };
	for (size_t i = 0; i < 2; i++) {
		uint8_t in[LZ_NETPOLICY_ENCODED_MAX];
		size_t n = unhex(vectors[i], in, sizeof(in));
		struct lz_netpolicy *p = policy_new();
		assert_int_equal(lz_netpolicy_decode(in, n, p, NULL), 0);
		assert_encodes_to(p, vectors[i]);
		free(p);
	}
}

static void test_lz_netpolicy_decode__every_truncation_refused(void **state)
{
	(void)state;
	uint8_t in[LZ_NETPOLICY_ENCODED_MAX];
	size_t n = unhex(ALLOWDENY_HEX, in, sizeof(in));
	for (size_t len = 0; len < n; len++)
		assert_decode_refused(in, len);
	assert_decode_refused(NULL, 0);
}

static void test_lz_netpolicy_decode__trailing_byte_refused(void **state)
{
	(void)state;
	uint8_t in[LZ_NETPOLICY_ENCODED_MAX];
	size_t n = unhex(DEFAULT_HEX, in, sizeof(in));
	in[n] = 0;
	assert_decode_refused(in, n + 1);
	/* A ninth route appended without a count change is trailing too. */
	memcpy(in + n, "\xc6\x33\x64\x00\x18\x01", 6);
	assert_decode_refused(in, n + 6);
}

static void test_lz_netpolicy_decode__bad_version_refused(void **state)
{
	(void)state;
	uint8_t in[LZ_NETPOLICY_ENCODED_MAX];
	size_t n = unhex(DEFAULT_HEX, in, sizeof(in));
	const uint8_t versions[] = { 0x00, 0x02, 0x7f };
	for (size_t i = 0; i < sizeof(versions); i++) {
		in[0] = versions[i];
		assert_decode_refused(in, n);
	}
	/* Overlong varint 1 (81 00) is not canonical. */
	uint8_t over[LZ_NETPOLICY_ENCODED_MAX];
	over[0] = 0x81;
	over[1] = 0x00;
	memcpy(over + 2, in + 1, n - 1);
	assert_decode_refused(over, n + 1);
}

static void test_lz_netpolicy_decode__unsorted_refused(void **state)
{
	(void)state;
	uint8_t in[LZ_NETPOLICY_ENCODED_MAX], t[6];
	size_t n = unhex(ALLOWDENY_HEX, in, sizeof(in));
	/* Swap the allow (route 6) and 172.16.0.0/12 (route 7). */
	uint8_t *r6 = in + 4 + 6 * 6, *r7 = in + 4 + 7 * 6;
	memcpy(t, r6, 6);
	memcpy(r6, r7, 6);
	memcpy(r7, t, 6);
	assert_decode_refused(in, n);

	/* Same address, longer prefix first. */
	n = unhex("01010109"
		  "0a0000000801" "0a8936001802" "0a8936022002" "0a8936032002" "0a8937001d04"
		  "0a8937022003" "ac1000000c01" "c0a800001801" "c0a800001001",
		  in, sizeof(in));
	assert_decode_refused(in, n);
}

static void test_lz_netpolicy_decode__duplicate_refused(void **state)
{
	(void)state;
	uint8_t in[LZ_NETPOLICY_ENCODED_MAX];
	/* 192.168.0.0/16 twice; then once as Allow after the Deny. */
	size_t n = unhex("01010109"
			 "0a0000000801" "0a8936001802" "0a8936022002" "0a8936032002" "0a8937001d04"
			 "0a8937022003" "ac1000000c01" "c0a800001001" "c0a800001001",
			 in, sizeof(in));
	assert_decode_refused(in, n);
	in[n - 1] = 0x00;
	assert_decode_refused(in, n);
}

static void test_lz_netpolicy_decode__unknown_kind_refused(void **state)
{
	(void)state;
	uint8_t in[LZ_NETPOLICY_ENCODED_MAX];
	size_t n = unhex(ALLOWDENY_HEX, in, sizeof(in));
	const uint8_t kinds[] = { 0x05, 0x7f };
	for (size_t i = 0; i < sizeof(kinds); i++) {
		in[n - 1] = kinds[i];
		assert_decode_refused(in, n);
	}
	/* A multi-byte discriminant (81 00, overlong 1) grows the record. */
	in[n - 1] = 0x81;
	in[n] = 0x00;
	assert_decode_refused(in, n + 1);
}

static void test_lz_netpolicy_decode__semantic_violations_refused(void **state)
{
	(void)state;
	uint8_t in[LZ_NETPOLICY_ENCODED_MAX];
	size_t n = unhex(DEFAULT_HEX, in, sizeof(in));

	uint8_t bad[LZ_NETPOLICY_ENCODED_MAX];
	/* ipv6_disabled false; a flag byte of 2. */
	memcpy(bad, in, n);
	bad[2] = 0;
	assert_decode_refused(bad, n);
	bad[2] = 2;
	assert_decode_refused(bad, n);
	memcpy(bad, in, n);
	bad[1] = 2;
	assert_decode_refused(bad, n);

	/* Helper turned allow; canary allow turned deny. */
	memcpy(bad, in, n);
	bad[4 + 1 * 6 + 5] = 0x00;
	assert_decode_refused(bad, n);
	memcpy(bad, in, n);
	bad[4 + 5 * 6 + 5] = 0x01;
	assert_decode_refused(bad, n);

	/* Host bits set (10.0.0.1/8); a length of 33; a /0 deny route. */
	memcpy(bad, in, n);
	bad[4 + 3] = 0x01;
	assert_decode_refused(bad, n);
	memcpy(bad, in, n);
	bad[4 + 7 * 6 + 4] = 33;
	assert_decode_refused(bad, n);
	size_t m = unhex("01010109" "000000000001"
			 "0a0000000801" "0a8936001802" "0a8936022002" "0a8936032002" "0a8937001d04"
			 "0a8937022003" "ac1000000c01" "c0a800001001",
			 bad, sizeof(bad));
	assert_decode_refused(bad, m);

	/* A fixed route missing (count 7, last route dropped). */
	memcpy(bad, in, n);
	bad[3] = 7;
	assert_decode_refused(bad, n - 6);

	/* An allow inside the topology (10.137.54.128/25). */
	m = unhex("01010109"
		  "0a0000000801" "0a8936001802" "0a8936022002" "0a8936032002" "0a8936801900"
		  "0a8937001d04" "0a8937022003" "ac1000000c01" "c0a800001001",
		  bad, sizeof(bad));
	assert_decode_refused(bad, m);

	/* Count over the limit (601 = d9 04) and over the bytes left. */
	m = unhex("010101d904", bad, sizeof(bad));
	assert_decode_refused(bad, m);
	memcpy(bad, in, n);
	bad[3] = 9;
	assert_decode_refused(bad, n);

	/* Longer than the largest policy. */
	uint8_t *big = calloc(1, LZ_NETPOLICY_ENCODED_MAX + 1);
	assert_non_null(big);
	memcpy(big, in, n);
	assert_decode_refused(big, LZ_NETPOLICY_ENCODED_MAX + 1);
	free(big);
}

/* ---- sealed memfd --------------------------------------------------------- */

/* A data memfd (sealed not executable from its creation) with seals. */
static int memfd_with(const uint8_t *b, size_t n, int seals)
{
	int fd = memfd_create("test-netpolicy", MFD_ALLOW_SEALING | MFD_CLOEXEC | MFD_NOEXEC_SEAL);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, b, n), (ssize_t)n);
	if (seals)
		assert_int_equal(fcntl(fd, F_ADD_SEALS, seals), 0);
	return fd;
}

static void assert_memfd_refused(int fd, const uint8_t digest[32], int code, const char *msg_part)
{
	struct lz_netpolicy *p = policy_new();
	struct lz_netpolicy *sentinel = policy_new();
	struct lz_err err = { 0 };
	assert_int_equal(lz_netpolicy_from_memfd(fd, digest, p, &err), -code);
	assert_int_equal(err.code, code);
	if (msg_part && !strstr(err.msg, msg_part))
		fail_msg("message '%s' lacks '%s'", err.msg, msg_part);
	assert_memory_equal(p, sentinel, sizeof(*p));
	free(p);
	free(sentinel);
}

static void test_lz_netpolicy_memfd__round_trip(void **state)
{
	(void)state;
	uint8_t in[LZ_NETPOLICY_ENCODED_MAX], d[32];
	size_t n = unhex(ALLOWDENY_HEX, in, sizeof(in));
	assert_int_equal(lz_netpolicy_digest_bytes(in, n, d), 0);
	int fd = -1;
	struct lz_err err = { 0 };
	assert_int_equal(lz_netpolicy_to_memfd(in, n, &fd, &err), 0);
	assert_true(fd >= 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(fcntl(fd, F_GET_SEALS), ALL_SEALS);
	/* Sealed for good: no write, no resize, no more seals. */
	assert_int_equal(pwrite(fd, "x", 1, 0), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(fd, 1), -1);
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), -1);

	struct lz_netpolicy *p = policy_new();
	assert_int_equal(lz_netpolicy_from_memfd(fd, d, p, &err), 0);
	assert_encodes_to(p, ALLOWDENY_HEX);
	/* The shared file offset is not what the reader relies on. */
	assert_int_equal(lz_netpolicy_from_memfd(fd, d, p, &err), 0);
	free(p);
	close(fd);
}

static void test_lz_netpolicy_to_memfd__bad_length_refused(void **state)
{
	(void)state;
	uint8_t b[1] = { 0 };
	int fd = -77;
	struct lz_err err = { 0 };
	assert_int_equal(lz_netpolicy_to_memfd(b, 0, &fd, &err), -EINVAL);
	assert_int_equal(lz_netpolicy_to_memfd(b, LZ_NETPOLICY_ENCODED_MAX + 1, &fd, &err), -EINVAL);
	assert_int_equal(fd, -77);
}

static void test_lz_netpolicy_from_memfd__unsealed_refused(void **state)
{
	(void)state;
	uint8_t in[LZ_NETPOLICY_ENCODED_MAX], d[32];
	size_t n = unhex(DEFAULT_HEX, in, sizeof(in));
	assert_int_equal(lz_netpolicy_digest_bytes(in, n, d), 0);
	int fd = memfd_with(in, n, 0);
	assert_memfd_refused(fd, d, EPERM, "seals");
	close(fd);

	/* A memfd created without MFD_ALLOW_SEALING carries F_SEAL_SEAL only. */
	fd = memfd_create("test-netpolicy", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, in, n), (ssize_t)n);
	assert_memfd_refused(fd, d, EPERM, "seals");
	close(fd);

	/* A pipe cannot carry seals at all. */
	int pfd[2];
	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	assert_memfd_refused(pfd[0], d, EPERM, "F_GET_SEALS");
	close(pfd[0]);
	close(pfd[1]);
}

static void test_lz_netpolicy_from_memfd__missing_or_extra_seal_refused(void **state)
{
	(void)state;
	uint8_t in[LZ_NETPOLICY_ENCODED_MAX], d[32];
	size_t n = unhex(DEFAULT_HEX, in, sizeof(in));
	assert_int_equal(lz_netpolicy_digest_bytes(in, n, d), 0);
	const int each[] = { F_SEAL_WRITE, F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_SEAL };
	for (size_t i = 0; i < 4; i++) {
		int fd = memfd_with(in, n, ALL_SEALS & ~each[i]);
		assert_memfd_refused(fd, d, EPERM, "seals");
		close(fd);
	}
	/* An executable one with every other seal (none can exist where
	 * vm.memfd_noexec is 2). */
	int xfd = memfd_create("test-netpolicy", MFD_ALLOW_SEALING | MFD_CLOEXEC | MFD_EXEC);
	if (xfd < 0) {
		assert_int_equal(errno, EACCES);
	} else {
		assert_int_equal(write(xfd, in, n), (ssize_t)n);
		assert_int_equal(fcntl(xfd, F_ADD_SEALS, ALL_SEALS & ~F_SEAL_EXEC), 0);
		assert_memfd_refused(xfd, d, EPERM, "seals");
		close(xfd);
	}
	int fd = memfd_with(in, n, ALL_SEALS | F_SEAL_FUTURE_WRITE);
	assert_memfd_refused(fd, d, EPERM, "seals");
	close(fd);
}

static void test_lz_netpolicy_from_memfd__wrong_digest_refused(void **state)
{
	(void)state;
	uint8_t in[LZ_NETPOLICY_ENCODED_MAX], d[32];
	size_t n = unhex(DEFAULT_HEX, in, sizeof(in));
	assert_int_equal(lz_netpolicy_digest_bytes(in, n, d), 0);
	int fd = memfd_with(in, n, ALL_SEALS);
	for (size_t i = 0; i < sizeof(d); i += 31) {
		d[i] ^= 0x01;
		assert_memfd_refused(fd, d, EBADMSG, "digest mismatch");
		d[i] ^= 0x01;
	}
	/* The digest of another valid policy. */
	uint8_t other[LZ_NETPOLICY_ENCODED_MAX], od[32];
	size_t on = unhex(ALLOWDENY_HEX, other, sizeof(other));
	assert_int_equal(lz_netpolicy_digest_bytes(other, on, od), 0);
	assert_memfd_refused(fd, od, EBADMSG, "digest mismatch");
	close(fd);
}

/* Right seals and a matching digest do not make bad bytes a policy. */
static void test_lz_netpolicy_from_memfd__bad_content_refused(void **state)
{
	(void)state;
	uint8_t in[LZ_NETPOLICY_ENCODED_MAX], d[32];
	size_t n = unhex(DEFAULT_HEX, in, sizeof(in));
	in[n] = 0; /* trailing byte */
	assert_int_equal(lz_netpolicy_digest_bytes(in, n + 1, d), 0);
	int fd = memfd_with(in, n + 1, ALL_SEALS);
	assert_memfd_refused(fd, d, EBADMSG, "trailing");
	close(fd);

	/* Empty and oversized files. */
	assert_int_equal(lz_netpolicy_digest_bytes(in, 0, d), 0);
	fd = memfd_with(in, 0, ALL_SEALS);
	assert_memfd_refused(fd, d, EBADMSG, "size");
	close(fd);
	uint8_t *big = calloc(1, LZ_NETPOLICY_ENCODED_MAX + 1);
	assert_non_null(big);
	fd = memfd_with(big, LZ_NETPOLICY_ENCODED_MAX + 1, ALL_SEALS);
	assert_memfd_refused(fd, d, EBADMSG, "size");
	close(fd);
	free(big);
}

/* ---- attestation ---------------------------------------------------------- */

static const uint8_t challenge[32] = { 0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
				       11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
				       22, 23, 24, 25, 26, 27, 28, 29, 30, 31 };

static struct lz_netattest attest_good(void)
{
	struct lz_netattest a = {
		.policy_matches = true,
		.canaries_live = true,
		.tap0_present = true,
		.tap0_ifindex = 300,
		.allowed_answered = true,
		.denied_canary_unreachable = true,
		.ipv6_absent = true,
		.netadmin_caps_empty = true,
		.route_mutation_refused = true,
		.veth_removed = true,
		.allowed_canary_unreachable_after = true,
		.tap0_present_after = true,
		.ipv6_unchanged_after = true,
		.rs_netadmin_dropped = true,
	};
	memcpy(a.allowed_echo, challenge, sizeof(challenge));
	return a;
}

static void test_lz_netattest_encode__matches_vector(void **state)
{
	(void)state;
	struct lz_netattest a = attest_good();
	uint8_t buf[LZ_NETATTEST_ENCODED_MAX];
	char hex[2 * LZ_NETATTEST_ENCODED_MAX + 1];
	size_t len = 0;
	assert_int_equal(lz_netattest_encode(&a, buf, sizeof(buf), &len), 0);
	tohex(buf, len, hex);
	assert_string_equal(hex, ATTEST_HEX);

	struct lz_netattest b;
	memset(&b, 0x5a, sizeof(b));
	assert_int_equal(lz_netattest_decode(buf, len, &b), 0);
	assert_int_equal(lz_netattest_check(&b, challenge, false, NULL), 0);
	assert_int_equal(b.tap0_ifindex, 300);
	assert_memory_equal(b.allowed_echo, challenge, 32);

	/* The largest record: ifindex needs five bytes. */
	a.tap0_ifindex = UINT32_MAX;
	assert_int_equal(lz_netattest_encode(&a, buf, sizeof(buf), &len), 0);
	assert_int_equal(len, LZ_NETATTEST_ENCODED_MAX);
	for (size_t cap = 0; cap < len; cap++) {
		size_t l2 = 777;
		assert_int_equal(lz_netattest_encode(&a, buf, cap, &l2), -EMSGSIZE);
		assert_int_equal(l2, 777);
	}
}

/* Absent options: "01 00 00 00 00" then ten false bools, twelve bytes of
 * zeros after the version. */
static void test_lz_netattest_encode__all_failed_record(void **state)
{
	(void)state;
	struct lz_netattest a = { 0 }, b;
	uint8_t buf[LZ_NETATTEST_ENCODED_MAX];
	char hex[2 * LZ_NETATTEST_ENCODED_MAX + 1];
	size_t len = 0;
	assert_int_equal(lz_netattest_encode(&a, buf, sizeof(buf), &len), 0);
	tohex(buf, len, hex);
	assert_string_equal(hex, "01" "0000" "00" "00" "000000000000000000" "00");
	assert_int_equal(lz_netattest_decode(buf, len, &b), 0);
	assert_false(b.policy_matches || b.tap0_present || b.allowed_answered || b.rs_netadmin_dropped);
	assert_int_equal(b.tap0_ifindex, 0);
	uint8_t again[LZ_NETATTEST_ENCODED_MAX];
	size_t len2 = 0;
	assert_int_equal(lz_netattest_encode(&b, again, sizeof(again), &len2), 0);
	assert_int_equal(len2, len);
	assert_memory_equal(again, buf, len);
}

static void test_lz_netattest_encode__inconsistent_refused(void **state)
{
	(void)state;
	uint8_t buf[LZ_NETATTEST_ENCODED_MAX];
	size_t len = 777;
	struct lz_netattest a = attest_good();
	a.tap0_ifindex = 0;
	assert_int_equal(lz_netattest_encode(&a, buf, sizeof(buf), &len), -EINVAL);
	a = attest_good();
	a.tap0_present = false;
	assert_int_equal(lz_netattest_encode(&a, buf, sizeof(buf), &len), -EINVAL);
	a = attest_good();
	a.allowed_answered = false;
	assert_int_equal(lz_netattest_encode(&a, buf, sizeof(buf), &len), -EINVAL);
	assert_int_equal(len, 777);
}

static void assert_attest_refused(const uint8_t *buf, size_t len)
{
	struct lz_netattest a, sentinel;
	memset(&a, 0x5a, sizeof(a));
	memcpy(&sentinel, &a, sizeof(a));
	assert_int_equal(lz_netattest_decode(buf, len, &a), -EBADMSG);
	assert_memory_equal(&a, &sentinel, sizeof(a));
}

static void test_lz_netattest_decode__malformed_refused(void **state)
{
	(void)state;
	uint8_t in[LZ_NETATTEST_ENCODED_MAX + 2], bad[LZ_NETATTEST_ENCODED_MAX + 2];
	size_t n = unhex(ATTEST_HEX, in, sizeof(in));
	for (size_t len = 0; len < n; len++)
		assert_attest_refused(in, len);
	in[n] = 0;
	assert_attest_refused(in, n + 1); /* trailing byte */

	const struct {
		size_t at;
		uint8_t v;
	} edits[] = {
		{ 0, 0x00 }, { 0, 0x02 }, /* version */
		{ 1, 0x02 },              /* bool */
		{ 3, 0x02 },              /* option tag */
		{ 6, 0x02 },              /* echo option tag */
		{ 47, 0x02 },             /* a bool */
		{ 48, 0x02 },             /* last bool */
	};
	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		memcpy(bad, in, n);
		bad[edits[i].at] = edits[i].v;
		assert_attest_refused(bad, n);
	}
	/* Some(0) ifindex; an overlong ifindex varint (80 00 would be 0; 81 00). */
	size_t m = unhex("01" "0101" "0100" "00" "000000000000000000" "00", bad, sizeof(bad));
	assert_attest_refused(bad, m);
	m = unhex("01" "0101" "018100" "00" "000000000000000000" "00", bad, sizeof(bad));
	assert_attest_refused(bad, m);
	m = unhex("01" "0101" "0101" "00" "000000000000000000" "00", bad, sizeof(bad));
	struct lz_netattest a;
	assert_int_equal(lz_netattest_decode(bad, m, &a), 0);
	assert_int_equal(a.tap0_ifindex, 1);
	/* Longer than any record. */
	memset(bad, 0, sizeof(bad));
	assert_attest_refused(bad, LZ_NETATTEST_ENCODED_MAX + 1);
}

struct pred_case {
	const char *name;
	void (*breaks)(struct lz_netattest *);
};

static void b_policy(struct lz_netattest *a) { a->policy_matches = false; }
static void b_live(struct lz_netattest *a) { a->canaries_live = false; }
static void b_tap0(struct lz_netattest *a)
{
	a->tap0_present = false;
	a->tap0_ifindex = 0;
}
static void b_tap0_zero(struct lz_netattest *a) { a->tap0_ifindex = 0; }
static void b_answered(struct lz_netattest *a)
{
	a->allowed_answered = false;
	memset(a->allowed_echo, 0, 32);
}
static void b_echo(struct lz_netattest *a) { a->allowed_echo[31] ^= 0x80; }
static void b_denied(struct lz_netattest *a) { a->denied_canary_unreachable = false; }
static void b_ipv6(struct lz_netattest *a) { a->ipv6_absent = false; }
static void b_caps(struct lz_netattest *a) { a->netadmin_caps_empty = false; }
static void b_route(struct lz_netattest *a) { a->route_mutation_refused = false; }
static void b_veth(struct lz_netattest *a) { a->veth_removed = false; }
static void b_after(struct lz_netattest *a) { a->allowed_canary_unreachable_after = false; }
static void b_tap0_after(struct lz_netattest *a) { a->tap0_present_after = false; }
static void b_ipv6_after(struct lz_netattest *a) { a->ipv6_unchanged_after = false; }
static void b_drop(struct lz_netattest *a) { a->rs_netadmin_dropped = false; }

static void test_lz_netattest_check__each_predicate_named(void **state)
{
	(void)state;
	const struct pred_case cases[] = {
		{ "policy projection matches", b_policy },
		{ "canaries live before policy", b_live },
		{ "tap0 present", b_tap0 },
		{ "tap0 present", b_tap0_zero },
		{ "allowed canary answered", b_answered },
		{ "allowed canary answered", b_echo },
		{ "denied canary unreachable", b_denied },
		{ "no non-loopback IPv6 address or route", b_ipv6 },
		{ "empty network-admin capability", b_caps },
		{ "route mutation refused", b_route },
		{ "veth removed with matching shape", b_veth },
		{ "formerly allowed canary unreachable", b_after },
		{ "tap0 present after cleanup", b_tap0_after },
		{ "IPv6 disposition unchanged", b_ipv6_after },
		{ "RS capability dropped", b_drop },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct lz_netattest a = attest_good();
		cases[i].breaks(&a);
		struct lz_err err = { 0 };
		char want[LZ_ERR_MSG_MAX];
		snprintf(want, sizeof(want), "predicate '%s' failed", cases[i].name);
		assert_int_equal(lz_netattest_check(&a, challenge, false, &err), -EPERM);
		assert_int_equal(err.code, EPERM);
		assert_string_equal(err.msg, want);
		/* The same verdict after a round trip through the encoding. */
		uint8_t buf[LZ_NETATTEST_ENCODED_MAX];
		size_t len;
		struct lz_netattest b;
		if (lz_netattest_encode(&a, buf, sizeof(buf), &len) == 0) {
			assert_int_equal(lz_netattest_decode(buf, len, &b), 0);
			assert_int_equal(lz_netattest_check(&b, challenge, false, NULL), -EPERM);
		}
	}
}

/* ---- the name policy (egress by name, issue 18) -------------------------- */

static struct lz_netpolicy *named_ok(void)
{
	static const char *const allow[] = { "registry.npmjs.org", "*.example.com", "api.anthropic.com" };
	static const char *const deny[] = { "bad.example.com" };
	static const uint32_t resolvers[] = { 0xc6336435u /* 198.51.100.53 */ };
	struct lz_netpolicy *p = derive_ok(NULL, 0, NULL, 0);
	struct lz_err err = { 0 };
	if (lz_netpolicy_set_names(p, allow, 3, deny, 1, resolvers, 1, &err) != 0)
		fail_msg("set_names refused: %s", err.msg);
	return p;
}

static void test_lz_netpolicy_set_names__sorted_with_the_egress_route(void **state)
{
	(void)state;
	struct lz_netpolicy *p = named_ok();
	assert_int_equal(p->names.n_allow, 3);
	assert_string_equal(p->names.allow[0], "*.example.com");
	assert_string_equal(p->names.allow[1], "api.anthropic.com");
	assert_string_equal(p->names.allow[2], "registry.npmjs.org");
	assert_int_equal(p->names.n_deny, 1);
	assert_int_equal(p->names.resolvers[0], 0xc6336435u);
	bool egress = false;
	for (size_t i = 0; i < p->n_routes; i++)
		egress |= p->routes[i].kind == LZ_NETROUTE_EGRESS && p->routes[i].prefix.addr == LZ_NET_EGRESS_PROXY &&
			  p->routes[i].prefix.len == 32;
	assert_true(egress);
	assert_true(p->ipv4_default_allow);
	assert_false(lz_netpolicy_direct_default(p));
	struct lz_netpolicy *plain = derive_ok(NULL, 0, NULL, 0);
	assert_true(lz_netpolicy_direct_default(plain));
	/* Nothing to add: nothing changes. */
	assert_int_equal(lz_netpolicy_set_names(plain, NULL, 0, NULL, 0, NULL, 0, NULL), 0);
	assert_int_equal(plain->names.n_allow, 0);
	free(plain);
	free(p);
}

static void test_lz_netpolicy_set_names__round_trip_version_2(void **state)
{
	(void)state;
	struct lz_netpolicy *p = named_ok();
	uint8_t buf[LZ_NETPOLICY_ENCODED_MAX], again[LZ_NETPOLICY_ENCODED_MAX];
	size_t len = encode_ok(p, buf);
	assert_int_equal(buf[0], LZ_NETPOLICY_VERSION_NAMES);
	struct lz_netpolicy *q = policy_new();
	assert_int_equal(lz_netpolicy_decode(buf, len, q, NULL), 0);
	assert_int_equal(q->names.n_allow, 3);
	assert_string_equal(q->names.allow[1], "api.anthropic.com");
	assert_string_equal(q->names.deny[0], "bad.example.com");
	assert_int_equal(q->names.n_resolvers, 1);
	assert_int_equal(encode_ok(q, again), len);
	assert_memory_equal(buf, again, len);
	/* The digest covers the names: another list, another digest. */
	uint8_t d1[32], d2[32];
	assert_int_equal(lz_netpolicy_digest(p, d1), 0);
	strcpy(q->names.deny[0], "bad2.example.com");
	assert_int_equal(lz_netpolicy_digest(q, d2), 0);
	assert_memory_not_equal(d1, d2, 32);
	/* Every truncation, and a version-1 header over the same bytes. */
	for (size_t n = 0; n < len; n++)
		assert_int_equal(lz_netpolicy_decode(buf, n, q, NULL), -EBADMSG);
	buf[0] = LZ_NETPOLICY_VERSION;
	assert_int_equal(lz_netpolicy_decode(buf, len, q, NULL), -EBADMSG);
	free(q);
	free(p);
}

static void test_lz_netpolicy_set_names__refusals_leave_the_policy(void **state)
{
	(void)state;
	static const char *const bad_names[] = { "*.com", "Upper.example", "a..b", "10.1.2.3", "*", "a.*.b", "" };
	static const char *const one[] = { "a.example" }, *const twice[] = { "a.example", "a.example" };
	static const uint32_t zero[] = { 0x00000001u }, multicast[] = { 0xe0000001u },
			      repeated[] = { 0x01010101u, 0x01010101u };
	struct lz_netpolicy *p = derive_ok(NULL, 0, NULL, 0), *before = policy_new();
	memcpy(before, p, sizeof(*p));
	for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
		struct lz_err err = { 0 };
		if (lz_netpolicy_set_names(p, &bad_names[i], 1, NULL, 0, NULL, 0, &err) != -EINVAL)
			fail_msg("'%s' accepted", bad_names[i]);
		assert_memory_equal(p, before, sizeof(*p));
	}
	assert_int_equal(lz_netpolicy_set_names(p, twice, 2, NULL, 0, NULL, 0, NULL), -EINVAL);
	assert_int_equal(lz_netpolicy_set_names(p, NULL, 0, one, 1, NULL, 0, NULL), -EINVAL);
	assert_int_equal(lz_netpolicy_set_names(p, one, 1, NULL, 0, zero, 1, NULL), -EINVAL);
	assert_int_equal(lz_netpolicy_set_names(p, one, 1, NULL, 0, multicast, 1, NULL), -EINVAL);
	assert_int_equal(lz_netpolicy_set_names(p, one, 1, NULL, 0, repeated, 2, NULL), -EINVAL);
	assert_memory_equal(p, before, sizeof(*p));
	/* A second name policy is refused too. */
	assert_int_equal(lz_netpolicy_set_names(p, one, 1, NULL, 0, NULL, 0, NULL), 0);
	assert_int_equal(lz_netpolicy_set_names(p, one, 1, NULL, 0, NULL, 0, NULL), -EEXIST);
	/* An egress route without names does not validate. */
	p->names.n_allow = 0;
	assert_int_equal(lz_netpolicy_validate(p, NULL), -EINVAL);
	free(before);
	free(p);
}

static void test_lz_netpolicy_admits__the_address_policy(void **state)
{
	(void)state;
	const struct lz_prefix allow[] = { P(10, 250, 0, 0, 24) }, deny[] = { P(198, 51, 100, 0, 24) };
	const struct lz_prefix all[] = { P(0, 0, 0, 0, 0) };
	struct lz_netpolicy *p = named_ok();
	assert_true(lz_netpolicy_admits(p, 0xcb007105u));  /* 203.0.113.5: public */
	assert_false(lz_netpolicy_admits(p, 0x0afa000au)); /* 10.250.0.10: RFC 1918 */
	assert_false(lz_netpolicy_admits(p, 0x7f000001u)); /* the host's loopback */
	assert_false(lz_netpolicy_admits(p, LZ_NET_EGRESS_PROXY));
	assert_false(lz_netpolicy_admits(p, LZ_NET_GATEWAY));
	assert_false(lz_netpolicy_admits(p, 0xa9fea9feu)); /* metadata */
	assert_false(lz_netpolicy_admits(p, 0xe0000001u)); /* multicast */
	free(p);
	p = derive_ok(allow, 1, deny, 1);
	assert_true(lz_netpolicy_admits(p, 0x0afa000au));
	assert_false(lz_netpolicy_admits(p, 0xc633640au));
	free(p);
	/* An allow covering 0.0.0.0/8 still never admits it: the kernel
	 * delivers a connection there to the host's loopback. */
	const struct lz_prefix low[] = { P(0, 0, 0, 0, 5) };
	p = derive_ok(low, 1, NULL, 0);
	assert_true(lz_netpolicy_admits(p, 0x01020304u));
	assert_false(lz_netpolicy_admits(p, 0x00000000u));
	assert_false(lz_netpolicy_admits(p, 0x00000001u));
	free(p);
	/* Host addresses are denied unless allowed. */
	uint32_t host[] = { 0xcb007105u };
	p = policy_new();
	assert_int_equal(lz_netpolicy_derive(NULL, 0, NULL, 0, host, 1, p, NULL), 0);
	assert_false(lz_netpolicy_admits(p, 0xcb007105u));
	free(p);
	p = derive_ok(NULL, 0, all, 1);
	assert_false(lz_netpolicy_admits(p, 0xcb007105u));
	free(p);
}

/* Egress by name: the proxy is live exactly when the policy names domains. */
static void test_lz_netattest_check__egress_proxy_matches_the_policy(void **state)
{
	(void)state;
	struct lz_netattest a = attest_good();
	struct lz_err err = { 0 };
	assert_int_equal(lz_netattest_check(&a, challenge, true, &err), -EPERM);
	assert_string_equal(err.msg, "predicate 'egress proxy live' failed");
	a.egress_proxy_live = true;
	assert_int_equal(lz_netattest_check(&a, challenge, true, NULL), 0);
	assert_int_equal(lz_netattest_check(&a, challenge, false, &err), -EPERM);
	assert_string_equal(err.msg, "predicate 'egress proxy live' failed");
	uint8_t buf[LZ_NETATTEST_ENCODED_MAX];
	size_t len;
	struct lz_netattest b;
	assert_int_equal(lz_netattest_encode(&a, buf, sizeof(buf), &len), 0);
	assert_int_equal(lz_netattest_decode(buf, len, &b), 0);
	assert_true(b.egress_proxy_live);
	assert_int_equal(lz_netattest_decode(buf, len - 1, &b), -EBADMSG);
}

/* The first failing predicate is the one named; another challenge fails the
 * echo. */
static void test_lz_netattest_check__first_failure_named(void **state)
{
	(void)state;
	struct lz_netattest a = attest_good();
	struct lz_err err = { 0 };
	a.denied_canary_unreachable = false;
	a.rs_netadmin_dropped = false;
	assert_int_equal(lz_netattest_check(&a, challenge, false, &err), -EPERM);
	assert_string_equal(err.msg, "predicate 'denied canary unreachable' failed");

	a = attest_good();
	uint8_t other[32];
	memcpy(other, challenge, 32);
	other[0] ^= 1;
	assert_int_equal(lz_netattest_check(&a, other, false, &err), -EPERM);
	assert_string_equal(err.msg, "predicate 'allowed canary answered' failed");
	assert_int_equal(lz_netattest_check(&a, challenge, false, NULL), 0);
}

/* ---- readiness fingerprint ------------------------------------------------ */

struct fp_in {
	uint8_t dom[32], cfg[32], pol[32];
	char sidecar[33];
	uint64_t gen, dev, ino;
};

static struct fp_in fp_vector(void)
{
	struct fp_in f = { .gen = 7, .dev = 0x1122334455667788ull, .ino = 4026531993ull };
	for (int i = 0; i < 32; i++) {
		f.dom[i] = (uint8_t)i;
		f.cfg[i] = (uint8_t)(32 + i);
		f.pol[i] = 0xaa;
	}
	memcpy(f.sidecar, "0123456789abcdef0123456789abcdef", 33);
	return f;
}

static int fp_of(const struct fp_in *f, uint8_t out[32])
{
	return lz_netready_fingerprint(f->dom, f->gen, f->cfg, f->sidecar, f->pol, f->dev, f->ino,
				       out);
}

static void test_lz_netready_fingerprint__matches_vector(void **state)
{
	(void)state;
	struct fp_in f = fp_vector();
	uint8_t out[32];
	char hex[65];
	assert_int_equal(fp_of(&f, out), 0);
	tohex(out, 32, hex);
	assert_string_equal(hex, READY_FP);
}

/* Every field is bound: changing any one changes the fingerprint. */
static void test_lz_netready_fingerprint__every_field_bound(void **state)
{
	(void)state;
	uint8_t base[32], out[32];
	struct fp_in f = fp_vector();
	assert_int_equal(fp_of(&f, base), 0);
	for (int field = 0; field < 7; field++) {
		f = fp_vector();
		switch (field) {
		case 0: f.dom[31] ^= 1; break;
		case 1: f.gen++; break;
		case 2: f.cfg[0] ^= 1; break;
		case 3: f.sidecar[0] = '1'; break;
		case 4: f.pol[5] ^= 1; break;
		case 5: f.dev++; break;
		default: f.ino++; break;
		}
		assert_int_equal(fp_of(&f, out), 0);
		assert_memory_not_equal(out, base, 32);
	}
}

static void test_lz_netready_fingerprint__bad_sidecar_refused(void **state)
{
	(void)state;
	const char *bad[] = {
		"0123456789ABCDEF0123456789abcdef", /* uppercase */
		"0123456789abcdef0123456789abcdeg", /* not hex */
		"0123456789abcdef0123456789abcde",  /* short: NUL at 31 */
	};
	uint8_t out[32], sentinel[32];
	memset(out, 0x5a, sizeof(out));
	memcpy(sentinel, out, sizeof(out));
	struct fp_in f = fp_vector();
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(f.sidecar, 0, sizeof(f.sidecar));
		memcpy(f.sidecar, bad[i], strlen(bad[i]));
		assert_int_equal(fp_of(&f, out), -EINVAL);
	}
	/* No NUL after 32 characters. */
	memset(f.sidecar, 'a', sizeof(f.sidecar));
	assert_int_equal(fp_of(&f, out), -EINVAL);
	assert_memory_equal(out, sentinel, sizeof(out));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_netpolicy_derive__default_matches_vector),
		cmocka_unit_test(test_lz_netpolicy_derive__allow_and_deny_match_vector),
		cmocka_unit_test(test_lz_netpolicy_derive__special_ranges_and_host_addresses),
		cmocka_unit_test(test_lz_netpolicy_derive__canonical_regardless_of_input_order),
		cmocka_unit_test(test_lz_netpolicy_derive__equal_prefix_resolves_to_deny),
		cmocka_unit_test(test_lz_netpolicy_derive__broader_deny_keeps_helpers),
		cmocka_unit_test(test_lz_netpolicy_derive__deny_all_clears_default_allow),
		cmocka_unit_test(test_lz_netpolicy_derive__allow_intersecting_topology_refused),
		cmocka_unit_test(test_lz_netpolicy_derive__deny_inside_topology_refused),
		cmocka_unit_test(test_lz_netpolicy_derive__malformed_prefix_refused),
		cmocka_unit_test(test_lz_netpolicy_derive__too_many_routes_refused),
		cmocka_unit_test(test_lz_netpolicy_encode__invalid_policy_refused),
		cmocka_unit_test(test_lz_netpolicy_encode__every_short_capacity_refused),
		cmocka_unit_test(test_lz_netpolicy_decode__vectors_round_trip),
		cmocka_unit_test(test_lz_netpolicy_decode__every_truncation_refused),
		cmocka_unit_test(test_lz_netpolicy_decode__trailing_byte_refused),
		cmocka_unit_test(test_lz_netpolicy_decode__bad_version_refused),
		cmocka_unit_test(test_lz_netpolicy_decode__unsorted_refused),
		cmocka_unit_test(test_lz_netpolicy_decode__duplicate_refused),
		cmocka_unit_test(test_lz_netpolicy_decode__unknown_kind_refused),
		cmocka_unit_test(test_lz_netpolicy_decode__semantic_violations_refused),
		cmocka_unit_test(test_lz_netpolicy_memfd__round_trip),
		cmocka_unit_test(test_lz_netpolicy_to_memfd__bad_length_refused),
		cmocka_unit_test(test_lz_netpolicy_from_memfd__unsealed_refused),
		cmocka_unit_test(test_lz_netpolicy_from_memfd__missing_or_extra_seal_refused),
		cmocka_unit_test(test_lz_netpolicy_from_memfd__wrong_digest_refused),
		cmocka_unit_test(test_lz_netpolicy_from_memfd__bad_content_refused),
		cmocka_unit_test(test_lz_netattest_encode__matches_vector),
		cmocka_unit_test(test_lz_netattest_encode__all_failed_record),
		cmocka_unit_test(test_lz_netattest_encode__inconsistent_refused),
		cmocka_unit_test(test_lz_netattest_decode__malformed_refused),
		cmocka_unit_test(test_lz_netattest_check__each_predicate_named),
		cmocka_unit_test(test_lz_netattest_check__first_failure_named),
		cmocka_unit_test(test_lz_netattest_check__egress_proxy_matches_the_policy),
		cmocka_unit_test(test_lz_netpolicy_set_names__sorted_with_the_egress_route),
		cmocka_unit_test(test_lz_netpolicy_set_names__round_trip_version_2),
		cmocka_unit_test(test_lz_netpolicy_set_names__refusals_leave_the_policy),
		cmocka_unit_test(test_lz_netpolicy_admits__the_address_policy),
		cmocka_unit_test(test_lz_netready_fingerprint__matches_vector),
		cmocka_unit_test(test_lz_netready_fingerprint__every_field_bound),
		cmocka_unit_test(test_lz_netready_fingerprint__bad_sidecar_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
