/* check_count.h — CHECK(cond, printf-style message) for the C tests of tests/model and
 * tests/probes: counts checks and failures, and on a failure prints where, the message and the
 * library's last error. main() prints the counts and returns failures != 0. */
#ifndef TLM_TEST_CHECK_COUNT_H
#define TLM_TEST_CHECK_COUNT_H

#include <stdio.h>

#include "util/error.h"

static int failures, checks;

#define CHECK(cond, ...)                                                                                           \
    do {                                                                                                           \
        checks++;                                                                                                  \
        if (!(cond)) {                                                                                             \
            failures++;                                                                                            \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                            \
            printf(__VA_ARGS__);                                                                                   \
            printf("  [last error: %s]\n", tlm_last_error());                                                      \
        }                                                                                                          \
    } while (0)

#endif
