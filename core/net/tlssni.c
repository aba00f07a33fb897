#include "net/tlssni.h"

#include <errno.h>
#include <string.h>

#define RECORD_HEADER 5
#define RECORD_MAX 16384
#define HS_HEADER 4
#define HS_CLIENT_HELLO 1
#define EXT_SERVER_NAME 0
#define NAME_TYPE_HOST 0

/* A bounds-checked reader over one container. */
struct rd {
	const uint8_t *p;
	size_t n;
};

static bool take(struct rd *r, size_t n, struct rd *ret)
{
	if (n > r->n)
		return false;
	if (ret) {
		ret->p = r->p;
		ret->n = n;
	}
	r->p += n;
	r->n -= n;
	return true;
}

static bool u8(struct rd *r, size_t *ret)
{
	if (r->n < 1)
		return false;
	*ret = r->p[0];
	return take(r, 1, NULL);
}

static bool u16(struct rd *r, size_t *ret)
{
	if (r->n < 2)
		return false;
	*ret = (size_t)r->p[0] << 8 | r->p[1];
	return take(r, 2, NULL);
}

/* A vector with a 1- or 2-byte length prefix, which must fit r. */
static bool vec(struct rd *r, int width, struct rd *ret)
{
	size_t n;
	return (width == 1 ? u8(r, &n) : u16(r, &n)) && take(r, n, ret);
}

static int parse_sni(struct rd ext, char out[LZ_EGRESS_NAME_MAX + 1], bool *found, struct lz_err *err)
{
	struct rd list;
	if (!vec(&ext, 2, &list) || ext.n != 0 || list.n == 0)
		return lz_err_set(err, EBADMSG, "ClientHello: malformed server_name list");
	while (list.n > 0) {
		size_t type;
		struct rd name;
		if (!u8(&list, &type) || !vec(&list, 2, &name) || name.n == 0)
			return lz_err_set(err, EBADMSG, "ClientHello: malformed server_name entry");
		if (type != NAME_TYPE_HOST)
			continue;
		if (*found)
			return lz_err_set(err, EBADMSG, "ClientHello: two host_names in server_name");
		*found = true;
		struct lz_err why = { 0, "" };
		if (lz_egress_name_normalize((const char *)name.p, name.n, out, &why) < 0)
			return lz_err_set(err, EBADMSG, "ClientHello server_name: %s", why.msg);
	}
	return 0;
}

static int parse_hello(struct rd body, char out[LZ_EGRESS_NAME_MAX + 1], struct lz_err *err)
{
	struct rd skip, ext_block;
	size_t n;
	bool found = false, seen = false;

	if (!take(&body, 2 + 32, NULL) || !vec(&body, 1, &skip) || skip.n > 32)
		return lz_err_set(err, EBADMSG, "ClientHello: malformed version, random or session id");
	if (!vec(&body, 2, &skip) || skip.n < 2 || skip.n % 2 != 0)
		return lz_err_set(err, EBADMSG, "ClientHello: malformed cipher suites");
	if (!vec(&body, 1, &skip) || skip.n < 1)
		return lz_err_set(err, EBADMSG, "ClientHello: malformed compression methods");
	if (body.n == 0)
		return lz_err_set(err, ENOENT, "ClientHello without extensions");
	if (!vec(&body, 2, &ext_block) || body.n != 0)
		return lz_err_set(err, EBADMSG, "ClientHello: extensions do not fill the message");
	while (ext_block.n > 0) {
		struct rd ext;
		if (!u16(&ext_block, &n) || !vec(&ext_block, 2, &ext))
			return lz_err_set(err, EBADMSG, "ClientHello: malformed extension");
		if (n != EXT_SERVER_NAME)
			continue;
		if (seen)
			return lz_err_set(err, EBADMSG, "ClientHello: server_name extension twice");
		seen = true;
		int r = parse_sni(ext, out, &found, err);
		if (r < 0)
			return r;
	}
	if (!found)
		return lz_err_set(err, ENOENT, seen ? "ClientHello: server_name without a host_name"
						   : "ClientHello without server_name");
	return 0;
}

static int incomplete(size_t len, struct lz_err *err)
{
	if (len >= LZ_TLS_HELLO_MAX)
		return lz_err_set(err, E2BIG, "no complete ClientHello within %d bytes", LZ_TLS_HELLO_MAX);
	return -EAGAIN;
}

/* The records are taken apart where the last call stopped: a record
 * header once it is whole, a record's bytes as they come (the checks on
 * the handshake header see the same bytes, in the same order, as a walk
 * from byte 0 would). The record that completes the ClientHello must be
 * complete itself: a call that finds the hello whole but its record not
 * goes on taking that record's bytes. */
int lz_tls_client_hello_sni_more(const uint8_t *buf, size_t len, struct lz_tls_scan *s,
				 char out[LZ_EGRESS_NAME_MAX + 1], struct lz_err *err)
{
	size_t lim = len < LZ_TLS_HELLO_MAX ? len : LZ_TLS_HELLO_MAX;
	char name[LZ_EGRESS_NAME_MAX + 1];

	/* Any TLS record type counts as TLS (change_cipher_spec to
	 * heartbeat): a server may take an alert before the ClientHello, whose
	 * name must still be checked, so anything but the hello first is
	 * refused, never relayed as "not TLS". So is an SSLv2-format hello
	 * (length with the high bit, then type 1): it carries no name. */
	bool record = len >= 1 && buf[0] >= 0x14 && buf[0] <= 0x18;
	if (len >= 1 && (buf[0] & 0x80)) {
		if (len < 3)
			return -EAGAIN;
		if (buf[2] == 1)
			return lz_err_set(err, ENOENT, "an SSLv2-format ClientHello names no server");
	}
	if (len >= 1 && !record)
		return lz_err_set(err, ENOTSUP, "not a TLS record");
	/* A record type with another version byte is still TLS to a server
	 * that reads it (Go's crypto/tls takes any below 0x10): refused, never
	 * relayed unchecked as "not TLS" (found by review). */
	if (len >= 2 && record && buf[1] != 3)
		return lz_err_set(err, EBADMSG, "a TLS record of version %u.x", buf[1]);
	if (len >= 2 && buf[0] != 0x16)
		return lz_err_set(err, EBADMSG, "a TLS record of type %u before the ClientHello", buf[0]);
	if (s->need == 0 || s->taken > lim) {
		s->taken = s->rec_left = s->hs_len = 0;
		s->need = HS_HEADER;
	}
	while (s->hs_len < s->need || s->rec_left > 0) {
		if (s->rec_left == 0) {
			if (lim - s->taken < RECORD_HEADER)
				return incomplete(len, err);
			const uint8_t *h = buf + s->taken;
			s->examined += RECORD_HEADER;
			if (h[0] != 0x16 || h[1] != 3)
				return lz_err_set(err, EBADMSG, "ClientHello interrupted by a record that is not handshake");
			size_t rlen = (size_t)h[3] << 8 | h[4];
			if (rlen == 0 || rlen > RECORD_MAX)
				return lz_err_set(err, EBADMSG, "TLS record length %zu out of 1..%d", rlen, RECORD_MAX);
			s->taken += RECORD_HEADER;
			s->rec_left = rlen;
		}
		size_t avail = lim - s->taken < s->rec_left ? lim - s->taken : s->rec_left;
		memcpy(s->hs + s->hs_len, buf + s->taken, avail);
		s->examined += avail;
		s->hs_len += avail;
		s->taken += avail;
		s->rec_left -= avail;
		if (s->hs_len >= 1 && s->hs[0] != HS_CLIENT_HELLO)
			return lz_err_set(err, EBADMSG, "first handshake message is not a ClientHello");
		if (s->hs_len >= HS_HEADER && s->need == HS_HEADER) {
			s->need += (size_t)s->hs[1] << 16 | (size_t)s->hs[2] << 8 | s->hs[3];
			/* The record headers still to come take room as well. */
			if (s->need > LZ_TLS_HELLO_MAX - RECORD_HEADER)
				return lz_err_set(err, E2BIG, "ClientHello longer than %d bytes", LZ_TLS_HELLO_MAX);
		}
		if (s->rec_left > 0)
			return incomplete(len, err);
	}
	struct rd body = { s->hs + HS_HEADER, s->need - HS_HEADER };
	int r = parse_hello(body, name, err);
	if (r < 0)
		return r;
	memcpy(out, name, strlen(name) + 1);
	return 0;
}

int lz_tls_client_hello_sni(const uint8_t *buf, size_t len, char out[LZ_EGRESS_NAME_MAX + 1], struct lz_err *err)
{
	/* Not zero-initialized whole: hs is written before it is read. */
	struct lz_tls_scan scan;
	scan.taken = scan.rec_left = scan.hs_len = scan.need = scan.examined = 0;
	return lz_tls_client_hello_sni_more(buf, len, &scan, out, err);
}
