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

/* the repository's file `rel` (e.g. "data/tok512.bin", "tests/data/tokenizers/gpt2") in a
 * static buffer (one at a time); TLM_SOURCE_DIR is defined by tlm_c_test (tests/tests.cmake) */
static inline const char *tt_repo(const char *rel) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", TLM_SOURCE_DIR, rel);
    return buf;
}

#endif
