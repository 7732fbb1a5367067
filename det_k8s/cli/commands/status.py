"""`det-k8s status RELEASE`: is the master up, where is it, and if not, why (in the documents' terms).

Reads only the Kubernetes API (no helm): the master Deployment and its pods, the Service, the
database pod and volume, the configured Secrets, the pods' scheduling events and the master's
last log lines. `det_k8s.release.diagnose` turns them into findings. Exit 0 when the master is
ready and nothing is wrong, 1 otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ...errors import ClusterError, DetK8sError, Forbidden, InputError, NotFound
from ...labels import APP_INSTANCE, APP_NAME, SERVED_BY, SERVING
from .. import output
from ..options import OutputOpt, current, with_global_options
from ..output import OutputFormat

if TYPE_CHECKING:
    from ...determined.versions import Version
    from ...kube.api import KubeApi
    from ...release.diagnose import Finding, Observed, PodState


def _get(api: KubeApi, kind: Any, name: str, namespace: str) -> dict[str, Any] | None:
    try:
        return api.get(kind, name, namespace)
    except NotFound:
        return None


def _list_or_empty(api: KubeApi, kind: Any, **kwargs: Any) -> list[dict[str, Any]]:
    try:
        return api.list(kind, **kwargs)
    except Forbidden:
        return []


def _external_host(api: KubeApi, release: str, namespace: str, version: Version | None,
                   notes: list[str]) -> str | None:
    """db.host from the master's configuration (a ConfigMap, or from 0.26.2 a Secret: only that key is read)."""
    from ...release.master_config import read_release_config, secrets_forbidden
    from ...safe_read import load_yaml

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
    from ...release.live import release_state
    from ...release.names import master_deployment

    said = f"release {release}: no master Deployment {master_deployment(release)} in namespace {namespace}"
    state = release_state(api, release, namespace)
    if state.revision is None or state.restore is None:
        return NotFound(said, hint="det-k8s list -A shows where Determined is installed")
    return NotFound(f"{said}; helm's record: revision {state.revision} is {state.status}",
                    hint=f"to restore service, run: {state.restore}")


def observe(api: KubeApi, release: str, namespace: str, tail: int,
            notes: list[str] | None = None) -> tuple[Observed, dict[str, Any], Any]:
    """What status reports; `notes` collects what could not be read (said after the spinner)."""
    from ...kube.kinds import DEPLOYMENTS, EVENTS, NODES, PODS, PVCS, SECRETS, SERVICES, STORAGECLASSES
    from ...release.address import master_address
    from ...release.diagnose import Observed, pod_state
    from ...release.gpu_check import scheduling_problem
    from ...release.master_config import master_version
    from ...release.names import db_app, db_deployment, db_pvc, master_app, master_deployment, master_service

    deployment = _get(api, DEPLOYMENTS, master_deployment(release), namespace)
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
    pvc = _get(api, PVCS, db_pvc(release), namespace) if bundled else None
    pending_pvc = pvc is not None and (pvc.get("status") or {}).get("phase") == "Pending"
    classes = _list_or_empty(api, STORAGECLASSES) if pending_pvc else []
    masters = [pod_state(p) for p in master_objs]
    dbs = [pod_state(p) for p in db_objs]
    scheduling: dict[str, str] = {}
    for pod in [*masters, *dbs]:
        if pod.phase == "Pending" and not pod.node:
            events = _list_or_empty(api, EVENTS, namespace=namespace, field_selector=f"involvedObject.name={pod.name}")
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
    service = _get(api, SERVICES, master_service(release), namespace)
    nodes = _list_or_empty(api, NODES) if service and (service.get("spec") or {}).get("type") == "NodePort" else []
    address = master_address(service, nodes, tls=bool(tls), release=release, namespace=namespace)
    return observed, deployment, address


def gang_scheduler(api: KubeApi, release: str, namespace: str) -> dict[str, Any]:
    """det-k8s's scheduler as the bundled chart deploys it (gangScheduler: det-k8s): its Deployment's readiness,
    and whether one of its pods holds the scheduling Lease now (and which scheduler name it serves)."""
    from datetime import datetime

    from ...chart.deploy import chart_name
    from ...kube.kinds import DEPLOYMENTS, LEASES
    from ...live.lease import LEASE_NAME, NAMESPACE_ENV, LeaseState, utcnow

    name = chart_name(release)
    deployment = _get(api, DEPLOYMENTS, name, namespace)
    if deployment is None:
        return {"deployed": False, "deployment": name}
    spec = (deployment.get("spec") or {}).get("template", {}).get("spec") or {}
    env = {e.get("name"): e.get("value") for c in spec.get("containers") or [] for e in c.get("env") or []}
    lease_namespace = str(env.get(NAMESPACE_ENV) or "default")
    found: dict[str, Any] = {
        "deployed": True, "deployment": name,
        "ready": int((deployment.get("status") or {}).get("readyReplicas") or 0),
        "replicas": int((deployment.get("spec") or {}).get("replicas") or 1),
        "lease": f"{lease_namespace}/{LEASE_NAME}", "holds_lease": False, "holder": None, "serving": None,
        "pods": scheduler_pods(api, namespace, release),
    }
    try:
        lease = api.get(LEASES, LEASE_NAME, lease_namespace)
    except NotFound:
        return found
    except Forbidden:
        found["holds_lease"] = None  # unknown: this user may not read Leases there
        return found
    state = LeaseState.of(lease)
    live = not state.stale(utcnow())
    found["holder"] = state.holder if live else None
    found["holds_lease"] = live and state.holder.partition("@")[2].startswith(f"{name}-")
    annotations = (lease.get("metadata") or {}).get("annotations") or {}
    serving = str(annotations.get(SERVING) or "")
    found["serving"] = serving.partition(" until ")[0] or None if found["holds_lease"] else None
    # A loop takes the Lease for each pass and gives it back: between passes it is free, and the loop says in it
    # which scheduler it serves, until when, and who it is (written with the release).
    served_by = str(annotations.get(SERVED_BY) or "")
    if not found["holds_lease"] and serving and served_by.partition("@")[2].startswith(f"{name}-"):
        scheduler, _, until = serving.partition(" until ")
        try:
            current = datetime.fromisoformat(until.replace("Z", "+00:00")) > utcnow()
        except ValueError:
            current = False
        if current:
            found["serving"], found["served_by"] = scheduler, served_by
    return found


def scheduler_pods(api: KubeApi, namespace: str, release: str) -> list[PodState]:
    """The pods of det-k8s's scheduler as the bundled chart deploys it for `release` (none when they may not be
    listed)."""
    from ...chart.deploy import NAME
    from ...kube.kinds import PODS
    from ...release.diagnose import pod_state

    selector = f"{APP_NAME}={NAME},{APP_INSTANCE}={release}"
    return [pod_state(p) for p in _list_or_empty(api, PODS, namespace=namespace, label_selector=selector)]


def _scheduler_line(found: dict[str, Any]) -> str:
    if not found["deployed"]:
        return (f"not deployed by this release (no Deployment {found['deployment']}: gangScheduler plugin, "
                "detK8sScheduler.enabled false, or another chart); run `det-k8s scheduler run` or apply "
                "`det-k8s scheduler manifest`")
    line = f"{found['ready']}/{found['replicas']} ready (Deployment {found['deployment']})"
    if found["holds_lease"]:
        serving = f", serving {found['serving']}" if found["serving"] else ""
        return f"{line}, holds the Lease {found['lease']} ({found['holder']}{serving})"
    if found.get("served_by"):
        return (f"{line}, serving {found['serving']} ({found['served_by']} takes the Lease {found['lease']} for each "
                "pass)")
    if found["holds_lease"] is None:
        return f"{line}; the Lease {found['lease']} could not be read (RBAC)"
    other = f"held by {found['holder']}" if found["holder"] else "held by nobody"
    return f"{line}; does not hold the Lease {found['lease']} ({other})"


def _scheduler_findings(found: dict[str, Any]) -> list[Finding]:
    from ...release.diagnose import Finding, scheduler_findings
    from ...settings.schema import DEFAULT_SCHEDULER_IMAGE

    if not found["deployed"] or found["ready"] > 0:
        return []
    told = scheduler_findings(found["deployment"], found["pods"], DEFAULT_SCHEDULER_IMAGE)
    return told or [Finding(
        f"det-k8s's gang scheduler is not running ({found['ready']}/{found['replicas']} ready): the master's task pods "
        "wait unbound", (f"kubectl describe deployment {found['deployment']}: can the nodes pull detK8sScheduler.image "
                         "(build it with scripts/image or deploy/Dockerfile and push it)?",
                         f"kubectl logs deployment/{found['deployment']}"))]


@with_global_options
def status(
    release: Annotated[str, typer.Argument(metavar="RELEASE", help="The helm release name.", show_default=False)],
    tail: Annotated[int, typer.Option("--tail", metavar="N", min=0, max=2**31 - 1,
                                      help="Master log lines to show.")] = 20,
    output_format: OutputOpt = OutputFormat.table,
) -> None:
    """Master readiness, its pods, its address, its last log lines, and what is wrong if it is not running."""
    from ...release.diagnose import diagnose
    from ...release.names import master_deployment, validate_release_name

    validate_release_name(release)
    api = current().connect()
    from ...release.live import stuck_release

    if (found := stuck_release(api, release, api.namespace)) is not None:
        output.warning(f"{found.message}; {found.hint}")
    notes: list[str] = []
    with output.spinner(f"reading release {release}"):
        observed, deployment, address = observe(api, release, api.namespace, tail, notes)
    for note in notes:
        output.warning(note)
    dep_status = deployment.get("status") or {}
    wanted = int((deployment.get("spec") or {}).get("replicas") or 1)
    ready = int(dep_status.get("readyReplicas") or 0)
    findings = diagnose(observed)
    scheduler = gang_scheduler(api, release, api.namespace)
    findings = [*findings, *_scheduler_findings(scheduler)]
    scheduler_states: list[PodState] = scheduler.get("pods") or []
    scheduler = {**scheduler, "pods": [p.as_dict() for p in scheduler_states]} if "pods" in scheduler else scheduler
    healthy = ready >= 1 and not findings
    data = {
        "release": release, "namespace": api.namespace, "healthy": healthy,
        "master": {"deployment": master_deployment(release), "ready": ready, "replicas": wanted,
                   "pods": [p.as_dict() for p in observed.master_pods]},
        "address": address.as_dict(),
        "database": {"bundled": observed.bundled_db, "external_host": observed.external_db_host,
                     "pods": [p.as_dict() for p in observed.db_pods]},
        "gangScheduler": scheduler,
        "problems": [f.as_dict() for f in findings],
        "logs": observed.logs.splitlines(),
    }
    if output_format is not OutputFormat.table:
        output.data(data, output_format)
    else:
        database = "bundled Postgres" if observed.bundled_db else f"external ({observed.external_db_host or '?'})"
        output.key_values({"Release": f"{release} (namespace {api.namespace})",
                           "Master": f"{ready}/{wanted} ready (Deployment {master_deployment(release)})",
                           "Address": address.url or address.note, "Database": database})
        output.key_values({"Gang scheduler": _scheduler_line(scheduler)})
        rows = [[p.name, p.phase, "yes" if p.ready else "no", p.reason, p.restarts, p.node]
                for p in [*observed.master_pods, *observed.db_pods, *scheduler_states]]
        if rows:
            output.table(["NAME", "PHASE", "READY", "REASON", "RESTARTS", "NODE"], rows)
        lines = []
        if observed.logs.strip():  # a master's log may quote its configuration: scrubbed like all output
            lines += ["Last master log lines:", *(f"  {line}" for line in observed.logs.rstrip("\n").splitlines())]
        for finding in findings:
            lines += [f"Problem: {finding.problem}", *(f"  - {check}" for check in finding.checks)]
        if lines:
            output.text("\n".join(lines) + "\n")
    if findings:
        raise DetK8sError(f"release {release} is not healthy: {len(findings)} problem(s) found")
    if not healthy:
        raise DetK8sError(f"the master of release {release} is not ready yet ({ready}/{wanted}); no known problem "
                          "found", hint=f"run det-k8s status {release} again in a minute")
    output.success(f"release {release} is healthy")


def wait_until_ready(api: KubeApi, release: str, namespace: str, seconds: float, shown: str, *,
                     interval: float = 2.0, report: Callable[[str], None] | None = None) -> None:
    """Wait until the release's master (and bundled database, and its volume) are ready, or raise OperationTimeout
    naming what is not ready and why (status's findings). Never waits for a load balancer's address
    (det_k8s/release/readiness.py says why). `report` gets a line saying what is not ready yet and why (the pods'
    reasons) at the first look, whenever that changes, and at least every 20 s (readiness.Talk)."""
    import time

    from ...errors import OperationTimeout
    from ...kube.kinds import DEPLOYMENTS, PODS, PVCS
    from ...release.diagnose import diagnose
    from ...release.names import db_app, db_deployment, db_pvc, master_app, master_deployment
    from ...release.readiness import Talk, progress_line, readiness

    started = time.monotonic()
    deadline = started + seconds
    talk = Talk()
    while True:
        deployments: list[tuple[str, dict[str, Any] | None]] = [
            (master_deployment(release), _get(api, DEPLOYMENTS, master_deployment(release), namespace))]
        claims: list[tuple[str, dict[str, Any] | None]] = []
        db = _get(api, DEPLOYMENTS, db_deployment(release), namespace)
        if db is not None:
            deployments.append((db_deployment(release), db))
            claims.append((db_pvc(release), _get(api, PVCS, db_pvc(release), namespace)))
        state = readiness(deployments, claims)
        if state.ready:
            return
        if report is not None and talk.due(state.waiting, time.monotonic()):
            pods = [*_list_or_empty(api, PODS, namespace=namespace, label_selector=f"app={master_app(release)}"),
                    *(_list_or_empty(api, PODS, namespace=namespace, label_selector=f"app={db_app(release)}")
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
