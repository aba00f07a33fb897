/* Image transport (issue 3): skopeo copies docker-archive: and docker://
 * images into a Lazaret-owned OCI layout under the Storage Root's images/
 * directory. skopeo is only the transport; verification and preparation are
 * ours (oci.h, prepare.h). It runs as an argument vector from a trusted
 * system directory, with an empty environment apart from HOME and TMPDIR
 * pointing into the Lazaret-owned layout directory. */
#ifndef LZ_TRANSPORT_H
#define LZ_TRANSPORT_H

#include "image/imageref.h"
#include "fs/pathauth.h"
#include "util/err.h"

#define LZ_TRANSPORT_TIMEOUT_MS (30 * 60 * 1000)
/* skopeo's heap (RLIMIT_DATA): it streams blobs, and copied an image in
 * well under 1 GiB (it fails to start below about 100 MiB); a registry
 * cannot make it take the host's memory. A sanitizer build's tests run a
 * stand-in skopeo built with the sanitizer, whose shadow memory (terabytes
 * mapped writable) counts as data: there, none. */
#if defined(__SANITIZE_ADDRESS__)
#define LZ_TRANSPORT_MAX_DATA 0
#else
#define LZ_TRANSPORT_MAX_DATA (2ULL << 30)
#endif

struct lz_transport {
	struct lz_path images;  /* images/ */
	struct lz_path layout;  /* images/<name>: the OCI layout */
	char name[65];
};

#define LZ_TRANSPORT_INIT { LZ_PATH_INIT, LZ_PATH_INIT, "" }

/* Copies ref (docker-archive or docker kind) into a new layout, running
 * skopeo from its checked descriptor (config/config.h lz_config_host_tool:
 * the caller's, which knows the trees). */
int lz_transport_fetch(const struct lz_path *storage_root, const struct lz_path *skopeo,
		       const struct lz_image_ref *ref, struct lz_transport *ret, struct lz_err *err);

/* Removes the layout and releases t; accepts an empty transport. */
void lz_transport_discard(struct lz_transport *t);

#endif
