/* libgit2, opened when first used (util/lazylib.h): only the workspace
 * router's classification and the bundle's Git checks use it, and its
 * tree is fourteen shared libraries (Kerberos, libssh2, mbedTLS, PCRE2,
 * http-parser). Any other libgit2 function is not here, and is not
 * linked: add it here. */
#include "router/gitlib.h"

#include <errno.h>
#include <stdbool.h>

#include <git2.h>

#include "util/lazylib.h"

#ifndef LZ_LIBGIT2_SONAME
#error "LZ_LIBGIT2_SONAME: CMakeLists.txt reads it off libgit2"
#endif

LZ_LAZYLIB(libgit2, LZ_LIBGIT2_SONAME)
#define FORWARD(ret, name, params, args) LZ_LAZY_FORWARD(libgit2_sym, ret, name, params, args)
#define FORWARD_VOID(name, params, args) LZ_LAZY_FORWARD_VOID(libgit2_sym, name, params, args)

const char lz_gitlib_soname[] = LZ_LIBGIT2_SONAME;

int lz_gitlib_open(struct lz_err *err)
{
	return libgit2_load(err);
}

/* Debian's libgit2 parses the system's whole CA bundle for its HTTPS
 * transport (mbedTLS) each time its count of initialisations rises from
 * zero: about 8 ms, in every classification and index check. One held
 * for the process's life leaves the later pairs a count (the router's
 * own is taken without the bundle: runtime/rsrouter.c). Nothing here
 * uses libgit2's network transports. */
int lz_gitlib_load(struct lz_err *err)
{
	static bool held;
	int r = libgit2_load(err);
	if (r < 0 || held)
		return r;
	if (git_libgit2_init() < 0)
		return lz_err_set(err, EIO, "libgit2: initialisation failed");
	held = true;
	return 0;
}

FORWARD(int, git_libgit2_init, (void), ())
FORWARD(int, git_libgit2_shutdown, (void), ())
FORWARD(const git_error *, git_error_last, (void), ())
FORWARD_VOID(git_error_clear, (void), ())
FORWARD_VOID(git_buf_dispose, (git_buf * buffer), (buffer))
FORWARD(int, git_config_open_default, (git_config * *out), (out))
FORWARD(int, git_config_open_ondisk, (git_config * *out, const char *path), (out, path))
FORWARD(int, git_config_find_global, (git_buf * out), (out))
FORWARD(int, git_config_find_xdg, (git_buf * out), (out))
FORWARD(int, git_config_find_system, (git_buf * out), (out))
FORWARD(int, git_config_foreach, (const git_config *cfg, git_config_foreach_cb callback, void *payload),
	(cfg, callback, payload))
FORWARD_VOID(git_config_free, (git_config * cfg), (cfg))
FORWARD(int, git_config_get_bool, (int *out, const git_config *cfg, const char *name), (out, cfg, name))
FORWARD(int, git_config_get_path, (git_buf * out, const git_config *cfg, const char *name), (out, cfg, name))
FORWARD(int, git_repository_open_ext,
	(git_repository * *out, const char *path, unsigned int flags, const char *ceiling_dirs),
	(out, path, flags, ceiling_dirs))
FORWARD(const char *, git_repository_path, (const git_repository *repo), (repo))
FORWARD(const char *, git_repository_commondir, (const git_repository *repo), (repo))
FORWARD(int, git_repository_is_bare, (const git_repository *repo), (repo))
FORWARD(int, git_repository_config_snapshot, (git_config * *out, git_repository *repo), (out, repo))
FORWARD_VOID(git_repository_free, (git_repository * repo), (repo))
