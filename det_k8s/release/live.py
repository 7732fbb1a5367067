"""The reads behind install/upgrade preflight and uninstall: the adapter and helm fetch, pure code decides.

Every function here only reads the cluster. A read the user's RBAC forbids (listing nodes or
Deployments cluster-wide is often denied to namespace admins) skips that check with a warning
instead of failing the command.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import Conflict, DetK8sError, Forbidden, NotFound, Problem, Severity, ToolFailed
from ..kube.api import KubeApi
from ..kube.kinds import (
    CONFIGMAPS,
    DEPLOYMENTS,
    JOBS,
    PODS,
    PRIORITYCLASSES,
    PVCS,
    PVS,
    SECRETS,
    SERVICES,
    STORAGECLASSES,
)
from ..kube.snapshot import read_nodes, read_snapshot
from ..labels import APP_NAME
from ..settings import LoadedSettings, Settings
from ..settings.node_rules import check_nodes
from ..settings.podspec import DEFAULT, KubeVersion, cluster_version, recheck_settings
from ..settings.source import SourceMap
from ..tools.helm import Helm, KubeFlags, list_argv
from . import pending, preflight, record
from .dryrun import dry_run_chart_objects, dry_run_pod_specs
from .kube_compat import check_kubernetes
from .names import db_deployment, db_pvc, master_deployment
from .readiness import deployment_waiting
from .storage_hook import check_checkpoint_storage
from .tasks import MASTER_TASKS, TaskUnits, is_live, is_master_task, only_task_pods, owning_job, units
from .uninstall_effects import LossSummary, summarize


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
        deployments = api.list(DEPLOYMENTS, all_namespaces=True, label_selector=f"{APP_NAME}=determined")
    except Forbidden:
        deployments = []
    refs = preflight.merge_releases(preflight.determined_releases(listed),
                                    preflight.releases_from_deployments(deployments))
    return refs, problems


def run_preflight(api: KubeApi, helm: Helm, loaded: LoadedSettings, settings: Settings, release: str,
                  kube: KubeFlags, *, create_namespace: bool, upgrading: bool,
                  skip_storage_check: bool, pod_specs_checked: KubeVersion = DEFAULT,
                  user_chart: bool = False, manifests: str | None = None) -> list[Problem]:
    """Everything the live cluster says about installing these settings; `pod_specs_checked` is the Kubernetes
    version the settings' pod specs were checked against offline (they are checked again against the cluster's);
    `user_chart`: the chart is the user's (--chart), not det-k8s's bundled one; `manifests`: the objects helm would
    apply, sent to the API server as a dry run."""
    namespace = kube.namespace or api.namespace
    try:
        version = api.server_version()  # also proves the cluster answers
    except Forbidden as exc:
        version = None
        problems = [_skipped("Kubernetes version checks (and pod specs against its version)", exc)]
    if version is not None:
        problems = check_kubernetes(version, default_scheduler=settings.default_scheduler,
                                    app_version=settings.app_version, user_chart=user_chart,
                                    plugin=settings.values.get("gangScheduler") == "plugin")
        problems += recheck_settings(loaded.values, loaded.sources, pod_specs_checked, cluster_version(version))
        if not any(p.is_error for p in problems):
            there = api.namespace_exists(namespace)
            if there:
                problems += dry_run_pod_specs(api, loaded.values, loaded.sources, namespace)
            if manifests is not None and not any(p.is_error for p in problems):
                problems += dry_run_chart_objects(api, manifests, namespace, loaded.sources, user_chart=user_chart,
                                                  namespace_exists=there)
    try:
        nodes = read_nodes(api)
        try:
            snapshot = read_snapshot(api)
            pods: tuple[Any, ...] = snapshot.pods  # what determined-system and DaemonSet pods hold
            view: Any = snapshot.devices  # GPUs DRA manages (cluster/dra.py)
            quotas: tuple[Any, ...] = snapshot.quotas
        except Forbidden:
            pods, view, quotas = (), None, ()
        origin = f"cluster {api.target.context}"
        problems += check_nodes(settings, nodes, loaded.sources, origin, pods, view)
        if not user_chart:  # the bundled chart's master and database pods, as its templates make them
            problems += preflight.check_system_pods(preflight.system_pods(settings.values, upgrading=upgrading), nodes,
                                                    quotas, namespace, loaded.sources, origin)
    except Forbidden as exc:
        problems.append(_skipped("node checks", exc))
    problems += priority_class_problems(api, release, settings, upgrading=upgrading)
    exists = api.namespace_exists(namespace)
    problems += preflight.check_namespace(namespace, exists, create_namespace)
    wanted = [n for n in (settings.image_pull_secret, settings.tls_secret) if n]
    present = {n for n in wanted if exists and api.exists(SECRETS, n, namespace)}
    problems += preflight.check_secrets(settings, namespace, present, loaded.sources)
    problems += database_volume_problems(api, loaded.values, release, namespace, loaded.sources)
    releases, skipped = other_releases(api, helm, kube)
    problems += skipped + preflight.check_other_releases(release, namespace, releases, upgrading=upgrading)
    if not skip_storage_check:
        problems += check_checkpoint_storage(settings)
    return problems


def database_volume_problems(api: KubeApi, values: Mapping[str, Any], release: str, namespace: str,
                             sources: SourceMap | None = None) -> list[Problem]:
    """Can the bundled database's volume bind? (preflight.check_database_volume decides.)"""
    db = values.get("db") if isinstance(values.get("db"), Mapping) else {}
    if isinstance(db, Mapping) and (db.get("hostAddress") or db.get("disablePVC")):
        return []
    try:
        classes = api.list(STORAGECLASSES)
        volumes = api.list(PVS)
        claim = api.get(PVCS, db_pvc(release), namespace) if api.exists(PVCS, db_pvc(release), namespace) else None
    except Forbidden as exc:
        return [_skipped("the database volume check (StorageClasses, PersistentVolumes)", exc)]
    return preflight.check_database_volume(values, classes, volumes, claim, sources)


def priority_class_problems(api: KubeApi, release: str, settings: Settings, *, upgrading: bool) -> list[Problem]:
    """The chart's PriorityClasses against those in the cluster (preflight.check_priority_classes decides)."""
    try:
        existing = api.list(PRIORITYCLASSES)
    except Forbidden as exc:
        return [_skipped("PriorityClass check", exc)]
    create = bool(settings.values.get("createNonNamespacedObjects", True))
    return preflight.check_priority_classes(existing, release, api.namespace, create=create, upgrading=upgrading)


def running_tasks(api: KubeApi, namespace: str) -> list[dict[str, Any]]:
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


def stuck_release(api: KubeApi, release: str, namespace: str) -> pending.Stuck | None:
    """The release if helm left it pending-install/-upgrade/-rollback (release/pending.py); None when it is not, or
    when helm's records cannot be read (the command goes on, and helm says what it finds)."""
    found: list[pending.Record] = []
    for kind in (SECRETS, CONFIGMAPS):
        try:
            found += pending.records(api.list(kind, namespace, label_selector=f"owner=helm,name={release}"), release)
        except DetK8sError:  # unreadable (RBAC, a 5xx, a timeout): helm says what it finds
            continue
    return pending.stuck(sorted(found, key=lambda r: r.revision), release, namespace)


def task_units(api: KubeApi, namespace: str | None, *, all_namespaces: bool = False,
               selector: str | None = None) -> tuple[TaskUnits, list[str]]:
    """The master's task objects (labelled `determined`, never det-k8s's), `selector` narrowing them: its Jobs
    (0.34+) with their pods, its bare pods, their ConfigMaps; and notes on what could not be read.

    A selected pod of a Job the selector left out brings its Job in (read by name), so the unit goes whole.
    Listing Jobs forbidden (RBAC without batch) leaves those pods held, never deleted alone.
    """
    where: dict[str, Any] = {"all_namespaces": all_namespaces}
    chosen = only_task_pods(selector)
    notes: list[str] = []
    pods = api.list(PODS, namespace, label_selector=chosen, **where)
    every_pod = pods if selector is None else api.list(PODS, namespace, label_selector=MASTER_TASKS, **where)
    try:
        jobs = api.list(JOBS, namespace, label_selector=chosen, **where)
    except Forbidden as exc:
        jobs = []
        notes.append(f"Determined's task Jobs (0.34 and later) not read: {exc.message}; grant list and delete on "
                     "jobs.batch, or delete them with kubectl delete job")
    listed = {((j.get("metadata") or {}).get("namespace"), (j.get("metadata") or {}).get("name")) for j in jobs}
    for pod_ns, job in sorted({(str((p.get("metadata") or {}).get("namespace") or ""), owning_job(p)) for p in pods
                               if owning_job(p)}):
        if (pod_ns, job) in listed or job is None:
            continue
        try:
            found = api.get(JOBS, job, pod_ns)
        except NotFound:  # the Job is gone: the garbage collector deletes its pods
            continue
        except Forbidden as exc:
            notes.append(f"Job {pod_ns}/{job} not read: {exc.message}")
            continue
        if is_master_task(found):
            jobs.append(found)
    configmaps = api.list(CONFIGMAPS, namespace, label_selector=MASTER_TASKS, **where)
    return units(jobs, pods, configmaps, every_pod), notes


def delete_task_units(api: KubeApi, found: TaskUnits) -> dict[str, int]:
    """Delete Jobs (propagationPolicy Background: the garbage collector deletes their pods; a Job's pod is never
    deleted alone), then bare pods, then ConfigMaps. Counts what was deleted (gone already: not counted)."""
    deleted = {"jobs": 0, "pods": 0, "configmaps": 0}
    for key, kind, objects in (("jobs", JOBS, found.jobs), ("pods", PODS, found.pods),
                               ("configmaps", CONFIGMAPS, found.configmaps)):
        for obj in objects:
            meta = obj.get("metadata") or {}
            deleted[key] += api.delete(kind, str(meta.get("name") or ""), meta.get("namespace"), missing_ok=True)
    return deleted


def held_lines(found: TaskUnits) -> list[str]:
    """What is left alone and why: pods of a Job det-k8s does not delete."""
    return [f"not deleted: pod(s) {', '.join(pods)} of Job {ns}/{job}, which det-k8s could not read as the "
            f"master's; deleting a Job's pod alone does not stop it: kubectl delete job {job} -n {ns}"
            for (ns, job), pods in sorted(found.held.items())]


def uninstall_summary(api: KubeApi, release: str, namespace: str, *, delete_data: bool,
                      keep_pods: bool) -> tuple[LossSummary, Mapping[str, Any] | None, list[str]]:
    """What goes and what stays; also the database PVC (for --delete-data) and notes on what was not read."""
    objects: list[dict[str, Any]] = []
    for kind in (DEPLOYMENTS, SERVICES, CONFIGMAPS, SECRETS):
        objects += api.list(kind, namespace, label_selector=f"release={release}")
    pvc = api.get(PVCS, db_pvc(release), namespace) if api.exists(PVCS, db_pvc(release), namespace) else None
    tasks, notes = task_units(api, namespace)
    volume = None
    bound = str(((pvc or {}).get("spec") or {}).get("volumeName") or "")
    if bound:  # what deleting the claim does to its PersistentVolume (reclaimPolicy Retain keeps it, and the data)
        try:
            volume = api.get(PVS, bound)
        except (NotFound, Forbidden) as exc:
            notes.append(f"the database's PersistentVolume {bound} could not be read ({exc.message}): whether it "
                         "keeps the data once its claim is deleted depends on its reclaimPolicy")
    summary = summarize(release, namespace, objects, bundled_db=api.exists(DEPLOYMENTS, db_deployment(release),
                                                                             namespace),
                        pvc=pvc, task_pods=len(tasks.pods), task_configmaps=len(tasks.configmaps),
                        delete_data=delete_data, keep_pods=keep_pods, task_jobs=len(tasks.jobs),
                        job_pods=tasks.pod_count - len(tasks.pods), volume=volume)
    return summary, pvc, notes


def release_revisions(api: KubeApi, release: str, namespace: str) -> list[record.Revision]:
    """helm's records of `release` (release/record.py), oldest first: its Secrets, else its ConfigMaps
    (HELM_DRIVER=configmap); none when neither holds any or they cannot be read."""
    for kind, name in ((SECRETS, "Secret"), (CONFIGMAPS, "ConfigMap")):
        try:
            found = record.revisions(api.list(kind, namespace, label_selector=f"owner=helm,name={release}"), release,
                                     name)
        except DetK8sError:
            continue
        if found:
            return found
    return []


def _patch_record(api: KubeApi, found: record.Revision, patch: Mapping[str, Any], namespace: str) -> None:
    api.patch(SECRETS if found.kind == "Secret" else CONFIGMAPS, found.name, patch, namespace)


def mark_failed(api: KubeApi, release: str, namespace: str, description: str,
                revision: int | None = None) -> record.Revision | None:
    """Mark `revision` (the latest by default) of `release` failed in helm's own record, saying why; the record
    marked, or None when there is none to mark (the release is gone). Raises DetK8sError when it cannot be written
    (RBAC, a record helm changed three times meanwhile, one det-k8s cannot read)."""
    for _ in range(3):
        found = release_revisions(api, release, namespace)
        chosen = [r for r in found if revision is None or r.revision == revision]
        if not chosen:
            return None
        target = chosen[-1]
        try:
            patch = record.failed_patch(target, description)
        except record.RecordError as exc:
            raise DetK8sError(f"helm's record {target.name} of release {release}: {exc}") from exc
        try:
            _patch_record(api, target, patch, namespace)
        except Conflict:  # helm (or another det-k8s) rewrote it meanwhile: read it again
            continue
        return target
    raise DetK8sError(f"helm's record of release {release} kept changing; it was not marked failed")


def mark_ready(api: KubeApi, release: str, namespace: str) -> record.Revision | None:
    """Label the latest revision of `release` as one det-k8s saw ready (what `rollback` without a revision goes
    back to); the record labelled, or None when there is none."""
    found = release_revisions(api, release, namespace)
    if not found:
        return None
    _patch_record(api, found[-1], record.ready_patch(found[-1]), namespace)
    return found[-1]


def release_state(api: KubeApi, release: str, namespace: str) -> record.State:
    """Where `release` stands, read back from helm's record and the cluster (release/record.py:state)."""
    name = master_deployment(release)
    try:
        deployment = api.get(DEPLOYMENTS, name, namespace)
    except NotFound:
        deployment = None
    waiting = deployment_waiting(deployment, name) if deployment is not None else None
    return record.state(release_revisions(api, release, namespace), release, namespace,
                        name if deployment is not None else None, waiting)
