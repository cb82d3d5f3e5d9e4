/* vt tokenize -m FILE [-p TEXT | -f FILE] [--no-bos] [--special]: print the token
 * ids of a text, one token a line with its piece, then the ids on one line. */
#include "cmds.h"
#include "opts.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define TOKENIZE_MAX_TEXT ((size_t)1 << 30) /* the text read from a file */

/* The piece with non-printable bytes and partial UTF-8 sequences escaped. */
static void print_piece(const char *s, int64_t n) {
    putchar('\'');
    for (int64_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            size_t adv;
            uint32_t cp = uni_decode((const uint8_t *)s + i, (size_t)(n - i), &adv);
            if (adv > 1 || cp != UNI_REPLACEMENT) {
                fwrite(s + i, 1, adv, stdout);
                i += (int64_t)adv - 1;
            } else {
                printf("\\x%02x", c);
            }
            continue;
        }
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\'' || c == '\\') printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('\'');
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool no_bos = false, parse_special = false, ids_only = false;
    const opt table[] = {
        {.name = {"-m", "--model"}, .kind = OPT_STR, .dst = &model, .arg = "FILE",
         .help = "GGUF with tokenizer.* metadata (a model or a vocab-only file)"},
        {.name = {"-p", "--prompt"}, .kind = OPT_STR, .dst = &prompt, .arg = "TEXT", .help = "text to tokenize"},
        {.name = {"-f", "--file"}, .kind = OPT_STR, .dst = &file, .arg = "FILE",
         .help = "read the text from FILE ('-' for stdin, the default)"},
        {.name = {"--no-bos"}, .kind = OPT_FLAG, .dst = &no_bos, .help = "do not add BOS/EOS (add_special = false)"},
        {.name = {"--special"}, .kind = OPT_FLAG, .dst = &parse_special,
         .help = "parse control-token texts like <|im_start|> (parse_special)"},
        {.name = {"--ids"}, .kind = OPT_FLAG, .dst = &ids_only, .help = "print only the ids line"},
    };
    const opts_cmd cmd = {.name = "tokenize", .usage = "vt tokenize -m FILE [-p TEXT | -f FILE] [options]",
                          .intro = "Tokenize TEXT (or the bytes of FILE, or stdin) with the tokenizer of the GGUF\n"
                                   "FILE and print one token a line: index, id and piece; then all ids.\n",
                          .opts = table, .n_opts = (int)(sizeof table / sizeof table[0])};
    const int prc = opts_parse(&cmd, argc, argv, NULL, NULL, NULL);
    if (prc >= 0) return prc;
    const bool add_special = !no_bos;
    if (!model || (prompt && file)) {
        fprintf(stderr, "vt tokenize: %s\n\n", !model ? "-m FILE is required" : "-p and -f both give the text: use one");
        opts_usage(&cmd, stderr);
        return 2;
    }
    char *text = NULL;
    size_t len = 0;
    if (prompt) {
        len = strlen(prompt);
    } else {
        if (!(text = cmd_read_file("tokenize", file, TOKENIZE_MAX_TEXT, &len))) return 1;
    }
    tokenizer *t;
    if (tok_load_file(model, &t) != VT_OK) {
        fprintf(stderr, "vt tokenize: %s\n", vt_last_error());
        free(text);
        return 1;
    }
    int32_t *ids;
    int64_t n;
    if (tok_encode(t, prompt ? prompt : text, len, add_special, parse_special, &ids, &n) != VT_OK) {
        fprintf(stderr, "vt tokenize: %s\n", vt_last_error());
        tok_free(t);
        free(text);
        return 1;
    }
    if (!ids_only) {
        char buf[256];
        for (int64_t i = 0; i < n; i++) {
            int64_t k = tok_piece(t, ids[i], true, buf, sizeof buf);
            printf("%6" PRId64 " %8d ", i, ids[i]);
            print_piece(buf, k < (int64_t)sizeof buf ? k : (int64_t)sizeof buf);
            putchar('\n');
        }
        printf("%" PRId64 " tokens\n", n);
    }
    putchar('[');
    for (int64_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
    printf("]\n");
    free(ids);
    tok_free(t);
    free(text);
    return 0;
}
