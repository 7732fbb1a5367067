"""The reads behind install/upgrade preflight and uninstall: the adapter and helm fetch, pure code decides.

Every function here only reads the cluster. A read the user's RBAC forbids (listing nodes or
Deployments cluster-wide is often denied to namespace admins) skips that check with a warning
instead of failing the command.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import Forbidden, Problem, Severity, ToolFailed
from ..kube.api import KubeApi
from ..kube.kinds import CONFIGMAPS, DEPLOYMENTS, PODS, PRIORITYCLASSES, PVCS, SECRETS, SERVICES
from ..kube.snapshot import read_nodes, read_snapshot
from ..settings import LoadedSettings, Settings
from ..settings.node_rules import check_nodes
from ..settings.podspec import DEFAULT, KubeVersion, cluster_version, recheck_settings
from ..tools.helm import Helm, KubeFlags, list_argv
from . import preflight
from .kube_compat import check_kubernetes
from .loss import LossSummary, summarize
from .names import db_deployment, db_pvc, master_deployment
from .storage_hook import check_checkpoint_storage
from .tasks import MASTER_TASKS


def _skipped(what: str, exc: Forbidden) -> Problem:
    return Problem(Severity.WARNING, "", f"{what} skipped: {exc.message}")


def other_releases(api: KubeApi, helm: Helm, kube: KubeFlags) -> tuple[list[preflight.ReleaseRef], list[Problem]]:
    """Determined releases anywhere: helm's list across namespaces and labelled master Deployments.

    A namespace admin may not list helm's release Secrets cluster-wide; then the release's own
    namespace is listed instead and the cluster-wide check is reported as skipped.
    """
    problems: list[Problem] = []
    try:
        listed = helm.json(list_argv(helm.major, KubeFlags(None, kube.kube_context, kube.kubeconfig),
                                     all_namespaces=True))
    except (ToolFailed, Forbidden) as exc:
        problems.append(Problem(Severity.WARNING, "", f"other namespaces not checked for Determined releases: {exc}"))
        listed = helm.json(list_argv(helm.major, kube))
    try:
        deployments = api.list(DEPLOYMENTS, all_namespaces=True, label_selector="app.kubernetes.io/name=determined")
    except Forbidden:
        deployments = []
    refs = preflight.merge_releases(preflight.determined_releases(listed),
                                    preflight.releases_from_deployments(deployments))
    return refs, problems


def run_preflight(api: KubeApi, helm: Helm, loaded: LoadedSettings, settings: Settings, release: str,
                  kube: KubeFlags, *, create_namespace: bool, upgrading: bool,
                  skip_storage_check: bool, pod_specs_checked: KubeVersion = DEFAULT) -> list[Problem]:
    """Everything the live cluster says about installing these settings; `pod_specs_checked` is the Kubernetes
    version the settings' pod specs were checked against offline (they are checked again against the cluster's)."""
    namespace = kube.namespace or api.namespace
    try:
        version = api.server_version()  # also proves the cluster answers
    except Forbidden as exc:
        version = None
        problems = [_skipped("Kubernetes version checks (and pod specs against its version)", exc)]
    if version is not None:
        problems = check_kubernetes(version, default_scheduler=settings.default_scheduler,
                                    app_version=settings.app_version)
        problems += recheck_settings(loaded.values, loaded.sources, pod_specs_checked, cluster_version(version))
    try:
        nodes = read_nodes(api)
        try:
            pods: tuple[Any, ...] = read_snapshot(api).pods  # what determined-system and DaemonSet pods hold
        except Forbidden:
            pods = ()
        problems += check_nodes(settings, nodes, loaded.sources, f"cluster {api.target.context}", pods)
    except Forbidden as exc:
        problems.append(_skipped("node checks", exc))
    problems += priority_class_problems(api, release, settings, upgrading=upgrading)
    exists = api.namespace_exists(namespace)
    problems += preflight.check_namespace(namespace, exists, create_namespace)
    wanted = [n for n in (settings.image_pull_secret, settings.tls_secret) if n]
    present = {n for n in wanted if exists and api.exists(SECRETS, n, namespace)}
    problems += preflight.check_secrets(settings, namespace, present, loaded.sources)
    releases, skipped = other_releases(api, helm, kube)
    problems += skipped + preflight.check_other_releases(release, namespace, releases, upgrading=upgrading)
    if not skip_storage_check:
        problems += check_checkpoint_storage(settings)
    return problems


def priority_class_problems(api: KubeApi, release: str, settings: Settings, *, upgrading: bool) -> list[Problem]:
    """The chart's PriorityClasses against those in the cluster (preflight.check_priority_classes decides)."""
    try:
        existing = api.list(PRIORITYCLASSES)
    except Forbidden as exc:
        return [_skipped("PriorityClass check", exc)]
    create = bool(settings.values.get("createNonNamespacedObjects", True))
    return preflight.check_priority_classes(existing, release, api.namespace, create=create, upgrading=upgrading)


def running_tasks(api: KubeApi, namespace: str) -> list[dict[str, Any]]:
    from .tasks import is_live

    return [p for p in api.list(PODS, namespace, label_selector=MASTER_TASKS) if is_live(p)]


def release_exists(api: KubeApi, release: str, namespace: str) -> bool:
    """helm keeps each release as Secrets (or ConfigMaps) labelled owner=helm,name=<release>."""
    selector = f"owner=helm,name={release}"
    for kind in (SECRETS, CONFIGMAPS):
        try:
            if api.list(kind, namespace, label_selector=selector):
                return True
        except Forbidden:
            continue
    return api.exists(DEPLOYMENTS, master_deployment(release), namespace)


def uninstall_summary(api: KubeApi, release: str, namespace: str, *, delete_data: bool,
                      keep_pods: bool) -> tuple[LossSummary, Mapping[str, Any] | None]:
    """What goes and what stays; also returns the database PVC (for --delete-data)."""
    objects: list[dict[str, Any]] = []
    for kind in (DEPLOYMENTS, SERVICES, CONFIGMAPS, SECRETS):
        objects += api.list(kind, namespace, label_selector=f"release={release}")
    pvc = api.get(PVCS, db_pvc(release), namespace) if api.exists(PVCS, db_pvc(release), namespace) else None
    pods = api.list(PODS, namespace, label_selector=MASTER_TASKS)
    configmaps = api.list(CONFIGMAPS, namespace, label_selector=MASTER_TASKS)
    summary = summarize(release, namespace, objects, bundled_db=api.exists(DEPLOYMENTS, db_deployment(release),
                                                                             namespace),
                        pvc=pvc, task_pods=len(pods), task_configmaps=len(configmaps), delete_data=delete_data,
                        keep_pods=keep_pods)
    return summary, pvc
