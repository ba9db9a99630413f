/* proto.c: the daemon <-> sandbox-init protocol (pure, no syscalls): the worker's spec, read
 * once by the init from a sealed memfd, the control messages and the fds they carry, the exec
 * request, the names of the setup steps. Compiled into the daemon and into sandbox-init; the
 * decoders treat every byte as untrusted. */
#include "sh/proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "sh/macro.h"
#include "sh/volquota.h"

/*
 * The spec, in host byte order (both ends are builds of one tree on one host):
 *
 *   magic "SHSPEC1\n"
 *   str hostname, str rootfs, str workspace, str tools      str = u32 length + bytes, no NUL
 *   u32 n_entries, then per entry: u8 is_link, str name, str src (dir) or target (link)
 *   u64 tmp_size, u32 ptys_max, u32 nameserver, u32 uid, u32 gid, u32 nprocs
 *   u32 n_rlimits, then per limit: u32 resource, u64 cur, u64 max
 *   u32 n_filter, then per BPF instruction: u16 code, u8 jt, u8 jf, u32 k
 *   u32 volume_gid, u32 volume_project, u32 n_volumes, then per volume: u32 flags, u64 quota,
 *   str base, str path, str sub, str target
 *
 * then, only for an overlay root (n_lowers > 0, no entries):
 *
 *   u32 n_lowers, str layers, str upper, str work, then per lower (lowest first): str name
 *
 * and nothing after it.
 */
static const char spec_magic[8] = {'S', 'H', 'S', 'P', 'E', 'C', '1', '\n'};

/* ---- volumes ----------------------------------------------------------------------------- */

/* A path component of n bytes that is one: not empty (so no leading '/', no "//", no trailing
 * '/'), not "." or "..". */
static bool plain_component(const char *start, size_t n)
{
        return n > 0 && !(n == 1 && start[0] == '.') &&
               !(n == 2 && start[0] == '.' && start[1] == '.');
}

/* Components joined by single '/', each plain_component, the whole shorter than `field`
 * bytes. At most one component when `single`. */
static bool plain_relative(const char *p, size_t field, bool single)
{
        const char *start = p, *c;

        if (strnlen(p, field) >= field || !*p)
                return false;
        for (c = p;; c++) {
                if (*c != '/' && *c)
                        continue;
                if (!plain_component(start, (size_t)(c - start)))
                        return false;
                if (!*c)
                        return true;
                if (single)
                        return false;
                start = c + 1;
        }
}

bool sh_worker_volume_valid(const sh_volume_spec *v)
{
        bool create = v->flags & SH_VOL_CREATE;

        if (v->flags & ~(uint32_t)SH_VOL_FLAGS)
                return false;
        if (v->quota &&
            (v->flags & (SH_VOL_NAMED | SH_VOL_CREATE)) != (SH_VOL_NAMED | SH_VOL_CREATE))
                return false;
        if (strnlen(v->base, sizeof(v->base)) >= sizeof(v->base) || v->base[0] != '/')
                return false;
        if (!(STREQ(v->path, ".") && !create) && !plain_relative(v->path, sizeof(v->path), create))
                return false;
        if (strnlen(v->sub, sizeof(v->sub)) >= sizeof(v->sub) ||
            (v->sub[0] && !plain_relative(v->sub, sizeof(v->sub), false)))
                return false;
        return v->target[0] == '/' && plain_relative(v->target + 1, sizeof(v->target) - 1, false);
}

/* The volumes' group: none, or (with volumes) one that is neither root's nor the sandbox's. */
static bool good_volume_gid(const sh_worker_spec *s)
{
        if (s->volume_gid == (gid_t)-1)
                return false;
        return s->n_volumes == 0 || (s->volume_gid != 0 && s->volume_gid != s->gid);
}

/* The named volumes' project ids: none, or a range below 2^32 - 1 (never id 0); one when a
 * volume has a quota. */
static bool good_volume_project(const sh_worker_spec *s)
{
        int i;

        if (s->volume_project && s->volume_project > UINT32_MAX - SH_VOLQUOTA_IDS)
                return false;
        for (i = 0; i < s->n_volumes; i++)
                if (s->volumes[i].quota && !s->volume_project)
                        return false;
        return true;
}

/* ---- writer ---------------------------------------------------------------------------- */

typedef struct writer {
        char *buf;
        size_t len, cap;
        int err;
} writer;

static void put(writer *w, const void *p, size_t n)
{
        if (w->err)
                return;
        if (n > SH_WORKER_SPEC_MAX - w->len) {
                w->err = -E2BIG;
                return;
        }
        if (w->len + n > w->cap) {
                size_t nc = w->cap ? w->cap : 4096;
                char *nb;

                while (nc < w->len + n)
                        nc *= 2;
                nb = realloc(w->buf, nc);
                if (!nb) {
                        w->err = -ENOMEM;
                        return;
                }
                w->buf = nb;
                w->cap = nc;
        }
        memcpy(w->buf + w->len, p, n);
        w->len += n;
}

/* A fixed-size field, in host byte order. */
#define PUT(w, type, v)                                                                            \
        do {                                                                                       \
                type _v = (v);                                                                     \
                put((w), &_v, sizeof(_v));                                                         \
        } while (0)

/* A string field as the decoder will check it: shorter than `field` bytes. */
static void put_str(writer *w, const char *s, size_t field)
{
        size_t n = strnlen(s, field);

        if (n >= field) {
                if (!w->err)
                        w->err = -ENAMETOOLONG;
                return;
        }
        PUT(w, uint32_t, (uint32_t)n);
        put(w, s, n);
}

int sh_worker_spec_encode(const sh_worker_spec *s, char **ret_buf, size_t *ret_len)
{
        writer w = {0};
        int i;

        if (s->n_entries < 0 || s->n_entries > SH_WORKER_MAX_ENTRIES || s->n_rlimits < 0 ||
            s->n_rlimits > SH_WORKER_MAX_RLIMITS || s->nprocs < 0 ||
            s->nprocs > SH_EXEC_MAX_PROCS_FDS || !s->seccomp.filter || s->seccomp.len == 0 ||
            s->seccomp.len > SH_WORKER_FILTER_MAX || s->n_lowers < 0 ||
            s->n_lowers > SH_WORKER_LOWERS_MAX || (s->n_lowers > 0 && s->n_entries > 0))
                return -EINVAL;
        for (i = 0; i < s->n_lowers; i++)
                if (!sh_worker_lower_valid(s->lowers[i]))
                        return -EINVAL;
        if (s->n_lowers > 0 && (s->layers[0] != '/' || s->upper[0] != '/' || s->work[0] != '/'))
                return -EINVAL;
        if (s->n_volumes < 0 || s->n_volumes > SH_WORKER_VOLUMES_MAX ||
            (s->n_volumes > 0 && (!s->volumes || !good_volume_gid(s))) ||
            s->volume_gid == (gid_t)-1)
                return -EINVAL;
        for (i = 0; i < s->n_volumes; i++)
                if (!sh_worker_volume_valid(&s->volumes[i]))
                        return -EINVAL;
        if (!good_volume_project(s))
                return -EINVAL;
        put(&w, spec_magic, sizeof(spec_magic));
        put_str(&w, s->hostname, sizeof(s->hostname));
        put_str(&w, s->rootfs, sizeof(s->rootfs));
        put_str(&w, s->workspace, sizeof(s->workspace));
        put_str(&w, s->tools, sizeof(s->tools));
        PUT(&w, uint32_t, (uint32_t)s->n_entries);
        for (i = 0; i < s->n_entries; i++) {
                const sh_root_entry *e = &s->entries[i];

                PUT(&w, uint8_t, e->is_link ? 1 : 0);
                put_str(&w, e->name, sizeof(e->name));
                if (e->is_link)
                        put_str(&w, e->target, sizeof(e->target));
                else
                        put_str(&w, e->src, sizeof(e->src));
        }
        PUT(&w, uint64_t, s->tmp_size);
        PUT(&w, uint32_t, s->ptys_max);
        PUT(&w, uint32_t, s->nameserver);
        PUT(&w, uint32_t, (uint32_t)s->uid);
        PUT(&w, uint32_t, (uint32_t)s->gid);
        PUT(&w, uint32_t, (uint32_t)s->nprocs);
        PUT(&w, uint32_t, (uint32_t)s->n_rlimits);
        for (i = 0; i < s->n_rlimits; i++) {
                PUT(&w, uint32_t, s->rlimits[i].resource);
                PUT(&w, uint64_t, s->rlimits[i].cur);
                PUT(&w, uint64_t, s->rlimits[i].max);
        }
        PUT(&w, uint32_t, s->seccomp.len);
        for (i = 0; i < s->seccomp.len; i++) {
                const struct sock_filter *f = &s->seccomp.filter[i];

                PUT(&w, uint16_t, f->code);
                PUT(&w, uint8_t, f->jt);
                PUT(&w, uint8_t, f->jf);
                PUT(&w, uint32_t, f->k);
        }
        PUT(&w, uint32_t, (uint32_t)s->volume_gid);
        PUT(&w, uint32_t, s->volume_project);
        PUT(&w, uint32_t, (uint32_t)s->n_volumes);
        for (i = 0; i < s->n_volumes; i++) {
                const sh_volume_spec *v = &s->volumes[i];

                PUT(&w, uint32_t, v->flags);
                PUT(&w, uint64_t, v->quota);
                put_str(&w, v->base, sizeof(v->base));
                put_str(&w, v->path, sizeof(v->path));
                put_str(&w, v->sub, sizeof(v->sub));
                put_str(&w, v->target, sizeof(v->target));
        }
        if (s->n_lowers > 0) {
                PUT(&w, uint32_t, (uint32_t)s->n_lowers);
                put_str(&w, s->layers, sizeof(s->layers));
                put_str(&w, s->upper, sizeof(s->upper));
                put_str(&w, s->work, sizeof(s->work));
                for (i = 0; i < s->n_lowers; i++)
                        put_str(&w, s->lowers[i], sizeof(s->lowers[i]));
        }
        if (w.err) {
                free(w.buf);
                return w.err;
        }
        *ret_buf = w.buf;
        *ret_len = w.len;
        return 0;
}

/* ---- reader ---------------------------------------------------------------------------- */

typedef struct reader {
        const unsigned char *p;
        size_t left;
        bool bad;
} reader;

static void get(reader *r, void *out, size_t n)
{
        if (r->bad || n > r->left) {
                r->bad = true;
                memset(out, 0, n);
                return;
        }
        memcpy(out, r->p, n);
        r->p += n;
        r->left -= n;
}

/* A fixed-size field, in host byte order (0 past the end, which marks the reader bad). */
#define GET(r, type)                                                                               \
        ({                                                                                         \
                type _v;                                                                           \
                get((r), &_v, sizeof(_v));                                                         \
                _v;                                                                                \
        })

/* A string into a field of `size` bytes: shorter than the field, no NUL inside. */
static void get_str(reader *r, char *out, size_t size)
{
        uint32_t n = GET(r, uint32_t);

        out[0] = '\0';
        if (r->bad || n >= size || n > r->left || memchr(r->p, '\0', n)) {
                r->bad = true;
                return;
        }
        memcpy(out, r->p, n);
        out[n] = '\0';
        r->p += n;
        r->left -= n;
}

/* A host path the init mounts from or onto: absolute (the daemon's settings are). */
static bool good_path(const char *p)
{
        return p[0] == '/';
}

/* A top-level entry name: one component, joined to the new root. */
static bool good_name(const char *n)
{
        return n[0] && !strchr(n, '/') && !STREQ(n, ".") && !STREQ(n, "..");
}

bool sh_worker_lower_valid(const char *name)
{
        const char *c = name, *start = name;

        if (strnlen(name, SH_LOWER_NAME_MAX) >= SH_LOWER_NAME_MAX)
                return false;
        for (;; c++) {
                if (*c == '/' || !*c) {
                        if (!plain_component(start, (size_t)(c - start)))
                                return false;
                        if (!*c)
                                return true;
                        start = c + 1;
                } else if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                             (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-')) {
                        /* Nor ':' ',' '\\' '=': the overlay option string's separators. */
                        return false;
                }
        }
}

static bool good_hostname(const char *h)
{
        const char *c;

        if (!h[0])
                return false;
        for (c = h; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                      (*c >= '0' && *c <= '9') || *c == '-' || *c == '.'))
                        return false;
        return true;
}

/* The overlay root's part, at the end of a spec that has one: what is there is whole. */
static int decode_overlay(reader *r, sh_worker_spec *s)
{
        uint32_t n = GET(r, uint32_t), i;

        get_str(r, s->layers, sizeof(s->layers));
        get_str(r, s->upper, sizeof(s->upper));
        get_str(r, s->work, sizeof(s->work));
        if (r->bad || n == 0 || n > SH_WORKER_LOWERS_MAX || s->n_entries > 0 ||
            !good_path(s->layers) || !good_path(s->upper) || !good_path(s->work))
                return -EBADMSG;
        for (i = 0; i < n; i++) {
                get_str(r, s->lowers[i], sizeof(s->lowers[i]));
                if (r->bad || !sh_worker_lower_valid(s->lowers[i]))
                        return -EBADMSG;
        }
        if (r->left != 0)
                return -EBADMSG;
        s->n_lowers = (int)n;
        return 0;
}

static int decode(reader *r, sh_worker_spec *s)
{
        char magic[sizeof(spec_magic)];
        uint32_t n, i, j, limits_seen = 0;

        get(r, magic, sizeof(magic));
        if (r->bad || memcmp(magic, spec_magic, sizeof(magic)) != 0)
                return -EBADMSG;
        get_str(r, s->hostname, sizeof(s->hostname));
        get_str(r, s->rootfs, sizeof(s->rootfs));
        get_str(r, s->workspace, sizeof(s->workspace));
        get_str(r, s->tools, sizeof(s->tools));
        if (r->bad || !good_hostname(s->hostname) || !good_path(s->rootfs) ||
            !good_path(s->workspace) || !good_path(s->tools))
                return -EBADMSG;
        n = GET(r, uint32_t);
        if (r->bad || n > SH_WORKER_MAX_ENTRIES)
                return -EBADMSG;
        s->n_entries = (int)n;
        for (i = 0; i < n; i++) {
                sh_root_entry *e = &s->entries[i];
                uint8_t kind = GET(r, uint8_t);

                if (kind > 1)
                        return -EBADMSG;
                e->is_link = kind == 1;
                get_str(r, e->name, sizeof(e->name));
                e->src[0] = e->target[0] = '\0';
                if (e->is_link)
                        get_str(r, e->target, sizeof(e->target));
                else
                        get_str(r, e->src, sizeof(e->src));
                if (r->bad || !good_name(e->name) ||
                    (e->is_link ? !e->target[0] : !good_path(e->src)))
                        return -EBADMSG;
                for (j = 0; j < i; j++)
                        if (STREQ(s->entries[j].name, e->name))
                                return -EBADMSG;
        }
        s->tmp_size = GET(r, uint64_t);
        s->ptys_max = GET(r, uint32_t);
        s->nameserver = GET(r, uint32_t);
        s->uid = (uid_t)GET(r, uint32_t);
        s->gid = (gid_t)GET(r, uint32_t);
        n = GET(r, uint32_t);
        /* Never root: a spec that would run commands as uid or gid 0 is not one we wrote. */
        if (r->bad || s->tmp_size == 0 || s->ptys_max == 0 || s->ptys_max > 65536 || s->uid == 0 ||
            s->gid == 0 || s->uid == (uid_t)-1 || s->gid == (gid_t)-1 || n > SH_EXEC_MAX_PROCS_FDS)
                return -EBADMSG;
        s->nprocs = (int)n;
        n = GET(r, uint32_t);
        if (r->bad || n > SH_WORKER_MAX_RLIMITS)
                return -EBADMSG;
        s->n_rlimits = (int)n;
        for (i = 0; i < n; i++) {
                sh_rlimit_spec *l = &s->rlimits[i];

                l->resource = GET(r, uint32_t);
                l->cur = GET(r, uint64_t);
                l->max = GET(r, uint64_t);
                if (r->bad || l->resource >= RLIMIT_NLIMITS || l->resource >= 32 ||
                    (limits_seen & (1U << l->resource)) || l->cur > l->max)
                        return -EBADMSG;
                limits_seen |= 1U << l->resource;
        }
        n = GET(r, uint32_t);
        /* Checked against what is left before allocating: a length field cannot make us
         * allocate more than the message holds. */
        if (r->bad || n == 0 || n > SH_WORKER_FILTER_MAX || (size_t)n * 8 > r->left)
                return -EBADMSG;
        s->seccomp.filter = calloc(n, sizeof(struct sock_filter));
        if (!s->seccomp.filter)
                return -ENOMEM;
        s->seccomp.len = (unsigned short)n;
        for (i = 0; i < n; i++) {
                struct sock_filter *f = &s->seccomp.filter[i];

                f->code = GET(r, uint16_t);
                f->jt = GET(r, uint8_t);
                f->jf = GET(r, uint8_t);
                f->k = GET(r, uint32_t);
        }
        s->volume_gid = (gid_t)GET(r, uint32_t);
        s->volume_project = GET(r, uint32_t);
        n = GET(r, uint32_t);
        /* Each volume takes at least its flags, quota and four lengths: checked before
         * allocating. */
        if (r->bad || n > SH_WORKER_VOLUMES_MAX || (size_t)n * 28 > r->left)
                return -EBADMSG;
        if (n > 0) {
                s->volumes = calloc(n, sizeof(*s->volumes));
                if (!s->volumes)
                        return -ENOMEM;
        }
        s->n_volumes = (int)n;
        for (i = 0; i < n; i++) {
                sh_volume_spec *v = &s->volumes[i];

                v->flags = GET(r, uint32_t);
                v->quota = GET(r, uint64_t);
                get_str(r, v->base, sizeof(v->base));
                get_str(r, v->path, sizeof(v->path));
                get_str(r, v->sub, sizeof(v->sub));
                get_str(r, v->target, sizeof(v->target));
                if (r->bad || !sh_worker_volume_valid(v))
                        return -EBADMSG;
        }
        if (!good_volume_gid(s) || !good_volume_project(s))
                return -EBADMSG;
        s->n_lowers = 0;
        if (!r->bad && r->left > 0)
                return decode_overlay(r, s);
        if (r->bad)
                return -EBADMSG;
        return 0;
}

int sh_worker_spec_decode(const void *buf, size_t len, sh_worker_spec *ret)
{
        reader r = {.p = buf, .left = len};
        int e;

        ret->seccomp.filter = NULL;
        ret->seccomp.len = 0;
        ret->volumes = NULL;
        ret->n_volumes = 0;
        if (len > SH_WORKER_SPEC_MAX)
                return -EBADMSG;
        e = decode(&r, ret);
        if (e < 0)
                sh_worker_spec_done(ret);
        return e;
}

void sh_worker_spec_done(sh_worker_spec *s)
{
        free(s->seccomp.filter);
        s->seccomp.filter = NULL;
        s->seccomp.len = 0;
        free(s->volumes);
        s->volumes = NULL;
        s->n_volumes = 0;
}

/* ---- exec requests --------------------------------------------------------------------- */

int sh_proto_exec_stdio_fds(uint32_t flags)
{
        return 2 + !!(flags & SH_PROTO_EXEC_INPUT) + !!(flags & SH_PROTO_EXEC_FRAMES);
}

/* The header: type, id, argc, envc, flags (u32 each, host order); then argv's strings and
 * envp's, each NUL-terminated. */
#define EXEC_HDR 5

int sh_proto_encode_exec(uint32_t id, uint32_t flags, char *const *argv, char *const *envp,
                         char **ret_buf, size_t *ret_len)
{
        uint32_t argc = 0, envc = 0;
        size_t len = EXEC_HDR * sizeof(uint32_t), off;
        char *buf;
        uint32_t hdr[EXEC_HDR];

        if (flags & ~(uint32_t)SH_PROTO_EXEC_FLAGS)
                return -EINVAL;
        for (; argv[argc]; argc++)
                len += strlen(argv[argc]) + 1;
        for (; envp[envc]; envc++)
                len += strlen(envp[envc]) + 1;
        if (len > SH_EXEC_MSG_MAX)
                return -E2BIG;
        buf = malloc(len);
        if (!buf)
                return -ENOMEM;
        hdr[0] = SH_MSG_EXEC;
        hdr[1] = id;
        hdr[2] = argc;
        hdr[3] = envc;
        hdr[4] = flags;
        memcpy(buf, hdr, sizeof(hdr));
        off = sizeof(hdr);
        for (uint32_t i = 0; i < argc; i++) {
                size_t n = strlen(argv[i]) + 1;

                memcpy(buf + off, argv[i], n);
                off += n;
        }
        for (uint32_t i = 0; i < envc; i++) {
                size_t n = strlen(envp[i]) + 1;

                memcpy(buf + off, envp[i], n);
                off += n;
        }
        *ret_buf = buf;
        *ret_len = len;
        return 0;
}

int sh_proto_decode_exec(char *buf, size_t len, uint32_t *ret_id, uint32_t *ret_flags,
                         char ***ret_argv, char ***ret_envp)
{
        uint32_t hdr[EXEC_HDR], i;
        char **argv, **envp;
        size_t off = sizeof(hdr);

        if (len < sizeof(hdr))
                return -EBADMSG;
        memcpy(hdr, buf, sizeof(hdr));
        if (hdr[0] != SH_MSG_EXEC || hdr[2] == 0 || hdr[2] > len || hdr[3] > len ||
            (hdr[4] & ~(uint32_t)SH_PROTO_EXEC_FLAGS))
                return -EBADMSG;
        *ret_id = hdr[1];
        argv = calloc((size_t)hdr[2] + 1, sizeof(char *));
        envp = calloc((size_t)hdr[3] + 1, sizeof(char *));
        if (!argv || !envp) {
                free(argv);
                free(envp);
                return -ENOMEM;
        }
        for (i = 0; i < hdr[2] + hdr[3]; i++) {
                char *nul = off < len ? memchr(buf + off, '\0', len - off) : NULL;

                if (!nul) {
                        free(argv);
                        free(envp);
                        return -EBADMSG;
                }
                if (i < hdr[2])
                        argv[i] = buf + off;
                else
                        envp[i - hdr[2]] = buf + off;
                off = (size_t)(nul - buf) + 1;
        }
        *ret_flags = hdr[4];
        *ret_argv = argv;
        *ret_envp = envp;
        return 0;
}

/* ---- control messages ------------------------------------------------------------------ */

sh_msg sh_proto_msg(uint32_t type, uint32_t id, int32_t a, int32_t b)
{
        return (sh_msg){.type = type, .id = id, .a = a, .b = b};
}

int sh_proto_decode_msg(const void *buf, size_t len, sh_msg *ret)
{
        sh_msg m;

        if (len != sizeof(m))
                return -EBADMSG;
        memcpy(&m, buf, sizeof(m));
        /* EXEC carries a payload: never a sh_msg */
        if (m.type < SH_MSG_PID || m.type > SH_MSG_VOLUME_CREATED || m.type == SH_MSG_EXEC)
                return -EBADMSG;
        *ret = m;
        return 0;
}

uint32_t sh_proto_msg_type(const void *buf, size_t len)
{
        uint32_t type;

        if (len < sizeof(type))
                return 0;
        memcpy(&type, buf, sizeof(type));
        return type;
}

int sh_proto_put_fds(struct msghdr *mh, sh_proto_cmsg *cbuf, int n, const int *fds)
{
        struct cmsghdr *c;

        if (n <= 0 || n > SH_PROTO_EXEC_FDS)
                return -EINVAL;
        memset(cbuf, 0, sizeof(*cbuf));
        mh->msg_control = cbuf->buf;
        mh->msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
        c = CMSG_FIRSTHDR(mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
        return 0;
}

void sh_proto_recv_fds(struct msghdr *mh, sh_proto_cmsg *cbuf)
{
        mh->msg_control = cbuf->buf;
        mh->msg_controllen = sizeof(cbuf->buf);
}

int sh_proto_take_fds(const struct msghdr *mh, int fds[SH_PROTO_EXEC_FDS])
{
        struct cmsghdr *c;
        int n = 0;

        /* CMSG_NXTHDR takes a non-const msghdr; it only reads it. */
        for (c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR((struct msghdr *)mh, c)) {
                const unsigned char *end =
                        (const unsigned char *)mh->msg_control + mh->msg_controllen;
                size_t k;

                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
                    c->cmsg_len < CMSG_LEN(0))
                        continue;
                k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                /* Only the fds inside the buffer: glibc before 2.37 hands out a last record
                 * whose header fits but whose length runs past the buffer's end (CMSG_FIRSTHDR
                 * and CMSG_NXTHDR check the header only). */
                if (k > (size_t)(end - CMSG_DATA(c)) / sizeof(int))
                        k = (size_t)(end - CMSG_DATA(c)) / sizeof(int);
                if (k > (size_t)(SH_PROTO_EXEC_FDS - n))
                        k = (size_t)(SH_PROTO_EXEC_FDS - n);
                memcpy(fds + n, CMSG_DATA(c), k * sizeof(int));
                n += (int)k;
        }
        return n;
}

/* ---- setup steps ----------------------------------------------------------------------- */

const char *sh_worker_step_name(int step)
{
        static const char *const names[] = {
                [SH_STEP_CGROUP_JOIN] = "join the sandbox cgroup",
                [SH_STEP_UNSHARE] = "unshare namespaces",
                [SH_STEP_FORK] = "fork PID 1",
                [SH_STEP_MOUNT_PRIVATE] = "make mounts private",
                [SH_STEP_HOSTNAME] = "set the hostname",
                [SH_STEP_ROOT_TMPFS] = "mount the root tmpfs",
                [SH_STEP_IMAGE] = "bind the image",
                [SH_STEP_WORKSPACE] = "bind the workspace",
                [SH_STEP_TMP] = "mount /tmp",
                [SH_STEP_PROC] = "mount /proc",
                [SH_STEP_DEV] = "populate /dev",
                [SH_STEP_TOOLS] = "bind /tools",
                [SH_STEP_PIVOT] = "pivot_root",
                [SH_STEP_LOOPBACK] = "bring up loopback",
                [SH_STEP_SIGNALS] = "set up signals",
                [SH_STEP_EXEC_INIT] = "exec sandbox-init",
                [SH_STEP_SPEC] = "read the spec",
                [SH_STEP_LIMITS] = "set resource limits",
                [SH_STEP_PRIVILEGES] = "drop PID 1's privileges",
                [SH_STEP_STDIO] = "redirect standard streams",
                [SH_STEP_SECCOMP] = "load the seccomp filter",
                [SH_STEP_OVERLAY] = "mount the image's layers",
                [SH_STEP_RESOLV] = "bind /etc/resolv.conf",
                [SH_STEP_VOLUME_SOURCE] = "volume source",
                [SH_STEP_VOLUME_TARGET] = "volume target",
                [SH_STEP_VOLUME_QUOTA] = "volume quota",
        };

        if (step <= 0 || step >= (int)ARRAY_SIZE(names) || !names[step])
                return "?";
        return names[step];
}
