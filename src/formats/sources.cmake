# File formats: safetensors checkpoints, GGUF files, NumPy .npy arrays and .npz archives (zlib for
# the deflated members of np.savez_compressed), tensor element types.
target_sources(tinylm_objects PRIVATE
  src/formats/dtype.c
  src/formats/gguf.c
  src/formats/npy.c
  src/formats/npz.c
  src/formats/safetensors_read.c
  src/formats/safetensors_dir.c
  src/formats/safetensors_write.c)
