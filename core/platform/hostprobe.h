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
 * The launch runs the same tools (runsc, slirp4netns, newuidmap and
 * newgidmap, skopeo, mmdebstrap) with the developer's full authority, hours
 * after it found them: locating keeps the checked object (an O_PATH
 * descriptor) and the launch executes that descriptor, never the name, so
 * another user who can rename something into place after the check cannot
 * choose what runs (spec 3.2, "trusted external pathname handoff"). Whoever
 * can write a directory on the tool's path could do that before the check
 * too, so every directory on it must be root's or yours and not writable by
 * group or others.
 *
 * diag reports (`lazaret diag --report FILE.lua`, docs/reports.md) reach the
 * file and device probes with paths of their choosing: the file probe
 * follows no symbolic link and enters no automount directory, and the
 * device probe opens only the devices Lazaret needs.
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

#include "fs/pathauth.h"
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

/* The subordinate range a launch maps (spec 3.1: "the lowest configured
 * contiguous allocation of at least 65536"; proc/userns.h) and diag judges:
 * the lowest-starting one of ids' ranges with count >= LZ_HOSTPROBE_SUBID_COUNT,
 * taken as it is (adjacent ranges are not joined). It must be a safe one:
 * image IDs 1..65536 become its IDs on the host, so it may not start below
 * LZ_HOSTPROBE_SUBID_FLOOR (host root and the system's IDs) nor contain own
 * (your uid for /etc/subuid, your gid for /etc/subgid). who names you in
 * the messages' usermod command (your user name, or your uid in decimal).
 * -ENOENT without such a range ("no allocation for <who>" when there is
 * none at all), -EPERM when it is unsafe (no other range is chosen instead:
 * the file needs correcting); both name the file and the fix. Not checked:
 * whether the range holds another account's IDs (that needs the whole
 * passwd database; install.md says to pick a free range). */
#define LZ_HOSTPROBE_SUBID_COUNT 65536u
#define LZ_HOSTPROBE_SUBID_FLOOR 1000u
int lz_hostprobe_subid_choose(const struct lz_hostprobe_subids *ids, enum lz_hostprobe_subid_kind kind,
			      uint32_t own, const char *who, struct lz_err *err,
			      struct lz_hostprobe_subid_range *ret);

/* lz_hostprobe_subids for the invoking user me (lz_hostprobe_identity),
 * then lz_hostprobe_subid_choose with your uid or gid. */
int lz_hostprobe_subid_range(enum lz_hostprobe_subid_kind kind, const struct lz_hostprobe_identity *me,
			     struct lz_err *err, struct lz_hostprobe_subid_range *ret);

/* ---- files and devices ------------------------------------------------- */

struct lz_hostprobe_file {
	mode_t mode; /* type and permission bits, as st_mode */
	uid_t uid;
	gid_t gid;
	int64_t size;
};

/* What is at path (absolute, no "." or ".." component, no empty one:
 * lz_path_grammar, else -EINVAL), reached one component at a time from "/"
 * with O_PATH|O_NOFOLLOW descriptors: a symbolic link anywhere on the way,
 * the last component included, refuses (-ELOOP), and so does a directory on
 * the way that is an autofs mount (-EREMOTE), whose names the automounter
 * would look up (contacting the host /net/<host> names, say). Nothing is
 * opened for reading. */
int lz_hostprobe_file(const char *path, struct lz_err *err, struct lz_hostprobe_file *ret);

/* The devices lz_hostprobe_device_rw probes, NULL-terminated: FUSE and TUN
 * (what a launch needs) and KVM. */
extern const char *const lz_hostprobe_devices[];

/* Whether the calling user may open the character device at path, which
 * must be one of lz_hostprobe_devices (else -EINVAL: opening another device
 * can be an action, a serial port's DTR resetting a board), for reading and
 * writing. The device is opened (O_RDWR|O_NONBLOCK|O_NOCTTY) and closed
 * again, nothing else: opening /dev/fuse, /dev/net/tun or /dev/kvm has no
 * effect until a mount, TUNSETIFF or KVM_CREATE_VM. -ENODEV when path is not
 * a character device (checked through an O_PATH descriptor before the real
 * open). */
int lz_hostprobe_device_rw(const char *path, struct lz_err *err);

/* ---- user namespaces --------------------------------------------------- */

/* Creates a child that calls unshare(CLONE_NEWUSER) and exits; returns 0
 * when that worked, else the child's -errno (EPERM, ENOSPC, EINVAL, ...). */
int lz_hostprobe_userns(struct lz_err *err);

/* ---- tools ------------------------------------------------------------- */

#define LZ_HOSTPROBE_TOOL_TIMEOUT_MS 5000
#define LZ_HOSTPROBE_OUTPUT_MAX 4096
#define LZ_HOSTPROBE_PATH_MAX (LZ_PATH_MAX + 1) /* a canonical path and its NUL */

/* The only tool names lz_hostprobe_tool_* accept, NULL-terminated. */
extern const char *const lz_hostprobe_tool_names[];
/* The directories searched, in order, NULL-terminated. Never $PATH. */
extern const char *const lz_hostprobe_trusted_dirs[];

/* Finds name (which must be in lz_hostprobe_tool_names, else -EINVAL) in
 * the first trusted directory holding it, and resolves that name once
 * (realpath: a link there to a file elsewhere is followed to its canonical
 * path). The canonical path is opened with no symbolic link anywhere
 * (lz_path_open) and checked on the opened object: a regular executable
 * file (else -EACCES), owned by root or the caller and not writable by
 * group or others (else -EPERM); and every directory on that path, from
 * "/" down, must be owned by root or the caller and not be writable by
 * group or others (else -EPERM naming it: whoever can write it can rename
 * another file into the tool's place). The search stops at the first
 * directory holding the name: a file that fails is not skipped in favour of
 * a later one. -ENOENT when no directory has it.
 *
 * ret gets the checked object: an O_PATH descriptor and its canonical path,
 * a label only (lz_path_release frees both). Run the tool from the
 * descriptor (lz_spawn.exe_fd, execveat), never by a name, so what runs is
 * what was checked however the names change later (spec 3.2); the caller
 * then keeps it out of the trees the sandbox can write and Lazaret controls
 * (config/config.h lz_config_host_tool, which knows them). A script cannot run from the descriptor
 * (its interpreter would be handed a /dev/fd name that close-on-exec has
 * closed): mmdebstrap (Perl) runs by its canonical path, whose directories
 * this check covers. */
int lz_hostprobe_tool_locate(const char *name, struct lz_err *err, struct lz_path *ret);

struct lz_hostprobe_tool {
	char path[LZ_HOSTPROBE_PATH_MAX]; /* canonical (lz_hostprobe_tool_locate) */
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
