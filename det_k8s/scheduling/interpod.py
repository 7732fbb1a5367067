"""The rules that depend on other pods: host ports, pod affinity and anti-affinity, topology spread.

kube-scheduler's NodePorts, InterPodAffinity and PodTopologySpread filters (and the kubelet's port
check) judge a pod against the pods already on the nodes. `Space` keeps what they read, per node
and topology domain, for the pods in the snapshot and the pods this pass places, and answers
"may this pod go to this node?" with the cause when it may not:

- host ports: no pod on the node may hold the same port and protocol on an overlapping address;
- the pod's required affinity: for every term, the node's domain (its value of the term's
  topology key) must hold a pod matching *all* of the pod's affinity terms; if no such pod exists
  anywhere and the pod matches its own terms, any node with the topology keys will do (the first
  pod of a group that wants to be together);
- the pod's required anti-affinity: no pod matching a term in the node's domain;
- other pods' required anti-affinity: no pod whose term matches this pod in the node's domain
  (anti-affinity is symmetric);
- DoNotSchedule spread: pods matching the selector, in the pod's namespace and not terminating,
  counted per domain over the nodes the constraint's inclusion policies admit: the node's domain
  count + 1 (if the pod matches) - the smallest domain count (0 with fewer domains than
  minDomains) must not exceed maxSkew; a node without the topology key is refused.

Pods are checked one at a time, as kube-scheduler schedules them: each later pod of a group sees
the earlier ones. Terminating pods still block (anti-affinity, ports) but never enable (affinity)
or count for spread. Pods placed by preemption are created only once their victims are gone,
after the pass's other placements: for those they block, but do not count where they would enable
(while their own group is placed, each of its pods sees the ones before it, as they start together),
and a pod placed now that their spread would count stays out of their domains.

Selectors are matched through an index on their `In` requirements, so registering 30,000 pods
against the terms of hundreds of groups costs a few dictionary lookups per pod.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence

from ..cluster.model import Constraints, HostPort, LabelSelector, Node, PodAffinityTerm, Snapshot, SpreadConstraint
from .model import PodGroup, PodRequest

Pair = tuple[str, str]  # (topology key, value)


def _anchor(selector: LabelSelector) -> tuple[str, str] | None:
    """A (key, value) every matching pod must have, if the selector requires one."""
    for req in selector.requirements:
        if req.operator == "In" and len(req.values) == 1 and not req.field:
            return req.key, req.values[0]
    return None


class _Index:
    """Objects registered under selectors; `candidates(labels)` yields those whose anchor the labels have."""

    def __init__(self) -> None:
        self.by_anchor: dict[tuple[str, str], list[Hashable]] = {}
        self.loose: list[Hashable] = []

    def add(self, item: Hashable, selector: LabelSelector) -> None:
        if selector.nothing:
            return
        anchor = _anchor(selector)
        if anchor is None:
            self.loose.append(item)
        else:
            self.by_anchor.setdefault(anchor, []).append(item)

    def candidates(self, labels: Mapping[str, str]) -> Iterable[Hashable]:
        yield from self.loose
        if self.by_anchor:
            for pair in labels.items():
                yield from self.by_anchor.get(pair, ())

    def __bool__(self) -> bool:
        return bool(self.by_anchor or self.loose)


class SpreadView:
    """Pods matching one spread constraint per domain, over the nodes an incoming pod's policies admit."""

    def __init__(self, domain_of: dict[str, str], per_node: Mapping[str, int]) -> None:
        self.domain_of = domain_of
        self.counts: dict[str, int] = dict.fromkeys(domain_of.values(), 0)
        for node, count in per_node.items():
            value = domain_of.get(node)
            if value is not None:
                self.counts[value] += count
        self.histogram: Counter[int] = Counter(self.counts.values())

    def add(self, node: str, sign: int) -> None:
        value = self.domain_of.get(node)
        if value is None:
            return
        old = self.counts[value]
        self.histogram[old] -= 1
        if not self.histogram[old]:
            del self.histogram[old]
        self.counts[value] = old + sign
        self.histogram[old + sign] += 1

    def minimum(self, min_domains: int) -> int:
        if len(self.counts) < min_domains or not self.histogram:
            return 0
        return min(self.histogram)


class Space:
    """Pods per node and domain as the inter-pod filters read them (see the module docstring)."""

    def __init__(self, snapshot: Snapshot, queue: Sequence[PodGroup]) -> None:
        self.nodes: dict[str, Node] = snapshot.nodes_by_name
        self.namespace_labels = snapshot.namespaces
        self.ports: dict[str, list[HostPort]] = {}
        # counters for the terms of queued pods: pairs holding matching pods
        self.affinity: dict[tuple[PodAffinityTerm, ...], Counter[Pair]] = {}
        self.anti: dict[PodAffinityTerm, Counter[Pair]] = {}
        self.spread: dict[tuple[SpreadConstraint, str], Counter[str]] = {}  # matching pods per node
        self._views: dict[Hashable, SpreadView] = {}
        self._views_of: dict[tuple[SpreadConstraint, str], list[SpreadView]] = {}
        # anti-affinity terms of any pod, with the domains of the pods holding them
        self.anti_sources: dict[PodAffinityTerm, Counter[Pair]] = {}
        self._affinity_index, self._anti_index, self._spread_index = _Index(), _Index(), _Index()
        self._terms_of: dict[int, tuple[PodRequest, tuple[PodAffinityTerm, ...]]] = {}
        self._pod_views: dict[tuple[int, SpreadConstraint], tuple[PodRequest, SpreadView]] = {}
        self._domain_maps: dict[tuple[object, ...], dict[str, str]] = {}
        self._sources_index: _Index | None = None
        # the spread constraints of pods placed by preemption (created only once their victims are gone, after the
        # pass's other placements): domains holding them, per (constraint, namespace). A pod placed now that matches
        # one must stay out of those domains: it would be there first and count against them
        self.held_spread: dict[tuple[SpreadConstraint, str], Counter[str]] = {}
        self.used = False  # whether any rule here can refuse anything
        for group in queue:
            for request in group.pods:
                c = request.constraints
                if c.affinity and c.affinity not in self.affinity:
                    self.affinity[c.affinity] = Counter()
                    for term in c.affinity:  # a pod must match all of them: any one's anchor will do
                        if _anchor(term.selector) is not None or term is c.affinity[-1]:
                            self._affinity_index.add(c.affinity, term.selector)
                            break
                for term in c.anti_affinity:
                    if term not in self.anti:
                        self.anti[term] = Counter()
                        self._anti_index.add(term, term.selector)
                    self.anti_sources.setdefault(term, Counter())
                for constraint in c.spread:
                    key = (constraint, request.namespace or "default")
                    if key not in self.spread:
                        self.spread[key] = Counter()
                        self._spread_index.add(key, constraint.selector)
                self.used = self.used or c.interpod
        matters = bool(self._anti_index or self._affinity_index or self._spread_index)  # any pod may count
        for pod in snapshot.pods:
            c = pod.constraints
            if not (matters or c.anti_affinity or c.host_ports) or not pod.active:
                continue
            node = pod.node
            if node in self.nodes:
                if c.anti_affinity or c.host_ports:
                    self.used = True
                self.add(pod.labels, pod.namespace, c, node, terminating=pod.deleting)

    def _domain(self, node: str, key: str) -> str | None:
        return self.nodes[node].labels.get(key)

    def _matches(self, term: PodAffinityTerm, labels: Mapping[str, str], namespace: str) -> bool:
        return term.matches(labels, namespace, self.namespace_labels)

    def add(self, labels: Mapping[str, str], namespace: str, constraints: Constraints, node: str, *,
            counting: bool = True, terminating: bool = False, sign: int = 1) -> None:
        """A pod (of these labels, namespace and constraints) arrives on the node (`sign=-1`: leaves).

        `counting=False`: it blocks (ports, anti-affinity) but does not enable (affinity, spread).
        """
        namespace = namespace or "default"
        if constraints.host_ports:
            held = self.ports.setdefault(node, [])
            for port in constraints.host_ports:
                if sign > 0:
                    held.append(port)
                else:
                    held.remove(port)
        for term in constraints.anti_affinity:
            value = self._domain(node, term.topology_key)
            if value is not None:
                self.anti_sources.setdefault(term, Counter())[(term.topology_key, value)] += sign
        if self._anti_index:
            for item in self._anti_index.candidates(labels):
                assert isinstance(item, PodAffinityTerm)
                if self._matches(item, labels, namespace):
                    value = self._domain(node, item.topology_key)
                    if value is not None:
                        self.anti[item][(item.topology_key, value)] += sign
        if not counting and not terminating and constraints.spread:
            for constraint in constraints.spread:
                value = self._domain(node, constraint.topology_key)
                if value is not None and not constraint.selector.empty:
                    self.held_spread.setdefault((constraint, namespace), Counter())[value] += sign
                    self.used = True
        if counting and not terminating:
            if self._affinity_index:
                seen: set[Hashable] = set()
                for item in self._affinity_index.candidates(labels):
                    if item in seen:
                        continue
                    seen.add(item)
                    terms = item
                    assert isinstance(terms, tuple)
                    if all(self._matches(t, labels, namespace) for t in terms):
                        counts = self.affinity[terms]
                        for t in terms:
                            value = self._domain(node, t.topology_key)
                            if value is not None:
                                counts[(t.topology_key, value)] += sign
            if self._spread_index:
                for item in self._spread_index.candidates(labels):
                    assert isinstance(item, tuple)
                    constraint, wanted = item
                    if namespace == wanted and not constraint.selector.empty and constraint.selector.matches(labels):
                        self.spread[item][node] += sign
                        for view in self._views_of.get(item, ()):
                            view.add(node, sign)

    def add_pod(self, pod: PodRequest, node: str, *, counting: bool = True, sign: int = 1) -> None:
        self.add(pod.labels, pod.namespace, pod.constraints, node, counting=counting, sign=sign)

    def _anti_terms_for(self, pod: PodRequest) -> tuple[PodAffinityTerm, ...]:
        """Every registered anti-affinity term that matches the pod (other pods' terms it must keep away from).

        The terms are fixed once the snapshot's pods are in (queued pods' terms were registered first),
        so they are indexed by their selectors' `In` requirements on first use.
        """
        found = self._terms_of.get(id(pod))
        if found is None:
            if self._sources_index is None:
                self._sources_index = _Index()
                for term in self.anti_sources:
                    self._sources_index.add(term, term.selector)
            namespace = pod.namespace or "default"
            seen: set[Hashable] = set()
            terms = []
            for item in self._sources_index.candidates(pod.labels):
                if item not in seen:
                    seen.add(item)
                    assert isinstance(item, PodAffinityTerm)
                    if self._matches(item, pod.labels, namespace):
                        terms.append(item)
            found = self._terms_of[id(pod)] = (pod, tuple(terms))
        return found[1]

    def interacts(self, pod: PodRequest) -> bool:
        """Whether the pod's placement is judged by or changes anything here."""
        if pod.constraints.interpod or self._anti_terms_for(pod):
            return True
        namespace = pod.namespace or "default"
        labels = pod.labels
        for term in self._anti_index.candidates(labels):
            assert isinstance(term, PodAffinityTerm)
            if self._matches(term, labels, namespace):
                return True
        for terms in self._affinity_index.candidates(labels):
            assert isinstance(terms, tuple)
            if all(self._matches(t, labels, namespace) for t in terms):
                return True
        for item in self._spread_index.candidates(labels):
            assert isinstance(item, tuple)
            constraint, wanted = item
            if namespace == wanted and constraint.selector.matches(labels):
                return True
        return False

    def judged(self, pod: PodRequest) -> bool:
        """Whether the pod's own placement is subject to a rule here (its terms, ports, others' anti-affinity, the
        spread of groups placed by preemption)."""
        return pod.constraints.interpod or bool(self._anti_terms_for(pod)) or bool(self._held_for(pod))

    def _held_for(self, pod: PodRequest) -> list[tuple[SpreadConstraint, Counter[str]]]:
        """The spread constraints of preemptors' pods that would count this pod."""
        if not self.held_spread:
            return []
        namespace = pod.namespace or "default"
        return [(constraint, domains) for (constraint, wanted), domains in self.held_spread.items()
                if wanted == namespace and constraint.selector.matches(pod.labels)]

    def view(self, constraint: SpreadConstraint, pod: PodRequest) -> SpreadView:
        """Domain counts for the constraint over the nodes the pod's inclusion policies admit."""
        memo = (id(pod), constraint)
        found = self._pod_views.get(memo)
        if found is not None:
            return found[1]
        c = pod.constraints
        namespace = pod.namespace or "default"
        keys = tuple(sorted({s.topology_key for s in c.spread}))
        affinity = (tuple(sorted(c.node_selector.items())), c.required_terms) if constraint.honor_affinity else None
        taints = c.tolerations if constraint.honor_taints else None
        key = (constraint, namespace, keys, affinity, taints)
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = SpreadView(self._domains(constraint.topology_key, keys, affinity, taints, c),
                                                 self.spread.get((constraint, namespace), {}))
            self._views_of.setdefault((constraint, namespace), []).append(view)
        self._pod_views[memo] = (pod, view)
        return view

    def _domains(self, key: str, keys: tuple[str, ...], affinity: object, taints: object,
                 c: Constraints) -> dict[str, str]:
        """node -> its value of `key`, for the nodes with every spread key that the policies admit (shared)."""
        cache = (key, keys, affinity, taints)
        found = self._domain_maps.get(cache)
        if found is None:
            found = {}
            for name, node in self.nodes.items():
                labels = node.labels
                if any(k not in labels for k in keys):
                    continue
                if affinity is not None and not c.affinity_matches(node):
                    continue
                if taints is not None and c.untolerated(t for t in node.taints if t.effect != "PreferNoSchedule"):
                    continue
                found[name] = labels[key]
            self._domain_maps[cache] = found
        return found

    def cause(self, pod: PodRequest, node: str) -> str | None:
        """Why an inter-pod rule refuses the pod on the node now, or None."""
        c = pod.constraints
        labels = self.nodes[node].labels
        if c.host_ports:
            held = self.ports.get(node)
            if held:
                for port in c.host_ports:
                    if any(port.conflicts(other) for other in held):
                        return f"host port {port} in use"
        if c.affinity:
            counts = self.affinity[c.affinity]
            present = True
            for term in c.affinity:
                value = labels.get(term.topology_key)
                if value is None:
                    return f"no {term.topology_key} label (pod affinity)"
                if counts.get((term.topology_key, value), 0) <= 0:
                    present = False
            if not present:
                namespace = pod.namespace or "default"
                alone = not any(count > 0 for count in counts.values())
                if not (alone and all(self._matches(t, pod.labels, namespace) for t in c.affinity)):
                    return "pod affinity"
        for term in c.anti_affinity:
            value = labels.get(term.topology_key)
            if value is not None and self.anti[term].get((term.topology_key, value), 0) > 0:
                return "pod anti-affinity"
        for term in self._anti_terms_for(pod):
            value = labels.get(term.topology_key)
            if value is not None and self.anti_sources[term].get((term.topology_key, value), 0) > 0:
                return "other pods' anti-affinity"
        for constraint in c.spread:
            value = labels.get(constraint.topology_key)
            if value is None or any(s.topology_key not in labels for s in c.spread):
                return f"no {constraint.topology_key} label (topology spread)"
            view = self.view(constraint, pod)
            own = 1 if constraint.selector.matches(pod.labels) else 0
            if view.counts.get(value, 0) + own - view.minimum(constraint.min_domains) > constraint.max_skew:
                return f"topology spread over {constraint.topology_key}"
        for constraint, domains in self._held_for(pod):
            if domains.get(labels.get(constraint.topology_key, ""), 0) > 0:
                return f"topology spread over {constraint.topology_key} of a group waiting for preemption"
        return None
