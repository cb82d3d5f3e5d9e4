/* gpt-oss's harmony format by token ids: the control tokens that carry its
 * structure reach the server's parser through the detokenizer.
 *
 * No vocabulary in ../shared/models has the harmony tokens (o200k_harmony is
 * not there, and llama-bpe's, which vt synth gives gpt-oss, has none), so the
 * test writes one: llama-bpe's with its first seven reserved special tokens
 * renamed <|start|>, <|channel|>, <|message|>, <|end|>, <|return|>, <|call|>,
 * <|constrain|> (control tokens, as in o200k_harmony). On it, as llama.cpp's
 * vocabulary does for gpt-oss: <|channel|>, <|message|>, <|start|>,
 * <|constrain|> and <|end|> are shown as text (<|end|> ends a message, not the
 * generation), <|return|> and <|call|> end the generation. A real gpt-oss
 * answer is encoded to ids, then turned back to text one token at a time as the
 * engine does (tok_piece without render_special, up to the first end-of-
 * generation token) and fed to the harmony parser token by token (tc_stream)
 * and whole (tc_parse): its analysis channel is the reasoning, its final
 * channel the content, its commentary to=functions.f message a call. */
#include "gguf/gguf.h"
#include "server/toolcall.h"
#include "test.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <unistd.h>

static const char *const harmony[] = {"<|start|>", "<|channel|>", "<|message|>", "<|end|>",
                                      "<|return|>", "<|call|>", "<|constrain|>"};
enum { N_HARMONY = 7 };

/* llama-bpe's vocabulary with the harmony tokens, written to path. */
static bool write_vocab(const char *src, const char *path) {
    size_t len;
    char *buf = test_read_file(src, &len);
    gguf_file f = {0};
    gguf_writer *w = NULL;
    const char **strs = NULL;
    char **owned = NULL;
    const gguf_kv *toks = NULL;
    bool ok = false;
    if (!buf || gguf_parse(buf, len, src, &f) != VT_OK || gguf_writer_create(&w) != VT_OK) goto done;
    for (int64_t i = 0; i < f.n_kv; i++)
        if (gguf_writer_copy_kv(w, &f.kv[i]) != VT_OK) goto done;
    if (gguf_get_arr(&f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks) != VT_OK) goto done;
    const uint64_t n = toks->v.arr.n;
    strs = calloc(n, sizeof *strs);
    owned = calloc(n, sizeof *owned);
    if (!strs || !owned) goto done;
    for (uint64_t i = 0; i < n; i++) {
        const gguf_str s = toks->v.arr.strs[i];
        int k = -1;
        if (s.len > 26 && !memcmp(s.ptr, "<|reserved_special_token_", 25)) k = atoi(s.ptr + 25);
        if (k >= 0 && k < N_HARMONY) {
            strs[i] = harmony[k];
            continue;
        }
        owned[i] = strndup(s.ptr, (size_t)s.len);
        if (!owned[i]) goto done;
        strs[i] = owned[i];
    }
    ok = gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", strs, n) == VT_OK &&
         gguf_writer_write(w, path) == VT_OK;
done:
    for (uint64_t i = 0; owned && toks && i < toks->v.arr.n; i++) free(owned[i]);
    free(owned);
    free(strs);
    gguf_writer_destroy(w);
    gguf_free(&f);
    free(buf);
    return ok;
}

typedef struct deltas {
    strbuf content, reasoning, name, args;
    int n_calls;
} deltas;

static void collect(void *ud, tc_delta_kind kind, int32_t call, const char *s, size_t n) {
    deltas *d = ud;
    (void)call;
    if (kind == TC_DELTA_CONTENT) sb_addn(&d->content, s, n);
    if (kind == TC_DELTA_REASONING) sb_addn(&d->reasoning, s, n);
    if (kind == TC_DELTA_CALL) {
        d->n_calls++;
        sb_addn(&d->name, s, n);
    }
    if (kind == TC_DELTA_ARGS) sb_addn(&d->args, s, n);
}

static bool eq(const strbuf *b, const char *want) {
    return b->len == strlen(want) && (!b->len || !memcmp(b->ptr, want, b->len));
}

/* One answer: encoded, detokenized as the engine does, parsed. */
static void check_answer(const tokenizer *t, const char *output, const char *content, const char *reasoning,
                         const char *call, const char *args) {
    int32_t *ids = NULL;
    int64_t n = 0;
    CHECK_OK(tok_encode(t, output, strlen(output), false, true, &ids, &n));
    tc_options o = {.format = TC_HARMONY};
    tc_stream st;
    tc_stream_init(&st, &o);
    deltas d = {0};
    strbuf text = {0};
    int64_t i = 0, n_tokens = 0;
    for (; i < n; i++) {
        char piece[256];
        const int64_t k = tok_piece(t, ids[i], false, piece, sizeof piece);
        CHECK(k >= 0 && k <= (int64_t)sizeof piece);
        if (tok_is_eog(t, ids[i])) {
            CHECK_EQ_INT(k, 0); /* the engine appends it, but it shows nothing */
            break;
        }
        sb_addn(&text, piece, (size_t)k);
        CHECK(tc_stream_feed(&st, piece, (size_t)k, false, collect, &d));
        n_tokens++;
    }
    CHECK_MSG(i == n - 1, "%s: the generation ended at token %lld of %lld", output, (long long)i, (long long)n);
    CHECK(tc_stream_feed(&st, "", 0, true, collect, &d));
    tc_result r;
    tc_parse(&o, text.ptr ? text.ptr : "", text.len, true, &r);
    CHECK_MSG(eq(&r.content, content) && eq(&d.content, content), "%s: content '%.*s' / streamed '%.*s'", output,
              (int)r.content.len, r.content.ptr ? r.content.ptr : "", (int)d.content.len,
              d.content.ptr ? d.content.ptr : "");
    CHECK_MSG(eq(&r.reasoning, reasoning) && eq(&d.reasoning, reasoning), "%s: reasoning '%.*s'", output,
              (int)r.reasoning.len, r.reasoning.ptr ? r.reasoning.ptr : "");
    CHECK_EQ_INT(r.n_calls, call ? 1 : 0);
    CHECK_EQ_INT(d.n_calls, call ? 1 : 0);
    if (call && r.n_calls == 1) {
        CHECK(eq(&r.calls[0].name, call) && eq(&d.name, call));
        CHECK_MSG(eq(&r.calls[0].args, args) && eq(&d.args, args), "args '%.*s'", (int)r.calls[0].args.len,
                  r.calls[0].args.ptr ? r.calls[0].args.ptr : "");
    }
    printf("  %lld tokens -> reasoning '%s', content '%s'%s%s\n", (long long)n_tokens, reasoning, content,
           call ? ", a call of " : "", call ? call : "");
    tc_result_free(&r);
    tc_stream_free(&st);
    sb_free(&d.content);
    sb_free(&d.reasoning);
    sb_free(&d.name);
    sb_free(&d.args);
    sb_free(&text);
    free(ids);
}

int main(void) {
    const char *src = test_model_path("vocab/ggml-vocab-llama-bpe.gguf");
    if (!src) return test_finish();
    char path[] = "/tmp/vt-harmony-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return test_finish();
    close(fd);
    CHECK(write_vocab(src, path));
    tokenizer *t = NULL;
    CHECK_OK(tok_load_file(path, &t));
    unlink(path);
    if (!t) return test_finish();

    /* each harmony token is one id; which are shown, which end the generation */
    for (int k = 0; k < N_HARMONY; k++) {
        int32_t *ids = NULL;
        int64_t n = 0;
        CHECK_OK(tok_encode(t, harmony[k], strlen(harmony[k]), false, true, &ids, &n));
        CHECK_MSG(n == 1, "%s: %lld tokens", harmony[k], (long long)n);
        if (n == 1) {
            char piece[64];
            const int64_t len = tok_piece(t, ids[0], false, piece, sizeof piece);
            const bool ends = k == 4 || k == 5; /* <|return|>, <|call|> */
            CHECK_MSG(tok_is_eog(t, ids[0]) == ends, "%s: end of generation %d", harmony[k], !ends);
            CHECK_MSG(ends ? len == 0 : (len == (int64_t)strlen(harmony[k]) && !memcmp(piece, harmony[k], len)),
                      "%s shows as '%.*s'", harmony[k], (int)(len > 0 ? len : 0), piece);
        }
        free(ids);
    }
    check_answer(t,
                 "<|channel|>analysis<|message|>Need the weather in Paris.<|end|><|start|>assistant<|channel|>"
                 "commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
                 "", "Need the weather in Paris.", "get_weather", "{\"city\":\"Paris\"}");
    check_answer(t,
                 "<|channel|>analysis<|message|>Simple sum.<|end|><|start|>assistant<|channel|>final<|message|>"
                 "2 + 2 is 4.<|return|>",
                 "2 + 2 is 4.", "Simple sum.", NULL, NULL);
    tok_free(t);
    return test_finish();
}
