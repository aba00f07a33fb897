/* bench/router/fsops: the timed workloads of bench/router/run.
 *
 *   fsops walk DIR       lstat every entry of the tree (nftw, FTW_PHYS)
 *   fsops churn DIR N    create (open O_CREAT, write 16 bytes, close) then
 *                        unlink N files in DIR
 *
 * Prints the elapsed wall time in milliseconds on stdout (one number).
 * Measures, asserts nothing. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long entries;

static int visit(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path, (void)st, (void)flag, (void)ftw;
	entries++;
	return 0;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "walk") == 0) {
		double t0 = now_ms();
		if (nftw(argv[2], visit, 64, FTW_PHYS) != 0) {
			perror("nftw");
			return 1;
		}
		printf("%.2f\n", now_ms() - t0);
		fprintf(stderr, "%ld entries\n", entries);
		return 0;
	}
	if (argc >= 4 && strcmp(argv[1], "churn") == 0) {
		int n = atoi(argv[3]);
		char path[4096];
		double t0 = now_ms();
		for (int k = 0; k < n; k++) {
			snprintf(path, sizeof(path), "%s/f%05d", argv[2], k);
			int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
			if (fd < 0 || write(fd, "0123456789abcdef", 16) != 16 || close(fd) != 0) {
				perror(path);
				return 1;
			}
		}
		for (int k = 0; k < n; k++) {
			snprintf(path, sizeof(path), "%s/f%05d", argv[2], k);
			if (unlink(path) != 0) {
				perror(path);
				return 1;
			}
		}
		printf("%.2f\n", now_ms() - t0);
		return 0;
	}
	fprintf(stderr, "usage: fsops walk DIR | fsops churn DIR N\n");
	return 2;
}
