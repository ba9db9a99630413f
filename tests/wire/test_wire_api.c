/* test_wire_api.c: the real daemon over HTTP: lifecycle, errors, files, readiness, ops, limits. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "unit.h"
#include "wire_helpers.h"

static const char *const no_flags[] = {NULL};

/* "/sandboxes/{id}{suffix}" in a rotating static buffer */
static const char *sp(const char *id, const char *suffix)
{
        static char bufs[4][4200];
        static unsigned k;
        char *b = bufs[k++ % 4];

        snprintf(b, sizeof(bufs[0]), "/sandboxes/%s%s", id, suffix);
        return b;
}

static void assert_healthz_answers(void);

static void assert_status(const wire_resp *r, long want)
{
        ck_assert_msg(r->status == want, "status %ld (curl %d), want %ld; body '%.300s'", r->status,
                      r->curl_rc, want, r->body);
}

/* One request, asserting the status and discarding the answer. */
static void expect(const char *method, const char *path, const char *json, long want)
{
        wire_resp r;

        wire_http(method, path, json, &r);
        ck_assert_msg(r.status == want, "%s %s: status %ld (curl %d), want %ld; body '%.300s'",
                      method, path, r.status, r.curl_rc, want, r.body);
        wire_resp_free(&r);
}

static void expect_error(const char *method, const char *path, const char *json, long status,
                         const char *type)
{
        wire_resp r;

        wire_http(method, path, json, &r);
        wire_assert_error(&r, status, type);
        wire_resp_free(&r);
}

static bool json_bool(const cJSON *j, const char *name)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);

        ck_assert_msg(cJSON_IsBool(v), "'%s' is not a bool", name);
        return cJSON_IsTrue(v);
}

static bool exists(const char *id, const char *path)
{
        char q[4200];
        cJSON *j;
        bool v;

        snprintf(q, sizeof(q), "path=%s", path);
        j = wire_get_json(id, "exists", q);
        v = json_bool(j, "exists");
        cJSON_Delete(j);
        return v;
}

/* The size of a file, or -1 for JSON null. */
static long long size_of(const char *id, const char *path)
{
        char q[4200];
        cJSON *j, *s;
        long long v;

        snprintf(q, sizeof(q), "path=%s", path);
        j = wire_get_json(id, "size", q);
        s = cJSON_GetObjectItemCaseSensitive(j, "size");
        ck_assert_msg(s && (cJSON_IsNull(s) || cJSON_IsNumber(s)), "bad size answer");
        v = cJSON_IsNull(s) ? -1 : (long long)s->valuedouble;
        cJSON_Delete(j);
        return v;
}

static void assert_download(const char *id, const char *path, const void *want, size_t len)
{
        char p[4200], cl[64];
        wire_resp r;

        snprintf(p, sizeof(p), "/sandboxes/%s/file?path=%s", id, path);
        wire_http("GET", p, NULL, &r);
        assert_status(&r, 200);
        ck_assert_uint_eq(r.body_len, len);
        ck_assert_int_eq(memcmp(r.body, want, len), 0);
        ck_assert(wire_header(&r, "Content-Length", cl, sizeof(cl)));
        ck_assert_uint_eq(strtoull(cl, NULL, 10), len);
        wire_resp_free(&r);
}

static long long disk_usage(const char *id)
{
        cJSON *j = wire_get_json(id, "disk-usage", NULL);
        cJSON *b = cJSON_GetObjectItemCaseSensitive(j, "bytes");
        long long v;

        ck_assert_msg(cJSON_IsNumber(b), "no bytes number");
        v = (long long)b->valuedouble;
        cJSON_Delete(j);
        return v;
}

/* Read an HTTP response head from a raw socket; returns the status code (0 on failure). */
static int raw_read_status(int fd)
{
        char buf[4096];
        size_t len = 0;
        int status = 0;

        while (len < sizeof(buf) - 1) {
                ssize_t n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
                buf[len] = '\0';
                if (strstr(buf, "\r\n\r\n"))
                        break;
        }
        buf[len] = '\0';
        if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
                return 0;
        return status;
}

/* A regular file of `size` bytes ('x') at an absolute path, parents created. */
static void disk_write(const char *path, size_t size)
{
        static const char xs[256] = {[0 ... 255] = 'x'};
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

        ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
        while (size > 0) {
                size_t n = size < sizeof(xs) ? size : sizeof(xs);

                ck_assert_int_eq(write(fd, xs, n), (ssize_t)n);
                size -= n;
        }
        close(fd);
}

/* ---- lifecycle -------------------------------------------------------------------------- */

START_TEST(test_create_returns_pod_url_and_remote_id)
{
        char ct[128], dir[512];
        struct stat st;
        wire_resp r;
        cJSON *j, *u, *rid;

        wire_start(no_flags);
        wire_http("POST", "/sandboxes", "{}", &r);
        assert_status(&r, 200);
        ck_assert(wire_header(&r, "Content-Type", ct, sizeof(ct)));
        ck_assert_str_eq(ct, "application/json");
        j = wire_json(&r);
        u = cJSON_GetObjectItemCaseSensitive(j, "pod_url");
        rid = cJSON_GetObjectItemCaseSensitive(j, "remote_id");
        ck_assert(cJSON_IsString(u));
        ck_assert_str_eq(u->valuestring, wire_url());
        ck_assert(cJSON_IsString(rid));
        ck_assert_uint_eq(strlen(rid->valuestring), SH_ID_LEN);
        ck_assert_uint_eq(strspn(rid->valuestring, "0123456789abcdef"), SH_ID_LEN);
        snprintf(dir, sizeof(dir), "%s", wire_workspace(rid->valuestring));
        ck_assert_msg(stat(dir, &st) == 0 && S_ISDIR(st.st_mode), "no workspace at %s", dir);
        cJSON_Delete(j);
        wire_resp_free(&r);
        wire_stop();
}
END_TEST

START_TEST(test_create_returns_configured_pod_url_without_trailing_slash)
{
        static const char *const flags[] = {"--pod-url=http://pod.example:9000/", NULL};
        wire_resp r;
        cJSON *j;

        wire_start(flags);
        wire_http("POST", "/sandboxes", "{}", &r);
        assert_status(&r, 200);
        j = wire_json(&r);
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(j, "pod_url")->valuestring,
                         "http://pod.example:9000");
        cJSON_Delete(j);
        wire_resp_free(&r);
        wire_stop();
}
END_TEST

START_TEST(test_create_with_empty_body_is_same_as_empty_object)
{
        wire_resp r;

        wire_start(no_flags);
        wire_http_ex("POST", "/sandboxes", NULL, 0, NULL, NULL, 0, &r);
        assert_status(&r, 200);
        wire_resp_free(&r);
        wire_http("POST", "/sandboxes", " \n\t ", &r);
        assert_status(&r, 200);
        wire_resp_free(&r);
        wire_stop();
}
END_TEST

START_TEST(test_two_sandboxes_are_separate)
{
        char a[SH_ID_LEN + 1], b[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(a);
        wire_create(b);
        ck_assert_str_ne(a, b);
        ck_assert_int_eq(wire_upload(a, "only-in-a", "A", 1), 204);
        ck_assert(exists(a, "only-in-a"));
        ck_assert(!exists(b, "only-in-a"));
        wire_stop();
}
END_TEST

START_TEST(test_delete_returns_204_and_removes_the_directory)
{
        char id[SH_ID_LEN + 1], dir[512];
        struct stat st;
        wire_resp r;

        wire_start(no_flags);
        wire_create(id);
        snprintf(dir, sizeof(dir), "%s/%s", wire_root(), id);
        ck_assert_int_eq(stat(dir, &st), 0);
        wire_http("DELETE", sp(id, ""), NULL, &r);
        assert_status(&r, 204);
        ck_assert_uint_eq(r.body_len, 0);
        wire_resp_free(&r);
        /* moved out at once (removed in the background) */
        ck_assert_int_eq(stat(dir, &st), -1);
        ck_assert_int_eq(errno, ENOENT);
        wire_stop();
}
END_TEST

START_TEST(test_deleted_sandbox_is_sandbox_not_found)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        expect("DELETE", sp(id, ""), NULL, 204);
        expect_error("DELETE", sp(id, ""), NULL, 404, "SandboxNotFound");
        expect_error("GET", sp(id, "/exists?path=a"), NULL, 404, "SandboxNotFound");
        expect_error("GET", sp(id, "/ready"), NULL, 404, "SandboxNotFound");
        wire_stop();
}
END_TEST

START_TEST(test_create_rejects_invalid_item_id)
{
        wire_start(no_flags);
        expect_error("POST", "/sandboxes", "{\"item_id\": \".hidden\"}", 400, "BadRequest");
        expect_error("POST", "/sandboxes", "{\"item_id\": 5}", 400, "BadRequest");
        wire_stop();
}
END_TEST

/* ---- errors ----------------------------------------------------------------------------- */

START_TEST(test_unknown_sandbox_is_sandbox_not_found)
{
        wire_start(no_flags);
        expect_error("GET", "/sandboxes/0123456789abcdef0123456789abcdef/exists?path=a", NULL, 404,
                     "SandboxNotFound");
        expect_error("DELETE", "/sandboxes/not-an-id", NULL, 404, "SandboxNotFound");
        expect_error("GET", "/sandboxes/ZZ/file?path=a", NULL, 404, "SandboxNotFound");
        wire_stop();
}
END_TEST

START_TEST(test_unknown_route_is_not_found)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        expect_error("GET", "/nope", NULL, 404, "NotFound");
        expect_error("POST", "/nope", "{}", 404, "NotFound");
        expect_error("GET", "/", NULL, 404, "NotFound");
        expect_error("GET", sp(id, "/nope"), NULL, 404, "NotFound");
        expect_error("GET", sp(id, "/file/extra?path=a"), NULL, 404, "NotFound");
        expect_error("GET", "/sandboxes//file?path=a", NULL, 404, "NotFound");
        expect_error("GET", "/healthz/", NULL, 404, "NotFound");
        /* an unknown route under an unknown id is still NotFound, never SandboxNotFound */
        expect_error("GET", "/sandboxes/0123456789abcdef0123456789abcdef/nope", NULL, 404,
                     "NotFound");
        wire_stop();
}
END_TEST

START_TEST(test_wrong_method_is_405_with_allow)
{
        char allow[128];
        wire_resp r;

        wire_start(no_flags);
        /* decided before the id is looked up: this id names no sandbox */
        wire_http("POST", "/sandboxes/0123456789abcdef0123456789abcdef/file?path=a", "{}", &r);
        wire_assert_error(&r, 405, "MethodNotAllowed");
        ck_assert(wire_header(&r, "Allow", allow, sizeof(allow)));
        ck_assert_str_eq(allow, "GET, HEAD, PUT, DELETE");
        wire_resp_free(&r);
        wire_http("GET", "/sandboxes", NULL, &r);
        wire_assert_error(&r, 405, "MethodNotAllowed");
        ck_assert(wire_header(&r, "Allow", allow, sizeof(allow)));
        ck_assert_str_eq(allow, "POST");
        wire_resp_free(&r);
        wire_http("DELETE", "/healthz", NULL, &r);
        wire_assert_error(&r, 405, "MethodNotAllowed");
        ck_assert(wire_header(&r, "Allow", allow, sizeof(allow)));
        ck_assert_str_eq(allow, "GET, HEAD");
        wire_resp_free(&r);
        wire_stop();
}
END_TEST

START_TEST(test_malformed_json_is_400)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        expect_error("POST", "/sandboxes", "{not json", 400, "BadRequest");
        expect_error("POST", "/sandboxes", "{} trailing", 400, "BadRequest");
        expect_error("POST", "/sandboxes", "[1, 2]", 400, "BadRequest");
        expect_error("POST", "/sandboxes", "\"string\"", 400, "BadRequest");
        expect_error("POST", sp(id, "/mkdir"), "{\"path\": ", 400, "BadRequest");
        expect_error("POST", sp(id, "/rename"), "{\"src\": 1, \"dst\": \"b\"}", 400, "BadRequest");
        wire_stop();
}
END_TEST

START_TEST(test_wrong_field_type_is_400)
{
        wire_start(no_flags);
        expect_error("POST", "/sandboxes", "{\"image\": 5}", 400, "BadRequest");
        expect_error("POST", "/sandboxes", "{\"env\": {\"A\": 1}}", 400, "BadRequest");
        /* null is the same as absent; unknown fields are ignored */
        expect("POST", "/sandboxes", "{\"image\": null, \"whatever\": [1]}", 200);
        wire_stop();
}
END_TEST

START_TEST(test_invalid_query_escape_is_400)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        expect_error("GET", sp(id, "/exists?path=%zz"), NULL, 400, "BadRequest");
        expect_error("GET", sp(id, "/exists?path=a&junk=%4"), NULL, 400, "BadRequest");
        wire_stop();
}
END_TEST

START_TEST(test_path_climbing_above_root_is_400)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        expect_error("GET", sp(id, "/exists?path=../x"), NULL, 400, "BadRequest");
        expect_error("GET", sp(id, "/file?path=a/../../etc/passwd"), NULL, 400, "BadRequest");
        expect_error("GET", sp(id, "/size?path=a%00b"), NULL, 400, "BadRequest");
        expect_error("GET", sp(id, "/file?path="), NULL, 400, "BadRequest");
        wire_stop();
}
END_TEST

START_TEST(test_unknown_method_is_405_on_known_route)
{
        char allow[128];
        wire_resp r;

        wire_start(no_flags);
        wire_http("PATCH", "/sandboxes/0123456789abcdef0123456789abcdef/file?path=a", NULL, &r);
        wire_assert_error(&r, 405, "MethodNotAllowed");
        ck_assert(wire_header(&r, "Allow", allow, sizeof(allow)));
        ck_assert_str_eq(allow, "GET, HEAD, PUT, DELETE");
        wire_resp_free(&r);
        expect_error("PATCH", "/nope", NULL, 404, "NotFound");
        wire_stop();
}
END_TEST

START_TEST(test_json_body_too_large_is_413)
{
        size_t len = (1u << 20) + 100;
        char *big = malloc(len + 1);
        wire_resp r;

        memset(big, ' ', len);
        big[0] = '{';
        big[len - 1] = '}';
        big[len] = '\0';
        wire_start(no_flags);
        wire_http("POST", "/sandboxes", big, &r);
        wire_assert_error(&r, 413, "PayloadTooLarge");
        wire_resp_free(&r);
        free(big);
        wire_stop();
}
END_TEST

START_TEST(test_item_id_without_archive_root_starts_not_ready)
{
        wire_resp r;
        cJSON *j;
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_http("POST", "/sandboxes", "{\"item_id\": \"item-1\"}", &r);
        assert_status(&r, 200);
        j = wire_json(&r);
        snprintf(id, sizeof(id), "%s",
                 cJSON_GetObjectItemCaseSensitive(j, "remote_id")->valuestring);
        cJSON_Delete(j);
        wire_resp_free(&r);
        j = wire_get_json(id, "ready", NULL);
        ck_assert(!json_bool(j, "ready"));
        cJSON_Delete(j);
        wire_stop();
}
END_TEST

/* ---- files ------------------------------------------------------------------------------ */

START_TEST(test_upload_download_round_trip)
{
        size_t len = 70000;
        unsigned char *data = malloc(len);
        char id[SH_ID_LEN + 1], ct[128];
        wire_resp r;

        for (size_t i = 0; i < len; i++)
                data[i] = (unsigned char)(i * 7 + i / 251);
        wire_start(no_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "dir/blob.bin", data, len), 204);
        assert_download(id, "dir/blob.bin", data, len);
        wire_http("GET", sp(id, "/file?path=/dir//./blob.bin"), NULL, &r);
        assert_status(&r, 200);
        ck_assert(wire_header(&r, "Content-Type", ct, sizeof(ct)));
        ck_assert_str_eq(ct, "application/octet-stream");
        ck_assert_uint_eq(r.body_len, len);
        wire_resp_free(&r);
        free(data);
        wire_stop();
}
END_TEST

START_TEST(test_empty_upload_gives_empty_file)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "empty", NULL, 0), 204);
        assert_download(id, "empty", "", 0);
        ck_assert_int_eq(size_of(id, "empty"), 0);
        wire_stop();
}
END_TEST

START_TEST(test_upload_replaces_existing_file)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "f", "first version", 13), 204);
        ck_assert_int_eq(wire_upload(id, "f", "second", 6), 204);
        assert_download(id, "f", "second", 6);
        wire_stop();
}
END_TEST

START_TEST(test_uploaded_file_is_owned_by_sandbox_with_mode_0644)
{
        char id[SH_ID_LEN + 1], path[600];
        struct stat st, ws;

        wire_start(no_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "sub/f", "x", 1), 204);
        ck_assert_int_eq(stat(wire_workspace(id), &ws), 0);
        snprintf(path, sizeof(path), "%s/sub/f", wire_workspace(id));
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0644);
        ck_assert_uint_eq(st.st_uid, ws.st_uid);
        snprintf(path, sizeof(path), "%s/sub", wire_workspace(id));
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0755);
        ck_assert_uint_eq(st.st_uid, ws.st_uid);
        wire_stop();
}
END_TEST

START_TEST(test_head_download_gives_length_without_body)
{
        char id[SH_ID_LEN + 1], cl[64];
        wire_resp r;

        wire_start(no_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "f", "12345", 5), 204);
        wire_http("HEAD", sp(id, "/file?path=f"), NULL, &r);
        assert_status(&r, 200);
        ck_assert_uint_eq(r.body_len, 0);
        ck_assert(wire_header(&r, "Content-Length", cl, sizeof(cl)));
        ck_assert_str_eq(cl, "5");
        wire_resp_free(&r);
        wire_stop();
}
END_TEST

START_TEST(test_download_absent_is_file_not_found)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        expect_error("GET", sp(id, "/file?path=nope"), NULL, 404, "FileNotFoundError");
        wire_stop();
}
END_TEST

START_TEST(test_download_directory_is_is_a_directory_error)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        expect("POST", sp(id, "/mkdir"), "{\"path\": \"d\"}", 204);
        expect_error("GET", sp(id, "/file?path=d"), NULL, 400, "IsADirectoryError");
        wire_stop();
}
END_TEST

/* All "version": integers of a walk body, in order, parsed from the text (exact: JSON
 * numbers above 2^53 would lose precision as doubles). */
static int walk_versions(const char *body, long long *out, int max)
{
        const char *p = body;
        int n = 0;

        while (n < max && (p = strstr(p, "\"version\":"))) {
                char *end;

                p += strlen("\"version\":");
                while (*p == ' ')
                        p++;
                errno = 0;
                out[n++] = strtoll(p, &end, 10);
                ck_assert_msg(errno == 0 && end != p && *end != '.' && *end != 'e' && *end != 'E',
                              "version is not an integer: '%.40s'", p);
                p = end;
        }
        return n;
}

START_TEST(test_walk_sorted_bytewise_with_size_and_version)
{
        static const char *const files[] = {"b", "a/c", "a.txt", "a/b/z", "A", "a-b"};
        static const char *const sorted[] = {"A", "a-b", "a.txt", "a/b/z", "a/c", "b"};
        long long versions[8];
        char id[SH_ID_LEN + 1], p[600];
        wire_resp r;
        cJSON *j, *entries, *e;
        int i = 0;

        wire_start(no_flags);
        wire_create(id);
        for (size_t k = 0; k < 6; k++)
                ck_assert_int_eq(wire_upload(id, files[k], "123456789", strlen(files[k])), 204);
        wire_http("GET", sp(id, "/walk"), NULL, &r);
        assert_status(&r, 200);
        j = wire_json(&r);
        entries = cJSON_GetObjectItemCaseSensitive(j, "entries");
        ck_assert(cJSON_IsArray(entries));
        ck_assert_int_eq(cJSON_GetArraySize(entries), 6);
        ck_assert_int_eq(walk_versions(r.body, versions, 8), 6);
        cJSON_ArrayForEach(e, entries)
        {
                cJSON *path = cJSON_GetObjectItemCaseSensitive(e, "path");
                cJSON *size = cJSON_GetObjectItemCaseSensitive(e, "size");
                struct stat st;
                long long ns;

                ck_assert(cJSON_IsString(path));
                ck_assert_str_eq(path->valuestring, sorted[i]);
                ck_assert(cJSON_IsNumber(size));
                ck_assert_int_eq((long long)size->valuedouble, (long long)strlen(sorted[i]));
                snprintf(p, sizeof(p), "%s/%s", wire_workspace(id), sorted[i]);
                ck_assert_int_eq(stat(p, &st), 0);
                ns = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
                ck_assert_msg(versions[i] == ns, "%s: version %lld, mtime %lld ns", sorted[i],
                              versions[i], ns);
                i++;
        }
        cJSON_Delete(j);
        wire_resp_free(&r);
        wire_stop();
}
END_TEST

START_TEST(test_walk_root_limits_the_walk)
{
        char id[SH_ID_LEN + 1];
        cJSON *j, *entries;

        wire_start(no_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "top", "1", 1), 204);
        ck_assert_int_eq(wire_upload(id, "sub/x", "1", 1), 204);
        ck_assert_int_eq(wire_upload(id, "sub/deeper/y", "1", 1), 204);
        j = wire_get_json(id, "walk", "root=sub");
        entries = cJSON_GetObjectItemCaseSensitive(j, "entries");
        ck_assert_int_eq(cJSON_GetArraySize(entries), 2);
        /* paths stay relative to the workspace root */
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(entries, 0), "path")
                                 ->valuestring,
                         "sub/deeper/y");
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(entries, 1), "path")
                                 ->valuestring,
                         "sub/x");
        cJSON_Delete(j);
        /* empty root = the whole workspace */
        j = wire_get_json(id, "walk", "root=");
        ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "entries")), 3);
        cJSON_Delete(j);
        wire_stop();
}
END_TEST

START_TEST(test_walk_of_absent_root_is_empty)
{
        char id[SH_ID_LEN + 1];
        wire_resp r;

        wire_start(no_flags);
        wire_create(id);
        wire_http("GET", sp(id, "/walk?root=missing"), NULL, &r);
        assert_status(&r, 200);
        ck_assert_str_eq(r.body, "{\"entries\":[]}");
        wire_resp_free(&r);
        wire_stop();
}
END_TEST

START_TEST(test_exists_reports_files_and_directories)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "d/f", "x", 1), 204);
        ck_assert(exists(id, "d/f"));
        ck_assert(exists(id, "d"));
        ck_assert(exists(id, "/d/"));
        ck_assert(!exists(id, "d/g"));
        ck_assert(!exists(id, "nope/deeper"));
        ck_assert(!exists(id, "d/f/under-a-file"));
        wire_stop();
}
END_TEST

START_TEST(test_size_of_file_and_null_otherwise)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "d/f", "hello", 5), 204);
        ck_assert_int_eq(size_of(id, "d/f"), 5);
        ck_assert_int_eq(size_of(id, "d"), -1);
        ck_assert_int_eq(size_of(id, "absent"), -1);
        wire_stop();
}
END_TEST

START_TEST(test_mkdir_creates_parents_and_existing_dir_is_fine)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        expect("POST", sp(id, "/mkdir"), "{\"path\": \"x/y/z\"}", 204);
        ck_assert(exists(id, "x/y/z"));
        ck_assert_int_eq(size_of(id, "x/y/z"), -1);
        expect("POST", sp(id, "/mkdir"), "{\"path\": \"x/y\"}", 204);
        wire_stop();
}
END_TEST

START_TEST(test_mkdir_over_file_is_file_exists_error)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "f", "x", 1), 204);
        expect_error("POST", sp(id, "/mkdir"), "{\"path\": \"f\"}", 400, "FileExistsError");
        wire_stop();
}
END_TEST

START_TEST(test_rename_moves_file_and_creates_parents)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "src", "payload", 7), 204);
        ck_assert_int_eq(wire_upload(id, "dst/old", "old", 3), 204);
        expect("POST", sp(id, "/rename"), "{\"src\": \"src\", \"dst\": \"new/parent/file\"}", 204);
        ck_assert(!exists(id, "src"));
        assert_download(id, "new/parent/file", "payload", 7);
        /* an existing destination file is replaced */
        expect("POST", sp(id, "/rename"), "{\"src\": \"new/parent/file\", \"dst\": \"dst/old\"}",
               204);
        assert_download(id, "dst/old", "payload", 7);
        wire_stop();
}
END_TEST

START_TEST(test_rename_absent_source_is_file_not_found)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        expect_error("POST", sp(id, "/rename"), "{\"src\": \"nope\", \"dst\": \"b\"}", 404,
                     "FileNotFoundError");
        wire_stop();
}
END_TEST

START_TEST(test_delete_dir_removes_the_tree)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "d/a", "1", 1), 204);
        ck_assert_int_eq(wire_upload(id, "d/e/b", "2", 1), 204);
        ck_assert_int_eq(wire_upload(id, "keep", "3", 1), 204);
        expect("DELETE", sp(id, "/dir?path=d"), NULL, 204);
        ck_assert(!exists(id, "d"));
        ck_assert(!exists(id, "d/e/b"));
        ck_assert(exists(id, "keep"));
        wire_stop();
}
END_TEST

START_TEST(test_delete_dir_errors)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        expect_error("DELETE", sp(id, "/dir?path=absent"), NULL, 404, "FileNotFoundError");
        expect_error("DELETE", sp(id, "/dir?path=/"), NULL, 400, "BadRequest");
        wire_stop();
}
END_TEST

START_TEST(test_delete_file)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "d/f", "1", 1), 204);
        expect("DELETE", sp(id, "/file?path=d/f"), NULL, 204);
        ck_assert(!exists(id, "d/f"));
        expect_error("DELETE", sp(id, "/file?path=d/f"), NULL, 404, "FileNotFoundError");
        expect_error("DELETE", sp(id, "/file?path=d"), NULL, 400, "IsADirectoryError");
        wire_stop();
}
END_TEST

START_TEST(test_upload_onto_directory_is_is_a_directory_error)
{
        char id[SH_ID_LEN + 1];
        wire_resp r;

        wire_start(no_flags);
        wire_create(id);
        expect("POST", sp(id, "/mkdir"), "{\"path\": \"d\"}", 204);
        wire_http_ex("PUT", sp(id, "/file?path=d"), "x", 1, "application/octet-stream", NULL, 0,
                     &r);
        wire_assert_error(&r, 400, "IsADirectoryError");
        wire_resp_free(&r);
        ck_assert_int_eq(size_of(id, "d"), -1);
        wire_stop();
}
END_TEST

START_TEST(test_upload_below_a_file_is_not_a_directory_error)
{
        char id[SH_ID_LEN + 1];
        wire_resp r;

        wire_start(no_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "f", "x", 1), 204);
        wire_http_ex("PUT", sp(id, "/file?path=f/g"), "y", 1, "application/octet-stream", NULL, 0,
                     &r);
        wire_assert_error(&r, 400, "NotADirectoryError");
        wire_resp_free(&r);
        assert_download(id, "f", "x", 1);
        wire_stop();
}
END_TEST

START_TEST(test_upload_replaces_symlink_itself_not_its_target)
{
        char id[SH_ID_LEN + 1], target[600], lnk[600], buf[16];
        struct stat st;
        ssize_t n;
        int fd;

        wire_start(no_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "target", "keep", 4), 204);
        snprintf(target, sizeof(target), "%s/target", wire_workspace(id));
        snprintf(lnk, sizeof(lnk), "%s/lnk", wire_workspace(id));
        ck_assert_int_eq(symlink("target", lnk), 0);
        ck_assert_int_eq(wire_upload(id, "lnk", "new", 3), 204);
        ck_assert_int_eq(lstat(lnk, &st), 0);
        ck_assert(S_ISREG(st.st_mode));
        fd = open(target, O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        n = read(fd, buf, sizeof(buf));
        close(fd);
        ck_assert_int_eq(n, 4);
        ck_assert_int_eq(memcmp(buf, "keep", 4), 0);
        wire_stop();
}
END_TEST

START_TEST(test_download_fifo_is_400_at_once)
{
        char id[SH_ID_LEN + 1], fifo[600];
        wire_resp r;

        wire_start(no_flags);
        wire_create(id);
        snprintf(fifo, sizeof(fifo), "%s/pipe", wire_workspace(id));
        ck_assert_int_eq(mkfifo(fifo, 0644), 0);
        /* opening a FIFO for reading would block until a writer comes: must not happen */
        wire_http_ex("GET", sp(id, "/file?path=pipe"), NULL, 0, NULL, NULL, 3000, &r);
        wire_assert_error(&r, 400, "BadRequest");
        wire_resp_free(&r);
        ck_assert(exists(id, "pipe"));
        ck_assert_int_eq(size_of(id, "pipe"), -1);
        assert_healthz_answers();
        wire_stop();
}
END_TEST

START_TEST(test_escaping_symlink_resolves_inside_workspace)
{
        char id[SH_ID_LEN + 1], secret[700], lnk[600], outside[600];
        wire_resp r;

        wire_start(no_flags);
        wire_create(id);
        /* {root}/../outside-secret is outside every workspace */
        snprintf(outside, sizeof(outside), "%s/../outside", wire_root());
        ck_assert_int_eq(mkdir(outside, 0755), 0);
        snprintf(secret, sizeof(secret), "%s/secret", outside);
        disk_write(secret, 6);
        snprintf(lnk, sizeof(lnk), "%s/esc", wire_workspace(id));
        ck_assert_int_eq(symlink(outside, lnk), 0);
        /* absolute link: resolved as if the workspace were "/" */
        expect_error("GET", sp(id, "/file?path=esc/secret"), NULL, 404, "FileNotFoundError");
        ck_assert(!exists(id, "esc/secret"));
        ck_assert_int_eq(size_of(id, "esc/secret"), -1);
        /* relative link climbing out: ".." stops at the workspace root */
        snprintf(lnk, sizeof(lnk), "%s/up", wire_workspace(id));
        ck_assert_int_eq(symlink("../../../../../../../../outside", lnk), 0);
        expect_error("GET", sp(id, "/file?path=up/secret"), NULL, 404, "FileNotFoundError");
        /* an upload through the link lands inside the workspace */
        wire_http_ex("PUT", sp(id, "/file?path=esc/planted"), "p", 1, "application/octet-stream",
                     NULL, 0, &r);
        /* a dangling parent link may be refused (400) or written inside; never outside */
        ck_assert_msg(r.status == 204 || r.status == 400, "status %ld: %s", r.status, r.body);
        wire_resp_free(&r);
        snprintf(secret, sizeof(secret), "%s/planted", outside);
        ck_assert_int_eq(access(secret, F_OK), -1);
        wire_http("GET", sp(id, "/walk"), NULL, &r);
        assert_status(&r, 200);
        wire_resp_free(&r);
        wire_stop();
}
END_TEST

START_TEST(test_non_utf8_names_round_trip_as_surrogate_escapes)
{
        char id[SH_ID_LEN + 1];
        wire_resp r;

        wire_start(no_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "%FF%C3%A9", "x", 1), 204);
        ck_assert(exists(id, "%FF%C3%A9"));
        wire_http("GET", sp(id, "/walk"), NULL, &r);
        assert_status(&r, 200);
        /* 0xff is not UTF-8: \udcff; the valid é passes through */
        ck_assert_msg(strstr(r.body, "\"path\":\"\\udcff\xc3\xa9\"") != NULL, "walk: %s", r.body);
        wire_resp_free(&r);
        /* and the same spelling in a JSON body names the same bytes */
        expect("POST", sp(id, "/rename"), "{\"src\": \"\\udcff\\u00e9\", \"dst\": \"plain\"}", 204);
        assert_download(id, "plain", "x", 1);
        wire_stop();
}
END_TEST

START_TEST(test_repeated_query_key_first_wins)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "first", "1", 1), 204);
        ck_assert(exists(id, "first&path=second"));
        ck_assert_int_eq(size_of(id, "first&path=absent"), 1);
        wire_stop();
}
END_TEST

START_TEST(test_plus_in_query_is_space)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "a+b", "1", 1), 204);
        ck_assert(exists(id, "a%20b"));
        ck_assert(!exists(id, "a%2Bb"));
        wire_stop();
}
END_TEST

/* ---- readiness -------------------------------------------------------------------------- */

START_TEST(test_ready_false_until_mark_ready)
{
        char id[SH_ID_LEN + 1];
        cJSON *j;

        wire_start(no_flags);
        wire_create(id);
        j = wire_get_json(id, "ready", NULL);
        ck_assert(!json_bool(j, "ready"));
        cJSON_Delete(j);
        expect("POST", sp(id, "/mark-ready"), NULL, 204);
        j = wire_get_json(id, "ready", NULL);
        ck_assert(json_bool(j, "ready"));
        cJSON_Delete(j);
        /* marking twice is harmless */
        expect("POST", sp(id, "/mark-ready"), NULL, 204);
        wire_stop();
}
END_TEST

START_TEST(test_ready_marker_is_outside_the_workspace)
{
        char id[SH_ID_LEN + 1];
        cJSON *j;

        wire_start(no_flags);
        wire_create(id);
        expect("POST", sp(id, "/mark-ready"), NULL, 204);
        ck_assert(!exists(id, ".ready"));
        j = wire_get_json(id, "walk", NULL);
        ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "entries")), 0);
        cJSON_Delete(j);
        /* a workspace file of the same name does not make a sandbox ready */
        {
                char other[SH_ID_LEN + 1];

                wire_create(other);
                ck_assert_int_eq(wire_upload(other, ".ready", "", 0), 204);
                j = wire_get_json(other, "ready", NULL);
                ck_assert(!json_bool(j, "ready"));
                cJSON_Delete(j);
        }
        wire_stop();
}
END_TEST

/* ---- operations ------------------------------------------------------------------------- */

START_TEST(test_healthz_shape)
{
        char ct[128];
        wire_resp r;
        cJSON *j, *caps, *c;

        wire_start(no_flags);
        wire_http("GET", "/healthz", NULL, &r);
        assert_status(&r, 200);
        ck_assert(wire_header(&r, "Content-Type", ct, sizeof(ct)));
        ck_assert_str_eq(ct, "application/json");
        j = wire_json(&r);
        ck_assert(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "status")));
        ck_assert(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "version")));
        ck_assert_uint_gt(strlen(cJSON_GetObjectItemCaseSensitive(j, "version")->valuestring), 0);
        caps = cJSON_GetObjectItemCaseSensitive(j, "capabilities");
        ck_assert(cJSON_IsArray(caps));
        cJSON_ArrayForEach(c, caps) ck_assert(cJSON_IsString(c));
        cJSON_Delete(j);
        wire_resp_free(&r);
        /* HEAD is served wherever GET is */
        wire_http("HEAD", "/healthz", NULL, &r);
        assert_status(&r, 200);
        ck_assert_uint_eq(r.body_len, 0);
        wire_resp_free(&r);
        wire_stop();
}
END_TEST

START_TEST(test_readyz_ok_then_503_after_drain)
{
        char id[SH_ID_LEN + 1], ra[32];
        wire_resp r;
        cJSON *j;

        wire_start(no_flags);
        wire_create(id);
        expect("GET", "/readyz", NULL, 200);
        wire_http("POST", "/drain", NULL, &r);
        assert_status(&r, 200);
        j = wire_json(&r);
        ck_assert(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(j, "sandboxes")));
        ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(j, "sandboxes")->valueint, 1);
        ck_assert(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(j, "persisted")));
        ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(j, "persisted")->valueint, 0);
        cJSON_Delete(j);
        wire_resp_free(&r);
        wire_http("GET", "/readyz", NULL, &r);
        ck_assert_int_eq(r.status, 503);
        ck_assert(wire_header(&r, "Retry-After", ra, sizeof(ra)));
        wire_resp_free(&r);
        wire_stop();
}
END_TEST

START_TEST(test_create_while_draining_is_503_and_existing_sandboxes_work)
{
        char id[SH_ID_LEN + 1], ra[32];
        wire_resp r;

        wire_start(no_flags);
        wire_create(id);
        expect("POST", "/drain", NULL, 200);
        wire_http("POST", "/sandboxes", "{}", &r);
        wire_assert_error(&r, 503, "Unavailable");
        ck_assert(wire_header(&r, "Retry-After", ra, sizeof(ra)));
        ck_assert_int_gt(atoi(ra), 0);
        wire_resp_free(&r);
        ck_assert_int_eq(wire_upload(id, "after-drain", "ok", 2), 204);
        assert_download(id, "after-drain", "ok", 2);
        /* a second drain is harmless */
        expect("POST", "/drain", NULL, 200);
        wire_stop();
}
END_TEST

START_TEST(test_capacity_503_with_retry_after)
{
        static const char *const flags[] = {"--max-sandboxes=1", NULL};
        char id[SH_ID_LEN + 1], ra[32];
        wire_resp r;

        wire_start(flags);
        wire_create(id);
        wire_http("POST", "/sandboxes", "{}", &r);
        wire_assert_error(&r, 503, "Unavailable");
        ck_assert(wire_header(&r, "Retry-After", ra, sizeof(ra)));
        ck_assert_int_gt(atoi(ra), 0);
        wire_resp_free(&r);
        /* full also means not ready for new sandboxes */
        wire_http("GET", "/readyz", NULL, &r);
        ck_assert_int_eq(r.status, 503);
        ck_assert(wire_header(&r, "Retry-After", ra, sizeof(ra)));
        wire_resp_free(&r);
        wire_stop();
}
END_TEST

START_TEST(test_capacity_freed_by_delete)
{
        static const char *const flags[] = {"--max-sandboxes=1", NULL};
        char id[SH_ID_LEN + 1];

        wire_start(flags);
        wire_create(id);
        expect("POST", "/sandboxes", "{}", 503);
        expect("DELETE", sp(id, ""), NULL, 204);
        expect("GET", "/readyz", NULL, 200);
        wire_create(id);
        wire_stop();
}
END_TEST

/* ---- upload limit ----------------------------------------------------------------------- */

static const char *const limit_flags[] = {"--upload-max=1K", NULL};

START_TEST(test_upload_over_limit_is_413_and_keeps_old_content)
{
        char big[4096], id[SH_ID_LEN + 1];
        wire_resp r;

        memset(big, 'B', sizeof(big));
        wire_start(limit_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "f", "old", 3), 204);
        wire_http_ex("PUT", sp(id, "/file?path=f"), big, sizeof(big), "application/octet-stream",
                     NULL, 0, &r);
        wire_assert_error(&r, 413, "PayloadTooLarge");
        wire_resp_free(&r);
        assert_download(id, "f", "old", 3);
        wire_stop();
}
END_TEST

START_TEST(test_upload_over_limit_with_expect_continue_is_413)
{
        static const char *const expect100[] = {"Expect: 100-continue", NULL};
        char big[4096], id[SH_ID_LEN + 1];
        wire_resp r;

        memset(big, 'B', sizeof(big));
        wire_start(limit_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "f", "old", 3), 204);
        wire_http_ex("PUT", sp(id, "/file?path=f"), big, sizeof(big), "application/octet-stream",
                     expect100, 0, &r);
        wire_assert_error(&r, 413, "PayloadTooLarge");
        wire_resp_free(&r);
        assert_download(id, "f", "old", 3);
        wire_stop();
}
END_TEST

START_TEST(test_chunked_upload_over_limit_is_413_and_keeps_old_content)
{
        char big[4096], head[512], id[SH_ID_LEN + 1];
        int fd;

        memset(big, 'C', sizeof(big));
        wire_start(limit_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "f", "old", 3), 204);
        fd = wire_connect_raw();
        snprintf(head, sizeof(head),
                 "PUT /sandboxes/%s/file?path=f HTTP/1.1\r\nHost: t\r\n"
                 "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n%zx\r\n",
                 id, sizeof(big));
        wire_send_all(fd, head, strlen(head));
        wire_send_all(fd, big, sizeof(big));
        wire_send_all(fd, "\r\n0\r\n\r\n", 7);
        ck_assert_int_eq(raw_read_status(fd), 413);
        close(fd);
        assert_download(id, "f", "old", 3);
        wire_stop();
}
END_TEST

START_TEST(test_upload_at_limit_is_accepted)
{
        char exact[1024], id[SH_ID_LEN + 1];

        memset(exact, 'E', sizeof(exact));
        wire_start(limit_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "f", exact, sizeof(exact)), 204);
        assert_download(id, "f", exact, sizeof(exact));
        ck_assert_int_eq(wire_upload(id, "g", exact, sizeof(exact) - 1), 204);
        wire_stop();
}
END_TEST

/* ---- concurrency ------------------------------------------------------------------------ */

/* /healthz answers 200 within 1 s: curl's timeout of the whole exchange, which fails the
 * call (status 0) when the daemon does not answer in time; nothing is measured. */
static void assert_healthz_answers(void)
{
        wire_resp r;

        wire_http_ex("GET", "/healthz", NULL, 0, NULL, NULL, 1000, &r);
        assert_status(&r, 200);
        wire_resp_free(&r);
}

START_TEST(test_stalled_request_headers_do_not_block_healthz)
{
        static const char half[] = "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: ";
        int fd;

        wire_start(no_flags);
        fd = wire_connect_raw();
        wire_send_all(fd, half, strlen(half));
        usleep(50000); /* let the daemon read the first half */
        assert_healthz_answers();
        assert_healthz_answers();
        close(fd);
        wire_stop();
}
END_TEST

START_TEST(test_stalled_upload_body_does_not_block_healthz)
{
        char head[512], id[SH_ID_LEN + 1];
        int fd;

        wire_start(no_flags);
        wire_create(id);
        fd = wire_connect_raw();
        snprintf(head, sizeof(head),
                 "PUT /sandboxes/%s/file?path=slow HTTP/1.1\r\nHost: t\r\n"
                 "Content-Length: 100000\r\n\r\nonly-the-start",
                 id);
        wire_send_all(fd, head, strlen(head));
        usleep(50000);
        assert_healthz_answers();
        /* other calls of the same sandbox are not blocked either */
        ck_assert(!exists(id, "slow"));
        close(fd);
        wire_stop();
}
END_TEST

START_TEST(test_cut_upload_leaves_old_file)
{
        char head[512], id[SH_ID_LEN + 1];
        cJSON *j;
        int fd;

        wire_start(no_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "f", "old", 3), 204);
        fd = wire_connect_raw();
        snprintf(head, sizeof(head),
                 "PUT /sandboxes/%s/file?path=f HTTP/1.1\r\nHost: t\r\n"
                 "Content-Length: 1000\r\n\r\nNEWNEWNEW",
                 id);
        wire_send_all(fd, head, strlen(head));
        usleep(50000);
        close(fd);
        usleep(50000); /* let the daemon see the close */
        assert_download(id, "f", "old", 3);
        j = wire_get_json(id, "walk", NULL);
        ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "entries")), 1);
        cJSON_Delete(j);
        wire_stop();
}
END_TEST

START_TEST(test_unread_large_download_does_not_block_healthz)
{
        size_t len = 8u << 20;
        char *data = malloc(len), head[512], id[SH_ID_LEN + 1];
        int fd;

        memset(data, 'D', len);
        wire_start(no_flags);
        wire_create(id);
        ck_assert_int_eq(wire_upload(id, "big", data, len), 204);
        free(data);
        fd = wire_connect_raw();
        snprintf(head, sizeof(head), "GET /sandboxes/%s/file?path=big HTTP/1.1\r\nHost: t\r\n\r\n",
                 id);
        wire_send_all(fd, head, strlen(head));
        usleep(100000); /* the daemon fills the socket buffers and must not wait for them */
        assert_healthz_answers();
        ck_assert(exists(id, "big"));
        close(fd);
        wire_stop();
}
END_TEST

START_TEST(test_stop_is_prompt_with_idle_keepalive_connection)
{
        static const char req[] = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
        int fd;

        wire_start(no_flags);
        fd = wire_connect_raw();
        wire_send_all(fd, req, strlen(req));
        ck_assert_int_eq(raw_read_status(fd), 200);
        /* the connection stays open and idle (HTTP/1.1 keep-alive): the stop must not wait
         * for it (a daemon that has not ended within 3 s fails the stop) */
        wire_stop_within(3);
        close(fd);
}
END_TEST

/* ---- disk usage ------------------------------------------------------------------------- */

START_TEST(test_disk_usage_of_empty_workspace_is_zero)
{
        char id[SH_ID_LEN + 1];

        wire_start(no_flags);
        wire_create(id);
        ck_assert_int_eq(disk_usage(id), 0);
        wire_stop();
}
END_TEST

START_TEST(test_disk_usage_of_3000_files)
{
        enum { DIRS = 30, PER_DIR = 100 };
        char id[SH_ID_LEN + 1], path[700];
        long long want = 0, walked = 0;
        cJSON *j, *e;
        int n = 0;

        wire_start(no_flags);
        wire_create(id);
        for (int d = 0; d < DIRS; d++) {
                snprintf(path, sizeof(path), "%s/d%02d", wire_workspace(id), d);
                ck_assert_int_eq(mkdir(path, 0755), 0);
                for (int f = 0; f < PER_DIR; f++) {
                        size_t size = (size_t)((d * PER_DIR + f) % 97);

                        snprintf(path, sizeof(path), "%s/d%02d/f%03d", wire_workspace(id), d, f);
                        disk_write(path, size);
                        want += (long long)size;
                }
        }
        ck_assert_int_eq(disk_usage(id), want);
        /* the contract's identity: disk-usage equals the sum of sizes over a walk of / */
        j = wire_get_json(id, "walk", NULL);
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j, "entries"))
        {
                walked += (long long)cJSON_GetObjectItemCaseSensitive(e, "size")->valuedouble;
                n++;
        }
        cJSON_Delete(j);
        ck_assert_int_eq(n, DIRS * PER_DIR);
        ck_assert_int_eq(walked, want);
        wire_stop();
}
END_TEST

START_TEST(test_disk_usage_counts_hard_link_once_and_skips_links)
{
        char id[SH_ID_LEN + 1], a[600], b[600], l[600];

        wire_start(no_flags);
        wire_create(id);
        snprintf(a, sizeof(a), "%s/a", wire_workspace(id));
        snprintf(b, sizeof(b), "%s/b", wire_workspace(id));
        snprintf(l, sizeof(l), "%s/link", wire_workspace(id));
        disk_write(a, 1000);
        ck_assert_int_eq(link(a, b), 0);
        ck_assert_int_eq(symlink("a", l), 0);
        ck_assert_int_eq(disk_usage(id), 1000);
        wire_stop();
}
END_TEST

static Suite *wire_suite(void)
{
        Suite *s = suite_create("wire_api");
        TCase *tc;

        tc = tcase_create("lifecycle");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_create_returns_pod_url_and_remote_id);
        tcase_add_test(tc, test_create_returns_configured_pod_url_without_trailing_slash);
        tcase_add_test(tc, test_create_with_empty_body_is_same_as_empty_object);
        tcase_add_test(tc, test_two_sandboxes_are_separate);
        tcase_add_test(tc, test_delete_returns_204_and_removes_the_directory);
        tcase_add_test(tc, test_deleted_sandbox_is_sandbox_not_found);
        tcase_add_test(tc, test_create_rejects_invalid_item_id);
        tcase_add_test(tc, test_item_id_without_archive_root_starts_not_ready);
        suite_add_tcase(s, tc);

        tc = tcase_create("errors");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_unknown_sandbox_is_sandbox_not_found);
        tcase_add_test(tc, test_unknown_route_is_not_found);
        tcase_add_test(tc, test_wrong_method_is_405_with_allow);
        tcase_add_test(tc, test_unknown_method_is_405_on_known_route);
        tcase_add_test(tc, test_json_body_too_large_is_413);
        tcase_add_test(tc, test_malformed_json_is_400);
        tcase_add_test(tc, test_wrong_field_type_is_400);
        tcase_add_test(tc, test_invalid_query_escape_is_400);
        tcase_add_test(tc, test_path_climbing_above_root_is_400);
        suite_add_tcase(s, tc);

        tc = tcase_create("files");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_upload_download_round_trip);
        tcase_add_test(tc, test_empty_upload_gives_empty_file);
        tcase_add_test(tc, test_upload_replaces_existing_file);
        tcase_add_test(tc, test_uploaded_file_is_owned_by_sandbox_with_mode_0644);
        tcase_add_test(tc, test_head_download_gives_length_without_body);
        tcase_add_test(tc, test_download_absent_is_file_not_found);
        tcase_add_test(tc, test_download_directory_is_is_a_directory_error);
        tcase_add_test(tc, test_walk_sorted_bytewise_with_size_and_version);
        tcase_add_test(tc, test_walk_root_limits_the_walk);
        tcase_add_test(tc, test_walk_of_absent_root_is_empty);
        tcase_add_test(tc, test_exists_reports_files_and_directories);
        tcase_add_test(tc, test_size_of_file_and_null_otherwise);
        tcase_add_test(tc, test_mkdir_creates_parents_and_existing_dir_is_fine);
        tcase_add_test(tc, test_mkdir_over_file_is_file_exists_error);
        tcase_add_test(tc, test_rename_moves_file_and_creates_parents);
        tcase_add_test(tc, test_rename_absent_source_is_file_not_found);
        tcase_add_test(tc, test_delete_dir_removes_the_tree);
        tcase_add_test(tc, test_delete_dir_errors);
        tcase_add_test(tc, test_delete_file);
        tcase_add_test(tc, test_upload_onto_directory_is_is_a_directory_error);
        tcase_add_test(tc, test_upload_below_a_file_is_not_a_directory_error);
        tcase_add_test(tc, test_upload_replaces_symlink_itself_not_its_target);
        tcase_add_test(tc, test_download_fifo_is_400_at_once);
        tcase_add_test(tc, test_escaping_symlink_resolves_inside_workspace);
        tcase_add_test(tc, test_non_utf8_names_round_trip_as_surrogate_escapes);
        tcase_add_test(tc, test_repeated_query_key_first_wins);
        tcase_add_test(tc, test_plus_in_query_is_space);
        suite_add_tcase(s, tc);

        tc = tcase_create("readiness");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_ready_false_until_mark_ready);
        tcase_add_test(tc, test_ready_marker_is_outside_the_workspace);
        suite_add_tcase(s, tc);

        tc = tcase_create("operations");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_healthz_shape);
        tcase_add_test(tc, test_readyz_ok_then_503_after_drain);
        tcase_add_test(tc, test_create_while_draining_is_503_and_existing_sandboxes_work);
        tcase_add_test(tc, test_capacity_503_with_retry_after);
        tcase_add_test(tc, test_capacity_freed_by_delete);
        suite_add_tcase(s, tc);

        tc = tcase_create("limits");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_upload_over_limit_is_413_and_keeps_old_content);
        tcase_add_test(tc, test_upload_over_limit_with_expect_continue_is_413);
        tcase_add_test(tc, test_chunked_upload_over_limit_is_413_and_keeps_old_content);
        tcase_add_test(tc, test_upload_at_limit_is_accepted);
        suite_add_tcase(s, tc);

        tc = tcase_create("concurrency");
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_stalled_request_headers_do_not_block_healthz);
        tcase_add_test(tc, test_stalled_upload_body_does_not_block_healthz);
        tcase_add_test(tc, test_cut_upload_leaves_old_file);
        tcase_add_test(tc, test_unread_large_download_does_not_block_healthz);
        tcase_add_test(tc, test_stop_is_prompt_with_idle_keepalive_connection);
        suite_add_tcase(s, tc);

        tc = tcase_create("disk_usage");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_disk_usage_of_empty_workspace_is_zero);
        tcase_add_test(tc, test_disk_usage_of_3000_files);
        tcase_add_test(tc, test_disk_usage_counts_hard_link_once_and_skips_links);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        int k = ut_need_root("the daemon needs root (its cgroups, the sandboxes' namespaces)");

        return k ? k : wire_main(wire_suite());
}
