/* escforge: the attacker inside the sandbox, for tests/e2e/test_escalation.sh
 * (test builds only, never installed or embedded).
 *
 * A compromised sandbox holds the request key, so it can sign anything; it
 * can also replay what it saw and write any file into the outbox. This
 * tool does exactly that, one MODE per run:
 *
 *   escforge MODE -- /abs/executable args...
 *     genuine     a well-formed request, as lazaret-escalate writes it
 *     replay      a genuine request, then the same bytes again once the
 *                 first is answered
 *     zero-sig    the signature all zero
 *     wrong-key   signed by a key of the sandbox's own making
 *     other-gen   the scope names the next generation
 *     forged-cap  a session capability signed by the sandbox key
 *     trailing    a genuine record with one byte more
 *     oversize    65,537 bytes
 *     swap        50 genuine requests, each rewritten in place right after
 *                 its rename with the last "runs" in it changed to "runt"
 *                 (the signature then no longer matches those bytes);
 *                 prints "swapped 50" and waits 3 s
 *
 * Then it waits up to 5 s for the request's decision and prints
 * "decision: VERDICT: MESSAGE" or "no answer". It never acknowledges. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crypto/sigkey.h"
#include "escalation/record.h"
#include "escalation/sandbox.h"

static uint8_t buf[LZ_ESC_RECORD_MAX + 2];

static void die(const char *msg)
{
	fprintf(stderr, "escforge: %s\n", msg);
	exit(2);
}

static size_t slurp(const char *path, uint8_t *out, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, out, cap);
	if (n < 0)
		die(path);
	close(fd);
	return (size_t)n;
}

static void put(const char *name, const uint8_t *p, size_t n)
{
	char path[256], tmp[256];
	snprintf(path, sizeof(path), "%s/%s", LZ_ESC_SANDBOX_OUTBOX, name);
	snprintf(tmp, sizeof(tmp), "%s/.%s", LZ_ESC_SANDBOX_OUTBOX, name);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, p, n) != (ssize_t)n || close(fd) < 0 || rename(tmp, path) < 0)
		die("cannot write to the outbox");
}

static bool answer(const char *hex, int seconds)
{
	char path[256];
	struct lz_esc_record rec;
	snprintf(path, sizeof(path), "%s/%s.decision", LZ_ESC_SANDBOX_INBOX, hex);
	for (int i = 0; i < seconds * 20; i++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			ssize_t n = read(fd, buf, sizeof(buf));
			close(fd);
			struct lz_esc_bytes payload;
			uint32_t kind;
			if (n <= 0 || lz_esc_frame(buf, (size_t)n, &kind, &payload) < 0 ||
			    lz_esc_decode(kind, payload.p, payload.n, &rec) < 0 || kind != LZ_ESC_DECISION)
				die("a decision that does not decode");
			const char *v = rec.decision.verdict == LZ_ESC_APPROVED		? "approved"
					: rec.decision.verdict == LZ_ESC_AUTO_APPROVED ? "auto-approved"
										      : "denied";
			printf("decision: %s: %.*s\n", v, (int)rec.decision.message.n,
			       (const char *)rec.decision.message.p);
			return true;
		}
		poll(NULL, 0, 50);
	}
	printf("no answer\n");
	return false;
}

int main(int argc, char **argv)
{
	if (argc < 4 || strcmp(argv[2], "--") != 0)
		die("usage: escforge MODE -- /abs/executable args...");
	const char *mode = argv[1];
	uint8_t seed[LZ_SIGKEY_SEED_LEN], manifest[512], capability[LZ_ESC_CAPABILITY_MAX];
	struct lz_sigkey *key, *signer;
	struct lz_esc_record m, req = { .kind = LZ_ESC_REQUEST };
	struct lz_esc_bytes payload;
	uint32_t kind;
	if (slurp(LZ_ESC_SANDBOX_KEY, seed, sizeof(seed)) != sizeof(seed) || lz_sigkey_from_seed(seed, &key) < 0)
		die("no request key");
	size_t mlen = slurp(LZ_ESC_SANDBOX_CREDENTIAL "/trust-manifest", manifest, sizeof(manifest));
	if (lz_esc_frame(manifest, mlen, &kind, &payload) < 0 || lz_esc_decode(kind, payload.p, payload.n, &m) < 0)
		die("no manifest");
	const char *cap_hex = getenv(LZ_ESC_CAPABILITY_ENV);
	size_t cap_len = cap_hex ? strlen(cap_hex) / 2 : 0;
	for (size_t i = 0; i < cap_len && i < sizeof(capability); i++)
		sscanf(cap_hex + 2 * i, "%2hhx", &capability[i]);
	req.scope = m.scope;
	getrandom(req.request.request_id, LZ_ESC_ID_LEN, 0);
	req.request.capability = (struct lz_esc_bytes){ capability, cap_len };
	req.request.argc = (size_t)argc - 3;
	for (size_t i = 0; i < req.request.argc; i++)
		req.request.argv[i] = (struct lz_esc_bytes){ (const uint8_t *)argv[3 + i], strlen(argv[3 + i]) };
	req.request.cwd = (struct lz_esc_bytes){ (const uint8_t *)"/workspace", 10 };
	req.request.why = (struct lz_esc_bytes){ (const uint8_t *)mode, strlen(mode) };
	signer = key;
	if (strcmp(mode, "wrong-key") == 0 && lz_sigkey_generate(&signer) < 0)
		die("keygen");
	if (strcmp(mode, "other-gen") == 0)
		req.scope.generation++;
	uint8_t forged[LZ_ESC_CAPABILITY_MAX];
	if (strcmp(mode, "forged-cap") == 0) {
		struct lz_esc_record cap = { .kind = LZ_ESC_SESSION_CAPABILITY, .scope = m.scope };
		size_t n;
		if (lz_esc_seal(&cap, key, forged, sizeof(forged), &n) < 0)
			die("seal capability");
		req.request.capability = (struct lz_esc_bytes){ forged, n };
	}
	size_t len;
	if (lz_esc_seal(&req, signer, buf, LZ_ESC_RECORD_MAX, &len) < 0)
		die("seal");
	if (strcmp(mode, "zero-sig") == 0)
		memset(buf + len - LZ_SIGKEY_SIG_LEN, 0, LZ_SIGKEY_SIG_LEN);
	if (strcmp(mode, "trailing") == 0)
		buf[len++] = 0;
	if (strcmp(mode, "oversize") == 0) {
		memset(buf + len, 0, sizeof(buf) - len);
		len = LZ_ESC_RECORD_MAX + 1;
	}
	if (strcmp(mode, "swap") == 0) {
		for (int round = 0; round < 50; round++) {
			char hx[2 * LZ_ESC_ID_LEN + 1], path[256], tmp[256];
			getrandom(req.request.request_id, LZ_ESC_ID_LEN, 0);
			if (lz_esc_seal(&req, signer, buf, LZ_ESC_RECORD_MAX, &len) < 0)
				die("seal");
			for (int i = 0; i < LZ_ESC_ID_LEN; i++)
				sprintf(hx + 2 * i, "%02x", req.request.request_id[i]);
			static uint8_t tampered[sizeof(buf)];
			memcpy(tampered, buf, len);
			uint8_t *at = NULL;
			for (size_t i = 0; i + 4 <= len; i++)
				if (memcmp(tampered + i, "runs", 4) == 0)
					at = tampered + i;
			if (at == NULL)
				die("swap needs \"runs\" in the arguments");
			at[3] = 't';
			snprintf(path, sizeof(path), "%s/%s.request", LZ_ESC_SANDBOX_OUTBOX, hx);
			snprintf(tmp, sizeof(tmp), "%s/.%s", LZ_ESC_SANDBOX_OUTBOX, hx);
			int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
			if (fd < 0 || write(fd, buf, len) != (ssize_t)len || rename(tmp, path) < 0 ||
			    pwrite(fd, tampered, len, 0) != (ssize_t)len)
				die("swap write");
			close(fd);
		}
		printf("swapped 50\n");
		poll(NULL, 0, 3000);
		return 0;
	}
	char hex[2 * LZ_ESC_ID_LEN + 1];
	for (int i = 0; i < LZ_ESC_ID_LEN; i++)
		sprintf(hex + 2 * i, "%02x", req.request.request_id[i]);
	static uint8_t copy[sizeof(buf)];
	memcpy(copy, buf, len);
	char name[96];
	snprintf(name, sizeof(name), "%s.request", hex);
	put(name, copy, len);
	bool answered = answer(hex, 5);
	if (strcmp(mode, "replay") == 0 && answered) {
		snprintf(name, sizeof(name), "%s.again", hex);
		put(name, copy, len);
		printf("replayed\n");
		poll(NULL, 0, 1000);
	}
	return 0;
}
