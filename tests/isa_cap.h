/* isa_cap.h — for the tests that run a second time with TLM_ISA=avx2 (tests/ops, tests/model):
 * on a CPU whose widest kernels are AVX2 already, that run is the same as the uncapped one, so
 * it stops at once with ctest's skip code (its tests.cmake sets SKIP_RETURN_CODE 77) instead
 * of spending minutes (under ASan) to repeat it. */
#ifndef TLM_TEST_ISA_CAP_H
#define TLM_TEST_ISA_CAP_H

#include <stdio.h>
#include <stdlib.h>

#include "util/cpu.h"

#define ISA_CAP_SKIP 77

/* Call first in main: returns ISA_CAP_SKIP when TLM_ISA is set and changes nothing here. */
static inline int isa_cap_changes_nothing(const char *test) {
    if (!getenv("TLM_ISA") || tlm_cpu_isa() != tlm_cpu_isa_detected()) return 0;
    printf("%s: skipped: TLM_ISA=%s caps nothing on this CPU (its widest kernels are %s): the uncapped run "
           "is this run\n",
           test, getenv("TLM_ISA"), tlm_isa_name(tlm_cpu_isa_detected()));
    return 1;
}

#endif
