/* Template source -> tokens -> syntax tree, as Jinja2's lexer and parser do it with
 * trim_blocks and lstrip_blocks on (what transformers configures):
 *
 * - newlines (\r\n, \r, \n) become \n and one trailing newline is dropped;
 * - `{%-` / `{{-` / `{#-` strip all whitespace before the tag, `-%}` / `-}}` / `-#}`
 *   all whitespace after it;
 * - trim_blocks: a block or comment tag eats the one newline right after it
 *   (`+%}` keeps it);
 * - lstrip_blocks: spaces and tabs between the start of a line and a block or
 *   comment tag go (`{%+` keeps them); never for `{{`.
 *
 * The expression grammar is Jinja2's, precedence from loosest to tightest:
 *   a if c else b | or | and | not | comparisons, in, not in (chained) | + - |
 *   ~ | * / // % | ** (left-associative, as Jinja's) | unary - + |
 *   postfix .attr [key] (call) | filters `|f(args)` and tests `is [not] t arg`. */
#include "jinja/jinja_impl.h"

#include "base/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { JINJA_MAX_SOURCE = 4 << 20, JINJA_MAX_NESTING = 200 };

typedef enum tok_kind {
    T_EOF, T_TEXT, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STRING,
    T_INT, T_FLOAT, T_OP,
} tok_kind;

typedef struct tok {
    tok_kind kind;
    int line;
    const char *s; /* T_TEXT, T_NAME, T_STRING (decoded), T_OP: arena bytes */
    size_t len;
    int64_t i;
    double f;
} tok;

struct jarena_chunk {
    jarena_chunk *next;
    size_t used, cap;
    max_align_t data[];
};

typedef struct parser {
    jinja_template *t;
    tok *toks;
    size_t n_toks, cap_toks, pos;
    int depth;
    int last_line; /* the template's last line, for errors at its end */
    bool failed;
    vt_status status;
    char err[256];
} parser;

/* ---- arena --------------------------------------------------------------------- */

static void *arena_alloc(parser *p, size_t n) {
    n = (n + 15) & ~(size_t)15;
    jarena_chunk *c = p->t->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        c = malloc(sizeof *c + cap);
        if (!c) {
            p->failed = true;
            p->status = VT_E_NOMEM;
            snprintf(p->err, sizeof p->err, "out of memory");
            return NULL;
        }
        c->next = p->t->chunks;
        c->used = 0;
        c->cap = cap;
        p->t->chunks = c;
    }
    void *r = (char *)c->data + c->used;
    c->used += n;
    memset(r, 0, n);
    return r;
}

static char *arena_str(parser *p, const char *s, size_t n) {
    char *r = arena_alloc(p, n + 1);
    if (!r) return NULL;
    memcpy(r, s, n);
    r[n] = 0;
    return r;
}

static void perr(parser *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void perr(parser *p, int line, const char *fmt, ...) {
    if (p->failed) return;
    p->failed = true;
    p->status = VT_E_FORMAT;
    int n = snprintf(p->err, sizeof p->err, "template line %d: ", line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err + n, sizeof p->err - (size_t)n, fmt, ap);
    va_end(ap);
}

/* ---- lexer ----------------------------------------------------------------------- */

static tok *push_tok(parser *p, tok_kind kind, int line) {
    if (p->n_toks == p->cap_toks) {
        size_t cap = p->cap_toks ? p->cap_toks * 2 : 256;
        tok *t = realloc(p->toks, cap * sizeof *t);
        if (!t) {
            perr(p, line, "out of memory");
            p->status = VT_E_NOMEM;
            return NULL;
        }
        p->toks = t;
        p->cap_toks = cap;
    }
    tok *t = &p->toks[p->n_toks++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->line = line;
    return t;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
static bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_ident(char c) { return is_ident_start(c) || is_digit(c); }

static int count_lines(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '\n';
    return k;
}

static void emit_text(parser *p, const char *s, size_t n, int line) {
    if (!n) return;
    tok *t = push_tok(p, T_TEXT, line);
    if (!t) return;
    t->s = arena_str(p, s, n);
    t->len = n;
}

static void put_utf8(char *out, size_t *n, uint32_t c) {
    if (c < 0x80) {
        out[(*n)++] = (char)c;
    } else if (c < 0x800) {
        out[(*n)++] = (char)(0xC0 | (c >> 6));
        out[(*n)++] = (char)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out[(*n)++] = (char)(0xE0 | (c >> 12));
        out[(*n)++] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (c & 0x3F));
    } else {
        out[(*n)++] = (char)(0xF0 | (c >> 18));
        out[(*n)++] = (char)(0x80 | ((c >> 12) & 0x3F));
        out[(*n)++] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (c & 0x3F));
    }
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A string literal's body, decoded as Python's unicode-escape does. */
static void lex_string(parser *p, const char *s, size_t n, tok *t) {
    char *out = arena_alloc(p, n + 1);
    if (!out) return;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c != '\\' || i + 1 >= n) {
            out[o++] = c;
            continue;
        }
        char e = s[++i];
        switch (e) {
        case 'n': out[o++] = '\n'; break;
        case 't': out[o++] = '\t'; break;
        case 'r': out[o++] = '\r'; break;
        case '\\': out[o++] = '\\'; break;
        case '\'': out[o++] = '\''; break;
        case '"': out[o++] = '"'; break;
        case 'a': out[o++] = '\a'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'v': out[o++] = '\v'; break;
        case '\n': break;
        case 'x': case 'u': case 'U': {
            int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            int k = 0;
            for (; k < digits && i + 1 + (size_t)k < n && hexval(s[i + 1 + (size_t)k]) >= 0; k++)
                cp = cp * 16 + (uint32_t)hexval(s[i + 1 + (size_t)k]);
            if (k < digits || cp > 0x10FFFF) {
                perr(p, t->line, "truncated \\%c escape in a string", e);
                return;
            }
            i += (size_t)digits;
            /* \xNN needs at most 2 bytes, \uNNNN 3, \UNNNNNNNN 4: never more than the source */
            put_utf8(out, &o, cp);
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                uint32_t cp = (uint32_t)(e - '0');
                for (int k = 0; k < 2 && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '7'; k++)
                    cp = cp * 8 + (uint32_t)(s[++i] - '0');
                put_utf8(out, &o, cp);
            } else {
                out[o++] = '\\';
                out[o++] = e;
            }
        }
    }
    out[o] = 0;
    t->s = out;
    t->len = o;
}

static const char *const OPS[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~",
                                  "[", "]", "(", ")", "{", "}", ">", "<", "=", ".", ":", "|",
                                  ",", ";"};

/* Tokens of one {{ }} or {% %} tag from *pos up to and including its end; returns
 * whether the end ate a newline (for lstrip's line-start rule). */
static bool lex_tag(parser *p, const char *src, size_t len, size_t *pos, int *line, bool block) {
    int balance = 0;
    size_t i = *pos;
    char close = block ? '%' : '}';
    while (!p->failed) {
        if (i >= len) {
            perr(p, *line, "unexpected end of template, expected '%s'", block ? "%}" : "}}");
            return false;
        }
        /* the end tag, only when brackets are balanced */
        if (balance == 0) {
            size_t j = i;
            char sign = 0;
            if (src[j] == '-' || (block && src[j] == '+')) sign = src[j++];
            if (j + 1 < len && src[j] == close && src[j + 1] == '}') {
                j += 2;
                push_tok(p, block ? T_BLOCK_END : T_VAR_END, *line);
                bool nl = false;
                if (sign == '-') {
                    while (j < len && is_space(src[j])) {
                        nl = src[j] == '\n';
                        *line += src[j] == '\n';
                        j++;
                    }
                } else if (block && sign != '+' && j < len && src[j] == '\n') {
                    j++;
                    (*line)++;
                    nl = true;
                }
                *pos = j;
                return nl;
            }
        }
        char c = src[i];
        if (is_space(c)) {
            *line += c == '\n';
            i++;
            continue;
        }
        if (is_ident_start(c)) {
            size_t j = i;
            while (j < len && is_ident(src[j])) j++;
            tok *t = push_tok(p, T_NAME, *line);
            if (!t) return false;
            t->s = arena_str(p, src + i, j - i);
            t->len = j - i;
            i = j;
            continue;
        }
        if (is_digit(c)) {
            size_t j = i;
            while (j < len && (is_digit(src[j]) || (src[j] == '_' && j + 1 < len && is_digit(src[j + 1])))) j++;
            bool is_float = false;
            if (j + 1 < len && src[j] == '.' && is_digit(src[j + 1])) {
                is_float = true;
                j++;
                while (j < len && (is_digit(src[j]) || src[j] == '_')) j++;
            }
            if (j < len && (src[j] == 'e' || src[j] == 'E')) {
                size_t k = j + 1;
                if (k < len && (src[k] == '+' || src[k] == '-')) k++;
                if (k < len && is_digit(src[k])) {
                    is_float = true;
                    j = k;
                    while (j < len && is_digit(src[j])) j++;
                }
            }
            char tmp[64];
            size_t n = 0;
            for (size_t k = i; k < j && n < sizeof tmp - 1; k++)
                if (src[k] != '_') tmp[n++] = src[k];
            tmp[n] = 0;
            tok *t = push_tok(p, is_float ? T_FLOAT : T_INT, *line);
            if (!t) return false;
            if (is_float) {
                t->f = strtod(tmp, NULL);
            } else {
                char *end;
                errno = 0;
                long long v = strtoll(tmp, &end, 10);
                if (errno) {
                    perr(p, *line, "integer literal %s is too large", tmp);
                    return false;
                }
                t->i = v;
            }
            i = j;
            continue;
        }
        if (c == '\'' || c == '"') {
            size_t j = i + 1;
            while (j < len && src[j] != c) j += src[j] == '\\' ? 2 : 1;
            if (j >= len) {
                perr(p, *line, "unterminated string");
                return false;
            }
            tok *t = push_tok(p, T_STRING, *line);
            if (!t) return false;
            lex_string(p, src + i + 1, j - i - 1, t);
            *line += count_lines(src + i, j - i);
            i = j + 1;
            continue;
        }
        size_t k = 0;
        for (; k < sizeof OPS / sizeof OPS[0]; k++) {
            size_t n = strlen(OPS[k]);
            if (i + n <= len && !memcmp(src + i, OPS[k], n)) break;
        }
        if (k == sizeof OPS / sizeof OPS[0]) {
            perr(p, *line, "unexpected char '%c'", c);
            return false;
        }
        const char *op = OPS[k];
        if (op[0] == '(' || op[0] == '[' || op[0] == '{') {
            if (++balance > JINJA_MAX_NESTING) {
                perr(p, *line, "brackets nested too deeply");
                p->status = VT_E_RANGE;
                return false;
            }
        } else if (op[0] == ')' || op[0] == ']' || op[0] == '}') {
            if (balance == 0) {
                perr(p, *line, "unexpected '%c'", op[0]);
                return false;
            }
            balance--;
        }
        tok *t = push_tok(p, T_OP, *line);
        if (!t) return false;
        t->s = op;
        t->len = strlen(op);
        i += t->len;
    }
    return false;
}

/* `{%(-|+|)\s*raw\s*(-%}|%})` at src+i: the length of the opener, or 0. */
static size_t raw_open(const char *src, size_t len, size_t i, const char *word, char *end_sign) {
    size_t j = i + 2, wl = strlen(word);
    if (j < len && (src[j] == '-' || src[j] == '+')) j++;
    while (j < len && is_space(src[j])) j++;
    if (j + wl > len || memcmp(src + j, word, wl) != 0) return 0;
    j += wl;
    while (j < len && is_space(src[j])) j++;
    *end_sign = 0;
    if (j < len && (src[j] == '-' || src[j] == '+')) *end_sign = src[j++];
    if (j + 2 > len || src[j] != '%' || src[j + 1] != '}') return 0;
    return j + 2 - i;
}

static void lex(parser *p, const char *src, size_t len) {
    size_t pos = 0;
    int line = 1;
    bool line_starting = true;
    while (pos < len && !p->failed) {
        /* the next tag opener */
        size_t i = pos;
        while (i + 1 < len && !(src[i] == '{' && (src[i + 1] == '{' || src[i + 1] == '%' || src[i + 1] == '#'))) i++;
        if (i + 1 >= len) {
            emit_text(p, src + pos, len - pos, line);
            return;
        }
        char kind = src[i + 1];
        char sign = i + 2 < len && (src[i + 2] == '-' || src[i + 2] == '+') ? src[i + 2] : 0;
        char raw_sign = 0;
        size_t raw_len = kind == '%' ? raw_open(src, len, i, "raw", &raw_sign) : 0;
        /* the text before it, with the tag's whitespace control */
        size_t text_end = i;
        if (sign == '-') {
            while (text_end > pos && is_space(src[text_end - 1])) text_end--;
        } else if (sign != '+' && kind != '{') {
            size_t l = text_end;
            while (l > pos && src[l - 1] != '\n') l--;
            bool at_line = l > pos || line_starting;
            bool ws = l < text_end;
            for (size_t k = l; k < text_end && ws; k++) ws = src[k] == ' ' || src[k] == '\t' || src[k] == '\r' || src[k] == '\v' || src[k] == '\f';
            if (at_line && ws) text_end = l;
        }
        emit_text(p, src + pos, text_end - pos, line);
        line += count_lines(src + pos, i - pos);
        if (raw_len) {
            size_t j = i + raw_len;
            if (raw_sign == '-')
                while (j < len && is_space(src[j])) line += src[j++] == '\n';
            /* up to {% endraw %} */
            size_t k = j;
            char end_sign = 0;
            size_t end_len = 0;
            for (; k + 1 < len; k++)
                if (src[k] == '{' && src[k + 1] == '%' && (end_len = raw_open(src, len, k, "endraw", &end_sign)))
                    break;
            if (!end_len) {
                perr(p, line, "missing end of raw directive");
                return;
            }
            size_t body_end = k;
            char s2 = src[k + 2];
            if (s2 == '-') {
                while (body_end > j && is_space(src[body_end - 1])) body_end--;
            } else if (s2 != '+') {
                size_t l = body_end;
                while (l > j && src[l - 1] != '\n') l--;
                bool ws = l < body_end;
                for (size_t m = l; m < body_end && ws; m++) ws = src[m] == ' ' || src[m] == '\t';
                if (ws && (l > j || line_starting)) body_end = l;
            }
            emit_text(p, src + j, body_end - j, line);
            line += count_lines(src + j, k - j);
            pos = k + end_len;
            line_starting = false;
            if (end_sign == '-') {
                while (pos < len && is_space(src[pos])) {
                    line_starting = src[pos] == '\n';
                    line += src[pos++] == '\n';
                }
            } else if (end_sign != '+' && pos < len && src[pos] == '\n') {
                pos++;
                line++;
                line_starting = true;
            }
            continue;
        }
        pos = i + 2 + (sign ? 1 : 0);
        if (kind == '#') {
            size_t k = pos;
            while (k + 1 < len && !(src[k] == '#' && src[k + 1] == '}')) k++;
            if (k + 1 >= len) {
                perr(p, line, "missing end of comment tag");
                return;
            }
            char csign = k > pos && (src[k - 1] == '-' || src[k - 1] == '+') ? src[k - 1] : 0;
            line += count_lines(src + pos, k - pos);
            pos = k + 2;
            line_starting = false;
            if (csign == '-') {
                while (pos < len && is_space(src[pos])) {
                    line_starting = src[pos] == '\n';
                    line += src[pos++] == '\n';
                }
            } else if (csign != '+' && pos < len && src[pos] == '\n') {
                pos++;
                line++;
                line_starting = true;
            }
            continue;
        }
        push_tok(p, kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN, line);
        line_starting = lex_tag(p, src, len, &pos, &line, kind == '%');
    }
}

/* ---- parser ------------------------------------------------------------------------ */

static tok *cur(parser *p) { return &p->toks[p->pos]; }
static tok *peek(parser *p, size_t k) {
    return p->pos + k < p->n_toks ? &p->toks[p->pos + k] : &p->toks[p->n_toks - 1];
}
static void next(parser *p) {
    if (p->pos + 1 < p->n_toks) p->pos++;
}
static bool is_op(const tok *t, const char *op) { return t->kind == T_OP && !strcmp(t->s, op); }
static bool is_name(const tok *t, const char *n) { return t->kind == T_NAME && !strcmp(t->s, n); }

static bool skip_op(parser *p, const char *op) {
    if (!is_op(cur(p), op)) return false;
    next(p);
    return true;
}
static bool skip_name(parser *p, const char *n) {
    if (!is_name(cur(p), n)) return false;
    next(p);
    return true;
}

static const char *tok_desc(const tok *t) {
    switch (t->kind) {
    case T_EOF: return "end of template";
    case T_TEXT: return "template data";
    case T_VAR_BEGIN: return "'{{'";
    case T_VAR_END: return "'}}'";
    case T_BLOCK_BEGIN: return "'{%'";
    case T_BLOCK_END: return "'%}'";
    case T_STRING: return "string";
    case T_INT: return "integer";
    case T_FLOAT: return "float";
    default: return t->s;
    }
}

static void expect_op(parser *p, const char *op) {
    if (!skip_op(p, op)) perr(p, cur(p)->line, "expected '%s', got %s", op, tok_desc(cur(p)));
}

static const char *expect_name(parser *p) {
    tok *t = cur(p);
    if (t->kind != T_NAME) {
        perr(p, t->line, "expected a name, got %s", tok_desc(t));
        return "";
    }
    next(p);
    return t->s;
}

static void expect_kind(parser *p, tok_kind k) {
    if (cur(p)->kind != k) {
        perr(p, cur(p)->line, "expected %s, got %s", k == T_BLOCK_END ? "'%}'" : "'}}'", tok_desc(cur(p)));
        return;
    }
    next(p);
}

static jnode *node(parser *p, jnode_kind kind) {
    jnode *n = arena_alloc(p, sizeof *n);
    if (n) {
        n->kind = (uint16_t)kind;
        n->line = cur(p)->line;
    }
    return n;
}

/* Growable node lists in the arena. */
typedef struct nlist {
    jnode **v;
    const char **names;
    int n, cap;
} nlist;

static void nlist_push(parser *p, nlist *l, jnode *n, const char *name) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        jnode **v = arena_alloc(p, (size_t)cap * sizeof *v);
        const char **nm = arena_alloc(p, (size_t)cap * sizeof *nm);
        if (!v || !nm) return;
        if (l->n) {
            memcpy(v, l->v, (size_t)l->n * sizeof *v);
            memcpy(nm, l->names, (size_t)l->n * sizeof *nm);
        }
        l->v = v;
        l->names = nm;
        l->cap = cap;
    }
    l->v[l->n] = n;
    l->names[l->n] = name;
    l->n++;
}

static jinja_value *keep_lit(parser *p, jinja_value *v) {
    jinja_template *t = p->t;
    if (!v) {
        perr(p, cur(p)->line, "out of memory");
        p->status = VT_E_NOMEM;
        return NULL;
    }
    if (t->n_lits == t->cap_lits) {
        size_t cap = t->cap_lits ? t->cap_lits * 2 : 64;
        jinja_value **l = realloc(t->lits, cap * sizeof *l);
        if (!l) {
            jinja_value_free(v);
            perr(p, cur(p)->line, "out of memory");
            p->status = VT_E_NOMEM;
            return NULL;
        }
        t->lits = l;
        t->cap_lits = cap;
    }
    t->lits[t->n_lits++] = v;
    v->flags |= JV_F_STATIC;
    return v;
}

static jnode *lit_node(parser *p, jinja_value *v) {
    jnode *n = node(p, E_LIT);
    if (n) n->lit = keep_lit(p, v);
    return n;
}

static jnode *parse_expression(parser *p, bool with_condexpr);
static jnode *parse_tuple(parser *p, bool simplified, bool with_condexpr, const char *extra_end,
                          bool explicit_parens);
static jnode *parse_unary(parser *p, bool with_filter);
static jnode *parse_primary(parser *p);
static jnode *parse_postfix(parser *p, jnode *n);
static jnode *parse_filter(parser *p, jnode *n, bool start_inline);

static bool enter(parser *p) {
    if (++p->depth > JINJA_MAX_NESTING) {
        perr(p, cur(p)->line, "expression nested too deeply");
        p->status = VT_E_RANGE;
        return false;
    }
    return true;
}

/* (args, kw) of a call: `(a, b, k=v)`; the current token is '('. */
static void parse_call_args(parser *p, jnode *n) {
    expect_op(p, "(");
    nlist args = {0}, kw = {0};
    while (!p->failed && !is_op(cur(p), ")")) {
        if (args.n || kw.n) {
            expect_op(p, ",");
            if (is_op(cur(p), ")")) break;
        }
        if (is_op(cur(p), "*") || is_op(cur(p), "**")) {
            perr(p, cur(p)->line, "*args and **kwargs in calls are not supported");
            return;
        }
        if (cur(p)->kind == T_NAME && is_op(peek(p, 1), "=")) {
            const char *k = cur(p)->s;
            next(p);
            next(p);
            nlist_push(p, &kw, parse_expression(p, true), k);
        } else {
            if (kw.n) {
                perr(p, cur(p)->line, "positional argument after a keyword argument");
                return;
            }
            nlist_push(p, &args, parse_expression(p, true), NULL);
        }
    }
    expect_op(p, ")");
    n->args = args.v;
    n->n_args = args.n;
    n->kw = kw.v;
    n->kwnames = kw.names;
    n->n_kw = kw.n;
}

static jnode *parse_subscribed(parser *p) {
    jnode *parts[3] = {0};
    if (is_op(cur(p), ":")) {
        next(p);
    } else {
        jnode *e = parse_expression(p, true);
        if (!is_op(cur(p), ":")) return e;
        next(p);
        parts[0] = e;
    }
    if (!is_op(cur(p), ":") && !is_op(cur(p), "]") && !is_op(cur(p), ","))
        parts[1] = parse_expression(p, true);
    if (skip_op(p, ":"))
        if (!is_op(cur(p), "]") && !is_op(cur(p), ",")) parts[2] = parse_expression(p, true);
    jnode *s = node(p, E_SLICE);
    if (!s) return NULL;
    s->args = arena_alloc(p, 3 * sizeof *s->args);
    if (!s->args) return NULL;
    memcpy(s->args, parts, sizeof parts);
    s->n_args = 3;
    return s;
}

static jnode *parse_postfix(parser *p, jnode *n) {
    while (!p->failed) {
        if (is_op(cur(p), ".")) {
            next(p);
            tok *t = cur(p);
            if (t->kind == T_NAME) {
                jnode *a = node(p, E_ATTR);
                if (!a) return NULL;
                a->a = n;
                a->str = t->s;
                next(p);
                n = a;
            } else if (t->kind == T_INT) {
                jnode *a = node(p, E_ITEM);
                if (!a) return NULL;
                a->a = n;
                a->b = lit_node(p, jinja_int(t->i));
                next(p);
                n = a;
            } else {
                perr(p, t->line, "expected a name after '.'");
                return NULL;
            }
        } else if (is_op(cur(p), "[")) {
            next(p);
            nlist l = {0};
            while (!p->failed && !is_op(cur(p), "]")) {
                if (l.n) {
                    expect_op(p, ",");
                    if (is_op(cur(p), "]")) break;
                }
                nlist_push(p, &l, parse_subscribed(p), NULL);
            }
            expect_op(p, "]");
            if (p->failed) return NULL;
            if (l.n == 0) {
                perr(p, cur(p)->line, "expected a subscript");
                return NULL;
            }
            jnode *key;
            if (l.n == 1) {
                key = l.v[0];
            } else {
                key = node(p, E_TUPLE);
                if (!key) return NULL;
                key->args = l.v;
                key->n_args = l.n;
            }
            if (key && key->kind == E_SLICE) {
                key->a = n;
                n = key;
            } else {
                jnode *a = node(p, E_ITEM);
                if (!a) return NULL;
                a->a = n;
                a->b = key;
                n = a;
            }
        } else if (is_op(cur(p), "(")) {
            jnode *c = node(p, E_CALL);
            if (!c) return NULL;
            c->a = n;
            parse_call_args(p, c);
            n = c;
        } else {
            break;
        }
    }
    return n;
}

static jnode *parse_filter(parser *p, jnode *n, bool start_inline) {
    while (!p->failed && (is_op(cur(p), "|") || start_inline)) {
        if (!start_inline) next(p);
        start_inline = false;
        jnode *f = node(p, E_FILTER);
        if (!f) return NULL;
        f->a = n;
        f->str = expect_name(p);
        while (!p->failed && is_op(cur(p), ".")) {
            next(p);
            const char *more = expect_name(p);
            size_t l1 = strlen(f->str), l2 = strlen(more);
            char *s = arena_alloc(p, l1 + l2 + 2);
            if (!s) return NULL;
            memcpy(s, f->str, l1);
            s[l1] = '.';
            memcpy(s + l1 + 1, more, l2 + 1);
            f->str = s;
        }
        if (is_op(cur(p), "(")) parse_call_args(p, f);
        n = f;
    }
    return n;
}

static jnode *parse_test(parser *p, jnode *n) {
    next(p); /* is */
    jnode *t = node(p, E_TEST);
    if (!t) return NULL;
    t->a = n;
    if (skip_name(p, "not")) t->op = 1;
    t->str = expect_name(p);
    tok *c = cur(p);
    if (is_op(c, "(")) {
        parse_call_args(p, t);
    } else if ((c->kind == T_NAME || c->kind == T_STRING || c->kind == T_INT || c->kind == T_FLOAT ||
                is_op(c, "(") || is_op(c, "[") || is_op(c, "{")) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is")) {
            perr(p, c->line, "You cannot chain multiple tests with is");
            return NULL;
        }
        jnode *arg = parse_postfix(p, parse_primary(p));
        t->args = arena_alloc(p, sizeof *t->args);
        if (!t->args) return NULL;
        t->args[0] = arg;
        t->n_args = 1;
    }
    return t;
}

static jnode *parse_filter_expr(parser *p, jnode *n) {
    while (!p->failed) {
        if (is_op(cur(p), "|")) {
            n = parse_filter(p, n, false);
        } else if (is_name(cur(p), "is")) {
            n = parse_test(p, n);
        } else if (is_op(cur(p), "(")) {
            jnode *c = node(p, E_CALL);
            if (!c) return NULL;
            c->a = n;
            parse_call_args(p, c);
            n = c;
        } else {
            break;
        }
    }
    return n;
}

static jnode *parse_primary(parser *p) {
    tok *t = cur(p);
    jnode *n = NULL;
    if (!enter(p)) return NULL;
    if (t->kind == T_NAME) {
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True")) n = lit_node(p, jinja_bool(true));
        else if (!strcmp(t->s, "false") || !strcmp(t->s, "False")) n = lit_node(p, jinja_bool(false));
        else if (!strcmp(t->s, "none") || !strcmp(t->s, "None")) n = lit_node(p, jinja_none());
        else if ((n = node(p, E_NAME))) n->str = t->s;
        next(p);
    } else if (t->kind == T_STRING) {
        /* adjacent literals concatenate */
        size_t total = 0, k = p->pos;
        for (; k < p->n_toks && p->toks[k].kind == T_STRING; k++) total += p->toks[k].len;
        char *buf = malloc(total + 1);
        if (!buf) {
            perr(p, t->line, "out of memory");
            return NULL;
        }
        size_t o = 0;
        for (; cur(p)->kind == T_STRING; next(p)) {
            memcpy(buf + o, cur(p)->s, cur(p)->len);
            o += cur(p)->len;
            if (p->pos + 1 >= p->n_toks) break;
        }
        n = lit_node(p, jinja_string(buf, o));
        free(buf);
    } else if (t->kind == T_INT) {
        n = lit_node(p, jinja_int(t->i));
        next(p);
    } else if (t->kind == T_FLOAT) {
        n = lit_node(p, jinja_float(t->f));
        next(p);
    } else if (is_op(t, "(")) {
        next(p);
        n = parse_tuple(p, false, true, NULL, true);
        expect_op(p, ")");
    } else if (is_op(t, "[")) {
        next(p);
        nlist l = {0};
        while (!p->failed && !is_op(cur(p), "]")) {
            if (l.n) {
                expect_op(p, ",");
                if (is_op(cur(p), "]")) break;
            }
            nlist_push(p, &l, parse_expression(p, true), NULL);
        }
        expect_op(p, "]");
        if ((n = node(p, E_LIST))) {
            n->args = l.v;
            n->n_args = l.n;
        }
    } else if (is_op(t, "{")) {
        next(p);
        nlist keys = {0}, vals = {0};
        while (!p->failed && !is_op(cur(p), "}")) {
            if (keys.n) {
                expect_op(p, ",");
                if (is_op(cur(p), "}")) break;
            }
            jnode *k = parse_expression(p, true);
            expect_op(p, ":");
            nlist_push(p, &keys, k, NULL);
            nlist_push(p, &vals, parse_expression(p, true), NULL);
        }
        expect_op(p, "}");
        if ((n = node(p, E_DICT))) {
            n->args = keys.v;
            n->n_args = keys.n;
            n->kw = vals.v;
            n->n_kw = vals.n;
        }
    } else {
        perr(p, t->line, "unexpected %s", tok_desc(t));
    }
    p->depth--;
    return p->failed ? NULL : n;
}

static jnode *parse_unary(parser *p, bool with_filter) {
    jnode *n;
    if (!enter(p)) return NULL;
    if (is_op(cur(p), "-") || is_op(cur(p), "+")) {
        bool neg = is_op(cur(p), "-");
        next(p);
        n = node(p, neg ? E_NEG : E_POS);
        if (n) n->a = parse_unary(p, false);
    } else {
        n = parse_primary(p);
    }
    n = parse_postfix(p, n);
    if (with_filter) n = parse_filter_expr(p, n);
    p->depth--;
    return n;
}

static jnode *bin(parser *p, jop op, jnode *a, jnode *b) {
    jnode *n = node(p, E_BIN);
    if (!n) return NULL;
    n->op = (uint16_t)op;
    n->a = a;
    n->b = b;
    return n;
}

static jnode *parse_pow(parser *p) {
    jnode *l = parse_unary(p, true);
    while (!p->failed && skip_op(p, "**")) l = bin(p, OP_POW, l, parse_unary(p, true));
    return l;
}

static jnode *parse_math2(parser *p) {
    jnode *l = parse_pow(p);
    while (!p->failed) {
        jop op;
        if (is_op(cur(p), "*")) op = OP_MUL;
        else if (is_op(cur(p), "/")) op = OP_DIV;
        else if (is_op(cur(p), "//")) op = OP_FLOORDIV;
        else if (is_op(cur(p), "%")) op = OP_MOD;
        else break;
        next(p);
        l = bin(p, op, l, parse_pow(p));
    }
    return l;
}

static jnode *parse_concat(parser *p) {
    jnode *l = parse_math2(p);
    while (!p->failed && skip_op(p, "~")) l = bin(p, OP_CONCAT, l, parse_math2(p));
    return l;
}

static jnode *parse_math1(parser *p) {
    jnode *l = parse_concat(p);
    while (!p->failed) {
        jop op;
        if (is_op(cur(p), "+")) op = OP_ADD;
        else if (is_op(cur(p), "-")) op = OP_SUB;
        else break;
        next(p);
        l = bin(p, op, l, parse_concat(p));
    }
    return l;
}

static jnode *parse_compare(parser *p) {
    jnode *first = parse_math1(p);
    nlist rest = {0};
    int ops[64], n_ops = 0;
    while (!p->failed) {
        tok *t = cur(p);
        jop op;
        if (is_op(t, "==")) op = OP_EQ;
        else if (is_op(t, "!=")) op = OP_NE;
        else if (is_op(t, "<")) op = OP_LT;
        else if (is_op(t, "<=")) op = OP_LE;
        else if (is_op(t, ">")) op = OP_GT;
        else if (is_op(t, ">=")) op = OP_GE;
        else if (is_name(t, "in")) op = OP_IN;
        else if (is_name(t, "not") && is_name(peek(p, 1), "in")) {
            op = OP_NOTIN;
            next(p);
        } else break;
        next(p);
        if (n_ops == 64) {
            perr(p, t->line, "too many chained comparisons");
            return NULL;
        }
        ops[n_ops++] = (int)op;
        nlist_push(p, &rest, parse_math1(p), NULL);
    }
    if (!n_ops) return first;
    jnode *n = node(p, E_CMP);
    if (!n) return NULL;
    n->a = first;
    n->args = rest.v;
    n->n_args = rest.n;
    n->ops = arena_alloc(p, (size_t)n_ops * sizeof(int));
    if (!n->ops) return NULL;
    memcpy(n->ops, ops, (size_t)n_ops * sizeof(int));
    return n;
}

static jnode *parse_not(parser *p) {
    if (is_name(cur(p), "not")) {
        next(p);
        if (!enter(p)) return NULL;
        jnode *n = node(p, E_NOT);
        if (n) n->a = parse_not(p);
        p->depth--;
        return n;
    }
    return parse_compare(p);
}

static jnode *parse_and(parser *p) {
    jnode *l = parse_not(p);
    while (!p->failed && skip_name(p, "and")) {
        jnode *n = node(p, E_AND);
        if (!n) return NULL;
        n->a = l;
        n->b = parse_not(p);
        l = n;
    }
    return l;
}

static jnode *parse_or(parser *p) {
    jnode *l = parse_and(p);
    while (!p->failed && skip_name(p, "or")) {
        jnode *n = node(p, E_OR);
        if (!n) return NULL;
        n->a = l;
        n->b = parse_and(p);
        l = n;
    }
    return l;
}

static jnode *parse_condexpr(parser *p) {
    jnode *e = parse_or(p);
    while (!p->failed && skip_name(p, "if")) {
        jnode *n = node(p, E_COND);
        if (!n) return NULL;
        n->b = e;
        n->a = parse_or(p);
        if (skip_name(p, "else")) {
            if (!enter(p)) return NULL;
            n->c = parse_condexpr(p);
            p->depth--;
        }
        e = n;
    }
    return e;
}

static jnode *parse_expression(parser *p, bool with_condexpr) {
    if (!enter(p)) return NULL;
    jnode *n = with_condexpr ? parse_condexpr(p) : parse_or(p);
    p->depth--;
    return n;
}

static jnode *parse_tuple(parser *p, bool simplified, bool with_condexpr, const char *extra_end,
                          bool explicit_parens) {
    nlist l = {0};
    bool is_tuple = false;
    while (!p->failed) {
        if (l.n) expect_op(p, ",");
        tok *t = cur(p);
        if (t->kind == T_VAR_END || t->kind == T_BLOCK_END || is_op(t, ")") ||
            (extra_end && is_name(t, extra_end)))
            break;
        jnode *e = simplified ? parse_primary(p) : parse_expression(p, with_condexpr);
        nlist_push(p, &l, e, NULL);
        if (is_op(cur(p), ",")) is_tuple = true;
        else break;
    }
    if (p->failed) return NULL;
    if (!is_tuple) {
        if (l.n) return l.v[0];
        if (!explicit_parens) {
            perr(p, cur(p)->line, "expected an expression, got %s", tok_desc(cur(p)));
            return NULL;
        }
    }
    jnode *n = node(p, E_TUPLE);
    if (n) {
        n->args = l.v;
        n->n_args = l.n;
    }
    return n;
}

/* ---- statements ---------------------------------------------------------------------- */

static jnode *parse_body(parser *p, const char *const *ends);

static bool check_target(parser *p, jnode *t) {
    if (!t) return false;
    if (t->kind == E_NAME) return true;
    if (t->kind == E_TUPLE) {
        for (int i = 0; i < t->n_args; i++)
            if (!t->args[i] || t->args[i]->kind != E_NAME) goto bad;
        return true;
    }
bad:
    perr(p, t->line, "can't assign to this expression");
    return false;
}

static jnode *parse_assign_target(parser *p, const char *extra_end, bool with_namespace) {
    if (with_namespace && cur(p)->kind == T_NAME && is_op(peek(p, 1), ".")) {
        jnode *n = node(p, E_ATTR);
        if (!n) return NULL;
        jnode *base = node(p, E_NAME);
        if (!base) return NULL;
        base->str = cur(p)->s;
        next(p);
        next(p);
        n->a = base;
        n->str = expect_name(p);
        return n;
    }
    jnode *t = parse_tuple(p, true, true, extra_end, false);
    return check_target(p, t) ? t : NULL;
}

/* Parameters of a macro or caller: `(a, b=default)`, the current token is '('. */
static void parse_signature(parser *p, jnode *n) {
    expect_op(p, "(");
    nlist l = {0};
    while (!p->failed && !is_op(cur(p), ")")) {
        if (l.n) expect_op(p, ",");
        const char *name = expect_name(p);
        jnode *def = NULL;
        if (skip_op(p, "=")) def = parse_expression(p, true);
        nlist_push(p, &l, def, name);
    }
    expect_op(p, ")");
    n->args = l.v;
    n->names = l.names;
    n->n_args = n->n_names = l.n;
}

static jnode *parse_statement(parser *p) {
    tok *t = cur(p);
    if (t->kind != T_NAME) {
        perr(p, t->line, "tag name expected");
        return NULL;
    }
    const char *kw = t->s;
    int line = t->line;
    next(p);
    jnode *n = NULL;
    if (!strcmp(kw, "if")) {
        n = node(p, S_IF);
        jnode *at = n;
        while (at && !p->failed) {
            at->a = parse_tuple(p, false, false, NULL, false);
            expect_kind(p, T_BLOCK_END);
            static const char *const ends[] = {"endif", "elif", "else", NULL};
            at->b = parse_body(p, ends);
            if (p->failed) return NULL;
            if (skip_name(p, "elif")) {
                at->c = node(p, S_IF);
                at = at->c;
                continue;
            }
            if (skip_name(p, "else")) {
                expect_kind(p, T_BLOCK_END);
                static const char *const ends2[] = {"endif", NULL};
                at->c = parse_body(p, ends2);
            }
            if (!skip_name(p, "endif")) perr(p, cur(p)->line, "expected 'endif'");
            break;
        }
    } else if (!strcmp(kw, "for")) {
        n = node(p, S_FOR);
        if (!n) return NULL;
        jnode *target = parse_assign_target(p, "in", false);
        if (!target) return NULL;
        if (target->kind == E_NAME) {
            n->names = arena_alloc(p, sizeof *n->names);
            if (!n->names) return NULL;
            n->names[0] = target->str;
            n->n_names = 1;
        } else {
            n->names = arena_alloc(p, (size_t)target->n_args * sizeof *n->names);
            if (!n->names) return NULL;
            for (int i = 0; i < target->n_args; i++) n->names[i] = target->args[i]->str;
            n->n_names = target->n_args;
            n->op = 1; /* unpack */
        }
        if (!skip_name(p, "in")) {
            perr(p, cur(p)->line, "expected 'in'");
            return NULL;
        }
        n->a = parse_tuple(p, false, false, "recursive", false);
        if (skip_name(p, "if")) n->d = parse_expression(p, true);
        if (is_name(cur(p), "recursive")) {
            perr(p, cur(p)->line, "recursive loops are not supported");
            return NULL;
        }
        expect_kind(p, T_BLOCK_END);
        static const char *const ends[] = {"endfor", "else", NULL};
        n->b = parse_body(p, ends);
        if (p->failed) return NULL;
        if (skip_name(p, "else")) {
            expect_kind(p, T_BLOCK_END);
            static const char *const ends2[] = {"endfor", NULL};
            n->c = parse_body(p, ends2);
        }
        if (!skip_name(p, "endfor")) perr(p, cur(p)->line, "expected 'endfor'");
    } else if (!strcmp(kw, "set")) {
        jnode *target = parse_assign_target(p, NULL, true);
        if (!target) return NULL;
        if (skip_op(p, "=")) {
            n = node(p, S_SET);
            if (!n) return NULL;
            n->a = target;
            n->b = parse_tuple(p, false, true, NULL, false);
        } else {
            n = node(p, S_SET_BLOCK);
            if (!n) return NULL;
            n->a = target;
            jnode *f = parse_filter(p, NULL, false);
            nlist fl = {0};
            for (jnode *x = f; x; x = x->a) nlist_push(p, &fl, x, NULL);
            n->args = fl.v; /* innermost last: applied from the end */
            n->n_args = fl.n;
            expect_kind(p, T_BLOCK_END);
            static const char *const ends[] = {"endset", NULL};
            n->b = parse_body(p, ends);
            if (!skip_name(p, "endset")) perr(p, cur(p)->line, "expected 'endset'");
        }
    } else if (!strcmp(kw, "macro")) {
        n = node(p, S_MACRO);
        if (!n) return NULL;
        n->str = expect_name(p);
        parse_signature(p, n);
        expect_kind(p, T_BLOCK_END);
        static const char *const ends[] = {"endmacro", NULL};
        n->b = parse_body(p, ends);
        if (!skip_name(p, "endmacro")) perr(p, cur(p)->line, "expected 'endmacro'");
    } else if (!strcmp(kw, "call")) {
        n = node(p, S_CALL_BLOCK);
        if (!n) return NULL;
        if (is_op(cur(p), "(")) parse_signature(p, n);
        n->a = parse_expression(p, true);
        if (n->a && n->a->kind != E_CALL) perr(p, line, "expected a call after 'call'");
        expect_kind(p, T_BLOCK_END);
        static const char *const ends[] = {"endcall", NULL};
        n->b = parse_body(p, ends);
        if (!skip_name(p, "endcall")) perr(p, cur(p)->line, "expected 'endcall'");
    } else if (!strcmp(kw, "filter")) {
        n = node(p, S_FILTER_BLOCK);
        if (!n) return NULL;
        jnode *f = parse_filter(p, NULL, true);
        nlist fl = {0};
        for (jnode *x = f; x; x = x->a) nlist_push(p, &fl, x, NULL);
        n->args = fl.v;
        n->n_args = fl.n;
        expect_kind(p, T_BLOCK_END);
        static const char *const ends[] = {"endfilter", NULL};
        n->b = parse_body(p, ends);
        if (!skip_name(p, "endfilter")) perr(p, cur(p)->line, "expected 'endfilter'");
    } else if (!strcmp(kw, "with")) {
        n = node(p, S_WITH);
        if (!n) return NULL;
        nlist targets = {0}, values = {0};
        while (!p->failed && cur(p)->kind != T_BLOCK_END) {
            if (targets.n) expect_op(p, ",");
            jnode *t = parse_assign_target(p, NULL, false);
            expect_op(p, "=");
            nlist_push(p, &targets, t, NULL);
            nlist_push(p, &values, parse_expression(p, true), NULL);
        }
        n->args = targets.v;
        n->n_args = targets.n;
        n->kw = values.v;
        n->n_kw = values.n;
        expect_kind(p, T_BLOCK_END);
        static const char *const ends[] = {"endwith", NULL};
        n->b = parse_body(p, ends);
        if (!skip_name(p, "endwith")) perr(p, cur(p)->line, "expected 'endwith'");
    } else if (!strcmp(kw, "generation")) {
        expect_kind(p, T_BLOCK_END);
        static const char *const ends[] = {"endgeneration", NULL};
        n = parse_body(p, ends);
        if (!skip_name(p, "endgeneration")) perr(p, cur(p)->line, "expected 'endgeneration'");
    } else if (!strcmp(kw, "break") || !strcmp(kw, "continue")) {
        n = node(p, kw[0] == 'b' ? S_BREAK : S_CONTINUE);
    } else {
        perr(p, line, "unknown tag '%s'", kw);
        return NULL;
    }
    expect_kind(p, T_BLOCK_END);
    if (n) n->line = line;
    return p->failed ? NULL : n;
}

/* Statements up to one of `ends` (a block tag whose name is in the list, left as
 * the current token) or the end of the template (only when ends is NULL). */
static jnode *parse_body(parser *p, const char *const *ends) {
    jnode *body = node(p, S_BODY);
    if (!body) return NULL;
    if (++p->depth > JINJA_MAX_NESTING) {
        perr(p, cur(p)->line, "blocks nested too deeply");
        p->status = VT_E_RANGE;
        return NULL;
    }
    nlist l = {0};
    while (!p->failed) {
        tok *t = cur(p);
        if (t->kind == T_EOF) {
            if (ends) perr(p, t->line, "unexpected end of template, expected '%s'", ends[0]);
            break;
        }
        if (t->kind == T_TEXT) {
            jnode *n = node(p, S_TEXT);
            if (n) n->lit = keep_lit(p, jinja_string(t->s, t->len));
            nlist_push(p, &l, n, NULL);
            next(p);
        } else if (t->kind == T_VAR_BEGIN) {
            next(p);
            jnode *n = node(p, S_OUTPUT);
            if (n) n->a = parse_tuple(p, false, true, NULL, false);
            expect_kind(p, T_VAR_END);
            nlist_push(p, &l, n, NULL);
        } else if (t->kind == T_BLOCK_BEGIN) {
            tok *name = peek(p, 1);
            bool is_end = false;
            for (int i = 0; ends && ends[i]; i++) is_end |= is_name(name, ends[i]);
            if (is_end) {
                next(p);
                break;
            }
            if (name->kind == T_NAME && (!strncmp(name->s, "end", 3) || !strcmp(name->s, "elif") ||
                                         !strcmp(name->s, "else"))) {
                perr(p, name->line, "unexpected '%s'", name->s);
                break;
            }
            next(p);
            nlist_push(p, &l, parse_statement(p), NULL);
        } else {
            perr(p, t->line, "unexpected %s", tok_desc(t));
        }
    }
    p->depth--;
    body->args = l.v;
    body->n_args = l.n;
    return body;
}

vt_status jinja_template_parse(const char *src, size_t len, jinja_template **out) {
    *out = NULL;
    if (len > JINJA_MAX_SOURCE)
        return vt_errorf(VT_E_RANGE, "template: %zu bytes, more than the %d allowed", len,
                         JINJA_MAX_SOURCE);
    jinja_template *t = calloc(1, sizeof *t);
    char *norm = malloc(len + 1);
    parser p = {.t = t};
    if (!t || !norm) {
        free(t);
        free(norm);
        return vt_errorf(VT_E_NOMEM, "template: out of memory");
    }
    /* newlines: \r\n and \r become \n; one trailing newline goes */
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            norm[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            norm[n++] = src[i];
        }
    }
    if (n && norm[n - 1] == '\n') n--;
    p.last_line = 1 + count_lines(norm, n);
    lex(&p, norm, n);
    free(norm);
    if (!p.failed) push_tok(&p, T_EOF, p.last_line);
    if (!p.failed) t->root = parse_body(&p, NULL);
    free(p.toks);
    if (p.failed) {
        jinja_template_destroy(t);
        return vt_errorf(p.status ? p.status : VT_E_FORMAT, "%s", p.err);
    }
    *out = t;
    return VT_OK;
}

void jinja_template_destroy(jinja_template *t) {
    if (!t) return;
    for (size_t i = 0; i < t->n_lits; i++) {
        t->lits[i]->flags &= (uint8_t)~JV_F_STATIC;
        jinja_value_free(t->lits[i]);
    }
    free(t->lits);
    for (jarena_chunk *c = t->chunks; c;) {
        jarena_chunk *next_c = c->next;
        free(c);
        c = next_c;
    }
    free(t);
}
