/* A veth whose other end lives in a private peer network namespace (spec
 * 3.7): the canary's (canary.h) and the egress proxy's (egresslink.h).
 *
 * The enforcement end gets one /32 address (no connected route: the
 * policy's routes alone decide what reaches the peer); the peer end gets
 * its addresses with a prefix, and in_peer runs there to create whatever
 * must live in that namespace (listening sockets stay in the namespace
 * they were created in). Building waits until both ends' carriers are on:
 * until then the qdisc drops what is sent, and a lost SYN costs a second.
 *
 * The link's shape (version, ifindex, name, kind, hardware address, peer
 * ifindex, peer namespace ID) is recorded at creation; removal deletes the
 * link only when its current shape equals the record (an ifindex alone
 * could name a link created since).
 *
 * Acts on the calling thread's network namespace, which must have lo up;
 * the caller needs network administration there. */
#ifndef LZ_PEERLINK_H
#define LZ_PEERLINK_H

#include <net/if.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define LZ_PEERLINK_SHAPE_VERSION 1u
#define LZ_PEERLINK_MAX_PEER_ADDRS 2
#define LZ_PEERLINK_CARRIER_MS 2000
#define LZ_PEERLINK_REMOVE_MS 2000

/* The versioned creation record of the enforcement end. */
struct lz_peerlink_shape {
	uint32_t version; /* LZ_PEERLINK_SHAPE_VERSION */
	int ifindex;
	char name[IF_NAMESIZE];
	char kind[16]; /* "veth" */
	uint8_t hwaddr[6];
	int peer_ifindex;     /* IFLA_LINK */
	int32_t peer_netnsid; /* IFLA_LINK_NETNSID */
};

struct lz_peerlink_spec {
	const char *dev, *peer_dev;
	/* Distinct indexes for the two ends: the kernel turns a veth end's
	 * carrier on at once only when its index differs from its peer's. */
	int ifindex, peer_ifindex;
	uint32_t local_addr; /* on dev, as a /32; host byte order */
	uint32_t peer_addrs[LZ_PEERLINK_MAX_PEER_ADDRS];
	size_t n_peer_addrs;
	uint8_t peer_plen;
	/* Runs in the peer namespace once its end is up with its addresses. */
	int (*in_peer)(void *ctx, struct lz_err *err);
	void *ctx;
};

/* Builds the peer namespace, the veth and both ends' addresses, runs
 * in_peer there, waits for both carriers and records the shape. On
 * success *ret_peer_netns_fd is the caller's. On failure the peer
 * namespace is closed and, when the shape was recorded, *ret_shape says so
 * (ifindex > 0): the caller may remove the link exactly; otherwise the link
 * goes with the enforcement namespace. -EEXIST when dev exists. */
int lz_peerlink_build(const struct lz_peerlink_spec *s, int *ret_peer_netns_fd, struct lz_peerlink_shape *ret_shape,
		      struct lz_err *err);

/* A listening TCP socket on addr:port (host byte order) in the calling
 * thread's network namespace, where it stays: for in_peer. -errno. */
int lz_peerlink_listen(uint32_t addr, uint16_t port, int backlog, int *ret);

/* Exact cleanup: -ESTALE (and nothing deleted) when the link's current
 * shape differs from the record; otherwise deletes it and checks it is
 * gone (-EEXIST if not). The kernel unregisters a link (its routes gone,
 * its name and index free, the RTM_DELLINK notification sent) well before
 * it releases it (an RCU barrier: 15 to 20 ms on the machines measured),
 * and the request returns only after both. It is sent by a child of the
 * caller; with ret_release, this returns once the link is unregistered and
 * *ret_release is the pidfd of that child, which exits when the kernel has
 * released the link (the caller reaps it); without, it waits for the
 * child. */
int lz_peerlink_remove(const struct lz_peerlink_shape *shape, int *ret_release, struct lz_err *err);

#endif
