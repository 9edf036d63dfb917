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
/* The matrix and dot-product units, as the hardware and the OS report them (never capped by
 * TLM_ISA: for reports and tests; dispatch asks the tlm_cpu_has_* functions). */
typedef struct {
    int amx_tile, amx_bf16, amx_int8; /* cpuid leaf 7 subleaf 0, EDX bits 24, 22, 25 */
    int amx_os;        /* the OS enables the tile state: XCR0 bits 17 (XTILECFG) and 18 (XTILEDATA) */
    int amx_permitted; /* Linux granted this process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM,
                        * checked with ARCH_GET_XCOMP_PERM); always 0 elsewhere */
    int amx_perm_errno; /* why the request failed (0: granted, or never asked: no tile state) */
    int avx512_bf16;   /* cpuid leaf 7 subleaf 1, EAX bit 5 (vdpbf16ps), and the OS saves the zmm state */
    int avx512_vnni;   /* cpuid leaf 7 subleaf 0, ECX bit 11 (vpdpbusd), likewise */
} tlm_cpu_features;
/* Filled once (the first call asks the kernel for the tile data permission, which is per
 * process and inherited by children; oneDNN makes the same request before its AMX kernels). */
const tlm_cpu_features *tlm_cpu_features_get(void);
/* AMX-BF16 / AMX-INT8 usable by this process: the units present, the tile state enabled and
 * permitted; 0 when TLM_ISA caps the kernels below AVX-512 (as tlm_cpu_has_avx512bf16) */
int tlm_cpu_has_amx_bf16(void);
int tlm_cpu_has_amx_int8(void);
/* AVX512-VNNI present (0 when TLM_ISA caps below AVX-512) */
int tlm_cpu_has_avx512vnni(void);
/* AVX-VNNI (the VEX vpdpbusd on 256 bits: cpuid leaf 7 subleaf 1, EAX bit 4) present (0 when
 * TLM_ISA caps below AVX2) */
int tlm_cpu_has_avxvnni(void);
/* "AMD EPYC 9R45 ..." from cpuid's brand string (for reports only; never for dispatch) */
const char *tlm_cpu_brand(void);

#endif
