/* fuzz_oci.c: what a registry serves as an image's manifest, index and config (images/oci.c).
 * Modes: '0' a manifest or index: the Content-Type on the first line (an empty line: none),
 * the body after it; an index's entry is then picked for the host and for linux/arm/v7; '1' an
 * image config body. Properties: a parsed manifest has at most 128 layers, each a tar layer
 * type, and an image config descriptor; an index at most 1024 entries; every digest valid, every
 * size at most 2^53; a picked entry is one of the index's image manifests for the platform; a
 * parsed config's Env entries are NAME=value with a name, its WorkingDir absolute, its diff_ids
 * valid; a refusal has a reason and leaves nothing allocated. */
#include "fuzz.h"

#include "sh/oci.h"

static void descriptor_ok(const sh_oci_descriptor *d)
{
        FZ_CHECK(d->media_type && *d->media_type);
        FZ_CHECK(sh_oci_digest_valid(d->digest));
        FZ_CHECK(d->size <= SH_OCI_SIZE_MAX);
}

static void doc(fz *f)
{
        char *ct = fz_line(f), *body = fz_dup(f->p, f->n), reason[512] = "";
        const sh_oci_descriptor *e;
        const char *os, *arch, *variant;
        sh_oci_doc d;

        if (sh_oci_doc_parse(*ct ? ct : NULL, body, f->n, &d, reason, sizeof(reason)) == 0) {
                FZ_CHECK(d.n_items == 0 || d.items);
                for (size_t i = 0; i < d.n_items; i++)
                        descriptor_ok(&d.items[i]);
                if (d.kind == SH_OCI_MANIFEST) {
                        FZ_CHECK(d.n_items <= SH_OCI_LAYERS_MAX);
                        descriptor_ok(&d.config);
                        for (size_t i = 0; i < d.n_items; i++)
                                FZ_CHECK(strstr(d.items[i].media_type, "tar"));
                } else {
                        FZ_CHECK(d.kind == SH_OCI_INDEX);
                        FZ_CHECK(d.n_items <= SH_OCI_INDEX_MAX);
                        FZ_CHECK(!d.config.media_type);
                        sh_oci_host_platform(&os, &arch, &variant);
                        for (int k = 0; k < 2; k++) {
                                if (k == 1) {
                                        os = "linux";
                                        arch = "arm";
                                        variant = "v7";
                                }
                                reason[0] = '\0';
                                if (sh_oci_index_pick(&d, os, arch, variant, &e, reason,
                                                      sizeof(reason)) == 0) {
                                        FZ_CHECK(e >= d.items && e < d.items + d.n_items);
                                        FZ_CHECK(e->os && strcmp(e->os, os) == 0 && e->arch);
                                } else {
                                        FZ_CHECK(!e && reason[0] != '\0');
                                        FZ_CHECK(strlen(reason) < sizeof(reason));
                                }
                        }
                }
                sh_oci_doc_done(&d);
        } else {
                FZ_CHECK(reason[0] != '\0');
                FZ_CHECK(!d.items && !d.n_items && !d.config.media_type);
        }
        free(body);
        free(ct);
}

static void config(fz *f)
{
        char *body = fz_dup(f->p, f->n), reason[512] = "";
        sh_oci_config c;

        if (sh_oci_config_parse(body, f->n, &c, reason, sizeof(reason)) == 0) {
                for (size_t i = 0; i < c.n_env; i++) {
                        const char *eq = strchr(c.env[i], '=');

                        FZ_CHECK(eq && eq != c.env[i]);
                }
                FZ_CHECK(!c.env || !c.env[c.n_env]);
                FZ_CHECK(!c.workdir || c.workdir[0] == '/');
                FZ_CHECK(c.n_diff_ids <= SH_OCI_LAYERS_MAX);
                for (size_t i = 0; i < c.n_diff_ids; i++)
                        FZ_CHECK(sh_oci_digest_valid(c.diff_ids[i]));
                sh_oci_config_done(&c);
        } else {
                FZ_CHECK(reason[0] != '\0');
                FZ_CHECK(!c.env && !c.workdir && !c.user && !c.diff_ids && !c.os && !c.arch);
        }
        free(body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fz f = fz_init(data, size);

        if (fz_mode(&f, 2) == 0)
                doc(&f);
        else
                config(&f);
        return 0;
}
