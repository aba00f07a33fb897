#include "session/packet.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

#include "util/cleanup.h"

#ifndef SCM_PIDFD
#define SCM_PIDFD 0x04 /* Linux 6.5; carries a pidfd the receiver must close */
#endif

union cmsg_space {
	struct cmsghdr align;
	char buf[CMSG_SPACE(sizeof(int) * LZ_PACKET_MAX_FDS)];
};

int lz_packet_send(int sock, const void *buf, size_t len, const int *fds, size_t n_fds, int dontwait)
{
	if (n_fds > LZ_PACKET_MAX_FDS)
		return -EINVAL;
	for (size_t i = 0; i < n_fds; i++)
		if (fds[i] < 0)
			return -EBADF;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	union cmsg_space ctl;
	if (n_fds > 0) {
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
	}
	ssize_t n;
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL | (dontwait ? MSG_DONTWAIT : 0));
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

static void close_all(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		lz_close_fdp(&fds[i]);
}

ssize_t lz_packet_recv(int sock, void *buf, size_t cap, int *fds, size_t max_fds, size_t *ret_n_fds, int dontwait)
{
	if (max_fds > LZ_PACKET_MAX_FDS)
		return -EINVAL;
	union cmsg_space ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			     .msg_controllen = sizeof(ctl.buf) };
	ssize_t n;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | (dontwait ? MSG_DONTWAIT : 0));
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;

	int got[LZ_PACKET_MAX_FDS];
	size_t n_got = 0;
	bool bad = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		bool rights = c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS;
		bool pidfd = c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_PIDFD;
		if (!rights)
			bad = true;
		if ((!rights && !pidfd) || c->cmsg_len < CMSG_LEN(0))
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (rights && n_got < LZ_PACKET_MAX_FDS) {
				got[n_got++] = fd;
			} else {
				lz_close_fdp(&fd);
				bad = true;
			}
		}
	}
	if (n_got > max_fds)
		bad = true;
	if (bad) {
		close_all(got, n_got);
		return -EBADMSG;
	}
	if (n == 0) {
		close_all(got, n_got);
		return -EPIPE;
	}
	if (n_got > 0)
		memcpy(fds, got, n_got * sizeof(int));
	*ret_n_fds = n_got;
	return n;
}
