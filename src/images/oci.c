/* oci.c: manifests, indexes and image configs (sh/oci.h). Skeleton: filled in by the next
 * commits. */
#include "sh/oci.h"

#include <errno.h>
#include <stdlib.h>

int sh_oci_doc_parse(const char *content_type, const char *body, size_t len, sh_oci_doc *ret,
                     char *reason, size_t reason_len)
{
        (void)content_type;
        (void)body;
        (void)len;
        (void)reason;
        (void)reason_len;
        *ret = (sh_oci_doc){0};
        return -ENOSYS;
}

void sh_oci_doc_done(sh_oci_doc *d)
{
        (void)d;
}

int sh_oci_index_pick(const sh_oci_doc *idx, const char *os, const char *arch, const char *variant,
                      const sh_oci_descriptor **ret, char *reason, size_t n)
{
        (void)idx;
        (void)os;
        (void)arch;
        (void)variant;
        (void)reason;
        (void)n;
        *ret = NULL;
        return -ENOSYS;
}

void sh_oci_host_platform(const char **os, const char **arch, const char **variant)
{
        *os = "linux";
        *arch = "amd64";
        *variant = NULL;
}

int sh_oci_config_parse(const char *body, size_t len, sh_oci_config *ret, char *reason, size_t n)
{
        (void)body;
        (void)len;
        (void)reason;
        (void)n;
        *ret = (sh_oci_config){0};
        return -ENOSYS;
}

void sh_oci_config_done(sh_oci_config *c)
{
        (void)c;
}
