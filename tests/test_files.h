/* test_files.h — whole-file read/write for test setup (exits on failure: a test whose
 * fixture cannot be written or read has nothing to check). Shared by the C tests. */
#ifndef TLM_TESTS_TEST_FILES_H
#define TLM_TESTS_TEST_FILES_H

#include <stdio.h>
#include <stdlib.h>

/* Writes bytes to a file (plain, non-atomic: tests build bad files with it). */
static inline void test_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n) {
        perror(path);
        exit(2);
    }
    fclose(f);
}

/* Whole file, NUL-terminated; *len (if not NULL) receives its size. */
static inline char *test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *d = malloc((size_t)n + 1);
    if (!d || fread(d, 1, (size_t)n, f) != (size_t)n) {
        perror(path);
        exit(2);
    }
    fclose(f);
    d[n] = '\0';
    if (len) *len = (size_t)n;
    return d;
}

#endif
