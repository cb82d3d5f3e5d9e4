/* A chat request rendered with the model's own Jinja template (src/jinja), the
 * way llama-server's --jinja and transformers' apply_chat_template render it.
 *
 * The variables the template sees:
 *   messages               the request's messages as sent, with three changes:
 *                          content given as text parts is joined into one string
 *                          (what the built-in renderers do, and what most templates
 *                          accept), role "developer" becomes "system", and each
 *                          tool call's function.arguments, which OpenAI clients send
 *                          as a JSON string, is parsed into an object (the Hugging
 *                          Face convention templates are written for; a string that
 *                          is not JSON stays a string)
 *   tools                  the request's tools, when given
 *   add_generation_prompt  true
 *   bos_token, eos_token   the texts of the vocabulary's BOS / EOS tokens ("" if none)
 *   ...                    every key of the request's chat_template_kwargs object
 *                          (enable_thinking, reasoning_effort, ...)
 * strftime_now() sees today's date (UTC) unless env fixes one.
 *
 * The rendering drops a leading bos_token when strip_bos is set (the tokenizer
 * adds BOS itself; llama.cpp does the same), so the prompt does not start with two. */
#ifndef VT_SERVER_CHAT_JINJA_H
#define VT_SERVER_CHAT_JINJA_H

#include "jinja/jinja.h"
#include "server/openai.h"

#include <jansson.h>

typedef struct chat_jinja_env {
    const char *bos_token; /* "" when the vocabulary has none */
    const char *eos_token;
    bool strip_bos;        /* the tokenizer adds BOS: drop a rendered leading bos_token */
    int year, month, day;  /* the date strftime_now() sees; 0: today (UTC) */
} chat_jinja_env;

/* A jansson value as a jinja value (new reference; NULL when out of memory). */
jinja_value *chat_jinja_from_json(const json_t *j);

/* The template's variables for request r (a chat request parsed by oai_parse_request). */
vt_status chat_jinja_vars(const oai_request *r, const chat_jinja_env *env, jinja_value **out);

/* Renders request r with template t. *out is malloc'd (caller frees), *out_len its
 * length. VT_E_INVALID when the template refuses the conversation (the message is
 * the template's, prefixed "chat template: "), or passes a render limit;
 * VT_E_NOMEM when memory runs out. */
vt_status chat_jinja_render(const jinja_template *t, const oai_request *r, const chat_jinja_env *env,
                            char **out, size_t *out_len);

#endif
