/* core/proc/confine: what a restricted helper can still do, tried
 * against the running kernel. Each case runs in a forked child (the
 * restriction is for good) and first does the same things unrestricted,
 * so a refusal seen after is the restriction's. This machine's kernel
 * has Landlock (ABI 6 or later, for the socket and signal scopes): a
 * kernel without it fails here, as Lazaret there runs its helpers
 * without this layer. */
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_child.h"

#include "proc/confine.h"

struct dirs {
	char served[64], other[64]; /* the helper's own tree, and any other */
	int unix_listener;          /* an abstract socket the parent listens on */
	char unix_name[64];
	int tcp_listener; /* and a TCP socket on the loopback */
	int named_listener; /* and other/bus, a named Unix socket */
	struct sockaddr_in tcp_addr;
};

static int setup(void **state)
{
	struct dirs *d = calloc(1, sizeof(*d));
	snprintf(d->served, sizeof(d->served), "/tmp/lz-landlock-served.XXXXXX");
	snprintf(d->other, sizeof(d->other), "/tmp/lz-landlock-other.XXXXXX");
	assert_non_null(mkdtemp(d->served));
	assert_non_null(mkdtemp(d->other));
	d->unix_listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(d->unix_listener >= 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int n = snprintf(d->unix_name, sizeof(d->unix_name), "lz-landlock-%d", (int)getpid());
	memcpy(a.sun_path + 1, d->unix_name, (size_t)n);
	assert_int_equal(bind(d->unix_listener, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)), 0);
	assert_int_equal(listen(d->unix_listener, 4), 0);
	d->named_listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un named = { .sun_family = AF_UNIX };
	snprintf(named.sun_path, sizeof(named.sun_path), "%s/bus", d->other);
	assert_int_equal(bind(d->named_listener, (struct sockaddr *)&named, sizeof(named)), 0);
	assert_int_equal(listen(d->named_listener, 4), 0);
	d->tcp_listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	d->tcp_addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(d->tcp_addr);
	assert_int_equal(bind(d->tcp_listener, (struct sockaddr *)&d->tcp_addr, sizeof(d->tcp_addr)), 0);
	assert_int_equal(getsockname(d->tcp_listener, (struct sockaddr *)&d->tcp_addr, &len), 0);
	assert_int_equal(listen(d->tcp_listener, 4), 0);
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	struct dirs *d = *state;
	char *argv[] = { "rm", "-rf", d->served, d->other, NULL };
	pid_t pid = fork();
	if (pid == 0) {
		execv("/bin/rm", argv);
		_exit(127);
	}
	int status;
	waitpid(pid, &status, 0);
	close(d->unix_listener);
	close(d->tcp_listener);
	close(d->named_listener);
	free(d);
	return 0;
}

static int make_file(const char *dir, const char *name)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

static int at(int (*op)(const char *), const char *dir, const char *name)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return op(p) < 0 ? -errno : 0;
}

static int open_ro(const char *p)
{
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		close(fd);
	return fd < 0 ? -1 : 0;
}

static int open_wo(const char *p)
{
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd >= 0)
		close(fd);
	return fd < 0 ? -1 : 0;
}

static int trunc0(const char *p)
{
	return truncate(p, 0);
}

static int mkdir_0700(const char *p)
{
	return mkdir(p, 0700);
}

/* execve, in a child of the child: -errno of the exec, or 0 when it ran. */
static int exec_true(void)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid == 0) {
		char *argv[] = { "true", NULL };
		execv("/bin/true", argv);
		int e = errno;
		(void)!write(p[1], &e, sizeof(e));
		_exit(127);
	}
	close(p[1]);
	int e = 0;
	ssize_t n = read(p[0], &e, sizeof(e));
	close(p[0]);
	int status;
	waitpid(pid, &status, 0);
	return n == (ssize_t)sizeof(e) ? -e : 0;
}

static int tcp_bind(void)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int r = bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 ? -errno : 0;
	close(s);
	return r;
}

static int tcp_connect(const struct dirs *d)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	int r = connect(s, (const struct sockaddr *)&d->tcp_addr, sizeof(d->tcp_addr)) < 0 ? -errno : 0;
	close(s);
	return r;
}

static int make_socket(int family)
{
	int s = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	close(s);
	return 0;
}

static int io_uring(void)
{
	struct io_uring_params p = { 0 };
	long fd = syscall(SYS_io_uring_setup, 1, &p);
	if (fd < 0)
		return -errno;
	close((int)fd);
	return 0;
}

/* A named Unix socket the parent listens on (the developer's session bus
 * or SSH agent, to a helper): connecting needs a new Unix socket. */
static int named_connect(const struct dirs *d)
{
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s/bus", d->other);
	int r = connect(s, (struct sockaddr *)&a, sizeof(a)) < 0 ? -errno : 0;
	close(s);
	return r;
}

static int abstract_connect(const struct dirs *d)
{
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	size_t n = strlen(d->unix_name);
	memcpy(a.sun_path + 1, d->unix_name, n);
	int r = connect(s, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) < 0
			? -errno
			: 0;
	close(s);
	return r;
}

/* The router's shape: reads anywhere, changes only its own trees. */
static void router_shape(void *arg)
{
	const struct dirs *d = arg;
	/* unrestricted, all of it works */
	CHECK(make_file(d->other, "before") == 0, "create before");
	CHECK(at(open_wo, d->other, "before") == 0 && at(trunc0, d->other, "before") == 0, "write before");
	CHECK(exec_true() == 0, "exec before");
	CHECK(tcp_bind() == 0 && tcp_connect(d) == 0, "bind and connect before");
	CHECK(abstract_connect(d) == 0 && named_connect(d) == 0, "Unix sockets before");
	CHECK(io_uring() == 0, "io_uring before: %d", io_uring());
	CHECK(kill(getppid(), 0) == 0, "signal before");

	int served = open(d->served, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(served >= 0, "open served");
	CHECK(make_file(d->other, "readable") == 0, "create readable");
	char readable_path[256];
	snprintf(readable_path, sizeof(readable_path), "%s/readable", d->other);
	const int readable[] = { open(readable_path, O_PATH | O_CLOEXEC), open("/usr", O_PATH | O_CLOEXEC) };
	CHECK(readable[0] >= 0 && readable[1] >= 0, "open what it may read");
	struct lz_err err = { 0, "" };
	int abi = lz_confine(&(struct lz_confine){ .read_paths = readable, .n_read_paths = 2, .write_dirs = &served,
						   .n_write_dirs = 1 },
			     &err);
	CHECK(abi >= 1, "lz_confine: %d %s", abi, err.msg);

	/* its own tree: everything a file server does */
	CHECK(make_file(d->served, "f") == 0, "create in served");
	CHECK(at(mkdir_0700, d->served, "sub") == 0, "mkdir in served");
	char from[256], to[256];
	snprintf(from, sizeof(from), "%s/f", d->served);
	snprintf(to, sizeof(to), "%s/sub/f", d->served);
	CHECK(rename(from, to) == 0, "rename across its directories: %s", strerror(errno));
	CHECK(link(to, from) == 0, "link: %s", strerror(errno));
	snprintf(to, sizeof(to), "%s/sub/link", d->served);
	CHECK(symlink("f", to) == 0, "symlink: %s", strerror(errno));
	CHECK(at(trunc0, d->served, "f") == 0 && at(unlink, d->served, "f") == 0, "truncate, unlink in served");
	/* elsewhere: reading what it was given, and nothing else */
	CHECK(at(open_ro, d->other, "readable") == 0, "reading a file it may read");
	CHECK(open_ro("/usr") == 0 && open_ro("/usr/bin") == 0, "listing beneath a directory it may read");
	CHECK(at(open_ro, d->other, "before") == -EACCES, "read a file elsewhere");
	CHECK(open_ro(d->other) < 0 && errno == EACCES, "listed a directory elsewhere");
	CHECK(open_ro("/etc/passwd") < 0 && errno == EACCES, "read /etc/passwd");
	CHECK(make_file(d->other, "after") == -EACCES, "created a file elsewhere");
	CHECK(at(open_wo, d->other, "before") < 0 && errno == EACCES, "opened a file elsewhere for writing");
	CHECK(at(trunc0, d->other, "before") < 0 && errno == EACCES, "truncated a file elsewhere");
	CHECK(at(unlink, d->other, "before") < 0 && errno == EACCES, "removed a file elsewhere");
	CHECK(at(mkdir_0700, d->other, "dir") < 0 && errno == EACCES, "made a directory elsewhere");
	snprintf(to, sizeof(to), "%s/sub/f", d->served);
	snprintf(from, sizeof(from), "%s/moved", d->other);
	struct stat st;
	CHECK(rename(to, from) < 0 && lstat(to, &st) == 0, "moved a file out of its tree");
	/* nothing else of the developer's: no program, no socket of any kind */
	CHECK(exec_true() == -EACCES, "executed a program: %d", exec_true());
	CHECK(make_socket(AF_UNIX) == -EACCES && make_socket(AF_INET) == -EACCES &&
		      make_socket(AF_INET6) == -EACCES && make_socket(AF_NETLINK) == -EACCES,
	      "made a socket");
	CHECK(named_connect(d) == -EACCES, "connected to a named Unix socket: %d", named_connect(d));
	CHECK(abstract_connect(d) == -EACCES, "connected to an abstract socket: %d", abstract_connect(d));
	CHECK(tcp_connect(d) == -EACCES && tcp_bind() == -EACCES, "a TCP socket");
	CHECK(io_uring() == -EACCES, "set up io_uring: %d", io_uring());
	if (abi >= 6)
		CHECK(kill(getppid(), 0) < 0 && errno == EPERM, "signalled a process outside");
}

static void test_lz_confine__router_changes_only_its_trees(void **state)
{
	run_in_child(router_shape, *state);
}

/* read_anywhere: reads everywhere stay, writes only beneath its trees. */
static void read_anywhere_shape(void *arg)
{
	const struct dirs *d = arg;
	CHECK(make_file(d->other, "before") == 0, "create before");
	int served = open(d->served, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct lz_err err = { 0, "" };
	int abi = lz_confine(&(struct lz_confine){ .read_anywhere = true, .write_dirs = &served, .n_write_dirs = 1 },
			     &err);
	CHECK(abi >= 1, "lz_confine: %d %s", abi, err.msg);
	CHECK(at(open_ro, d->other, "before") == 0 && open_ro("/etc") == 0, "reading elsewhere stays");
	CHECK(make_file(d->served, "f") == 0, "create in served");
	CHECK(make_file(d->other, "after") == -EACCES, "created a file elsewhere");
}

static void test_lz_confine__read_anywhere_keeps_reads(void **state)
{
	run_in_child(read_anywhere_shape, *state);
}

/* The egress proxy's shape: no file at all, IPv4 sockets and TCP
 * connections out, nothing else. */
static void proxy_shape(void *arg)
{
	const struct dirs *d = arg;
	CHECK(open_ro("/etc/passwd") == 0 && open_ro("/") == 0, "read before");
	struct lz_err err = { 0, "" };
	int abi = lz_confine(&(struct lz_confine){ .inet = true }, &err);
	CHECK(abi >= 1, "lz_confine: %d %s", abi, err.msg);
	CHECK(open_ro("/etc/passwd") < 0 && errno == EACCES, "read a file");
	CHECK(open_ro("/") < 0 && errno == EACCES, "listed a directory");
	CHECK(make_file(d->served, "x") == -EACCES && make_file(d->other, "x") == -EACCES, "created a file");
	CHECK(exec_true() == -EACCES, "executed a program");
	CHECK(tcp_connect(d) == 0, "no TCP connection: %d", tcp_connect(d));
	CHECK(make_socket(AF_UNIX) == -EACCES && make_socket(AF_INET6) == -EACCES, "made a non-IPv4 socket");
	CHECK(named_connect(d) == -EACCES && abstract_connect(d) == -EACCES, "connected to a Unix socket");
	CHECK(io_uring() == -EACCES, "set up io_uring: %d", io_uring());
	if (abi >= 4)
		CHECK(tcp_bind() == -EACCES, "bound a TCP socket: %d", tcp_bind());
}

static void test_lz_confine__proxy_opens_no_file(void **state)
{
	run_in_child(proxy_shape, *state);
}

static void *thread_main(void *arg)
{
	return arg;
}

static void *thread_waits(void *arg)
{
	for (;;)
		pause();
	return arg;
}

/* A confined helper can still cancel its threads (libfuse's worker loop
 * does when the router's session ends): glibc loads its unwinder then,
 * which Landlock would refuse to read. Ends by SIGABRT without it. */
static void cancel_shape(void *arg)
{
	(void)arg;
	struct lz_err err = { 0, "" };
	int abi = lz_confine(&(struct lz_confine){ 0 }, &err);
	CHECK(abi >= 0, "lz_confine: %d %s", abi, err.msg);
	pthread_t t;
	void *ret = NULL;
	CHECK(pthread_create(&t, NULL, thread_waits, NULL) == 0, "a thread");
	CHECK(pthread_cancel(t) == 0 && pthread_join(t, &ret) == 0 && ret == PTHREAD_CANCELED, "cancelled");
}

static void test_lz_confine__threads_can_be_cancelled(void **state)
{
	run_in_child(cancel_shape, *state);
}

/* No new namespace or mount, whoever asks (a root test run could do
 * each before); threads still start (clone3 says ENOSYS, clone follows). */
static void namespaces_shape(void *arg)
{
	(void)arg;
	struct lz_err err = { 0, "" };
	int abi = lz_confine(&(struct lz_confine){ .read_anywhere = true }, &err);
	CHECK(abi >= 0, "lz_confine: %d %s", abi, err.msg);
	CHECK(unshare(CLONE_NEWUSER) < 0 && errno == EPERM, "unshared a user namespace");
	CHECK(unshare(CLONE_NEWNS) < 0 && errno == EPERM, "unshared a mount namespace");
	CHECK(syscall(SYS_setns, 0, 0) < 0 && errno == EPERM, "setns");
	CHECK(mount("none", "/tmp", "tmpfs", 0, NULL) < 0 && errno == EPERM, "mounted");
	CHECK(syscall(SYS_fsopen, "tmpfs", 0) < 0 && errno == EPERM, "fsopen");
	CHECK(syscall(SYS_open_tree, AT_FDCWD, "/tmp", 1 /* OPEN_TREE_CLONE */) < 0 && errno == EPERM, "open_tree");
	CHECK(chroot("/") < 0 && errno == EPERM, "chroot");
	pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0);
	if (pid == 0)
		_exit(0);
	CHECK(pid < 0 && errno == EPERM, "cloned into a new user namespace");
	CHECK(syscall(SYS_clone3, NULL, 0) < 0 && errno == ENOSYS, "clone3");
	pthread_t t;
	void *ret = NULL;
	CHECK(pthread_create(&t, NULL, thread_main, &err) == 0 && pthread_join(t, &ret) == 0 && ret == &err,
	      "a thread");
	pid = fork();
	if (pid == 0)
		_exit(7);
	int status = 0;
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WEXITSTATUS(status) == 7, "a child");
}

static void test_lz_confine__no_namespace_or_mount(void **state)
{
	run_in_child(namespaces_shape, *state);
}

/* No key management call: a key the developer's uid may read is read by
 * serial whatever session keyring the helper holds (broker.c), and
 * request_key would have the kernel run /sbin/request-key on the host. */
static void keys_shape(void *arg)
{
	(void)arg;
	CHECK(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 1) >= 0,
	      "keyctl before: %s", strerror(errno));
	struct lz_err err = { 0, "" };
	int abi = lz_confine(&(struct lz_confine){ .read_anywhere = true }, &err);
	CHECK(abi >= 0, "lz_confine: %d %s", abi, err.msg);
	CHECK(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0) < 0 && errno == EPERM,
	      "keyctl: %s", strerror(errno));
	CHECK(syscall(SYS_add_key, "user", "lz-test-confine", "x", 1, KEY_SPEC_PROCESS_KEYRING) < 0 &&
		      errno == EPERM,
	      "add_key: %s", strerror(errno));
	CHECK(syscall(SYS_request_key, "user", "lz-test-confine", NULL, 0) < 0 && errno == EPERM,
	      "request_key: %s", strerror(errno));
}

static void test_lz_confine__no_key_management(void **state)
{
	run_in_child(keys_shape, *state);
}

/* A descriptor that is not a directory is refused before anything is
 * restricted. */
static void bad_descriptor(void *arg)
{
	(void)arg;
	int bad = -1;
	struct lz_err err = { 0, "" };
	CHECK(lz_confine(&(struct lz_confine){ .read_anywhere = true, .write_dirs = &bad, .n_write_dirs = 1 },
				   &err) == -EBADF,
	      "%s", err.msg);
	CHECK(strstr(err.msg, "descriptor -1") != NULL, "%s", err.msg);
	CHECK(exec_true() == 0, "restricted after a refusal");
}

static void test_lz_confine__refuses_a_bad_descriptor_whole(void **state)
{
	run_in_child(bad_descriptor, *state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lz_confine__router_changes_only_its_trees, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_confine__read_anywhere_keeps_reads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_confine__proxy_opens_no_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_confine__threads_can_be_cancelled, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_confine__no_namespace_or_mount, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_confine__refuses_a_bad_descriptor_whole, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_confine__no_key_management, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
