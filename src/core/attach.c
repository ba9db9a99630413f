/* attach.c: data hung on an object under the attacher's key (sh/attach.h). */
#include "sh/attach.h"

#include <errno.h>
#include <stdlib.h>

struct sh_attachment {
        const void *key;
        void *ptr;
        sh_attach_free_fn free_fn;
        sh_attachment *next;
};

static sh_attachment **find(sh_attachments *a, const void *key)
{
        sh_attachment **pp = &a->head;

        while (*pp && (*pp)->key != key)
                pp = &(*pp)->next;
        return pp;
}

int sh_attach_set(sh_attachments *a, const void *key, void *ptr, sh_attach_free_fn free_fn)
{
        sh_attachment **pp = find(a, key), *at = *pp;
        void *old;
        sh_attach_free_fn old_free;

        if (!at) {
                at = calloc(1, sizeof(*at));
                if (!at)
                        return -ENOMEM;
                at->key = key;
                at->next = a->head;
                a->head = at;
                at->ptr = ptr;
                at->free_fn = free_fn;
                return 0;
        }
        /* The new one is in place before the old one's free runs (it may look). */
        old = at->ptr;
        old_free = at->free_fn;
        at->ptr = ptr;
        at->free_fn = free_fn;
        if (old_free && old != ptr)
                old_free(old);
        return 0;
}

void *sh_attach_get(const sh_attachments *a, const void *key)
{
        const sh_attachment *at;

        for (at = a->head; at; at = at->next)
                if (at->key == key)
                        return at->ptr;
        return NULL;
}

void *sh_attach_take(sh_attachments *a, const void *key)
{
        sh_attachment **pp = find(a, key), *at = *pp;
        void *ptr;

        if (!at)
                return NULL;
        *pp = at->next;
        ptr = at->ptr;
        free(at);
        return ptr;
}

void sh_attach_done(sh_attachments *a)
{
        sh_attachment *at;

        /* Each is off the list before its free runs: a free that looks finds it gone. */
        while ((at = a->head)) {
                a->head = at->next;
                if (at->free_fn)
                        at->free_fn(at->ptr);
                free(at);
        }
}
