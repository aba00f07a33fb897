#include "net/netattest.h"

#include <errno.h>

#include "util/postcard.h"
#include "util/cleanup.h"

static bool all_zero(const uint8_t *p, size_t n)
{
	uint8_t acc = 0;
	for (size_t i = 0; i < n; i++)
		acc |= p[i];
	return acc == 0;
}

/* Constant time: the echo is compared against a secret-derived answer. */
static bool equal_ct(const uint8_t *a, const uint8_t *b, size_t n)
{
	uint8_t acc = 0;
	for (size_t i = 0; i < n; i++)
		acc |= a[i] ^ b[i];
	return acc == 0;
}

int lz_netattest_encode(const struct lz_netattest *a, uint8_t *buf, size_t cap, size_t *ret_len)
{
	if (a->tap0_present != (a->tap0_ifindex != 0))
		return -EINVAL;
	if (!a->allowed_answered && !all_zero(a->allowed_echo, sizeof(a->allowed_echo)))
		return -EINVAL;
	struct lz_pc_writer w;
	lz_pc_writer_init(&w, buf, cap);
	lz_pc_put_u32(&w, LZ_NETATTEST_VERSION);
	lz_pc_put_bool(&w, a->policy_matches);
	lz_pc_put_bool(&w, a->canaries_live);
	lz_pc_put_option(&w, a->tap0_present);
	if (a->tap0_present)
		lz_pc_put_u32(&w, a->tap0_ifindex);
	lz_pc_put_option(&w, a->allowed_answered);
	if (a->allowed_answered)
		lz_pc_put_fixed(&w, a->allowed_echo, sizeof(a->allowed_echo));
	lz_pc_put_bool(&w, a->denied_canary_unreachable);
	lz_pc_put_bool(&w, a->ipv6_absent);
	lz_pc_put_bool(&w, a->netadmin_caps_empty);
	lz_pc_put_bool(&w, a->route_mutation_refused);
	lz_pc_put_bool(&w, a->veth_removed);
	lz_pc_put_bool(&w, a->allowed_canary_unreachable_after);
	lz_pc_put_bool(&w, a->tap0_present_after);
	lz_pc_put_bool(&w, a->ipv6_unchanged_after);
	lz_pc_put_bool(&w, a->rs_netadmin_dropped);
	lz_pc_put_bool(&w, a->egress_proxy_live);
	return lz_pc_writer_finish(&w, ret_len);
}

int lz_netattest_decode(const uint8_t *buf, size_t len, struct lz_netattest *ret)
{
	struct lz_netattest a = { 0 };
	struct lz_pc_reader r;
	uint32_t version;

	if (len > LZ_NETATTEST_ENCODED_MAX)
		return -EBADMSG;
	lz_pc_reader_init(&r, buf, len);
	if (lz_pc_get_u32(&r, &version) < 0 || version != LZ_NETATTEST_VERSION)
		return -EBADMSG;
	if (lz_pc_get_bool(&r, &a.policy_matches) < 0 || lz_pc_get_bool(&r, &a.canaries_live) < 0 ||
	    lz_pc_get_option(&r, &a.tap0_present) < 0)
		return -EBADMSG;
	if (a.tap0_present && (lz_pc_get_u32(&r, &a.tap0_ifindex) < 0 || a.tap0_ifindex == 0))
		return -EBADMSG;
	if (lz_pc_get_option(&r, &a.allowed_answered) < 0)
		return -EBADMSG;
	if (a.allowed_answered && lz_pc_get_fixed(&r, a.allowed_echo, sizeof(a.allowed_echo)) < 0)
		return -EBADMSG;
	if (lz_pc_get_bool(&r, &a.denied_canary_unreachable) < 0 ||
	    lz_pc_get_bool(&r, &a.ipv6_absent) < 0 || lz_pc_get_bool(&r, &a.netadmin_caps_empty) < 0 ||
	    lz_pc_get_bool(&r, &a.route_mutation_refused) < 0 ||
	    lz_pc_get_bool(&r, &a.veth_removed) < 0 ||
	    lz_pc_get_bool(&r, &a.allowed_canary_unreachable_after) < 0 ||
	    lz_pc_get_bool(&r, &a.tap0_present_after) < 0 ||
	    lz_pc_get_bool(&r, &a.ipv6_unchanged_after) < 0 ||
	    lz_pc_get_bool(&r, &a.rs_netadmin_dropped) < 0 ||
	    lz_pc_get_bool(&r, &a.egress_proxy_live) < 0 || lz_pc_reader_end(&r) < 0)
		return -EBADMSG;
	*ret = a;
	return 0;
}

int lz_netattest_check(const struct lz_netattest *a,
		       const uint8_t expected_answer[LZ_NETATTEST_CHALLENGE_LEN], bool egress_expected,
		       struct lz_err *err)
{
	/* Spec 3.7 evidence table order. */
	const struct {
		bool ok;
		const char *name;
	} preds[] = {
		{ a->policy_matches, "policy projection matches" },
		{ a->canaries_live, "canaries live before policy" },
		{ a->tap0_present && a->tap0_ifindex != 0, "tap0 present" },
		{ a->allowed_answered && equal_ct(a->allowed_echo, expected_answer,
						  LZ_NETATTEST_CHALLENGE_LEN),
		  "allowed canary answered" },
		{ a->denied_canary_unreachable, "denied canary unreachable" },
		{ a->ipv6_absent, "no non-loopback IPv6 address or route" },
		{ a->netadmin_caps_empty, "empty network-admin capability" },
		{ a->route_mutation_refused, "route mutation refused" },
		{ a->veth_removed, "veth removed with matching shape" },
		{ a->allowed_canary_unreachable_after, "formerly allowed canary unreachable" },
		{ a->tap0_present_after, "tap0 present after cleanup" },
		{ a->ipv6_unchanged_after, "IPv6 disposition unchanged" },
		{ a->rs_netadmin_dropped, "RS capability dropped" },
		{ a->egress_proxy_live == egress_expected, "egress proxy live" },
	};
	for (size_t i = 0; i < LZ_ARRAY_SIZE(preds); i++)
		if (!preds[i].ok)
			return lz_err_set(err, EPERM, "predicate '%s' failed", preds[i].name);
	return 0;
}
