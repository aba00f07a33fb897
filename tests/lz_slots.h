/* Test helpers for slots files (core/proc/lockslots.h): how many slots are
 * held, by anyone, and a child process that holds some, standing in for
 * another Domain's proxy or router. Header-only; include after cmocka.h. */
#ifndef LZ_SLOTS_H
#define LZ_SLOTS_H

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc/lockslots.h"

/* How many of bytes 0..n-1 of the slots file at fd are locked by other
 * open file descriptions (F_OFD_GETLK does not see fd's own: give it an
 * open of its own). */
static inline unsigned slots_locked(int fd, unsigned n)
{
	unsigned held = 0;
	for (unsigned i = 0; i < n; i++) {
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = i, .l_len = 1 };
		assert_int_equal(fcntl(fd, F_OFD_GETLK, &fl), 0);
		held += fl.l_type != F_UNLCK;
	}
	return held;
}

/* A child holding locks of the file at path, through its own open, once
 * slot_holder_run returns: hold(fd, arg) takes them (0, or the child
 * fails). It keeps none of the test's descriptors (a pipe of another
 * child held here would keep that child from seeing its end), and exits
 * when slot_holder_end closes its pipe (or when killed, pid). */
struct slot_holder {
	pid_t pid;
	int release_fd;
};

static inline struct slot_holder slot_holder_run(const char *path, int (*hold)(int fd, const void *arg),
						 const void *arg)
{
	int ready[2], release[2];
	char byte;
	assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
	assert_int_equal(pipe2(release, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		for (int fd = 3; fd < 1024; fd++)
			if (fd != ready[1] && fd != release[0])
				close(fd);
		int fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0 || hold(fd, arg) != 0)
			_exit(2);
		(void)!write(ready[1], "r", 1);
		(void)!read(release[0], &byte, 1); /* until the parent's end closes */
		_exit(0);
	}
	close(ready[1]);
	close(release[0]);
	assert_int_equal(read(ready[0], &byte, 1), 1);
	close(ready[0]);
	return (struct slot_holder){ pid, release[1] };
}

struct slot_take {
	unsigned n, take;
};

static inline int slot_holder_take(int fd, const void *arg)
{
	const struct slot_take *t = arg;
	struct lz_lockslots s;
	if (lz_lockslots_init(&s, fd, t->n) < 0)
		return -1;
	for (unsigned k = 0; k < t->take; k++)
		if (lz_lockslots_take(&s) < 0)
			return -1;
	return 0;
}

/* A holder of `take` of the n slots, standing in for another Domain's
 * proxy or router. */
static inline struct slot_holder slot_holder_start(const char *path, unsigned n, unsigned take)
{
	const struct slot_take t = { n, take };
	return slot_holder_run(path, slot_holder_take, &t);
}

static inline void slot_holder_end(struct slot_holder *h)
{
	close(h->release_fd);
	assert_int_equal(waitpid(h->pid, NULL, 0), h->pid);
}

#endif
