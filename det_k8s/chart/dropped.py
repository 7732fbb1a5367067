"""Did the settings reach the master? The master configuration a chart rendered, against what the user set.

`det-k8s render --chart` and `install --chart` put the settings into a chart det-k8s did not write (the
official chart of some release). Such a chart may silently drop a setting: the 0.17.15 official chart writes no
`checkpointStorage.prefix`, so checkpoints land at the bucket's root while `det-k8s checkpoint check` probed
under the prefix. After `helm template`, the master's configuration (the ConfigMap or Secret
`determined-master-config-<release>`, key `master.yaml`) is read back and every setting the user gave that
has a place in master.yaml but is not there is reported, and a number it rewrote (the official charts' `default 1`
turns a 0 into 1). Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

from ..determined.versions import master_keys
from ..errors import Problem, Severity
from ..settings.problems import get_path
from ..settings.source import SourceMap, format_path

# settings key -> the master.yaml key it becomes (the official charts' mapping, every supported release)
_CS = "checkpoint_storage"
_RM = "resource_manager"
_TCD = "task_container_defaults"
REACHES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    *((("checkpointStorage", ours), (_CS, theirs)) for ours, theirs in (
        ("type", "type"), ("hostPath", "host_path"), ("bucket", "bucket"), ("prefix", "prefix"),
        ("accessKey", "access_key"), ("secretKey", "secret_key"), ("endpointUrl", "endpoint_url"),
        ("container", "container"), ("connection_string", "connection_string"), ("account_url", "account_url"),
        ("credential", "credential"), ("containerPath", "container_path"), ("hdfsUrl", "hdfs_url"),
        ("hdfsPath", "hdfs_path"))),
    (("db", "hostAddress"), ("db", "host")), (("db", "user"), ("db", "user")), (("db", "name"), ("db", "name")),
    (("db", "port"), ("db", "port")), (("db", "sslMode"), ("db", "ssl_mode")),
    (("db", "sslRootCert"), ("db", "ssl_root_cert")),
    (("tlsSecret",), ("security", "tls", "cert")),
    (("initialUserPassword",), ("security", "initial_user_password")),
    (("security", "defaultTask"), ("security", "default_task")),
    (("maxSlotsPerPod",), (_RM, "max_slots_per_pod")),
    (("slotResourceRequests", "cpu"), (_RM, "slot_resource_requests", "cpu")),
    (("defaultScheduler",), (_RM, "default_scheduler")),
    (("fluent", "image"), (_RM, "fluent", "image")),
    (("resourceManager", "defaultNamespace"), (_RM, "default_namespace")),
    (("resourceManager", "clusterName"), (_RM, "cluster_name")),
    (("determinedMasterHost",), (_RM, "determined_master_host")),
    (("defaultAuxResourcePool",), (_RM, "default_aux_resource_pool")),
    (("defaultComputeResourcePool",), (_RM, "default_compute_resource_pool")),
    (("resourcePools",), ("resource_pools",)),
    *((("taskContainerDefaults", ours), (_TCD, *theirs)) for ours, theirs in (
        ("cpuImage", ("image", "cpu")), ("gpuImage", ("image", "gpu")), ("rocmImage", ("image", "rocm")),
        ("networkMode", ("network_mode",)), ("dtrainNetworkInterface", ("dtrain_network_interface",)),
        ("ncclPortRange", ("nccl_port_range",)), ("glooPortRange", ("gloo_port_range",)),
        ("cpuPodSpec", ("cpu_pod_spec",)), ("gpuPodSpec", ("gpu_pod_spec",)),
        ("checkpointGcPodSpec", ("checkpoint_gc_pod_spec",)), ("logPolicies", ("log_policies",)),
        ("startupHook", ("startup_hook",)))),
    (("clusterName",), ("cluster_name",)),
    (("logLevel",), ("log", "level")),
    (("observability", "enable_prometheus"), ("observability", "enable_prometheus")),
    (("tensorboardTimeout",), ("tensorboard_timeout",)), (("notebookTimeout",), ("notebook_timeout",)),
    (("retentionPolicy", "logRetentionDays"), ("retention_policy", "log_retention_days")),
    (("retentionPolicy", "schedule"), ("retention_policy", "schedule")),
    (("logging", "type"), ("logging", "type")), (("logging", "host"), ("logging", "host")),
    (("logging", "port"), ("logging", "port")),
)


# settings that some charts rewrite rather than drop: the official charts write `{{ .x | default 1 }}`, and helm's
# `default` takes 0 and false for unset, so a 0 reaches the master as 1 (and logColor: false as true)
CHANGES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = tuple(
    (("checkpointStorage", ours), (_CS, theirs)) for ours, theirs in (
        ("saveExperimentBest", "save_experiment_best"), ("saveTrialBest", "save_trial_best"),
        ("saveTrialLatest", "save_trial_latest"))) + ((("logColor",), ("log", "color")),)


def master_config(manifests: str, release: str) -> dict[str, Any] | None:
    """master.yaml of `determined-master-config-<release>` (ConfigMap or Secret) in a rendered stream."""
    name = f"determined-master-config-{release}"
    for doc in yaml.safe_load_all(manifests):
        if not isinstance(doc, dict) or (doc.get("metadata") or {}).get("name") != name:
            continue
        data = doc.get("data") or doc.get("stringData") or {}
        text = data.get("master.yaml") if isinstance(data, dict) else None
        if isinstance(text, str):
            loaded = yaml.safe_load(text)
            return loaded if isinstance(loaded, dict) else {}
    return None


def unreached(user_values: Mapping[str, Any], config: Mapping[str, Any], chart: str, sources: SourceMap,
              *, severity: Severity = Severity.ERROR) -> list[Problem]:
    """Every setting the user gave (not null, not empty) whose master.yaml key the chart did not write."""
    problems = []
    for ours, theirs in REACHES:
        value = get_path(user_values, ours)
        if value in (None, "", [], {}) or (ours == ("defaultScheduler",) and not str(value).strip()):
            continue
        if get_path(config, theirs) in (None, ""):
            problems.append(Problem(
                severity, format_path(ours), f"set, but the master configuration {chart} renders has no "
                f"{'.'.join(theirs)}: the setting would be silently dropped",
                "remove it, or use a chart that writes it (det-k8s's bundled chart does)", sources.find(ours)))
    for ours, theirs in CHANGES:
        value, rendered = get_path(user_values, ours), get_path(config, theirs)
        if isinstance(value, int) and type(rendered) is type(value) and rendered != value:
            shown, got = (json.dumps(v) for v in (value, rendered))  # false/true as in YAML
            problems.append(Problem(
                severity, format_path(ours), f"set to {shown}, but the master configuration {chart} renders it as "
                f"{'.'.join(theirs)}: {got}", f"use det-k8s's bundled chart, which writes {shown}",
                sources.find(ours)))
    return problems


# The parts of master.yaml the master parses strictly (unknown fields stop it at start, the facts document's §5.1);
# task_container_defaults and resource_pools ignore unknown keys, and the free-form parts are not walked.
_STRICT = ("port", "log", "db", "security", "telemetry", "resource_manager", "checkpoint_storage", "logging",
           "cluster_name", "observability", "tensorboard_timeout", "notebook_timeout", "retention_policy")
_FREE_FORM = frozenset({"checkpoint_storage", "security.authz"})


def _leaves(config: Mapping[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in config.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and path not in _FREE_FORM:
            out.extend(_leaves(value, path + "."))
        elif value is not None:
            out.append(path)
    return out


def unparsed(config: Mapping[str, Any], version: Any, chart: str) -> list[Problem]:
    """Keys a user's chart wrote into the strictly parsed parts of master.yaml that the release `version` does not
    parse (the version table's `master.yaml:` rows): a chart of another release, whose master would not start."""
    table = master_keys(version)
    found = [path for path in _leaves(config) if path.split(".")[0] in _STRICT and path not in table]
    return [Problem(Severity.WARNING, "appVersion", f"{chart} writes {path} into the master configuration, which "
                    f"Determined {version} does not parse: its master refuses unknown keys there and does not start",
                    "set appVersion to the release the chart is for, or use det-k8s's bundled chart")
            for path in found]


def deployed_schedulers(manifests: str) -> list[str]:
    """The kube-schedulers a rendered stream deploys: `<Deployment> in <namespace> (<image>)` for each Deployment
    whose containers run with `--scheduler-name` (the official charts' coscheduling plugin, kube-scheduler 1.18.9)."""
    found = []
    for doc in yaml.safe_load_all(manifests):
        if not isinstance(doc, dict) or doc.get("kind") != "Deployment":
            continue
        meta = doc.get("metadata") or {}
        pod = ((doc.get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in pod.get("containers") or ():
            words = [str(w) for w in (container.get("command") or []) + (container.get("args") or [])]
            if any(w.startswith("--scheduler-name") for w in words):
                found.append(f"{meta.get('name')} in {meta.get('namespace') or 'the release namespace'} "
                             f"({container.get('image')})")
                break
    return found
