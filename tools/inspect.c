/* vt inspect FILE: print a GGUF file's header, metadata and tensor table. */
#include "base/mapfile.h"
#include "cmds.h"
#include "opts.h"
#include "gguf/gguf.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STR_SHOW 120 /* bytes of a string value shown */

static void print_elem(const gguf_kv *kv, uint64_t i) {
    char esc[4 * STR_SHOW + 8];
    switch (kv->v.arr.type) {
    case GGUF_TYPE_STRING:
        printf("\"%s\"", gguf_str_escape(kv->v.arr.strs[i], esc, sizeof esc, 48));
        break;
    case GGUF_TYPE_FLOAT32:
    case GGUF_TYPE_FLOAT64: printf("%.9g", gguf_arr_float(kv, i)); break;
    case GGUF_TYPE_BOOL: printf("%s", gguf_arr_int(kv, i) ? "true" : "false"); break;
    case GGUF_TYPE_UINT64: printf("%" PRIu64, (uint64_t)gguf_arr_int(kv, i)); break;
    default: printf("%" PRId64, gguf_arr_int(kv, i)); break;
    }
}

static void print_value(const gguf_kv *kv, uint64_t max_elems) {
    char esc[4 * STR_SHOW + 8];
    switch (kv->type) {
    case GGUF_TYPE_UINT8:
    case GGUF_TYPE_UINT16:
    case GGUF_TYPE_UINT32:
    case GGUF_TYPE_UINT64: printf("%" PRIu64, kv->v.u64); break;
    case GGUF_TYPE_INT8:
    case GGUF_TYPE_INT16:
    case GGUF_TYPE_INT32:
    case GGUF_TYPE_INT64: printf("%" PRId64, kv->v.i64); break;
    case GGUF_TYPE_FLOAT32: printf("%.9g", kv->v.f64); break;
    case GGUF_TYPE_FLOAT64: printf("%.17g", kv->v.f64); break;
    case GGUF_TYPE_BOOL: printf("%s", kv->v.b ? "true" : "false"); break;
    case GGUF_TYPE_STRING:
        printf("\"%s\"", gguf_str_escape(kv->v.str, esc, sizeof esc, STR_SHOW));
        if (kv->v.str.len > STR_SHOW) printf(" (%" PRIu64 " bytes)", kv->v.str.len);
        break;
    case GGUF_TYPE_ARRAY: {
        uint64_t n = kv->v.arr.n;
        uint64_t show = max_elems == 0 || n < max_elems ? n : max_elems;
        printf("[");
        for (uint64_t i = 0; i < show; i++) {
            if (i) printf(", ");
            print_elem(kv, i);
        }
        if (show < n) printf(", ... (%" PRIu64 " elements)", n);
        printf("]");
        break;
    }
    default: printf("?"); break;
    }
}

/* --check: every tensor's values, dequantized; one line per tensor holding a NaN
 * or an infinity (its first such element), then a summary. 1 if any. */
static int check_values(const gguf_file *f, const char *path) {
    int64_t n_bad = 0, n_unread = 0;
    printf("\ncheck:\n");
    for (int64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        const quant_traits *tr = quant_traits_get(t->type);
        char name[128];
        gguf_str_escape(t->name, name, sizeof name, 80);
        if (!tr || !tr->dequant_ref) {
            printf("  %-40s type %d cannot be read: not checked\n", name, (int)t->type);
            n_unread++;
            continue;
        }
        int64_t n = 1;
        for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) n *= t->ne[d];
        float v = 0;
        int64_t at = 0;
        const int64_t count = quant_count_nonfinite(t->type, t->data, n, &at, &v);
        if (count <= 0) continue;
        n_bad++;
        printf("  %-40s %-7s %lld non-finite values, the first at element %lld (%s)\n", name, tr->name,
               (long long)count, (long long)at, isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
    }
    if (n_bad)
        fprintf(stderr, "vt inspect: %s: %lld of %lld tensors hold NaN or infinity\n", path, (long long)n_bad,
                (long long)f->n_tensors);
    else
        printf("  all %lld tensors finite%s\n", (long long)(f->n_tensors - n_unread),
               n_unread ? " (of those vt can read)" : "");
    return n_bad ? 1 : 0;
}

int cmd_inspect(int argc, char **argv) {
    const char *path = NULL, *model_path = NULL;
    long long max_elems = 8;
    bool no_tensors = false, check = false;
    const opt table[] = {
        {.name = {"-m", "--model"}, .kind = OPT_STR, .dst = &model_path, .arg = "FILE",
         .help = "the GGUF file (or give FILE alone, as before)"},
        {.name = {"-n"}, .kind = OPT_INT, .dst = &max_elems, .arg = "N", .lo = 0, .hi = INT64_MAX,
         .help = "array elements shown per key (default 8; 0 = all)"},
        {.name = {"--no-tensors"}, .kind = OPT_FLAG, .dst = &no_tensors, .help = "skip the tensor table"},
        {.name = {"--check"}, .kind = OPT_FLAG, .dst = &check,
         .help = "also read every tensor's values and name those holding NaN or\n"
                 "infinity (exit 1 if any does)"},
    };
    const opts_cmd cmd = {.name = "inspect",
                          .usage = "vt inspect [options] -m FILE   (or: vt inspect [options] FILE)",
                          .intro = "Print the GGUF header, every metadata key with its type and value, and the\n"
                                   "tensor table. Exits 1 with the parser's message if the file is malformed.\n",
                          .opts = table, .n_opts = (int)(sizeof table / sizeof table[0]), .max_pos = 1};
    const char *pos[1];
    int n_pos = 0;
    const int prc = opts_parse(&cmd, argc, argv, pos, &n_pos, NULL);
    if (prc >= 0) return prc;
    if (model_path && n_pos) {
        fprintf(stderr, "vt inspect: give the file once: -m %s or %s\n", model_path, pos[0]);
        return 2;
    }
    path = model_path ? model_path : n_pos ? pos[0] : NULL;
    const bool tensors = !no_tensors;
    if (!path) {
        fprintf(stderr, "vt inspect: no file (-m FILE)\n");
        opts_usage(&cmd, stderr);
        return 2;
    }
    mapfile m;
    if (mapfile_open(path, &m) != VT_OK) {
        fprintf(stderr, "vt inspect: %s\n", vt_last_error());
        return 1;
    }
    gguf_file f;
    if (gguf_parse(m.data, m.size, path, &f) != VT_OK) {
        fprintf(stderr, "vt inspect: %s\n", vt_last_error());
        mapfile_close(&m);
        return 1;
    }
    printf("file:        %s (%zu bytes)\n", path, f.size);
    printf("version:     %" PRIu32 "\n", f.version);
    printf("n_kv:        %" PRId64 "\n", f.n_kv);
    printf("n_tensors:   %" PRId64 "\n", f.n_tensors);
    printf("alignment:   %zu\n", f.alignment);
    printf("data offset: %zu\n", f.data_offset);
    printf("\nmetadata:\n");
    for (int64_t i = 0; i < f.n_kv; i++) {
        const gguf_kv *kv = &f.kv[i];
        char key[256], type[32];
        gguf_str_escape(kv->key, key, sizeof key, 200);
        if (kv->type == GGUF_TYPE_ARRAY)
            snprintf(type, sizeof type, "arr[%s]", gguf_type_name(kv->v.arr.type));
        else
            snprintf(type, sizeof type, "%s", gguf_type_name(kv->type));
        printf("  %-40s %-9s ", key, type);
        print_value(kv, (uint64_t)max_elems);
        printf("\n");
    }
    if (tensors) {
        printf("\ntensors:\n");
        printf("  %-4s %-40s %-7s %-24s %12s %12s\n", "#", "name", "type", "shape", "offset", "bytes");
        size_t total = 0;
        for (int64_t i = 0; i < f.n_tensors; i++) {
            const gguf_tensor *t = &f.tensors[i];
            const quant_traits *tr = quant_traits_get(t->type);
            char name[128], shape[96];
            gguf_str_escape(t->name, name, sizeof name, 80);
            int o = snprintf(shape, sizeof shape, "[");
            for (uint32_t d = 0; d < t->n_dims; d++)
                o += snprintf(shape + o, sizeof shape - (size_t)o, "%s%" PRId64, d ? ", " : "", t->ne[d]);
            snprintf(shape + o, sizeof shape - (size_t)o, "]");
            printf("  %-4" PRId64 " %-40s %-7s %-24s %12" PRIu64 " %12zu\n", i, name, tr ? tr->name : "?", shape,
                   t->offset, t->bytes);
            total += t->bytes;
        }
        printf("  total tensor bytes: %zu\n", total);
    }
    int rc = 0;
    if (check) rc = check_values(&f, path);
    gguf_free(&f);
    mapfile_close(&m);
    return rc;
}
