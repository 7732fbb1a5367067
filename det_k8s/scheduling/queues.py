"""Team queues: a tree of queues with members, guarantees, limits and weights (issue 22), and the pass's book of them.

The policy's `queues` document (version 1), as an admin writes it (YAML or JSON)::

    version: 1
    defaultQueue: shared            # groups in no queue go here (absent: a queue `default`, no guarantee, no limit)
    queues:
    - name: research
      guarantee: {nvidia.com/gpu: 32}
      limit: {nvidia.com/gpu: 64}
      children:
      - name: nlp
        guarantee: {nvidia.com/gpu: 16}
        limit: {nvidia.com/gpu: 48}
        weight: 2
        members: {workspaces: [nlp], users: [alice], resourcePools: [a100], namespaces: [team-nlp],
                  labels: {team: nlp}}
    - name: shared

A group belongs to the leaf queue one of whose members it matches, tried by kind in this order: the Determined
workspace (`determined.ai/workspace` of its pods), the user (det-k8s's submitter, or `determined.ai/user`), the
resource pool (`determined.ai/resource_pool`), a label of its pods (`key: value`), its namespace; within labels
the queue first in the document wins. Groups matching none go to the default queue.

Admission (`QueueBook.hold`): a group starts only if every queue on its path from its leaf to the top stays within
its `limit` for every resource the limit names, counting the groups running in the queue's subtree (det-k8s's in
every namespace and the master's) and those this pass placed before it. Above a queue's `guarantee` it borrows
capacity others do not use; the physical fit decides whether there is any. Kueue's terms: a queue is a ClusterQueue,
its guarantee the nominal quota, its limit nominal quota plus borrowing limit, a parent a cohort.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..cluster.model import AMD_GPU, GPU, Pod
from ..names import is_dns_label, is_label_key, is_label_value
from ..quantity import QuantityError, format_milli, parse_milli
from .model import Lent, PodGroup, QueueHold, RunningGroup

VERSION = 1
DEFAULT_QUEUE = "default"
WORKSPACE = "determined.ai/workspace"
USER = "determined.ai/user"
POOL = "determined.ai/resource_pool"
MEMBER_KINDS = ("workspaces", "users", "resourcePools", "labels", "namespaces")  # the order a group is matched in
QUEUE_KEYS = ("name", "guarantee", "limit", "borrowingLimit", "lendingLimit", "weight", "members", "children")
TOP_KEYS = ("version", "defaultQueue", "queues")


@dataclass(frozen=True, slots=True)
class Members:
    """Who a leaf queue holds; each `labels` pair is one member."""

    workspaces: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    resource_pools: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    namespaces: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.workspaces or self.users or self.resource_pools or self.labels or self.namespaces)


@dataclass(frozen=True)
class Queue:
    """One queue: `parent` "" at the top; `guarantee` and `limit` per resource in milli-units (a resource the limit
    does not name is not limited); `weight` for sharing what is idle."""

    name: str
    parent: str = ""
    guarantee: Mapping[str, int] = field(default_factory=dict)
    limit: Mapping[str, int] = field(default_factory=dict)
    weight: float = 1.0
    members: Members = Members()
    borrowing_limit: Mapping[str, int] = field(default_factory=dict)  # at most this much above its guarantee
    lending_limit: Mapping[str, int] = field(default_factory=dict)  # at most this much of its unused guarantee lent

    @cached_property
    def cap(self) -> dict[str, tuple[int, str]]:
        """Per resource, the most the queue may use and which bound that is (`limit`, or `borrowingLimit`: its
        guarantee plus what it may borrow), the lower of the two."""
        found = {name: (amount, "limit") for name, amount in self.limit.items()}
        for name, amount in self.borrowing_limit.items():
            total = self.guarantee.get(name, 0) + amount
            if name not in found or total < found[name][0]:
                found[name] = (total, "borrowingLimit")
        return found

    @cached_property
    def kept(self) -> dict[str, int]:
        """Per resource, the part of its guarantee it does not lend (guarantee minus lendingLimit)."""
        return {name: max(self.guarantee.get(name, 0) - amount, 0) for name, amount in self.lending_limit.items()}


@dataclass(frozen=True)
class QueueTree:
    """The queues in document order (parents before children) and the queue groups in no queue go to."""

    queues: tuple[Queue, ...]
    default: str = DEFAULT_QUEUE

    @cached_property
    def _by_name(self) -> dict[str, Queue]:
        return {q.name: q for q in self.queues}

    def get(self, name: str) -> Queue:
        return self._by_name[name]

    @cached_property
    def _leaves(self) -> tuple[Queue, ...]:
        parents = {q.parent for q in self.queues}
        return tuple(q for q in self.queues if q.name not in parents)

    def leaves(self) -> tuple[Queue, ...]:
        return self._leaves

    @cached_property
    def _children(self) -> dict[str, tuple[Queue, ...]]:
        found: dict[str, list[Queue]] = {}
        for queue in self.queues:
            found.setdefault(queue.parent, []).append(queue)
        return {name: tuple(items) for name, items in found.items()}

    def children(self, name: str) -> tuple[Queue, ...]:
        """The queue's children in document order ("": the top-level queues)."""
        return self._children.get(name, ())

    @cached_property
    def _paths(self) -> dict[str, tuple[str, ...]]:
        found: dict[str, tuple[str, ...]] = {}
        for queue in self.queues:  # parents come before their children
            found[queue.name] = (queue.name, *found.get(queue.parent, ()))
        return found

    def path(self, leaf: str) -> tuple[str, ...]:
        """The queue and its ancestors, from it to the top."""
        return self._paths[leaf]

    @cached_property
    def _caps(self) -> dict[str, tuple[tuple[str, str, int, str], ...]]:
        """Per queue, the bounds on its path from it up: (queue, resource, most it may use, which bound)."""
        return {q.name: tuple((name, resource, limit, bound) for name in self.path(q.name)
                              for resource, (limit, bound) in sorted(self.get(name).cap.items()))
                for q in self.queues}

    def caps(self, leaf: str) -> tuple[tuple[str, str, int, str], ...]:
        return self._caps[leaf]

    @cached_property
    def _members(self) -> tuple[dict[str, str], dict[str, str], dict[str, str], dict[tuple[str, str], str],
                                dict[str, str]]:
        """Per member kind, member -> the first leaf (in document order) that holds it."""
        workspaces: dict[str, str] = {}
        users: dict[str, str] = {}
        pools: dict[str, str] = {}
        labels: dict[tuple[str, str], str] = {}
        namespaces: dict[str, str] = {}
        for queue in self.leaves():
            m = queue.members
            for found, values in ((workspaces, m.workspaces), (users, m.users), (pools, m.resource_pools),
                                  (namespaces, m.namespaces)):
                for value in values:
                    found.setdefault(value, queue.name)
            for pair in m.labels:
                labels.setdefault(pair, queue.name)
        return workspaces, users, pools, labels, namespaces

    @cached_property
    def _order(self) -> dict[str, int]:
        return {q.name: i for i, q in enumerate(self.queues)}

    def leaf_for(self, *, user: str, namespace: str, labels: Mapping[str, str]) -> str:
        """The leaf queue a group with these attributes belongs to (the default queue when none holds it)."""
        workspaces, users, pools, by_label, namespaces = self._members
        workspace = labels.get(WORKSPACE)
        if workspace is not None and workspace in workspaces:
            return workspaces[workspace]
        found = [users[u] for u in (user, labels.get(USER)) if u is not None and u in users]
        if found:
            return min(found, key=self._order.__getitem__)
        pool = labels.get(POOL)
        if pool is not None and pool in pools:
            return pools[pool]
        if by_label:
            found = [by_label[pair] for pair in labels.items() if pair in by_label]
            if found:
                return min(found, key=self._order.__getitem__)
        return namespaces.get(namespace or "default", self.default)


def unnamed_workspaces(tree: QueueTree | None, workspaces: Iterable[str | None]) -> list[str]:
    """One line per workspace (once each, in order) that no team queue names: its experiments go to the queue their
    user, resource pool, labels or namespace match, else the default queue. None without team queues."""
    if tree is None:
        return []
    named = tree._members[0]
    lines: list[str] = []
    seen: set[str] = set()
    for workspace in workspaces:
        if not workspace or workspace in named or workspace in seen:
            continue
        seen.add(workspace)
        lines.append(f"workspace {workspace!r} is named by no team queue (members.workspaces): its experiments go to "
                     f"the queue their user, resource pool, labels or namespace match, else {tree.default!r}")
    return lines


# -- reading and checking the document -------------------------------------------------------------------------


def _unknown(key: object, allowed: Sequence[str]) -> str:
    close = difflib.get_close_matches(str(key), list(allowed), n=1, cutoff=0.6)
    return f"not a key here{f' (did you mean {close[0]}?)' if close else ''}; expected one of {', '.join(allowed)}"


def _amounts(raw: Any, where: str, problems: list[str]) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: expected a mapping of resource name to amount, e.g. {{nvidia.com/gpu: 8}}")
        return {}
    out: dict[str, int] = {}
    for name, text in raw.items():
        if not isinstance(name, str) or not name:
            problems.append(f"{where}: {name!r} is not a resource name")
            continue
        if isinstance(text, bool):
            problems.append(f"{where}.{name}: {text!r} is not an amount")
            continue
        try:
            amount = parse_milli(text)
        except (QuantityError, TypeError, ValueError) as exc:
            problems.append(f"{where}.{name}: {exc}")
            continue
        if amount < 0:
            problems.append(f"{where}.{name}: must not be negative")
            continue
        out[name] = amount
    return out


def _strings(raw: Any, where: str, problems: list[str]) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(item, str) and item for item in raw):
        problems.append(f"{where}: expected a list of names")
        return ()
    return tuple(raw)


def _members(raw: Any, where: str, problems: list[str]) -> Members:
    if raw is None:
        return Members()
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: expected a mapping with {', '.join(MEMBER_KINDS)}")
        return Members()
    for key in raw:
        if key not in MEMBER_KINDS:
            problems.append(f"{where}.{key}: {_unknown(key, MEMBER_KINDS)}")
    labels: list[tuple[str, str]] = []
    raw_labels = raw.get("labels")
    if raw_labels is not None and not isinstance(raw_labels, Mapping):
        problems.append(f"{where}.labels: expected a mapping of label key to value, e.g. {{team: nlp}}")
    for key, value in (raw_labels or {}).items() if isinstance(raw_labels, Mapping) else ():
        if not is_label_key(key) or not isinstance(value, str) or not is_label_value(value):
            problems.append(f"{where}.labels.{key}: {key}={value!r} is not a Kubernetes label")
            continue
        labels.append((str(key), value))
    namespaces = _strings(raw.get("namespaces"), f"{where}.namespaces", problems)
    for index, name in enumerate(namespaces):
        if not is_dns_label(name):
            problems.append(f"{where}.namespaces[{index}]: {name!r} is not a namespace name")
    return Members(_strings(raw.get("workspaces"), f"{where}.workspaces", problems),
                   _strings(raw.get("users"), f"{where}.users", problems),
                   _strings(raw.get("resourcePools"), f"{where}.resourcePools", problems),
                   tuple(labels), namespaces)


def parse_queues(raw: Any, where: str = "") -> tuple[QueueTree | None, list[str]]:
    """The queue tree of a queue document, or None and every problem, one line each with its key path (under `where`:
    `queues` in a policy document)."""
    problems: list[str] = []
    dot = f"{where}." if where else ""
    if not isinstance(raw, Mapping):
        return None, [f"{where or 'queues'}: expected a mapping with {', '.join(TOP_KEYS)}"]
    for key in raw:
        if key not in TOP_KEYS:
            problems.append(f"{dot}{key}: {_unknown(key, TOP_KEYS)}")
    version = raw.get("version", VERSION)
    if version != VERSION or isinstance(version, bool):
        problems.append(f"{dot}version: {version!r} is not a queue document version this det-k8s reads "
                        f"(it reads {VERSION}); upgrade det-k8s")
        return None, problems
    queues: list[Queue] = []
    seen: dict[str, str] = {}  # name -> key path
    members_seen: dict[tuple[str, str], str] = {}  # (kind, member) -> queue

    def walk(items: Any, parent: str, path: str) -> None:
        if not isinstance(items, list):
            problems.append(f"{path}: expected a list of queues")
            return
        for index, item in enumerate(items):
            at = f"{path}[{index}]"
            if not isinstance(item, Mapping):
                problems.append(f"{at}: expected a queue (a mapping with {', '.join(QUEUE_KEYS)})")
                continue
            for key in item:
                if key not in QUEUE_KEYS:
                    problems.append(f"{at}.{key}: {_unknown(key, QUEUE_KEYS)}")
            name = item.get("name")
            if not isinstance(name, str) or not is_dns_label(name):
                problems.append(f"{at}.name: {'missing' if name is None else repr(name) + ' is not'} a queue name "
                                "(lower-case letters, digits and '-', at most 63)")
                continue
            if name in seen:
                problems.append(f"{at}.name: {name} is also the name of {seen[name]}; queue names are unique")
                continue
            seen[name] = at
            guarantee = _amounts(item.get("guarantee"), f"{at}.guarantee", problems)
            limit = _amounts(item.get("limit"), f"{at}.limit", problems)
            borrowing = _amounts(item.get("borrowingLimit"), f"{at}.borrowingLimit", problems)
            lending = _amounts(item.get("lendingLimit"), f"{at}.lendingLimit", problems)
            for resource, amount in guarantee.items():
                if resource in limit and limit[resource] < amount:
                    problems.append(f"{at}.limit.{resource}: {format_milli(resource, limit[resource])} is below the "
                                    f"queue's guarantee of {format_milli(resource, amount)}")
            for resource, amount in sorted(lending.items()):
                if amount > guarantee.get(resource, 0):
                    problems.append(f"{at}.lendingLimit.{resource}: {format_milli(resource, amount)} is more than the "
                                    f"queue's guarantee of {format_milli(resource, guarantee.get(resource, 0))} "
                                    "(a queue lends only what it is guaranteed)")
            weight = item.get("weight", 1)
            if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight) \
                    or weight <= 0:
                problems.append(f"{at}.weight: {weight!r} is not a positive number")
                weight = 1
            members = _members(item.get("members"), f"{at}.members", problems)
            children = item.get("children")
            if children is not None and members:
                problems.append(f"{at}.members: only a queue without children has members (groups run in leaves)")
            for kind, values in (("workspace", members.workspaces), ("user", members.users),
                                 ("resource pool", members.resource_pools), ("namespace", members.namespaces),
                                 ("label", tuple(f"{k}={v}" for k, v in members.labels))):
                for value in values:
                    other = members_seen.setdefault((kind, value), name)
                    if other != name:
                        problems.append(f"{at}.members: {kind} {value} is already a member of queue {other}; "
                                        "a member belongs to one queue")
            queues.append(Queue(name, parent, guarantee, limit, float(weight), members, borrowing, lending))
            if children is not None:
                before = len(queues)
                walk(children, name, f"{at}.children")
                direct = [q for q in queues[before:] if q.parent == name]
                for resource, amount in guarantee.items():
                    total = sum(q.guarantee.get(resource, 0) for q in direct)
                    if total > amount:
                        problems.append(f"{at}.children: their guarantees of {resource} add up to "
                                        f"{format_milli(resource, total)}, more than {name}'s "
                                        f"{format_milli(resource, amount)}")

    walk(raw.get("queues") or [], "", f"{dot}queues")
    default = raw.get("defaultQueue")
    parents = {q.parent for q in queues}
    if default is None:
        if DEFAULT_QUEUE in seen:
            if DEFAULT_QUEUE in parents:
                problems.append(f"{dot}defaultQueue: not set, and the queue named {DEFAULT_QUEUE} has children; "
                                "name a queue without children")
        else:
            queues.append(Queue(DEFAULT_QUEUE))
        default = DEFAULT_QUEUE
    elif not isinstance(default, str) or default not in seen:
        problems.append(f"{dot}defaultQueue: {default!r} is not one of the queues")
    elif default in parents:
        problems.append(f"{dot}defaultQueue: {default} has children; groups run in queues without children")
    if problems:
        return None, problems
    return QueueTree(tuple(queues), str(default)), []


def queues_data(tree: QueueTree) -> dict[str, Any]:
    """The document back (quantities as Kubernetes writes them), as the policy ConfigMap keeps it."""
    def amounts(values: Mapping[str, int]) -> dict[str, str]:
        return {name: format_milli(name, amount) for name, amount in sorted(values.items())}

    def one(queue: Queue) -> dict[str, Any]:
        data: dict[str, Any] = {"name": queue.name}
        if queue.guarantee:
            data["guarantee"] = amounts(queue.guarantee)
        if queue.limit:
            data["limit"] = amounts(queue.limit)
        if queue.borrowing_limit:
            data["borrowingLimit"] = amounts(queue.borrowing_limit)
        if queue.lending_limit:
            data["lendingLimit"] = amounts(queue.lending_limit)
        if queue.weight != 1:
            data["weight"] = queue.weight
        m = queue.members
        members: dict[str, Any] = {}
        for key, values in (("workspaces", m.workspaces), ("users", m.users), ("resourcePools", m.resource_pools),
                            ("namespaces", m.namespaces)):
            if values:
                members[key] = list(values)
        if m.labels:
            members["labels"] = dict(m.labels)
        if members:
            data["members"] = members
        children = [one(child) for child in tree.children(queue.name)]
        if children:
            data["children"] = children
        return data

    return {"version": VERSION, "defaultQueue": tree.default,
            "queues": [one(q) for q in tree.queues if not q.parent]}


# -- in a pass ---------------------------------------------------------------------------------------------------


class QueueBook:
    """What each queue holds in a pass (running groups in its subtree, and this pass's placements), and admission.

    `pods` are the snapshot's pods: a running group's queue is read from its first pod's labels and namespace.
    """

    def __init__(self, tree: QueueTree, running: Iterable[RunningGroup], pods: Iterable[Pod]) -> None:
        self.tree = tree
        self.running = tuple(running)
        firsts = {group.pods[0].name for group in self.running if group.pods}
        by_name: dict[str, Pod] = {}  # a first pod's name -> the pod (of the first namespace by name, if several)
        for pod in pods:
            if pod.name in firsts:
                seen = by_name.get(pod.name)
                if seen is None or pod.namespace < seen.namespace:
                    by_name[pod.name] = pod
        self.used: dict[str, dict[str, int]] = {q.name: {} for q in tree.queues}
        self.running_in: dict[str, list[str]] = {}
        self.home: dict[str, str] = {}  # running group id -> its leaf queue
        self.namespace: dict[str, str] = {}  # running group id -> its pods' namespace
        self.given_back: dict[str, dict[str, int]] = {}  # per queue: what this pass's reclaim victims will free
        self._shares: dict[str, float] = {}  # leaf -> its share, until its use changes
        self._kept: dict[tuple[str, str], tuple[int, str]] = {}  # (leaf, resource) -> kept_from, until a use changes
        for group in self.running:
            first = by_name.get(group.pods[0].name) if group.pods else None
            self.namespace[group.id] = first.namespace if first else ""
            leaf = tree.leaf_for(user=group.user, namespace=first.namespace if first else "",
                                 labels=first.labels if first else {})
            self.running_in.setdefault(leaf, []).append(group.id)
            self.home[group.id] = leaf
            self._add(leaf, group.total_request)
        self._leaf: dict[str, str] = {}
        self._requests: dict[str, dict[str, int]] = {}
        # lending limits: the resources some queue keeps part of, and the cluster's free amount of each (ready,
        # schedulable nodes' allocatable less every pod's request), less this pass's placements (`free_from`)
        self.kept_resources = sorted({name for q in tree.queues for name, amount in q.kept.items() if amount > 0})
        self.free: dict[str, int] = {}

    def free_from(self, allocatable: Mapping[str, int], used: Mapping[str, int]) -> None:
        """The cluster's totals, for lending limits (only the resources some queue keeps are followed)."""
        self.free = {name: allocatable.get(name, 0) - used.get(name, 0) for name in self.kept_resources}

    def request(self, group: PodGroup) -> dict[str, int]:
        """The group's total request, summed once."""
        found = self._requests.get(group.id)
        if found is None:
            found = self._requests[group.id] = group.total_request
        return found

    def _add(self, leaf: str, request: Mapping[str, int]) -> None:
        self._shares.pop(leaf, None)
        self._kept.clear()
        for name in self.tree.path(leaf):
            bucket = self.used[name]
            for resource, amount in request.items():
                bucket[resource] = bucket.get(resource, 0) + amount

    def leaf(self, group: PodGroup) -> str:
        found = self._leaf.get(group.id)
        if found is None:
            first = group.pods[0] if group.pods else None
            found = self._leaf[group.id] = self.tree.leaf_for(
                user=group.user, namespace=first.namespace if first else "", labels=first.labels if first else {})
        return found

    def hold(self, group: PodGroup) -> QueueHold | None:
        """The first queue on the group's path (from its leaf up) whose limit it would exceed, or None."""
        leaf = self.leaf(group)
        request = self.request(group)
        for name, resource, limit, bound in self.tree.caps(leaf):
            needs = request.get(resource, 0)
            if needs:
                used = self.used[name].get(resource, 0)
                if used + needs > limit:
                    return QueueHold(name, leaf, resource, used, limit, needs, bound)
        if not self.kept_resources:
            return None
        path = self.tree.path(leaf)
        for resource in self.kept_resources:
            needs = request.get(resource, 0)
            if not needs or not any(self.used[name].get(resource, 0) + needs > self.tree.get(name).guarantee.get(
                    resource, 0) for name in path):
                continue  # within the guarantee of every queue on its path: it borrows nothing
            kept, keeper = self.kept_from(leaf, resource)
            free = self.free.get(resource, 0)
            if kept and free - kept < needs:
                return QueueHold(keeper, leaf, resource, kept, free, needs, "lendingLimit")
        return None

    def kept_from(self, leaf: str, resource: str) -> tuple[int, str]:
        """What queues outside the leaf's path keep of `resource` and do not lend it (the part of their guarantee
        above their lendingLimit that they do not use; a parent's and its children's kept parts nest, so the
        larger counts), and the queue that keeps most."""
        found = self._kept.get((leaf, resource))
        if found is None:
            found = self._kept[(leaf, resource)] = self._kept_from(leaf, resource)
        return found

    def _kept_from(self, leaf: str, resource: str) -> tuple[int, str]:
        path = set(self.tree.path(leaf))

        def kept(queue: Queue) -> tuple[int, str]:
            own = max(queue.kept.get(resource, 0) - self.used[queue.name].get(resource, 0), 0)
            below = [kept(child) for child in self.tree.children(queue.name)]
            total = sum(amount for amount, _ in below)
            if own >= total:
                return own, queue.name if own else ""
            return total, max(below)[1]

        found = [kept(q) for name in ("", *path) for q in self.tree.children(name) if q.name not in path]
        return sum(amount for amount, _ in found), max(found, default=(0, ""))[1]

    def charge(self, group: PodGroup) -> None:
        request = self.request(group)
        self._add(self.leaf(group), request)
        for name in self.kept_resources:
            self.free[name] = self.free.get(name, 0) - request.get(name, 0)

    def within_guarantee(self, group: PodGroup) -> bool:
        """Its leaf queue guarantees a resource the group asks for, and holds the group within every guarantee it
        has of what the group asks: the queue may reclaim what others borrowed of it."""
        queue = self.tree.get(self.leaf(group))
        if not queue.guarantee:
            return False
        request = self.request(group)
        used = self.used[queue.name]
        asked = False
        for name, guaranteed in queue.guarantee.items():
            amount = request.get(name, 0)
            if amount:
                if used.get(name, 0) + amount > guaranteed:
                    return False
                asked = True
        return asked

    def owed(self, groups: Iterable[PodGroup]) -> set[str]:
        """The queued groups their queues' guarantees hold, taken per leaf in priority and submission order while
        they fit (with what the leaf uses now): these go before groups that would borrow (Kueue's entry order)."""
        room: dict[str, dict[str, int]] = {}
        for queue in self.tree.leaves():
            if queue.guarantee:
                used = self.used[queue.name]
                left = {name: amount - used.get(name, 0) for name, amount in queue.guarantee.items()}
                if any(amount > 0 for amount in left.values()):  # a leaf with no room left owes nothing
                    room[queue.name] = left
        found: set[str] = set()
        if not room:
            return found
        candidates = [group for group in groups if self.leaf(group) in room]
        for group in sorted(candidates, key=lambda g: (-g.priority, g.sequence, g.id)):
            left = room[self.leaf(group)]
            request = {name: amount for name, amount in self.request(group).items() if amount and name in left}
            if request and all(amount <= left[name] for name, amount in request.items()):
                for name, amount in request.items():
                    left[name] -= amount
                found.add(group.id)
        return found

    def borrowing(self, group_id: str, resources: Iterable[str]) -> bool:
        """The running group's leaf queue uses more than its guarantee of one of `resources` (Kueue: borrowing)."""
        leaf = self.home.get(group_id)
        if leaf is None:
            return False
        queue = self.tree.get(leaf)
        used, back = self.used[leaf], self.given_back.get(leaf, {})
        return any(used.get(name, 0) - back.get(name, 0) > queue.guarantee.get(name, 0) for name in resources)

    def share(self, leaf: str, totals: Mapping[str, int]) -> float:
        """The queue's weighted dominant share of what it borrows: the largest fraction of a cluster total it uses
        above its guarantee (victims leaving not counted), divided by its weight; 0 within its guarantee."""
        found = self._shares.get(leaf)
        if found is None:
            queue = self.tree.get(leaf)
            used, back = self.used[leaf], self.given_back.get(leaf, {})
            borrowed = max((max(used.get(name, 0) - back.get(name, 0) - queue.guarantee.get(name, 0), 0) / total
                            for name, total in totals.items() if total > 0), default=0.0)
            found = self._shares[leaf] = borrowed / queue.weight
        return found

    def leaving(self, victim: RunningGroup) -> None:
        """A victim of reclaim: its queues stop borrowing what it frees (it still holds it until its pods are gone,
        so it still counts against their limits)."""
        leaf = self.home.get(victim.id)
        if leaf:
            self._shares.pop(leaf, None)
        for name in self.tree.path(leaf) if leaf else ():
            bucket = self.given_back.setdefault(name, {})
            for resource, amount in victim.total_request.items():
                bucket[resource] = bucket.get(resource, 0) + amount


def lent_back(request: Mapping[str, int], guaranteed: Sequence[str], victims: Iterable[RunningGroup],
              home: Mapping[str, str]) -> tuple[Lent, ...]:
    """What a reclaiming group takes back, per queue that borrowed it: of the resource its queue guarantees that
    names it best (a GPU first, else the first by name), what the victims of each queue hold, in the victims'
    order, in all no more than the group asks."""
    if not guaranteed:
        return ()
    resource = next((name for name in (GPU, AMD_GPU) if name in guaranteed), min(guaranteed))
    left = request.get(resource, 0)
    per: dict[str, int] = {}
    for victim in victims:
        take = min(victim.total_request.get(resource, 0), left)
        if take > 0:
            lender = home.get(victim.id, "")
            per[lender] = per.get(lender, 0) + take
            left -= take
    return tuple(Lent(lender, resource, amount) for lender, amount in per.items())


def unit(resource: str, milli: int) -> str:
    """`48 GPUs`, `1 GPU`, `500m cpu`: an amount as why-pending and `det-k8s queues` show it."""
    text = format_milli(resource, milli)
    if resource in (GPU, AMD_GPU):
        return f"{text} GPU{'' if text == '1' else 's'}"
    return f"{text} {resource}"


@dataclass(frozen=True)
class QueueRow:
    """One queue as `det-k8s queues` shows it: amounts per resource in milli-units. `used` is what the groups
    running in its subtree hold; `borrowed` the part of it above the guarantee, `lent` the guarantee it leaves idle
    for others (at most its lendingLimit); `waiting` the groups of its subtree not placed by the plan (with why,
    when a queue limit holds them)."""

    name: str
    parent: str
    depth: int
    weight: float
    guarantee: Mapping[str, int]
    limit: Mapping[str, int]  # the lower of its limit and its guarantee + borrowingLimit, per resource
    used: Mapping[str, int]
    borrowed: Mapping[str, int]
    lent: Mapping[str, int]
    running: tuple[str, ...]
    waiting: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        def amounts(values: Mapping[str, int]) -> dict[str, str]:
            return {name: format_milli(name, amount) for name, amount in sorted(values.items())}

        return {"name": self.name, "parent": self.parent or None, "weight": self.weight,
                "guarantee": amounts(self.guarantee), "limit": amounts(self.limit), "used": amounts(self.used),
                "borrowed": amounts(self.borrowed), "lent": amounts(self.lent), "running": list(self.running),
                "waiting": list(self.waiting)}


def report(tree: QueueTree, book: QueueBook, waiting: Iterable[PodGroup]) -> list[QueueRow]:
    """Every queue in document order: guarantee, use, borrowed, lent, limit, running and waiting groups. `book` is
    a QueueBook of the running groups (before any placement); `waiting` the queued groups a plan did not place."""
    below: dict[str, list[str]] = {}
    for group in sorted(waiting, key=lambda g: (g.sequence, g.id)):
        for name in tree.path(book.leaf(group)):
            below.setdefault(name, []).append(group.id)
    running: dict[str, list[str]] = {}
    for leaf, ids in book.running_in.items():
        for name in tree.path(leaf):
            running.setdefault(name, []).extend(ids)
    rows = []
    for queue in tree.queues:
        used = {k: v for k, v in book.used[queue.name].items() if v}
        resources = set(used) | set(queue.guarantee)
        borrowed = {r: used.get(r, 0) - queue.guarantee.get(r, 0) for r in resources
                    if used.get(r, 0) > queue.guarantee.get(r, 0)}
        lent = {r: min(queue.guarantee[r] - used.get(r, 0), queue.lending_limit.get(r, queue.guarantee[r]))
                for r in queue.guarantee if queue.guarantee[r] > used.get(r, 0)}
        lent = {r: amount for r, amount in lent.items() if amount > 0}
        rows.append(QueueRow(queue.name, queue.parent, len(tree.path(queue.name)) - 1, queue.weight,
                             dict(queue.guarantee), {r: cap for r, (cap, _) in queue.cap.items()}, used, borrowed, lent,
                             tuple(sorted(running.get(queue.name, ()))), tuple(below.get(queue.name, ()))))
    return rows


def unheld(tree: QueueTree, totals: Mapping[str, int]) -> list[str]:
    """Guarantees the cluster cannot hold: the top-level queues' guarantees of a resource add up to more than the
    cluster's allocatable (`totals`, milli-units, of ready schedulable nodes). One line each."""
    found = []
    summed: dict[str, int] = {}
    for queue in tree.queues:
        if not queue.parent:
            for name, amount in queue.guarantee.items():
                summed[name] = summed.get(name, 0) + amount
    for name, amount in sorted(summed.items()):
        have = totals.get(name, 0)
        if amount > have:
            holders = ", ".join(q.name for q in tree.queues if not q.parent and q.guarantee.get(name))
            found.append(f"the guarantees of {name} ({holders}) add up to {unit(name, amount)}, and the cluster has "
                         f"{unit(name, have)}: reclaim cannot give every queue its guarantee at once")
    return found
