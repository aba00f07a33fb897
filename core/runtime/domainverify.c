/* Structural verification of a Domain (domainverify.h). */
#include "runtime/domainverify.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/treescan.h"
#include "proc/userns.h"
#include "runtime/rsplan.h"
#include "store/catalog.h"
#include "store/domainstate.h"
#include "store/identity.h"
#include "util/cleanup.h"
#include "util/sys.h"

struct run {
	lz_domain_verify_report *report;
	void *ctx;
	int failed;
};

static void result(struct run *x, const char *check, bool ok, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void result(struct run *x, const char *check, bool ok, const char *fmt, ...)
{
	char detail[LZ_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	if (!ok)
		x->failed++;
	x->report(x->ctx, check, ok, detail);
}

static void check_identity(const struct lz_domain_verify *v, struct run *x)
{
	struct lz_domain_identity id;
	struct lz_err e = { 0, "" };
	if (lz_identity_read(v->domain_root->fd, v->domain_hex, &id, &e) < 0)
		result(x, "identity", false, "%s", e.msg);
	else
		result(x, "identity", true, "profile %s, workspace %s", id.profile, id.workspace);
}

static int count_volume(void *ctx, const char *source)
{
	(void)source;
	(*(size_t *)ctx)++;
	return 0;
}

/* The record of the volumes its sandbox could write (identity.h): a
 * damaged one refuses every launch of the Domain and every escalation
 * under the Storage Root. */
static void check_volumes(const struct lz_domain_verify *v, struct run *x)
{
	struct lz_err e = { 0, "" };
	size_t n = 0;
	if (lz_identity_volumes_each(v->domain_root->fd, count_volume, &n, &e) < 0)
		result(x, "volume record", false, "%s", e.msg);
	else
		result(x, "volume record", true, "%zu writable volume source%s recorded", n, n == 1 ? "" : "s");
}

static void check_store(const struct lz_domain_verify *v, struct run *x)
{
	struct lz_err e = { 0, "" };
	_cleanup_free_ struct lz_dstore_generation *g = NULL;
	size_t n = 0;
	if (lz_dstore_integrity(v->store, &e) < 0) {
		result(x, "domain store", false, "%s", e.msg);
		return;
	}
	if (lz_dstore_generation_list(v->store, 1, &g, &n, &e) < 0) {
		result(x, "domain store", false, "%s", e.msg);
		return;
	}
	if (n > 0 && g[0].state != LZ_DSTORE_GEN_STOPPED && g[0].state != LZ_DSTORE_GEN_FAILED)
		result(x, "domain store", false, "generation %llu is not ended", (unsigned long long)g[0].generation);
	else
		result(x, "domain store", true, "intact; %s", n ? "the last generation ended" : "no generation yet");
}

static void check_leases(const struct lz_domain_verify *v, struct run *x)
{
	size_t held = 0;
	uint64_t gen = 0;
	struct lz_err e = { 0, "" };
	if (lz_catalog_domain_leases(v->storage_root->fd, v->domain_hex, &held, &gen, &e) < 0) {
		result(x, "leases", false, "%s", e.msg);
		return;
	}
	if (held)
		result(x, "leases", false,
		       "%zu image lease%s held (generation %llu): a process of it could not be proved gone", held,
		       held == 1 ? "" : "s", (unsigned long long)gen);
	else
		result(x, "leases", true, "none held");
}

static bool persisted(const struct lz_domain_verify *v, const char *path)
{
	for (size_t i = 0; i < v->n_persistent; i++)
		if (strcmp(v->persistent[i], path) == 0)
			return true;
	return false;
}

static void check_scan(struct run *x, const struct lz_idmap *map, const char *check, const char *what, int dir_fd,
		       const char *name)
{
	struct lz_tree_usage u;
	struct lz_err e = { 0, "" };
	if (lz_tree_usage_in_userns(map, dir_fd, name, &u, &e) < 0)
		result(x, check, false, "%s: %s", what, e.msg);
	else if (u.limit == LZ_TREE_LIMIT_DEPTH)
		result(x, check, false, "%s: a directory nested deeper than %d levels inside was not read", what,
		       LZ_TREE_MAX_DEPTH);
	else if (u.limit == LZ_TREE_LIMIT_ENTRIES)
		result(x, check, false, "%s: more than %u entries inside; the rest was not read", what,
		       LZ_TREE_SCAN_MAX_ENTRIES);
	else if (u.incomplete)
		result(x, check, false, "%s: not all of it could be read (a mount or an unreadable entry inside)",
		       what);
	else
		result(x, check, true, "%s: %llu files, %llu directories", what, (unsigned long long)u.files,
		       (unsigned long long)u.dirs);
}

/* One anchor directory: a directory holding directories upper/ and work/. */
static void check_anchor(const struct lz_domain_verify *v, struct run *x, const struct lz_idmap *map, int anchors,
			 const char *name)
{
	char path[4096];
	(void)lz_domain_anchor_path(name, path, sizeof(path));
	_cleanup_close_ int one =
		lz_openat2(anchors, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, LZ_RESOLVE_OWNED);
	if (one < 0) {
		result(x, "anchor", false, "%s: %s", path,
		       errno == ENOTDIR || errno == ELOOP ? "not a directory (a symlink?)" : strerror(errno));
		return;
	}
	static const char *const parts[] = { "upper", "work" };
	for (size_t i = 0; i < 2; i++) {
		_cleanup_close_ int d =
			lz_openat2(one, parts[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, LZ_RESOLVE_OWNED);
		if (d < 0) {
			result(x, "anchor", false, "%s: its %s layer is %s", path, parts[i],
			       errno == ENOENT	? "missing"
			       : errno == ENOTDIR || errno == ELOOP ? "not a directory"
								    : strerror(errno));
			return;
		}
	}
	if (!persisted(v, path))
		result(x, "anchor", true, "%s: kept for a directory the profile no longer persists", path);
	check_scan(x, map, "anchor", path, one, "upper");
}

int lz_domain_verify(const struct lz_domain_verify *v, lz_domain_verify_report *report, void *ctx,
		     struct lz_err *err)
{
	struct run x = { report, ctx, 0 };
	struct lz_idmap map;
	int r;
	if ((r = lz_idmap_for_invoking_user(&map, err)) < 0)
		return r;
	check_identity(v, &x);
	check_volumes(v, &x);
	check_store(v, &x);
	check_leases(v, &x);
	_cleanup_close_ int anchors = lz_openat2(v->domain_root->fd, "anchor",
						 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, LZ_RESOLVE_OWNED);
	if (anchors < 0 && errno != ENOENT)
		result(&x, "anchors", false, "anchor/: %s",
		       errno == ENOTDIR || errno == ELOOP ? "not a directory (a symlink?)" : strerror(errno));
	size_t aside = 0, n = 0;
	if (anchors >= 0) {
		_cleanup_close_ int dfd = dup(anchors);
		DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
		if (d == NULL)
			return lz_err_set(err, errno, "read anchor/: %s", strerror(errno));
		dfd = -EBADF;
		struct dirent *e;
		char path[4096];
		while ((e = readdir(d)) != NULL) {
			if (strncmp(e->d_name, ".reset-", 7) == 0)
				aside++;
			else if (lz_domain_anchor_path(e->d_name, path, sizeof(path)) == 0) {
				check_anchor(v, &x, &map, anchors, e->d_name);
				n++;
			} else if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
				result(&x, "anchors", false, "anchor/ holds an entry Lazaret never makes");
		}
		closedir(d);
	}
	if (n == 0)
		result(&x, "anchors", true, "no State Anchor yet");
	if (aside == 0)
		result(&x, "leftovers", true, "nothing set aside");
	else
		result(&x, "leftovers", false, "%zu tree%s set aside by an interrupted reset (the next reset removes "
					       "them)",
		       aside, aside == 1 ? "" : "s");
	_cleanup_close_ int ignored = lz_openat2(v->domain_root->fd, "ignored",
						 O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, LZ_RESOLVE_OWNED);
	if (ignored < 0 && errno == ENOENT)
		result(&x, "ignored", true, "no Ignored Workspace State yet");
	else if (ignored < 0)
		result(&x, "ignored", false, "ignored/: %s",
		       errno == ENOTDIR || errno == ELOOP ? "not a directory (a symlink?)" : strerror(errno));
	else
		check_scan(&x, &map, "ignored", "Ignored Workspace State", v->domain_root->fd, "ignored");
	return x.failed;
}
