/* The request head a sandbox sends to the egress proxy (spec 3.7).
 *
 * Every byte comes from the sandbox, which is the attacker. The parser
 * accepts one narrow dialect and refuses the rest rather than guess:
 * CRLF line ends only (no bare LF or CR), no obs-fold, no control bytes
 * but HTAB in values, header names are tokens, at most 100 fields, at most
 * LZ_HTTP_HEAD_MAX bytes. Two request forms are handled:
 *   CONNECT host:port HTTP/1.x          (tunnel; port required)
 *   METHOD http://host[:port]/p HTTP/1.x (forward; port 80 by default)
 * and everything else (origin-form, "https://" targets, userinfo, IPv6
 * literals, '%' in the host) is -ENOTSUP. The host is a normalized name
 * (net/egressname.h) or a strict dotted-quad IPv4 literal. A Host header
 * naming another host or port than the target is -EPROTO, so the host the
 * allowlist checks is the one the upstream sees; Content-Length together
 * with Transfer-Encoding, or two Content-Length fields, is -EINVAL
 * (request smuggling). Nothing here reads beyond len. */
#ifndef LZ_HTTPHEAD_H
#define LZ_HTTPHEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/egressname.h"
#include "util/err.h"

#define LZ_HTTP_HEAD_MAX 16384

enum lz_http_kind { LZ_HTTP_CONNECT, LZ_HTTP_FORWARD };

struct lz_http_request {
	enum lz_http_kind kind;
	char host[LZ_EGRESS_NAME_MAX + 1]; /* normalized name, or the IPv4 literal */
	uint16_t port;
	size_t head_len; /* bytes up to and including the final CRLFCRLF */
	bool host_is_ipv4;
	uint32_t ipv4; /* host byte order, when host_is_ipv4 */
};

/* Parses the head at the start of buf[0..len). -EAGAIN: incomplete and
 * len < LZ_HTTP_HEAD_MAX; -E2BIG: no end within LZ_HTTP_HEAD_MAX bytes or
 * more than 100 fields; -EINVAL: malformed; -ENOTSUP: a form not handled;
 * -EPROTO: Host header disagrees with the target. ret untouched on
 * failure. */
int lz_http_parse_head(const uint8_t *buf, size_t len, struct lz_http_request *ret, struct lz_err *err);

/* Where the search for the end of a growing head stopped. A sandbox may
 * send its head a byte per packet: parsed again from byte 0 after each,
 * a head of LZ_HTTP_HEAD_MAX bytes would cost some 10^8 byte looks of the
 * proxy's time; resumed here, each byte is looked at once or twice.
 * Zero-initialized; one per head. */
struct lz_http_scan {
	size_t scanned;  /* bytes before it hold no end of head and no bare CR or LF */
	size_t examined; /* bytes looked at in all, so that tests can bound the work */
};

/* lz_http_parse_head for a buffer that grows between calls: buf[0..len)
 * begins with the bytes the previous call with scan was given, and only
 * what follows them is searched for the end of the head (the head itself
 * is parsed once, when its end is found). Every call answers what
 * lz_http_parse_head(buf, len) would. After an answer other than -EAGAIN
 * scan is spent; a len shorter than the last restarts the search. */
int lz_http_parse_head_more(const uint8_t *buf, size_t len, struct lz_http_scan *scan, struct lz_http_request *ret,
			    struct lz_err *err);

/* The forward request head[0..head_len) as the upstream gets it: request
 * line in origin-form, Proxy-Connection, Proxy-Authorization, Connection,
 * Keep-Alive, TE, Upgrade and Host dropped, "Host: host[:port]" (port when
 * not 80) first, "Connection: close" last. req is what lz_http_parse_head
 * returned for head (-EINVAL if it is not, or is a CONNECT); -EMSGSIZE
 * when out[0..cap) is too small (out's contents then unspecified).
 * *ret_len untouched on failure. */
int lz_http_rewrite_forward(const uint8_t *head, size_t head_len, const struct lz_http_request *req, uint8_t *out,
			    size_t cap, size_t *ret_len);

#endif
