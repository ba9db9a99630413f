/* attach.h: data a layer above hangs on an object it does not own (a surface's record on a
 * sandbox), each under a key of its own (the address of a static object of the attacher's, so
 * that two attachers never collide), with the function that frees it. An object holds a few at
 * most (one per surface or feature that keeps something for it): a look-up walks them. */
#pragma once

#include <stddef.h>

typedef void (*sh_attach_free_fn)(void *ptr);

typedef struct sh_attachment sh_attachment;

/* The attachments of one object: zeroed is empty. */
typedef struct sh_attachments {
        sh_attachment *head;
} sh_attachments;

/* Attach ptr (not NULL) under key, with free_fn (NULL: nothing to free). What was attached
 * under key before is replaced, and freed with its own function. 0, or -ENOMEM (nothing
 * changed). */
int sh_attach_set(sh_attachments *a, const void *key, void *ptr, sh_attach_free_fn free_fn);
/* What is attached under key (borrowed), or NULL. */
void *sh_attach_get(const sh_attachments *a, const void *key);
/* Detach what is attached under key, without freeing it: it is the caller's again. NULL: there
 * was nothing. */
void *sh_attach_take(sh_attachments *a, const void *key);
/* The object goes: everything still attached is freed, newest first. */
void sh_attach_done(sh_attachments *a);
