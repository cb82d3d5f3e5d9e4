/* Tokenizer loading from GGUF metadata, special-token splitting, pieces and
 * decoding. See tokenizer.h; the merge algorithms are in spm.c and bpe.c, the
 * BPE pre-tokenizers in pretok.c.
 *
 * Metadata (tokenizer.ggml.*), with llama.cpp's defaults:
 *   model          "llama" (SPM) | "gpt2" (BPE) | "gemma4" (BPE over raw UTF-8)
 *   pre            BPE pre-tokenizer name; absent = "default"
 *   tokens         string[n]; scores f32|i32[n] (SPM merge priority); token_type i32[n]
 *                  (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte)
 *   merges         string[m] "left right", rank = index (first one wins); BPE only
 *   bos/eos/eot/eom/unknown/seperator/padding_token_id; an id outside the vocab is
 *                  ignored (the default stays). Defaults: SPM bos 1 eos 2 unk 0;
 *                  gpt2 bos = eos = 11; gemma4 none.
 *   add_bos_token, add_eos_token, add_space_prefix (SPM default true)
 * Like llama.cpp, some token attributes are patched by text: end-of-generation
 * texts (<|im_end|>, <|eot_id|>, ...) become control tokens and EOG, and for
 * Phi-3 (general.name) special tokens eat the whitespace after them. */
#include "tokenizer/tok_impl.h"

#include "base/mapfile.h"
#include "gguf/gguf.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- hashing and the string table ------------------------------------------- */

static inline uint64_t mix64(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0x100000001b3ull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ v) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, s, n);
    return mix64(h ^ v);
}

static inline const char *str_ptr(const strtab *t, int64_t id) { return t->pool + t->off[id]; }

int64_t strtab_find(const strtab *t, const char *s, size_t n) {
    if (!t->slot) return -1;
    for (uint64_t i = hash_bytes(s, n) & t->mask;; i = (i + 1) & t->mask) {
        uint32_t v = t->slot[i];
        if (!v) return -1;
        int64_t id = (int64_t)v - 1;
        if (t->len[id] == n && !memcmp(str_ptr(t, id), s, n)) return id;
    }
}

/* Slot of s in the table: its entry, or the empty slot where it would go. */
static uint64_t strtab_slot(const strtab *t, const char *s, size_t n) {
    for (uint64_t i = hash_bytes(s, n) & t->mask;; i = (i + 1) & t->mask) {
        uint32_t v = t->slot[i];
        if (!v) return i;
        int64_t id = (int64_t)v - 1;
        if (t->len[id] == n && !memcmp(str_ptr(t, id), s, n)) return i;
    }
}

static bool strtab_grow_slots(strtab *t, uint64_t need) {
    uint64_t cap = 1024;
    while (cap < need * 2) cap *= 2;
    if (t->slot && cap <= t->mask + 1) return true;
    uint32_t *old = t->slot;
    uint64_t old_cap = t->slot ? t->mask + 1 : 0;
    t->slot = calloc(cap, sizeof *t->slot);
    if (!t->slot) {
        t->slot = old;
        return false;
    }
    t->mask = cap - 1;
    for (uint64_t i = 0; i < old_cap; i++) {
        if (!old[i]) continue;
        int64_t id = (int64_t)old[i] - 1;
        t->slot[strtab_slot(t, str_ptr(t, id), t->len[id])] = old[i];
    }
    free(old);
    return true;
}

/* Append string s as a new id. With `replace`, an equal string already in the
 * table is shadowed by the new id (token_to_id[text] = i: the last one wins);
 * otherwise the existing id is returned and nothing is added. -1 on OOM. */
static int64_t strtab_add(strtab *t, const char *s, size_t n, bool replace) {
    if (!strtab_grow_slots(t, (uint64_t)t->n + 1)) return -1;
    uint64_t slot = strtab_slot(t, s, n);
    if (t->slot[slot] && !replace) return (int64_t)t->slot[slot] - 1;
    if (t->n == t->cap) {
        int64_t cap = t->cap ? t->cap * 2 : 1024;
        uint64_t *off = realloc(t->off, (size_t)cap * sizeof *off);
        if (!off) return -1;
        t->off = off;
        uint32_t *len = realloc(t->len, (size_t)cap * sizeof *len);
        if (!len) return -1;
        t->len = len;
        t->cap = cap;
    }
    if (t->pool_len + n + 1 > t->pool_cap) {
        size_t cap = t->pool_cap ? t->pool_cap : 4096;
        while (cap < t->pool_len + n + 1) cap *= 2;
        char *p = realloc(t->pool, cap);
        if (!p) return -1;
        t->pool = p;
        t->pool_cap = cap;
    }
    memcpy(t->pool + t->pool_len, s, n);
    t->pool[t->pool_len + n] = 0;
    int64_t id = t->n++;
    t->off[id] = t->pool_len;
    t->len[id] = (uint32_t)n;
    t->pool_len += n + 1;
    t->slot[slot] = (uint32_t)(id + 1);
    return id;
}

static void strtab_free(strtab *t) {
    free(t->pool);
    free(t->off);
    free(t->len);
    free(t->slot);
}

/* ---- merge ranks ------------------------------------------------------------- */

static inline uint64_t pair_key(int64_t l, int64_t r) { return (((uint64_t)l << 32) | (uint64_t)r) + 1; }

int32_t merge_rank(const merge_tab *m, int64_t l, int64_t r) {
    if (!m->key) return -1;
    uint64_t k = pair_key(l, r);
    for (uint64_t i = mix64(k) & m->mask;; i = (i + 1) & m->mask) {
        if (m->key[i] == k) return m->rank[i];
        if (!m->key[i]) return -1;
    }
}

static vt_status load_merges(tokenizer *t, const gguf_kv *kv, const char *name) {
    merge_tab *m = &t->merges;
    uint64_t n = kv->v.arr.n;
    if (n > INT32_MAX) return vt_errorf(VT_E_RANGE, "%s: %" PRIu64 " merges is too many", name, n);
    uint64_t cap = 1024;
    while (cap < n * 2) cap *= 2;
    m->key = calloc(cap, sizeof *m->key);
    m->rank = malloc(cap * sizeof *m->rank);
    m->result = malloc((n ? n : 1) * sizeof *m->result);
    if (!m->key || !m->rank || !m->result) goto oom;
    m->mask = cap - 1;
    m->n_merges = (int64_t)n;
    char *buf = NULL;
    size_t buf_cap = 0;
    for (uint64_t i = 0; i < n; i++) {
        const gguf_str s = kv->v.arr.strs[i];
        m->result[i] = -1;
        /* split at the first space after the first byte, as llama.cpp does */
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        if (!sp) continue; /* would be the pair ("", ""), which never matches */
        size_t ll = (size_t)(sp - s.ptr), rl = s.len - ll - 1;
        int64_t l = strtab_add(&t->str, s.ptr, ll, false);
        int64_t r = l >= 0 ? strtab_add(&t->str, sp + 1, rl, false) : -1;
        if (l < 0 || r < 0 || l > INT32_MAX || r > INT32_MAX) goto oom_buf;
        if (ll + rl > buf_cap) {
            buf_cap = (ll + rl) * 2;
            char *p = realloc(buf, buf_cap);
            if (!p) goto oom_buf;
            buf = p;
        }
        memcpy(buf, s.ptr, ll);
        memcpy(buf + ll, sp + 1, rl);
        int64_t res = strtab_add(&t->str, buf, ll + rl, false);
        if (res < 0 || res > INT32_MAX) goto oom_buf;
        m->result[i] = (int32_t)res;
        uint64_t k = pair_key(l, r);
        uint64_t j = mix64(k) & m->mask;
        while (m->key[j] && m->key[j] != k) j = (j + 1) & m->mask;
        if (!m->key[j]) { /* the first merge of a pair wins */
            m->key[j] = k;
            m->rank[j] = (int32_t)i;
        }
    }
    free(buf);
    return VT_OK;
oom_buf:
    free(buf);
oom:
    return vt_errorf(VT_E_NOMEM, "%s: out of memory loading %" PRIu64 " merges", name, n);
}

/* ---- pre-tokenizer names ------------------------------------------------------- */

enum { PRE_IGNORE_MERGES = 1, PRE_ADD_BOS = 2, PRE_KEEP_SPACES = 4, PRE_NO_BOS = 8, PRE_ESCAPE_WS = 16 };

typedef struct pre_def {
    const char *name;
    pretok_type type;
    int flags;
} pre_def;

/* tokenizer.ggml.pre values vt implements, with llama.cpp's flags for each
 * (PRE_KEEP_SPACES: clean_up_tokenization_spaces off). */
static const pre_def pre_defs[] = {
    {"default", PRETOK_DEFAULT, 0},
    {"llama3", PRETOK_LLAMA3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"llama-v3", PRETOK_LLAMA3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"llama-bpe", PRETOK_LLAMA3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"falcon3", PRETOK_LLAMA3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"falcon-h1", PRETOK_LLAMA3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"pixtral", PRETOK_LLAMA3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"midm-2.0", PRETOK_LLAMA3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"lfm2", PRETOK_LLAMA3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"jina-v5-nano", PRETOK_LLAMA3, PRE_IGNORE_MERGES | PRE_ADD_BOS},
    {"dbrx", PRETOK_LLAMA3, 0},
    {"smaug-bpe", PRETOK_LLAMA3, 0},
    {"glm4", PRETOK_LLAMA3, PRE_NO_BOS},
    {"chatglm-bpe", PRETOK_LLAMA3, PRE_NO_BOS},
    {"deepseek-llm", PRETOK_DEEPSEEK_LLM, PRE_KEEP_SPACES},
    {"deepseek-coder", PRETOK_DEEPSEEK_CODER, PRE_KEEP_SPACES},
    {"falcon", PRETOK_FALCON, 0},
    {"mpt", PRETOK_GPT2, 0},
    {"gpt-2", PRETOK_GPT2, 0},
    {"phi-2", PRETOK_GPT2, 0},
    {"jina-es", PRETOK_GPT2, 0},
    {"jina-de", PRETOK_GPT2, 0},
    {"gigachat", PRETOK_GPT2, 0},
    {"jina-v2-es", PRETOK_GPT2, 0},
    {"jina-v2-de", PRETOK_GPT2, 0},
    {"a.x-4.0", PRETOK_GPT2, 0},
    {"mellum", PRETOK_GPT2, 0},
    {"modern-bert", PRETOK_GPT2, 0},
    {"jina-v1-en", PRETOK_GPT2, 0},
    {"jina-v2-code", PRETOK_GPT2, 0},
    {"roberta-bpe", PRETOK_GPT2, 0},
    {"olmo", PRETOK_GPT2, 0},
    {"jais", PRETOK_GPT2, 0},
    {"exaone4", PRETOK_GPT2, 0},
    {"trillion", PRETOK_GPT2, PRE_KEEP_SPACES},
    {"granite-docling", PRETOK_GPT2, PRE_KEEP_SPACES},
    {"starcoder", PRETOK_STARCODER, 0},
    {"refact", PRETOK_STARCODER, 0},
    {"command-r", PRETOK_STARCODER, PRE_KEEP_SPACES},
    {"smollm", PRETOK_STARCODER, PRE_KEEP_SPACES},
    {"codeshell", PRETOK_STARCODER, 0},
    {"exaone", PRETOK_STARCODER, 0},
    {"minerva-7b", PRETOK_STARCODER, 0},
    {"mellum2", PRETOK_STARCODER, 0},
    {"qwen2", PRETOK_QWEN2, PRE_KEEP_SPACES},
    {"deepseek-r1-qwen", PRETOK_QWEN2, PRE_KEEP_SPACES},
    {"kormo", PRETOK_QWEN2, PRE_KEEP_SPACES},
    {"f2llmv2", PRETOK_QWEN2, PRE_KEEP_SPACES},
    {"megrez", PRETOK_QWEN2, 0},
    {"stablelm2", PRETOK_QWEN2, 0},
    {"hunyuan", PRETOK_QWEN2, PRE_KEEP_SPACES},
    {"solar-open", PRETOK_QWEN2, PRE_KEEP_SPACES},
    {"grok-2", PRETOK_QWEN2, PRE_KEEP_SPACES},
    {"qwen35", PRETOK_QWEN35, PRE_KEEP_SPACES},
    {"gemma4", PRETOK_NEWLINES, PRE_ESCAPE_WS},
    {"granite-embed-multi-311m", PRETOK_NEWLINES, PRE_ESCAPE_WS},
    {"gpt-4o", PRETOK_GPT4O, PRE_KEEP_SPACES},
    {"llama4", PRETOK_GPT4O, PRE_KEEP_SPACES},
    {"kanana2", PRETOK_GPT4O, PRE_KEEP_SPACES},
    {"talkie", PRETOK_GPT4O, PRE_KEEP_SPACES},
    {"minimax-m2", PRETOK_GPT4O, PRE_KEEP_SPACES}, /* llama.cpp's MINIMAX_M2: the same regex */
};

/* ---- metadata helpers ------------------------------------------------------------ */

static bool str_is(gguf_str s, const char *c) { return s.len == strlen(c) && !memcmp(s.ptr, c, s.len); }

/* An optional integer key: true and *out when present, in [0, n) and an integer. */
static bool get_token_id(const gguf_file *f, const char *key, int32_t n, int32_t *out) {
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return false;
    int64_t v;
    switch (kv->type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        if (kv->v.u64 >= (uint64_t)n) return false;
        v = (int64_t)kv->v.u64;
        break;
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        v = kv->v.i64;
        if (v < 0 || v >= n) return false;
        break;
    default: return false;
    }
    *out = (int32_t)v;
    return true;
}

static void get_bool(const gguf_file *f, const char *key, bool *out) {
    const gguf_kv *kv = gguf_find(f, key);
    if (kv && kv->type == GGUF_TYPE_BOOL) *out = kv->v.b;
}

static int32_t arr_i32(const gguf_kv *kv, uint64_t i) {
    int32_t v;
    memcpy(&v, (const char *)kv->v.arr.data + i * 4, 4);
    return v;
}

static float arr_f32(const gguf_kv *kv, uint64_t i) {
    float v;
    memcpy(&v, (const char *)kv->v.arr.data + i * 4, 4);
    return v;
}

/* ---- attributes, EOG, specials --------------------------------------------------- */

static int32_t find_cstr(const tokenizer *t, const char *s) { return tok_lookup(t, s, strlen(s)); }

/* The lowest id whose text is one of names (llama.cpp scans its hash map, whose
 * order is unspecified; vt takes the lowest id). Marks it control. */
static int32_t detect(tokenizer *t, const char *const *names) {
    int32_t best = -1;
    for (const char *const *p = names; *p; p++) {
        int32_t id = find_cstr(t, *p);
        if (id >= 0 && (best < 0 || id < best)) best = id;
    }
    if (best >= 0) t->attr[best] |= TOK_ATTR_CONTROL;
    return best;
}

static void set_eog(tokenizer *t, int32_t id) {
    if (id >= 0 && id < t->n_vocab) t->is_eog[id] = 1;
}

static void setup_eog(tokenizer *t, int32_t fim_pad, int32_t fim_rep, int32_t fim_sep) {
    static const char *const eot_names[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
        "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
        "<end_of_utterance>", NULL};
    static const char *const eom_names[] = {"<|eom_id|>", NULL};
    static const char *const eog_names[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
        "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
        "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
        "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "[e~[", NULL};
    if (t->eot < 0) t->eot = detect(t, eot_names);
    if (t->eom < 0) t->eom = detect(t, eom_names);
    set_eog(t, fim_pad);
    set_eog(t, fim_rep);
    set_eog(t, fim_sep);
    for (const char *const *p = eog_names; *p; p++) {
        int32_t id = find_cstr(t, *p);
        if (id < 0) continue;
        set_eog(t, id);
        t->attr[id] |= TOK_ATTR_CONTROL;
    }
    /* gpt-oss: these are shown, not control */
    static const char *const shown[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};
    for (const char *const *p = shown; *p; p++) {
        int32_t id = find_cstr(t, *p);
        if (id >= 0) t->attr[id] = TOK_ATTR_USER_DEFINED;
    }
    set_eog(t, t->eos);
    set_eog(t, t->eot);
    set_eog(t, t->eom);
    /* o200k_harmony and solar-open: <|end|> ends a message, not the generation */
    int32_t end = find_cstr(t, "<|end|>");
    if (end >= 0 && t->is_eog[end]) {
        bool has_return = false, has_call = false, has_flush = false;
        for (int32_t i = 0; i < t->n_vocab; i++) {
            if (!t->is_eog[i]) continue;
            const char *s = tok_text(t, i);
            has_return |= !strcmp(s, "<|return|>");
            has_call |= !strcmp(s, "<|call|>") || !strcmp(s, "<|calls|>");
            has_flush |= !strcmp(s, "<|flush|>");
        }
        if ((has_return && has_call) || (has_call && has_flush)) {
            t->is_eog[end] = 0;
            t->attr[end] = TOK_ATTR_USER_DEFINED;
        }
    }
    /* gemma4: </s> is a normal token */
    int32_t tr = find_cstr(t, "<|tool_response>"), s = find_cstr(t, "</s>");
    if (tr >= 0 && s >= 0 && t->is_eog[tr] && t->is_eog[s]) {
        t->is_eog[s] = 0;
        t->attr[s] = TOK_ATTR_NORMAL;
    }
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Special tokens (control, user-defined, unknown) in matching priority: longer
 * texts first, then lower ids (llama.cpp's std::sort leaves equal lengths in an
 * unspecified order). */
static vt_status build_specials(tokenizer *t) {
    const uint32_t mask = TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN;
    int32_t n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (t->attr[i] & mask) n++;
    uint64_t *keys = malloc((n ? (size_t)n : 1) * sizeof *keys);
    t->specials = malloc((n ? (size_t)n : 1) * sizeof *t->specials);
    if (!keys || !t->specials) {
        free(keys);
        return VT_E_NOMEM;
    }
    n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (t->attr[i] & mask) keys[n++] = ((uint64_t)(UINT32_MAX - t->str.len[i]) << 32) | (uint32_t)i;
    qsort(keys, (size_t)n, sizeof *keys, cmp_u64);
    for (int32_t k = 0; k < n; k++) t->specials[k] = (int32_t)(keys[k] & 0xffffffffu);
    free(keys);
    t->n_specials = n;
    return VT_OK;
}

/* Trie over the special texts; a node's `special` is the index in specials[] of
 * the first (highest priority) special with that text. */
static vt_status build_trie(tokenizer *t) {
    size_t total = 1;
    for (int32_t k = 0; k < t->n_specials; k++) total += t->str.len[t->specials[k]];
    if (total > INT32_MAX) return VT_E_NOMEM;
    t->trie = malloc(total * sizeof *t->trie);
    if (!t->trie) return VT_E_NOMEM;
    t->trie[0] = (trie_node){.child = -1, .sibling = -1, .special = -1};
    t->n_trie = 1;
    for (int32_t k = 0; k < t->n_specials; k++) {
        int32_t id = t->specials[k];
        const uint8_t *s = (const uint8_t *)tok_text(t, id);
        uint32_t len = t->str.len[id];
        int32_t node = 0;
        for (uint32_t j = 0; j < len; j++) {
            int32_t c = t->trie[node].child;
            while (c >= 0 && t->trie[c].byte != s[j]) c = t->trie[c].sibling;
            if (c < 0) {
                c = t->n_trie++;
                t->trie[c] = (trie_node){.child = -1, .sibling = t->trie[node].child, .special = -1,
                                         .byte = s[j]};
                t->trie[node].child = c;
            }
            node = c;
        }
        if (t->trie[node].special < 0) t->trie[node].special = k;
    }
    return VT_OK;
}

/* ---- pieces ----------------------------------------------------------------------- */

static bool is_hex(char c) { return (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'f'); }
static int hex_val(char c) { return c <= '9' ? c - '0' : (c | 32) - 'a' + 10; }

/* The byte of a <0xNN> token (llama.cpp parses two hex digits at offset 3). */
static uint8_t token_byte(const char *s, size_t n) {
    int v = 0;
    for (size_t i = 3; i < 5 && i < n && is_hex(s[i]); i++) v = v * 16 + hex_val(s[i]);
    return (uint8_t)v;
}

typedef struct buf {
    char *p;
    size_t n, cap;
    bool oom;
} buf;

static void buf_put(buf *b, const void *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

/* Text with U+2581 turned into spaces. */
static void put_unescaped(buf *b, const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        const char *q = memmem(s + i, n - i, "\xe2\x96\x81", 3);
        size_t end = q ? (size_t)(q - s) : n;
        buf_put(b, s + i, end - i);
        if (!q) break;
        buf_put(b, " ", 1);
        i = end + 3;
    }
}

/* Byte-level BPE text back to bytes; a codepoint outside the byte alphabet gives
 * llama.cpp's "[UNK_BYTE_0x..<text>]" marker. */
static void put_bytes_decoded(buf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t adv;
        uint32_t cp = uni_decode((const uint8_t *)s + i, n - i, &adv);
        i += adv;
        int byte = uni_cp_to_byte(cp);
        if (byte >= 0) {
            uint8_t c = (uint8_t)byte;
            buf_put(b, &c, 1);
            continue;
        }
        uint8_t u[4];
        int m = uni_encode(cp, u);
        char hex[16];
        buf_put(b, "[UNK_BYTE_0x", 12);
        for (int j = 0; j < m; j++) {
            snprintf(hex, sizeof hex, "%02x", u[j]);
            buf_put(b, hex, 2);
        }
        buf_put(b, s, n);
        buf_put(b, "]", 1);
    }
}

static vt_status build_pieces(tokenizer *t) {
    buf b = {0};
    t->piece_off = malloc(((size_t)t->n_vocab + 1) * sizeof *t->piece_off);
    if (!t->piece_off) return VT_E_NOMEM;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        t->piece_off[id] = b.n;
        const char *s = tok_text(t, id);
        size_t n = t->str.len[id];
        uint32_t a = t->attr[id];
        if (a & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED)) {
            buf_put(&b, s, n);
        } else if (a & TOK_ATTR_NORMAL) {
            if (t->kind == TOK_KIND_SPM || t->escape_whitespace)
                put_unescaped(&b, s, n);
            else
                put_bytes_decoded(&b, s, n);
        } else if (a & TOK_ATTR_BYTE) {
            uint8_t c = token_byte(s, n);
            buf_put(&b, &c, 1);
        }
        if (b.oom) break;
    }
    t->piece_off[t->n_vocab] = b.n;
    t->piece_pool = b.p;
    if (b.oom) return VT_E_NOMEM;
    return VT_OK;
}

/* ---- load ---------------------------------------------------------------------------- */

static vt_status load(tokenizer *t, const gguf_file *f, const char *name) {
    gguf_str model, pre = {"", 0};
    const gguf_kv *kv = gguf_find(f, "tokenizer.ggml.model");
    if (!kv || kv->type != GGUF_TYPE_STRING)
        return vt_errorf(VT_E_FORMAT, "%s: key 'tokenizer.ggml.model' missing or not a string", name);
    model = kv->v.str;
    kv = gguf_find(f, "tokenizer.ggml.pre");
    if (kv && kv->type == GGUF_TYPE_STRING) pre = kv->v.str;

    int prefl = 0;
    t->escape_whitespace = false;
    t->clean_spaces = false;
    if (str_is(model, "llama")) {
        t->kind = TOK_KIND_SPM;
        t->bos = 1, t->eos = 2, t->unk = 0;
        t->add_space_prefix = true;
        t->add_bos = true;
        t->escape_whitespace = true;
    } else if (str_is(model, "gpt2") || str_is(model, "gemma4")) {
        t->kind = TOK_KIND_BPE;
        t->gemma4 = str_is(model, "gemma4");
        if (t->gemma4) {
            pre = (gguf_str){"gemma4", 6};
            t->bos = t->eos = -1;
        } else {
            t->bos = t->eos = 11;
        }
        t->clean_spaces = true;
        t->byte_encode = true;
        const pre_def *d = NULL;
        for (size_t i = 0; i < sizeof pre_defs / sizeof pre_defs[0]; i++)
            if (str_is(pre, pre_defs[i].name)) d = &pre_defs[i];
        if (!pre.len) d = &pre_defs[0];
        if (!d)
            return vt_errorf(VT_E_UNSUPPORTED, "%s: tokenizer.ggml.pre '%.*s' is not supported", name,
                             (int)(pre.len > 64 ? 64 : pre.len), pre.ptr);
        t->pre = d->type;
        prefl = d->flags;
        t->ignore_merges = prefl & PRE_IGNORE_MERGES;
        if (prefl & PRE_ADD_BOS) t->add_bos = true;
        if (prefl & PRE_KEEP_SPACES) t->clean_spaces = false;
        if (prefl & PRE_ESCAPE_WS) {
            t->escape_whitespace = true;
            t->byte_encode = false;
        }
    } else {
        return vt_errorf(VT_E_UNSUPPORTED,
                         "%s: tokenizer model '%.*s' is not supported (vt implements 'llama' (SentencePiece), "
                         "'gpt2' (byte-level BPE) and 'gemma4')",
                         name, (int)(model.len > 64 ? 64 : model.len), model.ptr);
    }
    get_bool(f, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix);

    const gguf_kv *toks = gguf_find(f, "tokenizer.ggml.tokens");
    if (!toks || toks->type != GGUF_TYPE_ARRAY || toks->v.arr.type != GGUF_TYPE_STRING)
        return vt_errorf(VT_E_FORMAT, "%s: key 'tokenizer.ggml.tokens' missing or not a string array", name);
    uint64_t n = toks->v.arr.n;
    if (n == 0 || n >= INT32_MAX)
        return vt_errorf(VT_E_FORMAT, "%s: tokenizer.ggml.tokens has %" PRIu64 " tokens", name, n);
    t->n_vocab = (int32_t)n;
    const gguf_kv *scores = gguf_find(f, "tokenizer.ggml.scores");
    if (scores) {
        if (scores->type != GGUF_TYPE_ARRAY ||
            (scores->v.arr.type != GGUF_TYPE_FLOAT32 && scores->v.arr.type != GGUF_TYPE_INT32))
            return vt_errorf(VT_E_FORMAT, "%s: tokenizer.ggml.scores is not an f32 or i32 array", name);
        if (scores->v.arr.n < n)
            return vt_errorf(VT_E_FORMAT, "%s: tokenizer.ggml.scores has %" PRIu64 " entries for %" PRIu64 " tokens",
                             name, scores->v.arr.n, n);
    }
    const gguf_kv *types = gguf_find(f, "tokenizer.ggml.token_type");
    if (types) {
        if (types->type != GGUF_TYPE_ARRAY || types->v.arr.type != GGUF_TYPE_INT32)
            return vt_errorf(VT_E_FORMAT, "%s: tokenizer.ggml.token_type is not an i32 array", name);
        if (types->v.arr.n < n)
            return vt_errorf(VT_E_FORMAT, "%s: tokenizer.ggml.token_type has %" PRIu64 " entries for %" PRIu64
                             " tokens", name, types->v.arr.n, n);
    }
    t->score = malloc(n * sizeof *t->score);
    t->attr = malloc(n * sizeof *t->attr);
    t->score_order = malloc(n * sizeof *t->score_order);
    t->is_eog = calloc(n, 1);
    if (!t->score || !t->score_order || !t->attr || !t->is_eog || !strtab_grow_slots(&t->str, n)) goto oom;
    for (uint64_t i = 0; i < n; i++) {
        gguf_str s = toks->v.arr.strs[i];
        char empty[32];
        if (s.len == 0) { /* llama.cpp renames empty tokens so they stay unique */
            int k = snprintf(empty, sizeof empty, "[EMPTY_%" PRIu64 "]", i);
            s = (gguf_str){empty, (uint64_t)k};
        }
        if (s.len > UINT32_MAX) return vt_errorf(VT_E_FORMAT, "%s: token %" PRIu64 " is too long", name, i);
        if (strtab_add(&t->str, s.ptr, s.len, true) != (int64_t)i) goto oom;
        t->score[i] = !scores ? 0.0f
                      : scores->v.arr.type == GGUF_TYPE_FLOAT32 ? arr_f32(scores, i)
                                                                : (float)arr_i32(scores, i);
        t->score_order[i] = float_order(t->score[i]);
        uint32_t a = TOK_ATTR_NORMAL;
        if (types) {
            switch (arr_i32(types, i)) {
            case 1: a = TOK_ATTR_NORMAL; break;
            case 2: a = TOK_ATTR_UNKNOWN; break;
            case 3: a = TOK_ATTR_CONTROL; break;
            case 4: a = TOK_ATTR_USER_DEFINED; break;
            case 5: a = TOK_ATTR_UNUSED; break;
            case 6: a = TOK_ATTR_BYTE; break;
            default: a = 0; break;
            }
        }
        t->attr[i] = a;
    }

    if (t->kind == TOK_KIND_BPE) {
        const gguf_kv *merges = gguf_find(f, "tokenizer.ggml.merges");
        if (!merges || merges->type != GGUF_TYPE_ARRAY || merges->v.arr.type != GGUF_TYPE_STRING)
            return vt_errorf(VT_E_FORMAT, "%s: key 'tokenizer.ggml.merges' missing or not a string array", name);
        VT_TRY(load_merges(t, merges, name));
    }

    /* special ids: defaults outside the vocab are dropped, metadata outside it ignored */
    t->eot = t->eom = t->sep = t->pad = -1;
    if (t->kind == TOK_KIND_BPE) t->unk = -1;
    if (prefl & PRE_NO_BOS) t->bos = -1;
    int32_t *ids[] = {&t->bos, &t->eos, &t->unk};
    for (size_t i = 0; i < 3; i++)
        if (*ids[i] >= t->n_vocab) *ids[i] = -1;
    int32_t fim_pad = -1, fim_rep = -1, fim_sep = -1, scratch;
    get_token_id(f, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos);
    get_token_id(f, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos);
    get_token_id(f, "tokenizer.ggml.eot_token_id", t->n_vocab, &t->eot);
    get_token_id(f, "tokenizer.ggml.eom_token_id", t->n_vocab, &t->eom);
    get_token_id(f, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk);
    get_token_id(f, "tokenizer.ggml.seperator_token_id", t->n_vocab, &t->sep);
    get_token_id(f, "tokenizer.ggml.padding_token_id", t->n_vocab, &t->pad);
    get_token_id(f, "tokenizer.ggml.fim_pad_token_id", t->n_vocab, &fim_pad);
    get_token_id(f, "tokenizer.ggml.fim_rep_token_id", t->n_vocab, &fim_rep);
    get_token_id(f, "tokenizer.ggml.fim_sep_token_id", t->n_vocab, &fim_sep);
    get_bool(f, "tokenizer.ggml.add_bos_token", &t->add_bos);
    get_bool(f, "tokenizer.ggml.add_eos_token", &t->add_eos);
    if (t->gemma4) t->add_bos = true; /* llama.cpp forces it for Gemma 4 */

    /* FIM tokens found by text become control tokens (and pad/repo/sep EOG) */
    static const char *const fim_pre[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
        "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>", "\xe2\x96\x81<PRE>",
        "<|code_prefix|>", "<|prefix|>", NULL};
    static const char *const fim_suf[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
        "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>", "<SUF>", "\xe2\x96\x81<SUF>",
        "<|code_suffix|>", "<|suffix|>", NULL};
    static const char *const fim_mid[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
        "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>", "\xe2\x96\x81<MID>",
        "<|code_middle|>", "<|middle|>", NULL};
    static const char *const fim_pad_n[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
    static const char *const fim_rep_n[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
                                            "<reponame>", NULL};
    static const char *const fim_sep_n[] = {"<|file_sep|>", NULL};
    if (!get_token_id(f, "tokenizer.ggml.fim_pre_token_id", t->n_vocab, &scratch) &&
        !get_token_id(f, "tokenizer.ggml.prefix_token_id", t->n_vocab, &scratch))
        detect(t, fim_pre);
    if (!get_token_id(f, "tokenizer.ggml.fim_suf_token_id", t->n_vocab, &scratch) &&
        !get_token_id(f, "tokenizer.ggml.suffix_token_id", t->n_vocab, &scratch))
        detect(t, fim_suf);
    if (!get_token_id(f, "tokenizer.ggml.fim_mid_token_id", t->n_vocab, &scratch) &&
        !get_token_id(f, "tokenizer.ggml.middle_token_id", t->n_vocab, &scratch))
        detect(t, fim_mid);
    if (fim_pad < 0) fim_pad = detect(t, fim_pad_n);
    if (fim_rep < 0) fim_rep = detect(t, fim_rep_n);
    if (fim_sep < 0) fim_sep = detect(t, fim_sep_n);
    setup_eog(t, fim_pad, fim_rep, fim_sep);

    /* SPM: which bytes a token glues to a following U+2581 (see spm.c) */
    for (int32_t i = 0; i < t->n_vocab && t->kind == TOK_KIND_SPM; i++) {
        const char *s = tok_text(t, i);
        size_t len = t->str.len[i];
        for (const char *q = s; (q = memmem(q, len - (size_t)(q - s), "\xe2\x96\x81", 3)) != NULL; q++)
            if (q > s) t->spm_glue[(uint8_t)q[-1]] = true;
    }

    /* fallback byte tokens */
    for (int b = 0; b < 256; b++) {
        char hex[8], one = (char)b;
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        if (t->kind == TOK_KIND_SPM) {
            t->byte_token[b] = find_cstr(t, hex);
            if (t->byte_token[b] < 0) t->byte_token[b] = tok_lookup(t, &one, 1);
        } else if (t->byte_encode) {
            t->byte_token[b] = tok_lookup(t, &one, 1);
        } else {
            t->byte_token[b] = find_cstr(t, hex);
        }
    }

    if (build_specials(t) != VT_OK || build_pieces(t) != VT_OK) goto oom;

    /* per-model attributes (after the piece cache, as in llama.cpp) */
    kv = gguf_find(f, "general.name");
    char lname[256] = "";
    if (kv && kv->type == GGUF_TYPE_STRING) {
        size_t k = kv->v.str.len < sizeof lname - 1 ? kv->v.str.len : sizeof lname - 1;
        for (size_t i = 0; i < k; i++) {
            char c = kv->v.str.ptr[i];
            lname[i] = (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
        }
        lname[k] = 0;
    }
    kv = gguf_find(f, "general.architecture");
    gguf_str arch = kv && kv->type == GGUF_TYPE_STRING ? kv->v.str : (gguf_str){"", 0};
    if (str_is(pre, "jina-v2-de") || str_is(pre, "jina-v2-es") || str_is(pre, "jina-v2-code") ||
        str_is(arch, "nomic-bert-moe") || str_is(arch, "jina-bert-v3")) {
        int32_t id = find_cstr(t, "<mask>");
        if (id >= 0) t->attr[id] |= TOK_ATTR_LSTRIP;
    } else if (strstr(lname, "phi-3") || strstr(lname, "phi3")) {
        for (int32_t k = 0; k < t->n_specials; k++) t->attr[t->specials[k]] |= TOK_ATTR_RSTRIP;
        int32_t id = find_cstr(t, "</s>");
        if (id >= 0) t->attr[id] |= TOK_ATTR_RSTRIP;
        static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
        for (size_t i = 0; i < 3; i++) {
            id = find_cstr(t, keep[i]);
            if (id >= 0) t->attr[id] &= ~(uint32_t)TOK_ATTR_RSTRIP;
        }
    } else if (strstr(lname, "modern-bert")) {
        int32_t id = find_cstr(t, "[MASK]");
        if (id >= 0) t->attr[id] |= TOK_ATTR_LSTRIP;
    }

    if (build_trie(t) != VT_OK) goto oom;
    return VT_OK;
oom:
    return vt_errorf(VT_E_NOMEM, "%s: out of memory loading a vocabulary of %" PRIu64 " tokens", name, n);
}

vt_status tok_load(const gguf_file *f, tokenizer **out) {
    *out = NULL;
    tokenizer *t = calloc(1, sizeof *t);
    if (!t) return vt_errorf(VT_E_NOMEM, "tokenizer: out of memory");
    vt_status st = load(t, f, "tokenizer");
    if (st != VT_OK) {
        tok_free(t);
        return st;
    }
    *out = t;
    return VT_OK;
}

vt_status tok_load_file(const char *path, tokenizer **out) {
    *out = NULL;
    mapfile m;
    gguf_file g;
    VT_TRY(mapfile_open(path, &m));
    vt_status st = gguf_parse(m.data, m.size, path, &g);
    if (st == VT_OK) {
        tokenizer *t = calloc(1, sizeof *t);
        st = t ? load(t, &g, path) : vt_errorf(VT_E_NOMEM, "%s: out of memory", path);
        if (st == VT_OK)
            *out = t;
        else
            tok_free(t);
        gguf_free(&g);
    }
    mapfile_close(&m);
    return st;
}

void tok_free(tokenizer *t) {
    if (!t) return;
    strtab_free(&t->str);
    free(t->score);
    free(t->score_order);
    free(t->attr);
    free(t->merges.key);
    free(t->merges.rank);
    free(t->merges.result);
    free(t->piece_pool);
    free(t->piece_off);
    free(t->is_eog);
    free(t->specials);
    free(t->trie);
    free(t);
}

/* ---- accessors -------------------------------------------------------------------- */

int32_t tok_n_vocab(const tokenizer *t) { return t->n_vocab; }
int32_t tok_bos(const tokenizer *t) { return t->bos; }
int32_t tok_eos(const tokenizer *t) { return t->eos; }
bool tok_add_bos(const tokenizer *t) { return t->add_bos; }
bool tok_add_eos(const tokenizer *t) { return t->add_eos; }

bool tok_strips_first_space(const tokenizer *t) { return t->add_space_prefix; }

bool tok_is_eog(const tokenizer *t, int32_t id) { return id >= 0 && id < t->n_vocab && t->is_eog[id]; }

bool tok_is_control(const tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab && (t->attr[id] & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN));
}

int32_t tok_find(const tokenizer *t, const char *text) { return find_cstr(t, text); }

int32_t tok_special_id(const tokenizer *t, const char *text) {
    const int32_t id = find_cstr(t, text);
    return id >= 0 && (t->attr[id] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)) ? id : -1;
}

const char *tok_text(const tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab ? str_ptr(&t->str, id) : NULL;
}

/* ---- encode ----------------------------------------------------------------------- */

typedef struct frag {
    size_t off, len;
    int32_t token; /* -1: raw text */
} frag;

typedef struct occ {
    int32_t special; /* index into specials[]: priority */
    size_t pos;
} occ;

static int cmp_occ(const void *a, const void *b) {
    const occ *x = a, *y = b;
    if (x->special != y->special) return x->special < y->special ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static inline bool c_isspace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* Split special-token texts out of text, as llama.cpp's tokenizer_st_partition:
 * specials are taken in priority order (longer first), each at its leftmost
 * non-overlapping occurrences inside what is still raw text; LSTRIP/RSTRIP
 * specials also swallow the adjacent whitespace. */
static vt_status partition(const tokenizer *t, const char *text, size_t len, bool parse_special,
                           frag **out, size_t *n_out) {
    vt_status st = VT_OK;
    occ *oc = NULL;
    size_t n_oc = 0, cap_oc = 0;
    uint8_t *used = NULL; /* 0 raw, 1 special, 2 stripped */
    int32_t *tok_at = NULL;
    frag *fr = NULL;
    size_t n_fr = 0;
    const uint32_t skip = parse_special ? 0 : (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN);

    for (size_t i = 0; i < len && t->n_specials > 0; i++) {
        int32_t node = 0;
        for (size_t j = i; j < len; j++) {
            int32_t c = t->trie[node].child;
            while (c >= 0 && t->trie[c].byte != (uint8_t)text[j]) c = t->trie[c].sibling;
            if (c < 0) break;
            node = c;
            int32_t k = t->trie[node].special;
            if (k < 0 || (t->attr[t->specials[k]] & skip)) continue;
            if (n_oc == cap_oc) {
                cap_oc = cap_oc ? cap_oc * 2 : 16;
                occ *p = realloc(oc, cap_oc * sizeof *p);
                if (!p) goto oom;
                oc = p;
            }
            oc[n_oc++] = (occ){k, i};
        }
    }
    if (n_oc > 0) {
        qsort(oc, n_oc, sizeof *oc, cmp_occ);
        used = calloc(len, 1);
        tok_at = malloc(len * sizeof *tok_at);
        if (!used || !tok_at) goto oom;
        size_t last_end = 0;
        for (size_t i = 0; i < n_oc; i++) {
            if (i == 0 || oc[i].special != oc[i - 1].special) last_end = 0;
            int32_t id = t->specials[oc[i].special];
            size_t p = oc[i].pos, l = t->str.len[id];
            if (p < last_end) continue;
            bool free_run = true;
            for (size_t j = p; j < p + l && free_run; j++) free_run = !used[j];
            if (!free_run) continue;
            memset(used + p, 1, l);
            tok_at[p] = id;
            last_end = p + l;
            uint32_t a = t->attr[id];
            if ((a & TOK_ATTR_LSTRIP) && p > 0 && !used[p - 1])
                for (size_t j = p; j > 0 && !used[j - 1] && c_isspace(text[j - 1]); j--) used[j - 1] = 2;
            if ((a & TOK_ATTR_RSTRIP) && p + l < len && !used[p + l])
                for (size_t j = p + l; j < len && !used[j] && c_isspace(text[j]); j++) used[j] = 2;
        }
    }
    fr = malloc((2 * n_oc + 1) * sizeof *fr);
    if (!fr) goto oom;
    for (size_t i = 0; i < len;) {
        if (!used || !used[i]) {
            size_t j = i;
            while (j < len && (!used || !used[j])) j++;
            fr[n_fr++] = (frag){i, j - i, -1};
            i = j;
        } else if (used[i] == 2) {
            i++;
        } else {
            int32_t id = tok_at[i];
            fr[n_fr++] = (frag){i, t->str.len[id], id};
            i += t->str.len[id];
        }
    }
    *out = fr;
    *n_out = n_fr;
    goto done;
oom:
    st = vt_errorf(VT_E_NOMEM, "tokenizer: out of memory splitting special tokens");
    free(fr);
done:
    free(oc);
    free(used);
    free(tok_at);
    return st;
}

vt_status tok_encode(const tokenizer *t, const char *text, size_t len, bool add_special,
                     bool parse_special, int32_t **ids, int64_t *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    if (len > ((size_t)INT32_MAX) / 8)
        return vt_errorf(VT_E_RANGE, "tokenizer: text of %zu bytes is too long (limit %d)", len, INT32_MAX / 8);
    if (!text && len) return vt_errorf(VT_E_INVALID, "tokenizer: NULL text");
    tok_ids o = {0};
    frag *fr = NULL;
    size_t n_fr = 0;
    char *esc = NULL;
    vt_status st = VT_OK;
    if (len > 0) {
        st = partition(t, text, len, parse_special, &fr, &n_fr);
        if (st != VT_OK) return st;
    }
    if (add_special && t->add_bos && t->bos >= 0) ids_push(&o, t->bos);
    if (t->escape_whitespace) {
        esc = malloc(len * 3 + 4);
        if (!esc) goto oom;
    }
    bool prev_special = true; /* SPM: a space goes before the first fragment */
    for (size_t i = 0; i < n_fr && st == VT_OK && !o.oom; i++) {
        if (fr[i].token >= 0) {
            ids_push(&o, fr[i].token);
            prev_special = true;
            continue;
        }
        const char *s = text + fr[i].off;
        size_t n = fr[i].len;
        if (t->escape_whitespace) {
            size_t k = 0;
            if (t->kind == TOK_KIND_SPM && t->add_space_prefix && prev_special) {
                memcpy(esc, "\xe2\x96\x81", 3);
                k = 3;
            }
            for (size_t j = 0; j < n; j++) {
                if (s[j] == ' ') {
                    memcpy(esc + k, "\xe2\x96\x81", 3);
                    k += 3;
                } else {
                    esc[k++] = s[j];
                }
            }
            s = esc;
            n = k;
        }
        st = t->kind == TOK_KIND_SPM ? spm_encode(t, s, n, &o) : bpe_encode(t, s, n, &o);
        prev_special = false;
    }
    if (st == VT_OK && add_special && t->add_eos && t->eos >= 0) ids_push(&o, t->eos);
    if (st == VT_OK && o.oom) goto oom;
    free(esc);
    free(fr);
    if (st != VT_OK) {
        free(o.v);
        return st;
    }
    *ids = o.v;
    *n_ids = o.n;
    return VT_OK;
oom:
    free(esc);
    free(fr);
    free(o.v);
    return vt_errorf(VT_E_NOMEM, "tokenizer: out of memory encoding %zu bytes", len);
}

/* ---- pieces and decode ------------------------------------------------------------ */

static bool piece_of(const tokenizer *t, int32_t id, bool render_special, const char **p, size_t *n) {
    if (id < 0 || id >= t->n_vocab) return false;
    if (!render_special && (t->attr[id] & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL))) {
        *p = "";
        *n = 0;
        return true;
    }
    *p = t->piece_pool ? t->piece_pool + t->piece_off[id] : "";
    *n = (size_t)(t->piece_off[id + 1] - t->piece_off[id]);
    return true;
}

int64_t tok_piece(const tokenizer *t, int32_t id, bool render_special, char *buf, size_t cap) {
    const char *p;
    size_t n;
    if (!piece_of(t, id, render_special, &p, &n)) return -1;
    if (buf) memcpy(buf, p, n < cap ? n : cap);
    return (int64_t)n;
}

/* clean_up_tokenization_spaces, as llama.cpp's detokenize does it, in place:
 * " ?" " !" " ." " ," lose the space; " ' " becomes "'"; " 's" " 'm" " 're" " 've"
 * lose the space. Returns the new length. */
static size_t clean_spaces(char *text, size_t total) {
    size_t total1 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total1; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) total--;
        text[total++] = x;
    }
    size_t total2 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total2; i++) {
        char x = text[i];
        if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            total--;
            text[++i] = '\0';
        }
        text[total++] = x;
    }
    size_t total3 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total3; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
            char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm') {
                total--;
            } else if (x1 != 't' && x1 != 'd' && i + 2 < total3) {
                char x2 = text[i + 2];
                if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) total--;
            }
        }
        text[total++] = x;
    }
    return total;
}

vt_status tok_decode(const tokenizer *t, const int32_t *ids, int64_t n, bool render_special,
                     char **out, size_t *out_len) {
    *out = NULL;
    if (out_len) *out_len = 0;
    buf b = {0};
    bool remove_space = t->add_space_prefix;
    for (int64_t i = 0; i < n; i++) {
        const char *p;
        size_t len;
        if (!piece_of(t, ids[i], render_special, &p, &len)) {
            free(b.p);
            return vt_errorf(VT_E_RANGE, "tokenizer: token id %d at position %" PRId64 " is outside the vocabulary (%d)",
                             ids[i], i, t->n_vocab);
        }
        if (remove_space && len > 0 && p[0] == ' ') {
            p++;
            len--;
        }
        remove_space = false;
        buf_put(&b, p, len);
    }
    buf_put(&b, "", 0); /* make sure there is a buffer for the NUL */
    if (b.oom) {
        free(b.p);
        return vt_errorf(VT_E_NOMEM, "tokenizer: out of memory decoding %" PRId64 " tokens", n);
    }
    if (t->clean_spaces) b.n = clean_spaces(b.p, b.n);
    b.p[b.n] = 0;
    *out = b.p;
    if (out_len) *out_len = b.n;
    return VT_OK;
}

size_t tok_utf8_complete_prefix(const char *s, size_t n) {
    size_t back = 0;
    while (back < n && back < 4 && ((uint8_t)s[n - 1 - back] & 0xc0) == 0x80) back++;
    if (back == n || back == 4) return n; /* only continuation bytes: nothing to wait for */
    uint8_t lead = (uint8_t)s[n - 1 - back];
    size_t need = lead >= 0xf0 && lead < 0xf8 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
    if (lead >= 0xf8) need = 1;
    return back + 1 < need ? n - 1 - back : n;
}
