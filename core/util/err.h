/* Caller-owned error context.
 *
 * Fallible functions return >= 0 or -errno; when the caller passes a
 * struct lz_err, the callee also writes a one-line message naming the
 * operation and object. Fixed buffer: no allocation on the failure path,
 * safe to use between fork and exec. */
#ifndef LZ_UTIL_ERR_H
#define LZ_UTIL_ERR_H

#include <stdbool.h>
#include <stddef.h>

#define LZ_ERR_MSG_MAX 512

struct lz_err {
	int code;                 /* positive errno, or 0 when unset */
	char msg[LZ_ERR_MSG_MAX]; /* NUL-terminated, never contains secrets */
};

/* Records msg (printf format) and code in err (when non-NULL) and returns
 * -code, so call sites read `return lz_err_set(err, EINVAL, "...")`. */
int lz_err_set(struct lz_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prepends context ("loading config: ") to an already-set message. */
int lz_err_prefix(struct lz_err *err, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

void lz_err_clear(struct lz_err *err);

/* Whether ret (-errno) is this process short of something for now (out of
 * descriptors or memory, an interrupted or would-block call) rather than
 * an answer about what it asked for: worth asking again later. */
bool lz_err_for_now(int ret);

#endif
