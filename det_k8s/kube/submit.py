"""Create a group's pods all together, or none of them.

Kubernetes has no transaction for "these N pods", so det-k8s makes one: it creates the pods
(pinned to the nodes the plan chose) and, if any creation fails, deletes the ones it already
created and reports what happened. Creation can run on a small bounded pool of threads, which
shortens the window during which a group exists only in part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..errors import Conflict, DetK8sError, Forbidden, Rejected
from .api import KubeApi
from .kinds import PODS, SERVICES


class GroupCreationFailed(DetK8sError):
    """Some pod of a group could not be created; the others were removed again."""

    def __init__(self, message: str, *, leftovers: Sequence[str] = (), hint: str | None = None,
                 lasting: bool = False) -> None:
        super().__init__(message, hint=hint)
        self.leftovers = tuple(leftovers)
        self.lasting = lasting  # trying again unchanged will fail again (see `lasting_refusal`)


def lasting_refusal(error: BaseException) -> bool:
    """Will the API server refuse this pod again? An invalid pod or a denial (RBAC, an admission webhook) will;
    a timeout, a 5xx, a name clash or a full ResourceQuota (other groups finish) may well pass next time."""
    if isinstance(error, Rejected):
        return True
    return isinstance(error, Forbidden) and "exceeded quota" not in str(error)


@dataclass(frozen=True)
class Created:
    pods: tuple[str, ...]
    service: str | None


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def create_group(api: KubeApi, namespace: str, pods: Sequence[Mapping[str, Any]],
                 service: Mapping[str, Any] | None = None, *, workers: int = 1) -> Created:
    """Create the headless Service and every pod; on any failure, delete what may exist and raise.

    "What may exist" is every pod whose creation was attempted and not refused as a duplicate:
    a creation whose answer was lost (a timeout, a dropped connection) may still have happened,
    and Ctrl-C may land between a creation and its answer. Deleting a pod that was never created
    is harmless; leaving one would hold its GPUs for a group that never starts.
    """
    created: list[str] = []
    attempted: list[str] = []
    duplicates: set[str] = set()
    failures: list[tuple[str, DetK8sError]] = []
    service_name = _name(service) if service else None
    if service is not None:
        try:
            api.create(SERVICES, service, namespace)
        except Conflict:
            pass  # left by an earlier attempt of the same group: it selects the same pods, reuse it
        except DetK8sError as exc:
            raise GroupCreationFailed(f"creating service {service_name} failed: {exc}",
                                      lasting=lasting_refusal(exc)) from exc

    def create(pod: Mapping[str, Any]) -> None:
        if failures:
            return  # the group is doomed: creating more pods would only mean more to delete
        attempted.append(_name(pod))
        try:
            api.create(PODS, pod, namespace)
        except Conflict as exc:
            duplicates.add(_name(pod))  # someone else's pod of that name: never ours to delete
            failures.append((_name(pod), exc))
            return
        except DetK8sError as exc:
            failures.append((_name(pod), exc))
            return
        created.append(_name(pod))

    def maybe_ours() -> list[str]:
        return [name for name in attempted if name not in duplicates]

    try:
        if workers <= 1:
            for pod in pods:
                create(pod)
                if failures:
                    break
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="det-k8s-create") as pool:
                list(pool.map(create, pods))
    except BaseException:
        delete_group(api, namespace, maybe_ours(), service_name, grace_seconds=0)
        raise
    if not failures:
        return Created(tuple(created), service_name)
    leftovers = delete_group(api, namespace, maybe_ours(), service_name, grace_seconds=0)
    first_pod, first_error = failures[0]
    removed = [name for name in maybe_ours() if name not in leftovers]
    message = f"creating pod {first_pod} failed: {first_error}; " + (
        f"removed the {len(removed)} pod(s) that were or may have been created" if removed else "no pod was left")
    if leftovers:
        message += f"; could not remove {', '.join(leftovers)}"
    raise GroupCreationFailed(message, leftovers=leftovers, lasting=lasting_refusal(first_error),
                              hint="delete the leftovers with `det-k8s pods cleanup`" if leftovers else None)


def delete_group(api: KubeApi, namespace: str, pods: Sequence[str], service: str | None,
                 grace_seconds: int | None = None) -> list[str]:
    """Tear a whole group down (kill, pause, preemption, a lost pod); returns what could not be deleted."""
    leftovers: list[str] = []
    for name in pods:
        try:
            api.delete(PODS, name, namespace, grace_seconds=grace_seconds, missing_ok=True)
        except DetK8sError:
            leftovers.append(name)
    if service:
        try:
            api.delete(SERVICES, service, namespace, missing_ok=True)
        except DetK8sError:
            leftovers.append(f"service/{service}")
    return leftovers
