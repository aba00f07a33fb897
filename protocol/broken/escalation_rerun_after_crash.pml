/* A recovering coordinator that runs again a request the lost one had
 * accepted or started: spin must reject it. */
#define BROKEN_RERUN_AFTER_CRASH
#include "../escalation.pml"
