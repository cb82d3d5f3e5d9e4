/* Server lifecycle, the engine thread and jobs (see server.h, server_impl.h). */
#include "server/server_impl.h"

#include "base/log.h"
#include "base/status.h"
#include "model/model.h"
#include "server/json_schema.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

#define DEFAULT_MAX_BODY ((size_t)8 << 20)
#define WAIT_SLICE_MS 100 /* how often a waiting handler looks for a hang-up */

double server_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void server_log(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(stderr, "%s.%03ldZ vt serve: %s\n", when, ts.tv_nsec / 1000000L, msg); /* one call: one line */
}

void server_default_params(server_params *p) {
    memset(p, 0, sizeof *p);
    p->host = "127.0.0.1";
    p->port = 8080;
    p->engine = vt_engine_default_params();
    p->rope = vt_rope_default_params();
    p->max_body_bytes = DEFAULT_MAX_BODY;
    p->max_connections = 256;
    p->max_connections_per_peer = 64;
    p->read_timeout_s = 10;
    p->body_timeout_s = 60;
    p->idle_timeout_s = 5;
}

/* ---- jobs ------------------------------------------------------------------- */

job *job_create(server *s, oai_request *req) {
    job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    int32_t n_prompts = req->kind == OAI_COMPLETION && req->n_prompts > 1 ? req->n_prompts : 1;
    int32_t n = (req->n > 0 ? req->n : 1) * n_prompts; /* bounded by the parser: OAI_MAX_CHOICES */
    j->choices = calloc((size_t)n, sizeof *j->choices);
    j->prompts = calloc((size_t)n_prompts, sizeof *j->prompts);
    if (!j->choices || !j->prompts) {
        free(j->choices);
        free(j->prompts);
        free(j);
        return NULL;
    }
    j->n_prompts = n_prompts;
    j->srv = s;
    atomic_init(&j->refs, 1);
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->req = *req;
    memset(req, 0, sizeof *req);
    j->n_choices = n;
    for (int32_t i = 0; i < n; i++) {
        j->choices[i].job = j;
        j->choices[i].index = i;
    }
    j->sock_fd = -1;
    j->t_start = server_now();
    j->created = (long long)time(NULL);
    uint64_t k = atomic_fetch_add(&s->counter, 1);
    snprintf(j->id, sizeof j->id, "%s-%llx%06llx", j->req.kind == OAI_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)j->created, (unsigned long long)(k & 0xffffff));
    pthread_mutex_lock(&s->mu);
    j->next = s->jobs;
    if (s->jobs) s->jobs->prev = j;
    s->jobs = j;
    s->n_jobs++;
    pthread_mutex_unlock(&s->mu);
    return j;
}

void job_ref(job *j) { atomic_fetch_add(&j->refs, 1); }

void job_clear_events_locked(job *j) {
    for (int64_t i = 0; i < j->n_ev; i++) {
        free(j->ev[i].text);
        free(j->ev[i].top);
    }
    j->n_ev = 0;
}

void job_unref(job *j) {
    if (atomic_fetch_sub(&j->refs, 1) != 1) return;
    server *s = j->srv;
    pthread_mutex_lock(&s->mu);
    if (j->prev) j->prev->next = j->next;
    else s->jobs = j->next;
    if (j->next) j->next->prev = j->prev;
    s->n_jobs--;
    pthread_cond_broadcast(&s->jobs_cv);
    pthread_mutex_unlock(&s->mu);

    job_clear_events_locked(j);
    free(j->ev);
    for (int32_t i = 0; i < j->n_choices; i++) {
        free(j->choices[i].error);
        free(j->choices[i].embd);
    }
    free(j->choices);
    for (int32_t i = 0; i < j->n_prompts; i++) free(j->prompts[i].ids);
    free(j->prompts);
    sb_free(&j->out);
    sb_free(&j->prefill);
    for (int32_t i = 0; j->tcs && i < j->n_choices; i++) tc_stream_free(&j->tcs[i]);
    free(j->tcs);
    oai_request_free(&j->req);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

static void kick_engine(server *s) {
    pthread_mutex_lock(&s->mu);
    s->kick = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
}

/* One prompt (text, or token ids) into its token ids; `where` names it in messages. */
static vt_status prepare_one(server *s, const char *where, const char *text, size_t text_len, int32_t **ids_io,
                             int64_t n_ids, struct job_prompt *out) {
    if (!text) {
        int32_t n_vocab = vt_model_n_vocab(s->model);
        for (int64_t i = 0; i < n_ids; i++) {
            if ((*ids_io)[i] >= n_vocab) {
                return vt_errorf(VT_E_INVALID, "field '%s[%lld]': token id %d is not below the vocabulary size %d",
                                 where, (long long)i, (*ids_io)[i], n_vocab);
            }
        }
        out->ids = *ids_io;
        out->n = n_ids;
        *ids_io = NULL;
    } else {
        /* Tokenizing costs memory by the byte: text that could not fit in the
         * context even as the longest tokens is refused before it is tokenized. */
        size_t fits = (size_t)s->n_ctx * (s->max_piece_bytes + 1) + 64;
        if (text_len > fits) {
            return vt_errorf(VT_E_RANGE,
                             "the prompt is %zu bytes but the context is %d tokens (at most %zu bytes a token): "
                             "it cannot fit",
                             text_len, s->n_ctx, s->max_piece_bytes);
        }
        vt_status st = vt_tokenize(s->model, text, text_len, true, true, &out->ids, &out->n);
        if (st != VT_OK) return vt_error_prefix(VT_E_INVALID, where);
    }
    if (out->n == 0) return vt_errorf(VT_E_INVALID, "field '%s': the prompt is empty (0 tokens)", where);
    if (out->n >= s->n_ctx) {
        return vt_errorf(VT_E_RANGE,
                         "the prompt is %lld tokens but the context is %d tokens "
                         "(the prompt must be shorter, to leave room for generated tokens)",
                         (long long)out->n, s->n_ctx);
    }
    return VT_OK;
}

static void detect_output_format(server *s, const char *src, size_t len);

/* The markers of s->markers a chat request keeps as text. A control token gives
 * no text, and a marker that is one is kept only where something reads it, as
 * vLLM keeps special tokens for its tool parsers only when tools are offered and
 * tool_choice is not "none": a format's call markers where calls are parsed
 * (tools), so that a call the model writes under "none" is not markup in the
 * content; harmony's always (its channels are the answer: parsed, or the raw
 * text under reasoning "none"); <think> and </think> where the template thinks
 * (split out as reasoning_content, or kept in the content under reasoning
 * "none", which llama-server documents as the thoughts left in the content).
 * llama.cpp's chat layer (at .cache/llama/src) preserves a template's markers
 * whatever the request. */
static void preserved_markers(const server *s, bool tools, tc_tokens *out) {
    memset(out, 0, sizeof *out);
    for (int32_t i = 0; i < s->markers.n; i++) {
        bool think = false;
        for (const char *const *m = tc_reasoning_markers(); *m && !think; m++) think = !strcmp(*m, s->markers.text[i]);
        if (think ? !s->tmpl_think : !tools && s->tool_format != TC_HARMONY) continue;
        out->text[out->n] = s->markers.text[i];
        out->id[out->n++] = s->markers.id[i];
    }
}

vt_status job_prepare(job *j) {
    server *s = j->srv;
    oai_request *r = &j->req;
    if (r->kind == OAI_CHAT) {
        char *rendered = NULL;
        size_t len = 0;
        if (s->jinja) VT_TRY(chat_jinja_render(s->jinja, r, &s->jinja_env, &rendered, &len));
        else VT_TRY(chat_template_render(s->tmpl, r->messages, r->n_messages, &rendered, &len));
        bool tools = r->n_tools > 0 && r->tool_choice != OAI_TOOLS_NONE;
        const bool reasoning = r->reasoning_format ? r->reasoning_format == OAI_REASONING_DEEPSEEK : !s->reasoning_none;
        /* harmony (gpt-oss) answers are channels, tools or not: the analysis
         * channel is reasoning, the final one content (reasoning "none": the raw text) */
        const bool harmony = s->tool_format == TC_HARMONY && (tools || reasoning);
        j->tc = (tc_options){.format = tools || harmony ? s->tool_format : TC_NONE,
                             .reasoning = s->tmpl_think && s->tool_format != TC_HARMONY && reasoning,
                             .no_calls = !tools,
                             .string_arg = tools ? jschema_string_arg : NULL,
                             .string_arg_ud = tools ? json_object_get(r->root, "tools") : NULL};
        if (j->tc.reasoning) { /* the generation prompt may open the block itself (Qwen3, DeepSeek R1) */
            size_t e = len;
            while (e > 0 && (rendered[e - 1] == '\n' || rendered[e - 1] == ' ')) e--;
            j->tc.starts_in_reasoning = e >= 7 && !memcmp(rendered + e - 7, "<think>", 7);
        }
        if (r->grammar) j->tc.reasoning = j->tc.starts_in_reasoning = false; /* the grammar's text, all of it */
        j->parse_output = tools || j->tc.reasoning || (harmony && !r->grammar);
        preserved_markers(s, tools, &j->preserve);
        if (tools && (r->tool_choice == OAI_TOOLS_REQUIRED || r->tool_choice == OAI_TOOLS_NAMED)) {
            /* the call is forced by starting it: the format's opener (and the name),
             * and the rest by a grammar of the tools' parameter schemas */
            const char *name = r->tool_choice == OAI_TOOLS_NAMED ? r->tool_choice_name : NULL;
            if (r->grammar) {
                free(rendered);
                return vt_errorf(VT_E_INVALID, "field 'tool_choice': a forced tool call cannot have a "
                                               "response_format, json_schema or grammar too");
            }
            tc_prefill(s->tool_format, s->tool_args_style, name, &j->prefill);
            j->tc.starts_in_reasoning = false;
            strbuf g = {0};
            vt_status gs = jschema_tool_call_gbnf(s->tool_format, s->tool_args_style, json_object_get(r->root, "tools"),
                                                  name, &s->markers, &g);
            if (gs == VT_OK) {
                r->grammar = g.ptr;
                r->grammar_len = g.len;
            } else {
                sb_free(&g);
                if (gs != VT_E_UNSUPPORTED) { /* a schema vt cannot turn into a grammar: say which */
                    free(rendered);
                    return gs;
                }
            }
        }
        if (j->prefill.len) {
            char *both = malloc(len + j->prefill.len + 1);
            if (!both || j->prefill.failed) {
                free(both);
                free(rendered);
                return vt_errorf(VT_E_NOMEM, "out of memory");
            }
            memcpy(both, rendered, len);
            memcpy(both + len, j->prefill.ptr, j->prefill.len);
            free(rendered);
            rendered = both;
            len += j->prefill.len;
        }
        vt_status st = prepare_one(s, "messages", rendered, len, NULL, 0, &j->prompts[0]);
        free(rendered);
        VT_TRY(st);
        if (j->parse_output && r->stream) {
            j->tcs = calloc((size_t)j->n_choices, sizeof *j->tcs);
            if (!j->tcs) return vt_errorf(VT_E_NOMEM, "out of memory");
            for (int32_t i = 0; i < j->n_choices; i++) {
                tc_stream_init(&j->tcs[i], &j->tc);
                sb_addn(&j->tcs[i].text, j->prefill.ptr, j->prefill.len);
            }
        }
    } else {
        for (int32_t p = 0; p < j->n_prompts; p++) {
            char where[32];
            snprintf(where, sizeof where, j->n_prompts > 1 ? "prompt[%d]" : "prompt", p);
            oai_prompt *q = &r->prompts[p];
            VT_TRY(prepare_one(s, where, q->text, q->text_len, &q->tokens, q->n_tokens, &j->prompts[p]));
        }
    }
    for (int32_t p = 0; p < j->n_prompts; p++) j->n_prompt += j->prompts[p].n;
    return VT_OK;
}

vt_status job_submit(job *j) {
    server *s = j->srv;
    oai_request *r = &j->req;
    vt_status st = VT_OK;
    pthread_mutex_lock(&j->mu);
    for (int32_t i = 0; i < j->n_choices; i++) {
        job_choice *c = &j->choices[i];
        vt_request_params p = {0};
        const struct job_prompt *jp = &j->prompts[i / (r->n > 0 ? r->n : 1)];
        p.prompt = jp->ids;
        p.n_prompt = jp->n;
        p.sampling = r->sampling;
        if (!r->seed_given) {
            uint64_t k = atomic_fetch_add(&s->counter, 1);
            p.sampling.seed = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (k * 0xbf58476d1ce4e5b9ull);
        } else {
            p.sampling.seed = r->sampling.seed + (uint64_t)i;
        }
        p.max_tokens = r->max_tokens > 0 ? r->max_tokens : 0; /* the engine's 0: unlimited */
        p.stop = r->stop;
        p.n_stop = r->n_stop;
        p.ignore_eos = r->ignore_eos;
        p.pooling = j->pooling;
        p.grammar = r->grammar;
        p.grammar_len = r->grammar_len;
        p.preserve = j->preserve.id; /* the parsers see the markers they read, control tokens or not */
        p.n_preserve = j->preserve.n;
        p.user = c;
        job_ref(j); /* the engine's reference, dropped at this choice's finish */
        st = vt_engine_add(s->engine, &p, &c->id);
        if (st != VT_OK) {
            atomic_fetch_sub(&j->refs, 1); /* cannot be the last: the caller holds one */
            break;
        }
        c->added = true;
    }
    if (st != VT_OK) {
        for (int32_t i = 0; i < j->n_choices; i++) {
            if (j->choices[i].added && !j->choices[i].finished) vt_engine_abort(s->engine, j->choices[i].id);
        }
        j->aborted = true;
    }
    pthread_mutex_unlock(&j->mu);
    kick_engine(s);
    return st;
}

void job_abort(job *j, bool shutdown) {
    server *s = j->srv;
    bool any = false;
    pthread_mutex_lock(&j->mu);
    if (shutdown) j->shutdown = true;
    if (!j->aborted) {
        j->aborted = true;
        for (int32_t i = 0; i < j->n_choices; i++) {
            job_choice *c = &j->choices[i];
            if (c->added && !c->finished) {
                vt_engine_abort(s->engine, c->id); /* VT_E_NOT_FOUND if it just finished: fine */
                any = true;
            }
        }
    }
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (any) kick_engine(s);
}

void job_abort_by_client(job *j) {
    pthread_mutex_lock(&j->mu);
    bool first = !j->client_gone && !j->shutdown && !atomic_load(&j->srv->hard_stop);
    j->client_gone = true;
    pthread_mutex_unlock(&j->mu);
    if (first) metrics_count_client_abort(&j->srv->metrics);
    job_abort(j, false);
}

/* A real hang-up: the connection is reset or shut both ways. A client that only
 * shut its sending side (shutdown(SHUT_WR), as nc -N and some proxies do after
 * the request) still reads the answer, so end-of-input alone is not "gone"; a
 * client that closed its socket is noticed when a write to it fails. */
static bool client_gone(int fd) {
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

bool job_wait_locked(job *j) {
    server *s = j->srv;
    while (j->n_ev == 0 && j->n_finished < j->n_choices) {
        if (atomic_load(&s->hard_stop)) return false;
        if (client_gone(j->sock_fd)) return false;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += WAIT_SLICE_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
    }
    return true;
}

/* ---- the engine thread -------------------------------------------------------- */

static char *dup_n(const char *p, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    if (n) memcpy(d, p, n);
    d[n] = 0;
    return d;
}

static void dispatch(server *s, const vt_output *o) {
    job_choice *c = o->user;
    job *j = c->job;
    double now = server_now();
    pthread_mutex_lock(&j->mu);
    const char *text = o->text;
    size_t text_len = o->text_len;
    if (s->canned) { /* tests: the answer is the canned text, a few bytes per token, the rest at the end */
        size_t rest = strlen(s->canned) - c->canned_off;
        text = s->canned + c->canned_off;
        text_len = o->finish != VT_FINISH_NONE ? rest : o->token >= 0 ? (rest < 3 ? rest : 3) : 0;
        c->canned_off += text_len;
    }
    if (o->token >= 0 || text_len) {
        if (j->n_ev == j->cap_ev) {
            int64_t cap = j->cap_ev ? j->cap_ev * 2 : 16;
            job_event *ev = realloc(j->ev, (size_t)cap * sizeof *ev);
            if (ev) {
                j->ev = ev;
                j->cap_ev = cap;
            }
        }
        if (j->n_ev < j->cap_ev) {
            job_event *e = &j->ev[j->n_ev++];
            memset(e, 0, sizeof *e);
            e->choice = c->index;
            e->token = o->token;
            e->logprob = o->logprob;
            if (text_len) {
                e->text = dup_n(text, text_len);
                e->text_len = e->text ? text_len : 0;
            }
            if (o->n_top > 0 && o->top) {
                e->top = malloc((size_t)o->n_top * sizeof *e->top);
                if (e->top) {
                    memcpy(e->top, o->top, (size_t)o->n_top * sizeof *e->top);
                    e->n_top = o->n_top;
                }
            }
        }
    }
    if (o->token >= 0) {
        if (c->t_first == 0) {
            c->t_first = now;
            metrics_observe_ttft(&s->metrics, now - j->t_start);
        } else {
            metrics_observe_itl(&s->metrics, now - c->t_last);
        }
        c->t_last = now;
    }
    if (o->embd && o->n_embd > 0 && !c->embd) {
        c->embd = malloc(sizeof(float) * (size_t)o->n_embd);
        if (c->embd) {
            memcpy(c->embd, o->embd, sizeof(float) * (size_t)o->n_embd);
            c->n_embd = o->n_embd;
        }
    }
    c->n_prompt = o->n_prompt;
    c->n_cached = o->n_cached;
    c->n_generated = o->n_generated;
    bool finished = false;
    if (o->finish != VT_FINISH_NONE && !c->finished) {
        c->finished = true;
        c->finish = o->finish;
        /* tests: the canned answer ends as if the model stopped after it */
        if (s->canned && o->finish == VT_FINISH_LENGTH) c->finish = VT_FINISH_STOP;
        if (o->finish == VT_FINISH_ERROR) c->error = dup_n(o->error ? o->error : "engine error",
                                                           strlen(o->error ? o->error : "engine error"));
        j->n_finished++;
        finished = true;
        metrics_observe_request(&s->metrics, now - j->t_start);
    }
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (finished) job_unref(j); /* the engine's reference */
}

/* One short request through the engine before /health says ready: the first
 * forward pass pays for page faults of the activation workspace and the first KV
 * blocks, and the threads' first wake-up; no client should. (The weights'
 * prefetch probe already runs in vt_engine_create.) Its tokens count in the
 * engine's totals in /metrics. */
static vt_status warm_up(server *s) {
    static const int32_t fallback[1] = {0};
    int32_t *ids = NULL;
    int64_t n = 0;
    if (vt_tokenize(s->model, "Once upon a time", 16, true, false, &ids, &n) != VT_OK || n == 0) {
        free(ids);
        ids = NULL;
        n = 0;
    }
    if (n > s->n_ctx - 2) n = s->n_ctx - 2 > 0 ? s->n_ctx - 2 : 1;
    vt_request_params p = {.prompt = n ? ids : fallback, .n_prompt = n ? n : 1, .max_tokens = 2, .ignore_eos = true};
    p.sampling = (vt_sampling){.temperature = 0, .top_p = 1, .repeat_penalty = 1}; /* greedy */
    uint64_t id;
    vt_status st = vt_engine_add(s->engine, &p, &id);
    bool done = false;
    for (int step = 0; st == VT_OK && !done && step < 64; step++) {
        const vt_output *outs = NULL;
        int32_t n_outs = 0;
        st = vt_engine_step(s->engine, &outs, &n_outs);
        for (int32_t i = 0; st == VT_OK && i < n_outs; i++) {
            if (outs[i].id == id && outs[i].finish != VT_FINISH_NONE) done = true;
        }
    }
    if (!done && st == VT_OK) vt_engine_abort(s->engine, id);
    free(ids);
    return st;
}

/* tc_tokens_collect's test: a marker that is one special token of the
 * vocabulary, and not an end-of-generation one (those end the answer: the
 * parsers never see them, and a grammar admits them only where it ends). */
static int32_t marker_token(void *ud, const char *text) {
    const tokenizer *t = ud;
    const int32_t id = tok_special_id(t, text);
    return id >= 0 && !tok_is_eog(t, id) ? id : -1;
}

static vt_status load_model(server *s) {
    vt_model_params mp = vt_model_default_params();
    mp.progress = s->params.progress;
    mp.rope = &s->params.rope;
    double t0 = server_now();
    server_log("loading %s", s->model_path);
    VT_TRY(vt_model_load(s->model_path, &mp, &s->model));
    /* n_ctx: > 0 as given; 0 the model's context (the training context, or as far
     * as --rope-scale / --yarn-orig-ctx reach: vt_model_n_ctx_default); < 0 that
     * capped at -n_ctx */
    int32_t train = vt_model_n_ctx_default(s->model), want = s->params.engine.n_ctx;
    s->n_ctx = want > 0 ? want : want == 0 ? train : (train > 0 && train < -want ? train : -want);
    s->params.engine.n_ctx = s->n_ctx;
    char piece[512];
    s->max_piece_bytes = 1;
    for (int32_t t = 0; t < vt_model_n_vocab(s->model); t++) {
        int64_t k = vt_token_piece(s->model, t, piece, sizeof piece);
        if (k > (int64_t)s->max_piece_bytes) s->max_piece_bytes = (size_t)k;
    }

    /* The chat template: --chat-template-file (parsed by server_start), else
     * --chat-template's built-in family, else the GGUF's Jinja template, else (no
     * template, or one vt cannot parse) the built-in family it resembles, else chatml. */
    const model *m = s->model;
    const char *tmpl_desc = NULL;
    s->tmpl = CHAT_TMPL_UNKNOWN;
    if (s->jinja) {
        tmpl_desc = s->chat_template_file;
    } else if (s->chat_template_name) {
        chat_template_from_name(s->chat_template_name, &s->tmpl); /* checked by server_start */
    } else {
        gguf_str t;
        if (gguf_get_str(&m->gguf, "tokenizer.chat_template", &t) == VT_OK) {
            detect_output_format(s, t.ptr, (size_t)t.len);
            if (jinja_template_parse(t.ptr, (size_t)t.len, &s->jinja) == VT_OK) {
                tmpl_desc = "the model's (Jinja)";
            } else {
                log_warn("vt serve: the model's chat template does not parse (%s); using a built-in renderer",
                         vt_last_error());
                s->tmpl = chat_template_detect(t.ptr, (size_t)t.len);
                if (s->tmpl == CHAT_TMPL_UNKNOWN) {
                    log_warn("vt serve: the model's chat template is not one vt recognises; using chatml");
                }
            }
        }
    }
    if (!s->jinja && s->tmpl == CHAT_TMPL_UNKNOWN) s->tmpl = CHAT_TMPL_CHATML;
    if (!s->chat_template_file && !s->jinja && s->tool_format == TC_NONE) detect_output_format(s, NULL, 0);
    tc_tokens_collect(s->tool_format, marker_token, (void *)m->tok, &s->markers);
    if (s->markers.n > 0) {
        char list[512] = "";
        for (int32_t i = 0, k = 0; i < s->markers.n && k >= 0 && (size_t)k < sizeof list; i++)
            k += snprintf(list + k, sizeof list - (size_t)k, "%s%s", i ? " " : "", s->markers.text[i]);
        server_log("%s markers that are tokens of the vocabulary: %s", tc_format_name(s->tool_format), list);
    }
    if (s->jinja) {
        /* bos_token / eos_token: the texts of those tokens, control tokens included */
        char piece[256];
        int32_t ids[2] = {tok_bos(m->tok), tok_eos(m->tok)};
        char **texts[2] = {&s->bos_text, &s->eos_text};
        for (int i = 0; i < 2; i++) {
            int64_t n = ids[i] >= 0 ? tok_piece(m->tok, ids[i], true, piece, sizeof piece) : 0;
            if (n < 0 || n >= (int64_t)sizeof piece) n = 0;
            *texts[i] = strndup(piece, (size_t)n);
            if (!*texts[i]) return vt_errorf(VT_E_NOMEM, "vt serve: out of memory");
        }
        s->jinja_env = (chat_jinja_env){.bos_token = s->bos_text, .eos_token = s->eos_text,
                                        .strip_bos = tok_add_bos(m->tok)};
    }
    vt_status st = vt_engine_create(s->model, &s->params.engine, &s->engine);
    if (st != VT_OK) return st;
    double t1 = server_now();
    st = warm_up(s);
    if (st != VT_OK) return vt_error_prefix(st, "the warm-up request failed");
    server_log("warmed up in %.0f ms", (server_now() - t1) * 1e3);
    vt_engine_stats es;
    vt_engine_stats_get(s->engine, &es);
    if (es.state_slots_total > 0) /* a hybrid: its recurrent state beside the KV blocks */
        server_log("recurrent state: %.2f MiB per sequence or snapshot, %lld slots (%d sequences + snapshots), "
                   "%.1f MiB",
                   (double)es.state_bytes_per_seq / (1024.0 * 1024.0), (long long)es.state_slots_total,
                   s->params.engine.max_seqs,
                   (double)es.state_bytes_per_seq * (double)es.state_slots_total / (1024.0 * 1024.0));
    server_log("loaded %s (%s) in %.0f ms; context %d, %d sequences, chat template %s", s->model_id,
               vt_model_desc(s->model), (server_now() - t0) * 1e3, s->n_ctx, s->params.engine.max_seqs,
               tmpl_desc ? tmpl_desc : chat_template_name(s->tmpl));
    return VT_OK;
}

static void *engine_main(void *arg) {
    server *s = arg;
    if (load_model(s) != VT_OK) {
        server_log("%s", vt_last_error());
        atomic_store(&s->state, SERVER_FAILED);
        if (s->params.on_fatal) s->params.on_fatal(s->params.user);
        return NULL;
    }
    int expected = SERVER_LOADING;
    atomic_compare_exchange_strong(&s->state, &expected, SERVER_READY);
    int failures = 0;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stop && !s->kick && !vt_engine_has_work(s->engine)) pthread_cond_wait(&s->wake, &s->mu);
        s->kick = 0;
        bool stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (stop) break;
        const vt_output *outs = NULL;
        int32_t n_outs = 0;
        vt_status st = vt_engine_step(s->engine, &outs, &n_outs);
        if (st != VT_OK) {
            log_error("vt serve: engine step failed: %s", vt_last_error());
            if (++failures > 3) { /* do not spin on a persistent failure */
                struct timespec ts = {0, 10 * 1000000L};
                nanosleep(&ts, NULL);
            }
        } else {
            failures = 0;
        }
        for (int32_t i = 0; i < n_outs; i++) dispatch(s, &outs[i]);
    }
    return NULL;
}

/* ---- lifecycle ------------------------------------------------------------------- */

static char *dup_or_null(const char *p) { return p ? strdup(p) : NULL; }

/* What the template's source says about tool calls and reasoning. */
static void detect_output_format(server *s, const char *src, size_t len) {
    s->tool_format = tc_detect(src, len);
    s->tool_args_style = src && memmem(src, len, "[ARGS]", 6) != NULL;
    s->tmpl_think = src && memmem(src, len, "<think>", 7) != NULL;
}

/* --chat-template-file: read and parse now, so a bad file stops vt serve at once. */
static vt_status load_template_file(server *s) {
    const char *path = s->chat_template_file;
    FILE *f = fopen(path, "rb");
    if (!f) return vt_errorf(VT_E_IO, "vt serve: --chat-template-file %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap || cap >= (size_t)16 << 20) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    bool read_error = ferror(f);
    fclose(f);
    if (!buf) return vt_errorf(VT_E_NOMEM, "vt serve: --chat-template-file %s: out of memory", path);
    if (read_error) {
        free(buf);
        return vt_errorf(VT_E_IO, "vt serve: --chat-template-file %s: read error", path);
    }
    vt_status st = jinja_template_parse(buf, n, &s->jinja);
    detect_output_format(s, buf, n);
    free(buf);
    if (st != VT_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "vt serve: --chat-template-file %s", path);
        return vt_error_prefix(st, msg);
    }
    return VT_OK;
}

vt_status server_start(const server_params *p, server **out) {
    *out = NULL;
    if (!p->model_path) return vt_errorf(VT_E_INVALID, "vt serve: no model (-m FILE)");
    server *s = calloc(1, sizeof *s);
    if (!s) return vt_errorf(VT_E_NOMEM, "vt serve: out of memory");
    s->params = *p;
    if (!s->params.max_body_bytes) s->params.max_body_bytes = DEFAULT_MAX_BODY;
    if (s->params.max_connections <= 0) s->params.max_connections = 256;
    if (s->params.max_connections_per_peer < 0) s->params.max_connections_per_peer = 0;
    if (s->params.read_timeout_s <= 0) s->params.read_timeout_s = 10;
    if (s->params.body_timeout_s <= 0) s->params.body_timeout_s = 60;
    if (s->params.idle_timeout_s <= 0) s->params.idle_timeout_s = 5;
    s->host = strdup(p->host ? p->host : "127.0.0.1");
    s->model_path = strdup(p->model_path);
    /* tests only: every answer's text is this (the tool-call and reasoning parsers
     * seen end to end on outputs a random-weight model would never write) */
    const char *canned = getenv("VT_TEST_CANNED_OUTPUT");
    if (canned && *canned) s->canned = strdup(canned);
    s->api_key = dup_or_null(p->api_key && *p->api_key ? p->api_key : NULL);
    s->cors_origins = dup_or_null(p->cors_origins);
    s->chat_template_name = dup_or_null(p->chat_template);
    s->chat_template_file = dup_or_null(p->chat_template_file);
    s->params.host = s->host;
    s->params.model_path = s->model_path;
    s->params.api_key = s->api_key;
    s->params.cors_origins = s->cors_origins;
    s->params.chat_template = s->chat_template_name;
    s->params.chat_template_file = s->chat_template_file;
    if (p->alias) {
        snprintf(s->model_id, sizeof s->model_id, "%s", p->alias);
    } else {
        const char *b = strrchr(p->model_path, '/');
        snprintf(s->model_id, sizeof s->model_id, "%s", b ? b + 1 : p->model_path);
    }
    s->started = (long long)time(NULL);
    atomic_init(&s->state, SERVER_LOADING);
    atomic_init(&s->hard_stop, false);
    atomic_init(&s->counter, 1);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->wake, NULL);
    pthread_cond_init(&s->jobs_cv, NULL);
    metrics_init(&s->metrics);
    conns_init(&s->conns, s->params.max_connections, s->params.max_connections_per_peer);
    json_object_seed(0); /* before any thread builds JSON */

    vt_status st = VT_OK;
    chat_template_kind k;
    if (s->chat_template_name && !chat_template_from_name(s->chat_template_name, &k)) {
        st = vt_errorf(VT_E_INVALID,
                       "vt serve: --chat-template '%s' is not one of chatml, llama2, llama2-sys, "
                       "mistral-v1, mistral-v3, mistral-v7, llama3, gemma, phi3, phi4",
                       s->chat_template_name);
        goto fail;
    }
    if (s->chat_template_name && s->chat_template_file) {
        st = vt_errorf(VT_E_INVALID, "vt serve: --chat-template and --chat-template-file: give one of them");
        goto fail;
    }
    if (p->reasoning_format && strcmp(p->reasoning_format, "none") && strcmp(p->reasoning_format, "deepseek")) {
        st = vt_errorf(VT_E_INVALID, "vt serve: --reasoning-format %s: expected none or deepseek", p->reasoning_format);
        goto fail;
    }
    s->reasoning_none = p->reasoning_format && !strcmp(p->reasoning_format, "none");
    s->pooling_flag = -1;
    if (p->pooling && !embeddings_pooling_from_name(p->pooling, &s->pooling_flag)) {
        st = vt_errorf(VT_E_INVALID, "vt serve: --pooling %s: expected none, mean, cls, last or rank", p->pooling);
        goto fail;
    }
    if (s->chat_template_file && (st = load_template_file(s)) != VT_OK) goto fail;
    if (!s->host || !s->model_path) {
        st = vt_errorf(VT_E_NOMEM, "vt serve: out of memory");
        goto fail;
    }
    st = http_start(s);
    if (st != VT_OK) goto fail;
    if (pthread_create(&s->engine_thread, NULL, engine_main, s) != 0) {
        st = vt_errorf(VT_E_NOMEM, "vt serve: cannot start the engine thread: %s", strerror(errno));
        http_stop(s);
        goto fail;
    }
    s->engine_thread_started = true;
    *out = s;
    return VT_OK;
fail:
    server_destroy(s);
    return st;
}

int server_port(const server *s) { return s->port; }

/* Wait until no job is alive or the deadline passes; true when none is left. */
static bool wait_jobs(server *s, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->mu);
    while (s->n_jobs > 0) {
        if (pthread_cond_timedwait(&s->jobs_cv, &s->mu, &ts) == ETIMEDOUT) break;
    }
    bool none = s->n_jobs == 0;
    pthread_mutex_unlock(&s->mu);
    return none;
}

void server_stop(server *s, int grace_ms) {
    int prev = atomic_exchange(&s->state, SERVER_STOPPING);
    http_quiesce(s);
    if (prev == SERVER_READY && !wait_jobs(s, grace_ms)) {
        /* Abort what is left. Jobs are only unlinked under s->mu, and job_abort
         * takes job->mu, so take a reference to each under s->mu first. */
        pthread_mutex_lock(&s->mu);
        int64_t n = s->n_jobs, k = 0;
        job **list = calloc((size_t)(n ? n : 1), sizeof *list);
        for (job *j = s->jobs; j && list && k < n; j = j->next) {
            job_ref(j);
            list[k++] = j;
        }
        pthread_mutex_unlock(&s->mu);
        server_log("aborting %lld request(s) still running", (long long)k);
        for (int64_t i = 0; i < k; i++) job_abort(list[i], true);
        for (int64_t i = 0; i < k; i++) job_unref(list[i]);
        free(list);
        wait_jobs(s, 2000);
    }
    atomic_store(&s->hard_stop, true);
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    if (s->engine_thread_started) {
        pthread_join(s->engine_thread, NULL);
        s->engine_thread_started = false;
    }
    http_stop(s);
}

void server_destroy(server *s) {
    if (!s) return;
    if (s->daemon || s->engine_thread_started) server_stop(s, 0);
    if (s->engine) vt_engine_free(s->engine);
    if (s->model) vt_model_free(s->model);
    metrics_free(&s->metrics);
    conns_free(&s->conns);
    pthread_cond_destroy(&s->jobs_cv);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->mu);
    free(s->host);
    free(s->model_path);
    free(s->api_key);
    free(s->cors_origins);
    free(s->chat_template_name);
    free(s->chat_template_file);
    free(s->canned);
    free(s->bos_text);
    free(s->eos_text);
    jinja_template_destroy(s->jinja);
    free(s);
}
