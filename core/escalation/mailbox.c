/* The Escalation Mailbox (mailbox.h). */
#include "escalation/mailbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "escalation/record.h"
#include "fs/file.h"
#include "util/cleanup.h"
#include "util/escape.h"
#include "util/sys.h"

int lz_mailbox_create(int gen_fd, struct lz_mailbox *ret, struct lz_err *err)
{
	struct lz_mailbox mb = LZ_MAILBOX_INIT;
	int r;
	char self[32];
	if ((r = lz_dir_ensure(gen_fd, LZ_MAILBOX_DIR, 0700, &mb.dir, err)) < 0 ||
	    (r = lz_dir_ensure(mb.dir, "outbox", 0700, &mb.outbox, err)) < 0 ||
	    (r = lz_dir_ensure(mb.dir, "inbox", 0700, &mb.inbox, err)) < 0 ||
	    (r = lz_dir_ensure(mb.dir, "credential", 0700, &mb.credential, err)) < 0 ||
	    (r = lz_dir_ensure(mb.dir, "key", 0700, &mb.key, err)) < 0)
		goto fail;
	mb.watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	/* inotify takes a name: the descriptor's own /proc link names exactly
	 * the directory already opened. */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", mb.outbox);
	if (mb.watch < 0 || inotify_add_watch(mb.watch, self, IN_MOVED_TO | IN_CLOSE_WRITE | IN_ONLYDIR) < 0) {
		r = lz_err_set(err, errno, "watch the escalation outbox: %s", strerror(errno));
		goto fail;
	}
	*ret = mb;
	return 0;
fail:
	lz_mailbox_close(&mb);
	return r;
}

void lz_mailbox_drain_watch(struct lz_mailbox *mb)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	while (read(mb->watch, buf, sizeof(buf)) > 0)
		;
}

/* Whatever name holds leaves the outbox: a directory or anything else
 * that cannot be unlinked moves aside (escalation/refused-N, never
 * mounted into the sandbox), so no entry is seen twice. */
static void remove_entry(struct lz_mailbox *mb, const char *name)
{
	char aside[32];
	if (unlinkat(mb->outbox, name, 0) == 0 || errno == ENOENT)
		return;
	snprintf(aside, sizeof(aside), "refused-%u", mb->refused++);
	(void)renameat(mb->outbox, name, mb->dir, aside);
}

/* The next ready name in the outbox into name; false when none. */
static bool next_name(struct lz_mailbox *mb, char name[LZ_MAILBOX_NAME_MAX])
{
	_cleanup_close_ int fd = openat(mb->outbox, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return false;
	DIR *d = fdopendir(fd);
	if (d == NULL)
		return false;
	fd = -EBADF; /* the stream owns it */
	bool found = false;
	struct dirent *e;
	while (!found && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue; /* being written, or . and .. */
		if (strlen(e->d_name) >= LZ_MAILBOX_NAME_MAX) {
			/* Too long to be ours: removed, never read. */
			remove_entry(mb, e->d_name);
			continue;
		}
		strcpy(name, e->d_name);
		found = true;
	}
	closedir(d);
	return found;
}

/* Reads the entry name once into buf. The name is the sandbox's: shown
 * escaped (it reaches hc.log). */
static int read_entry(int outbox, const char *name, uint8_t *buf, size_t *ret_len, struct lz_err *err)
{
	char shown[LZ_ESCAPE_MAX(LZ_MAILBOX_NAME_MAX) + 1];
	lz_escape(name, strlen(name), shown, sizeof(shown));
	_cleanup_close_ int fd = lz_openat2(outbox, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC,
					    LZ_RESOLVE_OWNED);
	struct stat st;
	if (fd < 0)
		return lz_err_set(err, errno, "escalation entry %s: %s", shown,
				  errno == ELOOP ? "a symlink" : strerror(errno));
	if (fstat(fd, &st) < 0)
		return lz_err_set(err, errno, "escalation entry %s: %s", shown, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return lz_err_set(err, EPERM, "escalation entry %s: not a regular file", shown);
	if (st.st_nlink != 1)
		return lz_err_set(err, EPERM, "escalation entry %s: has %ju links", shown, (uintmax_t)st.st_nlink);
	if (st.st_size > (off_t)LZ_ESC_RECORD_MAX)
		return lz_err_set(err, E2BIG, "escalation entry %s: %jd bytes, more than %u", shown,
				  (intmax_t)st.st_size, LZ_ESC_RECORD_MAX);
	/* Read once, to the end: the size could still change after fstat,
	 * so one byte past the bound tells a file that grew. */
	size_t len = 0;
	for (;;) {
		uint8_t extra;
		uint8_t *at = len < LZ_ESC_RECORD_MAX ? buf + len : &extra;
		size_t want = len < LZ_ESC_RECORD_MAX ? LZ_ESC_RECORD_MAX - len : 1;
		ssize_t n = read(fd, at, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return lz_err_set(err, errno, "escalation entry %s: %s", shown, strerror(errno));
		if (n == 0)
			break;
		if (at == &extra)
			return lz_err_set(err, E2BIG, "escalation entry %s: more than %u bytes", shown,
					  LZ_ESC_RECORD_MAX);
		len += (size_t)n;
	}
	*ret_len = len;
	return 0;
}

int lz_mailbox_take(struct lz_mailbox *mb, uint8_t *buf, size_t *ret_len, struct lz_err *err)
{
	char name[LZ_MAILBOX_NAME_MAX];
	if (!next_name(mb, name))
		return 0;
	int r = read_entry(mb->outbox, name, buf, ret_len, err);
	remove_entry(mb, name);
	return r < 0 ? r : 1;
}

int lz_mailbox_post(struct lz_mailbox *mb, const char *name, const uint8_t *rec, size_t len, struct lz_err *err)
{
	char tmp[LZ_MAILBOX_NAME_MAX + 1];
	if (snprintf(tmp, sizeof(tmp), ".%s", name) >= (int)sizeof(tmp))
		return lz_err_set(err, ENAMETOOLONG, "escalation result name too long");
	(void)unlinkat(mb->inbox, tmp, 0);
	int r = lz_file_create(mb->inbox, tmp, rec, len, 0444, LZ_RESOLVE_OWNED, err);
	if (r >= 0 && renameat(mb->inbox, tmp, mb->inbox, name) < 0)
		r = lz_err_set(err, errno, "post escalation result %s: %s", name, strerror(errno));
	if (r < 0)
		(void)unlinkat(mb->inbox, tmp, 0);
	return r;
}

void lz_mailbox_withdraw(struct lz_mailbox *mb, const char *name)
{
	if (mb->inbox >= 0)
		(void)unlinkat(mb->inbox, name, 0);
}

void lz_mailbox_close(struct lz_mailbox *mb)
{
	lz_close_fdp(&mb->watch);
	lz_close_fdp(&mb->key);
	lz_close_fdp(&mb->credential);
	lz_close_fdp(&mb->inbox);
	lz_close_fdp(&mb->outbox);
	lz_close_fdp(&mb->dir);
}
