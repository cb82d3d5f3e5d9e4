/* OpenAI request parsing: fields, defaults, and every rejection names its field. */
#include "server/openai.h"
#include "test.h"

#include <string.h>

static vt_status parse(oai_kind kind, const char *body, oai_request *r) {
    return oai_parse_request(kind, body, strlen(body), r);
}

/* Parse must fail with `want` and a message containing `needle`. */
static void check_bad(oai_kind kind, const char *body, vt_status want, const char *needle) {
    oai_request r;
    vt_status st = parse(kind, body, &r);
    CHECK_MSG(st == want && strstr(vt_last_error(), needle), "body %s: status %s, message '%s' (want '%s')", body,
              vt_status_str(st), vt_last_error(), needle);
    CHECK(r.root == NULL && r.messages == NULL && r.prompts == NULL);
}

int main(void) {
    oai_request r;

    /* completions: defaults */
    CHECK_OK(parse(OAI_COMPLETION, "{\"prompt\": \"Once upon\"}", &r));
    CHECK(r.n_prompts == 1 && r.prompts[0].text && !strcmp(r.prompts[0].text, "Once upon") &&
          r.prompts[0].text_len == 9);
    CHECK(r.n == 1 && !r.stream && r.max_tokens == -1 && r.n_stop == 0 && r.n_logprobs == -1);
    CHECK(r.sampling.n_logprobs == -1); /* not asked: the engine computes no logprob */
    CHECK(fabsf(r.sampling.temperature - 0.8f) < 1e-6f && r.sampling.top_k == 40);
    CHECK(!r.seed_given);
    oai_request_free(&r);

    /* completions: every field */
    CHECK_OK(parse(OAI_COMPLETION,
                   "{\"model\": \"m\", \"prompt\": [1, 2, 3], \"max_tokens\": 7, \"temperature\": 0, "
                   "\"top_p\": 0.5, \"top_k\": 3, \"min_p\": 0.1, \"presence_penalty\": 0.5, "
                   "\"frequency_penalty\": -0.5, \"repeat_penalty\": 1.1, \"stop\": [\"a\", \"bb\"], "
                   "\"seed\": 42, \"stream\": true, \"stream_options\": {\"include_usage\": true}, "
                   "\"logprobs\": 2, \"n\": 3, \"ignore_eos\": true, \"user\": \"x\"}",
                   &r));
    CHECK(r.model && !strcmp(r.model, "m"));
    CHECK(r.n_prompts == 1 && r.prompts[0].n_tokens == 3 && r.prompts[0].tokens[0] == 1 && r.prompts[0].tokens[2] == 3);
    CHECK(r.max_tokens == 7 && r.sampling.temperature == 0 && fabsf(r.sampling.top_p - 0.5f) < 1e-6f);
    CHECK(r.sampling.top_k == 3 && fabsf(r.sampling.min_p - 0.1f) < 1e-6f);
    CHECK(fabsf(r.sampling.presence_penalty - 0.5f) < 1e-6f && fabsf(r.sampling.frequency_penalty + 0.5f) < 1e-6f);
    CHECK(fabsf(r.sampling.repeat_penalty - 1.1f) < 1e-6f);
    CHECK(r.n_stop == 2 && !strcmp(r.stop[0], "a") && !strcmp(r.stop[1], "bb"));
    CHECK(r.seed_given && r.sampling.seed == 42 && r.stream && r.include_usage);
    CHECK(r.n_logprobs == 2 && r.sampling.n_logprobs == 2 && r.n == 3 && r.ignore_eos);
    oai_request_free(&r);

    /* max_completion_tokens wins over max_tokens; a single stop string; nulls are "unset" */
    CHECK_OK(parse(OAI_COMPLETION,
                   "{\"prompt\": [\"x\"], \"max_tokens\": 5, \"max_completion_tokens\": 9, \"stop\": \"\\n\", "
                   "\"temperature\": null, \"seed\": null}",
                   &r));
    CHECK(r.n_prompts == 1 && r.prompts[0].text && !strcmp(r.prompts[0].text, "x"));
    CHECK(r.max_tokens == 9 && r.n_stop == 1 && !strcmp(r.stop[0], "\n") && !r.seed_given);
    oai_request_free(&r);

    /* a batch of prompts (OpenAI): strings, or token-id arrays, never mixed */
    CHECK_OK(parse(OAI_COMPLETION, "{\"prompt\": [\"Once\", \"One day\"], \"n\": 2}", &r));
    CHECK(r.n_prompts == 2 && !strcmp(r.prompts[1].text, "One day") && r.prompts[1].text_len == 7 && r.n == 2);
    oai_request_free(&r);
    CHECK_OK(parse(OAI_COMPLETION, "{\"prompt\": [[1, 2], [3]]}", &r));
    CHECK(r.n_prompts == 2 && r.prompts[0].n_tokens == 2 && r.prompts[1].n_tokens == 1 && r.prompts[1].tokens[0] == 3);
    oai_request_free(&r);
    check_bad(OAI_COMPLETION, "{\"prompt\": [\"a\", [1]]}", VT_E_INVALID, "field 'prompt[1]': a batch holds");
    check_bad(OAI_COMPLETION, "{\"prompt\": [[1], []]}", VT_E_INVALID, "field 'prompt[1]': empty array");
    check_bad(OAI_COMPLETION, "{\"prompt\": [[1], [-1]]}", VT_E_INVALID, "field 'prompt[1][0]'");
    check_bad(OAI_COMPLETION, "{\"prompt\": [\"a\", \"b\", \"c\", \"d\", \"e\"], \"n\": 16}", VT_E_INVALID,
              "5 prompts x n 16 is more than 64 choices");

    /* chat: content parts joined, developer -> system, logprobs + top_logprobs */
    CHECK_OK(parse(OAI_CHAT,
                   "{\"messages\": [{\"role\": \"developer\", \"content\": \"be brief\"}, "
                   "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Hel\"}, "
                   "{\"type\": \"text\", \"text\": \"lo\"}]}, {\"role\": \"assistant\", \"content\": null}], "
                   "\"logprobs\": true, \"top_logprobs\": 3}",
                   &r));
    CHECK(r.n_messages == 3);
    CHECK(r.messages[0].role_len == 6 && !memcmp(r.messages[0].role, "system", 6));
    CHECK(r.messages[1].content_len == 5 && !memcmp(r.messages[1].content, "Hello", 5));
    CHECK(r.messages[2].content_len == 0);
    CHECK(r.n_logprobs == 3 && r.sampling.n_logprobs == 3);
    oai_request_free(&r);
    CHECK_OK(parse(OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": true}", &r));
    CHECK(r.n_logprobs == 0 && r.sampling.n_logprobs == 0);
    oai_request_free(&r);

    /* rejections */
    check_bad(OAI_COMPLETION, "{\"prompt\": \"x\"", VT_E_FORMAT, "not valid JSON");
    check_bad(OAI_COMPLETION, "[1, 2]", VT_E_INVALID, "expected a JSON object");
    check_bad(OAI_COMPLETION, "{}", VT_E_INVALID, "field 'prompt': required");
    check_bad(OAI_COMPLETION, "{\"prompt\": 5}", VT_E_INVALID, "field 'prompt'");
    check_bad(OAI_COMPLETION, "{\"prompt\": [1, \"a\"]}", VT_E_INVALID, "field 'prompt[1]'");
    check_bad(OAI_COMPLETION, "{\"prompt\": [-1]}", VT_E_INVALID, "field 'prompt[0]'");
    check_bad(OAI_COMPLETION, "{\"prompt\": []}", VT_E_INVALID, "field 'prompt': empty");
    check_bad(OAI_COMPLETION, "{\"prompt\": \"x\", \"temperature\": \"hot\"}", VT_E_INVALID,
              "field 'temperature': expected a number, got a string");
    check_bad(OAI_COMPLETION, "{\"prompt\": \"x\", \"temperature\": 3}", VT_E_INVALID,
              "field 'temperature': 3 is out of range [0, 2]");
    check_bad(OAI_COMPLETION, "{\"prompt\": \"x\", \"top_p\": 0}", VT_E_INVALID, "field 'top_p'");
    check_bad(OAI_COMPLETION, "{\"prompt\": \"x\", \"top_k\": -1}", VT_E_INVALID, "field 'top_k'");
    /* n_predict and max_tokens agree (llama-server): -1 unlimited, 0 nothing, below -1 refused */
    CHECK_OK(parse(OAI_COMPLETION, "{\"prompt\": \"x\", \"max_tokens\": 0}", &r));
    CHECK(r.max_tokens == 0);
    oai_request_free(&r);
    CHECK_OK(parse(OAI_COMPLETION, "{\"prompt\": \"x\", \"n_predict\": 0}", &r));
    CHECK(r.max_tokens == 0);
    oai_request_free(&r);
    CHECK_OK(parse(OAI_COMPLETION, "{\"prompt\": \"x\", \"max_completion_tokens\": -1}", &r));
    CHECK(r.max_tokens == -1);
    oai_request_free(&r);
    check_bad(OAI_COMPLETION, "{\"prompt\": \"x\", \"max_tokens\": -2}", VT_E_INVALID, "field 'max_tokens'");
    check_bad(OAI_COMPLETION, "{\"prompt\": \"x\", \"n_predict\": -2}", VT_E_INVALID, "field 'n_predict'");
    check_bad(OAI_COMPLETION, "{\"prompt\": \"x\", \"max_tokens\": 1.5}", VT_E_INVALID,
              "field 'max_tokens': expected an integer");
    check_bad(OAI_COMPLETION, "{\"prompt\": \"x\", \"n\": 17}", VT_E_INVALID, "field 'n'");
    check_bad(OAI_COMPLETION, "{\"prompt\": \"x\", \"stop\": 3}", VT_E_INVALID, "field 'stop'");
    check_bad(OAI_COMPLETION, "{\"prompt\": \"x\", \"stop\": [\"a\", 1]}", VT_E_INVALID, "field 'stop[1]'");
    check_bad(OAI_COMPLETION,
              "{\"prompt\": \"x\", \"stop\": [\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\","
              "\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\"]}",
              VT_E_INVALID, "more than 16");
    check_bad(OAI_COMPLETION, "{\"prompt\": \"x\", \"stream\": 1}", VT_E_INVALID, "field 'stream'");
    check_bad(OAI_COMPLETION, "{\"prompt\": \"x\", \"stream_options\": {\"include_usage\": \"y\"}}", VT_E_INVALID,
              "field 'stream_options.include_usage'");
    check_bad(OAI_COMPLETION, "{\"prompt\": \"x\", \"logprobs\": 21}", VT_E_INVALID, "field 'logprobs'");
    check_bad(OAI_COMPLETION, "{\"prompt\": \"x\", \"model\": 1}", VT_E_INVALID, "field 'model'");
    check_bad(OAI_COMPLETION, "{\"prompt\": \"x\", \"prompt\": \"y\"}", VT_E_FORMAT, "duplicate");
    check_bad(OAI_CHAT, "{}", VT_E_INVALID, "field 'messages': required");
    check_bad(OAI_CHAT, "{\"messages\": []}", VT_E_INVALID, "field 'messages': empty");
    check_bad(OAI_CHAT, "{\"messages\": [1]}", VT_E_INVALID, "field 'messages[0]'");
    check_bad(OAI_CHAT, "{\"messages\": [{\"content\": \"x\"}]}", VT_E_INVALID, "field 'messages[0].role'");
    check_bad(OAI_CHAT, "{\"messages\": [{\"role\": \"wizard\", \"content\": \"x\"}]}", VT_E_INVALID,
              "'wizard' is not one of");
    check_bad(OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}", VT_E_INVALID,
              "field 'messages[0].content'");
    check_bad(OAI_CHAT,
              "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", \"image_url\": {}}]}]}",
              VT_E_INVALID, "field 'messages[0].content[0]'");
    check_bad(OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"top_logprobs\": 2}",
              VT_E_INVALID, "needs \"logprobs\": true");
    check_bad(OAI_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": 2}", VT_E_INVALID,
              "field 'logprobs': expected a boolean");

    /* error bodies */
    json_t *e = oai_error_json(400, NULL, NULL, "bad \xff");
    json_t *err = json_object_get(e, "error");
    CHECK(json_integer_value(json_object_get(err, "code")) == 400);
    CHECK(!strcmp(json_string_value(json_object_get(err, "type")), "invalid_request_error"));
    CHECK(!strcmp(json_string_value(json_object_get(err, "message")), "bad \xef\xbf\xbd"));
    json_decref(e);
    return test_finish();
}
