/* Metadata of layer entries (spec 3.6 "Prepared lower"): numeric owners,
 * mtimes, the xattr allow-list, and the samples a layer report keeps of what
 * it skipped.
 *
 * Invariants:
 * - An owner or group outside 0..UINT32_MAX - 1 is refused ((uid_t)-1 would
 *   mean "leave unchanged" to chown).
 * - Only user.* and security.capability xattrs are applied, at most
 *   LZ_LAYER_MAX_XATTRS distinct names per entry; others, and those the
 *   filesystem refuses with ENOTSUP or EPERM, are counted and sampled in the
 *   report, never fatal.
 * - Owner is applied before mode (chown clears setuid/setgid), times last.
 *
 * Threat: an entry granting itself authority through a namespace it must not
 * set (trusted.*, security.selinux, ...) or an xattr flood. */
#ifndef LZ_LAYERMETA_H
#define LZ_LAYERMETA_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "image/layer.h"
#include "image/layerpath.h"
#include "util/err.h"

struct archive_entry;

/* The entry's numeric owner and group into *ret_uid, *ret_gid (untouched on
 * failure); -EINVAL when out of range. Messages name path. */
int lz_layermeta_owner(struct archive_entry *e, const char *path, uid_t *ret_uid, gid_t *ret_gid,
		       struct lz_err *err);

/* The entry's mtime as atime and mtime for utimensat/futimens: UTIME_OMIT
 * when the archive has none, nanoseconds outside 0..999999999 dropped. */
void lz_layermeta_times(struct archive_entry *e, struct timespec ts[2]);

/* Records sample number count (1-based) of a report list: "<a>" or
 * "<a> <b>" (a "" shown as "."), truncated to LZ_LAYER_REPORT_TEXT - 1
 * bytes. Only the first LZ_LAYER_REPORT_PATHS samples are kept. */
void lz_layermeta_sample(char samples[][LZ_LAYER_REPORT_TEXT], uint64_t count, const char *a,
			 const char *b);

/* Applies the entry's allowed xattrs to fd; fd < 0 means the object cannot
 * carry them here (symlink, FIFO, device) and every xattr is skipped.
 * Skips are counted in rep->skipped_xattrs with samples "<path> <name>",
 * what was applied in rep->xattr_bytes. -EINVAL beyond LZ_LAYER_MAX_XATTRS
 * names, otherwise fsetxattr's errno. */
int lz_layermeta_xattrs(struct archive_entry *e, int fd, const char *path,
			struct lz_layer_report *rep, struct lz_err *err);

/* Owner, then mode (chown clears setuid/setgid; only when chmod), then
 * xattrs (all skipped), then times, for a non-regular, non-directory object
 * at pfd/p->name, never following it. */
int lz_layermeta_finish_special(struct archive_entry *e, int pfd, const struct lz_layerpath *p,
				bool chmod, struct lz_layer_report *rep, struct lz_err *err);

#endif
