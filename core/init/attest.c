#include "init/attest.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "net/netpolicy.h"

#define NL_BUF 16384

static int nl_open(void)
{
	int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	struct timeval tv = { .tv_sec = 2 };
	if (s >= 0)
		(void)setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return s;
}

/* Sends one request: hdr then body (already laid out after it in buf). */
static int nl_send(int s, struct nlmsghdr *h)
{
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	ssize_t n = sendto(s, h, h->nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel));
	return n == (ssize_t)h->nlmsg_len ? 0 : -EIO;
}

/* Runs fn on every message of a dump until NLMSG_DONE: 0 or -errno. */
static int nl_dump(int s, uint16_t type, const void *body, size_t len,
		   int (*fn)(const struct nlmsghdr *h, void *arg), void *arg)
{
	static uint32_t seq = 100;
	union {
		struct nlmsghdr h;
		char b[NL_BUF];
	} req = { 0 }, resp;
	req.h.nlmsg_len = (uint32_t)NLMSG_LENGTH(len);
	req.h.nlmsg_type = type;
	req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req.h.nlmsg_seq = ++seq;
	memcpy(NLMSG_DATA(&req.h), body, len);
	if (nl_send(s, &req.h) < 0)
		return -EIO;
	for (;;) {
		ssize_t n = recv(s, resp.b, sizeof(resp.b), 0);
		if (n < 0)
			return -errno;
		size_t left = (size_t)n;
		for (struct nlmsghdr *h = &resp.h; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
			if (h->nlmsg_seq != seq)
				continue;
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);
				return e->error ? e->error : -EPROTO;
			}
			int r = fn(h, arg);
			if (r < 0)
				return r;
		}
	}
}

/* Sends a change request and returns the kernel's verdict: 0 or -errno. */
static int nl_change(int s, struct nlmsghdr *h)
{
	static uint32_t seq = 1000;
	union {
		struct nlmsghdr h;
		char b[4096];
	} resp;
	h->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	h->nlmsg_seq = ++seq;
	if (nl_send(s, h) < 0)
		return -EIO;
	for (;;) {
		ssize_t n = recv(s, resp.b, sizeof(resp.b), 0);
		if (n < 0)
			return -errno;
		size_t left = (size_t)n;
		for (struct nlmsghdr *m = &resp.h; NLMSG_OK(m, left); m = NLMSG_NEXT(m, left))
			if (m->nlmsg_seq == seq && m->nlmsg_type == NLMSG_ERROR)
				return ((const struct nlmsgerr *)NLMSG_DATA(m))->error;
	}
}

/* ---- IPv6: nothing but loopback ------------------------------------------ */

struct v6 {
	int lo;
	bool foreign;
};

static bool is_loopback6(const uint8_t *a)
{
	static const uint8_t one[16] = { [15] = 1 };
	return memcmp(a, one, 16) == 0;
}

static int on_addr6(const struct nlmsghdr *h, void *arg)
{
	struct v6 *v = arg;
	if (h->nlmsg_type != RTM_NEWADDR)
		return 0;
	const struct ifaddrmsg *ifa = NLMSG_DATA(h);
	if (ifa->ifa_family != AF_INET6)
		return 0;
	int len = (int)IFA_PAYLOAD(h);
	bool loopback = false;
	for (const struct rtattr *a = IFA_RTA(ifa); RTA_OK(a, len); a = RTA_NEXT(a, len))
		if ((a->rta_type == IFA_ADDRESS || a->rta_type == IFA_LOCAL) && RTA_PAYLOAD(a) == 16)
			loopback = is_loopback6(RTA_DATA(a));
	if (!loopback || (int)ifa->ifa_index != v->lo)
		v->foreign = true;
	return 0;
}

static int on_route6(const struct nlmsghdr *h, void *arg)
{
	struct v6 *v = arg;
	if (h->nlmsg_type != RTM_NEWROUTE)
		return 0;
	const struct rtmsg *rtm = NLMSG_DATA(h);
	if (rtm->rtm_family != AF_INET6 || rtm->rtm_type != RTN_UNICAST)
		return 0; /* local, unreachable, ...: nothing is forwarded */
	int len = (int)RTM_PAYLOAD(h), oif = 0;
	for (const struct rtattr *a = RTM_RTA(rtm); RTA_OK(a, len); a = RTA_NEXT(a, len))
		if (a->rta_type == RTA_OIF && RTA_PAYLOAD(a) == 4)
			memcpy(&oif, RTA_DATA(a), 4);
	if (oif != v->lo)
		v->foreign = true;
	return 0;
}

static bool ipv6_absent(int s)
{
	struct v6 v = { .lo = (int)if_nametoindex("lo") };
	struct ifaddrmsg ifa = { .ifa_family = AF_INET6 };
	struct rtmsg rtm = { .rtm_family = AF_INET6 };
	/* A dump that fails proves nothing: fail closed. */
	if (v.lo == 0 || nl_dump(s, RTM_GETADDR, &ifa, sizeof(ifa), on_addr6, &v) < 0 ||
	    nl_dump(s, RTM_GETROUTE, &rtm, sizeof(rtm), on_route6, &v) < 0)
		return false;
	return !v.foreign;
}

/* ---- capability and route mutation ---------------------------------------- */

static bool netadmin_empty(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	if (syscall(SYS_capget, &h, d) < 0)
		return false;
	uint32_t bit = CAP_TO_MASK(CAP_NET_ADMIN);
	size_t i = CAP_TO_INDEX(CAP_NET_ADMIN);
	if ((d[i].effective | d[i].permitted | d[i].inheritable) & bit)
		return false;
	if (prctl(PR_CAPBSET_READ, CAP_NET_ADMIN, 0, 0, 0) != 0)
		return false;
	/* gVisor has no ambient set (EINVAL): then there is nothing in it. */
	int ambient = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_NET_ADMIN, 0, 0);
	return ambient == 0 || (ambient < 0 && errno == EINVAL);
}

static int route_change(int s, uint16_t type, uint16_t flags, uint32_t dst, int oif)
{
	union {
		struct nlmsghdr h;
		char b[256];
	} req = { 0 };
	struct rtmsg *rtm = NLMSG_DATA(&req.h);
	*rtm = (struct rtmsg){ .rtm_family = AF_INET, .rtm_dst_len = 32, .rtm_table = RT_TABLE_MAIN,
			       .rtm_protocol = RTPROT_STATIC, .rtm_scope = RT_SCOPE_LINK, .rtm_type = RTN_UNICAST };
	req.h.nlmsg_len = (uint32_t)NLMSG_LENGTH(sizeof(*rtm));
	req.h.nlmsg_type = type;
	req.h.nlmsg_flags = flags;
	struct rtattr *a = (struct rtattr *)((char *)&req.h + NLMSG_ALIGN(req.h.nlmsg_len));
	a->rta_type = RTA_DST;
	a->rta_len = RTA_LENGTH(4);
	uint32_t be = htonl(dst);
	memcpy(RTA_DATA(a), &be, 4);
	req.h.nlmsg_len = NLMSG_ALIGN(req.h.nlmsg_len) + RTA_ALIGN(a->rta_len);
	a = (struct rtattr *)((char *)&req.h + req.h.nlmsg_len);
	a->rta_type = RTA_OIF;
	a->rta_len = RTA_LENGTH(4);
	memcpy(RTA_DATA(a), &oif, 4);
	req.h.nlmsg_len += RTA_ALIGN(a->rta_len);
	return nl_change(s, &req.h);
}

/* Refused for want of authority: another error (a link that is down or
 * missing, a route that is not there, a request found malformed) says
 * nothing about what the init may do. */
static bool refused(int r)
{
	return r == -EPERM || r == -EACCES;
}

/* Adding a route to a documentation address and deleting the synthetic DNS
 * helper route must both be refused. */
static bool route_mutation_refused(int s)
{
	int lo = (int)if_nametoindex("lo"), tap = (int)if_nametoindex("tap0");
	return lo > 0 && tap > 0 &&
	       refused(route_change(s, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, 0xc0000201u /* 192.0.2.1 */, lo)) &&
	       refused(route_change(s, RTM_DELROUTE, 0, LZ_NET_DNS, tap));
}

void lz_init_attest(const uint8_t challenge[LZ_CANARY_CHALLENGE_LEN], struct lz_netattest *ret)
{
	struct lz_netattest a = { 0 };
	uint8_t other[LZ_CANARY_CHALLENGE_LEN], ignored[LZ_CANARY_CHALLENGE_LEN];

	a.tap0_ifindex = if_nametoindex("tap0");
	a.tap0_present = a.tap0_ifindex != 0;
	if (lz_canary_probe(LZ_NET_CANARY_ALLOWED, NULL, challenge, a.allowed_echo, LZ_CANARY_PROBE_MS) == 0)
		a.allowed_answered = true;
	else
		memset(a.allowed_echo, 0, sizeof(a.allowed_echo));
	/* Any answer from the denied endpoint is a failure, right or wrong. */
	if (getrandom(other, sizeof(other), 0) == (ssize_t)sizeof(other))
		a.denied_canary_unreachable =
			lz_canary_no_answer(lz_canary_probe(LZ_NET_CANARY_DENIED, NULL, other, ignored, LZ_CANARY_PROBE_MS));
	a.netadmin_caps_empty = netadmin_empty();
	int s = nl_open();
	if (s >= 0) {
		a.ipv6_absent = ipv6_absent(s);
		a.route_mutation_refused = route_mutation_refused(s);
		close(s);
	}
	*ret = a;
}
