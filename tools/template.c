/* vt template --jinja FILE.jinja --vars VARS.json [--date YYYY-MM-DD]: render a chat
 * template as transformers' apply_chat_template does and print the text; when the
 * template refuses (raise_exception, a type error), exit 1 with its message. */
#include "cmds.h"
#include "jinja/jinja.h"
#include "opts.h"

#include "base/status.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TEMPLATE_MAX_FILE ((size_t)64 << 20) /* a template or its variables */

int cmd_template(int argc, char **argv) {
    const char *jinja_path = NULL, *vars_path = NULL, *date = NULL;
    const opt table[] = {
        {.name = {"--jinja"}, .kind = OPT_STR, .dst = &jinja_path, .arg = "FILE", .help = "the template ('-' for stdin)"},
        {.name = {"--vars"}, .kind = OPT_STR, .dst = &vars_path, .arg = "FILE",
         .help = "the variables (a JSON object; default {})"},
        {.name = {"--date"}, .kind = OPT_STR, .dst = &date, .arg = "YYYY-MM-DD",
         .help = "the day strftime_now() sees (default: today, UTC)"},
    };
    const opts_cmd cmd = {
        .name = "template",
        .usage = "vt template --jinja FILE.jinja [--vars VARS.json] [--date YYYY-MM-DD]",
        .intro = "Render a Jinja chat template (a GGUF's tokenizer.chat_template) with the variables\n"
                 "of VARS.json and print the text, byte for byte what Hugging Face transformers'\n"
                 "apply_chat_template renders. VARS is a JSON object: messages, tools,\n"
                 "add_generation_prompt (default false), bos_token, eos_token and any extra keyword\n"
                 "(enable_thinking, ...). A template that refuses its input (raise_exception, a type\n"
                 "error) makes vt exit 1 with the template's message.\n",
        .opts = table,
        .n_opts = (int)(sizeof table / sizeof table[0])};
    const int prc = opts_parse(&cmd, argc, argv, NULL, NULL, NULL);
    if (prc >= 0) return prc;
    if (!jinja_path) {
        fprintf(stderr, "vt template: --jinja FILE is required\n");
        opts_usage(&cmd, stderr);
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
    char *src = cmd_read_file("template", jinja_path, TEMPLATE_MAX_FILE, &src_len), *vars_text = NULL, *out = NULL;
    jinja_template *t = NULL;
    jinja_value *vars = NULL;
    if (!src) goto done;
    if (vars_path) {
        if (!(vars_text = cmd_read_file("template", vars_path, TEMPLATE_MAX_FILE, &vars_len))) goto done;
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
