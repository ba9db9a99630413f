/* unit.h: what the unit tests share: a temporary directory removed whatever a test left in
 * it, paths below it, file and clock helpers, a bounded wait for a child, and the runner. */
#pragma once

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define UT_SKIP 77 /* ctest's SKIP_RETURN_CODE (tests/CMakeLists.txt) */

/* A fresh directory "$TMPDIR/sh-test-<tag>-XXXXXX" (/tmp when TMPDIR is unset) in buf.
 * Returns 0, or -1 with errno. */
int ut_mkdtemp(char *buf, size_t size, const char *tag);

/* Remove the tree at `path`, whatever it holds: any depth (a chain deeper than PATH_MAX, on
 * which nftw gives up), any mode, without crossing into another filesystem. Also with a
 * lowered RLIMIT_NOFILE. Returns 0, or -1 when something is left. */
int ut_rm_rf(const char *path);

/* The layout of the file-system tests: a fresh directory below `base`, its name in tdir,
 * holding ws/ (the root the code under test works in) and outside/secret (a host file it
 * must never reach). Returns an O_PATH fd of ws/; fails the test on error. */
int ut_workspace(const char *base, char *tdir, size_t size);

/* "dir/<fmt ...>" in one of 8 rotating static buffers, so that several can be used in one
 * call. */
const char *ut_path(const char *dir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Create or truncate `path` and write `content` into it; fails the test on error. */
void ut_write_file(const char *path, const char *content);

uint64_t ut_now_ms(void); /* CLOCK_MONOTONIC in milliseconds */
void ut_sleep_ms(unsigned ms);

/* waitpid(pid) within `ms`: its status, or -1 when it did not end in time (it is then
 * SIGKILLed, by its pid, and reaped). */
int ut_wait_pid(pid_t pid, unsigned ms);

/* How many fds this process has open now (/proc/self/fd, less the one reading it). */
int ut_count_fds(void);

/* 0 as root; otherwise prints "SKIP: <why>" and returns UT_SKIP (main returns it). */
int ut_need_root(const char *why);

/* Whether this kernel takes a syscall through the i386 ABI (int $0x80 from a 64-bit
 * process): IA32 emulation may be off (ia32_emulation=0, or a kernel built or virtualised
 * without it), and int $0x80 then raises SIGSEGV before any seccomp filter sees it. Asked in a
 * child; false on any other architecture. */
bool ut_ia32_available(void);

/* Run the suite (in fork mode unless CK_FORK=no says otherwise); EXIT_SUCCESS when no test
 * failed. ut_run_forked forks whatever CK_FORK says: for tests that start processes or
 * make cgroups, which only a fork's end reliably cleans up. */
int ut_run(Suite *s);
int ut_run_forked(Suite *s);
