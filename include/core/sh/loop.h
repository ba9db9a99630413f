/* loop.h: the one event loop (redis ae-style): epoll over fd handlers, monotonic timers (a
 * heap) on one timerfd, before-sleep hooks (used to run libmicrohttpd), signals via signalfd.
 * One thread. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

typedef struct sh_loop sh_loop;
typedef struct sh_io sh_io;
typedef struct sh_timer sh_timer;

/* EPOLLERR/EPOLLHUP are delivered with the events; handlers find errors by reading. */
typedef void (*sh_io_fn)(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data);
typedef void (*sh_timer_fn)(sh_loop *l, sh_timer *t, void *data);
/* Runs before every wait; returns the longest the loop may sleep in ms (-1: no limit). */
typedef int64_t (*sh_hook_fn)(sh_loop *l, void *data);

int sh_loop_new(sh_loop **ret);
void sh_loop_free(sh_loop *l);

/* Watch fd (the loop does not own it). Returns a handle or NULL (errno set). */
sh_io *sh_loop_add_io(sh_loop *l, int fd, uint32_t events, sh_io_fn fn, void *data);
int sh_loop_mod_io(sh_loop *l, sh_io *io, uint32_t events);
/* Stop watching; safe from inside any callback, including io's own. */
void sh_loop_del_io(sh_loop *l, sh_io *io);

/* One-shot timer `ms` from now. Returns a handle or NULL. Cancel accepts NULL. A timer is
 * freed after it fires: do not cancel it from then on. Timers of one deadline fire in the
 * order they were added. Adding and cancelling cost O(log n) in the timers pending (a
 * binary heap): thousands of sandboxes each keep a few. */
sh_timer *sh_loop_add_timer(sh_loop *l, uint64_t ms, sh_timer_fn fn, void *data);
/* A turn of the loop runs the timers that were due when it began until this long has gone by;
 * the rest, and those added meanwhile, run from the next turn, after the fds are looked at. */
#define SH_LOOP_TIMERS_NS (4ull * 1000 * 1000)
void sh_loop_cancel_timer(sh_loop *l, sh_timer *t);

/* At most one hook per slot; later hooks run in order of registration. */
int sh_loop_add_hook(sh_loop *l, sh_hook_fn fn, void *data);

/* Block these signals and deliver them through a signalfd to fn (the siginfo's ssi_signo is
 * passed as `events`). */
int sh_loop_add_signals(sh_loop *l, const int *signals, int n, sh_io_fn fn, void *data);

int sh_loop_run(sh_loop *l); /* until sh_loop_stop; 0 or -errno */
void sh_loop_stop(sh_loop *l);

/* Monotonic time in ms / ns. */
uint64_t sh_now_ms(void);
uint64_t sh_now_ns(void);
/* Wall-clock time (CLOCK_REALTIME) in Unix ms: what clients' dates speak (expiries, createdAt);
 * 0 if the clock cannot be read. */
uint64_t sh_now_wall_ms(void);
