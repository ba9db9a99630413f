/* fuzz_policy.c: the tool bundle policy (tools/policy.c), entry after entry as an archive lists
 * them. Input: one entry a line, "<type><path>" or "<type><path>\t<target or size>": type 'f'
 * a file (size after the tab, any decimal, negative too), 'x' a file its author made setuid and
 * world-writable, 'd' a directory, 'l' a symbolic link, 'h' a hard link, 'c', 'b', 'p', 's' a
 * device, FIFO or socket. Properties: a taken entry has a relative path without a ".."
 * component, a mode of 0644 or 0755 (a directory 0755) and is a file, directory or link; every
 * refusal has a printable reason naming the entry. */
#include "fuzz.h"

#include <sys/stat.h>

#include "policy.h"
#include "sh/util.h"

static void check_taken(const sh_bundle_entry *e, mode_t perm)
{
        const char *c;

        FZ_CHECK(e->path[0] != '/');
        for (c = e->path; c; c = strchr(c, '/')) {
                c += *c == '/';
                FZ_CHECK(strncmp(c, "../", 3) != 0 && strcmp(c, "..") != 0);
        }
        FZ_CHECK(e->type == S_IFREG || e->type == S_IFDIR || e->type == S_IFLNK || e->hardlink);
        if (e->type == S_IFDIR)
                FZ_CHECK(perm == 0755);
        else if (e->type == S_IFREG)
                FZ_CHECK(perm == 0644 || perm == 0755);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        sh_bundle_policy *p = sh_bundle_policy_new();
        fz f = fz_init(data, size);
        char reason[256], quoted[16];

        if (!p)
                abort();
        while (f.n) {
                char *line = fz_line(&f), *tab = strchr(line, '\t');
                sh_bundle_entry e = {.path = line + (line[0] ? 1 : 0), .perm = 0644};
                sh_bundle_verdict v;
                mode_t perm = 0;

                if (tab)
                        *tab++ = '\0';
                switch (line[0]) {
                case 'x':
                        e.perm = 07777;
                        /* fall through */
                case 'f':
                        e.type = S_IFREG;
                        e.size = tab ? strtoll(tab, NULL, 10) : 0;
                        break;
                case 'd':
                        e.type = S_IFDIR;
                        e.perm = 0700;
                        break;
                case 'l':
                        e.type = S_IFLNK;
                        e.symlink = tab ? tab : "";
                        break;
                case 'h':
                        e.type = S_IFREG;
                        e.hardlink = tab ? tab : "";
                        break;
                case 'c':
                        e.type = S_IFCHR;
                        break;
                case 'b':
                        e.type = S_IFBLK;
                        break;
                case 'p':
                        e.type = S_IFIFO;
                        break;
                default:
                        e.type = S_IFSOCK;
                        break;
                }
                v = sh_bundle_check(p, &e, &perm);
                if (v == SH_BUNDLE_TAKE) {
                        check_taken(&e, perm);
                } else if (v != SH_BUNDLE_SKIP) {
                        sh_bundle_reason(v, e.path, reason, sizeof(reason));
                        FZ_CHECK(strlen(reason) > 0 && strlen(reason) < sizeof(reason));
                }
                sh_quote_printable(e.path, quoted, sizeof(quoted));
                FZ_CHECK(strlen(quoted) < sizeof(quoted));
                for (const char *c = quoted; *c; c++)
                        FZ_CHECK(*c >= 0x20 && *c < 0x7f);
                free(line);
        }
        sh_bundle_policy_free(p);
        return 0;
}
