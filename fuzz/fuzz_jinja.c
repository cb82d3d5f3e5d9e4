/* libFuzzer target for the Jinja interpreter (src/jinja): parse arbitrary template
 * text and render it with arbitrary variables under tight limits. Checks: parse
 * and render either succeed or fail with a status from the contract and a
 * message; a rendering is NUL-terminated at its length and within max_output;
 * the JSON parser accepts or refuses any bytes; ASan/UBSan/LSan check memory,
 * and libFuzzer's -timeout catches a render that does not stop.
 *
 * Input layout: the template up to the first NUL byte (all of the input when
 * there is none); after it, the variables as JSON. When they do not parse as an
 * object, a fixed conversation (system, user, assistant with a tool call, tool)
 * with tools is used, so template-only seeds still reach the interesting paths.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DVT_FUZZ=ON
 *   cmake --build build-fuzz --target fuzz_jinja
 *   ./build-fuzz/fuzz_jinja -max_total_time=60 fuzz/corpus/jinja */
#include "jinja/jinja.h"

#include "base/status.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char DEFAULT_VARS[] =
    "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"add_generation_prompt\": true,"
    " \"messages\": [{\"role\": \"system\", \"content\": \"Be terse.\"},"
    " {\"role\": \"user\", \"content\": \"Weather in Paris? \\u00e9\\ud83d\\ude42\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"think\", \"tool_calls\": [{\"id\": \"c1\","
    " \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"{\\\"t\\\": 21}\"},"
    " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"part\"}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"d\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}},"
    " \"required\": [\"city\"]}}}], \"enable_thinking\": false}";

static bool status_ok(vt_status st, bool render) {
    if (st == VT_E_FORMAT || st == VT_E_RANGE || st == VT_E_NOMEM) return true;
    return render && (st == VT_E_INVALID || st == VT_E_UNSUPPORTED);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t tmpl_len = nul ? (size_t)(nul - data) : size;
    /* exact-size copies, so a read past either end trips ASan */
    char *src = malloc(tmpl_len ? tmpl_len : 1);
    if (!src) abort();
    if (tmpl_len) memcpy(src, data, tmpl_len);
    jinja_value *vars = NULL;
    if (nul) {
        size_t vlen = size - tmpl_len - 1;
        char *vtext = malloc(vlen ? vlen : 1);
        if (!vtext) abort();
        if (vlen) memcpy(vtext, nul + 1, vlen);
        vt_status st = jinja_value_from_json(vtext, vlen, &vars);
        if (st != VT_OK && (st != VT_E_FORMAT || vars)) abort();
        free(vtext);
        if (vars && !jinja_is_object(vars)) {
            jinja_value_free(vars);
            vars = NULL;
        }
    }
    if (!vars && jinja_value_from_json(DEFAULT_VARS, sizeof DEFAULT_VARS - 1, &vars) != VT_OK) abort();

    jinja_template *t = NULL;
    vt_status st = jinja_template_parse(src, tmpl_len, &t);
    if (st != VT_OK) {
        if (t || !status_ok(st, false) || !vt_last_error()[0]) abort();
    } else {
        jinja_render_opts o = {.limits = {.max_output = 1 << 20, .max_memory = 64 << 20, .max_steps = 200000,
                                          .max_depth = 32},
                               .year = 2026, .month = 12, .day = 5};
        char *out = NULL;
        size_t len = 0;
        st = jinja_template_render(t, vars, &o, &out, &len);
        if (st == VT_OK) {
            if (!out || out[len] != 0 || len > o.limits.max_output) abort();
        } else if (out || !status_ok(st, true) || !vt_last_error()[0]) {
            /* raise_exception('') leaves an empty message: allowed for VT_E_INVALID */
            if (out || !status_ok(st, true)) abort();
        }
        free(out);
        /* a template renders again from the same parse (nothing of a render stays behind) */
        char *again = NULL;
        size_t len2 = 0;
        vt_status st2 = jinja_template_render(t, vars, &o, &again, &len2);
        if (st2 != st || (st == VT_OK && (len2 != len))) abort();
        free(again);
    }
    jinja_template_destroy(t);
    jinja_value_free(vars);
    free(src);
    return 0;
}
