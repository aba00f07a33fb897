/* The server name a sandbox's TLS ClientHello asks for (spec 3.7).
 *
 * The egress proxy reads the first bytes of a CONNECT tunnel before it
 * opens the upstream connection, so the name the allowlist checks is the
 * name the TLS handshake will present. The bytes are the sandbox's: every
 * length is checked against its container, the handshake may be spread
 * over several records (none empty, none of another type), and the whole
 * ClientHello must lie within the first LZ_TLS_HELLO_MAX bytes of the
 * stream, so the caller needs no larger buffer. Nothing here reads beyond
 * len. */
#ifndef LZ_TLSSNI_H
#define LZ_TLSSNI_H

#include <stddef.h>
#include <stdint.h>

#include "net/egressname.h"
#include "util/err.h"

#define LZ_TLS_HELLO_MAX (5 + 16384)

/* The normalized host_name of the server_name extension into out.
 * -ENOTSUP: not a TLS handshake record (byte 0 != 0x16 or major version !=
 * 3); -EAGAIN: incomplete and len < LZ_TLS_HELLO_MAX; -E2BIG: not complete
 * within LZ_TLS_HELLO_MAX bytes; -EBADMSG: malformed, not a ClientHello,
 * server_name twice, two host_names, or a host_name that is not a valid
 * name; -ENOENT: no server_name (or one without a host_name). out
 * untouched on failure. */
int lz_tls_client_hello_sni(const uint8_t *buf, size_t len, char out[LZ_EGRESS_NAME_MAX + 1], struct lz_err *err);

/* How far the records of a growing ClientHello were taken apart. A
 * sandbox may send its hello a byte per packet (or in records of one
 * byte): walked again from byte 0 after each, a hello of LZ_TLS_HELLO_MAX
 * bytes would cost some 10^8 byte copies of the proxy's time; resumed
 * here, each byte is taken once. Zero-initialized; one per hello. */
struct lz_tls_scan {
	size_t taken;    /* bytes of the stream taken: record headers and handshake bytes */
	size_t rec_left; /* of the current record, bytes still to take; 0: a record header is next */
	size_t hs_len;   /* handshake bytes in hs */
	size_t need;     /* handshake bytes the ClientHello needs (0: not started) */
	size_t examined; /* bytes looked at in all, so that tests can bound the work */
	uint8_t hs[LZ_TLS_HELLO_MAX]; /* the handshake bytes so far, records stripped */
};

/* lz_tls_client_hello_sni for a buffer that grows between calls:
 * buf[0..len) begins with the bytes the previous call with scan was
 * given, and only what follows them is taken apart (the ClientHello is
 * parsed once, when it is complete). Every call answers what
 * lz_tls_client_hello_sni(buf, len) would. After an answer other than
 * -EAGAIN scan is spent; a len shorter than the last restarts it. */
int lz_tls_client_hello_sni_more(const uint8_t *buf, size_t len, struct lz_tls_scan *scan,
				 char out[LZ_EGRESS_NAME_MAX + 1], struct lz_err *err);

#endif
