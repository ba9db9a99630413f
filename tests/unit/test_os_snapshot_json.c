/* test_os_snapshot_json.c: the API's Snapshot object of a stored snapshot
 * (src/opensandbox/snapshots.c). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/opensandbox/os-internal.h"
#include "sh/snapstore.h"
#include "unit.h"

#define ID1 "snap-0123abcd0123456789abcdef0123456789abcdef"
#define SB  "0123abcd00112233445566778899aabbccddeeff"

START_TEST(test_the_api_shape_has_rfc3339_times_and_the_status)
{
        const char *text = "{\"version\":1,\"id\":\"" ID1 "\",\"sandboxId\":\"" SB "\","
                           "\"name\":\"n\",\"state\":\"Ready\",\"reason\":\"r\","
                           "\"createdAtMs\":1700000000123,\"lastTransitionAtMs\":1700000000123}";
        sh_snapshot *s = NULL;
        sh_error *err = NULL;
        char *out;
        cJSON *o;

        ck_assert_int_eq(sh_snap_parse_record(text, strlen(text), ID1, &s, &err), 0);
        o = os_snapshot_json(s);
        out = cJSON_PrintUnformatted(o);
        ck_assert_ptr_nonnull(strstr(out, "\"createdAt\":\"2023-11-14T22:13:20.123Z\""));
        ck_assert_ptr_nonnull(strstr(out, "\"status\":{\"state\":\"Ready\",\"reason\":\"r\""));
        ck_assert_ptr_null(strstr(out, "version"));
        free(out);
        cJSON_Delete(o);
        sh_snapshot_free(s);
}
END_TEST

static Suite *snapshot_json_suite(void)
{
        Suite *s = suite_create("os_snapshot_json");
        TCase *tc = tcase_create("shape");

        tcase_add_test(tc, test_the_api_shape_has_rfc3339_times_and_the_status);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(snapshot_json_suite());
}
