"""Command-line flags and feature gates, exactly as upstream kustomize-controller takes them.

Upstream parses its flags with spf13/pflag, so we accept the same spellings:

- ``--name value`` and ``--name=value`` for every non-boolean flag;
- ``--name`` (true) and ``--name=true|false`` (also ``1/0/t/f/TRUE/FALSE/True/False``) for booleans —
  a boolean never consumes the next argument;
- repeated ``--override-manager`` accumulates (pflag ``StringArray``: no comma splitting);
- ``--feature-gates A=true,B=false`` (repeatable, later wins); an unknown gate is a start-up error
  ``feature-gate 'X' not supported``;
- durations in Go syntax (``30s``, ``1m30s``, ``750ms``).

Errors use pflag's wording (``unknown flag: --x``, ``flag needs an argument: --x``,
``invalid argument "v" for "--x" flag: ...``) so that users see what they would see upstream.

The result is one frozen :class:`Settings`; nothing here reads the environment except
:func:`runtime_namespace_from_env`, which the caller passes in explicitly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from kustomize_controller.api.crdgen import CONVERSION_SERVICE
from kustomize_controller.api.duration import parse_duration

# Feature gates with their defaults (upstream internal/features/features.go is authoritative).
FEATURE_GATE_DEFAULTS: Mapping[str, bool] = {
    "CacheSecretsAndConfigMaps": False,
    "DisableStatusPollerCache": True,
    "DisableFailFastBehavior": False,
    "StrictPostBuildSubstitutions": True,
    "GroupChangeLog": False,
    "AdditiveCELDependencyCheck": False,
    "ExternalArtifact": False,
    "CancelHealthCheckOnNewRevision": False,
    "DisableConfigWatchers": False,
    "DirectSourceFetch": False,
    "MigrateAPIVersion": False,
    "ObjectLevelWorkloadIdentity": False,
    # Ours, beyond upstream's defaults (docs/differences.md):
    "EnableDependencyQueueing": True,
    "HoldWorkerDuringHealthChecks": False,
}


class FlagError(ValueError):
    """A command line that upstream would also reject; the message is pflag's."""


@dataclass(frozen=True)
class FeatureGates:
    """The resolved state of every supported gate."""

    values: Mapping[str, bool] = field(default_factory=lambda: dict(FEATURE_GATE_DEFAULTS))

    def enabled(self, name: str) -> bool:
        try:
            return self.values[name]
        except KeyError:
            raise FlagError(f"feature-gate '{name}' not supported") from None

    @classmethod
    def parse(cls, specs: Sequence[str]) -> FeatureGates:
        """Parse ``--feature-gates`` values (``Name=bool`` pairs, comma separated)."""
        values = dict(FEATURE_GATE_DEFAULTS)
        for spec in specs:
            for item in spec.split(","):
                item = item.strip()
                if not item:
                    continue
                name, sep, raw = item.partition("=")
                name = name.strip()
                if not sep:
                    raise FlagError(
                        f'invalid argument "{spec}" for "--feature-gates" flag: missing bool value for {name}'
                    )
                try:
                    enabled = _parse_bool(raw.strip())
                except ValueError:
                    raise FlagError(
                        f'invalid argument "{spec}" for "--feature-gates" flag: '
                        f"invalid value of {name}={raw.strip()}, err: strconv.ParseBool: parsing "
                        f'"{raw.strip()}": invalid syntax'
                    ) from None
                if name not in values:
                    raise FlagError(f"feature-gate '{name}' not supported")
                values[name] = enabled
        return cls(values=values)


@dataclass(frozen=True)
class Settings:
    """Everything the controller is configured with, from flags (and explicit environment)."""

    metrics_addr: str = ":8080"
    events_addr: str = ""
    health_addr: str = ":9440"
    concurrent: int = 4
    concurrent_ssa: int = 4
    requeue_dependency: timedelta = timedelta(seconds=30)
    no_remote_bases: bool = False
    http_retry: int = 9
    default_service_account: str = ""
    default_decryption_service_account: str = ""
    default_kubeconfig_service_account: str = ""
    sops_age_secret: str = ""
    sops_vault_configmap: str = ""
    override_managers: tuple[str, ...] = ()
    custom_apply_stage_kinds: str = ""
    kube_api_qps: float = 50.0
    kube_api_burst: int = 300
    log_encoding: str = "json"
    log_level: str = "info"
    enable_leader_election: bool = False
    leader_election_release_on_cancel: bool = True
    leader_election_lease_duration: timedelta = timedelta(seconds=35)
    leader_election_renew_deadline: timedelta = timedelta(seconds=30)
    leader_election_retry_period: timedelta = timedelta(seconds=5)
    no_cross_namespace_refs: bool = False
    insecure_kubeconfig_exec: bool = False
    insecure_kubeconfig_tls: bool = False
    min_retry_delay: timedelta = timedelta(milliseconds=750)
    max_retry_delay: timedelta = timedelta(minutes=15)
    feature_gates: FeatureGates = field(default_factory=FeatureGates)
    watch_all_namespaces: bool = True
    watch_label_selector: str = ""
    watch_configs_label_selector: str = "reconcile.fluxcd.io/watch=Enabled"
    interval_jitter_percentage: int = 5
    token_cache_max_size: int = 100
    token_cache_max_duration: timedelta = timedelta(hours=1)
    kubeconfig: str = ""
    # Ours, beyond upstream:
    artifact_max_size: int = 256 * 1024 * 1024
    kustomize_binary: str = ""
    build_concurrency: int = 0  # 0 = twice the number of CPUs
    build_batch_size: int = 32  # queued builds one builder process may run together; 1 = each alone
    build_batch_wait: timedelta = timedelta(milliseconds=250)  # in a burst, how long a build waits for company
    artifact_cache_max_size: int = 256 * 1024 * 1024
    build_cache_max_size: int = 16 * 1024 * 1024
    concurrent_health_checks: int = 32
    runtime_namespace: str = ""
    progress_status_delay: timedelta = timedelta(seconds=2)
    sync_windows_configmap: str = ""  # NAMESPACE/NAME of the fleet-wide sync windows (change management)
    # Conversion webhook of the old Kustomization versions (issue 18; ":9443" as controller-runtime's).
    webhook_addr: str = ":9443"
    webhook_url: str = ""
    webhook_cert_dir: str = ""
    webhook_service: str = CONVERSION_SERVICE

    def custom_stage_group_kinds(self) -> list[tuple[str, str]]:
        """``--custom-apply-stage-kinds`` as (group, kind) pairs; ``Kind`` alone means the core group."""
        kinds: list[tuple[str, str]] = []
        for item in self.custom_apply_stage_kinds.split(","):
            item = item.strip()
            if not item:
                continue
            group, sep, kind = item.rpartition("/")
            kinds.append((group if sep else "", kind))
        return kinds


def _parse_bool(raw: str) -> bool:
    # strconv.ParseBool
    if raw in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if raw in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise ValueError(raw)


def _parse_int(raw: str) -> int:
    try:
        return int(raw, 0) if raw.lower().startswith(("0x", "0o", "0b")) else int(raw, 10)
    except ValueError:
        raise ValueError(f'strconv.ParseInt: parsing "{raw}": invalid syntax') from None


def _parse_uint8(raw: str) -> int:
    value = _parse_int(raw)
    if not 0 <= value <= 255:
        raise ValueError(f'strconv.ParseUint: parsing "{raw}": value out of range')
    return value


def _parse_float(raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f'strconv.ParseFloat: parsing "{raw}": invalid syntax') from None


def _parse_go_duration(raw: str) -> timedelta:
    try:
        return parse_duration(raw, strict=False)
    except ValueError:
        raise ValueError(f'time: invalid duration "{raw}"') from None


@dataclass(frozen=True)
class _Flag:
    name: str
    attr: str
    kind: str  # bool | int | uint8 | float | str | duration | array | gates
    help: str

    def convert(self, raw: str) -> Any:
        converters: dict[str, Callable[[str], Any]] = {
            "bool": _parse_bool,
            "int": _parse_int,
            "uint8": _parse_uint8,
            "float": _parse_float,
            "str": str,
            "duration": _parse_go_duration,
            "array": str,
            "gates": str,
        }
        return converters[self.kind](raw)


FLAGS: tuple[_Flag, ...] = (
    _Flag("metrics-addr", "metrics_addr", "str", "The address the metric endpoint binds to."),
    _Flag("events-addr", "events_addr", "str", "The address of the events receiver."),
    _Flag("health-addr", "health_addr", "str", "The address the health endpoint binds to."),
    _Flag("concurrent", "concurrent", "int", "The number of concurrent kustomize reconciles."),
    _Flag("concurrent-ssa", "concurrent_ssa", "int",
          "The number of concurrent server-side apply operations."),
    _Flag("requeue-dependency", "requeue_dependency", "duration",
          "The interval at which failing dependencies are reevaluated."),
    _Flag("no-remote-bases", "no_remote_bases", "bool",
          "Disallow remote bases usage in Kustomize overlays."),
    _Flag("http-retry", "http_retry", "int",
          "The maximum number of retries when failing to fetch artifacts over HTTP."),
    _Flag("default-service-account", "default_service_account", "str",
          "Default service account used for impersonation."),
    _Flag("default-decryption-service-account", "default_decryption_service_account", "str",
          "Default service account used for decryption."),
    _Flag("default-kubeconfig-service-account", "default_kubeconfig_service_account", "str",
          "Default service account used for kubeconfig."),
    _Flag("sops-age-secret", "sops_age_secret", "str",
          "The name of a Kubernetes secret in the RUNTIME_NAMESPACE containing a SOPS age decryption "
          "key for fallback usage."),
    _Flag("sops-vault-configmap", "sops_vault_configmap", "str",
          "The name of a ConfigMap in the RUNTIME_NAMESPACE configuring trusted Vault instances."),
    _Flag("override-manager", "override_managers", "array",
          "Field manager disallowed to perform changes on managed resources."),
    _Flag("custom-apply-stage-kinds", "custom_apply_stage_kinds", "str",
          "A comma-separated list of GroupKind applied in a stage after CRDs and classes."),
    _Flag("kube-api-qps", "kube_api_qps", "float",
          "The maximum queries-per-second of requests sent to the Kubernetes API."),
    _Flag("kube-api-burst", "kube_api_burst", "int",
          "The maximum burst queries-per-second of requests sent to the Kubernetes API."),
    _Flag("log-encoding", "log_encoding", "str", "Log encoding format. Can be 'json' or 'console'."),
    _Flag("log-level", "log_level", "str",
          "Log verbosity level. Can be one of 'trace', 'debug', 'info', 'error'."),
    _Flag("enable-leader-election", "enable_leader_election", "bool",
          "Enable leader election for controller manager."),
    _Flag("leader-election-release-on-cancel", "leader_election_release_on_cancel", "bool",
          "Defines if the leader should step down voluntarily on controller manager shutdown."),
    _Flag("leader-election-lease-duration", "leader_election_lease_duration", "duration",
          "Interval at which non-leader candidates will wait to force acquire leadership."),
    _Flag("leader-election-renew-deadline", "leader_election_renew_deadline", "duration",
          "Duration that the leading controller manager will retry refreshing leadership before giving up."),
    _Flag("leader-election-retry-period", "leader_election_retry_period", "duration",
          "Duration the LeaderElector clients should wait between tries of actions."),
    _Flag("no-cross-namespace-refs", "no_cross_namespace_refs", "bool",
          "When set to true, references between custom resources are allowed only if the reference "
          "and the referee are in the same namespace."),
    _Flag("insecure-kubeconfig-exec", "insecure_kubeconfig_exec", "bool",
          "Allow use of the user.exec section in kubeconfigs provided for remote apply."),
    _Flag("insecure-kubeconfig-tls", "insecure_kubeconfig_tls", "bool",
          "Allow that kubeconfigs provided for remote apply can disable TLS verification."),
    _Flag("min-retry-delay", "min_retry_delay", "duration",
          "The minimum amount of time for which an object being reconciled will have to wait "
          "before a retry."),
    _Flag("max-retry-delay", "max_retry_delay", "duration",
          "The maximum amount of time for which an object being reconciled will have to wait "
          "before a retry."),
    _Flag("feature-gates", "feature_gates", "gates",
          "A comma separated list of key=value pairs defining the state of experimental features."),
    _Flag("watch-all-namespaces", "watch_all_namespaces", "bool",
          "Watch for resources in all namespaces, if set to false it will only watch the runtime namespace."),
    _Flag("watch-label-selector", "watch_label_selector", "str",
          "Watch for resources with matching labels e.g. 'sharding.fluxcd.io/key=shard1'."),
    _Flag("watch-configs-label-selector", "watch_configs_label_selector", "str",
          "Watch for ConfigMaps and Secrets with matching labels."),
    _Flag("interval-jitter-percentage", "interval_jitter_percentage", "uint8",
          "Percentage of jitter to apply to interval durations."),
    _Flag("token-cache-max-size", "token_cache_max_size", "int",
          "The maximum size of the cache in number of tokens."),
    _Flag("token-cache-max-duration", "token_cache_max_duration", "duration",
          "The maximum duration a token is cached."),
    _Flag("kubeconfig", "kubeconfig", "str",
          "Paths to a kubeconfig. Only required if out-of-cluster."),
    _Flag("artifact-max-size", "artifact_max_size", "int",
          "The maximum size in bytes of a source artifact (ours; upstream has no limit)."),
    _Flag("kustomize-binary", "kustomize_binary", "str",
          "Path of the kustomize (or kubectl) binary used for builds (ours)."),
    _Flag("progress-status-delay", "progress_status_delay", "duration",
          "Publish a reconcile's progress states (Ready=Unknown, Reconciling messages) only once it has run "
          "this long; a quicker reconcile writes only its final status. 0s: every state, as upstream (ours)."),
    _Flag("build-concurrency", "build_concurrency", "int",
          "The number of kustomize builds run in parallel; 0 means twice the number of CPUs this process may use "
          "(its affinity capped by its cgroup CPU limit) (ours)."),
    _Flag("build-batch-size", "build_batch_size", "int",
          "The most queued kustomize builds one builder process runs together (each root still gets exactly its "
          "own build's output, or is built alone); 1 runs every build in its own process (ours)."),
    _Flag("build-batch-wait", "build_batch_wait", "duration",
          "In a burst of builds (another one submitted less than a second before, while other reconciles hold "
          "workers; health checks that gave theirs back do not count), how long a build that finds a builder "
          "free may wait for others to share its process; the wait ends as soon as half --concurrent builds are "
          "queued. A build outside a burst never waits; 0s turns waiting off (ours)."),
    _Flag("artifact-cache-max-size", "artifact_cache_max_size", "int",
          "The bytes of extracted source artifacts kept on disk for reuse; 0 keeps none once unused (ours)."),
    _Flag("build-cache-max-size", "build_cache_max_size", "int",
          "The bytes of rendered build outputs kept in memory for reuse; 0 disables the build cache (ours)."),
    _Flag("webhook-addr", "webhook_addr", "str",
          "The address the conversion webhook (old Kustomization versions) binds to; '0' disables it (ours)."),
    _Flag("webhook-url", "webhook_url", "str",
          "The URL the API server calls the conversion webhook at, when it cannot use the CRD's Service "
          "(out of cluster); 'auto' is https://<bound address>/convert (ours)."),
    _Flag("webhook-cert-dir", "webhook_cert_dir", "str",
          "A directory with tls.crt and tls.key (e.g. from cert-manager) to serve the conversion webhook "
          "with; the controller then issues no certificate and leaves the CRD's caBundle to cert-manager (ours)."),
    _Flag("webhook-service", "webhook_service", "str",
          "The Service (in the runtime namespace) in front of the conversion webhook, which the controller "
          "writes into the CRD's conversion when --webhook-url is not set (ours)."),
    _Flag("concurrent-health-checks", "concurrent_health_checks", "int",
          "The number of health checks that wait without holding one of the --concurrent workers; "
          "beyond it a health check holds its worker, as upstream (ours)."),
    _Flag("sync-windows-configmap", "sync_windows_configmap", "str",
          "NAMESPACE/NAME of a ConfigMap whose data.windows lists fleet-wide sync windows (allow/deny, "
          "cron, duration, time zone) selecting Kustomizations by namespace, name and labels (ours)."),
)
_BY_NAME = {f.name: f for f in FLAGS}


def parse_flags(
    argv: Sequence[str], *, runtime_namespace: str = "", strict_positionals: bool = True
) -> tuple[Settings, list[str]]:
    """Parse ``argv`` (without the program name) into Settings and the leftover positionals."""
    values: dict[str, Any] = {}
    overrides: list[str] = []
    gates: list[str] = []
    positionals: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            positionals.extend(argv[i:])
            break
        if not arg.startswith("-") or arg == "-":
            positionals.append(arg)
            continue
        if not arg.startswith("--"):
            # pflag treats a single dash as shorthand letters; we define none.
            raise FlagError(f"unknown shorthand flag: '{arg[1:2]}' in {arg}")
        name, has_value, raw = arg[2:].partition("=")
        flag = _BY_NAME.get(name)
        if flag is None:
            raise FlagError(f"unknown flag: --{name}")
        if flag.kind == "bool" and not has_value:
            raw = "true"
        elif not has_value:
            if i >= len(argv):
                raise FlagError(f"flag needs an argument: --{name}")
            raw = argv[i]
            i += 1
        try:
            value = flag.convert(raw)
        except ValueError as err:
            raise FlagError(f'invalid argument "{raw}" for "--{name}" flag: {err}') from None
        if flag.kind == "array":
            overrides.append(value)
        elif flag.kind == "gates":
            gates.append(value)
        else:
            values[flag.attr] = value
    if strict_positionals and positionals:
        raise FlagError(f"unexpected argument: {positionals[0]}")
    settings = Settings(
        **values,
        override_managers=tuple(overrides),
        feature_gates=FeatureGates.parse(gates),
        runtime_namespace=runtime_namespace,
    )
    validate(settings)
    return settings, positionals


def validate(settings: Settings) -> None:
    """Start-up checks upstream performs after parsing (and ours)."""
    if settings.interval_jitter_percentage >= 100:
        raise FlagError("the interval jitter percentage must be a non-negative value and less than 100")
    if settings.log_encoding not in ("json", "console"):
        raise FlagError(f"invalid log encoding '{settings.log_encoding}', must be 'json' or 'console'")
    if settings.log_level not in ("trace", "debug", "info", "error"):
        raise FlagError(f"invalid log level '{settings.log_level}', must be trace, debug, info or error")
    if settings.concurrent < 1:
        raise FlagError("--concurrent must be at least 1")
    if settings.concurrent_ssa < 1:
        raise FlagError("--concurrent-ssa must be at least 1")
    if settings.concurrent_health_checks < 0:
        raise FlagError("--concurrent-health-checks must not be negative")
    if settings.sync_windows_configmap:
        namespace, sep, name = settings.sync_windows_configmap.partition("/")
        if not (sep and namespace and name) or "/" in name:
            raise FlagError(f"--sync-windows-configmap {settings.sync_windows_configmap!r}: expected NAMESPACE/NAME")
    if not settings.feature_gates.enabled("ObjectLevelWorkloadIdentity") and (
        settings.default_decryption_service_account or settings.default_kubeconfig_service_account
    ):
        # fluxcd/pkg auth.ErrInconsistentObjectLevelConfiguration, upstream's exact text
        raise FlagError(
            "cannot set default service accounts when the feature gate ObjectLevelWorkloadIdentity is not enabled"
        )
    lease = settings.leader_election_lease_duration
    renew = settings.leader_election_renew_deadline
    retry = settings.leader_election_retry_period
    if settings.enable_leader_election and not (lease > renew > retry * 1.2):
        raise FlagError(
            "leader election: lease duration must be greater than renew deadline, "
            "and renew deadline greater than 1.2 x retry period"
        )


def replace(settings: Settings, **changes: Any) -> Settings:
    """A copy with some fields changed (for tests and derived configurations)."""
    return dataclasses.replace(settings, **changes)


def usage() -> str:
    """The flag list, pflag-style, for ``--help``."""
    defaults = Settings()
    lines = []
    for flag in FLAGS:
        value = getattr(defaults, flag.attr)
        kind = {"str": "string", "uint8": "uint8", "array": "stringArray", "gates": "mapStringBool"}.get(
            flag.kind, flag.kind
        )
        shown = ""
        if flag.kind == "duration":
            from kustomize_controller.api.duration import format_duration

            shown = f" (default {format_duration(value)})"
        elif flag.kind in ("str",) and value:
            shown = f' (default "{value}")'
        elif flag.kind in ("int", "uint8", "float") or (flag.kind == "bool" and value):
            shown = f" (default {str(value).lower() if isinstance(value, bool) else value})"
        type_name = "" if flag.kind == "bool" else f" {kind}"
        lines.append(f"      --{flag.name}{type_name}\n            {flag.help}{shown}")
    return "\n".join(lines)
