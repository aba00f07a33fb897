/* Router inode table, directory paths and routing (spec 3.5). The design
 * and the lock order are in router_int.h. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "router/router_int.h"
#include "util/cleanup.h"
#include "util/sys.h"

#define RT_MAX_DEPTH 2048 /* directory depth a path walk accepts */

#ifndef AT_HANDLE_FID
#define LZ_AT_HANDLE_FID 0x200 /* AT_HANDLE_FID, Linux 6.5 */
#else
#define LZ_AT_HANDLE_FID AT_HANDLE_FID
#endif

static size_t hash_key(enum rt_backing b, dev_t dev, ino_t ino)
{
	uint64_t h = (uint64_t)ino * 0x9E3779B97F4A7C15ull;
	h ^= ((uint64_t)dev + (uint64_t)b * 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
	return (size_t)(h ^ (h >> 29));
}

static void table_insert(struct lz_router *r, struct rt_inode *i)
{
	size_t k = hash_key(i->backing, i->dev, i->ino) & (r->nbuckets - 1);
	i->hnext = r->buckets[k];
	r->buckets[k] = i;
	r->ninodes++;
}

/* Caller holds table_lock. */
static struct rt_inode *table_find(struct lz_router *r, enum rt_backing b, const struct stat *st)
{
	size_t k = hash_key(b, st->st_dev, st->st_ino) & (r->nbuckets - 1);
	struct rt_inode *i = r->buckets[k];
	while (i != NULL && (i->stale || !(i->backing == b && i->dev == st->st_dev && i->ino == st->st_ino)))
		i = i->hnext;
	return i;
}

static bool same_object(const struct rt_inode *i, mode_t type, uint64_t gen)
{
	return (type == 0 || i->type == type) && (gen == 0 || i->gen == 0 || i->gen == gen);
}

/* table_find for the object of that type (0: any) and generation (0:
 * unknown). An inode holding a descriptor holds its object, so its number
 * is not reused; one without that is not the object is stale: no longer
 * found (the kernel's references keep it until forgotten, and its reopen
 * fails ESTALE). Caller holds table_lock. */
static struct rt_inode *table_find_object(struct lz_router *r, enum rt_backing b, const struct stat *st,
					  uint64_t gen)
{
	struct rt_inode *i = table_find(r, b, st);
	if (i == NULL || i == &r->root || i->fd >= 0 || same_object(i, st->st_mode & S_IFMT, gen))
		return i;
	i->stale = true;
	return NULL;
}

uint64_t rt_object_gen(int dfd, const char *name)
{
	union {
		struct file_handle fh;
		unsigned char raw[sizeof(struct file_handle) + MAX_HANDLE_SZ];
	} h;
	int mount_id;
	int flags = name[0] == '\0' ? AT_EMPTY_PATH : 0;
	h.fh.handle_bytes = MAX_HANDLE_SZ;
	/* A file handle only to compare (AT_HANDLE_FID, Linux 6.5) is
	 * given by more filesystems than an openable one. */
	if (name_to_handle_at(dfd, name, &h.fh, &mount_id, flags | LZ_AT_HANDLE_FID) < 0 &&
	    (errno != EINVAL || name_to_handle_at(dfd, name, &h.fh, &mount_id, flags) < 0))
		return 0;
	const unsigned char *bytes = h.raw + offsetof(struct file_handle, f_handle);
	uint64_t x = 0xcbf29ce484222325ull ^ (uint32_t)h.fh.handle_type; /* FNV-1a */
	for (unsigned k = 0; k < h.fh.handle_bytes && k < MAX_HANDLE_SZ; k++)
		x = (x ^ bytes[k]) * 0x100000001b3ull;
	return x == 0 ? 1 : x;
}

static void table_grow(struct lz_router *r)
{
	size_t n = r->nbuckets * 2;
	struct rt_inode **nb = calloc(n, sizeof(*nb));
	if (nb == NULL)
		return; /* longer chains, still correct */
	for (size_t k = 0; k < r->nbuckets; k++) {
		struct rt_inode *i = r->buckets[k], *next;
		for (; i != NULL; i = next) {
			next = i->hnext;
			size_t h = hash_key(i->backing, i->dev, i->ino) & (n - 1);
			i->hnext = nb[h];
			nb[h] = i;
		}
	}
	free(r->buckets);
	r->buckets = nb;
	r->nbuckets = n;
}

static void table_remove(struct lz_router *r, struct rt_inode *i)
{
	size_t k = hash_key(i->backing, i->dev, i->ino) & (r->nbuckets - 1);
	for (struct rt_inode **p = &r->buckets[k]; *p != NULL; p = &(*p)->hnext)
		if (*p == i) {
			*p = i->hnext;
			r->ninodes--;
			return;
		}
}

int rt_table_init(struct lz_router *r)
{
	r->nbuckets = 1024;
	r->buckets = calloc(r->nbuckets, sizeof(*r->buckets));
	if (r->buckets == NULL)
		return -ENOMEM;
	struct stat st;
	if (fstat(r->root_fd[RT_HOST], &st) < 0)
		return -errno;
	r->root.fd = r->root_fd[RT_HOST]; /* never evicted: not on the list */
	r->lru.lru_next = r->lru.lru_prev = &r->lru;
	r->root.backing = RT_HOST;
	r->root.dev = st.st_dev;
	r->root.ino = st.st_ino;
	r->root.type = S_IFDIR;
	r->root.nref = 1; /* never freed */
	table_insert(r, &r->root);
	return 0;
}

static void lru_unlink(struct rt_inode *i)
{
	i->lru_prev->lru_next = i->lru_next;
	i->lru_next->lru_prev = i->lru_prev;
	i->lru_prev = i->lru_next = NULL;
}

static void lru_push(struct lz_router *r, struct rt_inode *i)
{
	i->lru_next = r->lru.lru_next;
	i->lru_prev = &r->lru;
	r->lru.lru_next->lru_prev = i;
	r->lru.lru_next = i;
}

/* Closes i's cached descriptor. Caller holds table_lock. */
static void fd_drop(struct lz_router *r, struct rt_inode *i)
{
	if (i->fd < 0)
		return;
	lru_unlink(i);
	lz_close_fdp(&i->fd);
	r->nfds--;
}

/* Whether i's object can be reopened by its name once evicted: not when
 * unnamed, nor when the host removed its last name (a file the sandbox
 * holds open, deleted on the host). Caller holds table_lock. */
static bool reopenable(struct rt_inode *i)
{
	struct stat st;
	if (i->name == NULL || i->unlinked)
		return false;
	if (fstat(i->fd, &st) == 0 && st.st_nlink == 0)
		i->unlinked = true;
	return !i->unlinked;
}

/* Closes least recently used descriptors (never keep's) until at most
 * limit are cached. An object that cannot be reopened keeps its
 * descriptor; the kernel's references bound how many there are. Caller
 * holds table_lock. */
static void fd_evict(struct lz_router *r, size_t limit, const struct rt_inode *keep)
{
	struct rt_inode *i = r->lru.lru_prev;
	while (r->nfds > limit && i != &r->lru) {
		struct rt_inode *prev = i->lru_prev;
		if (i != keep && reopenable(i))
			fd_drop(r, i);
		i = prev;
	}
}

/* Out of descriptors (the sandbox's open files use them too): closes
 * half the cached ones, never keep's. Caller holds table_lock. */
static void fd_shed_locked(struct lz_router *r, const struct rt_inode *keep)
{
	fd_evict(r, r->nfds / 2, keep);
}

static void fd_shed(struct lz_router *r)
{
	pthread_mutex_lock(&r->table_lock);
	fd_shed_locked(r, NULL);
	pthread_mutex_unlock(&r->table_lock);
}

#define RT_FD_RESERVE 128 /* for the operations in flight (a few each) and the rest */

/* How many descriptors the cache may hold now: its budget, less what the
 * kernel's open files leave of the limit. */
static size_t cache_cap(struct lz_router *r)
{
	size_t used = atomic_load(&r->nopen) + RT_FD_RESERVE;
	size_t room = r->fd_limit > used ? r->fd_limit - used : 0;
	size_t cap = room < r->fd_budget ? room : r->fd_budget;
	return cap < 16 ? 16 : cap;
}

/* Caches fd as i's descriptor (i has none). Caller holds table_lock. */
static void fd_install(struct lz_router *r, struct rt_inode *i, int fd)
{
	i->fd = fd;
	lru_push(r, i);
	r->nfds++;
	fd_evict(r, cache_cap(r), i);
}

void rt_open_count(struct lz_router *r, int n)
{
	if (n >= 0) {
		atomic_fetch_add(&r->nopen, (size_t)n);
		pthread_mutex_lock(&r->table_lock);
		fd_evict(r, cache_cap(r), NULL);
		pthread_mutex_unlock(&r->table_lock);
	} else {
		atomic_fetch_sub(&r->nopen, (size_t)-n);
	}
}

/* i has a name again, or goes: no longer counted as pinned. Caller holds
 * table_lock. */
static void unpin(struct lz_router *r, struct rt_inode *i)
{
	if (i->pinned_linked) {
		i->pinned_linked = false;
		r->npinned--;
	}
}

static void inode_free(struct lz_router *r, struct rt_inode *i)
{
	unpin(r, i);
	fd_drop(r, i);
	free(i->name);
	free(i);
}

void rt_table_destroy(struct lz_router *r)
{
	for (size_t k = 0; r->buckets != NULL && k < r->nbuckets; k++) {
		struct rt_inode *i = r->buckets[k], *next;
		for (; i != NULL; i = next) {
			next = i->hnext;
			if (i != &r->root)
				inode_free(r, i);
		}
	}
	free(r->buckets);
	r->buckets = NULL;
}

struct rt_inode *rt_inode_get(struct lz_router *r, fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? &r->root : (struct rt_inode *)(uintptr_t)ino;
}

/* Drops references while they reach zero, up the parent chain.
 * Caller holds table_lock. */
static void release_locked(struct lz_router *r, struct rt_inode *i)
{
	while (i != NULL && i != &r->root && i->nlookup == 0 && i->nref == 0) {
		struct rt_inode *parent = i->parent;
		table_remove(r, i);
		inode_free(r, i);
		i = parent;
		if (i != NULL)
			i->nref--;
	}
}

void rt_inode_forget(struct lz_router *r, struct rt_inode *i, uint64_t n)
{
	pthread_mutex_lock(&r->table_lock);
	i->nlookup = n > i->nlookup ? 0 : i->nlookup - n;
	release_locked(r, i);
	pthread_mutex_unlock(&r->table_lock);
}

void rt_inode_ref(struct lz_router *r, struct rt_inode *i)
{
	pthread_mutex_lock(&r->table_lock);
	i->nref++;
	pthread_mutex_unlock(&r->table_lock);
}

struct rt_inode **rt_inode_collect(struct lz_router *r, bool (*want)(const struct rt_inode *),
				   size_t *ret_n)
{
	pthread_mutex_lock(&r->table_lock);
	size_t n = 0, cap = r->ninodes;
	struct rt_inode **all = calloc(cap ? cap : 1, sizeof(*all));
	for (size_t k = 0; all != NULL && k < r->nbuckets; k++)
		for (struct rt_inode *i = r->buckets[k]; i != NULL; i = i->hnext)
			if (n < cap && want(i)) {
				i->nref++;
				all[n++] = i;
			}
	pthread_mutex_unlock(&r->table_lock);
	*ret_n = n;
	return all;
}

struct rt_inode *rt_inode_find(struct lz_router *r, enum rt_backing b, const struct stat *st, uint64_t gen)
{
	pthread_mutex_lock(&r->table_lock);
	struct rt_inode *i = table_find_object(r, b, st, gen);
	if (i != NULL)
		i->nref++;
	pthread_mutex_unlock(&r->table_lock);
	return i;
}

void rt_inode_unref(struct lz_router *r, struct rt_inode *i)
{
	pthread_mutex_lock(&r->table_lock);
	i->nref--;
	release_locked(r, i);
	pthread_mutex_unlock(&r->table_lock);
}

int rt_inode_relink(struct lz_router *r, struct rt_inode *i, struct rt_inode *parent, const char *name)
{
	if (i == &r->root)
		return 0;
	char *dup = strdup(name);
	if (dup == NULL)
		return -ENOMEM;
	pthread_rwlock_wrlock(&r->tree_lock);
	/* A directory's chain is a tree: moves seen out of order (a lookup
	 * through a held descriptor after the host moved a directory into
	 * its own former child) must not make it a loop. */
	for (struct rt_inode *a = parent; S_ISDIR(i->type) && a != NULL; a = a->parent)
		if (a == i) {
			pthread_rwlock_unlock(&r->tree_lock);
			free(dup);
			return -ELOOP;
		}
	pthread_mutex_lock(&r->table_lock);
	struct rt_inode *old = i->parent;
	char *old_name = i->name;
	i->parent = parent;
	i->name = dup;
	unpin(r, i);
	parent->nref++;
	if (old != NULL) {
		old->nref--;
		release_locked(r, old);
	}
	pthread_mutex_unlock(&r->table_lock);
	pthread_rwlock_unlock(&r->tree_lock);
	free(old_name);
	return 0;
}

/* Whether the host directory (fd, or name in dfd) matches names without
 * regard to case (FS_CASEFOLD_FL, which the host may set on an empty
 * directory of an ext4, f2fs or tmpfs made for it): the guards compare
 * names bytewise, so .GIT/hooks there would be .git/hooks to the host's
 * Git. lz_router_new refuses such a workspace root. */
static int host_casefold(int fd, int dfd, const char *name)
{
	_cleanup_close_ int d = fd >= 0 ? openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
				       : openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* Out of descriptors or memory, it cannot tell: the request fails,
	 * never serves a directory it could not check. One it may not read
	 * lists nothing to the sandbox either. */
	if (d < 0)
		return errno == EMFILE || errno == ENFILE || errno == ENOMEM ? -errno : 0;
	int flags = 0;
	return ioctl(d, FS_IOC_GETFLAGS, &flags) == 0 && (flags & FS_CASEFOLD_FL);
}

int rt_inode_obtain(struct lz_router *r, int fd, int dfd, enum rt_backing b, const struct stat *st,
		    struct rt_inode *parent, const char *name, bool count, struct rt_inode **ret)
{
	_cleanup_close_ int owned = fd;
	if (b == RT_HOST && S_ISDIR(st->st_mode)) {
		int casefold = host_casefold(owned, dfd, name);
		if (casefold == -EMFILE || casefold == -ENFILE) {
			fd_shed(r);
			casefold = host_casefold(owned, dfd, name);
		}
		if (casefold != 0)
			return casefold < 0 ? casefold : -EPERM;
	}
	_cleanup_free_ struct rt_inode *fresh = calloc(1, sizeof(*fresh));
	_cleanup_free_ char *dup = strdup(name);
	if (fresh == NULL || dup == NULL)
		return -ENOMEM;
	uint64_t gen = owned >= 0 ? rt_object_gen(owned, "") : rt_object_gen(dfd, name);

	pthread_mutex_lock(&r->table_lock);
	struct rt_inode *i = table_find_object(r, b, st, gen);
	bool moved = false;
	if (i == NULL) {
		if (r->ninodes >= RT_MAX_INODES) {
			pthread_mutex_unlock(&r->table_lock);
			return -ENFILE;
		}
		i = TAKE_PTR(fresh);
		i->fd = -EBADF;
		i->backing = b;
		i->dev = st->st_dev;
		i->ino = st->st_ino;
		i->type = st->st_mode & S_IFMT;
		i->gen = gen;
		i->parent = parent;
		i->name = TAKE_PTR(dup);
		parent->nref++;
		table_insert(r, i);
		if (r->ninodes > r->nbuckets)
			table_grow(r);
	} else if (i != &r->root) {
		/* Found at another name: moved by someone else, or another
		 * hard link. The name it was found at is the one that works
		 * now. name and parent are written only under table_lock, so
		 * reading them here is safe. */
		moved = i->parent != parent || i->name == NULL || strcmp(i->name, name) != 0;
	}
	if (i->fd < 0 && owned >= 0 && i != &r->root)
		fd_install(r, i, TAKE_FD(owned));
	if (count)
		i->nlookup++;
	else
		i->nref++;
	pthread_mutex_unlock(&r->table_lock);
	if (moved)
		(void)rt_inode_relink(r, i, parent, name);
	*ret = i;
	return 0;
}

void rt_inode_unname(struct lz_router *r, enum rt_backing b, const struct stat *st,
		     struct rt_inode *parent, const char *name, int fd)
{
	_cleanup_close_ int owned = fd;
	uint64_t gen = owned >= 0 ? rt_object_gen(owned, "") : 0;
	pthread_rwlock_wrlock(&r->tree_lock);
	pthread_mutex_lock(&r->table_lock);
	struct rt_inode *i = table_find_object(r, b, st, gen);
	char *old_name = NULL;
	if (i != NULL && i != &r->root && i->parent == parent && i->name != NULL &&
	    strcmp(i->name, name) == 0) {
		/* Without a name it cannot be reopened: its descriptor is kept
		 * while the kernel holds it. One whose object still has another
		 * name (link, then unlink the newer) is kept only up to the
		 * cache's budget: the sandbox could pin one per three calls.
		 * Past it a use answers ESTALE until the kernel looks the
		 * other name up again. */
		struct stat now;
		int probe = i->fd >= 0 ? i->fd : owned;
		bool linked = probe >= 0 && fstat(probe, &now) == 0 && now.st_nlink > 0;
		if (linked && r->npinned >= r->fd_budget) {
			fd_drop(r, i);
		} else {
			if (i->fd < 0 && owned >= 0)
				fd_install(r, i, TAKE_FD(owned));
			if (linked && !i->pinned_linked) {
				i->pinned_linked = true;
				r->npinned++;
			}
		}
		old_name = i->name;
		i->name = NULL;
		i->parent = NULL;
		parent->nref--;
		release_locked(r, parent);
	}
	pthread_mutex_unlock(&r->table_lock);
	pthread_rwlock_unlock(&r->tree_lock);
	free(old_name);
}

struct rt_inode *rt_inode_name(struct lz_router *r, struct rt_inode *i, char name[NAME_MAX + 1])
{
	pthread_rwlock_rdlock(&r->tree_lock);
	struct rt_inode *parent = i->parent;
	if (parent != NULL) {
		snprintf(name, NAME_MAX + 1, "%s", i->name);
		rt_inode_ref(r, parent);
	}
	pthread_rwlock_unlock(&r->tree_lock);
	return parent;
}

/* fd when it is i's object (device, inode number, type, and the
 * generation its file handle carries), else closed and -ESTALE. */
static int same_or_stale(const struct rt_inode *i, int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_dev != i->dev || st.st_ino != i->ino ||
	    !same_object(i, st.st_mode & S_IFMT, rt_object_gen(fd, ""))) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/* i's object opened by path (i's own, relative to its backing's root),
 * or -ESTALE when that path names another object or none now, or
 * -EMFILE, -ENFILE, -ENOMEM. */
static int open_by_path(struct lz_router *r, struct rt_inode *i, const char *path)
{
	int fd = lz_openat2(r->root_fd[i->backing], path, O_PATH | O_NOFOLLOW | O_CLOEXEC, LZ_RESOLVE_CONFINED);
	return fd < 0 ? (errno == EMFILE || errno == ENFILE || errno == ENOMEM ? -errno : -ESTALE) : same_or_stale(i, fd);
}

int rt_inode_at(struct lz_router *r, struct rt_inode *i, const char *path, size_t len)
{
	if (len == 0)
		return i == &r->root ? 0 : -ESTALE; /* only the root has the empty path */
	int fd = open_by_path(r, i, path);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

/* The kernel's path of descriptor fd (this process's view), in buf;
 * its length, or -1. */
static ssize_t fd_path(int fd, char *buf, size_t cap)
{
	char proc[32];
	rt_procpath(proc, fd);
	ssize_t n = readlink(proc, buf, cap - 1);
	if (n < 0 || (size_t)n >= cap - 1)
		return -1;
	buf[n] = '\0';
	return n;
}

/* Whether the kernel's path of i's cached descriptor is its root's and
 * path (len bytes): the path names i, at the cost of one readlink. False
 * when it cannot tell (no descriptor cached, a root moved): the caller
 * looks by path. */
static bool named_as_cached(struct lz_router *r, struct rt_inode *i, const char *path, size_t len)
{
	char now[PATH_MAX];
	ssize_t n = -1;
	pthread_mutex_lock(&r->table_lock);
	char *root = r->root_path[i->backing];
	if (root[0] == '\0' && fd_path(r->root_fd[i->backing], root, PATH_MAX) < 0)
		root[0] = '\0';
	if (i->fd >= 0 && root[0] != '\0')
		n = fd_path(i->fd, now, sizeof(now));
	size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
	bool same = n >= 0 && (size_t)n == rl + 1 + len && memcmp(now, root, rl) == 0 && now[rl] == '/' &&
		    memcmp(now + rl + 1, path, len) == 0;
	pthread_mutex_unlock(&r->table_lock);
	return same;
}

int rt_inode_place(struct lz_router *r, struct rt_inode *i, char path[PATH_MAX], size_t *ret_len)
{
	char now[PATH_MAX], root[PATH_MAX];
	size_t len = 0;
	*ret_len = 0;
	if (i == &r->root) {
		path[0] = '\0';
		return 0;
	}
	int rc = rt_dir_path(r, i, path, PATH_MAX, &len);
	*ret_len = len;
	if (rc == -ESTALE)
		return 1; /* no name left */
	if (rc < 0 || (len > 0 && named_as_cached(r, i, path, len)))
		return rc;
	if ((rc = rt_inode_at(r, i, path, len)) != -ESTALE)
		return rc;
	/* Moved by the host (the watch relinks only what is not a
	 * directory): where the kernel says its object is now. */
	_cleanup_close_ int fd = rt_inode_fd(r, i);
	if (fd < 0)
		return fd == -EMFILE || fd == -ENFILE || fd == -ENOMEM ? fd : -ESTALE;
	ssize_t n = fd_path(fd, now, sizeof(now)), rn = fd_path(r->root_fd[i->backing], root, sizeof(root));
	static const char deleted[] = " (deleted)";
	struct stat st;
	if (n > (ssize_t)strlen(deleted) && strcmp(now + n - strlen(deleted), deleted) == 0)
		return fstat(fd, &st) == 0 && st.st_nlink == 0 ? 1 : -ESTALE;
	/* below the root, one name deep at least */
	if (n < 0 || rn < 0 || n <= rn + 1 || strncmp(now, root, (size_t)rn) != 0 ||
	    (now[rn] != '/' && strcmp(root, "/") != 0))
		return -ESTALE;
	char *rel = now + rn + (strcmp(root, "/") != 0);
	char *slash = strrchr(rel, '/');
	const char *name = slash ? slash + 1 : rel;
	struct rt_inode *parent = NULL;
	if (slash == NULL) {
		parent = &r->root;
		rt_inode_ref(r, parent);
	} else {
		*slash = '\0';
		_cleanup_close_ int pfd = lz_openat2(r->root_fd[i->backing], rel, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
						     LZ_RESOLVE_CONFINED);
		if (pfd < 0 || fstat(pfd, &st) < 0)
			return -ESTALE;
		parent = rt_inode_find(r, i->backing, &st, rt_object_gen(pfd, ""));
	}
	/* A directory the router holds no inode of cannot be named here: the
	 * sandbox finds the object anew by a lookup. */
	if (parent == NULL)
		return -ESTALE;
	rc = rt_inode_relink(r, i, parent, name);
	rt_inode_unref(r, parent);
	if (rc == 0)
		rc = rt_dir_path(r, i, path, PATH_MAX, ret_len);
	return rc < 0 ? (rc == -ELOOP ? -ESTALE : rc) : rt_inode_at(r, i, path, *ret_len);
}

/* Opens i's object again by its name; see "Descriptors" in router_int.h. */
static int reopen(struct lz_router *r, struct rt_inode *i)
{
	int fd;
	if (S_ISDIR(i->type)) {
		char path[PATH_MAX];
		size_t len;
		int rc = rt_dir_path(r, i, path, sizeof(path), &len);
		if (rc < 0)
			return rc;
		if (len == 0)
			return -ESTALE; /* only the root has the empty path */
		return open_by_path(r, i, path);
	} else {
		char name[NAME_MAX + 1];
		struct rt_inode *parent = rt_inode_name(r, i, name);
		if (parent == NULL)
			return -ESTALE;
		fd = rt_side_dir(r, parent, i->backing, false);
		if (fd >= 0) {
			int dfd = fd;
			fd = rt_openat(r, dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
			fd = fd < 0 ? -errno : fd;
			close(dfd);
		}
		rt_inode_unref(r, parent);
	}
	if (fd < 0)
		return fd == -EMFILE || fd == -ENFILE || fd == -ENOMEM ? fd : -ESTALE;
	return same_or_stale(i, fd);
}

/* A duplicate of i's cached descriptor, or -errno. Caller holds
 * table_lock; i->fd is open. */
static int fd_dup_locked(struct lz_router *r, struct rt_inode *i)
{
	int fd = fcntl(i->fd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
		fd_shed_locked(r, i);
		fd = fcntl(i->fd, F_DUPFD_CLOEXEC, 3);
	}
	if (fd < 0)
		return -errno;
	if (i != &r->root) {
		lru_unlink(i);
		lru_push(r, i);
	}
	return fd;
}

int rt_openat(struct lz_router *r, int dfd, const char *path, int flags, mode_t mode)
{
	int fd = openat(dfd, path, flags, mode);
	if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
		fd_shed(r);
		fd = openat(dfd, path, flags, mode);
	}
	return fd;
}

int rt_inode_fd(struct lz_router *r, struct rt_inode *i)
{
	pthread_mutex_lock(&r->table_lock);
	if (i->fd >= 0) {
		int fd = fd_dup_locked(r, i);
		pthread_mutex_unlock(&r->table_lock);
		return fd;
	}
	pthread_mutex_unlock(&r->table_lock);
	int fd = reopen(r, i);
	if (fd == -EMFILE || fd == -ENFILE) { /* a directory's openat2, or a dup */
		fd_shed(r);
		fd = reopen(r, i);
	}
	if (fd < 0)
		return fd;
	pthread_mutex_lock(&r->table_lock);
	if (i->fd < 0)
		fd_install(r, i, fd);
	else
		close(fd); /* another thread reopened it meanwhile */
	fd = fd_dup_locked(r, i);
	pthread_mutex_unlock(&r->table_lock);
	return fd;
}

int rt_check_name(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || strchr(name, '/') != NULL || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return -EINVAL;
	if (n > NAME_MAX)
		return -ENAMETOOLONG;
	return 0;
}

int rt_dir_path(struct lz_router *r, struct rt_inode *d, char *buf, size_t cap, size_t *ret_len)
{
	const char *names[RT_MAX_DEPTH];
	size_t depth = 0, len = 0;
	int rc = 0;
	pthread_rwlock_rdlock(&r->tree_lock);
	for (struct rt_inode *i = d; i != &r->root; i = i->parent) {
		if (i == NULL || depth == RT_MAX_DEPTH) {
			rc = i == NULL ? -ESTALE : -ENAMETOOLONG;
			break;
		}
		names[depth++] = i->name;
	}
	while (rc == 0 && depth > 0) {
		const char *n = names[--depth];
		size_t nl = strlen(n);
		if (len + nl + 2 > cap) {
			rc = -ENAMETOOLONG;
			break;
		}
		if (len > 0)
			buf[len++] = '/';
		memcpy(buf + len, n, nl);
		len += nl;
	}
	pthread_rwlock_unlock(&r->tree_lock);
	if (rc < 0)
		return rc;
	buf[len] = '\0';
	*ret_len = len;
	return 0;
}

int rt_child_path(struct lz_router *r, struct rt_inode *d, const char *name, char *buf, size_t cap,
		  size_t *ret_len)
{
	size_t len;
	int rc = rt_check_name(name);
	if (rc < 0)
		return rc;
	rc = rt_dir_path(r, d, buf, cap, &len);
	if (rc < 0)
		return rc;
	size_t nl = strlen(name);
	if (len + nl + 2 > cap)
		return -ENAMETOOLONG;
	if (len > 0)
		buf[len++] = '/';
	memcpy(buf + len, name, nl + 1);
	*ret_len = len + nl;
	return 0;
}

int rt_route(struct lz_router *r, const char *path, size_t len, bool is_dir, enum lz_route *ret)
{
	enum lz_route route;
	int rc = r->cls.route(r->cls.ctx, path, len, is_dir, &route);
	if (rc < 0)
		return rc == -EINVAL ? -EINVAL : -EIO;
	if (route != LZ_ROUTE_HOST && route != LZ_ROUTE_ISOLATED && route != LZ_ROUTE_INCONSISTENT)
		return -EIO;
	*ret = route;
	return 0;
}

/* Makes the missing directories of path in the isolated backing (the
 * sandbox's own: no policy applies there); returns an O_PATH descriptor
 * of the last. Each component is created then opened with openat2
 * confined, so a symlink or non-directory in the way fails
 * (ENOTDIR/ELOOP) instead of being followed. Never the host backing: a
 * host directory is made only by mkdir, under the policy
 * (router_policy.c). */
static int make_dirs(struct lz_router *r, const char *path)
{
	_cleanup_close_ int cur = -EBADF;
	char comp[NAME_MAX + 1];
	const char *p = path;
	while (*p != '\0') {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		if (n == 0 || n > NAME_MAX)
			return -EINVAL;
		memcpy(comp, p, n);
		comp[n] = '\0';
		int dfd = cur >= 0 ? cur : r->root_fd[RT_ISOLATED];
		if (mkdirat(dfd, comp, 0755) < 0 && errno != EEXIST)
			return -errno;
		int nfd = lz_openat2(dfd, comp, O_PATH | O_DIRECTORY | O_CLOEXEC, LZ_RESOLVE_CONFINED);
		if (nfd < 0)
			return -errno;
		lz_close_fdp(&cur);
		cur = nfd;
		p += n;
		if (*p == '/')
			p++;
	}
	return cur >= 0 ? TAKE_FD(cur) : -EINVAL;
}

int rt_side_dir(struct lz_router *r, struct rt_inode *d, enum rt_backing b, bool create)
{
	if (d->backing == b)
		return rt_inode_fd(r, d);
	/* Within one snapshot what lies below an isolated directory is
	 * isolated (Git re-includes nothing below an ignored directory), so
	 * a host-routed entry made in an isolated directory means d is a
	 * stale inode the kernel held across a publish. Making the host side
	 * here would make host directories no policy checked (HEAD and
	 * objects on the host, refs made through a held isolated refs/: a
	 * bare repository host Git enters); a new lookup finds the host's
	 * own directory. */
	if (create && b == RT_HOST)
		return -ESTALE;
	char path[PATH_MAX];
	size_t len;
	int rc = rt_dir_path(r, d, path, sizeof(path), &len);
	if (rc < 0)
		return rc;
	if (len == 0) {
		int fd = fcntl(r->root_fd[b], F_DUPFD_CLOEXEC, 3);
		return fd < 0 ? -errno : fd;
	}
	int fd = lz_openat2(r->root_fd[b], path, O_PATH | O_DIRECTORY | O_CLOEXEC, LZ_RESOLVE_CONFINED);
	if (fd < 0 && errno == ENOENT && create)
		fd = make_dirs(r, path);
	else if (fd < 0)
		fd = -errno;
	if (fd == -ELOOP || fd == -EXDEV)
		fd = -ENOTDIR; /* a symlink (or a mount) where the directory would be */
	return fd;
}

/* Opens name in backing b of directory d, O_PATH|O_NOFOLLOW. */
static int open_in(struct lz_router *r, struct rt_inode *d, enum rt_backing b, const char *name,
		   int *ret_fd, struct stat *st)
{
	_cleanup_close_ int dfd = rt_side_dir(r, d, b, false);
	if (dfd < 0)
		return dfd == -ENOTDIR ? -ENOENT : dfd;
	int fd = rt_openat(r, dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st) < 0) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	*ret_fd = fd;
	return 0;
}

/* name in route's backing when it is a directory (dir) or not: 1 with its
 * O_PATH fd and stat, 0 when absent or of the other type, -errno for a
 * failure that is not absence (descriptors, memory). */
static int open_typed(struct lz_router *r, struct rt_inode *d, enum lz_route route, const char *name, bool dir,
		      int *ret_fd, struct stat *ret_st)
{
	int fd, rc = open_in(r, d, rt_backing_of(route), name, &fd, ret_st);
	if (rc < 0)
		return rt_absent(-rc) ? 0 : rc;
	if (S_ISDIR(ret_st->st_mode) != dir) {
		close(fd);
		return 0;
	}
	*ret_fd = fd;
	return 1;
}

int rt_resolve(struct lz_router *r, struct rt_inode *d, const char *name, enum rt_backing *ret_b,
	       int *ret_fd, struct stat *ret_st)
{
	char path[PATH_MAX];
	size_t len;
	enum lz_route rf, rd;
	int rc = rt_child_path(r, d, name, path, sizeof(path), &len);
	if (rc < 0)
		return rc;
	if ((rc = rt_route(r, path, len, false, &rf)) < 0 || (rc = rt_route(r, path, len, true, &rd)) < 0)
		return rc;
	int fd;
	struct stat st;
	if (rf == rd) {
		if (rf == LZ_ROUTE_INCONSISTENT)
			return -EIO;
		rc = open_in(r, d, rt_backing_of(rf), name, &fd, &st);
		if (rc < 0)
			return rc;
		*ret_b = rt_backing_of(rf);
		*ret_fd = fd;
		*ret_st = st;
		return 0;
	}
	/* A directory-only pattern: the entry is the directory of the
	 * directory route, else the non-directory of the other route. A
	 * failure that is not absence (descriptors, memory) is the answer:
	 * never "no such entry", which the kernel caches and Git reads as a
	 * deletion. */
	const struct {
		enum lz_route route;
		bool dir;
	} tries[] = { { rd, true }, { rf, false } };
	for (size_t i = 0; i < LZ_ARRAY_SIZE(tries); i++) {
		if (tries[i].route == LZ_ROUTE_INCONSISTENT)
			continue;
		if ((rc = open_typed(r, d, tries[i].route, name, tries[i].dir, &fd, &st)) != 0) {
			if (rc < 0)
				return rc;
			*ret_b = rt_backing_of(tries[i].route);
			*ret_fd = fd;
			*ret_st = st;
			return 0;
		}
	}
	return rf == LZ_ROUTE_INCONSISTENT || rd == LZ_ROUTE_INCONSISTENT ? -EIO : -ENOENT;
}
