/* Structured output: JSON schema -> GBNF (server/json_schema.c) checked on
 * texts it must accept and refuse, unsupported keywords refused by name; then
 * sampling under grammars through the engine on a random-weight synthetic
 * model (vt synth with stories260K's 512-token SentencePiece vocabulary: real
 * pieces, byte fallback, the first token's dropped space; small, so that the
 * 1000 outputs below cost seconds) at temperature 1: for each
 * schema, 100 outputs all parse (jansson) and validate (a small validator
 * below); for llama.cpp's json.gbnf, arithmetic.gbnf and list.gbnf, 100
 * outputs each are sentences of the grammar. A forced tool call's grammar
 * (every format: hermes, qwen3_coder, glm, harmony, llama3, mistral in both
 * styles, deepseek) likewise gives 100 calls each that the tool-call parser
 * reads back and that validate against the tool's schema. Last, format markers
 * that are control tokens (test_preserved_markers): kept in the output only
 * where the request preserves them, and written as tokens by a forced call's
 * grammar. */
#include "grammar/grammar.h"
#include "model/model.h"
#include "model/synth.h"
#include "server/json_schema.h"
#include "server/toolcall.h"
#include "tokenizer/tokenizer.h"

#include "engine_util.h"
#include "jcheck.h"
#include "test.h"

#include <jansson.h>
#include <unistd.h>

/* ---- conversion ------------------------------------------------------------------ */

static grammar *convert(const char *schema_text) {
    json_error_t je;
    json_t *s = json_loads(schema_text, JSON_DECODE_ANY, &je);
    CHECK_MSG(s != NULL, "%s: %s", schema_text, je.text);
    strbuf b = {0};
    grammar *g = NULL;
    vt_status st = jschema_to_gbnf(s, "$", &b);
    CHECK_MSG(st == VT_OK, "%s: %s", schema_text, vt_last_error());
    if (st == VT_OK) {
        st = grammar_parse(b.ptr, b.len, NULL, &g);
        CHECK_MSG(st == VT_OK, "%s: %s\n%s", schema_text, vt_last_error(), b.ptr);
    }
    sb_free(&b);
    json_decref(s);
    return g;
}

static bool acc(const grammar *g, const char *s) { return g && grammar_accepts(g, s, strlen(s)); }

static void refused(const char *schema_text, const char *needle) {
    json_t *s = json_loads(schema_text, JSON_DECODE_ANY, NULL);
    strbuf b = {0};
    vt_status st = jschema_to_gbnf(s, "$", &b);
    CHECK_MSG(st == VT_E_INVALID && strstr(vt_last_error(), needle), "%s: got %d '%s', want '%s'", schema_text, st,
              st ? vt_last_error() : "", needle);
    sb_free(&b);
    json_decref(s);
}

static void test_conversion(void) {
    grammar *g = convert("{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, \"b\": {\"type\": "
                         "\"string\"}, \"c\": {\"type\": \"object\", \"properties\": {\"d\": {\"type\": \"boolean\"}}, "
                         "\"required\": [\"d\"]}}, \"required\": [\"b\"]}");
    CHECK(acc(g, "{\"b\": \"x\"}") && acc(g, "{\"a\": -12, \"b\": \"\"}") && acc(g, "{\"b\":\"q\",\"c\":{\"d\":true}}"));
    CHECK(acc(g, "{ \"a\" : 0 , \"b\" : \"\\\"\\\\\\n\\u00e9é\" , \"c\" : { \"d\" : false } } "));
    CHECK(!acc(g, "{\"a\": 1}"));               /* b is required */
    CHECK(!acc(g, "{\"b\": \"x\", \"a\": 1}")); /* the schema's order */
    CHECK(!acc(g, "{\"b\": \"x\", \"e\": 1}")); /* no other keys */
    CHECK(!acc(g, "{\"a\": 1.5, \"b\": \"x\"}") && !acc(g, "{\"a\": 01, \"b\": \"x\"}"));
    CHECK(!acc(g, "{\"b\": \"x\", \"c\": {}}") && !acc(g, "{\"b\": \"\\q\"}") && !acc(g, "{\"b\": \"\\ud800\"}"));
    CHECK(!acc(g, "{\"b\": \"a\nb\"}"));
    grammar_free(g);

    g = convert("{\"type\": \"array\", \"items\": {\"enum\": [\"red\", 2, null, {\"k\": [true]}]}, \"minItems\": 1, "
                "\"maxItems\": 3}");
    CHECK(acc(g, "[\"red\"]") && acc(g, "[2, null, {\"k\":[true]}]") && !acc(g, "[]") && !acc(g, "[\"blue\"]"));
    CHECK(!acc(g, "[2, 2, 2, 2]"));
    grammar_free(g);

    g = convert("{\"anyOf\": [{\"type\": \"number\"}, {\"const\": \"x\\\"y\"}, {\"type\": [\"null\", \"boolean\"]}]}");
    CHECK(acc(g, "-0.5e+10") && acc(g, "3") && acc(g, "\"x\\\"y\"") && acc(g, "null") && acc(g, "false"));
    CHECK(!acc(g, "\"x\"") && !acc(g, "1.") && !acc(g, "+1") && !acc(g, ".5"));
    grammar_free(g);

    g = convert("{\"type\": \"string\", \"minLength\": 2, \"maxLength\": 3}");
    CHECK(acc(g, "\"ab\"") && acc(g, "\"é\\n中\"") && !acc(g, "\"a\"") && !acc(g, "\"abcd\""));
    grammar_free(g);

    /* $defs with recursion, and a schema without type */
    g = convert("{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"next\": {\"anyOf\": [{\"$ref\": "
                "\"#/$defs/node\"}, {\"type\": \"null\"}]}}, \"required\": [\"next\"]}}, \"$ref\": \"#/$defs/node\"}");
    CHECK(acc(g, "{\"next\": {\"next\": null}}") && !acc(g, "{\"next\": 1}"));
    grammar_free(g);
    g = convert("{}");
    CHECK(acc(g, "[1, {\"a\": \"b\"}]") && acc(g, "\"s\"") && !acc(g, "[1,]"));
    grammar_free(g);
    g = convert("{\"type\": \"object\", \"additionalProperties\": false}");
    CHECK(acc(g, "{}") && !acc(g, "{\"a\": 1}"));
    grammar_free(g);

    refused("{\"type\": \"string\", \"pattern\": \"a+\"}", "keyword 'pattern' is not supported");
    refused("{\"type\": \"object\", \"properties\": {\"d\": {\"type\": \"string\", \"format\": \"date\"}}}",
            "$.properties.d: keyword 'format'");
    refused("{\"type\": \"integer\", \"minimum\": 3}", "'minimum'");
    refused("{\"allOf\": [{}]}", "'allOf'");
    refused("{\"type\": \"object\", \"properties\": {}, \"additionalProperties\": true}", "'additionalProperties'");
    refused("{\"type\": \"object\", \"properties\": {\"a\": {}}, \"required\": [\"b\"]}", "\"b\" is not in 'properties'");
    refused("{\"type\": \"str\"}", "\"str\" is not a JSON schema type");
    refused("{\"$ref\": \"#/$defs/none\"}", "is not defined");
    refused("{\"$ref\": \"http://x/y\"}", "only \"#/$defs/NAME\"");
    refused("{\"type\": \"array\", \"maxItems\": 1000000}", "maxItems: expected an integer in [0, 1000]");
    refused("{\"type\": \"array\", \"minItems\": 3, \"maxItems\": 2}", "below minItems");
    refused("{\"enum\": []}", "enum: expected a non-empty array");
    refused("3", "expected a schema object");
    char deep[4096];
    int n = 0;
    for (int i = 0; i < 40; i++) n += snprintf(deep + n, sizeof deep - (size_t)n, "{\"items\": ");
    n += snprintf(deep + n, sizeof deep - (size_t)n, "{}");
    for (int i = 0; i < 40; i++) n += snprintf(deep + n, sizeof deep - (size_t)n, "}");
    refused(deep, "nested more than 32 deep");
}

/* ---- a small JSON schema validator (the subset the converter supports) ---------- */

static size_t utf8_chars(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xc0) != 0x80;
    return k;
}

static bool validate(json_t *v, json_t *s, json_t *root) {
    if (json_is_true(s)) return true;
    json_t *x;
    if ((x = json_object_get(s, "$ref"))) {
        const char *r = json_string_value(x);
        return validate(v, json_object_get(json_object_get(root, "$defs"), r + 8), root);
    }
    if ((x = json_object_get(s, "const"))) return json_equal(v, x);
    if ((x = json_object_get(s, "enum"))) {
        size_t i;
        json_t *e;
        json_array_foreach(x, i, e) if (json_equal(v, e)) return true;
        return false;
    }
    if ((x = json_object_get(s, "anyOf"))) {
        size_t i;
        json_t *e;
        json_array_foreach(x, i, e) if (validate(v, e, root)) return true;
        return false;
    }
    const char *t = json_string_value(json_object_get(s, "type"));
    if (!t) return true;
    if (!strcmp(t, "object")) {
        if (!json_is_object(v)) return false;
        json_t *props = json_object_get(s, "properties");
        const char *k;
        json_t *e;
        json_object_foreach(v, k, e) {
            json_t *ps = json_object_get(props, k);
            if (!ps || !validate(e, ps, root)) return false;
        }
        size_t i;
        json_array_foreach(json_object_get(s, "required"), i, e) if (!json_object_get(v, json_string_value(e))) return false;
        return true;
    }
    if (!strcmp(t, "array")) {
        if (!json_is_array(v)) return false;
        json_t *mn = json_object_get(s, "minItems"), *mx = json_object_get(s, "maxItems");
        if (mn && (json_int_t)json_array_size(v) < json_integer_value(mn)) return false;
        if (mx && (json_int_t)json_array_size(v) > json_integer_value(mx)) return false;
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) if (!validate(e, json_object_get(s, "items"), root)) return false;
        return true;
    }
    if (!strcmp(t, "string")) {
        if (!json_is_string(v)) return false;
        const size_t n = utf8_chars(json_string_value(v), json_string_length(v));
        json_t *mn = json_object_get(s, "minLength"), *mx = json_object_get(s, "maxLength");
        return !(mn && (json_int_t)n < json_integer_value(mn)) && !(mx && (json_int_t)n > json_integer_value(mx));
    }
    if (!strcmp(t, "integer")) return json_is_integer(v);
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    return false;
}

/* ---- sampling -------------------------------------------------------------------------- */

#ifndef N_SAMPLES
#define N_SAMPLES 100
#endif
#define MAX_TOKENS 1000

static vt_model *g_model;
static int32_t *g_prompt;
static int64_t g_n_prompt;
static int g_n_samples = N_SAMPLES;  /* sample_many's count */
static const int32_t *g_preserve;     /* sample_many's preserved tokens */
static int32_t g_n_preserve;

typedef struct sample {
    char *text;
    size_t len;
    vt_finish finish;
    int32_t tokens[MAX_TOKENS]; /* the generated ids */
    int32_t n_tokens;
} sample;

/* N_SAMPLES outputs of the model under gbnf at temperature 1 (distinct seeds);
 * bias: logit_bias entries (may be NULL). */
static void sample_many(const char *gbnf, const vt_logit_bias *bias, int32_t n_bias, sample *out) {
    vt_engine_params ep = vt_engine_default_params();
    ep.n_threads = 2;
    ep.n_ctx = 2048;
    ep.max_seqs = 32;
    ep.kv_tokens = 32 * 2048;
    vt_engine *e = NULL;
    CHECK_OK(vt_engine_create(g_model, &ep, &e));
    if (!e) return;
    memset(out, 0, sizeof(sample) * N_SAMPLES);
    for (int i = 0; i < g_n_samples; i++) {
        vt_request_params q = {.prompt = g_prompt, .n_prompt = g_n_prompt, .max_tokens = MAX_TOKENS,
                               .grammar = gbnf, .grammar_len = strlen(gbnf), .user = &out[i],
                               .preserve = g_preserve, .n_preserve = g_n_preserve};
        q.sampling = vt_sampling_default();
        q.sampling.temperature = 1.0f;
        q.sampling.seed = 1000 + (uint64_t)i;
        q.sampling.logit_bias = bias;
        q.sampling.n_logit_bias = n_bias;
        uint64_t id;
        CHECK_OK(vt_engine_add(e, &q, &id));
    }
    int done = 0;
    while (done < g_n_samples && vt_engine_has_work(e)) {
        const vt_output *outs;
        int32_t n;
        CHECK_OK(vt_engine_step(e, &outs, &n));
        for (int32_t i = 0; i < n; i++) {
            sample *s = outs[i].user;
            if (outs[i].token >= 0 && s->n_tokens < MAX_TOKENS) s->tokens[s->n_tokens++] = outs[i].token;
            if (outs[i].text_len) {
                s->text = realloc(s->text, s->len + outs[i].text_len + 1);
                memcpy(s->text + s->len, outs[i].text, outs[i].text_len);
                s->len += outs[i].text_len;
                s->text[s->len] = 0;
            }
            if (outs[i].finish != VT_FINISH_NONE) {
                s->finish = outs[i].finish;
                if (outs[i].finish == VT_FINISH_ERROR) fprintf(stderr, "error: %s\n", outs[i].error);
                done++;
            }
        }
    }
    vt_engine_free(e);
}

static void samples_free(sample *s) {
    for (int i = 0; i < N_SAMPLES; i++) free(s[i].text);
}

static void test_schema_sampling(void) {
    static const char *const schemas[] = {
        /* nested objects, optional and required fields, an array of strings */
        "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 12}, \"address\": "
        "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 10}, \"zip\": "
        "{\"type\": \"integer\"}}, \"required\": [\"city\"]}, \"tags\": {\"type\": \"array\", \"items\": {\"type\": "
        "\"string\", \"maxLength\": 6}, \"minItems\": 1, \"maxItems\": 3}}, \"required\": [\"name\", \"address\"]}",
        /* enums, const, booleans, null */
        "{\"type\": \"object\", \"properties\": {\"color\": {\"enum\": [\"red\", \"green\", \"blue\"]}, \"size\": "
        "{\"enum\": [1, 2.5, null, true, \"XL\"]}, \"ok\": {\"type\": \"boolean\"}, \"kind\": {\"const\": \"fixed\"}, "
        "\"none\": {\"type\": \"null\"}}, \"required\": [\"color\", \"ok\", \"kind\"]}",
        /* numbers */
        "{\"type\": \"array\", \"items\": {\"anyOf\": [{\"type\": \"number\"}, {\"type\": \"integer\"}]}, "
        "\"minItems\": 2, \"maxItems\": 5}",
        /* strings with escapes (whatever the model writes, within 1..16 characters) */
        "{\"type\": \"object\", \"properties\": {\"text\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": "
        "16}, \"more\": {\"type\": \"array\", \"items\": {\"type\": \"string\", \"maxLength\": 4}, \"maxItems\": 2}}, "
        "\"required\": [\"text\", \"more\"]}",
        /* recursion through $defs */
        "{\"$defs\": {\"t\": {\"type\": \"object\", \"properties\": {\"v\": {\"type\": \"integer\"}, \"kids\": "
        "{\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/t\"}, \"maxItems\": 2}}, \"required\": [\"v\"]}}, "
        "\"$ref\": \"#/$defs/t\"}",
    };
    static sample out[N_SAMPLES];
    for (size_t k = 0; k < sizeof schemas / sizeof schemas[0]; k++) {
        json_t *schema = json_loads(schemas[k], 0, NULL);
        strbuf b = {0};
        CHECK_OK(jschema_to_gbnf(schema, "$", &b));
        sample_many(b.ptr, NULL, 0, out);
        int good = 0, escapes = 0;
        for (int i = 0; i < N_SAMPLES; i++) {
            json_error_t je;
            json_t *v = out[i].text ? json_loadb(out[i].text, out[i].len, JSON_ALLOW_NUL, &je) : NULL;
            const bool ok = out[i].finish == VT_FINISH_STOP && v && validate(v, schema, schema);
            CHECK_MSG(ok, "schema %zu sample %d (finish %d): %s%s%s", k, i, out[i].finish,
                      out[i].text ? out[i].text : "(none)", v ? "" : ": ", v ? "" : je.text);
            good += ok;
            escapes += out[i].text && strchr(out[i].text, '\\') != NULL;
            json_decref(v);
        }
        printf("schema %zu: %d of %d valid (%d with escapes); e.g. %s\n", k, good, N_SAMPLES, escapes,
               out[0].text ? out[0].text : "");
        samples_free(out);
        sb_free(&b);
        json_decref(schema);
    }
}

static char *read_llama_grammar(const char *name) {
    const char *srcdir = getenv("VT_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/.cache/llama/src/grammars/%s", srcdir ? srcdir : ".", name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        const char *ci = getenv("CI");
        CHECK_MSG(!(ci && !strcmp(ci, "true")), "%s missing under CI=true", path);
        fprintf(stderr, "skip: %s missing\n", path);
        return NULL;
    }
    char *buf = calloc(1, 1 << 16);
    fread(buf, 1, (1 << 16) - 1, f);
    fclose(f);
    return buf;
}

/* The token whose text is exactly `text`, or -1. */
static int32_t one_token(const char *text) {
    const size_t n = strlen(text);
    for (int32_t t = 0; t < vt_model_n_vocab(g_model); t++) {
        char buf[64];
        const int64_t k = vt_token_piece(g_model, t, buf, sizeof buf);
        if (k == (int64_t)n && !memcmp(buf, text, n)) return t;
    }
    return -1;
}

static void test_llama_grammars(void) {
    static const char *const files[] = {"json.gbnf", "arithmetic.gbnf", "list.gbnf"};
    /* A random model hardly ever picks the end, a '"' or a newline among all
     * the tokens a grammar allows: biases on them let outputs end. Which tokens
     * may come is still the grammar's alone. */
    static const char *const favour[3][3] = {{"\"", "}", "]"}, {"=", "\n", NULL}, {"\n", NULL, NULL}};
    static sample out[N_SAMPLES];
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        char *t = read_llama_grammar(files[k]);
        if (!t) continue;
        grammar *g = NULL;
        CHECK_OK(grammar_parse(t, strlen(t), NULL, &g));
        vt_logit_bias bias[4] = {{vt_model_eos(g_model), 12.0f}};
        int32_t n_bias = 1;
        for (int i = 0; i < 3 && favour[k][i]; i++) {
            const int32_t id = one_token(favour[k][i]);
            CHECK_MSG(id >= 0, "no single token for %s", favour[k][i]);
            if (id >= 0) bias[n_bias++] = (vt_logit_bias){id, 5.0f};
        }
        sample_many(t, bias, n_bias, out);
        int good = 0;
        for (int i = 0; i < N_SAMPLES; i++) {
            bool ok = out[i].finish == VT_FINISH_STOP && out[i].text && grammar_accepts(g, out[i].text, out[i].len);
            if (ok && k == 0) ok = jcheck_document(out[i].text);
            CHECK_MSG(ok, "%s sample %d (finish %d): %s", files[k], i, out[i].finish, out[i].text ? out[i].text : "");
            good += ok;
        }
        printf("%s: %d of %d accepted; e.g. %s\n", files[k], good, N_SAMPLES, out[0].text ? out[0].text : "");
        samples_free(out);
        grammar_free(g);
        free(t);
    }
}

/* tool_choice "required": the format's prefill, then the grammar of the tools'
 * parameters; the tool-call parser reads each output back as one call whose
 * arguments validate against its tool's schema. The XML-style formats write
 * string parameters raw (city, unit) and the others as JSON (days, opts). */
static const char *const tools_text =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 10}, \"unit\": {\"enum\": [\"celsius\", "
    "\"fahrenheit\"]}, \"days\": {\"type\": \"integer\"}, \"opts\": {\"type\": \"object\", \"properties\": "
    "{\"hourly\": {\"type\": \"boolean\"}, \"note\": {\"type\": \"string\", \"maxLength\": 6}}, \"required\": "
    "[\"hourly\"]}}, \"required\": [\"city\"]}}}, {\"type\": \"function\", \"function\": {\"name\": \"get_time\"}}]";

static int tool_calls_sampled(tc_format f, bool args_style, json_t *tools) {
    strbuf g = {0}, pre = {0};
    CHECK_OK(jschema_tool_call_gbnf(f, args_style, tools, NULL, NULL, &g));
    tc_prefill(f, args_style, NULL, &pre);
    static sample out[N_SAMPLES];
    vt_logit_bias bias[2] = {{vt_model_eos(g_model), 12.0f}, {one_token("\""), 5.0f}};
    sample_many(g.ptr, bias, bias[1].token >= 0 ? 2 : 1, out);
    int good = 0, with_args = 0;
    strbuf example = {0};
    for (int i = 0; i < N_SAMPLES; i++) {
        strbuf all = {0};
        sb_add(&all, pre.ptr);
        if (out[i].text) sb_add(&all, out[i].text);
        tc_options o = {.format = f, .string_arg = jschema_string_arg, .string_arg_ud = tools};
        tc_result r;
        tc_parse(&o, all.ptr, all.len, true, &r);
        bool ok = out[i].finish == VT_FINISH_STOP && r.n_calls == 1 && r.calls[0].done;
        size_t members = 0;
        if (ok) {
            json_t *args = json_loadb(r.calls[0].args.ptr, r.calls[0].args.len, JSON_ALLOW_NUL, NULL);
            json_t *schema = NULL;
            size_t k;
            json_t *t;
            json_array_foreach(tools, k, t) {
                json_t *fn = json_object_get(t, "function");
                if (!strcmp(json_string_value(json_object_get(fn, "name")), r.calls[0].name.ptr ? r.calls[0].name.ptr : "")) {
                    schema = json_object_get(fn, "parameters");
                    if (!schema) schema = json_loads("{\"type\": \"object\", \"additionalProperties\": false}", 0, NULL);
                    else json_incref(schema);
                }
            }
            ok = args && schema && json_is_object(args) && validate(args, schema, schema) &&
                 (json_object_get(schema, "properties") || json_object_size(args) == 0);
            members = json_object_size(args);
            json_decref(schema);
            json_decref(args);
        }
        CHECK_MSG(ok, "%s%s tool call %d (finish %d): %s", tc_format_name(f), args_style ? " (name[ARGS])" : "", i,
                  out[i].finish, all.ptr);
        good += ok;
        if (ok && members > 0) {
            with_args++;
            if (!example.len) sb_add(&example, all.ptr);
        }
        tc_result_free(&r);
        sb_free(&all);
    }
    /* about half the calls pick get_weather, and so write its required city */
    CHECK_MSG(with_args >= N_SAMPLES / 4, "%s: %d of %d calls with arguments", tc_format_name(f), with_args, N_SAMPLES);
    printf("%s%s tool calls: %d of %d parse and validate, %d with arguments; e.g. %s\n", tc_format_name(f),
           args_style ? " (name[ARGS])" : "", good, N_SAMPLES, with_args, example.ptr ? example.ptr : "");
    sb_free(&example);
    samples_free(out);
    sb_free(&g);
    sb_free(&pre);
    return good;
}

/* The grammar of format f for tool `name` (NULL: any) accepts / refuses the text
 * that follows the prefill. */
static bool tool_accepts(tc_format f, json_t *tools, const char *name, const char *text) {
    strbuf g = {0};
    grammar *gr = NULL;
    bool ok = jschema_tool_call_gbnf(f, false, tools, name, NULL, &g) == VT_OK &&
              grammar_parse(g.ptr, g.len, NULL, &gr) == VT_OK;
    CHECK_MSG(ok, "%s: %s", tc_format_name(f), vt_last_error());
    ok = ok && grammar_accepts(gr, text, strlen(text));
    grammar_free(gr);
    sb_free(&g);
    return ok;
}

static void test_tool_call_grammars(void) {
    json_t *tools = json_loads(tools_text, 0, NULL);
    json_t *free_text = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"note\", \"parameters\": "
                                   "{\"type\": \"object\", \"properties\": {\"text\": {\"type\": \"string\"}, \"n\": "
                                   "{\"type\": \"integer\"}}, \"required\": [\"text\"]}}}]", 0, NULL);
    /* qwen3_coder: raw strings, JSON otherwise, the schema's order, optional ones left out */
    CHECK(tool_accepts(TC_QWEN3_CODER, tools, NULL, "get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                                                    "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"));
    CHECK(tool_accepts(TC_QWEN3_CODER, tools, NULL, "get_time>\n</function>\n</tool_call>"));
    CHECK(tool_accepts(TC_QWEN3_CODER, tools, "get_weather", "<parameter=city>\n\"Pa\"\n</parameter>\n<parameter=unit>"
                                                             "\ncelsius\n</parameter>\n<parameter=opts>\n{\"hourly\": "
                                                             "true}\n</parameter>\n</function>\n</tool_call>"));
    CHECK(!tool_accepts(TC_QWEN3_CODER, tools, "get_weather", "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"));
    CHECK(!tool_accepts(TC_QWEN3_CODER, tools, "get_weather", "<parameter=city>\nP<b\n</parameter>\n</function>\n</tool_call>"));
    CHECK(!tool_accepts(TC_QWEN3_CODER, tools, "get_weather", "<parameter=city>\nP\n</parameter>\n<parameter=unit>\n"
                                                              "kelvin\n</parameter>\n</function>\n</tool_call>"));
    /* an unbounded string: any text but the markers; JSON strings have no raw '<' */
    CHECK(tool_accepts(TC_QWEN3_CODER, free_text, "note", "<parameter=text>\na < b </p <param x</function\n\n"
                                                         "</parameter>\n</function>\n</tool_call>"));
    CHECK(!tool_accepts(TC_QWEN3_CODER, free_text, "note", "<parameter=text>\na</function>b\n</parameter>\n</function>\n</tool_call>"));
    CHECK(!tool_accepts(TC_QWEN3_CODER, free_text, "note", "<parameter=text>\n<parameter=n>\n</parameter>\n</function>\n</tool_call>"));
    CHECK(!tool_accepts(TC_QWEN3_CODER, tools, "get_weather", "<parameter=city>\nP\n</parameter>\n<parameter=opts>\n"
                                                              "{\"hourly\": true, \"note\": \"<\"}\n</parameter>\n</function>\n</tool_call>"));
    CHECK(tool_accepts(TC_QWEN3_CODER, tools, "get_weather", "<parameter=city>\nP\n</parameter>\n<parameter=opts>\n"
                                                             "{\"hourly\": true, \"note\": \"\\u003c\"}\n</parameter>\n</function>\n</tool_call>"));
    /* glm: no newline at a raw value's edges (its parser strips one there) */
    CHECK(tool_accepts(TC_GLM, tools, NULL, "get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
                                            "<arg_key>days</arg_key>\n<arg_value>-2</arg_value>\n</tool_call>"));
    CHECK(tool_accepts(TC_GLM, tools, NULL, "get_time\n</tool_call>"));
    CHECK(tool_accepts(TC_GLM, free_text, "note", "<arg_key>text</arg_key>\n<arg_value>a\n</arg_val <b</arg_value>\n</tool_call>"));
    CHECK(!tool_accepts(TC_GLM, free_text, "note", "<arg_key>text</arg_key>\n<arg_value>\na</arg_value>\n</tool_call>"));
    CHECK(!tool_accepts(TC_GLM, free_text, "note", "<arg_key>text</arg_key>\n<arg_value>a\n</arg_value>\n</tool_call>"));
    /* harmony: the recipient's name, <|constrain|>json<|message|>, the JSON, <|call|> or not */
    CHECK(tool_accepts(TC_HARMONY, tools, NULL, "get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>"));
    CHECK(tool_accepts(TC_HARMONY, tools, NULL, "get_time <|constrain|>json<|message|>{}"));
    CHECK(tool_accepts(TC_HARMONY, tools, "get_weather", "{\"city\": \"P\", \"days\": 2}"));
    CHECK(!tool_accepts(TC_HARMONY, tools, "get_weather", "{\"city\": \"<|call|>\"}"));
    /* a raw string that reads as JSON stays a string when the parser knows the schema */
    tc_options o = {.format = TC_QWEN3_CODER, .string_arg = jschema_string_arg, .string_arg_ud = tools};
    const char *txt = "<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n<parameter=days>\n42\n"
                      "</parameter>\n</function>\n</tool_call>";
    tc_result r;
    tc_parse(&o, txt, strlen(txt), true, &r);
    CHECK(r.n_calls == 1 && r.calls[0].args.ptr && !strcmp(r.calls[0].args.ptr, "{\"city\": \"42\", \"days\": 42}"));
    tc_result_free(&r);
    o.format = TC_GLM;
    txt = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>true</arg_value>\n</tool_call>";
    tc_parse(&o, txt, strlen(txt), true, &r);
    CHECK(r.n_calls == 1 && r.calls[0].args.ptr && !strcmp(r.calls[0].args.ptr, "{\"city\": \"true\"}"));
    tc_result_free(&r);
    /* names the XML formats cannot hold */
    json_t *bad = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": "
                             "\"object\", \"properties\": {\"a>b\": {\"type\": \"string\"}}}}}]", 0, NULL);
    strbuf x = {0};
    CHECK(jschema_tool_call_gbnf(TC_QWEN3_CODER, false, bad, NULL, NULL, &x) == VT_E_INVALID && strstr(vt_last_error(), "a>b"));
    sb_free(&x);
    json_decref(bad);
    json_decref(free_text);
    json_decref(tools);
}

static void test_tool_call_sampling(void) {
    json_t *tools = json_loads(tools_text, 0, NULL);
    static const struct {
        tc_format f;
        bool args_style;
    } formats[] = {{TC_HERMES, false}, {TC_QWEN3_CODER, false}, {TC_GLM, false}, {TC_HARMONY, false},
                   {TC_LLAMA3, false}, {TC_MISTRAL, false}, {TC_MISTRAL, true}, {TC_DEEPSEEK, false}};
    for (size_t k = 0; k < sizeof formats / sizeof formats[0]; k++)
        tool_calls_sampled(formats[k].f, formats[k].args_style, tools);
    json_decref(tools);
    /* a keyword vt cannot enforce is left out of a tool's grammar, not refused */
    json_t *lenient = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
                                 "{\"type\": \"object\", \"properties\": {\"d\": {\"type\": \"string\", "
                                 "\"format\": \"date\"}}, \"required\": [\"d\"]}}}]", 0, NULL);
    strbuf lg = {0};
    CHECK_OK(jschema_tool_call_gbnf(TC_HERMES, false, lenient, "f", NULL, &lg));
    grammar *lgr = NULL;
    CHECK_OK(grammar_parse(lg.ptr, lg.len, NULL, &lgr));
    CHECK(acc(lgr, "{\"d\": \"x\"}}") && acc(lgr, "{\"d\": \"x\"}}\n</tool_call>") && !acc(lgr, "{\"d\": 1}}"));
    grammar_free(lgr);
    sb_free(&lg);
    /* a format without a grammar says so */
    strbuf x = {0};
    CHECK(jschema_tool_call_gbnf(TC_NONE, false, lenient, NULL, NULL, &x) == VT_E_UNSUPPORTED);
    sb_free(&x);
    json_decref(lenient);
}

/* Token references through the engine: <s> (stories260K's BOS, a control
 * token with no text) by its text, resolved with the model's tokenizer, comes
 * exactly where the grammar puts it; a text that is no single token is refused. */
static void test_token_refs(void) {
    static sample out[N_SAMPLES];
    sample_many("root ::= [a-z]{1,3} <s> \"!\"", NULL, 0, out);
    int good = 0;
    for (int i = 0; i < N_SAMPLES; i++) {
        const char *t = out[i].text ? out[i].text : "";
        size_t k = strspn(t, "abcdefghijklmnopqrstuvwxyz");
        const bool ok = out[i].finish == VT_FINISH_STOP && k >= 1 && k <= 3 && !strcmp(t + k, "!");
        CHECK_MSG(ok, "token reference sample %d (finish %d): %s", i, out[i].finish, t);
        good += ok;
    }
    printf("<s> token reference: %d of %d; e.g. %s\n", good, N_SAMPLES, out[0].text ? out[0].text : "");
    samples_free(out);
    vt_engine_params ep = vt_engine_default_params();
    ep.n_threads = 1;
    ep.n_ctx = 256;
    vt_engine *e = NULL;
    CHECK_OK(vt_engine_create(g_model, &ep, &e));
    if (!e) return;
    const char *bad = "root ::= \"a\" <nope>";
    vt_request_params q = {.prompt = g_prompt, .n_prompt = g_n_prompt, .max_tokens = 4, .grammar = bad,
                           .grammar_len = strlen(bad)};
    q.sampling = vt_sampling_default();
    uint64_t id;
    CHECK(vt_engine_add(e, &q, &id) == VT_E_INVALID && strstr(vt_last_error(), "<nope> is not one token"));
    vt_engine_free(e);
}

/* ---- markers that are control tokens ------------------------------------------------ */

/* No vocabulary of ../shared/models/vocab holds a tool-call marker (qwen35's,
 * like qwen2's, has <|endoftext|>, <|im_start|> and <|im_end|> as its control
 * tokens and [PAD...] padding after them), while real ones hold many as control
 * tokens, which a detokenizer drops. So vt synth renames the qwen35
 * vocabulary's last eight padding tokens to glm's markers and <think>,
 * </think>, as control tokens (synth_params.control_tokens). */
static const char glm_control[] = "<tool_call>,</tool_call>,<arg_key>,</arg_key>,<arg_value>,</arg_value>,<think>,</think>";

/* The server's test (server.c marker_token): one special token, not an
 * end-of-generation one. */
static int32_t marker_token(void *ud, const char *text) {
    const tokenizer *t = ud;
    const int32_t id = tok_special_id(t, text);
    return id >= 0 && !tok_is_eog(t, id) ? id : -1;
}

static bool has_token(const sample *s, int32_t id) {
    for (int32_t i = 0; i < s->n_tokens; i++)
        if (s->tokens[i] == id) return true;
    return false;
}

/* The call's arguments validate against its tool's parameters. */
static bool call_valid(json_t *tools, const tc_call *c) {
    json_t *args = json_loadb(c->args.ptr ? c->args.ptr : "", c->args.len, 0, NULL);
    bool ok = false;
    size_t k;
    json_t *t;
    json_array_foreach(tools, k, t) {
        json_t *fn = json_object_get(t, "function");
        if (strcmp(json_string_value(json_object_get(fn, "name")), c->name.ptr ? c->name.ptr : "")) continue;
        json_t *schema = json_object_get(fn, "parameters");
        ok = json_is_object(args) && (schema ? validate(args, schema, schema) : json_object_size(args) == 0);
    }
    json_decref(args);
    return ok;
}

/* The format's markers that are control tokens are found (tc_tokens_collect as
 * the server calls it); a control marker reaches the output text only where the
 * request preserves it; and a forced glm call's grammar writes the markers as
 * their tokens, so every call is made of the model's marker tokens, rendered
 * for the parser, which reads the call back whole (8 calls at temperature 1). */
static void test_preserved_markers(const char *vocab) {
    synth_params sp = synth_default_params();
    sp.n_layer = 1;
    sp.n_embd = 32;
    sp.n_head = 2;
    sp.n_head_kv = 1;
    sp.n_ff = 64;
    sp.n_ctx = 2048;
    sp.vocab_path = vocab;
    sp.control_tokens = glm_control;
    sp.type = VT_DTYPE_F16;
    sp.n_threads = 2;
    vt_model *m = test_synth_load(&sp, NULL);
    if (!m) return;
    const tokenizer *tok = m->tok;
    const int32_t n_vocab = vt_model_n_vocab(m);
    tc_tokens tk, th, tx;
    tc_tokens_collect(TC_GLM, marker_token, (void *)tok, &tk);
    tc_tokens_collect(TC_HERMES, marker_token, (void *)tok, &th);
    tc_tokens_collect(TC_HARMONY, marker_token, (void *)tok, &tx);
    CHECK_EQ_INT(tk.n, 8);
    CHECK_EQ_INT(th.n, 4); /* <tool_call> </tool_call> <think> </think> */
    CHECK_EQ_INT(tx.n, 2); /* the reasoning markers only */
    for (int32_t i = 0; i < tk.n; i++)
        CHECK_MSG(tok_is_control(tok, tk.id[i]) && tk.id[i] >= n_vocab - 8 && !strcmp(tok_text(tok, tk.id[i]), tk.text[i]),
                  "%s: id %d", tk.text[i], tk.id[i]);
    /* the vocabulary's own control tokens that are no marker stay out */
    CHECK(tc_tokens_find(&tk, "<|im_end|>", 10) < 0);
    const int32_t open = tc_tokens_find(&tk, "<tool_call>", 11), close = tc_tokens_find(&tk, "</tool_call>", 12);
    const int32_t key = tc_tokens_find(&tk, "<arg_key>", 9), key_end = tc_tokens_find(&tk, "</arg_key>", 10);

    vt_model *saved_model = g_model;
    int32_t *saved_prompt = g_prompt;
    const int64_t saved_n = g_n_prompt;
    g_model = m;
    g_prompt = NULL;
    const char *pre = "<|im_start|>user\nThe weather in Paris?<|im_end|>\n<|im_start|>assistant\n<tool_call>";
    CHECK_OK(vt_tokenize(m, pre, strlen(pre), true, true, &g_prompt, &g_n_prompt));
    CHECK(g_n_prompt > 0 && g_prompt[g_n_prompt - 1] == open);

    /* detokenizing: <arg_key> "ab" </arg_key> by token references */
    static sample out[N_SAMPLES];
    char gbnf[96];
    snprintf(gbnf, sizeof gbnf, "root ::= <[%d]> \"ab\" <[%d]>", key, key_end);
    const int32_t only_key[1] = {key};
    const struct {
        const int32_t *ids;
        int32_t n;
        const char *want;
    } cases[] = {{NULL, 0, "ab"}, {only_key, 1, "<arg_key>ab"}, {tk.id, tk.n, "<arg_key>ab</arg_key>"}};
    g_n_samples = 1;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        g_preserve = cases[k].ids;
        g_n_preserve = cases[k].n;
        sample_many(gbnf, NULL, 0, out);
        const sample *o = &out[0];
        CHECK_MSG(o->finish == VT_FINISH_STOP && o->n_tokens >= 3 && o->tokens[0] == key &&
                      o->tokens[o->n_tokens - 1] == key_end && !strcmp(o->text ? o->text : "", cases[k].want),
                  "preserving %d tokens: finish %d, %d tokens, text '%s', want '%s'", cases[k].n, o->finish,
                  o->n_tokens, o->text ? o->text : "", cases[k].want);
        samples_free(out);
    }

    /* a preserved id outside the vocabulary is refused */
    vt_engine_params ep = vt_engine_default_params();
    ep.n_threads = 1;
    ep.n_ctx = 256;
    vt_engine *e = NULL;
    CHECK_OK(vt_engine_create(m, &ep, &e));
    if (e) {
        const int32_t bad_id = n_vocab;
        vt_request_params q = {.prompt = g_prompt, .n_prompt = g_n_prompt, .max_tokens = 1, .preserve = &bad_id,
                               .n_preserve = 1};
        q.sampling = vt_sampling_default();
        uint64_t id;
        CHECK(vt_engine_add(e, &q, &id) == VT_E_INVALID && strstr(vt_last_error(), "preserved token 0"));
        vt_engine_free(e);
    }

    /* a forced glm call: the grammar names the marker tokens, not their text */
    json_t *tools = json_loads(tools_text, 0, NULL);
    strbuf gb = {0};
    CHECK_OK(jschema_tool_call_gbnf(TC_GLM, false, tools, NULL, &tk, &gb));
    char ref[24];
    snprintf(ref, sizeof ref, "<[%d]>", close);
    CHECK_MSG(gb.ptr && strstr(gb.ptr, ref) && !strstr(gb.ptr, "\"</tool_call>\"") && !strstr(gb.ptr, "\"<arg_key>\""),
              "%s", gb.ptr ? gb.ptr : "");
    enum { N_CALLS = 8 };
    g_n_samples = N_CALLS;
    g_preserve = tk.id;
    g_n_preserve = tk.n;
    sample_many(gb.ptr ? gb.ptr : "root ::= \"\"", NULL, 0, out);
    int good = 0, with_args = 0;
    for (int i = 0; i < N_CALLS; i++) {
        strbuf all = {0};
        sb_add(&all, "<tool_call>");
        if (out[i].text) sb_add(&all, out[i].text);
        tc_options o = {.format = TC_GLM, .string_arg = jschema_string_arg, .string_arg_ud = tools};
        tc_result r;
        tc_parse(&o, all.ptr, all.len, true, &r);
        const bool args = r.n_calls == 1 && r.calls[0].args.len > 2;
        const bool ok = out[i].finish == VT_FINISH_STOP && r.n_calls == 1 && r.calls[0].done && !r.content.len &&
                        call_valid(tools, &r.calls[0]) && all.len >= 12 &&
                        !memcmp(all.ptr + all.len - 12, "</tool_call>", 12) &&
                        out[i].n_tokens > 0 && out[i].tokens[out[i].n_tokens - 1] == close && (!args || has_token(&out[i], key));
        CHECK_MSG(ok, "glm call %d with control markers (finish %d, %d tokens): %s", i, out[i].finish,
                  out[i].n_tokens, all.ptr);
        good += ok;
        with_args += ok && args;
        tc_result_free(&r);
        sb_free(&all);
    }
    CHECK_MSG(with_args >= 1, "%d of %d calls with arguments", with_args, N_CALLS);
    printf("glm calls with control-token markers: %d of %d parse and validate, %d with arguments\n", good, N_CALLS,
           with_args);
    samples_free(out);
    sb_free(&gb);
    json_decref(tools);
    g_n_samples = N_SAMPLES;
    g_preserve = NULL;
    g_n_preserve = 0;
    free(g_prompt);
    g_model = saved_model;
    g_prompt = saved_prompt;
    g_n_prompt = saved_n;
    vt_model_free(m);
}

int main(void) {
    test_conversion();
    test_tool_call_grammars();
    const char *vocab = test_model_path("stories260K.gguf");
    if (vocab) {
        synth_params sp = synth_default_params();
        sp.n_layer = 1;
        sp.n_embd = 64;
        sp.n_head = 2;
        sp.n_head_kv = 1;
        sp.n_ff = 128;
        sp.n_ctx = 2048;
        sp.vocab_path = vocab;
        sp.type = VT_DTYPE_F16;
        sp.n_threads = 2;
        g_model = test_synth_load(&sp, NULL);
        if (g_model) {
            CHECK_OK(vt_tokenize(g_model, "Answer in JSON:", 15, true, false, &g_prompt, &g_n_prompt));
            test_schema_sampling();
            test_llama_grammars();
            test_tool_call_sampling();
            test_token_refs();
            free(g_prompt);
            vt_model_free(g_model);
        }
    }
    const char *qwen35 = test_model_path("vocab/ggml-vocab-qwen35.gguf");
    if (qwen35) test_preserved_markers(qwen35);
    return test_finish();
}
