/* Byte-level BPE, as llama.cpp's llm_tokenizer_bpe: pre-tokenize into words,
 * byte-encode each word (GPT-2 alphabet; gemma4 keeps raw UTF-8), split it into
 * UTF-8 characters and merge the adjacent pair of lowest merge rank until none is
 * left. A final piece that is no token falls back to single-byte tokens, and is
 * dropped where there are none (as llama.cpp does).
 *
 * Symbols carry the interned id of their text, so a pair's rank is one hash probe
 * on two integers, and the merged text's id comes from the merge table. */
#include "tokenizer/tok_impl.h"

#include <string.h>

typedef struct bpe_state {
    const tokenizer *t;
    const char *word;
    tok_symbol *sym;
    size_t sym_cap;
    tok_heap heap;
    bool oom;
} bpe_state;

static void try_pair(bpe_state *s, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const tok_symbol *l = &s->sym[left], *r = &s->sym[right];
    if (l->str < 0 || r->str < 0) return;
    int32_t rank = merge_rank(&s->t->merges, l->str, r->str);
    if (rank < 0) return;
    tok_bigram b = {.key = bigram_key(UINT32_MAX - (uint32_t)rank, left), .right = right, .size = l->n + r->n};
    if (!heap_push(&s->heap, b)) s->oom = true;
}

static void emit_piece(const tokenizer *t, const char *p, size_t n, tok_ids *out) {
    int32_t id = tok_lookup(t, p, n);
    if (id >= 0) {
        ids_push(out, id);
        return;
    }
    for (size_t j = 0; j < n; j++) {
        id = t->byte_token[(uint8_t)p[j]];
        if (id >= 0) ids_push(out, id);
    }
}

static void merge_word(bpe_state *s, const char *w, size_t len, tok_ids *out) {
    const tokenizer *t = s->t;
    if (t->ignore_merges || (t->gemma4 && strspn(w, "\n") >= len)) {
        int32_t id = tok_lookup(t, w, len);
        if (id >= 0) {
            ids_push(out, id);
            return;
        }
    }
    if (len > s->sym_cap) {
        tok_symbol *p = realloc(s->sym, len * sizeof *p);
        if (!p) {
            s->oom = true;
            return;
        }
        s->sym = p;
        s->sym_cap = len;
    }
    int32_t n_sym = 0;
    for (size_t off = 0; off < len;) {
        size_t n = uni_len_utf8_clip(w, off, len);
        s->sym[n_sym] = (tok_symbol){.start = (uint32_t)off, .n = (uint32_t)n, .prev = n_sym - 1,
                                     .next = off + n == len ? -1 : n_sym + 1,
                                     .str = strtab_find(&t->str, w + off, n)};
        off += n;
        n_sym++;
    }
    s->heap.n = 0;
    for (int32_t i = 1; i < n_sym && !s->oom; i++) try_pair(s, i - 1, i);
    while (s->heap.n > 0 && !s->oom) {
        tok_bigram b = heap_pop(&s->heap);
        int32_t left = bigram_left(&b);
        tok_symbol *l = &s->sym[left], *r = &s->sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        int32_t rank = (int32_t)(UINT32_MAX - (uint32_t)(b.key >> 32));
        l->n += r->n;
        l->str = t->merges.result[rank];
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s->sym[r->next].prev = left;
        try_pair(s, l->prev, left);
        try_pair(s, left, l->next);
    }
    for (int32_t i = 0; i != -1 && !s->oom; i = s->sym[i].next) {
        const tok_symbol *y = &s->sym[i];
        emit_piece(t, w + y->start, y->n, out);
    }
}

vt_status bpe_encode(const tokenizer *t, const char *text, size_t len, tok_ids *out) {
    if (len == 0) return VT_OK;
    if (len > INT32_MAX / 8) return vt_errorf(VT_E_RANGE, "tokenizer: text of %zu bytes is too long", len);
    vt_status st = VT_OK;
    bpe_state s = {.t = t};
    pretok_words words = {0};
    uint32_t *cps = malloc(len * sizeof *cps);
    char *wb = malloc(len * 8 + 1); /* a codepoint is <= 4 bytes, each <= 2 once byte-encoded */
    if (!cps || !wb) goto oom;
    size_t n_cp = uni_decode_all((const uint8_t *)text, len, cps);
    st = pretok_split(t->pre, cps, n_cp, &words);
    if (st != VT_OK) goto done;
    size_t start = 0;
    for (size_t i = 0; i < words.n && !s.oom && !out->oom; i++) {
        size_t wl = 0;
        for (size_t k = start; k < start + words.len[i]; k++) {
            uint8_t u[4];
            int n = uni_encode(cps[k], u);
            for (int j = 0; j < n; j++) {
                if (!t->byte_encode) {
                    wb[wl++] = (char)u[j];
                    continue;
                }
                uint8_t e[4];
                int m = uni_encode(uni_byte_to_cp(u[j]), e);
                memcpy(wb + wl, e, (size_t)m);
                wl += (size_t)m;
            }
        }
        wb[wl] = 0;
        start += words.len[i];
        merge_word(&s, wb, wl, out);
    }
    if (s.oom || out->oom) goto oom;
    goto done;
oom:
    st = vt_errorf(VT_E_NOMEM, "tokenizer: out of memory (%zu bytes of text)", len);
done:
    free(words.len);
    free(s.sym);
    free(s.heap.v);
    free(wb);
    free(cps);
    return st;
}
