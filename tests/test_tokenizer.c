/* tokenizer/: llama.cpp's tokenizer test vectors (vocab/ggml-vocab-*.gguf with
 * .inp/.out, tests/test-tokenizer-0.cpp semantics: add_special = false,
 * parse_special = false, exact ids), decode round trips, byte fallback, invalid
 * UTF-8, special-token parsing, BOS/EOS rules, the TinyStories and stories260K
 * vocabs, pre-tokenizer edge cases and the UTF-8 streaming helper. */
#include "base/mapfile.h"
#include "gguf/gguf.h"
#include "tokenizer/pretok.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "test.h"

#include <stdint.h>

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
    char *inp = test_read_file(path_inp, &inp_len), *out = test_read_file(path_out, &out_len);
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
    for (int i = 0; i < uni_n_whitespace; i++) CHECK(uni_is_space(uni_whitespace[i])); /* fast path agrees */
    for (int b = 0; b < 256; b++) CHECK(uni_cp_to_byte(uni_byte_to_cp((uint8_t)b)) == b);
    CHECK(uni_byte_to_cp(' ') == 0x120 && uni_byte_to_cp('\n') == 0x10A && uni_byte_to_cp(0xAD) == 0x143);
    size_t adv;
    CHECK(uni_decode((const uint8_t *)"\xe2\x82\xac", 3, &adv) == 0x20AC && adv == 3);
    CHECK(uni_decode((const uint8_t *)"\xe2\x82", 2, &adv) == UNI_REPLACEMENT && adv == 1);
    CHECK(uni_decode((const uint8_t *)"\xf7\xbf\xbf\xbf", 4, &adv) == UNI_REPLACEMENT && adv == 1);
}

/* ---- pre-tokenizer splits ------------------------------------------------------ */

/* The words pretok_split makes of text, joined by '|', into out (cap bytes). */
static void split_words(pretok_type type, const char *text, char *out, size_t cap) {
    size_t n = strlen(text), g = 0;
    uint32_t *cps = malloc((n + 1) * sizeof *cps);
    pretok_words w = {0};
    out[0] = 0;
    if (!cps) return;
    size_t n_cp = uni_decode_all((const uint8_t *)text, n, cps);
    if (pretok_split(type, cps, n_cp, &w) == VT_OK) {
        size_t at = 0;
        for (size_t i = 0; i < w.n && g + 8 < cap; i++) {
            if (i) out[g++] = '|';
            for (uint32_t k = 0; k < w.len[i] && at < n_cp && g + 8 < cap; k++)
                g += (size_t)uni_encode(cps[at++], (uint8_t *)out + g);
        }
        out[g] = 0;
    }
    free(w.len);
    free(cps);
}

/* o200k (tokenizer.ggml.pre "gpt-4o"), split as llama.cpp's std::regex splits it
 * (checked against its unicode_regex_split): A-Z and a-z decide the case runs,
 * any other letter counts as both cases, a combining mark is no letter; digits
 * in threes; punctuation takes the \r, \n and / after it. */
static void test_pretok_o200k(void) {
    static const struct {
        const char *text, *words;
    } cases[] = {
        {"HelloWorld camelCase XMLHttpRequest iPhone aB ABC",
         "Hello|World| camel|Case| XMLHttp|Request| i|Phone| a|B| ABC"},
        {"DON'T I'M WE'LL you're McDONALD'S",
         "DON'T| I'M| WE'LL| you're| Mc|DONALD'S"},
        {"'s 'S x'LL 1's ''s",
         "'s| '|S| x'LL| |1|'s| ''|s"},
        {"\xc3\x89" "COLE \xc3\x89" "cole \xc3\xa9" "COLE A\xc3\x89" "B a\xc3\x89" "b \xc3\x89" "COL"
         "E'S",
         "\xc3\x89|COLE| \xc3\x89" "cole| \xc3\xa9|COLE| A\xc3\x89|B| a\xc3\x89" "b| \xc3\x89|COLE'S"},
        {"Stra\xc3\x9f" "e STRASSE \xe1\xba\x9e \xce\x91\xce\x92\xce\x93 \xce\x94\xce\xad\xce\xbb\xcf"
         "\x84\xce\xb1 \xd0\x9f\xd0\xa0\xd0\x98\xd0\x92\xd0\x95\xd0\xa2 \xc7\x85" "a",
         "Stra\xc3\x9f" "e| STRASSE| \xe1\xba\x9e| \xce\x91\xce\x92\xce\x93| \xce\x94\xce\xad\xce\xbb"
         "\xcf\x84\xce\xb1| \xd0\x9f\xd0\xa0\xd0\x98\xd0\x92\xd0\x95\xd0\xa2| \xc7\x85" "a"},
        {"e\xcc\x81te\xcc\x81 E\xcc\x81" "COLE \xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0\xa4"
         "\xa4\xe0\xa5\x87",
         "e|\xcc\x81te|\xcc\x81| E|\xcc\x81" "COLE| \xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8|\xe0\xa5\x8d"
         "\xe0\xa4\xa4|\xe0\xa5\x87"},
        {"\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81"
         "\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88 \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4",
         "\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c| \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3"
         "\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88| \xed\x95\x9c\xea\xb5\xad\xec\x96"
         "\xb4"},
        {"1 1234 1234567 \xd9\xa1\xd9\xa2\xd9\xa3\xd9\xa4 x\xc2\xb2\xc2\xb3",
         "1| |123|4| |123|456|7| |\xd9\xa1\xd9\xa2\xd9\xa3|\xd9\xa4| x|\xc2\xb2\xc2\xb3"},
        {"foo.\r\nbar a!/\r\n/b x;\n/y end.\r",
         "foo|.\r\n|bar| a|!/\r\n/|b| x|;\n/|y| end|.\r"},
        {"a\rb \r\n c  \n  d\t\n",
         "a|\r|b| \r\n| c|  \n| | d|\t\n"},
        {"end   ",
         "end|   "},
        {"x \xe3\x80\x80y\tfoo\xc2\xa0" "bar",
         "x| |\xe3\x80\x80y|\tfoo|\xc2\xa0" "bar"},
        {"hi \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd! \xf0\x9f\x8e\x89\xf0\x9f\x8e\x89",
         "hi| \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd!| \xf0\x9f\x8e\x89\xf0\x9f\x8e\x89"},
        {"a\xff\xfe" "b \xc3(",
         "a|\xef\xbf\xbd\xef\xbf\xbd|b| \xef\xbf\xbd("},
        {"$100 <tag> a^b",
         "$|100| <|tag|>| a|^b"},
    };
    char got[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        split_words(PRETOK_GPT4O, cases[i].text, got, sizeof got);
        CHECK_MSG(!strcmp(got, cases[i].words), "o200k case %zu: got '%s', expected '%s'", i, got, cases[i].words);
    }
}

/* ---- a synthetic vocabulary built in memory: metadata errors and rules ---- */

#define KEY(k) ((gguf_str){k, sizeof(k) - 1})
#define STR(x) ((gguf_str){x, sizeof(x) - 1})

static gguf_kv kv_str(gguf_str key, gguf_str v) {
    gguf_kv kv = {.key = key, .type = GGUF_TYPE_STRING};
    kv.v.str = v;
    return kv;
}

static gguf_kv kv_strs(gguf_str key, gguf_str *v, uint64_t n) {
    gguf_kv kv = {.key = key, .type = GGUF_TYPE_ARRAY};
    kv.v.arr.type = GGUF_TYPE_STRING;
    kv.v.arr.n = n;
    kv.v.arr.strs = v;
    return kv;
}

static gguf_kv kv_i32s(gguf_str key, const int32_t *v, uint64_t n) {
    gguf_kv kv = {.key = key, .type = GGUF_TYPE_ARRAY};
    kv.v.arr.type = GGUF_TYPE_INT32;
    kv.v.arr.n = n;
    kv.v.arr.data = v;
    return kv;
}

static gguf_kv kv_u32(gguf_str key, uint64_t v) {
    gguf_kv kv = {.key = key, .type = GGUF_TYPE_UINT32};
    kv.v.u64 = v;
    return kv;
}

static void test_synthetic(void) {
    /* "\xc4\xa0" is the byte-level BPE space */
    gguf_str toks[] = {STR("a"), STR("b"), STR("ab"), STR("\xc4\xa0"), STR("\xc4\xa0" "a"), STR("<|x|>"), STR(""),
                       STR("<|endoftext|>")};
    gguf_str merges[] = {STR("a b"), STR("\xc4\xa0 a"), STR("nospace")};
    const int32_t types[] = {1, 1, 1, 1, 1, 3, 1, 1};
    gguf_kv kv[8];
    int n = 0;
    kv[n++] = kv_str(KEY("tokenizer.ggml.model"), STR("gpt2"));
    kv[n++] = kv_str(KEY("tokenizer.ggml.pre"), STR("gpt-2"));
    kv[n++] = kv_strs(KEY("tokenizer.ggml.tokens"), toks, 8);
    kv[n++] = kv_i32s(KEY("tokenizer.ggml.token_type"), types, 8);
    kv[n++] = kv_strs(KEY("tokenizer.ggml.merges"), merges, 3);
    kv[n++] = kv_u32(KEY("tokenizer.ggml.bos_token_id"), 99); /* out of range: ignored */
    kv[n++] = kv_str(KEY("general.name"), STR("Phi3-synthetic"));
    gguf_file f = {.n_kv = n, .kv = kv};
    tokenizer *t = NULL;
    CHECK_OK(tok_load(&f, &t));
    if (t) {
        int32_t ids[16];
        CHECK_EQ_INT(tok_bos(t), -1); /* gpt2 default 11 is outside 8 tokens */
        CHECK(!strcmp(tok_text(t, 6), "[EMPTY_6]"));
        CHECK(enc(t, "ab a", false, false, ids, 16) == 2 && ids[0] == 2 && ids[1] == 4);
        /* Phi-3 rule: special tokens eat the whitespace after them */
        CHECK(enc(t, "<|x|>  a", false, true, ids, 16) == 2 && ids[0] == 5 && ids[1] == 0);
        /* <|endoftext|> is made control and EOG by its text */
        CHECK(tok_is_eog(t, 7) && tok_is_control(t, 7));
        CHECK(enc(t, "a<|endoftext|>", false, true, ids, 16) == 2 && ids[1] == 7);
        /* a character with no token and no byte token is dropped, as llama.cpp does */
        CHECK(enc(t, "c", false, false, ids, 16) == 0);
        tok_free(t);
    }
    /* rejections, one per reason */
    kv[0] = kv_str(KEY("tokenizer.ggml.model"), STR("bert"));
    CHECK(tok_load(&f, &t) == VT_E_UNSUPPORTED && t == NULL);
    kv[0] = kv_str(KEY("tokenizer.ggml.model"), STR("gpt2"));
    kv[1] = kv_str(KEY("tokenizer.ggml.pre"), STR("no-such-pre"));
    CHECK(tok_load(&f, &t) == VT_E_UNSUPPORTED && strstr(vt_last_error(), "no-such-pre"));
    /* o200k under each of its names (gpt-oss, llama4, kanana2, talkie, minimax-m2) */
    static const char *const o200k_names[] = {"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"};
    for (size_t i = 0; i < sizeof o200k_names / sizeof o200k_names[0]; i++) {
        kv[1] = kv_str(KEY("tokenizer.ggml.pre"), (gguf_str){o200k_names[i], strlen(o200k_names[i])});
        t = NULL;
        CHECK_MSG(tok_load(&f, &t) == VT_OK, "pre '%s': %s", o200k_names[i], vt_last_error());
        if (t) {
            int32_t ids[16];
            CHECK(!tok_add_bos(t));
            CHECK(enc(t, "ab a", false, false, ids, 16) == 2 && ids[0] == 2 && ids[1] == 4);
            tok_free(t);
        }
    }
    kv[1] = kv_str(KEY("tokenizer.ggml.pre"), STR("gpt-2"));
    kv[4] = kv_str(KEY("tokenizer.ggml.merges"), STR("a b")); /* not an array */
    CHECK(tok_load(&f, &t) == VT_E_FORMAT && strstr(vt_last_error(), "merges"));
    kv[4] = kv_strs(KEY("tokenizer.ggml.merges"), merges, 3);
    kv[3] = kv_i32s(KEY("tokenizer.ggml.token_type"), types, 7); /* short */
    CHECK(tok_load(&f, &t) == VT_E_FORMAT && strstr(vt_last_error(), "token_type"));
    kv[3] = kv_i32s(KEY("tokenizer.ggml.token_type"), types, 8);
    kv[3].v.arr.type = GGUF_TYPE_FLOAT32;
    CHECK(tok_load(&f, &t) == VT_E_FORMAT);
    kv[3] = kv_i32s(KEY("tokenizer.ggml.token_type"), types, 8);
    kv[2] = kv_strs(KEY("tokenizer.ggml.tokens"), toks, 0); /* empty vocab */
    CHECK(tok_load(&f, &t) == VT_E_FORMAT);
    kv[2] = kv_i32s(KEY("tokenizer.ggml.tokens"), types, 8); /* not strings */
    CHECK(tok_load(&f, &t) == VT_E_FORMAT);
    f.n_kv = 0;
    CHECK(tok_load(&f, &t) == VT_E_FORMAT && strstr(vt_last_error(), "tokenizer.ggml.model"));
}

/* ---- llama3.2 from its encoder.json / vocab.bpe (not the GGUF): an independent
 * source for the llama-bpe vectors ---- */

/* Parse one JSON string at *p (after the opening quote) into out; returns its length. */
static size_t json_string(const char **p, char *out) {
    const char *s = *p;
    size_t n = 0;
    while (*s && *s != '"') {
        if (*s != '\\') {
            out[n++] = *s++;
            continue;
        }
        s++;
        char c = *s++;
        if (c == 'u') {
            uint32_t cp = (uint32_t)strtoul((char[5]){s[0], s[1], s[2], s[3], 0}, NULL, 16);
            s += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && s[0] == '\\' && s[1] == 'u') {
                uint32_t lo = (uint32_t)strtoul((char[5]){s[2], s[3], s[4], s[5], 0}, NULL, 16);
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                s += 6;
            }
            n += (size_t)uni_encode(cp, (uint8_t *)out + n);
        } else {
            out[n++] = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == 'b' ? '\b' : c == 'f' ? '\f' : c;
        }
    }
    *p = *s ? s + 1 : s;
    return n;
}

static void test_llama32_files(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizers/llama3.2/encoder.json", test_models_dir());
    size_t jlen, blen;
    char *json = test_read_file(path, &jlen);
    snprintf(path, sizeof path, "%s/tokenizers/llama3.2/vocab.bpe", test_models_dir());
    char *bpe = test_read_file(path, &blen);
    if (!json || !bpe) {
        free(json);
        free(bpe);
        test_model_path("tokenizers/llama3.2/encoder.json"); /* skip note (or CI failure) */
        return;
    }
    enum { N = 128000 };
    gguf_str *toks = calloc(N, sizeof *toks);
    char *pool = malloc(jlen), *pp = pool;
    int n_tok = 0;
    for (const char *p = json; (p = strchr(p, '"')) != NULL;) {
        p++;
        size_t l = json_string(&p, pp);
        const char *colon = strchr(p, ':');
        if (!colon) break;
        long id = strtol(colon + 1, (char **)&p, 10);
        if (id >= 0 && id < N) {
            toks[id] = (gguf_str){pp, l};
            n_tok++;
        }
        pp += l;
    }
    CHECK_EQ_INT(n_tok, N);
    uint64_t n_merges = 0;
    for (size_t i = 0; i < blen; i++) n_merges += bpe[i] == '\n';
    gguf_str *merges = calloc(n_merges + 1, sizeof *merges);
    n_merges = 0;
    for (char *p = bpe; p < bpe + blen;) {
        char *e = memchr(p, '\n', (size_t)(bpe + blen - p));
        if (!e) e = bpe + blen;
        if (e > p) merges[n_merges++] = (gguf_str){p, (uint64_t)(e - p)};
        p = e + 1;
    }
    gguf_kv kv[4] = {kv_str(KEY("tokenizer.ggml.model"), STR("gpt2")),
                     kv_str(KEY("tokenizer.ggml.pre"), STR("llama-bpe")), kv_strs(KEY("tokenizer.ggml.tokens"), toks, N),
                     kv_strs(KEY("tokenizer.ggml.merges"), merges, n_merges)};
    gguf_file f = {.n_kv = 4, .kv = kv};
    tokenizer *t = NULL;
    CHECK_OK(tok_load(&f, &t));
    if (t) {
        /* the llama-bpe vectors, against these files */
        snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-bpe.gguf.inp", test_models_dir());
        size_t il, ol;
        char *inp = test_read_file(path, &il);
        snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-bpe.gguf.out", test_models_dir());
        char *out = test_read_file(path, &ol);
        int cases = 0, bad = 0;
        const char *sep = "\n__ggml_vocab_test__\n";
        char *line = out;
        for (char *p = inp; inp && out && p < inp + il;) {
            char *q = strstr(p, sep);
            size_t n = q ? (size_t)(q - p) : strlen(p);
            int32_t *ids;
            int64_t n_ids;
            tok_encode(t, p, n, false, false, &ids, &n_ids);
            char *e = line;
            bool ok = true;
            for (int64_t i = 0; i < n_ids && ok; i++) ok = strtol(e, &e, 10) == ids[i];
            while (*e == ' ') e++;
            ok = ok && (*e == '\n' || *e == 0);
            bad += !ok;
            cases++;
            free(ids);
            line = strchr(line, '\n');
            line = line ? line + 1 : e;
            p += n + (q ? strlen(sep) : 0);
        }
        CHECK_MSG(bad == 0 && cases == 46, "llama3.2 files: %d of %d cases differ", bad, cases);
        printf("%-16s %2d/%2d cases exact (from encoder.json + vocab.bpe)\n", "llama3.2 files", cases - bad, cases);
        free(inp);
        free(out);
        tok_free(t);
    }
    free(merges);
    free(toks);
    free(pool);
    free(json);
    free(bpe);
}

/* A long prompt (256 KiB) and one long whitespace word encode, and their
 * tokens give back the text: the heap-based merges on a long input are
 * exercised for correctness here; their speed is bench/bench_tokenizer's. */
static bool pieces_equal(const tokenizer *t, const int32_t *ids, int64_t n, const char *s, size_t len) {
    char *got = malloc(len + 2);
    size_t at = 0;
    bool ok = got != NULL;
    for (int64_t i = 0; ok && i < n; i++) {
        char buf[256];
        const int64_t k = tok_piece(t, ids[i], false, buf, sizeof buf);
        if (k < 0 || k > (int64_t)sizeof buf || at + (size_t)k > len + 1) ok = false;
        else memcpy(got + at, buf, (size_t)k), at += (size_t)k;
    }
    /* SPM adds one leading space (the word-start marker of the first word) */
    if (ok) ok = (at == len && !memcmp(got, s, len)) || (at == len + 1 && got[0] == ' ' && !memcmp(got + 1, s, len));
    free(got);
    return ok;
}

static void test_long_inputs(void) {
    tokenizer *t = load_vocab("vocab/ggml-vocab-llama-spm.gguf");
    tokenizer *b = load_vocab("vocab/ggml-vocab-llama-bpe.gguf");
    size_t n = 1 << 18;
    char *s = malloc(n + 1);
    for (size_t i = 0; i < n; i++) s[i] = "the quick brown fox jumps over  lazy dogs 123\n"[i % 46];
    s[n] = 0;
    tokenizer *vs[2] = {t, b};
    for (int k = 0; k < 2; k++) {
        if (!vs[k]) continue;
        int32_t *ids;
        int64_t n_ids;
        CHECK_OK(tok_encode(vs[k], s, n, false, false, &ids, &n_ids));
        CHECK_MSG(n_ids > (int64_t)n / 46 * 5 && n_ids < (int64_t)n, "%s: %lld tokens for 256 KiB",
                  k ? "llama-bpe" : "llama-spm", (long long)n_ids);
        CHECK_MSG(pieces_equal(vs[k], ids, n_ids, s, n), "%s: the 256 KiB text does not round-trip",
                  k ? "llama-bpe" : "llama-spm");
        free(ids);
        /* all spaces: one long whitespace word */
        memset(s, ' ', n);
        CHECK_OK(tok_encode(vs[k], s, 100000, false, false, &ids, &n_ids));
        CHECK_MSG(pieces_equal(vs[k], ids, n_ids, s, 100000), "%s: 100000 spaces do not round-trip",
                  k ? "llama-bpe" : "llama-spm");
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
    test_pretok_o200k();
    test_utf8_prefix();
    test_vectors();
    test_unsupported();
    test_synthetic();
    test_llama32_files();
    test_spm();
    test_bpe_special();
    test_models();
    test_long_inputs();
    return test_finish();
}
