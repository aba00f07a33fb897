/* Child processes through pidfds (spec 3.3: no numeric-PID signal or wait).
 *
 * Children are created with clone3(CLONE_PIDFD), signalled only through the
 * pidfd and reaped with waitid(P_PIDFD). lz_spawn execs an argument vector
 * (never a shell) from a descriptor or an absolute path, with an explicit
 * environment (empty by default) and explicit standard streams; an exec
 * failure comes back as the child's errno. The Domain runtime's causal
 * acquisition broker builds on these primitives. Between clone and exec the
 * child calls only async-signal-safe functions. */
#ifndef LZ_SPAWN_H
#define LZ_SPAWN_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/deadline.h" /* lz_now_ms: spawn deadlines are on its clock */
#include "util/err.h"

/* fork() plus a pidfd: 0 in the child, the PID in the parent (with
 * *ret_pidfd set), -errno on failure. extra_flags: e.g. CLONE_NEWUSER. */
pid_t lz_clone_pidfd(uint64_t extra_flags, int *ret_pidfd);

/* Waits for the child behind pidfd for at most timeout_ms (-1: no limit),
 * then kills it through the pidfd. The child is always reaped: 0 and *ret
 * when it exited in time, -ETIMEDOUT when it had to be killed. */
int lz_reap(int pidfd, int timeout_ms, siginfo_t *ret);

/* Reads the child's output pipe fd into buf until end of file or a full
 * buffer (cap - 1 bytes, always NUL-terminated), but no later than
 * deadline (lz_now_ms; < 0: none): then the child behind pidfd is killed
 * and reading stops, so a child that neither writes nor exits cannot hold
 * the caller past its limit. Returns the bytes read; *ret_timed_out says
 * whether the deadline came first (the caller still reaps the child). */
size_t lz_read_child_output(int fd, int pidfd, int64_t deadline, char *buf, size_t cap,
			    bool *ret_timed_out);

/* Kills the child behind *pidfd (SIGKILL through the pidfd), reaps it and
 * closes the pidfd; nothing for a closed one. */
void lz_kill_reap(int *pidfd);

struct lz_spawn {
	const char *label;       /* names the program in messages; NULL: argv[0] */
	int exe_fd;              /* executable, O_PATH is fine; or -1 to use path */
	const char *path;        /* absolute; used when exe_fd < 0 */
	char *const *argv;       /* argv[0] is the program name */
	char *const *envp;       /* NULL: empty environment */
	int stdin_fd;            /* -1: /dev/null */
	int stdout_fd;           /* -1: /dev/null */
	int stderr_fd;           /* -1: /dev/null */
	bool detach;             /* own session, no parent-death signal (the HC) */
	bool own_group;          /* own process group, parent-death signal kept:
				  * outside the caller's, so no signal to the caller's
				  * group reaches it (escalation's keeper) */
	bool ctty;               /* own session, stdin becomes the controlling terminal */
	bool has_cwd;            /* start in cwd_fd (else the caller's directory) */
	int cwd_fd;
	uint64_t max_file_bytes; /* > 0: RLIMIT_FSIZE, soft and hard (a write past
				  * it fails EFBIG, or SIGXFSZ kills) */
	uint64_t max_data_bytes; /* > 0: RLIMIT_DATA (heap and private writable
				  * mappings: an allocation past it fails) */
	const int *keeper_fd;    /* lz_spawn_start only; non-NULL: the target runs
				  * as the child of this program (proc/keeper.h),
				  * which ends all it starts with it */
};

/* What a child of lz_spawn_start (or its keeper) writes on the status
 * pipe when it could not run the target for a reason of its own, with
 * the message to show; an exec failure writes the errno alone. */
struct lz_spawn_failure {
	int32_t err;
	char msg[LZ_ERR_MSG_MAX];
};

/* The parent-side preparation of a spec's standard streams and executable
 * (descriptors moved above 0..2 so the child's dup2 cannot clobber them),
 * for callers that create the child themselves (broker.c). */
struct lz_spawn_prepared {
	const struct lz_spawn *spec;
	int exe_fd;
	int null_fd;
	int fds[3];
	int owned[3];
	int keeper_fd;            /* with keeper_argv: exec'd instead (open_and_exec) */
	char *const *keeper_argv;
	int keeper_args_fd;       /* the target's argv, for the keeper */
};

int lz_spawn_prepare(const struct lz_spawn *spec, struct lz_spawn_prepared *ret, struct lz_err *err);
void lz_spawn_prepared_release(struct lz_spawn_prepared *p);

/* In a child: sets up the streams and execs; on failure writes errno to
 * status_fd (an O_CLOEXEC pipe) and exits 127. Async-signal-safe. */
_Noreturn void lz_spawn_exec_prepared(const struct lz_spawn_prepared *p, int status_fd);

/* Starts spec; *ret_pidfd owns the child. -errno of exec is reported here
 * (the exec-status pipe), so a returned child has run its target. */
int lz_spawn(const struct lz_spawn *spec, int *ret_pidfd, pid_t *ret_pid, struct lz_err *err);

/* Opens a child's executable in the child, for a lookup that may wait
 * (a mount that does not answer): its descriptor, or -errno with err. */
typedef int lz_spawn_open_fn(void *ctx, struct lz_err *err);

#define LZ_SPAWN_KEEP_MAX 8

/* lz_spawn of spec (its exe_fd and path unused) whose executable open_exe
 * opens in a forked child, and which the caller does not wait for: the
 * child's progress comes on *ret_status_fd (non-blocking, for poll; read
 * with lz_spawn_status). The child keeps only spec's descriptors and
 * keep[0..n_keep) (what open_exe uses) of the caller's. A child killed
 * while its lookup waits in the kernel (a FUSE request its daemon has
 * read) ends only when the lookup does: reap it when its pidfd says so. */
int lz_spawn_start(const struct lz_spawn *spec, lz_spawn_open_fn *open_exe, void *ctx, const int *keep, size_t n_keep,
		   int *ret_pidfd, pid_t *ret_pid, int *ret_status_fd, struct lz_err *err);

/* 1 while the child (its pidfd) of lz_spawn_start has neither exec'd nor
 * failed, 0 once it exec'd; -errno with err when it failed, *ret_opening
 * saying whether open_exe did (err is then its message), -ECHILD when it
 * ended before it exec'd without saying why (killed from outside). The
 * caller then reaps it (not before: the answer reads the child's /proc
 * entry). */
int lz_spawn_status(int status_fd, int pidfd, const char *label, bool *ret_opening, struct lz_err *err);

/* lz_spawn, then waits at most timeout_ms (-1: no limit) for the child,
 * killing and reaping it then (-ETIMEDOUT); non-zero exit is -EIO naming
 * label and the status. */
int lz_spawn_run(const struct lz_spawn *spec, const char *label, int timeout_ms,
		 struct lz_err *err);

/* The same, while check(ctx, err) is called every interval_ms the child
 * runs and once more if it fails: a check < 0 stops the child (killed
 * through its pidfd and reaped) and is the result. For a tool that writes
 * what it is served into a tree of Lazaret's (a download, an image
 * build), so that it stops before it fills the disk. */
struct lz_spawn_watch {
	int interval_ms;
	int (*check)(void *ctx, struct lz_err *err);
	void *ctx;
};
int lz_spawn_run_watched(const struct lz_spawn *spec, const char *label, int timeout_ms,
			 const struct lz_spawn_watch *watch, struct lz_err *err);

#endif
