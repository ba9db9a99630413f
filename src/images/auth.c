/* auth.c: registry authentication (sh/oci.h). Skeleton: filled in by the next commits. */
#include "sh/oci.h"

#include <errno.h>
#include <stdlib.h>

int sh_auth_challenge_parse(const char *header, sh_auth_challenge *ret, char *reason, size_t n)
{
        (void)header;
        (void)reason;
        (void)n;
        *ret = (sh_auth_challenge){0};
        return -ENOSYS;
}

void sh_auth_challenge_done(sh_auth_challenge *c)
{
        (void)c;
}

int sh_docker_config_lookup(const char *json, size_t len, const char *domain, char **user,
                            char **password, char *reason, size_t n)
{
        (void)json;
        (void)len;
        (void)domain;
        (void)reason;
        (void)n;
        *user = *password = NULL;
        return -ENOSYS;
}

int sh_auth_token_parse(const char *body, size_t len, char **token, char *reason, size_t n)
{
        (void)body;
        (void)len;
        (void)reason;
        (void)n;
        *token = NULL;
        return -ENOSYS;
}
