/* Prepared lowers: preparation, publication and reclamation; see prepare.h. */
#include "image/prepare.h"

#include <dirent.h>
#include <linux/sched.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "config/domain.h"
#include "image/archivelib.h"
#include "image/imageref.h"
#include "image/layer.h"
#include "image/oci.h"
#include "proc/pidref.h"
#include "fs/file.h"
#include "fs/tree.h"
#include "proc/broker.h"
#include "proc/confine.h"
#include "proc/spawn.h"
#include "proc/userns.h"
#include "util/cleanup.h"
#include "util/fdutil.h"
#include "util/sys.h"
#include "util/testfault.h"

int lz_prepare_artifact_id(const char *manifest_digest, char ret[LZ_ARTIFACT_ID_HEX + 1])
{
	static const char context[] = "lazaret-prepared-artifact-v1";
	const uint32_t version = LZ_PREPARE_FORMAT_VERSION;
	size_t n = strlen(manifest_digest);
	uint8_t be_len[4] = { (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n };
	uint8_t be_ver[4] = { 0, 0, 0, (uint8_t)version };
	uint8_t four[4] = { 0, 0, 0, 4 };
	uint8_t digest[32];
	unsigned int dn = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (ctx == NULL)
		return -ENOMEM;
	bool ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
		  EVP_DigestUpdate(ctx, context, sizeof(context) - 1) == 1 &&
		  EVP_DigestUpdate(ctx, be_len, 4) == 1 &&
		  EVP_DigestUpdate(ctx, manifest_digest, n) == 1 &&
		  EVP_DigestUpdate(ctx, four, 4) == 1 && EVP_DigestUpdate(ctx, be_ver, 4) == 1 &&
		  EVP_DigestFinal_ex(ctx, digest, &dn) == 1 && dn == sizeof(digest);
	EVP_MD_CTX_free(ctx);
	if (!ok)
		return -EIO;
	lz_hex(digest, sizeof(digest), ret);
	return 0;
}

static int random_id(char ret[LZ_ARTIFACT_ID_HEX + 1], struct lz_err *err)
{
	uint8_t bytes[32];
	if (getrandom(bytes, sizeof(bytes), 0) != (ssize_t)sizeof(bytes))
		return lz_err_set(err, errno ? errno : EIO, "getrandom failed");
	lz_hex(bytes, sizeof(bytes), ret);
	return 0;
}

/* ---- the preparation worker (runs inside the user namespace) ---------- */

enum { REC_LAYER = 1, REC_BYTES = 2, REC_DONE = 3 };

struct progress_rec {
	uint32_t kind;
	uint32_t layer;
	uint64_t a; /* REC_BYTES: bytes done in the layer; REC_DONE: regular bytes */
	uint64_t b; /* REC_DONE: skipped devices */
};

struct worker_arg {
	int layout_fd;
	int rootfs_fd;
	const struct lz_oci_image *image;
	int progress_fd;
	uint32_t layer;
	uint64_t memory; /* bytes of data it may add (LZ_PREPARE_WORKER_MEMORY) */
	int (*check)(void *ctx, struct lz_err *err); /* tests (prepare.h) */
	void *check_ctx;
};

static void send_rec(int fd, uint32_t kind, uint32_t layer, uint64_t a, uint64_t b)
{
	struct progress_rec rec = { kind, layer, a, b };
	/* Under PIPE_BUF, so the record is written whole or not at all. */
	(void)!write(fd, &rec, sizeof(rec));
}

static void worker_progress(void *ctx, uint64_t bytes_done)
{
	struct worker_arg *w = ctx;
	send_rec(w->progress_fd, REC_BYTES, w->layer, bytes_done, 0);
}

int lz_prepare_budget(int dir_fd, struct lz_prepare_budget *ret, struct lz_err *err)
{
	struct statvfs sv;
	if (fstatvfs(dir_fd, &sv) < 0)
		return lz_err_set(err, errno, "the Storage Root's file system: %s", strerror(errno));
	uint64_t unit = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
	uint64_t spare = sv.f_blocks / 20;
	ret->bytes = sv.f_blocks == 0 ? UINT64_MAX /* counts none (ramfs, some FUSE) */
		     : sv.f_bavail > spare ? (sv.f_bavail - spare) * unit
					   : 0;
	ret->block = unit ? unit : 4096;
	uint64_t spare_inodes = sv.f_files / 20;
	ret->entries = sv.f_files == 0 ? UINT64_MAX : sv.f_favail > spare_inodes ? sv.f_favail - spare_inodes : 0;
	return 0;
}

int lz_prepare_reserve_check(int dir_fd, struct lz_prepare_budget *ret, struct lz_err *err)
{
	struct lz_prepare_budget b = { 0 };
	int r = lz_prepare_budget(dir_fd, &b, err);
	if (r < 0)
		return r;
	if (ret != NULL)
		*ret = b;
	if (b.bytes == 0 || b.entries == 0)
		return lz_err_set(err, ENOSPC,
				  "the Storage Root's file system has no more than a twentieth of it "
				  "free (the image is larger than the room there, or something else filled it); "
				  "free space there");
	return 0;
}

/* The room layer i may take: what the budget leaves after the layers
 * before it, and after the copy of its blob (oci.h). The uncompressed
 * streams of all layers, read whether written or skipped, share the byte
 * budget too: an image cannot make more work than it could make files. */
static int layer_room(const struct lz_prepare_budget *b, uint64_t written, uint64_t entries, uint64_t blob,
		      uint64_t streamed, struct lz_layer_options *opts, struct lz_err *err)
{
	if (b->bytes <= written || b->bytes - written <= blob || b->entries <= entries || b->bytes <= streamed)
		return lz_err_set(err, ENOSPC,
				  "the image needs more of the Storage Root's file system than it has free "
				  "beyond a twentieth of it (%llu bytes and %llu files); free space there",
				  (unsigned long long)b->bytes, (unsigned long long)b->entries);
	opts->max_regular_bytes = b->bytes == UINT64_MAX ? 0 : b->bytes - written - blob;
	opts->entry_bytes = b->block;
	opts->max_entries = b->entries == UINT64_MAX ? 0 : b->entries - entries;
	opts->max_stream_bytes = b->bytes == UINT64_MAX ? 0 : b->bytes - streamed;
	return 0;
}

/* The private writable memory this process holds (VmData: what
 * RLIMIT_DATA counts), in bytes. */
static int data_in_use(uint64_t *ret, struct lz_err *err)
{
	char buf[4096];
	ssize_t n = lz_read_small("/proc/self/status", buf, sizeof(buf));
	if (n < 0)
		return lz_err_set(err, (int)-n, "/proc/self/status: %s", strerror((int)-n));
	const char *v = strstr(buf, "\nVmData:");
	unsigned long long kib = 0;
	if (v == NULL || sscanf(v + 8, "%llu kB", &kib) != 1 || kib > UINT64_MAX / 1024 / 2)
		return lz_err_set(err, EPROTO, "/proc/self/status: no VmData");
	*ret = (uint64_t)kib * 1024;
	return 0;
}

/* Step one of the worker, before it reads a byte of the image (prepare.h):
 * its descriptors, its memory, its authority. The worker inherited the
 * whole caller (its terminal, the Storage Root, the configuration's
 * descriptors); libarchive, already loaded, needs no file after this. */
static int confine_worker(struct worker_arg *w, struct lz_err *err)
{
	int keep[] = { w->layout_fd, w->rootfs_fd, w->progress_fd, lz_broker_report_fd() };
	int r = lz_fds_keep_only(keep, LZ_ARRAY_SIZE(keep));
	if (r < 0)
		return lz_err_set(err, -r, "standard streams to /dev/null: %s", strerror(-r));
	uint64_t used = 0;
	r = data_in_use(&used, err);
	if (r < 0)
		return lz_err_prefix(err, r, "limiting the preparation worker's memory: ");
	struct rlimit lim = { .rlim_cur = used + w->memory, .rlim_max = used + w->memory };
	if (setrlimit(RLIMIT_DATA, &lim) < 0)
		return lz_err_set(err, errno, "limiting the preparation worker's memory: %s", strerror(errno));
	/* what Landlock cannot restrict of the tree (modes, owners, times,
	 * xattrs) is the layers' to set anyway */
	r = lz_confine(&(struct lz_confine){ .read_paths = &w->layout_fd, .n_read_paths = 1,
					     .write_dirs = &w->rootfs_fd, .n_write_dirs = 1 },
		       err);
	if (r < 0)
		return lz_err_prefix(err, r, "confining the preparation worker: ");
	return 0;
}

static int worker_apply(void *argp, struct lz_err *err)
{
	struct worker_arg *w = argp;
	uint64_t regular = 0, skipped = 0, entries = 0, streamed = 0;
	struct lz_prepare_budget budget;
	int r = confine_worker(w, err);
	if (r < 0 || (w->check != NULL && (r = w->check(w->check_ctx, err)) < 0))
		return r;
	if ((r = lz_prepare_budget(w->rootfs_fd, &budget, err)) < 0)
		return r;
	for (size_t i = 0; i < w->image->n_layers; i++) {
		const struct lz_oci_layer *layer = &w->image->layers[i];
		struct lz_layer_report report;
		/* declared: its media type's compression and its config diff_id
		 * are checked against what the layer holds (layer.h) */
		struct lz_layer_options opts = { .progress = worker_progress, .progress_ctx = w,
						 .declared = layer };
		_cleanup_close_ int fd = -EBADF;
		w->layer = (uint32_t)i + 1;
		send_rec(w->progress_fd, REC_LAYER, w->layer, 0, 0);
		if ((r = layer_room(&budget, regular + entries * budget.block, entries, layer->size, streamed, &opts,
				    err)) < 0)
			return r;
		/* the copy is an unnamed file beside the tree it fills */
		if ((r = lz_oci_open_blob(w->layout_fd, layer, w->rootfs_fd, &fd, err)) < 0)
			return r;
		/* over the room it was given, or the file system full: what to
		 * do is the same (a file too large for the file system, EFBIG,
		 * keeps its own message) */
		if ((r = lz_layer_apply(w->rootfs_fd, fd, &opts, &report, err)) == -ENOSPC)
			return layer_room(&budget, UINT64_MAX, 0, 0, 0, &opts, err);
		if (r == -ENOMEM)
			return lz_err_prefix(err, r,
					     "layer %zu (%s) needs more memory than the preparation worker may "
					     "take (%llu MiB): ",
					     i + 1, layer->digest, (unsigned long long)(w->memory >> 20));
		if (r < 0)
			return lz_err_prefix(err, r, "layer %zu (%s): ", i + 1, layer->digest);
		regular += report.regular_bytes;
		entries += report.entries + report.implied_dirs;
		streamed += report.stream_bytes;
		skipped += report.skipped_devices;
		send_rec(w->progress_fd, REC_BYTES, w->layer, layer->size, 0);
	}
	send_rec(w->progress_fd, REC_DONE, w->layer, regular, skipped);
	return 0;
}

/* ---- preparation --------------------------------------------------------- */

struct record_worker_ctx {
	int root_fd;
	const char *op_id;
};

/* Persists the worker's pidfs identity before it is released (spec 3.3). */
static int record_worker(void *ctxp, const struct lz_pidref *ref, int pidfd, struct lz_err *err)
{
	(void)pidfd;
	struct record_worker_ctx *ctx = ctxp;
	struct lz_catalog_worker w = {
		.pidfs_dev = ref->pidfs_dev,
		.pidfs_ino = ref->pidfs_ino,
		.pid = ref->pid,
		.start_time = ref->start_time,
	};
	memcpy(w.boot_id, ref->boot_id, sizeof(w.boot_id));
	return lz_catalog_prepare_intent_set_worker(ctx->root_fd, ctx->op_id, &w, err);
}

static void report_progress(const struct lz_prepare_request *req, struct lz_prepare_progress *p)
{
	if (req->progress)
		req->progress(req->progress_ctx, p);
}

/* Reads the worker's records until its end of the pipe closes: false when
 * the deadline (lz_now_ms) came first. */
static bool follow_worker(const struct lz_prepare_request *req, const struct lz_oci_image *image,
			  int fd, int64_t deadline, struct progress_rec *ret_done)
{
	struct lz_prepare_progress p = { .n_layers = (uint32_t)image->n_layers, .bytes_total = image->layers_bytes };
	uint64_t before = 0; /* bytes of the layers already finished */
	struct progress_rec rec;
	memset(ret_done, 0, sizeof(*ret_done));
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int ready = poll(&pfd, 1, lz_remaining_ms(deadline));
		if (ready == 0)
			return false;
		ssize_t n = ready < 0 ? -1 : read(fd, &rec, sizeof(rec));
		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof(rec))
			return true; /* its end, or a pipe that cannot be read */
		if (rec.layer == 0 || rec.layer > image->n_layers)
			continue;
		if (rec.kind == REC_LAYER) {
			before = 0;
			for (uint32_t i = 0; i + 1 < rec.layer; i++)
				before += image->layers[i].size;
			p.layer = rec.layer;
			p.bytes_done = before;
		} else if (rec.kind == REC_BYTES) {
			uint64_t cap = image->layers[rec.layer - 1].size;
			p.bytes_done = before + (rec.a < cap ? rec.a : cap);
		} else if (rec.kind == REC_DONE) {
			*ret_done = rec;
			continue;
		}
		report_progress(req, &p);
	}
}

/* Follows the worker to its end within its time bound, and reaps it. */
static int run_worker(const struct lz_prepare_request *req, const struct lz_oci_image *image,
		      struct lz_broker_child *worker, int progress_fd, struct progress_rec *ret_done,
		      struct lz_err *err)
{
	uint32_t timeout_ms = req->worker_timeout_ms ? req->worker_timeout_ms : LZ_PREPARE_WORKER_TIMEOUT_MS;
	char bound[32];
	if (timeout_ms % 1000 == 0)
		snprintf(bound, sizeof(bound), "%u s", timeout_ms / 1000);
	else
		snprintf(bound, sizeof(bound), "%u.%03u s", timeout_ms / 1000, timeout_ms % 1000);
	int64_t deadline = lz_now_ms() + timeout_ms;
	if (!follow_worker(req, image, progress_fd, deadline, ret_done)) {
		lz_broker_kill(worker);
		return lz_err_set(err, ETIMEDOUT,
				  "the preparation worker was still at work after %s, its time bound; it was stopped",
				  bound);
	}
	int status = 0;
	int r = lz_broker_wait(worker, lz_remaining_ms(deadline), &status, err);
	if (r == -ETIMEDOUT)
		return lz_err_set(err, ETIMEDOUT,
				  "the preparation worker did not end within %s, its time bound; it was stopped", bound);
	if (r < 0)
		return r;
	if (ret_done->kind != REC_DONE)
		return lz_err_set(err, EIO,
				  "the preparation worker ended (status %d) without finishing or saying why (a "
				  "library may end it so when its %llu MiB of memory run out)",
				  status,
				  (unsigned long long)((req->worker_memory ? req->worker_memory
									   : LZ_PREPARE_WORKER_MEMORY) >> 20));
	return 0;
}

static int open_dir(const struct lz_path *root, const char *name, struct lz_path *ret,
		    struct lz_err *err)
{
	return lz_path_owned_child(root, name, true, ret, err);
}

static int existing_artifact(const struct lz_prepare_request *req, const char *id,
			     struct lz_prepare_result *res, bool *ret_found, struct lz_err *err)
{
	struct lz_catalog_artifact a;
	int r = lz_catalog_artifact_get(req->storage_root->fd, id, &a, err);
	if (r == -ENOENT) {
		*ret_found = false;
		return 0;
	}
	if (r < 0)
		return r;
	bool published = a.state == LZ_CATALOG_ARTIFACT_PUBLISHED;
	res->size = a.size;
	lz_catalog_artifact_clear(&a);
	if (!published)
		return lz_err_set(err, EBUSY, "prepared artifact %s is being reclaimed; run "
					      "'lazaret image gc' and prepare again", id);
	struct lz_path prepared = LZ_PATH_INIT, tree = LZ_PATH_INIT;
	r = open_dir(req->storage_root, "prepared", &prepared, err);
	if (r >= 0)
		r = lz_path_owned_child(&prepared, id, false, &tree, err);
	lz_path_release(&prepared);
	lz_path_release(&tree);
	if (r < 0)
		return lz_err_prefix(err, r, "the catalog lists artifact %s but its tree is unusable: ",
				     id);
	*ret_found = true;
	return 0;
}

/* How long the loser of a publication race waits for the winner's row. */
#define RACE_ROW_WAIT_MS 2000

struct staging {
	struct lz_path staging;  /* staging/ */
	struct lz_path op_dir;   /* staging/<op> */
	int rootfs_fd;           /* staging/<op>/rootfs */
};

/* The staging directory's flock: shared by each preparation from before its
 * intent until its tree is published or discarded, exclusive by gc while it
 * reclaims staging trees, which it does only when no preparation runs
 * (OR-7: a tree in progress is never deleted; a preparation's worker may
 * have ended while its preparer still publishes). -EWOULDBLOCK when how
 * has LOCK_NB and the other side holds it. */
static int preparers_lock(const struct lz_path *staging, int how, int *ret, struct lz_err *err)
{
	_cleanup_close_ int fd = openat(staging->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return lz_err_set(err, errno, "open %s: %s", staging->canonical, strerror(errno));
	int r;
	while ((r = flock(fd, how)) < 0 && errno == EINTR)
		;
	if (r < 0)
		return errno == EWOULDBLOCK ? -EWOULDBLOCK
					    : lz_err_set(err, errno, "lock %s: %s", staging->canonical, strerror(errno));
	*ret = TAKE_FD(fd);
	return 0;
}

/* The file beside rootfs that names the operation which made the tree:
 * gc moves a prepared/<id> back to staging through an intent only when
 * the tree says it is that intent's (prepared/<id> is every preparation's
 * name for the image; an older Lazaret's preparer takes no lock). */
#define OP_MARKER "operation"

/* staging/<op>/rootfs and its operation marker, in the staging directory
 * st->staging opened. */
static int make_staging(const char *op_id, struct staging *st, struct lz_err *err)
{
	int r;
	if ((r = lz_path_owned_child(&st->staging, op_id, true, &st->op_dir, err)) < 0 ||
	    (r = lz_file_create(st->op_dir.fd, OP_MARKER, op_id, strlen(op_id), 0400, LZ_RESOLVE_OWNED, err)) < 0)
		return r;
	if (mkdirat(st->op_dir.fd, "rootfs", 0755) < 0)
		return lz_err_set(err, errno, "create staging rootfs: %s", strerror(errno));
	st->rootfs_fd = lz_openat2(st->op_dir.fd, "rootfs", O_PATH | O_DIRECTORY | O_CLOEXEC,
				   LZ_RESOLVE_OWNED);
	if (st->rootfs_fd < 0)
		return lz_err_set(err, errno, "open staging rootfs: %s", strerror(errno));
	return 0;
}

static void staging_release(struct staging *st)
{
	lz_close_fdp(&st->rootfs_fd);
	lz_path_release(&st->op_dir);
	lz_path_release(&st->staging);
}

/* Removes a failed staging tree, then withdraws its intent: the catalog ends
 * as it began. A tree that cannot be removed keeps its intent for gc. */
static void discard(const struct lz_idmap *map, const struct lz_prepare_request *req,
		    struct staging *st, const char *op_id)
{
	struct lz_err ignored;
	lz_close_fdp(&st->rootfs_fd);
	lz_path_release(&st->op_dir);
	if (lz_catalog_prepare_intent_abandon(req->storage_root->fd, op_id, &ignored) < 0)
		return;
	if (st->staging.fd >= 0 && lz_tree_remove_in_userns(map, st->staging.fd, op_id, &ignored) < 0)
		return;
	(void)lz_catalog_prepare_intent_remove(req->storage_root->fd, op_id, &ignored);
}

int lz_prepare_image(const struct lz_prepare_request *req, struct lz_prepare_result *ret,
		     struct lz_err *err)
{
	struct lz_oci_image *image = NULL;
	struct lz_prepare_result res = { 0 };
	struct staging st = { LZ_PATH_INIT, LZ_PATH_INIT, -EBADF };
	struct lz_path prepared = LZ_PATH_INIT;
	struct lz_idmap map;
	char op_id[LZ_ARTIFACT_ID_HEX + 1];
	bool found = false, intent = false, raced = false;
	int progress[2] = { -EBADF, -EBADF };
	int root = req->storage_root->fd;
	_cleanup_close_ int preparing = -EBADF; /* preparers_lock, until the end */
	int r;

	/* Unknown catalog versions and a missing libarchive refuse before
	 * anything is read or made. */
	if ((r = lz_archivelib_load(err)) < 0 || (r = lz_catalog_check(root, err)) < 0 ||
	    (r = lz_oci_open(req->layout_fd, req->tag, &image, err)) < 0)
		goto fail;
	snprintf(res.manifest_digest, sizeof(res.manifest_digest), "%s", image->manifest_digest);
	snprintf(res.config_digest, sizeof(res.config_digest), "%s", image->config_digest);
	if ((r = lz_prepare_artifact_id(image->manifest_digest, res.artifact_id)) < 0) {
		lz_err_set(err, -r, "computing the prepared-artifact ID failed");
		goto fail;
	}
	if ((r = existing_artifact(req, res.artifact_id, &res, &found, err)) < 0)
		goto fail;
	if (found) {
		res.existed = true;
		goto named;
	}
	if ((r = lz_idmap_for_invoking_user(&map, err)) < 0 || (r = random_id(op_id, err)) < 0 ||
	    (r = open_dir(req->storage_root, "staging", &st.staging, err)) < 0)
		goto fail;
	if ((r = preparers_lock(&st.staging, LOCK_SH | LOCK_NB, &preparing, err)) == -EWOULDBLOCK) {
		/* An image gc is reclaiming trees: said, then waited for. */
		report_progress(req, &(struct lz_prepare_progress){ .n_layers = (uint32_t)image->n_layers,
								     .bytes_total = image->layers_bytes,
								     .waiting_for_gc = true });
		r = preparers_lock(&st.staging, LOCK_SH, &preparing, err);
	}
	if (r < 0)
		goto fail;

	/* Durable intent first, then the staging tree (OR-7). */
	if ((r = lz_catalog_prepare_intent_begin(root, op_id, res.artifact_id, op_id, err)) < 0)
		goto fail;
	intent = true;
	if ((r = make_staging(op_id, &st, err)) < 0)
		goto fail;
	if (pipe2(progress, O_CLOEXEC) < 0) {
		r = lz_err_set(err, errno, "pipe: %s", strerror(errno));
		goto fail;
	}

	struct worker_arg warg = { .layout_fd = req->layout_fd, .rootfs_fd = st.rootfs_fd, .image = image,
				   .progress_fd = progress[1],
				   .memory = req->worker_memory ? req->worker_memory : LZ_PREPARE_WORKER_MEMORY,
				   .check = req->worker_check, .check_ctx = req->worker_check_ctx };
	struct record_worker_ctx rctx = { root, op_id };
	struct lz_broker_child worker = LZ_BROKER_CHILD_INIT;
	/* a network namespace of its own, empty (its user namespace owns it):
	 * the worker fetches nothing, skopeo did before it; and a PID
	 * namespace of its own, whose init it is: a process a subverted
	 * worker forks is killed when it ends, before its tree is published
	 * (it would keep the tree's descriptor and write later) */
	struct lz_broker_spec wspec = { .label = "preparation worker", .comm = "lz-prepare",
					.clone_flags = CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWPID,
					.map = &map, .join_pidfd = -1, .fn = worker_apply, .arg = &warg,
					.staged = record_worker, .ctx = &rctx };
	r = lz_broker_spawn(&wspec, &worker, err);
	lz_close_fdp(&progress[1]);
	if (r < 0) {
		lz_err_prefix(err, r, "preparation worker: ");
		goto fail;
	}
	struct progress_rec done;
	if ((r = run_worker(req, image, &worker, progress[0], &done, err)) < 0)
		goto fail;
	res.size = done.a;
	res.skipped_devices = done.b;

	/* Publication: one atomic rename, then the catalog row. */
	if ((r = open_dir(req->storage_root, "prepared", &prepared, err)) < 0)
		goto fail;
	if (renameat2(st.staging.fd, op_id, prepared.fd, res.artifact_id, RENAME_NOREPLACE) < 0) {
		if (errno == EEXIST) {
			/* A concurrent preparation of the same image won (its
			 * catalog row may be a moment behind its rename). */
			discard(&map, req, &st, op_id);
			intent = false;
			res.existed = raced = true;
			goto named;
		}
		r = lz_err_set(err, errno, "publish %s: %s", res.artifact_id, strerror(errno));
		goto fail;
	}
	struct lz_catalog_artifact_spec spec = {
		.id = res.artifact_id,
		.source_ref = req->source_ref,
		.manifest_digest = image->manifest_digest,
		.config_digest = image->config_digest,
		.size = res.size,
	};
	if (lz_test_fault("catalog-refuses-publish"))
		r = lz_err_set(err, EIO, "test fault: the catalog refuses the publication");
	else
		r = lz_catalog_artifact_publish(root, op_id, &spec, err);
	if (r < 0) {
		/* No tree is published without its row: it goes back to
		 * staging, and is discarded with the intent. */
		if (renameat2(prepared.fd, res.artifact_id, st.staging.fd, op_id, RENAME_NOREPLACE) == 0)
			goto fail;
		int e = errno;
		lz_err_prefix(err, r, "the catalog refused %s, and its tree could not be moved back (%s): it stays "
				      "in prepared/ without a catalog row: ",
			      res.artifact_id, strerror(e));
		goto out;
	}
	goto done;
named:
	/* Prepared already, perhaps under another reference: this one names
	 * it now too, for lz_prepare_lookup (a docker:// reference is found by
	 * its text, the manifest it names is not known without the registry). */
	r = lz_catalog_artifact_name(root, res.artifact_id, req->source_ref, err);
	/* The winner of a race publishes its row a moment after its tree. A
	 * tree that stays without one was left by a preparation stopped
	 * between the two: gc reclaims it through that one's intent. */
	for (int i = 0; r == -ENOENT && raced && i < RACE_ROW_WAIT_MS / 50; i++) {
		(void)poll(NULL, 0, 50);
		r = lz_catalog_artifact_name(root, res.artifact_id, req->source_ref, err);
	}
	if (r == -ENOENT && raced) {
		r = lz_err_set(err, EEXIST, "prepared/%s exists without a catalog entry (a preparation was stopped "
					    "while publishing it); `lazaret image gc` reclaims it, then prepare again",
			       res.artifact_id);
	}
	if (r < 0)
		goto fail;
done:
	*ret = res;
	r = 0;
	goto out;
fail:
	if (intent)
		discard(&map, req, &st, op_id);
	lz_err_prefix(err, r, "image preparation failed, nothing was published: ");
out:
	lz_close_fdp(&progress[0]);
	lz_close_fdp(&progress[1]);
	staging_release(&st);
	lz_path_release(&prepared);
	lz_oci_image_free(image);
	return r;
}

/* ---- lookup for launches -------------------------------------------------- */

static int not_prepared(const char *image, bool older, struct lz_err *err)
{
	if (older)
		return lz_err_set(err, ENOENT, "image '%s' was prepared by an earlier Lazaret, whose "
				  "preparation checked less of the image: run 'lazaret image prepare %s'",
				  image, image);
	return lz_err_set(err, ENOENT, "image '%s' is not prepared: run 'lazaret image prepare %s'",
			  image, image);
}

/* When source_ref last named artifact a (-1: never): when a was published
 * under it, or when `image prepare` was last given it for a
 * (lz_catalog_artifact_name), whichever is later. */
static int64_t named_at(const struct lz_catalog_artifact *a, const char *source_ref,
			const struct lz_catalog_ref *refs, size_t n_refs)
{
	int64_t at = strcmp(a->source_ref, source_ref) == 0 ? a->created : -1;
	for (size_t i = 0; i < n_refs; i++)
		if (strcmp(refs[i].artifact_id, a->id) == 0 && refs[i].recorded >= at)
			at = refs[i].recorded;
	return at;
}

/* The newest published artifact of this preparer's format (its ID derives
 * from the manifest digest and LZ_PREPARE_FORMAT_VERSION) for a reference
 * (source_ref: the one it last named) or a manifest (manifest_digest);
 * *older tells whether one of an earlier format exists, which is never
 * used: what it was not checked for is not known to hold (spec 3.6
 * "Prepared lower"). */
static int find_current(int root_fd, const char *source_ref, const char *manifest_digest,
			char id[LZ_ARTIFACT_ID_HEX + 1], bool *older, struct lz_err *err)
{
	struct lz_catalog_artifact *v = NULL;
	struct lz_catalog_ref *refs = NULL;
	size_t n = 0, n_refs = 0;
	int64_t newest = -1;
	int r = lz_catalog_artifact_list(root_fd, &v, &n, err);
	if (r < 0)
		return r;
	if (source_ref != NULL && (r = lz_catalog_artifact_named(root_fd, source_ref, &refs, &n_refs, err)) < 0) {
		lz_catalog_artifact_list_free(v, n);
		return r;
	}
	for (size_t i = 0; i < n && r >= 0; i++) {
		char current[LZ_ARTIFACT_ID_HEX + 1];
		int64_t at = source_ref != NULL ? named_at(&v[i], source_ref, refs, n_refs) : v[i].created;
		if (v[i].state != LZ_CATALOG_ARTIFACT_PUBLISHED || at < 0 ||
		    (manifest_digest != NULL && strcmp(v[i].manifest_digest, manifest_digest) != 0))
			continue;
		if ((r = lz_prepare_artifact_id(v[i].manifest_digest, current)) < 0)
			r = lz_err_set(err, -r, "artifact ID: %s", strerror(-r));
		else if (strcmp(current, v[i].id) != 0)
			*older = true;
		else if (at > newest) {
			newest = at;
			memcpy(id, v[i].id, LZ_ARTIFACT_ID_HEX + 1);
		}
	}
	free(refs);
	lz_catalog_artifact_list_free(v, n);
	return r;
}

/* Whether layout is where `lazaret image build-default` writes the default
 * image of this Storage Root (the reference `lazaret init` configures). */
static bool is_default_layout(const struct lz_path *storage_root, const char *layout)
{
	const char *root = storage_root->canonical;
	size_t n = root != NULL ? strlen(root) : 0;
	return n > 0 && strncmp(layout, root, n) == 0 && strcmp(layout + n, "/images/default") == 0;
}

int lz_prepare_lookup(const struct lz_path *storage_root, const char *image,
		      char ret_id[LZ_ARTIFACT_ID_HEX + 1], int *ret_rootfs, struct lz_err *err)
{
	struct lz_image_ref ref;
	char id[LZ_ARTIFACT_ID_HEX + 1] = "";
	bool older = false;
	int r;
	if ((r = lz_image_ref_parse(image, &ref, err)) < 0 ||
	    (r = lz_catalog_check(storage_root->fd, err)) < 0)
		return r;
	if (ref.kind == LZ_IMAGE_OCI) {
		struct lz_path layout = LZ_PATH_INIT;
		struct lz_oci_image *img = NULL;
		char *canonical = realpath(ref.path, NULL);
		if (canonical == NULL && errno == ENOENT && is_default_layout(storage_root, ref.path))
			return lz_err_set(err, ENOENT, "image '%s' is not prepared: run 'lazaret image build-default'",
					  image);
		if (canonical == NULL)
			return lz_err_set(err, errno, "image layout '%s': %s", ref.path, strerror(errno));
		r = lz_path_open(canonical, &layout, err);
		free(canonical);
		if (r >= 0)
			r = lz_oci_open(layout.fd, ref.tag[0] ? ref.tag : NULL, &img, err);
		if (r >= 0)
			r = find_current(storage_root->fd, NULL, img->manifest_digest, id, &older, err);
		lz_oci_image_free(img);
		lz_path_release(&layout);
	} else {
		r = find_current(storage_root->fd, image, NULL, id, &older, err);
	}
	if (r < 0)
		return r;
	if (id[0] == '\0')
		return not_prepared(image, older, err);
	struct lz_path prepared = LZ_PATH_INIT, tree = LZ_PATH_INIT;
	r = open_dir(storage_root, "prepared", &prepared, err);
	if (r >= 0)
		r = lz_path_owned_child(&prepared, id, false, &tree, err);
	int fd = -EBADF;
	if (r >= 0 && (fd = lz_openat2(tree.fd, "rootfs", O_PATH | O_DIRECTORY | O_CLOEXEC,
				      LZ_RESOLVE_OWNED)) < 0)
		r = lz_err_set(err, errno, "prepared artifact %s: rootfs: %s", id, strerror(errno));
	lz_path_release(&prepared);
	lz_path_release(&tree);
	if (r < 0)
		return r;
	memcpy(ret_id, id, sizeof(id));
	*ret_rootfs = fd;
	return 0;
}

/* ---- reclamation (OR-7) -------------------------------------------------- */

struct gc_list {
	struct lz_gc_item *v;
	size_t n, cap;
};

static int gc_add(struct gc_list *l, enum lz_gc_action action, const char *where,
		  const char *name, uint64_t leases, struct lz_err *err)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		struct lz_gc_item *v = realloc(l->v, cap * sizeof(*v));
		if (v == NULL)
			return lz_err_set(err, ENOMEM, "out of memory");
		l->v = v;
		l->cap = cap;
	}
	struct lz_gc_item *it = &l->v[l->n++];
	it->action = action;
	it->leases = leases;
	snprintf(it->where, sizeof(it->where), "%s", where);
	snprintf(it->name, sizeof(it->name), "%s", name);
	return 0;
}

/* Names in dir (an O_PATH directory), skipping "." and "..". */
static int list_names(int dirfd, char ***ret, size_t *ret_n, struct lz_err *err)
{
	int fd = lz_openat2(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, LZ_RESOLVE_OWNED);
	if (fd < 0)
		return lz_err_set(err, errno, "open directory: %s", strerror(errno));
	DIR *d = fdopendir(fd);
	if (d == NULL) {
		close(fd);
		return lz_err_set(err, errno, "opendir: %s", strerror(errno));
	}
	char **names = NULL;
	size_t n = 0;
	struct dirent *de;
	int r = 0;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char **v = realloc(names, (n + 1) * sizeof(*v));
		if (v == NULL || (v[n] = strdup(de->d_name)) == NULL) {
			names = v ? v : names;
			r = lz_err_set(err, ENOMEM, "out of memory");
			break;
		}
		names = v;
		n++;
	}
	closedir(d);
	if (r < 0) {
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		free(names);
		return r;
	}
	*ret = names;
	*ret_n = n;
	return 0;
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static int reclaim_artifact(const struct lz_idmap *map, const struct lz_path *root,
			    struct lz_path *prepared, struct lz_path *quarantine, const char *id,
			    struct lz_err *err)
{
	int r;
	/* Quarantined artifacts cannot be leased again (catalog.h), so the
	 * tree can be moved aside and removed without racing a new lease. */
	if ((r = lz_catalog_artifact_mark_quarantined(root->fd, id, err)) < 0)
		return r;
	if (renameat2(prepared->fd, id, quarantine->fd, id, RENAME_NOREPLACE) < 0 && errno != ENOENT)
		return lz_err_set(err, errno, "quarantine %s: %s", id, strerror(errno));
	if ((r = lz_tree_remove_in_userns(map, quarantine->fd, id, err)) < 0)
		return r;
	return lz_catalog_artifact_delete(root->fd, id, err);
}

static bool worker_gone(const struct lz_catalog_prepare_op *op, struct lz_err *err, int *ret_err)
{
	struct lz_pidref ref = {
		.pidfs_dev = op->worker.pidfs_dev,
		.pidfs_ino = op->worker.pidfs_ino,
		.pid = op->worker.pid,
		.start_time = op->worker.start_time,
	};
	bool alive = true;
	memcpy(ref.boot_id, op->worker.boot_id, sizeof(ref.boot_id));
	*ret_err = lz_pidref_alive(&ref, &alive, err);
	return *ret_err == 0 && !alive;
}

static bool in_names(char **names, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (names[i] && strcmp(names[i], name) == 0)
			return true;
	return false;
}

/* Whether unleased artifact i is among the keep newest unleased ones
 * (created later, or as recent with a smaller ID). */
static bool kept_by_policy(const struct lz_catalog_artifact *arts, size_t n, size_t i, size_t keep)
{
	size_t newer = 0;
	for (size_t j = 0; j < n; j++)
		if (j != i && arts[j].lease_count == 0 &&
		    (arts[j].created > arts[i].created ||
		     (arts[j].created == arts[i].created && strcmp(arts[j].id, arts[i].id) < 0)))
			newer++;
	return newer < keep;
}

static bool artifact_known(const struct lz_catalog_artifact *arts, size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(arts[i].id, id) == 0)
			return true;
	return false;
}

/* Whether dir_fd/name is a tree the operation op_id made (OP_MARKER). */
static bool made_by(int dir_fd, const char *name, const char *op_id)
{
	char path[LZ_ARTIFACT_ID_HEX + sizeof(OP_MARKER) + 2], text[LZ_ARTIFACT_ID_HEX + 2];
	snprintf(path, sizeof(path), "%s/%s", name, OP_MARKER);
	_cleanup_close_ int fd = lz_openat2(dir_fd, path, O_RDONLY | O_NONBLOCK | O_CLOEXEC, LZ_RESOLVE_OWNED);
	ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof(text));
	return n == (ssize_t)strlen(op_id) && memcmp(text, op_id, (size_t)n) == 0;
}

/* An intent not yet published names the artifact id. */
static bool named_by_intent(const struct lz_catalog_prepare_op *ops, size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (ops[i].state != LZ_CATALOG_PREPARE_PUBLISHED && strcmp(ops[i].artifact_id, id) == 0)
			return true;
	return false;
}

static int gc_run(const struct lz_path *root, bool dry_run, size_t keep, const char *spare, struct gc_list *out,
		  struct lz_err *err)
{
	_cleanup_close_ int lock = -EBADF;
	struct lz_path prepared = LZ_PATH_INIT, staging = LZ_PATH_INIT, quarantine = LZ_PATH_INIT;
	struct lz_catalog_artifact *arts = NULL;
	struct lz_catalog_prepare_op *ops = NULL;
	size_t n_arts = 0, n_ops = 0, n_names = 0;
	char **names = NULL;
	struct lz_idmap map;
	int r;

	if ((r = lz_catalog_check(root->fd, err)) < 0)
		return r;
	if ((r = open_dir(root, "prepared", &prepared, err)) < 0 ||
	    (r = open_dir(root, "staging", &staging, err)) < 0 ||
	    (r = open_dir(root, "quarantine", &quarantine, err)) < 0)
		goto out;
	if (!dry_run && (r = lz_idmap_for_invoking_user(&map, err)) < 0)
		goto out;
	/* Staging trees are reclaimed only while no preparation runs
	 * (preparers_lock, held to the end); the intents are read under it. */
	if ((r = preparers_lock(&staging, LOCK_EX | LOCK_NB, &lock, err)) < 0 && r != -EWOULDBLOCK)
		goto out;
	bool preparing = r == -EWOULDBLOCK;
	if ((r = lz_catalog_prepare_list(root->fd, &ops, &n_ops, err)) < 0)
		goto out;

	/* Artifacts: reclaim those without a lease; keep the rest. */
	if ((r = lz_catalog_artifact_list(root->fd, &arts, &n_arts, err)) < 0)
		goto out;
	for (size_t i = 0; i < n_arts && r >= 0; i++) {
		const struct lz_catalog_artifact *a = &arts[i];
		if (a->lease_count > 0)
			r = gc_add(out, LZ_GC_KEPT_LEASED, "prepared", a->id, a->lease_count, err);
		else if (kept_by_policy(arts, n_arts, i, keep) || (spare != NULL && strcmp(spare, a->id) == 0))
			r = gc_add(out, LZ_GC_KEPT_POLICY, "prepared", a->id, 0, err);
		else if (dry_run)
			r = gc_add(out, LZ_GC_WOULD_REMOVE, "prepared", a->id, 0, err);
		else if ((r = reclaim_artifact(&map, root, &prepared, &quarantine, a->id, err)) >= 0)
			r = gc_add(out, LZ_GC_REMOVED, "prepared", a->id, 0, err);
	}
	if (r < 0)
		goto out;

	/* Trees the catalog does not know are never touched (OR-7). */
	if ((r = list_names(prepared.fd, &names, &n_names, err)) < 0)
		goto out;
	for (size_t i = 0; i < n_names && r >= 0; i++)
		if (!artifact_known(arts, n_arts, names[i]) && !named_by_intent(ops, n_ops, names[i]))
			r = gc_add(out, LZ_GC_KEPT_FOREIGN, "prepared", names[i], 0, err);
	free_names(names, n_names);
	names = NULL;
	if (r < 0 || (r = list_names(quarantine.fd, &names, &n_names, err)) < 0)
		goto out;
	for (size_t i = 0; i < n_names && r >= 0; i++)
		r = gc_add(out, LZ_GC_KEPT_FOREIGN, "quarantine", names[i], 0, err);
	free_names(names, n_names);
	names = NULL;
	if (r < 0)
		goto out;

	/* Staging trees: reclaim only our own abandoned ones. One stopped
	 * between publishing its tree and its row left the tree its intent
	 * names in prepared/ without a row: it goes back to staging and is
	 * reclaimed with the intent. */
	if ((r = list_names(staging.fd, &names, &n_names, err)) < 0)
		goto out;
	for (size_t i = 0; i < n_ops && r >= 0; i++) {
		const struct lz_catalog_prepare_op *op = &ops[i];
		int check = 0;
		if (op->state == LZ_CATALOG_PREPARE_PUBLISHED)
			continue;
		bool present = in_names(names, n_names, op->staging_name);
		bool published_tree = !present && !artifact_known(arts, n_arts, op->artifact_id) &&
				      made_by(prepared.fd, op->artifact_id, op->id);
		bool gone = !preparing && (op->state == LZ_CATALOG_PREPARE_ABANDONED || !op->has_worker ||
					   worker_gone(op, err, &check));
		if (check < 0) {
			r = check;
			break;
		}
		const char *dir = published_tree ? "prepared" : "staging";
		const char *name = published_tree ? op->artifact_id : op->staging_name;
		if (!gone) {
			if (present || published_tree)
				r = gc_add(out, LZ_GC_KEPT_PREPARING, dir, name, 0, err);
			continue;
		}
		if (dry_run) {
			r = gc_add(out, LZ_GC_WOULD_REMOVE_STAGING, dir, name, 0, err);
			continue;
		}
		if ((r = lz_catalog_prepare_intent_abandon(root->fd, op->id, err)) < 0)
			break;
		if (published_tree) {
			if (renameat2(prepared.fd, op->artifact_id, staging.fd, op->staging_name, RENAME_NOREPLACE) < 0) {
				r = lz_err_set(err, errno, "move prepared/%s back to staging: %s", op->artifact_id,
					       strerror(errno));
				break;
			}
			present = true;
		}
		if (present && (r = lz_tree_remove_in_userns(&map, staging.fd, op->staging_name, err)) < 0)
			break;
		if ((r = lz_catalog_prepare_intent_remove(root->fd, op->id, err)) < 0)
			break;
		r = gc_add(out, LZ_GC_REMOVED_STAGING, dir, name, 0, err);
	}
	for (size_t i = 0; i < n_names && r >= 0; i++) {
		bool known = false;
		for (size_t j = 0; j < n_ops; j++)
			known = known || strcmp(ops[j].staging_name, names[i]) == 0;
		if (!known)
			r = gc_add(out, LZ_GC_KEPT_FOREIGN, "staging", names[i], 0, err);
	}
out:
	free_names(names, n_names);
	lz_catalog_artifact_list_free(arts, n_arts);
	free(ops);
	lz_path_release(&prepared);
	lz_path_release(&staging);
	lz_path_release(&quarantine);
	return r;
}

int lz_prepare_gc(const struct lz_path *storage_root, bool dry_run, size_t keep, const char *spare,
		  struct lz_gc_item **ret, size_t *ret_n, struct lz_err *err)
{
	struct gc_list out = { 0 };
	int r = gc_run(storage_root, dry_run, keep, spare, &out, err);
	if (r < 0) {
		free(out.v);
		return r;
	}
	*ret = out.v;
	*ret_n = out.n;
	return 0;
}
