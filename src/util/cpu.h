/* cpu.h — what the processor can do, read from cpuid once (never from a model-number table),
 * and the one place that names the instruction set the kernels run. */
#ifndef TLM_CPU_H
#define TLM_CPU_H

typedef enum { TLM_ISA_SCALAR, TLM_ISA_AVX2, TLM_ISA_AVX512 } tlm_isa;

/* The widest kernel set this CPU runs: AVX-512 (F + BW + VL), AVX2 + FMA, or scalar C.
 * TLM_ISA=avx2|scalar in the environment caps it (for testing every path on one machine). */
tlm_isa tlm_cpu_isa(void);
/* The widest set the CPU has, whatever TLM_ISA says (tests: whether a cap changes anything). */
tlm_isa tlm_cpu_isa_detected(void);
const char *tlm_isa_name(tlm_isa isa);
/* AVX512-BF16 (vdpbf16ps) present */
int tlm_cpu_has_avx512bf16(void);
/* "AMD EPYC 9R45 ..." from cpuid's brand string (for reports only; never for dispatch) */
const char *tlm_cpu_brand(void);

#endif
