/* gguf/: every file in tests/data/corrupt (made by scripts/make-corrupt-gguf.py)
 * is rejected with its own status and message, and every truncation of a valid
 * file that cuts needed bytes is rejected without a crash. */
#include "base/mapfile.h"
#include "gguf/gguf.h"
#include "test.h"

#include <dirent.h>

typedef struct {
    const char *file;
    vt_status status;
    const char *message; /* a distinctive substring of the error */
} corrupt_case;

static const corrupt_case cases[] = {
    {"valid_base.gguf", VT_OK, NULL},
    {"valid_no_tensors.gguf", VT_OK, NULL},
    {"valid_align64.gguf", VT_OK, NULL},
    /* header */
    {"truncated_header.gguf", VT_E_FORMAT, "truncated header: file is 16 bytes"},
    {"bad_magic.gguf", VT_E_FORMAT, "bad magic 'GGML'"},
    {"version_1.gguf", VT_E_UNSUPPORTED, "GGUF version 1 is not supported"},
    {"version_4.gguf", VT_E_UNSUPPORTED, "unknown GGUF version 4"},
    {"version_byteswapped.gguf", VT_E_UNSUPPORTED, "0x03000000 looks byte-swapped"},
    {"absurd_n_kv.gguf", VT_E_FORMAT, "n_kv 4611686018427387904 cannot fit"},
    {"absurd_n_tensors.gguf", VT_E_FORMAT, "n_tensors 4611686018427387904 cannot fit"},
    {"counts_do_not_fit.gguf", VT_E_FORMAT, "cannot fit together"},
    /* keys and values */
    {"key_past_end.gguf", VT_E_FORMAT, "key length 100 at offset 24 runs past end of file"},
    {"key_too_long.gguf", VT_E_FORMAT, "key length 65537 exceeds the limit"},
    {"empty_key.gguf", VT_E_FORMAT, "key is empty"},
    {"key_nul_byte.gguf", VT_E_FORMAT, "key contains a NUL byte"},
    {"duplicate_key.gguf", VT_E_FORMAT, "key 'dup.key': duplicate key (entries 0 and 1)"},
    {"bad_value_type.gguf", VT_E_FORMAT, "bad value type 13"},
    {"value_truncated.gguf", VT_E_FORMAT, "value truncated at offset 37"},
    {"string_past_end.gguf", VT_E_FORMAT, "string value length 1000 at offset 37 runs past end"},
    {"string_too_long.gguf", VT_E_FORMAT, "string value length 2147483648 exceeds the limit"},
    {"bad_bool.gguf", VT_E_FORMAT, "key 'k': bool value 2 is not 0 or 1"},
    {"bad_bool_in_array.gguf", VT_E_FORMAT, "key 'k'[1]: bool value 5 is not 0 or 1"},
    {"nested_array.gguf", VT_E_FORMAT, "nested array"},
    {"bad_array_type.gguf", VT_E_FORMAT, "bad array element type 99"},
    {"array_too_long.gguf", VT_E_FORMAT, "array of 2147483648 elements exceeds the limit"},
    {"array_past_end.gguf", VT_E_FORMAT, "array of 1000 u32 (4000 bytes)"},
    {"string_array_past_end.gguf", VT_E_FORMAT, "array of 1000 strings cannot fit"},
    {"string_array_element_past_end.gguf", VT_E_FORMAT, "key 'k'[1]: string element length 77"},
    /* general.alignment */
    {"alignment_not_power_of_2.gguf", VT_E_FORMAT, "general.alignment 48 is not a power of two"},
    {"alignment_zero.gguf", VT_E_FORMAT, "general.alignment 0 is not a power of two"},
    {"alignment_wrong_type.gguf", VT_E_FORMAT, "'general.alignment' has type i32, must be u32"},
    /* tensor infos and data */
    {"tensor_name_empty.gguf", VT_E_FORMAT, "tensor name is empty"},
    {"tensor_name_too_long.gguf", VT_E_FORMAT, "tensor name is 64 bytes, longer than the limit of 63"},
    {"tensor_name_past_end.gguf", VT_E_FORMAT, "tensor 0: name length 500 at offset 24 runs past end"},
    {"duplicate_tensor_name.gguf", VT_E_FORMAT, "tensor 'w': duplicate tensor name (tensors 0 and 1)"},
    {"n_dims_0.gguf", VT_E_FORMAT, "n_dims 0 is not in 1..4"},
    {"n_dims_5.gguf", VT_E_FORMAT, "n_dims 5 is not in 1..4"},
    {"negative_dim.gguf", VT_E_FORMAT, "ne[1] = -3 is negative"},
    {"shape_overflow.gguf", VT_E_FORMAT, "shape [4294967296, 4294967296, 1, 1] has more than INT64_MAX elements"},
    {"byte_size_overflow.gguf", VT_E_FORMAT, "size in bytes of shape [4611686018427387904, 1, 1, 1] in f32 overflows"},
    {"ne0_not_block_multiple.gguf", VT_E_FORMAT, "ne[0] = 33 is not a multiple of the q8_0 block size 32"},
    {"unknown_tensor_type.gguf", VT_E_FORMAT, "unknown tensor type 99"},
    {"unsupported_tensor_type.gguf", VT_E_UNSUPPORTED, "tensor type 16 (iq2_xxs) is not supported"},
    {"tensor_info_truncated.gguf", VT_E_FORMAT, "tensor 'abcdefgh': shape truncated at offset 60"},
    {"misaligned_offset.gguf", VT_E_FORMAT, "data offset 16 is not a multiple of the alignment 32"},
    {"data_past_end.gguf", VT_E_FORMAT, "tensor 'big': data [128 B, 4.1 KiB) past end of file (160 B)"},
    {"offset_past_end.gguf", VT_E_FORMAT, "data offset 1099511627776 (1024.00 GiB) past end of file"},
    {"overlapping_tensors.gguf", VT_E_FORMAT, "overlaps tensor"},
    {"data_section_past_end.gguf", VT_E_FORMAT, "data section starts at byte 128"},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static char corrupt_dir[4096];

static void test_cases(void) {
    for (size_t i = 0; i < N_CASES; i++) {
        const corrupt_case *c = &cases[i];
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", corrupt_dir, c->file);
        mapfile m;
        vt_status s = mapfile_open(path, &m);
        CHECK_MSG(s == VT_OK, "%s", vt_last_error());
        if (s != VT_OK) continue;
        gguf_file f;
        s = gguf_parse(m.data, m.size, c->file, &f);
        CHECK_MSG(s == c->status, "%s: status %s, expected %s (%s)", c->file, vt_status_str(s),
                  vt_status_str(c->status), s ? vt_last_error() : "");
        if (s == VT_OK) {
            gguf_free(&f);
        } else {
            const char *msg = vt_last_error();
            CHECK_MSG(!strncmp(msg, c->file, strlen(c->file)), "%s: message does not name the file: %s", c->file, msg);
            CHECK_MSG(c->message && strstr(msg, c->message), "%s: message '%s' lacks '%s'", c->file, msg,
                      c->message ? c->message : "(none)");
            CHECK(f.kv == NULL && f.tensors == NULL); /* nothing leaks out of a failed parse */
        }
        mapfile_close(&m);
    }
    /* each reason has its own message */
    for (size_t i = 0; i < N_CASES; i++)
        for (size_t j = i + 1; j < N_CASES; j++)
            if (cases[i].message && cases[j].message) CHECK(strcmp(cases[i].message, cases[j].message) != 0);
}

/* Every .gguf in the directory has a row in the table, and the reverse, so a
 * file added to the script cannot go untested. */
static void test_table_complete(void) {
    DIR *d = opendir(corrupt_dir);
    CHECK_MSG(d != NULL, "cannot open %s", corrupt_dir);
    if (!d) return;
    int n_files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 5, ".gguf")) continue;
        n_files++;
        bool found = false;
        for (size_t i = 0; i < N_CASES; i++) found = found || !strcmp(cases[i].file, e->d_name);
        CHECK_MSG(found, "%s has no row in the table", e->d_name);
    }
    closedir(d);
    CHECK_EQ_INT(n_files, N_CASES);
}

/* Parse every prefix of (data, size): rejected exactly when it cuts bytes the
 * file needs (all of the metadata, padding and tensor data). Prefixes past
 * `dense` are tried with a stride to keep big files fast. */
static void check_prefixes(const char *name, const uint8_t *data, size_t size, size_t dense, size_t stride) {
    gguf_file f;
    CHECK_OK(gguf_parse(data, size, name, &f));
    if (f.buf == NULL) return;
    size_t need = f.n_tensors ? f.data_offset : 0;
    for (int64_t i = 0; i < f.n_tensors; i++) {
        size_t end = f.data_offset + f.tensors[i].offset + f.tensors[i].bytes;
        if (end > need) need = end;
    }
    gguf_free(&f);
    int wrong = 0;
    size_t tried = 0;
    /* The prefix is copied flush against the end of one heap block, so ASan
     * flags any read past it. */
    uint8_t *block = malloc(size);
    for (size_t len = 0; len < size; len += len < dense ? 1 : stride) {
        uint8_t *copy = block + (size - len);
        memcpy(copy, data, len);
        vt_status s = gguf_parse(copy, len, name, &f);
        bool ok = s == VT_OK;
        if (ok) gguf_free(&f);
        /* a vocab-style file without tensors is complete once its metadata is */
        bool expect_ok = len >= need && need > 0;
        if (ok != expect_ok && wrong++ < 5)
            fprintf(stderr, "%s: prefix %zu of %zu: %s (needs %zu)\n", name, len, size, ok ? "accepted" : vt_last_error(),
                    need);
        tried++;
    }
    free(block);
    CHECK_MSG(wrong == 0, "%s: %d wrong prefix verdicts of %zu", name, wrong, tried);
}

static void test_truncations(void) {
    char path[4200];
    snprintf(path, sizeof path, "%s/valid_base.gguf", corrupt_dir);
    mapfile m;
    if (mapfile_open(path, &m) == VT_OK) {
        check_prefixes("valid_base.gguf", m.data, m.size, m.size, 1);
        mapfile_close(&m);
    }
    const char *models[] = {"stories260K.gguf", "TinyStories-656K-Q8_0.gguf"};
    for (size_t i = 0; i < 2; i++) {
        const char *p = test_model_path(models[i]);
        if (!p || mapfile_open(p, &m) != VT_OK) continue;
        gguf_file f;
        if (gguf_parse(m.data, m.size, p, &f) == VT_OK) {
            size_t dense = f.data_offset + 256; /* every header byte, then a stride through the data */
            gguf_free(&f);
            check_prefixes(models[i], m.data, m.size, dense, 4093);
        }
        mapfile_close(&m);
    }
}

/* The metadata of a vocab file ends the file: every shorter prefix fails. */
static void test_vocab_truncation(void) {
    const char *p = test_model_path("vocab/ggml-vocab-bert-bge.gguf");
    mapfile m;
    if (!p || mapfile_open(p, &m) != VT_OK) return;
    int accepted = 0;
    for (size_t len = 0; len < m.size; len += m.size / 211 + 1) { /* ~200 cuts */
        gguf_file f;
        if (gguf_parse(m.data, len, "vocab", &f) == VT_OK) {
            accepted++;
            gguf_free(&f);
        }
    }
    CHECK_EQ_INT(accepted, 0);
    mapfile_close(&m);
}

int main(void) {
    const char *src = getenv("VT_SOURCE_DIR");
    snprintf(corrupt_dir, sizeof corrupt_dir, "%s/tests/data/corrupt", src && *src ? src : ".");
    test_cases();
    test_table_complete();
    test_truncations();
    test_vocab_truncation();
    return test_finish();
}
