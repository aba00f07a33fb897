/* Slots shared through record locks (lockslots.h). */
#include "proc/lockslots.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>

/* Bytes first..first+len-1 locked (type F_WRLCK) or unlocked (F_UNLCK)
 * for this open file description. */
static int lock_bytes(int fd, unsigned first, unsigned len, short type)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = (off_t)first, .l_len = (off_t)len };
	return fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : -errno;
}

static bool mine(const struct lz_lockslots *s, unsigned i)
{
	return s->mine[i / 64] & (UINT64_C(1) << (i % 64));
}

int lz_lockslots_init_at(struct lz_lockslots *s, int fd, unsigned base, unsigned n)
{
	struct stat st;
	int fl = fcntl(fd, F_GETFL);
	if (n == 0 || n > LZ_LOCKSLOTS_MAX || base > UINT32_MAX - n || fl < 0 || (fl & O_ACCMODE) == O_RDONLY ||
	    fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return -EINVAL;
	*s = (struct lz_lockslots){ .fd = fd, .base = base, .n = n };
	return -pthread_mutex_init(&s->lock, NULL);
}

int lz_lockslots_init(struct lz_lockslots *s, int fd, unsigned n)
{
	return lz_lockslots_init_at(s, fd, 0, n);
}

int lz_lockslots_take(struct lz_lockslots *s)
{
	int r = -EAGAIN;
	pthread_mutex_lock(&s->lock);
	for (unsigned k = 0; k < s->n && s->held < s->n; k++) {
		unsigned i = (s->next + k) % s->n;
		if (mine(s, i))
			continue;
		int e = lock_bytes(s->fd, s->base + i, 1, F_WRLCK);
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

/* Under s->lock, i one of this process's slots. */
static void give_locked(struct lz_lockslots *s, unsigned i)
{
	(void)lock_bytes(s->fd, s->base + i, 1, F_UNLCK);
	s->mine[i / 64] &= ~(UINT64_C(1) << (i % 64));
	s->held--;
}

void lz_lockslots_give(struct lz_lockslots *s, int slot)
{
	pthread_mutex_lock(&s->lock);
	if (slot >= 0 && (unsigned)slot < s->n && mine(s, (unsigned)slot))
		give_locked(s, (unsigned)slot);
	pthread_mutex_unlock(&s->lock);
}

void lz_lockslots_give_one(struct lz_lockslots *s)
{
	pthread_mutex_lock(&s->lock);
	for (unsigned i = s->n; i-- > 0 && s->held > 0;)
		if (mine(s, i)) {
			give_locked(s, i);
			break;
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

int lz_lockslots_others(struct lz_lockslots *s)
{
	/* F_OFD_GETLK answers the first lock of another description that a
	 * write lock of the range would meet: count it, go on past it. */
	int n = 0;
	off_t at = s->base, end = (off_t)s->base + s->n;
	while (at < end) {
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = at, .l_len = end - at };
		if (fcntl(s->fd, F_OFD_GETLK, &fl) < 0)
			return -errno;
		if (fl.l_type == F_UNLCK)
			break;
		off_t first = fl.l_start > at ? fl.l_start : at;
		off_t last = fl.l_len == 0 || fl.l_start + fl.l_len > end ? end : fl.l_start + fl.l_len;
		n += (int)(last - first);
		at = last;
	}
	return n;
}

void lz_lockslots_destroy(struct lz_lockslots *s)
{
	/* one unlock of the whole range: this description's locks only */
	(void)lock_bytes(s->fd, s->base, s->n, F_UNLCK);
	s->held = 0;
	pthread_mutex_destroy(&s->lock);
}
