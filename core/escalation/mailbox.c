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
#include "util/fdutil.h"
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
	if (mb.watch < 0 ||
	    inotify_add_watch(mb.watch, self, IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_ONLYDIR) < 0) {
		r = lz_err_set(err, errno, "watch the escalation outbox: %s", strerror(errno));
		goto fail;
	}
	*ret = mb;
	return 0;
fail:
	lz_mailbox_close(&mb);
	return r;
}

/* Whatever name holds leaves the outbox: a directory or anything else
 * that cannot be unlinked moves aside (escalation/refused-N, never
 * mounted into the sandbox), so no entry is seen twice. */
static void remove_entry(struct lz_mailbox *mb, const char *name)
{
	char aside[32];
	if (unlinkat(mb->outbox, name, 0) == 0 || errno == ENOENT)
		return;
	snprintf(aside, sizeof(aside), "refused-%u", mb->refused);
	int r = renameat(mb->outbox, name, mb->dir, aside);
	/* Moving a directory to another parent takes write permission on it
	 * (its ".."): the sandbox may have taken that away; it is ours (the
	 * user's) to give back, through the outbox, never a followed link. */
	if (r < 0 && errno == EACCES) {
		_cleanup_close_ int d = openat(mb->outbox, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (d >= 0 && lz_fd_chmod(d, 0700) == 0)
			r = renameat(mb->outbox, name, mb->dir, aside);
	}
	if (r == 0)
		mb->refused++;
}

/* Whether name can be a ready entry: '.' names are being written (and .
 * and ..); one too long to be ours is removed, never read. */
static bool ready_name(struct lz_mailbox *mb, const char *name)
{
	if (name[0] == '.' || name[0] == '\0')
		return false;
	if (strnlen(name, LZ_MAILBOX_NAME_MAX) >= LZ_MAILBOX_NAME_MAX) {
		remove_entry(mb, name);
		return false;
	}
	return true;
}

void lz_mailbox_drain_watch(struct lz_mailbox *mb)
{
	for (;;) {
		while (mb->events_at + sizeof(struct inotify_event) <= mb->events_len) {
			const struct inotify_event *ev = (const struct inotify_event *)(mb->events + mb->events_at);
			bool lost = (ev->mask & IN_Q_OVERFLOW) != 0;
			if (!lost && ev->len > 0 && mb->ready_n == LZ_MAILBOX_READY_MAX)
				return; /* the rest waits (lz_mailbox_pending says so) */
			mb->events_at += sizeof(*ev) + ev->len;
			if (lost) {
				/* a listing finds them; one under way may have passed them */
				mb->lost_in_scan = mb->lost_in_scan || mb->scan != NULL;
				mb->rescan = true;
				continue;
			}
			if (ev->len == 0 || !ready_name(mb, ev->name))
				continue;
			unsigned slot = (mb->ready_first + mb->ready_n++) % LZ_MAILBOX_READY_MAX;
			strcpy(mb->ready[slot], ev->name);
		}
		ssize_t n = read(mb->watch, mb->events, sizeof(mb->events));
		mb->events_at = 0;
		mb->events_len = n > 0 ? (size_t)n : 0;
		if (n <= 0)
			return;
	}
}

/* The next name from one listing of the outbox, read on across calls:
 * 1, 0 at its end (the listing is done), -1 when it cannot start (out of
 * descriptors or memory: tried again at the next take) or *budget
 * entries were read (it reads on at the next take: the sandbox can
 * leave any number of '.' names in the outbox, each read here). */
static int scan_name(struct lz_mailbox *mb, unsigned *budget, char name[LZ_MAILBOX_NAME_MAX])
{
	if (mb->scan == NULL) {
		int fd = openat(mb->outbox, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		mb->list_failed = fd < 0 || (mb->scan = fdopendir(fd)) == NULL;
		if (mb->list_failed) {
			mb->list_errno = errno;
			if (fd >= 0)
				close(fd);
			return -1;
		}
		mb->listings++;
	}
	struct dirent *e;
	while (*budget > 0 && (e = readdir(mb->scan)) != NULL) {
		--*budget;
		mb->scanned++;
		if (ready_name(mb, e->d_name)) {
			strcpy(name, e->d_name);
			return 1;
		}
	}
	if (*budget == 0)
		return -1;
	closedir(mb->scan);
	mb->scan = NULL;
	return 0;
}

/* The next name that may be ready into name; false when none is known
 * or the listing under way spent *budget (lz_mailbox_pending says so). */
static bool next_name(struct lz_mailbox *mb, unsigned *budget, char name[LZ_MAILBOX_NAME_MAX])
{
	if (mb->ready_n == 0)
		lz_mailbox_drain_watch(mb);
	if (mb->ready_n > 0) {
		strcpy(name, mb->ready[mb->ready_first]);
		mb->ready_first = (mb->ready_first + 1) % LZ_MAILBOX_READY_MAX;
		mb->ready_n--;
		return true;
	}
	while (mb->rescan) {
		int r = scan_name(mb, budget, name);
		if (r != 0)
			return r > 0;
		mb->rescan = mb->lost_in_scan; /* once more from the start */
		mb->lost_in_scan = false;
	}
	return false;
}

bool lz_mailbox_pending(const struct lz_mailbox *mb)
{
	return mb->ready_n > 0 || mb->events_at < mb->events_len || mb->scan != NULL ||
	       (mb->rescan && !mb->list_failed);
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
	unsigned budget = LZ_MAILBOX_SCAN_PER_TAKE;
	/* Names already gone are skipped, a bounded number per take: the
	 * sandbox can make and remove names as fast as they are read. */
	for (int gone = 0; gone < LZ_MAILBOX_GONE_PER_TAKE && next_name(mb, &budget, name); gone++) {
		int r = read_entry(mb->outbox, name, buf, ret_len, err);
		if (r == -ENOENT)
			continue; /* taken already (reported twice), or gone */
		if (lz_err_for_now(r)) { /* this process's shortage, not the entry's */
			/* Kept, unread: a listing finds it again (one under way
			 * may have passed it). A request removed here would
			 * never be answered. */
			mb->lost_in_scan = mb->lost_in_scan || mb->scan != NULL;
			mb->rescan = true;
			return -EAGAIN;
		}
		remove_entry(mb, name);
		return r < 0 ? r : 1;
	}
	/* A listing that could not start: the entries it would find wait,
	 * and only a later take reads them. */
	if (mb->rescan && mb->list_failed && lz_err_for_now(-mb->list_errno)) {
		lz_err_set(err, mb->list_errno, "list the escalation outbox: %s", strerror(mb->list_errno));
		return -EAGAIN;
	}
	return 0;
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
	if (mb->scan != NULL)
		closedir(mb->scan);
	mb->scan = NULL;
	lz_close_fdp(&mb->watch);
	lz_close_fdp(&mb->key);
	lz_close_fdp(&mb->credential);
	lz_close_fdp(&mb->inbox);
	lz_close_fdp(&mb->outbox);
	lz_close_fdp(&mb->dir);
}
