/* HTTP plumbing over libmicrohttpd: connection admission (conns.h) and timeouts,
 * routing, body limits, authentication, CORS, the small endpoints (/health,
 * /metrics, /v1/models, /tokenize, /detokenize) and one log line per request.
 * The completion endpoints are in completions.c.
 *
 * A request is judged on MHD's first callback, when its header is complete and
 * before any body byte is buffered: the request target, the body framing
 * (Transfer-Encoding, Content-Length), the route and method, the API key, the
 * connection's admission class and a declared body size. Anything refused there
 * is answered at once, and MHD drops the body and closes the connection.
 *
 * Timeouts count the client's silence, never the server's work: reading a
 * request (header or body) may pause --read-timeout seconds between bytes, a
 * keep-alive connection may idle --idle-timeout seconds between requests, and
 * while a request generates there is no timeout (a streamed answer gets the
 * read timeout back once generation ends, for the client to read the rest).
 * A body that trickles in, each byte inside the read timeout, is bounded in all
 * by --body-timeout from the end of its header: libmicrohttpd 0.9.75 neither
 * tells a chunk's declared size (a chunk of 2^64-1 bytes fed a byte at a time
 * would otherwise hold its connection for ever) nor lets a response be queued
 * in the middle of an upload, so past that deadline vt writes the answer, a 408
 * with Connection: close, on the socket itself (send_error_on_socket), the
 * request is logged and counted as 408, and MHD closes the connection. */
#include "server/server_impl.h"

#include "base/status.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* /tokenize: the text it tokenizes and the answer it builds, at most (413 past
 * either); /detokenize: the text it builds. */
#define TOKENIZE_MAX_TEXT ((size_t)1 << 20)
#define TOKENIZE_MAX_ANSWER ((size_t)16 << 20)

/* Bytes of an oversized chunked body read and dropped before the connection is cut. */
#define DISCARD_CAP ((uint64_t)64 << 20)

/* Per-connection-request state (MHD's con_cls). */
typedef struct http_req {
    server *srv;
    strbuf body;
    bool started;     /* the first callback (complete header) has been seen */
    double t_header;  /* server_now() at that callback: the body's deadline counts from here */
    bool bad_target;  /* the request target holds a NUL byte (raw or %00) */
    const char *raw_uri; /* the raw target in MHD's line buffer, for the NUL check */
    size_t raw_uri_len;
    int route;        /* route_id of a request whose body is being read */
    bool too_large;
    uint64_t seen; /* body bytes received, kept or not */
    bool answered;
    int status;
    double t0;
    char method[16];
    char path[128];
    job *job; /* a completion request's job (a reference), for the log line */
} http_req;

/* The connection's admission record (conns.h), or NULL (out of memory at accept). */
static conn_ctx *ctx_of(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? (conn_ctx *)ci->socket_context : NULL;
}

void http_set_timeout(struct MHD_Connection *conn, unsigned seconds) {
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, seconds);
}

/* The request's Origin when --cors-origins allows it, else NULL. */
static const char *allowed_origin(server *s, struct MHD_Connection *conn) {
    if (!s->cors_origins) return NULL;
    const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
    if (!origin) return NULL;
    bool ok = !strcmp(s->cors_origins, "*");
    size_t ol = strlen(origin);
    for (const char *p = s->cors_origins; !ok && *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        while (n && *p == ' ') p++, n--;
        while (n && p[n - 1] == ' ') n--;
        if (n == ol && !memcmp(p, origin, n)) ok = true;
        if (!e) break;
        p = e + 1;
    }
    return ok ? origin : NULL;
}

void http_add_common_headers(server *s, struct MHD_Connection *conn, struct MHD_Response *r) {
    const char *origin = allowed_origin(s, conn);
    if (!origin) return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", !strcmp(s->cors_origins, "*") ? "*" : origin);
    MHD_add_response_header(r, "Vary", "Origin");
}

enum MHD_Result http_send_json(server *s, struct MHD_Connection *conn, int status, json_t *body) {
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (body) json_decref(body);
    if (!text) text = strdup("{}");
    size_t n = text ? strlen(text) : 0;
    struct MHD_Response *r = MHD_create_response_from_buffer(n, text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json; charset=utf-8");
    http_add_common_headers(s, conn, r);
    conn_ctx *cx = ctx_of(conn);
    if (cx && cx->close_after) MHD_add_response_header(r, "Connection", "close");
    enum MHD_Result res = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return res;
}

enum MHD_Result http_send_error(server *s, struct MHD_Connection *conn, int status, const char *code,
                                const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    conn_ctx *cx = ctx_of(conn);
    if (cx) { /* the log line's reason, cut to fit */
        size_t n = strnlen(msg, sizeof cx->reason - 1);
        memcpy(cx->reason, msg, n);
        cx->reason[n] = 0;
    }
    return http_send_json(s, conn, status, oai_error_json(status, NULL, code, msg));
}

/* Set by send_error_on_socket on the connection's thread (a thread per
 * connection): the MHD_NO that follows makes MHD log "Application reported
 * internal error, closing connection", which this close is not; mhd_log drops
 * that one line (vt's own log line gives the status and the reason). */
static _Thread_local bool answered_on_socket;

/* http_send_error for a request MHD will not let us answer: one in the middle
 * of its body (see the top). The response is written on the socket itself:
 * the status line, the headers http_send_json would give it (CORS for an
 * allowed origin), Connection: close, and the JSON error. Nothing else can be
 * on the wire before it: MHD writes no byte of a request's answer before one
 * is queued, and an interim "100 Continue" (Expect: 100-continue) it sends in
 * full before it hands over the first body byte, in this same thread (one per
 * connection); a final status after a 100 is valid HTTP/1.1. The caller must
 * then return MHD_NO, so MHD closes the connection without writing: a send
 * that would block or a short write (a client that does not read) is left
 * short, as the connection ends anyway. Plain connections only: the daemon
 * does not speak TLS (no MHD_USE_TLS), where these bytes would bypass it. */
static void send_error_on_socket(server *s, struct MHD_Connection *conn, int status, const char *phrase,
                                 const char *msg) {
    answered_on_socket = true;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return;
    json_t *body = oai_error_json(status, NULL, NULL, msg);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text) return;
    char date[64] = "";
    const time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    const char *origin = allowed_origin(s, conn);
    strbuf sb = {0};
    sb_printf(&sb, "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\n"
                   "Content-Length: %zu\r\n", status, phrase, strlen(text));
    if (date[0]) sb_printf(&sb, "Date: %s\r\n", date);
    if (origin)
        sb_printf(&sb, "Access-Control-Allow-Origin: %s\r\nVary: Origin\r\n",
                  !strcmp(s->cors_origins, "*") ? "*" : origin);
    sb_printf(&sb, "\r\n%s", text);
    free(text);
    if (!sb.failed && sb.len) (void)send(ci->connect_fd, sb.ptr, sb.len, MSG_NOSIGNAL | MSG_DONTWAIT);
    sb_free(&sb);
}

static enum MHD_Result send_text(server *s, struct MHD_Connection *conn, int status, const char *type,
                                 strbuf *sb) {
    struct MHD_Response *r = MHD_create_response_from_buffer(sb->len, sb->ptr ? sb->ptr : "",
                                                             sb->ptr ? MHD_RESPMEM_MUST_FREE
                                                                     : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        sb_free(sb);
        return MHD_NO;
    }
    memset(sb, 0, sizeof *sb); /* MHD owns the bytes now */
    MHD_add_response_header(r, "Content-Type", type);
    http_add_common_headers(s, conn, r);
    enum MHD_Result res = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return res;
}

/* Constant-time comparison of the bearer token, so timing does not leak the key. */
static bool key_ok(const server *s, struct MHD_Connection *conn) {
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7)) return false;
    h += 7;
    while (*h == ' ') h++;
    size_t a = strlen(h), b = strlen(s->api_key);
    unsigned diff = (unsigned)(a ^ b);
    for (size_t i = 0; i < b; i++) diff |= (unsigned char)(i < a ? h[i] : 0) ^ (unsigned char)s->api_key[i];
    return diff == 0;
}

static enum MHD_Result send_loading(server *s, struct MHD_Connection *conn) {
    int st = atomic_load(&s->state);
    if (st == SERVER_FAILED) return http_send_error(s, conn, 503, NULL, "the model failed to load");
    if (st == SERVER_STOPPING) return http_send_error(s, conn, 503, NULL, "the server is shutting down");
    return http_send_error(s, conn, 503, NULL, "Loading model");
}

static enum MHD_Result handle_health(server *s, struct MHD_Connection *conn, int *status) {
    if (atomic_load(&s->state) != SERVER_READY) {
        *status = 503;
        return send_loading(s, conn);
    }
    *status = 200;
    json_t *o = json_object();
    json_object_set_new(o, "status", json_string("ok"));
    return http_send_json(s, conn, 200, o);
}

static enum MHD_Result handle_metrics(server *s, struct MHD_Connection *conn, int *status) {
    strbuf sb = {0};
    vt_engine_stats st;
    bool ready = atomic_load(&s->state) == SERVER_READY;
    if (ready) vt_engine_stats_get(s->engine, &st);
    metrics_render(&s->metrics, ready ? &st : NULL, atomic_load(&s->state) == SERVER_LOADING, &sb);
    int64_t open;
    uint64_t refused_per_peer, refused_full, evicted;
    conns_stats(&s->conns, &open, &refused_per_peer, &refused_full, &evicted);
    metrics_render_conns(&sb, open, refused_per_peer, refused_full, evicted);
    *status = 200;
    return send_text(s, conn, 200, "text/plain; version=0.0.4; charset=utf-8", &sb);
}

static enum MHD_Result handle_models(server *s, struct MHD_Connection *conn, int *status) {
    if (atomic_load(&s->state) != SERVER_READY) {
        *status = 503;
        return send_loading(s, conn);
    }
    json_t *m = json_object();
    json_object_set_new(m, "id", oai_json_string_lossy(s->model_id, strlen(s->model_id)));
    json_object_set_new(m, "object", json_string("model"));
    json_object_set_new(m, "created", json_integer(s->started));
    json_object_set_new(m, "owned_by", json_string("vt"));
    json_t *meta = json_object();
    json_object_set_new(meta, "n_vocab", json_integer(vt_model_n_vocab(s->model)));
    json_object_set_new(meta, "n_ctx_train", json_integer(vt_model_n_ctx_train(s->model)));
    json_object_set_new(meta, "n_ctx", json_integer(s->n_ctx));
    json_object_set_new(meta, "n_ctx_max", json_integer(vt_model_n_ctx_max(s->model)));
    json_object_set_new(meta, "size", json_integer((json_int_t)vt_model_weight_bytes(s->model)));
    json_object_set_new(meta, "desc", oai_json_string_lossy(vt_model_desc(s->model), strlen(vt_model_desc(s->model))));
    json_object_set_new(meta, "chat_template", json_string(chat_template_name(s->tmpl)));
    json_object_set_new(m, "meta", meta);
    json_t *data = json_array();
    json_array_append_new(data, m);
    json_t *o = json_object();
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", data);
    *status = 200;
    return http_send_json(s, conn, 200, o);
}

/* GET /props, llama-server's shape where vt has the field: the context of each
 * sequence (default_generation_settings.n_ctx, and n_ctx), the slots, the model's
 * path and alias, the chat template's name; and vt's n_ctx_train and n_ctx_max
 * (the largest context the model allows with its rope scaling, the file's or
 * --rope-*'s: what -c may be). */
static enum MHD_Result handle_props(server *s, struct MHD_Connection *conn, int *status) {
    if (atomic_load(&s->state) != SERVER_READY) {
        *status = 503;
        return send_loading(s, conn);
    }
    json_t *gen = json_object();
    json_object_set_new(gen, "n_ctx", json_integer(s->n_ctx));
    json_t *o = json_object();
    json_object_set_new(o, "default_generation_settings", gen);
    json_object_set_new(o, "total_slots", json_integer(s->params.engine.max_seqs));
    json_object_set_new(o, "model_alias", oai_json_string_lossy(s->model_id, strlen(s->model_id)));
    json_object_set_new(o, "model_path", oai_json_string_lossy(s->model_path, strlen(s->model_path)));
    json_object_set_new(o, "chat_template", json_string(chat_template_name(s->tmpl)));
    json_object_set_new(o, "n_ctx", json_integer(s->n_ctx));
    json_object_set_new(o, "n_ctx_train", json_integer(vt_model_n_ctx_train(s->model)));
    json_object_set_new(o, "n_ctx_max", json_integer(vt_model_n_ctx_max(s->model)));
    *status = 200;
    return http_send_json(s, conn, 200, o);
}

static json_t *parse_object(server *s, struct MHD_Connection *conn, const char *body, size_t len,
                            int *status, enum MHD_Result *res) {
    vt_status cst = oai_json_cost(body, len, NULL);
    if (cst != VT_OK) {
        *status = cst == VT_E_RANGE ? 413 : 400;
        *res = http_send_error(s, conn, *status, NULL, "%s", vt_last_error());
        return NULL;
    }
    json_error_t jerr;
    json_t *root = json_loadb(body, len, 0, &jerr);
    if (!root || !json_is_object(root)) {
        *status = 400;
        if (root) {
            json_decref(root);
            *res = http_send_error(s, conn, 400, NULL, "request body: expected a JSON object");
        } else {
            *res = http_send_error(s, conn, 400, NULL, "request body is not valid JSON: %s at line %d column %d",
                                   jerr.text, jerr.line, jerr.column);
        }
        return NULL;
    }
    return root;
}

static enum MHD_Result handle_tokenize(server *s, struct MHD_Connection *conn, const char *body, size_t len,
                                       int *status) {
    enum MHD_Result res = MHD_NO;
    json_t *root = parse_object(s, conn, body, len, status, &res);
    if (!root) return res;
    json_t *c = json_object_get(root, "content");
    json_t *as = json_object_get(root, "add_special");
    json_t *ps = json_object_get(root, "parse_special");
    json_t *wp = json_object_get(root, "with_pieces");
    if (!json_is_string(c)) {
        json_decref(root);
        *status = 400;
        return http_send_error(s, conn, 400, NULL, "field 'content': expected a string");
    }
    if ((as && !json_is_boolean(as)) || (ps && !json_is_boolean(ps)) || (wp && !json_is_boolean(wp))) {
        json_decref(root);
        *status = 400;
        return http_send_error(s, conn, 400, NULL,
                               "fields 'add_special', 'parse_special', 'with_pieces': expected booleans");
    }
    if (json_string_length(c) > TOKENIZE_MAX_TEXT) {
        size_t n = json_string_length(c);
        json_decref(root);
        *status = 413;
        return http_send_error(s, conn, 413, NULL, "field 'content': %zu bytes, more than /tokenize takes (%zu)", n,
                               TOKENIZE_MAX_TEXT);
    }
    int32_t *ids = NULL;
    int64_t n = 0;
    vt_status st = vt_tokenize(s->model, json_string_value(c), json_string_length(c), as && json_is_true(as),
                               !ps || json_is_true(ps), &ids, &n);
    bool pieces = wp && json_is_true(wp);
    json_decref(root);
    if (st != VT_OK) {
        *status = 400;
        return http_send_error(s, conn, 400, NULL, "content: %s", vt_last_error());
    }
    /* The answer is written as text, not built as a JSON tree (a value per token
     * would cost hundreds of bytes each), and stops at TOKENIZE_MAX_ANSWER. */
    strbuf sb = {0};
    sb_add(&sb, "{\"tokens\":[");
    char piece[256];
    for (int64_t i = 0; i < n && !sb.failed && sb.len <= TOKENIZE_MAX_ANSWER; i++) {
        if (i) sb_add(&sb, ",");
        if (!pieces) {
            sb_printf(&sb, "%d", ids[i]);
            continue;
        }
        int64_t k = vt_token_piece(s->model, ids[i], piece, sizeof piece);
        if (k < 0) k = 0;
        if (k > (int64_t)sizeof piece) k = sizeof piece;
        json_t *str = oai_json_string_lossy(piece, (size_t)k);
        char *t = json_dumps(str, JSON_ENCODE_ANY);
        json_decref(str);
        sb_printf(&sb, "{\"id\":%d,\"piece\":%s}", ids[i], t ? t : "\"\"");
        free(t);
    }
    free(ids);
    sb_add(&sb, "]}");
    if (sb.failed || sb.len > TOKENIZE_MAX_ANSWER) {
        sb_free(&sb);
        *status = 413;
        return http_send_error(s, conn, 413, NULL,
                               "the answer (%lld tokens%s) would be larger than %zu MiB; tokenize less at once",
                               (long long)n, pieces ? " with pieces" : "", TOKENIZE_MAX_ANSWER >> 20);
    }
    *status = 200;
    return send_text(s, conn, 200, "application/json; charset=utf-8", &sb);
}

static enum MHD_Result handle_detokenize(server *s, struct MHD_Connection *conn, const char *body, size_t len,
                                         int *status) {
    enum MHD_Result res = MHD_NO;
    json_t *root = parse_object(s, conn, body, len, status, &res);
    if (!root) return res;
    json_t *t = json_object_get(root, "tokens");
    if (!json_is_array(t)) {
        json_decref(root);
        *status = 400;
        return http_send_error(s, conn, 400, NULL, "field 'tokens': expected an array of token ids");
    }
    int32_t n_vocab = vt_model_n_vocab(s->model);
    strbuf sb = {0};
    char piece[256];
    for (size_t i = 0; i < json_array_size(t); i++) {
        json_t *e = json_array_get(t, i);
        json_int_t id = json_is_integer(e) ? json_integer_value(e) : -1;
        if (id < 0 || id >= n_vocab) {
            sb_free(&sb);
            json_decref(root);
            *status = 400;
            return http_send_error(s, conn, 400, NULL,
                                   "field 'tokens[%zu]': expected a token id in [0, %d)", i, n_vocab);
        }
        int64_t k = vt_token_piece(s->model, (int32_t)id, piece, sizeof piece);
        if (k > (int64_t)sizeof piece) {
            char *big = malloc((size_t)k);
            if (big && vt_token_piece(s->model, (int32_t)id, big, (size_t)k) == k) sb_addn(&sb, big, (size_t)k);
            free(big);
        } else if (k > 0) {
            sb_addn(&sb, piece, (size_t)k);
        }
        if (sb.failed || sb.len > TOKENIZE_MAX_ANSWER) {
            size_t n = json_array_size(t);
            sb_free(&sb);
            json_decref(root);
            *status = 413;
            return http_send_error(s, conn, 413, NULL,
                                   "the text of %zu tokens would be larger than %zu MiB; detokenize less at once", n,
                                   TOKENIZE_MAX_ANSWER >> 20);
        }
    }
    json_decref(root);
    json_t *o = json_object();
    json_object_set_new(o, "content", oai_json_string_lossy(sb.ptr ? sb.ptr : "", sb.len));
    sb_free(&sb);
    *status = 200;
    return http_send_json(s, conn, 200, o);
}

static enum MHD_Result handle_options(server *s, struct MHD_Connection *conn, int *status) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    http_add_common_headers(s, conn, r);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    /* An allowed origin may send whatever headers it asks for (the openai SDK
     * sends x-stainless-*): the list is echoed when it is a plain list of header
     * names; the key is still checked on the request itself. */
    const char *want = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Access-Control-Request-Headers");
    bool plain = want && *want && strlen(want) <= 1024;
    for (const char *p = want; plain && *p; p++) {
        plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                strchr("-_., ", *p);
    }
    if (plain && allowed_origin(s, conn)) {
        char list[1100];
        snprintf(list, sizeof list, "Authorization, Content-Type, %s", want);
        MHD_add_response_header(r, "Access-Control-Allow-Headers", list);
    } else {
        MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
    }
    MHD_add_response_header(r, "Access-Control-Max-Age", "86400");
    *status = 204;
    enum MHD_Result res = MHD_queue_response(conn, 204, r);
    MHD_destroy_response(r);
    return res;
}

typedef enum route_id {
    ROUTE_NONE,
    ROUTE_HEALTH,
    ROUTE_METRICS,
    ROUTE_MODELS,
    ROUTE_PROPS,
    ROUTE_COMPLETIONS,
    ROUTE_CHAT,
    ROUTE_TOKENIZE,
    ROUTE_DETOKENIZE,
    ROUTE_EMBEDDINGS,
    ROUTE_EMBEDDING,
} route_id;

static const struct {
    const char *path;
    const char *method;
    route_id id;
} routes[] = {
    {"/health", "GET", ROUTE_HEALTH},
    {"/v1/health", "GET", ROUTE_HEALTH},
    {"/metrics", "GET", ROUTE_METRICS},
    {"/v1/models", "GET", ROUTE_MODELS},
    {"/models", "GET", ROUTE_MODELS},
    {"/props", "GET", ROUTE_PROPS},
    {"/v1/completions", "POST", ROUTE_COMPLETIONS},
    {"/completions", "POST", ROUTE_COMPLETIONS},
    {"/v1/chat/completions", "POST", ROUTE_CHAT},
    {"/chat/completions", "POST", ROUTE_CHAT},
    {"/tokenize", "POST", ROUTE_TOKENIZE},
    {"/detokenize", "POST", ROUTE_DETOKENIZE},
    {"/v1/embeddings", "POST", ROUTE_EMBEDDINGS},
    {"/embeddings", "POST", ROUTE_EMBEDDINGS},
    {"/embedding", "POST", ROUTE_EMBEDDING},
};

/* The body framing headers, gathered on the first callback. */
typedef struct framing {
    int n_length;             /* Content-Length headers */
    bool length_bad;          /* one is not a decimal number, or two differ */
    unsigned long long length;
    const char *te;           /* the (last) Transfer-Encoding value */
    int n_te;
} framing;

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    framing *f = cls;
    if (!key || !value) return MHD_YES;
    if (!strcasecmp(key, "Content-Length")) {
        /* a list ("5, 5") counts as one value per element */
        for (const char *p = value;;) {
            while (*p == ' ' || *p == '\t') p++;
            char *end;
            errno = 0;
            unsigned long long v = strtoull(p, &end, 10);
            if (end == p || errno || *p == '-' || *p == '+') {
                f->length_bad = true;
                break;
            }
            if (f->n_length++ && v != f->length) f->length_bad = true;
            f->length = v;
            p = end;
            while (*p == ' ' || *p == '\t') p++;
            if (*p == 0) break;
            if (*p != ',') {
                f->length_bad = true;
                break;
            }
            p++;
        }
    } else if (!strcasecmp(key, "Transfer-Encoding")) {
        f->te = value;
        f->n_te++;
    }
    return MHD_YES;
}

static bool te_is_chunked(const char *v) {
    while (*v == ' ' || *v == '\t') v++;
    size_t n = strlen(v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
    return n == 7 && !strncasecmp(v, "chunked", 7);
}

/* Answer at once; a request with a body (never read) or unknown framing ends the connection. */
#define REFUSE(code, errcode, ...)                                             \
    do {                                                                       \
        if (cx) cx->close_after = framing_bad || has_body;                     \
        h->status = (code);                                                    \
        h->answered = true;                                                    \
        return http_send_error(s, conn, (code), (errcode), __VA_ARGS__);       \
    } while (0)

/* The first callback: the header is complete, no body byte is buffered yet. */
static enum MHD_Result first_call(http_req *h, struct MHD_Connection *conn, const char *url, const char *method) {
    server *s = h->srv;
    conn_ctx *cx = ctx_of(conn);
    framing f = {0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, framing_header, &f);
    bool has_body = f.n_te || (f.n_length && f.length > 0);
    bool framing_bad = (f.n_te && (f.n_te > 1 || !te_is_chunked(f.te) || f.n_length)) || f.length_bad;
    if (h->bad_target) REFUSE(400, NULL, "the request target contains a NUL byte");
    if (f.n_te) {
        if (f.n_te > 1 || !te_is_chunked(f.te)) {
            REFUSE(501, NULL, "Transfer-Encoding '%.60s' is not supported (only chunked)", f.te ? f.te : "");
        }
        if (f.n_length) REFUSE(400, NULL, "both Transfer-Encoding and Content-Length are given");
    }
    if (f.length_bad) REFUSE(400, NULL, "Content-Length: two different values, or not a number");

    route_id id = ROUTE_NONE;
    const char *want = NULL;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (strcmp(url, routes[i].path)) continue;
        want = routes[i].method;
        if (!strcmp(method, routes[i].method) || (!strcmp(method, "HEAD") && !strcmp(want, "GET"))) {
            id = routes[i].id;
        }
        break;
    }
    if (!want) REFUSE(404, NULL, "no endpoint %s %.100s", method, url);
    if (!strcmp(method, "OPTIONS")) {
        if (has_body && cx) cx->close_after = true;
        h->answered = true;
        return handle_options(s, conn, &h->status);
    }
    if (id == ROUTE_NONE) REFUSE(405, NULL, "%.100s takes %s, not %s", url, want, method);
    bool keyed = s->api_key && key_ok(s, conn);
    if (id != ROUTE_HEALTH && s->api_key && !keyed) {
        REFUSE(401, "invalid_api_key", "invalid or missing API key (send Authorization: Bearer KEY)");
    }
    if (cx && (keyed || !s->api_key)) conns_set_authenticated(&s->conns, cx);
    if (cx && cx->reserved && id != ROUTE_HEALTH && id != ROUTE_METRICS && !keyed) {
        REFUSE(503, NULL, "too many connections (this one may only ask for /health and /metrics%s)",
               s->api_key ? " or send the API key" : "");
    }
    if (f.n_length && f.length > s->params.max_body_bytes) {
        h->too_large = true;
        REFUSE(413, NULL, "request body larger than %zu bytes", s->params.max_body_bytes);
    }
    if (has_body && cx)
        cx->close_after = id == ROUTE_HEALTH || id == ROUTE_METRICS || id == ROUTE_MODELS || id == ROUTE_PROPS;
    h->answered = true;
    switch (id) {
    case ROUTE_HEALTH: return handle_health(s, conn, &h->status);
    case ROUTE_METRICS: return handle_metrics(s, conn, &h->status);
    case ROUTE_MODELS: return handle_models(s, conn, &h->status);
    case ROUTE_PROPS: return handle_props(s, conn, &h->status);
    default: break;
    }
    if (atomic_load(&s->state) != SERVER_READY) {
        if (has_body && cx) cx->close_after = true;
        h->status = 503;
        return send_loading(s, conn);
    }
    h->answered = false;
    h->route = id; /* read the body, answer on the last callback */
    return MHD_YES;
}
#undef REFUSE

/* The last callback: the whole body is in h->body. */
static enum MHD_Result dispatch_body(http_req *h, struct MHD_Connection *conn) {
    server *s = h->srv;
    if (h->too_large) {
        h->status = 413;
        return http_send_error(s, conn, 413, NULL, "request body larger than %zu bytes", s->params.max_body_bytes);
    }
    const char *body = h->body.ptr ? h->body.ptr : "";
    switch ((route_id)h->route) {
    case ROUTE_TOKENIZE: return handle_tokenize(s, conn, body, h->body.len, &h->status);
    case ROUTE_DETOKENIZE: return handle_detokenize(s, conn, body, h->body.len, &h->status);
    case ROUTE_EMBEDDINGS:
    case ROUTE_EMBEDDING: {
        http_set_timeout(conn, 0); /* evaluating: the client's silence is no timeout */
        enum MHD_Result r = embeddings_handle(s, conn, h->route == ROUTE_EMBEDDINGS, body, h->body.len, &h->job,
                                              &h->status);
        http_set_timeout(conn, (unsigned)s->params.read_timeout_s);
        return r;
    }
    case ROUTE_COMPLETIONS:
    case ROUTE_CHAT: {
        http_set_timeout(conn, 0); /* generating: the client's silence is no timeout */
        enum MHD_Result r = completions_handle(s, conn, h->route == ROUTE_CHAT ? OAI_CHAT : OAI_COMPLETION, body,
                                               h->body.len, &h->job, &h->status);
        if (!h->job || !h->job->req.stream) http_set_timeout(conn, (unsigned)s->params.read_timeout_s);
        return r;
    }
    default: break;
    }
    h->status = 500;
    return http_send_error(s, conn, 500, NULL, "unrouted endpoint");
}

/* The target of an absolute-form request line (http://host/path, RFC 9112 3.2.2)
 * is its path; the authority is not checked (one server, any name). */
static const char *origin_form(const char *url) {
    const char *p = NULL;
    if (!strncasecmp(url, "http://", 7)) p = url + 7;
    else if (!strncasecmp(url, "https://", 8)) p = url + 8;
    if (!p) return url;
    const char *slash = strchr(p, '/');
    return slash ? slash : "/";
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                 const char *version, const char *upload_data, size_t *upload_size,
                                 void **con_cls) {
    server *s = cls;
    http_req *h = *con_cls;
    if (!h) {
        h = calloc(1, sizeof *h);
        if (!h) return MHD_NO;
        h->srv = s;
        h->t0 = server_now();
        *con_cls = h;
    }
    if (!h->started) {
        h->started = true;
        h->t_header = server_now();
        /* libmicrohttpd parses the request line in place: the raw target ends
         * one byte before the HTTP version, and a NUL byte inside the target cut
         * the string it hands over short of that. (Checked only where the version
         * lies just past the target, as it does in the line buffer.) */
        uintptr_t v = (uintptr_t)version, u = (uintptr_t)h->raw_uri;
        if (h->raw_uri && version && v > u && v - u <= 65536 && v != u + h->raw_uri_len + 1) h->bad_target = true;
        url = origin_form(url);
        snprintf(h->method, sizeof h->method, "%s", method);
        snprintf(h->path, sizeof h->path, "%s", url);
        conn_ctx *cx = ctx_of(conn);
        if (cx) {
            cx->close_after = false;
            cx->reason[0] = 0;
            conns_set_busy(&s->conns, cx, true);
        }
        return first_call(h, conn, url, method);
    }
    if (*upload_size) {
        if (server_now() - h->t_header > (double)s->params.body_timeout_s) {
            /* still uploading past --body-timeout: a trickle (see the top) */
            char msg[160];
            snprintf(msg, sizeof msg, "the body was not whole %d s after the header (--body-timeout); %llu bytes came",
                     s->params.body_timeout_s, (unsigned long long)h->seen);
            conn_ctx *cx = ctx_of(conn);
            if (cx) snprintf(cx->reason, sizeof cx->reason, "%s", msg);
            h->status = 408;
            send_error_on_socket(s, conn, 408, "Request Timeout", msg);
            return MHD_NO; /* MHD closes the connection */
        }
        /* MHD cannot queue a response in the middle of an upload, so a chunked body
         * past the limit is read and dropped (memory stays bounded) and answered
         * 413 when it ends. Past a hard cap the 413 goes on the socket itself
         * and the connection is closed: answering at the limit instead would
         * close with the client's bytes unread, whose reset can destroy the
         * answer before the client reads it. */
        h->seen += *upload_size;
        if (!h->too_large && !h->answered) {
            if (h->body.len + *upload_size > s->params.max_body_bytes) {
                h->too_large = true;
                sb_free(&h->body);
            } else {
                sb_addn(&h->body, upload_data, *upload_size);
                if (h->body.failed) h->too_large = true;
            }
        }
        *upload_size = 0;
        if (h->too_large && h->seen > s->params.max_body_bytes + DISCARD_CAP) {
            char msg[160];
            snprintf(msg, sizeof msg, "request body larger than %zu bytes (%llu came, and more was coming)",
                     s->params.max_body_bytes, (unsigned long long)h->seen);
            conn_ctx *cx = ctx_of(conn);
            if (cx) snprintf(cx->reason, sizeof cx->reason, "%s", msg);
            h->status = 413;
            send_error_on_socket(s, conn, 413, "Content Too Large", msg);
            return MHD_NO; /* MHD closes the connection */
        }
        return MHD_YES;
    }
    if (h->answered) return MHD_YES;
    h->answered = true;
    return dispatch_body(h, conn);
}

/* MHD's URI log callback runs when the request line is parsed, before the
 * target is split at '?' and unescaped: the raw target is still whole here. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
    (void)conn;
    http_req *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->srv = cls;
    h->t0 = server_now();
    h->raw_uri = uri;
    h->raw_uri_len = strlen(uri);
    for (const char *p = uri; (p = strchr(p, '%')); p++) {
        if (p[1] == '0' && p[2] == '0') h->bad_target = true; /* %00 */
    }
    return h;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    server *s = cls;
    http_req *h = *con_cls;
    conn_ctx *cx = ctx_of(conn);
    if (cx) {
        conns_set_busy(&s->conns, cx, false);
        http_set_timeout(conn, (unsigned)s->params.idle_timeout_s); /* keep-alive idle */
    }
    if (!h) return;
    *con_cls = NULL;
    if (!h->started) { /* the connection ended inside the header: nothing to log */
        sb_free(&h->body);
        free(h);
        return;
    }
    int32_t n_prompt = 0, n_gen = 0;
    if (h->job) {
        job *j = h->job;
        pthread_mutex_lock(&j->mu);
        n_prompt = (int32_t)j->n_prompt;
        for (int32_t i = 0; i < j->n_choices; i++) n_gen += j->choices[i].n_generated;
        bool unfinished = j->n_finished < j->n_choices;
        pthread_mutex_unlock(&j->mu);
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && unfinished) job_abort_by_client(j);
        job_unref(j);
    }
    const char *why = cx && cx->reason[0] ? cx->reason : NULL;
    int status = h->status;
    if (!status) {
        /* never answered: the client went away while sending the request */
        status = 499;
        why = toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? "the client was silent past the read timeout"
                                                             : "the client closed the connection mid-request";
    }
    metrics_count_status(&s->metrics, status);
    const char *early = "";
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && h->status) early = " (connection closed early)";
    server_log("%s %s %d prompt=%d completion=%d %.1f ms%s%s%s", h->method, h->path, status, n_prompt, n_gen,
               (server_now() - h->t0) * 1e3, early, status >= 400 && why ? ": " : "",
               status >= 400 && why ? why : "");
    sb_free(&h->body);
    free(h);
}

static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len) {
    server *s = cls;
    return conns_admit(&s->conns, addr, len) ? MHD_YES : MHD_NO;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ad = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *sa = ad ? ad->client_addr : NULL;
        socklen_t len = !sa ? 0 : sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
        *socket_context = fd ? conns_add(&s->conns, fd->connect_fd, sa, len) : NULL;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        conns_remove(&s->conns, *socket_context);
        *socket_context = NULL;
    }
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    size_t n = strlen(buf);
    while (n && buf[n - 1] == '\n') buf[--n] = 0;
    if (answered_on_socket && strstr(buf, "Application reported internal error")) {
        answered_on_socket = false;
        return;
    }
    server_log("http: %s", buf);
}

vt_status http_start(server *s) {
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG | MHD_USE_POLL;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    if (s->params.port < 0 || s->params.port > 65535) {
        return vt_errorf(VT_E_INVALID, "vt serve: port %d is not in [0, 65535]", s->params.port);
    }
    const char *host = !strcmp(s->host, "localhost") ? "127.0.0.1" : s->host;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)s->params.port);
        len = sizeof *a4;
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)s->params.port);
        len = sizeof *a6;
        flags |= MHD_USE_IPv6;
    } else {
        return vt_errorf(VT_E_INVALID, "vt serve: --host '%s' is not localhost or a numeric IPv4 or IPv6 address",
                         s->host);
    }
    (void)len;
    /* MHD's own limit leaves room for the reserved connections and for evicted
     * ones whose threads are still closing; conns.c enforces the real limits. */
    unsigned hard_limit = (unsigned)s->params.max_connections + CONNS_RESERVED + 64;
    s->daemon = MHD_start_daemon(flags, (uint16_t)s->params.port, on_accept, s, on_access, s,
                                 MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                                 MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                                 MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                 MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                                 MHD_OPTION_CONNECTION_LIMIT, hard_limit,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->params.read_timeout_s,
                                 MHD_OPTION_END);
    if (!s->daemon) {
        return vt_errorf(VT_E_IO, "vt serve: cannot listen on %s port %d (in use, or not an address of this host)",
                         s->host, s->params.port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : s->params.port;
    server_log("listening on http://%s%s%s:%d", strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "",
               s->port);
    return VT_OK;
}

void http_quiesce(server *s) {
    if (!s->daemon) return;
    MHD_socket fd = MHD_quiesce_daemon(s->daemon);
    if (fd != MHD_INVALID_SOCKET) close(fd);
}

void http_stop(server *s) {
    if (!s->daemon) return;
    MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
}
