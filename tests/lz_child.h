/* Checks inside a forked test child (one that entered namespaces cmocka's
 * parent must not): a failed check writes "file:line: message" to
 * report_fd, the pipe to the parent, and exits 1; the parent's
 * await_child turns that into the test's failure. Header-only; include
 * after cmocka.h. */
#ifndef LZ_CHILD_H
#define LZ_CHILD_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int report_fd = -1; /* in the child: the pipe to the parent */

static inline _Noreturn __attribute__((format(printf, 3, 4))) void child_fail(const char *file, int line,
									     const char *fmt, ...)
{
	char msg[1024];
	int n = snprintf(msg, sizeof(msg), "%s:%d: ", file, line);
	if (n < 0 || (size_t)n >= sizeof(msg))
		n = 0;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
	va_end(ap);
	(void)!write(report_fd, msg, strlen(msg));
	_exit(1);
}

#define CHECK(cond, ...)                                                                     \
	do {                                                                                 \
		if (!(cond))                                                                 \
			child_fail(__FILE__, __LINE__, "CHECK(" #cond ") failed: " __VA_ARGS__); \
	} while (0)

/* The parent's side: reads what the child pid reported on rd (closed
 * here), reaps it, and fails with its message or its exit status. */
static inline void await_child(pid_t pid, int rd)
{
	char msg[1024];
	size_t n = 0;
	ssize_t r;
	while (n < sizeof(msg) - 1 &&
	       ((r = read(rd, msg + n, sizeof(msg) - 1 - n)) > 0 || (r < 0 && errno == EINTR)))
		if (r > 0)
			n += (size_t)r;
	msg[n] = '\0';
	close(rd);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (n > 0)
		fail_msg("%s", msg);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* Runs body(arg) in a forked child whose CHECKs report here, and fails
 * the test with what it reported. */
static inline void run_in_child(void (*body)(void *arg), void *arg)
{
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		report_fd = p[1];
		body(arg);
		_exit(0);
	}
	close(p[1]);
	await_child(pid, p[0]);
}

#endif
