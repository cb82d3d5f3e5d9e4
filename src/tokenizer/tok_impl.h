/* Internals shared by tokenizer.c, spm.c and bpe.c. Not for use outside
 * src/tokenizer/. */
#ifndef VT_TOKENIZER_TOK_IMPL_H
#define VT_TOKENIZER_TOK_IMPL_H

#include "tokenizer/pretok.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Token attributes (llama.cpp's llama_token_attr bits). */
enum {
    TOK_ATTR_UNKNOWN = 1 << 0,
    TOK_ATTR_UNUSED = 1 << 1,
    TOK_ATTR_NORMAL = 1 << 2,
    TOK_ATTR_CONTROL = 1 << 3,
    TOK_ATTR_USER_DEFINED = 1 << 4,
    TOK_ATTR_BYTE = 1 << 5,
    TOK_ATTR_LSTRIP = 1 << 7,
    TOK_ATTR_RSTRIP = 1 << 8,
};

typedef enum tok_kind { TOK_KIND_SPM, TOK_KIND_BPE } tok_kind;

/* Interned strings: ids 0..n_vocab-1 are the token texts, ids past that are merge
 * halves and merge results that are not tokens. One hash table over all of them. */
typedef struct strtab {
    char *pool;        /* NUL-separated bytes */
    size_t pool_len, pool_cap;
    uint64_t *off;     /* (n) start of string i in pool */
    uint32_t *len;     /* (n) */
    int64_t n, cap;
    uint32_t *slot;    /* (mask+1) string id + 1, 0 = empty */
    uint64_t mask;
} strtab;

/* BPE merge ranks: (left id, right id) -> rank, open addressing. */
typedef struct merge_tab {
    uint64_t *key;     /* ((uint64)left << 32 | right) + 1, 0 = empty */
    int32_t *rank;
    uint64_t mask;
    int32_t *result;   /* (n_merges) string id of left+right */
    int64_t n_merges;
} merge_tab;

/* Special-token trie for splitting control/user-defined texts out of the input. */
typedef struct trie_node {
    int32_t child;   /* first child node, -1 none */
    int32_t sibling; /* next sibling, -1 none */
    int32_t special; /* index into specials[] ending here, -1 none */
    uint8_t byte;
} trie_node;

struct tokenizer {
    tok_kind kind;
    pretok_type pre;
    int32_t n_vocab;
    strtab str;
    float *score;      /* (n_vocab) */
    uint32_t *score_order; /* (n_vocab) float_order(score): SPM merge priority */
    uint32_t *attr;    /* (n_vocab) TOK_ATTR_* */
    merge_tab merges;

    /* pieces with render_special = true, precomputed like llama.cpp's cache */
    char *piece_pool;
    uint64_t *piece_off; /* (n_vocab + 1) */

    int32_t bos, eos, eot, eom, unk, sep, pad;
    bool add_bos, add_eos, add_space_prefix;
    bool byte_encode;       /* BPE: GPT-2 byte-to-unicode alphabet */
    bool escape_whitespace; /* spaces become U+2581 before tokenizing */
    bool ignore_merges;     /* BPE: a word that is a token is not merged */
    bool clean_spaces;      /* decode: clean_up_tokenization_spaces */
    bool gemma4;
    int32_t byte_token[256]; /* token of each byte for fallback, -1 none */
    bool spm_glue[256];      /* SPM: bytes that precede a U+2581 inside some token */

    uint8_t *is_eog;     /* (n_vocab) */

    int32_t *specials;   /* token ids in match priority: longer texts first */
    int32_t n_specials;
    trie_node *trie;
    int32_t n_trie;
};

/* Growable id list. */
typedef struct tok_ids {
    int32_t *v;
    int64_t n, cap;
    bool oom;
} tok_ids;

static inline void ids_push(tok_ids *o, int32_t id) {
    if (o->n == o->cap) {
        int64_t cap = o->cap ? o->cap * 2 : 64;
        int32_t *p = realloc(o->v, (size_t)cap * sizeof *p);
        if (!p) {
            o->oom = true;
            return;
        }
        o->v = p;
        o->cap = cap;
    }
    o->v[o->n++] = id;
}

/* Bytes of the character at s[off] as llama.cpp splits symbols, clipped at len. */
static inline size_t uni_len_utf8_clip(const char *s, size_t off, size_t len) {
    size_t n = uni_len_utf8((uint8_t)s[off]);
    return n < len - off ? n : len - off;
}

/* Id of string s[0..n) in the table, or -1. */
int64_t strtab_find(const strtab *t, const char *s, size_t n);

/* Token id of s[0..n), or -1. */
static inline int32_t tok_lookup(const tokenizer *t, const char *s, size_t n) {
    int64_t id = strtab_find(&t->str, s, n);
    return id >= 0 && id < t->n_vocab ? (int32_t)id : -1;
}

/* Rank of merging strings l and r (string ids), or -1. */
int32_t merge_rank(const merge_tab *m, int64_t l, int64_t r);

/* SPM (llama) tokenization of text[0..len), already space-escaped: appended to out. */
vt_status spm_encode(const tokenizer *t, const char *text, size_t len, tok_ids *out);

/* BPE tokenization of one raw fragment (after whitespace escaping if any). */
vt_status bpe_encode(const tokenizer *t, const char *text, size_t len, tok_ids *out);

/* ---- a 4-ary max-heap of bigrams, shared by SPM and BPE ---- */

typedef struct tok_bigram {
    uint64_t key;  /* priority << 32 | (UINT32_MAX - left): larger pops first */
    int32_t right;
    uint32_t size; /* bytes of left + right when queued; a changed size means stale */
} tok_bigram;

typedef struct tok_heap {
    tok_bigram *v;
    size_t n, cap;
} tok_heap;

/* The heap key of a pair: prio (larger first), ties to the smaller left index. */
static inline uint64_t bigram_key(uint32_t prio, int32_t left) {
    return ((uint64_t)prio << 32) | (UINT32_MAX - (uint32_t)left);
}
static inline int32_t bigram_left(const tok_bigram *b) { return (int32_t)(UINT32_MAX - (uint32_t)b->key); }

/* A float as an unsigned integer of the same order (-0 = +0). */
static inline uint32_t float_order(float f) {
    uint32_t u;
    if (f == 0.0f) f = 0.0f;
    memcpy(&u, &f, 4);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

bool heap_push(tok_heap *h, tok_bigram b);
tok_bigram heap_pop(tok_heap *h);

/* A symbol of the merge list: bytes [start, start+n) of the text. */
typedef struct tok_symbol {
    uint32_t start, n;
    int32_t prev, next;
    int64_t str; /* BPE: string id of the symbol's text, -1 if not interned */
} tok_symbol;

#endif
