/* The server name of a sandbox's TLS ClientHello (spec 3.7): a real
 * OpenSSL ClientHello, whole, fragmented and cut short, crafted ones for
 * every refusal, and hellos that grow with the walk resumed (same
 * answers, linear work). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>

#include "net/tlssni.h"

/* The first flight of an OpenSSL client (its ClientHello records) into
 * buf; host NULL sends no server_name. */
static size_t openssl_hello(const char *host, int max_version, uint8_t *buf, size_t cap)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	assert_non_null(ctx);
	if (max_version)
		assert_int_equal(SSL_CTX_set_max_proto_version(ctx, max_version), 1);
	SSL *ssl = SSL_new(ctx);
	assert_non_null(ssl);
	BIO *inner = NULL, *net = NULL;
	assert_int_equal(BIO_new_bio_pair(&inner, 0, &net, 0), 1);
	SSL_set_bio(ssl, inner, inner);
	if (host)
		assert_int_equal(SSL_set_tlsext_host_name(ssl, host), 1);
	SSL_set_connect_state(ssl);
	assert_int_equal(SSL_do_handshake(ssl), -1);
	assert_int_equal(SSL_get_error(ssl, -1), SSL_ERROR_WANT_READ);
	int n = BIO_read(net, buf, (int)cap);
	assert_true(n > 0);
	SSL_free(ssl);
	BIO_free(net);
	SSL_CTX_free(ctx);
	return (size_t)n;
}

static void assert_sni(const uint8_t *buf, size_t len, const char *want)
{
	char out[LZ_EGRESS_NAME_MAX + 1];
	struct lz_err err = { 0, "" };
	if (lz_tls_client_hello_sni(buf, len, out, &err) != 0)
		fail_msg("refused: %s", err.msg);
	assert_string_equal(out, want);
}

static void assert_refused(const uint8_t *buf, size_t len, int want)
{
	char out[LZ_EGRESS_NAME_MAX + 1];
	memset(out, '#', sizeof(out));
	struct lz_err err = { 0, "" };
	int got = lz_tls_client_hello_sni(buf, len, out, &err);
	if (got != want)
		fail_msg("got %d (%s), want %d", got, err.msg, want);
	if (want != -EAGAIN) {
		assert_int_equal(err.code, -want);
		assert_true(err.msg[0] != '\0');
	}
	for (size_t i = 0; i < sizeof(out); i++)
		assert_int_equal(out[i], '#');
}

/* The handshake bytes of buf re-cut into records of chunk bytes each. */
static size_t refragment(const uint8_t *rec, size_t len, size_t chunk, uint8_t *out)
{
	size_t hs_len = (size_t)rec[3] << 8 | rec[4], n = 0;
	assert_true(5 + hs_len <= len);
	for (size_t p = 0; p < hs_len; p += chunk) {
		size_t c = hs_len - p < chunk ? hs_len - p : chunk;
		out[n++] = 0x16;
		out[n++] = 0x03;
		out[n++] = 0x01;
		out[n++] = (uint8_t)(c >> 8);
		out[n++] = (uint8_t)c;
		memcpy(out + n, rec + 5 + p, c);
		n += c;
	}
	return n;
}

struct bytes {
	uint8_t b[LZ_TLS_HELLO_MAX + 64];
	size_t n;
};

static void put(struct bytes *s, const void *p, size_t n)
{
	assert_true(n <= sizeof(s->b) - s->n);
	memcpy(s->b + s->n, p, n);
	s->n += n;
}

static void put16(struct bytes *s, size_t v)
{
	uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };
	put(s, b, 2);
}

/* A server_name extension listing the given (type, name) entries. */
static void sni_ext(struct bytes *s, size_t n, const uint8_t *types, const char *const *names)
{
	size_t list = 0;
	for (size_t i = 0; i < n; i++)
		list += 3 + strlen(names[i]);
	put16(s, 0);
	put16(s, list + 2);
	put16(s, list);
	for (size_t i = 0; i < n; i++) {
		put(s, &types[i], 1);
		put16(s, strlen(names[i]));
		put(s, names[i], strlen(names[i]));
	}
}

/* One record holding a ClientHello with the given extensions block
 * (ext == NULL: no extensions at all). */
static void hello(struct bytes *out, const struct bytes *ext)
{
	struct bytes body = { .n = 0 };
	uint8_t random[32] = { 0 };
	put16(&body, 0x0303);
	put(&body, random, sizeof(random));
	put(&body, "\x00", 1);             /* session id */
	put(&body, "\x00\x02\x13\x01", 4); /* one cipher suite */
	put(&body, "\x01\x00", 2);         /* null compression */
	if (ext) {
		put16(&body, ext->n);
		put(&body, ext->b, ext->n);
	}
	out->n = 0;
	put(out, "\x16\x03\x01", 3);
	put16(out, body.n + 4);
	uint8_t hs[4] = { 1, (uint8_t)(body.n >> 16), (uint8_t)(body.n >> 8), (uint8_t)body.n };
	put(out, hs, 4);
	put(out, body.b, body.n);
}

static void hello_with_names(struct bytes *out, size_t n, const uint8_t *types, const char *const *names)
{
	struct bytes ext = { .n = 0 };
	put(&ext, "\x00\x0b\x00\x02\x01\x00", 6); /* ec_point_formats first */
	sni_ext(&ext, n, types, names);
	hello(out, &ext);
}

static void test_lz_tls_client_hello_sni__openssl_hello(void **state)
{
	(void)state;
	uint8_t buf[LZ_TLS_HELLO_MAX];
	size_t n = openssl_hello("Www.Example.COM", 0, buf, sizeof(buf));
	assert_sni(buf, n, "www.example.com");
	/* Bytes after the ClientHello do not matter. */
	memcpy(buf + n, "\x17\x03\x03garbage", 10);
	assert_sni(buf, n + 10, "www.example.com");

	n = openssl_hello("a.example.org", TLS1_2_VERSION, buf, sizeof(buf));
	assert_sni(buf, n, "a.example.org");
}

static void test_lz_tls_client_hello_sni__every_prefix_incomplete(void **state)
{
	(void)state;
	uint8_t buf[LZ_TLS_HELLO_MAX];
	size_t n = openssl_hello("example.com", 0, buf, sizeof(buf));
	for (size_t i = 0; i < n; i++)
		assert_refused(buf, i, -EAGAIN);
	assert_sni(buf, n, "example.com");
}

static void test_lz_tls_client_hello_sni__fragmented_over_records(void **state)
{
	(void)state;
	uint8_t buf[LZ_TLS_HELLO_MAX];
	static uint8_t frag[LZ_TLS_HELLO_MAX * 6];
	size_t n = openssl_hello("frag.example.com", 0, buf, sizeof(buf));
	static const size_t chunks[] = { 1, 2, 3, 4, 5, 7, 100, 16384 };
	for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
		size_t m = refragment(buf, n, chunks[c], frag);
		if (m >= LZ_TLS_HELLO_MAX) {
			/* Beyond the buffer a caller needs: refused, not waited for. */
			assert_refused(frag, m, -E2BIG);
			continue;
		}
		assert_sni(frag, m, "frag.example.com");
		for (size_t i = 0; i < m; i++)
			assert_refused(frag, i, -EAGAIN);
	}
}

static void test_lz_tls_client_hello_sni__no_server_name(void **state)
{
	(void)state;
	uint8_t buf[LZ_TLS_HELLO_MAX];
	size_t n = openssl_hello(NULL, 0, buf, sizeof(buf));
	assert_refused(buf, n, -ENOENT);

	struct bytes rec, ext = { .n = 0 };
	hello(&rec, NULL);
	assert_refused(rec.b, rec.n, -ENOENT);
	hello(&rec, &ext);
	assert_refused(rec.b, rec.n, -ENOENT);
	/* A server_name without a host_name entry. */
	const uint8_t types[] = { 7 };
	const char *const names[] = { "x" };
	hello_with_names(&rec, 1, types, names);
	assert_refused(rec.b, rec.n, -ENOENT);
}

static void test_lz_tls_client_hello_sni__crafted_hello(void **state)
{
	(void)state;
	struct bytes rec;
	const uint8_t types[] = { 0, 7 };
	const char *const names[] = { "crafted.example", "x" };
	hello_with_names(&rec, 2, types, names);
	assert_sni(rec.b, rec.n, "crafted.example");
	for (size_t i = 0; i < rec.n; i++)
		assert_refused(rec.b, i, -EAGAIN);
}

static void test_lz_tls_client_hello_sni__not_tls(void **state)
{
	(void)state;
	assert_refused((const uint8_t *)"GET / HTTP/1.1\r\n", 16, -ENOTSUP);
	assert_refused((const uint8_t *)"\x13\x03\x03\x00\x01x", 6, -ENOTSUP);
	assert_refused((const uint8_t *)"\x19\x03\x03\x00\x01x", 6, -ENOTSUP);
	assert_refused((const uint8_t *)"\x80", 1, -EAGAIN);
	assert_refused((const uint8_t *)"\x80\x2e\x02", 3, -ENOTSUP);
	assert_refused((const uint8_t *)"", 0, -EAGAIN);
	assert_refused((const uint8_t *)"\x16", 1, -EAGAIN);
	assert_refused((const uint8_t *)"\x16\x03", 2, -EAGAIN);
}

/* TLS, but not a ClientHello first: a server that takes a warning alert
 * (or any record) before the hello would answer the name that follows,
 * so it is refused, never relayed unchecked as "not TLS". An SSLv2-format
 * hello names nothing. */
static void test_lz_tls_client_hello_sni__another_record_first_is_refused(void **state)
{
	(void)state;
	static const uint8_t alert[] = { 0x15, 0x03, 0x03, 0x00, 0x02, 0x01, 0x70 };
	struct bytes rec, both = { .n = 0 };
	const uint8_t types[] = { 0 };
	const char *const names[] = { "evil.test" };
	hello_with_names(&rec, 1, types, names);
	assert_true(sizeof(alert) + rec.n <= sizeof(both.b));
	memcpy(both.b, alert, sizeof(alert));
	memcpy(both.b + sizeof(alert), rec.b, rec.n);
	both.n = sizeof(alert) + rec.n;
	assert_refused(both.b, both.n, -EBADMSG);
	assert_refused(both.b, 1, -EAGAIN);
	assert_refused(both.b, 2, -EBADMSG);
	assert_refused((const uint8_t *)"\x17\x03\x03\x00\x01x", 6, -EBADMSG);
	/* a record type with another version byte: a server may still take
	 * it (Go's crypto/tls takes any below 0x10) and read its name */
	assert_refused((const uint8_t *)"\x16\x02", 2, -EBADMSG);
	assert_refused((const uint8_t *)"\x16\x04\x00", 3, -EBADMSG);
	uint8_t patched[4096];
	size_t pn = openssl_hello("other.example", 0, patched, sizeof(patched));
	for (unsigned v = 0; v < 0x10; v++) {
		if (v == 3)
			continue;
		patched[1] = (uint8_t)v;
		assert_refused(patched, pn, -EBADMSG);
	}
	assert_refused((const uint8_t *)"\x14\x03\x03\x00\x01\x01", 6, -EBADMSG);
	static const uint8_t sslv2[] = { 0x80, 0x2e, 0x01, 0x03, 0x01 };
	assert_refused(sslv2, sizeof(sslv2), -ENOENT);
}

static void test_lz_tls_client_hello_sni__bad_names(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"", "a_b.example", "1.2.3.4", "a..b", "*.example.com", "a\xc3\xa4.com", "2130706433",
	};
	struct bytes rec;
	const uint8_t types[] = { 0 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *names[] = { bad[i] };
		hello_with_names(&rec, 1, types, names);
		assert_refused(rec.b, rec.n, -EBADMSG);
	}
	/* A NUL inside the name. */
	const char *names[] = { "evil.com\x01good.com" };
	hello_with_names(&rec, 1, types, names);
	rec.b[rec.n - 9] = '\0'; /* the \x01 */
	assert_refused(rec.b, rec.n, -EBADMSG);
}

static void test_lz_tls_client_hello_sni__duplicates_refused(void **state)
{
	(void)state;
	struct bytes rec, ext = { .n = 0 };
	const uint8_t types[] = { 0, 0 };
	const char *const names[] = { "a.example", "b.example" };
	hello_with_names(&rec, 2, types, names);
	assert_refused(rec.b, rec.n, -EBADMSG);

	sni_ext(&ext, 1, types, names);
	sni_ext(&ext, 1, types + 1, names + 1);
	hello(&rec, &ext);
	assert_refused(rec.b, rec.n, -EBADMSG);
	/* Even naming the same host twice. */
	ext.n = 0;
	sni_ext(&ext, 1, types, names);
	sni_ext(&ext, 1, types, names);
	hello(&rec, &ext);
	assert_refused(rec.b, rec.n, -EBADMSG);
}

static void test_lz_tls_client_hello_sni__malformed_refused(void **state)
{
	(void)state;
	struct bytes good, rec;
	const uint8_t types[] = { 0 };
	const char *const names[] = { "ok.example" };
	hello_with_names(&good, 1, types, names);
	assert_sni(good.b, good.n, "ok.example");
	const size_t body = 9; /* record header, handshake header */

	/* Not a ClientHello. */
	rec = good;
	rec.b[5] = 2;
	assert_refused(rec.b, rec.n, -EBADMSG);
	assert_refused(rec.b, 6, -EBADMSG); /* refused as soon as seen */
	/* Record length 0 and over 2^14. */
	assert_refused((const uint8_t *)"\x16\x03\x01\x00\x00", 5, -EBADMSG);
	assert_refused((const uint8_t *)"\x16\x03\x01\x40\x01", 5, -EBADMSG);
	/* Session id longer than 32. */
	rec = good;
	rec.b[body + 34] = 33;
	assert_refused(rec.b, rec.n, -EBADMSG);
	/* Odd and empty cipher suite lists. */
	rec = good;
	rec.b[body + 36] = 3;
	assert_refused(rec.b, rec.n, -EBADMSG);
	rec = good;
	rec.b[body + 36] = 0;
	assert_refused(rec.b, rec.n, -EBADMSG);
	/* No compression method. */
	rec = good;
	rec.b[body + 39] = 0;
	assert_refused(rec.b, rec.n, -EBADMSG);
	/* Extensions block one byte longer and shorter than the message. */
	rec = good;
	rec.b[body + 42]++;
	assert_refused(rec.b, rec.n, -EBADMSG);
	rec = good;
	rec.b[body + 42]--;
	assert_refused(rec.b, rec.n, -EBADMSG);
	/* server_name list length beyond its extension. */
	rec = good;
	rec.b[body + 54]++;
	assert_refused(rec.b, rec.n, -EBADMSG);
	/* host_name length beyond the list. */
	rec = good;
	rec.b[body + 57]++;
	assert_refused(rec.b, rec.n, -EBADMSG);

	/* A handshake that cannot fit: refused at once. */
	rec = good;
	rec.b[6] = 0xff;
	assert_refused(rec.b, rec.n, -E2BIG);
	/* Never complete within the limit. */
	static uint8_t big[LZ_TLS_HELLO_MAX + 16];
	size_t n = 0;
	memcpy(big, good.b, 9);
	big[6] = 0x00;
	big[7] = 0x3f;
	big[8] = 0xf0; /* handshake body 16368 */
	big[3] = 0x00;
	big[4] = 0x04; /* only the handshake header in the first record */
	n = 9;
	while (n + 6 <= sizeof(big)) {
		memcpy(big + n, "\x16\x03\x01\x00\x01\x00", 6);
		n += 6;
	}
	assert_refused(big, LZ_TLS_HELLO_MAX - 1, -EAGAIN);
	assert_refused(big, LZ_TLS_HELLO_MAX, -E2BIG);
	assert_refused(big, n, -E2BIG);
}

static void test_lz_tls_client_hello_sni__interleaved_record_refused(void **state)
{
	(void)state;
	uint8_t buf[LZ_TLS_HELLO_MAX], frag[LZ_TLS_HELLO_MAX * 2];
	size_t n = openssl_hello("example.com", 0, buf, sizeof(buf));
	size_t m = refragment(buf, n, 64, frag);
	/* The second record becomes an alert, then a wrong version. */
	frag[5 + 64] = 0x15;
	assert_refused(frag, m, -EBADMSG);
	frag[5 + 64] = 0x16;
	frag[5 + 64 + 1] = 0x02;
	assert_refused(frag, m, -EBADMSG);
}

/* Every byte changed: a defined answer (ASan watches the reads). */
static void test_lz_tls_client_hello_sni__every_byte_mutated(void **state)
{
	(void)state;
	uint8_t buf[LZ_TLS_HELLO_MAX];
	size_t n = openssl_hello("mut.example.com", 0, buf, sizeof(buf));
	for (size_t i = 0; i < n; i++) {
		for (int d = -1; d <= 1; d += 2) {
			uint8_t saved = buf[i];
			buf[i] = (uint8_t)(buf[i] + d);
			char out[LZ_EGRESS_NAME_MAX + 1];
			int r = lz_tls_client_hello_sni(buf, n, out, NULL);
			assert_true(r == 0 || r == -ENOTSUP || r == -EAGAIN || r == -EBADMSG || r == -ENOENT ||
				    r == -E2BIG);
			buf[i] = saved;
		}
	}
}

/* ---- a hello that grows: lz_tls_client_hello_sni_more ------------------ */

/* One call of a growing parse: the same answer as the whole-buffer parse
 * of buf[0..len) (code, message, name), out untouched on refusal. */
static int more_same(const uint8_t *buf, size_t len, struct lz_tls_scan *scan)
{
	char whole[LZ_EGRESS_NAME_MAX + 1], grown[LZ_EGRESS_NAME_MAX + 1];
	memset(whole, '#', sizeof(whole));
	memset(grown, '#', sizeof(grown));
	struct lz_err ew = { 0, "" }, eg = { 0, "" };
	int want = lz_tls_client_hello_sni(buf, len, whole, &ew);
	int got = lz_tls_client_hello_sni_more(buf, len, scan, grown, &eg);
	if (got != want || strcmp(ew.msg, eg.msg) != 0)
		fail_msg("%zu bytes: resumed %d (%s), whole %d (%s)", len, got, eg.msg, want, ew.msg);
	assert_memory_equal(grown, whole, sizeof(whole));
	return got;
}

/* Each split in two calls (for inputs of a few KiB), and a byte per
 * call: the whole parse's answers; returns the answer to all of buf. */
static int grown_same(const uint8_t *buf, size_t n)
{
	static struct lz_tls_scan scan;
	int r = -EAGAIN;
	for (size_t i = 1; i < n && n <= 4096; i++) {
		memset(&scan, 0, sizeof(scan));
		if (more_same(buf, i, &scan) == -EAGAIN)
			more_same(buf, n, &scan);
	}
	memset(&scan, 0, sizeof(scan));
	for (size_t i = 1; i <= n && r == -EAGAIN; i++)
		r = more_same(buf, i, &scan);
	return r;
}

static void test_lz_tls_client_hello_sni_more__same_answers_split_anywhere(void **state)
{
	(void)state;
	static uint8_t buf[LZ_TLS_HELLO_MAX + 64], frag[LZ_TLS_HELLO_MAX * 6];
	size_t n = openssl_hello("grow.example.com", 0, buf, sizeof(buf));
	assert_int_equal(grown_same(buf, n), 0);
	static const size_t chunks[] = { 1, 2, 3, 4, 5, 64 };
	for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
		size_t m = refragment(buf, n, chunks[c], frag);
		assert_int_equal(grown_same(frag, m < LZ_TLS_HELLO_MAX + 8 ? m : LZ_TLS_HELLO_MAX + 8),
				 m < LZ_TLS_HELLO_MAX ? 0 : -E2BIG);
	}
	/* The record that completes the hello goes on: the hello waits for
	 * its record's end. */
	struct bytes rec;
	const uint8_t types[] = { 0 };
	const char *const names[] = { "ok.example" };
	hello_with_names(&rec, 1, types, names);
	size_t rlen = (size_t)rec.b[3] << 8 | rec.b[4];
	rec.b[3] = (uint8_t)((rlen + 9) >> 8);
	rec.b[4] = (uint8_t)(rlen + 9);
	put(&rec, "\x0b\x00\x00\x05xxxxx", 9); /* a Certificate message after it */
	assert_int_equal(grown_same(rec.b, rec.n), 0);
	assert_refused(rec.b, rec.n - 1, -EAGAIN);
	/* Refusals, at the byte that decides them. */
	struct bytes bad = rec;
	bad.b[5] = 2; /* not a ClientHello */
	assert_int_equal(grown_same(bad.b, bad.n), -EBADMSG);
	bad = rec;
	bad.b[6] = 0xff; /* longer than a caller's buffer */
	assert_int_equal(grown_same(bad.b, bad.n), -E2BIG);
	assert_int_equal(grown_same((const uint8_t *)"\x16\x03\x01\x00\x00", 5), -EBADMSG);
	assert_int_equal(grown_same((const uint8_t *)"GET / HTTP/1.1\r\n", 16), -ENOTSUP);
	n = openssl_hello(NULL, 0, buf, sizeof(buf));
	assert_int_equal(grown_same(buf, n), -ENOENT);
	n = openssl_hello("example.com", 0, buf, sizeof(buf));
	size_t m = refragment(buf, n, 64, frag);
	frag[5 + 64] = 0x15; /* the second record an alert */
	assert_int_equal(grown_same(frag, m), -EBADMSG);
}

/* A hello of LZ_TLS_HELLO_MAX bytes (one record, or records of 64 bytes)
 * a byte per call: each byte taken once (a walk from byte 0 after each
 * would take some n^2/2 of them). */
static void test_lz_tls_client_hello_sni_more__a_byte_at_a_time_is_linear(void **state)
{
	(void)state;
	static struct bytes rec, ext;
	static uint8_t frag[LZ_TLS_HELLO_MAX * 2];
	static struct lz_tls_scan scan;
	const uint8_t types[] = { 0 };
	const char *const names[] = { "big.example" };
	for (int k = 0; k < 2; k++) {
		/* padding (21) first, sized so that the record is whole at
		 * LZ_TLS_HELLO_MAX bytes, or its fragments just under it */
		size_t pad = k == 0 ? LZ_TLS_HELLO_MAX - 76 : 13500;
		ext.n = 0;
		put16(&ext, 21);
		put16(&ext, pad);
		static uint8_t zeros[LZ_TLS_HELLO_MAX];
		put(&ext, zeros, pad);
		sni_ext(&ext, 1, types, names);
		hello(&rec, &ext);
		const uint8_t *buf = rec.b;
		size_t n = rec.n;
		if (k == 1) {
			buf = frag;
			n = refragment(rec.b, rec.n, 64, frag);
			assert_true(n < LZ_TLS_HELLO_MAX);
		} else {
			assert_int_equal(n, LZ_TLS_HELLO_MAX);
		}
		memset(&scan, 0, sizeof(scan));
		char out[LZ_EGRESS_NAME_MAX + 1];
		int got = -EAGAIN;
		size_t i = 0;
		while (got == -EAGAIN && i < n)
			got = lz_tls_client_hello_sni_more(buf, ++i, &scan, out, NULL);
		assert_int_equal(got, 0);
		assert_int_equal(i, n);
		assert_string_equal(out, "big.example");
		if (scan.examined >= 4 * n)
			fail_msg("%zu bytes looked at for a hello of %zu", scan.examined, n);
	}
	/* Never complete within the limit: refused when the limit is reached. */
	static uint8_t big[LZ_TLS_HELLO_MAX + 16];
	memcpy(big, "\x16\x03\x01\x00\x04\x01\x00\x3f\xf0", 9); /* handshake body 16368 */
	size_t n = 9;
	while (n + 6 <= sizeof(big)) {
		memcpy(big + n, "\x16\x03\x01\x00\x01\x00", 6);
		n += 6;
	}
	memset(&scan, 0, sizeof(scan));
	char out[LZ_EGRESS_NAME_MAX + 1];
	int got = -EAGAIN;
	size_t i = 0;
	while (got == -EAGAIN && i < n)
		got = lz_tls_client_hello_sni_more(big, ++i, &scan, out, NULL);
	assert_int_equal(got, -E2BIG);
	assert_int_equal(i, LZ_TLS_HELLO_MAX);
	if (scan.examined >= 4 * i)
		fail_msg("%zu bytes looked at for %zu", scan.examined, i);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_tls_client_hello_sni__openssl_hello),
		cmocka_unit_test(test_lz_tls_client_hello_sni__every_prefix_incomplete),
		cmocka_unit_test(test_lz_tls_client_hello_sni__fragmented_over_records),
		cmocka_unit_test(test_lz_tls_client_hello_sni__no_server_name),
		cmocka_unit_test(test_lz_tls_client_hello_sni__crafted_hello),
		cmocka_unit_test(test_lz_tls_client_hello_sni__not_tls),
		cmocka_unit_test(test_lz_tls_client_hello_sni__another_record_first_is_refused),
		cmocka_unit_test(test_lz_tls_client_hello_sni__bad_names),
		cmocka_unit_test(test_lz_tls_client_hello_sni__duplicates_refused),
		cmocka_unit_test(test_lz_tls_client_hello_sni__malformed_refused),
		cmocka_unit_test(test_lz_tls_client_hello_sni__interleaved_record_refused),
		cmocka_unit_test(test_lz_tls_client_hello_sni__every_byte_mutated),
		cmocka_unit_test(test_lz_tls_client_hello_sni_more__same_answers_split_anywhere),
		cmocka_unit_test(test_lz_tls_client_hello_sni_more__a_byte_at_a_time_is_linear),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
