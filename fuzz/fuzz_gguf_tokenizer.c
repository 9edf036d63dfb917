/* fuzz_gguf_tokenizer.c — libFuzzer target: the input bytes are a GGUF file whose tokenizer.ggml.*
 * metadata is read as a tokenizer (tok_gguf.c: SentencePiece "llama" pieces with scores and token
 * types; "gpt2" byte-level BPE with merges, each pre-tokenizer name, control and user-defined
 * tokens). A file that opens and yields a tokenizer is exercised (tokenizer_exercise.h); a
 * refusal must carry a message naming the file. Build: see fuzz/README.md. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer_exercise.h"
#include "util/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tlm_clear_error();
    tlm_gguf *g = tlm_gguf_open_memory(data, size, "fuzz.gguf");
    if (!g) return 0;
    tlm_clear_error();
    tlm_tokenizer *t = tok_load_gguf(g, "fuzz.gguf");
    if (!t) {
        if (strncmp(tlm_last_error(), "fuzz.gguf", 9) != 0) /* every refusal names the file */
            abort();
    } else {
        exercise_tokenizer(t);
        tlm_tokenizer_free(t);
    }
    tlm_gguf_close(g);
    return 0;
}
