/* Namespace and mount identity: see nsident.h. */
#include "proc/nsident.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proc/spawn.h"
#include "util/cleanup.h"

/* Linux UAPI newer than Debian 12's headers (x86-64 numbers). */
#define NS_GET_ID_IOCTL _IOR(0xb7, 0xd, uint64_t)
#define PIDFD_GET_MNT_NAMESPACE_IOCTL _IO(0xFF, 3)
#define PIDFD_GET_NET_NAMESPACE_IOCTL _IO(0xFF, 4)
#define PIDFD_GET_USER_NAMESPACE_IOCTL _IO(0xFF, 9)
#define FD_NSFS_ROOT_FD (-10003)
#define FILEID_NSFS_TYPE 0xf1

struct nsfs_handle {
	struct file_handle fh;
	uint64_t ns_id;
	uint32_t ns_type;
	uint32_t ns_inum;
};

static int open_by_id(const struct lz_nsident *ns)
{
	struct nsfs_handle h = { .fh = { .handle_bytes = 16, .handle_type = FILEID_NSFS_TYPE },
				 .ns_id = ns->id,
				 .ns_type = (uint32_t)ns->type,
				 .ns_inum = ns->inum };
	return open_by_handle_at(FD_NSFS_ROOT_FD, &h.fh, O_RDONLY | O_CLOEXEC);
}

static int identify(int nsfd, int type, struct lz_nsident *ret, struct lz_err *err)
{
	struct stat st;
	uint64_t id = 0;
	if (ioctl(nsfd, NS_GET_ID_IOCTL, &id) < 0 || fstat(nsfd, &st) < 0)
		return lz_err_set(err, errno, "namespace identity: %s", strerror(errno));
	if (id == 0 || st.st_ino == 0 || st.st_ino > UINT32_MAX)
		return lz_err_set(err, EPROTO, "namespace identity: the kernel reported ID %llu, inode %llu",
				  (unsigned long long)id, (unsigned long long)st.st_ino);
	*ret = (struct lz_nsident){ .type = type, .id = id, .inum = (uint32_t)st.st_ino };
	return 0;
}

bool lz_nsident_supported(void)
{
	static int supported = -1;
	if (supported < 0) {
		struct lz_err e = { 0, "" };
		struct lz_nsident self;
		_cleanup_close_ int fd = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
		_cleanup_close_ int again = -EBADF;
		supported = fd >= 0 && identify(fd, CLONE_NEWUSER, &self, &e) >= 0 && (again = open_by_id(&self)) >= 0;
	}
	return supported == 1;
}

int lz_nsident_of_pidfd(int pidfd, int type, struct lz_nsident *ret, struct lz_err *err)
{
	unsigned long request = type == CLONE_NEWUSER ? PIDFD_GET_USER_NAMESPACE_IOCTL
			      : type == CLONE_NEWNS  ? PIDFD_GET_MNT_NAMESPACE_IOCTL
			      : type == CLONE_NEWNET ? PIDFD_GET_NET_NAMESPACE_IOCTL
						     : 0;
	if (request == 0)
		return lz_err_set(err, EINVAL, "namespace type %#x is not recorded", (unsigned)type);
	_cleanup_close_ int nsfd = ioctl(pidfd, request, 0);
	if (nsfd < 0)
		return lz_err_set(err, errno, "the process's namespace: %s", strerror(errno));
	return identify(nsfd, type, ret, err);
}

/* Whether the nsfs object `link` names (a /proc link under dirfd) is
 * ns: its link text first, then, on the object itself (taken O_PATH, so
 * a descriptor swapped for a FIFO or a device meanwhile is never opened),
 * nsfs's device, its inode and its ID. A match by text whose object
 * cannot be examined counts as ns: a recycled inode number then refuses,
 * never proves. */
static bool names_ns(int dirfd, const char *link, const struct lz_nsident *ns, const char *want, dev_t nsfs)
{
	char text[64];
	ssize_t n = readlinkat(dirfd, link, text, sizeof(text) - 1);
	if (n < 0)
		return false;
	text[n] = '\0';
	if (strcmp(text, want) != 0)
		return false;
	_cleanup_close_ int obj = openat(dirfd, link, O_PATH | O_CLOEXEC);
	struct statx stx;
	/* DONT_SYNC: a descriptor swapped for a file of a hung FUSE server
	 * meanwhile does not make the scan wait on that server. */
	if (obj < 0 || statx(obj, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_INO, &stx) < 0)
		return true;
	if (makedev(stx.stx_dev_major, stx.stx_dev_minor) != nsfs || stx.stx_ino != ns->inum)
		return false;
	char self[32];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", obj);
	_cleanup_close_ int fd = open(self, O_RDONLY | O_CLOEXEC);
	uint64_t id = 0;
	return fd < 0 || ioctl(fd, NS_GET_ID_IOCTL, &id) < 0 || id == ns->id;
}

/* What the walk makes of a failure: a process, thread or descriptor gone
 * meanwhile, or a process of another user, holds nothing it can see
 * (nsident.h); anything else (no descriptor, no memory) leaves the
 * question open, and is an error, never "not held". */
static int walk_error(int e)
{
	return e == ENOENT || e == ESRCH || e == EACCES || e == EPERM ? 0 : -e;
}

/* The directory sub of dirfd as a stream in *ret (NULL when it is gone or
 * not ours to see), or -errno. */
static int open_dir(int dirfd, const char *sub, DIR **ret)
{
	*ret = NULL;
	int fd = openat(dirfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return walk_error(errno);
	if ((*ret = fdopendir(fd)) == NULL) {
		int e = errno;
		close(fd);
		return -e;
	}
	return 0;
}

/* Whether an entry of the directory sub of a /proc/<pid> (its tasks, its
 * descriptors) is, followed by suffix, a link to ns: 1, 0, or -errno. */
static int dir_holds(int piddir, const char *sub, const char *suffix, const struct lz_nsident *ns,
		     const char *want, dev_t nsfs)
{
	DIR *dir;
	int held = open_dir(piddir, sub, &dir);
	if (held < 0 || dir == NULL)
		return held;
	char link[64];
	struct dirent *e;
	while (held == 0 && (errno = 0, e = readdir(dir)) != NULL)
		if (e->d_name[0] != '.' &&
		    (size_t)snprintf(link, sizeof(link), "%.20s%s", e->d_name, suffix) < sizeof(link))
			held = names_ns(dirfd(dir), link, ns, want, nsfs);
	if (held == 0 && e == NULL && errno != 0)
		held = walk_error(errno);
	closedir(dir);
	return held;
}

/* Whether /proc/<pid> is a thread-group leader that has exited while
 * other threads of it run: its own fd directory then lists nothing, the
 * descriptor table is seen through a live thread's. 1, 0, or -errno. */
static int leader_exited(int piddir)
{
	char text[512];
	_cleanup_close_ int fd = openat(piddir, "stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return walk_error(errno);
	ssize_t n = read(fd, text, sizeof(text) - 1);
	if (n <= 0)
		return n < 0 ? walk_error(errno) : 0;
	text[n] = '\0';
	const char *end = strrchr(text, ')');
	return end != NULL && end[1] == ' ' && (end[2] == 'Z' || end[2] == 'X');
}

static int threads_hold(int piddir, const struct lz_nsident *ns, const char *want, dev_t nsfs)
{
	DIR *dir;
	int held = open_dir(piddir, "task", &dir);
	if (held < 0 || dir == NULL)
		return held;
	struct dirent *e;
	while (held == 0 && (errno = 0, e = readdir(dir)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		_cleanup_close_ int task = openat(dirfd(dir), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		held = task >= 0 ? dir_holds(task, "fd", "", ns, want, nsfs) : walk_error(errno);
	}
	if (held == 0 && e == NULL && errno != 0)
		held = walk_error(errno);
	closedir(dir);
	return held;
}

/* One /proc/<pid>: a thread in ns, or a descriptor of it. 1, 0, -errno. */
static int process_holds(int piddir, const char *task_link, const struct lz_nsident *ns, const char *want,
			 dev_t nsfs)
{
	int r = dir_holds(piddir, "task", task_link, ns, want, nsfs);
	if (r == 0)
		r = dir_holds(piddir, "fd", "", ns, want, nsfs);
	if (r == 0 && (r = leader_exited(piddir)) == 1)
		r = threads_hold(piddir, ns, want, nsfs);
	return r;
}

int lz_nsident_find_holder(const struct lz_nsident *ns, pid_t *ret_pid, struct lz_err *err)
{
	const char *nsname = ns->type == CLONE_NEWNET ? "net" : ns->type == CLONE_NEWNS ? "mnt"
			   : ns->type == CLONE_NEWUSER ? "user" : NULL;
	if (nsname == NULL)
		return lz_err_set(err, EINVAL, "namespace type %#x is not recorded", (unsigned)ns->type);
	char want[64], task_link[16];
	snprintf(want, sizeof(want), "%s:[%u]", nsname, ns->inum);
	snprintf(task_link, sizeof(task_link), "/ns/%s", nsname);
	/* One nsfs device holds every namespace: this process's tells it. */
	struct stat nsfs;
	if (stat("/proc/self/ns/net", &nsfs) < 0)
		return lz_err_set(err, errno, "/proc/self/ns/net: %s", strerror(errno));
	_cleanup_close_ int procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *procs = procfd >= 0 ? fdopendir(procfd) : NULL;
	if (procs == NULL)
		return lz_err_set(err, errno, "/proc: %s", strerror(errno));
	procfd = -EBADF;
	int found = 0;
	struct dirent *d;
	while (found == 0 && (errno = 0, d = readdir(procs)) != NULL) {
		if (d->d_name[0] < '1' || d->d_name[0] > '9')
			continue;
		_cleanup_close_ int piddir = openat(dirfd(procs), d->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		found = piddir < 0 ? walk_error(errno) : process_holds(piddir, task_link, ns, want, nsfs.st_dev);
		if (found == 1)
			*ret_pid = (pid_t)strtol(d->d_name, NULL, 10);
	}
	if (found == 0 && d == NULL && errno != 0)
		found = -errno;
	closedir(procs);
	if (found < 0)
		return lz_err_set(err, -found, "looking in /proc for what holds namespace %llu: %s",
				  (unsigned long long)ns->id, strerror(-found));
	return found;
}

int lz_nsident_await_gone(const struct lz_nsident *ns, int timeout_ms, bool *ret_alive, struct lz_err *err)
{
	int64_t deadline = lz_now_ms() + timeout_ms;
	for (;;) {
		int fd = open_by_id(ns);
		if (fd < 0 && errno != ESTALE)
			return lz_err_set(err, errno, "namespace %llu: %s", (unsigned long long)ns->id,
					  strerror(errno));
		if (fd >= 0) {
			close(fd);
		} else {
			/* ESTALE is no proof for an unprivileged caller: Linux
			 * 6.18.44 answers it for a namespace the caller is not
			 * in, live or freed (measured); what this user's
			 * processes hold is looked up in /proc (nsident.h). */
			pid_t holder = 0;
			int h = lz_nsident_find_holder(ns, &holder, err);
			if (h < 0)
				return h;
			if (h == 0) {
				*ret_alive = false;
				return 0;
			}
		}
		if (lz_remaining_ms(deadline) <= 0) {
			*ret_alive = true;
			return 0;
		}
		usleep(20 * 1000);
	}
}
