/* Platform floor (spec 3.3 "Host process identity"): x86-64 Linux >= 6.9,
 * checked before any generation or runtime resource is created. */
#ifndef LZ_PLATFORM_H
#define LZ_PLATFORM_H

#include "util/err.h"

#define LZ_KERNEL_MIN_MAJOR 6
#define LZ_KERNEL_MIN_MINOR 9

/* Parses "6.18.44-fc" style releases into major and minor. */
int lz_kernel_release_parse(const char *release, unsigned *ret_major, unsigned *ret_minor);

/* Checks the given machine and release strings against the floor. */
int lz_platform_check_values(const char *machine, const char *release, struct lz_err *err);

/* Checks this host (uname). -ENOTSUP with a message when below the floor. */
int lz_platform_check(struct lz_err *err);

#endif
