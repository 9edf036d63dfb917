/* tokenizer.h — text <-> token ids for tinylm (internal API used by the rest of the engine).
 *
 * Kinds (src/tokenizer/README.md gives the exact semantics of each):
 *   - bytes: vocab 256, id = byte value (training);
 *   - chars: vocab = the distinct Unicode code points of a corpus, sorted by code point
 *     (training; text must be valid UTF-8);
 *   - llama2.c tokenizer.bin: SentencePiece-style scores, encode/decode exactly as llama2.c run.c;
 *   - Hugging Face tokenizer.json with a BPE model (byte-level like GPT-2/Qwen/Llama 3, or
 *     SentencePiece-style with byte fallback like Mistral/Llama 2);
 *   - GPT-2 encoder.json + vocab.bpe (a directory holding both);
 *   - the engine's own file (bytes/chars tokenizers saved in a checkpoint).
 *
 * Every fallible function returns -1 or NULL and sets tlm_error() (src/util/error.h). */
#ifndef TLM_TOKENIZER_H
#define TLM_TOKENIZER_H

#include <stddef.h>

typedef struct tlm_tokenizer tlm_tokenizer;

/* File name the engine uses for its own tokenizer file inside a model/checkpoint directory
 * (tlm_tokenizer_load on a directory finds it). */
#define TLM_TOKENIZER_OWN_FILE "tinylm_tokenizer.json"

tlm_tokenizer *tlm_tokenizer_bytes(void);
/* Vocab = the distinct code points of `text` (valid UTF-8, not empty), sorted ascending. */
tlm_tokenizer *tlm_tokenizer_chars(const char *text, size_t len);

/* `path` is a file (tokenizer.json, tokenizer.bin, the engine's own file, or encoder.json with
 * vocab.bpe beside it) or a directory holding one of: tokenizer.json, tinylm_tokenizer.json,
 * tokenizer.bin, encoder.json + vocab.bpe (probed in that order). For tokenizer.json, a
 * tokenizer_config.json in the same directory supplies bos/eos and add_bos_token. */
tlm_tokenizer *tlm_tokenizer_load(const char *path);
/* The file tlm_tokenizer_load(path) reads: path itself, or for a directory the first of the
 * candidates above that exists (malloc'd). NULL + tlm_error when there is none. */
char *tlm_tokenizer_locate(const char *path);
/* The same from bytes in memory (no tokenizer_config.json, no GPT-2 pair); `name` is used in
 * error messages. Formats: JSON (tokenizer.json or the engine's own) or llama2.c .bin. */
/* The tokenizer held in a GGUF file's metadata (tokenizer.ggml.*: SentencePiece "llama" or BPE
 * "gpt2"; tok_gguf.c). */
tlm_tokenizer *tlm_tokenizer_load_gguf(const char *path);
/* Writes the tokenizer as tokenizer.ggml.* metadata: SentencePiece-style vocabularies (llama2.c's, a
 * GGUF's, the training tokenizers) as model "llama", byte-level BPE (a tokenizer.json's, GPT-2's) as
 * "gpt2" with its pre-tokenizer's name (gpt-2, llama-bpe, qwen2; another is refused). The _padded form
 * lists n_vocab tokens (llama.cpp takes the token count as the model's vocabulary): ids past the
 * tokenizer's are "[PAD<id>]", type UNUSED, as llama.cpp's converter pads. -1 + tlm_error. */
struct tlm_gguf_writer;
int tlm_tokenizer_to_gguf(const tlm_tokenizer *t, struct tlm_gguf_writer *w);
int tlm_tokenizer_to_gguf_padded(const tlm_tokenizer *t, struct tlm_gguf_writer *w, int n_vocab);
tlm_tokenizer *tlm_tokenizer_load_memory(const void *data, size_t len, const char *name);

/* Saves a bytes or chars tokenizer in the engine's own format (JSON), atomically
 * (temp file in the same directory, fsync, rename). Other kinds: -1 (they are loaded from
 * their original files). */
int tlm_tokenizer_save(const tlm_tokenizer *t, const char *path);
void tlm_tokenizer_free(tlm_tokenizer *t);

int tlm_tokenizer_vocab_size(const tlm_tokenizer *t);

/* Encodes `len` bytes of text into *ids (malloc'd, caller frees; *n_ids may be 0 with a
 * non-NULL pointer). With add_bos, prepends tlm_tokenizer_bos(t) when it is >= 0.
 * Never adds EOS. */
int tlm_tokenizer_encode(const tlm_tokenizer *t, const char *text, size_t len, int add_bos,
                         int **ids, size_t *n_ids);

/* Decodes ids to malloc'd NUL-terminated text: the concatenation of
 * tlm_tokenizer_piece(prev, id) over the ids, starting with prev = -1, and skipping the BOS and
 * EOS ids (they mark sequence boundaries, they are not text). NULL for an id out of range.
 * decode_len also stores the length in *out_len when it is not NULL (the text may hold NUL
 * bytes, e.g. from <0x00>). */
char *tlm_tokenizer_decode(const tlm_tokenizer *t, const int *ids, size_t n);
char *tlm_tokenizer_decode_len(const tlm_tokenizer *t, const int *ids, size_t n, size_t *out_len);

/* Streaming: the bytes that token `id` adds to the text when it follows token `prev`
 * (prev = -1 at the start of the text). For llama2.c .bin files this is run.c's decode():
 * a leading space is dropped after BOS (and at the start), and <0xNN> gives the raw byte.
 * SentencePiece-style tokenizer.json decoders likewise drop one leading space at the start /
 * after BOS. The pointer stays valid until tlm_tokenizer_free. NULL (and *len = 0) when id is
 * out of range. Pieces may be partial UTF-8 sequences. */
const char *tlm_tokenizer_piece(const tlm_tokenizer *t, int prev, int id, size_t *len);

/* The id that encode(add_bos=1) prepends, or -1 when this tokenizer adds none. */
int tlm_tokenizer_bos(const tlm_tokenizer *t);
/* The end-of-sequence id (where generation should stop), or -1 when none is known. */
int tlm_tokenizer_eos(const tlm_tokenizer *t);

/* Short name of the kind: "bytes", "chars", "llama2c", "hf-bpe", "gpt2". */
const char *tlm_tokenizer_kind(const tlm_tokenizer *t);

#endif
