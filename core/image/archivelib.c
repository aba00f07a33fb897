/* libarchive, opened when first used (util/lazylib.h): only image
 * preparation reads layers, and its tree (libxml2, ICU, nettle, liblzma,
 * lz4, bzip2, libacl, libstdc++) is eleven shared libraries. Any other
 * libarchive function is not here, and is not linked: add it here. */
#include "image/archivelib.h"

#include <archive.h>
#include <archive_entry.h>

#include "util/lazylib.h"

#ifndef LZ_LIBARCHIVE_SONAME
#error "LZ_LIBARCHIVE_SONAME: CMakeLists.txt reads it off libarchive"
#endif

LZ_LAZYLIB(libarchive, LZ_LIBARCHIVE_SONAME)
#define FORWARD(ret, name, params, args) LZ_LAZY_FORWARD(libarchive_sym, ret, name, params, args)

const char lz_archivelib_soname[] = LZ_LIBARCHIVE_SONAME;

int lz_archivelib_load(struct lz_err *err)
{
	return libarchive_load(err);
}

typedef struct archive A;
typedef struct archive_entry E;

FORWARD(A *, archive_read_new, (void), ())
FORWARD(int, archive_read_free, (A * a), (a))
FORWARD(int, archive_read_support_format_tar, (A * a), (a))
FORWARD(int, archive_read_support_format_raw, (A * a), (a))
FORWARD(int, archive_read_support_filter_none, (A * a), (a))
FORWARD(int, archive_read_support_filter_gzip, (A * a), (a))
FORWARD(int, archive_read_support_filter_zstd, (A * a), (a))
FORWARD(int, archive_read_open_fd, (A * a, int fd, size_t block_size), (a, fd, block_size))
FORWARD(int, archive_read_open,
	(A * a, void *client_data, archive_open_callback *on_open, archive_read_callback *on_read,
	 archive_close_callback *on_close),
	(a, client_data, on_open, on_read, on_close))
FORWARD(int, archive_read_next_header, (A * a, E **entry), (a, entry))
FORWARD(int, archive_read_data_block, (A * a, const void **buff, size_t *size, la_int64_t *offset),
	(a, buff, size, offset))
FORWARD(la_int64_t, archive_filter_bytes, (A * a, int n), (a, n))
FORWARD(int, archive_filter_count, (A * a), (a))
FORWARD(int, archive_filter_code, (A * a, int n), (a, n))
FORWARD(int, archive_errno, (A * a), (a))
FORWARD(const char *, archive_error_string, (A * a), (a))
FORWARD(const char *, archive_entry_pathname, (E * e), (e))
FORWARD(const char *, archive_entry_hardlink, (E * e), (e))
FORWARD(const char *, archive_entry_symlink, (E * e), (e))
FORWARD(__LA_MODE_T, archive_entry_filetype, (E * e), (e))
FORWARD(__LA_MODE_T, archive_entry_perm, (E * e), (e))
FORWARD(la_int64_t, archive_entry_uid, (E * e), (e))
FORWARD(la_int64_t, archive_entry_gid, (E * e), (e))
FORWARD(la_int64_t, archive_entry_size, (E * e), (e))
FORWARD(int, archive_entry_size_is_set, (E * e), (e))
FORWARD(int, archive_entry_sparse_count, (E * e), (e))
FORWARD(time_t, archive_entry_mtime, (E * e), (e))
FORWARD(long, archive_entry_mtime_nsec, (E * e), (e))
FORWARD(int, archive_entry_mtime_is_set, (E * e), (e))
FORWARD(dev_t, archive_entry_rdevmajor, (E * e), (e))
FORWARD(dev_t, archive_entry_rdevminor, (E * e), (e))
FORWARD(int, archive_entry_xattr_count, (E * e), (e))
FORWARD(int, archive_entry_xattr_reset, (E * e), (e))
FORWARD(int, archive_entry_xattr_next, (E * e, const char **name, const void **value, size_t *size),
	(e, name, value, size))
