/* The preparer (prepare.h). The budget: what an image may write on the
 * Storage Root's file system, measured on a real one, in a forked child
 * with a user and mount namespace of its own (uid and gid mapped to 0: as
 * root and as an ordinary user alike) holding a tmpfs of 4 MiB and 200
 * inodes; the child's exit status is the verdict.
 *
 * Preparation itself, through lz_prepare_image with small crafted
 * layouts: the worker needs a user namespace mapped through newuidmap to
 * subordinate IDs, which root has not. Run as root (CI), those tests
 * become the test user scripts/test.sh creates (LZ_TEST_USER, default
 * lazaret-test) in a child; without such a user they fail, they do not
 * skip. Each has a Storage Root of its own under /tmp. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <locale.h>
#include <pwd.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "image/archivelib.h"
#include "image/ociwrite.h"
#include "image/prepare.h"
#include "store/catalog.h"
#include "lz_test.h"
#include "lz_test_user.h"
#include "proc/confine.h"
#include "proc/spawn.h"

#define CHECK(cond)                                                                 \
	do {                                                                        \
		if (!(cond)) {                                                      \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond); \
			_exit(1);                                                   \
		}                                                                   \
	} while (0)

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
}

/* In the child: a tmpfs of 4 MiB (1,024 pages) and 200 inodes on dir,
 * opened. */
static int small_fs(const char *dir)
{
	char map[64];
	uid_t uid = getuid();
	gid_t gid = getgid();
	CHECK(unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0);
	write_file("/proc/self/setgroups", "deny");
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
	write_file("/proc/self/uid_map", map);
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
	write_file("/proc/self/gid_map", map);
	CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0);
	CHECK(mount("tmpfs", dir, "tmpfs", 0, "size=4m,nr_inodes=200") == 0);
	int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(fd >= 0);
	return fd;
}

static void budget_child(const char *mountpoint)
{
	int dir = small_fs(mountpoint);
	struct lz_prepare_budget b;
	struct lz_err err = { 0, "" };
	CHECK(lz_prepare_budget(dir, &b, &err) == 0);
	/* 1,024 pages free less 51 kept; 199 inodes free less 10 kept; an
	 * entry costs a page */
	CHECK(b.bytes == (1024 - 51) * 4096ull);
	CHECK(b.entries == 199 - 10);
	CHECK(b.block == 4096);
	/* 3 MiB written: 256 pages left, of which 51 stay free */
	int fd = openat(dir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	static char chunk[1 << 20];
	memset(chunk, 'x', sizeof(chunk));
	for (int i = 0; i < 3; i++)
		CHECK(write(fd, chunk, sizeof(chunk)) == (ssize_t)sizeof(chunk));
	CHECK(lz_prepare_budget(dir, &b, &err) == 0);
	CHECK(b.bytes == (256 - 51) * 4096ull);
	/* filled to the last page: nothing left, not a wrapped count */
	while (write(fd, chunk, sizeof(chunk)) > 0)
		;
	CHECK(lz_prepare_budget(dir, &b, &err) == 0);
	CHECK(b.bytes == 0);
	/* a file system that counts no blocks or inodes (tmpfs without a
	 * size): no bound, not a full one */
	CHECK(mount("tmpfs", mountpoint, "tmpfs", 0, "size=0,nr_inodes=0") == 0);
	int unbounded = open(mountpoint, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(unbounded >= 0);
	CHECK(lz_prepare_budget(unbounded, &b, &err) == 0);
	CHECK(b.bytes == UINT64_MAX && b.entries == UINT64_MAX);
	_exit(0);
}

static void test_lz_prepare_budget__keeps_a_twentieth_free(void **state)
{
	(void)state;
	char dir[] = "/tmp/lz-test-budget.XXXXXX";
	assert_non_null(mkdtemp(dir));
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		budget_child(dir);
	int status = -1;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(rmdir(dir), 0); /* the mount went with the child's namespace */
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- preparation, as a user with subordinate IDs --------------------------- */

/* Hitting the worker's memory bound is the point of a test: ASan's
 * allocator must fail the allocation as malloc does, not end the worker. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}


/* Runs check in a child, as the test user when root (see the top), and
 * fails with what it reports. */
static void run_as_test_user(int (*check)(char *why, size_t size))
{
	lz_test_run_as_user(check, 0);
}

#define FAIL(...) (snprintf(why, size, __VA_ARGS__), 1)

/* A Storage Root and a one-layer OCI layout of the test's, in dir. */
struct store {
	char dir[64];
	struct lz_path root; /* dir/storage */
	int layout_fd;       /* dir/layout */
};

static void store_close(struct store *s)
{
	if (s->root.fd >= 0) { /* the trees are the user's (image root is): plain removal */
		struct lz_gc_item *items = NULL;
		size_t n = 0;
		struct lz_err err = { 0, "" };
		if (lz_prepare_gc(&s->root, false, 0, NULL, &items, &n, &err) == 0)
			free(items);
	}
	lz_path_release(&s->root);
	if (s->layout_fd >= 0)
		close(s->layout_fd);
	if (s->dir[0])
		lz_test_rmtree(s->dir);
}

/* Writes the layout of the single layer read from tar_fd (consumed). */
static int store_open(struct store *s, int tar_fd, char *why, size_t size)
{
	struct lz_err err = { 0, "" };
	char path[128];
	static const char *const cmd[] = { "/bin/sh", NULL }, *const env[] = { "PATH=/bin", NULL };
	*s = (struct store){ .root = LZ_PATH_INIT, .layout_fd = -1 };
	snprintf(s->dir, sizeof(s->dir), "/tmp/lz-test-prepare.XXXXXX");
	if (mkdtemp(s->dir) == NULL)
		return FAIL("mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/storage", s->dir);
	if (mkdir(path, 0700) < 0 || lz_path_open(path, &s->root, &err) < 0)
		return FAIL("storage root: %s %s", strerror(errno), err.msg);
	snprintf(path, sizeof(path), "%s/layout", s->dir);
	if (mkdir(path, 0700) < 0 || (s->layout_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return FAIL("layout: %s", strerror(errno));
	int r = lz_ociwrite_single_layer(s->layout_fd, tar_fd, "latest", cmd, env, &err);
	close(tar_fd);
	return r < 0 ? FAIL("layout: %s", err.msg) : 0;
}

/* A tar (memfd at offset 0) of a few entries of every kind the worker
 * makes, the names kept in the archive as raw bytes. */
static int small_tar(void)
{
	int fd = memfd_create("layer", MFD_CLOEXEC);
	struct archive *a = archive_write_new();
	/* the UTF-8 name as a pax path record, which the worker reads in the C
	 * locale (layer.h) */
	if (fd < 0 || a == NULL || setlocale(LC_CTYPE, "C.UTF-8") == NULL ||
	    archive_write_set_format_pax_restricted(a) != ARCHIVE_OK || archive_write_open_fd(a, fd) != ARCHIVE_OK)
		return -1;
	static const struct {
		const char *path;
		unsigned type;
		const char *data;
		const char *link;
		bool hard;
	} ents[] = {
		{ "etc", AE_IFDIR, NULL, NULL, false },
		{ "etc/hostname", AE_IFREG, "box\n", NULL, false },
		{ "deep/er/still/file", AE_IFREG, "deep\n", NULL, false },
		{ "etc/link", AE_IFLNK, NULL, "hostname", false },
		{ "etc/hard", AE_IFREG, NULL, "etc/hostname", true },
		{ "fifo", AE_IFIFO, NULL, NULL, false },
		{ "caf\xc3\xa9", AE_IFREG, "utf-8\n", NULL, false },
	};
	for (size_t i = 0; i < sizeof(ents) / sizeof(ents[0]); i++) {
		struct archive_entry *e = archive_entry_new();
		size_t n = ents[i].data ? strlen(ents[i].data) : 0;
		archive_entry_set_pathname(e, ents[i].path);
		archive_entry_set_filetype(e, ents[i].type);
		archive_entry_set_perm(e, ents[i].type == AE_IFDIR ? 0755 : 0644);
		archive_entry_set_size(e, (la_int64_t)n);
		archive_entry_set_mtime(e, 1600000000, 0);
		if (ents[i].hard)
			archive_entry_set_hardlink(e, ents[i].link);
		else if (ents[i].link)
			archive_entry_set_symlink(e, ents[i].link);
		if (i == 1)
			archive_entry_xattr_add_entry(e, "user.test", "v", 1);
		bool ok = archive_write_header(a, e) == ARCHIVE_OK &&
			  (n == 0 || archive_write_data(a, ents[i].data, n) == (la_ssize_t)n);
		archive_entry_free(e);
		if (!ok)
			return -1;
	}
	if (archive_write_close(a) != ARCHIVE_OK || setlocale(LC_CTYPE, "C") == NULL)
		return -1;
	archive_write_free(a);
	return lseek(fd, 0, SEEK_SET) == 0 ? fd : -1;
}

static int prepare(struct store *s, const char *ref, struct lz_prepare_request *req, struct lz_prepare_result *res,
		   struct lz_err *err)
{
	req->storage_root = &s->root;
	req->layout_fd = s->layout_fd;
	req->source_ref = ref;
	lz_err_clear(err);
	return lz_prepare_image(req, res, err);
}

/* What the worker must not have or do (prepare.h), checked inside it once
 * it is confined: 0, or -EPERM naming the first thing it could. */
struct inside {
	int inherited_fd;  /* a descriptor of the caller's */
	uint64_t net_ns;   /* the caller's network namespace */
	char outside[128]; /* a name beside the Storage Root and the layout */
	char layout[128];  /* the layout's index.json */
};

static int check_inside(void *ctx, struct lz_err *err)
{
	const struct inside *in = ctx;
	struct stat st;
	struct rlimit lim;
	if (fcntl(in->inherited_fd, F_GETFD) >= 0 || errno != EBADF)
		return lz_err_set(err, EPERM, "inside: the caller's descriptor %d is still open", in->inherited_fd);
	if (stat("/proc/self/ns/net", &st) < 0 || (uint64_t)st.st_ino == in->net_ns)
		return lz_err_set(err, EPERM, "inside: the caller's network namespace");
	int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock >= 0 || errno != EACCES)
		return lz_err_set(err, EPERM, "inside: made a Unix socket (%s)", sock >= 0 ? "ok" : strerror(errno));
	sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock >= 0 || errno != EACCES)
		return lz_err_set(err, EPERM, "inside: made an IPv4 socket (%s)", sock >= 0 ? "ok" : strerror(errno));
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		return lz_err_set(err, EPERM, "inside: no no_new_privs");
	if (getrlimit(RLIMIT_DATA, &lim) < 0 || lim.rlim_cur == RLIM_INFINITY)
		return lz_err_set(err, EPERM, "inside: no RLIMIT_DATA");
	if (lz_confine_landlock_abi() > 0) {
		int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
		if (fd >= 0 || errno != EACCES)
			return lz_err_set(err, EPERM, "inside: opened /etc/passwd (%s)", fd >= 0 ? "ok" : strerror(errno));
		fd = open(in->outside, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EACCES)
			return lz_err_set(err, EPERM, "inside: made %s (%s)", in->outside, fd >= 0 ? "ok" : strerror(errno));
	}
	int fd = open(in->layout, O_RDONLY | O_CLOEXEC); /* what it is there for */
	if (fd < 0)
		return lz_err_set(err, EPERM, "inside: cannot read %s: %s", in->layout, strerror(errno));
	close(fd);
	return 0;
}

static int worker_confined(char *why, size_t size)
{
	struct store s;
	int r = store_open(&s, small_tar(), why, size);
	struct inside in = { .inherited_fd = open("/dev/null", O_RDONLY | O_CLOEXEC) };
	struct stat st;
	if (r == 0 && stat("/proc/self/ns/net", &st) == 0)
		in.net_ns = st.st_ino;
	snprintf(in.outside, sizeof(in.outside), "%s/outside", s.dir);
	snprintf(in.layout, sizeof(in.layout), "%s/layout/index.json", s.dir);
	struct lz_prepare_request req = { .worker_check = check_inside, .worker_check_ctx = &in };
	struct lz_prepare_result res;
	struct lz_err err;
	if (r == 0 && prepare(&s, "oci:test", &req, &res, &err) < 0)
		r = FAIL("prepare: %s", err.msg);
	char path[256];
	size_t n = 0;
	char *text = NULL;
	if (r == 0) { /* and what it made, confined, is the layer */
		snprintf(path, sizeof(path), "%s/storage/prepared/%s/rootfs/deep/er/still/file", s.dir, res.artifact_id);
		text = lz_test_read_file(path, &n);
		if (text == NULL || n != 5 || memcmp(text, "deep\n", 5) != 0)
			r = FAIL("the prepared tree lacks %s", path);
		free(text);
		snprintf(path, sizeof(path), "%s/storage/prepared/%s/rootfs/caf\xc3\xa9", s.dir, res.artifact_id);
		if (r == 0 && access(path, F_OK) < 0)
			r = FAIL("the prepared tree lacks %s", path);
		snprintf(path, sizeof(path), "%s/storage/prepared/%s/rootfs/etc/hard", s.dir, res.artifact_id);
		if (r == 0 && (stat(path, &st) < 0 || st.st_nlink != 2))
			r = FAIL("the prepared tree lacks the hard link %s", path);
	}
	close(in.inherited_fd);
	store_close(&s);
	return r;
}

/* The worker parses what a registry sent with libarchive: it keeps none of
 * the caller's descriptors, has no network, makes no socket, reads only the
 * layout and writes only its tree (Landlock), and its memory is bounded;
 * confined, it still applies every kind of entry. */
static void test_lz_prepare_image__worker_is_confined(void **state)
{
	(void)state;
	run_as_test_user(worker_confined);
}

/* A GNU sparse 1.0 entry whose map is n lines "0\n0\n": libarchive keeps
 * the map whole while it reads the header, about 12 bytes of memory per
 * byte (finding: a 10 MB gzip made 150 GB); written by hand, as no tool
 * writes one. */
static int sparse_map_tar(size_t n)
{
	int fd = memfd_create("map", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	char h[512], pax[512];
	int plen = snprintf(pax, sizeof(pax), "%s%s%s%s", "22 GNU.sparse.major=1\n", "22 GNU.sparse.minor=0\n",
			    "21 GNU.sparse.name=m\n", "25 GNU.sparse.realsize=0\n");
	char count[32];
	int clen = snprintf(count, sizeof(count), "%zu\n", n);
	size_t body = (size_t)clen + 4 * n;
	size_t pad = (512 - body % 512) % 512; /* the map fills whole blocks of the entry */
	struct {
		const char *name;
		size_t size;
		char type;
	} hdr[2] = { { "PaxHeaders/m", (size_t)plen, 'x' }, { "GNUSparseFile.0/m", body + pad, '0' } };
	for (int i = 0; i < 2; i++) {
		memset(h, 0, sizeof(h));
		snprintf(h, 100, "%s", hdr[i].name);
		snprintf(h + 100, 8, "%07o", 0644);
		snprintf(h + 108, 8, "%07o", 0);
		snprintf(h + 116, 8, "%07o", 0);
		snprintf(h + 124, 12, "%011zo", hdr[i].size);
		snprintf(h + 136, 12, "%011o", 0);
		h[156] = hdr[i].type;
		memcpy(h + 257, "ustar\0" "00", 8);
		memset(h + 148, ' ', 8);
		unsigned sum = 0;
		for (int j = 0; j < 512; j++)
			sum += (unsigned char)h[j];
		snprintf(h + 148, 8, "%06o", sum);
		if (write(fd, h, 512) != 512)
			return -1;
		if (i == 0 && (memset(h, 0, 512), memcpy(h, pax, (size_t)plen), write(fd, h, 512) != 512))
			return -1;
	}
	if (write(fd, count, (size_t)clen) != clen)
		return -1;
	static const char lines[] = "0\n0\n0\n0\n0\n0\n0\n0\n0\n0\n0\n0\n0\n0\n0\n0\n";
	for (size_t i = 0; i < n; i += 4)
		if (write(fd, lines, 16) != 16)
			return -1;
	static const char zeros[1024 + 512];
	if (write(fd, zeros, pad + 1024) != (ssize_t)(pad + 1024))
		return -1;
	return lseek(fd, 0, SEEK_SET) == 0 ? fd : -1;
}

static int worker_memory_bounded(char *why, size_t size)
{
	struct store s;
	/* a 4 MiB map: some 48 MiB of libarchive's heap, over a 16 MiB bound */
	int r = store_open(&s, sparse_map_tar(1u << 20), why, size);
	struct lz_prepare_request req = { .worker_memory = 16u << 20 };
	struct lz_prepare_result res;
	struct lz_err err;
	if (r == 0) {
		int p = prepare(&s, "oci:test", &req, &res, &err);
		if (p >= 0)
			r = FAIL("prepared a layer whose header needs more memory than the worker may take");
		else if (strstr(err.msg, "16 MiB") == NULL) /* ASan's own mmap fails first: the worker ends */
			r = FAIL("not the memory bound: %d %s", p, err.msg);
	}
	store_close(&s);
	return r;
}

/* The worker may take LZ_PREPARE_WORKER_MEMORY (here 16 MiB) beyond what it
 * inherited: a layer needing more fails, saying so. */
static void test_lz_prepare_image__worker_memory_is_bounded(void **state)
{
	(void)state;
	run_as_test_user(worker_memory_bounded);
}

static int stall(void *ctx, struct lz_err *err)
{
	(void)ctx;
	(void)err;
	sleep(60);
	return 0;
}

static int worker_time_bounded(char *why, size_t size)
{
	struct store s;
	int r = store_open(&s, small_tar(), why, size);
	struct lz_prepare_request req = { .worker_timeout_ms = 300, .worker_check = stall };
	struct lz_prepare_result res;
	struct lz_err err;
	int64_t start = lz_now_ms();
	if (r == 0) {
		int p = prepare(&s, "oci:test", &req, &res, &err);
		if (p != -ETIMEDOUT || strstr(err.msg, "after 0.300 s, its time bound") == NULL)
			r = FAIL("not the time bound: %d %s", p, err.msg);
		else if (lz_now_ms() - start > 10000)
			r = FAIL("the preparation took %lld ms", (long long)(lz_now_ms() - start));
	}
	struct lz_catalog_artifact *v = NULL;
	size_t n = 9;
	char path[128];
	snprintf(path, sizeof(path), "%s/storage/staging", s.dir);
	if (r == 0 && (lz_catalog_artifact_list(s.root.fd, &v, &n, &err) < 0 || n != 0))
		r = FAIL("published %zu artifacts: %s", n, err.msg);
	lz_catalog_artifact_list_free(v, n);
	if (r == 0 && rmdir(path) < 0) /* empty: the stopped worker's tree went */
		r = FAIL("staging: %s", strerror(errno));
	store_close(&s);
	return r;
}

/* A worker that does not end within its time bound is stopped, and its
 * tree discarded. */
static void test_lz_prepare_image__worker_time_is_bounded(void **state)
{
	(void)state;
	run_as_test_user(worker_time_bounded);
}

/* A worker subverted by a layer (a libarchive bug) forks: its child keeps
 * the tree's descriptor, leaves the worker's session and writes once the
 * worker has exited. The worker is PID 1 of a PID namespace of its own,
 * so the child goes with it and nothing reaches the published tree. */
static int fork_survivor(void *ctx, struct lz_err *err)
{
	(void)ctx;
	(void)err;
	int keep = -1;
	for (int fd = 3; fd < 256 && keep < 0; fd++) {
		char link[64], target[512];
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		ssize_t n = readlink(link, target, sizeof(target) - 1);
		if (n >= 7 && memcmp(target + n - 7, "/rootfs", 7) == 0)
			keep = fd;
	}
	pid_t worker = getpid();
	if (keep < 0 || fork() != 0)
		return 0;
	for (int fd = 0; fd < 256; fd++)
		if (fd != keep)
			close(fd);
	setsid();
	for (int i = 0; i < 1000 && getppid() == worker; i++)
		usleep(10000);
	int f = openat(keep, "planted-after-publication", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (f >= 0)
		close(f);
	_exit(0);
}

static int no_survivor(char *why, size_t size)
{
	struct store s;
	int r = store_open(&s, small_tar(), why, size);
	struct lz_prepare_request req = { .worker_check = fork_survivor };
	struct lz_prepare_result res;
	struct lz_err err;
	if (r == 0 && prepare(&s, "oci:test", &req, &res, &err) < 0)
		r = FAIL("prepare: %s", err.msg);
	char path[256];
	snprintf(path, sizeof(path), "%s/storage/prepared/%s/rootfs/planted-after-publication", s.dir,
		 res.artifact_id);
	for (int i = 0; r == 0 && i < 100; i++) {
		if (access(path, F_OK) == 0)
			r = FAIL("a process the worker forked wrote into the published tree");
		usleep(10000);
	}
	store_close(&s);
	return r;
}

static void test_lz_prepare_image__nothing_the_worker_forked_outlives_it(void **state)
{
	(void)state;
	run_as_test_user(no_survivor);
}

static int second_reference(char *why, size_t size)
{
	struct store s;
	int r = store_open(&s, small_tar(), why, size);
	struct lz_prepare_request req = { 0 };
	struct lz_prepare_result first, second;
	struct lz_err err;
	char id[LZ_ARTIFACT_ID_HEX + 1];
	int fd = -1;
	if (r == 0 && prepare(&s, "docker://registry.test/lz:1", &req, &first, &err) < 0)
		r = FAIL("prepare: %s", err.msg);
	if (r == 0 && (prepare(&s, "docker://registry.test/lz:latest", &req, &second, &err) < 0 || !second.existed ||
		       strcmp(second.artifact_id, first.artifact_id) != 0))
		r = FAIL("prepare again: %s (existed %d)", err.msg, second.existed);
	/* both references launch it; a third, never given, does not */
	const char *refs[] = { "docker://registry.test/lz:latest", "docker://registry.test/lz:1" };
	for (int i = 0; r == 0 && i < 2; i++) {
		lz_err_clear(&err);
		if (lz_prepare_lookup(&s.root, refs[i], id, &fd, &err) < 0)
			r = FAIL("lookup %s: %s", refs[i], err.msg);
		else if (strcmp(id, first.artifact_id) != 0)
			r = FAIL("lookup %s: %s, not %s", refs[i], id, first.artifact_id);
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	if (r == 0 && lz_prepare_lookup(&s.root, "docker://registry.test/lz:2", id, &fd, &err) != -ENOENT)
		r = FAIL("lookup of a reference never prepared: %s", err.msg);
	store_close(&s);
	return r;
}

/* `image prepare` of an image already prepared under another reference
 * (docker://debian:12, then docker://debian:bookworm: one manifest)
 * records the new reference: a profile naming it finds the image. */
static void test_lz_prepare_image__a_second_reference_finds_the_image(void **state)
{
	(void)state;
	run_as_test_user(second_reference);
}

/* A gc while a preparation's worker has ended but its preparer has not
 * yet published (the last progress report: the worker sends its result
 * and exits meanwhile) keeps the tree: the preparation publishes it. */
struct gc_during {
	struct store *s;
	bool ran;
	int gc_status; /* the gc's child: 0 kept it, 1 removed it, 2 failed */
};

static void gc_at_the_end(void *ctx, const struct lz_prepare_progress *p)
{
	struct gc_during *g = ctx;
	if (g->ran || p->layer != p->n_layers || p->bytes_done != p->bytes_total)
		return;
	g->ran = true;
	usleep(300 * 1000);
	pid_t pid = fork();
	if (pid == 0) {
		struct lz_gc_item *items = NULL;
		size_t n = 0;
		struct lz_err err = { 0, "" };
		if (lz_prepare_gc(&g->s->root, false, 0, NULL, &items, &n, &err) < 0)
			_exit(2);
		for (size_t i = 0; i < n; i++)
			if (items[i].action == LZ_GC_REMOVED_STAGING)
				_exit(1);
		_exit(0);
	}
	int status = 0;
	g->gc_status = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}

static int gc_during_preparation(char *why, size_t size)
{
	struct store s;
	int r = store_open(&s, small_tar(), why, size);
	struct gc_during g = { &s, false, -1 };
	struct lz_prepare_request req = { .progress = gc_at_the_end, .progress_ctx = &g };
	struct lz_prepare_result res;
	struct lz_err err;
	char id[LZ_ARTIFACT_ID_HEX + 1];
	int fd = -1;
	if (r == 0 && prepare(&s, "docker://registry.test/lz:gc", &req, &res, &err) < 0)
		r = FAIL("prepare, with a gc at its end: %s", err.msg);
	if (r == 0 && g.gc_status != 0)
		r = FAIL("the gc at the end of the preparation %s", g.gc_status == 1 ? "removed its tree" : "failed");
	if (r == 0 && lz_prepare_lookup(&s.root, "docker://registry.test/lz:gc", id, &fd, &err) < 0)
		r = FAIL("lookup: %s", err.msg);
	if (fd >= 0)
		close(fd);
	store_close(&s);
	return r;
}

static void test_lz_prepare_gc__a_preparation_still_publishing_is_kept(void **state)
{
	(void)state;
	run_as_test_user(gc_during_preparation);
}

/* A preparation that finds an image gc holding staging/ says so once,
 * before it waits (it went on silently), and goes on when the gc ends.
 * The "gc" here is a child holding the lock for half a second. */
struct gc_holding {
	int waiting_reports;
	bool layers_before;
};

static void count_waits(void *ctx, const struct lz_prepare_progress *p)
{
	struct gc_holding *g = ctx;
	if (p->waiting_for_gc)
		g->waiting_reports++;
	else if (p->layer > 0 && g->waiting_reports == 0)
		g->layers_before = true;
}

static int gc_holding_the_lock(char *why, size_t size)
{
	struct store s;
	int r = store_open(&s, small_tar(), why, size);
	char path[128];
	snprintf(path, sizeof(path), "%s/storage/staging", s.dir);
	struct gc_holding g = { 0, false };
	int held[2] = { -1, -1 };
	pid_t gc = -1;
	if (r == 0 && ((mkdir(path, 0700) < 0 && errno != EEXIST) || pipe(held) < 0))
		r = FAIL("staging: %s", strerror(errno));
	if (r == 0 && (gc = fork()) == 0) {
		int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 || flock(fd, LOCK_EX) < 0 || write(held[1], "x", 1) != 1)
			_exit(1);
		usleep(500 * 1000);
		_exit(0);
	}
	char c;
	if (r == 0 && (gc < 0 || read(held[0], &c, 1) != 1))
		r = FAIL("the gc's stand-in did not take the lock");
	struct lz_prepare_request req = { .progress = count_waits, .progress_ctx = &g };
	struct lz_prepare_result res;
	struct lz_err err;
	if (r == 0 && prepare(&s, "docker://registry.test/lz:held", &req, &res, &err) < 0)
		r = FAIL("prepare while a gc held staging/: %s", err.msg);
	if (r == 0 && (g.waiting_reports != 1 || g.layers_before))
		r = FAIL("the wait was reported %d times%s", g.waiting_reports,
			 g.layers_before ? ", after a layer" : "");
	if (gc > 0)
		(void)waitpid(gc, NULL, 0);
	if (held[0] >= 0) {
		close(held[0]);
		close(held[1]);
	}
	store_close(&s);
	return r;
}

static void test_lz_prepare_image__a_gc_in_progress_is_reported_then_waited_for(void **state)
{
	(void)state;
	run_as_test_user(gc_holding_the_lock);
}

/* A preparation stopped between publishing its tree and its catalog row
 * leaves prepared/<id> without a row, named by its intent: gc reclaims it
 * through the intent, and the image can be prepared again. Without the
 * intent, preparing refuses instead of saying "prepared" of an image no
 * launch finds. */
static int half_published(char *why, size_t size)
{
	struct store s;
	int r = store_open(&s, small_tar(), why, size);
	struct lz_prepare_request req = { 0 };
	struct lz_prepare_result res, again;
	struct lz_gc_item *items = NULL;
	size_t n = 0;
	struct lz_err err;
	char id[LZ_ARTIFACT_ID_HEX + 1], path[256];
	static const char op[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	int fd = -1;
	if (r == 0 && prepare(&s, "docker://registry.test/lz:gc", &req, &res, &err) < 0)
		r = FAIL("prepare: %s", err.msg);
	/* reclaimed whole (keep 0), then left half-published */
	if (r == 0 && lz_prepare_gc(&s.root, false, 0, NULL, &items, &n, &err) < 0)
		r = FAIL("gc: %s", err.msg);
	free(items);
	items = NULL;
	snprintf(path, sizeof(path), "%s/storage/prepared/%s", s.dir, res.artifact_id);
	char marker[320];
	snprintf(marker, sizeof(marker), "%s/operation", path);
	/* first a tree that does not say it is the intent's: kept */
	if (r == 0 && (mkdir(path, 0755) < 0 || lz_catalog_prepare_intent_begin(s.root.fd, op, res.artifact_id, op,
										      &err) < 0))
		r = FAIL("half-publish: %s %s", strerror(errno), err.msg);
	if (r == 0 && lz_prepare_gc(&s.root, false, 0, NULL, &items, &n, &err) < 0)
		r = FAIL("gc of a tree not the intent's: %s", err.msg);
	free(items);
	items = NULL;
	if (r == 0 && access(path, F_OK) < 0)
		r = FAIL("gc removed a tree its intent did not make");
	/* then the intent's own (its operation marker, as a preparer writes it) */
	int mfd = -1;
	if (r == 0 && (lz_catalog_prepare_intent_begin(s.root.fd, op, res.artifact_id, op, &err) < 0 ||
		       (mfd = open(marker, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0400)) < 0 ||
		       write(mfd, op, strlen(op)) != (ssize_t)strlen(op)))
		r = FAIL("half-publish: %s %s", strerror(errno), err.msg);
	if (mfd >= 0)
		close(mfd);
	if (r == 0 && lz_prepare_gc(&s.root, false, 0, NULL, &items, &n, &err) < 0)
		r = FAIL("gc of the half-published tree: %s", err.msg);
	free(items);
	items = NULL;
	if (r == 0 && access(path, F_OK) == 0)
		r = FAIL("gc kept the tree its intent names");
	if (r == 0 && (prepare(&s, "docker://registry.test/lz:gc", &req, &again, &err) < 0 || again.existed))
		r = FAIL("prepare again: %s (existed %d)", err.msg, again.existed);
	if (r == 0 && lz_prepare_lookup(&s.root, "docker://registry.test/lz:gc", id, &fd, &err) < 0)
		r = FAIL("lookup: %s", err.msg);
	if (fd >= 0)
		close(fd);
	/* no intent names it: a tree without a row is refused by name */
	if (r == 0 && lz_prepare_gc(&s.root, false, 0, NULL, &items, &n, &err) < 0)
		r = FAIL("gc: %s", err.msg);
	free(items);
	items = NULL;
	if (r == 0 && mkdir(path, 0755) < 0)
		r = FAIL("mkdir: %s", strerror(errno));
	if (r == 0) {
		int p = prepare(&s, "docker://registry.test/lz:gc", &req, &again, &err);
		if (p != -EEXIST || strstr(err.msg, "exists without a catalog entry") == NULL)
			r = FAIL("prepare over a tree without a row: %d %s", p, err.msg);
	}
	if (r == 0 && rmdir(path) < 0)
		r = FAIL("rmdir: %s", strerror(errno));
	store_close(&s);
	return r;
}

static void test_lz_prepare_gc__a_half_published_tree_is_reclaimed_through_its_intent(void **state)
{
	(void)state;
	run_as_test_user(half_published);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_prepare_budget__keeps_a_twentieth_free),
		cmocka_unit_test(test_lz_prepare_image__worker_is_confined),
		cmocka_unit_test(test_lz_prepare_image__worker_memory_is_bounded),
		cmocka_unit_test(test_lz_prepare_image__worker_time_is_bounded),
		cmocka_unit_test(test_lz_prepare_image__nothing_the_worker_forked_outlives_it),
		cmocka_unit_test(test_lz_prepare_image__a_second_reference_finds_the_image),
		cmocka_unit_test(test_lz_prepare_gc__a_preparation_still_publishing_is_kept),
		cmocka_unit_test(test_lz_prepare_image__a_gc_in_progress_is_reported_then_waited_for),
		cmocka_unit_test(test_lz_prepare_gc__a_half_published_tree_is_reclaimed_through_its_intent),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
