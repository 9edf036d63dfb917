# Checkpoint formats, read and written: the tinylm directory and the dispatch between formats
# (checkpoint.c), the family table (family.h: families.c, family_export.c), Hugging Face
# directories (hf_map.c, hf_load.c, hf_export.c), GGUF
# (gguf_load.c, gguf_export.c), llama2.c (llama2c_load.c, llama2c_export.c) and a config read
# aloud (explain.c). Above the engine (src/model): it builds engine models, never the reverse.
target_sources(tinylm_objects PRIVATE
  src/convert/families.c
  src/convert/family_export.c
  src/convert/explain.c
  src/convert/checkpoint.c
  src/convert/hf_load.c
  src/convert/hf_map.c
  src/convert/hf_export.c
  src/convert/llama2c_load.c
  src/convert/llama2c_export.c
  src/convert/gguf_load.c
  src/convert/gguf_export.c)
