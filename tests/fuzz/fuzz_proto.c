/* fuzz_proto.c: the worker protocol's decoders (isolation/proto.c), which sandbox-init and the
 * daemon run on each other's bytes. Modes (first byte): '0' a spec (sh_worker_spec_decode),
 * '1' an exec payload (sh_proto_decode_exec: its flags too), '2' a control message, '3' the fds of a
 * received message's control data. Properties: what decodes encodes back to the same bytes
 * (the spec wholly, the exec as a prefix: bytes after its last string are not read). */
#include "fuzz.h"

#include <errno.h>

#include "sh/proto.h"
#include "sh/volquota.h"

static void spec(fz *f)
{
        char *buf = fz_dup(f->p, f->n), *enc = NULL;
        sh_worker_spec s;
        size_t len = 0;

        if (sh_worker_spec_decode(buf, f->n, &s) == 0) {
                FZ_CHECK(s.n_entries >= 0 && s.n_entries <= SH_WORKER_MAX_ENTRIES);
                FZ_CHECK(s.n_rlimits >= 0 && s.n_rlimits <= SH_WORKER_MAX_RLIMITS);
                FZ_CHECK(s.uid != 0 && s.gid != 0);
                FZ_CHECK(s.n_volumes >= 0 && s.n_volumes <= SH_WORKER_VOLUMES_MAX);
                FZ_CHECK(s.n_volumes == 0 || (s.volume_gid != 0 && s.volume_gid != s.gid));
                for (int i = 0; i < s.n_volumes; i++) {
                        FZ_CHECK(sh_worker_volume_valid(&s.volumes[i]));
                        FZ_CHECK(!s.volumes[i].quota ||
                                 (s.volume_project &&
                                  s.volume_project <= UINT32_MAX - SH_VOLQUOTA_IDS));
                }
                FZ_CHECK(sh_worker_spec_encode(&s, &enc, &len) == 0);
                FZ_CHECK(len == f->n && memcmp(enc, buf, len) == 0);
                free(enc);
        }
        /* failed or not, nothing is left allocated (the filter and the volumes are freed on
         * failure) */
        sh_worker_spec_done(&s);
        free(buf);
}

static void exec_payload(fz *f)
{
        char *buf = fz_dup(f->p, f->n), *enc = NULL, **argv = NULL, **envp = NULL;
        uint32_t id = 0, flags = 0;
        size_t len = 0;

        if (sh_proto_decode_exec(buf, f->n, &id, &flags, &argv, &envp) == 0) {
                FZ_CHECK(argv[0] != NULL);
                /* only known flags; the fds they ask for fit one message with every procs fd */
                FZ_CHECK((flags & ~(uint32_t)SH_PROTO_EXEC_FLAGS) == 0);
                FZ_CHECK(sh_proto_exec_stdio_fds(flags) + SH_EXEC_MAX_PROCS_FDS <=
                         SH_PROTO_EXEC_FDS);
                if (sh_proto_encode_exec(id, flags, argv, envp, &enc, &len) == 0) {
                        FZ_CHECK(len <= f->n && memcmp(enc, buf, len) == 0);
                        free(enc);
                } else {
                        FZ_CHECK(f->n > SH_EXEC_MSG_MAX); /* only too big to send again */
                }
                free(argv);
                free(envp);
        }
        free(buf);
}

static void message(fz *f)
{
        char *buf = fz_dup(f->p, f->n);
        sh_msg m;

        if (sh_proto_decode_msg(buf, f->n, &m) == 0) {
                FZ_CHECK(m.type >= SH_MSG_PID && m.type <= SH_MSG_VOLUME_CREATED &&
                         m.type != SH_MSG_EXEC);
                FZ_CHECK(sh_proto_msg_type(buf, f->n) == m.type);
                /* SETUP_FAILED names its step by what the other side sent */
                FZ_CHECK(sh_worker_step_name(m.a) != NULL);
        }
        free(buf);
}

/* A received message's control data, as much as a sh_proto_cmsg holds (the kernel writes no
 * more: it truncates), and the length the kernel reported. */
static void fds(fz *f)
{
        sh_proto_cmsg cbuf;
        struct msghdr mh = {0};
        int out[SH_PROTO_EXEC_FDS];
        size_t len = fz_u8(f) % (sizeof(cbuf.buf) + 1);

        fz_bytes(f, cbuf.buf, sizeof(cbuf.buf));
        sh_proto_recv_fds(&mh, &cbuf);
        mh.msg_controllen = len;
        FZ_CHECK(sh_proto_take_fds(&mh, out) <= SH_PROTO_EXEC_FDS);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);

        switch (fz_mode(&f, 4)) {
        case 0:
                spec(&f);
                break;
        case 1:
                exec_payload(&f);
                break;
        case 2:
                message(&f);
                break;
        default:
                fds(&f);
                break;
        }
        return 0;
}
