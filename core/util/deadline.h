/* The monotonic clock, deadlines on it, and the socket steps that wait by
 * one; header-only, for code that links nothing else too (the static
 * lazaret-init's canary probe). */
#ifndef LZ_UTIL_DEADLINE_H
#define LZ_UTIL_DEADLINE_H

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

/* The process's one monotonic clock (CLOCK_MONOTONIC) in micro- and
 * milliseconds, and what is left until a deadline on it (>= 0). */
static inline int64_t lz_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline int64_t lz_now_ms(void)
{
	return lz_now_us() / 1000;
}

static inline int lz_remaining_ms(int64_t deadline)
{
	int64_t left = deadline - lz_now_ms();
	return left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
}

/* Waits for events on fd until deadline (lz_now_ms): 0 when one came,
 * -ETIMEDOUT, or -errno of poll. */
static inline int lz_wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		int left = lz_remaining_ms(deadline);
		if (left == 0)
			return -ETIMEDOUT;
		struct pollfd p = { .fd = fd, .events = events };
		int r = poll(&p, 1, left);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

/* Connects the non-blocking socket fd to sa by deadline: 0, -ETIMEDOUT,
 * or -errno of the connection (its SO_ERROR). */
static inline int lz_connect_by(int fd, const struct sockaddr *sa, socklen_t len, int64_t deadline)
{
	if (connect(fd, sa, len) == 0)
		return 0;
	if (errno != EINPROGRESS)
		return -errno;
	int r = lz_wait_fd(fd, POLLOUT, deadline), so = 0;
	socklen_t so_len = sizeof(so);
	if (r < 0)
		return r;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &so_len) < 0)
		return -errno;
	return -so;
}

/* Moves exactly len bytes to (out) or from the non-blocking stream fd by
 * deadline: 0, -ETIMEDOUT, -errno, or -EPROTO when the peer ended its
 * stream before len bytes came. */
static inline int lz_stream_by(int fd, bool out, void *buf, size_t len, int64_t deadline)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = out ? send(fd, (char *)buf + done, len - done, MSG_NOSIGNAL)
				: recv(fd, (char *)buf + done, len - done, 0);
		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n == 0 && !out)
			return -EPROTO;
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		int r = lz_wait_fd(fd, out ? POLLOUT : POLLIN, deadline);
		if (r < 0)
			return r;
	}
	return 0;
}

#endif
