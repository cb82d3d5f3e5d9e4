/* libFuzzer target for the chat-template module: detection over arbitrary
 * template text, then rendering of an arbitrary conversation in the detected
 * family (chatml when none is recognised, as vt serve does) and in every other
 * family. Checks: the family is in range and its name round-trips, the
 * rendering is NUL-terminated at its length, every message's content (trimmed
 * where the family trims) appears in it, and its length is bounded by the
 * input's; ASan/LSan check memory.
 *
 * Input layout: the template text up to the first NUL byte (all of the input
 * when there is none); after it, NUL-separated fields taken in pairs as
 * (role, content). A role field of one byte below 8 is shorthand for a common
 * role (system, user, assistant, tool, ...); any other role field is used as
 * given. Each field gets an exact-size heap copy, so a read past its length
 * trips ASan. A seed that is only a template (no NUL) is rendered with a
 * fixed three-message conversation.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DVT_FUZZ=ON
 *   cmake --build build-fuzz --target fuzz_chat_template
 *   ./build-fuzz/fuzz_chat_template -max_total_time=60 fuzz/corpus/chat_template */
#include "server/chat_template.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MESSAGES 256

static const char *const short_roles[8] = {"system", "user", "assistant", "tool",
                                           "model",  "",     "function",  "developer"};

static char *dup_exact(const uint8_t *p, size_t n) {
    char *c = malloc(n ? n : 1);
    if (!c) abort();
    if (n) memcpy(c, p, n);
    return c;
}

static bool role_is(const chat_message *m, const char *role) {
    size_t n = strlen(role);
    return m->role_len == n && !memcmp(m->role, role, n);
}

/* the bytes of m's content with ASCII whitespace cut off both ends */
static void trimmed(const chat_message *m, const char **p, size_t *n) {
    size_t a = 0, b = m->content_len;
    while (a < b && isspace((unsigned char)m->content[a])) a++;
    while (b > a && isspace((unsigned char)m->content[b - 1])) b--;
    *p = m->content + a;
    *n = b - a;
}

static void check_render(chat_template_kind k, const chat_message *msgs, int64_t n, size_t input_bytes) {
    char *out = NULL;
    size_t len = 0;
    if (chat_template_render(k, msgs, n, &out, &len) != VT_OK) abort(); /* only NOMEM may fail */
    if (!out || out[len] != 0 || strlen(out) > len) abort();
    /* every family adds at most ~64 bytes of markup per message, plus the generation prompt */
    if (len > input_bytes + 64 * (size_t)n + 64) abort();
    for (int64_t i = 0; i < n; i++) {
        const chat_message *m = &msgs[i];
        /* gemma folds a system turn into the next user turn, and drops it with none */
        if (k == CHAT_TMPL_GEMMA && role_is(m, "system")) continue;
        const char *p;
        size_t pn;
        trimmed(m, &p, &pn);
        if (pn && !memmem(out, len, p, pn)) abort();
    }
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t tmpl_len = nul ? (size_t)(nul - data) : size;
    char *tmpl = dup_exact(data, tmpl_len);
    chat_template_kind k = chat_template_detect(tmpl, tmpl_len);
    if ((int)k < 0 || k >= CHAT_TMPL_COUNT) abort();
    if (k != CHAT_TMPL_UNKNOWN) {
        chat_template_kind back;
        if (!chat_template_from_name(chat_template_name(k), &back) || back != k) abort();
    }
    free(tmpl);
    if (k == CHAT_TMPL_UNKNOWN) k = CHAT_TMPL_CHATML;

    chat_message msgs[MAX_MESSAGES];
    char *owned[2 * MAX_MESSAGES];
    int n_owned = 0;
    int64_t n = 0;
    size_t input_bytes = 0;
    if (!nul) {
        static const char *const conv[3][2] = {
            {"system", "You are terse."}, {"user", "Hello!"}, {"assistant", "  Hi there.  "}};
        for (int i = 0; i < 3; i++) {
            msgs[n++] = (chat_message){conv[i][0], strlen(conv[i][0]), conv[i][1], strlen(conv[i][1])};
            input_bytes += strlen(conv[i][0]) + strlen(conv[i][1]);
        }
    } else {
        const uint8_t *p = nul + 1, *end = data + size;
        while (p <= end && n < MAX_MESSAGES) {
            const uint8_t *q = memchr(p, 0, (size_t)(end - p));
            size_t role_len = q ? (size_t)(q - p) : (size_t)(end - p);
            const uint8_t *c = q ? q + 1 : end;
            const uint8_t *cq = c < end ? memchr(c, 0, (size_t)(end - c)) : NULL;
            size_t content_len = cq ? (size_t)(cq - c) : (size_t)(end - c);
            chat_message *m = &msgs[n++];
            if (role_len == 1 && p[0] < 8) {
                m->role = short_roles[p[0]];
                m->role_len = strlen(m->role);
            } else {
                m->role = owned[n_owned++] = dup_exact(p, role_len);
                m->role_len = role_len;
            }
            m->content = owned[n_owned++] = dup_exact(c, content_len);
            m->content_len = content_len;
            input_bytes += m->role_len + content_len;
            if (!cq) break;
            p = cq + 1;
        }
    }
    check_render(k, msgs, n, input_bytes);
    for (int kk = 1; kk < CHAT_TMPL_COUNT; kk++) {
        if (kk != (int)k) check_render((chat_template_kind)kk, msgs, n, input_bytes);
    }
    check_render(k, msgs, 0, 0);
    for (int i = 0; i < n_owned; i++) free(owned[i]);
    return 0;
}
