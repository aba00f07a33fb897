/* Shared libraries opened when first used (issue 15, docs/performance.md
 * "CLI start").
 *
 * A library only one path of Lazaret needs (libgit2 for the router's
 * classification, libarchive for image layers) is not linked: linking it
 * made every lazaret process, the CLI of each join among them, map and
 * relocate its whole dependency tree. Each user defines the functions it
 * calls under the library's own names and signatures (from the library's
 * header, so a mismatch does not compile), forwarding to the library that
 * the first call opens by its soname, read off the library at build time.
 * A library or function that cannot be found ends the process with the
 * loader's reason, as a missing DT_NEEDED library would. Statically
 * linking instead would keep Debian's security updates of these parsers
 * of hostile input from reaching lazaret.
 *
 * A process that will need a library loads it first, before it holds
 * anything, with lib_load (as the coordinator does libgit2 and image
 * preparation libarchive): a missing library is then an error saying
 * which, not a process ending halfway through its work.
 *
 *   LZ_LAZYLIB(libgit2, "libgit2.so.1.5")   defines libgit2_sym(name) and
 *                                           int libgit2_load(struct lz_err *)
 *   LZ_LAZY_FORWARD(libgit2_sym, int, git_libgit2_init, (void), ())
 *   LZ_LAZY_FORWARD_VOID(libgit2_sym, git_buf_dispose, (git_buf *b), (b)) */
#ifndef LZ_LAZYLIB_H
#define LZ_LAZYLIB_H

#include <pthread.h>
#include <stddef.h>

#include "util/err.h"

/* dlopen(soname): the handle, or NULL with the loader's reason in why. */
void *lz_lazylib_open(const char *soname, char *why, size_t cap);
/* dlsym(handle, name); a NULL handle or a missing function ends the
 * process saying why (why: the open's reason). */
void *lz_lazylib_sym(void *handle, const char *soname, const char *why, const char *name);
/* 0 when handle is loaded, else -ENOENT naming soname and why. */
int lz_lazylib_loaded(const void *handle, const char *soname, const char *why, struct lz_err *err);

#define LZ_LAZYLIB(lib, soname)                                                \
	static void *lib##_handle;                                             \
	static char lib##_why[256];                                            \
	static pthread_once_t lib##_once = PTHREAD_ONCE_INIT;                  \
	static void lib##_open(void)                                           \
	{                                                                      \
		lib##_handle = lz_lazylib_open(soname, lib##_why, sizeof(lib##_why)); \
	}                                                                      \
	static void *lib##_sym(const char *name)                               \
	{                                                                      \
		pthread_once(&lib##_once, lib##_open);                         \
		return lz_lazylib_sym(lib##_handle, soname, lib##_why, name);  \
	}                                                                      \
	static inline int lib##_load(struct lz_err *err)                       \
	{                                                                      \
		pthread_once(&lib##_once, lib##_open);                         \
		return lz_lazylib_loaded(lib##_handle, soname, lib##_why, err); \
	}

/* RET NAME(PARAMS) { return real(ARGS); } with the real function looked up
 * once; the pointer is written once per thread race, always to the same
 * value. */
#define LZ_LAZY_FORWARD(sym, ret, name, params, args)                          \
	ret name params                                                        \
	{                                                                      \
		static ret(*_Atomic real) params;                              \
		if (real == NULL)                                              \
			real = (ret(*) params)sym(#name);                      \
		return real args;                                              \
	}
#define LZ_LAZY_FORWARD_VOID(sym, name, params, args)                          \
	void name params                                                       \
	{                                                                      \
		static void(*_Atomic real) params;                             \
		if (real == NULL)                                              \
			real = (void(*) params)sym(#name);                     \
		real args;                                                     \
	}

#endif
