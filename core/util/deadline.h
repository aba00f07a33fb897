/* Monotonic deadlines for code that links nothing else (the static
 * lazaret-init's canary probe among it): header-only. */
#ifndef LZ_UTIL_DEADLINE_H
#define LZ_UTIL_DEADLINE_H

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in milliseconds. */
static inline int64_t lz_clock_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for events on fd until deadline (lz_clock_ms): 0 when one came,
 * -ETIMEDOUT, or -errno of poll. */
static inline int lz_wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - lz_clock_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = { .fd = fd, .events = events };
		int r = poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

#endif
