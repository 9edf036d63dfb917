/* pcre2_use.h — includes PCRE2 with 8-bit code units, the only width the tokenizers use. */
#ifndef TLM_TOKENIZER_PCRE2_USE_H
#define TLM_TOKENIZER_PCRE2_USE_H
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif
