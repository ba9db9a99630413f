/* bucket.c: a token bucket (sh/bucket.h), pure. */
#include "sh/bucket.h"

void sh_bucket_init(sh_bucket *b, uint64_t per_s, uint64_t cap, uint64_t now_ms)
{
        *b = (sh_bucket){.per_s = per_s, .cap = cap, .tokens = (int64_t)cap, .then_ms = now_ms};
}

void sh_bucket_refill(sh_bucket *b, uint64_t now_ms)
{
        if (now_ms > b->then_ms)
                b->tokens += (int64_t)((now_ms - b->then_ms) * b->per_s / 1000);
        if (b->tokens > (int64_t)b->cap)
                b->tokens = (int64_t)b->cap;
        b->then_ms = now_ms;
}

uint64_t sh_bucket_take(sh_bucket *b, uint64_t n, uint64_t now_ms)
{
        sh_bucket_refill(b, now_ms);
        b->tokens -= (int64_t)n;
        if (b->tokens >= 0)
                return 0;
        return (uint64_t)(-b->tokens) * 1000 / (b->per_s ? b->per_s : 1) + 1;
}
