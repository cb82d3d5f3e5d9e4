/* libFuzzer target for the GGUF parser: parse, touch everything the result
 * points at (so ASan checks every pointer and length), free.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DVT_FUZZ=ON
 *   cmake --build build-fuzz --target fuzz_gguf
 *   ./build-fuzz/fuzz_gguf -max_total_time=60 fuzz/corpus/gguf */
#include "gguf/gguf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static volatile uint64_t sink_;

static void touch(const void *p, uint64_t n) {
    const uint8_t *b = p;
    uint64_t h = 0;
    for (uint64_t i = 0; i < n; i++) h = h * 31 + b[i];
    sink_ += h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* an exact-size heap copy: reads past the end trip ASan */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    gguf_file f;
    if (gguf_parse(copy, size, "fuzz", &f) == VT_OK) {
        for (int64_t i = 0; i < f.n_kv; i++) {
            const gguf_kv *kv = &f.kv[i];
            touch(kv->key.ptr, kv->key.len);
            char esc[64];
            gguf_str_escape(kv->key, esc, sizeof esc, 32);
            if (kv->type == GGUF_TYPE_STRING) touch(kv->v.str.ptr, kv->v.str.len);
            if (kv->type != GGUF_TYPE_ARRAY) continue;
            if (kv->v.arr.type == GGUF_TYPE_STRING) {
                for (uint64_t j = 0; j < kv->v.arr.n; j++) touch(kv->v.arr.strs[j].ptr, kv->v.arr.strs[j].len);
            } else if (kv->v.arr.type == GGUF_TYPE_FLOAT32 || kv->v.arr.type == GGUF_TYPE_FLOAT64) {
                for (uint64_t j = 0; j < kv->v.arr.n; j++) sink_ += (uint64_t)(gguf_arr_float(kv, j) != 0);
            } else {
                for (uint64_t j = 0; j < kv->v.arr.n; j++) sink_ += (uint64_t)gguf_arr_int(kv, j);
            }
        }
        for (int64_t i = 0; i < f.n_tensors; i++) {
            const gguf_tensor *t = &f.tensors[i];
            touch(t->name.ptr, t->name.len);
            if (t->bytes) {
                const uint8_t *d = t->data;
                sink_ += d[0] + d[t->bytes - 1];
            }
        }
        uint32_t u;
        int64_t i64;
        float x;
        bool b;
        gguf_str s;
        const gguf_kv *a;
        (void)gguf_get_u32(&f, "general.alignment", &u);
        (void)gguf_get_i64(&f, "llama.block_count", &i64);
        (void)gguf_get_f32(&f, "llama.rope.freq_base", &x);
        (void)gguf_get_bool(&f, "tokenizer.ggml.add_bos_token", &b);
        (void)gguf_get_str(&f, "general.architecture", &s);
        (void)gguf_get_arr(&f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &a);
        (void)gguf_find_tensor(&f, "token_embd.weight");
        gguf_free(&f);
    }
    free(copy);
    return 0;
}
