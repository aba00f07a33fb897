/* Route policy of the enforcement network namespace (netroutes.h; spec 3.7,
 * SR-6): the projection's order and text, the plan a derived policy must
 * produce, the loopback-deny prefixes, and the match of an observation
 * against the plan. Pure: nothing here touches the kernel. */
#include "net/netroutes.h"

#include <errno.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"

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
	char dst[LZ_PREFIX_STR_MAX], gw[LZ_IPV4_STR_MAX];
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
		lz_ipv4_format(r->gateway, gw);
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

bool lz_netroutes_unrouted_deny(const struct lz_netroutes_entry *e)
{
	uint32_t a = e->prefix.addr;
	return kind_is_deny(e->kind) && e->prefix.len > 0 && e->prefix.len < 32 &&
	       (a >> 24 == 0 || a >> 28 == 0xe);
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

static int prefix_cmp(const void *pa, const void *pb)
{
	const struct lz_prefix *a = pa, *b = pb;
	return lz_prefix_compare(*a, *b);
}

int lz_netroutes_plan_as(const struct lz_netroutes_entry *routes, size_t n, const char *dev, uint32_t gateway,
			 enum lz_netroutes_deny_as deny_as, struct lz_kroute **ret, size_t *ret_n, struct lz_err *err)
{
	_cleanup_free_ struct lz_netroutes_entry *sorted = NULL;
	_cleanup_free_ struct lz_kroute *out = NULL;
	char text[LZ_PREFIX_STR_MAX], gw[LZ_IPV4_STR_MAX];
	size_t m = 0;

	if (n > LZ_NETROUTES_MAX)
		return lz_err_set(err, E2BIG, "route plan: %zu routes, at most %u", n, LZ_NETROUTES_MAX);
	if (!dev || dev[0] == '\0' || strnlen(dev, IF_NAMESIZE) >= IF_NAMESIZE)
		return lz_err_set(err, EINVAL, "route plan: invalid device name");
	if (strcmp(dev, "lo") == 0)
		return lz_err_set(err, EINVAL, "route plan: the egress device cannot be lo");
	lz_ipv4_format(gateway, gw);
	if (gateway == 0 || gateway >> 24 == 127 || gateway >> 28 == 0xe || gateway == 0xffffffffu)
		return lz_err_set(err, EINVAL, "route plan: invalid gateway %s", gw);

	for (size_t i = 0; i < n; i++) {
		lz_prefix_format(routes[i].prefix, text);
		if (routes[i].prefix.len > 32 || (routes[i].prefix.addr & ~lz_prefix_mask(routes[i].prefix.len)))
			return lz_err_set(err, EINVAL, "route plan: prefix %s has host bits set", text);
		if (!kind_is_deny(routes[i].kind) && !kind_is_allow(routes[i].kind) &&
		    routes[i].kind != LZ_NETROUTES_HELPER && routes[i].kind != LZ_NETROUTES_CANARY_ALLOW &&
		    routes[i].kind != LZ_NETROUTES_EGRESS)
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
		bool deny = false, allow = false, helper = false, canary = false, egress = false;
		for (; j < n && lz_prefix_equal(sorted[j].prefix, sorted[i].prefix); j++) {
			deny |= kind_is_deny(sorted[j].kind);
			allow |= kind_is_allow(sorted[j].kind);
			helper |= sorted[j].kind == LZ_NETROUTES_HELPER;
			canary |= sorted[j].kind == LZ_NETROUTES_CANARY_ALLOW;
			egress |= sorted[j].kind == LZ_NETROUTES_EGRESS;
		}
		lz_prefix_format(sorted[i].prefix, text);
		if (!deny && allow + helper + canary + egress > 1)
			return lz_err_set(err, EINVAL, "route plan: %s has two next hops (%s%s%s)", text,
					  helper ? "on-link helper " : "", allow ? "allow via the gateway " : "",
					  canary ? "canary allow on " LZ_NETROUTES_CANARY_DEV
					  : egress ? "egress proxy on " LZ_NETROUTES_EGRESS_DEV : "");

		/* Linux makes no prefix route for a loopback address in
		 * 0.0.0.0/8 or 224.0.0.0/4: nothing to expect in the tables
		 * (install adds the address all the same, and
		 * lz_netroutes_check_unrouted_denies checks it). */
		if (deny && deny_as == LZ_NETROUTES_DENY_AS_ADDRESS && lz_netroutes_unrouted_deny(&sorted[i])) {
			i = j;
			continue;
		}
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
		} else if (canary || egress) {
			r->scope = RT_SCOPE_LINK;
			strcpy(r->dev, canary ? LZ_NETROUTES_CANARY_DEV : LZ_NETROUTES_EGRESS_DEV);
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

int lz_netroutes_deny_prefixes(const struct lz_netroutes_entry *entries, size_t n, struct lz_prefix **ret,
			       size_t *ret_n, struct lz_err *err)
{
	_cleanup_free_ struct lz_prefix *denies = NULL;
	char text[LZ_PREFIX_STR_MAX];
	size_t m = 0, k = 0;

	if (n > LZ_NETROUTES_MAX)
		return lz_err_set(err, E2BIG, "%zu entries, at most %u", n, LZ_NETROUTES_MAX);
	for (size_t i = 0; i < n; i++) {
		lz_prefix_format(entries[i].prefix, text);
		if (entries[i].prefix.len > 32 || (entries[i].prefix.addr & ~lz_prefix_mask(entries[i].prefix.len)))
			return lz_err_set(err, EINVAL, "prefix %s has host bits set", text);
		if (kind_is_deny(entries[i].kind) && entries[i].prefix.len == 0)
			return lz_err_set(err, EINVAL, "%s", DEFAULT_DENY_REFUSED);
	}
	if (n) {
		denies = calloc(n, sizeof(*denies));
		if (!denies)
			return lz_err_set(err, ENOMEM, "out of memory");
		for (size_t i = 0; i < n; i++)
			if (kind_is_deny(entries[i].kind))
				denies[m++] = entries[i].prefix;
	}
	if (m == 0) {
		*ret = NULL;
		*ret_n = 0;
		return 0;
	}
	qsort(denies, m, sizeof(*denies), prefix_cmp);
	for (size_t i = 0; i < m; i++)
		if (i == 0 || !lz_prefix_equal(denies[i], denies[k - 1])) /* DENY + CANARY_DENY */
			denies[k++] = denies[i];
	*ret = TAKE_PTR(denies);
	*ret_n = k;
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
