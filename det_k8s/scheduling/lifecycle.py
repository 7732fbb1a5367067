"""What has become of a running group: still running, finished, or broken (a pod lost).

A distributed job cannot continue with a pod missing: the others would wait for it forever while
holding their GPUs. So a running group that loses a pod (failed, evicted, deleted) is torn down
as a whole and requeued, until a retry limit turns it into a failure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from ..cluster.model import Pod

DEFAULT_MAX_ATTEMPTS = 3
# Admission rejections forgiven before they start to count: a node that keeps refusing the group (its
# GPUs broken, a device plugin down) must not requeue it forever.
FREE_REJECTIONS = 5


class Verdict(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    LOST = "lost"  # a pod failed, was evicted or deleted: tear the whole group down


# Reasons the kubelet gives when it refuses to admit a pod pinned to its node (most often another pod,
# placed by kube-scheduler meanwhile, took the GPUs): the job never ran, so this is no attempt of its own.
ADMISSION_REJECTIONS = ("OutOf", "UnexpectedAdmissionError", "NodeAffinity", "NodeName", "Taint", "NodeShutdown")
# How long a pod may stay Unschedulable before its group is torn down: kube-scheduler retries a pod when
# other pods come and go, so a pod that lost a race only to an ordering of the group's own pods recovers.
UNSCHEDULABLE_GRACE = 60.0
_AVAILABLE = re.compile(r"^\d+/\d+ nodes are available: ")
_POST_FILTER_NOTES = re.compile(r"[.,]?\s*no new claims to deallocate$")


def scheduler_message(message: str) -> str:
    """kube-scheduler's FailedScheduling message, shortened to its causes.

    Without the "0/N nodes are available:" lead-in, which the Determined master would rewrite
    (it replaces pod event messages containing that phrase), and without the preemption tail.
    """
    text = _AVAILABLE.sub("", message.strip()).split(" preemption:", 1)[0].rstrip(",. ")
    # kube-scheduler 1.3x puts its DynamicResources plugin's post-filter note before the preemption tail
    # ("1 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: ..."): not a cause, left out
    text = _POST_FILTER_NOTES.sub("", text).rstrip(",. ")
    return text.replace("nodes are available", "nodes available")


def _since(stamp: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Health:
    verdict: Verdict
    detail: str = ""
    counts: bool = True  # whether this loss counts towards the retry limit


def group_health(expected: Sequence[str], pods: Sequence[Pod], now: datetime | None = None) -> Health:
    """Judge a running group from its pods (`expected` names every pod it was created with).

    A pod kube-scheduler has found Unschedulable for `UNSCHEDULABLE_GRACE` seconds (pinned to the
    node det-k8s chose, it can go nowhere else) loses the group, like a kubelet's admission
    rejection: the plan raced another scheduler, or met a rule det-k8s does not model. Without
    `now` the time cannot be judged and such a pod counts as pending.
    """
    by_name = {pod.name: pod for pod in pods}
    missing = [name for name in expected if name not in by_name]
    if missing:
        return Health(Verdict.LOST, f"pod {missing[0]} is gone (deleted or evicted)")
    failed = [by_name[name] for name in expected if by_name[name].phase == "Failed"]
    if failed:
        reason = failed[0].reason
        why = f" ({reason})" if reason else ""
        if reason.startswith(ADMISSION_REJECTIONS):
            return Health(Verdict.LOST, f"the kubelet refused pod {failed[0].name}{why} before it ran; its node "
                          "could not admit it (another pod may have taken the resources)", counts=False)
        return Health(Verdict.LOST, f"pod {failed[0].name} failed{why}")
    stuck = [by_name[name] for name in expected if by_name[name].unschedulable and not by_name[name].node_name]
    if stuck and now is not None:
        pod = stuck[0]
        since = _since(pod.unschedulable_since)
        if since is None or (now - since).total_seconds() >= UNSCHEDULABLE_GRACE:
            return Health(Verdict.LOST, f"kube-scheduler cannot place pod {pod.name} on the node det-k8s chose "
                          f"({scheduler_message(pod.unschedulable)})", counts=False)
    deleting = [by_name[name] for name in expected if by_name[name].deleting]
    if deleting:
        return Health(Verdict.LOST, f"pod {deleting[0].name} is being deleted")
    if all(by_name[name].phase == "Succeeded" for name in expected):
        return Health(Verdict.COMPLETED, "every pod succeeded")
    return Health(Verdict.RUNNING)


def next_attempt(attempts: int, max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> tuple[int, bool]:
    """(attempts after this loss, whether the group may run again)."""
    attempts += 1
    return attempts, attempts < max_attempts


@dataclass(frozen=True)
class Charge:
    """What a loss costs a group: its counters afterwards and whether it may run again."""

    attempts: int
    rejections: int
    again: bool


def charge(health: Health, attempts: int, rejections: int, max_attempts: int = DEFAULT_MAX_ATTEMPTS,
           free_rejections: int = FREE_REJECTIONS) -> Charge:
    """Count a loss: admission rejections are free until `free_rejections` of them, then count like failures."""
    if not health.counts:
        rejections += 1
        if rejections <= free_rejections:
            return Charge(attempts, rejections, True)
    attempts, again = next_attempt(attempts, max_attempts)
    return Charge(attempts, rejections, again)
