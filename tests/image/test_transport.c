/* Unit tests for core/image/transport.c: skopeo is stopped when its download
 * eats into the reserve of the Storage Root's file system, or when its
 * messages pass their cap, and what it left is removed. The skopeo here is
 * this test program itself (run as "skopeo copy ..." it plays the tool,
 * below); the Storage Root is a small tmpfs in a mount namespace of the
 * test's own. The real skopeo goes through tests/e2e/test_image.sh. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_test.h"

#include "image/transport.h"

/* ---- the stand-in skopeo ---------------------------------------------------- */

static void pause_ms(long ms)
{
	struct timespec ts = { 0, ms * 1000000L };
	nanosleep(&ts, NULL);
}

/* skopeo copy --quiet docker-archive:DIR/ROLE oci:LAYOUT:latest, where
 * ROLE says what to play: "fill" writes 16 KiB every 5 ms into the layout
 * (3.2 MB/s, a download), into two files by turns; "burst" writes one
 * file as fast as it can (a local archive's blob). Both write until a
 * write fails, and leave DIR/full as a mark if the disk refused one
 * (ENOSPC), and end with the write's error as skopeo's last message.
 * "noisy" writes messages to its standard error without end; "refused"
 * fails as a registry that cannot be reached does; "ok" leaves a file
 * and succeeds. */
static int fake_skopeo(char **argv)
{
	if (strcmp(argv[1], "copy") != 0 || strncmp(argv[3], "docker-archive:", 15) != 0 ||
	    strncmp(argv[4], "oci:", 4) != 0)
		return 64;
	const char *src = argv[3] + 15;
	char layout[PATH_MAX], mark[PATH_MAX], blob[2][PATH_MAX + 8];
	snprintf(layout, sizeof(layout), "%s", argv[4] + 4);
	char *tag = strrchr(layout, ':');
	if (tag == NULL)
		return 64;
	*tag = '\0';
	const char *role = strrchr(src, '/') + 1;
	snprintf(blob[0], sizeof(blob[0]), "%s/blob0", layout);
	snprintf(blob[1], sizeof(blob[1]), "%s/blob1", layout);
	if (strcmp(role, "ok") == 0) {
		int fd = open(blob[0], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		return fd >= 0 && close(fd) == 0 ? 0 : 1;
	}
	if (strcmp(role, "refused") == 0) {
		dprintf(STDERR_FILENO, "FATA[0000] initializing source: dial tcp 127.0.0.1:9: connect: connection refused\n");
		return 1;
	}
	if (strcmp(role, "noisy") == 0) {
		char line[4096];
		memset(line, 'x', sizeof(line) - 1);
		line[sizeof(line) - 1] = '\n';
		for (;;) {
			for (int i = 0; i < 16; i++)
				if (write(STDERR_FILENO, line, sizeof(line)) < 0)
					return 1;
			pause_ms(5);
		}
	}
	bool burst = strcmp(role, "burst") == 0;
	int fd[2] = { open(blob[0], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600),
		      open(blob[1], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) };
	if (fd[0] < 0 || fd[1] < 0)
		return 1;
	/* As skopeo (Go) does: a write past the file size limit fails EFBIG
	 * instead of killing, and a short write is finished. */
	signal(SIGXFSZ, SIG_IGN);
	static char chunk[16384];
	for (unsigned k = 0;; k++) {
		ssize_t n = 0;
		for (size_t done = 0; done < sizeof(chunk) && n >= 0; done += (size_t)n)
			n = write(fd[burst ? 0 : k % 2], chunk + done, sizeof(chunk) - done);
		if (n < 0)
			break;
		if (!burst)
			pause_ms(5);
	}
	int failed = errno;
	dprintf(STDERR_FILENO, "FATA[0000] writing blob: write %s: %s\n", blob[0], strerror(failed));
	if (failed == ENOSPC) {
		snprintf(mark, sizeof(mark), "%.*s/full", (int)(role - 1 - src), src);
		int m = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (m >= 0)
			close(m);
	}
	return 1;
}

/* ---- the fixture -------------------------------------------------------------- */

/* In a child (its own mount namespace, a user namespace of its own when
 * not root): an 8 MiB tmpfs as the Storage Root, then lz_transport_fetch
 * of docker-archive:DIR/role with this program as skopeo. Reports the
 * result, its message, the free bytes left and whether images/ is empty. */
struct outcome {
	int r;
	struct lz_err err;
	unsigned long long free_bytes, size_bytes;
	int images_left; /* entries under images/ afterwards, -1 unknown */
};

static void fetch(const char *dir, const char *role, struct outcome *ret)
{
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct outcome o = { .r = -EIO, .images_left = -1 };
		char root[PATH_MAX], self[PATH_MAX], opts[64];
		snprintf(root, sizeof(root), "%s/root", dir);
		snprintf(opts, sizeof(opts), "size=8m,mode=0700,uid=%u,gid=%u", (unsigned)getuid(),
			 (unsigned)getgid());
		if (lz_test_unshare_as_self(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mkdir(root, 0700) < 0 || mount("lz-test", root, "tmpfs", 0, opts) < 0 ||
		    realpath("/proc/self/exe", self) == NULL)
			_exit(92);
		struct lz_path storage = LZ_PATH_INIT, skopeo = LZ_PATH_INIT;
		struct lz_transport t = LZ_TRANSPORT_INIT;
		struct lz_image_ref ref = { .kind = LZ_IMAGE_DOCKER_ARCHIVE };
		snprintf(ref.path, sizeof(ref.path), "%s/%s", dir, role);
		o.r = lz_path_open_owned_root(root, &storage, &o.err);
		if (o.r == 0)
			o.r = lz_path_open(self, &skopeo, &o.err);
		if (o.r == 0) {
			o.r = lz_transport_fetch(&storage, &skopeo, &ref, &t, &o.err);
			if (o.r == 0)
				lz_transport_discard(&t);
		}
		struct statvfs sv;
		if (statvfs(root, &sv) == 0) {
			o.free_bytes = (unsigned long long)sv.f_bavail * sv.f_frsize;
			o.size_bytes = (unsigned long long)sv.f_blocks * sv.f_frsize;
		}
		char images[PATH_MAX + 8];
		snprintf(images, sizeof(images), "%s/images", root);
		DIR *d = opendir(images);
		if (d != NULL) {
			o.images_left = 0;
			for (struct dirent *e; (e = readdir(d)) != NULL;)
				o.images_left += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
			closedir(d);
		}
		lz_path_release(&skopeo);
		lz_path_release(&storage);
		if (write(p[1], &o, sizeof(o)) != sizeof(o))
			_exit(93);
		_exit(0);
	}
	close(p[1]);
	int status;
	assert_int_equal(read(p[0], ret, sizeof(*ret)), sizeof(*ret));
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(status, 0);
}

static int setup(void **state)
{
	char *dir = strdup("/tmp/lz-test-transport-XXXXXX");
	if (dir == NULL || mkdtemp(dir) == NULL)
		return -1;
	*state = dir;
	return 0;
}

static int teardown(void **state)
{
	char *dir = *state;
	char root[PATH_MAX];
	snprintf(root, sizeof(root), "%s/root", dir);
	rmdir(root); /* the tmpfs went with the child's mount namespace */
	lz_test_rmtree(dir);
	free(dir);
	return 0;
}

/* ---- tests -------------------------------------------------------------------- */

/* Whether the stand-in left its mark: the disk refused it a write. */
static bool disk_refused_a_write(const char *dir)
{
	char mark[PATH_MAX];
	snprintf(mark, sizeof(mark), "%s/full", dir);
	return access(mark, F_OK) == 0;
}

static void test_lz_transport_fetch__a_download_stops_at_the_reserve(void **state)
{
	const char *dir = *state;
	struct outcome o;
	fetch(dir, "fill", &o);
	if (o.r != -ENOSPC)
		fail_msg("got %d: %s", o.r, o.err.msg);
	assert_non_null(strstr(o.err.msg, "copying docker-archive:"));
	assert_non_null(strstr(o.err.msg, "stopped: the Storage Root's file system has no more than a twentieth"));
	/* Stopped by the watch before the disk refused a write (the stand-in
	 * leaves a mark once it has), and nothing of it is left. */
	if (disk_refused_a_write(dir))
		fail_msg("the download filled the disk before it was stopped");
	assert_int_equal(o.images_left, 0);
	assert_true(o.free_bytes > o.size_bytes / 2);
}

/* One file written faster than the watch looks (a blob from a local
 * archive) stops at the room, not at a full disk. */
static void test_lz_transport_fetch__one_file_stops_at_the_room(void **state)
{
	const char *dir = *state;
	struct outcome o;
	fetch(dir, "burst", &o);
	if (o.r != -ENOSPC && o.r != -EIO)
		fail_msg("got %d: %s", o.r, o.err.msg);
	if (disk_refused_a_write(dir))
		fail_msg("a write was refused for a full disk: %s", o.err.msg);
	/* Refused by the file size limit: the message names the room. */
	if (o.r == -EIO && strstr(o.err.msg, "no file of skopeo's may pass") == NULL)
		fail_msg("the room is not named: %s", o.err.msg);
	assert_int_equal(o.images_left, 0);
}

/* A failure that is not about room (a registry out of reach) says what
 * skopeo said, and nothing about the room. */
static void test_lz_transport_fetch__other_failures_do_not_name_the_room(void **state)
{
	const char *dir = *state;
	struct outcome o;
	fetch(dir, "refused", &o);
	if (o.r != -EIO)
		fail_msg("got %d: %s", o.r, o.err.msg);
	assert_non_null(strstr(o.err.msg, "copying docker-archive:"));
	if (strstr(o.err.msg, "room") != NULL)
		fail_msg("names the room: %s", o.err.msg);
	assert_int_equal(o.images_left, 0);
}

static void test_lz_transport_fetch__endless_messages_are_stopped(void **state)
{
	const char *dir = *state;
	struct outcome o;
	fetch(dir, "noisy", &o);
	if (o.r != -EMSGSIZE)
		fail_msg("got %d: %s", o.r, o.err.msg);
	assert_non_null(strstr(o.err.msg, "stopped: skopeo wrote more than 1048576 bytes of messages"));
	assert_int_equal(o.images_left, 0);
}

static void test_lz_transport_fetch__a_transport_within_the_room_succeeds(void **state)
{
	const char *dir = *state;
	struct outcome o;
	fetch(dir, "ok", &o);
	if (o.r != 0)
		fail_msg("got %d: %s", o.r, o.err.msg);
	assert_int_equal(o.images_left, 0); /* discarded by the test */
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[0], "skopeo") == 0)
		return fake_skopeo(argv);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lz_transport_fetch__a_download_stops_at_the_reserve, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_transport_fetch__one_file_stops_at_the_room, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lz_transport_fetch__endless_messages_are_stopped, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_transport_fetch__other_failures_do_not_name_the_room, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lz_transport_fetch__a_transport_within_the_room_succeeds,
						setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
