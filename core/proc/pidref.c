#include "proc/pidref.h"
#include "proc/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "config/domain.h"
#include "util/cleanup.h"
#include "util/fdutil.h"

int lz_boot_id_parse(const char *text, uint8_t ret[16])
{
	/* 8-4-4-4-12 hex digits: the dashes out, then one hex decoder. */
	char hex[33];
	size_t n = 0;
	for (size_t i = 0; i < 36; i++) {
		bool dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (text[i] == '\0' || dash != (text[i] == '-'))
			return -EINVAL;
		if (!dash)
			hex[n++] = text[i];
	}
	if (text[36] != '\0' && text[36] != '\n')
		return -EINVAL;
	hex[n] = '\0';
	uint8_t id[16];
	if (lz_unhex(hex, id, sizeof(id)) < 0)
		return -EINVAL;
	memcpy(ret, id, sizeof(id));
	return 0;
}

int lz_boot_id(uint8_t ret[16], struct lz_err *err)
{
	static const char path[] = "/proc/sys/kernel/random/boot_id";
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	char text[64];
	if (fd < 0)
		return lz_err_set(err, errno, "open '%s': %s", path, strerror(errno));
	ssize_t n = read(fd, text, sizeof(text) - 1);
	if (n < 0)
		return lz_err_set(err, errno, "read '%s': %s", path, strerror(errno));
	text[n] = '\0';
	if (n < 36 || lz_boot_id_parse(text, ret) < 0)
		return lz_err_set(err, EINVAL, "'%s' is not a UUID", path);
	return 0;
}

/* The host's /proc, where a process that mounted a /proc of its own for
 * its PID namespace (the Runtime Supervisor) kept it (lz_pidref_use_proc);
 * -1: the /proc mount, the host's for everyone else. */
static int host_proc = -1;

void lz_pidref_use_proc(int proc_fd)
{
	host_proc = proc_fd;
}

int lz_pidref_proc(void)
{
	return host_proc;
}

/* A small file of the host's /proc (rel beneath it), as lz_read_small. */
static ssize_t read_proc(const char *rel, char *buf, size_t cap)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%s", rel);
	return host_proc < 0 ? lz_read_small(path, buf, cap) : lz_read_small_at(host_proc, rel, buf, cap);
}

/* The PID of the process behind pidfd in the host's PID namespace ("Pid:"
 * of its fdinfo, read in the host's /proc: its PID namespace is the one
 * numbers are given in). Never the caller's own number for it: clone3 in
 * a PID namespace of its own, as the Runtime Supervisor's, answers
 * another. 0 when that namespace cannot see it. */
static int fdinfo_pid(int pidfd, pid_t *ret, struct lz_err *err)
{
	char path[48], text[512];
	snprintf(path, sizeof(path), "self/fdinfo/%d", pidfd);
	ssize_t n = read_proc(path, text, sizeof(text));
	if (n < 0)
		return lz_err_set(err, (int)-n, "read '%s': %s", path, strerror((int)-n));
	const char *p = strstr(text, "\nPid:\t");
	long v;
	char *end;
	if (p == NULL || (v = strtol(p + 6, &end, 10), end == p + 6) || (*end != '\n' && *end != '\0') ||
	    v < -1 || v > INT32_MAX)
		return lz_err_set(err, EPROTO, "'%s' names no PID", path);
	*ret = v > 0 ? (pid_t)v : 0;
	return 0;
}

int lz_pidref_from_pidfd(int pidfd, struct lz_pidref *ret, struct lz_err *err)
{
	struct statfs sfs;
	struct stat st;
	struct lz_pidref ref = { 0 };
	pid_t pid = 0;
	int r;
	if (fstatfs(pidfd, &sfs) < 0)
		return lz_err_set(err, errno, "fstatfs(pidfd): %s", strerror(errno));
	if ((uint32_t)sfs.f_type != LZ_PIDFS_MAGIC)
		return lz_err_set(err, ENOTSUP, "pidfd is not on pidfs (Linux 6.9 or newer is required)");
	if (fstat(pidfd, &st) < 0)
		return lz_err_set(err, errno, "fstat(pidfd): %s", strerror(errno));
	ref.pidfs_dev = st.st_dev;
	ref.pidfs_ino = st.st_ino;
	if ((r = lz_boot_id(ref.boot_id, err)) < 0 || (r = fdinfo_pid(pidfd, &pid, err)) < 0)
		return r;
	if (pid == 0)
		return lz_err_set(err, ESRCH, "the process of pidfd %d is gone, or outside the PID namespace of /proc",
				  pidfd);
	ref.pid = (uint32_t)pid;

	char path[32], text[1024];
	snprintf(path, sizeof(path), "%d/stat", (int)pid);
	ssize_t n = read_proc(path, text, sizeof(text));
	if (n < 0)
		return lz_err_set(err, (int)-n, "read '%s': %s", path, strerror((int)-n));
	if (lz_proc_stat_field(text, LZ_PROC_STAT_START_TIME, &ref.start_time) < 0)
		return lz_err_set(err, EINVAL, "'%s' is malformed", path);
	*ret = ref;
	return 0;
}

int lz_pidref_alive(const struct lz_pidref *ref, bool *ret_alive, struct lz_err *err)
{
	return lz_pidref_await_gone(ref, 0, ret_alive, err);
}

int lz_pidref_await_gone(const struct lz_pidref *ref, int timeout_ms, bool *ret_alive, struct lz_err *err)
{
	uint8_t boot[16];
	struct stat st;
	struct statfs sfs;
	int r = lz_boot_id(boot, err);
	if (r < 0)
		return r;
	if (memcmp(boot, ref->boot_id, sizeof(boot)) != 0) {
		*ret_alive = false; /* another boot: never look the PID up */
		return 0;
	}
	if (ref->pid == 0 || ref->pid > INT32_MAX)
		return lz_err_set(err, EINVAL, "recorded PID %u is not a host PID", ref->pid);
	_cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)ref->pid, 0);
	if (pidfd < 0) {
		/* ENOENT: the PID is a thread of another process now; a
		 * recorded process, a thread-group leader, keeps its PID while
		 * any thread of it lives. */
		if (errno == ESRCH || errno == ENOENT) {
			*ret_alive = false;
			return 0;
		}
		return lz_err_set(err, errno, "pidfd_open(%u): %s", ref->pid, strerror(errno));
	}
	if (fstatfs(pidfd, &sfs) < 0 || (uint32_t)sfs.f_type != LZ_PIDFS_MAGIC || fstat(pidfd, &st) < 0)
		return lz_err_set(err, ENOTSUP, "pidfd of %u is not on pidfs", ref->pid);
	*ret_alive = st.st_dev == ref->pidfs_dev && st.st_ino == ref->pidfs_ino;
	/* A pidfd is readable once its process has exited: an unreaped zombie
	 * (its parent died, and the host's init reaps late) holds no memory,
	 * descriptor or namespace any more, and as the PID 1 of a namespace
	 * it took every other process there with it. */
	struct pollfd exited = { .fd = pidfd, .events = POLLIN };
	int64_t deadline = lz_now_ms() + timeout_ms;
	while (*ret_alive) {
		int n = poll(&exited, 1, lz_remaining_ms(deadline));
		if (n > 0)
			*ret_alive = false;
		if (n == 0 || (n < 0 && errno != EINTR))
			break;
	}
	return 0;
}

bool lz_pidref_equal(const struct lz_pidref *a, const struct lz_pidref *b)
{
	return memcmp(a->boot_id, b->boot_id, sizeof(a->boot_id)) == 0 && a->pidfs_dev == b->pidfs_dev &&
	       a->pidfs_ino == b->pidfs_ino && a->pid == b->pid && a->start_time == b->start_time;
}
