/* fuzz_tokenizer.c — libFuzzer harness for the tokenizer loaders and encoders.
 * The first input byte picks the format (even: JSON such as tokenizer.json or the engine's
 * own file; odd: llama2.c tokenizer.bin), the rest is the file's content, loaded with
 * tlm_tokenizer_load_memory. When it loads, it is exercised (tokenizer_exercise.h). */
#include <stddef.h>
#include <stdint.h>

#include "tokenizer_exercise.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *name = (data[0] & 1) ? "fuzz.bin" : "fuzz.json";
    tlm_tokenizer *t = tlm_tokenizer_load_memory(data + 1, size - 1, name);
    if (!t) return 0;
    exercise_tokenizer(t);
    tlm_tokenizer_free(t);
    return 0;
}
