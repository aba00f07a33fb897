/* Host readiness probes for `lazaret diag`.
 *
 * Each probe observes one fact the product depends on (kernel version,
 * subordinate ID allocations, setuid helpers, tool versions, device modes,
 * unprivileged user namespaces; C-REFINEMENT.md, runtime dependencies and
 * facts 1 and 4). Probes only observe: none of them changes host state, and
 * the decision whether a fact is good enough is policy, made in Lua
 * (lua/lazaret/diag.lua).
 *
 * Threat: diag runs in the invoking user's session, whose environment may be
 * hostile ($PATH, $LD_PRELOAD, a planted `runsc` earlier in $PATH). So tools
 * are located only by a fixed allow-list of names in fixed root-owned
 * directories, never through $PATH, and are run with an empty environment,
 * no shell, and a hard bound on time (LZ_HOSTPROBE_TOOL_TIMEOUT_MS) and
 * captured output (LZ_HOSTPROBE_OUTPUT_MAX). Text read from the host (subid
 * files) is parsed strictly with bounded sizes and overflow-checked integers.
 *
 * Conventions: functions return >= 0 on success or -errno; results go to the
 * ret_ parameters (last), which are untouched on failure; when err is
 * non-NULL a failure also leaves "<op> '<object>': <reason>" in it. */
#ifndef LZ_HOSTPROBE_H
#define LZ_HOSTPROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/err.h"

/* ---- kernel ------------------------------------------------------------ */

#define LZ_HOSTPROBE_UTS_MAX 65 /* struct utsname field size on Linux */

struct lz_hostprobe_kernel {
	char release[LZ_HOSTPROBE_UTS_MAX]; /* "6.18.44-fc-v657" */
	char machine[LZ_HOSTPROBE_UTS_MAX]; /* "x86_64" */
	bool version_known;                 /* release parsed as major.minor */
	unsigned major;                     /* 0 unless version_known */
	unsigned minor;
};

/* Parses the leading "<major>.<minor>" of a kernel release string; anything
 * after the minor number ("-fc-v657", ".44") is ignored. -EINVAL when the
 * string does not start that way or a number exceeds UINT_MAX. */
int lz_hostprobe_kernel_parse_release(const char *release, struct lz_err *err,
				      unsigned *ret_major, unsigned *ret_minor);

/* uname(2). An unparsable release is not a failure: version_known = false. */
int lz_hostprobe_kernel(struct lz_err *err, struct lz_hostprobe_kernel *ret);

/* ---- identity ---------------------------------------------------------- */

#define LZ_HOSTPROBE_USER_MAX 256

struct lz_hostprobe_identity {
	uid_t uid; /* real uid and gid: the invoking user */
	gid_t gid;
	bool has_user; /* false when the passwd database has no entry */
	char user[LZ_HOSTPROBE_USER_MAX];
};

int lz_hostprobe_identity(struct lz_err *err, struct lz_hostprobe_identity *ret);

/* ---- subordinate IDs (/etc/subuid, /etc/subgid) ------------------------ */

/* Limits: the whole file, and the ranges kept for one user. A file or an
 * allocation beyond them is refused rather than cut short. */
#define LZ_HOSTPROBE_SUBID_FILE_MAX (1024 * 1024)
#define LZ_HOSTPROBE_SUBID_RANGES_MAX 64

enum lz_hostprobe_subid_kind {
	LZ_HOSTPROBE_SUBUID,
	LZ_HOSTPROBE_SUBGID,
};

struct lz_hostprobe_subid_range {
	uint32_t start;
	uint32_t count; /* start + count <= 2^32 */
};

struct lz_hostprobe_subids {
	size_t n; /* ranges in file order */
	struct lz_hostprobe_subid_range ranges[LZ_HOSTPROBE_SUBID_RANGES_MAX];
};

/* Parses subid file bytes (need not be NUL-terminated) and keeps the ranges
 * whose owner field equals user (may be NULL) or the decimal form of uid;
 * shadow's newuidmap and newgidmap match both ways, and both files are
 * keyed by the user (name or uid), never by gid. Lines are
 * "owner:start:count"; empty lines and lines starting with '#' are skipped.
 * Every other line must be well formed, matching or not, since a line
 * newuidmap reads differently would make this report wrong: start and count
 * are decimal without sign or leading zeros, start + count <= 2^32, no
 * spaces, no NUL. Failure: -EINVAL with "parse '<label>': line N: <why>",
 * -E2BIG beyond LZ_HOSTPROBE_SUBID_RANGES_MAX matching ranges, -EFBIG beyond
 * LZ_HOSTPROBE_SUBID_FILE_MAX bytes. */
int lz_hostprobe_subid_parse(const char *bytes, size_t len, const char *label, const char *user,
			     uid_t uid, struct lz_err *err, struct lz_hostprobe_subids *ret);

/* Reads fd (a regular file; the caller keeps ownership) and parses it. */
int lz_hostprobe_subid_read_fd(int fd, const char *label, const char *user, uid_t uid,
			       struct lz_err *err, struct lz_hostprobe_subids *ret);

/* Opens /etc/subuid or /etc/subgid and parses it. */
int lz_hostprobe_subids(enum lz_hostprobe_subid_kind kind, const char *user, uid_t uid,
			struct lz_err *err, struct lz_hostprobe_subids *ret);

/* ---- files and devices ------------------------------------------------- */

struct lz_hostprobe_file {
	mode_t mode; /* type and permission bits, as st_mode */
	uid_t uid;
	gid_t gid;
	int64_t size;
};

/* stat(2) semantics: a symbolic link is followed, as exec and open do. */
int lz_hostprobe_file(const char *path, struct lz_err *err, struct lz_hostprobe_file *ret);

/* Whether the calling user may open the character device at path for
 * reading and writing. The device is opened (O_RDWR|O_NONBLOCK|O_NOCTTY)
 * and closed again, nothing else: opening /dev/fuse or /dev/net/tun has no
 * effect until a mount or TUNSETIFF. -ENODEV when path is not a character
 * device (checked through an O_PATH descriptor before the real open). */
int lz_hostprobe_device_rw(const char *path, struct lz_err *err);

/* ---- user namespaces --------------------------------------------------- */

/* Creates a child that calls unshare(CLONE_NEWUSER) and exits; returns 0
 * when that worked, else the child's -errno (EPERM, ENOSPC, EINVAL, ...). */
int lz_hostprobe_userns(struct lz_err *err);

/* ---- tools ------------------------------------------------------------- */

#define LZ_HOSTPROBE_TOOL_TIMEOUT_MS 5000
#define LZ_HOSTPROBE_OUTPUT_MAX 4096
#define LZ_HOSTPROBE_PATH_MAX 64 /* longest trusted dir + '/' + longest name */

/* The only tool names lz_hostprobe_tool_* accept, NULL-terminated. */
extern const char *const lz_hostprobe_tool_names[];
/* The directories searched, in order, NULL-terminated. Never $PATH. */
extern const char *const lz_hostprobe_trusted_dirs[];

/* Finds name (which must be in lz_hostprobe_tool_names, else -EINVAL) in
 * the first trusted directory holding it. The file must be a regular
 * executable file owned by root or the caller and not writable by group or
 * others, else -EPERM (the search stops there: a file earlier in the order
 * is not skipped in favour of a later one). -ENOENT when no directory has
 * it. ret_path gets "<dir>/<name>". */
int lz_hostprobe_tool_locate(const char *name, struct lz_err *err,
			     char (*ret_path)[LZ_HOSTPROBE_PATH_MAX]);

struct lz_hostprobe_tool {
	char path[LZ_HOSTPROBE_PATH_MAX];
	/* First line of `<path> --version` on stdout, NUL-terminated, bytes
	 * outside printable ASCII replaced by '?'. */
	char version[LZ_HOSTPROBE_OUTPUT_MAX + 1];
};

/* Locates name as above and runs the argument vector {path, "--version"}
 * through execveat on the located descriptor, with an empty environment,
 * stdin and stderr on /dev/null and stdout on a pipe of which at most
 * LZ_HOSTPROBE_OUTPUT_MAX bytes are read. A run longer than
 * LZ_HOSTPROBE_TOOL_TIMEOUT_MS is killed through its pidfd and reaped
 * (-ETIMEDOUT). A non-zero exit is -EIO; empty output is -ENODATA. */
int lz_hostprobe_tool_version(const char *name, struct lz_err *err, struct lz_hostprobe_tool *ret);

#endif
