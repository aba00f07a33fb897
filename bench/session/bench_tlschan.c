/* bench_tlschan: what the control socket's TLS (core/session/tlschan.h)
 * costs a keystroke, against the bare datagram (core/session/packet.h)
 * in the same run: a one-byte record bounced between two processes over a
 * SOCK_SEQPACKET socketpair, as the CLI and the coordinator do for each
 * Input and Output, and the handshake a CLI makes twice per launch
 * (enrollment, then mTLS). Prints medians; asserts nothing.
 *
 *   bench_tlschan [ROUNDS]   (default 20000 round trips per side) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crypto/sigkey.h"
#include "crypto/x509ca.h"
#include "session/packet.h"
#include "session/tlschan.h"

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void die(const char *what)
{
	fprintf(stderr, "bench_tlschan: %s\n", what);
	exit(1);
}

static uint8_t buf[LZ_TLSCHAN_RECORD_MAX];

struct creds {
	uint8_t *ca, *hc, *cli;
	size_t ca_len, hc_len, cli_len;
	struct lz_sigkey *hc_key, *cli_key;
};

static void make_creds(struct creds *c)
{
	struct lz_sigkey *ca_key = NULL;
	struct lz_x509ca *ca = NULL;
	struct lz_err err = { 0, "" };
	uint8_t domain[32] = { 1 }, id[LZ_X509_CLIENT_ID_LEN] = { 2 }, *csr = NULL;
	size_t csr_len = 0;
	time_t now = time(NULL);
	if (lz_sigkey_generate(&ca_key) < 0 || lz_sigkey_generate(&c->hc_key) < 0 ||
	    lz_sigkey_generate(&c->cli_key) < 0 || lz_x509ca_new(ca_key, domain, 1, now, &ca, &err) < 0 ||
	    lz_x509ca_cert(ca, &c->ca, &c->ca_len, &err) < 0 ||
	    lz_x509ca_issue_server(ca, c->hc_key, now, &c->hc, &c->hc_len, &err) < 0 ||
	    lz_x509_csr_new(c->cli_key, &csr, &csr_len, &err) < 0 ||
	    lz_x509ca_issue_client(ca, csr, csr_len, id, now, &c->cli, &c->cli_len, &err) < 0)
		die(err.msg);
	free(csr);
	lz_x509ca_free(ca);
	lz_sigkey_free(ca_key);
}

static struct lz_tlschan *channel(int fd, bool server, const struct creds *c, double *handshake_us)
{
	struct lz_err err = { 0, "" };
	struct lz_tlschan_cred cred = server ? (struct lz_tlschan_cred){ c->ca, c->ca_len, c->hc, c->hc_len, c->hc_key }
					     : (struct lz_tlschan_cred){ c->ca, c->ca_len, c->cli, c->cli_len, c->cli_key };
	struct lz_tlschan *ch = NULL;
	double t0 = now_us();
	if (lz_tlschan_new(fd, server, &cred, &ch, &err) < 0 || lz_tlschan_handshake(ch, 10000, &err) < 0)
		die(err.msg);
	if (handshake_us)
		*handshake_us = now_us() - t0;
	return ch;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Median of rounds round trips, in microseconds; the peer echoes. */
static double bounce(int rounds, bool tls, const struct creds *c, double *handshake_us)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		die("socketpair");
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		struct lz_tlschan *ch = tls ? channel(sv[1], true, c, NULL) : NULL;
		size_t n_fds = 0;
		for (;;) {
			ssize_t n = tls ? lz_tlschan_recv(ch, buf, sizeof(buf), NULL, 0, &n_fds, NULL)
					: lz_packet_recv(sv[1], buf, sizeof(buf), NULL, 0, &n_fds, 0);
			if (n <= 0)
				_exit(0);
			if ((tls ? lz_tlschan_send(ch, buf, (size_t)n, NULL, 0, 10000, NULL)
				 : lz_packet_send(sv[1], buf, (size_t)n, NULL, 0, 0)) < 0)
				_exit(1);
		}
	}
	close(sv[1]);
	struct lz_tlschan *ch = tls ? channel(sv[0], false, c, handshake_us) : NULL;
	double *t = malloc(sizeof(double) * (size_t)rounds);
	size_t n_fds = 0;
	for (int i = 0; i < rounds; i++) {
		double t0 = now_us();
		if ((tls ? lz_tlschan_send(ch, "k", 1, NULL, 0, 10000, NULL) : lz_packet_send(sv[0], "k", 1, NULL, 0, 0)) <
			    0 ||
		    (tls ? lz_tlschan_recv(ch, buf, sizeof(buf), NULL, 0, &n_fds, NULL)
			 : lz_packet_recv(sv[0], buf, sizeof(buf), NULL, 0, &n_fds, 0)) != 1)
			die("round trip");
		t[i] = now_us() - t0;
	}
	lz_tlschan_free(ch);
	close(sv[0]);
	waitpid(pid, NULL, 0);
	qsort(t, (size_t)rounds, sizeof(double), cmp);
	double median = t[rounds / 2];
	free(t);
	return median;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 20000;
	if (rounds < 1)
		die("usage: bench_tlschan [ROUNDS]");
	struct creds c;
	make_creds(&c);
	/* Interleaved: five blocks each way, the medians of the blocks'. */
	double plain[5], tls[5], hs[5];
	for (int i = 0; i < 5; i++) {
		plain[i] = bounce(rounds / 5 + 1, false, &c, NULL);
		tls[i] = bounce(rounds / 5 + 1, true, &c, &hs[i]);
	}
	qsort(plain, 5, sizeof(double), cmp);
	qsort(tls, 5, sizeof(double), cmp);
	qsort(hs, 5, sizeof(double), cmp);
	printf("one-byte record round trip between two processes, median of %d\n", rounds);
	printf("  bare datagram: %.1f us\n  inside TLS:    %.1f us  (+%.1f us, ratio %.2f)\n", plain[2], tls[2],
	       tls[2] - plain[2], tls[2] / plain[2]);
	printf("mutual TLS 1.3 handshake (client's view, both sides in this run): median %.0f us\n", hs[2]);
	return 0;
}
