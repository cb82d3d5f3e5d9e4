/* Chat templates: detection from template texts and the exact rendering of one
 * three-message conversation per family. The expected strings follow each
 * family's published format (Llama 2 blog, Mistral cookbook, Meta's Llama 3
 * model card, Gemma and Phi-3 model cards, ChatML) as llama.cpp renders them
 * (src/llama-chat.cpp): BOS is left to the tokenizer, the generation prompt is
 * appended. */
#include "server/chat_template.h"
#include "test.h"

#include <string.h>

static chat_message msg(const char *role, const char *content) {
    return (chat_message){role, strlen(role), content, strlen(content)};
}

static void check_render(chat_template_kind k, const chat_message *m, int n, const char *want) {
    char *out = NULL;
    size_t len = 0;
    CHECK_OK(chat_template_render(k, m, n, &out, &len));
    CHECK_MSG(out && len == strlen(want) && !memcmp(out, want, len) && out[len] == 0,
              "%s:\n got [%.*s]\nwant [%s]", chat_template_name(k), (int)len, out ? out : "(null)", want);
    free(out);
}

int main(void) {
    /* Assistant content with surrounding spaces shows which families trim. */
    const chat_message conv[3] = {msg("system", "You are terse."), msg("user", "Hello!"),
                                  msg("assistant", "  Hi there.  ")};

    check_render(CHAT_TMPL_CHATML, conv, 3,
                 "<|im_start|>system\nYou are terse.<|im_end|>\n"
                 "<|im_start|>user\nHello!<|im_end|>\n"
                 "<|im_start|>assistant\n  Hi there.  <|im_end|>\n"
                 "<|im_start|>assistant\n");
    check_render(CHAT_TMPL_LLAMA2, conv, 3, "[INST] You are terse.\nHello! [/INST]  Hi there.  </s>");
    check_render(CHAT_TMPL_LLAMA2_SYS, conv, 3,
                 "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHello! [/INST]  Hi there.  </s>");
    check_render(CHAT_TMPL_MISTRAL_V1, conv, 3, " [INST] You are terse.\n\nHello! [/INST]   Hi there.  </s>");
    check_render(CHAT_TMPL_MISTRAL_V3, conv, 3, "[INST] You are terse.\n\nHello![/INST] Hi there.</s>");
    check_render(CHAT_TMPL_MISTRAL_V7, conv, 3,
                 "[SYSTEM_PROMPT] You are terse.[/SYSTEM_PROMPT][INST] Hello![/INST]   Hi there.  </s>");
    check_render(CHAT_TMPL_LLAMA3, conv, 3,
                 "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\nHi there.<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n");
    check_render(CHAT_TMPL_GEMMA, conv, 3,
                 "<start_of_turn>user\nYou are terse.\n\nHello!<end_of_turn>\n"
                 "<start_of_turn>model\nHi there.<end_of_turn>\n"
                 "<start_of_turn>model\n");
    check_render(CHAT_TMPL_PHI3, conv, 3,
                 "<|system|>\nYou are terse.<|end|>\n<|user|>\nHello!<|end|>\n"
                 "<|assistant|>\n  Hi there.  <|end|>\n<|assistant|>\n");
    check_render(CHAT_TMPL_PHI4, conv, 3,
                 "<|im_start|>system<|im_sep|>You are terse.<|im_end|>"
                 "<|im_start|>user<|im_sep|>Hello!<|im_end|>"
                 "<|im_start|>assistant<|im_sep|>  Hi there.  <|im_end|>"
                 "<|im_start|>assistant<|im_sep|>");

    /* A single user turn: the usual request. */
    const chat_message one[1] = {msg("user", "Tell me a story.")};
    check_render(CHAT_TMPL_CHATML, one, 1, "<|im_start|>user\nTell me a story.<|im_end|>\n<|im_start|>assistant\n");
    check_render(CHAT_TMPL_LLAMA2_SYS, one, 1, "[INST] Tell me a story. [/INST]");
    check_render(CHAT_TMPL_GEMMA, one, 1, "<start_of_turn>user\nTell me a story.<end_of_turn>\n<start_of_turn>model\n");
    /* Gemma: a system message with no user turn after it is dropped, never lost into a model turn. */
    const chat_message sys_asst[2] = {msg("system", "S"), msg("assistant", "A")};
    check_render(CHAT_TMPL_GEMMA, sys_asst, 2, "<start_of_turn>model\nA<end_of_turn>\n<start_of_turn>model\n");

    /* No messages: the generation prompt alone, and always a NUL-terminated string (the
     * mistral families render nothing: fuzz_chat_template found an unterminated buffer). */
    check_render(CHAT_TMPL_MISTRAL_V3, one, 0, "");
    check_render(CHAT_TMPL_MISTRAL_V7, one, 0, "");
    check_render(CHAT_TMPL_LLAMA3, one, 0, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    /* A name with bytes after a NUL is not that name; detection never reads past len. */
    CHECK(chat_template_detect("chatml\0xyz", 10) == CHAT_TMPL_UNKNOWN);
    CHECK(chat_template_detect("<|im_start|>", 11) == CHAT_TMPL_UNKNOWN);

    /* Detection on excerpts of the real templates. */
    struct {
        const char *tmpl;
        chat_template_kind want;
    } det[] = {
        {"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
         "'<|im_end|>' + '\\n'}}{% endfor %}",
         CHAT_TMPL_CHATML},
        {"{{'<|im_start|>' + message['role'] + '<|im_sep|>' + message['content'] + '<|im_end|>'}}", CHAT_TMPL_PHI4},
        {"{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}", CHAT_TMPL_LLAMA2},
        {"{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' %}{{ '[INST] ' + content }}",
         CHAT_TMPL_LLAMA2_SYS},
        {"{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}{{- '[INST]' + message['content'] }}",
         CHAT_TMPL_MISTRAL_V7},
        {"{%- if messages[0]['role'] == 'system' %}{{- bos_token }}{{- '[AVAILABLE_TOOLS]' }}{{- '[INST]' }}",
         CHAT_TMPL_MISTRAL_V3},
        {"{{ bos_token }}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' "
         "+ message['content'] | trim + '<|eot_id|>' %}",
         CHAT_TMPL_LLAMA3},
        {"{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}", CHAT_TMPL_GEMMA},
        {"{{'<|user|>' + '\\n' + message['content'] + '<|end|>' + '\\n' + '<|assistant|>' + '\\n'}}",
         CHAT_TMPL_PHI3},
        {"llama3", CHAT_TMPL_LLAMA3},
        {"gemma", CHAT_TMPL_GEMMA},
        {"{{ message.content }}", CHAT_TMPL_UNKNOWN},
        {"", CHAT_TMPL_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof det / sizeof det[0]; i++) {
        chat_template_kind k = chat_template_detect(det[i].tmpl, strlen(det[i].tmpl));
        CHECK_MSG(k == det[i].want, "template %zu: detected %s, want %s", i, chat_template_name(k),
                  chat_template_name(det[i].want));
    }

    chat_template_kind k = CHAT_TMPL_UNKNOWN;
    CHECK(chat_template_from_name("phi3", &k) && k == CHAT_TMPL_PHI3);
    CHECK(chat_template_from_name("mistral", &k) && k == CHAT_TMPL_MISTRAL_V3);
    CHECK(!chat_template_from_name("jinja", &k));
    for (int t = 1; t < CHAT_TMPL_COUNT; t++) {
        CHECK(chat_template_from_name(chat_template_name((chat_template_kind)t), &k) && (int)k == t);
    }
    char *out = NULL;
    size_t len = 0;
    CHECK(chat_template_render(CHAT_TMPL_UNKNOWN, conv, 3, &out, &len) == VT_E_INVALID && !out);
    return test_finish();
}
