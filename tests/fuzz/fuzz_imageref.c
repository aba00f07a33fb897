/* libFuzzer target for core/image/imageref.c (the image reference of a
 * profile). The input, up to its first NUL, is the reference text.
 *
 * Against a model written from imageref.h and pathauth.h's strict path
 * grammar:
 * - "docker://REF" is accepted exactly when REF has 1 to 255 bytes, none a
 *   control, space or DEL;
 * - "docker-archive:PATH" exactly when PATH is absolute, at most
 *   LZ_PATH_MAX bytes, with no empty, "." or ".." component, components of
 *   at most 255 bytes and no trailing slash (except "/");
 * - "oci:PATH[:TAG]": the text after the last ':' that has no '/' after it
 *   is the tag, which must match [A-Za-z0-9_][A-Za-z0-9._-]{0,127}, and
 *   PATH as above;
 * - anything else is refused.
 * A refusal is -EINVAL with its code in err and *ret untouched; an accepted
 * reference has exactly the parts of the model (kind, path, tag, ref, each
 * NUL-terminated within its field) and, written back as text, parses to
 * the same reference.
 * Any violation abort()s. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/pathauth.h"
#include "image/imageref.h"

static void check(bool ok)
{
	if (!ok)
		abort();
}

static bool path_ok(const char *p, size_t n)
{
	if (n == 0 || p[0] != '/' || n > LZ_PATH_MAX)
		return false;
	if (n == 1)
		return true;
	if (p[n - 1] == '/')
		return false;
	for (size_t i = 1; i < n;) {
		size_t j = i;
		while (j < n && p[j] != '/')
			j++;
		size_t c = j - i;
		if (c == 0 || c > 255 || (c == 1 && p[i] == '.') || (c == 2 && p[i] == '.' && p[i + 1] == '.'))
			return false;
		i = j + 1;
	}
	return true;
}

static bool tag_ok(const char *t, size_t n)
{
	if (n < 1 || n > 128)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = t[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
		if (!alnum && !(i > 0 && (c == '.' || c == '-')))
			return false;
	}
	return true;
}

/* The model: fills want (zeroed first) or says the text is refused. */
static bool model(const char *text, struct lz_image_ref *want)
{
	memset(want, 0, sizeof(*want));
	size_t len = strlen(text);
	if (strncmp(text, "docker://", 9) == 0) {
		size_t n = len - 9;
		if (n < 1 || n > 255)
			return false;
		for (size_t i = 9; i < len; i++)
			if ((unsigned char)text[i] <= 0x20 || text[i] == 0x7f)
				return false;
		want->kind = LZ_IMAGE_DOCKER;
		memcpy(want->ref, text + 9, n + 1);
		return true;
	}
	if (strncmp(text, "docker-archive:", 15) == 0) {
		if (!path_ok(text + 15, len - 15))
			return false;
		want->kind = LZ_IMAGE_DOCKER_ARCHIVE;
		memcpy(want->path, text + 15, len - 15 + 1);
		return true;
	}
	if (strncmp(text, "oci:", 4) == 0) {
		const char *p = text + 4;
		size_t n = len - 4;
		const char *colon = strrchr(p, ':');
		if (colon != NULL && strchr(colon, '/') == NULL) {
			size_t tn = strlen(colon + 1);
			if (!tag_ok(colon + 1, tn))
				return false;
			memcpy(want->tag, colon + 1, tn + 1);
			n = (size_t)(colon - p);
		}
		if (!path_ok(p, n))
			return false;
		want->kind = LZ_IMAGE_OCI;
		memcpy(want->path, p, n);
		want->path[n] = '\0';
		return true;
	}
	return false;
}

static void check_same(const struct lz_image_ref *a, const struct lz_image_ref *b)
{
	check(a->kind == b->kind);
	check(memchr(a->path, '\0', sizeof(a->path)) && memchr(a->tag, '\0', sizeof(a->tag)) &&
	      memchr(a->ref, '\0', sizeof(a->ref)));
	check(strcmp(a->path, b->path) == 0 && strcmp(a->tag, b->tag) == 0 && strcmp(a->ref, b->ref) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	check(text != NULL);
	memcpy(text, data, size);
	text[size] = '\0';

	static struct lz_image_ref want, got, sentinel, again;
	bool ok = model(text, &want);
	memset(&got, 0x5a, sizeof(got));
	memcpy(&sentinel, &got, sizeof(got));
	struct lz_err err = { 0 };
	int r = lz_image_ref_parse(text, &got, &err);
	if (!ok) {
		check(r == -EINVAL && err.code == EINVAL && err.msg[0] != '\0');
		check(memcmp(&got, &sentinel, sizeof(got)) == 0);
		free(text);
		return 0;
	}
	check(r == 0 && err.code == 0);
	check_same(&got, &want);

	/* written back, the same reference */
	static char back[16 + LZ_IMAGEREF_MAX + 1 + 129 + 256];
	switch (got.kind) {
	case LZ_IMAGE_DOCKER:
		snprintf(back, sizeof(back), "docker://%s", got.ref);
		break;
	case LZ_IMAGE_DOCKER_ARCHIVE:
		snprintf(back, sizeof(back), "docker-archive:%s", got.path);
		break;
	default:
		snprintf(back, sizeof(back), "oci:%s%s%s", got.path, got.tag[0] ? ":" : "", got.tag);
		break;
	}
	check(strcmp(back, text) == 0);
	check(lz_image_ref_parse(back, &again, NULL) == 0);
	check_same(&again, &got);
	free(text);
	return 0;
}
