"""`det-k8s status RELEASE`: is the master up, where is it, and if not, why (in the documents' terms).

Reads only the Kubernetes API (no helm): the master Deployment and its pods, the Service, the
database pod and volume, the configured Secrets, the pods' scheduling events and the master's
last log lines. `det_k8s.release.diagnose` turns them into findings. Exit 0 when the master is
ready and nothing is wrong, 1 otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ...errors import DetK8sError, Forbidden, NotFound
from ...labels import APP_INSTANCE, APP_NAME, SERVED_BY, SERVING
from .. import output
from ..options import OutputOpt, current, with_global_options
from ..output import OutputFormat

if TYPE_CHECKING:
    from ...kube.api import KubeApi
    from ...release.diagnose import Finding, PodState


def gang_scheduler(api: KubeApi, release: str, namespace: str) -> dict[str, Any]:
    """det-k8s's scheduler as the bundled chart deploys it (gangScheduler: det-k8s): its Deployment's readiness,
    and whether one of its pods holds the scheduling Lease now (and which scheduler name it serves)."""
    from datetime import datetime

    from ...chart.deploy import chart_name
    from ...kube.kinds import DEPLOYMENTS, LEASES
    from ...live.lease import LEASE_NAME, NAMESPACE_ENV, LeaseState, utcnow
    from ...release.observe import get_or_none

    name = chart_name(release)
    deployment = get_or_none(api, DEPLOYMENTS, name, namespace)
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
    from ...release.observe import list_or_empty

    selector = f"{APP_NAME}={NAME},{APP_INSTANCE}={release}"
    return [pod_state(p) for p in list_or_empty(api, PODS, namespace=namespace, label_selector=selector)]


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
    from ...release.observe import observe

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
