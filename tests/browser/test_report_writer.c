/* test_report_writer.c — the page writer of src/report without a browser: base64 against RFC 4648's
 * vectors (every length mod 3), the page's structure, '<' escaped inside the data blob, the title
 * escaped, the embedded assets present, and an unwritable path refused with its name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report/report.h"
#include "util/error.h"
#include "util/io.h"

static int failed = 0;

static void check(int ok, const char *what) {
    printf("%-70s %s\n", what, ok ? "ok" : "FAIL");
    if (!ok) failed++;
}

int main(void) {
    static const char *const in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    int ok = 1;
    for (int i = 0; i < 7; i++) {
        char *b = report_base64(in[i], strlen(in[i]));
        ok = ok && b && strcmp(b, want[i]) == 0;
        free(b);
    }
    const unsigned char bin[] = {0x00, 0xff, 0xfe, 0x80, 0x7f};
    char *b = report_base64(bin, sizeof bin);
    ok = ok && b && strcmp(b, "AP/+gH8=") == 0;
    free(b);
    check(ok, "report_base64: RFC 4648 vectors (lengths 0..6) and binary bytes");

    check(strlen(tlm_report_js) > 1000 && strlen(tlm_report_css) > 500 && !strstr(tlm_report_js, "</script"),
          "the embedded report.js and report.css are there, with no closing tag");

    char path[] = "/tmp/tlm_report_writer_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    int rc = report_write_html(path, "a <b> & \"c\"", "{\"kind\":\"experiment\",\"title\":\"</script><!--\"}");
    size_t n = 0;
    char *page = rc == 0 ? read_text_file(path, &n) : NULL;
    check(rc == 0 && page, "report_write_html writes the page");
    if (page) {
        check(strncmp(page, "<!DOCTYPE html>", 15) == 0 && strstr(page, "Content-Security-Policy") &&
                  strstr(page, "default-src 'none'"),
              "a doctype and a Content-Security-Policy that forbids fetching");
        check(strstr(page, "<title>a &lt;b&gt; &amp; &quot;c&quot;</title>") != NULL, "the title is HTML-escaped");
        check(strstr(page, "\"title\":\"\\u003c/script>\\u003c!--\"") != NULL, "'<' in the data blob is written \\u003c");
        int scripts = 0;
        for (const char *p = page; (p = strstr(p, "</script>")) != NULL; p++) scripts++;
        check(scripts == 2, "exactly two </script> (the data, the code)");
        check(strstr(page, tlm_report_css) && strstr(page, tlm_report_js), "the CSS and JS are inline");
        size_t m = 0;
        char *mem = report_page("a <b> & \"c\"", "{\"kind\":\"experiment\",\"title\":\"</script><!--\"}", &m);
        check(mem && m == n && memcmp(mem, page, n) == 0, "report_page (the Python views' page) = the file, byte for byte");
        free(mem);
    }
    free(page);
    unlink(path);

    rc = report_write_html("/nonexistent-dir/page.html", "t", "{}");
    check(rc != 0 && strstr(tlm_last_error(), "/nonexistent-dir/page.html") != NULL,
          "an unwritable path: an error naming it");
    printf("%s\n", failed ? "FAILED" : "all passed");
    return failed ? 1 : 0;
}
