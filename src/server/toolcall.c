/* Tool calls, reasoning and content out of a model's output (toolcall.h).
 *
 * Each parse starts from the beginning of the text: a stream re-parses the
 * whole output at each feed, which keeps one code path for whole and streamed
 * answers and makes "what is certain so far" a property of the parser (hold
 * back a suffix that may start a marker; report a call once its name is whole)
 * rather than of a state machine per format. */
#include "server/toolcall.h"

#include <string.h>

#define DS_CALLS_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALLS_END "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_CALL_BEGIN "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>"
#define DS_CALL_END "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
#define DS_SEP "<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>"

/* One row a format: its name and the markers its parser and grammar use. */
typedef struct tc_format_row {
    const char *name;
    const char *markers[TC_MAX_MARKERS + 1]; /* NULL-terminated */
} tc_format_row;

static const tc_format_row formats[TC_FORMAT_COUNT] = {
    [TC_NONE] = {.name = "none"},
    [TC_HERMES] = {.name = "hermes", .markers = {"<tool_call>", "</tool_call>"}},
    [TC_QWEN3_CODER] = {.name = "qwen3_coder",
                        .markers = {"<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=",
                                    "</parameter>"}},
    [TC_GLM] = {.name = "glm",
                .markers = {"<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"}},
    [TC_LLAMA3] = {.name = "llama3", .markers = {"<|python_tag|>"}},
    [TC_MISTRAL] = {.name = "mistral", .markers = {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"}},
    [TC_DEEPSEEK] = {.name = "deepseek", .markers = {DS_CALLS_BEGIN, DS_CALLS_END, DS_CALL_BEGIN, DS_CALL_END, DS_SEP}},
    [TC_HARMONY] = {.name = "harmony",
                    .markers = {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>", "<|call|>",
                                "<|return|>"}},
};

static const char *const reasoning_markers[] = {"<think>", "</think>", NULL};

const char *tc_format_name(tc_format f) { return (unsigned)f < TC_FORMAT_COUNT ? formats[f].name : "?"; }

const char *const *tc_markers(tc_format f) {
    return (unsigned)f < TC_FORMAT_COUNT ? formats[f].markers : formats[TC_NONE].markers;
}

const char *const *tc_reasoning_markers(void) { return reasoning_markers; }

void tc_tokens_collect(tc_format f, int32_t (*token_of)(void *ud, const char *text), void *ud, tc_tokens *out) {
    memset(out, 0, sizeof *out);
    const char *const *lists[2] = {tc_markers(f), reasoning_markers};
    for (int l = 0; l < 2; l++) {
        for (const char *const *m = lists[l]; *m && out->n < TC_MAX_TOKENS; m++) {
            const int32_t id = token_of(ud, *m);
            if (id < 0 || tc_tokens_find(out, *m, strlen(*m)) >= 0) continue;
            out->text[out->n] = *m;
            out->id[out->n++] = id;
        }
    }
}

int32_t tc_tokens_find(const tc_tokens *t, const char *s, size_t n) {
    for (int32_t i = 0; t && i < t->n; i++)
        if (strlen(t->text[i]) == n && !memcmp(t->text[i], s, n)) return t->id[i];
    return -1;
}

static const char *find(const char *p, const char *end, const char *lit) {
    size_t n = strlen(lit);
    if (!n) return p;
    for (; p + n <= end; p++) {
        p = memchr(p, lit[0], (size_t)(end - p - (ptrdiff_t)n + 1));
        if (!p) return NULL;
        if (!memcmp(p, lit, n)) return p;
    }
    return NULL;
}

static bool has(const char *t, size_t len, const char *lit) { return find(t, t + len, lit) != NULL; }

tc_format tc_detect(const char *tmpl, size_t len) {
    if (!tmpl) return TC_HERMES;
    if (has(tmpl, len, "<|channel|>")) return TC_HARMONY;
    if (has(tmpl, len, "tool\xe2\x96\x81" "call\xe2\x96\x81" "begin")) return TC_DEEPSEEK;
    if (has(tmpl, len, "[TOOL_CALLS]")) return TC_MISTRAL;
    if (has(tmpl, len, "<arg_key>")) return TC_GLM;
    if (has(tmpl, len, "<tool_call>") && has(tmpl, len, "<function=")) return TC_QWEN3_CODER;
    if (has(tmpl, len, "<tool_call>")) return TC_HERMES;
    if (has(tmpl, len, "<|python_tag|>") || (has(tmpl, len, "ipython") && has(tmpl, len, "\"parameters\"")))
        return TC_LLAMA3;
    return TC_HERMES;
}

/* ---- small scanners ------------------------------------------------------------ */

typedef struct pstate {
    const char *end;
    bool final;
    tc_result *out;
    const tc_options *opt;
} pstate;

static bool starts(const char *p, const char *end, const char *lit) {
    size_t n = strlen(lit);
    return (size_t)(end - p) >= n && !memcmp(p, lit, n);
}

/* [p, end) is non-empty and a proper prefix of lit */
static bool partial_of(const char *p, const char *end, const char *lit) {
    size_t n = strlen(lit), have = (size_t)(end - p);
    return have > 0 && have < n && !memcmp(p, lit, have);
}

static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && is_ws(*p)) p++;
    return p;
}

/* Where content starting at p stops: the first of the markers (*which its
 * index) or, not found, the end of the text less any suffix that may start a
 * marker when the text is not final (*which -1). */
static const char *content_stop(const pstate *s, const char *p, const char *const *marks, int n_marks, int *which) {
    const char *best = NULL;
    *which = -1;
    for (int i = 0; i < n_marks; i++) {
        /* only an earlier match matters: it must end before best's end */
        const char *lim = s->end;
        if (best && (size_t)(s->end - best) > strlen(marks[i]) - 1) lim = best + strlen(marks[i]) - 1;
        const char *q = find(p, lim, marks[i]);
        if (q && (!best || q < best)) {
            best = q;
            *which = i;
        }
    }
    if (best) return best;
    if (s->final) return s->end;
    for (const char *q = p; q < s->end; q++) {
        for (int i = 0; i < n_marks; i++) {
            if (partial_of(q, s->end, marks[i])) return q;
        }
    }
    return s->end;
}

/* End of the JSON value at p (no leading space), *complete false when the text
 * ends first. A bare literal at the very end of a text that is not final is
 * incomplete (more digits may come). */
static const char *json_end(const pstate *s, const char *p, bool *complete) {
    const char *end = s->end;
    *complete = false;
    if (p >= end) return end;
    if (*p == '"') {
        for (p++; p < end; p++) {
            if (*p == '\\') {
                p++;
                continue;
            }
            if (*p == '"') {
                *complete = true;
                return p + 1;
            }
        }
        return end;
    }
    if (*p == '{' || *p == '[') {
        int depth = 0;
        bool in_str = false;
        for (; p < end; p++) {
            char c = *p;
            if (in_str) {
                if (c == '\\') p++;
                else if (c == '"') in_str = false;
                continue;
            }
            if (c == '"') in_str = true;
            else if (c == '{' || c == '[') depth++;
            else if (c == '}' || c == ']') {
                if (--depth == 0) {
                    *complete = true;
                    return p + 1;
                }
            }
        }
        return end;
    }
    const char *q = p;
    while (q < end && ((*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
                       *q == '-' || *q == '+' || *q == '.'))
        q++;
    if (q == p) return p; /* not a value */
    *complete = q < end || s->final;
    return q;
}

/* A whole JSON value spans [p, end) exactly (after trimming spaces)? */
static bool is_json_value(const char *p, const char *end) {
    p = skip_ws(p, end);
    while (end > p && is_ws(end[-1])) end--;
    if (p == end) return false;
    pstate s = {.end = end, .final = true};
    bool complete;
    const char *q = json_end(&s, p, &complete);
    if (!complete || q != end) return false;
    if (*p == '"' || *p == '{' || *p == '[') return true;
    /* a literal: true, false, null or a number */
    size_t n = (size_t)(end - p);
    if ((n == 4 && !memcmp(p, "true", 4)) || (n == 5 && !memcmp(p, "false", 5)) || (n == 4 && !memcmp(p, "null", 4)))
        return true;
    const char *c = p;
    if (*c == '-') c++;
    if (c == end || *c < '0' || *c > '9') return false;
    for (; c < end; c++) {
        if (!((*c >= '0' && *c <= '9') || *c == '.' || *c == 'e' || *c == 'E' || *c == '+' || *c == '-')) return false;
    }
    return true;
}

static void add_json_string(strbuf *b, const char *p, size_t n) {
    sb_addn(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            sb_addn(b, e, 2);
        } else if (c == '\n') sb_addn(b, "\\n", 2);
        else if (c == '\r') sb_addn(b, "\\r", 2);
        else if (c == '\t') sb_addn(b, "\\t", 2);
        else if (c < 0x20) sb_printf(b, "\\u%04x", c);
        else sb_addn(b, (const char *)&p[i], 1);
    }
    sb_addn(b, "\"", 1);
}

/* The text of a JSON string token [p, q) (quotes included), simple escapes undone. */
static void add_unescaped(strbuf *b, const char *p, const char *q) {
    if (q - p < 2) return;
    for (p++, q--; p < q; p++) {
        if (*p == '\\' && p + 1 < q) {
            p++;
            char c = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p == 'r' ? '\r' : *p;
            sb_addn(b, &c, 1);
        } else {
            sb_addn(b, p, 1);
        }
    }
}

static tc_call *new_call(tc_result *r) {
    if (r->n_calls >= TC_MAX_CALLS) return NULL;
    tc_call *c = &r->calls[r->n_calls];
    sb_free(&c->name); /* what an abandoned attempt left in the slot */
    sb_free(&c->args);
    memset(c, 0, sizeof *c);
    return c;
}

/* The call is reported (counted in n_calls) once its name is known. */
static void commit_call(tc_result *r, tc_call *c) {
    if (c && c == &r->calls[r->n_calls] && c->name.len) r->n_calls++;
}

/* A call object {"name": "f", "arguments" | "parameters": {...}} at p ('{').
 * Returns the end of the object, or NULL when the text ends first (what is
 * known is reported) or it is not a call object (*not_call). */
static const char *call_object(const pstate *s, const char *p, tc_call *c, bool *not_call) {
    const char *end = s->end;
    *not_call = false;
    if (p >= end || *p != '{') {
        *not_call = p < end;
        return NULL;
    }
    p++;
    bool have_args = false;
    for (;;) {
        p = skip_ws(p, end);
        if (p >= end) break;
        if (*p == '}') {
            if (!c->name.len) {
                *not_call = true;
                return NULL;
            }
            if (!have_args) sb_add(&c->args, "{}");
            c->done = true;
            return p + 1;
        }
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p != '"') {
            goto bad;
        }
        bool complete;
        const char *kq = json_end(s, p, &complete);
        if (!complete) break;
        const char *key = p + 1;
        size_t key_len = (size_t)(kq - p - 2);
        p = skip_ws(kq, end);
        if (p >= end) break;
        if (*p != ':') {
            goto bad;
        }
        p = skip_ws(p + 1, end);
        if (p >= end) break;
        const char *vq = json_end(s, p, &complete);
        bool is_name = key_len == 4 && !memcmp(key, "name", 4);
        bool is_args = (key_len == 9 && !memcmp(key, "arguments", 9)) || (key_len == 10 && !memcmp(key, "parameters", 10));
        if (is_name) {
            if (!complete) break;
            if (*p != '"') goto bad;
            if (!c->name.len) add_unescaped(&c->name, p, vq); /* the first name is the call's */
        } else if (is_args && !have_args) {
            c->args.len = 0;
            sb_addn(&c->args, p, (size_t)(vq - p));
            if (!complete) break;
            have_args = true;
        }
        if (!complete) break;
        p = vq;
    }
    return NULL;
bad:
    /* once the name is known (and maybe streamed) the call stands: it ends here */
    if (c->name.len) {
        if (!have_args) sb_add(&c->args, "{}");
        c->done = true;
        return p;
    }
    *not_call = true;
    return NULL;
}

/* ---- hermes / qwen3_coder / glm: <tool_call> ----------------------------------------- */

/* value of an XML-style parameter into args as a JSON member */
static void add_param(const pstate *s, tc_call *c, const char *k, size_t kn, const char *v, size_t vn) {
    /* one newline around the value is the format's, not the value's */
    if (vn && v[0] == '\n') v++, vn--;
    if (vn && v[vn - 1] == '\n') vn--;
    sb_add(&c->args, c->args.len ? ", " : "{");
    add_json_string(&c->args, k, kn);
    sb_add(&c->args, ": ");
    const tc_options *o = s->opt;
    const bool string = o && o->string_arg &&
                        o->string_arg(o->string_arg_ud, c->name.ptr ? c->name.ptr : "", c->name.len, k, kn);
    if (!string && is_json_value(v, v + vn)) {
        const char *a = skip_ws(v, v + vn), *b = v + vn;
        while (b > a && is_ws(b[-1])) b--;
        sb_addn(&c->args, a, (size_t)(b - a));
    } else {
        add_json_string(&c->args, v, vn);
    }
}

/* Text up to the first of the markers, or NULL when the text ends first. */
static const char *until(const pstate *s, const char *p, const char *const *marks, int n, int *which) {
    const char *q = content_stop(s, p, marks, n, which);
    return *which < 0 ? NULL : q;
}

static const char *xml_function(const pstate *s, const char *p, tc_call *c) {
    static const char *const gt[] = {">"};
    static const char *const val_end[] = {"</parameter>", "<parameter=", "</function>"};
    static const char *const close[] = {"</tool_call>"};
    int w;
    const char *q = until(s, p, gt, 1, &w);
    if (!q) return NULL;
    sb_addn(&c->name, p, (size_t)(q - p));
    p = q + 1;
    for (;;) {
        p = skip_ws(p, s->end);
        if (starts(p, s->end, "<parameter=")) {
            const char *k = p + 11;
            const char *kq = until(s, k, gt, 1, &w);
            if (!kq) return NULL;
            const char *v = kq + 1;
            const char *vq = until(s, v, val_end, 3, &w);
            if (!vq) return NULL;
            add_param(s, c, k, (size_t)(kq - k), v, (size_t)(vq - v));
            p = w == 0 ? vq + strlen(val_end[0]) : vq;
            continue;
        }
        if (starts(p, s->end, "</function>")) {
            p = skip_ws(p + 11, s->end);
            if (!c->args.len) sb_add(&c->args, "{");
            sb_add(&c->args, "}");
            c->done = true;
            if (starts(p, s->end, "</tool_call>")) return p + 12;
            if (!s->final && (p == s->end || partial_of(p, s->end, close[0]))) {
                c->done = false; /* the closing tag may still come */
                return NULL;
            }
            return p;
        }
        if (s->final) {
            if (!c->args.len) sb_add(&c->args, "{");
            sb_add(&c->args, "}");
            return s->end;
        }
        return NULL;
    }
}

static const char *glm_call(const pstate *s, const char *p, tc_call *c) {
    static const char *const name_end[] = {"\n", "<arg_key>", "</tool_call>"};
    static const char *const key_end[] = {"</arg_key>"};
    static const char *const val_end[] = {"</arg_value>"};
    int w;
    const char *q = until(s, p, name_end, 3, &w);
    if (!q) return NULL;
    const char *ne = q;
    while (ne > p && is_ws(ne[-1])) ne--;
    sb_addn(&c->name, p, (size_t)(ne - p));
    p = q;
    for (;;) {
        p = skip_ws(p, s->end);
        if (starts(p, s->end, "<arg_key>")) {
            const char *k = p + 9;
            const char *kq = until(s, k, key_end, 1, &w);
            if (!kq) return NULL;
            p = skip_ws(kq + 10, s->end);
            if (!starts(p, s->end, "<arg_value>")) return NULL;
            const char *v = p + 11;
            const char *vq = until(s, v, val_end, 1, &w);
            if (!vq) return NULL;
            add_param(s, c, k, (size_t)(kq - k), v, (size_t)(vq - v));
            p = vq + 12;
            continue;
        }
        if (starts(p, s->end, "</tool_call>") || s->final) {
            if (!c->args.len) sb_add(&c->args, "{");
            sb_add(&c->args, "}");
            c->done = true;
            return starts(p, s->end, "</tool_call>") ? p + 12 : s->end;
        }
        return NULL;
    }
}

/* After "<tool_call>": one call, or NULL when the text ends first. *bad: not a call. */
static const char *tag_call(const pstate *s, const char *p, bool *bad) {
    tc_result *r = s->out;
    *bad = false;
    p = skip_ws(p, s->end);
    if (p >= s->end) return NULL;
    tc_call *c = new_call(r);
    if (!c) {
        *bad = true;
        return NULL;
    }
    const char *q;
    if (*p == '{') {
        bool not_call;
        q = call_object(s, p, c, &not_call);
        if (not_call) {
            *bad = true;
            return NULL;
        }
        if (q) {
            q = skip_ws(q, s->end);
            if (starts(q, s->end, "</tool_call>")) q += 12;
            else if (!s->final && (q == s->end || partial_of(q, s->end, "</tool_call>"))) {
                c->done = false;
                q = NULL;
            }
        } else if (s->final && c->name.len) {
            c->done = false;
            q = s->end;
        }
    } else if (starts(p, s->end, "<function=")) {
        q = xml_function(s, p + 10, c);
    } else if (!s->final && partial_of(p, s->end, "<function=")) {
        return NULL;
    } else {
        q = glm_call(s, p, c);
    }
    commit_call(r, c);
    return q;
}

static void parse_tag(const pstate *s, const char *p) {
    static const char *const marks[] = {"<tool_call>"};
    tc_result *r = s->out;
    while (p < s->end) {
        int w;
        const char *q = content_stop(s, p, marks, 1, &w);
        sb_addn(&r->content, p, (size_t)(q - p));
        if (w < 0) return;
        bool bad;
        const char *after = tag_call(s, q + 11, &bad);
        if (bad) { /* not a call after all: the marker is content */
            sb_addn(&r->content, q, 11);
            p = q + 11;
            continue;
        }
        if (!after) return;
        p = skip_ws(after, s->end);
    }
}

/* ---- llama3 ------------------------------------------------------------------------- */

static void parse_llama3(const pstate *s, const char *p) {
    tc_result *r = s->out;
    const char *start = p;
    const char *q = skip_ws(p, s->end);
    if (starts(q, s->end, "<|python_tag|>")) q = skip_ws(q + 14, s->end);
    else if (!s->final && (q == s->end || partial_of(q, s->end, "<|python_tag|>"))) return;
    if (q >= s->end) {
        if (s->final) sb_addn(&r->content, start, (size_t)(s->end - start));
        return;
    }
    if (*q != '{') {
        sb_addn(&r->content, start, (size_t)(s->end - start));
        return;
    }
    int32_t first = r->n_calls;
    while (q < s->end && *q == '{') {
        tc_call *c = new_call(r);
        if (!c) break;
        bool not_call;
        const char *e = call_object(s, q, c, &not_call);
        if (not_call || (!e && s->final && !c->name.len)) {
            if (r->n_calls > first) { /* earlier calls stand (streamed already): the rest is text */
                if (s->final) sb_addn(&r->content, q, (size_t)(s->end - q));
                return;
            }
            if (s->final || not_call) sb_addn(&r->content, start, (size_t)(s->end - start));
            return;
        }
        commit_call(r, c);
        if (!e) return;
        q = skip_ws(e, s->end);
        while (q < s->end && (*q == ';' || is_ws(*q))) q++;
    }
    if (q < s->end && s->final) sb_addn(&r->content, q, (size_t)(s->end - q));
}

/* ---- mistral ------------------------------------------------------------------------ */

static void parse_mistral(const pstate *s, const char *p) {
    static const char *const marks[] = {"[TOOL_CALLS]"};
    static const char *const name_end[] = {"[ARGS]", "[CALL_ID]"};
    static const char *const args_mark[] = {"[ARGS]"};
    tc_result *r = s->out;
    while (p < s->end) {
        int w;
        const char *q = content_stop(s, p, marks, 1, &w);
        sb_addn(&r->content, p, (size_t)(q - p));
        if (w < 0) return;
        p = skip_ws(q + 12, s->end);
        if (p >= s->end) return;
        if (*p == '[') { /* [{"name", "arguments"}, ...] */
            p++;
            for (;;) {
                p = skip_ws(p, s->end);
                if (p >= s->end) return;
                if (*p == ',') {
                    p++;
                    continue;
                }
                if (*p == ']') {
                    p++;
                    break;
                }
                tc_call *c = new_call(r);
                if (!c) return;
                bool not_call;
                const char *e = call_object(s, p, c, &not_call);
                if (not_call) {
                    sb_free(&c->name);
                    sb_free(&c->args);
                    return;
                }
                commit_call(r, c);
                if (!e) return;
                p = e;
            }
        } else { /* name[ARGS]{...} or name[CALL_ID]id[ARGS]{...} */
            tc_call *c = new_call(r);
            if (!c) return;
            const char *ne = until(s, p, name_end, 2, &w);
            if (!ne) return;
            sb_addn(&c->name, p, (size_t)(ne - p));
            const char *a = w == 0 ? ne : until(s, ne, args_mark, 1, &w);
            if (!a) {
                sb_free(&c->name);
                return;
            }
            a = skip_ws(a + 6, s->end);
            bool complete;
            const char *e = json_end(s, a, &complete);
            sb_addn(&c->args, a, (size_t)(e - a));
            c->done = complete;
            commit_call(r, c);
            if (!complete) return;
            p = e;
        }
        p = skip_ws(p, s->end);
    }
}

/* ---- deepseek ------------------------------------------------------------------------- */

static const char *ds_call(const pstate *s, const char *p) {
    static const char *const sep[] = {DS_SEP};
    static const char *const nl[] = {"\n"};
    tc_result *r = s->out;
    int w;
    const char *q = until(s, p, sep, 1, &w);
    if (!q) return NULL;
    tc_call *c = new_call(r);
    if (!c) return NULL;
    const char *a = q + strlen(DS_SEP);
    bool r1 = q - p == 8 && !memcmp(p, "function", 8);
    if (r1) { /* function<sep>name\n```json\n{...}\n``` */
        const char *ne = until(s, a, nl, 1, &w);
        if (!ne) return NULL;
        sb_addn(&c->name, a, (size_t)(ne - a));
        a = skip_ws(ne, s->end);
        if (starts(a, s->end, "```json")) {
            a = skip_ws(a + 7, s->end);
        } else if (!s->final && (a == s->end || partial_of(a, s->end, "```json"))) {
            sb_free(&c->name);
            return NULL;
        } else if (starts(a, s->end, "```")) {
            a = skip_ws(a + 3, s->end);
        }
    } else {
        sb_addn(&c->name, p, (size_t)(q - p));
    }
    commit_call(r, c);
    bool complete;
    const char *e = json_end(s, a, &complete);
    sb_addn(&c->args, a, (size_t)(e - a));
    if (!complete) return NULL;
    e = skip_ws(e, s->end);
    if (r1 && starts(e, s->end, "```")) e = skip_ws(e + 3, s->end);
    if (starts(e, s->end, DS_CALL_END)) {
        c->done = true;
        return e + strlen(DS_CALL_END);
    }
    if (s->final) {
        c->done = true;
        return s->end;
    }
    return NULL;
}

static void parse_deepseek(const pstate *s, const char *p) {
    static const char *const marks[] = {DS_CALLS_BEGIN, DS_CALL_BEGIN};
    tc_result *r = s->out;
    int w;
    const char *q = content_stop(s, p, marks, 2, &w);
    sb_addn(&r->content, p, (size_t)(q - p));
    if (w < 0) return;
    p = q + strlen(marks[w]);
    if (w == 1) p = q; /* a call without the calls block */
    for (;;) {
        p = skip_ws(p, s->end);
        if (starts(p, s->end, DS_CALL_BEGIN)) {
            p = ds_call(s, p + strlen(DS_CALL_BEGIN));
            if (!p) return;
            continue;
        }
        if (starts(p, s->end, DS_CALLS_END)) p += strlen(DS_CALLS_END);
        break;
    }
    if (s->final && p < s->end) sb_addn(&r->content, p, (size_t)(s->end - p));
}

/* ---- harmony ------------------------------------------------------------------------- */

static void parse_harmony(const pstate *s, const char *p, bool no_calls) {
    static const char *const body_end[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>", "<|channel|>"};
    static const char *const hdr_end[] = {"<|message|>"};
    tc_result *r = s->out;
    while (p < s->end) {
        const char *hdr = p, *hdr_stop = p;
        if (starts(p, s->end, "<|start|>") || starts(p, s->end, "<|channel|>")) {
            int w;
            const char *q = until(s, p, hdr_end, 1, &w);
            if (!q) return;
            hdr_stop = q;
            p = q + 11;
        } else if (!s->final && partial_of(p, s->end, "<|start|>")) {
            return;
        } else if (!s->final && partial_of(p, s->end, "<|channel|>")) {
            return;
        }
        /* channel and recipient */
        const char *ch = find(hdr, hdr_stop, "<|channel|>");
        bool analysis = ch && starts(ch + 11, hdr_stop, "analysis");
        const char *to = no_calls ? NULL : find(hdr, hdr_stop, "to=functions.");
        const char *name = NULL, *name_end = NULL;
        if (to) {
            name = to + 13;
            name_end = name;
            while (name_end < hdr_stop && !is_ws(*name_end) && *name_end != '<') name_end++;
        }
        int w;
        const char *body = name ? skip_ws(p, s->end) : p;
        const char *q = content_stop(s, body, body_end, 5, &w);
        if (name && name_end > name) {
            tc_call *c = new_call(r);
            if (!c) return;
            sb_addn(&c->name, name, (size_t)(name_end - name));
            sb_addn(&c->args, body, (size_t)(q - body));
            c->done = w >= 0 || s->final;
            commit_call(r, c);
        } else {
            sb_addn(analysis ? &r->reasoning : &r->content, body, (size_t)(q - body));
        }
        if (w < 0) return;
        p = q;
        if (w <= 2) p += strlen(body_end[w]);
    }
}

/* ---- entry points ------------------------------------------------------------------------ */

void tc_result_free(tc_result *r) {
    sb_free(&r->content);
    sb_free(&r->reasoning);
    for (int32_t i = 0; i < r->n_calls; i++) {
        sb_free(&r->calls[i].name);
        sb_free(&r->calls[i].args);
    }
    /* a call being built when the parse stopped (its name not yet whole) */
    if (r->n_calls < TC_MAX_CALLS) {
        sb_free(&r->calls[r->n_calls].name);
        sb_free(&r->calls[r->n_calls].args);
    }
    r->n_calls = 0;
}

bool tc_result_failed(const tc_result *r) {
    if (r->content.failed || r->reasoning.failed) return true;
    for (int32_t i = 0; i < r->n_calls; i++) {
        if (r->calls[i].name.failed || r->calls[i].args.failed) return true;
    }
    return false;
}

void tc_parse(const tc_options *o, const char *text, size_t len, bool final, tc_result *out) {
    memset(out, 0, sizeof *out);
    pstate s = {.end = text + len, .final = final, .out = out, .opt = o};
    const char *p = text;
    if (o->format == TC_HARMONY) {
        parse_harmony(&s, p, o->no_calls);
        return;
    }
    if (o->reasoning) {
        static const char *const close[] = {"</think>"};
        const char *q = skip_ws(p, s.end);
        bool in = o->starts_in_reasoning;
        if (!in && starts(q, s.end, "<think>")) {
            in = true;
            p = q + 7;
        } else if (!in && !final && (q == s.end || partial_of(q, s.end, "<think>"))) {
            return; /* may still open a block */
        }
        if (in) {
            int w;
            const char *e = content_stop(&s, p, close, 1, &w);
            sb_addn(&out->reasoning, p, (size_t)(e - p));
            if (w < 0) return;
            p = skip_ws(e + 8, s.end);
        }
    }
    switch (o->format) {
    case TC_HERMES:
    case TC_QWEN3_CODER:
    case TC_GLM: parse_tag(&s, p); break;
    case TC_LLAMA3: parse_llama3(&s, p); break;
    case TC_MISTRAL: parse_mistral(&s, p); break;
    case TC_DEEPSEEK: parse_deepseek(&s, p); break;
    default: sb_addn(&out->content, p, (size_t)(s.end - p)); break;
    }
}

void tc_prefill(tc_format f, bool args_style, const char *name, strbuf *out) {
    switch (f) {
    case TC_HERMES:
        sb_add(out, "<tool_call>\n{\"name\": \"");
        if (name) sb_printf(out, "%s\", \"arguments\": ", name);
        break;
    case TC_QWEN3_CODER:
        sb_add(out, "<tool_call>\n<function=");
        if (name) sb_printf(out, "%s>\n", name);
        break;
    case TC_GLM:
        sb_add(out, "<tool_call>");
        if (name) sb_printf(out, "%s\n", name);
        break;
    case TC_LLAMA3:
        sb_add(out, "{\"name\": \"");
        if (name) sb_printf(out, "%s\", \"parameters\": ", name);
        break;
    case TC_MISTRAL:
        if (args_style) {
            sb_add(out, "[TOOL_CALLS]");
            if (name) sb_printf(out, "%s[ARGS]", name);
        } else {
            sb_add(out, "[TOOL_CALLS][{\"name\": \"");
            if (name) sb_printf(out, "%s\", \"arguments\": ", name);
        }
        break;
    case TC_DEEPSEEK:
        sb_add(out, DS_CALLS_BEGIN DS_CALL_BEGIN);
        if (name) sb_printf(out, "%s" DS_SEP, name);
        break;
    case TC_HARMONY:
        sb_add(out, "<|channel|>commentary to=functions.");
        if (name) sb_printf(out, "%s <|constrain|>json<|message|>", name);
        break;
    default: break;
    }
}

void tc_stream_init(tc_stream *s, const tc_options *o) {
    memset(s, 0, sizeof *s);
    s->opt = *o;
}

bool tc_stream_feed(tc_stream *s, const char *text, size_t n, bool final, tc_emit_fn emit, void *ud) {
    sb_addn(&s->text, text, n);
    if (s->text.failed) return false;
    tc_result_free(&s->last);
    tc_parse(&s->opt, s->text.ptr ? s->text.ptr : "", s->text.len, final, &s->last);
    if (tc_result_failed(&s->last)) return false;
    tc_result *r = &s->last;
    if (r->reasoning.len > s->sent_reasoning) {
        emit(ud, TC_DELTA_REASONING, -1, r->reasoning.ptr + s->sent_reasoning, r->reasoning.len - s->sent_reasoning);
        s->sent_reasoning = r->reasoning.len;
    }
    if (r->content.len > s->sent_content) {
        emit(ud, TC_DELTA_CONTENT, -1, r->content.ptr + s->sent_content, r->content.len - s->sent_content);
        s->sent_content = r->content.len;
    }
    for (int32_t i = 0; i < r->n_calls; i++) {
        tc_call *c = &r->calls[i];
        if (i >= s->sent_calls) {
            emit(ud, TC_DELTA_CALL, i, c->name.ptr, c->name.len);
            s->sent_calls = i + 1;
            s->sent_args[i] = 0;
        }
        if (c->args.len > s->sent_args[i]) {
            emit(ud, TC_DELTA_ARGS, i, c->args.ptr + s->sent_args[i], c->args.len - s->sent_args[i]);
            s->sent_args[i] = c->args.len;
        }
    }
    return true;
}

void tc_stream_free(tc_stream *s) {
    tc_result_free(&s->last);
    sb_free(&s->text);
}
