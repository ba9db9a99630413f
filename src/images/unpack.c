/* unpack.c: the layer unpacker's daemon side (a first stub: the seam compiles). */
#include <errno.h>
#include <stdlib.h>

#include "unpack.h"

int sh_layer_unpacker_new(sh_loop *loop, const sh_config *cfg, const sh_cgroup *parent,
                          sh_layer_unpacker **ret, sh_error **err)
{
        (void)loop;
        (void)cfg;
        (void)parent;
        *ret = NULL;
        return sh_error_make(err, ENOSYS, "the layer unpacker is not built yet");
}

void sh_layer_unpacker_free(sh_layer_unpacker *u)
{
        (void)u;
}

sh_layer_unpack *sh_layer_unpack_start(sh_layer_unpacker *u, int blob_fd, sh_layer_compression c,
                                       int dest_dirfd, uint64_t max_bytes, uint64_t max_entries,
                                       sh_layer_unpack_done_fn done, void *data, sh_error **err)
{
        (void)u, (void)blob_fd, (void)c, (void)dest_dirfd, (void)max_bytes, (void)max_entries;
        (void)done, (void)data;
        sh_error_make(err, ENOSYS, "the layer unpacker is not built yet");
        return NULL;
}

void sh_layer_unpack_cancel(sh_layer_unpack *x)
{
        (void)x;
}
