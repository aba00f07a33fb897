/* OCI runtime documents for runsc (ocispec.h; SR-5, SR-12, spec 3.7).
 *
 * Two phases: every input is validated first (no allocation, so a refusal
 * names the field and leaks nothing), then the document is built from
 * constants and validated strings. The constants carry the security
 * properties; nothing the caller passes can add a namespace path, a user
 * namespace, an ID mapping, a capability, a hook or a seccomp profile. */
#include "runtime/ocispec.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/pathauth.h"
#include "util/cleanup.h"
#include "util/testfault.h"

#define OCI_VERSION "1.0.2-dev"
#define NOFILE_LIMIT 1048576

/* Docker's default set minus CAP_NET_ADMIN and CAP_NET_RAW (SR-5): the
 * sandbox may not administer or forge traffic on the enforcement network. */
static const char *const capabilities[] = {
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
};

/* Namespaces the sandbox gets privately; the network one is joined by
 * path and added separately. No "user": see ocispec.h. */
static const char *const private_namespaces[] = { "pid", "ipc", "uts", "mount" };

struct default_mount {
	const char *destination;
	const char *type;
	const char *source;
	const char *options[7]; /* NULL-terminated */
};

/* The pseudo-filesystems every container gets, in mount order; runsc
 * supplies its own implementation of each inside the sentry. `runsc spec`
 * writes only /proc, /dev and /sys; /dev/pts and /dev/shm are the usual OCI
 * defaults, which runsc serves. No /dev/mqueue: runsc 2024-07 ignores it
 * ("ignoring unknown filesystem type"), so listing it would promise a
 * mount the sandbox does not get. No maskedPaths/readonlyPaths either, as
 * in `runsc spec`: the sentry's /proc and /sys expose no host state. */
static const struct default_mount default_mounts[] = {
	{ "/proc", "proc", "proc", { NULL } },
	{ "/dev", "tmpfs", "tmpfs", { "nosuid", "strictatime", "mode=755", "size=65536k", NULL } },
	{ "/dev/pts", "devpts", "devpts",
	  { "nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5", NULL } },
	{ "/dev/shm", "tmpfs", "shm", { "nosuid", "noexec", "nodev", "mode=1777", "size=65536k", NULL } },
	{ "/sys", "sysfs", "sysfs", { "nosuid", "noexec", "nodev", "ro", NULL } },
};

/* Destinations a caller mount may not equal (the default mounts), and the
 * trees it may not enter (kernel interfaces the sentry synthesizes). */
static const char *const reserved_exact[] = { "/dev", "/dev/pts", "/dev/shm" };
static const char *const reserved_trees[] = { "/proc", "/sys" };

/* ---- validation (no allocation) ---- */

/* Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above
 * U+10FFFF. jansson would refuse such strings too, but as ENOMEM-like NULL. */
static bool utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned char c = s[i];
		size_t len;
		uint32_t cp, min;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			len = 2, cp = c & 0x1f, min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			len = 3, cp = c & 0x0f, min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			len = 4, cp = c & 0x07, min = 0x10000;
		} else {
			return false;
		}
		if (n - i < len)
			return false;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += len;
	}
	return true;
}

static int check_string(const char *field, const char *s, size_t max, struct lz_err *err)
{
	if (s == NULL)
		return lz_err_set(err, EINVAL, "%s: missing", field);
	size_t n = strnlen(s, max + 1);
	if (n > max)
		return lz_err_set(err, EINVAL, "%s: longer than %zu bytes", field, max);
	if (!utf8_valid((const unsigned char *)s, n))
		return lz_err_set(err, EINVAL, "%s: not valid UTF-8", field);
	return 0;
}

/* Canonical absolute path: "/" or "/a/b" with no empty, "." or ".."
 * component and no trailing slash, so equal paths compare equal. */
static int check_path(const char *field, const char *p, bool allow_root, struct lz_err *err)
{
	int r = check_string(field, p, LZ_OCISPEC_MAX_PATH, err);
	if (r < 0)
		return r;
	if (p[0] != '/')
		return lz_err_set(err, EINVAL, "%s: '%s' is not absolute", field, p);
	if (p[1] == '\0')
		return allow_root ? 0 : lz_err_set(err, EINVAL, "%s: '/' is not allowed", field);
	for (const char *c = p + 1;;) {
		size_t len = strcspn(c, "/");
		if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
			return lz_err_set(err, EINVAL,
					  "%s: '%s' has an empty, '.' or '..' component", field, p);
		if (c[len] == '\0')
			return 0;
		c += len + 1;
	}
}

static bool path_within(const char *p, const char *tree)
{
	size_t n = strlen(tree);
	return strncmp(p, tree, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

bool lz_ocispec_meets_default_mount(const char *path)
{
	for (size_t i = 0; i < LZ_ARRAY_SIZE(default_mounts); i++)
		if (lz_path_overlaps(path, default_mounts[i].destination))
			return true;
	return false;
}

static int check_hostname(const char *h, struct lz_err *err)
{
	size_t n = strnlen(h, 65);
	if (n == 0 || n > 64)
		return lz_err_set(err, EINVAL, "hostname: must be 1 to 64 characters");
	for (size_t i = 0; i < n; i++) {
		char c = h[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			  c == '-' || c == '.';
		if (!ok)
			return lz_err_set(err, EINVAL, "hostname: character %zu is not [A-Za-z0-9.-]", i);
	}
	return 0;
}

static int check_process(const struct lz_oci_process *p, struct lz_err *err)
{
	char field[64];
	int r;
	if (p == NULL)
		return lz_err_set(err, EINVAL, "process: missing");
	if (p->argv == NULL || p->argv[0] == NULL)
		return lz_err_set(err, EINVAL, "process.args: empty");
	if (p->argv[0][0] == '\0')
		return lz_err_set(err, EINVAL, "process.args[0]: empty");
	for (size_t i = 0; p->argv[i] != NULL; i++) {
		if (i >= LZ_OCISPEC_MAX_ARGS)
			return lz_err_set(err, EINVAL, "process.args: more than %d entries",
					  LZ_OCISPEC_MAX_ARGS);
		snprintf(field, sizeof(field), "process.args[%zu]", i);
		if ((r = check_string(field, p->argv[i], LZ_OCISPEC_MAX_STRING, err)) < 0)
			return r;
	}
	for (size_t i = 0; p->env != NULL && p->env[i] != NULL; i++) {
		if (i >= LZ_OCISPEC_MAX_ENV)
			return lz_err_set(err, EINVAL, "process.env: more than %d entries",
					  LZ_OCISPEC_MAX_ENV);
		snprintf(field, sizeof(field), "process.env[%zu]", i);
		if ((r = check_string(field, p->env[i], LZ_OCISPEC_MAX_STRING, err)) < 0)
			return r;
		const char *eq = strchr(p->env[i], '=');
		if (eq == NULL || eq == p->env[i])
			return lz_err_set(err, EINVAL, "%s: not NAME=value", field);
	}
	if (p->cwd != NULL && (r = check_path("process.cwd", p->cwd, true, err)) < 0)
		return r;
	return 0;
}

static int check_mount(const struct lz_oci_mount *mounts, size_t i, struct lz_err *err)
{
	const struct lz_oci_mount *m = &mounts[i];
	char field[64];
	int r;
	snprintf(field, sizeof(field), "mounts[%zu].destination", i);
	if ((r = check_path(field, m->destination, false, err)) < 0)
		return r;
	for (size_t k = 0; k < LZ_ARRAY_SIZE(reserved_exact); k++)
		if (strcmp(m->destination, reserved_exact[k]) == 0)
			return lz_err_set(err, EINVAL, "%s: '%s' is a default mount", field,
					  m->destination);
	for (size_t k = 0; k < LZ_ARRAY_SIZE(reserved_trees); k++)
		if (path_within(m->destination, reserved_trees[k]))
			return lz_err_set(err, EINVAL, "%s: '%s' is within %s", field, m->destination,
					  reserved_trees[k]);
	for (size_t k = 0; k < i; k++)
		if (strcmp(m->destination, mounts[k].destination) == 0)
			return lz_err_set(err, EINVAL, "%s: '%s' repeats mounts[%zu]", field,
					  m->destination, k);
	snprintf(field, sizeof(field), "mounts[%zu].type", i);
	if (m->type == NULL)
		return lz_err_set(err, EINVAL, "%s: missing", field);
	if (strcmp(m->type, "bind") == 0) {
		snprintf(field, sizeof(field), "mounts[%zu].source", i);
		return check_path(field, m->source, false, err);
	}
	if (strcmp(m->type, "tmpfs") == 0) {
		if (m->source != NULL)
			return lz_err_set(err, EINVAL, "mounts[%zu].source: a tmpfs has none", i);
		if (m->read_only)
			return lz_err_set(err, EINVAL, "mounts[%zu].read_only: a tmpfs is writable", i);
		return 0;
	}
	return lz_err_set(err, EINVAL, "%s: not \"bind\" or \"tmpfs\"", field);
}

static int check_spec(const struct lz_ocispec *spec, struct lz_err *err)
{
	int r;
	if (spec == NULL)
		return lz_err_set(err, EINVAL, "spec: missing");
	if ((r = check_path("root.path", spec->root_path, false, err)) < 0)
		return r;
	if (spec->hostname != NULL && (r = check_hostname(spec->hostname, err)) < 0)
		return r;
	if ((r = check_path("netns_path", spec->netns_path, false, err)) < 0)
		return r;
	if ((r = check_process(spec->process, err)) < 0)
		return r;
	if (spec->n_mounts > LZ_OCISPEC_MAX_MOUNTS)
		return lz_err_set(err, EINVAL, "mounts: %zu is more than %d", spec->n_mounts,
				  LZ_OCISPEC_MAX_MOUNTS);
	if (spec->n_mounts > 0 && spec->mounts == NULL)
		return lz_err_set(err, EINVAL, "mounts: missing");
	for (size_t i = 0; i < spec->n_mounts; i++)
		if ((r = check_mount(spec->mounts, i, err)) < 0)
			return r;
	return 0;
}

/* ---- building (inputs already validated; NULL means out of memory) ---- */

/* Sets key to v (or appends v), consuming v in every case: jansson releases
 * v when obj is NULL or the insertion fails, and refuses a NULL v. */
static bool put(json_t *obj, const char *key, json_t *v)
{
	return json_object_set_new(obj, key, v) == 0;
}

static bool append(json_t *arr, json_t *v)
{
	return json_array_append_new(arr, v) == 0;
}

/* A new empty object stored under key: borrowed, owned by obj. */
static json_t *child(json_t *obj, const char *key)
{
	json_t *c = json_object();
	return put(obj, key, c) ? c : NULL;
}

static json_t *str(const char *s)
{
	return json_string_nocheck(s); /* validated as UTF-8 by check_string */
}

static json_t *strv(const char *const *v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a != NULL && (n ? i < n : v != NULL && v[i] != NULL); i++)
		if (!append(a, str(v[i])))
			return json_decref(a), NULL;
	return a;
}

static json_t *capability_sets(void)
{
	json_auto_t *c = json_object();
	static const char *const full[] = { "bounding", "effective", "permitted" };
	static const char *const empty[] = { "inheritable", "ambient" };
	for (size_t i = 0; i < LZ_ARRAY_SIZE(full); i++) {
		json_t *set = strv(capabilities, LZ_ARRAY_SIZE(capabilities));
		/* Test builds only: the sandbox gets network administration,
		 * which the init must report (util/testfault.h). */
		if (set && lz_test_fault("sandbox-netadmin") && json_array_append_new(set, json_string("CAP_NET_ADMIN")) < 0)
			return json_decref(set), NULL;
		if (!put(c, full[i], set))
			return NULL;
	}
	for (size_t i = 0; i < LZ_ARRAY_SIZE(empty); i++)
		if (!put(c, empty[i], json_array()))
			return NULL;
	return TAKE_PTR(c);
}

static json_t *process_object(const struct lz_oci_process *p)
{
	json_auto_t *o = json_object();
	json_t *user;
	bool ok = (user = child(o, "user")) != NULL && put(user, "uid", json_integer(0)) &&
		  put(user, "gid", json_integer(0)) &&
		  put(o, "args", strv((const char *const *)p->argv, 0)) &&
		  put(o, "env", strv((const char *const *)p->env, 0)) &&
		  put(o, "cwd", str(p->cwd ? p->cwd : "/")) &&
		  put(o, "terminal", json_boolean(p->terminal)) &&
		  put(o, "noNewPrivileges", json_true()) && put(o, "capabilities", capability_sets());
	return ok ? TAKE_PTR(o) : NULL;
}

static json_t *mount_object(const char *destination, const char *type, const char *source,
			    const char *const *options, size_t n_options)
{
	json_auto_t *m = json_object();
	bool ok = put(m, "destination", str(destination)) && put(m, "type", str(type)) &&
		  put(m, "source", str(source)) &&
		  (n_options == 0 || put(m, "options", strv(options, n_options)));
	return ok ? TAKE_PTR(m) : NULL;
}

static json_t *mounts_array(const struct lz_ocispec *spec)
{
	static const char *const bind_rw[] = { "rbind", "rw" };
	static const char *const bind_ro[] = { "rbind", "ro" };
	static const char *const tmpfs[] = { "nosuid", "nodev", "mode=755" };
	json_auto_t *a = json_array();
	for (size_t i = 0; i < LZ_ARRAY_SIZE(default_mounts); i++) {
		const struct default_mount *d = &default_mounts[i];
		size_t n = 0;
		while (d->options[n] != NULL)
			n++;
		if (!append(a, mount_object(d->destination, d->type, d->source, d->options, n)))
			return NULL;
	}
	for (size_t i = 0; i < spec->n_mounts; i++) {
		const struct lz_oci_mount *m = &spec->mounts[i];
		json_t *o = strcmp(m->type, "bind") == 0
				    ? mount_object(m->destination, "bind", m->source,
						   m->read_only ? bind_ro : bind_rw, 2)
				    : mount_object(m->destination, "tmpfs", "tmpfs", tmpfs,
						   LZ_ARRAY_SIZE(tmpfs));
		if (!append(a, o))
			return NULL;
	}
	return TAKE_PTR(a);
}

static json_t *namespaces_array(const char *netns_path)
{
	json_auto_t *a = json_array();
	for (size_t i = 0; i < LZ_ARRAY_SIZE(private_namespaces); i++) {
		json_t *ns = json_object();
		if (!append(a, ns) || !put(ns, "type", str(private_namespaces[i])))
			return NULL;
	}
	json_t *net = json_object();
	if (!append(a, net) || !put(net, "type", str("network")) || !put(net, "path", str(netns_path)))
		return NULL;
	return TAKE_PTR(a);
}

static json_t *rlimits_array(void)
{
	json_auto_t *a = json_array();
	json_t *nofile = json_object();
	bool ok = append(a, nofile) && put(nofile, "type", str("RLIMIT_NOFILE")) &&
		  put(nofile, "soft", json_integer(NOFILE_LIMIT)) &&
		  put(nofile, "hard", json_integer(NOFILE_LIMIT));
	return ok ? TAKE_PTR(a) : NULL;
}

/* Serializes doc (NULL: a build step ran out of memory) into *ret_json. */
static int dump(json_t *doc, char **ret_json, struct lz_err *err)
{
	char *text = doc ? json_dumps(doc, JSON_SORT_KEYS | JSON_INDENT(1)) : NULL;
	if (text == NULL)
		return lz_err_set(err, ENOMEM, "build OCI JSON: out of memory");
	*ret_json = text;
	return 0;
}

int lz_ocispec_process_json(const struct lz_oci_process *p, char **ret_json, struct lz_err *err)
{
	int r = check_process(p, err);
	if (r < 0)
		return r;
	json_auto_t *doc = process_object(p);
	return dump(doc, ret_json, err);
}

int lz_ocispec_config_json(const struct lz_ocispec *spec, char **ret_json, struct lz_err *err)
{
	int r = check_spec(spec, err);
	if (r < 0)
		return r;
	json_auto_t *doc = json_object();
	json_t *process = process_object(spec->process);
	json_t *root, *linux_;
	/* Each step hands its new value to doc (or to a child of doc), so a
	 * failure at any point leaves nothing but doc to release. */
	bool ok = put(doc, "process", process) && put(process, "rlimits", rlimits_array()) &&
		  put(doc, "ociVersion", str(OCI_VERSION)) && (root = child(doc, "root")) != NULL &&
		  put(root, "path", str(spec->root_path)) && put(root, "readonly", json_false()) &&
		  (spec->hostname == NULL || put(doc, "hostname", str(spec->hostname))) &&
		  put(doc, "mounts", mounts_array(spec)) && (linux_ = child(doc, "linux")) != NULL &&
		  put(linux_, "namespaces", namespaces_array(spec->netns_path));
	return dump(ok ? doc : NULL, ret_json, err);
}
