/* A coordinator that keeps reading the guest's PTY while a prompt is up
 * (the guest's output would mix into the prompt): spin must reject it. */
#define BROKEN_READ_DURING_PROMPT
#include "../terminal.pml"
