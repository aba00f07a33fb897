/* Resolution of the selected profile (spec 3.2): roots, workspace, volumes,
 * executables, overlap rules, environment references, Domain ID and
 * Configuration Fingerprint. See config.h. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "config/config.h"
#include "fs/mountns.h"
#include "fs/pathauth.h"
#include "platform/hostprobe.h"
#include "util/cleanup.h"

struct lz_config {
	struct lz_config_doc *doc;
	const struct lz_config_profile *profile; /* selected, inside doc; or NULL */
	char *source;
	char *source_declared; /* as named, made absolute: its links are judged */
	struct lz_path storage_root;
	struct lz_path runtime_root;
	struct lz_path workspace;
	struct lz_path profile_dir;
	struct lz_path storage_domain;
	struct lz_path runtime_domain;
	struct lz_path *volume_sources; /* parallel to profile->volumes */
	struct lz_path *executables;    /* parallel to profile->rules */
	char **env_values;              /* parallel to profile->env; never printed */
	char domain_id[LZ_DOMAIN_ID_HEX_LEN + 1];
	char fingerprint[LZ_DOMAIN_ID_HEX_LEN + 1];
};

static void paths_release(struct lz_path *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		lz_path_release(&v[i]);
	free(v);
}

void lz_config_forget_env_values(const lz_config *cfg)
{
	size_t n_env = cfg->profile ? cfg->profile->n_env : 0;
	for (size_t i = 0; cfg->env_values && i < n_env; i++)
		if (cfg->env_values[i])
			explicit_bzero(cfg->env_values[i], strlen(cfg->env_values[i]));
}

void lz_config_free(lz_config *cfg)
{
	if (cfg == NULL)
		return;
	size_t n_vol = cfg->profile ? cfg->profile->n_volumes : 0;
	size_t n_rules = cfg->profile ? cfg->profile->n_rules : 0;
	size_t n_env = cfg->profile ? cfg->profile->n_env : 0;
	paths_release(cfg->volume_sources, n_vol);
	paths_release(cfg->executables, n_rules);
	lz_config_forget_env_values(cfg);
	for (size_t i = 0; cfg->env_values && i < n_env; i++)
		free(cfg->env_values[i]);
	free(cfg->env_values);
	lz_path_release(&cfg->storage_root);
	lz_path_release(&cfg->runtime_root);
	lz_path_release(&cfg->workspace);
	lz_path_release(&cfg->profile_dir);
	lz_path_release(&cfg->storage_domain);
	lz_path_release(&cfg->runtime_domain);
	lz_config_doc_free(cfg->doc);
	free(cfg->source);
	free(cfg->source_declared);
	free(cfg);
}

static lz_config *config_new(void)
{
	lz_config *cfg = calloc(1, sizeof(*cfg));
	if (cfg == NULL)
		return NULL;
	struct lz_path empty = LZ_PATH_INIT;
	cfg->storage_root = cfg->runtime_root = cfg->workspace = empty;
	cfg->profile_dir = cfg->storage_domain = cfg->runtime_domain = empty;
	return cfg;
}

static int refuse_overlap(const char *what_a, const char *a, const char *what_b, const char *b,
			  struct lz_err *err)
{
	if (!lz_path_overlaps(a, b))
		return 0;
	return lz_err_set(err, EINVAL, "%s '%s' overlaps %s '%s'; they must be disjoint", what_a, a,
			  what_b, b);
}

static int open_workspace(const struct lz_config_request *req, struct lz_path *ret,
			  struct lz_err *err)
{
	const char *declared = req->workspace ? req->workspace : req->cwd;
	if (declared == NULL)
		return lz_err_set(err, EINVAL, "no workspace: the current directory is unavailable");
	_cleanup_close_ int first = open(declared, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (first < 0)
		return lz_err_set(err, errno, "workspace '%s': %s", declared, strerror(errno));
	_cleanup_free_ char *canonical = realpath(declared, NULL);
	if (canonical == NULL)
		return lz_err_set(err, errno, "workspace '%s': %s", declared, strerror(errno));
	struct stat st;
	if (fstat(first, &st) < 0)
		return lz_err_set(err, errno, "workspace '%s': %s", declared, strerror(errno));
	int r = lz_path_open(canonical, ret, err);
	if (r < 0)
		return lz_err_prefix(err, r, "workspace: ");
	if (ret->dev != st.st_dev || ret->ino != st.st_ino) {
		lz_path_release(ret);
		return lz_err_set(err, ESTALE, "workspace '%s' changed while being opened", declared);
	}
	return 0;
}

static int open_volumes(lz_config *cfg, struct lz_err *err)
{
	const struct lz_config_profile *p = cfg->profile;
	if (p->n_volumes == 0)
		return 0;
	cfg->volume_sources = calloc(p->n_volumes, sizeof(struct lz_path));
	if (cfg->volume_sources == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < p->n_volumes; i++)
		cfg->volume_sources[i] = (struct lz_path)LZ_PATH_INIT;

	for (size_t i = 0; i < p->n_volumes; i++) {
		const struct lz_config_volume *v = &p->volumes[i];
		struct lz_path *out = &cfg->volume_sources[i];
		int r;
		if (v->profile_subdir) {
			/* Created component-wise, 0700, beneath the profile directory. */
			_cleanup_free_ char *rel = strdup(v->profile_subdir);
			if (rel == NULL)
				return lz_err_set(err, ENOMEM, "out of memory");
			struct lz_path cur = LZ_PATH_INIT;
			const struct lz_path *parent = &cfg->profile_dir;
			char *save = NULL;
			for (char *c = strtok_r(rel, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
				struct lz_path next = LZ_PATH_INIT;
				r = lz_path_owned_child(parent, c, true, &next, err);
				lz_path_release(&cur);
				if (r < 0)
					return lz_err_prefix(err, r, "volume for '%s': ", v->destination);
				cur = next;
				parent = &cur;
			}
			*out = cur;
		} else {
			_cleanup_free_ char *canonical = realpath(v->source, NULL);
			if (canonical == NULL)
				return lz_err_set(err, errno, "volume source '%s': %s", v->source,
						  strerror(errno));
			/* A link on the way would be another's to aim: a sandbox of
			 * another Domain may write where a source lies. */
			if (strcmp(canonical, v->source) != 0)
				return lz_err_set(err, EINVAL,
						  "volume source '%s' resolves through a symbolic link to '%s'; "
						  "name '%s' itself",
						  v->source, canonical, canonical);
			if ((r = lz_path_open(canonical, out, err)) < 0)
				return lz_err_prefix(err, r, "volume source: ");
			if (!S_ISDIR(out->mode) && !S_ISREG(out->mode))
				return lz_err_set(err, EINVAL,
						  "volume source '%s' is neither a directory nor a regular file",
						  canonical);
			const struct { const char *what; const struct lz_path *p; } trees[] = {
				{ "the Storage Root", &cfg->storage_root },
				{ "the Runtime Root", &cfg->runtime_root },
			};
			for (size_t t = 0; t < LZ_ARRAY_SIZE(trees); t++)
				if ((r = refuse_overlap("volume source", canonical, trees[t].what,
							trees[t].p->canonical, err)) < 0)
					return r;
		}
		if ((r = refuse_overlap("volume source", out->canonical, "the configuration file",
					cfg->source, err)) < 0 ||
		    (r = refuse_overlap("volume source", out->canonical, "the workspace",
					cfg->workspace.canonical, err)) < 0 ||
		    (r = refuse_overlap("volume source", out->canonical, "the runtime Domain tree",
					cfg->runtime_domain.canonical, err)) < 0 ||
		    (r = refuse_overlap("volume source", out->canonical, "the Domain Root",
					cfg->storage_domain.canonical, err)) < 0)
			return r;
		for (size_t j = 0; j < i; j++)
			if ((r = refuse_overlap("volume source", out->canonical, "volume source",
						cfg->volume_sources[j].canonical, err)) < 0)
				return r;
	}
	return 0;
}

/* Who can re-aim a link decides what it names, and the canonical path no
 * longer shows where it lay: no link on the way to the configuration file
 * or an auto-approved executable may lie where the sandbox writes (the
 * workspace, a volume source) or Lazaret keeps its trees (found by review:
 * the sandbox re-aimed the workspace's link to the configuration at one it
 * wrote, or an executable's at /bin/sh). */
struct link_check {
	const lz_config *cfg;
	const char *what, *declared;
	int code;
	bool refused;
};

static bool at_or_beneath(const char *tree, const char *p)
{
	return tree != NULL && (strcmp(tree, p) == 0 || lz_path_is_beneath(tree, p));
}

static int link_outside(void *ctx, const char *link, struct lz_err *err)
{
	struct link_check *c = ctx;
	const lz_config *cfg = c->cfg;
	const struct { const char *what, *path; } trees[] = {
		{ "the workspace", cfg->workspace.canonical },
		{ "the Storage Root", cfg->storage_root.canonical },
		{ "the Runtime Root", cfg->runtime_root.canonical },
	};
	const char *in = NULL, *tree = NULL;
	for (size_t t = 0; t < LZ_ARRAY_SIZE(trees) && in == NULL; t++)
		if (at_or_beneath(trees[t].path, link))
			in = trees[t].what, tree = trees[t].path;
	for (size_t v = 0; in == NULL && cfg->profile != NULL && v < cfg->profile->n_volumes; v++)
		if (at_or_beneath(cfg->volume_sources[v].canonical, link))
			in = "volume source", tree = cfg->volume_sources[v].canonical;
	if (in == NULL)
		return 0;
	c->refused = true;
	return lz_err_set(err, c->code,
			  "%s '%s' is reached through the symbolic link '%s', which lies inside %s '%s' where the "
			  "sandbox could re-aim it; name the file by a path without it",
			  c->what, c->declared, link, in, tree);
}

static int judge_links(const lz_config *cfg, const char *what, const char *declared, int code,
		       struct lz_err *err)
{
	struct link_check c = { cfg, what, declared, code, false };
	int r = lz_path_each_link(declared, link_outside, &c, err);
	/* A path that does not resolve is refused by what opens it, with
	 * its own words. */
	return r < 0 && !c.refused ? 0 : r;
}

static int open_executables(lz_config *cfg, struct lz_err *err)
{
	const struct lz_config_profile *p = cfg->profile;
	if (p->n_rules == 0)
		return 0;
	cfg->executables = calloc(p->n_rules, sizeof(struct lz_path));
	if (cfg->executables == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < p->n_rules; i++)
		cfg->executables[i] = (struct lz_path)LZ_PATH_INIT;

	for (size_t i = 0; i < p->n_rules; i++) {
		struct lz_path *x = &cfg->executables[i];
		const char *declared = p->rules[i].executable;
		int r = judge_links(cfg, "auto-approve executable", declared, EPERM, err);
		if (r < 0)
			return r;
		_cleanup_free_ char *canonical = realpath(declared, NULL);
		if (canonical == NULL)
			return lz_err_set(err, errno, "auto-approve executable '%s': %s", declared,
					  strerror(errno));
		if ((r = lz_path_open(canonical, x, err)) < 0)
			return lz_err_prefix(err, r, "auto-approve executable: ");
		if ((r = lz_path_check_executable(x, err)) < 0)
			return lz_err_prefix(err, r, "auto-approve ");
		if ((r = lz_config_host_executable_allowed(cfg, canonical, err)) < 0)
			return lz_err_prefix(err, r, "auto-approve ");
	}
	return 0;
}

int lz_config_host_executable_allowed(const lz_config *cfg, const char *canonical, struct lz_err *err)
{
	/* Never inside a tree the sandbox can write or Lazaret controls: its
	 * bytes would be the sandbox's, whoever approved the path. */
	const struct lz_path *trees[] = { &cfg->workspace, &cfg->storage_root, &cfg->runtime_root };
	for (size_t t = 0; t < LZ_ARRAY_SIZE(trees); t++)
		if (trees[t]->canonical != NULL && lz_path_overlaps(canonical, trees[t]->canonical))
			return lz_err_set(err, EPERM,
					  "executable '%s' lies inside '%s', which the sandbox can write or Lazaret "
					  "controls",
					  canonical, trees[t]->canonical);
	for (size_t v = 0; cfg->profile != NULL && v < cfg->profile->n_volumes; v++)
		if (lz_path_overlaps(canonical, cfg->volume_sources[v].canonical))
			return lz_err_set(err, EPERM, "executable '%s' lies inside volume source '%s'", canonical,
					  cfg->volume_sources[v].canonical);
	return 0;
}

static bool utf8_valid(const unsigned char *s)
{
	while (*s) {
		unsigned c = *s, n, min;
		if (c < 0x80) {
			s++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			n = 1, min = 0x80, c &= 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			n = 2, min = 0x800, c &= 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			n = 3, min = 0x10000, c &= 0x07;
		} else {
			return false;
		}
		for (unsigned i = 1; i <= n; i++) {
			if ((s[i] & 0xc0) != 0x80)
				return false;
			c = c << 6 | (s[i] & 0x3f);
		}
		if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
			return false;
		s += n + 1;
	}
	return true;
}

/* Last step (spec 3.2): values are held, never printed or fingerprinted. */
static int resolve_env(lz_config *cfg, const struct lz_config_request *req, struct lz_err *err)
{
	const struct lz_config_profile *p = cfg->profile;
	if (p->n_env == 0)
		return 0;
	cfg->env_values = calloc(p->n_env, sizeof(char *));
	if (cfg->env_values == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < p->n_env; i++) {
		const struct lz_config_env *ref = &p->env[i];
		const char *value = req->getenv ? req->getenv(ref->host_var) : NULL;
		if (value == NULL)
			return lz_err_set(err, EINVAL,
					  "%s:%u:%u: environment variable '%s' (for env '%s' of profile "
					  "'%s') is not set on the host",
					  cfg->source, ref->pos.line, ref->pos.column, ref->host_var,
					  ref->name, p->name);
		if (!utf8_valid((const unsigned char *)value))
			return lz_err_set(err, EINVAL,
					  "environment variable '%s' is not valid UTF-8 (value redacted)",
					  ref->host_var);
		if ((cfg->env_values[i] = strdup(value)) == NULL)
			return lz_err_set(err, ENOMEM, "out of memory");
	}
	return 0;
}

/* Canonical encoding: every item framed by a 32-bit big-endian length. */
struct canon {
	EVP_MD_CTX *ctx;
	bool ok;
};

static void canon_bytes(struct canon *c, const void *p, size_t n)
{
	uint8_t be[4] = { (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n };
	c->ok = c->ok && n <= UINT32_MAX && EVP_DigestUpdate(c->ctx, be, 4) == 1 &&
		EVP_DigestUpdate(c->ctx, p, n) == 1;
}

static void canon_str(struct canon *c, const char *s)
{
	canon_bytes(c, s, strlen(s));
}

static void canon_u32(struct canon *c, uint32_t v)
{
	uint8_t be[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };
	canon_bytes(c, be, 4);
}

static int prefix_cmp(const void *a, const void *b)
{
	return lz_prefix_compare(((const struct lz_config_prefix *)a)->prefix,
				 ((const struct lz_config_prefix *)b)->prefix);
}

static void canon_prefixes(struct canon *c, const struct lz_config_prefix *v, size_t n)
{
	struct lz_config_prefix sorted[LZ_CONFIG_LIST_MAX];
	if (n > 0) /* v is NULL for an absent list: memcpy(_, NULL, 0) is UB */
		memcpy(sorted, v, n * sizeof(*v));
	qsort(sorted, n, sizeof(*sorted), prefix_cmp);
	canon_u32(c, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		canon_u32(c, sorted[i].prefix.addr);
		canon_u32(c, sorted[i].prefix.len);
	}
}

static int strp_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void canon_strs_sorted(struct canon *c, char *const *v, size_t n)
{
	const char *sorted[LZ_CONFIG_LIST_MAX];
	for (size_t i = 0; i < n && i < LZ_CONFIG_LIST_MAX; i++)
		sorted[i] = v[i];
	n = n < LZ_CONFIG_LIST_MAX ? n : LZ_CONFIG_LIST_MAX;
	qsort(sorted, n, sizeof(*sorted), strp_cmp);
	canon_u32(c, (uint32_t)n);
	for (size_t i = 0; i < n; i++)
		canon_str(c, sorted[i]);
}

static int fingerprint(lz_config *cfg, struct lz_err *err)
{
	const struct lz_config_profile *p = cfg->profile;
	uint8_t digest[32];
	unsigned int n = 0;
	struct canon c = { .ctx = EVP_MD_CTX_new(), .ok = true };
	if (c.ctx == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	c.ok = EVP_DigestInit_ex(c.ctx, EVP_sha256(), NULL) == 1;

	canon_str(&c, "lazaret-config-fingerprint-v1");
	canon_u32(&c, LZ_CONFIG_VERSION);
	canon_str(&c, cfg->storage_root.canonical);
	canon_u32(&c, cfg->doc->runsc_dcache);
	canon_u32(&c, cfg->doc->max_memory_mib);
	canon_str(&c, p->name);
	canon_str(&c, cfg->workspace.canonical);
	canon_str(&c, p->image);
	canon_u32(&c, p->isolate_ignored);
	canon_u32(&c, p->hide_editor_config);
	canon_u32(&c, (uint32_t)p->n_persistent_dirs);
	for (size_t i = 0; i < p->n_persistent_dirs; i++)
		canon_str(&c, p->persistent_dirs[i]);
	canon_u32(&c, (uint32_t)p->n_env);
	for (size_t i = 0; i < p->n_env; i++) {
		canon_str(&c, p->env[i].name);
		canon_str(&c, p->env[i].host_var); /* the name only, never the value */
	}
	canon_u32(&c, (uint32_t)p->n_volumes);
	for (size_t i = 0; i < p->n_volumes; i++) {
		canon_u32(&c, p->volumes[i].profile_subdir != NULL);
		canon_str(&c, cfg->volume_sources[i].canonical);
		canon_str(&c, p->volumes[i].destination);
		canon_u32(&c, p->volumes[i].read_only);
	}
	canon_prefixes(&c, p->allow, p->n_allow);
	canon_prefixes(&c, p->deny, p->n_deny);
	canon_u32(&c, (uint32_t)p->n_rules);
	for (size_t i = 0; i < p->n_rules; i++) {
		canon_str(&c, cfg->executables[i].canonical);
		canon_u32(&c, (uint32_t)p->rules[i].n_args);
		for (size_t j = 0; j < p->rules[i].n_args; j++)
			canon_str(&c, p->rules[i].args[j]);
	}
	/* Egress by name, after everything else and only when set, so that
	 * a profile without it keeps the fingerprint it had. */
	if (p->n_allow_domains > 0) {
		canon_str(&c, "network.domains");
		canon_strs_sorted(&c, p->allow_domains, p->n_allow_domains);
		canon_strs_sorted(&c, p->deny_domains, p->n_deny_domains);
		canon_u32(&c, (uint32_t)p->n_resolvers);
		for (size_t i = 0; i < p->n_resolvers; i++)
			canon_u32(&c, p->resolvers[i]);
	}
	c.ok = c.ok && EVP_DigestFinal_ex(c.ctx, digest, &n) == 1 && n == sizeof(digest);
	EVP_MD_CTX_free(c.ctx);
	if (!c.ok)
		return lz_err_set(err, EIO, "computing the configuration fingerprint failed");
	lz_hex(digest, sizeof(digest), cfg->fingerprint);
	return 0;
}

/* Spec 3.2: the trees must also be disjoint where they lie in their file
 * systems (fs/mountns.h), which another mount of one of them (a bind mount,
 * a container's volume) names by another path: the labels compared above
 * cannot see that. Run once every source is open. */
enum placed_kind {
	PLACED_WORKSPACE = 1,
	PLACED_STORAGE = 2,
	PLACED_RUNTIME = 4,
	PLACED_VOLUME = 8,
	PLACED_PROFILE_VOLUME = 16, /* beneath the profile directory */
	PLACED_EXECUTABLE = 32,
};

struct placed {
	enum placed_kind kind;
	const char *what;
	const struct lz_path *p;
	struct lz_fs_place at;
};

static bool must_be_disjoint(enum placed_kind a, enum placed_kind b)
{
	if (a == b)
		return a != PLACED_EXECUTABLE;
	return (a | b) != (PLACED_PROFILE_VOLUME | PLACED_STORAGE);
}

static int refuse_placed_overlap(const struct placed *a, const struct placed *b, struct lz_err *err)
{
	if (!must_be_disjoint(a->kind, b->kind) || !lz_fs_place_overlaps(&a->at, &b->at))
		return 0;
	if (a->kind == PLACED_EXECUTABLE || b->kind == PLACED_EXECUTABLE) {
		const struct placed *x = a->kind == PLACED_EXECUTABLE ? a : b, *t = x == a ? b : a;
		return lz_err_set(err, EPERM, "executable '%s' lies inside %s '%s' through another mount of "
				  "the same file system ('%s' there); the sandbox can write it or Lazaret "
				  "controls it", x->p->canonical, t->what, t->p->canonical, x->at.path);
	}
	return lz_err_set(err, EINVAL, "%s '%s' overlaps %s '%s' through another mount of the same file "
			  "system ('%s' and '%s' there); they must be disjoint", a->what, a->p->canonical,
			  b->what, b->p->canonical, a->at.path, b->at.path);
}

/* The trees everything placed is compared with, from v on: the
 * workspace (once resolved), both roots and the volume sources. */
static size_t add_trees(const lz_config *cfg, struct placed *v)
{
	const struct lz_config_profile *p = cfg->profile;
	size_t k = 0;
	if (cfg->workspace.canonical != NULL)
		v[k++] = (struct placed){ PLACED_WORKSPACE, "the workspace", &cfg->workspace, { 0 } };
	v[k++] = (struct placed){ PLACED_STORAGE, "the Storage Root", &cfg->storage_root, { 0 } };
	v[k++] = (struct placed){ PLACED_RUNTIME, "the Runtime Root", &cfg->runtime_root, { 0 } };
	for (size_t i = 0; p != NULL && i < p->n_volumes; i++)
		v[k++] = (struct placed){ p->volumes[i].profile_subdir ? PLACED_PROFILE_VOLUME : PLACED_VOLUME,
					  "volume source", &cfg->volume_sources[i], { 0 } };
	return k;
}

/* Refuses any pair of v[0..n) that must be disjoint and is not, where
 * they lie in their file systems; pairs only with v[0] when first_only. */
static int refuse_placed(struct placed *v, size_t n, bool first_only, struct lz_err *err)
{
	int r = 0;
	for (size_t i = 0; i < n && r >= 0; i++)
		if ((r = lz_mountns_place(v[i].p->fd, v[i].p->canonical, &v[i].at, err)) < 0)
			lz_err_prefix(err, r, "%s: ", v[i].what);
	for (size_t i = 0; i < (first_only ? 1 : n) && r >= 0; i++)
		for (size_t j = i + 1; j < n && r >= 0; j++)
			r = refuse_placed_overlap(&v[i], &v[j], err);
	for (size_t i = 0; i < n; i++)
		lz_fs_place_release(&v[i].at);
	return r;
}

static int refuse_aliases(const lz_config *cfg, struct lz_err *err)
{
	const struct lz_config_profile *p = cfg->profile;
	struct placed *v = calloc(3 + p->n_volumes + p->n_rules, sizeof(*v));
	if (v == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	size_t k = add_trees(cfg, v);
	for (size_t i = 0; i < p->n_rules; i++)
		v[k++] = (struct placed){ PLACED_EXECUTABLE, "auto-approve executable", &cfg->executables[i],
					  { 0 } };
	int r = refuse_placed(v, k, false, err);
	free(v);
	return r;
}

int lz_config_host_tool_allowed(const lz_config *cfg, const struct lz_path *x, struct lz_err *err)
{
	int r = lz_config_host_executable_allowed(cfg, x->canonical, err);
	if (r < 0)
		return r;
	/* And by place, as refuse_aliases compares the trees: a tool found
	 * through another mount of the workspace, a root or a volume source
	 * is the sandbox's (or Lazaret's) to write all the same. */
	struct placed *v = calloc(4 + (cfg->profile != NULL ? cfg->profile->n_volumes : 0), sizeof(*v));
	if (v == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	v[0] = (struct placed){ PLACED_EXECUTABLE, "host tool", x, { 0 } };
	r = refuse_placed(v, 1 + add_trees(cfg, v + 1), true, err);
	free(v);
	return r;
}

int lz_config_host_tool(const lz_config *cfg, const char *name, const char *what, const char *package,
			struct lz_path *ret, struct lz_err *err)
{
	int r = lz_hostprobe_tool_locate(name, err, ret);
	if (r < 0)
		return lz_err_prefix(err, r, "%s (package %s): ", what, package);
	if ((r = lz_config_host_tool_allowed(cfg, ret, err)) < 0) {
		lz_path_release(ret);
		return lz_err_prefix(err, r, "%s: ", what);
	}
	return 0;
}

static int resolve_profile(lz_config *cfg, const struct lz_config_request *req, struct lz_err *err)
{
	const struct lz_config_profile *p = cfg->profile;
	struct lz_path profiles = LZ_PATH_INIT, domains = LZ_PATH_INIT;
	uint8_t id[LZ_DOMAIN_ID_LEN];
	int r;

	if ((r = open_workspace(req, &cfg->workspace, err)) < 0)
		return r;
	const struct { const char *what; const char *path; } others[] = {
		{ "the configuration file", cfg->source },
		{ "the Storage Root", cfg->storage_root.canonical },
		{ "the Runtime Root", cfg->runtime_root.canonical },
	};
	for (size_t i = 0; i < LZ_ARRAY_SIZE(others); i++)
		if (lz_path_overlaps(cfg->workspace.canonical, others[i].path))
			return lz_err_set(err, EINVAL,
					  "the workspace '%s' overlaps %s '%s'; they must be disjoint "
					  "(launch from a project directory, or pass --workspace DIR)",
					  cfg->workspace.canonical, others[i].what, others[i].path);

	const char *ws = cfg->workspace.canonical;
	if ((r = lz_domain_id(p->name, strlen(p->name), ws, strlen(ws), id)) < 0)
		return lz_err_set(err, -r, "computing the Domain ID failed");
	lz_hex(id, sizeof(id), cfg->domain_id);

	/* Layout (spec 3.2): profiles/<name>, domains/<id> under each root. */
	r = lz_path_owned_child(&cfg->storage_root, "profiles", true, &profiles, err);
	if (r >= 0)
		r = lz_path_owned_child(&profiles, p->name, true, &cfg->profile_dir, err);
	lz_path_release(&profiles);
	if (r < 0)
		return r;
	r = lz_path_owned_child(&cfg->storage_root, "domains", true, &domains, err);
	if (r >= 0)
		r = lz_path_owned_child(&domains, cfg->domain_id, true, &cfg->storage_domain, err);
	lz_path_release(&domains);
	if (r < 0)
		return r;
	r = lz_path_owned_child(&cfg->runtime_root, "domains", true, &domains, err);
	if (r >= 0)
		r = lz_path_owned_child(&domains, cfg->domain_id, true, &cfg->runtime_domain, err);
	lz_path_release(&domains);
	if (r < 0)
		return r;

	if ((r = open_volumes(cfg, err)) < 0 ||
	    (r = judge_links(cfg, "the configuration file", cfg->source_declared, EINVAL, err)) < 0 ||
	    (r = open_executables(cfg, err)) < 0 || (r = refuse_aliases(cfg, err)) < 0)
		return r;

	/* All comparisons done: every retained object must still be itself. */
	const struct lz_path *held[] = { &cfg->storage_root, &cfg->runtime_root, &cfg->workspace,
					 &cfg->profile_dir, &cfg->storage_domain,
					 &cfg->runtime_domain };
	for (size_t i = 0; i < LZ_ARRAY_SIZE(held); i++)
		if ((r = lz_path_revalidate(held[i], err)) < 0)
			return r;
	for (size_t i = 0; i < p->n_volumes; i++)
		if ((r = lz_path_revalidate(&cfg->volume_sources[i], err)) < 0)
			return r;
	for (size_t i = 0; i < p->n_rules; i++)
		if ((r = lz_path_revalidate(&cfg->executables[i], err)) < 0)
			return r;

	if ((r = resolve_env(cfg, req, err)) < 0)
		return r;
	return fingerprint(cfg, err);
}

static int list_profiles(const struct lz_config_doc *doc, char *out, size_t size)
{
	size_t used = 0;
	out[0] = '\0';
	for (size_t i = 0; i < doc->n_profiles && used < size; i++)
		used += (size_t)snprintf(out + used, size - used, "%s%s", i ? ", " : "",
					 doc->profiles[i].name);
	return 0;
}

int lz_config_load(const struct lz_config_request *req, lz_config **ret, struct lz_err *err)
{
	struct lz_cfgfile file = { 0 };
	_cleanup_free_ char *storage = NULL, *runtime = NULL;
	lz_config *cfg = config_new();
	int r;
	if (cfg == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");

	if ((r = lz_cfgsource_select(&req->env, req->config_path, req->cwd, &cfg->source, &cfg->source_declared,
				     err)) < 0)
		goto fail;
	if ((r = lz_cfgfile_read(cfg->source, &file, err)) < 0)
		goto fail;
	r = lz_config_decode(cfg->source, file.bytes, file.size, &cfg->doc, err);
	explicit_bzero(file.bytes, file.size);
	lz_cfgfile_release(&file);
	if (r < 0)
		goto fail;

	if (req->profile != NULL) {
		cfg->profile = lz_config_doc_profile(cfg->doc, req->profile);
		if (cfg->profile == NULL) {
			char names[256];
			list_profiles(cfg->doc, names, sizeof(names));
			r = lz_err_set(err, ENOENT, "profile '%s' is not defined in %s (defined: %s)",
				       req->profile, cfg->source, names[0] ? names : "none");
			goto fail;
		}
	}

	if ((r = lz_cfgsource_storage_root(&req->env, cfg->doc->data_root, &storage, err)) < 0 ||
	    (r = lz_cfgsource_runtime_root(&req->env, &runtime, err)) < 0)
		goto fail;
	if ((r = refuse_overlap("the configuration file", cfg->source, "the Storage Root", storage,
				err)) < 0 ||
	    (r = refuse_overlap("the configuration file", cfg->source, "the Runtime Root", runtime,
				err)) < 0 ||
	    (r = refuse_overlap("the Storage Root", storage, "the Runtime Root", runtime, err)) < 0)
		goto fail;
	if ((r = lz_path_open_owned_root(storage, &cfg->storage_root, err)) < 0) {
		lz_err_prefix(err, r, "Storage Root: ");
		goto fail;
	}
	if ((r = lz_path_open_owned_root(runtime, &cfg->runtime_root, err)) < 0) {
		lz_err_prefix(err, r, "Runtime Root: ");
		goto fail;
	}
	if (cfg->profile != NULL && (r = resolve_profile(cfg, req, err)) < 0)
		goto fail;
	*ret = cfg;
	return 0;
fail:
	lz_config_free(cfg);
	return r;
}

void lz_config_summarize(const lz_config *cfg, struct lz_config_summary *ret)
{
	bool sel = cfg->profile != NULL;
	*ret = (struct lz_config_summary){
		.source = cfg->source,
		.storage_root = cfg->storage_root.canonical,
		.runtime_root = cfg->runtime_root.canonical,
		.profile = sel ? cfg->profile->name : NULL,
		.workspace = sel ? cfg->workspace.canonical : NULL,
		.domain_id = sel ? cfg->domain_id : NULL,
		.fingerprint = sel ? cfg->fingerprint : NULL,
		.runsc_dcache = cfg->doc->runsc_dcache,
		.max_memory_mib = cfg->doc->max_memory_mib,
		.keep_unused_images = cfg->doc->keep_unused_images,
		.n_profiles = cfg->doc->n_profiles,
	};
}

const struct lz_config_profile *lz_config_selected(const lz_config *cfg)
{
	return cfg->profile;
}

const struct lz_path *lz_config_storage_root(const lz_config *cfg)
{
	return &cfg->storage_root;
}

const struct lz_path *lz_config_workspace(const lz_config *cfg)
{
	return cfg->profile ? &cfg->workspace : NULL;
}

const struct lz_path *lz_config_profile_dir(const lz_config *cfg)
{
	return cfg->profile ? &cfg->profile_dir : NULL;
}

const struct lz_path *lz_config_storage_domain(const lz_config *cfg)
{
	return cfg->profile ? &cfg->storage_domain : NULL;
}

const struct lz_path *lz_config_runtime_domain(const lz_config *cfg)
{
	return cfg->profile ? &cfg->runtime_domain : NULL;
}

const struct lz_path *lz_config_executable(const lz_config *cfg, size_t i)
{
	return &cfg->executables[i];
}

const struct lz_path *lz_config_volume_source(const lz_config *cfg, size_t i)
{
	return cfg->profile && i < cfg->profile->n_volumes ? &cfg->volume_sources[i] : NULL;
}

const char *lz_config_env_value(const lz_config *cfg, size_t i)
{
	return cfg->profile && i < cfg->profile->n_env ? cfg->env_values[i] : NULL;
}

uint32_t lz_config_keep_unused_images(const lz_config *cfg)
{
	return cfg->doc->keep_unused_images;
}

uint32_t lz_config_dcache(const lz_config *cfg)
{
	return cfg->doc->runsc_dcache;
}

uint32_t lz_config_max_memory_mib(const lz_config *cfg)
{
	return cfg->doc->max_memory_mib;
}
