/* The known-live canary (core/canary.c, core/canaryprobe.c; spec 3.7
 * "Known-live control", "Exact cleanup").
 *
 * Kernel tests fork a child that unshares a fresh network namespace (lo up,
 * IPv6 off, as the Runtime Supervisor prepares it) and runs the steps there;
 * the child reports the first failed check through a pipe and cmocka runs
 * only in the parent. They need root and are skipped otherwise. */
#include <errno.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <stdlib.h>
#include <stdbool.h>
#include <limits.h>
#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_test.h"

#include "net/canary.h"
#include "net/canaryprobe.h"
#include "config/domain.h"
#include "net/netpolicy.h"
#include "net/netroutes_install.h"
#include "net/netroutes_observe.h"
#include "proc/spawn.h"

static char child_msg[1024];

#define CHECK(cond, ...)                                                          \
	do {                                                                      \
		if (!(cond)) {                                                    \
			int n_ = snprintf(child_msg, sizeof(child_msg), "line %d: ", __LINE__); \
			snprintf(child_msg + n_, sizeof(child_msg) - (size_t)n_, __VA_ARGS__); \
			return -1;                                                \
		}                                                                 \
	} while (0)

static const uint8_t key[LZ_CANARY_KEY_LEN] = { 1, 2, 3, 4, 5, 6, 7, 8 };

static int lo_up(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr = { .ifr_name = "lo" };
	int r = s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0 ? 0 : -1;
	ifr.ifr_flags |= IFF_UP;
	if (r == 0 && ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		r = -1;
	if (s >= 0)
		close(s);
	return r;
}

static void run_in_netns(int (*body)(void))
{
	int p[2];
	if (geteuid() != 0)
		skip();
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		int r = -1;
		if (unshare(CLONE_NEWNET) < 0)
			snprintf(child_msg, sizeof(child_msg), "unshare: %s", strerror(errno));
		else if (lo_up() < 0)
			snprintf(child_msg, sizeof(child_msg), "lo up: %s", strerror(errno));
		else
			r = body();
		if (r == 0)
			child_msg[0] = '\0';
		ssize_t w = write(p[1], child_msg, sizeof(child_msg));
		_exit(w == (ssize_t)sizeof(child_msg) ? 0 : 1);
	}
	close(p[1]);
	char msg[sizeof(child_msg)] = "";
	size_t got = 0;
	ssize_t k;
	while (got < sizeof(msg) && (k = read(p[0], msg + got, sizeof(msg) - got)) > 0)
		got += (size_t)k;
	close(p[0]);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (got != sizeof(msg))
		fail_msg("child ended without a report (status 0x%x)", status);
	if (msg[0])
		fail_msg("%s", msg);
}

static void test_lz_canary_answer__fixed_vector(void **state)
{
	(void)state;
	uint8_t k[LZ_CANARY_KEY_LEN], challenge[LZ_CANARY_CHALLENGE_LEN], out[LZ_CANARY_CHALLENGE_LEN];
	char hex[2 * LZ_CANARY_CHALLENGE_LEN + 1];
	for (size_t i = 0; i < sizeof(k); i++)
		k[i] = (uint8_t)i;
	memset(challenge, 0xaa, sizeof(challenge));
	/* HMAC-SHA256 computed independently (Python's hmac module). */
	assert_int_equal(lz_canary_answer(k, 7, LZ_NET_CANARY_ALLOWED, challenge, out), 0);
	lz_hex(out, sizeof(out), hex);
	assert_string_equal(hex, "8d803d5222b04cbcac37b4fbfb5f934a13171bd26391493c9c0bedc96d7c26b4");
	/* Generation and endpoint are bound into the answer. */
	uint8_t other[LZ_CANARY_CHALLENGE_LEN];
	assert_int_equal(lz_canary_answer(k, 8, LZ_NET_CANARY_ALLOWED, challenge, other), 0);
	assert_memory_not_equal(out, other, sizeof(out));
	assert_int_equal(lz_canary_answer(k, 7, LZ_NET_CANARY_DENIED, challenge, other), 0);
	assert_memory_not_equal(out, other, sizeof(out));
}

static int body_live_then_removed(void)
{
	struct lz_canary c;
	struct lz_err err = { 0, "" };
	uint8_t challenge[LZ_CANARY_CHALLENGE_LEN] = { 9 }, got[LZ_CANARY_CHALLENGE_LEN], want[LZ_CANARY_CHALLENGE_LEN];
	CHECK(lz_canary_create(key, 5, &c, &err) == 0, "create: %s", err.msg);
	CHECK(if_nametoindex(LZ_CANARY_DEV) == (unsigned)c.link.ifindex, "lzcanary0 is the recorded link");
	CHECK(strcmp(c.link.kind, "veth") == 0 && c.link.peer_netnsid >= 0, "record: kind %s", c.link.kind);
	/* Equal indexes at both ends delay the carrier by up to a second. */
	CHECK(c.link.peer_ifindex > 0 && c.link.peer_ifindex != c.link.ifindex, "both ends have index %d",
	      c.link.ifindex);
	CHECK(lz_canary_prove_live(key, 5, &err) == 0, "prove live: %s", err.msg);
	/* The peer end is not in this namespace. */
	CHECK(if_nametoindex(LZ_CANARY_PEER_DEV) == 0, "lzcanary1 must live in the peer namespace");
	/* The allowed endpoint answers with the keyed answer, bound to it. */
	CHECK(lz_canary_probe(LZ_NET_CANARY_ALLOWED, LZ_CANARY_DEV, challenge, got, 2000) == 0, "probe .2");
	CHECK(lz_canary_answer(key, 5, LZ_NET_CANARY_ALLOWED, challenge, want) == 0, "answer");
	CHECK(memcmp(got, want, sizeof(got)) == 0, "allowed endpoint's answer");
	/* Without a route (the /32 address has none) it is not reachable. */
	CHECK(lz_canary_probe(LZ_NET_CANARY_ALLOWED, NULL, challenge, got, 500) < 0, "routed without a route");
	CHECK(lz_canary_remove(&c, NULL, &err) == 0, "remove: %s", err.msg);
	CHECK(c.responder_pidfd < 0 && c.peer_netns_fd < 0, "descriptors left");
	CHECK(if_nametoindex(LZ_CANARY_DEV) == 0, "lzcanary0 still present");
	int r = lz_canary_probe(LZ_NET_CANARY_ALLOWED, LZ_CANARY_DEV, challenge, got, 500);
	CHECK(r < 0, "the allowed endpoint still answers after cleanup");
	return 0;
}

/* What counts as "no answer": the network's refusal or silence, never a
 * probe this process could not make (out of descriptors) or a short
 * answer. A closed port on loopback refuses; a full table is -EMFILE. */
static void test_lz_canary_no_answer__network_not_local_failures(void **state)
{
	(void)state;
	assert_true(lz_canary_no_answer(-ETIMEDOUT));
	assert_true(lz_canary_no_answer(-ENETUNREACH));
	assert_false(lz_canary_no_answer(0));
	assert_false(lz_canary_no_answer(-EPROTO));
	assert_false(lz_canary_no_answer(-ENOMEM));
	assert_false(lz_canary_no_answer(-EADDRNOTAVAIL)); /* no free local port */
	assert_false(lz_canary_no_answer(-EAGAIN));
	assert_false(lz_canary_no_answer(-EINVAL));
	uint8_t challenge[LZ_CANARY_CHALLENGE_LEN] = { 1 }, answer[LZ_CANARY_CHALLENGE_LEN];
	int r = lz_canary_probe_port(0x7f000001, 1, NULL, challenge, answer, 1000);
	assert_int_equal(r, -ECONNREFUSED);
	assert_true(lz_canary_no_answer(r));
	struct lz_test_fds full;
	assert_int_equal(lz_test_fds_fill(&full), 0);
	r = lz_canary_probe_port(0x7f000001, 1, NULL, challenge, answer, 1000);
	assert_int_equal(lz_test_fds_release(&full), 0);
	assert_int_equal(r, -EMFILE);
	assert_false(lz_canary_no_answer(r));
}

/* A peer that takes the connection and closes it unanswered did answer:
 * the probe reached it (-EPROTO), which is never "no answer". */
static void test_lz_canary_probe__closed_unanswered_is_an_answer(void **state)
{
	(void)state;
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
	socklen_t sl = sizeof(sa);
	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(l, 1), 0);
	assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &sl), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		uint8_t some[LZ_CANARY_CHALLENGE_LEN];
		int c = accept(l, NULL, NULL);
		_exit(c >= 0 && read(c, some, sizeof(some)) > 0 ? 0 : 1);
	}
	close(l);
	uint8_t challenge[LZ_CANARY_CHALLENGE_LEN] = { 1 }, answer[LZ_CANARY_CHALLENGE_LEN];
	int r = lz_canary_probe_port(0x7f000001, ntohs(sa.sin_port), NULL, challenge, answer, 5000);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(status, 0);
	assert_int_equal(r, -EPROTO);
	assert_false(lz_canary_no_answer(r));
}

static void test_lz_canary__live_then_removed(void **state)
{
	(void)state;
	run_in_netns(body_live_then_removed);
}

/* What the process behind pidfd holds beyond a netlink socket and network
 * administration: 0 when nothing (or when it has ended already), -1 with
 * what in *what. */
static int held_by(int pidfd, char *what, size_t cap)
{
	char path[64], line[256];
	long pid = -1;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Pid: %ld", &pid) == 1)
			break;
	if (f)
		fclose(f);
	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	f = fopen(path, "r");
	unsigned long long eff = 0;
	bool seen = false;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			seen = true;
	if (f)
		fclose(f);
	if (seen && eff != (1ull << CAP_NET_ADMIN)) {
		snprintf(what, cap, "capabilities %llx", eff);
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/%ld/fd", pid);
	DIR *dir = opendir(path);
	struct dirent *e;
	while (dir && (e = readdir(dir)) != NULL) {
		char link[PATH_MAX], target[256];
		snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
		ssize_t n = readlink(link, target, sizeof(target) - 1);
		if (n < 0 || atoi(e->d_name) <= 2)
			continue;
		target[n] = '\0';
		if (strncmp(target, "socket:", 7) != 0) {
			snprintf(what, cap, "fd %.8s: %.40s", e->d_name, target);
			closedir(dir);
			return -1;
		}
	}
	if (dir)
		closedir(dir);
	return 0;
}

/* With the policy's canary routes: the removal comes back once the link is
 * unregistered, its route already gone and the deny in force, and the
 * kernel's release of the link ends in a child of its own. */
static int body_removed_release_detached(void)
{
	struct lz_canary c;
	struct lz_err err = { 0, "" };
	struct lz_kroute rt;
	const struct lz_netroutes_entry routes[] = {
		{ LZ_NET_CANARY, LZ_NETROUTES_CANARY_DENY },
		{ { LZ_NET_CANARY_ALLOWED, 32 }, LZ_NETROUTES_CANARY_ALLOW },
	};
	CHECK(lz_canary_create(key, 5, &c, &err) == 0, "create: %s", err.msg);
	CHECK(lz_netroutes_install(routes, 2, LZ_CANARY_DEV, LZ_NET_GATEWAY, &err) == 0, "routes: %s", err.msg);
	CHECK(lz_netroutes_lookup(LZ_NET_CANARY_ALLOWED, &rt, &err) == 0 && strcmp(rt.dev, LZ_CANARY_DEV) == 0,
	      "the allowed endpoint is not routed to lzcanary0 (%s)", err.msg);
	int release = -EBADF;
	CHECK(lz_canary_remove(&c, &release, &err) == 0, "remove: %s", err.msg);
	CHECK(release >= 0, "the removal waited for the kernel's release");
	/* The child finishing the release, while it runs, holds no descriptor
	 * of the peer namespace or the responder, and no capability but
	 * network administration. */
	char what[64];
	CHECK(held_by(release, what, sizeof(what)) == 0, "the deleting child holds %s", what);
	CHECK(if_nametoindex(LZ_CANARY_DEV) == 0, "lzcanary0 still present");
	int r = lz_netroutes_lookup(LZ_NET_CANARY_ALLOWED, &rt, &err);
	CHECK(r == 0 && strcmp(rt.dev, "lo") == 0, "after removal the allowed endpoint routes to %s (%d)",
	      r == 0 ? rt.dev : "nothing", r);
	siginfo_t info;
	CHECK(lz_reap(release, 5000, &info) == 0 && info.si_code == CLD_EXITED && info.si_status == 0,
	      "the deleting child ended with %d/%d", info.si_code, info.si_status);
	close(release);
	return 0;
}

static void test_lz_canary_remove__release_detached_after_unregistering(void **state)
{
	(void)state;
	run_in_netns(body_removed_release_detached);
}

/* Without network administration the deleting child's request fails: the
 * removal says so and the link stays. */
static int body_removal_refused(void)
{
	struct lz_canary c;
	struct lz_err err = { 0, "" };
	CHECK(lz_canary_create(key, 5, &c, &err) == 0, "create: %s", err.msg);
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	CHECK(syscall(SYS_capget, &h, d) == 0, "capget: %s", strerror(errno));
	d[CAP_NET_ADMIN / 32].permitted &= ~(1u << (CAP_NET_ADMIN % 32));
	d[CAP_NET_ADMIN / 32].effective &= ~(1u << (CAP_NET_ADMIN % 32));
	CHECK(syscall(SYS_capset, &h, d) == 0, "capset: %s", strerror(errno));
	int release = -EBADF;
	int r = lz_canary_remove(&c, &release, &err);
	CHECK(r == -EPERM && strstr(err.msg, "delete the veth lzcanary0: Operation not permitted"), "remove: %d %s",
	      r, err.msg);
	CHECK(release < 0, "a failed removal handed back a child");
	CHECK(if_nametoindex(LZ_CANARY_DEV) != 0, "lzcanary0 went although its deletion failed");
	return 0;
}

static void test_lz_canary_remove__a_refused_deletion_fails_and_keeps_the_link(void **state)
{
	(void)state;
	run_in_netns(body_removal_refused);
}

static int body_wrong_key(void)
{
	struct lz_canary c;
	struct lz_err err = { 0, "" };
	uint8_t other[LZ_CANARY_KEY_LEN] = { 1, 2, 3, 4, 5, 6, 7, 9 };
	CHECK(lz_canary_create(key, 5, &c, &err) == 0, "create: %s", err.msg);
	int r = lz_canary_prove_live(other, 5, &err);
	CHECK(r == -EPERM && strstr(err.msg, "10.137.55.2 gave a wrong answer"), "other key: %d %s", r, err.msg);
	r = lz_canary_prove_live(key, 6, &err);
	CHECK(r == -EPERM && strstr(err.msg, "wrong answer"), "other generation: %d %s", r, err.msg);
	CHECK(lz_canary_remove(&c, NULL, &err) == 0, "remove: %s", err.msg);
	return 0;
}

static void test_lz_canary_prove_live__wrong_key_or_generation_refused(void **state)
{
	(void)state;
	run_in_netns(body_wrong_key);
}

static int body_shape_changed(void)
{
	struct lz_canary c;
	struct lz_err err = { 0, "" };
	CHECK(lz_canary_create(key, 5, &c, &err) == 0, "create: %s", err.msg);
	/* Someone changes the link: its hardware address no longer matches. */
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr = { .ifr_name = LZ_CANARY_DEV };
	CHECK(s >= 0 && ioctl(s, SIOCGIFHWADDR, &ifr) == 0, "read hwaddr");
	ifr.ifr_hwaddr.sa_data[5] ^= 1;
	CHECK(ioctl(s, SIOCSIFHWADDR, &ifr) == 0, "set hwaddr: %s", strerror(errno));
	close(s);
	int r = lz_canary_remove(&c, NULL, &err);
	CHECK(r == -ESTALE && strstr(err.msg, "no longer matches its creation record"), "remove: %d %s", r,
	      err.msg);
	CHECK(if_nametoindex(LZ_CANARY_DEV) != 0, "a link that does not match was deleted");
	CHECK(c.responder_pidfd < 0 && c.peer_netns_fd < 0, "descriptors left");
	return 0;
}

static void test_lz_canary_remove__changed_shape_not_deleted(void **state)
{
	(void)state;
	run_in_netns(body_shape_changed);
}

static int body_twice(void)
{
	struct lz_canary c, d;
	struct lz_err err = { 0, "" };
	CHECK(lz_canary_create(key, 5, &c, &err) == 0, "create: %s", err.msg);
	int r = lz_canary_create(key, 5, &d, &err);
	CHECK(r == -EEXIST && strstr(err.msg, "create the veth lzcanary0"), "second create: %d %s", r, err.msg);
	CHECK(d.responder_pidfd < 0 && d.peer_netns_fd < 0, "the failed create left descriptors");
	CHECK(lz_canary_prove_live(key, 5, &err) == 0, "the first canary broke: %s", err.msg);
	CHECK(lz_canary_remove(&c, NULL, &err) == 0, "remove: %s", err.msg);
	return 0;
}

static void test_lz_canary_create__existing_link_refused(void **state)
{
	(void)state;
	run_in_netns(body_twice);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_canary_answer__fixed_vector),
		cmocka_unit_test(test_lz_canary_no_answer__network_not_local_failures),
		cmocka_unit_test(test_lz_canary_probe__closed_unanswered_is_an_answer),
		cmocka_unit_test(test_lz_canary__live_then_removed),
		cmocka_unit_test(test_lz_canary_remove__release_detached_after_unregistering),
		cmocka_unit_test(test_lz_canary_remove__a_refused_deletion_fails_and_keeps_the_link),
		cmocka_unit_test(test_lz_canary_prove_live__wrong_key_or_generation_refused),
		cmocka_unit_test(test_lz_canary_remove__changed_shape_not_deleted),
		cmocka_unit_test(test_lz_canary_create__existing_link_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
