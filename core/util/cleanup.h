/* Scope-bound cleanup helpers (bubblewrap/systemd style).
 *
 * Variables holding an owned resource start at NULL or -EBADF and are
 * released when they leave scope. Ownership leaves a scope only through
 * TAKE_FD / TAKE_PTR, which reset the variable so the cleanup is a no-op. */
#ifndef LZ_UTIL_CLEANUP_H
#define LZ_UTIL_CLEANUP_H

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

/* Never retry close on EINTR: on Linux the descriptor is gone either way. */
static inline void lz_close_fdp(int *fdp)
{
	if (*fdp >= 0) {
		int saved = errno;
		close(*fdp);
		errno = saved;
	}
	*fdp = -EBADF;
}

static inline void lz_freep(void *p)
{
	free(*(void **)p);
	*(void **)p = NULL;
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_close_ _cleanup_(lz_close_fdp)
#define _cleanup_free_ _cleanup_(lz_freep)

#define TAKE_FD(fd)                 \
	({                          \
		int _fd_ = (fd);    \
		(fd) = -EBADF;      \
		_fd_;               \
	})

#define TAKE_PTR(p)                         \
	({                                  \
		__typeof__(p) _p_ = (p);    \
		(p) = NULL;                 \
		_p_;                        \
	})

#define LZ_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
