#include "image/transport.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/domain.h"
#include "image/prepare.h"
#include "proc/spawn.h"
#include "fs/tree.h"
#include "util/cleanup.h"
#include "util/escape.h"

#define SKOPEO_MESSAGES_MAX 16384

/* What skopeo may write to its messages file (in memory) before it is
 * stopped: a registry's error bodies are far smaller. */
#define SKOPEO_MESSAGES_CAP (1 << 20)

/* How often a running transport's disk use and messages are looked at:
 * what a download can overshoot the reserve by is what it writes in
 * this time. */
#define TRANSPORT_WATCH_MS 50

/* skopeo's messages carry a registry's own text (an error body, a
 * header): relayed to the developer's terminal escaped, line by line. */
static void relay_messages(int fd)
{
	char buf[SKOPEO_MESSAGES_MAX];
	off_t size = lseek(fd, 0, SEEK_END);
	ssize_t n = pread(fd, buf, sizeof(buf), 0);
	if (n <= 0)
		return;
	lz_escape_lines(STDERR_FILENO, "skopeo: ", buf, (size_t)n);
	if (size > n)
		dprintf(STDERR_FILENO, "skopeo: (%lld more bytes not shown)\n", (long long)(size - n));
}

/* Whether the end of skopeo's messages (its error) says a write was
 * refused for its size (Go's text for EFBIG): only then is the per-file
 * room worth naming. */
static bool said_file_too_large(int fd)
{
	char buf[SKOPEO_MESSAGES_MAX + 1];
	off_t size = lseek(fd, 0, SEEK_END);
	off_t from = size > SKOPEO_MESSAGES_MAX ? size - SKOPEO_MESSAGES_MAX : 0;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, from);
	if (n <= 0)
		return false;
	buf[n] = '\0'; /* a NUL in the text ends the search early: a missed hint only */
	return strcasestr(buf, "file too large") != NULL;
}

struct watch_ctx {
	int layout_fd, messages;
};

/* A download fills the Storage Root no further than the preparer would,
 * and its messages (a registry's text) stay small. */
static int transport_check(void *ctxp, struct lz_err *err)
{
	const struct watch_ctx *ctx = ctxp;
	struct stat st;
	int r = lz_prepare_reserve_check(ctx->layout_fd, NULL, err);
	if (r < 0)
		return lz_err_prefix(err, r, "stopped: ");
	if (fstat(ctx->messages, &st) == 0 && st.st_size > SKOPEO_MESSAGES_CAP)
		return lz_err_set(err, EMSGSIZE, "stopped: skopeo wrote more than %d bytes of messages",
				  SKOPEO_MESSAGES_CAP);
	return 0;
}

int lz_transport_fetch(const struct lz_path *storage_root, const struct lz_path *skopeo,
		       const struct lz_image_ref *ref, struct lz_transport *ret, struct lz_err *err)
{
	struct lz_transport t = LZ_TRANSPORT_INIT;
	uint8_t rnd[16];
	_cleanup_close_ int messages = -EBADF; /* skopeo's stderr */
	int r;

	if (ref->kind == LZ_IMAGE_OCI)
		return lz_err_set(err, EINVAL, "an oci: image needs no transport");
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return lz_err_set(err, EIO, "getrandom failed");
	memcpy(t.name, "transport-", 10);
	lz_hex(rnd, sizeof(rnd), t.name + 10);

	if ((r = lz_path_owned_child(storage_root, "images", true, &t.images, err)) < 0 ||
	    (r = lz_path_owned_child(&t.images, t.name, true, &t.layout, err)) < 0)
		goto fail;
	/* Pathname handoff (spec 3.2): only after revalidating the handle. */
	if ((r = lz_path_revalidate(&t.layout, err)) < 0)
		goto fail;

	char src[LZ_IMAGEREF_MAX + 32], dst[LZ_PATH_MAX + 32];
	char home[LZ_PATH_MAX + 16], tmpdir[LZ_PATH_MAX + 16];
	if (ref->kind == LZ_IMAGE_DOCKER)
		snprintf(src, sizeof(src), "docker://%s", ref->ref);
	else
		snprintf(src, sizeof(src), "docker-archive:%s", ref->path);
	snprintf(dst, sizeof(dst), "oci:%s:latest", t.layout.canonical);
	snprintf(home, sizeof(home), "HOME=%s", t.layout.canonical);
	snprintf(tmpdir, sizeof(tmpdir), "TMPDIR=%s", t.layout.canonical);
	char *const argv[] = { "skopeo", "copy", "--quiet", src, dst, NULL };
	char *const envp[] = { home, tmpdir, NULL };
	if ((messages = memfd_create("lazaret-skopeo", MFD_CLOEXEC)) < 0) {
		r = lz_err_set(err, errno, "memfd_create: %s", strerror(errno));
		goto fail;
	}
	/* No file of skopeo's may grow past the room (a blob read from a
	 * local archive fills it faster than the watch looks); the watch
	 * bounds what they take together. */
	struct lz_prepare_budget room = { 0 };
	if ((r = lz_prepare_reserve_check(t.layout.fd, &room, err)) < 0) {
		lz_err_prefix(err, r, "not started: ");
		goto fail;
	}
	struct lz_spawn spec = { .label = "skopeo", .exe_fd = skopeo->fd, .argv = argv,
				 .envp = envp, .stdin_fd = -1, .stdout_fd = -1,
				 .stderr_fd = messages, .max_file_bytes = room.bytes == UINT64_MAX ? 0 : room.bytes,
				 .max_data_bytes = LZ_TRANSPORT_MAX_DATA };
	struct watch_ctx ctx = { t.layout.fd, messages };
	const struct lz_spawn_watch watch = { TRANSPORT_WATCH_MS, transport_check, &ctx };
	r = lz_spawn_run_watched(&spec, "skopeo copy", LZ_TRANSPORT_TIMEOUT_MS, &watch, err);
	relay_messages(messages);
	if (r == -EIO && spec.max_file_bytes > 0 && said_file_too_large(messages)) {
		char why[sizeof(err->msg)];
		snprintf(why, sizeof(why), "%s", err->msg);
		lz_err_set(err, EIO,
			   "%s (no file of skopeo's may pass %llu bytes, the room the Storage Root's file system has "
			   "beyond a twentieth of it: the image does not fit there; free space or move the Storage Root)",
			   why, (unsigned long long)spec.max_file_bytes);
	}
	if (r < 0) {
		lz_err_prefix(err, r, "copying %s: ", src);
		goto fail;
	}
	*ret = t;
	return 0;
fail:
	lz_transport_discard(&t);
	return r;
}

void lz_transport_discard(struct lz_transport *t)
{
	struct lz_err ignored;
	if (t->images.fd >= 0 && t->name[0])
		(void)lz_tree_remove(t->images.fd, t->name, &ignored);
	lz_path_release(&t->layout);
	lz_path_release(&t->images);
	t->name[0] = '\0';
}
