/* Confinement of the helpers (confine.h). */
#include "proc/confine.h"

#include <dlfcn.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/cleanup.h"

/* The kernel's interface (linux/landlock.h, uapi), spelled out here: the
 * build machine's headers may predate the ABI the running kernel has. */
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1

#define LL_FS_EXECUTE (UINT64_C(1) << 0)
#define LL_FS_WRITE_FILE (UINT64_C(1) << 1)
#define LL_FS_READ_FILE (UINT64_C(1) << 2)
#define LL_FS_READ_DIR (UINT64_C(1) << 3)
#define LL_FS_REMOVE_DIR (UINT64_C(1) << 4)
#define LL_FS_REMOVE_FILE (UINT64_C(1) << 5)
#define LL_FS_MAKE_CHAR (UINT64_C(1) << 6)
#define LL_FS_MAKE_DIR (UINT64_C(1) << 7)
#define LL_FS_MAKE_REG (UINT64_C(1) << 8)
#define LL_FS_MAKE_SOCK (UINT64_C(1) << 9)
#define LL_FS_MAKE_FIFO (UINT64_C(1) << 10)
#define LL_FS_MAKE_BLOCK (UINT64_C(1) << 11)
#define LL_FS_MAKE_SYM (UINT64_C(1) << 12)
#define LL_FS_REFER (UINT64_C(1) << 13)    /* ABI 2 */
#define LL_FS_TRUNCATE (UINT64_C(1) << 14) /* ABI 3 */
#define LL_FS_IOCTL_DEV (UINT64_C(1) << 15) /* ABI 5 */
#define LL_NET_BIND_TCP (UINT64_C(1) << 0)    /* ABI 4 */
#define LL_NET_CONNECT_TCP (UINT64_C(1) << 1) /* ABI 4 */
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (UINT64_C(1) << 0) /* ABI 6 */
#define LL_SCOPE_SIGNAL (UINT64_C(1) << 1)               /* ABI 6 */

/* The ruleset's attributes as of ABI 6; an older kernel takes the prefix
 * it knows when the rest is zero. */
struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

struct ll_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

/* Everything that changes the tree below a directory. */
#define LL_FS_WRITES                                                                                   \
	(LL_FS_WRITE_FILE | LL_FS_REMOVE_DIR | LL_FS_REMOVE_FILE | LL_FS_MAKE_CHAR | LL_FS_MAKE_DIR |  \
	 LL_FS_MAKE_REG | LL_FS_MAKE_SOCK | LL_FS_MAKE_FIFO | LL_FS_MAKE_BLOCK | LL_FS_MAKE_SYM |       \
	 LL_FS_REFER | LL_FS_TRUNCATE)

int lz_confine_landlock_abi(void)
{
	long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
	return v > 0 ? (int)v : 0;
}

/* The file rights ABI abi knows. */
static uint64_t fs_known(int abi)
{
	uint64_t m = (LL_FS_MAKE_SYM << 1) - 1;
	if (abi >= 2)
		m |= LL_FS_REFER;
	if (abi >= 3)
		m |= LL_FS_TRUNCATE;
	if (abi >= 5)
		m |= LL_FS_IOCTL_DEV;
	return m;
}

/* The call nr fails with errno e (two instructions, the number loaded). */
#define DENY(nr, e)                                          \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (e))

/* The CLONE_NEW* flags (CLONE_NEWTIME is 0x80). */
#define CLONE_NAMESPACES 0x7e020080u

/* The sockets a helper may make: none, or IPv4 ones; no io_uring, whose
 * socket and connect operations the filter would not see; and no new
 * namespace or mount, which would hand a bug the capabilities of a user
 * namespace of its own (the kernel's whole mount and namespace code as
 * its surface) or a way around the router's read-only mounts
 * (fs/mountns.h); no key management call: a key whose permissions let
 * the developer's uid, not only its possessor, read it is read by serial
 * whatever session keyring the helper holds (broker.c), and request_key
 * has the kernel run /sbin/request-key on the host. clone3 answers
 * ENOSYS, so that threads are made by clone, whose flags the filter sees. A call of another architecture
 * (int 0x80) ends the process; an x32 one fails. */
static int filter_sockets(bool inet, struct lz_err *err)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x40000000 /* x32 */, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
		DENY(SYS_io_uring_setup, EACCES),
		DENY(SYS_unshare, EPERM),
		DENY(SYS_setns, EPERM),
		DENY(SYS_mount, EPERM),
		DENY(SYS_umount2, EPERM),
		DENY(SYS_pivot_root, EPERM),
		DENY(SYS_chroot, EPERM),
		DENY(SYS_open_tree, EPERM),
		DENY(SYS_move_mount, EPERM),
		DENY(SYS_fsopen, EPERM),
		DENY(SYS_fsconfig, EPERM),
		DENY(SYS_fsmount, EPERM),
		DENY(SYS_fspick, EPERM),
		DENY(SYS_mount_setattr, EPERM),
		DENY(SYS_keyctl, EPERM),
		DENY(SYS_add_key, EPERM),
		DENY(SYS_request_key, EPERM),
		DENY(SYS_clone3, ENOSYS),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 2),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NAMESPACES, 5, 4),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, inet ? AF_INET : UINT32_MAX, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM), /* clone into a new namespace */
	};
	struct sock_fprog prog = { .len = LZ_ARRAY_SIZE(f), .filter = f };
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return lz_err_set(err, errno, "seccomp socket filter: %s", strerror(errno));
	return 0;
}

int lz_confine(const struct lz_confine *c, struct lz_err *err)
{
	/* Kept loaded (a later dlopen by glibc finds it by its name, without
	 * a file); a system without it fails pthread_cancel as before. */
	(void)dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_NODELETE);
	int abi = lz_confine_landlock_abi();
	_cleanup_close_ int rs = -EBADF;
	if (abi > 0) {
		uint64_t known = fs_known(abi);
		struct ll_ruleset_attr attr = { .handled_access_fs = known };
		if (c->read_anywhere)
			attr.handled_access_fs &= ~(LL_FS_READ_FILE | LL_FS_READ_DIR);
		if (abi >= 4)
			attr.handled_access_net = LL_NET_BIND_TCP | (c->inet ? 0 : LL_NET_CONNECT_TCP);
		if (abi >= 6)
			attr.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL;
		rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
		if (rs < 0)
			return lz_err_set(err, errno, "Landlock ruleset: %s", strerror(errno));
		for (size_t i = 0; i < c->n_write_dirs; i++) {
			struct ll_path_beneath_attr beneath = { .allowed_access = LL_FS_WRITES & known,
								.parent_fd = c->write_dirs[i] };
			if (!c->read_anywhere) /* reads are handled: granted beneath its trees */
				beneath.allowed_access |= LL_FS_READ_FILE | LL_FS_READ_DIR;
			if (syscall(SYS_landlock_add_rule, rs, LL_RULE_PATH_BENEATH, &beneath, 0) < 0)
				return lz_err_set(err, errno, "Landlock rule for descriptor %d: %s", c->write_dirs[i],
						  strerror(errno));
		}
		for (size_t i = 0; !c->read_anywhere && i < c->n_read_paths; i++) {
			struct stat st;
			if (fstat(c->read_paths[i], &st) < 0)
				return lz_err_set(err, errno, "descriptor %d to read: %s", c->read_paths[i],
						  strerror(errno));
			/* a rule on a file may grant only what applies to files */
			struct ll_path_beneath_attr beneath = {
				.allowed_access = LL_FS_READ_FILE | (S_ISDIR(st.st_mode) ? LL_FS_READ_DIR : 0),
				.parent_fd = c->read_paths[i]
			};
			if (syscall(SYS_landlock_add_rule, rs, LL_RULE_PATH_BENEATH, &beneath, 0) < 0)
				return lz_err_set(err, errno, "Landlock rule to read descriptor %d: %s",
						  c->read_paths[i], strerror(errno));
		}
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return lz_err_set(err, errno, "no_new_privs: %s", strerror(errno));
	if (rs >= 0 && syscall(SYS_landlock_restrict_self, rs, 0) < 0)
		return lz_err_set(err, errno, "Landlock: %s", strerror(errno));
	int r = filter_sockets(c->inet, err);
	return r < 0 ? r : abi;
}
