/* The workspace router's own process (spec 3.5, SR-13): the program
 * lazaret-router (bindings/router_proc.c), embedded in lazaret and exec'd
 * by the Runtime Supervisor from a sealed memory file
 * (runtime/rsrouter.c). It reads what the sandbox writes (FUSE requests,
 * the index through libgit2), so it starts from a fresh image: nothing of
 * the coordinator's memory (the generation's keys, the control socket's
 * CA) is in it, and its environment is HOME and XDG_CONFIG_HOME only.
 *
 * Its descriptors come by number (util/fdutil.h lz_fds_place), its
 * options in argv; lz_routerproc_argv writes what lz_routerproc_parse
 * reads, so the two sides cannot drift. */
#ifndef LZ_ROUTER_ROUTERPROC_H
#define LZ_ROUTER_ROUTERPROC_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

enum {
	LZ_ROUTERPROC_FD_FUSE = 3,     /* /dev/fuse, the connection the RS mounted */
	LZ_ROUTERPROC_FD_HOST,         /* the canonical workspace (a directory) */
	LZ_ROUTERPROC_FD_ISOLATED,     /* the Ignored Workspace State (a directory) */
	LZ_ROUTERPROC_FD_READY,        /* pipe: one byte once serving starts */
	LZ_ROUTERPROC_FD_REPORT,       /* pipe: the failure message, if any */
	LZ_ROUTERPROC_FD_WATCH_SLOTS,  /* the Storage Root's watch.slots (router/ignorewatch.h) */
};
#define LZ_ROUTERPROC_NFDS 6

struct lz_routerproc_args {
	bool hide_editor_config;
	bool isolate_ignored;
	size_t watch_dirs;     /* the watch's budget (router/ignorewatch.h), >= 1 */
	const char *workspace; /* the canonical workspace's path: for ps only */
};

/* The argument vector for args (argv[0] "lazaret-router"), NULL-ended in
 * argv[0..LZ_ROUTERPROC_ARGV_MAX); number is storage for it. */
#define LZ_ROUTERPROC_ARGV_MAX 10
void lz_routerproc_argv(const struct lz_routerproc_args *a, char number[24],
			const char *argv[LZ_ROUTERPROC_ARGV_MAX]);

/* Reads what lz_routerproc_argv wrote; anything else is -EINVAL with a
 * message (the program is Lazaret's, not a command for users). */
int lz_routerproc_parse(int argc, char *const *argv, struct lz_routerproc_args *ret, struct lz_err *err);

/* The process: checks its descriptors are what the RS placed (a FUSE
 * device, two directories, two pipes, a file), confines itself (no network, five
 * capabilities, no new privileges), classifies the workspace, writes the
 * ready byte and serves until unmounted or SIGTERM. 0 or -errno. */
int lz_routerproc_run(const struct lz_routerproc_args *a, struct lz_err *err);

#endif
