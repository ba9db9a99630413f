/* log.h: structured logs, one JSON object per line on stderr
 * ({"time","level","event","sandbox","msg",...}). Only the layer that decides logs
 * (http/, sandbox/manager, main); lower layers return sh_error instead. */
#pragma once

#include <stdbool.h>

#include <stddef.h>

#include "sh/list.h"
#include "sh/macro.h"

typedef enum { SH_LOG_DEBUG = 0, SH_LOG_INFO, SH_LOG_WARN, SH_LOG_ERROR } sh_log_level;

void sh_log_set_level(sh_log_level level);
sh_log_level sh_log_get_level(void);

/* A log line with an event name, an optional sandbox id (NULL: none) and a message. */
void sh_log(sh_log_level level, const char *event, const char *sandbox, const char *fmt, ...)
        _printf_(4, 5);

/* The access-log line of one finished request. */
void sh_log_request(const char *method, const char *path, int status, double duration_ms,
                    const char *sandbox);

/* A tap: told of every line that names a sandbox (its `sandbox` field), as the JSON text of
 * the line without its newline, from inside the sh_log call (so on the caller's thread: the
 * loop's). It sees a sandbox's lines of level info and above whatever the level set for
 * stderr (and debug lines when that level is on). It must not keep `line`; a line logged by
 * a tap is not tapped again. The tap is the caller's memory, linked in until removed. */
typedef void (*sh_log_tap_fn)(const char *sandbox, const char *line, size_t len, void *data);
typedef struct sh_log_tap {
        sh_log_tap_fn fn;
        /* Whether the tap takes lines naming `sandbox` at all (NULL: every sandbox's). Asked
         * before a line below the stderr level is even built, so that a busy daemon logging
         * at warn does not format an access-log line per request for a tap that drops it. */
        bool (*wants)(const char *sandbox, void *data);
        void *data;
        SH_LIST_FIELDS(struct sh_log_tap, taps);
} sh_log_tap;
void sh_log_tap_add(sh_log_tap *t);
/* Accepts a tap not linked. */
void sh_log_tap_remove(sh_log_tap *t);

#define log_debug(ev, sb, ...) sh_log(SH_LOG_DEBUG, ev, sb, __VA_ARGS__)
#define log_info(ev, sb, ...)  sh_log(SH_LOG_INFO, ev, sb, __VA_ARGS__)
#define log_warn(ev, sb, ...)  sh_log(SH_LOG_WARN, ev, sb, __VA_ARGS__)
#define log_error(ev, sb, ...) sh_log(SH_LOG_ERROR, ev, sb, __VA_ARGS__)
