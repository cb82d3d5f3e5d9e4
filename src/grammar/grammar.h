/* Grammar-constrained sampling: llama.cpp's GBNF, compiled to a byte-level
 * grammar, and a matcher that says which tokens of a vocabulary may come next.
 *
 * GBNF (llama.cpp's grammars/README.md): rules `name ::= alternatives`, one per
 * line (a newline inside parentheses, or after `|` or `::=`, continues it), `#`
 * comments; alternatives are `|`-separated sequences of
 *   "literal"      with escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH
 *   [a-z0-9_]      a character class: ranges, singles, [^...] negation, escapes
 *   .              any character
 *   name           a rule reference
 *   ( ... )        a group
 *   <[id]>         the token with that id, whole
 *   <text>         the one token the text <text> is (special tokens included:
 *                  <|im_end|>, <think>), resolved through grammar_tokens
 *   !<[id]> !<text> any one token but that one
 * each optionally followed by `*`, `+`, `?`, `{m}`, `{m,}` or `{m,n}`. `root` is
 * the start rule.
 *
 * Token references are llama.cpp's (llama-grammar.cpp): they match whole tokens
 * by id, where a token starts (a token's bytes never pass through one, and no
 * text matches one), so `<think>` is the special token and not its text.
 * Neither kind ever admits an end-of-generation token (those come only when
 * the grammar is complete); the negation admits every other token, control
 * tokens with no text included.
 *
 * Compiled form: characters are code points in the text but the matcher works on
 * bytes, the bytes tokens are made of (a token may end inside a UTF-8 sequence):
 * every character class becomes UTF-8 byte sequences of byte ranges (the classic
 * range-to-UTF-8 split; surrogates excluded), so one terminal is a set of bytes.
 * Repetitions are rewritten as llama.cpp does (x* -> r ::= x r | ; x{m,n} -> m
 * copies then n-m nested optionals), right-recursive, so a long repetition does
 * not grow the parse stack.
 *
 * Matching: the state is a set of parse stacks (llama.cpp's), each a persistent
 * linked list of positions in the compiled rules whose top is a terminal; an
 * empty stack means the grammar is complete. A byte advances every stack whose
 * top admits it; rule references on top are expanded into their alternatives.
 * Identical stacks are merged (by a 64-bit hash of the whole stack).
 *
 * States: every stack set met is interned (by a hash of its stacks) as a state
 * of a lazily built DFA kept with the grammar, with its byte transitions, so a
 * byte costs one table lookup once seen, for every matcher of the grammar.
 *
 * Masking: the vocabulary's token bytes form a trie (grammar_vocab, built once
 * per model). The allowed tokens are found by walking the trie depth first
 * through the DFA, dropping a whole subtree as soon as its prefix is dead, so a
 * step costs the viable prefixes, not the vocabulary. A state's mask is cached
 * (GRAMMAR_MASK_CACHE of them, least recently used out): inside a JSON string
 * or a number every step is the same state and costs one lookup.
 * End-of-generation tokens are allowed only when a stack is empty (the grammar
 * accepts); tokens with no bytes (control tokens) only by a token reference.
 * A stack whose top is a token reference is a terminal that no byte advances;
 * a state holding one adds its tokens to the mask, and accepting a token runs
 * both ways (the bytes through the other stacks, the id through these).
 *
 * Limits against hostile grammars (each a VT_E_INVALID naming the problem):
 * text GRAMMAR_MAX_TEXT bytes, GRAMMAR_MAX_RULES rules, GRAMMAR_MAX_ELEMS
 * compiled elements, GRAMMAR_MAX_NEST parenthesis depth, repetition counts up to
 * GRAMMAR_MAX_REPEAT, no left recursion (it would expand forever); while
 * matching, GRAMMAR_MAX_STACKS stacks in a state (an ambiguous grammar) and
 * GRAMMAR_MAX_NODES stack nodes and GRAMMAR_MAX_STATES states per grammar
 * (each a VT_E_RANGE error of the request).
 *
 * Threads: a grammar and its matchers are used from one thread at a time (the
 * state cache is the grammar's); grammar_parse and separate grammars are free. */
#ifndef VT_GRAMMAR_GRAMMAR_H
#define VT_GRAMMAR_GRAMMAR_H

#include "vt.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GRAMMAR_MAX_TEXT ((size_t)1 << 20)
#define GRAMMAR_MAX_RULES 8192
#define GRAMMAR_MAX_ELEMS (1 << 20)
#define GRAMMAR_MAX_NEST 64
#define GRAMMAR_MAX_REPEAT 2000
#define GRAMMAR_MAX_STACKS 256
#define GRAMMAR_MAX_NODES (1 << 24)
#define GRAMMAR_MAX_STATES (1 << 20)
#define GRAMMAR_MASK_CACHE 256

typedef struct grammar grammar;

/* How grammar_parse_tokens resolves token references. */
typedef struct grammar_tokens {
    int32_t n_vocab; /* <[id]> must be below it (0: unchecked) */
    /* The id of the single token that text s[0..n) encodes to (special tokens
     * recognised), or -1. NULL: <text> references are refused. */
    int32_t (*find)(void *ud, const char *s, size_t n);
    void *ud;
} grammar_tokens;

/* Parse and compile GBNF text of len bytes, starting at rule `root` (NULL:
 * "root"). VT_E_INVALID with "grammar: line L, column C: ..." on a syntax error,
 * or naming the undefined / left-recursive rule. The grammar is immutable and
 * may be shared between threads. grammar_parse knows no vocabulary: <[id]> is
 * taken as it is and <text> refused; grammar_parse_tokens resolves them with
 * tokens (NULL: as grammar_parse). */
vt_status grammar_parse(const char *text, size_t len, const char *root, grammar **out);
vt_status grammar_parse_tokens(const char *text, size_t len, const char *root, const grammar_tokens *tokens,
                               grammar **out);
void grammar_free(grammar *g);
int32_t grammar_n_rules(const grammar *g);

/* The bytes of each token of a vocabulary in a trie. */
typedef struct grammar_vocab grammar_vocab;

/* n_vocab tokens: token i is bytes[off[i] .. off[i + 1]); eog[i] marks an
 * end-of-generation token (its bytes are ignored). strip_first_space: the
 * first generated token loses one leading space (SentencePiece detokenizing). */
vt_status grammar_vocab_create(int32_t n_vocab, const char *bytes, const int64_t *off, const bool *eog,
                               bool strip_first_space, grammar_vocab **out);
void grammar_vocab_free(grammar_vocab *v);

typedef struct grammar_matcher grammar_matcher;

/* A matcher at the start of g over vocabulary v (both must outlive it; v may be
 * NULL for byte matching only). Matchers of one grammar share its state cache,
 * which must be for one vocabulary: v must be the same for all of them. */
vt_status grammar_matcher_create(const grammar *g, const grammar_vocab *v, grammar_matcher **out);
void grammar_matcher_free(grammar_matcher *m);
/* The tokens allowed next: *bits (n_vocab bits, bit i of word i / 32), valid
 * until the next call on m; *n_allowed their count (0: nothing can continue,
 * which a grammar over a vocabulary that lacks a needed byte can reach).
 * VT_E_RANGE past the matching limits. */
vt_status grammar_matcher_mask(grammar_matcher *m, const uint32_t **bits, int32_t *n_allowed);
/* Advance by one token (that the mask allowed). VT_E_INVALID if the grammar
 * does not admit it; VT_E_RANGE if taking it passes a matching limit (the
 * mask of a state with token references walks the token's bytes and its id
 * apart, and accepting unites both sets of stacks); m is then unchanged. */
vt_status grammar_matcher_accept(grammar_matcher *m, int32_t token);
/* Advance by raw bytes (tests, and validating a text). */
vt_status grammar_matcher_accept_bytes(grammar_matcher *m, const char *s, size_t n);
/* The text so far is a complete sentence of the grammar. */
bool grammar_matcher_accepting(const grammar_matcher *m);
/* Nothing can follow: the grammar is complete and admits no more bytes. */
bool grammar_matcher_done(const grammar_matcher *m);

/* The grammar's state cache has passed a quarter of its limits: a long-lived
 * user (the engine) should compile a fresh one for new matchers. */
bool grammar_cache_large(const grammar *g);

/* Whole text in the grammar's language (a fresh matcher, no vocabulary). */
bool grammar_accepts(const grammar *g, const char *s, size_t n);

#endif
