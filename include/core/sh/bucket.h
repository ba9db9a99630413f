/* bucket.h: a token bucket (pure: the time is the caller's): `per_s` tokens a second, holding
 * at most `cap`; taking more than it holds leaves it in debt, and says how long the refill
 * takes to pay it. The exec engine bills a sandbox's unattended output to one (sh_exec_rate). */
#pragma once

#include <stdint.h>

typedef struct sh_bucket {
        uint64_t per_s, cap;
        int64_t tokens;   /* below zero: in debt */
        uint64_t then_ms; /* the time of the last refill */
} sh_bucket;

/* Full at now_ms. */
void sh_bucket_init(sh_bucket *b, uint64_t per_s, uint64_t cap, uint64_t now_ms);
/* What the time since the last refill earned, up to cap. */
void sh_bucket_refill(sh_bucket *b, uint64_t now_ms);
/* Refill, then take n: 0 when it still holds tokens (none or more), else the milliseconds
 * (at least 1) until the refill has paid the debt. */
uint64_t sh_bucket_take(sh_bucket *b, uint64_t n, uint64_t now_ms);
