/* libFuzzer target for core/netpolicy.c (spec 3.7).
 *
 * 1. Decodes the input as a policy. A refusal is -EBADMSG and leaves the
 *    output untouched; an accepted policy validates, re-encodes to exactly
 *    the input bytes, and its digest is the digest of the input bytes.
 * 2. Decodes the input as an attestation record, with the same checks, and
 *    the check verdict is stable across the round trip.
 * 3. Reads the input as configured prefixes (5 bytes each: 4 address bytes,
 *    then a byte whose low 6 bits are the length and whose top bit selects
 *    deny) and derives a policy: a refusal is -EINVAL or -E2BIG and leaves
 *    the output untouched; an accepted policy validates, round-trips through
 *    its encoding, holds every deny, and holds every allow unless an equal
 *    deny won.
 * Any violation abort()s. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/netattest.h"
#include "net/netpolicy.h"

static void check(bool ok)
{
	if (!ok)
		abort();
}

static struct lz_netpolicy policy_a, policy_b, sentinel;
static uint8_t enc[LZ_NETPOLICY_ENCODED_MAX];

static void fuzz_policy(const uint8_t *data, size_t size)
{
	memset(&policy_a, 0x5a, sizeof(policy_a));
	int r = lz_netpolicy_decode(data, size, &policy_a, NULL);
	if (r < 0) {
		check(r == -EBADMSG);
		memset(&sentinel, 0x5a, sizeof(sentinel));
		check(memcmp(&policy_a, &sentinel, sizeof(sentinel)) == 0);
		return;
	}
	check(lz_netpolicy_validate(&policy_a, NULL) == 0);
	size_t len = 0;
	check(lz_netpolicy_encode(&policy_a, enc, sizeof(enc), &len) == 0);
	check(len == size && memcmp(enc, data, size) == 0);
	uint8_t d1[32], d2[32];
	check(lz_netpolicy_digest(&policy_a, d1) == 0);
	check(lz_netpolicy_digest_bytes(data, size, d2) == 0);
	check(memcmp(d1, d2, 32) == 0);
}

static void fuzz_attest(const uint8_t *data, size_t size)
{
	struct lz_netattest a, s;
	memset(&a, 0x5a, sizeof(a));
	memcpy(&s, &a, sizeof(a));
	int r = lz_netattest_decode(data, size, &a);
	if (r < 0) {
		check(r == -EBADMSG && memcmp(&a, &s, sizeof(a)) == 0);
		return;
	}
	uint8_t buf[LZ_NETATTEST_ENCODED_MAX];
	size_t len = 0;
	check(lz_netattest_encode(&a, buf, sizeof(buf), &len) == 0);
	check(len == size && memcmp(buf, data, size) == 0);
	struct lz_netattest b;
	check(lz_netattest_decode(buf, len, &b) == 0);
	uint8_t challenge[32] = { 0 };
	struct lz_err e1 = { 0 }, e2 = { 0 };
	int c1 = lz_netattest_check(&a, challenge, false, &e1), c2 = lz_netattest_check(&b, challenge, false, &e2);
	check(c1 == c2 && (c1 == 0 || c1 == -EPERM) && strcmp(e1.msg, e2.msg) == 0);
}

static bool has_route(const struct lz_netpolicy *p, struct lz_prefix x, int kind)
{
	for (size_t i = 0; i < p->n_routes; i++)
		if (lz_prefix_equal(p->routes[i].prefix, x))
			return kind < 0 || (int)p->routes[i].kind == kind;
	return false;
}

static void fuzz_derive(const uint8_t *data, size_t size)
{
	enum { MAX_IN = 1024 };
	static struct lz_prefix allow[MAX_IN], deny[MAX_IN];
	size_t na = 0, nd = 0;
	for (size_t i = 0; i + 5 <= size && na + nd < MAX_IN; i += 5) {
		uint8_t len = data[i + 4] & 0x3f;
		if (len > 32)
			len = 32;
		uint32_t a = (uint32_t)data[i] << 24 | (uint32_t)data[i + 1] << 16 |
			     (uint32_t)data[i + 2] << 8 | data[i + 3];
		/* Mostly normalized; bit 6 keeps the host bits for the refusal path. */
		if (!(data[i + 4] & 0x40))
			a &= len == 0 ? 0 : ~(uint32_t)0 << (32 - len);
		struct lz_prefix x = { a, len };
		if (data[i + 4] & 0x80)
			deny[nd++] = x;
		else
			allow[na++] = x;
	}
	memset(&policy_b, 0x5a, sizeof(policy_b));
	int r = lz_netpolicy_derive(allow, na, deny, nd, NULL, 0, &policy_b, NULL);
	if (r < 0) {
		check(r == -EINVAL || r == -E2BIG);
		memset(&sentinel, 0x5a, sizeof(sentinel));
		check(memcmp(&policy_b, &sentinel, sizeof(sentinel)) == 0);
		return;
	}
	check(lz_netpolicy_validate(&policy_b, NULL) == 0);
	size_t len = 0;
	check(lz_netpolicy_encode(&policy_b, enc, sizeof(enc), &len) == 0);
	memset(&policy_a, 0, sizeof(policy_a));
	check(lz_netpolicy_decode(enc, len, &policy_a, NULL) == 0);
	check(policy_a.n_routes == policy_b.n_routes &&
	      policy_a.ipv4_default_allow == policy_b.ipv4_default_allow);
	for (size_t i = 0; i < policy_b.n_routes; i++)
		check(lz_prefix_equal(policy_a.routes[i].prefix, policy_b.routes[i].prefix) &&
		      policy_a.routes[i].kind == policy_b.routes[i].kind);
	for (size_t i = 0; i < nd; i++) {
		if (deny[i].len == 0)
			check(!policy_b.ipv4_default_allow);
		else
			check(has_route(&policy_b, deny[i], LZ_NETROUTE_DENY));
	}
	for (size_t i = 0; i < na; i++) {
		bool denied = false;
		for (size_t j = 0; j < nd; j++)
			denied = denied || lz_prefix_equal(allow[i], deny[j]);
		check(has_route(&policy_b, allow[i], LZ_NETROUTE_DENY) ||
		      (!denied && has_route(&policy_b, allow[i], LZ_NETROUTE_ALLOW)));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_policy(data, size);
	fuzz_attest(data, size);
	fuzz_derive(data, size);
	return 0;
}
