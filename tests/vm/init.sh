#!/bin/busybox sh
# /init of the cgroup-v2 test VM (tests/vm/README.md). PID 1, root, cgroup2 the only
# hierarchy (cgroup_no_v1=all). Every check prints "RESULT <name> ok|fail <detail>" to the
# console (ttyS0) and to the second serial port (ttyS1, qemu -serial file:results.txt); the
# last line there is ALLDONE. The host judges by those lines only, never by qemu's exit code.
export PATH=/usr/bin:/usr/sbin

if [ "$1" != stage2 ]; then
        # Stage 1, on the initramfs (rootfs). pivot_root(2) refuses to move rootfs away, and
        # every sandbox pivots, so move everything onto a tmpfs and switch_root there.
        /usr/bin/busybox mount -t devtmpfs devtmpfs /dev
        exec </dev/console >/dev/console 2>&1
        mount -t tmpfs -o mode=0755,size=600m tmpfs /newroot || echo "stage1: mount tmpfs failed"
        for e in /*; do
                case "$e" in /newroot | /proc | /sys | /dev) ;; *) cp -a "$e" /newroot/ ;; esac
        done
        mkdir -p /newroot/proc /newroot/sys /newroot/dev
        mount --move /dev /newroot/dev
        exec switch_root /newroot /init stage2
        echo "stage1: switch_root failed"
        exec sh
fi

[ -c /dev/null ] || mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=0755 tmpfs /run
# as systemd mounts it on a v2 node
mount -t cgroup2 -o nsdelegate,memory_recursiveprot cgroup2 /sys/fs/cgroup ||
        mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
hostname -F /etc/hostname

OUT=/dev/null
if [ -c /dev/ttyS1 ]; then stty -F /dev/ttyS1 raw -echo 2>/dev/null; OUT=/dev/ttyS1; fi
r() { echo "RESULT $*"; echo "RESULT $*" >>$OUT; }
# copy the RESULT lines of a command's output to the results port, everything to the console
results() { while IFS= read -r l; do echo "$l"; case "$l" in RESULT\ *) echo "$l" >>$OUT ;; esac; done; }
CG=/sys/fs/cgroup
# tap_results TAP TCASE PREFIX: a Check TAP log's tests of the TCASE cases (a sed pattern), one
# RESULT line each, named PREFIX.<test>
tap_results() {
        [ -f "$1" ] || return 0
        cat "$1"
        sed -n "s/^\(not ok\|ok\) [0-9]* - [^:]*:$2:\([A-Za-z0-9_]*\):\(.*\)\$/\1|\2|\3/p" "$1" |
                while IFS='|' read -r st name msg; do
                        [ "$st" = ok ] && s=ok || s=fail
                        r "$3.$name $s$msg"
                done
}

echo "=== kernel $(uname -r), cmdline: $(cat /proc/cmdline)"
grep cgroup /proc/mounts
n1=$(grep -c ' cgroup ' /proc/mounts)
n2=$(grep -c ' cgroup2 ' /proc/mounts)
r "vm_cgroup2_only $([ "$n1" = 0 ] && [ "$n2" = 1 ] && echo ok || echo fail) v1=$n1 v2=$n2 kernel=$(uname -r) controllers=[$(cat $CG/cgroup.controllers)]"

# 1. the Check test of the cgroup layer, in the root cgroup (its Check runner forks each
#    test and stays in its own cgroup, which v2 allows only at the root: no internal
#    processes below it). TAP lines become one RESULT per test.
echo "=== test_cgroup_live"
rm -f /tmp/live.tap
CK_TAP_LOG_FILE_NAME=/tmp/live.tap timeout -s KILL 150 /opt/sh/test_cgroup_live </dev/null >/tmp/live.out 2>&1
rc=$?
cat /tmp/live.out
tap_results /tmp/live.tap live cgroup_live
mode=$(sed -n 's/^cgroup mode: \([a-z0-9]*\),.*/\1/p' /tmp/live.out)
r "cgroup_live $([ $rc = 0 ] && [ "$mode" = v2 ] && echo ok || echo fail) rc=$rc mode=${mode:-?} $(grep -m1 '^[0-9]*%: Checks' /tmp/live.out)"

# 1b. the tool unpacker's confinement (its cgroups tools and tools/u<n> with limits below a
#     subtree, on v2), also from the root cgroup for the same reason.
echo "=== test_unpack_jail"
rm -f /tmp/jail.tap
CK_TAP_LOG_FILE_NAME=/tmp/jail.tap timeout -s KILL 150 /opt/sh/test_unpack_jail </dev/null >/tmp/jail.out 2>&1
rc=$?
cat /tmp/jail.out
tap_results /tmp/jail.tap jail unpack_jail
r "unpack_jail $([ $rc = 0 ] && echo ok || echo fail) rc=$rc $(grep -m1 '^[0-9]*%: Checks' /tmp/jail.out)"

# 2. The real daemon in a cgroup of its own (as a systemd service or a pod would give it),
#    driven over HTTP by the e2e client, which prints its own RESULT lines.
echo "=== e2e: sandbox-host on cgroup v2"
mkdir -p $CG/sandbox-host.service /var/lib/archive
timeout -s KILL 200 /usr/bin/vmtest e2e /opt/sh/sandbox-host $CG/sandbox-host.service 2>&1 | results

# 2b. Volumes (issue 25): the daemon again, in a cgroup of its own, with an allowed host prefix
#     and a named volumes' root on the VM's file system; /v1 sandboxes mount them (no module is
#     loaded yet: no disk limit, no network, as in the e2e part).
echo "=== volumes: sandbox-host with host and named volumes"
mkdir -p $CG/sandbox-host-volumes.service
timeout -s KILL 150 /usr/bin/vmtest volumes /opt/sh/sandbox-host $CG/sandbox-host-volumes.service 2>&1 | results

# 3. Project quota (issue 10, item 6): the daemon again, its state root on an ext4 disk with
#    the quota and project features mounted prjquota, SANDBOX_HOST_DISK_MAX set; vmtest
#    performs each way of taking space past it from inside a sandbox.
echo "=== quota: sandbox-host on a project-quota state root"
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk quota_tree quota_v2 libcrc32c xfs; do
        insmod /usr/lib/modules/$m.ko || echo "insmod $m failed"
done
# mount_and_run PART FSTYPE DEV: DEV mounted prjquota at /mnt/PART, then `vmtest PART` with the
# daemon in a cgroup of its own and its state root there (its RESULT lines to the host)
mount_and_run() {
        part=$1 fstype=$2 dev=$3 mnt=/mnt/$1
        for i in $(seq 50); do [ -b "$dev" ] && break; sleep 0.1; done
        mkdir -p $mnt
        if mount -t "$fstype" -o prjquota "$dev" $mnt; then
                grep $mnt /proc/mounts
                r "vm_${part}_mount ok $(grep $mnt /proc/mounts)"
                mkdir -p $CG/sandbox-host-$part.service
                timeout -s KILL 200 /usr/bin/vmtest $part /opt/sh/sandbox-host $CG/sandbox-host-$part.service $mnt 2>&1 | results
                umount $mnt || echo "umount $mnt failed"
        else
                r "vm_${part}_mount fail mount -t $fstype -o prjquota $dev: $(dmesg | tail -3)"
        fi
}
mount_and_run quota ext4 /dev/vda

# 4. The embedded disk default on XFS (issue 20, finding 14): the daemon with no disk setting
#    at all, its state root on the second disk, XFS mounted prjquota as the Kubernetes
#    manifest's state volume is: auto finds project quota and holds each workspace to a
#    quarter of the volume.
echo "=== xfs: sandbox-host with its defaults on an XFS prjquota state root"
mount_and_run xfs xfs /dev/vdb

# 5. A sandbox whose root is an overlay of image layers (issue 22): the wire test on real
#    sandboxes from the root cgroup, as test_cgroup_live; then its project-quota part with the
#    state root on the quota disk again (the upper charged to the workspace's project). The
#    overlay and loop modules only now: the e2e part's DISK_MAX=auto must not find loop devices.
echo "=== test_overlay_root"
insmod /usr/lib/modules/overlay.ko || echo "insmod overlay failed"
insmod /usr/lib/modules/loop.ko || echo "insmod loop failed"
# overlay_run TAG ENV...: the suite with ENV, one RESULT per test and one for the run
overlay_run() {
        tag=$1
        shift
        rm -f /tmp/ovl.tap
        env CK_TAP_LOG_FILE_NAME=/tmp/ovl.tap "$@" timeout -s KILL 200 /opt/sh/test_overlay_root </dev/null >/tmp/ovl.out 2>&1
        rc=$?
        cat /tmp/ovl.out
        tap_results /tmp/ovl.tap "[a-z]*" overlay_root
        r "overlay_root$tag $([ $rc = 0 ] && echo ok || echo fail) rc=$rc $(grep -m1 '^[0-9]*%: Checks' /tmp/ovl.out)"
}
overlay_run "" TMPDIR=/tmp
mkdir -p /mnt/ovl
if mount -t ext4 -o prjquota /dev/vda /mnt/ovl; then
        overlay_run _project TMPDIR=/mnt/ovl SH_TEST_PROJECT_QUOTA=1
        umount /mnt/ovl || echo "umount /mnt/ovl failed"
else
        r "overlay_root_project fail mount -t ext4 -o prjquota /dev/vda: $(dmesg | tail -3)"
fi

# 6. Egress (issue 24): the daemon with its sandboxes' network on, in the VM's own network
#    namespace (the pod's): nftables and veth only now, so that no earlier part's daemon finds
#    them (those run without network, as before). The modules in dependency order (modinfo -F
#    depends); libcrc32c is loaded already (XFS).
echo "=== egress: sandbox-host with network under a policy"
mods=""
for m in nfnetlink libcrc32c nf_tables nf_defrag_ipv4 nf_defrag_ipv6 nf_conntrack nf_conncount nf_nat nft_ct nft_connlimit nft_limit nft_masq nft_chain_nat veth; do
        [ -d /sys/module/$m ] || insmod /usr/lib/modules/$m.ko || mods="$mods $m"
done
r "vm_egress_modules $([ -z "$mods" ] && echo ok || echo fail)${mods:+ insmod failed:$mods}"
mkdir -p $CG/sandbox-host-egress.service
timeout -s KILL 120 /usr/bin/vmtest egress /opt/sh/sandbox-host $CG/sandbox-host-egress.service 2>&1 | results

echo "=== cgroup tree at the end:"
find $CG -type d | sed "s|^$CG||" | head -50
echo "ALLDONE"
echo "ALLDONE" >>$OUT
sync
poweroff -f
