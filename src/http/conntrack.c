/* conntrack.c: the server's book of client connections and the admission policy against
 * slow clients (slowloris): which connection to close so that a new one always gets in, and
 * which ones let their header deadline pass (pure; server.c accepts, closes and feeds it). */
#include <string.h>

#include "sh/http.h"

void sh_conntrack_add(sh_conntrack *t, sh_conn *c, uint64_t now_ms)
{
        SH_LIST_PREPEND(all, t->all, c);
        sh_conntrack_wait(t, c, now_ms, now_ms + SH_HTTP_HEADER_TIMEOUT_MS);
}

void sh_conntrack_remove(sh_conntrack *t, sh_conn *c)
{
        sh_conntrack_unwait(t, c);
        if (c->active) {
                c->active = false;
                t->n_active--;
        }
        if (SH_LIST_LINKED(all, t->all, c))
                SH_LIST_REMOVE(all, t->all, c);
}

void sh_conntrack_wait(sh_conntrack *t, sh_conn *c, uint64_t now_ms, uint64_t deadline_ms)
{
        if (c->waiting || c->evicted)
                return;
        c->waiting = true;
        c->since_ms = now_ms;
        c->deadline_ms = deadline_ms;
        /* Appended at the known end: every keep-alive request's end comes here, and walking
         * up to SH_HTTP_WAITING_MAX entries each time was 3% of the daemon under small
         * requests. */
        c->wait_next = NULL;
        c->wait_prev = t->waiting_last;
        if (t->waiting_last)
                t->waiting_last->wait_next = c;
        else
                t->waiting = c;
        t->waiting_last = c;
        t->n_waiting++;
}

void sh_conntrack_unwait(sh_conntrack *t, sh_conn *c)
{
        if (!c->waiting)
                return;
        if (t->waiting_last == c)
                t->waiting_last = c->wait_prev;
        SH_LIST_REMOVE(wait, t->waiting, c);
        c->waiting = false;
        t->n_waiting--;
}

void sh_conntrack_headers_due(sh_conntrack *t, sh_conn *c, uint64_t now_ms)
{
        if (c->waiting && c->deadline_ms == 0)
                c->deadline_ms = now_ms + SH_HTTP_HEADER_TIMEOUT_MS;
}

void sh_conntrack_activate(sh_conntrack *t, sh_conn *c)
{
        sh_conntrack_unwait(t, c);
        if (!c->active) {
                c->active = true;
                t->n_active++;
        }
}

void sh_conntrack_idle(sh_conntrack *t, sh_conn *c, uint64_t now_ms)
{
        if (!c->active)
                return;
        c->active = false;
        t->n_active--;
        sh_conntrack_wait(t, c, now_ms, 0);
}

/* Of the waiting connections (from `addr` when not NULL): the oldest still sending its
 * headers, else the oldest idle one. A client's header block comes in one packet, so one
 * that is still incomplete is what a slowloris holds; an idle keep-alive connection belongs
 * to a client that finished a request, and closing it can race that client's next request:
 * it goes only when nothing else can. */
static sh_conn *oldest(const sh_conntrack *t, const unsigned char *addr, unsigned *ret_n)
{
        sh_conn *c, *sending = NULL, *idle = NULL;
        unsigned n = 0;

        SH_LIST_FOREACH(wait, c, t->waiting) {
                if (addr && memcmp(c->addr, addr, sizeof(c->addr)) != 0)
                        continue;
                n++;
                if (c->deadline_ms && !sending)
                        sending = c;
                else if (!c->deadline_ms && !idle)
                        idle = c;
        }
        if (ret_n)
                *ret_n = n;
        return sending ? sending : idle;
}

sh_conn *sh_conntrack_victim(const sh_conntrack *t, const unsigned char addr[16])
{
        unsigned n;
        sh_conn *c = oldest(t, addr, &n);

        /* One client's waiting connections have a share of their own, so one client's flood
         * closes its own connections before anybody else's... */
        if (n >= SH_HTTP_WAITING_PER_CLIENT)
                return c;
        /* ...and all of them together a bound: the oldest goes, and the newcomer (a probe of
         * the kubelet, from the same node address as an attacker maybe) gets in. */
        if (t->n_waiting >= SH_HTTP_WAITING_MAX)
                return oldest(t, NULL, NULL);
        return NULL;
}

sh_conn *sh_conntrack_expired(const sh_conntrack *t, uint64_t now_ms)
{
        sh_conn *c;

        SH_LIST_FOREACH(wait, c, t->waiting) {
                if (c->deadline_ms && c->deadline_ms <= now_ms)
                        return c;
        }
        return NULL;
}

bool sh_conntrack_any_due(const sh_conntrack *t)
{
        const sh_conn *c;

        SH_LIST_FOREACH(wait, c, t->waiting) {
                if (c->deadline_ms)
                        return true;
        }
        return false;
}
