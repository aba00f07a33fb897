/* Running a check as a user with subordinate IDs (header-only, for the
 * cmocka suites). Root has none: as root (CI) the check runs in a child
 * that became the test user scripts/test.sh creates (LZ_TEST_USER,
 * default lazaret-test); without such a user, or without a range for a
 * user run, the test fails, it does not skip. */
#ifndef LZ_TEST_USER_H
#define LZ_TEST_USER_H

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* Whether /etc/subuid names this process's user. */
static inline bool lz_test_has_subuid(void)
{
	struct passwd *pw = getpwuid(getuid());
	if (pw == NULL)
		return false;
	FILE *f = fopen("/etc/subuid", "re");
	if (f == NULL)
		return false;
	char line[256];
	size_t len = strlen(pw->pw_name);
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		found = strncmp(line, pw->pw_name, len) == 0 && line[len] == ':';
	fclose(f);
	return found;
}

/* Runs check in a forked child (it may change its keyring and groups) and
 * fails with what it writes into why when it returns non-zero. As root
 * the child is the test user, with extra_group as a supplementary group
 * when not 0 (it need not exist). */
static inline void lz_test_run_as_user(int (*check)(char *why, size_t size), gid_t extra_group)
{
	char why[2048] = "";
	struct passwd *pw = NULL;
	const char *name = getenv("LZ_TEST_USER") ? getenv("LZ_TEST_USER") : "lazaret-test";
	if (geteuid() != 0) {
		if (!lz_test_has_subuid())
			fail_msg("this user has no /etc/subuid range (see docs/install.md)");
	} else if ((pw = getpwnam(name)) == NULL) {
		fail_msg("test user '%s' does not exist (scripts/test.sh creates it)", name);
	}
	int p[2];
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		gid_t groups[] = { pw ? pw->pw_gid : 0, extra_group };
		if (pw && (setgroups(extra_group ? 2 : 1, groups) < 0 || setgid(pw->pw_gid) < 0 ||
			   setuid(pw->pw_uid) < 0))
			_exit(2);
		/* Changing uid made this process undumpable, which its
		 * children inherit: joining one's namespaces would need
		 * CAP_SYS_PTRACE. A user's own process is dumpable. */
		if (pw && prctl(PR_SET_DUMPABLE, 1) < 0)
			_exit(2);
		int r = check(why, sizeof(why));
		(void)!write(p[1], why, strlen(why));
		_exit(r);
	}
	close(p[1]);
	size_t n = 0;
	ssize_t got;
	while (n < sizeof(why) - 1 &&
	       ((got = read(p[0], why + n, sizeof(why) - 1 - n)) > 0 || (got < 0 && errno == EINTR)))
		if (got > 0)
			n += (size_t)got;
	why[n] = '\0';
	close(p[0]);
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("as %s: %s", pw ? name : "this user", why[0] ? why : "could not become the test user");
}

#endif
