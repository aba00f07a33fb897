/* A recovering coordinator that records the lost generation failed and
 * begins the next before its processes are proved gone: spin must reject
 * it. */
#define BROKEN_RECOVER_WITHOUT_ABSENCE
#include "../lifecycle.pml"
