#include "proc/stopreq.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

static int stop_fd = -1;
static int stop_signal;

static void stop_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGHUP);
}

int lz_stopreq_catch(struct lz_err *err)
{
	if (stop_fd >= 0)
		return 0;
	sigset_t set;
	stop_signals(&set);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return lz_err_set(err, errno, "blocking the stop signals: %s", strerror(errno));
	int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (fd < 0) {
		int e = errno;
		(void)sigprocmask(SIG_UNBLOCK, &set, NULL);
		return lz_err_set(err, e, "signalfd for the stop signals: %s", strerror(e));
	}
	stop_fd = fd;
	return 0;
}

int lz_stopreq_fd(void)
{
	return stop_fd;
}

int lz_stopreq_signal(void)
{
	struct signalfd_siginfo info;
	while (stop_fd >= 0 && read(stop_fd, &info, sizeof(info)) == (ssize_t)sizeof(info))
		if (stop_signal == 0)
			stop_signal = (int)info.ssi_signo;
	return stop_signal;
}

void lz_stopreq_unblock_all(void)
{
	sigset_t none;
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
}
