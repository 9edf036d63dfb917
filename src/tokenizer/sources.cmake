# Tokenizers: bytes/chars (training), llama2.c tokenizer.bin, HF tokenizer.json (BPE), GPT-2 encoder.json+vocab.bpe.
target_sources(tinylm_objects PRIVATE
  src/tokenizer/tokenizer.c
  src/tokenizer/tok_util.c
  src/tokenizer/tok_simple.c
  src/tokenizer/tok_llama2c.c
  src/tokenizer/tok_merge.c
  src/tokenizer/tok_pretok.c
  src/tokenizer/tok_hf.c
  src/tokenizer/tok_gpt2.c
  src/tokenizer/tok_gguf.c
  src/tokenizer/nfc.c
  src/tokenizer/nfc_tables.c
)
