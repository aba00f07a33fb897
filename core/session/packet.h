/* One SOCK_SEQPACKET datagram with its descriptors (SCM_RIGHTS): the
 * transport under the control socket's TLS (session/tlschan.h).
 *
 * A datagram is sent whole or not at all. Receiving is strict, because the
 * peer is another process: descriptors the kernel installed are all taken
 * before the datagram is judged, so every refusal closes each of them. */
#ifndef LZ_SESSION_PACKET_H
#define LZ_SESSION_PACKET_H

#include <stddef.h>
#include <sys/types.h>

#define LZ_PACKET_MAX_FDS 8u

/* Sends buf[0..len) with fds[0..n_fds) (which stay the caller's),
 * MSG_NOSIGNAL, retried on EINTR; MSG_DONTWAIT with dontwait. Returns 0;
 * -EINVAL for n_fds > LZ_PACKET_MAX_FDS, -EBADF for a negative fd, -EPIPE
 * when the peer is gone, -EAGAIN on a full socket, other -errno. */
int lz_packet_send(int sock, const void *buf, size_t len, const int *fds, size_t n_fds, int dontwait);

/* Receives one datagram into buf[0..cap) and returns its length (> 0);
 * its descriptors (O_CLOEXEC) go to fds[0..*ret_n_fds) only on success.
 *   -EPIPE    orderly end: the peer closed (or sent an empty datagram,
 *             which no valid peer does);
 *   -EBADMSG  a datagram larger than cap, truncated or unexpected
 *             ancillary data (anything but SCM_RIGHTS), or more than
 *             max_fds descriptors;
 *   -EINVAL   max_fds > LZ_PACKET_MAX_FDS;
 *   -EAGAIN   nothing waiting (non-blocking socket, or dontwait);
 *   other -errno from recvmsg (-ECONNRESET: the peer closed with our
 *             datagrams unread). */
ssize_t lz_packet_recv(int sock, void *buf, size_t cap, int *fds, size_t max_fds, size_t *ret_n_fds, int dontwait);

#endif
