/* Namespace and mount identity (spec 3.6 bootstrap recovery): a real
 * child's user and mount namespaces, a real mount in it, each proved
 * present while it exists and gone once freed; a namespace held by a
 * descriptor outlives the process. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_test.h"

#include "fs/mountns.h"
#include "proc/nsident.h"

#define MNT_ID_UNIQUE_MASK 0x4000u /* STATX_MNT_ID_UNIQUE */

struct child {
	pid_t pid;
	int pidfd;
	int go;           /* write end: the child exits on EOF */
	uint64_t mnt_id; /* the tmpfs it mounted in its own namespace */
};

/* A child in new user, mount and network namespaces that mounts a tmpfs
 * and reports its unique mount ID, then waits for EOF on go. */
static struct child spawn_child(void)
{
	int up[2], down[2];
	assert_int_equal(pipe2(up, O_CLOEXEC), 0);
	assert_int_equal(pipe2(down, O_CLOEXEC), 0);
	struct child c = { .pid = fork() };
	assert_true(c.pid >= 0);
	if (c.pid == 0) {
		close(down[1]);
		struct statx sx;
		uint64_t id = 0;
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET) == 0 &&
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
		    mount("tmpfs", "/tmp", "tmpfs", 0, "size=64k") == 0 &&
		    statx(AT_FDCWD, "/tmp", 0, MNT_ID_UNIQUE_MASK, &sx) == 0)
			id = sx.stx_mnt_id;
		if (write(up[1], &id, sizeof(id)) != (ssize_t)sizeof(id))
			_exit(1);
		char b;
		(void)read(down[0], &b, 1);
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	assert_int_equal(read(up[0], &c.mnt_id, sizeof(c.mnt_id)), (ssize_t)sizeof(c.mnt_id));
	close(up[0]);
	assert_true(c.mnt_id != 0);
	c.pidfd = (int)syscall(SYS_pidfd_open, c.pid, 0);
	assert_true(c.pidfd >= 0);
	c.go = down[1];
	return c;
}

static void end_child(struct child *c)
{
	int status = 0;
	close(c->go);
	assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(c->pidfd);
}

/* A descriptor of pid's network namespace. */
static int hold_net(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

static void test_lz_nsident_supported__on_this_kernel(void **state)
{
	(void)state;
	/* The recovery matrix relies on it; Linux 6.18 machines have it. */
	assert_true(lz_nsident_supported());
}

static void test_lz_nsident__namespaces_and_mount_gone_with_the_process(void **state)
{
	(void)state;
	struct lz_err e = { 0, "" };
	struct child c = spawn_child();
	struct lz_nsident mnt, net, own;
	assert_int_equal(lz_nsident_of_pidfd(c.pidfd, CLONE_NEWNS, &mnt, &e), 0);
	assert_int_equal(lz_nsident_of_pidfd(c.pidfd, CLONE_NEWNET, &net, &e), 0);
	int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
	assert_int_equal(lz_nsident_of_pidfd(self, CLONE_NEWNS, &own, &e), 0);
	close(self);
	assert_true(net.id != 0 && mnt.id != 0 && net.id != mnt.id && mnt.id != own.id);

	bool alive = false, present = false;
	assert_int_equal(lz_nsident_await_gone(&net, 0, &alive, &e), 0);
	assert_true(alive);
	assert_int_equal(lz_mountns_present_in(mnt.id, c.mnt_id, &present, &e), 0);
	assert_true(present);
	/* Not in the caller's own mount namespace. */
	assert_int_equal(lz_mountns_present_in(0, c.mnt_id, &present, &e), 0);
	assert_false(present);

	end_child(&c);
	assert_int_equal(lz_nsident_await_gone(&net, 5000, &alive, &e), 0);
	assert_false(alive);
	assert_int_equal(lz_nsident_await_gone(&mnt, 5000, &alive, &e), 0);
	assert_false(alive);
	assert_int_equal(lz_mountns_present_in(mnt.id, c.mnt_id, &present, &e), 0);
	assert_false(present);
}

/* An exited child nobody reaps (a coordinator's child after the
 * coordinator died, under an init that does not reap) holds no mount or
 * network namespace, but its credentials keep its user namespace: that
 * one is no evidence of a live generation. */
static void test_lz_nsident__zombie_holds_only_its_user_namespace(void **state)
{
	(void)state;
	struct lz_err e = { 0, "" };
	struct child c = spawn_child();
	struct lz_nsident user, mnt, net;
	assert_int_equal(lz_nsident_of_pidfd(c.pidfd, CLONE_NEWUSER, &user, &e), 0);
	assert_int_equal(lz_nsident_of_pidfd(c.pidfd, CLONE_NEWNS, &mnt, &e), 0);
	assert_int_equal(lz_nsident_of_pidfd(c.pidfd, CLONE_NEWNET, &net, &e), 0);
	close(c.go);
	siginfo_t si = { 0 };
	assert_int_equal(waitid(P_PID, (id_t)c.pid, &si, WEXITED | WNOWAIT), 0);
	bool alive = true;
	assert_int_equal(lz_nsident_await_gone(&mnt, 5000, &alive, &e), 0);
	assert_false(alive);
	assert_int_equal(lz_nsident_await_gone(&net, 5000, &alive, &e), 0);
	assert_false(alive);
	assert_int_equal(lz_nsident_await_gone(&user, 200, &alive, &e), 0);
	assert_true(alive);
	int status = 0;
	assert_int_equal(waitpid(c.pid, &status, 0), c.pid);
	close(c.pidfd);
	assert_int_equal(lz_nsident_await_gone(&user, 5000, &alive, &e), 0);
	assert_false(alive);
}

/* A descriptor of the network namespace keeps it (and its devices): the
 * process alone is no proof. */
static void test_lz_nsident_await_gone__held_by_a_descriptor(void **state)
{
	(void)state;
	struct lz_err e = { 0, "" };
	struct child c = spawn_child();
	struct lz_nsident net;
	assert_int_equal(lz_nsident_of_pidfd(c.pidfd, CLONE_NEWNET, &net, &e), 0);
	int held = hold_net(c.pid);
	end_child(&c);
	bool alive = false;
	assert_int_equal(lz_nsident_await_gone(&net, 200, &alive, &e), 0);
	assert_true(alive);
	close(held);
	assert_int_equal(lz_nsident_await_gone(&net, 5000, &alive, &e), 0);
	assert_false(alive);
}

/* The /proc lookup that stands in where the kernel does not open a
 * namespace by its ID for this caller (an unprivileged HC): a thread in
 * the namespace, then only a descriptor of it, each found with its PID;
 * nothing once both are gone. */
static void test_lz_nsident_find_holder__thread_then_descriptor(void **state)
{
	(void)state;
	struct lz_err e = { 0, "" };
	struct child c = spawn_child();
	struct lz_nsident net;
	assert_int_equal(lz_nsident_of_pidfd(c.pidfd, CLONE_NEWNET, &net, &e), 0);
	pid_t holder = 0;
	assert_int_equal(lz_nsident_find_holder(&net, &holder, &e), 1);
	assert_int_equal(holder, c.pid);
	int held = hold_net(c.pid);
	end_child(&c);
	holder = 0;
	assert_int_equal(lz_nsident_find_holder(&net, &holder, &e), 1);
	assert_int_equal(holder, getpid());
	close(held);
	assert_int_equal(lz_nsident_find_holder(&net, &holder, &e), 0);
	struct lz_nsident bad = net;
	bad.type = CLONE_NEWPID;
	assert_int_equal(lz_nsident_find_holder(&bad, &holder, &e), -EINVAL);
}

/* Out of descriptors partway through /proc (one or two left: /proc and a
 * process's directory open, what is inside does not): no answer, never
 * "not held", which recovery would take as the namespace gone. */
static void test_lz_nsident_find_holder__out_of_descriptors_is_no_answer(void **state)
{
	(void)state;
	struct lz_err e = { 0, "" };
	struct child c = spawn_child();
	struct lz_nsident net;
	assert_int_equal(lz_nsident_of_pidfd(c.pidfd, CLONE_NEWNET, &net, &e), 0);
	for (int left = 1; left <= 2; left++) {
		struct lz_test_fds full;
		assert_int_equal(lz_test_fds_fill(&full), 0);
		for (int i = 0; i < left; i++)
			close(full.fds[--full.n]);
		pid_t holder = 0;
		bool alive = false;
		int found = lz_nsident_find_holder(&net, &holder, &e);
		int gone = lz_nsident_await_gone(&net, 0, &alive, &e);
		assert_int_equal(lz_test_fds_release(&full), 0);
		if (found == 0)
			fail_msg("%d descriptor(s) left: the namespace was reported unheld", left);
		assert_true(found == 1 || found == -EMFILE);
		assert_true(gone < 0 || alive);
	}
	end_child(&c);
}

/* A process holding a descriptor of c's namespace ns ("net", "mnt"),
 * optionally non-dumpable, and optionally with its main thread exited (a
 * zombie leader: its fd directory lists nothing, its live thread's
 * does). Ends when *ret_go closes. */
static int held_fd;
static void *await_eof(void *arg)
{
	char b;
	(void)read(*(int *)arg, &b, 1);
	_exit(0);
	return NULL;
}

static pid_t spawn_holder(const struct child *c, const char *ns, bool leader_exits, bool non_dumpable,
			  int *ret_go)
{
	int up[2], down[2];
	assert_int_equal(pipe2(up, O_CLOEXEC), 0);
	assert_int_equal(pipe2(down, O_CLOEXEC), 0);
	pid_t h = fork();
	assert_true(h >= 0);
	if (h == 0) {
		close(down[1]);
		close(c->go); /* c ends when the test closes it */
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)c->pid, ns);
		held_fd = open(path, O_RDONLY | O_CLOEXEC);
		char ok = held_fd >= 0 && (!non_dumpable || prctl(PR_SET_DUMPABLE, 0) == 0);
		pthread_t t;
		if (ok && pthread_create(&t, NULL, await_eof, &down[0]) != 0)
			ok = 0;
		if (write(up[1], &ok, 1) != 1 || !ok)
			_exit(1);
		if (leader_exits)
			syscall(SYS_exit, 0); /* this thread only */
		await_eof(&down[0]);
	}
	close(up[1]);
	close(down[0]);
	char ok = 0;
	assert_int_equal(read(up[0], &ok, 1), 1);
	assert_true(ok);
	close(up[0]);
	*ret_go = down[1];
	return h;
}

static void end_holder(pid_t h, int go)
{
	int status = 0;
	close(go);
	assert_int_equal(waitpid(h, &status, 0), h);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_lz_nsident_find_holder__a_thread_whose_leader_exited(void **state)
{
	(void)state;
	struct lz_err e = { 0, "" };
	struct child c = spawn_child();
	struct lz_nsident net;
	assert_int_equal(lz_nsident_of_pidfd(c.pidfd, CLONE_NEWNET, &net, &e), 0);
	int go;
	pid_t h = spawn_holder(&c, "net", true, false, &go);
	end_child(&c);
	pid_t holder = 0;
	for (int k = 0; k < 100 && holder != h; k++) { /* the leader's exit is asynchronous */
		assert_true(lz_nsident_find_holder(&net, &holder, &e) >= 0);
		usleep(10 * 1000);
	}
	assert_int_equal(holder, h);
	end_holder(h, go);
	assert_int_equal(lz_nsident_find_holder(&net, &holder, &e), 0);
}

/* A mount namespace's existence is asked for by its ID (listmount):
 * exact whoever holds it, even a process /proc does not show to this
 * user (non-dumpable), and no longer once it lets go. */
static void test_lz_mountns_ns_exists__whoever_holds_it(void **state)
{
	(void)state;
	struct lz_err e = { 0, "" };
	struct child c = spawn_child();
	struct lz_nsident mnt;
	assert_int_equal(lz_nsident_of_pidfd(c.pidfd, CLONE_NEWNS, &mnt, &e), 0);
	bool exists = false;
	assert_int_equal(lz_mountns_ns_exists(mnt.id, &exists, &e), 0);
	assert_true(exists);
	int go;
	pid_t h = spawn_holder(&c, "mnt", false, true, &go);
	end_child(&c);
	assert_int_equal(lz_mountns_ns_exists(mnt.id, &exists, &e), 0);
	assert_true(exists);
	end_holder(h, go);
	for (int k = 0; k < 500 && exists; k++) {
		assert_int_equal(lz_mountns_ns_exists(mnt.id, &exists, &e), 0);
		usleep(10 * 1000);
	}
	assert_false(exists);
}

/* Matching is exact on (ID, type, inode): a record naming a live ID with
 * another type or inode names no namespace that exists, and the wrong
 * type of process namespace is refused. */
static void test_lz_nsident_await_gone__matches_id_type_and_inode(void **state)
{
	(void)state;
	struct lz_err e = { 0, "" };
	struct lz_nsident own;
	int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
	assert_int_equal(lz_nsident_of_pidfd(self, CLONE_NEWUSER, &own, &e), 0);
	assert_int_equal(lz_nsident_of_pidfd(self, CLONE_NEWPID, &own, &e), -EINVAL);
	close(self);
	bool alive = false;
	assert_int_equal(lz_nsident_await_gone(&own, 0, &alive, &e), 0);
	assert_true(alive);
	struct lz_nsident other_inode = own, other_type = own;
	other_inode.inum++;
	other_type.type = CLONE_NEWNS;
	assert_int_equal(lz_nsident_await_gone(&other_inode, 0, &alive, &e), 0);
	assert_false(alive);
	alive = true;
	assert_int_equal(lz_nsident_await_gone(&other_type, 0, &alive, &e), 0);
	assert_false(alive);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_nsident_supported__on_this_kernel),
		cmocka_unit_test(test_lz_nsident__namespaces_and_mount_gone_with_the_process),
		cmocka_unit_test(test_lz_nsident__zombie_holds_only_its_user_namespace),
		cmocka_unit_test(test_lz_nsident_await_gone__held_by_a_descriptor),
		cmocka_unit_test(test_lz_nsident_find_holder__thread_then_descriptor),
		cmocka_unit_test(test_lz_nsident_find_holder__out_of_descriptors_is_no_answer),
		cmocka_unit_test(test_lz_nsident_find_holder__a_thread_whose_leader_exited),
		cmocka_unit_test(test_lz_mountns_ns_exists__whoever_holds_it),
		cmocka_unit_test(test_lz_nsident_await_gone__matches_id_type_and_inode),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
