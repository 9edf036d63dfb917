target_sources(tinylm PRIVATE src/util/error.c)
target_sources(tinylm PRIVATE src/util/atomic_file.c)
target_sources(tinylm PRIVATE src/util/io.c)
target_sources(tinylm PRIVATE src/util/rng.c)
