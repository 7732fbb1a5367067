"""An independent statement of det-k8s's queue rules (issue 22), reading the policy's queue document as written and
raw pod objects, never importing det_k8s.

- A group belongs to the leaf queue whose members hold it, by kind in this order: the Determined workspace label,
  the user (the submitter or the `determined.ai/user` label), the resource pool label, a pod label, the namespace;
  within a kind the queue first in the document wins. Otherwise to `defaultQueue` (absent: a top-level `default`).
- A queue's use is what the groups running in its subtree request, plus what the pass has placed there since.
- A group may start only if no queue on its path, from its leaf to the top, would go over its limit in a resource
  the group asks for; a `borrowingLimit` makes the limit at most guarantee + borrowingLimit (Kueue's).
- Lending limits (Kueue's `lendingLimit`): a queue keeps guarantee - lendingLimit of its guarantee for its own subtree,
  less what the subtree uses. A group that takes some queue on its path above its guarantee (it borrows) may start
  only if the cluster's free amount, less what the queues outside its path keep, still holds it. Nested keepers
  (a parent and its children) count once: the larger of the parent's own and the sum of its children's.
- Reclaim: a group whose leaf guarantees what it asks for, and which stays within that guarantee, may have whole
  groups of other queues evicted, whatever their priority, as long as their queue uses more than its guarantee
  of a resource the group asks for and its own queue guarantees (Kueue: borrowing); the fewest that make room.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from fractions import Fraction
from typing import Any

from tests.support.kube_model import quantity

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


def caps(doc: Obj) -> dict[str, dict[str, Fraction]]:
    """Per queue and resource, the most it may use: its limit, or guarantee + borrowingLimit when lower."""
    found = limits(doc)
    ensured = guarantees(doc)
    for q, _ in walk(doc):
        for k, v in (q.get("borrowingLimit") or {}).items():
            total = ensured[q["name"]].get(k, Fraction(0)) + quantity(v)
            mine = found.setdefault(q["name"], {})
            mine[k] = min(mine.get(k, total), total)
    return found


def kept_outside(doc: Obj, used: Mapping[str, Mapping[str, Fraction]], leaf: str, resource: str) -> Fraction:
    """What queues off the leaf's path keep of `resource` from borrowers."""
    on_path = set(path(doc, leaf))
    children: dict[str, list[Obj]] = {}
    tops: list[Obj] = []
    for q, parent in walk(doc):
        (children.setdefault(parent, []) if parent else tops).append(q)

    def keeps(q: Obj) -> Fraction:
        own = Fraction(0)
        if resource in (q.get("lendingLimit") or {}):
            guaranteed = quantity((q.get("guarantee") or {}).get(resource, 0))
            own = max(guaranteed - quantity(q["lendingLimit"][resource])
                      - used.get(q["name"], {}).get(resource, Fraction(0)), Fraction(0))
        return max(own, sum((keeps(c) for c in children.get(q["name"], [])), Fraction(0)))

    total = Fraction(0)
    for q, parent in walk(doc):
        if q["name"] not in on_path and (not parent or parent in on_path):
            total += keeps(q)
    return total


def lending_blocks(doc: Obj, used: Mapping[str, Mapping[str, Fraction]], leaf: str, asks: Mapping[str, Fraction],
                   free: Mapping[str, Fraction]) -> bool:
    """The group borrows a resource that queues off its path keep, and the free amount beyond what they keep is
    less than it asks."""
    ensured = guarantees(doc)
    for resource, amount in asks.items():
        if not amount:
            continue
        borrows = any(used.get(q, {}).get(resource, Fraction(0)) + amount > ensured[q].get(resource, Fraction(0))
                      for q in path(doc, leaf) if q in ensured)
        borrows = borrows or any(q not in ensured for q in path(doc, leaf))
        kept = kept_outside(doc, used, leaf, resource)
        if borrows and kept and free.get(resource, Fraction(0)) - kept < amount:
            return True
    return False


def over(doc: Obj, used: Mapping[str, Mapping[str, Fraction]], leaf: str, asks: Mapping[str, Fraction]) -> str | None:
    """The first queue on the path that the ask would take over its limit or guarantee + borrowingLimit (None: it
    may start)."""
    bounds = caps(doc)
    for name in path(doc, leaf):
        for resource, cap in bounds.get(name, {}).items():
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
