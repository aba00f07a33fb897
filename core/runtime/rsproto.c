/* The HC <-> RS control records; see rsproto.h. */
#include "runtime/rsproto.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

static const char *const names[] = {
	[LZ_RS_MOUNTS] = "mounts",   [LZ_RS_STAGED] = "staged",		[LZ_RS_READY] = "ready",
	[LZ_RS_STOPPED] = "stopped", [LZ_RS_FAILED] = "failed",		[LZ_RS_HELPER_STAGED] = "helper-staged",
	[LZ_HC_ACK] = "ack",	     [LZ_HC_STOP] = "stop",
};

const char *lz_rs_msg_name(uint32_t type)
{
	return type < sizeof(names) / sizeof(names[0]) ? names[type] : NULL;
}

void lz_rs_msg_init(struct lz_rs_msg *m, uint32_t type, uint64_t generation, const char *domain_id)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->generation = generation;
	strncpy(m->domain_id, domain_id, sizeof(m->domain_id) - 1);
}

int lz_rs_send(int fd, const struct lz_rs_msg *m)
{
	ssize_t n = send(fd, m, sizeof(*m), MSG_NOSIGNAL);
	if (n < 0)
		return -errno;
	return n == (ssize_t)sizeof(*m) ? 0 : -EIO;
}

static bool hex64(const char *s)
{
	return strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64;
}

int lz_rs_recv(int fd, struct lz_rs_msg *m, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int r;
	while ((r = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	if (r < 0)
		return -errno;
	if (r == 0)
		return -ETIMEDOUT;
	/* Received aside: a refused record leaves *m as it was. */
	struct lz_rs_msg in;
	ssize_t n = recv(fd, &in, sizeof(in), MSG_TRUNC);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -EPIPE;
	if (n != (ssize_t)sizeof(in))
		return -EBADMSG;
	in.domain_id[sizeof(in.domain_id) - 1] = '\0';
	in.text[sizeof(in.text) - 1] = '\0';
	if (lz_rs_msg_name(in.type) == NULL || in.n_mounts > LZ_RS_MAX_ANCHORS + 1 ||
	    in.attest_len > sizeof(in.attest) || !hex64(in.domain_id))
		return -EBADMSG;
	*m = in;
	return 0;
}

bool lz_rs_msg_for(const struct lz_rs_msg *m, uint64_t generation, const char *domain_id)
{
	return m->generation == generation && strcmp(m->domain_id, domain_id) == 0;
}

bool lz_rs_ack_echoes(const struct lz_rs_msg *ack, const struct lz_rs_msg *staged)
{
	return ack->type == LZ_HC_ACK && lz_rs_msg_for(ack, staged->generation, staged->domain_id) &&
	       lz_pidref_equal(&ack->id, &staged->id);
}
