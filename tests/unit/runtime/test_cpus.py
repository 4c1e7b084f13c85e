"""usable_cpus: the affinity, capped by the cgroup CPU quota rounded up, read from a fake /proc and /sys."""

from __future__ import annotations

from pathlib import Path

import pytest

from kustomize_controller.runtime.cpus import AFFINITY, CGROUP_QUOTA, UsableCpus, usable_cpus

V2_MOUNT = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
V1_MOUNTS = (
    "31 23 0:28 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:9 - cgroup cgroup rw,cpu,cpuacct\n"
    "33 31 0:30 / /sys/fs/cgroup/memory rw,nosuid shared:10 - cgroup cgroup rw,memory\n"
)


def _write(root: Path, path: str, text: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def _v2(root: Path, cgroup: str = "/", limits: dict[str, str] | None = None, *, mount: str = V2_MOUNT) -> None:
    _write(root, "/proc/self/cgroup", f"0::{cgroup}\n")
    _write(root, "/proc/self/mountinfo", "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n" + mount)
    for directory, cpu_max in (limits or {}).items():
        _write(root, f"{directory}/cpu.max", cpu_max)


def _v1(root: Path, cgroup: str, limits: dict[str, tuple[str, str]]) -> None:
    _write(root, "/proc/self/cgroup", f"12:memory:{cgroup}\n11:cpu,cpuacct:{cgroup}\n0::/\n")
    _write(root, "/proc/self/mountinfo", V1_MOUNTS)
    for directory, (quota, period) in limits.items():
        _write(root, f"{directory}/cpu.cfs_quota_us", quota + "\n")
        _write(root, f"{directory}/cpu.cfs_period_us", period + "\n")


@pytest.mark.parametrize(
    ("cpu_max", "online", "count", "source"),
    [
        ("200000 100000\n", 8, 2, CGROUP_QUOTA),
        ("50000 100000\n", 8, 1, CGROUP_QUOTA),  # half a CPU: rounded up, never 0
        ("150000 100000\n", 8, 2, CGROUP_QUOTA),  # 1.5 CPUs: rounded up
        ("100000 100000\n", 8, 1, CGROUP_QUOTA),
        ("800000 100000\n", 2, 2, AFFINITY),  # a quota above the affinity does not add CPUs
        ("200000 100000\n", 2, 2, AFFINITY),  # equal: the affinity is the answer, the quota still reported
        ("max 100000\n", 4, 4, AFFINITY),
    ],
)
def test_v2_quota_caps_the_affinity(tmp_path: Path, cpu_max: str, online: int, count: int, source: str) -> None:
    _v2(tmp_path, "/", {"/sys/fs/cgroup": cpu_max})
    cpus = usable_cpus(root=tmp_path, online=online)
    assert (cpus.count, cpus.source, cpus.online) == (count, source, online)
    assert cpus.quota == (None if cpu_max.startswith("max") else int(cpu_max.split()[0]) / 100000)


def test_v2_fractional_quota_is_reported_as_is(tmp_path: Path) -> None:
    _v2(tmp_path, "/", {"/sys/fs/cgroup": "150000 100000"})
    assert usable_cpus(root=tmp_path, online=8) == UsableCpus(
        count=2, source=CGROUP_QUOTA, online=8, quota=1.5, cgroup="/sys/fs/cgroup")


def test_v2_the_tightest_ancestor_binds(tmp_path: Path) -> None:
    _v2(tmp_path, "/kubepods/pod1/ctr", {
        "/sys/fs/cgroup": "max 100000",
        "/sys/fs/cgroup/kubepods": "max 100000",
        "/sys/fs/cgroup/kubepods/pod1": "100000 100000",  # the pod's limit
        "/sys/fs/cgroup/kubepods/pod1/ctr": "300000 100000",  # a looser one on the container
    })
    cpus = usable_cpus(root=tmp_path, online=8)
    assert (cpus.count, cpus.source, cpus.cgroup) == (1, CGROUP_QUOTA, "/sys/fs/cgroup/kubepods/pod1")


def test_v2_the_leaf_binds_when_tighter(tmp_path: Path) -> None:
    _v2(tmp_path, "/kubepods/pod1/ctr", {
        "/sys/fs/cgroup/kubepods/pod1": "400000 100000",
        "/sys/fs/cgroup/kubepods/pod1/ctr": "250000 100000",
    })
    cpus = usable_cpus(root=tmp_path, online=8)
    assert (cpus.count, cpus.quota, cpus.cgroup) == (3, 2.5, "/sys/fs/cgroup/kubepods/pod1/ctr")


def test_v2_unreadable_ancestors_are_skipped(tmp_path: Path) -> None:
    # only the leaf's file exists: the ancestors (hidden, as container runtimes do) count as no limit
    _v2(tmp_path, "/a/b", {"/sys/fs/cgroup/a/b": "200000 100000"})
    assert usable_cpus(root=tmp_path, online=4).count == 2


def test_v2_a_namespaced_mount_shows_only_the_containers_part(tmp_path: Path) -> None:
    # without a cgroup namespace, /proc/self/cgroup names the host's path and the mount's root is that path
    mount = "30 23 0:26 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
    _v2(tmp_path, "/kubepods/pod1/ctr", {"/sys/fs/cgroup/ctr": "100000 100000"}, mount=mount)
    cpus = usable_cpus(root=tmp_path, online=4)
    assert (cpus.count, cpus.cgroup) == (1, "/sys/fs/cgroup/ctr")


def test_v2_a_cgroup_outside_the_mount_has_no_quota(tmp_path: Path) -> None:
    mount = "30 23 0:26 /other /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
    _v2(tmp_path, "/kubepods/pod1", {"/sys/fs/cgroup": "100000 100000"}, mount=mount)
    assert usable_cpus(root=tmp_path, online=4) == UsableCpus(count=4, source=AFFINITY, online=4)


def test_v2_the_mount_that_shows_the_cgroup_is_read(tmp_path: Path) -> None:
    mounts = ("30 23 0:26 /other /mnt/other rw - cgroup2 cgroup2 rw\n"  # a bind mount of another subtree
              "31 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
    _v2(tmp_path, "/pod", {"/mnt/other/pod": "100000 100000", "/sys/fs/cgroup/pod": "200000 100000"}, mount=mounts)
    cpus = usable_cpus(root=tmp_path, online=4)
    assert (cpus.count, cpus.cgroup) == (2, "/sys/fs/cgroup/pod")


def test_v2_an_escaped_mount_point(tmp_path: Path) -> None:
    mount = "30 23 0:26 / /sys/fs/my\\040cgroup rw - cgroup2 cgroup2 rw\n"
    _v2(tmp_path, "/", {"/sys/fs/my cgroup": "100000 100000"}, mount=mount)
    assert usable_cpus(root=tmp_path, online=4).count == 1


def test_v1_quota_and_period(tmp_path: Path) -> None:
    _v1(tmp_path, "/kubepods/pod1", {"/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1": ("150000", "100000")})
    cpus = usable_cpus(root=tmp_path, online=4)
    assert (cpus.count, cpus.source, cpus.quota) == (2, CGROUP_QUOTA, 1.5)


def test_v1_no_limit_and_tighter_ancestor(tmp_path: Path) -> None:
    _v1(tmp_path, "/kubepods/pod1", {
        "/sys/fs/cgroup/cpu,cpuacct/kubepods": ("50000", "100000"),
        "/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1": ("-1", "100000"),
    })
    cpus = usable_cpus(root=tmp_path, online=4)
    assert (cpus.count, cpus.cgroup) == (1, "/sys/fs/cgroup/cpu,cpuacct/kubepods")


def test_v1_wins_over_v2_on_a_hybrid_host(tmp_path: Path) -> None:
    _v1(tmp_path, "/", {"/sys/fs/cgroup/cpu,cpuacct": ("100000", "100000")})
    unified = "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
    _write(tmp_path, "/proc/self/mountinfo", V1_MOUNTS + unified)
    _write(tmp_path, "/sys/fs/cgroup/unified/cpu.max", "300000 100000")
    assert usable_cpus(root=tmp_path, online=4).count == 1


@pytest.mark.parametrize(
    "files",
    [
        {},  # no /proc at all (not Linux, or a sandbox)
        {"/proc/self/cgroup": "0::/\n"},  # no mountinfo
        {"/proc/self/cgroup": "0::/\n", "/proc/self/mountinfo": V2_MOUNT},  # no cpu.max
        {"/proc/self/cgroup": "garbage\n\n::\n", "/proc/self/mountinfo": V2_MOUNT, "/sys/fs/cgroup/cpu.max": "1 1"},
        {"/proc/self/cgroup": "0::/\n", "/proc/self/mountinfo": "garbage\n- -\n", "/sys/fs/cgroup/cpu.max": "1 1"},
        {"/proc/self/cgroup": "0::/\n", "/proc/self/mountinfo": V2_MOUNT, "/sys/fs/cgroup/cpu.max": "lots 100000"},
        {"/proc/self/cgroup": "0::/\n", "/proc/self/mountinfo": V2_MOUNT, "/sys/fs/cgroup/cpu.max": "100000"},
        {"/proc/self/cgroup": "0::/\n", "/proc/self/mountinfo": V2_MOUNT, "/sys/fs/cgroup/cpu.max": "0 100000"},
        {"/proc/self/cgroup": "0::/\n", "/proc/self/mountinfo": V2_MOUNT, "/sys/fs/cgroup/cpu.max": "100000 0"},
        {"/proc/self/cgroup": "0::/\n", "/proc/self/mountinfo": V2_MOUNT, "/sys/fs/cgroup/cpu.max": "\xff\xfe"},
        # v1: the quota without its period
        {"/proc/self/cgroup": "3:cpu:/\n", "/proc/self/mountinfo": V1_MOUNTS.replace("cpu,cpuacct", "cpu"),
         "/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "100000\n"},
    ],
)
def test_missing_or_garbled_files_fall_back_to_the_affinity(tmp_path: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        _write(tmp_path, path, text)
    assert usable_cpus(root=tmp_path, online=3) == UsableCpus(count=3, source=AFFINITY, online=3)


def test_a_directory_where_a_file_should_be_is_no_quota(tmp_path: Path) -> None:
    _v2(tmp_path, "/")
    (tmp_path / "sys/fs/cgroup/cpu.max").mkdir(parents=True)
    assert usable_cpus(root=tmp_path, online=2).count == 2


def test_never_below_one(tmp_path: Path) -> None:
    _v2(tmp_path, "/", {"/sys/fs/cgroup": "1 100000"})  # a hundred-thousandth of a CPU
    assert usable_cpus(root=tmp_path, online=0).count == 1
    assert usable_cpus(root=tmp_path, online=4).count == 1


def test_the_real_machine_answers_within_its_affinity() -> None:
    cpus = usable_cpus()
    assert 1 <= cpus.count <= cpus.online
    assert cpus.source in (AFFINITY, CGROUP_QUOTA, "cpu count")
