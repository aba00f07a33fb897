/* A coordinator that admits a session before its generation is published:
 * spin must reject it (scripts/test.sh, suite protocol). */
#define BROKEN_ADMIT_BEFORE_PUBLICATION
#include "../session.pml"
