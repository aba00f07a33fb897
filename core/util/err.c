#include "util/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int lz_err_set(struct lz_err *err, int code, const char *fmt, ...)
{
	if (code < 0)
		code = -code;
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
		err->code = code;
	}
	return -code;
}

int lz_err_prefix(struct lz_err *err, int ret, const char *fmt, ...)
{
	if (err) {
		char prefix[LZ_ERR_MSG_MAX];
		char old[LZ_ERR_MSG_MAX];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(prefix, sizeof(prefix), fmt, ap);
		va_end(ap);
		/* Truncation is acceptable: the message is a diagnostic. */
		memcpy(old, err->msg, sizeof(old));
		size_t n = strnlen(prefix, sizeof(prefix) - 1);
		size_t m = strnlen(old, sizeof(old) - 1);
		if (m > sizeof(err->msg) - 1 - n)
			m = sizeof(err->msg) - 1 - n;
		memcpy(err->msg, prefix, n);
		memcpy(err->msg + n, old, m);
		err->msg[n + m] = '\0';
		if (err->code == 0)
			err->code = ret < 0 ? -ret : ret;
	}
	return ret;
}

void lz_err_clear(struct lz_err *err)
{
	if (err) {
		err->code = 0;
		err->msg[0] = '\0';
	}
}

bool lz_err_for_now(int ret)
{
	return ret == -EMFILE || ret == -ENFILE || ret == -ENOMEM || ret == -ENOBUFS || ret == -EAGAIN ||
	       ret == -EINTR;
}
