/* config.c: declarative settings table; defaults -> environment -> flags; validation. Pure. */
#include "sh/config.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sh/macro.h"
#include "sh/util.h"

typedef enum {
        T_STRING,
        T_OPT_STRING,
        T_UINT,
        T_SIZE,
        T_DISK_MAX, /* a size that is 0 (off) or at least min, or "auto" (disk_max_auto) */
        T_CPU,
        T_MS,
        T_LISTEN,
        T_URL,
        T_PATH,
        T_OPT_PATH,
        T_LEVEL,
        T_BOOL,
        T_DISK_QUOTA,
        T_SECRET,   /* an optional string never shown (an empty value is unset) */
        T_SECS,     /* seconds, suffixes s m h d */
        T_OPT_SECS, /* the same, unset (0) by default */
        T_CIDR,     /* an IPv4 network a.b.c.d/n, host bits zero, n between min and max */
        T_PATHS,    /* absolute paths without a ".." component, ':' between (empty: unset) */
} opt_type;

typedef struct opt {
        const char *env; /* SANDBOX_HOST_... */
        opt_type type;
        size_t offset;
        const char *def;   /* NULL: unset */
        uint64_t min, max; /* numeric bounds (inclusive) */
        const char *help;
} opt;

#define OFF(f) offsetof(sh_config, f)
static const opt options[] = {
        {"SANDBOX_HOST_LISTEN", T_LISTEN, OFF(listen), "127.0.0.1:8080", 0, 0,
         "address:port to listen on (:0 = any free port)"},
        {"SANDBOX_HOST_POD_URL", T_URL, OFF(pod_url), NULL, 0, 0,
         "URL returned as pod_url (default: http:// + the bound address)"},
        {"SANDBOX_HOST_ROOT", T_PATH, OFF(root), "/var/lib/sandbox-host", 0, 0,
         "state directory: {root}/{id}/workspace, {root}/{id}/.ready, the tool store"},
        {"SANDBOX_HOST_NFS_ROOT", T_OPT_PATH, OFF(nfs_root), NULL, 0, 0,
         "archive root for item_id restore and persist (unset: both are no-ops)"},
        {"SANDBOX_HOST_IMAGES", T_OPT_PATH, OFF(images), NULL, 0, 0,
         "directory of named root filesystem images ({images}/{name}/)"},
        /* At most 32768: every sandbox has two memory cgroups (its own and its worker's leaf),
         * and the kernel numbers memory cgroups in 16 bits, 65,535 on a machine. */
        {"SANDBOX_HOST_MAX_SANDBOXES", T_UINT, OFF(max_sandboxes), "256", 1, 32768,
         "sandboxes held at once before create answers 503 (each idle one holds 1 of the "
         "daemon's open files, 2 through /v1)"},
        {"SANDBOX_HOST_WARM_POOL", T_UINT, OFF(warm_pool), "0", 0, 64,
         "sandboxes kept started and ready for the next creates with default options (0: none)"},
        {"SANDBOX_HOST_CGROUP_FAVOR_DYNMODS", T_BOOL, OFF(cgroup_favor_dynmods), "on", 0, 0,
         "cgroup v1: hold a hierarchy with favordynmods, so that moving a process into a "
         "cgroup (every exec, every create) never waits for an RCU grace period; forks and "
         "exits on the node cost an atomic operation more (v2: the node's mount option)"},
        {"SANDBOX_HOST_MEMORY_MAX", T_SIZE, OFF(memory_max), "1G", 1 << 20, UINT64_MAX / 2,
         "memory limit of one sandbox, bytes (suffixes K, M, G, T)"},
        {"SANDBOX_HOST_PIDS_MAX", T_UINT, OFF(pids_max), "512", 1, 4194304,
         "process limit of one sandbox"},
        {"SANDBOX_HOST_CPU_MAX", T_CPU, OFF(cpu_max_milli), "1", 1, 1024000,
         "CPU limit of one sandbox, in cores (0.5, 2)"},
        {"SANDBOX_HOST_EXEC_OUTPUT_MAX", T_SIZE, OFF(exec_output_max), "16M", 0, 1ULL << 32,
         "bytes kept for each of out and err in the exit frame"},
        {"SANDBOX_HOST_UPLOAD_MAX", T_SIZE, OFF(upload_max), "1G", 0, UINT64_MAX / 2,
         "largest upload body, bytes (native PUT /file, /v1 files/upload)"},
        {"SANDBOX_HOST_EXEC_GRACE_MS", T_MS, OFF(exec_grace_ms), "1000", 0, 86400000,
         "how long an exec waits, after its command exited, for descendants holding its pipes"},
        {"SANDBOX_HOST_UID_BASE", T_UINT, OFF(uid_base), "200000", 1000, 4000000000ULL,
         "first uid of the sandbox uid range (sandbox slot n runs as uid_base + n; uid_base - 1 "
         "is the group of every sandbox that mounts a volume)"},
        {"SANDBOX_HOST_LOG_LEVEL", T_LEVEL, OFF(log_level), "info", 0, 0,
         "least severe log level written: debug, info, warn, error"},
        {"SANDBOX_HOST_PERSIST_PARALLEL", T_UINT, OFF(persist_parallel), "4", 1, 256,
         "rsync transfers (persist, restore) running at once; the rest queue"},
        {"SANDBOX_HOST_PERSIST_TIMEOUT_MS", T_MS, OFF(persist_timeout_ms), "3600000", 1000,
         604800000, "longest one rsync transfer may run before it is killed"},
        {"SANDBOX_HOST_PERSIST_IO_TIMEOUT_MS", T_MS, OFF(persist_io_timeout_ms), "300000", 1000,
         604800000, "longest rsync may wait for its own I/O (rsync --timeout, in seconds)"},
        {"SANDBOX_HOST_PERSIST_MAX_BYTES", T_SIZE, OFF(persist_max_bytes), "64G", 1 << 20,
         UINT64_MAX / 2,
         "largest tree one persist or restore may read: the apparent sizes of its files "
         "(sparse holes count); above it the job fails"},
        {"SANDBOX_HOST_TOOL_KEYS", T_OPT_PATH, OFF(tool_keys), NULL, 0, 0,
         "file of trusted ed25519 publisher keys, base64, one per line; when set, tool "
         "manifests must be signed"},
        {"SANDBOX_HOST_TOOL_INSECURE_HTTP", T_BOOL, OFF(tool_insecure_http), "off", 0, 0,
         "on: unsigned tools may be fetched over plain http from any host (off: https, or a "
         "loopback host, unless SANDBOX_HOST_TOOL_KEYS is set)"},
        {"SANDBOX_HOST_DISK_MAX", T_DISK_MAX, OFF(disk_max), "auto", SH_DISK_MIN, 1ULL << 50,
         "disk limit of one sandbox's workspace, bytes, at least 1M (0: no limit; auto: 10G or a "
         "quarter of the state volume, the smaller, where the host can hold a limit, else none)"},
        {"SANDBOX_HOST_DISK_INODES_MAX", T_UINT, OFF(disk_inodes_max), "0", 0, 1ULL << 32,
         "files, directories and links one workspace may hold (0: one per 8K of DISK_MAX)"},
        {"SANDBOX_HOST_DISK_QUOTA", T_DISK_QUOTA, OFF(disk_quota), "auto", 0, 0,
         "how DISK_MAX is enforced: auto, project, loop, tmpfs or none"},
        {"SANDBOX_HOST_DISK_PROJECT_BASE", T_UINT, OFF(disk_project_base), "3000000000", 1,
         4000000000ULL,
         "first project quota id (sandbox slot n uses base + n and base + max + n; named volumes "
         "with pvc.storage the 65536 ids from base + 2 x max)"},
        {"SANDBOX_HOST_OPENSANDBOX", T_BOOL, OFF(opensandbox), "on", 0, 0,
         "on: serve OpenSandbox's API under /v1/ (off: every /v1 path is the native 404)"},
        {"SANDBOX_HOST_NATIVE", T_BOOL, OFF(native), "on", 0, 0,
         "on: serve the native contract, which is unauthenticated (off: only /healthz, /readyz "
         "and /drain; every other native path is 404)"},
        {"SANDBOX_HOST_API_KEY", T_SECRET, OFF(api_key), NULL, 0, 0,
         "key every /v1 lifecycle request must carry in OPEN-SANDBOX-API-KEY (unset: none); "
         "set, execd and egress routes need the sandbox's access token"},
        {"SANDBOX_HOST_MAX_TIMEOUT", T_OPT_SECS, OFF(max_timeout_s), NULL, 1, 100ULL * 365 * 86400,
         "longest /v1 sandbox timeout, seconds (suffixes s, m, h, d; unset: no ceiling)"},
        {"SANDBOX_HOST_MIN_TIMEOUT", T_SECS, OFF(min_timeout_s), "60", 1, 100ULL * 365 * 86400,
         "shortest /v1 sandbox timeout, seconds (suffixes s, m, h, d)"},
        {"SANDBOX_HOST_SNAPSHOT_ROOT", T_OPT_PATH, OFF(snapshot_root), NULL, 0, 0,
         "directory of /v1 snapshots (unset: {NFS_ROOT}/.snapshots, else {ROOT}/snapshots)"},
        {"SANDBOX_HOST_COMMAND_LOG_MAX", T_SIZE, OFF(command_log_max), "16M", 1024, 1ULL << 32,
         "bytes kept of each background command's output, bytes (suffixes K, M, G, T)"},
        {"SANDBOX_HOST_LISTING_MAX", T_SIZE, OFF(listing_max), "64M", 4096, 1ULL << 40,
         "largest answer of one /v1 listing or search, bytes (past it: 400 before the answer, "
         "or the streamed answer cut)"},
        {"SANDBOX_HOST_BACKGROUND_MAX", T_UINT, OFF(background_max), "16", 1, 1024,
         "background commands one /v1 sandbox may run at once (each holds one daemon fd)"},
        {"SANDBOX_HOST_IMAGE_PULL", T_BOOL, OFF(image_pull), "on", 0, 0,
         "on: an image name that is no host image is an OCI reference, pulled from its "
         "registry (off: only host images)"},
        {"SANDBOX_HOST_REGISTRY_AUTH", T_OPT_PATH, OFF(registry_auth), NULL, 0, 0,
         "registry credentials, a Docker config.json (a Kubernetes dockerconfigjson secret)"},
        {"SANDBOX_HOST_REGISTRY_CA", T_OPT_PATH, OFF(registry_ca), NULL, 0, 0,
         "PEM file of CA certificates trusted for registries besides the system's"},
        {"SANDBOX_HOST_INSECURE_REGISTRIES", T_OPT_STRING, OFF(insecure_registries), NULL, 0, 0,
         "registries reached over plain http, comma-separated host[:port]"},
        {"SANDBOX_HOST_REGISTRY_MIRRORS", T_OPT_STRING, OFF(registry_mirrors), NULL, 0, 0,
         "registry mirrors, comma-separated registry=URL (docker.io=https://mirror.example)"},
        {"SANDBOX_HOST_IMAGE_CACHE_MAX", T_SIZE, OFF(image_cache_max), "20G", 0, 1ULL << 50,
         "bytes of images no sandbox uses kept in the store; the least recently used go above it"},
        {"SANDBOX_HOST_IMAGE_MAX", T_SIZE, OFF(image_max), "16G", 1 << 20, 1ULL << 50,
         "largest image, bytes: its blobs, and its files unpacked"},
        {"SANDBOX_HOST_IMAGE_PULL_TIMEOUT_MS", T_MS, OFF(image_pull_timeout_ms), "1800000", 1000,
         86400000, "longest one image pull may take before it fails"},
        {"SANDBOX_HOST_PREPULL", T_OPT_STRING, OFF(prepull), NULL, 0, 0,
         "images pulled at start, comma-separated references; /readyz waits for them"},
        {"SANDBOX_HOST_PEERS", T_OPT_STRING, OFF(peers), NULL, 0, 0,
         "the other pods of this service: dns:<headless service name>[:port] (its A/AAAA "
         "records) or static:<url>,<url>... (unset: this pod serves only its own sandboxes)"},
        {"SANDBOX_HOST_PEERS_RESOLVER", T_OPT_STRING, OFF(peers_resolver), NULL, 0, 0,
         "DNS servers for dns: peers, comma-separated ip[:port] (unset: /etc/resolv.conf's)"},
        {"SANDBOX_HOST_PEERS_INTERVAL_MS", T_MS, OFF(peers_interval_ms), "5000", 100, 600000,
         "how often the peers are discovered and probed again"},
        {"SANDBOX_HOST_PEER_TIMEOUT_MS", T_MS, OFF(peer_timeout_ms), "10000", 100, 600000,
         "longest wait for a peer: its connect and the head of its answer (then a relayed "
         "call is 404, a listing leaves it out)"},
        {"SANDBOX_HOST_PEER_RELAY_MAX", T_UINT, OFF(peer_relay_max), "256", 1, 4096,
         "requests relayed to peers at once (past it: 503 with Retry-After)"},
        /* The same text as SH_EGRESS_DENY_DEFAULT (include/egress/sh/policy.h), which this layer
         * cannot see; test_egress_policy.c checks that they agree. */
        {"SANDBOX_HOST_EGRESS_DENY", T_OPT_STRING, OFF(egress_deny),
         "0.0.0.0/8,127.0.0.0/8,169.254.0.0/16,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,"
         "100.64.0.0/10,224.0.0.0/4,240.0.0.0/4,255.255.255.255",
         0, 0,
         "destinations no sandbox may reach whatever its policy, comma-separated IPv4 CIDRs, "
         "names and *.names (the pod's own addresses and the sandboxes' range are added)"},
        {"SANDBOX_HOST_EGRESS_ALLOW", T_OPT_STRING, OFF(egress_allow), NULL, 0, 0,
         "destinations every sandbox may reach whatever its policy (unless denied by "
         "SANDBOX_HOST_EGRESS_DENY), comma-separated IPv4 CIDRs, names and *.names"},
        {"SANDBOX_HOST_DNS_UPSTREAM", T_OPT_STRING, OFF(dns_upstream), NULL, 0, 0,
         "the resolver the sandboxes' DNS proxy forwards allowed names to, ip[:port] (IPv4; "
         "unset: the first IPv4 nameserver of /etc/resolv.conf)"},
        /* The gateway (the first address) and one /32 per sandbox slot: a /30 holds two. */
        {"SANDBOX_HOST_EGRESS_CIDR", T_CIDR, OFF(egress_cidr), "100.127.0.0/16", 8, 30,
         "the sandboxes' own IPv4 range, a.b.c.d/n (n 8..30): its first address is their "
         "gateway and DNS proxy, each sandbox has one more; it must hold MAX_SANDBOXES and "
         "be used by nothing else the pod reaches"},
        {"SANDBOX_HOST_EGRESS", T_BOOL, OFF(egress), "on", 0, 0,
         "give /v1 sandboxes network under their policy (needs CAP_NET_ADMIN and nftables; "
         "without them, or off, sandboxes have loopback only and /healthz says why)"},
        {"SANDBOX_HOST_EGRESS_CONN_MAX", T_UINT, OFF(egress_conn_max), "1024", 1, 1048576,
         "connections one sandbox has tracked at once (conntrack); a new one past it is "
         "dropped"},
        {"SANDBOX_HOST_VOLUME_ROOT", T_OPT_PATH, OFF(volume_root), NULL, 0, 0,
         "directory of /v1 named volumes (pvc), {VOLUME_ROOT}/{claimName}: a PersistentVolume or "
         "an NFS share every pod mounts (unset: {ROOT}/volumes, made at start)"},
        {"SANDBOX_HOST_VOLUME_HOST_ALLOW", T_PATHS, OFF(volume_host_allow), NULL, 0, 0,
         "host directories /v1 host volumes may mount, absolute prefixes separated by ':', each "
         "existing at start (unset: host volumes are refused)"},
        {"SANDBOX_HOST_VOLUME_MAX", T_UINT, OFF(volume_max), "16", 0, 64,
         "volumes one /v1 sandbox may mount (0: none)"},
        {"SANDBOX_HOST_CODE_CONTEXTS_MAX", T_UINT, OFF(code_contexts_max), "16", 1, 1024,
         "code interpreter contexts one /v1 sandbox may hold at once (each holds 4 daemon fds)"},
        {"SANDBOX_HOST_CODE_CONTEXT_IDLE", T_SECS, OFF(code_context_idle_s), "30m", 1,
         100ULL * 365 * 86400,
         "how long a code context may stay idle before it is ended, seconds (suffixes s, m, h, "
         "d)"},
        {"SANDBOX_HOST_CODE_RESULT_MAX", T_SIZE, OFF(code_result_max), "8M", 1024, 1ULL << 30,
         "largest MIME bundle of one code result, bytes (suffixes K, M, G, T)"},
};

const char *sh_config_help(void)
{
        static char buf[16384];
        size_t off;
        size_t i;

        if (buf[0])
                return buf;
        off = (size_t)snprintf(buf, sizeof(buf),
                               "Usage: sandbox-host [--name=value | --name value]...\n\n"
                               "Each setting is a flag or a SANDBOX_HOST_* variable; the flag "
                               "wins.\n\n");
        for (i = 0; i < ARRAY_SIZE(options) && off < sizeof(buf); i++) {
                char flag[64];
                size_t j, k = 0;
                const char *n = options[i].env + strlen("SANDBOX_HOST_");

                for (j = 0; n[j] && k + 1 < sizeof(flag); j++)
                        flag[k++] = n[j] == '_' ? '-' : (char)(n[j] | 0x20);
                flag[k] = '\0';
                off += (size_t)snprintf(buf + off, sizeof(buf) - off,
                                        "  --%-18s %s\n  %-20s %s (default: %s)\n", flag,
                                        options[i].env, "", options[i].help,
                                        options[i].def ? options[i].def : "unset");
        }
        if (off < sizeof(buf))
                snprintf(buf + off, sizeof(buf) - off,
                         "  --help               this text\n"
                         "  --version            print the version and exit\n");
        return buf;
}

int sh_config_split_listen(const char *listen, char **ret_host, uint16_t *ret_port)
{
        const char *colon, *host_start, *host_end;
        uint64_t port;
        char *host;

        if (!listen || !*listen)
                return -EINVAL;
        if (listen[0] == '[') {
                host_end = strchr(listen, ']');
                if (!host_end || host_end[1] != ':')
                        return -EINVAL;
                host_start = listen + 1;
                colon = host_end + 1;
        } else {
                colon = strrchr(listen, ':');
                if (!colon || memchr(listen, ':', (size_t)(colon - listen)))
                        return -EINVAL;
                host_start = listen;
                host_end = colon;
        }
        if (sh_parse_u64(colon + 1, &port) < 0 || port > 65535)
                return -EINVAL;
        host = strndup(host_start, (size_t)(host_end - host_start));
        if (!host)
                return -ENOMEM;
        *ret_host = host;
        *ret_port = (uint16_t)port;
        return 0;
}

/* Absolute paths separated by ':', none empty, none with a ".." component, each shorter than
 * 4096 bytes. */
static bool paths_valid(const char *value)
{
        const char *c = value;

        for (;;) {
                size_t n = strcspn(c, ":"), i = 0;

                if (n == 0 || n >= 4096 || c[0] != '/')
                        return false;
                while (i < n) {
                        size_t k = strcspn(c + i, "/:");

                        if (k == 2 && c[i] == '.' && c[i + 1] == '.')
                                return false;
                        i += k + (c[i + k] == '/');
                }
                if (!c[n])
                        return true;
                c += n + 1;
        }
}

/* Check one value and store it. Returns 0 or -EINVAL. */
static int set_option(sh_config *c, const opt *o, const char *value)
{
        char **sp = (char **)((char *)c + o->offset);
        uint64_t *up = (uint64_t *)((char *)c + o->offset);
        uint64_t v;
        char *copy;
        int r;

        if (o->type == T_BOOL) {
                bool *bp = (bool *)((char *)c + o->offset);

                if (!strcmp(value, "on") || !strcmp(value, "true") || !strcmp(value, "1") ||
                    !strcmp(value, "yes"))
                        *bp = true;
                else if (!strcmp(value, "off") || !strcmp(value, "false") || !strcmp(value, "0") ||
                         !strcmp(value, "no"))
                        *bp = false;
                else
                        return -EINVAL;
                return 0;
        }
        if (!*value && (o->type == T_OPT_PATH || o->type == T_URL || o->type == T_SECRET ||
                        o->type == T_PATHS)) {
                free(*sp); /* an empty optional setting is the same as an unset one */
                *sp = NULL;
                return 0;
        }
        switch (o->type) {
        case T_UINT:
        case T_MS:
                r = sh_parse_u64(value, &v);
                goto numeric;
        case T_DISK_MAX:
                c->disk_max_auto = STREQ(value, "auto");
                if (c->disk_max_auto) {
                        *up = 0;
                        return 0;
                }
                /* fall through */
        case T_SIZE:
                r = sh_parse_size(value, &v);
                if (r == 0 && v == 0 && o->type == T_DISK_MAX) {
                        *up = 0;
                        return 0;
                }
                goto numeric;
        case T_SECS:
        case T_OPT_SECS:
                r = sh_parse_seconds(value, &v);
                goto numeric;
        case T_CPU:
                r = sh_parse_millicores(value, &v);
        numeric:
                if (r < 0 || v < o->min || v > o->max)
                        return -EINVAL;
                *up = v;
                return 0;
        case T_LISTEN: {
                char *host = NULL;
                uint16_t port;

                if (sh_config_split_listen(value, &host, &port) < 0)
                        return -EINVAL;
                free(host);
                break;
        }
        case T_URL: {
                size_t n = strlen(value);

                if (strncmp(value, "http://", 7) != 0 && strncmp(value, "https://", 8) != 0)
                        return -EINVAL;
                if (strpbrk(value, " \t\r\n\"\\"))
                        return -EINVAL;
                copy = strdup(value);
                if (!copy)
                        return -ENOMEM;
                while (n > 8 && copy[n - 1] == '/') /* pod_url has no trailing slash */
                        copy[--n] = '\0';
                free(*sp);
                *sp = copy;
                return 0;
        }
        case T_PATH:
        case T_OPT_PATH:
                if (value[0] != '/' || strlen(value) >= 4096)
                        return -EINVAL;
                break;
        case T_LEVEL:
                if (strcmp(value, "debug") && strcmp(value, "info") && strcmp(value, "warn") &&
                    strcmp(value, "error"))
                        return -EINVAL;
                break;
        case T_DISK_QUOTA:
                if (strcmp(value, "auto") && strcmp(value, "project") && strcmp(value, "loop") &&
                    strcmp(value, "tmpfs") && strcmp(value, "none"))
                        return -EINVAL;
                break;
        case T_CIDR: {
                uint32_t addr;
                unsigned prefix;

                if (sh_parse_ipv4_net(value, &addr, &prefix) < 0 || !strchr(value, '/') ||
                    prefix < o->min || prefix > o->max)
                        return -EINVAL;
                break;
        }
        case T_PATHS:
                if (!paths_valid(value))
                        return -EINVAL;
                break;
        case T_STRING:
        case T_OPT_STRING:
        case T_SECRET:
        case T_BOOL: /* handled above */
                break;
        }
        copy = strdup(value);
        if (!copy)
                return -ENOMEM;
        free(*sp);
        *sp = copy;
        return 0;
}

static void flag_name(const opt *o, char *buf, size_t size)
{
        const char *n = o->env + strlen("SANDBOX_HOST_");
        size_t k = 0;

        for (; *n && k + 1 < size; n++)
                buf[k++] = *n == '_' ? '-' : (char)(*n | 0x20);
        buf[k] = '\0';
}

static const opt *find_flag(const char *name, size_t len)
{
        size_t i;

        for (i = 0; i < ARRAY_SIZE(options); i++) {
                char flag[64];

                flag_name(&options[i], flag, sizeof(flag));
                if (strlen(flag) == len && memcmp(flag, name, len) == 0)
                        return &options[i];
        }
        return NULL;
}

static int invalid(char **ret_msg, const char *setting, const char *value, const char *why)
{
        char *m = NULL;

        if (asprintf(&m, "invalid %s: '%s': %s", setting, value ? value : "", why) < 0)
                m = NULL;
        *ret_msg = m;
        return SH_CONFIG_INVALID;
}

/* The disk settings go together; a limit that nothing would enforce is refused here, one the
 * host cannot enforce is refused at start (src/isolation/disk.c). */
static sh_config_result check_disk(sh_config *c, char **ret_msg)
{
        char v[32];

        if (!c->disk_max && !c->disk_max_auto && c->disk_inodes_max) {
                snprintf(v, sizeof(v), "%llu", (unsigned long long)c->disk_inodes_max);
                return invalid(ret_msg, "SANDBOX_HOST_DISK_INODES_MAX", v,
                               "needs SANDBOX_HOST_DISK_MAX");
        }
        if (c->disk_max && STREQ(c->disk_quota, "none"))
                return invalid(ret_msg, "SANDBOX_HOST_DISK_QUOTA", c->disk_quota,
                               "'none' cannot hold SANDBOX_HOST_DISK_MAX");
        /* A tmpfs workspace is memory: its size is the operator's to choose, never a share of
         * a disk. */
        if (c->disk_max_auto && STREQ(c->disk_quota, "tmpfs"))
                return invalid(ret_msg, "SANDBOX_HOST_DISK_QUOTA", c->disk_quota,
                               "needs a SANDBOX_HOST_DISK_MAX of its own (a tmpfs is memory)");
        if (!c->disk_max && !c->disk_max_auto && !STREQ(c->disk_quota, "auto") &&
            !STREQ(c->disk_quota, "none"))
                return invalid(ret_msg, "SANDBOX_HOST_DISK_QUOTA", c->disk_quota,
                               "needs SANDBOX_HOST_DISK_MAX");
        if (c->disk_max && !c->disk_inodes_max)
                c->disk_inodes_max = sh_config_disk_inodes(c->disk_max);
        return SH_CONFIG_OK;
}

/* The sandboxes' range holds a gateway and one address per sandbox slot. */
static sh_config_result check_egress(const sh_config *c, char **ret_msg)
{
        uint32_t addr;
        unsigned prefix;

        if (sh_parse_ipv4_net(c->egress_cidr, &addr, &prefix) < 0)
                return invalid(ret_msg, "SANDBOX_HOST_EGRESS_CIDR", c->egress_cidr,
                               "not a network");
        if ((1ULL << (32 - prefix)) - 2 < c->max_sandboxes)
                return invalid(ret_msg, "SANDBOX_HOST_EGRESS_CIDR", c->egress_cidr,
                               "holds fewer addresses than SANDBOX_HOST_MAX_SANDBOXES plus 2");
        return SH_CONFIG_OK;
}

uint64_t sh_config_disk_auto(uint64_t volume)
{
        uint64_t v = volume / SH_DISK_AUTO_DIV;

        if (v > SH_DISK_AUTO_MAX)
                v = SH_DISK_AUTO_MAX;
        v &= ~(SH_DISK_MIN - 1);
        return v < SH_DISK_MIN ? SH_DISK_MIN : v;
}

uint64_t sh_config_disk_inodes(uint64_t disk_max)
{
        return disk_max / 8192 < 1024 ? 1024 : disk_max / 8192;
}

sh_config_result sh_config_parse(sh_config *c, int argc, char *const *argv, char *const *envp,
                                 char **ret_msg)
{
        size_t i;
        int a;

        memset(c, 0, sizeof(*c));
        *ret_msg = NULL;
        for (i = 0; i < ARRAY_SIZE(options); i++)
                if (options[i].def && set_option(c, &options[i], options[i].def) < 0)
                        return invalid(ret_msg, options[i].env, options[i].def, "bad default");

        /* A flag wins over the variable: a variable is not even judged when its flag is
         * given, so an invalid leftover in the environment cannot stop a corrected flag. */
        bool by_flag[ARRAY_SIZE(options)] = {false};

        for (a = 1; a < argc; a++) {
                const char *arg = argv[a], *eq;
                const opt *o;

                if (strncmp(arg, "--", 2) != 0)
                        continue;
                eq = strchr(arg + 2, '=');
                o = find_flag(arg + 2, eq ? (size_t)(eq - arg - 2) : strlen(arg + 2));
                if (o) {
                        by_flag[o - options] = true;
                        if (!eq)
                                a++; /* its value */
                }
        }
        for (; envp && *envp; envp++) {
                const char *eq = strchr(*envp, '=');

                if (!eq || strncmp(*envp, "SANDBOX_HOST_", 13) != 0)
                        continue;
                for (i = 0; i < ARRAY_SIZE(options); i++) {
                        size_t n = strlen(options[i].env);

                        if ((size_t)(eq - *envp) != n || memcmp(*envp, options[i].env, n) != 0)
                                continue;
                        /* A secret is never echoed, not even in a refusal. */
                        if (!by_flag[i] && set_option(c, &options[i], eq + 1) < 0)
                                return invalid(ret_msg, options[i].env,
                                               options[i].type == T_SECRET ? "(hidden)" : eq + 1,
                                               options[i].help);
                        break;
                }
        }

        for (a = 1; a < argc; a++) {
                const char *arg = argv[a], *eq, *value;
                const opt *o;
                size_t nlen;

                if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
                        return SH_CONFIG_HELP;
                if (strcmp(arg, "--version") == 0)
                        return SH_CONFIG_VERSION;
                if (strncmp(arg, "--", 2) != 0)
                        return invalid(ret_msg, "argument", arg, "not a --flag");
                eq = strchr(arg + 2, '=');
                nlen = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
                o = find_flag(arg + 2, nlen);
                if (!o)
                        return invalid(ret_msg, "flag", arg, "unknown flag (see --help)");
                if (eq) {
                        value = eq + 1;
                } else {
                        if (a + 1 >= argc)
                                return invalid(ret_msg, arg, "", "missing value");
                        value = argv[++a];
                }
                if (set_option(c, o, value) < 0) {
                        char flag[80];

                        snprintf(flag, sizeof(flag), "--%.*s", (int)nlen, arg + 2);
                        return invalid(ret_msg, flag, o->type == T_SECRET ? "(hidden)" : value,
                                       o->help);
                }
        }
        if (check_disk(c, ret_msg) != SH_CONFIG_OK)
                return SH_CONFIG_INVALID;
        /* Named volumes live beside the sandboxes unless the operator puts them elsewhere. */
        if (!c->volume_root && asprintf(&c->volume_root, "%s/volumes", c->root) < 0) {
                c->volume_root = NULL;
                return invalid(ret_msg, "SANDBOX_HOST_VOLUME_ROOT", "", "out of memory");
        }
        return check_egress(c, ret_msg);
}

void sh_config_done(sh_config *c)
{
        size_t i;

        for (i = 0; i < ARRAY_SIZE(options); i++) {
                switch (options[i].type) {
                case T_STRING:
                case T_OPT_STRING:
                case T_LISTEN:
                case T_URL:
                case T_PATH:
                case T_OPT_PATH:
                case T_LEVEL:
                case T_SECRET:
                case T_CIDR:
                case T_PATHS:
                case T_DISK_QUOTA: {
                        char **sp = (char **)((char *)c + options[i].offset);

                        free(*sp);
                        *sp = NULL;
                        break;
                }
                default:
                        break;
                }
        }
}
