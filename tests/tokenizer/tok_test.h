/* tok_test.h — assertion helpers and file paths shared by the tokenizer tests. */
#ifndef TLM_TESTS_TOK_TEST_H
#define TLM_TESTS_TOK_TEST_H

#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "test_files.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tt_failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            tt_failures++;                                                                         \
        }                                                                                          \
    } while (0)

/* `failed` must hold and the last error must contain `want`. */
#define CHECK_ERR(failed, want)                                                                    \
    do {                                                                                           \
        if (!(failed)) {                                                                           \
            fprintf(stderr, "%s:%d: expected failure: %s\n", __FILE__, __LINE__, #failed);         \
            tt_failures++;                                                                         \
        } else if (!strstr(tlm_last_error(), (want))) {                                            \
            fprintf(stderr, "%s:%d: error \"%s\" does not mention \"%s\"\n", __FILE__, __LINE__,   \
                    tlm_last_error(), (want));                                                     \
            tt_failures++;                                                                         \
        }                                                                                          \
    } while (0)

static inline int tt_report(const char *name) {
    if (tt_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, tt_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

/* $TLM_SHARED_DATA/rel in a static buffer (one at a time). */
static inline const char *tt_shared(const char *rel) {
    static char buf[4096];
    const char *d = getenv("TLM_SHARED_DATA");
    if (!d || !*d) {
        fprintf(stderr, "TLM_SHARED_DATA is not set\n");
        exit(2);
    }
    snprintf(buf, sizeof buf, "%s/%s", d, rel);
    return buf;
}

#endif
