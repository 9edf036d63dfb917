/* test_text_escape.c — generated text on a terminal shows control bytes escaped; to a pipe
 * or a file it is written unchanged (util/text_escape.h). */
#include <stdio.h>
#include <string.h>

#include "util/text_escape.h"

static int failed = 0;

static void expect(const char *in, size_t n, int escape, const char *want, const char *what) {
    char out[TLM_ESCAPED_MAX(64)];
    size_t k = tlm_escape_controls(in, n, escape, out);
    int ok = k == strlen(want) && memcmp(out, want, k) == 0;
    printf("%-60s %s\n", what, ok ? "ok" : "FAIL");
    if (!ok) printf("  got \"%.*s\" (%zu bytes), want \"%s\"\n", (int)k, out, k, want), failed++;
}

int main(void) {
    /* terminal */
    expect("plain text, caf\xc3\xa9", 17, 1, "plain text, caf\xc3\xa9", "terminal: printable text and UTF-8 unchanged");
    expect("a\nb\tc", 5, 1, "a\nb\tc", "terminal: newline and tab unchanged");
    expect("\x1b[2J\x1b]0;pwned\x07", 14, 1, "\\x1b[2J\\x1b]0;pwned\\x07",
           "terminal: ESC sequences (clear screen, set title) escaped");
    expect("x\ry\bz\x7f", 6, 1, "x\\x0dy\\x08z\\x7f", "terminal: CR, backspace and DEL escaped");
    expect("\0\x01\x1f ", 4, 1, "\\x00\\x01\\x1f ", "terminal: NUL, 0x01, 0x1f escaped, space kept");
    /* pipe / file: raw bytes */
    expect("\x1b[2J\x1b]0;pwned\x07", 14, 0, "\x1b[2J\x1b]0;pwned\x07", "pipe: ESC sequences written as they are");
    char raw[8], out[TLM_ESCAPED_MAX(8)];
    memcpy(raw, "\x1b[2J\r\x7f\0z", 8);
    int same = tlm_escape_controls(raw, 8, 0, out) == 8 && memcmp(raw, out, 8) == 0;
    printf("%-60s %s\n", "pipe: all 8 bytes, NUL included, written as they are", same ? "ok" : "FAIL");
    failed += !same;
    /* tlm_write_text through a file, longer than its 256-byte chunk */
    char big[600];
    for (int i = 0; i < 600; i++) big[i] = i % 50 == 49 ? '\x1b' : 'a';
    FILE *f = tmpfile();
    tlm_write_text(f, big, sizeof big, 1);
    long escaped_len = ftell(f);
    rewind(f);
    tlm_write_text(f, big, sizeof big, 0);
    long raw_len = ftell(f);
    fclose(f);
    int ok = escaped_len == 600 + 12 * 3 && raw_len == 600;
    printf("%-60s %s\n", "tlm_write_text: 12 ESC in 600 bytes -> 636 escaped, 600 raw", ok ? "ok" : "FAIL");
    failed += !ok;
    printf("%s\n", failed ? "FAILED" : "all ok");
    return failed ? 1 : 0;
}
