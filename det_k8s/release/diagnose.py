"""`det-k8s status`: what state the master is in, and why it is not running, in the documents' terms.

Pure: `Observed` is what the CLI read from the API; `diagnose` names the problems the documents
describe, each with what to check:

- ImagePullBackOff / ErrImagePull: appVersion may not be a released version, imageRegistry may not
  host the image, imagePullSecretName may be missing (says which Secret and whether it exists);
- a Pending database volume: the storage class (named or default) and whether it exists;
- CrashLoopBackOff: the database (the bundled Postgres pod, or the external host), quoting the
  master's log line about it;
- a Pending master pod: the scheduler's own reason from the pod's events.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PULL_ERRORS = ("ImagePullBackOff", "ErrImagePull", "InvalidImageName")
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
_DB_LINE = re.compile(r"database|postgres|\bpq:|\bdb\b|dial tcp|connection refused|password authentication", re.I)


@dataclass(frozen=True)
class PodState:
    name: str
    phase: str
    ready: bool
    reason: str  # the most telling container reason (waiting, else last terminated), or ""
    message: str
    restarts: int
    node: str
    image: str

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "phase": self.phase, "ready": self.ready, "reason": self.reason,
                "message": self.message, "restarts": self.restarts, "node": self.node}


def pod_state(pod: Mapping[str, Any]) -> PodState:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    statuses = list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or [])
    reason, message, restarts = "", "", 0
    for cs in statuses:
        restarts += int(cs.get("restartCount") or 0)
        waiting = (cs.get("state") or {}).get("waiting") or {}
        terminated = (cs.get("lastState") or {}).get("terminated") or (cs.get("state") or {}).get("terminated") or {}
        if waiting.get("reason") and waiting.get("reason") != "PodInitializing" and not reason:
            reason, message = str(waiting["reason"]), str(waiting.get("message") or "")
        elif terminated.get("reason") and terminated.get("exitCode") not in (0, None) and not reason:
            reason, message = str(terminated["reason"]), str(terminated.get("message") or "")
    if not reason and status.get("reason"):
        reason, message = str(status["reason"]), str(status.get("message") or "")
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    images = [c.get("image", "") for c in spec.get("containers") or []]
    return PodState(str(meta.get("name") or ""), str(status.get("phase") or "Pending"), ready, reason, message,
                    restarts, str(spec.get("nodeName") or ""), str(images[0] if images else ""))


@dataclass(frozen=True)
class Finding:
    problem: str
    checks: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"problem": self.problem, "checks": list(self.checks)}


@dataclass
class Observed:
    """What the CLI read for one release."""

    release: str
    namespace: str
    master_pods: list[PodState]
    db_pods: list[PodState] = field(default_factory=list)
    bundled_db: bool = True
    external_db_host: str | None = None
    pvc: Mapping[str, Any] | None = None
    storage_classes: Sequence[Mapping[str, Any]] = ()
    secrets: Mapping[str, bool] = field(default_factory=dict)  # pull/TLS secret name -> exists
    pull_secrets: Sequence[str] = ()
    logs: str = ""
    scheduling: Mapping[str, str] = field(default_factory=dict)  # pod name -> FailedScheduling message


def _split_image(image: str) -> tuple[str, str]:
    repo, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "latest")
    registry = repo.rsplit("/", 1)[0] if "/" in repo else "docker.io"
    return registry, tag


def _pull(obs: Observed, pod: PodState) -> Finding:
    registry, tag = _split_image(pod.image)
    checks = [f"appVersion {tag}: is it a released Determined version? A commit hash or a 'dev' version may "
              "have no published image",
              f"imageRegistry {registry}: does it host {pod.image.rsplit('/', 1)[-1]}?"]
    if obs.pull_secrets:
        for name in obs.pull_secrets:
            there = obs.secrets.get(name, False)
            checks.append(f"imagePullSecretName {name}: " + (
                f"the Secret exists in {obs.namespace}; are its registry credentials right?" if there else
                f"the Secret is MISSING in {obs.namespace}; create it with kubectl create secret docker-registry "
                f"{name} -n {obs.namespace} ..."))
    else:
        checks.append("imagePullSecretName is not set: a private registry or the enterprise edition needs one")
    detail = f": {pod.message}" if pod.message else ""
    return Finding(f"pod {pod.name} cannot pull image {pod.image} ({pod.reason}){detail}", tuple(checks))


def _pvc(obs: Observed) -> Finding | None:
    pvc = obs.pvc
    if not pvc or (pvc.get("status") or {}).get("phase") != "Pending":
        return None
    name = (pvc.get("metadata") or {}).get("name", "")
    wanted = (pvc.get("spec") or {}).get("storageClassName")
    classes = {(c.get("metadata") or {}).get("name", ""): c for c in obs.storage_classes}
    defaults = [n for n, c in classes.items()
                if ((c.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CLASS) == "true"]
    known = ", ".join(sorted(classes)) or "none"
    if wanted and wanted not in classes:
        check = f"storage class {wanted} does not exist (classes: {known}); set db.storageClassName to one of them"
    elif wanted:
        check = f"storage class {wanted} exists; check its provisioner: kubectl describe pvc {name} -n {obs.namespace}"
    elif not defaults:
        check = (f"no storage class is named and the cluster has no default storage class (classes: {known}); "
                 "set db.storageClassName")
    else:
        check = (f"the default storage class {defaults[0]} is used; check its provisioner: "
                 f"kubectl describe pvc {name} -n {obs.namespace}")
    return Finding(f"the database volume {name} is Pending: no volume was provisioned for it", (check,))


def _crash(obs: Observed, pod: PodState) -> Finding:
    checks = []
    if obs.bundled_db:
        if not obs.db_pods:
            checks.append(f"the bundled database has no pod (Deployment determined-db-deployment-{obs.release})")
        for db in obs.db_pods:
            state = "Running and ready" if db.ready else f"{db.phase}{' (' + db.reason + ')' if db.reason else ''}"
            checks.append(f"the bundled database pod {db.name} is {state}")
    else:
        checks.append(f"the master connects to the external database at {obs.external_db_host or 'db.hostAddress'}: "
                      "is it reachable from the cluster, and are db.user, db.password and db.name right?")
    quoted = [ln.strip() for ln in obs.logs.splitlines() if _DB_LINE.search(ln)]
    if quoted:
        checks.append(f"the master's log says: {quoted[-1][:300]}")
    return Finding(f"the master in pod {pod.name} keeps crashing ({pod.reason}, {pod.restarts} restarts); the usual "
                   "cause is the database", tuple(checks))


def diagnose(obs: Observed) -> list[Finding]:
    findings: list[Finding] = []
    for pod in [*obs.master_pods, *obs.db_pods]:
        if pod.reason in PULL_ERRORS:
            findings.append(_pull(obs, pod))
        elif pod in obs.master_pods and (pod.reason == "CrashLoopBackOff" or (pod.restarts and not pod.ready
                                                                              and pod.reason == "Error")):
            findings.append(_crash(obs, pod))
        elif pod.phase == "Pending" and pod.name in obs.scheduling:
            findings.append(Finding(f"pod {pod.name} is Pending: {obs.scheduling[pod.name]}"))
    volume = _pvc(obs)
    if volume is not None:
        findings.append(volume)
    for name, exists in obs.secrets.items():
        if not exists and name not in obs.pull_secrets:
            findings.append(Finding(f"the TLS Secret {name} does not exist in {obs.namespace}: the master cannot "
                                    "start", (f"kubectl create secret tls {name} -n {obs.namespace} --cert=tls.crt "
                                              "--key=tls.key",)))
    return findings


def scheduler_findings(deployment: str, pods: Sequence[PodState], placeholder: str) -> list[Finding]:
    """What keeps det-k8s's gang scheduler (the chart's Deployment `deployment`) from running, from its pods: an image
    the nodes cannot pull (`placeholder` is the image the chart runs when detK8sScheduler.image is unset, which no
    registry serves), or a crashing container. Nothing when a pod is ready."""
    if any(p.ready for p in pods):
        return []
    found: list[Finding] = []
    pulling = [p for p in pods if p.reason in PULL_ERRORS]
    if pulling:
        first = pulling[0]
        image = first.image or "its image"
        unbuilt = " (detK8sScheduler.image unset: a placeholder nobody publishes)" if first.image == placeholder else ""
        found.append(Finding(
            f"det-k8s's gang scheduler cannot start: its pod{'s' * (len(pulling) > 1)} "
            f"{', '.join(p.name for p in pulling)} {'are' if len(pulling) > 1 else 'is'} in {first.reason} for "
            f"{image}{unbuilt}; the master's task pods wait unbound",
            ("build the image (scripts/image in det-k8s's checkout, or docker build -f deploy/Dockerfile), push it "
             "where the nodes pull from, and set detK8sScheduler.image to it (det-k8s upgrade RELEASE -f SETTINGS "
             "--set detK8sScheduler.image=REGISTRY/det-k8s:VERSION)",
             "or set detK8sScheduler.enabled: false and run `det-k8s scheduler run` yourself",
             f"a private registry: detK8sScheduler.imagePullSecretName names its pull Secret (kubectl describe pod "
             f"{first.name})")))
    crashing = [p for p in pods if p.reason == "CrashLoopBackOff" or (p.restarts and p.reason == "Error")]
    if crashing:
        found.append(Finding(
            f"det-k8s's gang scheduler keeps failing: {', '.join(p.name for p in crashing)} in "
            f"{crashing[0].reason or 'Error'}; the master's task pods wait unbound",
            (f"kubectl logs {crashing[0].name} --previous",)))
    return found
