/* The OpenAI request bodies (/v1/completions, /v1/chat/completions) parsed into
 * an engine-ready description, and nothing else: no model, no I/O, so it can be
 * fuzzed (fuzz/fuzz_server_request.c). Tokenizing and queuing are the server's.
 *
 * Accepted fields (others are ignored, as OpenAI clients send extras):
 *   model (string), prompt (string | array of token ids | a batch: array of
 *   strings or of token-id arrays, answered with one choice per prompt and n,
 *   index = prompt * n + k, as OpenAI does) / messages (array of
 *   {role, content: string | [{type:"text", text}] | null}), max_tokens,
 *   max_completion_tokens, n_predict (the three alike: -1 unlimited, 0 nothing
 *   generated, as llama-server), temperature, top_p, top_k, min_p,
 *   presence_penalty, frequency_penalty, repetition_penalty / repeat_penalty,
 *   stop (string | array of strings), seed, stream, stream_options.include_usage,
 *   logprobs (chat: bool, completions: integer), top_logprobs (chat), n,
 *   ignore_eos; chat: tools (array of {type: "function", function: {name, description,
 *   parameters}}), tool_choice, parallel_tool_calls, reasoning_format ("none" |
 *   "deepseek", as llama-server's), logit_bias ({"token id": -100..100}; ids
 *   outside the vocabulary are ignored).
 *   response_format ({"type": "text"}, {"type": "json_object"} (any object, or
 *   llama-server's "schema" in it), {"type": "json_schema", "json_schema":
 *   {"name", "schema", "strict"}}), json_schema (llama-server: a schema), grammar
 *   (GBNF text): at most one, converted (server/json_schema.h) and parsed
 *   (grammar/grammar.h) here, so a bad one fails with the keyword or the line.
 * Fields vt does not implement are refused (VT_E_INVALID naming the field) rather
 * than ignored when they would change the answer: echo
 * (true), suffix (non-empty), best_of (> 1).
 * A wrong type or an out-of-range value fails with VT_E_INVALID and a message
 * that names the field; a body that is not JSON fails with VT_E_FORMAT. */
#ifndef VT_SERVER_OPENAI_H
#define VT_SERVER_OPENAI_H

#include "server/chat_template.h"
#include "vt.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define OAI_MAX_STOP 16         /* stop strings per request */
#define OAI_MAX_STOP_LEN 512    /* bytes of one stop string */
#define OAI_MAX_N 16            /* choices per prompt */
#define OAI_MAX_CHOICES 64      /* choices per request: prompts x n */
#define OAI_MAX_MESSAGES 4096   /* messages in a chat */
#define OAI_MAX_TOKENS (1 << 24) /* max_tokens, and prompt token ids */
#define OAI_MAX_LOGPROBS 20
#define OAI_MAX_LOGIT_BIAS 1024  /* tokens in logit_bias */
#define OAI_MAX_JSON_DEPTH 64           /* nesting of a request body */
#define OAI_MAX_JSON_COST ((size_t)32 << 20) /* bytes the parsed body may cost (oai_json_cost) */

typedef enum oai_kind { OAI_COMPLETION, OAI_CHAT } oai_kind;

/* tool_choice: "auto" (the model decides), "none" (tools are shown to the
 * template but the answer is not parsed for calls), "required" (a call must
 * come), {"type": "function", "function": {"name": N}} (a call of N must come). */
enum { OAI_REASONING_NONE = 1, OAI_REASONING_DEEPSEEK = 2 };

typedef enum oai_tool_choice { OAI_TOOLS_AUTO, OAI_TOOLS_NONE, OAI_TOOLS_REQUIRED, OAI_TOOLS_NAMED } oai_tool_choice;

typedef struct oai_prompt {
    const char *text;        /* points into the parsed body; NULL for token ids */
    size_t text_len;
    int32_t *tokens;         /* (n_tokens), malloc'd; ids not yet checked against a vocab */
    int64_t n_tokens;
} oai_prompt;

typedef struct oai_request {
    oai_kind kind;
    json_t *root;            /* the parsed body; the strings below point into it */
    const char *model;       /* NULL when absent */

    /* completions: one or more prompts, each text or token ids */
    oai_prompt *prompts;     /* (n_prompts), malloc'd */
    int32_t n_prompts;

    /* chat */
    chat_message *messages;  /* (n_messages), malloc'd; text of multi-part contents is joined */
    int64_t n_messages;
    char **joined;           /* contents joined from parts, owned (n_messages entries, may be NULL) */

    vt_sampling sampling;
    bool seed_given;
    int32_t max_tokens;      /* -1: not given or unlimited (until EOS or a full context); 0: generate
                                nothing (llama-server's n_predict 0); > 0: at most this many */
    const char *stop[OAI_MAX_STOP];
    int32_t n_stop;
    bool stream, include_usage;
    int32_t n_logprobs;      /* alternatives per token; -1: no logprobs */
    int32_t n;               /* choices */
    bool ignore_eos;

    /* chat: tools (the array stays in root, for the template) */
    int32_t n_tools;
    oai_tool_choice tool_choice; /* OAI_TOOLS_AUTO when not given */
    const char *tool_choice_name; /* OAI_TOOLS_NAMED: the function's name (in root) */
    bool parallel_tool_calls;     /* default true, as OpenAI */
    vt_logit_bias *logit_bias;    /* (sampling.n_logit_bias) malloc'd; sampling.logit_bias points here */
    int reasoning_format;         /* 0: the server's (--reasoning-format); else OAI_REASONING_* */
    char *grammar;                /* GBNF from response_format / json_schema / grammar (malloc'd), or NULL */
    size_t grammar_len;
} oai_request;

/* What parsing `len` bytes of JSON would cost, found by one pass over the text
 * (no allocation): the bytes jansson allocates for each value (an object 256,
 * an array 128, a string 80 plus its length, any other value 40, as jansson
 * allocates them with glibc on 64-bit) into *cost, and the deepest nesting. A
 * body of small values costs up to ~100x its size, so it is checked first:
 * VT_E_RANGE past OAI_MAX_JSON_COST (a 413), VT_E_INVALID past
 * OAI_MAX_JSON_DEPTH (a 400). Malformed text is left to the parser. */
vt_status oai_json_cost(const char *body, size_t len, size_t *cost);
/* Parse a request body of `len` bytes (after oai_json_cost). On success *out owns allocations (free
 * with oai_request_free); on failure *out is cleared and the message (from
 * vt_last_error) names the offending field. */
vt_status oai_parse_request(oai_kind kind, const char *body, size_t len, oai_request *out);
void oai_request_free(oai_request *req);

/* An OpenAI error body: {"error": {"message", "type", "code"}}. `code` is the
 * HTTP status (as OpenAI-compatible servers send) unless code_str is given. */
json_t *oai_error_json(int http_status, const char *type, const char *code_str, const char *message);
/* A JSON string of n bytes; invalid UTF-8 bytes and NULs become U+FFFD (a
 * token's piece can be part of a character). Never NULL. */
json_t *oai_json_string_lossy(const char *s, size_t n);
/* The OpenAI error type for an HTTP status ("invalid_request_error", ...). */
const char *oai_error_type(int http_status);

#endif
