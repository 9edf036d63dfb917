/* fuzz_tokenizer.c — libFuzzer harness for the tokenizer loaders and encoders.
 * The first input byte picks the format (even: JSON such as tokenizer.json or the engine's
 * own file; odd: llama2.c tokenizer.bin), the rest is the file's content, loaded with
 * tlm_tokenizer_load_memory. When it loads, a few short texts (ASCII, multi-byte UTF-8,
 * invalid UTF-8, an empty string) are encoded, decoded and streamed piece by piece. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "tokenizer/tokenizer.h"

static void exercise(const tlm_tokenizer *t, const char *text, size_t len) {
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *name = (data[0] & 1) ? "fuzz.bin" : "fuzz.json";
    tlm_tokenizer *t = tlm_tokenizer_load_memory(data + 1, size - 1, name);
    if (!t) return 0;
    static const char *const texts[] = {
        "Hello world, it's 12345!", "caf\xc3\xa9 nai\xcc\x88ve \xe5\xb9\xb4\xe5\x81\x87 \xf0\x9f\x98\x80",
        "  tabs\t\tand\nnew lines\r\n", "bad \xff\xfe utf8 \xc3", "<s><|endoftext|></s>", "",
    };
    for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) {
        size_t len = 0;
        while (texts[k][len]) len++;
        exercise(t, texts[k], len);
    }
    int ids[4] = {0, 1, tlm_tokenizer_vocab_size(t) - 1, -1};
    free(tlm_tokenizer_decode(t, ids, 3));
    free(tlm_tokenizer_decode(t, ids, 4)); /* out of range: must fail cleanly */
    tlm_tokenizer_free(t);
    return 0;
}
