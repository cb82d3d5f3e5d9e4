/* vt's tokenizer against the reference llama.cpp (llama_tokenize,
 * llama_token_to_piece, llama_detokenize) on every vocabulary vt loads: the
 * vocab-only GGUFs and the full models. For each: BOS/EOS ids and flags, EOG
 * tokens and the piece of every token (with and without render_special); then
 * encode (all four add_special x parse_special) and decode of the test-vector
 * texts, random Unicode strings, random bytes (invalid UTF-8), concatenations of
 * random token texts and of special-token texts with whitespace around them.
 *
 * Pre-tokenizers no vocab here carries (o200k's "gpt-4o") are compared on a
 * real vocabulary retagged with that tokenizer.ggml.pre: llama.cpp then runs its
 * regex with that vocab's merges, over the vocab's texts plus hard cases. The
 * retagged copy also gets o200k_harmony's (gpt-oss) special tokens.
 *
 * Inputs that make llama.cpp throw are avoided: codepoints past U+10FFFF (bytes
 * F4-F7 are left out of random bytes) and, for SPM vocabs without byte tokens,
 * characters missing from the vocab. VT_TOK_LLAMA_N sets the random strings per
 * vocab and kind (default 25). */
#include "llama.h"
#include "llama_ref.h"
#include "tokenizer/tokenizer.h"
#include "test.h"

#include <stdint.h>
#include <unistd.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static int put_utf8(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A codepoint from a mix that exercises the pre-tokenizers. */
static uint32_t random_cp(void) {
    static const uint32_t spaces[] = {' ', ' ', ' ', '\n', '\t', '\r', 0x0B, 0x0C, 0x1C, 0x85, 0xA0,
                                      0x1680, 0x2000, 0x2028, 0x3000, 0x200B};
    static const char punct[] = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
    static const char contr[] = "stmdSTMDrevlRVEL";
    switch (rnd() % 12) {
    case 0: case 1: return 'a' + rnd() % 26;
    case 2: return 'A' + rnd() % 26;
    case 3: return spaces[rnd() % (sizeof spaces / sizeof spaces[0])];
    case 4: return '0' + rnd() % 10;
    case 5: return (uint32_t)punct[rnd() % (sizeof punct - 1)];
    case 6: return rnd() % 2 ? '\'' : (uint32_t)contr[rnd() % (sizeof contr - 1)];
    case 7: { /* scripts: Latin-1, Greek, Cyrillic, Devanagari (+marks), CJK, Hangul, Kana */
        static const uint32_t base[][2] = {{0xC0, 0x100}, {0x391, 0x3CA}, {0x410, 0x450}, {0x900, 0x97F},
                                           {0x4E00, 0x4F00}, {0xAC00, 0xAD00}, {0x3040, 0x30FF},
                                           {0x300, 0x36F}, {0xFF01, 0xFF5E}, {0x2010, 0x2030}};
        int k = (int)(rnd() % 10);
        return base[k][0] + rnd() % (base[k][1] - base[k][0]);
    }
    case 8: return 0x1F300 + rnd() % 0x300; /* emoji */
    case 9: return 0x200D;                  /* ZWJ */
    case 10: return 0x80 + rnd() % 0x780;
    default: {
        uint32_t cp = rnd() % 0x110000;
        return cp;
    }
    }
}

static size_t random_unicode(char *out, size_t cap) {
    size_t n = 0, len = 1 + rnd() % 40;
    for (size_t i = 0; i < len && n + 4 < cap; i++) n += (size_t)put_utf8(random_cp(), out + n);
    return n;
}

static size_t random_bytes(char *out, size_t cap) {
    size_t len = 1 + rnd() % 24;
    if (len > cap) len = cap;
    for (size_t i = 0; i < len; i++) {
        uint8_t b;
        do {
            b = rnd() % 4 ? (uint8_t)rnd() : (uint8_t)"a \n'\x80\xbf\xc3\xe2\xf0"[rnd() % 9];
        } while (b >= 0xf4 && b <= 0xf7);
        out[i] = (char)b;
    }
    return len;
}

/* Concatenated texts of random tokens (or, with specials_only, of control and
 * user-defined tokens), with spaces and newlines between some of them. */
static size_t random_tokens(const tokenizer *t, const int32_t *pool, int32_t n_pool, char *out, size_t cap) {
    size_t n = 0, len = 1 + rnd() % 8;
    for (size_t i = 0; i < len && n_pool > 0; i++) {
        const char *s = tok_text(t, pool[rnd() % (uint32_t)n_pool]);
        size_t l = strlen(s);
        if (n + l + 2 >= cap) break;
        memcpy(out + n, s, l);
        n += l;
        uint32_t r = rnd() % 6;
        if (r == 0) out[n++] = ' ';
        if (r == 1) out[n++] = '\n';
    }
    return n;
}

typedef struct stats {
    int encode_cases, encode_bad, decode_bad;
} stats;

/* For SPM vocabs without byte tokens: a text llama.cpp would throw on (vt gives
 * unk for the missing bytes). */
static bool has_missing_chars(const tokenizer *t, const char *s, size_t n) {
    int32_t *ids;
    int64_t n_ids;
    bool missing = false;
    if (tok_encode(t, s, n, false, false, &ids, &n_ids) != VT_OK) return true;
    for (int64_t i = 0; i < n_ids; i++) missing |= ids[i] == 0;
    free(ids);
    return missing;
}

static bool spm_no_bytes;

static void compare_text(const struct llama_vocab *lv, const tokenizer *t, const char *name, const char *s,
                         size_t n, stats *st) {
    static int32_t ref[1 << 18];
    if (spm_no_bytes && has_missing_chars(t, s, n)) return;
    for (int mode = 0; mode < 4; mode++) {
        bool add_special = mode & 1, parse_special = mode & 2;
        int32_t nr = llama_tokenize(lv, s, (int32_t)n, ref, 1 << 18, add_special, parse_special);
        int32_t *ids = NULL;
        int64_t n_ids = 0;
        vt_status rc = tok_encode(t, s, n, add_special, parse_special, &ids, &n_ids);
        st->encode_cases++;
        bool same = rc == VT_OK && nr >= 0 && n_ids == nr &&
                    (nr == 0 || !memcmp(ids, ref, (size_t)nr * sizeof *ids)); /* ids is NULL when empty */
        if (!same) {
            if (st->encode_bad++ < 5) {
                fprintf(stderr, "%s: encode differs (add_special %d parse_special %d) for '", name, add_special,
                        parse_special);
                for (size_t i = 0; i < n; i++) fprintf(stderr, (uint8_t)s[i] < 0x20 || (uint8_t)s[i] >= 0x7f ? "\\x%02x" : "%c", (uint8_t)s[i]);
                fprintf(stderr, "'\n  llama:");
                for (int32_t i = 0; i < nr; i++) fprintf(stderr, " %d", ref[i]);
                fprintf(stderr, "\n  vt:   ");
                for (int64_t i = 0; i < n_ids; i++) fprintf(stderr, " %d", ids[i]);
                fprintf(stderr, "\n");
            }
            free(ids);
            continue;
        }
        /* decode the same ids both ways */
        for (int special = 0; special < 2; special++) {
            static char text[1 << 18];
            int32_t nt = llama_detokenize(lv, ref, nr, text, (int32_t)sizeof text, false, special);
            char *mine = NULL;
            size_t mine_len = 0;
            vt_status rd = tok_decode(t, ids, n_ids, special, &mine, &mine_len);
            if (rd != VT_OK || nt < 0 || (size_t)nt != mine_len || memcmp(text, mine, mine_len)) {
                if (st->decode_bad++ < 5)
                    fprintf(stderr, "%s: decode differs (special %d): llama '%.*s' vt '%s'\n", name, special,
                            nt < 0 ? 0 : nt, text, mine ? mine : "(error)");
            }
            free(mine);
        }
        free(ids);
    }
}

/* Compare vt and llama.cpp on the vocabulary at path (named file in messages):
 * the texts of inp (NULL: path.inp, else llama-spm's), then texts (NULL-terminated,
 * or NULL), then random strings. A vocab vt does not support is skipped, unless it
 * comes with texts. */
static void compare_vocab_at(const char *path, const char *file, const char *inp, const char *const *texts,
                             int n_random) {
    /* vt */
    tokenizer *t = NULL;
    vt_status st = tok_load_file(path, &t);
    if (st == VT_E_UNSUPPORTED && !texts) {
        printf("%-40s skipped: %s\n", file, vt_last_error());
        return;
    }
    CHECK_MSG(st == VT_OK, "%s: %s", file, vt_last_error());
    if (st != VT_OK) return;
    /* llama.cpp */
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model *model = llama_model_load_from_file(path, mp);
    CHECK_MSG(model != NULL, "%s: llama.cpp could not load it", file);
    if (!model) {
        tok_free(t);
        return;
    }
    const struct llama_vocab *lv = llama_model_get_vocab(model);
    int32_t n_vocab = llama_vocab_n_tokens(lv);
    CHECK_EQ_INT(tok_n_vocab(t), n_vocab);
    CHECK_EQ_INT(tok_bos(t), llama_vocab_bos(lv));
    CHECK_EQ_INT(tok_eos(t), llama_vocab_eos(lv));
    CHECK_EQ_INT(tok_add_bos(t), llama_vocab_get_add_bos(lv));
    CHECK_EQ_INT(tok_add_eos(t), llama_vocab_get_add_eos(lv));

    /* every token: EOG, control, pieces */
    int bad_eog = 0, bad_piece = 0;
    int32_t *normal = malloc((size_t)n_vocab * sizeof *normal), *special = malloc((size_t)n_vocab * sizeof *special);
    int32_t n_normal = 0, n_special = 0;
    for (int32_t id = 0; id < n_vocab; id++) {
        if (tok_is_eog(t, id) != llama_vocab_is_eog(lv, id)) {
            if (bad_eog++ < 3) fprintf(stderr, "%s: token %d '%s': EOG differs\n", file, id, tok_text(t, id));
        }
        enum llama_token_attr a = llama_vocab_get_attr(lv, id);
        if (a & (LLAMA_TOKEN_ATTR_CONTROL | LLAMA_TOKEN_ATTR_USER_DEFINED)) special[n_special++] = id;
        else if (a & LLAMA_TOKEN_ATTR_NORMAL) normal[n_normal++] = id;
        for (int sp = 0; sp < 2; sp++) {
            char a_buf[512], b_buf[512];
            int32_t na = llama_token_to_piece(lv, id, a_buf, sizeof a_buf, 0, sp);
            int64_t nb = tok_piece(t, id, sp, b_buf, sizeof b_buf);
            if (na != nb || (na > 0 && memcmp(a_buf, b_buf, (size_t)na))) {
                if (bad_piece++ < 3)
                    fprintf(stderr, "%s: token %d '%s' (special %d): piece '%.*s' vs vt '%.*s'\n", file, id,
                            tok_text(t, id), sp, na < 0 ? 0 : na, a_buf, (int)(nb < 0 ? 0 : nb), b_buf);
            }
        }
    }
    CHECK_MSG(bad_eog == 0, "%s: %d EOG flags differ", file, bad_eog);
    CHECK_MSG(bad_piece == 0, "%s: %d pieces differ", file, bad_piece);

    stats s = {0};
    spm_no_bytes = tok_find(t, "<0x80>") < 0 && tok_find(t, "\xc4\xa0") < 0;
    /* the test-vector texts */
    char inp_path[4200];
    snprintf(inp_path, sizeof inp_path, "%s", inp ? inp : "");
    if (!inp) snprintf(inp_path, sizeof inp_path, "%s.inp", path);
    FILE *f = fopen(inp_path, "rb");
    if (!f) { /* vocabs without vectors still get the llama-spm texts */
        snprintf(inp_path, sizeof inp_path, "%s/vocab/ggml-vocab-llama-spm.gguf.inp", test_models_dir());
        f = fopen(inp_path, "rb");
    }
    if (f) {
        static char buf[1 << 20];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        const char *sep = "\n__ggml_vocab_test__\n";
        for (char *p = buf; p < buf + n;) {
            char *q = strstr(p, sep);
            size_t l = q ? (size_t)(q - p) : strlen(p);
            compare_text(lv, t, file, p, l, &s);
            p += l + (q ? strlen(sep) : 0);
        }
    }
    for (const char *const *p = texts; p && *p; p++) compare_text(lv, t, file, *p, strlen(*p), &s);
    /* whether random characters are safe: llama.cpp throws on an SPM char with no
     * token and no byte fallback */
    char str[4096];
    for (int i = 0; i < n_random; i++) {
        size_t n;
        if (!spm_no_bytes) {
            n = random_unicode(str, sizeof str);
            compare_text(lv, t, file, str, n, &s);
            n = random_bytes(str, sizeof str);
            compare_text(lv, t, file, str, n, &s);
        }
        n = random_tokens(t, normal, n_normal, str, sizeof str);
        compare_text(lv, t, file, str, n, &s);
        if (n_special > 0) {
            size_t k = random_tokens(t, special, n_special, str, sizeof str / 2);
            size_t j = random_tokens(t, normal, n_normal, str + k, sizeof str / 2);
            compare_text(lv, t, file, str, k + j, &s);
        }
    }
    /* one long text: many random pieces joined (the merge queues see long inputs) */
    static char big[1 << 15];
    size_t nb = 0;
    while (nb + 4096 < sizeof big) {
        if (spm_no_bytes || rnd() % 2)
            nb += random_tokens(t, normal, n_normal, big + nb, 4096);
        else
            nb += random_unicode(big + nb, 4096);
        big[nb++] = rnd() % 3 ? ' ' : '\n';
    }
    compare_text(lv, t, file, big, nb, &s);
    CHECK_MSG(s.encode_bad == 0, "%s: %d of %d encodes differ", file, s.encode_bad, s.encode_cases);
    CHECK_MSG(s.decode_bad == 0, "%s: %d decodes differ", file, s.decode_bad);
    printf("%-40s %6d tokens, %5d encodes: %d differ, %d decodes differ, %d pieces differ\n", file, n_vocab,
           s.encode_cases, s.encode_bad, s.decode_bad, bad_piece);
    free(normal);
    free(special);
    llama_model_free(model);
    tok_free(t);
}

static void compare_vocab(const char *file, int n_random) {
    const char *path = test_model_path(file);
    if (path) compare_vocab_at(path, file, NULL, NULL, n_random);
}

/* ---- pre-tokenizers on a retagged vocabulary ------------------------------------ */

/* Texts that tell o200k's splitting apart, as llama.cpp runs it (std::regex over
 * its category-collapsed text): case runs inside words, letters outside ASCII
 * (upper and lower both), combining marks, digit runs of 1-7, upper-case
 * contractions, punctuation before \r\n and /, whitespace runs, emoji and bytes
 * that are no UTF-8. */
static const char *const o200k_texts[] = {
    "HelloWorld camelCase XMLHttpRequest iPhone ALLCAPS aB ABC",
    "DON'T I'M WE'LL YOU'RE THEY'VE HE'D IT'S don't i'm McDONALD'S 'S 'll x'LL 1's ''s ' s",
    "\xc3\x89" "COLE \xc3\x89" "cole \xc3\xa9" "COLE A\xc3\x89" "B a\xc3\x89" "b \xc3\x89" "A A\xc3\xa9 \xc3"
    "\x89" "COLE'S",
    "Stra\xc3\x9f" "e STRASSE \xc3\x9f \xe1\xba\x9e \xce\x91\xce\x92\xce\x93 \xce\x94\xce\xad\xce\xbb\xcf"
    "\x84\xce\xb1 \xd0\x9f\xd0\xa0\xd0\x98\xd0\x92\xd0\x95\xd0\xa2 \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5"
    "\xd1\x82 \xd0\x9c\xd0\x98\xd0\xa0u \xc7\x85" "a",
    "e\xcc\x81te\xcc\x81 E\xcc\x81" "COLE nai\xcc\x88ve \xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0"
    "\xa4\xa4\xe0\xa5\x87 a\xcc\x88\xcc\x81" "b",
    "\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3"
    "\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88 \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4",
    "1 12 123 1234 12345 123456 1234567 \xd9\xa1\xd9\xa2\xd9\xa3\xd9\xa4 x\xc2\xb2\xc2\xb3 1,234.56 v2 2x",
    "foo.\r\nbar a!/\r\n/b x;\n/y end.\r lone\rcr a\r\rb a/b//c http://x.y/z?q=1 ./run\n",
    "a\rb \r\n c  \n  d\t\n",
    "trailing   ",
    "  lead \n\n\n x \xe3\x80\x80y \xe3\x80\x80\xe3\x80\x80z\xc2\xa0w\tfoo \x0b\x0c\x1c",
    "hi \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd! \xf0\x9f\x8e\x89\xf0\x9f\x8e\x89 \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0"
    "\x9f\x91\xa9 ok",
    "a\xff\xfe" "b \xc3(c \xe2\x82 d\x80 \xed\xa0\x80x",
    "$100 <tag> a^b ~x `z` #define X_Y(a) ((a)+1)\n\tint main() { return 0; }\n",
    NULL,
};

/* o200k_harmony's (gpt-oss) special tokens, appended to the retagged vocab as
 * control tokens: llama.cpp makes <|end|> no EOG once <|return|> and <|call|>
 * are EOG, and shows <|channel|>, <|message|>, <|start|>, <|constrain|>
 * (user-defined); vt must agree on every flag, piece, encode and decode. */
static const char *const harmony_specials[] = {"<|return|>",  "<|call|>",  "<|end|>",      "<|channel|>",
                                               "<|message|>", "<|start|>", "<|constrain|>"};
#define N_HARMONY (sizeof harmony_specials / sizeof harmony_specials[0])

/* Write a copy of the vocabulary at src whose tokenizer.ggml.pre is pre and with
 * harmony_specials appended, with llama.cpp's own GGUF code. */
static bool write_retagged(const char *src, const char *pre, const char *dst) {
    struct gguf_init_params ip = {.no_alloc = true, .ctx = NULL};
    struct gguf_context *g = gguf_init_from_file(src, ip), *out = gguf_init_empty();
    bool ok = false;
    const char **toks = NULL;
    int32_t *types = NULL;
    float *scores = NULL;
    size_t n = 0, m = 0;
    int64_t kt = g ? gguf_find_key(g, "tokenizer.ggml.tokens") : -1;
    int64_t ky = g ? gguf_find_key(g, "tokenizer.ggml.token_type") : -1;
    int64_t ks = g ? gguf_find_key(g, "tokenizer.ggml.scores") : -1;
    if (!g || !out || kt < 0 || ky < 0 || gguf_get_arr_type(g, ky) != GGUF_TYPE_INT32) goto done;
    n = gguf_get_arr_n(g, kt);
    m = n + N_HARMONY;
    toks = malloc(m * sizeof *toks);
    types = malloc(m * sizeof *types);
    scores = calloc(m, sizeof *scores);
    if (!toks || !types || !scores || gguf_get_arr_n(g, ky) != n) goto done;
    for (size_t i = 0; i < n; i++) toks[i] = gguf_get_arr_str(g, kt, i);
    memcpy(types, gguf_get_arr_data(g, ky), n * sizeof *types);
    for (size_t i = 0; i < N_HARMONY; i++) {
        toks[n + i] = harmony_specials[i];
        types[n + i] = LLAMA_TOKEN_TYPE_CONTROL;
    }
    gguf_set_kv(out, g); /* then replace: a set removes the old array first */
    gguf_set_val_str(out, "tokenizer.ggml.pre", pre);
    gguf_set_arr_str(out, "tokenizer.ggml.tokens", toks, m);
    gguf_set_arr_data(out, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, m);
    if (ks >= 0 && gguf_get_arr_type(g, ks) == GGUF_TYPE_FLOAT32 && gguf_get_arr_n(g, ks) == n) {
        memcpy(scores, gguf_get_arr_data(g, ks), n * sizeof *scores);
        gguf_set_arr_data(out, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, m);
    }
    ok = gguf_write_to_file(out, dst, true);
done:
    free(toks);
    free(types);
    free(scores);
    if (g) llama_ref_gguf_free(g);
    if (out) llama_ref_gguf_free(out);
    return ok;
}

static void compare_retagged(const char *file, const char *pre, const char *const *texts, int n_random) {
    const char *p = test_model_path(file);
    if (!p) return;
    char src[4096], inp[4200], dir[256], dst[512], label[256];
    snprintf(src, sizeof src, "%s", p);
    snprintf(inp, sizeof inp, "%s.inp", src);
    const char *base = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/vt-tok-pre-XXXXXX", base);
    bool made = mkdtemp(dir) != NULL;
    CHECK_MSG(made, "mkdtemp %s failed", dir);
    if (!made) return;
    snprintf(dst, sizeof dst, "%s/vocab.gguf", dir);
    snprintf(label, sizeof label, "%s as '%s' + harmony", file, pre);
    bool ok = write_retagged(src, pre, dst);
    CHECK_MSG(ok, "%s: could not write %s", label, dst);
    if (ok) compare_vocab_at(dst, label, inp, texts, n_random);
    unlink(dst);
    rmdir(dir);
}

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(void) {
    if (!llama_ref_init()) return 1;
    if (!getenv("VT_LLAMA_VERBOSE")) llama_log_set(quiet, NULL);
    const char *e = getenv("VT_TOK_LLAMA_N");
    int n_random = e ? atoi(e) : 25;
    static const char *const files[] = {
        "stories260K.gguf", "TinyStories-656K-Q8_0.gguf", "llama-2-tiny-random.gguf",
        "vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-phi-3.gguf", "vocab/ggml-vocab-baichuan.gguf",
        "vocab/ggml-vocab-gpt-2.gguf", "vocab/ggml-vocab-deepseek-coder.gguf", "vocab/ggml-vocab-deepseek-llm.gguf",
        "vocab/ggml-vocab-falcon.gguf", "vocab/ggml-vocab-mpt.gguf", "vocab/ggml-vocab-starcoder.gguf",
        "vocab/ggml-vocab-refact.gguf", "vocab/ggml-vocab-gpt-neox.gguf", "vocab/ggml-vocab-aquila.gguf",
        "vocab/ggml-vocab-llama-bpe.gguf", "vocab/ggml-vocab-qwen2.gguf", "vocab/ggml-vocab-qwen35.gguf",
        "vocab/ggml-vocab-command-r.gguf", "vocab/ggml-vocab-gemma-4.gguf", "vocab/ggml-vocab-bert-bge.gguf",
    };
    const char *only = getenv("VT_TOK_LLAMA_ONLY");
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (!only || strstr(files[i], only)) compare_vocab(files[i], n_random);
    if (!only || strstr("gpt-4o", only))
        compare_retagged("vocab/ggml-vocab-llama-bpe.gguf", "gpt-4o", o200k_texts, n_random);
    return test_finish();
}
