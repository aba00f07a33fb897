/* Image references of a profile (issue 3): oci:PATH[:TAG],
 * docker-archive:PATH and docker://REF. PATH is an absolute host path in
 * the strict grammar (pathauth.h); TAG is [A-Za-z0-9_][A-Za-z0-9._-]{0,127}. */
#ifndef LZ_IMAGEREF_H
#define LZ_IMAGEREF_H

#include <stddef.h>

#include "util/err.h"

enum lz_image_kind {
	LZ_IMAGE_OCI,
	LZ_IMAGE_DOCKER_ARCHIVE,
	LZ_IMAGE_DOCKER,
};

#define LZ_IMAGEREF_MAX 4096

struct lz_image_ref {
	enum lz_image_kind kind;
	char path[LZ_IMAGEREF_MAX + 1]; /* OCI layout or archive path; "" for docker:// */
	char tag[129];                  /* OCI tag, "" when absent */
	char ref[256];                  /* docker:// reference, "" otherwise */
};

int lz_image_ref_parse(const char *text, struct lz_image_ref *ret, struct lz_err *err);

#endif
