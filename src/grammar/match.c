/* The matcher (grammar.h): sets of persistent parse stacks advanced byte by
 * byte, and the allowed-token mask found by a depth-first walk of the
 * vocabulary's trie, cached by state. */
#include "grammar/grammar_impl.h"

#include "base/status.h"

#include <stdlib.h>
#include <string.h>

#define MASK_CACHE 16        /* masks kept per matcher (by state hash) */
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

/* ---- stacks ------------------------------------------------------------------------ */

typedef struct gnode {
    int32_t pos;    /* element index: the next thing to match (top) or to continue with */
    int32_t parent; /* the rest of the stack, -1: empty */
    uint64_t hash;  /* of the whole stack from here down */
} gnode;

typedef struct mask_entry {
    uint64_t key;
    uint64_t used;
    uint32_t *bits;
    int32_t n_allowed;
    bool valid;
} mask_entry;

struct grammar_matcher {
    const grammar *g;
    const grammar_vocab *v;
    gnode *nodes;
    int32_t n_nodes, cap_nodes;
    int32_t *set;      /* scratch of stack sets: the current one first, then the walk's */
    int64_t n_set, cap_set;
    int32_t n_cur;     /* set[0 .. n_cur): the current state (node ids, -1: the empty stack) */
    uint64_t cur_hash;
    bool first;        /* no token accepted yet */
    bool finished;     /* an end-of-generation token was accepted */
    uint64_t seen_key[1 << SEEN_BITS];
    uint32_t seen_gen[1 << SEEN_BITS];
    uint32_t gen;
    int64_t work;
    vt_status err;
    mask_entry cache[MASK_CACHE];
    uint64_t tick;
    int32_t *live;     /* (cap_live) compaction scratch */
    int32_t cap_live;
    int32_t n_live_nodes; /* after the last compaction */
};

static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t stack_hash(const grammar_matcher *m, int32_t s) {
    return s < 0 ? EMPTY_HASH : m->nodes[s].hash;
}

static int32_t push_node(grammar_matcher *m, int32_t parent, int32_t pos) {
    if (m->n_nodes == m->cap_nodes) {
        if (m->cap_nodes >= GRAMMAR_MAX_NODES) {
            if (m->err == VT_OK)
                m->err = vt_errorf(VT_E_RANGE, "grammar: more than %d parse stack nodes", GRAMMAR_MAX_NODES);
            return -2;
        }
        const int32_t c = m->cap_nodes ? m->cap_nodes * 2 : 1024;
        gnode *n = realloc(m->nodes, sizeof *n * (size_t)c);
        if (!n) {
            if (m->err == VT_OK) m->err = vt_errorf(VT_E_NOMEM, "grammar: out of memory");
            return -2;
        }
        m->nodes = n;
        m->cap_nodes = c;
    }
    const uint64_t ph = parent < 0 ? EMPTY_HASH : m->nodes[parent].hash;
    m->nodes[m->n_nodes] = (gnode){.pos = pos, .parent = parent,
                                   .hash = mix64(ph * 0x9e3779b97f4a7c15ull + (uint64_t)pos + 1)};
    return m->n_nodes++;
}

static bool set_reserve(grammar_matcher *m, int64_t extra) {
    if (m->n_set + extra <= m->cap_set) return true;
    int64_t c = m->cap_set ? m->cap_set * 2 : 1024;
    while (c < m->n_set + extra) c *= 2;
    int32_t *s = realloc(m->set, sizeof(int32_t) * (size_t)c);
    if (!s) {
        if (m->err == VT_OK) m->err = vt_errorf(VT_E_NOMEM, "grammar: out of memory");
        return false;
    }
    m->set = s;
    m->cap_set = c;
    return true;
}

/* Add stack s to the set being built at set[base ..) unless it is there. */
static void set_add(grammar_matcher *m, int64_t base, int32_t s) {
    if (m->err != VT_OK) return;
    const uint64_t h = stack_hash(m, s);
    const uint32_t mask = (1u << SEEN_BITS) - 1;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        if (m->seen_gen[i] != m->gen) {
            m->seen_gen[i] = m->gen;
            m->seen_key[i] = h;
            break;
        }
        if (m->seen_key[i] == h) return;
    }
    if (m->n_set - base >= GRAMMAR_MAX_STACKS) {
        m->err = vt_errorf(VT_E_RANGE, "grammar: more than %d parse stacks at once (the grammar is too ambiguous)",
                           GRAMMAR_MAX_STACKS);
        return;
    }
    if (!set_reserve(m, 1)) return;
    m->set[m->n_set++] = s;
}

/* Expand stack s until its top is a terminal (llama.cpp's advance_stack) and add
 * the results to the set at base. */
static void expand(grammar_matcher *m, int64_t base, int32_t s, int depth) {
    if (m->err != VT_OK) return;
    if (++m->work > EXPAND_WORK || depth > GRAMMAR_MAX_RULES) {
        m->err = vt_errorf(VT_E_RANGE, "grammar: a state expands to more than %d alternatives", EXPAND_WORK);
        return;
    }
    if (s < 0) {
        set_add(m, base, s);
        return;
    }
    const gelem *el = m->g->el;
    const int32_t pos = m->nodes[s].pos;
    if (el[pos].type == GE_SET) {
        set_add(m, base, s);
        return;
    }
    VT_ASSERT(el[pos].type == GE_REF);
    const int32_t rest = m->nodes[s].parent;
    const int32_t under = gelem_is_end(&el[pos + 1]) ? rest : push_node(m, rest, pos + 1);
    if (under == -2) return;
    for (int32_t a = m->g->rule_start[el[pos].v];;) {
        if (gelem_is_end(&el[a])) {
            expand(m, base, under, depth + 1);
        } else {
            const int32_t t = push_node(m, under, a);
            if (t == -2) return;
            expand(m, base, t, depth + 1);
        }
        while (!gelem_is_end(&el[a])) a++;
        if (el[a].type == GE_END) break;
        a++;
    }
}

/* The set at set[from, from + n) advanced by byte b into a new set at the end of
 * the scratch; returns its size (0: no stack admits b). */
static int32_t advance(grammar_matcher *m, int64_t from, int32_t n, uint8_t b) {
    const gelem *el = m->g->el;
    const int64_t base = m->n_set;
    m->gen++;
    m->work = 0;
    for (int32_t i = 0; i < n && m->err == VT_OK; i++) {
        const int32_t s = m->set[from + i];
        if (s < 0) continue;
        const int32_t pos = m->nodes[s].pos;
        if (!gset_has(&m->g->sets[el[pos].v], b)) continue;
        const int32_t rest = m->nodes[s].parent;
        const int32_t next = gelem_is_end(&el[pos + 1]) ? rest : push_node(m, rest, pos + 1);
        if (next == -2) break;
        expand(m, base, next, 0);
    }
    return (int32_t)(m->n_set - base);
}

static uint64_t set_hash(const grammar_matcher *m, int64_t from, int32_t n) {
    uint64_t h = 0;
    for (int32_t i = 0; i < n; i++) h += mix64(stack_hash(m, m->set[from + i]) ^ 0x5851f42d4c957f2dull);
    return h;
}

/* Make set[from, from + n) the current state. */
static void set_current(grammar_matcher *m, int64_t from, int32_t n) {
    if (from != 0) memmove(m->set, m->set + from, sizeof(int32_t) * (size_t)n);
    m->n_cur = n;
    m->n_set = n;
    m->cur_hash = set_hash(m, 0, n);
}

/* Drop the nodes no current stack reaches (parents always precede children). */
static void compact(grammar_matcher *m) {
    /* amortized: only once the arena doubled since the last compaction */
    if (m->n_nodes < (1 << 16) || m->n_nodes < 2 * m->n_live_nodes) return;
    if (m->cap_live < m->n_nodes) {
        int32_t *l = realloc(m->live, sizeof(int32_t) * (size_t)m->n_nodes);
        if (!l) return; /* keep them: only memory */
        m->live = l;
        m->cap_live = m->n_nodes;
    }
    int32_t *map = m->live;
    for (int32_t i = 0; i < m->n_nodes; i++) map[i] = -1;
    for (int32_t i = 0; i < m->n_cur; i++)
        for (int32_t s = m->set[i]; s >= 0 && map[s] == -1; s = m->nodes[s].parent) map[s] = 0;
    int32_t k = 0;
    for (int32_t i = 0; i < m->n_nodes; i++) {
        if (map[i] < 0) continue;
        gnode nd = m->nodes[i];
        nd.parent = nd.parent >= 0 ? map[nd.parent] : -1;
        m->nodes[k] = nd;
        map[i] = k++;
    }
    for (int32_t i = 0; i < m->n_cur; i++)
        if (m->set[i] >= 0) m->set[i] = map[m->set[i]];
    m->n_nodes = k;
    m->n_live_nodes = k;
}

vt_status grammar_matcher_create(const grammar *g, const grammar_vocab *v, grammar_matcher **out) {
    *out = NULL;
    grammar_matcher *m = calloc(1, sizeof *m);
    if (!m) return vt_errorf(VT_E_NOMEM, "grammar: out of memory");
    m->g = g;
    m->v = v;
    m->first = true;
    /* the start: root's alternatives, expanded */
    m->gen = 1;
    int32_t top = -1;
    if (set_reserve(m, 1)) {
        /* a pseudo-stack whose top is a reference to root: expand() wants a node,
         * so push root's alternatives directly */
        m->gen++;
        const gelem *el = g->el;
        for (int32_t a = g->rule_start[g->root]; m->err == VT_OK;) {
            if (gelem_is_end(&el[a])) {
                expand(m, 0, -1, 0);
            } else {
                top = push_node(m, -1, a);
                if (top == -2) break;
                expand(m, 0, top, 0);
            }
            while (!gelem_is_end(&el[a])) a++;
            if (el[a].type == GE_END) break;
            a++;
        }
    }
    if (m->err != VT_OK) {
        const vt_status st = m->err;
        grammar_matcher_free(m);
        return st;
    }
    set_current(m, 0, (int32_t)m->n_set);
    *out = m;
    return VT_OK;
}

void grammar_matcher_free(grammar_matcher *m) {
    if (!m) return;
    for (int i = 0; i < MASK_CACHE; i++) free(m->cache[i].bits);
    free(m->nodes);
    free(m->set);
    free(m->live);
    free(m);
}

bool grammar_matcher_accepting(const grammar_matcher *m) {
    for (int32_t i = 0; i < m->n_cur; i++)
        if (m->set[i] < 0) return true;
    return false;
}

bool grammar_matcher_done(const grammar_matcher *m) {
    if (m->finished) return true;
    for (int32_t i = 0; i < m->n_cur; i++)
        if (m->set[i] >= 0) return false;
    return true;
}

/* Advance the current state by n bytes; false (state unchanged) if some byte is
 * not admitted or a limit was hit (m->err). */
static bool accept_bytes(grammar_matcher *m, const uint8_t *s, size_t n) {
    const int32_t mark = m->n_nodes;
    int64_t from = 0;
    int32_t cnt = m->n_cur;
    m->n_set = m->n_cur;
    for (size_t i = 0; i < n; i++) {
        const int64_t base = m->n_set;
        const int32_t k = advance(m, from, cnt, s[i]);
        if (m->err != VT_OK || k == 0) {
            m->n_set = m->n_cur;
            m->n_nodes = mark;
            return false;
        }
        from = base;
        cnt = k;
    }
    set_current(m, from, cnt);
    compact(m);
    return true;
}

vt_status grammar_matcher_accept_bytes(grammar_matcher *m, const char *s, size_t n) {
    m->err = VT_OK;
    if (m->finished) return vt_errorf(VT_E_INVALID, "grammar: the output is complete");
    if (!accept_bytes(m, (const uint8_t *)s, n)) {
        const vt_status st = m->err != VT_OK ? m->err : vt_errorf(VT_E_INVALID, "grammar: the text does not match");
        m->err = VT_OK;
        return st;
    }
    return VT_OK;
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
    if (token < 0 || token >= v->n_vocab) return vt_errorf(VT_E_INVALID, "grammar: token %d is not in the vocabulary", token);
    if (m->finished) return vt_errorf(VT_E_INVALID, "grammar: the output is complete");
    if (v->is_eog[token]) {
        if (!grammar_matcher_accepting(m)) return vt_errorf(VT_E_INVALID, "grammar: end of generation before the grammar is complete");
        m->finished = true;
        return VT_OK;
    }
    const uint8_t *s;
    size_t n;
    token_bytes(m, token, &s, &n);
    if (n == 0) return vt_errorf(VT_E_INVALID, "grammar: token %d has no text", token);
    m->err = VT_OK;
    if (!accept_bytes(m, s, n)) {
        const vt_status st = m->err != VT_OK ? m->err : vt_errorf(VT_E_INVALID, "grammar: token %d does not continue the grammar", token);
        m->err = VT_OK;
        return st;
    }
    m->first = false;
    return VT_OK;
}

/* ---- the mask ------------------------------------------------------------------------ */

typedef struct walk_frame {
    int32_t node;     /* trie node */
    int32_t child;    /* next child to visit */
    int64_t from;     /* its stack set in the scratch */
    int32_t n;
    int32_t node_mark; /* stack nodes to keep when leaving it */
    int64_t set_mark;
} walk_frame;

static void allow_node(const grammar_vocab *v, const tnode *t, uint32_t *bits, int32_t *n_allowed) {
    for (int32_t k = 0; k < t->tok_n; k++) {
        const int32_t id = v->sorted[t->tok_begin + k];
        bits[id >> 5] |= 1u << (id & 31);
    }
    *n_allowed += t->tok_n;
}

static bool has_live_stack(const grammar_matcher *m, int64_t from, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (m->set[from + i] >= 0) return true;
    return false;
}

/* Depth-first over the trie from the current state; a subtree is skipped once
 * no stack admits its prefix. */
static vt_status walk(grammar_matcher *m, uint32_t *bits, int32_t *n_allowed) {
    const grammar_vocab *v = m->v;
    walk_frame *fr = NULL;
    int32_t cap = 0, sp = 0;
    const bool strip = m->first && v->strip_first_space;
    const int32_t node_mark0 = m->n_nodes;
    m->n_set = m->n_cur;
    if (!has_live_stack(m, 0, m->n_cur)) return VT_OK;
    cap = 64;
    fr = malloc(sizeof *fr * (size_t)cap);
    if (!fr) return vt_errorf(VT_E_NOMEM, "grammar: out of memory");
    fr[sp++] = (walk_frame){.node = 0, .child = 1, .from = 0, .n = m->n_cur, .node_mark = m->n_nodes, .set_mark = m->n_set};
    vt_status st = VT_OK;
    while (sp > 0) {
        walk_frame *f = &fr[sp - 1];
        const tnode *t = &v->nodes[f->node];
        if (f->child >= t->end) {
            m->n_nodes = f->node_mark;
            m->n_set = f->set_mark;
            sp--;
            continue;
        }
        const int32_t c = f->child;
        f->child = v->nodes[c].end;
        /* the set after the child's byte */
        m->n_nodes = f->node_mark;
        m->n_set = f->set_mark;
        const int32_t mark = m->n_nodes;
        const int64_t smark = m->n_set;
        int64_t from;
        int32_t k;
        if (strip && f->node == 0 && v->nodes[c].byte == ' ') {
            /* first token: its leading space is dropped, so the space consumes nothing */
            from = f->from;
            k = f->n;
            /* the token " " alone is empty text: not allowed; its longer siblings are */
            if (sp == cap) {
                walk_frame *nf = realloc(fr, sizeof *fr * (size_t)(cap * 2));
                if (!nf) {
                    st = vt_errorf(VT_E_NOMEM, "grammar: out of memory");
                    break;
                }
                fr = nf;
                cap *= 2;
            }
            fr[sp++] = (walk_frame){.node = c, .child = c + 1, .from = from, .n = k, .node_mark = mark, .set_mark = smark};
            continue;
        }
        (void)mark;
        (void)smark;
        from = m->n_set;
        k = advance(m, f->from, f->n, v->nodes[c].byte);
        if (m->err != VT_OK) {
            st = m->err;
            m->err = VT_OK;
            break;
        }
        if (k == 0) continue;
        allow_node(v, &v->nodes[c], bits, n_allowed);
        if (v->nodes[c].end == c + 1 || !has_live_stack(m, from, k)) continue;
        if (sp == cap) {
            walk_frame *nf = realloc(fr, sizeof *fr * (size_t)(cap * 2));
            if (!nf) {
                st = vt_errorf(VT_E_NOMEM, "grammar: out of memory");
                break;
            }
            fr = nf;
            cap *= 2;
        }
        fr[sp++] = (walk_frame){.node = c, .child = c + 1, .from = from, .n = k, .node_mark = m->n_nodes, .set_mark = m->n_set};
    }
    free(fr);
    m->n_nodes = node_mark0;
    m->n_set = m->n_cur;
    return st;
}

vt_status grammar_matcher_mask(grammar_matcher *m, const uint32_t **bits, int32_t *n_allowed) {
    const grammar_vocab *v = m->v;
    const uint64_t key = m->cur_hash ^ (m->first && v->strip_first_space ? 0x243f6a8885a308d3ull : 0);
    m->tick++;
    mask_entry *slot = &m->cache[0];
    for (int i = 0; i < MASK_CACHE; i++) {
        mask_entry *e = &m->cache[i];
        if (e->valid && e->key == key) {
            e->used = m->tick;
            *bits = e->bits;
            *n_allowed = e->n_allowed;
            return VT_OK;
        }
        if (!e->valid || e->used < slot->used) slot = e;
    }
    const size_t words = ((size_t)v->n_vocab + 31) / 32;
    if (!slot->bits) {
        slot->bits = malloc(words * sizeof(uint32_t));
        if (!slot->bits) return vt_errorf(VT_E_NOMEM, "grammar: out of memory for a token mask");
    }
    slot->valid = false;
    memset(slot->bits, 0, words * sizeof(uint32_t));
    int32_t n = 0;
    if (!m->finished) {
        if (grammar_matcher_accepting(m)) {
            for (int32_t i = 0; i < v->n_eog; i++) slot->bits[v->eog[i] >> 5] |= 1u << (v->eog[i] & 31);
            n += v->n_eog;
        }
        m->err = VT_OK;
        VT_TRY(walk(m, slot->bits, &n));
    }
    slot->key = key;
    slot->used = m->tick;
    slot->n_allowed = n;
    slot->valid = true;
    *bits = slot->bits;
    *n_allowed = n;
    return VT_OK;
}

bool grammar_accepts(const grammar *g, const char *s, size_t n) {
    grammar_matcher *m = NULL;
    if (grammar_matcher_create(g, NULL, &m) != VT_OK) return false;
    const bool ok = accept_bytes(m, (const uint8_t *)s, n) && grammar_matcher_accepting(m);
    grammar_matcher_free(m);
    return ok;
}
