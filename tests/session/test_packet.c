/* One SOCK_SEQPACKET datagram with its descriptors (core/session/packet.h)
 * over real socketpairs: descriptors arrive O_CLOEXEC and only on success;
 * every refusal (truncated datagram, more descriptors than taken, truncated
 * or foreign ancillary data, empty datagram with descriptors) closes each
 * descriptor the kernel installed; EOF, EAGAIN and argument checks. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cmocka.h>

#include "session/packet.h"

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the directory's own fd */
}

static void seqpacket_pair(int sv[2], int flags)
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | flags, 0, sv), 0);
}

/* Sends raw bytes with any number of fds, past lz_packet_send's limit. */
static void send_raw(int sock, const void *p, size_t len, const int *fds, size_t n_fds)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * 16)];
	} ctl;
	struct iovec iov = { .iov_base = (void *)p, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (n_fds) {
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.b;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
	}
	assert_int_equal(sendmsg(sock, &mh, MSG_NOSIGNAL), (ssize_t)len);
}

static void test_lz_packet_send__bytes_and_two_fds(void **state)
{
	(void)state;
	int sv[2], p[2];
	seqpacket_pair(sv, 0);
	assert_int_equal(pipe(p), 0); /* deliberately without O_CLOEXEC */
	int before = count_fds();
	assert_int_equal(lz_packet_send(sv[0], "hello", 5, p, 2, 0), 0);
	char buf[64];
	int fds[LZ_PACKET_MAX_FDS] = { -1, -1, -1, -1, -1, -1, -1, -1 };
	size_t n_fds = 99;
	assert_int_equal(lz_packet_recv(sv[1], buf, sizeof(buf), fds, 4, &n_fds, 0), 5);
	assert_memory_equal(buf, "hello", 5);
	assert_int_equal(n_fds, 2);
	assert_int_equal(fds[2], -1);
	assert_int_equal(count_fds(), before + 2);
	for (int i = 0; i < 2; i++)
		assert_true(fcntl(fds[i], F_GETFD) & FD_CLOEXEC);
	/* The received fds are the pipe's ends. */
	assert_int_equal(write(fds[1], "z", 1), 1);
	char c = 0;
	assert_int_equal(read(p[0], &c, 1), 1);
	assert_int_equal(c, 'z');
	close(fds[0]);
	close(fds[1]);
	/* Without fds, and back. */
	assert_int_equal(lz_packet_send(sv[1], "x", 1, NULL, 0, 1), 0);
	assert_int_equal(lz_packet_recv(sv[0], buf, sizeof(buf), NULL, 0, &n_fds, 1), 1);
	assert_int_equal(n_fds, 0);
	assert_int_equal(count_fds(), before);
	close(p[0]);
	close(p[1]);
	close(sv[0]);
	close(sv[1]);
}

static void test_lz_packet_recv__eof_is_epipe(void **state)
{
	(void)state;
	int sv[2];
	seqpacket_pair(sv, 0);
	close(sv[0]);
	char buf[64];
	size_t n = 7;
	assert_int_equal(lz_packet_recv(sv[1], buf, sizeof(buf), NULL, 0, &n, 0), -EPIPE);
	assert_int_equal(n, 7);
	/* Sending to a closed peer is -EPIPE, without SIGPIPE. */
	assert_int_equal(lz_packet_send(sv[1], "x", 1, NULL, 0, 0), -EPIPE);
	close(sv[1]);
}

static void test_lz_packet_recv__truncated_datagram_closes_fds(void **state)
{
	(void)state;
	int sv[2], p[2];
	seqpacket_pair(sv, 0);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	int before = count_fds();
	assert_int_equal(lz_packet_send(sv[0], "0123456789", 10, p, 2, 0), 0);
	char buf[9];
	int fds[4] = { -1, -1, -1, -1 };
	size_t n = 7;
	assert_int_equal(lz_packet_recv(sv[1], buf, sizeof(buf), fds, 4, &n, 0), -EBADMSG);
	assert_int_equal(n, 7);
	assert_int_equal(fds[0], -1);
	assert_int_equal(count_fds(), before);
	/* The rest of the datagram is gone: the next one reads whole. */
	assert_int_equal(lz_packet_send(sv[0], "ok", 2, NULL, 0, 0), 0);
	assert_int_equal(lz_packet_recv(sv[1], buf, sizeof(buf), fds, 4, &n, 0), 2);
	close(p[0]);
	close(p[1]);
	close(sv[0]);
	close(sv[1]);
}

static void test_lz_packet_recv__surplus_fds_closed(void **state)
{
	(void)state;
	int sv[2], p[2];
	seqpacket_pair(sv, 0);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	int before = count_fds();
	char buf[128];
	int fds[LZ_PACKET_MAX_FDS] = { -1, -1, -1, -1, -1, -1, -1, -1 };
	size_t n = 7;
	/* Three fds where the caller takes two. */
	const int three[3] = { p[0], p[1], p[0] };
	assert_int_equal(lz_packet_send(sv[0], "d", 1, three, 3, 0), 0);
	assert_int_equal(lz_packet_recv(sv[1], buf, sizeof(buf), fds, 2, &n, 0), -EBADMSG);
	assert_int_equal(count_fds(), before);
	/* Fds where the caller takes none. */
	assert_int_equal(lz_packet_send(sv[0], "d", 1, p, 1, 0), 0);
	assert_int_equal(lz_packet_recv(sv[1], buf, sizeof(buf), NULL, 0, &n, 0), -EBADMSG);
	assert_int_equal(count_fds(), before);
	/* More than LZ_PACKET_MAX_FDS, sent raw: the kernel truncates the
	 * control data (MSG_CTRUNC); whatever it installed is closed. */
	int many[12];
	for (int i = 0; i < 12; i++)
		many[i] = p[i % 2];
	send_raw(sv[0], "d", 1, many, 12);
	assert_int_equal(lz_packet_recv(sv[1], buf, sizeof(buf), fds, LZ_PACKET_MAX_FDS, &n, 0), -EBADMSG);
	assert_int_equal(count_fds(), before);
	/* An empty datagram with fds: refused, its fds closed. */
	send_raw(sv[0], "", 0, p, 2);
	assert_int_equal(lz_packet_recv(sv[1], buf, sizeof(buf), fds, 4, &n, 0), -EPIPE);
	assert_int_equal(count_fds(), before);
	assert_int_equal(n, 7);
	assert_int_equal(fds[0], -1);

	/* Argument checks. */
	assert_int_equal(lz_packet_recv(sv[1], buf, sizeof(buf), fds, LZ_PACKET_MAX_FDS + 1, &n, 0), -EINVAL);
	assert_int_equal(lz_packet_send(sv[0], "d", 1, many, LZ_PACKET_MAX_FDS + 1, 0), -EINVAL);
	const int negative[2] = { p[0], -1 };
	assert_int_equal(lz_packet_send(sv[0], "d", 1, negative, 2, 0), -EBADF);
	close(p[0]);
	close(p[1]);
	close(sv[0]);
	close(sv[1]);
}

static void test_lz_packet_recv__nothing_waiting_is_eagain(void **state)
{
	(void)state;
	int sv[2];
	seqpacket_pair(sv, SOCK_NONBLOCK);
	char buf[16];
	size_t n;
	assert_int_equal(lz_packet_recv(sv[1], buf, sizeof(buf), NULL, 0, &n, 0), -EAGAIN);
	close(sv[0]);
	close(sv[1]);
	/* dontwait on a blocking socket. */
	seqpacket_pair(sv, 0);
	assert_int_equal(lz_packet_recv(sv[1], buf, sizeof(buf), NULL, 0, &n, 1), -EAGAIN);
	/* A full socket with dontwait. */
	int small = 4096;
	assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	char fill[1000] = { 0 };
	int sent = 0, r;
	while ((r = lz_packet_send(sv[0], fill, sizeof(fill), NULL, 0, 1)) == 0)
		assert_true(++sent < 100000);
	assert_int_equal(r, -EAGAIN);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_packet_send__bytes_and_two_fds),
		cmocka_unit_test(test_lz_packet_recv__eof_is_epipe),
		cmocka_unit_test(test_lz_packet_recv__truncated_datagram_closes_fds),
		cmocka_unit_test(test_lz_packet_recv__surplus_fds_closed),
		cmocka_unit_test(test_lz_packet_recv__nothing_waiting_is_eagain),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
