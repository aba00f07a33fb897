#include "net/canary.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>

#include "net/netpolicy.h"
#include "net/rtnl.h"
#include "proc/spawn.h"
#include "util/cleanup.h"

#define ANSWER_TAG "lazaret-canary-v1"

int lz_canary_answer(const uint8_t key[LZ_CANARY_KEY_LEN], uint64_t generation, uint32_t endpoint,
		     const uint8_t challenge[LZ_CANARY_CHALLENGE_LEN], uint8_t out[LZ_CANARY_CHALLENGE_LEN])
{
	uint8_t msg[sizeof(ANSWER_TAG) - 1 + 8 + 4 + LZ_CANARY_CHALLENGE_LEN], *p = msg;
	memcpy(p, ANSWER_TAG, sizeof(ANSWER_TAG) - 1);
	p += sizeof(ANSWER_TAG) - 1;
	for (int i = 7; i >= 0; i--)
		*p++ = (uint8_t)(generation >> (8 * i));
	for (int i = 3; i >= 0; i--)
		*p++ = (uint8_t)(endpoint >> (8 * i));
	memcpy(p, challenge, LZ_CANARY_CHALLENGE_LEN);
	unsigned len = 0;
	if (!HMAC(EVP_sha256(), key, LZ_CANARY_KEY_LEN, msg, sizeof(msg), out, &len) ||
	    len != LZ_CANARY_CHALLENGE_LEN)
		return -EIO;
	return 0;
}

/* ---- rtnetlink ------------------------------------------------------------ */

/* Both ends' interface indexes, each in a fresh namespace (lo and at most
 * tap0 there). The kernel turns a veth end's carrier on at once only when
 * its index differs from its peer's; with both ends at index 2 (the first
 * after lo in each namespace) the link watcher holds the event back for up
 * to a second, measured as a one-second launch (issue 15). The kernel
 * takes the peer's index only when the first end's is given too. */
#define CANARY_IFINDEX 8
#define CANARY_PEER_IFINDEX 9

static int newlink_veth(struct lz_rtnl *nl, int peer_netns_fd)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_index = CANARY_IFINDEX };
	struct ifinfomsg peer_ifi = { .ifi_family = AF_UNSPEC, .ifi_index = CANARY_PEER_IFINDEX };
	struct nl_msg *msg = nlmsg_alloc_simple(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL);
	struct nlattr *info, *data, *peer;
	if (!msg || nlmsg_append(msg, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0 ||
	    nla_put_string(msg, IFLA_IFNAME, LZ_CANARY_DEV) < 0 || !(info = nla_nest_start(msg, IFLA_LINKINFO)) ||
	    nla_put_string(msg, IFLA_INFO_KIND, "veth") < 0 || !(data = nla_nest_start(msg, IFLA_INFO_DATA)) ||
	    !(peer = nla_nest_start(msg, VETH_INFO_PEER)) ||
	    nlmsg_append(msg, &peer_ifi, sizeof(peer_ifi), NLMSG_ALIGNTO) < 0 ||
	    nla_put_string(msg, IFLA_IFNAME, LZ_CANARY_PEER_DEV) < 0 ||
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
	int64_t deadline = lz_now_ms() + LZ_CANARY_PROBE_MS;
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
	struct lz_canary_link link;
	bool got;
};

static int on_shape(const struct nlmsghdr *h, void *arg)
{
	struct shape_reply *s = arg;
	struct lz_canary_link k = { .version = LZ_CANARY_LINK_VERSION, .peer_netnsid = -1 };
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
static int read_shape(int index, const char *name, struct lz_canary_link *ret)
{
	_cleanup_rtnl_ struct lz_rtnl own = { 0 };
	struct lz_rtnl *nl = &own;
	struct lz_err ignored;
	int r = lz_rtnl_open(nl, "canary link", &ignored);
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

static bool same_shape(const struct lz_canary_link *a, const struct lz_canary_link *b)
{
	return a->version == b->version && a->ifindex == b->ifindex && strcmp(a->name, b->name) == 0 &&
	       strcmp(a->kind, b->kind) == 0 && memcmp(a->hwaddr, b->hwaddr, sizeof(a->hwaddr)) == 0 &&
	       a->peer_ifindex == b->peer_ifindex && a->peer_netnsid == b->peer_netnsid;
}

/* ---- the responder -------------------------------------------------------- */

static void serve_one(int listener, const uint8_t *key, uint64_t generation)
{
	int c = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0)
		return;
	struct sockaddr_in local;
	socklen_t len = sizeof(local);
	uint8_t challenge[LZ_CANARY_CHALLENGE_LEN], answer[LZ_CANARY_CHALLENGE_LEN];
	size_t got = 0;
	struct timeval tv = { .tv_sec = LZ_CANARY_PROBE_MS / 1000 };
	(void)setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	while (got < sizeof(challenge)) {
		ssize_t n = recv(c, challenge + got, sizeof(challenge) - got, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	/* The endpoint is the address the client reached, not a claim. */
	if (got == sizeof(challenge) && getsockname(c, (struct sockaddr *)&local, &len) == 0 &&
	    lz_canary_answer(key, generation, ntohl(local.sin_addr.s_addr), challenge, answer) == 0)
		(void)send(c, answer, sizeof(answer), MSG_NOSIGNAL);
	close(c);
}

static _Noreturn void responder(int l2, int l3, const uint8_t *key, uint64_t generation)
{
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Only the two listeners: no descriptor of the RS survives here. */
	if (dup2(l2, 3) < 0 || dup2(l3, 4) < 0)
		_exit(1);
	(void)syscall(SYS_close_range, 5, ~0u, 0);
	for (;;) {
		struct pollfd p[2] = { { .fd = 3, .events = POLLIN }, { .fd = 4, .events = POLLIN } };
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			_exit(1);
		for (int i = 0; i < 2; i++)
			if (p[i].revents & POLLIN)
				serve_one(p[i].fd, key, generation);
	}
}

static int listen_on(uint32_t addr, int *ret)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(LZ_CANARY_PORT),
				  .sin_addr.s_addr = htonl(addr) };
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 8) < 0) {
		int e = errno;
		if (s >= 0)
			close(s);
		return -e;
	}
	*ret = s;
	return 0;
}

/* ---- create, prove, remove ------------------------------------------------ */

/* In the peer namespace: its end up with both endpoints, and their
 * listeners (a socket stays in the namespace it was created in). */
static int build_peer(int *l2, int *l3, struct lz_err *err)
{
	_cleanup_rtnl_ struct lz_rtnl nl = { 0 };
	int r = lz_rtnl_open(&nl, "canary peer", err);
	if (r < 0)
		return r;
	if ((r = lz_rtnl_link_up(&nl, "lo")) < 0 || (r = lz_rtnl_link_up(&nl, LZ_CANARY_PEER_DEV)) < 0 ||
	    (r = add_addr(&nl, LZ_CANARY_PEER_DEV, LZ_NET_CANARY_ALLOWED, LZ_NET_CANARY.len)) < 0 ||
	    (r = add_addr(&nl, LZ_CANARY_PEER_DEV, LZ_NET_CANARY_DENIED, LZ_NET_CANARY.len)) < 0)
		return lz_err_set(err, -r, "canary peer %s: %s%s%s", LZ_CANARY_PEER_DEV, strerror(-r),
				  nl.kmsg[0] ? ": " : "", nl.kmsg);
	if ((r = listen_on(LZ_NET_CANARY_ALLOWED, l2)) < 0 || (r = listen_on(LZ_NET_CANARY_DENIED, l3)) < 0)
		return lz_err_set(err, -r, "canary listener: %s", strerror(-r));
	return 0;
}

static int build(const uint8_t *key, uint64_t generation, struct lz_canary *c, int self, struct lz_err *err)
{
	_cleanup_close_ int l2 = -EBADF, l3 = -EBADF;
	_cleanup_rtnl_ struct lz_rtnl nl = { 0 };
	int r;
	/* A fresh namespace for the peer, then back: setns needs no thread. */
	if (unshare(CLONE_NEWNET) < 0)
		return lz_err_set(err, errno, "canary peer namespace: %s", strerror(errno));
	c->peer_netns_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int e = errno;
	if (setns(self, CLONE_NEWNET) < 0)
		return lz_err_set(err, errno, "return to the enforcement namespace: %s", strerror(errno));
	if (c->peer_netns_fd < 0)
		return lz_err_set(err, e, "canary peer namespace: %s", strerror(e));

	if ((r = lz_rtnl_open(&nl, "canary veth", err)) < 0)
		return r;
	if ((r = newlink_veth(&nl, c->peer_netns_fd)) < 0)
		return lz_err_set(err, -r, "create the canary veth %s: %s%s%s", LZ_CANARY_DEV, strerror(-r),
				  nl.kmsg[0] ? ": " : "", nl.kmsg);
	if (setns(c->peer_netns_fd, CLONE_NEWNET) < 0)
		return lz_err_set(err, errno, "enter the canary peer namespace: %s", strerror(errno));
	r = build_peer(&l2, &l3, err);
	if (setns(self, CLONE_NEWNET) < 0)
		return lz_err_set(err, errno, "return to the enforcement namespace: %s", strerror(errno));
	if (r < 0)
		return r;

	pid_t pid = fork();
	if (pid < 0)
		return lz_err_set(err, errno, "fork the canary responder: %s", strerror(errno));
	if (pid == 0)
		responder(l2, l3, key, generation);
	c->responder_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (c->responder_pidfd < 0) {
		e = errno;
		kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
		return lz_err_set(err, e, "canary responder pidfd: %s", strerror(e));
	}

	/* A /32: no connected route to the canary network (header). */
	if ((r = lz_rtnl_link_up(&nl, LZ_CANARY_DEV)) < 0 ||
	    (r = add_addr(&nl, LZ_CANARY_DEV, LZ_NET_ENFORCEMENT, 32)) < 0 || (r = wait_running(LZ_CANARY_DEV)) < 0)
		return lz_err_set(err, -r, "canary %s: %s%s%s", LZ_CANARY_DEV, strerror(-r), nl.kmsg[0] ? ": " : "",
				  nl.kmsg);
	/* The kernel turns each end's carrier on separately (the link
	 * watcher may hold one back for up to a second): the answers leave
	 * through the peer. */
	if (setns(c->peer_netns_fd, CLONE_NEWNET) < 0)
		return lz_err_set(err, errno, "enter the canary peer namespace: %s", strerror(errno));
	r = wait_running(LZ_CANARY_PEER_DEV);
	if (setns(self, CLONE_NEWNET) < 0)
		return lz_err_set(err, errno, "return to the enforcement namespace: %s", strerror(errno));
	if (r < 0)
		return lz_err_set(err, -r, "canary %s: %s", LZ_CANARY_PEER_DEV, strerror(-r));
	if ((r = read_shape(0, LZ_CANARY_DEV, &c->link)) < 0)
		return lz_err_set(err, -r, "record the canary veth: %s", strerror(-r));
	if (strcmp(c->link.kind, "veth") != 0 || c->link.peer_netnsid < 0)
		return lz_err_set(err, EPROTO, "the canary veth reads back as kind '%s', peer namespace ID %d",
				  c->link.kind, (int)c->link.peer_netnsid);
	return 0;
}

int lz_canary_create(const uint8_t key[LZ_CANARY_KEY_LEN], uint64_t generation, struct lz_canary *c,
		     struct lz_err *err)
{
	*c = LZ_CANARY_INIT;
	_cleanup_close_ int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0)
		return lz_err_set(err, errno, "enforcement namespace: %s", strerror(errno));
	int r = build(key, generation, c, self, err);
	if (r < 0) {
		if (c->link.ifindex > 0) {
			struct lz_err ignored;
			(void)lz_canary_remove(c, &ignored);
		}
		lz_canary_abandon(c);
	}
	return r;
}

int lz_canary_prove_live(const uint8_t key[LZ_CANARY_KEY_LEN], uint64_t generation, struct lz_err *err)
{
	static const uint32_t endpoints[] = { LZ_NET_CANARY_ALLOWED, LZ_NET_CANARY_DENIED };
	for (size_t i = 0; i < LZ_ARRAY_SIZE(endpoints); i++) {
		uint8_t challenge[LZ_CANARY_CHALLENGE_LEN], got[LZ_CANARY_CHALLENGE_LEN], want[LZ_CANARY_CHALLENGE_LEN];
		char text[INET_ADDRSTRLEN];
		struct in_addr in = { htonl(endpoints[i]) };
		inet_ntop(AF_INET, &in, text, sizeof(text));
		if (getrandom(challenge, sizeof(challenge), 0) != (ssize_t)sizeof(challenge))
			return lz_err_set(err, EIO, "canary challenge: %s", strerror(errno));
		int r = lz_canary_probe(endpoints[i], LZ_CANARY_DEV, challenge, got, LZ_CANARY_PROBE_MS);
		if (r < 0)
			return lz_err_set(err, EPERM, "canary endpoint %s did not answer: %s", text, strerror(-r));
		if (lz_canary_answer(key, generation, endpoints[i], challenge, want) < 0)
			return lz_err_set(err, EIO, "canary answer: OpenSSL failed");
		if (CRYPTO_memcmp(got, want, sizeof(want)) != 0)
			return lz_err_set(err, EPERM, "canary endpoint %s gave a wrong answer", text);
	}
	return 0;
}

int lz_canary_remove(struct lz_canary *c, struct lz_err *err)
{
	_cleanup_rtnl_ struct lz_rtnl nl = { 0 };
	struct lz_canary_link now;
	int r = lz_rtnl_open(&nl, "canary cleanup", err);
	if (r < 0)
		goto out;
	if ((r = read_shape(c->link.ifindex, NULL, &now)) < 0) {
		lz_err_set(err, -r, "canary cleanup: reading link %d: %s", c->link.ifindex, strerror(-r));
		goto out;
	}
	if (!same_shape(&now, &c->link)) {
		r = lz_err_set(err, ESTALE, "canary cleanup: link %d ('%s') no longer matches its creation record; "
					    "not deleted", c->link.ifindex, now.name);
		goto out;
	}
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_index = c->link.ifindex };
	struct nl_msg *msg = nlmsg_alloc_simple(RTM_DELLINK, NLM_F_REQUEST | NLM_F_ACK);
	if (!msg || nlmsg_append(msg, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0) {
		nlmsg_free(msg);
		r = lz_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	if ((r = lz_rtnl_transact(&nl, msg)) < 0) {
		lz_err_set(err, -r, "delete the canary veth: %s%s%s", strerror(-r), nl.kmsg[0] ? ": " : "", nl.kmsg);
		goto out;
	}
	r = read_shape(c->link.ifindex, NULL, &now);
	if (r != -ENODEV) {
		r = lz_err_set(err, EEXIST, "canary cleanup: link %d is still present", c->link.ifindex);
		goto out;
	}
	r = 0;
out:
	lz_canary_abandon(c);
	return r;
}

void lz_canary_abandon(struct lz_canary *c)
{
	if (c->responder_pidfd >= 0) {
		(void)syscall(SYS_pidfd_send_signal, c->responder_pidfd, SIGKILL, NULL, 0);
		siginfo_t info;
		(void)waitid(P_PIDFD, (id_t)c->responder_pidfd, &info, WEXITED);
	}
	lz_close_fdp(&c->responder_pidfd);
	lz_close_fdp(&c->peer_netns_fd);
}
