/* Workspace policy for host-backed objects (spec 3.5, SR-13; no implicit
 * host authority, docs/threat-model.md): what the sandbox may not leave in
 * the canonical workspace for a host program to act on later.
 *
 * - Git control files: the classifier's guard names them (ignoreclass.h);
 *   CONTROL paths are not made, written, truncated, re-moded, moved or
 *   removed, HOLDS directories are not moved or removed, and no symlink
 *   is made at either (host Git would follow it). Made means created,
 *   renamed or linked there, and exchanged there: both objects of a
 *   RENAME_EXCHANGE arrive somewhere (router_ops.c).
 * - New Git directories: a host directory that would become one by this
 *   operation (HEAD with objects and refs, or HEAD with commondir: what
 *   Git's discovery accepts) is refused; host Git would open it, and run
 *   what its config names, from any directory inside. Git directories
 *   made inside the sandbox live in the isolated backing (".git" of an
 *   unknown root routes there), so `git init` keeps working.
 * - Git's lock files of control files (config.lock and the like): host
 *   Git writes one and renames it over the control file, so one the
 *   sandbox did not make itself is not written, truncated, removed,
 *   replaced, moved or linked (its bytes, or the object at its name,
 *   would become the control file). The sandbox's own are remembered by
 *   identity (device, inode, generation); Git refuses to lock while one
 *   exists, so host Git never renames a lock the sandbox made. Git makes
 *   its lock with O_EXCL at a free name and never renames onto one, so
 *   only that way does the sandbox get one either: a rename onto a lock
 *   name never replaces (RENAME_NOREPLACE: host Git's could appear
 *   between any check and the rename), and no link, exchange, or rename
 *   of an object with another name puts one there. Taking the sandbox's
 *   own lock away (unlink, rename) checks the object at the name and acts
 *   by name under one mutex, so the name cannot change hands in between:
 *   only a remover frees it, and every remover in the router takes that
 *   mutex (left: the developer removing the sandbox's lock on the host in
 *   that instant, and host Git taking the name at once).
 * - No write for others where control files are held (spec 3.5 Git
 *   Sentry, SR-4): on the host, group or other write on .git lets any
 *   local user rename a config or hooks/ of theirs in, which host Git
 *   runs as the developer. So a HOLDS directory gains no group or other
 *   write by chmod, and its sticky bit stays as it is (none moves there:
 *   rt_policy_remove refuses the destination); taking permissions away
 *   stays allowed (Git chmods its own files), and so does group write on
 *   Git data (a shared repository's object directories). No POSIX ACL is
 *   set on or removed from a HOLDS directory (an access ACL is the mode),
 *   and no default ACL is set in Git data either: what host Git makes
 *   below later inherits it (a new modules/<name>/config), where no mode
 *   check looks; Git sets none. Nor, anywhere on the host, a default ACL
 *   giving the owning group write (rt_policy_acl_value): a repository the
 *   developer makes below later would be group-writable.
 *   A new guarded entry is made without group or other write, whatever the
 *   umasks (the sandbox's arrives as the mode, the router's is the
 *   developer's).
 * - A repository's index changes only by Git's own index.lock rename,
 *   which the index guard checks (router_index.c): it is not written,
 *   truncated, re-moded or linked, nothing else is made, renamed, linked
 *   or exchanged to its name, and no write reaches the object Git renamed
 *   there through a descriptor opened before (rt_policy_inode asks at each
 *   write; the rename excludes writes while it checks, index_gate).
 *   Removing it stays allowed (an index tracks nothing then).
 * - setuid/setgid bits are stripped and foreign owners refused (a host
 *   user running the file would get the developer's identity). */
#include "router/router_int.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"

/* The isolated backing is private to the Domain (0700) and keeps what
 * the sandbox sets; host-backed modes lose the setuid and setgid bits,
 * and write for others: a world-writable directory in the workspace lets
 * any local user plant a repository (HEAD, objects, refs and a config
 * naming a program) that the developer's next host Git in it runs. */
mode_t rt_policy_mode(enum rt_backing b, mode_t mode)
{
	return b == RT_HOST ? mode & ~(mode_t)(S_ISUID | S_ISGID | S_IWOTH) : mode;
}

/* POSIX ACL xattr form: a version word, then entries of tag, permissions
 * and ID (little-endian). */
#define ACL_XATTR_VERSION 2u
#define ACL_TAG_USER 0x02u      /* a named user */
#define ACL_TAG_GROUP_OBJ 0x04u /* the owning group */
#define ACL_TAG_GROUP 0x08u     /* a named group */
#define ACL_TAG_MASK 0x10u
#define ACL_TAG_OTHER 0x20u
#define ACL_PERM_WRITE 0x02u

/* Which entries may not grant write: others, named users and named
 * groups in any ACL; in a default ACL also the owning group and the mask.
 * A default ACL replaces the umask of everything made below it later,
 * host Git's new repositories included (`git init`, a clone, a
 * submodule): a group-writable .git/config there is another user's to
 * rewrite, and the developer's next host Git runs what it names. The
 * developer's own chmod g+w (a shared directory) stays possible; the
 * sandbox's chmod g+w reaches only what exists. */
int rt_policy_acl_value(enum rt_backing b, bool is_default, const void *value, size_t size)
{
	if (b != RT_HOST)
		return 0;
	const uint8_t *p = value;
	uint32_t version = 0;
	if (size >= 4)
		memcpy(&version, p, sizeof(version));
	if (size < 4 || (size - 4) % 8 != 0 || le32toh(version) != ACL_XATTR_VERSION)
		return -EINVAL;
	for (size_t off = 4; off < size; off += 8) {
		uint16_t tag, perm;
		memcpy(&tag, p + off, sizeof(tag));
		memcpy(&perm, p + off + 2, sizeof(perm));
		tag = le16toh(tag);
		perm = le16toh(perm);
		bool no_write = tag == ACL_TAG_USER || tag == ACL_TAG_GROUP || tag == ACL_TAG_OTHER ||
				(is_default && (tag == ACL_TAG_GROUP_OBJ || tag == ACL_TAG_MASK));
		if (no_write && (perm & ACL_PERM_WRITE))
			return -EPERM;
	}
	return 0;
}

/* Group and other write: on a directory, the right to rename anything in. */
#define GO_WRITE ((mode_t)(S_IWGRP | S_IWOTH))

mode_t rt_policy_new_mode(enum rt_backing b, enum lz_guard g, mode_t mode)
{
	mode = rt_policy_mode(b, mode);
	return b == RT_HOST && g != LZ_GUARD_NONE ? mode & ~GO_WRITE : mode;
}

/* The router's user namespace maps 0 to the developer; other IDs are
 * subordinate IDs, foreign on the host. */
int rt_policy_owner(const struct rt_inode *i, int ifd, uid_t uid, gid_t gid)
{
	if (i->backing != RT_HOST)
		return 0;
	struct stat st;
	if (fstatat(ifd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if ((uid != (uid_t)-1 && uid != 0 && uid != st.st_uid) ||
	    (gid != (gid_t)-1 && gid != 0 && gid != st.st_gid))
		return -EPERM;
	return 0;
}

static int guard_of(struct lz_router *r, const char *path, size_t len, bool is_dir,
		    enum lz_guard *ret)
{
	*ret = LZ_GUARD_NONE;
	return r->cls.guard == NULL ? 0 : r->cls.guard(r->cls.ctx, path, len, is_dir, ret);
}

/* Whether path is a repository's index: "index" right in a Git directory
 * the guard knows (Git data, in a directory holding control files). */
static int is_index(struct lz_router *r, const char *path, size_t len, bool *ret)
{
	static const char index[] = "index";
	size_t n = sizeof(index) - 1;
	enum lz_guard g, pg;
	*ret = false;
	if (len < n || memcmp(path + len - n, index, n) != 0 || (len > n && path[len - n - 1] != '/'))
		return 0;
	int rc = guard_of(r, path, len, false, &g);
	if (rc < 0 || g != LZ_GUARD_GITDATA)
		return rc;
	if ((rc = guard_of(r, path, len > n ? len - n - 1 : 0, true, &pg)) < 0)
		return rc;
	*ret = pg == LZ_GUARD_HOLDS;
	return 0;
}

int rt_policy_index(struct lz_router *r, const char *path, size_t len)
{
	bool index = false;
	int rc = r->cls.guard == NULL ? 0 : is_index(r, path, len, &index);
	return rc < 0 ? rc : index ? -EPERM : 0;
}

static bool present(int dfd, const char *name, const char *made)
{
	struct stat st;
	return strcmp(name, made) == 0 || fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static bool is_gitdir(int dfd, const char *made)
{
	return present(dfd, "HEAD", made) &&
	       (present(dfd, "commondir", made) ||
		(present(dfd, "objects", made) && present(dfd, "refs", made)));
}

static bool gitdir_marker(const char *name)
{
	return strcmp(name, "HEAD") == 0 || strcmp(name, "objects") == 0 ||
	       strcmp(name, "refs") == 0 || strcmp(name, "commondir") == 0;
}

int rt_policy_new(struct lz_router *r, const char *path, size_t len, bool is_dir, bool special,
		  int dfd, const char *name, bool *locked, enum lz_guard *ret_guard)
{
	*locked = false;
	enum lz_guard g;
	/* host tools follow a symlink as the directory it stands for */
	int rc = guard_of(r, path, len, is_dir || special, &g);
	if (rc < 0)
		return rc;
	if (ret_guard != NULL)
		*ret_guard = g;
	if (g == LZ_GUARD_CONTROL || (special && g != LZ_GUARD_NONE))
		return -EPERM;
	if (!gitdir_marker(name))
		return 0;
	pthread_mutex_lock(&r->gitdir_lock);
	/* Already one (the workspace's own .git, a known one): Git renames
	 * HEAD.lock over HEAD there all the time. */
	if (!is_gitdir(dfd, "") && is_gitdir(dfd, name)) {
		pthread_mutex_unlock(&r->gitdir_lock);
		return -EPERM;
	}
	*locked = true;
	return 0;
}

void rt_policy_done(struct lz_router *r, bool locked)
{
	if (locked)
		pthread_mutex_unlock(&r->gitdir_lock);
}

int rt_policy_name(mode_t mode, const char *name)
{
	static const char *const read_by_git[] = { ".gitignore", ".gitattributes", ".gitmodules",
						   ".mailmap" };
	if (!S_ISFIFO(mode) && !S_ISSOCK(mode))
		return 0;
	for (size_t k = 0; k < sizeof(read_by_git) / sizeof(read_by_git[0]); k++)
		if (strcmp(name, read_by_git[k]) == 0)
			return -EPERM;
	return 0;
}

int rt_policy_remove(struct lz_router *r, const char *path, size_t len, bool is_dir)
{
	enum lz_guard g;
	int rc = guard_of(r, path, len, is_dir, &g);
	return rc < 0 ? rc : g >= LZ_GUARD_HOLDS ? -EPERM : 0;
}

int rt_policy_move_in(struct lz_router *r, const char *from, size_t flen, const char *to, size_t tlen, mode_t mode)
{
	enum lz_guard gt, gf;
	bool dir = S_ISDIR(mode);
	int rc = guard_of(r, to, tlen, dir, &gt);
	if (rc < 0 || gt == LZ_GUARD_NONE)
		return rc < 0 ? rc : 0;
	if (!dir)
		return S_ISREG(mode) ? 0 : -EPERM;
	/* a directory from outside could bring a symlink along */
	if ((rc = guard_of(r, from, flen, true, &gf)) < 0)
		return rc;
	return gf == LZ_GUARD_NONE ? -EPERM : 0;
}

int rt_policy_is_lock(struct lz_router *r, const char *path, size_t len)
{
	static const char suffix[] = ".lock";
	size_t n = sizeof(suffix) - 1;
	if (len <= n || memcmp(path + len - n, suffix, n) != 0 || path[len - n - 1] == '/')
		return 0;
	enum lz_guard g;
	int rc = guard_of(r, path, len - n, false, &g);
	return rc < 0 ? rc : g == LZ_GUARD_CONTROL;
}

/* Caller holds made_lock. */
static bool lock_made_locked(struct lz_router *r, dev_t dev, ino_t ino, uint64_t gen)
{
	for (unsigned k = 0; k < RT_MADE_LOCKS; k++)
		if (r->made[k].ino == ino && r->made[k].dev == dev && r->made[k].gen == gen && ino != 0)
			return true;
	return false;
}

static bool lock_made(struct lz_router *r, dev_t dev, ino_t ino, uint64_t gen)
{
	pthread_mutex_lock(&r->made_lock);
	bool found = lock_made_locked(r, dev, ino, gen);
	pthread_mutex_unlock(&r->made_lock);
	return found;
}

void rt_policy_lock_made(struct lz_router *r, int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return; /* not remembered: its writes are refused, the safe side */
	uint64_t gen = rt_object_gen(fd, "");
	pthread_mutex_lock(&r->made_lock);
	if (!lock_made_locked(r, st.st_dev, st.st_ino, gen)) {
		r->made[r->made_next] = (struct rt_made){ st.st_dev, st.st_ino, gen };
		r->made_next = (r->made_next + 1) % RT_MADE_LOCKS;
	}
	pthread_mutex_unlock(&r->made_lock);
}

static int lock_owned(struct lz_router *r, const char *path, size_t len, dev_t dev, ino_t ino, uint64_t gen)
{
	int rc = rt_policy_is_lock(r, path, len);
	return rc < 0 ? rc : rc == 1 && !lock_made(r, dev, ino, gen) ? -EPERM : 0;
}

int rt_policy_lock_owned(struct lz_router *r, const char *path, size_t len, int fd)
{
	/* The name first: the object's identity costs two system calls on
	 * every unlink and rename, and only a lock's matters. */
	int rc = rt_policy_is_lock(r, path, len);
	if (rc <= 0)
		return rc;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	return lock_made(r, st.st_dev, st.st_ino, rt_object_gen(fd, "")) ? 0 : -EPERM;
}

int rt_policy_lock_take(struct lz_router *r, const char *path, size_t len, int dfd, const char *name,
			int fd, bool *held)
{
	*held = false;
	int rc = rt_policy_is_lock(r, path, len);
	if (rc <= 0)
		return rc;
	pthread_mutex_lock(&r->lockname_lock);
	*held = true;
	/* The object fd is was found at the name before the mutex; only
	 * what is there now counts. */
	_cleanup_close_ int now = rt_openat(r, dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
	struct stat a, b;
	if (now < 0)
		return -errno;
	if (fstat(now, &a) < 0 || fstat(fd, &b) < 0)
		return -errno;
	if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		return -EPERM;
	return lock_made(r, a.st_dev, a.st_ino, rt_object_gen(now, "")) ? 0 : -EPERM;
}

void rt_policy_lock_release(struct lz_router *r, bool held)
{
	if (held)
		pthread_mutex_unlock(&r->lockname_lock);
}

int rt_policy_inode(struct lz_router *r, struct rt_inode *i, bool snap_held)
{
	if (i->backing != RT_HOST || r->cls.guard == NULL)
		return 0;
	char path[PATH_MAX];
	size_t len;
	enum lz_guard g = LZ_GUARD_NONE;
	if (!snap_held)
		rt_rdlock_snap(r);
	/* Judged where it is now (rt_inode_place): one that cannot be
	 * placed is refused, an unnamed one (unlinked) is nobody's. */
	int placed = rt_inode_place(r, i, path, &len);
	int rc = placed;
	if (rc == 0)
		rc = guard_of(r, path, len, S_ISDIR(i->type), &g);
	if (rc == 0 && g != LZ_GUARD_CONTROL && S_ISREG(i->type))
		rc = lock_owned(r, path, len, i->dev, i->ino, i->gen);
	/* An index changes only by Git's guarded rename (router_index.c). */
	if (rc == 0 && g == LZ_GUARD_GITDATA && S_ISREG(i->type))
		rc = rt_policy_index(r, path, len);
	if (!snap_held)
		rt_unlock_snap(r);
	if (rc == 1 || (rc == -ESTALE && placed == 0)) /* unlinked, also meanwhile */
		return 0;
	return rc < 0 ? rc : g == LZ_GUARD_CONTROL ? -EPERM : 0;
}

/* The guard of host-backed i's path; NONE for an object with no name
 * left (nobody's control file). Takes snap_lock. */
static int inode_guard(struct lz_router *r, struct rt_inode *i, enum lz_guard *ret)
{
	*ret = LZ_GUARD_NONE;
	if (i->backing != RT_HOST || r->cls.guard == NULL)
		return 0;
	char path[PATH_MAX];
	size_t len;
	rt_rdlock_snap(r);
	int placed = rt_inode_place(r, i, path, &len); /* as in rt_policy_inode */
	int rc = placed;
	if (rc == 0)
		rc = guard_of(r, path, len, S_ISDIR(i->type), ret);
	rt_unlock_snap(r);
	return rc == 1 || (rc == -ESTALE && placed == 0) ? 0 : rc;
}

int rt_policy_chmod(struct lz_router *r, struct rt_inode *i, int ifd, mode_t mode)
{
	if (i->backing != RT_HOST)
		return 0;
	struct stat st;
	if (fstatat(ifd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	/* Only a change that grants something costs the path walk: group
	 * or other write the object lacks, or the sticky bit set or cleared
	 * (cleared, it lets others rename over what is not theirs). Racing
	 * chmods add up to nothing more: each is judged against the mode the
	 * one before it left. */
	if ((mode & ~st.st_mode & GO_WRITE) == 0 && ((mode ^ st.st_mode) & S_ISVTX) == 0)
		return 0;
	enum lz_guard g;
	int rc = inode_guard(r, i, &g);
	return rc < 0 ? rc : g >= LZ_GUARD_HOLDS ? -EPERM : 0;
}

int rt_policy_acl(struct lz_router *r, struct rt_inode *i, bool is_default, bool set)
{
	enum lz_guard g;
	int rc = inode_guard(r, i, &g);
	if (rc < 0)
		return rc;
	/* Git data may have any mode, and an access ACL is one; a default
	 * ACL is not (what host Git makes below inherits it), and without
	 * one what it makes gets its own umask. */
	return g >= LZ_GUARD_HOLDS || (g == LZ_GUARD_GITDATA && is_default && set) ? -EPERM : 0;
}

/* Reads all of fd (at most cap bytes; -EFBIG beyond). */
static ssize_t read_all(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	for (;;) {
		ssize_t k = pread(fd, buf + n, cap - n, (off_t)n);
		if (k < 0)
			return -errno;
		if (k == 0)
			return (ssize_t)n;
		n += (size_t)k;
		if (n == cap)
			return -EFBIG;
	}
}

#define UNCHANGED_MAX (1u << 20)

int rt_policy_unchanged(struct lz_router *r, int src_fd, int ddfd, const char *newname)
{
	char proc[32];
	rt_procpath(proc, src_fd);
	/* non-blocking: a FIFO at either name must not hold a worker */
	_cleanup_close_ int a = rt_openat(r, AT_FDCWD, proc, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
	_cleanup_close_ int b =
		rt_openat(r, ddfd, newname, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
	struct stat sa, sb;
	if (a < 0 || b < 0 || fstat(a, &sa) < 0 || fstat(b, &sb) < 0 || !S_ISREG(sa.st_mode) ||
	    !S_ISREG(sb.st_mode) || sa.st_size != sb.st_size || sa.st_size >= UNCHANGED_MAX)
		return 0;
	_cleanup_free_ char *x = malloc(UNCHANGED_MAX), *y = malloc(UNCHANGED_MAX);
	if (x == NULL || y == NULL)
		return 0;
	ssize_t nx = read_all(a, x, UNCHANGED_MAX), ny = read_all(b, y, UNCHANGED_MAX);
	return nx >= 0 && nx == ny && memcmp(x, y, (size_t)nx) == 0;
}
