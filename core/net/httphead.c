#include "net/httphead.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "net/netprefix.h"

#define FIELDS_MAX 100

/* Where the parts of the request line are, for the rewrite. */
struct layout {
	size_t method_len;
	size_t path_off, path_len; /* after the authority: "", "/...", "?..." */
	size_t version_off;        /* "HTTP/1.x", 8 bytes */
	size_t first_field;        /* offset of the line after the request line */
};

static bool is_tchar(uint8_t c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static uint8_t lower(uint8_t c)
{
	return c >= 'A' && c <= 'Z' ? (uint8_t)(c - 'A' + 'a') : c;
}

static bool name_is(const uint8_t *s, size_t n, const char *name)
{
	if (strlen(name) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (lower(s[i]) != lower((uint8_t)name[i]))
			return false;
	return true;
}

static bool has_byte(const uint8_t *s, size_t n, uint8_t c)
{
	return n > 0 && memchr(s, c, n) != NULL;
}

/* Strict dotted quad through the network policy's own parser. */
static bool parse_ipv4(const uint8_t *s, size_t n, uint32_t *ret)
{
	return lz_ipv4_parse((const char *)s, n, ret) == 0;
}

/* Decimal 1..65535 without leading zeros. */
static bool parse_port(const uint8_t *s, size_t n, uint16_t *ret)
{
	unsigned v = 0;
	if (n == 0 || n > 5 || s[0] == '0')
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > 65535)
		return false;
	*ret = (uint16_t)v;
	return true;
}

/* "host[:port]" into r's host fields and port; default_port 0 means the
 * port is required. */
static int parse_authority(const uint8_t *s, size_t n, uint16_t default_port, struct lz_http_request *r,
			   struct lz_err *err)
{
	if (has_byte(s, n, '@'))
		return lz_err_set(err, ENOTSUP, "userinfo in the request target is not supported");
	if (n > 0 && s[0] == '[')
		return lz_err_set(err, ENOTSUP, "IPv6 literal hosts are not supported");
	const uint8_t *colon = n > 0 ? memchr(s, ':', n) : NULL;
	size_t host_len = colon ? (size_t)(colon - s) : n;
	if (has_byte(s, host_len, '%'))
		return lz_err_set(err, ENOTSUP, "percent-encoding in the host is not supported");
	if (host_len == 0)
		return lz_err_set(err, EINVAL, "empty host");
	if (colon) {
		if (!parse_port(colon + 1, n - host_len - 1, &r->port))
			return lz_err_set(err, EINVAL, "port is not a decimal 1..65535");
	} else if (default_port == 0) {
		return lz_err_set(err, EINVAL, "CONNECT target needs a port");
	} else {
		r->port = default_port;
	}
	if (parse_ipv4(s, host_len, &r->ipv4)) {
		r->host_is_ipv4 = true;
		memcpy(r->host, s, host_len);
		r->host[host_len] = '\0';
		return 0;
	}
	r->host_is_ipv4 = false;
	r->ipv4 = 0;
	int ret = lz_egress_name_normalize((const char *)s, host_len, r->host, err);
	return ret < 0 ? lz_err_prefix(err, ret, "request target: ") : 0;
}

static int parse_request_line(const uint8_t *s, size_t n, struct lz_http_request *r, struct layout *lay,
			      struct lz_err *err)
{
	size_t i = 0;
	while (i < n && is_tchar(s[i]))
		i++;
	if (i == 0 || i == n || s[i] != ' ')
		return lz_err_set(err, EINVAL, "request line: method is not a token followed by one space");
	lay->method_len = i;
	size_t t = ++i;
	while (i < n && s[i] > 0x20 && s[i] < 0x7f)
		i++;
	if (i == t || i == n || s[i] != ' ')
		return lz_err_set(err, EINVAL, "request line: target is not visible ASCII followed by one space");
	const uint8_t *target = s + t;
	size_t tlen = i - t;
	lay->version_off = ++i;
	const uint8_t *v = s + i;
	if (n - i != 8 || memcmp(v, "HTTP/", 5) != 0 || v[5] < '0' || v[5] > '9' || v[6] != '.' || v[7] < '0' ||
	    v[7] > '9')
		return lz_err_set(err, EINVAL, "request line: malformed HTTP version");
	if (v[5] != '1' || v[7] > '1')
		return lz_err_set(err, ENOTSUP, "HTTP version %c.%c is not supported", v[5], v[7]);
	if (has_byte(target, tlen, '#'))
		return lz_err_set(err, EINVAL, "request target has a fragment");

	if (lay->method_len == 7 && memcmp(s, "CONNECT", 7) == 0) {
		r->kind = LZ_HTTP_CONNECT;
		lay->path_off = lay->path_len = 0;
		return parse_authority(target, tlen, 0, r, err);
	}
	r->kind = LZ_HTTP_FORWARD;
	if (tlen < 7 || !name_is(target, 7, "http://"))
		return lz_err_set(err, ENOTSUP, "only absolute-form http:// targets (and CONNECT) are supported");
	size_t a = 7;
	while (a < tlen && target[a] != '/' && target[a] != '?')
		a++;
	lay->path_off = t + a;
	lay->path_len = tlen - a;
	return parse_authority(target + 7, a - 7, 80, r, err);
}

/* The Host field value (OWS trimmed) names the target's host and port. */
static bool host_matches(const uint8_t *s, size_t n, const struct lz_http_request *r)
{
	struct lz_http_request h;
	/* A CONNECT's Host never reaches an upstream: no port means its port. */
	if (parse_authority(s, n, r->kind == LZ_HTTP_CONNECT ? r->port : 80, &h, NULL) < 0)
		return false;
	return h.port == r->port && h.host_is_ipv4 == r->host_is_ipv4 &&
	       (h.host_is_ipv4 ? h.ipv4 == r->ipv4 : strcmp(h.host, r->host) == 0);
}

/* Finds the end of the head; refuses bare CR or LF as soon as seen. The
 * search starts where scan's last one stopped: before that every CR was
 * followed by its LF and no CRLF followed another, and it never stops
 * between a CR and its LF (a CR that is the last byte so far is looked
 * at again, with its LF). A head's end is found with the two bytes
 * before it, which lie behind the restart and are still in buf. */
static int find_end(const uint8_t *buf, size_t len, struct lz_http_scan *scan, size_t *ret_end, struct lz_err *err)
{
	size_t lim = len < LZ_HTTP_HEAD_MAX ? len : LZ_HTTP_HEAD_MAX;
	size_t i = scan->scanned <= lim ? scan->scanned : 0;
	for (; i < lim; i++) {
		scan->examined++;
		if (buf[i] == '\n')
			return lz_err_set(err, EINVAL, "bare LF at byte %zu", i);
		if (buf[i] != '\r')
			continue;
		if (i + 1 == lim)
			break;
		scan->examined++;
		if (buf[i + 1] != '\n')
			return lz_err_set(err, EINVAL, "bare CR at byte %zu", i);
		if (i >= 2 && buf[i - 2] == '\r' && buf[i - 1] == '\n') {
			*ret_end = i + 2;
			return 0;
		}
		i++;
	}
	scan->scanned = i;
	if (len >= LZ_HTTP_HEAD_MAX)
		return lz_err_set(err, E2BIG, "no end of head within %d bytes", LZ_HTTP_HEAD_MAX);
	return -EAGAIN;
}

static int parse(const uint8_t *buf, size_t len, struct lz_http_scan *scan, struct lz_http_request *r,
		 struct layout *lay, struct lz_err *err)
{
	size_t end = 0;
	int ret = find_end(buf, len, scan, &end, err);
	if (ret < 0)
		return ret;
	memset(r, 0, sizeof(*r));
	r->head_len = end;
	const uint8_t *eol = memchr(buf, '\r', end);
	ret = parse_request_line(buf, (size_t)(eol - buf), r, lay, err);
	if (ret < 0)
		return ret;

	/* Every line ends in CRLF (find_end); the last, empty one ends the head. */
	size_t fields = 0, n_host = 0, n_length = 0, n_te = 0;
	lay->first_field = (size_t)(eol - buf) + 2;
	for (size_t p = lay->first_field; p < end - 2;) {
		const uint8_t *line = buf + p;
		size_t n = (size_t)((const uint8_t *)memchr(line, '\r', end - p) - line);
		p += n + 2;
		if (++fields > FIELDS_MAX)
			return lz_err_set(err, E2BIG, "more than %d header fields", FIELDS_MAX);
		if (line[0] == ' ' || line[0] == '\t')
			return lz_err_set(err, EINVAL, "obsolete line folding in the header");
		size_t k = 0;
		while (k < n && is_tchar(line[k]))
			k++;
		if (k == 0 || k == n || line[k] != ':')
			return lz_err_set(err, EINVAL, "header field name is not a token followed by ':'");
		size_t v = k + 1, w = n;
		for (size_t j = v; j < n; j++)
			if ((line[j] < 0x20 && line[j] != '\t') || line[j] == 0x7f)
				return lz_err_set(err, EINVAL, "control byte 0x%02x in header field '%.*s'", line[j],
						  (int)k, (const char *)line);
		while (v < w && (line[v] == ' ' || line[v] == '\t'))
			v++;
		while (w > v && (line[w - 1] == ' ' || line[w - 1] == '\t'))
			w--;
		if (name_is(line, k, "Host")) {
			if (++n_host > 1)
				return lz_err_set(err, EINVAL, "more than one Host header");
			if (!host_matches(line + v, w - v, r))
				return lz_err_set(err, EPROTO, "Host header '%.*s' is not the target %s:%u",
						  (int)(w - v > 300 ? 300 : w - v), (const char *)line + v, r->host,
						  r->port);
		} else if (name_is(line, k, "Content-Length")) {
			if (++n_length > 1)
				return lz_err_set(err, EINVAL, "more than one Content-Length header");
			if (v == w)
				return lz_err_set(err, EINVAL, "empty Content-Length");
			for (size_t j = v; j < w; j++)
				if (line[j] < '0' || line[j] > '9')
					return lz_err_set(err, EINVAL, "Content-Length is not decimal");
		} else if (name_is(line, k, "Transfer-Encoding")) {
			n_te++;
		}
	}
	if (n_length > 0 && n_te > 0)
		return lz_err_set(err, EINVAL, "Content-Length together with Transfer-Encoding");
	return 0;
}

int lz_http_parse_head_more(const uint8_t *buf, size_t len, struct lz_http_scan *scan, struct lz_http_request *ret,
			    struct lz_err *err)
{
	struct lz_http_request r;
	struct layout lay;
	int rc = parse(buf, len, scan, &r, &lay, err);
	if (rc < 0)
		return rc;
	*ret = r;
	return 0;
}

int lz_http_parse_head(const uint8_t *buf, size_t len, struct lz_http_request *ret, struct lz_err *err)
{
	struct lz_http_scan scan = { 0, 0 };
	return lz_http_parse_head_more(buf, len, &scan, ret, err);
}

struct sink {
	uint8_t *p;
	size_t cap, n;
};

static void put(struct sink *s, const void *data, size_t n)
{
	if (s->n <= s->cap && n <= s->cap - s->n)
		memcpy(s->p + s->n, data, n);
	s->n = s->n + n < s->n ? SIZE_MAX : s->n + n;
}

static void put_str(struct sink *s, const char *str)
{
	put(s, str, strlen(str));
}

static bool hop_by_hop(const uint8_t *line, size_t k)
{
	static const char *const drop[] = {
		"Proxy-Connection", "Proxy-Authorization", "Connection", "Keep-Alive", "TE", "Upgrade", "Host",
	};
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		if (name_is(line, k, drop[i]))
			return true;
	return false;
}

int lz_http_rewrite_forward(const uint8_t *head, size_t head_len, const struct lz_http_request *req, uint8_t *out,
			    size_t cap, size_t *ret_len)
{
	struct lz_http_request r;
	struct layout lay;
	struct lz_http_scan scan = { 0, 0 };
	if (req->kind != LZ_HTTP_FORWARD)
		return -EINVAL;
	if (parse(head, head_len, &scan, &r, &lay, NULL) < 0 || r.head_len != head_len || r.kind != req->kind ||
	    r.port != req->port || r.host_is_ipv4 != req->host_is_ipv4 || r.ipv4 != req->ipv4 ||
	    strcmp(r.host, req->host) != 0)
		return -EINVAL;

	struct sink s = { out, cap, 0 };
	put(&s, head, lay.method_len);
	put_str(&s, " ");
	if (lay.path_len == 0 || head[lay.path_off] == '?')
		put_str(&s, "/");
	put(&s, head + lay.path_off, lay.path_len);
	put_str(&s, " ");
	put(&s, head + lay.version_off, 8);
	put_str(&s, "\r\nHost: ");
	put_str(&s, r.host);
	if (r.port != 80) {
		char port[8];
		snprintf(port, sizeof(port), ":%u", r.port);
		put_str(&s, port);
	}
	put_str(&s, "\r\n");
	for (size_t p = lay.first_field; p < head_len - 2;) {
		const uint8_t *line = head + p;
		size_t n = (size_t)((const uint8_t *)memchr(line, '\r', head_len - p) - line);
		p += n + 2;
		size_t k = (size_t)((const uint8_t *)memchr(line, ':', n) - line);
		if (!hop_by_hop(line, k))
			put(&s, line, n + 2);
	}
	put_str(&s, "Connection: close\r\n\r\n");
	if (s.n > cap)
		return -EMSGSIZE;
	*ret_len = s.n;
	return 0;
}
