"""The release as the cluster shows it: what `det-k8s status` reports, and the wait for a release to be ready that
install, upgrade and rollback share. Reads only the Kubernetes API (no helm)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import ClusterError, DetK8sError, Forbidden, InputError, NotFound, OperationTimeout
from ..kube.kinds import DEPLOYMENTS, EVENTS, NODES, PODS, PVCS, SECRETS, SERVICES, STORAGECLASSES
from ..safe_read import load_yaml
from .address import master_address
from .diagnose import Observed, PodState, diagnose, pod_state
from .gpu_check import scheduling_problem
from .live import release_state
from .master_config import master_version, read_release_config, secrets_forbidden
from .names import db_app, db_deployment, db_pvc, master_app, master_deployment, master_service
from .readiness import Talk, progress_line, readiness

if TYPE_CHECKING:
    from ..determined.versions import Version
    from ..kube.api import KubeApi


def get_or_none(api: KubeApi, kind: Any, name: str, namespace: str) -> dict[str, Any] | None:
    try:
        return api.get(kind, name, namespace)
    except NotFound:
        return None


def list_or_empty(api: KubeApi, kind: Any, **kwargs: Any) -> list[dict[str, Any]]:
    try:
        return api.list(kind, **kwargs)
    except Forbidden:
        return []


def _external_host(api: KubeApi, release: str, namespace: str, version: Version | None,
                   notes: list[str]) -> str | None:
    """db.host from the master's configuration (a ConfigMap, or from 0.26.2 a Secret: only that key is read)."""
    try:
        config = read_release_config(api, release, namespace, version)
    except InputError:  # not base64 text: no host to show (the message would add nothing to the status)
        return None
    except Forbidden as exc:
        refused = secrets_forbidden(namespace, exc, "reading", "to see the external database host here")
        notes.append(f"{refused.message}; {refused.hint}")
        return None
    if config is None:
        return None
    try:
        master = load_yaml(config.text, config.where) or {}
    except InputError:
        return None
    host = (master.get("db") or {}).get("host") if isinstance(master, dict) else None
    return str(host) if host else None


def _newest(pods: list[PodState], objects: list[dict[str, Any]]) -> str | None:
    created = {(o.get("metadata") or {}).get("name"): (o.get("metadata") or {}).get("creationTimestamp", "")
               for o in objects}
    ordered = sorted(pods, key=lambda p: created.get(p.name, ""), reverse=True)
    return ordered[0].name if ordered else None


def _no_master(api: KubeApi, release: str, namespace: str) -> NotFound:
    """No master Deployment: what helm's record says of the release (a failed install, a stopped one) and the
    command that restores service, or where else to look."""
    said = f"release {release}: no master Deployment {master_deployment(release)} in namespace {namespace}"
    state = release_state(api, release, namespace)
    if state.revision is None or state.restore is None:
        return NotFound(said, hint="det-k8s list -A shows where Determined is installed")
    return NotFound(f"{said}; helm's record: revision {state.revision} is {state.status}",
                    hint=f"to restore service, run: {state.restore}")


def observe(api: KubeApi, release: str, namespace: str, tail: int,
            notes: list[str] | None = None) -> tuple[Observed, dict[str, Any], Any]:
    """What status reports; `notes` collects what could not be read (said after the spinner)."""
    deployment = get_or_none(api, DEPLOYMENTS, master_deployment(release), namespace)
    if deployment is None:
        raise _no_master(api, release, namespace)
    pod_spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    master_objs = api.list(PODS, namespace, label_selector=f"app={master_app(release)}")
    db_objs = api.list(PODS, namespace, label_selector=f"app={db_app(release)}")
    bundled = api.exists(DEPLOYMENTS, db_deployment(release), namespace)
    pull = [s.get("name", "") for s in pod_spec.get("imagePullSecrets") or [] if s.get("name")]
    tls = [v["secret"]["secretName"] for v in pod_spec.get("volumes") or []
           if v.get("name") == "tls-secret" and (v.get("secret") or {}).get("secretName")]
    secrets = {name: api.exists(SECRETS, name, namespace) for name in [*pull, *tls]}
    pvc = get_or_none(api, PVCS, db_pvc(release), namespace) if bundled else None
    pending_pvc = pvc is not None and (pvc.get("status") or {}).get("phase") == "Pending"
    classes = list_or_empty(api, STORAGECLASSES) if pending_pvc else []
    masters = [pod_state(p) for p in master_objs]
    dbs = [pod_state(p) for p in db_objs]
    scheduling: dict[str, str] = {}
    for pod in [*masters, *dbs]:
        if pod.phase == "Pending" and not pod.node:
            events = list_or_empty(api, EVENTS, namespace=namespace, field_selector=f"involvedObject.name={pod.name}")
            problem = scheduling_problem(events)
            if problem:
                scheduling[pod.name] = problem
    logs, newest = "", _newest(masters, master_objs)
    if newest:
        try:
            logs = api.logs(newest, namespace, container="determined-master", tail_lines=tail)
        except ClusterError as exc:
            logs = f"(no logs: {exc.message})"
    external = None if bundled else _external_host(api, release, namespace, master_version(deployment),
                                                   notes if notes is not None else [])
    observed = Observed(release, namespace, masters, dbs, bundled, external, pvc, classes, secrets, pull, logs,
                        scheduling)
    service = get_or_none(api, SERVICES, master_service(release), namespace)
    nodes = list_or_empty(api, NODES) if service and (service.get("spec") or {}).get("type") == "NodePort" else []
    address = master_address(service, nodes, tls=bool(tls), release=release, namespace=namespace)
    return observed, deployment, address


def wait_until_ready(api: KubeApi, release: str, namespace: str, seconds: float, shown: str, *,
                     interval: float = 2.0, report: Callable[[str], None] | None = None) -> None:
    """Wait until the release's master (and bundled database, and its volume) are ready, or raise OperationTimeout
    naming what is not ready and why (status's findings). Never waits for a load balancer's address
    (det_k8s/release/readiness.py says why). `report` gets a line saying what is not ready yet and why (the pods'
    reasons) at the first look, whenever that changes, and at least every 20 s (readiness.Talk)."""
    started = time.monotonic()
    deadline = started + seconds
    talk = Talk()
    while True:
        deployments: list[tuple[str, dict[str, Any] | None]] = [
            (master_deployment(release), get_or_none(api, DEPLOYMENTS, master_deployment(release), namespace))]
        claims: list[tuple[str, dict[str, Any] | None]] = []
        db = get_or_none(api, DEPLOYMENTS, db_deployment(release), namespace)
        if db is not None:
            deployments.append((db_deployment(release), db))
            claims.append((db_pvc(release), get_or_none(api, PVCS, db_pvc(release), namespace)))
        state = readiness(deployments, claims)
        if state.ready:
            return
        if report is not None and talk.due(state.waiting, time.monotonic()):
            pods = [*list_or_empty(api, PODS, namespace=namespace, label_selector=f"app={master_app(release)}"),
                    *(list_or_empty(api, PODS, namespace=namespace, label_selector=f"app={db_app(release)}")
                      if db is not None else [])]
            report(progress_line(state.waiting, pods, time.monotonic() - started, shown))
        if time.monotonic() >= deadline:
            break
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
    why = ""
    try:
        observed, _, _ = observe(api, release, namespace, 0)
        findings = diagnose(observed)
        why = "; ".join(f.problem for f in findings)
    except DetK8sError:
        pass
    raise OperationTimeout(
        f"release {release} is not ready after {shown}: {'; '.join(state.waiting)}"
        + (f" ({why})" if why else ""),
        hint=f"det-k8s status {release} -n {namespace} says what is wrong; raise --timeout if it is only slow")
