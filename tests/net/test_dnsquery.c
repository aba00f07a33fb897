/* The egress proxy's stub resolver (spec 3.7): the query bytes, every
 * check of the answer (header, question, RCODE, compression, CNAME chains,
 * bounds), resolv.conf, and lz_dns_resolve against UDP servers the test
 * runs on 127.0.0.1 in forked children. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "net/dnsquery.h"

#define LOCALHOST 0x7f000001u

struct msg {
	uint8_t b[8192];
	size_t n;
};

static void put(struct msg *m, const void *p, size_t n)
{
	assert_true(n <= sizeof(m->b) - m->n);
	memcpy(m->b + m->n, p, n);
	m->n += n;
}

static void put16(struct msg *m, unsigned v)
{
	uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };
	put(m, b, 2);
}

/* "a.b" as uncompressed labels and the root. */
static void put_name(struct msg *m, const char *name)
{
	while (*name) {
		size_t l = strcspn(name, ".");
		uint8_t len = (uint8_t)l;
		put(m, &len, 1);
		put(m, name, l);
		name += l;
		if (*name == '.')
			name++;
	}
	put(m, "", 1);
}

static void put_ptr(struct msg *m, size_t off)
{
	put16(m, 0xc000u | (unsigned)off);
}

/* Header and the question for name, A IN; flags QR|RD|RA plus extra. */
static void answer_start(struct msg *m, uint16_t id, unsigned flags, unsigned an, const char *name)
{
	m->n = 0;
	put16(m, id);
	put16(m, flags);
	put16(m, 1);
	put16(m, an);
	put16(m, 0);
	put16(m, 0);
	put_name(m, name);
	put16(m, 1);
	put16(m, 1);
}

/* Type, class, TTL and rdata after an owner already written. */
static void put_rr_tail(struct msg *m, unsigned type, unsigned class, const void *rdata, size_t rdlen)
{
	put16(m, type);
	put16(m, class);
	put(m, "\0\0\0\x3c", 4);
	put16(m, (unsigned)rdlen);
	put(m, rdata, rdlen);
}

static void put_a(struct msg *m, uint32_t addr)
{
	uint8_t a[4] = { (uint8_t)(addr >> 24), (uint8_t)(addr >> 16), (uint8_t)(addr >> 8), (uint8_t)addr };
	put_rr_tail(m, 1, 1, a, 4);
}

static void put_cname(struct msg *m, const char *target)
{
	struct msg t = { .n = 0 };
	put_name(&t, target);
	put_rr_tail(m, 5, 1, t.b, t.n);
}

#define OK_FLAGS 0x8180u

static size_t parse_ok(const struct msg *m, uint16_t id, const char *name, uint32_t *addrs, size_t cap)
{
	size_t n = 0;
	struct lz_err err = { 0, "" };
	if (lz_dns_parse_answer(m->b, m->n, id, name, addrs, cap, &n, &err) != 0)
		fail_msg("answer refused: %s", err.msg);
	assert_true(n >= 1);
	return n;
}

static void assert_refused_len(const struct msg *m, size_t len, uint16_t id, const char *name, int want)
{
	uint32_t addrs[4] = { 7, 7, 7, 7 };
	size_t n = 99;
	struct lz_err err = { 0, "" };
	int got = lz_dns_parse_answer(m->b, len, id, name, addrs, 4, &n, &err);
	if (got != want)
		fail_msg("got %d (%s), want %d", got, err.msg, want);
	assert_int_equal(err.code, -want);
	assert_true(err.msg[0] != '\0');
	assert_int_equal(n, 99);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(addrs[i], 7);
}

static void assert_refused(const struct msg *m, uint16_t id, const char *name, int want)
{
	assert_refused_len(m, m->n, id, name, want);
}

static void test_lz_dns_build_query__bytes(void **state)
{
	(void)state;
	static const uint8_t want[] = {
		0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 3,   'w', 'w', 'w', 7,
		'e',  'x',  'a',  'm',  'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 1,   0, 1,
	};
	uint8_t buf[600];
	size_t n = 0;
	assert_int_equal(lz_dns_build_query(0x1234, "WWW.Example.com.", false, buf, sizeof(buf), &n), 0);
	assert_int_equal(n, sizeof(want));
	assert_memory_equal(buf, want, sizeof(want));
	/* Too small by any amount: buf and *ret_len untouched. */
	for (size_t cap = 0; cap < sizeof(want); cap++) {
		uint8_t small[sizeof(want)];
		memset(small, '#', sizeof(small));
		size_t untouched = 77;
		assert_int_equal(lz_dns_build_query(1, "www.example.com", false, small, cap, &untouched), -EMSGSIZE);
		assert_int_equal(untouched, 77);
		for (size_t i = 0; i < sizeof(small); i++)
			assert_int_equal(small[i], '#');
	}
	size_t untouched = 77;
	assert_int_equal(lz_dns_build_query(1, "www.example.com", false, buf, sizeof(want), &untouched), 0);
	assert_int_equal(untouched, sizeof(want));

	/* With EDNS: ARCOUNT 1 and the OPT record offering 1232 bytes. */
	static const uint8_t opt[] = { 0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0 };
	assert_int_equal(lz_dns_build_query(0x1234, "www.example.com", true, buf, sizeof(buf), &n), 0);
	assert_int_equal(n, sizeof(want) + sizeof(opt));
	assert_memory_equal(buf, want, 11);
	assert_int_equal(buf[11], 1);
	assert_memory_equal(buf + 12, want + 12, sizeof(want) - 12);
	assert_memory_equal(buf + sizeof(want), opt, sizeof(opt));
	untouched = 77;
	assert_int_equal(lz_dns_build_query(1, "www.example.com", true, buf, sizeof(want) + sizeof(opt) - 1, &untouched),
			 -EMSGSIZE);
	assert_int_equal(untouched, 77);
}

static void test_lz_dns_build_query__bad_names(void **state)
{
	(void)state;
	static const char *const bad[] = { "", ".", "a..b", "1.2.3.4", "a_b.com", "*.a.com", "a b" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint8_t buf[600];
		size_t n = 77;
		assert_int_equal(lz_dns_build_query(1, bad[i], i % 2 == 0, buf, sizeof(buf), &n), -EINVAL);
		assert_int_equal(n, 77);
	}
}

static void test_lz_dns_parse_answer__a_records(void **state)
{
	(void)state;
	struct msg m;
	uint32_t addrs[LZ_DNS_MAX_ADDRS + 8];
	answer_start(&m, 0xbeef, OK_FLAGS, 2, "example.com");
	put_ptr(&m, 12);
	put_a(&m, 0xc0000201u);
	put_name(&m, "EXAMPLE.com"); /* uncompressed, other case */
	put_a(&m, 0xc0000202u);
	assert_int_equal(parse_ok(&m, 0xbeef, "example.com", addrs, 8), 2);
	assert_int_equal(addrs[0], 0xc0000201u);
	assert_int_equal(addrs[1], 0xc0000202u);
	/* The question matches case-insensitively, and the name may be any spelling. */
	assert_int_equal(parse_ok(&m, 0xbeef, "Example.COM.", addrs, 8), 2);
	/* At most cap. */
	assert_int_equal(parse_ok(&m, 0xbeef, "example.com", addrs, 1), 1);
	assert_int_equal(addrs[0], 0xc0000201u);

	/* At most LZ_DNS_MAX_ADDRS. */
	answer_start(&m, 1, OK_FLAGS, LZ_DNS_MAX_ADDRS + 4, "example.com");
	for (uint32_t i = 0; i < LZ_DNS_MAX_ADDRS + 4; i++) {
		put_ptr(&m, 12);
		put_a(&m, 0x0a000000u + i);
	}
	assert_int_equal(parse_ok(&m, 1, "example.com", addrs, sizeof(addrs) / sizeof(addrs[0])), LZ_DNS_MAX_ADDRS);
	assert_int_equal(addrs[LZ_DNS_MAX_ADDRS - 1], 0x0a000000u + LZ_DNS_MAX_ADDRS - 1);
}

static void test_lz_dns_parse_answer__unrelated_records_ignored(void **state)
{
	(void)state;
	struct msg m;
	uint32_t addrs[4];
	answer_start(&m, 1, OK_FLAGS, 4, "example.com");
	put_name(&m, "evil.com");
	put_a(&m, 0x01010101u);
	put_ptr(&m, 12);
	put_rr_tail(&m, 1, 3, "\1\2\3\4", 4); /* class CH */
	put_ptr(&m, 12);
	put_rr_tail(&m, 28, 1, "0123456789abcdef", 16); /* AAAA */
	put_ptr(&m, 12);
	put_a(&m, 0x02020202u);
	assert_int_equal(parse_ok(&m, 1, "example.com", addrs, 4), 1);
	assert_int_equal(addrs[0], 0x02020202u);
}

static void test_lz_dns_parse_answer__cname_chain(void **state)
{
	(void)state;
	struct msg m;
	uint32_t addrs[4];
	answer_start(&m, 1, OK_FLAGS, 4, "www.example.com");
	/* Out of order on purpose; the unrelated A is not in the chain. */
	put_name(&m, "edge.cdn.net");
	put_a(&m, 0x0b0b0b0bu);
	put_ptr(&m, 12);
	put_cname(&m, "alias.example.com");
	put_name(&m, "other.net");
	put_a(&m, 0x0c0c0c0cu);
	put_name(&m, "alias.example.com");
	put_cname(&m, "edge.cdn.net");
	assert_int_equal(parse_ok(&m, 1, "www.example.com", addrs, 4), 1);
	assert_int_equal(addrs[0], 0x0b0b0b0bu);

	/* A CNAME whose target is written as a pointer. */
	answer_start(&m, 1, OK_FLAGS, 2, "a.example.com");
	put_ptr(&m, 12);
	put16(&m, 5);
	put16(&m, 1);
	put(&m, "\0\0\0\1", 4);
	put16(&m, 4);
	put(&m, "\1b", 2);
	put_ptr(&m, 14); /* "example.com" of the question: "b.example.com" */
	put_name(&m, "b.example.com");
	put_a(&m, 0x0d0d0d0du);
	assert_int_equal(parse_ok(&m, 1, "a.example.com", addrs, 4), 1);
	assert_int_equal(addrs[0], 0x0d0d0d0du);
}

static void chain_of(struct msg *m, int links)
{
	char owner[32], target[32];
	answer_start(m, 1, OK_FLAGS, (unsigned)links + 1, "c0.example");
	for (int i = 0; i < links; i++) {
		snprintf(owner, sizeof(owner), "c%d.example", i);
		snprintf(target, sizeof(target), "c%d.example", i + 1);
		put_name(m, owner);
		put_cname(m, target);
	}
	snprintf(owner, sizeof(owner), "c%d.example", links);
	put_name(m, owner);
	put_a(m, 0x0e0e0e0eu);
}

static void test_lz_dns_parse_answer__cname_limits(void **state)
{
	(void)state;
	struct msg m;
	uint32_t addrs[4];
	chain_of(&m, 8);
	assert_int_equal(parse_ok(&m, 1, "c0.example", addrs, 4), 1);
	chain_of(&m, 9);
	assert_refused(&m, 1, "c0.example", -EBADMSG);

	/* Loops: to itself, and through another name. */
	answer_start(&m, 1, OK_FLAGS, 1, "loop.example");
	put_ptr(&m, 12);
	put_cname(&m, "LOOP.example");
	assert_refused(&m, 1, "loop.example", -EBADMSG);
	answer_start(&m, 1, OK_FLAGS, 3, "a.example");
	put_name(&m, "a.example");
	put_cname(&m, "b.example");
	put_name(&m, "b.example");
	put_cname(&m, "a.example");
	put_name(&m, "a.example");
	put_a(&m, 1);
	assert_refused(&m, 1, "a.example", -EBADMSG);
	/* Two CNAMEs for one name. */
	answer_start(&m, 1, OK_FLAGS, 3, "a.example");
	put_ptr(&m, 12);
	put_cname(&m, "b.example");
	put_ptr(&m, 12);
	put_cname(&m, "c.example");
	put_name(&m, "b.example");
	put_a(&m, 1);
	assert_refused(&m, 1, "a.example", -EBADMSG);
	/* CNAME rdata longer than its name. */
	answer_start(&m, 1, OK_FLAGS, 1, "a.example");
	put_ptr(&m, 12);
	put_rr_tail(&m, 5, 1, "\1b\0\0", 4);
	assert_refused(&m, 1, "a.example", -EBADMSG);
	/* A chain that ends without an address. */
	answer_start(&m, 1, OK_FLAGS, 1, "a.example");
	put_ptr(&m, 12);
	put_cname(&m, "b.example");
	assert_refused(&m, 1, "a.example", -ENOENT);
}

static void test_lz_dns_parse_answer__rcodes_and_flags(void **state)
{
	(void)state;
	struct msg m;
	answer_start(&m, 1, OK_FLAGS | 3, 0, "example.com");
	assert_refused(&m, 1, "example.com", -ENOENT);
	answer_start(&m, 1, OK_FLAGS, 0, "example.com");
	assert_refused(&m, 1, "example.com", -ENOENT);
	answer_start(&m, 1, OK_FLAGS | 2, 0, "example.com");
	assert_refused(&m, 1, "example.com", -EIO);
	answer_start(&m, 1, OK_FLAGS | 5, 0, "example.com");
	assert_refused(&m, 1, "example.com", -EIO);
	answer_start(&m, 1, OK_FLAGS | 0x0200, 1, "example.com");
	put_ptr(&m, 12);
	put_a(&m, 1);
	assert_refused(&m, 1, "example.com", -EMSGSIZE);
	/* Not the answer to this query. */
	answer_start(&m, 1, OK_FLAGS & ~0x8000u, 1, "example.com");
	put_ptr(&m, 12);
	put_a(&m, 1);
	assert_refused(&m, 1, "example.com", -EBADMSG);
	answer_start(&m, 2, OK_FLAGS, 1, "example.com");
	put_ptr(&m, 12);
	put_a(&m, 1);
	assert_refused(&m, 1, "example.com", -EBADMSG);
	answer_start(&m, 1, OK_FLAGS | 0x0800, 1, "example.com"); /* opcode 1 */
	put_ptr(&m, 12);
	put_a(&m, 1);
	assert_refused(&m, 1, "example.com", -EBADMSG);
	assert_refused(&m, 1, "example.org", -EBADMSG);
}

static void test_lz_dns_parse_answer__question_must_match(void **state)
{
	(void)state;
	struct msg m;
	answer_start(&m, 1, OK_FLAGS, 1, "example.com");
	put_ptr(&m, 12);
	put_a(&m, 1);
	assert_refused(&m, 1, "www.example.com", -EBADMSG);
	assert_refused(&m, 1, "example.co", -EBADMSG);
	/* qtype AAAA, qclass CH, qdcount 0 and 2. */
	struct msg x = m;
	x.b[12 + 13 + 1] = 28;
	assert_refused(&x, 1, "example.com", -EBADMSG);
	x = m;
	x.b[12 + 13 + 3] = 3;
	assert_refused(&x, 1, "example.com", -EBADMSG);
	x = m;
	x.b[5] = 0;
	assert_refused(&x, 1, "example.com", -EBADMSG);
	x = m;
	x.b[5] = 2;
	assert_refused(&x, 1, "example.com", -EBADMSG);
	/* Bad argument. */
	uint32_t addrs[1];
	size_t n = 9;
	assert_int_equal(lz_dns_parse_answer(m.b, m.n, 1, "1.2.3.4", addrs, 1, &n, NULL), -EINVAL);
	assert_int_equal(lz_dns_parse_answer(m.b, m.n, 1, "example.com", addrs, 0, &n, NULL), -EINVAL);
	assert_int_equal(n, 9);
}

static void test_lz_dns_parse_answer__compression_bounds(void **state)
{
	(void)state;
	struct msg m;
	uint32_t addrs[4];
	/* Forward pointer, self pointer, pointer past the end. */
	answer_start(&m, 1, OK_FLAGS, 1, "example.com");
	size_t rr = m.n;
	put_ptr(&m, rr + 2);
	put_a(&m, 1);
	assert_refused(&m, 1, "example.com", -EBADMSG);
	m.n = rr;
	put_ptr(&m, rr);
	put_a(&m, 1);
	assert_refused(&m, 1, "example.com", -EBADMSG);
	m.n = rr;
	put_ptr(&m, 0x3fff);
	put_a(&m, 1);
	assert_refused(&m, 1, "example.com", -EBADMSG);
	/* Label types 01 and 10. */
	m.n = rr;
	put(&m, "\x41", 1);
	put_a(&m, 1);
	assert_refused(&m, 1, "example.com", -EBADMSG);
	m.n = rr;
	put(&m, "\x81", 1);
	put_a(&m, 1);
	assert_refused(&m, 1, "example.com", -EBADMSG);

	/* 32 jumps are followed, 33 are not: a TXT record's rdata carries a
	 * ladder of pointers, each one step back, the A record's owner points
	 * at its top. */
	for (int jumps = 32; jumps <= 33; jumps++) {
		answer_start(&m, 1, OK_FLAGS, 2, "example.com");
		put(&m, "", 1);
		put16(&m, 16);
		put16(&m, 1);
		put(&m, "\0\0\0\0", 4);
		put16(&m, (unsigned)(2 * (jumps - 1)));
		size_t prev = 12;
		for (int i = 1; i < jumps; i++) {
			size_t here = m.n;
			put_ptr(&m, prev);
			prev = here;
		}
		put_ptr(&m, prev);
		put_a(&m, 0x0f0f0f0fu);
		if (jumps == 32) {
			assert_int_equal(parse_ok(&m, 1, "example.com", addrs, 4), 1);
			assert_int_equal(addrs[0], 0x0f0f0f0fu);
		} else {
			assert_refused(&m, 1, "example.com", -EBADMSG);
		}
	}

	/* Names of 255 bytes are read, of 256 are not: three 63-byte labels,
	 * one of 49 or 50, and a pointer to "example.com" (13 bytes). */
	for (size_t last = 49; last <= 50; last++) {
		uint8_t label[64];
		memset(label, 'x', sizeof(label));
		answer_start(&m, 1, OK_FLAGS, 2, "example.com");
		for (int i = 0; i < 3; i++) {
			label[0] = 63;
			put(&m, label, 64);
		}
		label[0] = (uint8_t)last;
		put(&m, label, last + 1);
		put_ptr(&m, 12);
		put_rr_tail(&m, 16, 1, "", 0);
		put_ptr(&m, 12);
		put_a(&m, 0x0f0f0f0fu);
		if (last == 49)
			assert_int_equal(parse_ok(&m, 1, "example.com", addrs, 4), 1);
		else
			assert_refused(&m, 1, "example.com", -EBADMSG);
	}
}

static void test_lz_dns_parse_answer__a_of_wrong_size(void **state)
{
	(void)state;
	struct msg m;
	answer_start(&m, 1, OK_FLAGS, 1, "example.com");
	put_ptr(&m, 12);
	put_rr_tail(&m, 1, 1, "\1\2\3\4\5", 5);
	assert_refused(&m, 1, "example.com", -EBADMSG);
	answer_start(&m, 1, OK_FLAGS, 1, "example.com");
	put_ptr(&m, 12);
	put_rr_tail(&m, 1, 1, "\1\2\3", 3);
	assert_refused(&m, 1, "example.com", -EBADMSG);
}

/* Every proper prefix of an answer is out of bounds somewhere. */
static void test_lz_dns_parse_answer__every_prefix_refused(void **state)
{
	(void)state;
	struct msg m;
	uint32_t addrs[4];
	answer_start(&m, 1, OK_FLAGS, 3, "www.example.com");
	put_ptr(&m, 12);
	put_cname(&m, "edge.example.net");
	put_name(&m, "edge.example.net");
	put_a(&m, 0x01020304u);
	put_ptr(&m, 12 + 4); /* "example.com" */
	put_a(&m, 0x05060708u);
	assert_int_equal(parse_ok(&m, 1, "www.example.com", addrs, 4), 1);
	assert_int_equal(addrs[0], 0x01020304u);
	for (size_t i = 0; i < m.n; i++)
		assert_refused_len(&m, i, 1, "www.example.com", -EBADMSG);
	/* An answer count beyond the records. */
	m.b[7] = 4;
	assert_refused(&m, 1, "www.example.com", -EBADMSG);
}

static void test_lz_resolvconf_nameservers__lines(void **state)
{
	(void)state;
	const char *text = "# generated\n"
			   "search example.com\n"
			   "nameserver 10.0.0.2\n"
			   "  nameserver\t192.0.2.53   # trailing comment\n"
			   "; nameserver 1.1.1.1\n"
			   "# nameserver 8.8.8.8\n"
			   "nameserver ::1\n"
			   "nameserver fe80::1%eth0\n"
			   "nameserver 010.0.0.1\n"
			   "nameserver 1.2.3\n"
			   "nameservers 9.9.9.9\n"
			   "nameserver\n"
			   "Nameserver 9.9.9.8\n"
			   "options ndots:2\n"
			   "nameserver 203.0.113.1\r\n"
			   "nameserver 198.51.100.7";
	uint32_t out[8] = { 0 };
	size_t n = 99;
	assert_int_equal(lz_resolvconf_nameservers(text, strlen(text), out, 8, &n), 0);
	assert_int_equal(n, 4);
	assert_int_equal(out[0], 0x0a000002u);
	assert_int_equal(out[1], 0xc0000235u);
	assert_int_equal(out[2], 0xcb007101u);
	assert_int_equal(out[3], 0xc6336407u);
	/* At most cap. */
	out[2] = 0;
	assert_int_equal(lz_resolvconf_nameservers(text, strlen(text), out, 2, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(out[2], 0);
	/* None, and a length that cuts the text. */
	assert_int_equal(lz_resolvconf_nameservers("", 0, out, 8, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(lz_resolvconf_nameservers("nameserver 10.0.0.25", 19, out, 8, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(out[0], 0x0a000002u);
	assert_int_equal(lz_resolvconf_nameservers("nameserver 10.0.0.2\0junk", 24, out, 8, &n), 0);
	assert_int_equal(n, 0);
}

/* UDP servers on 127.0.0.1, 127.0.0.2, ... (one port) in forked children. */
/* NO_EDNS answers FORMERR to a query with an OPT record (a server that
 * does not know EDNS) and ANSWER's to one without; BIG answers 40
 * addresses (688 bytes) to a query offering EDNS and a truncated answer
 * (TC, no records) to one that does not, as a server would. TCP_BIG
 * answers every UDP query truncated and has the 40 addresses over TCP on
 * the same port; TC_ONLY truncates and has no TCP. */
enum server_mode { ANSWER, WRONG_ID_FIRST, SILENT, NXDOMAIN, SERVFAIL, CLOSED, NO_EDNS, BIG, TCP_BIG, TC_ONLY };

#define SERVERS_MAX 4

struct servers {
	pid_t pids[SERVERS_MAX];
	uint32_t addrs[SERVERS_MAX];
	size_t n;
	uint16_t port;
};

/* The answer to query q[0..n) in mode, over TCP or UDP; false: none. */
static bool answer_for(const uint8_t *q, size_t n, enum server_mode mode, bool tcp, struct msg *m)
{
	/* The header and the question, without the query's OPT. */
	size_t qend = 12;
	while (qend < n && q[qend] != 0)
		qend += 1u + q[qend];
	qend += 5;
	if (n < 12 || qend > n || mode == SILENT)
		return false;
	bool edns = q[11] == 1;
	m->n = 0;
	put(m, q, qend);
	m->b[2] = 0x81;
	m->b[3] = mode == NXDOMAIN ? 0x83 : mode == SERVFAIL ? 0x82 : mode == NO_EDNS && edns ? 0x81 : 0x80;
	m->b[10] = m->b[11] = 0;
	bool whole = mode == BIG ? edns : mode == TCP_BIG ? tcp : mode != TC_ONLY;
	unsigned an = !whole						? 0
		      : mode == BIG || mode == TCP_BIG			? 40
		      : mode == NO_EDNS					? (edns ? 0 : 2)
		      : mode == ANSWER || mode == WRONG_ID_FIRST		? 2
									: 0;
	if (!whole)
		m->b[2] |= 0x02; /* TC */
	m->b[7] = (uint8_t)an;
	for (unsigned i = 0; i < an; i++) {
		put_ptr(m, 12);
		put_a(m, 0xc0000207u + i);
	}
	return true;
}

/* One query over TCP on l, answered. */
static void serve_tcp(int l, enum server_mode mode)
{
	int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	uint8_t len[2], q[512];
	struct msg m;
	if (c < 0)
		return;
	if (recv(c, len, 2, MSG_WAITALL) == 2 && (size_t)(len[0] << 8 | len[1]) <= sizeof(q) &&
	    recv(c, q, (size_t)(len[0] << 8 | len[1]), MSG_WAITALL) == (len[0] << 8 | len[1]) &&
	    answer_for(q, (size_t)(len[0] << 8 | len[1]), mode, true, &m)) {
		uint8_t out[2] = { (uint8_t)(m.n >> 8), (uint8_t)m.n };
		(void)!send(c, out, 2, MSG_NOSIGNAL);
		(void)!send(c, m.b, m.n, MSG_NOSIGNAL);
	}
	close(c);
}

static _Noreturn void serve(int fd, int tcp, enum server_mode mode)
{
	for (;;) {
		struct pollfd pf[2] = { { .fd = fd, .events = POLLIN }, { .fd = tcp, .events = POLLIN } };
		if (poll(pf, 2, -1) <= 0)
			continue;
		if (pf[1].revents)
			serve_tcp(tcp, mode);
		if (!pf[0].revents)
			continue;
		uint8_t q[512];
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(fd, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);
		struct msg m;
		if (n < 0 || !answer_for(q, (size_t)n, mode, false, &m))
			continue;
		if (mode == WRONG_ID_FIRST) {
			/* Another id with other addresses, then junk, then the answer. */
			struct msg w = m;
			w.b[0] ^= 0xff;
			w.b[w.n - 1] = 0x09;
			(void)!sendto(fd, w.b, w.n, 0, (struct sockaddr *)&from, fl);
			(void)!sendto(fd, "junk", 4, 0, (struct sockaddr *)&from, fl);
			struct timespec ts = { 0, 50 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
		(void)!sendto(fd, m.b, m.n, 0, (struct sockaddr *)&from, fl);
	}
}

/* Server i on 127.0.0.(i+1); a CLOSED one has no socket (port unreachable). */
static void servers_start(struct servers *s, size_t n, const enum server_mode *modes)
{
	assert_true(n <= SERVERS_MAX);
	memset(s, 0, sizeof(*s));
	s->n = n;
	for (size_t i = 0; i < n; i++) {
		s->addrs[i] = LOCALHOST + (uint32_t)i;
		s->pids[i] = -1;
		int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		assert_true(fd >= 0);
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(s->port),
					  .sin_addr.s_addr = htonl(s->addrs[i]) };
		socklen_t sl = sizeof(sa);
		assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
		s->port = ntohs(sa.sin_port);
		if (modes[i] == CLOSED) {
			close(fd);
			continue;
		}
		int tcp = -1;
		if (modes[i] == TCP_BIG) {
			tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			assert_true(tcp >= 0);
			assert_int_equal(bind(tcp, (struct sockaddr *)&sa, sizeof(sa)), 0);
			assert_int_equal(listen(tcp, 4), 0);
		}
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			serve(fd, tcp, modes[i]);
		close(fd);
		if (tcp >= 0)
			close(tcp);
		s->pids[i] = pid;
	}
}

static void servers_stop(struct servers *s)
{
	for (size_t i = 0; i < s->n; i++) {
		if (s->pids[i] <= 0)
			continue;
		kill(s->pids[i], SIGKILL);
		assert_int_equal(waitpid(s->pids[i], NULL, 0), s->pids[i]);
	}
}

static long elapsed_ms(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Resolves "www.example.com" against servers in these modes. */
static int resolve_with(size_t n, const enum server_mode *modes, int timeout_ms, uint32_t *addrs, size_t *ret_n,
			long *ret_ms)
{
	struct servers s;
	struct lz_err err = { 0, "" };
	struct timespec t0;
	servers_start(&s, n, modes);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int r = lz_dns_resolve(s.addrs, s.n, s.port, "www.example.com", timeout_ms, addrs, 4, ret_n, &err);
	*ret_ms = elapsed_ms(&t0);
	servers_stop(&s);
	if (r < 0) {
		assert_int_equal(err.code, -r);
		assert_true(err.msg[0] != '\0');
	}
	return r;
}

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Resolves with servers in modes, expecting want addresses (every
 * server's answer holds 192.0.2.7, .8, ... in order; at most 4 fit);
 * returns the milliseconds it took. */
static long resolves(size_t n_modes, const enum server_mode *modes, int timeout_ms, size_t want)
{
	uint32_t addrs[4] = { 0 };
	size_t n = 0;
	long ms;
	assert_int_equal(resolve_with(n_modes, modes, timeout_ms, addrs, &n, &ms), 0);
	assert_int_equal(n, want);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(addrs[i], 0xc0000207u + i);
	return ms;
}

/* Resolves with servers in modes, expecting the error want and the
 * outputs untouched; returns the milliseconds it took. */
static long fails(size_t n_modes, const enum server_mode *modes, int timeout_ms, int want)
{
	uint32_t addrs[4] = { 5, 5, 5, 5 };
	size_t n = 99;
	long ms;
	assert_int_equal(resolve_with(n_modes, modes, timeout_ms, addrs, &n, &ms), want);
	assert_int_equal(n, 99);
	assert_int_equal(addrs[0], 5);
	return ms;
}

static void test_lz_dns_resolve__answers(void **state)
{
	(void)state;
	const enum server_mode modes[] = { ANSWER };
	resolves(N_OF(modes), modes, 2000, 2);
}

static void test_lz_dns_resolve__wrong_id_ignored(void **state)
{
	(void)state;
	const enum server_mode modes[] = { WRONG_ID_FIRST };
	assert_true(resolves(N_OF(modes), modes, 2000, 2) >= 40);
}

static void test_lz_dns_resolve__silent_server_times_out(void **state)
{
	(void)state;
	const enum server_mode modes[] = { SILENT };
	long ms = fails(N_OF(modes), modes, 300, -ETIMEDOUT);
	assert_true(ms >= 290 && ms < 2000);
}

static void test_lz_dns_resolve__servers_in_order(void **state)
{
	(void)state;
	const enum server_mode modes[] = { SILENT, SERVFAIL, CLOSED, ANSWER };
	assert_true(resolves(N_OF(modes), modes, 300, 2) >= 290);
}

static void test_lz_dns_resolve__failures_after_every_server(void **state)
{
	(void)state;
	const enum server_mode servfail[] = { SERVFAIL, SILENT };
	fails(N_OF(servfail), servfail, 200, -EIO);
	const enum server_mode closed[] = { CLOSED, SILENT };
	fails(N_OF(closed), closed, 200, -ETIMEDOUT);
}

static void test_lz_dns_resolve__nxdomain_passes_through(void **state)
{
	(void)state;
	const enum server_mode modes[] = { NXDOMAIN, ANSWER };
	assert_true(fails(N_OF(modes), modes, 5000, -ENOENT) < 2000);
}

/* Answers over 512 bytes come whole: the query offers EDNS. */
static void test_lz_dns_resolve__answers_over_512_bytes(void **state)
{
	(void)state;
	const enum server_mode modes[] = { BIG };
	resolves(N_OF(modes), modes, 2000, 4);
}

/* An answer truncated even with EDNS is asked for over TCP; a server
 * without TCP leaves the name truncated, at once. */
static void test_lz_dns_resolve__truncated_answers_over_tcp(void **state)
{
	(void)state;
	const enum server_mode tcp[] = { TCP_BIG }, none[] = { TC_ONLY };
	resolves(N_OF(tcp), tcp, 2000, 4);
	assert_true(fails(N_OF(none), none, 2000, -EMSGSIZE) < 1000);
}

/* A server that does not know EDNS is asked again without it, at once. */
static void test_lz_dns_resolve__server_without_edns(void **state)
{
	(void)state;
	const enum server_mode modes[] = { NO_EDNS };
	assert_true(resolves(N_OF(modes), modes, 2000, 2) < 1000);
}

static void test_lz_dns_resolve__bad_arguments(void **state)
{
	(void)state;
	uint32_t server = LOCALHOST, addrs[4];
	size_t n = 99;
	assert_int_equal(lz_dns_resolve(&server, 0, 53, "a.example", 100, addrs, 4, &n, NULL), -EINVAL);
	assert_int_equal(lz_dns_resolve(&server, 1, 53, "a.example", 0, addrs, 4, &n, NULL), -EINVAL);
	assert_int_equal(lz_dns_resolve(&server, 1, 53, "a.example", 100, addrs, 0, &n, NULL), -EINVAL);
	assert_int_equal(lz_dns_resolve(&server, 1, 53, "10.0.0.1", 100, addrs, 4, &n, NULL), -EINVAL);
	assert_int_equal(n, 99);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_dns_build_query__bytes),
		cmocka_unit_test(test_lz_dns_build_query__bad_names),
		cmocka_unit_test(test_lz_dns_parse_answer__a_records),
		cmocka_unit_test(test_lz_dns_parse_answer__unrelated_records_ignored),
		cmocka_unit_test(test_lz_dns_parse_answer__cname_chain),
		cmocka_unit_test(test_lz_dns_parse_answer__cname_limits),
		cmocka_unit_test(test_lz_dns_parse_answer__rcodes_and_flags),
		cmocka_unit_test(test_lz_dns_parse_answer__question_must_match),
		cmocka_unit_test(test_lz_dns_parse_answer__compression_bounds),
		cmocka_unit_test(test_lz_dns_parse_answer__a_of_wrong_size),
		cmocka_unit_test(test_lz_dns_parse_answer__every_prefix_refused),
		cmocka_unit_test(test_lz_resolvconf_nameservers__lines),
		cmocka_unit_test(test_lz_dns_resolve__answers),
		cmocka_unit_test(test_lz_dns_resolve__wrong_id_ignored),
		cmocka_unit_test(test_lz_dns_resolve__silent_server_times_out),
		cmocka_unit_test(test_lz_dns_resolve__servers_in_order),
		cmocka_unit_test(test_lz_dns_resolve__failures_after_every_server),
		cmocka_unit_test(test_lz_dns_resolve__nxdomain_passes_through),
		cmocka_unit_test(test_lz_dns_resolve__answers_over_512_bytes),
		cmocka_unit_test(test_lz_dns_resolve__server_without_edns),
		cmocka_unit_test(test_lz_dns_resolve__truncated_answers_over_tcp),
		cmocka_unit_test(test_lz_dns_resolve__bad_arguments),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
