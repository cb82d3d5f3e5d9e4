/* tokenizer/: llama.cpp's tokenizer test vectors (vocab/ggml-vocab-*.gguf with
 * .inp/.out, tests/test-tokenizer-0.cpp semantics: add_special = false,
 * parse_special = false, exact ids), decode round trips, byte fallback, invalid
 * UTF-8, special-token parsing, BOS/EOS rules, the TinyStories and stories260K
 * vocabs, pre-tokenizer edge cases and the UTF-8 streaming helper. */
#include "base/mapfile.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "test.h"

#include <stdint.h>
#include <time.h>

static bool verbose;

static tokenizer *load_vocab(const char *name) {
    const char *path = test_model_path(name);
    if (!path) return NULL;
    mapfile m;
    gguf_file g;
    tokenizer *t = NULL;
    vt_status st = mapfile_open(path, &m);
    CHECK_MSG(st == VT_OK, "%s: %s", name, vt_last_error());
    if (st != VT_OK) return NULL;
    st = gguf_parse(m.data, m.size, path, &g);
    CHECK_MSG(st == VT_OK, "%s: %s", name, vt_last_error());
    if (st == VT_OK) {
        st = tok_load(&g, &t);
        CHECK_MSG(st == VT_OK, "%s: %s", name, vt_last_error());
        gguf_free(&g);
    }
    mapfile_close(&m);
    return t;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p) p[n] = 0;
    *len = (size_t)n;
    return p;
}

static void print_ids(const char *tag, const int32_t *ids, int64_t n) {
    fprintf(stderr, "  %s:", tag);
    for (int64_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
}

/* encode then decode; true if it gives s back */
static bool round_trips(const tokenizer *t, const char *s, size_t n) {
    int32_t *ids;
    int64_t n_ids;
    char *back;
    size_t back_len;
    if (tok_encode(t, s, n, false, false, &ids, &n_ids) != VT_OK) return false;
    bool ok = tok_decode(t, ids, n_ids, false, &back, &back_len) == VT_OK && back_len == n && (n == 0 || !memcmp(back, s, n));
    free(back);
    free(ids);
    return ok;
}

/* Runs one vector set; returns the number of cases whose decode did not round trip. */
static int run_vectors(const char *vocab, int *n_cases) {
    char name[256], path_inp[4096], path_out[4096];
    snprintf(name, sizeof name, "vocab/ggml-vocab-%s.gguf", vocab);
    tokenizer *t = load_vocab(name);
    *n_cases = 0;
    if (!t) return 0;
    snprintf(path_inp, sizeof path_inp, "%s/%s.inp", test_models_dir(), name);
    snprintf(path_out, sizeof path_out, "%s/%s.out", test_models_dir(), name);
    size_t inp_len, out_len;
    char *inp = read_file(path_inp, &inp_len), *out = read_file(path_out, &out_len);
    CHECK_MSG(inp && out, "%s: vectors missing", vocab);
    int failed = 0, cases = 0, not_round_trip = 0;
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t sep_len = strlen(sep);
    char *p = inp, *line = out;
    while (inp && out && p < inp + inp_len) {
        char *q = memmem(p, (size_t)(inp + inp_len - p), sep, sep_len);
        size_t n = q ? (size_t)(q - p) : (size_t)(inp + inp_len - p);
        char *eol = strchr(line, '\n');
        if (!eol) eol = line + strlen(line);
        int32_t expect[4096];
        int64_t n_expect = 0;
        for (char *s = line; s < eol;) {
            char *e;
            long v = strtol(s, &e, 10);
            if (e == s) break;
            if (n_expect < 4096) expect[n_expect++] = (int32_t)v;
            s = e;
        }
        int32_t *ids = NULL;
        int64_t n_ids = 0;
        vt_status st = tok_encode(t, p, n, false, false, &ids, &n_ids);
        bool ok = st == VT_OK && n_ids == n_expect && (n_ids == 0 || !memcmp(ids, expect, (size_t)n_ids * sizeof *ids));
        if (!ok) {
            failed++;
            if (failed <= 3 || verbose) {
                fprintf(stderr, "%s: case %d '%.*s' differs\n", vocab, cases, (int)(n > 80 ? 80 : n), p);
                print_ids("expected", expect, n_expect);
                print_ids("got     ", ids, n_ids);
            }
        }
        if (!round_trips(t, p, n)) {
            not_round_trip++;
            if (verbose) fprintf(stderr, "%s: case %d '%.*s' does not round trip\n", vocab, cases, (int)n, p);
        }
        free(ids);
        cases++;
        p += n + (q ? sep_len : 0);
        line = *eol ? eol + 1 : eol;
    }
    CHECK_MSG(failed == 0, "%s: %d of %d cases differ", vocab, failed, cases);
    printf("%-16s %2d/%2d cases exact, %2d do not round trip\n", vocab, cases - failed, cases, not_round_trip);
    free(inp);
    free(out);
    tok_free(t);
    *n_cases = cases;
    return not_round_trip;
}

static void test_vectors(void) {
    /* Every vocab with vectors whose model is llama, gpt2 or gemma4. The number
     * of cases that do not round trip through decode is part of the expectation:
     * the two texts with " ?" and " ." in them, in the vocabs with
     * clean_up_tokenization_spaces, where llama.cpp's decode drops those spaces
     * too (tests/llama/test_tokenizer_llama.c checks decode against llama.cpp). */
    static const struct {
        const char *name;
        int not_round_trip;
    } sets[] = {
        {"llama-spm", 0},      {"phi-3", 0},  {"gpt-2", 2},     {"deepseek-coder", 0},
        {"deepseek-llm", 0},   {"falcon", 2}, {"mpt", 2},       {"starcoder", 2},
        {"refact", 2},         {"llama-bpe", 2}, {"qwen2", 0},  {"qwen35", 0},
        {"command-r", 0},      {"gemma-4", 2},
    };
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        int cases;
        int bad = run_vectors(sets[i].name, &cases);
        if (cases) CHECK_MSG(bad == sets[i].not_round_trip, "%s: %d cases do not round trip (expected %d)",
                             sets[i].name, bad, sets[i].not_round_trip);
    }
}

static void test_unsupported(void) {
    const char *path = test_model_path("vocab/ggml-vocab-bert-bge.gguf");
    if (!path) return;
    mapfile m;
    gguf_file g;
    tokenizer *t = NULL;
    if (mapfile_open(path, &m) != VT_OK) return;
    if (gguf_parse(m.data, m.size, path, &g) == VT_OK) {
        CHECK(tok_load(&g, &t) == VT_E_UNSUPPORTED);
        CHECK(strstr(vt_last_error(), "'bert'") != NULL);
        CHECK(t == NULL);
        gguf_free(&g);
    }
    mapfile_close(&m);
}

static int64_t enc(const tokenizer *t, const char *s, bool add_special, bool parse_special, int32_t *out, int64_t cap) {
    int32_t *ids;
    int64_t n;
    if (tok_encode(t, s, strlen(s), add_special, parse_special, &ids, &n) != VT_OK) return -1;
    for (int64_t i = 0; i < n && i < cap; i++) out[i] = ids[i];
    free(ids);
    return n;
}

static void test_spm(void) {
    tokenizer *t = load_vocab("vocab/ggml-vocab-llama-spm.gguf");
    if (!t) return;
    int32_t ids[64];
    CHECK_EQ_INT(tok_n_vocab(t), 32000);
    CHECK_EQ_INT(tok_bos(t), 1);
    CHECK_EQ_INT(tok_eos(t), 2);
    CHECK(tok_add_bos(t));
    CHECK(tok_is_eog(t, 2) && !tok_is_eog(t, 1));
    /* BOS only with add_special; "" gives [] or [BOS] */
    CHECK_EQ_INT(enc(t, "", false, false, ids, 64), 0);
    CHECK(enc(t, "", true, false, ids, 64) == 1 && ids[0] == 1);
    CHECK(enc(t, "Hello world", true, false, ids, 64) == 3 && ids[0] == 1 && ids[1] == 15043 && ids[2] == 3186);
    /* byte fallback: U+1F999 is no token, its 4 bytes are <0xF0> <0x9F> <0xA6> <0x99> */
    int64_t n = enc(t, "\xf0\x9f\xa6\x99", false, false, ids, 64);
    CHECK(n == 5 && ids[0] == 29871 && ids[1] == 0xF0 + 3 && ids[2] == 0x9F + 3 && ids[3] == 0xA6 + 3 &&
          ids[4] == 0x99 + 3);
    /* invalid UTF-8 falls back to bytes too */
    n = enc(t, "a\xff\xc3", false, false, ids, 64);
    CHECK(n == 3 && ids[0] == 263 && ids[1] == 0xFF + 3 && ids[2] == 0xC3 + 3);
    /* parse_special: "</s>" is control, split out only when asked */
    n = enc(t, "a</s>b", false, true, ids, 64);
    CHECK(n == 3 && ids[0] == 263 && ids[1] == 2 && ids[2] == 289);
    n = enc(t, "a</s>b", false, false, ids, 64);
    CHECK(n > 3 && ids[1] != 2);
    /* pieces and decode */
    char buf[64];
    CHECK(tok_piece(t, 15043, false, buf, sizeof buf) == 6 && !memcmp(buf, " Hello", 6));
    CHECK(tok_piece(t, 0x41 + 3, false, buf, sizeof buf) == 1 && buf[0] == 'A');
    CHECK(tok_piece(t, 1, false, buf, sizeof buf) == 0);
    CHECK(tok_piece(t, 1, true, buf, sizeof buf) == 3 && !memcmp(buf, "<s>", 3));
    CHECK(tok_piece(t, 15043, false, buf, 2) == 6); /* too small: size returned */
    CHECK(tok_piece(t, 32000, false, buf, sizeof buf) == -1);
    CHECK(tok_piece(t, -1, false, buf, sizeof buf) == -1);
    char *s;
    size_t len;
    int32_t hw[] = {1, 15043, 3186};
    CHECK_OK(tok_decode(t, hw, 3, false, &s, &len));
    CHECK(s && !strcmp(s, " Hello world")); /* llama.cpp: BOS takes the one-space strip */
    free(s);
    CHECK_OK(tok_decode(t, hw + 1, 2, false, &s, &len));
    CHECK(s && !strcmp(s, "Hello world") && len == 11);
    free(s);
    CHECK_OK(tok_decode(t, hw, 3, true, &s, &len));
    CHECK(s && !strcmp(s, "<s> Hello world"));
    free(s);
    int32_t bad[] = {15043, 40000};
    CHECK(tok_decode(t, bad, 2, false, &s, &len) == VT_E_RANGE);
    CHECK_EQ_INT(tok_find(t, "\xe2\x96\x81Hello"), 15043);
    CHECK_EQ_INT(tok_find(t, "no such token"), -1);
    CHECK(!strcmp(tok_text(t, 15043), "\xe2\x96\x81Hello"));
    CHECK(tok_text(t, 32000) == NULL);
    tok_free(t);
}

static void test_bpe_special(void) {
    tokenizer *t = load_vocab("vocab/ggml-vocab-qwen2.gguf");
    if (!t) return;
    int32_t ids[64];
    int32_t im_start = tok_find(t, "<|im_start|>"), im_end = tok_find(t, "<|im_end|>");
    CHECK(im_start == 151644 && im_end == 151645);
    CHECK(tok_is_eog(t, im_end));
    CHECK(tok_is_eog(t, tok_find(t, "<|endoftext|>")));
    CHECK(!tok_is_eog(t, im_start));
    CHECK(!tok_add_bos(t)); /* qwen2: no BOS by default */
    int64_t n = enc(t, "<|im_start|>user\nHi<|im_end|>", true, true, ids, 64);
    CHECK(n == 5 && ids[0] == im_start && ids[4] == im_end);
    n = enc(t, "<|im_start|>user", false, false, ids, 64);
    CHECK(n > 2 && ids[0] != im_start); /* control text stays text without parse_special */
    char *s;
    size_t len;
    int32_t seq[] = {im_start, 872, 198, 13048, im_end};
    CHECK_OK(tok_decode(t, seq, 5, true, &s, &len));
    CHECK(s && !strcmp(s, "<|im_start|>user\nHi<|im_end|>"));
    free(s);
    CHECK_OK(tok_decode(t, seq, 5, false, &s, &len));
    CHECK(s && !strcmp(s, "user\nHi"));
    free(s);
    /* invalid UTF-8: each bad byte is U+FFFD, which qwen2 has (as 3 byte symbols) */
    int64_t n1 = enc(t, "\xff", false, false, ids, 64);
    int32_t fffd[8];
    int64_t n2 = enc(t, "\xef\xbf\xbd", false, false, fffd, 8);
    CHECK(n1 > 0 && n1 == n2 && !memcmp(ids, fffd, (size_t)n1 * sizeof *ids));
    tok_free(t);

    t = load_vocab("vocab/ggml-vocab-llama-bpe.gguf");
    if (t) {
        CHECK(tok_add_bos(t)); /* llama3 pre-tokenizer: BOS by default */
        n = enc(t, "Hello", true, false, ids, 64);
        CHECK(n == 2 && ids[0] == 128000 && ids[1] == 9906);
        CHECK(tok_is_eog(t, tok_find(t, "<|eot_id|>")));
        CHECK(tok_is_eog(t, 128001));
        /* a long run of digits and spaces: no quadratic blowup, exact split */
        n = enc(t, "1234567", false, false, ids, 64);
        CHECK(n == 3 && ids[0] == 4513 && ids[1] == 10961 && ids[2] == 22);
        tok_free(t);
    }
    t = load_vocab("vocab/ggml-vocab-gpt-2.gguf");
    if (t) {
        CHECK(!tok_add_bos(t));
        n = enc(t, "Hello world", true, false, ids, 64);
        CHECK(n == 2 && ids[0] == 15496 && ids[1] == 995);
        char buf[16];
        CHECK(tok_piece(t, 995, false, buf, sizeof buf) == 6 && !memcmp(buf, " world", 6));
        tok_free(t);
    }
}

/* Full models: the TinyStories vocab (all scores equal, no byte tokens) and
 * stories260K (byte fallback). Expected ids are llama.cpp's. */
static void test_models(void) {
    tokenizer *t = load_vocab("TinyStories-656K-Q8_0.gguf");
    int32_t ids[128];
    if (t) {
        CHECK(tok_add_bos(t));
        CHECK_EQ_INT(tok_bos(t), 1);
        int64_t n = enc(t, "Once upon a time, there was a little girl.", true, false, ids, 128);
        static const int32_t want[] = {1, 80, 147, 201, 282, 215, 286, 158, 420, 177, 1132, 10};
        CHECK_MSG(n == 12 && !memcmp(ids, want, sizeof want), "got %lld ids", (long long)n);
        if (verbose) print_ids("tinystories", ids, n);
        /* a character with no token and no byte tokens: llama.cpp throws, vt gives unk */
        n = enc(t, "\xe2\x82\xac", false, false, ids, 128);
        CHECK(n == 4 && ids[1] == 0 && ids[2] == 0 && ids[3] == 0);
        tok_free(t);
    }
    t = load_vocab("stories260K.gguf");
    if (t) {
        CHECK(tok_add_bos(t));
        int64_t n = enc(t, "Once upon a time", true, false, ids, 128);
        static const int32_t want[] = {1, 403, 407, 261, 378};
        CHECK_MSG(n == 5 && !memcmp(ids, want, sizeof want), "got %lld ids", (long long)n);
        if (verbose) print_ids("stories260K", ids, n);
        /* byte fallback for a character missing from the 512-token vocab */
        n = enc(t, "\xf0\x9f\xa6\x99", false, false, ids, 128);
        CHECK(n == 5 && ids[0] == 410 && ids[1] == 0xF0 + 3 && ids[2] == 0x9F + 3 && ids[3] == 0xA6 + 3 &&
              ids[4] == 0x99 + 3);
        tok_free(t);
    }
}

static void test_utf8_prefix(void) {
    CHECK_EQ_INT(tok_utf8_complete_prefix("abc", 3), 3);
    CHECK_EQ_INT(tok_utf8_complete_prefix("a\xe2\x82", 3), 1);
    CHECK_EQ_INT(tok_utf8_complete_prefix("a\xe2\x82\xac", 4), 4);
    CHECK_EQ_INT(tok_utf8_complete_prefix("\xf0\x9f\xa6", 3), 0);
    CHECK_EQ_INT(tok_utf8_complete_prefix("\xc3", 1), 0);
    CHECK_EQ_INT(tok_utf8_complete_prefix("\x80\x80", 2), 2); /* stray continuations */
    CHECK_EQ_INT(tok_utf8_complete_prefix("a\xff", 2), 2);
    CHECK_EQ_INT(tok_utf8_complete_prefix("", 0), 0);
}

static void test_unicode(void) {
    CHECK(uni_flags('a') == UNI_LETTER);
    CHECK(uni_flags('7') == UNI_NUMBER);
    CHECK(uni_flags('$') == UNI_SYMBOL && uni_flags('!') == UNI_PUNCT);
    CHECK(uni_flags(0x4E00) == UNI_LETTER);
    CHECK(uni_flags(0x0301) == UNI_MARK);
    CHECK(uni_flags(0x10FFFF) == UNI_UNDEFINED);
    CHECK(uni_flags(0x2EBF0) == UNI_LETTER); /* Unicode 15.1, as llama.cpp */
    CHECK(uni_is_space(0x3000) && uni_is_space('\n') && !uni_is_space(0x1C) && !uni_is_space(0x200B));
    for (int b = 0; b < 256; b++) CHECK(uni_cp_to_byte(uni_byte_to_cp((uint8_t)b)) == b);
    CHECK(uni_byte_to_cp(' ') == 0x120 && uni_byte_to_cp('\n') == 0x10A && uni_byte_to_cp(0xAD) == 0x143);
    size_t adv;
    CHECK(uni_decode((const uint8_t *)"\xe2\x82\xac", 3, &adv) == 0x20AC && adv == 3);
    CHECK(uni_decode((const uint8_t *)"\xe2\x82", 2, &adv) == UNI_REPLACEMENT && adv == 1);
    CHECK(uni_decode((const uint8_t *)"\xf7\xbf\xbf\xbf", 4, &adv) == UNI_REPLACEMENT && adv == 1);
}

/* Encoding a long prompt is fast (heap-based merges, no quadratic rescans). */
static void test_speed(void) {
    tokenizer *t = load_vocab("vocab/ggml-vocab-llama-spm.gguf");
    tokenizer *b = load_vocab("vocab/ggml-vocab-llama-bpe.gguf");
    size_t n = 1 << 18;
    char *s = malloc(n + 1);
    for (size_t i = 0; i < n; i++) s[i] = "the quick brown fox jumps over  lazy dogs 123\n"[i % 46];
    s[n] = 0;
    tokenizer *vs[2] = {t, b};
    for (int k = 0; k < 2; k++) {
        if (!vs[k]) continue;
        struct timespec a, z;
        clock_gettime(CLOCK_MONOTONIC, &a);
        int32_t *ids;
        int64_t n_ids;
        CHECK_OK(tok_encode(vs[k], s, n, false, false, &ids, &n_ids));
        clock_gettime(CLOCK_MONOTONIC, &z);
        double ms = (z.tv_sec - a.tv_sec) * 1e3 + (z.tv_nsec - a.tv_nsec) / 1e6;
        printf("encode 256 KiB (%s): %lld tokens in %.0f ms\n", k ? "llama-bpe" : "llama-spm", (long long)n_ids, ms);
        CHECK(ms < 3000); /* generous: 2 shared cores, sanitizers (about 40 ms without) */
        free(ids);
        /* all spaces: one long whitespace word */
        memset(s, ' ', n);
        CHECK_OK(tok_encode(vs[k], s, 100000, false, false, &ids, &n_ids));
        free(ids);
        for (size_t i = 0; i < n; i++) s[i] = "the quick brown fox jumps over  lazy dogs 123\n"[i % 46];
    }
    free(s);
    tok_free(t);
    tok_free(b);
}

int main(void) {
    verbose = getenv("VT_TEST_VERBOSE") != NULL;
    test_unicode();
    test_utf8_prefix();
    test_vectors();
    test_unsupported();
    test_spm();
    test_bpe_special();
    test_models();
    test_speed();
    return test_finish();
}
