/* exec.c: exec sessions: pipes from the sandbox read by the loop (stdout, stderr, and frames,
 * each of those delivered after the output written before it), the input pipe written from a
 * bounded queue, typed events for the consumer, the output kept for the exit event,
 * heartbeats, the grace for descendants, the kill of the exec cgroup (with its reason: asked,
 * or the timeout) and signals to it, and the read rates sessions share. */
#include "sh/exec.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sh/bucket.h"
#include "sh/buf.h"
#include "sh/cgroup.h"
#include "sh/list.h"
#include "sh/log.h"
#include "sh/util.h"
#include "sh/worker.h"

#define READ_CHUNK (256 * 1024)
#define PIPE_SIZE  (1024 * 1024) /* exec pipes: fewer wake-ups per MB */
#define NPIPES     3             /* read ends: stdout, stderr, frames (sh_exec_stream) */

struct sh_exec {
        unsigned refs; /* the owner's (until ended) + the consumer's (until detach) */
        sh_exec_env env;
        sh_exec_owner owner;
        bool owned; /* started: the owner hooks apply */
        char log_id[SH_ID_LEN + 1];
        uint32_t id;
        struct sh_cgroup *cg;
        uint64_t ooms_before, ooms_after; /* cg's OOM kill counter at the start, at the end */
        bool ooms_read;                   /* ooms_after was read */
        int fd[NPIPES]; /* read ends: stdout, stderr, frames (-1 once at EOF, or none) */
        sh_io *io[NPIPES];
        /* Frames read but not delivered yet: the output written before them goes first. */
        sh_buf frame;
        sh_timer *frame_t; /* its delivery after a resume (nothing to wake the loop for it) */
        /* Input: the write end of the command's fd 0 (-1: none, or closed), what is queued
         * for it (written while in_io watches for room). */
        bool input, in_closing; /* the spec has input; sh_exec_close_input was called */
        int in_fd;
        sh_io *in_io;
        sh_buf in;
        bool paused;            /* the consumer is full: the pipes are not watched */
        sh_exec_rate *rate;     /* the rate its reads are billed to, or NULL (a reference) */
        size_t rate_charge_min; /* the least one read costs of it */
        bool rate_wait;         /* its rate is spent: the pipes are not watched until the refill */
        SH_LIST_FIELDS(sh_exec, waiting); /* in rate->waiting while rate_wait */
        sh_buf out[2];                    /* kept stdout / stderr, up to capture_max */
        uint64_t capture_max, heartbeat_ms, grace_ms, timeout_ms;
        size_t read_max; /* bytes of one read, at most read_cap */
        size_t read_cap; /* the spec's read_max, at most sizeof(chunk) */
        bool truncated;
        bool started, exited, ended, detached, killed, owner_released;
        int status;
        sh_timer *grace_t, *hb_t, *timeout_t;
        sh_timer *rekill_t; /* killed, not yet exited: the kill again (a process joining late) */
        uint64_t rekill_ms; /* the next wait before it, doubled up to REKILL_MAX_MS */
        char why[128];      /* why it was killed (sh_exec_kill), "": it was not */
        uint64_t last_event_ms;
        sh_exec_event_fn fn;
        void *data;
};

static void exec_unref(sh_exec *e);
static void on_pipe(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data);
static void on_frame_due(sh_loop *l, sh_timer *t, void *data);
static void on_input(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data);

/* ---- read rates ------------------------------------------------------------------------- */

struct sh_exec_rate {
        unsigned refs;
        sh_loop *loop;
        sh_bucket b;      /* bytes, monotonic ms */
        sh_timer *refill; /* armed while in debt */
        sh_exec *waiting; /* the sessions waiting for the refill */
};

sh_exec_rate *sh_exec_rate_new(sh_loop *loop, uint64_t bytes_per_s)
{
        sh_exec_rate *r = calloc(1, sizeof(*r));

        if (!r)
                return NULL;
        r->refs = 1;
        r->loop = loop;
        sh_bucket_init(&r->b, bytes_per_s, bytes_per_s / 8, sh_now_ms());
        return r;
}

static sh_exec_rate *rate_ref(sh_exec_rate *r)
{
        if (r)
                r->refs++;
        return r;
}

void sh_exec_rate_unref(sh_exec_rate *r)
{
        if (!r || --r->refs > 0)
                return;
        sh_loop_cancel_timer(r->loop, r->refill);
        free(r);
}

/* The pipes are watched unless the consumer paused the session or its rate is spent. Frames
 * read before the pause are delivered from a timer: no pipe may wake the loop for them. */
static void watch_pipes(sh_exec *e)
{
        int k;

        for (k = 0; k < NPIPES; k++)
                if (e->fd[k] >= 0 && !e->io[k])
                        e->io[k] = sh_loop_add_io(e->env.loop, e->fd[k], EPOLLIN, on_pipe, e);
        if (sh_buf_unread(&e->frame) && !e->frame_t &&
            !(e->frame_t = sh_loop_add_timer(e->env.loop, 0, on_frame_due, e)))
                log_warn("exec-frames-stalled", e->log_id, "cannot arm the frames' delivery");
}

static void unwatch_pipes(sh_exec *e)
{
        int k;

        for (k = 0; k < NPIPES; k++)
                if (e->io[k]) {
                        sh_loop_del_io(e->env.loop, e->io[k]);
                        e->io[k] = NULL;
                }
}

/* The session no longer waits for its rate (refilled, or ended). */
static void rate_wait_end(sh_exec *e)
{
        if (!e->rate_wait)
                return;
        e->rate_wait = false;
        SH_LIST_REMOVE(waiting, e->rate->waiting, e);
}

/* Refilled: every session that waited reads again (unless its consumer paused it). */
static void on_refill(sh_loop *l, sh_timer *t, void *data)
{
        sh_exec_rate *r = data;
        sh_exec *e;

        r->refill = NULL;
        sh_bucket_refill(&r->b, sh_now_ms());
        while ((e = r->waiting)) {
                rate_wait_end(e);
                if (!e->paused)
                        watch_pipes(e);
        }
}

/* Bill n bytes read by e: past the bucket, e waits for the refill timer (armed now; without
 * it, e is not stopped: nobody would resume it). */
static void rate_charge(sh_exec *e, size_t n)
{
        sh_exec_rate *r = e->rate;
        uint64_t wait_ms;

        if (!r || e->rate_wait)
                return;
        wait_ms =
                sh_bucket_take(&r->b, n > e->rate_charge_min ? n : e->rate_charge_min, sh_now_ms());
        if (!wait_ms)
                return;
        if (!r->refill)
                r->refill = sh_loop_add_timer(r->loop, wait_ms, on_refill, r);
        if (!r->refill)
                return;
        e->rate_wait = true;
        SH_LIST_PREPEND(waiting, r->waiting, e);
        unwatch_pipes(e);
}

/* Every event goes through here: the heartbeat counts silence from the last one. */
static void emit(sh_exec *e, const sh_exec_event *ev)
{
        e->last_event_ms = sh_now_ms();
        if (e->fn && !e->detached)
                e->fn(e, ev, e->data);
}

static void stop_reading(sh_exec *e, int i)
{
        sh_loop_del_io(e->env.loop, e->io[i]);
        e->io[i] = NULL;
        sh_close(e->fd[i]);
        e->fd[i] = -1;
}

static void finish(sh_exec *e);

/* The owner's reference goes once the command has exited and every holder of its pipes has
 * closed them: nothing more can come. */
static bool pipes_closed(const sh_exec *e)
{
        return e->fd[0] < 0 && e->fd[1] < 0 && e->fd[2] < 0;
}

static void maybe_release(sh_exec *e)
{
        if (e->owner_released || !e->exited || !pipes_closed(e))
                return;
        e->owner_released = true;
        if (e->owner.ended)
                e->owner.ended(e, e->owner.data);
        exec_unref(e);
}

static void maybe_finish(sh_exec *e)
{
        if (e->ended || !e->exited)
                return;
        if (pipes_closed(e))
                finish(e);
}

/* Reads go on: not paused by the consumer, its rate not spent, not ended. */
static bool reading(const sh_exec *e)
{
        return !e->paused && !e->rate_wait && !e->ended;
}

/* A chunk of stream k (read into p) to the consumer, billed to the rate; stdout's and
 * stderr's kept for the exit event up to capture_max. */
static void deliver(sh_exec *e, int k, const char *p, size_t n)
{
        sh_exec_event ev = {.type = SH_EXEC_EV_CHUNK};

        if (k < 2) {
                size_t room = e->out[k].len < e->capture_max ? e->capture_max - e->out[k].len : 0;
                size_t keep = n < room ? n : room;

                if (keep && sh_buf_append(&e->out[k], p, keep) < 0)
                        keep = 0;
                if (keep < n)
                        e->truncated = true;
        }
        /* The consumer pauses us if it is full: a consumer that does not read stops our
         * reads, and a full pipe then stops the command. Memory never grows with a silent
         * client. */
        ev.chunk.stream = (sh_exec_stream)k;
        ev.chunk.data = p;
        ev.chunk.len = n;
        rate_charge(e, n);
        emit(e, &ev);
}

/* One read of stdout or stderr (at most `max` bytes) delivered. The read's result: 0 at EOF
 * (the pipe is closed), < 0 with errno. */
static ssize_t read_output(sh_exec *e, int k, size_t max)
{
        static char chunk[READ_CHUNK]; /* one loop thread: one buffer */
        ssize_t n = read(e->fd[k], chunk, max < e->read_max ? max : e->read_max);

        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return n;
        if (n <= 0) {
                stop_reading(e, k);
                return n;
        }
        if (!e->ended) /* the last event is out: nothing more is kept */
                deliver(e, k, chunk, (size_t)n);
        return n;
}

/* Before frames go out, the output written before them: every byte in the stdout and stderr
 * pipes now was written before the frames already read were (each pipe keeps its order).
 * What the pipes hold now is read, and no more: a command writing without pause must not
 * keep the loop here. False when the reads stopped first (paused, the rate spent, ended): the
 * frames wait. */
static bool output_before_frames(sh_exec *e)
{
        for (int k = 0; k < 2; k++) {
                int avail = 0;

                if (e->fd[k] < 0)
                        continue;
                /* a pipe that cannot say: whatever one read finds */
                if (ioctl(e->fd[k], FIONREAD, &avail) < 0)
                        avail = (int)e->read_max;
                while (avail > 0 && e->fd[k] >= 0) {
                        ssize_t n;

                        if (!reading(e))
                                return false;
                        n = read_output(e, k, (size_t)avail);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n <= 0)
                                break; /* EAGAIN: nothing more there; EOF: closed */
                        avail -= (int)n;
                }
        }
        return reading(e);
}

/* The frames read, after the output before them (if the reads go on meanwhile). */
static void deliver_frames(sh_exec *e)
{
        size_t n = sh_buf_unread(&e->frame);

        if (!n || !output_before_frames(e))
                return;
        deliver(e, SH_EXEC_FRAMES, e->frame.p + e->frame.off, n);
        /* kept until the event returned: it pointed into the buffer */
        e->frame.off = e->frame.len = 0;
}

static void on_frame_due(sh_loop *l, sh_timer *t, void *data)
{
        sh_exec *e = data;

        e->frame_t = NULL;
        if (reading(e))
                deliver_frames(e);
}

/* Frames are read only when those read before have gone out: at most read_max bytes wait. */
static void on_frames(sh_exec *e)
{
        if (!sh_buf_unread(&e->frame)) {
                ssize_t n;

                if (sh_buf_reserve(&e->frame, e->read_max) < 0)
                        return; /* out of memory: the pipe is looked at again */
                n = read(e->fd[SH_EXEC_FRAMES], e->frame.p + e->frame.len, e->read_max);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                if (n <= 0) {
                        stop_reading(e, SH_EXEC_FRAMES);
                        maybe_finish(e);
                        maybe_release(e);
                        return;
                }
                if (e->ended)
                        return;
                e->frame.len += (size_t)n;
        }
        deliver_frames(e);
}

static void on_pipe(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        sh_exec *e = data;
        int i = fd == e->fd[0] ? 0 : fd == e->fd[1] ? 1 : 2;
        ssize_t n;

        if (i == SH_EXEC_FRAMES) {
                on_frames(e);
                return;
        }
        n = read_output(e, i, e->read_max);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
                maybe_finish(e);
                maybe_release(e);
        }
}

/* ---- input ------------------------------------------------------------------------------ */

/* The input is over: the command's fd 0 reaches EOF (or it is gone); what is queued goes. */
static void input_end(sh_exec *e)
{
        sh_loop_del_io(e->env.loop, TAKE_PTR(e->in_io));
        sh_close(e->in_fd);
        e->in_fd = -1;
        sh_buf_done(&e->in);
}

/* Write what is queued as far as the pipe takes it; watch for room while something is left.
 * A command that closed its fd 0 or is gone (EPIPE: the daemon handles SIGPIPE) takes nothing
 * more: the queue goes, and its exit comes as usual. */
static void input_flush(sh_exec *e)
{
        while (sh_buf_unread(&e->in)) {
                ssize_t n = write(e->in_fd, e->in.p + e->in.off, sh_buf_unread(&e->in));

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        break;
                if (n <= 0) {
                        if (errno != EPIPE)
                                log_warn("exec-input-failed", e->log_id, "%s", strerror(errno));
                        input_end(e);
                        return;
                }
                e->in.off += (size_t)n;
        }
        if (sh_buf_unread(&e->in)) {
                if (!e->in_io &&
                    !(e->in_io = sh_loop_add_io(e->env.loop, e->in_fd, EPOLLOUT, on_input, e))) {
                        log_warn("exec-input-failed", e->log_id, "cannot watch the input pipe");
                        input_end(e);
                }
                return;
        }
        /* all written: nothing held (a queue may have been megabytes), no watch */
        sh_buf_done(&e->in);
        sh_loop_del_io(e->env.loop, TAKE_PTR(e->in_io));
        if (e->in_closing)
                input_end(e);
}

static void on_input(sh_loop *l, sh_io *io, int fd, uint32_t events, void *data)
{
        input_flush(data);
}

int sh_exec_write(sh_exec *e, const void *p, size_t n, sh_error **err)
{
        if (!e->input || e->in_closing || e->ended)
                return sh_error_new(err, SH_E_INVALID, "the command takes no more input");
        if (e->in_fd < 0 || n == 0)
                return 0; /* the command is gone: its exit follows */
        if (n > SH_EXEC_INPUT_MAX - sh_buf_unread(&e->in))
                return sh_error_new(err, SH_E_UNAVAILABLE,
                                    "more than %u bytes of input would be queued",
                                    SH_EXEC_INPUT_MAX);
        if (sh_buf_append(&e->in, p, n) < 0)
                return sh_error_make(err, ENOMEM, "out of memory");
        input_flush(e);
        return 0;
}

void sh_exec_close_input(sh_exec *e)
{
        if (!e->input || e->in_closing)
                return;
        e->in_closing = true;
        if (e->in_fd >= 0 && !sh_buf_unread(&e->in))
                input_end(e);
}

void sh_exec_pause(sh_exec *e)
{
        if (e->paused || e->ended)
                return;
        e->paused = true;
        unwatch_pipes(e);
}

void sh_exec_set_read_max(sh_exec *e, size_t n)
{
        e->read_max = n == 0 ? 1 : n < e->read_cap ? n : e->read_cap;
}

void sh_exec_resume(sh_exec *e)
{
        if (!e->paused)
                return;
        e->paused = false;
        if (!e->rate_wait)
                watch_pipes(e);
}

static void on_heartbeat(sh_loop *l, sh_timer *t, void *data)
{
        sh_exec *e = data;
        uint64_t now = sh_now_ms();

        e->hb_t = NULL;
        if (e->ended)
                return;
        if (now - e->last_event_ms >= e->heartbeat_ms) {
                sh_exec_event ev = {.type = SH_EXEC_EV_HEARTBEAT};

                /* Harmless to the client, and the write that tells us a vanished client is
                 * gone. */
                emit(e, &ev);
                e->hb_t = sh_loop_add_timer(l, e->heartbeat_ms, on_heartbeat, e);
        } else {
                e->hb_t = sh_loop_add_timer(l, e->heartbeat_ms - (now - e->last_event_ms),
                                            on_heartbeat, e);
        }
}

/* After the last event nothing of the pipes is wanted any more: close the daemon's read
 * ends. Draining them instead would let a sandbox's background writers keep the daemon busy
 * reading and dropping their output for as long as they live (`yes &` held ~80% of a core);
 * now their writes fail with EPIPE (or SIGPIPE), which is their business, and nothing of
 * theirs is left in the daemon. */
static void close_pipes(sh_exec *e)
{
        int k;

        for (k = 0; k < NPIPES; k++)
                if (e->fd[k] >= 0)
                        stop_reading(e, k);
        e->paused = false;
        rate_wait_end(e);
        sh_loop_cancel_timer(e->env.loop, TAKE_PTR(e->frame_t));
        e->frame.off = e->frame.len = 0; /* not freed: a chunk event may point into it */
        input_end(e);
}

static void on_grace(sh_loop *l, sh_timer *t, void *data)
{
        sh_exec *e = data;

        e->grace_t = NULL;
        /* Descendants still hold the pipes: end now; they keep running in the sandbox
         * (finish closes our ends of their pipes). */
        if (!e->ended) {
                finish(e);
                maybe_release(e);
        }
}

static void finish(sh_exec *e)
{
        sh_exec_event ev = {.type = SH_EXEC_EV_EXIT};
        uint64_t ooms = 0;
        sh_error *err = NULL;

        if (e->ended)
                return;
        e->ended = true;
        sh_loop_cancel_timer(e->env.loop, e->grace_t);
        e->grace_t = NULL;
        sh_loop_cancel_timer(e->env.loop, TAKE_PTR(e->hb_t));
        sh_loop_cancel_timer(e->env.loop, TAKE_PTR(e->timeout_t));
        close_pipes(e);
        if (WIFSIGNALED(e->status)) {
                ev.exit.signal = WTERMSIG(e->status);
                ev.exit.code = 128 + ev.exit.signal;
        } else {
                ev.exit.code = WEXITSTATUS(e->status);
        }
        if (e->cg && sh_cgroup_oom_kills(e->cg, &ooms, &err) < 0) {
                log_warn("oom-read-failed", e->log_id, "%s, ignoring", err ? err->msg : "");
                sh_error_release(&err);
        } else if (e->cg) {
                e->ooms_after = ooms;
                e->ooms_read = true;
        }
        /* a recycled cgroup counts its earlier execs' kills too */
        ev.exit.oom = ooms > e->ooms_before;
        ev.exit.truncated = e->truncated;
        ev.why = e->why[0] ? e->why : NULL;
        ev.exit.out = e->out[0].p ? e->out[0].p : "";
        ev.exit.out_len = e->out[0].len;
        ev.exit.err = e->out[1].p ? e->out[1].p : "";
        ev.exit.err_len = e->out[1].len;
        emit(e, &ev);
        sh_buf_done(&e->out[0]);
        sh_buf_done(&e->out[1]);
}

static void fail(sh_exec *e, sh_error_kind kind, const char *text)
{
        sh_exec_event ev = {.type = SH_EXEC_EV_ERROR};

        if (e->ended)
                return;
        e->ended = true;
        sh_loop_cancel_timer(e->env.loop, TAKE_PTR(e->timeout_t));
        /* Paused by backpressure or not, the session no longer waits for the pipes' EOF: it
         * ends once the command has exited (maybe_release). */
        close_pipes(e);
        ev.error.kind = kind;
        ev.error.text = text;
        ev.why = e->why[0] ? e->why : NULL;
        emit(e, &ev);
}

static void exec_free(sh_exec *e)
{
        int k;

        sh_loop_cancel_timer(e->env.loop, e->grace_t);
        sh_loop_cancel_timer(e->env.loop, e->hb_t);
        sh_loop_cancel_timer(e->env.loop, e->timeout_t);
        sh_loop_cancel_timer(e->env.loop, e->rekill_t);
        sh_loop_cancel_timer(e->env.loop, e->frame_t);
        for (k = 0; k < NPIPES; k++) {
                sh_loop_del_io(e->env.loop, e->io[k]);
                sh_close(e->fd[k]);
        }
        input_end(e);
        sh_buf_done(&e->frame);
        if (e->cg) {
                sh_error *err = NULL;

                if (!e->exited || e->killed) {
                        if (sh_cgroup_kill(e->cg, &err) < 0)
                                log_warn("exec-kill-failed", e->log_id, "%s", err ? err->msg : "");
                        sh_error_release(&err);
                } else if (e->ooms_read && e->owned && e->owner.recycle &&
                           e->owner.recycle(e->cg, e->ooms_after, e->owner.data)) {
                        e->cg = NULL; /* the owner's now */
                }
                if (e->cg)
                        e->env.bury(e->env.reaper, e->cg);
        }
        sh_buf_done(&e->out[0]);
        sh_buf_done(&e->out[1]);
        rate_wait_end(e);
        sh_exec_rate_unref(e->rate);
        if (e->owned && e->owner.freed)
                e->owner.freed(e->owner.data);
        free(e);
}

static void exec_unref(sh_exec *e)
{
        if (e && --e->refs == 0)
                exec_free(e);
}

uint32_t sh_exec_id(const sh_exec *e)
{
        return e->id;
}

void sh_exec_on_started(sh_exec *e, int pid)
{
        e->started = true;
}

void sh_exec_on_exited(sh_exec *e, int status)
{
        if (e->exited)
                return;
        e->exited = true;
        e->status = status;
        if (!e->ended)
                maybe_finish(e);
        if (e->ended) {
                maybe_release(e);
                return;
        }
        e->grace_t = sh_loop_add_timer(e->env.loop, e->grace_ms, on_grace, e);
        if (!e->grace_t) {
                finish(e);
                maybe_release(e);
        }
}

void sh_exec_abandon(sh_exec *e, sh_error_kind kind, const char *text)
{
        e->exited = true; /* no exit will be reported: the worker is gone */
        fail(e, kind, text);
        maybe_release(e);
}

#define REKILL_FIRST_MS 10
#define REKILL_MAX_MS   1000

static void kill_tree(sh_exec *e);

static void on_rekill(sh_loop *l, sh_timer *t, void *data)
{
        sh_exec *e = data;

        (void)l;
        (void)t;
        e->rekill_t = NULL;
        kill_tree(e);
}

/* The whole tree, however it detached (setsid, double fork): the exec's own cgroup holds every
 * process it started. Its pipes then reach EOF and the exit comes as usual. A process not in
 * the cgroup yet is not killed by this (the command's own process joins it after the worker's
 * fork, so a kill right after the start may come first): until the exit comes, the kill is
 * made again from a timer, 10 ms later, then twice as long each time up to 1 s. */
static void kill_tree(sh_exec *e)
{
        sh_error *err = NULL;

        if (e->ended || e->exited || !e->cg)
                return;
        if (sh_cgroup_kill(e->cg, &err) < 0) {
                log_warn("exec-kill-failed", e->log_id, "%s", err ? err->msg : "");
                sh_error_release(&err);
        }
        e->rekill_ms = e->rekill_ms ? e->rekill_ms * 2 : REKILL_FIRST_MS;
        if (e->rekill_ms > REKILL_MAX_MS)
                e->rekill_ms = REKILL_MAX_MS;
        if (!e->rekill_t &&
            !(e->rekill_t = sh_loop_add_timer(e->env.loop, e->rekill_ms, on_rekill, e)))
                log_warn("exec-kill-failed", e->log_id, "cannot arm the kill's next look");
}

void sh_exec_kill(sh_exec *e, const char *why)
{
        if (!e || e->ended || !e->cg)
                return;
        if (why && !e->why[0]) {
                snprintf(e->why, sizeof(e->why), "%s", why);
                log_info("exec-killed", e->log_id, "%s", why);
        }
        e->killed = true;
        kill_tree(e);
}

void sh_exec_signal(sh_exec *e, int sig)
{
        sh_error *err = NULL;

        if (!e || e->ended || !e->cg)
                return;
        if (sh_cgroup_exec_signal(e->cg, sig, &err) < 0)
                log_warn("exec-signal-failed", e->log_id, "%s", err ? err->msg : "");
        sh_error_release(&err);
}

static void on_timeout(sh_loop *l, sh_timer *t, void *data)
{
        sh_exec *e = data;
        char why[64];

        e->timeout_t = NULL;
        snprintf(why, sizeof(why), "timed out after %" PRIu64 " ms", e->timeout_ms);
        sh_exec_kill(e, why);
}

void sh_exec_detach(sh_exec *e)
{
        if (!e || e->detached)
                return;
        e->detached = true;
        e->fn = NULL;
        if (!e->ended) {
                /* The consumer went away before the end: the command and everything it
                 * started die with it, found through the exec's own cgroup. */
                sh_error *err = NULL;

                e->killed = true;
                if (e->cg && sh_cgroup_kill(e->cg, &err) < 0) {
                        log_warn("exec-kill-failed", e->log_id, "%s", err ? err->msg : "");
                        sh_error_release(&err);
                }
                log_info("exec-killed", e->log_id, "client went away before the end");
                fail(e, SH_E_CANCELLED, "the client went away");
        }
        exec_unref(e); /* the consumer's reference */
}

int sh_exec_start(const sh_exec_env *env, const sh_exec_spec *spec, sh_exec_event_fn fn, void *data,
                  const sh_exec_owner *owner, sh_exec **ret, sh_error **err)
{
        sh_exec *e;
        char name[32];
        int out_p[2] = {-1, -1}, err_p[2] = {-1, -1}, in_p[2] = {-1, -1}, fr_p[2] = {-1, -1};
        int procs[SH_EXEC_MAX_PROCS_FDS], nprocs = 0, i, r = -1;

        e = calloc(1, sizeof(*e));
        if (!e) {
                if (spec->cg)
                        env->bury(env->reaper, spec->cg);
                return sh_error_make(err, ENOMEM, "out of memory");
        }
        e->refs = 1; /* until the start succeeds: the caller's */
        e->env = *env;
        e->owner = *owner;
        snprintf(e->log_id, sizeof(e->log_id), "%s", spec->log_id ? spec->log_id : "");
        e->id = spec->id;
        e->capture_max = spec->capture_max;
        e->heartbeat_ms = spec->heartbeat_ms;
        e->timeout_ms = spec->timeout_ms;
        e->grace_ms = spec->grace_ms;
        e->read_max = spec->read_max && spec->read_max < READ_CHUNK ? spec->read_max : READ_CHUNK;
        e->read_cap = e->read_max;
        e->rate = rate_ref(spec->rate);
        e->rate_charge_min = spec->rate_charge_min;
        e->fd[0] = e->fd[1] = e->fd[2] = -1;
        e->input = spec->input;
        e->in_fd = -1;
        e->fn = fn;
        e->data = data;
        e->last_event_ms = sh_now_ms();

        snprintf(name, sizeof(name), "exec-%u", e->id);
        if (spec->cg) {
                e->cg = spec->cg; /* made ahead or recycled (sandbox.c): no mkdir here */
                e->ooms_before = spec->cg_ooms;
        } else if (sh_cgroup_create(env->cgroot, spec->parent, name, NULL, &e->cg, err) < 0)
                goto fail;
        nprocs = sh_cgroup_open_procs(e->cg, procs, SH_EXEC_MAX_PROCS_FDS);
        if (nprocs < 0) {
                sh_error_make(err, -nprocs, "opening the exec cgroup");
                nprocs = 0;
                goto fail;
        }
        if (pipe2(out_p, O_CLOEXEC) < 0 || (!spec->merge_output && pipe2(err_p, O_CLOEXEC) < 0) ||
            (spec->input && pipe2(in_p, O_CLOEXEC) < 0) ||
            (spec->frames && pipe2(fr_p, O_CLOEXEC) < 0)) {
                sh_error_make(err, errno, "pipe");
                goto fail;
        }
        /* The daemon's end of the input is never waited on: what the pipe does not take is
         * queued (sh_exec_write). */
        if (in_p[1] >= 0 && fcntl(in_p[1], F_SETFL, O_NONBLOCK) < 0) {
                sh_error_make(err, errno, "setting up the input pipe");
                goto fail;
        }
        /* The command's own pipes: its uid's (sh_exec_spec.uid). */
        if ((in_p[0] >= 0 && fchown(in_p[0], spec->uid, spec->gid) < 0) ||
            (fr_p[1] >= 0 && fchown(fr_p[1], spec->uid, spec->gid) < 0))
                log_warn("exec-pipes-owner", e->log_id, "the pipes stay root's: %s",
                         strerror(errno));
        /* Merged, the command's stdout and stderr are one pipe: the worker dups the same end
         * onto both. */
        if (sh_worker_exec(spec->worker, e->id, spec->argv, spec->envp,
                           &(sh_worker_stdio){.out = out_p[1],
                                              .err = spec->merge_output ? out_p[1] : err_p[1],
                                              .in = in_p[0],
                                              .frames = fr_p[1],
                                              .shell = spec->shell},
                           procs, nprocs, err) < 0)
                goto fail;
        e->fd[SH_EXEC_STDOUT] = TAKE_FD(out_p[0]);
        e->fd[SH_EXEC_STDERR] = TAKE_FD(err_p[0]);
        e->fd[SH_EXEC_FRAMES] = TAKE_FD(fr_p[0]);
        e->in_fd = TAKE_FD(in_p[1]);
        for (i = 0; i < NPIPES; i++) {
                if (e->fd[i] < 0)
                        continue; /* merged: no stderr pipe; no frames */
                /* A larger pipe means fewer wake-ups per megabyte of output (best effort:
                 * the limit is /proc/sys/fs/pipe-max-size). */
                (void)fcntl(e->fd[i], F_SETPIPE_SZ, PIPE_SIZE);
                if (fcntl(e->fd[i], F_SETFL, O_NONBLOCK) < 0 ||
                    !(e->io[i] = sh_loop_add_io(env->loop, e->fd[i], EPOLLIN, on_pipe, e))) {
                        sh_error_make(err, errno, "watching the exec pipes");
                        goto fail_started;
                }
        }
        if (e->heartbeat_ms) /* 0: no heartbeat */
                e->hb_t = sh_loop_add_timer(env->loop, e->heartbeat_ms, on_heartbeat, e);
        if (e->timeout_ms &&
            !(e->timeout_t = sh_loop_add_timer(env->loop, e->timeout_ms, on_timeout, e))) {
                sh_error_make(err, ENOMEM, "arming the exec's timeout");
                goto fail_started;
        }
        e->refs = 2; /* the owner's and the consumer's */
        e->owned = true;
        r = 0;
        *ret = e;
        goto out;
fail_started:
        e->killed = true; /* exec_free kills the cgroup */
fail:
        exec_unref(e);
out:
        sh_close(out_p[0]);
        sh_close(out_p[1]);
        sh_close(err_p[0]);
        sh_close(err_p[1]);
        sh_close(in_p[0]);
        sh_close(in_p[1]);
        sh_close(fr_p[0]);
        sh_close(fr_p[1]);
        for (i = 0; i < nprocs; i++)
                close(procs[i]);
        return r;
}

void sh_exec_exit_text(const sh_exec_exit *x, const char *why, char *out, size_t size)
{
        if (why)
                snprintf(out, size, "%s", why);
        else if (x->oom)
                snprintf(out, size, "killed by the OOM killer (the sandbox's memory limit)");
        else if (x->signal)
                snprintf(out, size, "killed by signal %d (%s)", x->signal,
                         sigabbrev_np(x->signal) ? sigabbrev_np(x->signal) : "?");
        else
                snprintf(out, size, "exit status %d", x->code);
}

void sh_exec_failure_text(const sh_exec_event *ev, const char *err, size_t n, char *out,
                          size_t size)
{
        size_t i;

        while (n && (err[n - 1] == '\n' || err[n - 1] == '\r'))
                n--;
        if (ev->why) {
                snprintf(out, size, "%s", ev->why);
        } else if (n) {
                snprintf(out, size, "%.*s", (int)(n < size - 1 ? n : size - 1), err);
                for (i = 0; out[i]; i++)
                        if ((unsigned char)out[i] < 0x20)
                                out[i] = ' ';
        } else if (ev->type == SH_EXEC_EV_ERROR) {
                snprintf(out, size, "%s", ev->error.text ? ev->error.text : "the command ended");
        } else {
                snprintf(out, size, "the command could not start (exit %d)", ev->exit.code);
        }
}
