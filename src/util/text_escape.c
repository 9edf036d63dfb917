#include "text_escape.h"

size_t tlm_escape_controls(const char *s, size_t n, int escape, char *out) {
    static const char hex[] = "0123456789abcdef";
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (escape && ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)) {
            out[k++] = '\\', out[k++] = 'x', out[k++] = hex[c >> 4], out[k++] = hex[c & 15];
        } else {
            out[k++] = (char)c;
        }
    }
    return k;
}

void tlm_write_text(FILE *f, const char *s, size_t n, int escape) {
    char buf[4 * 256];
    while (n > 0) { /* in chunks, so that no piece needs an allocation */
        size_t take = n < 256 ? n : 256;
        fwrite(buf, 1, tlm_escape_controls(s, take, escape, buf), f);
        s += take, n -= take;
    }
}
