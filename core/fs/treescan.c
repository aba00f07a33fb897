/* Read-only tree scans (treescan.h): usage and overlay changes.
 *
 * Both walks are depth-first, every directory opened relative to its parent
 * with open_dir(). The usage walk keeps one directory stream per level; the
 * changes walk reads a directory's names whole (to sort them), closes its
 * stream and keeps only the descriptor (plus the matching lower directory)
 * while it walks them, so what it holds per entry is the names, charged
 * against LZ_TREE_SCAN_MAX_HELD, and per level a stack frame and two
 * descriptors. Anything that cannot be examined marks the result
 * incomplete; only the root's failures, allocation failures and a broken
 * pipe are errors. The workers write fixed-size struct wire records to a
 * pipe that the parent drains while they run. */
#include "fs/treescan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "proc/broker.h"
#include "util/cleanup.h"
#include "util/sys.h"

static int check_name(const char *what, const char *name, struct lz_err *err)
{
	if (name == NULL || name[0] == '\0' || strchr(name, '/') || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0)
		return lz_err_set(err, EINVAL, "%s: invalid name '%s'", what, name ? name : "(null)");
	return 0;
}

/* A directory beneath dirfd, never through a link or onto another mount
 * (EXDEV for a mount point, ELOOP for a symlink). */
static int open_dir(int dirfd, const char *name)
{
	return lz_openat2(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
			  LZ_RESOLVE_OWNED);
}

static DIR *open_stream(int fd)
{
	DIR *d = fdopendir(fd);
	if (d == NULL)
		close(fd);
	return d;
}

static void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
	*d = NULL;
}

static bool is_dot(const char *n)
{
	return n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0'));
}

/* ---- usage ---------------------------------------------------------------- */

/* Inodes with st_nlink > 1 already counted: open addressing, at most half
 * full, allocated at the first such inode. Only one device is ever
 * entered, so the inode number is the key (0: empty slot). */
#define LINK_SLOTS (2u * LZ_TREE_USAGE_MAX_LINKS)

struct linkset {
	uint64_t *slot;
	size_t used;
};

/* 1: count this link's bytes; 0: seen before; -ENOMEM. */
static int linkset_add(struct linkset *s, uint64_t ino)
{
	if (ino == 0)
		return 1;
	if (s->slot == NULL && (s->slot = calloc(LINK_SLOTS, sizeof(*s->slot))) == NULL)
		return -ENOMEM;
	size_t i = (size_t)((ino * 0x9e3779b97f4a7c15ull) >> 32) & (LINK_SLOTS - 1);
	while (s->slot[i] != 0) {
		if (s->slot[i] == ino)
			return 0;
		i = (i + 1) & (LINK_SLOTS - 1);
	}
	if (s->used >= LZ_TREE_USAGE_MAX_LINKS)
		return 1; /* full: from here on per link, as documented */
	s->slot[i] = ino;
	s->used++;
	return 1;
}

struct usage_walk {
	struct lz_tree_usage u;
	uint64_t entries;
	dev_t dev;
	struct linkset links;
};

static int usage_file(struct usage_walk *w, const struct stat *st)
{
	w->u.files++;
	if (st->st_nlink > 1) {
		int r = linkset_add(&w->links, (uint64_t)st->st_ino);
		if (r <= 0)
			return r;
	}
	w->u.bytes += (uint64_t)st->st_blocks * 512u;
	return 0;
}

/* Takes fd (an open directory at depth). */
static int usage_dir(struct usage_walk *w, int fd, int depth, struct lz_err *err)
{
	_cleanup_(closedirp) DIR *d = open_stream(fd);
	if (d == NULL)
		return lz_err_set(err, errno, "opendir: %s", strerror(errno));
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (de == NULL) {
			if (errno)
				w->u.incomplete = true;
			return 0;
		}
		if (is_dot(de->d_name))
			continue;
		if (depth + 1 > LZ_TREE_MAX_DEPTH || w->entries >= LZ_TREE_SCAN_MAX_ENTRIES) {
			w->u.incomplete = true;
			if (w->u.limit == LZ_TREE_LIMIT_NONE)
				w->u.limit = depth + 1 > LZ_TREE_MAX_DEPTH ? LZ_TREE_LIMIT_DEPTH : LZ_TREE_LIMIT_ENTRIES;
			return 0;
		}
		w->entries++;
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT) /* ENOENT: removed since readdir */
				w->u.incomplete = true;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			int r = usage_file(w, &st);
			if (r < 0)
				return lz_err_set(err, -r, "hard link set: %s", strerror(-r));
			continue;
		}
		w->u.dirs++;
		int child = st.st_dev == w->dev ? open_dir(dirfd(d), de->d_name) : -EXDEV;
		struct stat cst;
		if (child >= 0 && (fstat(child, &cst) < 0 || cst.st_dev != w->dev)) {
			close(child);
			child = -1;
		}
		if (child < 0) { /* a mount point, unreadable, or replaced meanwhile */
			w->u.incomplete = true;
			continue;
		}
		w->u.bytes += (uint64_t)cst.st_blocks * 512u;
		int r = usage_dir(w, child, depth + 1, err);
		if (r < 0)
			return lz_err_prefix(err, r, "%s/", de->d_name);
	}
}

int lz_tree_usage(int dirfd, const char *name, struct lz_tree_usage *ret, struct lz_err *err)
{
	int r = check_name("usage", name, err);
	if (r < 0)
		return r;
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return lz_err_set(err, errno, "stat '%s': %s", name, strerror(errno));
	struct usage_walk w = { .u = { 0 } };
	if (!S_ISDIR(st.st_mode)) {
		w.u.files = 1;
		w.u.bytes = (uint64_t)st.st_blocks * 512u;
		*ret = w.u;
		return 0;
	}
	int fd = open_dir(dirfd, name);
	if (fd < 0)
		return lz_err_set(err, errno, "open '%s': %s", name, strerror(errno));
	if (fstat(fd, &st) < 0) {
		r = lz_err_set(err, errno, "stat '%s': %s", name, strerror(errno));
		close(fd);
		return r;
	}
	w.dev = st.st_dev;
	w.u.dirs = 1;
	w.u.bytes = (uint64_t)st.st_blocks * 512u;
	r = usage_dir(&w, fd, 0, err);
	free(w.links.slot);
	if (r < 0)
		return lz_err_prefix(err, r, "%s/", name);
	*ret = w.u;
	return 0;
}

/* ---- changes -------------------------------------------------------------- */

/* One directory's names: NUL-terminated, back to back in buf as readdir
 * gave them, then indexed by v, sorted. Two allocations whatever the count,
 * so what a level holds is what it charged (LZ_TREE_SCAN_MAX_HELD): cap,
 * and NAME_COST per name. Growing buf by realloc may hold the old buffer
 * too for a moment. */
struct names {
	char *buf;
	size_t used, cap;
	char **v;
	size_t n;
	size_t charged; /* this level's part of changes_walk.held */
};

#define NAMES_MIN_CAP 4096u

/* Charged per name besides its bytes: its pointer in v, and as much again
 * for the sort, since qsort may be a merge sort with a scratch copy of v
 * (glibc's is, when that fits in memory). */
#define NAME_COST (2 * sizeof(char *))

static void names_free(struct names *s)
{
	free(s->buf);
	free(s->v);
	*s = (struct names){ 0 };
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b); /* unsigned bytes (C17 7.24.4) */
}

struct changes_walk {
	int out;
	size_t max, listed;
	uint64_t total, entries;
	size_t held, max_held; /* charged by all levels' struct names; held <= max_held */
	bool incomplete;
	enum lz_tree_limit limit; /* the first one hit */
	size_t len;
	char path[LZ_TREE_CHANGE_PATH_MAX];
};

static void cut_short(struct changes_walk *w, enum lz_tree_limit limit)
{
	w->incomplete = true;
	if (w->limit == LZ_TREE_LIMIT_NONE)
		w->limit = limit;
}

/* Charges one more name of len bytes (its NUL included) and NAME_COST,
 * growing buf when needed, never past max_held: doubling, or the rest of
 * the bound when that is less. 1: room made; 0: max_held would be passed;
 * -ENOMEM. */
static int names_reserve(struct changes_walk *w, struct names *s, size_t len)
{
	size_t room = w->max_held - w->held;
	if (room < NAME_COST)
		return 0;
	room -= NAME_COST;
	if (s->cap - s->used < len) {
		size_t want = s->used + len;
		size_t cap = s->cap ? 2 * s->cap : NAMES_MIN_CAP;
		if (cap < want)
			cap = want;
		if (cap - s->cap > room)
			cap = s->cap + room;
		if (cap < want)
			return 0;
		char *buf = realloc(s->buf, cap);
		if (buf == NULL)
			return -ENOMEM;
		s->buf = buf;
		s->charged += cap - s->cap;
		w->held += cap - s->cap;
		s->cap = cap;
	}
	s->charged += NAME_COST;
	w->held += NAME_COST;
	return 1;
}

/* The entries of d, sorted; a bound cuts the listing short (incomplete). */
static int read_names(struct changes_walk *w, DIR *d, struct names *ret)
{
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (de == NULL) {
			if (errno)
				w->incomplete = true;
			break;
		}
		if (is_dot(de->d_name))
			continue;
		if (ret->n >= LZ_TREE_SCAN_MAX_ENTRIES - w->entries) {
			cut_short(w, LZ_TREE_LIMIT_ENTRIES);
			break;
		}
		size_t len = strlen(de->d_name) + 1;
		int r = names_reserve(w, ret, len);
		if (r < 0)
			return r;
		if (r == 0) {
			cut_short(w, LZ_TREE_LIMIT_HELD);
			break;
		}
		memcpy(ret->buf + ret->used, de->d_name, len);
		ret->used += len;
		ret->n++;
	}
	if (ret->n == 0)
		return 0;
	if ((ret->v = malloc(ret->n * sizeof(*ret->v))) == NULL) /* charged name by name */
		return -ENOMEM;
	for (size_t i = 0, off = 0; i < ret->n; i++) {
		ret->v[i] = ret->buf + off;
		off += strlen(ret->v[i]) + 1;
	}
	if (ret->n > 1)
		qsort(ret->v, ret->n, sizeof(*ret->v), cmp_name);
	return 0;
}

/* Worker -> parent records; one writer, read while it runs. */
enum { WIRE_MAGIC = 0x4c5a5453 /* "LZTS" */ };
enum wire_type { WIRE_CHANGE = 1, WIRE_DONE, WIRE_ERROR };

struct wire {
	uint32_t magic;
	uint32_t type;
	int32_t code;        /* WIRE_ERROR: positive errno */
	uint32_t incomplete; /* WIRE_DONE */
	uint32_t limit;      /* WIRE_DONE of a changes scan: enum lz_tree_limit */
	uint32_t unused;     /* keeps the record free of padding */
	uint64_t bytes, files, dirs; /* WIRE_DONE of a usage scan */
	uint64_t listed, total;      /* WIRE_DONE of a changes scan */
	struct lz_tree_change change; /* WIRE_CHANGE */
};

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int emit(struct changes_walk *w, enum lz_tree_change_kind kind, const struct stat *st,
		struct lz_err *err)
{
	w->total++;
	if (w->listed >= w->max)
		return 0;
	struct wire m = { .magic = WIRE_MAGIC, .type = WIRE_CHANGE };
	m.change.kind = kind;
	if (kind != LZ_TREE_DELETED) {
		m.change.mode = st->st_mode;
		m.change.size = (uint64_t)st->st_size;
	}
	memcpy(m.change.path, w->path, w->len + 1);
	int r = write_all(w->out, &m, sizeof(m));
	if (r < 0)
		return lz_err_set(err, -r, "reply: %s", strerror(-r));
	w->listed++;
	return 0;
}

/* Whether the inode of fd carries the xattr user.<key> or trusted.<key>
 * (with value, when value is non-NULL). An O_PATH descriptor (opath) has
 * no fgetxattr; its /proc/self/fd link names exactly its inode without
 * opening it (libfuse passthrough_hp does the same). Unreadable counts as
 * absent: trusted.* is ENODATA without CAP_SYS_ADMIN in the initial
 * namespace. */
static bool has_overlay_xattr(int fd, bool opath, const char *key, const char *value)
{
	static const char *const prefix[] = { "user.", "trusted." };
	char proc[32];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	for (size_t i = 0; i < LZ_ARRAY_SIZE(prefix); i++) {
		char name[64], buf[8];
		snprintf(name, sizeof(name), "%s%s", prefix[i], key);
		ssize_t n = opath ? getxattr(proc, name, buf, sizeof(buf))
				  : fgetxattr(fd, name, buf, sizeof(buf));
		if (n < 0 && errno == ERANGE)
			n = (ssize_t)sizeof(buf); /* present, longer than any value we accept */
		if (n < 0)
			continue;
		if (value == NULL || ((size_t)n == strlen(value) && memcmp(buf, value, (size_t)n) == 0))
			return true;
	}
	return false;
}

/* A whiteout: a character device 0/0, or (overlay "xwhiteout") an empty
 * regular file with overlay.whiteout, which overlayfs itself only honours
 * on an empty file. The file is never opened: an O_PATH descriptor, checked
 * to be the inode that was statted, so an entry swapped for a device node
 * meanwhile is not opened either. */
static bool is_whiteout(struct changes_walk *w, int dirfd, const char *name, const struct stat *st)
{
	if (S_ISCHR(st->st_mode))
		return st->st_rdev == makedev(0, 0);
	if (!S_ISREG(st->st_mode) || st->st_size != 0)
		return false;
	_cleanup_close_ int fd = lz_openat2(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC,
					    LZ_RESOLVE_OWNED);
	struct stat fst;
	if (fd < 0 || fstat(fd, &fst) < 0 || fst.st_ino != st->st_ino || fst.st_dev != st->st_dev ||
	    !S_ISREG(fst.st_mode) || fst.st_size != 0) {
		w->incomplete = true;
		return false;
	}
	return has_overlay_xattr(fd, true, "overlay.whiteout", NULL);
}

/* Appends "/name" (or "name" at the root); false when it does not fit. */
static bool path_push(struct changes_walk *w, const char *name, size_t *saved)
{
	size_t nl = strlen(name), sep = w->len > 0;
	*saved = w->len;
	if (w->len + sep + nl >= sizeof(w->path))
		return false;
	if (sep)
		w->path[w->len++] = '/';
	memcpy(w->path + w->len, name, nl + 1);
	w->len += nl;
	return true;
}

static void path_pop(struct changes_walk *w, size_t saved)
{
	w->len = saved;
	w->path[saved] = '\0';
}

static int changes_dir(struct changes_walk *w, int upper, int lower, int depth, struct lz_err *err);

/* One upper entry name in directory upper (lower: the same directory in
 * the lower, or -1). */
static int changes_entry(struct changes_walk *w, int upper, int lower, const char *name,
			 int depth, struct lz_err *err)
{
	struct stat st, lst;
	if (fstatat(upper, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			w->incomplete = true;
		return 0;
	}
	if (is_whiteout(w, upper, name, &st))
		return emit(w, LZ_TREE_DELETED, &st, err);
	bool in_lower = false;
	if (lower >= 0) {
		if (fstatat(lower, name, &lst, AT_SYMLINK_NOFOLLOW) == 0)
			in_lower = true;
		else if (errno != ENOENT)
			w->incomplete = true; /* unknown: reported as ADDED */
	}
	if (!S_ISDIR(st.st_mode))
		return emit(w, in_lower ? LZ_TREE_CHANGED : LZ_TREE_ADDED, &st, err);

	bool merged = in_lower && S_ISDIR(lst.st_mode);
	_cleanup_close_ int child = open_dir(upper, name);
	if (child < 0) { /* a mount point or unreadable: listed as far as known */
		w->incomplete = true;
		return merged ? 0 : emit(w, in_lower ? LZ_TREE_CHANGED : LZ_TREE_ADDED, &st, err);
	}
	_cleanup_close_ int lchild = -EBADF;
	int r;
	if (has_overlay_xattr(child, false, "overlay.opaque", "y")) {
		r = emit(w, LZ_TREE_OPAQUE, &st, err);
	} else if (merged) {
		/* Its contents are compared with the lower's; itself changed
		 * only where its mode or owner did (a copy-up keeps both: a
		 * chmod or chown made them differ, and persists). */
		if ((lchild = open_dir(lower, name)) < 0) {
			w->incomplete = true; /* cannot compare: not entered */
			return 0;
		}
		bool changed = st.st_mode != lst.st_mode || st.st_uid != lst.st_uid || st.st_gid != lst.st_gid;
		r = changed ? emit(w, LZ_TREE_CHANGED, &st, err) : 0;
	} else {
		r = emit(w, in_lower ? LZ_TREE_CHANGED : LZ_TREE_ADDED, &st, err);
	}
	if (r < 0)
		return r;
	return changes_dir(w, TAKE_FD(child), lchild, depth + 1, err);
}

/* Takes upper (an open directory at depth); lower is borrowed. Its stream
 * (a duplicate of upper) is closed once the names are read. */
static int changes_dir(struct changes_walk *w, int upper, int lower, int depth, struct lz_err *err)
{
	_cleanup_close_ int dir = upper;
	struct names names = { 0 };
	int r;
	{
		int dup = fcntl(dir, F_DUPFD_CLOEXEC, 3);
		_cleanup_(closedirp) DIR *d = dup < 0 ? NULL : open_stream(dup);
		if (d == NULL && depth > 0) {
			/* out of descriptors (a tree deeper than the limit
			 * lets the walk hold): not entered, as an unreadable
			 * directory is not */
			w->incomplete = true;
			return 0;
		}
		if (d == NULL)
			return lz_err_set(err, errno, "opendir: %s", strerror(errno));
		r = read_names(w, d, &names);
	}
	if (r < 0)
		r = lz_err_set(err, -r, "reading '%s': %s", w->len ? w->path : ".", strerror(-r));
	for (size_t i = 0; r == 0 && i < names.n; i++) {
		if (depth + 1 > LZ_TREE_MAX_DEPTH) {
			cut_short(w, LZ_TREE_LIMIT_DEPTH);
			break;
		}
		if (w->entries >= LZ_TREE_SCAN_MAX_ENTRIES) {
			cut_short(w, LZ_TREE_LIMIT_ENTRIES);
			break;
		}
		w->entries++;
		size_t saved;
		if (!path_push(w, names.v[i], &saved)) {
			cut_short(w, LZ_TREE_LIMIT_PATH);
			continue;
		}
		r = changes_entry(w, dir, lower, names.v[i], depth, err);
		path_pop(w, saved);
	}
	w->held -= names.charged;
	names_free(&names);
	return r;
}

/* ---- workers and the parent's side ---------------------------------------- */

/* A walk keeps one or two descriptors per level: let the worker have what
 * LZ_TREE_MAX_DEPTH needs when the hard limit allows (best effort). */
static void raise_nofile(void)
{
	const rlim_t want = 2 * LZ_TREE_MAX_DEPTH + 64;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

struct scan_arg {
	int out, in; /* the pipe's ends: the worker writes out, closes in */
	int dirfd, lower_dirfd;
	const char *name, *lower_name;
	size_t max, max_held;
};

/* Tells the parent the worker's own errno, then fails as usual (the
 * message travels through the broker). */
static int worker_fail(const struct scan_arg *a, int r)
{
	struct wire m = { .magic = WIRE_MAGIC, .type = WIRE_ERROR, .code = -r };
	(void)write_all(a->out, &m, sizeof(m));
	return r;
}

static int worker_usage(void *argp, struct lz_err *err)
{
	const struct scan_arg *a = argp;
	close(a->in);
	raise_nofile();
	struct lz_tree_usage u;
	int r = lz_tree_usage(a->dirfd, a->name, &u, err);
	if (r < 0)
		return worker_fail(a, r);
	struct wire m = { .magic = WIRE_MAGIC, .type = WIRE_DONE, .incomplete = u.incomplete,
			  .limit = u.limit, .bytes = u.bytes, .files = u.files, .dirs = u.dirs };
	if ((r = write_all(a->out, &m, sizeof(m))) < 0)
		return lz_err_set(err, -r, "reply: %s", strerror(-r));
	return 0;
}

static int worker_changes(void *argp, struct lz_err *err)
{
	const struct scan_arg *a = argp;
	close(a->in);
	raise_nofile();
	_cleanup_close_ int upper = open_dir(a->dirfd, a->name);
	if (upper < 0)
		return worker_fail(a, lz_err_set(err, errno, "open upper '%s': %s", a->name,
						 strerror(errno)));
	_cleanup_close_ int lower = -EBADF;
	if (a->lower_name && (lower = open_dir(a->lower_dirfd, a->lower_name)) < 0)
		return worker_fail(a, lz_err_set(err, errno, "open lower '%s': %s", a->lower_name,
						 strerror(errno)));
	struct changes_walk *w = calloc(1, sizeof(*w));
	if (w == NULL)
		return worker_fail(a, lz_err_set(err, ENOMEM, "changes: %s", strerror(ENOMEM)));
	w->out = a->out;
	w->max = a->max;
	w->max_held = a->max_held;
	int r = changes_dir(w, TAKE_FD(upper), lower, 0, err);
	if (r < 0) {
		free(w);
		return worker_fail(a, r);
	}
	struct wire m = { .magic = WIRE_MAGIC, .type = WIRE_DONE, .incomplete = w->incomplete,
			  .limit = w->limit, .listed = w->listed, .total = w->total };
	free(w);
	if ((r = write_all(a->out, &m, sizeof(m))) < 0)
		return lz_err_set(err, -r, "reply: %s", strerror(-r));
	return 0;
}

/* 1: a whole record; 0: EOF before it; -EIO: EOF inside it; -errno. */
static int read_record(int fd, struct wire *m)
{
	size_t got = 0;
	while (got < sizeof(*m)) {
		ssize_t n = read(fd, (char *)m + got, sizeof(*m) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return got == 0 ? 0 : -EIO;
		got += (size_t)n;
	}
	return 1;
}

struct reply {
	struct lz_tree_change *ret; /* changes: the caller's array of max */
	size_t max, n;
	bool done;
	int code; /* a WIRE_ERROR's errno */
	struct wire last;
};

/* One record; false when it breaks the protocol. */
static bool take_record(struct reply *p, const struct wire *m)
{
	if (m->magic != WIRE_MAGIC || p->done || p->code)
		return false;
	switch (m->type) {
	case WIRE_CHANGE:
		if (p->n >= p->max || (unsigned)m->change.kind > LZ_TREE_OPAQUE ||
		    memchr(m->change.path, '\0', sizeof(m->change.path)) == NULL)
			return false;
		p->ret[p->n++] = m->change;
		return true;
	case WIRE_DONE:
		p->done = true;
		p->last = *m;
		return true;
	case WIRE_ERROR:
		if (m->code <= 0 || m->code > 4095)
			return false;
		p->code = m->code;
		return true;
	default:
		return false;
	}
}

/* Spawns fn in a user namespace with map, drains its records into p while
 * it runs, then waits. On success p->done holds the result. */
static int run_worker(const char *label, const struct lz_idmap *map,
		      int (*fn)(void *, struct lz_err *), struct scan_arg *a, struct reply *p,
		      struct lz_err *err)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) < 0)
		return lz_err_set(err, errno, "%s: pipe: %s", label, strerror(errno));
	_cleanup_close_ int in = fds[0], out = fds[1];
	a->in = in;
	a->out = out;
	struct lz_broker_child child = LZ_BROKER_CHILD_INIT;
	struct lz_broker_spec spec = { .label = label, .comm = "lz-treescan",
				       .clone_flags = CLONE_NEWUSER, .map = map, .join_pidfd = -1,
				       .fn = fn, .arg = a };
	int r = lz_broker_spawn(&spec, &child, err);
	if (r < 0)
		return r;
	lz_close_fdp(&out); /* EOF once the worker is gone */

	struct wire *m = malloc(sizeof(*m));
	bool broken = m == NULL;
	while (!broken && (r = read_record(in, m)) > 0)
		broken = !take_record(p, m);
	free(m);
	if (broken || r < 0) {
		lz_broker_kill(&child);
		return lz_err_set(err, EIO, "%s: %s", label,
				  broken ? "malformed reply" : "reply cut short");
	}

	struct lz_err werr = { 0, "" };
	int status = -1;
	r = lz_broker_wait(&child, -1, &status, &werr);
	if (p->code) /* the worker's own failure, with its message */
		return lz_err_set(err, p->code, "%s: %s", label,
				  werr.msg[0] ? werr.msg : strerror(p->code));
	if (r < 0)
		return lz_err_set(err, -r, "%s: %s", label, werr.msg);
	if (status != 0 || !p->done)
		return lz_err_set(err, EIO, "%s: worker exited with status %d and no result", label,
				  status);
	return 0;
}

int lz_tree_usage_in_userns(const struct lz_idmap *map, int dirfd, const char *name,
			    struct lz_tree_usage *ret, struct lz_err *err)
{
	int r = check_name("usage", name, err);
	if (r < 0)
		return r;
	struct scan_arg a = { .dirfd = dirfd, .name = name, .lower_dirfd = -1 };
	struct reply p = { 0 };
	if ((r = run_worker("usage worker", map, worker_usage, &a, &p, err)) < 0)
		return r;
	if (p.last.limit > LZ_TREE_LIMIT_ENTRIES || (p.last.limit != LZ_TREE_LIMIT_NONE && !p.last.incomplete))
		return lz_err_set(err, EIO, "usage worker: a malformed reply");
	*ret = (struct lz_tree_usage){ .bytes = p.last.bytes, .files = p.last.files, .dirs = p.last.dirs,
				       .incomplete = p.last.incomplete != 0, .limit = p.last.limit };
	return 0;
}

int lz_tree_changes_in_userns(const struct lz_idmap *map, int upper_dirfd,
			      const char *upper_name, int lower_dirfd, const char *lower_name,
			      struct lz_tree_change *ret, size_t max,
			      struct lz_tree_changes_count *ret_count, struct lz_err *err)
{
	return lz_tree_changes_in_userns_bounded(map, upper_dirfd, upper_name, lower_dirfd,
						 lower_name, LZ_TREE_SCAN_MAX_HELD, ret, max,
						 ret_count, err);
}

int lz_tree_changes_in_userns_bounded(const struct lz_idmap *map, int upper_dirfd,
				      const char *upper_name, int lower_dirfd,
				      const char *lower_name, size_t max_held,
				      struct lz_tree_change *ret, size_t max,
				      struct lz_tree_changes_count *ret_count, struct lz_err *err)
{
	int r = check_name("changes: upper", upper_name, err);
	if (r < 0)
		return r;
	if (lower_name && (r = check_name("changes: lower", lower_name, err)) < 0)
		return r;
	if (max > 0 && ret == NULL)
		return lz_err_set(err, EINVAL, "changes: no array for %zu changes", max);
	if (max_held == 0 || max_held > LZ_TREE_SCAN_MAX_HELD)
		return lz_err_set(err, EINVAL, "changes: bound of %zu bytes held not in 1 to %u", max_held,
				  LZ_TREE_SCAN_MAX_HELD);
	struct scan_arg a = { .dirfd = upper_dirfd, .name = upper_name, .lower_dirfd = lower_dirfd,
			      .lower_name = lower_name, .max = max, .max_held = max_held };
	struct reply p = { .ret = ret, .max = max };
	if ((r = run_worker("changes worker", map, worker_changes, &a, &p, err)) < 0)
		return r;
	if (p.last.listed != p.n || p.last.total < p.n || p.last.total > LZ_TREE_SCAN_MAX_ENTRIES ||
	    p.last.limit > LZ_TREE_LIMIT_PATH || (p.last.limit != LZ_TREE_LIMIT_NONE && !p.last.incomplete))
		return lz_err_set(err, EIO, "changes worker: inconsistent counts");
	*ret_count = (struct lz_tree_changes_count){ .listed = p.n, .total = p.last.total,
						     .incomplete = p.last.incomplete != 0,
						     .limit = (enum lz_tree_limit)p.last.limit };
	return 0;
}
