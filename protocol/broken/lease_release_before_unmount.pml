/* A coordinator that removes the lease before the exact unmount: spin must
 * reject it. */
#define BROKEN_RELEASE_BEFORE_UNMOUNT
#include "../lease.pml"
