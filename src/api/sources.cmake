# The public C API (include/tinylm.h): a facade above everything it offers, the engine
# (src/model), the checkpoint formats (src/convert), generation (src/infer), the tokenizers and
# the report; nothing below includes it.
target_sources(tinylm_objects PRIVATE src/api/api.c)
