/* The matcher (grammar.h): sets of persistent parse stacks advanced byte by
 * byte, interned as the states of a lazily built DFA kept with the grammar, and
 * the allowed-token mask found by a depth-first walk of the vocabulary's trie
 * through that DFA, cached by state. */
#include "grammar/grammar_impl.h"

#include "base/status.h"

#include <stdlib.h>
#include <string.h>

#define EXPAND_WORK (1 << 16) /* stack expansions allowed in one state change */
#define SEEN_BITS 10          /* dedupe table: 1024 slots > 2 * GRAMMAR_MAX_STACKS */
#define EMPTY_HASH 0x6a09e667f3bcc909ull

/* ---- the vocabulary trie ------------------------------------------------------------ */

typedef struct tnode {
    int32_t end;       /* one past this node's subtree (preorder) */
    int32_t tok_begin; /* tokens whose bytes end here: sorted[tok_begin .. +tok_n) */
    int32_t tok_n;
    uint8_t byte;      /* the byte leading here from the parent */
} tnode;

struct grammar_vocab {
    int32_t n_vocab;
    tnode *nodes;      /* (n_nodes) preorder; node 0 the root (empty prefix) */
    int32_t n_nodes;
    int32_t *sorted;   /* tokens with bytes, by bytes */
    int32_t *eog;      /* (n_eog) */
    int32_t n_eog;
    char *bytes;       /* copies of the token bytes */
    int64_t *off;      /* (n_vocab + 1) */
    bool *is_eog;      /* (n_vocab) */
    bool strip_first_space;
};

typedef struct sort_key {
    const char *s;
    int64_t n;
    int32_t id;
} sort_key;

static int cmp_key(const void *x, const void *y) {
    const sort_key *a = x, *b = y;
    const int64_t n = a->n < b->n ? a->n : b->n;
    const int c = n ? memcmp(a->s, b->s, (size_t)n) : 0;
    if (c) return c;
    if (a->n != b->n) return a->n < b->n ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Preorder trie over keys[lo, hi), which share their first `depth` bytes. */
static int32_t build_node(grammar_vocab *v, const sort_key *keys, int32_t lo, int32_t hi, int64_t depth,
                          uint8_t byte, int32_t *n_nodes) {
    const int32_t me = (*n_nodes)++;
    v->nodes[me] = (tnode){.tok_begin = lo, .byte = byte};
    int32_t i = lo;
    while (i < hi && keys[i].n == depth) i++;
    v->nodes[me].tok_n = i - lo;
    while (i < hi) {
        const uint8_t b = (uint8_t)keys[i].s[depth];
        int32_t j = i + 1;
        while (j < hi && (uint8_t)keys[j].s[depth] == b) j++;
        build_node(v, keys, i, j, depth + 1, b, n_nodes);
        i = j;
    }
    v->nodes[me].end = *n_nodes;
    return me;
}

vt_status grammar_vocab_create(int32_t n_vocab, const char *bytes, const int64_t *off, const bool *eog,
                               bool strip_first_space, grammar_vocab **out) {
    *out = NULL;
    if (n_vocab <= 0 || off[0] != 0) return vt_errorf(VT_E_INVALID, "grammar: empty vocabulary");
    grammar_vocab *v = calloc(1, sizeof *v);
    sort_key *keys = NULL;
    if (!v) goto nomem;
    v->n_vocab = n_vocab;
    v->strip_first_space = strip_first_space;
    const int64_t total = off[n_vocab];
    int64_t n_nodes_max = 1;
    v->bytes = malloc((size_t)total + 1);
    v->off = malloc(sizeof(int64_t) * ((size_t)n_vocab + 1));
    v->is_eog = calloc((size_t)n_vocab, 1);
    v->eog = malloc(sizeof(int32_t) * (size_t)n_vocab);
    v->sorted = malloc(sizeof(int32_t) * (size_t)n_vocab);
    keys = malloc(sizeof *keys * (size_t)n_vocab);
    if (!v->bytes || !v->off || !v->is_eog || !v->eog || !v->sorted || !keys) goto nomem;
    if (total) memcpy(v->bytes, bytes, (size_t)total);
    memcpy(v->off, off, sizeof(int64_t) * ((size_t)n_vocab + 1));
    int32_t n_keys = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        const int64_t n = off[i + 1] - off[i];
        if (eog && eog[i]) {
            v->is_eog[i] = true;
            v->eog[v->n_eog++] = i;
        } else if (n > 0) {
            keys[n_keys++] = (sort_key){.s = v->bytes + off[i], .n = n, .id = i};
            n_nodes_max += n;
        }
    }
    if (n_keys) qsort(keys, (size_t)n_keys, sizeof *keys, cmp_key);
    for (int32_t i = 0; i < n_keys; i++) v->sorted[i] = keys[i].id;
    if (n_nodes_max > INT32_MAX / 2) {
        free(keys);
        grammar_vocab_free(v);
        return vt_errorf(VT_E_RANGE, "grammar: the vocabulary's tokens hold too many bytes");
    }
    v->nodes = malloc(sizeof(tnode) * (size_t)n_nodes_max);
    if (!v->nodes) goto nomem;
    int32_t n_nodes = 0;
    build_node(v, keys, 0, n_keys, 0, 0, &n_nodes);
    v->n_nodes = n_nodes;
    free(keys);
    *out = v;
    return VT_OK;
nomem:
    free(keys);
    grammar_vocab_free(v);
    return vt_errorf(VT_E_NOMEM, "grammar: out of memory for the vocabulary trie");
}

void grammar_vocab_free(grammar_vocab *v) {
    if (!v) return;
    free(v->nodes);
    free(v->sorted);
    free(v->eog);
    free(v->bytes);
    free(v->off);
    free(v->is_eog);
    free(v);
}

/* ---- stacks and states ------------------------------------------------------------ */

typedef struct gnode {
    int32_t pos;    /* element index: the next thing to match (top) or to continue with */
    int32_t parent; /* the rest of the stack, -1: empty */
    uint64_t hash;  /* of the whole stack from here down */
} gnode;

typedef struct gstate {
    int64_t set;    /* its stacks: cache.sets[set .. set + n) (node ids, -1: the empty stack) */
    int32_t n;
    uint64_t hash;
    bool accepting; /* holds the empty stack */
    bool live;      /* holds a stack with a top: bytes or a token may follow */
    bool has_tok;   /* holds a stack whose top is a token reference */
    int32_t mask;   /* its slot in the mask cache, -1: none */
} gstate;

typedef struct mask_slot {
    uint32_t *bits;
    int32_t n_allowed;
    int32_t state;  /* whose mask it holds, -1: none */
    uint64_t used;
} mask_slot;

typedef struct gcache {
    gnode *nodes;
    int32_t n_nodes, cap_nodes;
    int32_t *sets;         /* the states' stacks, then a scratch set being built */
    int64_t n_sets, cap_sets;
    gstate *states;
    int32_t n_states, cap_states;
    int32_t *state_slot;   /* (1 << state_bits) state id + 1 by hash, 0: empty */
    int state_bits;
    uint64_t *trans_key;   /* (1 << trans_bits) (state << 8 | byte) + 1, 0: empty */
    int32_t *trans_val;    /* the next state, -1: dead */
    int64_t n_trans;
    int trans_bits;
    uint64_t seen_key[1 << SEEN_BITS];
    uint32_t seen_gen[1 << SEEN_BITS];
    uint32_t gen;
    int64_t work;
    vt_status err;
    const grammar_vocab *v; /* the vocabulary its masks are for */
    mask_slot masks[GRAMMAR_MASK_CACHE];
    uint64_t tick;
    int32_t start;         /* the start state, -1 until made */
} gcache;

struct grammar_matcher {
    grammar *g;
    const grammar_vocab *v;
    int32_t state;
    bool first;    /* no token accepted yet */
    bool finished; /* an end-of-generation token was accepted */
    uint32_t *first_bits; /* the first step's mask (the dropped space makes it its own) */
};

void gcache_free(gcache *c) {
    if (!c) return;
    free(c->nodes);
    free(c->sets);
    free(c->states);
    free(c->state_slot);
    free(c->trans_key);
    free(c->trans_val);
    for (int i = 0; i < GRAMMAR_MASK_CACHE; i++) free(c->masks[i].bits);
    free(c);
}

static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fail(gcache *c, vt_status st) {
    if (c->err == VT_OK) c->err = st;
}

static inline uint64_t stack_hash(const gcache *c, int32_t s) { return s < 0 ? EMPTY_HASH : c->nodes[s].hash; }

static int32_t push_node(gcache *c, int32_t parent, int32_t pos) {
    if (c->n_nodes == c->cap_nodes) {
        if (c->cap_nodes >= GRAMMAR_MAX_NODES) {
            fail(c, vt_errorf(VT_E_RANGE, "grammar: more than %d parse stack nodes", GRAMMAR_MAX_NODES));
            return -2;
        }
        const int32_t n = c->cap_nodes ? c->cap_nodes * 2 : 1024;
        gnode *p = realloc(c->nodes, sizeof *p * (size_t)n);
        if (!p) {
            fail(c, vt_errorf(VT_E_NOMEM, "grammar: out of memory"));
            return -2;
        }
        c->nodes = p;
        c->cap_nodes = n;
    }
    const uint64_t ph = stack_hash(c, parent);
    c->nodes[c->n_nodes] = (gnode){.pos = pos, .parent = parent,
                                   .hash = mix64(ph * 0x9e3779b97f4a7c15ull + (uint64_t)pos + 1)};
    return c->n_nodes++;
}

/* Add stack s to the set being built at sets[base ..) unless it is there. */
static void set_add(gcache *c, int64_t base, int32_t s) {
    if (c->err != VT_OK) return;
    const uint64_t h = stack_hash(c, s);
    const uint32_t mask = (1u << SEEN_BITS) - 1;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        if (c->seen_gen[i] != c->gen) {
            c->seen_gen[i] = c->gen;
            c->seen_key[i] = h;
            break;
        }
        if (c->seen_key[i] == h) return;
    }
    if (c->n_sets - base >= GRAMMAR_MAX_STACKS) {
        fail(c, vt_errorf(VT_E_RANGE, "grammar: more than %d parse stacks at once (the grammar is too ambiguous)",
                          GRAMMAR_MAX_STACKS));
        return;
    }
    if (c->n_sets == c->cap_sets) {
        const int64_t n = c->cap_sets ? c->cap_sets * 2 : 1024;
        int32_t *p = realloc(c->sets, sizeof(int32_t) * (size_t)n);
        if (!p) {
            fail(c, vt_errorf(VT_E_NOMEM, "grammar: out of memory"));
            return;
        }
        c->sets = p;
        c->cap_sets = n;
    }
    c->sets[c->n_sets++] = s;
}

/* Expand stack s until its top is a terminal (llama.cpp's advance_stack) and add
 * the results to the set at base. */
static void expand(gcache *c, const grammar *g, int64_t base, int32_t s, int depth) {
    if (c->err != VT_OK) return;
    if (++c->work > EXPAND_WORK || depth > GRAMMAR_MAX_RULES) {
        fail(c, vt_errorf(VT_E_RANGE, "grammar: a state expands to more than %d alternatives", EXPAND_WORK));
        return;
    }
    if (s < 0) {
        set_add(c, base, s);
        return;
    }
    const gelem *el = g->el;
    const int32_t pos = c->nodes[s].pos;
    if (gelem_is_terminal(&el[pos])) {
        set_add(c, base, s);
        return;
    }
    VT_ASSERT(el[pos].type == GE_REF);
    const int32_t rest = c->nodes[s].parent;
    const int32_t under = gelem_is_end(&el[pos + 1]) ? rest : push_node(c, rest, pos + 1);
    if (under == -2) return;
    for (int32_t a = g->rule_start[el[pos].v];;) {
        if (gelem_is_end(&el[a])) {
            expand(c, g, base, under, depth + 1);
        } else {
            const int32_t t = push_node(c, under, a);
            if (t == -2) return;
            expand(c, g, base, t, depth + 1);
        }
        while (!gelem_is_end(&el[a])) a++;
        if (el[a].type == GE_END) break;
        a++;
    }
}

static bool grow_table(void **p, size_t elem, int bits) {
    void *n = calloc((size_t)1 << bits, elem);
    if (!n) return false;
    *p = n;
    return true;
}

/* The set built at sets[base, n_sets) as a state: an existing one (the new
 * nodes and the scratch are dropped) or a new one. -1 for an empty set, -2 on
 * error. */
/* Node t's element matched: its stack moves past it (to the parent at a rule's
 * end, else to the next element) and is expanded into the set at base. False
 * when the node store is full. */
static bool advance(gcache *c, const grammar *g, int64_t base, int32_t t) {
    const int32_t pos = c->nodes[t].pos, rest = c->nodes[t].parent;
    const int32_t next = gelem_is_end(&g->el[pos + 1]) ? rest : push_node(c, rest, pos + 1);
    if (next == -2) return false;
    expand(c, g, base, next, 0);
    return true;
}

static int32_t intern(gcache *c, const grammar *g, int64_t base, int32_t node_mark) {
    if (c->err != VT_OK) return -2;
    const int32_t n = (int32_t)(c->n_sets - base);
    if (n == 0) {
        c->n_nodes = node_mark;
        return -1;
    }
    uint64_t h = 0;
    bool accepting = false, live = false, has_tok = false;
    for (int32_t i = 0; i < n; i++) {
        const int32_t s = c->sets[base + i];
        h += mix64(stack_hash(c, s) ^ 0x5851f42d4c957f2dull);
        accepting |= s < 0;
        live |= s >= 0;
        has_tok |= s >= 0 && gelem_is_token(&g->el[c->nodes[s].pos]);
    }
    const uint32_t mask = (1u << c->state_bits) - 1;
    uint32_t i = (uint32_t)(h >> 7) & mask;
    for (; c->state_slot[i]; i = (i + 1) & mask) {
        const int32_t id = c->state_slot[i] - 1;
        if (c->states[id].hash == h) {
            c->n_sets = base;
            c->n_nodes = node_mark;
            return id;
        }
    }
    if (c->n_states >= GRAMMAR_MAX_STATES) {
        fail(c, vt_errorf(VT_E_RANGE, "grammar: more than %d parse states", GRAMMAR_MAX_STATES));
        return -2;
    }
    if (c->n_states == c->cap_states) {
        const int32_t cap = c->cap_states ? c->cap_states * 2 : 256;
        gstate *p = realloc(c->states, sizeof *p * (size_t)cap);
        if (!p) {
            fail(c, vt_errorf(VT_E_NOMEM, "grammar: out of memory"));
            return -2;
        }
        c->states = p;
        c->cap_states = cap;
    }
    const int32_t id = c->n_states++;
    c->states[id] = (gstate){.set = base, .n = n, .hash = h, .accepting = accepting, .live = live,
                             .has_tok = has_tok, .mask = -1};
    c->state_slot[i] = id + 1;
    if ((int64_t)c->n_states * 2 > (int64_t)1 << c->state_bits) { /* rehash */
        int32_t *old = c->state_slot;
        if (!grow_table((void **)&c->state_slot, sizeof(int32_t), c->state_bits + 1)) {
            c->state_slot = old;
            fail(c, vt_errorf(VT_E_NOMEM, "grammar: out of memory"));
            return -2;
        }
        free(old);
        c->state_bits++;
        const uint32_t m2 = (1u << c->state_bits) - 1;
        for (int32_t k = 0; k < c->n_states; k++) {
            uint32_t j = (uint32_t)(c->states[k].hash >> 7) & m2;
            while (c->state_slot[j]) j = (j + 1) & m2;
            c->state_slot[j] = k + 1;
        }
    }
    return id;
}

/* The state after byte b from state st: -1 dead, -2 error. */
static int32_t step(gcache *c, const grammar *g, int32_t st, uint8_t b) {
    const uint64_t key = ((uint64_t)st << 8 | b) + 1;
    const uint32_t mask = (1u << c->trans_bits) - 1;
    uint32_t i = (uint32_t)mix64(key) & mask;
    for (; c->trans_key[i]; i = (i + 1) & mask)
        if (c->trans_key[i] == key) return c->trans_val[i];
    /* compute it */
    const gstate *s = &c->states[st];
    const int64_t base = c->n_sets;
    const int32_t node_mark = c->n_nodes;
    c->gen++;
    c->work = 0;
    for (int32_t k = 0; k < s->n && c->err == VT_OK; k++) {
        const int32_t t = c->sets[c->states[st].set + k];
        if (t < 0) continue;
        const int32_t pos = c->nodes[t].pos;
        if (g->el[pos].type != GE_SET || !gset_has(&g->sets[g->el[pos].v], b)) continue;
        if (!advance(c, g, base, t)) break;
    }
    const int32_t to = intern(c, g, base, node_mark);
    if (to == -2) {
        c->n_sets = base;
        c->n_nodes = node_mark;
        return -2;
    }
    c->trans_key[i] = key;
    c->trans_val[i] = to;
    if (++c->n_trans * 2 > (int64_t)1 << c->trans_bits) {
        uint64_t *ok = c->trans_key;
        int32_t *ov = c->trans_val;
        const int ob = c->trans_bits;
        if (!grow_table((void **)&c->trans_key, sizeof(uint64_t), ob + 1) ||
            !grow_table((void **)&c->trans_val, sizeof(int32_t), ob + 1)) {
            if (c->trans_key != ok) free(c->trans_key);
            c->trans_key = ok;
            c->trans_val = ov;
            fail(c, vt_errorf(VT_E_NOMEM, "grammar: out of memory"));
            return -2;
        }
        c->trans_bits++;
        const uint32_t m2 = (1u << c->trans_bits) - 1;
        for (uint32_t k = 0; k < (1u << ob); k++) {
            if (!ok[k]) continue;
            uint32_t j = (uint32_t)mix64(ok[k]) & m2;
            while (c->trans_key[j]) j = (j + 1) & m2;
            c->trans_key[j] = ok[k];
            c->trans_val[j] = ov[k];
        }
        free(ok);
        free(ov);
    }
    return to;
}

static vt_status cache_get(grammar *g, const grammar_vocab *v, gcache **out) {
    gcache *c = g->cache;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c) return vt_errorf(VT_E_NOMEM, "grammar: out of memory");
        c->state_bits = 10;
        c->trans_bits = 12;
        c->start = -1;
        for (int i = 0; i < GRAMMAR_MASK_CACHE; i++) c->masks[i].state = -1;
        if (!grow_table((void **)&c->state_slot, sizeof(int32_t), c->state_bits) ||
            !grow_table((void **)&c->trans_key, sizeof(uint64_t), c->trans_bits) ||
            !grow_table((void **)&c->trans_val, sizeof(int32_t), c->trans_bits)) {
            gcache_free(c);
            return vt_errorf(VT_E_NOMEM, "grammar: out of memory");
        }
        g->cache = c;
    }
    if (v && c->v != v) { /* masks are per vocabulary */
        if (c->v) {
            for (int i = 0; i < GRAMMAR_MASK_CACHE; i++) {
                if (c->masks[i].state >= 0) c->states[c->masks[i].state].mask = -1;
                free(c->masks[i].bits);
                c->masks[i] = (mask_slot){.state = -1};
            }
        }
        c->v = v;
    }
    c->err = VT_OK;
    if (c->start < 0) {
        /* the start: root's alternatives, expanded */
        const int64_t base = c->n_sets;
        const int32_t node_mark = c->n_nodes;
        c->gen++;
        c->work = 0;
        const gelem *el = g->el;
        for (int32_t a = g->rule_start[g->root]; c->err == VT_OK;) {
            if (gelem_is_end(&el[a])) {
                expand(c, g, base, -1, 0);
            } else {
                const int32_t t = push_node(c, -1, a);
                if (t == -2) break;
                expand(c, g, base, t, 0);
            }
            while (!gelem_is_end(&el[a])) a++;
            if (el[a].type == GE_END) break;
            a++;
        }
        const int32_t st = intern(c, g, base, node_mark);
        if (st < 0) {
            const vt_status e = c->err != VT_OK ? c->err : vt_errorf(VT_E_INVALID, "grammar: matches nothing");
            c->n_sets = base;
            c->n_nodes = node_mark;
            c->err = VT_OK;
            return e;
        }
        c->start = st;
    }
    *out = c;
    return VT_OK;
}

vt_status grammar_matcher_create(const grammar *g, const grammar_vocab *v, grammar_matcher **out) {
    *out = NULL;
    gcache *c;
    VT_TRY(cache_get((grammar *)g, v, &c));
    grammar_matcher *m = calloc(1, sizeof *m);
    if (!m) return vt_errorf(VT_E_NOMEM, "grammar: out of memory");
    m->g = (grammar *)g;
    m->v = v;
    m->first = true;
    m->state = c->start;
    *out = m;
    return VT_OK;
}

void grammar_matcher_free(grammar_matcher *m) {
    if (!m) return;
    free(m->first_bits);
    free(m);
}

bool grammar_matcher_accepting(const grammar_matcher *m) {
    return !m->finished && m->g->cache->states[m->state].accepting;
}

bool grammar_matcher_done(const grammar_matcher *m) {
    return m->finished || !m->g->cache->states[m->state].live;
}

/* The state after n bytes from st: -1 when some byte is not admitted, -2 on error. */
static int32_t run_bytes(gcache *c, const grammar *g, int32_t st, const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n && st >= 0; i++) st = step(c, g, st, s[i]);
    return st;
}

/* Does the token reference e admit token t? */
static inline bool tok_admits(const gelem *e, int32_t t) { return e->type == GE_TOK ? e->v == t : e->v != t; }

/* The state after token t (its n bytes s) from st, which holds token
 * references: the bytes through the stacks with a byte on top, the id through
 * the others, both sets together. -1 when neither continues, -2 on error. */
static int32_t token_step(gcache *c, const grammar *g, int32_t st, int32_t t, const uint8_t *s, size_t n) {
    const int32_t by_bytes = n > 0 ? run_bytes(c, g, st, s, n) : -1;
    if (by_bytes == -2) return -2;
    const int64_t base = c->n_sets;
    const int32_t node_mark = c->n_nodes;
    c->gen++;
    c->work = 0;
    if (by_bytes >= 0) {
        for (int32_t k = 0; k < c->states[by_bytes].n; k++) set_add(c, base, c->sets[c->states[by_bytes].set + k]);
    }
    for (int32_t k = 0; k < c->states[st].n && c->err == VT_OK; k++) {
        const int32_t x = c->sets[c->states[st].set + k];
        if (x < 0 || !gelem_is_token(&g->el[c->nodes[x].pos]) || !tok_admits(&g->el[c->nodes[x].pos], t)) continue;
        if (!advance(c, g, base, x)) break;
    }
    const int32_t to = intern(c, g, base, node_mark);
    if (to == -2) {
        c->n_sets = base;
        c->n_nodes = node_mark;
    }
    return to;
}

static vt_status advance_by(grammar_matcher *m, const uint8_t *s, size_t n, const char *what, int32_t token) {
    gcache *c;
    VT_TRY(cache_get(m->g, m->v, &c));
    const int32_t st = run_bytes(c, m->g, m->state, s, n);
    if (st == -2) {
        const vt_status e = c->err;
        c->err = VT_OK;
        return e;
    }
    if (st < 0) {
        return token >= 0 ? vt_errorf(VT_E_INVALID, "grammar: token %d does not continue the grammar", token)
                          : vt_errorf(VT_E_INVALID, "grammar: %s does not match", what);
    }
    m->state = st;
    return VT_OK;
}

vt_status grammar_matcher_accept_bytes(grammar_matcher *m, const char *s, size_t n) {
    if (m->finished) return vt_errorf(VT_E_INVALID, "grammar: the output is complete");
    return advance_by(m, (const uint8_t *)s, n, "the text", -1);
}

static void token_bytes(const grammar_matcher *m, int32_t t, const uint8_t **s, size_t *n) {
    const grammar_vocab *v = m->v;
    *s = (const uint8_t *)v->bytes + v->off[t];
    *n = (size_t)(v->off[t + 1] - v->off[t]);
    if (m->first && v->strip_first_space && *n > 0 && **s == ' ') {
        (*s)++;
        (*n)--;
    }
}

vt_status grammar_matcher_accept(grammar_matcher *m, int32_t token) {
    const grammar_vocab *v = m->v;
    if (!v || token < 0 || token >= v->n_vocab)
        return vt_errorf(VT_E_INVALID, "grammar: token %d is not in the vocabulary", token);
    if (m->finished) return vt_errorf(VT_E_INVALID, "grammar: the output is complete");
    if (v->is_eog[token]) {
        if (!grammar_matcher_accepting(m))
            return vt_errorf(VT_E_INVALID, "grammar: end of generation before the grammar is complete");
        m->finished = true;
        return VT_OK;
    }
    const uint8_t *s;
    size_t n;
    token_bytes(m, token, &s, &n);
    gcache *c;
    VT_TRY(cache_get(m->g, v, &c));
    if (c->states[m->state].has_tok) {
        const int32_t st = token_step(c, m->g, m->state, token, s, n);
        if (st == -2) {
            const vt_status e = c->err;
            c->err = VT_OK;
            return e;
        }
        if (st < 0) return vt_errorf(VT_E_INVALID, "grammar: token %d does not continue the grammar", token);
        m->state = st;
        m->first = false;
        return VT_OK;
    }
    if (n == 0) return vt_errorf(VT_E_INVALID, "grammar: token %d has no text", token);
    VT_TRY(advance_by(m, s, n, "the token", token));
    m->first = false;
    return VT_OK;
}

/* ---- the mask ------------------------------------------------------------------------ */

typedef struct walk_frame {
    int32_t node;  /* trie node */
    int32_t child; /* next child to visit */
    int32_t state; /* the DFA state after the node's prefix */
} walk_frame;

/* Depth-first over the trie through the DFA; a subtree is skipped once its
 * prefix is dead. strip: the first token's leading space consumes nothing. */
static vt_status walk(gcache *c, const grammar *g, const grammar_vocab *v, int32_t start, bool strip, uint32_t *bits,
                      int32_t *n_allowed) {
    if (!c->states[start].live) return VT_OK;
    int32_t cap = 64, sp = 0;
    walk_frame *fr = malloc(sizeof *fr * (size_t)cap);
    if (!fr) return vt_errorf(VT_E_NOMEM, "grammar: out of memory");
    fr[sp++] = (walk_frame){.node = 0, .child = 1, .state = start};
    vt_status st = VT_OK;
    while (sp > 0) {
        walk_frame *f = &fr[sp - 1];
        const tnode *t = &v->nodes[f->node];
        if (f->child >= t->end) {
            sp--;
            continue;
        }
        const int32_t ch = f->child;
        f->child = v->nodes[ch].end;
        int32_t to;
        bool allow = true;
        if (strip && f->node == 0 && v->nodes[ch].byte == ' ') {
            to = f->state; /* " " alone is empty text: not allowed; longer ones go on */
            allow = false;
        } else {
            to = step(c, g, f->state, v->nodes[ch].byte);
            if (to == -2) {
                st = c->err;
                c->err = VT_OK;
                break;
            }
            if (to < 0) continue;
        }
        if (allow) {
            const tnode *cn = &v->nodes[ch];
            for (int32_t k = 0; k < cn->tok_n; k++) {
                const int32_t id = v->sorted[cn->tok_begin + k];
                bits[id >> 5] |= 1u << (id & 31);
            }
            *n_allowed += cn->tok_n;
        }
        if (v->nodes[ch].end == ch + 1 || !c->states[to].live) continue;
        if (sp == cap) {
            walk_frame *nf = realloc(fr, sizeof *fr * (size_t)(cap * 2));
            if (!nf) {
                st = vt_errorf(VT_E_NOMEM, "grammar: out of memory");
                break;
            }
            fr = nf;
            cap *= 2;
        }
        fr[sp++] = (walk_frame){.node = ch, .child = ch + 1, .state = to};
    }
    free(fr);
    return st;
}

static vt_status compute_mask(gcache *c, const grammar *g, const grammar_vocab *v, int32_t state, bool strip,
                              uint32_t *bits, int32_t *n) {
    memset(bits, 0, ((size_t)v->n_vocab + 31) / 32 * sizeof(uint32_t));
    *n = 0;
    if (c->states[state].accepting) {
        for (int32_t i = 0; i < v->n_eog; i++) bits[v->eog[i] >> 5] |= 1u << (v->eog[i] & 31);
        *n += v->n_eog;
    }
    VT_TRY(walk(c, g, v, state, strip, bits, n));
    if (!c->states[state].has_tok) return VT_OK;
    /* the token references on top: their tokens (never an end-of-generation one) */
    const gstate *s = &c->states[state];
    for (int32_t k = 0; k < s->n; k++) {
        const int32_t x = c->sets[s->set + k];
        if (x < 0 || !gelem_is_token(&g->el[c->nodes[x].pos])) continue;
        const gelem *e = &g->el[c->nodes[x].pos];
        if (e->type == GE_TOK) {
            if (e->v < v->n_vocab && !v->is_eog[e->v]) bits[e->v >> 5] |= 1u << (e->v & 31);
        } else {
            for (int32_t t = 0; t < v->n_vocab; t++)
                if (t != e->v && !v->is_eog[t]) bits[t >> 5] |= 1u << (t & 31);
        }
    }
    int32_t count = 0;
    for (size_t w = 0; w < ((size_t)v->n_vocab + 31) / 32; w++) count += __builtin_popcount(bits[w]);
    *n = count;
    return VT_OK;
}

vt_status grammar_matcher_mask(grammar_matcher *m, const uint32_t **bits, int32_t *n_allowed) {
    const grammar_vocab *v = m->v;
    if (!v) return vt_errorf(VT_E_INVALID, "grammar: a matcher without a vocabulary has no mask");
    const size_t words = ((size_t)v->n_vocab + 31) / 32;
    gcache *c;
    VT_TRY(cache_get(m->g, v, &c));
    if (m->finished) {
        if (!m->first_bits && !(m->first_bits = calloc(words, sizeof(uint32_t))))
            return vt_errorf(VT_E_NOMEM, "grammar: out of memory for a token mask");
        memset(m->first_bits, 0, words * sizeof(uint32_t));
        *bits = m->first_bits;
        *n_allowed = 0;
        return VT_OK;
    }
    if (m->first && v->strip_first_space) { /* its own mask, not cached with the state's */
        if (!m->first_bits && !(m->first_bits = malloc(words * sizeof(uint32_t))))
            return vt_errorf(VT_E_NOMEM, "grammar: out of memory for a token mask");
        VT_TRY(compute_mask(c, m->g, v, m->state, true, m->first_bits, n_allowed));
        *bits = m->first_bits;
        return VT_OK;
    }
    gstate *s = &c->states[m->state];
    c->tick++;
    if (s->mask >= 0) {
        mask_slot *ms = &c->masks[s->mask];
        ms->used = c->tick;
        *bits = ms->bits;
        *n_allowed = ms->n_allowed;
        return VT_OK;
    }
    int32_t slot = 0;
    for (int32_t i = 1; i < GRAMMAR_MASK_CACHE && c->masks[slot].state >= 0; i++)
        if (c->masks[i].state < 0 || c->masks[i].used < c->masks[slot].used) slot = i;
    mask_slot *ms = &c->masks[slot];
    if (!ms->bits && !(ms->bits = malloc(words * sizeof(uint32_t))))
        return vt_errorf(VT_E_NOMEM, "grammar: out of memory for a token mask");
    if (ms->state >= 0) c->states[ms->state].mask = -1;
    ms->state = -1;
    int32_t n;
    VT_TRY(compute_mask(c, m->g, v, m->state, false, ms->bits, &n));
    s = &c->states[m->state]; /* the walk may have grown the state table */
    ms->state = m->state;
    ms->n_allowed = n;
    ms->used = c->tick;
    s->mask = slot;
    *bits = ms->bits;
    *n_allowed = n;
    return VT_OK;
}

bool grammar_cache_large(const grammar *g) {
    const gcache *c = g->cache;
    return c && (c->n_states > GRAMMAR_MAX_STATES / 4 || c->n_nodes > GRAMMAR_MAX_NODES / 4);
}

bool grammar_accepts(const grammar *g, const char *s, size_t n) {
    grammar_matcher *m = NULL;
    if (grammar_matcher_create(g, NULL, &m) != VT_OK) return false;
    const bool ok = grammar_matcher_accept_bytes(m, s, n) == VT_OK && grammar_matcher_accepting(m);
    grammar_matcher_free(m);
    return ok;
}
