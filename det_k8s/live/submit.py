"""Create a group's pods all together, or none of them.

Kubernetes has no transaction for "these N pods", so det-k8s makes one: it creates the pods
(pinned to the nodes the plan chose) and, if any creation fails, deletes the ones it already
created and reports what happened. Creation can run on a small bounded pool of threads, which
shortens the window during which a group exists only in part. A signal (det_k8s/stopping.py) stops the
creation the same way: no more pods, the ones that may exist deleted, what may remain named in the last line
(the caller's intent record lets the next pass delete it, live/creation_records.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from .. import stopping
from ..errors import Conflict, DetK8sError, Forbidden, GroupCreationFailed, Rejected
from ..kube.api import KubeApi
from ..kube.kinds import PODS, SERVICES, Kind, pod_groups
from .creation_records import ATTEMPT_LABEL

IN_FLIGHT_WAIT = 2.0  # seconds an interrupted creation waits for the answers already on their way



def definite_refusal(error: BaseException) -> bool:
    """Did the API server refuse the creation outright (so it can never take effect later)?"""
    return isinstance(error, Rejected | Forbidden | Conflict)


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


def pod_group_ref(manifest: Mapping[str, Any]) -> str:
    """"<version>/<name>" of a PodGroup manifest (as a queue entry records it)."""
    return f"{str(manifest.get('apiVersion', '')).rpartition('/')[2]}/{_name(manifest)}"


def _pod_group(ref: str | None) -> tuple[Kind, str] | None:
    if not ref or "/" not in ref:
        return None
    version, _, name = ref.partition("/")
    return pod_groups(version), name


def create_group(api: KubeApi, namespace: str, pods: Sequence[Mapping[str, Any]],
                 service: Mapping[str, Any] | None = None, *, workers: int = 1, attempt: str = "",
                 pod_group: Mapping[str, Any] | None = None) -> Created:
    """Create the headless Service, the PodGroup (native placement, live/native.py) and every pod; on any failure,
    delete what may exist (the PodGroup too) and raise.

    "What may exist" is every pod whose creation was attempted and not refused as a duplicate:
    a creation whose answer was lost (a timeout, a dropped connection) may still have happened,
    and Ctrl-C may land between a creation and its answer. Deleting a pod that was never created
    is harmless; leaving one would hold its GPUs for a group that never starts. With `attempt`,
    every pod carries it as the `det-k8s.io/attempt` label, so a pod of this creation that appears
    later (a write that lands after the timeout) can be recognised and deleted on sight.
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
                                      lasting=lasting_refusal(exc), attempt=attempt) from exc
    group_ref = pod_group_ref(pod_group) if pod_group is not None else None
    if pod_group is not None:
        _create_pod_group(api, namespace, pod_group, service_name, attempt)
    if attempt:
        pods = [_labelled(pod, ATTEMPT_LABEL, attempt) for pod in pods]

    halted: list[bool] = []  # a signal (or any exception) stopped the creation: start no more

    def create(pod: Mapping[str, Any]) -> None:
        if failures or halted:
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

    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="det-k8s-create") if workers > 1 else None
    futures: list[Future[None]] = []
    try:
        if pool is None:
            for pod in pods:
                create(pod)
                if failures:
                    break
        else:
            futures = [pool.submit(create, pod) for pod in pods]
            for future in futures:
                future.result()
            pool.shutdown(wait=True)
    except BaseException:  # a signal (det_k8s/stopping.py), Ctrl-C: undo now, without waiting for slow answers
        halted.append(True)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
            pending = [f for f in futures if f.running()]
            if pending:  # answers on their way say whether those pods exist; not waited for past the grace
                wait(pending, timeout=min(IN_FLIGHT_WAIT, stopping.remaining()))
        _undo_interrupted(api, namespace, maybe_ours(), set(created), service_name, attempt, group_ref)
        raise
    if not failures:
        return Created(tuple(created), service_name)
    refused = {name for name, error in failures if definite_refusal(error)}  # never created: nothing to delete
    outcome = _roll_back(api, namespace, [name for name in maybe_ours() if name not in refused], service_name,
                         group_ref)
    unconfirmed = [name for name in outcome.absent if name not in created and name not in refused]
    first_pod, first_error = failures[0]
    message = f"creating pod {first_pod} failed: {first_error}; " + _outcome_text(outcome, unconfirmed)
    hint = None
    if outcome.leftovers or unconfirmed:
        hint = ("they are marked in the experiment's queue entry and deleted by the next det-k8s command that sees "
                f"them (experiment list, scheduler run, doctor); now: kubectl delete pod -n {namespace} "
                + " ".join(n for n in (*outcome.leftovers, *unconfirmed) if "/" not in n))
    raise GroupCreationFailed(message, leftovers=outcome.leftovers, lasting=lasting_refusal(first_error),
                              hint=hint, unconfirmed=unconfirmed, attempt=attempt)


def _create_pod_group(api: KubeApi, namespace: str, manifest: Mapping[str, Any], service: str | None,
                      attempt: str) -> None:
    """Create the group's PodGroup, or reuse one an earlier attempt left (the same gang); raise GroupCreationFailed
    (after deleting the Service again) when that fails, or when the earlier one is still being deleted (its
    protection finalizer holds it while pods name it): the next pass tries again, not counted as an attempt."""
    ref = _pod_group(pod_group_ref(manifest))
    assert ref is not None
    kind, name = ref
    try:
        try:
            api.create(kind, manifest, namespace)
            return
        except Conflict:
            existing = api.get(kind, name, namespace)
    except DetK8sError as exc:
        _roll_back(api, namespace, [], service)
        raise GroupCreationFailed(f"creating pod group {name} failed: {exc}", lasting=lasting_refusal(exc),
                                  attempt=attempt, pod_group_denied=isinstance(exc, Forbidden)) from exc
    if (existing.get("metadata") or {}).get("deletionTimestamp"):
        _roll_back(api, namespace, [], service)
        raise GroupCreationFailed(f"pod group {name} of an earlier attempt is still being deleted (its pods are "
                                  "stopping)", attempt=attempt)


def _undo_interrupted(api: KubeApi, namespace: str, pods: Sequence[str], created: set[str], service: str | None,
                      attempt: str, pod_group: str | None = None) -> None:
    """Delete every pod of an interrupted creation that is or may be there; say what was undone and what is left."""
    outcome = _roll_back(api, namespace, pods, service, pod_group)
    removed = [n for n in outcome.removed if "/" not in n]
    unconfirmed = [n for n in outcome.absent if n not in created]
    if removed:
        stopping.note(f"deleted the {len(removed)} pod(s) created so far ({', '.join(removed)}): nothing of the "
                      "group runs")
    elif not outcome.leftovers and not unconfirmed:
        stopping.note("no pod of the group had been created")
    left = [n for n in (*outcome.leftovers, *unconfirmed) if "/" not in n]
    if left:
        where = f" (attempt {attempt})" if attempt else ""
        stopping.note(f"{', '.join(left)} may still exist or appear{where}: the intent recorded in the queue entry has "
                      "the next det-k8s pass delete them (det-k8s scheduler run --once, or any experiment create)")


@dataclass(frozen=True)
class _Outcome:
    removed: tuple[str, ...]  # deleted now
    absent: tuple[str, ...]  # not there to delete
    leftovers: tuple[str, ...]  # the deletion failed: still there
    reasons: tuple[str, ...]  # why, for the leftovers


def _roll_back(api: KubeApi, namespace: str, pods: Sequence[str], service: str | None,
               pod_group: str | None = None) -> _Outcome:
    removed: list[str] = []
    absent: list[str] = []
    leftovers: list[str] = []
    reasons: list[str] = []
    for name in pods:
        try:
            (removed if api.delete(PODS, name, namespace, grace_seconds=0, missing_ok=True) else absent).append(name)
        except DetK8sError as exc:
            leftovers.append(name)
            reasons.append(exc.message)
    if service:
        try:
            api.delete(SERVICES, service, namespace, missing_ok=True)
        except DetK8sError as exc:
            leftovers.append(f"service/{service}")
            reasons.append(exc.message)
    ref = _pod_group(pod_group)
    if ref is not None:
        try:
            api.delete(ref[0], ref[1], namespace, missing_ok=True)
        except DetK8sError as exc:
            leftovers.append(f"podgroup/{ref[1]}")
            reasons.append(exc.message)
    return _Outcome(tuple(removed), tuple(absent), tuple(leftovers), tuple(reasons))


def _outcome_text(outcome: _Outcome, unconfirmed: Sequence[str]) -> str:
    """Exactly what is left: never "no pod was left" while some are."""
    parts = []
    if outcome.removed:
        parts.append(f"removed {_pods(outcome.removed)} that had been created")
    elif not outcome.leftovers and not unconfirmed:
        parts.append("none of its pods was created")
    if outcome.leftovers:
        why = f" ({outcome.reasons[0]})" if outcome.reasons else ""
        parts.append(f"could not remove {', '.join(outcome.leftovers)}{why}: they remain")
    if unconfirmed:
        verb = "was" if len(unconfirmed) == 1 else "were"
        parts.append(f"the creation of {', '.join(unconfirmed)} got no answer and {verb} not there to delete: "
                     f"{'it' if len(unconfirmed) == 1 else 'they'} may still appear")
    return "; ".join(parts)


def _pods(names: Sequence[str]) -> str:
    return f"pod {names[0]}" if len(names) == 1 else f"the {len(names)} pods {', '.join(names)}"


def _labelled(pod: Mapping[str, Any], key: str, value: str) -> dict[str, Any]:
    meta = dict(pod.get("metadata") or {})
    meta["labels"] = {**(meta.get("labels") or {}), key: value}
    return {**pod, "metadata": meta}


def delete_group(api: KubeApi, namespace: str, pods: Sequence[str], service: str | None,
                 grace_seconds: int | None = None, pod_group: str | None = None) -> list[str]:
    """Tear a whole group down (kill, pause, preemption, a lost pod) with its Service and PodGroup
    ("<version>/<name>"); returns what could not be deleted."""
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
    ref = _pod_group(pod_group)
    if ref is not None:
        try:
            api.delete(ref[0], ref[1], namespace, missing_ok=True)
        except DetK8sError:
            leftovers.append(f"podgroup/{ref[1]}")
    return leftovers
