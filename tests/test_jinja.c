/* The Jinja interpreter: every real chat template of ../shared/chat-templates
 * against every conversation, byte for byte with what transformers renders
 * (expected.json, made by render.py with Python's jinja2), errors where it errors;
 * then the semantics the templates lean on, one by one, and the limits. */
#include "test.h"

#include "jinja/jinja.h"
#include "jinja/jinja_impl.h"

#include "base/status.h"

#include <dirent.h>
#include <stdint.h>

/* Renders src with vars given as JSON; returns the text (caller frees) or NULL,
 * with the status in *st. */
static jinja_limits test_limits_;

static char *render_json(const char *src, const char *vars_json, vt_status *st) {
    jinja_template *t = NULL;
    jinja_value *vars = NULL;
    char *out = NULL;
    size_t len;
    *st = jinja_template_parse(src, strlen(src), &t);
    if (*st != VT_OK) return NULL;
    *st = jinja_value_from_json(vars_json, strlen(vars_json), &vars);
    if (*st == VT_OK) {
        jinja_render_opts o = {.limits = test_limits_, .year = 2026, .month = 12, .day = 5};
        *st = jinja_template_render(t, vars, &o, &out, &len);
    }
    jinja_value_free(vars);
    jinja_template_destroy(t);
    return out;
}

#define RENDER_IS(src, vars, want)                                                          \
    do {                                                                                    \
        vt_status st_;                                                                      \
        char *got_ = render_json(src, vars, &st_);                                          \
        CHECK_MSG(got_ && !strcmp(got_, want), "%s -> [%s] (%s), want [%s]", src,           \
                  got_ ? got_ : "NULL", got_ ? "" : vt_last_error(), want);                 \
        free(got_);                                                                         \
    } while (0)

#define RENDER_FAILS(src, vars, want_status)                                                \
    do {                                                                                    \
        vt_status st_;                                                                      \
        char *got_ = render_json(src, vars, &st_);                                          \
        CHECK_MSG(!got_ && st_ == (want_status), "%s -> [%s] status %d", src,               \
                  got_ ? got_ : "NULL", (int)st_);                                          \
        free(got_);                                                                         \
    } while (0)

static void test_real_templates(void) {
    const char *dir = test_templates_dir();
    char path[8192];
    snprintf(path, sizeof path, "%.4000s/cases.json", dir);
    size_t cases_len, exp_len;
    char *cases_text = test_read_file(path, &cases_len);
    snprintf(path, sizeof path, "%.4000s/expected.json", dir);
    char *exp_text = test_read_file(path, &exp_len);
    if (!cases_text || !exp_text) {
        const char *ci = getenv("CI");
        if (ci && !strcmp(ci, "true")) {
            test_failed_++;
            fprintf(stderr, "FAIL: chat templates missing under CI=true (%s)\n", dir);
        } else {
            fprintf(stderr, "skip: chat templates missing (%s)\n", dir);
        }
        free(cases_text);
        free(exp_text);
        return;
    }
    jinja_value *spec = NULL, *expected = NULL;
    CHECK_OK(jinja_value_from_json(cases_text, cases_len, &spec));
    CHECK_OK(jinja_value_from_json(exp_text, exp_len, &expected));
    free(cases_text);
    free(exp_text);
    if (!spec || !expected) return;
    jinja_value *cases = jinja_object_get(spec, "cases", 5);
    jinja_value *special = jinja_object_get(spec, "special", 7);
    int year = 2026, month = 12, day = 5;
    jinja_value *date = jinja_object_get(spec, "date", 4);
    if (date && date->kind == JV_STRING) sscanf(date->u.s.p, "%d-%d-%d", &year, &month, &day);
    int total = 0, matched = 0, refused = 0;
    for (size_t ti = 0; ti < expected->u.o.len; ti++) {
        const char *name = expected->u.o.e[ti].key->u.s.p;
        jinja_value *per_case = expected->u.o.e[ti].val;
        snprintf(path, sizeof path, "%.4000s/%.1000s", dir, name);
        size_t src_len;
        char *src = test_read_file(path, &src_len);
        CHECK_MSG(src != NULL, "%s: missing", path);
        if (!src) continue;
        jinja_template *t = NULL;
        vt_status pst = jinja_template_parse(src, src_len, &t);
        CHECK_MSG(pst == VT_OK, "%s: %s", name, vt_last_error());
        free(src);
        for (size_t ci = 0; ci < per_case->u.o.len; ci++) {
            const char *case_name = per_case->u.o.e[ci].key->u.s.p;
            jinja_value *want = per_case->u.o.e[ci].val;
            jinja_value *want_text = jinja_object_get(want, "text", 4);
            jinja_value *c = jinja_object_get(cases, case_name, strlen(case_name));
            total++;
            if (!t || !c) continue;
            /* special tokens, then the case, add_generation_prompt defaulting to false */
            jinja_value *vars = jinja_object();
            for (size_t k = 0; special && k < special->u.o.len; k++)
                jinja_object_set(vars, special->u.o.e[k].key->u.s.p, special->u.o.e[k].key->u.s.len,
                                 jinja_value_ref(special->u.o.e[k].val));
            for (size_t k = 0; k < c->u.o.len; k++)
                jinja_object_set(vars, c->u.o.e[k].key->u.s.p, c->u.o.e[k].key->u.s.len,
                                 jinja_value_ref(c->u.o.e[k].val));
            if (!jinja_object_get(vars, "add_generation_prompt", 21))
                jinja_object_set(vars, "add_generation_prompt", 21, jinja_bool(false));
            jinja_render_opts o = {.year = year, .month = month, .day = day};
            char *out = NULL;
            size_t out_len = 0;
            vt_status st = jinja_template_render(t, vars, &o, &out, &out_len);
            jinja_value_free(vars);
            if (want_text) {
                bool ok = st == VT_OK && out_len == want_text->u.s.len &&
                          !memcmp(out, want_text->u.s.p, out_len);
                if (ok) {
                    matched++;
                } else if (st != VT_OK) {
                    fprintf(stderr, "MISMATCH %s / %s: error: %s\n", name, case_name, vt_last_error());
                } else {
                    size_t at = 0;
                    while (at < out_len && at < want_text->u.s.len && out[at] == want_text->u.s.p[at]) at++;
                    size_t from = at > 40 ? at - 40 : 0;
                    fprintf(stderr, "MISMATCH %s / %s at byte %zu:\n  got  [%.*s]\n  want [%.*s]\n", name,
                            case_name, at, (int)(out_len - from < 100 ? out_len - from : 100), out + from,
                            (int)(want_text->u.s.len - from < 100 ? want_text->u.s.len - from : 100),
                            want_text->u.s.p + from);
                }
            } else if (st == VT_E_INVALID) {
                matched++;
                refused++;
            } else {
                fprintf(stderr, "MISMATCH %s / %s: rendered, but the reference refuses (%s)\n", name,
                        case_name, jinja_object_get(want, "error", 5)->u.s.p);
            }
            free(out);
        }
        jinja_template_destroy(t);
    }
    printf("chat templates: %d of %d renderings match (%d of them refusals)\n", matched, total, refused);
    CHECK_EQ_INT(matched, total);
    CHECK(total >= 560);
    jinja_value_free(spec);
    jinja_value_free(expected);
}

static void test_semantics(void) {
    /* whitespace control, trim_blocks and lstrip_blocks */
    RENDER_IS("a\n  {% if true %}\n  b\n  {% endif %}\nc", "{}", "a\n  b\nc");
    RENDER_IS("a  {%- if true -%}  b  {%- endif %}", "{}", "ab");
    RENDER_IS("x {{- ' y ' -}} z", "{}", "x y z");
    RENDER_IS("{# c #}\n  {#- c -#}  a\n", "{}", "a");
    RENDER_IS("  {%+ if true %}x{% endif %}", "{}", "  x");
    RENDER_IS("{% raw %}{{ x }}{% endraw %}", "{}", "{{ x }}");
    /* values print as Python prints them */
    RENDER_IS("{{ [1, 'a', none, true, 1.5] }} {{ {'k': \"it's\"} }} {{ (1,) }}", "{}",
              "[1, 'a', None, True, 1.5] {'k': \"it's\"} (1,)");
    RENDER_IS("{{ 1e20 }} {{ 0.1 + 0.2 }} {{ 3 / 2 }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }}", "{}",
              "1e+20 0.30000000000000004 1.5 3 2 1024");
    RENDER_IS("{{ 0.0001 }} {{ 0.00001 }} {{ 1.5e-5 }} {{ 1e15 }} {{ 1e16 }} {{ -0.0 }} {{ [0.00001] | tojson }}", "{}",
              "0.0001 1e-05 1.5e-05 1000000000000000.0 1e+16 -0.0 [1e-05]");
    /* scoping: a loop's set stays in the iteration; namespace carries out */
    RENDER_IS("{% set f = 0 %}{% for i in [1,2,3] %}{{ f }}{% if i == 2 %}{% set f = 5 %}{% endif %}{{ f }},{% endfor %}{{ f }}",
              "{}", "00,05,00,0");
    RENDER_IS("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
              "{}", "6");
    RENDER_IS("{% macro m() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}{% set x = 2 %}{{ m() }}", "{}", "12");
    RENDER_IS("{% macro m(a, b='d') %}{{ a }}-{{ b }}{% endmacro %}{{ m(1) }} {{ m(1, b=2) }}", "{}", "1-d 1-2");
    RENDER_IS("{% macro m() %}[{{ caller() }}]{% endmacro %}{% call m() %}in{% endcall %}", "{}", "[in]");
    RENDER_IS("{% for x in xs if x > 1 %}{{ loop.index }}{{ x }}{{ loop.last }}{% else %}none{% endfor %}",
              "{\"xs\": [1, 2, 3]}", "12False23True");
    RENDER_IS("{% for x in [] %}a{% else %}e{% endfor %}", "{}", "e");
    RENDER_IS("{% for x in [1,2,3,4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
              "{}", "13");
    RENDER_IS("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", "{\"d\": {\"b\": 1, \"a\": 2}}", "b=1;a=2;");
    RENDER_IS("{% for x in [1,2,3] %}{{ loop.previtem }}|{{ loop.nextitem }} {% endfor %}", "{}", "|2 1|3 2| ");
    RENDER_IS("{% set x %}  block {{ 1 }} {% endset %}[{{ x | trim }}]", "{}", "[block 1]");
    RENDER_IS("{% filter upper %}abc{% endfilter %}", "{}", "ABC");
    RENDER_IS("{% set a = 1 %}{% with a = 2, b = a %}{{ a }}{{ b }}{% endwith %}{{ a }}{{ b }}", "{}", "211");
    /* strings */
    RENDER_IS("{{ ' a b  '.split() }} {{ 'a,b,,c'.split(',', 2) }} {{ 'xxhixx'.strip('x') }}", "{}",
              "['a', 'b'] ['a', 'b', ',c'] hi");
    RENDER_IS("{{ 'héllo'[1:3] }} {{ 'abc'[::-1] }} {{ 'héllo' | length }} {{ 'ab'[-1] }}", "{}", "él cba 5 b");
    RENDER_IS("{{ 'a' ~ 1 ~ none }} {{ 'x' * 3 }} {{ 'Hi There'.lower() }} {{ 'ab cd' | title }}", "{}",
              "a1None xxx hi there Ab Cd");
    RENDER_IS("{{ 'abc'.startswith(('x', 'a')) }} {{ 'abc'.endswith('bc') }} {{ 'a' in 'cat' }}", "{}",
              "True True True");
    RENDER_IS("{{ '{} and {name}'.format(1, name='x') }} {{ '%s-%d' % ('a', 3) }}", "{}", "1 and x a-3");
    RENDER_IS("{{ 'a\\nb' | indent(2) }}|{{ 'a\\nb' | indent(2, first=true) }}", "{}", "a\n  b|  a\n  b");
    RENDER_IS("{% macro m(a) %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, k=3) }}", "{}", "(2,){'k': 3}");
    RENDER_IS("{{ 'x\\n' | indent }}|{{ 2.5 | round }}|{{ 3.5 | round }}|{{ 1 is sameas 1 }}", "{}", "x\n|2.0|4.0|True");
    /* filters */
    RENDER_IS("{{ {'a': 'é', 'b': [1, 2.5, none]} | tojson }}", "{}", "{\"a\": \"é\", \"b\": [1, 2.5, null]}");
    RENDER_IS("{{ {'a': 'é'} | tojson(ensure_ascii=true) }}", "{}", "{\"a\": \"\\u00e9\"}");
    RENDER_IS("{{ {'b': 1, 'a': [1]} | tojson(indent=2) }}", "{}", "{\n  \"b\": 1,\n  \"a\": [\n    1\n  ]\n}");
    RENDER_IS("{{ xs | selectattr('r', 'equalto', 'u') | map(attribute='c') | join(',') }}",
              "{\"xs\": [{\"r\": \"u\", \"c\": 1}, {\"r\": \"a\", \"c\": 2}, {\"r\": \"u\", \"c\": 3}]}", "1,3");
    RENDER_IS("{{ xs | rejectattr('r') | list | length }} {{ [3, 1, 2] | sort | list }} {{ ['b', 'A'] | sort }}",
              "{\"xs\": [{\"r\": 1}, {\"r\": 0}, {}]}", "2 [1, 2, 3] ['A', 'b']");
    RENDER_IS("{{ d | dictsort }} {{ d | items | list }}", "{\"d\": {\"b\": 1, \"a\": 2}}",
              "[('a', 2), ('b', 1)] [('b', 1), ('a', 2)]");
    RENDER_IS("{{ x | default('d') }} {{ '' | default('d', true) }} {{ none | default('d') }}", "{}", "d d None");
    RENDER_IS("{{ '12' | int + 1 }} {{ 'x' | int }} {{ [1, 2, 2, 1] | unique | list }} {{ [3, 1] | min }}", "{}",
              "13 0 [1, 2] 1");
    RENDER_IS("{{ ('<b>' | safe) + '<i>' }} {{ '<i>' ~ ('<b>' | safe) }}", "{}", "<b>&lt;i&gt; <i><b>");
    /* tests */
    RENDER_IS("{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }} {{ [] is iterable }} "
              "{{ 3 is odd }} {{ 1 is number }} {{ true is boolean }} {{ 'x' is not none }}",
              "{}", "False True True True True True True True True");
    /* strftime_now and globals */
    RENDER_IS("{{ strftime_now('%d %b %Y %A') }}", "{}", "05 Dec 2026 Saturday");
    RENDER_IS("{{ range(3) | list }} {{ range(1, 7, 2) | join(',') }} {{ dict(a=1) }}", "{}", "[0, 1, 2] 1,3,5 {'a': 1}");
    /* refusals: raise_exception, type errors, undefined used, sandbox */
    RENDER_FAILS("{{ raise_exception('no') }}", "{}", VT_E_INVALID);
    RENDER_FAILS("{{ 'a' + [1] }}", "{}", VT_E_INVALID);
    RENDER_FAILS("{{ x.y }}", "{}", VT_E_INVALID);
    RENDER_FAILS("{{ x + 1 }}", "{}", VT_E_INVALID);
    RENDER_FAILS("{% set l = [] %}{{ l.append(1) }}", "{}", VT_E_INVALID);
    RENDER_FAILS("{{ [1] | map('upper') | tojson }}", "{}", VT_E_INVALID);
    RENDER_FAILS("{{ 1 / 0 }}", "{}", VT_E_INVALID);
    /* a raise_exception's message is the template's own */
    {
        vt_status st;
        char *out = render_json("{{ raise_exception('System role not supported') }}", "{}", &st);
        CHECK(!out && strstr(vt_last_error(), "System role not supported"));
        free(out);
    }
    /* syntax errors are VT_E_FORMAT at parse time */
    const char *bad[] = {"{% if x %}", "{{ x", "{% for %}", "{{ (1 }}", "{% endif %}", "{% foo %}", "{{ 'a }}",
                         "{% set %}", "{% macro m( %}{% endmacro %}", "{{ x | }}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        jinja_template *t = NULL;
        vt_status st = jinja_template_parse(bad[i], strlen(bad[i]), &t);
        CHECK_MSG(st == VT_E_FORMAT && !t, "%s parsed (status %d)", bad[i], (int)st);
        jinja_template_destroy(t);
    }
}

static void test_limits(void) {
    /* hostile templates end with VT_E_RANGE instead of hanging or exhausting memory
     * (limits below the defaults keep the test short; the defaults work the same way) */
    test_limits_ = (jinja_limits){.max_steps = 100000, .max_memory = 16 << 20};
    RENDER_FAILS("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "{}", VT_E_RANGE);
    RENDER_FAILS("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "{}", VT_E_RANGE);
    RENDER_FAILS("{% set s = 'x' * 100000 %}{% for i in range(100000) %}{{ s }}{% endfor %}", "{}", VT_E_RANGE);
    RENDER_FAILS("{{ range(1000000000) | list }}", "{}", VT_E_RANGE);
    RENDER_FAILS("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                 "{}", VT_E_RANGE);
    test_limits_ = (jinja_limits){0};
    /* a small limit is honoured */
    jinja_template *t = NULL;
    const char *src = "{% for i in range(100) %}{{ i }}{% endfor %}";
    CHECK_OK(jinja_template_parse(src, strlen(src), &t));
    char *out = NULL;
    size_t len;
    jinja_render_opts o = {.limits = {.max_output = 50}};
    CHECK(jinja_template_render(t, NULL, &o, &out, &len) == VT_E_RANGE && !out);
    o.limits.max_output = 0;
    o.limits.max_steps = 50;
    CHECK(jinja_template_render(t, NULL, &o, &out, &len) == VT_E_RANGE && !out);
    o.limits.max_steps = 0;
    CHECK_OK(jinja_template_render(t, NULL, &o, &out, &len));
    CHECK_EQ_INT(len, 190);
    free(out);
    jinja_template_destroy(t);
    /* nesting past the parser's depth is refused, not a stack overflow */
    size_t n = 100000;
    char *deep = malloc(n * 2 + 8);
    memcpy(deep, "{{ ", 3);
    for (size_t i = 0; i < n; i++) deep[3 + i] = '(';
    memcpy(deep + 3 + n, " }}", 4);
    t = NULL;
    CHECK(jinja_template_parse(deep, strlen(deep), &t) != VT_OK && !t);
    free(deep);
}

#define RENDER_FAILS_WITH(src, want_status, want_msg)                                       \
    do {                                                                                    \
        RENDER_FAILS(src, "{}", want_status);                                               \
        CHECK_MSG(strstr(vt_last_error(), want_msg), "%s: error [%s], want [%s]", src,      \
                  vt_last_error(), want_msg);                                               \
    } while (0)

/* The graph of values stays a tree-like acyclic graph of bounded depth, so that
 * reference counting frees all of it and the recursive walks (free, str, tojson)
 * stay on the stack; and a caller never outlives the scope it runs in. Each case
 * was found by fuzz_jinja (a leak, a stack overflow, a use after free under
 * ASan); LeakSanitizer checks the first ones in the ASan job. */
static void test_value_graph(void) {
    /* a namespace holding itself: refused (reference counting cannot free a cycle) */
    RENDER_FAILS_WITH("{% set ns = namespace(x=[]) %}{% set ns.x = ns %}", VT_E_INVALID,
                      "a namespace cannot hold a namespace");
    RENDER_FAILS_WITH("{% set ns = namespace(x=[]) %}{% set ns.x = [1, {'a': ns}] %}", VT_E_INVALID,
                      "a namespace cannot hold a namespace");
    RENDER_FAILS_WITH("{% set a = namespace() %}{% set b = namespace(x=a) %}", VT_E_INVALID,
                      "a namespace cannot hold a namespace");
    /* a namespace inside lists and dicts is fine, and changes through them */
    RENDER_IS("{% set ns = namespace(n=1) %}{% set l = [ns, {'k': ns}] %}{% set ns.n = [2, [3]] %}"
              "{{ l[0].n }} {{ l[1].k.n[1] }}",
              "{}", "[2, [3]] [3]");
    /* nesting: bounded when built (Python's RecursionError), whatever builds it */
    RENDER_FAILS_WITH("{% set ns = namespace(x=none) %}{% for i in range(90000) %}{% set ns.x = [ns.x] %}"
                      "{% endfor %}{{ ns.x }}",
                      VT_E_RANGE, "nest deeper than 299");
    jinja_value *v = jinja_int(1);
    int levels = 0;
    for (; levels < 600; levels++) {
        jinja_value *outer = jinja_array();
        if (jinja_array_push(outer, v) != VT_OK) { /* took v over and freed it */
            v = outer;
            break;
        }
        v = outer;
    }
    CHECK_EQ_INT(levels, JV_NEST_MAX);
    jinja_value_free(v);
    RENDER_IS("{% set ns = namespace(x=1) %}{% for i in range(200) %}{% set ns.x = [ns.x] %}{% endfor %}"
              "{{ ns.x | tojson | length }}",
              "{}", "401");
    /* a slice inside a tuple subscript (fuzz_jinja: a NULL operand) */
    RENDER_IS("{{ [1, 2, 3][::, 2] }}|{{ {'a': 1}[1:, 'a'] is defined }}", "{}", "|False");
    /* a caller kept past its call block: an error, not a read of its freed scope */
    RENDER_FAILS_WITH("{% set ns = namespace(c=none) %}{% macro m() %}{% set ns.c = caller %}{% endmacro %}"
                      "{% for i in [1] %}{% set y = 7 %}{% call m() %}[{{ y }}{{ i }}]{% endcall %}{% endfor %}"
                      "{{ ns.c() }}",
                      VT_E_INVALID, "caller() was called after its call block ended");
    RENDER_IS("{% set ns = namespace(c=none) %}{% macro m() %}{% set ns.c = caller %}{{ ns.c() }}{% endmacro %}"
              "{% for i in [1] %}{% call m() %}[{{ i }}]{% endcall %}{% endfor %}",
              "{}", "[1]");
}

int main(void) {
    test_semantics();
    test_limits();
    test_value_graph();
    test_real_templates();
    return test_finish();
}
