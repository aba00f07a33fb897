/* Structural decoding of the v1 configuration: every refusal rule of
 * config.c with a fixture that triggers it, and the accepted documents. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lz_test.h"

#include "config/config.h"

static struct lz_config_doc *decode_ok(const char *text)
{
	struct lz_config_doc *doc = NULL;
	struct lz_err err = { 0, "" };
	int r = lz_config_decode("cfg.toml", text, strlen(text), &doc, &err);
	if (r < 0)
		fail_msg("decode failed: %s", err.msg);
	return doc;
}

static void assert_refused(const char *text, const char *expect)
{
	struct lz_config_doc *doc = NULL;
	struct lz_err err = { 0, "" };
	int r = lz_config_decode("cfg.toml", text, strlen(text), &doc, &err);
	if (r != -EINVAL) {
		lz_config_doc_free(doc);
		fail_msg("expected refusal containing '%s', got r=%d", expect, r);
	}
	assert_null(doc);
	if (strstr(err.msg, expect) == NULL)
		fail_msg("message '%s' lacks '%s'", err.msg, expect);
}

#define MIN "version = 1\n[profiles.dev]\nimage = \"oci:/srv/img:latest\"\n"

static void test_decode__minimal_profile_gets_defaults(void **state)
{
	(void)state;
	struct lz_config_doc *doc = decode_ok(MIN);
	assert_int_equal(doc->n_profiles, 1);
	assert_int_equal(doc->runsc_dcache, LZ_DCACHE_DEFAULT);
	assert_int_equal(doc->max_memory_mib, 0); /* half of the host's memory */
	assert_int_equal(doc->keep_unused_images, 0); /* no automatic image gc */
	assert_null(doc->data_root);
	const struct lz_config_profile *p = lz_config_doc_profile(doc, "dev");
	assert_non_null(p);
	assert_string_equal(p->image, "oci:/srv/img:latest");
	assert_true(p->isolate_ignored);
	assert_int_equal(p->n_persistent_dirs, 5);
	const char *want[] = { "/root", "/usr", "/var", "/etc", "/opt" };
	for (size_t i = 0; i < 5; i++)
		assert_string_equal(p->persistent_dirs[i], want[i]);
	assert_null(lz_config_doc_profile(doc, "other"));
	lz_config_doc_free(doc);
}

static void test_decode__full_document(void **state)
{
	(void)state;
	const char *text = "version = 1\n"
			   "[storage]\ndata_root = \"/srv/lazaret\"\nkeep_unused_images = 3\n"
			   "[runtime]\nrunsc_dcache = 0\nmax_memory_mib = 64\n"
			   "[profiles.dev]\nimage = \"docker://debian:12\"\n"
			   "persistent_dirs = []\nisolate_ignored = false\n"
			   "[profiles.dev.env]\nTOKEN = \"HOST_TOKEN\"\n"
			   "[[profiles.dev.volumes]]\nsource = \"/srv/data\"\ndestination = \"/data\"\n"
			   "read_only = true\n"
			   "[[profiles.dev.volumes]]\nprofile_dir = \"cache/pip\"\ndestination = \"/root/.cache/pip\"\n"
			   "[profiles.dev.network]\nallow = [\"10.250.0.7/24\"]\ndeny = [\"198.51.100.0/24\"]\n"
			   "[[profiles.dev.escalation.auto_approve]]\nexecutable = \"/usr/bin/git\"\n"
			   "args = [\"fetch\", \"--all\"]\n"
			   "[profiles.other]\nimage = \"docker-archive:/srv/img.tar\"\n";
	struct lz_config_doc *doc = decode_ok(text);
	assert_string_equal(doc->data_root, "/srv/lazaret");
	assert_int_equal(doc->runsc_dcache, 0);
	assert_int_equal(doc->max_memory_mib, 64);
	assert_int_equal(doc->keep_unused_images, 3);
	assert_int_equal(doc->n_profiles, 2);
	const struct lz_config_profile *p = lz_config_doc_profile(doc, "dev");
	assert_false(p->isolate_ignored);
	assert_int_equal(p->n_persistent_dirs, 0); /* explicit empty list replaces the default */
	assert_int_equal(p->n_env, 1);
	assert_string_equal(p->env[0].name, "TOKEN");
	assert_string_equal(p->env[0].host_var, "HOST_TOKEN");
	assert_int_equal(p->n_volumes, 2);
	assert_true(p->volumes[0].read_only);
	assert_string_equal(p->volumes[1].profile_subdir, "cache/pip");
	assert_false(p->volumes[1].read_only);
	assert_int_equal(p->n_allow, 1);
	assert_int_equal(p->allow[0].prefix.addr, 0x0afa0000u); /* normalized */
	assert_int_equal(p->allow[0].prefix.len, 24);
	assert_int_equal(p->n_rules, 1);
	assert_string_equal(p->rules[0].executable, "/usr/bin/git");
	assert_int_equal(p->rules[0].n_args, 2);
	assert_string_equal(p->rules[0].args[1], "--all");
	lz_config_doc_free(doc);
}

static void test_decode__example_file_is_accepted(void **state)
{
	(void)state;
	FILE *f = fopen(lz_test_source("examples/config.toml"), "r");
	assert_non_null(f);
	char buf[65536];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	struct lz_config_doc *doc = NULL;
	struct lz_err err = { 0, "" };
	if (lz_config_decode("examples/config.toml", buf, n, &doc, &err) < 0)
		fail_msg("%s", err.msg);
	assert_true(doc->n_profiles >= 1);
	lz_config_doc_free(doc);
}

struct refusal {
	const char *text;
	const char *expect;
};

static const struct refusal refusals[] = {
	/* version */
	{ "[profiles.dev]\nimage = \"oci:/a\"\n", "cfg.toml:1:1: missing 'version'" },
	{ "version = 2\n", "cfg.toml:1:11: unsupported version 2" },
	{ "version = 0\n", "unsupported version 0" },
	{ "version = \"1\"\n", "'version' must be an integer" },
	/* syntax errors carry file:line:column from the TOML decoder */
	{ "version = 1\nversion = 1\n", "cfg.toml:2:" },
	{ MIN "image = \"oci:/b\"\n", "duplicate key" },
	{ "version = 1\n\"version\" = 1\n", "cfg.toml:2:" },
	/* unknown keys at every level */
	{ "version = 1\nextra = 1\n", "cfg.toml:2:1: unknown key 'extra' in the top level" },
	{ MIN "imag = \"x\"\n", "cfg.toml:4:1: unknown key 'imag' in a profile" },
	{ "version = 1\n[storage]\nroot = \"/x\"\n", "unknown key 'root' in [storage]" },
	{ "version = 1\n[runtime]\ndcache = 1\n", "unknown key 'dcache' in [runtime]" },
	{ MIN "[profiles.dev.network]\npermit = []\n", "unknown key 'permit' in network" },
	{ MIN "[[profiles.dev.volumes]]\nsource = \"/a\"\ndestination = \"/b\"\nrw = true\n",
	  "unknown key 'rw' in a volume" },
	{ MIN "[[profiles.dev.escalation.auto_approve]]\nexecutable = \"/bin/true\"\nargs = []\nshell = true\n",
	  "unknown key 'shell' in an auto_approve rule" },
	{ MIN "[profiles.dev.escalation]\nprompt = true\n", "unknown key 'prompt' in escalation" },
	/* types and ranges */
	{ "version = 1\n[runtime]\nrunsc_dcache = 262145\n", "between 0 and 262144" },
	{ "version = 1\n[storage]\nkeep_unused_images = 0\n", "between 1 and 1000" },
	{ "version = 1\n[storage]\nkeep_unused_images = 1001\n", "between 1 and 1000" },
	{ "version = 1\n[storage]\nkeep_unused_images = \"3\"\n", "keep_unused_images" },
	{ "version = 1\n[storage]\nkeep_images = 3\n", "expected data_root, keep_unused_images" },
	{ "version = 1\n[runtime]\nrunsc_dcache = -1\n", "between 0 and 262144" },
	{ "version = 1\n[runtime]\nmax_memory_mib = 63\n", "max_memory_mib must be between 64 and 16777216" },
	{ "version = 1\n[runtime]\nmax_memory_mib = 16777217\n", "between 64 and 16777216" },
	{ "version = 1\n[runtime]\nmax_memory_mib = 0\n", "between 64 and 16777216" },
	{ "version = 1\n[runtime]\nmax_memory_mib = \"1G\"\n", "max_memory_mib" },
	{ "version = 1\n[runtime]\nmemory = 1\n", "expected runsc_dcache, max_memory_mib" },
	{ "version = 1\nstorage = 1\n", "'storage' must be a table" },
	{ MIN "isolate_ignored = \"no\"\n", "'isolate_ignored' must be a boolean" },
	{ MIN "persistent_dirs = [1]\n", "entries must be strings" },
	{ "version = 1\n[storage]\ndata_root = \"rel/dir\"\n", "path must be absolute" },
	{ "version = 1\n[storage]\ndata_root = \"/a/../b\"\n", "'.' or '..' component" },
	{ "version = 1\n[storage]\ndata_root = \"/a//b\"\n", "empty component" },
	{ "version = 1\n[storage]\ndata_root = \"/a/\"\n", "must not end with '/'" },
	/* profiles */
	{ "version = 1\n[profiles.Dev]\nimage = \"oci:/a\"\n", "profile name 'Dev'" },
	{ "version = 1\n[profiles.dev]\nisolate_ignored = true\n", "needs 'image'" },
	{ "version = 1\n[profiles.dev]\nimage = \"/srv/img\"\n", "expected oci:PATH" },
	{ "version = 1\n[profiles.dev]\nimage = \"oci:relative\"\n", "path must be absolute" },
	{ "version = 1\n[profiles.dev]\nimage = \"oci:/a:bad tag\"\n", "invalid tag" },
	{ "version = 1\n[profiles.dev]\nimage = \"docker://\"\n", "needs a reference" },
	{ "version = 1\n[profiles.dev]\nimage = \"docker://a b\"\n", "whitespace" },
	/* persistent directories and the closed sandbox layout */
	{ MIN "persistent_dirs = [\"/workspace/x\"]\n", "overlaps a protected sandbox path" },
	{ MIN "persistent_dirs = [\"/\"]\n", "overlaps a protected sandbox path" },
	{ MIN "persistent_dirs = [\"/dev\"]\n", "overlaps a protected sandbox path" },
	{ MIN "persistent_dirs = [\"/run/lazaret/x\"]\n", "overlaps a protected sandbox path" },
	/* The resolver configuration is the product's bind mount (spec 3.7). */
	{ MIN "persistent_dirs = [\"/etc/resolv.conf\"]\n", "overlaps a protected sandbox path" },
	{ MIN "[[profiles.dev.volumes]]\nsource = \"/srv/r\"\ndestination = \"/etc/resolv.conf\"\n",
	  "overlaps a protected sandbox path" },
	{ MIN "[[profiles.dev.volumes]]\nsource = \"/srv/e\"\ndestination = \"/etc\"\n",
	  "overlaps a protected sandbox path" },
	{ MIN "persistent_dirs = [\"/usr\", \"/usr/local\"]\n", "'/usr/local' overlaps '/usr'" },
	{ MIN "persistent_dirs = [\"/usr\", \"/usr\"]\n", "overlaps" },
	{ MIN "persistent_dirs = [\"usr\"]\n", "path must be absolute" },
	/* env references */
	{ MIN "[profiles.dev.env]\nTOKEN = 1\n", "must be a string" },
	{ MIN "[profiles.dev.env]\nTOKEN = \"HOST-VAR\"\n", "must name a host environment variable" },
	{ MIN "[profiles.dev.env]\n9TOKEN = \"HOST\"\n", "not a valid environment variable name" },
	{ MIN "env = [\"TOKEN\"]\n", "'env' must be a table" },
	/* volumes */
	{ MIN "[[profiles.dev.volumes]]\ndestination = \"/b\"\n", "exactly one of 'source' or 'profile_dir'" },
	{ MIN "[[profiles.dev.volumes]]\nsource = \"/a\"\nprofile_dir = \"x\"\ndestination = \"/b\"\n",
	  "exactly one of 'source' or 'profile_dir'" },
	{ MIN "[[profiles.dev.volumes]]\nsource = \"/a\"\n", "needs 'destination'" },
	{ MIN "[[profiles.dev.volumes]]\nsource = \"/a\"\ndestination = \"/workspace\"\n",
	  "overlaps a protected sandbox path" },
	{ MIN "[[profiles.dev.volumes]]\nsource = \"/a\"\ndestination = \"/workspace/sub\"\n",
	  "overlaps a protected sandbox path" },
	{ MIN "[[profiles.dev.volumes]]\nsource = \"/a\"\ndestination = \"/run\"\n",
	  "overlaps a protected sandbox path" },
	{ MIN "[[profiles.dev.volumes]]\nsource = \"/a\"\ndestination = \"/\"\n",
	  "overlaps a protected sandbox path" },
	{ MIN "[[profiles.dev.volumes]]\nsource = \"/a\"\ndestination = \"/d\"\n"
	      "[[profiles.dev.volumes]]\nsource = \"/b\"\ndestination = \"/d/e\"\n",
	  "'/d/e' overlaps '/d'" },
	{ MIN "[[profiles.dev.volumes]]\nprofile_dir = \"../escape\"\ndestination = \"/d\"\n",
	  "'..'" },
	{ MIN "[[profiles.dev.volumes]]\nprofile_dir = \"/abs\"\ndestination = \"/d\"\n",
	  "must be a relative path" },
	{ MIN "[[profiles.dev.volumes]]\nsource = \"/a\"\ndestination = \"/d\"\nread_only = 1\n",
	  "'read_only' in a volume must be a boolean" },
	/* network prefixes */
	{ MIN "[profiles.dev.network]\nallow = [\"10.0.0.0\"]\n", "is not an IPv4 prefix" },
	{ MIN "[profiles.dev.network]\nallow = [\"010.0.0.0/8\"]\n", "is not an IPv4 prefix" },
	{ MIN "[profiles.dev.network]\nallow = [\"10.0.0.0/33\"]\n", "is not an IPv4 prefix" },
	{ MIN "[profiles.dev.network]\nallow = [\"0x0a.0.0.0/8\"]\n", "is not an IPv4 prefix" },
	{ MIN "[profiles.dev.network]\nallow = [\"10.137.55.0/24\"]\n",
	  "intersects the sandbox network" },
	{ MIN "[profiles.dev.network]\nallow = [\"10.0.0.0/8\"]\n", "equals a default deny" },
	{ MIN "[profiles.dev.network]\nallow = [\"172.16.0.0/12\"]\n", "equals a default deny" },
	{ MIN "[profiles.dev.network]\nallow = [\"192.168.0.0/16\"]\n", "equals a default deny" },
	{ MIN "[profiles.dev.network]\nallow = [\"10.0.0.0/7\"]\n", "intersects the sandbox network" },
	{ MIN "[profiles.dev.network]\ndeny = [\"10.137.54.0/23\"]\n", "inside the sandbox network" },
	{ MIN "[profiles.dev.network]\ndeny = [\"10.137.54.128/25\"]\n", "inside the sandbox network" },
	{ MIN "[profiles.dev.network]\nallow = [\"10.250.0.0/24\"]\ndeny = [\"10.250.0.9/24\"]\n",
	  "both allowed and denied" },
	{ MIN "[profiles.dev.network]\ndeny = [\"1.2.3.0/24\", \"1.2.3.4/24\"]\n", "duplicate prefix" },
	/* egress by name */
	{ MIN "[profiles.dev.network]\nallow_domains = [\"*.com\"]\n", "is not a host name" },
	{ MIN "[profiles.dev.network]\nallow_domains = [\"A.example\"]\n", "is not a host name" },
	{ MIN "[profiles.dev.network]\nallow_domains = [\"1.2.3.4\"]\n", "is not a host name" },
	{ MIN "[profiles.dev.network]\nallow_domains = [\"a.example\", \"a.example\"]\n", "duplicate name" },
	{ MIN "[profiles.dev.network]\nallow_domains = [1]\n", "entries must be strings" },
	{ MIN "[profiles.dev.network]\ndeny_domains = [\"a.example\"]\n", "need 'allow_domains'" },
	{ MIN "[profiles.dev.network]\nresolvers = [\"192.0.2.53\"]\n", "need 'allow_domains'" },
	{ MIN "[profiles.dev.network]\nallow_domains = [\"a.example\"]\ndeny_domains = [\"a.example\"]\n",
	  "both in allow_domains and deny_domains" },
	{ MIN "[profiles.dev.network]\nallow_domains = [\"a.example\"]\nresolvers = [\"224.0.0.1\"]\n",
	  "is not a unicast IPv4 address" },
	{ MIN "[profiles.dev.network]\nallow_domains = [\"a.example\"]\nresolvers = [\"192.0.2.053\"]\n",
	  "is not a unicast IPv4 address" },
	{ MIN "[profiles.dev.network]\nallow_domains = [\"a.example\"]\nresolvers = [\"1.1.1.1\", \"1.1.1.1\"]\n",
	  "duplicate resolver" },
	/* auto-approval rules */
	{ MIN "[[profiles.dev.escalation.auto_approve]]\nargs = []\n", "needs 'executable'" },
	{ MIN "[[profiles.dev.escalation.auto_approve]]\nexecutable = \"/bin/true\"\n", "needs 'args'" },
	{ MIN "[[profiles.dev.escalation.auto_approve]]\nexecutable = \"git\"\nargs = []\n",
	  "path must be absolute" },
	{ MIN "[[profiles.dev.escalation.auto_approve]]\nexecutable = \"/bin/true\"\nargs = \"x\"\n",
	  "'args' must be an array" },
};

static void test_decode__refusals(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
		print_message("refusal %zu: %s\n", i, refusals[i].expect);
		assert_refused(refusals[i].text, refusals[i].expect);
	}
}

static void test_decode__egress_by_name(void **state)
{
	(void)state;
	struct lz_config_doc *doc = decode_ok(MIN "[profiles.dev.network]\n"
						  "allow_domains = [\"registry.npmjs.org\", \"*.example.com\"]\n"
						  "deny_domains = [\"bad.example.com\"]\n"
						  "resolvers = [\"192.0.2.53\", \"127.0.0.53\"]\n");
	const struct lz_config_profile *p = lz_config_doc_profile(doc, "dev");
	assert_int_equal(p->n_allow_domains, 2);
	assert_string_equal(p->allow_domains[1], "*.example.com");
	assert_int_equal(p->n_deny_domains, 1);
	assert_int_equal(p->n_resolvers, 2);
	assert_int_equal(p->resolvers[0], 0xc0000235u);
	assert_int_equal(p->resolvers[1], 0x7f000035u);
	lz_config_doc_free(doc);
}

static void test_decode__deny_containing_topology_is_accepted(void **state)
{
	(void)state;
	/* A deny wider than the /23 is the default RFC 1918 shape; the
	 * connectivity-helper routes take precedence (spec 3.7). */
	struct lz_config_doc *doc = decode_ok(MIN "[profiles.dev.network]\ndeny = [\"10.0.0.0/8\"]\n");
	lz_config_doc_free(doc);
}

static void test_decode__list_limit(void **state)
{
	(void)state;
	size_t cap = 64 + 12 * (LZ_CONFIG_LIST_MAX + 1);
	char *text = malloc(cap);
	size_t n = (size_t)snprintf(text, cap, MIN "persistent_dirs = [");
	for (int i = 0; i <= LZ_CONFIG_LIST_MAX; i++)
		n += (size_t)snprintf(text + n, cap - n, "\"/p%d\",", i);
	snprintf(text + n, cap - n, "]\n");
	assert_refused(text, "more than 256 entries");
	free(text);
}

static void test_decode__every_profile_is_checked(void **state)
{
	(void)state;
	/* A broken non-selected profile still refuses the document. */
	assert_refused(MIN "[profiles.other]\nimage = \"oci:/x\"\nbogus = 1\n", "unknown key 'bogus'");
}

static void test_destination_protected(void **state)
{
	(void)state;
	assert_true(lz_config_destination_protected("/workspace", false));
	assert_true(lz_config_destination_protected("/run", false));
	assert_false(lz_config_destination_protected("/run", true)); /* transient child allowed */
	assert_true(lz_config_destination_protected("/run/lazaret/x", true));
	assert_false(lz_config_destination_protected("/etc", true)); /* resolv.conf: transient child */
	assert_true(lz_config_destination_protected("/etc", false));
	assert_true(lz_config_destination_protected("/etc/resolv.conf", true));
	assert_false(lz_config_destination_protected("/workspaces", false));
	assert_false(lz_config_destination_protected("/data", false));
}

static void test_profile_name_valid(void **state)
{
	(void)state;
	assert_true(lz_config_profile_name_valid("dev"));
	assert_true(lz_config_profile_name_valid("a-b_9"));
	assert_false(lz_config_profile_name_valid(""));
	assert_false(lz_config_profile_name_valid("-dev"));
	assert_false(lz_config_profile_name_valid("Dev"));
	assert_false(lz_config_profile_name_valid("a/b"));
	assert_false(lz_config_profile_name_valid(
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode__minimal_profile_gets_defaults),
		cmocka_unit_test(test_decode__full_document),
		cmocka_unit_test(test_decode__example_file_is_accepted),
		cmocka_unit_test(test_decode__refusals),
		cmocka_unit_test(test_decode__deny_containing_topology_is_accepted),
		cmocka_unit_test(test_decode__egress_by_name),
		cmocka_unit_test(test_decode__list_limit),
		cmocka_unit_test(test_decode__every_profile_is_checked),
		cmocka_unit_test(test_destination_protected),
		cmocka_unit_test(test_profile_name_valid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
