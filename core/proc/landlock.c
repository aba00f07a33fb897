/* Landlock for the helpers (landlock.h). */
#include "proc/landlock.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
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

int lz_landlock_abi(void)
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

int lz_landlock_restrict(const struct lz_landlock *l, struct lz_err *err)
{
	int abi = lz_landlock_abi();
	if (abi == 0)
		return 0;
	uint64_t known = fs_known(abi);
	struct ll_ruleset_attr attr = { .handled_access_fs = known };
	if (l->read_files)
		attr.handled_access_fs &= ~(LL_FS_READ_FILE | LL_FS_READ_DIR);
	if (abi >= 4)
		attr.handled_access_net = LL_NET_BIND_TCP | (l->connect_tcp ? 0 : LL_NET_CONNECT_TCP);
	if (abi >= 6)
		attr.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL;
	_cleanup_close_ int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (rs < 0)
		return lz_err_set(err, errno, "Landlock ruleset: %s", strerror(errno));
	for (size_t i = 0; i < l->n_write_dirs; i++) {
		struct ll_path_beneath_attr beneath = { .allowed_access = LL_FS_WRITES & known,
							.parent_fd = l->write_dirs[i] };
		if (l->read_files)
			beneath.allowed_access &= attr.handled_access_fs;
		else
			beneath.allowed_access |= LL_FS_READ_FILE | LL_FS_READ_DIR;
		if (syscall(SYS_landlock_add_rule, rs, LL_RULE_PATH_BENEATH, &beneath, 0) < 0)
			return lz_err_set(err, errno, "Landlock rule for descriptor %d: %s", l->write_dirs[i],
					  strerror(errno));
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || syscall(SYS_landlock_restrict_self, rs, 0) < 0)
		return lz_err_set(err, errno, "Landlock: %s", strerror(errno));
	return abi;
}
