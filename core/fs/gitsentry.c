/* Git Sentry planning (spec 3.5, SR-4); see gitsentry.h.
 *
 * Which files Git reads. In a repository whose git directory is G and
 * whose common directory is C (G itself unless G/commondir names another):
 * configuration comes from C/config and, with extensions.worktreeConfig,
 * from G/config.worktree; hooks run from C/hooks. A workspace whose `.git`
 * is a regular file (linked worktree, submodule, --separate-git-dir) takes
 * G from that file. Git reads G/commondir in any git directory, a plain
 * `.git` directory included, so it is handled the same way everywhere.
 *
 * The plan, for the workspace's top-level `.git` only:
 * - `.git` a regular file: read-only (otherwise the sandbox repoints the
 *   host's Git at a configuration it wrote); G parsed from it.
 * - G/commondir if present: read-only, for the same reason.
 * - C/config if present: read-only.
 * - G/config.worktree and C/config.worktree if present: read-only.
 * - C/hooks: transient, always, even when absent: otherwise the sandbox
 *   creates it and the host runs its hooks later. The runtime creates the
 *   mount point.
 * Every path is reached descriptor-relative beneath the workspace with
 * LZ_RESOLVE_OWNED; a symlink, a second hard link or a special file where a
 * protected object should be is refused: a read-only bind of something that
 * points elsewhere protects nothing and would only look protective.
 *
 * Pointers (the `.git` file, commondir) are resolved lexically: "." and
 * empty components vanish, ".." removes the previous component. Before ".."
 * removes a directory beneath the workspace, that directory is opened with
 * no symlink allowed, and the result is opened the same way, so a lexical
 * result inside the workspace is the object the kernel reaches as well.
 * Components outside the workspace are host-controlled and not examined.
 *
 * Limits (v1):
 * - A pointer leading outside the workspace (a worktree of a repository
 *   elsewhere): the sandbox cannot see that directory at all, so nothing
 *   there needs protecting, and Git does not work inside. That is the Git
 *   model's limit, not a hole. Only the pointer file itself is protected.
 *   A pointer that reaches the workspace only through a host symlink
 *   outside it counts as outside.
 * - Nested repositories below the workspace root are not examined.
 * - Only existing files can be bound: an absent C/config, G/commondir or
 *   config.worktree can still be created by the sandbox. The kernel also
 *   lets a directory holding a mount point be renamed, so `.git` can be
 *   moved aside and rebuilt. Both need enforcement by the runtime or the
 *   workspace router; this plan cannot express them. */
#include "fs/gitsentry.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/sys.h"

#define SANDBOX_WORKSPACE "/workspace"
#define NAME_MAX_BYTES 255

struct planner {
	int ws_fd;
	const char *ws; /* canonical workspace path */
	struct lz_gitsentry_mount *m;
	size_t n;
	struct lz_err *err;
};

/* dst = a "/" b; an empty side is left out, a == "/" is not doubled.
 * Returns -ENAMETOOLONG (dst truncated) past LZ_PATH_MAX. */
static int join(char dst[static LZ_PATH_MAX + 1], const char *a, const char *b)
{
	if (b[0] == '\0')
		b = a, a = "";
	size_t alen = strcmp(a, "/") == 0 ? 0 : strlen(a);
	bool slash = a[0] != '\0' && b[0] != '\0';
	const char *parts[3] = { a, "/", b };
	size_t lens[3] = { alen, slash ? 1 : 0, strlen(b) };
	size_t n = 0;
	for (size_t i = 0; i < 3; i++) {
		size_t k = lens[i] < LZ_PATH_MAX - n ? lens[i] : LZ_PATH_MAX - n;
		memcpy(dst + n, parts[i], k);
		n += k;
	}
	dst[n] = '\0';
	return lens[0] + lens[1] + lens[2] > LZ_PATH_MAX ? -ENAMETOOLONG : 0;
}

/* Host path of rel, for messages only (truncation is acceptable there). */
struct label {
	char s[LZ_PATH_MAX + 1];
};

static struct label host_label(const struct planner *p, const char *rel)
{
	struct label l;
	(void)join(l.s, p->ws, rel);
	return l;
}

/* Opens rel ("" is the workspace) beneath the workspace as O_PATH, not
 * following a trailing symlink (it is returned as itself, for the caller to
 * refuse). Returns the fd or -errno without touching p->err. */
static int open_rel(const struct planner *p, const char *rel, struct stat *ret_st)
{
	_cleanup_close_ int fd = lz_openat2(p->ws_fd, rel[0] != '\0' ? rel : ".",
					    O_PATH | O_NOFOLLOW | O_CLOEXEC, LZ_RESOLVE_OWNED);
	if (fd < 0)
		return -errno;
	if (fstat(fd, ret_st) < 0)
		return -errno;
	return TAKE_FD(fd);
}

static int open_failed(const struct planner *p, int r, const char *rel)
{
	struct label lb = host_label(p, rel);
	const char *l = lb.s;
	if (r == -ELOOP)
		return lz_err_set(p->err, EPERM,
				  "'%s' resolves through a symlink; Git Sentry protects only "
				  "symlink-free paths in the workspace",
				  l);
	if (r == -EXDEV)
		return lz_err_set(p->err, EPERM,
				  "'%s' crosses a mount point inside the workspace; Git Sentry "
				  "cannot plan across it",
				  l);
	return lz_err_set(p->err, -r, "open '%s': %s", l, strerror(-r));
}

/* Opens the directory rel that a pointer names; it must exist. */
static int open_dir(const struct planner *p, const char *rel, const char *what)
{
	struct stat st;
	_cleanup_close_ int fd = open_rel(p, rel, &st);
	if (fd == -ENOENT)
		return lz_err_set(p->err, ENOENT,
				  "%s '%s' does not exist inside the workspace; the sandbox could "
				  "create it. Repair or remove the pointer",
				  what, host_label(p, rel).s);
	if (fd < 0)
		return open_failed(p, fd, rel);
	if (S_ISLNK(st.st_mode))
		return lz_err_set(p->err, EPERM, "%s '%s' is a symlink; Git Sentry refuses it",
				  what, host_label(p, rel).s);
	if (!S_ISDIR(st.st_mode))
		return lz_err_set(p->err, ENOTDIR, "%s '%s' is not a directory", what,
				  host_label(p, rel).s);
	return TAKE_FD(fd);
}

/* Checks the object at rel (stat st) can be bound read-only: a symlink, a
 * non-regular file or a second hard link cannot, as a read-only bind of
 * this name would not protect what Git reads. */
static int check_protected(const struct planner *p, const char *rel, const struct stat *st)
{
	struct label lb = host_label(p, rel);
	const char *l = lb.s;
	if (S_ISLNK(st->st_mode))
		return lz_err_set(p->err, EPERM,
				  "'%s' is a symlink: a read-only bind would protect its target, "
				  "not the name Git reads. Replace it with a regular file",
				  l);
	if (!S_ISREG(st->st_mode))
		return lz_err_set(p->err, EPERM, "'%s' is not a regular file; Git Sentry refuses it",
				  l);
	if (st->st_nlink != 1)
		return lz_err_set(p->err, EPERM,
				  "'%s' has %lu hard links: another name could still write it. "
				  "Git Sentry requires exactly one",
				  l, (unsigned long)st->st_nlink);
	return 0;
}

/* Opens rel as a file to be bound read-only (check_protected): -ENOENT,
 * without a message, when absent. */
static int open_protected_file(const struct planner *p, const char *rel, struct stat *ret_st)
{
	_cleanup_close_ int fd = open_rel(p, rel, ret_st);
	if (fd == -ENOENT)
		return -ENOENT;
	if (fd < 0)
		return open_failed(p, fd, rel);
	int r = check_protected(p, rel, ret_st);
	if (r < 0)
		return r;
	return TAKE_FD(fd);
}

/* Adds rel; a file to bind keeps a duplicate of fd, its checked object. */
static int add(struct planner *p, enum lz_gitsentry_kind kind, const char *rel, int fd)
{
	/* The plan has a fixed shape (at most six entries); more is a bug. */
	assert(p->n < LZ_GITSENTRY_MOUNTS_MAX);
	struct lz_gitsentry_mount *e = &p->m[p->n];
	if (join(e->host_path, p->ws, rel) < 0 || join(e->sandbox_path, SANDBOX_WORKSPACE, rel) < 0)
		return lz_err_set(p->err, ENAMETOOLONG, "'%s': path longer than %d bytes",
				  host_label(p, rel).s, LZ_PATH_MAX);
	e->fd = -EBADF;
	if (kind == LZ_GITSENTRY_READONLY_FILE && (e->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0)
		return lz_err_set(p->err, errno, "dup: %s", strerror(errno));
	e->kind = kind;
	p->n++;
	return 0;
}

/* Reads the whole regular file behind the O_PATH descriptor opath into buf
 * (LZ_GITSENTRY_POINTER_MAX + 1 bytes), NUL-terminated, through a reopen of
 * that very object, never of its name. */
static int read_pointer(const struct planner *p, int opath, const struct stat *st, const char *rel,
			char *buf, size_t *ret_len)
{
	struct label lb = host_label(p, rel);
	const char *l = lb.s;
	if (st->st_size > LZ_GITSENTRY_POINTER_MAX)
		return lz_err_set(p->err, EFBIG, "'%s' is larger than %d bytes", l,
				  LZ_GITSENTRY_POINTER_MAX);
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", opath);
	_cleanup_close_ int fd = open(proc, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return lz_err_set(p->err, errno, "reopen '%s': %s", l, strerror(errno));
	struct stat now;
	if (fstat(fd, &now) < 0)
		return lz_err_set(p->err, errno, "stat '%s': %s", l, strerror(errno));
	if (now.st_dev != st->st_dev || now.st_ino != st->st_ino)
		return lz_err_set(p->err, ESTALE, "'%s' changed while being opened", l);

	size_t total = 0;
	for (;;) {
		ssize_t k = read(fd, buf + total, LZ_GITSENTRY_POINTER_MAX + 1 - total);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return lz_err_set(p->err, errno, "read '%s': %s", l, strerror(errno));
		if (k == 0)
			break;
		total += (size_t)k;
		if (total > LZ_GITSENTRY_POINTER_MAX)
			return lz_err_set(p->err, EFBIG, "'%s' is larger than %d bytes", l,
					  LZ_GITSENTRY_POINTER_MAX);
	}
	buf[total] = '\0';
	*ret_len = total;
	return 0;
}

/* Git reads a pointer file whole, strips trailing CR and LF and takes what
 * follows prefix as the path. Accepted is exactly that shape with nothing
 * Git could read differently: no NUL, no line break inside, a path. */
static int parse_pointer(const struct planner *p, char *buf, size_t len, const char *prefix,
			 const char *rel, const char **ret_path)
{
	struct label lb = host_label(p, rel);
	const char *l = lb.s;
	if (memchr(buf, '\0', len) != NULL)
		return lz_err_set(p->err, EINVAL, "'%s' contains a NUL byte", l);
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		len--;
	buf[len] = '\0';
	size_t plen = strlen(prefix);
	if (len < plen || memcmp(buf, prefix, plen) != 0)
		return lz_err_set(p->err, EINVAL, "'%s' does not start with '%s'", l, prefix);
	const char *path = buf + plen;
	if (path[0] == '\0')
		return lz_err_set(p->err, EINVAL, "'%s' names no path", l);
	if (strpbrk(path, "\r\n") != NULL)
		return lz_err_set(p->err, EINVAL, "'%s' has more than one line", l);
	*ret_path = path;
	return 0;
}

/* Resolves a pointer's path: absolute, or relative to the workspace
 * directory base_rel. *ret_inside tells whether it lands in the workspace;
 * then ret_rel is its normalized path relative to the workspace ("" for the
 * workspace itself). src_rel names the pointer file for messages. */
static int resolve_pointer(const struct planner *p, const char *base_rel, const char *value,
			   const char *src_rel, bool *ret_inside, char ret_rel[static LZ_PATH_MAX + 1])
{
	char base[LZ_PATH_MAX + 1];
	if (join(base, p->ws, base_rel) < 0)
		return lz_err_set(p->err, ENAMETOOLONG, "'%s': path longer than %d bytes",
				  host_label(p, base_rel).s, LZ_PATH_MAX);
	const char *parts[2] = { value[0] == '/' ? value : base, value[0] == '/' ? "" : value };

	/* Beneath the workspace, out + skip is the path relative to it. */
	size_t skip = strcmp(p->ws, "/") == 0 ? 1 : strlen(p->ws) + 1;
	char out[LZ_PATH_MAX + 1] = ""; /* absolute, normalized; "" is "/" */
	size_t olen = 0;
	for (size_t i = 0; i < LZ_ARRAY_SIZE(parts); i++) {
		const char *s = parts[i];
		while (*s != '\0') {
			while (*s == '/')
				s++;
			size_t clen = strcspn(s, "/");
			const char *c = s;
			s += clen;
			if (clen == 0 || (clen == 1 && c[0] == '.'))
				continue;
			if (clen == 2 && c[0] == '.' && c[1] == '.') {
				if (olen > 0 && lz_path_is_beneath(p->ws, out)) {
					const char *rel = out + skip;
					_cleanup_close_ int fd = open_dir(p, rel, "directory");
					if (fd < 0)
						return lz_err_prefix(p->err, fd, "resolving '%s': ",
								     host_label(p, src_rel).s);
				}
				while (olen > 0 && out[olen - 1] != '/')
					olen--;
				if (olen > 0)
					olen--;
				out[olen] = '\0';
				continue;
			}
			if (clen > NAME_MAX_BYTES || olen + 1 + clen > LZ_PATH_MAX)
				return lz_err_set(p->err, ENAMETOOLONG,
						  "'%s' names a path longer than %d bytes or a component "
						  "longer than %d",
						  host_label(p, src_rel).s, LZ_PATH_MAX, NAME_MAX_BYTES);
			out[olen++] = '/';
			memcpy(out + olen, c, clen);
			olen += clen;
			out[olen] = '\0';
		}
	}

	const char *abs = olen > 0 ? out : "/";
	if (strcmp(abs, p->ws) == 0) {
		ret_rel[0] = '\0';
		*ret_inside = true;
	} else if (lz_path_is_beneath(p->ws, abs)) {
		const char *rel = abs + skip;
		memcpy(ret_rel, rel, strlen(rel) + 1);
		*ret_inside = true;
	} else {
		*ret_inside = false;
	}
	return 0;
}

/* Binds dir/name read-only when it exists. */
static int protect_if_present(struct planner *p, const char *dir, const char *name)
{
	char rel[LZ_PATH_MAX + 1];
	if (join(rel, dir, name) < 0)
		return lz_err_set(p->err, ENAMETOOLONG, "'%s/%s': path longer than %d bytes",
				  host_label(p, dir).s, name, LZ_PATH_MAX);
	struct stat st;
	_cleanup_close_ int fd = open_protected_file(p, rel, &st);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	return add(p, LZ_GITSENTRY_READONLY_FILE, rel, fd);
}

/* Reads pointer file rel (already opened and checked), binds it read-only
 * and resolves its path relative to base_rel. */
static int follow_pointer(struct planner *p, int fd, const struct stat *st, const char *rel,
			  const char *prefix, const char *base_rel, bool *ret_inside,
			  char ret_target[static LZ_PATH_MAX + 1])
{
	char buf[LZ_GITSENTRY_POINTER_MAX + 1];
	size_t len = 0;
	const char *value = NULL;
	int r;
	if ((r = read_pointer(p, fd, st, rel, buf, &len)) < 0 ||
	    (r = parse_pointer(p, buf, len, prefix, rel, &value)) < 0 ||
	    (r = add(p, LZ_GITSENTRY_READONLY_FILE, rel, fd)) < 0)
		return r;
	return resolve_pointer(p, base_rel, value, rel, ret_inside, ret_target);
}

/* Plans for the git directory gitdir (beneath the workspace). */
static int plan_gitdir(struct planner *p, const char *gitdir)
{
	char rel[LZ_PATH_MAX + 1], common[LZ_PATH_MAX + 1];
	bool common_inside = true;
	struct stat st;
	int r;

	_cleanup_close_ int gfd = open_dir(p, gitdir, "git directory");
	if (gfd < 0)
		return gfd;

	if (join(rel, gitdir, "commondir") < 0)
		return lz_err_set(p->err, ENAMETOOLONG, "'%s/commondir': path longer than %d bytes",
				  host_label(p, gitdir).s, LZ_PATH_MAX);
	_cleanup_close_ int cfd = open_protected_file(p, rel, &st);
	if (cfd == -ENOENT) {
		memcpy(common, gitdir, strlen(gitdir) + 1);
	} else if (cfd < 0) {
		return cfd;
	} else {
		/* commondir is relative to the git directory holding it. */
		if ((r = follow_pointer(p, cfd, &st, rel, "", gitdir, &common_inside, common)) < 0)
			return r;
	}

	bool separate = common_inside && strcmp(common, gitdir) != 0;
	if (common_inside) {
		_cleanup_close_ int dfd = open_dir(p, common, "common git directory");
		if (dfd < 0)
			return dfd;
		/* A missing config is left alone (nothing to bind); see the
		 * header for what that leaves open. */
		if ((r = protect_if_present(p, common, "config")) < 0)
			return r;
		if (separate && (r = protect_if_present(p, common, "config.worktree")) < 0)
			return r;
	}
	if ((r = protect_if_present(p, gitdir, "config.worktree")) < 0)
		return r;

	if (!common_inside)
		return 0;
	if (join(rel, common, "hooks") < 0)
		return lz_err_set(p->err, ENAMETOOLONG, "'%s/hooks': path longer than %d bytes",
				  host_label(p, common).s, LZ_PATH_MAX);
	_cleanup_close_ int hfd = open_rel(p, rel, &st);
	if (hfd >= 0 && S_ISLNK(st.st_mode))
		/* The transient storage must cover the name Git resolves; a
		 * runtime placing it would follow the link and cover whatever
		 * it points at instead. */
		return lz_err_set(p->err, EPERM,
				  "'%s' is a symlink: transient storage would land on its target. "
				  "Replace it with a directory",
				  host_label(p, rel).s);
	if (hfd >= 0 && !S_ISDIR(st.st_mode))
		return lz_err_set(p->err, EPERM, "'%s' is not a directory; Git Sentry refuses it",
				  host_label(p, rel).s);
	if (hfd < 0 && hfd != -ENOENT)
		return open_failed(p, hfd, rel);
	/* Planned even when absent: the runtime creates the mount point. */
	return add(p, LZ_GITSENTRY_TRANSIENT_DIR, rel, -EBADF);
}

/* The plan for the workspace's top-level `.git` entry. */
static int plan_workspace(struct planner *p)
{
	int r;
	struct stat st;
	_cleanup_close_ int fd = open_rel(p, ".git", &st);
	if (fd == -ENOENT)
		return 0; /* not a repository root: nothing to protect */
	if (fd < 0)
		return open_failed(p, fd, ".git");

	if (S_ISLNK(st.st_mode))
		return lz_err_set(p->err, EPERM,
				  "'%s' is a symlink; Git Sentry cannot protect a repository "
				  "reached through it",
				  host_label(p, ".git").s);
	if (S_ISDIR(st.st_mode)) {
		r = plan_gitdir(p, ".git");
	} else if (S_ISREG(st.st_mode)) {
		char gitdir[LZ_PATH_MAX + 1];
		bool inside;
		if ((r = check_protected(p, ".git", &st)) < 0)
			return r;
		r = follow_pointer(p, fd, &st, ".git", "gitdir: ", "", &inside, gitdir);
		if (r >= 0 && inside)
			r = plan_gitdir(p, gitdir);
	} else {
		return lz_err_set(p->err, EPERM,
				  "'%s' is neither a directory nor a regular file; Git Sentry "
				  "refuses it",
				  host_label(p, ".git").s);
	}
	return r;
}

int lz_gitsentry_plan(int workspace_fd, const char *workspace_canonical,
		      struct lz_gitsentry_mount **ret, size_t *ret_n, struct lz_err *err)
{
	if (workspace_fd < 0 || workspace_canonical == NULL || ret == NULL || ret_n == NULL)
		return lz_err_set(err, EINVAL, "Git Sentry: invalid arguments");
	int r = lz_path_grammar(workspace_canonical, strlen(workspace_canonical), err);
	if (r < 0)
		return lz_err_prefix(err, r, "workspace '%s': ", workspace_canonical);

	struct lz_gitsentry_mount *m = calloc(LZ_GITSENTRY_MOUNTS_MAX, sizeof(*m));
	if (m == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	struct planner p = { .ws_fd = workspace_fd, .ws = workspace_canonical, .m = m, .err = err };
	r = plan_workspace(&p);
	if (r < 0 || p.n == 0) {
		lz_gitsentry_free(m, p.n);
		m = NULL;
	}
	if (r < 0)
		return r;
	*ret_n = p.n;
	*ret = m;
	return 0;
}

void lz_gitsentry_free(struct lz_gitsentry_mount *m, size_t n)
{
	for (size_t i = 0; m != NULL && i < n; i++)
		lz_close_fdp(&m[i].fd);
	free(m);
}
