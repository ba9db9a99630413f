/* net-internal.h: what the net layer's files share: libcurl's multi interface driven by the
 * daemon's loop (multi.c), for the fetcher (fetch.c) and the exchanger (exchange.c). */
#pragma once

#include <curl/curl.h>
#include <stdbool.h>

#include "sh/error.h"
#include "sh/loop.h"

/* A multi handle on the loop: curl's sockets watched by the loop, its timer a loop timer, and
 * after every action `after(owner)` (outside every curl callback) reads what finished. */
typedef struct sh_multi {
        sh_loop *loop;
        CURLM *multi;
        sh_timer *timer;
        bool loop_alive;
        void (*after)(void *owner);
        void *owner;
} sh_multi;

/* Set up m with at most `max_conns` connections at once (more transfers queue inside curl).
 * 0, or < 0 with *err. */
int sh_multi_init(sh_multi *m, sh_loop *loop, long max_conns, void (*after)(void *owner),
                  void *owner, sh_error **err);
/* Free it. The owner sets m->loop_alive (false: the loop is gone, do not touch it) and removes
 * its transfers first. */
void sh_multi_done(sh_multi *m);
