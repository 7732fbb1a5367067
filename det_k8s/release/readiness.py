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
