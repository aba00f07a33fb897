/* The egress proxy's decisions, its counters record, and its serving of
 * hostile clients over real sockets on 127.0.0.1 with a resolver the test
 * runs (refusals: the address policy never admits a loopback upstream),
 * and, in a network namespace of the test's own, what one admitted
 * tunnel may hold in kernel buffers. Admitted traffic through real runsc
 * is tests/e2e/test_egress.sh. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_test.h"
#include "lz_slots.h"

#include "net/egressproxy.h"
#include "util/fdutil.h"

static struct lz_netpolicy *policy(void)
{
	static const char *const allow[] = { "api.example.com", "*.cdn.example.com" };
	static const char *const deny[] = { "bad.cdn.example.com" };
	struct lz_netpolicy *p = calloc(1, sizeof(*p));
	assert_non_null(p);
	assert_int_equal(lz_netpolicy_derive(NULL, 0, NULL, 0, NULL, 0, p, NULL), 0);
	assert_int_equal(lz_netpolicy_set_names(p, allow, 2, deny, 1, NULL, 0, NULL), 0);
	return p;
}

static int check(const struct lz_netpolicy *p, const char *target, struct lz_err *why)
{
	char head[512];
	struct lz_http_request req;
	int n = snprintf(head, sizeof(head), "CONNECT %s HTTP/1.1\r\n\r\n", target);
	assert_int_equal(lz_http_parse_head((const uint8_t *)head, (size_t)n, &req, NULL), 0);
	return lz_egress_check_name(p, &req, why);
}

static void test_lz_egress_check_name__allow_deny_and_addresses(void **state)
{
	(void)state;
	struct lz_netpolicy *p = policy();
	struct lz_err why = { 0 };
	assert_int_equal(check(p, "api.example.com:443", NULL), 0);
	assert_int_equal(check(p, "API.Example.COM.:443", NULL), 0); /* normalized by the parser */
	assert_int_equal(check(p, "img.cdn.example.com:443", NULL), 0);
	assert_int_equal(check(p, "a.b.cdn.example.com:8443", NULL), 0);
	assert_int_equal(check(p, "cdn.example.com:443", &why), -EACCES);
	assert_string_equal(why.msg, "not in allow_domains");
	assert_int_equal(check(p, "example.com:443", NULL), -EACCES);
	assert_int_equal(check(p, "api.example.com.evil.org:443", NULL), -EACCES);
	assert_int_equal(check(p, "bad.cdn.example.com:443", &why), -EACCES);
	assert_string_equal(why.msg, "in deny_domains");
	assert_int_equal(check(p, "93.184.216.34:443", &why), -EACCES);
	assert_string_equal(why.msg, "an address, not a name (allow_domains admits names only)");
	free(p);
}

static void test_lz_egress_check_addrs__any_denied_address_refuses(void **state)
{
	(void)state;
	struct lz_netpolicy *p = policy();
	struct lz_err why = { 0 };
	const uint32_t public[] = { 0xcb007105u, 0xc6336401u };
	const uint32_t mixed[] = { 0xcb007105u, 0x0a000001u };
	const uint32_t loopback[] = { 0x7f000001u };
	assert_int_equal(lz_egress_check_addrs(p, public, 2, NULL), 0);
	assert_int_equal(lz_egress_check_addrs(p, mixed, 2, &why), -EACCES);
	assert_string_equal(why.msg, "resolves to 10.0.0.1, which the address policy denies");
	assert_int_equal(lz_egress_check_addrs(p, loopback, 1, NULL), -EACCES);
	free(p);
}

static void test_lz_egress_stats__format_and_strict_read(void **state)
{
	(void)state;
	char dir[] = "/tmp/lz-egress-stats.XXXXXX";
	assert_non_null(mkdtemp(dir));
	int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	uint64_t a = 7, r = 9;
	assert_int_equal(lz_egress_stats_read(dfd, &a, &r, NULL), -ENOENT);
	char rec[LZ_EGRESS_STATS_LEN + 1];
	lz_egress_stats_format(12, 18446744073709551615ull, rec);
	assert_int_equal(strlen(rec), LZ_EGRESS_STATS_LEN);
	int fd = openat(dfd, LZ_EGRESS_STATS, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, rec, LZ_EGRESS_STATS_LEN, 0), LZ_EGRESS_STATS_LEN);
	assert_int_equal(lz_egress_stats_read(dfd, &a, &r, NULL), 0);
	assert_int_equal(a, 12);
	assert_true(r == 18446744073709551615ull);
	/* Anything but the exact form: refused, outputs untouched. */
	const char *forged[] = { "allowed 1\nrefused 2\n",
				 "allowed                   -1\nrefused                    2\n",
				 "allowed                    1\nrefused                    2\nX" };
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(ftruncate(fd, 0), 0);
		assert_int_equal(pwrite(fd, forged[i], strlen(forged[i]), 0), (ssize_t)strlen(forged[i]));
		a = r = 5;
		assert_int_equal(lz_egress_stats_read(dfd, &a, &r, NULL), -EBADMSG);
		assert_int_equal(a, 5);
		assert_int_equal(r, 5);
	}
	close(fd);
	/* A symlink in its place is not followed. */
	assert_int_equal(unlinkat(dfd, LZ_EGRESS_STATS, 0), 0);
	assert_int_equal(symlinkat("/etc/hostname", dfd, LZ_EGRESS_STATS), 0);
	assert_true(lz_egress_stats_read(dfd, &a, &r, NULL) < 0);
	assert_int_equal(a, 5);
	assert_int_equal(unlinkat(dfd, LZ_EGRESS_STATS, 0), 0);
	close(dfd);
	assert_int_equal(rmdir(dir), 0);
}

/* ---- serving ---------------------------------------------------------------- */

/* A resolver on 127.0.0.1 (an ephemeral port): nxdomain.example is
 * NXDOMAIN, every other name 10.0.0.5. */
static _Noreturn void resolver(int s)
{
	for (;;) {
		uint8_t q[512], a[600];
		struct sockaddr_in peer;
		socklen_t pl = sizeof(peer);
		ssize_t n = recvfrom(s, q, sizeof(q), 0, (struct sockaddr *)&peer, &pl);
		if (n < 17)
			continue;
		size_t i = 12;
		while (i < (size_t)n && q[i] != 0)
			i += 1u + q[i];
		size_t qend = i + 5;
		if (qend > (size_t)n)
			continue;
		bool nx = memmem(q + 12, qend - 12, "\x08nxdomain", 9) != NULL;
		memcpy(a, q, qend);
		a[2] = 0x81;
		a[3] = nx ? 0x83 : 0x80;
		a[6] = 0;
		a[7] = nx ? 0 : 1;
		size_t m = qend;
		if (!nx) {
			static const uint8_t rr[] = { 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 10, 0, 0, 5 };
			memcpy(a + m, rr, sizeof(rr));
			m += sizeof(rr);
		}
		(void)sendto(s, a, m, 0, (struct sockaddr *)&peer, pl);
	}
}

static int bound(int type, uint16_t *ret_port)
{
	int s = socket(AF_INET, type | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001u) };
	socklen_t l = sizeof(sa);
	assert_true(s >= 0);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(s, (struct sockaddr *)&sa, &l), 0);
	*ret_port = ntohs(sa.sin_port);
	return s;
}

struct served {
	pid_t proxy, dns;
	uint16_t port;
	char dir[64];
	int dfd;
	unsigned max_connections;
	/* another Domain's proxy: the same slots, its own port */
	pid_t other;
	uint16_t other_port;
};

static int serve_start(void **state)
{
	static const char *const allow[] = { "ok.example", "nxdomain.example" };
	struct served *v = calloc(1, sizeof(*v));
	assert_non_null(v);
	snprintf(v->dir, sizeof(v->dir), "/tmp/lz-egress-serve.XXXXXX");
	assert_non_null(mkdtemp(v->dir));
	v->dfd = open(v->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	uint16_t dns_port;
	int u = bound(SOCK_DGRAM, &dns_port), l = bound(SOCK_STREAM, &v->port), l2 = bound(SOCK_STREAM, &v->other_port);
	assert_int_equal(listen(l, 512), 0);
	assert_int_equal(listen(l2, 512), 0);
	/* The children die with the test, whatever fails. */
	if ((v->dns = fork()) == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		resolver(u);
	}
	close(u);
	struct lz_netpolicy *p = calloc(1, sizeof(*p));
	assert_int_equal(lz_netpolicy_derive(NULL, 0, NULL, 0, NULL, 0, p, NULL), 0);
	assert_int_equal(lz_netpolicy_set_names(p, allow, 2, NULL, 0, NULL, 0, NULL), 0);
	struct lz_egress_config cfg = { .policy = p, .resolvers = { 0x7f000001u }, .n_resolvers = 1,
					.dns_port = dns_port, .generation = 7 };
	/* the smallest host's: its connection limit is quick to reach */
	lz_egress_limits_for(0, &cfg.limits);
	v->max_connections = cfg.limits.max_connections;
	cfg.log_fd = openat(v->dfd, "hc.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	cfg.stats_fd = openat(v->dfd, LZ_EGRESS_STATS, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	cfg.slots_fd = openat(v->dfd, LZ_EGRESS_SLOTS, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	assert_true(cfg.log_fd >= 0 && cfg.stats_fd >= 0 && cfg.slots_fd >= 0);
	if ((v->proxy = fork()) == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(l2);
		_exit(-lz_egress_serve(l, &cfg));
	}
	/* the other proxy opens the file itself, as each RS's plan does */
	struct lz_egress_config other = cfg;
	other.log_fd = other.stats_fd = -1;
	if ((v->other = fork()) == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(l);
		other.slots_fd = openat(v->dfd, LZ_EGRESS_SLOTS, O_RDWR | O_CLOEXEC);
		_exit(-lz_egress_serve(l2, &other));
	}
	close(l);
	close(l2);
	close(cfg.log_fd);
	close(cfg.stats_fd);
	close(cfg.slots_fd);
	free(p);
	*state = v;
	return 0;
}

static int serve_stop(void **state)
{
	struct served *v = *state;
	int st;
	kill(v->proxy, SIGKILL);
	kill(v->other, SIGKILL);
	kill(v->dns, SIGKILL);
	(void)waitpid(v->proxy, &st, 0);
	(void)waitpid(v->other, NULL, 0);
	(void)waitpid(v->dns, NULL, 0);
	unlinkat(v->dfd, "hc.log", 0);
	unlinkat(v->dfd, LZ_EGRESS_STATS, 0);
	unlinkat(v->dfd, LZ_EGRESS_SLOTS, 0);
	close(v->dfd);
	rmdir(v->dir);
	free(v);
	return 0;
}

static int dial_port(uint16_t port)
{
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(0x7f000001u) };
	assert_true(c >= 0);
	assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return c;
}

static int dial(const struct served *v)
{
	return dial_port(v->port);
}

/* Reads the answer on c until the proxy closes it (or out is full), then
 * closes c. */
static char *answer(int c, char *out, size_t cap)
{
	size_t got = 0;
	for (;;) {
		struct pollfd pf = { .fd = c, .events = POLLIN };
		assert_int_equal(poll(&pf, 1, 10000), 1);
		ssize_t n = recv(c, out + got, cap - 1 - got, 0);
		if (n <= 0 || (got += (size_t)n) == cap - 1)
			break;
	}
	close(c);
	out[got] = '\0';
	return out;
}

/* Sends req (len bytes) and returns everything the proxy answers before it
 * closes (at most cap - 1 bytes, NUL-terminated), within 10 s. */
static char *ask(const struct served *v, const char *req, size_t len, char *out, size_t cap)
{
	int c = dial(v);
	assert_int_equal(send(c, req, len, MSG_NOSIGNAL), (ssize_t)len);
	return answer(c, out, cap);
}

static void expect(const struct served *v, const char *req, const char *status, const char *text)
{
	char out[4096];
	ask(v, req, strlen(req), out, sizeof(out));
	if (strncmp(out, status, strlen(status)) != 0 || strstr(out, text) == NULL)
		fail_msg("for %s: got '%s', want '%s' and '%s'", req, out, status, text);
}

static char *read_log(const struct served *v, char *buf, size_t cap)
{
	int fd = openat(v->dfd, "hc.log", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? 0 : read(fd, buf, cap - 1);
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

static void test_lz_egress_serve__refusals_over_sockets(void **state)
{
	const struct served *v = *state;
	expect(v, "GET / HTTP/1.1\r\nHost: ok.example\r\n\r\n", "HTTP/1.1 501 ", "lazaret:");
	expect(v, "CONNECT 10.0.0.1:443 HTTP/1.1\r\n\r\n", "HTTP/1.1 403 ", "an address, not a name");
	expect(v, "CONNECT evil.example:443 HTTP/1.1\r\n\r\n", "HTTP/1.1 403 ", "not in allow_domains");
	expect(v, "CONNECT evil.example:443 HTTP/1.1\r\n\r\n", "HTTP/1.1 403 ", "not in allow_domains");
	expect(v, "GET http://nxdomain.example/ HTTP/1.1\r\n\r\n", "HTTP/1.1 502 ", "does not resolve");
	expect(v, "CONNECT ok.example:443 HTTP/1.1\r\n\r\n", "HTTP/1.1 403 ",
	       "resolves to 10.0.0.5, which the address policy denies");
	expect(v, "GET http://ok.example/ HTTP/1.1\r\nHost: evil.example\r\n\r\n", "HTTP/1.1 400 ", "Host");
	expect(v, "CONNECT ok.example:443 HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
	       "HTTP/1.1 400 ", "lazaret:");
	/* A head that never ends within 16 KiB. */
	size_t big = LZ_HTTP_HEAD_MAX + 100;
	char *req = malloc(big), *out = malloc(4096);
	memcpy(req, "CONNECT ok.example:443 HTTP/1.1\r\nX: ", 37);
	memset(req + 37, 'a', big - 37);
	ask(v, req, big, out, 4096);
	assert_true(strncmp(out, "HTTP/1.1 400 ", 13) == 0);
	free(req);
	free(out);

	/* One hc.log line per destination; every refusal counted. */
	char log[8192];
	read_log(v, log, sizeof(log));
	assert_int_equal(count(log, "egress refused evil.example:443: not in allow_domains (generation 7)\n"), 1);
	assert_int_equal(count(log, "egress refused 10.0.0.1:443: an address, not a name"), 1);
	assert_int_equal(count(log, "egress refused ok.example:443: resolves to 10.0.0.5"), 1);
	assert_int_equal(count(log, "egress refused nxdomain.example:80: does not resolve"), 1);
	uint64_t allowed = 9, refused = 9;
	assert_int_equal(lz_egress_stats_read(v->dfd, &allowed, &refused, NULL), 0);
	assert_int_equal(allowed, 0);
	assert_int_equal(refused, 9);
}

/* Sends req in pieces ending at cuts[0] < cuts[1] < ... < len, each its
 * own packet (TCP_NODELAY, a pause between), and returns the answer as
 * ask does. */
static char *ask_cut(const struct served *v, const char *req, const size_t *cuts, size_t n_cuts, char *out,
		     size_t cap)
{
	int c = dial(v), one = 1;
	size_t from = 0, len = strlen(req);
	assert_int_equal(setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), 0);
	for (size_t i = 0; i <= n_cuts; i++) {
		size_t to = i < n_cuts ? cuts[i] : len;
		assert_int_equal(send(c, req + from, to - from, MSG_NOSIGNAL), (ssize_t)(to - from));
		from = to;
		usleep(2000);
	}
	return answer(c, out, cap);
}

static void expect_cut(const struct served *v, const char *req, const size_t *cuts, size_t n_cuts,
		       const char *status, const char *text)
{
	char out[4096];
	ask_cut(v, req, cuts, n_cuts, out, sizeof(out));
	if (strncmp(out, status, strlen(status)) != 0 || strstr(out, text) == NULL)
		fail_msg("for %s in %zu pieces: got '%s', want '%s' and '%s'", req, n_cuts + 1, out, status, text);
}

/* A head that comes a byte per packet, or with its end split anywhere,
 * is judged as it is when it comes whole (the search for its end resumes
 * where it stopped: httphead.h). */
static void test_lz_egress_serve__head_in_pieces(void **state)
{
	const struct served *v = *state;
	const char *head = "CONNECT 10.0.0.1:443 HTTP/1.1\r\n\r\n";
	size_t len = strlen(head), t = len - 4, bytes[64];
	for (size_t i = 0; i + 1 < len; i++)
		bytes[i] = i + 1;
	expect_cut(v, head, bytes, len - 1, "HTTP/1.1 403 ", "an address, not a name");
	const size_t splits[][3] = { { t + 1 }, { t + 2 }, { t + 3 }, { t + 1, t + 2, t + 3 } };
	const size_t n_splits[] = { 1, 1, 1, 3 };
	for (size_t i = 0; i < sizeof(n_splits) / sizeof(n_splits[0]); i++)
		expect_cut(v, head, splits[i], n_splits[i], "HTTP/1.1 403 ", "an address, not a name");
	/* A bare LF is refused as it comes (a second one, "\n\n", is not
	 * waited for: it would reach a closed connection). */
	const char *lf = "CONNECT 10.0.0.1:443 HTTP/1.1\n";
	for (size_t i = 0; i + 1 < strlen(lf); i++)
		bytes[i] = i + 1;
	expect_cut(v, lf, bytes, strlen(lf) - 1, "HTTP/1.1 400 ", "bare LF at byte 29");
	uint64_t allowed = 9, refused = 9;
	assert_int_equal(lz_egress_stats_read(v->dfd, &allowed, &refused, NULL), 0);
	assert_int_equal(allowed, 0);
	assert_int_equal(refused, 6);
}

/* Idle clients take no more than the limit's slots; the next is told, the
 * refusal is logged, and a slot comes back when one leaves. */
static void test_lz_egress_serve__connection_limit(void **state)
{
	const struct served *v = *state;
	int idle[LZ_EGRESS_MAX_CONNECTIONS];
	assert_int_equal(v->max_connections, LZ_EGRESS_MIN_CONNECTIONS);
	for (unsigned i = 0; i < v->max_connections; i++)
		idle[i] = dial(v);
	/* Every idle client has a thread before the next one is judged. */
	char out[512];
	for (int tries = 0;; tries++) {
		ask(v, "x", 1, out, sizeof(out));
		if (strstr(out, "503 Service Unavailable") != NULL)
			break;
		assert_true(tries < 50);
		usleep(100 * 1000);
	}
	assert_non_null(strstr(out, "too many connections through the egress proxies on this host: 16 at once, 16 of "
				    "them this sandbox's"));
	char log[4096];
	ssize_t n = lz_read_small_at(v->dfd, "hc.log", log, sizeof(log));
	assert_true(n > 0);
	assert_non_null(strstr(log, "egress refused (connection limit): too many connections"));
	close(idle[0]);
	for (int tries = 0;; tries++) {
		usleep(100 * 1000);
		ask(v, "CONNECT 10.0.0.1:443 HTTP/1.1\r\n\r\n", 33, out, sizeof(out));
		if (strstr(out, "403 Forbidden") != NULL)
			break;
		assert_true(tries < 50);
	}
	for (unsigned i = 1; i < v->max_connections; i++)
		close(idle[i]);
}

/* Waits until want of the slots file's bytes are locked (by anyone). */
static void wait_held(const struct served *v, unsigned want)
{
	int fd = openat(v->dfd, LZ_EGRESS_SLOTS, O_RDWR | O_CLOEXEC);
	unsigned held = 0;
	assert_true(fd >= 0);
	for (int tries = 0; tries < 100 && (held = slots_locked(fd, v->max_connections)) != want; tries++)
		usleep(50 * 1000);
	close(fd);
	assert_int_equal(held, want);
}

/* The limit is the host's, not each proxy's: another Domain's proxy holds
 * 10 of the 16 slots, this one serves 6 and refuses the 7th naming both
 * counts; a slot the other gives back is this one's next. */
static void test_lz_egress_serve__the_limit_is_shared_by_every_proxy(void **state)
{
	const struct served *v = *state;
	int theirs[10], ours[6];
	char out[512];
	assert_int_equal(v->max_connections, 16);
	static const char denied[] = "CONNECT 10.0.0.1:443 HTTP/1.1\r\n\r\n"; /* answered at once */
	for (size_t i = 0; i < 10; i++)
		theirs[i] = dial_port(v->other_port);
	wait_held(v, 10);
	for (size_t i = 0; i < 6; i++)
		ours[i] = dial(v);
	wait_held(v, 16);
	ask(v, denied, strlen(denied), out, sizeof(out));
	if (strstr(out, "16 at once, 6 of them this sandbox's") == NULL)
		fail_msg("the refusal: %s", out);
	if (strstr(out, "16 at once, 6 of them this sandbox's") == NULL)
		fail_msg("the refusal: %s", out);
	close(theirs[0]);
	for (int tries = 0;; tries++) {
		usleep(100 * 1000);
		ask(v, denied, strlen(denied), out, sizeof(out));
		if (strstr(out, "403 Forbidden") != NULL)
			break;
		assert_true(tries < 50);
	}
	for (size_t i = 1; i < 10; i++)
		close(theirs[i]);
	for (size_t i = 0; i < 6; i++)
		close(ours[i]);
}

/* ---- what a stalled tunnel holds ------------------------------------------- */

#define STALL_MS 1500
#define SMALL_BUF (64 * 1024)

/* Writes to the accepted connection as fast as it takes bytes, until it
 * took none for STALL_MS; then reports how many it took. */
static _Noreturn void flood(int l, int report)
{
	static uint8_t chunk[SMALL_BUF];
	uint64_t total = 0;
	int s = accept4(l, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	for (;;) {
		ssize_t n = s < 0 ? -1 : send(s, chunk, sizeof(chunk), MSG_NOSIGNAL);
		if (n > 0) {
			total += (uint64_t)n;
			continue;
		}
		struct pollfd pf = { .fd = s, .events = POLLOUT };
		if (n < 0 && errno != EAGAIN)
			break;
		if (poll(&pf, 1, STALL_MS) != 1)
			break;
	}
	(void)write(report, &total, sizeof(total));
	_exit(0);
}

/* The bytes a server could push into a tunnel whose client stopped
 * reading, or 0 with why in msg. Runs in a child of its own network
 * namespace, where 10.0.0.5 (the test resolver's answer) is on lo. */
static uint64_t stalled_tunnel_holds(const struct lz_egress_limits *limits, char *msg, size_t cap)
{
#define NO(...)                                    \
	do {                                       \
		snprintf(msg, cap, __VA_ARGS__);   \
		return 0;                          \
	} while (0)
	if (lz_test_unshare_as_self(CLONE_NEWNET) < 0)
		NO("unshare: %s", strerror(errno));
	int io = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr = { .ifr_name = "lo" };
	ifr.ifr_flags = IFF_UP;
	if (io < 0 || ioctl(io, SIOCSIFFLAGS, &ifr) < 0)
		NO("lo up: %s", strerror(errno));
	struct sockaddr_in up = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x0a000005u) };
	struct ifreq alias = { .ifr_name = "lo:1" };
	memcpy(&alias.ifr_addr, &up, sizeof(up));
	if (ioctl(io, SIOCSIFADDR, &alias) < 0)
		NO("10.0.0.5 on lo: %s", strerror(errno));
	close(io);

	/* The server: its own send buffer small and fixed. */
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), small = SMALL_BUF, rep[2];
	socklen_t sl = sizeof(up);
	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)) < 0 ||
	    bind(l, (struct sockaddr *)&up, sizeof(up)) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&up, &sl) < 0 || pipe2(rep, O_CLOEXEC) < 0)
		NO("server: %s", strerror(errno));
	if (fork() == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		flood(l, rep[1]);
	}
	close(rep[1]);

	/* The proxy, admitting 10.0.0.5 for ok.example. */
	uint16_t dns_port, proxy_port;
	int u = bound(SOCK_DGRAM, &dns_port), pl = bound(SOCK_STREAM, &proxy_port);
	if (listen(pl, 8) < 0)
		NO("listen: %s", strerror(errno));
	if (fork() == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		resolver(u);
	}
	static const char *const names[] = { "ok.example" };
	static struct lz_netpolicy p;
	struct lz_prefix allow = { 0x0a000005u, 32 };
	if (lz_netpolicy_derive(&allow, 1, NULL, 0, NULL, 0, &p, NULL) < 0 ||
	    lz_netpolicy_set_names(&p, names, 1, NULL, 0, NULL, 0, NULL) < 0)
		NO("policy");
	struct lz_egress_config cfg = { .policy = &p, .resolvers = { 0x7f000001u }, .n_resolvers = 1,
					.dns_port = dns_port, .log_fd = -1, .stats_fd = -1, .generation = 7,
					.limits = *limits,
					.slots_fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600) };
	if (fork() == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		_exit(-lz_egress_serve(pl, &cfg));
	}

	/* The client: its receive buffer small and fixed; it reads the
	 * proxy's answer and nothing after. */
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in pa = { .sin_family = AF_INET, .sin_port = htons(proxy_port),
				  .sin_addr.s_addr = htonl(0x7f000001u) };
	char req[64], head[256];
	int n = snprintf(req, sizeof(req), "CONNECT ok.example:%u HTTP/1.1\r\n\r\n", ntohs(up.sin_port));
	if (c < 0 || setsockopt(c, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) < 0 ||
	    connect(c, (struct sockaddr *)&pa, sizeof(pa)) < 0 || send(c, req, (size_t)n, 0) != n)
		NO("client: %s", strerror(errno));
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	if (recv(c, head, sizeof(ok) - 1, MSG_WAITALL) != (ssize_t)sizeof(ok) - 1 || memcmp(head, ok, sizeof(ok) - 1))
		NO("the proxy did not admit the tunnel");
	uint64_t total = 0;
	struct pollfd pf = { .fd = rep[0], .events = POLLIN };
	if (poll(&pf, 1, 60000) != 1 || read(rep[0], &total, sizeof(total)) != sizeof(total))
		NO("no report from the server");
	if (total == 0)
		NO("nothing flowed");
	return total;
#undef NO
}

/* A client that stops reading lets the server fill the proxy's kernel
 * buffers: they must stay as small as limits say whatever the kernel's
 * autotuning would grow them to (tcp_rmem reaches 32 MiB here). The bound
 * counts everything on the way, each buffer at twice its size (the
 * kernel's doubling): the server's and the client's (64 KiB each), the
 * proxy's upstream receive and sandbox send buffers, plus 512 KiB for the
 * relay's 64 KiB and each queue's overshoot of a segment. Full buffers
 * held 1.6 to 2.9 MiB against 3.25; uncapped, 4.9 to 6.2 MB. */
static uint64_t stalled_bound(const struct lz_egress_limits *l)
{
	return 2 * (2 * (uint64_t)SMALL_BUF + (uint64_t)l->upstream_rcvbuf + (uint64_t)l->sandbox_sndbuf) +
	       512 * 1024;
}

static void stalled_tunnel_within(const struct lz_egress_limits *limits)
{
	int rep[2];
	assert_int_equal(pipe2(rep, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct {
			uint64_t total;
			char msg[200];
		} r = { 0, "" };
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		setpgid(0, 0); /* its helpers are killed with it */
		r.total = stalled_tunnel_holds(limits, r.msg, sizeof(r.msg));
		(void)write(rep[1], &r, sizeof(r));
		_exit(0);
	}
	close(rep[1]);
	struct {
		uint64_t total;
		char msg[200];
	} r = { 0, "" };
	ssize_t got = read(rep[0], &r, sizeof(r));
	close(rep[0]);
	kill(-pid, SIGKILL);
	(void)waitpid(pid, NULL, 0);
	assert_int_equal(got, (ssize_t)sizeof(r));
	if (r.total == 0)
		fail_msg("%s", r.msg);
	print_message("a stalled tunnel took %llu bytes (bound %llu)\n", (unsigned long long)r.total,
		      (unsigned long long)stalled_bound(limits));
	assert_true(r.total <= stalled_bound(limits));
}

static void test_lz_egress_serve__a_stalled_tunnel_holds_little(void **state)
{
	(void)state;
	struct lz_egress_limits big_host, small_host;
	lz_egress_limits_for(UINT64_MAX, &big_host);
	lz_egress_limits_for(0, &small_host);
	stalled_tunnel_within(&big_host);
	stalled_tunnel_within(&small_host);
}

/* The host's TCP memory bounds what all connections hold together: a
 * quarter of its pressure threshold, except on a host too small for the
 * least (16 connections, a 128 KiB window); more memory never gives less.
 * Each connection holds twice its four buffers. */
static uint64_t all_held(const struct lz_egress_limits *l)
{
	return 2 * ((uint64_t)l->upstream_rcvbuf + (uint64_t)l->upstream_sndbuf + (uint64_t)l->sandbox_rcvbuf +
		    (uint64_t)l->sandbox_sndbuf) * l->max_connections;
}

static void test_lz_egress_limits_for__a_quarter_of_the_pressure_threshold(void **state)
{
	(void)state;
	struct lz_egress_limits l, prev, least;
	lz_egress_limits_for(0, &least);
	assert_int_equal(least.max_connections, LZ_EGRESS_MIN_CONNECTIONS);
	assert_int_equal(least.upstream_rcvbuf, 128 * 1024);
	/* this machine's 24 GB: tcp_mem's 383,879 pages, full buffers */
	lz_egress_limits_for(383879ull * 4096, &l);
	assert_int_equal(l.upstream_rcvbuf, 1024 * 1024);
	assert_int_equal(l.sandbox_sndbuf, 256 * 1024);
	assert_int_equal(l.max_connections, 383879ull * 4096 / 4 / (7 * 1024 * 1024 / 2));
	lz_egress_limits_for(UINT64_MAX, &l);
	assert_int_equal(l.max_connections, LZ_EGRESS_MAX_CONNECTIONS);
	prev = least;
	for (uint64_t pressure = 1 << 20; pressure < (1ull << 40); pressure += pressure / 8) {
		lz_egress_limits_for(pressure, &l);
		if (all_held(&l) > pressure / 4)
			assert_memory_equal(&l, &least, sizeof(l));
		assert_in_range(l.max_connections, LZ_EGRESS_MIN_CONNECTIONS, LZ_EGRESS_MAX_CONNECTIONS);
		assert_in_range(l.upstream_rcvbuf, least.upstream_rcvbuf, 1024 * 1024);
		assert_in_range(l.sandbox_rcvbuf, least.sandbox_rcvbuf, 256 * 1024);
		assert_true(l.max_connections >= prev.max_connections || l.upstream_rcvbuf > prev.upstream_rcvbuf);
		assert_true(l.upstream_rcvbuf >= prev.upstream_rcvbuf && l.upstream_sndbuf >= prev.upstream_sndbuf &&
			    l.sandbox_rcvbuf >= prev.sandbox_rcvbuf && l.sandbox_sndbuf >= prev.sandbox_sndbuf);
		prev = l;
	}
}

/* This host's threshold is readable and in pages of this size. */
static void test_lz_egress_tcp_pressure__this_host(void **state)
{
	(void)state;
	char buf[96];
	unsigned long long low, pressure, high;
	uint64_t bytes = 0;
	struct lz_err err = { 0, "" };
	assert_true(lz_read_small("/proc/sys/net/ipv4/tcp_mem", buf, sizeof(buf)) > 0);
	assert_int_equal(sscanf(buf, "%llu %llu %llu", &low, &pressure, &high), 3);
	assert_int_equal(lz_egress_tcp_pressure(&bytes, &err), 0);
	assert_int_equal(bytes, pressure * (uint64_t)sysconf(_SC_PAGESIZE));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_egress_check_name__allow_deny_and_addresses),
		cmocka_unit_test(test_lz_egress_check_addrs__any_denied_address_refuses),
		cmocka_unit_test(test_lz_egress_stats__format_and_strict_read),
		cmocka_unit_test(test_lz_egress_limits_for__a_quarter_of_the_pressure_threshold),
		cmocka_unit_test(test_lz_egress_tcp_pressure__this_host),
		cmocka_unit_test_setup_teardown(test_lz_egress_serve__refusals_over_sockets, serve_start,
						serve_stop),
		cmocka_unit_test_setup_teardown(test_lz_egress_serve__head_in_pieces, serve_start, serve_stop),
		cmocka_unit_test_setup_teardown(test_lz_egress_serve__connection_limit, serve_start, serve_stop),
		cmocka_unit_test_setup_teardown(test_lz_egress_serve__the_limit_is_shared_by_every_proxy, serve_start,
						serve_stop),
		cmocka_unit_test(test_lz_egress_serve__a_stalled_tunnel_holds_little),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
