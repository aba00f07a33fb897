/* What the Escalation Client sees inside the sandbox (spec 3.3, 3.8):
 * fixed paths the bundle mounts, the variable a session's capability
 * arrives in, and the client's exit statuses (docs/escalation.md). */
#ifndef LZ_ESCALATION_SANDBOX_H
#define LZ_ESCALATION_SANDBOX_H

#define LZ_ESC_SANDBOX_BIN_DIR "/run/lazaret/bin"
#define LZ_ESC_SANDBOX_CLIENT "/run/lazaret/bin/lazaret-escalate" /* read-only */
#define LZ_ESC_SANDBOX_OUTBOX "/run/lazaret/escalation/outbox"     /* read-write */
#define LZ_ESC_SANDBOX_INBOX "/run/lazaret/escalation/inbox"       /* read-only */
#define LZ_ESC_SANDBOX_CREDENTIAL "/run/lazaret/credential"        /* read-only */
#define LZ_ESC_SANDBOX_KEY "/run/lazaret/credential/request-key"     /* read-only */
#define LZ_ESC_CAPABILITY_ENV "LAZARET_SESSION_CAPABILITY"

/* Exit statuses of lazaret-escalate other than the host command's own
 * (0..255 as it exited, 128 + N when killed by signal N). */
#define LZ_ESC_EXIT_USAGE 64       /* bad arguments */
#define LZ_ESC_EXIT_FAILED 70      /* the host command could not start, or failed */
#define LZ_ESC_EXIT_UNAVAILABLE 69 /* not in a Lazaret session, or a broken reply */
#define LZ_ESC_EXIT_DENIED 77      /* denied by the developer or the coordinator */
#define LZ_ESC_EXIT_TIMED_OUT 124
#define LZ_ESC_EXIT_CANCELLED 130

#endif
