/* Metadata of layer entries (see layermeta.h for the contract). */
#include "image/layermeta.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "image/layertree.h"

int lz_layermeta_owner(struct archive_entry *e, const char *path, uid_t *ret_uid, gid_t *ret_gid,
		       struct lz_err *err)
{
	la_int64_t u = archive_entry_uid(e), g = archive_entry_gid(e);
	/* (uid_t)-1 means "leave unchanged" to chown: refuse it too. */
	if (u < 0 || u >= (la_int64_t)UINT32_MAX || g < 0 || g >= (la_int64_t)UINT32_MAX)
		return lz_layerpath_refuse(err, path, "owner or group out of range");
	*ret_uid = (uid_t)u;
	*ret_gid = (gid_t)g;
	return 0;
}

void lz_layermeta_times(struct archive_entry *e, struct timespec ts[2])
{
	if (archive_entry_mtime_is_set(e)) {
		long ns = archive_entry_mtime_nsec(e);
		ts[1].tv_sec = archive_entry_mtime(e);
		ts[1].tv_nsec = ns >= 0 && ns < 1000000000L ? ns : 0;
	} else {
		ts[1].tv_sec = 0;
		ts[1].tv_nsec = UTIME_OMIT;
	}
	ts[0] = ts[1];
}

void lz_layermeta_sample(char samples[][LZ_LAYER_REPORT_TEXT], uint64_t count, const char *a,
			 const char *b)
{
	if (count > LZ_LAYER_REPORT_PATHS)
		return;
	/* Samples are diagnostics: truncation is fine. */
	char *out = samples[count - 1];
	size_t n = strnlen(lz_layerpath_shown(a), LZ_LAYER_REPORT_TEXT - 1);
	memcpy(out, lz_layerpath_shown(a), n);
	if (b != NULL && n + 1 < LZ_LAYER_REPORT_TEXT) {
		size_t m = strnlen(b, LZ_LAYER_REPORT_TEXT - n - 2);
		out[n++] = ' ';
		memcpy(out + n, b, m);
		n += m;
	}
	out[n] = '\0';
}

static void skip_xattr(struct lz_layer_report *rep, const char *path, const char *name)
{
	rep->skipped_xattrs++;
	lz_layermeta_sample(rep->skipped_xattr_samples, rep->skipped_xattrs, path, name);
}

/* Not user.overlay.*: the prepared tree is an overlay's lower layer
 * (userxattr), and overlayfs would read those as its own metadata
 * (opaque, redirect, whiteout) written by the image. */
static bool xattr_allowed(const char *name)
{
	return (strncmp(name, "user.", 5) == 0 && name[5] != '\0' && strncmp(name, "user.overlay.", 13) != 0) ||
	       strcmp(name, "security.capability") == 0;
}

int lz_layermeta_xattrs(struct archive_entry *e, int fd, const char *path,
			struct lz_layer_report *rep, struct lz_err *err)
{
	const char *name;
	const void *value;
	size_t size;
	const char *seen[LZ_LAYER_MAX_XATTRS];
	size_t nseen = 0, applied = 0;
	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
		/* libarchive surfaces an xattr once per pax spelling
		 * (SCHILY.xattr.*, LIBARCHIVE.xattr.*): the first one wins. */
		bool dup = false;
		for (size_t i = 0; name != NULL && i < nseen && !dup; i++)
			dup = strcmp(seen[i], name) == 0;
		if (dup)
			continue;
		if (nseen == LZ_LAYER_MAX_XATTRS)
			return lz_layerpath_refuse(err, path, "too many xattrs");
		if (name != NULL)
			seen[nseen++] = name;
		if (name == NULL || fd < 0 || !xattr_allowed(name)) {
			skip_xattr(rep, path, name ? name : "(unnamed)");
			continue;
		}
		if (fsetxattr(fd, name, value, size, 0) < 0) {
			if (errno == ENOTSUP || errno == EPERM) {
				skip_xattr(rep, path, name);
				continue;
			}
			return lz_layerpath_fail(err, errno, path, "set xattr on", path);
		}
		rep->xattr_bytes += (applied++ == 0 ? LZ_LAYER_XATTR_BLOCK : 0) + strlen(name) + size;
	}
	return 0;
}

int lz_layermeta_finish_special(struct archive_entry *e, int pfd, const struct lz_layerpath *p,
				bool chmod, struct lz_layer_report *rep, struct lz_err *err)
{
	uid_t uid = 0;
	gid_t gid = 0;
	struct timespec ts[2];
	int r = lz_layermeta_owner(e, p->full, &uid, &gid, err);
	if (r < 0)
		return r;
	if (fchownat(pfd, p->name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
		return lz_layerpath_fail(err, errno, p->full, "chown", p->full);
	if (chmod &&
	    (r = lz_layertree_chmod_nofollow(pfd, p->name, archive_entry_perm(e) & 07777)) < 0)
		return lz_layerpath_fail(err, -r, p->full, "chmod", p->full);
	if ((r = lz_layermeta_xattrs(e, -1, p->full, rep, err)) < 0)
		return r;
	lz_layermeta_times(e, ts);
	if (utimensat(pfd, p->name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return lz_layerpath_fail(err, errno, p->full, "set times of", p->full);
	return 0;
}
