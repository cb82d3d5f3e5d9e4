/* gguf/: the parser on the real shared model files, the getters, and the writer
 * (round trip of every kv type, tensors, alignment, copy_kv, error paths). */
#include "base/mapfile.h"
#include "gguf/gguf.h"
#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[256];

static const char *tmp_path(const char *name) {
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

static bool open_model(const char *name, mapfile *m, gguf_file *f) {
    const char *path = test_model_path(name);
    if (!path) return false;
    vt_status s = mapfile_open(path, m);
    CHECK_OK(s);
    if (s != VT_OK) return false;
    s = gguf_parse(m->data, m->size, path, f);
    CHECK_OK(s);
    if (s != VT_OK) {
        mapfile_close(m);
        return false;
    }
    return true;
}

static int count_type(const gguf_file *f, vt_dtype t) {
    int n = 0;
    for (int64_t i = 0; i < f->n_tensors; i++) n += f->tensors[i].type == t;
    return n;
}

/* Tensor data lies inside the buffer, aligned, and tensor i+1 follows tensor i. */
static void check_layout(const gguf_file *f) {
    CHECK(f->data_offset % f->alignment == 0 || f->n_tensors == 0);
    for (int64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        CHECK(t->offset % f->alignment == 0);
        CHECK((const uint8_t *)t->data == f->buf + f->data_offset + t->offset);
        CHECK(f->data_offset + t->offset + t->bytes <= f->size);
    }
}

static void test_stories260k(void) {
    mapfile m;
    gguf_file f;
    if (!open_model("stories260K.gguf", &m, &f)) return;
    CHECK_EQ_INT(f.version, 3);
    CHECK_EQ_INT(f.n_tensors, 48);
    CHECK_EQ_INT(f.n_kv, 19);
    CHECK_EQ_INT(f.alignment, 32);
    CHECK_EQ_INT(f.data_offset, 14176);
    CHECK_EQ_INT(count_type(&f, VT_DTYPE_F32), 48);
    check_layout(&f);
    gguf_str s;
    CHECK_OK(gguf_get_str(&f, "general.architecture", &s));
    CHECK(gguf_str_eq(s, "llama"));
    uint32_t u;
    CHECK_OK(gguf_get_u32(&f, "llama.embedding_length", &u));
    CHECK_EQ_INT(u, 64);
    CHECK_OK(gguf_get_u32(&f, "llama.block_count", &u));
    CHECK_EQ_INT(u, 5);
    CHECK_OK(gguf_get_u32(&f, "llama.attention.head_count_kv", &u));
    CHECK_EQ_INT(u, 4);
    CHECK_OK(gguf_get_u32(&f, "tokenizer.ggml.padding_token_id", &u));
    CHECK_EQ_INT(u, 4294967295u);
    int64_t i64;
    CHECK_OK(gguf_get_i64(&f, "llama.feed_forward_length", &i64));
    CHECK_EQ_INT(i64, 172);
    float eps;
    CHECK_OK(gguf_get_f32(&f, "llama.attention.layer_norm_rms_epsilon", &eps));
    CHECK(eps == 1e-5f);
    const gguf_kv *tokens, *scores, *types;
    CHECK_OK(gguf_get_arr(&f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens));
    CHECK_OK(gguf_get_arr(&f, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &scores));
    CHECK_OK(gguf_get_arr(&f, "tokenizer.ggml.token_type", GGUF_TYPE_COUNT, &types));
    CHECK_EQ_INT(tokens->v.arr.n, 512);
    CHECK_EQ_INT(scores->v.arr.n, 512);
    CHECK_EQ_INT(types->v.arr.type, GGUF_TYPE_INT32);
    CHECK(gguf_str_eq(tokens->v.arr.strs[0], "<unk>"));
    CHECK(gguf_str_eq(tokens->v.arr.strs[3], "<0x00>"));
    CHECK(gguf_str_eq(tokens->v.arr.strs[258], "<0xFF>"));
    CHECK_EQ_INT(gguf_arr_int(types, 0), 2);  /* unknown */
    CHECK_EQ_INT(gguf_arr_int(types, 3), 6);  /* byte */
    CHECK(gguf_arr_float(scores, 0) == 0.0);
    const gguf_tensor *t = gguf_find_tensor(&f, "token_embd.weight");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_INT(t->n_dims, 2);
        CHECK(t->ne[0] == 64 && t->ne[1] == 512 && t->ne[2] == 1 && t->ne[3] == 1);
        CHECK_EQ_INT(t->bytes, 64 * 512 * 4);
        CHECK_EQ_INT(t->offset, 0);
    }
    t = gguf_find_tensor(&f, "blk.4.ffn_down.weight");
    CHECK(t && t->ne[0] == 172 && t->ne[1] == 64);
    CHECK(gguf_find_tensor(&f, "blk.5.ffn_down.weight") == NULL);
    CHECK(gguf_find_tensor(&f, "token_embd.weigh") == NULL);
    /* getter errors */
    CHECK(gguf_get_u32(&f, "llama.rope.freq_base", &u) == VT_E_NOT_FOUND);
    CHECK(strstr(vt_last_error(), "llama.rope.freq_base") != NULL);
    CHECK(gguf_get_u32(&f, "general.name", &u) == VT_E_FORMAT);
    CHECK(strstr(vt_last_error(), "has type str") != NULL);
    CHECK(gguf_get_str(&f, "llama.block_count", &s) == VT_E_FORMAT);
    CHECK(gguf_get_f32(&f, "llama.block_count", &eps) == VT_E_FORMAT);
    bool b;
    CHECK(gguf_get_bool(&f, "llama.block_count", &b) == VT_E_FORMAT);
    CHECK(gguf_get_arr(&f, "tokenizer.ggml.scores", GGUF_TYPE_INT32, &tokens) == VT_E_FORMAT);
    CHECK(gguf_get_arr(&f, "general.name", GGUF_TYPE_COUNT, &tokens) == VT_E_FORMAT);
    gguf_free(&f);
    CHECK(f.kv == NULL && f.n_kv == 0);
    mapfile_close(&m);
}

static void test_tinystories(void) {
    mapfile m;
    gguf_file f;
    if (open_model("TinyStories-656K-Q8_0.gguf", &m, &f)) {
        CHECK_EQ_INT(f.n_tensors, 20);
        CHECK_EQ_INT(count_type(&f, VT_DTYPE_Q8_0), 15);
        CHECK_EQ_INT(count_type(&f, VT_DTYPE_F32), 5);
        check_layout(&f);
        CHECK(gguf_find_tensor(&f, "output.weight") == NULL); /* tied head */
        const gguf_tensor *t = gguf_find_tensor(&f, "token_embd.weight");
        CHECK(t && t->type == VT_DTYPE_Q8_0 && t->ne[0] == 128 && t->ne[1] == 2048);
        if (t) CHECK_EQ_INT(t->bytes, 2048 * (128 / 32) * 34);
        bool add_bos;
        CHECK_OK(gguf_get_bool(&f, "tokenizer.ggml.add_bos_token", &add_bos));
        CHECK(add_bos);
        uint32_t ft;
        CHECK_OK(gguf_get_u32(&f, "general.file_type", &ft));
        CHECK_EQ_INT(ft, 7);
        float base;
        CHECK_OK(gguf_get_f32(&f, "llama.rope.freq_base", &base));
        CHECK(base == 10000.0f);
        gguf_free(&f);
        mapfile_close(&m);
    }
    if (open_model("TinyStories-656K-Q2_K.gguf", &m, &f)) {
        CHECK_EQ_INT(f.n_tensors, 20);
        CHECK_EQ_INT(count_type(&f, VT_DTYPE_IQ4_NL), 14);
        CHECK_EQ_INT(count_type(&f, VT_DTYPE_Q8_0), 1);
        CHECK_EQ_INT(count_type(&f, VT_DTYPE_F32), 5);
        check_layout(&f);
        uint32_t ft;
        CHECK_OK(gguf_get_u32(&f, "general.file_type", &ft));
        CHECK_EQ_INT(ft, 10);
        gguf_free(&f);
        mapfile_close(&m);
    }
    if (open_model("llama-2-tiny-random.gguf", &m, &f)) {
        CHECK_EQ_INT(f.n_tensors, 12);
        CHECK_EQ_INT(count_type(&f, VT_DTYPE_F16), 9);
        CHECK_EQ_INT(count_type(&f, VT_DTYPE_F32), 3);
        check_layout(&f);
        const gguf_kv *tokens;
        CHECK_OK(gguf_get_arr(&f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens));
        CHECK_EQ_INT(tokens->v.arr.n, 32000);
        gguf_free(&f);
        mapfile_close(&m);
    }
}

static void test_vocab_files(void) {
    static const struct {
        const char *file, *model;
        int n_tokens, n_merges;
    } vocabs[] = {
        {"vocab/ggml-vocab-llama-spm.gguf", "llama", 32000, 0},
        {"vocab/ggml-vocab-gpt-2.gguf", "gpt2", 50257, 50000},
        {"vocab/ggml-vocab-falcon.gguf", "gpt2", 65024, 64784},
        {"vocab/ggml-vocab-bert-bge.gguf", "bert", 30522, 0},
        {"vocab/ggml-vocab-deepseek-llm.gguf", "gpt2", 102400, 99757},
        {"vocab/ggml-vocab-phi-3.gguf", "llama", 32064, 0},
    };
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
        mapfile m;
        gguf_file f;
        char name[128];
        snprintf(name, sizeof name, "%s", vocabs[i].file);
        if (!open_model(name, &m, &f)) continue;
        CHECK_EQ_INT(f.n_tensors, 0);
        gguf_str model;
        CHECK_OK(gguf_get_str(&f, "tokenizer.ggml.model", &model));
        CHECK_MSG(gguf_str_eq(model, vocabs[i].model), "%s", vocabs[i].file);
        const gguf_kv *a;
        CHECK_OK(gguf_get_arr(&f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &a));
        CHECK_EQ_INT(a->v.arr.n, vocabs[i].n_tokens);
        if (vocabs[i].n_merges) {
            CHECK_OK(gguf_get_arr(&f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &a));
            CHECK_EQ_INT(a->v.arr.n, vocabs[i].n_merges);
        }
        gguf_free(&f);
        mapfile_close(&m);
    }
}

/* ---- writer ------------------------------------------------------------------ */

static gguf_kv mk_kv(const char *key, gguf_type type) {
    gguf_kv kv;
    memset(&kv, 0, sizeof kv);
    kv.key.ptr = key;
    kv.key.len = strlen(key);
    kv.type = type;
    return kv;
}

static bool read_file(const char *path, mapfile *m) {
    vt_status s = mapfile_open(path, m);
    CHECK_OK(s);
    return s == VT_OK;
}

static void test_round_trip(void) {
    gguf_writer *w;
    CHECK_OK(gguf_writer_create(&w));
    /* every scalar type: the typed setters, the rest through copy_kv */
    CHECK_OK(gguf_writer_set_u32(w, "t.u32", 4000000000u));
    CHECK_OK(gguf_writer_set_i32(w, "t.i32", -2000000000));
    CHECK_OK(gguf_writer_set_f32(w, "t.f32", 0.1f));
    CHECK_OK(gguf_writer_set_bool(w, "t.bool", true));
    CHECK_OK(gguf_writer_set_str(w, "t.str", "h\xc3\xa9llo\n"));
    gguf_kv kv = mk_kv("t.u8", GGUF_TYPE_UINT8);
    kv.v.u64 = 200;
    CHECK_OK(gguf_writer_copy_kv(w, &kv));
    kv = mk_kv("t.i8", GGUF_TYPE_INT8);
    kv.v.i64 = -5;
    CHECK_OK(gguf_writer_copy_kv(w, &kv));
    kv = mk_kv("t.u16", GGUF_TYPE_UINT16);
    kv.v.u64 = 60000;
    CHECK_OK(gguf_writer_copy_kv(w, &kv));
    kv = mk_kv("t.i16", GGUF_TYPE_INT16);
    kv.v.i64 = -30000;
    CHECK_OK(gguf_writer_copy_kv(w, &kv));
    kv = mk_kv("t.u64", GGUF_TYPE_UINT64);
    kv.v.u64 = UINT64_MAX - 1;
    CHECK_OK(gguf_writer_copy_kv(w, &kv));
    kv = mk_kv("t.i64", GGUF_TYPE_INT64);
    kv.v.i64 = INT64_MIN;
    CHECK_OK(gguf_writer_copy_kv(w, &kv));
    kv = mk_kv("t.f64", GGUF_TYPE_FLOAT64);
    kv.v.f64 = -1.0 / 3;
    CHECK_OK(gguf_writer_copy_kv(w, &kv));
    kv = mk_kv("t.bool0", GGUF_TYPE_BOOL);
    kv.v.b = false;
    CHECK_OK(gguf_writer_copy_kv(w, &kv));
    /* arrays of every numeric type, strings, empty */
    const uint8_t a_u8[] = {0, 1, 255};
    const int8_t a_i8[] = {-128, 0, 127};
    const uint16_t a_u16[] = {0, 65535};
    const int16_t a_i16[] = {-32768, 32767};
    const uint32_t a_u32[] = {0, 4294967295u, 7};
    const int32_t a_i32[] = {INT32_MIN, -1, INT32_MAX};
    const float a_f32[] = {1.5f, -0.0f, 3e38f};
    const uint8_t a_bool[] = {1, 0, 1};
    const uint64_t a_u64[] = {UINT64_MAX, 0};
    const int64_t a_i64[] = {INT64_MIN, INT64_MAX};
    const double a_f64[] = {1e300, -2.5};
    CHECK_OK(gguf_writer_set_arr(w, "a.u8", GGUF_TYPE_UINT8, a_u8, 3));
    CHECK_OK(gguf_writer_set_arr(w, "a.i8", GGUF_TYPE_INT8, a_i8, 3));
    CHECK_OK(gguf_writer_set_arr(w, "a.u16", GGUF_TYPE_UINT16, a_u16, 2));
    CHECK_OK(gguf_writer_set_arr(w, "a.i16", GGUF_TYPE_INT16, a_i16, 2));
    CHECK_OK(gguf_writer_set_arr(w, "a.u32", GGUF_TYPE_UINT32, a_u32, 3));
    CHECK_OK(gguf_writer_set_arr(w, "a.i32", GGUF_TYPE_INT32, a_i32, 3));
    CHECK_OK(gguf_writer_set_arr(w, "a.f32", GGUF_TYPE_FLOAT32, a_f32, 3));
    CHECK_OK(gguf_writer_set_arr(w, "a.bool", GGUF_TYPE_BOOL, a_bool, 3));
    CHECK_OK(gguf_writer_set_arr(w, "a.u64", GGUF_TYPE_UINT64, a_u64, 2));
    CHECK_OK(gguf_writer_set_arr(w, "a.i64", GGUF_TYPE_INT64, a_i64, 2));
    CHECK_OK(gguf_writer_set_arr(w, "a.f64", GGUF_TYPE_FLOAT64, a_f64, 2));
    CHECK_OK(gguf_writer_set_arr(w, "a.empty", GGUF_TYPE_INT32, NULL, 0));
    const char *strs[] = {"zero", "", "two \xe2\x96\x81"};
    CHECK_OK(gguf_writer_set_arr_str(w, "a.str", strs, 3));
    CHECK_OK(gguf_writer_set_arr_str(w, "a.str_empty", NULL, 0));
    /* replacing a key keeps its slot and changes its type */
    CHECK_OK(gguf_writer_set_u32(w, "t.replaced", 1));
    CHECK_OK(gguf_writer_set_str(w, "t.replaced", "now a string"));
    /* tensors */
    float t_f32[12];
    for (int i = 0; i < 12; i++) t_f32[i] = (float)i * 0.25f - 1;
    uint8_t t_q8[2 * 2 * 34];
    for (size_t i = 0; i < sizeof t_q8; i++) t_q8[i] = (uint8_t)(i * 7 + 3);
    uint16_t t_f16[5] = {0x3c00, 0xbc00, 0, 0x7bff, 1};
    const int64_t ne_f32[] = {4, 3}, ne_q8[] = {64, 2}, ne_f16[] = {5}, ne_empty[] = {0, 7},
                  ne_4d[] = {2, 1, 2, 3};
    CHECK_OK(gguf_writer_add_tensor(w, "w.f32", VT_DTYPE_F32, 2, ne_f32, t_f32, sizeof t_f32));
    CHECK_OK(gguf_writer_add_tensor(w, "w.q8_0", VT_DTYPE_Q8_0, 2, ne_q8, t_q8, sizeof t_q8));
    CHECK_OK(gguf_writer_add_tensor(w, "w.empty", VT_DTYPE_F32, 2, ne_empty, NULL, 0));
    CHECK_OK(gguf_writer_add_tensor(w, "w.f16", VT_DTYPE_F16, 1, ne_f16, t_f16, sizeof t_f16));
    CHECK_OK(gguf_writer_add_tensor(w, "w.4d", VT_DTYPE_F32, 4, ne_4d, t_f32, sizeof t_f32));
    const char *path = tmp_path("round.gguf");
    CHECK_OK(gguf_writer_write(w, path));
    gguf_writer_destroy(w);
    struct stat st;
    char tmp_name[600];
    snprintf(tmp_name, sizeof tmp_name, "%s.tmp", path);
    CHECK(stat(tmp_name, &st) != 0 && errno == ENOENT); /* renamed away */

    mapfile m;
    if (!read_file(path, &m)) return;
    gguf_file f;
    CHECK_OK(gguf_parse(m.data, m.size, path, &f));
    CHECK_EQ_INT(f.version, 3);
    CHECK_EQ_INT(f.alignment, 32);
    CHECK_EQ_INT(f.n_kv, 13 + 14 + 1);
    CHECK_EQ_INT(f.n_tensors, 5);
    CHECK_EQ_INT(m.size % 32, 0); /* the last tensor is padded too */
    check_layout(&f);
    /* order is insertion order */
    CHECK(gguf_str_eq(f.kv[0].key, "t.u32") && gguf_str_eq(f.kv[f.n_kv - 1].key, "t.replaced"));
    const gguf_kv *k;
    uint32_t u32;
    int64_t i64;
    uint64_t u64;
    float f32;
    bool b;
    gguf_str s;
    CHECK_OK(gguf_get_u32(&f, "t.u32", &u32));
    CHECK_EQ_INT(u32, 4000000000u);
    CHECK_OK(gguf_get_i64(&f, "t.i32", &i64));
    CHECK_EQ_INT(i64, -2000000000);
    CHECK_OK(gguf_get_f32(&f, "t.f32", &f32));
    CHECK(f32 == 0.1f);
    CHECK_OK(gguf_get_bool(&f, "t.bool", &b));
    CHECK(b);
    CHECK_OK(gguf_get_bool(&f, "t.bool0", &b));
    CHECK(!b);
    CHECK_OK(gguf_get_str(&f, "t.str", &s));
    CHECK(gguf_str_eq(s, "h\xc3\xa9llo\n"));
    CHECK((k = gguf_find(&f, "t.u8")) && k->type == GGUF_TYPE_UINT8 && k->v.u64 == 200);
    CHECK((k = gguf_find(&f, "t.i8")) && k->type == GGUF_TYPE_INT8 && k->v.i64 == -5);
    CHECK((k = gguf_find(&f, "t.u16")) && k->type == GGUF_TYPE_UINT16 && k->v.u64 == 60000);
    CHECK((k = gguf_find(&f, "t.i16")) && k->type == GGUF_TYPE_INT16 && k->v.i64 == -30000);
    CHECK((k = gguf_find(&f, "t.u64")) && k->type == GGUF_TYPE_UINT64 && k->v.u64 == UINT64_MAX - 1);
    CHECK((k = gguf_find(&f, "t.i64")) && k->type == GGUF_TYPE_INT64 && k->v.i64 == INT64_MIN);
    CHECK((k = gguf_find(&f, "t.f64")) && k->type == GGUF_TYPE_FLOAT64 && k->v.f64 == -1.0 / 3);
    CHECK_OK(gguf_get_str(&f, "t.replaced", &s));
    CHECK(gguf_str_eq(s, "now a string"));
    /* integer getters convert between widths and check ranges */
    CHECK_OK(gguf_get_u32(&f, "t.u8", &u32));
    CHECK_EQ_INT(u32, 200);
    CHECK_OK(gguf_get_i64(&f, "t.i8", &i64));
    CHECK_EQ_INT(i64, -5);
    CHECK(gguf_get_u32(&f, "t.i8", &u32) == VT_E_RANGE);
    CHECK(gguf_get_u64(&f, "t.i16", &u64) == VT_E_RANGE);
    CHECK(gguf_get_u32(&f, "t.u64", &u32) == VT_E_RANGE);
    CHECK(gguf_get_i64(&f, "t.u64", &i64) == VT_E_RANGE);
    CHECK(strstr(vt_last_error(), "t.u64") != NULL);
    CHECK_OK(gguf_get_u64(&f, "t.u64", &u64));
    CHECK(u64 == UINT64_MAX - 1);
    CHECK_OK(gguf_get_i64(&f, "t.i64", &i64));
    CHECK(i64 == INT64_MIN);
    CHECK_OK(gguf_get_u64(&f, "t.u32", &u64));
    CHECK_EQ_INT(u64, 4000000000u);
    CHECK(gguf_get_i64(&f, "t.f32", &i64) == VT_E_FORMAT);
    CHECK(gguf_get_i64(&f, "t.bool", &i64) == VT_E_FORMAT);
    CHECK_OK(gguf_get_f32(&f, "t.f64", &f32));
    CHECK(f32 == (float)(-1.0 / 3));
    /* arrays: raw bytes equal what was given */
    const struct {
        const char *key;
        gguf_type type;
        const void *data;
        uint64_t n;
    } arrs[] = {
        {"a.u8", GGUF_TYPE_UINT8, a_u8, 3},      {"a.i8", GGUF_TYPE_INT8, a_i8, 3},
        {"a.u16", GGUF_TYPE_UINT16, a_u16, 2},   {"a.i16", GGUF_TYPE_INT16, a_i16, 2},
        {"a.u32", GGUF_TYPE_UINT32, a_u32, 3},   {"a.i32", GGUF_TYPE_INT32, a_i32, 3},
        {"a.f32", GGUF_TYPE_FLOAT32, a_f32, 3},  {"a.bool", GGUF_TYPE_BOOL, a_bool, 3},
        {"a.u64", GGUF_TYPE_UINT64, a_u64, 2},   {"a.i64", GGUF_TYPE_INT64, a_i64, 2},
        {"a.f64", GGUF_TYPE_FLOAT64, a_f64, 2},  {"a.empty", GGUF_TYPE_INT32, NULL, 0},
    };
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) {
        CHECK_OK(gguf_get_arr(&f, arrs[i].key, arrs[i].type, &k));
        if (!k) continue;
        CHECK_EQ_INT(k->v.arr.n, arrs[i].n);
        size_t bytes = (size_t)arrs[i].n * gguf_type_size(arrs[i].type);
        CHECK_MSG(bytes == 0 || !memcmp(k->v.arr.data, arrs[i].data, bytes), "%s", arrs[i].key);
    }
    CHECK_OK(gguf_get_arr(&f, "a.i8", GGUF_TYPE_INT8, &k));
    CHECK_EQ_INT(gguf_arr_int(k, 0), -128);
    CHECK_OK(gguf_get_arr(&f, "a.u32", GGUF_TYPE_UINT32, &k));
    CHECK_EQ_INT(gguf_arr_int(k, 1), 4294967295u);
    CHECK_OK(gguf_get_arr(&f, "a.i64", GGUF_TYPE_INT64, &k));
    CHECK(gguf_arr_int(k, 0) == INT64_MIN);
    CHECK_OK(gguf_get_arr(&f, "a.f64", GGUF_TYPE_FLOAT64, &k));
    CHECK(gguf_arr_float(k, 0) == 1e300);
    CHECK_OK(gguf_get_arr(&f, "a.f32", GGUF_TYPE_FLOAT32, &k));
    CHECK(gguf_arr_float(k, 2) == 3e38f);
    CHECK_OK(gguf_get_arr(&f, "a.str", GGUF_TYPE_STRING, &k));
    CHECK_EQ_INT(k->v.arr.n, 3);
    for (int i = 0; i < 3; i++) CHECK(gguf_str_eq(k->v.arr.strs[i], strs[i]));
    CHECK_OK(gguf_get_arr(&f, "a.str_empty", GGUF_TYPE_STRING, &k));
    CHECK_EQ_INT(k->v.arr.n, 0);
    /* tensors */
    const gguf_tensor *t;
    CHECK((t = gguf_find_tensor(&f, "w.f32")) && t->type == VT_DTYPE_F32 && t->n_dims == 2 && t->ne[0] == 4 &&
          t->ne[1] == 3 && t->ne[2] == 1 && t->bytes == sizeof t_f32 && !memcmp(t->data, t_f32, sizeof t_f32) &&
          t->offset == 0);
    CHECK((t = gguf_find_tensor(&f, "w.q8_0")) && t->type == VT_DTYPE_Q8_0 && t->bytes == sizeof t_q8 &&
          !memcmp(t->data, t_q8, sizeof t_q8) && t->offset == 64);
    CHECK((t = gguf_find_tensor(&f, "w.empty")) && t->bytes == 0 && t->ne[0] == 0 && t->ne[1] == 7 &&
          t->offset == 64 + 160);
    CHECK((t = gguf_find_tensor(&f, "w.f16")) && t->type == VT_DTYPE_F16 && t->n_dims == 1 && t->bytes == 10 &&
          !memcmp(t->data, t_f16, 10) && t->offset == 224);
    CHECK((t = gguf_find_tensor(&f, "w.4d")) && t->n_dims == 4 && t->ne[3] == 3 && t->offset == 256 &&
          !memcmp(t->data, t_f32, sizeof t_f32));

    /* Re-writing a parsed file through copy_kv and add_tensor gives the same bytes. */
    CHECK_OK(gguf_writer_create(&w));
    for (int64_t i = 0; i < f.n_kv; i++) CHECK_OK(gguf_writer_copy_kv(w, &f.kv[i]));
    for (int64_t i = 0; i < f.n_tensors; i++) {
        char name[64];
        const gguf_tensor *ti = &f.tensors[i];
        snprintf(name, sizeof name, "%.*s", (int)ti->name.len, ti->name.ptr);
        CHECK_OK(gguf_writer_add_tensor(w, name, ti->type, ti->n_dims, ti->ne, ti->data, ti->bytes));
    }
    const char *path2 = tmp_path("round2.gguf");
    char path2c[512];
    snprintf(path2c, sizeof path2c, "%s", path2);
    CHECK_OK(gguf_writer_write(w, path2c));
    gguf_writer_destroy(w);
    mapfile m2;
    if (read_file(path2c, &m2)) {
        CHECK_EQ_INT(m2.size, m.size);
        CHECK(m2.size == m.size && !memcmp(m.data, m2.data, m.size));
        mapfile_close(&m2);
    }
    gguf_free(&f);
    mapfile_close(&m);
    unlink(path2c);
    unlink(tmp_path("round.gguf"));
}

static void test_alignment(void) {
    gguf_writer *w;
    CHECK_OK(gguf_writer_create(&w));
    CHECK(gguf_writer_set_u32(w, "general.alignment", 48) == VT_E_INVALID);
    CHECK(gguf_writer_set_u32(w, "general.alignment", 0) == VT_E_INVALID);
    CHECK(gguf_writer_set_i32(w, "general.alignment", 64) == VT_E_INVALID);
    CHECK(gguf_writer_set_str(w, "general.alignment", "64") == VT_E_INVALID);
    CHECK_OK(gguf_writer_set_u32(w, "general.alignment", 256));
    float x[3] = {1, 2, 3};
    const int64_t ne[] = {3};
    CHECK_OK(gguf_writer_add_tensor(w, "a", VT_DTYPE_F32, 1, ne, x, sizeof x));
    CHECK_OK(gguf_writer_add_tensor(w, "b", VT_DTYPE_F32, 1, ne, x, sizeof x));
    const char *path = tmp_path("align.gguf");
    CHECK_OK(gguf_writer_write(w, path));
    gguf_writer_destroy(w);
    mapfile m;
    if (!read_file(path, &m)) return;
    gguf_file f;
    CHECK_OK(gguf_parse(m.data, m.size, path, &f));
    CHECK_EQ_INT(f.alignment, 256);
    CHECK_EQ_INT(f.data_offset, 256);
    CHECK_EQ_INT(m.size, 256 * 3);
    CHECK(f.n_tensors == 2 && f.tensors[1].offset == 256);
    check_layout(&f);
    gguf_free(&f);
    mapfile_close(&m);
    unlink(path);
}

/* Copying every kv of a vocab file reproduces its bytes: the original ends
 * right after the metadata; the copy adds only zero padding. */
static void test_copy_vocab(const char *name) {
    mapfile m;
    gguf_file f;
    if (!open_model(name, &m, &f)) return;
    gguf_writer *w;
    CHECK_OK(gguf_writer_create(&w));
    for (int64_t i = 0; i < f.n_kv; i++) CHECK_OK(gguf_writer_copy_kv(w, &f.kv[i]));
    const char *path = tmp_path("vocab.gguf");
    CHECK_OK(gguf_writer_write(w, path));
    gguf_writer_destroy(w);
    mapfile m2;
    if (read_file(path, &m2)) {
        CHECK(m2.size >= m.size && m2.size - m.size < 32 && m2.size % 32 == 0);
        CHECK_MSG(m2.size >= m.size && !memcmp(m.data, m2.data, m.size), "%s", name);
        bool zeros = true;
        for (size_t i = m.size; i < m2.size; i++) zeros = zeros && ((const uint8_t *)m2.data)[i] == 0;
        CHECK(zeros);
        gguf_file f2;
        CHECK_OK(gguf_parse(m2.data, m2.size, path, &f2));
        CHECK_EQ_INT(f2.n_kv, f.n_kv);
        gguf_free(&f2);
        mapfile_close(&m2);
    }
    unlink(path);
    gguf_free(&f);
    mapfile_close(&m);
}

static void test_writer_errors(void) {
    gguf_writer *w;
    CHECK_OK(gguf_writer_create(&w));
    CHECK(gguf_writer_set_u32(w, "", 1) == VT_E_INVALID);
    char *long_key = malloc(GGUF_MAX_KEY_LEN + 2);
    memset(long_key, 'k', GGUF_MAX_KEY_LEN + 1);
    long_key[GGUF_MAX_KEY_LEN + 1] = 0;
    CHECK(gguf_writer_set_u32(w, long_key, 1) == VT_E_INVALID);
    long_key[GGUF_MAX_KEY_LEN] = 0;
    CHECK_OK(gguf_writer_set_u32(w, long_key, 1)); /* exactly at the limit */
    free(long_key);
    const uint8_t bad_bools[] = {0, 2};
    CHECK(gguf_writer_set_arr(w, "b", GGUF_TYPE_BOOL, bad_bools, 2) == VT_E_INVALID);
    CHECK(gguf_writer_set_arr(w, "s", GGUF_TYPE_STRING, bad_bools, 2) == VT_E_INVALID);
    CHECK(gguf_writer_set_arr(w, "s", GGUF_TYPE_ARRAY, bad_bools, 2) == VT_E_INVALID);
    float x[64] = {0};
    int64_t ne[5] = {33, 1, 1, 1, 1};
    CHECK(gguf_writer_add_tensor(w, "q", VT_DTYPE_Q8_0, 2, ne, x, 34) == VT_E_INVALID);
    CHECK(strstr(vt_last_error(), "block size 32") != NULL);
    ne[0] = 4;
    CHECK(gguf_writer_add_tensor(w, "x", VT_DTYPE_F32, 1, ne, x, 12) == VT_E_INVALID); /* wrong byte count */
    CHECK(strstr(vt_last_error(), "needs 16") != NULL);
    CHECK(gguf_writer_add_tensor(w, "x", VT_DTYPE_F32, 0, ne, x, 16) == VT_E_INVALID);
    CHECK(gguf_writer_add_tensor(w, "x", VT_DTYPE_F32, 5, ne, x, 16) == VT_E_INVALID);
    CHECK(gguf_writer_add_tensor(w, "x", (vt_dtype)16, 1, ne, x, 16) == VT_E_INVALID);
    CHECK(gguf_writer_add_tensor(w, "", VT_DTYPE_F32, 1, ne, x, 16) == VT_E_INVALID);
    CHECK(gguf_writer_add_tensor(w, "0123456789012345678901234567890123456789012345678901234567890123",
                                 VT_DTYPE_F32, 1, ne, x, 16) == VT_E_INVALID);
    int64_t neg[2] = {4, -1};
    CHECK(gguf_writer_add_tensor(w, "n", VT_DTYPE_F32, 2, neg, x, 16) == VT_E_INVALID);
    CHECK_OK(gguf_writer_add_tensor(w, "x", VT_DTYPE_F32, 1, ne, x, 16));
    CHECK(gguf_writer_add_tensor(w, "x", VT_DTYPE_F32, 1, ne, x, 16) == VT_E_INVALID); /* duplicate */
    CHECK(strstr(vt_last_error(), "duplicate") != NULL);

    /* I/O failures: a missing directory, and a write that fails part way (a file
     * size limit of 64 bytes, SIGXFSZ ignored: write returns EFBIG) */
    CHECK(gguf_writer_write(w, "/nonexistent-dir-vt/x.gguf") == VT_E_IO);
    CHECK(strstr(vt_last_error(), "/nonexistent-dir-vt/x.gguf") != NULL);
    const char *path = tmp_path("full.gguf");
    struct rlimit old_lim, lim;
    CHECK(getrlimit(RLIMIT_FSIZE, &old_lim) == 0);
    lim = old_lim;
    lim.rlim_cur = 64;
    void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    const vt_status ws = gguf_writer_write(w, path);
    CHECK(setrlimit(RLIMIT_FSIZE, &old_lim) == 0);
    signal(SIGXFSZ, old_sig);
    CHECK(ws == VT_E_IO);
    CHECK_MSG(strstr(vt_last_error(), strerror(EFBIG)) != NULL, "%s", vt_last_error());
    struct stat st;
    CHECK(lstat(path, &st) != 0); /* nothing was renamed into place */
    char dir[600];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    DIR *d = opendir(dir);
    int left = 0;
    for (struct dirent *e; d && (e = readdir(d));) left += strncmp(e->d_name, "full.gguf.tmp", 13) == 0;
    if (d) closedir(d);
    CHECK_MSG(left == 0, "%d temporary files left", left); /* the temporary is removed */
    gguf_writer_destroy(w);
}

/* Run `vt inspect ARGS`, capturing stdout+stderr into out; returns the exit code. */
static int run_inspect(const char *args, char *out, size_t cap) {
    const char *bin = getenv("VT_BIN");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' inspect %s 2>&1", bin, args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_inspect_cli(void) {
    const char *bin = getenv("VT_BIN");
    if (!bin || access(bin, X_OK) != 0) {
        fprintf(stderr, "skip: VT_BIN not set, vt inspect not tested\n");
        return;
    }
    static char out[1 << 16];
    const char *model = test_model_path("stories260K.gguf");
    if (model) {
        char args[4200];
        snprintf(args, sizeof args, "-n 3 '%s'", model);
        CHECK_EQ_INT(run_inspect(args, out, sizeof out), 0);
        CHECK(strstr(out, "n_tensors:   48\n") != NULL);
        CHECK(strstr(out, "data offset: 14176\n") != NULL);
        CHECK(strstr(out, "llama.embedding_length") && strstr(out, "u32       64\n"));
        CHECK(strstr(out, "[\"<unk>\", \"<s>\", \"</s>\", ... (512 elements)]") != NULL);
        CHECK(strstr(out, "token_embd.weight") && strstr(out, "[64, 512]"));
    }
    const char *src = getenv("VT_SOURCE_DIR");
    if (src) {
        char args[4200];
        snprintf(args, sizeof args, "'%s/tests/data/corrupt/duplicate_key.gguf'", src);
        CHECK_EQ_INT(run_inspect(args, out, sizeof out), 1);
        CHECK(strstr(out, "duplicate_key.gguf: key 'dup.key': duplicate key") != NULL);
    }
    CHECK_EQ_INT(run_inspect("/nonexistent.gguf", out, sizeof out), 1);
    CHECK(strstr(out, "/nonexistent.gguf: cannot open") != NULL);
}

/* Counts that fit the bytes of a big file are still held to absolute limits. */
static void test_count_limits(void) {
    size_t size = (size_t)(GGUF_MAX_KV + 2) * 40;
    uint8_t *buf = calloc(size, 1);
    if (!buf) return;
    memcpy(buf, "GGUF\3\0\0\0", 8);
    uint64_t n = GGUF_MAX_KV + 1;
    memcpy(buf + 16, &n, 8); /* n_kv */
    gguf_file f;
    CHECK(gguf_parse(buf, size, "big.gguf", &f) == VT_E_FORMAT);
    CHECK(strstr(vt_last_error(), "n_kv 1048577 exceeds the limit of 1048576") != NULL);
    memset(buf + 16, 0, 8);
    n = GGUF_MAX_TENSORS + 1;
    memcpy(buf + 8, &n, 8); /* n_tensors */
    CHECK(gguf_parse(buf, size, "big.gguf", &f) == VT_E_FORMAT);
    CHECK(strstr(vt_last_error(), "n_tensors 1048577 exceeds the limit of 1048576") != NULL);
    free(buf);
}

static void test_escape(void) {
    char buf[64];
    gguf_str s = {"a'b\\c\n\x01\xe2\x96\x81\xff", 11};
    CHECK(!strcmp(gguf_str_escape(s, buf, sizeof buf, 100), "a\\'b\\\\c\\n\\x01\xe2\x96\x81\\xff"));
    gguf_str l = {"abcdefghij", 10};
    CHECK(!strcmp(gguf_str_escape(l, buf, sizeof buf, 4), "abcd..."));
    CHECK(!strcmp(gguf_str_escape(l, buf, 8, 100), "abcd..."));
    gguf_str e = {"", 0};
    CHECK(!strcmp(gguf_str_escape(e, buf, sizeof buf, 10), ""));
    CHECK(!strcmp(gguf_type_name(GGUF_TYPE_FLOAT32), "f32"));
    CHECK(!strcmp(gguf_type_name((gguf_type)99), "invalid"));
    CHECK_EQ_INT(gguf_type_size(GGUF_TYPE_INT16), 2);
    CHECK_EQ_INT(gguf_type_size(GGUF_TYPE_STRING), 0);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/vt_test_gguf_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_stories260k();
    test_tinystories();
    test_vocab_files();
    test_round_trip();
    test_alignment();
    test_copy_vocab("vocab/ggml-vocab-llama-spm.gguf");
    test_copy_vocab("vocab/ggml-vocab-gpt-2.gguf");
    test_copy_vocab("vocab/ggml-vocab-bert-bge.gguf");
    test_writer_errors();
    test_count_limits();
    test_inspect_cli();
    test_escape();
    rmdir(tmpdir);
    return test_finish();
}
