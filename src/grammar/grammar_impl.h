/* The compiled grammar, shared by parse.c (GBNF text to it) and match.c (the
 * matcher over it). */
#ifndef VT_GRAMMAR_IMPL_H
#define VT_GRAMMAR_IMPL_H

#include "grammar/grammar.h"

#include <stdint.h>

/* A rule is its alternatives one after another, each a sequence of elements
 * ended by GE_ALT (another alternative follows) or GE_END (the last). */
enum { GE_END = 0, GE_ALT, GE_REF, GE_SET, GE_TOK, GE_TOK_NOT };

typedef struct gelem {
    uint8_t type;
    int32_t v; /* GE_REF: rule id; GE_SET: index into grammar.sets; GE_TOK, GE_TOK_NOT: token id */
} gelem;

typedef struct gset {
    uint32_t bits[8]; /* the bytes this terminal admits */
} gset;

struct grammar {
    gelem *el;           /* (n_el) every rule, one after another */
    int32_t n_el;
    int32_t *rule_start; /* (n_rules) first element of each rule */
    int32_t n_rules;
    gset *sets;          /* (n_sets) */
    int32_t n_sets;
    int32_t root;
    /* The parse states met so far, their byte transitions and token masks: a
     * lazily built DFA over the stack sets, shared by every matcher of this
     * grammar (match.c). Mutable: one thread at a time. */
    struct gcache *cache;
};

void gcache_free(struct gcache *c);

static inline bool gelem_is_end(const gelem *e) { return e->type == GE_END || e->type == GE_ALT; }
/* consumes input: a byte (GE_SET) or a token (GE_TOK, GE_TOK_NOT) */
static inline bool gelem_is_terminal(const gelem *e) { return e->type >= GE_SET; }
static inline bool gelem_is_token(const gelem *e) { return e->type == GE_TOK || e->type == GE_TOK_NOT; }
static inline bool gset_has(const gset *s, uint8_t b) { return (s->bits[b >> 5] >> (b & 31)) & 1; }

#endif
