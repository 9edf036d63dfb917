target_sources(tinylm_objects PRIVATE
  src/model/config.c
  src/model/hf_families.c
  src/model/params.c
  src/model/model.c
  src/model/checkpoint.c
  src/model/hf_load.c
  src/model/hf_map.c
  src/model/hf_export.c
  src/formats/llama2c.c
  src/model/llama2c_load.c
  src/model/llama2c_export.c
  src/model/api.c
  src/model/hooks.c
  src/model/decode.c)
