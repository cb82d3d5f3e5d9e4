/* OpenAI request parsing (see openai.h). */
#include "server/openai.h"

#include "base/status.h"
#include "grammar/grammar.h"
#include "server/json_schema.h"

#include <math.h>
#include <string.h>

static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* The field, or NULL when absent or null (OpenAI SDKs send null for "unset"). */
static json_t *field(json_t *obj, const char *name) {
    json_t *v = json_object_get(obj, name);
    return v && !json_is_null(v) ? v : NULL;
}

static vt_status get_number(json_t *obj, const char *name, double lo, double hi, float *out) {
    json_t *v = field(obj, name);
    if (!v) return VT_OK;
    if (!json_is_number(v)) {
        return vt_errorf(VT_E_INVALID, "field '%s': expected a number, got %s", name, json_kind(v));
    }
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi)) {
        return vt_errorf(VT_E_INVALID, "field '%s': %g is out of range [%g, %g]", name, d, lo, hi);
    }
    *out = (float)d;
    return VT_OK;
}

static vt_status get_int(json_t *obj, const char *name, long long lo, long long hi, long long *out,
                         bool *given) {
    json_t *v = field(obj, name);
    if (given) *given = false;
    if (!v) return VT_OK;
    long long x;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
               fabs(json_real_value(v)) < 9e15) {
        x = (long long)json_real_value(v); /* 5.0 from clients that only have doubles */
    } else {
        return vt_errorf(VT_E_INVALID, "field '%s': expected an integer, got %s", name, json_kind(v));
    }
    if (x < lo || x > hi) {
        return vt_errorf(VT_E_INVALID, "field '%s': %lld is out of range [%lld, %lld]", name, x, lo, hi);
    }
    *out = x;
    if (given) *given = true;
    return VT_OK;
}

static vt_status get_bool(json_t *obj, const char *name, bool *out) {
    json_t *v = field(obj, name);
    if (!v) return VT_OK;
    if (!json_is_boolean(v)) {
        return vt_errorf(VT_E_INVALID, "field '%s': expected a boolean, got %s", name, json_kind(v));
    }
    *out = json_is_true(v);
    return VT_OK;
}

/* One prompt: a string, or an array of token ids (`where` names it in messages). */
static vt_status parse_one_prompt(json_t *p, const char *where, oai_prompt *out) {
    if (json_is_string(p)) {
        out->text = json_string_value(p);
        out->text_len = json_string_length(p);
        return VT_OK;
    }
    size_t n = json_array_size(p);
    if (n == 0) return vt_errorf(VT_E_INVALID, "field '%s': empty array", where);
    if (n > OAI_MAX_TOKENS) {
        return vt_errorf(VT_E_INVALID, "field '%s': %zu token ids, more than %d", where, n, OAI_MAX_TOKENS);
    }
    out->tokens = malloc(n * sizeof *out->tokens);
    if (!out->tokens) return vt_errorf(VT_E_NOMEM, "prompt: out of memory for %zu tokens", n);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(p, i);
        if (!json_is_integer(t)) {
            return vt_errorf(VT_E_INVALID,
                             "field '%s[%zu]': expected a token id (integer), got %s "
                             "(a prompt is a string or an array of token ids)",
                             where, i, json_kind(t));
        }
        json_int_t id = json_integer_value(t);
        if (id < 0 || id > INT32_MAX) {
            return vt_errorf(VT_E_INVALID, "field '%s[%zu]': token id %lld is out of range", where, i, (long long)id);
        }
        out->tokens[i] = (int32_t)id;
    }
    out->n_tokens = (int64_t)n;
    return VT_OK;
}

static vt_status parse_prompt(json_t *root, oai_request *r) {
    json_t *p = field(root, "prompt");
    if (!p) return vt_errorf(VT_E_INVALID, "field 'prompt': required");
    if (!json_is_string(p) && !json_is_array(p)) {
        return vt_errorf(VT_E_INVALID, "field 'prompt': expected a string or an array of token ids, got %s",
                         json_kind(p));
    }
    /* A batch: an array whose first element is a string or an array. */
    json_t *first = json_is_array(p) ? json_array_get(p, 0) : NULL;
    bool batch = first && (json_is_string(first) || json_is_array(first));
    size_t n = batch ? json_array_size(p) : 1;
    if (n > OAI_MAX_CHOICES) {
        return vt_errorf(VT_E_INVALID, "field 'prompt': %zu prompts, more than %d", n, OAI_MAX_CHOICES);
    }
    r->prompts = calloc(n, sizeof *r->prompts);
    if (!r->prompts) return vt_errorf(VT_E_NOMEM, "prompt: out of memory");
    r->n_prompts = (int32_t)n;
    if (!batch) return parse_one_prompt(p, "prompt", &r->prompts[0]);
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(p, i);
        char where[32];
        snprintf(where, sizeof where, "prompt[%zu]", i);
        if (!json_is_string(e) && !json_is_array(e)) {
            return vt_errorf(VT_E_INVALID, "field '%s': expected a string or an array of token ids, got %s "
                             "(a batch holds prompts of one kind)", where, json_kind(e));
        }
        if (json_is_string(e) != json_is_string(first)) {
            return vt_errorf(VT_E_INVALID, "field '%s': a batch holds prompts of one kind (all strings or all "
                             "token-id arrays)", where);
        }
        VT_TRY(parse_one_prompt(e, where, &r->prompts[i]));
    }
    return VT_OK;
}

static vt_status parse_messages(json_t *root, oai_request *r) {
    json_t *ms = field(root, "messages");
    if (!ms) return vt_errorf(VT_E_INVALID, "field 'messages': required");
    if (!json_is_array(ms)) {
        return vt_errorf(VT_E_INVALID, "field 'messages': expected an array, got %s", json_kind(ms));
    }
    size_t n = json_array_size(ms);
    if (n == 0) return vt_errorf(VT_E_INVALID, "field 'messages': empty array");
    if (n > OAI_MAX_MESSAGES) {
        return vt_errorf(VT_E_INVALID, "field 'messages': %zu messages, more than %d", n, OAI_MAX_MESSAGES);
    }
    r->messages = calloc(n, sizeof *r->messages);
    r->joined = calloc(n, sizeof *r->joined);
    if (!r->messages || !r->joined) return vt_errorf(VT_E_NOMEM, "messages: out of memory");
    r->n_messages = (int64_t)n;
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(ms, i);
        chat_message *cm = &r->messages[i];
        if (!json_is_object(m)) {
            return vt_errorf(VT_E_INVALID, "field 'messages[%zu]': expected an object, got %s", i,
                             json_kind(m));
        }
        json_t *role = field(m, "role");
        if (!role || !json_is_string(role)) {
            return vt_errorf(VT_E_INVALID, "field 'messages[%zu].role': expected a string, got %s", i,
                             role ? json_kind(role) : "nothing");
        }
        const char *rs = json_string_value(role);
        if (strcmp(rs, "system") && strcmp(rs, "user") && strcmp(rs, "assistant") &&
            strcmp(rs, "developer") && strcmp(rs, "tool")) {
            return vt_errorf(VT_E_INVALID,
                             "field 'messages[%zu].role': '%.40s' is not one of system, developer, "
                             "user, assistant, tool",
                             i, rs);
        }
        if (!strcmp(rs, "developer")) rs = "system"; /* OpenAI's newer name for it */
        cm->role = rs;
        cm->role_len = strlen(rs);
        json_t *c = field(m, "content");
        if (!c) {
            cm->content = "";
            cm->content_len = 0;
        } else if (json_is_string(c)) {
            cm->content = json_string_value(c);
            cm->content_len = json_string_length(c);
        } else if (json_is_array(c)) {
            /* content parts: the text parts joined; images and audio are refused */
            size_t total = 0, np = json_array_size(c);
            for (size_t k = 0; k < np; k++) {
                json_t *part = json_array_get(c, k);
                json_t *type = json_is_object(part) ? field(part, "type") : NULL;
                json_t *text = json_is_object(part) ? field(part, "text") : NULL;
                if (!type || !json_is_string(type) || strcmp(json_string_value(type), "text") ||
                    !text || !json_is_string(text)) {
                    return vt_errorf(VT_E_INVALID,
                                     "field 'messages[%zu].content[%zu]': only {\"type\": \"text\", "
                                     "\"text\": string} parts are supported",
                                     i, k);
                }
                total += json_string_length(text);
            }
            char *buf = malloc(total + 1);
            if (!buf) return vt_errorf(VT_E_NOMEM, "messages: out of memory");
            size_t off = 0;
            for (size_t k = 0; k < np; k++) {
                json_t *text = json_object_get(json_array_get(c, k), "text");
                memcpy(buf + off, json_string_value(text), json_string_length(text));
                off += json_string_length(text);
            }
            buf[off] = 0;
            r->joined[i] = buf;
            cm->content = buf;
            cm->content_len = off;
        } else {
            return vt_errorf(VT_E_INVALID,
                             "field 'messages[%zu].content': expected a string or an array of parts, got %s",
                             i, json_kind(c));
        }
    }
    return VT_OK;
}

static vt_status parse_stop(json_t *root, oai_request *r) {
    json_t *s = field(root, "stop");
    if (!s) return VT_OK;
    if (json_is_string(s)) {
        if (json_string_length(s) == 0) return VT_OK;
        if (json_string_length(s) > OAI_MAX_STOP_LEN) {
            return vt_errorf(VT_E_INVALID, "field 'stop': %zu bytes, more than %d",
                             json_string_length(s), OAI_MAX_STOP_LEN);
        }
        r->stop[r->n_stop++] = json_string_value(s);
        return VT_OK;
    }
    if (!json_is_array(s)) {
        return vt_errorf(VT_E_INVALID, "field 'stop': expected a string or an array of strings, got %s",
                         json_kind(s));
    }
    size_t n = json_array_size(s);
    if (n > OAI_MAX_STOP) {
        return vt_errorf(VT_E_INVALID, "field 'stop': %zu strings, more than %d", n, OAI_MAX_STOP);
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(s, i);
        if (!json_is_string(e)) {
            return vt_errorf(VT_E_INVALID, "field 'stop[%zu]': expected a string, got %s", i, json_kind(e));
        }
        if (json_string_length(e) > OAI_MAX_STOP_LEN) {
            return vt_errorf(VT_E_INVALID, "field 'stop[%zu]': %zu bytes, more than %d", i,
                             json_string_length(e), OAI_MAX_STOP_LEN);
        }
        if (json_string_length(e)) r->stop[r->n_stop++] = json_string_value(e);
    }
    return VT_OK;
}

static vt_status refuse_unsupported(json_t *root);
static vt_status parse_structured(json_t *root, oai_request *r);
static vt_status parse_logit_bias(json_t *root, oai_request *r);
static vt_status parse_tools(json_t *root, oai_request *r);

static vt_status parse_fields(oai_kind kind, json_t *root, oai_request *r) {
    json_t *model = field(root, "model");
    if (model) {
        if (!json_is_string(model)) {
            return vt_errorf(VT_E_INVALID, "field 'model': expected a string, got %s", json_kind(model));
        }
        r->model = json_string_value(model);
    }
    if (kind == OAI_COMPLETION) {
        VT_TRY(parse_prompt(root, r));
    } else {
        VT_TRY(parse_messages(root, r));
    }

    vt_sampling *s = &r->sampling;
    VT_TRY(get_number(root, "temperature", 0, 2, &s->temperature));
    VT_TRY(get_number(root, "top_p", 0, 1, &s->top_p));
    VT_TRY(get_number(root, "min_p", 0, 1, &s->min_p));
    VT_TRY(get_number(root, "presence_penalty", -2, 2, &s->presence_penalty));
    VT_TRY(get_number(root, "frequency_penalty", -2, 2, &s->frequency_penalty));
    VT_TRY(get_number(root, "repeat_penalty", 0, 10, &s->repeat_penalty));
    VT_TRY(get_number(root, "repetition_penalty", 0, 10, &s->repeat_penalty));
    if (!(s->repeat_penalty > 0)) {
        return vt_errorf(VT_E_INVALID, "field 'repeat_penalty': %g must be above 0", s->repeat_penalty);
    }
    if (!(s->top_p > 0)) return vt_errorf(VT_E_INVALID, "field 'top_p': %g must be above 0", s->top_p);
    long long v;
    bool given;
    v = s->top_k;
    VT_TRY(get_int(root, "top_k", 0, 1 << 20, &v, NULL));
    s->top_k = (int32_t)v;
    v = s->penalty_last_n;
    VT_TRY(get_int(root, "repeat_last_n", 0, 1 << 20, &v, NULL));
    s->penalty_last_n = (int32_t)v;
    v = 0;
    VT_TRY(get_int(root, "seed", INT64_MIN, INT64_MAX, &v, &given));
    if (given) {
        s->seed = (uint64_t)v;
        r->seed_given = true;
    }

    /* max_tokens: the newest name wins when several are given. All three mean
     * what llama-server's n_predict means: -1 unlimited, 0 no token generated. */
    const char *names[] = {"n_predict", "max_tokens", "max_completion_tokens"};
    for (int i = 0; i < 3; i++) {
        v = 0;
        VT_TRY(get_int(root, names[i], -1, OAI_MAX_TOKENS, &v, &given));
        if (given) r->max_tokens = (int32_t)v;
    }
    v = 1;
    VT_TRY(get_int(root, "n", 1, OAI_MAX_N, &v, NULL));
    r->n = (int32_t)v;
    if (r->n_prompts > 1 && (int64_t)r->n_prompts * r->n > OAI_MAX_CHOICES) {
        return vt_errorf(VT_E_INVALID, "fields 'prompt' and 'n': %d prompts x n %d is more than %d choices",
                         r->n_prompts, r->n, OAI_MAX_CHOICES);
    }
    VT_TRY(parse_stop(root, r));
    VT_TRY(get_bool(root, "stream", &r->stream));
    VT_TRY(get_bool(root, "ignore_eos", &r->ignore_eos));
    json_t *so = field(root, "stream_options");
    if (so) {
        if (!json_is_object(so)) {
            return vt_errorf(VT_E_INVALID, "field 'stream_options': expected an object, got %s", json_kind(so));
        }
        json_t *iu = field(so, "include_usage");
        if (iu && !json_is_boolean(iu)) {
            return vt_errorf(VT_E_INVALID, "field 'stream_options.include_usage': expected a boolean, got %s",
                             json_kind(iu));
        }
        r->include_usage = iu && json_is_true(iu);
    }

    r->n_logprobs = -1;
    if (kind == OAI_CHAT) {
        bool lp = false;
        VT_TRY(get_bool(root, "logprobs", &lp));
        v = 0;
        VT_TRY(get_int(root, "top_logprobs", 0, OAI_MAX_LOGPROBS, &v, &given));
        if (given && !lp) {
            return vt_errorf(VT_E_INVALID, "field 'top_logprobs': needs \"logprobs\": true");
        }
        if (lp) r->n_logprobs = (int32_t)v;
    } else {
        v = -1;
        VT_TRY(get_int(root, "logprobs", 0, OAI_MAX_LOGPROBS, &v, &given));
        if (given) r->n_logprobs = (int32_t)v;
    }
    s->n_logprobs = r->n_logprobs; /* -1 when not asked: the engine skips the log-softmax */
    VT_TRY(refuse_unsupported(root));
    VT_TRY(parse_structured(root, r));
    VT_TRY(parse_logit_bias(root, r));
    if (kind == OAI_CHAT) VT_TRY(parse_tools(root, r));
    return VT_OK;
}

/* logit_bias: {"token id": bias in [-100, 100]} (-100 bans the token). */
static vt_status parse_logit_bias(json_t *root, oai_request *r) {
    json_t *lb = field(root, "logit_bias");
    if (!lb) return VT_OK;
    if (!json_is_object(lb)) {
        return vt_errorf(VT_E_INVALID, "field 'logit_bias': expected an object, got %s", json_kind(lb));
    }
    size_t n = json_object_size(lb);
    if (n == 0) return VT_OK;
    if (n > OAI_MAX_LOGIT_BIAS) {
        return vt_errorf(VT_E_INVALID, "field 'logit_bias': %zu tokens, at most %d", n, OAI_MAX_LOGIT_BIAS);
    }
    r->logit_bias = malloc(sizeof *r->logit_bias * n);
    if (!r->logit_bias) return vt_errorf(VT_E_NOMEM, "out of memory");
    const char *key;
    json_t *v;
    int32_t k = 0;
    json_object_foreach(lb, key, v) {
        char *end;
        long long id = strtoll(key, &end, 10);
        if (!*key || *end || id < 0 || id > INT32_MAX) {
            return vt_errorf(VT_E_INVALID, "field 'logit_bias': key \"%.32s\" is not a token id", key);
        }
        if (!json_is_number(v) || !(json_number_value(v) >= -100 && json_number_value(v) <= 100)) {
            return vt_errorf(VT_E_INVALID, "field 'logit_bias.%.32s': expected a number in [-100, 100]", key);
        }
        r->logit_bias[k++] = (vt_logit_bias){.token = (int32_t)id, .bias = (float)json_number_value(v)};
    }
    r->sampling.logit_bias = r->logit_bias;
    r->sampling.n_logit_bias = k;
    return VT_OK;
}

/* Fields that would change the answer and that vt does not implement yet: a 400
 * that names them, never a silent difference. Neutral values pass (echo false,
 * best_of 1, response_format text), as clients send them. */
static vt_status refuse_unsupported(json_t *root) {
    json_t *v;
    if ((v = field(root, "echo")) && !json_is_false(v)) {
        return vt_errorf(VT_E_INVALID, "field 'echo' is not supported by vt yet");
    }
    if ((v = field(root, "suffix")) && !(json_is_string(v) && json_string_length(v) == 0)) {
        return vt_errorf(VT_E_INVALID, "field 'suffix' is not supported by vt yet");
    }
    if ((v = field(root, "best_of")) && !(json_is_integer(v) && json_integer_value(v) == 1)) {
        return vt_errorf(VT_E_INVALID, "field 'best_of' is not supported by vt yet (only 1)");
    }
    return VT_OK;
}

/* Any <text> token reference, for a syntax check without the vocabulary. */
static int32_t any_token(void *ud, const char *s, size_t n) { return 0; }

/* Structured output: response_format (text, json_object with an optional
 * "schema" as llama-server takes it, json_schema {name, schema, strict}), the
 * top-level json_schema (llama-server) or grammar (GBNF text); at most one. The
 * result is GBNF text in r->grammar, checked here so that a bad one is a 400. */
static vt_status parse_structured(json_t *root, oai_request *r) {
    json_t *rf = field(root, "response_format"), *js = field(root, "json_schema"), *gr = field(root, "grammar");
    json_t *schema = NULL;
    const char *what = NULL;
    bool any_object = false;
    int n = 0;
    if (rf) {
        json_t *t = json_is_object(rf) ? json_object_get(rf, "type") : NULL;
        const char *ty = t && json_is_string(t) ? json_string_value(t) : NULL;
        if (!ty) return vt_errorf(VT_E_INVALID, "field 'response_format': expected {\"type\": \"text\" | \"json_object\" | \"json_schema\"}");
        if (!strcmp(ty, "json_object")) {
            schema = json_object_get(rf, "schema");
            what = "response_format.schema";
            any_object = !schema;
            n++;
        } else if (!strcmp(ty, "json_schema")) {
            json_t *o = json_object_get(rf, "json_schema");
            if (!json_is_object(o)) return vt_errorf(VT_E_INVALID, "field 'response_format.json_schema': expected an object");
            json_t *st = json_object_get(o, "strict");
            if (st && !json_is_boolean(st)) return vt_errorf(VT_E_INVALID, "field 'response_format.json_schema.strict': expected a boolean");
            schema = json_object_get(o, "schema");
            if (!schema) return vt_errorf(VT_E_INVALID, "field 'response_format.json_schema.schema' is missing");
            what = "response_format.json_schema.schema";
            n++;
        } else if (strcmp(ty, "text") != 0) {
            return vt_errorf(VT_E_INVALID, "field 'response_format.type': \"%.32s\" is not text, json_object or json_schema", ty);
        }
    }
    if (js) {
        schema = js;
        what = "json_schema";
        n++;
    }
    if (gr) {
        if (!json_is_string(gr)) return vt_errorf(VT_E_INVALID, "field 'grammar': expected GBNF text (a string), got %s", json_kind(gr));
        n++;
    }
    if (n == 0) return VT_OK;
    if (n > 1) return vt_errorf(VT_E_INVALID, "fields 'response_format', 'json_schema' and 'grammar': give at most one");
    strbuf g = {0};
    vt_status st = VT_OK;
    if (gr) sb_addn(&g, json_string_value(gr), json_string_length(gr));
    else if (any_object) jschema_any_object_gbnf(&g);
    else st = jschema_to_gbnf(schema, what, &g);
    if (st == VT_OK && (g.failed || !g.ptr)) st = g.failed ? vt_errorf(VT_E_NOMEM, "out of memory") : vt_errorf(VT_E_INVALID, "field 'grammar': empty");
    if (st == VT_OK) {
        /* the syntax here; <text> token references are resolved by the engine */
        const grammar_tokens any = {.find = any_token};
        grammar *parsed = NULL;
        st = grammar_parse_tokens(g.ptr, g.len, NULL, &any, &parsed);
        grammar_free(parsed);
        if (st != VT_OK) {
            char msg[400];
            snprintf(msg, sizeof msg, "%s", vt_last_error());
            st = vt_errorf(st, "field '%s': %s", gr ? "grammar" : what, msg);
        }
    }
    if (st != VT_OK) {
        sb_free(&g);
        return st;
    }
    r->grammar = g.ptr;
    r->grammar_len = g.len;
    return VT_OK;
}

/* tools, tool_choice, parallel_tool_calls (chat). */
static vt_status parse_tools(json_t *root, oai_request *r) {
    r->parallel_tool_calls = true;
    VT_TRY(get_bool(root, "parallel_tool_calls", &r->parallel_tool_calls));
    json_t *rf = field(root, "reasoning_format");
    if (rf) {
        const char *v = json_is_string(rf) ? json_string_value(rf) : "";
        if (!strcmp(v, "none")) r->reasoning_format = OAI_REASONING_NONE;
        else if (!strcmp(v, "deepseek")) r->reasoning_format = OAI_REASONING_DEEPSEEK;
        else return vt_errorf(VT_E_INVALID, "field 'reasoning_format': expected \"none\" or \"deepseek\"");
    }
    json_t *tools = field(root, "tools");
    if (tools) {
        if (!json_is_array(tools)) {
            return vt_errorf(VT_E_INVALID, "field 'tools': expected an array, got %s", json_kind(tools));
        }
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            json_t *fn = json_is_object(t) ? json_object_get(t, "function") : NULL;
            json_t *ty = json_is_object(t) ? json_object_get(t, "type") : NULL;
            json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
            if (!ty || !json_is_string(ty) || strcmp(json_string_value(ty), "function") != 0) {
                return vt_errorf(VT_E_INVALID, "field 'tools[%zu].type': expected \"function\"", i);
            }
            if (!name || !json_is_string(name) || json_string_length(name) == 0) {
                return vt_errorf(VT_E_INVALID, "field 'tools[%zu].function.name': expected a non-empty string", i);
            }
        }
        r->n_tools = (int32_t)json_array_size(tools);
    }
    json_t *tc = field(root, "tool_choice");
    r->tool_choice = OAI_TOOLS_AUTO;
    if (!tc) return VT_OK;
    if (json_is_string(tc)) {
        const char *v = json_string_value(tc);
        if (!strcmp(v, "auto")) r->tool_choice = OAI_TOOLS_AUTO;
        else if (!strcmp(v, "none")) r->tool_choice = OAI_TOOLS_NONE;
        else if (!strcmp(v, "required")) r->tool_choice = OAI_TOOLS_REQUIRED;
        else return vt_errorf(VT_E_INVALID, "field 'tool_choice': \"%.64s\" is not auto, none or required", v);
    } else if (json_is_object(tc)) {
        json_t *fn = json_object_get(tc, "function");
        json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
        if (!name || !json_is_string(name)) {
            return vt_errorf(VT_E_INVALID, "field 'tool_choice.function.name': expected a string");
        }
        r->tool_choice = OAI_TOOLS_NAMED;
        r->tool_choice_name = json_string_value(name);
        bool found = false;
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            json_t *n = json_object_get(json_object_get(t, "function"), "name");
            found |= !strcmp(json_string_value(n), r->tool_choice_name);
        }
        if (!found) {
            return vt_errorf(VT_E_INVALID, "field 'tool_choice': no tool named \"%.64s\" in 'tools'",
                             r->tool_choice_name);
        }
    } else {
        return vt_errorf(VT_E_INVALID, "field 'tool_choice': expected a string or an object, got %s", json_kind(tc));
    }
    if ((r->tool_choice == OAI_TOOLS_REQUIRED) && r->n_tools == 0) {
        return vt_errorf(VT_E_INVALID, "field 'tool_choice': \"required\" needs 'tools'");
    }
    return VT_OK;
}

vt_status oai_json_cost(const char *body, size_t len, size_t *cost_out) {
    size_t cost = 0;
    int depth = 0;
    bool scalar = false; /* inside a number or literal */
    for (size_t i = 0; i < len; i++) {
        char c = body[i];
        if (c == '"') {
            size_t k = i + 1;
            while (k < len && body[k] != '"') k += body[k] == '\\' ? 2 : 1;
            cost += 80 + (k - i);
            i = k;
            scalar = false;
            continue;
        }
        if (c == '{' || c == '[') {
            cost += c == '{' ? 256 : 128;
            if (++depth > OAI_MAX_JSON_DEPTH) {
                return vt_errorf(VT_E_INVALID, "request body: JSON nested deeper than %d levels", OAI_MAX_JSON_DEPTH);
            }
            scalar = false;
        } else if (c == '}' || c == ']') {
            depth--;
            scalar = false;
        } else if (c == ',' || c == ':' || c == ' ' || c == '\n' || c == '\r' || c == '\t') {
            scalar = false;
        } else if (!scalar) {
            cost += 40;
            scalar = true;
        }
    }
    if (cost_out) *cost_out = cost;
    if (cost > OAI_MAX_JSON_COST) {
        return vt_errorf(VT_E_RANGE,
                         "request body: parsing it would take %zu MiB, more than the %zu MiB a request may cost "
                         "(too many small JSON values)",
                         cost >> 20, OAI_MAX_JSON_COST >> 20);
    }
    return VT_OK;
}

vt_status oai_parse_request(oai_kind kind, const char *body, size_t len, oai_request *out) {
    memset(out, 0, sizeof *out);
    out->kind = kind;
    VT_TRY(oai_json_cost(body, len, NULL));
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        return vt_errorf(VT_E_FORMAT, "request body is not valid JSON: %s at line %d column %d",
                         jerr.text, jerr.line, jerr.column);
    }
    if (!json_is_object(root)) {
        const char *k = json_kind(root);
        json_decref(root);
        return vt_errorf(VT_E_INVALID, "request body: expected a JSON object, got %s", k);
    }
    out->root = root;
    out->max_tokens = -1;
    /* Defaults as llama-server's, so the two answer alike when a client sets nothing. */
    out->sampling = (vt_sampling){.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
                                  .repeat_penalty = 1.0f, .penalty_last_n = 64};
    vt_status st = parse_fields(kind, root, out);
    if (st != VT_OK) {
        oai_request_free(out);
        return st;
    }
    return VT_OK;
}

void oai_request_free(oai_request *r) {
    if (r->joined) {
        for (int64_t i = 0; i < r->n_messages; i++) free(r->joined[i]);
    }
    free(r->joined);
    free(r->messages);
    for (int32_t i = 0; r->prompts && i < r->n_prompts; i++) free(r->prompts[i].tokens);
    free(r->prompts);
    free(r->logit_bias);
    free(r->grammar);
    if (r->root) json_decref(r->root);
    oai_kind kind = r->kind;
    memset(r, 0, sizeof *r);
    r->kind = kind;
}

const char *oai_error_type(int status) {
    switch (status) {
    case 400:
    case 404:
    case 405:
    case 413: return "invalid_request_error";
    case 401: return "authentication_error";
    case 503: return "unavailable_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if it is not one. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, min = 0x10000;
    } else {
        return 0;
    }
    if (len > n) return 0;
    unsigned cp = c & (0x3f >> (len - 1));
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

json_t *oai_json_string_lossy(const char *s, size_t n) {
    json_t *v = json_stringn(s, n);
    if (v) return v;
    /* Invalid UTF-8 or a NUL (a token piece can be half a character): U+FFFD per bad byte. */
    char *buf = malloc(n * 3 + 1);
    if (!buf) return json_string("");
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = s[i] ? utf8_seq((const unsigned char *)s + i, n - i) : 0;
        if (k) {
            memcpy(buf + o, s + i, k);
            o += k;
            i += k;
        } else {
            memcpy(buf + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    v = json_stringn(buf, o);
    free(buf);
    return v ? v : json_string("");
}

json_t *oai_error_json(int status, const char *type, const char *code_str, const char *message) {
    json_t *err = json_object();
    json_object_set_new(err, "message", oai_json_string_lossy(message ? message : "", message ? strlen(message) : 0));
    json_object_set_new(err, "type", json_string(type ? type : oai_error_type(status)));
    json_object_set_new(err, "code", code_str ? json_string(code_str) : json_integer(status));
    json_t *o = json_object();
    json_object_set_new(o, "error", err);
    return o;
}
