/* Relaying the log another process writes into our own (the helpers' log
 * pipe into the Runtime Supervisor's standard error, hc.log), line by
 * line. The writer may be subverted by the sandbox (threat-model.md: the
 * workspace router, the egress proxy), so what it writes is bounded and
 * made harmless here, whatever its own limits promised:
 *   - each line goes after a prefix of ours, so none passes for our own;
 *     a line of printable ASCII as it is (the helpers escape what they
 *     quote), any other escaped (escape.h): no byte of it drives a
 *     terminal, and one written line is one output line;
 *   - at most budget bytes are written (prefixes and escapes counted);
 *     the rest is read and counted, and finish says how much;
 *   - a line longer than LZ_LOGRELAY_LINE_MAX goes in pieces of it. */
#ifndef LZ_UTIL_LOGRELAY_H
#define LZ_UTIL_LOGRELAY_H

#include <stddef.h>
#include <sys/types.h>

#define LZ_LOGRELAY_LINE_MAX 4096

struct lz_logrelay {
	int out_fd;
	const char *prefix; /* "helper| ": before every line relayed */
	const char *who;    /* "the helpers": who logged what was not kept */
	size_t budget, kept, dropped;
	size_t part_len;
	char part[LZ_LOGRELAY_LINE_MAX]; /* the line begun, not yet ended */
};

void lz_logrelay_init(struct lz_logrelay *r, int out_fd, size_t budget, const char *prefix, const char *who);

/* Reads in_fd (non-blocking) until it has nothing more, ends, or max bytes
 * were read, relaying every whole line. Returns the bytes read (0: none
 * waiting, or the end), or -errno. */
ssize_t lz_logrelay_pump(struct lz_logrelay *r, int in_fd, size_t max);

/* The writers are gone: the line begun goes out, then how many bytes were
 * not kept, if any. */
void lz_logrelay_finish(struct lz_logrelay *r);

#endif
