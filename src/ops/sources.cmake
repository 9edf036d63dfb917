target_sources(tinylm_objects PRIVATE
  src/ops/matmul.c
  src/ops/gemm_bf16.c
  src/ops/amx.c
  src/ops/matvec.c
  src/ops/quant.c
  src/ops/quant_int.c
  src/ops/quant_gemm.c
  src/ops/norm.c
  src/ops/embedding.c
  src/ops/rope.c
  src/ops/attention.c
  src/ops/attention_tiles.c
  src/ops/activations.c
  src/ops/loss.c)
