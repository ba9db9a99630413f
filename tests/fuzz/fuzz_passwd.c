/* fuzz_passwd.c: an image's /etc/passwd and /etc/group as the /v1 file API reads them
 * (fs/passwd.c, through sh/passwd.h). Input: '0' a passwd file, '1' a group file, then
 * a spec (a client's `owner` or `group`) up to the first '\n', then the file's bytes. Properties:
 * every kept line has a valid name and id, and looking a kept line up by name or id finds the
 * first line with that name or id, as glibc does. */
#include "fuzz.h"

#include <errno.h>

#include "sh/passwd.h"
#include "sh/macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);
        sh_iddb_kind kind = fz_mode(&f, 2) ? SH_IDDB_GROUP : SH_IDDB_PASSWD;
        char *spec = fz_line(&f), *db = fz_dup(f.p, f.n);
        sh_idmap m = {0};
        uint32_t id;
        size_t i, j;
        int r;

        if (sh_idmap_parse(&m, kind, f.n ? db : NULL, f.n) < 0)
                abort(); /* only out of memory */
        FZ_CHECK(m.n <= SH_IDDB_ENTRIES_MAX);
        for (i = 0; i < m.n; i++) {
                const sh_idmap_entry *e = &m.v[i];

                FZ_CHECK(sh_iddb_name_valid(e->name, strlen(e->name)));
                FZ_CHECK(e->id != SH_IDDB_ID_NONE);
                for (j = 0; !STREQ(m.v[j].name, e->name); j++)
                        ;
                FZ_CHECK(sh_idmap_lookup_name(&m, e->name, &id) == 0 && id == m.v[j].id);
                FZ_CHECK(sh_idmap_resolve(&m, e->name, &id) == 0 && id == m.v[j].id);
                for (j = 0; m.v[j].id != e->id; j++)
                        ;
                FZ_CHECK(STREQ(sh_idmap_name(&m, e->id), m.v[j].name));
        }
        r = sh_idmap_resolve(&m, spec, &id);
        FZ_CHECK(r == 0 || r == -EINVAL || r == -ERANGE || r == -ENOENT);
        if (r == 0)
                FZ_CHECK(id != SH_IDDB_ID_NONE);
        if (sh_iddb_parse_id(spec, strlen(spec), &id) == 0)
                FZ_CHECK(!sh_iddb_name_valid(spec, strlen(spec))); /* never both */
        sh_idmap_done(&m);
        FZ_CHECK(m.n == 0);
        free(db);
        free(spec);
        return 0;
}
