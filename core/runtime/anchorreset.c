/* Resetting State Anchors (anchorreset.h). */
#include "runtime/anchorreset.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "config/domain.h"
#include "fs/tree.h"
#include "proc/userns.h"
#include "runtime/rsplan.h"
#include "store/catalog.h"
#include "store/domainstate.h"
#include "util/cleanup.h"
#include "util/sys.h"
#include "util/testfault.h"

#define ASIDE_PREFIX ".reset-"

void lz_anchor_reset_free(char **v, size_t n)
{
	if (v == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static int push(char ***v, size_t *n, const char *s)
{
	char **grown = realloc(*v, (*n + 1) * sizeof(char *));
	if (grown == NULL)
		return -ENOMEM;
	*v = grown;
	if ((grown[*n] = strdup(s)) == NULL)
		return -ENOMEM;
	(*n)++;
	return 0;
}

static int open_anchors(const struct lz_anchor_reset *a, struct lz_err *err)
{
	int fd = lz_openat2(a->domain_root->fd, "anchor", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
			    LZ_RESOLVE_OWNED);
	if (fd < 0 && errno != ENOENT)
		return lz_err_set(err, errno, "%s/anchor: %s", a->domain_root->canonical,
				  errno == ELOOP || errno == ENOTDIR ? "not a directory" : strerror(errno));
	return fd < 0 ? -ENOENT : fd;
}

/* Whether anchor/ holds an entry for path. */
static bool has_anchor(int anchors, const char *path)
{
	char name[NAME_MAX + 1];
	return anchors >= 0 && lz_rsplan_anchor_name(path, name, sizeof(name)) == 0 &&
	       faccessat(anchors, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

static bool in_list(const char *const *v, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], path) == 0)
			return true;
	return false;
}

int lz_anchor_reset_plan(const struct lz_anchor_reset *a, const char *const *paths, size_t n, char ***ret_v,
			 size_t *ret_n, struct lz_err *err)
{
	char **v = NULL;
	size_t k = 0;
	int r = 0;
	_cleanup_close_ int anchors = open_anchors(a, err);
	if (anchors < 0 && anchors != -ENOENT)
		return anchors;
	if (n > 0) {
		for (size_t i = 0; r >= 0 && i < n; i++) {
			char path[4096];
			size_t len = strlen(paths[i]);
			while (len > 1 && paths[i][len - 1] == '/')
				len--; /* "/usr/local/" is "/usr/local" */
			if (len >= sizeof(path)) {
				r = lz_err_set(err, ENAMETOOLONG, "path too long");
				break;
			}
			memcpy(path, paths[i], len);
			path[len] = '\0';
			if (!in_list((const char *const *)a->persistent, a->n_persistent, path))
				r = lz_err_set(err, EINVAL,
					       "%s is not a persistent directory of this profile (a reset takes one of "
					       "its persistent_dirs, or --all)",
					       path);
			else if (has_anchor(anchors, path) && !in_list((const char *const *)v, k, path) && /* named twice */
				 (r = push(&v, &k, path)) < 0)
				r = lz_err_set(err, ENOMEM, "out of memory");
		}
	} else if (anchors >= 0) {
		_cleanup_close_ int dfd = dup(anchors);
		DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
		if (d == NULL)
			return lz_err_set(err, errno, "read %s/anchor: %s", a->domain_root->canonical, strerror(errno));
		dfd = -EBADF;
		rewinddir(d);
		struct dirent *e;
		while (r >= 0 && (e = readdir(d)) != NULL) {
			char path[4096];
			if (lz_domain_anchor_path(e->d_name, path, sizeof(path)) == 0 && (r = push(&v, &k, path)) < 0)
				r = lz_err_set(err, ENOMEM, "out of memory");
		}
		closedir(d);
	}
	if (r < 0) {
		lz_anchor_reset_free(v, k);
		return r;
	}
	for (size_t i = 1; i < k; i++)
		for (size_t j = i; j > 0 && strcmp(v[j - 1], v[j]) > 0; j--) {
			char *t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	*ret_v = v;
	*ret_n = k;
	return 0;
}

/* The run discards no more than a plan could name (spec 3.9, DX-6): the
 * planned paths are the profile's persistent directories (a plan of
 * paths), or exactly every anchor the Domain has (a plan of all, which
 * also names anchors of directories the profile no longer persists). The
 * list is the caller's: it is checked here, not trusted to be a plan's. */
static int check_planned(const struct lz_anchor_reset *a, const char *const *planned, size_t n,
			 struct lz_err *err)
{
	const char *foreign = NULL;
	for (size_t i = 0; i < n; i++) {
		if (in_list(planned, i, planned[i]))
			return lz_err_set(err, EINVAL, "%s is named twice; nothing was reset", planned[i]);
		if (foreign == NULL && !in_list((const char *const *)a->persistent, a->n_persistent, planned[i]))
			foreign = planned[i];
	}
	if (foreign == NULL)
		return 0;
	char **all = NULL;
	size_t k = 0;
	int r = lz_anchor_reset_plan(a, NULL, 0, &all, &k, err);
	if (r < 0)
		return r;
	bool every = k == n;
	for (size_t i = 0; every && i < k; i++)
		every = in_list(planned, n, all[i]);
	lz_anchor_reset_free(all, k);
	if (!every)
		return lz_err_set(err, EINVAL,
				  "%s is not a persistent directory of this profile, and the reset is not of every "
				  "State Anchor (a reset takes one of its persistent_dirs, or --all); nothing was reset",
				  foreign);
	return 0;
}

/* Spec 3.9: nothing may use the state. The caller's open coordinator
 * released every lease of a generation proved dead; one left is a
 * generation that may still run. */
static int no_lease(const struct lz_anchor_reset *a, struct lz_err *err)
{
	size_t held = 0;
	uint64_t gen = 0;
	int r = lz_catalog_domain_leases(a->storage_root->fd, a->domain_hex, &held, &gen, err);
	if (r < 0)
		return r;
	if (held > 0)
		return lz_err_set(err, EBUSY,
				  "generation %llu of this Domain may still be running (its image lease is held: "
				  "a process of it could not be proved gone); nothing was reset",
				  (unsigned long long)gen);
	return 0;
}

/* Removes what an interrupted reset set aside. */
static int remove_aside(int anchors, const struct lz_idmap *map, struct lz_err *err)
{
	_cleanup_close_ int dfd = dup(anchors);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	if (d == NULL)
		return lz_err_set(err, errno, "read anchor/: %s", strerror(errno));
	dfd = -EBADF;
	rewinddir(d);
	int r = 0;
	struct dirent *e;
	while (r >= 0 && (e = readdir(d)) != NULL)
		if (strncmp(e->d_name, ASIDE_PREFIX, strlen(ASIDE_PREFIX)) == 0)
			r = lz_tree_remove_in_userns(map, anchors, e->d_name, err);
	closedir(d);
	return r;
}

/* Setting aside planned[done] failed (why): says which were reset
 * before it, and that it and the rest were not. */
static int not_all_reset(const char *const *planned, size_t done, size_t n, int code, const char *why,
			 struct lz_err *err)
{
	char list[LZ_ERR_MSG_MAX / 2] = "";
	size_t len = 0;
	for (size_t i = 0; i < done && len < sizeof(list); i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "", planned[i]);
	if (done == 0)
		return lz_err_set(err, code, "set aside the State Anchor of %s: %s; nothing was reset", planned[0],
				  why);
	return lz_err_set(err, code, "set aside the State Anchor of %s: %s; reset: %s; not reset: %s%s",
			  planned[done], why, list, planned[done], done + 1 < n ? " and the ones after it" : "");
}

int lz_anchor_reset_run(const struct lz_anchor_reset *a, const char *const *planned, size_t n, struct lz_err *err)
{
	struct lz_idmap map;
	int r;
	if (n > LZ_ANCHOR_RESET_MAX)
		return lz_err_set(err, E2BIG, "at most %d State Anchors at once", LZ_ANCHOR_RESET_MAX);
	if ((r = check_planned(a, planned, n, err)) < 0)
		return r;
	_cleanup_free_ char(*names)[NAME_MAX + 1] = calloc(n ? n : 1, sizeof(*names));
	_cleanup_free_ char(*aside)[sizeof(ASIDE_PREFIX) + 17] = calloc(n ? n : 1, sizeof(*aside));
	if (names == NULL || aside == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	_cleanup_close_ int anchors = open_anchors(a, err);
	if (anchors == -ENOENT)
		return n == 0 ? 0 : lz_err_set(err, ENOENT, "the Domain has no State Anchors");
	if (anchors < 0 || (r = no_lease(a, err)) < 0 || (r = lz_idmap_for_invoking_user(&map, err)) < 0)
		return anchors < 0 ? anchors : r;
	/* Every anchor is checked before any is touched: a refusal changes
	 * nothing. */
	for (size_t i = 0; i < n; i++) {
		if (lz_rsplan_anchor_name(planned[i], names[i], sizeof(names[i])) < 0)
			return lz_err_set(err, ENAMETOOLONG, "%s: name too long", planned[i]);
		_cleanup_close_ int one = lz_openat2(anchors, names[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
						     LZ_RESOLVE_OWNED);
		if (one < 0)
			return lz_err_set(err, errno == ENOTDIR || errno == ELOOP ? EPERM : errno,
					  "the State Anchor of %s is %s; nothing was reset", planned[i],
					  errno == ENOTDIR || errno == ELOOP ? "not a directory (a symlink?)"
									     : strerror(errno));
	}
	if ((r = remove_aside(anchors, &map, err)) < 0)
		return r;
	/* All set aside first (OR-5: the one step that changes what a launch
	 * sees, each), then deleted: a failure says which were reset. */
	size_t done = 0;
	int failed = 0;
	const char *why = NULL;
	for (; done < n; done++) {
		uint8_t rnd[8];
		if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
			failed = EIO, why = "getrandom failed";
			break;
		}
		memcpy(aside[done], ASIDE_PREFIX, strlen(ASIDE_PREFIX));
		lz_hex(rnd, sizeof(rnd), aside[done] + strlen(ASIDE_PREFIX));
		if (lz_test_fault("reset-before-rename"))
			raise(SIGKILL);
		if (done == 1 && lz_test_fault("reset-second-rename-fails")) {
			failed = EIO, why = strerror(EIO);
			break;
		}
		if (renameat(anchors, names[done], anchors, aside[done]) < 0) {
			failed = errno, why = strerror(errno);
			break;
		}
		if (lz_test_fault("reset-after-rename"))
			raise(SIGKILL);
	}
	/* Every one set aside is deleted, whatever failed before. */
	struct lz_err removal = { 0, "" };
	size_t undeleted = n;
	for (size_t i = 0; i < done; i++) {
		struct lz_err e = { 0, "" };
		if (lz_tree_remove_in_userns(&map, anchors, aside[i], &e) < 0 && undeleted == n)
			undeleted = i, removal = e;
	}
	if (failed) {
		r = not_all_reset(planned, done, n, failed, why, err);
		if (undeleted < n) {
			size_t len = strlen(err->msg);
			snprintf(err->msg + len, sizeof(err->msg) - len,
				 "; removing the old layer of %s failed too (the next reset removes it)",
				 planned[undeleted]);
		}
		return r;
	}
	if (undeleted < n) {
		*err = removal;
		return lz_err_prefix(err, removal.code > 0 ? -removal.code : -EIO,
				     "all were reset; removing the old layer of %s failed (the next reset "
				     "removes it): ",
				     planned[undeleted]);
	}
	return 0;
}
