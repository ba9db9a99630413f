#!/bin/sh
# sandbox-host container entrypoint: make the cgroup file system writable, then become the
# daemon (exec, so the daemon is PID 1 of the container, alone in the container's cgroup,
# and receives the kubelet's SIGTERM itself).
#
# Why: a non-privileged Kubernetes container gets /sys/fs/cgroup mounted read-only, but the
# daemon creates one cgroup per sandbox below its own (docs/deployment.md, "cgroup node
# requirements"). With CAP_SYS_ADMIN (which the isolation needs anyway) a remount makes
# the container's own view writable; it does not give access to any other cgroup: under
# cgroup v2 the container sees only its own subtree (private cgroup namespace), under v1
# each controller mount's root is the container's own cgroup directory.
#
# A remount that fails is reported and not fatal: the daemon then stops at start with its
# own precise message naming the cgroup it could not write.
set -u

remount_rw() {
        # $1 = mount point. A plain remount changes the superblock flag too (cgroup v2 mounts
        # made read-only by the runtime need that); a bind remount changes only this mount
        # point's flag (v1 controller bind mounts).
        mount -o remount,rw "$1" 2>/dev/null || mount -o remount,bind,rw "$1" 2>/dev/null ||
                echo "sandbox-host-entrypoint: cannot remount $1 read-write" >&2
}

# /proc/self/mounts: device mountpoint fstype options ...; octal escapes are not expected in
# cgroup mount points.
awk '($3 == "cgroup" || $3 == "cgroup2") && $4 ~ /(^|,)ro(,|$)/ { print $2 }' /proc/self/mounts |
        while read -r mp; do
                remount_rw "$mp"
        done

exec /usr/local/bin/sandbox-host "$@"
