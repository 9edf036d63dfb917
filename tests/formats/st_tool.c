/* st_tool.c — test helper driven by test_formats.py (not a test by itself):
 *
 *   st_tool dump PATH OUTDIR
 *       PATH is a .safetensors file or a checkpoint directory. Writes OUTDIR/list.txt
 *       (one line per tensor: name TAB dtype TAB comma-separated shape), OUTDIR/meta.txt
 *       (key TAB value) and OUTDIR/<i>.npy for tensor i: float32 for F32/F16/BF16
 *       (via tlm_st_read_f32), int32 for I32.
 *   st_tool pack OUT.safetensors [--meta JSON] NAME:DTYPE:FILE.npy ...
 *       Reads each .npy (float32 for F32/BF16/F16, int32 for I32), converts to DTYPE
 *       and writes one safetensors file in the given order. */
#include "formats/npy.h"
#include "formats/safetensors.h"
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int fail(void) {
    fprintf(stderr, "st_tool: %s\n", tlm_last_error());
    return 1;
}

static int dump(const char *path, const char *outdir) {
    struct stat sb;
    tlm_safetensors *st = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) ? tlm_st_open_dir(path) : tlm_st_open(path);
    if (!st)
        return fail();
    char p[4096];
    snprintf(p, sizeof p, "%s/list.txt", outdir);
    FILE *list = fopen(p, "w");
    snprintf(p, sizeof p, "%s/meta.txt", outdir);
    FILE *meta = fopen(p, "w");
    int rc = list && meta ? 0 : 1;
    for (size_t i = 0; i < tlm_st_count(st) && rc == 0; i++) {
        const tlm_st_tensor *t = tlm_st_at(st, i);
        fprintf(list, "%s\t%s\t", t->name, tlm_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++)
            fprintf(list, d ? ",%lld" : "%lld", (long long)t->shape[d]);
        fprintf(list, "\n");
        snprintf(p, sizeof p, "%s/%zu.npy", outdir, i);
        if (tlm_dtype_is_float_weight(t->dtype)) {
            float *x = malloc((t->numel ? t->numel : 1) * sizeof *x);
            if (tlm_st_read_f32(t, x, t->numel) != 0 || tlm_npy_write_f32(p, t->ndim, t->shape, x) != 0)
                rc = fail();
            free(x);
        } else if (t->dtype == TLM_DT_I32) {
            int32_t *x = malloc(t->nbytes ? t->nbytes : 1);
            if (t->nbytes)
                memcpy(x, t->data, t->nbytes);
            if (tlm_npy_write_i32(p, t->ndim, t->shape, x) != 0)
                rc = fail();
            free(x);
        }
    }
    for (size_t i = 0; i < tlm_st_metadata_count(st) && rc == 0; i++) {
        const char *k, *v;
        tlm_st_metadata_at(st, i, &k, &v);
        fprintf(meta, "%s\t%s\n", k, v);
    }
    if (list)
        fclose(list);
    if (meta)
        fclose(meta);
    tlm_st_close(st);
    return rc;
}

static int pack(const char *out, int argc, char **argv) {
    const char *meta = NULL;
    tlm_st_entry *e = calloc((size_t)argc + 1, sizeof *e);
    tlm_npy *arrays = calloc((size_t)argc + 1, sizeof *arrays);
    char **names = calloc((size_t)argc + 1, sizeof *names);
    size_t n = 0;
    int rc = 0;
    for (int i = 0; i < argc && rc == 0; i++) {
        if (strcmp(argv[i], "--meta") == 0 && i + 1 < argc) {
            meta = argv[++i];
            continue;
        }
        char *spec = argv[i];
        char *c1 = strchr(spec, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) {
            fprintf(stderr, "st_tool: bad spec %s (want NAME:DTYPE:FILE.npy)\n", spec);
            rc = 1;
            break;
        }
        names[n] = strndup(spec, (size_t)(c1 - spec));
        char dtname[32];
        snprintf(dtname, sizeof dtname, "%.*s", (int)(c2 - c1 - 1), c1 + 1);
        tlm_dtype dt;
        if (tlm_dtype_from_name(dtname, &dt) != 0) {
            fprintf(stderr, "st_tool: unknown dtype %s\n", dtname);
            rc = 1;
            n++;
            break;
        }
        tlm_npy *a = &arrays[n];
        if (tlm_npy_read_as(c2 + 1, dt == TLM_DT_I32 ? TLM_DT_I32 : TLM_DT_F32, a) != 0) {
            rc = fail();
            n++;
            break;
        }
        e[n] = (tlm_st_entry){names[n], dt, a->ndim, {0}, a->data};
        memcpy(e[n].shape, a->shape, sizeof a->shape);
        if (dt == TLM_DT_BF16 || dt == TLM_DT_F16) { /* convert in place: 2 bytes fit in 4 */
            uint16_t *h = malloc((a->numel ? a->numel : 1) * 2);
            if (dt == TLM_DT_BF16)
                tlm_f32_to_bf16_array(a->data, h, a->numel);
            else
                tlm_f32_to_f16_array(a->data, h, a->numel);
            memcpy(a->data, h, a->numel * 2);
            free(h);
        } else if (dt != TLM_DT_F32 && dt != TLM_DT_I32) {
            fprintf(stderr, "st_tool: pack supports F32, BF16, F16, I32\n");
            rc = 1;
        }
        n++;
    }
    if (rc == 0 && tlm_st_write(out, e, n, meta) != 0)
        rc = fail();
    for (size_t i = 0; i < n; i++) {
        tlm_npy_free(&arrays[i]);
        free(names[i]);
    }
    free(e);
    free(arrays);
    free(names);
    return rc;
}

int main(int argc, char **argv) {
    if (argc >= 4 && strcmp(argv[1], "dump") == 0)
        return dump(argv[2], argv[3]);
    if (argc >= 3 && strcmp(argv[1], "pack") == 0)
        return pack(argv[2], argc - 3, argv + 3);
    fprintf(stderr, "usage: st_tool dump PATH OUTDIR | st_tool pack OUT [--meta JSON] NAME:DTYPE:FILE.npy ...\n");
    return 2;
}
