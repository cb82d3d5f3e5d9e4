#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int current_level = -1;

bool log_level_parse(const char *s, log_level *out) {
    static const struct {
        const char *name;
        log_level level;
    } names[] = {{"debug", LOG_DEBUG}, {"info", LOG_INFO}, {"warn", LOG_WARN}, {"error", LOG_ERROR}, {"none", LOG_NONE}};
    for (size_t i = 0; s && i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(s, names[i].name)) {
            *out = names[i].level;
            return true;
        }
    return false;
}

static log_level level_from_env(void) {
    const char *s = getenv("VT_LOG");
    log_level l = LOG_WARN;
    if (s && !log_level_parse(s, &l))
        fprintf(stderr, "vt warn: VT_LOG='%s' is not debug, info, warn, error or none; using warn\n", s);
    return l;
}

void log_set_level(log_level level) { current_level = (int)level; }

log_level log_get_level(void) {
    if (current_level < 0) current_level = (int)level_from_env();
    return (log_level)current_level;
}

void log_msg(log_level level, const char *fmt, ...) {
    if (level < log_get_level()) return;
    static const char *const names[] = {"debug", "info", "warn", "error", ""};
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "vt %s: %s\n", names[level], buf);
}
