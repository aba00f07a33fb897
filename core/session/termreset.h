/* What a guest can set in the developer's terminal that changes the bytes
 * the terminal sends or how it decodes the bytes that follow (DX-5, spec
 * 3.8), as escape sequences that undo it. Shared by the client's reset at
 * a session's end and the coordinator's before a prompt, where a setting
 * left on would make the terminal answer for the developer (an X10 mouse
 * report carries raw coordinate bytes: a pointer in column 89 sends 'y')
 * or hide what the prompt shows. */
#ifndef LZ_SESSION_TERMRESET_H
#define LZ_SESSION_TERMRESET_H

/* An open control string cancelled (CAN, then ST). */
#define LZ_TERM_RESET_STRING "\x18\x1b\\"

/* VT52 mode left (ESC <: it would show every sequence after it as text),
 * UTF-8 decoding back (ESC % G: after ESC % @ a terminal reads the bytes
 * 0x80-0x9f of UTF-8 text as C1 controls). */
#define LZ_TERM_RESET_DECODING "\x1b<\x1b%G"

/* Reports off: mouse (X10, normal, highlight, button, any-event; the
 * UTF-8, SGR, urxvt and pixel encodings), focus, bracketed paste. */
#define LZ_TERM_RESET_REPORTS                                                                       \
	"\x1b[?9l\x1b[?1000l\x1b[?1001l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l\x1b[?1016l" \
	"\x1b[?1004l\x1b[?2004l"

/* Keys as typed: normal cursor keys and keypad, the kitty keyboard
 * protocol's flags and xterm's modifyOtherKeys off (either would send y,
 * Enter and ^C as sequences that never answer a prompt). */
#define LZ_TERM_RESET_KEYS "\x1b[?1l\x1b>\x1b[=0;1u\x1b[>4m"

#endif
