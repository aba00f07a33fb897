/* The shared rtnetlink socket's link and address listing (core/net/rtnl.c;
 * spec 3.7 "Linux policy state"): what netroutes_observe resolves route
 * devices against, what install finds lo and the egress device in, and what
 * the IPv6 check reads addresses from.
 *
 * Kernel tests fork a child that unshares a fresh network namespace and runs
 * the steps there; the child reports the first failed check through a pipe
 * and cmocka runs only in the parent. They need root and are skipped
 * otherwise. Links and addresses the listing must find are created with
 * libnl-route objects, and the listing is compared with glibc's
 * if_nameindex(), implementations independent of the module under test. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
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
#include <unistd.h>

#include <cmocka.h>

#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>

#include "net/rtnl.h"

#define IP(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (uint32_t)(d))

/* ---- child harness ------------------------------------------------------ */

static char child_msg[1024]; /* room for a whole struct lz_err message */

#define CHECK(cond, ...)                                                                  \
	do {                                                                              \
		if (!(cond)) {                                                            \
			int n_ = snprintf(child_msg, sizeof(child_msg), "line %d: ", __LINE__); \
			snprintf(child_msg + n_, sizeof(child_msg) - (size_t)n_, __VA_ARGS__); \
			return -1;                                                        \
		}                                                                         \
	} while (0)

static void run_in_netns(int (*body)(void))
{
	int p[2];
	if (geteuid() != 0)
		skip();
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		int r = -1;
		if (unshare(CLONE_NEWNET) < 0)
			snprintf(child_msg, sizeof(child_msg), "unshare: %s", strerror(errno));
		else
			r = body();
		if (r == 0)
			child_msg[0] = '\0';
		ssize_t w = write(p[1], child_msg, sizeof(child_msg));
		_exit(w == (ssize_t)sizeof(child_msg) ? 0 : 1);
	}
	close(p[1]);
	char msg[sizeof(child_msg)] = "";
	size_t got = 0;
	ssize_t k;
	while (got < sizeof(msg) && (k = read(p[0], msg + got, sizeof(msg) - got)) > 0)
		got += (size_t)k;
	close(p[0]);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (got != sizeof(msg))
		fail_msg("child ended without a report (status 0x%x)", status);
	if (msg[0])
		fail_msg("%s", msg);
}

/* "ip link add rt0 type veth peer name rt0p" through libnl-route. */
static int add_veth_by_hand(const char *name, const char *peer)
{
	struct nl_sock *sk = nl_socket_alloc();
	int r = sk ? nl_connect(sk, NETLINK_ROUTE) : -NLE_NOMEM;
	if (r >= 0)
		r = rtnl_link_veth_add(sk, name, peer, getpid());
	if (sk)
		nl_socket_free(sk);
	return r;
}

/* "ip addr add <cidr> [broadcast <brd>] dev <dev>" through libnl-route. */
static int addr_add_by_hand(const char *dev, const char *cidr, const char *brd)
{
	struct nl_sock *sk = nl_socket_alloc();
	struct rtnl_addr *a = rtnl_addr_alloc();
	struct nl_addr *local = NULL, *b = NULL;
	int r = sk && a ? nl_connect(sk, NETLINK_ROUTE) : -NLE_NOMEM;
	if (r >= 0)
		r = nl_addr_parse(cidr, AF_INET, &local);
	if (r >= 0) {
		rtnl_addr_set_ifindex(a, (int)if_nametoindex(dev));
		r = rtnl_addr_set_local(a, local);
	}
	if (r >= 0 && brd && (r = nl_addr_parse(brd, AF_INET, &b)) >= 0)
		r = rtnl_addr_set_broadcast(a, b);
	if (r >= 0)
		r = rtnl_addr_add(sk, a, 0);
	nl_addr_put(local);
	nl_addr_put(b);
	rtnl_addr_put(a);
	if (sk)
		nl_socket_free(sk);
	return r;
}

static const struct lz_rtnl_addr *find_addr4(const struct lz_rtnl_addrs *l, int ifindex, uint32_t addr)
{
	for (size_t i = 0; i < l->n; i++) {
		uint32_t local;
		memcpy(&local, l->v[i].local, 4);
		if (l->v[i].family == AF_INET && l->v[i].ifindex == ifindex && ntohl(local) == addr)
			return &l->v[i];
	}
	return NULL;
}

/* ---- kernel tests ------------------------------------------------------- */

static int body_links(void)
{
	struct lz_rtnl nl = { 0 };
	struct lz_rtnl_links links = { 0 };
	struct lz_err e = { 0 };
	struct if_nameindex *ni = NULL;
	int r;

	CHECK(add_veth_by_hand("rt0", "rt0p") >= 0, "veth by hand");
	CHECK(lz_rtnl_open(&nl, "test", &e) == 0, "open: %s", e.msg);
	r = lz_rtnl_link_up(&nl, "rt0");
	if (r >= 0)
		r = lz_rtnl_dump_links(&nl, &links);
	lz_rtnl_close(&nl);
	lz_rtnl_close(&nl); /* idempotent */
	if (r < 0) {
		lz_rtnl_links_free(&links);
		CHECK(false, "link up / dump: %s", strerror(-r));
	}

	/* Exactly the links glibc lists (a fresh namespace may hold fallback
	 * tunnel devices of loaded modules besides lo), each once. */
	ni = if_nameindex();
	if (!ni) {
		lz_rtnl_links_free(&links);
		CHECK(false, "if_nameindex: %s", strerror(errno));
	}
	size_t n_ni = 0, missing = 0;
	for (; ni[n_ni].if_index; n_ni++) {
		const struct lz_rtnl_link *k = lz_rtnl_link_by_index(&links, (int)ni[n_ni].if_index);
		if (!k || strcmp(k->name, ni[n_ni].if_name) != 0 || lz_rtnl_link_by_name(&links, ni[n_ni].if_name) != k)
			missing++;
	}
	if_freenameindex(ni);
	size_t n = links.n;
	const struct lz_rtnl_link *lo = lz_rtnl_link_by_name(&links, "lo");
	const struct lz_rtnl_link *rt0 = lz_rtnl_link_by_name(&links, "rt0");
	const struct lz_rtnl_link *peer = lz_rtnl_link_by_name(&links, "rt0p");
	bool lo_ok = lo && (lo->flags & IFF_LOOPBACK) && !(lo->flags & IFF_UP) &&
		     lo->ifindex == (int)if_nametoindex("lo");
	bool rt0_ok = rt0 && (rt0->flags & IFF_UP) && !(rt0->flags & IFF_LOOPBACK) &&
		      rt0->ifindex == (int)if_nametoindex("rt0");
	bool peer_ok = peer && !(peer->flags & IFF_UP) && peer->ifindex == (int)if_nametoindex("rt0p");
	bool absent = !lz_rtnl_link_by_name(&links, "rt") && !lz_rtnl_link_by_name(&links, "rt0p0") &&
		      !lz_rtnl_link_by_index(&links, 0) && !lz_rtnl_link_by_index(&links, -1);
	lz_rtnl_links_free(&links);
	CHECK(n == n_ni && missing == 0, "listed %zu links, glibc %zu, %zu differ", n, n_ni, missing);
	CHECK(lo_ok, "lo: loopback, down, its index");
	CHECK(rt0_ok, "rt0: up after lz_rtnl_link_up, not loopback, its index");
	CHECK(peer_ok, "rt0p: still down, its index");
	CHECK(absent, "a prefix, an extension or index 0 found a link");
	CHECK(links.v == NULL && links.n == 0 && links.cap == 0, "free leaves the list empty");
	return 0;
}

static void test_lz_rtnl_dump_links__every_link_with_index_and_flags(void **state)
{
	(void)state;
	run_in_netns(body_links);
}

static int body_addrs(void)
{
	struct lz_rtnl nl = { 0 };
	struct lz_rtnl_addrs v4 = { 0 }, v6 = { 0 };
	struct lz_err e = { 0 };
	int r, r6 = 0;
	/* A kernel without IPv6 has no conf directory (netroutes_ipv6.h). */
	bool have_v6 = access("/proc/sys/net/ipv6/conf", F_OK) == 0;
	bool lo_v6 = false;

	CHECK(add_veth_by_hand("rt0", "rt0p") >= 0, "veth by hand");
	CHECK(lz_rtnl_open(&nl, "test", &e) == 0, "open: %s", e.msg);
	int rt0 = (int)if_nametoindex("rt0"), lo = (int)if_nametoindex("lo");
	r = lz_rtnl_link_up(&nl, "lo");
	if (r >= 0)
		r = lz_rtnl_link_up(&nl, "rt0");
	/* Without IFA_BROADCAST (lz_rtnl_addr_add), then with one by hand. */
	if (r >= 0)
		r = lz_rtnl_addr_add(&nl, rt0, IP(10, 137, 54, 100), 24, RT_SCOPE_UNIVERSE);
	if (r >= 0)
		r = addr_add_by_hand("rt0", "192.0.2.5/24", "192.0.2.255") < 0 ? -EIO : 0;
	/* A loopback deny's address (netroutes.h). */
	if (r >= 0)
		r = lz_rtnl_addr_add(&nl, lo, IP(10, 0, 0, 1), 8, RT_SCOPE_HOST);
	if (r >= 0)
		r = lz_rtnl_dump_addrs(&nl, AF_INET, &v4);
	if (r >= 0 && have_v6) {
		/* ::1 comes with lo up unless this namespace starts IPv6-disabled. */
		char c = '1';
		int fd = open("/proc/sys/net/ipv6/conf/lo/disable_ipv6", O_RDONLY | O_CLOEXEC);
		if (fd >= 0 && read(fd, &c, 1) == 1)
			lo_v6 = c == '0';
		if (fd >= 0)
			close(fd);
		r6 = lz_rtnl_dump_addrs(&nl, AF_INET6, &v6);
	}
	lz_rtnl_close(&nl);
	if (r < 0 || r6 < 0) {
		lz_rtnl_addrs_free(&v4);
		lz_rtnl_addrs_free(&v6);
		CHECK(false, "setup / dump: %s", strerror(r < 0 ? -r : -r6));
	}

	const struct lz_rtnl_addr *a = find_addr4(&v4, rt0, IP(10, 137, 54, 100));
	const struct lz_rtnl_addr *b = find_addr4(&v4, rt0, IP(192, 0, 2, 5));
	const struct lz_rtnl_addr *d = find_addr4(&v4, lo, IP(10, 0, 0, 1));
	const struct lz_rtnl_addr *l = find_addr4(&v4, lo, IP(127, 0, 0, 1));
	bool a_ok = a && a->plen == 24 && !a->has_brd;
	bool b_ok = b && b->plen == 24 && b->has_brd && b->brd == IP(192, 0, 2, 255);
	bool d_ok = d && d->plen == 8 && !d->has_brd;
	bool l_ok = l && l->plen == 8;
	size_t n4 = v4.n, other4 = 0;
	for (size_t i = 0; i < v4.n; i++)
		other4 += v4.v[i].family != AF_INET;
	/* IPv6: ::1/128 on lo once lo is up; no IPv4 address in that list. */
	static const uint8_t one[16] = { [15] = 1 };
	size_t other6 = 0, loop6 = 0;
	for (size_t i = 0; i < v6.n; i++) {
		if (v6.v[i].family != AF_INET6)
			other6++;
		else if (v6.v[i].ifindex == lo && v6.v[i].plen == 128 && memcmp(v6.v[i].local, one, 16) == 0)
			loop6++;
	}
	lz_rtnl_addrs_free(&v4);
	lz_rtnl_addrs_free(&v6);
	CHECK(a_ok, "10.137.54.100/24 on rt0, without broadcast");
	CHECK(b_ok, "192.0.2.5/24 on rt0 with broadcast 192.0.2.255 in host order");
	CHECK(d_ok, "10.0.0.1/8 on lo");
	CHECK(l_ok, "127.0.0.1/8 on lo");
	CHECK(n4 == 4 && other4 == 0, "%zu IPv4 entries (%zu of another family), want 4", n4, other4);
	CHECK(loop6 == (lo_v6 ? 1u : 0u) && other6 == 0, "IPv6 (%s on lo): %zu x ::1/128 on lo, %zu of another family",
	      lo_v6 ? "on" : "off", loop6, other6);
	return 0;
}

static void test_lz_rtnl_dump_addrs__family_address_length_broadcast(void **state)
{
	(void)state;
	run_in_netns(body_addrs);
}

/* ---- pure tests (no kernel) --------------------------------------------- */

static void test_lz_rtnl_vec_push__bounded_and_preserving(void **state)
{
	(void)state;
	uint32_t *v = NULL;
	size_t n = 0, cap = 0;

	for (uint32_t i = 0; i < LZ_RTNL_DUMP_MAX; i++) {
		assert_int_equal(lz_rtnl_vec_push(&v, &n, &cap, sizeof(*v), &i), 0);
		assert_true(cap >= n && cap <= LZ_RTNL_DUMP_MAX);
	}
	assert_int_equal(n, LZ_RTNL_DUMP_MAX);
	/* One more is refused and changes nothing. */
	uint32_t extra = 0xdeadbeef;
	uint32_t *before = v;
	assert_int_equal(lz_rtnl_vec_push(&v, &n, &cap, sizeof(*v), &extra), -E2BIG);
	assert_ptr_equal(v, before);
	assert_int_equal(n, LZ_RTNL_DUMP_MAX);
	assert_int_equal(cap, LZ_RTNL_DUMP_MAX);
	for (uint32_t i = 0; i < LZ_RTNL_DUMP_MAX; i++)
		if (v[i] != i)
			fail_msg("element %u is %u", i, v[i]);
	free(v);
}

static void test_lz_rtnl_get_u32__length_checked(void **state)
{
	(void)state;
	struct {
		struct nlattr h;
		uint8_t data[8];
	} a;
	uint32_t got = 77, want = htonl(IP(10, 137, 54, 2));

	memset(&a, 0, sizeof(a));
	memcpy(a.data, &want, 4);
	a.h.nla_type = RTA_GATEWAY;
	a.h.nla_len = NLA_HDRLEN + 4;
	assert_int_equal(lz_rtnl_get_u32(&a.h, &got), 0);
	/* As it is: an address stays in network order. */
	assert_int_equal(got, want);
	got = 77;
	a.h.nla_len = NLA_HDRLEN + 2;
	assert_int_equal(lz_rtnl_get_u32(&a.h, &got), -EBADMSG);
	a.h.nla_len = NLA_HDRLEN + 8;
	assert_int_equal(lz_rtnl_get_u32(&a.h, &got), -EBADMSG);
	a.h.nla_len = NLA_HDRLEN;
	assert_int_equal(lz_rtnl_get_u32(&a.h, &got), -EBADMSG);
	/* Untouched on failure. */
	assert_int_equal(got, 77);
}

static void test_lz_rtnl_link_by_name__whole_name_only(void **state)
{
	(void)state;
	struct lz_rtnl_link v[] = {
		{ .ifindex = 1, .flags = IFF_LOOPBACK, .name = "lo" },
		{ .ifindex = 7, .name = "tap00" },
		{ .ifindex = 3, .name = "tap0" },
		{ .ifindex = 9, .name = "fifteen-chars-x" },
	};
	struct lz_rtnl_links l = { .v = v, .n = 4, .cap = 4 };

	assert_ptr_equal(lz_rtnl_link_by_name(&l, "tap0"), &v[2]);
	assert_ptr_equal(lz_rtnl_link_by_name(&l, "tap00"), &v[1]);
	assert_ptr_equal(lz_rtnl_link_by_name(&l, "fifteen-chars-x"), &v[3]);
	assert_null(lz_rtnl_link_by_name(&l, "tap"));
	assert_null(lz_rtnl_link_by_name(&l, "fifteen-chars-"));
	assert_null(lz_rtnl_link_by_name(&l, ""));
	assert_ptr_equal(lz_rtnl_link_by_index(&l, 3), &v[2]);
	assert_ptr_equal(lz_rtnl_link_by_index(&l, 1), &v[0]);
	assert_null(lz_rtnl_link_by_index(&l, 2));
	assert_null(lz_rtnl_link_by_index(&l, 0));
	/* An empty list finds nothing. */
	struct lz_rtnl_links none = { 0 };
	assert_null(lz_rtnl_link_by_name(&none, "lo"));
	assert_null(lz_rtnl_link_by_index(&none, 1));
	/* Freeing an empty list is safe and leaves it empty. */
	lz_rtnl_links_free(&none);
	assert_null(none.v);
	struct lz_rtnl_addrs no_addrs = { 0 };
	lz_rtnl_addrs_free(&no_addrs);
	assert_null(no_addrs.v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_rtnl_vec_push__bounded_and_preserving),
		cmocka_unit_test(test_lz_rtnl_get_u32__length_checked),
		cmocka_unit_test(test_lz_rtnl_link_by_name__whole_name_only),
		cmocka_unit_test(test_lz_rtnl_dump_links__every_link_with_index_and_flags),
		cmocka_unit_test(test_lz_rtnl_dump_addrs__family_address_length_broadcast),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
