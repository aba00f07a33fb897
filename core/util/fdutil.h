/* Descriptor-table utilities for children (the RS, the router): what they
 * may keep is an explicit list; and sealed memory files. */
#ifndef LZ_UTIL_FDUTIL_H
#define LZ_UTIL_FDUTIL_H

#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

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

/* A memory file holding bytes[0..len), sealed against any change (write,
 * grow, shrink, and further seals: LZ_MEMFD_SEALS), close-on-exec; when
 * exec is false it is also sealed never to be executable (F_SEAL_EXEC),
 * whatever the host's vm.memfd_noexec. name is memfd_create's. An
 * executable one is refused (-EACCES) where vm.memfd_noexec is 2. */
#define LZ_MEMFD_SEALS (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
/* Linux 6.3; Debian 12's headers predate them. */
#ifndef F_SEAL_EXEC
#define F_SEAL_EXEC 0x0020
#endif
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
int lz_memfd_sealed(const char *name, const void *bytes, size_t len, bool exec, int *ret_fd,
		    struct lz_err *err);

#endif
