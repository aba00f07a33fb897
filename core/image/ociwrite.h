/* Writes a single-layer OCI image layout from a root filesystem tarball:
 * the default image (issue 3) built by mmdebstrap becomes an image like
 * any other, prepared through the same verified path (oci.h, prepare.h).
 * All writes are beneath the caller's layout directory descriptor; blobs
 * are content-addressed and written under a temporary name, then renamed. */
#ifndef LZ_OCIWRITE_H
#define LZ_OCIWRITE_H

#include "util/err.h"

/* Fills the empty layout directory layout_fd with oci-layout, index.json
 * (one manifest tagged tag) and blobs: the uncompressed tar read from
 * tar_fd as the only layer, a linux/amd64 config whose command is cmd
 * (NULL-terminated) and whose environment is env. */
int lz_ociwrite_single_layer(int layout_fd, int tar_fd, const char *tag,
			     const char *const *cmd, const char *const *env, struct lz_err *err);

#endif
