/* GGUF v2/v3 parser over a buffer (the format is described in gguf.h).
 *
 * Every number read from the buffer is checked before it is used: counts against
 * the bytes that remain (each kv needs at least 14 bytes, each tensor info 33),
 * string lengths against the remaining bytes and a limit, shapes against int64
 * overflow, byte sizes against size_t overflow, tensor data against the end of the
 * buffer and against each other. What ggml accepts is the reference; vt is
 * stricter where ggml is lenient without a reason: bool bytes must be 0 or 1,
 * n_dims must be 1..4, keys and tensor names may not be empty or hold NUL bytes.
 * Like ggml, a dimension of 0 is allowed (an empty tensor) and a negative one is
 * not. Unlike ggml, tensor data need not be packed in order: any aligned,
 * non-overlapping layout inside the buffer is accepted. */
#include "gguf/gguf.h"

#include "base/size.h"

#include <inttypes.h>
#include <stdarg.h>
#include <string.h>

#define KV_MIN_BYTES 14     /* key len 8 + key 1 + type 4 + value 1 */
#define TENSOR_MIN_BYTES 33 /* name len 8 + name 1 + n_dims 4 + ne 8 + type 4 + offset 8 */
#define HEADER_BYTES 24

typedef struct parser {
    const uint8_t *buf;
    size_t size;
    size_t pos;
    const char *name; /* file name for messages */
    const char *what; /* "key", "tensor" or NULL (header) */
    int64_t index;
    gguf_str item; /* the key or tensor name once read */
    int64_t elem;  /* array element index or -1 */
} parser;

/* ---- small helpers ---------------------------------------------------------- */

static const char *const type_names[GGUF_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64",
};

const char *gguf_type_name(gguf_type t) {
    return (unsigned)t < GGUF_TYPE_COUNT ? type_names[t] : "invalid";
}

size_t gguf_type_size(gguf_type t) {
    switch (t) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64:
    case GGUF_TYPE_INT64:
    case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

/* ggml's type names, for messages about types vt does not implement. */
static const char *ggml_type_name_of(uint32_t id) {
    static const char *const names[] = {
        "f32",     "f16",    "q4_0",    "q4_1",  "q4_2 (removed)", "q4_3 (removed)",
        "q5_0",    "q5_1",   "q8_0",    "q8_1",  "q2_K",           "q3_K",
        "q4_K",    "q5_K",   "q6_K",    "q8_K",  "iq2_xxs",        "iq2_xs",
        "iq3_xxs", "iq1_s",  "iq4_nl",  "iq3_s", "iq2_s",          "iq4_xs",
        "i8",      "i16",    "i32",     "i64",   "f64",            "iq1_m",
        "bf16",    "q4_0_4_4 (removed)", "q4_0_4_8 (removed)", "q4_0_8_8 (removed)",
        "tq1_0",   "tq2_0",  "iq4_nl_4_4 (removed)", "iq4_nl_4_8 (removed)",
        "iq4_nl_8_8 (removed)", "mxfp4", "nvfp4", "q1_0", "q2_0",
    };
    return id < sizeof names / sizeof names[0] ? names[id] : NULL;
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static void fmt_size(char *out, size_t cap, uint64_t n) {
    if (n < 1024)
        snprintf(out, cap, "%" PRIu64 " B", n);
    else if (n < ((uint64_t)1 << 20))
        snprintf(out, cap, "%.1f KiB", (double)n / 1024);
    else if (n < ((uint64_t)1 << 30))
        snprintf(out, cap, "%.1f MiB", (double)n / (1 << 20));
    else
        snprintf(out, cap, "%.2f GiB", (double)n / (1 << 30));
}

/* Length of the valid UTF-8 sequence at p (n bytes available), 0 if invalid. */
static size_t utf8_len(const uint8_t *p, size_t n) {
    uint8_t c = p[0];
    size_t len;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4;
    else
        return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    return len;
}

char *gguf_str_escape(gguf_str s, char *out, size_t cap, size_t max_chars) {
    VT_ASSERT(cap >= 8);
    const uint8_t *p = (const uint8_t *)s.ptr;
    size_t n = s.len < max_chars ? (size_t)s.len : max_chars;
    size_t o = 0;
    size_t i = 0;
    /* leave room for "..." and the NUL */
    while (i < n) {
        char tmp[8];
        size_t tl = 0, adv = 1;
        uint8_t c = p[i];
        if (c == '\\' || c == '\'' || c == '"') {
            tmp[0] = '\\', tmp[1] = (char)c, tl = 2;
        } else if (c == '\n') {
            memcpy(tmp, "\\n", 2), tl = 2;
        } else if (c == '\t') {
            memcpy(tmp, "\\t", 2), tl = 2;
        } else if (c == '\r') {
            memcpy(tmp, "\\r", 2), tl = 2;
        } else if (c >= 0x20 && c < 0x7f) {
            tmp[0] = (char)c, tl = 1;
        } else if (c >= 0x80 && (adv = utf8_len(p + i, n - i)) > 0) {
            memcpy(tmp, p + i, adv), tl = adv;
        } else {
            adv = 1;
            snprintf(tmp, sizeof tmp, "\\x%02x", c);
            tl = 4;
        }
        if (o + tl + 4 > cap) break;
        memcpy(out + o, tmp, tl);
        o += tl;
        i += adv;
    }
    if (i < s.len) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = 0;
    return out;
}

bool gguf_str_eq(gguf_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && (n == 0 || memcmp(s.ptr, c, n) == 0);
}

static bool str_same(gguf_str a, gguf_str b) {
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, (size_t)a.len) == 0);
}

/* ---- errors ------------------------------------------------------------------ */

static vt_status perr(parser *p, vt_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static vt_status perr(parser *p, vt_status code, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char ctx[200] = "";
    if (p->what) {
        char esc[160], el[32] = "";
        if (p->elem >= 0) snprintf(el, sizeof el, "[%" PRId64 "]", p->elem);
        if (p->item.ptr)
            snprintf(ctx, sizeof ctx, "%s '%s'%s: ", p->what,
                     gguf_str_escape(p->item, esc, sizeof esc, 96), el);
        else
            snprintf(ctx, sizeof ctx, "%s %" PRId64 "%s: ", p->what, p->index, el);
    }
    return vt_errorf(code, "%s: %s%s", p->name, ctx, msg);
}

static size_t remain(const parser *p) { return p->size - p->pos; }

static vt_status need(parser *p, size_t n, const char *field) {
    if (remain(p) < n)
        return perr(p, VT_E_FORMAT, "%s truncated at offset %zu: need %zu bytes, %zu remain (file is %zu bytes)",
                    field, p->pos, n, remain(p), p->size);
    return VT_OK;
}

static vt_status read_u32(parser *p, const char *field, uint32_t *out) {
    VT_TRY(need(p, 4, field));
    *out = rd32(p->buf + p->pos);
    p->pos += 4;
    return VT_OK;
}

static vt_status read_u64(parser *p, const char *field, uint64_t *out) {
    VT_TRY(need(p, 8, field));
    *out = rd64(p->buf + p->pos);
    p->pos += 8;
    return VT_OK;
}

static vt_status read_str(parser *p, const char *field, uint64_t max, gguf_str *out) {
    uint64_t len;
    VT_TRY(read_u64(p, field, &len));
    if (len > max)
        return perr(p, VT_E_FORMAT, "%s length %" PRIu64 " exceeds the limit of %" PRIu64 " bytes (at offset %zu)",
                    field, len, max, p->pos - 8);
    if (len > remain(p))
        return perr(p, VT_E_FORMAT, "%s length %" PRIu64 " at offset %zu runs past end of file: %zu bytes remain",
                    field, len, p->pos - 8, remain(p));
    out->ptr = (const char *)p->buf + p->pos;
    out->len = len;
    p->pos += (size_t)len;
    return VT_OK;
}

/* ---- duplicate detection: open-addressing set of string indices ---------------- */

typedef struct strset {
    int64_t *slots; /* index + 1, 0 = empty */
    size_t mask;
} strset;

static uint64_t str_hash(gguf_str s) {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < s.len; i++) h = (h ^ (uint8_t)s.ptr[i]) * 1099511628211ull;
    return h;
}

static bool strset_init(strset *set, int64_t n) {
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap *= 2;
    set->slots = calloc(cap, sizeof *set->slots);
    set->mask = cap - 1;
    return set->slots != NULL;
}

/* Insert index i of string s (strings reached through get(ctx, j)); returns the
 * index of an equal string already present, or -1. */
static int64_t strset_insert(strset *set, gguf_str s, int64_t i, gguf_str (*get)(const void *, int64_t),
                             const void *ctx) {
    size_t h = (size_t)str_hash(s) & set->mask;
    while (set->slots[h]) {
        int64_t j = set->slots[h] - 1;
        if (str_same(get(ctx, j), s)) return j;
        h = (h + 1) & set->mask;
    }
    set->slots[h] = i + 1;
    return -1;
}

static gguf_str kv_key_at(const void *ctx, int64_t j) { return ((const gguf_kv *)ctx)[j].key; }
static gguf_str tensor_name_at(const void *ctx, int64_t j) { return ((const gguf_tensor *)ctx)[j].name; }

/* ---- parsing ------------------------------------------------------------------ */

static vt_status parse_header(parser *p, gguf_file *out, uint64_t *n_tensors, uint64_t *n_kv) {
    if (p->size < 4)
        return perr(p, VT_E_FORMAT, "truncated header: file is %zu bytes, a GGUF header needs %d", p->size,
                    HEADER_BYTES);
    if (memcmp(p->buf, "GGUF", 4) != 0) {
        char esc[40];
        gguf_str m = {(const char *)p->buf, 4};
        return perr(p, VT_E_FORMAT, "bad magic '%s' (expected 'GGUF'): not a GGUF file",
                    gguf_str_escape(m, esc, sizeof esc, 4));
    }
    if (p->size < HEADER_BYTES)
        return perr(p, VT_E_FORMAT, "truncated header: file is %zu bytes, a GGUF header needs %d", p->size,
                    HEADER_BYTES);
    p->pos = 4;
    uint32_t version = rd32(p->buf + 4);
    p->pos = 8;
    if (version == 1)
        return perr(p, VT_E_UNSUPPORTED,
                    "GGUF version 1 is not supported (the 2023 pre-release format with 32-bit counts); "
                    "re-convert the model with a current llama.cpp");
    if (version != 0 && (version & 0xFFFF) == 0)
        return perr(p, VT_E_UNSUPPORTED, "GGUF version 0x%08" PRIx32 " looks byte-swapped: big-endian files are not supported",
                    version);
    if (version != 2 && version != 3)
        return perr(p, VT_E_UNSUPPORTED, "unknown GGUF version %" PRIu32 " (vt reads versions 2 and 3)", version);
    out->version = version;
    *n_tensors = rd64(p->buf + 8);
    *n_kv = rd64(p->buf + 16);
    p->pos = HEADER_BYTES;
    uint64_t rest = remain(p);
    if (*n_kv > rest / KV_MIN_BYTES)
        return perr(p, VT_E_FORMAT,
                    "n_kv %" PRIu64 " cannot fit in the %" PRIu64 " bytes after the header (each key/value needs >= %d)",
                    *n_kv, rest, KV_MIN_BYTES);
    if (*n_tensors > rest / TENSOR_MIN_BYTES)
        return perr(p, VT_E_FORMAT,
                    "n_tensors %" PRIu64 " cannot fit in the %" PRIu64 " bytes after the header (each tensor info needs >= %d)",
                    *n_tensors, rest, TENSOR_MIN_BYTES);
    if (*n_kv > GGUF_MAX_KV)
        return perr(p, VT_E_FORMAT, "n_kv %" PRIu64 " exceeds the limit of %" PRIu64, *n_kv, GGUF_MAX_KV);
    if (*n_tensors > GGUF_MAX_TENSORS)
        return perr(p, VT_E_FORMAT, "n_tensors %" PRIu64 " exceeds the limit of %" PRIu64, *n_tensors,
                    GGUF_MAX_TENSORS);
    if (*n_kv * KV_MIN_BYTES + *n_tensors * TENSOR_MIN_BYTES > rest)
        return perr(p, VT_E_FORMAT,
                    "n_kv %" PRIu64 " and n_tensors %" PRIu64 " cannot fit together in the %" PRIu64 " bytes after the header",
                    *n_kv, *n_tensors, rest);
    return VT_OK;
}

static vt_status parse_value(parser *p, gguf_kv *kv) {
    const uint8_t *b;
    switch (kv->type) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_UINT64:
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_INT16:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_INT64:
    case GGUF_TYPE_FLOAT32:
    case GGUF_TYPE_FLOAT64:
    case GGUF_TYPE_BOOL: {
        size_t sz = gguf_type_size(kv->type);
        VT_TRY(need(p, sz, "value"));
        b = p->buf + p->pos;
        p->pos += sz;
        switch (kv->type) {
        case GGUF_TYPE_UINT8: kv->v.u64 = b[0]; break;
        case GGUF_TYPE_UINT16: kv->v.u64 = rd16(b); break;
        case GGUF_TYPE_UINT32: kv->v.u64 = rd32(b); break;
        case GGUF_TYPE_UINT64: kv->v.u64 = rd64(b); break;
        case GGUF_TYPE_INT8: kv->v.i64 = (int8_t)b[0]; break;
        case GGUF_TYPE_INT16: kv->v.i64 = (int16_t)rd16(b); break;
        case GGUF_TYPE_INT32: kv->v.i64 = (int32_t)rd32(b); break;
        case GGUF_TYPE_INT64: kv->v.i64 = (int64_t)rd64(b); break;
        case GGUF_TYPE_FLOAT32: {
            uint32_t u = rd32(b);
            float f;
            memcpy(&f, &u, 4);
            kv->v.f64 = f;
            break;
        }
        case GGUF_TYPE_FLOAT64: {
            uint64_t u = rd64(b);
            memcpy(&kv->v.f64, &u, 8);
            break;
        }
        case GGUF_TYPE_BOOL:
            if (b[0] > 1) return perr(p, VT_E_FORMAT, "bool value %u is not 0 or 1 (at offset %zu)", b[0], p->pos - 1);
            kv->v.b = b[0] != 0;
            break;
        default: break;
        }
        return VT_OK;
    }
    case GGUF_TYPE_STRING: return read_str(p, "string value", GGUF_MAX_STRING_LEN, &kv->v.str);
    case GGUF_TYPE_ARRAY: {
        uint32_t et;
        uint64_t n;
        VT_TRY(read_u32(p, "array element type", &et));
        if (et == GGUF_TYPE_ARRAY)
            return perr(p, VT_E_FORMAT, "nested array (array of arrays) is not supported");
        if (et >= GGUF_TYPE_COUNT)
            return perr(p, VT_E_FORMAT, "bad array element type %" PRIu32 " (valid types are 0..%d)", et,
                        GGUF_TYPE_COUNT - 1);
        VT_TRY(read_u64(p, "array length", &n));
        if (n > GGUF_MAX_ARRAY_LEN)
            return perr(p, VT_E_FORMAT, "array of %" PRIu64 " elements exceeds the limit of %" PRIu64, n,
                        GGUF_MAX_ARRAY_LEN);
        kv->v.arr.type = (gguf_type)et;
        kv->v.arr.n = n;
        if (et == GGUF_TYPE_STRING) {
            if (n > remain(p) / 8)
                return perr(p, VT_E_FORMAT, "array of %" PRIu64 " strings cannot fit in the %zu bytes that remain", n,
                            remain(p));
            kv->v.arr.strs = calloc(n ? (size_t)n : 1, sizeof(gguf_str));
            if (!kv->v.arr.strs)
                return perr(p, VT_E_NOMEM, "cannot allocate %" PRIu64 " string entries", n);
            kv->v.arr.data = p->buf + p->pos;
            for (uint64_t j = 0; j < n; j++) {
                p->elem = (int64_t)j;
                VT_TRY(read_str(p, "string element", GGUF_MAX_STRING_LEN, &kv->v.arr.strs[j]));
            }
            p->elem = -1;
            return VT_OK;
        }
        size_t es = gguf_type_size((gguf_type)et);
        uint64_t bytes = n * es; /* n <= 2^30, es <= 8: no overflow */
        if (bytes > remain(p))
            return perr(p, VT_E_FORMAT, "array of %" PRIu64 " %s (%" PRIu64 " bytes) at offset %zu runs past end of file: %zu bytes remain",
                        n, gguf_type_name((gguf_type)et), bytes, p->pos, remain(p));
        b = p->buf + p->pos;
        kv->v.arr.data = b;
        if (et == GGUF_TYPE_BOOL) {
            for (uint64_t j = 0; j < n; j++) {
                if (b[j] > 1) {
                    p->elem = (int64_t)j;
                    return perr(p, VT_E_FORMAT, "bool value %u is not 0 or 1 (at offset %zu)", b[j],
                                p->pos + (size_t)j);
                }
            }
        }
        p->pos += (size_t)bytes;
        return VT_OK;
    }
    default: break;
    }
    VT_ASSERT(0);
    return VT_E_FORMAT;
}

static vt_status parse_kvs(parser *p, gguf_file *out) {
    strset set = {0};
    vt_status s = VT_OK;
    if (!strset_init(&set, out->n_kv)) return perr(p, VT_E_NOMEM, "cannot allocate the key set");
    p->what = "key";
    for (int64_t i = 0; i < out->n_kv; i++) {
        gguf_kv *kv = &out->kv[i];
        p->index = i;
        p->item = (gguf_str){0};
        p->elem = -1;
        gguf_str key;
        if ((s = read_str(p, "key", GGUF_MAX_KEY_LEN, &key)) != VT_OK) goto done;
        if (key.len == 0) {
            s = perr(p, VT_E_FORMAT, "key is empty (at offset %zu)", p->pos - 8);
            goto done;
        }
        p->item = key;
        if (memchr(key.ptr, 0, (size_t)key.len)) {
            s = perr(p, VT_E_FORMAT, "key contains a NUL byte");
            goto done;
        }
        kv->key = key;
        int64_t dup = strset_insert(&set, key, i, kv_key_at, out->kv);
        if (dup >= 0) {
            s = perr(p, VT_E_FORMAT, "duplicate key (entries %" PRId64 " and %" PRId64 ")", dup, i);
            goto done;
        }
        uint32_t type;
        if ((s = read_u32(p, "value type", &type)) != VT_OK) goto done;
        if (type >= GGUF_TYPE_COUNT) {
            s = perr(p, VT_E_FORMAT, "bad value type %" PRIu32 " (valid types are 0..%d)", type, GGUF_TYPE_COUNT - 1);
            goto done;
        }
        kv->type = (gguf_type)type;
        if ((s = parse_value(p, kv)) != VT_OK) goto done;
    }
done:
    free(set.slots);
    p->what = NULL;
    p->elem = -1;
    return s;
}

static vt_status parse_alignment(parser *p, gguf_file *out) {
    out->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *kv = gguf_find(out, "general.alignment");
    if (!kv) return VT_OK;
    if (kv->type != GGUF_TYPE_UINT32)
        return perr(p, VT_E_FORMAT, "key 'general.alignment' has type %s, must be u32", gguf_type_name(kv->type));
    uint64_t a = kv->v.u64;
    if (a == 0 || (a & (a - 1)) != 0)
        return perr(p, VT_E_FORMAT, "general.alignment %" PRIu64 " is not a power of two", a);
    out->alignment = (size_t)a;
    return VT_OK;
}

static vt_status parse_tensor_infos(parser *p, gguf_file *out) {
    strset set = {0};
    vt_status s = VT_OK;
    if (!strset_init(&set, out->n_tensors)) return perr(p, VT_E_NOMEM, "cannot allocate the tensor name set");
    p->what = "tensor";
    for (int64_t i = 0; i < out->n_tensors; i++) {
        gguf_tensor *t = &out->tensors[i];
        p->index = i;
        p->item = (gguf_str){0};
        gguf_str name;
        if ((s = read_str(p, "name", GGUF_MAX_KEY_LEN, &name)) != VT_OK) goto done;
        if (name.len == 0) {
            s = perr(p, VT_E_FORMAT, "tensor name is empty (at offset %zu)", p->pos - 8);
            goto done;
        }
        p->item = name;
        if (name.len > GGUF_MAX_TENSOR_NAME_LEN) {
            s = perr(p, VT_E_FORMAT, "tensor name is %" PRIu64 " bytes, longer than the limit of %d", name.len,
                     GGUF_MAX_TENSOR_NAME_LEN);
            goto done;
        }
        if (memchr(name.ptr, 0, (size_t)name.len)) {
            s = perr(p, VT_E_FORMAT, "tensor name contains a NUL byte");
            goto done;
        }
        t->name = name;
        int64_t dup = strset_insert(&set, name, i, tensor_name_at, out->tensors);
        if (dup >= 0) {
            s = perr(p, VT_E_FORMAT, "duplicate tensor name (tensors %" PRId64 " and %" PRId64 ")", dup, i);
            goto done;
        }
        uint32_t n_dims;
        if ((s = read_u32(p, "n_dims", &n_dims)) != VT_OK) goto done;
        if (n_dims < 1 || n_dims > GGUF_MAX_DIMS) {
            s = perr(p, VT_E_FORMAT, "n_dims %" PRIu32 " is not in 1..%d", n_dims, GGUF_MAX_DIMS);
            goto done;
        }
        t->n_dims = n_dims;
        int64_t nelem = 1;
        bool overflow = false;
        for (int d = 0; d < GGUF_MAX_DIMS; d++) {
            t->ne[d] = 1;
            if ((uint32_t)d >= n_dims) continue;
            uint64_t v;
            if ((s = read_u64(p, "shape", &v)) != VT_OK) goto done;
            if ((int64_t)v < 0) {
                s = perr(p, VT_E_FORMAT, "dimension ne[%d] = %" PRId64 " is negative", d, (int64_t)v);
                goto done;
            }
            t->ne[d] = (int64_t)v;
        }
        for (int d = 0; d < GGUF_MAX_DIMS; d++)
            if (!i64_mul(nelem, t->ne[d], &nelem)) overflow = true;
        if (overflow) {
            s = perr(p, VT_E_FORMAT,
                     "shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "] has more than INT64_MAX elements",
                     t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
            goto done;
        }
        uint32_t type;
        if ((s = read_u32(p, "type", &type)) != VT_OK) goto done;
        const quant_traits *tr = type < VT_DTYPE_COUNT ? quant_traits_get((vt_dtype)type) : NULL;
        if (!tr) {
            const char *gname = ggml_type_name_of(type);
            if (gname)
                s = perr(p, VT_E_UNSUPPORTED, "tensor type %" PRIu32 " (%s) is not supported by vt", type, gname);
            else
                s = perr(p, VT_E_FORMAT, "unknown tensor type %" PRIu32, type);
            goto done;
        }
        t->type = (vt_dtype)type;
        if (t->ne[0] % tr->block_elems != 0) {
            s = perr(p, VT_E_FORMAT, "ne[0] = %" PRId64 " is not a multiple of the %s block size %" PRId64, t->ne[0],
                     tr->name, tr->block_elems);
            goto done;
        }
        size_t bytes = (size_t)(t->ne[0] / tr->block_elems);
        bool ok = size_mul(bytes, tr->block_bytes, &bytes);
        for (int d = 1; d < GGUF_MAX_DIMS; d++) ok = ok && size_mul(bytes, (size_t)t->ne[d], &bytes);
        if (!ok) {
            s = perr(p, VT_E_FORMAT,
                     "size in bytes of shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "] in %s overflows",
                     t->ne[0], t->ne[1], t->ne[2], t->ne[3], tr->name);
            goto done;
        }
        t->bytes = bytes;
        if ((s = read_u64(p, "data offset", &t->offset)) != VT_OK) goto done;
    }
done:
    free(set.slots);
    return s;
}

typedef struct range {
    uint64_t begin, end;
    int64_t index;
} range;

static int range_cmp(const void *a, const void *b) {
    const range *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static vt_status place_tensors(parser *p, gguf_file *out) {
    /* The data section starts at the next multiple of the alignment. A file
     * without tensors may end before it (vocab files do). */
    size_t start = size_align_up(p->pos, out->alignment);
    if (start < p->pos || start > p->size) {
        if (out->n_tensors > 0) {
            return perr(p, VT_E_FORMAT,
                        "data section starts at byte %zu (metadata end %zu padded to alignment %zu), past end of file (%zu bytes)",
                        start, p->pos, out->alignment, p->size);
        }
        start = p->size;
    }
    out->data_offset = start;
    p->what = "tensor";
    range *ranges = NULL;
    if (out->n_tensors > 0) {
        ranges = malloc((size_t)out->n_tensors * sizeof *ranges);
        if (!ranges) return perr(p, VT_E_NOMEM, "cannot allocate %" PRId64 " tensor ranges", out->n_tensors);
    }
    int64_t n_ranges = 0;
    vt_status s = VT_OK;
    const uint64_t data_size = p->size - start;
    for (int64_t i = 0; i < out->n_tensors; i++) {
        gguf_tensor *t = &out->tensors[i];
        p->index = i;
        p->item = t->name;
        if (t->offset % out->alignment != 0) {
            s = perr(p, VT_E_FORMAT, "data offset %" PRIu64 " is not a multiple of the alignment %zu", t->offset,
                     out->alignment);
            goto done;
        }
        if (t->offset > data_size || t->bytes > data_size - t->offset) {
            char b0[32], b1[32], fs[32];
            uint64_t begin = (uint64_t)start + (t->offset > data_size ? data_size : t->offset);
            if (t->offset > data_size) {
                fmt_size(b0, sizeof b0, t->offset);
                fmt_size(fs, sizeof fs, data_size);
                s = perr(p, VT_E_FORMAT,
                         "data offset %" PRIu64 " (%s) past end of file: the data section (from byte %zu) holds %" PRIu64 " bytes (%s)",
                         t->offset, b0, start, data_size, fs);
            } else {
                uint64_t end = begin + t->bytes;
                fmt_size(b0, sizeof b0, begin), fmt_size(b1, sizeof b1, end), fmt_size(fs, sizeof fs, p->size);
                s = perr(p, VT_E_FORMAT,
                         "data [%s, %s) past end of file (%s): bytes [%" PRIu64 ", %" PRIu64 ") of %zu",
                         b0, b1, fs, begin, end, p->size);
            }
            goto done;
        }
        t->data = p->buf + start + t->offset;
        if (t->bytes > 0) ranges[n_ranges++] = (range){t->offset, t->offset + t->bytes, i};
    }
    if (n_ranges > 1) {
        qsort(ranges, (size_t)n_ranges, sizeof *ranges, range_cmp);
        for (int64_t k = 1; k < n_ranges; k++) {
            if (ranges[k].begin < ranges[k - 1].end) {
                const range *a = &ranges[k - 1], *b = &ranges[k];
                char esc[160];
                p->index = b->index;
                p->item = out->tensors[b->index].name;
                s = perr(p, VT_E_FORMAT,
                         "data [%" PRIu64 ", %" PRIu64 ") overlaps tensor '%s' data [%" PRIu64 ", %" PRIu64 ") (offsets in the data section)",
                         b->begin, b->end, gguf_str_escape(out->tensors[a->index].name, esc, sizeof esc, 96), a->begin,
                         a->end);
                goto done;
            }
        }
    }
done:
    free(ranges);
    p->what = NULL;
    return s;
}

vt_status gguf_parse(const void *data, size_t size, const char *name, gguf_file *out) {
    memset(out, 0, sizeof *out);
    parser p = {.buf = data, .size = data ? size : 0, .name = name ? name : "gguf", .elem = -1};
    uint64_t n_tensors = 0, n_kv = 0;
    vt_status s = parse_header(&p, out, &n_tensors, &n_kv);
    if (s != VT_OK) goto fail;
    out->buf = data;
    out->size = size;
    out->n_kv = (int64_t)n_kv;
    out->n_tensors = (int64_t)n_tensors;
    /* counts are bounded by size / 14, so these multiplications cannot overflow */
    out->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof *out->kv);
    out->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *out->tensors);
    if (!out->kv || !out->tensors) {
        s = perr(&p, VT_E_NOMEM, "cannot allocate %" PRIu64 " keys and %" PRIu64 " tensors", n_kv, n_tensors);
        goto fail;
    }
    if ((s = parse_kvs(&p, out)) != VT_OK) goto fail;
    if ((s = parse_alignment(&p, out)) != VT_OK) goto fail;
    if ((s = parse_tensor_infos(&p, out)) != VT_OK) goto fail;
    if ((s = place_tensors(&p, out)) != VT_OK) goto fail;
    return VT_OK;
fail:
    gguf_free(out);
    return s;
}

void gguf_free(gguf_file *f) {
    if (!f) return;
    if (f->kv) {
        for (int64_t i = 0; i < f->n_kv; i++)
            if (f->kv[i].type == GGUF_TYPE_ARRAY) free(f->kv[i].v.arr.strs);
    }
    free(f->kv);
    free(f->tensors);
    memset(f, 0, sizeof *f);
}

/* ---- lookup and getters ------------------------------------------------------- */

const gguf_kv *gguf_find(const gguf_file *f, const char *key) {
    for (int64_t i = 0; i < f->n_kv; i++)
        if (gguf_str_eq(f->kv[i].key, key)) return &f->kv[i];
    return NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    for (int64_t i = 0; i < f->n_tensors; i++)
        if (gguf_str_eq(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

static bool is_unsigned_type(gguf_type t) {
    return t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_UINT16 || t == GGUF_TYPE_UINT32 || t == GGUF_TYPE_UINT64;
}
static bool is_signed_type(gguf_type t) {
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT64;
}

static vt_status find_typed(const gguf_file *f, const char *key, const gguf_kv **out) {
    *out = gguf_find(f, key);
    if (!*out) return vt_errorf(VT_E_NOT_FOUND, "key '%s' not found", key);
    return VT_OK;
}

static vt_status wrong_type(const gguf_kv *kv, const char *key, const char *want) {
    return vt_errorf(VT_E_FORMAT, "key '%s' has type %s, expected %s", key, gguf_type_name(kv->type), want);
}

/* Integer value as sign + magnitude so every range check is exact. */
static bool int_value(const gguf_kv *kv, bool *neg, uint64_t *mag) {
    if (is_unsigned_type(kv->type)) {
        *neg = false, *mag = kv->v.u64;
        return true;
    }
    if (is_signed_type(kv->type)) {
        *neg = kv->v.i64 < 0;
        *mag = *neg ? (uint64_t)0 - (uint64_t)kv->v.i64 : (uint64_t)kv->v.i64;
        return true;
    }
    return false;
}

vt_status gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out) {
    const gguf_kv *kv;
    VT_TRY(find_typed(f, key, &kv));
    bool neg;
    uint64_t mag;
    if (!int_value(kv, &neg, &mag)) return wrong_type(kv, key, "an integer");
    if (neg) return vt_errorf(VT_E_RANGE, "key '%s': value -%" PRIu64 " is negative, expected unsigned", key, mag);
    *out = mag;
    return VT_OK;
}

vt_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out) {
    uint64_t v;
    VT_TRY(gguf_get_u64(f, key, &v));
    if (v > UINT32_MAX) return vt_errorf(VT_E_RANGE, "key '%s': value %" PRIu64 " does not fit in u32", key, v);
    *out = (uint32_t)v;
    return VT_OK;
}

vt_status gguf_get_i64(const gguf_file *f, const char *key, int64_t *out) {
    const gguf_kv *kv;
    VT_TRY(find_typed(f, key, &kv));
    bool neg;
    uint64_t mag;
    if (!int_value(kv, &neg, &mag)) return wrong_type(kv, key, "an integer");
    if (!neg && mag > (uint64_t)INT64_MAX)
        return vt_errorf(VT_E_RANGE, "key '%s': value %" PRIu64 " does not fit in i64", key, mag);
    *out = is_signed_type(kv->type) ? kv->v.i64 : (int64_t)mag;
    return VT_OK;
}

vt_status gguf_get_f32(const gguf_file *f, const char *key, float *out) {
    const gguf_kv *kv;
    VT_TRY(find_typed(f, key, &kv));
    if (kv->type != GGUF_TYPE_FLOAT32 && kv->type != GGUF_TYPE_FLOAT64) return wrong_type(kv, key, "f32 or f64");
    *out = (float)kv->v.f64;
    return VT_OK;
}

vt_status gguf_get_bool(const gguf_file *f, const char *key, bool *out) {
    const gguf_kv *kv;
    VT_TRY(find_typed(f, key, &kv));
    if (kv->type != GGUF_TYPE_BOOL) return wrong_type(kv, key, "bool");
    *out = kv->v.b;
    return VT_OK;
}

vt_status gguf_get_str(const gguf_file *f, const char *key, gguf_str *out) {
    const gguf_kv *kv;
    VT_TRY(find_typed(f, key, &kv));
    if (kv->type != GGUF_TYPE_STRING) return wrong_type(kv, key, "str");
    *out = kv->v.str;
    return VT_OK;
}

vt_status gguf_get_arr(const gguf_file *f, const char *key, gguf_type elem_type, const gguf_kv **out) {
    const gguf_kv *kv;
    VT_TRY(find_typed(f, key, &kv));
    if (kv->type != GGUF_TYPE_ARRAY) return wrong_type(kv, key, "arr");
    if (elem_type != GGUF_TYPE_COUNT && kv->v.arr.type != elem_type)
        return vt_errorf(VT_E_FORMAT, "key '%s' is an array of %s, expected an array of %s", key,
                         gguf_type_name(kv->v.arr.type), gguf_type_name(elem_type));
    *out = kv;
    return VT_OK;
}

int64_t gguf_arr_int(const gguf_kv *kv, uint64_t i) {
    VT_ASSERT(kv->type == GGUF_TYPE_ARRAY && i < kv->v.arr.n);
    gguf_type t = kv->v.arr.type;
    const uint8_t *b = (const uint8_t *)kv->v.arr.data + i * gguf_type_size(t);
    switch (t) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_BOOL: return b[0];
    case GGUF_TYPE_INT8: return (int8_t)b[0];
    case GGUF_TYPE_UINT16: return rd16(b);
    case GGUF_TYPE_INT16: return (int16_t)rd16(b);
    case GGUF_TYPE_UINT32: return rd32(b);
    case GGUF_TYPE_INT32: return (int32_t)rd32(b);
    case GGUF_TYPE_UINT64:
    case GGUF_TYPE_INT64: return (int64_t)rd64(b);
    default: VT_ASSERT(!"gguf_arr_int on a non-integer array"); return 0;
    }
}

double gguf_arr_float(const gguf_kv *kv, uint64_t i) {
    VT_ASSERT(kv->type == GGUF_TYPE_ARRAY && i < kv->v.arr.n);
    gguf_type t = kv->v.arr.type;
    const uint8_t *b = (const uint8_t *)kv->v.arr.data + i * gguf_type_size(t);
    if (t == GGUF_TYPE_FLOAT32) {
        uint32_t u = rd32(b);
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    VT_ASSERT(t == GGUF_TYPE_FLOAT64);
    uint64_t u = rd64(b);
    double d;
    memcpy(&d, &u, 8);
    return d;
}
