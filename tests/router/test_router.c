/* The Ignored Workspace State router through a real FUSE mount (router.h;
 * spec 3.5 "Ignored Workspace State routing contract").
 *
 * Every test runs in a forked child that unshares a user namespace (its
 * own uid and gid mapped to 0, so it works as root and as an ordinary
 * user) and a private mount namespace, serves the router on a temporary
 * directory from a thread (or a child process, for router loss), and
 * checks through the mount, looking at the two backing directories
 * directly to see which one received the bytes. Failures travel through a
 * pipe (CHECK), so cmocka's process never joins the namespaces and a
 * failed test leaves no mount behind (the mount namespace dies with the
 * child).
 *
 * The classifier is a test one: a last component ending in ".ign" or any
 * component "node_modules" routes ISOLATED, so does a directory named "out"
 * (a directory-only pattern: a file "out" routes HOST), a last component starting with
 * "bad" is INCONSISTENT, one starting with "flip" routes ISOLATED only
 * after a publish flips it; everything else routes HOST. As in Git, what
 * lies below an isolated directory is isolated too (no rule re-includes
 * it). Timeouts are long (60 s) so that a missing invalidation shows.
 * Tests of Git's own layouts (nested repositories, linked worktrees,
 * submodules, a bare workspace) serve the real classifier instead
 * (real_classifier: an lz_ignoreclass snapshot of a repository made with
 * git), with its watch where they change the index. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define FUSE_USE_VERSION 312
#include <fuse3/fuse_lowlevel.h>
#include <strings.h>

#include "router/ignorewatch.h"
#include "router/router.h"

#define FUSE_SUPER_MAGIC 0x65735546

#include "lz_child.h"
/* call returns -1 with errno e */
#define CHECK_ERRNO(call, e)                                                                   \
	do {                                                                                   \
		errno = 0;                                                                     \
		long r_ = (long)(call);                                                        \
		if (r_ != -1 || errno != (e))                                                  \
			child_fail(__FILE__, __LINE__, "%s returned %ld errno %d (%s), expected %s", \
				   #call, r_, errno, strerror(errno), #e);                     \
	} while (0)
#define CHECK_OK(call)                                                                    \
	do {                                                                              \
		errno = 0;                                                                \
		long r_ = (long)(call);                                                   \
		if (r_ < 0)                                                               \
			child_fail(__FILE__, __LINE__, "%s failed: %s", #call, strerror(errno)); \
	} while (0)

/* ---- the test classifier ------------------------------------------------ */

struct tcls {
	bool flipped;
};

static int tcls_route(void *ctx, const char *path, size_t len, bool is_dir, enum lz_route *ret)
{
	const struct tcls *c = ctx;
	size_t start = 0;
	for (size_t k = 0; k <= len; k++) {
		if (k < len && path[k] != '/')
			continue;
		if (k - start == 12 && memcmp(path + start, "node_modules", 12) == 0) {
			*ret = LZ_ROUTE_ISOLATED;
			return 0;
		}
		/* "out/": a directory-only pattern */
		if (k - start == 3 && memcmp(path + start, "out", 3) == 0 && (k < len || is_dir)) {
			*ret = LZ_ROUTE_ISOLATED;
			return 0;
		}
		/* below an isolated directory */
		if (k < len && ((k - start >= 4 && memcmp(path + k - 4, ".ign", 4) == 0) ||
				(c->flipped && k - start >= 4 && memcmp(path + start, "flip", 4) == 0))) {
			*ret = LZ_ROUTE_ISOLATED;
			return 0;
		}
		if (k < len)
			start = k + 1;
	}
	const char *last = path + start;
	size_t ll = len - start;
	if (ll >= 4 && memcmp(path + len - 4, ".ign", 4) == 0)
		*ret = LZ_ROUTE_ISOLATED;
	else if (ll >= 3 && memcmp(last, "bad", 3) == 0)
		*ret = LZ_ROUTE_INCONSISTENT;
	else if (ll >= 4 && memcmp(last, "flip", 4) == 0)
		*ret = c->flipped ? LZ_ROUTE_ISOLATED : LZ_ROUTE_HOST;
	else
		*ret = LZ_ROUTE_HOST;
	return 0;
}

/* Guards as lz_ignoreclass_guard would give them for a repository whose
 * configuration includes keep/ctl and flipkeep/ctl. */
static int tcls_guard(void *ctx, const char *path, size_t len, bool is_dir, enum lz_guard *ret)
{
	(void)ctx;
	static const char *const control[] = { ".git/config", ".git/hooks", "keep/ctl", "flipkeep/ctl" };
	static const char *const holds[] = { ".git", "keep", "flipkeep" };
	*ret = LZ_GUARD_NONE;
	for (size_t k = 0; k < sizeof(control) / sizeof(control[0]); k++) {
		size_t n = strlen(control[k]);
		if (len >= n && memcmp(path, control[k], n) == 0 && (len == n || path[n] == '/'))
			*ret = LZ_GUARD_CONTROL;
	}
	for (size_t k = 0; k < sizeof(holds) / sizeof(holds[0]) && *ret == LZ_GUARD_NONE && is_dir; k++)
		if (len == strlen(holds[k]) && memcmp(path, holds[k], len) == 0)
			*ret = LZ_GUARD_HOLDS;
	if (*ret == LZ_GUARD_NONE && len > 5 && memcmp(path, ".git/", 5) == 0)
		*ret = LZ_GUARD_GITDATA;
	return 0;
}

static struct tcls tcls_plain = { false }, tcls_flipped = { true };

static struct lz_router_classifier test_classifier(struct tcls *c)
{
	return (struct lz_router_classifier){ .route = tcls_route, .guard = tcls_guard, .ctx = c };
}

/* ---- harness -------------------------------------------------------------- */

struct env {
	char dir[64];
	char host[96], iso[96], mnt[96], out[96];
	lz_router *r;
	int ctl; /* socket to the router process's control thread */
};

static char *P(const char *base, const char *rel)
{
	static char bufs[8][512];
	static int next;
	char *b = bufs[next++ % 8];
	snprintf(b, 512, "%s/%s", base, rel);
	return b;
}

static void write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	CHECK(fd >= 0, "open '%s': %s", path, strerror(errno));
	CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write '%s'", path);
	CHECK(close(fd) == 0, "close '%s': %s", path, strerror(errno));
}

static const char *read_text(const char *path)
{
	static char buf[4096];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0, "open '%s': %s", path, strerror(errno));
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	CHECK(n >= 0, "read '%s'", path);
	buf[n] = '\0';
	close(fd);
	return buf;
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* Git as the tests run it: no configuration of the machine's or yours. */
#define GIT "GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent git -c user.name=t -c user.email=t@t "

/* Runs a shell command (printf-style); fails the test unless it succeeds. */
static void __attribute__((format(printf, 1, 2))) shell(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	CHECK(n > 0 && (size_t)n < sizeof(cmd), "command too long");
	CHECK(system(cmd) == 0, "command failed: %s", cmd);
}

/* Waits (at most 20 s: the watch's quiet time and a rebuild on a busy
 * machine) until path reads as text (text NULL: until it is absent). */
static bool wait_for_text(const char *path, const char *text)
{
	for (int k = 0; k < 2000; k++) {
		char buf[256];
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 && text == NULL && errno == ENOENT)
			return true;
		if (fd >= 0) {
			ssize_t n = read(fd, buf, sizeof(buf) - 1);
			close(fd);
			if (text != NULL && n >= 0 && (size_t)n == strlen(text) && memcmp(buf, text, (size_t)n) == 0)
				return true;
		}
		usleep(10000);
	}
	return false;
}

/* Whether ID 1000 is mapped too (the tests run as root): a chown to it
 * then reaches the router's policy instead of failing unmapped. */
static bool foreign_id_mapped;

static void write_file(const char *file, const char *text)
{
	int fd = open(file, O_WRONLY | O_CLOEXEC);
	CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text), "%s: %s", file,
	      strerror(errno));
	close(fd);
}

/* A user namespace where 0 is the caller. As root, a helper left in the
 * parent namespace also maps 1000 (a map of more than one ID must be
 * written from there). */
static void enter_namespaces(void)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	char line[64], path[64];
	if (uid == 0 && gid == 0) {
		int go[2];
		CHECK_OK(pipe2(go, O_CLOEXEC));
		pid_t self = getpid(), h = fork();
		CHECK(h >= 0);
		if (h == 0) {
			char c;
			close(go[1]);
			if (read(go[0], &c, 1) != 1)
				_exit(1);
			snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)self);
			write_file(path, "0 0 1\n1000 1000 1\n");
			snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)self);
			write_file(path, "0 0 1\n1000 1000 1\n");
			_exit(0);
		}
		close(go[0]);
		CHECK_OK(unshare(CLONE_NEWUSER | CLONE_NEWNS));
		CHECK(write(go[1], "", 1) == 1);
		close(go[1]);
		int status = 0;
		CHECK(waitpid(h, &status, 0) == h && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "id map helper failed");
		foreign_id_mapped = true;
	} else {
		CHECK_OK(unshare(CLONE_NEWUSER | CLONE_NEWNS));
		write_file("/proc/self/setgroups", "deny");
		snprintf(line, sizeof(line), "0 %u 1\n", (unsigned)uid);
		write_file("/proc/self/uid_map", line);
		snprintf(line, sizeof(line), "0 %u 1\n", (unsigned)gid);
		write_file("/proc/self/gid_map", line);
	}
	CHECK_OK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL));
}

static bool is_mounted(const char *mnt)
{
	struct statfs sf;
	return statfs(mnt, &sf) == 0 && sf.f_type == FUSE_SUPER_MAGIC;
}

static void wait_mounted(const char *mnt)
{
	for (int k = 0; k < 500 && !is_mounted(mnt); k++)
		usleep(10000);
	CHECK(is_mounted(mnt), "router never mounted '%s'", mnt);
}

/* When nonzero, the router process runs with this RLIMIT_NOFILE and the
 * default descriptor budget (a quarter of it). */
static rlim_t router_nofile;
/* When set, regular files are opened by OPEN requests (kernel_open off),
 * the path for kernels without FUSE_CAP_NO_OPEN_SUPPORT. */
static bool open_requests;
/* When set, the router process also runs the ignore watch over e->host,
 * which reports host changes to the router (its caches). */
static bool router_watch;
/* When set, absent names are not cached by the kernel. */
static bool no_negative_cache;
/* When >= 0, the router process (and the body, its child) runs with this
 * umask: the router inherits the developer's. */
static int router_umask = -1;
/* When nonzero, the index guard's bound (max_index_bytes). */
static size_t index_max;
/* When nonzero, the bound on listings held at once (max_listing_bytes). */
static size_t listing_max;
/* When set, the router serves the real classifier (an lz_ignoreclass
 * snapshot of e->host, as lazaret-router does) instead of the test one,
 * and the watch, when on, starts from that snapshot. */
static bool real_classifier;

static struct lz_router_options test_options(void)
{
	struct lz_router_options o;
	lz_router_options_default(&o);
	o.entry_timeout = o.attr_timeout = o.negative_timeout = 60.0;
	if (no_negative_cache)
		o.negative_timeout = 0;
	o.max_threads = 4;
	/* every test runs with descriptors evicted and reopened by name */
	o.max_cached_fds = router_nofile ? 0 : 16;
	o.kernel_open = !open_requests;
	o.max_index_bytes = index_max;
	o.max_listing_bytes = listing_max;
	return o;
}

/* *ret_snap: the real classifier's snapshot (real_classifier; the
 * router's, valid until a publish), else NULL. */
static lz_router *new_router(struct env *e, lz_ignoreclass **ret_snap)
{
	int h = open(e->host, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int i = open(e->iso, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(h >= 0 && i >= 0, "open backings: %s", strerror(errno));
	struct lz_router_options o = test_options();
	struct lz_err err = { 0, "" };
	struct lz_router_classifier cls = test_classifier(&tcls_plain);
	*ret_snap = NULL;
	if (real_classifier) {
		struct lz_ignoreclass_inputs in = { .workspace_fd = h, .isolated_fd = i };
		CHECK(lz_ignoreclass_build(&in, ret_snap, &err) == 0, "build: %s", err.msg);
		cls = lz_router_classifier_ignoreclass(*ret_snap);
	}
	lz_router *r = NULL;
	CHECK(lz_router_new(h, i, cls, &o, &r, &err) == 0, "%s", err.msg);
	close(h);
	close(i);
	return r;
}

struct serve_arg {
	struct env *e;
	struct lz_err err;
	int rc;
};

static void *serve_thread(void *p)
{
	struct serve_arg *a = p;
	a->rc = lz_router_serve(a->e->r, a->e->mnt, -1, &a->err);
	return NULL;
}

/* The router process's control thread: publishes on the body's request
 * ('f': the flipped classifier, 'p': the plain one) or retries a pending
 * invalidation ('r') and answers the rc ('y': 0). */
static void *control_thread(void *p)
{
	struct env *e = p;
	char c;
	while (read(e->ctl, &c, 1) == 1) {
		int rc = c == 'r' ? lz_router_retry_invalidation(e->r)
				  : lz_router_publish(e->r, test_classifier(c == 'f' ? &tcls_flipped : &tcls_plain));
		char res = rc == 0 ? 'y' : 'n';
		if (write(e->ctl, &res, 1) != 1)
			break;
	}
	return NULL;
}

/* In the body: asks the router process to do c. */
static int control(struct env *e, char c)
{
	char res = 0;
	if (write(e->ctl, &c, 1) != 1 || read(e->ctl, &res, 1) != 1)
		return -EIO;
	return res == 'y' ? 0 : -EIO;
}

static int publish(struct env *e, bool flipped)
{
	return control(e, flipped ? 'f' : 'p');
}

struct router_child_arg {
	struct env *e;
	void (*body)(struct env *e);
};

/* When set, the host backing is the test file system below whose sub
 * folds case (mounted on e->host in the router's namespaces). */
static bool casefold_subdir_host;
static void mount_casefold_subdir_host(const char *at);
/* The test file system's root (below) is then an ordinary directory that
 * also holds sub, a directory reporting FS_CASEFOLD_FL. */
static bool ci_subdir;

static void router_child(void *argp)
{
	struct env *e = ((struct router_child_arg *)argp)->e;
	void (*body)(struct env *e) = ((struct router_child_arg *)argp)->body;
	enter_namespaces();
	if (casefold_subdir_host)
		mount_casefold_subdir_host(e->host);
	int ctl[2];
	CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl));
	if (router_umask >= 0)
		umask((mode_t)router_umask);
	if (router_nofile > 0) {
		struct rlimit rl = { router_nofile, router_nofile };
		CHECK_OK(setrlimit(RLIMIT_NOFILE, &rl));
	}
	/* The body is forked before the router starts a thread, and waits
	 * for the mount: forked from the router's threads, it inherited any
	 * lock one of them held (under ASan the allocator's, while the router
	 * allocated: the body's first free waited forever). Nor does it hold
	 * the router's /dev/fuse descriptor: if the router dies, the
	 * connection aborts (ENOTCONN) instead of waiting forever. */
	int go[2];
	CHECK_OK(pipe2(go, O_CLOEXEC));
	fflush(NULL);
	pid_t body_pid = fork();
	CHECK(body_pid >= 0);
	if (body_pid == 0) {
		char ready = 0;
		close(go[1]);
		close(ctl[0]);
		if (read(go[0], &ready, 1) != 1)
			_exit(1); /* the router did not start; it reported why */
		e->ctl = ctl[1];
		body(e);
		_exit(0);
	}
	close(go[0]);
	lz_ignoreclass *snap;
	e->r = new_router(e, &snap);
	lz_ignorewatch *watch = NULL;
	if (router_watch) {
		int h = open(e->host, O_PATH | O_DIRECTORY | O_CLOEXEC);
		int i = open(e->iso, O_PATH | O_DIRECTORY | O_CLOEXEC);
		struct lz_ignoreclass_inputs in = { .workspace_fd = h, .isolated_fd = i };
		struct lz_err werr = { 0, "" };
		CHECK(lz_ignorewatch_start(e->r, &in, snap, 0, -1, &watch, &werr) == 0, "%s", werr.msg);
		close(h);
		close(i);
	}
	struct serve_arg sa = { .e = e, .err = { 0, "" } };
	pthread_t t, c;
	CHECK(pthread_create(&t, NULL, serve_thread, &sa) == 0, "pthread_create");
	for (int k = 0; k < 500 && !is_mounted(e->mnt); k++)
		usleep(10000);
	CHECK(is_mounted(e->mnt), "router never mounted: %s", sa.err.msg);
	e->ctl = ctl[0];
	CHECK(pthread_create(&c, NULL, control_thread, e) == 0, "pthread_create");
	CHECK(write(go[1], "g", 1) == 1);
	close(go[1]);
	int status = 0;
	CHECK(waitpid(body_pid, &status, 0) == body_pid);
	CHECK_OK(umount2(e->mnt, MNT_DETACH));
	pthread_join(t, NULL);
	shutdown(ctl[1], SHUT_RDWR);
	pthread_join(c, NULL);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		_exit(1); /* the body reported why */
	CHECK(sa.rc == 0, "serve: %s", sa.err.msg);
	lz_ignorewatch_stop(watch);
	lz_router_free(e->r);
}

/* Runs body with the router mounted on e->mnt: the forked child enters
 * the namespaces and serves; body runs in a grandchild, so that a failing
 * body exits (flushing its open files through the mount) while the
 * router still answers. */
static void with_router(struct env *e, void (*body)(struct env *e))
{
	run_in_child(router_child, &(struct router_child_arg){ e, body });
}

/* ext4 places a directory made in a "top" directory (FS_TOPDIR_FL, which
 * its owner may set) in a block group of its own choosing, away from the
 * parent's, and the files made in it there. The backings then share no
 * group with /tmp, where compilers and other tests make and remove files
 * all the time: the inode numbers the reuse tests free are not taken by
 * them. Best effort (other file systems have no such flag). */
static void mark_top_directory(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int flags = 0;
	if (fd < 0)
		return;
	if (ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0) {
		flags |= FS_TOPDIR_FL;
		(void)ioctl(fd, FS_IOC_SETFLAGS, &flags);
	}
	close(fd);
}

static int setup(void **state)
{
	/* a failed test leaves by longjmp, past the resets of RUN_BOTH and
	 * the descriptor test */
	open_requests = false;
	router_nofile = 0;
	no_negative_cache = false;
	router_umask = -1;
	index_max = 0;
	listing_max = 0;
	real_classifier = false;
	router_watch = false;
	casefold_subdir_host = false;
	ci_subdir = false;
	struct env *e = calloc(1, sizeof(*e));
	if (e == NULL)
		return -1;
	snprintf(e->dir, sizeof(e->dir), "/tmp/lz-test-router.XXXXXX");
	if (mkdtemp(e->dir) == NULL)
		return -1;
	mark_top_directory(e->dir);
	snprintf(e->host, sizeof(e->host), "%s/host", e->dir);
	snprintf(e->iso, sizeof(e->iso), "%s/iso", e->dir);
	snprintf(e->mnt, sizeof(e->mnt), "%s/mnt", e->dir);
	snprintf(e->out, sizeof(e->out), "%s/outside", e->dir);
	if (mkdir(e->host, 0755) < 0 || mkdir(e->iso, 0755) < 0 || mkdir(e->mnt, 0755) < 0 ||
	    mkdir(e->out, 0755) < 0)
		return -1;
	*state = e;
	return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static int teardown(void **state)
{
	struct env *e = *state;
	int r = nftw(e->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(e);
	return r == 0 ? 0 : -1;
}

#define RUN(body)                                  \
	static void test_##body(void **state)      \
	{                                          \
		with_router(*state, body);         \
	}

/* RUN, and once more with OPEN requests (open handles of their own). */
#define RUN_BOTH(body)                                     \
	RUN(body)                                          \
	static void test_##body##__open_requests(void **state) \
	{                                                  \
		open_requests = true;                      \
		with_router(*state, body);                 \
		open_requests = false;                     \
	}

/* ---- routing of new content ------------------------------------------------ */

static void router__writes_land_in_the_routed_backing(struct env *e)
{
	write_text(P(e->mnt, "a.txt"), "host bytes");
	write_text(P(e->mnt, "b.ign"), "isolated bytes");
	CHECK_OK(mkdir(P(e->mnt, "src"), 0755));
	write_text(P(e->mnt, "src/c.ign"), "deep isolated");
	CHECK_OK(mkdir(P(e->mnt, "node_modules"), 0755));
	CHECK_OK(mkdir(P(e->mnt, "node_modules/pkg"), 0755));
	write_text(P(e->mnt, "node_modules/pkg/index.js"), "js");

	CHECK(strcmp(read_text(P(e->host, "a.txt")), "host bytes") == 0);
	CHECK(!exists(P(e->iso, "a.txt")));
	CHECK(strcmp(read_text(P(e->iso, "b.ign")), "isolated bytes") == 0);
	CHECK(!exists(P(e->host, "b.ign")));
	CHECK(exists(P(e->host, "src")) && !exists(P(e->host, "src/c.ign")));
	/* the isolated parent was made on demand */
	CHECK(strcmp(read_text(P(e->iso, "src/c.ign")), "deep isolated") == 0);
	CHECK(strcmp(read_text(P(e->iso, "node_modules/pkg/index.js")), "js") == 0);
	CHECK(!exists(P(e->host, "node_modules")));
	/* and read back through the mount */
	CHECK(strcmp(read_text(P(e->mnt, "src/c.ign")), "deep isolated") == 0);

	/* truncate and chmod reach the same object */
	CHECK_OK(truncate(P(e->mnt, "b.ign"), 3));
	CHECK_OK(chmod(P(e->mnt, "a.txt"), 0600));
	struct stat st;
	CHECK_OK(stat(P(e->iso, "b.ign"), &st));
	CHECK(st.st_size == 3);
	CHECK_OK(stat(P(e->host, "a.txt"), &st));
	CHECK((st.st_mode & 07777) == 0600);

	CHECK_OK(unlink(P(e->mnt, "b.ign")));
	CHECK(!exists(P(e->iso, "b.ign")));
	CHECK_OK(unlink(P(e->mnt, "a.txt")));
	CHECK(!exists(P(e->host, "a.txt")));
}
RUN_BOTH(router__writes_land_in_the_routed_backing)

static void router__hides_the_entry_the_route_does_not_select(struct env *e)
{
	/* set up behind the router's back: a host file at an isolated path
	 * (no isolated object) and an isolated file at a host path */
	write_text(P(e->host, "secret.ign"), "host ignored");
	write_text(P(e->iso, "stale.txt"), "stale isolated");
	CHECK_OK(mkdir(P(e->host, "node_modules"), 0755));
	write_text(P(e->host, "node_modules/evil.js"), "host js");

	CHECK_ERRNO(open(P(e->mnt, "secret.ign"), O_RDONLY), ENOENT);
	CHECK_ERRNO(open(P(e->mnt, "stale.txt"), O_RDONLY), ENOENT);
	CHECK_ERRNO(access(P(e->mnt, "node_modules"), F_OK), ENOENT);
	CHECK_ERRNO(unlink(P(e->mnt, "secret.ign")), ENOENT);

	DIR *d = opendir(e->mnt);
	CHECK(d != NULL);
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		CHECK(strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0,
		      "unexpected entry '%s'", de->d_name);
	closedir(d);

	/* creating the hidden name makes the isolated object; the host one
	 * is untouched and stays hidden */
	write_text(P(e->mnt, "secret.ign"), "new");
	CHECK(strcmp(read_text(P(e->mnt, "secret.ign")), "new") == 0);
	CHECK(strcmp(read_text(P(e->host, "secret.ign")), "host ignored") == 0);
	CHECK(strcmp(read_text(P(e->iso, "secret.ign")), "new") == 0);
	write_text(P(e->mnt, "stale.txt"), "host now");
	CHECK(strcmp(read_text(P(e->host, "stale.txt")), "host now") == 0);
	CHECK(strcmp(read_text(P(e->iso, "stale.txt")), "stale isolated") == 0);
}
RUN(router__hides_the_entry_the_route_does_not_select)

static void list(const char *dir, char *out, size_t cap)
{
	DIR *d = opendir(dir);
	CHECK(d != NULL, "opendir '%s': %s", dir, strerror(errno));
	out[0] = '\0';
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		strncat(out, de->d_name, cap - strlen(out) - 2);
		strcat(out, ",");
	}
	closedir(d);
}

static void router__readdir_merges_bytewise_with_stable_offsets(struct env *e)
{
	write_text(P(e->host, "c.txt"), "");
	write_text(P(e->host, "a.txt"), "");
	write_text(P(e->host, "\xff-latin1.txt"), "");
	write_text(P(e->host, "Z.txt"), "");
	write_text(P(e->host, "hidden.ign"), "");
	write_text(P(e->iso, "b.ign"), "");
	write_text(P(e->iso, "hidden.txt"), "");
	CHECK_OK(mkdir(P(e->host, "d"), 0755));
	CHECK_OK(mkdir(P(e->iso, "d"), 0755));
	write_text(P(e->iso, "d/e.ign"), "");
	write_text(P(e->host, "d/f.txt"), "");
	write_text(P(e->iso, "d/g.txt"), "");

	char got[1024];
	list(e->mnt, got, sizeof(got));
	CHECK(strcmp(got, ".,..,Z.txt,a.txt,b.ign,c.txt,d,\xff-latin1.txt,") == 0, "got %s", got);
	list(P(e->mnt, "d"), got, sizeof(got));
	CHECK(strcmp(got, ".,..,e.ign,f.txt,") == 0, "got %s", got);

	/* offsets stay valid across the stream */
	DIR *d = opendir(e->mnt);
	CHECK(d != NULL);
	CHECK(readdir(d) && readdir(d) && readdir(d));
	long pos = telldir(d);
	struct dirent *de = readdir(d);
	CHECK(de != NULL && strcmp(de->d_name, "a.txt") == 0);
	while (readdir(d) != NULL)
		;
	seekdir(d, pos);
	de = readdir(d);
	CHECK(de != NULL && strcmp(de->d_name, "a.txt") == 0, "after seekdir: %s",
	      de ? de->d_name : "(end)");
	closedir(d);
}
RUN(router__readdir_merges_bytewise_with_stable_offsets)

/* ---- cross-backing refusals ---------------------------------------------------- */

static int rename2(const char *a, const char *b, unsigned flags)
{
	return renameat2(AT_FDCWD, a, AT_FDCWD, b, flags);
}

/* A stream read again from its start lists the directory as it is now
 * (gVisor rewinds the directory descriptor it keeps). */
static void router__rewound_directory_shows_new_names(struct env *e)
{
	write_text(P(e->mnt, "first"), "1");
	DIR *d = opendir(e->mnt);
	CHECK(d != NULL);
	struct dirent *de;
	size_t n = 0;
	while ((de = readdir(d)) != NULL)
		n += strcmp(de->d_name, "later") == 0 || strcmp(de->d_name, "later.ign") == 0;
	CHECK(n == 0);
	write_text(P(e->mnt, "later"), "2");
	write_text(P(e->mnt, "later.ign"), "3");
	rewinddir(d);
	while ((de = readdir(d)) != NULL)
		n += strcmp(de->d_name, "later") == 0 || strcmp(de->d_name, "later.ign") == 0;
	CHECK(n == 2, "after rewinddir %zu of 2 new names", n);
	CHECK_OK(unlink(P(e->mnt, "later")));
	rewinddir(d);
	n = 0;
	while ((de = readdir(d)) != NULL)
		n += strcmp(de->d_name, "later") == 0;
	CHECK(n == 0, "a removed name is still listed");
	closedir(d);
}
RUN_BOTH(router__rewound_directory_shows_new_names)

/* A stream opened before names were made, and read only after, lists them:
 * gVisor opens a directory's descriptor when a program first opens it
 * (tar -C, a shell's cd) and reads it much later (ls, find, rm -r). */
static void router__directory_opened_before_changes_lists_them(struct env *e)
{
	CHECK_OK(mkdir(P(e->mnt, "d"), 0755));
	CHECK_OK(mkdir(P(e->mnt, "d.ign"), 0755));
	DIR *d = opendir(P(e->mnt, "d"));
	DIR *di = opendir(P(e->mnt, "d.ign"));
	CHECK(d != NULL && di != NULL);
	write_text(P(e->mnt, "d/new"), "1");
	write_text(P(e->mnt, "d.ign/new"), "2");
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		n += strcmp(de->d_name, "new") == 0;
	while ((de = readdir(di)) != NULL)
		n += strcmp(de->d_name, "new") == 0;
	CHECK(n == 2, "%zu of 2 names made after opendir listed", n);
	closedir(d);
	closedir(di);
	/* and rm -r, which lists before each rmdir, empties what it lists */
	CHECK_OK(unlink(P(e->mnt, "d/new")));
	CHECK_OK(rmdir(P(e->mnt, "d")));
}
RUN_BOTH(router__directory_opened_before_changes_lists_them)

static void router__cross_backing_rename_and_link_fail_exdev(struct env *e)
{
	write_text(P(e->mnt, "a.txt"), "A");
	write_text(P(e->mnt, "b.ign"), "B");
	CHECK_ERRNO(rename2(P(e->mnt, "a.txt"), P(e->mnt, "moved.ign"), 0), EXDEV);
	CHECK_ERRNO(rename2(P(e->mnt, "b.ign"), P(e->mnt, "moved.txt"), 0), EXDEV);
	CHECK_ERRNO(rename2(P(e->mnt, "a.txt"), P(e->mnt, "moved.ign"), RENAME_NOREPLACE), EXDEV);
	CHECK_ERRNO(rename2(P(e->mnt, "a.txt"), P(e->mnt, "b.ign"), RENAME_EXCHANGE), EXDEV);
	CHECK_ERRNO(rename2(P(e->mnt, "a.txt"), P(e->mnt, "b.ign"), 0), EXDEV);
	CHECK_ERRNO(link(P(e->mnt, "a.txt"), P(e->mnt, "linked.ign")), EXDEV);
	CHECK_ERRNO(link(P(e->mnt, "b.ign"), P(e->mnt, "linked.txt")), EXDEV);
	CHECK_ERRNO(rename2(P(e->mnt, "a.txt"), P(e->mnt, "w.txt"), RENAME_WHITEOUT), EOPNOTSUPP);
	/* nothing changed in either backing */
	CHECK(strcmp(read_text(P(e->host, "a.txt")), "A") == 0);
	CHECK(strcmp(read_text(P(e->iso, "b.ign")), "B") == 0);
	CHECK(!exists(P(e->iso, "moved.ign")) && !exists(P(e->host, "moved.txt")));
	CHECK(!exists(P(e->iso, "linked.ign")) && !exists(P(e->host, "linked.txt")));
	CHECK(!exists(P(e->host, "w.txt")) && !exists(P(e->host, "b.ign")));

	/* same backing: the backing's own semantics */
	CHECK_OK(rename2(P(e->mnt, "a.txt"), P(e->mnt, "a2.txt"), RENAME_NOREPLACE));
	CHECK(strcmp(read_text(P(e->host, "a2.txt")), "A") == 0);
	CHECK_OK(link(P(e->mnt, "b.ign"), P(e->mnt, "b2.ign")));
	struct stat s1, s2;
	CHECK_OK(stat(P(e->iso, "b.ign"), &s1));
	CHECK_OK(stat(P(e->iso, "b2.ign"), &s2));
	CHECK(s1.st_ino == s2.st_ino && s1.st_nlink == 2);
	write_text(P(e->mnt, "x.txt"), "X");
	CHECK_OK(rename2(P(e->mnt, "a2.txt"), P(e->mnt, "x.txt"), RENAME_EXCHANGE));
	CHECK(strcmp(read_text(P(e->host, "x.txt")), "A") == 0);
	CHECK(strcmp(read_text(P(e->host, "a2.txt")), "X") == 0);

	/* a host directory with isolated children cannot move (they would
	 * be left behind), an empty one can */
	CHECK_OK(mkdir(P(e->mnt, "dir"), 0755));
	write_text(P(e->mnt, "dir/cache.ign"), "c");
	CHECK_ERRNO(rename2(P(e->mnt, "dir"), P(e->mnt, "dir2"), 0), EXDEV);
	CHECK_OK(unlink(P(e->mnt, "dir/cache.ign")));
	CHECK_OK(rename2(P(e->mnt, "dir"), P(e->mnt, "dir2"), 0));
	/* children of the moved directory route by its new path */
	write_text(P(e->mnt, "dir2/new.ign"), "n");
	CHECK(strcmp(read_text(P(e->iso, "dir2/new.ign")), "n") == 0);
}
RUN(router__cross_backing_rename_and_link_fail_exdev)

static void router__rmdir_counts_visible_entries_of_the_other_backing(struct env *e)
{
	CHECK_OK(mkdir(P(e->mnt, "d"), 0755));
	write_text(P(e->mnt, "d/x.ign"), "x");
	CHECK_ERRNO(rmdir(P(e->mnt, "d")), ENOTEMPTY);
	CHECK(exists(P(e->host, "d")));
	CHECK_OK(unlink(P(e->mnt, "d/x.ign")));
	CHECK_OK(rmdir(P(e->mnt, "d")));
	CHECK(!exists(P(e->host, "d")));
}
RUN(router__rmdir_counts_visible_entries_of_the_other_backing)

static void router__directory_only_patterns_route_by_type(struct env *e)
{
	write_text(P(e->host, "out"), "a host file named out");
	CHECK_OK(mkdir(P(e->host, "sub"), 0755));
	CHECK_OK(mkdir(P(e->host, "sub/out"), 0755)); /* a hidden host directory */
	write_text(P(e->host, "sub/out/old.o"), "host build output");
	CHECK(strcmp(read_text(P(e->mnt, "out")), "a host file named out") == 0);
	CHECK_ERRNO(access(P(e->mnt, "sub/out"), F_OK), ENOENT);
	CHECK_OK(mkdir(P(e->mnt, "d"), 0755));
	CHECK_OK(mkdir(P(e->mnt, "d/out"), 0755));
	write_text(P(e->mnt, "d/out/x.o"), "isolated build output");
	CHECK(exists(P(e->iso, "d/out/x.o")) && !exists(P(e->host, "d/out")));
	/* an exchange that would move a host directory to "out" (where a
	 * directory routes ISOLATED) is cross-backing, though both objects
	 * are host objects */
	CHECK_OK(mkdir(P(e->mnt, "hostdir"), 0755));
	CHECK_ERRNO(rename2(P(e->mnt, "out"), P(e->mnt, "hostdir"), RENAME_EXCHANGE), EXDEV);
	CHECK(strcmp(read_text(P(e->host, "out")), "a host file named out") == 0);
	/* a plain rename of a directory to "out" as well */
	CHECK_ERRNO(rename2(P(e->mnt, "hostdir"), P(e->mnt, "sub/out"), 0), EXDEV);
	char got[256];
	list(e->mnt, got, sizeof(got));
	CHECK(strcmp(got, ".,..,d,hostdir,out,sub,") == 0, "got %s", got);
	list(P(e->mnt, "sub"), got, sizeof(got));
	CHECK(strcmp(got, ".,..,") == 0, "got %s", got);
}
RUN(router__directory_only_patterns_route_by_type)

static void router__devices_are_refused_fifos_and_sockets_allowed(struct env *e)
{
	/* 0/0 (a whiteout) passes the kernel's own CAP_MKNOD check */
	CHECK_ERRNO(mknod(P(e->mnt, "wh"), S_IFCHR | 0600, makedev(0, 0)), EPERM);
	CHECK_ERRNO(mknod(P(e->mnt, "null"), S_IFCHR | 0600, makedev(1, 3)), EPERM);
	CHECK_ERRNO(mknod(P(e->mnt, "blk.ign"), S_IFBLK | 0600, makedev(7, 0)), EPERM);
	CHECK(!exists(P(e->host, "wh")) && !exists(P(e->host, "null")));
	CHECK_OK(mkfifo(P(e->mnt, "fifo.ign"), 0600));
	struct stat st;
	CHECK_OK(lstat(P(e->iso, "fifo.ign"), &st));
	CHECK(S_ISFIFO(st.st_mode));
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", P(e->mnt, "sock"));
	CHECK_OK(bind(s, (struct sockaddr *)&sa, sizeof(sa)));
	CHECK_OK(listen(s, 1));
	int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK_OK(connect(c, (struct sockaddr *)&sa, sizeof(sa)));
	close(c);
	close(s);
	CHECK_OK(lstat(P(e->host, "sock"), &st));
	CHECK(S_ISSOCK(st.st_mode));
}
RUN(router__devices_are_refused_fifos_and_sockets_allowed)

static void router__inconsistent_path_fails_eio(struct env *e)
{
	write_text(P(e->iso, "bad1"), "isolated only");
	CHECK_ERRNO(open(P(e->mnt, "bad1"), O_RDONLY), EIO);
	CHECK_ERRNO(open(P(e->mnt, "bad2"), O_WRONLY | O_CREAT, 0644), EIO);
	CHECK_ERRNO(mkdir(P(e->mnt, "bad3"), 0755), EIO);
	CHECK(!exists(P(e->host, "bad2")) && !exists(P(e->iso, "bad2")));
	CHECK(strcmp(read_text(P(e->iso, "bad1")), "isolated only") == 0);
}
RUN(router__inconsistent_path_fails_eio)

static void router__backing_symlinks_are_never_followed(struct env *e)
{
	/* a symlink is presented as one */
	CHECK_OK(symlink(e->out, P(e->mnt, "lnk")));
	char buf[256];
	ssize_t n = readlink(P(e->mnt, "lnk"), buf, sizeof(buf) - 1);
	CHECK(n == (ssize_t)strlen(e->out) && memcmp(buf, e->out, (size_t)n) == 0);
	struct stat st;
	CHECK_OK(lstat(P(e->host, "lnk"), &st));
	CHECK(S_ISLNK(st.st_mode));
	/* chown/utimes of the link itself go to the link */
	struct timespec ts[2] = { { 1, 0 }, { 1, 0 } };
	CHECK_OK(utimensat(AT_FDCWD, P(e->mnt, "lnk"), ts, AT_SYMLINK_NOFOLLOW));
	CHECK_OK(lstat(P(e->host, "lnk"), &st));
	CHECK(st.st_mtim.tv_sec == 1);
	CHECK_OK(stat(e->out, &st));
	CHECK(st.st_mtim.tv_sec != 1, "the router followed the link");

	/* the isolated side of a host directory is a planted symlink to the
	 * outside: creating an isolated child must not follow it */
	write_text(P(e->out, "victim"), "outside");
	CHECK_OK(mkdir(P(e->host, "sub"), 0755));
	CHECK_OK(symlink(e->out, P(e->iso, "sub")));
	errno = 0;
	int fd = open(P(e->mnt, "sub/new.ign"), O_WRONLY | O_CREAT, 0644);
	CHECK(fd < 0 && (errno == ENOTDIR || errno == ELOOP), "created through a symlink: %d %s",
	      fd, strerror(errno));
	CHECK(!exists(P(e->out, "new.ign")));
	CHECK_ERRNO(open(P(e->mnt, "sub/victim"), O_RDONLY), ENOENT);
	/* and its listing does not show the outside's entries (loot.ign
	 * would route to the isolated side the symlink stands for) */
	write_text(P(e->out, "loot.ign"), "outside");
	char got[256];
	list(P(e->mnt, "sub"), got, sizeof(got));
	CHECK(strcmp(got, ".,..,") == 0, "got %s", got);

	/* a dangling symlink planted behind a cached negative entry: the
	 * kernel asks the router to create, and the router must not follow
	 * the link into creating its target */
	struct stat nst;
	CHECK_ERRNO(stat(P(e->mnt, "race.ign"), &nst), ENOENT);
	CHECK_OK(symlink(P(e->out, "created"), P(e->iso, "race.ign")));
	errno = 0;
	fd = open(P(e->mnt, "race.ign"), O_WRONLY | O_CREAT, 0644);
	CHECK(fd < 0, "created through a planted symlink");
	CHECK(!exists(P(e->out, "created")));

	/* a planted symlink at an isolated file name is itself, not its target */
	CHECK_OK(symlink(P(e->out, "victim"), P(e->iso, "planted.ign")));
	CHECK_OK(lstat(P(e->mnt, "planted.ign"), &st));
	CHECK(S_ISLNK(st.st_mode));
	CHECK_ERRNO(lsetxattr(P(e->mnt, "planted.ign"), "user.x", "1", 1, 0), EPERM);
	CHECK_ERRNO(getxattr(P(e->out, "victim"), "user.x", buf, sizeof(buf)), ENODATA);
}
RUN(router__backing_symlinks_are_never_followed)

/* ---- metadata and data operations ----------------------------------------- */

static void router__utimens_keeps_nanoseconds(struct env *e)
{
	write_text(P(e->mnt, "t.ign"), "t");
	struct timespec ts[2] = { { 1000000000, 123456789 }, { 1500000000, 987654321 } };
	CHECK_OK(utimensat(AT_FDCWD, P(e->mnt, "t.ign"), ts, 0));
	struct stat st;
	CHECK_OK(stat(P(e->iso, "t.ign"), &st));
	CHECK(st.st_atim.tv_sec == 1000000000 && st.st_atim.tv_nsec == 123456789);
	CHECK(st.st_mtim.tv_sec == 1500000000 && st.st_mtim.tv_nsec == 987654321);
	CHECK_OK(stat(P(e->mnt, "t.ign"), &st));
	CHECK(st.st_mtim.tv_nsec == 987654321, "through the mount: %ld", st.st_mtim.tv_nsec);
}
RUN(router__utimens_keeps_nanoseconds)

static void router__user_xattrs_pass_others_are_refused(struct env *e)
{
	write_text(P(e->mnt, "x.txt"), "x");
	CHECK_OK(setxattr(P(e->mnt, "x.txt"), "user.lazaret", "v1", 2, 0));
	char buf[64];
	CHECK(getxattr(P(e->host, "x.txt"), "user.lazaret", buf, sizeof(buf)) == 2 &&
	      memcmp(buf, "v1", 2) == 0);
	CHECK(getxattr(P(e->mnt, "x.txt"), "user.lazaret", buf, sizeof(buf)) == 2);
	ssize_t n = listxattr(P(e->mnt, "x.txt"), buf, sizeof(buf));
	CHECK(n == (ssize_t)sizeof("user.lazaret") && strcmp(buf, "user.lazaret") == 0);
	CHECK_ERRNO(setxattr(P(e->mnt, "x.txt"), "system.lazaret", "1", 1, 0), EOPNOTSUPP);
	CHECK_ERRNO(setxattr(P(e->mnt, "x.txt"), "security.x", "1", 1, 0), EOPNOTSUPP);
	CHECK_OK(removexattr(P(e->mnt, "x.txt"), "user.lazaret"));
	CHECK_ERRNO(getxattr(P(e->host, "x.txt"), "user.lazaret", buf, sizeof(buf)), ENODATA);
}
RUN(router__user_xattrs_pass_others_are_refused)

static void router__punch_hole_and_seek_hole(struct env *e)
{
	int fd = open(P(e->mnt, "sparse.ign"), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	CHECK(fd >= 0);
	static char block[1 << 16];
	memset(block, 'x', sizeof(block));
	for (int k = 0; k < 16; k++)
		CHECK(write(fd, block, sizeof(block)) == (ssize_t)sizeof(block));
	CHECK_OK(fsync(fd));
	CHECK_OK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1 << 18, 1 << 18));
	off_t hole = lseek(fd, 0, SEEK_HOLE);
	CHECK(hole == 1 << 18, "SEEK_HOLE gave %lld", (long long)hole);
	off_t data = lseek(fd, 1 << 18, SEEK_DATA);
	CHECK(data == 1 << 19, "SEEK_DATA gave %lld", (long long)data);
	char c = 0;
	CHECK(pread(fd, &c, 1, (1 << 18) + 5) == 1 && c == 0);
	close(fd);
	int bfd = open(P(e->iso, "sparse.ign"), O_RDONLY | O_CLOEXEC);
	CHECK(bfd >= 0 && lseek(bfd, 0, SEEK_HOLE) == 1 << 18, "the backing has the hole");
	close(bfd);
	struct stat st;
	CHECK_OK(stat(P(e->mnt, "sparse.ign"), &st));
	CHECK(st.st_size == 1 << 20);
	fd = open(P(e->mnt, "alloc.txt"), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	CHECK_OK(fallocate(fd, 0, 0, 4096));
	close(fd);
	CHECK_OK(stat(P(e->host, "alloc.txt"), &st));
	CHECK(st.st_size == 4096);
}
RUN_BOTH(router__punch_hole_and_seek_hole)

static void router__copy_file_range_same_backing_only(struct env *e)
{
	write_text(P(e->mnt, "src.txt"), "0123456789");
	int in = open(P(e->mnt, "src.txt"), O_RDONLY | O_CLOEXEC);
	int out = open(P(e->mnt, "dst.txt"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	CHECK(in >= 0 && out >= 0);
	loff_t oi = 0, oo = 0;
	CHECK(copy_file_range(in, &oi, out, &oo, 10, 0) == 10, "%s", strerror(errno));
	close(out);
	CHECK(strcmp(read_text(P(e->host, "dst.txt")), "0123456789") == 0);
	/* across backings the router answers EXDEV; the kernel then copies
	 * through ordinary reads and writes, which land in the
	 * destination's backing: either way never in the source's */
	out = open(P(e->mnt, "dst.ign"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	CHECK(out >= 0);
	errno = 0;
	oi = oo = 0;
	ssize_t n = copy_file_range(in, &oi, out, &oo, 10, 0);
	CHECK(n == 10 || (n < 0 && errno == EXDEV), "cross copy: %zd %s", n, strerror(errno));
	close(out);
	close(in);
	CHECK(!exists(P(e->host, "dst.ign")));
	if (n == 10)
		CHECK(strcmp(read_text(P(e->iso, "dst.ign")), "0123456789") == 0);
}
RUN_BOTH(router__copy_file_range_same_backing_only)

static void router__flock_and_posix_locks_conflict(struct env *e)
{
	write_text(P(e->mnt, "lock.ign"), "");
	int a = open(P(e->mnt, "lock.ign"), O_RDWR | O_CLOEXEC);
	int b = open(P(e->mnt, "lock.ign"), O_RDWR | O_CLOEXEC);
	CHECK(a >= 0 && b >= 0);
	CHECK_OK(flock(a, LOCK_EX | LOCK_NB));
	CHECK_ERRNO(flock(b, LOCK_EX | LOCK_NB), EWOULDBLOCK);
	CHECK_OK(flock(a, LOCK_UN));
	CHECK_OK(flock(b, LOCK_SH | LOCK_NB));

	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10 };
	CHECK_OK(fcntl(a, F_SETLK, &fl));
	int p[2];
	CHECK_OK(pipe(p));
	pid_t pid = fork();
	if (pid == 0) {
		struct flock t = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 5, .l_len = 1 };
		char res = fcntl(b, F_SETLK, &t) < 0 && (errno == EAGAIN || errno == EACCES) ? 'y' : 'n';
		struct flock q = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10 };
		if (fcntl(b, F_GETLK, &q) < 0 || q.l_type != F_WRLCK || q.l_pid != getppid())
			res = 'g';
		(void)!write(p[1], &res, 1);
		_exit(0);
	}
	char res = 0;
	CHECK(read(p[0], &res, 1) == 1);
	waitpid(pid, NULL, 0);
	CHECK(res == 'y', "the child's conflicting lock: %c", res);
	close(a);
	close(b);
}
RUN_BOTH(router__flock_and_posix_locks_conflict)

static void router__shared_mapping_writes_reach_the_backing(struct env *e)
{
	int fd = open(P(e->mnt, "map.ign"), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	CHECK(fd >= 0);
	CHECK_OK(ftruncate(fd, 4096));
	char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED, "mmap: %s", strerror(errno));
	memcpy(m, "mapped", 6);
	CHECK_OK(msync(m, 4096, MS_SYNC));
	munmap(m, 4096);
	close(fd);
	CHECK(memcmp(read_text(P(e->iso, "map.ign")), "mapped", 6) == 0);
	/* a private mapping does not write */
	fd = open(P(e->mnt, "map.ign"), O_RDONLY | O_CLOEXEC);
	m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	CHECK(m != MAP_FAILED && memcmp(m, "mapped", 6) == 0);
	memcpy(m, "privat", 6);
	munmap(m, 4096);
	close(fd);
	CHECK(memcmp(read_text(P(e->iso, "map.ign")), "mapped", 6) == 0);
}
RUN_BOTH(router__shared_mapping_writes_reach_the_backing)

/* ---- publication ------------------------------------------------------------ */

static void router__open_handle_stays_pinned_across_a_publish(struct env *e)
{
	write_text(P(e->mnt, "flip1"), "host v1");
	CHECK_OK(mkdir(P(e->mnt, "flipdir"), 0755));
	write_text(P(e->iso, "flip2"), "isolated hidden");
	int fd = open(P(e->mnt, "flip1"), O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0);
	struct stat st;
	CHECK_ERRNO(stat(P(e->mnt, "flip2"), &st), ENOENT); /* negative entry, cached 60 s */
	char got[256];
	list(e->mnt, got, sizeof(got));
	CHECK(strcmp(got, ".,..,flip1,flipdir,") == 0, "got %s", got);

	CHECK_OK(publish(e, true));

	/* lookups see the new route at once despite the long timeouts */
	CHECK_ERRNO(stat(P(e->mnt, "flip1"), &st), ENOENT);
	CHECK_ERRNO(stat(P(e->mnt, "flipdir"), &st), ENOENT);
	CHECK(strcmp(read_text(P(e->mnt, "flip2")), "isolated hidden") == 0);
	list(e->mnt, got, sizeof(got));
	CHECK(strcmp(got, ".,..,flip2,") == 0, "got %s", got);
	/* the handle opened before still writes its host object */
	CHECK(pwrite(fd, "HOST v2", 7, 0) == 7);
	CHECK_OK(fsync(fd));
	close(fd);
	CHECK(strcmp(read_text(P(e->host, "flip1")), "HOST v2") == 0);
	CHECK(!exists(P(e->iso, "flip1")));
	/* a new file of that name is isolated; the host one is retained */
	write_text(P(e->mnt, "flip1"), "isolated new");
	CHECK(strcmp(read_text(P(e->iso, "flip1")), "isolated new") == 0);
	CHECK(strcmp(read_text(P(e->host, "flip1")), "HOST v2") == 0);

	/* and back */
	CHECK_OK(publish(e, false));
	CHECK(strcmp(read_text(P(e->mnt, "flip1")), "HOST v2") == 0);
	CHECK_OK(stat(P(e->mnt, "flipdir"), &st));
	CHECK_ERRNO(stat(P(e->mnt, "flip2"), &st), ENOENT);
}
RUN_BOTH(router__open_handle_stays_pinned_across_a_publish)

/* ---- the index-lock guard ---------------------------------------------------- */

/* Writes .git/index.lock through the router (returning its descriptor,
 * open for writing, when keep): the index git makes in a scratch
 * repository after `git <add>`, run there. */
static int plant_index_lock_by(struct env *e, const char *add, bool keep)
{
	char cmd[768];
	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && rm -rf gitsrc && mkdir -p gitsrc/sub && cd gitsrc && echo t > tracked.txt &&"
		 " echo x > sub/x.ign && GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent git init -q &&"
		 " GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent git %s",
		 e->dir, add);
	CHECK(system(cmd) == 0, "git: %s", cmd);
	char src[160];
	snprintf(src, sizeof(src), "%s/gitsrc/.git/index", e->dir);
	int in = open(src, O_RDONLY | O_CLOEXEC);
	CHECK(in >= 0, "open %s", src);
	int out = open(P(e->mnt, ".git/index.lock"), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	CHECK(out >= 0, "create index.lock: %s", strerror(errno));
	char buf[4096];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		CHECK(write(out, buf, (size_t)n) == n);
	close(in);
	if (keep)
		return out;
	CHECK_OK(close(out));
	return -1;
}

/* An index tracking tracked.txt and sub/x.ign, split (a `link`
 * extension, which libgit2 cannot read) when split. */
static void plant_index_lock(struct env *e, bool split)
{
	plant_index_lock_by(e, split ? "add -f tracked.txt sub/x.ign && GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent git "
				       "update-index --split-index"
				     : "add -f tracked.txt sub/x.ign",
			    false);
}

/* Replaces every from in the planted .git/index.lock with to (as long)
 * and signs it again: an index no Git writes, that Git would read. */
static void patch_index_lock(struct env *e, const char *from, const char *to)
{
	static uint8_t b[1 << 16];
	int fd = open(P(e->mnt, ".git/index.lock"), O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0);
	ssize_t n = read(fd, b, sizeof(b));
	CHECK(n > 20 && n < (ssize_t)sizeof(b));
	size_t len = strlen(from), body = (size_t)n - 20;
	for (size_t i = 0; i + len <= body; i++)
		if (memcmp(b + i, from, len) == 0)
			memcpy(b + i, to, len);
	/* Signed by sha1sum, not OpenSSL: the body is forked from the
	 * router's threads, and under ASan OpenSSL's first use there waited
	 * on a lock held at the fork forever. */
	int out = open(P(e->dir, "patched"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(out >= 0 && write(out, b, body) == (ssize_t)body);
	CHECK_OK(close(out));
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "sha1sum < '%s' > '%s'", P(e->dir, "patched"), P(e->dir, "patched.sum"));
	CHECK(system(cmd) == 0);
	const char *hex = read_text(P(e->dir, "patched.sum"));
	for (size_t k = 0; k < 20; k++) {
		unsigned v = 0;
		int got = sscanf(hex + 2 * k, "%2x", &v);
		CHECK(got == 1, "sha1sum: %s", hex);
		b[body + k] = (uint8_t)v;
	}
	CHECK(pwrite(fd, b, (size_t)n, 0) == n);
	CHECK_OK(close(fd));
}

/* An index tracking path alone. */
static void plant_index_lock_of(struct env *e, const char *path)
{
	char add[256];
	snprintf(add, sizeof(add), "add -f %s", path);
	plant_index_lock_by(e, add, false);
}

static void router__index_lock_rename_tracking_an_isolated_only_path_is_ebusy(struct env *e)
{
	CHECK_OK(mkdir(P(e->mnt, ".git"), 0755));
	write_text(P(e->mnt, "tracked.txt"), "t");
	CHECK_OK(mkdir(P(e->mnt, "sub"), 0755));
	write_text(P(e->mnt, "sub/x.ign"), "isolated only");
	CHECK(exists(P(e->iso, "sub/x.ign")) && !exists(P(e->host, "sub/x.ign")));
	plant_index_lock(e, false);
	CHECK_ERRNO(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index")), EBUSY);
	CHECK(exists(P(e->host, ".git/index.lock")) && !exists(P(e->host, ".git/index")));
	/* A host object at the path changes nothing: tracking it would show
	 * the sandbox the host's own ignored file, to write and hide again. */
	write_text(P(e->host, "sub/x.ign"), "host copy");
	CHECK_ERRNO(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index")), EBUSY);
	CHECK(!exists(P(e->host, ".git/index")));
	/* An index of what is not ignored goes in. */
	CHECK_OK(unlink(P(e->mnt, ".git/index.lock")));
	plant_index_lock_of(e, "tracked.txt");
	CHECK_OK(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index")));
	CHECK(exists(P(e->host, ".git/index")));
}
RUN(router__index_lock_rename_tracking_an_isolated_only_path_is_ebusy)

/* Assume-unchanged and skip-worktree make host Git skip a file's
 * changes: a new index may keep the marks the current one has, not add
 * one (the file could then change unseen by host `git status`). */
#define TEST_GIT "GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent git "
static void router__a_new_index_keeps_but_adds_no_marks_that_hide_changes(struct env *e)
{
	CHECK_OK(mkdir(P(e->mnt, ".git"), 0755));
	write_text(P(e->mnt, "tracked.txt"), "t");
	write_text(P(e->mnt, "other.txt"), "o");
	static const char both[] = "add tracked.txt && echo o > other.txt && " TEST_GIT "add other.txt && " TEST_GIT;
	/* No current index: a mark refuses the new one. */
	plant_index_lock_by(e, "add tracked.txt && " TEST_GIT "update-index --assume-unchanged tracked.txt", false);
	CHECK_ERRNO(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index")), EBUSY);
	CHECK(!exists(P(e->host, ".git/index")));
	/* The host marks tracked.txt: a new index keeping the mark goes in. */
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "cp '%s/gitsrc/.git/index' '%s/.git/index'", e->dir, e->host);
	CHECK(system(cmd) == 0);
	CHECK_OK(unlink(P(e->mnt, ".git/index.lock")));
	char add[512];
	snprintf(add, sizeof(add), "%supdate-index --assume-unchanged tracked.txt", both);
	plant_index_lock_by(e, add, false);
	CHECK_OK(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index")));
	/* Another mark on it, or the mark on another file: refused. */
	snprintf(add, sizeof(add), "%supdate-index --assume-unchanged tracked.txt && " TEST_GIT
		 "update-index --skip-worktree tracked.txt", both);
	plant_index_lock_by(e, add, false);
	CHECK_ERRNO(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index")), EBUSY);
	CHECK_OK(unlink(P(e->mnt, ".git/index.lock")));
	snprintf(add, sizeof(add), "%supdate-index --assume-unchanged tracked.txt other.txt", both);
	plant_index_lock_by(e, add, false);
	CHECK_ERRNO(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index")), EBUSY);
	/* And none at all goes in. */
	CHECK_OK(unlink(P(e->mnt, ".git/index.lock")));
	snprintf(add, sizeof(add), "%sstatus --porcelain >/dev/null", both);
	plant_index_lock_by(e, add, false);
	CHECK_OK(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index")));
}
RUN(router__a_new_index_keeps_but_adds_no_marks_that_hide_changes)

/* RENAME_EXCHANGE of index.lock and index, either way round, puts the new
 * index in place as the rename does: checked the same way. */
static void router__index_lock_exchanged_with_the_index_is_checked_too(struct env *e)
{
	CHECK_OK(mkdir(P(e->mnt, ".git"), 0755));
	write_text(P(e->host, ".git/index"), "old index"); /* only Git's rename makes one inside */
	write_text(P(e->mnt, "tracked.txt"), "t");
	CHECK_OK(mkdir(P(e->mnt, "sub"), 0755));
	write_text(P(e->mnt, "sub/x.ign"), "isolated only");
	plant_index_lock(e, false);
	CHECK_ERRNO(rename2(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index"), RENAME_EXCHANGE), EBUSY);
	CHECK_ERRNO(rename2(P(e->mnt, ".git/index"), P(e->mnt, ".git/index.lock"), RENAME_EXCHANGE), EBUSY);
	CHECK(strcmp(read_text(P(e->host, ".git/index")), "old index") == 0);
	write_text(P(e->host, "sub/x.ign"), "host copy");
	CHECK_ERRNO(rename2(P(e->mnt, ".git/index"), P(e->mnt, ".git/index.lock"), RENAME_EXCHANGE), EBUSY);
	CHECK_OK(unlink(P(e->mnt, ".git/index.lock")));
	plant_index_lock_of(e, "tracked.txt");
	CHECK_OK(rename2(P(e->mnt, ".git/index"), P(e->mnt, ".git/index.lock"), RENAME_EXCHANGE));
	CHECK(strcmp(read_text(P(e->host, ".git/index.lock")), "old index") == 0);
}
RUN(router__index_lock_exchanged_with_the_index_is_checked_too)

/* An index the guard cannot read (a split index; Git reads it) is refused
 * too: what it cannot check, it does not allow. */
static void router__index_lock_the_guard_cannot_read_is_ebusy(struct env *e)
{
	CHECK_OK(mkdir(P(e->mnt, ".git"), 0755));
	write_text(P(e->mnt, "tracked.txt"), "t");
	CHECK_OK(mkdir(P(e->mnt, "sub"), 0755));
	write_text(P(e->mnt, "sub/x.ign"), "isolated only");
	plant_index_lock(e, true);
	CHECK_ERRNO(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index")), EBUSY);
	CHECK(!exists(P(e->host, ".git/index")));
}
RUN(router__index_lock_the_guard_cannot_read_is_ebusy)

/* Reads a directory stream to its end; how many entries it gave. */
static int read_to_end(int fd)
{
	char buf[4096];
	int n = 0;
	long k;
	while ((k = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0)
		for (long at = 0; at < k; at += ((struct dirent64 *)(buf + at))->d_reclen)
			n++;
	CHECK(k == 0, "getdents64: %s", strerror(errno));
	return n;
}

/* A listing is let go once its end has been read, and the listings being
 * read at once are bounded together (the sandbox can leave any number of
 * streams half read): past the bound a read that would list answers
 * ENOMEM, and the others go on. */
static void router__listings_being_read_are_bounded_together(struct env *e)
{
	CHECK_OK(mkdir(P(e->host, "big"), 0755));
	char name[96];
	for (int i = 0; i < 600; i++) {
		snprintf(name, sizeof(name), "big/file-with-a-name-of-forty-bytes-%04d", i);
		write_text(P(e->host, name), "");
	}
	char buf[1024];
	int a = open(P(e->mnt, "big"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int b = open(P(e->mnt, "big"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(a >= 0 && b >= 0);
	CHECK(syscall(SYS_getdents64, a, buf, sizeof(buf)) > 0, "first read: %s", strerror(errno));
	/* a's listing is held (about 48 KiB): b's does not fit beside it */
	CHECK(syscall(SYS_getdents64, b, buf, sizeof(buf)) < 0 && errno == ENOMEM, "second listing: %s",
	      strerror(errno));
	CHECK(read_to_end(a) > 0);
	/* a's end was read: its listing went, b's fits */
	CHECK(lseek(b, 0, SEEK_SET) == 0);
	CHECK(read_to_end(b) == 602, "b listed %d entries", read_to_end(b));
	CHECK(lseek(a, 0, SEEK_SET) == 0);
	CHECK(read_to_end(a) == 602);
	CHECK_OK(close(a));
	CHECK_OK(close(b));
}

static void test_router__listings_being_read_are_bounded_together(void **state)
{
	listing_max = 64 << 10;
	with_router(*state, router__listings_being_read_are_bounded_together);
	listing_max = 0;
}

/* A new index larger than the guard reads is refused before libgit2 reads
 * it (whole, and then some: the sandbox's bytes in the router's memory):
 * EFBIG, and nothing changes. A sparse one says so without the memory. */
static void router__an_index_larger_than_the_guard_reads_is_efbig(struct env *e)
{
	CHECK_OK(mkdir(P(e->mnt, ".git"), 0755));
	write_text(P(e->mnt, "tracked.txt"), "t");
	plant_index_lock_of(e, "tracked.txt");
	CHECK_OK(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index")));
	char before[4096];
	snprintf(before, sizeof(before), "%s", read_text(P(e->host, ".git/index")));
	plant_index_lock_of(e, "tracked.txt");
	CHECK_OK(truncate(P(e->mnt, ".git/index.lock"), (off_t)LZ_ROUTER_INDEX_MAX + 1));
	CHECK_ERRNO(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index")), EFBIG);
	CHECK_ERRNO(rename2(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index"), RENAME_EXCHANGE), EFBIG);
	CHECK(exists(P(e->host, ".git/index.lock")));
	CHECK(strcmp(read_text(P(e->host, ".git/index")), before) == 0);
}
RUN(router__an_index_larger_than_the_guard_reads_is_efbig)

/* The bound is inclusive: an index of exactly max_index_bytes is read
 * (this one, padded with zeros, then fails as unreadable). */
static void router__the_index_bound_is_its_size(struct env *e)
{
	CHECK_OK(mkdir(P(e->mnt, ".git"), 0755));
	write_text(P(e->mnt, "tracked.txt"), "t");
	plant_index_lock_of(e, "tracked.txt");
	CHECK_OK(truncate(P(e->mnt, ".git/index.lock"), 4097));
	CHECK_ERRNO(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index")), EFBIG);
	CHECK_OK(truncate(P(e->mnt, ".git/index.lock"), 4096));
	CHECK_ERRNO(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index")), EBUSY);
	CHECK(!exists(P(e->host, ".git/index")));
}

static void test_router__the_index_bound_is_its_size(void **state)
{
	index_max = 4096;
	with_router(*state, router__the_index_bound_is_its_size);
	index_max = 0;
}

/* An entry Git itself never writes (a ".git" component, in any case),
 * which host Git checks out all the same (`git checkout -- .` writes
 * .git/hooks/post-checkout, then runs it), refuses the index. */
static void router__an_index_entry_inside_a_git_directory_is_ebusy(struct env *e)
{
	CHECK_OK(mkdir(P(e->mnt, ".git"), 0755));
	const char *add = "update-index --add --cacheinfo "
			  "100644,e69de29bb2d1d6434b8b29ae775ad8c2e48c5391,xgit/hooks/post-checkout";
	plant_index_lock_by(e, add, false);
	CHECK_OK(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index"))); /* as Git wrote it */
	plant_index_lock_by(e, add, false);
	patch_index_lock(e, "xgit/", ".git/");
	CHECK_ERRNO(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index")), EBUSY);
	patch_index_lock(e, ".git/", ".GiT/");
	CHECK_ERRNO(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index")), EBUSY);
	patch_index_lock(e, ".GiT/", "x/../");
	CHECK_ERRNO(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index")), EBUSY);
	CHECK(!exists(P(e->host, ".git/hooks/post-checkout")));
}
RUN(router__an_index_entry_inside_a_git_directory_is_ebusy)

/* A gitlink in the new index is asked about as the directory it stands
 * for: one at an ignored directory would route all of it to the host. */
static void router__an_index_with_a_gitlink_at_an_ignored_directory_is_ebusy(struct env *e)
{
	/* "out/" is a directory-only pattern: a file "out" would be host-routed */
	CHECK_OK(mkdir(P(e->mnt, ".git"), 0755));
	CHECK_OK(mkdir(P(e->host, "out"), 0755));
	write_text(P(e->host, "out/tool"), "the host's own");
	plant_index_lock_by(e, "update-index --add --cacheinfo 160000,1111111111111111111111111111111111111111,out",
			    false);
	CHECK_ERRNO(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index")), EBUSY);
	CHECK(!exists(P(e->host, ".git/index")));
	CHECK_ERRNO(open(P(e->mnt, "out/tool"), O_RDONLY | O_CLOEXEC), ENOENT);
}
RUN(router__an_index_with_a_gitlink_at_an_ignored_directory_is_ebusy)

/* An index changes only by Git's index.lock rename, which the guard
 * checks: it is not written, truncated, re-moded or linked, and nothing
 * else is made, renamed, linked or exchanged to its name. Reading it and
 * removing it stay allowed. */
static void router__an_index_changes_only_by_the_guarded_rename(struct env *e)
{
	CHECK_OK(mkdir(P(e->mnt, ".git"), 0755));
	write_text(P(e->mnt, "tracked.txt"), "t");
	plant_index_lock_of(e, "tracked.txt");
	CHECK_OK(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index")));
	char host_index[512];
	snprintf(host_index, sizeof(host_index), "%s", P(e->host, ".git/index"));
	struct stat before;
	CHECK_OK(stat(host_index, &before));
	CHECK(strlen(read_text(P(e->mnt, ".git/index"))) > 0);
	struct stat after;
	/* The kernel may open it without asking: then each write fails. */
	int fd = open(P(e->mnt, ".git/index"), O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		CHECK_ERRNO(pwrite(fd, "DIRC", 4, 0), EPERM);
		CHECK_ERRNO(ftruncate(fd, 0), EPERM);
		CHECK_OK(close(fd));
	} else {
		CHECK(errno == EPERM, "open: %s", strerror(errno));
	}
	fd = open(P(e->mnt, ".git/index"), O_RDONLY | O_TRUNC | O_CLOEXEC);
	CHECK(fd < 0 && errno == EPERM, "open with O_TRUNC: %s", fd < 0 ? strerror(errno) : "opened");
	CHECK_ERRNO(truncate(P(e->mnt, ".git/index"), 0), EPERM);
	CHECK_ERRNO(chmod(P(e->mnt, ".git/index"), 0666), EPERM);
	CHECK_ERRNO(link(P(e->mnt, ".git/index"), P(e->mnt, ".git/index2")), EPERM);
	write_text(P(e->mnt, ".git/other"), "x");
	CHECK_ERRNO(rename(P(e->mnt, ".git/other"), P(e->mnt, ".git/index")), EPERM);
	CHECK_ERRNO(rename2(P(e->mnt, ".git/other"), P(e->mnt, ".git/index"), RENAME_EXCHANGE), EPERM);
	CHECK_ERRNO(rename2(P(e->mnt, ".git/index"), P(e->mnt, ".git/other"), RENAME_EXCHANGE), EPERM);
	CHECK_OK(stat(host_index, &after));
	CHECK(after.st_ino == before.st_ino && after.st_size == before.st_size &&
	      after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec,
	      "the host index changed: inode %lu to %lu, size %lld to %lld, mtime %ld.%09ld to %ld.%09ld",
	      (unsigned long)before.st_ino, (unsigned long)after.st_ino, (long long)before.st_size,
	      (long long)after.st_size, (long)before.st_mtim.tv_sec, before.st_mtim.tv_nsec,
	      (long)after.st_mtim.tv_sec, after.st_mtim.tv_nsec);
	/* Removed, it is not made again but by the rename. */
	CHECK_OK(unlink(P(e->mnt, ".git/index")));
	CHECK_ERRNO(open(P(e->mnt, ".git/index"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644), EPERM);
	CHECK_ERRNO(link(P(e->mnt, ".git/other"), P(e->mnt, ".git/index")), EPERM);
	CHECK_ERRNO(rename(P(e->mnt, ".git/other"), P(e->mnt, ".git/index")), EPERM);
	CHECK_ERRNO(mkfifo(P(e->mnt, ".git/index"), 0644), EPERM);
	CHECK(!exists(host_index));
	/* "index" elsewhere is a name like any other */
	write_text(P(e->mnt, ".git/refs-index-note"), "x");
	CHECK_OK(mkdir(P(e->mnt, "docs"), 0755));
	write_text(P(e->mnt, "docs/index"), "a page");
}
RUN(router__an_index_changes_only_by_the_guarded_rename)

/* What Git renamed to index takes no write through a descriptor opened
 * before: the policy asks at every write, so the bytes the guard read are
 * the index's. */
static void router__no_write_reaches_the_index_through_an_earlier_descriptor(struct env *e)
{
	CHECK_OK(mkdir(P(e->mnt, ".git"), 0755));
	write_text(P(e->mnt, "tracked.txt"), "t");
	int fd = plant_index_lock_by(e, "add -f tracked.txt", true);
	CHECK_OK(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index")));
	struct stat before, after;
	CHECK_OK(stat(P(e->host, ".git/index"), &before));
	CHECK(pwrite(fd, "DIRC", 4, 0) < 0 && errno == EPERM, "write through the earlier descriptor: %s",
	      strerror(errno));
	CHECK_ERRNO(ftruncate(fd, 0), EPERM);
	CHECK_ERRNO(fallocate(fd, 0, 0, 1 << 20), EPERM);
	CHECK_OK(close(fd));
	CHECK_OK(stat(P(e->host, ".git/index"), &after));
	CHECK(after.st_size == before.st_size && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
}
RUN(router__no_write_reaches_the_index_through_an_earlier_descriptor)

/* ---- workspace policy ------------------------------------------------------ */

static mode_t mode_of(const char *path)
{
	struct stat st;
	CHECK(stat(path, &st) == 0, "stat %s: %s", path, strerror(errno));
	return st.st_mode & 07777;
}

/* Host-backed objects get no setuid or setgid bit (stripped) and no
 * foreign owner (refused); the Domain's private isolated backing keeps
 * what the sandbox sets. */
static void router__host_objects_get_no_setid_bits_or_foreign_owners(struct env *e)
{
	write_text(P(e->mnt, "tool"), "#!/bin/sh\n");
	CHECK_OK(chmod(P(e->mnt, "tool"), 04755));
	CHECK(mode_of(P(e->host, "tool")) == 0755, "host mode %o", mode_of(P(e->host, "tool")));
	CHECK(mode_of(P(e->mnt, "tool")) == 0755, "seen mode %o", mode_of(P(e->mnt, "tool")));
	CHECK_OK(chmod(P(e->mnt, "tool"), 02711));
	CHECK(mode_of(P(e->host, "tool")) == 0711);
	int fd = open(P(e->mnt, "made"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 06755);
	CHECK(fd >= 0, "create: %s", strerror(errno));
	CHECK(fchmod(fd, 04700) == 0);
	close(fd);
	CHECK(mode_of(P(e->host, "made")) == 0700, "host mode %o", mode_of(P(e->host, "made")));
	CHECK_OK(mkdir(P(e->mnt, "shared"), 02775));
	CHECK((mode_of(P(e->host, "shared")) & 02000) == 0, "setgid directory");

	/* isolated: kept */
	write_text(P(e->mnt, "tool.ign"), "x");
	CHECK_OK(chmod(P(e->mnt, "tool.ign"), 04755));
	CHECK(mode_of(P(e->iso, "tool.ign")) == 04755);

	/* owners: the developer (0 here) or unchanged, nothing else */
	struct stat before, after;
	CHECK_OK(stat(P(e->host, "tool"), &before));
	CHECK_OK(chown(P(e->mnt, "tool"), 0, 0));
	if (foreign_id_mapped) {
		CHECK_ERRNO(chown(P(e->mnt, "tool"), 1000, -1), EPERM);
		CHECK_ERRNO(chown(P(e->mnt, "tool"), -1, 1000), EPERM);
		CHECK_OK(chown(P(e->mnt, "tool.ign"), 1000, 1000));
	} else {
		CHECK(chown(P(e->mnt, "tool"), 1000, -1) < 0);
	}
	CHECK_OK(stat(P(e->host, "tool"), &after));
	CHECK(after.st_uid == before.st_uid && after.st_gid == before.st_gid);
}
RUN(router__host_objects_get_no_setid_bits_or_foreign_owners)

/* A watchdog process (not a thread: under ASan a thread or OpenSSL's
 * first use in a body forked from the router's threads can wait forever
 * on a lock held at the fork): after 5 s, unless done_path exists, it
 * opens the FIFO at path for writing, which lets a reader held in its
 * open go; it exits 1 when it did so. */
static pid_t fifo_watchdog(const char *path, const char *done_path)
{
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid != 0)
		return pid;
	for (int i = 0; i < 50 && access(done_path, F_OK) != 0; i++)
		usleep(100000);
	if (access(done_path, F_OK) == 0)
		_exit(0);
	int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC); /* ENXIO: no reader waits */
	_exit(fd >= 0 ? 1 : 0);
}

/* Git control files (the classifier's guard) cannot be written, made,
 * moved, linked or removed, whoever opened them; a guarded directory
 * cannot be moved, removed or replaced by a symlink; no host directory
 * becomes a Git directory. The host bytes stay what they were. */
static void router__git_control_files_are_refused(struct env *e)
{
	CHECK_OK(mkdir(P(e->host, ".git"), 0755));
	CHECK_OK(mkdir(P(e->host, ".git/objects"), 0755));
	CHECK_OK(mkdir(P(e->host, ".git/refs"), 0755));
	write_text(P(e->host, ".git/HEAD"), "ref: refs/heads/main\n");
	write_text(P(e->host, ".git/config"), "[core]\n");
	char cfg[512];
	snprintf(cfg, sizeof(cfg), "%s", P(e->mnt, ".git/config"));

	/* writing, whichever way it is opened */
	int fd = open(cfg, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd >= 0) { /* the kernel opened it without asking: the write fails */
		CHECK_ERRNO(write(fd, "\tfsmonitor = x\n", 15), EPERM);
		close(fd);
	} else {
		CHECK(errno == EPERM, "open: %s", strerror(errno));
	}
	write_text(P(e->mnt, "plain"), "abcdef");
	fd = open(P(e->mnt, "plain"), O_WRONLY | O_TRUNC | O_CLOEXEC);
	CHECK(fd >= 0 && close(fd) == 0);
	CHECK(strcmp(read_text(P(e->host, "plain")), "") == 0, "O_TRUNC did not truncate");
	fd = open(cfg, O_WRONLY | O_TRUNC | O_CLOEXEC);
	CHECK(fd < 0 && errno == EPERM, "O_TRUNC of config: fd %d, %s", fd, strerror(errno));
	CHECK_ERRNO(truncate(cfg, 0), EPERM);
	CHECK_ERRNO(chmod(cfg, 0777), EPERM);
	CHECK(strcmp(read_text(P(e->host, ".git/config")), "[core]\n") == 0, "config changed");
	CHECK(strcmp(read_text(cfg), "[core]\n") == 0);

	/* making, moving, linking, removing */
	CHECK_ERRNO(mkdir(P(e->mnt, ".git/hooks"), 0755), EPERM);
	CHECK(open(P(e->mnt, ".git/hooks"), O_WRONLY | O_CREAT | O_CLOEXEC, 0755) < 0 && errno == EPERM);
	CHECK_ERRNO(symlink("/tmp", P(e->mnt, ".git/hooks")), EPERM);
	write_text(P(e->mnt, "evil"), "[core]\n\tfsmonitor = touch /tmp/pwned\n");
	CHECK_ERRNO(rename(P(e->mnt, "evil"), cfg), EPERM);
	CHECK(link(P(e->mnt, "evil"), cfg) < 0); /* EEXIST from the kernel, or EPERM */
	CHECK_ERRNO(link(cfg, P(e->mnt, "cfg2")), EPERM);
	CHECK_ERRNO(rename(cfg, P(e->mnt, "moved")), EPERM);
	CHECK_ERRNO(rename2(P(e->mnt, "evil"), cfg, RENAME_EXCHANGE), EPERM);
	CHECK_ERRNO(unlink(cfg), EPERM);
	CHECK_ERRNO(rename(P(e->mnt, ".git"), P(e->mnt, "g2")), EPERM);
	CHECK_ERRNO(rmdir(P(e->mnt, ".git")), EPERM);
	CHECK(!exists(P(e->host, ".git/hooks")) && !exists(P(e->host, "cfg2")));
	CHECK(strcmp(read_text(P(e->host, ".git/config")), "[core]\n") == 0, "config changed");

	/* a holding directory: made empty, then never moved, removed or replaced */
	CHECK_ERRNO(symlink(".git", P(e->mnt, "keep")), EPERM);
	CHECK_OK(mkdir(P(e->mnt, "scratch"), 0755));
	write_text(P(e->mnt, "scratch/ctl"), "x");
	CHECK_ERRNO(rename(P(e->mnt, "scratch"), P(e->mnt, "keep")), EPERM);
	CHECK_OK(mkdir(P(e->mnt, "keep"), 0755));
	CHECK(open(P(e->mnt, "keep/ctl"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644) < 0 && errno == EPERM);
	CHECK_ERRNO(rename(P(e->mnt, "scratch/ctl"), P(e->mnt, "keep/ctl")), EPERM);
	CHECK_ERRNO(rename2(P(e->mnt, "scratch"), P(e->mnt, "keep"), RENAME_EXCHANGE), EPERM);
	CHECK_ERRNO(rmdir(P(e->mnt, "keep")), EPERM);
	CHECK(!exists(P(e->host, "keep/ctl")));

	/* a rewrite that changes nothing (git config through config.lock) */
	write_text(P(e->mnt, ".git/config.lock"), "[core]\n");
	CHECK_OK(rename(P(e->mnt, ".git/config.lock"), cfg));
	CHECK(!exists(P(e->host, ".git/config.lock")), "the lock file stays");
	write_text(P(e->mnt, ".git/config.lock"), "[core]\n\tfsmonitor = x\n");
	CHECK_ERRNO(rename(P(e->mnt, ".git/config.lock"), cfg), EPERM);
	CHECK(strcmp(read_text(P(e->host, ".git/config")), "[core]\n") == 0, "config changed");
	/* a FIFO the host left at a guarded name holds no worker while the
	 * rewrite is compared with it (a watchdog opens its other end after
	 * 5 s, which frees a held worker, and says so) */
	CHECK_OK(rename(P(e->host, ".git/config"), P(e->host, ".git/config.kept")));
	CHECK_OK(mkfifo(P(e->host, ".git/config"), 0644));
	write_text(P(e->mnt, ".git/config.lock"), "[core]\n");
	char done[256];
	snprintf(done, sizeof(done), "%s", P(e->dir, "fifo.done"));
	pid_t wd = fifo_watchdog(P(e->host, ".git/config"), done);
	CHECK_ERRNO(rename(P(e->mnt, ".git/config.lock"), cfg), EPERM);
	write_text(done, "");
	int wst = 0;
	CHECK(waitpid(wd, &wst, 0) == wd);
	CHECK(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "a worker was held opening the FIFO until its other end opened");
	CHECK_OK(unlink(done));
	CHECK_OK(unlink(P(e->host, ".git/config")));
	CHECK_OK(rename(P(e->host, ".git/config.kept"), P(e->host, ".git/config")));

	/* ordinary Git work in the Git directory goes on */
	write_text(P(e->mnt, ".git/HEAD.lock"), "ref: refs/heads/other\n");
	CHECK_OK(rename(P(e->mnt, ".git/HEAD.lock"), P(e->mnt, ".git/HEAD")));
	write_text(P(e->mnt, ".git/index.lock"), "i");
	CHECK_ERRNO(open(P(e->mnt, ".git/index"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644), EPERM); /* only by its rename */
	CHECK_OK(mkdir(P(e->mnt, ".git/refs/heads"), 0755));

	/* no new Git directory, in any order of its markers */
	CHECK_OK(mkdir(P(e->mnt, "b1"), 0755));
	CHECK_OK(mkdir(P(e->mnt, "b1/objects"), 0755));
	CHECK_OK(mkdir(P(e->mnt, "b1/refs"), 0755));
	CHECK(open(P(e->mnt, "b1/HEAD"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644) < 0 && errno == EPERM);
	CHECK_ERRNO(rename(P(e->mnt, "evil"), P(e->mnt, "b1/HEAD")), EPERM);
	CHECK_OK(mkdir(P(e->mnt, "b2"), 0755));
	write_text(P(e->mnt, "b2/HEAD"), "ref: refs/heads/main\n");
	CHECK_OK(mkdir(P(e->mnt, "b2/refs"), 0755));
	CHECK_ERRNO(mkdir(P(e->mnt, "b2/objects"), 0755), EPERM);
	CHECK_ERRNO(symlink("/tmp", P(e->mnt, "b2/commondir")), EPERM);
	CHECK(!exists(P(e->host, "b1/HEAD")) && !exists(P(e->host, "b2/objects")));
	/* the isolated backing is the sandbox's own */
	CHECK_OK(mkdir(P(e->mnt, "node_modules"), 0755));
	CHECK_OK(mkdir(P(e->mnt, "node_modules/objects"), 0755));
	CHECK_OK(mkdir(P(e->mnt, "node_modules/refs"), 0755));
	write_text(P(e->mnt, "node_modules/HEAD"), "ref: refs/heads/main\n");
}
RUN_BOTH(router__git_control_files_are_refused)

/* An access ACL's owner, group and other entries are the mode bits (and
 * a default ACL those of what host Git makes below): on a guarded object
 * an ACL is refused like chmod, set or removed (a world-writable config,
 * a disabled hook made executable again), and so are its other
 * attributes. Elsewhere ACLs pass through. */
/* A POSIX ACL of n entries in its xattr form (system.posix_acl_*), as
 * setfacl writes it. */
#define ACL_XATTR(n)                           \
	struct {                               \
		uint32_t version;              \
		struct {                       \
			uint16_t tag, perm;    \
			uint32_t id;           \
		} ent[n];                      \
	}

static void router__acls_of_guarded_files_are_refused_like_chmod(struct env *e)
{
	ACL_XATTR(3) rwx = { 2, { { 0x01, 7, UINT32_MAX }, { 0x04, 7, UINT32_MAX }, { 0x20, 7, UINT32_MAX } } };
	CHECK_OK(mkdir(P(e->host, ".git"), 0755));
	CHECK_OK(mkdir(P(e->host, ".git/hooks"), 0755));
	write_text(P(e->host, ".git/config"), "[core]\n");
	write_text(P(e->host, ".git/hooks/pre-commit"), "#!/bin/sh\n");
	CHECK_OK(chmod(P(e->host, ".git/config"), 0644));
	CHECK_OK(chmod(P(e->host, ".git/hooks/pre-commit"), 0644));
	const char *cfg = P(e->mnt, ".git/config"), *hook = P(e->mnt, ".git/hooks/pre-commit");
	const char *hooks = P(e->mnt, ".git/hooks");

	CHECK_ERRNO(setxattr(cfg, "system.posix_acl_access", &rwx, sizeof(rwx), 0), EPERM);
	CHECK_ERRNO(setxattr(hook, "system.posix_acl_access", &rwx, sizeof(rwx), 0), EPERM);
	CHECK_ERRNO(setxattr(hooks, "system.posix_acl_default", &rwx, sizeof(rwx), 0), EPERM);
	CHECK_ERRNO(setxattr(hooks, "system.posix_acl_access", &rwx, sizeof(rwx), 0), EPERM);
	CHECK_ERRNO(removexattr(cfg, "system.posix_acl_access"), EPERM);
	CHECK_ERRNO(removexattr(hooks, "system.posix_acl_default"), EPERM);
	CHECK_ERRNO(setxattr(cfg, "user.lazaret", "1", 1, 0), EPERM);
	CHECK(mode_of(P(e->host, ".git/config")) == 0644, "config mode %o", mode_of(P(e->host, ".git/config")));
	CHECK(mode_of(P(e->host, ".git/hooks/pre-commit")) == 0644, "hook mode %o",
	      mode_of(P(e->host, ".git/hooks/pre-commit")));
	CHECK(mode_of(P(e->host, ".git/hooks")) == 0755);
	char buf[64];
	CHECK(getxattr(P(e->host, ".git/hooks"), "system.posix_acl_default", buf, sizeof(buf)) < 0 &&
	      errno == ENODATA, "a default ACL on hooks");

	/* Elsewhere an ACL is a mode: none gives others write (rt_policy_mode) */
	write_text(P(e->mnt, "plain"), "p");
	CHECK_OK(chmod(P(e->mnt, "plain"), 0644));
	CHECK_ERRNO(setxattr(P(e->mnt, "plain"), "system.posix_acl_access", &rwx, sizeof(rwx), 0), EPERM);
	rwx.ent[2].perm = 5;
	CHECK_OK(setxattr(P(e->mnt, "plain"), "system.posix_acl_access", &rwx, sizeof(rwx), 0));
	CHECK(mode_of(P(e->host, "plain")) == 0775, "plain mode %o", mode_of(P(e->host, "plain")));
	CHECK_OK(mkdir(P(e->mnt, "dir"), 0755));
	rwx.ent[1].perm = 5; /* a default ACL gives the group no write either */
	CHECK_OK(setxattr(P(e->mnt, "dir"), "system.posix_acl_default", &rwx, sizeof(rwx), 0));
	CHECK_OK(removexattr(P(e->mnt, "dir"), "system.posix_acl_default"));
	rwx.ent[1].perm = 7;
	rwx.ent[2].perm = 7;
	CHECK_ERRNO(setxattr(P(e->mnt, "dir"), "system.posix_acl_default", &rwx, sizeof(rwx), 0), EPERM);
	/* a named user given write: another user */
	ACL_XATTR(5) named = { 2, { { 0x01, 7, UINT32_MAX },
				    { 0x02, 6, 0 },
				    { 0x04, 5, UINT32_MAX },
				    { 0x10, 7, UINT32_MAX },
				    { 0x20, 5, UINT32_MAX } } };
	CHECK_ERRNO(setxattr(P(e->mnt, "plain"), "system.posix_acl_access", &named, sizeof(named), 0), EPERM);
	CHECK_ERRNO(setxattr(P(e->mnt, "plain"), "system.posix_acl_access", &named, 7, 0), EINVAL);
}
RUN(router__acls_of_guarded_files_are_refused_like_chmod)

/* A minimal access or default ACL granting everyone everything (user::rwx
 * group::rwx other::rwx). */
static const ACL_XATTR(3) acl_all_rwx = { 2,
					  { { 0x01, 7, UINT32_MAX }, { 0x04, 7, UINT32_MAX }, { 0x20, 7, UINT32_MAX } } };
/* The same without write for others (user::rwx group::rwx other::r-x). */
static const ACL_XATTR(3) acl_group_rwx = { 2,
					    { { 0x01, 7, UINT32_MAX }, { 0x04, 7, UINT32_MAX }, { 0x20, 5, UINT32_MAX } } };

/* A directory that holds Git control files (a Git directory, a directory
 * on the way to an included file) gets no group or other write, no
 * sticky bit and keeps one it has, by chmod or fchmod: on the host, write
 * there lets any local user rename a config or a hook of theirs into the
 * repository, which runs as you with your next host Git. What takes
 * permissions away, or grants what the directory already grants, stays
 * allowed (Git chmods its own files); so do Git data and other
 * directories. */
static void router__directories_holding_git_control_files_gain_no_write(struct env *e)
{
	CHECK_OK(mkdir(P(e->host, ".git"), 0755));
	CHECK_OK(mkdir(P(e->host, ".git/refs"), 0755));
	CHECK_OK(mkdir(P(e->host, "keep"), 0755));
	CHECK_OK(chmod(P(e->host, ".git"), 0755)); /* exact, whatever the umask */
	CHECK_OK(chmod(P(e->host, "keep"), 0755));
	write_text(P(e->host, ".git/config"), "[core]\n");
	char git[512];
	snprintf(git, sizeof(git), "%s", P(e->mnt, ".git"));

	static const mode_t refused[] = { 0777, 0775, 0757, 0702, 01755, 03777 };
	for (size_t k = 0; k < sizeof(refused) / sizeof(refused[0]); k++)
		CHECK_ERRNO(chmod(git, refused[k]), EPERM);
	CHECK_ERRNO(chmod(P(e->mnt, "keep"), 0777), EPERM);
	int fd = open(git, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(fd >= 0, "open .git: %s", strerror(errno));
	CHECK_ERRNO(fchmod(fd, 0777), EPERM);
	CHECK(mode_of(P(e->host, ".git")) == 0755, "host .git mode %o", mode_of(P(e->host, ".git")));
	CHECK(mode_of(P(e->host, "keep")) == 0755, "host keep mode %o", mode_of(P(e->host, "keep")));

	/* taking away, and giving back what is not write */
	CHECK_OK(fchmod(fd, 0700));
	CHECK(mode_of(P(e->host, ".git")) == 0700, "host .git mode %o", mode_of(P(e->host, ".git")));
	close(fd);
	CHECK_OK(chmod(git, 0755));
	CHECK_OK(chmod(git, 02755)); /* set-ID bits stripped, as on every host object */
	CHECK(mode_of(P(e->host, ".git")) == 0755, "host .git mode %o", mode_of(P(e->host, ".git")));

	/* what it grants already (a developer's umask 002) */
	CHECK_OK(chmod(P(e->host, ".git"), 0775));
	CHECK_OK(chmod(git, 0775));
	CHECK_ERRNO(chmod(git, 0777), EPERM);
	CHECK_OK(chmod(git, 0755));
	CHECK(mode_of(P(e->host, ".git")) == 0755, "host .git mode %o", mode_of(P(e->host, ".git")));
	/* a sticky bit stays */
	CHECK_OK(chmod(P(e->host, ".git"), 01755));
	CHECK_ERRNO(chmod(git, 0755), EPERM);
	CHECK_OK(chmod(git, 01700));
	CHECK(mode_of(P(e->host, ".git")) == 01700, "host .git mode %o", mode_of(P(e->host, ".git")));

	/* Git data (a shared repository's directories) and other directories */
	CHECK_OK(chmod(P(e->mnt, ".git/refs"), 02775));
	CHECK(mode_of(P(e->host, ".git/refs")) == 0775, "host refs mode %o", mode_of(P(e->host, ".git/refs")));
	CHECK_OK(mkdir(P(e->mnt, "plain"), 0755));
	CHECK_OK(chmod(P(e->mnt, "plain"), 0777));
	/* no host object gets write for others (rt_policy_mode) */
	CHECK(mode_of(P(e->host, "plain")) == 0775, "host plain mode %o", mode_of(P(e->host, "plain")));
}
RUN(router__directories_holding_git_control_files_gain_no_write)

/* No POSIX ACL is set on or removed from a directory holding Git control
 * files (an access ACL is mode bits, a default ACL those of what is made
 * below), and no default ACL is set in Git data: what host Git makes
 * there later (a new .git/modules/<name> and its config) would inherit
 * it, and no mode rule looks there. Git data's access ACLs are modes, as
 * free as its chmod; other attributes pass. */
static void router__acls_in_git_directories_are_refused(struct env *e)
{
	const void *acl = &acl_all_rwx;
	size_t n = sizeof(acl_all_rwx);
	CHECK_OK(mkdir(P(e->host, ".git"), 0755));
	CHECK_OK(mkdir(P(e->host, ".git/refs"), 0755));
	CHECK_OK(mkdir(P(e->host, "keep"), 0755));
	CHECK_OK(chmod(P(e->host, ".git"), 0755));
	char git[512];
	snprintf(git, sizeof(git), "%s", P(e->mnt, ".git"));

	CHECK_ERRNO(setxattr(git, "system.posix_acl_access", acl, n, 0), EPERM);
	CHECK_ERRNO(setxattr(git, "system.posix_acl_default", acl, n, 0), EPERM);
	CHECK_ERRNO(removexattr(git, "system.posix_acl_access"), EPERM);
	CHECK_ERRNO(removexattr(git, "system.posix_acl_default"), EPERM);
	CHECK_ERRNO(setxattr(P(e->mnt, "keep"), "system.posix_acl_default", acl, n, 0), EPERM);
	CHECK_OK(mkdir(P(e->mnt, ".git/modules"), 0755));
	CHECK_ERRNO(setxattr(P(e->mnt, ".git/modules"), "system.posix_acl_default", acl, n, 0), EPERM);
	CHECK(mode_of(P(e->host, ".git")) == 0755, "host .git mode %o", mode_of(P(e->host, ".git")));
	char buf[64];
	CHECK(getxattr(P(e->host, ".git"), "system.posix_acl_default", buf, sizeof(buf)) < 0 && errno == ENODATA,
	      "a default ACL on .git");
	CHECK(getxattr(P(e->host, ".git/modules"), "system.posix_acl_default", buf, sizeof(buf)) < 0 &&
	      errno == ENODATA, "a default ACL on .git/modules");
	CHECK_OK(removexattr(P(e->mnt, ".git/modules"), "system.posix_acl_default"));
	CHECK_ERRNO(setxattr(P(e->mnt, ".git/refs"), "system.posix_acl_access", acl, n, 0), EPERM); /* other write */
	CHECK_OK(setxattr(P(e->mnt, ".git/refs"), "system.posix_acl_access", &acl_group_rwx, sizeof(acl_group_rwx), 0));
	CHECK(mode_of(P(e->host, ".git/refs")) == 0775, "host refs mode %o", mode_of(P(e->host, ".git/refs")));
	CHECK_OK(setxattr(git, "user.lazaret", "1", 1, 0));
	CHECK_OK(removexattr(git, "user.lazaret"));
}
RUN(router__acls_in_git_directories_are_refused)

/* A default ACL replaces the umask of what is made below it later: one
 * giving the owning group write on a host directory would make a
 * repository the developer creates there (git init, a clone) group-
 * writable, its .git/config another user's to rewrite. So a default ACL
 * on the host gives no write to the group (group:: or mask::), as none
 * gives it to others or named entries; read and search pass, access
 * ACLs stay modes (group write allowed, as by chmod), and the isolated
 * backing keeps what the sandbox sets. */
static void router__default_acls_give_the_group_no_write_on_the_host(struct env *e)
{
	ACL_XATTR(5) masked = { 2, { { 0x01, 7, UINT32_MAX },
				     { 0x02, 5, 0 },
				     { 0x04, 5, UINT32_MAX },
				     { 0x10, 7, UINT32_MAX },
				     { 0x20, 5, UINT32_MAX } } };
	ACL_XATTR(3) rx = { 2, { { 0x01, 7, UINT32_MAX }, { 0x04, 5, UINT32_MAX }, { 0x20, 5, UINT32_MAX } } };
	char buf[128];
	CHECK_OK(mkdir(P(e->mnt, "vendor"), 0755));
	CHECK_ERRNO(setxattr(P(e->mnt, "vendor"), "system.posix_acl_default", &acl_group_rwx, sizeof(acl_group_rwx), 0),
		    EPERM);
	CHECK_ERRNO(setxattr(P(e->mnt, "vendor"), "system.posix_acl_default", &masked, sizeof(masked), 0), EPERM);
	CHECK(getxattr(P(e->host, "vendor"), "system.posix_acl_default", buf, sizeof(buf)) < 0 && errno == ENODATA,
	      "a default ACL on host vendor");
	CHECK_OK(setxattr(P(e->mnt, "vendor"), "system.posix_acl_default", &rx, sizeof(rx), 0));
	masked.ent[3].perm = 5;
	CHECK_OK(setxattr(P(e->mnt, "vendor"), "system.posix_acl_default", &masked, sizeof(masked), 0));
	CHECK(getxattr(P(e->host, "vendor"), "system.posix_acl_default", buf, sizeof(buf)) > 0);
	/* what the developer makes there later: no group write */
	CHECK_OK(mkdir(P(e->host, "vendor/lib"), 0777));
	CHECK((mode_of(P(e->host, "vendor/lib")) & S_IWGRP) == 0, "vendor/lib mode %o", mode_of(P(e->host, "vendor/lib")));
	/* an access ACL is a mode: group write as chmod g+w gives it */
	CHECK_OK(setxattr(P(e->mnt, "vendor"), "system.posix_acl_access", &acl_group_rwx, sizeof(acl_group_rwx), 0));
	CHECK(mode_of(P(e->host, "vendor")) == 0775, "host vendor mode %o", mode_of(P(e->host, "vendor")));
	/* the Domain's own state */
	CHECK_OK(mkdir(P(e->mnt, "node_modules"), 0755));
	CHECK_OK(setxattr(P(e->mnt, "node_modules"), "system.posix_acl_default", &acl_group_rwx, sizeof(acl_group_rwx),
			  0));
}
RUN(router__default_acls_give_the_group_no_write_on_the_host)

/* Whatever the sandbox's umask and the router's (the developer's; 0 for
 * both here), a new entry in a Git directory or holding Git control files
 * is made on the host without group or other write (the kernel passes
 * the mode after the caller's umask, and mkdir applies only the
 * router's). Elsewhere the mode asked is the mode made. */
static void router__new_entries_in_a_git_directory_get_no_group_or_other_write(struct env *e)
{
	umask(0);
	CHECK_OK(mkdir(P(e->host, ".git"), 0755));
	CHECK_OK(mkdir(P(e->mnt, "plain"), 0777));
	CHECK(mode_of(P(e->host, "plain")) == 0775, "host plain mode %o", mode_of(P(e->host, "plain")));

	CHECK_OK(mkdir(P(e->mnt, ".git/new"), 0777));
	CHECK(mode_of(P(e->host, ".git/new")) == 0755, "host .git/new mode %o", mode_of(P(e->host, ".git/new")));
	CHECK_OK(mkdir(P(e->mnt, ".git/new/sub"), 0777));
	CHECK(mode_of(P(e->host, ".git/new/sub")) == 0755, "host .git/new/sub mode %o",
	      mode_of(P(e->host, ".git/new/sub")));
	CHECK_OK(mkdir(P(e->mnt, "keep"), 0777));
	CHECK(mode_of(P(e->host, "keep")) == 0755, "host keep mode %o", mode_of(P(e->host, "keep")));
	int fd = open(P(e->mnt, ".git/file"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	CHECK(fd >= 0, "create: %s", strerror(errno));
	close(fd);
	CHECK(mode_of(P(e->host, ".git/file")) == 0644, "host .git/file mode %o", mode_of(P(e->host, ".git/file")));
	CHECK_OK(mknod(P(e->mnt, ".git/node"), S_IFREG | 0666, 0));
	CHECK(mode_of(P(e->host, ".git/node")) == 0644, "host .git/node mode %o", mode_of(P(e->host, ".git/node")));
	/* Git data made writable later (allowed) does not move to where control
	 * files are held: such a directory is never replaced */
	CHECK_OK(mkdir(P(e->mnt, ".git/new/open"), 0755));
	CHECK_OK(chmod(P(e->mnt, ".git/new/open"), 0777));
	CHECK_ERRNO(rename(P(e->mnt, ".git/new/open"), P(e->mnt, "flipkeep")), EPERM);
}

static void test_router__new_entries_in_a_git_directory_get_no_group_or_other_write(void **state)
{
	router_umask = 0;
	with_router(*state, router__new_entries_in_a_git_directory_get_no_group_or_other_write);
	router_umask = -1;
}

/* Inside a known Git directory nothing is made a symlink or a special
 * file, by any way in: host Git follows a symlinked reflog, index, commit
 * message or ref directory out of the repository (a reflog linked to
 * ~/.bashrc gets Git's next line appended there) and blocks on a FIFO.
 * Git's own work there goes on. */
/* An index of no entries, as Git writes it (version 2, SHA-1): the
 * index-lock guard refuses what it cannot read. */
static void write_empty_index(const char *path)
{
	static const char index[] = "DIRC\x00\x00\x00\x02\x00\x00\x00\x00\x39\xd8\x90\x13\x9e\xe5\x35\x6c"
				    "\x7e\xf5\x72\x21\x6c\xeb\xcd\x27\xaa\x41\xf9\xdf";
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	CHECK(fd >= 0, "create %s: %s", path, strerror(errno));
	CHECK(write(fd, index, sizeof(index) - 1) == (ssize_t)sizeof(index) - 1);
	CHECK_OK(close(fd));
}

/* No FIFO or socket under a name host Git opens in every worktree
 * directory: its open would hang the developer's git status (and the
 * router's own ignore-rule reads). Made, renamed, exchanged or linked
 * there: EPERM; elsewhere they stay allowed. */
static void router__no_fifo_where_git_reads_a_file(struct env *e)
{
	static const char *const names[] = { ".gitignore", ".gitattributes", ".gitmodules", ".mailmap",
					     "sub/.gitignore" };
	CHECK_OK(mkdir(P(e->mnt, "sub"), 0755));
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
		CHECK_ERRNO(mkfifo(P(e->mnt, names[k]), 0644), EPERM);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", P(e->mnt, ".gitattributes"));
	CHECK_ERRNO(bind(s, (struct sockaddr *)&sa, sizeof(sa)), EPERM);
	close(s);
	CHECK_OK(mkfifo(P(e->mnt, "fifo"), 0644));
	CHECK_ERRNO(rename(P(e->mnt, "fifo"), P(e->mnt, "sub/.gitignore")), EPERM);
	CHECK_ERRNO(link(P(e->mnt, "fifo"), P(e->mnt, ".mailmap")), EPERM);
	write_text(P(e->mnt, ".gitignore"), "*.o\n");
	CHECK_ERRNO(rename2(P(e->mnt, "fifo"), P(e->mnt, ".gitignore"), RENAME_EXCHANGE), EPERM);
	CHECK_ERRNO(rename2(P(e->mnt, ".gitignore"), P(e->mnt, "fifo"), RENAME_EXCHANGE), EPERM);
	struct stat st;
	CHECK_OK(lstat(P(e->host, ".gitignore"), &st));
	CHECK(S_ISREG(st.st_mode), ".gitignore is no longer a regular file");
	for (size_t k = 1; k < sizeof(names) / sizeof(names[0]); k++)
		CHECK(!exists(P(e->host, names[k])), "%s was made", names[k]);
	CHECK_OK(lstat(P(e->host, "fifo"), &st));
	CHECK(S_ISFIFO(st.st_mode));
}
RUN_BOTH(router__no_fifo_where_git_reads_a_file)

static void router__no_links_or_special_files_in_a_git_directory(struct env *e)
{
	CHECK_OK(mkdir(P(e->host, ".git"), 0755));
	CHECK_OK(mkdir(P(e->host, ".git/objects"), 0755));
	CHECK_OK(mkdir(P(e->host, ".git/refs"), 0755));
	CHECK_OK(mkdir(P(e->host, ".git/logs"), 0755));
	write_text(P(e->host, ".git/HEAD"), "ref: refs/heads/main\n");
	write_text(P(e->host, ".git/config"), "[core]\n");
	static const char *const names[] = { ".git/logs/HEAD", ".git/index", ".git/COMMIT_EDITMSG",
					     ".git/packed-refs", ".git/refs/heads", ".git/objects/info" };
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		CHECK_ERRNO(symlink("../../../.bashrc", P(e->mnt, names[k])), EPERM);
		CHECK_ERRNO(mkfifo(P(e->mnt, names[k]), 0644), EPERM);
		CHECK(!exists(P(e->host, names[k])), "%s was made", names[k]);
	}
	/* brought in: a link moved or linked there, a directory holding one */
	CHECK_OK(symlink("../../.bashrc", P(e->mnt, "ln")));
	CHECK_ERRNO(rename(P(e->mnt, "ln"), P(e->mnt, ".git/logs/HEAD")), EPERM);
	CHECK_ERRNO(link(P(e->mnt, "ln"), P(e->mnt, ".git/index")), EPERM);
	CHECK_OK(mkdir(P(e->mnt, "refs-heads"), 0755));
	CHECK_OK(symlink("../../../.bashrc", P(e->mnt, "refs-heads/main")));
	CHECK_ERRNO(rename(P(e->mnt, "refs-heads"), P(e->mnt, ".git/refs/heads")), EPERM);
	write_text(P(e->mnt, "plain"), "p");
	CHECK_OK(mkdir(P(e->mnt, ".git/logs/refs"), 0755));
	CHECK_ERRNO(rename2(P(e->mnt, "ln"), P(e->mnt, ".git/logs/refs"), RENAME_EXCHANGE), EPERM);
	CHECK(!exists(P(e->host, ".git/logs/HEAD")) && !exists(P(e->host, ".git/index")) &&
	      !exists(P(e->host, ".git/refs/heads")), "a link came in");
	/* Git's own work: files made, written, renamed over, removed;
	 * directories made and moved within */
	write_empty_index(P(e->mnt, ".git/index.lock"));
	CHECK_OK(rename(P(e->mnt, ".git/index.lock"), P(e->mnt, ".git/index")));
	write_text(P(e->mnt, ".git/logs/HEAD"), "0 1 x\n");
	CHECK_OK(mkdir(P(e->mnt, ".git/refs/heads"), 0755));
	write_text(P(e->mnt, ".git/refs/heads/main"), "0\n");
	CHECK_OK(mkdir(P(e->mnt, ".git/rebase-merge"), 0755));
	CHECK_OK(rename(P(e->mnt, ".git/rebase-merge"), P(e->mnt, ".git/rebase-apply")));
	CHECK_OK(rmdir(P(e->mnt, ".git/rebase-apply")));
	CHECK_OK(unlink(P(e->mnt, ".git/logs/HEAD")));
	CHECK_OK(rename(P(e->mnt, "plain"), P(e->mnt, ".git/COMMIT_EDITMSG")));
	CHECK(strncmp(read_text(P(e->host, ".git/index")), "DIRC", 4) == 0, "the index");
	/* outside a Git directory, links are the sandbox's as before */
	CHECK_OK(symlink("/tmp", P(e->mnt, "elsewhere")));
}
RUN_BOTH(router__no_links_or_special_files_in_a_git_directory)

/* Host Git's lock of a control file (config.lock, written, then renamed
 * over config): the sandbox cannot write, truncate, remove, replace,
 * move or link it, before the host's rename or after it through a handle
 * it already held; its own lock files work as before. */
static void router__host_git_lock_files_are_not_the_sandboxs(struct env *e)
{
	char lock[512];
	snprintf(lock, sizeof(lock), "%s", P(e->mnt, ".git/config.lock"));
	const char *host_bytes = "[core]\n\tbare = false\n";
	CHECK(strcmp(read_text(lock), host_bytes) == 0, "the host's lock is readable inside");
	int held = open(lock, O_WRONLY | O_CLOEXEC);
	if (held >= 0)
		CHECK_ERRNO(pwrite(held, "[core]\n\tfsmonitor = evil\n", 26, 0), EPERM);
	else
		CHECK(errno == EPERM, "open: %s", strerror(errno));
	int fd = open(lock, O_WRONLY | O_TRUNC | O_CLOEXEC);
	CHECK(fd < 0 && errno == EPERM, "O_TRUNC of the host's lock: fd %d, %s", fd, strerror(errno));
	fd = open(lock, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0) {
		CHECK_ERRNO(write(fd, "x", 1), EPERM);
		close(fd);
	} else {
		CHECK(errno == EPERM, "open O_CREAT: %s", strerror(errno));
	}
	CHECK_ERRNO(truncate(lock, 0), EPERM);
	CHECK_ERRNO(unlink(lock), EPERM);
	CHECK_ERRNO(rename(lock, P(e->mnt, "moved")), EPERM);
	CHECK_ERRNO(link(lock, P(e->mnt, "lock2")), EPERM);
	write_text(P(e->mnt, "evil"), "[core]\n\tfsmonitor = touch /tmp/pwned\n");
	CHECK_ERRNO(rename(P(e->mnt, "evil"), lock), EPERM);
	CHECK_ERRNO(rename2(P(e->mnt, "evil"), lock, RENAME_EXCHANGE), EPERM);
	CHECK(strcmp(read_text(P(e->host, ".git/config.lock")), host_bytes) == 0, "the host's lock changed");
	CHECK(!exists(P(e->host, "moved")) && !exists(P(e->host, "lock2")));

	/* host Git renames its lock over config: the handle held on it
	 * writes nothing there either */
	CHECK_OK(rename(P(e->host, ".git/config.lock"), P(e->host, ".git/config")));
	if (held >= 0) {
		CHECK_ERRNO(pwrite(held, "EVIL", 4, 0), EPERM);
		close(held);
	}
	CHECK(strcmp(read_text(P(e->host, ".git/config")), host_bytes) == 0, "config changed");

	/* the sandbox's own lock: written, removed, renamed when unchanged */
	fd = open(lock, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	CHECK(fd >= 0, "create the sandbox's lock: %s", strerror(errno));
	CHECK(write(fd, host_bytes, strlen(host_bytes)) == (ssize_t)strlen(host_bytes), "write: %s",
	      strerror(errno));
	CHECK_OK(close(fd));
	CHECK_OK(rename(lock, P(e->mnt, ".git/config")));
	CHECK(!exists(P(e->host, ".git/config.lock")), "the sandbox's unchanged lock stays");
	write_text(lock, "mine");
	CHECK_OK(truncate(lock, 1));
	CHECK_OK(unlink(lock));
	write_text(P(e->mnt, "mine"), "also mine");
	CHECK_OK(rename(P(e->mnt, "mine"), lock));
	write_text(lock, "rewritten");
	CHECK_OK(unlink(lock));
	/* other lock files are ordinary files */
	write_text(P(e->host, ".git/HEAD.lock"), "host");
	write_text(P(e->mnt, ".git/HEAD.lock"), "ref: refs/heads/x\n");
	CHECK_OK(unlink(P(e->mnt, ".git/HEAD.lock")));
}

/* The host's .git/config, as host Git has it. */
static void host_git_config(struct env *e)
{
	assert_int_equal(mkdir(P(e->host, ".git"), 0755), 0);
	FILE *f = fopen(P(e->host, ".git/config"), "w");
	assert_non_null(f);
	fputs("[core]\n", f);
	fclose(f);
}

static void test_router__host_git_lock_files_are_not_the_sandboxs(void **state)
{
	struct env *e = *state;
	host_git_config(e);
	FILE *f = fopen(P(e->host, ".git/config.lock"), "w");
	assert_non_null(f);
	fputs("[core]\n\tbare = false\n", f);
	fclose(f);
	with_router(e, router__host_git_lock_files_are_not_the_sandboxs);
}

static void test_router__host_git_lock_files_are_not_the_sandboxs__open_requests(void **state)
{
	open_requests = true;
	test_router__host_git_lock_files_are_not_the_sandboxs(state);
	open_requests = false;
}

/* A lock name holds only an object made there exclusively: Git makes its
 * lock with O_EXCL and never renames onto one. So a rename onto a lock
 * name never replaces what is there, even the sandbox's own lock (host
 * Git's could appear between a check and the rename), nor exchanges, and
 * neither a link nor a rename of an object that has another name puts one
 * there (that name would write what host Git renames over config). A
 * single-named object is still moved there, as before. */
static void router__a_lock_name_is_never_replaced_or_aliased(struct env *e)
{
	char lock[512];
	snprintf(lock, sizeof(lock), "%s", P(e->mnt, ".git/config.lock"));
	write_text(P(e->mnt, "evil"), "[alias]\n\tpwned = !touch /tmp/pwned\n");
	CHECK_ERRNO(link(P(e->mnt, "evil"), lock), EPERM);
	CHECK_OK(link(P(e->mnt, "evil"), P(e->mnt, "evil2")));
	CHECK_ERRNO(rename(P(e->mnt, "evil2"), lock), EPERM);
	CHECK(!exists(P(e->host, ".git/config.lock")), "the lock got a second name");
	CHECK_OK(unlink(P(e->mnt, "evil2")));

	int fd = open(lock, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	CHECK(fd >= 0, "create the sandbox's lock: %s", strerror(errno));
	CHECK_OK(close(fd));
	CHECK_ERRNO(rename(P(e->mnt, "evil"), lock), EPERM);
	CHECK_ERRNO(rename2(P(e->mnt, "evil"), lock, RENAME_NOREPLACE), EEXIST);
	CHECK_ERRNO(rename2(P(e->mnt, "evil"), lock, RENAME_EXCHANGE), EPERM);
	CHECK_ERRNO(rename2(lock, P(e->mnt, "evil"), RENAME_EXCHANGE), EPERM);
	CHECK(strcmp(read_text(P(e->host, ".git/config.lock")), "") == 0, "the lock was replaced");
	CHECK_OK(unlink(lock));

	CHECK_OK(rename(P(e->mnt, "evil"), lock));
	CHECK_OK(rename(lock, P(e->mnt, "back")));
	CHECK_OK(unlink(P(e->mnt, "back")));
}

static void test_router__a_lock_name_is_never_replaced_or_aliased(void **state)
{
	struct env *e = *state;
	host_git_config(e);
	with_router(e, router__a_lock_name_is_never_replaced_or_aliased);
}

/* Host Git's lock against a sandbox that races it. Racers are processes
 * (killed when done), not threads: the body is forked from the router's
 * threaded process, and a sanitizer's allocator lock held there at the
 * fork would stop a new thread's start; a racer allocates nothing. */
struct lock_race {
	int kind;    /* RACE_* */
	char lock[512]; /* the lock name through the mount */
	char mine[512]; /* RACE_REPLACE: the file renamed onto it */
	int dfd;     /* RACE_REMOVE_AT: unlinks ctl.lock of this directory */
};
enum { RACE_REPLACE, RACE_MAKE_REMOVE, RACE_REMOVE, RACE_REMOVE_AT };

static _Noreturn void lock_racer(const struct lock_race *a)
{
	static const char evil[] = "[alias]\n\tpwned = !touch /tmp/pwned\n";
	for (;;) {
		int fd = -1;
		switch (a->kind) {
		case RACE_REPLACE:
			fd = open(a->mine, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
			if (fd >= 0 && write(fd, evil, sizeof(evil) - 1) >= 0 && close(fd) == 0 &&
			    rename(a->mine, a->lock) == 0)
				(void)unlink(a->lock);
			break;
		case RACE_MAKE_REMOVE:
			fd = open(a->lock, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
			if (fd >= 0) {
				(void)!write(fd, evil, sizeof(evil) - 1);
				close(fd);
			}
			(void)unlink(a->lock);
			break;
		case RACE_REMOVE:
			(void)unlink(a->lock);
			break;
		default:
			(void)unlinkat(a->dfd, "ctl.lock", 0);
			break;
		}
	}
}

/* Host Git for seconds: makes its lock (O_EXCL; when the sandbox's is
 * there, it fails and tries again), writes it and renames it over the
 * control file. NULL, or what went wrong. */
static const char *host_git_commits(const char *hlock, const char *hctl, int seconds, int *ret_commits)
{
	static const char host_bytes[] = "[core]\n\tbare = false\n";
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	*ret_commits = 0;
	for (now = start; now.tv_sec - start.tv_sec < seconds; clock_gettime(CLOCK_MONOTONIC, &now)) {
		int fd = open(hlock, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0)
			continue;
		CHECK(write(fd, host_bytes, sizeof(host_bytes) - 1) == (ssize_t)sizeof(host_bytes) - 1);
		CHECK_OK(close(fd));
		usleep((unsigned)(*ret_commits % 7) * 20);
		if (rename(hlock, hctl) < 0) {
			CHECK(errno == ENOENT, "rename: %s", strerror(errno));
			return "host Git's lock was removed";
		}
		++*ret_commits;
		if (strcmp(read_text(hctl), host_bytes) != 0)
			return "the control file got the sandbox's bytes";
	}
	return NULL;
}

/* Runs the racers (kinds[], n of them) against host Git's commits of
 * host/dir/ctl for seconds and checks host Git always committed its own
 * lock. */
static void race_host_git(struct env *e, const char *dir, const int *kinds, int n, int dfd, int seconds)
{
	char hlock[512], hctl[512];
	snprintf(hlock, sizeof(hlock), "%s/%s/ctl.lock", e->host, dir);
	snprintf(hctl, sizeof(hctl), "%s/%s/ctl", e->host, dir);
	pid_t pid[4];
	CHECK(n <= 4);
	for (int k = 0; k < n; k++) {
		struct lock_race a = { .kind = kinds[k], .dfd = dfd };
		snprintf(a.lock, sizeof(a.lock), "%s/%s/ctl.lock", e->mnt, dir);
		snprintf(a.mine, sizeof(a.mine), "%s/mine.%d", e->mnt, k);
		pid_t body = getpid();
		pid[k] = fork();
		CHECK(pid[k] >= 0, "fork: %s", strerror(errno));
		if (pid[k] == 0) {
			/* gone with the body, should a check end it first */
			if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != body)
				_exit(1);
			lock_racer(&a);
		}
	}
	int commits;
	const char *bad = host_git_commits(hlock, hctl, seconds, &commits);
	for (int k = 0; k < n; k++) {
		kill(pid[k], SIGKILL);
		CHECK(waitpid(pid[k], NULL, 0) == pid[k]);
	}
	CHECK(bad == NULL, "%s after %d commits", bad, commits);
	CHECK(commits > 0, "host Git never got its lock");
}

/* Host Git's lock (made with O_EXCL, written, renamed over the control
 * file, again and again) against sandbox threads that rename their own
 * object to the lock name, make their own lock, and remove the lock
 * name: what is at a lock name is checked and acted on in one step, so
 * the control file only ever gets the host's bytes. */
static void router__host_git_lock_survives_a_racing_sandbox(struct env *e)
{
	static const int kinds[] = { RACE_REPLACE, RACE_REPLACE, RACE_MAKE_REMOVE, RACE_REMOVE };
	race_host_git(e, "keep", kinds, 4, -1, 2); /* lost in about 10 commits without the rule */
}

/* The same with the sandbox's own lock taken away through two views of
 * its directory at once (the host's, and a stale isolated inode the
 * kernel held across a publish: the kernel serializes removals within
 * one directory inode only): a remover never removes host Git's lock,
 * which appeared after another remover took the sandbox's away. */
static void router__host_git_lock_survives_removers_in_two_views(struct env *e)
{
	CHECK_OK(publish(e, true));
	CHECK_OK(mkdir(P(e->mnt, "flipkeep"), 0755));
	int stale = open(P(e->mnt, "flipkeep"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(stale >= 0, "open flipkeep: %s", strerror(errno));
	CHECK_OK(publish(e, false));
	static const int kinds[] = { RACE_MAKE_REMOVE, RACE_REMOVE_AT, RACE_REMOVE_AT, RACE_MAKE_REMOVE };
	race_host_git(e, "flipkeep", kinds, 4, stale, 5); /* lost in 1 to 3 s without the rule */
	CHECK_OK(close(stale));
}

static void lock_race_fixture(struct env *e, const char *dir)
{
	assert_int_equal(mkdir(P(e->host, dir), 0755), 0);
	char ctl[128];
	snprintf(ctl, sizeof(ctl), "%s/ctl", dir);
	FILE *f = fopen(P(e->host, ctl), "w");
	assert_non_null(f);
	fputs("[core]\n", f);
	fclose(f);
}

static void test_router__host_git_lock_survives_a_racing_sandbox(void **state)
{
	lock_race_fixture(*state, "keep");
	with_router(*state, router__host_git_lock_survives_a_racing_sandbox);
}

static void test_router__host_git_lock_survives_removers_in_two_views(void **state)
{
	lock_race_fixture(*state, "flipkeep");
	no_negative_cache = true; /* the stale view's removers look the lock up each time */
	with_router(*state, router__host_git_lock_survives_removers_in_two_views);
	no_negative_cache = false;
}

/* A directory the kernel holds keeps the backing it was found in when a
 * publish moves its path to the host (flipapp/refs, isolated while
 * flipped): nothing made through it makes a host directory, which would
 * skip the policy (host flipapp/refs beside the host's HEAD and objects
 * is a bare repository host Git enters and runs the configuration of).
 * ESTALE; a new lookup finds the host's directory, where the policy
 * applies. Isolated entries are still made through it. */
static void router__a_stale_isolated_directory_makes_no_host_directory(struct env *e)
{
	CHECK_OK(mkdir(P(e->host, "flipapp"), 0755));
	write_text(P(e->host, "flipapp/HEAD"), "ref: refs/heads/main\n");
	CHECK_OK(mkdir(P(e->host, "flipapp/objects"), 0755));
	write_text(P(e->host, "h.txt"), "h");
	CHECK_OK(publish(e, true));
	CHECK_OK(mkdir(P(e->mnt, "flipapp"), 0755));
	CHECK_OK(mkdir(P(e->mnt, "flipapp/refs"), 0755));
	CHECK(exists(P(e->iso, "flipapp/refs")) && !exists(P(e->host, "flipapp/refs")));
	int refs = open(P(e->mnt, "flipapp/refs"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(refs >= 0, "open flipapp/refs: %s", strerror(errno));
	CHECK_OK(publish(e, false));

	CHECK_ERRNO(mkdirat(refs, "heads", 0755), ESTALE);
	int fd = openat(refs, "main", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	CHECK(fd < 0 && errno == ESTALE, "create: fd %d, %s", fd, strerror(errno));
	CHECK_ERRNO(symlinkat("x", refs, "ln"), ESTALE);
	CHECK_ERRNO(mknodat(refs, "fifo", S_IFIFO | 0644, 0), ESTALE);
	CHECK_ERRNO(renameat(AT_FDCWD, P(e->mnt, "h.txt"), refs, "moved"), ESTALE);
	CHECK_ERRNO(linkat(AT_FDCWD, P(e->mnt, "h.txt"), refs, "linked", 0), ESTALE);
	CHECK(!exists(P(e->host, "flipapp/refs")), "host flipapp/refs was made beside HEAD and objects");
	CHECK(exists(P(e->host, "h.txt")));

	CHECK_OK(mkdirat(refs, "k.ign", 0755));
	CHECK(exists(P(e->iso, "flipapp/refs/k.ign")));
	CHECK_OK(close(refs));
	CHECK_ERRNO(mkdir(P(e->mnt, "flipapp/refs"), 0755), EPERM);
	CHECK(!exists(P(e->host, "flipapp/refs")));
}
RUN(router__a_stale_isolated_directory_makes_no_host_directory)

/* ---- more inodes than descriptors ------------------------------------------- */

static size_t count_fds(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	CHECK(d != NULL, "opendir %s: %s", path, strerror(errno));
	size_t n = 0;
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n - 2;
}

/* A file linked to a second name and that name removed keeps its first
 * (the kernel holds it through it), but the router only knew the newer:
 * it kept that object's descriptor, one per three calls of the sandbox's
 * and never closed (a helper's audit: 1,022 descriptors held with a
 * budget of 16, then EMFILE). Such descriptors are kept only up to the
 * cache's budget. */
static void router__descriptors_kept_for_unlinked_names_are_bounded(struct env *e)
{
	char f[64], g[64];
	pid_t router = getppid();
	size_t before = count_fds(router);
	for (int i = 0; i < 200; i++) {
		snprintf(f, sizeof(f), "f%03d", i);
		snprintf(g, sizeof(g), "g%03d", i);
		write_text(P(e->mnt, f), "x");
		CHECK_OK(link(P(e->mnt, f), P(e->mnt, g)));
		CHECK_OK(unlink(P(e->mnt, g)));
	}
	size_t after = count_fds(router);
	CHECK(after <= before + 2 * 16 + 8, "%zu descriptors before, %zu after", before, after);
	/* the names the host keeps are whole */
	for (int i = 0; i < 200; i += 37) {
		snprintf(f, sizeof(f), "f%03d", i);
		CHECK(strcmp(read_text(P(e->host, f)), "x") == 0);
	}
}
RUN(router__descriptors_kept_for_unlinked_names_are_bounded)

#define NOFILE_DIRS 30
#define NOFILE_FILES 100

/* File f of directory d of the fixture; every third one is isolated. */
static const char *nofile_name(char buf[64], int d, int f)
{
	snprintf(buf, 64, "d%02d/f%03d%s", d, f, f % 3 ? "" : ".ign");
	return buf;
}

/* Stats files from.. of directory d: the kernel looks them up, and the
 * router's descriptors of older inodes are evicted. */
static void stat_files(struct env *e, int d, int from)
{
	char name[64];
	struct stat st;
	for (int f = from; f < NOFILE_FILES; f++)
		CHECK_OK(stat(P(e->mnt, nofile_name(name, d, f)), &st));
}

/* The kernel holds (60 s entry timeouts) ten times more inodes than the
 * router may open descriptors: every one still answers, through
 * descriptors evicted and reopened by name, including objects moved,
 * hard-linked and unlinked while their descriptors were evicted. */
static void router__more_inodes_than_descriptors(struct env *e)
{
	char name[64], want[64];
	for (int d = 0; d < NOFILE_DIRS; d++) {
		snprintf(name, sizeof(name), "d%02d", d);
		CHECK_OK(mkdir(P(e->mnt, name), 0755));
		for (int f = 0; f < NOFILE_FILES; f++) {
			snprintf(want, sizeof(want), "%d/%d", d, f);
			write_text(P(e->mnt, nofile_name(name, d, f)), want);
		}
	}
	struct stat st;
	for (int pass = 0; pass < 2; pass++)
		for (int d = 0; d < NOFILE_DIRS; d++)
			for (int f = 0; f < NOFILE_FILES; f++) {
				nofile_name(name, d, f);
				snprintf(want, sizeof(want), "%d/%d", d, f);
				CHECK(stat(P(e->mnt, name), &st) == 0, "stat %s: %s", name, strerror(errno));
				CHECK(strcmp(read_text(P(e->mnt, name)), want) == 0, "content of %s", name);
			}
	CHECK(exists(P(e->iso, "d07/f003.ign")) && !exists(P(e->host, "d07/f003.ign")));
	size_t n = count_fds(getppid());
	CHECK(n < (size_t)router_nofile, "router holds %zu descriptors", n);

	/* an open file unlinked, then its descriptor evicted by others */
	int fd = open(P(e->mnt, "d00/f001"), O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_OK(unlink(P(e->mnt, "d00/f001")));
	stat_files(e, 1, 2);
	CHECK_OK(fstat(fd, &st));
	CHECK(st.st_nlink == 0 && st.st_size == 3, "nlink %ju size %jd", (uintmax_t)st.st_nlink,
	      (intmax_t)st.st_size);
	CHECK(pwrite(fd, "X", 1, 0) == 1);
	CHECK_OK(close(fd));

	/* a directory renamed (with no isolated entries, which would make it
	 * EXDEV): its files answer at the new path after eviction */
	for (int f = 0; f < NOFILE_FILES; f += 3) {
		snprintf(name, sizeof(name), "d02/f%03d.ign", f);
		CHECK_OK(unlink(P(e->mnt, name)));
	}
	CHECK_OK(rename(P(e->mnt, "d02"), P(e->mnt, "moved")));
	for (int d = 3; d < 6; d++)
		stat_files(e, d, 0);
	CHECK(strcmp(read_text(P(e->mnt, "moved/f005")), "2/5") == 0);
	CHECK_OK(chmod(P(e->mnt, "moved/f004"), 0600));
	CHECK_OK(stat(P(e->host, "moved/f004"), &st));
	CHECK((st.st_mode & 07777) == 0600);

	/* a hard link, then the first name removed: the object answers by
	 * the name that remains */
	CHECK_OK(link(P(e->mnt, "d03/f001"), P(e->mnt, "d04/linked")));
	CHECK_OK(unlink(P(e->mnt, "d03/f001")));
	stat_files(e, 5, 0);
	CHECK_OK(chmod(P(e->mnt, "d04/linked"), 0640));
	CHECK(strcmp(read_text(P(e->mnt, "d04/linked")), "3/1") == 0);

	/* a file replaced behind the router's back is not confused with its
	 * old inode: the name now holds another object */
	CHECK_OK(stat(P(e->mnt, "d06/f001"), &st));
	ino_t old = st.st_ino;
	CHECK_OK(rename(P(e->host, "d06/f002"), P(e->host, "d06/f001")));
	stat_files(e, 7, 0);
	fd = open(P(e->mnt, "d06/f001"), O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		/* The kernel may still hold the old entry (60 s here) and open
		 * without asking; then the old object answers from its cached
		 * descriptor or not at all (ESTALE), never with the new one's
		 * bytes, and a new lookup answers with the new object. */
		CHECK_OK(fstat(fd, &st));
		char buf[8] = { 0 };
		ssize_t got = read(fd, buf, sizeof(buf) - 1);
		if (got < 0)
			CHECK(errno == ESTALE, "read: %s", strerror(errno));
		else
			CHECK(strcmp(buf, st.st_ino == old ? "6/1" : "6/2") == 0, "read '%s'", buf);
		close(fd);
	} else
		CHECK(errno == ESTALE, "open: %s", strerror(errno));
	n = count_fds(getppid());
	CHECK(n < (size_t)router_nofile, "router holds %zu descriptors", n);

	/* The sandbox's open files take the router's descriptors too: with
	 * 200 created files held open, the cache gives way to the rest. */
	int held[200];
	for (int k = 0; k < 200; k++) {
		snprintf(name, sizeof(name), "d08/held%d", k);
		held[k] = open(P(e->mnt, name), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		CHECK(held[k] >= 0, "create %s: %s", name, strerror(errno));
	}
	for (int d = 9; d < NOFILE_DIRS; d++)
		for (int f = 0; f < NOFILE_FILES; f += 7) {
			nofile_name(name, d, f);
			snprintf(want, sizeof(want), "%d/%d", d, f);
			CHECK(strcmp(read_text(P(e->mnt, name)), want) == 0, "content of %s", name);
		}
	for (int k = 0; k < 200; k++)
		CHECK(write(held[k], "h", 1) == 1 && close(held[k]) == 0);

	/* and a closed file gives its descriptor back */
	usleep(100000);
	size_t before = count_fds(getppid());
	for (int k = 0; k < 100; k++) {
		snprintf(name, sizeof(name), "d08/closed%d", k);
		write_text(P(e->mnt, name), "c");
	}
	usleep(100000);
	n = count_fds(getppid());
	CHECK(n < before + 20, "router descriptors %zu after 100 closed creates, %zu before", n, before);
}

static void test_router__more_inodes_than_descriptors(void **state)
{
	router_nofile = 256;
	with_router(*state, router__more_inodes_than_descriptors);
	router_nofile = 0;
}

/* A router out of descriptors (every one pinned by a directory the
 * sandbox holds open) answers a lookup under a directory-only pattern
 * with that failure, never "no such entry": the kernel would cache the
 * absence and Git read it as a deletion. Once the directories are closed
 * the entry is there at once. */
#define EXHAUST_DIRS 200

/* Makes host directories h000..h199 (when make) and opens them through the
 * mount until the router (RLIMIT_NOFILE 64) has no descriptor left;
 * returns how many held[] holds. */
static int exhaust_router(struct env *e, bool make, int held[EXHAUST_DIRS])
{
	char name[64];
	for (int i = 0; make && i < EXHAUST_DIRS; i++) {
		snprintf(name, sizeof(name), "h%03d", i);
		CHECK_OK(mkdir(P(e->host, name), 0755));
	}
	int n = 0;
	for (int i = 0; i < EXHAUST_DIRS; i++) {
		snprintf(name, sizeof(name), "h%03d", i);
		int fd = open(P(e->mnt, name), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			break;
		held[n++] = fd;
	}
	CHECK(n < EXHAUST_DIRS, "the router never ran out of descriptors (%d directories open)", n);
	return n;
}

static void router__out_of_descriptors_is_not_absence(struct env *e)
{
	CHECK_OK(mkdir(P(e->iso, "out"), 0755)); /* a directory named out routes ISOLATED */
	int held[EXHAUST_DIRS], n = exhaust_router(e, true, held);
	struct stat st;
	int rc = stat(P(e->mnt, "out"), &st);
	CHECK(rc < 0 && errno != ENOENT, "stat out with no descriptor left: %s", rc == 0 ? "found" : strerror(errno));
	for (int i = 0; i < n; i++)
		close(held[i]);
	CHECK(stat(P(e->mnt, "out"), &st) == 0 && S_ISDIR(st.st_mode), "out after the close: %s", strerror(errno));
}

static void test_router__out_of_descriptors_is_not_absence(void **state)
{
	router_nofile = 64;
	with_router(*state, router__out_of_descriptors_is_not_absence);
	router_nofile = 0;
}

/* A publish that cannot visit a directory the kernel holds (no descriptor
 * left) leaves an invalidation to do; the retry, once descriptors are
 * back, drops the entry cached under the old route. */
static void router__a_publish_out_of_descriptors_invalidates_later(struct env *e)
{
	CHECK_OK(mkdir(P(e->host, "h000"), 0755));
	write_text(P(e->host, "h000/flipA"), "host side");
	struct stat st;
	CHECK_OK(stat(P(e->mnt, "h000/flipA"), &st)); /* cached 60 s */
	char name[64];
	for (int i = 1; i < EXHAUST_DIRS; i++) {
		snprintf(name, sizeof(name), "h%03d", i);
		CHECK_OK(mkdir(P(e->host, name), 0755));
	}
	int held[EXHAUST_DIRS], n = exhaust_router(e, false, held);
	CHECK_OK(publish(e, true)); /* flipA now routes to the isolated backing: absent */
	CHECK(control(e, 'r') < 0, "the retry had nothing to do with no descriptor left");
	for (int i = 0; i < n; i++)
		close(held[i]);
	/* the kernel sends the releases after close returns: retried as the
	 * watch does, until the router has its descriptors back (3 s at most) */
	bool done = false;
	for (int k = 0; k < 30 && !done; k++)
		done = control(e, 'r') == 0 || (usleep(100000), false);
	CHECK(done, "the retry never succeeded with the descriptors back");
	CHECK_ERRNO(stat(P(e->mnt, "h000/flipA"), &st), ENOENT);
	CHECK_OK(control(e, 'r')); /* nothing left to do */
}

static void test_router__a_publish_out_of_descriptors_invalidates_later(void **state)
{
	router_nofile = 64;
	with_router(*state, router__a_publish_out_of_descriptors_invalidates_later);
	router_nofile = 0;
}

/* ---- host changes through long caches ---------------------------------------- */

/* Waits up to 3 s for stat(path) to succeed (want) or fail ENOENT
 * (!want) with, when mode_or_size says so, that size. */
static bool await_stat(const char *path, bool want, off_t size)
{
	for (int k = 0; k < 300; k++) {
		struct stat st;
		int rc = stat(path, &st);
		if (want ? rc == 0 && (size < 0 || st.st_size == size) : rc < 0 && errno == ENOENT)
			return true;
		usleep(10000);
	}
	return false;
}

/* The kernel caches every entry, negative ones included, for 60 s here;
 * what the developer changes on the host shows inside at once anyway,
 * because the watch reports it and the router invalidates the cache. */
static void router__host_changes_show_through_long_caches(struct env *e)
{
	struct stat st;
	write_text(P(e->mnt, "a.txt"), "one");
	CHECK_OK(stat(P(e->mnt, "a.txt"), &st));
	CHECK(st.st_size == 3);
	CHECK_ERRNO(stat(P(e->mnt, "b.txt"), &st), ENOENT);

	write_text(P(e->host, "a.txt"), "three33");
	CHECK(await_stat(P(e->mnt, "a.txt"), true, 7), "a host write's size never showed");
	CHECK(strcmp(read_text(P(e->mnt, "a.txt")), "three33") == 0);
	CHECK_OK(chmod(P(e->host, "a.txt"), 0600));
	bool seen = false;
	for (int k = 0; k < 300 && !seen; k++, usleep(10000))
		seen = stat(P(e->mnt, "a.txt"), &st) == 0 && (st.st_mode & 07777) == 0600;
	CHECK(seen, "a host chmod never showed");

	write_text(P(e->host, "b.txt"), "bee");
	CHECK(await_stat(P(e->mnt, "b.txt"), true, 3), "a host create never showed");
	CHECK_OK(unlink(P(e->host, "a.txt")));
	CHECK(await_stat(P(e->mnt, "a.txt"), false, -1), "a host unlink never showed");
	CHECK_OK(rename(P(e->host, "b.txt"), P(e->host, "c.txt")));
	CHECK(await_stat(P(e->mnt, "b.txt"), false, -1) && await_stat(P(e->mnt, "c.txt"), true, 3),
	      "a host rename never showed");

	/* inside a Git directory: a new object directory and object */
	CHECK_ERRNO(stat(P(e->mnt, ".git/objects/ab"), &st), ENOENT);
	CHECK_OK(mkdir(P(e->host, ".git/objects/ab"), 0755));
	CHECK(await_stat(P(e->mnt, ".git/objects/ab"), true, -1), "a new object directory never showed");
	CHECK_ERRNO(stat(P(e->mnt, ".git/objects/ab/cdef"), &st), ENOENT);
	write_text(P(e->host, ".git/objects/ab/cdef"), "object");
	CHECK(await_stat(P(e->mnt, ".git/objects/ab/cdef"), true, 6), "a new object never showed");
}

static void test_router__host_changes_show_through_long_caches(void **state)
{
	struct env *e = *state;
	assert_int_equal(mkdir(P(e->host, ".git"), 0755), 0);
	assert_int_equal(mkdir(P(e->host, ".git/objects"), 0755), 0);
	router_watch = true;
	with_router(e, router__host_changes_show_through_long_caches);
	router_watch = false;
}

/* A file the sandbox holds open stays readable and writable when the host
 * removes or renames it and other lookups then evict the router's
 * descriptor of it, as it would on a bind mount: a removed object keeps
 * its descriptor (no name to reopen it by), a renamed one is reopened at
 * the name the watch reported. */
static void router__open_files_survive_host_removal_and_rename(struct env *e)
{
	char name[64], want[64];
	for (int d = 0; d < 4; d++) {
		snprintf(name, sizeof(name), "d%02d", d);
		CHECK_OK(mkdir(P(e->mnt, name), 0755));
		for (int f = 0; f < NOFILE_FILES; f++) {
			snprintf(want, sizeof(want), "%d/%d", d, f);
			write_text(P(e->mnt, nofile_name(name, d, f)), want);
		}
	}
	int removed = open(P(e->mnt, "d00/f001"), O_RDWR | O_CLOEXEC);
	int moved = open(P(e->mnt, "d00/f002"), O_RDWR | O_CLOEXEC);
	CHECK(removed >= 0 && moved >= 0, "open: %s", strerror(errno));
	/* What this test holds the router to: a file whose descriptor the
	 * router holds when the host removes it (docs/router.md, "Limits").
	 * The kernel opens files without a request, so whether the open
	 * reached the router (a lookup after the watch invalidated the
	 * entry) is a race; a write of the bytes already there is a request
	 * that takes the descriptor, to the head of the cache. */
	CHECK(pwrite(removed, "0", 1, 0) == 1 && pwrite(moved, "0", 1, 0) == 1, "write: %s", strerror(errno));
	struct stat st;
	CHECK_ERRNO(stat(P(e->mnt, "d03/sentinel"), &st), ENOENT);
	CHECK_OK(unlink(P(e->host, "d00/f001")));
	CHECK_OK(rename(P(e->host, "d00/f002"), P(e->host, "d01/renamed")));
	/* Not looked up inside (a lookup would find it renamed): the watch
	 * reports in order, so once the sentinel shows, the rename was seen. */
	write_text(P(e->host, "d03/sentinel"), "s");
	CHECK(await_stat(P(e->mnt, "d03/sentinel"), true, 1), "the host change never showed");
	for (int d = 1; d < 4; d++)
		stat_files(e, d, 0);
	char buf[8] = { 0 };
	CHECK(pread(removed, buf, sizeof(buf) - 1, 0) == 3, "read of the removed file: %s", strerror(errno));
	CHECK(strcmp(buf, "0/1") == 0, "removed file reads '%s'", buf);
	CHECK(pwrite(removed, "X", 1, 0) == 1, "write to the removed file: %s", strerror(errno));
	memset(buf, 0, sizeof(buf));
	CHECK(pread(moved, buf, sizeof(buf) - 1, 0) == 3, "read of the renamed file: %s", strerror(errno));
	CHECK(strcmp(buf, "0/2") == 0, "renamed file reads '%s'", buf);
	CHECK(pwrite(moved, "Y", 1, 0) == 1, "write to the renamed file: %s", strerror(errno));
	CHECK_OK(close(removed));
	CHECK_OK(close(moved));
	CHECK(strcmp(read_text(P(e->host, "d01/renamed")), "Y/2") == 0, "the write reached the renamed file");
	size_t n = count_fds(getppid());
	CHECK(n < (size_t)router_nofile, "router holds %zu descriptors", n);
}

static void test_router__open_files_survive_host_removal_and_rename(void **state)
{
	router_nofile = 256;
	router_watch = true;
	with_router(*state, router__open_files_survive_host_removal_and_rename);
	router_watch = false;
	router_nofile = 0;
}

/* Fills the router's descriptor cache (16) with other objects. */
static void evict_cached(struct env *e, const char *tag)
{
	char name[64];
	struct stat st;
	for (int k = 0; k < 40; k++) {
		snprintf(name, sizeof(name), "fill-%s-%d", tag, k);
		write_text(P(e->mnt, name), "f");
		CHECK_OK(stat(P(e->mnt, name), &st));
	}
}

/* How many descriptors of process pid name an object that was removed
 * (links ending " (deleted)"): what keeps a removed inode alive. */
static size_t count_deleted_fds(pid_t pid)
{
	char path[64], target[PATH_MAX];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	if (d == NULL)
		return 0;
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		ssize_t len = readlinkat(dirfd(d), de->d_name, target, sizeof(target) - 1);
		if (len > 10 && memcmp(target + len - 10, " (deleted)", 10) == 0)
			n++;
	}
	closedir(d);
	return n;
}

/* Makes host objects (files, or directories when dir) named
 * <prefix>NNNN until one gets inode number ino; its name in out. ext4
 * gives a new object the lowest free number of the first group with a
 * free one, so holes that other removals left below ino are filled
 * first: the misses are kept (a removed miss would be the next hole),
 * and there may be many of them. False when 4,096 objects missed (other
 * processes on the file system took the number). */
static bool host_reuse_ino(struct env *e, ino_t ino, bool dir, const char *prefix, char *out, size_t cap)
{
	struct stat st;
	for (int k = 0; k < 4096; k++) {
		snprintf(out, cap, "%s%04d", prefix, k);
		if (dir)
			CHECK_OK(mkdir(P(e->host, out), 0755));
		else
			write_text(P(e->host, out), "BBBBBBBB");
		CHECK_OK(stat(P(e->host, out), &st));
		if (st.st_ino == ino)
			return true;
	}
	return false;
}

/* Makes an object through the router (a file held open in *ret_fd, or a
 * directory when dir), evicts the router's descriptor of it, removes it
 * on the host and makes host objects until one reuses its inode number:
 * its name in reused. Tried eight times, each with an object of its own:
 * another process creating files meanwhile may take the number. */
static void removed_then_reused(struct env *e, bool dir, int *ret_fd, char *reused, size_t cap)
{
	char name[16], prefix[16];
	struct stat st;
	for (int attempt = 0; attempt < 8; attempt++) {
		snprintf(name, sizeof(name), "%s%d", dir ? "foo" : "a.txt", attempt);
		write_text(P(e->mnt, name), "AAAA");
		int fd = -1;
		if (dir) {
			CHECK_OK(stat(P(e->mnt, name), &st));
		} else {
			fd = open(P(e->mnt, name), O_RDWR | O_CLOEXEC);
			CHECK(fd >= 0, "open: %s", strerror(errno));
			CHECK_OK(fstat(fd, &st));
		}
		evict_cached(e, name);
		CHECK_OK(unlink(P(e->host, name)));
		snprintf(prefix, sizeof(prefix), "%s%d-", dir ? "dir" : "b", attempt);
		if (host_reuse_ino(e, st.st_ino, dir, prefix, reused, cap)) {
			if (ret_fd != NULL)
				*ret_fd = fd;
			return;
		}
		if (fd >= 0)
			CHECK_OK(close(fd));
	}
	CHECK(false, "the filesystem of %s never reused a removed inode number in 8 tries of 4,096 objects (the "
		     "router holds %zu descriptors of removed objects)",
	      e->host, count_deleted_fds(getppid()));
}

/* A file the sandbox holds open, whose descriptor was evicted and which
 * the host then removed: a new host object that reuses its inode number
 * (ext4 does so at once) is another object, whether the sandbox looks it
 * up or the watch reports it. Writes through the old handle fail ESTALE
 * instead of landing in the new file; a directory reusing a file's
 * number is a directory. */
static bool reuse_by_watch;
static void router__a_reused_inode_number_is_another_object(struct env *e)
{
	char reused[48];
	struct stat st;
	int fd = -1;
	removed_then_reused(e, false, &fd, reused, sizeof(reused));
	if (reuse_by_watch)
		CHECK(await_stat(P(e->mnt, reused), true, 8), "the host create never showed");
	else
		CHECK_OK(stat(P(e->mnt, reused), &st));
	CHECK_ERRNO(pwrite(fd, "XX", 2, 0), ESTALE);
	CHECK_OK(close(fd));
	CHECK(strcmp(read_text(P(e->host, reused)), "BBBBBBBB") == 0, "%s now reads '%s'", reused,
	      read_text(P(e->host, reused)));

	removed_then_reused(e, true, NULL, reused, sizeof(reused));
	CHECK_OK(stat(P(e->mnt, reused), &st));
	CHECK(S_ISDIR(st.st_mode), "%s is not a directory inside", reused);
	char sub[64];
	snprintf(sub, sizeof(sub), "%s/sub", reused);
	CHECK_OK(mkdir(P(e->mnt, sub), 0755));
	CHECK(exists(P(e->host, sub)), "mkdir inside the reused directory never reached the host");
}

static void test_router__a_reused_inode_number_is_another_object(void **state)
{
	with_router(*state, router__a_reused_inode_number_is_another_object);
}

static void test_router__a_reused_inode_number_is_another_object__watched(void **state)
{
	reuse_by_watch = true;
	router_watch = true;
	with_router(*state, router__a_reused_inode_number_is_another_object);
	router_watch = false;
	reuse_by_watch = false;
}

/* The host moves a directory the sandbox holds into what was its own
 * child (D/E to E2, then D to E2/D), and the sandbox looks D up through
 * its descriptor of E: the router's chain stays a tree, and E still
 * takes new entries. */
static void router__host_moves_never_loop_the_directory_chain(struct env *e)
{
	CHECK_OK(mkdir(P(e->mnt, "D"), 0755));
	CHECK_OK(mkdir(P(e->mnt, "D/E"), 0755));
	int efd = open(P(e->mnt, "D/E"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(efd >= 0, "open D/E: %s", strerror(errno));
	CHECK_OK(rename(P(e->host, "D/E"), P(e->host, "E2")));
	CHECK_OK(rename(P(e->host, "D"), P(e->host, "E2/D")));
	struct stat st;
	(void)fstatat(efd, "D", &st, AT_SYMLINK_NOFOLLOW); /* the kernel may refuse: ELOOP */
	CHECK_OK(mkdirat(efd, "x", 0755));
	int fd = openat(efd, "newfile", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	CHECK(fd >= 0, "create in E: %s", strerror(errno));
	CHECK_OK(close(fd));
	CHECK(exists(P(e->host, "E2/x")) && exists(P(e->host, "E2/newfile")), "E's new entries are not in E2");
	CHECK_OK(close(efd));
}
RUN(router__host_moves_never_loop_the_directory_chain)

/* ---- the real classifier and its watch --------------------------------------------- */

/* An index entry is relative to its repository's root: a nested
 * repository's entry of LZ_PATH_MAX bytes names a workspace path longer
 * than any the router serves. The host writes that index (a known
 * nested repository's .git is host-backed Git data), the watch rebuilds;
 * the entry is skipped (it names nothing), the rest of the index applies.
 * Until 2026-12 the build copied such a path into a buffer of
 * LZ_PATH_MAX + 1 bytes on the watch thread's stack (ASan:
 * stack-buffer-overflow in decide_all). */
static void router__a_nested_index_entry_past_the_path_limit_is_skipped(struct env *e)
{
	/* x.log is ignored in the nested repository until its index tracks it */
	CHECK_ERRNO(access(P(e->mnt, "third_party/libfoo/x.log"), F_OK), ENOENT);
	char src[160];
	snprintf(src, sizeof(src), "%s/evil/.git/index", e->dir);
	int in = open(src, O_RDONLY | O_CLOEXEC);
	CHECK(in >= 0, "open %s: %s", src, strerror(errno));
	/* Written on the host (the sandbox's own index is refused: it would
	 * track an ignored path), which the watch sees as any change. */
	int out = open(P(e->host, "third_party/libfoo/.git/index.new"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	CHECK(out >= 0, "create index.new: %s", strerror(errno));
	char buf[4096];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		CHECK(write(out, buf, (size_t)n) == n);
	close(in);
	CHECK_OK(close(out));
	CHECK_OK(rename(P(e->host, "third_party/libfoo/.git/index.new"), P(e->host, "third_party/libfoo/.git/index")));
	CHECK(wait_for_text(P(e->mnt, "third_party/libfoo/x.log"), "host log\n"),
	      "the rebuilt snapshot never tracked x.log (did the router survive?)");
	struct stat st;
	CHECK_OK(stat(P(e->mnt, "a"), &st));
}

static void test_router__a_nested_index_entry_past_the_path_limit_is_skipped(void **state)
{
	struct env *e = *state;
	/* 16 components of 250 bytes and one of 80: 4,096 bytes */
	char longpath[4097];
	size_t k = 0;
	for (int c = 0; c < 16; c++) {
		memset(longpath + k, 'A' + c, 250);
		k += 250;
		longpath[k++] = '/';
	}
	memset(longpath + k, 'z', 80);
	k += 80;
	longpath[k] = '\0';
	assert_int_equal(k, 4096);
	shell("cd '%s' && " GIT "init -q && echo a > a && " GIT "add a && mkdir -p third_party/libfoo && cd third_party/libfoo &&"
	      " " GIT "init -q && printf '*.log\\n' > .gitignore && echo f > f && echo 'host log' > x.log && " GIT "add .gitignore f",
	      e->host);
	/* the index the sandbox writes: the same files, x.log tracked, and the long entry */
	shell("mkdir -p '%s/evil' && cd '%s/evil' && " GIT "init -q && printf '*.log\\n' > .gitignore && echo f > f &&"
	      " echo 'host log' > x.log && " GIT "add -f .gitignore f x.log && " GIT "update-index --add --cacheinfo"
	      " 100644,$(" GIT "hash-object -w f),%s",
	      e->dir, e->dir, longpath);
	real_classifier = router_watch = true;
	with_router(e, router__a_nested_index_entry_past_the_path_limit_is_skipped);
	real_classifier = router_watch = false;
}

/* RENAME_EXCHANGE moves two objects: the one arriving at the source's name
 * passes what making it there would (rt_policy_new). The test classifier
 * guards keep/ctl: keep, absent on the host, is a directory on the way to
 * a control file, where no symlink, FIFO or socket may stand (host Git
 * would follow it to what the sandbox made); a regular file there is
 * nothing Git follows. Until 2026-12 only the object arriving at the
 * destination was checked, as a regular file at keep let through the
 * symlink swapped in. */
static void router__an_exchange_puts_no_symlink_on_the_way_to_a_control_file(struct env *e)
{
	CHECK_OK(mkdir(P(e->mnt, "evil"), 0755));
	CHECK_ERRNO(symlink("evil", P(e->mnt, "keep")), EPERM);
	write_text(P(e->mnt, "keep"), "a file");
	CHECK_OK(symlink("evil", P(e->mnt, "s")));
	CHECK_OK(mkfifo(P(e->mnt, "fifo"), 0644));
	/* either way round, the symlink would arrive at keep */
	CHECK_ERRNO(rename2(P(e->mnt, "keep"), P(e->mnt, "s"), RENAME_EXCHANGE), EPERM);
	CHECK_ERRNO(rename2(P(e->mnt, "s"), P(e->mnt, "keep"), RENAME_EXCHANGE), EPERM);
	CHECK_ERRNO(rename2(P(e->mnt, "keep"), P(e->mnt, "fifo"), RENAME_EXCHANGE), EPERM);
	CHECK_ERRNO(rename2(P(e->mnt, "keep"), P(e->mnt, "evil"), RENAME_EXCHANGE), EPERM);
	struct stat st;
	CHECK_OK(lstat(P(e->host, "keep"), &st));
	CHECK(S_ISREG(st.st_mode), "host keep is no longer the regular file");
	CHECK_OK(lstat(P(e->host, "s"), &st));
	CHECK(S_ISLNK(st.st_mode));
	/* elsewhere an exchange is an exchange */
	write_text(P(e->mnt, "other"), "other");
	CHECK_OK(rename2(P(e->mnt, "other"), P(e->mnt, "s"), RENAME_EXCHANGE));
	CHECK_OK(lstat(P(e->host, "other"), &st));
	CHECK(S_ISLNK(st.st_mode));
	CHECK(strcmp(read_text(P(e->host, "s")), "other") == 0);
	CHECK_OK(rename2(P(e->mnt, "keep"), P(e->mnt, "s"), RENAME_EXCHANGE)); /* two regular files */
	CHECK(strcmp(read_text(P(e->host, "keep")), "other") == 0);
}
RUN(router__an_exchange_puts_no_symlink_on_the_way_to_a_control_file)

/* The same with the real classifier: core.hooksPath = tools/hooks and no
 * tools on the host; a symlink exchanged into tools' place would make the
 * sandbox's evil/hooks/pre-commit the hook of the developer's next
 * commit. */
static void router__an_exchange_puts_no_symlink_where_hooks_path_leads(struct env *e)
{
	CHECK_ERRNO(symlink("evil", P(e->mnt, "tools")), EPERM);
	CHECK_OK(mkdir(P(e->mnt, "evil"), 0755));
	CHECK_OK(mkdir(P(e->mnt, "evil/hooks"), 0755));
	write_text(P(e->mnt, "evil/hooks/pre-commit"), "#!/bin/sh\nexit 0\n");
	write_text(P(e->mnt, "tools"), "a file");
	CHECK_OK(symlink("evil", P(e->mnt, "s")));
	CHECK_ERRNO(rename2(P(e->mnt, "tools"), P(e->mnt, "s"), RENAME_EXCHANGE), EPERM);
	struct stat st;
	CHECK_OK(lstat(P(e->host, "tools"), &st));
	CHECK(S_ISREG(st.st_mode), "host tools is no longer the regular file");
}

static void test_router__an_exchange_puts_no_symlink_where_hooks_path_leads(void **state)
{
	struct env *e = *state;
	shell("cd '%s' && " GIT "init -q && " GIT "config core.hooksPath tools/hooks && echo a > a && " GIT "add a",
	      e->host);
	real_classifier = true;
	with_router(e, router__an_exchange_puts_no_symlink_where_hooks_path_leads);
	real_classifier = false;
}

/* A linked worktree's index is .git/worktrees/<name>/index: the watch
 * republishes when it changes, as for the workspace's own (spec 3.5,
 * linked worktrees). wt/x.log is ignored; `git add -f` on the host makes
 * it tracked, hence host-backed, and `git rm --cached` ignored again.
 * Until 2026-12 neither was seen until an unrelated ignore-file change. */
static void router__a_linked_worktrees_index_republishes(struct env *e)
{
	CHECK_ERRNO(access(P(e->mnt, "wt/x.log"), F_OK), ENOENT);
	CHECK(strcmp(read_text(P(e->mnt, "wt/a")), "a\n") == 0);
	shell("cd '%s/wt' && " GIT "add -f x.log", e->host);
	CHECK(wait_for_text(P(e->mnt, "wt/x.log"), "host log\n"), "wt/x.log tracked but never shown");
	shell("cd '%s/wt' && " GIT "rm -q --cached x.log", e->host);
	CHECK(wait_for_text(P(e->mnt, "wt/x.log"), NULL), "wt/x.log untracked but still shown");
}

static void test_router__a_linked_worktrees_index_republishes(void **state)
{
	struct env *e = *state;
	shell("cd '%s' && " GIT "init -q && printf '*.log\\n' > .gitignore && echo a > a && " GIT "add .gitignore a &&"
	      " " GIT "commit -qm init && " GIT "worktree add -q wt && echo 'host log' > wt/x.log",
	      e->host);
	real_classifier = router_watch = true;
	with_router(e, router__a_linked_worktrees_index_republishes);
	real_classifier = router_watch = false;
}

/* A workspace that is itself a linked worktree of a repository
 * elsewhere: its index lies outside the workspace, and is watched there. */
static void router__a_linked_worktree_workspaces_index_republishes(struct env *e)
{
	CHECK_ERRNO(access(P(e->mnt, "x.log"), F_OK), ENOENT);
	shell("cd '%s' && " GIT "add -f x.log", e->host);
	CHECK(wait_for_text(P(e->mnt, "x.log"), "host log\n"), "x.log tracked but never shown");
}

static void test_router__a_linked_worktree_workspaces_index_republishes(void **state)
{
	struct env *e = *state;
	shell("cd '%s' && mkdir src && cd src && " GIT "init -q && printf '*.log\\n' > .gitignore &&"
	      " " GIT "add .gitignore && " GIT "commit -qm init && " GIT "worktree add -q '%s' &&"
	      " echo 'host log' > '%s/x.log'",
	      e->dir, e->host, e->host);
	real_classifier = router_watch = true;
	with_router(e, router__a_linked_worktree_workspaces_index_republishes);
	real_classifier = router_watch = false;
}

/* A submodule's index is .git/modules/<name>/index. */
static void router__a_submodules_index_republishes(struct env *e)
{
	CHECK_ERRNO(access(P(e->mnt, "sub/x.log"), F_OK), ENOENT);
	shell("cd '%s/sub' && " GIT "add -f x.log", e->host);
	CHECK(wait_for_text(P(e->mnt, "sub/x.log"), "host log\n"), "sub/x.log tracked but never shown");
}

static void test_router__a_submodules_index_republishes(void **state)
{
	struct env *e = *state;
	shell("cd '%s' && mkdir src && cd src && " GIT "init -q && printf '*.log\\n' > .gitignore &&"
	      " " GIT "add .gitignore && " GIT "commit -qm init",
	      e->dir);
	shell("cd '%s' && " GIT "init -q && " GIT "-c protocol.file.allow=always submodule -q add ../src sub &&"
	      " " GIT "commit -qm sub && echo 'host log' > sub/x.log",
	      e->host);
	real_classifier = router_watch = true;
	with_router(e, router__a_submodules_index_republishes);
	real_classifier = router_watch = false;
}

/* A Git directory the host moves (git submodule absorbgitdirs: sub/.git
 * becomes .git/modules/sub and a gitfile takes its name) while the
 * sandbox holds it open: what is below it is judged where it is now, not
 * by the path the sandbox found it at, so its config and hooks stay
 * guarded; an operation through the held directory is refused (ESTALE)
 * until the sandbox looks the directory up again. */
static void router__a_git_directory_the_host_moves_stays_guarded(struct env *e)
{
	struct stat st;
	int g = open(P(e->mnt, "sub/.git"), O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* a shell's cwd, say */
	CHECK(g >= 0, "open sub/.git: %s", strerror(errno));
	int hooks = openat(g, "hooks", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(hooks >= 0, "open sub/.git/hooks: %s", strerror(errno));
	shell("cd '%s' && " GIT "submodule -q absorbgitdirs sub", e->host);
	CHECK_OK(lstat(P(e->host, "sub/.git"), &st));
	CHECK(S_ISREG(st.st_mode), "sub/.git is not a gitfile after absorbgitdirs");
	bool seen = false;
	for (int k = 0; k < 500 && !seen; k++, usleep(10000))
		seen = lstat(P(e->mnt, "sub/.git"), &st) == 0 && S_ISREG(st.st_mode);
	CHECK(seen, "the router never showed sub/.git as a file");
	sleep(1); /* the watch's rebuild and publish */
	int fd = openat(g, "config", O_WRONLY | O_APPEND | O_CLOEXEC);
	static const char evil[] = "[core]\n\tfsmonitor = x\n";
	bool wrote = fd >= 0 && write(fd, evil, sizeof(evil) - 1) == (ssize_t)sizeof(evil) - 1;
	if (fd >= 0)
		close(fd);
	CHECK(!wrote, "a write through the held directory reached the moved config");
	fd = openat(hooks, "pre-commit", O_CREAT | O_WRONLY | O_EXCL | O_CLOEXEC, 0755);
	CHECK(fd < 0, "a hook was created through the held hooks directory");
	CHECK_ERRNO(mkdirat(g, "info2", 0755), ESTALE);
	CHECK_ERRNO(access(P(e->host, ".git/modules/sub/hooks/pre-commit"), F_OK), ENOENT);
	CHECK_ERRNO(access(P(e->host, ".git/modules/sub/info2"), F_OK), ENOENT);
	CHECK(strstr(read_text(P(e->host, ".git/modules/sub/config")), "fsmonitor") == NULL,
	      "the moved config was written");
	close(hooks);
	close(g);
}

static void test_router__a_git_directory_the_host_moves_stays_guarded(void **state)
{
	struct env *e = *state;
	shell("cd '%s' && mkdir src && cd src && " GIT "init -q && echo a > a && " GIT "add a && " GIT "commit -qm init",
	      e->dir);
	shell("cd '%s' && " GIT "init -q && " GIT "clone -q ../src sub && " GIT
	      "-c protocol.file.allow=always submodule -q add ../src sub && " GIT "commit -qm sub",
	      e->host);
	real_classifier = router_watch = true;
	with_router(e, router__a_git_directory_the_host_moves_stays_guarded);
	real_classifier = router_watch = false;
}

/* A bare workspace (.bare, a .git file naming it, linked worktrees
 * beside): the worktree main's index is .bare/worktrees/main/index and
 * its info/exclude .bare/info/exclude, neither below a ".git". */
static void router__a_bare_workspaces_index_and_exclude_republish(struct env *e)
{
	CHECK_ERRNO(access(P(e->mnt, "main/x.log"), F_OK), ENOENT);
	CHECK(strcmp(read_text(P(e->mnt, "main/y.txt")), "host y\n") == 0);
	shell("cd '%s/main' && " GIT "add -f x.log", e->host);
	CHECK(wait_for_text(P(e->mnt, "main/x.log"), "host log\n"), "main/x.log tracked but never shown");
	shell("mkdir -p '%s/.bare/info' && printf 'y.txt\\n' >> '%s/.bare/info/exclude'", e->host, e->host);
	CHECK(wait_for_text(P(e->mnt, "main/y.txt"), NULL), "main/y.txt excluded but still shown");
}

static void test_router__a_bare_workspaces_index_and_exclude_republish(void **state)
{
	struct env *e = *state;
	shell("cd '%s' && mkdir src && cd src && " GIT "init -q && printf '*.log\\n' > .gitignore &&"
	      " " GIT "add .gitignore && " GIT "commit -qm init",
	      e->dir);
	shell("cd '%s' && " GIT "clone -q --bare ../src .bare && echo 'gitdir: ./.bare' > .git &&"
	      " " GIT "worktree add -q main && echo 'host log' > main/x.log && echo 'host y' > main/y.txt",
	      e->host);
	real_classifier = router_watch = true;
	with_router(e, router__a_bare_workspaces_index_and_exclude_republish);
	real_classifier = router_watch = false;
}

/* ---- a case-insensitive workspace ---------------------------------------------------- */

/* A FUSE file system of one directory holding README. ci_fold: found
 * under any case of its name, as vfat, exfat, a CIFS share or WSL's
 * drvfs find names; else names are exact but the directory reports
 * FS_CASEFOLD_FL (an ext4, f2fs or tmpfs casefold directory). */
static bool ci_fold;
#define CI_SUB_INO 3

static void ci_stat(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	bool dir = ino == FUSE_ROOT_ID || ino == CI_SUB_INO;
	st->st_mode = dir ? S_IFDIR | 0755 : S_IFREG | 0644;
	st->st_nlink = dir ? 2 : 1;
}

static void ci_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	if (ci_subdir && parent == FUSE_ROOT_ID && strcmp(name, "sub") == 0) {
		e.ino = CI_SUB_INO;
		ci_stat(CI_SUB_INO, &e.attr);
		fuse_reply_entry(req, &e);
		return;
	}
	if (parent != FUSE_ROOT_ID || (ci_fold ? strcasecmp(name, "README") : strcmp(name, "README")) != 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	e.ino = 2;
	ci_stat(2, &e.attr);
	fuse_reply_entry(req, &e);
}

static void ci_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct stat st;
	ci_stat(ino, &st);
	fuse_reply_attr(req, &st, 0);
}

static void ci_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	static const char *const names[] = { ".", "..", "README", "sub" };
	char buf[1024];
	size_t n = 0;
	for (off_t k = off; ino == FUSE_ROOT_ID && k < (ci_subdir ? 4 : 3); k++) {
		struct stat st;
		ci_stat(k == 2 ? 2 : k == 3 ? CI_SUB_INO : FUSE_ROOT_ID, &st);
		size_t len = fuse_add_direntry(req, buf + n, sizeof(buf) - n, names[k], &st, k + 1);
		if (n + len > sizeof(buf) || n + len > size)
			break;
		n += len;
	}
	fuse_reply_buf(req, buf, n);
}

static void ci_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg, struct fuse_file_info *fi,
		     unsigned flags, const void *in_buf, size_t in_bufsz, size_t out_bufsz)
{
	(void)arg, (void)fi, (void)flags, (void)in_buf, (void)in_bufsz;
	int attr = ci_subdir ? (ino == CI_SUB_INO ? FS_CASEFOLD_FL : 0) : ci_fold ? 0 : FS_CASEFOLD_FL;
	if (cmd != FS_IOC_GETFLAGS || out_bufsz < sizeof(attr))
		fuse_reply_err(req, ENOTTY);
	else
		fuse_reply_ioctl(req, 0, &attr, sizeof(attr));
}

static const struct fuse_lowlevel_ops ci_ops = {
	.lookup = ci_lookup, .getattr = ci_getattr, .readdir = ci_readdir, .ioctl = ci_ioctl,
};

static void *ci_serve(void *se)
{
	fuse_session_loop(se);
	return NULL;
}

/* Guard rules compare names bytewise (.git/hooks); where the host's file
 * system would open .git/HOOKS as .git/hooks they protect nothing. The
 * router refuses such a workspace at start, saying why. */
static void router__refuses_a_workspace_that_ignores_case(void *arg)
{
	struct env *e = arg;
	enter_namespaces();
	char *argv[] = { "test", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(1, argv);
	struct fuse_session *se = fuse_session_new(&args, &ci_ops, sizeof(ci_ops), NULL);
	CHECK(se != NULL && fuse_session_mount(se, e->host) == 0, "mount the test file system");
	pthread_t t;
	CHECK(pthread_create(&t, NULL, ci_serve, se) == 0);
	wait_mounted(e->host);
	struct stat st;
	CHECK(stat(P(e->host, "README"), &st) == 0);
	CHECK((stat(P(e->host, "readme"), &st) == 0) == ci_fold);

	int h = open(e->host, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int i = open(e->iso, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(h >= 0 && i >= 0, "open backings: %s", strerror(errno));
	struct lz_router_options o = test_options();
	struct lz_err err = { 0, "" };
	lz_router *r = NULL;
	int rc = lz_router_new(h, i, test_classifier(&tcls_plain), &o, &r, &err);
	CHECK(rc == -EOPNOTSUPP && strstr(err.msg, "ignores the case of names") != NULL, "lz_router_new: %d %s", rc,
	      err.msg);
	CHECK(r == NULL);
	close(h);
	close(i);
	CHECK_OK(umount2(e->host, MNT_DETACH));
	fuse_session_exit(se);
	pthread_join(t, NULL);
	fuse_session_destroy(se);
	fuse_opt_free_args(&args);
}

static void test_router__refuses_a_workspace_that_ignores_case(void **state)
{
	ci_fold = true;
	run_in_child(router__refuses_a_workspace_that_ignores_case, *state);
}

static void test_router__refuses_a_workspace_in_a_casefold_directory(void **state)
{
	ci_fold = false;
	run_in_child(router__refuses_a_workspace_that_ignores_case, *state);
}

static void mount_casefold_subdir_host(const char *at)
{
	static char *argv[] = { "test", NULL };
	static struct fuse_args args = FUSE_ARGS_INIT(1, argv);
	ci_fold = false;
	ci_subdir = true;
	struct fuse_session *se = fuse_session_new(&args, &ci_ops, sizeof(ci_ops), NULL);
	CHECK(se != NULL && fuse_session_mount(se, at) == 0, "mount the test file system");
	pthread_t t;
	CHECK(pthread_create(&t, NULL, ci_serve, se) == 0);
	wait_mounted(at);
}

/* A directory the host made casefold below the workspace's root (the
 * root itself is refused at start): the router serves nothing of it, so
 * no name it folds (.GIT/hooks for .git/hooks) passes the guards. */
static void router__serves_no_casefold_directory(struct env *e)
{
	struct stat st;
	CHECK_OK(stat(P(e->mnt, "README"), &st));
	CHECK_ERRNO(stat(P(e->mnt, "sub"), &st), EPERM);
	CHECK_ERRNO(stat(P(e->mnt, "sub/.GIT"), &st), EPERM);
	DIR *d = opendir(e->mnt);
	CHECK(d != NULL, "opendir: %s", strerror(errno));
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		CHECK(strcmp(de->d_name, "sub") != 0 || (stat(P(e->mnt, "sub"), &st) < 0 && errno == EPERM),
		      "sub listed and served");
	closedir(d);
}

static void test_router__serves_no_casefold_directory(void **state)
{
	casefold_subdir_host = true;
	with_router(*state, router__serves_no_casefold_directory);
	casefold_subdir_host = false;
	ci_subdir = false;
}

/* The same with the router out of descriptors (every one held by
 * directories the sandbox keeps open): its check of the directory cannot
 * open it, and the listing or lookup fails rather than serve it; once
 * descriptors are back it is still refused. */
#define HELD_DIRS 120
static void router__serves_no_casefold_directory_out_of_descriptors(struct env *e)
{
	struct stat st;
	char name[64], buf[8192];
	int held[HELD_DIRS], n = 0;
	int root = open(e->mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(root >= 0, "open the root: %s", strerror(errno));
	for (int i = 0; i < HELD_DIRS; i++) {
		snprintf(name, sizeof(name), "x.ign/d%03d", i);
		int fd = open(P(e->mnt, name), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0)
			held[n++] = fd;
	}
	CHECK(n < HELD_DIRS, "the router never ran out of descriptors (%d directories held)", n);
	bool served = false;
	for (int round = 0; round < 2 * HELD_DIRS && n > 0 && !served; round++) {
		snprintf(name, sizeof(name), "x.ign/d%03d", round % HELD_DIRS);
		int fd = open(P(e->mnt, name), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0 && n < HELD_DIRS)
			held[n++] = fd;
		else if (fd >= 0)
			close(fd);
		lseek(root, 0, SEEK_SET);
		(void)syscall(SYS_getdents64, root, buf, sizeof(buf));
		served = stat(P(e->mnt, "sub"), &st) == 0;
		if (round % 2 == 1)
			close(held[--n]);
	}
	while (n > 0)
		close(held[--n]);
	close(root);
	CHECK(!served, "the casefold directory was served while the router was out of descriptors");
	CHECK_ERRNO(stat(P(e->mnt, "sub"), &st), EPERM);
}

static void test_router__serves_no_casefold_directory_out_of_descriptors(void **state)
{
	struct env *e = *state;
	char name[64];
	CHECK_OK(mkdir(P(e->iso, "x.ign"), 0755));
	for (int i = 0; i < HELD_DIRS; i++) {
		snprintf(name, sizeof(name), "x.ign/d%03d", i);
		CHECK_OK(mkdir(P(e->iso, name), 0755));
	}
	casefold_subdir_host = true;
	router_nofile = 64;
	with_router(e, router__serves_no_casefold_directory_out_of_descriptors);
	router_nofile = 0;
	casefold_subdir_host = false;
	ci_subdir = false;
}

/* ---- router loss ----------------------------------------------------------------- */

static void router__loss_leaves_enotconn(void *arg)
{
	struct env *e = arg;
	enter_namespaces();
	pid_t rp = fork();
	CHECK(rp >= 0);
	if (rp == 0) {
		lz_ignoreclass *snap;
		lz_router *r = new_router(e, &snap);
		struct lz_err err = { 0, "" };
		(void)lz_router_serve(r, e->mnt, -1, &err);
		_exit(0);
	}
	wait_mounted(e->mnt);
	write_text(P(e->mnt, "before.txt"), "x");
	CHECK_OK(kill(rp, SIGKILL));
	CHECK(waitpid(rp, NULL, 0) == rp);
	struct stat st;
	CHECK_ERRNO(stat(P(e->mnt, "before.txt"), &st), ENOTCONN);
	CHECK_ERRNO(open(P(e->mnt, "after.ign"), O_WRONLY | O_CREAT, 0644), ENOTCONN);
	CHECK(!exists(P(e->iso, "after.ign")));
	CHECK_OK(umount2(e->mnt, MNT_DETACH));
}

static void test_router__loss_leaves_enotconn(void **state)
{
	run_in_child(router__loss_leaves_enotconn, *state);
}

#define T(name) cmocka_unit_test_setup_teardown(test_##name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(router__writes_land_in_the_routed_backing),
		T(router__writes_land_in_the_routed_backing__open_requests),
		T(router__hides_the_entry_the_route_does_not_select),
		T(router__readdir_merges_bytewise_with_stable_offsets),
		T(router__cross_backing_rename_and_link_fail_exdev),
		T(router__rmdir_counts_visible_entries_of_the_other_backing),
		T(router__directory_only_patterns_route_by_type),
		T(router__devices_are_refused_fifos_and_sockets_allowed),
		T(router__inconsistent_path_fails_eio),
		T(router__backing_symlinks_are_never_followed),
		T(router__utimens_keeps_nanoseconds),
		T(router__user_xattrs_pass_others_are_refused),
		T(router__punch_hole_and_seek_hole),
		T(router__punch_hole_and_seek_hole__open_requests),
		T(router__copy_file_range_same_backing_only),
		T(router__copy_file_range_same_backing_only__open_requests),
		T(router__flock_and_posix_locks_conflict),
		T(router__flock_and_posix_locks_conflict__open_requests),
		T(router__shared_mapping_writes_reach_the_backing),
		T(router__shared_mapping_writes_reach_the_backing__open_requests),
		T(router__open_handle_stays_pinned_across_a_publish),
		T(router__open_handle_stays_pinned_across_a_publish__open_requests),
		T(router__index_lock_rename_tracking_an_isolated_only_path_is_ebusy),
		T(router__a_new_index_keeps_but_adds_no_marks_that_hide_changes),
		T(router__index_lock_the_guard_cannot_read_is_ebusy),
		T(router__listings_being_read_are_bounded_together),
		T(router__descriptors_kept_for_unlinked_names_are_bounded),
		T(router__an_index_larger_than_the_guard_reads_is_efbig),
		T(router__the_index_bound_is_its_size),
		T(router__an_index_entry_inside_a_git_directory_is_ebusy),
		T(router__an_index_with_a_gitlink_at_an_ignored_directory_is_ebusy),
		T(router__an_index_changes_only_by_the_guarded_rename),
		T(router__no_write_reaches_the_index_through_an_earlier_descriptor),
		T(router__index_lock_exchanged_with_the_index_is_checked_too),
		T(router__rewound_directory_shows_new_names),
	T(router__rewound_directory_shows_new_names__open_requests),
		T(router__directory_opened_before_changes_lists_them),
		T(router__directory_opened_before_changes_lists_them__open_requests),
	T(router__host_objects_get_no_setid_bits_or_foreign_owners),
	T(router__git_control_files_are_refused),
	T(router__git_control_files_are_refused__open_requests),
	T(router__acls_of_guarded_files_are_refused_like_chmod),
	T(router__directories_holding_git_control_files_gain_no_write),
	T(router__acls_in_git_directories_are_refused),
	T(router__default_acls_give_the_group_no_write_on_the_host),
	T(router__new_entries_in_a_git_directory_get_no_group_or_other_write),
	T(router__no_links_or_special_files_in_a_git_directory),
	T(router__no_fifo_where_git_reads_a_file),
	T(router__no_fifo_where_git_reads_a_file__open_requests),
	T(router__no_links_or_special_files_in_a_git_directory__open_requests),
	T(router__host_git_lock_files_are_not_the_sandboxs),
	T(router__host_git_lock_files_are_not_the_sandboxs__open_requests),
	T(router__a_lock_name_is_never_replaced_or_aliased),
	T(router__host_git_lock_survives_a_racing_sandbox),
	T(router__host_git_lock_survives_removers_in_two_views),
	T(router__a_stale_isolated_directory_makes_no_host_directory),
		T(router__more_inodes_than_descriptors),
		T(router__out_of_descriptors_is_not_absence),
		T(router__a_publish_out_of_descriptors_invalidates_later),
		T(router__host_changes_show_through_long_caches),
		T(router__open_files_survive_host_removal_and_rename),
		T(router__a_reused_inode_number_is_another_object),
		T(router__a_reused_inode_number_is_another_object__watched),
		T(router__host_moves_never_loop_the_directory_chain),
		T(router__a_nested_index_entry_past_the_path_limit_is_skipped),
		T(router__an_exchange_puts_no_symlink_on_the_way_to_a_control_file),
		T(router__an_exchange_puts_no_symlink_where_hooks_path_leads),
		T(router__a_linked_worktrees_index_republishes),
		T(router__a_submodules_index_republishes),
		T(router__a_linked_worktree_workspaces_index_republishes),
		T(router__a_bare_workspaces_index_and_exclude_republish),
		T(router__a_git_directory_the_host_moves_stays_guarded),
		T(router__refuses_a_workspace_that_ignores_case),
		T(router__refuses_a_workspace_in_a_casefold_directory),
		T(router__serves_no_casefold_directory),
		T(router__serves_no_casefold_directory_out_of_descriptors),
		T(router__loss_leaves_enotconn),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
