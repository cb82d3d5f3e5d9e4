/* Native renderings of the common chat-template families (see chat_template.h). */
#include "server/chat_template.h"

#include "base/status.h"
#include "server/strbuf.h"

#include <ctype.h>
#include <string.h>

static const char *const template_names[CHAT_TMPL_COUNT] = {
    [CHAT_TMPL_UNKNOWN] = "unknown",       [CHAT_TMPL_CHATML] = "chatml",
    [CHAT_TMPL_LLAMA2] = "llama2",         [CHAT_TMPL_LLAMA2_SYS] = "llama2-sys",
    [CHAT_TMPL_MISTRAL_V1] = "mistral-v1", [CHAT_TMPL_MISTRAL_V3] = "mistral-v3",
    [CHAT_TMPL_MISTRAL_V7] = "mistral-v7", [CHAT_TMPL_LLAMA3] = "llama3",
    [CHAT_TMPL_GEMMA] = "gemma",           [CHAT_TMPL_PHI3] = "phi3",
    [CHAT_TMPL_PHI4] = "phi4",
};

const char *chat_template_name(chat_template_kind kind) {
    return kind >= 0 && kind < CHAT_TMPL_COUNT ? template_names[kind] : "unknown";
}

bool chat_template_from_name(const char *name, chat_template_kind *out) {
    for (int k = 1; k < CHAT_TMPL_COUNT; k++) {
        if (!strcmp(name, template_names[k])) {
            *out = (chat_template_kind)k;
            return true;
        }
    }
    if (!strcmp(name, "mistral")) { /* the common alias */
        *out = CHAT_TMPL_MISTRAL_V3;
        return true;
    }
    return false;
}

static bool contains(const char *hay, size_t len, const char *needle) {
    return memmem(hay, len, needle, strlen(needle)) != NULL;
}

chat_template_kind chat_template_detect(const char *t, size_t len) {
    if (!t || !len) return CHAT_TMPL_UNKNOWN;
    if (len < 32 && !memchr(t, 0, len)) { /* "chatml\0..." is no name */
        char name[32];
        memcpy(name, t, len);
        name[len] = 0;
        chat_template_kind k;
        if (chat_template_from_name(name, &k)) return k;
    }
    /* Order matters: it follows llama.cpp's llm_chat_detect_template, so a
     * template that carries markers of two families is classified the same way. */
    if (contains(t, len, "<|im_start|>")) {
        return contains(t, len, "<|im_sep|>") ? CHAT_TMPL_PHI4 : CHAT_TMPL_CHATML;
    }
    if ((len >= 7 && !memcmp(t, "mistral", 7)) || contains(t, len, "[INST]")) {
        if (contains(t, len, "[SYSTEM_PROMPT]")) return CHAT_TMPL_MISTRAL_V7;
        if (contains(t, len, "' [INST] ' + system_message") || contains(t, len, "[AVAILABLE_TOOLS]")) {
            return contains(t, len, " [INST]") ? CHAT_TMPL_MISTRAL_V1 : CHAT_TMPL_MISTRAL_V3;
        }
        return contains(t, len, "<<SYS>>") ? CHAT_TMPL_LLAMA2_SYS : CHAT_TMPL_LLAMA2;
    }
    if (contains(t, len, "<|assistant|>") && contains(t, len, "<|end|>")) return CHAT_TMPL_PHI3;
    if (contains(t, len, "<start_of_turn>")) return CHAT_TMPL_GEMMA;
    if (contains(t, len, "<|start_header_id|>") && contains(t, len, "<|end_header_id|>")) {
        return CHAT_TMPL_LLAMA3;
    }
    return CHAT_TMPL_UNKNOWN;
}

static bool role_is(const chat_message *m, const char *role) {
    size_t n = strlen(role);
    return m->role_len == n && !memcmp(m->role, role, n);
}

/* Python's str.strip() over ASCII whitespace, as the templates' `| trim`. */
static void add_trimmed(strbuf *sb, const char *s, size_t n) {
    size_t a = 0, b = n;
    while (a < b && isspace((unsigned char)s[a])) a++;
    while (b > a && isspace((unsigned char)s[b - 1])) b--;
    sb_addn(sb, s + a, b - a);
}

static void render_llama2(strbuf *sb, const chat_message *msgs, int64_t n, bool with_sys) {
    bool in_turn = true; /* the first [INST] is written here, BOS comes from the tokenizer */
    sb_add(sb, "[INST] ");
    for (int64_t i = 0; i < n; i++) {
        const chat_message *m = &msgs[i];
        if (!in_turn) {
            in_turn = true;
            sb_add(sb, "[INST] ");
        }
        if (role_is(m, "system")) {
            if (with_sys) {
                sb_add(sb, "<<SYS>>\n");
                sb_addn(sb, m->content, m->content_len);
                sb_add(sb, "\n<</SYS>>\n\n");
            } else {
                sb_addn(sb, m->content, m->content_len);
                sb_add(sb, "\n");
            }
        } else if (role_is(m, "user")) {
            sb_addn(sb, m->content, m->content_len);
            sb_add(sb, " [/INST]");
        } else {
            sb_addn(sb, m->content, m->content_len);
            sb_add(sb, "</s>");
            in_turn = false;
        }
    }
}

static void render_mistral(strbuf *sb, const chat_message *msgs, int64_t n, chat_template_kind kind) {
    if (kind == CHAT_TMPL_MISTRAL_V7) {
        for (int64_t i = 0; i < n; i++) {
            const chat_message *m = &msgs[i];
            if (role_is(m, "system")) {
                sb_add(sb, "[SYSTEM_PROMPT] ");
                sb_addn(sb, m->content, m->content_len);
                sb_add(sb, "[/SYSTEM_PROMPT]");
            } else if (role_is(m, "user")) {
                sb_add(sb, "[INST] ");
                sb_addn(sb, m->content, m->content_len);
                sb_add(sb, "[/INST]");
            } else {
                sb_add(sb, " ");
                sb_addn(sb, m->content, m->content_len);
                sb_add(sb, "</s>");
            }
        }
        return;
    }
    const char *lead = kind == CHAT_TMPL_MISTRAL_V1 ? " " : "";
    bool in_turn = false;
    for (int64_t i = 0; i < n; i++) {
        const chat_message *m = &msgs[i];
        if (!in_turn) {
            sb_add(sb, lead);
            sb_add(sb, "[INST] ");
            in_turn = true;
        }
        if (role_is(m, "system")) {
            sb_addn(sb, m->content, m->content_len);
            sb_add(sb, "\n\n");
        } else if (role_is(m, "user")) {
            sb_addn(sb, m->content, m->content_len);
            sb_add(sb, lead);
            sb_add(sb, "[/INST]");
        } else {
            sb_add(sb, " ");
            if (kind == CHAT_TMPL_MISTRAL_V3) {
                add_trimmed(sb, m->content, m->content_len);
            } else {
                sb_addn(sb, m->content, m->content_len);
            }
            sb_add(sb, "</s>");
            in_turn = false;
        }
    }
}

static void render_gemma(strbuf *sb, const chat_message *msgs, int64_t n) {
    /* Gemma has no system role: the system text opens the next user turn. */
    strbuf system = {0};
    for (int64_t i = 0; i < n; i++) {
        const chat_message *m = &msgs[i];
        if (role_is(m, "system")) {
            add_trimmed(&system, m->content, m->content_len);
            continue;
        }
        bool model = role_is(m, "assistant");
        sb_add(sb, "<start_of_turn>");
        if (model) {
            sb_add(sb, "model");
        } else {
            sb_addn(sb, m->role, m->role_len);
        }
        sb_add(sb, "\n");
        if (system.len && !model) {
            sb_addn(sb, system.ptr, system.len);
            sb_add(sb, "\n\n");
            system.len = 0;
        }
        add_trimmed(sb, m->content, m->content_len);
        sb_add(sb, "<end_of_turn>\n");
    }
    if (system.failed) sb->failed = true;
    sb_free(&system);
    sb_add(sb, "<start_of_turn>model\n");
}

vt_status chat_template_render(chat_template_kind kind, const chat_message *msgs, int64_t n,
                               char **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    strbuf sb = {0};
    sb_reserve(&sb, 64);
    switch (kind) {
    case CHAT_TMPL_CHATML:
        for (int64_t i = 0; i < n; i++) {
            sb_add(&sb, "<|im_start|>");
            sb_addn(&sb, msgs[i].role, msgs[i].role_len);
            sb_add(&sb, "\n");
            sb_addn(&sb, msgs[i].content, msgs[i].content_len);
            sb_add(&sb, "<|im_end|>\n");
        }
        sb_add(&sb, "<|im_start|>assistant\n");
        break;
    case CHAT_TMPL_PHI4:
        for (int64_t i = 0; i < n; i++) {
            sb_add(&sb, "<|im_start|>");
            sb_addn(&sb, msgs[i].role, msgs[i].role_len);
            sb_add(&sb, "<|im_sep|>");
            sb_addn(&sb, msgs[i].content, msgs[i].content_len);
            sb_add(&sb, "<|im_end|>");
        }
        sb_add(&sb, "<|im_start|>assistant<|im_sep|>");
        break;
    case CHAT_TMPL_LLAMA2:
    case CHAT_TMPL_LLAMA2_SYS:
        render_llama2(&sb, msgs, n, kind == CHAT_TMPL_LLAMA2_SYS);
        break;
    case CHAT_TMPL_MISTRAL_V1:
    case CHAT_TMPL_MISTRAL_V3:
    case CHAT_TMPL_MISTRAL_V7:
        render_mistral(&sb, msgs, n, kind);
        break;
    case CHAT_TMPL_LLAMA3:
        for (int64_t i = 0; i < n; i++) {
            sb_add(&sb, "<|start_header_id|>");
            sb_addn(&sb, msgs[i].role, msgs[i].role_len);
            sb_add(&sb, "<|end_header_id|>\n\n");
            add_trimmed(&sb, msgs[i].content, msgs[i].content_len);
            sb_add(&sb, "<|eot_id|>");
        }
        sb_add(&sb, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case CHAT_TMPL_GEMMA:
        render_gemma(&sb, msgs, n);
        break;
    case CHAT_TMPL_PHI3:
        for (int64_t i = 0; i < n; i++) {
            sb_add(&sb, "<|");
            sb_addn(&sb, msgs[i].role, msgs[i].role_len);
            sb_add(&sb, "|>\n");
            sb_addn(&sb, msgs[i].content, msgs[i].content_len);
            sb_add(&sb, "<|end|>\n");
        }
        sb_add(&sb, "<|assistant|>\n");
        break;
    default:
        sb_free(&sb);
        return vt_errorf(VT_E_INVALID, "chat template: no renderer for family %d", (int)kind);
    }
    if (sb.failed) {
        sb_free(&sb);
        return vt_errorf(VT_E_NOMEM, "chat template: out of memory rendering %lld messages",
                         (long long)n);
    }
    *out = sb.ptr;
    *out_len = sb.len;
    return VT_OK;
}
