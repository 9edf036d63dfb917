/* fuzz_gguf.c — libFuzzer target: the input bytes are a GGUF file.
 * Parses it from memory (a malloc'd copy of exactly these bytes, so ASan sees any read past
 * them) and, when it opens, exercises every query: each metadata entry through every typed
 * getter (which must agree with the entry's type), every element of every array through each
 * array accessor (and one index past the end), and every tensor's bytes, so a count, length or
 * offset the validator let through unchecked would show as a crash. Also aborts on broken
 * invariants: a refusal without a message, lookup not finding a listed key or tensor, a tensor
 * that is misaligned or has a shape outside the rules. Floats that are not finite as a float32
 * are refused by the getters (and only they: a finite float32 is always read). Then the bytes
 * go to the model loader (through a memfd, as it takes a path): a file it accepts whose weights
 * are all tame (|w| <= 4, so that no honest product overflows) must give finite logits on a
 * two-token input, whatever its metadata say (a soft-cap, an eps, a RoPE base or factor that
 * passed the checks). Build: see fuzz/README.md. */
#define _GNU_SOURCE
#include "formats/gguf.h"
#include "convert/checkpoint.h"
#include "model/model.h"
#include "ops/quant.h"
#include "util/error.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* one thread: the models are tiny (as fuzz_llama2c) */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    omp_set_num_threads(1);
    return 0;
}

static volatile uint64_t sink;

static void touch(const void *p, uint64_t n) {
    const unsigned char *b = p;
    uint64_t s = 0;
    for (uint64_t i = 0; i < n; i++)
        s += b[i];
    sink += s;
}

static int is_int(gguf_type t) {
    return t == GGUF_UINT8 || t == GGUF_INT8 || t == GGUF_UINT16 || t == GGUF_INT16 || t == GGUF_UINT32 ||
           t == GGUF_INT32 || t == GGUF_UINT64 || t == GGUF_INT64;
}

static int is_float(gguf_type t) { return t == GGUF_FLOAT32 || t == GGUF_FLOAT64; }

/* the last refusal was of a NaN or an infinity (a float32 is refused for nothing else) */
static int nonfinite_refusal(void) {
    const char *e = tlm_last_error();
    return strstr(e, " is NaN") || strstr(e, " is +Inf") || strstr(e, " is -Inf");
}

/* a present key: 1 when the type fits, -1 (with a message) otherwise; never 0 */
static void expect(int rc, int fits) {
    if (rc == 0 || (fits && rc != 1) || (!fits && rc == 1) || (rc == -1 && !*tlm_last_error()))
        abort();
}

static void exercise_kv(const tlm_gguf *g, const gguf_kv *kv) {
    touch(kv->key.p, kv->key.len);
    char *key = malloc((size_t)kv->key.len + 1);
    if (!key)
        return;
    memcpy(key, kv->key.p, (size_t)kv->key.len);
    key[kv->key.len] = '\0';
    if (tlm_gguf_find(g, key) != kv) /* keys are unique and hold no NUL */
        abort();
    if (kv->type >= GGUF_TYPE_COUNT || (kv->type != GGUF_ARRAY && kv->count != 1) || !tlm_gguf_type_name(kv->type))
        abort();

    uint32_t u = 0;
    int64_t i = 0;
    float f = 0;
    int b = 0;
    gguf_str s;
    gguf_type et;
    uint64_t n;
    tlm_clear_error();
    int ru = tlm_gguf_get_u32(g, key, &u), ri = tlm_gguf_get_i64(g, key, &i);
    if (!is_int(kv->type) && (ru != -1 || ri != -1))
        abort();
    if (ru == 1 && (ri != 1 || i != (int64_t)u)) /* fits a uint32, so an int64, with the same value */
        abort();
    if (ru == 0 || ri == 0)
        abort();
    int rf = tlm_gguf_get_f32(g, key, &f);
    if (rf == 0 || (!is_float(kv->type) && rf != -1) || (rf == 1 && !isfinite(f)) ||
        (kv->type == GGUF_FLOAT32 && rf == -1 && !nonfinite_refusal()))
        abort();
    sink += (uint64_t)u + (uint64_t)i + (uint64_t)(f == f);
    expect(tlm_gguf_get_bool(g, key, &b), kv->type == GGUF_BOOL);
    if (kv->type == GGUF_BOOL && b != 0 && b != 1)
        abort();
    int rs = tlm_gguf_get_str(g, key, &s);
    expect(rs, kv->type == GGUF_STRING);
    if (rs == 1)
        touch(s.p, s.len);
    int ra = tlm_gguf_get_array(g, key, &et, &n);
    expect(ra, kv->type == GGUF_ARRAY);
    if (ra == 1 && (et != kv->elem_type || n != kv->count))
        abort();

    if (kv->type != GGUF_ARRAY) {
        if (tlm_gguf_array_str(g, kv, 0, &s) != -1 || tlm_gguf_array_f32(g, kv, 0, &f) != -1 ||
            tlm_gguf_array_i64(g, kv, 0, &i) != -1)
            abort();
        free(key);
        return;
    }
    for (uint64_t k = 0; k < kv->count; k++) {
        int r1 = tlm_gguf_array_str(g, kv, k, &s);
        expect(r1, kv->elem_type == GGUF_STRING);
        if (r1 == 1)
            touch(s.p, s.len);
        float f2 = 0;
        int r2 = tlm_gguf_array_f32(g, kv, k, &f2);
        if (r2 == 0 || (!is_float(kv->elem_type) && r2 != -1) || (r2 == 1 && !isfinite(f2)) ||
            (kv->elem_type == GGUF_FLOAT32 && r2 == -1 && !nonfinite_refusal()))
            abort();
        f = r2 == 1 ? f2 : f;
        int r3 = tlm_gguf_array_i64(g, kv, k, &i);
        if (r3 == 0 || (!is_int(kv->elem_type) && r3 != -1) ||
            (is_int(kv->elem_type) && kv->elem_type != GGUF_UINT64 && r3 != 1))
            abort();
        sink += (uint64_t)i + (uint64_t)(f == f);
    }
    if (tlm_gguf_array_str(g, kv, kv->count, &s) != -1 || tlm_gguf_array_f32(g, kv, kv->count, &f) != -1 ||
        tlm_gguf_array_i64(g, kv, kv->count, &i) != -1)
        abort();
    free(key);
}

static void exercise_tensor(const tlm_gguf *g, const gguf_tensor *t) {
    touch(t->name.p, t->name.len);
    char name[65];
    if (t->name.len == 0 || t->name.len > 64)
        abort();
    memcpy(name, t->name.p, (size_t)t->name.len);
    name[t->name.len] = '\0';
    if (tlm_gguf_find_tensor(g, name) != t)
        abort();
    if (t->n_dims < 1 || t->n_dims > TLM_GGUF_MAX_DIMS || !t->data)
        abort();
    for (int d = 0; d < TLM_GGUF_MAX_DIMS; d++)
        if (t->ne[d] < 0 || (d >= t->n_dims && t->ne[d] != 1))
            abort();
    if (t->offset % tlm_gguf_alignment(g))
        abort();
    touch(t->data, t->nbytes);
}

/* every weight of the file dequantized is finite and |w| <= 4 (a type tinylm cannot read: not
 * tame, the loader refuses it anyway) */
static int tame_weights(const tlm_gguf *g) {
    for (size_t i = 0; i < tlm_gguf_tensor_count(g); i++) {
        const gguf_tensor *t = tlm_gguf_tensor_at(g, i);
        const int64_t row = t->ne[0];
        if (!wq_supported(t->type) || row <= 0 || row > (1 << 20)) return 0;
        if (!t->nbytes) continue; /* (no elements) */
        const size_t rb = wq_row_bytes(t->type, row);
        if (!rb || t->nbytes % rb) return 0;
        float *buf = malloc(sizeof(float) * (size_t)row);
        if (!buf) return 0;
        int ok = 1;
        for (size_t r = 0; r < t->nbytes / rb && ok; r++) {
            wq_dequantize_row(t->type, (const unsigned char *)t->data + r * rb, buf, row);
            for (int64_t j = 0; j < row && ok; j++) ok = fabsf(buf[j]) <= 4.0f; /* (NaN fails too) */
        }
        free(buf);
        if (!ok) return 0;
    }
    return 1;
}

/* a model the loader accepts from tame weights computes finite logits */
static void check_model(const uint8_t *data, size_t size, const tlm_gguf *g) {
    if (!tame_weights(g)) return;
    static int fd = -1;
    if (fd < 0 && (fd = memfd_create("fuzz_gguf", 0)) < 0) abort();
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    tlm_model *m = gguf_model_load(path);
    if (!m) return;
    int ids[2] = {0, m->cfg.vocab_size - 1};
    const int T = m->cfg.max_seq < 2 ? m->cfg.max_seq : 2;
    if (model_forward(m, ids, NULL, 1, T, NULL) != 0) abort();
    const float *logits = model_last_logits(m);
    for (int v = 0; v < m->cfg.vocab_size; v++)
        if (!isfinite(logits[v])) abort();
    model_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tlm_clear_error();
    tlm_gguf *g = tlm_gguf_open_memory(data, size, "fuzz.gguf");
    if (!g) {
        if (strncmp(tlm_last_error(), "fuzz.gguf: ", 11) != 0) /* every refusal names the file */
            abort();
        return 0;
    }
    size_t a = tlm_gguf_alignment(g);
    if ((tlm_gguf_version(g) != 2 && tlm_gguf_version(g) != 3) || a == 0 || (a & (a - 1)) != 0)
        abort();
    for (size_t i = 0; i < tlm_gguf_kv_count(g); i++)
        exercise_kv(g, tlm_gguf_kv_at(g, i));
    if (tlm_gguf_kv_at(g, tlm_gguf_kv_count(g)) != NULL)
        abort();
    for (size_t i = 0; i < tlm_gguf_tensor_count(g); i++)
        exercise_tensor(g, tlm_gguf_tensor_at(g, i));
    if (tlm_gguf_tensor_at(g, tlm_gguf_tensor_count(g)) != NULL)
        abort();
    /* tensors with bytes never share any (the validator sorted them by offset) */
    size_t n = tlm_gguf_tensor_count(g);
    for (size_t i = 0; i < n && n <= 256; i++)
        for (size_t j = i + 1; j < n; j++) {
            const gguf_tensor *x = tlm_gguf_tensor_at(g, i), *y = tlm_gguf_tensor_at(g, j);
            if (x->nbytes && y->nbytes && x->offset < y->offset + y->nbytes && y->offset < x->offset + x->nbytes)
                abort();
        }
    void *base;
    size_t len;
    if (tlm_gguf_detach_mapping(g, &base, &len) != -1) /* an image from memory has no mapping */
        abort();
    check_model(data, size, g);
    tlm_gguf_close(g);
    return 0;
}
