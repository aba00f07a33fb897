/* core/proc/lockslots: slots shared between processes by record locks.
 * Another process's slots are taken from the count, a killed holder's come
 * back, and a process's own threads never share a slot. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lz_slots.h"

#include "proc/lockslots.h"

static char path[] = "/tmp/lz-lockslots-XXXXXX";

static int setup(void **state)
{
	(void)state;
	int fd = mkstemp(path);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	return 0;
}

static int open_slots(void)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

static void test_lz_lockslots__refuses_what_cannot_hold_locks(void **state)
{
	(void)state;
	struct lz_lockslots s;
	int fd = open_slots(), ro = open(path, O_RDONLY | O_CLOEXEC), p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(lz_lockslots_init(&s, fd, 0), -EINVAL);
	assert_int_equal(lz_lockslots_init(&s, fd, LZ_LOCKSLOTS_MAX + 1), -EINVAL);
	assert_int_equal(lz_lockslots_init(&s, ro, 4), -EINVAL);
	assert_int_equal(lz_lockslots_init(&s, p[1], 4), -EINVAL);
	assert_int_equal(lz_lockslots_init(&s, -1, 4), -EINVAL);
	assert_int_equal(lz_lockslots_init(&s, fd, LZ_LOCKSLOTS_MAX), 0);
	close(fd);
	close(ro);
	close(p[0]);
	close(p[1]);
}

static void test_lz_lockslots__one_process_takes_each_slot_once(void **state)
{
	(void)state;
	struct lz_lockslots s;
	int fd = open_slots();
	bool seen[5] = { false };
	assert_int_equal(lz_lockslots_init(&s, fd, 5), 0);
	for (int k = 0; k < 5; k++) {
		int i = lz_lockslots_take(&s);
		assert_true(i >= 0 && i < 5 && !seen[i]);
		seen[i] = true;
	}
	assert_int_equal(lz_lockslots_take(&s), -EAGAIN);
	assert_int_equal(lz_lockslots_held(&s), 5);
	lz_lockslots_give(&s, 3);
	lz_lockslots_give(&s, 3); /* twice: no effect */
	assert_int_equal(lz_lockslots_held(&s), 4);
	assert_int_equal(lz_lockslots_take(&s), 3);
	assert_int_equal(lz_lockslots_take(&s), -EAGAIN);
	close(fd);
}

/* A child with its own description takes 6 of 8 slots; the parent can
 * take only the rest until the child is killed. */
static void test_lz_lockslots__other_processes_count_and_leave_nothing(void **state)
{
	(void)state;
	struct slot_holder other = slot_holder_start(path, 8, 6);
	struct lz_lockslots s;
	int fd = open_slots();
	assert_int_equal(lz_lockslots_init(&s, fd, 8), 0);
	int a = lz_lockslots_take(&s), b = lz_lockslots_take(&s);
	assert_true(a >= 0 && b >= 0 && a != b);
	assert_int_equal(lz_lockslots_take(&s), -EAGAIN);
	assert_int_equal(lz_lockslots_held(&s), 2);
	kill(other.pid, SIGKILL);
	slot_holder_end(&other);
	for (int k = 0; k < 6; k++)
		assert_true(lz_lockslots_take(&s) >= 0);
	assert_int_equal(lz_lockslots_take(&s), -EAGAIN);
	assert_int_equal(lz_lockslots_held(&s), 8);
	close(fd);
}

/* Sets of slots at other bases of one file never meet; others counts what
 * other processes hold of a set, never this one's own slots. */
static void test_lz_lockslots__bases_apart_and_others_counted(void **state)
{
	(void)state;
	struct slot_holder other = slot_holder_start(path, 8, 3); /* slots 0..2 at base 0 */
	struct lz_lockslots low, high;
	int fd = open_slots();
	assert_int_equal(lz_lockslots_init_at(&high, fd, UINT32_MAX - 7, 9), -EINVAL); /* past the offsets */
	assert_int_equal(lz_lockslots_init(&low, fd, 8), 0);
	assert_int_equal(lz_lockslots_init_at(&high, fd, 8, 8), 0);
	assert_int_equal(lz_lockslots_others(&low), 3);
	assert_int_equal(lz_lockslots_others(&high), 0);
	for (int k = 0; k < 8; k++)
		assert_int_equal(lz_lockslots_take(&high), k); /* none of the other's bytes */
	assert_int_equal(lz_lockslots_take(&high), -EAGAIN);
	assert_true(lz_lockslots_take(&low) >= 3);
	assert_int_equal(lz_lockslots_others(&low), 3);
	assert_int_equal(lz_lockslots_others(&high), 0);
	int again = open_slots(); /* another description: sees both sets of this one */
	struct lz_lockslots seen;
	assert_int_equal(lz_lockslots_init_at(&seen, again, 0, 16), 0);
	assert_int_equal(lz_lockslots_others(&seen), 3 + 1 + 8);
	lz_lockslots_destroy(&high);
	assert_int_equal(lz_lockslots_others(&seen), 3 + 1);
	assert_int_equal(lz_lockslots_held(&low), 1);
	slot_holder_end(&other);
	assert_int_equal(lz_lockslots_others(&seen), 1);
	lz_lockslots_destroy(&low);
	assert_int_equal(lz_lockslots_others(&seen), 0);
	lz_lockslots_destroy(&seen);
	close(again);
	close(fd);
}

/* give_one gives back the highest slot held, one at a time; destroy gives
 * back the rest at once, and only this description's: another process's
 * slots stay held. */
static void test_lz_lockslots__give_one_and_destroy(void **state)
{
	(void)state;
	struct slot_holder other = slot_holder_start(path, 8, 2); /* slots 0 and 1 */
	struct lz_lockslots s;
	int fd = open_slots(), probe = open_slots();
	assert_int_equal(lz_lockslots_init(&s, fd, 8), 0);
	for (int k = 0; k < 6; k++)
		assert_true(lz_lockslots_take(&s) >= 0);
	assert_int_equal(slots_locked(probe, 8), 8);
	lz_lockslots_give_one(&s);
	assert_int_equal(lz_lockslots_held(&s), 5);
	assert_int_equal(slots_locked(probe, 8), 7);
	assert_int_equal(lz_lockslots_take(&s), 7); /* the one given back was the highest */
	lz_lockslots_destroy(&s);
	assert_int_equal(slots_locked(probe, 8), 2);
	slot_holder_end(&other);
	assert_int_equal(slots_locked(probe, 8), 0);
	close(fd);
	close(probe);
}

#define THREADS 8
#define ROUNDS 2000
#define SLOTS 5

static struct lz_lockslots shared;
static atomic_int owners[SLOTS];
static atomic_int clashes, taken;

static void *taker(void *arg)
{
	(void)arg;
	for (int k = 0; k < ROUNDS; k++) {
		int i = lz_lockslots_take(&shared);
		if (i == -EAGAIN)
			continue;
		if (i < 0 || i >= SLOTS || atomic_fetch_add(&owners[i], 1) != 0)
			atomic_fetch_add(&clashes, 1);
		atomic_fetch_add(&taken, 1);
		if (i >= 0 && i < SLOTS)
			atomic_fetch_sub(&owners[i], 1);
		lz_lockslots_give(&shared, i);
	}
	return NULL;
}

static void test_lz_lockslots__threads_never_share_a_slot(void **state)
{
	(void)state;
	pthread_t t[THREADS];
	int fd = open_slots();
	assert_int_equal(lz_lockslots_init(&shared, fd, SLOTS), 0);
	for (int k = 0; k < THREADS; k++)
		assert_int_equal(pthread_create(&t[k], NULL, taker, NULL), 0);
	for (int k = 0; k < THREADS; k++)
		pthread_join(t[k], NULL);
	assert_int_equal(clashes, 0);
	assert_true(taken > ROUNDS);
	assert_int_equal(lz_lockslots_held(&shared), 0);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lz_lockslots__refuses_what_cannot_hold_locks),
		cmocka_unit_test(test_lz_lockslots__one_process_takes_each_slot_once),
		cmocka_unit_test(test_lz_lockslots__other_processes_count_and_leave_nothing),
		cmocka_unit_test(test_lz_lockslots__give_one_and_destroy),
		cmocka_unit_test(test_lz_lockslots__bases_apart_and_others_counted),
		cmocka_unit_test(test_lz_lockslots__threads_never_share_a_slot),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
