"""An independent statement of det-k8s's queue rules (issue 22), reading the policy's queue document as written and
raw pod objects, never importing det_k8s.

- A group belongs to the leaf queue whose members hold it, by kind in this order: the Determined workspace label,
  the user (the submitter or the `determined.ai/user` label), the resource pool label, a pod label, the namespace;
  within a kind the queue first in the document wins. Otherwise to `defaultQueue` (absent: a top-level `default`).
- A queue's use is what the groups running in its subtree request, plus what the pass has placed there since.
- A group may start only if no queue on its path, from its leaf to the top, would go over its limit in a resource
  the group asks for.
- Reclaim: a group whose leaf guarantees what it asks for, and which stays within that guarantee, may have whole
  groups of other queues evicted, whatever their priority, as long as their queue uses more than its guarantee
  of a resource the group asks for and its own queue guarantees (Kueue: borrowing); the fewest that make room.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from fractions import Fraction
from typing import Any

from tests.kube_model import quantity

Obj = Mapping[str, Any]


def walk(doc: Obj) -> Iterator[tuple[Obj, str]]:
    """Every queue of the document with its parent's name, parents first, in document order."""
    def inner(items: Any, parent: str) -> Iterator[tuple[Obj, str]]:
        for item in items or ():
            yield item, parent
            yield from inner(item.get("children"), item["name"])

    yield from inner(doc.get("queues"), "")


def parents(doc: Obj) -> dict[str, str]:
    found = {q["name"]: parent for q, parent in walk(doc)}
    found.setdefault(doc.get("defaultQueue") or "default", "")
    return found


def path(doc: Obj, leaf: str) -> list[str]:
    up = parents(doc)
    out = []
    while leaf:
        out.append(leaf)
        leaf = up[leaf]
    return out


def limits(doc: Obj) -> dict[str, dict[str, Fraction]]:
    return {q["name"]: {k: quantity(v) for k, v in (q.get("limit") or {}).items()} for q, _ in walk(doc)}


def leaf_of(doc: Obj, user: str, namespace: str, labels: Mapping[str, str]) -> str:
    leaves = [q for q, _ in walk(doc) if not q.get("children")]
    tests = [
        lambda m: labels.get("determined.ai/workspace") in (m.get("workspaces") or []),
        lambda m: user in (m.get("users") or []) or labels.get("determined.ai/user") in (m.get("users") or []),
        lambda m: labels.get("determined.ai/resource_pool") in (m.get("resourcePools") or []),
        lambda m: any(labels.get(k) == v for k, v in (m.get("labels") or {}).items()),
        lambda m: namespace in (m.get("namespaces") or []),
    ]
    for test in tests:
        for queue in leaves:
            if test(queue.get("members") or {}):
                return str(queue["name"])
    return str(doc.get("defaultQueue") or "default")


def over(doc: Obj, used: Mapping[str, Mapping[str, Fraction]], leaf: str, asks: Mapping[str, Fraction]) -> str | None:
    """The first queue on the path that the ask would take over its limit (None: it may start)."""
    caps = limits(doc)
    for name in path(doc, leaf):
        for resource, cap in caps.get(name, {}).items():
            if asks.get(resource) and used.get(name, {}).get(resource, Fraction(0)) + asks[resource] > cap:
                return name
    return None


def add(doc: Obj, used: dict[str, dict[str, Fraction]], leaf: str, asks: Mapping[str, Fraction]) -> None:
    for name in path(doc, leaf):
        bucket = used.setdefault(name, {})
        for resource, amount in asks.items():
            bucket[resource] = bucket.get(resource, Fraction(0)) + amount


def guarantees(doc: Obj) -> dict[str, dict[str, Fraction]]:
    return {q["name"]: {k: quantity(v) for k, v in (q.get("guarantee") or {}).items()} for q, _ in walk(doc)}


def within_guarantee(doc: Obj, used: Mapping[str, Mapping[str, Fraction]], leaf: str,
                     asks: Mapping[str, Fraction]) -> bool:
    """The leaf guarantees something the group asks for, and holds it within each such guarantee: it may reclaim."""
    mine = guarantees(doc).get(leaf, {})
    asked = {k: v for k, v in asks.items() if v}
    return any(k in mine for k in asked) and all(
        used.get(leaf, {}).get(k, Fraction(0)) + v <= mine[k] for k, v in asked.items() if k in mine)


def borrowing(doc: Obj, used: Mapping[str, Mapping[str, Fraction]], leaf: str, resources: Iterable[str]) -> bool:
    mine = guarantees(doc).get(leaf, {})
    return any(used.get(leaf, {}).get(k, Fraction(0)) > mine.get(k, Fraction(0)) for k in resources)
