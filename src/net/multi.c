/* multi.c: libcurl's multi interface driven by our epoll loop (net-internal.h): curl says
 * which sockets to watch and when to wake it, the loop does, and a slow server never stalls
 * us. */
#include <errno.h>
#include <stdlib.h>

#include "net-internal.h"

/* One watched socket of curl's; the loop handle lives as long as curl keeps the socket. */
typedef struct sock {
        sh_io *io;
} sock;

static void on_timer(sh_loop *l, sh_timer *t, void *data)
{
        sh_multi *m = data;
        int running;

        m->timer = NULL; /* the loop frees a fired timer */
        curl_multi_socket_action(m->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        m->after(m->owner);
}

/* CURLMOPT_TIMERFUNCTION: must not call back into curl, only (re)arm our timer. */
static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
        sh_multi *m = userp;

        if (!m->loop_alive)
                return 0;
        sh_loop_cancel_timer(m->loop, m->timer);
        m->timer = NULL;
        if (timeout_ms < 0)
                return 0;
        m->timer = sh_loop_add_timer(m->loop, (uint64_t)timeout_ms, on_timer, m);
        return m->timer ? 0 : -1;
}

static void on_io(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        sh_multi *m = data;
        int flags = 0, running;

        if (events & EPOLLIN)
                flags |= CURL_CSELECT_IN;
        if (events & EPOLLOUT)
                flags |= CURL_CSELECT_OUT;
        if (events & (EPOLLERR | EPOLLHUP))
                flags |= CURL_CSELECT_ERR;
        curl_multi_socket_action(m->multi, fd, flags, &running);
        m->after(m->owner);
}

/* CURLMOPT_SOCKETFUNCTION: curl tells which sockets to watch for what. REMOVE comes before
 * curl closes the socket, so the epoll registration never outlives the fd. */
static int socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
        sh_multi *m = userp;
        sock *k = socketp;
        uint32_t ev = 0;

        if (what == CURL_POLL_REMOVE) {
                if (k) {
                        if (m->loop_alive)
                                sh_loop_del_io(m->loop, k->io);
                        free(k);
                        curl_multi_assign(m->multi, s, NULL);
                }
                return 0;
        }
        if (!m->loop_alive)
                return 0;
        if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
                ev |= EPOLLIN;
        if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
                ev |= EPOLLOUT;
        if (!k) {
                k = calloc(1, sizeof(*k));
                if (!k)
                        return -1;
                k->io = sh_loop_add_io(m->loop, s, ev, on_io, m);
                if (!k->io) {
                        free(k);
                        return -1;
                }
                curl_multi_assign(m->multi, s, k);
                return 0;
        }
        return sh_loop_mod_io(m->loop, k->io, ev) < 0 ? -1 : 0;
}

int sh_multi_init(sh_multi *m, sh_loop *loop, long max_conns, void (*after)(void *owner),
                  void *owner, sh_error **err)
{
        static bool global_done;

        if (!global_done) {
                if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                        return sh_error_make(err, EIO, "initialising libcurl");
                global_done = true;
        }
        *m = (sh_multi){.loop = loop, .loop_alive = true, .after = after, .owner = owner};
        m->multi = curl_multi_init();
        if (!m->multi)
                return sh_error_make(err, ENOMEM, "creating a libcurl multi handle");
        if (curl_multi_setopt(m->multi, CURLMOPT_SOCKETFUNCTION, socket_cb) != CURLM_OK ||
            curl_multi_setopt(m->multi, CURLMOPT_SOCKETDATA, m) != CURLM_OK ||
            curl_multi_setopt(m->multi, CURLMOPT_TIMERFUNCTION, timer_cb) != CURLM_OK ||
            curl_multi_setopt(m->multi, CURLMOPT_TIMERDATA, m) != CURLM_OK ||
            /* Many transfers at once queue inside curl instead of opening unbounded sockets. */
            curl_multi_setopt(m->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, max_conns) != CURLM_OK) {
                curl_multi_cleanup(m->multi);
                m->multi = NULL;
                return sh_error_make(err, EINVAL, "configuring libcurl");
        }
        return 0;
}

void sh_multi_done(sh_multi *m)
{
        if (m->loop_alive)
                sh_loop_cancel_timer(m->loop, m->timer);
        m->timer = NULL;
        curl_multi_cleanup(m->multi); /* accepts NULL */
        m->multi = NULL;
}
