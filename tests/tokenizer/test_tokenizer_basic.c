/* test_tokenizer_basic.c — the training tokenizers (bytes, chars), the engine's own file
 * (save/load), special ids, run.c decode semantics, and error handling: missing files,
 * truncated tokenizer.bin, bad tokenizer.json, bad text, and random bytes fed to the loader.
 * Expected values come from the definitions (a byte's id is its value; chars ids are the
 * ranks of the sorted code points; run.c strips a leading space after BOS and prints <0xNN> as
 * that byte), from the tokenizer files themselves (the id of a token's string), or from
 * llama2.c's recorded output in tests/data/reference. */
#define _XOPEN_SOURCE 700
#include "tok_test.h"

#include <dirent.h>
#include <ftw.h>
#include <stdint.h>
#include <unistd.h>

static char scratch[4096];

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static const char *in_scratch(const char *name) {
    static char buf[4200];
    snprintf(buf, sizeof buf, "%s/%s", scratch, name);
    return buf;
}

static int encode_eq(const tlm_tokenizer *t, const char *text, size_t len, int bos, const int *want, size_t n_want) {
    int *ids;
    size_t n;
    if (tlm_tokenizer_encode(t, text, len, bos, &ids, &n)) {
        fprintf(stderr, "encode failed: %s\n", tlm_last_error());
        return 0;
    }
    int ok = n == n_want && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
    if (!ok) {
        fprintf(stderr, "  got:");
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    free(ids);
    return ok;
}

static void test_bytes(void) {
    tlm_tokenizer *t = tlm_tokenizer_bytes();
    CHECK(t && tlm_tokenizer_vocab_size(t) == 256);
    CHECK(tlm_tokenizer_bos(t) == -1 && tlm_tokenizer_eos(t) == -1);
    const char text[] = {'A', 0, (char)0xff, '\n'};
    const int want[] = {65, 0, 255, 10};
    CHECK(encode_eq(t, text, 4, 1, want, 4)); /* no BOS to add */
    size_t len;
    char *back = tlm_tokenizer_decode_len(t, want, 4, &len);
    CHECK(back && len == 4 && memcmp(back, text, 4) == 0);
    free(back);
    CHECK(encode_eq(t, "", 0, 0, NULL, 0));
    tlm_tokenizer_free(t);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void test_chars(void) {
    /* "hé 年" + "h": code points h(0x68) é(0xE9) space(0x20) 年(0x5E74) */
    const char *corpus = "h\xc3\xa9 \xe5\xb9\xb4h";
    tlm_tokenizer *t = tlm_tokenizer_chars(corpus, strlen(corpus));
    CHECK(t && tlm_tokenizer_vocab_size(t) == 4);
    uint32_t sorted[4] = {0x68, 0xE9, 0x20, 0x5E74};
    qsort(sorted, 4, sizeof *sorted, cmp_u32);
    int id_h = -1, id_e = -1, id_sp = -1, id_nian = -1;
    for (int i = 0; i < 4; i++) {
        if (sorted[i] == 0x68) id_h = i;
        if (sorted[i] == 0xE9) id_e = i;
        if (sorted[i] == 0x20) id_sp = i;
        if (sorted[i] == 0x5E74) id_nian = i;
    }
    const int want[] = {id_nian, id_sp, id_h, id_e};
    CHECK(encode_eq(t, "\xe5\xb9\xb4 h\xc3\xa9", 7, 0, want, 4));
    char *back = tlm_tokenizer_decode(t, want, 4);
    CHECK(back && strcmp(back, "\xe5\xb9\xb4 h\xc3\xa9") == 0);
    free(back);
    int *ids;
    size_t n;
    CHECK_ERR(tlm_tokenizer_encode(t, "hx", 2, 0, &ids, &n) != 0, "U+0078");
    CHECK_ERR(tlm_tokenizer_encode(t, "h\xc3", 2, 0, &ids, &n) != 0, "UTF-8");
    CHECK_ERR(tlm_tokenizer_chars("a\xff", 2) == NULL, "UTF-8");
    CHECK_ERR(tlm_tokenizer_chars("", 0) == NULL, "empty");

    /* own format: save into a directory, load the directory, same behaviour */
    CHECK(tlm_tokenizer_save(t, in_scratch(TLM_TOKENIZER_OWN_FILE)) == 0);
    tlm_tokenizer *u = tlm_tokenizer_load(scratch);
    CHECK(u && tlm_tokenizer_vocab_size(u) == 4 && strcmp(tlm_tokenizer_kind(u), "chars") == 0);
    if (u) CHECK(encode_eq(u, "\xe5\xb9\xb4 h\xc3\xa9", 7, 0, want, 4));
    tlm_tokenizer_free(u);
    /* no temporary file left behind */
    DIR *d = opendir(scratch);
    int files = 0;
    for (struct dirent *e; d && (e = readdir(d));) files += e->d_name[0] != '.';
    if (d) closedir(d);
    CHECK(files == 1);
    tlm_tokenizer_free(t);

    t = tlm_tokenizer_bytes();
    CHECK(tlm_tokenizer_save(t, in_scratch("bytes.json")) == 0);
    tlm_tokenizer_free(t);
    t = tlm_tokenizer_load(in_scratch("bytes.json"));
    CHECK(t && tlm_tokenizer_vocab_size(t) == 256 && strcmp(tlm_tokenizer_kind(t), "bytes") == 0);
    tlm_tokenizer_free(t);
    remove(in_scratch("bytes.json"));
    remove(in_scratch(TLM_TOKENIZER_OWN_FILE));
}

/* run.c semantics with stories260K's tok512.bin: the prompt run.c printed is the start of its
 * recorded output. */
static void test_llama2c(void) {
    tlm_tokenizer *t = tlm_tokenizer_load(tt_repo("data/tok512.bin"));
    CHECK(t && tlm_tokenizer_vocab_size(t) == 512);
    if (!t) return;
    CHECK(tlm_tokenizer_bos(t) == 1 && tlm_tokenizer_eos(t) == 2);
    const char *prompts[] = {"The little dog", "Once upon a time"};
    const char *outputs[] = {"tests/data/reference/stories260K_greedy_littledog.txt",
                             "tests/data/reference/stories260K_greedy_once.txt"};
    for (int k = 0; k < 2; k++) {
        int *ids;
        size_t n;
        CHECK(tlm_tokenizer_encode(t, prompts[k], strlen(prompts[k]), 1, &ids, &n) == 0);
        CHECK(n >= 2 && ids[0] == 1);
        char printed[256] = "";
        size_t pl = 0;
        for (size_t i = 1; i < n; i++) { /* run.c: token = previous token, starting from BOS */
            size_t l;
            const char *p = tlm_tokenizer_piece(t, ids[i - 1], ids[i], &l);
            if (p && pl + l < sizeof printed) memcpy(printed + pl, p, l), pl += l;
        }
        size_t rl;
        char *ref = test_read_file(tt_repo(outputs[k]), &rl);
        CHECK(pl == strlen(prompts[k]) && rl >= pl && memcmp(ref, printed, pl) == 0);
        free(ref);
        free(ids);
    }
    /* <0xNN> pieces are raw bytes, and run.c does not strip them after BOS ("<0x20>" does not
     * start with a space); ids 3 + b are the byte tokens (data/README.md). */
    size_t l;
    const char *p = tlm_tokenizer_piece(t, 1, 3 + 0x20, &l);
    CHECK(p && l == 1 && p[0] == ' ');
    p = tlm_tokenizer_piece(t, 5, 3 + '\n', &l);
    CHECK(p && l == 1 && p[0] == '\n');
    CHECK(tlm_tokenizer_piece(t, 1, 512, &l) == NULL && l == 0);
    /* bytes outside the vocabulary fall back to byte ids, and NUL bytes are encoded too */
    int *ids;
    size_t n;
    CHECK(tlm_tokenizer_encode(t, "\x01", 1, 0, &ids, &n) == 0);
    CHECK(n == 2 && ids[1] == 3 + 1);
    free(ids);
    CHECK(tlm_tokenizer_save(t, in_scratch("x.json")) != 0);
    tlm_tokenizer_free(t);
}

/* Special ids come from tokenizer_config.json and the added tokens. */
static void test_specials(void) {
    int *ids;
    size_t n;
    tlm_tokenizer *q = tlm_tokenizer_load(tt_repo("tests/data/tokenizers/qwen3/tokenizer.json"));
    CHECK(q != NULL);
    if (q) {
        CHECK(tlm_tokenizer_bos(q) == -1); /* add_bos_token false */
        CHECK(tlm_tokenizer_encode(q, "<|im_end|>", 10, 1, &ids, &n) == 0);
        CHECK(n == 1 && ids[0] == tlm_tokenizer_eos(q)); /* eos_token <|im_end|> */
        free(ids);
        CHECK_ERR(tlm_tokenizer_encode(q, "ab\xff", 3, 0, &ids, &n) != 0, "UTF-8");
        int bad[] = {0, 151669};
        CHECK_ERR(tlm_tokenizer_decode(q, bad, 2) == NULL, "151669");
        tlm_tokenizer_free(q);
    }
    tlm_tokenizer *g = tlm_tokenizer_load(tt_repo("tests/data/tokenizers/gpt2/encoder.json"));
    CHECK(g && tlm_tokenizer_bos(g) == -1);
    if (g) {
        CHECK(tlm_tokenizer_encode(g, "a<|endoftext|>", 14, 0, &ids, &n) == 0);
        CHECK(n == 2 && ids[1] == tlm_tokenizer_eos(g) && ids[1] >= 0);
        free(ids);
        tlm_tokenizer_free(g);
    }
    tlm_tokenizer *m = tlm_tokenizer_load(tt_repo("tests/data/tokenizers/mistral"));
    CHECK(m != NULL);
    if (m) {
        CHECK(tlm_tokenizer_encode(m, "<s></s>", 7, 0, &ids, &n) == 0);
        CHECK(n == 2 && ids[0] == tlm_tokenizer_bos(m) && ids[1] == tlm_tokenizer_eos(m));
        free(ids);
        /* decoder Strip(start 1): no leading space at the start of the text */
        CHECK(tlm_tokenizer_encode(m, "Hi", 2, 1, &ids, &n) == 0);
        char *s = tlm_tokenizer_decode(m, ids, n);
        CHECK(s && strcmp(s, "Hi") == 0);
        free(s);
        free(ids);
        tlm_tokenizer_free(m);
    }
}

static void test_errors(void) {
    CHECK_ERR(tlm_tokenizer_load("/nonexistent/dir/tokenizer.json") == NULL, "/nonexistent/dir/tokenizer.json");
    CHECK_ERR(tlm_tokenizer_load(scratch) == NULL, "no tokenizer");

    /* truncated tokenizer.bin at several points */
    size_t len;
    char *bin = test_read_file(tt_repo("data/tok512.bin"), &len);
    const size_t cuts[] = {0, 2, 4 + 3, 4 + 8 + 2, len / 2, len - 1};
    for (size_t k = 0; k < sizeof cuts / sizeof *cuts; k++) {
        test_write_file(in_scratch("tokenizer.bin"), bin, cuts[k]);
        CHECK_ERR(tlm_tokenizer_load(in_scratch("tokenizer.bin")) == NULL, "tokenizer.bin");
        CHECK_ERR(tlm_tokenizer_load(in_scratch("tokenizer.bin")) == NULL, "truncated");
    }
    free(bin);
    remove(in_scratch("tokenizer.bin"));

    struct {
        const char *json, *want;
    } bad[] = {
        {"this is not JSON", "not valid JSON"},
        {"{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]]}}", "Unigram"},
        {"{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}", "WordPiece"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a b\"]}}", "merges[0]"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 7}, \"merges\": []}}", "model.vocab[\"a\"]"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"normalizer\": {\"type\": \"NFKC\"}}", "NFKC"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"Split\", "
         "\"pattern\": {\"Regex\": \"(\"}, \"behavior\": \"Isolated\"}}", "PCRE2"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"decoder\": {\"type\": \"CTC\"}}", "CTC"},
        {"{\"model\": 3}", "model"},
        {"[1, 2]", "not an object"},
        {"{\"tinylm_tokenizer\": 1, \"type\": \"chars\", \"code_points\": [98, 97]}", "code_points[1]"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        test_write_file(in_scratch("tokenizer.json"), bad[k].json, strlen(bad[k].json));
        tlm_tokenizer *t = tlm_tokenizer_load(in_scratch("tokenizer.json"));
        CHECK_ERR(t == NULL, "tokenizer.json");
        CHECK_ERR(t == NULL, bad[k].want);
        tlm_tokenizer_free(t);
    }

    /* a minimal valid tokenizer.json: with the merge a+b -> ab, "abab" is two "ab" */
    const char *tiny = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a b\"]}}";
    test_write_file(in_scratch("tokenizer.json"), tiny, strlen(tiny));
    tlm_tokenizer *t = tlm_tokenizer_load(scratch);
    CHECK(t && tlm_tokenizer_vocab_size(t) == 3);
    if (t) {
        const int want[] = {2, 2, 0};
        CHECK(encode_eq(t, "ababa", 5, 0, want, 3));
        int *ids;
        size_t n;
        CHECK_ERR(tlm_tokenizer_encode(t, "abc", 3, 0, &ids, &n) != 0, "not in the vocabulary");
    }
    tlm_tokenizer_free(t);
    remove(in_scratch("tokenizer.json"));

    /* random and mutated bytes must never crash the loaders */
    uint64_t s = 42;
    size_t base_len;
    char *base = test_read_file(tt_repo("data/tok512.bin"), &base_len);
    unsigned char buf[600];
    for (int k = 0; k < 400; k++) {
        size_t n = 1 + k % sizeof buf;
        for (size_t i = 0; i < n; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            buf[i] = (unsigned char)(s >> 56);
        }
        if (k % 4 == 0) buf[0] = '{';
        if (k % 4 == 1 && n >= 4) memcpy(buf, base, 4);
        tlm_tokenizer *r = tlm_tokenizer_load_memory(buf, n, "random");
        tlm_tokenizer_free(r);
    }
    for (int k = 0; k < 200; k++) { /* flip bytes of the real file */
        char *copy = malloc(base_len);
        memcpy(copy, base, base_len);
        for (int f = 0; f < 4; f++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            copy[(s >> 33) % base_len] = (char)(s >> 20);
        }
        tlm_tokenizer *r = tlm_tokenizer_load_memory(copy, base_len, "mutated.bin");
        if (r) {
            int *ids;
            size_t n;
            if (tlm_tokenizer_encode(r, "Hello \xe5\xb9\xb4!", 10, 1, &ids, &n) == 0) {
                free(tlm_tokenizer_decode(r, ids, n));
                free(ids);
            }
        }
        tlm_tokenizer_free(r);
        free(copy);
    }
    free(base);
}

/* Split behaviours and Metaspace, on a tiny vocabulary where merges show the piece borders:
 * with merges "a -" and "- b", "a-b" encodes as the HF docs define each behaviour:
 * Isolated [a][-][b], MergedWithNext [a][-b], MergedWithPrevious [a-][b], Removed [a][b]. */
static void test_pretokenizers(void) {
    const char *behaviors[] = {"Isolated", "MergedWithNext", "MergedWithPrevious", "Removed"};
    /* ids: a 0, b 1, - 2, a- 3, -b 4 */
    const int want[][3] = {{0, 2, 1}, {0, 4, -1}, {3, 1, -1}, {0, 1, -1}};
    const size_t want_n[] = {3, 2, 2, 2};
    for (int k = 0; k < 4; k++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"-\": 2, \"a-\": 3, \"-b\": 4},"
                 " \"merges\": [\"a -\", \"- b\"]}, \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"String\": \"-\"},"
                 " \"behavior\": \"%s\", \"invert\": false}}", behaviors[k]);
        tlm_tokenizer *t = tlm_tokenizer_load_memory(json, strlen(json), "split.json");
        CHECK(t != NULL);
        if (!t) {
            fprintf(stderr, "  %s\n", tlm_last_error());
            continue;
        }
        if (!encode_eq(t, "a-b", 3, 0, want[k], want_n[k])) {
            fprintf(stderr, "  behavior %s\n", behaviors[k]);
            tt_failures++;
        }
        tlm_tokenizer_free(t);
    }
    /* Metaspace (prepend "first", split): "Hi Hi" -> "\u2581Hi" twice; the decoder drops the
     * leading space again. Vocabulary ids: \u2581 0, H 1, i 2, \u2581H 3, \u2581Hi 4. */
    const char *ms = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"\u2581\": 0, \"H\": 1, \"i\": 2, \"\u2581H\": 3,"
                     " \"\u2581Hi\": 4}, \"merges\": [\"\u2581 H\", \"\u2581H i\"]}, \"pre_tokenizer\": {\"type\":"
                     " \"Metaspace\", \"replacement\": \"\u2581\", \"prepend_scheme\": \"first\", \"split\": true},"
                     " \"decoder\": {\"type\": \"Metaspace\", \"replacement\": \"\u2581\", \"prepend_scheme\": \"first\"}}";
    tlm_tokenizer *t = tlm_tokenizer_load_memory(ms, strlen(ms), "metaspace.json");
    CHECK(t != NULL);
    if (t) {
        const int want_ms[] = {4, 4};
        CHECK(encode_eq(t, "Hi Hi", 5, 0, want_ms, 2));
        char *back = tlm_tokenizer_decode(t, want_ms, 2);
        CHECK(back && strcmp(back, "Hi Hi") == 0);
        free(back);
    }
    tlm_tokenizer_free(t);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(scratch, sizeof scratch, "%s/tlm-tok-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(scratch)) {
        perror("mkdtemp");
        return 2;
    }
    test_bytes();
    test_chars();
    test_llama2c();
    test_specials();
    test_pretokenizers();
    test_errors();
    nftw(scratch, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return tt_report("test_tokenizer_basic");
}
