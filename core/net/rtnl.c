#include "net/rtnl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netlink/attr.h>
#include <netlink/errno.h>
#include <netlink/handlers.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>

int lz_nle_errno(int nle)
{
	switch (nle < 0 ? -nle : nle) {
	case NLE_INTR: return EINTR;
	case NLE_BAD_SOCK: return EBADF;
	case NLE_AGAIN: return EAGAIN;
	case NLE_NOMEM: return ENOMEM;
	case NLE_EXIST: return EEXIST;
	case NLE_INVAL: return EINVAL;
	case NLE_RANGE: return ERANGE;
	case NLE_MSGSIZE: return EMSGSIZE;
	case NLE_OPNOTSUPP: return EOPNOTSUPP;
	case NLE_AF_NOSUPPORT: return EAFNOSUPPORT;
	case NLE_OBJ_NOTFOUND: return ESRCH;
	case NLE_BUSY: return EBUSY;
	case NLE_NOACCESS: return EACCES;
	case NLE_PERM: return EPERM;
	case NLE_NODEV: return ENODEV;
	case NLE_DUMP_INTR: return EAGAIN;
	default: return EPROTO;
	}
}

void lz_rtnl_close(struct lz_rtnl *nl)
{
	if (nl->sk)
		nl_socket_free(nl->sk); /* closes the (SOCK_CLOEXEC) descriptor */
	nl->sk = NULL;
}

/* Records the kernel's own errno and extended-ack message (NLMSGERR_ATTR_MSG,
 * after the capped request header) before libnl reduces them. */
static int on_nlmsgerr(struct sockaddr_nl *who, struct nlmsgerr *e, void *arg)
{
	(void)who;
	struct lz_rtnl *nl = arg;
	const struct nlmsghdr *h = (const struct nlmsghdr *)((const char *)e - NLMSG_HDRLEN);
	nl->kerr = -e->error;
	nl->kmsg[0] = '\0';
	if ((h->nlmsg_flags & NLM_F_ACK_TLVS) && (h->nlmsg_flags & NLM_F_CAPPED)) {
		size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(*e));
		if (h->nlmsg_len > off) {
			const struct nlattr *a = nla_find((const struct nlattr *)((const char *)h + off),
							  (int)(h->nlmsg_len - off), NLMSGERR_ATTR_MSG);
			if (a && nla_len(a) > 0) {
				const char *text = nla_data(a);
				int len = (int)strnlen(text, (size_t)nla_len(a));
				snprintf(nl->kmsg, sizeof(nl->kmsg), "%.*s", len, text);
			}
		}
	}
	return NL_STOP;
}

int lz_rtnl_open(struct lz_rtnl *nl, const char *op, struct lz_err *err)
{
	int one = 1, r;

	nl->kerr = 0;
	nl->kmsg[0] = '\0';
	nl->sk = nl_socket_alloc();
	if (!nl->sk)
		return lz_err_set(err, ENOMEM, "%s: allocating a netlink socket", op);
	r = nl_connect(nl->sk, NETLINK_ROUTE);
	if (r < 0)
		return lz_err_set(err, lz_nle_errno(r), "%s: connecting rtnetlink: %s", op, nl_geterror(r));
	nl_socket_enable_msg_peek(nl->sk);
	/* Best effort: without them only the reason text is lost. */
	(void)setsockopt(nl_socket_get_fd(nl->sk), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	(void)setsockopt(nl_socket_get_fd(nl->sk), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
	r = nl_socket_modify_err_cb(nl->sk, NL_CB_CUSTOM, on_nlmsgerr, nl);
	if (r < 0)
		return lz_err_set(err, lz_nle_errno(r), "%s: %s", op, nl_geterror(r));
	return 0;
}

int lz_rtnl_result(const struct lz_rtnl *nl, int nle)
{
	return nl->kerr ? -nl->kerr : -lz_nle_errno(nle);
}

int lz_rtnl_transact(struct lz_rtnl *nl, struct nl_msg *msg)
{
	nl->kerr = 0;
	nl->kmsg[0] = '\0';
	int r = nl_send_auto(nl->sk, msg);
	nlmsg_free(msg);
	if (r < 0)
		return -lz_nle_errno(r);
	r = nl_wait_for_ack(nl->sk);
	return r < 0 ? lz_rtnl_result(nl, r) : 0;
}

struct dump {
	int (*fn)(const struct nlmsghdr *h, void *arg);
	void *arg;
	int err;
};

static int dump_valid(struct nl_msg *msg, void *arg)
{
	struct dump *d = arg;
	int r = d->fn(nlmsg_hdr(msg), d->arg);
	if (r < 0) {
		d->err = r;
		return NL_STOP;
	}
	return NL_OK;
}

/* Sends msg (consumed) and hands every valid reply to fn. */
int lz_rtnl_request(struct lz_rtnl *nl, struct nl_msg *msg, int (*fn)(const struct nlmsghdr *h, void *arg),
		    void *arg)
{
	struct dump d = { .fn = fn, .arg = arg, .err = 0 };
	nl->kerr = 0;
	nl->kmsg[0] = '\0';
	int r = nl_send_auto(nl->sk, msg);
	nlmsg_free(msg);
	if (r < 0)
		return -lz_nle_errno(r);
	r = nl_socket_modify_cb(nl->sk, NL_CB_VALID, NL_CB_CUSTOM, dump_valid, &d);
	if (r < 0)
		return -lz_nle_errno(r);
	r = nl_recvmsgs_default(nl->sk);
	nl_socket_modify_cb(nl->sk, NL_CB_VALID, NL_CB_DEFAULT, NULL, NULL);
	if (d.err)
		return d.err;
	return r < 0 ? lz_rtnl_result(nl, r) : 0;
}

int lz_rtnl_dump(struct lz_rtnl *nl, int type, const void *hdr, size_t hdrlen,
		 int (*fn)(const struct nlmsghdr *h, void *arg), void *arg)
{
	struct nl_msg *msg = nlmsg_alloc_simple(type, NLM_F_DUMP);
	if (!msg)
		return -ENOMEM;
	if (nlmsg_append(msg, (void *)hdr, hdrlen, NLMSG_ALIGNTO) < 0) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	return lz_rtnl_request(nl, msg, fn, arg);
}

int lz_rtnl_link_up(struct lz_rtnl *nl, const char *name)
{
	int index = (int)if_nametoindex(name);
	if (index == 0)
		return -errno;
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_index = index, .ifi_flags = IFF_UP,
				 .ifi_change = IFF_UP };
	struct nl_msg *msg = nlmsg_alloc_simple(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK);
	if (!msg || nlmsg_append(msg, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	return lz_rtnl_transact(nl, msg);
}

int lz_rtnl_addr_add(struct lz_rtnl *nl, int ifindex, uint32_t addr, uint8_t plen, uint8_t scope)
{
	struct ifaddrmsg ifa = { .ifa_family = AF_INET, .ifa_prefixlen = plen, .ifa_scope = scope,
				 .ifa_index = (uint32_t)ifindex };
	struct nl_msg *msg = nlmsg_alloc_simple(RTM_NEWADDR, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL);
	if (!msg || nlmsg_append(msg, &ifa, sizeof(ifa), NLMSG_ALIGNTO) < 0 ||
	    nla_put_u32(msg, IFA_LOCAL, htonl(addr)) < 0 || nla_put_u32(msg, IFA_ADDRESS, htonl(addr)) < 0) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	return lz_rtnl_transact(nl, msg);
}

/* ---- reading links and addresses ---------------------------------------- */

int lz_rtnl_vec_push(void *vp, size_t *n, size_t *cap, size_t elem, const void *x)
{
	void **v = vp;
	if (*n >= LZ_RTNL_DUMP_MAX)
		return -E2BIG;
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		if (nc > LZ_RTNL_DUMP_MAX)
			nc = LZ_RTNL_DUMP_MAX;
		void *p = reallocarray(*v, nc, elem);
		if (!p)
			return -ENOMEM;
		*v = p;
		*cap = nc;
	}
	memcpy((char *)*v + *n * elem, x, elem);
	(*n)++;
	return 0;
}

int lz_rtnl_get_u32(const struct nlattr *a, uint32_t *ret)
{
	if (nla_len(a) != 4)
		return -EBADMSG;
	*ret = nla_get_u32(a);
	return 0;
}

void lz_rtnl_links_free(struct lz_rtnl_links *l)
{
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

void lz_rtnl_addrs_free(struct lz_rtnl_addrs *a)
{
	free(a->v);
	a->v = NULL;
	a->n = a->cap = 0;
}

const struct lz_rtnl_link *lz_rtnl_link_by_index(const struct lz_rtnl_links *l, int ifindex)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].ifindex == ifindex)
			return &l->v[i];
	return NULL;
}

const struct lz_rtnl_link *lz_rtnl_link_by_name(const struct lz_rtnl_links *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (strncmp(l->v[i].name, name, IF_NAMESIZE) == 0)
			return &l->v[i];
	return NULL;
}

static int on_link(const struct nlmsghdr *h, void *arg)
{
	struct lz_rtnl_links *l = arg;
	struct lz_rtnl_link k = { 0 };
	struct nlattr *a;
	int rem;

	if (h->nlmsg_type != RTM_NEWLINK)
		return 0;
	if (!nlmsg_valid_hdr(h, sizeof(struct ifinfomsg)))
		return -EBADMSG;
	const struct ifinfomsg *ifi = nlmsg_data(h);
	k.ifindex = ifi->ifi_index;
	k.flags = ifi->ifi_flags;
	nlmsg_for_each_attr(a, h, sizeof(struct ifinfomsg), rem) {
		if (nla_type(a) == IFLA_IFNAME) {
			if (nla_len(a) < 1 || nla_len(a) > IF_NAMESIZE)
				return -EBADMSG;
			nla_strlcpy(k.name, a, sizeof(k.name));
		}
	}
	if (k.name[0] == '\0')
		return -EBADMSG;
	return lz_rtnl_vec_push(&l->v, &l->n, &l->cap, sizeof(k), &k);
}

static int on_addr(const struct nlmsghdr *h, void *arg)
{
	struct lz_rtnl_addrs *l = arg;
	struct lz_rtnl_addr k = { 0 };
	const struct nlattr *local = NULL, *address = NULL;
	struct nlattr *a;
	int rem;

	if (h->nlmsg_type != RTM_NEWADDR)
		return 0;
	if (!nlmsg_valid_hdr(h, sizeof(struct ifaddrmsg)))
		return -EBADMSG;
	const struct ifaddrmsg *ifa = nlmsg_data(h);
	k.family = ifa->ifa_family;
	k.ifindex = (int)ifa->ifa_index;
	k.plen = ifa->ifa_prefixlen;
	size_t alen = k.family == AF_INET ? 4 : k.family == AF_INET6 ? 16 : 0;
	if (alen == 0)
		return 0;
	nlmsg_for_each_attr(a, h, sizeof(struct ifaddrmsg), rem) {
		switch (nla_type(a)) {
		case IFA_LOCAL: local = a; break;
		case IFA_ADDRESS: address = a; break;
		case IFA_BROADCAST:
			if (nla_len(a) != 4)
				return -EBADMSG;
			k.has_brd = true;
			k.brd = ntohl(nla_get_u32(a));
			break;
		default: break;
		}
	}
	if (!local)
		local = address;
	if (!local || (size_t)nla_len(local) != alen)
		return -EBADMSG;
	memcpy(k.local, nla_data(local), alen);
	return lz_rtnl_vec_push(&l->v, &l->n, &l->cap, sizeof(k), &k);
}

int lz_rtnl_dump_links(struct lz_rtnl *nl, struct lz_rtnl_links *ret)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	return lz_rtnl_dump(nl, RTM_GETLINK, &ifi, sizeof(ifi), on_link, ret);
}

int lz_rtnl_dump_addrs(struct lz_rtnl *nl, int family, struct lz_rtnl_addrs *ret)
{
	struct ifaddrmsg ifa = { .ifa_family = (uint8_t)family };
	return lz_rtnl_dump(nl, RTM_GETADDR, &ifa, sizeof(ifa), on_addr, ret);
}

int lz_rtnl_subscribe(uint32_t groups)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = groups };
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return -e;
	}
	return fd;
}

int lz_rtnl_drain(int fd, int (*fn)(const struct nlmsghdr *h, void *arg), void *arg)
{
	bool lost = false;
	for (;;) {
		_Alignas(struct nlmsghdr) char buf[16384];
		struct sockaddr_nl from = { 0 };
		socklen_t fromlen = sizeof(from);
		ssize_t n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &fromlen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == ENOBUFS) {
			lost = true;
			continue;
		}
		if (n < 0)
			return errno == EAGAIN ? (lost ? -ENOBUFS : 0) : -errno;
		/* Only the kernel speaks for the kernel. */
		if (fn == NULL || from.nl_pid != 0)
			continue;
		size_t left = (size_t)n;
		for (const struct nlmsghdr *h = (const struct nlmsghdr *)buf; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left))
			if (fn(h, arg) == 1)
				return 1;
	}
}
