/* Descriptor utilities: for children (the RS, the router, the helpers it
 * forks) what they may keep is an explicit list; and what /proc says of
 * a descriptor or a process. */
#ifndef LZ_UTIL_FDUTIL_H
#define LZ_UTIL_FDUTIL_H

#include <stddef.h>
#include <sys/types.h>

/* Closes every descriptor from 3 up except those in keep[0..n) (negative
 * entries are ignored); then stdin and stdout become /dev/null, stderr
 * stays. keep is sorted in place. -errno when /dev/null cannot be had
 * (the streams are then the parent's still: the caller must not go on). */
int lz_fds_keep_only(int *keep, size_t n);

/* For a child about to exec a program that finds its descriptors by
 * number: fds[i] becomes descriptor 3 + i (inherited across exec), every
 * other descriptor from 3 up is closed; then stdin and stdout become
 * /dev/null, stderr stays. fds may be in any order and overlap the
 * targets. 0 or -errno (the caller must not go on: descriptors may be
 * placed, the streams the parent's still). */
int lz_fds_place(const int *fds, size_t n);

/* Opens /dev/null onto each of descriptors 0, 1 and 2 that is closed, so
 * that no descriptor this process opens later (a socket) takes a standard
 * stream's number and is handed on as one. 0, or -errno. */
int lz_fds_std_open(void);

/* The absolute path fd names in this mount namespace (its /proc/self/fd
 * link) in buf: 0, or -errno (-ENAMETOOLONG when it does not fit in cap
 * with its NUL or is no path, as for a detached mount's root). */
int lz_fd_path(int fd, char *buf, size_t cap);

/* chmod of the object fd names, an O_PATH descriptor included (fchmod
 * refuses those; its /proc/self/fd link names exactly that object, never
 * a name again). 0, or -1 with errno. */
int lz_fd_chmod(int fd, mode_t mode);

/* A small file (a /proc entry) read in one call into buf, NUL-terminated:
 * its length, or -errno (-EIO when empty). */
ssize_t lz_read_small(const char *path, char *buf, size_t cap);
/* The same, path relative to dirfd (AT_FDCWD: as lz_read_small). */
ssize_t lz_read_small_at(int dirfd, const char *path, char *buf, size_t cap);

#endif
