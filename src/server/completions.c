/* POST /v1/completions and /v1/chat/completions: a parsed request becomes a job
 * (n engine requests); its outputs become one JSON response, or a stream of
 * server-sent events exactly as OpenAI clients parse them:
 *
 *   data: {chunk}\n\n ... data: [DONE]\n\n
 *
 * Chat streams open with one chunk per choice carrying delta.role, then
 * delta.content chunks, then per choice a chunk with an empty delta and its
 * finish_reason; with stream_options.include_usage a last chunk has
 * "choices": [] and the usage. Responses also carry llama-server's "timings". */
#include "server/server_impl.h"

#include "base/status.h"
#include "model/model.h"

#include <math.h>
#include <string.h>

/* A whole (not streamed) answer with logprobs is built as a JSON tree: about
 * LOGPROB_VALUE_COST bytes per token and alternative. Past ANSWER_MAX_COST the
 * request is refused up front (413); streamed, the same request costs a chunk. */
#define LOGPROB_VALUE_COST 400
#define ANSWER_MAX_COST ((size_t)64 << 20)

/* JSON has no -inf: an impossible token's logprob is reported as -9999 (as OpenAI does). */
static json_t *lp_json(float v) { return json_real(isfinite(v) ? (double)v : -9999.0); }

static const char *finish_name(vt_finish f) {
    switch (f) {
    case VT_FINISH_STOP: return "stop";
    case VT_FINISH_LENGTH: return "length";
    case VT_FINISH_ABORT: return "abort";
    case VT_FINISH_ERROR: return "error";
    default: return NULL;
    }
}

/* A token's text as a JSON string, and optionally its bytes (a piece can be part of
 * a UTF-8 character, which only the bytes show exactly): the text the content has
 * for it, so a marker the request preserves (job.preserve) is its text, chosen or
 * an alternative, and any other control token is "". (llama-server renders a
 * preserved token as text where it is chosen, but "" among the alternatives
 * unless it runs with --special, which renders every control token in both.) */
static json_t *piece_json(server *s, const job *j, int32_t tok, json_t **bytes) {
    char buf[256];
    bool special = false;
    for (int32_t i = 0; i < j->preserve.n && !special; i++) special = j->preserve.id[i] == tok;
    int64_t n = tok_piece(s->model->tok, tok, special, buf, sizeof buf);
    if (n < 0) n = 0;
    if (n > (int64_t)sizeof buf) n = sizeof buf;
    if (bytes) {
        *bytes = json_array();
        for (int64_t i = 0; i < n; i++) json_array_append_new(*bytes, json_integer((unsigned char)buf[i]));
    }
    return oai_json_string_lossy(buf, (size_t)n);
}

/* chat: {"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]} */
static json_t *chat_logprob_entry(server *s, const job *j, const job_event *e) {
    json_t *bytes;
    json_t *o = json_object();
    json_object_set_new(o, "token", piece_json(s, j, e->token, &bytes));
    json_object_set_new(o, "logprob", lp_json(e->logprob));
    json_object_set_new(o, "bytes", bytes);
    json_t *top = json_array();
    for (int32_t k = 0; k < e->n_top; k++) {
        json_t *t = json_object();
        json_object_set_new(t, "token", piece_json(s, j, e->top[k].token, &bytes));
        json_object_set_new(t, "logprob", lp_json(e->top[k].logprob));
        json_object_set_new(t, "bytes", bytes);
        json_array_append_new(top, t);
    }
    json_object_set_new(o, "top_logprobs", top);
    return o;
}

/* completions: {"tokens", "token_logprobs", "top_logprobs": [{piece: logprob}], "text_offset"} */
static json_t *completion_logprobs_new(void) {
    json_t *o = json_object();
    json_object_set_new(o, "tokens", json_array());
    json_object_set_new(o, "token_logprobs", json_array());
    json_object_set_new(o, "top_logprobs", json_array());
    json_object_set_new(o, "text_offset", json_array());
    return o;
}

static void completion_logprobs_add(server *s, const job *j, json_t *lp, const job_event *e, size_t text_offset) {
    json_array_append_new(json_object_get(lp, "tokens"), piece_json(s, j, e->token, NULL));
    json_array_append_new(json_object_get(lp, "token_logprobs"), lp_json(e->logprob));
    json_t *top = json_object();
    for (int32_t k = 0; k < e->n_top; k++) {
        json_t *key = piece_json(s, j, e->top[k].token, NULL);
        json_object_set_new(top, json_string_value(key), lp_json(e->top[k].logprob));
        json_decref(key);
    }
    json_array_append_new(json_object_get(lp, "top_logprobs"), top);
    json_array_append_new(json_object_get(lp, "text_offset"), json_integer((json_int_t)text_offset));
}

static json_t *usage_json(const job *j) {
    int64_t gen = 0;
    for (int32_t i = 0; i < j->n_choices; i++) gen += j->choices[i].n_generated;
    int64_t n_prompt = j->n_prompt;
    json_t *u = json_object();
    json_object_set_new(u, "prompt_tokens", json_integer(n_prompt));
    json_object_set_new(u, "completion_tokens", json_integer(gen));
    json_object_set_new(u, "total_tokens", json_integer(n_prompt + gen));
    json_t *d = json_object();
    json_object_set_new(d, "cached_tokens", json_integer(j->choices[0].n_cached));
    json_object_set_new(u, "prompt_tokens_details", d);
    return u;
}

/* llama-server's timings: the prompt phase of choice 0 and the generation of all. */
static json_t *timings_json(const job *j) {
    const job_choice *c0 = &j->choices[0];
    double first = 0, last = 0;
    int64_t gen = 0;
    for (int32_t i = 0; i < j->n_choices; i++) {
        const job_choice *c = &j->choices[i];
        gen += c->n_generated;
        if (c->t_first && (!first || c->t_first < first)) first = c->t_first;
        if (c->t_last > last) last = c->t_last;
    }
    int64_t prompt_n = j->prompts[0].n - c0->n_cached;
    double prompt_ms = c0->t_first ? (c0->t_first - j->t_start) * 1e3 : (server_now() - j->t_start) * 1e3;
    /* The first token comes out of the prompt pass; the rest are the generation. */
    int64_t pred_n = gen;
    double pred_ms = first ? (last - first) * 1e3 : 0;
    json_t *t = json_object();
    json_object_set_new(t, "cache_n", json_integer(c0->n_cached));
    json_object_set_new(t, "prompt_n", json_integer(prompt_n));
    json_object_set_new(t, "prompt_ms", json_real(prompt_ms));
    json_object_set_new(t, "prompt_per_token_ms", json_real(prompt_n ? prompt_ms / (double)prompt_n : 0));
    json_object_set_new(t, "prompt_per_second", json_real(prompt_ms > 0 ? (double)prompt_n * 1e3 / prompt_ms : 0));
    json_object_set_new(t, "predicted_n", json_integer(pred_n));
    json_object_set_new(t, "predicted_ms", json_real(pred_ms));
    json_object_set_new(t, "predicted_per_token_ms", json_real(pred_n > 1 ? pred_ms / (double)(pred_n - 1) : 0));
    json_object_set_new(t, "predicted_per_second",
                        json_real(pred_ms > 0 && pred_n > 1 ? (double)(pred_n - 1) * 1e3 / pred_ms : 0));
    return t;
}

static json_t *envelope(server *s, const job *j, const char *object) {
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(j->id));
    json_object_set_new(o, "object", json_string(object));
    json_object_set_new(o, "created", json_integer(j->created));
    json_object_set_new(o, "model", oai_json_string_lossy(s->model_id, strlen(s->model_id)));
    json_object_set_new(o, "system_fingerprint", json_string("vt"));
    return o;
}

/* The first error message among the choices, or NULL. */
static const char *job_error(const job *j) {
    for (int32_t i = 0; i < j->n_choices; i++) {
        if (j->choices[i].finish == VT_FINISH_ERROR) return j->choices[i].error ? j->choices[i].error : "engine error";
    }
    return NULL;
}

/* ---- parsed chat answers: content, reasoning_content, tool_calls (toolcall.h) ---- */

static void tool_call_id(const job *j, int32_t choice, int32_t k, char *buf, size_t n) {
    const char *id = strncmp(j->id, "chatcmpl-", 9) ? j->id : j->id + 9;
    snprintf(buf, n, "call_%s_%d_%d", id, (int)choice, (int)k);
}

/* The message of a whole answer; *finish becomes "tool_calls" when it stopped
 * with calls (a call cut by max_tokens keeps "length"). */
static json_t *parsed_message(job *j, int32_t i, const strbuf *text, const char **finish) {
    strbuf all = {0};
    sb_addn(&all, j->prefill.ptr ? j->prefill.ptr : "", j->prefill.len);
    sb_addn(&all, text->ptr ? text->ptr : "", text->len);
    tc_result r;
    tc_parse(&j->tc, all.ptr ? all.ptr : "", all.len, true, &r);
    int32_t n_calls = r.n_calls;
    if (!j->req.parallel_tool_calls && n_calls > 1) n_calls = 1;
    json_t *m = json_object();
    json_object_set_new(m, "role", json_string("assistant"));
    json_object_set_new(m, "content", r.content.len || !n_calls ? oai_json_string_lossy(r.content.ptr ? r.content.ptr : "",
                                                                                         r.content.len)
                                                                  : json_null());
    if (r.reasoning.len) json_object_set_new(m, "reasoning_content", oai_json_string_lossy(r.reasoning.ptr, r.reasoning.len));
    if (n_calls) {
        json_t *calls = json_array();
        for (int32_t k = 0; k < n_calls; k++) {
            char id[96];
            tool_call_id(j, i, k, id, sizeof id);
            json_t *fn = json_object();
            json_object_set_new(fn, "name", oai_json_string_lossy(r.calls[k].name.ptr, r.calls[k].name.len));
            json_object_set_new(fn, "arguments", oai_json_string_lossy(r.calls[k].args.ptr ? r.calls[k].args.ptr : "",
                                                                       r.calls[k].args.len));
            json_t *c = json_object();
            json_object_set_new(c, "id", json_string(id));
            json_object_set_new(c, "type", json_string("function"));
            json_object_set_new(c, "function", fn);
            json_array_append_new(calls, c);
        }
        json_object_set_new(m, "tool_calls", calls);
        if (*finish && !strcmp(*finish, "stop")) *finish = "tool_calls";
    }
    tc_result_free(&r);
    sb_free(&all);
    return m;
}

/* ---- whole responses ------------------------------------------------------------ */

static enum MHD_Result respond_whole(server *s, struct MHD_Connection *conn, job *j, int *status) {
    bool chat = j->req.kind == OAI_CHAT;
    bool want_lp = j->req.n_logprobs >= 0;
    int32_t n = j->n_choices;
    strbuf *text = calloc((size_t)n, sizeof *text);
    json_t **lp = calloc((size_t)n, sizeof *lp);
    if (!text || !lp) {
        free(text);
        free(lp);
        *status = 500;
        return http_send_error(s, conn, 500, NULL, "out of memory");
    }
    for (int32_t i = 0; i < n && want_lp; i++) lp[i] = chat ? json_array() : completion_logprobs_new();

    bool gone = false;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        for (int64_t k = 0; k < j->n_ev; k++) {
            const job_event *e = &j->ev[k];
            if (want_lp && e->token >= 0) {
                if (chat) json_array_append_new(lp[e->choice], chat_logprob_entry(s, j, e));
                else completion_logprobs_add(s, j, lp[e->choice], e, text[e->choice].len);
            }
            sb_addn(&text[e->choice], e->text ? e->text : "", e->text_len);
        }
        job_clear_events_locked(j);
        if (j->n_finished == j->n_choices) break;
        if (!job_wait_locked(j)) {
            gone = true;
            break;
        }
    }
    pthread_mutex_unlock(&j->mu);

    enum MHD_Result res;
    const char *err = job_error(j);
    if (gone) {
        job_abort_by_client(j);
        *status = 499; /* the client closed the connection (nginx's convention) */
        res = MHD_NO;
    } else if (j->shutdown) {
        *status = 503;
        res = http_send_error(s, conn, 503, NULL, "the server is shutting down");
    } else if (err) {
        *status = 500;
        res = http_send_error(s, conn, 500, NULL, "generation failed: %s", err);
    } else {
        json_t *o = envelope(s, j, chat ? "chat.completion" : "text_completion");
        json_t *choices = json_array();
        for (int32_t i = 0; i < n; i++) {
            json_t *c = json_object();
            json_object_set_new(c, "index", json_integer(i));
            const char *fr = finish_name(j->choices[i].finish);
            json_t *content = chat && j->parse_output
                                  ? NULL
                                  : oai_json_string_lossy(text[i].ptr ? text[i].ptr : "", text[i].len);
            if (chat) {
                json_t *m;
                if (j->parse_output) {
                    m = parsed_message(j, i, &text[i], &fr);
                } else {
                    m = json_object();
                    json_object_set_new(m, "role", json_string("assistant"));
                    json_object_set_new(m, "content", content);
                }
                json_object_set_new(c, "message", m);
                if (lp[i]) {
                    json_t *l = json_object();
                    json_object_set_new(l, "content", lp[i]);
                    lp[i] = NULL;
                    json_object_set_new(c, "logprobs", l);
                } else {
                    json_object_set_new(c, "logprobs", json_null());
                }
            } else {
                json_object_set_new(c, "text", content);
                json_object_set_new(c, "logprobs", lp[i] ? lp[i] : json_null());
                lp[i] = NULL;
            }
            json_object_set_new(c, "finish_reason", fr ? json_string(fr) : json_null());
            json_array_append_new(choices, c);
        }
        json_object_set_new(o, "choices", choices);
        json_object_set_new(o, "usage", usage_json(j));
        json_object_set_new(o, "timings", timings_json(j));
        *status = 200;
        res = http_send_json(s, conn, 200, o);
    }
    for (int32_t i = 0; i < n; i++) {
        sb_free(&text[i]);
        if (lp[i]) json_decref(lp[i]);
    }
    free(text);
    free(lp);
    return res;
}

/* ---- streams ----------------------------------------------------------------------- */

static void sse_add(strbuf *out, json_t *chunk) {
    char *t = json_dumps(chunk, JSON_COMPACT);
    json_decref(chunk);
    if (!t) {
        out->failed = true;
        return;
    }
    sb_add(out, "data: ");
    sb_add(out, t);
    sb_add(out, "\n\n");
    free(t);
}

static json_t *chunk_new(server *s, const job *j, json_t *choice) {
    json_t *o = envelope(s, j, j->req.kind == OAI_CHAT ? "chat.completion.chunk" : "text_completion");
    json_t *arr = json_array();
    if (choice) json_array_append_new(arr, choice);
    json_object_set_new(o, "choices", arr);
    return o;
}

/* A chunk for one choice: chat delta (role and/or content) or completion text. */
static json_t *choice_chunk(server *s, job *j, int32_t index, const char *role, const char *text, size_t len,
                            const job_event *lp_event, const char *finish) {
    json_t *c = json_object();
    json_object_set_new(c, "index", json_integer(index));
    if (j->req.kind == OAI_CHAT) {
        json_t *d = json_object();
        if (role) json_object_set_new(d, "role", json_string(role));
        if (text) json_object_set_new(d, "content", oai_json_string_lossy(text, len));
        json_object_set_new(c, "delta", d);
        if (lp_event) {
            json_t *l = json_object();
            json_t *arr = json_array();
            json_array_append_new(arr, chat_logprob_entry(s, j, lp_event));
            json_object_set_new(l, "content", arr);
            json_object_set_new(c, "logprobs", l);
        } else {
            json_object_set_new(c, "logprobs", json_null());
        }
    } else {
        json_object_set_new(c, "text", oai_json_string_lossy(text ? text : "", text ? len : 0));
        if (lp_event) {
            json_t *l = completion_logprobs_new();
            completion_logprobs_add(s, j, l, lp_event, 0);
            json_object_set_new(c, "logprobs", l);
        } else {
            json_object_set_new(c, "logprobs", json_null());
        }
    }
    json_object_set_new(c, "finish_reason", finish ? json_string(finish) : json_null());
    return c;
}

typedef struct emit_ctx {
    server *s;
    job *j;
    int32_t choice;
} emit_ctx;

/* A delta of a parsed answer as one chunk (OpenAI streams tool calls as
 * {index, id, type, function: {name, arguments: ""}} then {index, function: {arguments}}). */
static void stream_emit(void *ud, tc_delta_kind kind, int32_t call, const char *t, size_t n) {
    emit_ctx *x = ud;
    job *j = x->j;
    if (call > 0 && !j->req.parallel_tool_calls) return;
    json_t *d = json_object();
    if (kind == TC_DELTA_CONTENT) {
        json_object_set_new(d, "content", oai_json_string_lossy(t, n));
    } else if (kind == TC_DELTA_REASONING) {
        json_object_set_new(d, "reasoning_content", oai_json_string_lossy(t, n));
    } else {
        json_t *tc = json_object();
        json_object_set_new(tc, "index", json_integer(call));
        json_t *fn = json_object();
        if (kind == TC_DELTA_CALL) {
            char id[96];
            tool_call_id(j, x->choice, call, id, sizeof id);
            json_object_set_new(tc, "id", json_string(id));
            json_object_set_new(tc, "type", json_string("function"));
            json_object_set_new(fn, "name", oai_json_string_lossy(t, n));
            json_object_set_new(fn, "arguments", json_string(""));
        } else {
            json_object_set_new(fn, "arguments", oai_json_string_lossy(t, n));
        }
        json_object_set_new(tc, "function", fn);
        json_t *arr = json_array();
        json_array_append_new(arr, tc);
        json_object_set_new(d, "tool_calls", arr);
    }
    json_t *c = json_object();
    json_object_set_new(c, "index", json_integer(x->choice));
    json_object_set_new(c, "delta", d);
    json_object_set_new(c, "logprobs", json_null());
    json_object_set_new(c, "finish_reason", json_null());
    sse_add(&j->out, chunk_new(x->s, j, c));
}

/* Format what the job has produced into j->out (j->mu held). */
static void stream_format_locked(server *s, job *j) {
    bool chat = j->req.kind == OAI_CHAT;
    bool want_lp = j->req.n_logprobs >= 0;
    if (chat && !j->roles_sent) {
        for (int32_t i = 0; i < j->n_choices; i++) {
            sse_add(&j->out, chunk_new(s, j, choice_chunk(s, j, i, "assistant", "", 0, NULL, NULL)));
        }
        j->roles_sent = true;
    }
    for (int64_t k = 0; k < j->n_ev; k++) {
        const job_event *e = &j->ev[k];
        if (chat && j->tcs) { /* parsed: deltas as they become certain (no logprobs) */
            emit_ctx x = {s, j, e->choice};
            if (e->text_len && !tc_stream_feed(&j->tcs[e->choice], e->text, e->text_len, false, stream_emit, &x)) {
                j->out.failed = true;
            }
            continue;
        }
        bool lp = want_lp && e->token >= 0;
        if (!e->text_len && !lp) continue;
        sse_add(&j->out, chunk_new(s, j, choice_chunk(s, j, e->choice, NULL, e->text ? e->text : "",
                                                      e->text_len, lp ? e : NULL, NULL)));
    }
    job_clear_events_locked(j);
    int32_t done = 0;
    for (int32_t i = 0; i < j->n_choices; i++) {
        job_choice *c = &j->choices[i];
        if (c->finished && !c->finish_sent && c->finish != VT_FINISH_ERROR && !j->shutdown) {
            c->finish_sent = true;
            const char *fr = finish_name(c->finish);
            if (chat && j->tcs) {
                emit_ctx x = {s, j, i};
                if (!tc_stream_feed(&j->tcs[i], "", 0, true, stream_emit, &x)) j->out.failed = true;
                if (j->tcs[i].sent_calls > 0 && c->finish == VT_FINISH_STOP) fr = "tool_calls";
            }
            json_t *ch = chunk_new(s, j, choice_chunk(s, j, i, NULL, chat ? NULL : "", 0, NULL, fr));
            bool last = true;
            for (int32_t k = 0; k < j->n_choices; k++) last &= j->choices[k].finished;
            if (last && i == j->n_choices - 1) json_object_set_new(ch, "timings", timings_json(j));
            sse_add(&j->out, ch);
        }
        if (c->finished) done++;
    }
    if (done < j->n_choices) return;
    const char *err = job_error(j);
    if (j->shutdown || err) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s%s", err ? "generation failed: " : "the server is shutting down",
                 err ? err : "");
        sse_add(&j->out, oai_error_json(err ? 500 : 503, NULL, NULL, msg));
    } else if (j->req.include_usage) {
        json_t *u = chunk_new(s, j, NULL);
        json_object_set_new(u, "usage", usage_json(j));
        json_object_set_new(u, "timings", timings_json(j));
        sse_add(&j->out, u);
    }
    sb_add(&j->out, "data: [DONE]\n\n");
    j->stream_done = true;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    job *j = cls;
    server *s = j->srv;
    for (;;) {
        if (j->out_off < j->out.len) {
            size_t n = j->out.len - j->out_off;
            if (n > max) n = max;
            memcpy(buf, j->out.ptr + j->out_off, n);
            j->out_off += n;
            if (j->out_off == j->out.len) j->out_off = j->out.len = 0;
            return (ssize_t)n;
        }
        if (j->stream_done) return MHD_CONTENT_READER_END_OF_STREAM;
        if (j->out.failed) return MHD_CONTENT_READER_END_WITH_ERROR;
        pthread_mutex_lock(&j->mu);
        bool ok = (j->roles_sent || j->req.kind != OAI_CHAT) ? job_wait_locked(j) : true;
        if (ok) stream_format_locked(s, j);
        pthread_mutex_unlock(&j->mu);
        /* generation is over: the client gets the read timeout to take the rest
         * (set outside j->mu: MHD takes its own lock for it) */
        if (ok && j->stream_done && j->conn) http_set_timeout(j->conn, (unsigned)s->params.read_timeout_s);
        if (!ok) return MHD_CONTENT_READER_END_WITH_ERROR; /* the client is gone or the server stops */
    }
}

static void stream_free(void *cls) {
    job *j = cls;
    pthread_mutex_lock(&j->mu);
    bool unfinished = j->n_finished < j->n_choices;
    pthread_mutex_unlock(&j->mu);
    if (unfinished) job_abort_by_client(j); /* the client disconnected mid-stream */
    job_unref(j);
}

static enum MHD_Result respond_stream(server *s, struct MHD_Connection *conn, job *j, int *status) {
    job_ref(j); /* the response body's reference, dropped in stream_free */
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_reader, j,
                                                               stream_free);
    if (!r) {
        job_unref(j);
        *status = 500;
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    http_add_common_headers(s, conn, r);
    *status = 200;
    enum MHD_Result res = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    return res;
}

/* ---- the endpoint ------------------------------------------------------------------- */

static int status_of(vt_status st) {
    switch (st) {
    case VT_E_FORMAT:
    case VT_E_INVALID:
    case VT_E_RANGE:
    case VT_E_UNSUPPORTED: return 400;
    case VT_E_BUSY:
    case VT_E_NOMEM: return 503;
    default: return 500;
    }
}

enum MHD_Result completions_handle(server *s, struct MHD_Connection *conn, oai_kind kind, const char *body,
                                   size_t len, job **job_out, int *status_out) {
    oai_request req;
    vt_status st = oai_parse_request(kind, body, len, &req);
    if (st != VT_OK) {
        int code = st == VT_E_RANGE ? 413 : st == VT_E_NOMEM ? 503 : 400;
        *status_out = code;
        return http_send_error(s, conn, code, NULL, "%s", vt_last_error());
    }
    job *j = job_create(s, &req);
    if (!j) {
        oai_request_free(&req);
        *status_out = 503;
        return http_send_error(s, conn, 503, NULL, "out of memory");
    }
    *job_out = j; /* the connection's reference; dropped when the request completes */
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    j->sock_fd = ci ? ci->connect_fd : -1;
    j->conn = conn;

    st = job_prepare(j);
    if (st == VT_OK && !j->req.stream && j->req.n_logprobs >= 0) {
        int64_t room = s->n_ctx - j->prompts[0].n; /* the first prompt's: a batch's differ little */
        int64_t tokens = j->req.max_tokens > 0 && j->req.max_tokens < room ? j->req.max_tokens : room;
        double cost = (double)j->n_choices * (double)tokens * (double)(1 + j->req.n_logprobs) * LOGPROB_VALUE_COST;
        if (cost > (double)ANSWER_MAX_COST) {
            *status_out = 413;
            return http_send_error(s, conn, 413, NULL,
                                   "the answer could take %.0f MiB (%d choices x %lld tokens x %d logprobs), more "
                                   "than %zu MiB: ask for fewer, or stream it",
                                   cost / (1 << 20), j->n_choices, (long long)tokens, 1 + j->req.n_logprobs,
                                   ANSWER_MAX_COST >> 20);
        }
    }
    if (st == VT_OK && j->req.max_tokens == 0) {
        /* n_predict / max_tokens 0: nothing to generate; the answer is empty, its
         * finish "length", its usage the prompt's tokens (not evaluated). */
        pthread_mutex_lock(&j->mu);
        for (int32_t i = 0; i < j->n_choices; i++) {
            j->choices[i].finished = true;
            j->choices[i].finish = VT_FINISH_LENGTH;
            j->choices[i].n_prompt = (int32_t)j->prompts[i / j->req.n].n;
        }
        j->n_finished = j->n_choices;
        pthread_mutex_unlock(&j->mu);
        return j->req.stream ? respond_stream(s, conn, j, status_out) : respond_whole(s, conn, j, status_out);
    }
    if (st == VT_OK) st = job_submit(j);
    if (st != VT_OK) {
        int code = status_of(st);
        *status_out = code;
        const char *err_code = st == VT_E_RANGE ? "context_length_exceeded" : NULL;
        if (st == VT_E_BUSY) {
            return http_send_error(s, conn, 503, NULL, "the server is busy (request queue full): %s", vt_last_error());
        }
        return http_send_error(s, conn, code, err_code, "%s", vt_last_error());
    }
    return j->req.stream ? respond_stream(s, conn, j, status_out) : respond_whole(s, conn, j, status_out);
}
