/* log.c: JSON-lines logger on stderr, and the tap that sees every line naming a sandbox. One
 * write(2) per line so lines never interleave. */
#include "sh/log.h"
#include "sh/list.h"
#include "sh/util.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static sh_log_level min_level = SH_LOG_INFO;
static const char *const level_names[] = {"debug", "info", "warn", "error"};
/* The taps (a surface's per-sandbox diagnostics), told of every line naming a sandbox. */
static sh_log_tap *taps;
static bool in_tap; /* a line logged by a tap itself is not tapped again */

void sh_log_tap_add(sh_log_tap *t)
{
        SH_LIST_PREPEND(taps, taps, t);
}

void sh_log_tap_remove(sh_log_tap *t)
{
        if (SH_LIST_LINKED(taps, taps, t))
                SH_LIST_REMOVE(taps, taps, t);
}

void sh_log_set_level(sh_log_level level)
{
        min_level = level;
}

sh_log_level sh_log_get_level(void)
{
        return min_level;
}

static void add_time(cJSON *o)
{
        struct timespec ts;
        struct tm tm;
        char buf[64];

        if (clock_gettime(CLOCK_REALTIME, &ts) < 0 || !gmtime_r(&ts.tv_sec, &tm))
                return;
        snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
        cJSON_AddStringToObject(o, "time", buf);
}

/* The line goes to stderr when its level is on, and to the tap (without its newline) when it
 * names a sandbox. */
/* Whether some tap takes the lines of `sandbox`. */
static bool tapped(const char *sandbox)
{
        sh_log_tap *t;

        if (!sandbox || in_tap)
                return false;
        SH_LIST_FOREACH(taps, t, taps)
                if (!t->wants || t->wants(sandbox, t->data))
                        return true;
        return false;
}

static void emit(cJSON *o, bool to_stderr, const char *sandbox)
{
        char *line = cJSON_PrintUnformatted(o);
        size_t len, off = 0;

        if (!line)
                return;
        len = strlen(line);
        if (sandbox && taps && !in_tap) {
                sh_log_tap *t, *next;

                in_tap = true;
                SH_LIST_FOREACH_SAFE(taps, t, next, taps)
                        if (!t->wants || t->wants(sandbox, t->data))
                                t->fn(sandbox, line, len, t->data);
                in_tap = false;
        }
        line[len] = '\n'; /* replaces the terminator; cJSON allocated len + 1 bytes */
        while (to_stderr && off < len + 1) {
                ssize_t n = write(STDERR_FILENO, line + off, len + 1 - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                off += (size_t)n;
        }
        free(line);
}

void sh_log(sh_log_level level, const char *event, const char *sandbox, const char *fmt, ...)
{
        cJSON *o;
        char *msg = NULL;
        va_list ap;
        int saved = errno;

        /* The tap sees a sandbox's info lines and above whatever the level on stderr. */
        if (level < min_level && !(level >= SH_LOG_INFO && tapped(sandbox)))
                return;
        o = cJSON_CreateObject();
        if (!o)
                goto out;
        add_time(o);
        cJSON_AddStringToObject(o, "level", level_names[level]);
        cJSON_AddStringToObject(o, "event", event);
        if (sandbox)
                cJSON_AddStringToObject(o, "sandbox", sandbox);
        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        if (msg && *msg) {
                sh_utf8_sanitize(msg); /* messages may quote client bytes */
                cJSON_AddStringToObject(o, "msg", msg);
        }
        emit(o, level >= min_level, sandbox);
        free(msg);
        cJSON_Delete(o);
out:
        errno = saved;
}

void sh_log_request(const char *method, const char *path, int status, double duration_ms,
                    const char *sandbox)
{
        cJSON *o;
        int saved = errno;

        if (SH_LOG_INFO < min_level && !tapped(sandbox))
                return;
        o = cJSON_CreateObject();
        if (!o)
                return;
        add_time(o);
        cJSON_AddStringToObject(o, "level", "info");
        cJSON_AddStringToObject(o, "event", "request");
        if (sandbox)
                cJSON_AddStringToObject(o, "sandbox", sandbox);
        cJSON_AddStringToObject(o, "method", method ? method : "");
        {
                char *clean = strdup(path ? path : "");

                if (clean)
                        sh_utf8_sanitize(clean);
                cJSON_AddStringToObject(o, "path", clean ? clean : "");
                free(clean);
        }
        cJSON_AddNumberToObject(o, "status", status);
        cJSON_AddNumberToObject(o, "duration_ms", (double)(long long)(duration_ms * 1000) / 1000);
        emit(o, SH_LOG_INFO >= min_level, sandbox);
        cJSON_Delete(o);
        errno = saved;
}
