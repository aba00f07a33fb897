/* lazaret-router: the workspace router's program (router/routerproc.h),
 * embedded in lazaret and exec'd by the Runtime Supervisor. A failure
 * goes back through the report pipe the RS placed, as a broker target's
 * does (proc/broker.h), and to stderr when that is not there. */
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "router/routerproc.h"

static int fail(int r, struct lz_err *err)
{
	struct stat st;
	if (err->msg[0] == '\0')
		snprintf(err->msg, sizeof(err->msg), "%s", strerror(-r));
	size_t len = strnlen(err->msg, sizeof(err->msg));
	if (fstat(LZ_ROUTERPROC_FD_REPORT, &st) == 0 && S_ISFIFO(st.st_mode))
		(void)!write(LZ_ROUTERPROC_FD_REPORT, err->msg, len);
	else
		(void)!write(STDERR_FILENO, err->msg, len), (void)!write(STDERR_FILENO, "\n", 1);
	return 1;
}

int main(int argc, char **argv)
{
	/* the name ps and the tests know it by; exec from a memory file
	 * would name it after the descriptor */
	(void)prctl(PR_SET_NAME, "lazaret-router");
	struct lz_routerproc_args args;
	struct lz_err err = { 0, "" };
	int r;
	if ((r = lz_routerproc_parse(argc, argv, &args, &err)) < 0 || (r = lz_routerproc_run(&args, &err)) < 0)
		return fail(r, &err);
	return 0;
}
