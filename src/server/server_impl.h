/* Internals shared by the server's files: the server struct, jobs (one API
 * request, n engine requests) and their event queues. */
#ifndef VT_SERVER_SERVER_IMPL_H
#define VT_SERVER_SERVER_IMPL_H

#include "server/chat_jinja.h"
#include "server/chat_template.h"
#include "server/conns.h"
#include "server/metrics.h"
#include "server/openai.h"
#include "server/server.h"
#include "server/strbuf.h"
#include "server/toolcall.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

enum server_state { SERVER_LOADING, SERVER_READY, SERVER_FAILED, SERVER_STOPPING };

typedef struct job job;

/* One thing the engine reported for one choice: a token (with its text and
 * logprobs) or text alone (held-back text flushed at the end). */
typedef struct job_event {
    int32_t choice;
    int32_t token;            /* -1: text only */
    char *text;               /* malloc'd (may be NULL when text_len == 0) */
    size_t text_len;
    float logprob;
    vt_token_logprob *top;    /* (n_top) malloc'd, or NULL */
    int32_t n_top;
} job_event;

typedef struct job_choice {
    job *job;
    int32_t index;
    uint64_t id;              /* engine request id */
    bool added, finished;
    vt_finish finish;
    char *error;              /* malloc'd message when finish == VT_FINISH_ERROR */
    int32_t n_prompt, n_cached, n_generated;
    double t_first, t_last;   /* seconds (monotonic) of the first and last token; 0: none */
    bool finish_sent;         /* streaming: the chunk with finish_reason went out (connection thread) */
    size_t canned_off;        /* VT_TEST_CANNED_OUTPUT: bytes of it given out so far */
    float *embd;              /* (n_embd) an embedding request's vector, malloc'd; NULL: none */
    int32_t n_embd;
} job_choice;

struct job {
    server *srv;
    atomic_int refs;          /* the HTTP side, the stream body, one per running choice */
    pthread_mutex_t mu;
    pthread_cond_t cv;        /* signalled on every new event and finish */

    oai_request req;
    struct job_prompt {
        int32_t *ids;         /* (n) token ids, malloc'd */
        int64_t n;
    } *prompts;               /* (n_prompts): one, or a completion batch; choice i uses i / req.n */
    int32_t n_prompts;
    int64_t n_prompt;         /* tokens of all prompts (usage) */
    job_choice *choices;      /* (n_choices) */
    int32_t n_choices, n_finished;
    bool aborted;             /* by the client or a shutdown */
    bool client_gone;         /* the client went away (counted once in the metrics) */
    bool shutdown;            /* aborted because the server stops */

    job_event *ev;            /* (n_ev) events not yet consumed */
    int64_t n_ev, cap_ev;

    double t_start;           /* seconds (monotonic) when it was queued */
    char id[48];
    long long created;        /* unix seconds */
    int sock_fd;              /* the client's socket, to notice a hang-up while waiting; -1: none */
    struct MHD_Connection *conn; /* the connection (a stream sets its timeout when generation ends) */

    /* streaming state, touched only by the connection's thread */
    strbuf out;
    size_t out_off;
    bool roles_sent;          /* chat: the first chunks (delta.role) went out */
    bool stream_done;
    /* chat answers split into content, reasoning and tool calls (toolcall.h) */
    bool parse_output;
    tc_options tc;
    strbuf prefill;           /* appended to the prompt to force a call; fed to the parser first */
    tc_tokens preserve;       /* chat: the markers (of srv->markers) its output keeps as text, in the
                                 content and in logprobs (job_prepare); completions: none */
    tc_stream *tcs;           /* (n_choices) streaming parsers, or NULL */

    vt_pooling pooling;       /* embeddings (embeddings.c): the engine requests' pooling; else NONE */

    job *next, *prev;         /* in srv->jobs */
};

struct server {
    server_params params;
    char *host, *api_key, *cors_origins, *chat_template_name, *model_path;
    char model_id[256];
    struct MHD_Daemon *daemon;
    int port;
    long long started;        /* unix seconds */

    atomic_int state;         /* enum server_state */
    vt_model *model;
    vt_engine *engine;
    int32_t n_ctx;
    size_t max_piece_bytes;   /* the longest token's text: a prompt longer than n_ctx times this cannot fit */
    chat_template_kind tmpl;  /* the built-in renderer: used when jinja is NULL */
    jinja_template *jinja;    /* the model's template (or --chat-template-file's); NULL: none */
    char *chat_template_file, *bos_text, *eos_text;
    chat_jinja_env jinja_env;
    tc_format tool_format;    /* what the template teaches (tc_detect), found once at load */
    bool tool_args_style;     /* mistral: name[ARGS]{...} */
    bool tmpl_think;          /* the template knows <think> blocks: split reasoning out */
    tc_tokens markers;        /* the format's and the reasoning markers that are special tokens of
                                 the vocabulary: kept in chat output where a request reads them
                                 (job.preserve), tokens in forced-call grammars */
    bool reasoning_none;      /* --reasoning-format none */
    int pooling_flag;         /* --pooling: a vt_pooling; -1: the model's (embeddings.c) */
    char *canned;             /* VT_TEST_CANNED_OUTPUT (tests only): every answer's text */
    pthread_t engine_thread;
    bool engine_thread_started;

    pthread_mutex_t mu;
    pthread_cond_t wake;      /* the engine thread waits here */
    pthread_cond_t jobs_cv;   /* signalled when a job is freed */
    int kick;                 /* new work was queued (under mu) */
    bool stop;                /* the engine thread should exit (under mu) */
    job *jobs;                /* live jobs (under mu) */
    int64_t n_jobs;
    atomic_bool hard_stop;    /* blocked readers give up */

    atomic_uint_fast64_t counter; /* request ids and default seeds */
    metrics metrics;
    conns conns;              /* connection admission (conns.h) */
};

double server_now(void);

/* Jobs (server.c). job_create takes ownership of req; refs = 1 (the caller). */
job *job_create(server *s, oai_request *req);
void job_ref(job *j);
void job_unref(job *j);
/* Render/tokenize the prompt(s) and check them against the vocabulary and context:
 * VT_E_INVALID / VT_E_RANGE (400) with a message naming the field or numbers. */
vt_status job_prepare(job *j);
/* Queue the n choices with the engine. On failure nothing stays queued. */
vt_status job_submit(job *j);
/* Abort every running choice (idempotent). */
void job_abort(job *j, bool shutdown);
/* The client went away: abort, and count it in the metrics the first time only. */
void job_abort_by_client(job *j);
/* Wait (job->mu held) until there is an event, every choice finished, or the
 * client hung up / the server stops hard (returns false then). */
bool job_wait_locked(job *j);
/* Drop consumed events (job->mu held). */
void job_clear_events_locked(job *j);

/* HTTP (http.c) */
vt_status http_start(server *s);
void http_quiesce(server *s);
void http_stop(server *s);

/* Completion endpoints (completions.c): handle a complete POST body. */
enum MHD_Result completions_handle(server *s, struct MHD_Connection *conn, oai_kind kind,
                                   const char *body, size_t len, job **job_out, int *status_out);

/* Embedding endpoints (embeddings.c): /v1/embeddings (oai) and /embedding. */
enum MHD_Result embeddings_handle(server *s, struct MHD_Connection *conn, bool oai, const char *body, size_t len,
                                  job **job_out, int *status_out);
/* "none", "mean", "cls", "last" into a vt_pooling; false for another name. */
bool embeddings_pooling_from_name(const char *name, int *out);

/* Queue a JSON response (takes the reference to `body`) with the server's
 * common headers; returns MHD's result. */
enum MHD_Result http_send_json(server *s, struct MHD_Connection *conn, int status, json_t *body);
enum MHD_Result http_send_error(server *s, struct MHD_Connection *conn, int status, const char *code,
                                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void http_add_common_headers(server *s, struct MHD_Connection *conn, struct MHD_Response *r);
/* The connection's inactivity timeout in seconds (0: none), from its own thread. */
void http_set_timeout(struct MHD_Connection *conn, unsigned seconds);

#endif
