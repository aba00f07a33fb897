#include "util/lazylib.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

void *lz_lazylib_open(const char *soname, char *why, size_t cap)
{
	void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		snprintf(why, cap, "%s", e ? e : "not found");
	}
	return h;
}

void *lz_lazylib_sym(void *handle, const char *soname, const char *why, const char *name)
{
	void *f = handle ? dlsym(handle, name) : NULL;
	if (f == NULL) {
		if (handle)
			dprintf(STDERR_FILENO, "lazaret: %s has no %s\n", soname, name);
		else
			dprintf(STDERR_FILENO, "lazaret: cannot load %s: %s\n", soname, why);
		_exit(127);
	}
	return f;
}

int lz_lazylib_loaded(const void *handle, const char *soname, const char *why, struct lz_err *err)
{
	if (handle != NULL)
		return 0;
	return lz_err_set(err, ENOENT, "cannot load %s (%s): install the distribution's package of that library",
			  soname, why);
}
