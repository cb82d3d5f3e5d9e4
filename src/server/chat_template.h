/* Chat templates: a conversation (role, content) rendered into one prompt string.
 *
 * vt does not run Jinja. The template text a GGUF carries in
 * tokenizer.chat_template is recognised by distinctive substrings (the same
 * heuristics llama.cpp uses) and the conversation is rendered natively in that
 * family's format. The generation prompt (the opening of the assistant's turn)
 * is always appended. The rendered text contains control-token texts such as
 * <|im_start|>; tokenize it with parse_special so they become single tokens.
 * BOS is not part of the rendering: the tokenizer adds it as the vocabulary asks.
 *
 * Families:
 *   chatml      <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
 *   llama2      [INST] {user} [/INST]{assistant}</s>  (system: first user turn, no <<SYS>>)
 *   llama2-sys  [INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST]{assistant}</s>
 *   mistral-v1  " [INST] {system}\n\n{user} [/INST] {assistant}</s>"
 *   mistral-v3  [INST] {system}\n\n{user}[/INST] {assistant (trimmed)}</s>
 *   mistral-v7  [SYSTEM_PROMPT] {system}[/SYSTEM_PROMPT][INST] {user}[/INST] {assistant}</s>
 *   llama3      <|start_header_id|>{role}<|end_header_id|>\n\n{trimmed}<|eot_id|> ...
 *   gemma       <start_of_turn>{user|model}\n{trimmed}<end_of_turn>\n; the system text
 *               is folded into the next user turn followed by a blank line
 *   phi3        <|{role}|>\n{content}<|end|>\n ... <|assistant|>\n
 *   phi4        <|im_start|>{role}<|im_sep|>{content}<|im_end|> ... */
#ifndef VT_SERVER_CHAT_TEMPLATE_H
#define VT_SERVER_CHAT_TEMPLATE_H

#include "vt.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum chat_template_kind {
    CHAT_TMPL_UNKNOWN = 0,
    CHAT_TMPL_CHATML,
    CHAT_TMPL_LLAMA2,
    CHAT_TMPL_LLAMA2_SYS,
    CHAT_TMPL_MISTRAL_V1,
    CHAT_TMPL_MISTRAL_V3,
    CHAT_TMPL_MISTRAL_V7,
    CHAT_TMPL_LLAMA3,
    CHAT_TMPL_GEMMA,
    CHAT_TMPL_PHI3,
    CHAT_TMPL_PHI4,
    CHAT_TMPL_COUNT
} chat_template_kind;

typedef struct chat_message {
    const char *role; /* "system", "user", "assistant" (others are rendered as given) */
    size_t role_len;
    const char *content;
    size_t content_len;
} chat_message;

/* The family of a Jinja template text (len bytes); CHAT_TMPL_UNKNOWN when none
 * matches. A bare family name ("chatml", "llama3") is accepted too. */
chat_template_kind chat_template_detect(const char *tmpl, size_t len);
/* The family named `name` (see the list above); false if there is none. */
bool chat_template_from_name(const char *name, chat_template_kind *out);
/* The name of a family ("chatml"); "unknown" for CHAT_TMPL_UNKNOWN. */
const char *chat_template_name(chat_template_kind kind);

/* Render n messages in family `kind` with the generation prompt appended.
 * *out is malloc'd and NUL-terminated (caller frees), *out_len its length.
 * VT_E_INVALID for CHAT_TMPL_UNKNOWN, VT_E_NOMEM on allocation failure. */
vt_status chat_template_render(chat_template_kind kind, const chat_message *msgs, int64_t n,
                               char **out, size_t *out_len);

#endif
