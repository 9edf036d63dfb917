/* machine.h — what this machine can do, measured: the FMA peak of the widest kernel set and
 * the DRAM read bandwidth, each over all OpenMP threads. Used to report model FLOPs
 * utilisation and bandwidth use against this machine's own limits, not a datasheet's. */
#ifndef TLM_MACHINE_H
#define TLM_MACHINE_H

/* GFLOP/s of independent fused multiply-adds in registers (no memory traffic), best of a few
 * runs of about `seconds` each */
double tlm_measure_fma_gflops(double seconds);
/* GB/s of reading a buffer of `mib` MiB (far larger than the caches) with vector loads */
double tlm_measure_read_gbs(int mib);

#endif
