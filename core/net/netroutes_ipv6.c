/* IPv6 off and its check (netroutes_ipv6.h; spec 3.7).
 *
 * The sysctl files are opened beneath /proc (checked to be procfs) without
 * following symlinks or crossing mounts. The check reads links,
 * addresses and routes in one socket's dumps, repeated while the kernel
 * flags them interrupted, and parses routes with libnl-3's message API (see
 * netroutes_observe.c). */
#include "net/netroutes_ipv6.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <netlink/attr.h>
#include <netlink/msg.h>

#include "net/rtnl.h"
#include "util/cleanup.h"
#include "util/sys.h"

static int open_sysctl(int conf, const char *name, int flags, int *ret, struct lz_err *err)
{
	int fd = lz_openat2(conf, name, flags | O_CLOEXEC | O_NOFOLLOW, LZ_RESOLVE_OWNED);
	if (fd < 0)
		return lz_err_set(err, errno, "opening /proc/sys/net/ipv6/conf/%s: %m", name);
	*ret = fd;
	return 0;
}

int lz_netroutes_disable_ipv6(struct lz_err *err)
{
	static const char *const files[] = { "default/disable_ipv6", "all/disable_ipv6" };
	_cleanup_close_ int proc = -EBADF, conf = -EBADF;
	struct statfs sfs;
	int r;

	proc = open("/proc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (proc < 0)
		return lz_err_set(err, errno, "opening /proc: %m");
	if (fstatfs(proc, &sfs) < 0)
		return lz_err_set(err, errno, "statfs /proc: %m");
	if (sfs.f_type != PROC_SUPER_MAGIC)
		return lz_err_set(err, EXDEV, "/proc is not procfs");
	conf = lz_openat2(proc, "sys/net/ipv6/conf", O_PATH | O_DIRECTORY | O_CLOEXEC, LZ_RESOLVE_OWNED);
	if (conf < 0) {
		if (errno == ENOENT)
			return 1; /* no IPv6 in this kernel */
		return lz_err_set(err, errno, "opening /proc/sys/net/ipv6/conf: %m");
	}

	/* default first, so a device created meanwhile starts disabled. */
	for (size_t i = 0; i < LZ_ARRAY_SIZE(files); i++) {
		_cleanup_close_ int fd = -EBADF;
		r = open_sysctl(conf, files[i], O_WRONLY, &fd, err);
		if (r < 0)
			return r;
		ssize_t w = write(fd, "1\n", 2);
		if (w != 2)
			return lz_err_set(err, w < 0 ? errno : EIO, "writing /proc/sys/net/ipv6/conf/%s: %m",
					  files[i]);
	}
	for (size_t i = 0; i < LZ_ARRAY_SIZE(files); i++) {
		_cleanup_close_ int fd = -EBADF;
		char buf[8];
		r = open_sysctl(conf, files[i], O_RDONLY, &fd, err);
		if (r < 0)
			return r;
		ssize_t got = read(fd, buf, sizeof(buf));
		if (got < 0)
			return lz_err_set(err, errno, "reading /proc/sys/net/ipv6/conf/%s: %m", files[i]);
		if (got != 2 || memcmp(buf, "1\n", 2) != 0)
			return lz_err_set(err, EPROTO, "/proc/sys/net/ipv6/conf/%s does not read back 1", files[i]);
	}
	return 0;
}

struct v6routes {
	const struct lz_rtnl_links *links;
	const char *offender; /* first non-loopback route seen, static text */
	char text[96];
};

static bool is_loopback6(const uint8_t a[16])
{
	static const uint8_t one[16] = { [15] = 1 };
	return memcmp(a, one, 16) == 0;
}

static bool link_is_loopback(const struct lz_rtnl_links *l, int ifindex)
{
	const struct lz_rtnl_link *k = lz_rtnl_link_by_index(l, ifindex);
	return k && (k->flags & IFF_LOOPBACK);
}

static int on_route6(const struct nlmsghdr *h, void *arg)
{
	struct v6routes *s = arg;
	const struct nlattr *dst = NULL;
	struct nlattr *a;
	uint32_t oif = 0;
	bool other = false;
	int rem;

	if (h->nlmsg_type != RTM_NEWROUTE || s->offender)
		return 0;
	if (!nlmsg_valid_hdr(h, sizeof(struct rtmsg)))
		return -EBADMSG;
	const struct rtmsg *rtm = nlmsg_data(h);
	if (rtm->rtm_family != AF_INET6 || (rtm->rtm_flags & RTM_F_CLONED))
		return 0;
	nlmsg_for_each_attr(a, h, sizeof(struct rtmsg), rem) {
		switch (nla_type(a)) {
		case RTA_DST: dst = a; break;
		case RTA_OIF:
			if (lz_rtnl_get_u32(a, &oif) < 0)
				return -EBADMSG;
			break;
		case RTA_MULTIPATH:
		case RTA_NH_ID:
		case RTA_GATEWAY:
		case RTA_VIA:
		case RTA_ENCAP: other = true; break;
		default: break;
		}
	}
	if (!other && rtm->rtm_dst_len == 128 && dst && nla_len(dst) == 16 && is_loopback6(nla_data(dst)) &&
	    link_is_loopback(s->links, (int)oif))
		return 0;
	char addr[INET6_ADDRSTRLEN] = "::";
	if (dst && nla_len(dst) == 16)
		inet_ntop(AF_INET6, nla_data(dst), addr, sizeof(addr));
	const struct lz_rtnl_link *l = lz_rtnl_link_by_index(s->links, (int)oif);
	snprintf(s->text, sizeof(s->text), "%s/%u dev %s", addr, rtm->rtm_dst_len, l ? l->name : "?");
	s->offender = s->text;
	return 0;
}

int lz_netroutes_ipv6_clean(bool *ret, struct lz_err *err)
{
	_cleanup_rtnl_ struct lz_rtnl nl = { 0 };
	struct lz_rtnl_links links = { 0 };
	struct lz_rtnl_addrs addrs = { 0 };
	struct v6routes routes = { .links = &links };
	struct rtmsg rtm = { .rtm_family = AF_INET6 };
	bool clean = true;
	int r;

	r = lz_rtnl_open(&nl, "checking IPv6", err);
	if (r < 0)
		return r;
	r = -EAGAIN;
	for (int attempt = 0; attempt < LZ_RTNL_DUMP_ATTEMPTS && r == -EAGAIN; attempt++) {
		lz_rtnl_links_free(&links);
		lz_rtnl_addrs_free(&addrs);
		routes.offender = NULL;
		r = lz_rtnl_dump_links(&nl, &links);
		if (r >= 0)
			r = lz_rtnl_dump_addrs(&nl, AF_INET6, &addrs);
		if (r >= 0)
			r = lz_rtnl_dump(&nl, RTM_GETROUTE, &rtm, sizeof(rtm), on_route6, &routes);
	}
	if (r < 0) {
		lz_rtnl_links_free(&links);
		lz_rtnl_addrs_free(&addrs);
		/* A kernel without IPv6 has no addresses or routes to refuse. */
		if (r == -EAFNOSUPPORT) {
			*ret = true;
			return 0;
		}
		return lz_err_set(err, r, "checking IPv6: %s%s%s", strerror(-r), nl.kmsg[0] ? ": " : "", nl.kmsg);
	}
	for (size_t i = 0; i < addrs.n; i++) {
		const struct lz_rtnl_addr *a = &addrs.v[i];
		if (a->family != AF_INET6)
			continue;
		if (!(a->plen == 128 && is_loopback6(a->local) && link_is_loopback(&links, a->ifindex)))
			clean = false;
	}
	if (routes.offender)
		clean = false;
	lz_rtnl_links_free(&links);
	lz_rtnl_addrs_free(&addrs);
	*ret = clean;
	return 0;
}
