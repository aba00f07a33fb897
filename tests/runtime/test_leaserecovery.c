/* cmocka tests for core/runtime/leaserecovery.c: a real Storage Catalog and
 * Domain Store in a temporary directory, and real processes whose pidfs
 * identities are recorded, alive and then reaped. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_test.h"
#include "fs/mountns.h"
#include "proc/nsident.h"
#include "proc/pidref.h"
#include "proc/spawn.h"
#include "runtime/leaserecovery.h"
#include "util/escape.h"
#include "store/catalog.h"
#include "store/domainstore.h"

#define H64(c) c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c
#define ART H64("a")
#define ART_B H64("b")
#define DOM H64("d")
#define OTHER_DOM H64("e")
#define FP H64("f")
#define OP H64("0")
#define OP_B H64("3")

struct fx {
	char dir[64];
	int root;      /* the Storage Root: the catalog */
	int domain;    /* the Domain Root: the Domain Store */
	lz_dstore *h;
	char lines[8][700];
	size_t n_lines;
};

static void collect(void *ctx, const char *line)
{
	struct fx *f = ctx;
	if (f->n_lines < 8)
		snprintf(f->lines[f->n_lines++], sizeof(f->lines[0]), "%s", line);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct lz_err e = { 0, "" };
	if (f == NULL)
		return -1;
	strcpy(f->dir, "/tmp/lz-test-leaserec-XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	char d[128];
	snprintf(d, sizeof(d), "%s/domain", f->dir);
	if (mkdir(d, 0700) < 0)
		return -1;
	f->root = open(f->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	f->domain = open(d, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (f->root < 0 || f->domain < 0 || lz_dstore_open(f->domain, &f->h, &e) < 0)
		return -1;
	struct lz_catalog_artifact_spec s = { .id = ART, .source_ref = "docker://debian:12",
					       .manifest_digest = "sha256:" H64("1"),
					       .config_digest = "sha256:" H64("2"), .size = 1 };
	struct lz_catalog_artifact_spec b = s;
	b.id = ART_B;
	if (lz_catalog_prepare_intent_begin(f->root, OP, ART, "staging", &e) < 0 ||
	    lz_catalog_artifact_publish(f->root, OP, &s, &e) < 0 ||
	    lz_catalog_prepare_intent_begin(f->root, OP_B, ART_B, "staging-b", &e) < 0 ||
	    lz_catalog_artifact_publish(f->root, OP_B, &b, &e) < 0) {
		fprintf(stderr, "catalog: %s\n", e.msg);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	lz_dstore_close(f->h);
	close(f->root);
	close(f->domain);
	lz_test_rmtree(f->dir);
	free(f);
	return 0;
}

static struct lz_err E;

#define OK(expr)                                                                                  \
	do {                                                                                      \
		lz_err_clear(&E);                                                                 \
		if ((expr) < 0)                                                                   \
			fail_msg("%s failed: %s", #expr, E.msg);                                  \
	} while (0)

static uint64_t leases(const struct fx *f)
{
	uint64_t n = 0;
	OK(lz_catalog_lease_count(f->root, ART, &n, &E));
	return n;
}

/* Long enough for a killed and reaped child's namespaces to be freed,
 * short enough that a live one does not hold the suite up. */
#define SHORT_WAIT_MS 300

static size_t run_waiting(struct fx *f, int exit_wait_ms)
{
	size_t released = 99;
	f->n_lines = 0;
	OK(lz_leaserecovery_run(f->h, f->root, DOM, lz_now_ms() + exit_wait_ms, collect, f, &released, &E));
	return released;
}

static size_t run(struct fx *f)
{
	return run_waiting(f, SHORT_WAIT_MS);
}

/* A child that waits until killed, and its pidfs identity. */
static pid_t child(struct lz_pidref *id)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* Gone with the test even when an assertion ends it early. */
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(60);
		pause();
		_exit(0);
	}
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	assert_true(pidfd >= 0);
	OK(lz_pidref_from_pidfd(pidfd, id, &E));
	close(pidfd);
	return pid;
}

/* The role's phase, its artifact into art (when non-NULL). */
static enum lz_dstore_phase phase_of(struct fx *f, uint64_t g, enum lz_dstore_role role, char *art)
{
	struct lz_dstore_participant p;
	OK(lz_dstore_participant_get(f->h, g, role, &p, &E));
	if (art)
		strcpy(art, p.artifact_id);
	enum lz_dstore_phase phase = p.phase;
	lz_dstore_participant_clear(&p);
	return phase;
}

/* Spec 3.6 acquisition, steps 1 to 3: prepared-lower intent naming
 * artifact, the exact catalog lease, lease held; then active. */
static void lower_leased(struct fx *f, uint64_t g, const char *artifact)
{
	OK(lz_dstore_participant_intent(f->h, g, LZ_DSTORE_ROLE_PREPARED_LOWER, &E));
	OK(lz_dstore_participant_set_artifact(f->h, g, LZ_DSTORE_ROLE_PREPARED_LOWER, artifact, &E));
	OK(lz_catalog_lease_acquire(f->root, artifact, DOM, g, &E));
	OK(lz_dstore_participant_set_lease_held(f->h, g, LZ_DSTORE_ROLE_PREPARED_LOWER, &E));
	OK(lz_dstore_participant_activate(f->h, g, LZ_DSTORE_ROLE_PREPARED_LOWER, &E));
}

/* Generation g with its Runtime Supervisor staged as id, leased, ended as
 * state. */
static uint64_t lost_generation(struct fx *f, const struct lz_pidref *id, enum lz_dstore_gen_state state)
{
	uint64_t g = 0;
	OK(lz_dstore_generation_begin(f->h, DOM, FP, &g, &E));
	OK(lz_dstore_participant_intent(f->h, g, LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR, &E));
	if (id != NULL)
		OK(lz_dstore_participant_stage_process(f->h, g, LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR, id, &E));
	lower_leased(f, g, ART);
	if (state != LZ_DSTORE_GEN_STARTING)
		OK(lz_dstore_generation_set_state(f->h, g, state, &E));
	return g;
}

static void test_lz_leaserecovery__kept_while_the_supervisor_lives_released_once_gone(void **state)
{
	struct fx *f = *state;
	struct lz_pidref id;
	pid_t pid = child(&id);
	lost_generation(f, &id, LZ_DSTORE_GEN_FAILED);
	assert_int_equal(run(f), 0);
	assert_int_equal(leases(f), 1);
	assert_int_equal(f->n_lines, 1);
	assert_non_null(strstr(f->lines[0], "kept the catalog lease of generation 1"));
	assert_non_null(strstr(f->lines[0], "its runtime_supervisor"));
	assert_non_null(strstr(f->lines[0], "still runs"));
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(run(f), 1);
	assert_int_equal(leases(f), 0);
	assert_non_null(strstr(f->lines[0], "released the catalog lease of lost generation 1"));
	/* Nothing left to do: idempotent. */
	assert_int_equal(run(f), 0);
	assert_int_equal(f->n_lines, 0);
}

/* A supervisor that is still exiting when recovery looks gets the wait
 * to finish: its lease is released in the same run, not kept. */
static void test_lz_leaserecovery__a_supervisor_exiting_within_the_wait_is_waited_for(void **state)
{
	struct fx *f = *state;
	struct lz_pidref id;
	pid_t pid = child(&id);
	lost_generation(f, &id, LZ_DSTORE_GEN_FAILED);
	pid_t killer = fork();
	assert_true(killer >= 0);
	if (killer == 0) {
		usleep(400 * 1000);
		kill(pid, SIGKILL);
		_exit(0);
	}
	/* recovery's pidfd sees the child gone once it exits, before it is reaped */
	assert_int_equal(run_waiting(f, 10000), 1);
	assert_int_equal(leases(f), 0);
	assert_int_equal(waitpid(killer, NULL, 0), killer);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
}

/* Live supervisors of three lost generations share the one wait: the run
 * takes it once (about 1 s), not once per lease (3 s). */
static void test_lz_leaserecovery__one_wait_for_the_whole_run(void **state)
{
	struct fx *f = *state;
	struct lz_pidref id[3];
	pid_t pid[3];
	for (int i = 0; i < 3; i++) {
		pid[i] = child(&id[i]);
		lost_generation(f, &id[i], LZ_DSTORE_GEN_FAILED);
	}
	int64_t began = lz_now_ms();
	assert_int_equal(run_waiting(f, 1000), 0);
	int64_t took = lz_now_ms() - began;
	assert_int_equal(leases(f), 3);
	assert_int_equal(f->n_lines, 3);
	assert_true(took >= 1000);
	assert_true(took < 2500); /* three waits would be 3,000 ms at least */
	for (int i = 0; i < 3; i++) {
		kill(pid[i], SIGKILL);
		assert_int_equal(waitpid(pid[i], NULL, 0), pid[i]);
	}
}

/* A generation that never started its supervisor has no process to wait for. */
static void test_lz_leaserecovery__no_process_recorded_is_released(void **state)
{
	struct fx *f = *state;
	lost_generation(f, NULL, LZ_DSTORE_GEN_FAILED);
	assert_int_equal(run(f), 1);
	assert_int_equal(leases(f), 0);
}


/* Spec 3.6 order: prepared-lower release intent (with the State Anchor
 * clean, its mount proved gone), the catalog lease, then Domain clean. */
static void test_lz_leaserecovery__release_intent_then_catalog_then_clean(void **state)
{
	struct fx *f = *state;
	uint64_t g = lost_generation(f, NULL, LZ_DSTORE_GEN_STARTING);
	OK(lz_dstore_participant_intent(f->h, g, LZ_DSTORE_ROLE_STATE_ANCHOR, &E));
	/* A reusable mount ID (an older build's record): no evidence either way. */
	struct lz_dstore_mount m = { .path = "/usr/local", .mnt_id = 1, .dev = 1, .ino = 1 };
	OK(lz_dstore_participant_add_mount(f->h, g, LZ_DSTORE_ROLE_STATE_ANCHOR, &m, &E));
	OK(lz_dstore_participant_activate(f->h, g, LZ_DSTORE_ROLE_STATE_ANCHOR, &E));
	OK(lz_dstore_generation_set_state(f->h, g, LZ_DSTORE_GEN_FAILED, &E));
	assert_int_equal(run(f), 1);
	assert_int_equal(leases(f), 0);
	char art[80];
	assert_int_equal(phase_of(f, g, LZ_DSTORE_ROLE_PREPARED_LOWER, art), LZ_DSTORE_PHASE_CLEAN);
	assert_string_equal(art, "");
	assert_int_equal(phase_of(f, g, LZ_DSTORE_ROLE_STATE_ANCHOR, NULL), LZ_DSTORE_PHASE_CLEAN);
	assert_int_equal(f->n_lines, 1);
	assert_non_null(strstr(f->lines[0], "released the catalog lease of lost generation 1"));
}

/* Lost between the catalog lease and "lease held": the record is
 * acquiring with the artifact; release intent is still its to take. */
static void test_lz_leaserecovery__acquiring_record_is_released(void **state)
{
	struct fx *f = *state;
	uint64_t g = 0;
	OK(lz_dstore_generation_begin(f->h, DOM, FP, &g, &E));
	OK(lz_dstore_participant_intent(f->h, g, LZ_DSTORE_ROLE_PREPARED_LOWER, &E));
	OK(lz_dstore_participant_set_artifact(f->h, g, LZ_DSTORE_ROLE_PREPARED_LOWER, ART, &E));
	OK(lz_catalog_lease_acquire(f->root, ART, DOM, g, &E));
	OK(lz_dstore_generation_set_state(f->h, g, LZ_DSTORE_GEN_FAILED, &E));
	assert_int_equal(run(f), 1);
	assert_int_equal(leases(f), 0);
	assert_int_equal(phase_of(f, g, LZ_DSTORE_ROLE_PREPARED_LOWER, NULL), LZ_DSTORE_PHASE_CLEAN);
}

/* The review's case: the Domain recorded artifact B held, the catalog
 * holds (A, D, 1). Neither the lease nor the record moves; the lease is
 * reported, and the record is not retired while it exists. */
static void test_lz_leaserecovery__mismatched_artifact_keeps_lease_and_record(void **state)
{
	struct fx *f = *state;
	uint64_t g = 0;
	OK(lz_dstore_generation_begin(f->h, DOM, FP, &g, &E));
	lower_leased(f, g, ART_B);
	OK(lz_catalog_lease_release(f->root, ART_B, DOM, g, NULL, NULL, &E));
	OK(lz_catalog_lease_acquire(f->root, ART, DOM, g, &E));
	OK(lz_dstore_generation_set_state(f->h, g, LZ_DSTORE_GEN_FAILED, &E));
	assert_int_equal(run(f), 0);
	assert_int_equal(leases(f), 1);
	assert_int_equal(f->n_lines, 1);
	assert_non_null(strstr(f->lines[0], "kept the catalog lease of generation 1 on artifact aaaaaaaaaaaa"));
	assert_non_null(strstr(f->lines[0], "its prepared_lower record (active) names artifact bbbbbbbbbbbb"));
	char art[80];
	assert_int_equal(phase_of(f, g, LZ_DSTORE_ROLE_PREPARED_LOWER, art), LZ_DSTORE_PHASE_ACTIVE);
	assert_string_equal(art, ART_B);

	assert_int_equal(lz_leaserecovery_retire_lower(f->h, f->root, DOM, g, &E), -EBUSY);
	assert_non_null(strstr(E.msg, "its catalog lease on artifact aaaaaaaaaaaa still exists"));
	assert_int_equal(phase_of(f, g, LZ_DSTORE_ROLE_PREPARED_LOWER, NULL), LZ_DSTORE_PHASE_ACTIVE);
	/* Once no lease of the generation is left, the record is retired. */
	OK(lz_catalog_lease_release(f->root, ART, DOM, g, NULL, NULL, &E));
	OK(lz_leaserecovery_retire_lower(f->h, f->root, DOM, g, &E));
	assert_int_equal(phase_of(f, g, LZ_DSTORE_ROLE_PREPARED_LOWER, NULL), LZ_DSTORE_PHASE_CLEAN);
	OK(lz_leaserecovery_retire_lower(f->h, f->root, DOM, g, &E)); /* clean: nothing to do */
}

/* A lease whose generation never recorded a prepared lower (no Domain
 * evidence), or whose record is clean, is kept. */
static void test_lz_leaserecovery__missing_or_clean_record_keeps_the_lease(void **state)
{
	struct fx *f = *state;
	uint64_t g = 0;
	OK(lz_dstore_generation_begin(f->h, DOM, FP, &g, &E));
	OK(lz_catalog_lease_acquire(f->root, ART, DOM, g, &E));
	OK(lz_dstore_generation_set_state(f->h, g, LZ_DSTORE_GEN_FAILED, &E));
	OK(lz_dstore_generation_begin(f->h, DOM, FP, &g, &E));
	OK(lz_dstore_participant_intent(f->h, g, LZ_DSTORE_ROLE_PREPARED_LOWER, &E));
	OK(lz_dstore_participant_clean(f->h, g, LZ_DSTORE_ROLE_PREPARED_LOWER, &E));
	OK(lz_catalog_lease_acquire(f->root, ART, DOM, g, &E));
	OK(lz_dstore_generation_set_state(f->h, g, LZ_DSTORE_GEN_FAILED, &E));
	assert_int_equal(run(f), 0);
	assert_int_equal(leases(f), 2);
	assert_int_equal(f->n_lines, 2);
	assert_non_null(strstr(f->lines[0], "generation 1"));
	assert_non_null(strstr(f->lines[0], "the Domain Store has no prepared_lower record of it"));
	assert_non_null(strstr(f->lines[1], "generation 2"));
	assert_non_null(strstr(f->lines[1], "its prepared_lower record (clean) names no artifact"));
}

/* The lease went between the listing and the release (another release of
 * the exact triple): reported as already absent, not counted as released;
 * the record, in release intent, becomes clean. */
static void test_lz_leaserecovery__a_lease_already_absent_is_not_counted(void **state)
{
	struct fx *f = *state;
	struct lz_pidref id;
	pid_t pid = child(&id);
	uint64_t g = lost_generation(f, &id, LZ_DSTORE_GEN_FAILED);
	pid_t other = fork();
	assert_true(other >= 0);
	if (other == 0) {
		struct lz_err e = { 0, "" };
		usleep(300 * 1000);
		int r = lz_catalog_lease_release(f->root, ART, DOM, g, NULL, NULL, &e);
		kill(pid, SIGKILL);
		_exit(r < 0);
	}
	assert_int_equal(run_waiting(f, 10000), 0);
	int st = 0;
	assert_int_equal(waitpid(other, &st, 0), other);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(leases(f), 0);
	assert_int_equal(f->n_lines, 1);
	assert_non_null(strstr(f->lines[0], "the catalog lease of lost generation 1 on artifact aaaaaaaaaaaa was "
					    "already absent"));
	assert_int_equal(phase_of(f, g, LZ_DSTORE_ROLE_PREPARED_LOWER, NULL), LZ_DSTORE_PHASE_CLEAN);
}

/* A child in new user, mount and network namespaces, with a tmpfs of its
 * own, that waits until killed: its namespaces and mount as a generation
 * would record them. */
static pid_t ns_child(struct lz_dstore_ns *mnt, struct lz_dstore_ns *net, uint64_t *mnt_id)
{
	int up[2];
	assert_int_equal(pipe2(up, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		struct lz_mount_id id = { 0 };
		struct lz_err e = { 0, "" };
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount("tmpfs", "/tmp", "tmpfs", 0, "size=64k") < 0 || lz_mountns_identify("/tmp", &id, &e) < 0)
			id.mnt_id = 0;
		if (write(up[1], &id.mnt_id, sizeof(id.mnt_id)) != (ssize_t)sizeof(id.mnt_id))
			_exit(1);
		alarm(60);
		pause();
		_exit(0);
	}
	close(up[1]);
	assert_int_equal(read(up[0], mnt_id, sizeof(*mnt_id)), (ssize_t)sizeof(*mnt_id));
	close(up[0]);
	assert_true(*mnt_id >= LZ_MOUNT_ID_UNIQUE_MIN);
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	struct lz_nsident m, n;
	OK(lz_nsident_of_pidfd(pidfd, CLONE_NEWNS, &m, &E));
	OK(lz_nsident_of_pidfd(pidfd, CLONE_NEWNET, &n, &E));
	close(pidfd);
	*mnt = (struct lz_dstore_ns){ m.id, m.inum };
	*net = (struct lz_dstore_ns){ n.id, n.inum };
	return pid;
}

/* A generation with no process left but its mount namespace, then its
 * network namespace, held by a descriptor outside it: kept, saying which;
 * released once the holder lets go. A reusable mount ID that some host
 * mount carries (an older build's record) is no evidence either way. */
static void test_lz_leaserecovery__held_namespaces_keep_the_lease(void **state)
{
	struct fx *f = *state;
	struct lz_dstore_ns mnt, net;
	uint64_t mnt_id = 0;
	pid_t pid = ns_child(&mnt, &net, &mnt_id);
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
	int held_mnt = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	int held_net = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(held_mnt >= 0 && held_net >= 0);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, NULL, 0), pid);

	uint64_t g = 0;
	OK(lz_dstore_generation_begin(f->h, DOM, FP, &g, &E));
	OK(lz_dstore_participant_intent(f->h, g, LZ_DSTORE_ROLE_RUNTIME_SUPERVISOR, &E));
	OK(lz_dstore_rs_namespace_record(f->h, g, LZ_DSTORE_NS_MOUNT, &mnt, &E));
	OK(lz_dstore_participant_intent(f->h, g, LZ_DSTORE_ROLE_CONNECTIVITY_HELPER, &E));
	OK(lz_dstore_rs_namespace_record(f->h, g, LZ_DSTORE_NS_NETWORK, &net, &E));
	OK(lz_dstore_participant_intent(f->h, g, LZ_DSTORE_ROLE_PREPARED_LOWER, &E));
	OK(lz_dstore_participant_set_artifact(f->h, g, LZ_DSTORE_ROLE_PREPARED_LOWER, ART, &E));
	OK(lz_catalog_lease_acquire(f->root, ART, DOM, g, &E));
	OK(lz_dstore_participant_set_lease_held(f->h, g, LZ_DSTORE_ROLE_PREPARED_LOWER, &E));
	OK(lz_dstore_participant_activate(f->h, g, LZ_DSTORE_ROLE_PREPARED_LOWER, &E));
	OK(lz_dstore_participant_intent(f->h, g, LZ_DSTORE_ROLE_STATE_ANCHOR, &E));
	struct lz_dstore_mount tmp = { .path = "/tmp", .mnt_id = mnt_id, .dev = 1, .ino = 1 };
	struct statx sx;
	assert_int_equal(statx(AT_FDCWD, "/", 0, STATX_MNT_ID, &sx), 0);
	struct lz_dstore_mount reused = { .path = "/old", .mnt_id = sx.stx_mnt_id, .dev = 1, .ino = 1 };
	OK(lz_dstore_participant_add_mount(f->h, g, LZ_DSTORE_ROLE_STATE_ANCHOR, &reused, &E));
	OK(lz_dstore_participant_add_mount(f->h, g, LZ_DSTORE_ROLE_STATE_ANCHOR, &tmp, &E));
	OK(lz_dstore_generation_set_state(f->h, g, LZ_DSTORE_GEN_FAILED, &E));

	assert_int_equal(run(f), 0);
	assert_int_equal(leases(f), 1);
	assert_non_null(strstr(f->lines[0], "its mount of /tmp (mount ID "));
	close(held_mnt);
	assert_int_equal(run(f), 0);
	assert_non_null(strstr(f->lines[0], "its network namespace (namespace ID "));
	close(held_net); /* the kernel frees a network namespace a little later */
	assert_int_equal(run_waiting(f, LZ_RECOVERY_EXIT_WAIT_MS), 1);
	assert_int_equal(leases(f), 0);
}

/* A line naming what a forged store recorded (a mount's path that would
 * retitle and clear the developer's terminal) reaches stderr escaped. */
static void test_lz_leaserecovery__a_recorded_path_reaches_stderr_escaped(void **state)
{
	struct fx *f = *state;
	struct lz_mount_id root;
	OK(lz_mountns_identify("/", &root, &E));
	if (root.mnt_id < LZ_MOUNT_ID_UNIQUE_MIN)
		fail_msg("this kernel gives no unique mount IDs (Linux 6.8)");
	uint64_t g = 0;
	OK(lz_dstore_generation_begin(f->h, DOM, FP, &g, &E));
	lower_leased(f, g, ART);
	OK(lz_dstore_participant_intent(f->h, g, LZ_DSTORE_ROLE_STATE_ANCHOR, &E));
	struct lz_dstore_mount m = { .path = "/home/agent\x1b]0;PWNED\a\x1b[2J", .mnt_id = root.mnt_id, .dev = 1,
				     .ino = 1 };
	OK(lz_dstore_participant_add_mount(f->h, g, LZ_DSTORE_ROLE_STATE_ANCHOR, &m, &E));
	OK(lz_dstore_generation_set_state(f->h, g, LZ_DSTORE_GEN_FAILED, &E));
	char log[128], text[2048];
	snprintf(log, sizeof(log), "%s/stderr", f->dir);
	fflush(stderr);
	int saved = dup(2), out = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(saved >= 0 && out >= 0);
	assert_int_equal(dup2(out, 2), 2);
	close(out);
	int r = lz_leaserecovery_run(f->h, f->root, DOM, lz_now_ms() + SHORT_WAIT_MS, lz_escape_report_stderr,
				     NULL, NULL, &E);
	assert_int_equal(dup2(saved, 2), 2);
	close(saved);
	assert_int_equal(r, 0);
	int fd = open(log, O_RDONLY | O_CLOEXEC);
	ssize_t n = read(fd, text, sizeof(text) - 1);
	close(fd);
	assert_true(n > 0);
	text[n] = '\0';
	assert_non_null(strstr(text, "its mount of /home/agent"));
	if (memchr(text, '\x1b', (size_t)n) != NULL || memchr(text, '\a', (size_t)n) != NULL)
		fail_msg("a control byte reached stderr: %s", text);
	assert_int_equal(leases(f), 1);
}

static void test_lz_leaserecovery__live_unknown_and_foreign_leases_are_kept(void **state)
{
	struct fx *f = *state;
	/* Still starting: its coordinator may come back (refuse on ambiguity). */
	lost_generation(f, NULL, LZ_DSTORE_GEN_STARTING);
	/* A generation the store never recorded. */
	OK(lz_catalog_lease_acquire(f->root, ART, DOM, 77, &E));
	/* Another Domain's lease is not this coordinator's to judge. */
	OK(lz_catalog_lease_acquire(f->root, ART, OTHER_DOM, 1, &E));
	assert_int_equal(run(f), 0);
	assert_int_equal(leases(f), 3);
	assert_int_equal(f->n_lines, 2);
	assert_non_null(strstr(f->lines[0], "generation 1") && strstr(f->lines[0], "it is still starting")
				? f->lines[0]
				: NULL);
	assert_non_null(strstr(f->lines[1], "generation 77") &&
					strstr(f->lines[1], "the Domain Store has no record of it")
				? f->lines[1]
				: NULL);
}

static enum lz_dstore_gen_state gen_state(struct fx *f, uint64_t g)
{
	struct lz_dstore_generation v;
	OK(lz_dstore_generation_get(f->h, g, &v, &E));
	return v.state;
}

/* Spec 3.3: the Domain flock proves a generation lost only with the
 * coordinator it recorded gone (a second lock file after the runtime
 * directory was made again would otherwise fail a live generation). */
static void test_lz_leaserecovery__a_generation_is_lost_only_once_its_coordinator_is_gone(void **state)
{
	struct fx *f = *state;
	struct lz_pidref hc;
	pid_t pid = child(&hc);
	uint64_t g = lost_generation(f, NULL, LZ_DSTORE_GEN_STARTING);
	OK(lz_dstore_participant_intent(f->h, g, LZ_DSTORE_ROLE_HOST_COORDINATOR, &E));
	OK(lz_dstore_participant_enter_process(f->h, g, LZ_DSTORE_ROLE_HOST_COORDINATOR, &hc, &E));
	lz_err_clear(&E);
	assert_int_equal(lz_leaserecovery_record_lost(f->h, g, &E), -EBUSY);
	assert_non_null(strstr(E.msg, "still served by its coordinator"));
	assert_int_equal(gen_state(f, g), LZ_DSTORE_GEN_STARTING);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	OK(lz_leaserecovery_record_lost(f->h, g, &E));
	assert_int_equal(gen_state(f, g), LZ_DSTORE_GEN_FAILED);
	/* A generation whose coordinator never recorded itself is lost. */
	uint64_t g2 = lost_generation(f, NULL, LZ_DSTORE_GEN_STARTING);
	OK(lz_leaserecovery_record_lost(f->h, g2, &E));
	assert_int_equal(gen_state(f, g2), LZ_DSTORE_GEN_FAILED);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_lz_leaserecovery__kept_while_the_supervisor_lives_released_once_gone),
		T(test_lz_leaserecovery__a_supervisor_exiting_within_the_wait_is_waited_for),
		T(test_lz_leaserecovery__one_wait_for_the_whole_run),
		T(test_lz_leaserecovery__no_process_recorded_is_released),
		T(test_lz_leaserecovery__live_unknown_and_foreign_leases_are_kept),
		T(test_lz_leaserecovery__a_recorded_path_reaches_stderr_escaped),
		T(test_lz_leaserecovery__held_namespaces_keep_the_lease),
		T(test_lz_leaserecovery__release_intent_then_catalog_then_clean),
		T(test_lz_leaserecovery__acquiring_record_is_released),
		T(test_lz_leaserecovery__mismatched_artifact_keeps_lease_and_record),
		T(test_lz_leaserecovery__missing_or_clean_record_keeps_the_lease),
		T(test_lz_leaserecovery__a_lease_already_absent_is_not_counted),
		T(test_lz_leaserecovery__a_generation_is_lost_only_once_its_coordinator_is_gone),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
