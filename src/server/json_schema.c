/* JSON schema to GBNF (json_schema.h). Each schema becomes a rule "sN"; the
 * primitives (ws, string, number, ...) are written once, at the end, for those
 * that were used. */
#include "server/json_schema.h"

#include "base/status.h"

#include <string.h>

enum {
    USE_WS = 1 << 0,
    USE_STRING = 1 << 1,
    USE_NUMBER = 1 << 2,
    USE_INTEGER = 1 << 3,
    USE_BOOLEAN = 1 << 4,
    USE_NULL = 1 << 5,
    USE_VALUE = 1 << 6, /* value, object, array: any JSON */
    USE_CHAR = 1 << 7,
    USE_INTPART = 1 << 8,
};

typedef struct conv {
    strbuf rules;   /* the sN rules */
    unsigned used;  /* USE_* */
    int32_t n_rules;
    json_t *root;   /* the top schema, for $ref */
    struct {
        const char *ref;
        int32_t rule;
    } refs[64];
    int32_t n_refs;
    bool lenient;   /* tools: keywords vt cannot enforce are left unenforced, not refused */
} conv;

/* GBNF literal text for bytes s[0..n): quotes and backslashes escaped, control
 * bytes as \xHH. */
static void lit(strbuf *b, const char *s, size_t n) {
    sb_add(b, "\"");
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[3] = {'\\', (char)c, 0};
            sb_add(b, e);
        } else if (c < 0x20 || c == 0x7f) {
            sb_printf(b, "\\x%02X", c);
        } else {
            sb_addn(b, (const char *)&s[i], 1);
        }
    }
    sb_add(b, "\"");
}

/* A GBNF literal for a JSON value as compact JSON text. */
static vt_status lit_json(strbuf *b, json_t *v) {
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!t) return vt_errorf(VT_E_NOMEM, "out of memory");
    lit(b, t, strlen(t));
    free(t);
    return VT_OK;
}

static int32_t new_rule(conv *c) { return c->n_rules++; }

static vt_status too_many(const char *path) {
    return vt_errorf(VT_E_INVALID, "%s: the schema needs more than %d grammar rules", path, JSCHEMA_MAX_RULES);
}

static vt_status schema_rule(conv *c, json_t *s, const char *path, int depth, int32_t *rule);

static vt_status unsupported(const char *key, const char *path) {
    return vt_errorf(VT_E_INVALID, "%s: keyword '%.64s' is not supported by vt's JSON schema grammars", path, key);
}

static bool is_annotation(const char *k) {
    static const char *const ann[] = {"title", "description", "default", "examples", "$schema", "$id", "$comment",
                                      "strict", "deprecated", "readOnly", "writeOnly", "$defs", "definitions"};
    for (size_t i = 0; i < sizeof ann / sizeof ann[0]; i++)
        if (!strcmp(k, ann[i])) return true;
    return false;
}

static vt_status get_count(json_t *s, const char *key, const char *path, long long *out) {
    json_t *v = json_object_get(s, key);
    if (!v) return VT_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > JSCHEMA_MAX_ITEMS)
        return vt_errorf(VT_E_INVALID, "%s.%s: expected an integer in [0, %d]", path, key, JSCHEMA_MAX_ITEMS);
    *out = json_integer_value(v);
    return VT_OK;
}

/* x{min,max} in GBNF (max < 0: unbounded). */
static void repeat(strbuf *b, long long min, long long max) {
    if (max < 0) sb_printf(b, "{%lld,}", min);
    else sb_printf(b, "{%lld,%lld}", min, max);
}

static vt_status object_rule(conv *c, json_t *s, const char *path, int depth, strbuf *b) {
    json_t *props = json_object_get(s, "properties");
    json_t *req = json_object_get(s, "required");
    json_t *addl = json_object_get(s, "additionalProperties");
    if (addl && !json_is_false(addl) && !c->lenient) {
        if (props || !(json_is_true(addl) || (json_is_object(addl) && json_object_size(addl) == 0)))
            return unsupported("additionalProperties", path);
    }
    if (props && !json_is_object(props)) return vt_errorf(VT_E_INVALID, "%s.properties: expected an object", path);
    if (req && !json_is_array(req)) return vt_errorf(VT_E_INVALID, "%s.required: expected an array", path);
    size_t i;
    json_t *r;
    json_array_foreach(req, i, r) {
        if (!json_is_string(r)) return vt_errorf(VT_E_INVALID, "%s.required[%zu]: expected a string", path, i);
        if (!props || !json_object_get(props, json_string_value(r)))
            return vt_errorf(VT_E_INVALID, "%s.required: \"%.64s\" is not in 'properties'", path, json_string_value(r));
    }
    if (!props) {
        if (addl && json_is_false(addl)) {
            c->used |= USE_WS;
            sb_add(b, "\"{\" ws \"}\" ws");
        } else {
            c->used |= USE_VALUE | USE_WS;
            sb_add(b, "object");
        }
        return VT_OK;
    }
    const size_t n = json_object_size(props);
    if (n > JSCHEMA_MAX_ITEMS) return vt_errorf(VT_E_INVALID, "%s.properties: more than %d", path, JSCHEMA_MAX_ITEMS);
    /* kv rules, then tails: tail(i, first) = the properties from i on */
    int32_t *kv = malloc(sizeof(int32_t) * (n + 1));
    bool *required = calloc(n + 1, 1);
    if (!kv || !required) {
        free(kv);
        free(required);
        return vt_errorf(VT_E_NOMEM, "out of memory");
    }
    vt_status st = VT_OK;
    const char *key;
    json_t *ps;
    size_t k = 0;
    strbuf sub = {0};
    json_object_foreach(props, key, ps) {
        json_array_foreach(req, i, r) required[k] |= !strcmp(json_string_value(r), key);
        sb_free(&sub);
        sb_printf(&sub, "%s.properties.%.64s", path, key);
        int32_t vr;
        if ((st = schema_rule(c, ps, sub.ptr ? sub.ptr : path, depth + 1, &vr)) != VT_OK) goto done;
        if (c->n_rules >= JSCHEMA_MAX_RULES) {
            st = too_many(path);
            goto done;
        }
        kv[k] = new_rule(c);
        sb_printf(&c->rules, "s%d ::= ", kv[k]);
        strbuf name = {0};
        json_t *kj = json_string(key);
        char *kt = kj ? json_dumps(kj, JSON_ENCODE_ANY) : NULL;
        json_decref(kj);
        if (!kt) {
            st = vt_errorf(VT_E_NOMEM, "out of memory");
            goto done;
        }
        lit(&name, kt, strlen(kt));
        free(kt);
        sb_printf(&c->rules, "%s ws \":\" ws s%d\n", name.ptr, vr);
        sb_free(&name);
        k++;
    }
    c->used |= USE_WS;
    /* tails: t(i, 0) after a property was written (needs a comma), t(i, 1) first */
    int32_t base = c->n_rules;
    if (c->n_rules + 2 * (int64_t)n + 2 >= JSCHEMA_MAX_RULES) {
        st = too_many(path);
        goto done;
    }
    c->n_rules += 2 * (int32_t)(n + 1);
    for (size_t j = 0; j <= n; j++) {
        for (int first = 0; first < 2; first++) {
            sb_printf(&c->rules, "s%d ::= ", base + 2 * (int32_t)j + first);
            if (j == n) {
                sb_add(&c->rules, "\"\"\n");
                continue;
            }
            sb_printf(&c->rules, "%ss%d s%d", first ? "" : "\",\" ws ", kv[j], base + 2 * (int32_t)(j + 1));
            if (!required[j]) sb_printf(&c->rules, " | s%d", base + 2 * (int32_t)(j + 1) + first);
            sb_add(&c->rules, "\n");
        }
    }
    sb_printf(b, "\"{\" ws s%d \"}\" ws", base + 1);
done:
    sb_free(&sub);
    free(kv);
    free(required);
    return st;
}

static vt_status array_rule(conv *c, json_t *s, const char *path, int depth, strbuf *b) {
    long long min = 0, max = -1;
    VT_TRY(get_count(s, "minItems", path, &min));
    VT_TRY(get_count(s, "maxItems", path, &max));
    if (max >= 0 && max < min) return vt_errorf(VT_E_INVALID, "%s: maxItems %lld is below minItems %lld", path, max, min);
    json_t *items = json_object_get(s, "items");
    int32_t ir = -1;
    if (items) {
        strbuf sub = {0};
        sb_printf(&sub, "%s.items", path);
        vt_status st = schema_rule(c, items, sub.ptr ? sub.ptr : path, depth + 1, &ir);
        sb_free(&sub);
        VT_TRY(st);
    } else {
        c->used |= USE_VALUE;
    }
    char item[32];
    if (ir >= 0) snprintf(item, sizeof item, "s%d", ir);
    else snprintf(item, sizeof item, "value");
    c->used |= USE_WS;
    if (max == 0) {
        sb_add(b, "\"[\" ws \"]\" ws");
        return VT_OK;
    }
    sb_printf(b, "\"[\" ws %s%s (\",\" ws %s)", min == 0 ? "(" : "", item, item);
    repeat(b, min > 0 ? min - 1 : 0, max < 0 ? -1 : max - 1);
    sb_printf(b, "%s \"]\" ws", min == 0 ? ")?" : "");
    return VT_OK;
}

static vt_status type_rule(conv *c, json_t *s, const char *type, const char *path, int depth, strbuf *b) {
    if (!strcmp(type, "object")) return object_rule(c, s, path, depth, b);
    if (!strcmp(type, "array")) return array_rule(c, s, path, depth, b);
    if (!strcmp(type, "string")) {
        long long min = 0, max = -1;
        VT_TRY(get_count(s, "minLength", path, &min));
        VT_TRY(get_count(s, "maxLength", path, &max));
        if (max >= 0 && max < min) return vt_errorf(VT_E_INVALID, "%s: maxLength %lld is below minLength %lld", path, max, min);
        c->used |= USE_WS;
        if (min == 0 && max < 0) {
            c->used |= USE_STRING;
            sb_add(b, "string");
        } else {
            c->used |= USE_CHAR;
            sb_add(b, "\"\\\"\" char");
            repeat(b, min, max);
            sb_add(b, " \"\\\"\" ws");
        }
        return VT_OK;
    }
    if (!strcmp(type, "number")) {
        c->used |= USE_NUMBER | USE_WS;
        sb_add(b, "number");
        return VT_OK;
    }
    if (!strcmp(type, "integer")) {
        c->used |= USE_INTEGER | USE_WS;
        sb_add(b, "integer");
        return VT_OK;
    }
    if (!strcmp(type, "boolean")) {
        c->used |= USE_BOOLEAN | USE_WS;
        sb_add(b, "boolean");
        return VT_OK;
    }
    if (!strcmp(type, "null")) {
        c->used |= USE_NULL | USE_WS;
        sb_add(b, "null");
        return VT_OK;
    }
    return vt_errorf(VT_E_INVALID, "%s.type: \"%.32s\" is not a JSON schema type", path, type);
}

/* Keywords each type may carry (beyond annotations and the generic ones). */
static bool keyword_ok(const char *k) {
    static const char *const ok[] = {"type", "properties", "required", "additionalProperties", "items", "minItems",
                                     "maxItems", "minLength", "maxLength", "enum", "const", "anyOf", "oneOf", "$ref"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (!strcmp(k, ok[i])) return true;
    return is_annotation(k);
}

static vt_status ref_rule(conv *c, const char *ref, const char *path, int depth, int32_t *rule) {
    for (int32_t i = 0; i < c->n_refs; i++) {
        if (!strcmp(c->refs[i].ref, ref)) {
            *rule = c->refs[i].rule;
            return VT_OK;
        }
    }
    const char *name = NULL;
    json_t *defs = NULL;
    if (!strncmp(ref, "#/$defs/", 8)) {
        defs = json_object_get(c->root, "$defs");
        name = ref + 8;
    } else if (!strncmp(ref, "#/definitions/", 14)) {
        defs = json_object_get(c->root, "definitions");
        name = ref + 14;
    } else {
        return vt_errorf(VT_E_INVALID, "%s.$ref: \"%.64s\": only \"#/$defs/NAME\" and \"#/definitions/NAME\" are supported",
                         path, ref);
    }
    json_t *target = json_is_object(defs) ? json_object_get(defs, name) : NULL;
    if (!target) return vt_errorf(VT_E_INVALID, "%s.$ref: \"%.64s\" is not defined", path, ref);
    if (c->n_refs == (int32_t)(sizeof c->refs / sizeof c->refs[0]))
        return vt_errorf(VT_E_INVALID, "%s: more than 64 different $ref targets", path);
    if (c->n_rules >= JSCHEMA_MAX_RULES) return too_many(path);
    /* the rule's number first, so that a recursive reference finds it */
    const int32_t me = new_rule(c);
    c->refs[c->n_refs].ref = ref;
    c->refs[c->n_refs++].rule = me;
    int32_t body;
    VT_TRY(schema_rule(c, target, ref, depth + 1, &body));
    sb_printf(&c->rules, "s%d ::= s%d\n", me, body);
    *rule = me;
    return VT_OK;
}

static vt_status schema_rule(conv *c, json_t *s, const char *path, int depth, int32_t *rule) {
    if (depth > JSCHEMA_MAX_DEPTH) return vt_errorf(VT_E_INVALID, "%s: schemas nested more than %d deep", path, JSCHEMA_MAX_DEPTH);
    if (c->n_rules >= JSCHEMA_MAX_RULES) return too_many(path);
    if (json_is_true(s) || (json_is_object(s) && json_object_size(s) == 0)) {
        c->used |= USE_VALUE | USE_WS;
        *rule = new_rule(c);
        sb_printf(&c->rules, "s%d ::= value\n", *rule);
        return VT_OK;
    }
    if (!json_is_object(s)) return vt_errorf(VT_E_INVALID, "%s: expected a schema object", path);
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v) {
        if (!keyword_ok(k) && !c->lenient) return unsupported(k, path);
    }
    json_t *ref = json_object_get(s, "$ref");
    if (ref) {
        if (!json_is_string(ref)) return vt_errorf(VT_E_INVALID, "%s.$ref: expected a string", path);
        return ref_rule(c, json_string_value(ref), path, depth, rule);
    }
    strbuf b = {0};
    vt_status st = VT_OK;
    json_t *en = json_object_get(s, "enum"), *cst = json_object_get(s, "const");
    json_t *any = json_object_get(s, "anyOf");
    if (!any) any = json_object_get(s, "oneOf");
    if (cst) {
        c->used |= USE_WS;
        if ((st = lit_json(&b, cst)) != VT_OK) goto done;
        sb_add(&b, " ws");
    } else if (en) {
        if (!json_is_array(en) || json_array_size(en) == 0) {
            st = vt_errorf(VT_E_INVALID, "%s.enum: expected a non-empty array", path);
            goto done;
        }
        c->used |= USE_WS;
        sb_add(&b, "(");
        size_t i;
        json_array_foreach(en, i, v) {
            if (i) sb_add(&b, " | ");
            if ((st = lit_json(&b, v)) != VT_OK) goto done;
        }
        sb_add(&b, ") ws");
    } else if (any) {
        if (!json_is_array(any) || json_array_size(any) == 0) {
            st = vt_errorf(VT_E_INVALID, "%s: anyOf / oneOf: expected a non-empty array", path);
            goto done;
        }
        size_t i;
        json_array_foreach(any, i, v) {
            strbuf sub = {0};
            sb_printf(&sub, "%s.anyOf[%zu]", path, i);
            int32_t r;
            st = schema_rule(c, v, sub.ptr ? sub.ptr : path, depth + 1, &r);
            sb_free(&sub);
            if (st != VT_OK) goto done;
            sb_printf(&b, "%ss%d", i ? " | " : "", r);
        }
    } else {
        json_t *type = json_object_get(s, "type");
        if (!type) {
            /* no type: what the other keywords imply, else any value */
            const char *t = json_object_get(s, "properties") ? "object"
                            : json_object_get(s, "items")    ? "array"
                                                             : NULL;
            if (t) {
                st = type_rule(c, s, t, path, depth, &b);
            } else {
                c->used |= USE_VALUE | USE_WS;
                sb_add(&b, "value");
            }
        } else if (json_is_string(type)) {
            st = type_rule(c, s, json_string_value(type), path, depth, &b);
        } else if (json_is_array(type) && json_array_size(type) > 0) {
            size_t i;
            json_array_foreach(type, i, v) {
                if (!json_is_string(v)) {
                    st = vt_errorf(VT_E_INVALID, "%s.type[%zu]: expected a string", path, i);
                    goto done;
                }
                if (i) sb_add(&b, " | ");
                if ((st = type_rule(c, s, json_string_value(v), path, depth, &b)) != VT_OK) goto done;
            }
        } else {
            st = vt_errorf(VT_E_INVALID, "%s.type: expected a string or an array of strings", path);
        }
    }
    if (st != VT_OK) goto done;
    if (c->n_rules >= JSCHEMA_MAX_RULES) {
        st = too_many(path);
        goto done;
    }
    *rule = new_rule(c);
    sb_printf(&c->rules, "s%d ::= %s\n", *rule, b.ptr ? b.ptr : "\"\"");
done:
    sb_free(&b);
    return st;
}

static void primitives(unsigned used, strbuf *out) {
    if (used & USE_VALUE) used |= USE_STRING | USE_NUMBER | USE_BOOLEAN | USE_NULL | USE_WS;
    if (used & (USE_NUMBER | USE_INTEGER)) used |= USE_INTPART;
    if (used & USE_STRING) used |= USE_CHAR;
    if (used & USE_VALUE) {
        sb_add(out, "value ::= object | array | string | number | boolean | null\n"
                    "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
                    "array ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n");
    }
    if (used & USE_STRING) sb_add(out, "string ::= \"\\\"\" char* \"\\\"\" ws\n");
    if (used & USE_CHAR)
        sb_add(out, "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" "
                    "([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))\n");
    if (used & USE_NUMBER)
        sb_add(out, "number ::= \"-\"? int-part (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})? ws\n");
    if (used & USE_INTEGER) sb_add(out, "integer ::= \"-\"? int-part ws\n");
    if (used & USE_INTPART) sb_add(out, "int-part ::= \"0\" | [1-9] [0-9]{0,15}\n");
    if (used & USE_BOOLEAN) sb_add(out, "boolean ::= (\"true\" | \"false\") ws\n");
    if (used & USE_NULL) sb_add(out, "null ::= \"null\" ws\n");
    if (used & USE_WS) sb_add(out, "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n");
}

vt_status jschema_to_gbnf(json_t *schema, const char *what, strbuf *out) {
    conv c = {.root = schema};
    int32_t r;
    vt_status st = schema_rule(&c, schema, what, 0, &r);
    if (st == VT_OK) {
        /* the top value has no whitespace before it */
        sb_printf(out, "root ::= s%d\n", r);
        sb_addn(out, c.rules.ptr, c.rules.len);
        primitives(c.used, out);
        if (out->failed || c.rules.failed) st = vt_errorf(VT_E_NOMEM, "out of memory");
    }
    sb_free(&c.rules);
    return st;
}

void jschema_any_object_gbnf(strbuf *out) {
    sb_add(out, "root ::= object\n");
    primitives(USE_VALUE | USE_WS, out);
}

vt_status jschema_tool_call_gbnf(tc_format f, bool args_style, json_t *tools, const char *name, strbuf *out) {
    if (f != TC_HERMES && f != TC_LLAMA3 && f != TC_MISTRAL && f != TC_DEEPSEEK)
        return vt_errorf(VT_E_UNSUPPORTED, "no tool-call grammar for the %s format", tc_format_name(f));
    conv c = {.lenient = true};
    strbuf alts = {0};
    vt_status st = VT_OK;
    size_t i;
    json_t *t;
    int n_alts = 0;
    json_array_foreach(tools, i, t) {
        json_t *fn = json_object_get(t, "function");
        const char *tn = json_string_value(json_object_get(fn, "name"));
        if (!tn || (name && strcmp(name, tn) != 0)) continue;
        json_t *params = json_object_get(fn, "parameters");
        char path[96];
        snprintf(path, sizeof path, "tools[%zu].function.parameters", i);
        int32_t r;
        if (params) {
            c.root = params;
            c.n_refs = 0; /* each tool's $defs are its own */
            if ((st = schema_rule(&c, params, path, 0, &r)) != VT_OK) break;
        } else { /* no parameters: no arguments */
            r = new_rule(&c);
            c.used |= USE_WS;
            sb_printf(&c.rules, "s%d ::= \"{\" ws \"}\" ws\n", r);
        }
        sb_add(&alts, n_alts++ ? " | " : "");
        sb_add(&alts, "(");
        if (!name) { /* the prefill stopped before the name */
            lit(&alts, tn, strlen(tn));
            switch (f) {
            case TC_HERMES:
            case TC_MISTRAL:
                if (f == TC_MISTRAL && args_style) sb_add(&alts, " \"[ARGS]\"");
                else sb_add(&alts, " \"\\\", \\\"arguments\\\": \"");
                break;
            case TC_LLAMA3: sb_add(&alts, " \"\\\", \\\"parameters\\\": \""); break;
            case TC_DEEPSEEK: {
                static const char sep[] = "<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>";
                sb_add(&alts, " ");
                lit(&alts, sep, strlen(sep));
                break;
            }
            default: break;
            }
            sb_add(&alts, " ");
        }
        sb_printf(&alts, "s%d)", r);
    }
    if (st == VT_OK && n_alts == 0) st = vt_errorf(VT_E_INVALID, "field 'tools': no tool to call");
    if (st == VT_OK) {
        c.used |= USE_WS;
        sb_printf(out, "root ::= (%s)", alts.ptr);
        switch (f) {
        case TC_HERMES: sb_add(out, " \"}\" (\"\\n</tool_call>\")?\n"); break;
        case TC_LLAMA3: sb_add(out, " \"}\"\n"); break;
        case TC_MISTRAL: sb_add(out, args_style ? "\n" : " \"}]\"\n"); break;
        case TC_DEEPSEEK: sb_add(out, "\n"); break;
        default: break;
        }
        sb_addn(out, c.rules.ptr, c.rules.len);
        primitives(c.used, out);
        if (out->failed || c.rules.failed || alts.failed) st = vt_errorf(VT_E_NOMEM, "out of memory");
    }
    sb_free(&c.rules);
    sb_free(&alts);
    return st;
}
