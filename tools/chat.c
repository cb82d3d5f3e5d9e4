/* vt chat: an interactive chat in the terminal, rendered with the model's own
 * Jinja template (or --chat-template-file's; the built-in chatml for a model
 * without one), as llama.cpp's `llama-cli -cnv`. `vt run -i` / `-cnv` lead here.
 *
 * Input: one message per line; a line ending with '\' continues on the next.
 * /clear forgets the conversation, /exit (or end of input) quits. The answer
 * streams as it is generated; Ctrl-C stops the answer (at the prompt: drops
 * the line), not the program. The whole conversation is rendered again at each
 * turn, and its tokens are compared with those in the KV cache: the common
 * prefix stays (vt_seq_keep), only the rest is prefilled (-v reports how many
 * tokens each turn prefilled and kept), so history stays until the context is
 * full and a turn costs its own tokens. A model with a recurrent state (qwen35),
 * or a sliding window that has passed the point to go back to, cannot: there
 * the turn is prefilled whole unless the cache is a prefix of it. */
#include "base/log.h"
#include "cmds.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "opts.h"
#include "rope_opts.h"
#include "server/chat_jinja.h"
#include "server/strbuf.h"
#include "tokenizer/tokenizer.h"
#include "vt.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

/* Reads one message (continued lines joined with '\n') into *out; false at end of input.
 * Ctrl-C while typing drops the message and starts again. */
static bool read_message(strbuf *out, bool tty) {
    char line[4096];
    out->len = 0;
    bool any = false;
    for (;;) {
        if (!fgets(line, sizeof line, stdin)) {
            if (ferror(stdin) && errno == EINTR && interrupted) { /* Ctrl-C at the prompt */
                clearerr(stdin);
                interrupted = 0;
                out->len = 0;
                any = false;
                if (tty) {
                    fputs("\n> ", stdout);
                    fflush(stdout);
                }
                continue;
            }
            break;
        }
        any = true;
        size_t n = strlen(line);
        if (n && line[n - 1] == '\n') n--;
        if (n && line[n - 1] == '\r') n--;
        if (n && line[n - 1] == '\\') {
            sb_addn(out, line, n - 1);
            sb_add(out, "\n");
            continue;
        }
        sb_addn(out, line, n);
        return true;
    }
    return any;
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    strbuf b = {0};
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) sb_addn(&b, buf, n);
    fclose(f);
    if (b.failed) {
        sb_free(&b);
        return NULL;
    }
    *len = b.len;
    if (!b.ptr) return calloc(1, 1);
    return b.ptr;
}

/* Renders the conversation (a JSON array of messages) with the template. */
static vt_status render(const jinja_template *t, const chat_jinja_env *env, json_t *messages, char **out,
                        size_t *len) {
    json_t *body = json_object();
    json_object_set(body, "messages", messages);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (!text) return vt_errorf(VT_E_NOMEM, "out of memory");
    oai_request r;
    vt_status st = oai_parse_request(OAI_CHAT, text, strlen(text), &r);
    free(text);
    if (st != VT_OK) return st;
    st = chat_jinja_render(t, &r, env, out, len);
    oai_request_free(&r);
    return st;
}

int cmd_chat(int argc, char **argv) {
    const char *model_path = NULL, *system = NULL, *tmpl_file = NULL;
    long long n_predict = -1, n_threads = 0, n_ctx = 0, seed = -1, top_k = 40;
    double temp = 0.8, top_p = 0.95, min_p = 0.05;
    bool interactive = false, conversation = false, verbose = false;
    const opt table[] = {
        {.name = {"-m", "--model"}, .kind = OPT_STR, .dst = &model_path, .arg = "FILE", .help = "GGUF model"},
        {.name = {"-sys", "--system-prompt", "-p", "--prompt"}, .kind = OPT_STR, .dst = &system, .arg = "TEXT",
         .help = "the system message of the conversation (-p as llama-cli -cnv)"},
        {.name = {"--chat-template-file"}, .kind = OPT_STR, .dst = &tmpl_file, .arg = "FILE",
         .help = "render with this Jinja template instead of the model's"},
        {.name = {"-n", "--n-predict"}, .kind = OPT_INT, .dst = &n_predict, .arg = "N", .lo = -1, .hi = 1 << 24,
         .help = "tokens per answer at most (default -1: until the end of the turn)"},
        {.name = {"-t", "--threads"}, .kind = OPT_INT, .dst = &n_threads, .arg = "N", .lo = 0, .hi = 1024,
         .help = "threads (default: the physical cores this process may use)"},
        {.name = {"-c", "--ctx-size"}, .kind = OPT_INT, .dst = &n_ctx, .arg = "N", .lo = 0, .hi = 1 << 24,
         .help = "context size (default: min(training context, 4096); with\n"
                 "--rope-scale or --yarn-orig-ctx, the context they reach)"},
        {.name = {"--temp", "--temperature"}, .kind = OPT_FLOAT, .dst = &temp, .arg = "T", .flo = 0, .fhi = 100,
         .help = "temperature (default 0.8; 0 = greedy)"},
        {.name = {"--top-k"}, .kind = OPT_INT, .dst = &top_k, .arg = "K", .lo = 0, .hi = 1 << 24,
         .help = "(default 40; 0 = off)"},
        {.name = {"--top-p"}, .kind = OPT_FLOAT, .dst = &top_p, .arg = "P", .flo = 0, .fhi = 1,
         .help = "(default 0.95; 1 = off)"},
        {.name = {"--min-p"}, .kind = OPT_FLOAT, .dst = &min_p, .arg = "P", .flo = 0, .fhi = 1,
         .help = "(default 0.05; 0 = off)"},
        {.name = {"-s", "--seed"}, .kind = OPT_INT, .dst = &seed, .arg = "N", .lo = -1, .hi = INT64_MAX,
         .help = "sampling seed (default: random)"},
        {.name = {"-i", "--interactive"}, .kind = OPT_FLAG, .dst = &interactive,
         .help = "accepted: vt chat is always interactive"},
        {.name = {"-cnv", "--conversation"}, .kind = OPT_FLAG, .dst = &conversation,
         .help = "accepted: vt chat is always a conversation"},
        {.name = {"-v", "--verbose"}, .kind = OPT_FLAG, .dst = &verbose,
         .help = "report on stderr the tokens each turn prefilled and kept in the cache"},
    };
    rope_opts rope;
    ROPE_OPTS_TABLE(all, table, &rope);
    const opts_cmd cmd = {.name = "chat", .usage = "vt chat -m MODEL [-sys TEXT] [options]", .opts = all,
                          .n_opts = all_n};
    const int prc = opts_parse(&cmd, argc, argv, NULL, NULL, NULL);
    if (prc >= 0) return prc;
    if (!rope_opts_finish("chat", &rope)) return 2;
    if (!model_path) {
        fprintf(stderr, "vt chat: -m MODEL is required\n");
        opts_usage(&cmd, stderr);
        return 2;
    }
    int rc = 1;
    vt_model *model = NULL;
    jinja_template *tmpl = NULL;
    json_t *messages = json_array();
    char *bos = NULL, *eos = NULL;
    strbuf in = {0}, answer = {0};
    vt_context *ctx = NULL;
    int32_t *hist = NULL; /* (n_hist) the tokens in ctx's cache, sequence 0 */
    int64_t n_hist = 0;
    bool tty = isatty(STDIN_FILENO);

    vt_model_params mp = vt_model_default_params();
    mp.progress = isatty(STDERR_FILENO);
    mp.rope = rope.params;
    if (vt_model_load(model_path, &mp, &model) != VT_OK) {
        fprintf(stderr, "vt chat: %s\n", vt_last_error());
        goto done;
    }
    const struct vt_model *m = model;
    if (tmpl_file) {
        size_t n = 0;
        char *src = read_all(tmpl_file, &n);
        if (!src) {
            fprintf(stderr, "vt chat: cannot read %s\n", tmpl_file);
            goto done;
        }
        vt_status st = jinja_template_parse(src, n, &tmpl);
        free(src);
        if (st != VT_OK) {
            fprintf(stderr, "vt chat: %s: %s\n", tmpl_file, vt_last_error());
            goto done;
        }
    } else {
        gguf_str t;
        if (gguf_get_str(&m->gguf, "tokenizer.chat_template", &t) != VT_OK ||
            jinja_template_parse(t.ptr, (size_t)t.len, &tmpl) != VT_OK) {
            static const char chatml[] =
                "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
            log_warn("vt chat: the model has no chat template vt can parse; using chatml");
            if (jinja_template_parse(chatml, sizeof chatml - 1, &tmpl) != VT_OK) goto done;
        }
    }
    char piece[256];
    int32_t ids2[2] = {tok_bos(m->tok), tok_eos(m->tok)};
    char **texts[2] = {&bos, &eos};
    for (int i = 0; i < 2; i++) {
        int64_t n = ids2[i] >= 0 ? tok_piece(m->tok, ids2[i], true, piece, sizeof piece) : 0;
        if (n < 0 || n >= (int64_t)sizeof piece) n = 0;
        *texts[i] = strndup(piece, (size_t)n);
    }
    chat_jinja_env env = {.bos_token = bos ? bos : "", .eos_token = eos ? eos : "", .strip_bos = tok_add_bos(m->tok)};

    vt_context_params cp = vt_context_default_params();
    cp.n_ctx = (int32_t)(n_ctx > 0 ? n_ctx : (vt_model_n_ctx_default(model) < 4096 ? vt_model_n_ctx_default(model) : 4096));
    cp.n_threads = (int32_t)n_threads;
    hist = malloc(sizeof(int32_t) * (size_t)cp.n_ctx);
    if (!hist || vt_context_create(model, &cp, &ctx) != VT_OK) {
        fprintf(stderr, "vt chat: %s\n", hist ? vt_last_error() : "out of memory");
        goto done;
    }

    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    if (system && *system) {
        json_t *msg = json_object();
        json_object_set_new(msg, "role", json_string("system"));
        json_object_set_new(msg, "content", json_string(system));
        json_array_append_new(messages, msg);
    }
    if (tty) fprintf(stderr, "vt chat: /clear forgets the conversation, /exit quits; end a line with \\ to go on\n");
    for (;;) {
        if (tty) {
            fputs("> ", stdout);
            fflush(stdout);
        }
        interrupted = 0;
        if (!read_message(&in, tty)) break;
        if (in.failed) goto done;
        if (!strcmp(in.ptr ? in.ptr : "", "/exit")) break;
        if (!strcmp(in.ptr ? in.ptr : "", "/clear")) {
            size_t keep = system && *system ? 1 : 0;
            while (json_array_size(messages) > keep) json_array_remove(messages, json_array_size(messages) - 1);
            continue;
        }
        if (!in.len) continue;
        json_t *msg = json_object();
        json_object_set_new(msg, "role", json_string("user"));
        json_object_set_new(msg, "content", json_stringn(in.ptr, in.len));
        json_array_append_new(messages, msg);

        char *prompt = NULL;
        size_t plen = 0;
        if (render(tmpl, &env, messages, &prompt, &plen) != VT_OK) {
            fprintf(stderr, "vt chat: %s\n", vt_last_error());
            json_array_remove(messages, json_array_size(messages) - 1);
            continue;
        }
        int32_t *ids = NULL;
        int64_t n_ids = 0;
        vt_status st = vt_tokenize(model, prompt, plen, true, true, &ids, &n_ids);
        free(prompt);
        if (st == VT_OK && n_ids >= cp.n_ctx) {
            fprintf(stderr, "vt chat: the conversation is %lld tokens, more than the context (%d): /clear it\n",
                    (long long)n_ids, cp.n_ctx);
            free(ids);
            json_array_remove(messages, json_array_size(messages) - 1);
            continue;
        }
        sampler *smp = NULL;
        sampler_params sp = sampler_default_params();
        sp.temperature = (float)temp;
        sp.top_k = (int32_t)top_k;
        sp.top_p = (float)top_p;
        sp.min_p = (float)min_p;
        sp.seed = seed >= 0 ? (uint64_t)seed : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
        int32_t *pos = st == VT_OK ? malloc(sizeof(int32_t) * (size_t)(n_ids ? n_ids : 1)) : NULL;
        int32_t *seq = st == VT_OK ? calloc((size_t)(n_ids ? n_ids : 1), sizeof(int32_t)) : NULL;
        if (st != VT_OK || !pos || !seq || sampler_create(&sp, vt_model_n_vocab(model), &smp) != VT_OK) {
            fprintf(stderr, "vt chat: %s\n", vt_last_error());
            free(ids);
            free(pos);
            free(seq);
            goto done;
        }
        /* The cache keeps the common prefix of its tokens and this rendering (at
         * least one token is evaluated, for its logits). */
        int64_t keep = 0;
        while (keep < n_hist && keep < n_ids - 1 && hist[keep] == ids[keep]) keep++;
        if (vt_seq_keep(ctx, 0, (int32_t)keep) != VT_OK) {
            vt_seq_clear(ctx, 0); /* no going back (recurrent state, passed window): prefill it all */
            keep = 0;
        }
        n_hist = 0;
        for (int64_t i = keep; i < n_ids; i++) pos[i] = (int32_t)i;
        vt_batch batch = {.n_tokens = (int32_t)(n_ids - keep), .token = ids + keep, .pos = pos + keep,
                          .seq = seq, .logits = NULL};
        st = vt_decode(ctx, &batch);
        if (verbose)
            fprintf(stderr, "vt chat: prefilled %lld tokens, %lld kept in the cache\n", (long long)(n_ids - keep),
                    (long long)keep);
        if (st == VT_OK) {
            memcpy(hist, ids, sizeof(int32_t) * (size_t)n_ids);
            n_hist = n_ids;
        } else {
            vt_seq_clear(ctx, 0);
        }
        answer.len = 0;
        int32_t cur = (int32_t)n_ids;
        char pend[64];
        size_t n_pend = 0;
        for (int64_t k = 0; st == VT_OK && !interrupted && (n_predict < 0 || k < n_predict); k++) {
            int32_t tok = sampler_sample(smp, vt_get_logits(ctx, 0), NULL);
            if (vt_model_is_eog(model, tok)) break;
            sampler_accept(smp, tok);
            int64_t n = vt_token_piece(model, tok, piece, sizeof piece);
            if (n > (int64_t)sizeof piece) n = sizeof piece;
            if (n > 0) {
                const char *p = piece;
                if (!answer.len && p[0] == ' ') p++, n--;
                sb_addn(&answer, p, (size_t)n);
                if (n_pend + (size_t)n > sizeof pend) {
                    fwrite(pend, 1, n_pend, stdout);
                    n_pend = 0;
                }
                if ((size_t)n > sizeof pend) {
                    fwrite(p, 1, (size_t)n, stdout);
                } else {
                    memcpy(pend + n_pend, p, (size_t)n);
                    n_pend += (size_t)n;
                    size_t ok = tok_utf8_complete_prefix(pend, n_pend);
                    fwrite(pend, 1, ok, stdout);
                    memmove(pend, pend + ok, n_pend - ok);
                    n_pend -= ok;
                }
                fflush(stdout);
            }
            if (cur + 1 >= cp.n_ctx) break;
            const int32_t zero = 0;
            vt_batch one = {.n_tokens = 1, .token = &tok, .pos = &cur, .seq = &zero, .logits = NULL};
            st = vt_decode(ctx, &one);
            if (st != VT_OK) {
                vt_seq_clear(ctx, 0);
                n_hist = 0;
                break;
            }
            hist[n_hist++] = tok;
            cur++;
        }
        fwrite(pend, 1, n_pend, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        if (st != VT_OK) fprintf(stderr, "vt chat: %s\n", vt_last_error());
        if (interrupted) fprintf(stderr, "vt chat: (stopped)\n");
        free(ids);
        free(pos);
        free(seq);
        sampler_free(smp);
        msg = json_object();
        json_object_set_new(msg, "role", json_string("assistant"));
        json_object_set_new(msg, "content", json_stringn(answer.ptr ? answer.ptr : "", answer.len));
        json_array_append_new(messages, msg);
    }
    rc = 0;
done:
    vt_context_free(ctx);
    free(hist);
    sb_free(&in);
    sb_free(&answer);
    json_decref(messages);
    free(bos);
    free(eos);
    jinja_template_destroy(tmpl);
    vt_model_free(model);
    return rc;
}
