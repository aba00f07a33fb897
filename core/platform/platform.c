#include "platform/platform.h"

#include <errno.h>
#include <string.h>
#include <sys/utsname.h>

static int parse_component(const char **p, unsigned *ret)
{
	unsigned v = 0;
	const char *s = *p;
	if (*s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > 100000)
			return -EINVAL;
		v = v * 10 + (unsigned)(*s - '0');
	}
	*p = s;
	*ret = v;
	return 0;
}

int lz_kernel_release_parse(const char *release, unsigned *ret_major, unsigned *ret_minor)
{
	unsigned major, minor;
	const char *p = release;
	if (parse_component(&p, &major) < 0 || *p++ != '.' || parse_component(&p, &minor) < 0)
		return -EINVAL;
	*ret_major = major;
	*ret_minor = minor;
	return 0;
}

int lz_platform_check_values(const char *machine, const char *release, struct lz_err *err)
{
	unsigned major, minor;
	if (strcmp(machine, "x86_64") != 0)
		return lz_err_set(err, ENOTSUP,
				  "unsupported architecture %s: Lazaret needs x86-64 Linux", machine);
	if (lz_kernel_release_parse(release, &major, &minor) < 0)
		return lz_err_set(err, ENOTSUP, "cannot parse kernel release '%s'", release);
	if (major < LZ_KERNEL_MIN_MAJOR || (major == LZ_KERNEL_MIN_MAJOR && minor < LZ_KERNEL_MIN_MINOR))
		return lz_err_set(err, ENOTSUP,
				  "kernel %s is too old: Lazaret needs Linux %d.%d or newer "
				  "(pidfd and pidfs process identity); on Debian 12: install "
				  "linux-image-amd64 from bookworm-backports (scripts/setup.sh does) "
				  "and reboot",
				  release, LZ_KERNEL_MIN_MAJOR, LZ_KERNEL_MIN_MINOR);
	return 0;
}

int lz_platform_check(struct lz_err *err)
{
	struct utsname u;
	if (uname(&u) < 0)
		return lz_err_set(err, errno, "uname: %s", strerror(errno));
	return lz_platform_check_values(u.machine, u.release, err);
}
