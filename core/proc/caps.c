#include "proc/caps.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proc/pidref.h"
#include "util/fdutil.h"

int lz_caps_limit(uint64_t keep)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = { 0 };
	for (int c = 0; c <= CAP_LAST_CAP; c++)
		if (!(keep & LZ_CAP(c)) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
			return -errno;
	for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		d[i].permitted = d[i].effective = (uint32_t)(keep >> (32 * i));
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 || syscall(SYS_capset, &h, d) < 0 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	return 0;
}

int lz_env_block(uintptr_t *start, uintptr_t *end)
{
	char buf[4096];
	uint64_t s = 0, e = 0;
	ssize_t n = lz_read_small("/proc/self/stat", buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	if (lz_proc_stat_field(buf, 50, &s) < 0 || lz_proc_stat_field(buf, 51, &e) < 0 || e < s)
		return -EIO;
	*start = (uintptr_t)s;
	*end = (uintptr_t)e;
	return 0;
}

int lz_env_limit(const char *const *keep)
{
	uintptr_t start, end;
	int rc = lz_env_block(&start, &end);
	return rc < 0 ? rc : lz_env_limit_block(keep, start, end);
}

int lz_env_limit_block(const char *const *keep, uintptr_t start, uintptr_t end)
{
	size_t n = 0;
	int rc = 0;
	while (keep[n] != NULL)
		n++;
	char **saved = calloc(n + 1, sizeof(*saved));
	if (saved == NULL)
		return -ENOMEM;
	for (size_t k = 0; k < n && rc == 0; k++) {
		const char *v = getenv(keep[k]);
		if (v != NULL && (saved[k] = strdup(v)) == NULL)
			rc = -ENOMEM;
	}
	if (rc == 0 && clearenv() != 0)
		rc = -ENOMEM;
	/* the strings themselves, not only the pointers to them */
	if (rc == 0)
		explicit_bzero((void *)start, end - start);
	/* What is kept goes back at the front of the block, where
	 * /proc/<pid>/environ shows it (the test harness finds a leaked
	 * process by it); it fits, having come from there. A value that does
	 * not (environ changed since exec) goes by setenv, shown nowhere. */
	char **env = rc == 0 ? calloc(n + 1, sizeof(*env)) : NULL;
	if (rc == 0 && env == NULL)
		rc = -ENOMEM;
	size_t used = 0, k_env = 0;
	for (size_t k = 0; k < n && rc == 0; k++) {
		if (saved[k] == NULL)
			continue;
		size_t need = strlen(keep[k]) + 1 + strlen(saved[k]) + 1;
		if (need <= end - start - used) {
			char *at = (char *)start + used;
			snprintf(at, need, "%s=%s", keep[k], saved[k]);
			env[k_env++] = at;
			used += need;
		}
	}
	if (rc == 0)
		environ = env; /* the array stays the process's */
	for (size_t k = 0; k < n && rc == 0; k++)
		if (saved[k] != NULL && getenv(keep[k]) == NULL && setenv(keep[k], saved[k], 1) < 0)
			rc = -errno;
	for (size_t k = 0; k < n; k++)
		free(saved[k]);
	free(saved);
	return rc;
}
