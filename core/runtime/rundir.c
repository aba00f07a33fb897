/* The runtime Domain directory; see rundir.h. */
#include "runtime/rundir.h"

#include <dirent.h>
#include <stdlib.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/file.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fs/file.h"
#include "fs/tree.h"
#include "proc/spawn.h"
#include "proc/userns.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/sys.h"


int lz_rundir_socket_addr(const struct lz_path *runtime_domain, struct sockaddr_un *ret)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	if ((size_t)snprintf(a.sun_path, sizeof(a.sun_path), "/proc/self/fd/%d/%s", runtime_domain->fd,
			     LZ_RUNDIR_SOCKET) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	*ret = a;
	return 0;
}

/* A file created 0600 under a umask such as 0277 would be 0400, and the
 * next coordinator could not open it for writing. */
static int exact_mode(int fd, mode_t mode, const char *name, struct lz_err *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return lz_err_set(err, errno, "stat %s: %s", name, strerror(errno));
	if ((st.st_mode & 07777) != mode && fchmod(fd, mode) < 0)
		return lz_err_set(err, errno, "chmod %s: %s", name, strerror(errno));
	return 0;
}

static void gendir_close(struct lz_gendir *g)
{
	int *fds[] = { &g->root, &g->root_upper, &g->root_work, &g->anchor,
		       &g->runsc, &g->bundle,	  &g->sessions,	 &g->empty, &g->workspace };
	for (size_t i = 0; i < LZ_ARRAY_SIZE(fds); i++)
		lz_close_fdp(fds[i]);
	lz_path_release(&g->dir);
}

int lz_gendir_create(const struct lz_path *runtime_domain, uint64_t generation, const void *init,
		     size_t init_len, const char *resolv_conf, struct lz_gendir *ret, struct lz_err *err)
{
	_cleanup_(lz_gendir_remove) struct lz_gendir g = LZ_GENDIR_INIT;
	char name[sizeof(g.name)];
	int r;
	snprintf(name, sizeof(name), "gen-%llu", (unsigned long long)generation);
	if (mkdirat(runtime_domain->fd, name, 0700) < 0)
		return lz_err_set(err, errno, "create %s: %s", name, strerror(errno));
	g.parent = runtime_domain; /* ours from here: removed on failure */
	memcpy(g.name, name, sizeof(name));
	/* Exactly 0700 whatever the umask, or the owned check below refuses
	 * it (a umask such as 0277 left it 0500). */
	_cleanup_close_ int made = -EBADF;
	if ((r = lz_dir_ensure(runtime_domain->fd, g.name, 0700, &made, err)) < 0)
		return r;
	if ((r = lz_path_owned_child(runtime_domain, g.name, false, &g.dir, err)) < 0)
		return r;
	/* The root's transient upper gives / its mode; 0755 like any root. */
	const struct {
		const char *name;
		unsigned mode;
		int *fd;
	} dirs[] = {
		{ "root", 0700, &g.root },	 { "root-upper", 0755, &g.root_upper },
		{ "root-work", 0700, &g.root_work }, { "anchor", 0700, &g.anchor },
		{ "runsc", 0700, &g.runsc },	 { "bundle", 0700, &g.bundle },
		{ "sessions", 0700, &g.sessions }, { "empty", 0755, &g.empty },
		{ "workspace", 0700, &g.workspace },
	};
	for (size_t i = 0; i < LZ_ARRAY_SIZE(dirs); i++)
		if ((r = lz_dir_ensure(g.dir.fd, dirs[i].name, dirs[i].mode, dirs[i].fd, err)) < 0)
			return r;
	if ((r = lz_file_create(g.dir.fd, "init", init, init_len, 0555, LZ_RESOLVE_OWNED, err)) < 0 ||
	    (r = lz_file_create(g.dir.fd, "resolv.conf", resolv_conf, strlen(resolv_conf), 0444,
				LZ_RESOLVE_OWNED, err)) < 0)
		return r;
	*ret = g;
	g = (struct lz_gendir)LZ_GENDIR_INIT; /* moved out */
	return 0;
}

int lz_gendir_label(const struct lz_gendir *g, const char *child, char *out, size_t size)
{
	int n = snprintf(out, size, "%s/%s", g->dir.canonical ? g->dir.canonical : "", child);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int lz_gendir_open_log(const struct lz_gendir *g, const char *name, int *ret_fd, struct lz_err *err)
{
	int fd = lz_openat2_create(g->dir.fd, name, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600,
				   LZ_RESOLVE_OWNED);
	if (fd < 0)
		return lz_err_set(err, errno, "create %s: %s", name, strerror(errno));
	int r = exact_mode(fd, 0600, name, err);
	if (r < 0) {
		close(fd);
		return r;
	}
	*ret_fd = fd;
	return 0;
}

void lz_gendir_salvage_log(const struct lz_gendir *g, uint64_t generation, const char *name, int out_fd)
{
	if (g->dir.fd < 0)
		return;
	_cleanup_close_ int fd = lz_openat2(g->dir.fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW, LZ_RESOLVE_OWNED);
	if (fd < 0)
		return;
	char buf[LZ_RUNDIR_LOG_TAIL];
	off_t size = lseek(fd, 0, SEEK_END);
	off_t from = size > (off_t)sizeof(buf) ? size - (off_t)sizeof(buf) : 0;
	ssize_t n = pread(fd, buf, sizeof(buf), from);
	if (n <= 0)
		return;
	dprintf(out_fd, "--- %s of generation %llu (last %zd bytes) ---\n", name, (unsigned long long)generation,
		n);
	/* The log holds what the sandbox's processes wrote to the init's
	 * streams: each line escaped and marked as the log's, so it drives
	 * no terminal and cannot pass for a coordinator's line. */
	char prefix[NAME_MAX + 3];
	snprintf(prefix, sizeof(prefix), "%s| ", name);
	lz_escape_lines(out_fd, prefix, buf, (size_t)n);
	dprintf(out_fd, "--- end of %s ---\n", name);
}

/* A tree a lost RS left holds files owned by namespace IDs: removed from
 * inside a user namespace with our map when a plain removal fails. */
static int remove_tree(int dirfd, const char *name, struct lz_err *err)
{
	struct lz_idmap map;
	int r = lz_tree_remove(dirfd, name, err);
	if (r < 0 && (r = lz_idmap_for_invoking_user(&map, err)) >= 0)
		r = lz_tree_remove_in_userns(&map, dirfd, name, err);
	return r;
}

void lz_gendir_remove(struct lz_gendir *g)
{
	gendir_close(g);
	struct lz_err ignored; /* the next coordinator's recovery reports what is left */
	if (g->parent != NULL && g->name[0] != '\0')
		(void)remove_tree(g->parent->fd, g->name, &ignored);
	g->parent = NULL;
	g->name[0] = '\0';
}

int lz_rundir_generations(const struct lz_path *runtime_domain, uint64_t *ret, size_t max, struct lz_err *err)
{
	int fd = lz_openat2(runtime_domain->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, LZ_RESOLVE_OWNED);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	int n = 0;
	if (d == NULL) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return lz_err_set(err, e, "list %s: %s", runtime_domain->canonical, strerror(e));
	}
	struct dirent *de;
	while ((de = readdir(d)) != NULL && (size_t)n < max) {
		char *end = NULL;
		if (strncmp(de->d_name, "gen-", 4) != 0 || de->d_name[4] < '1' || de->d_name[4] > '9')
			continue;
		errno = 0;
		unsigned long long g = strtoull(de->d_name + 4, &end, 10);
		if (errno == 0 && end != NULL && *end == '\0')
			ret[n++] = g;
	}
	closedir(d);
	return n;
}

int lz_rundir_remove_generation(const struct lz_path *runtime_domain, uint64_t generation, struct lz_err *err)
{
	char name[32];
	snprintf(name, sizeof(name), "gen-%llu", (unsigned long long)generation);
	return remove_tree(runtime_domain->fd, name, err);
}

int lz_rundir_rotate_log(const struct lz_path *runtime_domain, int log_fd, off_t limit, struct lz_err *err)
{
	struct stat cur, named;
	if (fstat(log_fd, &cur) < 0 || !S_ISREG(cur.st_mode) || cur.st_size <= limit ||
	    fstatat(runtime_domain->fd, LZ_RUNDIR_LOG, &named, AT_SYMLINK_NOFOLLOW) < 0 ||
	    named.st_dev != cur.st_dev || named.st_ino != cur.st_ino)
		return 0;
	/* The new log is made first (under another name): a full file system
	 * leaves the old one where it was, still written. */
	static const char fresh[] = LZ_RUNDIR_LOG ".new";
	(void)unlinkat(runtime_domain->fd, fresh, 0);
	_cleanup_close_ int fd = lz_openat2_create(runtime_domain->fd, fresh,
						   O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_EXCL, 0600,
						   LZ_RESOLVE_OWNED);
	if (fd < 0)
		return lz_err_set(err, errno, "create %s: %s", fresh, strerror(errno));
	int r = exact_mode(fd, 0600, fresh, err);
	int flags = r < 0 ? -1 : fcntl(log_fd, F_GETFD);
	if (r >= 0 && flags < 0)
		r = lz_err_set(err, errno, "%s: %s", LZ_RUNDIR_LOG, strerror(errno));
	if (r >= 0 && renameat(runtime_domain->fd, LZ_RUNDIR_LOG, runtime_domain->fd, LZ_RUNDIR_LOG_OLD) < 0)
		r = lz_err_set(err, errno, "move %s to %s: %s", LZ_RUNDIR_LOG, LZ_RUNDIR_LOG_OLD, strerror(errno));
	if (r < 0) {
		(void)unlinkat(runtime_domain->fd, fresh, 0);
		return r;
	}
	/* From here only renames and a dup3 of descriptors that are open. */
	if (renameat(runtime_domain->fd, fresh, runtime_domain->fd, LZ_RUNDIR_LOG) < 0 ||
	    dup3(fd, log_fd, (flags & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0)
		return lz_err_set(err, errno, "reopen %s: %s", LZ_RUNDIR_LOG, strerror(errno));
	return 1;
}

void lz_rundir_remove_socket(const struct lz_path *runtime_domain)
{
	(void)unlinkat(runtime_domain->fd, LZ_RUNDIR_SOCKET, 0);
}

int lz_gendir_session_pid(const struct lz_gendir *g, const char *name, int timeout_ms, uint64_t *ret,
			  struct lz_err *err)
{
	int64_t deadline = lz_now_ms() + timeout_ms;
	for (;;) {
		_cleanup_close_ int fd =
			lz_openat2(g->sessions, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW, LZ_RESOLVE_OWNED);
		char text[32] = "";
		ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof(text) - 1);
		unsigned long long pid = 0;
		/* Digits only: sscanf's %llu would take "-1" as 2^64 - 1. */
		if (n > 0 && text[0] >= '0' && text[0] <= '9' && sscanf(text, "%llu", &pid) == 1 && pid > 0 &&
		    pid <= INT32_MAX) {
			*ret = pid;
			return 0;
		}
		if (lz_remaining_ms(deadline) == 0)
			return lz_err_set(err, ETIMEDOUT, "the guest process did not start");
		usleep(10 * 1000);
	}
}

int lz_rundir_lock(const struct lz_path *runtime_domain, int *ret_fd, struct lz_err *err)
{
	_cleanup_close_ int fd = lz_openat2_create(runtime_domain->fd, LZ_RUNDIR_LOCK,
						   O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600, LZ_RESOLVE_OWNED);
	if (fd < 0)
		return lz_err_set(err, errno, "Domain lock: %s", strerror(errno));
	int r = exact_mode(fd, 0600, LZ_RUNDIR_LOCK, err);
	if (r < 0)
		return r;
	/* `state list` takes the lock for a moment to see whether the Domain
	 * is in use: such a hold is waited out, a coordinator's is not. */
	int64_t deadline = lz_now_ms() + LZ_RUNDIR_LOCK_WAIT_MS;
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK)
			return lz_err_set(err, errno, "Domain lock: %s", strerror(errno));
		if (lz_remaining_ms(deadline) == 0)
			return lz_err_set(err, EBUSY, "another Host Coordinator holds this Domain");
		usleep(5 * 1000);
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}
