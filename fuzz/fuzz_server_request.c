/* libFuzzer target: an HTTP body through the OpenAI request parser and, for a
 * chat, every chat-template renderer (the path from JSON to the engine's prompt
 * text, minus tokenization). The first byte picks completions or chat. */
#include "server/chat_template.h"
#include "server/openai.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    oai_kind kind = (data[0] & 1) ? OAI_CHAT : OAI_COMPLETION;
    oai_request r;
    if (oai_parse_request(kind, (const char *)data + 1, size - 1, &r) != VT_OK) return 0;
    if (r.n < 1 || r.n > OAI_MAX_N || r.n_stop > OAI_MAX_STOP) abort();
    /* -1: no logprobs asked (the engine then computes none) */
    if (r.sampling.n_logprobs < -1 || r.sampling.n_logprobs > OAI_MAX_LOGPROBS) abort();
    if (kind == OAI_COMPLETION && (r.n_prompts < 1 || (!r.prompts[0].text && !r.prompts[0].n_tokens))) abort();
    for (int32_t i = 0; i < r.n_stop; i++) {
        if (!r.stop[i] || strlen(r.stop[i]) > OAI_MAX_STOP_LEN) abort();
    }
    if (kind == OAI_CHAT) {
        if (r.n_messages < 1) abort();
        for (int k = 1; k < CHAT_TMPL_COUNT; k++) {
            char *out = NULL;
            size_t len = 0;
            if (chat_template_render((chat_template_kind)k, r.messages, r.n_messages, &out, &len) == VT_OK) {
                if (!out || strlen(out) > len) abort();
                free(out);
            }
        }
    }
    oai_request_free(&r);
    return 0;
}
