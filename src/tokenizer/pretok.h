/* Pre-tokenizers of byte-level BPE vocabularies: split text into words before
 * merging, the way each model's tokenizer.json regex (as llama.cpp runs it) does.
 *
 * A pre-tokenizer is a list of steps applied in order; each step splits every
 * current piece into its matches and the gaps between them (both kept). The
 * patterns are matched by hand-written code over Unicode categories rather than a
 * regex engine, with llama.cpp's semantics: its custom splitters for the GPT-2,
 * Llama-3, Qwen2 and Qwen3.5 patterns, and ECMAScript leftmost-first matching
 * (std::regex over its category-collapsed text) for the others, o200k's among
 * them. */
#ifndef VT_TOKENIZER_PRETOK_H
#define VT_TOKENIZER_PRETOK_H

#include "base/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum pretok_type {
    PRETOK_DEFAULT,        /* BPE without tokenizer.ggml.pre (old conversions) */
    PRETOK_GPT2,           /* gpt-2, mpt, olmo, jais, phi-2, ... */
    PRETOK_LLAMA3,         /* llama-bpe (llama3), dbrx, smaug, chatglm4 */
    PRETOK_QWEN2,          /* qwen2, stablelm2, hunyuan, grok-2, ... */
    PRETOK_QWEN35,         /* qwen35: letters and marks together */
    PRETOK_DEEPSEEK_LLM,
    PRETOK_DEEPSEEK_CODER,
    PRETOK_FALCON,
    PRETOK_STARCODER,      /* starcoder, refact, command-r, smollm, ...: digits apart */
    PRETOK_NEWLINES,       /* gemma4: runs of '\n' and runs of anything else */
    PRETOK_GPT4O,          /* o200k: gpt-4o (gpt-oss), llama4, kanana2, talkie, minimax-m2 */
} pretok_type;

/* Growable list of word lengths, in codepoints. */
typedef struct pretok_words {
    uint32_t *len;
    size_t n, cap;
} pretok_words;

/* Split cps[0..n) into words; on success w holds the word lengths in order (they
 * sum to n). w is reset first and may be reused across calls; free w->len. */
vt_status pretok_split(pretok_type type, const uint32_t *cps, size_t n, pretok_words *w);

#endif
