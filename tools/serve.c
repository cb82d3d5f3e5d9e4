/* vt serve: the OpenAI-compatible HTTP server (src/server/). This file parses
 * the options, starts the server, and waits for SIGINT/SIGTERM to stop it. */
#include "args.h"
#include "cmds.h"
#include "server/server.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void usage(void) {
    fprintf(stderr,
            "usage: vt serve -m MODEL [options]\n"
            "  -m, --model FILE          GGUF model\n"
            "  --host ADDR               localhost or a numeric address to bind (default 127.0.0.1: loopback only)\n"
            "  --port N                  TCP port (default 8080; 0: any free port, printed on stderr)\n"
            "  -t, --threads N           compute threads (default: physical cores)\n"
            "  -c, --ctx-size N          tokens per sequence (default: min(training context, 4096))\n"
            "  -np, --parallel N         sequences decoded at once (default 16)\n"
            "  -b, --batch-size N        token budget of one engine step (default 512)\n"
            "  --kv-tokens N             KV cache size in tokens (default: parallel x ctx-size)\n"
            "  --max-queue N             waiting requests before 503 (default 256)\n"
            "  --no-prefix-cache         do not reuse KV blocks across requests\n"
            "  -ctk, --cache-type-k T    f16 (default), bf16, f32, q8_0\n"
            "  -ctv, --cache-type-v T\n"
            "  --api-key KEY             require Authorization: Bearer KEY (not on /health)\n"
            "  --cors-origins LIST       comma-separated origins allowed by CORS, or *\n"
            "  --chat-template NAME      chatml, llama2, llama2-sys, mistral-v1, mistral-v3, mistral-v7,\n"
            "                            llama3, gemma, phi3, phi4 (default: from the model, else chatml)\n"
            "  --alias NAME              model id reported by the API (default: the file name)\n"
            "  --max-body BYTES          largest request body (default 8 MiB)\n"
            "  --max-connections N       open connections, all clients together (default 256)\n"
            "  --max-connections-per-peer N  open connections of one client address (default 64; 0: no limit)\n"
            "  --read-timeout S          seconds a client may stay silent while sending a request (default 10)\n"
            "  --idle-timeout S          seconds a keep-alive connection may idle between requests (default 5)\n"
            "  --grace-ms N              on SIGINT/SIGTERM, wait this long for running requests (default 5000)\n");
}

static bool parse_kv_type(const char *opt, const char *s, vt_kv_type *out) {
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
    long long grace_ms = 5000;
    bool ctx_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        long long n;
#define VALUE()                                          \
    do {                                                 \
        if (!(v = arg_value(argc, argv, &i))) return 2;  \
    } while (0)
#define INT(lo, hi, dst)                                 \
    do {                                                 \
        VALUE();                                         \
        if (!arg_int(a, v, lo, hi, &n)) return 2;        \
        dst = n;                                         \
    } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            VALUE();
            p.model_path = v;
        } else if (!strcmp(a, "--host")) {
            VALUE();
            p.host = v;
        } else if (!strcmp(a, "--port")) {
            INT(0, 65535, p.port);
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            INT(0, 1024, p.engine.n_threads);
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            INT(0, 1 << 24, p.engine.n_ctx);
            ctx_given = true;
        } else if (!strcmp(a, "-np") || !strcmp(a, "--parallel")) {
            INT(1, 4096, p.engine.max_seqs);
        } else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) {
            INT(1, 1 << 20, p.engine.max_batch_tokens);
        } else if (!strcmp(a, "--kv-tokens")) {
            INT(1, (long long)1 << 40, p.engine.kv_tokens);
        } else if (!strcmp(a, "--max-queue")) {
            INT(1, 1 << 20, p.engine.max_queue);
        } else if (!strcmp(a, "--no-prefix-cache")) {
            p.engine.prefix_cache = false;
        } else if (!strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k")) {
            VALUE();
            if (!parse_kv_type(a, v, &p.engine.type_k)) return 2;
        } else if (!strcmp(a, "-ctv") || !strcmp(a, "--cache-type-v")) {
            VALUE();
            if (!parse_kv_type(a, v, &p.engine.type_v)) return 2;
        } else if (!strcmp(a, "--api-key")) {
            VALUE();
            p.api_key = v;
        } else if (!strcmp(a, "--cors-origins")) {
            VALUE();
            p.cors_origins = v;
        } else if (!strcmp(a, "--chat-template")) {
            VALUE();
            p.chat_template = v;
        } else if (!strcmp(a, "--alias")) {
            VALUE();
            p.alias = v;
        } else if (!strcmp(a, "--max-body")) {
            INT(1024, (long long)1 << 32, p.max_body_bytes);
        } else if (!strcmp(a, "--max-connections")) {
            INT(1, 1 << 16, p.max_connections);
        } else if (!strcmp(a, "--max-connections-per-peer")) {
            INT(0, 1 << 16, p.max_connections_per_peer);
        } else if (!strcmp(a, "--read-timeout")) {
            INT(1, 3600, p.read_timeout_s);
        } else if (!strcmp(a, "--idle-timeout")) {
            INT(1, 3600, p.idle_timeout_s);
        } else if (!strcmp(a, "--grace-ms")) {
            INT(0, 3600 * 1000, grace_ms);
        } else {
            fprintf(stderr, "vt serve: unknown option '%s'\n", a);
            usage();
            return 2;
        }
#undef INT
#undef VALUE
    }
    if (!p.model_path) {
        fprintf(stderr, "vt serve: no model (-m FILE)\n");
        usage();
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
