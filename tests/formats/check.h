/* check.h — tiny assertion helpers and a scratch directory for the format tests. */
#ifndef TLM_TEST_FORMATS_CHECK_H
#define TLM_TEST_FORMATS_CHECK_H

#define _XOPEN_SOURCE 700
#include "util/error.h"

#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_files.h"

static int check_failures;

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                                   \
            check_failures++;                                                                                          \
        }                                                                                                              \
    } while (0)

/* `failed` must be true (the call reported failure) and the error message must contain
 * every one of the given substrings. */
#define CHECK_ERR(failed, ...) check_err_at(__FILE__, __LINE__, #failed, (failed), __VA_ARGS__, (const char *)NULL)

static inline void check_err_at(const char *file, int line, const char *expr, int failed, ...) {
    const char *msg = tlm_last_error();
    if (!failed) {
        fprintf(stderr, "%s:%d: expected failure of %s\n", file, line, expr);
        check_failures++;
        return;
    }
    va_list ap;
    va_start(ap, failed);
    for (const char *want; (want = va_arg(ap, const char *));) {
        if (!strstr(msg, want)) {
            fprintf(stderr, "%s:%d: %s: error \"%s\" does not mention \"%s\"\n", file, line, expr, msg, want);
            check_failures++;
        }
    }
    va_end(ap);
}

static inline int check_report(const char *name) {
    if (check_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

/* A fresh directory under $TMPDIR (or /tmp); the returned string is static. */
static inline const char *scratch_dir(void) {
    static char dir[4096];
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/tlm-fmt-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(2);
    }
    return dir;
}

static inline int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static inline void scratch_remove(const char *dir) { nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

#endif
