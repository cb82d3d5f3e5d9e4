/* POST /v1/embeddings (OpenAI's shape) and /embedding (llama-server's): each
 * input becomes an engine request with the model's pooling (vt_request_params.
 * pooling), so the inputs of a request, and of concurrent requests, are batched
 * with each other and with generation in the engine's steps.
 *
 * Request: input: a string, an array of strings, an array of token ids, or an
 * array of arrays of token ids (/embedding also takes llama-server's "content");
 * encoding_format "float" (default) or "base64" (the float32 values, little
 * endian, as OpenAI sends them; the openai SDKs ask for it by default);
 * dimensions: only the model's own size (vt does not truncate, which would
 * only be meaningful for Matryoshka-trained models); embd_normalize as
 * llama-server's (-1 none, 0 max-abs to int16 range, 1 taxicab, 2 Euclidean,
 * the default, p > 2 the p-norm); model and user are accepted. Other fields
 * are refused with a 400 that names them.
 * Response: {"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
 * "model", "usage": {"prompt_tokens", "total_tokens"}}; /embedding answers
 * llama-server's [{"index", "embedding": [[...]]}].
 *
 * Pooling: --pooling, else the GGUF's <arch>.pooling_type (mean 1, cls 2, last
 * 3), as llama-server. A model that declares none (a generative model) is not
 * an embedding model: 400, as llama-server's "Pooling type 'none' is not OAI
 * compatible" (its --pooling overrides there too). The vector is the final
 * hidden state after the output norm (llama.cpp's llama_get_embeddings_seq).
 * An explicit --pooling none makes /embedding answer every token's vector, not
 * normalised ({"index", "embedding": [[...], [...], ...]}, llama_get_embeddings_ith
 * per token as llama-server sends them) and /v1/embeddings a 400. Rank pooling
 * (rerankers: --pooling rank or the file's 4) is refused with a 400: vt has no
 * reranking.
 *
 * Bounds: EMBD_MAX_INPUTS inputs and EMBD_MAX_TOKENS tokens a request; each
 * input at most the context. */
#include "server/server_impl.h"

#include "base/status.h"
#include "model/model.h"

#include <math.h>
#include <string.h>

#define EMBD_MAX_INPUTS 128
#define EMBD_MAX_TOKENS (1 << 18)
#define EMBD_MAX_TOKEN_VALUES (1 << 24) /* --pooling none: tokens x n_embd a request */

/* llama.cpp's llama_pooling_type values (rank, 4, is a reranker's: refused) */
static const char *const pooling_names[] = {"none", "mean", "cls", "last", "rank"};
#define POOLING_RANK 4

bool embeddings_pooling_from_name(const char *name, int *out) {
    for (int i = 0; i < 5; i++) {
        if (!strcmp(name, pooling_names[i])) {
            *out = i;
            return true;
        }
    }
    return false;
}

/* The pooling of s's model (see the top), as llama_pooling_type values (rank
 * included); *declared: what the file says, for messages. */
static int server_pooling(server *s, uint32_t *declared) {
    const model *m = s->model;
    gguf_str arch;
    char key[128];
    *declared = 0;
    if (gguf_get_str(&m->gguf, "general.architecture", &arch) == VT_OK && arch.len < 100) {
        snprintf(key, sizeof key, "%.*s.pooling_type", (int)arch.len, arch.ptr);
        if (gguf_get_u32(&m->gguf, key, declared) != VT_OK) {
            int64_t v;
            *declared = gguf_get_i64(&m->gguf, key, &v) == VT_OK && v >= 0 && v < 1000 ? (uint32_t)v : 0;
        }
    }
    if (s->pooling_flag >= 0) return s->pooling_flag;
    return *declared >= VT_POOLING_MEAN && *declared <= POOLING_RANK ? (int)*declared : VT_POOLING_NONE;
}

/* One input (a string or an array of token ids) into its token ids. */
static vt_status input_one(server *s, json_t *v, const char *where, struct job_prompt *out) {
    if (json_is_string(v)) {
        size_t len = json_string_length(v);
        size_t fits = (size_t)s->n_ctx * (s->max_piece_bytes + 1) + 64;
        if (len > fits)
            return vt_errorf(VT_E_RANGE, "field '%s': %zu bytes cannot fit the context of %d tokens", where, len,
                             s->n_ctx);
        if (vt_tokenize(s->model, json_string_value(v), len, true, true, &out->ids, &out->n) != VT_OK)
            return vt_error_prefix(VT_E_INVALID, where);
    } else {
        size_t n = json_array_size(v);
        if (n > (size_t)s->n_ctx)
            return vt_errorf(VT_E_RANGE, "field '%s': %zu tokens, more than the context of %d", where, n, s->n_ctx);
        out->ids = malloc(sizeof(int32_t) * (n ? n : 1));
        if (!out->ids) return vt_errorf(VT_E_NOMEM, "out of memory");
        out->n = (int64_t)n;
        const int32_t n_vocab = vt_model_n_vocab(s->model);
        for (size_t i = 0; i < n; i++) {
            json_t *e = json_array_get(v, i);
            json_int_t id = json_is_integer(e) ? json_integer_value(e) : -1;
            if (id < 0 || id >= n_vocab)
                return vt_errorf(VT_E_INVALID, "field '%s[%zu]': expected a token id in [0, %d)", where, i, n_vocab);
            out->ids[i] = (int32_t)id;
        }
    }
    if (out->n == 0) return vt_errorf(VT_E_INVALID, "field '%s': the input is empty (0 tokens)", where);
    if (out->n > s->n_ctx)
        return vt_errorf(VT_E_RANGE, "field '%s': the input is %lld tokens but the context is %d tokens", where,
                         (long long)out->n, s->n_ctx);
    return VT_OK;
}

static bool is_id_array(json_t *v) {
    if (!json_is_array(v) || json_array_size(v) == 0) return false;
    for (size_t i = 0; i < json_array_size(v); i++)
        if (!json_is_integer(json_array_get(v, i))) return false;
    return true;
}

/* How many inputs `in` holds (*batch: an array of them), checked against the bounds. */
static vt_status inputs_count(json_t *in, const char *name, int32_t *n_out, bool *batch) {
    size_t n = 1;
    *batch = json_is_array(in) && !is_id_array(in);
    if (!json_is_string(in) && !json_is_array(in))
        return vt_errorf(VT_E_INVALID, "field '%s': expected a string, an array of strings, an array of token ids "
                                       "or an array of arrays of token ids", name);
    if (*batch) {
        n = json_array_size(in);
        if (n == 0) return vt_errorf(VT_E_INVALID, "field '%s': an empty array", name);
        if (n > EMBD_MAX_INPUTS)
            return vt_errorf(VT_E_INVALID, "field '%s': %zu inputs, more than %d a request", name, n, EMBD_MAX_INPUTS);
    }
    *n_out = (int32_t)n;
    return VT_OK;
}

/* The inputs of `in` into j->prompts (j->n_prompts of them, inputs_count's). */
static vt_status inputs_parse(server *s, job *j, json_t *in, bool batch, const char *name) {
    for (int32_t i = 0; i < j->n_prompts; i++) {
        json_t *v = batch ? json_array_get(in, (size_t)i) : in;
        char where[48];
        snprintf(where, sizeof where, batch ? "%s[%d]" : "%s", name, (int)i);
        if (!json_is_string(v) && !is_id_array(v))
            return vt_errorf(VT_E_INVALID, "field '%s': expected a string or an array of token ids", where);
        VT_TRY(input_one(s, v, where, &j->prompts[i]));
        j->n_prompt += j->prompts[i].n;
        if (j->n_prompt > EMBD_MAX_TOKENS)
            return vt_errorf(VT_E_RANGE, "field '%s': more than %d tokens in one request", name, EMBD_MAX_TOKENS);
    }
    return VT_OK;
}

/* llama-server's common_embd_normalize. */
static void normalize(float *v, int32_t n, int norm) {
    double sum = 0;
    if (norm == -1) {
        sum = 1;
    } else if (norm == 0) {
        for (int32_t i = 0; i < n; i++) sum = fmax(sum, fabs((double)v[i]));
        sum /= 32760.0;
    } else if (norm == 2) {
        for (int32_t i = 0; i < n; i++) sum += (double)v[i] * v[i];
        sum = sqrt(sum);
    } else {
        for (int32_t i = 0; i < n; i++) sum += pow(fabs((double)v[i]), norm);
        sum = pow(sum, 1.0 / norm);
    }
    const double scale = sum > 0 ? 1.0 / sum : 0.0;
    for (int32_t i = 0; i < n; i++) v[i] = (float)(v[i] * scale);
}

static void base64_add(strbuf *sb, const unsigned char *p, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (!sb_reserve(sb, (n + 2) / 3 * 4)) return;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        char q[4] = {tab[v >> 18 & 63], tab[v >> 12 & 63], i + 1 < n ? tab[v >> 6 & 63] : '=', i + 2 < n ? tab[v & 63] : '='};
        sb_addn(sb, q, 4);
    }
}

static void floats_add(strbuf *sb, const float *v, int32_t n, bool b64) {
    if (b64) {
        unsigned char *bytes = malloc(sizeof(float) * (size_t)n);
        if (!bytes) {
            sb->failed = true;
            return;
        }
        for (int32_t i = 0; i < n; i++) { /* little endian, whatever the host */
            uint32_t u;
            memcpy(&u, &v[i], 4);
            for (int k = 0; k < 4; k++) bytes[4 * i + k] = (unsigned char)(u >> (8 * k));
        }
        sb_add(sb, "\"");
        base64_add(sb, bytes, sizeof(float) * (size_t)n);
        sb_add(sb, "\"");
        free(bytes);
        return;
    }
    sb_add(sb, "[");
    for (int32_t i = 0; i < n; i++) sb_printf(sb, i ? ",%.9g" : "%.9g", (double)v[i]);
    sb_add(sb, "]");
}

static enum MHD_Result send_body(server *s, struct MHD_Connection *conn, strbuf *sb) {
    struct MHD_Response *r = MHD_create_response_from_buffer(sb->len, sb->ptr, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        sb_free(sb);
        return MHD_NO;
    }
    memset(sb, 0, sizeof *sb); /* MHD owns the bytes now */
    MHD_add_response_header(r, "Content-Type", "application/json; charset=utf-8");
    http_add_common_headers(s, conn, r);
    enum MHD_Result res = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    return res;
}

#define FAIL(code, ...)                                                    \
    do {                                                                   \
        *status_out = (code);                                              \
        res = http_send_error(s, conn, (code), NULL, __VA_ARGS__);         \
        goto done;                                                         \
    } while (0)

enum MHD_Result embeddings_handle(server *s, struct MHD_Connection *conn, bool oai, const char *body, size_t len,
                                  job **job_out, int *status_out) {
    enum MHD_Result res = MHD_NO;
    json_t *root = NULL;
    size_t cost;
    vt_status st = oai_json_cost(body, len, &cost);
    if (st != VT_OK) {
        *status_out = st == VT_E_RANGE ? 413 : 400;
        return http_send_error(s, conn, *status_out, NULL, "%s", vt_last_error());
    }
    json_error_t jerr;
    root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(root)) {
        json_decref(root);
        *status_out = 400;
        return http_send_error(s, conn, 400, NULL, "the body is not a JSON object%s%s", root ? "" : ": ",
                               root ? "" : jerr.text);
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        static const char *const known[] = {"input", "content", "model", "encoding_format", "dimensions", "user",
                                            "embd_normalize"};
        bool ok = false;
        for (size_t i = 0; i < sizeof known / sizeof known[0] && !ok; i++) ok = !strcmp(key, known[i]);
        if (!ok) FAIL(400, "field '%.100s': not supported by vt's embeddings", key);
    }
    uint32_t declared;
    int pooling = server_pooling(s, &declared);
    if (pooling == POOLING_RANK)
        FAIL(400, "rank pooling (a reranking model's%s) is not supported by vt: it has no reranking and cannot embed "
                  "with it; start vt serve with --pooling mean|cls|last to embed anyway",
             s->pooling_flag == POOLING_RANK ? ", asked by --pooling rank" : ", from <arch>.pooling_type");
    if (pooling == VT_POOLING_NONE && s->pooling_flag == VT_POOLING_NONE) {
        /* llama-server: /embedding gives every token's vector, /v1/embeddings refuses */
        if (oai)
            FAIL(400, "vt serve runs with --pooling none: one vector a token is not OpenAI-compatible (Pooling type "
                      "'none' is not OAI compatible); use /embedding, or another --pooling");
        pooling = VT_POOLING_TOKENS;
    }
    if (pooling == VT_POOLING_NONE)
        FAIL(400, "this model is not an embedding model: its file declares %s pooling (%s); start vt serve with "
                  "--pooling mean|cls|last to embed with it anyway",
             declared == 0 ? "no" : declared < 5 ? pooling_names[declared] : "an unknown",
             "<arch>.pooling_type");
    json_t *in = json_object_get(root, "input");
    const char *in_name = "input";
    if (!in && !oai) {
        in = json_object_get(root, "content");
        in_name = "content";
    }
    if (!in) FAIL(400, "field 'input': required");
    bool b64 = false;
    json_t *ef = json_object_get(root, "encoding_format");
    if (ef && !json_is_null(ef)) {
        const char *f = json_string_value(ef);
        if (!f || (strcmp(f, "float") && strcmp(f, "base64")))
            FAIL(400, "field 'encoding_format': expected \"float\" or \"base64\"");
        b64 = !strcmp(f, "base64");
    }
    const int32_t n_embd = (int32_t)((const model *)s->model)->hp.n_embd;
    json_t *dim = json_object_get(root, "dimensions");
    if (dim && !json_is_null(dim) && !(json_is_integer(dim) && json_integer_value(dim) == n_embd))
        FAIL(400, "field 'dimensions': the model's embeddings have %d dimensions, and vt does not shorten them",
             n_embd);
    int norm = 2;
    json_t *nv = json_object_get(root, "embd_normalize");
    if (nv && !json_is_null(nv)) {
        if (!json_is_integer(nv) || json_integer_value(nv) < -1 || json_integer_value(nv) > 64)
            FAIL(400, "field 'embd_normalize': expected an integer in [-1, 64]");
        norm = (int)json_integer_value(nv);
    }

    int32_t n_inputs = 1;
    bool batch = false;
    st = inputs_count(in, in_name, &n_inputs, &batch);
    if (st != VT_OK) FAIL(400, "%s", vt_last_error());
    /* one choice per input (job_create sizes choices and prompts from these) */
    oai_request req = {.kind = OAI_COMPLETION, .n = 1, .n_prompts = n_inputs};
    job *j = job_create(s, &req);
    if (!j) FAIL(503, "out of memory");
    *job_out = j; /* the connection's reference; dropped when the request completes */
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    j->sock_fd = ci ? ci->connect_fd : -1;
    j->conn = conn;
    j->pooling = (vt_pooling)pooling;
    VT_ASSERT(j->n_prompts == n_inputs && j->n_choices == n_inputs);
    st = inputs_parse(s, j, in, batch, in_name);
    if (st == VT_OK && pooling == VT_POOLING_TOKENS && j->n_prompt * n_embd > EMBD_MAX_TOKEN_VALUES)
        st = vt_errorf(VT_E_RANGE, "field '%s': %lld tokens of %d values each are more than the %d values vt answers "
                                   "in one request without pooling", in_name, (long long)j->n_prompt, n_embd,
                       EMBD_MAX_TOKEN_VALUES);
    if (st == VT_OK) st = job_submit(j);
    if (st != VT_OK) {
        int code = st == VT_E_BUSY || st == VT_E_NOMEM ? 503 : st == VT_E_RANGE ? 413 : 400;
        FAIL(code, "%s%s", st == VT_E_BUSY ? "the server is busy (request queue full): " : "", vt_last_error());
    }

    bool gone = false;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        job_clear_events_locked(j);
        if (j->n_finished == j->n_choices) break;
        if (!job_wait_locked(j)) {
            gone = true;
            break;
        }
    }
    pthread_mutex_unlock(&j->mu);
    if (gone) {
        job_abort_by_client(j);
        *status_out = 499; /* the client closed the connection (nginx's convention) */
        goto done;
    }
    if (j->shutdown) FAIL(503, "the server is shutting down");
    for (int32_t i = 0; i < j->n_choices; i++) {
        const job_choice *c = &j->choices[i];
        if (c->finish == VT_FINISH_ERROR) FAIL(500, "%s", c->error ? c->error : "engine error");
        if (!c->embd) FAIL(500, "input %d: no embedding came back (finish %d)", i, (int)c->finish);
    }
    strbuf sb = {0};
    sb_add(&sb, oai ? "{\"object\":\"list\",\"data\":[" : "[");
    for (int32_t i = 0; i < j->n_choices; i++) {
        job_choice *c = &j->choices[i];
        if (oai) sb_printf(&sb, "%s{\"object\":\"embedding\",\"index\":%d,\"embedding\":", i ? "," : "", i);
        else sb_printf(&sb, "%s{\"index\":%d,\"embedding\":[", i ? "," : "", i);
        if (pooling == VT_POOLING_TOKENS) { /* a vector a token, not normalised (llama-server's) */
            for (int32_t t = 0; t < c->n_embd / n_embd; t++) {
                if (t) sb_add(&sb, ",");
                floats_add(&sb, c->embd + (size_t)t * (size_t)n_embd, n_embd, false);
            }
        } else {
            normalize(c->embd, c->n_embd, norm);
            floats_add(&sb, c->embd, c->n_embd, b64 && oai);
        }
        sb_add(&sb, oai ? "}" : "]}");
    }
    if (oai) {
        json_t *model = oai_json_string_lossy(s->model_id, strlen(s->model_id));
        char *mtext = json_dumps(model, JSON_ENCODE_ANY);
        json_decref(model);
        sb_printf(&sb, "],\"model\":%s,\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld}}",
                  mtext ? mtext : "\"\"", (long long)j->n_prompt, (long long)j->n_prompt);
        free(mtext);
    } else {
        sb_add(&sb, "]");
    }
    if (sb.failed) {
        sb_free(&sb);
        FAIL(503, "out of memory for the answer");
    }
    *status_out = 200;
    res = send_body(s, conn, &sb);
done:
    json_decref(root);
    return res;
}
#undef FAIL
