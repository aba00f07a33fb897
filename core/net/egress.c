/* The egress proxy's process and link (egress.h). */
#include "net/egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/dnsquery.h"
#include "net/egressproxy.h"
#include "net/netpolicy.h"
#include "proc/caps.h"
#include "proc/confine.h"
#include "proc/lockslots.h"
#include "proc/spawn.h"
#include "util/cleanup.h"
#include "util/fdutil.h"
#include "util/testfault.h"

#define ANSWER_TAG "lazaret-egress-v1"
/* Distinct from the canary's indexes (canary.c) and from each other. */
#define EGRESS_IFINDEX 10
#define EGRESS_PEER_IFINDEX 11
#define RESOLV_CONF_MAX 65536

int lz_egress_answer(const uint8_t key[LZ_EGRESS_KEY_LEN], uint64_t generation, const uint8_t digest[32],
		     const uint8_t challenge[LZ_CANARY_CHALLENGE_LEN], uint8_t out[LZ_CANARY_CHALLENGE_LEN])
{
	uint8_t msg[sizeof(ANSWER_TAG) - 1 + 8 + 32 + LZ_CANARY_CHALLENGE_LEN], *p = msg;
	memcpy(p, ANSWER_TAG, sizeof(ANSWER_TAG) - 1);
	p += sizeof(ANSWER_TAG) - 1;
	for (int i = 7; i >= 0; i--)
		*p++ = (uint8_t)(generation >> (8 * i));
	memcpy(p, digest, 32);
	memcpy(p + 32, challenge, LZ_CANARY_CHALLENGE_LEN);
	unsigned len = 0;
	if (!HMAC(EVP_sha256(), key, LZ_EGRESS_KEY_LEN, msg, sizeof(msg), out, &len) || len != LZ_CANARY_CHALLENGE_LEN)
		return -EIO;
	return 0;
}

/* ---- the proxy process ---------------------------------------------------------- */

/* The host's nameservers: this process is in the host's network and
 * mount view of them, before anything of the sandbox exists. */
static int host_resolvers(uint32_t *out, size_t cap, size_t *ret_n, struct lz_err *err)
{
	_cleanup_close_ int fd = open("/etc/resolv.conf", O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *text = malloc(RESOLV_CONF_MAX);
	size_t len = 0;
	ssize_t n;
	if (fd < 0)
		return lz_err_set(err, errno, "read /etc/resolv.conf: %s (set network.resolvers)", strerror(errno));
	if (text == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	while (len < RESOLV_CONF_MAX && (n = read(fd, text + len, RESOLV_CONF_MAX - len)) > 0)
		len += (size_t)n;
	(void)lz_resolvconf_nameservers(text, len, out, cap, ret_n);
	if (*ret_n == 0)
		return lz_err_set(err, ENOENT, "/etc/resolv.conf names no IPv4 nameserver (set network.resolvers)");
	return 0;
}

static void child_fail(int ctl, const struct lz_err *err)
{
	char msg[1 + LZ_ERR_MSG_MAX];
	int n = snprintf(msg, sizeof(msg), "E%s", err->msg);
	(void)!send(ctl, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1, MSG_NOSIGNAL);
	_exit(1);
}

static int recv_listener(int ctl, int *ret)
{
	char byte;
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct iovec iov = { &byte, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	ssize_t n = recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC);
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	if (n != 1 || c == NULL || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
		return -EPROTO;
	memcpy(ret, CMSG_DATA(c), sizeof(int));
	return 0;
}

/* The first connection is the RS's probe (egress.h, step 3). */
static int answer_probe(int listener, const uint8_t *key, uint64_t generation, const uint8_t *digest)
{
	struct pollfd pf = { .fd = listener, .events = POLLIN };
	if (poll(&pf, 1, LZ_EGRESS_START_MS) != 1)
		return -ETIMEDOUT;
	_cleanup_close_ int c = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
	uint8_t challenge[LZ_CANARY_CHALLENGE_LEN], answer[LZ_CANARY_CHALLENGE_LEN];
	size_t got = 0;
	if (c < 0)
		return -errno;
	struct timeval tv = { .tv_sec = LZ_CANARY_PROBE_MS / 1000 };
	(void)setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	while (got < sizeof(challenge)) {
		ssize_t n = recv(c, challenge + got, sizeof(challenge) - got, 0);
		if (n <= 0)
			return -EPROTO;
		got += (size_t)n;
	}
	if (lz_egress_answer(key, generation, digest, challenge, answer) < 0)
		return -EIO;
	return send(c, answer, sizeof(answer), MSG_NOSIGNAL) == (ssize_t)sizeof(answer) ? 0 : -EPROTO;
}

static _Noreturn void proxy_main(const struct lz_egress_params *prm, int ctl, pid_t parent)
{
	struct lz_err err = { 0, "" };
	uint8_t key[LZ_EGRESS_KEY_LEN], digest[32];
	struct lz_egress_config cfg = { .dns_port = 53, .generation = prm->generation };
	struct lz_netpolicy *pol = malloc(sizeof(*pol));
	int listener = -1;
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	/* A fork: its memory is the coordinator's. With no capability left
	 * it would be open to ptrace and /proc/<pid>/mem from any process of
	 * the generation's user namespace that keeps a superset, the
	 * workspace router included (docs/threat-model.md). */
	(void)prctl(PR_SET_DUMPABLE, 0);
	(void)prctl(PR_SET_NAME, "lz-egress");
	memcpy(key, prm->key, sizeof(key));
	memcpy(digest, prm->policy_digest, sizeof(digest));
	/* Only what it needs, at 3..7: the socketpair, the policy, the log,
	 * the host's slots, the record (the last one only when there is one). */
	const int keep[5] = { ctl, prm->policy_fd, prm->log_fd, prm->slots_fd, prm->stats_fd };
	if (lz_fds_place(keep, prm->stats_fd >= 0 ? 5 : 4) < 0)
		_exit(1);
	/* its standard error too: no descriptor of hc.log itself */
	if (dup2(5, STDERR_FILENO) < 0)
		_exit(1);
	ctl = 3;
	cfg.log_fd = 5;
	cfg.slots_fd = 6;
	cfg.stats_fd = prm->stats_fd >= 0 ? 7 : -1;
	if (pol == NULL)
		child_fail(ctl, &(struct lz_err){ ENOMEM, "out of memory" });
	if (lz_netpolicy_from_memfd(4, digest, pol, &err) < 0)
		child_fail(ctl, &err);
	close(4);
	if (pol->names.n_allow == 0)
		child_fail(ctl, &(struct lz_err){ EINVAL, "the policy has no name policy" });
	cfg.policy = pol;
	if (pol->names.n_resolvers > 0) {
		memcpy(cfg.resolvers, pol->names.resolvers, pol->names.n_resolvers * sizeof(uint32_t));
		cfg.n_resolvers = pol->names.n_resolvers;
	} else if (host_resolvers(cfg.resolvers, LZ_NETPOLICY_MAX_RESOLVERS, &cfg.n_resolvers, &err) < 0) {
		child_fail(ctl, &err);
	}
	/* its connections sized from the host's TCP memory, read while it
	 * still may (lz_egress_limits_for) */
	uint64_t tcp_pressure;
	if (lz_egress_tcp_pressure(&tcp_pressure, &err) < 0)
		child_fail(ctl, &err);
	lz_egress_limits_for(lz_test_fault("egress-least-host") ? 0 : tcp_pressure, &cfg.limits);
	/* the slots file checked as lz_egress_serve will use it, before
	 * readiness rather than after */
	struct lz_lockslots slots_check;
	if (prm->slots_fd < 0 || lz_lockslots_init(&slots_check, cfg.slots_fd, cfg.limits.max_connections) < 0)
		child_fail(ctl, &(struct lz_err){ EINVAL, "no file of the host's connection slots to lock" });
	lz_lockslots_destroy(&slots_check);
	/* it needs no capability to open sockets in the host's namespace, and
	 * nothing of the developer's environment (a test build's fault switch
	 * is read from it later: testfault.h) */
#ifdef LZ_TEST_FAULTS
	static const char *const env_kept[] = { "LAZARET_TEST_FAULT", NULL };
#else
	static const char *const env_kept[] = { NULL };
#endif
	if (lz_env_limit(env_kept) < 0)
		child_fail(ctl, &(struct lz_err){ ENOMEM, "the egress proxy could not clear its environment" });
	if (lz_caps_limit(0) < 0)
		child_fail(ctl, &(struct lz_err){ EPERM, "the egress proxy could not drop its capabilities" });
	/* Nor the developer's files: past its policy and resolv.conf it opens
	 * none; its only new sockets are IPv4 ones (proc/confine.h). */
	if (lz_confine(&(struct lz_confine){ .inet = true }, &err) < 0)
		child_fail(ctl, &err);
	if (lz_test_fault("egress-opens-a-file")) { /* what a bug here could still open */
		int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
		dprintf(cfg.log_fd, "lazaret: test fault: the egress proxy opening /etc/passwd: %s\n",
			fd < 0 ? strerror(errno) : "opened");
		if (fd >= 0)
			close(fd);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		dprintf(cfg.log_fd, "lazaret: test fault: the egress proxy making a Unix socket: %s\n",
			fd < 0 ? strerror(errno) : "made");
		if (fd >= 0)
			close(fd);
		/* its log and standard error are the RS's pipe, not hc.log */
		int r = fchmod(cfg.log_fd, 0604) | fchmod(STDERR_FILENO, 0604);
		dprintf(cfg.log_fd, "lazaret: test fault: the egress proxy changing its log's mode: %s\n",
			r < 0 ? strerror(errno) : "changed");
	}
	if (recv_listener(ctl, &listener) < 0)
		_exit(1);
	if (send(ctl, "R", 1, MSG_NOSIGNAL) != 1)
		_exit(1);
	close(ctl);
	if (answer_probe(listener, key, prm->generation, digest) < 0)
		_exit(1);
	explicit_bzero(key, sizeof(key));
	(void)lz_egress_serve(listener, &cfg);
	_exit(1);
}

int lz_egress_start(const struct lz_egress_params *prm, struct lz_egress *e, struct lz_err *err)
{
	int sv[2];
	*e = LZ_EGRESS_INIT;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return lz_err_set(err, errno, "egress proxy socketpair: %s", strerror(errno));
	pid_t parent = getpid();
	pid_t pid = lz_clone_pidfd(0, &e->pidfd);
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return lz_err_set(err, -pid, "fork the egress proxy: %s", strerror(-pid));
	}
	if (pid == 0) {
		close(sv[0]);
		proxy_main(prm, sv[1], parent);
	}
	close(sv[1]);
	e->ctl_fd = sv[0];
	return 0;
}

/* ---- the link ------------------------------------------------------------------- */

static int make_listener(void *ctx, struct lz_err *err)
{
	int r = lz_peerlink_listen(LZ_NET_EGRESS_PROXY, LZ_NET_EGRESS_PORT, 128, ctx);
	return r < 0 ? lz_err_set(err, -r, "egress proxy listener: %s", strerror(-r)) : 0;
}

static int send_listener(int ctl, int fd)
{
	char byte = 'L';
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u = { 0 };
	struct iovec iov = { &byte, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(ctl, &mh, MSG_NOSIGNAL) == 1 ? 0 : -errno;
}

int lz_egress_attach(struct lz_egress *e, struct lz_err *err)
{
	_cleanup_close_ int listener = -EBADF;
	const struct lz_peerlink_spec spec = {
		.dev = LZ_EGRESS_DEV, .peer_dev = LZ_EGRESS_PEER_DEV,
		.ifindex = EGRESS_IFINDEX, .peer_ifindex = EGRESS_PEER_IFINDEX,
		.local_addr = LZ_NET_EGRESS_LOCAL,
		.peer_addrs = { LZ_NET_EGRESS_PROXY }, .n_peer_addrs = 1, .peer_plen = 29,
		.in_peer = make_listener, .ctx = &listener,
	};
	char msg[1 + LZ_ERR_MSG_MAX];
	int r = lz_peerlink_build(&spec, &e->peer_netns_fd, &e->link, err);
	if (r < 0)
		return r;
	/* The proxy refuses before it takes the listener when it cannot
	 * enforce (its policy, its resolvers): that message comes first. */
	struct pollfd pf = { .fd = e->ctl_fd, .events = POLLIN };
	bool early = poll(&pf, 1, 0) > 0;
	if (!early && (r = send_listener(e->ctl_fd, listener)) < 0 && r != -EPIPE && r != -ECONNRESET)
		return lz_err_set(err, -r, "hand the listener to the egress proxy: %s", strerror(-r));
	pf.revents = 0;
	if (poll(&pf, 1, LZ_EGRESS_START_MS) != 1)
		return lz_err_set(err, ETIMEDOUT, "the egress proxy did not start");
	ssize_t n = recv(e->ctl_fd, msg, sizeof(msg) - 1, 0);
	if (n == 1 && msg[0] == 'R')
		return 0;
	if (n > 1 && msg[0] == 'E') {
		msg[n] = '\0';
		return lz_err_set(err, EPERM, "the egress proxy refused to start: %s", msg + 1);
	}
	return lz_err_set(err, EPROTO, "the egress proxy ended during its start");
}

int lz_egress_prove_live(const uint8_t key[LZ_EGRESS_KEY_LEN], uint64_t generation, const uint8_t digest[32],
			 struct lz_err *err)
{
	uint8_t challenge[LZ_CANARY_CHALLENGE_LEN], got[LZ_CANARY_CHALLENGE_LEN], want[LZ_CANARY_CHALLENGE_LEN];
	if (getrandom(challenge, sizeof(challenge), 0) != (ssize_t)sizeof(challenge))
		return lz_err_set(err, EIO, "egress challenge: %s", strerror(errno));
	int r = lz_canary_probe_port(LZ_NET_EGRESS_PROXY, LZ_NET_EGRESS_PORT, LZ_EGRESS_DEV, challenge, got,
				     LZ_CANARY_PROBE_MS);
	if (r < 0)
		return lz_err_set(err, EPERM, "the egress proxy did not answer: %s", strerror(-r));
	if (lz_egress_answer(key, generation, digest, challenge, want) < 0)
		return lz_err_set(err, EIO, "egress answer: OpenSSL failed");
	if (CRYPTO_memcmp(got, want, sizeof(want)) != 0)
		return lz_err_set(err, EPERM, "the egress proxy gave a wrong answer");
	return 0;
}

void lz_egress_stop(struct lz_egress *e)
{
	lz_kill_reap(&e->pidfd);
	lz_close_fdp(&e->ctl_fd);
	lz_close_fdp(&e->peer_netns_fd);
}
