# Inference: choosing the next token (sampler.c) and streaming generation with a KV cache (generate.c).
target_sources(tinylm_objects PRIVATE
  src/infer/sampler.c
  src/infer/generate.c)
