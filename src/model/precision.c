/* precision.c — mixed precision: the model's setting, the bf16 copy of its f32 weights that the
 * products read (product16), and a pass's answer (precision.h). */
#include "precision.h"

#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "util/error.h"
#include "util/hugepage.h"
#include "util/profile.h"

/* every linear layer's w16 (and the head's) pointed into the bf16 copy, or NULL when there is none */
static void bind_product16(tlm_model *m) {
    for (int l = 0; l < m->cfg.n_layers; l++) {
        layer_params *P = &m->p.layers[l];
        linear_params *all[] = {&P->q,           &P->k,         &P->v,           &P->o,           &P->qkv,
                                &P->gate,        &P->up,        &P->down,        &P->gate_up,     &P->router,
                                &P->expert_gate, &P->expert_up, &P->expert_down, &P->shared_gate, &P->shared_up,
                                &P->shared_down, &P->ple_gate,  &P->ple_proj,    &P->q_a,         &P->q_b,
                                &P->kv_a,        &P->kv_b};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            all[i]->w16 = m->product16 && all[i]->w ? m->product16 + (all[i]->w - m->param_mem) : NULL;
    }
    m->p.lm_head16 = m->product16 && m->p.lm_head ? m->product16 + (m->p.lm_head - m->param_mem) : NULL;
    linear_params *mp = &m->p.ple_model_proj;
    mp->w16 = m->product16 && mp->w ? m->product16 + (mp->w - m->param_mem) : NULL;
}

void model_weights_changed(tlm_model *m) {
    if (!m->product16) return;
    PROF_SCOPE("bf16_weight_copy");
    f32_to_bf16(m->product16, m->param_mem, m->n_params);
    bind_product16(m); /* (a rebinding of the f32 views, tlm_params_writable's, leaves w16 as it was) */
}

int model_set_mixed_bf16(tlm_model *m, int on, const char **why) {
    if (why) *why = NULL;
    if (!on) {
        m->product_bf16 = 0;
        if (!m->product16) return 0;
        free(m->product16), m->product16 = NULL;
        bind_product16(m);
        return 0;
    }
    if (gemm_bf16_path() == GEMM_BF16_NONE) {
        if (why)
            *why = !strncmp(gemm_backend_name(), "OpenBLAS", 8)
                       ? "this build's GEMM backend (OpenBLAS) has no bf16 products"
                       : "this CPU has neither AMX-BF16 nor AVX512-BF16 (or TLM_ISA caps the kernels below AVX-512)";
        return 0;
    }
    m->product_bf16 = 1;
    /* (bf16 weights: the products use them as they are; quantized ones are rounded to bf16 a tile at
     * a time, matmul_forward_quant: neither needs a copy) */
    if (m->stored16 || m->wq_mem) return 1;
    if (!m->product16) {
        m->product16 = malloc((m->n_params ? m->n_params : 1) * sizeof(uint16_t));
        if (!m->product16) {
            m->product_bf16 = 0;
            return tlm_error("out of memory for the bf16 copy of the weights (%zu values)", m->n_params);
        }
        tlm_advise_huge(m->product16, m->n_params * sizeof(uint16_t));
    }
    model_weights_changed(m);
    return 1;
}

int precision_pass_bf16(const tlm_model *m) { return m->product_bf16 && gemm_bf16_path() != GEMM_BF16_NONE; }
