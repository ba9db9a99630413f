/* list.h: one intrusive doubly linked list for every module (systemd's LIST_* idea): an item
 * carries `SH_LIST_FIELDS(type, name)` (its `name_next` and `name_prev` pointers), the owner
 * keeps a head pointer, and the macros below link, unlink and walk it. No allocation, O(1)
 * prepend and remove, an item may sit on several lists under different names. */
#pragma once

#include <stddef.h>

/* The link fields of one list inside an item. */
#define SH_LIST_FIELDS(t, name) t *name##_next, *name##_prev

/* An item not on the list has both pointers NULL (calloc'd items are). */
#define SH_LIST_INIT(name, item)                                                                   \
        do {                                                                                       \
                (item)->name##_next = (item)->name##_prev = NULL;                                  \
        } while (0)

/* Put item first; head is an lvalue pointer to the first item (NULL: empty). */
#define SH_LIST_PREPEND(name, head, item)                                                          \
        do {                                                                                       \
                __typeof__(*(head)) **_head = &(head), *_item = (item);                            \
                _item->name##_prev = NULL;                                                         \
                _item->name##_next = *_head;                                                       \
                if (*_head)                                                                        \
                        (*_head)->name##_prev = _item;                                             \
                *_head = _item;                                                                    \
        } while (0)

/* Put item last: O(n), for the short lists that keep an order (queues). */
#define SH_LIST_APPEND(name, head, item)                                                           \
        do {                                                                                       \
                __typeof__(*(head)) **_head = &(head), *_item = (item), *_tail = *_head;           \
                _item->name##_next = NULL;                                                         \
                if (!_tail) {                                                                      \
                        _item->name##_prev = NULL;                                                 \
                        *_head = _item;                                                            \
                } else {                                                                           \
                        while (_tail->name##_next)                                                 \
                                _tail = _tail->name##_next;                                        \
                        _tail->name##_next = _item;                                                \
                        _item->name##_prev = _tail;                                                \
                }                                                                                  \
        } while (0)

/* Put item right after `after` (an item of the list; NULL: first): O(1), for lists that keep
 * an order and know where an item goes (a sorted timer list, a queue with a tail pointer). */
#define SH_LIST_INSERT_AFTER(name, head, after, item)                                              \
        do {                                                                                       \
                __typeof__(*(head)) **_head = &(head), *_after = (after), *_item = (item);         \
                if (!_after) {                                                                     \
                        _item->name##_prev = NULL;                                                 \
                        _item->name##_next = *_head;                                               \
                        if (*_head)                                                                \
                                (*_head)->name##_prev = _item;                                     \
                        *_head = _item;                                                            \
                } else {                                                                           \
                        _item->name##_prev = _after;                                               \
                        _item->name##_next = _after->name##_next;                                  \
                        if (_after->name##_next)                                                   \
                                _after->name##_next->name##_prev = _item;                          \
                        _after->name##_next = _item;                                               \
                }                                                                                  \
        } while (0)

/* Take item off the list it is on (it must be on it); its pointers are NULL afterwards. */
#define SH_LIST_REMOVE(name, head, item)                                                           \
        do {                                                                                       \
                __typeof__(*(head)) **_head = &(head), *_item = (item);                            \
                if (_item->name##_next)                                                            \
                        _item->name##_next->name##_prev = _item->name##_prev;                      \
                if (_item->name##_prev)                                                            \
                        _item->name##_prev->name##_next = _item->name##_next;                      \
                else                                                                               \
                        *_head = _item->name##_next;                                               \
                _item->name##_next = _item->name##_prev = NULL;                                    \
        } while (0)

/* Walk the list; the body must not remove i (use SH_LIST_FOREACH_SAFE for that). */
#define SH_LIST_FOREACH(name, i, head) for ((i) = (head); (i); (i) = (i)->name##_next)

/* Walk the list; the body may remove (and free) i, not the next item n. */
#define SH_LIST_FOREACH_SAFE(name, i, n, head)                                                     \
        for ((i) = (head); (i) && (((n) = (i)->name##_next), 1); (i) = (n))

/* Whether item is the only one of, or linked into, a list whose head is head. */
#define SH_LIST_LINKED(name, head, item) ((item)->name##_prev != NULL || (head) == (item))
