/* A veth into a private peer network namespace (peerlink.h). */
#include "net/peerlink.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>

#include "net/rtnl.h"
#include "proc/caps.h"
#include "proc/spawn.h"
#include "util/cleanup.h"
#include "util/fdutil.h"

static int newlink_veth(struct lz_rtnl *nl, const struct lz_peerlink_spec *s, int peer_netns_fd)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_index = s->ifindex };
	struct ifinfomsg peer_ifi = { .ifi_family = AF_UNSPEC, .ifi_index = s->peer_ifindex };
	struct nl_msg *msg = nlmsg_alloc_simple(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL);
	struct nlattr *info, *data, *peer;
	if (!msg || nlmsg_append(msg, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0 ||
	    nla_put_string(msg, IFLA_IFNAME, s->dev) < 0 || !(info = nla_nest_start(msg, IFLA_LINKINFO)) ||
	    nla_put_string(msg, IFLA_INFO_KIND, "veth") < 0 || !(data = nla_nest_start(msg, IFLA_INFO_DATA)) ||
	    !(peer = nla_nest_start(msg, VETH_INFO_PEER)) ||
	    nlmsg_append(msg, &peer_ifi, sizeof(peer_ifi), NLMSG_ALIGNTO) < 0 ||
	    nla_put_string(msg, IFLA_IFNAME, s->peer_dev) < 0 ||
	    nla_put_u32(msg, IFLA_NET_NS_FD, (uint32_t)peer_netns_fd) < 0) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	nla_nest_end(msg, peer);
	nla_nest_end(msg, data);
	nla_nest_end(msg, info);
	return lz_rtnl_transact(nl, msg);
}

/* The address on the link called name, scope global. */
static int add_addr(struct lz_rtnl *nl, const char *name, uint32_t addr, uint8_t plen)
{
	int index = (int)if_nametoindex(name);
	return index == 0 ? -errno : lz_rtnl_addr_add(nl, index, addr, plen, RT_SCOPE_UNIVERSE);
}

/* Up is not enough: until the veth's carrier is on, the qdisc drops what is
 * sent, and a lost SYN costs a one-second retransmission. */
static int wait_running(const char *name)
{
	_cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	int64_t deadline = lz_now_ms() + LZ_PEERLINK_CARRIER_MS;
	for (;;) {
		struct ifreq ifr = { 0 };
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
		if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
			return -errno;
		if (ifr.ifr_flags & IFF_RUNNING)
			return 0;
		if (lz_remaining_ms(deadline) == 0)
			return -ETIMEDOUT;
		usleep(1000);
	}
}

struct shape_reply {
	struct lz_peerlink_shape link;
	bool got;
};

static int on_shape(const struct nlmsghdr *h, void *arg)
{
	struct shape_reply *s = arg;
	struct lz_peerlink_shape k = { .version = LZ_PEERLINK_SHAPE_VERSION, .peer_netnsid = -1 };
	struct nlattr *a;
	int rem;
	if (h->nlmsg_type != RTM_NEWLINK)
		return 0;
	if (!nlmsg_valid_hdr(h, sizeof(struct ifinfomsg)))
		return -EBADMSG;
	const struct ifinfomsg *ifi = nlmsg_data(h);
	k.ifindex = ifi->ifi_index;
	nlmsg_for_each_attr(a, h, sizeof(struct ifinfomsg), rem) {
		switch (nla_type(a)) {
		case IFLA_IFNAME:
			nla_strlcpy(k.name, a, sizeof(k.name));
			break;
		case IFLA_ADDRESS:
			if (nla_len(a) != (int)sizeof(k.hwaddr))
				return -EBADMSG;
			memcpy(k.hwaddr, nla_data(a), sizeof(k.hwaddr));
			break;
		case IFLA_LINK:
			k.peer_ifindex = (int)nla_get_u32(a);
			break;
		case IFLA_LINK_NETNSID:
			k.peer_netnsid = (int32_t)nla_get_u32(a);
			break;
		case IFLA_LINKINFO: {
			struct nlattr *i;
			int irem;
			nla_for_each_nested(i, a, irem)
				if (nla_type(i) == IFLA_INFO_KIND)
					nla_strlcpy(k.kind, i, sizeof(k.kind));
			break;
		}
		default:
			break;
		}
	}
	s->link = k;
	s->got = true;
	return 0;
}

/* The current shape of the link with this index (or, index 0, this name).
 * A socket of its own: libnl's sequence check expects an acknowledgement
 * for every request on a socket, and this one has none. */
static int read_shape(int index, const char *name, struct lz_peerlink_shape *ret)
{
	_cleanup_rtnl_ struct lz_rtnl own = { 0 };
	struct lz_rtnl *nl = &own;
	struct lz_err ignored;
	int r = lz_rtnl_open(nl, "peer link", &ignored);
	if (r < 0)
		return r;
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_index = index };
	struct nl_msg *msg = nlmsg_alloc_simple(RTM_GETLINK, NLM_F_REQUEST);
	if (!msg || nlmsg_append(msg, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0 ||
	    (index == 0 && nla_put_string(msg, IFLA_IFNAME, name) < 0)) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	struct shape_reply s = { 0 };
	nl_socket_disable_auto_ack(nl->sk);
	r = lz_rtnl_request(nl, msg, on_shape, &s);
	if (r < 0)
		return r;
	if (!s.got)
		return -EPROTO;
	*ret = s.link;
	return 0;
}

static bool same_shape(const struct lz_peerlink_shape *a, const struct lz_peerlink_shape *b)
{
	return a->version == b->version && a->ifindex == b->ifindex && strcmp(a->name, b->name) == 0 &&
	       strcmp(a->kind, b->kind) == 0 && memcmp(a->hwaddr, b->hwaddr, sizeof(a->hwaddr)) == 0 &&
	       a->peer_ifindex == b->peer_ifindex && a->peer_netnsid == b->peer_netnsid;
}

/* In the peer namespace: its end up with its addresses, then in_peer. */
static int build_peer(const struct lz_peerlink_spec *s, struct lz_err *err)
{
	_cleanup_rtnl_ struct lz_rtnl nl = { 0 };
	int r = lz_rtnl_open(&nl, "peer link", err);
	if (r < 0)
		return r;
	if ((r = lz_rtnl_link_up(&nl, "lo")) < 0 || (r = lz_rtnl_link_up(&nl, s->peer_dev)) < 0)
		return lz_err_set(err, -r, "peer link %s: %s%s%s", s->peer_dev, strerror(-r), nl.kmsg[0] ? ": " : "",
				  nl.kmsg);
	for (size_t i = 0; i < s->n_peer_addrs; i++)
		if ((r = add_addr(&nl, s->peer_dev, s->peer_addrs[i], s->peer_plen)) < 0)
			return lz_err_set(err, -r, "peer link %s address: %s%s%s", s->peer_dev, strerror(-r),
					  nl.kmsg[0] ? ": " : "", nl.kmsg);
	return s->in_peer ? s->in_peer(s->ctx, err) : 0;
}

/* Runs fn in the peer namespace and comes back (setns needs no thread). */
static int in_ns(int self, int peer, int (*fn)(const struct lz_peerlink_spec *, struct lz_err *),
		 const struct lz_peerlink_spec *s, struct lz_err *err)
{
	if (setns(peer, CLONE_NEWNET) < 0)
		return lz_err_set(err, errno, "enter the peer namespace of %s: %s", s->dev, strerror(errno));
	int r = fn(s, err);
	if (setns(self, CLONE_NEWNET) < 0)
		return lz_err_set(err, errno, "return to the enforcement namespace: %s", strerror(errno));
	return r;
}

static int peer_running(const struct lz_peerlink_spec *s, struct lz_err *err)
{
	int r = wait_running(s->peer_dev);
	return r < 0 ? lz_err_set(err, -r, "peer link %s: %s", s->peer_dev, strerror(-r)) : 0;
}

static int build(const struct lz_peerlink_spec *s, int self, int *peer_fd, struct lz_peerlink_shape *shape,
		 struct lz_err *err)
{
	_cleanup_rtnl_ struct lz_rtnl nl = { 0 };
	int r;
	/* A fresh namespace for the peer, then back. */
	if (unshare(CLONE_NEWNET) < 0)
		return lz_err_set(err, errno, "peer namespace of %s: %s", s->dev, strerror(errno));
	*peer_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int e = errno;
	if (setns(self, CLONE_NEWNET) < 0)
		return lz_err_set(err, errno, "return to the enforcement namespace: %s", strerror(errno));
	if (*peer_fd < 0)
		return lz_err_set(err, e, "peer namespace of %s: %s", s->dev, strerror(e));
	if ((r = lz_rtnl_open(&nl, "peer link", err)) < 0)
		return r;
	if ((r = newlink_veth(&nl, s, *peer_fd)) < 0)
		return lz_err_set(err, -r, "create the veth %s: %s%s%s", s->dev, strerror(-r), nl.kmsg[0] ? ": " : "",
				  nl.kmsg);
	if ((r = in_ns(self, *peer_fd, build_peer, s, err)) < 0)
		return r;
	if ((r = lz_rtnl_link_up(&nl, s->dev)) < 0 || (r = add_addr(&nl, s->dev, s->local_addr, 32)) < 0 ||
	    (r = wait_running(s->dev)) < 0)
		return lz_err_set(err, -r, "%s: %s%s%s", s->dev, strerror(-r), nl.kmsg[0] ? ": " : "", nl.kmsg);
	/* The kernel turns each end's carrier on separately. */
	if ((r = in_ns(self, *peer_fd, peer_running, s, err)) < 0)
		return r;
	if ((r = read_shape(0, s->dev, shape)) < 0)
		return lz_err_set(err, -r, "record the veth %s: %s", s->dev, strerror(-r));
	if (strcmp(shape->kind, "veth") != 0 || shape->peer_netnsid < 0)
		return lz_err_set(err, EPROTO, "the veth %s reads back as kind '%s', peer namespace ID %d", s->dev,
				  shape->kind, (int)shape->peer_netnsid);
	return 0;
}

int lz_peerlink_build(const struct lz_peerlink_spec *s, int *ret_peer_netns_fd, struct lz_peerlink_shape *ret_shape,
		      struct lz_err *err)
{
	*ret_shape = (struct lz_peerlink_shape){ 0 };
	_cleanup_close_ int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0)
		return lz_err_set(err, errno, "enforcement namespace: %s", strerror(errno));
	int peer = -EBADF;
	int r = build(s, self, &peer, ret_shape, err);
	if (r < 0) {
		lz_close_fdp(&peer);
		return r;
	}
	*ret_peer_netns_fd = peer;
	return 0;
}

int lz_peerlink_listen(uint32_t addr, uint16_t port, int backlog, int *ret)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(addr) };
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, backlog) < 0) {
		int e = errno;
		if (s >= 0)
			close(s);
		return -e;
	}
	*ret = s;
	return 0;
}

/* The kernel's RTM_DELLINK of the link whose index *arg is. */
static int is_dellink(const struct nlmsghdr *h, void *arg)
{
	return h->nlmsg_type == RTM_DELLINK && h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct ifinfomsg)) &&
	       ((const struct ifinfomsg *)NLMSG_DATA(h))->ifi_index == *(const int *)arg;
}

/* The child that asks the kernel to delete the link: the request returns
 * only after the kernel has released it. It keeps nothing of its parent's
 * but the request socket (no peer namespace, no responder) and no
 * capability but network administration, which the request needs. Exits 0
 * or with the errno. */
static _Noreturn void delete_link(struct lz_rtnl *nl, int ifindex)
{
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	(void)prctl(PR_SET_DUMPABLE, 0);
	(void)prctl(PR_SET_NAME, "lz-link-delete");
	int keep = nl_socket_get_fd(nl->sk);
	if (lz_fds_keep_only(&keep, 1) < 0 || lz_caps_limit(LZ_CAP(CAP_NET_ADMIN)) < 0)
		_exit(EPERM);
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_index = ifindex };
	struct nl_msg *msg = nlmsg_alloc_simple(RTM_DELLINK, NLM_F_REQUEST | NLM_F_ACK);
	if (!msg || nlmsg_append(msg, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0)
		_exit(ENOMEM);
	int r = lz_rtnl_transact(nl, msg);
	_exit(r < 0 ? (-r & 0x7f ? -r & 0x7f : EIO) : 0);
}

/* Waits until the link is unregistered (the subscriber's notification) or
 * the deleting child has ended (reaped here: *pidfd closed). */
static int await_unregistered(int sub, int *pidfd, int ifindex, struct lz_err *err, const char *name)
{
	int64_t deadline = lz_now_ms() + LZ_PEERLINK_REMOVE_MS;
	bool lost = false;
	for (;;) {
		struct pollfd p[2] = { { .fd = sub, .events = lost ? 0 : POLLIN }, { .fd = *pidfd, .events = POLLIN } };
		int left = lz_remaining_ms(deadline);
		int n = poll(p, 2, left);
		if (n < 0 && errno != EINTR)
			return lz_err_set(err, errno, "delete the veth %s: poll: %s", name, strerror(errno));
		if (n == 0 && left == 0) {
			lz_kill_reap(pidfd);
			return lz_err_set(err, ETIMEDOUT, "delete the veth %s: the kernel did not within %d ms", name,
					  LZ_PEERLINK_REMOVE_MS);
		}
		if (!lost && (p[0].revents & (POLLIN | POLLERR))) {
			int r = lz_rtnl_drain(sub, is_dellink, &ifindex);
			if (r == 1)
				return 0;
			lost = r < 0; /* the child's end still says */
		}
		if (p[1].revents & POLLIN) {
			siginfo_t info;
			int r = lz_reap(*pidfd, -1, &info);
			lz_close_fdp(pidfd);
			if (r < 0)
				return lz_err_set(err, -r, "delete the veth %s: %s", name, strerror(-r));
			if (info.si_code != CLD_EXITED || info.si_status != 0)
				return lz_err_set(err, info.si_code == CLD_EXITED ? info.si_status : EIO,
						  "delete the veth %s: %s", name,
						  info.si_code == CLD_EXITED ? strerror(info.si_status) : "killed");
			return 0;
		}
	}
}

int lz_peerlink_remove(const struct lz_peerlink_shape *shape, int *ret_release, struct lz_err *err)
{
	_cleanup_rtnl_ struct lz_rtnl nl = { 0 };
	struct lz_peerlink_shape now;
	if (ret_release)
		*ret_release = -EBADF;
	int r = lz_rtnl_open(&nl, "peer link cleanup", err);
	if (r < 0)
		return r;
	/* Subscribed before the request: the notification cannot come first. */
	_cleanup_close_ int sub = lz_rtnl_subscribe(RTMGRP_LINK);
	if (sub < 0)
		return lz_err_set(err, -sub, "%s cleanup: link notifications: %s", shape->name, strerror(-sub));
	if ((r = read_shape(shape->ifindex, NULL, &now)) < 0)
		return lz_err_set(err, -r, "%s cleanup: reading link %d: %s", shape->name, shape->ifindex, strerror(-r));
	if (!same_shape(&now, shape))
		return lz_err_set(err, ESTALE, "%s cleanup: link %d ('%s') no longer matches its creation record; "
					       "not deleted", shape->name, shape->ifindex, now.name);
	_cleanup_close_ int pidfd = -EBADF;
	pid_t pid = lz_clone_pidfd(0, &pidfd);
	if (pid < 0)
		return lz_err_set(err, -pid, "delete the veth %s: fork: %s", shape->name, strerror(-pid));
	if (pid == 0)
		delete_link(&nl, shape->ifindex);
	if ((r = await_unregistered(sub, &pidfd, shape->ifindex, err, shape->name)) < 0)
		return r;
	if (read_shape(shape->ifindex, NULL, &now) != -ENODEV) {
		lz_kill_reap(&pidfd);
		return lz_err_set(err, EEXIST, "%s cleanup: link %d is still present", shape->name, shape->ifindex);
	}
	if (ret_release)
		*ret_release = TAKE_FD(pidfd);
	else
		lz_kill_reap(&pidfd); /* waits for the kernel's release */
	return 0;
}
