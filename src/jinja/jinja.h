/* A sandboxed Jinja interpreter for chat templates.
 *
 * GGUF files carry their chat template as Jinja source (tokenizer.chat_template);
 * Hugging Face transformers renders it with Jinja2 in an ImmutableSandboxedEnvironment
 * with trim_blocks, lstrip_blocks and the loopcontrols extension, a `tojson` filter
 * that keeps non-ASCII text, `raise_exception(msg)` and `strftime_now(fmt)`. This
 * module renders the same bytes for the subset real templates use:
 *
 *   statements  if/elif/else, for (unpacking, `if` filter, else, loop.*, recursion
 *               not supported), set (incl. `set x.attr` on a namespace and block set
 *               with filters), with, macro (defaults, caller), call blocks, filter blocks,
 *               break/continue, generation, raw
 *   expressions literals (str, int, float, list, tuple, dict, booleans, none), names,
 *               .attr / [key] / [a:b:c], calls, filters, tests, + - * / // % ** ~,
 *               comparisons (chained), in / not in, and/or/not, `a if c else b`
 *   values      Python's semantics: str() and repr() of lists and dicts, float repr,
 *               Markup from `safe` (escapes what is added to it), Undefined (prints
 *               empty, fails when used), generators from map/select* (no len, no json)
 *
 * It is pure over buffers (no I/O, no clock: the date of strftime_now is an input)
 * and every render is bounded (jinja_limits): output bytes, live value bytes,
 * steps (loop iterations, macro calls, statements) and call depth, so a hostile
 * template fails with a message instead of hanging or exhausting the process.
 *
 * Values are a small JSON-like type (jinja_value), reference counted; callers build
 * the variables with the constructors below (or jinja_value_from_json) and free them
 * with jinja_value_free. Objects keep insertion order, as Python dicts do. */
#ifndef VT_JINJA_JINJA_H
#define VT_JINJA_JINJA_H

#include "vt.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct jinja_value jinja_value;
typedef struct jinja_template jinja_template;

typedef struct jinja_limits {
    size_t max_output;  /* bytes of rendered text (default 16 MiB) */
    size_t max_memory;  /* bytes of values alive during the render (default 256 MiB) */
    int64_t max_steps;  /* loop iterations + macro calls + statements + filter calls (default 1M) */
    int max_depth;      /* nested macro calls (default 64) */
} jinja_limits;

typedef struct jinja_render_opts {
    jinja_limits limits;         /* zero fields take the defaults */
    int year, month, day;        /* the date strftime_now sees (midnight); 0: 1970-01-01 */
} jinja_render_opts;

/* ---- values ----------------------------------------------------------------
 * Constructors return a new reference, or NULL when memory is exhausted.
 * jinja_array_push / jinja_object_set take over the reference to `v` (also on
 * failure; VT_E_INVALID when arr / obj is not an array / object). Strings are
 * UTF-8 bytes with a length (NUL bytes allowed). */
jinja_value *jinja_none(void);
jinja_value *jinja_bool(bool b);
jinja_value *jinja_int(int64_t i);
jinja_value *jinja_float(double f);
jinja_value *jinja_string(const char *s, size_t len);
jinja_value *jinja_array(void);
jinja_value *jinja_object(void);
vt_status jinja_array_push(jinja_value *arr, jinja_value *v);
/* Sets key (replacing an existing key's value in place, as a dict does). */
vt_status jinja_object_set(jinja_value *obj, const char *key, size_t key_len, jinja_value *v);
/* Borrowed value of `key`, or NULL. */
jinja_value *jinja_object_get(const jinja_value *obj, const char *key, size_t key_len);
jinja_value *jinja_value_ref(jinja_value *v);
bool jinja_is_object(const jinja_value *v);
/* Length of an array (0 for anything else) and its item i (borrowed; NULL past the end). */
size_t jinja_array_len(const jinja_value *v);
jinja_value *jinja_array_at(const jinja_value *v, size_t i);
/* The bytes of a string value; false when v is not a string. */
bool jinja_string_value(const jinja_value *v, const char **s, size_t *len);
void jinja_value_free(jinja_value *v); /* drops one reference; NULL is ignored */

/* Parses JSON text into a value (objects keep key order; integers that fit int64
 * stay integers, as Python's json does). VT_E_FORMAT with the byte offset. */
vt_status jinja_value_from_json(const char *json, size_t len, jinja_value **out);

/* ---- templates -------------------------------------------------------------- */

/* Parses template source (len bytes). *out is the caller's (jinja_template_destroy).
 * VT_E_FORMAT with the line of a syntax error; VT_E_RANGE for a source over 4 MiB
 * or nested deeper than the parser allows. */
vt_status jinja_template_parse(const char *src, size_t len, jinja_template **out);
void jinja_template_destroy(jinja_template *t);

/* Renders `t` with the variables of object `vars` (borrowed; NULL for none).
 * *out is malloc'd, NUL-terminated, the caller's; *out_len its length. A template
 * may run concurrently on several threads.
 * Errors: VT_E_INVALID when the template refuses the input (raise_exception: the
 * message is the template's own; or a type error, an undefined value used, ...),
 * VT_E_RANGE when a limit is passed, VT_E_NOMEM when malloc fails. */
vt_status jinja_template_render(const jinja_template *t, const jinja_value *vars,
                                const jinja_render_opts *opts, char **out, size_t *out_len);

#endif
