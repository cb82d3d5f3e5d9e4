/* The interpreter's values: construction, reference counting, the memory budget,
 * Python's str()/repr()/json.dumps() of them, equality and ordering, and a JSON
 * parser that builds them. */
#include "jinja/jinja_impl.h"

#include "base/status.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Thread_local jmem *jinja_mem_current;

/* ---- memory -------------------------------------------------------------------- */

static bool jmem_charge(size_t n) {
    jmem *m = jinja_mem_current;
    if (!m) return true;
    if (m->exceeded || n > m->limit || m->used > m->limit - n) {
        m->exceeded = true;
        return false;
    }
    m->used += n;
    return true;
}

static void jmem_uncharge(size_t n) {
    jmem *m = jinja_mem_current;
    if (m) m->used = n > m->used ? 0 : m->used - n;
}

void *jmem_alloc(size_t n) {
    if (!jmem_charge(n)) return NULL;
    void *p = malloc(n ? n : 1);
    if (!p) {
        jmem_uncharge(n);
        if (jinja_mem_current) jinja_mem_current->exceeded = jinja_mem_current->oom = true;
    }
    return p;
}

void *jmem_realloc(void *p, size_t old_n, size_t new_n) {
    if (new_n > old_n && !jmem_charge(new_n - old_n)) return NULL;
    void *q = realloc(p, new_n ? new_n : 1);
    if (!q) {
        if (new_n > old_n) jmem_uncharge(new_n - old_n);
        if (jinja_mem_current) jinja_mem_current->exceeded = jinja_mem_current->oom = true;
        return NULL;
    }
    if (new_n < old_n) jmem_uncharge(old_n - new_n);
    return q;
}

void jmem_free(void *p, size_t n) {
    if (!p) return;
    free(p);
    jmem_uncharge(n);
}

/* ---- construction ---------------------------------------------------------------- */

static jinja_value *jv_new(jv_kind kind, size_t extra) {
    size_t n = sizeof(jinja_value) + extra;
    jinja_value *v = jmem_alloc(n);
    if (!v) return NULL;
    memset(v, 0, sizeof *v);
    v->kind = (uint8_t)kind;
    v->refs = 1;
    v->bytes = n;
    return v;
}

jinja_value *jinja_none(void) { return jv_new(JV_NONE, 0); }

jinja_value *jinja_bool(bool b) {
    jinja_value *v = jv_new(JV_BOOL, 0);
    if (v) v->u.b = b;
    return v;
}

jinja_value *jinja_int(int64_t i) {
    jinja_value *v = jv_new(JV_INT, 0);
    if (v) v->u.i = i;
    return v;
}

jinja_value *jinja_float(double f) {
    jinja_value *v = jv_new(JV_FLOAT, 0);
    if (v) v->u.f = f;
    return v;
}

jinja_value *jv_str(const char *s, size_t len) {
    if (len > SIZE_MAX / 2) return NULL;
    jinja_value *v = jv_new(JV_STRING, len + 1);
    if (!v) return NULL;
    v->u.s.p = (char *)(v + 1);
    if (len) memcpy(v->u.s.p, s, len);
    v->u.s.p[len] = 0;
    v->u.s.len = len;
    return v;
}

jinja_value *jinja_string(const char *s, size_t len) { return jv_str(s, len); }
jinja_value *jv_cstr(const char *s) { return jv_str(s, strlen(s)); }

jinja_value *jv_undefined(const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof msg) n = sizeof msg - 1;
    jinja_value *v = jv_str(msg, (size_t)n);
    if (v) v->kind = JV_UNDEFINED;
    return v;
}

jinja_value *jinja_array(void) { return jv_new(JV_ARRAY, 0); }
jinja_value *jinja_object(void) { return jv_new(JV_OBJECT, 0); }

jinja_value *jv_callable_new(jc_kind kind) {
    jinja_value *v = jv_new(JV_CALLABLE, 0);
    if (v) v->u.c.kind = kind;
    return v;
}

bool jinja_is_object(const jinja_value *v) { return v && v->kind == JV_OBJECT; }

size_t jinja_array_len(const jinja_value *v) { return v && v->kind == JV_ARRAY ? v->u.a.len : 0; }

jinja_value *jinja_array_at(const jinja_value *v, size_t i) {
    return v && v->kind == JV_ARRAY && i < v->u.a.len ? v->u.a.v[i] : NULL;
}

bool jinja_string_value(const jinja_value *v, const char **s, size_t *len) {
    if (!v || v->kind != JV_STRING) return false;
    *s = v->u.s.p;
    *len = v->u.s.len;
    return true;
}

jinja_value *jinja_value_ref(jinja_value *v) {
    if (v && !(v->flags & JV_F_STATIC)) v->refs++;
    return v;
}

void jinja_value_free(jinja_value *v) {
    if (!v || (v->flags & JV_F_STATIC)) return;
    if (--v->refs > 0) return;
    if (v->kind == JV_ARRAY) {
        for (size_t i = 0; i < v->u.a.len; i++) jinja_value_free(v->u.a.v[i]);
        jmem_free(v->u.a.v, v->u.a.cap * sizeof *v->u.a.v);
    } else if (v->kind == JV_OBJECT) {
        for (size_t i = 0; i < v->u.o.len; i++) {
            jinja_value_free(v->u.o.e[i].key);
            jinja_value_free(v->u.o.e[i].val);
        }
        jmem_free(v->u.o.e, v->u.o.cap * sizeof *v->u.o.e);
    }
    jmem_free(v, v->bytes);
}

/* Records why a container refused a child, for the render's error message. */
static vt_status jv_refuse(vt_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static vt_status jv_refuse(vt_status st, const char *fmt, ...) {
    if (jinja_mem_current) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(jinja_mem_current->refused, sizeof jinja_mem_current->refused, fmt, ap);
        va_end(ap);
        jinja_mem_current->refused_status = st;
    }
    return st;
}

/* Whether container c may hold v, and c's nest and flags once it does (see
 * JV_NEST_MAX: the bound on depth, and no namespace inside a namespace). On a
 * refusal v is freed: the callers take over v whatever happens. */
static vt_status jv_adopt(jinja_value *c, jinja_value *v) {
    if (c->flags & JV_F_SCOPE) return VT_OK;
    bool is_ns = v->kind == JV_OBJECT && (v->flags & JV_F_NAMESPACE);
    bool holds_ns = is_ns || (v->flags & JV_F_HOLDS_NS);
    unsigned nest = (is_ns ? JV_NS_NEST : v->nest) + 1u;
    vt_status st = VT_OK;
    if (c->flags & JV_F_NAMESPACE) {
        if (holds_ns)
            st = jv_refuse(VT_E_INVALID, "a namespace cannot hold a namespace, nor a list or dict holding one");
        else if (nest >= JV_NS_NEST)
            st = jv_refuse(VT_E_RANGE, "RecursionError: a namespace's values nest deeper than %d levels",
                           JV_NS_NEST - 1);
    } else if (nest > JV_NEST_MAX) {
        st = jv_refuse(VT_E_RANGE, "RecursionError: values nest deeper than %d levels", JV_NEST_MAX);
    }
    if (st != VT_OK) {
        jinja_value_free(v);
        return st;
    }
    if (holds_ns) c->flags |= JV_F_HOLDS_NS;
    if (nest > c->nest) c->nest = (uint16_t)nest;
    return VT_OK;
}

vt_status jinja_array_push(jinja_value *arr, jinja_value *v) {
    if (!v) return VT_E_NOMEM;
    if (!arr || arr->kind != JV_ARRAY || (arr->flags & JV_F_STATIC)) {
        jinja_value_free(v);
        return VT_E_INVALID;
    }
    vt_status st = jv_adopt(arr, v);
    if (st != VT_OK) return st;
    if (arr->u.a.len == arr->u.a.cap) {
        size_t cap = arr->u.a.cap ? arr->u.a.cap * 2 : 4;
        jinja_value **p = jmem_realloc(arr->u.a.v, arr->u.a.cap * sizeof *p, cap * sizeof *p);
        if (!p) {
            jinja_value_free(v);
            return VT_E_NOMEM;
        }
        arr->u.a.v = p;
        arr->u.a.cap = cap;
    }
    arr->u.a.v[arr->u.a.len++] = v;
    return VT_OK;
}

jinja_value *jv_get_key(const jinja_value *obj, const char *key, size_t len) {
    if (!obj || obj->kind != JV_OBJECT) return NULL;
    for (size_t i = 0; i < obj->u.o.len; i++) {
        const jinja_value *k = obj->u.o.e[i].key;
        if (k->kind == JV_STRING && k->u.s.len == len && memcmp(k->u.s.p, key, len) == 0)
            return obj->u.o.e[i].val;
    }
    return NULL;
}

jinja_value *jv_get_key_value(const jinja_value *obj, const jinja_value *key) {
    if (key->kind == JV_STRING) return jv_get_key(obj, key->u.s.p, key->u.s.len);
    if (!obj || obj->kind != JV_OBJECT) return NULL;
    for (size_t i = 0; i < obj->u.o.len; i++)
        if (jv_equal(obj->u.o.e[i].key, key)) return obj->u.o.e[i].val;
    return NULL;
}

vt_status jv_object_set_value(jinja_value *obj, jinja_value *key, jinja_value *v) {
    if (!v) return VT_E_NOMEM;
    if (key->kind == JV_STRING) return jinja_object_set(obj, key->u.s.p, key->u.s.len, v);
    vt_status st = jv_adopt(obj, v);
    if (st != VT_OK) return st;
    for (size_t i = 0; i < obj->u.o.len; i++) {
        if (jv_equal(obj->u.o.e[i].key, key)) {
            jinja_value_free(obj->u.o.e[i].val);
            obj->u.o.e[i].val = v;
            return VT_OK;
        }
    }
    if (obj->u.o.len == obj->u.o.cap) {
        size_t cap = obj->u.o.cap ? obj->u.o.cap * 2 : 4;
        jv_entry *p = jmem_realloc(obj->u.o.e, obj->u.o.cap * sizeof *p, cap * sizeof *p);
        if (!p) {
            jinja_value_free(v);
            return VT_E_NOMEM;
        }
        obj->u.o.e = p;
        obj->u.o.cap = cap;
    }
    obj->u.o.e[obj->u.o.len].key = jinja_value_ref(key);
    obj->u.o.e[obj->u.o.len].val = v;
    obj->u.o.len++;
    return VT_OK;
}

jinja_value *jinja_object_get(const jinja_value *obj, const char *key, size_t key_len) {
    return jv_get_key(obj, key, key_len);
}

vt_status jinja_object_set(jinja_value *obj, const char *key, size_t key_len, jinja_value *v) {
    if (!v) return VT_E_NOMEM;
    if (!obj || obj->kind != JV_OBJECT || (obj->flags & JV_F_STATIC)) {
        jinja_value_free(v);
        return VT_E_INVALID;
    }
    vt_status st = jv_adopt(obj, v);
    if (st != VT_OK) return st;
    for (size_t i = 0; i < obj->u.o.len; i++) {
        jinja_value *k = obj->u.o.e[i].key;
        if (k->kind == JV_STRING && k->u.s.len == key_len && memcmp(k->u.s.p, key, key_len) == 0) {
            jinja_value_free(obj->u.o.e[i].val);
            obj->u.o.e[i].val = v;
            return VT_OK;
        }
    }
    if (obj->u.o.len == obj->u.o.cap) {
        size_t cap = obj->u.o.cap ? obj->u.o.cap * 2 : 4;
        jv_entry *p = jmem_realloc(obj->u.o.e, obj->u.o.cap * sizeof *p, cap * sizeof *p);
        if (!p) {
            jinja_value_free(v);
            return VT_E_NOMEM;
        }
        obj->u.o.e = p;
        obj->u.o.cap = cap;
    }
    jinja_value *k = jv_str(key, key_len);
    if (!k) {
        jinja_value_free(v);
        return VT_E_NOMEM;
    }
    obj->u.o.e[obj->u.o.len].key = k;
    obj->u.o.e[obj->u.o.len].val = v;
    obj->u.o.len++;
    return VT_OK;
}

bool jv_truthy(const jinja_value *v) {
    switch (v->kind) {
    case JV_UNDEFINED:
    case JV_NONE: return false;
    case JV_BOOL: return v->u.b;
    case JV_INT: return v->u.i != 0;
    case JV_FLOAT: return v->u.f != 0.0;
    case JV_STRING: return v->u.s.len != 0;
    case JV_ARRAY: return (v->flags & JV_F_GEN) || v->u.a.len != 0;
    case JV_OBJECT: return (v->flags & JV_F_NAMESPACE) || v->u.o.len != 0;
    default: return true;
    }
}

const char *jv_type_name(const jinja_value *v) {
    switch (v->kind) {
    case JV_UNDEFINED: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STRING: return "str";
    case JV_ARRAY:
        return (v->flags & JV_F_GEN) ? "generator" : (v->flags & JV_F_TUPLE) ? "tuple" : "list";
    case JV_OBJECT: return (v->flags & JV_F_NAMESPACE) ? "Namespace" : "dict";
    default: return "function";
    }
}

int64_t jv_utf8_len(const char *s, size_t len) {
    int64_t n = 0;
    for (size_t i = 0; i < len; i++) n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

/* ---- byte buffers ------------------------------------------------------------------ */

static bool jbuf_reserve(jbuf *b, size_t n) {
    if (b->failed) return false;
    if (n > SIZE_MAX / 4 || (b->limit && b->len + n > b->limit)) {
        b->failed = true;
        return false;
    }
    if (b->len + n + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = jmem_realloc(b->p, b->cap, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void jbuf_put(jbuf *b, const char *s, size_t n) {
    if (!jbuf_reserve(b, n)) return;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void jbuf_putc(jbuf *b, char c) { jbuf_put(b, &c, 1); }

void jbuf_printf(jbuf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) jbuf_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

void jbuf_release(jbuf *b) {
    jmem_free(b->p, b->cap);
    b->p = NULL;
    b->len = b->cap = 0;
}

jinja_value *jbuf_to_value(jbuf *b, uint8_t flags) {
    jinja_value *v = b->failed ? NULL : jv_str(b->p ? b->p : "", b->len);
    if (v) v->flags |= flags;
    jbuf_release(b);
    return v;
}

/* ---- str / repr / json --------------------------------------------------------------- */

void jv_float_repr(jbuf *b, double f) {
    if (isnan(f)) {
        jbuf_put(b, "nan", 3);
        return;
    }
    if (isinf(f)) {
        if (f < 0) jbuf_putc(b, '-');
        jbuf_put(b, "inf", 3);
        return;
    }
    /* Shortest digits that read back to f (Python's repr), then Python's layout:
     * positional for 1e-4 <= |f| < 1e16, else d.ddde+XX. */
    char tmp[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    char digits[24];
    int nd = 0;
    const char *p = tmp;
    bool neg = *p == '-';
    if (neg) p++;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    int exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    if (neg) jbuf_putc(b, '-');
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 < 0) {
            jbuf_put(b, "0.", 2);
            for (int i = 0; i < -exp10 - 1; i++) jbuf_putc(b, '0');
            jbuf_put(b, digits, (size_t)nd);
        } else {
            for (int i = 0; i <= exp10; i++) jbuf_putc(b, i < nd ? digits[i] : '0');
            jbuf_putc(b, '.');
            if (nd > exp10 + 1)
                jbuf_put(b, digits + exp10 + 1, (size_t)(nd - exp10 - 1));
            else
                jbuf_putc(b, '0');
        }
        return;
    }
    jbuf_putc(b, digits[0]);
    if (nd > 1) {
        jbuf_putc(b, '.');
        jbuf_put(b, digits + 1, (size_t)(nd - 1));
    }
    jbuf_printf(b, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
}

/* Decodes one UTF-8 sequence at s[*i] (advancing *i); invalid bytes decode as
 * themselves (U+0080..U+00FF), which keeps the output byte-faithful. */
static uint32_t utf8_next(const char *s, size_t len, size_t *i) {
    const unsigned char *u = (const unsigned char *)s;
    uint32_t c = u[*i];
    int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
    if (n <= 0 || *i + (size_t)n >= len) {
        (*i)++;
        return c;
    }
    uint32_t cp = c & (0x3F >> n);
    for (int k = 1; k <= n; k++) {
        if ((u[*i + (size_t)k] & 0xC0) != 0x80) {
            (*i)++;
            return c;
        }
        cp = (cp << 6) | (u[*i + (size_t)k] & 0x3F);
    }
    *i += (size_t)n + 1;
    return cp;
}

static void repr_str(jbuf *b, const char *s, size_t len) {
    bool has_sq = memchr(s, '\'', len) != NULL, has_dq = memchr(s, '"', len) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    jbuf_putc(b, q);
    size_t i = 0;
    while (i < len) {
        size_t start = i;
        uint32_t c = utf8_next(s, len, &i);
        if (c == (uint32_t)q || c == '\\') {
            jbuf_putc(b, '\\');
            jbuf_putc(b, (char)c);
        } else if (c == '\n') {
            jbuf_put(b, "\\n", 2);
        } else if (c == '\r') {
            jbuf_put(b, "\\r", 2);
        } else if (c == '\t') {
            jbuf_put(b, "\\t", 2);
        } else if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) {
            jbuf_printf(b, "\\x%02x", c);
        } else if (c == 0x2028 || c == 0x2029) {
            jbuf_printf(b, "\\u%04x", c);
        } else {
            jbuf_put(b, s + start, i - start);
        }
    }
    jbuf_putc(b, q);
}

static void seq_str(jbuf *b, const jinja_value *v) {
    if (v->flags & JV_F_GEN) {
        jbuf_put(b, "<generator object>", 18);
        return;
    }
    bool tuple = v->flags & JV_F_TUPLE;
    jbuf_putc(b, tuple ? '(' : '[');
    for (size_t i = 0; i < v->u.a.len; i++) {
        if (i) jbuf_put(b, ", ", 2);
        jv_repr(b, v->u.a.v[i]);
    }
    if (tuple && v->u.a.len == 1) jbuf_putc(b, ',');
    jbuf_putc(b, tuple ? ')' : ']');
}

void jv_repr(jbuf *b, const jinja_value *v) {
    switch (v->kind) {
    case JV_STRING: repr_str(b, v->u.s.p, v->u.s.len); return;
    case JV_ARRAY: seq_str(b, v); return;
    case JV_OBJECT:
        if (v->flags & JV_F_NAMESPACE) jbuf_put(b, "<Namespace ", 11);
        jbuf_putc(b, '{');
        for (size_t i = 0; i < v->u.o.len; i++) {
            if (i) jbuf_put(b, ", ", 2);
            jv_repr(b, v->u.o.e[i].key);
            jbuf_put(b, ": ", 2);
            jv_repr(b, v->u.o.e[i].val);
        }
        jbuf_putc(b, '}');
        if (v->flags & JV_F_NAMESPACE) jbuf_putc(b, '>');
        return;
    default: jv_to_str(b, v); return;
    }
}

void jv_to_str(jbuf *b, const jinja_value *v) {
    switch (v->kind) {
    case JV_UNDEFINED: return;
    case JV_NONE: jbuf_put(b, "None", 4); return;
    case JV_BOOL: v->u.b ? jbuf_put(b, "True", 4) : jbuf_put(b, "False", 5); return;
    case JV_INT: jbuf_printf(b, "%lld", (long long)v->u.i); return;
    case JV_FLOAT: jv_float_repr(b, v->u.f); return;
    case JV_STRING: jbuf_put(b, v->u.s.p, v->u.s.len); return;
    case JV_ARRAY:
    case JV_OBJECT: jv_repr(b, v); return;
    default: jbuf_put(b, "<function>", 10); return;
    }
}

static void json_str(jbuf *b, const char *s, size_t len, bool ensure_ascii) {
    jbuf_putc(b, '"');
    size_t i = 0;
    while (i < len) {
        size_t start = i;
        uint32_t c = utf8_next(s, len, &i);
        switch (c) {
        case '"': jbuf_put(b, "\\\"", 2); break;
        case '\\': jbuf_put(b, "\\\\", 2); break;
        case '\n': jbuf_put(b, "\\n", 2); break;
        case '\r': jbuf_put(b, "\\r", 2); break;
        case '\t': jbuf_put(b, "\\t", 2); break;
        case '\b': jbuf_put(b, "\\b", 2); break;
        case '\f': jbuf_put(b, "\\f", 2); break;
        default:
            if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
                if (c >= 0x10000) {
                    uint32_t x = c - 0x10000;
                    jbuf_printf(b, "\\u%04x\\u%04x", 0xD800 + (x >> 10), 0xDC00 + (x & 0x3FF));
                } else {
                    jbuf_printf(b, "\\u%04x", c);
                }
            } else {
                jbuf_put(b, s + start, i - start);
            }
        }
    }
    jbuf_putc(b, '"');
}

typedef struct json_opts {
    bool ensure_ascii, sort_keys;
    int indent;
    const char *item_sep, *key_sep;
    char *err;
    size_t err_cap;
} json_opts;

static void json_newline(jbuf *b, const json_opts *o, int level) {
    jbuf_putc(b, '\n');
    for (int i = 0; i < o->indent * level; i++) jbuf_putc(b, ' ');
}

static int key_cmp(const void *x, const void *y) {
    const jv_entry *a = *(const jv_entry *const *)x, *c = *(const jv_entry *const *)y;
    if (a->key->kind != JV_STRING || c->key->kind != JV_STRING) {
        int r = 0;
        jv_compare(a->key, c->key, &r);
        return r;
    }
    size_t n = a->key->u.s.len < c->key->u.s.len ? a->key->u.s.len : c->key->u.s.len;
    int r = memcmp(a->key->u.s.p, c->key->u.s.p, n);
    if (r) return r;
    return a->key->u.s.len < c->key->u.s.len ? -1 : a->key->u.s.len > c->key->u.s.len;
}

static bool json_value(jbuf *b, const jinja_value *v, const json_opts *o, int level) {
    if (level > 200) {
        snprintf(o->err, o->err_cap, "RecursionError: maximum recursion depth exceeded");
        return false;
    }
    switch (v->kind) {
    case JV_NONE: jbuf_put(b, "null", 4); return true;
    case JV_BOOL: v->u.b ? jbuf_put(b, "true", 4) : jbuf_put(b, "false", 5); return true;
    case JV_INT: jbuf_printf(b, "%lld", (long long)v->u.i); return true;
    case JV_FLOAT:
        if (isnan(v->u.f)) jbuf_put(b, "NaN", 3);
        else if (isinf(v->u.f)) v->u.f < 0 ? jbuf_put(b, "-Infinity", 9) : jbuf_put(b, "Infinity", 8);
        else jv_float_repr(b, v->u.f);
        return true;
    case JV_STRING: json_str(b, v->u.s.p, v->u.s.len, o->ensure_ascii); return true;
    case JV_ARRAY:
        if (v->flags & JV_F_GEN) break;
        if (v->u.a.len == 0) {
            jbuf_put(b, "[]", 2);
            return true;
        }
        jbuf_putc(b, '[');
        for (size_t i = 0; i < v->u.a.len; i++) {
            if (i) jbuf_put(b, o->item_sep, strlen(o->item_sep));
            if (o->indent >= 0) json_newline(b, o, level + 1);
            if (!json_value(b, v->u.a.v[i], o, level + 1)) return false;
        }
        if (o->indent >= 0) json_newline(b, o, level);
        jbuf_putc(b, ']');
        return true;
    case JV_OBJECT: {
        if (v->flags & JV_F_NAMESPACE) break;
        if (v->u.o.len == 0) {
            jbuf_put(b, "{}", 2);
            return true;
        }
        const jv_entry **order = jmem_alloc(v->u.o.len * sizeof *order);
        if (!order) {
            b->failed = true;
            return true;
        }
        for (size_t i = 0; i < v->u.o.len; i++) order[i] = &v->u.o.e[i];
        if (o->sort_keys) qsort(order, v->u.o.len, sizeof *order, key_cmp);
        jbuf_putc(b, '{');
        bool ok = true;
        for (size_t i = 0; i < v->u.o.len && ok; i++) {
            if (i) jbuf_put(b, o->item_sep, strlen(o->item_sep));
            if (o->indent >= 0) json_newline(b, o, level + 1);
            const jinja_value *k = order[i]->key;
            if (k->kind == JV_STRING) {
                json_str(b, k->u.s.p, k->u.s.len, o->ensure_ascii);
            } else {
                /* json.dumps turns int, float, bool and None keys into strings */
                jbuf_putc(b, '"');
                if (k->kind == JV_BOOL) k->u.b ? jbuf_put(b, "true", 4) : jbuf_put(b, "false", 5);
                else if (k->kind == JV_NONE) jbuf_put(b, "null", 4);
                else jv_to_str(b, k);
                jbuf_putc(b, '"');
            }
            jbuf_put(b, o->key_sep, strlen(o->key_sep));
            ok = json_value(b, order[i]->val, o, level + 1);
        }
        jmem_free(order, v->u.o.len * sizeof *order);
        if (!ok) return false;
        if (o->indent >= 0) json_newline(b, o, level);
        jbuf_putc(b, '}');
        return true;
    }
    default: break;
    }
    snprintf(o->err, o->err_cap, "TypeError: Object of type %s is not JSON serializable",
             jv_type_name(v));
    return false;
}

bool jv_to_json(jbuf *b, const jinja_value *v, bool ensure_ascii, int indent, const char *item_sep,
                const char *key_sep, bool sort_keys, char *err, size_t err_cap) {
    json_opts o = {.ensure_ascii = ensure_ascii, .sort_keys = sort_keys, .indent = indent,
                   .item_sep = item_sep ? item_sep : (indent >= 0 ? "," : ", "),
                   .key_sep = key_sep ? key_sep : ": ", .err = err, .err_cap = err_cap};
    return json_value(b, v, &o, 0);
}

/* ---- equality and order ------------------------------------------------------------- */

static bool jv_is_number(const jinja_value *v) {
    return v->kind == JV_INT || v->kind == JV_FLOAT || v->kind == JV_BOOL;
}

static double jv_num(const jinja_value *v) {
    return v->kind == JV_FLOAT ? v->u.f : v->kind == JV_INT ? (double)v->u.i : (double)v->u.b;
}

bool jv_equal(const jinja_value *a, const jinja_value *b) {
    if (jv_is_number(a) && jv_is_number(b)) {
        if (a->kind != JV_FLOAT && b->kind != JV_FLOAT) {
            int64_t x = a->kind == JV_INT ? a->u.i : a->u.b, y = b->kind == JV_INT ? b->u.i : b->u.b;
            return x == y;
        }
        return jv_num(a) == jv_num(b);
    }
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case JV_UNDEFINED:
    case JV_NONE: return true;
    case JV_STRING: return a->u.s.len == b->u.s.len && !memcmp(a->u.s.p, b->u.s.p, a->u.s.len);
    case JV_ARRAY:
        if ((a->flags | b->flags) & JV_F_GEN) return a == b;
        if ((a->flags & JV_F_TUPLE) != (b->flags & JV_F_TUPLE)) return false;
        if (a->u.a.len != b->u.a.len) return false;
        for (size_t i = 0; i < a->u.a.len; i++)
            if (!jv_equal(a->u.a.v[i], b->u.a.v[i])) return false;
        return true;
    case JV_OBJECT:
        if ((a->flags | b->flags) & JV_F_NAMESPACE) return a == b;
        if (a->u.o.len != b->u.o.len) return false;
        for (size_t i = 0; i < a->u.o.len; i++) {
            const jinja_value *o = jv_get_key_value(b, a->u.o.e[i].key);
            if (!o || !jv_equal(a->u.o.e[i].val, o)) return false;
        }
        return true;
    default: return a == b;
    }
}

bool jv_compare(const jinja_value *a, const jinja_value *b, int *out) {
    if (jv_is_number(a) && jv_is_number(b)) {
        if (a->kind != JV_FLOAT && b->kind != JV_FLOAT) {
            int64_t x = a->kind == JV_INT ? a->u.i : a->u.b, y = b->kind == JV_INT ? b->u.i : b->u.b;
            *out = x < y ? -1 : x > y;
        } else {
            double x = jv_num(a), y = jv_num(b);
            *out = x < y ? -1 : x > y;
        }
        return true;
    }
    if (a->kind == JV_STRING && b->kind == JV_STRING) {
        size_t n = a->u.s.len < b->u.s.len ? a->u.s.len : b->u.s.len;
        int r = memcmp(a->u.s.p, b->u.s.p, n);
        *out = r ? (r < 0 ? -1 : 1) : a->u.s.len < b->u.s.len ? -1 : a->u.s.len > b->u.s.len;
        return true;
    }
    if (a->kind == JV_ARRAY && b->kind == JV_ARRAY && !((a->flags | b->flags) & JV_F_GEN) &&
        (a->flags & JV_F_TUPLE) == (b->flags & JV_F_TUPLE)) {
        for (size_t i = 0; i < a->u.a.len && i < b->u.a.len; i++) {
            if (jv_equal(a->u.a.v[i], b->u.a.v[i])) continue;
            return jv_compare(a->u.a.v[i], b->u.a.v[i], out);
        }
        *out = a->u.a.len < b->u.a.len ? -1 : a->u.a.len > b->u.a.len;
        return true;
    }
    return false;
}

/* ---- JSON parser --------------------------------------------------------------------- */

typedef struct jparse {
    const char *s;
    size_t len, pos;
    int depth;
} jparse;

static void jp_ws(jparse *p) {
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
                               p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
        p->pos++;
}

static int hex4(const char *s) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return -1;
    }
    return v;
}

static void put_utf8(jbuf *b, uint32_t c) {
    char t[4];
    if (c < 0x80) {
        jbuf_putc(b, (char)c);
    } else if (c < 0x800) {
        t[0] = (char)(0xC0 | (c >> 6)), t[1] = (char)(0x80 | (c & 0x3F));
        jbuf_put(b, t, 2);
    } else if (c < 0x10000) {
        t[0] = (char)(0xE0 | (c >> 12)), t[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        t[2] = (char)(0x80 | (c & 0x3F));
        jbuf_put(b, t, 3);
    } else {
        t[0] = (char)(0xF0 | (c >> 18)), t[1] = (char)(0x80 | ((c >> 12) & 0x3F));
        t[2] = (char)(0x80 | ((c >> 6) & 0x3F)), t[3] = (char)(0x80 | (c & 0x3F));
        jbuf_put(b, t, 4);
    }
}

static jinja_value *jp_string(jparse *p) {
    jbuf b = {0};
    p->pos++; /* the opening quote */
    while (p->pos < p->len && p->s[p->pos] != '"') {
        char c = p->s[p->pos++];
        if ((unsigned char)c < 0x20) goto fail;
        if (c != '\\') {
            jbuf_putc(&b, c);
            continue;
        }
        if (p->pos >= p->len) goto fail;
        c = p->s[p->pos++];
        switch (c) {
        case '"': case '\\': case '/': jbuf_putc(&b, c); break;
        case 'b': jbuf_putc(&b, '\b'); break;
        case 'f': jbuf_putc(&b, '\f'); break;
        case 'n': jbuf_putc(&b, '\n'); break;
        case 'r': jbuf_putc(&b, '\r'); break;
        case 't': jbuf_putc(&b, '\t'); break;
        case 'u': {
            if (p->pos + 4 > p->len) goto fail;
            int u = hex4(p->s + p->pos);
            if (u < 0) goto fail;
            p->pos += 4;
            uint32_t cp = (uint32_t)u;
            if (u >= 0xD800 && u < 0xDC00 && p->pos + 6 <= p->len && p->s[p->pos] == '\\' &&
                p->s[p->pos + 1] == 'u') {
                int lo = hex4(p->s + p->pos + 2);
                if (lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + (((uint32_t)u - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                    p->pos += 6;
                }
            }
            put_utf8(&b, cp);
            break;
        }
        default: goto fail;
        }
    }
    if (p->pos >= p->len) goto fail;
    p->pos++;
    return jbuf_to_value(&b, 0);
fail:
    jbuf_release(&b);
    return NULL;
}

static jinja_value *jp_value(jparse *p) {
    jp_ws(p);
    if (p->pos >= p->len || ++p->depth > 256) return NULL;
    jinja_value *v = NULL;
    char c = p->s[p->pos];
    if (c == '"') {
        v = jp_string(p);
    } else if (c == '{') {
        p->pos++;
        v = jinja_object();
        jp_ws(p);
        if (v && p->pos < p->len && p->s[p->pos] == '}') {
            p->pos++;
        } else {
            while (v) {
                jp_ws(p);
                if (p->pos >= p->len || p->s[p->pos] != '"') goto fail;
                jinja_value *k = jp_string(p);
                if (!k) goto fail;
                jp_ws(p);
                if (p->pos >= p->len || p->s[p->pos] != ':') {
                    jinja_value_free(k);
                    goto fail;
                }
                p->pos++;
                jinja_value *x = jp_value(p);
                vt_status st = x ? jinja_object_set(v, k->u.s.p, k->u.s.len, x) : VT_E_FORMAT;
                jinja_value_free(k);
                if (st != VT_OK) goto fail;
                jp_ws(p);
                if (p->pos < p->len && p->s[p->pos] == ',') {
                    p->pos++;
                    continue;
                }
                if (p->pos < p->len && p->s[p->pos] == '}') {
                    p->pos++;
                    break;
                }
                goto fail;
            }
        }
    } else if (c == '[') {
        p->pos++;
        v = jinja_array();
        jp_ws(p);
        if (v && p->pos < p->len && p->s[p->pos] == ']') {
            p->pos++;
        } else {
            while (v) {
                jinja_value *x = jp_value(p);
                if (!x || jinja_array_push(v, x) != VT_OK) goto fail;
                jp_ws(p);
                if (p->pos < p->len && p->s[p->pos] == ',') {
                    p->pos++;
                    continue;
                }
                if (p->pos < p->len && p->s[p->pos] == ']') {
                    p->pos++;
                    break;
                }
                goto fail;
            }
        }
    } else if (p->len - p->pos >= 4 && !memcmp(p->s + p->pos, "true", 4)) {
        p->pos += 4;
        v = jinja_bool(true);
    } else if (p->len - p->pos >= 5 && !memcmp(p->s + p->pos, "false", 5)) {
        p->pos += 5;
        v = jinja_bool(false);
    } else if (p->len - p->pos >= 4 && !memcmp(p->s + p->pos, "null", 4)) {
        p->pos += 4;
        v = jinja_none();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        size_t start = p->pos;
        bool is_float = false;
        if (p->s[p->pos] == '-') p->pos++;
        while (p->pos < p->len) {
            char d = p->s[p->pos];
            if (d >= '0' && d <= '9') {
            } else if (d == '.' || d == 'e' || d == 'E' ||
                       ((d == '+' || d == '-') && (p->s[p->pos - 1] == 'e' || p->s[p->pos - 1] == 'E'))) {
                is_float = true;
            } else {
                break;
            }
            p->pos++;
        }
        char tmp[64];
        size_t n = p->pos - start;
        if (n == 0 || n >= sizeof tmp) return NULL;
        memcpy(tmp, p->s + start, n);
        tmp[n] = 0;
        char *end;
        if (!is_float) {
            long long x = strtoll(tmp, &end, 10);
            if (*end == 0 && x != LLONG_MAX && x != LLONG_MIN) v = jinja_int(x);
            else is_float = true;
        }
        if (is_float) {
            double f = strtod(tmp, &end);
            if (*end != 0) return NULL;
            v = jinja_float(f);
        }
    }
    p->depth--;
    return v;
fail:
    jinja_value_free(v);
    return NULL;
}

vt_status jinja_value_from_json(const char *json, size_t len, jinja_value **out) {
    jparse p = {.s = json, .len = len};
    jinja_value *v = jp_value(&p);
    jp_ws(&p);
    if (!v || p.pos != len) {
        jinja_value_free(v);
        *out = NULL;
        return vt_errorf(VT_E_FORMAT, "JSON: syntax error near byte %zu", p.pos);
    }
    *out = v;
    return VT_OK;
}
