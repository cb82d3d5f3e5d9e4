/* GBNF text to the compiled byte-level grammar (grammar.h): llama.cpp's
 * grammar-parser, with characters lowered to UTF-8 byte sets as they are read,
 * then checks (every rule defined, no left recursion). */
#include "grammar/grammar_impl.h"

#include "base/status.h"
#include "tokenizer/unicode.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CLASS_RANGES 4096 /* ranges in one [...] */
#define NAME_HASH_BITS 14     /* > 2 * GRAMMAR_MAX_RULES slots */

typedef struct cp_range {
    uint32_t lo, hi;
} cp_range;

typedef struct rule_buf {
    gelem *el;
    int32_t n, cap;
    char *name;   /* user rules: their name; generated: the parent's with a suffix */
    bool defined;
    bool named;   /* a user rule (looked up by name) */
} rule_buf;

typedef struct parser {
    const char *src, *end, *pos;
    rule_buf *rules;
    int32_t n_rules, cap_rules;
    gset *sets;
    int32_t n_sets, cap_sets;
    int32_t byte_set[256]; /* the singleton set of each byte, -1 until made */
    int32_t any_rule;      /* the rule of '.', -1 until made */
    int64_t n_elems;       /* in all rules */
    int depth;
    int32_t name_slot[1 << NAME_HASH_BITS]; /* rule id + 1, 0: empty */
    cp_range *cls, *cls_out, *cls_fin; /* (MAX_CLASS_RANGES + 8) each: a class being read */
    const grammar_tokens *tokens;      /* resolves token references; NULL: none */
    vt_status st;
    char msg[256];
} parser;

/* ---- errors ---------------------------------------------------------------------- */

static vt_status perr(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static vt_status perr(parser *p, const char *fmt, ...) {
    if (p->st != VT_OK) return p->st;
    int line = 1, col = 1;
    for (const char *c = p->src; c < p->pos && c < p->end; c++) {
        if (*c == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(p->msg, sizeof p->msg, "grammar: line %d, column %d: %s", line, col, what);
    p->st = VT_E_INVALID;
    return p->st;
}

static vt_status oom(parser *p) {
    if (p->st != VT_OK) return p->st;
    snprintf(p->msg, sizeof p->msg, "grammar: out of memory");
    p->st = VT_E_NOMEM;
    return p->st;
}

/* ---- rules, elements, sets ----------------------------------------------------- */

static uint32_t name_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static int32_t new_rule(parser *p, const char *name, size_t name_len, bool named) {
    if (p->n_rules >= GRAMMAR_MAX_RULES) {
        perr(p, "more than %d rules (repetitions and groups count)", GRAMMAR_MAX_RULES);
        return -1;
    }
    if (p->n_rules == p->cap_rules) {
        int32_t c = p->cap_rules ? p->cap_rules * 2 : 32;
        rule_buf *r = realloc(p->rules, sizeof *r * (size_t)c);
        if (!r) return oom(p), -1;
        p->rules = r;
        p->cap_rules = c;
    }
    rule_buf *r = &p->rules[p->n_rules];
    memset(r, 0, sizeof *r);
    r->name = malloc(name_len + 1);
    if (!r->name) return oom(p), -1;
    memcpy(r->name, name, name_len);
    r->name[name_len] = 0;
    r->named = named;
    return p->n_rules++;
}

/* The id of a named rule, made (undefined) on first sight. */
static int32_t rule_id(parser *p, const char *name, size_t n) {
    uint32_t mask = (1u << NAME_HASH_BITS) - 1, h = name_hash(name, n) & mask;
    for (;; h = (h + 1) & mask) {
        int32_t id = p->name_slot[h] - 1;
        if (id < 0) break;
        if (strlen(p->rules[id].name) == n && !memcmp(p->rules[id].name, name, n)) return id;
    }
    int32_t id = new_rule(p, name, n, true);
    if (id >= 0) p->name_slot[h] = id + 1;
    return id;
}

/* A generated rule: "<parent>-<n>" for messages. */
static int32_t gen_rule(parser *p, int32_t parent) {
    char name[96];
    snprintf(name, sizeof name, "%.64s-%d", parent >= 0 ? p->rules[parent].name : "gen", p->n_rules);
    return new_rule(p, name, strlen(name), false);
}

static bool push_el(parser *p, int32_t rule, uint8_t type, int32_t v) {
    if (p->st != VT_OK) return false;
    if (p->n_elems >= GRAMMAR_MAX_ELEMS) {
        perr(p, "the grammar compiles to more than %d elements (repetitions multiply)", GRAMMAR_MAX_ELEMS);
        return false;
    }
    rule_buf *r = &p->rules[rule];
    if (r->n == r->cap) {
        int32_t c = r->cap ? r->cap * 2 : 16;
        gelem *e = realloc(r->el, sizeof *e * (size_t)c);
        if (!e) return oom(p), false;
        r->el = e;
        r->cap = c;
    }
    r->el[r->n++] = (gelem){.type = type, .v = v};
    p->n_elems++;
    return true;
}

static int32_t new_set(parser *p, const gset *s) {
    if (p->n_sets >= GRAMMAR_MAX_ELEMS) {
        perr(p, "more than %d character sets", GRAMMAR_MAX_ELEMS);
        return -1;
    }
    if (p->n_sets == p->cap_sets) {
        int32_t c = p->cap_sets ? p->cap_sets * 2 : 64;
        gset *n = realloc(p->sets, sizeof *n * (size_t)c);
        if (!n) return oom(p), -1;
        p->sets = n;
        p->cap_sets = c;
    }
    p->sets[p->n_sets] = *s;
    return p->n_sets++;
}

static void set_range(gset *s, unsigned lo, unsigned hi) {
    for (unsigned b = lo; b <= hi && b < 256; b++) s->bits[b >> 5] |= 1u << (b & 31);
}

static bool push_byte(parser *p, int32_t rule, uint8_t b) {
    if (p->byte_set[b] < 0) {
        gset s = {{0}};
        set_range(&s, b, b);
        p->byte_set[b] = new_set(p, &s);
        if (p->byte_set[b] < 0) return false;
    }
    return push_el(p, rule, GE_SET, p->byte_set[b]);
}

/* ---- character classes as UTF-8 byte sequences --------------------------------- */

typedef struct class_build {
    parser *p;
    int32_t rule;  /* the generated rule taking the multi-byte alternatives */
    gset ascii;    /* the one-byte alternatives, merged */
    bool any_ascii;
    bool ok;
} class_build;

/* Code points lo..hi (one UTF-8 length, same high bits) as one alternative. */
static void class_emit(class_build *b, uint32_t lo, uint32_t hi) {
    uint8_t a[4], z[4];
    const int n = uni_encode(lo, a);
    uni_encode(hi, z);
    if (n == 1) {
        set_range(&b->ascii, a[0], z[0]);
        b->any_ascii = true;
        return;
    }
    parser *p = b->p;
    if (p->rules[b->rule].n > 0 && !push_el(p, b->rule, GE_ALT, 0)) {
        b->ok = false;
        return;
    }
    for (int i = 0; i < n; i++) {
        gset s = {{0}};
        set_range(&s, a[i], z[i]);
        const int32_t id = a[i] == z[i] && p->byte_set[a[i]] >= 0 ? p->byte_set[a[i]] : new_set(p, &s);
        if (id < 0 || !push_el(p, b->rule, GE_SET, id)) {
            b->ok = false;
            return;
        }
    }
}

/* Split lo..hi into ranges whose UTF-8 forms differ only in byte ranges
 * (Russ Cox's utf8 range split, as RE2 and Go's regexp compile classes). */
static void class_split(class_build *b, uint32_t lo, uint32_t hi) {
    if (lo > hi || !b->ok) return;
    static const uint32_t bounds[3] = {0x7f, 0x7ff, 0xffff};
    for (int i = 0; i < 3; i++) {
        if (lo <= bounds[i] && hi > bounds[i]) {
            class_split(b, lo, bounds[i]);
            class_split(b, bounds[i] + 1, hi);
            return;
        }
    }
    if (hi <= 0x7f) {
        class_emit(b, lo, hi);
        return;
    }
    const int n = hi <= 0x7ff ? 2 : hi <= 0xffff ? 3 : 4;
    for (int i = 1; i < n; i++) {
        const uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                class_split(b, lo, lo | m);
                class_split(b, (lo | m) + 1, hi);
                return;
            }
            if ((hi & m) != m) {
                class_split(b, lo, (hi & ~m) - 1);
                class_split(b, hi & ~m, hi);
                return;
            }
        }
    }
    class_emit(b, lo, hi);
}

static int cmp_range(const void *x, const void *y) {
    const cp_range *a = x, *b = y;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Push the terminal(s) for a class of n ranges onto rule `into`. */
static bool push_class(parser *p, int32_t into, cp_range *r, int32_t n, bool negate) {
    if (n > 0) qsort(r, (size_t)n, sizeof *r, cmp_range);
    int32_t m = 0; /* merged */
    for (int32_t i = 0; i < n; i++) {
        if (m > 0 && r[i].lo <= r[m - 1].hi + 1) {
            if (r[i].hi > r[m - 1].hi) r[m - 1].hi = r[i].hi;
        } else {
            r[m++] = r[i];
        }
    }
    cp_range *out = p->cls_out;
    int32_t k = 0;
    if (negate) {
        uint32_t next = 0;
        for (int32_t i = 0; i < m; i++) {
            if (r[i].lo > next) out[k++] = (cp_range){next, r[i].lo - 1};
            next = r[i].hi + 1;
        }
        if (next <= 0x10ffff) out[k++] = (cp_range){next, 0x10ffff};
    } else {
        if (m > 0) memcpy(out, r, sizeof *r * (size_t)m);
        k = m;
    }
    /* surrogates have no UTF-8 form */
    cp_range *fin = p->cls_fin;
    int32_t f = 0;
    for (int32_t i = 0; i < k; i++) {
        uint32_t lo = out[i].lo, hi = out[i].hi > 0x10ffff ? 0x10ffff : out[i].hi;
        if (lo > hi) continue;
        if (hi < 0xd800 || lo > 0xdfff) {
            fin[f++] = (cp_range){lo, hi};
        } else {
            if (lo < 0xd800) fin[f++] = (cp_range){lo, 0xd7ff};
            if (hi > 0xdfff) fin[f++] = (cp_range){0xe000, hi};
        }
    }
    if (f == 0) return perr(p, "the character class matches no character"), false;
    if (fin[f - 1].hi <= 0x7f) { /* ASCII: one byte set */
        gset s = {{0}};
        for (int32_t i = 0; i < f; i++) set_range(&s, fin[i].lo, fin[i].hi);
        const int32_t id = new_set(p, &s);
        return id >= 0 && push_el(p, into, GE_SET, id);
    }
    class_build b = {.p = p, .ok = true};
    b.rule = gen_rule(p, into);
    if (b.rule < 0) return false;
    p->rules[b.rule].defined = true;
    for (int32_t i = 0; i < f && b.ok; i++) class_split(&b, fin[i].lo, fin[i].hi);
    if (!b.ok) return false;
    if (b.any_ascii) {
        const int32_t id = new_set(p, &b.ascii);
        if (id < 0) return false;
        if (p->rules[b.rule].n > 0 && !push_el(p, b.rule, GE_ALT, 0)) return false;
        if (!push_el(p, b.rule, GE_SET, id)) return false;
    }
    if (!push_el(p, b.rule, GE_END, 0)) return false;
    return push_el(p, into, GE_REF, b.rule);
}

/* ---- the text ------------------------------------------------------------------- */

static inline int cur(const parser *p) { return p->pos < p->end ? (uint8_t)*p->pos : -1; }
static inline int at(const parser *p, size_t k) {
    return p->pos + k < p->end ? (uint8_t)p->pos[k] : -1;
}

static bool is_word(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static void skip_space(parser *p, bool newline_ok) {
    for (;;) {
        const int c = cur(p);
        if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
            p->pos++;
        } else if (c == '#') {
            while (cur(p) >= 0 && cur(p) != '\r' && cur(p) != '\n') p->pos++;
        } else {
            return;
        }
    }
}

static bool parse_hex(parser *p, int digits, uint32_t *cp) {
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        const int c = cur(p);
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return perr(p, "expected %d hex digits", digits), false;
        v = v * 16 + (uint32_t)d;
        p->pos++;
    }
    if (v > 0x10ffff) return perr(p, "code point U+%X is past U+10FFFF", v), false;
    *cp = v;
    return true;
}

/* One character of a literal or class: an escape or a UTF-8 sequence. */
static bool parse_char(parser *p, uint32_t *cp) {
    int c = cur(p);
    if (c < 0) return perr(p, "unexpected end of the grammar"), false;
    if (c == '\\') {
        p->pos++;
        c = cur(p);
        p->pos++;
        switch (c) {
        case 'x': return parse_hex(p, 2, cp);
        case 'u': return parse_hex(p, 4, cp);
        case 'U': return parse_hex(p, 8, cp);
        case 't': *cp = '\t'; return true;
        case 'r': *cp = '\r'; return true;
        case 'n': *cp = '\n'; return true;
        case '\\': case '"': case '[': case ']': case '-': *cp = (uint32_t)c; return true;
        default:
            p->pos--;
            return perr(p, "unknown escape '\\%c'", c >= 32 && c < 127 ? c : '?'), false;
        }
    }
    const uint8_t b = (uint8_t)c;
    const int n = b < 0x80 ? 1 : b >= 0xc2 && b < 0xe0 ? 2 : b >= 0xe0 && b < 0xf0 ? 3 : b >= 0xf0 && b < 0xf5 ? 4 : 0;
    if (n == 0) return perr(p, "invalid UTF-8 byte 0x%02x", b), false;
    uint32_t v = n == 1 ? b : n == 2 ? b & 0x1fu : n == 3 ? b & 0x0fu : b & 0x07u;
    for (int i = 1; i < n; i++) {
        const int x = at(p, (size_t)i);
        if (x < 0 || (x & 0xc0) != 0x80) return perr(p, "invalid UTF-8 sequence"), false;
        v = (v << 6) | (uint32_t)(x & 0x3f);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min[n] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return perr(p, "invalid UTF-8 sequence"), false;
    p->pos += n;
    *cp = v;
    return true;
}

static bool parse_int(parser *p, uint64_t *out) {
    if (cur(p) < '0' || cur(p) > '9') return perr(p, "expected a number"), false;
    uint64_t v = 0;
    while (cur(p) >= '0' && cur(p) <= '9') {
        v = v * 10 + (uint64_t)(cur(p) - '0');
        if (v > 1000000) return perr(p, "repetition count too large (at most %d)", GRAMMAR_MAX_REPEAT), false;
        p->pos++;
    }
    *out = v;
    return true;
}

static int32_t parse_alternates(parser *p, int32_t rule, bool nested);

/* A token reference at '<': <[id]> or <text> (llama.cpp's parse_token). */
static bool parse_token(parser *p, int32_t *id) {
    const char *start = p->pos;
    p->pos++;
    if (cur(p) == '[') {
        p->pos++;
        if (cur(p) < '0' || cur(p) > '9') return perr(p, "expected a token id after '<['"), false;
        int64_t v = 0;
        while (cur(p) >= '0' && cur(p) <= '9') {
            v = v * 10 + (cur(p) - '0');
            if (v > INT32_MAX - 1) return perr(p, "token id past %d", INT32_MAX - 1), false;
            p->pos++;
        }
        if (cur(p) != ']' || at(p, 1) != '>') return perr(p, "expected ']>' after the token id"), false;
        p->pos += 2;
        const int32_t n_vocab = p->tokens ? p->tokens->n_vocab : 0;
        if (n_vocab > 0 && v >= n_vocab) {
            p->pos = start;
            return perr(p, "token id %lld is past the vocabulary's %d tokens", (long long)v, n_vocab), false;
        }
        *id = (int32_t)v;
        return true;
    }
    while (cur(p) >= 0 && cur(p) != '>') p->pos++;
    if (cur(p) != '>') return perr(p, "expected '>' to end the token reference"), false;
    p->pos++;
    const size_t n = (size_t)(p->pos - start);
    const int shown = n > 64 ? 64 : (int)n;
    if (!p->tokens || !p->tokens->find) {
        p->pos = start;
        return perr(p, "the token reference %.*s needs the model's vocabulary (or write it <[id]>)", shown, start), false;
    }
    *id = p->tokens->find(p->tokens->ud, start, n);
    if (*id < 0) {
        p->pos = start;
        return perr(p, "%.*s is not one token of the vocabulary", shown, start), false;
    }
    return true;
}

/* x{min,max} (max < 0: no bound) applied to rule[from..): llama.cpp's rewrite. */
static bool repeat(parser *p, int32_t rule, int32_t from, uint64_t min, int64_t max) {
    if (from == p->rules[rule].n) return perr(p, "'*', '+', '?' or '{' with nothing before it"), false;
    if (min > GRAMMAR_MAX_REPEAT || max > GRAMMAR_MAX_REPEAT)
        return perr(p, "repetition count past %d", GRAMMAR_MAX_REPEAT), false;
    if (max >= 0 && (uint64_t)max < min) return perr(p, "repetition {%llu,%lld}: max below min", (unsigned long long)min, (long long)max), false;
    const int32_t n = p->rules[rule].n - from;
    gelem *prev = malloc(sizeof *prev * (size_t)n);
    if (!prev) return oom(p), false;
    memcpy(prev, p->rules[rule].el + from, sizeof *prev * (size_t)n);
    bool ok = true;
    if (min == 0) {
        p->n_elems -= n;
        p->rules[rule].n = from;
    } else {
        for (uint64_t i = 1; i < min && ok; i++)
            for (int32_t k = 0; k < n && ok; k++) ok = push_el(p, rule, prev[k].type, prev[k].v);
    }
    const int64_t n_opt = max < 0 ? 1 : max - (int64_t)min;
    int32_t last = -1;
    for (int64_t i = 0; i < n_opt && ok; i++) {
        const int32_t r = gen_rule(p, rule);
        if (r < 0) {
            ok = false;
            break;
        }
        p->rules[r].defined = true;
        for (int32_t k = 0; k < n && ok; k++) ok = push_el(p, r, prev[k].type, prev[k].v);
        if (ok && (i > 0 || max < 0)) ok = push_el(p, r, GE_REF, max < 0 ? r : last);
        if (ok) ok = push_el(p, r, GE_ALT, 0) && push_el(p, r, GE_END, 0);
        last = r;
    }
    if (ok && n_opt > 0) ok = push_el(p, rule, GE_REF, last);
    free(prev);
    return ok;
}

static bool parse_sequence(parser *p, int32_t rule, bool nested) {
    int32_t last_start = p->rules[rule].n;
    while (p->st == VT_OK) {
        const int c = cur(p);
        if (c == '"') {
            p->pos++;
            last_start = p->rules[rule].n;
            bool any = false;
            while (cur(p) != '"') {
                uint32_t cp;
                if (!parse_char(p, &cp)) return false;
                uint8_t u[4];
                const int n = uni_encode(cp, u);
                for (int i = 0; i < n; i++)
                    if (!push_byte(p, rule, u[i])) return false;
                any = true;
            }
            p->pos++;
            if (!any) last_start = p->rules[rule].n; /* "" matches nothing: nothing to repeat */
            skip_space(p, nested);
        } else if (c == '[') {
            p->pos++;
            bool negate = false;
            if (cur(p) == '^') {
                negate = true;
                p->pos++;
            }
            cp_range *r = p->cls;
            int32_t n = 0;
            while (cur(p) != ']') {
                if (n == MAX_CLASS_RANGES) return perr(p, "more than %d ranges in one class", MAX_CLASS_RANGES), false;
                uint32_t lo, hi;
                if (!parse_char(p, &lo)) return false;
                hi = lo;
                if (cur(p) == '-' && at(p, 1) != ']' && at(p, 1) >= 0) {
                    p->pos++;
                    if (!parse_char(p, &hi)) return false;
                    if (hi < lo) return perr(p, "range U+%04X-U+%04X is backwards", lo, hi), false;
                }
                r[n++] = (cp_range){lo, hi};
            }
            p->pos++;
            if (n == 0 && !negate) return perr(p, "empty character class"), false;
            last_start = p->rules[rule].n;
            if (!push_class(p, rule, r, n, negate)) return false;
            skip_space(p, nested);
        } else if (c == '.') {
            p->pos++;
            last_start = p->rules[rule].n;
            if (p->any_rule < 0) {
                if (!push_class(p, rule, NULL, 0, true)) return false;
                p->any_rule = p->rules[rule].el[p->rules[rule].n - 1].v;
            } else if (!push_el(p, rule, GE_REF, p->any_rule)) {
                return false;
            }
            skip_space(p, nested);
        } else if (c == '<' || c == '!') {
            const bool negate = c == '!';
            if (negate) {
                p->pos++;
                if (cur(p) != '<') return perr(p, "expected a token reference ('<') after '!'"), false;
            }
            int32_t id;
            if (!parse_token(p, &id)) return false;
            last_start = p->rules[rule].n;
            if (!push_el(p, rule, negate ? GE_TOK_NOT : GE_TOK, id)) return false;
            skip_space(p, nested);
        } else if (is_word(c)) {
            const char *name = p->pos;
            while (is_word(cur(p))) p->pos++;
            const int32_t id = rule_id(p, name, (size_t)(p->pos - name));
            if (id < 0) return false;
            last_start = p->rules[rule].n;
            if (!push_el(p, rule, GE_REF, id)) return false;
            skip_space(p, nested);
        } else if (c == '(') {
            p->pos++;
            if (++p->depth > GRAMMAR_MAX_NEST) return perr(p, "groups nested more than %d deep", GRAMMAR_MAX_NEST), false;
            skip_space(p, true);
            const int32_t sub = gen_rule(p, rule);
            if (sub < 0) return false;
            p->rules[sub].defined = true;
            if (parse_alternates(p, sub, true) < 0) return false;
            p->depth--;
            if (cur(p) != ')') return perr(p, "expected ')'"), false;
            p->pos++;
            last_start = p->rules[rule].n;
            if (!push_el(p, rule, GE_REF, sub)) return false;
            skip_space(p, nested);
        } else if (c == '*' || c == '+' || c == '?') {
            p->pos++;
            skip_space(p, nested);
            if (!repeat(p, rule, last_start, c == '+' ? 1 : 0, c == '?' ? 1 : -1)) return false;
        } else if (c == '{') {
            p->pos++;
            skip_space(p, nested);
            uint64_t min;
            int64_t max;
            if (!parse_int(p, &min)) return false;
            skip_space(p, nested);
            if (cur(p) == '}') {
                max = (int64_t)min;
            } else if (cur(p) == ',') {
                p->pos++;
                skip_space(p, nested);
                max = -1;
                if (cur(p) >= '0' && cur(p) <= '9') {
                    uint64_t m;
                    if (!parse_int(p, &m)) return false;
                    max = (int64_t)m;
                    skip_space(p, nested);
                }
                if (cur(p) != '}') return perr(p, "expected '}'"), false;
            } else {
                return perr(p, "expected ',' or '}'"), false;
            }
            p->pos++;
            skip_space(p, nested);
            if (!repeat(p, rule, last_start, min, max)) return false;
        } else {
            break;
        }
    }
    return p->st == VT_OK;
}

static int32_t parse_alternates(parser *p, int32_t rule, bool nested) {
    if (!parse_sequence(p, rule, nested)) return -1;
    while (cur(p) == '|') {
        p->pos++;
        if (!push_el(p, rule, GE_ALT, 0)) return -1;
        skip_space(p, true);
        if (!parse_sequence(p, rule, nested)) return -1;
    }
    if (!push_el(p, rule, GE_END, 0)) return -1;
    return rule;
}

static bool parse_rule(parser *p) {
    const char *name = p->pos;
    while (is_word(cur(p))) p->pos++;
    if (p->pos == name) return perr(p, "expected a rule name"), false;
    const size_t n = (size_t)(p->pos - name);
    skip_space(p, false);
    if (!(cur(p) == ':' && at(p, 1) == ':' && at(p, 2) == '=')) return perr(p, "expected '::='"), false;
    const int32_t id = rule_id(p, name, n);
    if (id < 0) return false;
    if (p->rules[id].defined) return perr(p, "rule '%.*s' is defined twice", (int)(n > 64 ? 64 : n), name), false;
    p->rules[id].defined = true;
    p->pos += 3;
    skip_space(p, true);
    if (parse_alternates(p, id, false) < 0) return false;
    if (cur(p) == '\r') p->pos += at(p, 1) == '\n' ? 2 : 1;
    else if (cur(p) == '\n') p->pos++;
    else if (cur(p) >= 0) return perr(p, "expected a newline or the end after the rule, got '%c'", cur(p) >= 32 && cur(p) < 127 ? cur(p) : '?'), false;
    skip_space(p, true);
    return true;
}

/* ---- checks ------------------------------------------------------------------------ */

/* Left recursion (directly, or through rules that can match nothing) would
 * expand forever: refuse it. Edges r -> s where s may start r; a cycle is one. */
static vt_status check_left_recursion(grammar *g, const rule_buf *rules) {
    const int32_t n = g->n_rules;
    bool *nullable = calloc((size_t)n, 1);
    uint8_t *color = calloc((size_t)n, 1);
    int32_t *edge_start = calloc((size_t)n + 1, sizeof(int32_t));
    int32_t *edges = malloc(sizeof(int32_t) * ((size_t)g->n_el + 1));
    int32_t *stack = malloc(sizeof(int32_t) * 2 * ((size_t)n + 1));
    vt_status st = VT_OK;
    if (!nullable || !color || !edge_start || !edges || !stack) {
        st = vt_errorf(VT_E_NOMEM, "grammar: out of memory");
        goto done;
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t r = 0; r < n; r++) {
            if (nullable[r]) continue;
            bool alt_null = true;
            for (int32_t i = g->rule_start[r];; i++) {
                const gelem *e = &g->el[i];
                if (gelem_is_end(e)) {
                    if (alt_null) {
                        nullable[r] = changed = true;
                        break;
                    }
                    if (e->type == GE_END) break;
                    alt_null = true;
                } else if (gelem_is_terminal(e) || (e->type == GE_REF && !nullable[e->v])) {
                    alt_null = false;
                }
            }
        }
    }
    int32_t n_edges = 0;
    for (int32_t r = 0; r < n; r++) {
        edge_start[r] = n_edges;
        bool blocked = false;
        for (int32_t i = g->rule_start[r];; i++) {
            const gelem *e = &g->el[i];
            if (gelem_is_end(e)) {
                if (e->type == GE_END) break;
                blocked = false;
                continue;
            }
            if (blocked) continue;
            if (e->type == GE_REF) edges[n_edges++] = e->v;
            if (gelem_is_terminal(e) || (e->type == GE_REF && !nullable[e->v])) blocked = true;
        }
    }
    edge_start[n] = n_edges;
    for (int32_t r0 = 0; r0 < n && st == VT_OK; r0++) {
        if (color[r0]) continue;
        int32_t sp = 0;
        stack[sp++] = r0;
        stack[sp++] = edge_start[r0];
        color[r0] = 1;
        while (sp > 0 && st == VT_OK) {
            const int32_t r = stack[sp - 2], k = stack[sp - 1];
            if (k == edge_start[r + 1]) {
                color[r] = 2;
                sp -= 2;
                continue;
            }
            stack[sp - 1] = k + 1;
            const int32_t s = edges[k];
            if (color[s] == 1) {
                st = vt_errorf(VT_E_INVALID,
                               "grammar: rule '%.64s' is left-recursive (it can reach itself without consuming a "
                               "character)",
                               rules[s].name);
            } else if (color[s] == 0) {
                color[s] = 1;
                stack[sp++] = s;
                stack[sp++] = edge_start[s];
            }
        }
    }
done:
    free(nullable);
    free(color);
    free(edge_start);
    free(edges);
    free(stack);
    return st;
}

/* ---- the whole -------------------------------------------------------------------- */

vt_status grammar_parse(const char *text, size_t len, const char *root, grammar **out) {
    return grammar_parse_tokens(text, len, root, NULL, out);
}

vt_status grammar_parse_tokens(const char *text, size_t len, const char *root, const grammar_tokens *tokens,
                               grammar **out) {
    *out = NULL;
    if (!text) text = "";
    if (len > GRAMMAR_MAX_TEXT)
        return vt_errorf(VT_E_INVALID, "grammar: %zu bytes, more than the %zu allowed", len, GRAMMAR_MAX_TEXT);
    if (memchr(text, 0, len)) return vt_errorf(VT_E_INVALID, "grammar: a NUL byte in the text");
    parser *p = calloc(1, sizeof *p);
    if (!p) return vt_errorf(VT_E_NOMEM, "grammar: out of memory");
    p->src = p->pos = text;
    p->end = text + len;
    p->tokens = tokens;
    p->any_rule = -1;
    p->cls = malloc(sizeof(cp_range) * 3 * (MAX_CLASS_RANGES + 8));
    if (!p->cls) {
        free(p);
        return vt_errorf(VT_E_NOMEM, "grammar: out of memory");
    }
    p->cls_out = p->cls + MAX_CLASS_RANGES + 8;
    p->cls_fin = p->cls_out + MAX_CLASS_RANGES + 8;
    for (int i = 0; i < 256; i++) p->byte_set[i] = -1;
    grammar *g = NULL;
    vt_status st = VT_OK;

    skip_space(p, true);
    while (cur(p) >= 0 && p->st == VT_OK) {
        if (!parse_rule(p)) break;
    }
    if (p->st == VT_OK) {
        for (int32_t r = 0; r < p->n_rules; r++) {
            if (!p->rules[r].defined) {
                st = vt_errorf(VT_E_INVALID, "grammar: rule '%.64s' is used but not defined", p->rules[r].name);
                goto done;
            }
        }
    } else {
        st = vt_errorf(p->st, "%s", p->msg);
        goto done;
    }
    const char *root_name = root ? root : "root";
    int32_t root_id = -1;
    for (int32_t r = 0; r < p->n_rules; r++)
        if (p->rules[r].named && !strcmp(p->rules[r].name, root_name)) root_id = r;
    if (root_id < 0) {
        st = vt_errorf(VT_E_INVALID, "grammar: no rule named '%.64s' (the start rule)", root_name);
        goto done;
    }
    g = calloc(1, sizeof *g);
    if (!g) goto nomem;
    g->n_rules = p->n_rules;
    g->n_el = (int32_t)p->n_elems;
    g->root = root_id;
    g->rule_start = malloc(sizeof(int32_t) * (size_t)p->n_rules);
    g->el = malloc(sizeof(gelem) * (size_t)(p->n_elems + 1));
    g->sets = malloc(sizeof(gset) * (size_t)(p->n_sets + 1));
    if (!g->rule_start || !g->el || !g->sets) goto nomem;
    if (p->n_sets) memcpy(g->sets, p->sets, sizeof(gset) * (size_t)p->n_sets);
    g->n_sets = p->n_sets;
    int32_t k = 0;
    for (int32_t r = 0; r < p->n_rules; r++) {
        g->rule_start[r] = k;
        memcpy(g->el + k, p->rules[r].el, sizeof(gelem) * (size_t)p->rules[r].n);
        k += p->rules[r].n;
    }
    VT_ASSERT(k == g->n_el);
    st = check_left_recursion(g, p->rules);
    if (st != VT_OK) goto done;
    *out = g;
    g = NULL;
    goto done;
nomem:
    st = vt_errorf(VT_E_NOMEM, "grammar: out of memory");
done:
    grammar_free(g);
    for (int32_t r = 0; r < p->n_rules; r++) {
        free(p->rules[r].el);
        free(p->rules[r].name);
    }
    free(p->rules);
    free(p->sets);
    free(p->cls);
    free(p);
    return st;
}

void grammar_free(grammar *g) {
    if (!g) return;
    gcache_free(g->cache);
    free(g->el);
    free(g->rule_start);
    free(g->sets);
    free(g);
}

int32_t grammar_n_rules(const grammar *g) { return g->n_rules; }
