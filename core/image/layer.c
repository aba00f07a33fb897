/* OCI layer application (see layer.h for the contract and the threat).
 *
 * Resolution. The staging tree is written only by this worker, so a path can
 * be resolved again from the root, but always with openat2 confined beneath
 * the root without symlinks, magic links or mount crossings
 * (LZ_RESOLVE_OWNED); the final component is then acted on relative to that
 * parent with AT_SYMLINK_NOFOLLOW / O_NOFOLLOW / O_EXCL, or with calls that
 * never follow a final symlink (unlinkat, mkdirat, symlinkat, mknodat,
 * linkat without AT_SYMLINK_FOLLOW).
 *
 * Same-layer tracking. OCI whiteouts hide entries of lower layers only. The
 * layer remembers every path it wrote and every ancestor of such a path (the
 * "created" set; a path's ancestors are always in the set when the path is).
 * Removing lower content of a directory D ("pruning" D) deletes each child
 * of D that is not in the set and prunes each child directory that is, so
 * the layer's own entries survive whichever order the archive lists them in:
 * - D/.wh..wh..opq prunes D (children present when the marker is seen that
 *   this layer did not write are removed; later entries are simply written);
 * - D/.wh.N removes D/N recursively when the layer has not written D/N or
 *   anything beneath it; otherwise a directory D/N is pruned and a
 *   non-directory written by this layer is kept.
 * Whiteout files and AUFS metadata (.wh..wh.*) are never materialised.
 *
 * Removal never holds more than two directory descriptors at a time (deep
 * trees must not exhaust RLIMIT_NOFILE): a directory is listed, closed, and
 * re-opened from the root for each level.
 *
 * Directory fixups. Modes and mtimes of directory entries are applied after
 * the last entry, children before parents (reverse lexical order), so that a
 * 0555 directory does not block its content and content does not bump its
 * mtime. Owners are applied at once. A directory replaced later in the layer
 * is recognised by its inode and left alone. */
#include "image/layer.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/sys.h"

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452 /* Linux 6.6, same number on every architecture */
#endif

#define WH_PREFIX ".wh."
#define WH_PREFIX_LEN 4
#define WH_META ".wh..wh."
#define WH_META_LEN 8
#define WH_OPAQUE ".wh..wh..opq"

#define LAYER_READ_BLOCK (64u * 1024u)

/* ---- small containers ---------------------------------------------------- */

/* Open-addressing set of NUL-terminated paths (FNV-1a, linear probing). */
struct pathset {
	char **slot;
	size_t cap; /* power of two, or 0 */
	size_t n;
};

struct dirfix {
	char *path; /* "" for the root */
	uint64_t seq;
	uint64_t dev, ino;
	mode_t mode;
	struct timespec times[2];
};

struct names {
	char **v;
	size_t n, cap;
};

struct layer {
	int root;
	struct archive *a;
	const struct lz_layer_options *opts;
	struct lz_err *err;
	struct lz_layer_report rep;
	struct pathset created;
	struct dirfix *fix;
	size_t nfix, capfix;
	uint64_t tracked; /* bytes of remembered paths, bounded */
	uint64_t progress_last;
};

/* An entry path split for descriptor-relative use. */
struct lpath {
	char full[LZ_LAYER_PATH_MAX + 1]; /* normalised; "" is the root */
	size_t len;
	char parent[LZ_LAYER_PATH_MAX + 1]; /* "" when the parent is the root */
	const char *name;                   /* last component, inside full */
};

static const char *shown(const char *path)
{
	return path[0] ? path : ".";
}

static uint64_t path_hash(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static char **pathset_slot(char **slot, size_t cap, const char *p, size_t n)
{
	size_t mask = cap - 1;
	for (size_t i = path_hash(p, n) & mask;; i = (i + 1) & mask) {
		char *k = slot[i];
		/* strncmp stops at k's NUL; p has no NUL within n bytes. */
		if (k == NULL || (strncmp(k, p, n) == 0 && k[n] == '\0'))
			return &slot[i];
	}
}

static bool pathset_has(const struct pathset *s, const char *p, size_t n)
{
	return s->cap > 0 && *pathset_slot(s->slot, s->cap, p, n) != NULL;
}

/* Returns 1 when added, 0 when already present, -ENOMEM. */
static int pathset_add(struct pathset *s, const char *p, size_t n)
{
	if ((s->n + 1) * 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		char **slot = calloc(cap, sizeof(*slot));
		if (slot == NULL)
			return -ENOMEM;
		for (size_t i = 0; i < s->cap; i++)
			if (s->slot[i] != NULL)
				*pathset_slot(slot, cap, s->slot[i], strlen(s->slot[i])) =
					s->slot[i];
		free(s->slot);
		s->slot = slot;
		s->cap = cap;
	}
	char **at = pathset_slot(s->slot, s->cap, p, n);
	if (*at != NULL)
		return 0;
	*at = strndup(p, n);
	if (*at == NULL)
		return -ENOMEM;
	s->n++;
	return 1;
}

static void pathset_free(struct pathset *s)
{
	for (size_t i = 0; i < s->cap; i++)
		free(s->slot[i]);
	free(s->slot);
	*s = (struct pathset){ 0 };
}

static void names_free(struct names *ns)
{
	for (size_t i = 0; i < ns->n; i++)
		free(ns->v[i]);
	free(ns->v);
	*ns = (struct names){ 0 };
}

static int names_push(struct names *ns, const char *s)
{
	if (ns->n == ns->cap) {
		size_t cap = ns->cap ? ns->cap * 2 : 16;
		char **v = reallocarray(ns->v, cap, sizeof(*v));
		if (v == NULL)
			return -ENOMEM;
		ns->v = v;
		ns->cap = cap;
	}
	if ((ns->v[ns->n] = strdup(s)) == NULL)
		return -ENOMEM;
	ns->n++;
	return 0;
}

static void archive_read_freep(struct archive **a)
{
	if (*a != NULL)
		archive_read_free(*a);
	*a = NULL;
}

static void layer_done(struct layer *L)
{
	pathset_free(&L->created);
	for (size_t i = 0; i < L->nfix; i++)
		free(L->fix[i].path);
	free(L->fix);
	L->fix = NULL;
	L->nfix = L->capfix = 0;
}

/* ---- errors -------------------------------------------------------------- */

static int fail_sys(struct layer *L, int e, const char *path, const char *op, const char *object)
{
	if (e <= 0)
		e = EIO;
	return lz_err_set(L->err, e, "layer entry '%s': %s '%s': %s", shown(path), op,
			  shown(object), strerror(e));
}

static int refuse(struct layer *L, const char *path, const char *why)
{
	return lz_err_set(L->err, EINVAL, "layer entry '%s' refused: %s", shown(path), why);
}

/* libarchive reports format problems with its own codes; a refusal is
 * EINVAL, an I/O or memory failure keeps its errno. */
static int fail_archive(struct layer *L, const char *path, const char *op)
{
	int e = archive_errno(L->a);
	const char *msg = archive_error_string(L->a);
	if (e <= 0 || e == EILSEQ)
		e = EINVAL;
	if (path != NULL)
		return lz_err_set(L->err, e, "layer entry '%s': %s: %s", shown(path), op,
				  msg ? msg : "unknown libarchive error");
	return lz_err_set(L->err, e, "layer: %s: %s", op, msg ? msg : "unknown libarchive error");
}

/* ---- paths --------------------------------------------------------------- */

/* Normalises the entry path in[0..len) into p: strips "./" prefixes, drops
 * "." and empty components and trailing slashes ("." and "./" name the
 * root, ""). Refuses empty, absolute, NUL-bearing, over-long and ".."
 * paths, over-long components, and a ".wh." component that is not last. */
static int lpath_parse(struct layer *L, const char *in, size_t len, struct lpath *p)
{
	const char *why = NULL;
	size_t o = 0, last = 0;

	if (len == 0)
		why = "empty path";
	else if (len > LZ_LAYER_PATH_MAX)
		why = "path longer than 4096 bytes";
	else if (memchr(in, '\0', len) != NULL)
		why = "path contains a NUL byte";
	else if (in[0] == '/')
		why = "absolute path";
	for (size_t i = 0; why == NULL && i < len;) {
		size_t j = i;
		while (j < len && in[j] != '/')
			j++;
		size_t n = j - i;
		if (n == 0 || (n == 1 && in[i] == '.')) {
			i = j + 1;
			continue;
		}
		if (n == 2 && in[i] == '.' && in[i + 1] == '.') {
			why = "path contains a '..' component";
			break;
		}
		if (n > LZ_LAYER_NAME_MAX) {
			why = "path component longer than 255 bytes";
			break;
		}
		if (o > 0 && o - last >= WH_PREFIX_LEN &&
		    memcmp(p->full + last, WH_PREFIX, WH_PREFIX_LEN) == 0) {
			why = "whiteout name used as a directory";
			break;
		}
		if (o > 0)
			p->full[o++] = '/';
		last = o;
		memcpy(p->full + o, in + i, n);
		o += n;
		i = j + 1;
	}
	if (why != NULL) {
		/* The raw path may hold a NUL or be huge: show a bounded prefix. */
		return lz_err_set(L->err, EINVAL, "layer entry '%.*s' refused: %s",
				  (int)strnlen(in, len < 256 ? len : 256), in, why);
	}
	p->full[o] = '\0';
	p->len = o;
	memcpy(p->parent, p->full, last > 0 ? last - 1 : 0);
	p->parent[last > 0 ? last - 1 : 0] = '\0';
	p->name = p->full + last;
	return 0;
}

/* Appends "/name" (or "name" to the empty root path) to buf of capacity
 * LZ_LAYER_PATH_MAX + 1; *len is updated. */
static int path_push(char *buf, size_t *len, const char *name)
{
	size_t n = strlen(name), sep = *len > 0;
	if (*len + sep + n > LZ_LAYER_PATH_MAX)
		return -ENAMETOOLONG;
	if (sep)
		buf[(*len)++] = '/';
	memcpy(buf + *len, name, n + 1);
	*len += n;
	return 0;
}

static void path_pop(char *buf, size_t *len, size_t old)
{
	*len = old;
	buf[old] = '\0';
}

/* Remembers that this layer wrote path: adds it and its ancestors. */
static int mark_created(struct layer *L, const char *path, size_t len)
{
	while (len > 0) {
		L->tracked += len + 1 + 2 * sizeof(char *);
		if (L->tracked > LZ_LAYER_MAX_TRACKED)
			return lz_err_set(L->err, E2BIG,
					  "layer entry '%s': more than %u bytes of paths", path,
					  LZ_LAYER_MAX_TRACKED);
		int r = pathset_add(&L->created, path, len);
		if (r < 0)
			return lz_err_set(L->err, -r, "layer entry '%s': out of memory", path);
		if (r == 0)
			return 0; /* present already, and so are its ancestors */
		while (len > 0 && path[len - 1] != '/')
			len--;
		if (len > 0)
			len--;
	}
	return 0;
}

/* ---- descriptor-relative primitives -------------------------------------- */

static int open_beneath(struct layer *L, const char *rel, int flags)
{
	int fd = lz_openat2(L->root, rel[0] ? rel : ".", flags | O_DIRECTORY | O_CLOEXEC,
			    LZ_RESOLVE_OWNED);
	return fd < 0 ? -errno : fd;
}

/* Describes why rel could not be opened as a directory for entry. */
static int dir_error(struct layer *L, int e, const char *entry, const char *rel)
{
	switch (e) {
	case ELOOP:
		return lz_err_set(L->err, EINVAL,
				  "layer entry '%s' refused: '%s' is or crosses a symbolic link",
				  shown(entry), shown(rel));
	case EXDEV:
		return lz_err_set(L->err, EINVAL,
				  "layer entry '%s' refused: '%s' escapes the staging root or "
				  "crosses a mount",
				  shown(entry), shown(rel));
	case ENOTDIR:
		return lz_err_set(L->err, EINVAL,
				  "layer entry '%s' refused: '%s' has a non-directory component",
				  shown(entry), shown(rel));
	default:
		return fail_sys(L, e, entry, "open directory", rel);
	}
}

/* chmod of dirfd/name that never follows a symlink. fchmodat2 (Linux 6.6)
 * does it in one call; before that, the staging tree has a single writer,
 * so a check that name is not a symlink cannot go stale. */
static int chmod_nofollow(int dirfd, const char *name, mode_t mode)
{
	if (syscall(SYS_fchmodat2, dirfd, name, mode, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	if (errno != ENOSYS)
		return -errno;
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (S_ISLNK(st.st_mode))
		return -ELOOP;
	return fchmodat(dirfd, name, mode, 0) < 0 ? -errno : 0;
}

/* mkdir with an exact mode (umask-proof). */
static int make_dir(int dirfd, const char *name, mode_t mode)
{
	if (mkdirat(dirfd, name, mode) < 0)
		return -errno;
	return chmod_nofollow(dirfd, name, mode);
}

/* Opens the directory rel (beneath the root) as O_PATH. With create, missing
 * components are made 0755 (implied directories); without it, ENOENT and
 * ENOTDIR are returned quietly for the caller to interpret. */
static int open_dir(struct layer *L, const char *rel, bool create, const char *entry, int *ret_fd)
{
	int fd = open_beneath(L, rel, O_PATH);
	if (fd >= 0) {
		*ret_fd = fd;
		return 0;
	}
	if (!create && (fd == -ENOENT || fd == -ENOTDIR))
		return fd;
	if (fd != -ENOENT)
		return dir_error(L, -fd, entry, rel);

	/* Walk from the root, creating what is missing. */
	_cleanup_close_ int cur = open_beneath(L, "", O_PATH);
	if (cur < 0)
		return fail_sys(L, -cur, entry, "open directory", "");
	char prefix[LZ_LAYER_PATH_MAX + 1];
	size_t plen = 0;
	for (const char *c = rel; *c;) {
		size_t n = strcspn(c, "/");
		char name[LZ_LAYER_NAME_MAX + 1];
		memcpy(name, c, n);
		name[n] = '\0';
		c += n + (c[n] == '/');
		if (path_push(prefix, &plen, name) < 0)
			return fail_sys(L, ENAMETOOLONG, entry, "open directory", rel);

		int next =
			lz_openat2(cur, name, O_PATH | O_DIRECTORY | O_CLOEXEC, LZ_RESOLVE_OWNED);
		if (next < 0 && errno == ENOENT) {
			int r = make_dir(cur, name, 0755);
			if (r < 0 && r != -EEXIST)
				return fail_sys(L, -r, entry, "create directory", prefix);
			next = lz_openat2(cur, name, O_PATH | O_DIRECTORY | O_CLOEXEC,
					  LZ_RESOLVE_OWNED);
		}
		if (next < 0)
			return dir_error(L, errno, entry, prefix);
		lz_close_fdp(&cur);
		cur = next;
	}
	*ret_fd = TAKE_FD(cur);
	return 0;
}

/* Lists the names in directory fd (consumed), "." and ".." excluded. */
static int list_dir(int fd, struct names *ret)
{
	DIR *d = fdopendir(fd);
	if (d == NULL) {
		int e = errno;
		close(fd);
		return -e;
	}
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (de == NULL) {
			int e = errno;
			closedir(d);
			return -e;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		int r = names_push(ret, de->d_name);
		if (r < 0) {
			closedir(d);
			return r;
		}
	}
}

/* Empties the directory at path (a buffer of capacity LZ_LAYER_PATH_MAX + 1
 * holding *len bytes; restored on return). Symlinks are unlinked, never
 * followed; subdirectories are emptied then removed. */
static int empty_dir(struct layer *L, char *path, size_t *len, const char *entry)
{
	_cleanup_(names_free) struct names ns = { 0 };
	_cleanup_(names_free) struct names subs = { 0 };
	int fd = open_beneath(L, path, O_RDONLY);
	if (fd < 0)
		return dir_error(L, -fd, entry, path);
	_cleanup_close_ int dfd = open_beneath(L, path, O_PATH);
	if (dfd < 0) {
		close(fd);
		return dir_error(L, -dfd, entry, path);
	}
	int r = list_dir(fd, &ns);
	if (r < 0)
		return fail_sys(L, -r, entry, "list directory", path);
	for (size_t i = 0; i < ns.n; i++) {
		if (unlinkat(dfd, ns.v[i], 0) == 0 || errno == ENOENT)
			continue;
		if (errno != EISDIR)
			return fail_sys(L, errno, entry, "remove", ns.v[i]);
		if ((r = names_push(&subs, ns.v[i])) < 0)
			return fail_sys(L, -r, entry, "remove", ns.v[i]);
	}
	lz_close_fdp(&dfd); /* one descriptor per level at most */

	size_t old = *len;
	for (size_t i = 0; i < subs.n; i++) {
		if (path_push(path, len, subs.v[i]) < 0)
			return fail_sys(L, ENAMETOOLONG, entry, "remove", path);
		r = empty_dir(L, path, len, entry);
		path_pop(path, len, old);
		if (r < 0)
			return r;
	}
	if (subs.n > 0) {
		dfd = open_beneath(L, path, O_PATH);
		if (dfd < 0)
			return dir_error(L, -dfd, entry, path);
		for (size_t i = 0; i < subs.n; i++)
			if (unlinkat(dfd, subs.v[i], AT_REMOVEDIR) < 0 && errno != ENOENT)
				return fail_sys(L, errno, entry, "remove directory", subs.v[i]);
	}
	return 0;
}

/* Removes dirfd/name (whose root-relative path is in path) recursively,
 * without following symlinks. A missing name is not an error. */
static int remove_entry(struct layer *L, int dirfd, const char *name, char *path, size_t *len,
			const char *entry)
{
	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR)
		return fail_sys(L, errno, entry, "remove", path);
	int r = empty_dir(L, path, len, entry);
	if (r < 0)
		return r;
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return fail_sys(L, errno, entry, "remove directory", path);
	return 0;
}

/* Removes the lower-layer content of the directory at path: every child not
 * in the created set; children in the set that are directories are pruned
 * in turn. A missing path is not an error. */
static int prune_lower(struct layer *L, char *path, size_t *len, const char *entry)
{
	_cleanup_(names_free) struct names ns = { 0 };
	_cleanup_(names_free) struct names keep = { 0 };
	int fd = open_beneath(L, path, O_RDONLY);
	if (fd == -ENOENT || fd == -ENOTDIR)
		return 0;
	if (fd < 0)
		return dir_error(L, -fd, entry, path);
	_cleanup_close_ int dfd = open_beneath(L, path, O_PATH);
	if (dfd < 0) {
		close(fd);
		return dir_error(L, -dfd, entry, path);
	}
	int r = list_dir(fd, &ns);
	if (r < 0)
		return fail_sys(L, -r, entry, "list directory", path);

	size_t old = *len;
	for (size_t i = 0; i < ns.n; i++) {
		if (path_push(path, len, ns.v[i]) < 0)
			return fail_sys(L, ENAMETOOLONG, entry, "remove", path);
		r = 0;
		if (pathset_has(&L->created, path, *len)) {
			struct stat st;
			if (fstatat(dfd, ns.v[i], &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISDIR(st.st_mode))
				r = names_push(&keep, ns.v[i]);
		} else {
			r = remove_entry(L, dfd, ns.v[i], path, len, entry);
		}
		path_pop(path, len, old);
		if (r < 0)
			return r == -ENOMEM ? fail_sys(L, ENOMEM, entry, "prune", path) : r;
	}
	lz_close_fdp(&dfd);
	for (size_t i = 0; i < keep.n; i++) {
		if (path_push(path, len, keep.v[i]) < 0)
			return fail_sys(L, ENAMETOOLONG, entry, "prune", path);
		r = prune_lower(L, path, len, entry);
		path_pop(path, len, old);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Clears the way for a new entry at pfd/name. Returns 1 when an existing
 * directory is kept (keep_dir), 0 when the name is now free. */
static int make_room(struct layer *L, int pfd, const struct lpath *p, bool keep_dir,
		     struct stat *ret_st)
{
	struct stat st;
	if (fstatat(pfd, p->name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return fail_sys(L, errno, p->full, "stat", p->full);
	}
	if (keep_dir && S_ISDIR(st.st_mode)) {
		if (ret_st)
			*ret_st = st;
		return 1;
	}
	char buf[LZ_LAYER_PATH_MAX + 1];
	size_t len = p->len;
	memcpy(buf, p->full, len + 1);
	int r = remove_entry(L, pfd, p->name, buf, &len, p->full);
	return r < 0 ? r : 0;
}

/* ---- metadata ------------------------------------------------------------ */

static int entry_owner(struct layer *L, struct archive_entry *e, const char *path, uid_t *uid,
		       gid_t *gid)
{
	la_int64_t u = archive_entry_uid(e), g = archive_entry_gid(e);
	/* (uid_t)-1 means "leave unchanged" to chown: refuse it too. */
	if (u < 0 || u >= (la_int64_t)UINT32_MAX || g < 0 || g >= (la_int64_t)UINT32_MAX)
		return refuse(L, path, "owner or group out of range");
	*uid = (uid_t)u;
	*gid = (gid_t)g;
	return 0;
}

static void entry_times(struct archive_entry *e, struct timespec ts[2])
{
	if (archive_entry_mtime_is_set(e)) {
		long ns = archive_entry_mtime_nsec(e);
		ts[1].tv_sec = archive_entry_mtime(e);
		ts[1].tv_nsec = ns >= 0 && ns < 1000000000L ? ns : 0;
	} else {
		ts[1].tv_sec = 0;
		ts[1].tv_nsec = UTIME_OMIT;
	}
	ts[0] = ts[1];
}

static void record_sample(char samples[][LZ_LAYER_REPORT_TEXT], uint64_t count, const char *a,
			  const char *b)
{
	if (count > LZ_LAYER_REPORT_PATHS)
		return;
	/* Samples are diagnostics: truncation is fine. */
	char *out = samples[count - 1];
	size_t n = strnlen(shown(a), LZ_LAYER_REPORT_TEXT - 1);
	memcpy(out, shown(a), n);
	if (b != NULL && n + 1 < LZ_LAYER_REPORT_TEXT) {
		size_t m = strnlen(b, LZ_LAYER_REPORT_TEXT - n - 2);
		out[n++] = ' ';
		memcpy(out + n, b, m);
		n += m;
	}
	out[n] = '\0';
}

static void skip_xattr(struct layer *L, const char *path, const char *name)
{
	L->rep.skipped_xattrs++;
	record_sample(L->rep.skipped_xattr_samples, L->rep.skipped_xattrs, path, name);
}

static bool xattr_allowed(const char *name)
{
	return (strncmp(name, "user.", 5) == 0 && name[5] != '\0') ||
	       strcmp(name, "security.capability") == 0;
}

/* Applies the entry's allowed xattrs to fd; fd < 0 means the object cannot
 * carry them here (symlink, FIFO, device) and every xattr is skipped. */
static int apply_xattrs(struct layer *L, struct archive_entry *e, int fd, const char *path)
{
	const char *name;
	const void *value;
	size_t size;
	const char *seen[LZ_LAYER_MAX_XATTRS];
	size_t nseen = 0;
	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
		/* libarchive surfaces an xattr once per pax spelling
		 * (SCHILY.xattr.*, LIBARCHIVE.xattr.*): the first one wins. */
		bool dup = false;
		for (size_t i = 0; name != NULL && i < nseen && !dup; i++)
			dup = strcmp(seen[i], name) == 0;
		if (dup)
			continue;
		if (nseen == LZ_LAYER_MAX_XATTRS)
			return refuse(L, path, "too many xattrs");
		if (name != NULL)
			seen[nseen++] = name;
		if (name == NULL || fd < 0 || !xattr_allowed(name)) {
			skip_xattr(L, path, name ? name : "(unnamed)");
			continue;
		}
		if (fsetxattr(fd, name, value, size, 0) < 0) {
			if (errno == ENOTSUP || errno == EPERM) {
				skip_xattr(L, path, name);
				continue;
			}
			return fail_sys(L, errno, path, "set xattr on", path);
		}
	}
	return 0;
}

/* Owner, then mode (chown clears setuid/setgid), then times, for a
 * non-regular, non-directory object at pfd/name. */
static int finish_special(struct layer *L, struct archive_entry *e, int pfd, const struct lpath *p,
			  bool chmod)
{
	uid_t uid = 0;
	gid_t gid = 0;
	struct timespec ts[2];
	int r = entry_owner(L, e, p->full, &uid, &gid);
	if (r < 0)
		return r;
	if (fchownat(pfd, p->name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
		return fail_sys(L, errno, p->full, "chown", p->full);
	if (chmod && (r = chmod_nofollow(pfd, p->name, archive_entry_perm(e) & 07777)) < 0)
		return fail_sys(L, -r, p->full, "chmod", p->full);
	if ((r = apply_xattrs(L, e, -1, p->full)) < 0)
		return r;
	entry_times(e, ts);
	if (utimensat(pfd, p->name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return fail_sys(L, errno, p->full, "set times of", p->full);
	return 0;
}

static void progress(struct layer *L)
{
	la_int64_t done = archive_filter_bytes(L->a, -1);
	if (done < 0)
		return;
	L->rep.input_bytes = (uint64_t)done;
	if (L->opts && L->opts->progress &&
	    (uint64_t)done - L->progress_last >= LZ_LAYER_PROGRESS_STEP) {
		L->progress_last = (uint64_t)done;
		L->opts->progress(L->opts->progress_ctx, (uint64_t)done);
	}
}

/* ---- entry types --------------------------------------------------------- */

static int write_all(int fd, const char *buf, size_t len, off_t off)
{
	while (len > 0) {
		ssize_t n = pwrite(fd, buf, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

static int apply_regular(struct layer *L, struct archive_entry *e, int pfd, const struct lpath *p)
{
	uid_t uid = 0;
	gid_t gid = 0;
	struct timespec ts[2];
	int r = entry_owner(L, e, p->full, &uid, &gid);
	if (r < 0)
		return r;
	if ((r = make_room(L, pfd, p, false, NULL)) < 0)
		return r;
	_cleanup_close_ int fd =
		openat(pfd, p->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return fail_sys(L, errno, p->full, "create", p->full);

	uint64_t end = 0;
	for (;;) {
		const void *buf;
		size_t len;
		la_int64_t off;
		int ar = archive_read_data_block(L->a, &buf, &len, &off);
		if (ar == ARCHIVE_EOF)
			break;
		if (ar != ARCHIVE_OK)
			return fail_archive(L, p->full, "reading content");
		if (off < 0 || (uint64_t)off > INT64_MAX - len)
			return refuse(L, p->full, "bad content offset");
		uint64_t max = L->opts ? L->opts->max_regular_bytes : 0;
		if (max > 0 && L->rep.regular_bytes + len > max)
			return lz_err_set(L->err, EFBIG,
					  "layer entry '%s': layer content exceeds %llu bytes",
					  p->full, (unsigned long long)max);
		if ((r = write_all(fd, buf, len, (off_t)off)) < 0)
			return fail_sys(L, -r, p->full, "write", p->full);
		L->rep.regular_bytes += len;
		if ((uint64_t)off + len > end)
			end = (uint64_t)off + len;
		progress(L);
	}
	la_int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
	if (size > 0 && (uint64_t)size > end && ftruncate(fd, (off_t)size) < 0) /* sparse tail */
		return fail_sys(L, errno, p->full, "truncate", p->full);

	if (fchown(fd, uid, gid) < 0)
		return fail_sys(L, errno, p->full, "chown", p->full);
	if (fchmod(fd, archive_entry_perm(e) & 07777) < 0)
		return fail_sys(L, errno, p->full, "chmod", p->full);
	if ((r = apply_xattrs(L, e, fd, p->full)) < 0)
		return r;
	entry_times(e, ts);
	if (futimens(fd, ts) < 0)
		return fail_sys(L, errno, p->full, "set times of", p->full);
	return 0;
}

static int add_fixup(struct layer *L, struct archive_entry *e, const char *path,
		     const struct stat *st)
{
	if (L->nfix == L->capfix) {
		size_t cap = L->capfix ? L->capfix * 2 : 64;
		struct dirfix *v = reallocarray(L->fix, cap, sizeof(*v));
		if (v == NULL)
			return lz_err_set(L->err, ENOMEM, "layer entry '%s': out of memory",
					  shown(path));
		L->fix = v;
		L->capfix = cap;
	}
	size_t n = strlen(path);
	L->tracked += n + 1 + sizeof(struct dirfix);
	if (L->tracked > LZ_LAYER_MAX_TRACKED)
		return lz_err_set(L->err, E2BIG, "layer entry '%s': more than %u bytes of paths",
				  shown(path), LZ_LAYER_MAX_TRACKED);
	struct dirfix *f = &L->fix[L->nfix];
	if ((f->path = strdup(path)) == NULL)
		return lz_err_set(L->err, ENOMEM, "layer entry '%s': out of memory", shown(path));
	f->seq = L->rep.entries;
	f->dev = st->st_dev;
	f->ino = st->st_ino;
	f->mode = archive_entry_perm(e) & 07777;
	entry_times(e, f->times);
	L->nfix++;
	return 0;
}

static int apply_dir(struct layer *L, struct archive_entry *e, int pfd, const struct lpath *p)
{
	uid_t uid = 0;
	gid_t gid = 0;
	struct stat st;
	int r = entry_owner(L, e, p->full, &uid, &gid);
	if (r < 0)
		return r;

	if (p->len == 0) { /* the root itself: pfd is the root */
		if (fchownat(pfd, "", uid, gid, AT_EMPTY_PATH) < 0)
			return fail_sys(L, errno, "", "chown", "");
		if (archive_entry_xattr_count(e) > 0) {
			_cleanup_close_ int fd = open_beneath(L, "", O_RDONLY);
			if (fd < 0)
				return dir_error(L, -fd, "", "");
			if ((r = apply_xattrs(L, e, fd, "")) < 0)
				return r;
		}
		if (fstat(pfd, &st) < 0)
			return fail_sys(L, errno, "", "stat", "");
		return add_fixup(L, e, "", &st);
	}

	if ((r = make_room(L, pfd, p, true, &st)) < 0)
		return r;
	if (r == 0) {
		/* 0700 until the fixup: the content is written first. */
		if ((r = make_dir(pfd, p->name, 0700)) < 0)
			return fail_sys(L, -r, p->full, "create directory", p->full);
	}
	if (fchownat(pfd, p->name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
		return fail_sys(L, errno, p->full, "chown", p->full);
	if (archive_entry_xattr_count(e) > 0) {
		_cleanup_close_ int fd =
			openat(pfd, p->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return fail_sys(L, errno, p->full, "open directory", p->full);
		if ((r = apply_xattrs(L, e, fd, p->full)) < 0)
			return r;
	}
	if (fstatat(pfd, p->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return fail_sys(L, errno, p->full, "stat", p->full);
	return add_fixup(L, e, p->full, &st);
}

static int apply_symlink(struct layer *L, struct archive_entry *e, int pfd, const struct lpath *p)
{
	const char *target = archive_entry_symlink(e);
	if (target == NULL || target[0] == '\0')
		return refuse(L, p->full, "symbolic link without a target");
	if (strlen(target) > LZ_LAYER_PATH_MAX)
		return refuse(L, p->full, "symbolic link target longer than 4096 bytes");
	int r = make_room(L, pfd, p, false, NULL);
	if (r < 0)
		return r;
	if (symlinkat(target, pfd, p->name) < 0)
		return fail_sys(L, errno, p->full, "create symbolic link", p->full);
	return finish_special(L, e, pfd, p, false);
}

static int apply_fifo(struct layer *L, struct archive_entry *e, int pfd, const struct lpath *p)
{
	int r = make_room(L, pfd, p, false, NULL);
	if (r < 0)
		return r;
	if (mkfifoat(pfd, p->name, 0600) < 0)
		return fail_sys(L, errno, p->full, "create FIFO", p->full);
	return finish_special(L, e, pfd, p, true);
}

static int apply_device(struct layer *L, struct archive_entry *e, int pfd, const struct lpath *p)
{
	mode_t type = archive_entry_filetype(e) == AE_IFBLK ? S_IFBLK : S_IFCHR;
	dev_t dev = makedev(archive_entry_rdevmajor(e), archive_entry_rdevminor(e));
	int r = make_room(L, pfd, p, false, NULL);
	if (r < 0)
		return r;
	if (mknodat(pfd, p->name, type | 0600, dev) < 0) {
		if (errno != EPERM)
			return fail_sys(L, errno, p->full, "create device", p->full);
		/* No device nodes in a user namespace: not fatal, reported. */
		L->rep.skipped_devices++;
		record_sample(L->rep.skipped_device_paths, L->rep.skipped_devices, p->full, NULL);
		return 0;
	}
	return finish_special(L, e, pfd, p, true);
}

/* A hard link names an existing non-directory of the staging tree, resolved
 * like any entry path (beneath, no symlink on the way); linkat without
 * AT_SYMLINK_FOLLOW links that object itself, even when it is a symlink. */
static int apply_hardlink(struct layer *L, const char *raw_target, int pfd, const struct lpath *p)
{
	struct lpath t;
	int r = lpath_parse(L, raw_target, strlen(raw_target), &t);
	if (r < 0)
		return lz_err_prefix(L->err, r, "layer entry '%s': hard link target: ", p->full);
	if (t.len == 0)
		return refuse(L, p->full, "hard link to the root directory");

	_cleanup_close_ int tpfd = -EBADF;
	r = open_dir(L, t.parent, false, p->full, &tpfd);
	if (r == -ENOENT || r == -ENOTDIR)
		return lz_err_set(L->err, EINVAL,
				  "layer entry '%s' refused: hard link target '%s' does not exist",
				  p->full, t.full);
	if (r < 0)
		return lz_err_prefix(L->err, r, "hard link target '%s': ", t.full);
	struct stat tst, st;
	if (fstatat(tpfd, t.name, &tst, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return lz_err_set(
				L->err, EINVAL,
				"layer entry '%s' refused: hard link target '%s' does not exist",
				p->full, t.full);
		return fail_sys(L, errno, p->full, "stat", t.full);
	}
	if (S_ISDIR(tst.st_mode))
		return lz_err_set(L->err, EINVAL,
				  "layer entry '%s' refused: hard link target '%s' is a directory",
				  p->full, t.full);
	if (fstatat(pfd, p->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == tst.st_dev &&
	    st.st_ino == tst.st_ino)
		return 0; /* already that inode (including a link to itself) */
	if ((r = make_room(L, pfd, p, false, NULL)) < 0)
		return r;
	if (linkat(tpfd, t.name, pfd, p->name, 0) < 0)
		return fail_sys(L, errno, p->full, "hard link to", t.full);
	return 0;
}

static int apply_whiteout(struct layer *L, const struct lpath *p)
{
	bool opaque = strcmp(p->name, WH_OPAQUE) == 0;
	if (!opaque && strncmp(p->name, WH_META, WH_META_LEN) == 0)
		return 0; /* AUFS metadata: never materialised, hides nothing */
	const char *target = p->name + WH_PREFIX_LEN;
	if (!opaque && (target[0] == '\0' || strcmp(target, ".") == 0 || strcmp(target, "..") == 0))
		return refuse(L, p->full, "whiteout names no entry");
	L->rep.whiteouts++;

	_cleanup_close_ int pfd = -EBADF;
	int r = open_dir(L, p->parent, false, p->full, &pfd);
	if (r == -ENOENT || r == -ENOTDIR)
		return 0; /* nothing below to hide */
	if (r < 0)
		return r;

	char buf[LZ_LAYER_PATH_MAX + 1];
	size_t len = strlen(p->parent);
	memcpy(buf, p->parent, len + 1);
	if (opaque)
		return prune_lower(L, buf, &len, p->full);
	if (path_push(buf, &len, target) < 0)
		return fail_sys(L, ENAMETOOLONG, p->full, "remove", p->full);
	if (!pathset_has(&L->created, buf, len))
		return remove_entry(L, pfd, target, buf, &len, p->full);
	struct stat st;
	if (fstatat(pfd, target, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
		return prune_lower(L, buf, &len, p->full);
	return 0; /* written by this layer: a whiteout hides lower layers only */
}

static int apply_entry(struct layer *L, struct archive_entry *e)
{
	const char *raw = archive_entry_pathname(e);
	if (raw == NULL)
		return lz_err_set(L->err, EINVAL, "layer entry %llu refused: no path",
				  (unsigned long long)L->rep.entries);
	struct lpath p;
	int r = lpath_parse(L, raw, strlen(raw), &p);
	if (r < 0)
		return r;
	if (strncmp(p.name, WH_PREFIX, WH_PREFIX_LEN) == 0)
		return apply_whiteout(L, &p);

	const char *link = archive_entry_hardlink(e);
	unsigned type = archive_entry_filetype(e);
	if (p.len == 0 && (link != NULL || type != AE_IFDIR))
		return refuse(L, ".", "the root can only be a directory");

	_cleanup_close_ int pfd = -EBADF;
	if ((r = open_dir(L, p.parent, true, p.full, &pfd)) < 0)
		return r;
	if (link != NULL)
		r = apply_hardlink(L, link, pfd, &p);
	else
		switch (type) {
		case AE_IFREG:
			r = apply_regular(L, e, pfd, &p);
			break;
		case AE_IFDIR:
			r = apply_dir(L, e, pfd, &p);
			break;
		case AE_IFLNK:
			r = apply_symlink(L, e, pfd, &p);
			break;
		case AE_IFIFO:
			r = apply_fifo(L, e, pfd, &p);
			break;
		case AE_IFCHR:
		case AE_IFBLK:
			r = apply_device(L, e, pfd, &p);
			break;
		default:
			return refuse(L, p.full, "unsupported entry type");
		}
	if (r < 0)
		return r;
	return mark_created(L, p.full, p.len);
}

/* ---- directory fixups ---------------------------------------------------- */

static int fixup_cmp(const void *a, const void *b)
{
	const struct dirfix *x = a, *y = b;
	int c = strcmp(x->path, y->path);
	if (c != 0)
		return c;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Children before parents (reverse lexical order puts "a/b" before "a"); of
 * several entries for one directory, the last in the archive wins. */
static int apply_fixups(struct layer *L)
{
	if (L->nfix == 0)
		return 0;
	qsort(L->fix, L->nfix, sizeof(*L->fix), fixup_cmp);
	for (size_t i = L->nfix; i-- > 0;) {
		const struct dirfix *f = &L->fix[i];
		if (i + 1 < L->nfix && strcmp(f->path, L->fix[i + 1].path) == 0)
			continue;
		_cleanup_close_ int fd = open_beneath(L, f->path, O_RDONLY | O_NOFOLLOW);
		if (fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP)
			continue; /* replaced later in the layer */
		if (fd < 0)
			return dir_error(L, -fd, f->path, f->path);
		struct stat st;
		if (fstat(fd, &st) < 0)
			return fail_sys(L, errno, f->path, "stat", f->path);
		if (st.st_dev != f->dev || st.st_ino != f->ino)
			continue;
		if (fchmod(fd, f->mode) < 0)
			return fail_sys(L, errno, f->path, "chmod", f->path);
		if (futimens(fd, f->times) < 0)
			return fail_sys(L, errno, f->path, "set times of", f->path);
	}
	return 0;
}

/* ---- entry point --------------------------------------------------------- */

/* In the C locale libarchive cannot convert a UTF-8 pax path to the locale
 * and says so with ARCHIVE_WARN, handing out the archive's bytes unchanged:
 * that warning is expected. Any other warning fails the layer. */
static bool benign_warning(struct archive *a)
{
	const char *msg = archive_error_string(a);
	return msg != NULL && strstr(msg, " can't be converted from ") != NULL;
}

int lz_layer_apply(int root_dirfd, int layer_fd, const struct lz_layer_options *opts,
		   struct lz_layer_report *ret_report, struct lz_err *err)
{
	if (root_dirfd < 0 || layer_fd < 0)
		return lz_err_set(err, EBADF, "layer: bad descriptor");

	_cleanup_(layer_done) struct layer L = { .root = root_dirfd, .opts = opts, .err = err };
	_cleanup_(archive_read_freep) struct archive *a = archive_read_new();
	if (a == NULL)
		return lz_err_set(err, ENOMEM, "layer: out of memory");
	L.a = a;
	/* ARCHIVE_WARN from a filter means an external helper program: refused. */
	if (archive_read_support_filter_gzip(a) != ARCHIVE_OK ||
	    archive_read_support_filter_zstd(a) != ARCHIVE_OK ||
	    archive_read_support_filter_none(a) != ARCHIVE_OK ||
	    archive_read_support_format_tar(a) != ARCHIVE_OK)
		return lz_err_set(err, ENOTSUP,
				  "layer: libarchive lacks built-in gzip, zstd or tar support");
	if (archive_read_open_fd(a, layer_fd, LAYER_READ_BLOCK) != ARCHIVE_OK)
		return fail_archive(&L, NULL, "opening layer");

	for (;;) {
		struct archive_entry *e;
		int ar = archive_read_next_header(a, &e);
		if (ar == ARCHIVE_EOF)
			break;
		if (ar != ARCHIVE_OK && !(ar == ARCHIVE_WARN && benign_warning(a)))
			return fail_archive(&L, NULL, "reading entry header");
		if (L.rep.entries >= LZ_LAYER_MAX_ENTRIES)
			return lz_err_set(err, E2BIG, "layer: more than %u entries",
					  LZ_LAYER_MAX_ENTRIES);
		L.rep.entries++;
		int r = apply_entry(&L, e);
		if (r < 0)
			return r;
		progress(&L);
	}
	int r = apply_fixups(&L);
	if (r < 0)
		return r;
	progress(&L);
	if (ret_report)
		*ret_report = L.rep;
	return 0;
}
