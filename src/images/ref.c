/* ref.c: image references (sh/oci.h). Skeleton: filled in by the next commits. */
#include "sh/oci.h"

#include <errno.h>
#include <stdlib.h>

int sh_image_ref_parse(const char *s, sh_image_ref *ret, char *reason, size_t reason_len)
{
        (void)s;
        (void)reason;
        (void)reason_len;
        *ret = (sh_image_ref){0};
        return -ENOSYS;
}

void sh_image_ref_done(sh_image_ref *r)
{
        (void)r;
}

char *sh_image_ref_canonical(const sh_image_ref *r)
{
        (void)r;
        return NULL;
}

const char *sh_image_ref_api_host(const sh_image_ref *r)
{
        return r->domain;
}

bool sh_oci_digest_valid(const char *d)
{
        (void)d;
        return false;
}
