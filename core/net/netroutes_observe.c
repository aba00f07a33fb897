/* Observing the routes of the enforcement network namespace
 * (netroutes_observe.h; spec 3.7, SR-6).
 *
 * Messages are parsed with libnl-3's message API rather than libnl-route's
 * object caches: a cache merges objects with equal identity keys, so a
 * second route alias with the same destination, TOS and metric
 * (NLM_F_APPEND) would vanish from the observation, and the cache parsers drop
 * attributes they do not know. Here every attribute of a route is either
 * projected, deliberately excluded, or marks the route as unmatchable.
 *
 * One netlink socket per public call; it is never reused after a dump was
 * stopped early. Kernel refusals are taken from the NLMSG_ERROR itself (exact
 * errno plus the extended-ack text), not from libnl's reduced error codes. */
#include "net/netroutes_observe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/socket.h>

#include "net/rtnl.h"

/* The collections in rtnl.c and the routes here share the module's limit. */
_Static_assert(LZ_RTNL_DUMP_MAX == LZ_NETROUTES_MAX, "rtnl's dump limit is netroutes' limit");

static int kroute_qsort_cmp(const void *a, const void *b)
{
	return lz_kroute_compare(a, b);
}

/* ---- IPv4 routes -------------------------------------------------------- */

struct routes {
	const struct lz_rtnl_links *links;
	struct lz_kroute *v;
	size_t n, cap;
};

static void routes_free(struct routes *r)
{
	free(r->v);
	r->v = NULL;
	r->n = r->cap = 0;
}

/* Projects one RTM_NEWROUTE (IPv4). *cloned is set for cache entries. */
static int parse_route4(const struct nlmsghdr *h, const struct lz_rtnl_links *links, struct lz_kroute *r,
			bool *cloned)
{
	struct nlattr *a;
	uint32_t v, oif = 0;
	int rem;

	if (!nlmsg_valid_hdr(h, sizeof(struct rtmsg)))
		return -EBADMSG;
	const struct rtmsg *rtm = nlmsg_data(h);
	if (rtm->rtm_family != AF_INET || rtm->rtm_dst_len > 32)
		return -EBADMSG;
	memset(r, 0, sizeof(*r));
	*cloned = rtm->rtm_flags & RTM_F_CLONED;
	r->table = rtm->rtm_table;
	r->dst.len = rtm->rtm_dst_len;
	r->tos = rtm->rtm_tos;
	r->type = rtm->rtm_type;
	r->scope = rtm->rtm_scope;
	r->protocol = rtm->rtm_protocol;
	if (rtm->rtm_src_len)
		r->extra |= LZ_KROUTE_X_SRC;
	/* Next-hop flags of a single-path IPv4 route travel in rtm_flags.
	 * LINKDOWN, OFFLOAD, TRAP are state; these three change the lookup. */
	if (rtm->rtm_flags & RTNH_F_ONLINK)
		r->extra |= LZ_KROUTE_X_ONLINK;
	if (rtm->rtm_flags & RTNH_F_PERVASIVE)
		r->extra |= LZ_KROUTE_X_PERVASIVE;
	if (rtm->rtm_flags & RTNH_F_DEAD)
		r->extra |= LZ_KROUTE_X_DEAD;

	nlmsg_for_each_attr(a, h, sizeof(struct rtmsg), rem) {
		switch (nla_type(a)) {
		case RTA_TABLE:
			if (lz_rtnl_get_u32(a, &r->table) < 0)
				return -EBADMSG;
			break;
		case RTA_DST:
			if (lz_rtnl_get_u32(a, &v) < 0)
				return -EBADMSG;
			r->dst.addr = ntohl(v) & lz_prefix_mask(r->dst.len);
			break;
		case RTA_GATEWAY:
			if (lz_rtnl_get_u32(a, &v) < 0)
				return -EBADMSG;
			r->gateway = ntohl(v);
			break;
		case RTA_OIF:
			if (lz_rtnl_get_u32(a, &oif) < 0)
				return -EBADMSG;
			break;
		case RTA_PRIORITY:
			if (lz_rtnl_get_u32(a, &r->priority) < 0)
				return -EBADMSG;
			break;
		/* Excluded: presentation, counters, classification, caller identity. */
		case RTA_PREFSRC:
		case RTA_CACHEINFO:
		case RTA_METRICS:
		case RTA_FLOW:
		case RTA_UID:
		case RTA_MARK:
			break;
		case RTA_MULTIPATH: r->extra |= LZ_KROUTE_X_MULTIPATH; break;
		case RTA_ENCAP:
		case RTA_ENCAP_TYPE: r->extra |= LZ_KROUTE_X_ENCAP; break;
		case RTA_NH_ID: r->extra |= LZ_KROUTE_X_NHID; break;
		case RTA_VIA: r->extra |= LZ_KROUTE_X_VIA; break;
		case RTA_SRC: r->extra |= LZ_KROUTE_X_SRC; break;
		case RTA_IIF: r->extra |= LZ_KROUTE_X_IIF; break;
		default: r->extra |= LZ_KROUTE_X_OTHER; break;
		}
	}
	if (oif) {
		const struct lz_rtnl_link *l = lz_rtnl_link_by_index(links, (int)oif);
		if (l)
			memcpy(r->dev, l->name, sizeof(r->dev));
		else
			r->extra |= LZ_KROUTE_X_UNKNOWN_DEV;
	}
	return 0;
}

static int on_route4(const struct nlmsghdr *h, void *arg)
{
	struct routes *l = arg;
	struct lz_kroute r;
	bool cloned;

	if (h->nlmsg_type != RTM_NEWROUTE)
		return 0;
	int ret = parse_route4(h, l->links, &r, &cloned);
	if (ret < 0)
		return ret;
	if (cloned) /* route cache / exceptions: not policy */
		return 0;
	return lz_rtnl_vec_push(&l->v, &l->n, &l->cap, sizeof(r), &r);
}

/* Whether r is one of the table-local routes the kernel derives from an
 * interface address (fib_add_ifaddr): they deliver to this host. The prefix
 * route of an address outside 127.0.0.0/8 on a loopback device is NOT one of
 * them: it is the loopback-address deny (netroutes.h) and is observed, and so
 * is the /32 local route of such an address when its prefix length is 32
 * (then it is that prefix route). */
static bool derived_from_address(const struct lz_kroute *r, const struct lz_rtnl_links *links,
				 const struct lz_rtnl_addrs *addrs)
{
	if (r->table != RT_TABLE_LOCAL || r->protocol != RTPROT_KERNEL || r->extra || r->gateway || r->tos ||
	    r->priority || !r->dev[0])
		return false;
	const struct lz_rtnl_link *l = lz_rtnl_link_by_name(links, r->dev);
	if (!l)
		return false;
	for (size_t i = 0; i < addrs->n; i++) {
		const struct lz_rtnl_addr *a = &addrs->v[i];
		if (a->family != AF_INET || a->ifindex != l->ifindex || a->plen > 32)
			continue;
		uint32_t local, m = lz_prefix_mask(a->plen);
		memcpy(&local, a->local, 4);
		local = ntohl(local);
		if (r->type == RTN_LOCAL) {
			bool lo_deny = (l->flags & IFF_LOOPBACK) && local >> 24 != 127;
			if (r->dst.len == 32 && r->dst.addr == local && !(lo_deny && a->plen == 32))
				return true;
			if ((l->flags & IFF_LOOPBACK) && !lo_deny && r->dst.len == a->plen &&
			    r->dst.addr == (local & m))
				return true;
		} else if (r->type == RTN_BROADCAST && r->dst.len == 32) {
			if (a->has_brd && r->dst.addr == a->brd)
				return true;
			if (a->plen < 31 && (r->dst.addr == ((local & m) | ~m) || r->dst.addr == (local & m)))
				return true;
		}
	}
	return false;
}

/* Full observation on nl; protocol is kept for install's connected-route
 * check. Sorted. */
int lz_netroutes_observe_on(struct lz_rtnl *nl, struct lz_rtnl_links *links, struct lz_kroute **ret,
			    size_t *ret_n, struct lz_err *err)
{
	struct rtmsg rtm = { .rtm_family = AF_INET };
	struct lz_rtnl_addrs addrs = { 0 };
	struct routes routes = { .links = links };
	int r = -EAGAIN;

	for (int attempt = 0; attempt < LZ_RTNL_DUMP_ATTEMPTS && r == -EAGAIN; attempt++) {
		lz_rtnl_links_free(links);
		lz_rtnl_addrs_free(&addrs);
		routes_free(&routes);
		r = lz_rtnl_dump_links(nl, links);
		if (r >= 0)
			r = lz_rtnl_dump_addrs(nl, AF_INET, &addrs);
		if (r >= 0)
			r = lz_rtnl_dump(nl, RTM_GETROUTE, &rtm, sizeof(rtm), on_route4, &routes);
	}
	if (r < 0) {
		lz_rtnl_links_free(links);
		lz_rtnl_addrs_free(&addrs);
		routes_free(&routes);
		if (r == -E2BIG)
			return lz_err_set(err, E2BIG, "observing routes: more than %u entries", LZ_NETROUTES_MAX);
		return lz_err_set(err, r, "observing routes: %s%s%s", strerror(-r), nl->kmsg[0] ? ": " : "",
				  nl->kmsg);
	}

	size_t m = 0;
	for (size_t i = 0; i < routes.n; i++)
		if (!derived_from_address(&routes.v[i], links, &addrs))
			routes.v[m++] = routes.v[i];
	lz_rtnl_addrs_free(&addrs);
	if (m)
		qsort(routes.v, m, sizeof(*routes.v), kroute_qsort_cmp);
	else
		routes_free(&routes);
	*ret = routes.v;
	*ret_n = m;
	return 0;
}

int lz_netroutes_observe(struct lz_kroute **ret, size_t *ret_n, struct lz_err *err)
{
	_cleanup_rtnl_ struct lz_rtnl nl = { 0 };
	struct lz_rtnl_links links = { 0 };
	struct lz_kroute *v = NULL;
	size_t n = 0;

	int r = lz_rtnl_open(&nl, "observing routes", err);
	if (r < 0)
		return r;
	r = lz_netroutes_observe_on(&nl, &links, &v, &n, err);
	lz_rtnl_links_free(&links);
	if (r < 0)
		return r;
	*ret = v;
	*ret_n = n;
	return 0;
}

/* ---- lookup ------------------------------------------------------------- */

struct lookup {
	const struct lz_rtnl_links *links;
	struct lz_kroute r;
	bool got;
};

static int on_lookup(const struct nlmsghdr *h, void *arg)
{
	struct lookup *l = arg;
	bool cloned;
	if (h->nlmsg_type != RTM_NEWROUTE || l->got)
		return 0;
	int r = parse_route4(h, l->links, &l->r, &cloned);
	if (r < 0)
		return r;
	l->got = true;
	return 0;
}

int lz_netroutes_lookup(uint32_t dst, struct lz_kroute *ret, struct lz_err *err)
{
	_cleanup_rtnl_ struct lz_rtnl nl = { 0 };
	struct lz_rtnl_links links = { 0 };
	struct lookup lk = { .links = &links };
	struct rtmsg rtm = { .rtm_family = AF_INET, .rtm_dst_len = 32 };
	char text[LZ_IPV4_STR_MAX];
	int r;

	lz_ipv4_format(dst, text);
	r = lz_rtnl_open(&nl, "route lookup", err);
	if (r < 0)
		return r;
	r = lz_rtnl_dump_links(&nl, &links);
	if (r < 0) {
		lz_rtnl_links_free(&links);
		return lz_err_set(err, r, "route lookup for %s: listing links: %s", text, strerror(-r));
	}

	struct nl_msg *msg = nlmsg_alloc_simple(RTM_GETROUTE, NLM_F_REQUEST);
	if (!msg || nlmsg_append(msg, &rtm, sizeof(rtm), NLMSG_ALIGNTO) < 0 ||
	    nla_put_u32(msg, RTA_DST, htonl(dst)) < 0) {
		nlmsg_free(msg);
		lz_rtnl_links_free(&links);
		return lz_err_set(err, ENOMEM, "route lookup for %s: out of memory", text);
	}
	/* The reply is the route or an NLMSG_ERROR; no separate ack. */
	nl_socket_disable_auto_ack(nl.sk);
	r = lz_rtnl_request(&nl, msg, on_lookup, &lk);
	lz_rtnl_links_free(&links);
	if (r >= 0 && !lk.got)
		r = -EPROTO;
	if (r < 0)
		return lz_err_set(err, r, "route lookup for %s: %s%s%s", text, strerror(-r), nl.kmsg[0] ? ": " : "",
				  nl.kmsg);
	*ret = lk.r;
	return 0;
}
