/* One rtnetlink request socket over libnl, shared by the modules that read
 * and change the current network namespace (netroutes_observe,
 * netroutes_install, netroutes_ipv6: routes and addresses; canary: the
 * attestation veth), and the listing of its links and addresses. It keeps
 * the kernel's own errno and extended-ack text, which libnl would otherwise
 * reduce to its codes.
 *
 * Everything acts on the network namespace the calling thread is in when
 * lz_rtnl_open runs (a netlink socket belongs to the namespace it was
 * created in). */
#ifndef LZ_RTNL_H
#define LZ_RTNL_H

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/netlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

#include "util/err.h"

struct lz_rtnl {
	struct nl_sock *sk;
	int kerr;       /* positive errno of the last NLMSG_ERROR, 0 if none */
	char kmsg[160]; /* its extended-ack text, "" if none */
};

/* Frees the socket (if any); for _cleanup_rtnl_. */
void lz_rtnl_close(struct lz_rtnl *nl);
#define _cleanup_rtnl_ __attribute__((cleanup(lz_rtnl_close)))

/* Connects NETLINK_ROUTE with extended acks; op prefixes the message. */
int lz_rtnl_open(struct lz_rtnl *nl, const char *op, struct lz_err *err);

/* The kernel's errno when it sent one, else libnl's code mapped back. */
int lz_rtnl_result(const struct lz_rtnl *nl, int nle);

/* libnl's NLE_* code as an errno value (positive). */
int lz_nle_errno(int nle);

/* Sends msg (consumed) and waits for the acknowledgement: 0 or -errno. */
int lz_rtnl_transact(struct lz_rtnl *nl, struct nl_msg *msg);

/* Sends msg (consumed; NLM_F_REQUEST, without NLM_F_ACK when the reply
 * itself answers) and hands every valid reply message to fn (a negative
 * return stops and is returned). 0 or -errno (the kernel's when it sent one). */
int lz_rtnl_request(struct lz_rtnl *nl, struct nl_msg *msg, int (*fn)(const struct nlmsghdr *h, void *arg),
		    void *arg);

/* Sets the link called name up (RTM_NEWLINK, IFF_UP): 0 or -errno
 * (-ENODEV for no such link, -EPERM without network administration). */
int lz_rtnl_link_up(struct lz_rtnl *nl, const char *name);

/* Adds the IPv4 address addr/plen (host byte order) with scope to the link
 * ifindex, exclusively (NLM_F_CREATE|NLM_F_EXCL; -EEXIST when present), as
 * both IFA_LOCAL and IFA_ADDRESS, without IFA_F_NOPREFIXROUTE: 0 or -errno. */
int lz_rtnl_addr_add(struct lz_rtnl *nl, int ifindex, uint32_t addr, uint8_t plen, uint8_t scope);

/* ---- change notifications ------------------------------------------------ */

/* A non-blocking socket subscribed to the rtnetlink multicast groups
 * (RTMGRP_* bits) of the calling thread's network namespace: subscribe
 * before looking, so no change after the look is missed. The descriptor,
 * or -errno. */
int lz_rtnl_subscribe(uint32_t groups);

/* Reads what the subscriber holds, without waiting. Returns 1 when fn
 * (optional) returned 1 for a message the kernel sent, 0 otherwise
 * (every message read), -ENOBUFS when notifications were lost (the
 * subscriber is emptied: look again), other -errno. */
int lz_rtnl_drain(int fd, int (*fn)(const struct nlmsghdr *h, void *arg), void *arg);

/* One dump request of type with the family header hdr; fn sees every valid
 * message (a negative return stops the dump and is returned). -EAGAIN when
 * the kernel flagged the dump as interrupted. */
int lz_rtnl_dump(struct lz_rtnl *nl, int type, const void *hdr, size_t hdrlen,
		 int (*fn)(const struct nlmsghdr *h, void *arg), void *arg);

/* ---- reading links and addresses ---------------------------------------- */

/* Hard limit on the objects one collection holds (links, addresses, and the
 * routes netroutes_observe collects with lz_rtnl_vec_push). */
#define LZ_RTNL_DUMP_MAX 4096u

/* How often a reader repeats a set of dumps the kernel flagged as
 * interrupted by a concurrent change (-EAGAIN). */
#define LZ_RTNL_DUMP_ATTEMPTS 3

struct lz_rtnl_link {
	int ifindex;
	unsigned flags; /* IFF_* */
	char name[IF_NAMESIZE];
};

struct lz_rtnl_addr {
	int family;        /* AF_INET or AF_INET6 */
	int ifindex;
	uint8_t plen;
	uint8_t local[16]; /* IPv4 in the first 4 bytes, network order */
	bool has_brd;
	uint32_t brd; /* host order */
};

/* Growable arrays filled by the dumps below; zero-initialize, release with
 * the _free functions (which leave them empty and reusable). */
struct lz_rtnl_links {
	struct lz_rtnl_link *v;
	size_t n, cap;
};

struct lz_rtnl_addrs {
	struct lz_rtnl_addr *v;
	size_t n, cap;
};

void lz_rtnl_links_free(struct lz_rtnl_links *l);
void lz_rtnl_addrs_free(struct lz_rtnl_addrs *a);

/* The link with this index or name in l, NULL when none. */
const struct lz_rtnl_link *lz_rtnl_link_by_index(const struct lz_rtnl_links *l, int ifindex);
const struct lz_rtnl_link *lz_rtnl_link_by_name(const struct lz_rtnl_links *l, const char *name);

/* Appends every link of the namespace to *ret (RTM_GETLINK dump): 0 or
 * -errno (-EBADMSG for a malformed message or a link without a name,
 * -E2BIG beyond LZ_RTNL_DUMP_MAX, -EAGAIN when interrupted). On failure *ret
 * may hold part of the dump: the caller frees it either way. */
int lz_rtnl_dump_links(struct lz_rtnl *nl, struct lz_rtnl_links *ret);

/* The same for the addresses of family (AF_INET or AF_INET6; messages of
 * other families are skipped). The address is IFA_LOCAL, or IFA_ADDRESS when
 * there is no IFA_LOCAL; -EBADMSG when that is missing or not of the
 * family's length. */
int lz_rtnl_dump_addrs(struct lz_rtnl *nl, int family, struct lz_rtnl_addrs *ret);

/* Appends x (elem bytes) to the growable array *vp of *n elements and *cap
 * capacity, bounded by LZ_RTNL_DUMP_MAX: 0, -E2BIG or -ENOMEM. For dump
 * callbacks. */
int lz_rtnl_vec_push(void *vp, size_t *n, size_t *cap, size_t elem, const void *x);

/* A 4-byte attribute's value, as it is (network order for addresses):
 * 0, or -EBADMSG for another length. */
int lz_rtnl_get_u32(const struct nlattr *a, uint32_t *ret);

#endif
