/* The evaluator: walks the syntax tree with Python's semantics, as Jinja2 compiles
 * it, inside the limits of the render (steps, depth, output, memory).
 *
 * Scopes: the root frame holds the template's variables and what top-level `set`
 * and `macro` define; each for-loop iteration runs in a fresh child frame (a `set`
 * inside a loop does not outlive the iteration, which is why templates use
 * namespace()); a macro call runs in a child of the root frame, so a macro sees the
 * template's variables as they are when it is called. */
#include "jinja/jinja_impl.h"

#include "base/status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EX_OK, EX_ERR, EX_BREAK, EX_CONTINUE };

jinja_value *jctx_fail(jctx *cx, vt_status st, const char *fmt, ...) {
    if (cx->failed) return NULL;
    cx->failed = true;
    cx->status = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cx->err, sizeof cx->err, fmt, ap);
    va_end(ap);
    return NULL;
}

jinja_value *jctx_nomem(jctx *cx) {
    jmem *m = jinja_mem_current;
    if (m && m->refused[0]) {
        jctx_fail(cx, m->refused_status, "%s", m->refused);
        m->refused[0] = 0;
        return NULL;
    }
    if (m && m->oom)
        return jctx_fail(cx, VT_E_NOMEM, "out of memory");
    return jctx_fail(cx, VT_E_RANGE, "the template used more than %zu bytes of memory",
                     cx->lim.max_memory);
}

bool jctx_step(jctx *cx) {
    if (cx->failed) return false;
    if (++cx->steps > cx->lim.max_steps) {
        jctx_fail(cx, VT_E_RANGE, "the template ran more than %lld steps", (long long)cx->lim.max_steps);
        return false;
    }
    if (jinja_mem_current && jinja_mem_current->exceeded) {
        jctx_nomem(cx);
        return false;
    }
    return true;
}

jinja_value *jv_str_of(const jinja_value *v) {
    if (v->kind == JV_STRING) {
        jinja_value *s = jv_str(v->u.s.p, v->u.s.len);
        return s;
    }
    jbuf b = {0};
    jv_to_str(&b, v);
    return jbuf_to_value(&b, 0);
}

static jinja_value *fail_undefined(jctx *cx, const jinja_value *u) {
    return jctx_fail(cx, VT_E_INVALID, "%s", u->u.s.p);
}

/* ---- frames -------------------------------------------------------------------------- */

static jframe *frame_push(jctx *cx, jframe *parent) {
    jframe *f = jmem_alloc(sizeof *f);
    if (!f) return NULL;
    f->vars = jinja_object();
    if (!f->vars) {
        jmem_free(f, sizeof *f);
        return NULL;
    }
    f->vars->flags |= JV_F_SCOPE;
    f->parent = parent;
    f->below = cx->top;
    f->id = ++cx->frame_ids;
    cx->top = f;
    return f;
}

static void frame_pop(jctx *cx, jframe *f) {
    cx->top = f->below;
    jinja_value_free(f->vars);
    jmem_free(f, sizeof *f);
}

/* Whether a caller's call block is still running: a caller stored in a namespace
 * can be called after it ended, when its scope is gone. */
static bool frame_alive(const jctx *cx, const jframe *f, uint64_t id) {
    for (const jframe *g = cx->top; g; g = g->below)
        if (g == f && g->id == id) return true;
    return false;
}

static bool frame_set(jctx *cx, jframe *f, const char *name, jinja_value *v) {
    if (!v) return false;
    if (jinja_object_set(f->vars, name, strlen(name), v) != VT_OK) {
        jctx_nomem(cx);
        return false;
    }
    return true;
}

jinja_value *jframe_lookup(jctx *cx, jframe *f, const char *name) {
    size_t len = strlen(name);
    for (; f; f = f->parent) {
        jinja_value *v = jv_get_key(f->vars, name, len);
        if (v) return jinja_value_ref(v);
    }
    int g = jbuiltin_global_find(name);
    if (g >= 0) {
        jinja_value *c = jv_callable_new(JC_GLOBAL);
        if (c) c->u.c.global = g;
        return c ? c : jctx_nomem(cx);
    }
    jinja_value *u = jv_undefined("'%s' is undefined", name);
    return u ? u : jctx_nomem(cx);
}

/* ---- attribute and item access ----------------------------------------------------------- */

static const char *obj_desc(const jinja_value *v) {
    switch (v->kind) {
    case JV_OBJECT: return (v->flags & JV_F_NAMESPACE) ? "Namespace object" : "dict object";
    case JV_ARRAY: return (v->flags & JV_F_TUPLE) ? "tuple object" : "list object";
    case JV_STRING: return "str object";
    case JV_INT: return "int object";
    case JV_FLOAT: return "float object";
    case JV_BOOL: return "bool object";
    case JV_NONE: return "None";
    default: return "object";
    }
}

jinja_value *jget_attr(jctx *cx, jinja_value *obj, const char *name, size_t len) {
    if (obj->kind == JV_UNDEFINED) return fail_undefined(cx, obj);
    if (obj->kind == JV_OBJECT) {
        jinja_value *v = jv_get_key(obj, name, len);
        if (v) return jinja_value_ref(v);
    }
    jinja_value *u = jv_undefined("'%s' has no attribute '%.*s'", obj_desc(obj), (int)len, name);
    return u ? u : jctx_nomem(cx);
}

/* A Python index into n items; false when out of range. */
static bool py_index(int64_t i, size_t n, size_t *out) {
    if (i < 0) i += (int64_t)n;
    if (i < 0 || (uint64_t)i >= n) return false;
    *out = (size_t)i;
    return true;
}

/* Byte offset of code point k in s (k <= number of code points). */
static size_t utf8_offset(const char *s, size_t len, int64_t k) {
    size_t i = 0;
    while (i < len && k > 0) {
        i++;
        while (i < len && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
        k--;
    }
    return i;
}

jinja_value *jget_item(jctx *cx, jinja_value *obj, jinja_value *key) {
    if (obj->kind == JV_UNDEFINED) return fail_undefined(cx, obj);
    if (key->kind == JV_STRING) return jget_attr(cx, obj, key->u.s.p, key->u.s.len);
    if (obj->kind == JV_OBJECT) {
        jinja_value *v = jv_get_key_value(obj, key);
        if (v) return jinja_value_ref(v);
    }
    if ((key->kind == JV_INT || key->kind == JV_BOOL) && !(obj->flags & JV_F_GEN)) {
        int64_t i = key->kind == JV_INT ? key->u.i : key->u.b;
        size_t at;
        if (obj->kind == JV_ARRAY && py_index(i, obj->u.a.len, &at))
            return jinja_value_ref(obj->u.a.v[at]);
        if (obj->kind == JV_STRING) {
            int64_t n = jv_utf8_len(obj->u.s.p, obj->u.s.len);
            if (py_index(i, (size_t)n, &at)) {
                size_t b0 = utf8_offset(obj->u.s.p, obj->u.s.len, (int64_t)at);
                size_t b1 = utf8_offset(obj->u.s.p, obj->u.s.len, (int64_t)at + 1);
                jinja_value *s = jv_str(obj->u.s.p + b0, b1 - b0);
                return s ? s : jctx_nomem(cx);
            }
        }
    }
    jbuf b = {0};
    jv_repr(&b, key);
    jinja_value *u = jv_undefined("'%s' has no attribute '%s'", obj_desc(obj), b.p ? b.p : "");
    jbuf_release(&b);
    return u ? u : jctx_nomem(cx);
}

jinja_value *jiterate(jctx *cx, jinja_value *v) {
    switch (v->kind) {
    case JV_ARRAY: return jinja_value_ref(v);
    case JV_UNDEFINED: {
        jinja_value *a = jinja_array();
        return a ? a : jctx_nomem(cx);
    }
    case JV_OBJECT: {
        jinja_value *a = jinja_array();
        for (size_t i = 0; a && i < v->u.o.len; i++)
            if (jinja_array_push(a, jinja_value_ref(v->u.o.e[i].key)) != VT_OK) {
                jinja_value_free(a);
                a = NULL;
            }
        return a ? a : jctx_nomem(cx);
    }
    case JV_STRING: {
        jinja_value *a = jinja_array();
        size_t i = 0;
        while (a && i < v->u.s.len) {
            size_t j = i + 1;
            while (j < v->u.s.len && ((unsigned char)v->u.s.p[j] & 0xC0) == 0x80) j++;
            if (jinja_array_push(a, jv_str(v->u.s.p + i, j - i)) != VT_OK) {
                jinja_value_free(a);
                a = NULL;
            }
            i = j;
        }
        return a ? a : jctx_nomem(cx);
    }
    default:
        return jctx_fail(cx, VT_E_INVALID, "TypeError: '%s' object is not iterable", jv_type_name(v));
    }
}

static jinja_value *eval_slice(jctx *cx, jinja_value *obj, const jnode *n) {
    int64_t part[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int k = 0; k < 3; k++) {
        if (!n->args[k]) continue;
        jinja_value *v = jeval(cx, n->args[k]);
        if (!v) return NULL;
        if (v->kind == JV_INT || v->kind == JV_BOOL) {
            part[k] = v->kind == JV_INT ? v->u.i : v->u.b;
            given[k] = true;
        } else if (v->kind != JV_NONE) {
            jinja_value_free(v);
            return jctx_fail(cx, VT_E_INVALID, "TypeError: slice indices must be integers or None");
        }
        jinja_value_free(v);
    }
    if (obj->kind == JV_UNDEFINED) return fail_undefined(cx, obj);
    if (part[2] == 0) return jctx_fail(cx, VT_E_INVALID, "ValueError: slice step cannot be zero");
    bool is_str = obj->kind == JV_STRING;
    if (!is_str && (obj->kind != JV_ARRAY || (obj->flags & JV_F_GEN))) {
        jinja_value *u = jv_undefined("'%s' has no attribute 'slice'", obj_desc(obj));
        return u ? u : jctx_nomem(cx);
    }
    /* strings slice by code point: split into characters first */
    jinja_value *items = is_str ? jiterate(cx, obj) : jinja_value_ref(obj);
    if (!items) return NULL;
    int64_t len = (int64_t)items->u.a.len, step = part[2], start, stop;
    if (step > 0) {
        start = given[0] ? part[0] : 0;
        stop = given[1] ? part[1] : len;
        if (start < 0) start = start + len < 0 ? 0 : start + len;
        if (start > len) start = len;
        if (stop < 0) stop = stop + len < 0 ? 0 : stop + len;
        if (stop > len) stop = len;
    } else {
        start = given[0] ? part[0] : len - 1;
        stop = given[1] ? part[1] : -1 - len;
        if (start < 0) start = start + len < 0 ? -1 : start + len;
        if (start >= len) start = len - 1;
        if (stop < 0) stop = stop + len < 0 ? -1 : stop + len;
        if (stop >= len) stop = len - 1;
    }
    jinja_value *out = NULL;
    if (is_str) {
        jbuf b = {0};
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
            jbuf_put(&b, items->u.a.v[i]->u.s.p, items->u.a.v[i]->u.s.len);
        out = jbuf_to_value(&b, obj->flags & JV_F_SAFE);
    } else {
        out = jinja_array();
        if (out) out->flags = obj->flags & JV_F_TUPLE;
        for (int64_t i = start; out && (step > 0 ? i < stop : i > stop); i += step)
            if (jinja_array_push(out, jinja_value_ref(items->u.a.v[i])) != VT_OK) {
                jinja_value_free(out);
                out = NULL;
            }
    }
    jinja_value_free(items);
    return out ? out : jctx_nomem(cx);
}

/* ---- operators ------------------------------------------------------------------------------ */

static bool is_num(const jinja_value *v) {
    return v->kind == JV_INT || v->kind == JV_FLOAT || v->kind == JV_BOOL;
}
static double num(const jinja_value *v) {
    return v->kind == JV_FLOAT ? v->u.f : v->kind == JV_INT ? (double)v->u.i : (double)v->u.b;
}
static int64_t ival(const jinja_value *v) { return v->kind == JV_INT ? v->u.i : v->u.b; }

static const char *op_str(jop op) {
    static const char *const s[] = {"+", "-", "*", "/", "//", "%", "**", "~",
                                    "==", "!=", "<", "<=", ">", ">=", "in", "not in"};
    return s[op];
}

static void html_escape(jbuf *b, const jinja_value *v) {
    if (v->kind != JV_STRING || (v->flags & JV_F_SAFE)) {
        jv_to_str(b, v);
        return;
    }
    for (size_t i = 0; i < v->u.s.len; i++) {
        char c = v->u.s.p[i];
        switch (c) {
        case '&': jbuf_put(b, "&amp;", 5); break;
        case '<': jbuf_put(b, "&lt;", 4); break;
        case '>': jbuf_put(b, "&gt;", 4); break;
        case '"': jbuf_put(b, "&#34;", 5); break;
        case '\'': jbuf_put(b, "&#39;", 5); break;
        default: jbuf_putc(b, c);
        }
    }
}

static jinja_value *type_error(jctx *cx, jop op, const jinja_value *a, const jinja_value *b) {
    if (op == OP_ADD && (a->kind == JV_STRING || a->kind == JV_ARRAY))
        return jctx_fail(cx, VT_E_INVALID, "TypeError: can only concatenate %s (not \"%s\") to %s",
                         jv_type_name(a), jv_type_name(b), jv_type_name(a));
    if (op >= OP_LT && op <= OP_GE)
        return jctx_fail(cx, VT_E_INVALID,
                         "TypeError: '%s' not supported between instances of '%s' and '%s'",
                         op_str(op), jv_type_name(a), jv_type_name(b));
    return jctx_fail(cx, VT_E_INVALID, "TypeError: unsupported operand type(s) for %s: '%s' and '%s'",
                     op_str(op), jv_type_name(a), jv_type_name(b));
}

static jinja_value *repeat(jctx *cx, const jinja_value *seq, int64_t times) {
    if (times < 0) times = 0;
    size_t unit = seq->kind == JV_STRING ? seq->u.s.len : seq->u.a.len;
    if (unit && (uint64_t)times > (cx->lim.max_memory / unit))
        return jctx_fail(cx, VT_E_RANGE, "the template used more than %zu bytes of memory",
                         cx->lim.max_memory);
    if (seq->kind == JV_STRING) {
        jbuf b = {0};
        for (int64_t i = 0; i < times && !b.failed; i++) jbuf_put(&b, seq->u.s.p, seq->u.s.len);
        jinja_value *r = jbuf_to_value(&b, seq->flags & JV_F_SAFE);
        return r ? r : jctx_nomem(cx);
    }
    jinja_value *r = jinja_array();
    if (r) r->flags = seq->flags & JV_F_TUPLE;
    for (int64_t i = 0; r && i < times; i++)
        for (size_t k = 0; r && k < seq->u.a.len; k++)
            if (jinja_array_push(r, jinja_value_ref(seq->u.a.v[k])) != VT_OK) {
                jinja_value_free(r);
                r = NULL;
            }
    return r ? r : jctx_nomem(cx);
}

/* Python's printf-style `str % args` for the conversions templates use. */
jinja_value *jv_str_percent(jctx *cx, const jinja_value *fmt, const jinja_value *args) {
    jbuf b = {0};
    size_t ai = 0;
    const jinja_value *single = args;
    bool tuple = args->kind == JV_ARRAY && (args->flags & JV_F_TUPLE);
    const char *s = fmt->u.s.p;
    for (size_t i = 0; i < fmt->u.s.len; i++) {
        if (s[i] != '%') {
            jbuf_putc(&b, s[i]);
            continue;
        }
        if (++i >= fmt->u.s.len) goto bad;
        if (s[i] == '%') {
            jbuf_putc(&b, '%');
            continue;
        }
        const jinja_value *a;
        if (tuple) {
            if (ai >= args->u.a.len) goto bad;
            a = args->u.a.v[ai++];
        } else {
            if (!single) goto bad;
            a = single;
            single = NULL;
        }
        char c = s[i];
        if (c == 's') jv_to_str(&b, a);
        else if (c == 'r') jv_repr(&b, a);
        else if ((c == 'd' || c == 'i') && is_num(a)) jbuf_printf(&b, "%lld", (long long)(a->kind == JV_FLOAT ? (int64_t)a->u.f : ival(a)));
        else if (c == 'f' && is_num(a)) jbuf_printf(&b, "%f", num(a));
        else goto bad;
    }
    jinja_value *r = jbuf_to_value(&b, fmt->flags & JV_F_SAFE);
    return r ? r : jctx_nomem(cx);
bad:
    jbuf_release(&b);
    return jctx_fail(cx, VT_E_INVALID, "TypeError: not all arguments converted during string formatting");
}

static jinja_value *binop(jctx *cx, jop op, jinja_value *a, jinja_value *b) {
    if (op == OP_CONCAT) {
        jbuf buf = {0};
        jv_to_str(&buf, a);
        jv_to_str(&buf, b);
        jinja_value *r = jbuf_to_value(&buf, 0);
        return r ? r : jctx_nomem(cx);
    }
    if (a->kind == JV_UNDEFINED) return fail_undefined(cx, a);
    if (b->kind == JV_UNDEFINED) return fail_undefined(cx, b);
    if (is_num(a) && is_num(b)) {
        bool ints = a->kind != JV_FLOAT && b->kind != JV_FLOAT;
        int64_t x = ints ? ival(a) : 0, y = ints ? ival(b) : 0, r;
        double fx = num(a), fy = num(b);
        switch (op) {
        case OP_ADD:
            if (ints && !__builtin_add_overflow(x, y, &r)) return jinja_int(r);
            return jinja_float(fx + fy);
        case OP_SUB:
            if (ints && !__builtin_sub_overflow(x, y, &r)) return jinja_int(r);
            return jinja_float(fx - fy);
        case OP_MUL:
            if (ints && !__builtin_mul_overflow(x, y, &r)) return jinja_int(r);
            return jinja_float(fx * fy);
        case OP_DIV:
            if (fy == 0) return jctx_fail(cx, VT_E_INVALID, "ZeroDivisionError: division by zero");
            return jinja_float(fx / fy);
        case OP_FLOORDIV:
        case OP_MOD:
            if (fy == 0 || (ints && y == 0))
                return jctx_fail(cx, VT_E_INVALID, "ZeroDivisionError: integer division or modulo by zero");
            if (ints) {
                if (x == INT64_MIN && y == -1) return jinja_float(-(double)x);
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q--;
                    m += y;
                }
                return jinja_int(op == OP_FLOORDIV ? q : m);
            } else {
                double m = fmod(fx, fy);
                if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
                if (op == OP_MOD) return jinja_float(m);
                return jinja_float(floor((fx - m) / fy + 0.5) == (fx - m) / fy ? (fx - m) / fy : floor(fx / fy));
            }
        case OP_POW:
            if (ints && y >= 0) {
                int64_t acc = 1;
                bool over = false;
                for (int64_t k = 0; k < y && !over; k++) over = __builtin_mul_overflow(acc, x, &acc);
                if (!over) return jinja_int(acc);
            }
            return jinja_float(pow(fx, fy));
        default: break;
        }
    }
    if (op == OP_ADD && a->kind == JV_STRING && b->kind == JV_STRING) {
        uint8_t safe = (a->flags | b->flags) & JV_F_SAFE;
        jbuf buf = {0};
        if (safe) {
            html_escape(&buf, a);
            html_escape(&buf, b);
        } else {
            jbuf_put(&buf, a->u.s.p, a->u.s.len);
            jbuf_put(&buf, b->u.s.p, b->u.s.len);
        }
        jinja_value *r = jbuf_to_value(&buf, safe);
        return r ? r : jctx_nomem(cx);
    }
    if (op == OP_ADD && a->kind == JV_ARRAY && b->kind == JV_ARRAY && !((a->flags | b->flags) & JV_F_GEN) &&
        (a->flags & JV_F_TUPLE) == (b->flags & JV_F_TUPLE)) {
        jinja_value *r = jinja_array();
        if (r) r->flags = a->flags & JV_F_TUPLE;
        for (size_t k = 0; r && k < a->u.a.len + b->u.a.len; k++) {
            jinja_value *x = k < a->u.a.len ? a->u.a.v[k] : b->u.a.v[k - a->u.a.len];
            if (jinja_array_push(r, jinja_value_ref(x)) != VT_OK) {
                jinja_value_free(r);
                r = NULL;
            }
        }
        return r ? r : jctx_nomem(cx);
    }
    if (op == OP_MUL) {
        if ((a->kind == JV_STRING || (a->kind == JV_ARRAY && !(a->flags & JV_F_GEN))) &&
            (b->kind == JV_INT || b->kind == JV_BOOL))
            return repeat(cx, a, ival(b));
        if ((b->kind == JV_STRING || (b->kind == JV_ARRAY && !(b->flags & JV_F_GEN))) &&
            (a->kind == JV_INT || a->kind == JV_BOOL))
            return repeat(cx, b, ival(a));
    }
    if (op == OP_MOD && a->kind == JV_STRING) return jv_str_percent(cx, a, b);
    return type_error(cx, op, a, b);
}

static bool contains(jctx *cx, jinja_value *item, jinja_value *container, bool *out) {
    switch (container->kind) {
    case JV_UNDEFINED: *out = false; return true;
    case JV_STRING:
        if (item->kind == JV_UNDEFINED) {
            fail_undefined(cx, item);
            return false;
        }
        if (item->kind != JV_STRING) {
            jctx_fail(cx, VT_E_INVALID, "TypeError: 'in <string>' requires string as left operand, not %s",
                      jv_type_name(item));
            return false;
        }
        *out = item->u.s.len == 0 ||
               memmem(container->u.s.p, container->u.s.len, item->u.s.p, item->u.s.len) != NULL;
        return true;
    case JV_ARRAY:
        *out = false;
        for (size_t i = 0; i < container->u.a.len && !*out; i++) *out = jv_equal(container->u.a.v[i], item);
        return true;
    case JV_OBJECT:
        *out = jv_get_key_value(container, item) != NULL;
        return true;
    default:
        jctx_fail(cx, VT_E_INVALID, "TypeError: argument of type '%s' is not iterable",
                  jv_type_name(container));
        return false;
    }
}

static bool compare(jctx *cx, jop op, jinja_value *a, jinja_value *b, bool *out) {
    int c;
    switch (op) {
    case OP_EQ: *out = jv_equal(a, b); return true;
    case OP_NE: *out = !jv_equal(a, b); return true;
    case OP_IN: return contains(cx, a, b, out);
    case OP_NOTIN:
        if (!contains(cx, a, b, out)) return false;
        *out = !*out;
        return true;
    default:
        if (a->kind == JV_UNDEFINED) return fail_undefined(cx, a), false;
        if (b->kind == JV_UNDEFINED) return fail_undefined(cx, b), false;
        if (!jv_compare(a, b, &c)) return type_error(cx, op, a, b), false;
        *out = op == OP_LT ? c < 0 : op == OP_LE ? c <= 0 : op == OP_GT ? c > 0 : c >= 0;
        return true;
    }
}

/* ---- calls ------------------------------------------------------------------------------------ */

typedef struct jargs {
    jinja_value *pos[32];
    int n_pos;
    jinja_value *kw[32];
    const char *kwnames[33];
    int n_kw;
} jargs;

static void args_free(jargs *a) {
    for (int i = 0; i < a->n_pos; i++) jinja_value_free(a->pos[i]);
    for (int i = 0; i < a->n_kw; i++) jinja_value_free(a->kw[i]);
    a->n_pos = a->n_kw = 0;
}

static bool args_eval(jctx *cx, const jnode *n, jargs *a) {
    a->n_pos = a->n_kw = 0;
    if (n->n_args > 32 || n->n_kw > 32) {
        jctx_fail(cx, VT_E_UNSUPPORTED, "a call with more than 32 arguments");
        return false;
    }
    for (int i = 0; i < n->n_args; i++) {
        jinja_value *v = jeval(cx, n->args[i]);
        if (!v) return args_free(a), false;
        a->pos[a->n_pos++] = v;
    }
    for (int i = 0; i < n->n_kw; i++) {
        jinja_value *v = jeval(cx, n->kw[i]);
        if (!v) return args_free(a), false;
        a->kwnames[a->n_kw] = n->kwnames[i];
        a->kw[a->n_kw++] = v;
    }
    return true;
}

static int exec_body(jctx *cx, const jnode *n);

/* Runs body in frame f with the output captured; the text as a new string. */
static jinja_value *capture(jctx *cx, const jnode *body, jframe *f) {
    jbuf buf = {.limit = cx->lim.max_output};
    jbuf *saved_out = cx->out;
    jframe *saved_frame = cx->frame;
    cx->out = &buf;
    cx->frame = f;
    int r = exec_body(cx, body);
    cx->out = saved_out;
    cx->frame = saved_frame;
    if (r == EX_ERR || cx->failed) {
        jbuf_release(&buf);
        return NULL;
    }
    if (buf.failed) {
        jbuf_release(&buf);
        if (jinja_mem_current && jinja_mem_current->exceeded) return jctx_nomem(cx);
        return jctx_fail(cx, VT_E_RANGE, "the template's output passed %zu bytes", cx->lim.max_output);
    }
    jinja_value *v = jbuf_to_value(&buf, 0);
    return v ? v : jctx_nomem(cx);
}

/* Binds a macro's (or caller's) parameters from the arguments, then runs its body. */
static jinja_value *call_macro(jctx *cx, const jnode *def, jframe *parent, jinja_value **args, int n_args,
                               const char **kwnames, jinja_value **kw, int n_kw, jinja_value *caller) {
    if (cx->depth >= cx->lim.max_depth)
        return jctx_fail(cx, VT_E_RANGE, "macro calls nested deeper than %d", cx->lim.max_depth);
    if (!jctx_step(cx)) return NULL;
    jframe *f = frame_push(cx, parent);
    if (!f) return jctx_nomem(cx);
    jinja_value *varargs = jinja_array(), *kwargs = jinja_object();
    jinja_value *result = NULL;
    bool *bound = NULL;
    if (!varargs || !kwargs) goto nomem;
    varargs->flags |= JV_F_TUPLE;
    if (def->n_names) {
        bound = jmem_alloc((size_t)def->n_names * sizeof *bound);
        if (!bound) goto nomem;
        memset(bound, 0, (size_t)def->n_names * sizeof *bound);
    }
    for (int i = 0; i < n_args; i++) {
        if (i < def->n_names) {
            if (!frame_set(cx, f, def->names[i], jinja_value_ref(args[i]))) goto done;
            bound[i] = true;
        } else if (jinja_array_push(varargs, jinja_value_ref(args[i])) != VT_OK) {
            goto nomem;
        }
    }
    for (int i = 0; i < n_kw; i++) {
        int k = 0;
        for (; k < def->n_names; k++)
            if (!strcmp(def->names[k], kwnames[i])) break;
        if (k < def->n_names) {
            if (bound[k]) {
                jctx_fail(cx, VT_E_INVALID, "TypeError: macro '%s' got multiple values for argument '%s'",
                          def->str ? def->str : "caller", kwnames[i]);
                goto done;
            }
            if (!frame_set(cx, f, def->names[k], jinja_value_ref(kw[i]))) goto done;
            bound[k] = true;
        } else if (!strcmp(kwnames[i], "caller") && def->kind == S_MACRO) {
            if (!frame_set(cx, f, "caller", jinja_value_ref(kw[i]))) goto done;
        } else if (jinja_object_set(kwargs, kwnames[i], strlen(kwnames[i]), jinja_value_ref(kw[i])) != VT_OK) {
            goto nomem;
        }
    }
    jframe *saved = cx->frame;
    cx->frame = f;
    for (int k = 0; k < def->n_names; k++) {
        if (bound[k]) continue;
        jinja_value *v = def->args[k] ? jeval(cx, def->args[k])
                                      : jv_undefined("parameter '%s' was not provided", def->names[k]);
        if (!v || !frame_set(cx, f, def->names[k], v)) {
            cx->frame = saved;
            if (!cx->failed) jctx_nomem(cx);
            goto done;
        }
    }
    cx->frame = saved;
    if (caller && !frame_set(cx, f, "caller", jinja_value_ref(caller))) goto done;
    if (!frame_set(cx, f, "varargs", jinja_value_ref(varargs))) goto done;
    if (!frame_set(cx, f, "kwargs", jinja_value_ref(kwargs))) goto done;
    cx->depth++;
    result = capture(cx, def->b, f);
    cx->depth--;
    goto done;
nomem:
    jctx_nomem(cx);
done:
    if (bound) jmem_free(bound, (size_t)def->n_names * sizeof *bound);
    jinja_value_free(varargs);
    jinja_value_free(kwargs);
    frame_pop(cx, f);
    return result;
}

jinja_value *jcall_value(jctx *cx, jinja_value *fn, jinja_value **args, int n_args,
                         const char **kwnames, jinja_value **kw, int n_kw) {
    if (fn->kind == JV_UNDEFINED) return fail_undefined(cx, fn);
    if (fn->kind != JV_CALLABLE)
        return jctx_fail(cx, VT_E_INVALID, "TypeError: '%s' object is not callable", jv_type_name(fn));
    const jv_callable *c = &fn->u.c;
    switch (c->kind) {
    case JC_MACRO: return call_macro(cx, c->node, cx->root, args, n_args, kwnames, kw, n_kw, NULL);
    case JC_CALLER:
        if (!frame_alive(cx, c->frame, c->frame_id))
            return jctx_fail(cx, VT_E_INVALID, "caller() was called after its call block ended");
        return call_macro(cx, c->node, c->frame, args, n_args, kwnames, kw, n_kw, NULL);
    case JC_GLOBAL: return jbuiltin_global_call(cx, c->global, args, n_args, kwnames, kw, n_kw);
    case JC_CYCLE:
        if (n_args == 0) return jctx_fail(cx, VT_E_INVALID, "TypeError: no items for cycling given");
        return jinja_value_ref(args[c->bound % n_args]);
    }
    return NULL;
}

static bool is_method_receiver(const jinja_value *v) {
    return v->kind == JV_STRING || (v->kind == JV_ARRAY && !(v->flags & JV_F_GEN)) ||
           (v->kind == JV_OBJECT && !(v->flags & JV_F_NAMESPACE));
}

static jinja_value *eval_call(jctx *cx, const jnode *n, jinja_value *caller) {
    jargs a;
    jinja_value *r = NULL;
    if (n->a->kind == E_ATTR) {
        jinja_value *obj = jeval(cx, n->a->a);
        if (!obj) return NULL;
        if (is_method_receiver(obj)) {
            if (!args_eval(cx, n, &a)) {
                jinja_value_free(obj);
                return NULL;
            }
            r = jbuiltin_method(cx, obj, n->a->str, a.pos, a.n_pos, a.kwnames, a.kw, a.n_kw);
            args_free(&a);
            jinja_value_free(obj);
            return r;
        }
        jinja_value *fn = jget_attr(cx, obj, n->a->str, strlen(n->a->str));
        jinja_value_free(obj);
        if (!fn) return NULL;
        if (args_eval(cx, n, &a)) {
            r = jcall_value(cx, fn, a.pos, a.n_pos, a.kwnames, a.kw, a.n_kw);
            args_free(&a);
        }
        jinja_value_free(fn);
        return r;
    }
    jinja_value *fn = jeval(cx, n->a);
    if (!fn) return NULL;
    if (args_eval(cx, n, &a)) {
        if (caller && fn->kind == JV_CALLABLE && fn->u.c.kind == JC_MACRO) {
            r = call_macro(cx, fn->u.c.node, cx->root, a.pos, a.n_pos, a.kwnames, a.kw, a.n_kw, caller);
        } else {
            r = jcall_value(cx, fn, a.pos, a.n_pos, a.kwnames, a.kw, a.n_kw);
        }
        args_free(&a);
    }
    jinja_value_free(fn);
    return r;
}

jinja_value *japply_filter(jctx *cx, const jnode *f, jinja_value *v) {
    jargs a;
    if (!args_eval(cx, f, &a)) return NULL;
    jinja_value *r = jbuiltin_filter(cx, f->str, v, a.pos, a.n_pos, a.kwnames, a.kw, a.n_kw);
    args_free(&a);
    return r;
}

/* ---- expressions ------------------------------------------------------------------------------- */

static jinja_value *eval_seq(jctx *cx, const jnode *n, bool tuple) {
    jinja_value *arr = jinja_array();
    if (!arr) return jctx_nomem(cx);
    if (tuple) arr->flags |= JV_F_TUPLE;
    for (int i = 0; i < n->n_args; i++) {
        jinja_value *v = jeval(cx, n->args[i]);
        if (!v) {
            jinja_value_free(arr);
            return NULL;
        }
        if (jinja_array_push(arr, v) != VT_OK) {
            jinja_value_free(arr);
            return jctx_nomem(cx);
        }
    }
    return arr;
}

static jinja_value *eval_node(jctx *cx, const jnode *n);

/* Every evaluation passes here: the C stack an expression may use is bounded by
 * the parser's nesting limit times the macro depth; this bounds it once more. */
jinja_value *jeval(jctx *cx, const jnode *n) {
    if (cx->failed) return NULL;
    if (++cx->eval_depth > 1000) {
        cx->eval_depth--;
        return jctx_fail(cx, VT_E_RANGE, "expressions nested deeper than 1000 evaluations");
    }
    jinja_value *v = eval_node(cx, n);
    cx->eval_depth--;
    return v;
}

static jinja_value *eval_node(jctx *cx, const jnode *n) {
    switch ((jnode_kind)n->kind) {
    case E_LIT: return n->lit;
    case E_NAME: return jframe_lookup(cx, cx->frame, n->str);
    case E_LIST: return eval_seq(cx, n, false);
    case E_TUPLE: return eval_seq(cx, n, true);
    case E_DICT: {
        jinja_value *o = jinja_object();
        if (!o) return jctx_nomem(cx);
        for (int i = 0; i < n->n_args; i++) {
            jinja_value *k = jeval(cx, n->args[i]);
            if (!k) goto dict_fail;
            if (k->kind == JV_ARRAY || k->kind == JV_OBJECT || k->kind == JV_UNDEFINED ||
                k->kind == JV_CALLABLE) {
                jctx_fail(cx, VT_E_INVALID, "TypeError: unhashable type: '%s'", jv_type_name(k));
                jinja_value_free(k);
                goto dict_fail;
            }
            jinja_value *v = jeval(cx, n->kw[i]);
            if (!v) {
                jinja_value_free(k);
                goto dict_fail;
            }
            vt_status st = jv_object_set_value(o, k, v);
            jinja_value_free(k);
            if (st != VT_OK) {
                jctx_nomem(cx);
                goto dict_fail;
            }
        }
        return o;
    dict_fail:
        jinja_value_free(o);
        return NULL;
    }
    case E_ATTR: {
        jinja_value *obj = jeval(cx, n->a);
        if (!obj) return NULL;
        jinja_value *r = jget_attr(cx, obj, n->str, strlen(n->str));
        jinja_value_free(obj);
        return r;
    }
    case E_ITEM: {
        jinja_value *obj = jeval(cx, n->a);
        if (!obj) return NULL;
        jinja_value *key = jeval(cx, n->b);
        jinja_value *r = key ? jget_item(cx, obj, key) : NULL;
        jinja_value_free(key);
        jinja_value_free(obj);
        return r;
    }
    case E_SLICE: {
        /* x[1:2, 3]: the slice is an element of a tuple key, without an operand;
         * no value has such a key, so the lookup gives undefined, as in Jinja */
        if (!n->a) {
            jinja_value *u = jv_undefined("TypeError: unhashable type: 'slice'");
            return u ? u : jctx_nomem(cx);
        }
        jinja_value *obj = jeval(cx, n->a);
        if (!obj) return NULL;
        jinja_value *r = eval_slice(cx, obj, n);
        jinja_value_free(obj);
        return r;
    }
    case E_CALL: return eval_call(cx, n, NULL);
    case E_FILTER: {
        jinja_value *v = jeval(cx, n->a);
        if (!v) return NULL;
        jinja_value *r = japply_filter(cx, n, v);
        jinja_value_free(v);
        return r;
    }
    case E_TEST: {
        jinja_value *v = jeval(cx, n->a);
        if (!v) return NULL;
        jargs a;
        bool ok = false, res = false;
        if (args_eval(cx, n, &a)) {
            ok = jbuiltin_test(cx, n->str, v, a.pos, a.n_pos, &res);
            args_free(&a);
        }
        jinja_value_free(v);
        if (!ok) return NULL;
        return jinja_bool(n->op ? !res : res);
    }
    case E_NEG:
    case E_POS: {
        jinja_value *v = jeval(cx, n->a);
        if (!v) return NULL;
        jinja_value *r;
        if (v->kind == JV_UNDEFINED) r = fail_undefined(cx, v);
        else if (v->kind == JV_FLOAT) r = jinja_float(n->kind == E_NEG ? -v->u.f : v->u.f);
        else if ((v->kind == JV_INT || v->kind == JV_BOOL) && !(n->kind == E_NEG && ival(v) == INT64_MIN))
            r = jinja_int(n->kind == E_NEG ? -ival(v) : ival(v));
        else
            r = jctx_fail(cx, VT_E_INVALID, "TypeError: bad operand type for unary %c: '%s'",
                          n->kind == E_NEG ? '-' : '+', jv_type_name(v));
        jinja_value_free(v);
        return r;
    }
    case E_NOT: {
        jinja_value *v = jeval(cx, n->a);
        if (!v) return NULL;
        bool t = jv_truthy(v);
        jinja_value_free(v);
        return jinja_bool(!t);
    }
    case E_BIN: {
        jinja_value *a = jeval(cx, n->a);
        if (!a) return NULL;
        jinja_value *b = jeval(cx, n->b);
        jinja_value *r = b ? binop(cx, (jop)n->op, a, b) : NULL;
        jinja_value_free(a);
        jinja_value_free(b);
        if (!r && !cx->failed) jctx_nomem(cx);
        return r;
    }
    case E_AND:
    case E_OR: {
        jinja_value *a = jeval(cx, n->a);
        if (!a) return NULL;
        if (jv_truthy(a) == (n->kind == E_OR)) return a;
        jinja_value_free(a);
        return jeval(cx, n->b);
    }
    case E_CMP: {
        jinja_value *left = jeval(cx, n->a);
        if (!left) return NULL;
        bool res = true;
        for (int i = 0; i < n->n_args && res; i++) {
            jinja_value *right = jeval(cx, n->args[i]);
            if (!right || !compare(cx, (jop)n->ops[i], left, right, &res)) {
                jinja_value_free(left);
                jinja_value_free(right);
                return NULL;
            }
            jinja_value_free(left);
            left = right;
        }
        jinja_value_free(left);
        return jinja_bool(res);
    }
    case E_COND: {
        jinja_value *c = jeval(cx, n->a);
        if (!c) return NULL;
        bool t = jv_truthy(c);
        jinja_value_free(c);
        if (t) return jeval(cx, n->b);
        if (n->c) return jeval(cx, n->c);
        jinja_value *u = jv_undefined("the inline if-expression evaluated to false and no else section was defined");
        return u ? u : jctx_nomem(cx);
    }
    default: return jctx_fail(cx, VT_E_INVALID, "internal: not an expression");
    }
}

/* ---- statements -------------------------------------------------------------------------------- */

static int exec_node(jctx *cx, const jnode *n);

static int exec_body(jctx *cx, const jnode *n) {
    for (int i = 0; i < n->n_args; i++) {
        int r = exec_node(cx, n->args[i]);
        if (r != EX_OK) return r;
    }
    return EX_OK;
}

static bool emit(jctx *cx, const jinja_value *v) {
    if (v->kind == JV_STRING) jbuf_put(cx->out, v->u.s.p, v->u.s.len);
    else jv_to_str(cx->out, v);
    if (cx->out->failed) {
        if (jinja_mem_current && jinja_mem_current->exceeded) jctx_nomem(cx);
        else jctx_fail(cx, VT_E_RANGE, "the template's output passed %zu bytes", cx->lim.max_output);
        return false;
    }
    return true;
}

/* Binds loop targets: one name, or unpacking a sequence into several. */
static bool bind_targets(jctx *cx, jframe *f, const char *const *names, int n_names, bool unpack,
                         jinja_value *item) {
    if (!unpack) return frame_set(cx, f, names[0], jinja_value_ref(item));
    jinja_value *seq = item->kind == JV_ARRAY ? jinja_value_ref(item) : NULL;
    if (!seq && (item->kind == JV_STRING || item->kind == JV_OBJECT)) seq = jiterate(cx, item);
    if (!seq) {
        if (!cx->failed)
            jctx_fail(cx, VT_E_INVALID, "TypeError: cannot unpack non-iterable %s object", jv_type_name(item));
        return false;
    }
    bool ok = (int64_t)seq->u.a.len == n_names;
    if (!ok) {
        jctx_fail(cx, VT_E_INVALID, "ValueError: %s values to unpack (expected %d, got %zu)",
                  (int64_t)seq->u.a.len > n_names ? "too many" : "not enough", n_names, seq->u.a.len);
    }
    for (int i = 0; ok && i < n_names; i++) ok = frame_set(cx, f, names[i], jinja_value_ref(seq->u.a.v[i]));
    jinja_value_free(seq);
    return ok;
}

static bool set_loop(jctx *cx, jframe *f, jinja_value *items, size_t i) {
    size_t n = items->u.a.len;
    jinja_value *loop = jinja_object();
    if (!loop) return jctx_nomem(cx), false;
    jinja_value *cycle = jv_callable_new(JC_CYCLE);
    if (cycle) cycle->u.c.bound = (int64_t)i;
    bool ok = jinja_object_set(loop, "index", 5, jinja_int((int64_t)i + 1)) == VT_OK &&
              jinja_object_set(loop, "index0", 6, jinja_int((int64_t)i)) == VT_OK &&
              jinja_object_set(loop, "revindex", 8, jinja_int((int64_t)(n - i))) == VT_OK &&
              jinja_object_set(loop, "revindex0", 9, jinja_int((int64_t)(n - i - 1))) == VT_OK &&
              jinja_object_set(loop, "first", 5, jinja_bool(i == 0)) == VT_OK &&
              jinja_object_set(loop, "last", 4, jinja_bool(i + 1 == n)) == VT_OK &&
              jinja_object_set(loop, "length", 6, jinja_int((int64_t)n)) == VT_OK &&
              jinja_object_set(loop, "depth", 5, jinja_int(1)) == VT_OK &&
              jinja_object_set(loop, "depth0", 6, jinja_int(0)) == VT_OK &&
              jinja_object_set(loop, "cycle", 5, cycle) == VT_OK &&
              (i == 0 || jinja_object_set(loop, "previtem", 8, jinja_value_ref(items->u.a.v[i - 1])) == VT_OK) &&
              (i + 1 >= n || jinja_object_set(loop, "nextitem", 8, jinja_value_ref(items->u.a.v[i + 1])) == VT_OK);
    if (!ok) {
        jinja_value_free(loop);
        return jctx_nomem(cx), false;
    }
    return frame_set(cx, f, "loop", loop);
}

static int exec_for(jctx *cx, const jnode *n) {
    jinja_value *it = jeval(cx, n->a);
    if (!it) return EX_ERR;
    jinja_value *items = jiterate(cx, it);
    jinja_value_free(it);
    if (!items) return EX_ERR;
    int result = EX_OK;
    if (n->d) { /* the `if` filter: the loop sees only what passes */
        jinja_value *kept = jinja_array();
        if (!kept) goto nomem;
        for (size_t i = 0; i < items->u.a.len; i++) {
            if (!jctx_step(cx)) {
                jinja_value_free(kept);
                goto fail;
            }
            jframe *f = frame_push(cx, cx->frame);
            if (!f) {
                jinja_value_free(kept);
                goto nomem;
            }
            jinja_value *c = NULL;
            if (bind_targets(cx, f, n->names, n->n_names, n->op, items->u.a.v[i])) {
                jframe *saved = cx->frame;
                cx->frame = f;
                c = jeval(cx, n->d);
                cx->frame = saved;
            }
            frame_pop(cx, f);
            if (!c) {
                jinja_value_free(kept);
                goto fail;
            }
            bool keep = jv_truthy(c);
            jinja_value_free(c);
            if (keep && jinja_array_push(kept, jinja_value_ref(items->u.a.v[i])) != VT_OK) {
                jinja_value_free(kept);
                goto nomem;
            }
        }
        jinja_value_free(items);
        items = kept;
    }
    for (size_t i = 0; i < items->u.a.len; i++) {
        if (!jctx_step(cx)) goto fail;
        jframe *f = frame_push(cx, cx->frame);
        if (!f) goto nomem;
        int r = EX_ERR;
        if (bind_targets(cx, f, n->names, n->n_names, n->op, items->u.a.v[i]) && set_loop(cx, f, items, i)) {
            jframe *saved = cx->frame;
            cx->frame = f;
            r = exec_body(cx, n->b);
            cx->frame = saved;
        }
        frame_pop(cx, f);
        if (r == EX_ERR) goto fail;
        if (r == EX_BREAK) break;
    }
    if (items->u.a.len == 0 && n->c) {
        jframe *f = frame_push(cx, cx->frame);
        if (!f) goto nomem;
        jframe *saved = cx->frame;
        cx->frame = f;
        result = exec_body(cx, n->c);
        cx->frame = saved;
        frame_pop(cx, f);
    }
    jinja_value_free(items);
    return result;
nomem:
    jctx_nomem(cx);
fail:
    jinja_value_free(items);
    return EX_ERR;
}

static int assign(jctx *cx, const jnode *target, jinja_value *v) {
    if (target->kind == E_NAME) return frame_set(cx, cx->frame, target->str, v) ? EX_OK : EX_ERR;
    if (target->kind == E_ATTR) {
        jinja_value *ns = jframe_lookup(cx, cx->frame, target->a->str);
        if (!ns) {
            jinja_value_free(v);
            return EX_ERR;
        }
        int r = EX_OK;
        if (ns->kind != JV_OBJECT || !(ns->flags & JV_F_NAMESPACE)) {
            jctx_fail(cx, VT_E_INVALID, "cannot assign attribute on non-namespace object");
            jinja_value_free(v);
            r = EX_ERR;
        } else if (jinja_object_set(ns, target->str, strlen(target->str), v) != VT_OK) {
            jctx_nomem(cx);
            r = EX_ERR;
        }
        jinja_value_free(ns);
        return r;
    }
    /* a tuple of names */
    const char *names[64];
    if (target->n_args > 64) {
        jinja_value_free(v);
        jctx_fail(cx, VT_E_UNSUPPORTED, "more than 64 assignment targets");
        return EX_ERR;
    }
    for (int i = 0; i < target->n_args; i++) names[i] = target->args[i]->str;
    bool ok = bind_targets(cx, cx->frame, names, target->n_args, true, v);
    jinja_value_free(v);
    return ok ? EX_OK : EX_ERR;
}

static jinja_value *apply_filters(jctx *cx, const jnode *n, jinja_value *v) {
    for (int i = n->n_args - 1; i >= 0 && v; i--) {
        jinja_value *r = japply_filter(cx, n->args[i], v);
        jinja_value_free(v);
        v = r;
    }
    return v;
}

static int exec_node(jctx *cx, const jnode *n) {
    if (!jctx_step(cx)) return EX_ERR;
    switch ((jnode_kind)n->kind) {
    case S_BODY: return exec_body(cx, n);
    case S_TEXT: return emit(cx, n->lit) ? EX_OK : EX_ERR;
    case S_OUTPUT: {
        jinja_value *v = jeval(cx, n->a);
        if (!v) return EX_ERR;
        bool ok = emit(cx, v);
        jinja_value_free(v);
        return ok ? EX_OK : EX_ERR;
    }
    case S_IF: {
        for (const jnode *at = n; at;) {
            jinja_value *c = jeval(cx, at->a);
            if (!c) return EX_ERR;
            bool t = jv_truthy(c);
            jinja_value_free(c);
            if (t) return exec_body(cx, at->b);
            if (!at->c) return EX_OK;
            if (at->c->kind != S_IF) return exec_body(cx, at->c);
            at = at->c;
        }
        return EX_OK;
    }
    case S_FOR: return exec_for(cx, n);
    case S_SET: {
        jinja_value *v = jeval(cx, n->b);
        if (!v) return EX_ERR;
        return assign(cx, n->a, v);
    }
    case S_SET_BLOCK: {
        jinja_value *v = capture(cx, n->b, cx->frame);
        v = v ? apply_filters(cx, n, v) : NULL;
        return v ? assign(cx, n->a, v) : EX_ERR;
    }
    case S_FILTER_BLOCK: {
        jinja_value *v = capture(cx, n->b, cx->frame);
        v = v ? apply_filters(cx, n, v) : NULL;
        if (!v) return EX_ERR;
        bool ok = emit(cx, v);
        jinja_value_free(v);
        return ok ? EX_OK : EX_ERR;
    }
    case S_MACRO: {
        jinja_value *m = jv_callable_new(JC_MACRO);
        if (!m) return jctx_nomem(cx), EX_ERR;
        m->u.c.node = n;
        return frame_set(cx, cx->frame, n->str, m) ? EX_OK : EX_ERR;
    }
    case S_CALL_BLOCK: {
        jinja_value *caller = jv_callable_new(JC_CALLER);
        if (!caller) return jctx_nomem(cx), EX_ERR;
        caller->u.c.node = n;
        caller->u.c.frame = cx->frame;
        caller->u.c.frame_id = cx->frame->id;
        jinja_value *v = eval_call(cx, n->a, caller);
        jinja_value_free(caller);
        if (!v) return EX_ERR;
        bool ok = emit(cx, v);
        jinja_value_free(v);
        return ok ? EX_OK : EX_ERR;
    }
    case S_WITH: {
        jframe *f = frame_push(cx, cx->frame);
        if (!f) return jctx_nomem(cx), EX_ERR;
        int r = EX_OK;
        for (int i = 0; i < n->n_args && r == EX_OK; i++) {
            jinja_value *v = jeval(cx, n->kw[i]); /* in the outer scope */
            if (!v) {
                r = EX_ERR;
                break;
            }
            jframe *saved = cx->frame;
            cx->frame = f;
            r = assign(cx, n->args[i], v);
            cx->frame = saved;
        }
        if (r == EX_OK) {
            jframe *saved = cx->frame;
            cx->frame = f;
            r = exec_body(cx, n->b);
            cx->frame = saved;
        }
        frame_pop(cx, f);
        return r;
    }
    case S_BREAK: return EX_BREAK;
    case S_CONTINUE: return EX_CONTINUE;
    default: jctx_fail(cx, VT_E_INVALID, "internal: not a statement"); return EX_ERR;
    }
}

/* ---- entry ---------------------------------------------------------------------------------------- */

vt_status jinja_template_render(const jinja_template *t, const jinja_value *vars,
                                const jinja_render_opts *opts, char **out, size_t *out_len) {
    *out = NULL;
    if (out_len) *out_len = 0;
    jctx cx = {.tpl = t};
    jinja_limits lim = opts ? opts->limits : (jinja_limits){0};
    cx.lim.max_output = lim.max_output ? lim.max_output : (size_t)16 << 20;
    cx.lim.max_memory = lim.max_memory ? lim.max_memory : (size_t)256 << 20;
    cx.lim.max_steps = lim.max_steps ? lim.max_steps : 1000000;
    cx.lim.max_depth = lim.max_depth ? lim.max_depth : 64;
    cx.year = opts && opts->year ? opts->year : 1970;
    cx.month = opts && opts->month ? opts->month : 1;
    cx.day = opts && opts->day ? opts->day : 1;
    if (vars && vars->kind != JV_OBJECT) return vt_errorf(VT_E_INVALID, "template variables: not an object");

    jmem mem = {.limit = cx.lim.max_memory};
    jmem *saved_mem = jinja_mem_current;
    jinja_mem_current = &mem;
    jbuf buf = {.limit = cx.lim.max_output};
    cx.out = &buf;
    /* the variables sit in a frame below the root, so that `set` never writes into
     * the caller's object */
    jframe vars_frame = {.vars = (jinja_value *)vars, .parent = NULL};
    jframe *root = frame_push(&cx, vars ? &vars_frame : NULL);
    int r = EX_ERR;
    if (!root) {
        jctx_nomem(&cx);
    } else {
        cx.root = cx.frame = root;
        r = exec_body(&cx, t->root);
        frame_pop(&cx, root);
    }
    vt_status st = VT_OK;
    if (cx.failed || r == EX_ERR) {
        st = cx.failed ? cx.status : VT_E_INVALID;
        jbuf_release(&buf);
        jinja_mem_current = saved_mem;
        return vt_errorf(st, "%s", cx.failed ? cx.err : "template error");
    }
    /* the text leaves the budget: copy it out with plain malloc */
    char *text = malloc(buf.len + 1);
    if (!text) {
        jbuf_release(&buf);
        jinja_mem_current = saved_mem;
        return vt_errorf(VT_E_NOMEM, "template: out of memory for %zu bytes of output", buf.len);
    }
    if (buf.len) memcpy(text, buf.p, buf.len);
    text[buf.len] = 0;
    *out = text;
    if (out_len) *out_len = buf.len;
    jbuf_release(&buf);
    jinja_mem_current = saved_mem;
    return st;
}
