/* Removing a Domain whose workspace is gone (domainremove.h). */
#include "runtime/domainremove.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/domain.h"
#include "fs/tree.h"
#include "proc/userns.h"
#include "proc/spawn.h"
#include "runtime/leaserecovery.h"
#include "runtime/rundir.h"
#include "store/catalog.h"
#include "store/domainstate.h"
#include "store/domainstore.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/sys.h"
#include "util/testfault.h"

static int open_domains(const struct lz_domain_remove *r, struct lz_err *err)
{
	int fd = lz_openat2(r->storage_root->fd, "domains", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
			    LZ_RESOLVE_OWNED);
	if (fd < 0)
		return lz_err_set(err, errno == ENOENT ? ENOENT : errno, "%s/domains: %s", r->storage_root->canonical,
				  strerror(errno));
	return fd;
}

int lz_domain_remove_check(const struct lz_domain_remove *r, struct lz_domain_identity *ret, struct lz_err *err)
{
	if (!lz_domain_id_hex(r->domain_hex))
		return lz_err_set(err, EINVAL, "'%s' is not a Domain ID (64 lowercase hex digits; `lazaret state list` "
					       "shows them)",
				  r->domain_hex);
	_cleanup_close_ int domains = open_domains(r, err);
	if (domains < 0)
		return domains;
	_cleanup_close_ int dom =
		lz_openat2(domains, r->domain_hex, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, LZ_RESOLVE_OWNED);
	if (dom < 0 && errno == ENOENT) {
		char aside[sizeof(LZ_DOMAIN_ASIDE_PREFIX) + LZ_DOMAIN_ID_HEX_LEN];
		snprintf(aside, sizeof(aside), LZ_DOMAIN_ASIDE_PREFIX "%s", r->domain_hex);
		_cleanup_close_ int set_aside =
			lz_openat2(domains, aside, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, LZ_RESOLVE_OWNED);
		if (set_aside >= 0) {
			*ret = (struct lz_domain_identity){ 0 };
			return 2; /* removed, its files not yet deleted */
		}
	}
	if (dom < 0)
		return lz_err_set(err, errno == ENOENT ? ENOENT : EPERM, "Domain %s: %s", r->domain_hex,
				  errno == ENOENT ? "no such Domain" : "its Domain Root is not a directory");
	struct lz_domain_identity id;
	struct lz_err e = { 0, "" };
	int rc = lz_identity_read(dom, r->domain_hex, &id, &e);
	if (rc == -ENOENT && lz_domain_root_empty(dom) == 1) {
		*ret = (struct lz_domain_identity){ 0 };
		return 1; /* never launched: nothing kept */
	}
	if (rc < 0)
		return lz_err_set(err, EPROTO, "Domain %s is not removed: %s", r->domain_hex,
				  rc == -ENOENT ? "it has no recorded identity and holds files (launch it once "
						  "to record one)"
						: e.msg);
	struct stat st;
	if (fstatat(AT_FDCWD, id.workspace, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
		return lz_err_set(err, EEXIST,
				  "the workspace of Domain %s (%s) still exists: a Domain is removed only once its "
				  "workspace is gone; `lazaret state reset --profile %s --all` in it discards its "
				  "kept state",
				  r->domain_hex, id.workspace, id.profile);
	*ret = id;
	return 0;
}

/* Spec 3.3: a generation left live is a lost coordinator's (we hold the
 * flock, and the one it recorded is gone). */
static int end_lost(lz_dstore *store, struct lz_err *err)
{
	_cleanup_free_ struct lz_dstore_generation *v = NULL;
	size_t n = 0;
	int rc = lz_dstore_generation_list(store, 1, &v, &n, err);
	if (rc < 0 || n == 0 || v[0].state == LZ_DSTORE_GEN_STOPPED || v[0].state == LZ_DSTORE_GEN_FAILED)
		return rc;
	return lz_leaserecovery_record_lost(store, v[0].generation, err);
}

static int no_lease(const struct lz_domain_remove *r, struct lz_err *err)
{
	size_t held = 0;
	uint64_t gen;
	int rc = lz_catalog_domain_leases(r->storage_root->fd, r->domain_hex, &held, &gen, err);
	if (rc < 0)
		return rc;
	return held ? lz_err_set(err, EBUSY,
				 "an image lease of Domain %s is held (a process of it could not be proved gone); "
				 "nothing was removed",
				 r->domain_hex)
		    : 0;
}

static int remove_aside(int domains, const struct lz_idmap *map, struct lz_err *err)
{
	_cleanup_close_ int dfd = openat(domains, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	if (d == NULL)
		return lz_err_set(err, errno, "read domains/: %s", strerror(errno));
	dfd = -EBADF;
	int rc = 0;
	struct dirent *e;
	while (rc >= 0 && (e = readdir(d)) != NULL)
		if (strncmp(e->d_name, LZ_DOMAIN_ASIDE_PREFIX, strlen(LZ_DOMAIN_ASIDE_PREFIX)) == 0)
			rc = lz_tree_remove_in_userns(map, domains, e->d_name, err);
	closedir(d);
	return rc;
}

/* Lost generations' runtime trees (proved gone with the leases) go before
 * the Domain does: once the Domain Root is set aside, no `state rm` can
 * finish them, and a Domain made anew with the same ID would find one and
 * be refused as possibly still running. */
static int remove_runtime_trees(const struct lz_path *runtime_domain, struct lz_err *err)
{
	uint64_t gens[64];
	for (int pass = 0; pass < 64; pass++) {
		int n = lz_rundir_generations(runtime_domain, gens, LZ_ARRAY_SIZE(gens), err);
		if (n <= 0)
			return n;
		for (int i = 0; i < n; i++) {
			int rc = lz_rundir_remove_generation(runtime_domain, gens[i], err);
			if (rc < 0)
				return lz_err_prefix(err, rc, "the Domain is kept; deleting the runtime tree of its lost "
							      "generation %llu failed: ",
						     (unsigned long long)gens[i]);
		}
	}
	return lz_err_set(err, EBUSY, "the Domain is kept; generation trees keep appearing in %s",
			  runtime_domain->canonical);
}

int lz_domain_remove_run(const struct lz_domain_remove *r, struct lz_err *err)
{
	struct lz_domain_identity id;
	struct lz_path runtime_root = LZ_PATH_INIT, runtime_domains = LZ_PATH_INIT, runtime_domain = LZ_PATH_INIT;
	struct lz_idmap map;
	lz_dstore *store = NULL;
	_cleanup_close_ int lock = -EBADF, domains = -EBADF, dom = -EBADF;
	char aside[sizeof(LZ_DOMAIN_ASIDE_PREFIX) + 64];
	int rc, empty;
	if ((rc = empty = lz_domain_remove_check(r, &id, err)) < 0 || (rc = lz_idmap_for_invoking_user(&map, err)) < 0)
		return rc;
	if (lz_test_fault("rm-workspace-returns") && rc == 0)
		(void)mkdir(id.workspace, 0700); /* the race below, on purpose */
	/* The Domain flock, as a coordinator takes it. */
	if ((rc = lz_path_open_owned_root(r->runtime_root, &runtime_root, err)) < 0 ||
	    (rc = lz_path_owned_child(&runtime_root, "domains", true, &runtime_domains, err)) < 0 ||
	    (rc = lz_path_owned_child(&runtime_domains, r->domain_hex, true, &runtime_domain, err)) < 0)
		goto out;
	if ((rc = lz_rundir_lock(&runtime_domain, &lock, err)) < 0) {
		if (rc == -EBUSY)
			rc = lz_err_set(err, EBUSY, "Domain %s is in use; nothing was removed", r->domain_hex);
		goto out;
	}
	/* Again under the lock: a launch that ended between the check and the
	 * lock may have made the workspace and the Domain's state anew. */
	if ((rc = empty = lz_domain_remove_check(r, &id, err)) < 0)
		goto out;
	if ((domains = open_domains(r, err)) < 0) {
		rc = domains;
		goto out;
	}
	if (empty == 2) {
		snprintf(aside, sizeof(aside), LZ_DOMAIN_ASIDE_PREFIX "%s", r->domain_hex);
		if ((rc = lz_tree_remove_in_userns(&map, domains, aside, err)) < 0) {
			rc = lz_err_prefix(err, rc, "Domain %s: deleting the files an interrupted removal set aside "
						    "failed: ",
					   r->domain_hex);
			goto out;
		}
		goto runtime_dir;
	}
	if (empty == 1) {
		/* Never launched: an empty directory, and only while it is one.
		 * Its runtime directory stays: its lock file is what a launch
		 * loading this Domain now takes next (removing it would let two
		 * launches hold the Domain). */
		if (unlinkat(domains, r->domain_hex, AT_REMOVEDIR) < 0) {
			rc = lz_err_set(err, errno, "Domain %s: %s; nothing was removed", r->domain_hex,
					errno == ENOTEMPTY || errno == EEXIST ? "it is no longer empty" : strerror(errno));
			goto out;
		}
		rc = 0;
		goto out;
	}
	if ((dom = lz_openat2(domains, r->domain_hex, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
			      LZ_RESOLVE_OWNED)) < 0) {
		rc = lz_err_set(err, errno, "Domain %s: %s", r->domain_hex, strerror(errno));
		goto out;
	}
	if ((rc = lz_dstore_open(dom, &store, err)) < 0 || (rc = end_lost(store, err)) < 0 ||
	    (rc = lz_leaserecovery_run(store, r->storage_root->fd, r->domain_hex, lz_now_ms() + LZ_RECOVERY_EXIT_WAIT_MS,
				      lz_escape_report_stderr, NULL, NULL, err)) < 0 ||
	    (rc = no_lease(r, err)) < 0 || (rc = remove_runtime_trees(&runtime_domain, err)) < 0)
		goto out;
	lz_dstore_close(store);
	store = NULL;
	lz_close_fdp(&dom);
	if ((rc = remove_aside(domains, &map, err)) < 0)
		goto out;
	snprintf(aside, sizeof(aside), LZ_DOMAIN_ASIDE_PREFIX "%s", r->domain_hex);
	/* The one step after which the Domain is gone. */
	if (renameat(domains, r->domain_hex, domains, aside) < 0) {
		rc = lz_err_set(err, errno, "set Domain %s aside: %s", r->domain_hex, strerror(errno));
		goto out;
	}
	if (lz_test_fault("rm-after-rename"))
		raise(SIGKILL);
	if ((rc = lz_tree_remove_in_userns(&map, domains, aside, err)) < 0) {
		rc = lz_err_prefix(err, rc, "Domain %s was removed; deleting its files failed (`lazaret state rm %s` "
					    "again finishes): ",
				   r->domain_hex, r->domain_hex);
		goto out;
	}
runtime_dir:
	/* Its runtime directory: the lock and the log, and what a lost
	 * generation left (its transient layer holds the sandbox's
	 * subordinate-owned files: removed in the user namespace). Removed
	 * while the lock is held: a launch meanwhile is refused as busy. */
	if ((rc = lz_tree_remove_in_userns(&map, runtime_domains.fd, r->domain_hex, err)) < 0)
		rc = lz_err_prefix(err, rc, "Domain %s was removed; deleting its runtime directory %s failed: ",
				   r->domain_hex, runtime_domain.canonical);
out:
	lz_dstore_close(store);
	lz_path_release(&runtime_domain);
	lz_path_release(&runtime_domains);
	lz_path_release(&runtime_root);
	return rc;
}
