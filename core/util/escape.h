/* Escaping foreign text for terminals and logs (no implicit host
 * authority: a name from an image, a sandbox or the network must not drive
 * the developer's terminal or forge log lines).
 *
 * Output is printable ASCII and well-formed UTF-8 only. Kept as they are:
 * printable ASCII but the backslash, and UTF-8 sequences of printable
 * characters. Escaped: '\\' as "\\\\", tab, newline and carriage return as
 * "\\t", "\\n", "\\r", ESC as "\\e", every other C0 control and DEL as
 * "\\xNN", a byte that does not start a well-formed, shortest-form UTF-8
 * sequence of a scalar value as "\\xNN", and the C1 controls (U+0080 to
 * U+009F), the line and paragraph separators and the bidirectional
 * controls (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069)
 * and the letters of the right-to-left scripts (text that reads in
 * another order than it is), the combining marks of the general blocks
 * (U+0300 to U+036F, U+0483 to U+0489, U+1AB0 to U+1AFF, U+1DC0 to
 * U+1DFF, U+20D0 to U+20FF, U+FE20 to U+FE2F) and the other overlaying
 * ones (Vedic, Bassa Vah, Duployan, musical: they draw over the
 * character before them), the characters that show nothing (soft
 * hyphen, zero-width space and joiners, word joiner, variation
 * selectors, byte order mark, tags, Hangul fillers) and the
 * blanks other than the ASCII space (no-break, typographic and ideographic
 * spaces, the blank braille pattern) as "\\u{XXXX}". So an
 * escape sequence (CSI, OSC, DCS; 7- or 8-bit) never reaches the reader
 * whole, and one output line is one input string. */
#ifndef LZ_UTIL_ESCAPE_H
#define LZ_UTIL_ESCAPE_H

#include <stddef.h>

/* Longest output for n input bytes (every byte as "\\xNN"), without the
 * terminating NUL. */
#define LZ_ESCAPE_MAX(n) ((n) * 4)

/* Escapes in[0..n) into out (cap bytes, NUL-terminated when cap > 0). An
 * output that does not fit is cut at a whole escape or character and ends
 * in "..." when cap allows. Returns the length written. */
size_t lz_escape(const char *in, size_t n, char *out, size_t cap);

/* Writes in[0..n) to out_fd line by line, each escaped and after prefix
 * (foreign text relayed to a terminal or a log: it drives neither, and
 * no line passes for another's). A line whose escaped form passes 16 KiB
 * is cut and ends in "...". */
void lz_escape_lines(int out_fd, const char *prefix, const char *in, size_t n);

/* A report callback: line to standard error (a terminal, the coordinator's
 * log) as lz_escape_lines writes it; ctx is unused. For lines that carry
 * what a record or a peer said. */
void lz_escape_report_stderr(void *ctx, const char *line);

#endif
