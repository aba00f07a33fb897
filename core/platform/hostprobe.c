/* Host readiness probes (see hostprobe.h for the contract and the threat).
 *
 * Child processes here are diagnostic probes, not product process
 * management (that is the process broker's job): a probe child is created
 * with clone3(CLONE_PIDFD), is only ever signalled through its pidfd
 * (never kill(pid), which could hit a recycled PID), is reaped by
 * waitid(P_PIDFD) before the probe returns, and never outlives
 * LZ_HOSTPROBE_TOOL_TIMEOUT_MS plus the time SIGKILL takes. Between clone
 * and exec/_exit the child calls only async-signal-safe functions. */
#include "platform/hostprobe.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h> /* AUTOFS_SUPER_MAGIC */
#include <linux/sched.h> /* struct clone_args, CLONE_PIDFD */
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc/spawn.h"
#include "util/cleanup.h"

const char *const lz_hostprobe_tool_names[] = {
	"runsc", "slirp4netns", "newuidmap", "newgidmap", "skopeo", "mmdebstrap", NULL,
};

/* Root-owned system directories in the usual search order. */
const char *const lz_hostprobe_trusted_dirs[] = {
	"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin", NULL,
};

const char *const lz_hostprobe_devices[] = { "/dev/fuse", "/dev/net/tun", "/dev/kvm", NULL };

/* "<op> '<object>': <strerror(errno)>", returning -errno. */
static int fail_errno(struct lz_err *err, const char *op, const char *object)
{
	int e = errno > 0 ? errno : EIO;
	return lz_err_set(err, e, "%s '%s': %s", op, object, strerror(e));
}

/* ---- kernel ------------------------------------------------------------ */

/* Decimal digits at *p into *ret (overflow-checked); advances *p. */
static bool parse_uint(const char **p, unsigned *ret)
{
	const char *s = *p;
	unsigned v = 0;
	if (*s < '0' || *s > '9')
		return false;
	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*p = s;
	*ret = v;
	return true;
}

int lz_hostprobe_kernel_parse_release(const char *release, struct lz_err *err,
				      unsigned *ret_major, unsigned *ret_minor)
{
	const char *p = release;
	unsigned major, minor;
	if (!parse_uint(&p, &major) || *p++ != '.' || !parse_uint(&p, &minor))
		return lz_err_set(err, EINVAL, "parse 'kernel release %.64s': expected <major>.<minor>",
				  release);
	*ret_major = major;
	*ret_minor = minor;
	return 0;
}

int lz_hostprobe_kernel(struct lz_err *err, struct lz_hostprobe_kernel *ret)
{
	struct utsname u;
	struct lz_hostprobe_kernel k = { 0 };
	if (uname(&u) < 0)
		return fail_errno(err, "uname", "kernel");
	snprintf(k.release, sizeof(k.release), "%s", u.release);
	snprintf(k.machine, sizeof(k.machine), "%s", u.machine);
	k.version_known = lz_hostprobe_kernel_parse_release(k.release, NULL, &k.major, &k.minor) == 0;
	*ret = k;
	return 0;
}

/* ---- identity ---------------------------------------------------------- */

#define PASSWD_BUF_MAX (1024 * 1024)

int lz_hostprobe_identity(struct lz_err *err, struct lz_hostprobe_identity *ret)
{
	struct lz_hostprobe_identity id = { .uid = getuid(), .gid = getgid() };
	_cleanup_free_ char *buf = NULL;
	struct passwd pw, *found = NULL;
	int r;

	for (size_t size = 16384;; size *= 2) {
		char *nbuf = realloc(buf, size);
		if (nbuf == NULL)
			return lz_err_set(err, ENOMEM, "getpwuid '%u': %s", (unsigned)id.uid,
					  strerror(ENOMEM));
		buf = nbuf;
		r = getpwuid_r(id.uid, &pw, buf, size, &found);
		if (r != ERANGE || size >= PASSWD_BUF_MAX)
			break;
	}
	/* No entry is a fact to report, not a failure: subordinate IDs can
	 * still be matched by uid (getpwuid_r(3) lets a database say so with
	 * these errors too). A database that could not be read is not "no
	 * entry": matched by uid alone, a line keyed by your name would be
	 * missed, and another range than your usual one mapped. */
	if (r != 0 && r != ENOENT && r != ESRCH && r != EBADF && r != EPERM)
		return lz_err_set(err, r, "read the passwd entry of uid %u: %s", (unsigned)id.uid, strerror(r));
	if (r == 0 && found != NULL && strlen(pw.pw_name) < sizeof(id.user)) {
		id.has_user = true;
		snprintf(id.user, sizeof(id.user), "%s", pw.pw_name);
	}
	*ret = id;
	return 0;
}

/* ---- subordinate IDs --------------------------------------------------- */

/* Strict decimal uint32: no sign, no spaces, no leading zeros (shadow's
 * getulong has accepted octal and hex forms in some releases; refusing them
 * keeps this parser from disagreeing with newuidmap silently). */
static bool parse_u32_field(const char *s, size_t n, uint32_t *ret)
{
	uint64_t v = 0;
	if (n == 0 || (n > 1 && s[0] == '0'))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
		if (v > UINT32_MAX)
			return false;
	}
	*ret = (uint32_t)v;
	return true;
}

static bool is_blank(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] != ' ' && s[i] != '\t')
			return false;
	return true;
}

/* Parses one non-blank, non-comment line. Returns NULL or the reason. */
static const char *parse_subid_line(const char *s, size_t n, const char **ret_owner,
				    size_t *ret_owner_len, struct lz_hostprobe_subid_range *ret)
{
	const char *c1 = memchr(s, ':', n);
	if (c1 == NULL)
		return "expected owner:start:count";
	const char *c2 = memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - s));
	if (c2 == NULL)
		return "expected owner:start:count";
	const char *end = s + n;
	if (memchr(c2 + 1, ':', (size_t)(end - (c2 + 1))) != NULL)
		return "too many fields";
	size_t owner_len = (size_t)(c1 - s);
	if (owner_len == 0)
		return "empty owner";
	for (size_t i = 0; i < owner_len; i++)
		if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
			return "space or control character in owner";

	struct lz_hostprobe_subid_range r;
	if (!parse_u32_field(c1 + 1, (size_t)(c2 - (c1 + 1)), &r.start))
		return "start is not a decimal number below 2^32";
	if (!parse_u32_field(c2 + 1, (size_t)(end - (c2 + 1)), &r.count))
		return "count is not a decimal number below 2^32";
	if ((uint64_t)r.start + r.count > (uint64_t)UINT32_MAX + 1)
		return "start + count overflows the 32-bit ID space";
	*ret_owner = s;
	*ret_owner_len = owner_len;
	*ret = r;
	return NULL;
}

static bool field_equals(const char *field, size_t n, const char *s)
{
	return s != NULL && strlen(s) == n && memcmp(field, s, n) == 0;
}

int lz_hostprobe_subid_parse(const char *bytes, size_t len, const char *label, const char *user,
			     uid_t uid, struct lz_err *err, struct lz_hostprobe_subids *ret)
{
	struct lz_hostprobe_subids out = { 0 }; /* copied to *ret on success only */
	char uid_str[16];

	if (len > LZ_HOSTPROBE_SUBID_FILE_MAX)
		return lz_err_set(err, EFBIG, "parse '%s': larger than %d bytes", label,
				  LZ_HOSTPROBE_SUBID_FILE_MAX);
	snprintf(uid_str, sizeof(uid_str), "%u", (unsigned)uid);

	size_t lineno = 0;
	for (size_t pos = 0; pos < len;) {
		const char *line = bytes + pos;
		const char *nl = memchr(line, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - line) : len - pos;
		pos += n + (nl ? 1 : 0);
		lineno++;

		if (memchr(line, '\0', n) != NULL)
			return lz_err_set(err, EINVAL, "parse '%s': line %zu: NUL byte", label, lineno);
		if (is_blank(line, n) || line[0] == '#')
			continue;

		const char *owner;
		size_t owner_len;
		struct lz_hostprobe_subid_range range;
		const char *why = parse_subid_line(line, n, &owner, &owner_len, &range);
		if (why != NULL)
			return lz_err_set(err, EINVAL, "parse '%s': line %zu: %s", label, lineno, why);
		if (!field_equals(owner, owner_len, user) && !field_equals(owner, owner_len, uid_str))
			continue;
		if (out.n == LZ_HOSTPROBE_SUBID_RANGES_MAX)
			return lz_err_set(err, E2BIG, "parse '%s': line %zu: more than %d ranges for '%s'",
					  label, lineno, LZ_HOSTPROBE_SUBID_RANGES_MAX,
					  user ? user : uid_str);
		out.ranges[out.n++] = range;
	}
	*ret = out;
	return 0;
}

int lz_hostprobe_subid_read_fd(int fd, const char *label, const char *user, uid_t uid,
			       struct lz_err *err, struct lz_hostprobe_subids *ret)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;
	struct stat st;

	if (fstat(fd, &st) < 0)
		return fail_errno(err, "stat", label);
	if (!S_ISREG(st.st_mode))
		return lz_err_set(err, EINVAL, "read '%s': not a regular file", label);
	for (;;) {
		if (len == cap) {
			/* One byte past the limit tells "too large" from "exactly". */
			if (cap > LZ_HOSTPROBE_SUBID_FILE_MAX)
				return lz_err_set(err, EFBIG, "read '%s': larger than %d bytes", label,
						  LZ_HOSTPROBE_SUBID_FILE_MAX);
			size_t ncap = cap ? cap * 2 : 4096;
			if (ncap > LZ_HOSTPROBE_SUBID_FILE_MAX + 1)
				ncap = LZ_HOSTPROBE_SUBID_FILE_MAX + 1;
			char *nbuf = realloc(buf, ncap);
			if (nbuf == NULL)
				return lz_err_set(err, ENOMEM, "read '%s': %s", label, strerror(ENOMEM));
			buf = nbuf;
			cap = ncap;
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fail_errno(err, "read", label);
		if (n == 0)
			break;
		len += (size_t)n;
	}
	return lz_hostprobe_subid_parse(buf, len, label, user, uid, err, ret);
}

int lz_hostprobe_subids(enum lz_hostprobe_subid_kind kind, const char *user, uid_t uid,
			struct lz_err *err, struct lz_hostprobe_subids *ret)
{
	const char *path = kind == LZ_HOSTPROBE_SUBGID ? "/etc/subgid" : "/etc/subuid";
	/* O_NONBLOCK: a FIFO in its place must not hang the report. */
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return fail_errno(err, "open", path);
	return lz_hostprobe_subid_read_fd(fd, path, user, uid, err, ret);
}

int lz_hostprobe_subid_choose(const struct lz_hostprobe_subids *ids, enum lz_hostprobe_subid_kind kind,
			      uint32_t own, const char *who, struct lz_err *err,
			      struct lz_hostprobe_subid_range *ret)
{
	const bool uid = kind == LZ_HOSTPROBE_SUBUID;
	const char *file = uid ? "/etc/subuid" : "/etc/subgid";
	const struct lz_hostprobe_subid_range *best = NULL;
	for (size_t i = 0; i < ids->n; i++)
		if (ids->ranges[i].count >= LZ_HOSTPROBE_SUBID_COUNT &&
		    (best == NULL || ids->ranges[i].start < best->start))
			best = &ids->ranges[i];
	if (best == NULL && ids->n == 0)
		return lz_err_set(err, ENOENT,
				  "no allocation for %s in %s (add a range of at least 65536 IDs with usermod "
				  "--add-sub%s; see docs/install.md)",
				  who, file, uid ? "uids" : "gids");
	if (best == NULL)
		return lz_err_set(err, ENOENT,
				  "no %s range of at least 65536 IDs for you (add one with usermod --add-sub%s; "
				  "see docs/install.md)",
				  file, uid ? "uids" : "gids");
	/* Image IDs 1..65536 become these host IDs (the prepared files in the
	 * Storage Root, what the sandbox creates or chowns): never host root,
	 * a system account, or you. start + count <= 2^32 (the parser). */
	unsigned long long last = (unsigned long long)best->start + best->count - 1;
	const char *why = NULL;
	if (best->start == 0)
		why = uid ? "holds uid 0 (root)" : "holds gid 0 (root)";
	else if (best->start < LZ_HOSTPROBE_SUBID_FLOOR)
		why = "starts below 1000, among the system's IDs";
	else if (own >= best->start && own <= last)
		why = uid ? "holds your own uid" : "holds your own gid";
	if (why != NULL)
		return lz_err_set(err, EPERM,
				  "%s: %s's range %u-%llu (the lowest of at least 65536 IDs, the one a launch "
				  "maps) %s, which image IDs would become; as root, replace it with a range from "
				  "100000 up that no other user holds: usermod --del-sub%s %u-%llu --add-sub%s "
				  "START-END %s (see docs/install.md)",
				  file, who, (unsigned)best->start, last, why, uid ? "uids" : "gids",
				  (unsigned)best->start, last, uid ? "uids" : "gids", who);
	*ret = *best;
	return 0;
}

int lz_hostprobe_subid_range(enum lz_hostprobe_subid_kind kind, const struct lz_hostprobe_identity *me,
			     struct lz_err *err, struct lz_hostprobe_subid_range *ret)
{
	struct lz_hostprobe_subids ids;
	const char *user = me->has_user ? me->user : NULL;
	char who[LZ_HOSTPROBE_USER_MAX];
	if (user != NULL)
		snprintf(who, sizeof(who), "%s", user);
	else
		snprintf(who, sizeof(who), "%u", (unsigned)me->uid); /* usermod takes either */
	int r = lz_hostprobe_subids(kind, user, me->uid, err, &ids);
	if (r < 0)
		return r;
	return lz_hostprobe_subid_choose(&ids, kind, kind == LZ_HOSTPROBE_SUBUID ? me->uid : me->gid, who,
					 err, ret);
}

/* ---- files and devices ------------------------------------------------- */

/* Walks path from "/" one component at a time: each is opened by itself
 * (O_PATH|O_NOFOLLOW, no O_DIRECTORY: a single last component that way
 * neither follows a link nor triggers an automount), and no name is looked
 * up in an autofs directory, where the lookup itself would have the
 * automounter act. */
int lz_hostprobe_file(const char *path, struct lz_err *err, struct lz_hostprobe_file *ret)
{
	int r = lz_path_grammar(path, strlen(path), err);
	if (r < 0)
		return lz_err_prefix(err, r, "stat '%.256s': ", path);
	_cleanup_close_ int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return fail_errno(err, "open", "/");
	struct stat st;
	for (const char *p = path + 1; *p != '\0';) {
		size_t n = strcspn(p, "/");
		char name[NAME_MAX + 1];
		memcpy(name, p, n); /* n <= 255: lz_path_grammar */
		name[n] = '\0';
		struct statfs sfs;
		if (fstatfs(fd, &sfs) < 0)
			return fail_errno(err, "stat", path);
		int dir_len = p - 1 == path ? 1 : (int)(p - 1 - path); /* the directory looked in */
		if (sfs.f_type == AUTOFS_SUPER_MAGIC)
			return lz_err_set(err, EREMOTE,
					  "stat '%s': '%.*s' is an automount directory; the probe looks up no name "
					  "there",
					  path, dir_len, path);
		int next = openat(fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0)
			return fail_errno(err, "stat", path);
		lz_close_fdp(&fd);
		fd = next;
		if (fstat(fd, &st) < 0)
			return fail_errno(err, "stat", path);
		if (S_ISLNK(st.st_mode))
			return lz_err_set(err, ELOOP, "stat '%s': '%.*s' is a symbolic link; the probe follows none",
					  path, (int)(p + n - path), path);
		p += n;
		if (*p == '/')
			p++;
		if (*p != '\0' && !S_ISDIR(st.st_mode))
			return lz_err_set(err, ENOTDIR, "stat '%s': %s", path, strerror(ENOTDIR));
	}
	if (strcmp(path, "/") == 0 && fstat(fd, &st) < 0)
		return fail_errno(err, "stat", path);
	*ret = (struct lz_hostprobe_file){
		.mode = st.st_mode,
		.uid = st.st_uid,
		.gid = st.st_gid,
		.size = (int64_t)st.st_size,
	};
	return 0;
}

static bool device_allowed(const char *path)
{
	for (const char *const *d = lz_hostprobe_devices; *d; d++)
		if (strcmp(*d, path) == 0)
			return true;
	return false;
}

/* lz_hostprobe_device_rw of any path: for the tests' fixture devices. */
static int device_rw_at(const char *path, struct lz_err *err)
{
	_cleanup_close_ int pfd = open(path, O_PATH | O_CLOEXEC);
	_cleanup_close_ int fd = -EBADF;
	struct stat st;
	char proc[64];

	if (pfd < 0)
		return fail_errno(err, "open", path);
	if (fstat(pfd, &st) < 0)
		return fail_errno(err, "stat", path);
	if (!S_ISCHR(st.st_mode))
		return lz_err_set(err, ENODEV, "open '%s': not a character device", path);
	/* Re-open the inode just checked, not the name (which could have been
	 * replaced); the permission check is the same as a plain open's. */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
	fd = open(proc, O_RDWR | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return fail_errno(err, "open read-write", path);
	return 0;
}

int lz_hostprobe_device_rw(const char *path, struct lz_err *err)
{
	if (!device_allowed(path))
		return lz_err_set(err, EINVAL, "open '%.256s': not one of the probed devices (/dev/fuse, /dev/net/tun, "
				  "/dev/kvm)", path);
	return device_rw_at(path, err);
}

/* ---- probe children ---------------------------------------------------- */

/* Child side of the user namespace probe. */
static _Noreturn void userns_child(void)
{
	if (unshare(CLONE_NEWUSER) == 0)
		_exit(0);
	_exit(errno > 0 && errno < 255 ? errno : 255);
}

int lz_hostprobe_userns(struct lz_err *err)
{
	_cleanup_close_ int pidfd = -EBADF;
	siginfo_t info;
	
	pid_t pid = lz_clone_pidfd(0, &pidfd);
	if (pid < 0)
		return lz_err_set(err, -pid, "clone3 'userns probe': %s", strerror(-pid));
	if (pid == 0)
		userns_child();
	int r = lz_reap(pidfd, LZ_HOSTPROBE_TOOL_TIMEOUT_MS, &info);
	if (r < 0)
		return lz_err_set(err, -r, "wait 'userns probe': %s", strerror(-r));
	if (info.si_code == CLD_EXITED && info.si_status == 0)
		return 0;
	if (info.si_code == CLD_EXITED && info.si_status > 0 && info.si_status < 255)
		return lz_err_set(err, info.si_status, "unshare 'CLONE_NEWUSER': %s",
				  strerror(info.si_status));
	return lz_err_set(err, EIO, "wait 'userns probe': child ended abnormally (code %d, status %d)",
			  info.si_code, info.si_status);
}

/* ---- tools ------------------------------------------------------------- */

static bool tool_allowed(const char *name)
{
	for (const char *const *t = lz_hostprobe_tool_names; *t; t++)
		if (strcmp(*t, name) == 0)
			return true;
	return false;
}

/* Whoever can write a directory on the way to the tool (or the tool
 * itself) could rename another file into its place: root and the caller
 * are the only writers allowed. */
static bool writable_by_others(uid_t owner, mode_t mode)
{
	return (owner != 0 && owner != geteuid()) || (mode & (S_IWGRP | S_IWOTH));
}

/* Every directory on canonical's way, "/" down to its parent. Each is
 * opened by its own canonical prefix (no symbolic link, lz_path_open): as
 * long as each is root's or the caller's and writable by no one else, no
 * one else can have changed what these names lead to, the tool's own walk
 * included. */
static int check_directories(const char *canonical, struct lz_err *err)
{
	char prefix[LZ_HOSTPROBE_PATH_MAX];
	const char *last = strrchr(canonical, '/');
	for (const char *p = canonical; p != NULL && p <= last; p = strchr(p + 1, '/')) {
		size_t n = p == canonical ? 1 : (size_t)(p - canonical); /* "/" itself first */
		memcpy(prefix, canonical, n);
		prefix[n] = '\0';
		struct lz_path dir = LZ_PATH_INIT;
		int r = lz_path_open(prefix, &dir, err);
		if (r < 0)
			return lz_err_prefix(err, r, "locate '%s': ", canonical);
		bool bad = !S_ISDIR(dir.mode) || writable_by_others(dir.uid, dir.mode);
		uid_t owner = dir.uid;
		mode_t mode = dir.mode;
		lz_path_release(&dir);
		if (bad)
			return lz_err_set(err, EPERM,
					  "locate '%s': directory '%s' (owner uid %u, mode %04o) may be written by "
					  "someone other than root or you, who could put another program in the "
					  "tool's place; as root, chmod go-w '%s' or install the tool elsewhere",
					  canonical, prefix, (unsigned)owner, (unsigned)(mode & 07777), prefix);
	}
	return 0;
}

/* Finds name in dirs (see lz_hostprobe_tool_locate); *ret gets the checked
 * object, owned by the caller. */
static int locate_in(const char *const dirs[], const char *name, struct lz_err *err, struct lz_path *ret)
{
	char searched[256] = "";
	size_t used = 0;

	if (!tool_allowed(name))
		return lz_err_set(err, EINVAL, "locate '%.64s': not an allowed tool name", name);
	for (const char *const *d = dirs; *d; d++) {
		char path[LZ_HOSTPROBE_PATH_MAX];
		int n = snprintf(path, sizeof(path), "%s/%s", *d, name);
		if (n < 0 || (size_t)n >= sizeof(path))
			return lz_err_set(err, ENAMETOOLONG, "locate '%s': path too long", name);
		n = snprintf(searched + used, sizeof(searched) - used, "%s%s", used ? " " : "", *d);
		if (n > 0)
			used = used + (size_t)n < sizeof(searched) ? used + (size_t)n : sizeof(searched) - 1;

		/* The one resolution of the name: from here on the canonical
		 * path, with no symbolic link, is what is opened and checked. */
		_cleanup_free_ char *canonical = realpath(path, NULL);
		if (canonical == NULL && (errno == ENOENT || errno == ENOTDIR))
			continue;
		if (canonical == NULL)
			return fail_errno(err, "resolve", path);
		/* Messages name the link too when there was one. */
		_cleanup_free_ char *shown = NULL;
		if (strcmp(path, canonical) == 0 ? asprintf(&shown, "%s", path) < 0
						 : asprintf(&shown, "%s -> %s", path, canonical) < 0)
			return lz_err_set(err, ENOMEM, "locate '%s': %s", name, strerror(ENOMEM));
		struct lz_path tool = LZ_PATH_INIT;
		int r = lz_path_open(canonical, &tool, err);
		if (r < 0)
			return lz_err_prefix(err, r, "locate '%s': ", shown);
		if (!S_ISREG(tool.mode) || (tool.mode & 0111) == 0) {
			lz_path_release(&tool);
			return lz_err_set(err, EACCES, "locate '%s': not an executable file", shown);
		}
		/* Another user able to write the file could make us run
		 * anything; refuse rather than skip to a later directory. */
		if (writable_by_others(tool.uid, tool.mode)) {
			uid_t owner = tool.uid;
			lz_path_release(&tool);
			return lz_err_set(err, EPERM, "locate '%s': owned by uid %u or writable by group/others",
					  shown, (unsigned)owner);
		}
		if ((r = check_directories(canonical, err)) < 0) {
			lz_path_release(&tool);
			return r;
		}
		*ret = tool;
		return 0;
	}
	return lz_err_set(err, ENOENT, "locate '%s': not found in %s", name, searched);
}

int lz_hostprobe_tool_locate(const char *name, struct lz_err *err, struct lz_path *ret)
{
	return locate_in(lz_hostprobe_trusted_dirs, name, err, ret);
}

/* Reads from a non-blocking fd into buf until EOF, cap bytes, or deadline.
 * Also stops when the child (pidfd) has exited and the pipe is drained, so
 * a grandchild holding the pipe open cannot stretch the wait.
 * Returns bytes read, or -ETIMEDOUT / -errno. */
static ssize_t read_until(int fd, int pidfd, int64_t deadline, char *buf, size_t cap)
{
	size_t len = 0;
	bool exited = false;
	while (len < cap) {
		ssize_t n = read(fd, buf + len, cap - len);
		if (n > 0) {
			len += (size_t)n;
			continue;
		}
		if (n == 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		if (exited)
			break;
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = pidfd, .events = POLLIN } };
		int r = poll(p, 2, lz_remaining_ms(deadline));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		exited = (p[1].revents & POLLIN) != 0;
	}
	return (ssize_t)len;
}

/* Runs argv from exe_fd (the caller keeps it) with an empty environment and
 * captures up to cap bytes of its stdout within timeout_ms; *ret_len gets
 * the byte count. Output beyond cap is not read: the pipe is closed and a
 * child killed by the resulting SIGPIPE still counts as success. label
 * names the program in messages. */
static int run_capture(int exe_fd, const char *label, char *const argv[], int timeout_ms,
		       struct lz_err *err, char *buf, size_t cap, size_t *ret_len)
{
	_cleanup_close_ int out_r = -EBADF, out_w = -EBADF, pidfd = -EBADF;
	int p[2], r;
	int64_t deadline = lz_now_ms() + timeout_ms;
	siginfo_t info;

	if (pipe2(p, O_CLOEXEC) < 0)
		return fail_errno(err, "pipe", label);
	out_r = p[0];
	out_w = p[1];
	/* Only our end is non-blocking: a separate file description, so the
	 * child's writes still block normally. */
	if (fcntl(out_r, F_SETFL, O_NONBLOCK) < 0)
		return fail_errno(err, "fcntl", label);
	struct lz_spawn spec = {
		.label = label, .exe_fd = exe_fd, .argv = argv,
		.stdin_fd = -1, .stdout_fd = out_w, .stderr_fd = -1,
	};
	if ((r = lz_spawn(&spec, &pidfd, NULL, err)) < 0)
		return r;
	lz_close_fdp(&out_w);

	ssize_t len = read_until(out_r, pidfd, deadline, buf, cap);
	/* A child still writing gets EPIPE/SIGPIPE instead of blocking. */
	lz_close_fdp(&out_r);
	r = lz_reap(pidfd, lz_remaining_ms(deadline), &info);
	if (len == -ETIMEDOUT || r == -ETIMEDOUT)
		return lz_err_set(err, ETIMEDOUT, "run '%s': no exit within %d ms; killed", label,
				  timeout_ms);
	if (len < 0)
		return lz_err_set(err, (int)-len, "read '%s': %s", label, strerror((int)-len));
	if (r < 0)
		return lz_err_set(err, -r, "wait '%s': %s", label, strerror(-r));
	bool truncated = (size_t)len == cap;
	bool ok = (info.si_code == CLD_EXITED && info.si_status == 0) ||
		  (truncated && info.si_code == CLD_KILLED && info.si_status == SIGPIPE);
	if (!ok) {
		if (info.si_code == CLD_EXITED)
			return lz_err_set(err, EIO, "run '%s': exit status %d", label, info.si_status);
		return lz_err_set(err, EIO, "run '%s': killed by signal %d", label, info.si_status);
	}
	*ret_len = (size_t)len;
	return 0;
}

/* The first line of buf[0..len) into out (size > 0), '\r' before the
 * newline dropped and bytes outside printable ASCII replaced by '?', so a
 * report cannot carry terminal escapes or invalid UTF-8. Returns its length. */
static size_t first_line(const char *buf, size_t len, char *out, size_t size)
{
	const char *nl = memchr(buf, '\n', len);
	size_t n = nl ? (size_t)(nl - buf) : len;
	if (n > 0 && buf[n - 1] == '\r')
		n--;
	if (n > size - 1)
		n = size - 1;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)buf[i];
		out[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	out[n] = '\0';
	return n;
}

int lz_hostprobe_tool_version(const char *name, struct lz_err *err, struct lz_hostprobe_tool *ret)
{
	_cleanup_free_ struct lz_hostprobe_tool *t = calloc(1, sizeof(*t));
	_cleanup_free_ char *buf = malloc(LZ_HOSTPROBE_OUTPUT_MAX);
	_cleanup_free_ char *label = NULL;
	struct lz_path exe = LZ_PATH_INIT;
	size_t len = 0;
	int r;

	if (t == NULL || buf == NULL)
		return lz_err_set(err, ENOMEM, "run '%.64s': %s", name, strerror(ENOMEM));
	if ((r = locate_in(lz_hostprobe_trusted_dirs, name, err, &exe)) < 0)
		return r;
	snprintf(t->path, sizeof(t->path), "%s", exe.canonical);
	if (asprintf(&label, "%s --version", t->path) < 0) {
		lz_path_release(&exe);
		return lz_err_set(err, ENOMEM, "run '%.64s': %s", name, strerror(ENOMEM));
	}
	char *argv[] = { t->path, (char *)"--version", NULL };
	r = run_capture(exe.fd, label, argv, LZ_HOSTPROBE_TOOL_TIMEOUT_MS, err, buf, LZ_HOSTPROBE_OUTPUT_MAX,
			&len);
	lz_path_release(&exe);
	if (r < 0)
		return r;
	if (first_line(buf, len, t->version, sizeof(t->version)) == 0)
		return lz_err_set(err, ENODATA, "run '%s': empty first line", label);
	*ret = *t;
	return 0;
}
