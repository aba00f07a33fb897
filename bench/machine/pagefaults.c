/* What a page fault costs on this machine (docs/performance.md, "Page
 * faults"): the first write to fresh anonymous memory, the same memory
 * populated in one call, the first write to pages shared with a live
 * forked child, the first write after a fork whose child is gone, and
 * rewriting a working set after fork+exec against posix_spawn. Medians of
 * five rounds; one line each, microseconds per page. */
#define _GNU_SOURCE
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum { PAGES = 4096, ROUNDS = 5 };

extern char **environ;

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static char *fresh(size_t len)
{
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return m;
}

static double touch(char *m, size_t len, size_t page, char v)
{
	double t = now_us();
	for (size_t i = 0; i < len; i += page)
		m[i] = v;
	return now_us() - t;
}

static void run_true(int vfork_like)
{
	char *argv[] = { "/bin/true", NULL };
	pid_t pid;
	if (vfork_like) {
		if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0)
			exit(1);
	} else if ((pid = fork()) == 0) {
		execve(argv[0], argv, environ);
		_exit(127);
	}
	waitpid(pid, NULL, 0);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v)
{
	qsort(v, ROUNDS, sizeof(*v), cmp);
	return v[ROUNDS / 2];
}

int main(void)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), len = PAGES * page;
	double first[ROUNDS], populate[ROUNDS], cow[ROUNDS], wp[ROUNDS], after_fork[ROUNDS], after_spawn[ROUNDS];
	for (int r = 0; r < ROUNDS; r++) {
		char *a = fresh(len), *b = fresh(len);
		first[r] = touch(a, len, page, 1) / PAGES;
		double t = now_us();
		if (madvise(b, len, MADV_POPULATE_WRITE) != 0) {
			perror("madvise(MADV_POPULATE_WRITE)");
			return 1;
		}
		populate[r] = (now_us() - t) / PAGES;
		pid_t child = fork();
		if (child == 0) {
			pause();
			_exit(0);
		}
		cow[r] = touch(a, len, page, 2) / PAGES;
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		if ((child = fork()) == 0)
			_exit(0);
		waitpid(child, NULL, 0);
		wp[r] = touch(b, len, page, 2) / PAGES;
		run_true(0);
		after_fork[r] = touch(a, len, page, 3) / PAGES;
		run_true(1);
		after_spawn[r] = touch(a, len, page, 4) / PAGES;
		munmap(a, len);
		munmap(b, len);
	}
	printf("first write to fresh memory (a fault)      %6.2f us/page\n", median(first));
	printf("populated by MADV_POPULATE_WRITE           %6.2f us/page\n", median(populate));
	printf("first write, shared with a live fork child %6.2f us/page\n", median(cow));
	printf("first write after a fork, child gone       %6.2f us/page\n", median(wp));
	printf("rewrite after fork + exec of /bin/true     %6.2f us/page\n", median(after_fork));
	printf("rewrite after posix_spawn of /bin/true     %6.2f us/page\n", median(after_spawn));
	return 0;
}
