"""Live preflight checks for install and upgrade, as pure functions over what the cluster said.

`live.py` fetches (server version, nodes, namespace, secrets, other releases); these decide. The
node rules themselves (`maxSlotsPerPod` against GPU nodes, a CPU slot against allocatable CPU)
are `settings.node_rules.check_nodes`, shared with `det-k8s validate`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import Problem, Severity, ToolFailed
from ..settings import Settings
from ..settings.source import SourceMap

DOCUMENTED_RANGE = ((1, 19), (1, 21))
CHART_PREFIX = "determined-"


@dataclass(frozen=True)
class ReleaseRef:
    """One Determined release, from `helm list -o json` or from a labelled master Deployment."""

    name: str
    namespace: str
    chart: str = ""
    app_version: str = ""
    status: str = ""
    revision: str = ""

    @property
    def where(self) -> str:
        return f"{self.name} in namespace {self.namespace}"


def determined_releases(helm_list: Any) -> list[ReleaseRef]:
    """The entries of `helm list -o json` whose chart is Determined (`determined-<version>`).

    helm prints a list of objects; anything else (another helm's format, a plugin's output) is
    refused with one line rather than read as if it were one.
    """
    if helm_list is None:
        return []
    if not isinstance(helm_list, list):
        raise ToolFailed("helm list -o json printed JSON of another shape (expected a list of releases)",
                         returncode=0, hint="is --helm-binary / DET_K8S_HELM really helm 3 or 4?")
    out = []
    for entry in helm_list:
        if not isinstance(entry, dict):
            continue
        chart = str(entry.get("chart") or "")
        if chart.startswith(CHART_PREFIX):
            out.append(ReleaseRef(str(entry.get("name") or ""), str(entry.get("namespace") or ""), chart,
                                  str(entry.get("app_version") or ""), str(entry.get("status") or ""),
                                  str(entry.get("revision") or "")))
    return out


def releases_from_deployments(deployments: Sequence[Mapping[str, Any]]) -> list[ReleaseRef]:
    """Masters labelled app.kubernetes.io/name=determined (catches releases helm cannot list for us)."""
    out = []
    for obj in deployments:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        name = labels.get("app.kubernetes.io/instance") or labels.get("release")
        if name and str(meta.get("name", "")).startswith("determined-master-deployment-"):
            out.append(ReleaseRef(str(name), str(meta.get("namespace") or ""),
                                  app_version=str(labels.get("app.kubernetes.io/version") or "")))
    return out


def merge_releases(*groups: Sequence[ReleaseRef]) -> list[ReleaseRef]:
    seen: dict[tuple[str, str], ReleaseRef] = {}
    for group in groups:
        for ref in group:
            seen.setdefault((ref.name, ref.namespace), ref)
    return sorted(seen.values(), key=lambda r: (r.namespace, r.name))


def server_version_text(version: Mapping[str, Any]) -> str:
    return str(version.get("gitVersion") or f"v{version.get('major', '?')}.{version.get('minor', '?')}")


def check_server_version(version: Mapping[str, Any]) -> list[Problem]:
    """A warning outside the 1.19-1.21 range the Determined documents were tested on."""
    try:
        found = (int(str(version.get("major"))), int(re.sub(r"\D.*$", "", str(version.get("minor")))))
    except ValueError:
        return [Problem(Severity.WARNING, "", f"cannot tell the Kubernetes version ({version!r})")]
    low, high = DOCUMENTED_RANGE
    if low <= found <= high:
        return []
    return [Problem(Severity.WARNING, "", f"Kubernetes {server_version_text(version)} is outside the range the "
                    f"Determined documents test (1.{low[1]}-1.{high[1]}); later versions may work",
                    "watch the master's first start with det-k8s status")]


def check_namespace(namespace: str, exists: bool, create_namespace: bool) -> list[Problem]:
    if exists or create_namespace:
        return []
    return [Problem(Severity.ERROR, "", f"namespace {namespace} does not exist",
                    f"pass --create-namespace, or create it: kubectl create namespace {namespace}")]


def check_secrets(settings: Settings, namespace: str, existing: Collection[str],
                  sources: SourceMap | None = None) -> list[Problem]:
    """imagePullSecretName and tlsSecret must name Secrets in the release's namespace."""
    problems = []
    wanted = [
        ("imagePullSecretName", settings.image_pull_secret,
         f"kubectl create secret docker-registry {{name}} -n {namespace} --docker-server=REGISTRY "
         "--docker-username=USER --docker-password=PASSWORD"),
        ("tlsSecret", settings.tls_secret,
         f"kubectl create secret tls {{name}} -n {namespace} --cert=tls.crt --key=tls.key"),
    ]
    for key, name, command in wanted:
        if name and name not in existing:
            what = "the master image cannot be pulled" if key == "imagePullSecretName" else "the master cannot start"
            problems.append(Problem(Severity.ERROR, key, f"Secret {name} does not exist in namespace {namespace}: "
                                    f"{what}", f"create it first: {command.format(name=name)}",
                                    sources.find((key,)) if sources else None))
    return problems


def check_other_releases(release: str, namespace: str, releases: Sequence[ReleaseRef], *,
                         upgrading: bool) -> list[Problem]:
    """Install: this name must be free; upgrade: it must exist. Any other release: one per cluster."""
    problems = []
    mine = [r for r in releases if (r.name, r.namespace) == (release, namespace)]
    others = [r for r in releases if (r.name, r.namespace) != (release, namespace)]
    if mine and not upgrading:
        problems.append(Problem(Severity.ERROR, "", f"release {release} already exists in namespace {namespace}",
                                f"change it with det-k8s upgrade {release} -f ..."))
    if not mine and upgrading:
        problems.append(Problem(Severity.ERROR, "", f"no Determined release {release} in namespace {namespace}",
                                "det-k8s list -A shows the releases; det-k8s install creates one"))
    if others:
        names = ", ".join(r.where for r in others)
        problems.append(Problem(Severity.WARNING, "", f"the cluster already runs Determined ({names}); the documents "
                                "recommend one instance per cluster", "two masters compete for the same GPUs"))
    return problems
