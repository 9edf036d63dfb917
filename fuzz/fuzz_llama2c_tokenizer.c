/* fuzz_llama2c_tokenizer.c — libFuzzer target: the input bytes are a llama2.c tokenizer.bin
 * (int32 max_token_length, then per token a float32 score, an int32 length and the bytes).
 * fuzz_tokenizer reaches this loader too, with half its inputs; here every input goes to it,
 * from seeds in its own format. When it loads, the tokenizer is exercised
 * (tokenizer_exercise.h: encode with run.c's merge loop, decode, pieces, bad ids). */
#include <stddef.h>
#include <stdint.h>

#include "tokenizer_exercise.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tlm_tokenizer *t = tlm_tokenizer_load_memory(data, size, "fuzz/tokenizer.bin");
    if (!t) return 0;
    exercise_tokenizer(t);
    tlm_tokenizer_free(t);
    return 0;
}
