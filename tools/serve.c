/* vt serve: the OpenAI-compatible HTTP server (src/server/). This file parses
 * the options, starts the server, and waits for SIGINT/SIGTERM to stop it. */
#include "cmds.h"
#include "opts.h"
#include "rope_opts.h"
#include "server/server.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static bool parse_kv_type(const char *opt, const char *s, void *dst) {
    vt_kv_type *out = dst;
    static const struct {
        const char *name;
        vt_kv_type t;
    } types[] = {{"f16", VT_KV_F16}, {"bf16", VT_KV_BF16}, {"f32", VT_KV_F32}, {"q8_0", VT_KV_Q8_0}};
    for (size_t i = 0; s && i < sizeof types / sizeof types[0]; i++) {
        if (!strcmp(s, types[i].name)) {
            *out = types[i].t;
            return true;
        }
    }
    fprintf(stderr, "vt: %s: unknown KV cache type '%s' (f16, bf16, f32, q8_0)\n", opt, s ? s : "");
    return false;
}

/* The engine thread calls this when the model fails to load: wake main's sigwait. */
static void on_fatal(void *user) { pthread_kill(*(pthread_t *)user, SIGUSR1); }

int cmd_serve(int argc, char **argv) {
    server_params p;
    server_default_params(&p);
    long long grace_ms = 5000, port = p.port, n_threads = p.engine.n_threads, n_ctx = p.engine.n_ctx,
              max_seqs = p.engine.max_seqs, batch = p.engine.max_batch_tokens, ubatch = batch,
              kv_tokens = p.engine.kv_tokens, max_queue = p.engine.max_queue, max_body = (long long)p.max_body_bytes,
              max_conns = p.max_connections, max_conns_peer = p.max_connections_per_peer,
              read_timeout = p.read_timeout_s, body_timeout = p.body_timeout_s, idle_timeout = p.idle_timeout_s,
              state_snapshots = p.engine.state_snapshots, state_interval = p.engine.state_snapshot_interval;
    bool no_prefix_cache = false;
    enum { ROW_CTX = 4, ROW_BATCH = 6, ROW_UBATCH = 7 };
    static const char *const on_off[] = {"on", "off", "auto", "true", "false", "1", "0", "yes", "no", NULL};
    const opt table[] = {
        {.name = {"-m", "--model"}, .kind = OPT_STR, .dst = &p.model_path, .arg = "FILE", .help = "GGUF model"},
        {.name = {"--host"}, .kind = OPT_STR, .dst = &p.host, .arg = "ADDR",
         .help = "localhost or a numeric address to bind\n(default 127.0.0.1: loopback only)"},
        {.name = {"--port"}, .kind = OPT_INT, .dst = &port, .arg = "N", .lo = 0, .hi = 65535,
         .help = "TCP port (default 8080; 0: any free port, printed on stderr)"},
        {.name = {"-t", "--threads"}, .kind = OPT_INT, .dst = &n_threads, .arg = "N", .lo = 0, .hi = 1024,
         .help = "compute threads (default: the physical cores this process may use)"},
        [ROW_CTX] = {.name = {"-c", "--ctx-size"}, .kind = OPT_INT, .dst = &n_ctx, .arg = "N", .lo = 0, .hi = 1 << 24,
                     .help = "tokens per sequence (default: min(training context, 4096);\n"
                             "0: the training context; with --rope-scale or --yarn-orig-ctx,\n"
                             "the context they reach)"},
        {.name = {"-np", "--parallel"}, .kind = OPT_INT, .dst = &max_seqs, .arg = "N", .lo = 1, .hi = 4096,
         .help = "sequences decoded at once (default 16)"},
        [ROW_BATCH] = {.name = {"-b", "--batch-size"}, .kind = OPT_INT, .dst = &batch, .arg = "N", .lo = 1,
                       .hi = 1 << 20, .help = "token budget of one engine step (default 512)"},
        [ROW_UBATCH] = {.name = {"-ub", "--ubatch-size"}, .kind = OPT_INT, .dst = &ubatch, .arg = "N", .lo = 1,
                        .hi = 1 << 20, .help = "the same as -b: one engine step is one forward pass\n(given both, the smaller counts)"},
        {.name = {"--kv-tokens"}, .kind = OPT_INT, .dst = &kv_tokens, .arg = "N", .lo = 1, .hi = (long long)1 << 40,
         .help = "KV cache size in tokens (default: parallel x ctx-size)"},
        {.name = {"--max-queue"}, .kind = OPT_INT, .dst = &max_queue, .arg = "N", .lo = 1, .hi = 1 << 20,
         .help = "waiting requests before 503 (default 256)"},
        {.name = {"--no-prefix-cache"}, .kind = OPT_FLAG, .dst = &no_prefix_cache,
         .help = "do not reuse KV blocks across requests"},
        {.name = {"--state-snapshots"}, .kind = OPT_INT, .dst = &state_snapshots, .arg = "N", .lo = -1,
         .hi = 1 << 20,
         .help = "hybrids (qwen35): prefix-cache snapshots of the recurrent state\n"
                 "kept at most, each one sequence's state (default 0: 2 x parallel;\n-1: none)"},
        {.name = {"--state-snapshot-interval"}, .kind = OPT_INT, .dst = &state_interval, .arg = "N", .lo = 0,
         .hi = 1 << 24,
         .help = "hybrids: tokens between a prompt's snapshots, besides the one at\n"
                 "its end (default 0: 256)"},
        {.name = {"-ctk", "--cache-type-k"}, .kind = OPT_FN, .fn = parse_kv_type, .dst = &p.engine.type_k, .arg = "T",
         .help = "f16 (default), bf16, f32, q8_0"},
        {.name = {"-ctv", "--cache-type-v"}, .kind = OPT_FN, .fn = parse_kv_type, .dst = &p.engine.type_v, .arg = "T",
         .help = "the same for V"},
        {.name = {"--api-key"}, .kind = OPT_STR, .dst = &p.api_key, .arg = "KEY",
         .help = "require Authorization: Bearer KEY (not on /health)"},
        {.name = {"--cors-origins"}, .kind = OPT_STR, .dst = &p.cors_origins, .arg = "LIST",
         .help = "comma-separated origins allowed by CORS, or *"},
        {.name = {"--chat-template-file"}, .kind = OPT_STR, .dst = &p.chat_template_file, .arg = "FILE",
         .help = "render chats with this Jinja template instead of the model's"},
        {.name = {"--reasoning-format"}, .kind = OPT_STR, .dst = &p.reasoning_format, .arg = "F",
         .help = "deepseek (default): <think> blocks come out as reasoning_content;\n"
                 "none: they stay in the content"},
        {.name = {"--chat-template"}, .kind = OPT_STR, .dst = &p.chat_template, .arg = "NAME",
         .help = "a built-in renderer instead of the model's Jinja template:\n"
                 "chatml, llama2, llama2-sys, mistral-v1, mistral-v3, mistral-v7,\n"
                 "llama3, gemma, phi3, phi4 (default: the model's template rendered\n"
                 "as Jinja; a model without one gets chatml)"},
        {.name = {"--pooling"}, .kind = OPT_STR, .dst = &p.pooling, .arg = "P",
         .help = "/v1/embeddings: none, mean, cls or last (default: the model's\n"
                 "<arch>.pooling_type; a model without one is not an embedding model);\n"
                 "none: /embedding gives every token's vector; rank is refused"},
        {.name = {"--alias"}, .kind = OPT_STR, .dst = &p.alias, .arg = "NAME",
         .help = "model id reported by the API (default: the file name)"},
        {.name = {"--max-body"}, .kind = OPT_INT, .dst = &max_body, .arg = "BYTES", .lo = 1024, .hi = (long long)1 << 32,
         .help = "largest request body (default 8 MiB)"},
        {.name = {"--max-connections"}, .kind = OPT_INT, .dst = &max_conns, .arg = "N", .lo = 1, .hi = 1 << 16,
         .help = "open connections, all clients together (default 256)"},
        {.name = {"--max-connections-per-peer"}, .kind = OPT_INT, .dst = &max_conns_peer, .arg = "N", .lo = 0,
         .hi = 1 << 16, .help = "open connections of one client address (default 64; 0: no limit)"},
        {.name = {"--read-timeout"}, .kind = OPT_INT, .dst = &read_timeout, .arg = "S", .lo = 1, .hi = 3600,
         .help = "seconds a client may stay silent while sending a request (default 10)"},
        {.name = {"--body-timeout"}, .kind = OPT_INT, .dst = &body_timeout, .arg = "S", .lo = 1, .hi = 86400,
         .help = "seconds a request body may take in all, however it trickles in\n"
                 "(default 60; past it the answer is 408 and the connection is closed)"},
        {.name = {"--idle-timeout"}, .kind = OPT_INT, .dst = &idle_timeout, .arg = "S", .lo = 1, .hi = 3600,
         .help = "seconds a keep-alive connection may idle between requests (default 5)"},
        {.name = {"--grace-ms"}, .kind = OPT_INT, .dst = &grace_ms, .arg = "N", .lo = 0, .hi = 3600 * 1000,
         .help = "on SIGINT/SIGTERM, wait this long for running requests (default 5000)"},
        {.name = {"--no-mmap"}, .kind = OPT_FLAG,
         .help = "accepted: vt copies the weights into memory of its own anyway"},
        {.name = {"-ngl", "--gpu-layers", "--n-gpu-layers"}, .kind = OPT_STR, .arg = "N",
         .help = "accepted and ignored: vt runs on the CPU", .note = "vt runs on the CPU; ignored"},
        {.name = {"-fa", "--flash-attn"}, .kind = OPT_MAYBE, .fn = opt_on_off, .choices = on_off,
         .arg = "on|off|auto", .help = "accepted: vt's attention is always fused (flash-style)"},
    };
    rope_opts rope;
    ROPE_OPTS_TABLE(all, table, &rope);
    const opts_cmd cmd = {.name = "serve", .usage = "vt serve -m MODEL [options]", .opts = all, .n_opts = all_n};
    int counts[sizeof all / sizeof all[0]];
    const int prc = opts_parse(&cmd, argc, argv, NULL, NULL, counts);
    if (prc >= 0) return prc;
    if (!rope_opts_finish("serve", &rope)) return 2;
    p.rope = rope.params ? *rope.params : vt_rope_default_params();
    const bool ctx_given = counts[ROW_CTX] > 0;
    if (counts[ROW_UBATCH] && (!counts[ROW_BATCH] || ubatch < batch)) batch = ubatch;
    p.port = (int)port;
    p.engine.n_threads = (int32_t)n_threads;
    p.engine.n_ctx = (int32_t)n_ctx;
    p.engine.max_seqs = (int32_t)max_seqs;
    p.engine.max_batch_tokens = (int32_t)batch;
    p.engine.kv_tokens = kv_tokens;
    p.engine.max_queue = (int32_t)max_queue;
    p.engine.prefix_cache = p.engine.prefix_cache && !no_prefix_cache;
    p.engine.state_snapshots = (int32_t)state_snapshots;
    p.engine.state_snapshot_interval = (int32_t)state_interval;
    p.max_body_bytes = (size_t)max_body;
    p.max_connections = (int)max_conns;
    p.max_connections_per_peer = (int)max_conns_peer;
    p.read_timeout_s = (int)read_timeout;
    p.body_timeout_s = (int)body_timeout;
    p.idle_timeout_s = (int)idle_timeout;
    if (!p.model_path) {
        fprintf(stderr, "vt serve: no model (-m FILE)\n");
        opts_usage(&cmd, stderr);
        return 2;
    }
    /* -c 0 means the training context, as in llama.cpp; the default caps it so a
     * long-context model does not reserve a huge KV cache unasked. */
    p.engine.n_ctx = ctx_given ? p.engine.n_ctx : -4096;

    /* Signals are taken synchronously by this thread (sigwait); every other
     * thread inherits the blocked mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    pthread_t self = pthread_self();
    p.progress = isatty(STDERR_FILENO); /* the load progress bar, on a terminal */
    p.on_fatal = on_fatal;
    p.user = &self;

    server *s;
    if (server_start(&p, &s) != VT_OK) {
        fprintf(stderr, "%s\n", vt_last_error());
        return 1;
    }
    int sig = 0;
    sigwait(&set, &sig);
    int rc = 0;
    if (sig == SIGUSR1) {
        rc = 1; /* the model failed to load; the engine thread said why */
    } else {
        server_log("%s: shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
    }
    server_stop(s, (int)grace_ms);
    server_destroy(s);
    if (!rc) server_log("stopped");
    return rc;
}
