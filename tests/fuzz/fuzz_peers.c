/* fuzz_peers.c: the pure parts of the peers (cluster/peers-pure.c). '0' + text: a
 * SANDBOX_HOST_PEERS value (sh_peers_spec_parse); '1' + bytes: a peer's /healthz body
 * (sh_peer_health_parse). Properties: a refusal has a reason and leaves nothing allocated; a dns:
 * spec has a name of DNS characters and no URLs; a static: spec has 1..SH_CLUSTER_STATIC_MAX
 * URLs, each "http://" + a lower-case host + ":" + a port of 1..65535, without a path; a parsed
 * health has a token of SH_POD_TOKEN_LEN lower-case hex digits and a non-empty instance. */
#include "fuzz.h"

#include <errno.h>

#include "sh/cluster.h"
#include "sh/util.h"

static void check_url(const char *u)
{
        const char *h = u + 7, *colon;
        unsigned long port;
        char *end;

        FZ_CHECK(strncmp(u, "http://", 7) == 0);
        colon = strrchr(h, ':');
        FZ_CHECK(colon && colon > h);
        port = strtoul(colon + 1, &end, 10);
        FZ_CHECK(*end == '\0' && port >= 1 && port <= 65535);
        for (const char *p = h; p < colon; p++) {
                FZ_CHECK(!(*p >= 'A' && *p <= 'Z'));
                FZ_CHECK(*p != '/' && *p != '@' && *p != '?' && *p != '#');
        }
}

static void spec(fz *f)
{
        char *s = fz_rest_str(f);
        char reason[256];
        sh_peers_spec sp;
        int r = sh_peers_spec_parse(s, &sp, reason, sizeof(reason));

        if (r < 0) {
                FZ_CHECK(r == -EINVAL && reason[0] != '\0');
                FZ_CHECK(!sp.name && !sp.urls);
        } else if (sp.dns) {
                FZ_CHECK(sp.name && sp.name[0] && !sp.urls && sp.port <= 65535);
                for (const char *p = sp.name; *p; p++)
                        FZ_CHECK((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                                 (*p >= '0' && *p <= '9') || *p == '-' || *p == '.');
        } else {
                size_t n = 0;

                FZ_CHECK(sp.urls && !sp.name);
                for (; sp.urls[n]; n++)
                        check_url(sp.urls[n]);
                FZ_CHECK(n >= 1 && n <= SH_CLUSTER_STATIC_MAX);
        }
        sh_peers_spec_done(&sp);
        free(s);
}

static void health(fz *f)
{
        char *b = fz_dup(f->p, f->n);
        sh_peer_health h;

        if (sh_peer_health_parse(b, f->n, &h) == 0) {
                FZ_CHECK(sh_pod_token_valid(h.token, strlen(h.token)));
                FZ_CHECK(h.instance[0] != '\0' && strlen(h.instance) < sizeof(h.instance));
        }
        free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);

        switch (fz_u8(&f)) {
        case '0':
                spec(&f);
                break;
        case '1':
                health(&f);
                break;
        default:
                break;
        }
        return 0;
}
