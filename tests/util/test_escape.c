/* lz_escape: foreign text made safe for terminals and logs (no implicit
 * host authority; escape.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "util/escape.h"

static void expect(const char *in, size_t n, const char *want)
{
	char out[256];
	size_t w = lz_escape(in, n, out, sizeof(out));
	if (strcmp(out, want) != 0)
		fail_msg("escape: got '%s', want '%s'", out, want);
	assert_int_equal(w, strlen(want));
}
#define EXPECT(lit, want) expect((lit), sizeof(lit) - 1, (want))

/* Nothing but printable ASCII and well-formed UTF-8 comes out. */
static void assert_safe(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		assert_true((*p >= 0x20 && *p < 0x7f) || *p >= 0x80);
}

static void test_escape__controls_and_sequences(void **state)
{
	(void)state;
	EXPECT("plain name.txt", "plain name.txt");
	EXPECT("a\\b", "a\\\\b");
	EXPECT("tab\there\nline\rcr", "tab\\there\\nline\\rcr");
	EXPECT("\x1b[2J\x1b]52;c;SGVsbG8=\x07", "\\e[2J\\e]52;c;SGVsbG8=\\x07");
	EXPECT("bell\a del\x7f nul\0end", "bell\\x07 del\\x7f nul\\x00end");
	EXPECT("\x9b" "31m 8-bit CSI", "\\x9b31m 8-bit CSI");
	EXPECT("\xc2\x9b" "31m C1 as UTF-8", "\\u{009B}31m C1 as UTF-8");
	EXPECT("\xc2\x9d" "0;title\xc2\x9c", "\\u{009D}0;title\\u{009C}");
}

static void test_escape__utf8(void **state)
{
	(void)state;
	EXPECT("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80");
	EXPECT("\xff\xfe", "\\xff\\xfe");
	EXPECT("\xc0\x80", "\\xc0\\x80");           /* overlong NUL */
	EXPECT("\xe0\x80\xaf", "\\xe0\\x80\\xaf");  /* overlong '/' */
	EXPECT("\xed\xa0\x80", "\\xed\\xa0\\x80");  /* surrogate */
	EXPECT("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"); /* above U+10FFFF */
	EXPECT("cut \xe2\x82", "cut \\xe2\\x82");
	EXPECT("\xe2\x80\xae" "txt.exe", "\\u{202E}txt.exe"); /* right-to-left override */
	EXPECT("a\xe2\x80\xa8" "b", "a\\u{2028}b");
	/* characters that show nothing: padding the developer cannot see */
	EXPECT("a\xe2\x80\x8b" "b", "a\\u{200B}b");          /* zero-width space */
	EXPECT("\xc2\xad" "\xef\xbb\xbf", "\\u{00AD}\\u{FEFF}"); /* soft hyphen, BOM */
	EXPECT("x\xe2\x81\xa0" "y", "x\\u{2060}y");          /* word joiner */
	EXPECT("\xf3\xa0\x80\x81", "\\u{E0001}");            /* language tag */
	EXPECT("\xe3\x85\xa4", "\\u{3164}");                  /* Hangul filler */
	/* blanks other than the ASCII space: padding that looks like spaces */
	EXPECT("a\xc2\xa0" "b", "a\\u{00A0}b");                /* no-break space */
	EXPECT("\xe2\x80\x83\xe3\x80\x80", "\\u{2003}\\u{3000}"); /* em space, ideographic space */
	EXPECT("\xe2\xa0\x80", "\\u{2800}");                  /* blank braille pattern */
	EXPECT("a b", "a b");
	/* right-to-left letters: the text around them would show reordered */
	EXPECT("rm \xd7\x90/..", "rm \\u{05D0}/..");              /* Hebrew alef */
	EXPECT("\xd8\xa7" "-f", "\\u{0627}-f");                   /* Arabic alef */
	EXPECT("\xef\xad\x90\xef\xbb\xb5", "\\u{FB50}\\u{FEF5}"); /* presentation forms */
	EXPECT("\xf0\x9e\xa4\x80", "\\u{1E900}");                 /* Adlam */
	/* combining marks of the general blocks: drawn over the character before */
	EXPECT("/\xcc\xb8" "etc", "/\\u{0338}etc");               /* long solidus overlay */
	EXPECT("-\xcc\xb6" "-force", "-\\u{0336}-force");         /* long stroke overlay */
	EXPECT("x\xe2\x83\x9d", "x\\u{20DD}");                    /* enclosing circle */
	EXPECT("e\xef\xb8\xa0", "e\\u{FE20}");                    /* ligature left half */
	EXPECT("/\xe1\xb3\x94", "/\\u{1CD4}");                    /* Vedic overlay */
	EXPECT("-\xf0\x9d\x85\xa7", "-\\u{1D167}");              /* musical tremolo */
	/* every mark that draws nothing of its own, and every format character
	 * (by category, not by block): hieroglyph format control, Devanagari
	 * stress sign, Thai vowel, enclosing Cyrillic mark, Kaithi number sign */
	EXPECT("mai\xf0\x93\x90\xb0n", "mai\\u{13430}n");
	EXPECT("a\xe0\xa5\x91", "a\\u{0951}");
	EXPECT("\xe0\xb8\x81\xe0\xb8\xb1", "\xe0\xb8\x81\\u{0E31}");
	EXPECT("x\xea\x99\xb0", "x\\u{A670}");
	EXPECT("\xf0\x91\x82\xbd", "\\u{110BD}");
	EXPECT("\xe2\x81\xa5", "\\u{2065}");           /* unassigned */
	EXPECT("\xee\x80\x80", "\\u{E000}");           /* private use */
	EXPECT("\xd9\xa3", "\\u{0663}");                /* Arabic-Indic digit */
	EXPECT("mai\xe1\x85\xa1n", "mai\\u{1161}n");    /* conjoining Hangul vowel */
	EXPECT("\xed\x9e\xb0", "\\u{D7B0}");            /* conjoining Hangul vowel, extended */
	EXPECT("\xea\xb0\x80", "\xea\xb0\x80");          /* a precomposed syllable stays */
	/* their neighbours stay: Armenian, Greek, spacing modifier, Devanagari, precomposed */
	EXPECT("\xd6\x8f \xcd\xb0 \xcb\xbf \xe0\xa4\x85 \xc3\xa9", "\xd6\x8f \xcd\xb0 \xcb\xbf \xe0\xa4\x85 \xc3\xa9");
}

static void test_escape__truncation_keeps_whole_pieces(void **state)
{
	(void)state;
	char out[12];
	size_t w = lz_escape("\x1b\x1b\x1b\x1b\x1b\x1b", 6, out, sizeof(out));
	assert_true(w < sizeof(out));
	assert_string_equal(out, "\\e\\e\\e\\e...");
	w = lz_escape("\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5", 12, out, sizeof(out));
	assert_string_equal(out, "\xe6\x97\xa5\xe6\x97\xa5...");
	/* The cut looks only at what it wrote: bytes beyond (here what looks
	 * like a UTF-8 continuation) never take a character away. */
	memset(out, 0x80, sizeof(out));
	assert_int_equal(lz_escape("abcde\x01", 6, out, 9), 8);
	assert_string_equal(out, "abcde...");
	/* never inside an escape: a whole one, or none and "..." */
	assert_int_equal(lz_escape("\x01\x01", 2, out, 6), 3);
	assert_string_equal(out, "...");
	assert_int_equal(lz_escape("\x01\x01", 2, out, 8), 7);
	assert_string_equal(out, "\\x01...");
	assert_int_equal(lz_escape("a\xcc\x88\xcc\x88", 5, out, 10), 4);
	assert_string_equal(out, "a...");
	assert_int_equal(lz_escape("abc", 3, out, 0), 0);
	assert_int_equal(lz_escape("abc", 3, out, 1), 0);
	assert_string_equal(out, "");
	/* every byte value alone, and a worst case fits LZ_ESCAPE_MAX */
	char big[LZ_ESCAPE_MAX(256) + 1];
	char all[256];
	for (int b = 0; b < 256; b++)
		all[b] = (char)b;
	w = lz_escape(all, sizeof(all), big, sizeof(big));
	assert_true(w <= LZ_ESCAPE_MAX(256));
	assert_null(strstr(big, "..."));
	assert_safe(big);
}

/* Lines relayed to a descriptor: each escaped, after its prefix, so a
 * line of foreign text never passes for another's. */
static void test_escape_lines__prefix_and_escape_each_line(void **state)
{
	(void)state;
	FILE *f = tmpfile();
	assert_non_null(f);
	const char in[] = "ok\n\x1b]52;c;aGk=\x07\nlast";
	lz_escape_lines(fileno(f), "skopeo: ", in, sizeof(in) - 1);
	char out[256] = "";
	rewind(f);
	size_t n = fread(out, 1, sizeof(out) - 1, f);
	fclose(f);
	out[n] = '\0';
	assert_string_equal(out, "skopeo: ok\nskopeo: \\e]52;c;aGk=\\x07\nskopeo: last\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape__controls_and_sequences),
		cmocka_unit_test(test_escape__utf8),
		cmocka_unit_test(test_escape_lines__prefix_and_escape_each_line),
		cmocka_unit_test(test_escape__truncation_keeps_whole_pieces),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
