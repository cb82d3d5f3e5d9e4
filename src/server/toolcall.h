/* The model's output split into content, reasoning and tool calls, for each
 * tool-call format the chat templates in ../shared/chat-templates teach their
 * models. Pure text in, text out: no jansson, no model, so it is fuzzed
 * (fuzz/fuzz_toolcall.c) and unit-tested on real output strings
 * (tests/test_server_toolcall.c).
 *
 * Formats (tc_detect picks one from the template's source, once per model):
 *   hermes       <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
 *                (Qwen2.5, Qwen3, Hermes 2/3, MiMo, Granite 4, Reka, Bielik, ...)
 *   qwen3_coder  <tool_call>\n<function=f>\n<parameter=p>\nvalue\n</parameter>\n
 *                </function>\n</tool_call> (Qwen3-Coder, Qwen3.5, Nemotron 3,
 *                StepFun 3.5, Seed-OSS)
 *   glm          <tool_call>f\n<arg_key>p</arg_key>\n<arg_value>v</arg_value>\n
 *                </tool_call> (GLM 4.6 / 4.7, Laguna)
 *                The three share one parser: what follows <tool_call> tells
 *                which (a '{', a "<function=", or a name).
 *   llama3       {"name": "f", "parameters": {...}} as the whole answer, maybe after
 *                <|python_tag|>; several separated by ';' (Llama 3.1 / 3.2)
 *   mistral      [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...] or
 *                [TOOL_CALLS]f[ARGS]{...} (Nemo, Small 3.2, Devstral, Ministral 3)
 *   deepseek     <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}
 *                <｜tool▁call▁end｜>...<｜tool▁calls▁end｜> (V3.1), and R1's
 *                <｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{...}\n```
 *   harmony      gpt-oss: <|channel|>analysis<|message|>...<|end|> is reasoning,
 *                <|channel|>final<|message|>... is content, and
 *                <|channel|>commentary to=functions.f <|constrain|>json<|message|>
 *                {...}<|call|> a call. Needs the control tokens in the text.
 * XML-style parameters become a JSON object: a value that is a whole JSON value
 * (a number, true, an object, ...) is kept as it is, any other is a JSON string;
 * a parameter whose schema is a string (tc_options.string_arg) is always its raw
 * text, as a JSON string.
 *
 * Reasoning (all formats but harmony, when tc_options.reasoning): a leading
 * <think>...</think> (or, with starts_in_reasoning, everything up to the first
 * </think>, for templates whose generation prompt opens the block) is reasoning.
 *
 * Streaming: tc_parse of a prefix of the output (final false) gives what is
 * certain so far: content stops before anything that may be the start of a
 * marker, a call appears once its name is whole, and its arguments grow as a
 * prefix of the final ones. tc_stream turns successive parses into deltas. */
#ifndef VT_SERVER_TOOLCALL_H
#define VT_SERVER_TOOLCALL_H

#include "server/strbuf.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum tc_format {
    TC_NONE, /* no tool calls: all is content (reasoning still split) */
    TC_HERMES,
    TC_QWEN3_CODER,
    TC_GLM,
    TC_LLAMA3,
    TC_MISTRAL,
    TC_DEEPSEEK,
    TC_HARMONY,
    TC_FORMAT_COUNT
} tc_format;

#define TC_MAX_CALLS 128 /* calls parsed from one answer; more stay content */
#define TC_MAX_MARKERS 8 /* marker strings of one format */

const char *tc_format_name(tc_format f);
/* The marker strings that give format f its structure (NULL-terminated): in real
 * vocabularies many are single special tokens, often control tokens that a
 * detokenizer drops (see tc_tokens). TC_NONE has none. */
const char *const *tc_markers(tc_format f);
/* The reasoning parser's markers: <think> and </think> (NULL-terminated). */
const char *const *tc_reasoning_markers(void);
/* The format a template's source teaches; TC_HERMES when it names none (the
 * most common, and what an unknown model most likely emits). */
tc_format tc_detect(const char *tmpl, size_t len);

typedef struct tc_options {
    tc_format format;
    bool reasoning;           /* split <think> blocks out as reasoning */
    bool starts_in_reasoning; /* the prompt ends inside an open <think> block */
    bool no_calls;            /* harmony without tools: a call's message is content */
    /* qwen3_coder and glm: whether parameter `key` of tool `name` takes a string
     * (its schema says so), so that its raw text stays a JSON string even when it
     * reads as JSON ("42", "true"), as llama.cpp's parsers do. NULL: a value that
     * reads as a whole JSON value is that value. ud is passed back. */
    bool (*string_arg)(void *ud, const char *name, size_t name_len, const char *key, size_t key_len);
    void *string_arg_ud;
} tc_options;

typedef struct tc_call {
    strbuf name;
    strbuf args; /* JSON text of the arguments ("{}" when the model gave none, once whole) */
    bool done;   /* the call's text is complete */
} tc_call;

typedef struct tc_result {
    strbuf content, reasoning;
    tc_call calls[TC_MAX_CALLS];
    int32_t n_calls;
} tc_result;

/* Parses len bytes of output. final: the output is complete (anything
 * unfinished is taken as far as it goes); otherwise only what later bytes
 * cannot change. *out is overwritten (tc_result_free it after, also on a
 * failed allocation, which leaves some strbuf .failed). */
void tc_parse(const tc_options *o, const char *text, size_t len, bool final, tc_result *out);
void tc_result_free(tc_result *r);
/* true when any buffer of r failed to allocate */
bool tc_result_failed(const tc_result *r);

/* The text that starts a call in format f, to append to the prompt when a call
 * must come (tool_choice "required", or a named function: then the name too,
 * up to where the arguments begin). args_style: the mistral template's
 * name[ARGS]{...} form (else [{"name": ...}]). Appends nothing for TC_NONE. The
 * parser is then fed this text before the model's output. */
void tc_prefill(tc_format f, bool args_style, const char *name, strbuf *out);

/* ---- markers that are tokens ------------------------------------------------- */

/* The markers of a format (and the reasoning markers) that are single tokens of
 * the model's vocabulary, found once per model, as llama.cpp's chat layer keeps
 * its "preserved_tokens": the engine renders them as their text in the output
 * the parsers read (vt_request_params.preserve, per request those it reads: a
 * control token is otherwise dropped, and the call with it), and a forced
 * call's grammar writes each as its token (<[id]>), so that the model's own
 * token, not a spelling of its text in other tokens, is what the constraint
 * allows. */
#define TC_MAX_TOKENS 16
typedef struct tc_tokens {
    int32_t n;
    const char *text[TC_MAX_TOKENS]; /* static strings of tc_markers / tc_reasoning_markers */
    int32_t id[TC_MAX_TOKENS];
} tc_tokens;

/* Fill *out with the markers of format f and the reasoning markers for which
 * token_of(ud, text) gives a token id (>= 0): the caller's vocabulary decides
 * (the server: a special token, not an end-of-generation one). */
void tc_tokens_collect(tc_format f, int32_t (*token_of)(void *ud, const char *text), void *ud, tc_tokens *out);
/* The token of marker s[0..n), or -1 (also for t NULL). */
int32_t tc_tokens_find(const tc_tokens *t, const char *s, size_t n);

/* ---- streaming --------------------------------------------------------------- */

typedef enum tc_delta_kind {
    TC_DELTA_CONTENT,
    TC_DELTA_REASONING,
    TC_DELTA_CALL, /* a new call: s is its name, call its index */
    TC_DELTA_ARGS, /* more of call `call`'s arguments */
} tc_delta_kind;

typedef void (*tc_emit_fn)(void *ud, tc_delta_kind kind, int32_t call, const char *s, size_t n);

typedef struct tc_stream {
    tc_options opt;
    strbuf text; /* the output so far */
    size_t sent_content, sent_reasoning;
    int32_t sent_calls;
    size_t sent_args[TC_MAX_CALLS];
    tc_result last; /* the latest parse */
} tc_stream;

void tc_stream_init(tc_stream *s, const tc_options *o);
/* Appends n bytes of output and emits what became certain; final: the output
 * is complete, emit the rest. Returns false when memory ran out. */
bool tc_stream_feed(tc_stream *s, const char *text, size_t n, bool final, tc_emit_fn emit, void *ud);
void tc_stream_free(tc_stream *s);

#endif
