/* Trusted host configuration, closed v1 document (spec 3.2).
 *
 * Two stages. lz_config_decode turns bytes into a document: every profile is
 * decoded structurally (keys, types, ranges, path grammar, prefixes, rule
 * shapes); every refusal names file:line:column. lz_config_load then reads
 * the source safely (cfgsource.h), decodes it, and resolves only the
 * selected profile: roots, workspace, volumes and executables become
 * retained descriptors (pathauth.h), overlap rules are checked, environment
 * references are resolved last, and the Domain ID and Configuration
 * Fingerprint are computed. A resolved lz_config is the single value later
 * decisions use; its environment values never appear in diagnostics, and
 * only their names enter the fingerprint.
 *
 * docs/configuration.md documents every field. */
#ifndef LZ_CONFIG_H
#define LZ_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/cfgsource.h"
#include "config/domain.h"
#include "net/netprefix.h"
#include "fs/pathauth.h"
#include "config/toml.h"
#include "util/err.h"

#define LZ_CONFIG_VERSION 1
#define LZ_DCACHE_DEFAULT 50000
#define LZ_DCACHE_MAX 262144
#define LZ_MAX_MEMORY_MIB_MIN 64
#define LZ_MAX_MEMORY_MIB_MAX (1u << 24) /* 16 TiB */
#define LZ_PROFILE_NAME_MAX 64
#define LZ_CONFIG_LIST_MAX 256  /* items in any list, profiles in a file */
#define LZ_CONFIG_STRING_MAX 4096

struct lz_config_volume {
	char *source;         /* absolute host path, or NULL */
	char *profile_subdir; /* relative path beneath the profile directory, or NULL */
	char *destination;    /* absolute sandbox path */
	bool read_only;
	struct lz_toml_pos pos;
};

struct lz_config_env {
	char *name;     /* variable name inside the sandbox */
	char *host_var; /* host variable it is read from */
	struct lz_toml_pos pos;
};

struct lz_config_prefix {
	struct lz_prefix prefix;
	struct lz_toml_pos pos;
};

struct lz_config_rule {
	char *executable; /* absolute path as written */
	char **args;      /* argv[1..], exact */
	size_t n_args;
	struct lz_toml_pos pos;
};

struct lz_config_profile {
	char *name;
	struct lz_toml_pos pos;
	char *image;
	char **persistent_dirs;
	size_t n_persistent_dirs;
	bool isolate_ignored;
	/* Editor configuration in the workspace (.vscode, .idea, ...): tracked
	 * files read-only, the rest sandbox-local (router only). */
	bool hide_editor_config;
	struct lz_config_env *env;
	size_t n_env;
	struct lz_config_volume *volumes;
	size_t n_volumes;
	struct lz_config_prefix *allow, *deny;
	size_t n_allow, n_deny;
	/* Egress by name (network.allow_domains, deny_domains, resolvers):
	 * patterns as written (egressname.h), resolvers in host byte order. */
	char **allow_domains, **deny_domains;
	size_t n_allow_domains, n_deny_domains;
	uint32_t *resolvers;
	size_t n_resolvers;
	struct lz_config_rule *rules;
	size_t n_rules;
};

#define LZ_KEEP_IMAGES_MAX 1000

struct lz_config_doc {
	char *label; /* source path, for diagnostics */
	char *data_root;
	uint32_t keep_unused_images; /* 0: no automatic reclamation (OR-7) */
	uint32_t runsc_dcache;
	uint32_t max_memory_mib; /* 0: half of the host's memory (runtime/memwatch.h) */
	struct lz_config_profile *profiles;
	size_t n_profiles;
};

int lz_config_decode(const char *label, const char *bytes, size_t len,
		     struct lz_config_doc **ret, struct lz_err *err);
void lz_config_doc_free(struct lz_config_doc *doc);
const struct lz_config_profile *lz_config_doc_profile(const struct lz_config_doc *doc,
						      const char *name);

/* Sandbox destinations the bundle owns (spec 3.2 "closed sandbox layout").
 * A volume or persistent directory may not overlap them; transient children
 * may sit below a persistent parent. */
bool lz_config_destination_protected(const char *path, bool as_persistent);

/* Profile names: [a-z0-9][a-z0-9_-]{0,63}; "state" is reserved for the CLI
 * but may still be launched with the explicit `run --profile` form. */
bool lz_config_profile_name_valid(const char *name);

struct lz_config_request {
	const char *config_path; /* --config, or NULL for the XDG rules */
	const char *profile;     /* NULL: structural check and roots only */
	const char *workspace;   /* NULL: cwd */
	const char *cwd;
	struct lz_host_env env;
	const char *(*getenv)(const char *name); /* profile env references */
};

typedef struct lz_config lz_config;

int lz_config_load(const struct lz_config_request *req, lz_config **ret, struct lz_err *err);
void lz_config_free(lz_config *cfg);

/* Printable facts; never contains environment values. Strings are owned by
 * cfg. profile, workspace, domain_id and fingerprint are NULL without a
 * selected profile. */
struct lz_config_summary {
	const char *source;
	const char *storage_root;
	const char *runtime_root;
	const char *profile;
	const char *workspace;
	const char *domain_id;
	const char *fingerprint;
	uint32_t runsc_dcache;
	uint32_t max_memory_mib; /* 0: half of the host's memory */
	uint32_t keep_unused_images; /* 0: no automatic image reclamation */
	size_t n_profiles;
};
void lz_config_summarize(const lz_config *cfg, struct lz_config_summary *ret);

/* Retained handles of a resolved configuration (owned by cfg). The
 * workspace and Domain handles, volume sources and environment values exist
 * only with a selected profile (NULL otherwise). */
const struct lz_path *lz_config_storage_root(const lz_config *cfg);
const struct lz_path *lz_config_workspace(const lz_config *cfg);
const struct lz_path *lz_config_profile_dir(const lz_config *cfg);
const struct lz_path *lz_config_storage_domain(const lz_config *cfg);
const struct lz_path *lz_config_runtime_domain(const lz_config *cfg);
const struct lz_path *lz_config_volume_source(const lz_config *cfg, size_t i);
/* The opened executable of auto_approve rule i (canonical path and
 * identity recorded at load). */
const struct lz_path *lz_config_executable(const lz_config *cfg, size_t i);
/* -EPERM when canonical (an absolute path without symlinks) lies inside
 * the workspace, the storage or runtime root, or a volume source: a host
 * command there is the sandbox's to write (auto_approve rules, prompted
 * requests). */
int lz_config_host_executable_allowed(const lz_config *cfg, const char *canonical, struct lz_err *err);
/* The same for an opened object, compared by where it lies in its file
 * system as well (fs/mountns.h lz_mountns_place, as the load compares the
 * trees): another mount of the workspace, a root or a volume source shows
 * their files under another name. For the host tools a launch runs from
 * their descriptors (runsc, slirp4netns; platform/hostprobe.h). */
int lz_config_host_tool_allowed(const lz_config *cfg, const struct lz_path *x, struct lz_err *err);
/* Locates host tool name (platform/hostprobe.h lz_hostprobe_tool_locate)
 * and checks it as above: the one way a launch or image preparation finds
 * the tools it runs. An error says "WHAT (package PACKAGE): " when the
 * tool is missing or unsafe where it lies, "WHAT: " when it lies in a tree
 * the sandbox can write. ret is released on failure. */
int lz_config_host_tool(const lz_config *cfg, const char *name, const char *what, const char *package,
			struct lz_path *ret, struct lz_err *err);
/* The resolved value of env reference i: runtime authority, never printed. */
const char *lz_config_env_value(const lz_config *cfg, size_t i);
/* Zeroes every resolved env value (lz_config_env_value then reads ""):
 * for a child that keeps running the coordinator's image and needs none
 * of them (lz_broker_forget_in_children). */
void lz_config_forget_env_values(const lz_config *cfg);
uint32_t lz_config_dcache(const lz_config *cfg);
/* runtime.max_memory_mib; 0 when not set (half of the host's memory). */
uint32_t lz_config_max_memory_mib(const lz_config *cfg);
/* storage.keep_unused_images, 0 when unset (no automatic reclamation). */
uint32_t lz_config_keep_unused_images(const lz_config *cfg);

/* Selected profile of a resolved configuration, or NULL. */
const struct lz_config_profile *lz_config_selected(const lz_config *cfg);

#endif
