#include "router/routerproc.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fs/mountns.h"
#include "proc/caps.h"
#include "proc/confine.h"
#include "router/gitlib.h"
#include "router/gitreads.h"
#include "router/ignoreclass.h"
#include "router/ignorewatch.h"
#include "router/router.h"
#include "util/cleanup.h"
#include "util/testfault.h"

#define OPT_WATCH_DIRS "--watch-dirs"
#define OPT_HIDE_EDITOR_CONFIG "--hide-editor-config"
#define OPT_SHARE_IGNORED "--share-ignored"
#define OPT_WORKSPACE "--workspace"

void lz_routerproc_argv(const struct lz_routerproc_args *a, char number[24],
			const char *argv[LZ_ROUTERPROC_ARGV_MAX])
{
	size_t n = 0;
	snprintf(number, 24, "%zu", a->watch_dirs);
	argv[n++] = "lazaret-router";
	argv[n++] = OPT_WATCH_DIRS;
	argv[n++] = number;
	if (a->hide_editor_config)
		argv[n++] = OPT_HIDE_EDITOR_CONFIG;
	if (!a->isolate_ignored)
		argv[n++] = OPT_SHARE_IGNORED;
	argv[n++] = OPT_WORKSPACE;
	argv[n++] = a->workspace;
	argv[n] = NULL;
}

int lz_routerproc_parse(int argc, char *const *argv, struct lz_routerproc_args *ret, struct lz_err *err)
{
	struct lz_routerproc_args a = { .isolate_ignored = true };
	bool have_watch = false;
	for (int i = 1; i < argc; i++) {
		const char *opt = argv[i];
		if (strcmp(opt, OPT_HIDE_EDITOR_CONFIG) == 0) {
			a.hide_editor_config = true;
		} else if (strcmp(opt, OPT_SHARE_IGNORED) == 0) {
			a.isolate_ignored = false;
		} else if (strcmp(opt, OPT_WATCH_DIRS) == 0 && i + 1 < argc) {
			const char *v = argv[++i];
			char *end = NULL;
			errno = 0;
			uintmax_t n = strtoumax(v, &end, 10);
			if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno != 0 || n == 0 || n > SIZE_MAX)
				return lz_err_set(err, EINVAL, "%s: not a count: '%s'", OPT_WATCH_DIRS, v);
			a.watch_dirs = (size_t)n;
			have_watch = true;
		} else if (strcmp(opt, OPT_WORKSPACE) == 0 && i + 1 < argc) {
			a.workspace = argv[++i];
		} else {
			return lz_err_set(err, EINVAL,
					  "unknown argument '%s' (lazaret-router is started by lazaret's Runtime "
					  "Supervisor, not by hand)",
					  opt);
		}
	}
	if (!have_watch || a.workspace == NULL)
		return lz_err_set(err, EINVAL, "%s and %s are required", OPT_WATCH_DIRS, OPT_WORKSPACE);
	*ret = a;
	return 0;
}

/* The descriptors the RS placed, each of the type it must be: a process
 * started any other way serves nothing. */
static int check_fds(struct lz_err *err)
{
	static const struct {
		int fd;
		mode_t type;
		const char *what;
	} want[] = {
		{ LZ_ROUTERPROC_FD_FUSE, S_IFCHR, "the FUSE device" },
		{ LZ_ROUTERPROC_FD_HOST, S_IFDIR, "the workspace" },
		{ LZ_ROUTERPROC_FD_ISOLATED, S_IFDIR, "the Ignored Workspace State" },
		{ LZ_ROUTERPROC_FD_READY, S_IFIFO, "the ready pipe" },
		{ LZ_ROUTERPROC_FD_REPORT, S_IFIFO, "the report pipe" },
		{ LZ_ROUTERPROC_FD_WATCH_SLOTS, S_IFREG, "the watch budget's slots file" },
	};
	for (size_t i = 0; i < LZ_ARRAY_SIZE(want); i++) {
		struct stat st;
		if (fstat(want[i].fd, &st) < 0 || (st.st_mode & S_IFMT) != want[i].type ||
		    (want[i].type == S_IFCHR && st.st_rdev != makedev(10, 229)))
			return lz_err_set(err, EBADF, "descriptor %d is not %s", want[i].fd, want[i].what);
		/* none of them reaches a program the router might start */
		if (fcntl(want[i].fd, F_SETFD, FD_CLOEXEC) < 0)
			return lz_err_set(err, errno, "descriptor %d: %s", want[i].fd, strerror(errno));
	}
	return 0;
}

/* Where Debian's libgit2 (mbedTLS) looks for the system's CA bundle. */
#define LIBGIT2_CA_DIR "/etc/ssl/certs"

/* libgit2 parses the whole CA bundle when it is initialised (about 7 ms
 * here), for HTTPS the router never speaks. The router initialises it in
 * a mount namespace of its own where that directory is an empty tmpfs,
 * then returns to the generation's (issue 15). Without the directory, or
 * where it cannot be covered, the initialisation just reads it. */
static int gitlib_init_without_cas(struct lz_err *err)
{
	_cleanup_close_ int home = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	if (home < 0)
		return lz_err_set(err, errno, "router: its mount namespace: %s", strerror(errno));
	if (unshare(CLONE_NEWNS) < 0)
		return lz_err_set(err, errno, "router: a mount namespace for libgit2: %s", strerror(errno));
	(void)mount("none", LIBGIT2_CA_DIR, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		    "size=4k,nr_inodes=1,mode=0555");
	int r = lz_gitlib_load(err);
	if (setns(home, CLONE_NEWNS) < 0)
		return lz_err_set(err, errno, "router: back to the generation's mount namespace: %s",
				  strerror(errno));
	return r;
}

/* What a bug in the router could still reach (test builds): the
 * developer's home listed, the global configuration Git reads, the mode
 * of that file, of one beside the workspace and of its standard error
 * changed, and its standard output touched. */
static void reach_outside_test_fault(void)
{
	const char *home = getenv("HOME");
	char gitconfig[4096];
	if (home == NULL)
		return;
	snprintf(gitconfig, sizeof(gitconfig), "%s/.gitconfig", home);
	const char *paths[] = { home, gitconfig };
	for (size_t i = 0; i < LZ_ARRAY_SIZE(paths); i++) {
		int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
		lz_router_log("test fault: opening %s: %s", paths[i], fd < 0 ? strerror(errno) : "opened");
		if (fd >= 0)
			close(fd);
	}
	int r = fchmodat(AT_FDCWD, gitconfig, 0600, 0);
	lz_router_log("test fault: changing the mode of %s: %s", gitconfig, r < 0 ? strerror(errno) : "changed");
	r = fchmodat(LZ_ROUTERPROC_FD_HOST, "../beside-the-workspace", 0600, 0);
	lz_router_log("test fault: changing the mode of ../beside-the-workspace: %s",
		      r < 0 ? strerror(errno) : "changed");
	r = fchmod(STDERR_FILENO, 0604);
	lz_router_log("test fault: changing the mode of its standard error: %s", r < 0 ? strerror(errno) : "changed");
	r = futimens(STDOUT_FILENO, NULL);
	lz_router_log("test fault: touching its standard output: %s", r < 0 ? strerror(errno) : "touched");
}

int lz_routerproc_run(const struct lz_routerproc_args *a, struct lz_err *err)
{
	int r = check_fds(err);
	if (r < 0)
		return r;
	/* Spec 3.5: the developer's global excludes file, as the host's Git
	 * resolves it (HOME and XDG_CONFIG_HOME, passed by the RS). */
	char excludes[4096] = "";
	if ((r = gitlib_init_without_cas(err)) < 0 ||
	    (a->isolate_ignored && (r = lz_ignoreclass_global_excludes(getenv("HOME"), getenv("XDG_CONFIG_HOME"),
									 excludes, sizeof(excludes), err)) < 0))
		return r;
	/* The router reads what the sandbox writes: a bug there must not
	 * reach the network or more than the files it serves. No network
	 * namespace of its own use, and only the capabilities that serve
	 * files of the sandbox's owners, before the first thread (they are
	 * per thread). */
	if (unshare(CLONE_NEWNET) < 0)
		return lz_err_set(err, errno, "router: empty network namespace: %s", strerror(errno));
	/* Landlock governs opening, not a file's mode, owner, times or
	 * xattrs: outside the two trees it serves, every mount the router
	 * sees is read-only (fs/mountns.h). */
	int trees[] = { LZ_ROUTERPROC_FD_HOST, LZ_ROUTERPROC_FD_ISOLATED };
	if ((r = lz_mountns_confine_writes(trees, LZ_ARRAY_SIZE(trees), err)) < 0)
		return lz_err_prefix(err, r, "router: the trees it serves the only writable ones: ");
	/* Its standard input and output were /dev/null on the RS's mounts,
	 * whose times it could still set: now this namespace's, read-only.
	 * (Its standard error is a pipe the RS relays, rsrouter.h.) */
	_cleanup_close_ int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0)
		return lz_err_set(err, errno, "router: /dev/null: %s", strerror(errno));
	if ((r = lz_caps_limit(LZ_CAP(CAP_CHOWN) | LZ_CAP(CAP_DAC_OVERRIDE) | LZ_CAP(CAP_DAC_READ_SEARCH) |
			       LZ_CAP(CAP_FOWNER) | LZ_CAP(CAP_FSETID))) < 0)
		return lz_err_set(err, -r, "router: dropping capabilities: %s", strerror(-r));
	/* Nor the developer's other files or sockets: it reads only what Git
	 * reads (router/gitreads.h), changes only the two trees it serves,
	 * runs nothing and makes no socket (proc/confine.h). */
	struct lz_gitreads reads;
	if ((r = lz_gitreads_collect(LZ_ROUTERPROC_FD_HOST, getenv("HOME"), excludes, &reads, err)) < 0)
		return lz_err_prefix(err, r, "router: what Git reads: ");
	if (!reads.complete)
		lz_router_log("reads files anywhere, as you can: %s", reads.why);
	const int served[] = { LZ_ROUTERPROC_FD_HOST, LZ_ROUTERPROC_FD_ISOLATED };
	r = lz_confine(&(struct lz_confine){ .read_paths = reads.fds, .n_read_paths = reads.n,
					     .read_anywhere = !reads.complete, .write_dirs = served,
					     .n_write_dirs = LZ_ARRAY_SIZE(served) },
		       err);
	lz_gitreads_close(&reads);
	if (r < 0)
		return lz_err_prefix(err, r, "router: ");
	if (lz_test_fault("router-reaches-outside"))
		reach_outside_test_fault();
	struct lz_ignoreclass_inputs in = {
		.workspace_fd = LZ_ROUTERPROC_FD_HOST,
		.isolated_fd = LZ_ROUTERPROC_FD_ISOLATED,
		.global_excludes = excludes[0] ? excludes : NULL,
		.hide_editor_config = a->hide_editor_config,
		.share_ignored = !a->isolate_ignored,
	};
	lz_ignoreclass *snap = NULL;
	if ((r = lz_ignoreclass_build(&in, &snap, err)) < 0)
		return lz_err_prefix(err, r, "classifying the workspace: ");
	struct lz_router_options opt;
	lz_router_options_default(&opt);
	opt.handle_signals = true; /* SIGTERM after the unmount ends the loop cleanly */
	lz_router *router = NULL;
	if ((r = lz_router_new(LZ_ROUTERPROC_FD_HOST, LZ_ROUTERPROC_FD_ISOLATED,
			       lz_router_classifier_ignoreclass(snap), &opt, &router, err)) < 0)
		return r;
	lz_ignorewatch *watch = NULL;
	/* snap is the router's now, and stays until the watch publishes */
	if ((r = lz_ignorewatch_start(router, &in, snap, a->watch_dirs, LZ_ROUTERPROC_FD_WATCH_SLOTS, &watch, err)) < 0) {
		lz_router_free(router);
		return r;
	}
	if (write(LZ_ROUTERPROC_FD_READY, "", 1) != 1) {
		r = lz_err_set(err, errno, "router: the supervisor went away");
	} else {
		close(LZ_ROUTERPROC_FD_READY);
		r = lz_router_serve(router, NULL, LZ_ROUTERPROC_FD_FUSE, err);
	}
	lz_ignorewatch_stop(watch);
	lz_router_free(router);
	return r;
}
