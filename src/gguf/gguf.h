/* GGUF v2/v3 reader and writer.
 *
 * File format (little-endian):
 *   magic "GGUF" | u32 version (2 or 3) | u64 n_tensors | u64 n_kv
 *   n_kv x { string key | u32 value_type | value }
 *   n_tensors x { string name | u32 n_dims | n_dims x u64 ne | u32 type | u64 offset }
 *   padding to `general.alignment` (default 32)
 *   tensor data; each tensor at data_start + offset, offset a multiple of alignment
 * A string is u64 length + bytes (no NUL). An array is u32 element type + u64 count +
 * elements. ne[0] is the fastest-varying (row) dimension.
 *
 * The parser is pure: it reads only the (pointer, length) it is given, so it can be
 * fuzzed, and it validates every count, length, offset, shape and type against the
 * bytes that remain and sane limits before using it. Strings and arrays point into
 * the caller's buffer, which must outlive the gguf_file. */
#ifndef VT_GGUF_GGUF_H
#define VT_GGUF_GGUF_H

#include "base/status.h"
#include "quant/quant.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} gguf_type;

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

typedef struct gguf_str {
    const char *ptr; /* into the file buffer, not NUL-terminated */
    uint64_t len;
} gguf_str;

typedef struct gguf_kv {
    gguf_str key;
    gguf_type type;
    union {
        uint64_t u64; /* every unsigned integer type, widened */
        int64_t i64;  /* every signed integer type, widened */
        double f64;   /* FLOAT32 and FLOAT64, widened */
        bool b;
        gguf_str str;
        struct {
            gguf_type type;     /* element type (never ARRAY) */
            uint64_t n;         /* element count */
            const void *data;   /* raw elements in the file (numbers) */
            gguf_str *strs;     /* (n) for string arrays, allocated by the parser */
        } arr;
    } v;
} gguf_kv;

typedef struct gguf_tensor {
    gguf_str name;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS]; /* unused dims are 1 */
    vt_dtype type;
    uint64_t offset;  /* relative to the data section */
    size_t bytes;     /* exact size of the tensor's data */
    const void *data; /* into the file buffer */
} gguf_tensor;

typedef struct gguf_file {
    uint32_t version;
    size_t alignment;
    int64_t n_kv;
    gguf_kv *kv; /* (n_kv) */
    int64_t n_tensors;
    gguf_tensor *tensors; /* (n_tensors) */
    size_t data_offset;   /* start of the data section in the buffer */
    const uint8_t *buf;
    size_t size;
} gguf_file;

/* Parse the GGUF in (data, size). `name` (usually the path) prefixes every error
 * message. On success *out owns small allocations; free with gguf_free. */
vt_status gguf_parse(const void *data, size_t size, const char *name, gguf_file *out);
void gguf_free(gguf_file *f);

/* Lookup. NULL when absent. */
const gguf_kv *gguf_find(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

/* Typed getters: VT_E_NOT_FOUND when absent (message names the key),
 * VT_E_FORMAT when the stored type cannot represent the requested one. Integer
 * getters accept any integer type whose value fits. */
vt_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out);
vt_status gguf_get_i64(const gguf_file *f, const char *key, int64_t *out);
vt_status gguf_get_f32(const gguf_file *f, const char *key, float *out);
vt_status gguf_get_bool(const gguf_file *f, const char *key, bool *out);
vt_status gguf_get_str(const gguf_file *f, const char *key, gguf_str *out);
/* An array of the given element type (GGUF_TYPE_COUNT accepts any). */
vt_status gguf_get_arr(const gguf_file *f, const char *key, gguf_type elem_type, const gguf_kv **out);

/* True if s equals the NUL-terminated c. */
bool gguf_str_eq(gguf_str s, const char *c);
const char *gguf_type_name(gguf_type t);

/* ---- helpers added with the implementation -------------------------------- */

/* Limits the parser enforces. */
#define GGUF_MAX_STRING_LEN ((uint64_t)1 << 30) /* bytes of a string value */
#define GGUF_MAX_KEY_LEN (64 * 1024)            /* bytes of a metadata key */
#define GGUF_MAX_TENSOR_NAME_LEN 63             /* bytes of a tensor name (as ggml) */
#define GGUF_MAX_ARRAY_LEN ((uint64_t)1 << 30)  /* elements of one array */
#define GGUF_MAX_KV ((uint64_t)1 << 20)         /* key/value pairs in a file */
#define GGUF_MAX_TENSORS ((uint64_t)1 << 20)    /* tensors in a file */

/* Bytes of one element of a numeric type; 0 for STRING, ARRAY and invalid types. */
size_t gguf_type_size(gguf_type t);

/* Element i of a numeric array kv. The raw data is little-endian and may be
 * unaligned; these read it safely. VT_ASSERT (caller bug): kv is an array, i < n,
 * and the element type is an integer/bool type (gguf_arr_int; UINT64 values above
 * INT64_MAX wrap) or FLOAT32/FLOAT64 (gguf_arr_float). */
int64_t gguf_arr_int(const gguf_kv *kv, uint64_t i);
double gguf_arr_float(const gguf_kv *kv, uint64_t i);

/* Unsigned 64-bit getter: any integer type with a non-negative value. */
vt_status gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out);

/* Write s into out (capacity cap >= 8, always NUL-terminated) with control bytes,
 * quote and backslash escaped (\n, \t, \xHH) and invalid UTF-8 as \xHH; at most
 * max_chars source bytes, then "..." when truncated. Returns out. */
char *gguf_str_escape(gguf_str s, char *out, size_t cap, size_t max_chars);

/* ---- writer ---------------------------------------------------------------- */

typedef struct gguf_writer gguf_writer;

vt_status gguf_writer_create(gguf_writer **out);
void gguf_writer_destroy(gguf_writer *w);

/* Setters copy key and value. Setting an existing key replaces it. */
vt_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
vt_status gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
vt_status gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v);
vt_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
vt_status gguf_writer_set_bool(gguf_writer *w, const char *key, bool v);
vt_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *v);
/* A numeric array of n elements of elem_type (not STRING/ARRAY), copied. */
vt_status gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type elem_type,
                              const void *data, uint64_t n);
vt_status gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *strs,
                                  uint64_t n);
/* Copy one key/value (any type, arrays included) from a parsed file. */
vt_status gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv);

/* Add a tensor. `data` (bytes, which must equal the size of the shape in `type`)
 * is referenced, not copied: it must stay valid until gguf_writer_write returns. */
vt_status gguf_writer_add_tensor(gguf_writer *w, const char *name, vt_dtype type,
                                 uint32_t n_dims, const int64_t *ne, const void *data,
                                 size_t bytes);

/* Write the file (v3, alignment 32 unless general.alignment was set) through
 * base/outfile: a temporary file in the same folder, fsync'd and renamed into
 * place when complete, removed on failure (and on a signal, where the program
 * called outfile_cleanup_on_signals), so the final name never holds a partial
 * file. */
vt_status gguf_writer_write(gguf_writer *w, const char *path);

#endif
