/* Chat requests -> the variables of a Jinja chat template -> the prompt text. */
#include "server/chat_jinja.h"

#include "base/status.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

jinja_value *chat_jinja_from_json(const json_t *j) {
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        jinja_value *o = jinja_object();
        const char *k;
        json_t *v;
        if (!o) return NULL;
        json_object_foreach((json_t *)j, k, v) {
            if (jinja_object_set(o, k, strlen(k), chat_jinja_from_json(v)) != VT_OK) {
                jinja_value_free(o);
                return NULL;
            }
        }
        return o;
    }
    case JSON_ARRAY: {
        jinja_value *a = jinja_array();
        size_t i;
        json_t *v;
        if (!a) return NULL;
        json_array_foreach(j, i, v) {
            if (jinja_array_push(a, chat_jinja_from_json(v)) != VT_OK) {
                jinja_value_free(a);
                return NULL;
            }
        }
        return a;
    }
    case JSON_STRING: return jinja_string(json_string_value(j), json_string_length(j));
    case JSON_INTEGER: return jinja_int((int64_t)json_integer_value(j));
    case JSON_REAL: return jinja_float(json_real_value(j));
    case JSON_TRUE: return jinja_bool(true);
    case JSON_FALSE: return jinja_bool(false);
    default: return jinja_none();
    }
}

/* tool_calls[i].function.arguments: a JSON string becomes the object it encodes.
 * msg is a fresh copy (chat_jinja_from_json), so it is edited in place. */
static vt_status parse_tool_calls(jinja_value *msg) {
    jinja_value *calls = jinja_object_get(msg, "tool_calls", 10);
    for (size_t i = 0; i < jinja_array_len(calls); i++) {
        jinja_value *fn = jinja_object_get(jinja_array_at(calls, i), "function", 8);
        jinja_value *args = fn ? jinja_object_get(fn, "arguments", 9) : NULL;
        const char *text;
        size_t len;
        jinja_value *parsed = NULL;
        if (!args || !jinja_string_value(args, &text, &len)) continue;
        if (jinja_value_from_json(text, len, &parsed) != VT_OK) continue; /* not JSON: stays a string */
        if (jinja_object_set(fn, "arguments", 9, parsed) != VT_OK) return VT_E_NOMEM;
    }
    return VT_OK;
}

vt_status chat_jinja_vars(const oai_request *r, const chat_jinja_env *env, jinja_value **out) {
    *out = NULL;
    jinja_value *vars = jinja_object(), *msgs = jinja_array();
    if (!vars || !msgs) goto nomem;
    json_t *ms = json_object_get(r->root, "messages");
    for (int64_t i = 0; i < r->n_messages; i++) {
        json_t *m = json_array_get(ms, (size_t)i);
        jinja_value *msg = m ? chat_jinja_from_json(m) : NULL;
        if (!msg) goto nomem;
        const chat_message *cm = &r->messages[i];
        json_t *content = json_object_get(m, "content");
        vt_status st = jinja_object_set(msg, "role", 4, jinja_string(cm->role, cm->role_len));
        /* text parts are joined (cm->content); null and absent content stay as sent */
        if (st == VT_OK && content && json_is_array(content))
            st = jinja_object_set(msg, "content", 7, jinja_string(cm->content, cm->content_len));
        if (st == VT_OK) st = parse_tool_calls(msg);
        if (st != VT_OK || jinja_array_push(msgs, msg) != VT_OK) {
            if (st != VT_OK) jinja_value_free(msg);
            goto nomem;
        }
    }
    if (jinja_object_set(vars, "messages", 8, msgs) != VT_OK) {
        msgs = NULL;
        goto nomem;
    }
    msgs = NULL;
    json_t *tools = json_object_get(r->root, "tools");
    if (tools && !json_is_null(tools) && jinja_object_set(vars, "tools", 5, chat_jinja_from_json(tools)) != VT_OK)
        goto nomem;
    if (jinja_object_set(vars, "add_generation_prompt", 21, jinja_bool(true)) != VT_OK ||
        jinja_object_set(vars, "bos_token", 9, jinja_string(env->bos_token, strlen(env->bos_token))) != VT_OK ||
        jinja_object_set(vars, "eos_token", 9, jinja_string(env->eos_token, strlen(env->eos_token))) != VT_OK)
        goto nomem;
    json_t *kwargs = json_object_get(r->root, "chat_template_kwargs");
    if (kwargs && json_is_object(kwargs)) {
        const char *k;
        json_t *v;
        json_object_foreach(kwargs, k, v) {
            if (jinja_object_set(vars, k, strlen(k), chat_jinja_from_json(v)) != VT_OK) goto nomem;
        }
    }
    *out = vars;
    return VT_OK;
nomem:
    jinja_value_free(vars);
    jinja_value_free(msgs);
    return vt_errorf(VT_E_NOMEM, "chat template: out of memory for the variables");
}

vt_status chat_jinja_render(const jinja_template *t, const oai_request *r, const chat_jinja_env *env,
                            char **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    jinja_value *vars = NULL;
    VT_TRY(chat_jinja_vars(r, env, &vars));
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    /* tighter than the interpreter's defaults: many requests may render at once */
    jinja_render_opts o = {.limits = {.max_output = (size_t)16 << 20, .max_memory = (size_t)64 << 20},
                           .year = tm.tm_year + 1900, .month = tm.tm_mon + 1, .day = tm.tm_mday};
    if (env->year) {
        o.year = env->year;
        o.month = env->month;
        o.day = env->day;
    }
    char *text = NULL;
    size_t len = 0;
    vt_status st = jinja_template_render(t, vars, &o, &text, &len);
    jinja_value_free(vars);
    if (st != VT_OK) {
        if (st == VT_E_NOMEM) return vt_error_prefix(st, "chat template");
        /* the template refused the conversation, or passed a limit: the request's fault */
        return vt_error_prefix(VT_E_INVALID, "chat template");
    }
    size_t bl = strlen(env->bos_token);
    if (env->strip_bos && bl && len >= bl && !memcmp(text, env->bos_token, bl)) {
        memmove(text, text + bl, len - bl + 1);
        len -= bl;
    }
    *out = text;
    *out_len = len;
    return VT_OK;
}
