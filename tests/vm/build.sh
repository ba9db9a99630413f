#!/usr/bin/env bash
# Build everything the cgroup-v2 VM test boots (tests/vm/README.md):
#   usage: tests/vm/build.sh [BUILD_DIR]        (default: <repo>/build, built by cmake beforehand)
# Output in BUILD_DIR/vm/: vmlinuz (a stock Debian cloud kernel, downloaded once and cached
# there, never committed) and modules/ (from the same package), vmtest (the static e2e client
# and in-sandbox helper), initrd.gz, quota.img and xfs.img (the project-quota disks, ext4 and
# XFS, made anew each run). Needs: apt-get (first run only, for the kernel), gcc with a static
# libc, cpio, gzip, busybox-static (/bin/busybox), mkfs.ext4 (e2fsprogs), mkfs.xfs (xfsprogs). Takes about a second when the kernel
# is cached.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=$(cd "${1:-$REPO/build}" && pwd)
VM="$BUILD/vm"
mkdir -p "$VM"

DAEMON="$BUILD/sandbox-host"
LIVE="$BUILD/tests/test_cgroup_live"
JAIL="$BUILD/tests/test_unpack_jail"
OVL="$BUILD/tests/test_overlay_root"
for f in "$DAEMON" "$LIVE" "$JAIL" "$OVL"; do
        [ -x "$f" ] || { echo "build.sh: $f is missing: build the project first" >&2; exit 1; }
done
BUSYBOX=/bin/busybox # busybox-static's; a dynamic busybox would need its libraries too
if [ ! -x "$BUSYBOX" ] || ldd "$BUSYBOX" >/dev/null 2>&1; then
        echo "build.sh: $BUSYBOX is missing or not static: install busybox-static" >&2
        exit 1
fi

# 1. The kernel: linux-image-cloud-amd64 (a meta package) names the versioned image package.
#    Cached: a rerun reuses it; it is refreshed only when the archive moves to a new version.
#    With it, the modules the project-quota state roots need (virtio-blk for their disks, the
#    quota format of ext4's quota feature, XFS and its crc32c library), from the same package.
#    And what the sandboxes' network needs (issue 24): nftables with the expressions of the
#    daemon's table (src/egress/nft.c: ct, ct count, the DNS meter's limit, masquerade in a nat chain) and veth.
MODS="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk
quota_tree quota_v2 libcrc32c xfs overlay loop
nfnetlink nf_tables nf_defrag_ipv4 nf_defrag_ipv6 nf_conntrack nf_conncount nf_nat nft_ct
nft_connlimit nft_limit nft_masq nft_chain_nat veth"
have_mods=1
for m in $MODS; do [ -s "$VM/modules/$m.ko" ] || have_mods=0; done
if [ ! -s "$VM/vmlinuz" ] || [ "$have_mods" = 0 ]; then
        kpkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
                awk '/Depends: linux-image-[0-9]/{print $2; exit}')
        if [ -z "$kpkg" ]; then
                apt-get update -q >/dev/null
                kpkg=$(apt-cache depends linux-image-cloud-amd64 |
                        awk '/Depends: linux-image-[0-9]/{print $2; exit}')
        fi
        [ -n "$kpkg" ] || { echo "build.sh: cannot resolve linux-image-cloud-amd64" >&2; exit 1; }
        tmp=$(mktemp -d "$VM/kernel.XXXXXX")
        trap 'rm -rf "$tmp"' EXIT
        (cd "$tmp" && apt-get download -q "$kpkg" >/dev/null 2>&1 ||
                { chmod 777 "$tmp" && apt-get download -q "$kpkg"; })
        dpkg -x "$tmp/${kpkg}"_*.deb "$tmp/x"
        mkdir -p "$VM/modules"
        for m in $MODS; do
                f=$(find "$tmp/x/lib/modules" -name "$m.ko*" | head -1)
                [ -n "$f" ] || { echo "build.sh: module $m not in $kpkg" >&2; exit 1; }
                case "$f" in
                *.ko.xz) xz -dc "$f" > "$VM/modules/$m.ko" ;;
                *.ko.zst) zstd -qdc "$f" > "$VM/modules/$m.ko" ;;
                *) cp "$f" "$VM/modules/$m.ko" ;;
                esac
        done
        cp "$tmp"/x/boot/vmlinuz-* "$VM/vmlinuz.new"
        echo "$kpkg" > "$VM/kernel-package"
        mv "$VM/vmlinuz.new" "$VM/vmlinuz"
        rm -rf "$tmp"
        trap - EXIT
fi

# 2. The e2e client, which is also the helper that runs inside the sandboxes: static, so it
#    needs nothing from the VM's /lib.
gcc -std=gnu17 -static -O2 -D_FORTIFY_SOURCE=2 -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wvla \
        -Wmissing-prototypes -Wstrict-prototypes -Wundef -o "$VM/vmtest.new" "$HERE/vmtest.c"
mv "$VM/vmtest.new" "$VM/vmtest"

# 3. The root file system: merged /usr like Debian's (/bin, /sbin, /lib, /lib64 are links),
#    busybox for every command, the daemon and the Check tests with their shared libraries.
#    The daemon binds the VM's /usr, /bin, /sbin, /lib*, /etc into each sandbox.
R="$VM/root"
rm -rf "$R"
mkdir -p "$R"/{usr/bin,usr/sbin,usr/lib/x86_64-linux-gnu,usr/lib64,etc,proc,sys,dev,tmp,run,var/lib,opt/sh,newroot,root}
ln -s usr/bin "$R/bin"
ln -s usr/sbin "$R/sbin"
ln -s usr/lib "$R/lib"
ln -s usr/lib64 "$R/lib64"
cp "$BUSYBOX" "$R/usr/bin/busybox"
for a in $("$BUSYBOX" --list); do
        [ "$a" = busybox ] || ln -sf busybox "$R/usr/bin/$a"
done
cp "$VM/vmtest" "$R/usr/bin/vmtest"
mkdir -p "$R/usr/lib/modules"
for m in $MODS; do cp "$VM/modules/$m.ko" "$R/usr/lib/modules/"; done
cp "$DAEMON" "$R/opt/sh/sandbox-host"
cp "$LIVE" "$R/opt/sh/test_cgroup_live"
cp "$JAIL" "$R/opt/sh/test_unpack_jail"
cp "$OVL" "$R/opt/sh/test_overlay_root"
# the tool unpacker loads the C.UTF-8 locale (glibc's, from libc-bin) before it confines itself
mkdir -p "$R/usr/lib/locale"
cp -a /usr/lib/locale/C.utf8 "$R/usr/lib/locale/"
# rsync for the persist checks (the daemon looks for it in /usr/bin)
RSYNC=/usr/bin/rsync
[ -x "$RSYNC" ] || { echo "build.sh: $RSYNC is needed (apt-get install rsync)" >&2; exit 1; }
rm -f "$R/usr/bin/rsync"
cp "$RSYNC" "$R/usr/bin/rsync"
# mke2fs for the overlay root's loop part (the disk limit's template image; the daemon looks in
# /usr/sbin). The loop module is loaded only for that part, so no earlier part finds loop.
MKE2FS=/usr/sbin/mke2fs
[ -x "$MKE2FS" ] || { echo "build.sh: $MKE2FS is needed (apt-get install e2fsprogs)" >&2; exit 1; }
cp "$MKE2FS" "$R/usr/sbin/mke2fs"
# shared libraries of the binaries (resolved on this machine, copied under the VM's own
# /usr/lib/x86_64-linux-gnu, the dynamic loader under /usr/lib64 = /lib64)
ldd "$DAEMON" "$LIVE" "$JAIL" "$OVL" "$RSYNC" "$MKE2FS" | awk '$2 == "=>" && $3 ~ /^\//{print $3} $1 ~ /^\/.*ld-linux/{print $1}' | sort -u |
        while read -r lib; do
                case "$lib" in
                */ld-linux-x86-64.so.2) cp -L "$lib" "$R/usr/lib64/ld-linux-x86-64.so.2" ;;
                *) cp -L "$lib" "$R/usr/lib/x86_64-linux-gnu/" ;;
                esac
        done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$R/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$R/etc/group"
echo sh-vm > "$R/etc/hostname"
cp "$HERE/init.sh" "$R/init"
chmod 755 "$R/init" "$R/usr/bin/vmtest" "$R/opt/sh/"*
(cd "$R" && find . | cpio -o -H newc -R 0:0 --quiet | gzip -1) > "$VM/initrd.gz.new"
mv "$VM/initrd.gz.new" "$VM/initrd.gz"
rm -rf "$R"

# 4. The project-quota state root, fresh for every boot: a sparse raw ext4 image with the
#    quota and project features, attached as a virtio disk and mounted prjquota in the VM.
rm -f "$VM/quota.img"
truncate -s 256M "$VM/quota.img"
mkfs.ext4 -q -F -b 4096 -O quota,project -E root_owner=0:0 "$VM/quota.img"
# 5. The XFS state root (issue 20, finding 14: the Kubernetes manifest's state volume is XFS
#    mounted pquota), also fresh for every boot: 320 MiB, the least mkfs.xfs makes.
MKFS_XFS=$(command -v mkfs.xfs || echo /usr/sbin/mkfs.xfs)
[ -x "$MKFS_XFS" ] || { echo "build.sh: mkfs.xfs is needed (apt-get install xfsprogs)" >&2; exit 1; }
rm -f "$VM/xfs.img"
truncate -s 320M "$VM/xfs.img"
"$MKFS_XFS" -q -f "$VM/xfs.img"
echo "build.sh: $VM/initrd.gz ($(du -k "$VM/initrd.gz" | cut -f1) KiB), kernel $(cat "$VM/kernel-package" 2>/dev/null || echo cached)"
