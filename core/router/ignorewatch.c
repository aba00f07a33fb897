#include "router/ignorewatch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proc/lockslots.h"
#include "util/cleanup.h"
#include "util/deadline.h"
#include "util/escape.h"
#include "util/sys.h"

#define QUIET_MS 50        /* a burst of changes (git checkout) is one rebuild */
#define RETRY_MS 200       /* an index caught mid-write: try again */
#define MAX_RETRIES 25
#define WATCH_CHUNK 256 /* watches a slot of the shared budget (watch.slots) */

/* No IN_DONT_FOLLOW: directories are watched through their descriptor's
 * /proc/self/fd magic link (opened confined), which must be followed. */
#define DIR_MASK                                                                                   \
	(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | IN_CLOSE_WRITE | IN_ATTRIB | \
	 IN_ONLYDIR | IN_EXCL_UNLINK)
#define NAME_EVENTS (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)

/* K_GITSUB: any other directory below a Git directory (objects/ab, refs/
 * heads): no ignore input, watched for the router's caches. K_INPUT: a
 * directory watched only because the snapshot read a file in it
 * (watch_inputs), outside the workspace or not reached by the walk yet;
 * no key of the router's. */
enum kind { K_TREE, K_GITDIR, K_GITINFO, K_GITSUB, K_GLOBAL, K_INPUT };

/* What the current snapshot read in a watched directory, whatever its
 * kind (a linked worktree's .git/worktrees/<x>, a submodule's
 * .git/modules/<x>, a bare workspace's .bare/, a Git directory outside
 * the workspace): set by watch_inputs after each build. */
enum {
	W_INDEX = 1,  /* a repository's Git directory: index (commondir, gitdir: where it points) */
	W_COMMON = 2, /* a common directory: info/, and worktrees/ and modules/ (new repositories) */
	W_INFO = 4,   /* a common directory's info/: exclude */
};

/* One watched directory, found by its watch descriptor. The path is the
 * chain of parents (so a renamed directory keeps a correct path). */
struct watched {
	int wd;
	bool used;
	bool dead; /* removed: a probe goes on past it */
	uint8_t kind;
	int parent; /* watch descriptor, -1 for the root and the global one */
	char *name;
	dev_t dev; /* the directory's identity, the router's key for it */
	ino_t ino;
	bool holds_global; /* the global excludes file's directory (any kind) */
	uint8_t inputs;    /* W_* */
};

struct lz_ignorewatch {
	lz_router *router;
	struct lz_ignoreclass_inputs in;
	int host_fd, isolated_fd;
	char *global_excludes;
	const char *global_base; /* in global_excludes */
	int ino_fd, stop_fd;
	/* Open addressing by watch descriptor, never more than half full
	 * with the removed ones: the kernel does not reuse a descriptor, so
	 * an array indexed by it grew with every directory the sandbox made
	 * and removed (a helper measured 21 MB for 300,000 of them). */
	struct watched *w;
	size_t cap; /* a power of two, or 0 */
	size_t dead;
	size_t ndirs, max_dirs;
	/* The budget all Domains' routers share: chunks of WATCH_CHUNK
	 * watches, each a slot of the Storage Root's watch.slots (the pool
	 * counts the chunks this watch holds). */
	bool shared;
	struct lz_lockslots pool;
	bool full_warned;
	bool overflowed;
	atomic_ulong published;
	atomic_ulong failed; /* rebuilds that failed (tests) */
	atomic_size_t slots; /* cap, for tests on another thread */
	pthread_t thread;
};

/* Room for need watched directories: within this watch's max_dirs and,
 * shared, within the chunks it holds or can take now. */
static bool room(struct lz_ignorewatch *iw, size_t need)
{
	if (need > iw->max_dirs)
		return false;
	while (iw->shared && (size_t)lz_lockslots_held(&iw->pool) * WATCH_CHUNK < need)
		if (lz_lockslots_take(&iw->pool) < 0)
			return false;
	return true;
}

/* Gives chunks back while one spare chunk stays (no take and give at
 * each directory made and removed at a boundary). */
static void shrink(struct lz_ignorewatch *iw)
{
	size_t held;
	while (iw->shared && (held = lz_lockslots_held(&iw->pool)) > 1 &&
	       (held - 1) * WATCH_CHUNK >= iw->ndirs + WATCH_CHUNK)
		lz_lockslots_give_one(&iw->pool);
}

static size_t wd_hash(int wd, size_t cap)
{
	return ((uint32_t)wd * 2654435761u) & (cap - 1);
}

/* The watched directory of watch descriptor wd, or NULL. */
static struct watched *wd_find(const struct lz_ignorewatch *iw, int wd)
{
	if (iw->cap == 0 || wd < 0)
		return NULL;
	for (size_t i = wd_hash(wd, iw->cap);; i = (i + 1) & (iw->cap - 1)) {
		struct watched *x = &iw->w[i];
		if (x->used && x->wd == wd)
			return x;
		if (!x->used && !x->dead)
			return NULL;
	}
}

/* A free slot for wd, which is not in the table: the table is rebuilt
 * (sized by what it holds, the removed ones dropped) first when it would
 * be more than half full. NULL when out of memory. Moves entries. */
static struct watched *wd_new(struct lz_ignorewatch *iw, int wd)
{
	if ((iw->ndirs + iw->dead + 1) * 2 > iw->cap) {
		size_t cap = 64;
		while (cap < (iw->ndirs + 1) * 4)
			cap *= 2;
		struct watched *n = calloc(cap, sizeof(*n));
		if (n == NULL)
			return NULL;
		for (size_t i = 0; i < iw->cap; i++) {
			if (!iw->w[i].used)
				continue;
			size_t j = wd_hash(iw->w[i].wd, cap);
			while (n[j].used)
				j = (j + 1) & (cap - 1);
			n[j] = iw->w[i];
		}
		free(iw->w);
		iw->w = n;
		iw->cap = cap;
		iw->dead = 0;
		atomic_store(&iw->slots, cap);
	}
	size_t i = wd_hash(wd, iw->cap);
	while (iw->w[i].used)
		i = (i + 1) & (iw->cap - 1);
	if (iw->w[i].dead)
		iw->dead--;
	return &iw->w[i];
}

static void forget_wd(struct lz_ignorewatch *iw, int wd)
{
	struct watched *x = wd_find(iw, wd);
	if (x != NULL) {
		free(x->name);
		*x = (struct watched){ .dead = true };
		iw->ndirs--;
		iw->dead++;
		shrink(iw);
	}
}

static int record_wd(struct lz_ignorewatch *iw, int wd, enum kind k, int parent, const char *name,
		     const struct stat *st)
{
	char *copy = strdup(name);
	if (copy == NULL)
		return -ENOMEM;
	bool holds_global = k == K_GLOBAL;
	uint8_t inputs = 0;
	struct watched *x = wd_find(iw, wd);
	if (x != NULL) { /* the same directory reached twice (IN_MASK_CREATE is not used) */
		if (k == K_GLOBAL || k == K_INPUT) { /* a workspace directory: it stays one */
			free(copy);
			x->holds_global |= k == K_GLOBAL;
			return 0;
		}
		holds_global |= x->holds_global;
		inputs = x->inputs;
		free(x->name);
		iw->ndirs--;
	} else if ((x = wd_new(iw, wd)) == NULL) {
		free(copy);
		return -ENOMEM;
	}
	*x = (struct watched){ .wd = wd, .used = true, .kind = (uint8_t)k, .parent = parent, .name = copy,
			       .dev = st->st_dev, .ino = st->st_ino, .holds_global = holds_global,
			       .inputs = inputs };
	iw->ndirs++;
	return 0;
}

/* The workspace-relative path of watched directory wd ("" for the root). */
static int wd_path(const struct lz_ignorewatch *iw, int wd, char *buf, size_t cap)
{
	char tmp[PATH_MAX];
	size_t end = sizeof(tmp);
	tmp[--end] = '\0';
	for (const struct watched *x = wd_find(iw, wd); x != NULL && x->parent >= 0; x = wd_find(iw, x->parent)) {
		size_t n = strlen(x->name);
		if (n + 1 > end)
			return -ENAMETOOLONG;
		end -= n;
		memcpy(tmp + end, x->name, n);
		tmp[--end] = '/';
	}
	const char *p = tmp + end + (tmp[end] == '/');
	if (strlen(p) + 1 > cap)
		return -ENAMETOOLONG;
	strcpy(buf, p);
	return 0;
}

static int watch_fd(struct lz_ignorewatch *iw, int fd)
{
	char proc[32];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return inotify_add_watch(iw->ino_fd, proc, DIR_MASK);
}

static void warn_full(struct lz_ignorewatch *iw, int e)
{
	lz_router_host_watched(iw->router, false); /* host changes may go unseen now */
	if (iw->full_warned)
		return;
	iw->full_warned = true;
	lz_router_log("watching %zu workspace directories, no more (%s): ignore-rule changes in the others "
		      "are seen at the next change elsewhere or the next launch, and host changes after the "
		      "short cache timeouts",
		      iw->ndirs,
		      e ? strerror(e) : "a quarter of the user's inotify watches for all Domains, at most 65,536");
}

static enum kind child_kind(enum kind parent, const char *name)
{
	if (parent == K_TREE)
		return strcmp(name, ".git") == 0 ? K_GITDIR : K_TREE;
	return parent == K_GITDIR && strcmp(name, "info") == 0 ? K_GITINFO : K_GITSUB;
}

/* A directory found, not yet watched: entry `name` of watched directory
 * parent (-1 and "" for the workspace's root). */
struct pending {
	int parent;
	enum kind kind;
	char *name;
};

struct pending_list {
	struct pending *v;
	size_t n, cap;
};

static int pending_push(struct pending_list *l, int parent, enum kind k, const char *name)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		struct pending *v = realloc(l->v, cap * sizeof(*v));
		if (v == NULL)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	char *copy = strdup(name);
	if (copy == NULL)
		return -ENOMEM;
	l->v[l->n++] = (struct pending){ .parent = parent, .kind = k, .name = copy };
	return 0;
}

/* Watches one pending directory and lists its subdirectories in l.
 * Returns 1 when it holds an ignore input (.gitignore, or it is a Git
 * directory or its info/), 0 when not, -errno on a failure that is not
 * the tree's (memory). One that vanished or became a symlink meanwhile is
 * skipped; one that cannot be opened for another reason (descriptors) is
 * left unwatched, as past the limit. */
static int watch_one(struct lz_ignorewatch *iw, const struct pending *p, struct pending_list *l)
{
	if (!room(iw, iw->ndirs + l->n + 1)) {
		warn_full(iw, 0);
		return 0;
	}
	char dir[PATH_MAX] = "", rel[PATH_MAX];
	if ((p->parent >= 0 && wd_path(iw, p->parent, dir, sizeof(dir)) < 0) ||
	    (size_t)snprintf(rel, sizeof(rel), "%s%s%s", dir, dir[0] ? "/" : "", p->name) >= sizeof(rel))
		return 0; /* deeper than a path: the router refuses such names */
	_cleanup_close_ int fd = lz_openat2(iw->host_fd, rel[0] ? rel : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC,
					    LZ_RESOLVE_CONFINED);
	if (fd < 0) {
		if (errno != ENOENT && errno != ENOTDIR && errno != ELOOP && errno != EXDEV)
			warn_full(iw, errno);
		return 0;
	}
	struct stat st;
	if (fstat(fd, &st) < 0)
		return 0;
	int wd = watch_fd(iw, fd);
	if (wd < 0) {
		if (errno == ENOSPC || errno == ENOMEM)
			warn_full(iw, errno);
		return 0;
	}
	int r = record_wd(iw, wd, p->kind, p->parent, p->name, &st);
	if (r < 0)
		return r;
	int found = p->kind == K_GITDIR || p->kind == K_GITINFO;
	DIR *d = fdopendir(fd);
	if (d == NULL)
		return found;
	fd = -EBADF; /* owned by d */
	struct dirent *de;
	while (r >= 0 && (de = readdir(d)) != NULL) {
		const char *n = de->d_name;
		if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
			continue;
		if (p->kind == K_TREE && strcmp(n, ".gitignore") == 0)
			found = 1;
		if (p->kind == K_TREE && strcmp(n, ".git") == 0 && de->d_type != DT_DIR)
			found = 1; /* perhaps a linked worktree or a submodule: its index */
		bool is_dir = de->d_type == DT_DIR;
		if (de->d_type == DT_UNKNOWN) {
			struct stat cst;
			is_dir = fstatat(dirfd(d), n, &cst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(cst.st_mode);
		}
		if (is_dir)
			r = pending_push(l, wd, child_kind(p->kind, n), n);
	}
	closedir(d);
	return r < 0 ? r : found;
}

/* Watches directory `name` (kind k) of watched directory parent and every
 * directory below it (K_TREE outside Git directories, K_GITDIR for each
 * Git directory, K_GITINFO for its info/, K_GITSUB for the rest of it).
 * Returns 1 when the subtree holds an ignore input, 0 when not, -errno on
 * a failure that is not the tree's (memory). Iterative: a chain of
 * directories as deep as the router allows costs a list on the heap,
 * never the thread's stack. */
static int watch_tree(struct lz_ignorewatch *iw, enum kind k, int parent, const char *name)
{
	struct pending_list l = { 0 };
	int found = 0, r = pending_push(&l, parent, k, name);
	while (r >= 0 && l.n > 0) {
		struct pending p = l.v[--l.n];
		r = watch_one(iw, &p, &l);
		free(p.name);
		found |= r > 0;
	}
	for (size_t i = 0; i < l.n; i++)
		free(l.v[i].name);
	free(l.v);
	return r < 0 ? r : found;
}

/* A directory moved within the workspace keeps its watch: re-link it. */
static void relink(struct lz_ignorewatch *iw, int from_parent, const char *from_name, int to_parent,
		   const char *to_name)
{
	for (size_t i = 0; i < iw->cap; i++) {
		struct watched *x = &iw->w[i];
		if (x->used && x->parent == from_parent && strcmp(x->name, from_name) == 0) {
			char *copy = strdup(to_name);
			if (copy == NULL)
				return;
			free(x->name);
			x->name = copy;
			x->parent = to_parent;
			return;
		}
	}
}

/* The watched directory an event names an entry of, or NULL. */
static const struct watched *event_dir(const struct lz_ignorewatch *iw, const struct inotify_event *ev)
{
	return ev->len == 0 ? NULL : wd_find(iw, ev->wd);
}

/* Whether one event names the global excludes file (its directory may
 * be a workspace directory as well; handle sees the same event). */
static bool global_event(const struct lz_ignorewatch *iw, const struct inotify_event *ev)
{
	const struct watched *x = event_dir(iw, ev);
	return x != NULL && x->holds_global && strcmp(ev->name, iw->global_base) == 0;
}

/* Whether the entry name of watched directory x is a file (or the way
 * to one) the current snapshot read, or where a repository it does not
 * know yet would appear (a new worktrees/<x> or modules/<x>). */
static bool read_input(const struct lz_ignorewatch *iw, const struct watched *x, const char *n, bool dir)
{
	if ((x->inputs & W_INDEX) &&
	    (strcmp(n, "index") == 0 || strcmp(n, "commondir") == 0 || strcmp(n, "gitdir") == 0))
		return true;
	if ((x->inputs & W_COMMON) &&
	    (strcmp(n, "info") == 0 || strcmp(n, "worktrees") == 0 || strcmp(n, "modules") == 0))
		return true;
	if ((x->inputs & W_INFO) && strcmp(n, "exclude") == 0)
		return true;
	/* an entry of <G>/worktrees or <G>/modules, G a Git or common directory */
	const struct watched *up = wd_find(iw, x->parent);
	return dir && up != NULL && (up->kind == K_GITDIR || (up->inputs & W_COMMON)) &&
	       (strcmp(x->name, "worktrees") == 0 || strcmp(x->name, "modules") == 0);
}

/* Whether one event changes an ignore input; adds watches for new
 * directories. */
static bool handle_kind(struct lz_ignorewatch *iw, const struct inotify_event *ev, uint32_t *cookie,
			int *from_wd, char *from_name);

static bool handle(struct lz_ignorewatch *iw, const struct inotify_event *ev, uint32_t *cookie,
		   int *from_wd, char *from_name)
{
	const struct watched *x = event_dir(iw, ev);
	bool input = x != NULL && !(ev->mask & (IN_Q_OVERFLOW | IN_IGNORED)) &&
		     read_input(iw, x, ev->name, (ev->mask & IN_ISDIR) != 0);
	return handle_kind(iw, ev, cookie, from_wd, from_name) || input;
}

static bool handle_kind(struct lz_ignorewatch *iw, const struct inotify_event *ev, uint32_t *cookie,
			int *from_wd, char *from_name)
{
	if (ev->mask & IN_Q_OVERFLOW) {
		/* Changes were lost, new directories perhaps unwatched: the
		 * router's host caches fall back to their short timeouts. */
		if (!iw->overflowed)
			lz_router_log("the workspace watch overflowed; host changes are now seen after the "
				      "short cache timeouts");
		iw->overflowed = true;
		lz_router_host_watched(iw->router, false);
		return true;
	}
	if (ev->mask & IN_IGNORED) {
		forget_wd(iw, ev->wd);
		return false;
	}
	const struct watched *x = event_dir(iw, ev);
	if (x == NULL)
		return false;
	const char *n = ev->name;
	bool dir = ev->mask & IN_ISDIR;
	enum kind kind = (enum kind)x->kind;
	if (kind == K_GLOBAL || kind == K_INPUT)
		return false; /* global_event's, read_input's */
	dev_t dev = x->dev; /* x moves when watch_tree grows the table */
	ino_t ino = x->ino;
	bool moved_within = kind == K_TREE && dir && (ev->mask & IN_MOVED_TO) && *cookie != 0 && ev->cookie == *cookie;
	/* A directory that arrived is watched before the kernel's entry for
	 * it is dropped: once the sandbox can see it, what is made in it
	 * shows too (the other order missed a file made in it at once). */
	int watched = 0;
	if (dir && (ev->mask & (IN_CREATE | IN_MOVED_TO)) && !moved_within)
		watched = watch_tree(iw, kind != K_TREE ? child_kind(kind, n) : strcmp(n, ".git") == 0 ? K_GITDIR : K_TREE,
				     ev->wd, n);
	/* Every change under the host backing, the sandbox's own included,
	 * drops what the kernel cached of that name. */
	lz_router_host_changed(iw->router, dev, ino, n, !(ev->mask & NAME_EVENTS));
	if (kind != K_TREE) {
		bool input = kind == K_GITINFO ? strcmp(n, "exclude") == 0
			   : kind == K_GITDIR  ? strcmp(n, "index") == 0 || strcmp(n, "info") == 0
					       : false;
		return input || watched > 0;
	}
	if (strcmp(n, ".gitignore") == 0)
		return true;
	if (!dir)
		return strcmp(n, ".git") == 0; /* a linked worktree's or a submodule's, perhaps */
	if (ev->mask & IN_MOVED_FROM) {
		*cookie = ev->cookie;
		*from_wd = ev->wd;
		snprintf(from_name, NAME_MAX + 1, "%s", n);
		return true; /* its ignore files left the tree */
	}
	if (moved_within) {
		relink(iw, *from_wd, from_name, ev->wd, n);
		*cookie = 0;
		return true;
	}
	if (ev->mask & (IN_CREATE | IN_MOVED_TO))
		return watched != 0;
	return (ev->mask & IN_DELETE) != 0; /* a removed directory took its ignore files */
}

/* Marks directory fd (inside: of the workspace) as holding inputs bits,
 * watching it if the walk has not: a directory outside the workspace, or
 * one made since the walk came by (its event is still queued). */
static void mark_input(struct lz_ignorewatch *iw, int fd, bool inside, uint8_t bits)
{
	int wd = watch_fd(iw, fd); /* a watched directory's own descriptor: the same mask */
	if (wd < 0)
		return; /* seen at the next change elsewhere, as past the limit */
	struct watched *x = wd_find(iw, wd);
	if (x == NULL) {
		/* new: past the budget, as the walk would not watch it; no
		 * router key (the walk records a workspace directory's) */
		struct stat none = { 0 };
		if ((inside && !room(iw, iw->ndirs + 1)) || record_wd(iw, wd, K_INPUT, -1, "", &none) < 0) {
			(void)inotify_rm_watch(iw->ino_fd, wd);
			return;
		}
		x = wd_find(iw, wd);
	}
	x->inputs |= bits;
}

static int input_dir(void *arg, enum lz_ignoreclass_read what, const char *dir, size_t len, bool inside)
{
	struct lz_ignorewatch *iw = arg;
	char path[PATH_MAX];
	if (len >= sizeof(path))
		return 0;
	memcpy(path, dir, len);
	path[len] = '\0';
	/* O_PATH: the watch follows /proc/self/fd; the directory need not be
	 * listable (a Git directory outside, granted its files only). */
	_cleanup_close_ int fd = inside ? lz_openat2(iw->host_fd, len ? path : ".",
						     O_PATH | O_DIRECTORY | O_CLOEXEC, LZ_RESOLVE_CONFINED)
					: open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (what == LZ_IGNORECLASS_READ_GITDIR) {
		mark_input(iw, fd, inside, W_INDEX);
		return 0;
	}
	mark_input(iw, fd, inside, W_COMMON);
	/* info/ as the build opens it: no symlink followed */
	_cleanup_close_ int info = lz_openat2(fd, "info", O_PATH | O_DIRECTORY | O_CLOEXEC, LZ_RESOLVE_CONFINED);
	if (info >= 0)
		mark_input(iw, info, inside, W_INFO);
	return 0;
}

/* Makes every index and info/exclude snapshot snap read an input (spec
 * 3.5: a changed index or ignore input publishes): a linked worktree's
 * or a submodule's Git directory, a bare workspace's, one outside the
 * workspace. What only an earlier snapshot read stops being one, and
 * the directories watched for it alone are no longer watched. Runs
 * before the snapshot is published, on the thread that reads events:
 * an event read later is judged by the snapshot it may make stale. */
static void watch_inputs(struct lz_ignorewatch *iw, const lz_ignoreclass *snap)
{
	for (size_t i = 0; i < iw->cap; i++)
		iw->w[i].inputs = 0;
	if (snap != NULL)
		(void)lz_ignoreclass_read_dirs(snap, input_dir, iw);
	for (size_t i = 0; i < iw->cap; i++) /* a removal moves nothing */
		if (iw->w[i].used && iw->w[i].kind == K_INPUT && iw->w[i].inputs == 0 && !iw->w[i].holds_global) {
			int wd = iw->w[i].wd;
			(void)inotify_rm_watch(iw->ino_fd, wd);
			forget_wd(iw, wd);
		}
}

/* One attempt at a new snapshot: 0, or the build's -errno. failures
 * counts the attempts that failed since the last success: the first
 * MAX_RETRIES come RETRY_MS apart (an index caught mid-write), later ones
 * further apart; the previous classification stays meanwhile (spec 3.5).
 * A build past a bound (-E2BIG: rules too costly to match, too many paths
 * or patterns) is said at once, and tried again only after a change when
 * the watch sees them all: the same tree gives the same answer. */
static int rebuild(struct lz_ignorewatch *iw, unsigned failures)
{
	lz_ignoreclass *snap = NULL;
	struct lz_err err = { 0, "" };
	int r = lz_ignoreclass_build(&iw->in, &snap, &err);
	if (r == 0) {
		watch_inputs(iw, snap);
		if (lz_router_publish(iw->router, lz_router_classifier_ignoreclass(snap)) == 0)
			atomic_fetch_add(&iw->published, 1);
		if (failures >= MAX_RETRIES)
			lz_router_log("the ignore rules can be read again");
		return 0;
	}
	atomic_fetch_add(&iw->failed, 1);
	if (failures + 1 == MAX_RETRIES || (r == -E2BIG && failures < MAX_RETRIES)) {
		/* the message names workspace paths the sandbox chose */
		char why[LZ_ESCAPE_MAX(sizeof(err.msg)) + 1];
		lz_escape(err.msg, strlen(err.msg), why, sizeof(why));
		lz_router_log("the ignore rules changed but cannot be read (%s); the previous classification "
			      "stays until they can",
			      why);
	}
	return r < 0 ? r : -EIO;
}

/* How long to wait before the next rebuild after failures failed ones. */
static int retry_delay(unsigned failures)
{
	if (failures < MAX_RETRIES)
		return RETRY_MS;
	unsigned shift = failures - MAX_RETRIES < 5 ? failures - MAX_RETRIES : 5;
	return 1000 << shift; /* 1 s doubling to 32 s */
}

/* Milliseconds from now until the earliest of the set deadlines (-1:
 * unset), -1 for none. */
static int wait_ms(int64_t now, const int64_t *at, size_t n)
{
	int64_t next = -1;
	for (size_t k = 0; k < n; k++)
		if (at[k] >= 0 && (next < 0 || at[k] < next))
			next = at[k];
	if (next < 0)
		return -1;
	return next <= now ? 0 : next - now > INT_MAX ? INT_MAX : (int)(next - now);
}

/* Deadlines are absolute: events that change no ignore input (a build
 * writing all the while) postpone neither a rebuild nor a retry. */
enum { AT_QUIET, AT_REBUILD, AT_INVALIDATE, AT_N };

static void *watch_main(void *arg)
{
	struct lz_ignorewatch *iw = arg;
	_Alignas(struct inotify_event) char buf[64 * 1024];
	/* AT_QUIET: a change seen, rebuild once quiet; AT_REBUILD: a rebuild
	 * failed, try again; AT_INVALIDATE: the router's caches still wait
	 * for an invalidation (lz_router_retry_invalidation) */
	int64_t at[AT_N] = { -1, -1, -1 };
	unsigned failures = 0; /* rebuilds failed since the last success */
	uint32_t cookie = 0;
	int from_wd = -1;
	char from_name[NAME_MAX + 1] = "";
	for (;;) {
		struct pollfd pf[2] = { { .fd = iw->stop_fd, .events = POLLIN },
					{ .fd = iw->ino_fd, .events = POLLIN } };
		int n = poll(pf, 2, wait_ms(lz_now_ms(), at, AT_N));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || pf[0].revents)
			return NULL;
		if (n > 0 && pf[1].revents) {
			bool dirty = false;
			ssize_t len = read(iw->ino_fd, buf, sizeof(buf));
			for (ssize_t off = 0; len > 0 && off < len;) {
				const struct inotify_event *ev = (const struct inotify_event *)(buf + off);
				dirty |= global_event(iw, ev);
				dirty |= handle(iw, ev, &cookie, &from_wd, from_name);
				off += (ssize_t)(sizeof(*ev) + ev->len);
			}
			if (dirty) /* a burst of changes (git checkout) is one rebuild */
				at[AT_QUIET] = lz_now_ms() + QUIET_MS;
		}
		int64_t now = lz_now_ms();
		if ((at[AT_QUIET] >= 0 && now >= at[AT_QUIET]) || (at[AT_REBUILD] >= 0 && now >= at[AT_REBUILD])) {
			at[AT_QUIET] = -1;
			int r = rebuild(iw, failures);
			if (r == 0) {
				failures = 0;
				at[AT_REBUILD] = -1;
				at[AT_INVALIDATE] = now; /* whether the publish left one to do */
			} else {
				/* Past a bound no quick retries: each would take
				 * its whole budget again for the same answer. While
				 * the watch sees every change, none at all until
				 * one comes (a build spends seconds of a core). */
				failures = r == -E2BIG && failures < MAX_RETRIES ? MAX_RETRIES : failures + 1;
				bool sees_all = !iw->full_warned && !iw->overflowed;
				at[AT_REBUILD] = r == -E2BIG && sees_all ? -1 : now + retry_delay(failures);
			}
		}
		if (at[AT_INVALIDATE] >= 0 && now >= at[AT_INVALIDATE])
			at[AT_INVALIDATE] = lz_router_retry_invalidation(iw->router) > 0 ? now + RETRY_MS : -1;
	}
}

static void watch_free(struct lz_ignorewatch *iw)
{
	if (iw->shared) {
		lz_lockslots_destroy(&iw->pool);
		close(iw->pool.fd);
	}
	for (size_t i = 0; i < iw->cap; i++)
		free(iw->w[i].name);
	free(iw->w);
	free(iw->global_excludes);
	lz_close_fdp(&iw->ino_fd);
	lz_close_fdp(&iw->stop_fd);
	lz_close_fdp(&iw->host_fd);
	lz_close_fdp(&iw->isolated_fd);
	free(iw);
}

/* The directory holding the global excludes file (it may not exist yet:
 * then it is not watched). */
static void watch_global(struct lz_ignorewatch *iw)
{
	char *slash = strrchr(iw->global_excludes, '/');
	if (slash == NULL)
		return;
	iw->global_base = slash + 1;
	*slash = '\0';
	int wd = inotify_add_watch(iw->ino_fd, iw->global_excludes[0] ? iw->global_excludes : "/",
				   DIR_MASK);
	*slash = '/';
	struct stat none = { 0 }; /* outside the workspace: no router key */
	if (wd >= 0 && record_wd(iw, wd, K_GLOBAL, -1, "", &none) < 0)
		(void)inotify_rm_watch(iw->ino_fd, wd);
}

size_t lz_ignorewatch_budget(unsigned long max_user_watches)
{
	unsigned long quarter = max_user_watches / 4;
	if (quarter == 0)
		return 1;
	return quarter < LZ_IGNOREWATCH_MAX_DIRS ? (size_t)quarter : LZ_IGNOREWATCH_MAX_DIRS;
}

int lz_ignorewatch_start(lz_router *r, const struct lz_ignoreclass_inputs *in, const lz_ignoreclass *snap,
			 size_t max_dirs, int slots_fd, lz_ignorewatch **ret, struct lz_err *err)
{
	struct lz_ignorewatch *iw = calloc(1, sizeof(*iw));
	if (iw == NULL)
		return lz_err_set(err, ENOMEM, "ignore watch: out of memory");
	iw->router = r;
	iw->max_dirs = max_dirs > 0 && max_dirs < LZ_IGNOREWATCH_MAX_DIRS ? max_dirs : LZ_IGNOREWATCH_MAX_DIRS;
	if (slots_fd >= 0) {
		size_t n = iw->max_dirs / WATCH_CHUNK;
		int fd = fcntl(slots_fd, F_DUPFD_CLOEXEC, 3);
		int e = fd < 0 ? -errno : lz_lockslots_init(&iw->pool, fd, n > 0 ? (unsigned)n : 1);
		if (e < 0) {
			if (fd >= 0)
				close(fd);
			free(iw);
			return lz_err_set(err, -e, "ignore watch: the shared watch budget: %s", strerror(-e));
		}
		iw->shared = true;
	}
	iw->ino_fd = iw->stop_fd = iw->host_fd = iw->isolated_fd = -EBADF;
	if ((iw->host_fd = fcntl(in->workspace_fd, F_DUPFD_CLOEXEC, 3)) < 0 ||
	    (in->isolated_fd >= 0 && (iw->isolated_fd = fcntl(in->isolated_fd, F_DUPFD_CLOEXEC, 3)) < 0) ||
	    (iw->ino_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK)) < 0 ||
	    (iw->stop_fd = eventfd(0, EFD_CLOEXEC)) < 0) {
		int e = errno;
		watch_free(iw);
		return lz_err_set(err, e, "ignore watch: %s", strerror(e));
	}
	if (in->global_excludes && (iw->global_excludes = strdup(in->global_excludes)) == NULL) {
		watch_free(iw);
		return lz_err_set(err, ENOMEM, "ignore watch: out of memory");
	}
	/* every input, the policy flags included: each rebuild must classify as
	 * the first build did (an editor-configuration file would otherwise
	 * reach the host after the first index write) */
	iw->in = *in;
	iw->in.workspace_fd = iw->host_fd;
	iw->in.isolated_fd = iw->isolated_fd;
	iw->in.global_excludes = iw->global_excludes;
	int rc = watch_tree(iw, K_TREE, -1, "");
	if (rc >= 0 && iw->global_excludes)
		watch_global(iw);
	if (rc >= 0)
		watch_inputs(iw, snap);
	if (rc >= 0 && !iw->full_warned)
		lz_router_host_watched(r, true);
	if (rc < 0 || (rc = -pthread_create(&iw->thread, NULL, watch_main, iw)) < 0) {
		watch_free(iw);
		return lz_err_set(err, -rc, "ignore watch: %s", strerror(-rc));
	}
	*ret = iw;
	return 0;
}

unsigned long lz_ignorewatch_failed(const lz_ignorewatch *w)
{
	return atomic_load(&w->failed);
}

unsigned long lz_ignorewatch_published(const lz_ignorewatch *w)
{
	return atomic_load(&w->published);
}

size_t lz_ignorewatch_slots(const lz_ignorewatch *w)
{
	return atomic_load(&w->slots);
}

void lz_ignorewatch_stop(lz_ignorewatch *iw)
{
	if (iw == NULL)
		return;
	uint64_t one = 1;
	if (write(iw->stop_fd, &one, sizeof(one)) == sizeof(one))
		pthread_join(iw->thread, NULL);
	watch_free(iw);
}
