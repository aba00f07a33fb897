#include "net/dnsquery.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include "net/egressname.h"
#include "net/netprefix.h"
#include "util/cleanup.h"
#include "util/deadline.h"

#define HEADER_LEN 12
#define WIRE_NAME_MAX 255 /* RFC 1035 3.1, labels and the root byte */
#define JUMPS_MAX 32
#define CNAME_LINKS_MAX 8
#define TYPE_A 1
#define TYPE_CNAME 5
#define CLASS_IN 1
#define TYPE_OPT 41
#define RCODE_FORMERR 1
#define RCODE_NXDOMAIN 3
#define RCODE_NOTIMP 4
/* EDNS (RFC 6891): answers up to this size come over UDP, where 512 bytes
 * would truncate a name with many addresses or a long CNAME chain; 1232
 * fits the IPv6 minimum MTU unfragmented (DNS flag day 2020). */
#define EDNS_UDP_SIZE 1232
#define OPT_LEN 11
#define ANSWER_BUF 4096
#define TCP_MESSAGE_MAX 65535 /* RFC 7766: two length bytes */

struct wire_name {
	uint8_t b[WIRE_NAME_MAX];
	size_t n;
};

struct rr {
	struct wire_name owner;
	unsigned type, class;
	size_t rdata, rdlen;
};

static unsigned be16(const uint8_t *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

/* The wire form of a name lz_egress_name_normalize accepts. */
static int encode_name(const char *name, struct wire_name *ret)
{
	char norm[LZ_EGRESS_NAME_MAX + 1];
	if (lz_egress_name_normalize(name, strlen(name), norm, NULL) < 0)
		return -EINVAL;
	size_t n = 0;
	for (const char *label = norm;;) {
		size_t l = strcspn(label, ".");
		ret->b[n++] = (uint8_t)l;
		memcpy(ret->b + n, label, l);
		n += l;
		if (label[l] == '\0')
			break;
		label += l + 1;
	}
	ret->b[n++] = 0;
	ret->n = n;
	return 0;
}

static bool name_equal(const struct wire_name *a, const struct wire_name *b)
{
	if (a->n != b->n)
		return false;
	/* Length bytes are < 64, so folding them is harmless. */
	for (size_t i = 0; i < a->n; i++) {
		uint8_t x = a->b[i], y = b->b[i];
		x = x >= 'A' && x <= 'Z' ? (uint8_t)(x + 32) : x;
		y = y >= 'A' && y <= 'Z' ? (uint8_t)(y + 32) : y;
		if (x != y)
			return false;
	}
	return true;
}

/* Reads the (possibly compressed) name at *off; *off moves past it. */
static int read_name(const uint8_t *msg, size_t len, size_t *off, struct wire_name *ret)
{
	size_t p = *off, n = 0, end = 0;
	unsigned jumps = 0;
	for (;;) {
		if (p >= len)
			return -EBADMSG;
		uint8_t c = msg[p];
		if ((c & 0xc0) == 0xc0) {
			if (p + 1 >= len)
				return -EBADMSG;
			size_t target = (size_t)(c & 0x3f) << 8 | msg[p + 1];
			/* Strictly backwards: no loop, every jump shrinks p. */
			if (target >= p || ++jumps > JUMPS_MAX)
				return -EBADMSG;
			if (end == 0)
				end = p + 2;
			p = target;
			continue;
		}
		if (c & 0xc0)
			return -EBADMSG;
		if (n + 1 + c > WIRE_NAME_MAX || c >= len - p)
			return -EBADMSG;
		ret->b[n] = c;
		memcpy(ret->b + n + 1, msg + p + 1, c);
		n += 1 + (size_t)c;
		p += 1 + (size_t)c;
		if (c == 0)
			break;
	}
	ret->n = n;
	*off = end ? end : p;
	return 0;
}

static int read_rr(const uint8_t *msg, size_t len, size_t *off, struct rr *ret)
{
	size_t p = *off;
	if (read_name(msg, len, &p, &ret->owner) < 0 || len - p < 10)
		return -EBADMSG;
	ret->type = be16(msg + p);
	ret->class = be16(msg + p + 2);
	ret->rdlen = be16(msg + p + 8);
	ret->rdata = p + 10;
	if (ret->rdlen > len - ret->rdata)
		return -EBADMSG;
	*off = ret->rdata + ret->rdlen;
	return 0;
}

int lz_dns_build_query(uint16_t id, const char *name, bool edns, uint8_t *buf, size_t cap, size_t *ret_len)
{
	struct wire_name q;
	if (encode_name(name, &q) < 0)
		return -EINVAL;
	size_t n = HEADER_LEN + q.n + 4 + (edns ? OPT_LEN : 0);
	if (n > cap)
		return -EMSGSIZE;
	static const uint8_t rd_one_question[10] = { 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0 };
	buf[0] = (uint8_t)(id >> 8);
	buf[1] = (uint8_t)id;
	memcpy(buf + 2, rd_one_question, sizeof(rd_one_question));
	memcpy(buf + HEADER_LEN, q.b, q.n);
	static const uint8_t a_in[4] = { 0, TYPE_A, 0, CLASS_IN };
	memcpy(buf + HEADER_LEN + q.n, a_in, 4);
	if (edns) {
		/* ARCOUNT 1: the OPT record (root owner, the UDP size as its
		 * class, extended RCODE, version and flags 0, no options) */
		static const uint8_t opt[OPT_LEN] = { 0, 0, TYPE_OPT, EDNS_UDP_SIZE >> 8, EDNS_UDP_SIZE & 0xff, 0, 0, 0, 0, 0, 0 };
		buf[11] = 1;
		memcpy(buf + HEADER_LEN + q.n + 4, opt, OPT_LEN);
	}
	*ret_len = n;
	return 0;
}

static bool in_chain(const struct wire_name *chain, size_t n, const struct wire_name *x)
{
	for (size_t i = 0; i < n; i++)
		if (name_equal(&chain[i], x))
			return true;
	return false;
}

int lz_dns_parse_answer(const uint8_t *buf, size_t len, uint16_t id, const char *name, uint32_t *addrs, size_t cap,
			size_t *ret_n, struct lz_err *err)
{
	struct wire_name chain[CNAME_LINKS_MAX + 1], qname;
	uint32_t found[LZ_DNS_MAX_ADDRS];
	size_t links = 0, n = 0;
	struct rr rr;

	if (cap == 0 || encode_name(name, &chain[0]) < 0)
		return lz_err_set(err, EINVAL, "DNS answer: bad name or no room for addresses");
	if (len < HEADER_LEN)
		return lz_err_set(err, EBADMSG, "DNS answer shorter than its header");
	if (!(buf[2] & 0x80) || be16(buf) != id || (buf[2] >> 3 & 0xf) != 0 || be16(buf + 4) != 1)
		return lz_err_set(err, EBADMSG, "DNS message is not the answer to query %u", id);
	size_t off = HEADER_LEN;
	if (read_name(buf, len, &off, &qname) < 0 || len - off < 4)
		return lz_err_set(err, EBADMSG, "DNS answer: malformed question");
	if (!name_equal(&qname, &chain[0]) || be16(buf + off) != TYPE_A || be16(buf + off + 2) != CLASS_IN)
		return lz_err_set(err, EBADMSG, "DNS answer is for another question");
	off += 4;
	if (buf[2] & 0x02)
		return lz_err_set(err, EMSGSIZE, "DNS answer for %s truncated", name);
	unsigned rcode = buf[3] & 0xf;
	if (rcode == RCODE_NXDOMAIN)
		return lz_err_set(err, ENOENT, "%s: no such domain", name);
	if (rcode != 0)
		return lz_err_set(err, EIO, "DNS server answered RCODE %u for %s", rcode, name);
	const size_t answers = off;
	const unsigned an = be16(buf + 6);

	/* The CNAME chain from name: one scan per link. */
	for (;;) {
		struct wire_name target = { .n = 0 };
		bool linked = false;
		off = answers;
		for (unsigned i = 0; i < an; i++) {
			if (read_rr(buf, len, &off, &rr) < 0)
				return lz_err_set(err, EBADMSG, "DNS answer: malformed record %u", i);
			if (rr.type != TYPE_CNAME || rr.class != CLASS_IN || !name_equal(&rr.owner, &chain[links]))
				continue;
			size_t p = rr.rdata;
			if (linked)
				return lz_err_set(err, EBADMSG, "DNS answer: two CNAMEs for one name");
			if (read_name(buf, len, &p, &target) < 0 || p != rr.rdata + rr.rdlen)
				return lz_err_set(err, EBADMSG, "DNS answer: malformed CNAME");
			linked = true;
		}
		if (!linked)
			break;
		if (links == CNAME_LINKS_MAX)
			return lz_err_set(err, EBADMSG, "DNS answer: CNAME chain longer than %d", CNAME_LINKS_MAX);
		if (in_chain(chain, links + 1, &target))
			return lz_err_set(err, EBADMSG, "DNS answer: CNAME loop");
		chain[++links] = target;
	}

	off = answers;
	size_t limit = cap < LZ_DNS_MAX_ADDRS ? cap : LZ_DNS_MAX_ADDRS;
	for (unsigned i = 0; i < an; i++) {
		(void)read_rr(buf, len, &off, &rr); /* all checked by the scans above */
		if (rr.type != TYPE_A || rr.class != CLASS_IN || !in_chain(chain, links + 1, &rr.owner))
			continue;
		if (rr.rdlen != 4)
			return lz_err_set(err, EBADMSG, "DNS answer: A record of %zu bytes", rr.rdlen);
		if (n < limit)
			found[n++] = (uint32_t)be16(buf + rr.rdata) << 16 | be16(buf + rr.rdata + 2);
	}
	if (n == 0)
		return lz_err_set(err, ENOENT, "%s: no A record", name);
	memcpy(addrs, found, n * sizeof(found[0]));
	*ret_n = n;
	return 0;
}

/* One query on fd, connected to its server, until deadline: 0 or
 * -ENOENT (final), -ETIMEDOUT, or another -errno; *ret_rcode is the
 * answer's RCODE when it is -EIO. */
static int ask_once(int fd, bool edns, const char *name, int64_t deadline, uint32_t *addrs, size_t cap,
		    size_t *ret_n, unsigned *ret_rcode, struct lz_err *err)
{
	uint8_t query[HEADER_LEN + WIRE_NAME_MAX + 4 + OPT_LEN], answer[ANSWER_BUF];
	size_t qlen;
	uint16_t id;

	if (getrandom(&id, sizeof(id), 0) != (ssize_t)sizeof(id))
		return lz_err_set(err, errno ? errno : EIO, "getrandom failed");
	if (lz_dns_build_query(id, name, edns, query, sizeof(query), &qlen) < 0)
		return lz_err_set(err, EINVAL, "'%s' is not a host name", name);
	if (send(fd, query, qlen, 0) != (ssize_t)qlen)
		return lz_err_set(err, errno ? errno : EIO, "DNS query to server: %s", strerror(errno));
	for (;;) {
		int r = lz_wait_fd(fd, POLLIN, deadline);
		if (r == -ETIMEDOUT)
			return lz_err_set(err, ETIMEDOUT, "DNS server did not answer for %s", name);
		if (r < 0)
			return lz_err_set(err, -r, "poll: %s", strerror(-r));
		ssize_t got = recv(fd, answer, sizeof(answer), MSG_TRUNC);
		if (got < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return lz_err_set(err, errno, "DNS answer: %s", strerror(errno));
		}
		if ((size_t)got > sizeof(answer))
			continue; /* larger than any answer to our query */
		r = lz_dns_parse_answer(answer, (size_t)got, id, name, addrs, cap, ret_n, err);
		if (r == -EIO)
			*ret_rcode = answer[3] & 0xf; /* the answer to this query: checked */
		if (r != -EBADMSG)
			return r;
	}
}

/* The query again over TCP (RFC 7766: each message after two length
 * bytes) to the server whose UDP answer was truncated, by deadline. */
static int ask_tcp(const struct sockaddr_in *sa, const char *name, int64_t deadline, uint32_t *addrs, size_t cap,
		   size_t *ret_n, struct lz_err *err)
{
	uint8_t query[2 + HEADER_LEN + WIRE_NAME_MAX + 4], len[2];
	size_t qlen;
	uint16_t id;
	if (getrandom(&id, sizeof(id), 0) != (ssize_t)sizeof(id))
		return lz_err_set(err, errno ? errno : EIO, "getrandom failed");
	if (lz_dns_build_query(id, name, false, query + 2, sizeof(query) - 2, &qlen) < 0)
		return lz_err_set(err, EINVAL, "'%s' is not a host name", name);
	query[0] = (uint8_t)(qlen >> 8);
	query[1] = (uint8_t)qlen;
	_cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return lz_err_set(err, errno, "socket: %s", strerror(errno));
	/* -EPROTO: the server closed before the whole answer */
	int r = lz_connect_by(fd, (const struct sockaddr *)sa, sizeof(*sa), deadline);
	if (r == 0)
		r = lz_stream_by(fd, true, query, 2 + qlen, deadline);
	if (r == 0)
		r = lz_stream_by(fd, false, len, 2, deadline);
	if (r < 0)
		return lz_err_set(err, -r, "DNS over TCP for %s: %s", name, strerror(-r));
	size_t alen = (size_t)len[0] << 8 | len[1];
	_cleanup_free_ uint8_t *answer = malloc(TCP_MESSAGE_MAX);
	if (answer == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	if ((r = lz_stream_by(fd, false, answer, alen, deadline)) < 0)
		return lz_err_set(err, -r, "DNS over TCP for %s: %s", name, strerror(-r));
	r = lz_dns_parse_answer(answer, alen, id, name, addrs, cap, ret_n, err);
	return r == -EMSGSIZE ? lz_err_set(err, EBADMSG, "DNS answer over TCP for %s truncated", name) : r;
}

/* One server: asked with EDNS, and once more without when it answers
 * that it does not know EDNS (FORMERR or NOTIMP, RFC 6891 7); a
 * truncated answer is asked for again over TCP. */
static int ask(uint32_t server, uint16_t port, const char *name, int timeout_ms, uint32_t *addrs, size_t cap,
	       size_t *ret_n, struct lz_err *err)
{
	_cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return lz_err_set(err, errno, "socket: %s", strerror(errno));
	/* Port 0 bind is implicit: the kernel picks a random source port. */
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(server) };
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return lz_err_set(err, errno, "DNS query to server: %s", strerror(errno));
	int64_t deadline = lz_now_ms() + timeout_ms;
	unsigned rcode = 0;
	int r = ask_once(fd, true, name, deadline, addrs, cap, ret_n, &rcode, err);
	if (r == -EIO && (rcode == RCODE_FORMERR || rcode == RCODE_NOTIMP))
		r = ask_once(fd, false, name, deadline, addrs, cap, ret_n, &rcode, err);
	if (r != -EMSGSIZE)
		return r;
	r = ask_tcp(&sa, name, deadline, addrs, cap, ret_n, err);
	/* a server that cannot answer whole is passed over, as before */
	return r == 0 || r == -ENOENT || r == -EIO || r == -EINVAL || r == -ENOMEM ? r : -EMSGSIZE;
}

int lz_dns_resolve(const uint32_t *servers, size_t n_servers, uint16_t port, const char *name, int timeout_ms,
		   uint32_t *addrs, size_t cap, size_t *ret_n, struct lz_err *err)
{
	int last = -ETIMEDOUT;
	if (n_servers == 0 || timeout_ms <= 0 || cap == 0)
		return lz_err_set(err, EINVAL, "DNS: no server, no timeout or no room for addresses");
	for (size_t i = 0; i < n_servers; i++) {
		char ip[LZ_IPV4_STR_MAX];
		int r = ask(servers[i], port, name, timeout_ms, addrs, cap, ret_n, err);
		if (r == -EIO || r == -EMSGSIZE)
			last = r;
		else if (r != -ETIMEDOUT && r != -ECONNREFUSED && r != -ENETUNREACH && r != -EHOSTUNREACH)
			return r; /* an answer, or a local failure no other server cures */
		lz_ipv4_format(servers[i], ip);
		(void)lz_err_prefix(err, r, "DNS server %s: ", ip);
	}
	if (last == -ETIMEDOUT)
		return lz_err_set(err, ETIMEDOUT, "no DNS server answered for %s", name);
	return lz_err_set(err, -last, "no DNS server gave addresses for %s (%s)", name,
			  last == -EIO ? "server failure" : "answer truncated");
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

int lz_resolvconf_nameservers(const char *text, size_t len, uint32_t *out, size_t cap, size_t *ret_n)
{
	static const char kw[] = "nameserver";
	const size_t kwlen = sizeof(kw) - 1;
	size_t n = 0;
	for (size_t p = 0; p < len && n < cap;) {
		const char *nl = memchr(text + p, '\n', len - p);
		size_t end = nl ? (size_t)(nl - text) : len, i = p;
		p = end + 1;
		while (i < end && is_blank(text[i]))
			i++;
		if (end - i <= kwlen || memcmp(text + i, kw, kwlen) != 0 || !is_blank(text[i + kwlen]))
			continue;
		i += kwlen;
		while (i < end && is_blank(text[i]))
			i++;
		size_t a = i;
		while (i < end && !is_blank(text[i]) && text[i] != '#' && text[i] != ';')
			i++;
		if (lz_ipv4_parse(text + a, i - a, &out[n]) == 0)
			n++;
	}
	*ret_n = n;
	return 0;
}
