/* Raw syscall wrappers glibc 2.36 lacks, in one place (crun style). */
#ifndef LZ_UTIL_SYS_H
#define LZ_UTIL_SYS_H

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Confinement every Lazaret-owned lookup uses (spec 3.2). */
#define LZ_RESOLVE_CONFINED (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
#define LZ_RESOLVE_OWNED (LZ_RESOLVE_CONFINED | RESOLVE_NO_XDEV)

static inline int lz_openat2(int dirfd, const char *path, int flags, unsigned long long resolve)
{
	struct open_how how = { .flags = (unsigned long long)flags, .resolve = resolve };
	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

/* As lz_openat2, creating with mode (open_how.mode; the umask applies). */
static inline int lz_openat2_create(int dirfd, const char *path, int flags, unsigned mode,
				    unsigned long long resolve)
{
	struct open_how how = { .flags = (unsigned long long)flags | O_CREAT, .mode = mode,
				.resolve = resolve };
	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

#endif
