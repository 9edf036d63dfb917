target_sources(tinylm_objects PRIVATE
  src/train/data.c
  src/train/optim.c
  src/train/run_dir.c
  src/train/presets.c
  src/train/trainer.c
  src/train/dist.c
  src/train/attn_log.c
  src/train/train_page.c)
