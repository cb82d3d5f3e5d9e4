/* Chat requests rendered with the model's Jinja template (src/server/chat_jinja):
 * an OpenAI request whose tool-call arguments arrive as a JSON string renders, for
 * every real template of ../shared/chat-templates, byte for byte what transformers
 * renders for the same conversation with the arguments as an object (the
 * reference's tool_call_round_trip and tools_offered cases), and refuses where it
 * refuses; then the request-side details: developer -> system, joined text parts,
 * chat_template_kwargs, a leading bos_token dropped when the tokenizer adds BOS. */
#include "test.h"

#include "jinja/jinja.h"
#include "server/chat_jinja.h"
#include "server/openai.h"

#include "base/status.h"

#include <pthread.h>

/* The reference's cases as OpenAI requests: arguments as a JSON string. */
static const char *const REQUESTS[][2] = {
    {"tool_call_round_trip",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"What is the weather in Paris?\"},"
     " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"a1b2c3d4e\", \"type\": \"function\","
     " \"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\", \\\"unit\\\": \\\"celsius\\\"}\"}}]},"
     " {\"role\": \"tool\", \"tool_call_id\": \"a1b2c3d4e\", \"name\": \"get_weather\","
     " \"content\": \"{\\\"temperature\\\": 21, \\\"sky\\\": \\\"clear\\\"}\"}],"
     " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Current weather for a city.\","
     " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"unit\": {\"type\": \"string\"}},"
     " \"required\": [\"city\"]}}}]}"},
    {"tools_offered",
     "{\"messages\": [{\"role\": \"developer\", \"content\": \"You can call tools.\"},"
     " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"What is the weather \"}, {\"type\": \"text\", \"text\": \"in Paris?\"}]}],"
     " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Current weather for a city.\","
     " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City name\"},"
     " \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"]}}},"
     " {\"type\": \"function\", \"function\": {\"name\": \"search\", \"description\": \"Web search.\","
     " \"parameters\": {\"type\": \"object\", \"properties\": {\"query\": {\"type\": \"string\"}}, \"required\": [\"query\"]}}}]}"},
};

static void test_real_templates(void) {
    const char *dir = test_templates_dir();
    char path[8192];
    snprintf(path, sizeof path, "%.4000s/expected.json", dir);
    size_t len;
    char *text = test_read_file(path, &len);
    if (!text) {
        const char *ci = getenv("CI");
        if (ci && !strcmp(ci, "true")) {
            test_failed_++;
            fprintf(stderr, "FAIL: chat templates missing under CI=true (%s)\n", dir);
        } else {
            fprintf(stderr, "skip: chat templates missing (%s)\n", dir);
        }
        return;
    }
    json_error_t jerr;
    json_t *expected = json_loadb(text, len, 0, &jerr);
    free(text);
    CHECK(expected != NULL);
    if (!expected) return;
    chat_jinja_env env = {.bos_token = "<s>", .eos_token = "</s>", .year = 2026, .month = 12, .day = 5};
    int total = 0, matched = 0;
    const char *name;
    json_t *per_case;
    json_object_foreach(expected, name, per_case) {
        snprintf(path, sizeof path, "%.4000s/%.1000s", dir, name);
        size_t src_len;
        char *src = test_read_file(path, &src_len);
        jinja_template *t = NULL;
        CHECK_OK(jinja_template_parse(src, src_len, &t));
        free(src);
        for (size_t k = 0; t && k < sizeof REQUESTS / sizeof REQUESTS[0]; k++) {
            oai_request r;
            CHECK_OK(oai_parse_request(OAI_CHAT, REQUESTS[k][1], strlen(REQUESTS[k][1]), &r));
            json_t *want = json_object_get(json_object_get(per_case, REQUESTS[k][0]), "text");
            char *out = NULL;
            size_t out_len = 0;
            vt_status st = chat_jinja_render(t, &r, &env, &out, &out_len);
            total++;
            if (want) {
                bool ok = st == VT_OK && out_len == json_string_length(want) &&
                          !memcmp(out, json_string_value(want), out_len);
                matched += ok;
                CHECK_MSG(ok, "%s / %s: %s", name, REQUESTS[k][0], st == VT_OK ? "differs" : vt_last_error());
            } else {
                matched += st == VT_E_INVALID;
                CHECK_MSG(st == VT_E_INVALID && strstr(vt_last_error(), "chat template: "), "%s / %s: status %d",
                          name, REQUESTS[k][0], (int)st);
            }
            free(out);
            oai_request_free(&r);
        }
        jinja_template_destroy(t);
    }
    printf("OpenAI requests through the real templates: %d of %d match\n", matched, total);
    CHECK(total >= 112);
    json_decref(expected);
}

static char *render(const char *tmpl, const char *body, const chat_jinja_env *env, vt_status *st) {
    jinja_template *t = NULL;
    oai_request r;
    char *out = NULL;
    size_t len;
    *st = jinja_template_parse(tmpl, strlen(tmpl), &t);
    if (*st == VT_OK) *st = oai_parse_request(OAI_CHAT, body, strlen(body), &r);
    if (*st == VT_OK) {
        *st = chat_jinja_render(t, &r, env, &out, &len);
        oai_request_free(&r);
    }
    jinja_template_destroy(t);
    return out;
}

static void test_request_details(void) {
    chat_jinja_env env = {.bos_token = "<s>", .eos_token = "</s>"};
    vt_status st;
    /* roles, joined parts, null content, kwargs, the generation prompt */
    char *out = render("{% for m in messages %}{{ m.role }}:{{ m.content }}|{% endfor %}{{ add_generation_prompt }}"
                       "{{ enable_thinking }}{{ eos_token }}",
                       "{\"messages\": [{\"role\": \"developer\", \"content\": \"d\"}, {\"role\": \"user\", \"content\":"
                       " [{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"text\", \"text\": \"b\"}]},"
                       " {\"role\": \"assistant\", \"content\": null}], \"chat_template_kwargs\": {\"enable_thinking\": false}}",
                       &env, &st);
    CHECK_MSG(out && !strcmp(out, "system:d|user:ab|assistant:None|TrueFalse</s>"), "%s", out ? out : vt_last_error());
    free(out);
    /* arguments: a JSON string becomes an object; a non-JSON string stays */
    out = render("{% for c in messages[0].tool_calls %}{{ c.function.arguments is mapping }}{% endfor %}",
                 "{\"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": ["
                 "{\"function\": {\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}},"
                 "{\"function\": {\"name\": \"f\", \"arguments\": \"not json\"}}]}]}",
                 &env, &st);
    CHECK_MSG(out && !strcmp(out, "TrueFalse"), "%s", out ? out : vt_last_error());
    free(out);
    /* the tokenizer adds BOS: a rendered leading bos_token goes, once */
    env.strip_bos = true;
    out = render("{{ bos_token }}{{ bos_token }}x", "{\"messages\": [{\"role\": \"user\", \"content\": \"u\"}]}", &env, &st);
    CHECK_MSG(out && !strcmp(out, "<s>x"), "%s", out ? out : vt_last_error());
    free(out);
    /* a raise becomes VT_E_INVALID with the template's message; a limit too */
    out = render("{{ raise_exception('Only user and assistant roles are supported!') }}",
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"u\"}]}", &env, &st);
    CHECK(!out && st == VT_E_INVALID && strstr(vt_last_error(), "chat template: Only user and assistant"));
    out = render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"u\"}]}", &env, &st);
    CHECK(!out && st == VT_E_INVALID);
}

/* The server renders one parsed template on many connection threads at once
 * (TSan runs this test): literals are shared, never reference-counted. */
typedef struct thread_arg {
    const jinja_template *t;
    const char *want;
    int failures;
} thread_arg;

static void *render_loop(void *p) {
    thread_arg *a = p;
    chat_jinja_env env = {.bos_token = "<s>", .eos_token = "</s>"};
    for (int i = 0; i < 50; i++) {
        oai_request r;
        char *out = NULL;
        size_t len;
        if (oai_parse_request(OAI_CHAT, REQUESTS[0][1], strlen(REQUESTS[0][1]), &r) != VT_OK) {
            a->failures++;
            continue;
        }
        if (chat_jinja_render(a->t, &r, &env, &out, &len) != VT_OK || strcmp(out, a->want)) a->failures++;
        free(out);
        oai_request_free(&r);
    }
    return NULL;
}

static void test_threads(void) {
    const char *src = "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
                      "{{ m.role }}{{ m.tool_calls | default([]) | map(attribute='function') | map(attribute='arguments')"
                      " | list | tojson }}{% endfor %}{{ ns.n }}{{ tools | length }}{{ {'k': [1, 'v']} }}";
    const char *want = "user[]assistant[{\"city\": \"Paris\", \"unit\": \"celsius\"}]tool[]31{'k': [1, 'v']}";
    jinja_template *t = NULL;
    CHECK_OK(jinja_template_parse(src, strlen(src), &t));
    if (!t) return;
    thread_arg args[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (thread_arg){.t = t, .want = want};
        CHECK(pthread_create(&th[i], NULL, render_loop, &args[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(args[i].failures, 0);
    }
    jinja_template_destroy(t);
}

int main(void) {
    test_request_details();
    test_threads();
    test_real_templates();
    return test_finish();
}
