/* Runs a program and captures what it writes, bounded (the qualification
 * suite's view of a real launch, issue 10 / OR-4). The child's standard
 * output and error share one pipe, or, for a terminal, one PTY whose slave
 * is its standard streams and controlling terminal (window 24x80). Its
 * standard input is /dev/null, or the slave. Output beyond max_output is
 * read and dropped, so the child never blocks on us; once the child has
 * exited, what is already buffered is taken and nothing more awaited (a
 * descendant that keeps the stream open cannot hold the caller). */
#ifndef LZ_CAPTURE_H
#define LZ_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

#define LZ_CAPTURE_MAX_OUTPUT (1u << 20)

struct lz_capture_request {
	const char *path;    /* absolute */
	char *const *argv;
	char *const *envp;   /* NULL: empty */
	bool terminal;
	int timeout_ms;      /* then SIGKILL through the pidfd */
	size_t max_output;   /* at most LZ_CAPTURE_MAX_OUTPUT */
};

struct lz_capture_result {
	int status;          /* exit status, 128+N for signal N; -1 when timed out */
	bool timed_out;
	bool truncated;
	char *output;        /* owned, NUL-terminated (may contain NUL bytes) */
	size_t len;
};

/* 0 with *ret filled (free with lz_capture_result_free), or -errno when the
 * program could not be started. */
int lz_capture_run(const struct lz_capture_request *req, struct lz_capture_result *ret, struct lz_err *err);
void lz_capture_result_free(struct lz_capture_result *r);

#endif
