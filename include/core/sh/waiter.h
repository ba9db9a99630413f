/* waiter.h: a party told once, from the loop, that something another module runs is over (a
 * sandbox's trash emptied: the answer of the request that moved something there waits for it).
 * The waiter is the caller's memory, with `done` set; the module keeps a list of them and wakes
 * them; a waiter cancelled first (its request went) is never told. */
#pragma once

#include "sh/list.h"

typedef struct sh_waiter {
        void (*done)(struct sh_waiter *w);
        SH_LIST_FIELDS(struct sh_waiter, waiters);
        struct sh_waiter **head; /* the list it is on; NULL: none */
} sh_waiter;

/* w onto the list *head (w is on no list). */
void sh_waiter_add(sh_waiter **head, sh_waiter *w);
/* w off its list, never told (accepts NULL, and a waiter on no list). */
void sh_waiter_cancel(sh_waiter *w);
/* Every waiter of *head told, each taken off first (its done may free it or add it again). */
void sh_waiters_wake(sh_waiter **head);
/* Every waiter of *from onto *to. */
void sh_waiters_move(sh_waiter **from, sh_waiter **to);
