/* libFuzzer target for the egress proxy's parsers (spec 3.7): the first
 * input byte picks one, the rest is its input.
 *   0 net/httphead: a refusal is one of the documented codes and leaves
 *     the request untouched; an accepted head lies within the input and
 *     the limit, its host is normalized, every shorter prefix is -EAGAIN,
 *     and a forward request rewrites to a head that ends in
 *     "Connection: close", exactly filling a buffer of its size and
 *     refused (-EMSGSIZE) by one byte less; the input given in two
 *     calls (lz_http_parse_head_more) gets the same answer.
 *   1 net/tlssni: documented codes, output untouched on refusal, a found
 *     name is normalized; the input given in two calls gets the same
 *     answer.
 *   2 net/dnsquery answers for a fixed question, the id taken from the
 *     input: documented codes, outputs untouched, 1..cap addresses.
 *   3 resolv.conf text: at most cap servers.
 *   4 name normalization: idempotent, a valid pattern, and it survives a
 *     query built for it turned into an answer.
 * Any violation abort()s. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/dnsquery.h"
#include "net/egressname.h"
#include "net/httphead.h"
#include "net/tlssni.h"

static void check(bool ok)
{
	if (!ok)
		abort();
}

/* A normalized name: lz_egress_name_normalize gives it back unchanged. */
static bool normalized(const char *name)
{
	char again[LZ_EGRESS_NAME_MAX + 1];
	size_t n = strnlen(name, LZ_EGRESS_NAME_MAX + 1);
	return n <= LZ_EGRESS_NAME_MAX && lz_egress_name_normalize(name, n, again, NULL) == 0 &&
	       strcmp(again, name) == 0;
}

static uint8_t out[2 * LZ_HTTP_HEAD_MAX + 256];

/* The first half, then all of it: the whole parse's answer. */
static void http_in_two(const uint8_t *data, size_t size, int want, const struct lz_http_request *r)
{
	struct lz_http_scan scan = { 0, 0 };
	struct lz_http_request g;
	if (lz_http_parse_head_more(data, size / 2, &scan, &g, NULL) != -EAGAIN)
		return;
	int ret = lz_http_parse_head_more(data, size, &scan, &g, NULL);
	check(ret == want);
	check(ret < 0 || (g.kind == r->kind && strcmp(g.host, r->host) == 0 && g.port == r->port &&
			  g.head_len == r->head_len && g.host_is_ipv4 == r->host_is_ipv4 && g.ipv4 == r->ipv4));
}

static void fuzz_http(const uint8_t *data, size_t size)
{
	struct lz_http_request r, s;
	memset(&r, 0x5a, sizeof(r));
	memcpy(&s, &r, sizeof(r));
	int ret = lz_http_parse_head(data, size, &r, NULL);
	http_in_two(data, size, ret, &r);
	if (ret < 0) {
		check(ret == -EAGAIN || ret == -E2BIG || ret == -EINVAL || ret == -ENOTSUP || ret == -EPROTO);
		check(ret != -EAGAIN || size < LZ_HTTP_HEAD_MAX);
		check(memcmp(&r, &s, sizeof(r)) == 0);
		return;
	}
	check(r.head_len >= 4 && r.head_len <= size && r.head_len <= LZ_HTTP_HEAD_MAX);
	check(memcmp(data + r.head_len - 4, "\r\n\r\n", 4) == 0);
	check(r.port >= 1 && (r.host_is_ipv4 || normalized(r.host)));
	check(lz_http_parse_head(data, r.head_len, &s, NULL) == 0 && memcmp(&r, &s, sizeof(r)) == 0);
	check(lz_http_parse_head(data, r.head_len - 1, &s, NULL) == -EAGAIN);
	size_t n = 0, m = 7;
	ret = lz_http_rewrite_forward(data, r.head_len, &r, out, sizeof(out), &n);
	if (r.kind == LZ_HTTP_CONNECT) {
		check(ret == -EINVAL);
		return;
	}
	check(ret == 0 && n >= 23 && memcmp(out + n - 21, "Connection: close\r\n\r\n", 21) == 0);
	check(lz_http_rewrite_forward(data, r.head_len, &r, out, n, &m) == 0 && m == n);
	m = 7;
	check(lz_http_rewrite_forward(data, r.head_len, &r, out, n - 1, &m) == -EMSGSIZE && m == 7);
}

static void fuzz_tls(const uint8_t *data, size_t size)
{
	char name[LZ_EGRESS_NAME_MAX + 1], sentinel[LZ_EGRESS_NAME_MAX + 1];
	memset(name, 0x5a, sizeof(name));
	memset(sentinel, 0x5a, sizeof(sentinel));
	int ret = lz_tls_client_hello_sni(data, size, name, NULL);
	/* The first half, then all of it: the same answer. */
	static struct lz_tls_scan scan;
	char again[LZ_EGRESS_NAME_MAX + 1];
	memset(&scan, 0, sizeof(scan));
	int two = lz_tls_client_hello_sni_more(data, size / 2, &scan, again, NULL);
	if (two == -EAGAIN)
		check(lz_tls_client_hello_sni_more(data, size, &scan, again, NULL) == ret &&
		      (ret < 0 || strcmp(again, name) == 0));
	if (ret < 0) {
		check(ret == -ENOTSUP || ret == -EAGAIN || ret == -E2BIG || ret == -EBADMSG || ret == -ENOENT);
		check(ret != -EAGAIN || size < LZ_TLS_HELLO_MAX);
		check(memcmp(name, sentinel, sizeof(name)) == 0);
		return;
	}
	check(normalized(name));
}

static void fuzz_dns(const uint8_t *data, size_t size)
{
	uint32_t addrs[LZ_DNS_MAX_ADDRS + 1];
	size_t n = 99, cap = size > 0 ? (size_t)(data[0] % (LZ_DNS_MAX_ADDRS + 1)) + 1 : 1;
	uint16_t id = size >= 2 ? (uint16_t)(data[0] << 8 | data[1]) : 0;
	memset(addrs, 0x5a, sizeof(addrs));
	int ret = lz_dns_parse_answer(data, size, id, "www.example.com", addrs, cap, &n, NULL);
	if (ret < 0) {
		check(ret == -EBADMSG || ret == -EMSGSIZE || ret == -ENOENT || ret == -EIO);
		check(n == 99);
		for (size_t i = 0; i < LZ_DNS_MAX_ADDRS + 1; i++)
			check(addrs[i] == 0x5a5a5a5au);
		return;
	}
	check(n >= 1 && n <= cap && n <= LZ_DNS_MAX_ADDRS);
	for (size_t i = n; i < LZ_DNS_MAX_ADDRS + 1; i++)
		check(addrs[i] == 0x5a5a5a5au);
}

static void fuzz_resolvconf(const uint8_t *data, size_t size)
{
	uint32_t servers[4];
	size_t n = 99;
	check(lz_resolvconf_nameservers((const char *)data, size, servers, 3, &n) == 0 && n <= 3);
}

static void fuzz_name(const uint8_t *data, size_t size)
{
	char name[LZ_EGRESS_NAME_MAX + 1], sentinel[LZ_EGRESS_NAME_MAX + 1];
	memset(name, 0x5a, sizeof(name));
	memset(sentinel, 0x5a, sizeof(sentinel));
	int ret = lz_egress_name_normalize((const char *)data, size, name, NULL);
	if (ret < 0) {
		check(ret == -EINVAL && memcmp(name, sentinel, sizeof(name)) == 0);
		return;
	}
	check(normalized(name) && lz_egress_pattern_check(name, NULL) == 0 && lz_egress_pattern_match(name, name));
	char wild[LZ_EGRESS_NAME_MAX + 3] = "*.";
	memcpy(wild + 2, name, strlen(name) + 1);
	check((lz_egress_pattern_check(wild, NULL) == 0) == (strchr(name, '.') != NULL));
	check(!lz_egress_pattern_match(wild, name));

	/* The query for it, answered with one address, gives that address. */
	uint8_t msg[600];
	size_t len = 0, n = 0;
	uint32_t addr = 0;
	check(lz_dns_build_query(0x4242, name, false, msg, sizeof(msg) - 16, &len) == 0);
	msg[2] = 0x81;
	msg[3] = 0x80;
	msg[7] = 1;
	static const uint8_t rr[16] = { 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1 };
	memcpy(msg + len, rr, sizeof(rr));
	check(lz_dns_parse_answer(msg, len + sizeof(rr), 0x4242, name, &addr, 1, &n, NULL) == 0);
	check(n == 1 && addr == 0xc0000201u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	switch (data[0] % 5) {
	case 0:
		fuzz_http(data + 1, size - 1);
		break;
	case 1:
		fuzz_tls(data + 1, size - 1);
		break;
	case 2:
		fuzz_dns(data + 1, size - 1);
		break;
	case 3:
		fuzz_resolvconf(data + 1, size - 1);
		break;
	default:
		fuzz_name(data + 1, size - 1);
		break;
	}
	return 0;
}
