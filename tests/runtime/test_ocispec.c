/* OCI documents for runsc (ocispec.h; SR-5, SR-12, spec 3.7): every
 * document is parsed back with jansson and checked field by field, so a
 * namespace path, user namespace, ID mapping, capability, hook or seccomp
 * profile that should not be there is caught, not just a missing one. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "runtime/ocispec.h"

#define NETNS "/proc/4242/ns/net"
#define ROOT "/run/lazaret/gen/7/root"
#define SENTINEL ((char *)0x1)

static const char *const expected_caps[] = {
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
};

static char *const good_argv[] = { "/sbin/lazaret-init", NULL };
static char *const good_env[] = { "PATH=/usr/bin:/bin", "TERM=xterm", NULL };

static const struct lz_oci_mount good_mounts[] = {
	{ .destination = "/workspace", .type = "bind", .source = "/home/u/project" },
	{ .destination = "/opt/tools", .type = "bind", .source = "/usr/local/tools", .read_only = true },
	{ .destination = "/tmp", .type = "tmpfs" },
};

static struct lz_oci_process good_process(void)
{
	return (struct lz_oci_process){ .argv = good_argv, .env = good_env, .cwd = "/workspace" };
}

static json_t *parse(const char *text)
{
	json_error_t jerr;
	json_t *doc = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	if (doc == NULL)
		fail_msg("JSON does not parse: %s (line %d)", jerr.text, jerr.line);
	return doc;
}

static json_t *config_doc(const struct lz_oci_process *p, const struct lz_oci_mount *mounts,
			  size_t n_mounts, const char *hostname)
{
	struct lz_ocispec spec = { .root_path = ROOT, .hostname = hostname, .netns_path = NETNS,
				   .process = p, .mounts = mounts, .n_mounts = n_mounts };
	struct lz_err err = { 0 };
	char *text = NULL;
	int r = lz_ocispec_config_json(&spec, &text, &err);
	if (r < 0)
		fail_msg("config_json: %d %s", r, err.msg);
	json_t *doc = parse(text);
	free(text);
	return doc;
}

/* The object's keys are exactly the NULL-terminated list. */
static void assert_keys(json_t *obj, const char *const *keys)
{
	assert_true(json_is_object(obj));
	size_t n = 0;
	for (; keys[n] != NULL; n++)
		if (json_object_get(obj, keys[n]) == NULL)
			fail_msg("missing key %s", keys[n]);
	assert_int_equal(json_object_size(obj), n);
}

static void assert_strv(json_t *arr, const char *const *want, size_t n)
{
	assert_true(json_is_array(arr));
	assert_int_equal(json_array_size(arr), n);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(json_string_value(json_array_get(arr, i)), want[i]);
}

static void assert_process_common(json_t *p)
{
	json_t *user = json_object_get(p, "user");
	assert_keys(user, (const char *[]){ "uid", "gid", NULL });
	assert_true(json_is_integer(json_object_get(user, "uid")));
	assert_int_equal(json_integer_value(json_object_get(user, "uid")), 0);
	assert_int_equal(json_integer_value(json_object_get(user, "gid")), 0);
	assert_true(json_is_true(json_object_get(p, "noNewPrivileges")));

	json_t *caps = json_object_get(p, "capabilities");
	assert_keys(caps, (const char *[]){ "bounding", "effective", "permitted", "inheritable",
					    "ambient", NULL });
	static const char *const full[] = { "bounding", "effective", "permitted" };
	for (size_t i = 0; i < 3; i++) {
		json_t *set = json_object_get(caps, full[i]);
		assert_strv(set, expected_caps, sizeof(expected_caps) / sizeof(expected_caps[0]));
		size_t k;
		json_t *v;
		json_array_foreach(set, k, v) {
			assert_string_not_equal(json_string_value(v), "CAP_NET_ADMIN");
			assert_string_not_equal(json_string_value(v), "CAP_NET_RAW");
			assert_string_not_equal(json_string_value(v), "CAP_SYS_ADMIN");
		}
	}
	assert_int_equal(json_array_size(json_object_get(caps, "inheritable")), 0);
	assert_int_equal(json_array_size(json_object_get(caps, "ambient")), 0);
	assert_true(json_is_array(json_object_get(caps, "inheritable")));
	assert_true(json_is_array(json_object_get(caps, "ambient")));
}

static void test_lz_ocispec_config_json__top_level(void **state)
{
	(void)state;
	struct lz_oci_process p = good_process();
	json_t *doc = config_doc(&p, good_mounts, 3, "lazaret");
	/* No hooks, annotations, seccomp, domainname or anything else. */
	assert_keys(doc, (const char *[]){ "ociVersion", "process", "root", "hostname", "mounts",
					   "linux", NULL });
	assert_string_equal(json_string_value(json_object_get(doc, "ociVersion")), "1.0.2-dev");
	json_t *root = json_object_get(doc, "root");
	assert_keys(root, (const char *[]){ "path", "readonly", NULL });
	assert_string_equal(json_string_value(json_object_get(root, "path")), ROOT);
	assert_true(json_is_false(json_object_get(root, "readonly")));
	assert_string_equal(json_string_value(json_object_get(doc, "hostname")), "lazaret");
	json_decref(doc);

	doc = config_doc(&p, NULL, 0, NULL);
	assert_null(json_object_get(doc, "hostname"));
	assert_int_equal(json_array_size(json_object_get(doc, "mounts")), 5);
	json_decref(doc);
}

static void test_lz_ocispec_config_json__namespaces_exact(void **state)
{
	(void)state;
	struct lz_oci_process p = good_process();
	json_t *doc = config_doc(&p, good_mounts, 3, "lazaret");
	json_t *linux_ = json_object_get(doc, "linux");
	/* Only namespaces: no uidMappings, gidMappings, seccomp, maskedPaths,
	 * devices, resources, cgroupsPath. */
	assert_keys(linux_, (const char *[]){ "namespaces", NULL });
	json_t *ns = json_object_get(linux_, "namespaces");
	assert_int_equal(json_array_size(ns), 5);
	const char *want[] = { "pid", "ipc", "uts", "mount", "network" };
	bool seen[5] = { false };
	size_t i;
	json_t *v;
	json_array_foreach(ns, i, v) {
		const char *type = json_string_value(json_object_get(v, "type"));
		assert_non_null(type);
		assert_string_not_equal(type, "user");
		assert_string_not_equal(type, "cgroup");
		size_t k = 0;
		while (k < 5 && strcmp(type, want[k]) != 0)
			k++;
		assert_true(k < 5);
		assert_false(seen[k]);
		seen[k] = true;
		if (strcmp(type, "network") == 0) {
			/* The one namespace path: the verified enforcement namespace. */
			assert_keys(v, (const char *[]){ "type", "path", NULL });
			assert_string_equal(json_string_value(json_object_get(v, "path")), NETNS);
		} else {
			assert_keys(v, (const char *[]){ "type", NULL });
		}
	}
	json_decref(doc);
}

static void test_lz_ocispec_config_json__process(void **state)
{
	(void)state;
	struct lz_oci_process p = good_process();
	json_t *doc = config_doc(&p, NULL, 0, "lazaret");
	json_t *proc = json_object_get(doc, "process");
	assert_keys(proc, (const char *[]){ "user", "args", "env", "cwd", "terminal",
					    "noNewPrivileges", "capabilities", "rlimits", NULL });
	assert_process_common(proc);
	assert_strv(json_object_get(proc, "args"), (const char *const *)good_argv, 1);
	assert_strv(json_object_get(proc, "env"), (const char *const *)good_env, 2);
	assert_string_equal(json_string_value(json_object_get(proc, "cwd")), "/workspace");
	assert_true(json_is_false(json_object_get(proc, "terminal")));
	json_t *rl = json_object_get(proc, "rlimits");
	assert_int_equal(json_array_size(rl), 1);
	json_t *nofile = json_array_get(rl, 0);
	assert_keys(nofile, (const char *[]){ "type", "soft", "hard", NULL });
	assert_string_equal(json_string_value(json_object_get(nofile, "type")), "RLIMIT_NOFILE");
	assert_int_equal(json_integer_value(json_object_get(nofile, "soft")), 1048576);
	assert_int_equal(json_integer_value(json_object_get(nofile, "hard")), 1048576);
	json_decref(doc);
}

/* The production build has no fault switch (util/testfault.h): the
 * variable that lazaret-faults reads changes nothing here. */
static void test_lz_ocispec_config_json__fault_switch_absent(void **state)
{
	(void)state;
	assert_int_equal(setenv("LAZARET_TEST_FAULT", "sandbox-netadmin", 1), 0);
	struct lz_oci_process p = good_process();
	json_t *doc = config_doc(&p, NULL, 0, "lazaret");
	assert_int_equal(unsetenv("LAZARET_TEST_FAULT"), 0);
	assert_process_common(json_object_get(doc, "process"));
	json_decref(doc);
}

struct want_mount {
	const char *destination, *type, *source;
	const char *options[7];
};

static void test_lz_ocispec_config_json__mounts_order_and_options(void **state)
{
	(void)state;
	static const struct want_mount want[] = {
		{ "/proc", "proc", "proc", { NULL } },
		{ "/dev", "tmpfs", "tmpfs", { "nosuid", "strictatime", "mode=755", "size=65536k", NULL } },
		{ "/dev/pts", "devpts", "devpts",
		  { "nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5", NULL } },
		{ "/dev/shm", "tmpfs", "shm",
		  { "nosuid", "noexec", "nodev", "mode=1777", "size=65536k", NULL } },
		{ "/sys", "sysfs", "sysfs", { "nosuid", "noexec", "nodev", "ro", NULL } },
		{ "/workspace", "bind", "/home/u/project", { "rbind", "rw", NULL } },
		{ "/opt/tools", "bind", "/usr/local/tools", { "rbind", "ro", NULL } },
		{ "/tmp", "tmpfs", "tmpfs", { "nosuid", "nodev", "mode=755", NULL } },
	};
	struct lz_oci_process p = good_process();
	json_t *doc = config_doc(&p, good_mounts, 3, "lazaret");
	json_t *mounts = json_object_get(doc, "mounts");
	assert_int_equal(json_array_size(mounts), sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		json_t *m = json_array_get(mounts, i);
		size_t n = 0;
		while (want[i].options[n] != NULL)
			n++;
		if (n == 0)
			assert_keys(m, (const char *[]){ "destination", "type", "source", NULL });
		else
			assert_keys(m, (const char *[]){ "destination", "type", "source", "options",
							 NULL });
		assert_string_equal(json_string_value(json_object_get(m, "destination")),
				    want[i].destination);
		assert_string_equal(json_string_value(json_object_get(m, "type")), want[i].type);
		assert_string_equal(json_string_value(json_object_get(m, "source")), want[i].source);
		if (n > 0)
			assert_strv(json_object_get(m, "options"), want[i].options, n);
	}
	json_decref(doc);
}

static void test_lz_ocispec_config_json__deterministic(void **state)
{
	(void)state;
	struct lz_oci_process p = good_process();
	struct lz_ocispec spec = { .root_path = ROOT, .hostname = "h", .netns_path = NETNS,
				   .process = &p, .mounts = good_mounts, .n_mounts = 3 };
	char *a = NULL, *b = NULL;
	assert_int_equal(lz_ocispec_config_json(&spec, &a, NULL), 0);
	assert_int_equal(lz_ocispec_config_json(&spec, &b, NULL), 0);
	assert_string_equal(a, b);
	/* No trace of forbidden features anywhere in the text. */
	const char *absent[] = { "\"user\"", "Mappings", "hooks", "annotations", "seccomp",
				 "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_SYS_ADMIN" };
	for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++) {
		/* "user" is a process key; a user namespace would be {"type": "user"}. */
		if (i == 0)
			assert_null(strstr(a, "\"type\": \"user\""));
		else
			assert_null(strstr(a, absent[i]));
	}
	free(a);
	free(b);
}

/* A refusal is -EINVAL naming the field; *ret_json is untouched. */
static void expect_config_refused(const struct lz_ocispec *spec, const char *field)
{
	struct lz_err err = { 0 };
	char *text = SENTINEL;
	assert_int_equal(lz_ocispec_config_json(spec, &text, &err), -EINVAL);
	assert_ptr_equal(text, SENTINEL);
	assert_int_equal(err.code, EINVAL);
	if (strstr(err.msg, field) == NULL)
		fail_msg("message '%s' does not name '%s'", err.msg, field);
}

static void test_lz_ocispec_config_json__refuses_bad_paths(void **state)
{
	(void)state;
	struct lz_oci_process p = good_process();
	struct {
		const char *root, *netns, *hostname, *field;
	} cases[] = {
		{ NULL, NETNS, NULL, "root.path" },
		{ "", NETNS, NULL, "root.path" },
		{ "relative/root", NETNS, NULL, "root.path" },
		{ "/", NETNS, NULL, "root.path" },
		{ "/run/../etc", NETNS, NULL, "root.path" },
		{ "/run/./root", NETNS, NULL, "root.path" },
		{ "/run//root", NETNS, NULL, "root.path" },
		{ "/run/root/", NETNS, NULL, "root.path" },
		{ ROOT, NULL, NULL, "netns_path" },
		{ ROOT, "", NULL, "netns_path" },
		{ ROOT, "proc/1/ns/net", NULL, "netns_path" },
		{ ROOT, "/proc/1/ns/../ns/net", NULL, "netns_path" },
		{ ROOT, NETNS, "", "hostname" },
		{ ROOT, NETNS, "bad host", "hostname" },
		{ ROOT, NETNS, "a/b", "hostname" },
		{ ROOT, NETNS, "01234567890123456789012345678901234567890123456789012345678901234",
		  "hostname" },
		{ "/run/\xff", NETNS, NULL, "root.path" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		print_message("case %zu\n", i);
		struct lz_ocispec spec = { .root_path = cases[i].root, .netns_path = cases[i].netns,
					   .hostname = cases[i].hostname, .process = &p };
		expect_config_refused(&spec, cases[i].field);
	}
	char *text = SENTINEL;
	assert_int_equal(lz_ocispec_config_json(NULL, &text, NULL), -EINVAL);
	assert_ptr_equal(text, SENTINEL);
	struct lz_ocispec spec = { .root_path = ROOT, .netns_path = NETNS };
	expect_config_refused(&spec, "process");
}

static void test_lz_ocispec_config_json__refuses_bad_mounts(void **state)
{
	(void)state;
	struct lz_oci_process p = good_process();
	struct {
		struct lz_oci_mount m;
		const char *field;
	} cases[] = {
		{ { NULL, "tmpfs", NULL, false }, "mounts[1].destination" },
		{ { "relative", "tmpfs", NULL, false }, "mounts[1].destination" },
		{ { "/", "tmpfs", NULL, false }, "mounts[1].destination" },
		{ { "/a/../proc", "tmpfs", NULL, false }, "mounts[1].destination" },
		{ { "/a/", "tmpfs", NULL, false }, "mounts[1].destination" },
		{ { "/proc", "tmpfs", NULL, false }, "mounts[1].destination" },
		{ { "/proc/sys", "tmpfs", NULL, false }, "mounts[1].destination" },
		{ { "/sys/fs/cgroup", "tmpfs", NULL, false }, "mounts[1].destination" },
		{ { "/dev", "tmpfs", NULL, false }, "mounts[1].destination" },
		{ { "/dev/pts", "tmpfs", NULL, false }, "mounts[1].destination" },
		{ { "/dev/shm", "tmpfs", NULL, false }, "mounts[1].destination" },
		{ { "/sys", "bind", "/host/sys", false }, "mounts[1].destination" },
		{ { "/workspace", "tmpfs", NULL, false }, "mounts[1].destination" }, /* repeat */
		{ { "/x", NULL, NULL, false }, "mounts[1].type" },
		{ { "/x", "overlay", NULL, false }, "mounts[1].type" },
		{ { "/x", "proc", NULL, false }, "mounts[1].type" },
		{ { "/x", "bind", NULL, false }, "mounts[1].source" },
		{ { "/x", "bind", "relative", false }, "mounts[1].source" },
		{ { "/x", "bind", "/", false }, "mounts[1].source" },
		{ { "/x", "bind", "/home/../etc", false }, "mounts[1].source" },
		{ { "/x", "tmpfs", "/src", false }, "mounts[1].source" },
		{ { "/x", "tmpfs", NULL, true }, "mounts[1].read_only" },
		{ { "/\xc0\xaf", "tmpfs", NULL, false }, "mounts[1].destination" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		print_message("case %zu\n", i);
		struct lz_oci_mount mounts[2] = { good_mounts[0], cases[i].m };
		struct lz_ocispec spec = { .root_path = ROOT, .netns_path = NETNS, .process = &p,
					   .mounts = mounts, .n_mounts = 2 };
		expect_config_refused(&spec, cases[i].field);
	}
	/* Missing array, and the count limit. */
	struct lz_ocispec spec = { .root_path = ROOT, .netns_path = NETNS, .process = &p,
				   .mounts = NULL, .n_mounts = 1 };
	expect_config_refused(&spec, "mounts");

	static struct lz_oci_mount many[LZ_OCISPEC_MAX_MOUNTS + 1];
	static char names[LZ_OCISPEC_MAX_MOUNTS + 1][16];
	for (size_t i = 0; i < LZ_OCISPEC_MAX_MOUNTS + 1; i++) {
		snprintf(names[i], sizeof(names[i]), "/m%zu", i);
		many[i] = (struct lz_oci_mount){ .destination = names[i], .type = "tmpfs" };
	}
	spec.mounts = many;
	spec.n_mounts = LZ_OCISPEC_MAX_MOUNTS;
	char *text = NULL;
	assert_int_equal(lz_ocispec_config_json(&spec, &text, NULL), 0);
	json_t *doc = parse(text);
	assert_int_equal(json_array_size(json_object_get(doc, "mounts")), 5 + LZ_OCISPEC_MAX_MOUNTS);
	json_decref(doc);
	free(text);
	spec.n_mounts = LZ_OCISPEC_MAX_MOUNTS + 1;
	expect_config_refused(&spec, "mounts");
}

static void expect_process_refused(const struct lz_oci_process *p, const char *field)
{
	struct lz_err err = { 0 };
	char *text = SENTINEL;
	assert_int_equal(lz_ocispec_process_json(p, &text, &err), -EINVAL);
	assert_ptr_equal(text, SENTINEL);
	if (strstr(err.msg, field) == NULL)
		fail_msg("message '%s' does not name '%s'", err.msg, field);
	/* The same process inside a config is refused the same way. */
	struct lz_ocispec spec = { .root_path = ROOT, .netns_path = NETNS, .process = p };
	expect_config_refused(&spec, field);
}

static void test_lz_ocispec_process_json__refusals(void **state)
{
	(void)state;
	char *const empty_argv[] = { NULL };
	char *const empty_arg0[] = { "", NULL };
	char *const bad_utf8_arg[] = { "sh", "\xed\xa0\x80", NULL }; /* surrogate */
	char *const truncated_utf8[] = { "sh", "ok\xe2\x82", NULL };
	char *const no_eq[] = { "PATH", NULL };
	char *const empty_name[] = { "=x", NULL };
	char *const bad_env[] = { "A=\xf8\x88\x80\x80\x80", NULL };
	struct {
		struct lz_oci_process p;
		const char *field;
	} cases[] = {
		{ { NULL, NULL, NULL, false }, "process.args" },
		{ { empty_argv, NULL, NULL, false }, "process.args" },
		{ { empty_arg0, NULL, NULL, false }, "process.args[0]" },
		{ { bad_utf8_arg, NULL, NULL, false }, "process.args[1]" },
		{ { truncated_utf8, NULL, NULL, false }, "process.args[1]" },
		{ { good_argv, no_eq, NULL, false }, "process.env[0]" },
		{ { good_argv, empty_name, NULL, false }, "process.env[0]" },
		{ { good_argv, bad_env, NULL, false }, "process.env[0]" },
		{ { good_argv, NULL, "relative", false }, "process.cwd" },
		{ { good_argv, NULL, "/a/..", false }, "process.cwd" },
		{ { good_argv, NULL, "", false }, "process.cwd" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		print_message("case %zu\n", i);
		expect_process_refused(&cases[i].p, cases[i].field);
	}
	char *text = SENTINEL;
	assert_int_equal(lz_ocispec_process_json(NULL, &text, NULL), -EINVAL);
	assert_ptr_equal(text, SENTINEL);
}

static void test_lz_ocispec_process_json__limits(void **state)
{
	(void)state;
	/* LZ_OCISPEC_MAX_ARGS entries pass, one more is refused. */
	char **argv = calloc(LZ_OCISPEC_MAX_ARGS + 2, sizeof(char *));
	assert_non_null(argv);
	for (size_t i = 0; i < LZ_OCISPEC_MAX_ARGS + 1; i++)
		argv[i] = "x";
	struct lz_oci_process p = { .argv = argv };
	char *text = NULL;
	argv[LZ_OCISPEC_MAX_ARGS] = NULL;
	assert_int_equal(lz_ocispec_process_json(&p, &text, NULL), 0);
	free(text);
	argv[LZ_OCISPEC_MAX_ARGS] = "x";
	expect_process_refused(&p, "process.args");

	/* Environment entries: the same limit shape. */
	char **env = calloc(LZ_OCISPEC_MAX_ENV + 2, sizeof(char *));
	assert_non_null(env);
	for (size_t i = 0; i < LZ_OCISPEC_MAX_ENV + 1; i++)
		env[i] = "A=1";
	p = (struct lz_oci_process){ .argv = good_argv, .env = env };
	expect_process_refused(&p, "process.env");
	free(env);

	/* One string of MAX_STRING bytes passes, one more byte is refused. */
	char *big = malloc(LZ_OCISPEC_MAX_STRING + 2);
	assert_non_null(big);
	memset(big, 'a', LZ_OCISPEC_MAX_STRING + 1);
	big[LZ_OCISPEC_MAX_STRING] = '\0';
	argv[0] = "sh";
	argv[1] = big;
	argv[2] = NULL;
	p = (struct lz_oci_process){ .argv = argv };
	assert_int_equal(lz_ocispec_process_json(&p, &text, NULL), 0);
	free(text);
	big[LZ_OCISPEC_MAX_STRING] = 'a';
	big[LZ_OCISPEC_MAX_STRING + 1] = '\0';
	expect_process_refused(&p, "process.args[1]");

	/* Paths: LZ_OCISPEC_MAX_PATH bytes pass, one more is refused. */
	char *path = malloc(LZ_OCISPEC_MAX_PATH + 2);
	assert_non_null(path);
	memset(path, 'p', LZ_OCISPEC_MAX_PATH + 1);
	path[0] = '/';
	path[LZ_OCISPEC_MAX_PATH] = '\0';
	p = (struct lz_oci_process){ .argv = good_argv, .cwd = path };
	assert_int_equal(lz_ocispec_process_json(&p, &text, NULL), 0);
	free(text);
	path[LZ_OCISPEC_MAX_PATH] = 'p';
	path[LZ_OCISPEC_MAX_PATH + 1] = '\0';
	expect_process_refused(&p, "process.cwd");
	free(path);
	free(big);
	free(argv);
}

static void test_lz_ocispec_process_json__fields(void **state)
{
	(void)state;
	char *const argv[] = { "/bin/bash", "-l", "caf\xc3\xa9 \xf0\x9f\x90\x8d", NULL };
	struct lz_oci_process p = { .argv = argv, .terminal = true };
	char *text = NULL;
	struct lz_err err = { 0 };
	assert_int_equal(lz_ocispec_process_json(&p, &text, &err), 0);
	json_t *doc = parse(text);
	free(text);
	/* Exactly the process object; runsc exec ignores rlimits, so none. */
	assert_keys(doc, (const char *[]){ "user", "args", "env", "cwd", "terminal",
					   "noNewPrivileges", "capabilities", NULL });
	assert_process_common(doc);
	assert_strv(json_object_get(doc, "args"), (const char *const *)argv, 3);
	assert_int_equal(json_array_size(json_object_get(doc, "env")), 0);
	assert_string_equal(json_string_value(json_object_get(doc, "cwd")), "/");
	assert_true(json_is_true(json_object_get(doc, "terminal")));
	json_decref(doc);
}

/* Out of memory at each jansson allocation in turn: -ENOMEM, *ret_json
 * untouched, nothing leaked (the sanitizer build checks the last part). */
static size_t alloc_budget;
static bool alloc_failed;

static void *failing_malloc(size_t n)
{
	if (alloc_budget == 0) {
		alloc_failed = true;
		return NULL;
	}
	alloc_budget--;
	return malloc(n);
}

static void test_lz_ocispec__out_of_memory(void **state)
{
	(void)state;
	struct lz_oci_process p = good_process();
	struct lz_ocispec spec = { .root_path = ROOT, .hostname = "h", .netns_path = NETNS,
				   .process = &p, .mounts = good_mounts, .n_mounts = 3 };
	json_set_alloc_funcs(failing_malloc, free);
	for (int which = 0; which < 2; which++) {
		size_t budget = 0;
		for (;; budget++) {
			alloc_budget = budget;
			alloc_failed = false;
			char *text = SENTINEL;
			struct lz_err err = { 0 };
			int r = which == 0 ? lz_ocispec_config_json(&spec, &text, &err)
					   : lz_ocispec_process_json(&p, &text, &err);
			if (!alloc_failed) {
				assert_int_equal(r, 0);
				assert_ptr_not_equal(text, SENTINEL);
				free(text);
				break;
			}
			assert_int_equal(r, -ENOMEM);
			assert_int_equal(err.code, ENOMEM);
			assert_ptr_equal(text, SENTINEL);
		}
		assert_true(budget > 10);
	}
	json_set_alloc_funcs(malloc, free);
}

static void test_lz_ocispec_meets_default_mount(void **state)
{
	(void)state;
	static const char *const meets[] = { "/proc", "/proc/x", "/sys/fs", "/dev", "/dev/pts/0", "/dev/shm", "/" };
	static const char *const clear[] = { "/home/u/ws", "/devices", "/process", "/system", "/tmp/dev" };
	for (size_t i = 0; i < sizeof(meets) / sizeof(meets[0]); i++)
		if (!lz_ocispec_meets_default_mount(meets[i]))
			fail_msg("%s should meet a default mount", meets[i]);
	for (size_t i = 0; i < sizeof(clear) / sizeof(clear[0]); i++)
		if (lz_ocispec_meets_default_mount(clear[i]))
			fail_msg("%s should meet none", clear[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_ocispec_config_json__top_level),
		cmocka_unit_test(test_lz_ocispec_config_json__namespaces_exact),
		cmocka_unit_test(test_lz_ocispec_config_json__process),
		cmocka_unit_test(test_lz_ocispec_config_json__fault_switch_absent),
		cmocka_unit_test(test_lz_ocispec_config_json__mounts_order_and_options),
		cmocka_unit_test(test_lz_ocispec_config_json__deterministic),
		cmocka_unit_test(test_lz_ocispec_config_json__refuses_bad_paths),
		cmocka_unit_test(test_lz_ocispec_config_json__refuses_bad_mounts),
		cmocka_unit_test(test_lz_ocispec_process_json__refusals),
		cmocka_unit_test(test_lz_ocispec_process_json__limits),
		cmocka_unit_test(test_lz_ocispec_process_json__fields),
		cmocka_unit_test(test_lz_ocispec__out_of_memory),
		cmocka_unit_test(test_lz_ocispec_meets_default_mount),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
