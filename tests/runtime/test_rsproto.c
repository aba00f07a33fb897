/* The HC <-> RS control records (core/runtime/rsproto.h): whole records
 * round-trip over a SOCK_SEQPACKET socketpair; a truncated, oversized,
 * unknown, out-of-range or forged record is -EBADMSG (the output left as
 * it was); EOF is -EPIPE; a silent peer is -ETIMEDOUT; a record of another
 * Domain or generation, and an acknowledgement that does not echo the
 * staged identity exactly, are never accepted. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "runtime/rsproto.h"

#define DOMAIN "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define OTHER "f123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

struct fx {
	int sv[2];
	struct lz_rs_msg a, b; /* large: kept off the stack */
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (f == NULL || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, f->sv) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	close(f->sv[0]);
	if (f->sv[1] >= 0)
		close(f->sv[1]);
	free(f);
	return 0;
}

/* Sends raw bytes as one packet. */
static void send_raw(int fd, const void *p, size_t n)
{
	assert_int_equal(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void test_lz_rs_msg_init__zeroes_and_names(void **state)
{
	struct fx *f = *state;
	memset(&f->a, 0xa5, sizeof(f->a));
	lz_rs_msg_init(&f->a, LZ_RS_STAGED, 7, DOMAIN);
	assert_int_equal(f->a.type, LZ_RS_STAGED);
	assert_int_equal(f->a.generation, 7);
	assert_string_equal(f->a.domain_id, DOMAIN);
	assert_int_equal(f->a.n_mounts, 0);
	assert_int_equal(f->a.attest_len, 0);
	assert_int_equal(f->a.text[0], '\0');
	assert_int_equal(f->a.id.pid, 0);
	/* A longer ID is cut to the field, still terminated. */
	lz_rs_msg_init(&f->a, LZ_RS_STAGED, 7, DOMAIN "ffff");
	assert_string_equal(f->a.domain_id, DOMAIN);
}

static void test_lz_rs_msg_name__every_type_and_unknown(void **state)
{
	(void)state;
	assert_string_equal(lz_rs_msg_name(LZ_RS_MOUNTS), "mounts");
	assert_string_equal(lz_rs_msg_name(LZ_RS_STAGED), "staged");
	assert_string_equal(lz_rs_msg_name(LZ_RS_READY), "ready");
	assert_string_equal(lz_rs_msg_name(LZ_RS_STOPPED), "stopped");
	assert_string_equal(lz_rs_msg_name(LZ_RS_FAILED), "failed");
	assert_string_equal(lz_rs_msg_name(LZ_RS_HELPER_STAGED), "helper-staged");
	assert_string_equal(lz_rs_msg_name(LZ_HC_ACK), "ack");
	assert_string_equal(lz_rs_msg_name(LZ_HC_STOP), "stop");
	const uint32_t unknown[] = { 0, 7, 8, 9, 12, 255, UINT32_MAX };
	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++)
		assert_null(lz_rs_msg_name(unknown[i]));
}

static void test_lz_rs_recv__round_trip_every_field(void **state)
{
	struct fx *f = *state;
	lz_rs_msg_init(&f->a, LZ_RS_READY, 42, DOMAIN);
	f->a.n_mounts = LZ_RS_MAX_ANCHORS + 1;
	for (size_t i = 0; i < f->a.n_mounts; i++)
		f->a.mounts[i] = (struct lz_mount_id){ .mnt_id = 100 + i, .dev = 2 * i, .ino = 3 * i };
	f->a.id = (struct lz_pidref){ .pidfs_dev = 9, .pidfs_ino = 1234, .pid = 77, .start_time = 555 };
	memset(f->a.id.boot_id, 0x11, sizeof(f->a.id.boot_id));
	snprintf(f->a.text, sizeof(f->a.text), "runsc: all good");
	f->a.attest_len = LZ_NETATTEST_ENCODED_MAX;
	for (size_t i = 0; i < f->a.attest_len; i++)
		f->a.attest[i] = (uint8_t)(i ^ 0x5a);
	assert_int_equal(lz_rs_send(f->sv[0], &f->a), 0);
	memset(&f->b, 0xee, sizeof(f->b));
	assert_int_equal(lz_rs_recv(f->sv[1], &f->b, 1000), 0);
	assert_memory_equal(&f->a, &f->b, sizeof(f->a));
	assert_true(lz_rs_msg_for(&f->b, 42, DOMAIN));
	/* Both directions: the HC's STOP. */
	lz_rs_msg_init(&f->a, LZ_HC_STOP, 42, DOMAIN);
	assert_int_equal(lz_rs_send(f->sv[1], &f->a), 0);
	assert_int_equal(lz_rs_recv(f->sv[0], &f->b, -1), 0);
	assert_int_equal(f->b.type, LZ_HC_STOP);
}

static void test_lz_rs_recv__strings_arrive_terminated(void **state)
{
	struct fx *f = *state;
	lz_rs_msg_init(&f->a, LZ_RS_FAILED, 1, DOMAIN);
	memset(f->a.text, 'x', sizeof(f->a.text)); /* no NUL in the field */
	assert_int_equal(lz_rs_send(f->sv[0], &f->a), 0);
	assert_int_equal(lz_rs_recv(f->sv[1], &f->b, 1000), 0);
	assert_int_equal(strlen(f->b.text), sizeof(f->b.text) - 1);
	assert_string_equal(f->b.domain_id, DOMAIN);
}

static void test_lz_rs_recv__truncated_and_oversized_refused(void **state)
{
	struct fx *f = *state;
	lz_rs_msg_init(&f->a, LZ_RS_STAGED, 1, DOMAIN);
	/* One byte short, half, a single byte. */
	memset(&f->b, 0, sizeof(f->b));
	send_raw(f->sv[0], &f->a, sizeof(f->a) - 1);
	assert_int_equal(lz_rs_recv(f->sv[1], &f->b, 1000), -EBADMSG);
	assert_int_equal(f->b.type, 0); /* nothing of it kept */
	send_raw(f->sv[0], &f->a, sizeof(f->a) / 2);
	assert_int_equal(lz_rs_recv(f->sv[1], &f->b, 1000), -EBADMSG);
	send_raw(f->sv[0], &f->a, 1);
	assert_int_equal(lz_rs_recv(f->sv[1], &f->b, 1000), -EBADMSG);
	/* One byte more than a record: the whole packet is consumed, not
	 * left to be read as the next record. */
	uint8_t *big = calloc(1, sizeof(f->a) + 1);
	assert_non_null(big);
	memcpy(big, &f->a, sizeof(f->a));
	send_raw(f->sv[0], big, sizeof(f->a) + 1);
	free(big);
	assert_int_equal(lz_rs_recv(f->sv[1], &f->b, 1000), -EBADMSG);
	/* The stream is still in step: a good record after the bad ones. */
	assert_int_equal(lz_rs_send(f->sv[0], &f->a), 0);
	assert_int_equal(lz_rs_recv(f->sv[1], &f->b, 1000), 0);
	assert_int_equal(f->b.type, LZ_RS_STAGED);
}

/* A refused record leaves the output as it was (a caller that logs it
 * on error must not see the forged fields). */
static void expect_refused(struct fx *f)
{
	memset(&f->b, 0x5a, sizeof(f->b));
	assert_int_equal(lz_rs_send(f->sv[0], &f->a), 0);
	assert_int_equal(lz_rs_recv(f->sv[1], &f->b, 1000), -EBADMSG);
	for (size_t i = 0; i < sizeof(f->b); i++)
		assert_int_equal(((const uint8_t *)&f->b)[i], 0x5a);
}

static void test_lz_rs_recv__forged_fields_refused(void **state)
{
	struct fx *f = *state;
	const uint32_t types[] = { 0, 7, 9, 12, UINT32_MAX };
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		lz_rs_msg_init(&f->a, types[i], 1, DOMAIN);
		expect_refused(f);
	}
	lz_rs_msg_init(&f->a, LZ_RS_MOUNTS, 1, DOMAIN);
	f->a.n_mounts = LZ_RS_MAX_ANCHORS + 2;
	expect_refused(f);
	f->a.n_mounts = UINT32_MAX;
	expect_refused(f);
	f->a.n_mounts = LZ_RS_MAX_ANCHORS + 1; /* the bound itself is fine */
	assert_int_equal(lz_rs_send(f->sv[0], &f->a), 0);
	assert_int_equal(lz_rs_recv(f->sv[1], &f->b, 1000), 0);
	lz_rs_msg_init(&f->a, LZ_RS_READY, 1, DOMAIN);
	f->a.attest_len = LZ_NETATTEST_ENCODED_MAX + 1;
	expect_refused(f);
	f->a.attest_len = UINT32_MAX;
	expect_refused(f);
	/* Domain IDs: uppercase, short, non-hex, empty, unterminated. */
	const char *ids[] = { "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
			      "0123456789abcdef", "g123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			      "" };
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		lz_rs_msg_init(&f->a, LZ_RS_STAGED, 1, ids[i]);
		expect_refused(f);
	}
	lz_rs_msg_init(&f->a, LZ_RS_STAGED, 1, DOMAIN);
	f->a.domain_id[64] = 'a'; /* 65 hex bytes, no NUL: cut to 64 */
	assert_int_equal(lz_rs_send(f->sv[0], &f->a), 0);
	assert_int_equal(lz_rs_recv(f->sv[1], &f->b, 1000), 0);
	assert_string_equal(f->b.domain_id, DOMAIN);
	lz_rs_msg_init(&f->a, LZ_RS_STAGED, 1, DOMAIN);
	f->a.domain_id[10] = '\0'; /* a NUL inside: short */
	expect_refused(f);
}

static void test_lz_rs_recv__timeout_and_eof(void **state)
{
	struct fx *f = *state;
	assert_int_equal(lz_rs_recv(f->sv[1], &f->b, 0), -ETIMEDOUT);
	assert_int_equal(lz_rs_recv(f->sv[1], &f->b, 50), -ETIMEDOUT);
	/* A record sent before the peer left is still delivered, then EOF. */
	lz_rs_msg_init(&f->a, LZ_RS_STOPPED, 3, DOMAIN);
	assert_int_equal(lz_rs_send(f->sv[0], &f->a), 0);
	close(f->sv[0]);
	f->sv[0] = -1;
	assert_int_equal(lz_rs_recv(f->sv[1], &f->b, 1000), 0);
	assert_int_equal(f->b.type, LZ_RS_STOPPED);
	assert_int_equal(lz_rs_recv(f->sv[1], &f->b, 1000), -EPIPE);
	assert_int_equal(lz_rs_recv(f->sv[1], &f->b, -1), -EPIPE);
	/* Sending to a peer that is gone: -EPIPE, no SIGPIPE. */
	assert_int_equal(lz_rs_send(f->sv[1], &f->a), -EPIPE);
	f->sv[0] = dup(f->sv[1]); /* teardown closes both */
}

static void test_lz_rs_recv__bad_descriptor(void **state)
{
	struct fx *f = *state;
	assert_int_equal(lz_rs_send(-1, &f->a), -EBADF);
	/* poll reports POLLNVAL for a closed descriptor; recv then fails. */
	int fd = dup(f->sv[1]);
	close(fd);
	assert_int_equal(lz_rs_recv(fd, &f->b, 10), -EBADF);
}

static void test_lz_rs_msg_for__domain_and_generation(void **state)
{
	struct fx *f = *state;
	lz_rs_msg_init(&f->a, LZ_RS_READY, 5, DOMAIN);
	assert_true(lz_rs_msg_for(&f->a, 5, DOMAIN));
	assert_false(lz_rs_msg_for(&f->a, 4, DOMAIN));
	assert_false(lz_rs_msg_for(&f->a, 6, DOMAIN));
	assert_false(lz_rs_msg_for(&f->a, 5, OTHER));
	assert_false(lz_rs_msg_for(&f->a, 5, ""));
}

static void test_lz_rs_ack_echoes__exact_identity_only(void **state)
{
	struct fx *f = *state;
	struct lz_rs_msg *staged = &f->a, *ack = &f->b;
	lz_rs_msg_init(staged, LZ_RS_STAGED, 9, DOMAIN);
	staged->id = (struct lz_pidref){ .pidfs_dev = 1, .pidfs_ino = 2, .pid = 3, .start_time = 4 };
	memset(staged->id.boot_id, 0x22, sizeof(staged->id.boot_id));
	lz_rs_msg_init(ack, LZ_HC_ACK, 9, DOMAIN);
	ack->id = staged->id;
	assert_true(lz_rs_ack_echoes(ack, staged));
	/* Another type (the staged record itself, duplicated back). */
	assert_false(lz_rs_ack_echoes(staged, staged));
	ack->type = LZ_HC_STOP;
	assert_false(lz_rs_ack_echoes(ack, staged));
	ack->type = LZ_HC_ACK;
	/* Another generation or Domain. */
	ack->generation = 8;
	assert_false(lz_rs_ack_echoes(ack, staged));
	ack->generation = 9;
	memcpy(ack->domain_id, OTHER, 64);
	assert_false(lz_rs_ack_echoes(ack, staged));
	memcpy(ack->domain_id, DOMAIN, 64);
	assert_true(lz_rs_ack_echoes(ack, staged));
	/* Each identity field on its own. */
	struct lz_pidref good = staged->id;
	ack->id.pid++;
	assert_false(lz_rs_ack_echoes(ack, staged));
	ack->id = good;
	ack->id.pidfs_ino++;
	assert_false(lz_rs_ack_echoes(ack, staged));
	ack->id = good;
	ack->id.pidfs_dev++;
	assert_false(lz_rs_ack_echoes(ack, staged));
	ack->id = good;
	ack->id.start_time++;
	assert_false(lz_rs_ack_echoes(ack, staged));
	ack->id = good;
	ack->id.boot_id[15] ^= 1;
	assert_false(lz_rs_ack_echoes(ack, staged));
}

int main(void)
{
	signal(SIGPIPE, SIG_DFL); /* a send without MSG_NOSIGNAL would kill the test */
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_lz_rs_msg_init__zeroes_and_names),
		T(test_lz_rs_msg_name__every_type_and_unknown),
		T(test_lz_rs_recv__round_trip_every_field),
		T(test_lz_rs_recv__strings_arrive_terminated),
		T(test_lz_rs_recv__truncated_and_oversized_refused),
		T(test_lz_rs_recv__forged_fields_refused),
		T(test_lz_rs_recv__timeout_and_eof),
		T(test_lz_rs_recv__bad_descriptor),
		T(test_lz_rs_msg_for__domain_and_generation),
		T(test_lz_rs_ack_echoes__exact_identity_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
