/* lazaret-escalate: the Escalation Client inside the sandbox (spec 3.8).
 *
 *   lazaret-escalate [--why TEXT] -- /abs/executable [args...]
 *
 * Asks the Host Coordinator to run the argument vector on the host:
 * writes a request signed with the sandbox's key into the outbox by
 * atomic rename, waits for the decision, writes the host command's output
 * to its own stdout and stderr as the chunks arrive (acknowledging the
 * highest contiguous one), and exits with the host command's status
 * (escalation/sandbox.h for its own). SIGINT, SIGTERM and SIGHUP cancel
 * the host command. Every reply is verified against the coordinator's
 * credential, which the issuer of the mounted Trust Manifest signed.
 *
 * Statically linked: it runs in whatever image the sandbox has. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crypto/sigkey.h"
#include "escalation/record.h"
#include "escalation/sandbox.h"
#include "util/postcard.h"

static volatile sig_atomic_t interrupted;

struct client {
	struct lz_esc_scope scope;
	uint8_t coordinator[LZ_SIGKEY_PUBLIC_LEN];
	struct lz_sigkey *key;
	uint8_t id[LZ_ESC_ID_LEN];
	char hex[2 * LZ_ESC_ID_LEN + 1];
	int outbox, inbox;
	uint8_t buf[LZ_ESC_RECORD_MAX];
	uint8_t out[LZ_ESC_RECORD_MAX];
};

static _Noreturn void die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static _Noreturn void die(int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("lazaret-escalate: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(status);
}

static void on_signal(int sig)
{
	(void)sig;
	if (interrupted < 2)
		interrupted++;
}

static void hex(const uint8_t *b, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

static int unhex_digit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* A regular file beneath dir of at most cap bytes, read once; -errno. */
static ssize_t read_file(int dir, const char *name, uint8_t *buf, size_t cap)
{
	int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	ssize_t len = 0, n = 0;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > cap) {
		close(fd);
		return -EBADMSG;
	}
	while ((size_t)len < cap && (n = read(fd, buf + len, cap - (size_t)len)) > 0)
		len += n;
	close(fd);
	return n < 0 ? -EIO : len;
}

/* Loads the key, the manifest's issuer and the coordinator's credential. */
static void load_credentials(struct client *c)
{
	int dir = open(LZ_ESC_SANDBOX_CREDENTIAL, O_PATH | O_DIRECTORY | O_CLOEXEC);
	uint8_t seed[LZ_SIGKEY_SEED_LEN + 1];
	struct lz_esc_record manifest, cred;
	struct lz_esc_bytes payload;
	uint32_t kind;
	ssize_t n;
	if (dir < 0)
		die(LZ_ESC_EXIT_UNAVAILABLE, "%s: %s (run this inside a Lazaret sandbox)", LZ_ESC_SANDBOX_CREDENTIAL,
		    strerror(errno));
	if ((n = read_file(dir, "request-key", seed, sizeof(seed))) != LZ_SIGKEY_SEED_LEN ||
	    lz_sigkey_from_seed(seed, &c->key) < 0)
		die(LZ_ESC_EXIT_UNAVAILABLE, "the sandbox's request key is missing or damaged");
	explicit_bzero(seed, sizeof(seed));
	/* The manifest names its issuer; it must carry the issuer's own
	 * signature, and the coordinator's credential must too. */
	if ((n = read_file(dir, "trust-manifest", c->buf, sizeof(c->buf))) < 0 ||
	    lz_esc_frame(c->buf, (size_t)n, &kind, &payload) < 0 || kind != LZ_ESC_TRUST_MANIFEST ||
	    lz_esc_decode(kind, payload.p, payload.n, &manifest) < 0)
		die(LZ_ESC_EXIT_UNAVAILABLE, "the Trust Manifest is missing or damaged");
	uint8_t issuer[LZ_SIGKEY_PUBLIC_LEN];
	memcpy(issuer, manifest.manifest.issuer_public, sizeof(issuer));
	if (lz_esc_open(c->buf, (size_t)n, LZ_ESC_KIND_BIT(LZ_ESC_TRUST_MANIFEST), issuer, &manifest, NULL) < 0)
		die(LZ_ESC_EXIT_UNAVAILABLE, "the Trust Manifest's signature does not verify");
	c->scope = manifest.scope;
	if ((n = read_file(dir, "coordinator", c->buf, sizeof(c->buf))) < 0 ||
	    lz_esc_open(c->buf, (size_t)n, LZ_ESC_KIND_BIT(LZ_ESC_CREDENTIAL), issuer, &cred, NULL) < 0 ||
	    cred.credential.role != LZ_ESC_ROLE_COORDINATOR ||
	    memcmp(&cred.scope, &c->scope, sizeof(c->scope.domain_id)) != 0 ||
	    cred.scope.generation != c->scope.generation)
		die(LZ_ESC_EXIT_UNAVAILABLE, "the coordinator's credential does not verify");
	memcpy(c->coordinator, cred.credential.public_key, sizeof(c->coordinator));
	close(dir);
}

/* Seals rec and places it in the outbox under name by atomic rename. */
static void send_record(struct client *c, const struct lz_esc_record *rec, const char *suffix)
{
	char name[96], tmp[100];
	size_t len;
	if (lz_esc_seal(rec, c->key, c->out, sizeof(c->out), &len) < 0)
		die(LZ_ESC_EXIT_USAGE, "the request is too large (at most %u bytes in all)", LZ_ESC_RECORD_MAX);
	snprintf(name, sizeof(name), "%s.%s", c->hex, suffix);
	snprintf(tmp, sizeof(tmp), ".%s", name);
	int fd = openat(c->outbox, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	size_t off = 0;
	while (fd >= 0 && off < len) {
		ssize_t n = write(fd, c->out + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	if (fd < 0 || off != len || close(fd) < 0 || renameat(c->outbox, tmp, c->outbox, name) < 0)
		die(LZ_ESC_EXIT_UNAVAILABLE, "cannot write to the escalation mailbox: %s", strerror(errno));
}

static struct lz_esc_record base(const struct client *c, uint32_t kind)
{
	struct lz_esc_record rec = { .kind = kind, .scope = c->scope };
	return rec;
}

/* The coordinator's record inbox/<id>.<suffix> of kind; false when it is
 * not there yet. Anything there that does not verify ends the client. */
static bool receive(struct client *c, const char *suffix, uint32_t kind, struct lz_esc_record *rec)
{
	char name[96];
	snprintf(name, sizeof(name), "%s.%s", c->hex, suffix);
	ssize_t n = read_file(c->inbox, name, c->buf, sizeof(c->buf));
	if (n == -ENOENT)
		return false;
	if (n < 0 || lz_esc_open(c->buf, (size_t)n, LZ_ESC_KIND_BIT(kind), c->coordinator, rec, NULL) < 0 ||
	    memcmp(rec->scope.domain_id, c->scope.domain_id, LZ_ESC_DOMAIN_ID_LEN) != 0 ||
	    rec->scope.generation != c->scope.generation)
		die(LZ_ESC_EXIT_UNAVAILABLE, "a reply that does not verify: %s", name);
	/* Every reply kind starts with the request ID. */
	const uint8_t *id = kind == LZ_ESC_DECISION ? rec->decision.request_id
			    : kind == LZ_ESC_CHUNK  ? rec->chunk.request_id
						    : rec->result.request_id;
	if (memcmp(id, c->id, LZ_ESC_ID_LEN) != 0)
		die(LZ_ESC_EXIT_UNAVAILABLE, "a reply for another request: %s", name);
	return true;
}

static void write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return; /* our reader left; keep draining so the host is not stuck */
		p += w;
		n -= (size_t)w;
	}
}

static void acknowledge(struct client *c, uint64_t seq)
{
	struct lz_esc_record ack = base(c, LZ_ESC_ACKNOWLEDGEMENT);
	char suffix[32];
	memcpy(ack.acknowledgement.request_id, c->id, LZ_ESC_ID_LEN);
	ack.acknowledgement.sequence = seq;
	snprintf(suffix, sizeof(suffix), "ack-%llu", (unsigned long long)seq);
	send_record(c, &ack, suffix);
}

static int exit_status(const struct lz_esc_terminal_result *r)
{
	const char *msg = (const char *)r->message.p;
	int len = (int)r->message.n;
	switch (r->outcome) {
	case LZ_ESC_EXITED:
		return r->value;
	case LZ_ESC_SIGNALED:
		return 128 + r->value;
	case LZ_ESC_REFUSED:
		fprintf(stderr, "lazaret-escalate: denied: %.*s\n", len, msg);
		return LZ_ESC_EXIT_DENIED;
	case LZ_ESC_CANCELLED:
		fprintf(stderr, "lazaret-escalate: cancelled\n");
		return LZ_ESC_EXIT_CANCELLED;
	case LZ_ESC_TIMED_OUT:
		fprintf(stderr, "lazaret-escalate: timed out\n");
		return LZ_ESC_EXIT_TIMED_OUT;
	default:
		fprintf(stderr, "lazaret-escalate: failed: %.*s\n", len, msg);
		return LZ_ESC_EXIT_FAILED;
	}
}

static int run(struct client *c)
{
	struct lz_esc_record rec;
	uint64_t next = 1, chunks = 0;
	bool have_result = false, cancel_sent = false;
	int status = LZ_ESC_EXIT_UNAVAILABLE, wait_ms = 1;
	for (;;) {
		bool progress = false;
		/* A second signal does not wait for the coordinator's answer
		 * to the first (one that never comes: a coordinator gone, or a
		 * request it no longer knows). The host process, if any, is
		 * the coordinator's to end. */
		if (interrupted > 1 && cancel_sent) {
			fprintf(stderr, "lazaret-escalate: cancelled; not waiting for the coordinator's answer\n");
			return LZ_ESC_EXIT_CANCELLED;
		}
		if (interrupted && !cancel_sent) {
			struct lz_esc_record cancel = base(c, LZ_ESC_CANCELLATION);
			memcpy(cancel.cancellation.request_id, c->id, LZ_ESC_ID_LEN);
			send_record(c, &cancel, "cancel");
			cancel_sent = true;
		}
		char suffix[32];
		uint64_t before = next;
		for (;;) {
			snprintf(suffix, sizeof(suffix), "%llu", (unsigned long long)next);
			if (!receive(c, suffix, LZ_ESC_CHUNK, &rec))
				break;
			if (rec.chunk.sequence != next)
				die(LZ_ESC_EXIT_UNAVAILABLE, "chunk %llu out of order", (unsigned long long)next);
			write_all(rec.chunk.stream == LZ_ESC_STDOUT ? STDOUT_FILENO : STDERR_FILENO, rec.chunk.data.p,
				  rec.chunk.data.n);
			next++;
		}
		if (next != before) {
			acknowledge(c, next - 1);
			progress = true;
		}
		if (!have_result && receive(c, "result", LZ_ESC_TERMINAL_RESULT, &rec)) {
			have_result = true;
			chunks = rec.result.chunks;
			status = exit_status(&rec.result);
			progress = true;
		}
		if (have_result && next - 1 >= chunks) {
			/* The result is sequence chunks + 1: its acknowledgement
			 * tells the coordinator it may clean up. */
			acknowledge(c, chunks + 1);
			return status;
		}
		if (progress) {
			wait_ms = 1;
			continue;
		}
		/* Host changes to the inbox reach the sandbox by lookup, not
		 * by notification: poll, backing off to 50 ms. */
		(void)poll(NULL, 0, wait_ms);
		if (wait_ms < 50)
			wait_ms *= 2;
	}
}

static void usage(void)
{
	die(LZ_ESC_EXIT_USAGE, "usage: lazaret-escalate [--why TEXT] -- /absolute/executable [args...]");
}

int main(int argc, char **argv)
{
	static struct client c;
	const char *why = "";
	int i = 1;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--why") == 0 && i + 1 < argc)
			why = argv[++i];
		else
			usage();
	}
	if (i + 1 >= argc)
		usage();
	char **cmd = argv + i + 1;
	size_t n = (size_t)(argc - i - 1);
	if (cmd[0][0] != '/')
		die(LZ_ESC_EXIT_USAGE, "the executable must be an absolute host path (no PATH lookup on the host): %s",
		    cmd[0]);
	if (n > LZ_ESC_ARGV_MAX)
		die(LZ_ESC_EXIT_USAGE, "at most %d arguments", LZ_ESC_ARGV_MAX);

	const char *cap_hex = getenv(LZ_ESC_CAPABILITY_ENV);
	size_t cap_len = cap_hex ? strlen(cap_hex) : 0;
	uint8_t capability[LZ_ESC_CAPABILITY_MAX];
	if (cap_len == 0 || cap_len % 2 != 0 || cap_len / 2 > sizeof(capability))
		die(LZ_ESC_EXIT_UNAVAILABLE, "%s is not set: run this from a Lazaret session", LZ_ESC_CAPABILITY_ENV);
	for (size_t k = 0; k < cap_len / 2; k++) {
		int hi = unhex_digit(cap_hex[2 * k]), lo = unhex_digit(cap_hex[2 * k + 1]);
		if (hi < 0 || lo < 0)
			die(LZ_ESC_EXIT_UNAVAILABLE, "%s is damaged", LZ_ESC_CAPABILITY_ENV);
		capability[k] = (uint8_t)(hi << 4 | lo);
	}

	load_credentials(&c);
	c.outbox = open(LZ_ESC_SANDBOX_OUTBOX, O_PATH | O_DIRECTORY | O_CLOEXEC);
	c.inbox = open(LZ_ESC_SANDBOX_INBOX, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (c.outbox < 0 || c.inbox < 0)
		die(LZ_ESC_EXIT_UNAVAILABLE, "the escalation mailbox is not mounted: %s", strerror(errno));
	if (getrandom(c.id, sizeof(c.id), 0) != (ssize_t)sizeof(c.id))
		die(LZ_ESC_EXIT_UNAVAILABLE, "getrandom: %s", strerror(errno));
	hex(c.id, sizeof(c.id), c.hex);

	static struct lz_esc_record req;
	req = base(&c, LZ_ESC_REQUEST);
	memcpy(req.request.request_id, c.id, LZ_ESC_ID_LEN);
	req.request.capability = (struct lz_esc_bytes){ capability, cap_len / 2 };
	req.request.argc = n;
	for (size_t k = 0; k < n; k++)
		req.request.argv[k] = (struct lz_esc_bytes){ (const uint8_t *)cmd[k], strlen(cmd[k]) };
	char cwd[LZ_ESC_ARG_MAX];
	if (getcwd(cwd, sizeof(cwd)) == NULL)
		strcpy(cwd, "?");
	req.request.cwd = (struct lz_esc_bytes){ (const uint8_t *)cwd, strlen(cwd) };
	req.request.why = (struct lz_esc_bytes){ (const uint8_t *)why, strlen(why) };
	if (!lz_pc_utf8_valid(req.request.why.p, req.request.why.n) || req.request.why.n > LZ_ESC_TEXT_MAX)
		die(LZ_ESC_EXIT_USAGE, "--why must be UTF-8 text of at most %d bytes", LZ_ESC_TEXT_MAX);
	for (size_t k = 0; k < n; k++)
		if (req.request.argv[k].n == 0 || req.request.argv[k].n > LZ_ESC_ARG_MAX)
			die(LZ_ESC_EXIT_USAGE, "argument %zu is empty or longer than %d bytes", k, LZ_ESC_ARG_MAX);

	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	send_record(&c, &req, "request");
	int status = run(&c);
	lz_sigkey_free(c.key);
	return status;
}
