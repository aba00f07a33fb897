/* Layer entry paths (see layerpath.h for the rules and the threat).
 *
 * The parser builds the normalised path in place while it checks the input,
 * one component at a time, so a refused path leaves a partial result that
 * the caller discards. */
#include "image/layerpath.h"

#include <errno.h>
#include <string.h>

const char *lz_layerpath_shown(const char *path)
{
	return path[0] ? path : ".";
}

int lz_layerpath_fail(struct lz_err *err, int e, const char *path, const char *op,
		      const char *object)
{
	if (e <= 0)
		e = EIO;
	return lz_err_set(err, e, "layer entry '%s': %s '%s': %s", lz_layerpath_shown(path), op,
			  lz_layerpath_shown(object), strerror(e));
}

int lz_layerpath_refuse(struct lz_err *err, const char *path, const char *why)
{
	return lz_err_set(err, EINVAL, "layer entry '%s' refused: %s", lz_layerpath_shown(path),
			  why);
}

int lz_layerpath_parse(const char *in, size_t len, struct lz_layerpath *p, struct lz_err *err)
{
	const char *why = NULL;
	size_t o = 0, last = 0;

	if (len == 0)
		why = "empty path";
	else if (len > LZ_LAYER_PATH_MAX)
		why = "path longer than 4096 bytes";
	else if (memchr(in, '\0', len) != NULL)
		why = "path contains a NUL byte";
	else if (in[0] == '/')
		why = "absolute path";
	for (size_t i = 0; why == NULL && i < len;) {
		size_t j = i;
		while (j < len && in[j] != '/')
			j++;
		size_t n = j - i;
		if (n == 0 || (n == 1 && in[i] == '.')) {
			i = j + 1;
			continue;
		}
		if (n == 2 && in[i] == '.' && in[i + 1] == '.') {
			why = "path contains a '..' component";
			break;
		}
		if (n > LZ_LAYER_NAME_MAX) {
			why = "path component longer than 255 bytes";
			break;
		}
		if (o > 0 && o - last >= LZ_LAYERPATH_WH_LEN &&
		    memcmp(p->full + last, LZ_LAYERPATH_WH, LZ_LAYERPATH_WH_LEN) == 0) {
			why = "whiteout name used as a directory";
			break;
		}
		if (o > 0)
			p->full[o++] = '/';
		last = o;
		memcpy(p->full + o, in + i, n);
		o += n;
		i = j + 1;
	}
	if (why != NULL) {
		/* The raw path may hold a NUL or be huge: show a bounded prefix. */
		return lz_err_set(err, EINVAL, "layer entry '%.*s' refused: %s",
				  (int)strnlen(in, len < 256 ? len : 256), in, why);
	}
	p->full[o] = '\0';
	p->len = o;
	memcpy(p->parent, p->full, last > 0 ? last - 1 : 0);
	p->parent[last > 0 ? last - 1 : 0] = '\0';
	p->name = p->full + last;
	return 0;
}

int lz_layerpath_push(char *buf, size_t *len, const char *name)
{
	size_t n = strlen(name), sep = *len > 0;
	if (*len + sep + n > LZ_LAYER_PATH_MAX)
		return -ENAMETOOLONG;
	if (sep)
		buf[(*len)++] = '/';
	memcpy(buf + *len, name, n + 1);
	*len += n;
	return 0;
}

void lz_layerpath_pop(char *buf, size_t *len, size_t old)
{
	*len = old;
	buf[old] = '\0';
}
