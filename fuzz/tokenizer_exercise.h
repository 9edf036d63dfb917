/* tokenizer_exercise.h — what the tokenizer fuzz targets do with a tokenizer that loaded:
 * a few short texts (ASCII, multi-byte UTF-8, invalid UTF-8, special-token text, an empty
 * string) are encoded (with and without BOS), decoded and streamed piece by piece, and
 * out-of-range ids must be refused cleanly. Shared by fuzz_tokenizer.c and
 * fuzz_llama2c_tokenizer.c. */
#ifndef TLM_FUZZ_TOKENIZER_EXERCISE_H
#define TLM_FUZZ_TOKENIZER_EXERCISE_H

#include <stddef.h>
#include <stdlib.h>

#include "tokenizer/tokenizer.h"

static void exercise_text(const tlm_tokenizer *t, const char *text, size_t len) {
    int *ids = NULL;
    size_t n = 0;
    for (int bos = 0; bos < 2; bos++) {
        if (tlm_tokenizer_encode(t, text, len, bos, &ids, &n) != 0) continue;
        size_t out_len;
        free(tlm_tokenizer_decode_len(t, ids, n, &out_len));
        int prev = -1;
        for (size_t i = 0; i < n; i++) {
            size_t pl;
            (void)tlm_tokenizer_piece(t, prev, ids[i], &pl);
            prev = ids[i];
        }
        free(ids);
    }
}

static void exercise_tokenizer(const tlm_tokenizer *t) {
    static const char *const texts[] = {
        "Hello world, it's 12345!", "caf\xc3\xa9 nai\xcc\x88ve \xe5\xb9\xb4\xe5\x81\x87 \xf0\x9f\x98\x80",
        "  tabs\t\tand\nnew lines\r\n", "bad \xff\xfe utf8 \xc3", "<s><|endoftext|></s>", "",
    };
    for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) {
        size_t len = 0;
        while (texts[k][len]) len++;
        exercise_text(t, texts[k], len);
    }
    int ids[4] = {0, 1, tlm_tokenizer_vocab_size(t) - 1, -1};
    free(tlm_tokenizer_decode(t, ids, 3));
    free(tlm_tokenizer_decode(t, ids, 4)); /* out of range: must fail cleanly */
}

#endif
