/* The egress proxy's request head (spec 3.7): the two accepted forms, every
 * refusal, incremental input (the whole buffer, and a head that grows with
 * the search resumed: same answers, linear work), the size limits and the
 * forward rewrite. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "net/httphead.h"

static struct lz_http_request parse_ok(const char *head)
{
	struct lz_http_request r;
	struct lz_err err = { 0, "" };
	if (lz_http_parse_head((const uint8_t *)head, strlen(head), &r, &err) != 0)
		fail_msg("'%s' refused: %s", head, err.msg);
	return r;
}

/* Refused with want, with a message, and ret untouched. */
static void assert_refused_len(const char *head, size_t len, int want)
{
	struct lz_http_request r, sentinel;
	memset(&r, 0x5a, sizeof(r));
	memset(&sentinel, 0x5a, sizeof(sentinel));
	struct lz_err err = { 0, "" };
	int got = lz_http_parse_head((const uint8_t *)head, len, &r, &err);
	if (got != want)
		fail_msg("'%.*s': got %d (%s), want %d", (int)len, head, got, err.msg, want);
	if (want != -EAGAIN) {
		assert_int_equal(err.code, -want);
		assert_true(err.msg[0] != '\0');
	}
	assert_memory_equal(&r, &sentinel, sizeof(r));
}

static void assert_refused(const char *head, int want)
{
	assert_refused_len(head, strlen(head), want);
}

static void test_lz_http_parse_head__connect(void **state)
{
	(void)state;
	const char *head = "CONNECT Example.COM:443 HTTP/1.1\r\nHost: example.com:443\r\nUser-Agent: t\r\n\r\n";
	/* Bytes after the head (the tunnel's first bytes) are not the head's. */
	char buf[256];
	snprintf(buf, sizeof(buf), "%s\x16\x03\x01junk\n\r", head);
	struct lz_http_request r = parse_ok(buf);
	assert_int_equal(r.kind, LZ_HTTP_CONNECT);
	assert_string_equal(r.host, "example.com");
	assert_int_equal(r.port, 443);
	assert_int_equal(r.head_len, strlen(head));
	assert_false(r.host_is_ipv4);

	r = parse_ok("CONNECT a.b.:65535 HTTP/1.0\r\n\r\n");
	assert_string_equal(r.host, "a.b");
	assert_int_equal(r.port, 65535);
	r = parse_ok("CONNECT x:1 HTTP/1.1\r\n\r\n");
	assert_string_equal(r.host, "x");
	assert_int_equal(r.port, 1);
}

static void test_lz_http_parse_head__connect_ipv4(void **state)
{
	(void)state;
	struct lz_http_request r = parse_ok("CONNECT 192.0.2.10:22 HTTP/1.1\r\n\r\n");
	assert_true(r.host_is_ipv4);
	assert_int_equal(r.ipv4, 0xc000020au);
	assert_string_equal(r.host, "192.0.2.10");
	assert_int_equal(r.port, 22);
	r = parse_ok("CONNECT 255.255.255.255:443 HTTP/1.1\r\nHost: 255.255.255.255:443\r\n\r\n");
	assert_int_equal(r.ipv4, 0xffffffffu);
}

static void test_lz_http_parse_head__connect_target_refused(void **state)
{
	(void)state;
	assert_refused("CONNECT example.com HTTP/1.1\r\n\r\n", -EINVAL);
	assert_refused("CONNECT example.com: HTTP/1.1\r\n\r\n", -EINVAL);
	assert_refused("CONNECT example.com:0 HTTP/1.1\r\n\r\n", -EINVAL);
	assert_refused("CONNECT example.com:0443 HTTP/1.1\r\n\r\n", -EINVAL);
	assert_refused("CONNECT example.com:65536 HTTP/1.1\r\n\r\n", -EINVAL);
	assert_refused("CONNECT example.com:100000 HTTP/1.1\r\n\r\n", -EINVAL);
	assert_refused("CONNECT example.com:+443 HTTP/1.1\r\n\r\n", -EINVAL);
	assert_refused("CONNECT example.com:443:1 HTTP/1.1\r\n\r\n", -EINVAL);
	assert_refused("CONNECT example.com:443/ HTTP/1.1\r\n\r\n", -EINVAL);
	assert_refused("CONNECT :443 HTTP/1.1\r\n\r\n", -EINVAL);
	assert_refused("CONNECT a_b.com:443 HTTP/1.1\r\n\r\n", -EINVAL);
	assert_refused("CONNECT 010.0.0.1:443 HTTP/1.1\r\n\r\n", -EINVAL);
	assert_refused("CONNECT 10.0.1:443 HTTP/1.1\r\n\r\n", -EINVAL);
	assert_refused("CONNECT 256.0.0.1:443 HTTP/1.1\r\n\r\n", -EINVAL);
	assert_refused("CONNECT 2130706433:443 HTTP/1.1\r\n\r\n", -EINVAL);
	assert_refused("CONNECT 0x7f000001:443 HTTP/1.1\r\n\r\n", -EINVAL);
	assert_refused("CONNECT [::1]:443 HTTP/1.1\r\n\r\n", -ENOTSUP);
	assert_refused("CONNECT user@example.com:443 HTTP/1.1\r\n\r\n", -ENOTSUP);
	assert_refused("CONNECT ex%61mple.com:443 HTTP/1.1\r\n\r\n", -ENOTSUP);
}

static void test_lz_http_parse_head__forward(void **state)
{
	(void)state;
	struct lz_http_request r =
		parse_ok("GET http://Example.com/a/b?q=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n");
	assert_int_equal(r.kind, LZ_HTTP_FORWARD);
	assert_string_equal(r.host, "example.com");
	assert_int_equal(r.port, 80);
	assert_false(r.host_is_ipv4);

	r = parse_ok("POST HTTP://example.com:8080 HTTP/1.0\r\nContent-Length: 3\r\n\r\n");
	assert_int_equal(r.port, 8080);
	r = parse_ok("PURGE http://10.1.2.3?x HTTP/1.1\r\n\r\n");
	assert_true(r.host_is_ipv4);
	assert_int_equal(r.ipv4, 0x0a010203u);
	assert_int_equal(r.port, 80);
	/* "connect" is another method than CONNECT (methods are case-sensitive). */
	r = parse_ok("connect http://a.example/ HTTP/1.1\r\n\r\n");
	assert_int_equal(r.kind, LZ_HTTP_FORWARD);
}

static void test_lz_http_parse_head__forms_not_supported(void **state)
{
	(void)state;
	assert_refused("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", -ENOTSUP);
	assert_refused("OPTIONS * HTTP/1.1\r\n\r\n", -ENOTSUP);
	assert_refused("GET https://example.com/ HTTP/1.1\r\n\r\n", -ENOTSUP);
	assert_refused("GET ftp://example.com/ HTTP/1.1\r\n\r\n", -ENOTSUP);
	assert_refused("GET example.com:80 HTTP/1.1\r\n\r\n", -ENOTSUP);
	assert_refused("GET http://user:pw@example.com/ HTTP/1.1\r\n\r\n", -ENOTSUP);
	assert_refused("GET http://[::1]/ HTTP/1.1\r\n\r\n", -ENOTSUP);
	assert_refused("GET http://%65xample.com/ HTTP/1.1\r\n\r\n", -ENOTSUP);
	assert_refused("GET http://example.com/ HTTP/2.0\r\n\r\n", -ENOTSUP);
	assert_refused("GET http://example.com/ HTTP/1.2\r\n\r\n", -ENOTSUP);
	assert_refused("CONNECT example.com:443 HTTP/0.9\r\n\r\n", -ENOTSUP);
}

static void test_lz_http_parse_head__request_line_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"\r\n\r\n",
		"\r\nGET http://a.com/ HTTP/1.1\r\n\r\n",
		"GET  http://a.com/ HTTP/1.1\r\n\r\n",
		"GET http://a.com/  HTTP/1.1\r\n\r\n",
		"GET http://a.com/ HTTP/1.1 \r\n\r\n",
		" GET http://a.com/ HTTP/1.1\r\n\r\n",
		"GET\thttp://a.com/ HTTP/1.1\r\n\r\n",
		"GET http://a.com/ http/1.1\r\n\r\n",
		"GET http://a.com/ HTTP/1.10\r\n\r\n",
		"GET http://a.com/ HTTP/1\r\n\r\n",
		"GET http://a.com/\r\n\r\n",
		"GET http://a.com/#frag HTTP/1.1\r\n\r\n",
		"G(T http://a.com/ HTTP/1.1\r\n\r\n",
		"GET http://a.com/\x7f HTTP/1.1\r\n\r\n",
		"GET http://a.com/\xc3\xa4 HTTP/1.1\r\n\r\n",
		"GET http://a..com/ HTTP/1.1\r\n\r\n",
		"GET http://a.com:/ HTTP/1.1\r\n\r\n",
		"GET http:/// HTTP/1.1\r\n\r\n",
		"GET http://1.2.3/ HTTP/1.1\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_refused(bad[i], -EINVAL);
	assert_refused_len("GET http://a.com/\0 HTTP/1.1\r\n\r\n", sizeof("GET http://a.com/\0 HTTP/1.1\r\n\r\n") - 1,
			   -EINVAL);
}

static void test_lz_http_parse_head__line_ends_refused(void **state)
{
	(void)state;
	assert_refused("GET http://a.com/ HTTP/1.1\n\n", -EINVAL);
	assert_refused("GET http://a.com/ HTTP/1.1\r\nA: b\n\r\n", -EINVAL);
	assert_refused("GET http://a.com/ HTTP/1.1\r\nA: b\rc\r\n\r\n", -EINVAL);
	assert_refused("GET http://a.com/ HTTP/1.1\r\n\r\r\n", -EINVAL);
	/* Refused as soon as seen, before the head is complete. */
	assert_refused("GET http://a.com/ HTTP/1.1\n", -EINVAL);
	assert_refused("GET http://a.com/ HTTP/1.1\rX", -EINVAL);
	/* A CR at the very end may be followed by its LF. */
	assert_refused("GET http://a.com/ HTTP/1.1\r", -EAGAIN);
}

static void test_lz_http_parse_head__fields_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"GET http://a.com/ HTTP/1.1\r\nA: b\r\n c\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\nA: b\r\n\tc\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\n Host: a.com\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\nHost : a.com\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\n: x\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\nNoColon\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\nA(b: x\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\nA: x\x01y\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\nA: x\x1b[0m\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\nA: x\x7f\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\nHost: a.com\r\nHost: a.com\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\ntransfer-encoding: chunked\r\ncontent-length: 1\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\nContent-Length: \r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_refused(bad[i], -EINVAL);
	assert_refused_len("GET http://a.com/ HTTP/1.1\r\nA: x\0y\r\n\r\n",
			   sizeof("GET http://a.com/ HTTP/1.1\r\nA: x\0y\r\n\r\n") - 1, -EINVAL);
	/* HTAB, obs-text and surrounding whitespace are fine in values. */
	parse_ok("GET http://a.com/ HTTP/1.1\r\nA:\tx\ty \xff\t \r\nB:\r\n\r\n");
	parse_ok("GET http://a.com/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
	parse_ok("GET http://a.com/ HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
}

static void test_lz_http_parse_head__host_header_must_match(void **state)
{
	(void)state;
	static const char *const mismatched[] = {
		"GET http://a.com/ HTTP/1.1\r\nHost: b.com\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\nHost: a.com:8080\r\n\r\n",
		"GET http://a.com:8080/ HTTP/1.1\r\nHost: a.com\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\nHost: a.com.evil.net\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\nHost: \r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\nHost: a.com x\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\nHost: u@a.com\r\n\r\n",
		"GET http://a.com/ HTTP/1.1\r\nHost: a.com:080\r\n\r\n",
		"GET http://10.0.0.1/ HTTP/1.1\r\nHost: 10.0.0.2\r\n\r\n",
		"GET http://10.0.0.1/ HTTP/1.1\r\nHost: 010.0.0.1\r\n\r\n",
		"CONNECT a.com:443 HTTP/1.1\r\nHost: b.com:443\r\n\r\n",
		"CONNECT a.com:443 HTTP/1.1\r\nHost: a.com:80\r\n\r\n",
		"CONNECT a.com:443 HTTP/1.1\r\nhOsT: evil.com\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(mismatched) / sizeof(mismatched[0]); i++)
		assert_refused(mismatched[i], -EPROTO);
	/* Same host and port under normalization. */
	parse_ok("GET http://a.com/ HTTP/1.1\r\nhost:  A.COM.  \r\n\r\n");
	parse_ok("GET http://a.com/ HTTP/1.1\r\nHost: a.com:80\r\n\r\n");
	parse_ok("GET http://a.com:8080/ HTTP/1.1\r\nHost: a.com:8080\r\n\r\n");
	parse_ok("GET http://10.0.0.1/ HTTP/1.1\r\nHost: 10.0.0.1:80\r\n\r\n");
	parse_ok("CONNECT a.com:443 HTTP/1.1\r\nHost: a.com\r\n\r\n");
}

static size_t fields_head(char *buf, size_t cap, int fields)
{
	size_t n = (size_t)snprintf(buf, cap, "GET http://a.com/ HTTP/1.1\r\n");
	for (int i = 0; i < fields; i++)
		n += (size_t)snprintf(buf + n, cap - n, "X-%d: %d\r\n", i, i);
	n += (size_t)snprintf(buf + n, cap - n, "\r\n");
	return n;
}

static void test_lz_http_parse_head__field_count_limit(void **state)
{
	(void)state;
	char buf[4096];
	fields_head(buf, sizeof(buf), 100);
	parse_ok(buf);
	fields_head(buf, sizeof(buf), 101);
	assert_refused(buf, -E2BIG);
}

static void test_lz_http_parse_head__size_limit(void **state)
{
	(void)state;
	char *buf = malloc(LZ_HTTP_HEAD_MAX + 64);
	assert_non_null(buf);
	/* A head of exactly LZ_HTTP_HEAD_MAX bytes. */
	const char *line = "GET http://a.com/ HTTP/1.1\r\nX: ";
	size_t n = strlen(line);
	memcpy(buf, line, n);
	memset(buf + n, 'v', LZ_HTTP_HEAD_MAX - n - 4);
	memcpy(buf + LZ_HTTP_HEAD_MAX - 4, "\r\n\r\n", 4);
	struct lz_http_request r;
	assert_int_equal(lz_http_parse_head((uint8_t *)buf, LZ_HTTP_HEAD_MAX, &r, NULL), 0);
	assert_int_equal(r.head_len, LZ_HTTP_HEAD_MAX);
	/* One byte longer: the end lies beyond the limit. */
	memset(buf + n, 'v', LZ_HTTP_HEAD_MAX - n - 3);
	memcpy(buf + LZ_HTTP_HEAD_MAX - 3, "\r\n\r\n", 4);
	assert_refused_len(buf, LZ_HTTP_HEAD_MAX + 1, -E2BIG);
	assert_refused_len(buf, LZ_HTTP_HEAD_MAX, -E2BIG);
	assert_refused_len(buf, LZ_HTTP_HEAD_MAX - 1, -EAGAIN);
	free(buf);
}

/* Every proper prefix of a valid head is -EAGAIN, ret untouched. */
static void test_lz_http_parse_head__every_prefix_incomplete(void **state)
{
	(void)state;
	static const char *const heads[] = {
		"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
		"GET http://example.com/x?y HTTP/1.1\r\nHost: example.com\r\nA:\tb\r\n\r\n",
		"POST http://10.0.0.1:8080/ HTTP/1.0\r\nContent-Length: 5\r\n\r\n",
	};
	for (size_t h = 0; h < sizeof(heads) / sizeof(heads[0]); h++) {
		size_t len = strlen(heads[h]);
		assert_int_equal(parse_ok(heads[h]).head_len, len);
		for (size_t i = 0; i < len; i++)
			assert_refused_len(heads[h], i, -EAGAIN);
	}
}

/* ---- a head that grows: lz_http_parse_head_more --------------------------- */

/* One call of a growing parse: the same answer as the whole-buffer parse
 * of buf[0..len) (code, message, request), ret untouched on refusal. */
static int more_same(const char *buf, size_t len, struct lz_http_scan *scan)
{
	struct lz_http_request whole, grown;
	memset(&whole, 0x5a, sizeof(whole));
	memset(&grown, 0x5a, sizeof(grown));
	struct lz_err ew = { 0, "" }, eg = { 0, "" };
	int want = lz_http_parse_head((const uint8_t *)buf, len, &whole, &ew);
	int got = lz_http_parse_head_more((const uint8_t *)buf, len, scan, &grown, &eg);
	if (got != want || strcmp(ew.msg, eg.msg) != 0)
		fail_msg("'%.*s' (%zu bytes): resumed %d (%s), whole %d (%s)", (int)len, buf, len, got, eg.msg, want,
			 ew.msg);
	if (got < 0) {
		assert_memory_equal(&grown, &whole, sizeof(whole)); /* both untouched */
		return got;
	}
	assert_int_equal(grown.kind, whole.kind);
	assert_memory_equal(grown.host, whole.host, sizeof(whole.host));
	assert_int_equal(grown.port, whole.port);
	assert_int_equal(grown.head_len, whole.head_len);
	assert_int_equal(grown.host_is_ipv4, whole.host_is_ipv4);
	assert_int_equal(grown.ipv4, whole.ipv4);
	return got;
}

/* buf[0..len) given in pieces ending at cuts[0] < cuts[1] < ... < len:
 * each answer is the whole parse's; returns the last. */
static int feed_cuts(const char *buf, size_t len, const size_t *cuts, size_t n_cuts, struct lz_http_scan *scan)
{
	int r = -EAGAIN;
	for (size_t i = 0; i <= n_cuts && r == -EAGAIN; i++)
		r = more_same(buf, i < n_cuts ? cuts[i] : len, scan);
	return r;
}

/* buf[0..len) a byte per call; returns the first answer that is not
 * -EAGAIN (or -EAGAIN) and the bytes given then in *ret_at. */
static int feed_bytes(const char *buf, size_t len, struct lz_http_scan *scan, size_t *ret_at)
{
	int r = -EAGAIN;
	size_t i = 0;
	while (r == -EAGAIN && i < len)
		r = more_same(buf, ++i, scan);
	*ret_at = i;
	return r;
}

/* Heads with their end, bare CR and LF at every kind of place. */
static const char *const grown_heads[] = {
	"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
	"CONNECT example.com:443 HTTP/1.1\r\n\r\n\x16\x03\x01tunnel\r\n\r\n",
	"GET http://example.com/x?y HTTP/1.1\r\nHost: example.com\r\nA:\tb\r\n\r\nbody",
	"GET http://a.com/ HTTP/1.1\r\nHost: b.com\r\n\r\n",
	"GET / HTTP/1.1\r\n\r\n",
	"\r\n\r\n",
	"\r\n\r",
	"\r\r\n",
	"GET http://a.com/ HTTP/1.1\n\n",
	"GET http://a.com/ HTTP/1.1\r\n\n",
	"GET http://a.com/ HTTP/1.1\r\nA: b\n\r\n",
	"GET http://a.com/ HTTP/1.1\r\nA: b\rc\r\n\r\n",
	"GET http://a.com/ HTTP/1.1\r\n\r\r\n",
	"GET http://a.com/ HTTP/1.1\r\nA: b\r\n\r",
	"GET http://a.com/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: x\r\n\r\n",
};

/* The end of the head split across calls at each of its places (CRLF
 * CRLF as 1|3, 2|2, 3|1, and in four calls), and at every other place. */
static void test_lz_http_parse_head_more__terminator_split_anywhere(void **state)
{
	(void)state;
	const char *head = "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com\r\n\r\n";
	size_t len = strlen(head), t = len - 4;
	const size_t splits[][3] = { { t + 1 }, { t + 2 }, { t + 3 }, { t + 1, t + 2, t + 3 }, { t, t + 2 } };
	const size_t n_splits[] = { 1, 1, 1, 3, 2 };
	for (size_t i = 0; i < sizeof(n_splits) / sizeof(n_splits[0]); i++) {
		struct lz_http_scan scan = { 0, 0 };
		assert_int_equal(feed_cuts(head, len, splits[i], n_splits[i], &scan), 0);
	}
	for (size_t h = 0; h < sizeof(grown_heads) / sizeof(grown_heads[0]); h++) {
		const char *b = grown_heads[h];
		size_t n = strlen(b);
		for (size_t i = 1; i < n; i++)
			for (size_t j = i; j < n; j++) {
				struct lz_http_scan scan = { 0, 0 };
				const size_t cuts[2] = { i, j };
				feed_cuts(b, n, cuts, j > i ? 2 : 1, &scan);
			}
		struct lz_http_scan scan = { 0, 0 };
		size_t at;
		feed_bytes(b, n, &scan, &at);
	}
}

/* No bare LF, "\n\n" included: refused at the first, however it came. */
static void test_lz_http_parse_head_more__bare_lf_refused_as_whole(void **state)
{
	(void)state;
	const char *head = "CONNECT example.com:443 HTTP/1.1\n\n";
	struct lz_http_scan scan = { 0, 0 };
	size_t at = 0;
	assert_int_equal(feed_bytes(head, strlen(head), &scan, &at), -EINVAL);
	assert_int_equal(at, strlen(head) - 1);
	struct lz_err err = { 0, "" };
	struct lz_http_request r;
	assert_int_equal(lz_http_parse_head((const uint8_t *)head, strlen(head), &r, &err), -EINVAL);
	assert_string_equal(err.msg, "bare LF at byte 32");
	assert_int_equal(lz_http_parse_head((const uint8_t *)"\n\n", 2, &r, NULL), -EINVAL);
}

/* A head of LZ_HTTP_HEAD_MAX bytes with lines of `line` bytes (the last
 * filled up), ending in CRLF CRLF when end. */
static char *max_head(size_t line, bool end)
{
	char *buf = malloc(LZ_HTTP_HEAD_MAX);
	assert_non_null(buf);
	size_t n = (size_t)sprintf(buf, "CONNECT example.com:443 HTTP/1.1\r\n");
	while (n + line + 4 <= LZ_HTTP_HEAD_MAX) {
		memcpy(buf + n, "X: ", 3);
		memset(buf + n + 3, 'v', line - 5);
		memcpy(buf + n + line - 2, "\r\n", 2);
		n += line;
	}
	memcpy(buf + n, "Y: ", 3);
	memset(buf + n + 3, 'v', LZ_HTTP_HEAD_MAX - n - 3);
	if (end)
		memcpy(buf + LZ_HTTP_HEAD_MAX - 4, "\r\n\r\n", 4);
	return buf;
}

/* A head a byte per call: each byte looked at a bounded number of times
 * (a parse from byte 0 after each would look at some n^2/2 of them). */
static void test_lz_http_parse_head_more__a_byte_at_a_time_is_linear(void **state)
{
	(void)state;
	const size_t n = LZ_HTTP_HEAD_MAX;
	static const size_t lines[] = { 16384, 170, 7 };
	for (size_t k = 0; k < sizeof(lines) / sizeof(lines[0]); k++) {
		for (int end = 1; end >= 0; end--) {
			char *buf = max_head(lines[k], end);
			struct lz_http_scan scan = { 0, 0 };
			struct lz_http_request r;
			struct lz_err err = { 0, "" };
			int got = -EAGAIN;
			size_t i = 0;
			while (got == -EAGAIN && i < n)
				got = lz_http_parse_head_more((const uint8_t *)buf, ++i, &scan, &r, &err);
			assert_int_equal(i, n);
			if (end) {
				/* 100 fields at most: the short lines are too many. */
				if (lines[k] == 7) {
					assert_int_equal(got, -E2BIG);
					assert_string_equal(err.msg, "more than 100 header fields");
				} else {
					assert_int_equal(got, 0);
					assert_int_equal(r.head_len, n);
				}
			} else {
				/* Over the limit: refused when the limit is reached. */
				assert_int_equal(got, -E2BIG);
				assert_string_equal(err.msg, "no end of head within 16384 bytes");
			}
			if (scan.examined >= 4 * n)
				fail_msg("lines of %zu bytes%s: %zu bytes looked at for a head of %zu", lines[k],
					 end ? "" : ", no end", scan.examined, n);
			free(buf);
		}
	}
}

static void rewrite_ok(const char *head, const char *want)
{
	struct lz_http_request r = parse_ok(head);
	uint8_t out[1024];
	size_t n = 0;
	assert_int_equal(lz_http_rewrite_forward((const uint8_t *)head, r.head_len, &r, out, sizeof(out), &n), 0);
	if (n != strlen(want) || memcmp(out, want, n) != 0)
		fail_msg("rewrote to\n%.*s\nwant\n%s", (int)n, (char *)out, want);
	/* Too small by any amount: -EMSGSIZE, ret_len untouched. */
	for (size_t cap = 0; cap < n; cap++) {
		size_t untouched = 77;
		assert_int_equal(lz_http_rewrite_forward((const uint8_t *)head, r.head_len, &r, out, cap, &untouched),
				 -EMSGSIZE);
		assert_int_equal(untouched, 77);
	}
	size_t exact = 0;
	assert_int_equal(lz_http_rewrite_forward((const uint8_t *)head, r.head_len, &r, out, n, &exact), 0);
	assert_int_equal(exact, n);
}

static void test_lz_http_rewrite_forward__origin_form(void **state)
{
	(void)state;
	rewrite_ok("GET http://Example.com/a/b?q=1 HTTP/1.1\r\n"
		   "Host: example.com\r\n"
		   "Proxy-Connection: keep-alive\r\n"
		   "Proxy-Authorization: Basic eDp5\r\n"
		   "Accept: */*\r\n"
		   "connection: keep-alive, Upgrade\r\n"
		   "Keep-Alive: 5\r\n"
		   "TE: trailers\r\n"
		   "Upgrade: websocket\r\n"
		   "X-Trace:\tabc \r\n"
		   "\r\n",
		   "GET /a/b?q=1 HTTP/1.1\r\n"
		   "Host: example.com\r\n"
		   "Accept: */*\r\n"
		   "X-Trace:\tabc \r\n"
		   "Connection: close\r\n"
		   "\r\n");
	rewrite_ok("POST http://10.0.0.1:8080 HTTP/1.0\r\nContent-Length: 3\r\n\r\n",
		   "POST / HTTP/1.0\r\nHost: 10.0.0.1:8080\r\nContent-Length: 3\r\nConnection: close\r\n\r\n");
	rewrite_ok("GET http://a.com?x=1 HTTP/1.1\r\n\r\n",
		   "GET /?x=1 HTTP/1.1\r\nHost: a.com\r\nConnection: close\r\n\r\n");
	rewrite_ok("GET http://a.com:80/ HTTP/1.1\r\nHost: A.com:80\r\n\r\n",
		   "GET / HTTP/1.1\r\nHost: a.com\r\nConnection: close\r\n\r\n");
}

static void test_lz_http_rewrite_forward__refuses_connect_and_foreign_request(void **state)
{
	(void)state;
	const char *c = "CONNECT a.com:443 HTTP/1.1\r\n\r\n";
	struct lz_http_request r = parse_ok(c);
	uint8_t out[256];
	size_t n = 77;
	assert_int_equal(lz_http_rewrite_forward((const uint8_t *)c, r.head_len, &r, out, sizeof(out), &n), -EINVAL);
	assert_int_equal(n, 77);

	const char *g = "GET http://a.com/ HTTP/1.1\r\n\r\n";
	r = parse_ok(g);
	/* A request parsed from another head. */
	struct lz_http_request other = r;
	strcpy(other.host, "b.com");
	assert_int_equal(lz_http_rewrite_forward((const uint8_t *)g, r.head_len, &other, out, sizeof(out), &n),
			 -EINVAL);
	other = r;
	other.port = 81;
	assert_int_equal(lz_http_rewrite_forward((const uint8_t *)g, r.head_len, &other, out, sizeof(out), &n),
			 -EINVAL);
	assert_int_equal(lz_http_rewrite_forward((const uint8_t *)g, r.head_len - 1, &r, out, sizeof(out), &n),
			 -EINVAL);
	assert_int_equal(n, 77);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_http_parse_head__connect),
		cmocka_unit_test(test_lz_http_parse_head__connect_ipv4),
		cmocka_unit_test(test_lz_http_parse_head__connect_target_refused),
		cmocka_unit_test(test_lz_http_parse_head__forward),
		cmocka_unit_test(test_lz_http_parse_head__forms_not_supported),
		cmocka_unit_test(test_lz_http_parse_head__request_line_refused),
		cmocka_unit_test(test_lz_http_parse_head__line_ends_refused),
		cmocka_unit_test(test_lz_http_parse_head__fields_refused),
		cmocka_unit_test(test_lz_http_parse_head__host_header_must_match),
		cmocka_unit_test(test_lz_http_parse_head__field_count_limit),
		cmocka_unit_test(test_lz_http_parse_head__size_limit),
		cmocka_unit_test(test_lz_http_parse_head__every_prefix_incomplete),
		cmocka_unit_test(test_lz_http_parse_head_more__terminator_split_anywhere),
		cmocka_unit_test(test_lz_http_parse_head_more__bare_lf_refused_as_whole),
		cmocka_unit_test(test_lz_http_parse_head_more__a_byte_at_a_time_is_linear),
		cmocka_unit_test(test_lz_http_rewrite_forward__origin_form),
		cmocka_unit_test(test_lz_http_rewrite_forward__refuses_connect_and_foreign_request),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
