/* libgit2, loaded when first used (issue 15, docs/performance.md "CLI
 * start").
 *
 * Only the workspace router's classification and the bundle's Git checks
 * use libgit2, yet linking it made every lazaret process, the CLI of each
 * join among them, map and relocate its tree: Kerberos, libssh2, mbedTLS,
 * PCRE2, http-parser, fourteen shared libraries. So lazaret does not link
 * it: the functions below have libgit2's own names and signatures (from
 * git2.h, so a mismatch does not compile) and forward to the library that
 * the first call opens by its soname (LZ_LIBGIT2_SONAME, read off the
 * library at build time). A library that cannot be opened ends the process
 * with the loader's reason, as a missing DT_NEEDED library would. Any
 * other libgit2 function is not here, and is not linked: add it here. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <git2.h>

#ifndef LZ_LIBGIT2_SONAME
#error "LZ_LIBGIT2_SONAME: CMakeLists.txt reads it off libgit2"
#endif

static void *lib;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

static void lib_open(void)
{
	lib = dlopen(LZ_LIBGIT2_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		dprintf(STDERR_FILENO, "lazaret: cannot load libgit2 (%s): %s\n", LZ_LIBGIT2_SONAME, dlerror());
		_exit(127);
	}
}

static void *sym(const char *name)
{
	pthread_once(&lib_once, lib_open);
	void *f = dlsym(lib, name);
	if (f == NULL) {
		dprintf(STDERR_FILENO, "lazaret: %s has no %s\n", LZ_LIBGIT2_SONAME, name);
		_exit(127);
	}
	return f;
}

/* RET NAME(PARAMS) { return real(ARGS); } with the real function looked up
 * once; the pointer is written once per thread race, always to the same
 * value. */
#define FORWARD(ret, name, params, args)                                       \
	ret name params                                                        \
	{                                                                      \
		static ret(*_Atomic real) params;                              \
		if (real == NULL)                                              \
			real = (ret(*) params)sym(#name);                      \
		return real args;                                              \
	}
#define FORWARD_VOID(name, params, args)                                       \
	void name params                                                       \
	{                                                                      \
		static void(*_Atomic real) params;                             \
		if (real == NULL)                                              \
			real = (void(*) params)sym(#name);                     \
		real args;                                                     \
	}

FORWARD(int, git_libgit2_init, (void), ())
FORWARD(int, git_libgit2_shutdown, (void), ())
FORWARD(const git_error *, git_error_last, (void), ())
FORWARD_VOID(git_buf_dispose, (git_buf * buffer), (buffer))
FORWARD(int, git_config_open_default, (git_config * *out), (out))
FORWARD(int, git_config_foreach, (const git_config *cfg, git_config_foreach_cb callback, void *payload),
	(cfg, callback, payload))
FORWARD_VOID(git_config_free, (git_config * cfg), (cfg))
FORWARD(int, git_config_get_bool, (int *out, const git_config *cfg, const char *name), (out, cfg, name))
FORWARD(int, git_config_get_path, (git_buf * out, const git_config *cfg, const char *name), (out, cfg, name))
FORWARD(int, git_index_open, (git_index * *out, const char *index_path), (out, index_path))
FORWARD(size_t, git_index_entrycount, (const git_index *index), (index))
FORWARD(const git_index_entry *, git_index_get_byindex, (git_index * index, size_t n), (index, n))
FORWARD_VOID(git_index_free, (git_index * index), (index))
FORWARD(int, git_repository_open_ext,
	(git_repository * *out, const char *path, unsigned int flags, const char *ceiling_dirs),
	(out, path, flags, ceiling_dirs))
FORWARD(const char *, git_repository_path, (const git_repository *repo), (repo))
FORWARD(const char *, git_repository_commondir, (const git_repository *repo), (repo))
FORWARD(int, git_repository_is_bare, (const git_repository *repo), (repo))
FORWARD(int, git_repository_index, (git_index * *out, git_repository *repo), (out, repo))
FORWARD(int, git_repository_config_snapshot, (git_config * *out, git_repository *repo), (out, repo))
FORWARD_VOID(git_repository_free, (git_repository * repo), (repo))
