/* The egress proxy's process and link (network.allow_domains; spec 3.7 as
 * extended by issue 18). What the proxy admits is egressproxy.h's.
 *
 * Where it runs: the proxy must open its outbound sockets in the host's
 * network namespace (like slirp4netns) and accept the sandbox's
 * connections on a link the sandbox can reach and nothing else can. So
 *   1. lz_egress_start: the Runtime Supervisor forks the proxy while it is
 *      still in the host's network namespace. The child reads the policy
 *      from the sealed memfd itself (seals and digest checked, as the RS
 *      does), takes its resolvers (the policy's, else the nameservers of
 *      the host's /etc/resolv.conf), drops every capability it has in the
 *      RS's user namespace, and waits;
 *   2. lz_egress_attach, in the enforcement namespace: a veth lzegress0
 *      (10.137.55.9/32) whose peer lzegress1 holds 10.137.55.10/29 in a
 *      private peer namespace, where the listening socket
 *      10.137.55.10:3128 is created and handed to the proxy;
 *   3. lz_egress_prove_live: the RS connects through lzegress0 and sends a
 *      fresh 32-byte challenge; the proxy's first connection is this probe
 *      and it answers HMAC-SHA256(key, "lazaret-egress-v1" ||
 *      be64(generation) || policy digest || challenge): the proxy reached
 *      is this generation's and enforces the policy with this digest. The
 *      answer goes into the attestation ("egress proxy live").
 * The policy's EGRESS route (10.137.55.10/32 on-link to lzegress0) is the
 * sandbox's way there; the proxy is a plain child of the RS and dies with
 * it (parent-death signal, PID namespace). */
#ifndef LZ_EGRESS_H
#define LZ_EGRESS_H

#include <stdint.h>

#include "net/canaryprobe.h"
#include "net/peerlink.h"
#include "util/err.h"

#define LZ_EGRESS_DEV "lzegress0"
#define LZ_EGRESS_PEER_DEV "lzegress1"
#define LZ_EGRESS_KEY_LEN 32
#define LZ_EGRESS_START_MS 5000

struct lz_egress_params {
	int policy_fd;                 /* the sealed policy memfd */
	const uint8_t *policy_digest;  /* 32 bytes */
	const uint8_t *key;            /* LZ_EGRESS_KEY_LEN: the generation's secret */
	uint64_t generation;
	int log_fd;   /* refusals (the RS's helper log, relayed to hc.log); also its standard error */
	int stats_fd; /* the counters record, or -1 */
	int slots_fd; /* the host's connection slots (LZ_EGRESS_SLOTS) */
};

struct lz_egress {
	int pidfd;  /* the proxy */
	int ctl_fd; /* the RS's end of the proxy's socketpair */
	int peer_netns_fd;
	struct lz_peerlink_shape link;
};

#define LZ_EGRESS_INIT ((struct lz_egress){ .pidfd = -EBADF, .ctl_fd = -EBADF, .peer_netns_fd = -EBADF })

/* The answer to challenge; -EIO when OpenSSL fails. */
int lz_egress_answer(const uint8_t key[LZ_EGRESS_KEY_LEN], uint64_t generation, const uint8_t digest[32],
		     const uint8_t challenge[LZ_CANARY_CHALLENGE_LEN], uint8_t out[LZ_CANARY_CHALLENGE_LEN]);

/* Step 1 (above), in the host's network namespace. */
int lz_egress_start(const struct lz_egress_params *prm, struct lz_egress *e, struct lz_err *err);

/* Step 2, in the enforcement namespace: the proxy's own refusal (a policy
 * that does not verify, no resolver) comes back as the error. */
int lz_egress_attach(struct lz_egress *e, struct lz_err *err);

/* Step 3: -EPERM unless the keyed answer arrives. */
int lz_egress_prove_live(const uint8_t key[LZ_EGRESS_KEY_LEN], uint64_t generation, const uint8_t digest[32],
			 struct lz_err *err);

/* Ends the proxy and closes everything; accepts an empty e. The link goes
 * with the enforcement namespace. */
void lz_egress_stop(struct lz_egress *e);

#endif
