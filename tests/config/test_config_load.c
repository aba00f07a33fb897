/* lz_config_load end to end on temporary trees (spec 3.2): source
 * selection, the owned 0700 layout, workspace/volume/executable confinement,
 * environment references resolved last and never printed, the Domain ID
 * (checked against an independent SHA-256) and the Configuration
 * Fingerprint's inputs.
 *
 * Each test gets its own mkdtemp directory under /tmp:
 *   cfg/config.toml  the configuration (explicit --config)
 *   home/            HOME
 *   data/            XDG_DATA_HOME  -> Storage Root data/lazaret
 *   run/             XDG_RUNTIME_DIR -> Runtime Root run/lazaret
 *   ws/              the Agent Workspace
 * In configuration templates "@" stands for that directory. Tests pass as
 * root (CI) and as a normal user; foreign-owner cases need root and are
 * skipped otherwise. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/types.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_test.h"

#include "config/config.h"

#define NOBODY 65534
#define SECRET "s3cr3t-Value-7f2a"

/* ---- getenv stub ------------------------------------------------------- */

static struct {
	const char *name;
	const char *value;
} stub_env[8];
static size_t stub_n;

static void stub_set(const char *name, const char *value)
{
	for (size_t i = 0; i < stub_n; i++)
		if (strcmp(stub_env[i].name, name) == 0) {
			stub_env[i].value = value;
			return;
		}
	assert_true(stub_n < sizeof(stub_env) / sizeof(stub_env[0]));
	stub_env[stub_n].name = name;
	stub_env[stub_n].value = value;
	stub_n++;
}

static const char *stub_getenv(const char *name)
{
	for (size_t i = 0; i < stub_n; i++)
		if (strcmp(stub_env[i].name, name) == 0)
			return stub_env[i].value;
	return NULL;
}

/* ---- fixture and helpers ------------------------------------------------ */

struct fx {
	char dir[64]; /* canonical "/tmp/lz-test-config-load-XXXXXX" */
	char cfg[PATH_MAX], home[PATH_MAX], data[PATH_MAX], run[PATH_MAX], ws[PATH_MAX];
	char storage[PATH_MAX], runtime[PATH_MAX];
	struct lz_config_request req;
	mode_t umask_saved;
};

static char *pj(char out[PATH_MAX], const struct fx *f, const char *rel)
{
	int n = snprintf(out, PATH_MAX, "%s/%s", f->dir, rel);
	if (n <= 0 || n >= PATH_MAX)
		abort();
	return out;
}

static void mkdir_mode(const char *path, mode_t mode)
{
	if (mkdir(path, 0700) < 0)
		fail_msg("mkdir '%s': %s", path, strerror(errno));
	assert_int_equal(chmod(path, mode), 0); /* exact, whatever the umask */
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (f == NULL)
		return -1;
	char tmpl[] = "/tmp/lz-test-config-load-XXXXXX";
	if (mkdtemp(tmpl) == NULL) {
		free(f);
		return -1;
	}
	char *canonical = realpath(tmpl, NULL);
	if (canonical == NULL || strlen(canonical) >= sizeof(f->dir)) {
		free(canonical);
		lz_test_rmtree(tmpl);
		free(f);
		return -1;
	}
	strcpy(f->dir, canonical);
	free(canonical);
	pj(f->cfg, f, "cfg/config.toml");
	pj(f->home, f, "home");
	pj(f->data, f, "data");
	pj(f->run, f, "run");
	pj(f->ws, f, "ws");
	pj(f->storage, f, "data/lazaret");
	pj(f->runtime, f, "run/lazaret");
	char cfgdir[PATH_MAX];
	if (mkdir(pj(cfgdir, f, "cfg"), 0755) < 0 || mkdir(f->home, 0755) < 0 ||
	    mkdir(f->run, 0700) < 0 || mkdir(f->ws, 0755) < 0)
		return -1;
	f->req = (struct lz_config_request){
		.config_path = f->cfg,
		.profile = "dev",
		.workspace = f->ws,
		.cwd = f->dir,
		.env = { .home = f->home, .xdg_data_home = f->data, .xdg_runtime_dir = f->run },
		.getenv = stub_getenv,
	};
	stub_n = 0;
	f->umask_saved = umask(022);
	umask(f->umask_saved);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	umask(f->umask_saved); /* a failed assertion may have left umask 0 */
	lz_test_rmtree(f->dir);
	free(f);
	return 0;
}

static void write_bytes(const char *path, const char *bytes, size_t n, mode_t mode)
{
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		fail_msg("create '%s': %s", path, strerror(errno));
	for (size_t done = 0; done < n;) {
		ssize_t w = write(fd, bytes + done, n - done);
		assert_true(w > 0);
		done += (size_t)w;
	}
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

/* Writes the template to path with every "@" replaced by the fixture dir. */
static void write_template(const struct fx *f, const char *path, const char *tmpl)
{
	size_t dl = strlen(f->dir), n = 0;
	char *out = malloc(strlen(tmpl) * (dl + 1) + 1);
	assert_non_null(out);
	for (const char *s = tmpl; *s; s++) {
		if (*s == '@') {
			memcpy(out + n, f->dir, dl);
			n += dl;
		} else {
			out[n++] = *s;
		}
	}
	write_bytes(path, out, n, 0600);
	free(out);
}

static void write_config(const struct fx *f, const char *tmpl)
{
	write_template(f, f->cfg, tmpl);
}

/* A private copy of /bin/true: one hard link, our ownership, given mode. */
static void copy_true(const char *dest, mode_t mode)
{
	size_t len;
	char *buf = lz_test_read_file("/bin/true", &len);
	assert_non_null(buf);
	write_bytes(dest, buf, len, mode);
	free(buf);
}

static void assert_msg_contains(const struct lz_err *err, const char *needle)
{
	if (strstr(err->msg, needle) == NULL)
		fail_msg("message '%s' lacks '%s'", err->msg, needle);
}

static void assert_msg_lacks(const struct lz_err *err, const char *needle)
{
	if (strstr(err->msg, needle) != NULL)
		fail_msg("message '%s' contains '%s'", err->msg, needle);
}

static lz_config *load_ok(const struct fx *f)
{
	lz_config *cfg = NULL;
	struct lz_err err = { 0, "" };
	if (lz_config_load(&f->req, &cfg, &err) != 0)
		fail_msg("load refused: %s", err.msg);
	assert_non_null(cfg);
	return cfg;
}

/* Sentinel for "output untouched on failure"; never dereferenced. */
static char untouched_marker;
#define UNTOUCHED ((lz_config *)(void *)&untouched_marker)

static void load_refused(const struct fx *f, int want, const char *msg, struct lz_err *ret_err)
{
	lz_config *cfg = UNTOUCHED;
	struct lz_err err = { 0, "" };
	int r = lz_config_load(&f->req, &cfg, &err);
	if (r != want) {
		if (r == 0 && cfg != UNTOUCHED)
			lz_config_free(cfg);
		fail_msg("got %d (%s), want %d", r, err.msg, want);
	}
	assert_true(cfg == UNTOUCHED);
	assert_int_equal(err.code, -want);
	if (msg)
		assert_msg_contains(&err, msg);
	if (ret_err)
		*ret_err = err;
}

static void fingerprint_of(const struct fx *f, char out[LZ_DOMAIN_ID_HEX_LEN + 1])
{
	lz_config *cfg = load_ok(f);
	struct lz_config_summary s;
	lz_config_summarize(cfg, &s);
	assert_non_null(s.fingerprint);
	assert_int_equal(strlen(s.fingerprint), LZ_DOMAIN_ID_HEX_LEN);
	strcpy(out, s.fingerprint);
	lz_config_free(cfg);
}

static void fingerprint_with(const struct fx *f, const char *tmpl, char out[LZ_DOMAIN_ID_HEX_LEN + 1])
{
	write_config(f, tmpl);
	fingerprint_of(f, out);
}

static void assert_owned_dir(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		fail_msg("stat '%s': %s", path, strerror(errno));
	assert_true(S_ISDIR(st.st_mode));
	if ((st.st_mode & 07777) != 0700)
		fail_msg("'%s' has mode %04o", path, (unsigned)(st.st_mode & 07777));
	assert_int_equal(st.st_uid, getuid());
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static bool is_lower_hex(const char *s, size_t n)
{
	if (strlen(s) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* Domain ID computed here, independently of core/domain.c. */
static void expected_domain_id(const char *profile, const char *ws, char out[65])
{
	static const char hexd[] = "0123456789abcdef";
	uint8_t md[32];
	unsigned int n = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	assert_non_null(ctx);
	assert_int_equal(EVP_DigestInit_ex(ctx, EVP_sha256(), NULL), 1);
	assert_int_equal(EVP_DigestUpdate(ctx, "lazaret-domain-id-v1", 20), 1);
	const char *fields[] = { profile, ws };
	for (size_t i = 0; i < 2; i++) {
		uint32_t len = (uint32_t)strlen(fields[i]);
		uint8_t be[4] = { len >> 24, len >> 16, len >> 8, len };
		assert_int_equal(EVP_DigestUpdate(ctx, be, 4), 1);
		assert_int_equal(EVP_DigestUpdate(ctx, fields[i], len), 1);
	}
	assert_int_equal(EVP_DigestFinal_ex(ctx, md, &n), 1);
	assert_int_equal(n, 32);
	EVP_MD_CTX_free(ctx);
	for (size_t i = 0; i < 32; i++) {
		out[2 * i] = hexd[md[i] >> 4];
		out[2 * i + 1] = hexd[md[i] & 15];
	}
	out[64] = '\0';
}

static void copy_example(const struct fx *f)
{
	FILE *in = fopen(lz_test_source("examples/config.toml"), "r");
	assert_non_null(in);
	static char buf[65536];
	size_t n = fread(buf, 1, sizeof(buf), in);
	fclose(in);
	assert_true(n > 0 && n < sizeof(buf));
	write_bytes(f->cfg, buf, n, 0600);
}

#define BASE "version = 1\n[profiles.dev]\nimage = \"docker://debian:bookworm\"\n"

/* ---- the valid example -------------------------------------------------- */

static void test_lz_config_load__example_profile_summary(void **state)
{
	struct fx *f = *state;
	copy_example(f);
	lz_config *cfg = load_ok(f);
	struct lz_config_summary s;
	lz_config_summarize(cfg, &s);
	char want_id[65];
	expected_domain_id("dev", f->ws, want_id);

	assert_string_equal(s.source, f->cfg);
	assert_string_equal(s.storage_root, f->storage);
	assert_string_equal(s.runtime_root, f->runtime);
	assert_string_equal(s.profile, "dev");
	assert_string_equal(s.workspace, f->ws);
	assert_string_equal(s.domain_id, want_id);
	assert_true(is_lower_hex(s.fingerprint, 64));
	assert_string_not_equal(s.fingerprint, s.domain_id);
	assert_int_equal(s.runsc_dcache, 50000);
	assert_int_equal(s.n_profiles, 2);
	const struct lz_config_profile *p = lz_config_selected(cfg);
	assert_non_null(p);
	assert_string_equal(p->name, "dev");
	lz_config_free(cfg);
	lz_config_free(NULL);
}

/* Every directory Lazaret creates is 0700 and ours, even under umask 0. */
static void test_lz_config_load__creates_owned_layout_0700(void **state)
{
	struct fx *f = *state;
	copy_example(f);
	mode_t old = umask(0);
	lz_config *cfg = load_ok(f);
	umask(old);
	char id[65], p[PATH_MAX];
	expected_domain_id("dev", f->ws, id);
	const char *const owned[] = { "data", "data/lazaret", "data/lazaret/profiles",
				      "data/lazaret/profiles/dev", "data/lazaret/profiles/dev/cache",
				      "data/lazaret/profiles/dev/cache/pip", "data/lazaret/domains",
				      "run/lazaret", "run/lazaret/domains" };
	for (size_t i = 0; i < sizeof(owned) / sizeof(owned[0]); i++)
		assert_owned_dir(pj(p, f, owned[i]));
	char rel[PATH_MAX];
	snprintf(rel, sizeof(rel), "data/lazaret/domains/%s", id);
	assert_owned_dir(pj(p, f, rel));
	snprintf(rel, sizeof(rel), "run/lazaret/domains/%s", id);
	assert_owned_dir(pj(p, f, rel));
	lz_config_free(cfg);
}

/* Without a profile: structural check and roots only. */
static void test_lz_config_load__no_profile_roots_only(void **state)
{
	struct fx *f = *state;
	copy_example(f);
	f->req.profile = NULL;
	lz_config *cfg = load_ok(f);
	struct lz_config_summary s;
	lz_config_summarize(cfg, &s);
	assert_string_equal(s.storage_root, f->storage);
	assert_string_equal(s.runtime_root, f->runtime);
	assert_null(s.profile);
	assert_null(s.workspace);
	assert_null(s.domain_id);
	assert_null(s.fingerprint);
	assert_null(lz_config_selected(cfg));
	assert_int_equal(s.n_profiles, 2);
	assert_owned_dir(f->storage);
	assert_owned_dir(f->runtime);
	char p[PATH_MAX];
	assert_false(exists(pj(p, f, "data/lazaret/profiles")));
	lz_config_free(cfg);
}

static void test_lz_config_load__data_root_used(void **state)
{
	struct fx *f = *state;
	write_config(f, "version = 1\n[storage]\ndata_root = \"@/custom/store\"\n"
			"[profiles.dev]\nimage = \"docker://debian:bookworm\"\n");
	lz_config *cfg = load_ok(f);
	struct lz_config_summary s;
	lz_config_summarize(cfg, &s);
	char want[PATH_MAX];
	assert_string_equal(s.storage_root, pj(want, f, "custom/store"));
	assert_owned_dir(want);
	assert_false(exists(f->data));
	lz_config_free(cfg);
}

static void test_lz_config_load__source_from_xdg_config_home(void **state)
{
	struct fx *f = *state;
	char xdg[PATH_MAX], p[PATH_MAX];
	mkdir_mode(pj(xdg, f, "xdg"), 0755);
	mkdir_mode(pj(p, f, "xdg/lazaret"), 0755);
	write_template(f, pj(p, f, "xdg/lazaret/config.toml"), BASE);
	f->req.config_path = NULL;
	f->req.env.xdg_config_home = xdg;
	lz_config *cfg = load_ok(f);
	struct lz_config_summary s;
	lz_config_summarize(cfg, &s);
	assert_string_equal(s.source, p);
	lz_config_free(cfg);
}

static void test_lz_config_load__source_from_home_fallback(void **state)
{
	struct fx *f = *state;
	char p[PATH_MAX];
	mkdir_mode(pj(p, f, "home/.config"), 0755);
	mkdir_mode(pj(p, f, "home/.config/lazaret"), 0755);
	write_template(f, pj(p, f, "home/.config/lazaret/config.toml"), BASE);
	f->req.config_path = NULL;
	f->req.env.xdg_config_home = "relative/ignored";
	lz_config *cfg = load_ok(f);
	struct lz_config_summary s;
	lz_config_summarize(cfg, &s);
	assert_string_equal(s.source, p);
	lz_config_free(cfg);
}

/* ---- source refusals ---------------------------------------------------- */

static void test_lz_config_load__source_missing_refused(void **state)
{
	struct fx *f = *state;
	load_refused(f, -ENOENT, "create it or pass --config", NULL);
	assert_false(exists(f->data));
}

static void test_lz_config_load__source_group_writable_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE);
	assert_int_equal(chmod(f->cfg, 0620), 0);
	load_refused(f, -EPERM, "group or other write", NULL);
}

static void test_lz_config_load__source_decode_error_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE "bogus = 1\n");
	struct lz_err err;
	load_refused(f, -EINVAL, "unknown key 'bogus'", &err);
	char where[PATH_MAX + 8];
	snprintf(where, sizeof(where), "%s:4:", f->cfg);
	assert_msg_contains(&err, where);
	assert_false(exists(f->data));
}

/* ---- profile selection -------------------------------------------------- */

static void test_lz_config_load__missing_profile_refused(void **state)
{
	struct fx *f = *state;
	copy_example(f);
	f->req.profile = "nope";
	struct lz_err err;
	load_refused(f, -ENOENT, "profile 'nope' is not defined", &err);
	assert_msg_contains(&err, "defined: dev, agent");
	/* Refused before any root is created. */
	assert_false(exists(f->data));
	assert_false(exists(f->runtime));
}

static void test_lz_config_load__missing_profile_none_defined(void **state)
{
	struct fx *f = *state;
	write_config(f, "version = 1\n");
	load_refused(f, -ENOENT, "(defined: none)", NULL);
}

/* ---- roots -------------------------------------------------------------- */

static void test_lz_config_load__runtime_dir_unset_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE);
	f->req.env.xdg_runtime_dir = NULL;
	load_refused(f, -EINVAL, "XDG_RUNTIME_DIR", NULL);
	f->req.env.xdg_runtime_dir = "";
	load_refused(f, -EINVAL, "XDG_RUNTIME_DIR", NULL);
	f->req.env.xdg_runtime_dir = "run";
	load_refused(f, -EINVAL, "XDG_RUNTIME_DIR", NULL);
	assert_false(exists(f->data)); /* nothing created */
}

static void test_lz_config_load__storage_root_mode_0755_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE);
	mkdir_mode(f->data, 0755);
	mkdir_mode(f->storage, 0755);
	struct lz_err err;
	load_refused(f, -EPERM, "0700", &err);
	assert_msg_contains(&err, "Storage Root: ");
	assert_msg_contains(&err, "0755");
	assert_false(exists(f->runtime));
}

static void test_lz_config_load__runtime_root_mode_0755_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE);
	mkdir_mode(f->runtime, 0755);
	struct lz_err err;
	load_refused(f, -EPERM, "0700", &err);
	assert_msg_contains(&err, "Runtime Root: ");
}

static void test_lz_config_load__storage_root_other_owner_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE);
	mkdir_mode(f->data, 0755);
	mkdir_mode(f->storage, 0700);
	if (geteuid() != 0)
		skip(); /* needs root to give the directory away */
	assert_int_equal(chown(f->storage, NOBODY, NOBODY), 0);
	load_refused(f, -EPERM, "owned by uid 65534", NULL);
}

static void test_lz_config_load__storage_root_symlink_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE);
	char real[PATH_MAX];
	mkdir_mode(f->data, 0755);
	mkdir_mode(pj(real, f, "real"), 0700);
	assert_int_equal(symlink(real, f->storage), 0);
	load_refused(f, -ELOOP, "Storage Root: ", NULL);
}

static void test_lz_config_load__config_inside_storage_root_refused(void **state)
{
	struct fx *f = *state;
	mkdir_mode(f->data, 0755);
	mkdir_mode(f->storage, 0700);
	char cfg[PATH_MAX];
	write_template(f, pj(cfg, f, "data/lazaret/config.toml"), BASE);
	f->req.config_path = cfg;
	struct lz_err err;
	load_refused(f, -EINVAL, "overlaps", &err);
	assert_msg_contains(&err, "the configuration file");
	assert_msg_contains(&err, "the Storage Root");
}

static void test_lz_config_load__storage_overlaps_runtime_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE);
	f->req.env.xdg_runtime_dir = f->storage; /* runtime = data/lazaret/lazaret */
	struct lz_err err;
	load_refused(f, -EINVAL, "overlaps", &err);
	assert_msg_contains(&err, "the Runtime Root");
	assert_false(exists(f->data));
}

/* ---- workspace ---------------------------------------------------------- */

static void test_lz_config_load__workspace_defaults_to_cwd(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE);
	f->req.workspace = NULL;
	f->req.cwd = f->ws;
	lz_config *cfg = load_ok(f);
	struct lz_config_summary s;
	lz_config_summarize(cfg, &s);
	assert_string_equal(s.workspace, f->ws);
	lz_config_free(cfg);
}

/* A symlinked workspace is resolved once; identity follows the target. */
static void test_lz_config_load__workspace_symlink_resolved(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE);
	char link[PATH_MAX], id[65];
	assert_int_equal(symlink(f->ws, pj(link, f, "wslink")), 0);
	f->req.workspace = link;
	lz_config *cfg = load_ok(f);
	struct lz_config_summary s;
	lz_config_summarize(cfg, &s);
	expected_domain_id("dev", f->ws, id);
	assert_string_equal(s.workspace, f->ws);
	assert_string_equal(s.domain_id, id);
	lz_config_free(cfg);
}

static void test_lz_config_load__workspace_missing_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE);
	char ws[PATH_MAX];
	f->req.workspace = pj(ws, f, "absent");
	load_refused(f, -ENOENT, "workspace", NULL);
}

static void test_lz_config_load__workspace_not_directory_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE);
	char ws[PATH_MAX];
	write_bytes(pj(ws, f, "file"), "x", 1, 0644);
	f->req.workspace = ws;
	load_refused(f, -ENOTDIR, "workspace", NULL);
}

static void test_lz_config_load__no_workspace_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE);
	f->req.workspace = NULL;
	f->req.cwd = NULL;
	load_refused(f, -EINVAL, "no workspace", NULL);
}

static void test_lz_config_load__workspace_is_storage_parent_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE);
	mkdir_mode(f->data, 0755);
	f->req.workspace = f->data;
	struct lz_err err;
	load_refused(f, -EINVAL, "overlaps", &err);
	assert_msg_contains(&err, "the Storage Root");
}

static void test_lz_config_load__workspace_inside_storage_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE);
	char inside[PATH_MAX];
	mkdir_mode(f->data, 0755);
	mkdir_mode(f->storage, 0700);
	mkdir_mode(pj(inside, f, "data/lazaret/project"), 0700);
	f->req.workspace = inside;
	struct lz_err err;
	load_refused(f, -EINVAL, "overlaps", &err);
	assert_msg_contains(&err, "the Storage Root");
}

static void test_lz_config_load__workspace_overlaps_runtime_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE);
	f->req.workspace = f->run;
	struct lz_err err;
	load_refused(f, -EINVAL, "overlaps", &err);
	assert_msg_contains(&err, "the Runtime Root");
}

static void test_lz_config_load__config_inside_workspace_refused(void **state)
{
	struct fx *f = *state;
	char cfg[PATH_MAX];
	write_template(f, pj(cfg, f, "ws/config.toml"), BASE);
	f->req.config_path = cfg;
	struct lz_err err;
	load_refused(f, -EINVAL, "overlaps", &err);
	assert_msg_contains(&err, "the configuration file");
}

/* A link the sandbox could re-aim (in the workspace, a volume source) on
 * the way to the configuration file is refused, wherever it points now;
 * one elsewhere (a dotfiles link) is followed as before. */
static void test_lz_config_load__config_through_a_link_the_sandbox_can_reaim_refused(void **state)
{
	struct fx *f = *state;
	char link[PATH_MAX], v[PATH_MAX], vlink[PATH_MAX], dot[PATH_MAX], dlink[PATH_MAX];
	mkdir_mode(pj(v, f, "vol"), 0755);
	write_config(f, BASE "[[profiles.dev.volumes]]\nsource = \"@/vol\"\ndestination = \"/data\"\n");
	assert_int_equal(symlink(f->cfg, pj(link, f, "ws/lazaret.toml")), 0);
	f->req.config_path = link;
	struct lz_err err;
	load_refused(f, -EINVAL, "is reached through the symbolic link", &err);
	assert_msg_contains(&err, "inside the workspace");
	/* a volume source's link */
	assert_int_equal(symlink(f->cfg, pj(vlink, f, "vol/config.toml")), 0);
	f->req.config_path = vlink;
	load_refused(f, -EINVAL, "inside volume source", &err);
	/* elsewhere: followed */
	mkdir_mode(pj(dot, f, "dotfiles"), 0755);
	assert_int_equal(symlink(f->cfg, pj(dlink, f, "dotfiles/config.toml")), 0);
	f->req.config_path = dlink;
	lz_config_free(load_ok(f));
}

/* ---- volumes ------------------------------------------------------------ */

#define VOL(src) BASE "[[profiles.dev.volumes]]\nsource = \"" src "\"\ndestination = \"/data\"\n"

static void test_lz_config_load__volume_source_ok(void **state)
{
	struct fx *f = *state;
	char v[PATH_MAX], file[PATH_MAX];
	mkdir_mode(pj(v, f, "vol"), 0755);
	write_config(f, VOL("@/vol"));
	lz_config_free(load_ok(f));
	/* A regular file is a valid source too. */
	write_bytes(pj(file, f, "file.txt"), "x", 1, 0644);
	write_config(f, VOL("@/file.txt"));
	lz_config_free(load_ok(f));
}

static void test_lz_config_load__volume_source_missing_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, VOL("@/absent"));
	load_refused(f, -ENOENT, "volume source", NULL);
}

static void test_lz_config_load__volume_source_special_file_refused(void **state)
{
	struct fx *f = *state;
	char fifo[PATH_MAX];
	assert_int_equal(mkfifo(pj(fifo, f, "fifo"), 0600), 0);
	write_config(f, VOL("@/fifo"));
	load_refused(f, -EINVAL, "neither a directory nor a regular file", NULL);
}

static void test_lz_config_load__volume_source_inside_storage_refused(void **state)
{
	struct fx *f = *state;
	char v[PATH_MAX];
	mkdir_mode(f->data, 0755);
	mkdir_mode(f->storage, 0700);
	mkdir_mode(pj(v, f, "data/lazaret/x"), 0700);
	write_config(f, VOL("@/data/lazaret/x"));
	struct lz_err err;
	load_refused(f, -EINVAL, "overlaps", &err);
	assert_msg_contains(&err, "the Storage Root");
}

static void test_lz_config_load__volume_source_contains_storage_refused(void **state)
{
	struct fx *f = *state;
	mkdir_mode(f->data, 0755);
	write_config(f, VOL("@/data"));
	struct lz_err err;
	load_refused(f, -EINVAL, "overlaps", &err);
	assert_msg_contains(&err, "the Storage Root");
}

static void test_lz_config_load__volume_source_inside_runtime_refused(void **state)
{
	struct fx *f = *state;
	char v[PATH_MAX];
	mkdir_mode(f->runtime, 0700);
	mkdir_mode(pj(v, f, "run/lazaret/x"), 0700);
	write_config(f, VOL("@/run/lazaret/x"));
	struct lz_err err;
	load_refused(f, -EINVAL, "overlaps", &err);
	assert_msg_contains(&err, "the Runtime Root");
}

static void test_lz_config_load__volume_source_is_workspace_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, VOL("@/ws"));
	struct lz_err err;
	load_refused(f, -EINVAL, "overlaps", &err);
	assert_msg_contains(&err, "the workspace");
}

static void test_lz_config_load__volume_source_inside_workspace_refused(void **state)
{
	struct fx *f = *state;
	char v[PATH_MAX];
	mkdir_mode(pj(v, f, "ws/sub"), 0755);
	write_config(f, VOL("@/ws/sub"));
	load_refused(f, -EINVAL, "the workspace", NULL);
}

static void test_lz_config_load__volume_source_contains_config_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, VOL("@/cfg"));
	load_refused(f, -EINVAL, "the configuration file", NULL);
}

static void test_lz_config_load__volume_sources_overlapping_refused(void **state)
{
	struct fx *f = *state;
	char v[PATH_MAX];
	mkdir_mode(pj(v, f, "vol"), 0755);
	mkdir_mode(pj(v, f, "vol/sub"), 0755);
	write_config(f, BASE "[[profiles.dev.volumes]]\nsource = \"@/vol\"\ndestination = \"/a\"\n"
			     "[[profiles.dev.volumes]]\nsource = \"@/vol/sub\"\ndestination = \"/b\"\n");
	struct lz_err err;
	load_refused(f, -EINVAL, "overlaps volume source", &err);
}

/* A volume source reached through a symlink is refused, naming where it
 * leads: the link is another's to aim (a sandbox of another Domain may
 * write where a source lies), alone or as a second name of a volume. */
static void test_lz_config_load__volume_source_through_a_symlink_refused(void **state)
{
	struct fx *f = *state;
	char v[PATH_MAX], link[PATH_MAX];
	mkdir_mode(pj(v, f, "vol"), 0755);
	mkdir_mode(pj(link, f, "vol/sub"), 0755);
	assert_int_equal(symlink(v, pj(link, f, "vlink")), 0);
	write_config(f, BASE "[[profiles.dev.volumes]]\nsource = \"@/vol\"\ndestination = \"/a\"\n"
			     "[[profiles.dev.volumes]]\nsource = \"@/vlink\"\ndestination = \"/b\"\n");
	load_refused(f, -EINVAL, "resolves through a symbolic link", NULL);
	write_config(f, BASE "[[profiles.dev.volumes]]\nsource = \"@/vlink/sub\"\ndestination = \"/b\"\n");
	load_refused(f, -EINVAL, "resolves through a symbolic link", NULL);
}

static void test_lz_config_load__profile_dir_volume_created_0700(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE "[[profiles.dev.volumes]]\nprofile_dir = \"cache/a/b\"\n"
			     "destination = \"/root/.cache\"\n");
	mode_t old = umask(0);
	lz_config *cfg = load_ok(f);
	umask(old);
	char p[PATH_MAX];
	assert_owned_dir(pj(p, f, "data/lazaret/profiles/dev/cache"));
	assert_owned_dir(pj(p, f, "data/lazaret/profiles/dev/cache/a"));
	assert_owned_dir(pj(p, f, "data/lazaret/profiles/dev/cache/a/b"));
	lz_config_free(cfg);
}

static void test_lz_config_load__profile_dir_volume_wrong_mode_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE "[[profiles.dev.volumes]]\nprofile_dir = \"cache/pip\"\n"
			     "destination = \"/root/.cache\"\n");
	lz_config_free(load_ok(f)); /* creates the layout */
	char p[PATH_MAX];
	assert_int_equal(chmod(pj(p, f, "data/lazaret/profiles/dev/cache"), 0755), 0);
	struct lz_err err;
	load_refused(f, -EPERM, "0700", &err);
	assert_msg_contains(&err, "/root/.cache");
}

/* A symlink planted inside the profile directory is refused, and nothing
 * is created at its target. */
static void test_lz_config_load__profile_dir_volume_symlink_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE "[[profiles.dev.volumes]]\nprofile_dir = \"cache/pip\"\n"
			     "destination = \"/root/.cache\"\n");
	lz_config_free(load_ok(f));
	char cache[PATH_MAX], elsewhere[PATH_MAX], p[PATH_MAX];
	pj(cache, f, "data/lazaret/profiles/dev/cache");
	lz_test_rmtree(cache);
	mkdir_mode(pj(elsewhere, f, "elsewhere"), 0700);
	assert_int_equal(symlink(elsewhere, cache), 0);
	load_refused(f, -ELOOP, "symlink", NULL);
	assert_false(exists(pj(p, f, "elsewhere/pip")));
}

/* ---- auto-approve executables ------------------------------------------- */

#define EXEC(path) \
	BASE "[[profiles.dev.escalation.auto_approve]]\nexecutable = \"" path "\"\nargs = [\"x\"]\n"

static void make_bin(const struct fx *f)
{
	char b[PATH_MAX];
	mkdir_mode(pj(b, f, "bin"), 0755);
}

static void test_lz_config_load__executable_0755_accepted(void **state)
{
	struct fx *f = *state;
	char tool[PATH_MAX];
	make_bin(f);
	copy_true(pj(tool, f, "bin/tool"), 0755);
	write_config(f, EXEC("@/bin/tool"));
	lz_config *cfg = load_ok(f);
	assert_int_equal(lz_config_selected(cfg)->n_rules, 1);
	lz_config_free(cfg);
}

/* An executable named through a link the sandbox could re-aim (to
 * /bin/sh, say) is refused, though it names a good file now. */
static void test_lz_config_load__executable_through_a_link_in_the_workspace_refused(void **state)
{
	struct fx *f = *state;
	char tool[PATH_MAX], link[PATH_MAX];
	make_bin(f);
	copy_true(pj(tool, f, "bin/tool"), 0755);
	assert_int_equal(symlink(tool, pj(link, f, "ws/tool")), 0);
	write_config(f, EXEC("@/ws/tool"));
	struct lz_err err;
	load_refused(f, -EPERM, "is reached through the symbolic link", &err);
	assert_msg_contains(&err, "inside the workspace");
}

static void test_lz_config_load__executable_group_writable_refused(void **state)
{
	struct fx *f = *state;
	char tool[PATH_MAX];
	make_bin(f);
	copy_true(pj(tool, f, "bin/tool"), 0775);
	write_config(f, EXEC("@/bin/tool"));
	load_refused(f, -EPERM, "group or other write", NULL);
	assert_int_equal(chmod(tool, 0757), 0);
	load_refused(f, -EPERM, "group or other write", NULL);
}

static void test_lz_config_load__executable_hard_link_refused(void **state)
{
	struct fx *f = *state;
	char tool[PATH_MAX], alias[PATH_MAX];
	make_bin(f);
	copy_true(pj(tool, f, "bin/tool"), 0755);
	assert_int_equal(link(tool, pj(alias, f, "bin/alias")), 0);
	write_config(f, EXEC("@/bin/tool"));
	load_refused(f, -EPERM, "hard link", NULL);
}

static void test_lz_config_load__executable_inside_workspace_refused(void **state)
{
	struct fx *f = *state;
	char tool[PATH_MAX];
	copy_true(pj(tool, f, "ws/tool"), 0755);
	write_config(f, EXEC("@/ws/tool"));
	struct lz_err err;
	load_refused(f, -EPERM, "lies inside", &err);
	assert_msg_contains(&err, f->ws);
}

static void test_lz_config_load__executable_inside_storage_refused(void **state)
{
	struct fx *f = *state;
	char tool[PATH_MAX];
	mkdir_mode(f->data, 0755);
	mkdir_mode(f->storage, 0700);
	copy_true(pj(tool, f, "data/lazaret/tool"), 0755);
	write_config(f, EXEC("@/data/lazaret/tool"));
	load_refused(f, -EPERM, "lies inside", NULL);
}

static void test_lz_config_load__executable_inside_volume_refused(void **state)
{
	struct fx *f = *state;
	char tool[PATH_MAX], v[PATH_MAX];
	mkdir_mode(pj(v, f, "vol"), 0755);
	copy_true(pj(tool, f, "vol/tool"), 0755);
	write_config(f, BASE "[[profiles.dev.volumes]]\nsource = \"@/vol\"\ndestination = \"/v\"\n"
			     "[[profiles.dev.escalation.auto_approve]]\nexecutable = \"@/vol/tool\"\n"
			     "args = []\n");
	load_refused(f, -EPERM, "inside volume source", NULL);
}

static void test_lz_config_load__executable_not_executable_refused(void **state)
{
	struct fx *f = *state;
	char tool[PATH_MAX];
	make_bin(f);
	copy_true(pj(tool, f, "bin/tool"), 0644);
	write_config(f, EXEC("@/bin/tool"));
	load_refused(f, -EACCES, "not executable", NULL);
}

static void test_lz_config_load__executable_missing_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, EXEC("@/bin/absent"));
	load_refused(f, -ENOENT, "auto-approve executable", NULL);
}

static void test_lz_config_load__executable_directory_refused(void **state)
{
	struct fx *f = *state;
	make_bin(f);
	write_config(f, EXEC("@/bin"));
	load_refused(f, -EINVAL, "not a regular file", NULL);
}

static void test_lz_config_load__executable_other_owner_refused(void **state)
{
	struct fx *f = *state;
	char tool[PATH_MAX];
	make_bin(f);
	copy_true(pj(tool, f, "bin/tool"), 0755);
	write_config(f, EXEC("@/bin/tool"));
	if (geteuid() != 0)
		skip(); /* needs root to give the file away */
	assert_int_equal(chown(tool, NOBODY, NOBODY), 0);
	load_refused(f, -EPERM, "owned by root or by you", NULL);
}

/* The canonical target, not the symlink, is what is fingerprinted. */
static void test_lz_config_load__executable_symlink_resolved(void **state)
{
	struct fx *f = *state;
	char tool[PATH_MAX], link[PATH_MAX], direct[65], via[65];
	make_bin(f);
	copy_true(pj(tool, f, "bin/tool"), 0755);
	assert_int_equal(symlink(tool, pj(link, f, "bin/link")), 0);
	fingerprint_with(f, EXEC("@/bin/tool"), direct);
	fingerprint_with(f, EXEC("@/bin/link"), via);
	assert_string_equal(direct, via);
}

/* ---- another mount of one tree (spec 3.2: filesystem identities) --------- */

/* Loads in a child of its own mount namespace (and, unless root, a user
 * namespace mapping the caller to itself) after bind-mounting from onto
 * to: the result, and the message in *ret. */
static int load_with_bind(const struct fx *f, const char *from, const char *to, struct lz_err *ret)
{
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (lz_test_unshare_as_self(CLONE_NEWNS) < 0)
			_exit(91);
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount(from, to, NULL, MS_BIND, NULL) < 0)
			_exit(92);
		lz_config *cfg = NULL;
		struct lz_err err = { 0, "" };
		int r = lz_config_load(&f->req, &cfg, &err);
		if (r == 0)
			lz_config_free(cfg);
		if (write(p[1], &r, sizeof(r)) != sizeof(r) || write(p[1], &err, sizeof(err)) != sizeof(err))
			_exit(93);
		_exit(0);
	}
	close(p[1]);
	int r = 1, status;
	assert_int_equal(read(p[0], &r, sizeof(r)), sizeof(r));
	assert_int_equal(read(p[0], ret, sizeof(*ret)), sizeof(*ret));
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(status, 0);
	return r;
}

/* The workspace names the Storage Root itself by another mount. */
static void test_lz_config_load__workspace_bound_onto_storage_root_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE);
	mkdir_mode(f->data, 0755);
	mkdir_mode(f->storage, 0700);
	struct lz_err err;
	assert_int_equal(load_with_bind(f, f->storage, f->ws, &err), -EINVAL);
	assert_msg_contains(&err, "the workspace");
	assert_msg_contains(&err, "the Storage Root");
	assert_msg_contains(&err, "through another mount of the same file system");
}

/* A bind mount of a directory deep inside the Storage Root: ".." from it
 * leads elsewhere, but it lies where the Storage Root does. */
static void test_lz_config_load__workspace_bound_onto_a_storage_subdirectory_refused(void **state)
{
	struct fx *f = *state;
	char inside[PATH_MAX];
	write_config(f, BASE);
	mkdir_mode(f->data, 0755);
	mkdir_mode(f->storage, 0700);
	mkdir_mode(pj(inside, f, "data/lazaret/domains"), 0700);
	struct lz_err err;
	assert_int_equal(load_with_bind(f, inside, f->ws, &err), -EINVAL);
	assert_msg_contains(&err, "the Storage Root");
}

/* A directory of the workspace bound elsewhere shows the workspace's files
 * by another name: an executable there is still the sandbox's to write. */
static void test_lz_config_load__executable_through_an_alias_of_the_workspace_refused(void **state)
{
	struct fx *f = *state;
	char tool[PATH_MAX], bin[PATH_MAX], src[PATH_MAX];
	make_bin(f);
	mkdir_mode(pj(src, f, "ws/tools"), 0755);
	copy_true(pj(tool, f, "ws/tools/tool"), 0755);
	write_config(f, EXEC("@/bin/tool"));
	struct lz_err err;
	assert_int_equal(load_with_bind(f, src, pj(bin, f, "bin"), &err), -EPERM);
	assert_msg_contains(&err, "lies inside the workspace");
	assert_msg_contains(&err, "through another mount");
}

/* A workspace that is itself a bind mount of an unrelated tree loads. */
static void test_lz_config_load__workspace_bound_from_elsewhere_accepted(void **state)
{
	struct fx *f = *state;
	char project[PATH_MAX];
	write_config(f, BASE);
	mkdir_mode(pj(project, f, "project"), 0755);
	struct lz_err err;
	if (load_with_bind(f, project, f->ws, &err) != 0)
		fail_msg("load refused: %s", err.msg);
}

/* ---- host tools (lz_config_host_tool_allowed, lz_config_host_tool) ------- */

/* Loads the configuration and judges the tool at path (opened as the tool
 * search opens it), or, for a bare name, locates and judges it as a launch
 * does (lz_config_host_tool); in a child of its own mount namespace with from bound
 * onto to when from is set (load_with_bind's way). */
static int tool_allowed(const struct fx *f, const char *path, const char *from, const char *to,
			struct lz_err *ret)
{
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (from != NULL && (lz_test_unshare_as_self(CLONE_NEWNS) < 0 ||
				     mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
				     mount(from, to, NULL, MS_BIND, NULL) < 0))
			_exit(92);
		lz_config *cfg = NULL;
		struct lz_err err = { 0, "" };
		struct lz_path tool = LZ_PATH_INIT;
		int r = lz_config_load(&f->req, &cfg, &err);
		if (r == 0 && strchr(path, '/') == NULL)
			r = lz_config_host_tool(cfg, path, "the test tool", "lz-test", &tool, &err);
		else if (r == 0 && (r = lz_path_open(path, &tool, &err)) == 0)
			r = lz_config_host_tool_allowed(cfg, &tool, &err);
		if (r == 0 && tool.fd < 0)
			r = -EBADF; /* a success hands over the checked descriptor */
		lz_path_release(&tool);
		lz_config_free(cfg);
		if (write(p[1], &r, sizeof(r)) != sizeof(r) || write(p[1], &err, sizeof(err)) != sizeof(err))
			_exit(93);
		_exit(0);
	}
	close(p[1]);
	int r = 1, status;
	assert_int_equal(read(p[0], &r, sizeof(r)), sizeof(r));
	assert_int_equal(read(p[0], ret, sizeof(*ret)), sizeof(*ret));
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(status, 0);
	return r;
}

#define VOLUME BASE "[[profiles.dev.volumes]]\nsource = \"@/vol\"\ndestination = \"/v\"\n"

static void test_lz_config_host_tool_allowed__outside_every_tree(void **state)
{
	struct fx *f = *state;
	char tool[PATH_MAX];
	make_bin(f);
	copy_true(pj(tool, f, "bin/runsc"), 0755);
	write_config(f, BASE);
	struct lz_err err;
	if (tool_allowed(f, tool, NULL, NULL, &err) != 0)
		fail_msg("refused: %s", err.msg);
}

/* A runsc or slirp4netns the sandbox can write (a workspace, a volume) or
 * in Lazaret's roots would run as the developer at the next start. */
static void test_lz_config_host_tool_allowed__refuses_the_sandbox_trees(void **state)
{
	struct fx *f = *state;
	char tool[PATH_MAX], v[PATH_MAX];
	struct lz_err err;
	mkdir_mode(pj(v, f, "vol"), 0755);
	write_config(f, VOLUME);
	copy_true(pj(tool, f, "ws/runsc"), 0755);
	assert_int_equal(tool_allowed(f, tool, NULL, NULL, &err), -EPERM);
	assert_msg_contains(&err, "lies inside");
	assert_msg_contains(&err, f->ws);
	copy_true(pj(tool, f, "vol/runsc"), 0755);
	assert_int_equal(tool_allowed(f, tool, NULL, NULL, &err), -EPERM);
	assert_msg_contains(&err, "inside volume source");
	copy_true(pj(tool, f, "data/lazaret/runsc"), 0755); /* the loads above made the root */
	assert_int_equal(tool_allowed(f, tool, NULL, NULL, &err), -EPERM);
	assert_msg_contains(&err, "lies inside");
	assert_msg_contains(&err, f->storage);
}

/* A directory of the workspace bound elsewhere shows its files under
 * another name: a tool found there is still the sandbox's to write. */
static void test_lz_config_host_tool_allowed__refuses_an_alias_of_the_workspace(void **state)
{
	struct fx *f = *state;
	char tool[PATH_MAX], bin[PATH_MAX], src[PATH_MAX];
	make_bin(f);
	mkdir_mode(pj(src, f, "ws/tools"), 0755);
	copy_true(pj(tool, f, "ws/tools/runsc"), 0755);
	write_config(f, BASE);
	struct lz_err err;
	assert_int_equal(tool_allowed(f, pj(tool, f, "bin/runsc"), src, pj(bin, f, "bin"), &err), -EPERM);
	assert_msg_contains(&err, "lies inside the workspace");
	assert_msg_contains(&err, "through another mount");
}

/* The one way a launch and image preparation find their tools: one unsafe
 * where it lies names its package, one the sandbox could write does not
 * (installing the package would not help); a refused one's descriptor is
 * not kept. /usr/local/sbin, searched first, is bound over in a child. */
static void test_lz_config_host_tool__names_the_package_only_where_it_helps(void **state)
{
	struct fx *f = *state;
	char tool[PATH_MAX], src[PATH_MAX], open_dir[PATH_MAX];
	mkdir_mode(pj(src, f, "ws/tools"), 0755);
	copy_true(pj(tool, f, "ws/tools/runsc"), 0755);
	mkdir_mode(pj(open_dir, f, "open"), 0755);
	assert_int_equal(chmod(open_dir, 0775), 0); /* past the umask */
	copy_true(pj(tool, f, "open/runsc"), 0755);
	write_config(f, BASE);
	struct lz_err err;
	if (tool_allowed(f, "runsc", NULL, NULL, &err) != 0) /* the installed one */
		fail_msg("runsc refused: %s", err.msg);
	/* Unprivileged, the child's user namespace shows "/" as nobody's, which
	 * the search refuses before it reaches the bound directory: the root
	 * run of this suite covers the rest. */
	if (geteuid() != 0)
		return;
	assert_int_equal(tool_allowed(f, "runsc", open_dir, "/usr/local/sbin", &err), -EPERM);
	assert_msg_contains(&err, "the test tool (package lz-test): ");
	assert_msg_contains(&err, "may be written by someone other than root or you");
	assert_int_equal(tool_allowed(f, "runsc", src, "/usr/local/sbin", &err), -EPERM);
	assert_msg_contains(&err, "the test tool: ");
	assert_msg_contains(&err, "lies inside the workspace");
	assert_null(strstr(err.msg, "(package"));
}

/* ---- environment references --------------------------------------------- */

#define ENV1 BASE "[profiles.dev.env]\nTOKEN = \"LZ_TEST_TOKEN\"\n"

static void test_lz_config_load__env_resolved(void **state)
{
	struct fx *f = *state;
	write_config(f, ENV1);
	stub_set("LZ_TEST_TOKEN", SECRET);
	lz_config *cfg = load_ok(f);
	const struct lz_config_profile *p = lz_config_selected(cfg);
	assert_int_equal(p->n_env, 1);
	lz_config_free(cfg);
}

static void test_lz_config_load__env_unset_refused(void **state)
{
	struct fx *f = *state;
	write_config(f, ENV1);
	struct lz_err err;
	load_refused(f, -EINVAL, "'LZ_TEST_TOKEN'", &err);
	assert_msg_contains(&err, "not set");
	assert_msg_contains(&err, "TOKEN");
	/* No getenv at all behaves as unset. */
	f->req.getenv = NULL;
	load_refused(f, -EINVAL, "not set", NULL);
}

static void test_lz_config_load__env_invalid_utf8_refused_redacted(void **state)
{
	struct fx *f = *state;
	write_config(f, ENV1);
	static const char *const bad[] = {
		SECRET "\xff",             /* never valid */
		SECRET "\xc0\xaf",         /* overlong '/' */
		SECRET "\xe0\x80\xaf",     /* overlong, three bytes */
		SECRET "\xed\xa0\x80",     /* UTF-16 surrogate */
		SECRET "\xf4\x90\x80\x80", /* above U+10FFFF */
		SECRET "\xe2\x82",         /* truncated */
		SECRET "\x80",             /* lone continuation */
		SECRET "\xf8\x88\x80\x80\x80",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		stub_set("LZ_TEST_TOKEN", bad[i]);
		struct lz_err err;
		load_refused(f, -EINVAL, "not valid UTF-8", &err);
		assert_msg_contains(&err, "LZ_TEST_TOKEN");
		assert_msg_lacks(&err, SECRET);
	}
}

static void test_lz_config_load__env_valid_utf8_accepted(void **state)
{
	struct fx *f = *state;
	write_config(f, ENV1);
	static const char *const good[] = { "", "plain", "caf\xc3\xa9", "\xe2\x82\xac",
					    "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf" };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		stub_set("LZ_TEST_TOKEN", good[i]);
		lz_config_free(load_ok(f));
	}
}

/* A set value never reaches a diagnostic: neither when a later reference
 * fails after it was read, nor when an earlier step fails. */
static void test_lz_config_load__env_value_never_in_diagnostics(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE "[profiles.dev.env]\nA = \"LZ_TEST_A\"\nB = \"LZ_TEST_B\"\n");
	stub_set("LZ_TEST_A", SECRET);
	struct lz_err err;
	load_refused(f, -EINVAL, "LZ_TEST_B", &err);
	assert_msg_lacks(&err, SECRET);

	stub_set("LZ_TEST_B", SECRET "\xff");
	load_refused(f, -EINVAL, "LZ_TEST_B", &err);
	assert_msg_lacks(&err, SECRET);

	/* An earlier step fails with every reference set. */
	stub_set("LZ_TEST_B", SECRET);
	write_config(f, BASE "[profiles.dev.env]\nA = \"LZ_TEST_A\"\nB = \"LZ_TEST_B\"\n"
			     "[[profiles.dev.volumes]]\nsource = \"@/absent\"\ndestination = \"/d\"\n");
	load_refused(f, -ENOENT, "volume source", &err);
	assert_msg_lacks(&err, SECRET);
}

/* Spec 3.2: references are resolved only after path validation, so a path
 * problem is reported even when a reference is also unset. */
static void test_lz_config_load__env_resolved_after_paths(void **state)
{
	struct fx *f = *state;
	write_config(f, BASE "[profiles.dev.env]\nTOKEN = \"LZ_TEST_TOKEN\"\n"
			     "[[profiles.dev.volumes]]\nsource = \"@/absent\"\ndestination = \"/d\"\n");
	load_refused(f, -ENOENT, "volume source", NULL);
	write_config(f, ENV1);
	f->req.workspace = f->run;
	load_refused(f, -EINVAL, "overlaps", NULL);
}

/* ---- fingerprint -------------------------------------------------------- */

static void test_lz_config_load__fingerprint_stable(void **state)
{
	struct fx *f = *state;
	char a[65], b[65];
	copy_example(f);
	fingerprint_of(f, a);
	fingerprint_of(f, b);
	assert_string_equal(a, b);
	assert_true(is_lower_hex(a, 64));
}

static void test_lz_config_load__fingerprint_changes_with_image(void **state)
{
	struct fx *f = *state;
	char a[65], b[65];
	fingerprint_with(f, BASE, a);
	fingerprint_with(f, "version = 1\n[profiles.dev]\nimage = \"docker://debian:trixie\"\n", b);
	assert_string_not_equal(a, b);
}

static void test_lz_config_load__fingerprint_changes_with_allow_list(void **state)
{
	struct fx *f = *state;
	char a[65], b[65], c[65];
	fingerprint_with(f, BASE "[profiles.dev.network]\nallow = [\"192.0.2.0/24\"]\n", a);
	fingerprint_with(f, BASE "[profiles.dev.network]\nallow = [\"192.0.2.0/25\"]\n", b);
	fingerprint_with(f, BASE "[profiles.dev.network]\nallow = []\n", c);
	assert_string_not_equal(a, b);
	assert_string_not_equal(a, c);
	assert_string_not_equal(b, c);
}

static void test_lz_config_load__fingerprint_changes_with_deny_list(void **state)
{
	struct fx *f = *state;
	char a[65], b[65], c[65];
	fingerprint_with(f, BASE "[profiles.dev.network]\ndeny = [\"192.0.2.0/24\"]\n", a);
	fingerprint_with(f, BASE "[profiles.dev.network]\ndeny = [\"192.0.2.0/25\"]\n", b);
	fingerprint_with(f, BASE "[profiles.dev.network]\ndeny = []\n", c);
	assert_string_not_equal(a, b);
	assert_string_not_equal(a, c);
	assert_string_not_equal(b, c);
}

/* The same prefix as allow or as deny are different policies. */
static void test_lz_config_load__fingerprint_separates_allow_and_deny(void **state)
{
	struct fx *f = *state;
	char a[65], b[65];
	fingerprint_with(f, BASE "[profiles.dev.network]\nallow = [\"192.0.2.0/24\"]\n", a);
	fingerprint_with(f, BASE "[profiles.dev.network]\ndeny = [\"192.0.2.0/24\"]\n", b);
	assert_string_not_equal(a, b);
}

static void test_lz_config_load__fingerprint_ignores_prefix_order(void **state)
{
	struct fx *f = *state;
	char a[65], b[65];
	fingerprint_with(f, BASE "[profiles.dev.network]\n"
				 "allow = [\"192.0.2.0/24\", \"203.0.113.0/24\", \"198.18.0.0/15\"]\n"
				 "deny = [\"172.16.0.0/12\", \"10.0.0.0/16\"]\n", a);
	fingerprint_with(f, BASE "[profiles.dev.network]\n"
				 "allow = [\"198.18.0.0/15\", \"203.0.113.0/24\", \"192.0.2.0/24\"]\n"
				 "deny = [\"10.0.0.0/16\", \"172.16.0.0/12\"]\n", b);
	assert_string_equal(a, b);
}

static void test_lz_config_load__fingerprint_changes_with_workspace(void **state)
{
	struct fx *f = *state;
	char a[65], b[65], ws2[PATH_MAX];
	write_config(f, BASE);
	fingerprint_of(f, a);
	mkdir_mode(pj(ws2, f, "ws2"), 0755);
	f->req.workspace = ws2;
	lz_config *cfg = load_ok(f);
	struct lz_config_summary s;
	lz_config_summarize(cfg, &s);
	strcpy(b, s.fingerprint);
	char id[65];
	expected_domain_id("dev", ws2, id);
	assert_string_equal(s.domain_id, id);
	lz_config_free(cfg);
	assert_string_not_equal(a, b);
}

static void test_lz_config_load__fingerprint_ignores_env_value(void **state)
{
	struct fx *f = *state;
	char a[65], b[65];
	write_config(f, ENV1);
	stub_set("LZ_TEST_TOKEN", "first-value");
	fingerprint_of(f, a);
	stub_set("LZ_TEST_TOKEN", "second-value");
	fingerprint_of(f, b);
	assert_string_equal(a, b);
}

static void test_lz_config_load__fingerprint_changes_with_env_reference_name(void **state)
{
	struct fx *f = *state;
	char a[65], b[65], c[65];
	stub_set("LZ_TEST_TOKEN", "v");
	stub_set("LZ_TEST_OTHER", "v");
	fingerprint_with(f, ENV1, a);
	/* Another host variable, same value. */
	fingerprint_with(f, BASE "[profiles.dev.env]\nTOKEN = \"LZ_TEST_OTHER\"\n", b);
	/* Another sandbox name, same host variable. */
	fingerprint_with(f, BASE "[profiles.dev.env]\nTOKEN2 = \"LZ_TEST_TOKEN\"\n", c);
	assert_string_not_equal(a, b);
	assert_string_not_equal(a, c);
	assert_string_not_equal(b, c);
}

static void test_lz_config_load__fingerprint_changes_with_volume(void **state)
{
	struct fx *f = *state;
	char a[65], b[65], c[65], v[PATH_MAX];
	mkdir_mode(pj(v, f, "vol"), 0755);
	mkdir_mode(pj(v, f, "vol2"), 0755);
	fingerprint_with(f, VOL("@/vol"), a);
	fingerprint_with(f, VOL("@/vol2"), b);
	fingerprint_with(f, VOL("@/vol") "read_only = true\n", c);
	assert_string_not_equal(a, b);
	assert_string_not_equal(a, c);
}

static void test_lz_config_load__fingerprint_changes_with_rule_args(void **state)
{
	struct fx *f = *state;
	char a[65], b[65], tool[PATH_MAX];
	make_bin(f);
	copy_true(pj(tool, f, "bin/tool"), 0755);
	fingerprint_with(f, EXEC("@/bin/tool"), a);
	fingerprint_with(f, BASE "[[profiles.dev.escalation.auto_approve]]\n"
				 "executable = \"@/bin/tool\"\nargs = [\"y\"]\n", b);
	assert_string_not_equal(a, b);
}

/* Non-selected profiles are not fingerprint input. */
static void test_lz_config_load__fingerprint_ignores_other_profiles(void **state)
{
	struct fx *f = *state;
	char a[65], b[65];
	fingerprint_with(f, BASE, a);
	fingerprint_with(f, BASE "[profiles.other]\nimage = \"docker://alpine\"\n", b);
	assert_string_equal(a, b);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_lz_config_load__example_profile_summary),
		T(test_lz_config_load__creates_owned_layout_0700),
		T(test_lz_config_load__no_profile_roots_only),
		T(test_lz_config_load__data_root_used),
		T(test_lz_config_load__source_from_xdg_config_home),
		T(test_lz_config_load__source_from_home_fallback),
		T(test_lz_config_load__source_missing_refused),
		T(test_lz_config_load__source_group_writable_refused),
		T(test_lz_config_load__source_decode_error_refused),
		T(test_lz_config_load__missing_profile_refused),
		T(test_lz_config_load__missing_profile_none_defined),
		T(test_lz_config_load__runtime_dir_unset_refused),
		T(test_lz_config_load__storage_root_mode_0755_refused),
		T(test_lz_config_load__runtime_root_mode_0755_refused),
		T(test_lz_config_load__storage_root_other_owner_refused),
		T(test_lz_config_load__storage_root_symlink_refused),
		T(test_lz_config_load__config_inside_storage_root_refused),
		T(test_lz_config_load__storage_overlaps_runtime_refused),
		T(test_lz_config_load__workspace_defaults_to_cwd),
		T(test_lz_config_load__workspace_symlink_resolved),
		T(test_lz_config_load__workspace_missing_refused),
		T(test_lz_config_load__workspace_not_directory_refused),
		T(test_lz_config_load__no_workspace_refused),
		T(test_lz_config_load__workspace_is_storage_parent_refused),
		T(test_lz_config_load__workspace_inside_storage_refused),
		T(test_lz_config_load__workspace_overlaps_runtime_refused),
		T(test_lz_config_load__config_inside_workspace_refused),
		T(test_lz_config_load__config_through_a_link_the_sandbox_can_reaim_refused),
		T(test_lz_config_load__workspace_bound_onto_storage_root_refused),
		T(test_lz_config_load__workspace_bound_onto_a_storage_subdirectory_refused),
		T(test_lz_config_load__executable_through_an_alias_of_the_workspace_refused),
		T(test_lz_config_load__workspace_bound_from_elsewhere_accepted),
		T(test_lz_config_host_tool_allowed__outside_every_tree),
		T(test_lz_config_host_tool_allowed__refuses_the_sandbox_trees),
		T(test_lz_config_host_tool_allowed__refuses_an_alias_of_the_workspace),
		T(test_lz_config_host_tool__names_the_package_only_where_it_helps),
		T(test_lz_config_load__volume_source_ok),
		T(test_lz_config_load__volume_source_missing_refused),
		T(test_lz_config_load__volume_source_special_file_refused),
		T(test_lz_config_load__volume_source_inside_storage_refused),
		T(test_lz_config_load__volume_source_contains_storage_refused),
		T(test_lz_config_load__volume_source_inside_runtime_refused),
		T(test_lz_config_load__volume_source_is_workspace_refused),
		T(test_lz_config_load__volume_source_inside_workspace_refused),
		T(test_lz_config_load__volume_source_contains_config_refused),
		T(test_lz_config_load__volume_sources_overlapping_refused),
		T(test_lz_config_load__volume_source_through_a_symlink_refused),
		T(test_lz_config_load__profile_dir_volume_created_0700),
		T(test_lz_config_load__profile_dir_volume_wrong_mode_refused),
		T(test_lz_config_load__profile_dir_volume_symlink_refused),
		T(test_lz_config_load__executable_0755_accepted),
		T(test_lz_config_load__executable_through_a_link_in_the_workspace_refused),
		T(test_lz_config_load__executable_group_writable_refused),
		T(test_lz_config_load__executable_hard_link_refused),
		T(test_lz_config_load__executable_inside_workspace_refused),
		T(test_lz_config_load__executable_inside_storage_refused),
		T(test_lz_config_load__executable_inside_volume_refused),
		T(test_lz_config_load__executable_not_executable_refused),
		T(test_lz_config_load__executable_missing_refused),
		T(test_lz_config_load__executable_directory_refused),
		T(test_lz_config_load__executable_other_owner_refused),
		T(test_lz_config_load__executable_symlink_resolved),
		T(test_lz_config_load__env_resolved),
		T(test_lz_config_load__env_unset_refused),
		T(test_lz_config_load__env_invalid_utf8_refused_redacted),
		T(test_lz_config_load__env_valid_utf8_accepted),
		T(test_lz_config_load__env_value_never_in_diagnostics),
		T(test_lz_config_load__env_resolved_after_paths),
		T(test_lz_config_load__fingerprint_stable),
		T(test_lz_config_load__fingerprint_changes_with_image),
		T(test_lz_config_load__fingerprint_changes_with_allow_list),
		T(test_lz_config_load__fingerprint_changes_with_deny_list),
		T(test_lz_config_load__fingerprint_separates_allow_and_deny),
		T(test_lz_config_load__fingerprint_ignores_prefix_order),
		T(test_lz_config_load__fingerprint_changes_with_workspace),
		T(test_lz_config_load__fingerprint_ignores_env_value),
		T(test_lz_config_load__fingerprint_changes_with_env_reference_name),
		T(test_lz_config_load__fingerprint_changes_with_volume),
		T(test_lz_config_load__fingerprint_changes_with_rule_args),
		T(test_lz_config_load__fingerprint_ignores_other_profiles),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
