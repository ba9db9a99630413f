/* test_conntrack.c: the admission policy against slow clients: who is closed to make room,
 * per-client shares, the header deadline, idle keep-alive connections last. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "sh/http.h"
#include "unit.h"

#define T0 1000000u

static sh_conn *mk(sh_conntrack *t, unsigned char client, uint64_t now)
{
        sh_conn *c = calloc(1, sizeof(*c));

        ck_assert_ptr_nonnull(c);
        c->addr[10] = c->addr[11] = 0xff;
        c->addr[15] = client;
        c->fd = -1;
        sh_conntrack_add(t, c, now);
        return c;
}

static void addr_of(unsigned char client, unsigned char out[16])
{
        memset(out, 0, 16);
        out[10] = out[11] = 0xff;
        out[15] = client;
}

static void free_all(sh_conntrack *t)
{
        while (t->all) {
                sh_conn *c = t->all;

                sh_conntrack_remove(t, c);
                free(c);
        }
        ck_assert_uint_eq(t->n_waiting, 0);
        ck_assert_uint_eq(t->n_active, 0);
        ck_assert_ptr_null(t->waiting);
}

/* The last of the waiting list (oldest first): the newest waiting connection. */
static sh_conn *newest_waiting(const sh_conntrack *t)
{
        sh_conn *c = t->waiting;

        ck_assert_ptr_nonnull(c);
        while (c->wait_next)
                c = c->wait_next;
        return c;
}

/* What the server does: close victims until the newcomer fits. */
static unsigned make_room(sh_conntrack *t, unsigned char client)
{
        unsigned char a[16];
        unsigned n = 0;
        sh_conn *v;

        addr_of(client, a);
        while ((v = sh_conntrack_victim(t, a))) {
                sh_conntrack_unwait(t, v);
                v->evicted = true;
                n++;
        }
        return n;
}

START_TEST(test_room_for_everyone_below_the_limits)
{
        sh_conntrack t = {0};
        unsigned char a[16];
        unsigned i;

        for (i = 0; i < SH_HTTP_WAITING_PER_CLIENT - 1; i++)
                mk(&t, 1, T0 + i);
        addr_of(1, a);
        ck_assert_ptr_null(sh_conntrack_victim(&t, a));
        ck_assert_uint_eq(t.n_waiting, SH_HTTP_WAITING_PER_CLIENT - 1);
        free_all(&t);
}
END_TEST

START_TEST(test_a_client_over_its_share_loses_its_own_oldest)
{
        sh_conntrack t = {0};
        sh_conn *first = NULL, *c;
        unsigned char a[16];
        unsigned i;

        mk(&t, 2, T0); /* another client's, older than all */
        for (i = 0; i < SH_HTTP_WAITING_PER_CLIENT; i++) {
                c = mk(&t, 1, T0 + 1 + i);
                if (!first)
                        first = c;
        }
        addr_of(1, a);
        ck_assert_ptr_eq(sh_conntrack_victim(&t, a), first);
        addr_of(2, a);
        ck_assert_ptr_null(sh_conntrack_victim(&t, a)); /* client 2 is within its share */
        free_all(&t);
}
END_TEST

START_TEST(test_over_the_total_the_oldest_of_all_goes)
{
        sh_conntrack t = {0};
        sh_conn *oldest = NULL, *c;
        unsigned char a[16];
        unsigned i;

        /* many clients, each within its share, filling the total */
        for (i = 0; i < SH_HTTP_WAITING_MAX; i++) {
                c = mk(&t, (unsigned char)(i % 200), T0 + i);
                if (!oldest)
                        oldest = c;
        }
        addr_of(250, a);
        ck_assert_ptr_eq(sh_conntrack_victim(&t, a), oldest);
        ck_assert_uint_eq(make_room(&t, 250), 1);
        mk(&t, 250, T0 + SH_HTTP_WAITING_MAX);
        ck_assert_uint_eq(t.n_waiting, SH_HTTP_WAITING_MAX);
        free_all(&t);
}
END_TEST

START_TEST(test_a_flood_from_one_client_always_lets_a_newcomer_in)
{
        sh_conntrack t = {0};
        unsigned i;

        for (i = 0; i < 5000; i++) {
                make_room(&t, 1);
                mk(&t, 1, T0 + i);
                ck_assert_uint_le(t.n_waiting, SH_HTTP_WAITING_PER_CLIENT);
        }
        /* a probe from the same address: room is made, and it is in */
        make_room(&t, 1);
        mk(&t, 1, T0 + 5000);
        ck_assert_ptr_eq(newest_waiting(&t)->wait_next, NULL);
        ck_assert_uint_eq(newest_waiting(&t)->since_ms, T0 + 5000);
        free_all(&t);
}
END_TEST

START_TEST(test_connections_sending_headers_go_before_idle_ones)
{
        sh_conntrack t = {0};
        sh_conn *idle = mk(&t, 1, T0), *c, *sending = NULL;
        unsigned char a[16];
        unsigned i;

        /* the oldest one finished a request and idles (keep-alive) */
        sh_conntrack_activate(&t, idle);
        sh_conntrack_idle(&t, idle, T0);
        for (i = 1; i < SH_HTTP_WAITING_PER_CLIENT; i++) {
                c = mk(&t, 1, T0 + i);
                if (!sending)
                        sending = c;
        }
        addr_of(1, a);
        ck_assert_ptr_eq(sh_conntrack_victim(&t, a), sending);
        free_all(&t);
}
END_TEST

START_TEST(test_idle_ones_go_when_nothing_else_is_waiting)
{
        sh_conntrack t = {0};
        sh_conn *first = NULL, *c;
        unsigned char a[16];
        unsigned i;

        for (i = 0; i < SH_HTTP_WAITING_PER_CLIENT; i++) {
                c = mk(&t, 1, T0 + i);
                sh_conntrack_activate(&t, c);
                sh_conntrack_idle(&t, c, T0 + i);
                if (!first)
                        first = c;
        }
        addr_of(1, a);
        ck_assert_ptr_eq(sh_conntrack_victim(&t, a), first);
        free_all(&t);
}
END_TEST

START_TEST(test_active_connections_are_never_victims)
{
        sh_conntrack t = {0};
        unsigned char a[16];
        unsigned i;

        for (i = 0; i < SH_HTTP_WAITING_PER_CLIENT + 10; i++)
                sh_conntrack_activate(&t, mk(&t, 1, T0 + i));
        ck_assert_uint_eq(t.n_waiting, 0);
        ck_assert_uint_eq(t.n_active, SH_HTTP_WAITING_PER_CLIENT + 10);
        addr_of(1, a);
        ck_assert_ptr_null(sh_conntrack_victim(&t, a));
        ck_assert_ptr_null(sh_conntrack_expired(&t, T0 + 10 * SH_HTTP_HEADER_TIMEOUT_MS));
        free_all(&t);
}
END_TEST

START_TEST(test_header_deadline_runs_from_the_accept)
{
        sh_conntrack t = {0};
        sh_conn *c = mk(&t, 1, T0);

        ck_assert(sh_conntrack_any_due(&t));
        ck_assert_ptr_null(sh_conntrack_expired(&t, T0 + SH_HTTP_HEADER_TIMEOUT_MS - 1));
        ck_assert_ptr_eq(sh_conntrack_expired(&t, T0 + SH_HTTP_HEADER_TIMEOUT_MS), c);
        free_all(&t);
}
END_TEST

START_TEST(test_idle_keepalive_has_no_deadline_until_its_request_line)
{
        sh_conntrack t = {0};
        sh_conn *c = mk(&t, 1, T0);
        uint64_t later = T0 + 100 * SH_HTTP_HEADER_TIMEOUT_MS;

        sh_conntrack_activate(&t, c);
        sh_conntrack_idle(&t, c, T0 + 5);
        ck_assert(c->waiting);
        ck_assert(!sh_conntrack_any_due(&t));
        ck_assert_ptr_null(sh_conntrack_expired(&t, later));
        sh_conntrack_headers_due(&t, c, later);
        ck_assert_ptr_null(sh_conntrack_expired(&t, later + SH_HTTP_HEADER_TIMEOUT_MS - 1));
        ck_assert_ptr_eq(sh_conntrack_expired(&t, later + SH_HTTP_HEADER_TIMEOUT_MS), c);
        /* a fresh connection's deadline is not pushed back by its request line */
        {
                sh_conn *d = mk(&t, 2, T0);

                sh_conntrack_headers_due(&t, d, later);
                ck_assert_uint_eq(d->deadline_ms, T0 + SH_HTTP_HEADER_TIMEOUT_MS);
        }
        free_all(&t);
}
END_TEST

START_TEST(test_an_evicted_connection_never_waits_again)
{
        sh_conntrack t = {0};
        sh_conn *c = mk(&t, 1, T0);

        sh_conntrack_unwait(&t, c);
        c->evicted = true;
        sh_conntrack_wait(&t, c, T0 + 1, 0);
        ck_assert(!c->waiting);
        ck_assert_uint_eq(t.n_waiting, 0);
        free_all(&t);
}
END_TEST

/* The waiting list stays oldest first however its ends come and go (the list keeps its
 * newest entry to append in O(1)). */
static void assert_waiting(const sh_conntrack *t, sh_conn *const *want, size_t n)
{
        const sh_conn *c, *prev = NULL;
        size_t i = 0;

        for (c = t->waiting; c; prev = c, c = c->wait_next) {
                ck_assert_uint_lt(i, n);
                ck_assert_ptr_eq(c, want[i]);
                ck_assert_ptr_eq(c->wait_prev, prev);
                i++;
        }
        ck_assert_uint_eq(i, n);
        ck_assert_ptr_eq(t->waiting_last, n ? want[n - 1] : NULL);
        ck_assert_uint_eq(t->n_waiting, n);
}

START_TEST(test_the_waiting_list_keeps_its_order_as_its_ends_change)
{
        sh_conntrack t = {0};
        sh_conn *a = mk(&t, 1, T0), *b = mk(&t, 1, T0 + 1), *c = mk(&t, 1, T0 + 2);

        assert_waiting(&t, (sh_conn *[]){a, b, c}, 3);
        sh_conntrack_activate(&t, c); /* the newest leaves */
        assert_waiting(&t, (sh_conn *[]){a, b}, 2);
        sh_conntrack_idle(&t, c, T0 + 3); /* and comes back last */
        assert_waiting(&t, (sh_conn *[]){a, b, c}, 3);
        sh_conntrack_activate(&t, a); /* the oldest leaves */
        sh_conntrack_activate(&t, b);
        assert_waiting(&t, (sh_conn *[]){c}, 1);
        sh_conntrack_activate(&t, c); /* empty */
        assert_waiting(&t, NULL, 0);
        sh_conntrack_idle(&t, b, T0 + 4);
        sh_conntrack_idle(&t, a, T0 + 5);
        assert_waiting(&t, (sh_conn *[]){b, a}, 2);
        sh_conntrack_remove(&t, a); /* closed while last */
        free(a);
        assert_waiting(&t, (sh_conn *[]){b}, 1);
        sh_conntrack_idle(&t, c, T0 + 6);
        assert_waiting(&t, (sh_conn *[]){b, c}, 2);
        free_all(&t);
        ck_assert_ptr_null(t.waiting_last);
}
END_TEST

static Suite *conntrack_suite(void)
{
        Suite *s = suite_create("conntrack");
        TCase *tc = tcase_create("policy");

        tcase_add_test(tc, test_room_for_everyone_below_the_limits);
        tcase_add_test(tc, test_a_client_over_its_share_loses_its_own_oldest);
        tcase_add_test(tc, test_over_the_total_the_oldest_of_all_goes);
        tcase_add_test(tc, test_a_flood_from_one_client_always_lets_a_newcomer_in);
        tcase_add_test(tc, test_connections_sending_headers_go_before_idle_ones);
        tcase_add_test(tc, test_idle_ones_go_when_nothing_else_is_waiting);
        tcase_add_test(tc, test_active_connections_are_never_victims);
        tcase_add_test(tc, test_header_deadline_runs_from_the_accept);
        tcase_add_test(tc, test_idle_keepalive_has_no_deadline_until_its_request_line);
        tcase_add_test(tc, test_an_evicted_connection_never_waits_again);
        tcase_add_test(tc, test_the_waiting_list_keeps_its_order_as_its_ends_change);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        return ut_run(conntrack_suite());
}
