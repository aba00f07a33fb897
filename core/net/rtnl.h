/* One rtnetlink request socket over libnl, shared by the modules that read
 * and change the current network namespace (netroutes: routes and
 * addresses; canary: the attestation veth). It keeps the kernel's own errno
 * and extended-ack text, which libnl would otherwise reduce to its codes.
 *
 * Everything acts on the network namespace the calling thread is in when
 * lz_rtnl_open runs (a netlink socket belongs to the namespace it was
 * created in). */
#ifndef LZ_RTNL_H
#define LZ_RTNL_H

#include <stddef.h>
#include <stdint.h>

#include <linux/netlink.h>
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

/* One dump request of type with the family header hdr; fn sees every valid
 * message (a negative return stops the dump and is returned). -EAGAIN when
 * the kernel flagged the dump as interrupted. */
int lz_rtnl_dump(struct lz_rtnl *nl, int type, const void *hdr, size_t hdrlen,
		 int (*fn)(const struct nlmsghdr *h, void *arg), void *arg);

#endif
