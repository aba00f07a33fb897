/* Slots shared through record locks (lockslots.h). */
#include "proc/lockslots.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

static int lock_byte(int fd, unsigned i, short type)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = (off_t)i, .l_len = 1 };
	return fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : -errno;
}

int lz_lockslots_init(struct lz_lockslots *s, int fd, unsigned n)
{
	struct stat st;
	int fl = fcntl(fd, F_GETFL);
	if (n == 0 || n > LZ_LOCKSLOTS_MAX || fl < 0 || (fl & O_ACCMODE) == O_RDONLY || fstat(fd, &st) < 0 ||
	    !S_ISREG(st.st_mode))
		return -EINVAL;
	*s = (struct lz_lockslots){ .fd = fd, .n = n };
	return -pthread_mutex_init(&s->lock, NULL);
}

int lz_lockslots_take(struct lz_lockslots *s)
{
	int r = -EAGAIN;
	pthread_mutex_lock(&s->lock);
	for (unsigned k = 0; k < s->n && s->held < s->n; k++) {
		unsigned i = (s->next + k) % s->n;
		if (s->mine[i / 64] & (UINT64_C(1) << (i % 64)))
			continue;
		int e = lock_byte(s->fd, i, F_WRLCK);
		if (e == -EAGAIN || e == -EACCES) /* another process holds it */
			continue;
		if (e == 0) {
			s->mine[i / 64] |= UINT64_C(1) << (i % 64);
			s->held++;
			s->next = (i + 1) % s->n;
			r = (int)i;
		} else {
			r = e;
		}
		break;
	}
	pthread_mutex_unlock(&s->lock);
	return r;
}

void lz_lockslots_give(struct lz_lockslots *s, int slot)
{
	unsigned i = (unsigned)slot;
	pthread_mutex_lock(&s->lock);
	if (slot >= 0 && i < s->n && (s->mine[i / 64] & (UINT64_C(1) << (i % 64)))) {
		(void)lock_byte(s->fd, i, F_UNLCK);
		s->mine[i / 64] &= ~(UINT64_C(1) << (i % 64));
		s->held--;
	}
	pthread_mutex_unlock(&s->lock);
}

unsigned lz_lockslots_held(struct lz_lockslots *s)
{
	pthread_mutex_lock(&s->lock);
	unsigned held = s->held;
	pthread_mutex_unlock(&s->lock);
	return held;
}
