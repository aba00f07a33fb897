/* Where the trusted configuration comes from, and reading it safely
 * (spec 3.2).
 *
 * Selection: an explicit --config path, else $XDG_CONFIG_HOME/lazaret/
 * config.toml, else $HOME/.config/lazaret/config.toml. Storage Root:
 * storage.data_root, else $XDG_DATA_HOME/lazaret, else
 * $HOME/.local/share/lazaret. Runtime Root: $XDG_RUNTIME_DIR/lazaret. An
 * unset, empty or relative XDG config/data value counts as unset; HOME and
 * XDG_RUNTIME_DIR must be present and absolute.
 *
 * Reading: the source must be a regular file of at most 1 MiB, owned by root
 * or the invoking user, with one hard link and no group/other write. It is
 * opened O_PATH first (type checks cannot activate a special file), reopened
 * through that descriptor non-blocking, and read twice; any change of
 * identity, size, change time or bytes refuses without retry. */
#ifndef LZ_CFGSOURCE_H
#define LZ_CFGSOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define LZ_CONFIG_MAX_BYTES 1048576

/* Host environment inputs; NULL means unset. The caller reads them. */
struct lz_host_env {
	const char *home;
	const char *xdg_config_home;
	const char *xdg_data_home;
	const char *xdg_runtime_dir;
};

/* The configuration source's path as declared, made absolute (not
 * resolved): explicit_path (relative to cwd when not absolute), else
 * $XDG_CONFIG_HOME/lazaret/config.toml, else
 * $HOME/.config/lazaret/config.toml; malloc'd in *ret. */
int lz_cfgsource_declared(const struct lz_host_env *env, const char *explicit_path, const char *cwd, char **ret,
			  struct lz_err *err);

/* Canonical path of the configuration source. explicit_path may be relative
 * to cwd (when non-NULL) and may be a symlink, resolved once here.
 * *ret_declared (unless NULL): the path as declared, made absolute, whose
 * links the caller judges (lz_path_each_link). */
int lz_cfgsource_select(const struct lz_host_env *env, const char *explicit_path, const char *cwd,
			char **ret_path, char **ret_declared, struct lz_err *err);

/* Storage Root path: data_root (already grammar-checked) or the XDG rules. */
int lz_cfgsource_storage_root(const struct lz_host_env *env, const char *data_root,
			      char **ret_path, struct lz_err *err);

/* Runtime Root path: $XDG_RUNTIME_DIR/lazaret. */
int lz_cfgsource_runtime_root(const struct lz_host_env *env, char **ret_path, struct lz_err *err);

struct lz_cfgfile {
	char *bytes; /* NUL-terminated copy of exactly size bytes */
	size_t size;
	uint64_t dev, ino;
	int64_t ctime_sec;
	long ctime_nsec;
};

/* Reads the canonical source with every check above. */
int lz_cfgfile_read(const char *canonical, struct lz_cfgfile *ret, struct lz_err *err);

void lz_cfgfile_release(struct lz_cfgfile *f);

/* Fills env from this process's environment (getenv). */
void lz_host_env_from_process(struct lz_host_env *env);

#endif
