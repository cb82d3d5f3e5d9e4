/* src/grammar: the GBNF parser (good grammars, llama.cpp's grammars/ files, one
 * refusal per reason), what the compiled grammar accepts (literals, classes over
 * UTF-8, repetitions), the matching limits, and the token mask over a small
 * vocabulary (multi-byte tokens, end of generation, the first token's dropped
 * space, token references and their negation), walked at random to completion
 * many times. */
#include "grammar/grammar.h"

#include "jcheck.h"
#include "test.h"

#include <stdint.h>

static grammar *parse_ok(const char *text) {
    grammar *g = NULL;
    vt_status st = grammar_parse(text, strlen(text), NULL, &g);
    CHECK_MSG(st == VT_OK, "%s: %s", text, vt_last_error());
    return g;
}

static void want_error(const char *text, size_t len, const char *needle) {
    grammar *g = NULL;
    vt_status st = grammar_parse(text, len, NULL, &g);
    CHECK_MSG(st == VT_E_INVALID && strstr(vt_last_error(), needle), "%.60s: got %d '%s', want '%s'", text, st,
              st ? vt_last_error() : "", needle);
    grammar_free(g);
}

static bool acc(const grammar *g, const char *s) { return grammar_accepts(g, s, strlen(s)); }

static void test_accepts(void) {
    grammar *g = parse_ok("root ::= \"a\"{2,3} | \"b\"{2} | \"c\"{2,} \"d\"? | \"e\"+ x*\nx ::= [0-9]");
    CHECK(acc(g, "aa") && acc(g, "aaa") && !acc(g, "a") && !acc(g, "aaaa"));
    CHECK(acc(g, "bb") && !acc(g, "b") && !acc(g, "bbb"));
    CHECK(acc(g, "cc") && acc(g, "ccccc") && acc(g, "cccd") && !acc(g, "c") && !acc(g, "ccdd"));
    CHECK(acc(g, "e") && acc(g, "eee123") && !acc(g, "") && !acc(g, "1"));
    grammar_free(g);

    g = parse_ok("root ::= [α-ω]+ \" \" [^a] \"\\u00e9\\x41\\U0001F600\"");
    CHECK(acc(g, "αβγ é\xc3\xa9" "A\xf0\x9f\x98\x80"));
    CHECK(acc(g, "ω 中éA😀") && acc(g, "ω 😀éA😀") && !acc(g, "ω aéA😀") && !acc(g, "a béA😀"));
    CHECK(!acc(g, "ω \xed\xa0\x80" "éA😀")); /* a surrogate is no character */
    grammar_free(g);

    g = parse_ok("# comment\nroot ::= ( \"x\"\n  | \"y\" ) item? # after\n  \nitem ::= . \".\"\n");
    CHECK(acc(g, "x") && acc(g, "y") && acc(g, "x✓.") && acc(g, "ya.") && !acc(g, "xa") && !acc(g, "z"));
    grammar_free(g);

    g = parse_ok("root ::= [\\-\\]a-c\\\\] [-x]");
    CHECK(acc(g, "--") && acc(g, "]x") && acc(g, "b-") && acc(g, "\\x") && !acc(g, "d-"));
    grammar_free(g);

    g = parse_ok("root ::= \"\"");
    CHECK(acc(g, "") && !acc(g, "a"));
    grammar_free(g);
    /* another start rule */
    g = NULL;
    CHECK_OK(grammar_parse("a ::= \"x\"\nb ::= \"y\"", 19, "b", &g));
    CHECK(g && acc(g, "y") && !acc(g, "x"));
    grammar_free(g);
}

static char *read_grammar_file(const char *name) {
    const char *srcdir = getenv("VT_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/.cache/llama/src/grammars/%s", srcdir ? srcdir : ".", name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        const char *ci = getenv("CI");
        if (ci && !strcmp(ci, "true")) {
            CHECK_MSG(0, "%s missing under CI=true", path);
        } else {
            fprintf(stderr, "skip: %s missing\n", path);
        }
        return NULL;
    }
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static void test_llama_files(void) {
    static const char *const files[] = {"json.gbnf", "json_arr.gbnf", "arithmetic.gbnf", "list.gbnf",
                                        "c.gbnf", "chess.gbnf", "english.gbnf", "japanese.gbnf"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        const char *t = read_grammar_file(files[i]);
        if (!t) continue;
        grammar *g = NULL;
        CHECK_MSG(grammar_parse(t, strlen(t), NULL, &g) == VT_OK, "%s: %s", files[i], vt_last_error());
        if (!strcmp(files[i], "json.gbnf")) {
            CHECK(acc(g, "{\"a\": [1, 2.5e3, \"x\\n\\u00e9\", true, null], \"b\": {}}"));
            CHECK(acc(g, "{}") && acc(g, "{\"k\":\n  \"é\"} "));
            CHECK(!acc(g, "{\"a\": }") && !acc(g, "[1]") && !acc(g, "{\"a\": 01x}") && !acc(g, "{\"a\": \"\x01\"}"));
        } else if (!strcmp(files[i], "arithmetic.gbnf")) {
            CHECK(acc(g, "x=1\n"));
            CHECK(acc(g, "a +2 *( b-c )=d\n"));
            CHECK(!acc(g, "x=\n") && !acc(g, "=1\n"));
        } else if (!strcmp(files[i], "list.gbnf")) {
            CHECK(acc(g, "- milk\n- eggs 12\n") && !acc(g, "- \n") && !acc(g, "milk\n") && !acc(g, "- a\u2028b\n"));
        } else if (!strcmp(files[i], "chess.gbnf")) {
            CHECK(acc(g, "1. e4 e5\n2. Nf3 Nc6\n"));
        }
        grammar_free(g);
    }
}

static void test_refusals(void) {
    want_error("root ::= foo", 12, "rule 'foo' is used but not defined");
    want_error("x ::= \"a\"", 9, "no rule named 'root'");
    want_error("root ::= \"a", 11, "line 1, column 12: unexpected end");
    want_error("root ::= [a-", 12, "unexpected end");
    want_error("root ::= \"a\"\nroot ::= \"b\"", 25, "defined twice");
    want_error("root ::= root \"a\"", 17, "rule 'root' is left-recursive");
    want_error("root ::= a \"x\"\na ::= b? root\nb ::= \"b\"", 38, "left-recursive");
    want_error("root ::= \"a\"{2001}", 18, "repetition count past 2000");
    want_error("root ::= \"a\"{3,2}", 17, "max below min");
    want_error("root ::= \"a\"{2000}{2000}", 24, "more than 1048576 elements");
    want_error("root ::= \"\\q\"", 13, "unknown escape");
    want_error("root ::= \"\\x4\"", 14, "hex digits");
    want_error("root ::= <|end|>", 16, "needs the model's vocabulary");
    want_error("root ::= <[12", 13, "expected ']>'");
    want_error("root ::= <[x]>", 14, "expected a token id");
    want_error("root ::= !\"a\"", 13, "expected a token reference");
    want_error("root ::= <[99999999999]>", 24, "token id past");
    want_error("root ::= <|end", 14, "expected '>'");
    want_error("root ::= *", 10, "nothing before it");
    want_error("root := \"a\"", 11, "expected '::='");
    want_error("root ::= \"a\" ) ", 15, "expected a newline");
    want_error("root ::= (\"a\"", 13, "expected ')'");
    want_error("root ::= []", 11, "empty character class");
    want_error("root ::= [b-a]", 14, "backwards");
    want_error("root ::= \"\xff\"", 12, "invalid UTF-8");
    want_error("root ::= \"a\"\0", 13, "NUL byte");
    char deep[400];
    int n = snprintf(deep, sizeof deep, "root ::= ");
    for (int i = 0; i < 100; i++) deep[n++] = '(';
    deep[n] = 0;
    want_error(deep, (size_t)n, "nested more than 64 deep");
    /* rules past the limit */
    size_t cap = 20 * 9000;
    char *many = malloc(cap);
    size_t len = (size_t)snprintf(many, cap, "root ::= r0\n");
    for (int i = 0; i < 9000; i++) len += (size_t)snprintf(many + len, cap - len, "r%d ::= \"x\"\n", i);
    want_error(many, len, "more than 8192 rules");
    free(many);
}

/* An exponentially ambiguous grammar is stopped at GRAMMAR_MAX_STACKS. */
static void test_match_limits(void) {
    grammar *g = parse_ok("root ::= e\ne ::= \"(\" e \")\" | \"(\" e \"]\" | \"x\"");
    grammar_matcher *m = NULL;
    CHECK_OK(grammar_matcher_create(g, NULL, &m));
    vt_status st = VT_OK;
    for (int i = 0; i < 12 && st == VT_OK; i++) st = grammar_matcher_accept_bytes(m, "(", 1);
    CHECK(st == VT_E_RANGE && strstr(vt_last_error(), "more than 256 parse stacks"));
    grammar_matcher_free(m);
    grammar_free(g);

    /* deep nesting that is not ambiguous: the stack grows, the set does not */
    g = parse_ok("root ::= e\ne ::= \"(\" e \")\" | \"x\"");
    CHECK_OK(grammar_matcher_create(g, NULL, &m));
    for (int i = 0; i < 100000; i++) CHECK_OK(grammar_matcher_accept_bytes(m, "(", 1));
    CHECK_OK(grammar_matcher_accept_bytes(m, "x", 1));
    for (int i = 0; i < 99999; i++) CHECK_OK(grammar_matcher_accept_bytes(m, ")", 1));
    CHECK(!grammar_matcher_accepting(m));
    CHECK_OK(grammar_matcher_accept_bytes(m, ")", 1));
    CHECK(grammar_matcher_accepting(m) && grammar_matcher_done(m));
    CHECK(grammar_matcher_accept_bytes(m, ")", 1) == VT_E_INVALID);
    grammar_matcher_free(m);
    grammar_free(g);
}

/* ---- masks over a small vocabulary ------------------------------------------------ */

static const char *const k_toks[] = {"a", "b", "ab", "{", "}", "\"", " a", "", "</s>", "\"a\"", ", ", ":",
                                     " ", "\n", "1", "23", "-", ".", "e", "true", "null", "[", "]", "\\",
                                     "n", "é", "\xc3", "\xa9", "x}", "\"}", "false", "0"};
#define N_TOKS ((int32_t)(sizeof k_toks / sizeof k_toks[0]))
#define EOG 8

static grammar_vocab *small_vocab(bool strip) {
    static char bytes[256];
    int64_t off[N_TOKS + 1];
    bool eog[N_TOKS] = {0};
    off[0] = 0;
    for (int32_t i = 0; i < N_TOKS; i++) {
        size_t n = strlen(k_toks[i]);
        memcpy(bytes + off[i], k_toks[i], n);
        off[i + 1] = off[i] + (int64_t)n;
    }
    eog[EOG] = true;
    grammar_vocab *v = NULL;
    CHECK_OK(grammar_vocab_create(N_TOKS, bytes, off, eog, strip, &v));
    return v;
}

static bool bit(const uint32_t *b, int32_t i) { return (b[i >> 5] >> (i & 31)) & 1; }
static int tok(const char *s) {
    for (int32_t i = 0; i < N_TOKS; i++)
        if (i != EOG && !strcmp(k_toks[i], s)) return i;
    return -1;
}

static void test_mask(void) {
    grammar *g = parse_ok("root ::= \"a\"+ \"b\"?");
    grammar_vocab *v = small_vocab(true);
    grammar_matcher *m = NULL;
    CHECK_OK(grammar_matcher_create(g, v, &m));
    const uint32_t *b;
    int32_t n;
    CHECK_OK(grammar_matcher_mask(m, &b, &n));
    /* first token: " a" counts as "a" (its space is dropped), " " alone is empty */
    CHECK(bit(b, tok("a")) && bit(b, tok("ab")) && bit(b, tok(" a")) && !bit(b, tok("b")) && !bit(b, EOG));
    CHECK(!bit(b, tok(" ")) && !bit(b, 7) && n == 3);
    CHECK_OK(grammar_matcher_accept(m, tok(" a")));
    CHECK_OK(grammar_matcher_mask(m, &b, &n));
    CHECK(bit(b, tok("a")) && bit(b, tok("ab")) && bit(b, tok("b")) && bit(b, EOG) && !bit(b, tok(" a")) && n == 4);
    CHECK(grammar_matcher_accept(m, tok(" a")) == VT_E_INVALID);
    CHECK_OK(grammar_matcher_accept(m, tok("ab")));
    CHECK(grammar_matcher_done(m));
    CHECK_OK(grammar_matcher_mask(m, &b, &n));
    CHECK(n == 1 && bit(b, EOG));
    CHECK_OK(grammar_matcher_accept(m, EOG));
    grammar_matcher_free(m);
    grammar_vocab_free(v);
    grammar_free(g);

    /* a character split over two tokens */
    g = parse_ok("root ::= [é]+");
    v = small_vocab(false);
    CHECK_OK(grammar_matcher_create(g, v, &m));
    CHECK_OK(grammar_matcher_mask(m, &b, &n));
    CHECK(bit(b, tok("é")) && bit(b, tok("\xc3")) && !bit(b, tok("\xa9")) && n == 2);
    CHECK_OK(grammar_matcher_accept(m, tok("\xc3")));
    CHECK_OK(grammar_matcher_mask(m, &b, &n));
    CHECK(bit(b, tok("\xa9")) && n == 1 && !grammar_matcher_accepting(m));
    grammar_matcher_free(m);
    grammar_vocab_free(v);
    grammar_free(g);
}

static int32_t find_named(void *ud, const char *s, size_t n) {
    (void)ud;
    if (n == 7 && !memcmp(s, "<|end|>", 7)) return 7; /* the control token with no text */
    if (n == 3 && !memcmp(s, "<a>", 3)) return tok("a");
    return -1;
}

/* Token references: whole tokens by id, where a token starts. */
static void test_tokens(void) {
    grammar_vocab *v = small_vocab(false);
    const grammar_tokens tk = {.n_vocab = N_TOKS, .find = find_named};
    grammar *g = NULL;
    grammar_matcher *m = NULL;
    const uint32_t *b;
    int32_t n;
    /* <[7]> (a control token, no text) between two characters */
    CHECK_OK(grammar_parse_tokens("root ::= \"a\" <[7]> \"b\"", 22, NULL, &tk, &g));
    CHECK_OK(grammar_matcher_create(g, v, &m));
    CHECK_OK(grammar_matcher_mask(m, &b, &n));
    CHECK(bit(b, tok("a")) && !bit(b, tok("ab")) && !bit(b, 7) && n == 1); /* "ab" would pass through <[7]> */
    CHECK_OK(grammar_matcher_accept(m, tok("a")));
    CHECK_OK(grammar_matcher_mask(m, &b, &n));
    CHECK(bit(b, 7) && n == 1);
    CHECK(grammar_matcher_accept(m, tok("b")) == VT_E_INVALID);
    CHECK_OK(grammar_matcher_accept(m, 7));
    CHECK_OK(grammar_matcher_mask(m, &b, &n));
    CHECK(bit(b, tok("b")) && n == 1);
    CHECK_OK(grammar_matcher_accept(m, tok("b")));
    CHECK(grammar_matcher_accepting(m) && grammar_matcher_done(m));
    grammar_matcher_free(m);
    /* no text matches a token reference */
    CHECK(!acc(g, "a") && !acc(g, "ab") && !acc(g, "a<[7]>b"));
    grammar_free(g);

    /* by name, repeated, and the union with a text path: "ab" as token 2 may be
     * either alternative, so "b" or "a" may follow */
    CHECK_OK(grammar_parse_tokens("root ::= <a>{2} (<[2]> \"b\" | \"ab\" \"a\") <|end|>", 46, NULL, &tk, &g));
    CHECK_OK(grammar_matcher_create(g, v, &m));
    CHECK_OK(grammar_matcher_accept(m, tok("a")));
    CHECK_OK(grammar_matcher_mask(m, &b, &n));
    CHECK(bit(b, tok("a")) && n == 1);
    CHECK_OK(grammar_matcher_accept(m, tok("a")));
    CHECK_OK(grammar_matcher_mask(m, &b, &n));
    CHECK(bit(b, tok("ab")) && bit(b, tok("a")) && n == 2);
    CHECK_OK(grammar_matcher_accept(m, tok("ab")));
    CHECK_OK(grammar_matcher_mask(m, &b, &n));
    CHECK(bit(b, tok("a")) && bit(b, tok("b")) && n == 2);
    CHECK_OK(grammar_matcher_accept(m, tok("b")));
    CHECK_OK(grammar_matcher_mask(m, &b, &n));
    CHECK(bit(b, 7) && n == 1 && !grammar_matcher_accepting(m));
    CHECK_OK(grammar_matcher_accept(m, 7));
    CHECK_OK(grammar_matcher_mask(m, &b, &n));
    CHECK(bit(b, EOG) && n == 1);
    grammar_matcher_free(m);
    grammar_free(g);

    /* negation: any one token but that one (control tokens too), never the end */
    CHECK_OK(grammar_parse_tokens("root ::= !<[0]> \"}\"", 19, NULL, &tk, &g));
    CHECK_OK(grammar_matcher_create(g, v, &m));
    CHECK_OK(grammar_matcher_mask(m, &b, &n));
    CHECK(!bit(b, 0) && !bit(b, EOG) && bit(b, 7) && bit(b, tok("ab")) && n == N_TOKS - 2);
    CHECK(grammar_matcher_accept(m, 0) == VT_E_INVALID);
    CHECK_OK(grammar_matcher_accept(m, tok("x}"))); /* a whole token, its "}" included */
    CHECK_OK(grammar_matcher_mask(m, &b, &n));
    CHECK(bit(b, tok("}")) && n == 1);
    grammar_matcher_free(m);
    grammar_free(g);

    /* an end-of-generation token is never a reference's: only the grammar's end */
    CHECK_OK(grammar_parse_tokens("root ::= \"a\" <[8]>", 18, NULL, &tk, &g));
    CHECK_OK(grammar_matcher_create(g, v, &m));
    CHECK_OK(grammar_matcher_accept(m, tok("a")));
    CHECK_OK(grammar_matcher_mask(m, &b, &n));
    CHECK(n == 0);
    grammar_matcher_free(m);
    grammar_free(g);

    /* ids and names checked against the vocabulary */
    g = NULL;
    CHECK(grammar_parse_tokens("root ::= <[32]>", 15, NULL, &tk, &g) == VT_E_INVALID &&
          strstr(vt_last_error(), "past the vocabulary's 32 tokens"));
    CHECK(grammar_parse_tokens("root ::= \"x\" !<|nope|>", 22, NULL, &tk, &g) == VT_E_INVALID &&
          strstr(vt_last_error(), "column 15: <|nope|> is not one token"));
    CHECK(g == NULL);
    /* without a vocabulary an id is taken as it is */
    g = parse_ok("root ::= <[12]> | !<[3]>*");
    grammar_free(g);
    grammar_vocab_free(v);
}

/* Random walks over the masks: every completed output is in the language. */
static void test_random_walks(void) {
    const char *t = read_grammar_file("json.gbnf");
    if (!t) return;
    grammar *g = parse_ok(t);
    grammar_vocab *v = small_vocab(false);
    uint64_t rng = 12345;
    int completed = 0;
    for (int run = 0; run < 200; run++) {
        grammar_matcher *m = NULL;
        CHECK_OK(grammar_matcher_create(g, v, &m));
        char out[4096];
        size_t len = 0;
        bool done = false;
        for (int step = 0; step < 300 && !done; step++) {
            const uint32_t *b;
            int32_t n;
            if (grammar_matcher_mask(m, &b, &n) != VT_OK || n == 0) break;
            /* prefer closing tokens as the output grows, so that walks end */
            int32_t pick = -1;
            for (int tries = 0; tries < 64 && pick < 0; tries++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                int32_t c = (int32_t)((rng >> 33) % N_TOKS);
                if (step > 20 && tries < 32 && !strpbrk(k_toks[c], "}\"]") && c != EOG) continue;
                if (bit(b, c)) pick = c;
            }
            for (int32_t c = 0; pick < 0 && c < N_TOKS; c++)
                if (bit(b, c)) pick = c;
            CHECK_OK(grammar_matcher_accept(m, pick));
            if (pick == EOG) {
                done = true;
            } else {
                size_t k = strlen(k_toks[pick]);
                if (len + k < sizeof out) memcpy(out + len, k_toks[pick], k);
                len += k;
            }
        }
        if (done && len < sizeof out) {
            out[len] = 0;
            CHECK_MSG(jcheck_document(out), "not JSON: %s", out);
            CHECK(grammar_accepts(g, out, len));
            completed++;
        }
        grammar_matcher_free(m);
    }
    CHECK_MSG(completed > 100, "%d of 200 walks completed", completed);
    grammar_vocab_free(v);
    grammar_free(g);
}

int main(void) {
    test_accepts();
    test_llama_files();
    test_refusals();
    test_match_limits();
    test_mask();
    test_tokens();
    test_random_walks();
    return test_finish();
}
