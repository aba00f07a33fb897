#include "fs/mountns.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/mount.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fs/pathauth.h"
#include "util/cleanup.h"
#include "util/fdutil.h"
#include "util/sys.h"

/* Linux UAPI newer than Debian 12's headers (x86-64 numbers). */
#define STATX_MNT_ID_UNIQUE_MASK 0x4000u
#define SYS_STATMOUNT 457
#define SYS_LISTMOUNT 458
#define LSMT_ROOT UINT64_MAX
#define STATMOUNT_SB_BASIC_MASK 0x1u
#define STATMOUNT_MNT_ROOT_MASK 0x8u
#define STATMOUNT_MNT_POINT_MASK 0x10u
/* struct statmount (Linux 6.8): offsets of the fields read here; its
 * strings follow the 512 bytes of fixed fields. */
#define STATMOUNT_OFF_MASK 8
#define STATMOUNT_OFF_SB_DEV_MAJOR 16
#define STATMOUNT_OFF_SB_DEV_MINOR 20
#define STATMOUNT_OFF_MNT_ROOT 104
#define STATMOUNT_OFF_MNT_POINT 108
#define STATMOUNT_FIXED 512

static int identify_fd_as(int fd, int sync, const char *label, struct lz_mount_id *ret, struct lz_err *err)
{
	struct statx stx;
	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | sync, STATX_BASIC_STATS | STATX_MNT_ID_UNIQUE_MASK,
		  &stx) < 0)
		return lz_err_set(err, errno, "stat '%s': %s", label, strerror(errno));
	/* Older kernels answer STATX_MNT_ID for STATX_BASIC_STATS alone. */
	if (!(stx.stx_mask & (STATX_MNT_ID_UNIQUE_MASK | STATX_MNT_ID)) ||
	    ((stx.stx_mask & STATX_MNT_ID_UNIQUE_MASK) && stx.stx_mnt_id < LZ_MOUNT_ID_UNIQUE_MIN))
		return lz_err_set(err, EPROTO, "stat '%s': the kernel reported no usable mount ID", label);
	ret->mnt_id = stx.stx_mnt_id;
	ret->dev = ((uint64_t)stx.stx_dev_major << 32) | stx.stx_dev_minor;
	ret->ino = stx.stx_ino;
	return 0;
}

/* DONT_SYNC: a FUSE mount is identified without asking its server, which
 * may be gone (router loss) when its mount is removed. */
static int identify_fd(int fd, const char *label, struct lz_mount_id *ret, struct lz_err *err)
{
	return identify_fd_as(fd, AT_STATX_DONT_SYNC, label, ret, err);
}

int lz_mountns_prepare(struct lz_err *err)
{
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return lz_err_set(err, errno, "make mounts private: %s", strerror(errno));
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return lz_err_set(err, errno, "mount proc: %s", strerror(errno));
	return 0;
}

/* sync: the AT_STATX_ flag the identity is taken with (identify_fd). */
static int attach(int mnt, int target_fd, int sync, struct lz_mount_id *ret, const char *what,
		  struct lz_err *err)
{
	if (syscall(SYS_move_mount, mnt, "", target_fd, "",
		    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return lz_err_set(err, errno, "attach %s: %s", what, strerror(errno));
	/* The mount now sits on the target: identify it through the
	 * attached tree's own root. */
	return identify_fd_as(mnt, sync, what, ret, err);
}

/* A detached clone of the tree at src_fd (with its submounts when
 * recursive) carrying attr, in *ret. */
static int clone_tree(int src_fd, bool recursive, uint64_t attr, int *ret, const char *what, struct lz_err *err)
{
	unsigned rec = recursive ? AT_RECURSIVE : 0;
	_cleanup_close_ int mnt = (int)syscall(SYS_open_tree, src_fd, "",
					       OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | rec);
	if (mnt < 0)
		return lz_err_set(err, errno, "clone %s: %s", what, strerror(errno));
	struct mount_attr ma = { .attr_set = attr };
	if (syscall(SYS_mount_setattr, mnt, "", AT_EMPTY_PATH | rec, &ma, sizeof(ma)) < 0)
		return lz_err_set(err, errno, "set the attributes of %s: %s", what, strerror(errno));
	*ret = TAKE_FD(mnt);
	return 0;
}

int lz_mountns_bind_ro(int src_fd, int target_fd, struct lz_mount_id *ret, struct lz_err *err)
{
	_cleanup_close_ int mnt = -EBADF;
	int r = clone_tree(src_fd, false, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, &mnt,
			   "the prepared root", err);
	return r < 0 ? r : attach(mnt, target_fd, AT_STATX_DONT_SYNC, ret, "read-only root", err);
}

int lz_mountns_bind_tree(int src_fd, int target_fd, bool read_only, struct lz_err *err)
{
	_cleanup_close_ int mnt = -EBADF;
	struct lz_mount_id id;
	int r = clone_tree(src_fd, true, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (read_only ? MOUNT_ATTR_RDONLY : 0),
			   &mnt, "the tree", err);
	return r < 0 ? r : attach(mnt, target_fd, AT_STATX_DONT_SYNC, &id, "the clone", err);
}

int lz_mountns_overlay(int lower_fd, int upper_fd, int work_fd, int target_fd,
		       struct lz_mount_id *ret, struct lz_err *err)
{
	_cleanup_close_ int fs = (int)syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
	if (fs < 0)
		return lz_err_set(err, errno, "overlayfs: %s", strerror(errno));
	/* userxattr: unprivileged overlay keeps its metadata in user.* xattrs. */
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_FD, "lowerdir+", NULL, lower_fd) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_FD, "upperdir", NULL, upper_fd) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_FD, "workdir", NULL, work_fd) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return lz_err_set(err, errno, "configure overlay: %s", strerror(errno));
	_cleanup_close_ int mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NODEV);
	if (mnt < 0)
		return lz_err_set(err, errno, "create overlay mount: %s", strerror(errno));
	return attach(mnt, target_fd, AT_STATX_DONT_SYNC, ret, "overlay", err);
}

int lz_mountns_fuse_new(int fuse_fd, int *ret_mnt, struct lz_err *err)
{
	_cleanup_close_ int fs = (int)syscall(SYS_fsopen, "fuse", FSOPEN_CLOEXEC);
	if (fs < 0)
		return lz_err_set(err, errno, "fuse: %s", strerror(errno));
	char fd[16];
	snprintf(fd, sizeof(fd), "%d", fuse_fd);
	/* allow_other: runsc's gofer is the namespace's root, not the mount
	 * owner's process; default_permissions: the kernel checks each
	 * object's mode, so the router never decides access itself. */
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", "lazaret-router", 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "fd", fd, 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "rootmode", "40000", 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "user_id", "0", 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "group_id", "0", 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "allow_other", NULL, 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "default_permissions", NULL, 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return lz_err_set(err, errno, "configure the workspace FUSE mount: %s", strerror(errno));
	int mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID);
	if (mnt < 0)
		return lz_err_set(err, errno, "create the workspace FUSE mount: %s", strerror(errno));
	*ret_mnt = mnt;
	return 0;
}

int lz_mountns_attach(int mnt, int target_fd, struct lz_mount_id *ret, struct lz_err *err)
{
	/* A FUSE root's inode number is its server's answer, which replaces
	 * the kernel's placeholder (1) at the first attribute fetch: fetched
	 * now, while the server serves, so that the identity recorded is the
	 * one every later (cached) look at the mount sees. Without this, each
	 * exact unmount of the workspace found "not the recorded one". */
	return attach(mnt, target_fd, AT_STATX_FORCE_SYNC, ret, "workspace FUSE mount", err);
}

/* The absolute path fd's directory has in this namespace. */
static int fd_path(int fd, char *buf, size_t cap, struct lz_err *err)
{
	int r = lz_fd_path(fd, buf, cap);
	if (r == -ENAMETOOLONG)
		return lz_err_set(err, ENAMETOOLONG, "descriptor %d has no usable path", fd);
	return r < 0 ? lz_err_set(err, -r, "the path of descriptor %d: %s", fd, strerror(-r)) : 0;
}

static bool same_object(int a, int b)
{
	struct stat sa, sb;
	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int lz_mountns_confine_writes(int *fds, size_t n, struct lz_err *err)
{
	if (n > LZ_MOUNTNS_CONFINE_MAX)
		return lz_err_set(err, EINVAL, "at most %d writable trees", LZ_MOUNTNS_CONFINE_MAX);
	char paths[LZ_MOUNTNS_CONFINE_MAX][4096];
	int clones[LZ_MOUNTNS_CONFINE_MAX] = { -EBADF, -EBADF, -EBADF, -EBADF };
	size_t order[LZ_MOUNTNS_CONFINE_MAX];
	int r = 0;
	/* Cloned from the descriptors, before the namespace: each clone
	 * keeps the flags its tree has, whatever the copy below gets. */
	for (size_t i = 0; i < n && r == 0; i++) {
		order[i] = i;
		if ((r = fd_path(fds[i], paths[i], sizeof(paths[i]), err)) == 0)
			r = clone_tree(fds[i], true, 0, &clones[i], paths[i], err);
	}
	if (r < 0)
		goto out;
	if (unshare(CLONE_NEWNS) < 0) {
		r = lz_err_set(err, errno, "a mount namespace of its own: %s", strerror(errno));
		goto out;
	}
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY, .propagation = MS_PRIVATE };
	if (syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &ro, sizeof(ro)) < 0) {
		r = lz_err_set(err, errno, "every mount read-only: %s", strerror(errno));
		goto out;
	}
	/* Shorter paths first, so that a tree beneath another is attached
	 * on top of the other's clone, not hidden by it. */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && strlen(paths[order[j]]) < strlen(paths[order[j - 1]]); j--) {
			size_t t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	for (size_t k = 0; k < n; k++) {
		size_t i = order[k];
		/* The path must still name the tree the descriptor holds:
		 * otherwise a path through /proc/self/fd would resolve to
		 * another directory than the clone. */
		_cleanup_close_ int target = lz_openat2(AT_FDCWD, paths[i], O_PATH | O_DIRECTORY | O_CLOEXEC,
							RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
		if (target < 0) {
			r = lz_err_set(err, errno, "'%s': %s", paths[i], strerror(errno));
			goto out;
		}
		if (!same_object(target, clones[i])) {
			r = lz_err_set(err, ESTALE, "'%s' no longer names the tree it named", paths[i]);
			goto out;
		}
		struct lz_mount_id id;
		if ((r = attach(clones[i], target, AT_STATX_DONT_SYNC, &id, paths[i], err)) < 0)
			goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (dup3(clones[i], fds[i], O_CLOEXEC) < 0) {
			r = lz_err_set(err, errno, "descriptor %d: %s", fds[i], strerror(errno));
			goto out;
		}
	}
out:
	for (size_t i = 0; i < n; i++)
		lz_close_fdp(&clones[i]);
	return r;
}

int lz_mountns_identify(const char *target, struct lz_mount_id *ret, struct lz_err *err)
{
	_cleanup_close_ int fd = open(target, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return lz_err_set(err, errno, "open '%s': %s", target, strerror(errno));
	return identify_fd(fd, target, ret, err);
}

/* The mount ID that starts the next line of mountinfo
 * (proc_pid_mountinfo(5): the ID, then a space), and the rest of the line
 * skipped, however long: its mount point and root are octal-escaped (a
 * space, tab, newline or backslash takes four bytes), so a path of
 * PATH_MAX bytes, or another mount's options, may make a line of 16 KiB
 * and more. Nothing of a line is kept, so no length needs a limit, and
 * only a line's first bytes are ever taken for an ID: digits in a path
 * are anyone's choice. 1 and *ret set, 0 at the end, -EBADMSG for a line
 * that does not start with an ID or does not end (mountinfo as the
 * kernel writes it has neither), -EIO when the read fails (errno says
 * why). */
static int mountinfo_next_id(FILE *f, uint64_t *ret)
{
	uint64_t id = 0;
	size_t digits = 0;
	int c = getc_unlocked(f);
	if (c == EOF)
		return ferror(f) ? -EIO : 0;
	for (; c >= '0' && c <= '9'; c = getc_unlocked(f), digits++) {
		if (id > (UINT64_MAX - 9) / 10)
			return -EBADMSG;
		id = id * 10 + (uint64_t)(c - '0');
	}
	if (digits == 0 || c != ' ')
		return ferror(f) ? -EIO : -EBADMSG;
	while ((c = getc_unlocked(f)) != '\n')
		if (c == EOF)
			return ferror(f) ? -EIO : -EBADMSG;
	*ret = id;
	return 1;
}

int lz_mountns_present(uint64_t mnt_id, bool *ret, struct lz_err *err)
{
	if (mnt_id >= LZ_MOUNT_ID_UNIQUE_MIN)
		return lz_mountns_present_in(0, mnt_id, ret, err);
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (f == NULL)
		return lz_err_set(err, errno, "read mountinfo: %s", strerror(errno));
	bool found = false;
	uint64_t id = 0;
	int r = 0, read_errno = 0;
	while (!found && (r = mountinfo_next_id(f, &id)) > 0)
		found = id == mnt_id;
	if (r == -EIO)
		read_errno = errno; /* the failed read's */
	fclose(f);
	if (r == -EBADMSG)
		return lz_err_set(err, EBADMSG, "read mountinfo: a line that does not start with a mount ID or "
						"does not end");
	if (r < 0)
		return lz_err_set(err, read_errno ? read_errno : EIO, "read mountinfo: %s",
				  strerror(read_errno ? read_errno : EIO));
	*ret = found;
	return 0;
}

struct mnt_id_request {
	uint32_t size;
	uint32_t spare;
	uint64_t mnt_id;
	uint64_t param;
	uint64_t mnt_ns_id;
};

int lz_mountns_present_in(uint64_t mntns_id, uint64_t mnt_id, bool *ret, struct lz_err *err)
{
	if (mnt_id < LZ_MOUNT_ID_UNIQUE_MIN)
		return lz_err_set(err, EINVAL, "mount ID %llu is not unique", (unsigned long long)mnt_id);
	struct mnt_id_request req = { .size = sizeof(req), .mnt_id = mnt_id, .param = STATMOUNT_SB_BASIC_MASK,
				      .mnt_ns_id = mntns_id };
	/* struct statmount: its 512 bytes of fixed fields hold
	 * STATMOUNT_SB_BASIC. */
	uint64_t buf[64];
	if (syscall(SYS_STATMOUNT, &req, buf, sizeof(buf), 0) == 0) {
		*ret = true;
		return 0;
	}
	if (errno == ENOENT) {
		*ret = false;
		return 0;
	}
	return lz_err_set(err, errno, "statmount of mount %llu: %s", (unsigned long long)mnt_id, strerror(errno));
}

static uint32_t u32_at(const unsigned char *b, size_t off)
{
	uint32_t v;
	memcpy(&v, b + off, sizeof(v));
	return v;
}

/* The string at field off of a statmount answer of n bytes, or NULL. */
static const char *statmount_str(const unsigned char *b, size_t n, size_t off)
{
	uint32_t at = u32_at(b, off);
	if (at >= n - STATMOUNT_FIXED || memchr(b + STATMOUNT_FIXED + at, '\0', n - STATMOUNT_FIXED - at) == NULL)
		return NULL;
	return (const char *)b + STATMOUNT_FIXED + at;
}

int lz_mountns_place(int fd, const char *canonical, struct lz_fs_place *ret, struct lz_err *err)
{
	struct statx stx;
	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID_UNIQUE_MASK, &stx) < 0)
		return lz_err_set(err, errno, "stat '%s': %s", canonical, strerror(errno));
	if (!(stx.stx_mask & STATX_MNT_ID_UNIQUE_MASK))
		return lz_err_set(err, ENOSYS, "stat '%s': the kernel gave no unique mount ID (Linux 6.8)", canonical);
	struct mnt_id_request req = { .size = sizeof(req), .mnt_id = stx.stx_mnt_id,
				      .param = STATMOUNT_SB_BASIC_MASK | STATMOUNT_MNT_ROOT_MASK |
					       STATMOUNT_MNT_POINT_MASK };
	/* Two paths of at most PATH_MAX each, and room to spare. */
	size_t n = STATMOUNT_FIXED + 3 * PATH_MAX;
	_cleanup_free_ unsigned char *b = calloc(1, n);
	if (b == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	if (syscall(SYS_STATMOUNT, &req, b, n, 0) < 0)
		return lz_err_set(err, errno, "statmount of the mount of '%s': %s", canonical, strerror(errno));
	uint64_t mask;
	memcpy(&mask, b + STATMOUNT_OFF_MASK, sizeof(mask));
	const char *root = statmount_str(b, n, STATMOUNT_OFF_MNT_ROOT);
	const char *point = statmount_str(b, n, STATMOUNT_OFF_MNT_POINT);
	uint64_t want = STATMOUNT_SB_BASIC_MASK | STATMOUNT_MNT_ROOT_MASK | STATMOUNT_MNT_POINT_MASK;
	if ((mask & want) != want || root == NULL || point == NULL || root[0] != '/' || point[0] != '/')
		return lz_err_set(err, EPROTO, "statmount of the mount of '%s': an answer without its paths",
				  canonical);
	/* canonical's part beneath the mount point: "" for the point itself. */
	size_t pl = strcmp(point, "/") == 0 ? 0 : strlen(point);
	if (strncmp(canonical, point, pl) != 0 || (canonical[pl] != '/' && canonical[pl] != '\0'))
		return lz_err_set(err, EXDEV, "'%s' is not beneath the mount point '%s' of the mount it is on "
				  "(was it renamed or covered by another mount?)", canonical, point);
	const char *below = canonical + pl;
	char *path = NULL;
	if (strcmp(root, "/") == 0 ? asprintf(&path, "%s", below[0] ? below : "/") < 0
				   : asprintf(&path, "%s%s", root, below) < 0)
		return lz_err_set(err, ENOMEM, "out of memory");
	*ret = (struct lz_fs_place){
		.dev = (uint64_t)u32_at(b, STATMOUNT_OFF_SB_DEV_MAJOR) << 32 | u32_at(b, STATMOUNT_OFF_SB_DEV_MINOR),
		.path = path,
	};
	return 0;
}

void lz_fs_place_release(struct lz_fs_place *p)
{
	free(p->path);
	*p = (struct lz_fs_place){ 0 };
}

bool lz_fs_place_overlaps(const struct lz_fs_place *a, const struct lz_fs_place *b)
{
	return a->path != NULL && b->path != NULL && a->dev == b->dev && lz_path_overlaps(a->path, b->path);
}

int lz_mountns_ns_exists(uint64_t mntns_id, bool *ret, struct lz_err *err)
{
	struct mnt_id_request req = { .size = sizeof(req), .mnt_id = LSMT_ROOT, .mnt_ns_id = mntns_id };
	uint64_t ids[1];
	if (syscall(SYS_LISTMOUNT, &req, ids, 1, 0) >= 0) {
		*ret = true;
		return 0;
	}
	if (errno == ENOENT) {
		*ret = false;
		return 0;
	}
	return lz_err_set(err, errno, "listmount in mount namespace %llu: %s", (unsigned long long)mntns_id,
			  strerror(errno));
}

int lz_mountns_unmount_exact(const char *target, const struct lz_mount_id *id, struct lz_err *err)
{
	struct lz_mount_id now;
	int r = lz_mountns_identify(target, &now, err);
	if (r < 0)
		return r;
	if (now.mnt_id != id->mnt_id || now.dev != id->dev || now.ino != id->ino)
		return lz_err_set(err, ESTALE, "the mount at '%s' is not the recorded one; left untouched",
				  target);
	if (umount2(target, UMOUNT_NOFOLLOW) < 0)
		return lz_err_set(err, errno, "unmount '%s': %s", target, strerror(errno));
	bool present = true;
	if ((r = lz_mountns_present(id->mnt_id, &present, err)) < 0)
		return r;
	if (present)
		return lz_err_set(err, EBUSY, "mount %llu at '%s' is still present after unmount",
				  (unsigned long long)id->mnt_id, target);
	return 0;
}
