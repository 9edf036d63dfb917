/* test_safetensors_dir.c — tlm_st_open_dir: a single model.safetensors, sharded
 * checkpoints with model.safetensors.index.json, and every inconsistency between the
 * index and the shards (missing shard, tensor in two shards, wrong shard, unlisted
 * tensor, listed-but-absent tensor, unsafe shard names). */
#include "check.h"

#include "formats/safetensors.h"

#include <sys/stat.h>

static char dir[4200];

static void file_in(char *out, size_t size, const char *name) { snprintf(out, size, "%s/%s", dir, name); }

/* A shard holding the named 2-element F32 tensors; tensor k holds {base + k, -(base + k)}. */
static void shard(const char *file, int count, const char *const *names, float base) {
    float vals[8][2];
    tlm_st_entry e[8];
    for (int k = 0; k < count; k++) {
        vals[k][0] = base + (float)k, vals[k][1] = -(base + (float)k);
        e[k] = (tlm_st_entry){names[k], TLM_DT_F32, 1, {2}, vals[k]};
    }
    char p[4300];
    file_in(p, sizeof p, file);
    char meta[64];
    snprintf(meta, sizeof meta, "{\"shard\": \"%s\"}", file);
    CHECK(tlm_st_write(p, e, (size_t)count, meta) == 0);
}

static void index_json(const char *text) {
    char p[4300];
    file_in(p, sizeof p, "model.safetensors.index.json");
    test_write_file(p, text, strlen(text));
}

static void rm(const char *name) {
    char p[4300];
    file_in(p, sizeof p, name);
    remove(p);
}

int main(void) {
    snprintf(dir, sizeof dir, "%s", scratch_dir());
    char p[4300];
    float out[2];

    /* empty directory, not a directory, missing directory */
    CHECK_ERR(tlm_st_open_dir(dir) == NULL, dir, "neither model.safetensors nor model.safetensors.index.json");
    file_in(p, sizeof p, "plain");
    test_write_file(p, "x", 1);
    CHECK_ERR(tlm_st_open_dir(p) == NULL, "not a directory");
    file_in(p, sizeof p, "absent");
    CHECK_ERR(tlm_st_open_dir(p) == NULL, "cannot open checkpoint directory");
    rm("plain");

    /* sharded checkpoint */
    const char *s1[] = {"embed.weight", "layers.0.w"}, *s2[] = {"layers.1.w", "final_norm.weight"};
    shard("model-00001-of-00002.safetensors", 2, s1, 10);
    shard("model-00002-of-00002.safetensors", 2, s2, 20);
    const char *good = "{\"metadata\": {\"total_size\": 32}, \"weight_map\": {"
                       "\"embed.weight\": \"model-00001-of-00002.safetensors\","
                       "\"layers.0.w\": \"model-00001-of-00002.safetensors\","
                       "\"layers.1.w\": \"model-00002-of-00002.safetensors\","
                       "\"final_norm.weight\": \"model-00002-of-00002.safetensors\"}}";
    index_json(good);
    tlm_safetensors *st = tlm_st_open_dir(dir);
    CHECK(st != NULL);
    if (!st)
        fprintf(stderr, "%s\n", tlm_last_error());
    if (st) {
        CHECK(tlm_st_count(st) == 4);
        const tlm_st_tensor *t = tlm_st_find(st, "final_norm.weight");
        CHECK(t && strstr(t->file, "model-00002-of-00002.safetensors"));
        CHECK(tlm_st_read_f32(t, out, 2) == 0 && out[0] == 21.0f && out[1] == -21.0f);
        CHECK(tlm_st_read_f32(tlm_st_find(st, "layers.0.w"), out, 2) == 0 && out[0] == 11.0f);
        /* metadata: the first shard's value wins */
        CHECK(tlm_st_metadata(st, "shard") && strcmp(tlm_st_metadata(st, "shard"), "model-00001-of-00002.safetensors") == 0);
        int64_t shape[1] = {2};
        CHECK_ERR(tlm_st_load_f32(st, "lm_head.weight", 1, shape, out) != 0, dir, "no tensor named 'lm_head.weight'");
        tlm_st_close(st);
    }

    /* a listed shard is missing */
    rm("model-00002-of-00002.safetensors");
    CHECK_ERR(tlm_st_open_dir(dir) == NULL, "model.safetensors.index.json", "model-00002-of-00002.safetensors",
              "No such file");

    /* the same tensor in two shards */
    const char *s2dup[] = {"layers.1.w", "final_norm.weight", "embed.weight"};
    shard("model-00002-of-00002.safetensors", 3, s2dup, 20);
    CHECK_ERR(tlm_st_open_dir(dir) == NULL, "'embed.weight'", "two shards", "model-00001-of-00002.safetensors",
              "model-00002-of-00002.safetensors");

    /* a shard holds a tensor the index does not list */
    const char *s2extra[] = {"layers.1.w", "final_norm.weight", "extra.bias"};
    shard("model-00002-of-00002.safetensors", 3, s2extra, 20);
    CHECK_ERR(tlm_st_open_dir(dir) == NULL, "'extra.bias'", "does not list");

    /* the index lists a tensor no shard has */
    shard("model-00002-of-00002.safetensors", 1, s2, 20);
    CHECK_ERR(tlm_st_open_dir(dir) == NULL, "'final_norm.weight'", "no shard has it");

    /* the index puts a tensor in the wrong shard */
    shard("model-00002-of-00002.safetensors", 2, s2, 20);
    index_json("{\"weight_map\": {"
               "\"embed.weight\": \"model-00002-of-00002.safetensors\","
               "\"layers.0.w\": \"model-00001-of-00002.safetensors\","
               "\"layers.1.w\": \"model-00002-of-00002.safetensors\","
               "\"final_norm.weight\": \"model-00002-of-00002.safetensors\"}}");
    CHECK_ERR(tlm_st_open_dir(dir) == NULL, "'embed.weight'", "but it is in model-00001-of-00002.safetensors");

    /* a tensor listed twice in the weight map */
    index_json("{\"weight_map\": {"
               "\"embed.weight\": \"model-00001-of-00002.safetensors\","
               "\"embed.weight\": \"model-00001-of-00002.safetensors\","
               "\"layers.0.w\": \"model-00001-of-00002.safetensors\","
               "\"layers.1.w\": \"model-00002-of-00002.safetensors\","
               "\"final_norm.weight\": \"model-00002-of-00002.safetensors\"}}");
    CHECK_ERR(tlm_st_open_dir(dir) == NULL, "'embed.weight'", "twice");

    /* unsafe or ill-typed shard names, bad index structure */
    index_json("{\"weight_map\": {\"embed.weight\": \"../model-00001-of-00002.safetensors\"}}");
    CHECK_ERR(tlm_st_open_dir(dir) == NULL, "not a file name in the directory");
    index_json("{\"weight_map\": {\"embed.weight\": 3}}");
    CHECK_ERR(tlm_st_open_dir(dir) == NULL, "'embed.weight'", "must be a shard file name");
    index_json("{\"weight_map\": {}}");
    CHECK_ERR(tlm_st_open_dir(dir) == NULL, "'weight_map' must be a non-empty object");
    index_json("{\"metadata\": {}}");
    CHECK_ERR(tlm_st_open_dir(dir) == NULL, "model.safetensors.index.json", "missing field 'weight_map'");
    index_json("{\"weight_map\": ");
    CHECK_ERR(tlm_st_open_dir(dir) == NULL, "model.safetensors.index.json", "not a JSON object");

    /* the good index works again; then a single model.safetensors takes precedence */
    index_json(good);
    st = tlm_st_open_dir(dir);
    CHECK(st && tlm_st_count(st) == 4);
    tlm_st_close(st);
    const char *single[] = {"only"};
    shard("model.safetensors", 1, single, 5);
    st = tlm_st_open_dir(dir);
    CHECK(st && tlm_st_count(st) == 1 && tlm_st_read_f32(tlm_st_find(st, "only"), out, 2) == 0 && out[0] == 5.0f);
    tlm_st_close(st);

    scratch_remove(dir);
    return check_report("test_safetensors_dir");
}
