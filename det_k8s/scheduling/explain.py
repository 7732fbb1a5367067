"""One human line from a `Reason`: what the group needs, what the cluster has, what is in the way.

The core returns data; the CLI and the live scheduler print `describe(reason)`. The line answers
"why is it pending?" in the order a person checks: the ask, the largest free blocks on the
nodes that matter and the resource that is short, nodes that do not count and why, and who is
ahead.
"""

from __future__ import annotations

from ..cluster.model import Resources
from ..quantity import format_milli
from .model import Reason, ReasonCode


def amount(resource: str, milli: int) -> str:
    return format_milli(resource, milli)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _ask(reason: Reason) -> str:
    per_pod = reason.per_pod.get(reason.resource, 0)
    text = f"needs {_plural(reason.pods, 'pod')} x {amount(reason.resource, per_pod)} {reason.resource}"
    extra = reason.limiting if reason.limiting and reason.limiting != reason.resource else None
    if extra and extra in reason.per_pod:
        text += f" + {amount(extra, reason.per_pod[extra])} {extra}"
    return text


def _blocks(reason: Reason) -> str:
    resource = reason.resource
    total = amount(resource, reason.cluster_total)
    if reason.free_total <= 0 or not reason.largest_free:
        text = f"no free {resource} on its {_plural(reason.eligible_nodes, 'eligible node')} ({total} in use)"
    else:
        blocks = ", ".join(f"{node} {amount(resource, free)}" for node, free in reason.largest_free)
        free = amount(resource, reason.free_total)
        text = f"largest free blocks: {blocks}; {free} of {total} {resource} free"
    if reason.limiting and reason.limiting != resource:
        text += f" (limiting: {reason.limiting})"
    return text


def _excluded(reason: Reason) -> str | None:
    if not reason.excluded:
        return None
    total = sum(count for _, count in reason.excluded)
    causes = ", ".join(f"{count} {cause}" for cause, count in reason.excluded)
    return f"{_plural(total, 'node')} excluded: {causes}"


def _ahead(reason: Reason) -> str | None:
    if not reason.ahead_count:
        return None
    names = ", ".join(reason.ahead) + (", ..." if reason.ahead_count > len(reason.ahead) else "")
    return f"{_plural(reason.ahead_count, 'group')} ahead: {names}"


def _never(reason: Reason) -> str:
    resource = reason.resource
    needed, total = amount(resource, reason.needed), amount(resource, reason.cluster_total)
    per_pod = reason.per_pod.get(resource, 0)
    if reason.cluster_total < reason.needed:
        text = (f"needs {needed} {resource} ({_plural(reason.pods, 'pod')} x {amount(resource, per_pod)}), "
                f"cluster has {total} on {_plural(reason.eligible_nodes, 'eligible node')}")
    elif reason.fits_at_most == 0:
        largest = ", ".join(f"{node} {amount(resource, size)}" for node, size in reason.largest_free)
        short = reason.limiting or resource
        text = (f"each pod needs {_request(reason.per_pod)}, more than any eligible node offers "
                f"(limiting: {short}; largest nodes: {largest})")
    else:
        most = _plural(reason.fits_at_most or 0, "such pod")
        text = (f"{_ask(reason)}, but the eligible nodes hold at most {most} "
                f"(limiting: {reason.limiting or resource}; cluster has {total} {resource})")
    return text


def _request(request: Resources) -> str:
    return " + ".join(f"{amount(name, value)} {name}" for name, value in sorted(request.items())) or "nothing"


def describe(reason: Reason) -> str:
    """One line for a person, e.g. `needs 4 pods x 4 nvidia.com/gpu; largest free blocks: ...`."""
    code = reason.code
    if code in (ReasonCode.NOT_DIVISIBLE, ReasonCode.INVALID):
        return reason.detail
    parts: list[str | None]
    if code is ReasonCode.NO_ELIGIBLE_NODES:
        parts = ["no node can run its pods", _excluded(reason)]
    elif code is ReasonCode.EXCEEDS_CLUSTER:
        parts = [_never(reason), _excluded(reason)]
    elif code is ReasonCode.WAITING_FOR_NODES:
        parts = [_never(reason), "waiting for nodes to be added (det-k8s creates no pod until all fit, so a "
                 "pod-driven autoscaler is not triggered by it)", _ahead(reason)]
    else:
        parts = [_ask(reason), _blocks(reason)]
        if code is ReasonCode.RESERVING:
            parts.append(f"reserved {', '.join(reason.reserved_nodes)} for it: smaller groups will not be "
                         "placed there until it runs")
        elif code is ReasonCode.BEHIND_RESERVATION:
            parts.append(f"fits only on nodes reserved for {reason.reserved_for} "
                         f"({', '.join(reason.reserved_nodes)}); starting here would delay it")
        elif code is ReasonCode.STRICT_ORDER:
            parts.append(f"backfill is off and {reason.detail} waits ahead of it")
        parts += [_excluded(reason), _ahead(reason)]
        if reason.preemptible is not None and code is not ReasonCode.STRICT_ORDER:
            # Only groups of the same queue (namespace) are ever evicted: other namespaces' pods just hold capacity.
            parts.append("preemption: no lower-priority group in this queue to evict" if not reason.preemptible else
                         f"preemption: evicting the {_plural(reason.preemptible, 'lower-priority group')} of this "
                         "queue would not free enough")
    return "; ".join(part for part in parts if part)
