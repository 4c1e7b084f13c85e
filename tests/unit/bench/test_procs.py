"""``bench/procs.py``: Prometheus text parsing, metric sums and the ``/proc`` readers.

``scrape`` is run against a stand-in HTTP session serving a literal exposition (no socket); the
``/proc`` readers against a stand-in ``Path`` serving literal files, plus one check against this very
process's real ``/proc`` entry.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from types import TracebackType
from typing import Any

import pytest

from bench import procs

EXPOSITION = """\
# HELP rest_client_requests_total Number of HTTP requests, partitioned by status code, method, and host.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 40.0
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="PATCH"} 80.0
rest_client_requests_total{code="409",host="127.0.0.1:6443",method="PATCH"} 2.0
rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST"} 1e+01
# HELP rest_client_requests_created Number of HTTP requests
# TYPE rest_client_requests_created gauge
rest_client_requests_created{code="200",host="127.0.0.1:6443",method="GET"} 1.7634e+09

controller_runtime_reconcile_total{controller="kustomization",result="success"} 100.0
controller_runtime_reconcile_total{controller="kustomization",result="error"} 3.0
gotk_reconcile_condition{kind="Kustomization",name="app 1",namespace="flux-system",type="Ready"} 1.0
process_resident_memory_bytes 9.1e+07
workqueue_depth{name="kustomization"} 0 1700000000000
"""

REQ = "rest_client_requests_total"
GET = '{code="200",host="127.0.0.1:6443",method="GET"}'


class _Response:
    def __init__(self, text: str) -> None:
        self._text = text

    def raise_for_status(self) -> None:
        return None

    async def text(self) -> str:
        return self._text

    async def __aenter__(self) -> _Response:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class _Session:
    """Stands in for ``aiohttp.ClientSession``: serves ``EXPOSITION`` for every GET."""

    requested: list[str] = []

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs

    def get(self, url: str) -> _Response:
        self.requested.append(url)
        return _Response(EXPOSITION)

    async def __aenter__(self) -> _Session:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


@pytest.fixture
async def samples(monkeypatch: pytest.MonkeyPatch) -> dict[tuple[str, str], float]:
    _Session.requested = []
    monkeypatch.setattr(procs.aiohttp, "ClientSession", _Session)
    scraped = await procs.scrape("http://metrics.invalid/metrics")
    assert _Session.requested == ["http://metrics.invalid/metrics"]
    return scraped


def test_scrape_parses_samples_by_name_and_raw_labels(samples: dict[tuple[str, str], float]) -> None:
    assert samples == {
        (REQ, GET): 40.0,
        (REQ, '{code="200",host="127.0.0.1:6443",method="PATCH"}'): 80.0,
        (REQ, '{code="409",host="127.0.0.1:6443",method="PATCH"}'): 2.0,
        (REQ, '{code="201",host="127.0.0.1:6443",method="POST"}'): 10.0,
        ("rest_client_requests_created", GET): 1.7634e09,
        ("controller_runtime_reconcile_total", '{controller="kustomization",result="success"}'): 100.0,
        ("controller_runtime_reconcile_total", '{controller="kustomization",result="error"}'): 3.0,
        ("gotk_reconcile_condition", '{kind="Kustomization",name="app 1",namespace="flux-system",type="Ready"}'): 1.0,
        ("process_resident_memory_bytes", ""): 9.1e07,
        ("workqueue_depth", '{name="kustomization"}'): 0.0,  # the trailing timestamp is not the value
    }


def test_metric_sum_over_all_label_sets(samples: dict[tuple[str, str], float]) -> None:
    assert procs.metric_sum(samples, REQ) == 132.0  # the *_created series is another name
    assert procs.metric_sum(samples, "controller_runtime_reconcile_total") == 103.0
    assert procs.metric_sum(samples, "process_resident_memory_bytes") == 9.1e07
    assert procs.metric_sum(samples, "no_such_metric") == 0.0


def test_metric_sum_filters_on_labels(samples: dict[tuple[str, str], float]) -> None:
    assert procs.metric_sum(samples, REQ, method="PATCH") == 82.0
    assert procs.metric_sum(samples, REQ, method="PATCH", code="409") == 2.0
    assert procs.metric_sum(samples, REQ, method="DELETE") == 0.0
    assert procs.metric_sum(samples, "controller_runtime_reconcile_total", result="error") == 3.0


def test_requests_by_method(samples: dict[tuple[str, str], float]) -> None:
    assert procs.requests_by_method(samples) == {"GET": 40.0, "PATCH": 82.0, "POST": 10.0}


def test_requests_by_method_without_a_method_label() -> None:
    samples = {(REQ, '{code="200"}'): 2.0, (REQ, ""): 1.0, (REQ, '{method="GET"}'): 5.0}
    assert procs.requests_by_method(samples) == {"?": 3.0, "GET": 5.0}


# --- /proc ---------------------------------------------------------------------------------------------


class _FakePath:
    def __init__(self, files: dict[str, str], path: str) -> None:
        self.files = files
        self.path = path.rstrip("/")

    def __truediv__(self, name: str) -> _FakePath:
        return _FakePath(self.files, f"{self.path}/{name}")

    def read_text(self) -> str:
        try:
            return self.files[self.path]
        except KeyError:
            raise FileNotFoundError(self.path) from None

    def iterdir(self) -> Iterator[_FakePath]:
        prefix = self.path + "/"
        names = sorted({k[len(prefix):].split("/")[0] for k in self.files if k.startswith(prefix)})
        if not names:
            raise FileNotFoundError(self.path)
        return iter([_FakePath(self.files, prefix + n) for n in names])


def fake_proc(monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> None:
    monkeypatch.setattr(procs, "Path", lambda path: _FakePath(files, str(path)))


def stat_line(pid: int, comm: str, utime: int, stime: int, cutime: int, cstime: int) -> str:
    # fields 3.. of proc(5): state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
    # utime stime cutime cstime priority nice num_threads ...
    head = "S 1 1 1 0 -1 4194304 100 0 0 0"
    return f"{pid} ({comm}) {head} {utime} {stime} {cutime} {cstime} 20 0 4 0 1234 100000 50\n"


STATUS = """\
Name:\tpython
State:\tS (sleeping)
VmPeak:\t  300000 kB
VmHWM:\t  153600 kB
VmRSS:\t  102400 kB
VmRSSAnon:\t   90000 kB
Threads:\t4
"""


def test_cpu_seconds_reads_own_and_children_ticks(monkeypatch: pytest.MonkeyPatch) -> None:
    tck = procs.CLK_TCK
    fake_proc(monkeypatch, {"/proc/42/stat": stat_line(42, "python", 3 * tck, tck, 10 * tck, 2 * tck)})
    assert procs.cpu_seconds(42) == (4.0, 12.0)


def test_cpu_seconds_with_spaces_and_parentheses_in_the_command_name(monkeypatch: pytest.MonkeyPatch) -> None:
    tck = procs.CLK_TCK
    fake_proc(monkeypatch, {"/proc/7/stat": stat_line(7, "a) b (c", tck, tck, 0, tck)})
    assert procs.cpu_seconds(7) == (2.0, 1.0)


def test_cpu_seconds_of_a_gone_process_is_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_proc(monkeypatch, {})
    assert procs.cpu_seconds(42) == (0.0, 0.0)


def test_proc_stats_reads_peak_and_current_rss(monkeypatch: pytest.MonkeyPatch) -> None:
    tck = procs.CLK_TCK
    fake_proc(monkeypatch, {"/proc/42/status": STATUS,
                            "/proc/42/stat": stat_line(42, "python", tck, 0, tck // 2, 0)})
    assert procs.proc_stats(42) == procs.ProcStats(peak_rss_mib=150.0, rss_mib=100.0, cpu_s=1.0,
                                                   children_cpu_s=0.5)


def test_status_field_missing_or_process_gone_is_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_proc(monkeypatch, {"/proc/42/status": "Name:\tkthreadd\nState:\tS (sleeping)\n"})
    assert procs._status_kib(42, "VmRSS") == 0
    assert procs._status_kib(43, "VmRSS") == 0
    assert procs.proc_stats(43) == procs.ProcStats(peak_rss_mib=0.0, rss_mib=0.0, cpu_s=0.0, children_cpu_s=0.0)


def test_status_field_matches_the_whole_name(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_proc(monkeypatch, {"/proc/42/status": STATUS})
    assert procs._status_kib(42, "VmRSS") == 102400  # not VmRSSAnon


def test_descendants_walks_children_of_every_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_proc(monkeypatch, {
        "/proc/10/task/10/children": "11 12",
        "/proc/10/task/13/children": "14\n",
        "/proc/11/task/11/children": "",
        "/proc/12/task/12/children": "15",
        "/proc/15/task/15/children": "",
        # 14 exited meanwhile: no /proc/14 at all
    })
    assert sorted(procs.descendants(10)) == [11, 12, 14, 15]
    assert procs.descendants(99) == []


def test_real_proc_entry_of_this_process() -> None:
    before = os.times()
    own, _children = procs.cpu_seconds(os.getpid())
    after = os.times()
    tick = 1 / procs.CLK_TCK
    assert before.user + before.system - tick <= own <= after.user + after.system + tick
    stats = procs.proc_stats(os.getpid())
    assert stats.peak_rss_mib >= stats.rss_mib > 1.0


def test_requests_by_kind_and_throttling_mode_from_a_scrape() -> None:
    from bench.procs import requests_by_kind, throttling_mode

    samples = {
        ("kustomize_controller_kube_requests_total",
         '{dry_run="true",resource="deployments.apps",subresource="",verb="patch"}'): 3.0,
        ("kustomize_controller_kube_requests_total",
         '{dry_run="false",resource="kustomizations.kustomize.toolkit.fluxcd.io",'
         'subresource="status",verb="patch"}'): 2.0,
        ("kustomize_controller_kube_requests_total",
         '{dry_run="false",resource="",subresource="",verb="get"}'): 1.0,
        ("kustomize_controller_kube_client_throttling", '{host="h:1",mode="client-side"}'): 0.0,
        ("kustomize_controller_kube_client_throttling", '{host="h:1",mode="priority-and-fairness"}'): 1.0,
    }
    assert requests_by_kind(samples) == {
        "patch (dry-run) deployments": 3.0, "patch kustomizations/status": 2.0, "get (discovery)": 1.0}
    assert throttling_mode(samples) == "priority-and-fairness"
    assert throttling_mode({}) == "unknown"


async def test_scrape_asks_for_only_the_named_series(monkeypatch: pytest.MonkeyPatch) -> None:
    _Session.requested = []
    monkeypatch.setattr(procs.aiohttp, "ClientSession", _Session)
    await procs.scrape("http://metrics.invalid/metrics", names=("a_total", "b"))
    assert _Session.requested == ["http://metrics.invalid/metrics?name%5B%5D=a_total&name%5B%5D=b"]


async def test_a_group_of_controllers_sums_samples_and_cpu_and_keeps_the_largest_rss() -> None:
    class _Member:
        def __init__(self, value: float, rss: float) -> None:
            self.value, self.rss = value, rss

        async def samples(self) -> dict[tuple[str, str], float]:
            return {(REQ, GET): self.value}

        def stats(self) -> procs.ProcStats:
            return procs.ProcStats(peak_rss_mib=self.rss, rss_mib=self.rss, cpu_s=self.value, children_cpu_s=1.0)

    group = procs.ControllerGroup([_Member(2.0, 90.0), _Member(3.0, 70.0)])  # type: ignore[list-item]
    assert await group.samples() == {(REQ, GET): 5.0}
    stats = group.stats()
    assert (stats.cpu_s, stats.children_cpu_s, stats.peak_rss_mib) == (5.0, 2.0, 90.0)
    assert [s.peak_rss_mib for s in group.shard_stats()] == [90.0, 70.0]


def test_a_pinned_child_runs_on_its_cpus_only() -> None:
    import subprocess
    import sys

    one = min(os.sched_getaffinity(0))
    seen = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                          preexec_fn=procs._pinned(frozenset({one})), capture_output=True, text=True, check=True,
                          timeout=60)
    assert seen.stdout.strip() == f"[{one}]"
    unpinned = subprocess.run([sys.executable, "-c", "import os; print(len(os.sched_getaffinity(0)))"],
                              preexec_fn=procs._pinned(None), capture_output=True, text=True, check=True, timeout=60)
    assert int(unpinned.stdout) == len(os.sched_getaffinity(0))
