/* Descriptor-table utilities for children forked without exec (the RS,
 * the router): what they may keep is an explicit list. */
#ifndef LZ_UTIL_FDUTIL_H
#define LZ_UTIL_FDUTIL_H

#include <stddef.h>

/* Closes every descriptor from 3 up except those in keep[0..n) (negative
 * entries are ignored); stdin and stdout become /dev/null, stderr stays.
 * keep is sorted in place. */
void lz_fds_keep_only(int *keep, size_t n);

#endif
