/* libFuzzer target for the network readiness attestation record
 * (core/net/netattest.c): the sandbox's root init encodes its half, the
 * Runtime Supervisor decodes it (runtime/supervisor.c) and the Host
 * Coordinator decodes the whole record again (runtime/coordinator.c), so
 * the bytes may come from a hostile sandbox.
 *
 * 1. lz_netattest_decode on the input: refused with -EBADMSG and the
 *    output untouched, or accepted; an accepted record is canonical: its
 *    encoding is the input, byte for byte (so no over-long varint, no bool
 *    or option tag other than 0 or 1, no trailing byte, version 1,
 *    Some(ifindex) never 0), within LZ_NETATTEST_ENCODED_MAX, and an
 *    absent tap0 or answer carries zeros.
 * 2. A record built from the input's bits (when there are enough):
 *    lz_netattest_encode refuses it with -EINVAL exactly when tap0_present
 *    and tap0_ifindex != 0 disagree or an unanswered echo is not all zero;
 *    -EMSGSIZE with too little room (and *ret_len untouched); otherwise it
 *    decodes back to the same record.
 * 3. lz_netattest_check on a decoded record passes exactly when a model of
 *    its predicates does, for an expected answer equal to the echo and for
 *    one that differs, with and without an expected egress proxy; a
 *    failure names a predicate.
 * Any violation abort()s. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/netattest.h"

static void check(bool ok)
{
	if (!ok)
		abort();
}

static bool same(const struct lz_netattest *a, const struct lz_netattest *b)
{
	return a->policy_matches == b->policy_matches && a->canaries_live == b->canaries_live &&
	       a->tap0_present == b->tap0_present && a->tap0_ifindex == b->tap0_ifindex &&
	       a->allowed_answered == b->allowed_answered &&
	       memcmp(a->allowed_echo, b->allowed_echo, sizeof(a->allowed_echo)) == 0 &&
	       a->denied_canary_unreachable == b->denied_canary_unreachable && a->ipv6_absent == b->ipv6_absent &&
	       a->netadmin_caps_empty == b->netadmin_caps_empty &&
	       a->route_mutation_refused == b->route_mutation_refused && a->veth_removed == b->veth_removed &&
	       a->allowed_canary_unreachable_after == b->allowed_canary_unreachable_after &&
	       a->tap0_present_after == b->tap0_present_after &&
	       a->ipv6_unchanged_after == b->ipv6_unchanged_after &&
	       a->rs_netadmin_dropped == b->rs_netadmin_dropped && a->egress_proxy_live == b->egress_proxy_live;
}

static bool zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0)
			return false;
	return true;
}

static void check_pred(const struct lz_netattest *a, const uint8_t answer[LZ_NETATTEST_CHALLENGE_LEN], bool egress)
{
	bool ok = a->policy_matches && a->canaries_live && a->tap0_present && a->tap0_ifindex != 0 &&
		  a->allowed_answered && memcmp(a->allowed_echo, answer, LZ_NETATTEST_CHALLENGE_LEN) == 0 &&
		  a->denied_canary_unreachable && a->ipv6_absent && a->netadmin_caps_empty &&
		  a->route_mutation_refused && a->veth_removed && a->allowed_canary_unreachable_after &&
		  a->tap0_present_after && a->ipv6_unchanged_after && a->rs_netadmin_dropped &&
		  a->egress_proxy_live == egress;
	struct lz_err err = { 0 };
	int r = lz_netattest_check(a, answer, egress, &err);
	if (ok) {
		check(r == 0);
	} else {
		check(r == -EPERM && err.code == EPERM && strncmp(err.msg, "predicate '", 11) == 0);
		check(lz_netattest_check(a, answer, egress, NULL) == -EPERM);
	}
}

static void fuzz_decode(const uint8_t *data, size_t size)
{
	struct lz_netattest a, sentinel;
	memset(&a, 0x5a, sizeof(a));
	memcpy(&sentinel, &a, sizeof(a));
	int r = lz_netattest_decode(data, size, &a);
	if (r < 0) {
		check(r == -EBADMSG && memcmp(&a, &sentinel, sizeof(a)) == 0);
		return;
	}
	check(r == 0 && size <= LZ_NETATTEST_ENCODED_MAX);
	check(a.tap0_present == (a.tap0_ifindex != 0));
	check(a.allowed_answered || zero(a.allowed_echo, sizeof(a.allowed_echo)));
	uint8_t buf[LZ_NETATTEST_ENCODED_MAX + 8];
	size_t len = 0;
	check(lz_netattest_encode(&a, buf, sizeof(buf), &len) == 0);
	check(len == size && memcmp(buf, data, size) == 0);

	uint8_t answer[LZ_NETATTEST_CHALLENGE_LEN];
	memcpy(answer, a.allowed_echo, sizeof(answer));
	for (int egress = 0; egress < 2; egress++) {
		check_pred(&a, answer, egress);
		answer[size % sizeof(answer)] ^= 1;
		check_pred(&a, answer, egress);
		answer[size % sizeof(answer)] ^= 1;
	}
}

/* Record bits: 16 flag bytes' low bits, 4 bytes of ifindex, 32 of echo,
 * one of room. */
#define BUILD_LEN (16 + 4 + LZ_NETATTEST_CHALLENGE_LEN + 1)

static void fuzz_encode(const uint8_t *d)
{
	struct lz_netattest a;
	memset(&a, 0, sizeof(a));
	bool *flags[] = { &a.policy_matches,
			  &a.canaries_live,
			  &a.tap0_present,
			  &a.allowed_answered,
			  &a.denied_canary_unreachable,
			  &a.ipv6_absent,
			  &a.netadmin_caps_empty,
			  &a.route_mutation_refused,
			  &a.veth_removed,
			  &a.allowed_canary_unreachable_after,
			  &a.tap0_present_after,
			  &a.ipv6_unchanged_after,
			  &a.rs_netadmin_dropped,
			  &a.egress_proxy_live };
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		*flags[i] = d[i] & 1;
	/* bytes 14 and 15 pick zero ifindex / zero echo, so they happen often */
	if (!(d[14] & 1))
		memcpy(&a.tap0_ifindex, d + 16, 4);
	if (!(d[15] & 1))
		memcpy(a.allowed_echo, d + 20, sizeof(a.allowed_echo));
	size_t cap = d[20 + LZ_NETATTEST_CHALLENGE_LEN] % (LZ_NETATTEST_ENCODED_MAX + 2);

	bool bad = a.tap0_present != (a.tap0_ifindex != 0) ||
		   (!a.allowed_answered && !zero(a.allowed_echo, sizeof(a.allowed_echo)));
	uint8_t full[LZ_NETATTEST_ENCODED_MAX];
	size_t full_len = 12345;
	int r = lz_netattest_encode(&a, full, sizeof(full), &full_len);
	if (bad) {
		check(r == -EINVAL && full_len == 12345);
		return;
	}
	check(r == 0 && full_len >= 14 && full_len <= LZ_NETATTEST_ENCODED_MAX);

	uint8_t *small = malloc(cap ? cap : 1);
	check(small != NULL);
	size_t len = 12345;
	r = lz_netattest_encode(&a, small, cap, &len);
	if (cap < full_len) {
		check(r == -EMSGSIZE && len == 12345);
	} else {
		check(r == 0 && len == full_len && memcmp(small, full, len) == 0);
	}
	free(small);

	struct lz_netattest b;
	check(lz_netattest_decode(full, full_len, &b) == 0 && same(&a, &b));
	/* any strict prefix or extension is refused */
	struct lz_netattest c;
	for (size_t k = 0; k < full_len; k++)
		check(lz_netattest_decode(full, k, &c) == -EBADMSG);
	uint8_t ext[LZ_NETATTEST_ENCODED_MAX + 1];
	memcpy(ext, full, full_len);
	ext[full_len] = 0;
	check(lz_netattest_decode(ext, full_len + 1, &c) == -EBADMSG);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_decode(data, size);
	if (size >= BUILD_LEN)
		fuzz_encode(data);
	return 0;
}
