/* The tool-call parser (src/server/toolcall.c) on real output strings of each
 * format: whole, and streamed a byte at a time and in 3-byte pieces, where the
 * deltas put together must equal the whole parse (so nothing streamed is ever
 * taken back), and the format detection on the templates of ../shared. */
#include "server/toolcall.h"
#include "test.h"

#include <stdio.h>

typedef struct want_call {
    const char *name, *args;
} want_call;

typedef struct tcase {
    const char *what;
    tc_format format;
    bool reasoning, starts_in_reasoning;
    const char *text;
    const char *content, *reasoning_text;
    want_call calls[4];
    int n_calls;
} tcase;

#define DS(x) "<\xef\xbd\x9c" x "\xef\xbd\x9c>"
#define SEP "\xe2\x96\x81"

static const tcase cases[] = {
    {.what = "hermes (Qwen2.5)", .format = TC_HERMES,
     .text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>",
     .content = "", .calls = {{"get_weather", "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}, .n_calls = 1},
    {.what = "hermes, text then two parallel calls", .format = TC_HERMES,
     .text = "Let me check both.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": \"}</tool_call>\"}}\n</tool_call>\n"
             "<tool_call>\n{\"arguments\": {\"y\": [1, 2]}, \"name\": \"b\"}\n</tool_call>",
     .content = "Let me check both.\n",
     .calls = {{"a", "{\"x\": \"}</tool_call>\"}"}, {"b", "{\"y\": [1, 2]}"}}, .n_calls = 2},
    {.what = "hermes, plain answer", .format = TC_HERMES, .text = "The capital of France is Paris. <tool",
     .content = "The capital of France is Paris. <tool"},
    {.what = "qwen3 with thinking", .format = TC_HERMES, .reasoning = true,
     .text = "<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
             "{\"city\": \"Tokyo\"}}\n</tool_call>",
     .content = "", .reasoning_text = "\nThe user wants the weather.\n",
     .calls = {{"get_weather", "{\"city\": \"Tokyo\"}"}}, .n_calls = 1},
    {.what = "deepseek r1 style: the prompt opened <think>", .format = TC_NONE, .reasoning = true,
     .starts_in_reasoning = true, .text = "Okay, 2+2.\n</think>\n\nThe answer is 4.",
     .content = "The answer is 4.", .reasoning_text = "Okay, 2+2.\n"},
    {.what = "qwen3_coder xml", .format = TC_QWEN3_CODER,
     .text = "I'll read it.\n<tool_call>\n<function=read_file>\n<parameter=path>\nsrc/main.c\n</parameter>\n"
             "<parameter=limit>\n40\n</parameter>\n<parameter=opts>\n{\"raw\": true}\n</parameter>\n</function>\n</tool_call>",
     .content = "I'll read it.\n",
     .calls = {{"read_file", "{\"path\": \"src/main.c\", \"limit\": 40, \"opts\": {\"raw\": true}}"}}, .n_calls = 1},
    {.what = "qwen3_coder xml, multi-line string and no parameters", .format = TC_QWEN3_CODER,
     .text = "<tool_call>\n<function=write>\n<parameter=text>\nline \"1\"\nline 2\n</parameter>\n</function>\n</tool_call>\n"
             "<tool_call>\n<function=now>\n</function>\n</tool_call>",
     .content = "", .calls = {{"write", "{\"text\": \"line \\\"1\\\"\\nline 2\"}"}, {"now", "{}"}}, .n_calls = 2},
    {.what = "glm 4.6", .format = TC_GLM,
     .text = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n<arg_key>days</arg_key>\n"
             "<arg_value>3</arg_value>\n</tool_call>",
     .content = "", .calls = {{"get_weather", "{\"city\": \"Beijing\", \"days\": 3}"}}, .n_calls = 1},
    {.what = "llama 3.1 json", .format = TC_LLAMA3,
     .text = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"San Francisco, CA\"}}",
     .content = "", .calls = {{"get_weather", "{\"city\": \"San Francisco, CA\"}"}}, .n_calls = 1},
    {.what = "llama 3.1 python_tag, two calls", .format = TC_LLAMA3,
     .text = "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"q\": 1.5}}",
     .content = "", .calls = {{"a", "{}"}, {"b", "{\"q\": 1.5}"}}, .n_calls = 2},
    {.what = "llama 3.1 plain json answer is content", .format = TC_LLAMA3, .text = "{\"answer\": 42}",
     .content = "{\"answer\": 42}"},
    {.what = "llama 3.1 prose", .format = TC_LLAMA3, .text = "Hello! How can I help?",
     .content = "Hello! How can I help?"},
    {.what = "mistral nemo array", .format = TC_MISTRAL,
     .text = "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\"}, \"id\": \"abc123def\"}, "
             "{\"name\": \"get_time\", \"arguments\": {}}]",
     .content = "", .calls = {{"get_weather", "{\"city\": \"Lyon\"}"}, {"get_time", "{}"}}, .n_calls = 2},
    {.what = "mistral small 3.2 [ARGS]", .format = TC_MISTRAL,
     .text = "Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}[TOOL_CALLS]get_time[CALL_ID]a1b2c3d4e[ARGS]{}",
     .content = "Sure.", .calls = {{"get_weather", "{\"city\": \"Oslo\"}"}, {"get_time", "{}"}}, .n_calls = 2},
    {.what = "deepseek v3.1", .format = TC_DEEPSEEK,
     .text = "Checking." DS("tool" SEP "calls" SEP "begin") DS("tool" SEP "call" SEP "begin") "get_weather" DS("tool" SEP "sep")
             "{\"city\": \"Seoul\"}" DS("tool" SEP "call" SEP "end") DS("tool" SEP "call" SEP "begin") "get_time"
             DS("tool" SEP "sep") "{}" DS("tool" SEP "call" SEP "end") DS("tool" SEP "calls" SEP "end"),
     .content = "Checking.", .calls = {{"get_weather", "{\"city\": \"Seoul\"}"}, {"get_time", "{}"}}, .n_calls = 2},
    {.what = "deepseek r1 with ```json", .format = TC_DEEPSEEK, .reasoning = true,
     .text = "<think>need weather</think>\n\n" DS("tool" SEP "calls" SEP "begin") DS("tool" SEP "call" SEP "begin") "function"
             DS("tool" SEP "sep") "get_weather\n```json\n{\"city\": \"Rome\"}\n```" DS("tool" SEP "call" SEP "end")
             DS("tool" SEP "calls" SEP "end"),
     .content = "", .reasoning_text = "need weather", .calls = {{"get_weather", "{\"city\": \"Rome\"}"}}, .n_calls = 1},
    {.what = "gpt-oss harmony call", .format = TC_HARMONY,
     .text = "<|channel|>analysis<|message|>Need to call get_weather.<|end|><|start|>assistant<|channel|>commentary "
             "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Berlin\"}<|call|>",
     .content = "", .reasoning_text = "Need to call get_weather.",
     .calls = {{"get_weather", "{\"city\":\"Berlin\"}"}}, .n_calls = 1},
    {.what = "gpt-oss harmony answer", .format = TC_HARMONY,
     .text = "<|channel|>analysis<|message|>Simple.<|end|><|start|>assistant<|channel|>final<|message|>It is 4.<|return|>",
     .content = "It is 4.", .reasoning_text = "Simple."},
};

typedef struct collected {
    strbuf content, reasoning;
    strbuf names[8], args[8];
    int n_calls;
    bool out_of_order;
} collected;

static void collect(void *ud, tc_delta_kind kind, int32_t call, const char *s, size_t n) {
    collected *c = ud;
    switch (kind) {
    case TC_DELTA_CONTENT: sb_addn(&c->content, s, n); break;
    case TC_DELTA_REASONING: sb_addn(&c->reasoning, s, n); break;
    case TC_DELTA_CALL:
        if (call != c->n_calls || call >= 8) c->out_of_order = true;
        else sb_addn(&c->names[c->n_calls++], s, n);
        break;
    case TC_DELTA_ARGS:
        if (call < 0 || call >= c->n_calls) c->out_of_order = true;
        else sb_addn(&c->args[call], s, n);
        break;
    }
}

static bool eq(const strbuf *b, const char *s) {
    s = s ? s : "";
    return b->len == strlen(s) && (!b->len || !memcmp(b->ptr, s, b->len));
}

static void check_stream(const tcase *t, const tc_options *o, size_t step) {
    tc_stream st;
    tc_stream_init(&st, o);
    collected c = {0};
    size_t len = strlen(t->text);
    for (size_t i = 0; i < len; i += step) {
        size_t n = len - i < step ? len - i : step;
        CHECK(tc_stream_feed(&st, t->text + i, n, false, collect, &c));
    }
    CHECK(tc_stream_feed(&st, "", 0, true, collect, &c));
    CHECK_MSG(!c.out_of_order, "%s", t->what);
    CHECK_MSG(eq(&c.content, t->content), "%s (step %zu): content '%s'", t->what, step, c.content.ptr ? c.content.ptr : "");
    CHECK_MSG(eq(&c.reasoning, t->reasoning_text), "%s (step %zu): reasoning '%s'", t->what, step,
              c.reasoning.ptr ? c.reasoning.ptr : "");
    CHECK_MSG(c.n_calls == t->n_calls, "%s (step %zu): %d calls", t->what, step, c.n_calls);
    for (int k = 0; k < c.n_calls && k < t->n_calls; k++) {
        CHECK_MSG(eq(&c.names[k], t->calls[k].name), "%s (step %zu) call %d name '%s'", t->what, step, k,
                  c.names[k].ptr ? c.names[k].ptr : "");
        CHECK_MSG(eq(&c.args[k], t->calls[k].args), "%s (step %zu) call %d args '%s'", t->what, step, k,
                  c.args[k].ptr ? c.args[k].ptr : "");
    }
    sb_free(&c.content);
    sb_free(&c.reasoning);
    for (int k = 0; k < 8; k++) {
        sb_free(&c.names[k]);
        sb_free(&c.args[k]);
    }
    tc_stream_free(&st);
}

static void check_case(const tcase *t) {
    tc_options o = {.format = t->format, .reasoning = t->reasoning, .starts_in_reasoning = t->starts_in_reasoning};
    tc_result r;
    tc_parse(&o, t->text, strlen(t->text), true, &r);
    CHECK_MSG(eq(&r.content, t->content), "%s: content '%s'", t->what, r.content.ptr ? r.content.ptr : "");
    CHECK_MSG(eq(&r.reasoning, t->reasoning_text), "%s: reasoning '%s'", t->what, r.reasoning.ptr ? r.reasoning.ptr : "");
    CHECK_MSG(r.n_calls == t->n_calls, "%s: %d calls, want %d", t->what, r.n_calls, t->n_calls);
    for (int k = 0; k < r.n_calls && k < t->n_calls; k++) {
        CHECK_MSG(eq(&r.calls[k].name, t->calls[k].name), "%s: name '%s'", t->what, r.calls[k].name.ptr);
        CHECK_MSG(eq(&r.calls[k].args, t->calls[k].args), "%s: args '%s'", t->what, r.calls[k].args.ptr);
        CHECK_MSG(r.calls[k].done, "%s: call %d not done", t->what, k);
    }
    tc_result_free(&r);
    check_stream(t, &o, 1);
    check_stream(t, &o, 3);
}

/* A streamed call is reported only once its name is whole, and its arguments
 * grow: a prefix cut mid-name shows no call. */
static void check_partial(void) {
    tc_options o = {.format = TC_HERMES};
    const char *t = "<tool_call>\n{\"name\": \"get_wea";
    tc_result r;
    tc_parse(&o, t, strlen(t), false, &r);
    CHECK(r.n_calls == 0 && r.content.len == 0);
    tc_result_free(&r);
    t = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par";
    tc_parse(&o, t, strlen(t), false, &r);
    CHECK(r.n_calls == 1 && eq(&r.calls[0].args, "{\"city\": \"Par") && !r.calls[0].done);
    tc_result_free(&r);
    /* a truncated answer (max_tokens) still gives the call as far as it went */
    tc_parse(&o, t, strlen(t), true, &r);
    CHECK(r.n_calls == 1 && !r.calls[0].done);
    tc_result_free(&r);
    /* text that only looks like a marker start is held back, then released */
    t = "a <tool";
    tc_parse(&o, t, strlen(t), false, &r);
    CHECK(eq(&r.content, "a "));
    tc_result_free(&r);
}

static void check_detect(void) {
    static const struct {
        const char *file;
        tc_format want;
    } d[] = {
        {"Qwen-Qwen2.5-7B-Instruct.jinja", TC_HERMES},
        {"Qwen-Qwen3-0.6B.jinja", TC_HERMES},
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", TC_HERMES},
        {"Qwen3-Coder.jinja", TC_QWEN3_CODER},
        {"Qwen3.5-4B.jinja", TC_QWEN3_CODER},
        {"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", TC_QWEN3_CODER},
        {"GLM-4.6.jinja", TC_GLM},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", TC_LLAMA3},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", TC_LLAMA3},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", TC_MISTRAL},
        {"Mistral-Small-3.2-24B-Instruct-2506.jinja", TC_MISTRAL},
        {"deepseek-ai-DeepSeek-V3.1.jinja", TC_DEEPSEEK},
        {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", TC_DEEPSEEK},
        {"openai-gpt-oss-120b.jinja", TC_HARMONY},
    };
    const char *dir = getenv("VT_TEST_MODELS");
    char path[1024];
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        snprintf(path, sizeof path, "%s/../chat-templates/%s", dir ? dir : "../shared/models", d[i].file);
        FILE *f = fopen(path, "rb");
        if (!f) {
            snprintf(path, sizeof path, "%s/chat-templates/%s", getenv("VT_SOURCE_DIR") ? getenv("VT_SOURCE_DIR") : ".",
                     d[i].file);
            f = fopen(path, "rb");
        }
        if (!f) {
            bool ci = getenv("CI") && !strcmp(getenv("CI"), "true");
            CHECK_MSG(!ci, "missing %s", d[i].file);
            continue;
        }
        strbuf b = {0};
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0) sb_addn(&b, buf, n);
        fclose(f);
        tc_format got = tc_detect(b.ptr, b.len);
        CHECK_MSG(got == d[i].want, "%s: detected %s, want %s", d[i].file, tc_format_name(got), tc_format_name(d[i].want));
        sb_free(&b);
    }
}

/* A vocabulary where a text is a token when it is in ids[] (id: its index + 100). */
static int32_t fake_token(void *ud, const char *text) {
    const char *const *ids = ud;
    for (int32_t i = 0; ids[i]; i++)
        if (!strcmp(ids[i], text)) return 100 + i;
    return -1;
}

/* Each format declares its markers; the ones that are tokens are collected in
 * the format's order, then the reasoning markers, each once. */
static void check_markers(void) {
    for (int f = TC_HERMES; f < TC_FORMAT_COUNT; f++) CHECK_MSG(tc_markers((tc_format)f)[0] != NULL, "%d", f);
    CHECK(tc_markers(TC_NONE)[0] == NULL && tc_markers(TC_FORMAT_COUNT)[0] == NULL);
    static const char *const vocab[] = {"</think>", "<arg_value>", "<tool_call>", "[TOOL_CALLS]", "<think>", NULL};
    tc_tokens t;
    tc_tokens_collect(TC_GLM, fake_token, (void *)vocab, &t);
    CHECK_EQ_INT(t.n, 4);
    CHECK(t.n == 4 && !strcmp(t.text[0], "<tool_call>") && t.id[0] == 102 && !strcmp(t.text[1], "<arg_value>") &&
          t.id[1] == 101 && !strcmp(t.text[2], "<think>") && t.id[2] == 104 && !strcmp(t.text[3], "</think>") &&
          t.id[3] == 100);
    CHECK(tc_tokens_find(&t, "<arg_value>", 11) == 101 && tc_tokens_find(&t, "<arg_value", 10) < 0 &&
          tc_tokens_find(&t, "[TOOL_CALLS]", 12) < 0 && tc_tokens_find(NULL, "<think>", 7) < 0);
    tc_tokens_collect(TC_MISTRAL, fake_token, (void *)vocab, &t);
    CHECK(t.n == 3 && t.id[0] == 103);
    tc_tokens_collect(TC_NONE, fake_token, (void *)vocab, &t);
    CHECK(t.n == 2); /* reasoning only */
}

int main(void) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
    check_partial();
    check_detect();
    check_markers();
    return test_finish();
}
