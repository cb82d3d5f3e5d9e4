/* The filters, tests, methods and global functions templates call, each with the
 * semantics of Jinja2 3.1 under transformers' environment (tojson is
 * json.dumps(x, ensure_ascii=False, indent, separators, sort_keys); autoescape
 * is off, so join/replace return plain strings). What the ImmutableSandbox
 * forbids (list.append, dict.update, ...) fails as it does there. */
#include "jinja/jinja_impl.h"

#include "base/status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct jcall {
    jinja_value **args;
    int n_args;
    const char **kwnames;
    jinja_value **kw;
    int n_kw;
} jcall;

/* Argument `idx` (positional) or `name` (keyword); NULL when not given. */
static jinja_value *arg(const jcall *c, int idx, const char *name) {
    if (idx >= 0 && idx < c->n_args) return c->args[idx];
    for (int i = 0; name && i < c->n_kw; i++)
        if (!strcmp(c->kwnames[i], name)) return c->kw[i];
    return NULL;
}

static bool arg_bool(const jcall *c, int idx, const char *name, bool def) {
    jinja_value *v = arg(c, idx, name);
    return v ? jv_truthy(v) : def;
}

static jinja_value *nomem(jctx *cx) { return jctx_nomem(cx); }
static jinja_value *ok_or_nomem(jctx *cx, jinja_value *v) { return v ? v : nomem(cx); }

static jinja_value *type_err(jctx *cx, const char *fmt, const jinja_value *v) {
    return jctx_fail(cx, VT_E_INVALID, fmt, jv_type_name(v));
}

/* ---- unicode helpers ------------------------------------------------------------------ */

static uint32_t dec(const char *s, size_t len, size_t *i) {
    const unsigned char *u = (const unsigned char *)s;
    uint32_t c = u[*i];
    int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
    if (n <= 0 || *i + (size_t)n >= len) {
        (*i)++;
        return c;
    }
    uint32_t cp = c & (0x3Fu >> n);
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

static void enc(jbuf *b, uint32_t c) {
    char t[4];
    size_t n;
    if (c < 0x80) t[0] = (char)c, n = 1;
    else if (c < 0x800) t[0] = (char)(0xC0 | (c >> 6)), t[1] = (char)(0x80 | (c & 0x3F)), n = 2;
    else if (c < 0x10000)
        t[0] = (char)(0xE0 | (c >> 12)), t[1] = (char)(0x80 | ((c >> 6) & 0x3F)), t[2] = (char)(0x80 | (c & 0x3F)), n = 3;
    else
        t[0] = (char)(0xF0 | (c >> 18)), t[1] = (char)(0x80 | ((c >> 12) & 0x3F)),
        t[2] = (char)(0x80 | ((c >> 6) & 0x3F)), t[3] = (char)(0x80 | (c & 0x3F)), n = 4;
    jbuf_put(b, t, n);
}

static bool py_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Case mapping for ASCII, Latin-1, Latin Extended-A pairs, Greek and Cyrillic. */
static uint32_t to_upper(uint32_t c) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
    if (c >= 0x100 && c <= 0x17F && (c & 1) && c != 0x131 && c != 0x138 && c != 0x149) return c - 1;
    if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    return c;
}

static uint32_t to_lower(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
    if (c >= 0x100 && c <= 0x17F && !(c & 1) && c != 0x130 && c != 0x138) return c + 1;
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    return c;
}

static bool is_cased_upper(uint32_t c) { return to_lower(c) != c; }
static bool is_cased_lower(uint32_t c) { return to_upper(c) != c; }
static bool is_alpha(uint32_t c) {
    return (c < 0x80 && ((c | 32) >= 'a' && (c | 32) <= 'z')) || (c >= 0x80 && (is_cased_upper(c) || is_cased_lower(c) || c > 0x2FF));
}

enum { CASE_LOWER, CASE_UPPER, CASE_TITLE, CASE_CAPITALIZE, CASE_JINJA_TITLE };

static jinja_value *recase(jctx *cx, const jinja_value *s, int mode) {
    jbuf b = {0};
    size_t i = 0;
    bool prev_cased = false, first = true;
    while (i < s->u.s.len) {
        uint32_t c = dec(s->u.s.p, s->u.s.len, &i);
        uint32_t o = c;
        switch (mode) {
        case CASE_LOWER: o = to_lower(c); break;
        case CASE_UPPER: o = to_upper(c); break;
        case CASE_TITLE: o = prev_cased ? to_lower(c) : to_upper(c); break;
        case CASE_CAPITALIZE: o = first ? to_upper(c) : to_lower(c); break;
        case CASE_JINJA_TITLE: {
            /* words begin after runs of -, whitespace, ( { [ < */
            bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_space(c);
            o = sep ? c : prev_cased ? to_lower(c) : to_upper(c);
            prev_cased = !sep;
            enc(&b, o);
            first = false;
            continue;
        }
        }
        prev_cased = is_alpha(c);
        first = false;
        enc(&b, o);
    }
    return ok_or_nomem(cx, jbuf_to_value(&b, s->flags & JV_F_SAFE));
}

/* ---- strings ------------------------------------------------------------------------------ */

static jinja_value *to_string(jctx *cx, jinja_value *v) {
    if (v->kind == JV_STRING) return jinja_value_ref(v);
    return ok_or_nomem(cx, jv_str_of(v));
}

static bool in_set(uint32_t c, const jinja_value *chars) {
    if (!chars) return py_space(c);
    size_t i = 0;
    while (i < chars->u.s.len)
        if (dec(chars->u.s.p, chars->u.s.len, &i) == c) return true;
    return false;
}

/* strip: which 1 = left, 2 = right, 3 = both; chars NULL: whitespace */
static jinja_value *strip(jctx *cx, const jinja_value *s, const jinja_value *chars, int which) {
    if (chars && chars->kind == JV_NONE) chars = NULL;
    if (chars && chars->kind != JV_STRING)
        return jctx_fail(cx, VT_E_INVALID, "TypeError: strip arg must be None or str");
    size_t a = 0, z = s->u.s.len;
    if (which & 1) {
        while (a < z) {
            size_t j = a;
            if (!in_set(dec(s->u.s.p, z, &j), chars)) break;
            a = j;
        }
    }
    if (which & 2) {
        while (z > a) {
            size_t k = z - 1;
            while (k > a && ((unsigned char)s->u.s.p[k] & 0xC0) == 0x80) k--;
            size_t j = k;
            if (!in_set(dec(s->u.s.p, z, &j), chars)) break;
            z = k;
        }
    }
    jinja_value *r = jv_str(s->u.s.p + a, z - a);
    if (r) r->flags |= s->flags & JV_F_SAFE;
    return ok_or_nomem(cx, r);
}

static jinja_value *split(jctx *cx, const jinja_value *s, const jinja_value *sep, int64_t maxsplit, bool right) {
    if (sep && sep->kind == JV_NONE) sep = NULL;
    if (sep && sep->kind != JV_STRING) return type_err(cx, "TypeError: must be str or None, not %s", sep);
    if (sep && sep->u.s.len == 0) return jctx_fail(cx, VT_E_INVALID, "ValueError: empty separator");
    jinja_value *out = jinja_array();
    if (!out) return nomem(cx);
    const char *p = s->u.s.p;
    size_t len = s->u.s.len;
    /* collect [start, end) pieces */
    size_t cap = 16, n = 0;
    size_t *piece = malloc(cap * 2 * sizeof *piece);
    if (!piece) {
        jinja_value_free(out);
        return nomem(cx);
    }
    int64_t splits = 0;
#define ADD_PIECE(a_, b_)                                                                 \
    do {                                                                                  \
        if (n == cap) {                                                                   \
            size_t *np_ = realloc(piece, cap * 4 * sizeof *piece);                        \
            if (!np_) goto oom;                                                           \
            piece = np_;                                                                  \
            cap *= 2;                                                                     \
        }                                                                                 \
        piece[2 * n] = (a_), piece[2 * n + 1] = (b_), n++;                                \
    } while (0)
    if (sep) {
        const char *q = sep->u.s.p;
        size_t ql = sep->u.s.len;
        if (!right) {
            size_t start = 0, i = 0;
            while (i + ql <= len && (maxsplit < 0 || splits < maxsplit)) {
                if (!memcmp(p + i, q, ql)) {
                    ADD_PIECE(start, i);
                    i += ql;
                    start = i;
                    splits++;
                } else {
                    i++;
                }
            }
            ADD_PIECE(start, len);
        } else {
            size_t end = len;
            int64_t i = (int64_t)len - (int64_t)ql;
            while (i >= 0 && (maxsplit < 0 || splits < maxsplit)) {
                if (!memcmp(p + i, q, ql)) {
                    ADD_PIECE((size_t)i + ql, end);
                    end = (size_t)i;
                    i -= (int64_t)ql;
                    splits++;
                } else {
                    i--;
                }
            }
            ADD_PIECE(0, end);
            for (size_t k = 0; k < n / 2; k++) {
                size_t a0 = piece[2 * k], a1 = piece[2 * k + 1];
                piece[2 * k] = piece[2 * (n - 1 - k)], piece[2 * k + 1] = piece[2 * (n - 1 - k) + 1];
                piece[2 * (n - 1 - k)] = a0, piece[2 * (n - 1 - k) + 1] = a1;
            }
        }
    } else {
        /* runs of whitespace; maxsplit leaves the rest (left-stripped) whole */
        size_t i = 0;
        while (i < len) {
            size_t j = i;
            while (j < len) {
                size_t k = j;
                if (!py_space(dec(p, len, &k))) break;
                j = k;
            }
            i = j;
            if (i >= len) break;
            if (maxsplit >= 0 && splits >= maxsplit) {
                size_t z = len;
                while (z > i && py_space((unsigned char)p[z - 1])) z--;
                ADD_PIECE(i, z);
                break;
            }
            size_t start = i;
            while (i < len) {
                size_t k = i;
                if (py_space(dec(p, len, &k))) break;
                i = k;
            }
            ADD_PIECE(start, i);
            splits++;
        }
    }
#undef ADD_PIECE
    for (size_t k = 0; k < n; k++)
        if (jinja_array_push(out, jv_str(p + piece[2 * k], piece[2 * k + 1] - piece[2 * k])) != VT_OK) goto oom;
    free(piece);
    return out;
oom:
    free(piece);
    jinja_value_free(out);
    return nomem(cx);
}

static jinja_value *replace(jctx *cx, const jinja_value *s, const jinja_value *old, const jinja_value *new_,
                            int64_t count) {
    if (old->kind != JV_STRING || new_->kind != JV_STRING)
        return jctx_fail(cx, VT_E_INVALID, "TypeError: replace() argument must be str");
    jbuf b = {0};
    size_t i = 0, len = s->u.s.len, ol = old->u.s.len;
    int64_t done = 0;
    if (ol == 0) {
        /* Python inserts `new` between every character and at both ends */
        while (true) {
            if (count < 0 || done < count) {
                jbuf_put(&b, new_->u.s.p, new_->u.s.len);
                done++;
            }
            if (i >= len) break;
            size_t j = i;
            dec(s->u.s.p, len, &j);
            jbuf_put(&b, s->u.s.p + i, j - i);
            i = j;
        }
    } else {
        while (i < len) {
            if ((count < 0 || done < count) && i + ol <= len && !memcmp(s->u.s.p + i, old->u.s.p, ol)) {
                jbuf_put(&b, new_->u.s.p, new_->u.s.len);
                i += ol;
                done++;
            } else {
                jbuf_putc(&b, s->u.s.p[i++]);
            }
        }
    }
    return ok_or_nomem(cx, jbuf_to_value(&b, 0));
}

static bool starts_ends(const jinja_value *s, const jinja_value *x, bool end) {
    if (x->kind != JV_STRING || x->u.s.len > s->u.s.len) return false;
    return !memcmp(s->u.s.p + (end ? s->u.s.len - x->u.s.len : 0), x->u.s.p, x->u.s.len);
}

static jinja_value *prefix_test(jctx *cx, const jinja_value *s, const jinja_value *x, bool end) {
    if (!x) return jctx_fail(cx, VT_E_INVALID, "TypeError: %s expected at least 1 argument", end ? "endswith" : "startswith");
    if (x->kind == JV_ARRAY && (x->flags & JV_F_TUPLE)) {
        for (size_t i = 0; i < x->u.a.len; i++)
            if (starts_ends(s, x->u.a.v[i], end)) return jinja_bool(true);
        return jinja_bool(false);
    }
    if (x->kind != JV_STRING)
        return jctx_fail(cx, VT_E_INVALID, "TypeError: %s first arg must be str or a tuple of str, not %s",
                         end ? "endswith" : "startswith", jv_type_name(x));
    return jinja_bool(starts_ends(s, x, end));
}

static int64_t find(const jinja_value *s, const jinja_value *x, bool right) {
    if (x->u.s.len > s->u.s.len) return -1;
    if (!right) {
        const char *f = x->u.s.len ? memmem(s->u.s.p, s->u.s.len, x->u.s.p, x->u.s.len) : s->u.s.p;
        return f ? jv_utf8_len(s->u.s.p, (size_t)(f - s->u.s.p)) : -1;
    }
    for (int64_t i = (int64_t)(s->u.s.len - x->u.s.len); i >= 0; i--)
        if (!memcmp(s->u.s.p + i, x->u.s.p, x->u.s.len)) return jv_utf8_len(s->u.s.p, (size_t)i);
    return -1;
}

/* Python's str.format for {} / {0} / {name} fields with no format spec or
 * conversion other than !s / !r. */
static jinja_value *str_format(jctx *cx, const jinja_value *fmt, const jcall *c) {
    jbuf b = {0};
    const char *s = fmt->u.s.p;
    size_t len = fmt->u.s.len;
    int auto_idx = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '}' ) {
            if (i + 1 < len && s[i + 1] == '}') i++;
            jbuf_putc(&b, '}');
            continue;
        }
        if (s[i] != '{') {
            jbuf_putc(&b, s[i]);
            continue;
        }
        if (i + 1 < len && s[i + 1] == '{') {
            jbuf_putc(&b, '{');
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < len && s[j] != '}') j++;
        if (j >= len) goto bad;
        const char *field = s + i + 1;
        size_t fl = j - i - 1;
        char conv = 's';
        const char *bang = memchr(field, '!', fl);
        if (bang) {
            if (bang + 1 >= field + fl) goto bad;
            conv = bang[1];
            fl = (size_t)(bang - field);
        }
        if (memchr(field, ':', fl)) goto bad;
        const jinja_value *v = NULL;
        if (fl == 0) {
            v = auto_idx < c->n_args ? c->args[auto_idx] : NULL;
            auto_idx++;
        } else if (field[0] >= '0' && field[0] <= '9') {
            int k = atoi(field);
            v = k < c->n_args ? c->args[k] : NULL;
        } else {
            for (int k = 0; k < c->n_kw && !v; k++)
                if (strlen(c->kwnames[k]) == fl && !memcmp(c->kwnames[k], field, fl)) v = c->kw[k];
        }
        if (!v) goto bad;
        if (conv == 'r') jv_repr(&b, v);
        else jv_to_str(&b, v);
        i = j;
    }
    return ok_or_nomem(cx, jbuf_to_value(&b, 0));
bad:
    jbuf_release(&b);
    return jctx_fail(cx, VT_E_UNSUPPORTED, "str.format: a field vt does not support (or a missing argument)");
}

/* ---- sequences ------------------------------------------------------------------------------ */

static jinja_value *new_list(jctx *cx, uint8_t flags) {
    jinja_value *a = jinja_array();
    if (a) a->flags = flags;
    return a ? a : nomem(cx);
}

static bool push(jctx *cx, jinja_value *arr, jinja_value *v) {
    if (!v) return false;
    if (jinja_array_push(arr, v) != VT_OK) return nomem(cx), false;
    return true;
}

/* Jinja's attribute getter: "a.b.0" looks up each part with getitem. */
static jinja_value *get_path(jctx *cx, jinja_value *item, const jinja_value *attr) {
    if (attr->kind == JV_INT) return jget_item(cx, item, (jinja_value *)attr);
    if (attr->kind != JV_STRING) return jinja_value_ref(item);
    jinja_value *cur = jinja_value_ref(item);
    const char *p = attr->u.s.p, *end = p + attr->u.s.len;
    while (cur && p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        jinja_value *key;
        bool digits = n > 0;
        for (size_t k = 0; k < n; k++) digits &= p[k] >= '0' && p[k] <= '9';
        key = digits ? jinja_int(strtoll(p, NULL, 10)) : jv_str(p, n);
        if (!key) {
            jinja_value_free(cur);
            return nomem(cx);
        }
        jinja_value *next = jget_item(cx, cur, key);
        jinja_value_free(key);
        jinja_value_free(cur);
        cur = next;
        if (!dot) break;
        p = dot + 1;
    }
    return cur;
}

static jinja_value *iterate(jctx *cx, jinja_value *v) { return jiterate(cx, v); }

/* select/reject/selectattr/rejectattr: test args start at `first` of c. */
static jinja_value *select_common(jctx *cx, jinja_value *v, const jcall *c, bool attr, bool keep_if) {
    if (!jv_truthy(v)) return new_list(cx, JV_F_GEN); /* Jinja: `if value:` before iterating */
    jinja_value *items = iterate(cx, v);
    if (!items) return NULL;
    jinja_value *out = new_list(cx, JV_F_GEN);
    int first = attr ? 1 : 0;
    const jinja_value *attr_name = attr ? arg(c, 0, NULL) : NULL;
    const jinja_value *test = arg(c, first, NULL);
    if (attr && !attr_name) {
        jinja_value_free(items);
        jinja_value_free(out);
        return jctx_fail(cx, VT_E_INVALID, "TypeError: selectattr needs an attribute name");
    }
    if (test && test->kind != JV_STRING) {
        jinja_value_free(items);
        jinja_value_free(out);
        return jctx_fail(cx, VT_E_INVALID, "TypeError: a test name must be a string");
    }
    for (size_t i = 0; out && i < items->u.a.len; i++) {
        if (!jctx_step(cx)) goto fail;
        jinja_value *x = attr ? get_path(cx, items->u.a.v[i], attr_name) : jinja_value_ref(items->u.a.v[i]);
        if (!x) goto fail;
        bool r;
        if (test) {
            bool ok = jbuiltin_test(cx, test->u.s.p, x, c->args + first + 1,
                                    c->n_args > first + 1 ? c->n_args - first - 1 : 0, &r);
            if (!ok) {
                jinja_value_free(x);
                goto fail;
            }
        } else {
            r = jv_truthy(x);
        }
        jinja_value_free(x);
        if (r == keep_if && !push(cx, out, jinja_value_ref(items->u.a.v[i]))) goto fail;
    }
    jinja_value_free(items);
    return out;
fail:
    jinja_value_free(items);
    jinja_value_free(out);
    return NULL;
}

static jinja_value *map_filter(jctx *cx, jinja_value *v, const jcall *c) {
    if (!jv_truthy(v)) return new_list(cx, JV_F_GEN);
    jinja_value *items = iterate(cx, v);
    if (!items) return NULL;
    jinja_value *out = new_list(cx, JV_F_GEN);
    const jinja_value *attr = arg(c, -1, "attribute");
    const jinja_value *def = arg(c, -1, "default");
    const jinja_value *fname = attr ? NULL : arg(c, 0, NULL);
    if (!attr && (!fname || fname->kind != JV_STRING)) {
        jinja_value_free(items);
        jinja_value_free(out);
        return jctx_fail(cx, VT_E_INVALID, "map requires a filter argument");
    }
    for (size_t i = 0; out && i < items->u.a.len; i++) {
        if (!jctx_step(cx)) goto fail;
        jinja_value *x;
        if (attr) {
            x = get_path(cx, items->u.a.v[i], attr);
            if (x && x->kind == JV_UNDEFINED && def) {
                jinja_value_free(x);
                x = jinja_value_ref((jinja_value *)def);
            }
        } else {
            x = jbuiltin_filter(cx, fname->u.s.p, items->u.a.v[i], c->args + 1, c->n_args - 1,
                                c->kwnames, c->kw, c->n_kw);
        }
        if (!push(cx, out, x)) goto fail;
    }
    jinja_value_free(items);
    return out;
fail:
    jinja_value_free(items);
    jinja_value_free(out);
    return NULL;
}

/* Sort keys: case-folded strings unless case_sensitive. */
typedef struct sort_item {
    jinja_value *key;
    jinja_value *val;
    size_t idx;
} sort_item;

static _Thread_local jctx *sort_cx;
static _Thread_local bool sort_failed;

static int sort_cmp(const void *x, const void *y) {
    const sort_item *a = x, *b = y;
    int c = 0;
    if (!jv_compare(a->key, b->key, &c)) {
        if (!sort_failed && sort_cx)
            jctx_fail(sort_cx, VT_E_INVALID, "TypeError: '<' not supported between instances of '%s' and '%s'",
                      jv_type_name(a->key), jv_type_name(b->key));
        sort_failed = true;
        c = 0;
    }
    return c ? c : (a->idx < b->idx ? -1 : a->idx > b->idx);
}

static jinja_value *fold_key(jctx *cx, jinja_value *k, bool case_sensitive) {
    if (case_sensitive || k->kind != JV_STRING) return jinja_value_ref(k);
    return recase(cx, k, CASE_LOWER);
}

/* Sorts items (a list) by key_of(item); returns a new list of `val`s. */
static jinja_value *sort_values(jctx *cx, sort_item *it, size_t n, bool reverse, uint8_t flags) {
    jctx *saved_cx = sort_cx;
    bool saved_failed = sort_failed;
    sort_cx = cx;
    sort_failed = false;
    if (n > 1) qsort(it, n, sizeof *it, sort_cmp);
    bool failed = sort_failed;
    sort_cx = saved_cx;
    sort_failed = saved_failed;
    jinja_value *out = failed ? NULL : new_list(cx, flags);
    for (size_t i = 0; out && i < n; i++) {
        size_t k = reverse ? n - 1 - i : i;
        if (!push(cx, out, jinja_value_ref(it[k].val))) {
            jinja_value_free(out);
            out = NULL;
        }
    }
    return out;
}

static jinja_value *sort_filter(jctx *cx, jinja_value *v, const jcall *c, bool dictsort) {
    bool reverse = arg_bool(c, dictsort ? 2 : 0, "reverse", false);
    bool case_sensitive = arg_bool(c, dictsort ? 0 : 1, "case_sensitive", false);
    const jinja_value *attr = dictsort ? NULL : arg(c, 2, "attribute");
    const jinja_value *by = dictsort ? arg(c, 1, "by") : NULL;
    bool by_value = by && by->kind == JV_STRING && by->u.s.len == 5 && !memcmp(by->u.s.p, "value", 5);
    jinja_value *items = NULL;
    if (dictsort) {
        if (v->kind != JV_OBJECT) return jctx_fail(cx, VT_E_INVALID, "TypeError: dictsort needs a mapping");
        items = new_list(cx, 0);
        for (size_t i = 0; items && i < v->u.o.len; i++) {
            jinja_value *pair = new_list(cx, JV_F_TUPLE);
            if (!pair || !push(cx, pair, jinja_value_ref(v->u.o.e[i].key)) ||
                !push(cx, pair, jinja_value_ref(v->u.o.e[i].val)) || !push(cx, items, pair)) {
                jinja_value_free(items);
                return NULL;
            }
        }
    } else {
        items = iterate(cx, v);
    }
    if (!items) return NULL;
    size_t n = items->u.a.len;
    sort_item *it = jmem_alloc((n ? n : 1) * sizeof *it);
    if (!it) {
        jinja_value_free(items);
        return nomem(cx);
    }
    size_t made = 0;
    jinja_value *out = NULL;
    for (; made < n; made++) {
        jinja_value *x = items->u.a.v[made];
        jinja_value *k = dictsort ? jinja_value_ref(x->u.a.v[by_value ? 1 : 0])
                         : attr   ? get_path(cx, x, attr)
                                  : jinja_value_ref(x);
        jinja_value *fk = k ? fold_key(cx, k, case_sensitive) : NULL;
        jinja_value_free(k);
        if (!fk) goto done;
        it[made] = (sort_item){.key = fk, .val = x, .idx = made};
    }
    out = sort_values(cx, it, n, reverse, 0);
done:
    for (size_t i = 0; i < made; i++) jinja_value_free(it[i].key);
    jmem_free(it, (n ? n : 1) * sizeof *it);
    jinja_value_free(items);
    return out;
}

static jinja_value *minmax(jctx *cx, jinja_value *v, const jcall *c, bool want_max) {
    jinja_value *items = iterate(cx, v);
    if (!items) return NULL;
    bool case_sensitive = arg_bool(c, 0, "case_sensitive", false);
    const jinja_value *attr = arg(c, 1, "attribute");
    jinja_value *best = NULL, *best_key = NULL;
    for (size_t i = 0; i < items->u.a.len; i++) {
        jinja_value *x = items->u.a.v[i];
        jinja_value *k = attr ? get_path(cx, x, attr) : jinja_value_ref(x);
        jinja_value *fk = k ? fold_key(cx, k, case_sensitive) : NULL;
        jinja_value_free(k);
        if (!fk) goto fail;
        int cmp = 0;
        if (best_key && !jv_compare(fk, best_key, &cmp)) {
            jinja_value_free(fk);
            jctx_fail(cx, VT_E_INVALID, "TypeError: '<' not supported between these values");
            goto fail;
        }
        if (!best_key || (want_max ? cmp > 0 : cmp < 0)) {
            jinja_value_free(best_key);
            best_key = fk;
            best = x;
        } else {
            jinja_value_free(fk);
        }
    }
    jinja_value *r = best ? jinja_value_ref(best)
                          : jv_undefined("No aggregated item, sequence was empty.");
    jinja_value_free(best_key);
    jinja_value_free(items);
    return ok_or_nomem(cx, r);
fail:
    jinja_value_free(best_key);
    jinja_value_free(items);
    return NULL;
}

static jinja_value *unique(jctx *cx, jinja_value *v, const jcall *c) {
    jinja_value *items = iterate(cx, v);
    if (!items) return NULL;
    bool case_sensitive = arg_bool(c, 0, "case_sensitive", false);
    const jinja_value *attr = arg(c, 1, "attribute");
    jinja_value *seen = new_list(cx, 0), *out = new_list(cx, JV_F_GEN);
    for (size_t i = 0; seen && out && i < items->u.a.len; i++) {
        jinja_value *x = items->u.a.v[i];
        jinja_value *k = attr ? get_path(cx, x, attr) : jinja_value_ref(x);
        jinja_value *fk = k ? fold_key(cx, k, case_sensitive) : NULL;
        jinja_value_free(k);
        if (!fk) goto fail;
        bool dup = false;
        for (size_t s = 0; s < seen->u.a.len && !dup; s++) dup = jv_equal(seen->u.a.v[s], fk);
        if (dup) {
            jinja_value_free(fk);
            continue;
        }
        if (!push(cx, seen, fk) || !push(cx, out, jinja_value_ref(x))) goto fail;
    }
    jinja_value_free(seen);
    jinja_value_free(items);
    return out;
fail:
    jinja_value_free(seen);
    jinja_value_free(out);
    jinja_value_free(items);
    return NULL;
}

static jinja_value *length_of(jctx *cx, const jinja_value *v) {
    switch (v->kind) {
    case JV_STRING: return ok_or_nomem(cx, jinja_int(jv_utf8_len(v->u.s.p, v->u.s.len)));
    case JV_ARRAY:
        if (v->flags & JV_F_GEN) break;
        return ok_or_nomem(cx, jinja_int((int64_t)v->u.a.len));
    case JV_OBJECT: return ok_or_nomem(cx, jinja_int((int64_t)v->u.o.len));
    case JV_UNDEFINED: return ok_or_nomem(cx, jinja_int(0));
    default: break;
    }
    return type_err(cx, "TypeError: object of type '%s' has no len()", v);
}

static bool parse_py_int(const char *s, size_t len, int base, int64_t *out) {
    char tmp[80];
    size_t n = 0;
    size_t a = 0, z = len;
    while (a < z && py_space((unsigned char)s[a])) a++;
    while (z > a && py_space((unsigned char)s[z - 1])) z--;
    if (z - a == 0 || z - a >= sizeof tmp) return false;
    for (size_t i = a; i < z; i++) {
        if (s[i] == '_') {
            if (i == a || i + 1 == z || s[i + 1] == '_') return false;
            continue;
        }
        tmp[n++] = s[i];
    }
    tmp[n] = 0;
    char *end;
    long long v = strtoll(tmp, &end, base);
    if (*end || end == tmp) return false;
    *out = v;
    return true;
}

static jinja_value *indent(jctx *cx, jinja_value *v, const jcall *c) {
    jinja_value *s = to_string(cx, v);
    if (!s) return NULL;
    const jinja_value *w = arg(c, 0, "width");
    bool first = arg_bool(c, 1, "first", false), blank = arg_bool(c, 2, "blank", false);
    jbuf ind = {0};
    if (w && w->kind == JV_STRING) jbuf_put(&ind, w->u.s.p, w->u.s.len);
    else
        for (int64_t i = 0; i < (w && w->kind == JV_INT ? w->u.i : 4) && i < 4096; i++) jbuf_putc(&ind, ' ');
    /* Jinja: (s + "\n").splitlines(), i.e. the segments of s between line breaks,
     * the one after the last break included even when empty */
    jbuf b = {0};
    const char *p = s->u.s.p;
    size_t len = s->u.s.len, i = 0;
    for (bool first_line = true;; first_line = false) {
        size_t j = i;
        while (j < len && p[j] != '\n' && p[j] != '\r') j++;
        if (!first_line) {
            jbuf_putc(&b, '\n');
            if (blank || j > i) jbuf_put(&b, ind.p, ind.len);
        }
        jbuf_put(&b, p + i, j - i);
        if (j >= len) break;
        i = j + ((p[j] == '\r' && j + 1 < len && p[j + 1] == '\n') ? 2 : 1);
    }
    jinja_value *body = jbuf_to_value(&b, 0);
    jinja_value *r = NULL;
    if (body && first) {
        jbuf o = {0};
        jbuf_put(&o, ind.p, ind.len);
        jbuf_put(&o, body->u.s.p, body->u.s.len);
        r = jbuf_to_value(&o, 0);
        jinja_value_free(body);
    } else {
        r = body;
    }
    jbuf_release(&ind);
    jinja_value_free(s);
    return ok_or_nomem(cx, r);
}

static jinja_value *tojson(jctx *cx, jinja_value *v, const jcall *c) {
    bool ensure_ascii = arg_bool(c, 0, "ensure_ascii", false);
    const jinja_value *ind = arg(c, 1, "indent");
    const jinja_value *seps = arg(c, 2, "separators");
    bool sort_keys = arg_bool(c, 3, "sort_keys", false);
    int indent = -1;
    if (ind && ind->kind == JV_INT) indent = ind->u.i < 0 ? 0 : ind->u.i > 64 ? 64 : (int)ind->u.i;
    else if (ind && ind->kind != JV_NONE)
        return jctx_fail(cx, VT_E_UNSUPPORTED, "tojson: indent must be an integer");
    char item_sep[16] = {0}, key_sep[16] = {0};
    bool have_seps = false;
    if (seps && seps->kind == JV_ARRAY && seps->u.a.len == 2 && seps->u.a.v[0]->kind == JV_STRING &&
        seps->u.a.v[1]->kind == JV_STRING && seps->u.a.v[0]->u.s.len < 16 && seps->u.a.v[1]->u.s.len < 16) {
        memcpy(item_sep, seps->u.a.v[0]->u.s.p, seps->u.a.v[0]->u.s.len);
        memcpy(key_sep, seps->u.a.v[1]->u.s.p, seps->u.a.v[1]->u.s.len);
        have_seps = true;
    } else if (seps && seps->kind != JV_NONE) {
        return jctx_fail(cx, VT_E_UNSUPPORTED, "tojson: separators must be two short strings");
    }
    jbuf b = {.limit = cx->lim.max_output};
    char err[200] = {0};
    if (!jv_to_json(&b, v, ensure_ascii, indent, have_seps ? item_sep : NULL, have_seps ? key_sep : NULL,
                    sort_keys, err, sizeof err)) {
        jbuf_release(&b);
        return jctx_fail(cx, VT_E_INVALID, "%s", err);
    }
    if (b.failed) {
        jbuf_release(&b);
        return jctx_fail(cx, VT_E_RANGE, "tojson: the JSON passed %zu bytes", cx->lim.max_output);
    }
    return ok_or_nomem(cx, jbuf_to_value(&b, 0));
}

static jinja_value *items_of(jctx *cx, const jinja_value *v) {
    jinja_value *out = new_list(cx, 0);
    for (size_t i = 0; out && i < v->u.o.len; i++) {
        jinja_value *pair = new_list(cx, JV_F_TUPLE);
        if (!pair || !push(cx, pair, jinja_value_ref(v->u.o.e[i].key)) ||
            !push(cx, pair, jinja_value_ref(v->u.o.e[i].val)) || !push(cx, out, pair)) {
            jinja_value_free(out);
            return NULL;
        }
    }
    return out;
}

static jinja_value *html_escape_value(jctx *cx, jinja_value *v) {
    if (v->kind == JV_STRING && (v->flags & JV_F_SAFE)) return jinja_value_ref(v);
    jinja_value *s = to_string(cx, v);
    if (!s) return NULL;
    jbuf b = {0};
    for (size_t i = 0; i < s->u.s.len; i++) {
        char ch = s->u.s.p[i];
        switch (ch) {
        case '&': jbuf_put(&b, "&amp;", 5); break;
        case '<': jbuf_put(&b, "&lt;", 4); break;
        case '>': jbuf_put(&b, "&gt;", 4); break;
        case '"': jbuf_put(&b, "&#34;", 5); break;
        case '\'': jbuf_put(&b, "&#39;", 5); break;
        default: jbuf_putc(&b, ch);
        }
    }
    jinja_value_free(s);
    return ok_or_nomem(cx, jbuf_to_value(&b, JV_F_SAFE));
}

jinja_value *jbuiltin_filter(jctx *cx, const char *name, jinja_value *v, jinja_value **args, int n_args,
                             const char **kwnames, jinja_value **kw, int n_kw) {
    jcall c = {args, n_args, kwnames, kw, n_kw};
    if (!jctx_step(cx)) return NULL;
    if (!strcmp(name, "tojson")) return tojson(cx, v, &c);
    if (!strcmp(name, "length") || !strcmp(name, "count")) return length_of(cx, v);
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        jinja_value *def = arg(&c, 0, "default_value");
        bool boolean = arg_bool(&c, 1, "boolean", false);
        if (v->kind == JV_UNDEFINED || (boolean && !jv_truthy(v)))
            return def ? jinja_value_ref(def) : ok_or_nomem(cx, jv_str("", 0));
        return jinja_value_ref(v);
    }
    if (!strcmp(name, "string")) return to_string(cx, v);
    if (!strcmp(name, "safe")) {
        if (v->kind == JV_STRING && (v->flags & JV_F_SAFE)) return jinja_value_ref(v);
        jinja_value *s = jv_str_of(v);
        if (s) s->flags |= JV_F_SAFE;
        return ok_or_nomem(cx, s);
    }
    if (!strcmp(name, "escape") || !strcmp(name, "e")) return html_escape_value(cx, v);
    if (!strcmp(name, "trim")) {
        jinja_value *s = to_string(cx, v);
        if (!s) return NULL;
        jinja_value *r = strip(cx, s, arg(&c, 0, "chars"), 3);
        jinja_value_free(s);
        return r;
    }
    if (!strcmp(name, "lower") || !strcmp(name, "upper") || !strcmp(name, "capitalize") ||
        !strcmp(name, "title")) {
        jinja_value *s = to_string(cx, v);
        if (!s) return NULL;
        int mode = name[0] == 'l' ? CASE_LOWER : name[0] == 'u' ? CASE_UPPER : name[0] == 'c' ? CASE_CAPITALIZE : CASE_JINJA_TITLE;
        jinja_value *r = recase(cx, s, mode);
        jinja_value_free(s);
        return r;
    }
    if (!strcmp(name, "replace")) {
        const jinja_value *old = arg(&c, 0, "old"), *nw = arg(&c, 1, "new"), *cnt = arg(&c, 2, "count");
        if (!old || !nw) return jctx_fail(cx, VT_E_INVALID, "TypeError: replace needs old and new");
        jinja_value *s = to_string(cx, v);
        jinja_value *so = s ? jv_str_of(old) : NULL, *sn = so ? jv_str_of(nw) : NULL;
        jinja_value *r = sn ? replace(cx, s, so, sn, cnt && cnt->kind == JV_INT ? cnt->u.i : -1)
                            : (s ? nomem(cx) : NULL);
        jinja_value_free(s);
        jinja_value_free(so);
        jinja_value_free(sn);
        return r;
    }
    if (!strcmp(name, "join")) {
        const jinja_value *sep = arg(&c, 0, "d");
        const jinja_value *attr = arg(&c, 1, "attribute");
        jinja_value *items = iterate(cx, v);
        if (!items) return NULL;
        jbuf b = {0};
        for (size_t i = 0; i < items->u.a.len; i++) {
            if (i && sep) jv_to_str(&b, sep);
            jinja_value *x = attr ? get_path(cx, items->u.a.v[i], attr) : jinja_value_ref(items->u.a.v[i]);
            if (!x) {
                jbuf_release(&b);
                jinja_value_free(items);
                return NULL;
            }
            jv_to_str(&b, x);
            jinja_value_free(x);
        }
        jinja_value_free(items);
        return ok_or_nomem(cx, jbuf_to_value(&b, 0));
    }
    if (!strcmp(name, "list")) {
        jinja_value *items = iterate(cx, v);
        if (!items) return NULL;
        if (items->flags == 0) return items;
        jinja_value *out = new_list(cx, 0);
        for (size_t i = 0; out && i < items->u.a.len; i++)
            if (!push(cx, out, jinja_value_ref(items->u.a.v[i]))) {
                jinja_value_free(out);
                out = NULL;
            }
        jinja_value_free(items);
        return out;
    }
    if (!strcmp(name, "items")) {
        if (v->kind == JV_UNDEFINED) return new_list(cx, JV_F_GEN);
        if (v->kind != JV_OBJECT) return jctx_fail(cx, VT_E_INVALID, "TypeError: Can only get item pairs from a mapping.");
        jinja_value *r = items_of(cx, v);
        if (r) r->flags |= JV_F_GEN;
        return r;
    }
    if (!strcmp(name, "selectattr")) return select_common(cx, v, &c, true, true);
    if (!strcmp(name, "rejectattr")) return select_common(cx, v, &c, true, false);
    if (!strcmp(name, "select")) return select_common(cx, v, &c, false, true);
    if (!strcmp(name, "reject")) return select_common(cx, v, &c, false, false);
    if (!strcmp(name, "map")) return map_filter(cx, v, &c);
    if (!strcmp(name, "sort")) return sort_filter(cx, v, &c, false);
    if (!strcmp(name, "dictsort")) return sort_filter(cx, v, &c, true);
    if (!strcmp(name, "unique")) return unique(cx, v, &c);
    if (!strcmp(name, "min")) return minmax(cx, v, &c, false);
    if (!strcmp(name, "max")) return minmax(cx, v, &c, true);
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        jinja_value *items = iterate(cx, v);
        if (!items) return NULL;
        jinja_value *r = items->u.a.len ? jinja_value_ref(items->u.a.v[name[0] == 'f' ? 0 : items->u.a.len - 1])
                                        : jv_undefined("No %s item, sequence was empty.", name);
        jinja_value_free(items);
        return ok_or_nomem(cx, r);
    }
    if (!strcmp(name, "reverse")) {
        if (v->kind == JV_STRING) {
            jinja_value *chars = iterate(cx, v);
            if (!chars) return NULL;
            jbuf b = {0};
            for (size_t i = chars->u.a.len; i-- > 0;) jbuf_put(&b, chars->u.a.v[i]->u.s.p, chars->u.a.v[i]->u.s.len);
            jinja_value_free(chars);
            return ok_or_nomem(cx, jbuf_to_value(&b, 0));
        }
        jinja_value *items = iterate(cx, v);
        if (!items) return NULL;
        jinja_value *out = new_list(cx, JV_F_GEN);
        for (size_t i = items->u.a.len; out && i-- > 0;)
            if (!push(cx, out, jinja_value_ref(items->u.a.v[i]))) {
                jinja_value_free(out);
                out = NULL;
            }
        jinja_value_free(items);
        return out;
    }
    if (!strcmp(name, "int")) {
        const jinja_value *def = arg(&c, 0, "default");
        const jinja_value *base = arg(&c, 1, "base");
        int64_t r;
        if (v->kind == JV_INT || v->kind == JV_BOOL) return ok_or_nomem(cx, jinja_int(v->kind == JV_INT ? v->u.i : v->u.b));
        if (v->kind == JV_FLOAT && isfinite(v->u.f) && fabs(v->u.f) < 9.2e18) return ok_or_nomem(cx, jinja_int((int64_t)v->u.f));
        if (v->kind == JV_STRING) {
            if (parse_py_int(v->u.s.p, v->u.s.len, base && base->kind == JV_INT ? (int)base->u.i : 10, &r))
                return ok_or_nomem(cx, jinja_int(r));
            char *end;
            char tmp[64];
            if (v->u.s.len < sizeof tmp) {
                memcpy(tmp, v->u.s.p, v->u.s.len);
                tmp[v->u.s.len] = 0;
                double f = strtod(tmp, &end);
                if (end != tmp && *end == 0 && isfinite(f) && fabs(f) < 9.2e18) return ok_or_nomem(cx, jinja_int((int64_t)f));
            }
        }
        return def ? jinja_value_ref((jinja_value *)def) : ok_or_nomem(cx, jinja_int(0));
    }
    if (!strcmp(name, "float")) {
        const jinja_value *def = arg(&c, 0, "default");
        if (v->kind == JV_FLOAT) return jinja_value_ref(v);
        if (v->kind == JV_INT || v->kind == JV_BOOL) return ok_or_nomem(cx, jinja_float(v->kind == JV_INT ? (double)v->u.i : v->u.b));
        if (v->kind == JV_STRING && v->u.s.len < 64) {
            char tmp[64], *end;
            memcpy(tmp, v->u.s.p, v->u.s.len);
            tmp[v->u.s.len] = 0;
            double f = strtod(tmp, &end);
            if (end != tmp && *end == 0) return ok_or_nomem(cx, jinja_float(f));
        }
        return def ? jinja_value_ref((jinja_value *)def) : ok_or_nomem(cx, jinja_float(0.0));
    }
    if (!strcmp(name, "abs")) {
        if (v->kind == JV_INT && v->u.i != INT64_MIN) return ok_or_nomem(cx, jinja_int(v->u.i < 0 ? -v->u.i : v->u.i));
        if (v->kind == JV_FLOAT) return ok_or_nomem(cx, jinja_float(fabs(v->u.f)));
        return type_err(cx, "TypeError: bad operand type for abs(): '%s'", v);
    }
    if (!strcmp(name, "round")) {
        const jinja_value *prec = arg(&c, 0, "precision");
        const jinja_value *method = arg(&c, 1, "method");
        if (v->kind != JV_INT && v->kind != JV_FLOAT && v->kind != JV_BOOL)
            return type_err(cx, "TypeError: type %s doesn't define __round__ method", v);
        double x = v->kind == JV_FLOAT ? v->u.f : v->kind == JV_INT ? (double)v->u.i : v->u.b;
        double m = pow(10, prec && prec->kind == JV_INT ? (double)prec->u.i : 0);
        const char *meth = method && method->kind == JV_STRING ? method->u.s.p : "common";
        /* "common" is Python's round(): halves go to the even neighbour */
        double r = !strcmp(meth, "ceil") ? ceil(x * m) / m : !strcmp(meth, "floor") ? floor(x * m) / m : nearbyint(x * m) / m;
        return ok_or_nomem(cx, jinja_float(r));
    }
    if (!strcmp(name, "indent")) return indent(cx, v, &c);
    if (!strcmp(name, "sum")) {
        const jinja_value *attr = arg(&c, 0, "attribute");
        const jinja_value *start = arg(&c, 1, "start");
        jinja_value *items = iterate(cx, v);
        if (!items) return NULL;
        bool is_f = start && start->kind == JV_FLOAT;
        int64_t si = start && start->kind == JV_INT ? start->u.i : 0;
        double sf = start && start->kind == JV_FLOAT ? start->u.f : 0;
        for (size_t i = 0; i < items->u.a.len; i++) {
            jinja_value *x = attr ? get_path(cx, items->u.a.v[i], attr) : jinja_value_ref(items->u.a.v[i]);
            if (!x) {
                jinja_value_free(items);
                return NULL;
            }
            if (x->kind == JV_FLOAT) {
                if (!is_f) sf = (double)si, is_f = true;
                sf += x->u.f;
            } else if (x->kind == JV_INT || x->kind == JV_BOOL) {
                if (is_f) sf += x->kind == JV_INT ? (double)x->u.i : x->u.b;
                else si += x->kind == JV_INT ? x->u.i : x->u.b;
            } else {
                jinja_value_free(x);
                jinja_value_free(items);
                return jctx_fail(cx, VT_E_INVALID, "TypeError: unsupported operand type(s) for +");
            }
            jinja_value_free(x);
        }
        jinja_value_free(items);
        return ok_or_nomem(cx, is_f ? jinja_float(sf) : jinja_int(si));
    }
    if (!strcmp(name, "attr")) {
        const jinja_value *a = arg(&c, 0, "name");
        if (!a || a->kind != JV_STRING) return jctx_fail(cx, VT_E_INVALID, "attr needs a name");
        return jget_attr(cx, v, a->u.s.p, a->u.s.len);
    }
    if (!strcmp(name, "format")) {
        jinja_value *s = to_string(cx, v);
        if (!s) return NULL;
        jinja_value *tuple = new_list(cx, JV_F_TUPLE);
        for (int i = 0; tuple && i < n_args; i++)
            if (!push(cx, tuple, jinja_value_ref(args[i]))) {
                jinja_value_free(tuple);
                tuple = NULL;
            }
        jinja_value *r = tuple ? jv_str_percent(cx, s, n_args == 1 ? args[0] : tuple) : NULL;
        jinja_value_free(tuple);
        jinja_value_free(s);
        return r;
    }
    if (!strcmp(name, "wordcount")) {
        jinja_value *s = to_string(cx, v);
        if (!s) return NULL;
        jinja_value *w = split(cx, s, NULL, -1, false);
        jinja_value_free(s);
        if (!w) return NULL;
        jinja_value *r = jinja_int((int64_t)w->u.a.len);
        jinja_value_free(w);
        return ok_or_nomem(cx, r);
    }
    if (!strcmp(name, "center")) {
        jinja_value *s = to_string(cx, v);
        if (!s) return NULL;
        jinja_value *r = jbuiltin_method(cx, s, "center", args, n_args, kwnames, kw, n_kw);
        jinja_value_free(s);
        return r;
    }
    return jctx_fail(cx, VT_E_UNSUPPORTED, "TemplateAssertionError: No filter named '%s'.", name);
}

bool jbuiltin_has_filter(const char *name) {
    static const char *const names[] = {
        "tojson", "length", "count", "default", "d", "string", "safe", "escape", "e", "trim", "lower",
        "upper", "capitalize", "title", "replace", "join", "list", "items", "selectattr", "rejectattr",
        "select", "reject", "map", "sort", "dictsort", "unique", "min", "max", "first", "last",
        "reverse", "int", "float", "abs", "round", "indent", "sum", "attr", "format", "wordcount",
        "center", NULL};
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], name)) return true;
    return false;
}

/* ---- tests ------------------------------------------------------------------------------------ */

bool jbuiltin_has_test(const char *name) {
    static const char *const names[] = {
        "defined", "undefined", "none", "boolean", "false", "true", "integer", "float", "number",
        "string", "mapping", "iterable", "sequence", "callable", "sameas", "escaped", "odd", "even",
        "divisibleby", "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt",
        "greaterthan", ">", "ge", ">=", "in", "lower", "upper", "filter", "test", NULL};
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], name)) return true;
    return false;
}

bool jbuiltin_test(jctx *cx, const char *name, jinja_value *v, jinja_value **args, int n_args, bool *out) {
    jinja_value *a = n_args > 0 ? args[0] : NULL;
    jv_kind k = (jv_kind)v->kind;
    if (!strcmp(name, "defined")) *out = k != JV_UNDEFINED;
    else if (!strcmp(name, "undefined")) *out = k == JV_UNDEFINED;
    else if (!strcmp(name, "none")) *out = k == JV_NONE;
    else if (!strcmp(name, "boolean")) *out = k == JV_BOOL;
    else if (!strcmp(name, "false")) *out = k == JV_BOOL && !v->u.b;
    else if (!strcmp(name, "true")) *out = k == JV_BOOL && v->u.b;
    else if (!strcmp(name, "integer")) *out = k == JV_INT;
    else if (!strcmp(name, "float")) *out = k == JV_FLOAT;
    else if (!strcmp(name, "number")) *out = k == JV_INT || k == JV_FLOAT || k == JV_BOOL;
    else if (!strcmp(name, "string")) *out = k == JV_STRING;
    else if (!strcmp(name, "mapping")) *out = k == JV_OBJECT && !(v->flags & JV_F_NAMESPACE);
    else if (!strcmp(name, "iterable")) *out = k == JV_STRING || k == JV_ARRAY || k == JV_OBJECT || k == JV_UNDEFINED;
    else if (!strcmp(name, "sequence"))
        *out = k == JV_STRING || (k == JV_ARRAY && !(v->flags & JV_F_GEN)) ||
               (k == JV_OBJECT && !(v->flags & JV_F_NAMESPACE)) || k == JV_UNDEFINED;
    else if (!strcmp(name, "callable")) *out = k == JV_CALLABLE;
    else if (!strcmp(name, "escaped")) *out = k == JV_STRING && (v->flags & JV_F_SAFE);
    else if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        if (k != JV_STRING) {
            jinja_value *s = jv_str_of(v);
            if (!s) return jctx_nomem(cx), false;
            bool r = jbuiltin_test(cx, name, s, args, n_args, out);
            jinja_value_free(s);
            return r;
        }
        bool any = false, all = true;
        size_t i = 0;
        while (i < v->u.s.len) {
            uint32_t ch = dec(v->u.s.p, v->u.s.len, &i);
            bool up = is_cased_upper(ch), lo = is_cased_lower(ch);
            if (up || lo) any = true;
            if (name[0] == 'l' ? up : lo) all = false;
        }
        *out = any && all;
    } else if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
        if (k != JV_INT && k != JV_BOOL) {
            jctx_fail(cx, VT_E_INVALID, "TypeError: the %s test needs an integer, not %s", name, jv_type_name(v));
            return false;
        }
        int64_t x = k == JV_INT ? v->u.i : v->u.b;
        if (name[0] == 'd') {
            if (!a || a->kind != JV_INT || a->u.i == 0) {
                jctx_fail(cx, VT_E_INVALID, "divisibleby needs a non-zero integer");
                return false;
            }
            *out = a->u.i == -1 || x % a->u.i == 0;
        } else {
            *out = ((x % 2) != 0) == (name[0] == 'o');
        }
    } else if (!strcmp(name, "sameas")) {
        if (!a) goto need_arg;
        /* identity: scalars compare by value (CPython caches small ints and interns
         * short strings), containers by reference */
        *out = v == a || (k == a->kind && (k == JV_NONE || k == JV_UNDEFINED || k == JV_BOOL || k == JV_INT ||
                                            k == JV_FLOAT || k == JV_STRING) && jv_equal(v, a));
    } else if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) {
        if (!a) goto need_arg;
        *out = jv_equal(v, a);
    } else if (!strcmp(name, "ne") || !strcmp(name, "!=")) {
        if (!a) goto need_arg;
        *out = !jv_equal(v, a);
    } else if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<") || !strcmp(name, "le") ||
               !strcmp(name, "<=") || !strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">") ||
               !strcmp(name, "ge") || !strcmp(name, ">=")) {
        if (!a) goto need_arg;
        int c;
        if (k == JV_UNDEFINED || a->kind == JV_UNDEFINED) {
            jctx_fail(cx, VT_E_INVALID, "%s", (k == JV_UNDEFINED ? v : a)->u.s.p);
            return false;
        }
        if (!jv_compare(v, a, &c)) {
            jctx_fail(cx, VT_E_INVALID, "TypeError: '%s' not supported between instances of '%s' and '%s'", name,
                      jv_type_name(v), jv_type_name(a));
            return false;
        }
        bool lt = name[0] == 'l' || name[0] == '<', eq = strchr(name, 'e') && name[1] == 'e' ? true : strchr(name, '=') != NULL;
        if (!strcmp(name, "lessthan") || !strcmp(name, "greaterthan")) eq = false;
        *out = lt ? (eq ? c <= 0 : c < 0) : (eq ? c >= 0 : c > 0);
    } else if (!strcmp(name, "in")) {
        if (!a) goto need_arg;
        if (a->kind == JV_STRING) {
            if (k != JV_STRING) {
                jctx_fail(cx, VT_E_INVALID, "TypeError: 'in <string>' requires string as left operand");
                return false;
            }
            *out = memmem(a->u.s.p, a->u.s.len, v->u.s.p, v->u.s.len) != NULL || v->u.s.len == 0;
        } else if (a->kind == JV_ARRAY) {
            *out = false;
            for (size_t i = 0; i < a->u.a.len && !*out; i++) *out = jv_equal(a->u.a.v[i], v);
        } else if (a->kind == JV_OBJECT) {
            *out = jv_get_key_value(a, v) != NULL;
        } else if (a->kind == JV_UNDEFINED) {
            *out = false;
        } else {
            jctx_fail(cx, VT_E_INVALID, "TypeError: argument of type '%s' is not iterable", jv_type_name(a));
            return false;
        }
    } else if (!strcmp(name, "filter")) {
        *out = k == JV_STRING && jbuiltin_has_filter(v->u.s.p);
    } else if (!strcmp(name, "test")) {
        *out = k == JV_STRING && jbuiltin_has_test(v->u.s.p);
    } else {
        jctx_fail(cx, VT_E_UNSUPPORTED, "TemplateAssertionError: No test named '%s'.", name);
        return false;
    }
    return true;
need_arg:
    jctx_fail(cx, VT_E_INVALID, "TypeError: the %s test needs an argument", name);
    return false;
}

/* ---- methods ---------------------------------------------------------------------------------- */

static int64_t int_arg(const jcall *c, int idx, const char *name, int64_t def) {
    const jinja_value *v = arg(c, idx, name);
    return v && v->kind == JV_INT ? v->u.i : def;
}

static jinja_value *pad(jctx *cx, const jinja_value *s, int64_t width, const jinja_value *fill, int where) {
    int64_t len = jv_utf8_len(s->u.s.p, s->u.s.len);
    if (width > 1 << 20) return jctx_fail(cx, VT_E_RANGE, "padding width %lld is too large", (long long)width);
    const char *f = fill && fill->kind == JV_STRING && fill->u.s.len ? fill->u.s.p : " ";
    size_t fl = fill && fill->kind == JV_STRING && fill->u.s.len ? fill->u.s.len : 1;
    int64_t total = width > len ? width - len : 0;
    /* Python's center puts the extra space on the right when the string is even,
     * on the left when it is odd */
    int64_t left = where == 0 ? total / 2 + ((total & len & 1)) : where < 0 ? 0 : total;
    if (where == 0) left = total / 2 + (total % 2 != 0 && len % 2 != 0 ? 1 : 0);
    int64_t right = total - left;
    jbuf b = {0};
    for (int64_t i = 0; i < left; i++) jbuf_put(&b, f, fl);
    jbuf_put(&b, s->u.s.p, s->u.s.len);
    for (int64_t i = 0; i < right; i++) jbuf_put(&b, f, fl);
    return ok_or_nomem(cx, jbuf_to_value(&b, 0));
}

jinja_value *jbuiltin_method(jctx *cx, jinja_value *obj, const char *name, jinja_value **args, int n_args,
                             const char **kwnames, jinja_value **kw, int n_kw) {
    jcall c = {args, n_args, kwnames, kw, n_kw};
    if (!jctx_step(cx)) return NULL;
    if (obj->kind == JV_STRING) {
        const jinja_value *a0 = arg(&c, 0, NULL);
        if (!strcmp(name, "strip")) return strip(cx, obj, a0, 3);
        if (!strcmp(name, "lstrip")) return strip(cx, obj, a0, 1);
        if (!strcmp(name, "rstrip")) return strip(cx, obj, a0, 2);
        if (!strcmp(name, "split")) return split(cx, obj, arg(&c, 0, "sep"), int_arg(&c, 1, "maxsplit", -1), false);
        if (!strcmp(name, "rsplit")) return split(cx, obj, arg(&c, 0, "sep"), int_arg(&c, 1, "maxsplit", -1), true);
        if (!strcmp(name, "startswith")) return ok_or_nomem(cx, prefix_test(cx, obj, a0, false));
        if (!strcmp(name, "endswith")) return ok_or_nomem(cx, prefix_test(cx, obj, a0, true));
        if (!strcmp(name, "lower")) return recase(cx, obj, CASE_LOWER);
        if (!strcmp(name, "upper")) return recase(cx, obj, CASE_UPPER);
        if (!strcmp(name, "title")) return recase(cx, obj, CASE_TITLE);
        if (!strcmp(name, "capitalize")) return recase(cx, obj, CASE_CAPITALIZE);
        if (!strcmp(name, "replace")) {
            const jinja_value *o = arg(&c, 0, NULL), *n = arg(&c, 1, NULL);
            if (!o || !n) return jctx_fail(cx, VT_E_INVALID, "TypeError: replace expected at least 2 arguments");
            jinja_value *r = replace(cx, obj, o, n, int_arg(&c, 2, "count", -1));
            if (r) r->flags |= obj->flags & JV_F_SAFE;
            return r;
        }
        if (!strcmp(name, "format")) return str_format(cx, obj, &c);
        if (!strcmp(name, "join")) {
            if (!a0) return jctx_fail(cx, VT_E_INVALID, "TypeError: join() takes exactly one argument");
            jinja_value *items = jiterate(cx, (jinja_value *)a0);
            if (!items) return NULL;
            jbuf b = {0};
            for (size_t i = 0; i < items->u.a.len; i++) {
                if (items->u.a.v[i]->kind != JV_STRING) {
                    jbuf_release(&b);
                    jinja_value_free(items);
                    return jctx_fail(cx, VT_E_INVALID, "TypeError: sequence item %zu: expected str instance, %s found",
                                     i, jv_type_name(items->u.a.v[i]));
                }
                if (i) jbuf_put(&b, obj->u.s.p, obj->u.s.len);
                jbuf_put(&b, items->u.a.v[i]->u.s.p, items->u.a.v[i]->u.s.len);
            }
            jinja_value_free(items);
            return ok_or_nomem(cx, jbuf_to_value(&b, 0));
        }
        if (!strcmp(name, "find") || !strcmp(name, "rfind") || !strcmp(name, "index") || !strcmp(name, "rindex")) {
            if (!a0 || a0->kind != JV_STRING) return jctx_fail(cx, VT_E_INVALID, "TypeError: must be str");
            int64_t r = find(obj, a0, name[0] == 'r');
            if (r < 0 && strstr(name, "index")) return jctx_fail(cx, VT_E_INVALID, "ValueError: substring not found");
            return ok_or_nomem(cx, jinja_int(r));
        }
        if (!strcmp(name, "count")) {
            if (!a0 || a0->kind != JV_STRING) return jctx_fail(cx, VT_E_INVALID, "TypeError: must be str");
            int64_t n = 0;
            if (a0->u.s.len == 0) {
                n = jv_utf8_len(obj->u.s.p, obj->u.s.len) + 1;
            } else {
                for (size_t i = 0; i + a0->u.s.len <= obj->u.s.len;) {
                    if (!memcmp(obj->u.s.p + i, a0->u.s.p, a0->u.s.len)) {
                        n++;
                        i += a0->u.s.len;
                    } else {
                        i++;
                    }
                }
            }
            return ok_or_nomem(cx, jinja_int(n));
        }
        if (!strcmp(name, "isdigit") || !strcmp(name, "isalpha") || !strcmp(name, "isalnum") ||
            !strcmp(name, "isspace") || !strcmp(name, "islower") || !strcmp(name, "isupper") ||
            !strcmp(name, "isnumeric") || !strcmp(name, "isdecimal")) {
            if (!strcmp(name, "islower") || !strcmp(name, "isupper")) {
                bool r;
                if (!jbuiltin_test(cx, name + 2, obj, NULL, 0, &r)) return NULL;
                return ok_or_nomem(cx, jinja_bool(r));
            }
            bool r = obj->u.s.len > 0;
            size_t i = 0;
            while (r && i < obj->u.s.len) {
                uint32_t ch = dec(obj->u.s.p, obj->u.s.len, &i);
                bool digit = ch >= '0' && ch <= '9';
                if (name[2] == 'd' || name[2] == 'n') r = digit;
                else if (!strcmp(name, "isalpha")) r = is_alpha(ch);
                else if (!strcmp(name, "isalnum")) r = digit || is_alpha(ch);
                else r = py_space(ch);
            }
            return ok_or_nomem(cx, jinja_bool(r));
        }
        if (!strcmp(name, "splitlines")) {
            jinja_value *out = new_list(cx, 0);
            size_t i = 0, len = obj->u.s.len;
            const char *p = obj->u.s.p;
            bool keep = arg_bool(&c, 0, "keepends", false);
            while (out && i < len) {
                size_t j = i;
                while (j < len && p[j] != '\n' && p[j] != '\r') j++;
                size_t e = j;
                if (j < len) e += (p[j] == '\r' && j + 1 < len && p[j + 1] == '\n') ? 2 : 1;
                if (!push(cx, out, jv_str(p + i, (keep ? e : j) - i))) {
                    jinja_value_free(out);
                    return NULL;
                }
                i = e;
            }
            return out;
        }
        if (!strcmp(name, "center")) return pad(cx, obj, int_arg(&c, 0, "width", 0), arg(&c, 1, "fillchar"), 0);
        if (!strcmp(name, "ljust")) return pad(cx, obj, int_arg(&c, 0, "width", 0), arg(&c, 1, "fillchar"), -1);
        if (!strcmp(name, "rjust")) return pad(cx, obj, int_arg(&c, 0, "width", 0), arg(&c, 1, "fillchar"), 1);
    } else if (obj->kind == JV_OBJECT) {
        if (!strcmp(name, "get")) {
            const jinja_value *k = arg(&c, 0, NULL), *def = arg(&c, 1, NULL);
            if (!k) return jctx_fail(cx, VT_E_INVALID, "TypeError: get expected at least 1 argument, got 0");
            jinja_value *r = jv_get_key_value(obj, k);
            if (r) return jinja_value_ref(r);
            return def ? jinja_value_ref((jinja_value *)def) : ok_or_nomem(cx, jinja_none());
        }
        if (!strcmp(name, "items")) return items_of(cx, obj);
        if (!strcmp(name, "keys")) return jiterate(cx, obj);
        if (!strcmp(name, "values")) {
            jinja_value *out = new_list(cx, 0);
            for (size_t i = 0; out && i < obj->u.o.len; i++)
                if (!push(cx, out, jinja_value_ref(obj->u.o.e[i].val))) {
                    jinja_value_free(out);
                    return NULL;
                }
            return out;
        }
        if (!strcmp(name, "copy")) return jinja_value_ref(obj);
        if (!strcmp(name, "pop") || !strcmp(name, "update") || !strcmp(name, "setdefault") ||
            !strcmp(name, "clear") || !strcmp(name, "popitem"))
            return jctx_fail(cx, VT_E_INVALID, "SecurityError: access to attribute '%s' of 'dict' object is unsafe.", name);
        jinja_value *fn = jget_attr(cx, obj, name, strlen(name));
        if (!fn) return NULL;
        jinja_value *r = jcall_value(cx, fn, args, n_args, kwnames, kw, n_kw);
        jinja_value_free(fn);
        return r;
    } else if (obj->kind == JV_ARRAY) {
        if (!strcmp(name, "index") || !strcmp(name, "count")) {
            const jinja_value *x = arg(&c, 0, NULL);
            if (!x) return jctx_fail(cx, VT_E_INVALID, "TypeError: %s expected 1 argument", name);
            int64_t n = 0;
            for (size_t i = 0; i < obj->u.a.len; i++) {
                if (!jv_equal(obj->u.a.v[i], x)) continue;
                if (name[0] == 'i') return ok_or_nomem(cx, jinja_int((int64_t)i));
                n++;
            }
            if (name[0] == 'i') return jctx_fail(cx, VT_E_INVALID, "ValueError: value is not in list");
            return ok_or_nomem(cx, jinja_int(n));
        }
        if (!strcmp(name, "append") || !strcmp(name, "pop") || !strcmp(name, "insert") || !strcmp(name, "extend") ||
            !strcmp(name, "remove") || !strcmp(name, "sort") || !strcmp(name, "reverse") || !strcmp(name, "clear"))
            return jctx_fail(cx, VT_E_INVALID, "SecurityError: access to attribute '%s' of '%s' object is unsafe.",
                             name, jv_type_name(obj));
    }
    return jctx_fail(cx, VT_E_INVALID, "UndefinedError: '%s object' has no attribute '%s'", jv_type_name(obj), name);
}

/* ---- globals ----------------------------------------------------------------------------------- */

static const char *const GLOBALS[] = {"range", "namespace", "dict", "raise_exception", "strftime_now", NULL};

int jbuiltin_global_find(const char *name) {
    for (int i = 0; GLOBALS[i]; i++)
        if (!strcmp(GLOBALS[i], name)) return i;
    return -1;
}

static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

jinja_value *jbuiltin_global_call(jctx *cx, int global, jinja_value **args, int n_args, const char **kwnames,
                                  jinja_value **kw, int n_kw) {
    jcall c = {args, n_args, kwnames, kw, n_kw};
    const char *name = GLOBALS[global];
    if (!strcmp(name, "range")) {
        int64_t start = 0, stop, step = 1;
        for (int i = 0; i < n_args; i++)
            if (args[i]->kind != JV_INT && args[i]->kind != JV_BOOL)
                return type_err(cx, "TypeError: '%s' object cannot be interpreted as an integer", args[i]);
#define IV(x) ((x)->kind == JV_INT ? (x)->u.i : (int64_t)(x)->u.b)
        if (n_args == 1) stop = IV(args[0]);
        else if (n_args == 2 || n_args == 3) {
            start = IV(args[0]);
            stop = IV(args[1]);
            if (n_args == 3) step = IV(args[2]);
        } else {
            return jctx_fail(cx, VT_E_INVALID, "TypeError: range expected 1 to 3 arguments, got %d", n_args);
        }
#undef IV
        if (step == 0) return jctx_fail(cx, VT_E_INVALID, "ValueError: range() arg 3 must not be zero");
        double count = step > 0 ? ceil(((double)stop - (double)start) / (double)step)
                                : ceil(((double)start - (double)stop) / (double)-step);
        if (count > 100000)
            return jctx_fail(cx, VT_E_RANGE, "OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
        jinja_value *out = new_list(cx, 0);
        for (int64_t i = start; out && (step > 0 ? i < stop : i > stop); i += step)
            if (!push(cx, out, jinja_int(i))) {
                jinja_value_free(out);
                return NULL;
            }
        return out;
    }
    if (!strcmp(name, "namespace") || !strcmp(name, "dict")) {
        jinja_value *o = jinja_object();
        if (!o) return nomem(cx);
        if (name[0] == 'n') o->flags |= JV_F_NAMESPACE;
        for (int i = 0; i < n_args; i++) {
            if (args[i]->kind != JV_OBJECT) {
                jinja_value_free(o);
                return jctx_fail(cx, VT_E_INVALID, "TypeError: %s() takes a mapping as positional argument", name);
            }
            for (size_t k = 0; k < args[i]->u.o.len; k++) {
                jinja_value *key = args[i]->u.o.e[k].key;
                if (jv_object_set_value(o, key, jinja_value_ref(args[i]->u.o.e[k].val)) != VT_OK) {
                    jinja_value_free(o);
                    return nomem(cx);
                }
            }
        }
        for (int i = 0; i < n_kw; i++)
            if (jinja_object_set(o, kwnames[i], strlen(kwnames[i]), jinja_value_ref(kw[i])) != VT_OK) {
                jinja_value_free(o);
                return nomem(cx);
            }
        return o;
    }
    if (!strcmp(name, "raise_exception")) {
        const jinja_value *m = arg(&c, 0, "message");
        jbuf b = {0};
        if (m) jv_to_str(&b, m);
        jctx_fail(cx, VT_E_INVALID, "%s", b.p ? b.p : "");
        jbuf_release(&b);
        return NULL;
    }
    if (!strcmp(name, "strftime_now")) {
        const jinja_value *f = arg(&c, 0, "format");
        if (!f || f->kind != JV_STRING) return jctx_fail(cx, VT_E_INVALID, "TypeError: strftime_now needs a format string");
        struct tm tm = {0};
        tm.tm_year = cx->year - 1900;
        tm.tm_mon = cx->month - 1;
        tm.tm_mday = cx->day;
        int64_t days = days_from_civil(cx->year, cx->month, cx->day);
        tm.tm_wday = (int)(((days % 7) + 11) % 7); /* 1970-01-01 was a Thursday */
        tm.tm_yday = (int)(days - days_from_civil(cx->year, 1, 1));
        tm.tm_isdst = 0;
        char out[512];
        if (f->u.s.len >= 200 || memchr(f->u.s.p, 0, f->u.s.len))
            return jctx_fail(cx, VT_E_UNSUPPORTED, "strftime_now: format too long");
        size_t n = f->u.s.len ? strftime(out, sizeof out, f->u.s.p, &tm) : 0;
        return ok_or_nomem(cx, jv_str(out, n));
    }
    return jctx_fail(cx, VT_E_INVALID, "unknown global");
}
