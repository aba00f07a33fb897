/* The egress proxy (egressproxy.h): one thread per connection. */
#include "net/egressproxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "net/dnsquery.h"
#include "net/egressname.h"
#include "net/tlssni.h"
#include "proc/lockslots.h"
#include "proc/spawn.h"
#include "util/cleanup.h"
#include "util/deadline.h"
#include "util/fdutil.h"
#include "util/sys.h"
#include "util/testfault.h"

#define RELAY_BUF 65536
#define LOGGED_MAX 1024 /* destinations whose refusal was logged */

/* ---- what a connection may hold ------------------------------------------- */

/* Full buffers: the upstream receive buffer is a download's window (about
 * 1.5 MiB once doubled: 15 MB/s from a server 100 ms away); the
 * sandbox's link is local. The least: a 128 KiB window. */
static const struct lz_egress_limits full = { 1024 * 1024, 256 * 1024, 256 * 1024, 256 * 1024,
					      LZ_EGRESS_MAX_CONNECTIONS };
static const struct lz_egress_limits least = { 128 * 1024, 32 * 1024, 32 * 1024, 32 * 1024,
					       LZ_EGRESS_MIN_CONNECTIONS };
#define FULL_DOWN_TO 64 /* connections with full buffers before the buffers shrink */

/* What one connection's buffers take of the host's TCP memory at most. */
static uint64_t held(const struct lz_egress_limits *l)
{
	return 2 * ((uint64_t)l->upstream_rcvbuf + (uint64_t)l->upstream_sndbuf + (uint64_t)l->sandbox_rcvbuf +
		    (uint64_t)l->sandbox_sndbuf);
}

static int scaled(int full_size, int least_size, uint64_t budget, uint64_t full_held)
{
	uint64_t v = (uint64_t)full_size * budget / full_held;
	return v < (uint64_t)least_size ? least_size : (int)v;
}

void lz_egress_limits_for(uint64_t tcp_pressure_bytes, struct lz_egress_limits *out)
{
	uint64_t budget = tcp_pressure_bytes / 4, n = budget / held(&full);
	*out = full;
	if (n >= LZ_EGRESS_MAX_CONNECTIONS)
		return;
	if (n >= FULL_DOWN_TO) {
		out->max_connections = (unsigned)n;
		return;
	}
	uint64_t each = budget / FULL_DOWN_TO;
	*out = (struct lz_egress_limits){
		scaled(full.upstream_rcvbuf, least.upstream_rcvbuf, each, held(&full)),
		scaled(full.upstream_sndbuf, least.upstream_sndbuf, each, held(&full)),
		scaled(full.sandbox_rcvbuf, least.sandbox_rcvbuf, each, held(&full)),
		scaled(full.sandbox_sndbuf, least.sandbox_sndbuf, each, held(&full)),
		FULL_DOWN_TO,
	};
	n = budget / held(out);
	if (n < FULL_DOWN_TO)
		out->max_connections = n < LZ_EGRESS_MIN_CONNECTIONS ? LZ_EGRESS_MIN_CONNECTIONS : (unsigned)n;
}

int lz_egress_tcp_pressure(uint64_t *ret_bytes, struct lz_err *err)
{
	char buf[96];
	unsigned long long low, pressure, high;
	long page = sysconf(_SC_PAGESIZE);
	ssize_t n = lz_read_small("/proc/sys/net/ipv4/tcp_mem", buf, sizeof(buf));
	if (n < 0)
		return lz_err_set(err, (int)-n, "reading /proc/sys/net/ipv4/tcp_mem: %s", strerror((int)-n));
	if (sscanf(buf, "%llu %llu %llu", &low, &pressure, &high) != 3 || page <= 0 ||
	    pressure > UINT64_MAX / (uint64_t)page)
		return lz_err_set(err, EBADMSG, "/proc/sys/net/ipv4/tcp_mem is not three page counts");
	*ret_bytes = (uint64_t)pressure * (uint64_t)page;
	return 0;
}

/* ---- decisions -------------------------------------------------------------- */

int lz_egress_check_name(const struct lz_netpolicy *p, const struct lz_http_request *req, struct lz_err *why)
{
	const struct lz_netpolicy_names *nm = &p->names;
	const char *allow[LZ_NETPOLICY_MAX_NAMES], *deny[LZ_NETPOLICY_MAX_NAMES];
	if (req->host_is_ipv4)
		return lz_err_set(why, EACCES, "an address, not a name (allow_domains admits names only)");
	for (size_t i = 0; i < nm->n_allow; i++)
		allow[i] = nm->allow[i];
	for (size_t i = 0; i < nm->n_deny; i++)
		deny[i] = nm->deny[i];
	if (lz_egress_names_admit(allow, nm->n_allow, NULL, 0, req->host) == false)
		return lz_err_set(why, EACCES, "not in allow_domains");
	if (nm->n_deny > 0 && !lz_egress_names_admit(allow, nm->n_allow, deny, nm->n_deny, req->host))
		return lz_err_set(why, EACCES, "in deny_domains");
	return 0;
}

int lz_egress_check_addrs(const struct lz_netpolicy *p, const uint32_t *addrs, size_t n, struct lz_err *why)
{
	for (size_t i = 0; i < n; i++)
		if (!lz_netpolicy_admits(p, addrs[i])) {
			char text[LZ_IPV4_STR_MAX];
			lz_ipv4_format(addrs[i], text);
			return lz_err_set(why, EACCES, "resolves to %s, which the address policy denies", text);
		}
	return 0;
}

/* ---- what the developer sees ------------------------------------------------ */

static struct {
	pthread_mutex_t lock;
	size_t n_logged;
	bool log_full;
	char logged[LOGGED_MAX][LZ_EGRESS_NAME_MAX + 8];
	atomic_ullong allowed, refused;
	struct lz_lockslots slots; /* the host's, shared with every proxy */
} proxy = { .lock = PTHREAD_MUTEX_INITIALIZER };

void lz_egress_stats_format(uint64_t allowed, uint64_t refused, char out[LZ_EGRESS_STATS_LEN + 1])
{
	snprintf(out, LZ_EGRESS_STATS_LEN + 1, "allowed %20llu\nrefused %20llu\n", (unsigned long long)allowed,
		 (unsigned long long)refused);
}

int lz_egress_stats_read(int domain_root_fd, uint64_t *ret_allowed, uint64_t *ret_refused, struct lz_err *err)
{
	char rec[LZ_EGRESS_STATS_LEN + 2], want[LZ_EGRESS_STATS_LEN + 1];
	_cleanup_close_ int fd = lz_openat2(domain_root_fd, LZ_EGRESS_STATS, O_RDONLY | O_CLOEXEC | O_NOFOLLOW,
					    LZ_RESOLVE_OWNED);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT : lz_err_set(err, errno, "egress.stats: %s", strerror(errno));
	ssize_t n = pread(fd, rec, sizeof(rec), 0);
	unsigned long long a, r;
	char nl1, nl2;
	if (n != LZ_EGRESS_STATS_LEN)
		return lz_err_set(err, EBADMSG, "egress.stats is not a counters record");
	rec[n] = '\0';
	if (sscanf(rec, "allowed %20llu%crefused %20llu%c", &a, &nl1, &r, &nl2) != 4)
		return lz_err_set(err, EBADMSG, "egress.stats is not a counters record");
	lz_egress_stats_format(a, r, want);
	if (strcmp(rec, want) != 0)
		return lz_err_set(err, EBADMSG, "egress.stats is not a counters record");
	*ret_allowed = a;
	*ret_refused = r;
	return 0;
}

/* At offset 0, fixed width, so that one pwrite replaces the record whole. */
static void write_stats(const struct lz_egress_config *cfg)
{
	char rec[LZ_EGRESS_STATS_LEN + 1];
	if (cfg->stats_fd < 0)
		return;
	lz_egress_stats_format(proxy.allowed, proxy.refused, rec);
	(void)!pwrite(cfg->stats_fd, rec, LZ_EGRESS_STATS_LEN, 0);
}

/* One line per destination (its first refusal) in hc.log; every refusal
 * counted. dest holds only name bytes (LDH), digits, '.' and ':' (or is
 * the proxy's own "(connection limit)"); why is
 * made printable all the same: hc.log reaches a terminal. */
static void note_refusal(const struct lz_egress_config *cfg, const char *dest, const char *why_in)
{
	char why[LZ_ERR_MSG_MAX];
	size_t k = 0;
	for (; why_in[k] != '\0' && k + 1 < sizeof(why); k++)
		why[k] = why_in[k] >= 0x20 && why_in[k] < 0x7f ? why_in[k] : '?';
	why[k] = '\0';
	bool first = true, full = false;
	atomic_fetch_add(&proxy.refused, 1);
	pthread_mutex_lock(&proxy.lock);
	for (size_t i = 0; i < proxy.n_logged && first; i++)
		first = strcmp(proxy.logged[i], dest) != 0;
	/* A bounded log: past LOGGED_MAX destinations, one line says so and
	 * the rest are counted only (a flood of names cannot fill hc.log). */
	if (first && proxy.n_logged < LOGGED_MAX) {
		snprintf(proxy.logged[proxy.n_logged++], sizeof(proxy.logged[0]), "%s", dest);
	} else if (first) {
		full = !proxy.log_full;
		proxy.log_full = true;
		first = false;
	}
	write_stats(cfg);
	pthread_mutex_unlock(&proxy.lock);
	if (full && cfg->log_fd >= 0)
		dprintf(cfg->log_fd, "lazaret: egress refused more than %d destinations; the rest are counted, not "
				     "logged (generation %llu)\n", LOGGED_MAX, (unsigned long long)cfg->generation);
	else if (first && cfg->log_fd >= 0)
		dprintf(cfg->log_fd, "lazaret: egress refused %s: %s (generation %llu)\n", dest, why,
			(unsigned long long)cfg->generation);
}

static void note_allowed(const struct lz_egress_config *cfg)
{
	atomic_fetch_add(&proxy.allowed, 1);
	pthread_mutex_lock(&proxy.lock);
	write_stats(cfg);
	pthread_mutex_unlock(&proxy.lock);
}

/* ---- one connection ----------------------------------------------------------- */

static bool send_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

static void reply(int fd, const char *status, const char *why)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf),
			 "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n"
			 "lazaret: %s\n",
			 status, strlen(why) + 10, why);
	if (n > 0)
		(void)send_all(fd, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

/* Reads into buf until parse says enough (not -EAGAIN), the peer ends, or
 * the deadline passes (-ETIMEDOUT). parse is called after every recv with
 * all of buf so far: it resumes where its previous call stopped (a scan
 * in ctx), so a peer that sends a byte per packet costs linear work. */
static int read_until(int fd, uint8_t *buf, size_t cap, size_t *got, int64_t deadline,
		      int (*parse)(const uint8_t *, size_t, void *), void *ctx)
{
	for (;;) {
		int r = *got > 0 ? parse(buf, *got, ctx) : -EAGAIN;
		if (r != -EAGAIN)
			return r;
		if (*got == cap)
			return -E2BIG;
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int left = lz_remaining_ms(deadline);
		if (left == 0)
			return -ETIMEDOUT;
		int pr = poll(&pf, 1, left);
		if (pr < 0 && errno != EINTR)
			return -errno;
		if (pr <= 0)
			continue;
		ssize_t n = recv(fd, buf + *got, cap - *got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? -ECONNRESET : -errno;
		*got += (size_t)n;
	}
}

struct head_parse {
	struct lz_http_scan scan;
	struct lz_http_request req;
	struct lz_err err;
};

static int parse_head(const uint8_t *buf, size_t len, void *ctx)
{
	struct head_parse *h = ctx;
	return lz_http_parse_head_more(buf, len, &h->scan, &h->req, &h->err);
}

struct hello_parse {
	struct lz_tls_scan scan; /* 16 KiB: the handshake bytes so far */
	char name[LZ_EGRESS_NAME_MAX + 1];
	struct lz_err err;
};

static int parse_hello(const uint8_t *buf, size_t len, void *ctx)
{
	struct hello_parse *h = ctx;
	return lz_tls_client_hello_sni_more(buf, len, &h->scan, h->name, &h->err);
}

/* A TCP connection to addr:port within LZ_EGRESS_CONNECT_MS. */
/* How long a relayed connection may stand still, and a send wait. */
static int idle_ms(void)
{
	/* lazaret-faults: 2 s, for tests/e2e/test_egress.sh */
	return lz_test_fault("egress-idle-2s") ? 2000 : LZ_EGRESS_IDLE_MS;
}

/* A send to s waits idle_ms() at most. */
static int bound_sends(int s)
{
	struct timeval send_wait = { .tv_sec = idle_ms() / 1000 };
	return setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &send_wait, sizeof(send_wait));
}

static int cap_buffers(int s, int rcvbuf, int sndbuf)
{
	if (setsockopt(s, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) < 0 ||
	    setsockopt(s, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)) < 0)
		return -errno;
	return 0;
}

/* Connected (blocking) within LZ_EGRESS_CONNECT_MS, its sends bounded
 * before the first: an upstream that stops reading cannot hold the slot
 * while the request head and body go out. */
static int connect_to(uint32_t addr, uint16_t port, const struct lz_egress_limits *limits, int *ret)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return -errno;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(addr) };
	/* before connect: the window scale is chosen for the SYN */
	int r = cap_buffers(s, limits->upstream_rcvbuf, limits->upstream_sndbuf);
	if (r == 0)
		r = lz_connect_by(s, (struct sockaddr *)&sa, sizeof(sa), lz_now_ms() + LZ_EGRESS_CONNECT_MS);
	if (r == 0 && (fcntl(s, F_SETFL, 0) < 0 || bound_sends(s) < 0))
		r = -errno;
	if (r < 0) {
		close(s);
		return r;
	}
	*ret = s;
	return 0;
}

/* Copies both ways until both directions ended, or until nothing moved
 * for LZ_EGRESS_IDLE_MS (a send waits as long at most); each side's end is
 * passed on as a half-close. */
static void relay(int a, int b, uint8_t *buf)
{
	int idle = idle_ms();
	if (bound_sends(a) < 0 || bound_sends(b) < 0)
		return;
	bool a_open = true, b_open = true;
	while (a_open || b_open) {
		struct pollfd pf[2] = { { .fd = a_open ? a : -1, .events = POLLIN },
					{ .fd = b_open ? b : -1, .events = POLLIN } };
		int pr = poll(pf, 2, idle);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			return; /* idle, or poll failed: both end */
		for (int i = 0; i < 2; i++) {
			if (!pf[i].revents)
				continue;
			int from = i == 0 ? a : b, to = i == 0 ? b : a;
			ssize_t n = recv(from, buf, RELAY_BUF, 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 || (n > 0 && !send_all(to, buf, (size_t)n)))
				return; /* an error on either side ends both */
			if (n == 0) { /* this side's end, passed on */
				(void)shutdown(to, SHUT_WR);
				if (i == 0)
					a_open = false;
				else
					b_open = false;
			}
		}
	}
}

struct conn {
	int fd;
	const struct lz_egress_config *cfg;
	int slot; /* of the host's connection slots */
};

/* The first bytes of an admitted CONNECT (*got of them already in buf,
 * sent with the head): a client that speaks TLS first must name the same
 * host; a server that speaks first is not TLS. A tunnel where nobody
 * speaks within LZ_EGRESS_HEAD_MS is closed: the client's late bytes
 * would otherwise pass unchecked. Returns the bytes read so far in *got
 * (to be sent upstream), -EACCES, or -ETIMEDOUT/-ECONNRESET. */
static int check_first_bytes(int client, int upstream, const char *host, uint8_t *buf, size_t *got,
			     struct lz_err *why)
{
	struct pollfd pf[2] = { { .fd = client, .events = POLLIN }, { .fd = upstream, .events = POLLIN } };
	/* lazaret-faults: a 2 s silence, for tests/e2e/test_egress.sh */
	int64_t deadline = lz_now_ms() + (lz_test_fault("egress-silence-2s") ? 2000 : LZ_EGRESS_HEAD_MS);
	int pr = 1;
	while (*got == 0 && (pr = poll(pf, 2, lz_remaining_ms(deadline))) < 0 && errno == EINTR)
		;
	if (pr < 0)
		return -errno;
	if (pr == 0)
		return -ETIMEDOUT;
	if (*got == 0 && !(pf[0].revents & POLLIN))
		return 0; /* the server speaks first: not TLS from the client */
	struct hello_parse h = { .err = { 0, "" } };
	int r = read_until(client, buf, LZ_TLS_HELLO_MAX, got, deadline, parse_hello, &h);
	if (r == -ENOTSUP)
		return 0; /* not TLS: relayed as it is (header) */
	if (r == -ECONNRESET || r == -ETIMEDOUT)
		return r; /* the client left or stalled: nothing to judge */
	if (r == -ENOENT)
		return lz_err_set(why, EACCES, "TLS without a server name");
	if (r < 0)
		return lz_err_set(why, EACCES, "a malformed TLS ClientHello (%s)", h.err.msg[0] ? h.err.msg : strerror(-r));
	if (strcmp(h.name, host) != 0)
		return lz_err_set(why, EACCES, "TLS names another server, '%s'", h.name);
	return 0;
}

static void serve(struct conn *c)
{
	const struct lz_egress_config *cfg = c->cfg;
	_cleanup_free_ uint8_t *head = malloc(LZ_HTTP_HEAD_MAX + LZ_TLS_HELLO_MAX);
	_cleanup_free_ uint8_t *buf = malloc(RELAY_BUF);
	_cleanup_close_ int up = -EBADF;
	struct head_parse h = { .err = { 0, "" } };
	struct lz_err why = { 0, "" };
	char dest[LZ_EGRESS_NAME_MAX + 8];
	size_t got = 0;
	if (head == NULL || buf == NULL) {
		reply(c->fd, "503 Service Unavailable", "the proxy is out of memory");
		return;
	}
	int r = read_until(c->fd, head, LZ_HTTP_HEAD_MAX, &got, lz_now_ms() + LZ_EGRESS_HEAD_MS, parse_head, &h);
	if (r == -ETIMEDOUT || r == -ECONNRESET)
		return;
	if (r < 0) {
		const char *status = r == -ENOTSUP ? "501 Not Implemented" : "400 Bad Request";
		snprintf(why.msg, sizeof(why.msg), "%s", h.err.msg[0] ? h.err.msg : strerror(-r));
		note_refusal(cfg, "(a malformed or unsupported request)", r == -ENOTSUP ? "not CONNECT or http://" : "malformed");
		reply(c->fd, status, why.msg);
		return;
	}
	snprintf(dest, sizeof(dest), "%s:%u", h.req.host, h.req.port);
	if ((r = lz_egress_check_name(cfg->policy, &h.req, &why)) < 0) {
		note_refusal(cfg, dest, why.msg);
		reply(c->fd, "403 Forbidden", why.msg);
		return;
	}
	uint32_t addrs[LZ_DNS_MAX_ADDRS];
	size_t n = 0;
	struct lz_err derr = { 0, "" };
	/* A lost datagram is not an answer: the resolvers get a second round. */
	for (int round = 0; round < LZ_EGRESS_DNS_ROUNDS; round++) {
		r = lz_dns_resolve(cfg->resolvers, cfg->n_resolvers, cfg->dns_port, h.req.host, LZ_EGRESS_DNS_MS,
				   addrs, LZ_DNS_MAX_ADDRS, &n, &derr);
		if (r != -ETIMEDOUT)
			break;
	}
	if (r < 0) {
		lz_err_set(&why, EACCES, "does not resolve (%s)", derr.msg[0] ? derr.msg : strerror(-r));
		note_refusal(cfg, dest, why.msg);
		reply(c->fd, "502 Bad Gateway", why.msg);
		return;
	}
	if ((r = lz_egress_check_addrs(cfg->policy, addrs, n, &why)) < 0) {
		note_refusal(cfg, dest, why.msg);
		reply(c->fd, "403 Forbidden", why.msg);
		return;
	}
	/* Only addresses checked above: the name is never resolved again. */
	r = -EHOSTUNREACH;
	for (size_t i = 0; i < n && r < 0; i++)
		r = connect_to(addrs[i], h.req.port, &cfg->limits, &up);
	if (r < 0) {
		/* Not a policy refusal: the destination is down. */
		lz_err_set(&why, -r, "cannot connect: %s", strerror(-r));
		reply(c->fd, "502 Bad Gateway", why.msg);
		return;
	}
	size_t body = got - h.req.head_len;
	if (h.req.kind == LZ_HTTP_FORWARD) {
		size_t len;
		if (lz_http_rewrite_forward(head, h.req.head_len, &h.req, buf, RELAY_BUF, &len) < 0) {
			reply(c->fd, "400 Bad Request", "the request head does not fit");
			return;
		}
		note_allowed(cfg);
		if (!send_all(up, buf, len) || (body > 0 && !send_all(up, head + h.req.head_len, body)))
			return;
		relay(c->fd, up, buf);
		return;
	}
	/* CONNECT: the bytes after the head are the client's first. */
	static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	memmove(head, head + h.req.head_len, body);
	got = body;
	if (!send_all(c->fd, established, sizeof(established) - 1))
		return;
	if ((r = check_first_bytes(c->fd, up, h.req.host, head, &got, &why)) < 0) {
		/* The tunnel was announced: closing it is the refusal. */
		if (r == -EACCES)
			note_refusal(cfg, dest, why.msg);
		return;
	}
	note_allowed(cfg);
	if (got > 0 && !send_all(up, head, got))
		return;
	relay(c->fd, up, buf);
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	serve(c);
	close(c->fd);
	lz_lockslots_give(&proxy.slots, c->slot);
	free(c);
	return NULL;
}

int lz_egress_serve(int listener, const struct lz_egress_config *cfg)
{
	pthread_attr_t attr;
	if (pthread_attr_init(&attr) != 0 || pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) != 0 ||
	    pthread_attr_setstacksize(&attr, 256 * 1024) != 0)
		return -ENOMEM;
	/* Connections accepted from now on inherit the listener's buffers
	 * (the window scale of their SYN): each is capped again below, as
	 * one may have been queued before. */
	const struct lz_egress_limits *lim = &cfg->limits;
	int r = lz_lockslots_init(&proxy.slots, cfg->slots_fd, lim->max_connections);
	if (r < 0)
		return r;
	r = cap_buffers(listener, lim->sandbox_rcvbuf, lim->sandbox_sndbuf);
	if (r < 0)
		return r;
	write_stats(cfg);
	for (;;) {
		int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			/* accept(2): a TCP connection's pending network error
			 * (EPROTO, ENETDOWN, ...) is that connection's, to retry. */
			bool transient = errno == EPROTO || errno == ENETDOWN || errno == ENOPROTOOPT ||
					 errno == EHOSTDOWN || errno == ENONET || errno == EHOSTUNREACH ||
					 errno == EOPNOTSUPP || errno == ENETUNREACH;
			if (transient || errno == EINTR || errno == ECONNABORTED || errno == EMFILE ||
			    errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				if (errno != EINTR && errno != ECONNABORTED && !transient)
					usleep(10 * 1000); /* a host limit: refuse by not accepting for a moment */
				continue;
			}
			return -errno;
		}
		if (cap_buffers(fd, lim->sandbox_rcvbuf, lim->sandbox_sndbuf) < 0) {
			reply(fd, "503 Service Unavailable", "the proxy cannot bound the connection's buffers");
			close(fd);
			continue;
		}
		struct conn *c = malloc(sizeof(*c));
		pthread_t t;
		if (c == NULL) {
			reply(fd, "503 Service Unavailable", "the proxy is out of memory");
			close(fd);
			continue;
		}
		int slot = lz_lockslots_take(&proxy.slots);
		if (slot < 0) {
			char why[160];
			if (slot == -EAGAIN)
				snprintf(why, sizeof(why),
					 "too many connections through the egress proxies on this host: %u at once, %u "
					 "of them this sandbox's",
					 lim->max_connections, lz_lockslots_held(&proxy.slots));
			else
				snprintf(why, sizeof(why), "the proxy cannot count its connection: %s", strerror(-slot));
			note_refusal(cfg, "(connection limit)", why);
			reply(fd, "503 Service Unavailable", why);
			free(c);
			close(fd);
			continue;
		}
		*c = (struct conn){ fd, cfg, slot };
		if (pthread_create(&t, &attr, conn_main, c) != 0) {
			reply(fd, "503 Service Unavailable", "the proxy cannot start a thread");
			lz_lockslots_give(&proxy.slots, slot);
			free(c);
			close(fd);
		}
	}
}
