/* case_io.h — the batches of a case folder of the PyTorch comparisons (tests/parity's
 * tlm_dump, tests/probes' probe_dump, tests/train's train_dump): CASE_DIR/tokens.npy and
 * targets.npy, int32 arrays of one shape with `ndim` dimensions ([B, T], or
 * [steps, accum, B, T]). */
#ifndef TLM_TESTS_CASE_IO_H
#define TLM_TESTS_CASE_IO_H

#include <stdio.h>
#include <string.h>

#include "formats/npy.h"
#include "util/error.h"

/* 0, or -1 + tlm_error; the caller frees tok and tgt (tlm_npy_free) either way. */
static inline int case_read_batches(const char *case_dir, int ndim, const char *shape_name, tlm_npy *tok,
                                    tlm_npy *tgt) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokens.npy", case_dir);
    if (tlm_npy_read_as(path, TLM_DT_I32, tok)) return -1;
    snprintf(path, sizeof path, "%s/targets.npy", case_dir);
    if (tlm_npy_read_as(path, TLM_DT_I32, tgt)) return -1;
    if (tok->ndim != ndim || tgt->ndim != ndim || memcmp(tok->shape, tgt->shape, (size_t)ndim * sizeof tok->shape[0]))
        return tlm_error("%s: tokens.npy and targets.npy must both be %s", case_dir, shape_name);
    return 0;
}

#endif
