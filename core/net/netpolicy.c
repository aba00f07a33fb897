/* Derived network policy and its encodings (see netpolicy.h for the rules,
 * the layouts and the threat).
 *
 * Invariants: a struct lz_netpolicy produced here (derived or decoded)
 * always passes lz_netpolicy_validate, and encode(decode(b)) == b for every
 * accepted b. Every output parameter is written only after the whole
 * operation succeeded. */
#include "net/netpolicy.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/file.h"
#include "net/egressname.h"
#include "util/postcard.h"
#include "util/cleanup.h"

/* What lz_memfd_sealed (fs/file.h) seals: data, never code. */
#define REQUIRED_SEALS (LZ_MEMFD_SEALS | F_SEAL_EXEC)

/* Routes every v1 policy contains, with the kind each must have. */
static const struct lz_netroute fixed_routes[] = {
	{ { 0x0a000000u, 8 }, LZ_NETROUTE_DENY },          /* 10.0.0.0/8 */
	{ { 0x0a893600u, 24 }, LZ_NETROUTE_HELPER },       /* slirp4netns network */
	{ { LZ_NET_GATEWAY, 32 }, LZ_NETROUTE_HELPER },    /* gateway */
	{ { LZ_NET_DNS, 32 }, LZ_NETROUTE_HELPER },        /* synthetic DNS */
	{ { 0x0a893700u, 29 }, LZ_NETROUTE_CANARY_DENY },  /* aggregate canary deny */
	{ { LZ_NET_CANARY_ALLOWED, 32 }, LZ_NETROUTE_CANARY_ALLOW },
	{ { 0xac100000u, 12 }, LZ_NETROUTE_DENY },         /* 172.16.0.0/12 */
	{ { 0xc0a80000u, 16 }, LZ_NETROUTE_DENY },         /* 192.168.0.0/16 */
};
_Static_assert(LZ_ARRAY_SIZE(fixed_routes) == LZ_NETPOLICY_FIXED_ROUTES, "fixed route count");

/* Default denies beyond RFC 1918 (no implicit host authority): every IPv4
 * range that is not globally routable and not a documentation range. An
 * explicit allow that contains one leaves it out (a more specific allow
 * wins by longest prefix anyway); the documentation ranges stay open. */
static const struct lz_prefix special_denies[] = {
	{ 0x00000000u, 8 },  /* 0.0.0.0/8 "this network" */
	{ 0x64400000u, 10 }, /* 100.64.0.0/10 carrier-grade NAT */
	{ 0xa9fe0000u, 16 }, /* 169.254.0.0/16 link-local, metadata endpoints */
	{ 0xc0000000u, 24 }, /* 192.0.0.0/24 IETF protocol assignments */
	{ 0xc6120000u, 15 }, /* 198.18.0.0/15 benchmarking */
	{ 0xe0000000u, 4 },  /* 224.0.0.0/4 multicast */
	{ 0xf0000000u, 4 },  /* 240.0.0.0/4 reserved, broadcast */
};
_Static_assert(LZ_ARRAY_SIZE(special_denies) == LZ_NETPOLICY_SPECIAL_DENIES, "special deny count");

static bool prefix_normal(struct lz_prefix p)
{
	if (p.len > 32)
		return false;
	uint32_t mask = p.len == 0 ? 0 : ~(uint32_t)0 << (32 - p.len);
	return (p.addr & ~mask) == 0;
}

static bool kind_known(uint32_t k)
{
	return k <= LZ_NETROUTE_EGRESS;
}

/* The one EGRESS route: the proxy's address (a name policy's only). */
#define EGRESS_ROUTE ((struct lz_netroute){ { LZ_NET_EGRESS_PROXY, 32 }, LZ_NETROUTE_EGRESS })

static const struct lz_netroute *fixed_route_of(struct lz_prefix p)
{
	for (size_t i = 0; i < LZ_ARRAY_SIZE(fixed_routes); i++)
		if (lz_prefix_equal(fixed_routes[i].prefix, p))
			return &fixed_routes[i];
	return NULL;
}

/* Spec 3.7: the reserved topology is Lazaret's to route. */
static bool allow_refused(struct lz_prefix p)
{
	return lz_prefix_intersects(p, LZ_TOPOLOGY_NET);
}

static bool deny_refused(struct lz_prefix p)
{
	return lz_prefix_contains(LZ_TOPOLOGY_NET, p);
}

/* ---- derivation ---------------------------------------------------------- */

/* Index of p in the sorted routes, or of where it belongs (*found false). */
static size_t route_search(const struct lz_netpolicy *p, struct lz_prefix x, bool *found)
{
	size_t lo = 0, hi = p->n_routes;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = lz_prefix_compare(p->routes[mid].prefix, x);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

/* Adds a route keeping the order. An equal prefix already present wins
 * unless the new route is a DENY over an ALLOW (deny wins, SR-6); callers
 * add denies before allows, so that replacement is a safety net only. */
static int route_add(struct lz_netpolicy *p, struct lz_netroute r, struct lz_err *err)
{
	bool found;
	size_t at = route_search(p, r.prefix, &found);
	if (found) {
		if (r.kind == LZ_NETROUTE_DENY && p->routes[at].kind == LZ_NETROUTE_ALLOW)
			p->routes[at].kind = LZ_NETROUTE_DENY;
		return 0;
	}
	if (p->n_routes >= LZ_NETPOLICY_MAX_ROUTES)
		return lz_err_set(err, E2BIG, "network policy: more than %d routes",
				  LZ_NETPOLICY_MAX_ROUTES);
	memmove(&p->routes[at + 1], &p->routes[at], (p->n_routes - at) * sizeof(p->routes[0]));
	p->routes[at] = r;
	p->n_routes++;
	return 0;
}

static int check_input(struct lz_prefix x, const char *what, struct lz_err *err)
{
	if (!prefix_normal(x))
		return lz_err_set(err, EINVAL, "network policy: %s prefix %08x/%u is not a network",
				  what, x.addr, x.len);
	return 0;
}

static bool covered(const struct lz_prefix *set, size_t n, struct lz_prefix x)
{
	for (size_t i = 0; i < n; i++)
		if (lz_prefix_contains(set[i], x))
			return true;
	return false;
}

int lz_netpolicy_derive(const struct lz_prefix *allow, size_t n_allow, const struct lz_prefix *deny,
			size_t n_deny, const uint32_t *host, size_t n_host, struct lz_netpolicy *ret,
			struct lz_err *err)
{
	struct lz_netpolicy p = { .ipv4_default_allow = true, .ipv6_disabled = true };
	char text[LZ_PREFIX_STR_MAX];
	int r;

	/* Refuse the whole input before building anything. */
	for (size_t i = 0; i < n_deny; i++) {
		if ((r = check_input(deny[i], "deny", err)) < 0)
			return r;
		if (deny_refused(deny[i])) {
			lz_prefix_format(deny[i], text);
			return lz_err_set(err, EINVAL,
					  "network policy: deny '%s' lies inside the reserved topology "
					  "10.137.54.0/23",
					  text);
		}
	}
	for (size_t i = 0; i < n_allow; i++) {
		if ((r = check_input(allow[i], "allow", err)) < 0)
			return r;
		if (allow_refused(allow[i])) {
			lz_prefix_format(allow[i], text);
			return lz_err_set(err, EINVAL,
					  "network policy: allow '%s' intersects the reserved topology "
					  "10.137.54.0/23",
					  text);
		}
	}

	for (size_t i = 0; i < LZ_ARRAY_SIZE(fixed_routes); i++)
		if ((r = route_add(&p, fixed_routes[i], err)) < 0)
			return r;
	/* Denies before allows: an equal allow then finds the deny and yields. */
	for (size_t i = 0; i < n_deny; i++) {
		if (deny[i].len == 0) {
			p.ipv4_default_allow = false; /* the flag is the /0's one form */
			continue;
		}
		if ((r = route_add(&p, (struct lz_netroute){ deny[i], LZ_NETROUTE_DENY }, err)) < 0)
			return r;
	}
	/* The default denies an explicit allow does not cover; then the
	 * host's own addresses (its services on them are host authority),
	 * except loopback (the gateway never forwards to it), the reserved
	 * topology, and addresses a deny already covers. */
	for (size_t i = 0; i < LZ_ARRAY_SIZE(special_denies); i++)
		if (!covered(allow, n_allow, special_denies[i]) &&
		    (r = route_add(&p, (struct lz_netroute){ special_denies[i], LZ_NETROUTE_DENY }, err)) < 0)
			return r;
	for (size_t i = 0; i < n_host; i++) {
		struct lz_prefix h = { host[i], 32 };
		bool denied = false;
		for (size_t k = 0; k < p.n_routes && !denied; k++)
			denied = p.routes[k].kind == LZ_NETROUTE_DENY && lz_prefix_contains(p.routes[k].prefix, h);
		if (denied || (host[i] >> 24) == 127 || lz_prefix_intersects(h, LZ_TOPOLOGY_NET) ||
		    covered(allow, n_allow, h))
			continue;
		if ((r = route_add(&p, (struct lz_netroute){ h, LZ_NETROUTE_DENY }, err)) < 0)
			return r;
	}
	for (size_t i = 0; i < n_allow; i++)
		if ((r = route_add(&p, (struct lz_netroute){ allow[i], LZ_NETROUTE_ALLOW }, err)) < 0)
			return r;

	/* Cannot fail for what was built above; keeps the invariant honest. */
	if ((r = lz_netpolicy_validate(&p, err)) < 0)
		return r;
	memcpy(ret, &p, sizeof(p));
	return 0;
}

/* ---- the name policy ------------------------------------------------------ */

static int names_check(char names[][LZ_NETPOLICY_NAME_MAX + 1], size_t n, const char *what,
		       struct lz_err *err)
{
	if (n > LZ_NETPOLICY_MAX_NAMES)
		return lz_err_set(err, E2BIG, "network policy: more than %d %s names", LZ_NETPOLICY_MAX_NAMES,
				  what);
	for (size_t i = 0; i < n; i++) {
		if (memchr(names[i], '\0', LZ_NETPOLICY_NAME_MAX + 1) == NULL)
			return lz_err_set(err, EINVAL, "network policy: %s name %zu is too long", what, i);
		int r = lz_egress_pattern_check(names[i], err);
		if (r < 0)
			return lz_err_prefix(err, r, "network policy: %s name: ", what);
		if (i > 0 && strcmp(names[i - 1], names[i]) >= 0)
			return lz_err_set(err, EINVAL, "network policy: %s name '%s' is out of order or repeated",
					  what, names[i]);
	}
	return 0;
}

bool lz_netpolicy_resolver_usable(uint32_t a)
{
	return a >> 24 != 0 && a >> 28 < 0xe;
}

static int names_validate(const struct lz_netpolicy_names *nm, struct lz_err *err)
{
	int r;
	if ((r = names_check((char (*)[LZ_NETPOLICY_NAME_MAX + 1])nm->allow, nm->n_allow, "allow", err)) < 0 ||
	    (r = names_check((char (*)[LZ_NETPOLICY_NAME_MAX + 1])nm->deny, nm->n_deny, "deny", err)) < 0)
		return r;
	if (nm->n_allow == 0 && (nm->n_deny > 0 || nm->n_resolvers > 0))
		return lz_err_set(err, EINVAL, "network policy: deny names or resolvers without allow names");
	if (nm->n_resolvers > LZ_NETPOLICY_MAX_RESOLVERS)
		return lz_err_set(err, E2BIG, "network policy: more than %d resolvers", LZ_NETPOLICY_MAX_RESOLVERS);
	for (size_t i = 0; i < nm->n_resolvers; i++) {
		char text[LZ_IPV4_STR_MAX];
		lz_ipv4_format(nm->resolvers[i], text);
		if (!lz_netpolicy_resolver_usable(nm->resolvers[i]))
			return lz_err_set(err, EINVAL, "network policy: resolver %s is not a unicast address", text);
		for (size_t k = 0; k < i; k++)
			if (nm->resolvers[k] == nm->resolvers[i])
				return lz_err_set(err, EINVAL, "network policy: resolver %s is repeated", text);
	}
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

static int names_copy(char out[][LZ_NETPOLICY_NAME_MAX + 1], const char *const *in, size_t n, const char *what,
		      struct lz_err *err)
{
	if (n > LZ_NETPOLICY_MAX_NAMES)
		return lz_err_set(err, E2BIG, "network policy: more than %d %s names", LZ_NETPOLICY_MAX_NAMES,
				  what);
	for (size_t i = 0; i < n; i++) {
		if (strlen(in[i]) > LZ_NETPOLICY_NAME_MAX)
			return lz_err_set(err, EINVAL, "network policy: %s name %zu is too long", what, i);
		strcpy(out[i], in[i]);
	}
	qsort(out, n, sizeof(out[0]), name_cmp);
	return 0;
}

int lz_netpolicy_set_names(struct lz_netpolicy *p, const char *const *allow, size_t n_allow,
			   const char *const *deny, size_t n_deny, const uint32_t *resolvers,
			   size_t n_resolvers, struct lz_err *err)
{
	if (n_allow == 0 && n_deny == 0 && n_resolvers == 0)
		return 0;
	if (p->names.n_allow > 0)
		return lz_err_set(err, EEXIST, "network policy: it has a name policy already");
	if (n_resolvers > LZ_NETPOLICY_MAX_RESOLVERS)
		return lz_err_set(err, E2BIG, "network policy: more than %d resolvers", LZ_NETPOLICY_MAX_RESOLVERS);
	_cleanup_free_ struct lz_netpolicy *q = malloc(sizeof(*q));
	if (q == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	memcpy(q, p, sizeof(*q));
	int r;
	if ((r = names_copy(q->names.allow, allow, n_allow, "allow", err)) < 0 ||
	    (r = names_copy(q->names.deny, deny, n_deny, "deny", err)) < 0)
		return r;
	q->names.n_allow = n_allow;
	q->names.n_deny = n_deny;
	q->names.n_resolvers = n_resolvers;
	if (n_resolvers > 0)
		memcpy(q->names.resolvers, resolvers, n_resolvers * sizeof(*resolvers));
	if (n_allow > 0 && (r = route_add(q, EGRESS_ROUTE, err)) < 0)
		return r;
	if ((r = lz_netpolicy_validate(q, err)) < 0)
		return r;
	memcpy(p, q, sizeof(*p));
	return 0;
}

bool lz_netpolicy_direct_default(const struct lz_netpolicy *p)
{
	return p->ipv4_default_allow && p->names.n_allow == 0;
}

bool lz_netpolicy_admits(const struct lz_netpolicy *p, uint32_t addr)
{
	struct lz_prefix host = { addr, 32 };
	/* Never, whatever an allow says: the host's loopback (0.0.0.0/8 as a
	 * destination reaches it too) and the sandbox's own network. */
	if (addr >> 24 == 127 || addr >> 24 == 0 || lz_prefix_contains(LZ_TOPOLOGY_NET, host))
		return false;
	const struct lz_netroute *best = NULL;
	for (size_t i = 0; i < p->n_routes; i++)
		if (lz_prefix_contains(p->routes[i].prefix, host) &&
		    (best == NULL || p->routes[i].prefix.len > best->prefix.len))
			best = &p->routes[i];
	return best == NULL ? p->ipv4_default_allow : best->kind == LZ_NETROUTE_ALLOW;
}

int lz_netpolicy_validate(const struct lz_netpolicy *p, struct lz_err *err)
{
	char text[LZ_PREFIX_STR_MAX];
	size_t n_fixed = 0, n_egress = 0;
	int r;

	if ((r = names_validate(&p->names, err)) < 0)
		return r;
	if (p->n_routes > LZ_NETPOLICY_MAX_ROUTES)
		return lz_err_set(err, EINVAL, "network policy: %zu routes, at most %d", p->n_routes,
				  LZ_NETPOLICY_MAX_ROUTES);
	if (!p->ipv6_disabled)
		return lz_err_set(err, EINVAL, "network policy: IPv6 must be disabled in v1");
	for (size_t i = 0; i < p->n_routes; i++) {
		const struct lz_netroute *rt = &p->routes[i];
		if (!prefix_normal(rt->prefix) || rt->prefix.len == 0)
			return lz_err_set(err, EINVAL, "network policy: route %zu is not a valid prefix", i);
		lz_prefix_format(rt->prefix, text);
		if (!kind_known((uint32_t)rt->kind))
			return lz_err_set(err, EINVAL, "network policy: route '%s' has unknown kind %u",
					  text, (unsigned)rt->kind);
		if (i > 0 && lz_prefix_compare(p->routes[i - 1].prefix, rt->prefix) >= 0)
			return lz_err_set(err, EINVAL,
					  "network policy: route '%s' is out of order or repeated", text);
		const struct lz_netroute *f = fixed_route_of(rt->prefix);
		if (f != NULL) {
			if (rt->kind != f->kind)
				return lz_err_set(err, EINVAL,
						  "network policy: fixed route '%s' has the wrong kind", text);
			n_fixed++;
			continue;
		}
		if (rt->kind == LZ_NETROUTE_EGRESS) {
			if (!lz_prefix_equal(rt->prefix, EGRESS_ROUTE.prefix) || p->names.n_allow == 0)
				return lz_err_set(err, EINVAL,
						  "network policy: egress route '%s' without a name policy or "
						  "at another address",
						  text);
			n_egress++;
			continue;
		}
		switch (rt->kind) {
		case LZ_NETROUTE_ALLOW:
			if (allow_refused(rt->prefix))
				return lz_err_set(err, EINVAL,
						  "network policy: allow '%s' intersects the reserved topology",
						  text);
			break;
		case LZ_NETROUTE_DENY:
			if (deny_refused(rt->prefix))
				return lz_err_set(err, EINVAL,
						  "network policy: deny '%s' lies inside the reserved topology",
						  text);
			break;
		default:
			return lz_err_set(err, EINVAL,
					  "network policy: '%s' is not a fixed route but has a fixed kind",
					  text);
		}
	}
	if (n_egress != (p->names.n_allow > 0))
		return lz_err_set(err, EINVAL, "network policy: the egress route and the name policy "
					       "come together");
	/* Prefixes are unique, so each fixed route matched at most once. */
	if (n_fixed != LZ_ARRAY_SIZE(fixed_routes))
		return lz_err_set(err, EINVAL, "network policy: a fixed topology or default route is missing");
	/* Each special deny is there, or an allow route covers it. */
	for (size_t k = 0; k < LZ_ARRAY_SIZE(special_denies); k++) {
		bool ok = false;
		for (size_t i = 0; i < p->n_routes && !ok; i++) {
			const struct lz_netroute *rt = &p->routes[i];
			ok = rt->kind == LZ_NETROUTE_DENY ? lz_prefix_equal(rt->prefix, special_denies[k])
			     : rt->kind == LZ_NETROUTE_ALLOW ? lz_prefix_contains(rt->prefix, special_denies[k])
							     : false;
		}
		if (!ok) {
			lz_prefix_format(special_denies[k], text);
			return lz_err_set(err, EINVAL,
					  "network policy: the default deny '%s' is missing and no allow covers it",
					  text);
		}
	}
	return 0;
}

/* ---- policy encoding ------------------------------------------------------ */

int lz_netpolicy_encode(const struct lz_netpolicy *p, uint8_t *buf, size_t cap, size_t *ret_len)
{
	if (lz_netpolicy_validate(p, NULL) < 0)
		return -EINVAL;
	struct lz_pc_writer w;
	lz_pc_writer_init(&w, buf, cap);
	bool named = p->names.n_allow > 0;
	lz_pc_put_u32(&w, named ? LZ_NETPOLICY_VERSION_NAMES : LZ_NETPOLICY_VERSION);
	lz_pc_put_bool(&w, p->ipv4_default_allow);
	lz_pc_put_bool(&w, p->ipv6_disabled);
	lz_pc_put_seq_len(&w, p->n_routes);
	for (size_t i = 0; i < p->n_routes; i++) {
		uint32_t a = p->routes[i].prefix.addr;
		uint8_t be[4] = { (uint8_t)(a >> 24), (uint8_t)(a >> 16), (uint8_t)(a >> 8), (uint8_t)a };
		lz_pc_put_fixed(&w, be, sizeof(be));
		lz_pc_put_u8(&w, p->routes[i].prefix.len);
		lz_pc_put_discriminant(&w, (uint32_t)p->routes[i].kind);
	}
	if (named) {
		lz_pc_put_seq_len(&w, p->names.n_allow);
		for (size_t i = 0; i < p->names.n_allow; i++)
			lz_pc_put_str(&w, p->names.allow[i], strlen(p->names.allow[i]));
		lz_pc_put_seq_len(&w, p->names.n_deny);
		for (size_t i = 0; i < p->names.n_deny; i++)
			lz_pc_put_str(&w, p->names.deny[i], strlen(p->names.deny[i]));
		lz_pc_put_seq_len(&w, p->names.n_resolvers);
		for (size_t i = 0; i < p->names.n_resolvers; i++) {
			uint32_t a = p->names.resolvers[i];
			uint8_t be[4] = { (uint8_t)(a >> 24), (uint8_t)(a >> 16), (uint8_t)(a >> 8), (uint8_t)a };
			lz_pc_put_fixed(&w, be, sizeof(be));
		}
	}
	return lz_pc_writer_finish(&w, ret_len);
}

static int bad(struct lz_err *err, size_t pos, const char *what)
{
	return lz_err_set(err, EBADMSG, "network policy byte %zu: %s", pos, what);
}

static int get_names(struct lz_pc_reader *r, char out[][LZ_NETPOLICY_NAME_MAX + 1], size_t *ret_n)
{
	size_t n;
	if (lz_pc_get_seq_len(r, LZ_NETPOLICY_MAX_NAMES, &n) < 0)
		return -EBADMSG;
	for (size_t i = 0; i < n; i++) {
		const char *s;
		size_t len;
		if (lz_pc_get_str(r, LZ_NETPOLICY_NAME_MAX, &s, &len) < 0 || memchr(s, '\0', len) != NULL)
			return -EBADMSG;
		memcpy(out[i], s, len);
		out[i][len] = '\0';
	}
	*ret_n = n;
	return 0;
}

static int decode_names(struct lz_pc_reader *r, struct lz_netpolicy_names *nm)
{
	size_t n;
	if (get_names(r, nm->allow, &nm->n_allow) < 0 || get_names(r, nm->deny, &nm->n_deny) < 0 ||
	    lz_pc_get_seq_len(r, LZ_NETPOLICY_MAX_RESOLVERS, &n) < 0)
		return -EBADMSG;
	for (size_t i = 0; i < n; i++) {
		uint8_t be[4];
		if (lz_pc_get_fixed(r, be, sizeof(be)) < 0)
			return -EBADMSG;
		nm->resolvers[i] = (uint32_t)be[0] << 24 | (uint32_t)be[1] << 16 | (uint32_t)be[2] << 8 | be[3];
	}
	nm->n_resolvers = n;
	/* Version 2 means a name policy: an empty allow list is not canonical. */
	return nm->n_allow > 0 ? 0 : -EBADMSG;
}

int lz_netpolicy_decode(const uint8_t *buf, size_t len, struct lz_netpolicy *ret,
			struct lz_err *err)
{
	_cleanup_free_ struct lz_netpolicy *pp = calloc(1, sizeof(*pp));
	if (pp == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	struct lz_netpolicy *q = pp;
	struct lz_pc_reader r;
	uint32_t version;
	size_t n;

	if (len > LZ_NETPOLICY_ENCODED_MAX)
		return lz_err_set(err, EBADMSG, "network policy: %zu bytes, at most %d", len,
				  LZ_NETPOLICY_ENCODED_MAX);
	lz_pc_reader_init(&r, buf, len);
	if (lz_pc_get_u32(&r, &version) < 0)
		return bad(err, r.pos, "truncated or malformed version");
	if (version != LZ_NETPOLICY_VERSION && version != LZ_NETPOLICY_VERSION_NAMES)
		return lz_err_set(err, EBADMSG, "network policy: version %u, want %u or %u", version,
				  LZ_NETPOLICY_VERSION, LZ_NETPOLICY_VERSION_NAMES);
	if (lz_pc_get_bool(&r, &q->ipv4_default_allow) < 0 || lz_pc_get_bool(&r, &q->ipv6_disabled) < 0)
		return bad(err, r.pos, "truncated or malformed flag");
	if (lz_pc_get_seq_len(&r, LZ_NETPOLICY_MAX_ROUTES, &n) < 0)
		return bad(err, r.pos, "truncated, malformed or excessive route count");
	for (size_t i = 0; i < n; i++) {
		uint8_t be[4], plen;
		uint32_t kind;
		if (lz_pc_get_fixed(&r, be, sizeof(be)) < 0 || lz_pc_get_u8(&r, &plen) < 0 ||
		    lz_pc_get_discriminant(&r, &kind) < 0)
			return bad(err, r.pos, "truncated or malformed route");
		if (!kind_known(kind))
			return bad(err, r.pos, "unknown route kind");
		q->routes[i] = (struct lz_netroute){
			{ (uint32_t)be[0] << 24 | (uint32_t)be[1] << 16 | (uint32_t)be[2] << 8 | be[3], plen },
			(enum lz_netroute_kind)kind,
		};
	}
	q->n_routes = n;
	if (version == LZ_NETPOLICY_VERSION_NAMES && decode_names(&r, &q->names) < 0)
		return bad(err, r.pos, "truncated or malformed name policy");
	if (lz_pc_reader_end(&r) < 0)
		return bad(err, r.pos, "trailing bytes");
	int e = lz_netpolicy_validate(q, err);
	if (e < 0) {
		if (err)
			err->code = EBADMSG;
		return -EBADMSG;
	}
	memcpy(ret, q, sizeof(*q));
	return 0;
}

/* ---- digests -------------------------------------------------------------- */

struct sha {
	EVP_MD_CTX *ctx;
	bool ok;
};

static void sha_init(struct sha *s, const char *tag, size_t tag_len)
{
	s->ctx = EVP_MD_CTX_new();
	s->ok = s->ctx != NULL && EVP_DigestInit_ex(s->ctx, EVP_sha256(), NULL) == 1 &&
		EVP_DigestUpdate(s->ctx, tag, tag_len) == 1;
}

static void sha_raw(struct sha *s, const void *p, size_t n)
{
	s->ok = s->ok && (n == 0 || EVP_DigestUpdate(s->ctx, p, n) == 1);
}

static void sha_be64(struct sha *s, uint64_t v)
{
	uint8_t be[8];
	for (int i = 0; i < 8; i++)
		be[i] = (uint8_t)(v >> (56 - 8 * i));
	sha_raw(s, be, sizeof(be));
}

/* be32(n) || bytes */
static void sha_framed(struct sha *s, const void *p, uint32_t n)
{
	uint8_t be[4] = { (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n };
	sha_raw(s, be, sizeof(be));
	sha_raw(s, p, n);
}

static int sha_final(struct sha *s, uint8_t out[32])
{
	uint8_t md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	bool ok = s->ok && EVP_DigestFinal_ex(s->ctx, md, &n) == 1 && n == 32;
	EVP_MD_CTX_free(s->ctx);
	s->ctx = NULL;
	if (!ok)
		return -EIO;
	memcpy(out, md, 32);
	return 0;
}

int lz_netpolicy_digest_bytes(const uint8_t *bytes, size_t len,
			      uint8_t out[LZ_NETPOLICY_DIGEST_LEN])
{
	static const char tag[] = "lazaret-netpolicy-v1";
	struct sha s;
	sha_init(&s, tag, sizeof(tag) - 1);
	sha_raw(&s, bytes, len);
	return sha_final(&s, out);
}

int lz_netpolicy_digest(const struct lz_netpolicy *p, uint8_t out[LZ_NETPOLICY_DIGEST_LEN])
{
	uint8_t buf[LZ_NETPOLICY_ENCODED_MAX];
	size_t len;
	int r = lz_netpolicy_encode(p, buf, sizeof(buf), &len);
	if (r < 0)
		return r;
	return lz_netpolicy_digest_bytes(buf, len, out);
}

/* ---- sealed memfd transport ---------------------------------------------- */

int lz_netpolicy_to_memfd(const uint8_t *bytes, size_t len, int *ret_fd, struct lz_err *err)
{
	if (len == 0 || len > LZ_NETPOLICY_ENCODED_MAX)
		return lz_err_set(err, EINVAL, "network policy memfd: %zu bytes, want 1..%d", len,
				  LZ_NETPOLICY_ENCODED_MAX);
	return lz_memfd_sealed("lazaret-netpolicy", bytes, len, false, ret_fd, err);
}

int lz_netpolicy_from_memfd(int fd, const uint8_t expected_digest[LZ_NETPOLICY_DIGEST_LEN],
			    struct lz_netpolicy *ret, struct lz_err *err)
{
	uint8_t buf[LZ_NETPOLICY_ENCODED_MAX];
	uint8_t digest[LZ_NETPOLICY_DIGEST_LEN];
	struct lz_netpolicy p;
	struct stat st;
	int r;

	/* Seals first: only then are size and contents fixed for good. */
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0)
		return lz_err_set(err, errno == EINVAL ? EPERM : errno,
				  "network policy memfd: F_GET_SEALS: %m (not a sealable memfd)");
	if (seals != REQUIRED_SEALS)
		return lz_err_set(err, EPERM, "network policy memfd: seals %#x, want exactly %#x",
				  (unsigned)seals, (unsigned)REQUIRED_SEALS);
	if (fstat(fd, &st) < 0)
		return lz_err_set(err, errno, "network policy memfd: fstat: %m");
	if (!S_ISREG(st.st_mode) || st.st_size < 1 || st.st_size > LZ_NETPOLICY_ENCODED_MAX)
		return lz_err_set(err, EBADMSG, "network policy memfd: size %lld, want 1..%d",
				  (long long)st.st_size, LZ_NETPOLICY_ENCODED_MAX);
	size_t len = (size_t)st.st_size;
	for (size_t done = 0; done < len;) {
		ssize_t n = pread(fd, buf + done, len - done, (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return lz_err_set(err, errno, "network policy memfd: read: %m");
		if (n == 0)
			return lz_err_set(err, EBADMSG, "network policy memfd: short read");
		done += (size_t)n;
	}
	if ((r = lz_netpolicy_digest_bytes(buf, len, digest)) < 0)
		return lz_err_set(err, -r, "network policy memfd: digest failed");
	if (CRYPTO_memcmp(digest, expected_digest, sizeof(digest)) != 0)
		return lz_err_set(err, EBADMSG, "network policy memfd: digest mismatch");
	if ((r = lz_netpolicy_decode(buf, len, &p, err)) < 0)
		return lz_err_prefix(err, r, "network policy memfd: ");
	memcpy(ret, &p, sizeof(p));
	return 0;
}

/* ---- readiness fingerprint ------------------------------------------------ */

int lz_netready_fingerprint(const uint8_t domain_id[32], uint64_t generation,
			    const uint8_t config_fp[32], const char sidecar_id_hex[33],
			    const uint8_t policy_digest[32], uint64_t netns_dev, uint64_t netns_ino,
			    uint8_t out[LZ_NETREADY_FP_LEN])
{
	static const char tag[] = "lazaret-network-readiness-v1";
	for (size_t i = 0; i < 32; i++) {
		char c = sidecar_id_hex[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return -EINVAL;
	}
	if (sidecar_id_hex[32] != '\0')
		return -EINVAL;

	struct sha s;
	sha_init(&s, tag, sizeof(tag) - 1);
	sha_framed(&s, domain_id, 32);
	sha_be64(&s, generation);
	sha_framed(&s, config_fp, 32);
	sha_framed(&s, sidecar_id_hex, 32);
	sha_framed(&s, policy_digest, 32);
	sha_be64(&s, netns_dev);
	sha_be64(&s, netns_ino);
	return sha_final(&s, out);
}
