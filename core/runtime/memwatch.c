#include "runtime/memwatch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "proc/pidref.h"
#include "util/cleanup.h"
#include "util/fdutil.h"

#define SANDBOX_ARGV0 "runsc-sandbox"
#define MEMORY_FILE "/memfd:runsc-memory (deleted)"
#define PF_EXITING 0x00000004 /* include/linux/sched.h */

/* Whether the process at pid_dir is runsc-sandbox, a child of runsc_pid.
 * Read after the directory is open: a number reused since it was listed
 * names another process, which fails here. */
static bool is_sandbox(int pid_dir, pid_t runsc_pid)
{
	char buf[512];
	ssize_t n = lz_read_small_at(pid_dir, "cmdline", buf, sizeof(buf) - 1);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	if (strcmp(buf, SANDBOX_ARGV0) != 0)
		return false;
	uint64_t ppid;
	if ((n = lz_read_small_at(pid_dir, "stat", buf, sizeof(buf) - 1)) <= 0)
		return false;
	buf[n] = '\0';
	return lz_proc_stat_field(buf, LZ_PROC_STAT_PPID, &ppid) == 0 && ppid == (uint64_t)runsc_pid;
}

/* Whether the process at pid_dir has exited or is exiting (PF_EXITING is
 * set before its memory and descriptors go, long before it is a zombie). */
static bool exiting(int pid_dir)
{
	char buf[1024];
	ssize_t n = lz_read_small_at(pid_dir, "stat", buf, sizeof(buf) - 1);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	uint64_t flags;
	const char *close = strrchr(buf, ')');
	char state;
	if (close == NULL || sscanf(close + 1, " %c", &state) != 1 ||
	    lz_proc_stat_field(buf, LZ_PROC_STAT_FLAGS, &flags) < 0)
		return true;
	return state == 'Z' || state == 'X' || (flags & PF_EXITING) != 0;
}

/* The directory rel beneath dirfd as a stream; NULL with errno set. */
static DIR *stream_at(int dirfd, const char *rel)
{
	int fd = openat(dirfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (fd >= 0 && d == NULL) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return d;
}

/* The children of runsc_pid listed by each of its threads (a Go program
 * forks from any). Returns the directory of the one that is
 * runsc-sandbox, or -ENOENT. */
static int find_sandbox(int proc, pid_t runsc_pid)
{
	char rel[64];
	snprintf(rel, sizeof(rel), "%d/task", (int)runsc_pid);
	DIR *tasks = stream_at(proc, rel);
	if (tasks == NULL)
		return -errno;
	int found = -ENOENT;
	struct dirent *t;
	while (found < 0 && (t = readdir(tasks)) != NULL) {
		if (t->d_name[0] == '.')
			continue;
		char kids[4096], crel[sizeof(t->d_name) + 16];
		snprintf(crel, sizeof(crel), "%s/children", t->d_name);
		ssize_t n = lz_read_small_at(dirfd(tasks), crel, kids, sizeof(kids) - 1);
		if (n <= 0)
			continue;
		kids[n] = '\0';
		char *save = NULL;
		for (char *tok = strtok_r(kids, " \n", &save); tok != NULL && found < 0;
		     tok = strtok_r(NULL, " \n", &save)) {
			int dir = openat(proc, tok, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (dir < 0)
				continue;
			if (is_sandbox(dir, runsc_pid))
				found = dir;
			else
				close(dir);
		}
	}
	closedir(tasks);
	return found;
}

/* The descriptor of pid_dir's process that is its memory file. */
static int find_memory_file(int pid_dir, char *ret, size_t size)
{
	DIR *fds = stream_at(pid_dir, "fd");
	if (fds == NULL)
		return -errno;
	int r = -ENOENT;
	struct dirent *d;
	while (r < 0 && (d = readdir(fds)) != NULL) {
		char target[sizeof(MEMORY_FILE) + 1];
		ssize_t n = readlinkat(dirfd(fds), d->d_name, target, sizeof(target));
		size_t len = strlen(d->d_name);
		if (n == (ssize_t)sizeof(MEMORY_FILE) - 1 && memcmp(target, MEMORY_FILE, (size_t)n) == 0 &&
		    len < size) {
			memcpy(ret, d->d_name, len + 1);
			r = 0;
		}
	}
	closedir(fds);
	return r;
}

static int budget_error(struct lz_err *err, int r)
{
	return lz_err_set(err, -r, "the sandboxes' memory budget (%s): %s", LZ_MEMWATCH_SLOTS, strerror(-r));
}

/* The shared budget in slots of lz_lockslots: chunks of at least
 * LZ_MEMWATCH_CHUNK_MIN, at most LZ_LOCKSLOTS_MAX of them, none past the
 * budget (so the chunks every watch holds never sum past it); and this
 * sandbox's presence slot. */
static int share(struct lz_memwatch *w, const struct lz_memwatch_limits *lim, struct lz_err *err)
{
	w->host = lim->host;
	w->chunk = lz_memwatch_chunk(w->host);
	uint64_t n = w->host / w->chunk;
	if (n == 0)
		return lz_err_set(err, EINVAL, "the sandboxes' memory budget (%llu MiB) is less than one chunk",
				  (unsigned long long)(w->host >> 20));
	const struct {
		struct lz_lockslots *set;
		unsigned base, n;
	} sets[] = { { &w->slots, 0, (unsigned)n },
		     { &w->present, LZ_MEMWATCH_PRESENT_BASE, LZ_LOCKSLOTS_MAX },
		     { &w->want, LZ_MEMWATCH_WANT_BASE, LZ_LOCKSLOTS_MAX },
		     { &w->yield, LZ_MEMWATCH_YIELD_BASE, 1 } };
	int r;
	for (size_t i = 0; i < LZ_ARRAY_SIZE(sets); i++)
		if ((r = lz_lockslots_init_at(sets[i].set, lim->slots_fd, sets[i].base, sets[i].n)) < 0) {
			while (i-- > 0)
				lz_lockslots_destroy(sets[i].set);
			return budget_error(err, r);
		}
	w->shared = true;
	w->running = 1;
	if ((r = lz_lockslots_take(&w->present)) < 0)
		return r == -EAGAIN ? lz_err_set(err, EAGAIN, "more than %d sandboxes are running", LZ_LOCKSLOTS_MAX)
				    : budget_error(err, r);
	return 0;
}

int lz_memwatch_open(int proc_fd, pid_t runsc_pid, const struct lz_memwatch_limits *lim, struct lz_memwatch *w,
		     struct lz_err *err)
{
	_cleanup_close_ int own = -EBADF;
	int r;
	if (proc_fd < 0) {
		if ((own = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
			return lz_err_set(err, errno, "open /proc: %s", strerror(errno));
		proc_fd = own;
	}
	w->limit = lim->own;
	if ((w->pid_dir = find_sandbox(proc_fd, runsc_pid)) < 0) {
		r = w->pid_dir;
		lz_memwatch_close(w);
		return lz_err_set(err, -r, "cannot watch the sandbox's memory: no %s process under runsc run (%s)",
				  SANDBOX_ARGV0, strerror(-r));
	}
	if ((r = find_memory_file(w->pid_dir, w->fd, sizeof(w->fd))) < 0) {
		lz_memwatch_close(w);
		return lz_err_set(err, -r, "cannot watch the sandbox's memory: %s has no memory file (%s; %s)",
				  SANDBOX_ARGV0, MEMORY_FILE, strerror(-r));
	}
	struct stat st;
	char rel[32];
	snprintf(rel, sizeof(rel), "fd/%s", w->fd);
	if (fstatat(w->pid_dir, rel, &st, 0) < 0) {
		r = -errno;
		lz_memwatch_close(w);
		return lz_err_set(err, -r, "cannot watch the sandbox's memory: %s", strerror(-r));
	}
	w->dev = st.st_dev;
	w->ino = st.st_ino;
	if (lim->slots_fd >= 0 && (r = share(w, lim, err)) < 0) {
		lz_memwatch_close(w);
		return r;
	}
	return 0;
}

/* The sandboxes running, this one among them (w->running). */
static int count_running(struct lz_memwatch *w, struct lz_err *err)
{
	int others = lz_lockslots_others(&w->present);
	if (others < 0)
		return budget_error(err, others);
	w->running = (unsigned)others + 1;
	return 0;
}

/* Short of chunks: the first look, or a sandbox that needs its share or
 * more, is past the budget; one that needs less says it wants and runs on
 * (its overrun is within its share). */
static int short_of_budget(struct lz_memwatch *w, uint64_t need, struct lz_err *err)
{
	int r;
	if (!w->looked)
		return LZ_MEMWATCH_PAST_HOST;
	if ((r = count_running(w, err)) < 0)
		return r;
	if (need * w->running >= w->slots.n)
		return LZ_MEMWATCH_PAST_HOST;
	if (lz_lockslots_held(&w->want) == 0 && (r = lz_lockslots_take(&w->want)) < 0)
		return budget_error(err, r);
	return LZ_MEMWATCH_WITHIN;
}

/* Whether a chunk is free now (one taken and given back): a short sandbox
 * takes it at its next look, and a watch that sees its want still set
 * (another has just ended and freed chunks) must not end as well. */
static bool chunk_free(struct lz_memwatch *w)
{
	int slot = lz_lockslots_take(&w->slots);
	if (slot < 0)
		return false;
	lz_lockslots_give(&w->slots, slot);
	return true;
}

/* Holds as many chunks of the shared budget as w->seen fills, or says
 * what a shortage means (short_of_budget); gives way when another is short
 * and none is free, this one holds more than its share and no other is
 * giving way. */
static int hold(struct lz_memwatch *w, struct lz_err *err)
{
	if (!w->shared)
		return LZ_MEMWATCH_WITHIN;
	uint64_t need = w->seen / w->chunk + (w->seen % w->chunk != 0);
	while (lz_lockslots_held(&w->slots) > need)
		lz_lockslots_give_one(&w->slots);
	while (lz_lockslots_held(&w->slots) < need) {
		int r = lz_lockslots_take(&w->slots);
		if (r == -EAGAIN)
			return short_of_budget(w, need, err);
		if (r < 0)
			return budget_error(err, r);
	}
	lz_lockslots_give_one(&w->want);
	int r = lz_lockslots_others(&w->want);
	if (r <= 0)
		return r < 0 ? budget_error(err, r) : LZ_MEMWATCH_WITHIN;
	if ((r = count_running(w, err)) < 0)
		return r;
	if (need * w->running > w->slots.n && !chunk_free(w) &&
	    (lz_lockslots_held(&w->yield) == 1 || lz_lockslots_take(&w->yield) >= 0))
		return LZ_MEMWATCH_YIELD; /* held until the watch closes */
	return LZ_MEMWATCH_WITHIN;
}

int lz_memwatch_check(struct lz_memwatch *w, struct lz_err *err)
{
	struct stat st;
	char rel[32];
	snprintf(rel, sizeof(rel), "fd/%s", w->fd);
	if (fstatat(w->pid_dir, rel, &st, 0) < 0) {
		int e = errno;
		/* Its directory answers ESRCH once the process is reaped; an
		 * exiting one has no descriptors (ENOENT), or its fd directory
		 * becomes the host root's once its memory is gone (EACCES);
		 * runsc-sandbox never closes its memory file while it runs. */
		if (e == ESRCH || e == ENOENT || exiting(w->pid_dir))
			return lz_err_set(err, ESRCH, "the sandbox process is gone");
		return lz_err_set(err, e, "the sandbox's memory file: %s", strerror(e));
	}
	if (st.st_dev != w->dev || st.st_ino != w->ino)
		return lz_err_set(err, EIO, "the sandbox's memory file changed under the watch");
	w->seen = (uint64_t)st.st_blocks * 512;
	int r = w->seen > w->limit ? LZ_MEMWATCH_PAST_OWN : hold(w, err);
	w->looked = true;
	return r;
}

uint64_t lz_memwatch_held(struct lz_memwatch *w)
{
	return w->shared ? (uint64_t)lz_lockslots_held(&w->slots) * w->chunk : 0;
}

void lz_memwatch_close(struct lz_memwatch *w)
{
	lz_close_fdp(&w->pid_dir);
	if (w->shared) {
		/* the chunks first, then the rest */
		lz_lockslots_destroy(&w->slots);
		lz_lockslots_destroy(&w->want);
		lz_lockslots_destroy(&w->yield);
		lz_lockslots_destroy(&w->present);
	}
	w->shared = false;
}

uint64_t lz_memwatch_host_budget(void)
{
	struct sysinfo si;
	if (sysinfo(&si) < 0 || si.totalram == 0)
		return UINT64_MAX;
	return (uint64_t)si.totalram * (si.mem_unit ? si.mem_unit : 1) / 2;
}

uint64_t lz_memwatch_chunk(uint64_t host)
{
	if (host / LZ_MEMWATCH_CHUNK_MIN <= LZ_LOCKSLOTS_MAX)
		return LZ_MEMWATCH_CHUNK_MIN;
	return host / LZ_LOCKSLOTS_MAX + (host % LZ_LOCKSLOTS_MAX != 0);
}
