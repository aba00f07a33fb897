/* Route policy of the enforcement network namespace (spec 3.7 "Default
 * policy and deny representation", SR-6): plan, loopback-deny prefixes and
 * match (core/net/netroutes.c), install and delete (netroutes_install.c),
 * observe and lookup (netroutes_observe.c), IPv6 disable and check
 * (netroutes_ipv6.c).
 *
 * Kernel tests fork a child that unshares a fresh network namespace, brings
 * lo up and creates "tap0" as one end of a veth pair (the peer "tap0p" stays
 * in the namespace; dummy links need a module that may be absent) holding
 * 10.137.54.100/24. The child runs the steps and reports the first failed
 * check through a pipe; cmocka runs only in the parent. They need root (or
 * root in a user namespace that owns the network namespace) and are skipped
 * otherwise. Foreign routes ("by hand") are added with libnl-route objects,
 * an implementation independent of the module under test. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>

#include "net/netpolicy.h"
#include "net/netroutes.h"
#include "net/netroutes_install.h"
#include "net/netroutes_ipv6.h"
#include "net/netroutes_observe.h"

/* Both headers together, and the kinds convert by value. */
_Static_assert(LZ_NETROUTES_ALLOW == (int)LZ_NETROUTE_ALLOW && LZ_NETROUTES_DENY == (int)LZ_NETROUTE_DENY &&
		       LZ_NETROUTES_HELPER == (int)LZ_NETROUTE_HELPER &&
		       LZ_NETROUTES_CANARY_ALLOW == (int)LZ_NETROUTE_CANARY_ALLOW &&
		       LZ_NETROUTES_CANARY_DENY == (int)LZ_NETROUTE_CANARY_DENY,
	       "netroutes kinds follow netpolicy's v1 discriminants");

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
/* The children end with _exit, which skips LeakSanitizer's exit check: run
 * it explicitly so leaks on the kernel paths are caught too. */
#define CHILD_LEAKS() __lsan_do_recoverable_leak_check()
#else
#define CHILD_LEAKS() 0
#endif

#define LZ_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define IP(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (uint32_t)(d))
#define P(a, b, c, d, n) ((struct lz_prefix){ IP(a, b, c, d), (n) })
#define GW IP(10, 137, 54, 2)

#define ALLOW LZ_NETROUTES_ALLOW
#define DENY LZ_NETROUTES_DENY
#define HELPER LZ_NETROUTES_HELPER
#define CANARY_ALLOW LZ_NETROUTES_CANARY_ALLOW
#define CANARY_DENY LZ_NETROUTES_CANARY_DENY

/* Default-like derived policy: IPv4 allowed, RFC 1918 denied, a configured
 * allow inside it, the helper routes and the canary pair. */
static const struct lz_netroutes_entry default_policy[] = {
	{ P(0, 0, 0, 0, 0), ALLOW },
	{ P(10, 0, 0, 0, 8), DENY },
	{ P(172, 16, 0, 0, 12), DENY },
	{ P(192, 168, 0, 0, 16), DENY },
	{ P(10, 250, 0, 0, 24), ALLOW },
	{ P(10, 137, 54, 0, 24), HELPER },
	{ P(10, 137, 54, 2, 32), HELPER },
	{ P(10, 137, 54, 3, 32), HELPER },
	{ P(10, 137, 55, 0, 29), CANARY_DENY },
	{ P(10, 137, 55, 2, 32), CANARY_ALLOW },
};
#define N_DEFAULT LZ_ARRAY_SIZE(default_policy)

/* What install of default_policy must leave, in lz_kroute_compare order. */
static const char *const default_observed[] = {
	"unicast 0.0.0.0/0 via 10.137.54.2 dev tap0 table main",
	"unicast 10.0.0.0/8 dev lo scope link table main",
	"unicast 10.137.54.0/24 dev tap0 scope link table main",
	"unicast 10.137.54.2/32 dev tap0 scope link table main",
	"unicast 10.137.54.3/32 dev tap0 scope link table main",
	"unicast 10.137.55.0/29 dev lo scope link table main",
	"unicast 10.137.55.2/32 dev lzcanary0 scope link table main",
	"unicast 10.250.0.0/24 via 10.137.54.2 dev tap0 table main",
	"unicast 172.16.0.0/12 dev lo scope link table main",
	"unicast 192.168.0.0/16 dev lo scope link table main",
};

/* ---- child harness ------------------------------------------------------ */

struct report {
	int line; /* 0: passed */
	char msg[1536];
};

struct netns_opts {
	bool keep_ipv6;     /* leave IPv6 enabled (default: disabled first) */
	bool no_tap;        /* only lo */
	bool noprefixroute; /* tap0 address without the kernel's connected route */
	bool lo_down;
};

static struct report *rep;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			rep->line = __LINE__;                                  \
			snprintf(rep->msg, sizeof(rep->msg), __VA_ARGS__);     \
			return -1;                                             \
		}                                                              \
	} while (0)

/* Calls an lz_ function taking a trailing struct lz_err *. */
#define CHECK_OK(call_with_err)                                                           \
	do {                                                                              \
		struct lz_err e_ = { 0 };                                                 \
		struct lz_err *const E = &e_;                                             \
		int r_ = (call_with_err);                                                 \
		CHECK(r_ >= 0, "%s = %d: %s", #call_with_err, r_, e_.msg);               \
	} while (0)

static int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t w = write(fd, text, strlen(text));
	int saved = errno;
	close(fd);
	return w == (ssize_t)strlen(text) ? 0 : -saved;
}

static struct nl_sock *nl_open_route(void)
{
	struct nl_sock *sk = nl_socket_alloc();
	if (sk && nl_connect(sk, NETLINK_ROUTE) < 0) {
		nl_socket_free(sk);
		return NULL;
	}
	return sk;
}

static int ifindex_of(struct nl_sock *sk, const char *name)
{
	struct rtnl_link *link = NULL;
	if (rtnl_link_get_kernel(sk, 0, name, &link) < 0)
		return 0;
	int i = rtnl_link_get_ifindex(link);
	rtnl_link_put(link);
	return i;
}

static int link_set_up(struct nl_sock *sk, const char *name, bool up)
{
	struct rtnl_link *link = NULL, *change = rtnl_link_alloc();
	int r = rtnl_link_get_kernel(sk, 0, name, &link);
	if (r >= 0) {
		if (up)
			rtnl_link_set_flags(change, IFF_UP);
		else
			rtnl_link_unset_flags(change, IFF_UP);
		r = rtnl_link_change(sk, link, change, 0);
	}
	rtnl_link_put(link);
	rtnl_link_put(change);
	return r;
}

static int add_veth(struct nl_sock *sk, const char *name, const char *peer)
{
	int r = rtnl_link_veth_add(sk, name, peer, getpid());
	if (r >= 0)
		r = link_set_up(sk, peer, true);
	if (r >= 0)
		r = link_set_up(sk, name, true);
	return r;
}

static int addr_add(struct nl_sock *sk, const char *dev, const char *cidr, unsigned flags)
{
	struct nl_addr *local = NULL;
	struct rtnl_addr *a = rtnl_addr_alloc();
	int r = nl_addr_parse(cidr, AF_INET, &local);
	if (r >= 0) {
		rtnl_addr_set_ifindex(a, ifindex_of(sk, dev));
		r = rtnl_addr_set_local(a, local);
	}
	if (r >= 0) {
		rtnl_addr_set_flags(a, flags);
		r = rtnl_addr_add(sk, a, 0);
	}
	nl_addr_put(local);
	rtnl_addr_put(a);
	return r;
}

/* "ip route add <type> <dst> [via gw] [dev dev] table <table> metric <m>"
 * through libnl-route. */
static int route_add_by_hand(uint8_t type, const char *dst, const char *gw, const char *dev, uint32_t table,
			     uint32_t metric, uint8_t protocol)
{
	struct nl_sock *sk = nl_open_route();
	struct rtnl_route *rt = rtnl_route_alloc();
	struct nl_addr *d = NULL, *g = NULL;
	int r = sk ? nl_addr_parse(dst, AF_INET, &d) : -NLE_BAD_SOCK;
	if (r >= 0) {
		rtnl_route_set_family(rt, AF_INET);
		rtnl_route_set_type(rt, type);
		rtnl_route_set_table(rt, table);
		rtnl_route_set_priority(rt, metric);
		rtnl_route_set_protocol(rt, protocol);
		r = rtnl_route_set_dst(rt, d);
	}
	if (r >= 0 && (gw || dev)) {
		struct rtnl_nexthop *nh = rtnl_route_nh_alloc();
		if (dev)
			rtnl_route_nh_set_ifindex(nh, ifindex_of(sk, dev));
		if (gw && (r = nl_addr_parse(gw, AF_INET, &g)) >= 0)
			rtnl_route_nh_set_gateway(nh, g);
		rtnl_route_add_nexthop(rt, nh);
	}
	if (r >= 0)
		r = rtnl_route_add(sk, rt, NLM_F_CREATE | NLM_F_EXCL);
	nl_addr_put(d);
	nl_addr_put(g);
	rtnl_route_put(rt);
	if (sk)
		nl_socket_free(sk);
	return r;
}

static int netns_setup(const struct netns_opts *o)
{
	CHECK(unshare(CLONE_NEWNET) == 0, "unshare(CLONE_NEWNET): %s", strerror(errno));
	if (!o->keep_ipv6) {
		CHECK(write_text("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1") == 0, "default/disable_ipv6");
		CHECK(write_text("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1") == 0, "all/disable_ipv6");
	}
	struct nl_sock *sk = nl_open_route();
	CHECK(sk, "rtnetlink socket");
	int r = o->lo_down ? 0 : link_set_up(sk, "lo", true);
	if (r >= 0 && !o->no_tap)
		r = add_veth(sk, "tap0", "tap0p");
	if (r >= 0 && !o->no_tap)
		r = add_veth(sk, "lzcanary0", "lzcanary0p");
	if (r >= 0 && !o->no_tap)
		r = addr_add(sk, "tap0", "10.137.54.100/24", o->noprefixroute ? IFA_F_NOPREFIXROUTE : 0);
	nl_socket_free(sk);
	CHECK(r >= 0, "namespace setup: %s", nl_geterror(r));
	return 0;
}

static void run_in_netns(int (*body)(void), const struct netns_opts *opts)
{
	static const struct netns_opts defaults = { 0 };
	int p[2];

	if (geteuid() != 0)
		skip();
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		static struct report r;
		close(p[0]);
		rep = &r;
		if (netns_setup(opts ? opts : &defaults) == 0 && body() == 0)
			r.line = 0;
		if (r.line == 0 && CHILD_LEAKS()) {
			r.line = __LINE__;
			snprintf(r.msg, sizeof(r.msg), "LeakSanitizer found leaks (see stderr)");
		}
		ssize_t w = write(p[1], &r, sizeof(r));
		_exit(w == (ssize_t)sizeof(r) ? 0 : 1);
	}
	close(p[1]);
	struct report r;
	size_t got = 0;
	while (got < sizeof(r)) {
		ssize_t k = read(p[0], (char *)&r + got, sizeof(r) - got);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	close(p[0]);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (got != sizeof(r))
		fail_msg("child ended without a report (status 0x%x)", status);
	if (r.line)
		fail_msg("child check at line %d failed: %s", r.line, r.msg);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ---- child steps -------------------------------------------------------- */

static int install_default(void)
{
	CHECK_OK(lz_netroutes_install(default_policy, N_DEFAULT, "tap0", GW, E));
	return 0;
}

/* observed must read exactly as the lines in want (already sorted). */
static int expect_observed(const char *const *want, size_t n_want)
{
	struct lz_kroute *obs = NULL;
	size_t n = 0;
	char text[LZ_KROUTE_STR_MAX];

	CHECK_OK(lz_netroutes_observe(&obs, &n, E));
	for (size_t i = 0; i < n && i < n_want; i++) {
		lz_kroute_format(&obs[i], text);
		if (strcmp(text, want[i]) != 0) {
			free(obs);
			CHECK(false, "observed[%zu] '%s', want '%s'", i, text, want[i]);
		}
	}
	free(obs);
	CHECK(n == n_want, "observed %zu routes, want %zu", n, n_want);
	return 0;
}

static int observe_and_match(const struct lz_netroutes_entry *policy, size_t n_policy, struct lz_err *e)
{
	struct lz_kroute *obs = NULL;
	size_t n = 0;
	int r = lz_netroutes_observe(&obs, &n, e);
	if (r < 0)
		return r;
	r = lz_netroutes_match(obs, n, policy, n_policy, "tap0", GW, e);
	free(obs);
	return r;
}

static int observe_and_match_lo(const struct lz_netroutes_entry *policy, size_t n_policy, struct lz_err *e)
{
	struct lz_kroute *obs = NULL;
	size_t n = 0;
	int r = lz_netroutes_observe(&obs, &n, e);
	if (r < 0)
		return r;
	r = lz_netroutes_match_as(obs, n, policy, n_policy, "tap0", GW, LZ_NETROUTES_DENY_AS_ADDRESS, e);
	free(obs);
	return r;
}

static int expect_lookup(uint32_t dst, const char *dev, uint32_t gateway)
{
	struct lz_kroute k;
	char text[LZ_KROUTE_STR_MAX];
	CHECK_OK(lz_netroutes_lookup(dst, &k, E));
	lz_kroute_format(&k, text);
	CHECK(k.type == RTN_UNICAST && strcmp(k.dev, dev) == 0 && k.gateway == gateway &&
		      k.dst.addr == dst && k.dst.len == 32,
	      "lookup %08x: '%s', want dev %s gateway %08x", dst, text, dev, gateway);
	return 0;
}

/* ---- kernel tests --------------------------------------------------------- */

static int body_default_observed_exactly(void)
{
	struct lz_kroute *obs = NULL;
	size_t n = 0;

	if (install_default() < 0 || expect_observed(default_observed, LZ_ARRAY_SIZE(default_observed)) < 0)
		return -1;
	CHECK_OK(observe_and_match(default_policy, N_DEFAULT, E));

	/* Provenance: the on-link /24 is the kernel's connected route, the
	 * rest is ours; no route of a dropping type exists anywhere. */
	CHECK_OK(lz_netroutes_observe(&obs, &n, E));
	size_t bad_proto = n, bad_type = n;
	for (size_t i = 0; i < n; i++) {
		bool connected = obs[i].dst.addr == IP(10, 137, 54, 0) && obs[i].dst.len == 24;
		uint8_t t = obs[i].type;
		if (obs[i].protocol != (connected ? RTPROT_KERNEL : RTPROT_STATIC))
			bad_proto = i;
		if (t == RTN_BLACKHOLE || t == RTN_UNREACHABLE || t == RTN_PROHIBIT || t != RTN_UNICAST)
			bad_type = i;
	}
	free(obs);
	CHECK(bad_proto == n, "route %zu has an unexpected protocol", bad_proto);
	CHECK(bad_type == n, "route %zu is not unicast", bad_type);
	return 0;
}

static void test_lz_netroutes_install__default_policy_observed_exactly(void **state)
{
	(void)state;
	run_in_netns(body_default_observed_exactly, NULL);
}

static int body_lookup(void)
{
	if (install_default() < 0)
		return -1;
	/* Denied: the loopback device. */
	if (expect_lookup(IP(10, 1, 2, 3), "lo", 0) < 0 || expect_lookup(IP(172, 20, 0, 1), "lo", 0) < 0 ||
	    expect_lookup(IP(192, 168, 1, 1), "lo", 0) < 0 || expect_lookup(IP(10, 137, 55, 3), "lo", 0) < 0)
		return -1;
	/* Allowed: tap0 via the gateway; the helpers on-link. */
	if (expect_lookup(IP(10, 250, 0, 5), "tap0", GW) < 0 ||
	    expect_lookup(IP(198, 51, 100, 10), "tap0", GW) < 0 ||
	    expect_lookup(IP(10, 137, 55, 2), "lzcanary0", 0) < 0 || expect_lookup(IP(10, 137, 54, 3), "tap0", 0) < 0 ||
	    expect_lookup(IP(10, 137, 54, 2), "tap0", 0) < 0)
		return -1;
	return 0;
}

static void test_lz_netroutes_lookup__denied_via_lo_allowed_via_gateway(void **state)
{
	(void)state;
	run_in_netns(body_lookup, NULL);
}

/* Frames seen on tap0p within ms: ARP of any kind, IPv4 to dst. */
static int frames_on_peer(int pkt, uint32_t dst, int ms, int *ret_arp_gw)
{
	int count = 0;
	struct timespec end, now;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_nsec += (long)ms * 1000000L;
	end.tv_sec += end.tv_nsec / 1000000000L;
	end.tv_nsec %= 1000000000L;
	*ret_arp_gw = 0;
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		long left = (end.tv_sec - now.tv_sec) * 1000L + (end.tv_nsec - now.tv_nsec) / 1000000L;
		if (left <= 0)
			break;
		struct pollfd pfd = { .fd = pkt, .events = POLLIN };
		if (poll(&pfd, 1, (int)left) <= 0)
			continue;
		uint8_t f[2048];
		ssize_t k = recv(pkt, f, sizeof(f), 0);
		if (k < 14)
			continue;
		uint16_t proto = (uint16_t)(f[12] << 8 | f[13]);
		if (proto == ETH_P_ARP) {
			count++;
			if (k >= 42 && IP(f[38], f[39], f[40], f[41]) == GW)
				(*ret_arp_gw)++;
		} else if (proto == ETH_P_IP && k >= 34 && IP(f[30], f[31], f[32], f[33]) == dst) {
			count++;
		}
	}
	return count;
}

static void send_udp(uint32_t dst)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(9), .sin_addr.s_addr = htonl(dst) };
	if (s >= 0) {
		(void)sendto(s, "x", 1, 0, (struct sockaddr *)&to, sizeof(to));
		close(s);
	}
}

static int body_not_forwarded(void)
{
	int arp_gw;
	if (install_default() < 0)
		return -1;
	int pkt = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_ALL));
	CHECK(pkt >= 0, "AF_PACKET socket: %s", strerror(errno));
	struct sockaddr_ll ll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
				  .sll_ifindex = (int)if_nametoindex("tap0p") };
	CHECK(bind(pkt, (struct sockaddr *)&ll, sizeof(ll)) == 0, "bind tap0p: %s", strerror(errno));
	(void)frames_on_peer(pkt, 0, 50, &arp_gw); /* drain */

	static const uint32_t denied[] = { IP(10, 1, 2, 3), IP(172, 16, 5, 5), IP(192, 168, 7, 7),
					   IP(10, 137, 55, 3) };
	for (int fwd = 0; fwd < 2; fwd++) {
		/* Even with forwarding on, a looped-back packet goes out lo
		 * again until its TTL runs out; it never reaches tap0. */
		if (fwd)
			CHECK(write_text("/proc/sys/net/ipv4/ip_forward", "1") == 0, "ip_forward");
		for (size_t i = 0; i < LZ_ARRAY_SIZE(denied); i++) {
			send_udp(denied[i]);
			int n = frames_on_peer(pkt, denied[i], 200, &arp_gw);
			CHECK(n == 0, "denied %08x (forwarding %d): %d frames left through tap0", denied[i], fwd,
			      n);
		}
	}
	/* The probe sees traffic that is routed out: ARP for the gateway. */
	send_udp(IP(10, 250, 0, 5));
	int n = frames_on_peer(pkt, IP(10, 250, 0, 5), 500, &arp_gw);
	close(pkt);
	CHECK(n > 0 && arp_gw > 0, "allowed destination: %d frames, %d ARP for the gateway", n, arp_gw);
	return 0;
}

static void test_lz_netroutes_install__denied_packets_not_forwarded(void **state)
{
	(void)state;
	run_in_netns(body_not_forwarded, NULL);
}

static int body_second_install(void)
{
	struct lz_err e = { 0 };
	if (install_default() < 0)
		return -1;
	int r = lz_netroutes_install(default_policy, N_DEFAULT, "tap0", GW, &e);
	CHECK(r == -EEXIST && e.code == EEXIST, "second install = %d (%s)", r, e.msg);
	/* The first route after the connected /24 is the gateway /32. */
	CHECK(strstr(e.msg, "'unicast 10.137.54.2/32 dev tap0 scope link table main'") &&
		      strstr(e.msg, "File exists"),
	      "message '%s'", e.msg);
	return 0;
}

static void test_lz_netroutes_install__second_install_refused_eexist(void **state)
{
	(void)state;
	run_in_netns(body_second_install, NULL);
}

static int body_equal_prefix(void)
{
	static const struct lz_netroutes_entry policy[] = {
		{ P(10, 137, 54, 0, 24), HELPER },
		{ P(10, 250, 0, 0, 24), ALLOW },
		{ P(10, 250, 0, 0, 24), DENY },
		{ P(198, 51, 100, 0, 24), ALLOW },
		{ P(198, 51, 100, 0, 24), ALLOW },
	};
	static const char *const want[] = {
		"unicast 10.137.54.0/24 dev tap0 scope link table main",
		"unicast 10.250.0.0/24 dev lo scope link table main",
		"unicast 198.51.100.0/24 via 10.137.54.2 dev tap0 table main",
	};
	CHECK_OK(lz_netroutes_install(policy, LZ_ARRAY_SIZE(policy), "tap0", GW, E));
	if (expect_observed(want, LZ_ARRAY_SIZE(want)) < 0 || expect_lookup(IP(10, 250, 0, 9), "lo", 0) < 0)
		return -1;
	CHECK_OK(observe_and_match(policy, LZ_ARRAY_SIZE(policy), E));
	return 0;
}

static void test_lz_netroutes_install__equal_prefix_deny_wins(void **state)
{
	(void)state;
	run_in_netns(body_equal_prefix, NULL);
}

static int body_no_connected_route(void)
{
	struct lz_kroute *obs = NULL;
	size_t n = 0;
	CHECK_OK(lz_netroutes_observe(&obs, &n, E));
	CHECK(n == 0, "%zu routes before install", n);
	/* On-link routes go first, so the allows find their gateway. */
	if (install_default() < 0 || expect_observed(default_observed, LZ_ARRAY_SIZE(default_observed)) < 0)
		return -1;
	CHECK_OK(observe_and_match(default_policy, N_DEFAULT, E));
	return 0;
}

static void test_lz_netroutes_install__without_connected_route(void **state)
{
	(void)state;
	const struct netns_opts o = { .noprefixroute = true };
	run_in_netns(body_no_connected_route, &o);
}

static int body_missing_device(void)
{
	struct lz_err e = { 0 };
	int r = lz_netroutes_install(default_policy, N_DEFAULT, "tap9", GW, &e);
	CHECK(r == -ENODEV && strstr(e.msg, "'tap9'"), "install on tap9 = %d (%s)", r, e.msg);
	return 0;
}

static void test_lz_netroutes_install__missing_device_enodev(void **state)
{
	(void)state;
	run_in_netns(body_missing_device, NULL);
}

static int body_lo_down(void)
{
	struct lz_err e = { 0 };
	int r = lz_netroutes_install(default_policy, N_DEFAULT, "tap0", GW, &e);
	CHECK(r == -ENETDOWN && strstr(e.msg, "'unicast 10.0.0.0/8 dev lo scope link table main'"),
	      "install with lo down = %d (%s)", r, e.msg);
	return 0;
}

static void test_lz_netroutes_install__lo_down_enetdown(void **state)
{
	(void)state;
	const struct netns_opts o = { .lo_down = true };
	run_in_netns(body_lo_down, &o);
}

static int body_slirp_default(void)
{
	/* What slirp4netns --configure leaves: default via the gateway. */
	int r = route_add_by_hand(RTN_UNICAST, "0.0.0.0/0", "10.137.54.2", "tap0", RT_TABLE_MAIN, 0, RTPROT_BOOT);
	CHECK(r >= 0, "default route by hand: %s", nl_geterror(r));
	struct lz_err e = { 0 };
	r = lz_netroutes_install(default_policy, N_DEFAULT, "tap0", GW, &e);
	CHECK(r == -EEXIST && strstr(e.msg, "'unicast 0.0.0.0/0 via 10.137.54.2 dev tap0 table main'"),
	      "install over slirp's default = %d (%s)", r, e.msg);

	/* Start over in the same namespace: remove everything the failed
	 * install left (it is not transactional), then slirp's route. */
	struct lz_kroute *obs = NULL;
	size_t n = 0;
	CHECK_OK(lz_netroutes_observe(&obs, &n, E));
	for (size_t i = 0; i < n; i++) {
		if (obs[i].protocol == RTPROT_KERNEL)
			continue;
		struct lz_err de = { 0 };
		r = lz_netroutes_delete(&obs[i], &de);
		if (r < 0)
			free(obs);
		CHECK(r >= 0, "delete: %s", de.msg);
	}
	free(obs);
	if (install_default() < 0)
		return -1;
	CHECK_OK(observe_and_match(default_policy, N_DEFAULT, E));
	return 0;
}

static void test_lz_netroutes_install__over_slirp_default_route_eexist(void **state)
{
	(void)state;
	run_in_netns(body_slirp_default, NULL);
}

static struct lz_kroute via_gw(struct lz_prefix dst)
{
	struct lz_kroute k = { .table = RT_TABLE_MAIN, .dst = dst, .type = RTN_UNICAST,
			       .scope = RT_SCOPE_UNIVERSE, .dev = "tap0", .gateway = GW };
	return k;
}

static struct lz_kroute via_lo(struct lz_prefix dst)
{
	struct lz_kroute k = { .table = RT_TABLE_MAIN, .dst = dst, .type = RTN_UNICAST, .scope = RT_SCOPE_LINK,
			       .dev = "lo" };
	return k;
}

static int body_match_missing(void)
{
	struct lz_err e = { 0 };
	if (install_default() < 0)
		return -1;
	struct lz_kroute k = via_gw(P(10, 250, 0, 0, 24));
	CHECK_OK(lz_netroutes_delete(&k, E));
	int r = observe_and_match(default_policy, N_DEFAULT, &e);
	CHECK(r == -EPROTO &&
		      strstr(e.msg,
			     "1 missing (first 'unicast 10.250.0.0/24 via 10.137.54.2 dev tap0 table main')") &&
		      strstr(e.msg, "0 unexpected"),
	      "match = %d (%s)", r, e.msg);
	return 0;
}

static void test_lz_netroutes_match__removed_route_named(void **state)
{
	(void)state;
	run_in_netns(body_match_missing, NULL);
}

static int body_match_blackhole(void)
{
	struct lz_err e = { 0 };
	if (install_default() < 0)
		return -1;
	struct lz_kroute k = via_lo(P(172, 16, 0, 0, 12));
	CHECK_OK(lz_netroutes_delete(&k, E));
	int r = route_add_by_hand(RTN_BLACKHOLE, "172.16.0.0/12", NULL, NULL, RT_TABLE_MAIN, 0, RTPROT_STATIC);
	CHECK(r >= 0, "blackhole by hand: %s", nl_geterror(r));
	r = observe_and_match(default_policy, N_DEFAULT, &e);
	CHECK(r == -EPROTO && strstr(e.msg, "(first 'unicast 172.16.0.0/12 dev lo scope link table main')") &&
		      strstr(e.msg, "1 unexpected (first 'blackhole 172.16.0.0/12 "),
	      "match = %d (%s)", r, e.msg);
	return 0;
}

static void test_lz_netroutes_match__blackhole_in_place_of_deny_refused(void **state)
{
	(void)state;
	run_in_netns(body_match_blackhole, NULL);
}

static int body_match_table_local(void)
{
	struct lz_err e = { 0 };
	if (install_default() < 0)
		return -1;
	/* Table local is consulted before main: this would bypass the deny. */
	int r = route_add_by_hand(RTN_UNICAST, "10.0.0.0/8", "10.137.54.2", "tap0", RT_TABLE_LOCAL, 0,
				  RTPROT_STATIC);
	CHECK(r >= 0, "table-local route by hand: %s", nl_geterror(r));
	r = observe_and_match(default_policy, N_DEFAULT, &e);
	CHECK(r == -EPROTO &&
		      strstr(e.msg,
			     "1 unexpected (first 'unicast 10.0.0.0/8 via 10.137.54.2 dev tap0 table local')"),
	      "match = %d (%s)", r, e.msg);
	return 0;
}

static void test_lz_netroutes_match__route_in_table_local_refused(void **state)
{
	(void)state;
	run_in_netns(body_match_table_local, NULL);
}

static int body_match_metric_shadow(void)
{
	struct lz_err e = { 0 };
	if (install_default() < 0)
		return -1;
	/* Same destination at another metric: a fallback if the first dies. */
	int r = route_add_by_hand(RTN_UNICAST, "10.0.0.0/8", "10.137.54.2", "tap0", RT_TABLE_MAIN, 100,
				  RTPROT_STATIC);
	CHECK(r >= 0, "metric-100 route by hand: %s", nl_geterror(r));
	r = observe_and_match(default_policy, N_DEFAULT, &e);
	CHECK(r == -EPROTO && strstr(e.msg, "'unicast 10.0.0.0/8 via 10.137.54.2 dev tap0 table main metric 100'"),
	      "match = %d (%s)", r, e.msg);
	/* Two routes share table, destination and TOS: delete refuses to
	 * guess which one the kernel would take. */
	struct lz_kroute k = via_lo(P(10, 0, 0, 0, 8));
	struct lz_err de = { 0 };
	r = lz_netroutes_delete(&k, &de);
	CHECK(r == -ENOTUNIQ, "ambiguous delete = %d (%s)", r, de.msg);
	return 0;
}

static void test_lz_netroutes_match__same_prefix_other_metric_refused(void **state)
{
	(void)state;
	run_in_netns(body_match_metric_shadow, NULL);
}

static int body_address_routes(void)
{
	/* Fresh namespace: only the connected route is observed; lo's and
	 * tap0's local/broadcast entries in table local are left out. */
	static const char *const want[] = { "unicast 10.137.54.0/24 dev tap0 scope link table main" };
	if (expect_observed(want, 1) < 0)
		return -1;
	/* A local route the kernel did not derive from an address is seen. */
	int r = route_add_by_hand(RTN_LOCAL, "10.9.0.0/16", NULL, "lo", RT_TABLE_LOCAL, 0, RTPROT_KERNEL);
	CHECK(r >= 0, "local route by hand: %s", nl_geterror(r));
	static const char *const want2[] = { "unicast 10.137.54.0/24 dev tap0 scope link table main",
					     "local 10.9.0.0/16 dev lo scope host table local" };
	return expect_observed(want2, 2);
}

static void test_lz_netroutes_observe__address_derived_routes_left_out(void **state)
{
	(void)state;
	run_in_netns(body_address_routes, NULL);
}

static int body_delete_errors(void)
{
	struct lz_err e = { 0 };
	struct lz_kroute k = via_gw(P(198, 51, 100, 0, 24));
	int r = lz_netroutes_delete(&k, &e);
	CHECK(r == -ESRCH && strstr(e.msg, "198.51.100.0/24"), "delete absent = %d (%s)", r, e.msg);
	k.extra = LZ_KROUTE_X_MULTIPATH;
	r = lz_netroutes_delete(&k, &e);
	CHECK(r == -EINVAL, "delete with extra bits = %d (%s)", r, e.msg);
	return 0;
}

static void test_lz_netroutes_delete__absent_esrch_unexpressible_einval(void **state)
{
	(void)state;
	run_in_netns(body_delete_errors, NULL);
}

static int body_lookup_unreachable(void)
{
	struct lz_err e = { 0 };
	struct lz_kroute k;
	memset(&k, 0x5a, sizeof(k));
	int r = lz_netroutes_lookup(IP(198, 51, 100, 1), &k, &e);
	CHECK(r == -ENETUNREACH && strstr(e.msg, "198.51.100.1"), "lookup = %d (%s)", r, e.msg);
	CHECK(k.table == 0x5a5a5a5au, "output touched on failure");
	return 0;
}

static void test_lz_netroutes_lookup__no_route_enetunreach(void **state)
{
	(void)state;
	const struct netns_opts o = { .no_tap = true };
	run_in_netns(body_lookup_unreachable, &o);
}

static int read_sysctl_1(const char *path)
{
	char buf[8] = { 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t k = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return k == 2 && strcmp(buf, "1\n") == 0 ? 0 : -EPROTO;
}

static int body_disable_ipv6(void)
{
	bool clean = true;
	/* tap0 is up with IPv6 on: a link-local address and fe80::/64. */
	CHECK_OK(lz_netroutes_ipv6_clean(&clean, E));
	CHECK(!clean, "IPv6 reported clean with a link-local address on tap0");

	CHECK_OK(lz_netroutes_disable_ipv6(E));
	CHECK(read_sysctl_1("/proc/sys/net/ipv6/conf/all/disable_ipv6") == 0, "all not 1");
	CHECK(read_sysctl_1("/proc/sys/net/ipv6/conf/default/disable_ipv6") == 0, "default not 1");
	clean = false;
	CHECK_OK(lz_netroutes_ipv6_clean(&clean, E));
	CHECK(clean, "IPv6 not clean after disabling");

	/* A device created afterwards starts disabled. */
	struct nl_sock *sk = nl_open_route();
	CHECK(sk, "rtnetlink socket");
	int r = add_veth(sk, "tap1", "tap1p");
	nl_socket_free(sk);
	CHECK(r >= 0, "second veth: %s", nl_geterror(r));
	CHECK(read_sysctl_1("/proc/sys/net/ipv6/conf/tap1/disable_ipv6") == 0, "tap1 not disabled");
	clean = false;
	CHECK_OK(lz_netroutes_ipv6_clean(&clean, E));
	CHECK(clean, "IPv6 not clean after a new device");
	/* Idempotent. */
	CHECK_OK(lz_netroutes_disable_ipv6(E));
	return 0;
}

static void test_lz_netroutes_disable_ipv6__no_v6_address_or_route_left(void **state)
{
	(void)state;
	const struct netns_opts o = { .keep_ipv6 = true };
	run_in_netns(body_disable_ipv6, &o);
}

static int body_loopback_only(void)
{
	/* lo up with IPv6 on holds ::1 and "local ::1": loopback, clean. */
	bool clean = false;
	CHECK_OK(lz_netroutes_ipv6_clean(&clean, E));
	CHECK(clean, "::1 on lo counted as non-loopback");
	return 0;
}

static void test_lz_netroutes_ipv6_clean__loopback_only_is_clean(void **state)
{
	(void)state;
	const struct netns_opts o = { .keep_ipv6 = true, .no_tap = true };
	run_in_netns(body_loopback_only, &o);
}

/* A policy derived by netpolicy (configured allow 10.250.0.0/24, deny
 * 198.51.100.0/24), fed entry by entry plus the /0 its flag stands for. */
static int body_derived_policy(void)
{
	static const struct lz_prefix allow[] = { P(10, 250, 0, 0, 24) };
	static const struct lz_prefix deny[] = { P(198, 51, 100, 0, 24) };
	static struct lz_netpolicy pol;
	static struct lz_netroutes_entry routes[LZ_NETPOLICY_MAX_ROUTES + 1];
	size_t n = 0;

	CHECK_OK(lz_netpolicy_derive(allow, 1, deny, 1, NULL, 0, &pol, E));
	for (size_t i = 0; i < pol.n_routes; i++)
		routes[n++] = (struct lz_netroutes_entry){ pol.routes[i].prefix,
							   (enum lz_netroutes_kind)pol.routes[i].kind };
	enum lz_netroutes_kind def = pol.ipv4_default_allow ? LZ_NETROUTES_ALLOW : LZ_NETROUTES_DENY;
	routes[n++] = (struct lz_netroutes_entry){ P(0, 0, 0, 0, 0), def };
	CHECK_OK(lz_netroutes_install(routes, n, "tap0", LZ_NET_GATEWAY, E));
	CHECK_OK(observe_and_match(routes, n, E));
	if (expect_lookup(IP(198, 51, 100, 10), "lo", 0) < 0 || expect_lookup(IP(10, 250, 0, 10), "tap0", GW) < 0 ||
	    expect_lookup(LZ_NET_CANARY_DENIED, "lo", 0) < 0 ||
	    expect_lookup(LZ_NET_CANARY_ALLOWED, "lzcanary0", 0) < 0 ||
	    expect_lookup(LZ_NET_DNS, "tap0", 0) < 0 || expect_lookup(IP(203, 0, 113, 1), "tap0", GW) < 0)
		return -1;
	return 0;
}

static void test_lz_netroutes_install__netpolicy_derived_policy_matches(void **state)
{
	(void)state;
	run_in_netns(body_derived_policy, NULL);
}

/* ---- deny as a loopback address ------------------------------------------ */

static const struct lz_netroutes_entry lo_policy[] = {
	{ P(0, 0, 0, 0, 8), DENY }, /* no prefix route in Linux: not installed (netroutes.h) */
	{ P(224, 0, 0, 0, 4), DENY },
	{ P(10, 0, 0, 0, 8), DENY },
	{ P(198, 51, 100, 7, 32), CANARY_DENY },
	{ P(10, 250, 0, 0, 24), ALLOW },
	{ P(10, 137, 54, 0, 24), HELPER },
	{ P(10, 137, 54, 2, 32), HELPER },
};
#define N_LO_POLICY LZ_ARRAY_SIZE(lo_policy)

/* What install_as(lo_policy, DENY_AS_ADDRESS) leaves: the kernel's prefix
 * routes of the lo addresses in table local, nothing of them in main. */
static const char *const lo_observed[] = {
	"unicast 10.137.54.0/24 dev tap0 scope link table main",
	"unicast 10.137.54.2/32 dev tap0 scope link table main",
	"unicast 10.250.0.0/24 via 10.137.54.2 dev tap0 table main",
	"local 10.0.0.0/8 dev lo scope host table local",
	"local 198.51.100.7/32 dev lo scope host table local",
};

static int expect_lookup_type(uint32_t dst, uint8_t type, const char *dev, uint32_t gateway)
{
	struct lz_kroute k;
	char text[LZ_KROUTE_STR_MAX];
	CHECK_OK(lz_netroutes_lookup(dst, &k, E));
	lz_kroute_format(&k, text);
	CHECK(k.type == type && strcmp(k.dev, dev) == 0 && k.gateway == gateway,
	      "lookup %08x: '%s', want type %u dev %s gateway %08x", dst, text, type, dev, gateway);
	return 0;
}

static int install_lo_policy(void)
{
	CHECK_OK(lz_netroutes_install_as(lo_policy, N_LO_POLICY, "tap0", GW, LZ_NETROUTES_DENY_AS_ADDRESS, E));
	return 0;
}

/* The addresses lo holds, as "a.b.c.d/len scope S" lines (libnl-route). */
static int lo_addresses(char *out, size_t size)
{
	struct nl_sock *sk = nl_open_route();
	struct nl_cache *cache = NULL;
	CHECK(sk && rtnl_addr_alloc_cache(sk, &cache) >= 0, "address cache");
	int lo = ifindex_of(sk, "lo");
	out[0] = '\0';
	for (struct nl_object *o = nl_cache_get_first(cache); o; o = nl_cache_get_next(o)) {
		struct rtnl_addr *a = (struct rtnl_addr *)o;
		if (rtnl_addr_get_family(a) != AF_INET || rtnl_addr_get_ifindex(a) != lo)
			continue;
		char buf[64];
		nl_addr2str(rtnl_addr_get_local(a), buf, sizeof(buf));
		size_t len = strlen(out);
		snprintf(out + len, size - len, "%s scope %d flags 0x%x;", buf, rtnl_addr_get_scope(a),
			 rtnl_addr_get_flags(a));
	}
	nl_cache_free(cache);
	nl_socket_free(sk);
	return 0;
}

/* "ip addr del ADDR dev lo" through libnl-route: 0 or a libnl error. */
static int del_lo_address(const char *addr)
{
	struct nl_sock *sk = nl_open_route();
	struct rtnl_addr *a = rtnl_addr_alloc();
	struct nl_addr *local = NULL;
	int r = sk ? nl_addr_parse(addr, AF_INET, &local) : -NLE_BAD_SOCK;
	if (r >= 0) {
		rtnl_addr_set_ifindex(a, ifindex_of(sk, "lo"));
		r = rtnl_addr_set_local(a, local);
	}
	if (r >= 0)
		r = rtnl_addr_delete(sk, a, 0);
	nl_addr_put(local);
	rtnl_addr_put(a);
	if (sk)
		nl_socket_free(sk);
	return r;
}

static int body_lo_address_denies(void)
{
	char addrs[512];
	if (install_lo_policy() < 0 || expect_observed(lo_observed, LZ_ARRAY_SIZE(lo_observed)) < 0)
		return -1;
	CHECK_OK(observe_and_match_lo(lo_policy, N_LO_POLICY, E));
	if (lo_addresses(addrs, sizeof(addrs)) < 0)
		return -1;
	/* network + 1 for /8, the address itself for /32; scope host, no
	 * IFA_F_NOPREFIXROUTE. */
	CHECK(strstr(addrs, "10.0.0.1/8 scope 254 ") && strstr(addrs, "198.51.100.7 scope 254 ") &&
		      strstr(addrs, ";0.0.0.1/8 scope 254 ") && strstr(addrs, "224.0.0.1/4 scope 254 ") &&
		      !strstr(addrs, "flags 0x2"),
	      "lo addresses: %s", addrs);
	CHECK_OK(lz_netroutes_check_unrouted_denies(lo_policy, N_LO_POLICY, E));
	/* Denied: to lo (local in Linux); the allow wins by longest prefix; no
	 * default route, so the rest is unreachable. */
	if (expect_lookup_type(IP(10, 1, 2, 3), RTN_LOCAL, "lo", 0) < 0 ||
	    expect_lookup_type(IP(198, 51, 100, 7), RTN_LOCAL, "lo", 0) < 0 ||
	    expect_lookup(IP(10, 250, 0, 10), "tap0", GW) < 0)
		return -1;
	struct lz_err e = { 0 };
	struct lz_kroute k;
	int r = lz_netroutes_lookup(IP(8, 8, 8, 8), &k, &e);
	CHECK(r == -ENETUNREACH, "lookup 8.8.8.8 = %d (%s)", r, e.msg);
	r = lz_netroutes_lookup(IP(198, 51, 100, 8), &k, &e); /* the /32 denies one host */
	CHECK(r == -ENETUNREACH, "lookup 198.51.100.8 = %d (%s)", r, e.msg);
	/* The route representation does not describe this namespace. */
	struct lz_kroute *obs = NULL;
	size_t n = 0;
	CHECK_OK(lz_netroutes_observe(&obs, &n, E));
	r = lz_netroutes_match(obs, n, lo_policy, N_LO_POLICY, "tap0", GW, &e);
	free(obs);
	CHECK(r == -EPROTO && strstr(e.msg, "4 missing") && strstr(e.msg, "2 unexpected"), "match as routes = %d (%s)",
	      r, e.msg);
	return 0;
}

static void test_lz_netroutes_install_as__loopback_address_denies(void **state)
{
	(void)state;
	run_in_netns(body_lo_address_denies, NULL);
}

static int body_lo_second_install(void)
{
	struct lz_err e = { 0 };
	if (install_lo_policy() < 0)
		return -1;
	int r = lz_netroutes_install_loopback_denies(lo_policy, N_LO_POLICY, &e);
	CHECK(r == -EEXIST && e.code == EEXIST && strstr(e.msg, "0.0.0.0/8 (address 0.0.0.1/8") && strstr(e.msg, "File exists"),
	      "second install = %d (%s)", r, e.msg);
	r = lz_netroutes_install_as(lo_policy, N_LO_POLICY, "tap0", GW, LZ_NETROUTES_DENY_AS_ADDRESS, &e);
	/* install_as adds on-link routes first: the gateway /32 is named. */
	CHECK(r == -EEXIST && strstr(e.msg, "10.137.54.2/32"), "second install_as = %d (%s)", r, e.msg);
	/* Only the deny of 198.51.100.7/32 left to add: named. */
	static const struct lz_netroutes_entry again[] = { { P(198, 51, 100, 7, 32), DENY } };
	r = lz_netroutes_install_loopback_denies(again, 1, &e);
	CHECK(r == -EEXIST && strstr(e.msg, "198.51.100.7/32"), "install = %d (%s)", r, e.msg);
	return 0;
}

static void test_lz_netroutes_install_loopback_denies__second_install_eexist(void **state)
{
	(void)state;
	run_in_netns(body_lo_second_install, NULL);
}

static int body_lo_default_refused(void)
{
	static const struct lz_netroutes_entry with_default[] = {
		{ P(10, 0, 0, 0, 8), DENY },
		{ P(0, 0, 0, 0, 0), DENY },
	};
	static const char *const none[] = { "unicast 10.137.54.0/24 dev tap0 scope link table main" };
	struct lz_err e = { 0 };
	int r = lz_netroutes_install_loopback_denies(with_default, 2, &e);
	CHECK(r == -EINVAL && strstr(e.msg, "0.0.0.0/0") && strstr(e.msg, "default-allow"), "install = %d (%s)", r,
	      e.msg);
	r = lz_netroutes_install_as(with_default, 2, "tap0", GW, LZ_NETROUTES_DENY_AS_ADDRESS, &e);
	CHECK(r == -EINVAL && strstr(e.msg, "0.0.0.0/0"), "install_as = %d (%s)", r, e.msg);
	/* Refused before anything was added. */
	return expect_observed(none, 1);
}

static void test_lz_netroutes_install_loopback_denies__default_deny_einval(void **state)
{
	(void)state;
	run_in_netns(body_lo_default_refused, NULL);
}

static int body_lo_address_removed(void)
{
	struct lz_err e = { 0 };
	if (install_lo_policy() < 0)
		return -1;
	CHECK(del_lo_address("10.0.0.1/8") >= 0, "address delete by hand");
	int r = observe_and_match_lo(lo_policy, N_LO_POLICY, &e);
	CHECK(r == -EPROTO && strstr(e.msg, "1 missing (first 'local 10.0.0.0/8 dev lo scope host table local')") &&
		      strstr(e.msg, "0 unexpected"),
	      "match = %d (%s)", r, e.msg);
	/* With it gone 10.1.2.3 is no longer denied (and there is no default). */
	struct lz_kroute k;
	r = lz_netroutes_lookup(IP(10, 1, 2, 3), &k, &e);
	CHECK(r == -ENETUNREACH, "lookup 10.1.2.3 = %d (%s)", r, e.msg);
	/* A deny no route stands for is checked by its address. */
	CHECK_OK(lz_netroutes_check_unrouted_denies(lo_policy, N_LO_POLICY, E));
	CHECK(del_lo_address("224.0.0.1/4") >= 0, "address delete by hand");
	r = lz_netroutes_check_unrouted_denies(lo_policy, N_LO_POLICY, &e);
	CHECK(r == -EPROTO && strstr(e.msg, "224.0.0.0/4 is not on lo"), "check = %d (%s)", r, e.msg);
	return 0;
}

static void test_lz_netroutes_match_as__lo_address_removed_refused(void **state)
{
	(void)state;
	run_in_netns(body_lo_address_removed, NULL);
}

static void test_lz_netroutes_plan_as__address_denies(void **state)
{
	(void)state;
	struct lz_kroute *plan = NULL;
	size_t n = 0;
	struct lz_err e = { 0 };
	char text[LZ_KROUTE_STR_MAX];

	assert_int_equal(lz_netroutes_plan_as(lo_policy, N_LO_POLICY, "tap0", GW, LZ_NETROUTES_DENY_AS_ADDRESS, &plan,
					      &n, &e),
			 0);
	assert_int_equal(n, LZ_ARRAY_SIZE(lo_observed));
	for (size_t i = 0; i < n; i++) {
		lz_kroute_format(&plan[i], text);
		assert_string_equal(text, lo_observed[i]);
	}
	free(plan);
	static const struct lz_netroutes_entry dflt[] = { { P(0, 0, 0, 0, 0), DENY } };
	plan = NULL;
	assert_int_equal(lz_netroutes_plan_as(dflt, 1, "tap0", GW, LZ_NETROUTES_DENY_AS_ADDRESS, &plan, &n, &e),
			 -EINVAL);
	assert_non_null(strstr(e.msg, "0.0.0.0/0"));
	assert_null(plan);
	/* The route representation still accepts it. */
	assert_int_equal(lz_netroutes_plan_as(dflt, 1, "tap0", GW, LZ_NETROUTES_DENY_AS_ROUTE, &plan, &n, &e), 0);
	free(plan);
}

/* ---- pure tests (no kernel) ---------------------------------------------- */

static void test_lz_netroutes_plan__canonical_order_and_merges(void **state)
{
	(void)state;
	struct lz_kroute *plan = NULL;
	size_t n = 0;
	char text[LZ_KROUTE_STR_MAX];

	/* The policy reversed: the plan does not depend on input order. */
	struct lz_netroutes_entry rev[N_DEFAULT + 2];
	for (size_t i = 0; i < N_DEFAULT; i++)
		rev[i] = default_policy[N_DEFAULT - 1 - i];
	/* Same-meaning duplicates share one route. */
	rev[N_DEFAULT] = (struct lz_netroutes_entry){ P(10, 137, 55, 0, 29), DENY };
	rev[N_DEFAULT + 1] = (struct lz_netroutes_entry){ P(10, 250, 0, 0, 24), ALLOW };
	assert_int_equal(lz_netroutes_plan(rev, LZ_ARRAY_SIZE(rev), "tap0", GW, &plan, &n, NULL), 0);
	assert_int_equal(n, LZ_ARRAY_SIZE(default_observed));
	for (size_t i = 0; i < n; i++) {
		lz_kroute_format(&plan[i], text);
		assert_string_equal(text, default_observed[i]);
		assert_int_equal(plan[i].protocol, RTPROT_STATIC);
		assert_int_equal(plan[i].extra, 0);
	}
	free(plan);
}

static void test_lz_netroutes_plan__equal_prefix_deny_wins(void **state)
{
	(void)state;
	static const struct lz_netroutes_entry policy[] = {
		{ P(10, 250, 0, 0, 24), CANARY_ALLOW },
		{ P(10, 250, 0, 0, 24), HELPER },
		{ P(10, 250, 0, 0, 24), CANARY_DENY },
	};
	struct lz_kroute *plan = NULL;
	size_t n = 0;
	char text[LZ_KROUTE_STR_MAX];
	assert_int_equal(lz_netroutes_plan(policy, 3, "tap0", GW, &plan, &n, NULL), 0);
	assert_int_equal(n, 1);
	lz_kroute_format(&plan[0], text);
	assert_string_equal(text, "unicast 10.250.0.0/24 dev lo scope link table main");
	free(plan);
}

static void assert_plan_refused(const struct lz_netroutes_entry *routes, size_t n, const char *dev, uint32_t gw,
				int code, const char *needle)
{
	struct lz_kroute *plan = (struct lz_kroute *)0x1;
	size_t count = 77;
	struct lz_err e = { 0 };
	assert_int_equal(lz_netroutes_plan(routes, n, dev, gw, &plan, &count, &e), -code);
	assert_int_equal(e.code, code);
	if (!strstr(e.msg, needle))
		fail_msg("message '%s' lacks '%s'", e.msg, needle);
	/* Outputs untouched on failure. */
	assert_ptr_equal(plan, (struct lz_kroute *)0x1);
	assert_int_equal(count, 77);
}

static void test_lz_netroutes_plan__helper_and_allow_conflict_einval(void **state)
{
	(void)state;
	static const struct lz_netroutes_entry policy[] = {
		{ P(10, 137, 54, 3, 32), HELPER },
		{ P(10, 137, 54, 3, 32), ALLOW },
	};
	assert_plan_refused(policy, 2, "tap0", GW, EINVAL, "10.137.54.3/32 has two next hops (on-link helper allow");
	static const struct lz_netroutes_entry canary[] = {
		{ P(10, 137, 55, 2, 32), CANARY_ALLOW },
		{ P(10, 137, 55, 2, 32), ALLOW },
	};
	assert_plan_refused(canary, 2, "tap0", GW, EINVAL, "10.137.55.2/32 has two next hops (allow via the "
							   "gateway canary allow on lzcanary0)");
}

static void test_lz_netroutes_plan__invalid_input_einval(void **state)
{
	(void)state;
	static const struct lz_netroutes_entry ok[] = { { P(10, 0, 0, 0, 8), DENY } };
	static const struct lz_netroutes_entry host_bits[] = { { { IP(10, 0, 0, 1), 8 }, DENY } };
	static const struct lz_netroutes_entry too_long[] = { { { 0, 33 }, DENY } };
	static const struct lz_netroutes_entry next_kind[] = { { P(10, 0, 0, 0, 8), 6 } };
	static const struct lz_netroutes_entry bad_kind[] = { { P(10, 0, 0, 0, 8), 99 } };
	static const struct lz_netroutes_entry neg_kind[] = { { P(10, 0, 0, 0, 8), -1 } };

	assert_plan_refused(host_bits, 1, "tap0", GW, EINVAL, "10.0.0.1/8 has host bits");
	assert_plan_refused(too_long, 1, "tap0", GW, EINVAL, "host bits");
	assert_plan_refused(next_kind, 1, "tap0", GW, EINVAL, "unknown kind 6");
	assert_plan_refused(bad_kind, 1, "tap0", GW, EINVAL, "unknown kind 99");
	assert_plan_refused(neg_kind, 1, "tap0", GW, EINVAL, "unknown kind -1");
	assert_plan_refused(ok, 1, "", GW, EINVAL, "device name");
	assert_plan_refused(ok, 1, NULL, GW, EINVAL, "device name");
	assert_plan_refused(ok, 1, "sixteen-chars-xx", GW, EINVAL, "device name");
	assert_plan_refused(ok, 1, "lo", GW, EINVAL, "cannot be lo");
	assert_plan_refused(ok, 1, "tap0", 0, EINVAL, "gateway 0.0.0.0");
	assert_plan_refused(ok, 1, "tap0", IP(127, 0, 0, 1), EINVAL, "gateway 127.0.0.1");
	assert_plan_refused(ok, 1, "tap0", IP(224, 0, 0, 1), EINVAL, "gateway 224.0.0.1");
	assert_plan_refused(ok, 1, "tap0", IP(255, 255, 255, 255), EINVAL, "gateway 255.255.255.255");
}

static void test_lz_netroutes_plan__over_limit_e2big(void **state)
{
	(void)state;
	/* Refused on the count alone, before any entry is read. */
	static const struct lz_netroutes_entry one[] = { { P(10, 0, 0, 0, 8), DENY } };
	assert_plan_refused(one, LZ_NETROUTES_MAX + 1, "tap0", GW, E2BIG, "at most 4096");
}

static void test_lz_netroutes_plan__empty(void **state)
{
	(void)state;
	struct lz_kroute *plan = (struct lz_kroute *)0x1;
	size_t n = 77;
	assert_int_equal(lz_netroutes_plan(NULL, 0, "tap0", GW, &plan, &n, NULL), 0);
	assert_null(plan);
	assert_int_equal(n, 0);
}

static void test_lz_netroutes_deny_prefixes__denies_once_in_order(void **state)
{
	(void)state;
	struct lz_prefix *denies = NULL;
	size_t n = 0;
	char text[LZ_PREFIX_STR_MAX];
	static const char *const want[] = { "10.0.0.0/8", "10.137.55.0/29", "172.16.0.0/12", "192.168.0.0/16" };

	/* The default-like policy reversed, with a CANARY_DENY and a DENY of
	 * one prefix and a deny repeated: each prefix once, sorted; allows,
	 * helpers and the canary allow are not denies. */
	struct lz_netroutes_entry rev[N_DEFAULT + 2];
	for (size_t i = 0; i < N_DEFAULT; i++)
		rev[i] = default_policy[N_DEFAULT - 1 - i];
	rev[N_DEFAULT] = (struct lz_netroutes_entry){ P(10, 137, 55, 0, 29), DENY };
	rev[N_DEFAULT + 1] = (struct lz_netroutes_entry){ P(172, 16, 0, 0, 12), DENY };
	assert_int_equal(lz_netroutes_deny_prefixes(rev, LZ_ARRAY_SIZE(rev), &denies, &n, NULL), 0);
	assert_int_equal(n, LZ_ARRAY_SIZE(want));
	for (size_t i = 0; i < n; i++) {
		lz_prefix_format(denies[i], text);
		assert_string_equal(text, want[i]);
	}
	free(denies);

	/* A deny of a /32 and a /31 is still a prefix (its address is the
	 * prefix itself at install), next to the /8 it lies in. */
	static const struct lz_netroutes_entry small[] = {
		{ P(198, 51, 100, 7, 32), CANARY_DENY },
		{ P(10, 0, 0, 0, 8), DENY },
		{ P(10, 0, 0, 0, 31), DENY },
	};
	denies = NULL;
	assert_int_equal(lz_netroutes_deny_prefixes(small, 3, &denies, &n, NULL), 0);
	assert_int_equal(n, 3);
	assert_true(lz_prefix_equal(denies[0], P(10, 0, 0, 0, 8)));
	assert_true(lz_prefix_equal(denies[1], P(10, 0, 0, 0, 31)));
	assert_true(lz_prefix_equal(denies[2], P(198, 51, 100, 7, 32)));
	free(denies);
}

static void test_lz_netroutes_deny_prefixes__no_deny_empty(void **state)
{
	(void)state;
	static const struct lz_netroutes_entry allows[] = {
		{ P(0, 0, 0, 0, 0), ALLOW },
		{ P(10, 137, 54, 0, 24), HELPER },
		{ P(10, 137, 55, 2, 32), CANARY_ALLOW },
	};
	struct lz_prefix *denies = (struct lz_prefix *)0x1;
	size_t n = 77;
	assert_int_equal(lz_netroutes_deny_prefixes(allows, 3, &denies, &n, NULL), 0);
	assert_null(denies);
	assert_int_equal(n, 0);
	denies = (struct lz_prefix *)0x1;
	n = 77;
	assert_int_equal(lz_netroutes_deny_prefixes(NULL, 0, &denies, &n, NULL), 0);
	assert_null(denies);
	assert_int_equal(n, 0);
	/* Nothing to add: install succeeds without a socket. */
	assert_int_equal(lz_netroutes_install_loopback_denies(allows, 3, NULL), 0);
}

static void assert_deny_prefixes_refused(const struct lz_netroutes_entry *entries, size_t n, int code,
					 const char *msg)
{
	struct lz_prefix *denies = (struct lz_prefix *)0x1;
	size_t count = 77;
	struct lz_err e = { 0 };
	char want[LZ_ERR_MSG_MAX];

	assert_int_equal(lz_netroutes_deny_prefixes(entries, n, &denies, &count, &e), -code);
	assert_int_equal(e.code, code);
	assert_string_equal(e.msg, msg);
	/* Outputs untouched on failure. */
	assert_ptr_equal(denies, (struct lz_prefix *)0x1);
	assert_int_equal(count, 77);
	/* Install refuses the same before touching the kernel (no root
	 * needed), naming its operation. */
	memset(&e, 0, sizeof(e));
	snprintf(want, sizeof(want), "installing loopback denies: %s", msg);
	assert_int_equal(lz_netroutes_install_loopback_denies(entries, n, &e), -code);
	assert_int_equal(e.code, code);
	assert_string_equal(e.msg, want);
}

static void test_lz_netroutes_deny_prefixes__invalid_refused(void **state)
{
	(void)state;
	/* Host bits are refused in any entry, not only in denies. */
	static const struct lz_netroutes_entry host_bits[] = {
		{ P(10, 0, 0, 0, 8), DENY },
		{ { IP(192, 0, 2, 1), 24 }, ALLOW },
	};
	static const struct lz_netroutes_entry too_long[] = { { { 0, 33 }, DENY } };
	static const struct lz_netroutes_entry default_deny[] = {
		{ P(10, 0, 0, 0, 8), CANARY_DENY },
		{ P(0, 0, 0, 0, 0), CANARY_DENY },
	};
	static const struct lz_netroutes_entry default_allow[] = { { P(0, 0, 0, 0, 0), ALLOW } };
	static const struct lz_netroutes_entry one[] = { { P(10, 0, 0, 0, 8), DENY } };

	assert_deny_prefixes_refused(host_bits, 2, EINVAL, "prefix 192.0.2.1/24 has host bits set");
	assert_deny_prefixes_refused(too_long, 1, EINVAL, "prefix 0.0.0.0/33 has host bits set");
	assert_deny_prefixes_refused(default_deny, 2, EINVAL,
				     "a deny of 0.0.0.0/0 cannot be a loopback address (the policy's default-allow "
				     "flag stands for it: leave the default route out instead)");
	/* Refused on the count alone, before any entry is read. */
	assert_deny_prefixes_refused(one, LZ_NETROUTES_MAX + 1, E2BIG, "4097 entries, at most 4096");

	/* An allow of 0.0.0.0/0 is no deny: nothing to add. */
	struct lz_prefix *denies = NULL;
	size_t n = 77;
	assert_int_equal(lz_netroutes_deny_prefixes(default_allow, 1, &denies, &n, NULL), 0);
	assert_null(denies);
	assert_int_equal(n, 0);
}

static void test_lz_netroutes_match__order_free_and_duplicates_refused(void **state)
{
	(void)state;
	static const struct lz_netroutes_entry policy[] = {
		{ P(10, 0, 0, 0, 8), DENY },
		{ P(0, 0, 0, 0, 0), ALLOW },
	};
	struct lz_kroute obs[3] = { via_gw(P(0, 0, 0, 0, 0)), via_lo(P(10, 0, 0, 0, 8)) };
	struct lz_err e = { 0 };

	/* Observed order and protocol do not matter. */
	obs[0].protocol = RTPROT_BOOT;
	struct lz_kroute swapped[2] = { obs[1], obs[0] };
	assert_int_equal(lz_netroutes_match(obs, 2, policy, 2, "tap0", GW, &e), 0);
	assert_int_equal(lz_netroutes_match(swapped, 2, policy, 2, "tap0", GW, &e), 0);

	/* A duplicate alias is one route too many. */
	obs[2] = obs[1];
	assert_int_equal(lz_netroutes_match(obs, 3, policy, 2, "tap0", GW, &e), -EPROTO);
	assert_non_null(strstr(e.msg, "0 missing, 1 unexpected (first 'unicast 10.0.0.0/8 dev lo scope link"));

	/* A feature outside the projection never matches. */
	obs[1].extra = LZ_KROUTE_X_ENCAP;
	assert_int_equal(lz_netroutes_match(obs, 2, policy, 2, "tap0", GW, &e), -EPROTO);
	assert_non_null(strstr(e.msg, "[encap]"));

	/* Nothing observed: everything missing. */
	assert_int_equal(lz_netroutes_match(NULL, 0, policy, 2, "tap0", GW, &e), -EPROTO);
	assert_non_null(strstr(e.msg, "2 missing (first 'unicast 0.0.0.0/0 via 10.137.54.2 dev tap0 table main')"));

	/* Plan refusals come through unchanged. */
	assert_int_equal(lz_netroutes_match(obs, 2, policy, 2, "lo", GW, &e), -EINVAL);
	assert_int_equal(lz_netroutes_match(obs, LZ_NETROUTES_MAX + 1, policy, 2, "tap0", GW, &e), -E2BIG);
}

static void test_lz_kroute_format__all_fields(void **state)
{
	(void)state;
	char text[LZ_KROUTE_STR_MAX];
	struct lz_kroute k = { .table = 1000, .dst = P(192, 0, 2, 0, 24), .tos = 0x10, .priority = 7, .type = 200,
			       .scope = 17, .dev = "eth0", .gateway = IP(192, 0, 2, 1),
			       .extra = LZ_KROUTE_X_MULTIPATH | LZ_KROUTE_X_OTHER };
	lz_kroute_format(&k, text);
	assert_string_equal(text, "type 200 192.0.2.0/24 via 192.0.2.1 dev eth0 scope 17 table 1000 metric 7 "
				  "tos 0x10 [multipath] [other-attr]");
	struct lz_kroute b = { .table = RT_TABLE_DEFAULT, .type = RTN_PROHIBIT, .scope = RT_SCOPE_NOWHERE };
	lz_kroute_format(&b, text);
	assert_string_equal(text, "prohibit 0.0.0.0/0 scope nowhere table default");
	/* Every extra bit at once still fits, truncated at worst. */
	k.extra = ~0u;
	lz_kroute_format(&k, text);
	assert_true(strlen(text) < LZ_KROUTE_STR_MAX);
}

static void test_lz_kroute_compare__protocol_ignored(void **state)
{
	(void)state;
	struct lz_kroute a = via_lo(P(10, 0, 0, 0, 8)), b = a;
	b.protocol = RTPROT_KERNEL;
	assert_int_equal(lz_kroute_compare(&a, &b), 0);
	b.scope = RT_SCOPE_HOST;
	assert_int_equal(lz_kroute_compare(&a, &b), -1);
	b = a;
	b.priority = 1;
	assert_int_equal(lz_kroute_compare(&a, &b), -1);
	b = a;
	b.table = RT_TABLE_LOCAL; /* 255 after main's 254 */
	assert_int_equal(lz_kroute_compare(&a, &b), -1);
	assert_int_equal(lz_kroute_compare(&b, &a), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_netroutes_plan__canonical_order_and_merges),
		cmocka_unit_test(test_lz_netroutes_plan__equal_prefix_deny_wins),
		cmocka_unit_test(test_lz_netroutes_plan__helper_and_allow_conflict_einval),
		cmocka_unit_test(test_lz_netroutes_plan__invalid_input_einval),
		cmocka_unit_test(test_lz_netroutes_plan__over_limit_e2big),
		cmocka_unit_test(test_lz_netroutes_plan__empty),
		cmocka_unit_test(test_lz_netroutes_deny_prefixes__denies_once_in_order),
		cmocka_unit_test(test_lz_netroutes_deny_prefixes__no_deny_empty),
		cmocka_unit_test(test_lz_netroutes_deny_prefixes__invalid_refused),
		cmocka_unit_test(test_lz_netroutes_match__order_free_and_duplicates_refused),
		cmocka_unit_test(test_lz_kroute_format__all_fields),
		cmocka_unit_test(test_lz_kroute_compare__protocol_ignored),
		cmocka_unit_test(test_lz_netroutes_install__default_policy_observed_exactly),
		cmocka_unit_test(test_lz_netroutes_lookup__denied_via_lo_allowed_via_gateway),
		cmocka_unit_test(test_lz_netroutes_install__denied_packets_not_forwarded),
		cmocka_unit_test(test_lz_netroutes_install__second_install_refused_eexist),
		cmocka_unit_test(test_lz_netroutes_install__equal_prefix_deny_wins),
		cmocka_unit_test(test_lz_netroutes_install__without_connected_route),
		cmocka_unit_test(test_lz_netroutes_install__missing_device_enodev),
		cmocka_unit_test(test_lz_netroutes_install__lo_down_enetdown),
		cmocka_unit_test(test_lz_netroutes_install__over_slirp_default_route_eexist),
		cmocka_unit_test(test_lz_netroutes_install__netpolicy_derived_policy_matches),
		cmocka_unit_test(test_lz_netroutes_match__removed_route_named),
		cmocka_unit_test(test_lz_netroutes_match__blackhole_in_place_of_deny_refused),
		cmocka_unit_test(test_lz_netroutes_match__route_in_table_local_refused),
		cmocka_unit_test(test_lz_netroutes_match__same_prefix_other_metric_refused),
		cmocka_unit_test(test_lz_netroutes_observe__address_derived_routes_left_out),
		cmocka_unit_test(test_lz_netroutes_delete__absent_esrch_unexpressible_einval),
		cmocka_unit_test(test_lz_netroutes_lookup__no_route_enetunreach),
		cmocka_unit_test(test_lz_netroutes_disable_ipv6__no_v6_address_or_route_left),
		cmocka_unit_test(test_lz_netroutes_ipv6_clean__loopback_only_is_clean),
		cmocka_unit_test(test_lz_netroutes_plan_as__address_denies),
		cmocka_unit_test(test_lz_netroutes_install_as__loopback_address_denies),
		cmocka_unit_test(test_lz_netroutes_install_loopback_denies__second_install_eexist),
		cmocka_unit_test(test_lz_netroutes_install_loopback_denies__default_deny_einval),
		cmocka_unit_test(test_lz_netroutes_match_as__lo_address_removed_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
