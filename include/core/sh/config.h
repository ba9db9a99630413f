/* config.h: the daemon's settings (CONTRACT.md section 10), described once in a declarative
 * table from which parsing (defaults, then SANDBOX_HOST_* variables, then --flags), validation,
 * --help and docs/configuration.md are derived. Parsing is pure: no I/O, no exit. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct sh_config {
        char *listen;  /* "host:port", "[v6]:port" or ":port" */
        char *pod_url; /* NULL: "http://" + the bound address */
        char *root;
        char *nfs_root; /* NULL: persist/restore are no-ops */
        char *images;   /* NULL: default image only */
        uint64_t max_sandboxes;
        uint64_t warm_pool;        /* ready sandboxes kept for the next default creates, 0: none */
        bool cgroup_favor_dynmods; /* v1: hold a favordynmods hierarchy (sh/cgroup.h) */
        uint64_t memory_max;
        uint64_t pids_max;
        uint64_t cpu_max_milli; /* cores x 1000 */
        uint64_t exec_output_max;
        uint64_t upload_max;
        uint64_t exec_grace_ms;
        uint64_t uid_base;              /* first sandbox uid; sandbox n gets uid_base + n */
        char *log_level;                /* debug, info, warn, error */
        char *tool_keys;                /* NULL: tool manifests need no signature */
        bool tool_insecure_http;        /* unsigned tools over plain http to any host */
        uint64_t persist_parallel;      /* rsyncs at once; the rest queue */
        uint64_t persist_timeout_ms;    /* one rsync run at most, then killed */
        uint64_t persist_io_timeout_ms; /* rsync --timeout: its longest wait for I/O */
        uint64_t persist_max_bytes;     /* one job's source at most: apparent sizes, holes count */
        uint64_t disk_max;              /* bytes of one workspace; 0: no limit (or auto) */
        bool disk_max_auto;             /* DISK_MAX=auto: sized at start (sh_config_disk_auto) */
        uint64_t disk_inodes_max;       /* inodes of one workspace (derived when unset) */
        char *disk_quota;               /* auto, project, loop, tmpfs, none */
        uint64_t disk_project_base;     /* first project quota id */
        /* the OpenSandbox surface (/v1, docs/opensandbox.md) */
        bool opensandbox;         /* off: every /v1 path is the native surface's (no route) */
        bool native;              /* off: only the probes and /drain of the native surface */
        char *api_key;            /* NULL: /v1 asks no key; never logged nor shown */
        uint64_t max_timeout_s;   /* a create's longest timeout; 0: no ceiling */
        uint64_t min_timeout_s;   /* a create's shortest timeout */
        char *snapshot_root;      /* NULL: {nfs_root}/.snapshots, else {root}/snapshots */
        uint64_t command_log_max; /* bytes kept of each background command's output */
        uint64_t listing_max;     /* bytes of one listing's or search's answer */
        uint64_t background_max;  /* background commands of one sandbox running at once */
        /* the image store (images/, docs/images.md) */
        bool image_pull;                /* off: only host images; every other name is refused */
        char *registry_auth;            /* NULL: none; a Docker config.json (dockerconfigjson) */
        char *registry_ca;              /* NULL: the system CAs only; a PEM file added to them */
        char *insecure_registries;      /* NULL: none; "host[:port],..." reached over plain http */
        char *registry_mirrors;         /* NULL: none; "docker.io=https://mirror,..." */
        uint64_t image_cache_max;       /* bytes of unused images kept; LRU eviction above it */
        uint64_t image_max;             /* bytes of one image, unpacked (and of its blobs) */
        uint64_t image_pull_timeout_ms; /* one pull at most, then it fails */
        char *prepull; /* NULL: none; "ref,ref,..." pulled at start (/readyz waits) */
        /* the cluster (cluster/, docs/deployment.md) */
        char *peers;                /* NULL: none; "dns:<name>[:port]" or "static:<url>,..." */
        char *peers_resolver;       /* NULL: /etc/resolv.conf's; "ip[:port],..." */
        uint64_t peers_interval_ms; /* discovery and peer probes, again every this often */
        uint64_t peer_timeout_ms;   /* a peer's connect + the head of its answer */
        uint64_t peer_relay_max;    /* relays in flight at once */
        /* egress (egress/, OPENSANDBOX.md section 4): parsed by sh_egress_operator_parse */
        char *egress_deny;  /* "" or targets, comma-separated; default SH_EGRESS_DENY_DEFAULT's */
        char *egress_allow; /* NULL: none; targets granted to every sandbox */
        /* network egress of /v1 sandboxes (egress/, docs/architecture.md) */
        char *dns_upstream; /* NULL: resolv.conf's first IPv4 nameserver; "ip[:port]" */
        /* the sandboxes' network (egress/, OPENSANDBOX.md section 4) */
        char *egress_cidr;        /* the sandboxes' range: "a.b.c.d/n", n 8..30 */
        bool egress;              /* off: no sandbox gets network (loopback only) */
        uint64_t egress_conn_max; /* connections tracked at once per sandbox */
        /* volumes of /v1 sandboxes (sandbox/volume.c, OPENSANDBOX.md section 2) */
        char *volume_root;       /* named volumes' directory; unset: {root}/volumes */
        char *volume_host_allow; /* NULL: no host volumes; absolute prefixes, ':' between */
        uint64_t volume_max;     /* volumes of one sandbox */
        /* the code interpreter (code/, OPENSANDBOX.md section 3.3) */
        uint64_t code_contexts_max;   /* contexts of one sandbox */
        uint64_t code_context_idle_s; /* an idle context ends after this */
        uint64_t code_result_max;     /* bytes of one result's MIME bundle */
} sh_config;

#define SH_DISK_MIN      (1ULL << 20)  /* smallest SANDBOX_HOST_DISK_MAX other than 0 */
#define SH_DISK_AUTO_MAX (10ULL << 30) /* SANDBOX_HOST_DISK_MAX=auto: at most 10 GiB ... */
#define SH_DISK_AUTO_DIV 4             /* ... and at most a quarter of the state volume */

typedef enum {
        SH_CONFIG_OK = 0,
        SH_CONFIG_HELP,    /* --help given: print sh_config_help() and exit 0 */
        SH_CONFIG_VERSION, /* --version given */
        SH_CONFIG_INVALID, /* *ret_msg names the setting; exit 2 */
} sh_config_result;

/* Fill *c from defaults, then `envp` (NULL-terminated "NAME=value" list), then argv[1..].
 * On SH_CONFIG_INVALID, *ret_msg is a one-line message to free. */
sh_config_result sh_config_parse(sh_config *c, int argc, char *const *argv, char *const *envp,
                                 char **ret_msg);

/* Free the strings of *c. */
void sh_config_done(sh_config *c);

/* The limit SANDBOX_HOST_DISK_MAX=auto means on a state volume of `volume` bytes: the smaller
 * of SH_DISK_AUTO_MAX and a quarter of the volume, in whole MiB, at least SH_DISK_MIN. */
uint64_t sh_config_disk_auto(uint64_t volume);

/* The inodes of a workspace of `disk_max` bytes when SANDBOX_HOST_DISK_INODES_MAX is unset:
 * one per 8 KiB (half ext4's default ratio: workspaces hold many small files), at least
 * 1024. */
uint64_t sh_config_disk_inodes(uint64_t disk_max);

/* The --help text (static). */
const char *sh_config_help(void);

/* Split a listen address ("127.0.0.1:8080", "[::1]:0", ":0") into host (newly allocated,
 * "" for any) and port. 0 or -EINVAL. */
int sh_config_split_listen(const char *listen, char **ret_host, uint16_t *ret_port);
