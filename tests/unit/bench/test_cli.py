"""``bench/cli.py`` (argument parsing, the run plan, re-rendering from JSON) and the pure parts of
``bench/build_pipeline.py`` (the generated artifact)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from bench import build_pipeline, cli, report, scenarios


def test_sizes() -> None:
    assert cli._sizes("100,500,1000") == [100, 500, 1000]
    assert cli._sizes("20, 100,") == [20, 100]
    assert cli._sizes("") == []


def test_repeats() -> None:
    assert cli._repeats("100=3,500=1") == {100: 3, 500: 1}
    assert cli._repeats("100=3, 1000=2") == {100: 3, 1000: 2}
    assert cli._repeats("") == {}


def test_default_plan() -> None:
    p = cli.plan(cli.parse([]))
    assert p == {
        "scenarios": [
            "cold", "latency", "big", "failover", "baseline", "requests", "monorepo", "starvation", "chain",
            "keyservices", "chaos",
        ],
        "sizes": [100, 500, 1000],
        "repeats": {100: 3, 500: 1, 1000: 1},
        "big_sizes": [1000, 5000],
        "big_reference": True,
        "latency_size": 100,
        "latency_samples": 100,
        "baseline_size": 100,
        "requests_size": 100,
        "requests_variants": ["apf", "noapf"],
        "monorepo_size": 1000,
        "scale_sizes": [1000, 2000, 5000, 10000],
        "scale_shards": [(1, 1), (4, 4)],
        "scale_pin": True,
        "ui_size": 1000,
        "chaos": {"size": 300, "duration": 120.0, "revision_every": 15.0, "fault_every": 10.0, "throttle_share": 0.1,
                  "seed": 25, "converge_within": 900.0},
        "soak": {"size": 300, "duration": 1800.0, "revision_every": 30.0, "fault_every": 30.0, "seed": 38,
                 "converge_within": 900.0},
        "wait": False,
        "controller_flags": scenarios.DEFAULT_FLAGS,
        "quick": False,
        "profile_dir": None,
    }


def test_quick_plan_runs_everything_once_on_small_sizes() -> None:
    p = cli.plan(cli.parse(["--quick"]))
    assert p["sizes"] == [20, 100]
    assert p["repeats"] == {20: 1, 100: 1}
    assert p["big_sizes"] == [500]
    assert (p["latency_size"], p["latency_samples"], p["baseline_size"]) == (20, 20, 20)
    assert p["monorepo_size"] == 50
    assert (p["chaos"]["size"], p["chaos"]["duration"]) == (30, 30.0)
    assert p["quick"] is True
    assert "scale" not in p["scenarios"]  # opt-in: tens of minutes at 10,000
    assert p["scale_sizes"] == [100, 200]
    assert p["ui_size"] == 100


def test_scale_plan_options() -> None:
    p = cli.plan(cli.parse(["--scenarios", "scale", "--scale-sizes", "2000,5000", "--scale-shards", "4"]))
    assert (p["scenarios"], p["scale_sizes"], p["scale_shards"]) == (["scale"], [2000, 5000], [(4, 4)])
    # the first of four shards alone, next to the whole layouts
    assert cli.plan(cli.parse(["--scale-shards", "1,4,4/1"]))["scale_shards"] == [(1, 1), (4, 4), (4, 1)]
    assert p["scale_pin"] is True
    assert cli.plan(cli.parse(["--scale-unpinned"]))["scale_pin"] is False


def test_plan_options_override_the_defaults() -> None:
    p = cli.plan(cli.parse([
        "--scenarios", "cold,latency", "--sizes", "50,100", "--repeats", "50=2", "--big-sizes", "200",
        "--latency-size", "7", "--latency-samples", "9", "--baseline-size", "11", "--wait",
        "--controller-flags", "--concurrent=4 --kube-api-qps=50",
    ]))
    assert p["scenarios"] == ["cold", "latency"]
    assert p["sizes"] == [50, 100]
    assert p["repeats"] == {50: 2, 100: 3}  # 100 keeps its default of three runs
    assert p["big_sizes"] == [200]
    assert (p["latency_size"], p["latency_samples"], p["baseline_size"]) == (7, 9, 11)
    assert p["wait"] is True
    assert p["controller_flags"] == ["--concurrent=4", "--kube-api-qps=50"]


def test_plan_is_json_round_trippable_as_the_report_reads_it() -> None:
    p = json.loads(json.dumps(cli.plan(cli.parse(["--quick"]))))
    assert p["repeats"] == {"20": 1, "100": 1}  # JSON keys are strings; the report does not read them
    assert p["controller_flags"] == scenarios.DEFAULT_FLAGS


def _results(error: str = "") -> dict[str, Any]:
    return {
        "plan": cli.plan(cli.parse(["--quick"])),
        "machine": {"nproc": "2", "cpu": "x", "memory": "1 GiB", "python": "3.11", "platform": "Linux",
                    "kubectl": "v1.36.3", "loadavg": "0 0 0"},
        "results": [
            {"scenario": "cold", "size": 20, "metrics": {"cold.seconds": 2.0}, "error": "", "took_s": 3.0},
            {"scenario": "latency", "size": 20, "metrics": {}, "error": error, "took_s": 1.0},
        ],
    }


def test_main_from_json_renders_the_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "ANALYSIS", tmp_path / "no-analysis.md")
    source, out = tmp_path / "run.json", tmp_path / "report.md"
    data = _results()
    source.write_text(json.dumps(data))
    assert cli.main(["--from-json", str(source), "--out", str(out)]) == 0
    assert out.read_text() == report.render(json.loads(source.read_text()))
    assert "| `cold.seconds` | 2.00 |" in out.read_text()


def test_main_from_json_fails_when_a_run_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report, "ANALYSIS", tmp_path / "no-analysis.md")
    source = tmp_path / "run.json"
    source.write_text(json.dumps(_results(error="TimeoutError: late")))
    assert cli.main(["--from-json", str(source), "--out", "-"]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]  # "-" writes no report


# --- build_pipeline --------------------------------------------------------------------------------------


@pytest.mark.parametrize("objects", [1, 3, 100])
def test_make_artifact_is_a_kustomization_of_n_objects(objects: int) -> None:
    with tarfile.open(fileobj=io.BytesIO(build_pipeline.make_artifact(objects)), mode="r:gz") as tar:
        files = {m.name: tar.extractfile(m).read().decode()  # type: ignore[union-attr]
                 for m in tar.getmembers() if m.isfile()}  # the parent directories have entries of their own
    yaml = YAML(typ="safe")
    kustomization = yaml.load(files.pop("app/kustomization.yaml"))
    assert kustomization["resources"] == [f"obj-{i:04d}.yaml" for i in range(objects)]
    assert sorted(files) == [f"app/obj-{i:04d}.yaml" for i in range(objects)]
    kinds = [yaml.load(files[f"app/obj-{i:04d}.yaml"])["kind"] for i in range(objects)]
    assert kinds == [("Deployment", "Service", "ConfigMap")[i % 3] for i in range(objects)]
    names = {yaml.load(text)["metadata"]["name"] for text in files.values()}
    assert len(names) == objects


def test_make_artifact_keeps_the_substitution_variables_for_post_build() -> None:
    with tarfile.open(fileobj=io.BytesIO(build_pipeline.make_artifact(1)), mode="r:gz") as tar:
        member = tar.extractfile("app/obj-0000.yaml")
        assert member is not None
        text = member.read().decode()
    assert 'tier: "${TIER}"' in text
    assert 'value: "${REGION:=eu-west-1}"' in text


def test_ms_is_the_median_in_milliseconds() -> None:
    assert build_pipeline.ms([0.001, 0.004, 0.002, 0.003]) == "     2.5"
    assert build_pipeline.ms([1.5]) == "  1500.0"
