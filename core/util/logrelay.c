/* Relaying another process's log line by line (logrelay.h). */
#include "util/logrelay.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util/escape.h"

void lz_logrelay_init(struct lz_logrelay *r, int out_fd, size_t budget, const char *prefix, const char *who)
{
	*r = (struct lz_logrelay){ .out_fd = out_fd, .prefix = prefix, .who = who, .budget = budget };
}

/* One line out: after the prefix, as it is when it is printable ASCII,
 * else escaped; charged by what is written. */
static void relay_line(struct lz_logrelay *r, const char *s, size_t n)
{
	char esc[LZ_ESCAPE_MAX(LZ_LOGRELAY_LINE_MAX) + 1];
	bool plain = true;
	for (size_t i = 0; plain && i < n; i++)
		plain = s[i] >= 0x20 && s[i] < 0x7f;
	const char *out = s;
	size_t len = n;
	if (!plain) {
		len = lz_escape(s, n, esc, sizeof(esc));
		out = esc;
	}
	size_t cost = strlen(r->prefix) + len + 1;
	if (cost > r->budget - r->kept) {
		r->dropped += cost;
		return;
	}
	r->kept += cost;
	struct iovec v[3] = { { (void *)r->prefix, strlen(r->prefix) }, { (void *)out, len }, { "\n", 1 } };
	(void)!writev(r->out_fd, v, 3); /* one line, one write */
}

ssize_t lz_logrelay_pump(struct lz_logrelay *r, int in_fd, size_t max)
{
	char buf[sizeof(r->part) + 4096];
	size_t total = 0;
	while (total < max) {
		memcpy(buf, r->part, r->part_len);
		ssize_t n = read(in_fd, buf + r->part_len, sizeof(buf) - r->part_len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN)
			return total > 0 ? (ssize_t)total : -errno;
		if (n <= 0)
			break;
		total += (size_t)n;
		size_t len = r->part_len + (size_t)n, at = 0;
		for (const char *nl; (nl = memchr(buf + at, '\n', len - at)) != NULL; at = (size_t)(nl - buf) + 1)
			relay_line(r, buf + at, (size_t)(nl - (buf + at)));
		for (; len - at >= sizeof(r->part); at += sizeof(r->part))
			relay_line(r, buf + at, sizeof(r->part));
		r->part_len = len - at;
		memcpy(r->part, buf + at, r->part_len);
	}
	return (ssize_t)total;
}

void lz_logrelay_finish(struct lz_logrelay *r)
{
	if (r->part_len > 0)
		relay_line(r, r->part, r->part_len);
	r->part_len = 0;
	if (r->dropped > 0)
		dprintf(r->out_fd, "%zu more bytes of what %s logged were not kept\n", r->dropped, r->who);
	r->dropped = 0;
}
