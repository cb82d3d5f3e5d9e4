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

static inline bool bigram_before(const tok_bigram *a, const tok_bigram *b) {
    return a->key > b->key || (a->key == b->key && a->left < b->left);
}

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
        size_t parent = (i - 1) / 2;
        if (!bigram_before(&b, &h->v[parent])) break;
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
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bigram_before(&h->v[c + 1], &h->v[c])) c++;
        if (!bigram_before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
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
    tok_bigram b = {.key = s->t->score[id], .left = left, .right = right, .size = l->n + r->n};
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

vt_status spm_encode(const tokenizer *t, const char *text, size_t len, tok_ids *out) {
    if (len == 0) return VT_OK;
    if (len > INT32_MAX) return vt_errorf(VT_E_RANGE, "tokenizer: text of %zu bytes is too long", len);
    spm_state s = {.t = t, .text = text};
    s.sym = malloc(len * sizeof *s.sym);
    if (!s.sym) return vt_errorf(VT_E_NOMEM, "tokenizer: out of memory (%zu bytes of text)", len);
    int32_t n_sym = 0;
    for (size_t off = 0; off < len;) {
        size_t n = uni_len_utf8_clip(text, off, len);
        s.sym[n_sym] = (tok_symbol){.start = (uint32_t)off, .n = (uint32_t)n, .prev = n_sym - 1,
                                    .next = off + n == len ? -1 : n_sym + 1, .str = -1};
        off += n;
        n_sym++;
    }
    for (int32_t i = 1; i < n_sym && !s.oom; i++) try_pair(&s, i - 1, i);
    while (s.heap.n > 0 && !s.oom) {
        tok_bigram b = heap_pop(&s.heap);
        tok_symbol *l = &s.sym[b.left], *r = &s.sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s.sym[r->next].prev = b.left;
        try_pair(&s, l->prev, b.left);
        try_pair(&s, b.left, l->next);
    }
    if (!s.oom) {
        for (int32_t i = 0; i != -1; i = s.sym[i].next) {
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
