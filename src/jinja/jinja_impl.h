/* Internals of the Jinja interpreter shared by value.c, parse.c, eval.c and
 * builtins.c. Not for use outside src/jinja. */
#ifndef VT_JINJA_IMPL_H
#define VT_JINJA_IMPL_H

#include "jinja/jinja.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- values ------------------------------------------------------------------ */

typedef enum jv_kind {
    JV_UNDEFINED, /* s: the message a use of it fails with ("'x' is undefined") */
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STRING,
    JV_ARRAY,    /* list; JV_F_TUPLE for a tuple, JV_F_GEN for a generator */
    JV_OBJECT,   /* dict with string keys, insertion order; JV_F_NAMESPACE */
    JV_CALLABLE, /* a macro, a caller, a global function, loop.cycle */
} jv_kind;

enum {
    JV_F_STATIC = 1,    /* never freed, never counted (literals of a parsed template) */
    JV_F_SAFE = 2,      /* Markup: what is added to it gets HTML-escaped */
    JV_F_GEN = 4,       /* a generator: no len(), not JSON-serialisable, always true */
    JV_F_TUPLE = 8,     /* repr with parentheses */
    JV_F_NAMESPACE = 16, /* the one mutable object: `set ns.attr = ...` */
    JV_F_HOLDS_NS = 32,  /* a list or dict with a namespace somewhere inside */
    JV_F_SCOPE = 64      /* a frame's variables: not a value a template reaches */
};

/* How deep values nest (a scalar 0, [[1]] 2). Every walk of a value (free, str,
 * tojson, ==) recurses, so the depth is bounded when a container is built:
 * JV_NEST_MAX in all, JV_NS_NEST for what a namespace holds. Since a namespace
 * is the one value that changes after it is built, a namespace inside a list
 * counts as JV_NS_NEST, whatever it holds now or later, and a namespace never
 * holds a namespace, directly or inside a list or dict: so the graph of values
 * has no cycle, and reference counting frees all of it. */
enum { JV_NEST_MAX = 512, JV_NS_NEST = 300 };

typedef struct jv_entry {
    jinja_value *key; /* a JV_STRING */
    jinja_value *val;
} jv_entry;

typedef struct jnode jnode;
typedef struct jframe jframe;

typedef enum jc_kind {
    JC_MACRO,   /* node: S_MACRO */
    JC_CALLER,  /* node: S_CALL_BLOCK, frame: where the call block stands */
    JC_GLOBAL,  /* global: a function of builtins.c (range, namespace, ...) */
    JC_CYCLE,   /* loop.cycle: bound is the loop's 0-based index */
} jc_kind;

typedef struct jv_callable {
    jc_kind kind;
    int global;          /* JC_GLOBAL: index into the globals table */
    const jnode *node;
    jframe *frame;       /* JC_CALLER: the scope of its call block, alive while */
    uint64_t frame_id;   /* a frame with this id is on the context's stack */
    int64_t bound;
} jv_callable;

struct jinja_value {
    uint8_t kind;
    uint8_t flags;
    uint16_t nest; /* containers: 1 + the deepest child's nest (see JV_NEST_MAX) */
    size_t refs;
    size_t bytes; /* what this value counts against the memory budget */
    union {
        bool b;
        int64_t i;
        double f;
        struct { char *p; size_t len; } s;
        struct { jinja_value **v; size_t len, cap; } a;
        struct { jv_entry *e; size_t len, cap; } o; /* keys: strings, or scalars from literals */
        jv_callable c;
    } u;
};

/* The budget of the render running on this thread (NULL: none, no limit). */
typedef struct jmem {
    size_t used, limit;
    bool exceeded; /* an allocation was refused (over the limit, or malloc failed) */
    bool oom;      /* malloc itself failed */
    /* a container refused a child (too deep, a namespace in a namespace): the
     * message, and the status the render fails with */
    char refused[96]; /* "" when none */
    vt_status refused_status;
} jmem;
extern _Thread_local jmem *jinja_mem_current;

void *jmem_alloc(size_t n);
void *jmem_realloc(void *p, size_t old_n, size_t new_n);
void jmem_free(void *p, size_t n);

jinja_value *jv_undefined(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
jinja_value *jv_str(const char *s, size_t len);
jinja_value *jv_cstr(const char *s);
jinja_value *jv_callable_new(jc_kind kind);
bool jv_truthy(const jinja_value *v);
const char *jv_type_name(const jinja_value *v); /* Python's: 'str', 'list', 'dict', ... */
jinja_value *jv_get_key(const jinja_value *obj, const char *key, size_t len);
/* Keys of dict literals may be any scalar ({16384: 'x'}): lookup and set by value. */
jinja_value *jv_get_key_value(const jinja_value *obj, const jinja_value *key);
vt_status jv_object_set_value(jinja_value *obj, jinja_value *key, jinja_value *v);
int64_t jv_utf8_len(const char *s, size_t len);

/* Growable byte buffer whose memory counts against the budget; `limit` caps it
 * (0: no cap) and `over` records that it was hit. */
typedef struct jbuf {
    char *p;
    size_t len, cap, limit;
    bool failed;
} jbuf;
void jbuf_put(jbuf *b, const char *s, size_t n);
void jbuf_putc(jbuf *b, char c);
void jbuf_printf(jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void jbuf_release(jbuf *b);
/* Moves the bytes into a new string value (flags copied); frees the buffer. */
jinja_value *jbuf_to_value(jbuf *b, uint8_t flags);

/* Python's str(v) / repr(v) appended to b; float_repr formats like Python's repr. */
void jv_to_str(jbuf *b, const jinja_value *v);
void jv_repr(jbuf *b, const jinja_value *v);
void jv_float_repr(jbuf *b, double f);
/* json.dumps(v, ensure_ascii, indent (<0: none), separators, sort_keys); false when
 * a value is not serialisable (message in err). */
bool jv_to_json(jbuf *b, const jinja_value *v, bool ensure_ascii, int indent, const char *item_sep,
                const char *key_sep, bool sort_keys, char *err, size_t err_cap);
/* Python ==; and ordering: <0, 0, >0, or false when the types do not order. */
bool jv_equal(const jinja_value *a, const jinja_value *b);
bool jv_compare(const jinja_value *a, const jinja_value *b, int *out);

/* ---- templates --------------------------------------------------------------- */

typedef enum jnode_kind {
    S_BODY, S_TEXT, S_OUTPUT, S_IF, S_FOR, S_SET, S_SET_BLOCK, S_MACRO, S_CALL_BLOCK,
    S_FILTER_BLOCK, S_BREAK, S_CONTINUE, S_WITH,
    E_LIT, E_NAME, E_LIST, E_TUPLE, E_DICT, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER,
    E_TEST, E_NEG, E_POS, E_NOT, E_BIN, E_AND, E_OR, E_CMP, E_COND,
} jnode_kind;

typedef enum jop {
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN,
} jop;

/* One node of the syntax tree; which fields mean what depends on kind:
 *   S_BODY       args: statements
 *   S_TEXT       lit: the text
 *   S_OUTPUT     a: expression
 *   S_IF         a: condition, b: body, c: else (S_BODY, or S_IF for elif) or NULL
 *   S_FOR        names: targets, a: iterable, b: body, c: else or NULL, d: `if` filter
 *   S_SET        a: target (E_NAME, E_TUPLE of names, E_ATTR of a name), b: value
 *   S_SET_BLOCK  a: target, b: body, args: filters (E_FILTER with a == NULL)
 *   S_MACRO      str: name, names: parameters, args: defaults (NULL entries), b: body
 *   S_CALL_BLOCK a: the call (E_CALL), names/args: caller's parameters, b: body
 *   S_FILTER_BLOCK args: filters, b: body
 *   S_WITH       args: targets, kw: values (evaluated outside), b: body (own scope)
 *   E_LIT lit; E_NAME str; E_LIST/E_TUPLE args; E_DICT args: keys, kw: values
 *   E_ATTR a, str; E_ITEM a, b; E_SLICE a, args[3] (NULL entries)
 *   E_CALL a: callee; E_FILTER a: operand, str: name; E_TEST a, str, op: negated;
 *     all three: args positional, kw + kwnames keywords
 *   E_NEG/E_POS/E_NOT a; E_BIN op, a, b; E_AND/E_OR a, b
 *   E_CMP a: first operand, args: the rest, ops: one per rest (chained)
 *   E_COND a: condition, b: value, c: else value or NULL */
struct jnode {
    uint16_t kind;
    uint16_t op;
    int line;
    jnode *a, *b, *c, *d;
    jnode **args;
    int n_args;
    jnode **kw;
    const char **kwnames;
    int n_kw;
    const char **names;
    int n_names;
    const char *str;
    int *ops;
    jinja_value *lit;
};

typedef struct jarena_chunk jarena_chunk;

struct jinja_template {
    jnode *root;
    jarena_chunk *chunks;
    jinja_value **lits; /* every literal, freed with the template */
    size_t n_lits, cap_lits;
};

/* ---- evaluation ---------------------------------------------------------------- */

struct jframe {
    jinja_value *vars; /* an object */
    jframe *parent;    /* where a name not found here is looked up */
    jframe *below;     /* the frame pushed before this one (frames pop in order) */
    uint64_t id;       /* unique within a render: a caller finds its scope by it */
};

typedef struct jctx {
    const jinja_template *tpl;
    jbuf *out;             /* where text goes now (a block set or filter block swaps it) */
    jframe *root;
    jframe *frame;         /* the innermost scope */
    jframe *top;           /* the frame pushed last */
    uint64_t frame_ids;    /* ids handed out */
    jinja_limits lim;
    int64_t steps;
    int depth;             /* macro calls in progress */
    int eval_depth;        /* jeval calls in progress */
    int year, month, day;
    bool failed;
    vt_status status;
    char err[512];
} jctx;

/* Records the first error of the render (later ones are dropped); returns NULL so
 * that `return jctx_fail(...)` ends an expression. */
jinja_value *jctx_fail(jctx *cx, vt_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
jinja_value *jctx_nomem(jctx *cx);
bool jctx_step(jctx *cx);

jinja_value *jeval(jctx *cx, const jnode *n);
jinja_value *jframe_lookup(jctx *cx, jframe *f, const char *name);
/* Calls a callable with evaluated positional and keyword arguments. */
jinja_value *jcall_value(jctx *cx, jinja_value *fn, jinja_value **args, int n_args,
                         const char **kwnames, jinja_value **kw, int n_kw);

/* Applies filter node f (E_FILTER, its operand ignored) to v. */
jinja_value *japply_filter(jctx *cx, const jnode *f, jinja_value *v);
/* Python's `fmt % args` (%s %r %d %i %f %%); args a tuple or one value. */
jinja_value *jv_str_percent(jctx *cx, const jinja_value *fmt, const jinja_value *args);
/* str(v) as a new string value. */
jinja_value *jv_str_of(const jinja_value *v);

/* builtins.c: by name; NULL with cx failed on error. kwnames may be NULL. */
jinja_value *jbuiltin_filter(jctx *cx, const char *name, jinja_value *v, jinja_value **args,
                             int n_args, const char **kwnames, jinja_value **kw, int n_kw);
/* *out: the test's result; false when it failed (cx has the message). */
bool jbuiltin_test(jctx *cx, const char *name, jinja_value *v, jinja_value **args, int n_args,
                   bool *out);
bool jbuiltin_has_test(const char *name);
bool jbuiltin_has_filter(const char *name);
/* obj.name(args): str, list and dict methods. */
jinja_value *jbuiltin_method(jctx *cx, jinja_value *obj, const char *name, jinja_value **args,
                             int n_args, const char **kwnames, jinja_value **kw, int n_kw);
/* The global functions: index for a name, or -1; and the call. */
int jbuiltin_global_find(const char *name);
jinja_value *jbuiltin_global_call(jctx *cx, int global, jinja_value **args, int n_args,
                                  const char **kwnames, jinja_value **kw, int n_kw);
/* Attribute `name` of obj as Jinja's getattr (then getitem) finds it. */
jinja_value *jget_attr(jctx *cx, jinja_value *obj, const char *name, size_t len);
/* obj[key] as Jinja's getitem (then getattr) finds it. */
jinja_value *jget_item(jctx *cx, jinja_value *obj, jinja_value *key);
/* A list of the items iteration over v yields (dict: keys, str: characters). */
jinja_value *jiterate(jctx *cx, jinja_value *v);

#endif
