/* vt template --jinja FILE.jinja --vars VARS.json [--date YYYY-MM-DD]: render a chat
 * template as transformers' apply_chat_template does and print the text; when the
 * template refuses (raise_exception, a type error), exit 1 with its message. */
#include "args.h"
#include "cmds.h"
#include "jinja/jinja.h"

#include "base/status.h"

#include <time.h>

static void print_usage(FILE *f) {
    fprintf(f,
            "usage: vt template --jinja FILE.jinja [--vars VARS.json] [--date YYYY-MM-DD]\n\n"
            "Render a Jinja chat template (a GGUF's tokenizer.chat_template) with the variables\n"
            "of VARS.json and print the text, byte for byte what Hugging Face transformers'\n"
            "apply_chat_template renders. VARS is a JSON object: messages, tools,\n"
            "add_generation_prompt (default false), bos_token, eos_token and any extra keyword\n"
            "(enable_thinking, ...). A template that refuses its input (raise_exception, a type\n"
            "error) makes vt exit 1 with the template's message.\n\n"
            "options:\n"
            "  --jinja FILE   the template ('-' for stdin)\n"
            "  --vars FILE    the variables (JSON object; default {})\n"
            "  --date DATE    the day strftime_now() sees (default: today, UTC)\n");
}

static char *read_path(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        fprintf(stderr, "vt template: %s: cannot open\n", path);
        return NULL;
    }
    size_t cap = 65536, n = 0;
    char *p = malloc(cap);
    while (p) {
        size_t k = fread(p + n, 1, cap - n, f);
        n += k;
        if (k == 0) break;
        if (n == cap) {
            if (cap >= (size_t)64 << 20) {
                fprintf(stderr, "vt template: %s: larger than 64 MiB\n", path);
                free(p);
                p = NULL;
                break;
            }
            char *q = realloc(p, cap * 2);
            if (!q) {
                free(p);
                p = NULL;
                break;
            }
            p = q;
            cap *= 2;
        }
    }
    if (f != stdin) fclose(f);
    *len = n;
    return p;
}

int cmd_template(int argc, char **argv) {
    const char *jinja_path = NULL, *vars_path = NULL, *date = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            print_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--jinja")) {
            if (!(jinja_path = arg_value(argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--vars")) {
            if (!(vars_path = arg_value(argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--date")) {
            if (!(date = arg_value(argc, argv, &i))) return 2;
        } else {
            fprintf(stderr, "vt template: unknown option '%s'\n", a);
            print_usage(stderr);
            return 2;
        }
    }
    if (!jinja_path) {
        fprintf(stderr, "vt template: --jinja FILE is required\n");
        print_usage(stderr);
        return 2;
    }
    jinja_render_opts opts = {0};
    if (date) {
        char extra;
        if (sscanf(date, "%d-%d-%d%c", &opts.year, &opts.month, &opts.day, &extra) != 3 || opts.year < 1 ||
            opts.year > 9999 || opts.month < 1 || opts.month > 12 || opts.day < 1 || opts.day > 31) {
            fprintf(stderr, "vt template: --date: '%s' is not YYYY-MM-DD\n", date);
            return 2;
        }
    } else {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        opts.year = tm.tm_year + 1900;
        opts.month = tm.tm_mon + 1;
        opts.day = tm.tm_mday;
    }
    int rc = 1;
    size_t src_len = 0, vars_len = 0;
    char *src = read_path(jinja_path, &src_len), *vars_text = NULL, *out = NULL;
    jinja_template *t = NULL;
    jinja_value *vars = NULL;
    if (!src) goto done;
    if (vars_path) {
        if (!(vars_text = read_path(vars_path, &vars_len))) goto done;
        if (jinja_value_from_json(vars_text, vars_len, &vars) != VT_OK) {
            fprintf(stderr, "vt template: %s: %s\n", vars_path, vt_last_error());
            goto done;
        }
        if (!jinja_is_object(vars)) {
            fprintf(stderr, "vt template: %s: the variables must be a JSON object\n", vars_path);
            goto done;
        }
        if (!jinja_object_get(vars, "add_generation_prompt", 21) &&
            jinja_object_set(vars, "add_generation_prompt", 21, jinja_bool(false)) != VT_OK) {
            fprintf(stderr, "vt template: out of memory\n");
            goto done;
        }
    }
    if (jinja_template_parse(src, src_len, &t) != VT_OK) {
        fprintf(stderr, "vt template: %s: %s\n", jinja_path, vt_last_error());
        goto done;
    }
    size_t out_len = 0;
    if (jinja_template_render(t, vars, &opts, &out, &out_len) != VT_OK) {
        fprintf(stderr, "vt template: %s: %s\n", jinja_path, vt_last_error());
        goto done;
    }
    fwrite(out, 1, out_len, stdout);
    rc = fflush(stdout) == 0 ? 0 : 1;
done:
    free(out);
    jinja_template_destroy(t);
    jinja_value_free(vars);
    free(vars_text);
    free(src);
    return rc;
}
