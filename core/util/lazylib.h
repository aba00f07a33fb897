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
 *   LZ_LAZYLIB(libgit2, "libgit2.so.1.5")   defines libgit2_sym(name)
 *   LZ_LAZY_FORWARD(libgit2_sym, int, git_libgit2_init, (void), ())
 *   LZ_LAZY_FORWARD_VOID(libgit2_sym, git_buf_dispose, (git_buf *b), (b)) */
#ifndef LZ_LAZYLIB_H
#define LZ_LAZYLIB_H

#include <pthread.h>

/* dlopen(soname), or the process ends saying why. */
void *lz_lazylib_open(const char *soname);
/* dlsym(handle, name), or the process ends saying why. */
void *lz_lazylib_sym(void *handle, const char *soname, const char *name);

#define LZ_LAZYLIB(lib, soname)                                                \
	static void *lib##_handle;                                             \
	static pthread_once_t lib##_once = PTHREAD_ONCE_INIT;                  \
	static void lib##_open(void)                                           \
	{                                                                      \
		lib##_handle = lz_lazylib_open(soname);                        \
	}                                                                      \
	static void *lib##_sym(const char *name)                               \
	{                                                                      \
		pthread_once(&lib##_once, lib##_open);                         \
		return lz_lazylib_sym(lib##_handle, soname, name);             \
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
