/* Mounts inside the Runtime Supervisor's mount namespace (spec 3.6,
 * issue 4): the root overlay (prepared lower + transient upper), the State
 * Anchor overlays, read-only binds, and exact unmounting. Every mount is built from descriptors with the new mount
 * API (open_tree, fsopen/fsconfig(FSCONFIG_SET_FD)/fsmount, move_mount), so
 * no source path is re-resolved; only an unmount names its target, and only
 * after the mount found there is proved to be the recorded one. */
#ifndef LZ_MOUNTNS_H
#define LZ_MOUNTNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

struct lz_mount_id {
	/* statx STATX_MNT_ID_UNIQUE (Linux 6.8: never reused within a boot,
	 * at least LZ_MOUNT_ID_UNIQUE_MIN), else STATX_MNT_ID (reused). */
	uint64_t mnt_id;
	uint64_t dev;
	uint64_t ino;
};

/* Makes every mount private (no propagation to or from the host) and
 * mounts a proc for the namespace's own PID namespace on /proc. */
int lz_mountns_prepare(struct lz_err *err);

/* Clones the tree at src_fd read-only onto the directory target_fd. */
int lz_mountns_bind_ro(int src_fd, int target_fd, struct lz_mount_id *ret, struct lz_err *err);

/* Clones the tree at src_fd with its submounts (read-only when asked,
 * nosuid, nodev) onto target_fd, a directory or file of the same type:
 * the object the descriptor holds, whatever its path names now. */
int lz_mountns_bind_tree(int src_fd, int target_fd, bool read_only, struct lz_err *err);

/* Overlay (lowerdir+ lower_fd, upperdir, workdir, userxattr) onto target_fd. */
int lz_mountns_overlay(int lower_fd, int upper_fd, int work_fd, int target_fd,
		       struct lz_mount_id *ret, struct lz_err *err);

/* A FUSE mount served through fuse_fd (an open /dev/fuse), created
 * detached, nosuid and nodev (spec 3.5: the workspace router). Attach it
 * only once its server runs: the first access waits for the server. */
int lz_mountns_fuse_new(int fuse_fd, int *ret_mnt, struct lz_err *err);

/* Attaches a detached mount (from lz_mountns_fuse_new) onto target_fd; its
 * server must be serving (the identity takes the root's attributes). */
int lz_mountns_attach(int mnt, int target_fd, struct lz_mount_id *ret, struct lz_err *err);

/* Leaves the caller (CAP_SYS_ADMIN over its mount namespace's owner) in
 * a mount namespace of its own where every mount is read-only but the
 * trees held by fds[0..n): each becomes a writable clone of itself,
 * attached where its path named it (a path through /proc/self/fd/N still
 * resolves to it) and held by fds[i] from then on. What Landlock does not
 * govern (mode, owner, times, xattrs) can then change nothing outside
 * those trees, by any path or by ".." from them. n is at most
 * LZ_MOUNTNS_CONFINE_MAX. Descriptors opened before (standard streams
 * included) still reach the mounts they were opened on: the caller
 * reopens or holds none it must not change. */
#define LZ_MOUNTNS_CONFINE_MAX 4
int lz_mountns_confine_writes(int *fds, size_t n, struct lz_err *err);

/* Identity of the mount whose root is target (an absolute path). */
int lz_mountns_identify(const char *target, struct lz_mount_id *ret, struct lz_err *err);

/* Unmounts target only when the mount there is exactly id; then proves the
 * mount ID is absent from /proc/self/mountinfo. A mismatch refuses
 * (-ESTALE) and leaves the mount untouched. */
int lz_mountns_unmount_exact(const char *target, const struct lz_mount_id *id, struct lz_err *err);

/* The kernel numbers unique mount IDs from 2^31 and reusable ones below
 * it, so a recorded ID says which kind it is. */
#define LZ_MOUNT_ID_UNIQUE_MIN (UINT64_C(1) << 31)

/* Whether mount mnt_id is in the caller's mount namespace: by statmount(2)
 * for a unique ID, else in /proc/self/mountinfo, whose lines may be of
 * any length (only each line's leading ID is read): -EBADMSG for a line
 * there that is not a mount's, the read's error when it fails. *ret
 * untouched on failure. */
int lz_mountns_present(uint64_t mnt_id, bool *ret, struct lz_err *err);

/* Whether the mount with unique ID mnt_id is in the mount namespace with
 * ID mntns_id (proc/nsident.h); a namespace that no longer exists has no
 * mounts. -EINVAL for an ID that is not unique. */
int lz_mountns_present_in(uint64_t mntns_id, uint64_t mnt_id, bool *ret, struct lz_err *err);

/* Where an opened object lies in its file system, whichever mount shows
 * it (spec 3.2 "retained filesystem identities"): the superblock's device
 * and the path from the file system's root, the mount's root (statmount(2))
 * joined with canonical's part beneath the mount point. A bind mount is
 * another name for the same place. -EXDEV when canonical is not beneath the
 * mount point of fd's mount (renamed or covered since it was opened). */
struct lz_fs_place {
	uint64_t dev;
	char *path;
};
int lz_mountns_place(int fd, const char *canonical, struct lz_fs_place *ret, struct lz_err *err);
void lz_fs_place_release(struct lz_fs_place *p);

/* Same place, or one beneath the other in one file system. */
bool lz_fs_place_overlaps(const struct lz_fs_place *a, const struct lz_fs_place *b);

/* Whether the mount namespace with ID mntns_id exists, by listmount(2)
 * (Linux 6.8 with namespace IDs): exact whoever holds it, for a caller
 * with CAP_SYS_ADMIN over its user namespace (its owner included).
 * -EPERM, -EINVAL or -ENOSYS where the kernel cannot tell this caller. */
int lz_mountns_ns_exists(uint64_t mntns_id, bool *ret, struct lz_err *err);

#endif
