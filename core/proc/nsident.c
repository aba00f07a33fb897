/* Namespace and mount identity: see nsident.h. */
#include "proc/nsident.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
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

int lz_nsident_await_gone(const struct lz_nsident *ns, int timeout_ms, bool *ret_alive, struct lz_err *err)
{
	int64_t deadline = lz_now_ms() + timeout_ms;
	for (;;) {
		int fd = open_by_id(ns);
		if (fd < 0 && errno == ESTALE) {
			*ret_alive = false;
			return 0;
		}
		if (fd < 0)
			return lz_err_set(err, errno, "namespace %llu: %s", (unsigned long long)ns->id,
					  strerror(errno));
		close(fd);
		if (lz_remaining_ms(deadline) <= 0) {
			*ret_alive = true;
			return 0;
		}
		usleep(20 * 1000);
	}
}
