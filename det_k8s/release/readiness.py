"""Is a release ready? What `install --wait`, `upgrade` and `rollback` wait for, decided from what the API says.

det-k8s waits itself rather than passing helm `--wait`: helm 3's `--wait` (and helm 4's watcher) also wait for every
LoadBalancer Service to get an ingress address, which never comes where no load balancer answers (kind, bare metal,
many on-premise clusters), so the revision was marked failed with helm's bare `context deadline exceeded` although
the master ran. What the master needs is waited for instead:

- each Deployment of the release (the master's and, when bundled, the database's) rolled out: the controller has
  seen the newest spec (`observedGeneration`), every replica is updated and available;
- the bundled database's PersistentVolumeClaim bound (a claim no StorageClass can provision never will be).

A LoadBalancer Service without an address is reported, not waited for: the address is printed when it comes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Readiness:
    ready: bool
    waiting: tuple[str, ...]  # one phrase per thing not ready yet, e.g. "Deployment determined-master-x: 0 of 1 available"


def deployment_waiting(deployment: Mapping[str, Any] | None, name: str) -> str | None:
    """Why the Deployment is not rolled out yet (kubectl rollout status's rules), or None when it is."""
    if deployment is None:
        return f"Deployment {name} does not exist yet"
    meta, spec, status = (deployment.get("metadata") or {}, deployment.get("spec") or {},
                          deployment.get("status") or {})
    want = int(spec.get("replicas", 1) or 0)
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        return f"Deployment {name}: the controller has not seen the new spec yet"
    for cond in status.get("conditions") or ():
        if cond.get("type") == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
            return f"Deployment {name}: rollout stalled ({cond.get('message') or 'progress deadline exceeded'})"
    updated, available = int(status.get("updatedReplicas") or 0), int(status.get("availableReplicas") or 0)
    total = int(status.get("replicas") or 0)
    if updated < want:
        return f"Deployment {name}: {updated} of {want} replica(s) updated"
    if total > updated:
        return f"Deployment {name}: {total - updated} old replica(s) still terminating"
    if available < want:
        return f"Deployment {name}: {available} of {want} replica(s) available"
    return None


def claim_waiting(claim: Mapping[str, Any] | None, name: str) -> str | None:
    if claim is None:
        return None
    phase = (claim.get("status") or {}).get("phase") or "Pending"
    return None if phase == "Bound" else f"PersistentVolumeClaim {name} is {phase}"


def readiness(deployments: Sequence[tuple[str, Mapping[str, Any] | None]],
              claims: Sequence[tuple[str, Mapping[str, Any] | None]] = ()) -> Readiness:
    waiting = [w for name, d in deployments if (w := deployment_waiting(d, name))]
    waiting += [w for name, c in claims if (w := claim_waiting(c, name))]
    return Readiness(not waiting, tuple(waiting))


SPEAK_EVERY = 20.0  # seconds: a wait says what it waits for at least this often (and whenever that changes)


@dataclass
class Talk:
    """When a wait speaks: at its first look, whenever what it waits for changes, and at least every `every` s, so
    a terminal and a log both see progress (kubectl rollout status speaks at each change)."""

    every: float = SPEAK_EVERY
    said: tuple[str, ...] | None = None
    at: float = float("-inf")

    def due(self, waiting: tuple[str, ...], now: float) -> bool:
        if waiting != self.said or now - self.at >= self.every:
            self.said, self.at = waiting, now
            return True
        return False


def pod_waiting(pod: Mapping[str, Any]) -> str | None:
    """Why a pod of the release is not ready, as its status says (kube-scheduler's reason, a container's waiting
    reason), or None when it is ready or going away."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    if meta.get("deletionTimestamp"):
        return None
    name = meta.get("name") or "?"
    conditions = {c.get("type"): c for c in status.get("conditions") or ()}
    if (conditions.get("Ready") or {}).get("status") == "True":
        return None
    scheduled = conditions.get("PodScheduled") or {}
    if scheduled.get("status") == "False":
        return f"pod {name} is not scheduled: {scheduled.get('message') or scheduled.get('reason') or 'pending'}"
    for container in [*(status.get("initContainerStatuses") or ()), *(status.get("containerStatuses") or ())]:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            told = f": {waiting['message']}" if waiting.get("message") else ""
            return f"pod {name}: container {container.get('name')} is {waiting['reason']}{told}"
    return f"pod {name} is {status.get('phase') or 'Pending'}, not ready yet"


def progress_line(waiting: Sequence[str], pods: Sequence[Mapping[str, Any]], elapsed: float, shown: str) -> str:
    """One line of a wait's progress, as kubectl rollout status words it: `Waiting for deployment "X" rollout to
    finish: 0 of 1 replica(s) available`, then why (the pods' reasons), then how long so far."""
    parts = []
    for phrase in waiting:
        head, sep, rest = phrase.partition(": ")
        kind, _, name = head.partition(" ")
        parts.append(f'Waiting for deployment "{name}" rollout to finish: {rest}' if sep and kind == "Deployment"
                     else phrase)
    why = [w for pod in pods if (w := pod_waiting(pod))]
    return "; ".join(parts) + (f" ({'; '.join(why)})" if why else "") + f" [{elapsed:.0f}s of {shown}]"
