/* GGUF v3 writer. Keys keep the order they were first set in; tensors keep the
 * order they were added. The layout matches ggml's: metadata, zero padding to the
 * alignment, then each tensor's data padded to the alignment, so tensor i sits at
 * the sum of the padded sizes before it. Setters validate what the parser would
 * reject (empty or over-long keys, a general.alignment that is not a u32 power
 * of two, shapes that do not match the data), so every written file parses. */
#include "gguf/gguf.h"

#include "base/outfile.h"
#include "base/size.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf_write.c copies host numbers as little-endian file bytes"
#endif

typedef struct wbytes {
    char *ptr;
    uint64_t len;
} wbytes;

typedef struct wkv {
    wbytes key;
    gguf_type type;
    uint8_t scalar[8]; /* numeric scalar, little-endian, gguf_type_size(type) bytes */
    wbytes str;        /* STRING */
    gguf_type arr_type;
    uint64_t arr_n;
    void *arr_data;   /* numeric arrays: arr_n * size bytes */
    wbytes *arr_strs; /* string arrays: (arr_n) */
} wkv;

typedef struct wtensor {
    char *name;
    vt_dtype type;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    const void *data;
    size_t bytes;
} wtensor;

struct gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *tensors;
    size_t n_tensors, cap_tensors;
};

vt_status gguf_writer_create(gguf_writer **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return vt_errorf(VT_E_NOMEM, "gguf writer: out of memory");
    return VT_OK;
}

static void wkv_clear(wkv *kv) {
    free(kv->str.ptr);
    free(kv->arr_data);
    if (kv->arr_strs)
        for (uint64_t i = 0; i < kv->arr_n; i++) free(kv->arr_strs[i].ptr);
    free(kv->arr_strs);
    kv->str = (wbytes){0};
    kv->arr_data = NULL;
    kv->arr_strs = NULL;
    kv->arr_n = 0;
}

void gguf_writer_destroy(gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        wkv_clear(&w->kv[i]);
        free(w->kv[i].key.ptr);
    }
    free(w->kv);
    for (size_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->tensors);
    free(w);
}

static bool dup_bytes(const void *p, uint64_t n, wbytes *out) {
    out->ptr = malloc(n ? (size_t)n : 1);
    if (!out->ptr) return false;
    if (n) memcpy(out->ptr, p, (size_t)n);
    out->len = n;
    return true;
}

static bool grow(void **arr, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return true;
    size_t nc = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, nc * elem);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    return true;
}

/* The slot for `key` (len bytes): the existing one, emptied, or a new one. */
static vt_status slot_for(gguf_writer *w, const char *key, size_t len, wkv **out) {
    if (len == 0) return vt_errorf(VT_E_INVALID, "gguf writer: empty key");
    if (len > GGUF_MAX_KEY_LEN)
        return vt_errorf(VT_E_INVALID, "gguf writer: key of %zu bytes exceeds the limit of %d", len, GGUF_MAX_KEY_LEN);
    if (memchr(key, 0, len)) return vt_errorf(VT_E_INVALID, "gguf writer: key contains a NUL byte");
    for (size_t i = 0; i < w->n_kv; i++) {
        if (w->kv[i].key.len == len && !memcmp(w->kv[i].key.ptr, key, len)) {
            wkv_clear(&w->kv[i]);
            *out = &w->kv[i];
            return VT_OK;
        }
    }
    if (!grow((void **)&w->kv, &w->cap_kv, w->n_kv, sizeof *w->kv))
        return vt_errorf(VT_E_NOMEM, "gguf writer: out of memory");
    wkv *kv = &w->kv[w->n_kv];
    memset(kv, 0, sizeof *kv);
    if (!dup_bytes(key, len, &kv->key)) return vt_errorf(VT_E_NOMEM, "gguf writer: out of memory");
    w->n_kv++;
    *out = kv;
    return VT_OK;
}

static bool is_alignment_key(const char *key, size_t len) {
    return len == strlen("general.alignment") && !memcmp(key, "general.alignment", len);
}

static vt_status set_scalar(gguf_writer *w, const char *key, gguf_type type, const void *v) {
    size_t len = strlen(key);
    if (is_alignment_key(key, len)) {
        if (type != GGUF_TYPE_UINT32)
            return vt_errorf(VT_E_INVALID, "gguf writer: general.alignment must be u32, not %s", gguf_type_name(type));
        uint32_t a;
        memcpy(&a, v, 4);
        if (a == 0 || (a & (a - 1)))
            return vt_errorf(VT_E_INVALID, "gguf writer: general.alignment %" PRIu32 " is not a power of two", a);
    }
    wkv *kv;
    VT_TRY(slot_for(w, key, len, &kv));
    kv->type = type;
    memset(kv->scalar, 0, sizeof kv->scalar);
    memcpy(kv->scalar, v, gguf_type_size(type));
    return VT_OK;
}

vt_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) {
    return set_scalar(w, key, GGUF_TYPE_UINT32, &v);
}
vt_status gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v) {
    return set_scalar(w, key, GGUF_TYPE_INT32, &v);
}
vt_status gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v) {
    return set_scalar(w, key, GGUF_TYPE_UINT64, &v);
}
vt_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v) {
    return set_scalar(w, key, GGUF_TYPE_FLOAT32, &v);
}
vt_status gguf_writer_set_bool(gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    return set_scalar(w, key, GGUF_TYPE_BOOL, &b);
}

static vt_status set_str_bytes(gguf_writer *w, const char *key, size_t key_len, const char *v, uint64_t len) {
    if (len > GGUF_MAX_STRING_LEN)
        return vt_errorf(VT_E_INVALID, "gguf writer: key '%.*s': string of %" PRIu64 " bytes exceeds the limit",
                         (int)(key_len < 200 ? key_len : 200), key, len);
    if (is_alignment_key(key, key_len))
        return vt_errorf(VT_E_INVALID, "gguf writer: general.alignment must be u32, not str");
    wkv *kv;
    VT_TRY(slot_for(w, key, key_len, &kv));
    kv->type = GGUF_TYPE_STRING;
    if (!dup_bytes(v, len, &kv->str)) return vt_errorf(VT_E_NOMEM, "gguf writer: out of memory");
    return VT_OK;
}

vt_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *v) {
    return set_str_bytes(w, key, strlen(key), v, strlen(v));
}

static vt_status set_arr_bytes(gguf_writer *w, const char *key, size_t key_len, gguf_type elem_type,
                               const void *data, uint64_t n) {
    size_t es = gguf_type_size(elem_type);
    if (es == 0)
        return vt_errorf(VT_E_INVALID, "gguf writer: array element type %d is not numeric", (int)elem_type);
    if (n > GGUF_MAX_ARRAY_LEN)
        return vt_errorf(VT_E_INVALID, "gguf writer: array of %" PRIu64 " elements exceeds the limit", n);
    if (is_alignment_key(key, key_len))
        return vt_errorf(VT_E_INVALID, "gguf writer: general.alignment must be u32, not an array");
    if (elem_type == GGUF_TYPE_BOOL)
        for (uint64_t i = 0; i < n; i++)
            if (((const uint8_t *)data)[i] > 1)
                return vt_errorf(VT_E_INVALID, "gguf writer: bool array element %" PRIu64 " is not 0 or 1", i);
    wkv *kv;
    VT_TRY(slot_for(w, key, key_len, &kv));
    kv->type = GGUF_TYPE_ARRAY;
    kv->arr_type = elem_type;
    wbytes b;
    if (!dup_bytes(data, n * es, &b)) return vt_errorf(VT_E_NOMEM, "gguf writer: out of memory");
    kv->arr_data = b.ptr;
    kv->arr_n = n;
    return VT_OK;
}

vt_status gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type elem_type, const void *data, uint64_t n) {
    return set_arr_bytes(w, key, strlen(key), elem_type, data, n);
}

/* strs[i] has lens[i] bytes (lens NULL: NUL-terminated C strings). */
static vt_status set_arr_strs(gguf_writer *w, const char *key, size_t key_len, const void *strs_v, bool counted,
                              uint64_t n) {
    if (n > GGUF_MAX_ARRAY_LEN)
        return vt_errorf(VT_E_INVALID, "gguf writer: array of %" PRIu64 " strings exceeds the limit", n);
    if (is_alignment_key(key, key_len))
        return vt_errorf(VT_E_INVALID, "gguf writer: general.alignment must be u32, not an array");
    wkv *kv;
    VT_TRY(slot_for(w, key, key_len, &kv));
    kv->type = GGUF_TYPE_ARRAY;
    kv->arr_type = GGUF_TYPE_STRING;
    kv->arr_strs = calloc(n ? (size_t)n : 1, sizeof *kv->arr_strs);
    if (!kv->arr_strs) return vt_errorf(VT_E_NOMEM, "gguf writer: out of memory");
    kv->arr_n = n;
    for (uint64_t i = 0; i < n; i++) {
        const char *p;
        uint64_t len;
        if (counted) {
            gguf_str s = ((const gguf_str *)strs_v)[i];
            p = s.ptr, len = s.len;
        } else {
            p = ((const char *const *)strs_v)[i];
            len = strlen(p);
        }
        if (len > GGUF_MAX_STRING_LEN)
            return vt_errorf(VT_E_INVALID, "gguf writer: string %" PRIu64 " of %" PRIu64 " bytes exceeds the limit", i,
                             len);
        if (!dup_bytes(p, len, &kv->arr_strs[i])) return vt_errorf(VT_E_NOMEM, "gguf writer: out of memory");
    }
    return VT_OK;
}

vt_status gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *strs, uint64_t n) {
    return set_arr_strs(w, key, strlen(key), strs, false, n);
}

vt_status gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv) {
    const char *key = kv->key.ptr;
    size_t key_len = (size_t)kv->key.len;
    switch (kv->type) {
    case GGUF_TYPE_STRING: return set_str_bytes(w, key, key_len, kv->v.str.ptr, kv->v.str.len);
    case GGUF_TYPE_ARRAY:
        if (kv->v.arr.type == GGUF_TYPE_STRING) return set_arr_strs(w, key, key_len, kv->v.arr.strs, true, kv->v.arr.n);
        return set_arr_bytes(w, key, key_len, kv->v.arr.type, kv->v.arr.data, kv->v.arr.n);
    default: break;
    }
    size_t es = gguf_type_size(kv->type);
    if (es == 0) return vt_errorf(VT_E_INVALID, "gguf writer: value type %d is invalid", (int)kv->type);
    uint8_t b[8] = {0};
    switch (kv->type) {
    case GGUF_TYPE_FLOAT32: {
        float f = (float)kv->v.f64;
        memcpy(b, &f, 4);
        break;
    }
    case GGUF_TYPE_FLOAT64: memcpy(b, &kv->v.f64, 8); break;
    case GGUF_TYPE_BOOL: b[0] = kv->v.b; break;
    default: {
        uint64_t u = kv->v.u64; /* the low bytes of the widened value are the value (two's complement) */
        memcpy(b, &u, 8);
        break;
    }
    }
    /* set_scalar wants a NUL-terminated key */
    char stack[256];
    char *k = key_len < sizeof stack ? stack : malloc(key_len + 1);
    if (!k) return vt_errorf(VT_E_NOMEM, "gguf writer: out of memory");
    memcpy(k, key, key_len);
    k[key_len] = 0;
    vt_status s = key_len == strlen(k) ? set_scalar(w, k, kv->type, b)
                                       : vt_errorf(VT_E_INVALID, "gguf writer: key contains a NUL byte");
    if (k != stack) free(k);
    return s;
}

vt_status gguf_writer_add_tensor(gguf_writer *w, const char *name, vt_dtype type, uint32_t n_dims, const int64_t *ne,
                                 const void *data, size_t bytes) {
    size_t len = strlen(name);
    if (len == 0) return vt_errorf(VT_E_INVALID, "gguf writer: empty tensor name");
    if (len > GGUF_MAX_TENSOR_NAME_LEN)
        return vt_errorf(VT_E_INVALID, "gguf writer: tensor name '%s' is %zu bytes, over the limit of %d", name, len,
                         GGUF_MAX_TENSOR_NAME_LEN);
    for (size_t i = 0; i < w->n_tensors; i++)
        if (!strcmp(w->tensors[i].name, name))
            return vt_errorf(VT_E_INVALID, "gguf writer: duplicate tensor name '%s'", name);
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return vt_errorf(VT_E_INVALID, "gguf writer: tensor '%s': n_dims %" PRIu32 " is not in 1..%d", name, n_dims,
                         GGUF_MAX_DIMS);
    const quant_traits *tr = quant_traits_get(type);
    if (!tr) return vt_errorf(VT_E_INVALID, "gguf writer: tensor '%s': unknown type %d", name, (int)type);
    wtensor t = {.type = type, .n_dims = n_dims, .data = data, .bytes = bytes};
    int64_t nelem = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        t.ne[d] = (uint32_t)d < n_dims ? ne[d] : 1;
        if (t.ne[d] < 0)
            return vt_errorf(VT_E_INVALID, "gguf writer: tensor '%s': ne[%d] = %" PRId64 " is negative", name, d,
                             t.ne[d]);
        if (!i64_mul(nelem, t.ne[d], &nelem))
            return vt_errorf(VT_E_INVALID, "gguf writer: tensor '%s': element count overflows", name);
    }
    size_t want;
    bool ok = quant_row_bytes(type, t.ne[0], &want);
    if (!ok)
        return vt_errorf(VT_E_INVALID, "gguf writer: tensor '%s': ne[0] = %" PRId64 " is not a multiple of the %s block size %" PRId64,
                         name, t.ne[0], tr->name, tr->block_elems);
    for (int d = 1; d < GGUF_MAX_DIMS; d++) ok = ok && size_mul(want, (size_t)t.ne[d], &want);
    if (!ok) return vt_errorf(VT_E_INVALID, "gguf writer: tensor '%s': byte size overflows", name);
    if (want != bytes)
        return vt_errorf(VT_E_INVALID, "gguf writer: tensor '%s': %zu bytes given, the shape in %s needs %zu", name,
                         bytes, tr->name, want);
    if (bytes && !data) return vt_errorf(VT_E_INVALID, "gguf writer: tensor '%s': no data", name);
    if (!grow((void **)&w->tensors, &w->cap_tensors, w->n_tensors, sizeof *w->tensors))
        return vt_errorf(VT_E_NOMEM, "gguf writer: out of memory");
    t.name = malloc(len + 1);
    if (!t.name) return vt_errorf(VT_E_NOMEM, "gguf writer: out of memory");
    memcpy(t.name, name, len + 1);
    w->tensors[w->n_tensors++] = t;
    return VT_OK;
}

/* ---- output ------------------------------------------------------------------- */

typedef struct sink {
    FILE *f;
    uint64_t pos;
    int err; /* first errno */
} sink;

static void put(sink *o, const void *p, size_t n) {
    if (o->err || n == 0) return;
    errno = 0;
    if (fwrite(p, 1, n, o->f) != n) o->err = errno ? errno : EIO;
    o->pos += n;
}
static void put_u32(sink *o, uint32_t v) { put(o, &v, 4); }
static void put_u64(sink *o, uint64_t v) { put(o, &v, 8); }
static void put_bytes(sink *o, wbytes b) {
    put_u64(o, b.len);
    put(o, b.ptr, (size_t)b.len);
}
static void pad_to(sink *o, size_t alignment) {
    static const uint8_t zeros[64];
    while (o->pos % alignment) {
        size_t n = alignment - (size_t)(o->pos % alignment);
        put(o, zeros, n < sizeof zeros ? n : sizeof zeros);
        if (o->err) return;
    }
}

static size_t writer_alignment(const gguf_writer *w) {
    for (size_t i = 0; i < w->n_kv; i++) {
        const wkv *kv = &w->kv[i];
        if (is_alignment_key(kv->key.ptr, (size_t)kv->key.len) && kv->type == GGUF_TYPE_UINT32) {
            uint32_t a;
            memcpy(&a, kv->scalar, 4);
            return a;
        }
    }
    return GGUF_DEFAULT_ALIGNMENT;
}

static void write_all(const gguf_writer *w, sink *o, size_t alignment) {
    put(o, "GGUF", 4);
    put_u32(o, 3);
    put_u64(o, w->n_tensors);
    put_u64(o, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        const wkv *kv = &w->kv[i];
        put_bytes(o, kv->key);
        put_u32(o, kv->type);
        if (kv->type == GGUF_TYPE_STRING) {
            put_bytes(o, kv->str);
        } else if (kv->type == GGUF_TYPE_ARRAY) {
            put_u32(o, kv->arr_type);
            put_u64(o, kv->arr_n);
            if (kv->arr_type == GGUF_TYPE_STRING)
                for (uint64_t j = 0; j < kv->arr_n; j++) put_bytes(o, kv->arr_strs[j]);
            else
                put(o, kv->arr_data, (size_t)(kv->arr_n * gguf_type_size(kv->arr_type)));
        } else {
            put(o, kv->scalar, gguf_type_size(kv->type));
        }
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        put_bytes(o, (wbytes){t->name, strlen(t->name)});
        put_u32(o, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) put_u64(o, (uint64_t)t->ne[d]);
        put_u32(o, (uint32_t)t->type);
        put_u64(o, offset);
        offset += size_align_up(t->bytes, alignment);
    }
    pad_to(o, alignment);
    for (size_t i = 0; i < w->n_tensors; i++) {
        put(o, w->tensors[i].data, w->tensors[i].bytes);
        pad_to(o, alignment);
    }
}

vt_status gguf_writer_write(gguf_writer *w, const char *path) {
    outfile of;
    vt_status s = outfile_open(path, &of);
    if (s != VT_OK) return s;
    sink o = {.f = of.f};
    write_all(w, &o, writer_alignment(w));
    if (o.err) {
        s = vt_errorf(VT_E_IO, "%s: write failed at byte %" PRIu64 ": %s", of.tmp, o.pos, strerror(o.err));
        outfile_abort(&of);
        return s;
    }
    return outfile_commit(&of);
}
