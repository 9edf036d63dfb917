/* fuzz_llama2c.c — libFuzzer target: the input bytes are a llama2.c checkpoint (.bin,
 * version 0: seven int32 header fields, then the float32 arrays; src/formats/llama2c.h).
 * The loader takes a path, so the bytes go to an in-memory file (memfd) named by its
 * /proc/self/fd path. Both llama2c_read_config and llama2c_load run; they must agree, and a
 * model that loads must hold only finite weights (the loader refuses NaN/Inf) and run a
 * forward pass over one or two tokens: whatever the header passes must be a model the
 * engine can compute. The exact-size rule keeps models tiny (libFuzzer's inputs are small). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <omp.h>
#include <unistd.h>

#include "formats/llama2c.h"
#include "convert/checkpoint.h"
#include "model/model.h"
#include "util/finite.h"

/* one thread: the models are tiny, and an OpenMP team's barriers took ~half of each execution */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    omp_set_num_threads(1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int fd = -1;
    if (fd < 0 && (fd = memfd_create("fuzz_llama2c", 0)) < 0) abort();
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    tlm_config cfg;
    const int header_ok = llama2c_read_config(path, &cfg) == 0;
    tlm_model *m = llama2c_load(path, 0);
    if (m && !header_ok) abort(); /* a file whose header is refused must not load */
    if (!m) return 0;
    if (tlm_first_nonfinite(m->param_mem, m->n_params, NULL) != m->n_params) abort();
    int ids[2] = {0, m->cfg.vocab_size - 1};
    int T = m->cfg.max_seq < 2 ? m->cfg.max_seq : 2;
    if (model_forward(m, ids, NULL, 1, T, NULL) != 0) abort();
    /* the same file loaded with its matrices rounded to bf16 as they are read (--dtype bf16)
     * gives what the f32 load converted afterwards does, bit for bit */
    tlm_model *m16 = llama2c_load(path, 1);
    if (!m16 || model_weights_to_bf16(m) != 0) abort();
    if (model_forward(m, ids, NULL, 1, T, NULL) != 0 || model_forward(m16, ids, NULL, 1, T, NULL) != 0) abort();
    if (memcmp(model_last_logits(m), model_last_logits(m16), sizeof(float) * (size_t)m->cfg.vocab_size)) abort();
    model_free(m16);
    model_free(m);
    return 0;
}
