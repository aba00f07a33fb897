#include "util/lazylib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

void *lz_lazylib_open(const char *soname)
{
	void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		dprintf(STDERR_FILENO, "lazaret: cannot load %s: %s\n", soname, dlerror());
		_exit(127);
	}
	return h;
}

void *lz_lazylib_sym(void *handle, const char *soname, const char *name)
{
	void *f = dlsym(handle, name);
	if (f == NULL) {
		dprintf(STDERR_FILENO, "lazaret: %s has no %s\n", soname, name);
		_exit(127);
	}
	return f;
}
