/* Route policy of the enforcement network namespace (netroutes.h; spec 3.7,
 * SR-6).
 *
 * Messages are built and parsed with libnl-3's message API rather than
 * libnl-route's object caches: a cache merges objects with equal identity
 * keys, so a second route alias with the same destination, TOS and metric
 * (NLM_F_APPEND) would vanish from the observation, and the cache parsers drop
 * attributes they do not know. Here every attribute of a route is either
 * projected, deliberately excluded, or marks the route as unmatchable.
 *
 * One netlink socket per public call; it is never reused after a dump was
 * stopped early. Kernel refusals are taken from the NLMSG_ERROR itself (exact
 * errno plus the extended-ack text), not from libnl's reduced error codes. */
#include "net/netroutes.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <netlink/attr.h>
#include <netlink/errno.h>
#include <netlink/handlers.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>

#include "net/rtnl.h"
#include "util/cleanup.h"
#include "util/sys.h"

#define DUMP_ATTEMPTS 3

/* ---- small helpers ---------------------------------------------------- */

static uint32_t mask_of(uint8_t len)
{
	return len == 0 ? 0 : ~(uint32_t)0 << (32 - len);
}

static void ip4_format(uint32_t a, char out[16])
{
	snprintf(out, 16, "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff);
}

/* Appends x to a growable array bounded by LZ_NETROUTES_MAX. */
static int vec_push(void *vp, size_t *n, size_t *cap, size_t elem, const void *x)
{
	void **v = vp;
	if (*n >= LZ_NETROUTES_MAX)
		return -E2BIG;
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		if (nc > LZ_NETROUTES_MAX)
			nc = LZ_NETROUTES_MAX;
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

/* ---- projection: compare and format ----------------------------------- */

#define CMP(x, y)                          \
	do {                               \
		if ((x) != (y))            \
			return (x) < (y) ? -1 : 1; \
	} while (0)

int lz_kroute_compare(const struct lz_kroute *a, const struct lz_kroute *b)
{
	CMP(a->table, b->table);
	int c = lz_prefix_compare(a->dst, b->dst);
	if (c)
		return c;
	CMP(a->tos, b->tos);
	CMP(a->priority, b->priority);
	CMP(a->type, b->type);
	CMP(a->scope, b->scope);
	c = strncmp(a->dev, b->dev, sizeof(a->dev));
	if (c)
		return c < 0 ? -1 : 1;
	CMP(a->gateway, b->gateway);
	CMP(a->extra, b->extra);
	return 0;
}

static int kroute_qsort_cmp(const void *a, const void *b)
{
	return lz_kroute_compare(a, b);
}

static const char *type_name(uint8_t t)
{
	switch (t) {
	case RTN_UNICAST: return "unicast";
	case RTN_LOCAL: return "local";
	case RTN_BROADCAST: return "broadcast";
	case RTN_ANYCAST: return "anycast";
	case RTN_MULTICAST: return "multicast";
	case RTN_BLACKHOLE: return "blackhole";
	case RTN_UNREACHABLE: return "unreachable";
	case RTN_PROHIBIT: return "prohibit";
	case RTN_THROW: return "throw";
	case RTN_NAT: return "nat";
	case RTN_XRESOLVE: return "xresolve";
	default: return NULL;
	}
}

static const char *scope_name(uint8_t s)
{
	switch (s) {
	case RT_SCOPE_UNIVERSE: return "global";
	case RT_SCOPE_SITE: return "site";
	case RT_SCOPE_LINK: return "link";
	case RT_SCOPE_HOST: return "host";
	case RT_SCOPE_NOWHERE: return "nowhere";
	default: return NULL;
	}
}

static const char *table_name(uint32_t t)
{
	switch (t) {
	case RT_TABLE_MAIN: return "main";
	case RT_TABLE_LOCAL: return "local";
	case RT_TABLE_DEFAULT: return "default";
	default: return NULL;
	}
}

void lz_kroute_format(const struct lz_kroute *r, char *out)
{
	static const char *const extras[] = { "multipath", "encap", "nhid", "via", "src", "iif",
					      "onlink", "pervasive", "dead", "unknown-dev", "other-attr" };
	char dst[LZ_PREFIX_STR_MAX], gw[16];
	size_t cap = LZ_KROUTE_STR_MAX, len = 0;
	int k;

#define PUT(...)                                                              \
	do {                                                                  \
		k = snprintf(out + len, cap - len, __VA_ARGS__);              \
		if (k < 0 || (size_t)k >= cap - len) {                        \
			len = cap - 1;                                        \
			goto done;                                            \
		}                                                             \
		len += (size_t)k;                                             \
	} while (0)

	out[0] = '\0';
	lz_prefix_format(r->dst, dst);
	if (type_name(r->type))
		PUT("%s %s", type_name(r->type), dst);
	else
		PUT("type %u %s", r->type, dst);
	if (r->gateway) {
		ip4_format(r->gateway, gw);
		PUT(" via %s", gw);
	}
	if (r->dev[0])
		PUT(" dev %.*s", (int)sizeof(r->dev), r->dev);
	if (r->scope != RT_SCOPE_UNIVERSE) {
		if (scope_name(r->scope))
			PUT(" scope %s", scope_name(r->scope));
		else
			PUT(" scope %u", r->scope);
	}
	if (table_name(r->table))
		PUT(" table %s", table_name(r->table));
	else
		PUT(" table %u", r->table);
	if (r->priority)
		PUT(" metric %u", r->priority);
	if (r->tos)
		PUT(" tos 0x%02x", r->tos);
	for (size_t i = 0; i < LZ_ARRAY_SIZE(extras); i++)
		if (r->extra & (1u << i))
			PUT(" [%s]", extras[i]);
done:
	out[len] = '\0';
#undef PUT
}

/* ---- plan --------------------------------------------------------------- */

#define DEFAULT_DENY_REFUSED                                                                              \
	"a deny of 0.0.0.0/0 cannot be a loopback address (the policy's default-allow flag stands for it: " \
	"leave the default route out instead)"

static bool kind_is_deny(enum lz_netroutes_kind k)
{
	return k == LZ_NETROUTES_DENY || k == LZ_NETROUTES_CANARY_DENY;
}

static bool kind_is_allow(enum lz_netroutes_kind k)
{
	return k == LZ_NETROUTES_ALLOW;
}

static int netroute_prefix_cmp(const void *pa, const void *pb)
{
	const struct lz_netroutes_entry *a = pa, *b = pb;
	return lz_prefix_compare(a->prefix, b->prefix);
}

int lz_netroutes_plan_as(const struct lz_netroutes_entry *routes, size_t n, const char *dev, uint32_t gateway,
			 enum lz_netroutes_deny_as deny_as, struct lz_kroute **ret, size_t *ret_n, struct lz_err *err)
{
	_cleanup_free_ struct lz_netroutes_entry *sorted = NULL;
	_cleanup_free_ struct lz_kroute *out = NULL;
	char text[LZ_PREFIX_STR_MAX], gw[16];
	size_t m = 0;

	if (n > LZ_NETROUTES_MAX)
		return lz_err_set(err, E2BIG, "route plan: %zu routes, at most %u", n, LZ_NETROUTES_MAX);
	if (!dev || dev[0] == '\0' || strnlen(dev, IF_NAMESIZE) >= IF_NAMESIZE)
		return lz_err_set(err, EINVAL, "route plan: invalid device name");
	if (strcmp(dev, "lo") == 0)
		return lz_err_set(err, EINVAL, "route plan: the egress device cannot be lo");
	ip4_format(gateway, gw);
	if (gateway == 0 || gateway >> 24 == 127 || gateway >> 28 == 0xe || gateway == 0xffffffffu)
		return lz_err_set(err, EINVAL, "route plan: invalid gateway %s", gw);

	for (size_t i = 0; i < n; i++) {
		lz_prefix_format(routes[i].prefix, text);
		if (routes[i].prefix.len > 32 || (routes[i].prefix.addr & ~mask_of(routes[i].prefix.len)))
			return lz_err_set(err, EINVAL, "route plan: prefix %s has host bits set", text);
		if (!kind_is_deny(routes[i].kind) && !kind_is_allow(routes[i].kind) &&
		    routes[i].kind != LZ_NETROUTES_HELPER && routes[i].kind != LZ_NETROUTES_CANARY_ALLOW)
			return lz_err_set(err, EINVAL, "route plan: unknown kind %d for %s", (int)routes[i].kind,
					  text);
		if (deny_as == LZ_NETROUTES_DENY_AS_ADDRESS && kind_is_deny(routes[i].kind) &&
		    routes[i].prefix.len == 0)
			return lz_err_set(err, EINVAL, "route plan: %s", DEFAULT_DENY_REFUSED);
	}
	if (deny_as != LZ_NETROUTES_DENY_AS_ROUTE && deny_as != LZ_NETROUTES_DENY_AS_ADDRESS)
		return lz_err_set(err, EINVAL, "route plan: unknown deny representation %d", (int)deny_as);
	if (n == 0) {
		*ret = NULL;
		*ret_n = 0;
		return 0;
	}

	sorted = calloc(n, sizeof(*sorted));
	out = calloc(n, sizeof(*out));
	if (!sorted || !out)
		return lz_err_set(err, ENOMEM, "route plan: out of memory");
	memcpy(sorted, routes, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), netroute_prefix_cmp);

	for (size_t i = 0; i < n;) {
		size_t j = i;
		bool deny = false, allow = false, helper = false, canary = false;
		for (; j < n && lz_prefix_equal(sorted[j].prefix, sorted[i].prefix); j++) {
			deny |= kind_is_deny(sorted[j].kind);
			allow |= kind_is_allow(sorted[j].kind);
			helper |= sorted[j].kind == LZ_NETROUTES_HELPER;
			canary |= sorted[j].kind == LZ_NETROUTES_CANARY_ALLOW;
		}
		lz_prefix_format(sorted[i].prefix, text);
		if (!deny && allow + helper + canary > 1)
			return lz_err_set(err, EINVAL, "route plan: %s has two next hops (%s%s%s)", text,
					  helper ? "on-link helper " : "", allow ? "allow via the gateway " : "",
					  canary ? "canary allow on " LZ_NETROUTES_CANARY_DEV : "");

		struct lz_kroute *r = &out[m++];
		memset(r, 0, sizeof(*r));
		r->table = RT_TABLE_MAIN;
		r->dst = sorted[i].prefix;
		r->type = RTN_UNICAST;
		r->protocol = RTPROT_STATIC;
		if (deny && deny_as == LZ_NETROUTES_DENY_AS_ADDRESS) {
			/* The kernel's prefix route of the lo address. */
			r->table = RT_TABLE_LOCAL;
			r->type = RTN_LOCAL;
			r->scope = RT_SCOPE_HOST;
			r->protocol = RTPROT_KERNEL;
			strcpy(r->dev, "lo");
		} else if (deny) {
			/* Deny wins over any other kind at the same prefix (SR-6). */
			r->scope = RT_SCOPE_LINK;
			strcpy(r->dev, "lo");
		} else if (helper) {
			r->scope = RT_SCOPE_LINK;
			strcpy(r->dev, dev);
		} else if (canary) {
			r->scope = RT_SCOPE_LINK;
			strcpy(r->dev, LZ_NETROUTES_CANARY_DEV);
		} else {
			r->scope = RT_SCOPE_UNIVERSE;
			strcpy(r->dev, dev);
			r->gateway = gateway;
		}
		i = j;
	}
	qsort(out, m, sizeof(*out), kroute_qsort_cmp);
	*ret = TAKE_PTR(out);
	*ret_n = m;
	return 0;
}

int lz_netroutes_plan(const struct lz_netroutes_entry *routes, size_t n, const char *dev, uint32_t gateway,
		      struct lz_kroute **ret, size_t *ret_n, struct lz_err *err)
{
	return lz_netroutes_plan_as(routes, n, dev, gateway, LZ_NETROUTES_DENY_AS_ROUTE, ret, ret_n, err);
}

/* ---- links and addresses ------------------------------------------------ */

struct link {
	int ifindex;
	unsigned flags;
	char name[IF_NAMESIZE];
};

struct addr {
	int family;
	int ifindex;
	uint8_t plen;
	uint8_t local[16]; /* IPv4 in the first 4 bytes, network order */
	bool has_brd;
	uint32_t brd; /* host order */
};

struct links {
	struct link *v;
	size_t n, cap;
};

struct addrs {
	struct addr *v;
	size_t n, cap;
};

static void links_free(struct links *l)
{
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

static void addrs_free(struct addrs *a)
{
	free(a->v);
	a->v = NULL;
	a->n = a->cap = 0;
}

static const struct link *link_by_index(const struct links *l, int ifindex)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].ifindex == ifindex)
			return &l->v[i];
	return NULL;
}

static const struct link *link_by_name(const struct links *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (strncmp(l->v[i].name, name, IF_NAMESIZE) == 0)
			return &l->v[i];
	return NULL;
}

static int on_link(const struct nlmsghdr *h, void *arg)
{
	struct links *l = arg;
	struct link k = { 0 };
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
	return vec_push(&l->v, &l->n, &l->cap, sizeof(k), &k);
}

static int on_addr(const struct nlmsghdr *h, void *arg)
{
	struct addrs *l = arg;
	struct addr k = { 0 };
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
	return vec_push(&l->v, &l->n, &l->cap, sizeof(k), &k);
}

static int dump_links(struct lz_rtnl *nl, struct links *ret)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	return lz_rtnl_dump(nl, RTM_GETLINK, &ifi, sizeof(ifi), on_link, ret);
}

static int dump_addrs(struct lz_rtnl *nl, int family, struct addrs *ret)
{
	struct ifaddrmsg ifa = { .ifa_family = (uint8_t)family };
	return lz_rtnl_dump(nl, RTM_GETADDR, &ifa, sizeof(ifa), on_addr, ret);
}

/* ---- IPv4 routes -------------------------------------------------------- */

struct routes {
	const struct links *links;
	struct lz_kroute *v;
	size_t n, cap;
};

static void routes_free(struct routes *r)
{
	free(r->v);
	r->v = NULL;
	r->n = r->cap = 0;
}

static int get_u32(const struct nlattr *a, uint32_t *ret)
{
	if (nla_len(a) != 4)
		return -EBADMSG;
	*ret = nla_get_u32(a);
	return 0;
}

/* Projects one RTM_NEWROUTE (IPv4). *cloned is set for cache entries. */
static int parse_route4(const struct nlmsghdr *h, const struct links *links, struct lz_kroute *r, bool *cloned)
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
			if (get_u32(a, &r->table) < 0)
				return -EBADMSG;
			break;
		case RTA_DST:
			if (get_u32(a, &v) < 0)
				return -EBADMSG;
			r->dst.addr = ntohl(v) & mask_of(r->dst.len);
			break;
		case RTA_GATEWAY:
			if (get_u32(a, &v) < 0)
				return -EBADMSG;
			r->gateway = ntohl(v);
			break;
		case RTA_OIF:
			if (get_u32(a, &oif) < 0)
				return -EBADMSG;
			break;
		case RTA_PRIORITY:
			if (get_u32(a, &r->priority) < 0)
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
		const struct link *l = link_by_index(links, (int)oif);
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
	return vec_push(&l->v, &l->n, &l->cap, sizeof(r), &r);
}

/* Whether r is one of the table-local routes the kernel derives from an
 * interface address (fib_add_ifaddr): they deliver to this host. The prefix
 * route of an address outside 127.0.0.0/8 on a loopback device is NOT one of
 * them: it is the loopback-address deny (netroutes.h) and is observed, and so
 * is the /32 local route of such an address when its prefix length is 32
 * (then it is that prefix route). */
static bool derived_from_address(const struct lz_kroute *r, const struct links *links, const struct addrs *addrs)
{
	if (r->table != RT_TABLE_LOCAL || r->protocol != RTPROT_KERNEL || r->extra || r->gateway || r->tos ||
	    r->priority || !r->dev[0])
		return false;
	const struct link *l = link_by_name(links, r->dev);
	if (!l)
		return false;
	for (size_t i = 0; i < addrs->n; i++) {
		const struct addr *a = &addrs->v[i];
		if (a->family != AF_INET || a->ifindex != l->ifindex || a->plen > 32)
			continue;
		uint32_t local, m = mask_of(a->plen);
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
static int observe_on(struct lz_rtnl *nl, struct links *links, struct lz_kroute **ret, size_t *ret_n,
		      struct lz_err *err)
{
	struct rtmsg rtm = { .rtm_family = AF_INET };
	struct addrs addrs = { 0 };
	struct routes routes = { .links = links };
	int r = -EAGAIN;

	for (int attempt = 0; attempt < DUMP_ATTEMPTS && r == -EAGAIN; attempt++) {
		links_free(links);
		addrs_free(&addrs);
		routes_free(&routes);
		r = dump_links(nl, links);
		if (r >= 0)
			r = dump_addrs(nl, AF_INET, &addrs);
		if (r >= 0)
			r = lz_rtnl_dump(nl, RTM_GETROUTE, &rtm, sizeof(rtm), on_route4, &routes);
	}
	if (r < 0) {
		links_free(links);
		addrs_free(&addrs);
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
	addrs_free(&addrs);
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
	struct links links = { 0 };
	struct lz_kroute *v = NULL;
	size_t n = 0;

	int r = lz_rtnl_open(&nl, "observing routes", err);
	if (r < 0)
		return r;
	r = observe_on(&nl, &links, &v, &n, err);
	links_free(&links);
	if (r < 0)
		return r;
	*ret = v;
	*ret_n = n;
	return 0;
}

/* ---- install, delete, lookup ------------------------------------------- */

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
	char text[LZ_PREFIX_STR_MAX], host[16];
	int r = lz_rtnl_addr_add(nl, lo_index, deny_address(p), p.len, RT_SCOPE_HOST);
	if (r < 0) {
		lz_prefix_format(p, text);
		ip4_format(deny_address(p), host);
		return lz_err_set(err, r, "installing the loopback deny of %s (address %s/%u dev lo): %s%s%s", text,
				  host, p.len, strerror(-r), nl->kmsg[0] ? ": " : "", nl->kmsg);
	}
	return 0;
}

/* Index of lo, which must be up: the kernel adds an address's routes only
 * while its device is up. */
static int lo_up_index(struct lz_rtnl *nl, const char *op, int *ret, struct lz_err *err)
{
	struct links links = { 0 };
	int r = dump_links(nl, &links);
	if (r < 0) {
		links_free(&links);
		return lz_err_set(err, r, "%s: listing links: %s", op, strerror(-r));
	}
	const struct link *lo = link_by_name(&links, "lo");
	int index = lo ? lo->ifindex : 0;
	bool up = lo && (lo->flags & IFF_UP);
	links_free(&links);
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
	_cleanup_free_ struct lz_netroutes_entry *sorted = NULL;
	char text[LZ_PREFIX_STR_MAX];
	size_t m = 0;
	int lo_index = 0, r;

	if (n > LZ_NETROUTES_MAX)
		return lz_err_set(err, E2BIG, "%s: %zu entries, at most %u", op, n, LZ_NETROUTES_MAX);
	for (size_t i = 0; i < n; i++) {
		lz_prefix_format(entries[i].prefix, text);
		if (entries[i].prefix.len > 32 || (entries[i].prefix.addr & ~mask_of(entries[i].prefix.len)))
			return lz_err_set(err, EINVAL, "%s: prefix %s has host bits set", op, text);
		if (kind_is_deny(entries[i].kind) && entries[i].prefix.len == 0)
			return lz_err_set(err, EINVAL, "%s: %s", op, DEFAULT_DENY_REFUSED);
	}
	if (n) {
		sorted = calloc(n, sizeof(*sorted));
		if (!sorted)
			return lz_err_set(err, ENOMEM, "%s: out of memory", op);
		for (size_t i = 0; i < n; i++)
			if (kind_is_deny(entries[i].kind))
				sorted[m++] = entries[i];
	}
	if (m == 0)
		return 0;
	qsort(sorted, m, sizeof(*sorted), netroute_prefix_cmp);
	r = lz_rtnl_open(&nl, op, err);
	if (r >= 0)
		r = lo_up_index(&nl, op, &lo_index, err);
	for (size_t i = 0; r >= 0 && i < m; i++)
		if (i == 0 || !lz_prefix_equal(sorted[i].prefix, sorted[i - 1].prefix)) /* DENY + CANARY_DENY */
			r = add_lo_deny(&nl, lo_index, sorted[i].prefix, err);
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
	struct links links = { 0 };
	size_t plan_n = 0, current_n = 0;
	int r;

	r = lz_netroutes_plan_as(routes, n, dev, gateway, deny_as, &plan, &plan_n, err);
	if (r < 0)
		return r;
	r = lz_rtnl_open(&nl, "installing routes", err);
	if (r < 0)
		return r;
	r = observe_on(&nl, &links, &current, &current_n, err);
	if (r < 0)
		return lz_err_prefix(err, r, "installing routes: ");

	const struct link *dl = link_by_name(&links, dev);
	const struct link *lo = link_by_name(&links, "lo");
	const struct link *cl = link_by_name(&links, LZ_NETROUTES_CANARY_DEV);
	int dev_index = dl ? dl->ifindex : 0, lo_index = lo ? lo->ifindex : 0;
	int canary_index = cl ? cl->ifindex : 0;
	unsigned lo_flags = lo ? lo->flags : 0;
	links_free(&links);
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
	return 0;
}

int lz_netroutes_delete(const struct lz_kroute *route, struct lz_err *err)
{
	_cleanup_rtnl_ struct lz_rtnl nl = { 0 };
	_cleanup_free_ struct lz_kroute *current = NULL;
	struct links links = { 0 };
	size_t current_n = 0, same_key = 0;
	bool found = false;
	int r;

	if (route->extra)
		return refuse_route(err, -EINVAL, &nl, "deleting", route);
	r = lz_rtnl_open(&nl, "deleting a route", err);
	if (r < 0)
		return r;
	r = observe_on(&nl, &links, &current, &current_n, err);
	if (r < 0)
		return lz_err_prefix(err, r, "deleting a route: ");
	const struct link *l = route->dev[0] ? link_by_name(&links, route->dev) : NULL;
	int oif = l ? l->ifindex : 0;
	links_free(&links);

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

struct lookup {
	const struct links *links;
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
	struct links links = { 0 };
	struct lookup lk = { .links = &links };
	struct rtmsg rtm = { .rtm_family = AF_INET, .rtm_dst_len = 32 };
	char text[16];
	int r;

	ip4_format(dst, text);
	r = lz_rtnl_open(&nl, "route lookup", err);
	if (r < 0)
		return r;
	r = dump_links(&nl, &links);
	if (r < 0) {
		links_free(&links);
		return lz_err_set(err, r, "route lookup for %s: listing links: %s", text, strerror(-r));
	}

	struct nl_msg *msg = nlmsg_alloc_simple(RTM_GETROUTE, NLM_F_REQUEST);
	if (!msg || nlmsg_append(msg, &rtm, sizeof(rtm), NLMSG_ALIGNTO) < 0 ||
	    nla_put_u32(msg, RTA_DST, htonl(dst)) < 0) {
		nlmsg_free(msg);
		links_free(&links);
		return lz_err_set(err, ENOMEM, "route lookup for %s: out of memory", text);
	}
	/* The reply is the route or an NLMSG_ERROR; no separate ack. */
	nl_socket_disable_auto_ack(nl.sk);
	r = lz_rtnl_request(&nl, msg, on_lookup, &lk);
	links_free(&links);
	if (r >= 0 && !lk.got)
		r = -EPROTO;
	if (r < 0)
		return lz_err_set(err, r, "route lookup for %s: %s%s%s", text, strerror(-r), nl.kmsg[0] ? ": " : "",
				  nl.kmsg);
	*ret = lk.r;
	return 0;
}

/* ---- match -------------------------------------------------------------- */

int lz_netroutes_match(const struct lz_kroute *observed, size_t n_observed,
		       const struct lz_netroutes_entry *derived, size_t n_derived, const char *dev,
		       uint32_t gateway, struct lz_err *err)
{
	return lz_netroutes_match_as(observed, n_observed, derived, n_derived, dev, gateway,
				     LZ_NETROUTES_DENY_AS_ROUTE, err);
}

int lz_netroutes_match_as(const struct lz_kroute *observed, size_t n_observed,
			  const struct lz_netroutes_entry *derived, size_t n_derived, const char *dev,
			  uint32_t gateway, enum lz_netroutes_deny_as deny_as, struct lz_err *err)
{
	_cleanup_free_ struct lz_kroute *expected = NULL;
	_cleanup_free_ struct lz_kroute *seen = NULL;
	size_t n_expected = 0, i = 0, j = 0;
	int r;

	if (n_observed > LZ_NETROUTES_MAX)
		return lz_err_set(err, E2BIG, "route match: %zu observed routes, at most %u", n_observed,
				  LZ_NETROUTES_MAX);
	r = lz_netroutes_plan_as(derived, n_derived, dev, gateway, deny_as, &expected, &n_expected, err);
	if (r < 0)
		return r;
	if (n_observed) {
		seen = calloc(n_observed, sizeof(*seen));
		if (!seen)
			return lz_err_set(err, ENOMEM, "route match: out of memory");
		memcpy(seen, observed, n_observed * sizeof(*seen));
		qsort(seen, n_observed, sizeof(*seen), kroute_qsort_cmp);
	}
	const struct lz_kroute *first_missing = NULL, *first_unexpected = NULL;
	size_t missing = 0, unexpected = 0;
	while (i < n_observed || j < n_expected) {
		int c = i == n_observed ? 1 : j == n_expected ? -1 : lz_kroute_compare(&seen[i], &expected[j]);
		if (c == 0) {
			i++;
			j++;
		} else if (c < 0) {
			if (!unexpected++)
				first_unexpected = &seen[i];
			i++;
		} else {
			if (!missing++)
				first_missing = &expected[j];
			j++;
		}
	}
	if (!missing && !unexpected)
		return 0;
	char m_text[LZ_KROUTE_STR_MAX] = "", u_text[LZ_KROUTE_STR_MAX] = "";
	if (first_missing)
		lz_kroute_format(first_missing, m_text);
	if (first_unexpected)
		lz_kroute_format(first_unexpected, u_text);
	return lz_err_set(err, EPROTO,
			  "route table does not match the derived policy: %zu missing%s%s%s, %zu unexpected%s%s%s",
			  missing, missing ? " (first '" : "", m_text, missing ? "')" : "", unexpected,
			  unexpected ? " (first '" : "", u_text, unexpected ? "')" : "");
}

/* ---- IPv6 --------------------------------------------------------------- */

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
	const struct links *links;
	const char *offender; /* first non-loopback route seen, static text */
	char text[96];
};

static bool is_loopback6(const uint8_t a[16])
{
	static const uint8_t one[16] = { [15] = 1 };
	return memcmp(a, one, 16) == 0;
}

static bool link_is_loopback(const struct links *l, int ifindex)
{
	const struct link *k = link_by_index(l, ifindex);
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
			if (get_u32(a, &oif) < 0)
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
	const struct link *l = link_by_index(s->links, (int)oif);
	snprintf(s->text, sizeof(s->text), "%s/%u dev %s", addr, rtm->rtm_dst_len, l ? l->name : "?");
	s->offender = s->text;
	return 0;
}

int lz_netroutes_ipv6_clean(bool *ret, struct lz_err *err)
{
	_cleanup_rtnl_ struct lz_rtnl nl = { 0 };
	struct links links = { 0 };
	struct addrs addrs = { 0 };
	struct v6routes routes = { .links = &links };
	struct rtmsg rtm = { .rtm_family = AF_INET6 };
	bool clean = true;
	int r;

	r = lz_rtnl_open(&nl, "checking IPv6", err);
	if (r < 0)
		return r;
	r = -EAGAIN;
	for (int attempt = 0; attempt < DUMP_ATTEMPTS && r == -EAGAIN; attempt++) {
		links_free(&links);
		addrs_free(&addrs);
		routes.offender = NULL;
		r = dump_links(&nl, &links);
		if (r >= 0)
			r = dump_addrs(&nl, AF_INET6, &addrs);
		if (r >= 0)
			r = lz_rtnl_dump(&nl, RTM_GETROUTE, &rtm, sizeof(rtm), on_route6, &routes);
	}
	if (r < 0) {
		links_free(&links);
		addrs_free(&addrs);
		/* A kernel without IPv6 has no addresses or routes to refuse. */
		if (r == -EAFNOSUPPORT) {
			*ret = true;
			return 0;
		}
		return lz_err_set(err, r, "checking IPv6: %s%s%s", strerror(-r), nl.kmsg[0] ? ": " : "", nl.kmsg);
	}
	for (size_t i = 0; i < addrs.n; i++) {
		const struct addr *a = &addrs.v[i];
		if (a->family != AF_INET6)
			continue;
		if (!(a->plen == 128 && is_loopback6(a->local) && link_is_loopback(&links, a->ifindex)))
			clean = false;
	}
	if (routes.offender)
		clean = false;
	links_free(&links);
	addrs_free(&addrs);
	*ret = clean;
	return 0;
}
