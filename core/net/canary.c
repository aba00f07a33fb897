#include "net/canary.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/netpolicy.h"
#include "net/peerlink.h"
#include "proc/confine.h"
#include "proc/spawn.h"
#include "util/cleanup.h"
#include "util/fdutil.h"

#define ANSWER_TAG "lazaret-canary-v1"

int lz_canary_answer(const uint8_t key[LZ_CANARY_KEY_LEN], uint64_t generation, uint32_t endpoint,
		     const uint8_t challenge[LZ_CANARY_CHALLENGE_LEN], uint8_t out[LZ_CANARY_CHALLENGE_LEN])
{
	uint8_t msg[sizeof(ANSWER_TAG) - 1 + 8 + 4 + LZ_CANARY_CHALLENGE_LEN], *p = msg;
	memcpy(p, ANSWER_TAG, sizeof(ANSWER_TAG) - 1);
	p += sizeof(ANSWER_TAG) - 1;
	for (int i = 7; i >= 0; i--)
		*p++ = (uint8_t)(generation >> (8 * i));
	for (int i = 3; i >= 0; i--)
		*p++ = (uint8_t)(endpoint >> (8 * i));
	memcpy(p, challenge, LZ_CANARY_CHALLENGE_LEN);
	unsigned len = 0;
	if (!HMAC(EVP_sha256(), key, LZ_CANARY_KEY_LEN, msg, sizeof(msg), out, &len) ||
	    len != LZ_CANARY_CHALLENGE_LEN)
		return -EIO;
	return 0;
}

/* ---- the responder -------------------------------------------------------- */

static void serve_one(int listener, const uint8_t *key, uint64_t generation)
{
	int c = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0)
		return;
	struct sockaddr_in local;
	socklen_t len = sizeof(local);
	uint8_t challenge[LZ_CANARY_CHALLENGE_LEN], answer[LZ_CANARY_CHALLENGE_LEN];
	size_t got = 0;
	struct timeval tv = { .tv_sec = LZ_CANARY_PROBE_MS / 1000 };
	(void)setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	while (got < sizeof(challenge)) {
		ssize_t n = recv(c, challenge + got, sizeof(challenge) - got, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	/* The endpoint is the address the client reached, not a claim. */
	if (got == sizeof(challenge) && getsockname(c, (struct sockaddr *)&local, &len) == 0 &&
	    lz_canary_answer(key, generation, ntohl(local.sin_addr.s_addr), challenge, answer) == 0)
		(void)send(c, answer, sizeof(answer), MSG_NOSIGNAL);
	close(c);
}

static _Noreturn void responder(int l2, int l3, const uint8_t *key, uint64_t generation)
{
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* A fork holding the key: not open to ptrace from the generation's
	 * user namespace (see egress.c). */
	(void)prctl(PR_SET_DUMPABLE, 0);
	(void)prctl(PR_SET_NAME, "lz-canary");
	/* Only the two listeners: no descriptor of the RS survives here (its
	 * standard error, hc.log, neither: it logs nothing). */
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null < 0 || dup2(null, STDERR_FILENO) < 0 || lz_fds_place((const int[]){ l2, l3 }, 2) < 0)
		_exit(1);
	/* It answers on them and needs nothing else (proc/confine.h). */
	struct lz_err err;
	if (lz_confine(&(struct lz_confine){ .read_anywhere = false }, &err) < 0)
		_exit(1);
	for (;;) {
		struct pollfd p[2] = { { .fd = 3, .events = POLLIN }, { .fd = 4, .events = POLLIN } };
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			_exit(1);
		for (int i = 0; i < 2; i++)
			if (p[i].revents & POLLIN)
				serve_one(p[i].fd, key, generation);
	}
}

/* ---- create, prove, remove ------------------------------------------------ */

/* Both ends' interface indexes, each in a fresh namespace (lo and at most
 * tap0 there): distinct, so the carriers come on at once (peerlink.h). */
#define CANARY_IFINDEX 8
#define CANARY_PEER_IFINDEX 9

struct listeners {
	int l2, l3;
};

/* In the peer namespace: a socket stays in the namespace it was created in. */
static int make_listeners(void *ctx, struct lz_err *err)
{
	struct listeners *l = ctx;
	int r;
	if ((r = lz_peerlink_listen(LZ_NET_CANARY_ALLOWED, LZ_CANARY_PORT, 8, &l->l2)) < 0 ||
	    (r = lz_peerlink_listen(LZ_NET_CANARY_DENIED, LZ_CANARY_PORT, 8, &l->l3)) < 0)
		return lz_err_set(err, -r, "canary listener: %s", strerror(-r));
	return 0;
}

static int build(const uint8_t *key, uint64_t generation, struct lz_canary *c, struct lz_err *err)
{
	struct listeners l = { -EBADF, -EBADF };
	const struct lz_peerlink_spec spec = {
		.dev = LZ_CANARY_DEV, .peer_dev = LZ_CANARY_PEER_DEV,
		.ifindex = CANARY_IFINDEX, .peer_ifindex = CANARY_PEER_IFINDEX,
		/* A /32: no connected route to the canary network (header). */
		.local_addr = LZ_NET_ENFORCEMENT,
		.peer_addrs = { LZ_NET_CANARY_ALLOWED, LZ_NET_CANARY_DENIED }, .n_peer_addrs = 2,
		.peer_plen = LZ_NET_CANARY.len,
		.in_peer = make_listeners, .ctx = &l,
	};
	int r = lz_peerlink_build(&spec, &c->peer_netns_fd, &c->link, err);
	if (r >= 0) {
		pid_t pid = lz_clone_pidfd(0, &c->responder_pidfd);
		if (pid < 0)
			r = lz_err_set(err, -pid, "fork the canary responder: %s", strerror(-pid));
		else if (pid == 0)
			responder(l.l2, l.l3, key, generation);
	}
	lz_close_fdp(&l.l2);
	lz_close_fdp(&l.l3);
	return r;
}

int lz_canary_create(const uint8_t key[LZ_CANARY_KEY_LEN], uint64_t generation, struct lz_canary *c,
		     struct lz_err *err)
{
	*c = LZ_CANARY_INIT;
	int r = build(key, generation, c, err);
	if (r < 0) {
		if (c->link.ifindex > 0) {
			struct lz_err ignored;
			(void)lz_canary_remove(c, NULL, &ignored);
		}
		lz_canary_abandon(c);
	}
	return r;
}

int lz_canary_prove_live(const uint8_t key[LZ_CANARY_KEY_LEN], uint64_t generation, struct lz_err *err)
{
	static const uint32_t endpoints[] = { LZ_NET_CANARY_ALLOWED, LZ_NET_CANARY_DENIED };
	for (size_t i = 0; i < LZ_ARRAY_SIZE(endpoints); i++) {
		uint8_t challenge[LZ_CANARY_CHALLENGE_LEN], got[LZ_CANARY_CHALLENGE_LEN], want[LZ_CANARY_CHALLENGE_LEN];
		char text[INET_ADDRSTRLEN];
		struct in_addr in = { htonl(endpoints[i]) };
		inet_ntop(AF_INET, &in, text, sizeof(text));
		if (getrandom(challenge, sizeof(challenge), 0) != (ssize_t)sizeof(challenge))
			return lz_err_set(err, EIO, "canary challenge: %s", strerror(errno));
		int r = lz_canary_probe(endpoints[i], LZ_CANARY_DEV, challenge, got, LZ_CANARY_PROBE_MS);
		if (r < 0)
			return lz_err_set(err, EPERM, "canary endpoint %s did not answer: %s", text, strerror(-r));
		if (lz_canary_answer(key, generation, endpoints[i], challenge, want) < 0)
			return lz_err_set(err, EIO, "canary answer: OpenSSL failed");
		if (CRYPTO_memcmp(got, want, sizeof(want)) != 0)
			return lz_err_set(err, EPERM, "canary endpoint %s gave a wrong answer", text);
	}
	return 0;
}

int lz_canary_remove(struct lz_canary *c, int *ret_release, struct lz_err *err)
{
	int r = lz_peerlink_remove(&c->link, ret_release, err);
	lz_canary_abandon(c);
	return r;
}

void lz_canary_abandon(struct lz_canary *c)
{
	lz_kill_reap(&c->responder_pidfd);
	lz_close_fdp(&c->peer_netns_fd);
}
