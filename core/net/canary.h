/* The known-live canary of network readiness (spec 3.7 "Known-live
 * control", "Exact cleanup"; SR-5, SR-6).
 *
 * Before the policy is installed, the Runtime Supervisor builds, in its
 * enforcement network namespace:
 *   lzcanary0  one end of a veth, 10.137.55.1/32 (a /32: no connected
 *              route, so the policy alone decides what reaches the canary
 *              network), whose other end lzcanary1 lives in a private peer
 *              network namespace holding 10.137.55.2/29 (the allowed
 *              endpoint) and 10.137.55.3/29 (the denied endpoint);
 *   a responder, a child process holding one listening socket per
 *              endpoint, which answers each challenge with
 *              HMAC-SHA256(key, "lazaret-canary-v1" || be64(generation) ||
 *              be32(endpoint) || challenge).
 * The key is the generation's secret (the Host Coordinator draws it and
 * keeps a copy), so an answer proves that this generation's responder was
 * reached at that endpoint: nothing else on any network can produce it.
 * The policy then routes 10.137.55.2/32 on-link to lzcanary0 and denies
 * 10.137.55.0/29 (netroutes.h); runsc imports lzcanary0 with the other
 * links, and the sandbox's init must reach the allowed endpoint and must
 * not reach the denied one.
 *
 * Cleanup deletes the veth only when its current rtnetlink shape (name,
 * kind, hardware address, peer ifindex and peer namespace ID) equals the
 * creation record: an ifindex alone could name a link created since. The
 * canary is no durable process role: the responder is a plain child of the
 * RS and dies with it (parent-death signal, PID namespace).
 *
 * Everything acts on the calling thread's current network namespace, which
 * must have lo up and IPv6 disabled; the caller needs network
 * administration there (the RS, before it drops it). */
#ifndef LZ_CANARY_H
#define LZ_CANARY_H

#include <stdint.h>

#include "net/canaryprobe.h"
#include "net/peerlink.h"
#include "net/netroutes.h"
#include "util/err.h"

#define LZ_CANARY_KEY_LEN 32
#define LZ_CANARY_DEV LZ_NETROUTES_CANARY_DEV
#define LZ_CANARY_PEER_DEV "lzcanary1"

struct lz_canary {
	int peer_netns_fd;   /* the peer namespace */
	int responder_pidfd; /* the responder child */
	struct lz_peerlink_shape link; /* lzcanary0 */
};

#define LZ_CANARY_INIT ((struct lz_canary){ .peer_netns_fd = -EBADF, .responder_pidfd = -EBADF })

/* The answer to challenge at endpoint (host byte order). -EIO when OpenSSL
 * fails. */
int lz_canary_answer(const uint8_t key[LZ_CANARY_KEY_LEN], uint64_t generation, uint32_t endpoint,
		     const uint8_t challenge[LZ_CANARY_CHALLENGE_LEN], uint8_t out[LZ_CANARY_CHALLENGE_LEN]);

/* Builds the veth, the peer namespace and the responder (above) and records
 * the link's shape. On failure the responder is ended and the descriptors
 * closed; a veth created before the failure is deleted only when its shape
 * was recorded (otherwise it is not provably ours and goes with the
 * namespace when the RS exits). -EEXIST when lzcanary0 already exists. */
int lz_canary_create(const uint8_t key[LZ_CANARY_KEY_LEN], uint64_t generation, struct lz_canary *c,
		     struct lz_err *err);

/* Known-live control: both endpoints, probed through lzcanary0 with fresh
 * random challenges, give the keyed answers. -EPERM naming the endpoint
 * otherwise. Call before any policy route exists. */
int lz_canary_prove_live(const uint8_t key[LZ_CANARY_KEY_LEN], uint64_t generation, struct lz_err *err);

/* Exact cleanup: -ESTALE (and nothing deleted) when lzcanary0's current
 * shape differs from the record; otherwise deletes it, checks that the
 * link is gone, then ends the responder and closes the peer namespace.
 * Always leaves c without processes or descriptors. ret_release as
 * lz_peerlink_remove's: the kernel's release of the link goes on in a
 * child the caller reaps. */
int lz_canary_remove(struct lz_canary *c, int *ret_release, struct lz_err *err);

/* Failure path: ends the responder and closes the peer namespace; the veth
 * goes with the namespaces. Accepts an empty c. */
void lz_canary_abandon(struct lz_canary *c);

#endif
