/* text_escape.h — generated text on a terminal, without letting it drive the terminal.
 *
 * A model can emit any byte. Written to a terminal, ESC starts a control sequence (moving the
 * cursor, changing the title, ...) and \r or \b overwrite what was printed, so there control
 * bytes are shown escaped instead: every byte < 0x20 except \n and \t, and 0x7f, as \xHH.
 * Written to a pipe or a file, the text goes out unchanged. */
#ifndef TLM_TEXT_ESCAPE_H
#define TLM_TEXT_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

/* Room tlm_escape_controls may need for n input bytes. */
#define TLM_ESCAPED_MAX(n) (4 * (n))

/* Copies s[0..n) to out, with control bytes as \xHH when `escape` is set (unchanged when
 * not); out has room for TLM_ESCAPED_MAX(n) bytes. Returns the bytes written. */
size_t tlm_escape_controls(const char *s, size_t n, int escape, char *out);

/* Writes s[0..n) to f, escaped when `escape` (pass isatty(fileno(f))). */
void tlm_write_text(FILE *f, const char *s, size_t n, int escape);

#endif
