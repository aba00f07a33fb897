/* The network readiness attestation record (spec 3.7 "Derived policy and
 * readiness encoding", the evidence table of "MarkNetworkReady"; SR-5).
 *
 * One observation per predicate. The sandbox's root init fills the
 * imported-behaviour fields and encodes the record; the Runtime Supervisor
 * decodes it, adds its own observations and sends the whole record to the
 * Host Coordinator, which checks it. Kept apart from netpolicy (and free of
 * OpenSSL) because the statically linked init encodes it.
 *
 *   struct NetAttest {
 *       version: u32,                        // varint, must be 1
 *       policy_matches: bool,
 *       canaries_live: bool,
 *       tap0_ifindex: Option<u32>,           // Some(n) with n != 0
 *       allowed_echo: Option<[u8; 32]>,      // the canary's answer
 *       denied_canary_unreachable: bool,
 *       ipv6_absent: bool,
 *       netadmin_caps_empty: bool,
 *       route_mutation_refused: bool,
 *       veth_removed: bool,
 *       allowed_canary_unreachable_after: bool,
 *       tap0_present_after: bool,
 *       ipv6_unchanged_after: bool,
 *       rs_netadmin_dropped: bool,
 *       egress_proxy_live: bool,
 *   }
 */
#ifndef LZ_NETATTEST_H
#define LZ_NETATTEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define LZ_NETATTEST_VERSION 1u
#define LZ_NETATTEST_CHALLENGE_LEN 32
/* version 1 + 12 bools + Option<u32> 6 + Option<[u8;32]> 33. */
#define LZ_NETATTEST_ENCODED_MAX 52

/* One observation per predicate, in the order lz_netattest_check tests them
 * (the predicate names are in quotes). */
struct lz_netattest {
	/* Linux policy state (RS): the rtnetlink projection equals the derived
	 * policy and fixed topology. "policy projection matches" */
	bool policy_matches;
	/* Known-live control (RS): both canaries authenticated their
	 * generation-bound challenges before policy installation.
	 * "canaries live before policy" */
	bool canaries_live;
	/* Imported behavior (root init inside the sandbox). */
	bool tap0_present;     /* "tap0 present": also needs tap0_ifindex != 0 */
	uint32_t tap0_ifindex; /* 0 when absent */
	bool allowed_answered; /* "allowed canary answered": answer must match */
	/* The allowed canary's answer to the init's challenge (canary.h); zero
	 * when not answered. */
	uint8_t allowed_echo[LZ_NETATTEST_CHALLENGE_LEN];
	bool denied_canary_unreachable; /* "denied canary unreachable" */
	bool ipv6_absent;               /* "no non-loopback IPv6 address or route" */
	bool netadmin_caps_empty;       /* "empty network-admin capability" */
	bool route_mutation_refused;    /* "route mutation refused" */
	/* Exact cleanup and cleanup observation (RS). */
	bool veth_removed;                     /* "veth removed with matching shape" */
	bool allowed_canary_unreachable_after; /* "formerly allowed canary unreachable" */
	bool tap0_present_after;               /* "tap0 present after cleanup" */
	bool ipv6_unchanged_after;             /* "IPv6 disposition unchanged" */
	/* Authority drop (RS). */
	bool rs_netadmin_dropped; /* "RS capability dropped" */
	/* Egress by name (RS): the generation's proxy answered its keyed
	 * challenge over the policy's digest; false when the policy has no
	 * name policy (there is no proxy). "egress proxy live" */
	bool egress_proxy_live;
};

/* -EINVAL when tap0_present/tap0_ifindex or allowed_answered/allowed_echo
 * are inconsistent (absent must carry zeros; present ifindex is non-zero),
 * -EMSGSIZE when cap is too small; *ret_len untouched on failure. */
int lz_netattest_encode(const struct lz_netattest *a, uint8_t *buf, size_t cap, size_t *ret_len);

/* Canonical only; -EBADMSG otherwise (including trailing bytes, version
 * != 1, Some(0) ifindex). *ret untouched on failure. */
int lz_netattest_decode(const uint8_t *buf, size_t len, struct lz_netattest *ret);

/* 0 when every predicate holds, egress_proxy_live equals egress_expected
 * (the policy has a name policy), and the answer equals expected_answer (the
 * keyed answer the allowed canary must have given, canary.h); otherwise -EPERM and err (optional) reads
 * "predicate '<name>' failed" for the first failing one. */
int lz_netattest_check(const struct lz_netattest *a,
		       const uint8_t expected_answer[LZ_NETATTEST_CHALLENGE_LEN], bool egress_expected,
		       struct lz_err *err);

#endif
