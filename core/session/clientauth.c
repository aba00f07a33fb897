/* The Client CLI's control-socket TLS: see clientauth.h. */
#include "session/clientauth.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "crypto/sigkey.h"
#include "crypto/x509ca.h"
#include "runtime/rundir.h"
#include "session/enroll.h"
#include "session/pin.h"
#include "util/cleanup.h"

int lz_clientauth_connect(const struct lz_path *runtime_domain, int *ret_fd)
{
	struct sockaddr_un addr;
	if (lz_rundir_socket_addr(runtime_domain, &addr) < 0)
		return -ENAMETOOLONG;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	*ret_fd = fd;
	return 0;
}

/* The coordinator went away (or was never the pinned one's): a reason to
 * try again, since nothing was asked of it yet. */
static bool gone(int r)
{
	return r == -EPIPE || r == -ECONNRESET || r == -ENOENT || r == -ECONNREFUSED;
}

/* The handshake, and the coordinator's leaf is exactly the pinned one. */
static int handshake(struct lz_tlschan *ch, const struct lz_pin *pin, struct lz_err *err)
{
	int r = lz_tlschan_handshake(ch, LZ_CLIENTAUTH_HANDSHAKE_MS, err);
	if (r < 0)
		return gone(r) ? -EAGAIN : lz_err_prefix(err, r, "the Host Coordinator's TLS: ");
	uint8_t *der = NULL;
	size_t len = 0;
	if ((r = lz_tlschan_peer_cert(ch, &der, &len, err)) < 0)
		return r;
	bool pinned = der != NULL && len == pin->leaf_len && memcmp(der, pin->leaf, len) == 0;
	free(der);
	return pinned ? 0 : lz_err_set(err, EPERM, "the Host Coordinator's certificate is not the pinned one");
}

/* One enrollment: the CSR out, the leaf (or the refusal) back. */
static int enroll(int fd, const struct lz_pin *pin, const struct lz_sigkey *key, const uint8_t domain_id[32],
		  const uint8_t fingerprint[32], uint8_t **ret_leaf, size_t *ret_leaf_len, struct lz_err *err)
{
	struct lz_tlschan_cred cred = { .ca_der = pin->ca, .ca_len = pin->ca_len };
	struct lz_tlschan *ch = NULL;
	_cleanup_free_ uint8_t *csr = NULL;
	_cleanup_free_ uint8_t *buf = malloc(LZ_TLSCHAN_RECORD_MAX);
	size_t csr_len = 0, len = 0, n_fds = 0;
	int r;
	if (buf == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	if ((r = lz_tlschan_new(fd, false, &cred, &ch, err)) < 0)
		return r;
	struct lz_enroll e = { 0 };
	memcpy(e.domain_id, domain_id, 32);
	memcpy(e.fingerprint, fingerprint, 32);
	if ((r = handshake(ch, pin, err)) < 0 || (r = lz_x509_csr_new(key, &csr, &csr_len, err)) < 0)
		goto out;
	e.csr = csr;
	e.csr_len = csr_len;
	if ((r = lz_enroll_encode(&e, buf, LZ_ENROLL_MAX, &len)) < 0) {
		r = lz_err_set(err, -r, "encode the enrollment");
		goto out;
	}
	if ((r = lz_tlschan_send(ch, buf, len, NULL, 0, LZ_CLIENTAUTH_HANDSHAKE_MS, err)) < 0) {
		r = gone(r) ? -EAGAIN : r;
		goto out;
	}
	ssize_t n = lz_tlschan_recv(ch, buf, LZ_TLSCHAN_RECORD_MAX, NULL, 0, &n_fds, err);
	struct lz_enroll_answer a;
	if (n < 0) {
		r = gone((int)n) ? -EAGAIN : (int)n;
	} else if (lz_enroll_answer_decode(buf, (size_t)n, &a) < 0) {
		r = lz_err_set(err, EPROTO, "a malformed enrollment answer from the Host Coordinator");
	} else if (!a.issued) {
		r = lz_err_set(err, (int)a.code, "%.*s", (int)a.message_len, a.message);
	} else if ((*ret_leaf = malloc(a.cert_len)) == NULL) {
		r = lz_err_set(err, ENOMEM, "out of memory");
	} else {
		memcpy(*ret_leaf, a.cert, a.cert_len);
		*ret_leaf_len = a.cert_len;
		r = 0;
	}
out:
	lz_tlschan_free(ch);
	return r;
}

int lz_clientauth_open(const struct lz_path *runtime_domain, int enroll_fd, const uint8_t domain_id[32],
		       const uint8_t fingerprint[32], int *ret_fd, struct lz_tlschan **ret_ch, struct lz_err *err)
{
	_cleanup_close_ int first = enroll_fd, fd = -EBADF;
	_cleanup_free_ uint8_t *pin_buf = NULL, *leaf = NULL;
	struct lz_pin pin;
	struct lz_sigkey *key = NULL;
	struct lz_tlschan *ch = NULL;
	size_t leaf_len = 0;
	int r = lz_pin_read(runtime_domain->fd, domain_id, &pin_buf, &pin, err);
	if (r == -ENOENT)
		return -EAGAIN; /* publication withdrawn since we connected */
	if (r < 0)
		return r;
	if (lz_sigkey_generate(&key) < 0)
		return lz_err_set(err, EIO, "make the client's key");
	if ((r = enroll(first, &pin, key, domain_id, fingerprint, &leaf, &leaf_len, err)) < 0)
		goto out;
	lz_close_fdp(&first);
	if ((r = lz_clientauth_connect(runtime_domain, &fd)) < 0) {
		r = gone(r) ? -EAGAIN : lz_err_set(err, -r, "connect to the Host Coordinator: %s", strerror(-r));
		goto out;
	}
	struct lz_tlschan_cred cred = { pin.ca, pin.ca_len, leaf, leaf_len, key };
	if ((r = lz_tlschan_new(fd, false, &cred, &ch, err)) < 0 || (r = handshake(ch, &pin, err)) < 0)
		goto out;
	*ret_fd = TAKE_FD(fd);
	*ret_ch = ch;
	ch = NULL;
out:
	lz_tlschan_free(ch);
	lz_sigkey_free(key); /* OpenSSL holds its own copy in ch's context */
	return r;
}
