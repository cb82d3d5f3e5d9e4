/* vt serve: an OpenAI-compatible HTTP server over the serving engine.
 *
 * Threads: libmicrohttpd runs one thread per connection (handlers may block
 * while their request generates, and a streamed body is produced by blocking
 * in the content reader); one engine thread loads the model, then loops over
 * vt_engine_step and hands outputs to per-request queues (mutex + condvar). It
 * sleeps on a condition variable when the engine is idle, so an idle server
 * uses no CPU. The server listens before the model is loaded: /health answers
 * 503 until it is ready. There is no global state; everything hangs off the
 * server struct. */
#ifndef VT_SERVER_SERVER_H
#define VT_SERVER_SERVER_H

#include "vt.h"

#include <stddef.h>

typedef struct server server;

typedef struct server_params {
    const char *model_path;
    const char *host;          /* address to bind (default 127.0.0.1) */
    int port;                  /* 0: any free port (see server_port) */
    vt_engine_params engine;   /* engine.n_ctx 0: vt_model_n_ctx_default; < 0: that capped at -n_ctx */
    vt_rope_params rope;       /* overrides of the model's rope (vt_model_params.rope; default: none) */
    const char *api_key;       /* NULL: no authentication */
    const char *cors_origins;  /* comma-separated origins or "*"; NULL: no CORS headers */
    const char *chat_template; /* family name to force; NULL: from the model's metadata */
    const char *chat_template_file; /* Jinja template file used instead of the model's */
    const char *reasoning_format; /* "deepseek" (default, NULL): <think> blocks become
                                     reasoning_content; "none": they stay in content */
    const char *alias;         /* model id in responses; NULL: the file's base name */
    const char *pooling;       /* embeddings: none, mean, cls, last; NULL: the model's <arch>.pooling_type */
    size_t max_body_bytes;     /* request bodies above this get 413 (default 8 MiB) */
    int max_connections;       /* open connections, all peers (default 256; conns.h) */
    int max_connections_per_peer; /* open connections of one peer address (default 64; 0: no limit) */
    int read_timeout_s;        /* silence allowed while a request is read (default 10) */
    int body_timeout_s;        /* a request body must be whole this long after its header (default 60) */
    int idle_timeout_s;        /* silence allowed between keep-alive requests (default 5) */
    int threads_hint;          /* unused by the server; kept for the CLI's report */
    bool progress;             /* draw the model's load progress bar on stderr */
    /* Called (from the engine thread) if loading the model fails, so the caller can
     * end the process; NULL: nothing. */
    void (*on_fatal)(void *user);
    void *user;
} server_params;

void server_default_params(server_params *p);
/* One line on stderr: "2026-01-02T03:04:05.678Z vt serve: " and the message
 * (UTC, milliseconds); the server's log lines all look like this. */
void server_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Bind and start listening, then start loading the model in the background.
 * Errors: VT_E_IO when the address cannot be bound (the message names it). */
vt_status server_start(const server_params *p, server **out);
/* The port the server listens on. */
int server_port(const server *s);
/* Graceful stop: refuse new connections, let in-flight requests finish for up to
 * grace_ms, abort the rest, and stop all threads. Then free with server_destroy. */
void server_stop(server *s, int grace_ms);
void server_destroy(server *s);

#endif
