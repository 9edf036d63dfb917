/* tinylm compare — two models of one architecture (any formats), or a model and an .npz of
 * reference activations, run on the same tokens and compared at every activation point; the
 * first point where they diverge, and the single convention change that makes them match
 * (src/probes/compare.h, docs/compare.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "formats/npz.h"
#include "convert/checkpoint.h"
#include "model/model.h"
#include "probes/compare.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/io.h"

static const char USAGE[] =
    "usage: tinylm compare A B [--tokens \"1,2,3\" | --prompt TEXT | --prompt-file FILE] [--tokenizer PATH]\n"
    "                      [--no-bos] [--tol X] [--json OUT.json] [--html OUT.html] [--no-diagnose]\n"
    "  A, B           models of one architecture in any format --model takes (a tinylm or Hugging Face\n"
    "                 directory, a training run, a llama2.c .bin, a GGUF file); or B an .npz of reference\n"
    "                 activations under TransformerLens hook names (+ \"logits\", \"tokens\"; docs/compare.md)\n"
    "  --tokens IDS   the token ids to run (else the .npz's \"tokens\", or the prompt)\n"
    "  --prompt, --prompt-file  text encoded with A's tokenizer (or --tokenizer), BOS first unless --no-bos\n"
    "  --tol X        a point diverges where max |Δ| / max |reference| exceeds X (default 1e-3; the\n"
    "                 reference is A, or B when it is an .npz)\n"
    "  --json, --html the report as JSON / as a page with the per-layer divergence\n"
    "  --no-diagnose  no convention search when they diverge (each change is one more pass)\n"
    "prints, per point in pass order, max |Δ|, max rel Δ and cosine; at the output KL(A || B) and top-1\n"
    "agreement; the first divergence; and which single convention change (RMSNorm w vs 1 + w, eps\n"
    "outside the sqrt, bf16 statistics, RoPE pairs vs halves, norm before vs after the sublayer, soft-caps,\n"
    "tied head, QK-norm per head vs over all heads) makes them match\n";

static int is_npz(const char *path) {
    const size_t n = strlen(path);
    return n > 4 && !strcmp(path + n - 4, ".npz");
}

/* the first read of the .npz: its "tokens" alone (flat integer ids, at most A's max_seq of them:
 * the header checked before the member is inflated); every other member is listed, not read */
typedef struct {
    const char *path;
    int max_seq;
} tokens_ask;

static int want_tokens(void *ctx, const char *key, const tlm_npy *h, const char *where) {
    (void)where;
    if (strcmp(key, "tokens")) return 0;
    const tokens_ask *ask = ctx;
    const int flat = h->ndim == 1 || (h->ndim == 2 && h->shape[0] == 1);
    if (h->dtype != TLM_DT_I32 || !flat || !h->numel)
        return tlm_error("%s: key 'tokens' must be integer token ids of shape [T] or [1, T]", ask->path);
    if (h->numel > (size_t)ask->max_seq)
        return tlm_error("%s: key 'tokens' holds %zu ids, more than A's max_position_embeddings %d", ask->path,
                         h->numel, ask->max_seq);
    return 1;
}

static void describe_model(char *buf, size_t cap, const tlm_model *m) {
    char types[96];
    snprintf(buf, cap, "%s, %d layers, d_model %d, matrices %s", m->cfg.model_type, m->cfg.n_layers, m->cfg.d_model,
             model_matrix_types(m, types, sizeof types));
}

/* the first divergence as an exact constant factor B = k A, and the conventions of the two configs that give
 * that factor at that point (the attention scale, the embedding scale, a norm's gain) */
static void explain_factor(cmp_report *rep, const cmp_run *ra, const cmp_run *rb, const cmp_point *p,
                           const tlm_model *a, const tlm_model *b) {
    double k;
    if (!cmp_constant_factor(ra, rb, p->name, &k)) return;
    char *o = rep->factor;
    const size_t cap = sizeof rep->factor;
    snprintf(o, cap, "at %s, B = %.6g x A exactly (every entry; cosine 1)", p->name, k);
    if (!b) {
        snprintf(o + strlen(o), cap - strlen(o), ": a scale the reference applies and A does not (the attention "
                 "scale, the embedding scale sqrt(hidden_size) = %g, a norm's gain)", sqrt((double)a->cfg.d_model));
        return;
    }
    const int l = p->layer >= 0 ? p->layer : 0;
    const double sa = config_attention_scale(&a->cfg, l), sb = config_attention_scale(&b->cfg, l);
    const double ea = a->cfg.embed_scale ? sqrt((double)a->cfg.d_model) : 1.0;
    const double eb = b->cfg.embed_scale ? sqrt((double)b->cfg.d_model) : 1.0;
    const int close_att = fabs(k - sb / sa) <= 1e-4 * fabs(k), close_emb = fabs(k - eb / ea) <= 1e-4 * fabs(k);
    if (strstr(p->name, "attn_scores") && close_att)
        snprintf(o + strlen(o), cap - strlen(o), ": the attention scale: B's %g over A's %g is %g (1/sqrt(head_dim) vs "
                 "1/sqrt(query_pre_attn_scalar) or 1)", sb, sa, sb / sa);
    else if (close_emb && eb != ea)
        snprintf(o + strlen(o), cap - strlen(o), ": the embedding scale: %s multiplies the token embedding by "
                 "sqrt(hidden_size) = %g and %s does not", eb > ea ? "B" : "A", eb > ea ? eb : ea, eb > ea ? "A" : "B");
    else
        snprintf(o + strlen(o), cap - strlen(o), ": a scale one side applies and the other does not (at a norm's "
                 "output: its gain, e.g. a constant w; the attention scale ratio of the configs is %g, the embedding "
                 "scale ratio %g)", sb / sa, eb / ea);
}

/* points one side has and the other lacks, read as causes */
static void explain_one_side(cmp_report *rep, const cmp_result *res) {
    static const struct {
        const char *suffix, *what;
    } KINDS[] = {{"attn.hook_q_normed", "a QK-norm (q and k normed before RoPE)"},
                 {"ln1_post.hook_scale", "a norm of the attention output (sandwich / output placement)"},
                 {"ln2_post.hook_scale", "a norm of the FFN output (sandwich / output placement)"},
                 {"ln_final.hook_scale", "a final norm before the head"},
                 {"mlp.hook_router_logits", "a mixture of experts"},
                 {"attn.hook_kv_a", "multi-head latent attention"}};
    for (int side = 0; side < 2; side++) {
        const int n = side ? res->n_only_b : res->n_only_a;
        for (size_t kind = 0; kind < sizeof KINDS / sizeof KINDS[0]; kind++)
            for (int i = 0; i < n; i++) {
                const char *name = side ? res->only_b[i] : res->only_a[i];
                const size_t ln = strlen(name), ls = strlen(KINDS[kind].suffix);
                if (ln < ls || strcmp(name + ln - ls, KINDS[kind].suffix) != 0) continue;
                char *o = rep->one_side;
                snprintf(o + strlen(o), sizeof rep->one_side - strlen(o), "%s%s computes %s (%s) that %s has not",
                         *o ? "; " : "", side ? "B" : "A", KINDS[kind].what, name, side ? "A" : "B");
                break;
            }
    }
}

/* the sizes that make two models one architecture */
static int same_sizes(const tlm_model *a, const tlm_model *b, const char *pa, const char *pb) {
    const tlm_config *x = &a->cfg, *y = &b->cfg;
    const struct {
        const char *key;
        int va, vb;
    } k[] = {{"vocab_size", x->vocab_size, y->vocab_size},
             {"hidden_size", x->d_model, y->d_model},
             {"num_hidden_layers", x->n_layers, y->n_layers},
             {"num_attention_heads", x->n_heads, y->n_heads},
             {"num_key_value_heads", x->n_kv_heads, y->n_kv_heads},
             {"head_dim", x->head_dim, y->head_dim},
             {"intermediate_size", x->d_ff, y->d_ff}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (k[i].va != k[i].vb)
            return tlm_error("A (%s) and B (%s) are different architectures: %s %d vs %d (compare needs one "
                             "architecture: the same sizes)",
                             pa, pb, k[i].key, k[i].va, k[i].vb);
    return 0;
}

int cmd_compare(int argc, char **argv) {
    const char *tokens_text = NULL, *prompt = NULL, *prompt_file = NULL, *tok_path = NULL, *json = NULL, *html = NULL;
    const char *args[2] = {NULL, NULL};
    double tol = 1e-3;
    int no_bos = 0, no_diagnose = 0;
    float tolf = 1e-3f;
    cli_opt opts[] = {
        {"--tokens", CLI_STR, &tokens_text, 0, 0, 0},   {"--prompt", CLI_STR, &prompt, 0, 0, 0},
        {"--prompt-file", CLI_STR, &prompt_file, 0, 0, 0}, {"--tokenizer", CLI_STR, &tok_path, 0, 0, 0},
        {"--tol", CLI_FLOAT, &tolf, 1e-12, 1e6, 0},    {"--json", CLI_STR, &json, 0, 0, 0},
        {"--html", CLI_STR, &html, 0, 0, 0},           {"--no-bos", CLI_FLAG, &no_bos, 0, 0, 0},
        {"--no-diagnose", CLI_FLAG, &no_diagnose, 0, 0, 0},
    };
    cli_command cmd = {"compare", USAGE, opts, sizeof opts / sizeof opts[0], 1, args, 2, 0, NULL};
    int prc = cli_parse(&cmd, argc, argv);
    if (prc != CLI_CONTINUE) return prc;
    if (cmd.n_args != 2) return cli_usage_error("compare", "give two models A and B (B may be an .npz)");
    if ((prc = cli_one_of(&cmd, 0, (const char *const[]){"--tokens", "--prompt", "--prompt-file", NULL}))) return prc;
    tol = tolf;
    const char *pa = args[0], *pb = args[1];
    const int b_file = is_npz(pb);
    if (is_npz(pa)) return cli_usage_error("compare", "an .npz of reference activations goes second: compare MODEL %s", pa);
    if ((json && tlm_output_check(json)) || (html && tlm_output_check(html))) return cli_fail("compare");
    if (json && html && !strcmp(json, html)) return cli_usage_error("compare", "--json and --html name one file");

    int rc = 1, *ids = NULL;
    size_t n_ids = 0;
    char *prompt_text = NULL, *config_a = NULL, *config_b = NULL;
    tlm_model *a = NULL, *b = NULL;
    tlm_npz z = {0};
    cmp_run ra = {0}, rb = {0};
    cmp_result res = {0};
    cmp_search search;
    int searched = 0;
    char(*missing)[CMP_NAME] = NULL, (*unknown)[CMP_NAME] = NULL;
    int n_missing = 0, n_unknown = 0;
    cmp_report rep;
    memset(&rep, 0, sizeof rep);

    if (tokens_text && cli_parse_ids("--tokens", tokens_text, 0, &ids, &n_ids)) {
        return cli_usage_error("compare", "%s", tlm_last_error());
    }
    if (prompt_file && !(prompt = prompt_text = cli_read_prompt_file(prompt_file))) goto done;
    if (prompt) {
        tlm_tokenizer *tok = tok_path ? tlm_tokenizer_load(tok_path) : model_load_tokenizer(pa);
        if (!tok) {
            tlm_error_prefix("no tokenizer for the prompt (give --tokens, or --tokenizer PATH)");
            goto done;
        }
        int erc = tlm_tokenizer_encode(tok, prompt, strlen(prompt), !no_bos, &ids, &n_ids);
        tlm_tokenizer_free(tok);
        if (erc) goto done;
        if (!n_ids) {
            tlm_error("the prompt encodes to no tokens");
            goto done;
        }
    }
    if (!(a = model_load_dir_mapped(pa, 0))) {
        tlm_error_prefix("A");
        goto done;
    }
    if (b_file) {
        tokens_ask ask = {pb, a->cfg.max_seq};
        if (tlm_npz_read_some(pb, want_tokens, &ask, &z)) goto done;
        const tlm_npy *t = tlm_npz_find(&z, "tokens");
        if (t) {
            const int flat = t->ndim == 1 || (t->ndim == 2 && t->shape[0] == 1);
            if (t->dtype != TLM_DT_I32 || !flat || !t->numel) {
                tlm_error("%s: key 'tokens' must be integer token ids of shape [T] or [1, T]", pb);
                goto done;
            }
            const int32_t *v = t->data;
            if (ids && (n_ids != t->numel || memcmp(ids, v, sizeof(int) * n_ids))) {
                tlm_error("%s: its 'tokens' differ from the tokens given (%zu ids vs %zu): give neither, or the same",
                          pb, t->numel, n_ids);
                goto done;
            }
            if (!ids) {
                if (!(ids = malloc(sizeof(int) * t->numel))) {
                    tlm_error("out of memory");
                    goto done;
                }
                for (size_t i = 0; i < t->numel; i++) ids[i] = v[i];
                n_ids = t->numel;
            }
        }
        snprintf(rep.b_desc, sizeof rep.b_desc, ".npz of reference activations, %d arrays", z.n);
    } else {
        if (!(b = model_load_dir_mapped(pb, 0))) {
            tlm_error_prefix("B");
            goto done;
        }
        if (same_sizes(a, b, pa, pb)) goto done;
        describe_model(rep.b_desc, sizeof rep.b_desc, b);
    }
    if (!ids) {
        rc = cli_usage_error("compare", "give the tokens: --tokens, --prompt or --prompt-file%s",
                             b_file ? " (the .npz has no \"tokens\")" : "");
        goto done;
    }
    describe_model(rep.a_desc, sizeof rep.a_desc, a);
    if (cmp_run_model(a, ids, (int)n_ids, 0, &ra)) {
        tlm_error_prefix("A (%s)", pa);
        goto done;
    }
    if (b_file) {
        /* the second read: the members that are points of A, each header checked against its point
         * before it is inflated */
        tlm_npz_free(&z);
        cmp_npz_ask ask = {&ra, pb};
        if (tlm_npz_read_some(pb, cmp_npz_want, &ask, &z) ||
            cmp_run_npz(&z, pb, &ra, a, &rb, &missing, &n_missing, &unknown, &n_unknown))
            goto done;
        if (!rb.n) {
            tlm_error("%s: no key names a point of A (expected TransformerLens names such as hook_embed, "
                      "blocks.0.hook_resid_pre, ..., and logits; see docs/compare.md)", pb);
            goto done;
        }
    } else if (cmp_run_model(b, ids, (int)n_ids, 0, &rb)) {
        tlm_error_prefix("B (%s)", pb);
        goto done;
    }
    if (cmp_compare(&ra, &rb, b_file, tol, &res)) goto done;
    if (res.first >= 0 && !no_diagnose) {
        if (cmp_search_conventions(b_file ? a : b, b_file ? NULL : a, b_file ? &rb : &ra, b_file, ids, (int)n_ids, tol,
                                   &search))
            goto done;
        searched = 1;
    }
    if (!b_file) {
        char ta[96], tb[96];
        model_matrix_types(a, ta, sizeof ta), model_matrix_types(b, tb, sizeof tb);
        if (strcmp(ta, tb) && res.first >= 0)
            snprintf(rep.note, sizeof rep.note,
                     "A's matrices are %s and B's %s: the rounding of the weights is a difference of its own, from the "
                     "embedding on (a larger --tol looks past it)", ta, tb);
    }
    if (!b_file) rep.config_a = config_a = config_to_json(&a->cfg), rep.config_b = config_b = config_to_json(&b->cfg);
    if (res.first >= 0) explain_factor(&rep, &ra, &rb, &res.p[res.first], a, b_file ? NULL : b);
    explain_one_side(&rep, &res);
    rep.a_path = pa, rep.b_path = pb, rep.b_is_file = b_file;
    rep.tokens = ids, rep.T = (int)n_ids, rep.res = &res, rep.search = searched ? &search : NULL;
    rep.missing = (const char(*)[CMP_NAME])missing, rep.n_missing = n_missing;
    rep.unknown = (const char(*)[CMP_NAME])unknown, rep.n_unknown = n_unknown;
    cmp_print(stdout, &rep);
    fflush(stdout);
    if (json && cmp_write_json(json, &rep)) goto done;
    if (html && cmp_write_html(html, &rep)) goto done;
    rc = 0;
done:
    if (rc == 1) cli_fail("compare");
    free(ids), free(prompt_text), free(missing), free(unknown), free(config_a), free(config_b);
    cmp_result_free(&res);
    cmp_run_free(&ra), cmp_run_free(&rb);
    tlm_npz_free(&z);
    model_free(a), model_free(b);
    return rc;
}
