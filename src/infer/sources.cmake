# Inference: choosing the next token (sampler.c), one generation step through a KV cache (step.c)
# and streaming generation (generate.c).
target_sources(tinylm_objects PRIVATE
  src/infer/sampler.c
  src/infer/step.c
  src/infer/generate.c)
