/* Decoding and resolution of the v1 configuration (spec 3.2); see config.h. */
#include "config/config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/imageref.h"
#include "fs/pathauth.h"
#include "net/egressname.h"
#include "net/netpolicy.h"
#include "util/cleanup.h"

struct decoder {
	const char *label;
	struct lz_err *err;
};

__attribute__((format(printf, 3, 4))) static int fail(struct decoder *d, struct lz_toml_pos pos,
						      const char *fmt, ...)
{
	char msg[LZ_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return lz_err_set(d->err, EINVAL, "%s:%u:%u: %s", d->label, pos.line, pos.column, msg);
}

static const char *kind_name(enum lz_toml_kind k)
{
	switch (k) {
	case LZ_TOML_STRING:
		return "a string";
	case LZ_TOML_INTEGER:
		return "an integer";
	case LZ_TOML_BOOL:
		return "a boolean";
	case LZ_TOML_ARRAY:
		return "an array";
	case LZ_TOML_TABLE:
		return "a table";
	}
	return "a value";
}

static int expect(struct decoder *d, const struct lz_toml_entry *e, enum lz_toml_kind kind,
		  const char *where)
{
	if (e->value->kind != kind)
		return fail(d, e->value->pos, "'%s'%s must be %s, not %s", e->key, where,
			    kind_name(kind), kind_name(e->value->kind));
	return 0;
}

static int unknown_key(struct decoder *d, const struct lz_toml_entry *e, const char *where,
		       const char *expected)
{
	return fail(d, e->key_pos, "unknown key '%s' in %s (expected %s)", e->key, where, expected);
}

static int dup_string(struct decoder *d, const struct lz_toml_value *v, char **ret)
{
	if (v->string.len > LZ_CONFIG_STRING_MAX)
		return fail(d, v->pos, "string longer than %d bytes", LZ_CONFIG_STRING_MAX);
	char *s = strdup(v->string.bytes);
	if (s == NULL)
		return lz_err_set(d->err, ENOMEM, "out of memory");
	*ret = s;
	return 0;
}

static int check_list_len(struct decoder *d, const struct lz_toml_value *v, const char *key)
{
	if (v->array.len > LZ_CONFIG_LIST_MAX)
		return fail(d, v->pos, "'%s' has more than %d entries", key, LZ_CONFIG_LIST_MAX);
	return 0;
}

static int grammar_at(struct decoder *d, struct lz_toml_pos pos, const char *what, const char *path)
{
	struct lz_err e;
	if (lz_path_grammar(path, strlen(path), &e) < 0)
		return fail(d, pos, "%s '%s': %s", what, path, e.msg);
	return 0;
}

bool lz_config_profile_name_valid(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > LZ_PROFILE_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			  (i > 0 && (c == '-' || c == '_'));
		if (!ok)
			return false;
	}
	return true;
}

static bool env_name_valid(const char *name)
{
	if (!((name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z') ||
	      name[0] == '_'))
		return false;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		      (*p >= '0' && *p <= '9') || *p == '_'))
			return false;
	return strlen(name) <= 255;
}

/* Product-owned sandbox destinations (bundle construction). transient_child
 * marks an exact transient mount that may sit under a persistent parent. */
static const struct {
	const char *path;
	bool transient_child;
} protected_destinations[] = {
	{ "/workspace", false }, { "/proc", false },        { "/sys", false },
	{ "/dev", false },       { "/run/lazaret", true }, { "/etc/resolv.conf", true },
};
#define PROTECTED_NAMES "/workspace, /proc, /sys, /dev, /run/lazaret or /etc/resolv.conf"

bool lz_config_destination_protected(const char *path, bool as_persistent)
{
	for (size_t i = 0; i < LZ_ARRAY_SIZE(protected_destinations); i++) {
		const char *p = protected_destinations[i].path;
		if (as_persistent && protected_destinations[i].transient_child &&
		    lz_path_is_beneath(path, p))
			continue;
		if (lz_path_overlaps(path, p))
			return true;
	}
	return false;
}

/* oci:PATH[:TAG] | docker-archive:PATH | docker://REF (imageref.h). */
static int check_image(struct decoder *d, struct lz_toml_pos pos, const char *image)
{
	struct lz_image_ref ref;
	struct lz_err e;
	if (lz_image_ref_parse(image, &ref, &e) < 0)
		return fail(d, pos, "%s", e.msg);
	return 0;
}

static int decode_string_list(struct decoder *d, const struct lz_toml_entry *e, char ***ret,
			      size_t *ret_n)
{
	int r;
	if ((r = expect(d, e, LZ_TOML_ARRAY, "")) < 0 || (r = check_list_len(d, e->value, e->key)) < 0)
		return r;
	size_t n = e->value->array.len;
	char **list = calloc(n + 1, sizeof(*list));
	if (list == NULL)
		return lz_err_set(d->err, ENOMEM, "out of memory");
	*ret = list; /* owned by the document even when a later item fails */
	for (size_t i = 0; i < n; i++) {
		const struct lz_toml_value *v = e->value->array.items[i];
		if (v->kind != LZ_TOML_STRING)
			return fail(d, v->pos, "'%s' entries must be strings", e->key);
		if ((r = dup_string(d, v, &list[i])) < 0)
			return r;
		*ret_n = i + 1;
	}
	return 0;
}

static int decode_persistent(struct decoder *d, const struct lz_toml_entry *e,
			     struct lz_config_profile *p)
{
	int r = decode_string_list(d, e, &p->persistent_dirs, &p->n_persistent_dirs);
	if (r < 0)
		return r;
	for (size_t i = 0; i < p->n_persistent_dirs; i++) {
		const char *path = p->persistent_dirs[i];
		struct lz_toml_pos pos = e->value->array.items[i]->pos;
		if ((r = grammar_at(d, pos, "persistent directory", path)) < 0)
			return r;
		if (strcmp(path, "/") == 0 || lz_config_destination_protected(path, true))
			return fail(d, pos, "persistent directory '%s' overlaps a protected sandbox "
					    "path (" PROTECTED_NAMES ")", path);
		for (size_t j = 0; j < i; j++)
			if (lz_path_overlaps(path, p->persistent_dirs[j]))
				return fail(d, pos, "persistent directory '%s' overlaps '%s'", path,
					    p->persistent_dirs[j]);
	}
	return 0;
}

static int decode_env(struct decoder *d, const struct lz_toml_entry *e, struct lz_config_profile *p)
{
	int r;
	if ((r = expect(d, e, LZ_TOML_TABLE, "")) < 0)
		return r;
	size_t n = e->value->table.len;
	if (n > LZ_CONFIG_LIST_MAX)
		return fail(d, e->value->pos, "'env' has more than %d entries", LZ_CONFIG_LIST_MAX);
	if (n == 0)
		return 0;
	p->env = calloc(n, sizeof(*p->env));
	if (p->env == NULL)
		return lz_err_set(d->err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const struct lz_toml_entry *v = &e->value->table.entries[i];
		struct lz_config_env *ref = &p->env[i];
		if (!env_name_valid(v->key))
			return fail(d, v->key_pos, "'%s' is not a valid environment variable name", v->key);
		if ((r = expect(d, v, LZ_TOML_STRING, " in env")) < 0)
			return r;
		if (!env_name_valid(v->value->string.bytes))
			return fail(d, v->value->pos, "env '%s' must name a host environment variable",
				    v->key);
		ref->name = strdup(v->key);
		ref->host_var = strdup(v->value->string.bytes);
		ref->pos = v->value->pos;
		p->n_env = i + 1;
		if (ref->name == NULL || ref->host_var == NULL)
			return lz_err_set(d->err, ENOMEM, "out of memory");
	}
	return 0;
}

/* Relative path beneath the profile directory: components only. */
static int check_subdir(struct decoder *d, struct lz_toml_pos pos, const char *rel)
{
	char abs[LZ_PATH_MAX + 2];
	if ((size_t)snprintf(abs, sizeof(abs), "/%s", rel) >= sizeof(abs) || rel[0] == '/' ||
	    rel[0] == '\0')
		return fail(d, pos, "profile_dir '%s' must be a relative path beneath the profile "
				    "directory", rel);
	return grammar_at(d, pos, "profile_dir", abs);
}

static int decode_volume(struct decoder *d, const struct lz_toml_value *t, struct lz_config_volume *v)
{
	int r;
	v->pos = t->pos;
	if (t->kind != LZ_TOML_TABLE)
		return fail(d, t->pos, "each volume must be a table");
	for (size_t i = 0; i < t->table.len; i++) {
		const struct lz_toml_entry *e = &t->table.entries[i];
		if (strcmp(e->key, "source") == 0 || strcmp(e->key, "profile_dir") == 0 ||
		    strcmp(e->key, "destination") == 0) {
			char **slot = e->key[0] == 's' ? &v->source
				      : e->key[0] == 'p' ? &v->profile_subdir
							 : &v->destination;
			if ((r = expect(d, e, LZ_TOML_STRING, " in a volume")) < 0 ||
			    (r = dup_string(d, e->value, slot)) < 0)
				return r;
		} else if (strcmp(e->key, "read_only") == 0) {
			if ((r = expect(d, e, LZ_TOML_BOOL, " in a volume")) < 0)
				return r;
			v->read_only = e->value->boolean;
		} else {
			return unknown_key(d, e, "a volume", "source, profile_dir, destination, read_only");
		}
	}
	if ((v->source == NULL) == (v->profile_subdir == NULL))
		return fail(d, t->pos, "a volume needs exactly one of 'source' or 'profile_dir'");
	if (v->destination == NULL)
		return fail(d, t->pos, "a volume needs 'destination'");
	if (v->source && (r = grammar_at(d, t->pos, "volume source", v->source)) < 0)
		return r;
	if (v->profile_subdir && (r = check_subdir(d, t->pos, v->profile_subdir)) < 0)
		return r;
	if ((r = grammar_at(d, t->pos, "volume destination", v->destination)) < 0)
		return r;
	if (strcmp(v->destination, "/") == 0 || lz_config_destination_protected(v->destination, false))
		return fail(d, t->pos, "volume destination '%s' overlaps a protected sandbox path "
				       "(" PROTECTED_NAMES ")", v->destination);
	return 0;
}

static int decode_volumes(struct decoder *d, const struct lz_toml_entry *e,
			  struct lz_config_profile *p)
{
	int r;
	if ((r = expect(d, e, LZ_TOML_ARRAY, "")) < 0 || (r = check_list_len(d, e->value, e->key)) < 0)
		return r;
	size_t n = e->value->array.len;
	if (n == 0)
		return 0;
	p->volumes = calloc(n, sizeof(*p->volumes));
	if (p->volumes == NULL)
		return lz_err_set(d->err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		p->n_volumes = i + 1;
		if ((r = decode_volume(d, e->value->array.items[i], &p->volumes[i])) < 0)
			return r;
		for (size_t j = 0; j < i; j++)
			if (lz_path_overlaps(p->volumes[i].destination, p->volumes[j].destination))
				return fail(d, p->volumes[i].pos, "volume destination '%s' overlaps '%s'",
					    p->volumes[i].destination, p->volumes[j].destination);
	}
	return 0;
}

static int decode_prefixes(struct decoder *d, const struct lz_toml_entry *e,
			   struct lz_config_prefix **ret, size_t *ret_n)
{
	int r;
	if ((r = expect(d, e, LZ_TOML_ARRAY, " in network")) < 0 ||
	    (r = check_list_len(d, e->value, e->key)) < 0)
		return r;
	size_t n = e->value->array.len;
	if (n == 0)
		return 0;
	*ret = calloc(n, sizeof(**ret));
	if (*ret == NULL)
		return lz_err_set(d->err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const struct lz_toml_value *v = e->value->array.items[i];
		if (v->kind != LZ_TOML_STRING)
			return fail(d, v->pos, "'%s' entries must be strings like \"10.1.0.0/16\"", e->key);
		if (lz_prefix_parse(v->string.bytes, v->string.len, &(*ret)[i].prefix, NULL) < 0)
			return fail(d, v->pos, "'%s' is not an IPv4 prefix like \"10.1.0.0/16\" "
					       "(decimal octets without leading zeros, /0../32)",
				    v->string.bytes);
		(*ret)[i].pos = v->pos;
		for (size_t j = 0; j < i; j++)
			if (lz_prefix_equal((*ret)[i].prefix, (*ret)[j].prefix))
				return fail(d, v->pos, "duplicate prefix '%s' in '%s'", v->string.bytes,
					    e->key);
		*ret_n = i + 1;
	}
	return 0;
}

/* Spec 3.7: the product topology is not the user's to route. */
static int check_network(struct decoder *d, struct lz_config_profile *p)
{
	char text[LZ_PREFIX_STR_MAX];
	/* Spec 3.7: RFC 1918 is denied by default and only more-specific
	 * allows open it; an equal allow would silently lose to the deny. */
	static const struct lz_prefix rfc1918[] = { { 0x0a000000u, 8 }, { 0xac100000u, 12 },
						    { 0xc0a80000u, 16 } };
	for (size_t i = 0; i < p->n_allow; i++) {
		for (size_t j = 0; j < LZ_ARRAY_SIZE(rfc1918); j++)
			if (lz_prefix_equal(p->allow[i].prefix, rfc1918[j])) {
				lz_prefix_format(p->allow[i].prefix, text);
				return fail(d, p->allow[i].pos,
					    "allow '%s' equals a default deny (RFC 1918); allow a more "
					    "specific prefix", text);
			}
		if (lz_prefix_intersects(p->allow[i].prefix, LZ_TOPOLOGY_NET)) {
			lz_prefix_format(p->allow[i].prefix, text);
			return fail(d, p->allow[i].pos, "allow '%s' intersects the sandbox network "
							"10.137.54.0/23, which Lazaret routes itself", text);
		}
		for (size_t j = 0; j < p->n_deny; j++)
			if (lz_prefix_equal(p->allow[i].prefix, p->deny[j].prefix)) {
				lz_prefix_format(p->allow[i].prefix, text);
				return fail(d, p->deny[j].pos,
					    "'%s' is both allowed and denied; remove one of them", text);
			}
	}
	for (size_t j = 0; j < p->n_deny; j++)
		if (lz_prefix_contains(LZ_TOPOLOGY_NET, p->deny[j].prefix)) {
			lz_prefix_format(p->deny[j].prefix, text);
			return fail(d, p->deny[j].pos, "deny '%s' lies inside the sandbox network "
						       "10.137.54.0/23, which Lazaret routes itself", text);
		}
	return 0;
}

static void free_strv(char **v, size_t n);

static int decode_domains(struct decoder *d, const struct lz_toml_entry *e, char ***ret, size_t *ret_n)
{
	int r = decode_string_list(d, e, ret, ret_n);
	if (r < 0)
		return r;
	if (*ret_n > LZ_NETPOLICY_MAX_NAMES)
		return fail(d, e->value->pos, "'%s' has more than %d names", e->key, LZ_NETPOLICY_MAX_NAMES);
	for (size_t i = 0; i < *ret_n; i++) {
		struct lz_toml_pos pos = e->value->array.items[i]->pos;
		struct lz_err why;
		if (lz_egress_pattern_check((*ret)[i], &why) < 0)
			return fail(d, pos, "'%s' in '%s' is not a host name or '*.' and a domain in lower "
					    "case (%s)", (*ret)[i], e->key, why.msg);
		for (size_t j = 0; j < i; j++)
			if (strcmp((*ret)[i], (*ret)[j]) == 0)
				return fail(d, pos, "duplicate name '%s' in '%s'", (*ret)[i], e->key);
	}
	return 0;
}

static int decode_resolvers(struct decoder *d, const struct lz_toml_entry *e, struct lz_config_profile *p)
{
	char **list = NULL;
	size_t n = 0;
	int r = decode_string_list(d, e, &list, &n);
	if (r >= 0 && n > LZ_NETPOLICY_MAX_RESOLVERS)
		r = fail(d, e->value->pos, "'resolvers' has more than %d addresses", LZ_NETPOLICY_MAX_RESOLVERS);
	if (r >= 0 && n > 0 && (p->resolvers = calloc(n, sizeof(*p->resolvers))) == NULL)
		r = lz_err_set(d->err, ENOMEM, "out of memory");
	for (size_t i = 0; r >= 0 && i < n; i++) {
		struct lz_toml_pos pos = e->value->array.items[i]->pos;
		uint32_t a = 0;
		if (lz_ipv4_parse(list[i], strlen(list[i]), &a) < 0 || !lz_netpolicy_resolver_usable(a))
			r = fail(d, pos, "resolver '%s' is not a unicast IPv4 address like \"192.0.2.53\"",
				 list[i]);
		for (size_t j = 0; r >= 0 && j < i; j++)
			if (p->resolvers[j] == a)
				r = fail(d, pos, "duplicate resolver '%s'", list[i]);
		if (r >= 0)
			p->resolvers[p->n_resolvers++] = a;
	}
	free_strv(list, n);
	return r;
}

/* Egress by name: a deny list or resolvers mean nothing without names to
 * allow, and a name both allowed and denied is a mistake to say aloud. */
static int check_domains(struct decoder *d, const struct lz_toml_entry *e, const struct lz_config_profile *p)
{
	if (p->n_allow_domains == 0 && (p->n_deny_domains > 0 || p->n_resolvers > 0))
		return fail(d, e->value->pos, "'deny_domains' and 'resolvers' need 'allow_domains' (without it "
					      "egress is by address only)");
	for (size_t i = 0; i < p->n_deny_domains; i++)
		for (size_t j = 0; j < p->n_allow_domains; j++)
			if (strcmp(p->deny_domains[i], p->allow_domains[j]) == 0)
				return fail(d, e->value->pos, "'%s' is both in allow_domains and deny_domains",
					    p->deny_domains[i]);
	return 0;
}

static int decode_network(struct decoder *d, const struct lz_toml_entry *e,
			  struct lz_config_profile *p)
{
	int r;
	if ((r = expect(d, e, LZ_TOML_TABLE, "")) < 0)
		return r;
	for (size_t i = 0; i < e->value->table.len; i++) {
		const struct lz_toml_entry *k = &e->value->table.entries[i];
		if (strcmp(k->key, "allow") == 0)
			r = decode_prefixes(d, k, &p->allow, &p->n_allow);
		else if (strcmp(k->key, "deny") == 0)
			r = decode_prefixes(d, k, &p->deny, &p->n_deny);
		else if (strcmp(k->key, "allow_domains") == 0)
			r = decode_domains(d, k, &p->allow_domains, &p->n_allow_domains);
		else if (strcmp(k->key, "deny_domains") == 0)
			r = decode_domains(d, k, &p->deny_domains, &p->n_deny_domains);
		else if (strcmp(k->key, "resolvers") == 0)
			r = decode_resolvers(d, k, p);
		else
			r = unknown_key(d, k, "network", "allow, deny, allow_domains, deny_domains, resolvers");
		if (r < 0)
			return r;
	}
	int r2 = check_domains(d, e, p);
	return r2 < 0 ? r2 : check_network(d, p);
}

static int decode_rule(struct decoder *d, const struct lz_toml_value *t, struct lz_config_rule *rule)
{
	int r;
	bool have_args = false;
	rule->pos = t->pos;
	if (t->kind != LZ_TOML_TABLE)
		return fail(d, t->pos, "each auto_approve rule must be a table");
	for (size_t i = 0; i < t->table.len; i++) {
		const struct lz_toml_entry *e = &t->table.entries[i];
		if (strcmp(e->key, "executable") == 0) {
			if ((r = expect(d, e, LZ_TOML_STRING, " in auto_approve")) < 0 ||
			    (r = dup_string(d, e->value, &rule->executable)) < 0 ||
			    (r = grammar_at(d, e->value->pos, "executable", rule->executable)) < 0)
				return r;
		} else if (strcmp(e->key, "args") == 0) {
			if ((r = decode_string_list(d, e, &rule->args, &rule->n_args)) < 0)
				return r;
			have_args = true;
		} else {
			return unknown_key(d, e, "an auto_approve rule", "executable, args");
		}
	}
	if (rule->executable == NULL)
		return fail(d, t->pos, "an auto_approve rule needs 'executable' (an absolute path)");
	if (!have_args)
		return fail(d, t->pos, "an auto_approve rule needs 'args' (the exact arguments; [] for none)");
	return 0;
}

static int decode_escalation(struct decoder *d, const struct lz_toml_entry *e,
			     struct lz_config_profile *p)
{
	int r;
	if ((r = expect(d, e, LZ_TOML_TABLE, "")) < 0)
		return r;
	for (size_t i = 0; i < e->value->table.len; i++) {
		const struct lz_toml_entry *k = &e->value->table.entries[i];
		if (strcmp(k->key, "auto_approve") != 0)
			return unknown_key(d, k, "escalation", "auto_approve");
		if ((r = expect(d, k, LZ_TOML_ARRAY, "")) < 0 ||
		    (r = check_list_len(d, k->value, k->key)) < 0)
			return r;
		size_t n = k->value->array.len;
		if (n == 0)
			continue;
		p->rules = calloc(n, sizeof(*p->rules));
		if (p->rules == NULL)
			return lz_err_set(d->err, ENOMEM, "out of memory");
		for (size_t j = 0; j < n; j++) {
			p->n_rules = j + 1;
			if ((r = decode_rule(d, k->value->array.items[j], &p->rules[j])) < 0)
				return r;
		}
	}
	return 0;
}

static const char *const default_persistent[] = { "/root", "/usr", "/var", "/etc", "/opt" };

static int decode_profile(struct decoder *d, const struct lz_toml_entry *pe,
			  struct lz_config_profile *p)
{
	int r;
	bool have_persistent = false;
	p->pos = pe->key_pos;
	p->isolate_ignored = true; /* FR-9: isolation unless explicitly disabled */
	p->hide_editor_config = true; /* spec 3.5: editor configuration hidden */
	if (!lz_config_profile_name_valid(pe->key))
		return fail(d, pe->key_pos, "profile name '%s' must match [a-z0-9][a-z0-9_-]{0,63}",
			    pe->key);
	if ((p->name = strdup(pe->key)) == NULL)
		return lz_err_set(d->err, ENOMEM, "out of memory");
	if (pe->value->kind != LZ_TOML_TABLE)
		return fail(d, pe->value->pos, "profile '%s' must be a table", pe->key);

	for (size_t i = 0; i < pe->value->table.len; i++) {
		const struct lz_toml_entry *e = &pe->value->table.entries[i];
		if (strcmp(e->key, "image") == 0) {
			if ((r = expect(d, e, LZ_TOML_STRING, "")) < 0 ||
			    (r = dup_string(d, e->value, &p->image)) < 0 ||
			    (r = check_image(d, e->value->pos, p->image)) < 0)
				return r;
		} else if (strcmp(e->key, "persistent_dirs") == 0) {
			have_persistent = true;
			if ((r = decode_persistent(d, e, p)) < 0)
				return r;
		} else if (strcmp(e->key, "isolate_ignored") == 0) {
			if ((r = expect(d, e, LZ_TOML_BOOL, "")) < 0)
				return r;
			p->isolate_ignored = e->value->boolean;
		} else if (strcmp(e->key, "hide_editor_config") == 0) {
			if ((r = expect(d, e, LZ_TOML_BOOL, "")) < 0)
				return r;
			p->hide_editor_config = e->value->boolean;
		} else if (strcmp(e->key, "env") == 0) {
			r = decode_env(d, e, p);
		} else if (strcmp(e->key, "volumes") == 0) {
			r = decode_volumes(d, e, p);
		} else if (strcmp(e->key, "network") == 0) {
			r = decode_network(d, e, p);
		} else if (strcmp(e->key, "escalation") == 0) {
			r = decode_escalation(d, e, p);
		} else {
			return unknown_key(d, e, "a profile",
					   "image, persistent_dirs, isolate_ignored, hide_editor_config, env, volumes, "
					   "network, escalation");
		}
		if (r < 0)
			return r;
	}
	if (p->image == NULL)
		return fail(d, pe->key_pos, "profile '%s' needs 'image'", p->name);
	if (!have_persistent) {
		size_t n = LZ_ARRAY_SIZE(default_persistent);
		p->persistent_dirs = calloc(n + 1, sizeof(char *));
		if (p->persistent_dirs == NULL)
			return lz_err_set(d->err, ENOMEM, "out of memory");
		for (size_t i = 0; i < n; i++) {
			if ((p->persistent_dirs[i] = strdup(default_persistent[i])) == NULL)
				return lz_err_set(d->err, ENOMEM, "out of memory");
			p->n_persistent_dirs = i + 1;
		}
	}
	return 0;
}

static int decode_document(struct decoder *d, const struct lz_toml_value *root,
			   struct lz_config_doc *doc)
{
	int r;
	const struct lz_toml_entry *version = lz_toml_find(root, "version");
	if (version == NULL)
		return fail(d, (struct lz_toml_pos){ 1, 1 },
			    "missing 'version' (this Lazaret reads version = 1)");
	if ((r = expect(d, version, LZ_TOML_INTEGER, "")) < 0)
		return r;
	if (version->value->integer != LZ_CONFIG_VERSION)
		return fail(d, version->value->pos,
			    "unsupported version %lld (this Lazaret reads version = 1)",
			    (long long)version->value->integer);

	doc->runsc_dcache = LZ_DCACHE_DEFAULT;
	for (size_t i = 0; i < root->table.len; i++) {
		const struct lz_toml_entry *e = &root->table.entries[i];
		if (e == version)
			continue;
		if (strcmp(e->key, "storage") == 0) {
			if ((r = expect(d, e, LZ_TOML_TABLE, "")) < 0)
				return r;
			for (size_t j = 0; j < e->value->table.len; j++) {
				const struct lz_toml_entry *k = &e->value->table.entries[j];
				if (strcmp(k->key, "keep_unused_images") == 0) {
					/* OR-7: the automatic reclamation policy. */
					if ((r = expect(d, k, LZ_TOML_INTEGER, "")) < 0)
						return r;
					if (k->value->integer < 1 || k->value->integer > LZ_KEEP_IMAGES_MAX)
						return fail(d, k->value->pos, "keep_unused_images must be between 1 and %d",
							    LZ_KEEP_IMAGES_MAX);
					doc->keep_unused_images = (uint32_t)k->value->integer;
					continue;
				}
				if (strcmp(k->key, "data_root") != 0)
					return unknown_key(d, k, "[storage]", "data_root, keep_unused_images");
				if ((r = expect(d, k, LZ_TOML_STRING, "")) < 0 ||
				    (r = dup_string(d, k->value, &doc->data_root)) < 0 ||
				    (r = grammar_at(d, k->value->pos, "data_root", doc->data_root)) < 0)
					return r;
			}
		} else if (strcmp(e->key, "runtime") == 0) {
			if ((r = expect(d, e, LZ_TOML_TABLE, "")) < 0)
				return r;
			for (size_t j = 0; j < e->value->table.len; j++) {
				const struct lz_toml_entry *k = &e->value->table.entries[j];
				if (strcmp(k->key, "max_memory_mib") == 0) {
					if ((r = expect(d, k, LZ_TOML_INTEGER, "")) < 0)
						return r;
					if (k->value->integer < LZ_MAX_MEMORY_MIB_MIN ||
					    k->value->integer > LZ_MAX_MEMORY_MIB_MAX)
						return fail(d, k->value->pos, "max_memory_mib must be between %d and %u",
							    LZ_MAX_MEMORY_MIB_MIN, LZ_MAX_MEMORY_MIB_MAX);
					doc->max_memory_mib = (uint32_t)k->value->integer;
					continue;
				}
				if (strcmp(k->key, "runsc_dcache") != 0)
					return unknown_key(d, k, "[runtime]", "runsc_dcache, max_memory_mib");
				if ((r = expect(d, k, LZ_TOML_INTEGER, "")) < 0)
					return r;
				if (k->value->integer < 0 || k->value->integer > LZ_DCACHE_MAX)
					return fail(d, k->value->pos,
						    "runsc_dcache must be between 0 and %d", LZ_DCACHE_MAX);
				doc->runsc_dcache = (uint32_t)k->value->integer;
			}
		} else if (strcmp(e->key, "profiles") == 0) {
			if ((r = expect(d, e, LZ_TOML_TABLE, "")) < 0)
				return r;
			size_t n = e->value->table.len;
			if (n > LZ_CONFIG_LIST_MAX)
				return fail(d, e->value->pos, "more than %d profiles", LZ_CONFIG_LIST_MAX);
			if (n == 0)
				continue;
			doc->profiles = calloc(n, sizeof(*doc->profiles));
			if (doc->profiles == NULL)
				return lz_err_set(d->err, ENOMEM, "out of memory");
			for (size_t j = 0; j < n; j++) {
				doc->n_profiles = j + 1;
				if ((r = decode_profile(d, &e->value->table.entries[j], &doc->profiles[j])) < 0)
					return r;
			}
		} else {
			return unknown_key(d, e, "the top level", "version, storage, runtime, profiles");
		}
	}
	return 0;
}

int lz_config_decode(const char *label, const char *bytes, size_t len,
		     struct lz_config_doc **ret, struct lz_err *err)
{
	struct lz_toml_value *root = NULL;
	struct lz_toml_error terr = { { 0, 0 }, "" };
	struct decoder d = { .label = label, .err = err };

	int r = lz_toml_parse(bytes, len, &root, &terr);
	if (r == -ENOMEM)
		return lz_err_set(err, ENOMEM, "out of memory");
	if (r < 0)
		return lz_err_set(err, EINVAL, "%s:%u:%u: %s", label, terr.pos.line, terr.pos.column,
				  terr.msg);

	struct lz_config_doc *doc = calloc(1, sizeof(*doc));
	if (doc == NULL || (doc->label = strdup(label)) == NULL) {
		free(doc);
		lz_toml_free(root);
		return lz_err_set(err, ENOMEM, "out of memory");
	}
	r = decode_document(&d, root, doc);
	lz_toml_free(root);
	if (r < 0) {
		lz_config_doc_free(doc);
		return r;
	}
	*ret = doc;
	return 0;
}

static void free_strv(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

static void profile_free(struct lz_config_profile *p)
{
	free(p->name);
	free(p->image);
	free_strv(p->persistent_dirs, p->n_persistent_dirs);
	for (size_t i = 0; i < p->n_env; i++) {
		free(p->env[i].name);
		free(p->env[i].host_var);
	}
	free(p->env);
	for (size_t i = 0; i < p->n_volumes; i++) {
		free(p->volumes[i].source);
		free(p->volumes[i].profile_subdir);
		free(p->volumes[i].destination);
	}
	free(p->volumes);
	free(p->allow);
	free(p->deny);
	free_strv(p->allow_domains, p->n_allow_domains);
	free_strv(p->deny_domains, p->n_deny_domains);
	free(p->resolvers);
	for (size_t i = 0; i < p->n_rules; i++) {
		free(p->rules[i].executable);
		free_strv(p->rules[i].args, p->rules[i].n_args);
	}
	free(p->rules);
}

void lz_config_doc_free(struct lz_config_doc *doc)
{
	if (doc == NULL)
		return;
	for (size_t i = 0; i < doc->n_profiles; i++)
		profile_free(&doc->profiles[i]);
	free(doc->profiles);
	free(doc->data_root);
	free(doc->label);
	free(doc);
}

const struct lz_config_profile *lz_config_doc_profile(const struct lz_config_doc *doc,
						      const char *name)
{
	for (size_t i = 0; i < doc->n_profiles; i++)
		if (strcmp(doc->profiles[i].name, name) == 0)
			return &doc->profiles[i];
	return NULL;
}
