from datetime import timedelta

import pytest

from kustomize_controller.settings import (
    FEATURE_GATE_DEFAULTS,
    FeatureGates,
    FlagError,
    Settings,
    parse_flags,
    usage,
)


def test_defaults_match_upstream() -> None:
    s, rest = parse_flags([])
    assert rest == []
    assert s == Settings()
    assert (s.metrics_addr, s.health_addr, s.events_addr) == (":8080", ":9440", "")
    assert (s.concurrent, s.concurrent_ssa, s.http_retry) == (4, 4, 9)
    assert s.requeue_dependency == timedelta(seconds=30)
    assert (s.kube_api_qps, s.kube_api_burst) == (50.0, 300)
    assert s.leader_election_lease_duration == timedelta(seconds=35)
    assert s.leader_election_renew_deadline == timedelta(seconds=30)
    assert s.leader_election_retry_period == timedelta(seconds=5)
    assert s.leader_election_release_on_cancel is True
    assert s.enable_leader_election is False
    assert s.min_retry_delay == timedelta(milliseconds=750)
    assert s.max_retry_delay == timedelta(minutes=15)
    assert s.watch_all_namespaces is True
    assert s.watch_configs_label_selector == "reconcile.fluxcd.io/watch=Enabled"
    assert s.interval_jitter_percentage == 5
    assert (s.log_level, s.log_encoding) == ("info", "json")
    assert s.feature_gates.enabled("StrictPostBuildSubstitutions") is True
    assert s.feature_gates.enabled("DisableStatusPollerCache") is True
    assert s.feature_gates.enabled("ExternalArtifact") is False


@pytest.mark.parametrize(
    ("argv", "attr", "expected"),
    [
        (["--concurrent", "20"], "concurrent", 20),
        (["--concurrent=20"], "concurrent", 20),
        (["--enable-leader-election"], "enable_leader_election", True),
        (["--watch-all-namespaces=false"], "watch_all_namespaces", False),
        (["--watch-all-namespaces=0"], "watch_all_namespaces", False),
        (["--no-remote-bases=True"], "no_remote_bases", True),
        (["--requeue-dependency", "5s"], "requeue_dependency", timedelta(seconds=5)),
        (["--requeue-dependency=1m30s"], "requeue_dependency", timedelta(seconds=90)),
        (["--min-retry-delay=100ms"], "min_retry_delay", timedelta(milliseconds=100)),
        (["--kube-api-qps=-1"], "kube_api_qps", -1.0),
        (["--kube-api-qps", "12.5"], "kube_api_qps", 12.5),
        (["--log-encoding", "console"], "log_encoding", "console"),
        (["--override-manager", "a", "--override-manager=b,c"], "override_managers", ("a", "b,c")),
        (["--metrics-addr="], "metrics_addr", ""),
        ([], "concurrent_health_checks", 32),
        (["--concurrent-health-checks=0"], "concurrent_health_checks", 0),
    ],
)
def test_go_flag_syntax(argv: list[str], attr: str, expected: object) -> None:
    s, _ = parse_flags(argv)
    assert getattr(s, attr) == expected


def test_bool_flag_does_not_consume_next_argument() -> None:
    s, rest = parse_flags(["--no-remote-bases", "extra"], strict_positionals=False)
    assert s.no_remote_bases is True
    assert rest == ["extra"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nope"], "unknown flag: --nope"),
        (["-concurrent", "3"], "unknown shorthand flag: 'c' in -concurrent"),
        (["--concurrent"], "flag needs an argument: --concurrent"),
        (["--concurrent", "x"], 'invalid argument "x" for "--concurrent" flag'),
        (["--requeue-dependency", "5"], 'invalid argument "5" for "--requeue-dependency" flag'),
        (["--no-remote-bases=maybe"], 'invalid argument "maybe" for "--no-remote-bases" flag'),
        (["--interval-jitter-percentage=100"], "must be a non-negative value and less than 100"),
        (["--interval-jitter-percentage=300"], "value out of range"),
        (["--log-encoding=xml"], "invalid log encoding"),
        (["--concurrent-health-checks=-1"], "--concurrent-health-checks must not be negative"),
        (["--feature-gates=Bogus=true"], "feature-gate 'Bogus' not supported"),
        (["--feature-gates=ExternalArtifact"], "missing bool value"),
        (["--default-decryption-service-account=sa"],
         "^cannot set default service accounts when the feature gate ObjectLevelWorkloadIdentity is not enabled$"),
        (["--default-kubeconfig-service-account=sa"], "^cannot set default service accounts when the feature gate"),
        (["positional"], "unexpected argument: positional"),
        (
            ["--enable-leader-election", "--leader-election-renew-deadline=40s"],
            "lease duration must be greater than renew deadline",
        ),
    ],
)
def test_rejected_command_lines(argv: list[str], message: str) -> None:
    with pytest.raises(FlagError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_flags(argv)


def test_feature_gates_later_values_win_and_keep_defaults() -> None:
    gates = FeatureGates.parse(["ExternalArtifact=true,GroupChangeLog=true", "GroupChangeLog=false"])
    assert gates.enabled("ExternalArtifact") is True
    assert gates.enabled("GroupChangeLog") is False
    assert gates.enabled("StrictPostBuildSubstitutions") is True
    assert set(gates.values) == set(FEATURE_GATE_DEFAULTS)
    with pytest.raises(FlagError, match="feature-gate 'Nope' not supported"):
        gates.enabled("Nope")


def test_object_level_workload_identity_gate_allows_default_accounts() -> None:
    s, _ = parse_flags(
        ["--feature-gates=ObjectLevelWorkloadIdentity=true", "--default-decryption-service-account=sa"]
    )
    assert s.default_decryption_service_account == "sa"


def test_custom_stage_group_kinds() -> None:
    s, _ = parse_flags(["--custom-apply-stage-kinds=rbac.authorization.k8s.io/Role, ConfigMap,"])
    assert s.custom_stage_group_kinds() == [("rbac.authorization.k8s.io", "Role"), ("", "ConfigMap")]


def test_usage_lists_every_flag_with_defaults() -> None:
    text = usage()
    assert "--requeue-dependency duration" in text and "(default 30s)" in text
    assert "--concurrent int" in text and "(default 4)" in text
    assert "--leader-election-release-on-cancel\n" in text


def test_docs_list_every_flag_and_gate() -> None:
    from pathlib import Path

    from kustomize_controller.settings import FLAGS

    doc = (Path(__file__).resolve().parents[3] / "docs" / "flags.md").read_text()
    for flag in FLAGS:
        assert f"`--{flag.name}`" in doc, flag.name
    for gate in FEATURE_GATE_DEFAULTS:
        assert f"`{gate}`" in doc, gate
