#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int current_level = -1;

static log_level level_from_env(void) {
    const char *s = getenv("VT_LOG");
    if (!s) return LOG_WARN;
    if (!strcmp(s, "debug")) return LOG_DEBUG;
    if (!strcmp(s, "info")) return LOG_INFO;
    if (!strcmp(s, "error")) return LOG_ERROR;
    if (!strcmp(s, "none")) return LOG_NONE;
    return LOG_WARN;
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
