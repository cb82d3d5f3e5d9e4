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
    bool no_lt;     /* JSON strings without a raw '<' (\u003c instead): the call's text
                     * ends at a marker that starts with '<' */
    int32_t raw_rule; /* the marker-free raw text rule of a tool grammar, -1 until made */
    const tc_tokens *tk; /* tool grammars: markers that are tokens (NULL: none) */
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

/* The arrays of an object's property rules, n properties: kv (n + 1 rule ids,
 * for the caller to fill) and required (n + 1 flags: each property, in the
 * schema's order, that req names). Both NULL on failure. */
static vt_status props_alloc(json_t *props, json_t *req, size_t n, int32_t **kv, bool **required) {
    *kv = malloc(sizeof(int32_t) * (n + 1));
    *required = calloc(n + 1, 1);
    if (!*kv || !*required) {
        free(*kv);
        free(*required);
        *kv = NULL;
        *required = NULL;
        return vt_errorf(VT_E_NOMEM, "out of memory");
    }
    size_t k = 0; /* the order of json_object_foreach */
    for (void *it = n ? json_object_iter(props) : NULL; it; it = json_object_iter_next(props, it), k++) {
        const char *key = json_object_iter_key(it);
        size_t i;
        json_t *r;
        json_array_foreach(req, i, r) (*required)[k] |= json_is_string(r) && !strcmp(json_string_value(r), key);
    }
    return VT_OK;
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
    int32_t *kv;
    bool *required;
    VT_TRY(props_alloc(props, req, n, &kv, &required));
    vt_status st = VT_OK;
    const char *key;
    json_t *ps;
    size_t k = 0;
    strbuf sub = {0};
    json_object_foreach(props, key, ps) {
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
        json_t *kj = json_string(key); /* the key as JSON text, as a literal */
        st = kj ? lit_json(&c->rules, kj) : vt_errorf(VT_E_NOMEM, "out of memory");
        json_decref(kj);
        if (st != VT_OK) goto done;
        sb_printf(&c->rules, " ws \":\" ws s%d\n", vr);
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

static void primitives(unsigned used, bool no_lt, strbuf *out) {
    if (used & USE_VALUE) used |= USE_STRING | USE_NUMBER | USE_BOOLEAN | USE_NULL | USE_WS;
    if (used & (USE_NUMBER | USE_INTEGER)) used |= USE_INTPART;
    if (used & USE_STRING) used |= USE_CHAR;
    if (used & USE_VALUE) {
        sb_add(out, "value ::= object | array | string | number | boolean | null\n"
                    "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
                    "array ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n");
    }
    if (used & USE_STRING) sb_add(out, "string ::= \"\\\"\" char* \"\\\"\" ws\n");
    if (used & USE_CHAR) {
        sb_add(out, no_lt ? "char ::= [^\"\\\\\\x7F\\x00-\\x1F<]" : "char ::= [^\"\\\\\\x7F\\x00-\\x1F]");
        sb_add(out, " | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" "
                    "([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))\n");
    }
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
        primitives(c.used, false, out);
        if (out->failed || c.rules.failed) st = vt_errorf(VT_E_NOMEM, "out of memory");
    }
    sb_free(&c.rules);
    return st;
}

void jschema_any_object_gbnf(strbuf *out) {
    sb_add(out, "root ::= object\n");
    primitives(USE_VALUE | USE_WS, false, out);
}

/* ---- tool calls --------------------------------------------------------------------- */

/* A tool parameter the XML-style formats write as raw text: a string schema
 * (type "string", or a const or an enum of strings only). */
static bool raw_string_schema(json_t *s) {
    if (!json_is_object(s) || json_object_get(s, "$ref")) return false;
    json_t *x;
    if ((x = json_object_get(s, "const"))) return json_is_string(x);
    if ((x = json_object_get(s, "enum"))) {
        if (!json_is_array(x) || json_array_size(x) == 0) return false;
        size_t i;
        json_t *e;
        json_array_foreach(x, i, e) if (!json_is_string(e)) return false;
        return true;
    }
    if (json_object_get(s, "anyOf") || json_object_get(s, "oneOf")) return false;
    x = json_object_get(s, "type");
    return json_is_string(x) && !strcmp(json_string_value(x), "string");
}

bool jschema_string_arg(void *tools, const char *name, size_t name_len, const char *key, size_t key_len) {
    size_t i;
    json_t *t;
    json_array_foreach((json_t *)tools, i, t) {
        json_t *fn = json_object_get(t, "function");
        json_t *tn = json_object_get(fn, "name");
        if (!json_is_string(tn) || json_string_length(tn) != name_len || memcmp(json_string_value(tn), name, name_len))
            continue;
        const char *k;
        json_t *ps;
        json_object_foreach(json_object_get(json_object_get(fn, "parameters"), "properties"), k, ps) {
            if (strlen(k) == key_len && !memcmp(k, key, key_len)) return raw_string_schema(ps);
        }
        return false;
    }
    return false;
}

/* A character in a GBNF class. */
static void class_char(strbuf *b, char ch) {
    if (ch == '\\' || ch == ']' || ch == '[' || ch == '-' || ch == '"') {
        char e[3] = {'\\', ch, 0};
        sb_add(b, e);
    } else if ((unsigned char)ch < 0x20 || ch == 0x7f) {
        sb_printf(b, "\\x%02X", (unsigned char)ch);
    } else {
        sb_addn(b, &ch, 1);
    }
}

#define RAW_MAX_STATES 64

/* Raw text (no NUL) in which none of the markers occurs: an automaton whose states are
 * the proper prefixes of the markers the text ends with, one right-recursive
 * rule each. Every marker starts with '<' and holds no other '<', so a '<'
 * always leads to the state "<" and any character that continues no marker to
 * the empty one. nl_edges: the text neither starts nor ends with a newline (the
 * parser strips one there as the format's). */
static vt_status marker_free_rule(conv *c, const char *const *marks, int n_marks, bool nl_edges, int32_t *rule) {
    const char *pre[RAW_MAX_STATES]; /* state k is the prefix pre[k][0 .. len[k]) */
    size_t len[RAW_MAX_STATES];
    int n = 0;
    pre[n] = "";
    len[n++] = 0;
    for (int m = 0; m < n_marks; m++) {
        VT_ASSERT(marks[m][0] == '<' && !strchr(marks[m] + 1, '<'));
        for (size_t l = 1; l < strlen(marks[m]); l++) {
            bool seen = false;
            for (int k = 0; k < n && !seen; k++) seen = len[k] == l && !memcmp(pre[k], marks[m], l);
            if (seen) continue;
            VT_ASSERT(n < RAW_MAX_STATES);
            pre[n] = marks[m];
            len[n++] = l;
        }
    }
    /* rules: the n states, then (nl_edges) "after a newline" and the start */
    if (c->n_rules + n + 2 >= JSCHEMA_MAX_RULES) return too_many("a tool's raw text");
    const int32_t base = c->n_rules;
    c->n_rules += n + 2;
    const int32_t after_nl = nl_edges ? base + n : base, start = nl_edges ? base + n + 1 : base;
    const int32_t lt = 1; /* the state "<" (the first prefix of the first marker) */
    for (int k = 0; k < n + (nl_edges ? 2 : 0); k++) {
        const bool is_after_nl = k == n, is_start = k == n + 1;
        const int from = k < n ? k : 0; /* the prefix whose continuations this rule takes */
        sb_printf(&c->rules, "s%d ::= %s", base + k, is_after_nl ? "" : "\"\" | ");
        strbuf neg = {0};
        sb_add(&neg, "[^<\\x00");
        bool lt_child = false;
        char done_chars[RAW_MAX_STATES];
        int n_done = 0;
        for (int m = 0; m < n_marks; m++) {
            const size_t l = len[from];
            if (strlen(marks[m]) <= l || memcmp(marks[m], pre[from], l)) continue;
            const char ch = marks[m][l];
            bool dup = false;
            for (int d = 0; d < n_done; d++) dup |= done_chars[d] == ch;
            if (dup) continue;
            done_chars[n_done++] = ch;
            if (ch == '<') lt_child = true;
            else class_char(&neg, ch);
            if (strlen(marks[m]) == l + 1) continue; /* it would complete a marker */
            int to = -1;
            for (int j = 0; j < n && to < 0; j++)
                if (len[j] == l + 1 && !memcmp(pre[j], marks[m], l + 1)) to = j;
            VT_ASSERT(to >= 0);
            char lc[2] = {ch, 0};
            lit(&c->rules, lc, 1);
            sb_printf(&c->rules, " s%d | ", base + to);
        }
        if (!lt_child) sb_printf(&c->rules, "\"<\" s%d | ", base + lt);
        if (nl_edges) {
            sb_add(&neg, "\\n");
            if (!is_start) sb_printf(&c->rules, "\"\\n\" s%d | ", after_nl);
        }
        sb_add(&neg, "]");
        sb_printf(&c->rules, "%s s%d\n", neg.ptr ? neg.ptr : "[^<\\x00]", base);
        const bool failed = neg.failed;
        sb_free(&neg);
        if (failed) return vt_errorf(VT_E_NOMEM, "out of memory");
    }
    *rule = start;
    return VT_OK;
}

/* The markers a raw value of format f must not hold (its parser ends the value
 * at the first of them). */
static const char *const xml_marks[] = {"</parameter>", "<parameter=", "</function>"};
static const char *const glm_marks[] = {"</arg_value>"};

/* The value of one XML-style parameter: raw text for a string schema, else
 * JSON by the schema. */
static vt_status xml_value_rule(conv *c, tc_format f, json_t *ps, const char *path, int32_t *rule) {
    if (!raw_string_schema(ps)) return schema_rule(c, ps, path, 1, rule);
    json_t *x;
    strbuf b = {0};
    vt_status st = VT_OK;
    if ((x = json_object_get(ps, "const"))) {
        lit(&b, json_string_value(x), json_string_length(x));
    } else if ((x = json_object_get(ps, "enum"))) {
        size_t i;
        json_t *e;
        json_array_foreach(x, i, e) {
            if (i) sb_add(&b, " | ");
            lit(&b, json_string_value(e), json_string_length(e));
        }
    } else if (json_object_get(ps, "minLength") || json_object_get(ps, "maxLength")) {
        long long min = 0, max = -1;
        VT_TRY(get_count(ps, "minLength", path, &min));
        VT_TRY(get_count(ps, "maxLength", path, &max));
        if (max >= 0 && max < min) return vt_errorf(VT_E_INVALID, "%s: maxLength %lld is below minLength %lld", path, max, min);
        /* no '<' at all (no marker can form) and, for glm, no newline (none at the edges) */
        sb_add(&b, f == TC_GLM ? "[^<\\n\\x00]" : "[^<\\x00]");
        repeat(&b, min, max);
    } else {
        if (c->raw_rule < 0) {
            st = f == TC_GLM ? marker_free_rule(c, glm_marks, 1, true, &c->raw_rule)
                             : marker_free_rule(c, xml_marks, 3, false, &c->raw_rule);
        }
        *rule = c->raw_rule;
        sb_free(&b);
        return st;
    }
    if (c->n_rules >= JSCHEMA_MAX_RULES) st = too_many(path);
    if (st == VT_OK) {
        *rule = new_rule(c);
        sb_printf(&c->rules, "s%d ::= %s\n", *rule, b.ptr ? b.ptr : "\"\"");
    }
    sb_free(&b);
    return st;
}

/* A marker of the call's format, spaced on both sides: its token (<[id]>)
 * where it is one token of the vocabulary (tk), else its text. */
static void mark(strbuf *b, const tc_tokens *tk, const char *m) {
    const int32_t id = tc_tokens_find(tk, m, strlen(m));
    if (id >= 0) {
        sb_printf(b, " <[%d]> ", id);
    } else {
        sb_add(b, " ");
        lit(b, m, strlen(m));
        sb_add(b, " ");
    }
}

/* A name the format can hold: no '<', '>' or newline (they end it). */
static vt_status xml_name_ok(const char *name, const char *path, tc_format f) {
    if (strpbrk(name, "<>\n") || !*name)
        return vt_errorf(VT_E_INVALID, "%s: the name \"%.64s\" cannot be written in the %s tool-call format", path, name,
                         tc_format_name(f));
    return VT_OK;
}

/* The parameters of an XML-style call (qwen3_coder, glm) by the object schema
 * params: each property one block, in the schema's order, the required ones
 * always and each optional one or not (as object_rule does for JSON). */
static vt_status xml_args_rule(conv *c, tc_format f, json_t *params, const char *path, int32_t *rule) {
    json_t *props = json_object_get(params, "properties");
    json_t *req = json_object_get(params, "required");
    const size_t n = json_is_object(props) ? json_object_size(props) : 0;
    if (n > JSCHEMA_MAX_ITEMS) return vt_errorf(VT_E_INVALID, "%s.properties: more than %d", path, JSCHEMA_MAX_ITEMS);
    if (c->n_rules + 2 * (int64_t)n + 2 >= JSCHEMA_MAX_RULES) return too_many(path);
    int32_t *kv;
    bool *required;
    VT_TRY(props_alloc(props, req, n, &kv, &required));
    vt_status st = VT_OK;
    strbuf sub = {0};
    const char *key;
    json_t *ps;
    size_t k = 0;
    json_object_foreach(n ? props : NULL, key, ps) {
        sb_free(&sub);
        sb_printf(&sub, "%s.properties.%.64s", path, key);
        const char *where = sub.ptr ? sub.ptr : path;
        int32_t vr;
        if ((st = xml_name_ok(key, where, f)) != VT_OK) goto done;
        if ((st = xml_value_rule(c, f, ps, where, &vr)) != VT_OK) goto done;
        if (c->n_rules >= JSCHEMA_MAX_RULES) {
            st = too_many(path);
            goto done;
        }
        kv[k] = new_rule(c);
        sb_printf(&c->rules, "s%d ::= ", kv[k]);
        if (f == TC_GLM) {
            mark(&c->rules, c->tk, "<arg_key>");
            lit(&c->rules, key, strlen(key));
            mark(&c->rules, c->tk, "</arg_key>");
            sb_add(&c->rules, "\"\\n\"");
            mark(&c->rules, c->tk, "<arg_value>");
            sb_printf(&c->rules, "s%d", vr);
            mark(&c->rules, c->tk, "</arg_value>");
            sb_add(&c->rules, "\"\\n\"\n");
        } else {
            mark(&c->rules, c->tk, "<parameter=");
            lit(&c->rules, key, strlen(key));
            sb_printf(&c->rules, " \">\\n\" s%d \"\\n\"", vr);
            mark(&c->rules, c->tk, "</parameter>");
            sb_add(&c->rules, "\"\\n\"\n");
        }
        k++;
    }
    /* tails: t(j) = the properties from j on */
    if (c->n_rules + (int64_t)n + 1 >= JSCHEMA_MAX_RULES) {
        st = too_many(path);
        goto done;
    }
    const int32_t base = c->n_rules;
    c->n_rules += (int32_t)(n + 1);
    for (size_t j = 0; j <= n; j++) {
        const int32_t me = base + (int32_t)j, next = me + 1;
        if (j == n) sb_printf(&c->rules, "s%d ::= \"\"\n", me);
        else if (required[j]) sb_printf(&c->rules, "s%d ::= s%d s%d\n", me, kv[j], next);
        else sb_printf(&c->rules, "s%d ::= s%d s%d | s%d\n", me, kv[j], next, next);
    }
    *rule = base;
done:
    sb_free(&sub);
    free(kv);
    free(required);
    return st;
}

vt_status jschema_tool_call_gbnf(tc_format f, bool args_style, json_t *tools, const char *name, const tc_tokens *tk,
                                 strbuf *out) {
    if (f != TC_HERMES && f != TC_LLAMA3 && f != TC_MISTRAL && f != TC_DEEPSEEK && f != TC_QWEN3_CODER &&
        f != TC_GLM && f != TC_HARMONY)
        return vt_errorf(VT_E_UNSUPPORTED, "no tool-call grammar for the %s format", tc_format_name(f));
    const bool xml = f == TC_QWEN3_CODER || f == TC_GLM;
    conv c = {.lenient = true, .no_lt = xml || f == TC_HARMONY, .raw_rule = -1, .tk = tk};
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
        int32_t r = -1;
        if (xml) {
            char where[64];
            snprintf(where, sizeof where, "tools[%zu].function.name", i);
            if ((st = xml_name_ok(tn, where, f)) != VT_OK) break;
            c.root = params;
            c.n_refs = 0;
            if ((st = xml_args_rule(&c, f, params, path, &r)) != VT_OK) break;
        } else if (params) {
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
                if (f == TC_MISTRAL && args_style) mark(&alts, tk, "[ARGS]");
                else sb_add(&alts, " \"\\\", \\\"arguments\\\": \"");
                break;
            case TC_LLAMA3: sb_add(&alts, " \"\\\", \\\"parameters\\\": \""); break;
            case TC_DEEPSEEK: {
                mark(&alts, tk, "<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>");
                break;
            }
            case TC_QWEN3_CODER: sb_add(&alts, " \">\\n\""); break;
            case TC_GLM: sb_add(&alts, " \"\\n\""); break;
            case TC_HARMONY:
                sb_add(&alts, " \" \"");
                mark(&alts, tk, "<|constrain|>");
                sb_add(&alts, "\"json\"");
                mark(&alts, tk, "<|message|>");
                break;
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
        case TC_HERMES:
            sb_add(out, " \"}\" (\"\\n\"");
            mark(out, tk, "</tool_call>");
            sb_add(out, ")?\n");
            break;
        case TC_LLAMA3: sb_add(out, " \"}\"\n"); break;
        case TC_MISTRAL: sb_add(out, args_style ? "\n" : " \"}]\"\n"); break;
        case TC_DEEPSEEK: sb_add(out, "\n"); break;
        case TC_QWEN3_CODER:
            mark(out, tk, "</function>");
            sb_add(out, "\"\\n\"");
            mark(out, tk, "</tool_call>");
            sb_add(out, "\n");
            break;
        case TC_GLM:
            mark(out, tk, "</tool_call>");
            sb_add(out, "\n");
            break;
        /* <|call|> ends the generation where it is one such token (gpt-oss): then the
         * complete arguments let it come; else it is written out */
        case TC_HARMONY:
            sb_add(out, " (");
            mark(out, tk, "<|call|>");
            sb_add(out, ")?\n");
            break;
        default: break;
        }
        sb_addn(out, c.rules.ptr, c.rules.len);
        primitives(c.used, c.no_lt, out);
        if (out->failed || c.rules.failed || alts.failed) st = vt_errorf(VT_E_NOMEM, "out of memory");
    }
    sb_free(&c.rules);
    sb_free(&alts);
    return st;
}
