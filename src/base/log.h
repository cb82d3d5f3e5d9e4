/* Minimal leveled logging to stderr. VT_LOG=debug|info|warn|error|none sets the
 * level; any other value keeps warn and says so once (the vt command refuses it). */
#ifndef VT_BASE_LOG_H
#define VT_BASE_LOG_H

#include <stdbool.h>

typedef enum { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR, LOG_NONE } log_level;

/* The level named by s ("debug", "info", "warn", "error", "none"); false for
 * anything else. */
bool log_level_parse(const char *s, log_level *out);
void log_set_level(log_level level);
log_level log_get_level(void);
void log_msg(log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
