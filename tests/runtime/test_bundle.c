/* The OCI bundle writer (core/runtime/bundle.h): config.json written into
 * a generation's bundle/ from a configuration loaded from a TOML fixture,
 * parsed back with jansson: root, hostname, network namespace, the init's
 * argv and environment, and the mounts in order (State Anchors, volumes,
 * /workspace, .git pinned, Git Sentry from where the RS binds its files,
 * init, resolv.conf). Error paths: an existing config.json, a symlink
 * planted as config.json. The guest environment. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cfg_fixture.h"

#include "proc/caps.h"
#include "runtime/bundle.h"

static const uint8_t challenge[LZ_CANARY_CHALLENGE_LEN] = { 0x00, 0x01, 0xab, 0xff };

static int setup(void **state)
{
	struct cfg_fx *f = cfg_fx_new();
	if (f == NULL)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	cfg_fx_free(*state);
	return 0;
}

static void load(struct cfg_fx *f, const char *tmpl)
{
	if (cfg_fx_load(f, tmpl) != 0)
		fail_msg("load: %s", f->err.msg);
	if (cfg_fx_gen(f, 1) != 0)
		fail_msg("gen: %s", f->err.msg);
}

/* Git Sentry's plan, as the RS plan makes it (rsplan.h). */
static int write_bundle(struct cfg_fx *f, struct lz_err *err)
{
	const struct lz_path *ws = lz_config_workspace(f->cfg);
	struct lz_gitsentry_mount *git = NULL;
	size_t n_git = 0;
	int r = lz_gitsentry_plan(ws->fd, ws->canonical, &git, &n_git, err);
	if (r == 0)
		r = lz_bundle_write(f->cfg, &f->gen, &(struct lz_bundle_git){ git, n_git }, challenge, err);
	lz_gitsentry_free(git, n_git);
	return r;
}

static json_t *write_and_parse(struct cfg_fx *f)
{
	struct lz_err err = { 0, "" };
	if (write_bundle(f, &err) != 0)
		fail_msg("bundle: %s", err.msg);
	struct stat st;
	assert_int_equal(fstatat(f->gen.bundle, "config.json", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);
	int fd = openat(f->gen.bundle, "config.json", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	json_error_t je;
	json_t *doc = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
	close(fd);
	if (doc == NULL)
		fail_msg("config.json: %s", je.text);
	return doc;
}

static const char *str_at(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_string(v))
		fail_msg("%s is not a string", key);
	return json_string_value(v);
}

/* The mount whose destination is dest, or NULL; *index its position. */
static json_t *mount_at(json_t *doc, const char *dest, size_t *index)
{
	json_t *mounts = json_object_get(doc, "mounts");
	assert_true(json_is_array(mounts));
	size_t i;
	json_t *m;
	json_array_foreach(mounts, i, m)
	{
		if (strcmp(str_at(m, "destination"), dest) == 0) {
			if (index)
				*index = i;
			return m;
		}
	}
	return NULL;
}

static bool has_option(json_t *m, const char *opt)
{
	size_t i;
	json_t *o;
	json_array_foreach(json_object_get(m, "options"), i, o)
	{
		if (strcmp(json_string_value(o), opt) == 0)
			return true;
	}
	return false;
}

static void assert_bind(json_t *doc, const char *dest, const char *source, bool ro, size_t *index)
{
	json_t *m = mount_at(doc, dest, index);
	if (m == NULL)
		fail_msg("no mount at %s", dest);
	assert_string_equal(str_at(m, "type"), "bind");
	assert_string_equal(str_at(m, "source"), source);
	assert_true(has_option(m, "rbind"));
	assert_int_equal(has_option(m, "ro"), ro);
	assert_int_equal(has_option(m, "rw"), !ro);
}

static void test_lz_bundle_write__fields_and_mount_order(void **state)
{
	struct cfg_fx *f = *state;
	char vol[PATH_MAX], p[PATH_MAX];
	assert_int_equal(mkdir(cfg_fx_path(f, "vol", vol), 0755), 0);
	load(f, CFG_FX_BASE "persistent_dirs = [\"/root\", \"/usr/local\"]\n"
			    "[[profiles.dev.volumes]]\nsource = \"@/vol\"\ndestination = \"/data\"\nread_only = true\n");
	json_t *doc = write_and_parse(f);
	const char *gen = f->gen.dir.canonical;
	snprintf(p, sizeof(p), "%s/root", gen);
	json_t *root = json_object_get(doc, "root");
	assert_string_equal(str_at(root, "path"), p);
	assert_true(json_is_false(json_object_get(root, "readonly")));
	assert_string_equal(str_at(doc, "hostname"), "lazaret");
	/* The init: its path, --attest and the challenge in lowercase hex. */
	json_t *proc = json_object_get(doc, "process");
	json_t *args = json_object_get(proc, "args");
	assert_int_equal(json_array_size(args), 5);
	assert_string_equal(json_string_value(json_array_get(args, 0)), LZ_BUNDLE_INIT_PATH);
	assert_string_equal(json_string_value(json_array_get(args, 1)), "--attest");
	char hex[2 * LZ_CANARY_CHALLENGE_LEN + 1] = "0001abff";
	memset(hex + 8, '0', sizeof(hex) - 9);
	hex[sizeof(hex) - 1] = '\0';
	assert_string_equal(json_string_value(json_array_get(args, 2)), hex);
	/* The workspace's host path, for the init's link to /workspace. */
	assert_string_equal(json_string_value(json_array_get(args, 3)), "--workspace-alias");
	assert_string_equal(json_string_value(json_array_get(args, 4)), f->ws);
	json_t *env = json_object_get(proc, "env");
	assert_int_equal(json_array_size(env), 1);
	assert_string_equal(json_string_value(json_array_get(env, 0)), LZ_BUNDLE_GUEST_PATH);
	assert_string_equal(str_at(proc, "cwd"), "/");
	/* The network namespace is the RS's, by path. */
	json_t *ns;
	size_t i;
	bool net = false;
	json_array_foreach(json_object_get(json_object_get(doc, "linux"), "namespaces"), i, ns)
	{
		if (strcmp(str_at(ns, "type"), "network") == 0) {
			assert_string_equal(str_at(ns, "path"), "/proc/1/ns/net");
			net = true;
		}
	}
	assert_true(net);
	/* Mounts, in order. */
	size_t a0, a1, v, w, init, resolv;
	snprintf(p, sizeof(p), "%s/anchor/0", gen);
	assert_bind(doc, "/root", p, false, &a0);
	snprintf(p, sizeof(p), "%s/anchor/1", gen);
	assert_bind(doc, "/usr/local", p, false, &a1);
	/* A volume: where the RS bound the configuration's object, never its
	 * source path (rsplan.h). */
	snprintf(p, sizeof(p), "%s/volume/0", gen);
	assert_bind(doc, "/data", p, true, &v);
	char *text = json_dumps(doc, 0);
	assert_non_null(text);
	assert_null(strstr(text, vol));
	free(text);
	/* Spec 3.5: the router's mount point in the generation. */
	snprintf(p, sizeof(p), "%s/workspace", gen);
	assert_bind(doc, "/workspace", p, false, &w);
	snprintf(p, sizeof(p), "%s/init", gen);
	assert_bind(doc, LZ_BUNDLE_INIT_PATH, p, true, &init);
	snprintf(p, sizeof(p), "%s/resolv.conf", gen);
	assert_bind(doc, "/etc/resolv.conf", p, true, &resolv);
	assert_true(a0 < a1 && a1 < v && v < w && w < init && init < resolv);
	assert_int_equal(resolv, json_array_size(json_object_get(doc, "mounts")) - 1);
	/* No Git repository: nothing of Git Sentry's. */
	assert_null(mount_at(doc, "/workspace/.git", NULL));
	json_decref(doc);
}

/* The workspace a Git repository (git is one of the packages
 * scripts/setup.sh installs). */
static void git_init_workspace(struct cfg_fx *f)
{
	char cmd[PATH_MAX + 128];
	snprintf(cmd, sizeof(cmd), "GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent git init -q '%s' >/dev/null 2>&1", f->ws);
	if (system(cmd) != 0)
		fail_msg("git init failed (is git installed?)");
}

/* FR-9: isolate_ignored = false turns off the ignore rules only: the
 * workspace is still the router's mount (its policy holds), never the
 * canonical workspace bound directly. */
/* No link where a mount lies on its way: the init would write into the
 * volume (or State Anchor) that holds it. */
static void test_lz_bundle_write__no_workspace_alias_beneath_a_mount(void **state)
{
	struct cfg_fx *f = *state;
	char vol[PATH_MAX], cfg[3 * PATH_MAX];
	assert_int_equal(mkdir(cfg_fx_path(f, "vol", vol), 0755), 0);
	snprintf(cfg, sizeof(cfg),
		 CFG_FX_BASE "persistent_dirs = []\n[[profiles.dev.volumes]]\nsource = \"@/vol\"\n"
			     "destination = \"%s\"\n",
		 f->dir);
	load(f, cfg);
	json_t *doc = write_and_parse(f);
	json_t *args = json_object_get(json_object_get(doc, "process"), "args");
	assert_int_equal(json_array_size(args), 3);
	assert_string_equal(json_string_value(json_array_get(args, 1)), "--attest");
	json_decref(doc);
}

static void test_lz_bundle_write__isolation_off_still_goes_through_the_router(void **state)
{
	struct cfg_fx *f = *state;
	char p[PATH_MAX + 128];
	git_init_workspace(f);
	load(f, CFG_FX_BASE "persistent_dirs = []\nisolate_ignored = false\n");
	json_t *doc = write_and_parse(f);
	snprintf(p, sizeof(p), "%s/workspace", f->gen.dir.canonical);
	assert_bind(doc, "/workspace", p, false, NULL);
	snprintf(p, sizeof(p), "%s/workspace/.git", f->gen.dir.canonical);
	assert_bind(doc, "/workspace/.git", p, false, NULL);
	json_decref(doc);
}

static void test_lz_bundle_write__git_sentry_on_top_of_the_workspace(void **state)
{
	struct cfg_fx *f = *state;
	char p[PATH_MAX + 128];
	git_init_workspace(f);
	load(f, CFG_FX_BASE "persistent_dirs = []\n");
	json_t *doc = write_and_parse(f);
	size_t w, git, init, i;
	snprintf(p, sizeof(p), "%s/workspace", f->gen.dir.canonical);
	assert_bind(doc, "/workspace", p, false, &w);
	/* .git is pinned through the router too (spec 3.5: .git is host-routed). */
	snprintf(p, sizeof(p), "%s/workspace/.git", f->gen.dir.canonical);
	assert_bind(doc, "/workspace/.git", p, false, &git);
	assert_true(w < git);
	/* Git Sentry's read-only files and tmpfs lie between .git and init. */
	assert_non_null(mount_at(doc, LZ_BUNDLE_INIT_PATH, &init));
	assert_true(init > git + 1);
	json_t *mounts = json_object_get(doc, "mounts");
	bool config_ro = false;
	for (i = git + 1; i < init; i++) {
		json_t *m = json_array_get(mounts, i);
		const char *dest = str_at(m, "destination");
		assert_int_equal(strncmp(dest, "/workspace/.git/", 16), 0);
		if (strcmp(dest, "/workspace/.git/config") == 0) {
			/* Where the RS bound the object Git Sentry checked: a
			 * workspace path would be resolved by runsc at start,
			 * after a swap (rsplan.h). */
			snprintf(p, sizeof(p), "%s/sentry/%zu", f->gen.dir.canonical, i - git - 1);
			assert_bind(doc, dest, p, true, NULL);
			config_ro = true;
		}
	}
	assert_true(config_ro);
	/* No mount source names a path in the workspace itself. */
	json_t *m;
	json_array_foreach(mounts, i, m)
	{
		json_t *src = json_object_get(m, "source");
		if (json_is_string(src))
			assert_null(strstr(json_string_value(src), f->ws));
	}
	json_decref(doc);
}

/* The .git pin is not skipped when the workspace's .git cannot be looked
 * at (here: a workspace without search permission, after Git Sentry's
 * plan); the bundle is refused, never written without the pin. As root
 * the check runs in a child without capabilities, which the mode binds. */
static void test_lz_bundle_write__a_git_that_cannot_be_looked_at_refuses(void **state)
{
	struct cfg_fx *f = *state;
	git_init_workspace(f);
	load(f, CFG_FX_BASE "persistent_dirs = []\n");
	const struct lz_path *ws = lz_config_workspace(f->cfg);
	struct lz_gitsentry_mount *git = NULL;
	size_t n_git = 0;
	struct lz_err err = { 0, "" };
	assert_int_equal(lz_gitsentry_plan(ws->fd, ws->canonical, &git, &n_git, &err), 0);
	assert_true(n_git > 0);
	assert_int_equal(chmod(f->ws, 0600), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (geteuid() == 0 && lz_caps_limit(0) < 0)
			_exit(3);
		int r = lz_bundle_write(f->cfg, &f->gen, &(struct lz_bundle_git){ git, n_git }, challenge, &err);
		_exit(r == -EACCES && strstr(err.msg, "the workspace's .git") != NULL ? 0 : r == 0 ? 1 : 2);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(chmod(f->ws, 0755), 0);
	lz_gitsentry_free(git, n_git);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	struct stat st;
	assert_int_equal(fstatat(f->gen.bundle, "config.json", &st, AT_SYMLINK_NOFOLLOW), -1);
}

static void test_lz_bundle_write__refusals(void **state)
{
	struct cfg_fx *f = *state;
	struct lz_err err = { 0, "" };
	load(f, CFG_FX_BASE "persistent_dirs = []\n");
	/* Written once: a second write of the same generation refuses. */
	json_decref(write_and_parse(f));
	assert_int_equal(write_bundle(f, &err), -EEXIST);
	assert_non_null(strstr(err.msg, "config.json"));
	/* A config.json planted as a symlink is not followed. */
	char victim[PATH_MAX];
	cfg_fx_path(f, "victim", victim);
	assert_int_equal(unlinkat(f->gen.bundle, "config.json", 0), 0);
	assert_int_equal(symlinkat(victim, f->gen.bundle, "config.json"), 0);
	assert_true(write_bundle(f, &err) < 0);
	struct stat st;
	assert_int_equal(stat(victim, &st), -1);
}

static void test_lz_bundle_guest_env__fixed_then_references(void **state)
{
	struct cfg_fx *f = *state;
	cfg_fx_setenv("LZ_TEST_TOKEN", "s3cret");
	cfg_fx_setenv("LZ_TEST_EMPTY", "");
	load(f, CFG_FX_BASE "[profiles.dev.env]\nTOKEN = \"LZ_TEST_TOKEN\"\nEMPTY = \"LZ_TEST_EMPTY\"\n");
	char **env = lz_bundle_guest_env(f->cfg);
	assert_non_null(env);
	assert_string_equal(env[0], LZ_BUNDLE_GUEST_PATH);
	assert_string_equal(env[1], "HOME=/root");
	assert_string_equal(env[2], "LANG=C.UTF-8");
	/* Git compares what both sides of the workspace see alike (issue 15)
	 * and writes no index extension the index guard refuses. */
	static const char *const git[][2] = {
		{ "core.checkStat", "minimal" },
		{ "core.trustctime", "false" },
		{ "core.untrackedCache", "false" },
		{ "core.fsmonitor", "false" },
		{ "index.recordEndOfIndexEntries", "false" },
		{ "index.recordOffsetTable", "false" },
		{ "core.splitIndex", "false" },
		{ "index.sparse", "false" },
		{ "index.skipHash", "false" },
		{ "core.ignoreStat", "false" },
	};
	const size_t n_git = 1 + 2 * (sizeof(git) / sizeof(git[0]));
	char want_git[96];
	snprintf(want_git, sizeof(want_git), "GIT_CONFIG_COUNT=%zu", sizeof(git) / sizeof(git[0]));
	assert_string_equal(env[3], want_git);
	for (size_t i = 0; i < sizeof(git) / sizeof(git[0]); i++) {
		snprintf(want_git, sizeof(want_git), "GIT_CONFIG_KEY_%zu=%s", i, git[i][0]);
		assert_string_equal(env[4 + 2 * i], want_git);
		snprintf(want_git, sizeof(want_git), "GIT_CONFIG_VALUE_%zu=%s", i, git[i][1]);
		assert_string_equal(env[5 + 2 * i], want_git);
	}
	/* The references, in the profile's order, with the resolved values. */
	const struct lz_config_profile *p = lz_config_selected(f->cfg);
	assert_int_equal(p->n_env, 2);
	for (size_t i = 0; i < 2; i++) {
		char want[64];
		snprintf(want, sizeof(want), "%s=%s", p->env[i].name,
			 strcmp(p->env[i].name, "TOKEN") == 0 ? "s3cret" : "");
		assert_string_equal(env[3 + n_git + i], want);
	}
	assert_null(env[3 + n_git + 2]);
	lz_bundle_env_free(env);
	lz_bundle_env_free(NULL);
}

/* A profile passing its own Git configuration gets none of ours. */
static void test_lz_bundle_guest_env__profile_git_config_wins(void **state)
{
	struct cfg_fx *f = *state;
	cfg_fx_setenv("LZ_TEST_COUNT", "1");
	load(f, CFG_FX_BASE "[profiles.dev.env]\nGIT_CONFIG_COUNT = \"LZ_TEST_COUNT\"\n");
	char **env = lz_bundle_guest_env(f->cfg);
	assert_non_null(env);
	assert_string_equal(env[3], "GIT_CONFIG_COUNT=1");
	assert_null(env[4]);
	lz_bundle_env_free(env);
}

/* A reference naming a variable Lazaret sets takes its place: one entry
 * of each name, the profile's value, where the default stood. */
static void test_lz_bundle_guest_env__profile_replaces_defaults(void **state)
{
	struct cfg_fx *f = *state;
	cfg_fx_setenv("LZ_TEST_PATH", "/opt/bin:/usr/bin");
	cfg_fx_setenv("LZ_TEST_LANG", "de_DE.UTF-8");
	cfg_fx_setenv("LZ_TEST_TOKEN", "t");
	load(f, CFG_FX_BASE "[profiles.dev.env]\nLANG = \"LZ_TEST_LANG\"\nTOKEN = \"LZ_TEST_TOKEN\"\n"
			    "PATH = \"LZ_TEST_PATH\"\n");
	char **env = lz_bundle_guest_env(f->cfg);
	assert_non_null(env);
	assert_string_equal(env[0], "PATH=/opt/bin:/usr/bin");
	assert_string_equal(env[1], "HOME=/root");
	assert_string_equal(env[2], "LANG=de_DE.UTF-8");
	size_t n = 0, paths = 0, langs = 0;
	for (; env[n]; n++) {
		paths += strncmp(env[n], "PATH=", 5) == 0;
		langs += strncmp(env[n], "LANG=", 5) == 0;
	}
	assert_int_equal(paths, 1);
	assert_int_equal(langs, 1);
	assert_string_equal(env[n - 1], "TOKEN=t");
	assert_int_equal(n, 3 + 21 + 1); /* the defaults, 21 for Git, the token */
	lz_bundle_env_free(env);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_lz_bundle_write__fields_and_mount_order),
		T(test_lz_bundle_write__git_sentry_on_top_of_the_workspace),
		T(test_lz_bundle_write__no_workspace_alias_beneath_a_mount),
		T(test_lz_bundle_write__isolation_off_still_goes_through_the_router),
		T(test_lz_bundle_write__a_git_that_cannot_be_looked_at_refuses),
	T(test_lz_bundle_write__refusals),
		T(test_lz_bundle_guest_env__fixed_then_references),
		T(test_lz_bundle_guest_env__profile_git_config_wins),
		T(test_lz_bundle_guest_env__profile_replaces_defaults),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
