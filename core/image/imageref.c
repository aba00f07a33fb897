#include "image/imageref.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "fs/pathauth.h"

static bool tag_valid(const char *t, size_t n)
{
	if (n == 0 || n > 128)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = t[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			  c == '_' || (i > 0 && (c == '.' || c == '-'));
		if (!ok)
			return false;
	}
	return true;
}

static int set_path(struct lz_image_ref *out, const char *what, const char *p, size_t n,
		    struct lz_err *err)
{
	if (n > LZ_IMAGEREF_MAX)
		return lz_err_set(err, EINVAL, "image %s path is too long", what);
	int r = lz_path_grammar(p, n, err);
	if (r < 0)
		return lz_err_prefix(err, r, "image %s path: ", what);
	memcpy(out->path, p, n);
	out->path[n] = '\0';
	return 0;
}

int lz_image_ref_parse(const char *text, struct lz_image_ref *ret, struct lz_err *err)
{
	struct lz_image_ref out = { 0 };
	size_t len = strlen(text);
	int r;
	if (strncmp(text, "docker://", 9) == 0) {
		const char *ref = text + 9;
		size_t n = len - 9;
		if (n == 0 || n >= sizeof(out.ref))
			return lz_err_set(err, EINVAL, "image '%s': docker:// needs a reference of at "
						       "most 255 bytes", text);
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)ref[i] <= ' ' || ref[i] == 0x7f)
				return lz_err_set(err, EINVAL, "image reference contains whitespace or a "
							       "control character");
		out.kind = LZ_IMAGE_DOCKER;
		memcpy(out.ref, ref, n + 1);
	} else if (strncmp(text, "docker-archive:", 15) == 0) {
		out.kind = LZ_IMAGE_DOCKER_ARCHIVE;
		if ((r = set_path(&out, "archive", text + 15, len - 15, err)) < 0)
			return r;
	} else if (strncmp(text, "oci:", 4) == 0) {
		const char *p = text + 4;
		size_t n = len - 4;
		const char *colon = memrchr(p, ':', n);
		out.kind = LZ_IMAGE_OCI;
		if (colon && memchr(colon, '/', n - (size_t)(colon - p)) == NULL) {
			size_t tn = n - (size_t)(colon - p) - 1;
			if (!tag_valid(colon + 1, tn))
				return lz_err_set(err, EINVAL, "image '%s': invalid tag '%s'", text,
						  colon + 1);
			memcpy(out.tag, colon + 1, tn);
			out.tag[tn] = '\0';
			n = (size_t)(colon - p);
		}
		if ((r = set_path(&out, "layout", p, n, err)) < 0)
			return r;
	} else {
		return lz_err_set(err, EINVAL,
				  "image '%s': expected oci:PATH[:TAG], docker-archive:PATH or "
				  "docker://REF",
				  text);
	}
	*ret = out;
	return 0;
}
