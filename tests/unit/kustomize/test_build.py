"""Builder discovery and process handling, with small shell scripts standing in for kustomize."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from kustomize_controller.kustomize.batch import BatchHint
from kustomize_controller.kustomize.build import (
    SMALL_INPUT_BYTES,
    BuilderCommand,
    KustomizeBuilder,
    _clean_stderr,
    _parse_version,
    _run,
    detect_builder,
    installed_builder_dirs,
    small_input,
)
from kustomize_controller.kustomize.errors import BuilderUnavailableError, KustomizeBuildError
from kustomize_controller.kustomize.extract import Workspace
from kustomize_controller.kustomize.split import SplitPlan
from kustomize_controller.runtime.clock import FakeClock, RealClock
from kustomize_controller.runtime.cpus import usable_cpus


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


KUBECTL_JSON = '{"clientVersion": {"gitVersion": "%s"}, "kustomizeVersion": "v5.8.1"}'


@pytest.mark.parametrize(
    ("text", "expected"),
    [("v5.8.1", (5, 8, 1)), ("{Version:kustomize/v4.5.7 GitCommit:x}", (4, 5, 7)), ("v1.27", (1, 27, 0)),
     ("nothing", None)],
)
def test_parse_version(text: str, expected: tuple[int, int, int] | None) -> None:
    assert _parse_version(text) == expected


def test_clean_stderr_strips_warnings_prefix_and_temp_paths(tmp_path: Path) -> None:
    stderr = (
        f"# Warning: 'patchesStrategicMerge' is deprecated.\n"
        f"Error: accumulating resources: accumulation err='accumulating resources from "
        f"'{tmp_path}/app/missing.yaml': open {tmp_path}/app/missing.yaml: no such file or directory'\n"
    ).encode()
    assert _clean_stderr(stderr, tmp_path) == (
        "accumulating resources: accumulation err='accumulating resources from 'app/missing.yaml': "
        "open app/missing.yaml: no such file or directory'"
    )
    assert _clean_stderr(b"", tmp_path) == "builder exited with an error and no message"


async def test_detect_prefers_kustomize_then_kubectl(tmp_path: Path) -> None:
    script(tmp_path / "kustomize", 'echo "v5.4.3"\n')
    script(tmp_path / "kubectl", f"echo '{KUBECTL_JSON % 'v1.30.0'}'\n")
    cmd = await detect_builder(clock=RealClock(), search_path=str(tmp_path), installed_dirs=[])
    assert cmd.flavour == "kustomize" and cmd.version == "v5.4.3" and cmd.source == "PATH"
    assert cmd.argv == (str(tmp_path / "kustomize"), "build")
    (tmp_path / "kustomize").unlink()
    cmd = await detect_builder(clock=RealClock(), search_path=str(tmp_path), installed_dirs=[])
    assert cmd.flavour == "kubectl" and cmd.argv[1:] == ("kustomize",) and cmd.kustomize_version == "v5.8.1"


async def test_old_kustomize_falls_back_to_kubectl_and_old_kubectl_fails(tmp_path: Path) -> None:
    script(tmp_path / "kustomize", 'echo "{Version:kustomize/v4.5.7}"\n')
    script(tmp_path / "kubectl", f"echo '{KUBECTL_JSON % 'v1.26.3'}'\n")
    with pytest.raises(BuilderUnavailableError) as err:
        await detect_builder(clock=RealClock(), search_path=str(tmp_path), installed_dirs=[])
    message = str(err.value)
    assert "kustomize >= v5 is required" in message and "kubectl >= v1.27" in message


async def test_no_builder_at_all(tmp_path: Path) -> None:
    with pytest.raises(BuilderUnavailableError, match="neither 'kustomize' nor 'kubectl' is on PATH"):
        await detect_builder(clock=RealClock(), search_path=str(tmp_path), installed_dirs=[])


async def test_the_installed_builder_wins_over_path(tmp_path: Path) -> None:
    installed, first_on_path = tmp_path / "venv-bin", tmp_path / "elsewhere"
    installed.mkdir()
    first_on_path.mkdir()
    old_kubectl = KUBECTL_JSON.replace("v5.8.1", "v5.5.0") % "v1.32.0"
    script(first_on_path / "kubectl", f"echo '{old_kubectl}'\n")
    script(first_on_path / "kustomize", 'echo "v5.5.0"\n')
    script(installed / "kubectl", f"echo '{KUBECTL_JSON % 'v1.36.3'}'\n")
    cmd = await detect_builder(clock=RealClock(), search_path=str(first_on_path), installed_dirs=[str(installed)])
    assert cmd.argv == (str(installed / "kubectl"), "kustomize") and cmd.source == "installed" and cmd.pinned
    # an installed builder too old to use gives way to PATH, which is then not the pinned version
    script(installed / "kubectl", f"echo '{KUBECTL_JSON % 'v1.26.0'}'\n")
    cmd = await detect_builder(clock=RealClock(), search_path=str(first_on_path), installed_dirs=[str(installed)])
    assert cmd.argv[0] == str(first_on_path / "kustomize") and cmd.source == "PATH" and not cmd.pinned
    # --kustomize-binary still overrides both
    cmd = await detect_builder(clock=RealClock(), kustomize_binary=str(first_on_path / "kubectl"),
                               search_path=str(first_on_path), installed_dirs=[str(installed)])
    assert cmd.argv[0] == str(first_on_path / "kubectl") and cmd.source == "flag" and cmd.kustomize_version == "v5.5.0"


def test_installed_builder_dirs_name_the_interpreter_s_own_directory(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to(sys.executable)  # a venv's python links to the system's: not followed
    monkeypatch.setattr(sys, "executable", str(venv_bin / "python"))
    monkeypatch.setattr(sys, "argv", [str(tmp_path / "scripts" / "kustomize-controller")])
    assert installed_builder_dirs() == [str(venv_bin)]  # the script's directory does not exist: skipped
    (tmp_path / "scripts").mkdir()
    assert installed_builder_dirs() == [str(venv_bin), str(tmp_path / "scripts")]


async def test_explicit_binary(tmp_path: Path) -> None:
    custom = script(tmp_path / "kubectl-1.33", f"echo '{KUBECTL_JSON % 'v1.33.0'}'\n")
    cmd = await detect_builder(clock=RealClock(), kustomize_binary=str(custom))
    assert cmd.flavour == "kubectl"
    with pytest.raises(BuilderUnavailableError, match="not found or not executable"):
        await detect_builder(clock=RealClock(), kustomize_binary=str(tmp_path / "nope"))
    broken = script(tmp_path / "kz", "exit 3\n")
    with pytest.raises(BuilderUnavailableError, match="does not answer 'version'"):
        await detect_builder(clock=RealClock(), kustomize_binary=str(broken))


def builder_for(path: Path, clock: FakeClock | RealClock, **kw: object) -> KustomizeBuilder:
    return KustomizeBuilder(
        command=BuilderCommand((str(path), "build"), "kustomize", "v5.8.1", "v5.8.1"),
        clock=clock,
        **kw,  # type: ignore[arg-type]
    )


async def test_build_runs_with_scrubbed_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEAKY_SECRET", "s3cr3t")
    fake = script(tmp_path / "kustomize", 'echo "args=$*"; echo "cwd=$(/bin/pwd)"; /usr/bin/env\n')
    work = tmp_path / "work"
    work.mkdir()
    out = (await builder_for(fake, RealClock()).build(tmp_path / "dir", root=tmp_path, workdir=work,
                                                      allow_remote=False)).decode()
    assert f"args=build {tmp_path}/dir --load-restrictor LoadRestrictionsNone" in out
    assert f"cwd={work}" in out
    assert "LEAKY_SECRET" not in out and "KUBECONFIG" not in out
    assert f"HOME={work}" in out
    assert "PATH=\n" in out and "HTTPS_PROXY=http://127.0.0.1:9" in out
    out = (await builder_for(fake, RealClock()).build(tmp_path, root=tmp_path, workdir=work,
                                                      allow_remote=True)).decode()
    assert "PATH=/usr/local/bin:/usr/bin:/bin" in out and "HTTPS_PROXY" not in out
    assert "GOMAXPROCS=1\n" in out


async def test_build_go_max_procs_can_be_left_to_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOMAXPROCS", "7")  # the controller's own environment never leaks into a build
    fake = script(tmp_path / "kustomize", "/usr/bin/env\n")
    out = (await builder_for(fake, RealClock(), go_max_procs=None).build(
        tmp_path, root=tmp_path, workdir=tmp_path, allow_remote=False)).decode()
    assert "GOMAXPROCS" not in out
    out = (await builder_for(fake, RealClock(), go_max_procs=3).build(
        tmp_path, root=tmp_path, workdir=tmp_path, allow_remote=False)).decode()
    assert "GOMAXPROCS=3\n" in out


def test_small_input_bounds(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "kustomization.yaml").write_text("resources: [b]\n")
    (root / "a" / "b" / "x.yaml").write_bytes(b"x" * 1000)
    assert small_input(root)
    assert not small_input(root, max_bytes=999)  # bytes, nested files included
    assert not small_input(root, max_files=3)  # a, a/b, a/kustomization.yaml, a/b/x.yaml
    assert small_input(root, max_files=4)
    outside = tmp_path / "big"
    outside.write_bytes(b"y" * 5000)
    (root / "link").symlink_to(outside)  # counted, never followed
    assert small_input(root, max_bytes=1100)
    assert not small_input(tmp_path / "missing")


async def test_small_builds_run_without_go_gc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOGC", "50")  # the controller's own environment never leaks into a build
    fake = script(tmp_path / "kustomize", "/usr/bin/env\n")
    small = tmp_path / "small"
    small.mkdir()
    (small / "kustomization.yaml").write_text("resources: []\n")
    out = (await builder_for(fake, RealClock()).build(
        small, root=small, workdir=tmp_path, allow_remote=False)).decode()
    assert "GOGC=off\n" in out and "GOMEMLIMIT=128MiB\n" in out
    large = tmp_path / "large"
    large.mkdir()
    (large / "app.yaml").write_bytes(b"#" * (SMALL_INPUT_BYTES + 1))
    out = (await builder_for(fake, RealClock()).build(
        large, root=large, workdir=tmp_path, allow_remote=False)).decode()
    assert "GOGC" not in out and "GOMEMLIMIT" not in out


def test_a_batch_of_small_builds_collects_at_three_times_its_live_heap(tmp_path: Path) -> None:
    builder = builder_for(tmp_path / "kustomize", RealClock())
    batch = builder._env(tmp_path, allow_remote=False, small=True, batch=True)
    assert (batch["GOGC"], batch["GOMEMLIMIT"]) == ("200", "128MiB")  # it allocates per root
    alone = builder._env(tmp_path, allow_remote=False, small=True)
    assert (alone["GOGC"], alone["GOMEMLIMIT"]) == ("off", "128MiB")


async def test_build_failure_message(tmp_path: Path) -> None:
    fake = script(tmp_path / "kustomize", f'echo "Error: bad file {tmp_path}/x.yaml" >&2; exit 1\n')
    with pytest.raises(KustomizeBuildError) as err:
        await builder_for(fake, RealClock()).build(tmp_path, root=tmp_path, workdir=tmp_path, allow_remote=True)
    assert str(err.value) == "kustomize build failed: bad file x.yaml"
    assert err.value.reason == "BuildFailed"


async def test_output_cap(tmp_path: Path) -> None:
    fake = script(tmp_path / "kustomize", "yes 'kind: ConfigMap' | head -c 1000000\n")
    with pytest.raises(KustomizeBuildError, match="output exceeds the limit of 10000 bytes"):
        await builder_for(fake, RealClock(), max_output=10_000).build(
            tmp_path, root=tmp_path, workdir=tmp_path, allow_remote=True
        )


async def test_timeout_kills_the_builder(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    fake = script(tmp_path / "kustomize", f"echo $$ > {pidfile}; exec /bin/sleep 600\n")
    clock = FakeClock()
    task = asyncio.ensure_future(
        builder_for(fake, clock, timeout=30).build(tmp_path, root=tmp_path, workdir=tmp_path, allow_remote=True)
    )
    while not (clock.pending_sleepers and pidfile.exists() and pidfile.read_text().strip()):
        await asyncio.wait([task], timeout=0.02)
    pid = int(pidfile.read_text())
    await clock.advance(30)
    with pytest.raises(KustomizeBuildError, match="timed out after 30s"):
        await task
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_parallel_builds_are_bounded(tmp_path: Path) -> None:
    fake = script(
        tmp_path / "kustomize",
        'touch "$2/started"; while [ ! -f "$2/go" ]; do /bin/sleep 0.01; done; echo done\n',
    )
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    d1.mkdir()
    d2.mkdir()
    builder = builder_for(fake, RealClock(), max_parallel=1)
    t1 = asyncio.ensure_future(builder.build(d1, root=tmp_path, workdir=tmp_path, allow_remote=True))
    while not (d1 / "started").exists():
        await asyncio.wait([t1], timeout=0.02)
    t2 = asyncio.ensure_future(builder.build(d2, root=tmp_path, workdir=tmp_path, allow_remote=True))
    await asyncio.wait([t2], timeout=0.3)
    assert not (d2 / "started").exists()
    (d1 / "go").touch()
    (d2 / "go").touch()
    assert await t1 == b"done\n"
    assert await t2 == b"done\n"


async def test_a_build_cancelled_twice_still_reaps_its_child_and_closes_its_pipes(tmp_path: Path) -> None:
    """A shutdown can cancel a reconcile whose build is already being cancelled: the second cancellation
    must not cut the clean-up short (it left the child unreaped, its readers pending and its pipes open,
    reported later as a ResourceWarning in an unrelated test)."""
    pidfile = tmp_path / "pid"
    build = asyncio.ensure_future(
        _run(
            ["/bin/sh", "-c", f"echo $$ > {pidfile}; exec sleep 30"],
            clock=RealClock(),
            time_limit=60,
            max_output=1 << 20,
            env={"PATH": "/usr/bin:/bin"},
            cwd=None,
        )
    )
    for _ in range(500):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        await asyncio.sleep(0.01)
    build.cancel()
    await asyncio.sleep(0)  # the first cancellation is now in the clean-up, waiting for the child
    build.cancel()
    with pytest.raises(asyncio.CancelledError):
        await build
    pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]
    assert pending == []


@pytest.mark.parametrize(
    ("cpus", "max_parallel", "slots", "lanes"),
    [(1, None, 2, 1), (3, None, 6, 3), (2, 5, 5, 2)],
)
def test_builds_are_sized_for_the_cpus_given(tmp_path: Path, cpus: int, max_parallel: int | None, slots: int,
                                             lanes: int) -> None:
    """Twice as many parallel builds as CPUs (``--build-concurrency`` overrides), a lane per CPU for groups."""
    builder = builder_for(tmp_path / "kustomize", FakeClock(), cpus=cpus, max_parallel=max_parallel,
                          max_batch=8, workspace=Workspace(tmp_path))
    assert builder._slots._value == slots
    assert builder.batches is not None and builder.batches._lanes._value == lanes


def test_without_cpus_the_builder_reads_the_usable_cpus(tmp_path: Path) -> None:
    builder = builder_for(tmp_path / "kustomize", FakeClock())
    assert builder._slots._value == 2 * usable_cpus().count


GENERATED = ("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
             "resources: [a.yaml, b.yaml, c.yaml, d.yaml]\n")


def split_plan_of(count: int = 4) -> SplitPlan:
    return SplitPlan(weights=(1,) * count, hint=BatchHint(), top=BatchHint())


PART_SCRIPT = (  # each part prints one ConfigMap named after its wrapper directory (part-<i>; PATH is empty)
    'printf "apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: %s\\n" "${2##*/}"\n'
)


async def test_a_root_in_parts_is_joined_in_order(tmp_path: Path) -> None:
    fake = script(tmp_path / "kustomize", PART_SCRIPT)
    builder = builder_for(fake, RealClock(), workspace=Workspace(tmp_path / "ws"), part_objects=2, split_min=4)
    joined = await builder.build_split(tmp_path, root=tmp_path, plan=split_plan_of(), generated=GENERATED)
    assert joined is not None
    assert [d.obj["metadata"]["name"] for d in joined.documents] == ["part-0", "part-1"]
    assert joined.output == b"---\n".join(
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: part-{i}\n".encode() for i in range(2))
    assert list((tmp_path / "ws").iterdir()) == []  # the wrappers are removed


async def test_a_root_in_parts_falls_back_on_any_failure(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    small = builder_for(script(tmp_path / "k0", "exit 9\n"), RealClock(), workspace=ws, part_objects=2, split_min=5)
    assert await small.build_split(tmp_path, root=tmp_path, plan=split_plan_of(), generated=GENERATED) is None
    failing = script(tmp_path / "k1", 'case "$2" in *part-1) echo boom >&2; exit 1;; esac\n' + PART_SCRIPT)
    big = builder_for(failing, RealClock(), workspace=ws, part_objects=1, split_min=2)
    assert await big.build_split(tmp_path, root=tmp_path, plan=split_plan_of(), generated=GENERATED) is None
    # each part within the cap, all of them together not
    capped = builder_for(script(tmp_path / "k2", PART_SCRIPT), RealClock(), workspace=ws, part_objects=1,
                         split_min=2, max_output=100)
    assert await capped.build_split(tmp_path, root=tmp_path, plan=split_plan_of(), generated=GENERATED) is None
    undecodable = builder_for(script(tmp_path / "k3", "echo 'not: [an object'\n"), RealClock(), workspace=ws,
                              part_objects=1, split_min=2)
    assert await undecodable.build_split(tmp_path, root=tmp_path, plan=split_plan_of(), generated=GENERATED) is None
    (tmp_path / "file").write_text("")
    unwritable = builder_for(script(tmp_path / "k4", PART_SCRIPT), RealClock(), workspace=Workspace(
        tmp_path / "file" / "ws"), part_objects=1, split_min=2)
    assert await unwritable.build_split(tmp_path, root=tmp_path, plan=split_plan_of(), generated=GENERATED) is None
    assert list((tmp_path / "ws").iterdir()) == []


async def test_a_failing_part_stops_the_others(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    fake = script(tmp_path / "kustomize", f'case "$2" in *part-0) exit 1;; esac\necho $$ > {pids}/${{2##*/}}\n'
                                          "exec /bin/sleep 600\n")
    builder = builder_for(fake, RealClock(), workspace=Workspace(tmp_path / "ws"), part_objects=1, split_min=2,
                          cpus=4)
    assert await builder.build_split(tmp_path, root=tmp_path, plan=split_plan_of(), generated=GENERATED) is None
    for pidfile in pids.iterdir():
        with pytest.raises(ProcessLookupError):
            os.kill(int(pidfile.read_text()), 0)


async def test_a_part_with_the_inputs_of_one_built_before_gets_its_output_again(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    fake = script(tmp_path / "kustomize", f'echo "${{2##*/}}" >> {runs}\n' + PART_SCRIPT)
    builder = builder_for(fake, RealClock(), workspace=Workspace(tmp_path / "ws"), part_objects=1, split_min=2)

    async def build(owned: tuple[str | None, ...], shared: str) -> list[str]:
        runs.write_text("")
        plan = SplitPlan(weights=(1, 1, 1, 1), hint=BatchHint(), top=BatchHint(), owned=owned, shared=shared)
        joined = await builder.build_split(tmp_path, root=tmp_path, plan=plan, generated=GENERATED)
        assert joined is not None and len(joined.documents) == 4
        return runs.read_text().split()

    assert sorted(await build(("a", "b", "c", None), "s")) == ["part-0", "part-1", "part-2", "part-3"]
    assert await build(("a", "b", "c", None), "s") == []  # nothing changed: no process
    assert await build(("a", "B", "c", None), "s") == ["part-1"]  # the file only part 1 reads
    assert sorted(await build(("a", "B", "c", None), "t")) == ["part-0", "part-1", "part-2", "part-3"]
    assert len(await build(("a", "B", "c", None), "")) == 4  # no inputs known: never reused
    assert len(await build(("a", "B", "c", None), "")) == 4
