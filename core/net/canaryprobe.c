#include "net/canaryprobe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/deadline.h"

static int exchange(int s, uint32_t addr, uint16_t port, const uint8_t *challenge, uint8_t *answer,
		    int64_t deadline)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(addr) };
	/* A peer that accepts and closes unanswered is an answer (-EPROTO),
	 * never lz_canary_no_answer. */
	int r = lz_connect_by(s, (struct sockaddr *)&sa, sizeof(sa), deadline);
	if (r == 0)
		r = lz_stream_by(s, true, (void *)challenge, LZ_CANARY_CHALLENGE_LEN, deadline);
	if (r == 0)
		r = lz_stream_by(s, false, answer, LZ_CANARY_CHALLENGE_LEN, deadline);
	return r;
}

bool lz_canary_no_answer(int r)
{
	/* Named, not excluded: a failure of this process to make the probe
	 * (no descriptor, memory, buffer or free local port) is no answer to
	 * it. A refusal by a local filter is the network's too. */
	return r == -ETIMEDOUT || r == -ECONNREFUSED || r == -ENETUNREACH || r == -EHOSTUNREACH ||
	       r == -ECONNRESET || r == -EACCES || r == -EPERM;
}

int lz_canary_probe(uint32_t addr, const char *bind_dev, const uint8_t challenge[LZ_CANARY_CHALLENGE_LEN],
		    uint8_t answer[LZ_CANARY_CHALLENGE_LEN], int timeout_ms)
{
	return lz_canary_probe_port(addr, LZ_CANARY_PORT, bind_dev, challenge, answer, timeout_ms);
}

int lz_canary_probe_port(uint32_t addr, uint16_t port, const char *bind_dev,
			 const uint8_t challenge[LZ_CANARY_CHALLENGE_LEN], uint8_t answer[LZ_CANARY_CHALLENGE_LEN],
			 int timeout_ms)
{
	int64_t deadline = lz_now_ms() + timeout_ms;
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	int r = 0;
	if (bind_dev && setsockopt(s, SOL_SOCKET, SO_BINDTODEVICE, bind_dev, (socklen_t)strlen(bind_dev)) < 0)
		r = -errno;
	uint8_t got[LZ_CANARY_CHALLENGE_LEN];
	if (r == 0)
		r = exchange(s, addr, port, challenge, got, deadline);
	/* An abortive close (RST): no orphaned socket lingers in FIN-WAIT or
	 * TIME-WAIT holding the enforcement namespace, whose end bootstrap
	 * recovery waits for (spec 3.6). The answer is already read. */
	struct linger abort_on_close = { .l_onoff = 1, .l_linger = 0 };
	(void)setsockopt(s, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof(abort_on_close));
	close(s);
	if (r == 0)
		memcpy(answer, got, sizeof(got));
	return r;
}
