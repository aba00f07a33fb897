/* Fields of /proc/<pid>/stat (pidref.h). A file of its own: the
 * statically linked keeper (core/keeper/) reads the flags field too. */
#include "proc/pidref.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

int lz_proc_stat_field(const char *text, int field, uint64_t *ret)
{
	/* comm (field 2) may contain spaces and ')': fields resume after the
	 * last ')'. Field 3 follows it. */
	const char *p = strrchr(text, ')');
	if (p == NULL || field < 4)
		return -EINVAL;
	p++;
	for (int f = 3; f < field; f++) {
		p = strchr(p + 1, ' ');
		if (p == NULL)
			return -EINVAL;
	}
	p++;
	uint64_t v = 0;
	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		uint64_t digit = (uint64_t)(*p - '0');
		if (v > UINT64_MAX / 10 || (v == UINT64_MAX / 10 && digit > UINT64_MAX % 10))
			return -EOVERFLOW;
		v = v * 10 + digit;
	}
	*ret = v;
	return 0;
}
