/* The bytes of lazaret-escalate (core/escalate/escalate.c), the statically
 * linked Escalation Client (spec 3.8), embedded at build time so the
 * product mounts into the sandbox exactly the client it was built with. */
#ifndef LZ_ESCALATION_ESCALATE_BLOB_H
#define LZ_ESCALATION_ESCALATE_BLOB_H

#include <stddef.h>

extern const unsigned char lz_escalate_client[];
extern const size_t lz_escalate_client_len;

#endif
