# File formats: safetensors checkpoints, GGUF files, NumPy .npy arrays, tensor element types.
target_sources(tinylm_objects PRIVATE
  src/formats/dtype.c
  src/formats/gguf.c
  src/formats/npy.c
  src/formats/safetensors_read.c
  src/formats/safetensors_dir.c
  src/formats/safetensors_write.c)
