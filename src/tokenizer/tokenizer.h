/* Tokenizers: SentencePiece-style (tokenizer.ggml.model "llama") and byte-level
 * BPE ("gpt2", and "gemma4"'s BPE over raw UTF-8), built from a GGUF's tokenizer.*
 * metadata, token-exact with llama.cpp (llama_tokenize / llama_detokenize at the
 * reference commit) on its tokenizer test vectors.
 *
 * Encoding follows llama.cpp: special-token texts are split out first (control
 * and unknown tokens only when parse_special; user-defined tokens always), then
 * each remaining text fragment is tokenized:
 *   SPM: a space is prefixed to a fragment at the start or after a special token
 *        (tokenizer.ggml.add_space_prefix, default true), spaces become U+2581,
 *        then the highest-scoring adjacent pair that forms a token is merged,
 *        leftmost first on ties; pieces that are no token fall back to <0xNN>.
 *   BPE: the model's pre-tokenizer splits the fragment into words (pretok.h), each
 *        word is byte-encoded and merged by merge rank.
 * Invalid UTF-8 never fails: BPE sees each bad byte as U+FFFD (llama.cpp does the
 * same), SPM falls back to the byte tokens.
 *
 * A tokenizer is immutable after tok_load, so one may be shared by threads. */
#ifndef VT_TOKENIZER_TOKENIZER_H
#define VT_TOKENIZER_TOKENIZER_H

#include "base/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tokenizer tokenizer;
typedef struct gguf_file gguf_file; /* gguf/gguf.h; not included so that this header
                                       goes along with ggml's own gguf.h */

/* Build from a parsed GGUF's tokenizer.* metadata (copies what it needs, the
 * gguf_file may be freed after). VT_E_UNSUPPORTED for other tokenizer models
 * ("bert", "t5", ...) and pre-tokenizers vt does not implement; VT_E_FORMAT for
 * missing or malformed keys. */
vt_status tok_load(const gguf_file *f, tokenizer **out);
/* Map, parse and load the tokenizer of the GGUF file at path. */
vt_status tok_load_file(const char *path, tokenizer **out);
void tok_free(tokenizer *t);

int32_t tok_n_vocab(const tokenizer *t);
int32_t tok_bos(const tokenizer *t); /* -1 if none */
int32_t tok_eos(const tokenizer *t); /* -1 if none */
/* From tokenizer.ggml.add_bos_token, or llama.cpp's default for the model
 * (SPM: true; BPE: true for llama3-style pre-tokenizers and gemma4, else false). */
bool tok_add_bos(const tokenizer *t);
bool tok_add_eos(const tokenizer *t);
/* tok_decode drops one leading space of the first token's piece (SPM's
 * add_space_prefix): what a grammar sees of the first generated token. */
bool tok_strips_first_space(const tokenizer *t);
/* End-of-generation tokens: eos, eot, <|im_end|>, <|eot_id|>, <end_of_turn>, ... */
bool tok_is_eog(const tokenizer *t, int32_t id);
/* Control (or unknown-type) token: tok_piece renders it only with render_special. */
bool tok_is_control(const tokenizer *t, int32_t id);

/* Encode len bytes of text. add_special: add BOS (and EOS) as the vocab says;
 * parse_special: recognise control token texts like <|im_start|> in the text.
 * *ids is malloc'd (NULL when *n_ids is 0); the caller frees it. */
vt_status tok_encode(const tokenizer *t, const char *text, size_t len, bool add_special,
                     bool parse_special, int32_t **ids, int64_t *n_ids);

/* The bytes of one token (byte tokens <0xNN> give that byte, SPM U+2581 a space,
 * byte-level BPE text its bytes); control tokens give "" unless render_special.
 * Writes min(size, cap) bytes, no NUL; returns the size (call again with a larger
 * buffer when it exceeds cap), or -1 for an invalid id. */
int64_t tok_piece(const tokenizer *t, int32_t id, bool render_special, char *buf, size_t cap);

/* Decode a sequence into a malloc'd NUL-terminated string, as llama.cpp's
 * common_detokenize (llama_detokenize with remove_special = false) does: SPM
 * drops one leading space of the first token's piece, BPE vocabs with
 * clean_up_tokenization_spaces remove " ." " ," " 's"-style spaces. VT_E_RANGE on
 * an invalid id. */
vt_status tok_decode(const tokenizer *t, const int32_t *ids, int64_t n, bool render_special,
                     char **out, size_t *out_len);

/* Id of a token text (exact bytes, NUL-terminated), or -1. */
int32_t tok_find(const tokenizer *t, const char *text);
/* Id of the special token (control, user-defined or unknown: the ones tok_encode
 * splits out of a text whole) whose text is exactly text, or -1: how a chat
 * format's marker such as <tool_call> is one token of the vocabulary. */
int32_t tok_special_id(const tokenizer *t, const char *text);
/* Raw vocab text of a token (NUL-terminated), NULL for an invalid id. */
const char *tok_text(const tokenizer *t, int32_t id);

/* Length of the longest prefix of s[0..n) that does not end inside a UTF-8
 * sequence: for streaming, emit that much and hold back the rest. A sequence that
 * can never complete (bad bytes) counts as complete, so nothing is held forever. */
size_t tok_utf8_complete_prefix(const char *s, size_t n);

#endif
