/* The OCI bundle of a generation; see bundle.h. */
#include "runtime/bundle.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "escalation/mailbox.h"
#include "escalation/sandbox.h"
#include "fs/file.h"
#include "fs/gitsentry.h"
#include "fs/pathauth.h"
#include "net/netpolicy.h"
#include "runtime/ocispec.h"
#include "runtime/rsplan.h"
#include "session/guestcmd.h"
#include "util/cleanup.h"
#include "util/sys.h"
#include "util/testfault.h"

#define LABEL_MAX 4200

struct mounts {
	struct lz_oci_mount *v;
	char (*labels)[LABEL_MAX];
	size_t n, cap;
};

static void mounts_free(struct mounts *m)
{
	free(m->v);
	free(m->labels);
}

/* A mount whose host source is a label built here (kept in m). */
static int add_labelled(struct mounts *m, const char *dest, const char *type, bool ro, const char *fmt,
			const char *a, const char *b, struct lz_err *err)
{
	if (m->n == m->cap)
		return lz_err_set(err, E2BIG, "too many sandbox mounts");
	if ((size_t)snprintf(m->labels[m->n], LABEL_MAX, fmt, a, b) >= LABEL_MAX)
		return lz_err_set(err, ENAMETOOLONG, "mount source of %s too long", dest);
	m->v[m->n] = (struct lz_oci_mount){ .destination = dest, .type = type, .source = m->labels[m->n],
					    .read_only = ro };
	m->n++;
	return 0;
}

static int build_mounts(const lz_config *cfg, const struct lz_gendir *g, const struct lz_bundle_git *git,
			struct mounts *m, struct lz_err *err)
{
	const struct lz_config_profile *p = lz_config_selected(cfg);
	const struct lz_path *ws = lz_config_workspace(cfg);
	const char *gen = g->dir.canonical;
	int r;
	for (size_t i = 0; i < p->n_persistent_dirs; i++) {
		char idx[24];
		snprintf(idx, sizeof(idx), "%zu", i);
		if ((r = add_labelled(m, p->persistent_dirs[i], "bind", false, "%s/anchor/%s", gen, idx, err)) < 0)
			return r;
	}
	/* Volumes: where the RS bound the configuration's objects (rsplan.h),
	 * never the source path, which another Domain's sandbox may write. */
	for (size_t i = 0; i < p->n_volumes; i++) {
		char idx[24];
		snprintf(idx, sizeof(idx), "%zu", i);
		if ((r = add_labelled(m, p->volumes[i].destination, "bind", p->volumes[i].read_only, "%s/volume/%s",
				      gen, idx, err)) < 0)
			return r;
	}
	/* Spec 3.5: through the router's mount, isolation on or off (FR-9
	 * turns off only the ignore rules); .git is the router's too, so
	 * Git's index replacement passes the router's checks. */
	bool bind = lz_test_fault("bind-workspace"); /* bench/workspace's baseline */
	const char *ws_source = bind ? ws->canonical : gen;
	const char *ws_child = bind ? "" : "/workspace";
	if ((r = add_labelled(m, "/workspace", "bind", false, "%s%s", ws_source, ws_child, err)) < 0)
		return r;
	/* SR-4: Git Sentry, after /workspace so it lies on top. Pin .git as
	 * a mount point of its own: a mount point cannot be renamed, so
	 * `mv .git x` cannot slip the protected files aside. */
	struct stat st;
	int found = git->n > 0 ? fstatat(ws->fd, ".git", &st, AT_SYMLINK_NOFOLLOW) : -1;
	if (git->n > 0 && found < 0 && errno != ENOENT) /* not skipped: the pin would be */
		return lz_err_set(err, errno, "the workspace's .git: %s", strerror(errno));
	if (found == 0 && S_ISDIR(st.st_mode) &&
	    (r = add_labelled(m, "/workspace/.git", "bind", false, "%s%s/.git", ws_source, ws_child, err)) < 0)
		return r;
	/* Each file from where the RS bound the object the sentry checked
	 * (rsplan.h), never its workspace path. */
	for (size_t i = 0; i < git->n; i++) {
		const struct lz_gitsentry_mount *gm = &git->v[i];
		if (gm->kind == LZ_GITSENTRY_READONLY_FILE) {
			char rel[40];
			snprintf(rel, sizeof(rel), "/" LZ_RS_SENTRY_DIR "/%zu", i);
			if ((r = add_labelled(m, gm->sandbox_path, "bind", true, "%s%s", gen, rel, err)) < 0)
				return r;
		} else if (m->n == m->cap) {
			return lz_err_set(err, E2BIG, "too many sandbox mounts");
		} else {
			m->v[m->n++] = (struct lz_oci_mount){ .destination = gm->sandbox_path, .type = "tmpfs" };
		}
	}
	if ((r = add_labelled(m, LZ_BUNDLE_INIT_PATH, "bind", true, "%s/%s", gen, "init", err)) < 0)
		return r;
	/* Spec 3.8: the Escalation Client and its mailbox; the sandbox writes
	 * only the outbox. Spec 3.3: its credentials, read-only. */
	if ((r = add_labelled(m, LZ_ESC_SANDBOX_CLIENT, "bind", true, "%s/%s", gen, LZ_GENDIR_ESCALATE, err)) < 0 ||
	    (r = add_labelled(m, LZ_ESC_SANDBOX_OUTBOX, "bind", false, "%s/%s", gen, LZ_MAILBOX_DIR "/outbox",
			      err)) < 0 ||
	    (r = add_labelled(m, LZ_ESC_SANDBOX_INBOX, "bind", true, "%s/%s", gen, LZ_MAILBOX_DIR "/inbox", err)) <
		    0 ||
	    (r = add_labelled(m, LZ_ESC_SANDBOX_CREDENTIAL, "bind", true, "%s/%s", gen,
			      LZ_MAILBOX_DIR "/credential", err)) < 0 ||
	    (r = add_labelled(m, LZ_ESC_SANDBOX_KEY, "bind", true, "%s/%s", gen, LZ_MAILBOX_DIR "/key/request-key",
			      err)) < 0)
		return r;
	/* Spec 3.7: the product's resolver configuration, read-only. */
	return add_labelled(m, "/etc/resolv.conf", "bind", true, "%s/%s", gen, "resolv.conf", err);
}

/* The init makes the workspace's host path a symbolic link to /workspace
 * (sandbox_init.c), so the absolute paths Git writes for a linked
 * worktree resolve inside too (spec 3.5's Git contract). Not where it
 * would lie on, above or beneath a mount: a State Anchor or a volume
 * would keep it, and the default mounts are the sentry's own. */
static bool alias_fits(const char *ws, const struct mounts *m)
{
	if (lz_ocispec_meets_default_mount(ws))
		return false;
	for (size_t i = 0; i < m->n; i++)
		if (lz_path_overlaps(ws, m->v[i].destination))
			return false;
	return true;
}

int lz_bundle_write(const lz_config *cfg, const struct lz_gendir *g, const struct lz_bundle_git *git,
		    const uint8_t challenge[LZ_CANARY_CHALLENGE_LEN], struct lz_err *err)
{
	const struct lz_config_profile *p = lz_config_selected(cfg);
	_cleanup_(mounts_free) struct mounts m = { .cap = p->n_persistent_dirs + p->n_volumes +
							   LZ_GITSENTRY_MOUNTS_MAX + 9 };
	_cleanup_free_ char *json = NULL;
	char root[LABEL_MAX], hex[2 * LZ_CANARY_CHALLENGE_LEN + 1];
	int r;
	m.v = calloc(m.cap, sizeof(*m.v));
	m.labels = calloc(m.cap, sizeof(*m.labels));
	if (m.v == NULL || m.labels == NULL)
		return lz_err_set(err, ENOMEM, "out of memory");
	if ((r = build_mounts(cfg, g, git, &m, err)) < 0)
		return r;
	if (lz_gendir_label(g, "root", root, sizeof(root)) < 0)
		return lz_err_set(err, ENAMETOOLONG, "runtime directory path too long");
	lz_hex(challenge, LZ_CANARY_CHALLENGE_LEN, hex);
	char ws[LABEL_MAX];
	snprintf(ws, sizeof(ws), "%s", lz_config_workspace(cfg)->canonical);
	char *const argv[] = { LZ_BUNDLE_INIT_PATH, "--attest", hex,
			       alias_fits(ws, &m) ? "--workspace-alias" : NULL, ws, NULL };
	char *const env[] = { LZ_BUNDLE_GUEST_PATH, NULL };
	struct lz_oci_process init = { .argv = argv, .env = env, .cwd = "/" };
	/* The network namespace is the RS's, by path (C-REFINEMENT fact 3):
	 * PID 1 of the RS's PID namespace is the RS. */
	struct lz_ocispec spec = { .root_path = root, .hostname = "lazaret", .netns_path = "/proc/1/ns/net",
				   .process = &init, .mounts = m.v, .n_mounts = m.n };
	if ((r = lz_ocispec_config_json(&spec, &json, err)) < 0)
		return r;
	return lz_file_create(g->bundle, "config.json", json, strlen(json), 0600, LZ_RESOLVE_OWNED, err);
}

/* Git's configuration inside (GIT_CONFIG_COUNT outranks every file).
 * Issue 15: workspace files have other inode and device numbers and owner
 * 0 inside, so Git's index stat data written on one side never matches
 * the other's and each side re-hashes every file after the other wrote
 * the index. Inside, Git compares what both sides see alike: mtime, size
 * and mode (core.checkStat=minimal), not ctime (core.trustctime=false);
 * docs/configuration.md tells the developer to set the same on the host.
 * Spec 3.5's index guard accepts only an index host Git may trust as it
 * is (router/gitindex.h, LZ_GITINDEX_PLAIN): whatever the repository's
 * own configuration asks, Git inside writes no untracked cache, fsmonitor
 * token, threaded index offsets, split or sparse index, or unhashed file,
 * and marks no file assume-unchanged of its own accord (core.ignoreStat).
 * A profile that passes any GIT_CONFIG_* variable gets none of this. */
static const char *const git_env[] = {
	"GIT_CONFIG_COUNT=10",
	"GIT_CONFIG_KEY_0=core.checkStat",
	"GIT_CONFIG_VALUE_0=minimal",
	"GIT_CONFIG_KEY_1=core.trustctime",
	"GIT_CONFIG_VALUE_1=false",
	"GIT_CONFIG_KEY_2=core.untrackedCache",
	"GIT_CONFIG_VALUE_2=false",
	"GIT_CONFIG_KEY_3=core.fsmonitor",
	"GIT_CONFIG_VALUE_3=false",
	"GIT_CONFIG_KEY_4=index.recordEndOfIndexEntries",
	"GIT_CONFIG_VALUE_4=false",
	"GIT_CONFIG_KEY_5=index.recordOffsetTable",
	"GIT_CONFIG_VALUE_5=false",
	"GIT_CONFIG_KEY_6=core.splitIndex",
	"GIT_CONFIG_VALUE_6=false",
	"GIT_CONFIG_KEY_7=index.sparse",
	"GIT_CONFIG_VALUE_7=false",
	"GIT_CONFIG_KEY_8=index.skipHash",
	"GIT_CONFIG_VALUE_8=false",
	"GIT_CONFIG_KEY_9=core.ignoreStat",
	"GIT_CONFIG_VALUE_9=false",
};

static bool profile_sets_git_config(const struct lz_config_profile *p)
{
	for (size_t i = 0; i < p->n_env; i++)
		if (strncmp(p->env[i].name, "GIT_CONFIG_", 11) == 0)
			return true;
	return false;
}

/* Egress by name: the proxy is the sandbox's one way to a name
 * (net/egressproxy.h); both spellings, since tools read one or the other,
 * and Node's own fetch reads them only when told to. */
static const char *const proxy_env[] = {
	"HTTP_PROXY=" LZ_NET_EGRESS_URL, "HTTPS_PROXY=" LZ_NET_EGRESS_URL, "http_proxy=" LZ_NET_EGRESS_URL,
	"https_proxy=" LZ_NET_EGRESS_URL,
	"NO_PROXY=localhost,127.0.0.1", "no_proxy=localhost,127.0.0.1", "NODE_USE_ENV_PROXY=1",
};

char **lz_bundle_guest_env(const lz_config *cfg)
{
	const struct lz_config_profile *p = lz_config_selected(cfg);
	size_t n_git = profile_sets_git_config(p) ? 0 : LZ_ARRAY_SIZE(git_env);
	size_t n_proxy = p->n_allow_domains > 0 ? LZ_ARRAY_SIZE(proxy_env) : 0;
	char **env = calloc(3 + n_git + n_proxy + p->n_env + 1, sizeof(char *));
	if (env == NULL)
		return NULL;
	size_t k = 0;
	env[k++] = strdup(LZ_BUNDLE_GUEST_PATH);
	env[k++] = strdup("HOME=/root");
	env[k++] = strdup("LANG=C.UTF-8");
	for (size_t i = 0; i < n_git; i++)
		env[k++] = strdup(git_env[i]);
	for (size_t i = 0; i < n_proxy; i++)
		env[k++] = strdup(proxy_env[i]);
	/* Profile environment references (spec 3.2), resolved by the loader.
	 * One that names a variable set above takes its place: two entries
	 * of one name would leave the choice to whatever reads them (glibc's
	 * getenv takes the first, a shell the last). */
	size_t n_defaults = k;
	for (size_t i = 0; i < p->n_env; i++) {
		size_t at = k, len = strlen(p->env[i].name);
		for (size_t j = 0; j < n_defaults; j++)
			if (env[j] != NULL && strncmp(env[j], p->env[i].name, len) == 0 && env[j][len] == '=')
				at = j;
		if (at < k)
			free(env[at]);
		else
			k++;
		if (asprintf(&env[at], "%s=%s", p->env[i].name, lz_config_env_value(cfg, i)) < 0)
			env[at] = NULL;
	}
	for (size_t i = 0; i < k; i++)
		if (env[i] == NULL) {
			for (size_t j = 0; j < k; j++)
				if (env[j] != NULL) {
					explicit_bzero(env[j], strlen(env[j]));
					free(env[j]);
				}
			free(env);
			return NULL;
		}
	return env;
}

void lz_bundle_env_free(char **env)
{
	lz_guestcmd_env_free(env);
}
