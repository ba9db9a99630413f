/* waiter.c: lists of parties told once that something is over (sh/waiter.h). */
#include "sh/waiter.h"

#include <stddef.h>

void sh_waiter_add(sh_waiter **head, sh_waiter *w)
{
        SH_LIST_PREPEND(waiters, *head, w);
        w->head = head;
}

void sh_waiter_cancel(sh_waiter *w)
{
        if (!w || !w->head)
                return;
        SH_LIST_REMOVE(waiters, *w->head, w);
        w->head = NULL;
}

void sh_waiters_wake(sh_waiter **head)
{
        sh_waiter *w;

        while ((w = *head)) {
                sh_waiter_cancel(w);
                w->done(w);
        }
}

void sh_waiters_move(sh_waiter **from, sh_waiter **to)
{
        sh_waiter *w;

        while ((w = *from)) {
                sh_waiter_cancel(w);
                sh_waiter_add(to, w);
        }
}
