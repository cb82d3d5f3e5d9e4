/* SentencePiece-style BPE over scores, as llama.cpp's llm_tokenizer_spm:
 * start from UTF-8 characters, repeatedly merge the adjacent pair whose
 * concatenation is a token with the highest score (ties: the leftmost pair), then
 * map each final piece to its token or, failing that, to byte tokens.
 *
 * A max-heap of candidate pairs makes this O(n log n). A queued pair goes stale
 * when either side merges elsewhere; it is recognised by its byte size no longer
 * matching (a left symbol only grows by absorbing its right neighbour, which then
 * becomes empty, and a right symbol only grows), so no pair is ever re-checked by
 * text. */
#include "tokenizer/tok_impl.h"

#include <string.h>

/* 4-ary: half the depth of a binary heap, children of a node share a cache line. */
bool heap_push(tok_heap *h, tok_bigram b) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        tok_bigram *v = realloc(h->v, cap * sizeof *v);
        if (!v) return false;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 4;
        if (b.key <= h->v[parent].key) break;
        h->v[i] = h->v[parent];
        i = parent;
    }
    h->v[i] = b;
    return true;
}

tok_bigram heap_pop(tok_heap *h) {
    tok_bigram top = h->v[0];
    tok_bigram last = h->v[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= n) break;
        size_t best = c, end = c + 4 < n ? c + 4 : n;
        for (size_t k = c + 1; k < end; k++)
            if (h->v[k].key > h->v[best].key) best = k;
        if (h->v[best].key <= last.key) break;
        h->v[i] = h->v[best];
        i = best;
    }
    if (n) h->v[i] = last;
    return top;
}

typedef struct spm_state {
    const tokenizer *t;
    const char *text;
    tok_symbol *sym;
    tok_heap heap;
    bool oom;
} spm_state;

static void try_pair(spm_state *s, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const tok_symbol *l = &s->sym[left], *r = &s->sym[right];
    int32_t id = tok_lookup(s->t, s->text + l->start, l->n + r->n);
    if (id < 0) return;
    tok_bigram b = {.key = bigram_key(s->t->score_order[id], left), .right = right, .size = l->n + r->n};
    if (!heap_push(&s->heap, b)) s->oom = true;
}

static void emit_bytes(const tokenizer *t, const char *p, size_t n, tok_ids *out) {
    for (size_t j = 0; j < n; j++) {
        int32_t id = t->byte_token[(uint8_t)p[j]];
        /* llama.cpp throws when a vocab has no token for a byte; vt emits unk */
        if (id < 0) id = t->unk;
        if (id >= 0) ids_push(out, id);
    }
}

/* Whether a pair can ever merge across the start of symbol k: when it is U+2581
 * and the byte before it never precedes a U+2581 inside a token, no token spans
 * the two, so the text splits there into parts that merge independently (the
 * same result as one queue, with small in-cache heaps). */
static bool hard_boundary(const tokenizer *t, const char *text, const tok_symbol *k) {
    return k->start > 0 && k->n == 3 && !memcmp(text + k->start, "\xe2\x96\x81", 3) &&
           !t->spm_glue[(uint8_t)text[k->start - 1]];
}

vt_status spm_encode(const tokenizer *t, const char *text, size_t len, tok_ids *out) {
    if (len == 0) return VT_OK;
    if (len > INT32_MAX) return vt_errorf(VT_E_RANGE, "tokenizer: text of %zu bytes is too long", len);
    spm_state s = {.t = t, .text = text};
    s.sym = malloc(len * sizeof *s.sym);
    if (!s.sym) return vt_errorf(VT_E_NOMEM, "tokenizer: out of memory (%zu bytes of text)", len);
    int32_t n_sym = 0;
    for (size_t off = 0; off < len;) {
        size_t n = uni_len_utf8_clip(text, off, len);
        s.sym[n_sym] = (tok_symbol){.start = (uint32_t)off, .n = (uint32_t)n, .str = -1};
        off += n;
        n_sym++;
    }
    for (int32_t first = 0, end; first < n_sym && !s.oom; first = end) {
        end = first + 1;
        while (end < n_sym && !hard_boundary(t, text, &s.sym[end])) end++;
        for (int32_t i = first; i < end; i++) {
            s.sym[i].prev = i == first ? -1 : i - 1;
            s.sym[i].next = i + 1 == end ? -1 : i + 1;
        }
        s.heap.n = 0;
        for (int32_t i = first + 1; i < end && !s.oom; i++) try_pair(&s, i - 1, i);
        while (s.heap.n > 0 && !s.oom) {
            tok_bigram b = heap_pop(&s.heap);
            int32_t left = bigram_left(&b);
            tok_symbol *l = &s.sym[left], *r = &s.sym[b.right];
            if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
            l->n += r->n;
            r->n = 0;
            l->next = r->next;
            if (r->next >= 0) s.sym[r->next].prev = left;
            try_pair(&s, l->prev, left);
            try_pair(&s, left, l->next);
        }
        for (int32_t i = first; i != -1 && !s.oom; i = s.sym[i].next) {
            const tok_symbol *y = &s.sym[i];
            int32_t id = tok_lookup(t, text + y->start, y->n);
            if (id >= 0)
                ids_push(out, id);
            else
                emit_bytes(t, text + y->start, y->n, out);
        }
    }
    free(s.heap.v);
    free(s.sym);
    if (s.oom || out->oom) return vt_errorf(VT_E_NOMEM, "tokenizer: out of memory");
    return VT_OK;
}
