/* Bounded output capture of a child; see capture.h. */
#include "session/capture.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "proc/spawn.h"
#include "util/cleanup.h"

void lz_capture_result_free(struct lz_capture_result *r)
{
	if (r == NULL)
		return;
	free(r->output);
	r->output = NULL;
	r->len = 0;
}

/* The PTY pair: master non-blocking, the slave opened through it. */
static int open_pty(int *ret_master, int *ret_slave, struct lz_err *err)
{
	_cleanup_close_ int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
	if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0)
		return lz_err_set(err, errno, "pseudo-terminal: %s", strerror(errno));
	struct winsize ws = { .ws_row = 24, .ws_col = 80 };
	if (ioctl(master, TIOCSWINSZ, &ws) < 0)
		return lz_err_set(err, errno, "pseudo-terminal size: %s", strerror(errno));
	int slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (slave < 0)
		return lz_err_set(err, errno, "pseudo-terminal peer: %s", strerror(errno));
	*ret_master = TAKE_FD(master);
	*ret_slave = slave;
	return 0;
}

/* Reads what is available; false at EOF or error (a PTY master reads EIO
 * once every slave is closed). */
static bool drain(int fd, struct lz_capture_result *r, size_t max)
{
	char buf[4096];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return true;
		if (n <= 0)
			return false;
		size_t keep = r->len < max ? max - r->len : 0;
		if (keep > (size_t)n)
			keep = (size_t)n;
		memcpy(r->output + r->len, buf, keep);
		r->len += keep;
		if (keep < (size_t)n)
			r->truncated = true;
	}
}

static int exit_status(const siginfo_t *info)
{
	return info->si_code == CLD_EXITED ? info->si_status : 128 + info->si_status;
}

int lz_capture_run(const struct lz_capture_request *req, struct lz_capture_result *ret, struct lz_err *err)
{
	_cleanup_close_ int rd = -EBADF, wr = -EBADF, pidfd = -EBADF;
	size_t max = req->max_output < LZ_CAPTURE_MAX_OUTPUT ? req->max_output : LZ_CAPTURE_MAX_OUTPUT;
	struct lz_capture_result r = { .status = -1 };
	int p[2], rc;
	if (req->terminal) {
		if ((rc = open_pty(&rd, &wr, err)) < 0)
			return rc;
	} else {
		if (pipe2(p, O_CLOEXEC) < 0)
			return lz_err_set(err, errno, "pipe: %s", strerror(errno));
		rd = p[0];
		wr = p[1];
		if (fcntl(rd, F_SETFL, O_NONBLOCK) < 0)
			return lz_err_set(err, errno, "pipe: %s", strerror(errno));
	}
	r.output = malloc(max + 1);
	if (r.output == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	struct lz_spawn spec = { .exe_fd = -1, .path = req->path, .argv = req->argv, .envp = req->envp,
				 .stdin_fd = req->terminal ? wr : -1, .stdout_fd = wr, .stderr_fd = wr,
				 .ctty = req->terminal };
	if ((rc = lz_spawn(&spec, &pidfd, NULL, err)) < 0) {
		free(r.output);
		return rc;
	}
	lz_close_fdp(&wr); /* the child holds the only writer now */
	int64_t deadline = lz_now_ms() + req->timeout_ms;
	bool open = true;
	for (;;) {
		struct pollfd pf[2] = { { .fd = pidfd, .events = POLLIN }, { .fd = open ? rd : -1, .events = POLLIN } };
		int n = poll(pf, 2, lz_remaining_ms(deadline));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r.timed_out = true; /* lz_reap below kills it */
			break;
		}
		if (pf[1].revents)
			open = drain(rd, &r, max);
		if (pf[0].revents)
			break;
	}
	siginfo_t info;
	rc = lz_reap(pidfd, r.timed_out ? 0 : -1, &info);
	if (open)
		(void)drain(rd, &r, max); /* what the child left buffered */
	if (rc == 0 && !r.timed_out)
		r.status = exit_status(&info);
	else
		r.timed_out = true;
	r.output[r.len] = '\0';
	*ret = r;
	return 0;
}
