/* `lazaret state list`'s facts (domainstate.h). */
#include "store/domainstate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc/userns.h"
#include "runtime/rsplan.h"
#include "store/catalog.h"
#include "store/domainstore.h"
#include "util/cleanup.h"
#include "util/sys.h"

int lz_domain_anchor_path(const char *name, char *out, size_t size)
{
	size_t n = 0;
	if (size < 2 || name[0] == '\0' || name[0] == '.')
		return -EINVAL;
	out[n++] = '/';
	for (const char *p = name; *p; p++) {
		char c = *p;
		if (c == '%') {
			if (strncmp(p, "%2F", 3) == 0)
				c = '/';
			else if (strncmp(p, "%25", 3) == 0)
				c = '%';
			else if (p == name && strncmp(p, "%2E", 3) == 0)
				c = '.'; /* only first: lz_rsplan_anchor_name's one form */
			else
				return -EINVAL;
			p += 2;
		}
		if (n + 1 >= size)
			return -ENAMETOOLONG;
		out[n++] = c;
	}
	out[n] = '\0';
	return 0;
}

bool lz_domain_id_hex(const char *s)
{
	if (strlen(s) != LZ_DOMAIN_ID_HEX_LEN)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

/* *ret, a stream of dir_fd's entries (an O_PATH descriptor is not one):
 * 0, or -errno with err naming what. */
static int entries_of(int dir_fd, const char *what, DIR **ret, struct lz_err *err)
{
	int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	*ret = fd < 0 ? NULL : fdopendir(fd);
	if (*ret != NULL)
		return 0;
	int e = errno;
	if (fd >= 0)
		close(fd);
	return lz_err_set(err, e, "%s: %s", what, strerror(e));
}

/* The names of dir_fd's entries that pass keep, sorted; free with
 * free_names. */
static int names_of(int dir_fd, bool (*keep)(const char *), char ***ret, size_t *ret_n, size_t max,
		    struct lz_err *err)
{
	DIR *d;
	int rc = entries_of(dir_fd, "read directory", &d, err);
	if (rc < 0)
		return rc;
	char **v = NULL;
	size_t n = 0;
	struct dirent *e;
	int r = 0;
	while (r == 0 && (e = readdir(d)) != NULL) {
		if (!keep(e->d_name))
			continue;
		char **grown = n < max ? realloc(v, (n + 1) * sizeof(*v)) : NULL;
		if (grown == NULL || (grown[n] = strdup(e->d_name)) == NULL) {
			if (grown != NULL)
				v = grown;
			r = n < max ? lz_err_set(err, ENOMEM, "out of memory")
				    : lz_err_set(err, E2BIG, "more than %zu entries", max);
			break;
		}
		v = grown;
		n++;
	}
	closedir(d);
	if (r < 0) {
		for (size_t i = 0; i < n; i++)
			free(v[i]);
		free(v);
		return r;
	}
	for (size_t i = 1; i < n; i++) /* insertion sort: a few entries */
		for (size_t k = i; k > 0 && strcmp(v[k - 1], v[k]) > 0; k--) {
			char *t = v[k];
			v[k] = v[k - 1];
			v[k - 1] = t;
		}
	*ret = v;
	*ret_n = n;
	return 0;
}

/* storage_root/domains, or -ENOENT (no Domain yet: nothing said in err),
 * or -errno. */
static int open_domains(const struct lz_path *storage_root, struct lz_err *err)
{
	int fd = lz_openat2(storage_root->fd, "domains", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
			    LZ_RESOLVE_OWNED);
	if (fd < 0 && errno != ENOENT)
		return lz_err_set(err, errno, "%s/domains: %s", storage_root->canonical, strerror(errno));
	return fd < 0 ? -ENOENT : fd;
}

/* LZ_DOMAIN_ASIDE_PREFIX and a Domain ID. */
static bool aside_name(const char *s)
{
	size_t n = strlen(LZ_DOMAIN_ASIDE_PREFIX);
	return strncmp(s, LZ_DOMAIN_ASIDE_PREFIX, n) == 0 && lz_domain_id_hex(s + n);
}

static void free_names(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static bool anchor_name(const char *s)
{
	char path[4096];
	return lz_domain_anchor_path(s, path, sizeof(path)) == 0;
}

/* A Host Coordinator holds the Domain flock (spec 3.3). Tried without
 * blocking and released at once; a missing runtime directory is inactive. */
static bool domain_active(int runtime_domains_fd, const char *id)
{
	char lock[LZ_DOMAIN_ID_HEX_LEN + 16];
	if (runtime_domains_fd < 0)
		return false;
	snprintf(lock, sizeof(lock), "%s/hc.lock", id);
	_cleanup_close_ int fd = lz_openat2(runtime_domains_fd, lock, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
					    LZ_RESOLVE_OWNED);
	if (fd < 0)
		return false;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		return errno == EWOULDBLOCK;
	(void)flock(fd, LOCK_UN);
	return false;
}

static int measure(const struct lz_idmap *map, int dir_fd, const char *name, struct lz_tree_usage *ret,
		   struct lz_err *err)
{
	struct lz_tree_usage u;
	int r = lz_tree_usage_in_userns(map, dir_fd, name, &u, err);
	if (r >= 0)
		*ret = u;
	return r;
}

static int anchors_of(struct lz_domain_state *d, int domain_fd, const struct lz_idmap *map, struct lz_err *err)
{
	_cleanup_close_ int anchors = lz_openat2(domain_fd, "anchor", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
						 LZ_RESOLVE_OWNED);
	char **names = NULL;
	size_t n = 0;
	if (anchors < 0)
		return errno == ENOENT ? 0 : lz_err_set(err, errno, "anchor: %s", strerror(errno));
	int r = names_of(anchors, anchor_name, &names, &n, 256, err);
	if (r < 0)
		return r;
	d->anchors = calloc(n ? n : 1, sizeof(*d->anchors));
	if (d->anchors == NULL) {
		free_names(names, n);
		return lz_err_set(err, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		struct lz_domain_anchor *a = &d->anchors[d->n_anchors++];
		(void)lz_domain_anchor_path(names[i], a->path, sizeof(a->path));
		if (map == NULL)
			continue;
		_cleanup_close_ int one = lz_openat2(anchors, names[i],
						     O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, LZ_RESOLVE_OWNED);
		struct lz_err ignored;
		a->measured = one >= 0 && measure(map, one, "upper", &a->upper, &ignored) >= 0;
	}
	free_names(names, n);
	return 0;
}

static int leases_by_domain(int root_fd, struct lz_domain_state *v, size_t n, struct lz_err *err)
{
	struct lz_catalog_lease *leases = NULL;
	size_t n_leases = 0;
	int r = lz_catalog_lease_list(root_fd, NULL, &leases, &n_leases, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n_leases; i++)
		for (size_t k = 0; k < n; k++)
			if (strcmp(leases[i].domain_id, v[k].id) == 0)
				v[k].leases++;
	free(leases);
	return 0;
}

int lz_domain_root_empty(int domain_fd)
{
	_cleanup_close_ int fd = lz_openat2(domain_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, LZ_RESOLVE_OWNED);
	DIR *dir = fd < 0 ? NULL : fdopendir(fd);
	if (dir == NULL)
		return -errno;
	fd = -EBADF; /* the stream's now */
	int empty = 1;
	struct dirent *e;
	while (empty && (e = readdir(dir)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			empty = 0;
	closedir(dir);
	return empty;
}

static int one_domain(struct lz_domain_state *d, int domains_fd, int runtime_domains_fd, const struct lz_idmap *map,
		      struct lz_err *err)
{
	struct lz_err why = { 0, "" };
	struct stat st;
	_cleanup_close_ int fd =
		lz_openat2(domains_fd, d->id, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, LZ_RESOLVE_OWNED);
	if (fd < 0) {
		snprintf(d->problem, sizeof(d->problem), "cannot open its Domain Root: %s",
			 errno == ENOTDIR || errno == ELOOP ? "not a directory" : strerror(errno));
		return 0;
	}
	int r = lz_identity_read(fd, d->id, &d->identity, &why);
	d->identity_ok = r == 0;
	d->never_launched = r == -ENOENT && lz_domain_root_empty(fd) == 1;
	if (d->never_launched)
		snprintf(d->problem, sizeof(d->problem),
			 "never launched, nothing kept (`config check --profile` or `state inspect` made "
			 "its directory; `lazaret state rm %s` removes it)",
			 d->id);
	else if (r == -ENOENT)
		snprintf(d->problem, sizeof(d->problem), "no recorded identity (last used before identities were kept)");
	else if (r < 0)
		snprintf(d->problem, sizeof(d->problem), "%s", why.msg);
	if (r < 0 && r != -ENOENT)
		return 0; /* foreign: nothing else is read from it */
	/* As `state rm` judges it: a link left at the path is not gone. */
	d->workspace_gone = d->identity_ok && fstatat(AT_FDCWD, d->identity.workspace, &st, AT_SYMLINK_NOFOLLOW) < 0 &&
			    errno == ENOENT;
	d->active = domain_active(runtime_domains_fd, d->id);
	if (fstatat(fd, LZ_DSTORE_DB_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0)
		d->last_use = st.st_mtim.tv_sec;
	if ((r = anchors_of(d, fd, map, err)) < 0)
		return r;
	struct lz_err ignored;
	d->has_ignored = map != NULL && measure(map, fd, "ignored", &d->ignored, &ignored) >= 0;
	return 0;
}

int lz_domain_state_list(const struct lz_path *storage_root, const char *runtime_root, bool sizes,
			 struct lz_domain_state **ret_v, size_t *ret_n, struct lz_err *err)
{
	struct lz_idmap map;
	struct lz_path runtime = LZ_PATH_INIT;
	_cleanup_close_ int runtime_domains = -EBADF;
	char **ids = NULL, **aside = NULL;
	size_t n = 0, n_aside = 0;
	int r;
	if (sizes && (r = lz_idmap_for_invoking_user(&map, err)) < 0)
		return r;
	_cleanup_close_ int domains = open_domains(storage_root, err);
	if (domains < 0 && domains != -ENOENT)
		return domains;
	if (domains >= 0 && (r = names_of(domains, lz_domain_id_hex, &ids, &n, LZ_DOMAINSTATE_MAX, err)) < 0)
		return r;
	if (domains >= 0 && (r = names_of(domains, aside_name, &aside, &n_aside, LZ_DOMAINSTATE_MAX, err)) < 0) {
		free_names(ids, n);
		return r;
	}
	struct lz_err ignored;
	if (runtime_root != NULL && lz_path_open(runtime_root, &runtime, &ignored) >= 0)
		runtime_domains = lz_openat2(runtime.fd, "domains", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
					     LZ_RESOLVE_OWNED);
	lz_path_release(&runtime);
	struct lz_domain_state *v = calloc(n + n_aside ? n + n_aside : 1, sizeof(*v));
	if (v == NULL) {
		free_names(ids, n);
		free_names(aside, n_aside);
		return lz_err_set(err, ENOMEM, "out of memory");
	}
	r = 0;
	for (size_t i = 0; r >= 0 && i < n; i++) {
		snprintf(v[i].id, sizeof(v[i].id), "%s", ids[i]);
		r = one_domain(&v[i], domains, runtime_domains, sizes ? &map : NULL, err);
	}
	for (size_t i = 0; i < n_aside; i++) {
		snprintf(v[n + i].id, sizeof(v[n + i].id), "%s", aside[i] + strlen(LZ_DOMAIN_ASIDE_PREFIX));
		v[n + i].removal_interrupted = true;
	}
	free_names(ids, n);
	free_names(aside, n_aside);
	n += n_aside;
	if (r >= 0 && n > 0)
		r = leases_by_domain(storage_root->fd, v, n, err);
	if (r < 0) {
		lz_domain_state_free(v, n);
		return r;
	}
	*ret_v = v;
	*ret_n = n;
	return 0;
}

void lz_domain_state_free(struct lz_domain_state *v, size_t n)
{
	if (v == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i].anchors);
	free(v);
}

/* The lower of persistent directory path: its parent opened beneath the
 * rootfs (no link, no other mount) and its last component. */
static int open_lower(int rootfs_fd, const char *path, int *ret_parent, const char **ret_name)
{
	char parent[4096];
	const char *slash = strrchr(path, '/');
	if (slash == NULL)
		return -EINVAL;
	size_t len = (size_t)(slash - path);
	if (len >= sizeof(parent) || slash[1] == '\0')
		return -EINVAL;
	if (len == 0) {
		parent[0] = '.';
		parent[1] = '\0';
	} else {
		memcpy(parent, path + 1, len - 1); /* without the leading '/' */
		parent[len - 1] = '\0';
	}
	int fd = lz_openat2(rootfs_fd, parent, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, LZ_RESOLVE_OWNED);
	if (fd < 0)
		return -errno;
	*ret_parent = fd;
	*ret_name = slash + 1;
	return 0;
}

int lz_domain_inspect(int domain_root_fd, int lower_rootfs_fd, const char *const *paths, size_t n, size_t max,
		      struct lz_anchor_changes **ret_v, size_t *ret_n, struct lz_err *err)
{
	struct lz_idmap map;
	int r;
	_cleanup_close_ int anchors =
		lz_openat2(domain_root_fd, "anchor", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, LZ_RESOLVE_OWNED);
	if (anchors < 0 && errno != ENOENT)
		return lz_err_set(err, errno, "anchor: %s", strerror(errno));
	if ((r = lz_idmap_for_invoking_user(&map, err)) < 0)
		return r;
	struct lz_anchor_changes *v = calloc(n ? n : 1, sizeof(*v));
	size_t k = 0;
	if (v == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; r >= 0 && anchors >= 0 && i < n; i++) {
		char name[NAME_MAX + 1];
		if (lz_rsplan_anchor_name(paths[i], name, sizeof(name)) < 0)
			continue;
		_cleanup_close_ int one =
			lz_openat2(anchors, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, LZ_RESOLVE_OWNED);
		if (one < 0)
			continue; /* no state kept there */
		struct lz_anchor_changes *c = &v[k];
		snprintf(c->path, sizeof(c->path), "%s", paths[i]);
		if (max > 0 && (c->v = calloc(max, sizeof(*c->v))) == NULL) {
			r = lz_err_set(err, ENOMEM, "out of memory");
			break;
		}
		_cleanup_close_ int lower_parent = -EBADF;
		const char *lower_name = NULL;
		c->has_lower = lower_rootfs_fd >= 0 && open_lower(lower_rootfs_fd, paths[i], &lower_parent, &lower_name) == 0;
		/* A persistent directory the image lacks: its lower was empty. */
		if (c->has_lower && faccessat(lower_parent, lower_name, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
			c->has_lower = false;
		r = lz_tree_changes_in_userns(&map, one, "upper", c->has_lower ? lower_parent : -1,
					      c->has_lower ? lower_name : NULL, c->v, max, &c->count, err);
		if (r < 0)
			r = lz_err_prefix(err, r, "%s: ", paths[i]);
		k++;
	}
	if (r < 0) {
		lz_anchor_changes_free(v, k);
		return r;
	}
	*ret_v = v;
	*ret_n = k;
	return 0;
}

void lz_anchor_changes_free(struct lz_anchor_changes *v, size_t n)
{
	if (v == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i].v);
	free(v);
}

struct holding {
	const char *canonical;
	char *ret;
	size_t cap;
};

static int volume_holds(void *ctx, const char *source)
{
	struct holding *h = ctx;
	if (!lz_path_overlaps(h->canonical, source))
		return 0;
	snprintf(h->ret, h->cap, "%s", source);
	return 1;
}

/* One Domain's answer for lz_domain_writable_holding. */
static int domain_holds(int domains, const char *storage_root, const char *hex, struct holding *h,
			const char **kind, struct lz_err *err)
{
	struct lz_domain_identity id;
	struct lz_err why = { 0, "" };
	_cleanup_close_ int dom = lz_openat2(domains, hex, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
					     LZ_RESOLVE_OWNED);
	/* A Domain gone meanwhile, or never launched, has recorded nothing;
	 * one that cannot be read, for want of descriptors or memory or
	 * because its identity is damaged or foreign, fails the check (only
	 * Lazaret writes it: the workspace it would name is unknown). */
	int r = dom < 0 ? -errno : lz_identity_read(dom, hex, &id, &why);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return lz_err_set(err, -r, "%s/domains/%s: %s (`lazaret state verify` checks it)", storage_root, hex,
				  dom < 0 ? strerror(-r) : why.msg);
	if (lz_path_overlaps(h->canonical, id.workspace)) {
		snprintf(h->ret, h->cap, "%s", id.workspace);
		*kind = "the workspace";
		return 1;
	}
	/* Its volume record fails closed too. */
	r = lz_identity_volumes_each(dom, volume_holds, h, &why);
	if (r == 1)
		*kind = "a volume source";
	if (r < 0)
		return lz_err_set(err, -r, "%s/domains/%s: %s (`lazaret state verify` checks it)", storage_root, hex,
				  why.msg);
	return r;
}

int lz_domain_writable_holding(const struct lz_path *storage_root, const char *canonical, char *ret, size_t cap,
			       const char **kind, struct lz_err *err)
{
	_cleanup_close_ int domains = open_domains(storage_root, err);
	if (domains < 0)
		return domains == -ENOENT ? 0 : domains;
	/* Every Domain, in directory order: no bound on how many, nothing
	 * sorted (two records read each). */
	char what[4200];
	snprintf(what, sizeof(what), "%s/domains", storage_root->canonical);
	DIR *d;
	int r = entries_of(domains, what, &d, err);
	if (r < 0)
		return r;
	struct holding h = { canonical, ret, cap };
	struct dirent *e;
	while (r == 0 && (e = readdir(d)) != NULL)
		if (lz_domain_id_hex(e->d_name))
			r = domain_holds(domains, storage_root->canonical, e->d_name, &h, kind, err);
	closedir(d);
	return r;
}
