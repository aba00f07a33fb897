/* Installing the route policy (netroutes_install.h; spec 3.7, SR-6).
 *
 * Messages are built with libnl-3's message API (as netroutes_observe.c
 * parses them), so every attribute sent is one this file chose. One netlink
 * socket per public call; the observation that precedes a change runs on the
 * same socket. Kernel refusals are taken from the NLMSG_ERROR itself (exact
 * errno plus the extended-ack text), not from libnl's reduced error codes. */
#include "net/netroutes_install.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <netlink/attr.h>
#include <netlink/msg.h>

#include "net/netroutes_observe.h"
#include "net/rtnl.h"
#include "util/cleanup.h"

static int kroute_qsort_cmp(const void *a, const void *b)
{
	return lz_kroute_compare(a, b);
}

/* ---- install, delete ---------------------------------------------------- */

static int route_msg(struct nl_msg **ret, int type, int flags, const struct lz_kroute *r, uint8_t protocol,
		     int oif)
{
	struct rtmsg rtm = {
		.rtm_family = AF_INET,
		.rtm_dst_len = r->dst.len,
		.rtm_tos = r->tos,
		.rtm_table = r->table < 256 ? (uint8_t)r->table : RT_TABLE_UNSPEC,
		.rtm_protocol = protocol,
		.rtm_scope = r->scope,
		.rtm_type = r->type,
	};
	struct nl_msg *msg = nlmsg_alloc_simple(type, flags);
	if (!msg)
		return -ENOMEM;
	if (nlmsg_append(msg, &rtm, sizeof(rtm), NLMSG_ALIGNTO) < 0 || nla_put_u32(msg, RTA_TABLE, r->table) < 0 ||
	    (r->dst.len && nla_put_u32(msg, RTA_DST, htonl(r->dst.addr)) < 0) ||
	    (r->priority && nla_put_u32(msg, RTA_PRIORITY, r->priority) < 0) ||
	    (oif && nla_put_u32(msg, RTA_OIF, (uint32_t)oif) < 0) ||
	    (r->gateway && nla_put_u32(msg, RTA_GATEWAY, htonl(r->gateway)) < 0)) {
		nlmsg_free(msg);
		return -ENOMEM;
	}
	*ret = msg;
	return 0;
}

static int refuse_route(struct lz_err *err, int r, const struct lz_rtnl *nl, const char *op, const struct lz_kroute *k)
{
	char text[LZ_KROUTE_STR_MAX];
	lz_kroute_format(k, text);
	return lz_err_set(err, r, "%s route '%s': %s%s%s", op, text, strerror(-r), nl->kmsg[0] ? ": " : "",
			  nl->kmsg);
}

/* Install order: on-link routes (they make the gateway reachable), denies,
 * then routes via the gateway. */
static int install_pass(const struct lz_kroute *r)
{
	if (r->gateway)
		return 2;
	return strcmp(r->dev, "lo") == 0 ? 1 : 0;
}

/* The loopback address that stands for a deny of p (netroutes.h). */
static uint32_t deny_address(struct lz_prefix p)
{
	return p.len >= 31 ? p.addr : p.addr + 1;
}

/* RTM_NEWADDR <deny_address(p)>/<p.len> dev lo scope host, exclusive; no
 * IFA_F_NOPREFIXROUTE: the kernel's prefix route is the deny. */
static int add_lo_deny(struct lz_rtnl *nl, int lo_index, struct lz_prefix p, struct lz_err *err)
{
	char text[LZ_PREFIX_STR_MAX], host[LZ_IPV4_STR_MAX];
	int r = lz_rtnl_addr_add(nl, lo_index, deny_address(p), p.len, RT_SCOPE_HOST);
	if (r < 0) {
		lz_prefix_format(p, text);
		lz_ipv4_format(deny_address(p), host);
		return lz_err_set(err, r, "installing the loopback deny of %s (address %s/%u dev lo): %s%s%s", text,
				  host, p.len, strerror(-r), nl->kmsg[0] ? ": " : "", nl->kmsg);
	}
	return 0;
}

/* Index of lo, which must be up: the kernel adds an address's routes only
 * while its device is up. */
static int lo_up_index(struct lz_rtnl *nl, const char *op, int *ret, struct lz_err *err)
{
	struct lz_rtnl_links links = { 0 };
	int r = lz_rtnl_dump_links(nl, &links);
	if (r < 0) {
		lz_rtnl_links_free(&links);
		return lz_err_set(err, r, "%s: listing links: %s", op, strerror(-r));
	}
	const struct lz_rtnl_link *lo = lz_rtnl_link_by_name(&links, "lo");
	int index = lo ? lo->ifindex : 0;
	bool up = lo && (lo->flags & IFF_UP);
	lz_rtnl_links_free(&links);
	if (!index)
		return lz_err_set(err, ENODEV, "%s: device 'lo' not found", op);
	if (!up)
		return lz_err_set(err, ENETDOWN, "%s: device 'lo' is down", op);
	*ret = index;
	return 0;
}

int lz_netroutes_install_loopback_denies(const struct lz_netroutes_entry *entries, size_t n, struct lz_err *err)
{
	static const char op[] = "installing loopback denies";
	_cleanup_rtnl_ struct lz_rtnl nl = { 0 };
	_cleanup_free_ struct lz_prefix *denies = NULL;
	size_t m = 0;
	int lo_index = 0, r;

	r = lz_netroutes_deny_prefixes(entries, n, &denies, &m, err);
	if (r < 0)
		return lz_err_prefix(err, r, "%s: ", op);
	if (m == 0)
		return 0;
	r = lz_rtnl_open(&nl, op, err);
	if (r >= 0)
		r = lo_up_index(&nl, op, &lo_index, err);
	for (size_t i = 0; r >= 0 && i < m; i++)
		r = add_lo_deny(&nl, lo_index, denies[i], err);
	return r < 0 ? r : 0;
}

int lz_netroutes_install(const struct lz_netroutes_entry *routes, size_t n, const char *dev, uint32_t gateway,
			 struct lz_err *err)
{
	return lz_netroutes_install_as(routes, n, dev, gateway, LZ_NETROUTES_DENY_AS_ROUTE, err);
}

int lz_netroutes_install_as(const struct lz_netroutes_entry *routes, size_t n, const char *dev, uint32_t gateway,
			    enum lz_netroutes_deny_as deny_as, struct lz_err *err)
{
	_cleanup_rtnl_ struct lz_rtnl nl = { 0 };
	_cleanup_free_ struct lz_kroute *plan = NULL;
	_cleanup_free_ struct lz_kroute *current = NULL;
	struct lz_rtnl_links links = { 0 };
	size_t plan_n = 0, current_n = 0;
	int r;

	r = lz_netroutes_plan_as(routes, n, dev, gateway, deny_as, &plan, &plan_n, err);
	if (r < 0)
		return r;
	r = lz_rtnl_open(&nl, "installing routes", err);
	if (r < 0)
		return r;
	r = lz_netroutes_observe_on(&nl, &links, &current, &current_n, err);
	if (r < 0)
		return lz_err_prefix(err, r, "installing routes: ");

	const struct lz_rtnl_link *dl = lz_rtnl_link_by_name(&links, dev);
	const struct lz_rtnl_link *lo = lz_rtnl_link_by_name(&links, "lo");
	const struct lz_rtnl_link *cl = lz_rtnl_link_by_name(&links, LZ_NETROUTES_CANARY_DEV);
	const struct lz_rtnl_link *el = lz_rtnl_link_by_name(&links, LZ_NETROUTES_EGRESS_DEV);
	int dev_index = dl ? dl->ifindex : 0, lo_index = lo ? lo->ifindex : 0;
	int canary_index = cl ? cl->ifindex : 0, egress_index = el ? el->ifindex : 0;
	unsigned lo_flags = lo ? lo->flags : 0;
	lz_rtnl_links_free(&links);
	if (!dev_index)
		return lz_err_set(err, ENODEV, "installing routes: device '%s' not found", dev);
	if (!lo_index)
		return lz_err_set(err, ENODEV, "installing routes: device 'lo' not found");

	for (int pass = 0; pass < 3; pass++) {
		for (size_t i = 0; i < plan_n; i++) {
			const struct lz_kroute *p = &plan[i];
			if (install_pass(p) != pass)
				continue;
			if (pass == 0) {
				/* The kernel's connected route for dev's address is
				 * this on-link route already (netroutes.h). */
				const struct lz_kroute *c = NULL;
				if (current_n)
					c = bsearch(p, current, current_n, sizeof(*current), kroute_qsort_cmp);
				if (c && c->protocol == RTPROT_KERNEL)
					continue;
			}
			if (p->type == RTN_LOCAL) { /* deny as a loopback address */
				if (!(lo_flags & IFF_UP))
					return lz_err_set(err, ENETDOWN, "installing routes: device 'lo' is down");
				r = add_lo_deny(&nl, lo_index, p->dst, err);
				if (r < 0)
					return r;
				continue;
			}
			int oif = pass == 1 ? lo_index : dev_index;
			if (strcmp(p->dev, LZ_NETROUTES_CANARY_DEV) == 0)
				oif = canary_index;
			else if (strcmp(p->dev, LZ_NETROUTES_EGRESS_DEV) == 0)
				oif = egress_index;
			if (!oif)
				return lz_err_set(err, ENODEV, "installing routes: device '%s' not found", p->dev);
			struct nl_msg *msg = NULL;
			r = route_msg(&msg, RTM_NEWROUTE, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, p,
				      RTPROT_STATIC, oif);
			if (r >= 0)
				r = lz_rtnl_transact(&nl, msg);
			if (r < 0)
				return refuse_route(err, r, &nl, "installing", p);
		}
	}
	/* Denies in 0.0.0.0/8 and 224.0.0.0/4 are not in the plan (Linux
	 * makes no prefix route of their loopback address, netroutes.h), but
	 * their addresses are what gVisor imports: they are added all the
	 * same, and lz_netroutes_check_unrouted_denies checks them. */
	for (size_t i = 0; deny_as == LZ_NETROUTES_DENY_AS_ADDRESS && i < n; i++) {
		struct lz_prefix p = routes[i].prefix;
		if (!lz_netroutes_unrouted_deny(&routes[i]))
			continue;
		if (!(lo_flags & IFF_UP))
			return lz_err_set(err, ENETDOWN, "installing routes: device 'lo' is down");
		if ((r = add_lo_deny(&nl, lo_index, p, err)) < 0)
			return r;
	}
	return 0;
}

int lz_netroutes_check_unrouted_denies(const struct lz_netroutes_entry *routes, size_t n,
				       struct lz_err *err)
{
	static const char op[] = "checking the loopback denies without a prefix route";
	_cleanup_rtnl_ struct lz_rtnl nl = { 0 };
	struct lz_rtnl_addrs addrs = { 0 };
	int lo_index = 0;
	int r = lz_rtnl_open(&nl, op, err);
	if (r >= 0)
		r = lo_up_index(&nl, op, &lo_index, err);
	if (r >= 0 && (r = lz_rtnl_dump_addrs(&nl, AF_INET, &addrs)) < 0)
		r = lz_err_set(err, r, "%s: listing addresses: %s", op, strerror(-r));
	for (size_t i = 0; r >= 0 && i < n; i++) {
		if (!lz_netroutes_unrouted_deny(&routes[i]))
			continue;
		uint32_t want = htonl(deny_address(routes[i].prefix));
		bool found = false;
		for (size_t k = 0; k < addrs.n && !found; k++) {
			const struct lz_rtnl_addr *a = &addrs.v[k];
			found = a->family == AF_INET && a->ifindex == lo_index &&
				a->plen == routes[i].prefix.len && memcmp(a->local, &want, 4) == 0;
		}
		if (!found) {
			char text[LZ_PREFIX_STR_MAX];
			lz_prefix_format(routes[i].prefix, text);
			r = lz_err_set(err, EPROTO, "the loopback deny of %s is not on lo", text);
		}
	}
	lz_rtnl_addrs_free(&addrs);
	return r < 0 ? r : 0;
}

int lz_netroutes_delete(const struct lz_kroute *route, struct lz_err *err)
{
	_cleanup_rtnl_ struct lz_rtnl nl = { 0 };
	_cleanup_free_ struct lz_kroute *current = NULL;
	struct lz_rtnl_links links = { 0 };
	size_t current_n = 0, same_key = 0;
	bool found = false;
	int r;

	if (route->extra)
		return refuse_route(err, -EINVAL, &nl, "deleting", route);
	r = lz_rtnl_open(&nl, "deleting a route", err);
	if (r < 0)
		return r;
	r = lz_netroutes_observe_on(&nl, &links, &current, &current_n, err);
	if (r < 0)
		return lz_err_prefix(err, r, "deleting a route: ");
	const struct lz_rtnl_link *l = route->dev[0] ? lz_rtnl_link_by_name(&links, route->dev) : NULL;
	int oif = l ? l->ifindex : 0;
	lz_rtnl_links_free(&links);

	/* The kernel's delete treats metric 0 and a missing gateway as
	 * wildcards; refuse unless this projection names exactly one route. */
	for (size_t i = 0; i < current_n; i++) {
		const struct lz_kroute *c = &current[i];
		if (c->table == route->table && lz_prefix_equal(c->dst, route->dst) && c->tos == route->tos) {
			same_key++;
			found |= lz_kroute_compare(c, route) == 0;
		}
	}
	if (!found || (route->dev[0] && !oif))
		return refuse_route(err, -ESRCH, &nl, "deleting", route);
	if (same_key != 1)
		return refuse_route(err, -ENOTUNIQ, &nl, "deleting", route);

	struct nl_msg *msg = NULL;
	r = route_msg(&msg, RTM_DELROUTE, NLM_F_REQUEST | NLM_F_ACK, route, RTPROT_UNSPEC, oif);
	if (r >= 0)
		r = lz_rtnl_transact(&nl, msg);
	if (r < 0)
		return refuse_route(err, r, &nl, "deleting", route);
	return 0;
}
