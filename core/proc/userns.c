#include "proc/userns.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/hostprobe.h"
#include "proc/spawn.h"
#include "util/cleanup.h"

int lz_idmap_for_invoking_user(struct lz_idmap *ret, struct lz_err *err)
{
	struct lz_hostprobe_identity me;
	struct lz_hostprobe_subid_range uids, gids;
	int r;
	/* The range diag judges too (lz_hostprobe_subid_choose): the lowest
	 * of at least 65536 IDs, refused when it holds host root, a system ID
	 * or your own. */
	if ((r = lz_hostprobe_identity(err, &me)) < 0 ||
	    (r = lz_hostprobe_subid_range(LZ_HOSTPROBE_SUBUID, &me, err, &uids)) < 0 ||
	    (r = lz_hostprobe_subid_range(LZ_HOSTPROBE_SUBGID, &me, err, &gids)) < 0)
		return r;
	*ret = (struct lz_idmap){ .uid = me.uid, .gid = me.gid, .subuid_start = uids.start,
				  .subgid_start = gids.start };
	return 0;
}

static int parse_u32(const char **p, uint32_t *ret)
{
	const char *s = *p;
	while (*s == ' ' || *s == '\t')
		s++;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	uint64_t v = 0;
	for (; *s >= '0' && *s <= '9'; s++) {
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > UINT32_MAX)
			return -EINVAL;
	}
	*p = s;
	*ret = (uint32_t)v;
	return 0;
}

int lz_idmap_verify_text(const char *text, uint32_t host_id, uint32_t sub_start,
			 struct lz_err *err)
{
	const uint32_t want[2][3] = { { 0, host_id, 1 }, { 1, sub_start, LZ_USERNS_SUBID_COUNT } };
	const char *p = text;
	for (int line = 0; line < 2; line++) {
		for (int f = 0; f < 3; f++) {
			uint32_t v;
			if (parse_u32(&p, &v) < 0 || v != want[line][f])
				return lz_err_set(err, EPERM,
						  "ID map line %d is not '%u %u %u' as expected", line + 1,
						  want[line][0], want[line][1], want[line][2]);
		}
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p++ != '\n')
			return lz_err_set(err, EPERM, "ID map line %d is malformed", line + 1);
	}
	if (*p != '\0')
		return lz_err_set(err, EPERM, "ID map has more than the two expected lines");
	return 0;
}

/* Runs a setuid ID-map helper with an exact argument vector, no shell and an
 * empty environment, and waits for it through its pidfd. It runs from the
 * descriptor it was checked through (execveat keeps the setuid bit), so a
 * name changed since cannot choose what runs with root's authority. */
static int run_map_helper(const char *name, char *const argv[], struct lz_err *err)
{
	struct lz_path tool = LZ_PATH_INIT;
	int r = lz_hostprobe_tool_locate(name, err, &tool);
	if (r < 0)
		return lz_err_prefix(err, r, "%s (package uidmap): ", name);
	struct lz_spawn spec = { .label = name, .exe_fd = tool.fd, .argv = argv,
				 .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = STDERR_FILENO };
	r = lz_spawn_run(&spec, name, 30000, err);
	lz_path_release(&tool);
	if (r < 0)
		return lz_err_prefix(err, r, "check /etc/sub%cid for your user: ", name[3]);
	return 0;
}

static int read_map(int procdir, const char *file, char *buf, size_t size, struct lz_err *err)
{
	_cleanup_close_ int fd = openat(procdir, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return lz_err_set(err, errno, "open %s: %s", file, strerror(errno));
	ssize_t n = read(fd, buf, size - 1);
	if (n < 0)
		return lz_err_set(err, errno, "read %s: %s", file, strerror(errno));
	buf[n] = '\0';
	return 0;
}

int lz_idmap_write_and_verify(const struct lz_idmap *map, pid_t pid, int pidfd, struct lz_err *err)
{
	char spid[16], uid[16], gid[16], subu[16], subg[16], count[16];
	snprintf(spid, sizeof(spid), "%d", (int)pid);
	snprintf(uid, sizeof(uid), "%u", (unsigned)map->uid);
	snprintf(gid, sizeof(gid), "%u", (unsigned)map->gid);
	snprintf(subu, sizeof(subu), "%u", map->subuid_start);
	snprintf(subg, sizeof(subg), "%u", map->subgid_start);
	snprintf(count, sizeof(count), "%u", LZ_USERNS_SUBID_COUNT);
	char *const uargv[] = { "newuidmap", spid, "0", uid, "1", "1", subu, count, NULL };
	char *const gargv[] = { "newgidmap", spid, "0", gid, "1", "1", subg, count, NULL };
	int r;
	if ((r = run_map_helper("newuidmap", uargv, err)) < 0 ||
	    (r = run_map_helper("newgidmap", gargv, err)) < 0)
		return r;

	/* The child is unreaped, so pid still names it; the pidfd check
	 * after opening /proc/<pid> proves the directory is that child's. */
	char proc[32];
	snprintf(proc, sizeof(proc), "/proc/%d", (int)pid);
	_cleanup_close_ int procdir = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (procdir < 0)
		return lz_err_set(err, errno, "open %s: %s", proc, strerror(errno));
	if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0)
		return lz_err_set(err, errno, "namespace child vanished: %s", strerror(errno));
	char text[256];
	if ((r = read_map(procdir, "uid_map", text, sizeof(text), err)) < 0)
		return r;
	if ((r = lz_idmap_verify_text(text, map->uid, map->subuid_start, err)) < 0)
		return lz_err_prefix(err, r, "uid_map: ");
	if ((r = read_map(procdir, "gid_map", text, sizeof(text), err)) < 0)
		return r;
	if ((r = lz_idmap_verify_text(text, map->gid, map->subgid_start, err)) < 0)
		return lz_err_prefix(err, r, "gid_map: ");
	return 0;
}
