/* Descriptor-table utilities for children (the RS, the router, the
 * helpers it forks): what they may keep is an explicit list. */
#ifndef LZ_UTIL_FDUTIL_H
#define LZ_UTIL_FDUTIL_H

#include <stddef.h>

/* Closes every descriptor from 3 up except those in keep[0..n) (negative
 * entries are ignored); stdin and stdout become /dev/null, stderr stays.
 * keep is sorted in place. */
void lz_fds_keep_only(int *keep, size_t n);

/* For a child about to exec a program that finds its descriptors by
 * number: fds[i] becomes descriptor 3 + i (inherited across exec), every
 * other descriptor from 3 up is closed; stdin and stdout become
 * /dev/null, stderr stays. fds may be in any order and overlap the
 * targets. 0 or -errno (the table is then unchanged past what was
 * duplicated). */
int lz_fds_place(const int *fds, size_t n);

#endif
