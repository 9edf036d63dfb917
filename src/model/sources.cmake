target_sources(tinylm_objects PRIVATE
  src/model/config.c
  src/model/params.c
  src/model/precision.c
  src/model/model.c
  src/model/context.c
  src/model/layout.c
  src/model/rope_tables.c
  src/model/sublayers.c
  src/model/moe.c
  src/model/mla.c
  src/model/pass.c
  src/model/split.c
  src/model/points.c
  src/formats/llama2c.c
  src/model/hooks.c
  src/model/hook_points.c
  src/model/decode.c)
