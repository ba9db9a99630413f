"""cgroup v2 tier: boot a stock Debian cloud kernel under qemu (TCG) with cgroup2 as its only
hierarchy and run, inside it, test_cgroup_live (the Check test of the cgroup layer),
test_unpack_jail (the tool unpacker's confinement and cgroups) and an end-to-end test of the
real daemon (tests/vm/vmtest.c). See tests/vm/README.md.

The VM boots once per module (about 45 s); every RESULT line it writes to its second serial
port becomes one test here. The run is judged by those lines and the ALLDONE marker, never by
qemu's exit code (a kernel panic also exits 0).

Binaries come from $SH_VM_BUILD, default <repo>/build (cmake); the kernel is downloaded once
(apt-get download) and cached in $SH_VM_BUILD/vm/, with the console log and results of the
last run. Skipped only when qemu-system-x86_64 cannot be installed or run.

Run: /usr/bin/python3 -m pytest tests/vm
"""
import os
import re
import shutil
import subprocess
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.abspath(os.environ.get("SH_VM_BUILD", os.path.join(REPO, "build")))
VMDIR = os.path.join(BUILD, "vm")
QEMU_TIMEOUT = 300  # seconds, around qemu (a hung guest)
PACKAGES = ["qemu-system-x86", "cpio", "busybox-static", "xfsprogs"]

LIVE_TESTS = [
    "root_open_places_subtree_below_own_cgroup",
    "create_writes_limits",
    "attach_moves_process",
    "memory_limit_oom_kills",
    "pids_limit_stops_fork_loop",
    "kill_reaches_every_descendant",
    "freeze_and_thaw",
    "freeze_procs_spares_helpers",
    "kill_procs_spares_helpers",
    "second_open_removes_leftovers",
]
JAIL_TESTS = [
    "jail_has_own_namespaces_and_no_network",
    "jail_root_holds_only_the_staging_directory",
    "jail_is_unprivileged_and_filtered",
    "jail_runs_in_its_own_limited_cgroup",
    "jail_leaves_nothing_alive_at_install",
    "at_most_parallel_unpackers_at_once",
    "store_free_kills_running_unpackers",
]
E2E_CHECKS = [
    "e2e_daemon_start",
    "e2e_daemon_in_leaf",
    "e2e_healthz_v2",
    "e2e_create",
    "e2e_sandbox_limits",
    "e2e_exec_exit_codes",
    "e2e_exec_output",
    "e2e_exec_own_cgroup",
    "e2e_pid1_init",
    "e2e_exec_cgroup_outside",
    "e2e_disconnect_kills",
    "e2e_memory_oom_kill",
    "e2e_memory_oom_pipeline",
    "e2e_healthz_after_oom",
    "e2e_pids_limit",
    "e2e_healthz_after_fork_loop",
    "e2e_healthz_during_fork_bomb",
    "e2e_exec_cgroups_removed",
    "e2e_persist",
    "e2e_persist_thaws",
    "e2e_persist_helper_cgroup_removed",
    "os_pause_v2_freezes",
    "os_pause_v2_snapshot_keeps_frozen",
    "os_resume_v2_thaws",
    "os_pause_v2_delete_kills",
    "e2e_delete",
    "e2e_exec_after_delete_404",
    "e2e_sigterm_exit_0",
    "e2e_sigterm_cleans_up",
    "e2e_crash_restart_cleans_leftovers",
    "e2e_crash_restart_sigterm",
]
# Project quota (issue 10, item 6): the daemon on an ext4 disk mounted prjquota.
QUOTA_CHECKS = [
    "vm_quota_mount",
    "quota_daemon_start",
    "quota_healthz_project",
    "quota_fill",
    "quota_host_volume",
    "quota_workspace_project_id",
    "quota_neighbour_writes",
    "quota_fallocate",
    "quota_unlinked_file",
    "quota_symlinks",
    "quota_inodes",
    "quota_slot_reused_at_once",
    "quota_upload_413",
    "quota_mountinfo_no_id",
    "quota_projid_change_refused",
    "quota_projinherit_clear_refused",
    "quota_named_volume_storage_held",
    "quota_named_volume_project_id",
    "quota_named_volume_shared_limit",
    "quota_named_volume_id_reused",
    "quota_delete_frees",
    "quota_sigterm_exit_0",
]
# The embedded disk default (issue 20, finding 14): the daemon with no disk setting on an XFS
# disk mounted prjquota.
XFS_CHECKS = [
    "vm_xfs_mount",
    "xfs_daemon_start",
    "xfs_healthz_project",
    "xfs_fill",
    "xfs_host_volume",
    "xfs_workspace_project_id",
    "xfs_upload_413",
    "xfs_fallocate",
    "xfs_unlinked_file",
    "xfs_delete_frees",
    "xfs_sigterm_exit_0",
]
# A sandbox whose root is an overlay of image layers (issue 22): the wire test in the VM
# (tmpfs, loop and no limit; Linux 6.1 has no lowerdir+: 101 layers are refused there), then its
# project-quota part on the ext4 disk.
OVERLAY_TESTS = [
    "the_root_shows_the_layers_merged_and_whiteouts_hide",
    "a_layers_redirect_and_metacopy_xattrs_are_not_followed",
    "the_sandbox_uid_writes_where_the_image_lets_it_never_where_root_owns",
    "two_sandboxes_of_one_image_do_not_see_each_others_writes",
    "the_images_env_is_the_base_and_its_workdir_is_kept",
    "the_pin_is_held_for_the_sandboxs_life",
    "a_plan_with_a_lower_outside_the_layers_is_refused_and_unpinned",
    "more_layers_than_a_page_of_mount_options_holds_are_mounted",
    "no_limit_the_upper_goes_with_the_sandbox",
    "tmpfs_the_upper_counts_against_the_disk_limit_and_goes_with_the_sandbox",
    "loop_the_upper_counts_against_the_disk_limit_and_goes_with_the_sandbox",
    "project_the_upper_counts_against_the_disk_limit_and_goes_with_the_sandbox",
]
OVERLAY_CHECKS = ["overlay_root." + t for t in OVERLAY_TESTS] + ["overlay_root",
                                                                 "overlay_root_project"]
# Egress (issue 24): the daemon with its sandboxes' network on, in the VM's own network
# namespace; a /v1 sandbox's CIDR policy against listeners in a namespace the test makes.
EGRESS_CHECKS = [
    "vm_egress_modules",
    "egress_internet",
    "egress_daemon_start",
    "egress_healthz_supported",
    "egress_create_link",
    "egress_allowed_cidr_reached",
    "egress_other_address_not_reached",
    "egress_delete_removes_link",
    "egress_sigterm_exit_0",
]
# Volumes (issue 25): /v1 sandboxes with host and named volumes, the daemon on cgroup v2.
VOLUMES_CHECKS = [
    "volumes_daemon_start",
    "volumes_host_read_only_marker_read_write_refused",
    "volumes_host_read_write_shows_on_the_vm",
    "volumes_named_volume_shared_by_two_sandboxes",
    "volumes_commands_in_own_v2_cgroups",
    "volumes_delete_on_termination_removes_the_volume",
    "volumes_sigterm_exit_0",
]
EXPECTED = (["vm_cgroup2_only"] + ["cgroup_live." + t for t in LIVE_TESTS] + ["cgroup_live"]
            + ["unpack_jail." + t for t in JAIL_TESTS] + ["unpack_jail"] + E2E_CHECKS
            + VOLUMES_CHECKS + QUOTA_CHECKS + XFS_CHECKS + OVERLAY_CHECKS + EGRESS_CHECKS)

RESULT_RE = re.compile(r"^RESULT (\S+) (ok|fail)(?: (.*))?$")


def _have_qemu():
    q = shutil.which("qemu-system-x86_64")
    return q and shutil.which("cpio") and os.path.exists("/bin/busybox") and \
        (shutil.which("mkfs.xfs") or os.path.exists("/usr/sbin/mkfs.xfs"))


def _install_packages():
    """Install what the VM needs (CI runs as root); returns a reason string on failure."""
    if _have_qemu():
        return None
    if os.geteuid() != 0:
        return "not root, cannot apt-get install " + " ".join(PACKAGES)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        subprocess.run(["apt-get", "update", "-q"], env=env, timeout=300,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        p = subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends"]
                           + PACKAGES, env=env, timeout=600, capture_output=True, text=True)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "apt-get install failed: %s" % e
    if p.returncode != 0 or not _have_qemu():
        return "apt-get install %s failed: %s" % (" ".join(PACKAGES), p.stderr.strip()[-500:])
    return None


def _tail(path, n=60):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return "(no %s)" % path


class VmRun:
    def __init__(self, results, alldone, console_path, results_path, seconds):
        self.results = results  # name -> (status, detail)
        self.alldone = alldone
        self.console_path = console_path
        self.results_path = results_path
        self.seconds = seconds

    def context(self):
        return "VM run %.1f s; console %s, results %s; console tail:\n%s" % (
            self.seconds, self.console_path, self.results_path, _tail(self.console_path))


@pytest.fixture(scope="module")
def vm():
    why = _install_packages()
    if why:
        pytest.skip("qemu-system-x86_64 unavailable: " + why)
    try:
        v = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, text=True,
                           timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip("qemu-system-x86_64 cannot run: %s" % e)
    if v.returncode != 0:
        pytest.skip("qemu-system-x86_64 cannot run: %s" % v.stderr.strip()[-300:])

    for f in ("sandbox-host", "tests/test_cgroup_live", "tests/test_unpack_jail"):
        if not os.access(os.path.join(BUILD, f), os.X_OK):
            pytest.fail("%s/%s is missing: build the project first (scripts/setup.sh)"
                        % (BUILD, f), pytrace=False)
    b = subprocess.run(["bash", os.path.join(HERE, "build.sh"), BUILD], capture_output=True,
                       text=True, timeout=900)
    if b.returncode != 0:
        pytest.fail("tests/vm/build.sh failed (%d):\n%s\n%s"
                    % (b.returncode, b.stdout[-2000:], b.stderr[-4000:]), pytrace=False)

    console = os.path.join(VMDIR, "console.txt")
    results = os.path.join(VMDIR, "results.txt")
    for p in (console, results):
        if os.path.exists(p):
            os.unlink(p)
    cmd = ["timeout", "-s", "KILL", str(QEMU_TIMEOUT), "qemu-system-x86_64",
           "-accel", "tcg", "-cpu", "max", "-smp", "2", "-m", "1G",
           "-nographic", "-no-reboot", "-nodefaults",
           "-serial", "file:" + console, "-serial", "file:" + results,
           "-drive", "file=%s,format=raw,if=virtio,cache=unsafe" % os.path.join(VMDIR, "quota.img"),
           "-drive", "file=%s,format=raw,if=virtio,cache=unsafe" % os.path.join(VMDIR, "xfs.img"),
           "-kernel", os.path.join(VMDIR, "vmlinuz"),
           "-initrd", os.path.join(VMDIR, "initrd.gz"),
           "-append", "console=ttyS0 quiet panic=-1 cgroup_no_v1=all"]
    t0 = time.monotonic()
    # qemu's exit code says nothing (a panic exits 0 too): only the markers count
    q = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=QEMU_TIMEOUT + 60)
    seconds = time.monotonic() - t0
    if q.stdout or q.stderr:
        with open(os.path.join(VMDIR, "qemu.txt"), "w") as f:
            f.write("rc=%d\n%s\n%s" % (q.returncode, q.stdout, q.stderr))
    parsed, alldone = {}, False
    try:
        with open(results, "rb") as f:
            text = f.read().decode("utf-8", "replace").replace("\r", "")
    except OSError:
        text = ""
    for line in text.split("\n"):
        if line.strip() == "ALLDONE":
            alldone = True
        m = RESULT_RE.match(line)
        if m:
            name, status, detail = m.group(1), m.group(2), m.group(3) or ""
            # a repeated name counts as failed if any of its lines failed
            if parsed.get(name, ("ok",))[0] != "fail":
                parsed[name] = (status, detail)
    return VmRun(parsed, alldone, console, results, seconds)


def test_vm_alldone(vm):
    assert vm.alldone, "no ALLDONE marker (guest hung, panicked or was killed)\n" + vm.context()


@pytest.mark.parametrize("name", EXPECTED)
def test_vm_check(vm, name):
    assert name in vm.results, "no RESULT %s line\n%s" % (name, vm.context())
    status, detail = vm.results[name]
    assert status == "ok", "RESULT %s fail %s\n(console: %s)" % (name, detail, vm.console_path)


def test_vm_no_other_failures(vm):
    extra = {n: d for n, (s, d) in vm.results.items() if s != "ok" and n not in EXPECTED}
    assert not extra, "unexpected failed checks: %r" % extra
