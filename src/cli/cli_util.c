#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "model/model.h"
#include "util/error.h"
#include "util/io.h"

int cli_fail(const char *cmd) {
    fprintf(stderr, "tinylm %s: %s\n", cmd, tlm_last_error());
    return 1;
}

int cli_parse_ids(const char *option, const char *text, int allow_empty, int **ids, size_t *n) {
    size_t cap = 16, k = 0;
    int *v = malloc(sizeof(int) * cap);
    if (!v) return tlm_error("out of memory");
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        /* one id: the text up to the next separator, all of it a number ("1e3" is not 1) */
        size_t len = strcspn(p, " ,\t\n");
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end != p + len || errno || x < -0x7fffffffL || x > 0x7fffffffL) {
            free(v);
            if (end == p + len && len) /* a number, too large for an id */
                return tlm_error("%s: %.*s%s is out of range for a token id (%d..%d)", option,
                                 len > 60 ? 60 : (int)len, p, len > 60 ? "..." : "", -0x7fffffff, 0x7fffffff);
            return tlm_error("%s: \"%.*s%s\" is not an integer", option, len > 60 ? 60 : (int)len, p,
                             len > 60 ? "..." : "");
        }
        if (k == cap) {
            int *nv = realloc(v, sizeof(int) * (cap *= 2));
            if (!nv) return free(v), tlm_error("out of memory");
            v = nv;
        }
        v[k++] = (int)x;
        p = end;
    }
    if (k == 0 && !allow_empty) {
        free(v);
        return tlm_error("%s: no token ids given", option);
    }
    *ids = v;
    *n = k;
    return 0;
}

int cli_check_dtype(const char *cmd, const char *dtype) {
    if (!strcmp(dtype, "auto") || !strcmp(dtype, "f32") || !strcmp(dtype, "bf16")) return CLI_CONTINUE;
    return cli_usage_error(cmd, "--dtype \"%s\" is not one of auto, f32, bf16", dtype);
}

int cli_apply_dtype(tlm_model *m, const char *dtype) {
    if (!strcmp(dtype, "f32")) return 0;
    if (!strcmp(dtype, "bf16") || (!strcmp(dtype, "auto") && m->file_stored16)) return model_weights_to_bf16(m);
    if (!strcmp(dtype, "auto")) return 0;
    return tlm_error("--dtype: \"%s\" is not one of auto, f32, bf16", dtype);
}

int cli_check_precision(const char *cmd, const char *precision, int auto_ok) {
    if (!strcmp(precision, "fp32") || !strcmp(precision, "bf16") || (auto_ok && !strcmp(precision, "auto")))
        return CLI_CONTINUE;
    return cli_usage_error(cmd, "--precision \"%s\" is not one of fp32, bf16%s", precision, auto_ok ? ", auto" : "");
}

int cli_apply_precision(tlm_model *m, const char *cmd, const char *precision) {
    if (!strcmp(precision, "auto")) /* (no bf16 path: model_set_mixed_bf16 leaves fp32 and says nothing) */
        return (m->stored16 || m->wq_mem) && model_set_mixed_bf16(m, 1, NULL) < 0 ? -1 : 0;
    if (strcmp(precision, "bf16")) return 0;
    const char *why = NULL;
    const int on = model_set_mixed_bf16(m, 1, &why);
    if (on < 0) return -1;
    if (!on) fprintf(stderr, "tinylm %s: --precision bf16: %s; computing in fp32\n", cmd, why);
    return 0;
}

char *cli_read_prompt_file(const char *path) {
    size_t len = 0;
    char *text = strcmp(path, "-") ? read_text_file(path, &len) : read_text_stream(stdin, "standard input", &len);
    if (!text) {
        if (!strcmp(path, "-")) tlm_error_prefix("--prompt-file - (standard input)");
        else tlm_error_prefix("--prompt-file");
        return NULL;
    }
    if (strlen(text) != len) {
        free(text);
        tlm_error("--prompt-file %s: the file holds a NUL byte (not text)", path);
        return NULL;
    }
    return text;
}
