"""An independent model of what kube-scheduler's filters and the kubelet's admission refuse.

Written from Kubernetes' sources (pkg/scheduler/framework/plugins: noderesources, nodename,
nodeunschedulable, nodeaffinity, tainttoleration, nodeports, interpodaffinity, podtopologyspread,
volumebinding, volumezone, volumerestrictions; component-helpers/scheduling/corev1/nodeaffinity;
pkg/kubelet/lifecycle/predicate.go; plugin/pkg/admission/extendedresourcetoleration), not from
det-k8s: it reads raw Kubernetes objects (plain dicts) and never imports det_k8s, so the tests
that check det-k8s's plans against it check det-k8s's reading of the objects too.

Simplifications, all on the strict side or outside what the tests generate: quantities are exact
fractions; pods pinned to a node by node affinity (or nominated) but not yet bound count as on it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from itertools import combinations, product
from typing import Any

Obj = Mapping[str, Any]
SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
            "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": 1,
            "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
CONDITION_TAINTS = {"MemoryPressure": "node.kubernetes.io/memory-pressure",
                    "DiskPressure": "node.kubernetes.io/disk-pressure",
                    "PIDPressure": "node.kubernetes.io/pid-pressure",
                    "NetworkUnavailable": "node.kubernetes.io/network-unavailable"}
ZONE_KEYS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_KEYS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")


def quantity(text: Any) -> Fraction:
    match = re.fullmatch(r"([+-]?[0-9.]+)(?:[eE]([+-]?\d+))?([a-zA-Z]*)", str(text).strip())
    assert match, f"not a quantity: {text!r}"
    number = Fraction(match.group(1)) * (Fraction(10) ** int(match.group(2) or 0))
    return number * SUFFIXES[match.group(3)]


def meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def spec_of(obj: Obj) -> Obj:
    return obj.get("spec") or {}


# -- pods: requests, identity -------------------------------------------------------------------

def _container(container: Obj) -> dict[str, Fraction]:
    resources = container.get("resources") or {}
    out = {k: quantity(v) for k, v in (resources.get("requests") or {}).items()}
    for k, v in (resources.get("limits") or {}).items():
        out.setdefault(k, quantity(v))
    return out


def requests(spec: Obj) -> dict[str, Fraction]:
    """The pod's effective request, plus the one `pods` slot it takes."""
    total: Counter[str] = Counter()
    for c in spec.get("containers") or ():
        total.update(_container(c))
    sidecars: Counter[str] = Counter()
    peak: dict[str, Fraction] = {}
    for c in spec.get("initContainers") or ():
        asked = _container(c)
        if c.get("restartPolicy") == "Always":
            sidecars.update(asked)
            continue
        for k, v in asked.items():
            peak[k] = max(peak.get(k, Fraction(0)), v + sidecars.get(k, 0))
    total.update(sidecars)
    out = dict(total)
    for k, v in peak.items():
        out[k] = max(out.get(k, Fraction(0)), v)
    # PodLevelResources (KEP-2837; beta, on by default since 1.34): for cpu and memory the pod-level request is the
    # pod's; defaulting fills a missing one from its containers' requests, or else from the pod-level limit
    level = spec.get("resources") or {}
    level_requests = {k: quantity(v) for k, v in (level.get("requests") or {}).items()}
    for k, v in (level.get("limits") or {}).items():
        if k not in level_requests and k not in out:
            level_requests[k] = quantity(v)
    for k, v in level_requests.items():
        if k in ("cpu", "memory"):
            out[k] = v
    for k, v in (spec.get("overhead") or {}).items():
        out[k] = out.get(k, Fraction(0)) + quantity(v)
    out["pods"] = out.get("pods", Fraction(0)) + 1
    return {k: v for k, v in out.items() if v}


def extended(name: str) -> bool:
    if "/" not in name or name.startswith("requests."):
        return False
    domain = name.split("/")[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def admitted(pod: Obj, plugin: bool) -> Obj:
    """The pod as the ExtendedResourceToleration admission plugin leaves it."""
    if not plugin:
        return pod
    spec = dict(spec_of(pod))
    names = sorted({k for c in list(spec.get("containers") or ()) + list(spec.get("initContainers") or ())
                    for k in ((c.get("resources") or {}).get("requests") or {}) if extended(k)}
                   | {k for c in list(spec.get("containers") or ()) for k in
                      ((c.get("resources") or {}).get("limits") or {}) if extended(k)})
    tolerations = list(spec.get("tolerations") or ())
    for name in names:
        added = {"key": name, "operator": "Exists", "effect": "NoSchedule"}
        if added not in tolerations:
            tolerations.append(added)
    spec["tolerations"] = tolerations
    return {**pod, "spec": spec}


# -- selectors ----------------------------------------------------------------------------------

def requirement(req: Obj, labels: Mapping[str, str]) -> bool | None:
    """None: invalid (the whole term matches nothing)."""
    key, op, values = req.get("key"), req.get("operator"), list(req.get("values") or ())
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            return None
        try:
            right = int(values[0])
        except ValueError:
            return None
        if key not in labels:
            return False
        try:
            left = int(labels[key])
        except ValueError:
            return False
        return left > right if op == "Gt" else left < right
    return None


def node_term(term: Obj, node: Obj) -> bool:
    exprs, fields = term.get("matchExpressions") or (), term.get("matchFields") or ()
    if not exprs and not fields:
        return False
    labels = meta(node).get("labels") or {}
    for req in exprs:
        if requirement(req, labels) is not True:
            return False
    for req in fields:
        values = list(req.get("values") or ())
        if req.get("key") != "metadata.name" or req.get("operator") not in ("In", "NotIn") or len(values) != 1:
            return False
        same = meta(node).get("name") == values[0]
        if same != (req["operator"] == "In"):
            return False
    return True


def node_selector(selector: Obj | None, node: Obj) -> bool:
    if selector is None:
        return True
    return any(node_term(t, node) for t in selector.get("nodeSelectorTerms") or ())


def label_selector(selector: Obj | None, labels: Mapping[str, str]) -> bool:
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    return all(requirement(r, labels) is True for r in selector.get("matchExpressions") or ())


def selector_empty(selector: Obj | None) -> bool:
    return selector is not None and not selector.get("matchLabels") and not selector.get("matchExpressions")


def merged(selector: Obj | None, pod_labels: Mapping[str, str], match: Iterable[str] = (),
           mismatch: Iterable[str] = ()) -> Obj | None:
    if selector is None:
        return None
    exprs = list(selector.get("matchExpressions") or ())
    exprs += [{"key": k, "operator": "In", "values": [pod_labels[k]]} for k in match if k in pod_labels]
    exprs += [{"key": k, "operator": "NotIn", "values": [pod_labels[k]]} for k in mismatch if k in pod_labels]
    return {"matchLabels": dict(selector.get("matchLabels") or {}), "matchExpressions": exprs}


def tolerates(tolerations: Iterable[Obj], taint: Obj) -> bool:
    """k8s.io/api/core/v1 Toleration.ToleratesTaint."""
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("key") and t.get("key") != taint.get("key"):
            continue
        operator = t.get("operator") or "Equal"
        if operator == "Exists":
            return True
        if operator == "Equal" and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


# -- the cluster --------------------------------------------------------------------------------

class Cluster:
    """Raw objects, and the pods placed on nodes so far (existing ones and those a test adds)."""

    def __init__(self, objects: Sequence[Obj]) -> None:
        self.nodes = {meta(o)["name"]: o for o in objects if o.get("kind") == "Node"}
        self.claims = {(meta(o).get("namespace", "default"), meta(o)["name"]): o
                       for o in objects if o.get("kind") == "PersistentVolumeClaim"}
        self.volumes = {meta(o)["name"]: o for o in objects if o.get("kind") == "PersistentVolume"}
        self.classes = {meta(o)["name"]: o for o in objects if o.get("kind") == "StorageClass"}
        self.namespace_labels = {meta(o)["name"]: meta(o).get("labels") or {}
                                 for o in objects if o.get("kind") == "Namespace"}
        self.pods: list[tuple[Obj, str]] = []  # (pod, node) holding resources
        for o in objects:
            if o.get("kind") == "Pod":
                node = where(o)
                if node is not None and (o.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                    self.pods.append((o, node))

    def labels(self, node: str) -> Mapping[str, str]:
        return meta(self.nodes[node]).get("labels") or {}

    def remove(self, names: set[tuple[str, str]]) -> None:
        self.pods = [(p, n) for p, n in self.pods if (meta(p).get("namespace", "default"), meta(p)["name"]) not in names]

    def add(self, pod: Obj, node: str) -> None:
        self.pods.append((pod, node))

    def ready(self, node: str) -> bool:
        conditions = (self.nodes[node].get("status") or {}).get("conditions")
        return not conditions or any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    def taints(self, node: str) -> list[Obj]:
        taints = list(spec_of(self.nodes[node]).get("taints") or ())
        for c in (self.nodes[node].get("status") or {}).get("conditions") or ():
            key = CONDITION_TAINTS.get(c.get("type"))
            if key and c.get("status") == "True" and not any(t.get("key") == key for t in taints):
                taints.append({"key": key, "effect": "NoSchedule"})
        return taints

    def allocatable(self, node: str) -> dict[str, Fraction]:
        status = self.nodes[node].get("status") or {}
        raw = status.get("allocatable") or status.get("capacity") or {}
        out = {k: quantity(v) for k, v in raw.items()}
        out.setdefault("pods", Fraction(110))
        return out

    def used(self, node: str) -> Counter[str]:
        total: Counter[str] = Counter()
        for pod, on in self.pods:
            if on == node:
                total.update(requests(spec_of(pod)))
        return total

    # -- the filters --------------------------------------------------------------------------

    def refusal(self, pod: Obj, node: str) -> str | None:
        """Why kube-scheduler's filters or the kubelet would refuse the pod on the node now (None: admitted)."""
        cause = self.node_refusal(pod, node) or self.ports(pod, node) or self.resources(pod, node)
        return cause or self.affinity(pod, node) or self.spread(pod, node)

    def node_refusal(self, pod: Obj, node: str) -> str | None:
        """The filters that depend on the node alone (and its volumes), not on other pods."""
        spec = spec_of(pod)
        labels = self.labels(node)
        if not self.ready(node):
            return "not ready"
        tolerations = spec.get("tolerations") or ()
        if spec_of(self.nodes[node]).get("unschedulable") and not tolerates(
                tolerations, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}):
            return "NodeUnschedulable"
        if spec.get("nodeName") and spec["nodeName"] != node:
            return "NodeName"
        for k, v in (spec.get("nodeSelector") or {}).items():
            if labels.get(k) != v:
                return "NodeAffinity (nodeSelector)"
        required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution")
        if required is not None and not node_selector(required, self.nodes[node]):
            return "NodeAffinity"
        for taint in self.taints(node):
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
                return f"TaintToleration {taint.get('key')}"
        os_name = (spec.get("os") or {}).get("name")
        if os_name and labels.get("kubernetes.io/os", os_name) != os_name:
            return "kubelet: OS"
        return self.volume_rules(pod, node)

    def free(self, node: str) -> dict[str, Fraction]:
        """Allocatable minus what the pods on the node request, per resource (negative when over-committed)."""
        used = self.used(node)
        have = self.allocatable(node)
        return {k: have.get(k, Fraction(0)) - used.get(k, 0) for k in set(have) | set(used)}

    def ports(self, pod: Obj, node: str) -> str | None:
        wanted = host_ports(pod)
        if not wanted:
            return None
        for other, on in self.pods:
            if on != node:
                continue
            for a in wanted:
                for b in host_ports(other):
                    if a[0] == b[0] and a[1] == b[1] and (a[2] in ("", "0.0.0.0") or b[2] in ("", "0.0.0.0")
                                                          or a[2] == b[2]):
                        return "NodePorts"
        return None

    def resources(self, pod: Obj, node: str) -> str | None:
        have, used = self.allocatable(node), self.used(node)
        for k, v in requests(spec_of(pod)).items():
            if used.get(k, 0) + v > have.get(k, 0):
                return f"NodeResourcesFit {k}"
        return None

    def volume_rules(self, pod: Obj, node: str) -> str | None:
        namespace = meta(pod).get("namespace", "default")
        n = self.nodes[node]
        for volume in spec_of(pod).get("volumes") or ():
            name = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if not name:
                continue
            claim = self.claims.get((namespace, name))
            if claim is None or meta(claim).get("deletionTimestamp"):
                return "VolumeBinding: claim missing"
            bound = spec_of(claim).get("volumeName")
            if bound:
                pv = self.volumes.get(bound)
                if pv is None:
                    return "VolumeBinding: volume missing"
                if not node_selector((spec_of(pv).get("nodeAffinity") or {}).get("required"), n):
                    return "VolumeBinding: volume node affinity"
                node_labels = meta(n).get("labels") or {}
                if any(k in node_labels for k in ZONE_KEYS + REGION_KEYS):
                    for k, v in (meta(pv).get("labels") or {}).items():
                        if k in ZONE_KEYS + REGION_KEYS:
                            group = ZONE_KEYS if k in ZONE_KEYS else REGION_KEYS
                            have = next((node_labels[g] for g in group if g in node_labels), None)
                            if have is None or have not in v.split("__"):
                                return "VolumeZone"
                continue
            klass = self.classes.get(spec_of(claim).get("storageClassName") or "")
            if klass is None or klass.get("volumeBindingMode") != "WaitForFirstConsumer":
                return "VolumeBinding: unbound immediate claim"
            selected = (meta(claim).get("annotations") or {}).get("volume.kubernetes.io/selected-node")
            if selected:
                if selected != node:
                    return "VolumeBinding: selected node"
                continue
            if klass.get("provisioner") == "kubernetes.io/no-provisioner":
                size = quantity(((spec_of(claim).get("resources") or {}).get("requests") or {}).get("storage", "0"))
                modes = set(spec_of(claim).get("accessModes") or ())
                if not any(spec_of(pv).get("storageClassName") == meta(klass)["name"]
                           and (pv.get("status") or {}).get("phase", "Available") == "Available"
                           and quantity((spec_of(pv).get("capacity") or {}).get("storage", "0")) >= size
                           and modes <= set(spec_of(pv).get("accessModes") or ())
                           and node_selector((spec_of(pv).get("nodeAffinity") or {}).get("required"), n)
                           for pv in self.volumes.values()):
                    return "VolumeBinding: no available volume"
            else:
                topologies = klass.get("allowedTopologies")
                if topologies and not any(
                        all((meta(n).get("labels") or {}).get(e["key"]) in e["values"]
                            for e in t.get("matchLabelExpressions") or ()) for t in topologies):
                    return "VolumeBinding: allowed topologies"
        return None

    def _terms(self, pod: Obj, kind: str) -> list[Obj]:
        return list(((spec_of(pod).get("affinity") or {}).get(kind) or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution") or ())

    def _matches(self, term: Obj, owner: Obj, other: Obj) -> bool:
        """Does `other` match a pod (anti-)affinity term of `owner`?"""
        names = list(term.get("namespaces") or ())
        chooser = term.get("namespaceSelector")
        ns = meta(other).get("namespace", "default")
        if not names and chooser is None:
            names = [meta(owner).get("namespace", "default")]
        if ns not in names and not (chooser is not None and (selector_empty(chooser) or label_selector(
                chooser, self.namespace_labels.get(ns, {})))):
            return False
        selector = merged(term.get("labelSelector"), meta(owner).get("labels") or {},
                          term.get("matchLabelKeys") or (), term.get("mismatchLabelKeys") or ())
        return label_selector(selector, meta(other).get("labels") or {})

    def affinity(self, pod: Obj, node: str) -> str | None:
        labels = self.labels(node)
        terms = self._terms(pod, "podAffinity")
        if terms:
            counts: Counter[tuple[str, str]] = Counter()
            for other, on in self.pods:
                if meta(other).get("deletionTimestamp"):
                    continue  # strict: a terminating pod may be gone when this one is scheduled
                if all(self._matches(t, pod, other) for t in terms):
                    for t in terms:
                        value = self.labels(on).get(t["topologyKey"])
                        if value is not None:
                            counts[(t["topologyKey"], value)] += 1
            if any(t["topologyKey"] not in labels for t in terms):
                return "InterPodAffinity: topology label"
            present = all(counts[(t["topologyKey"], labels[t["topologyKey"]])] > 0 for t in terms)
            first = not counts and all(self._matches(t, pod, pod) for t in terms)  # the first of a series
            if not present and not first:
                return "InterPodAffinity: affinity"
        for t in self._terms(pod, "podAntiAffinity"):
            value = labels.get(t["topologyKey"])
            if value is None:
                continue
            for other, on in self.pods:
                if self.labels(on).get(t["topologyKey"]) == value and self._matches(t, pod, other):
                    return "InterPodAffinity: anti-affinity"
        for other, on in self.pods:
            for t in self._terms(other, "podAntiAffinity"):
                value = self.labels(on).get(t["topologyKey"])
                if value is not None and labels.get(t["topologyKey"]) == value and self._matches(t, other, pod):
                    return "InterPodAffinity: existing anti-affinity"
        return None

    def spread(self, pod: Obj, node: str) -> str | None:
        constraints = [c for c in spec_of(pod).get("topologySpreadConstraints") or ()
                       if c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"]
        if not constraints:
            return None
        labels = self.labels(node)
        keys = [c["topologyKey"] for c in constraints]
        if any(k not in labels for k in keys):
            return "PodTopologySpread: label"
        spec = spec_of(pod)
        pod_labels = meta(pod).get("labels") or {}
        namespace = meta(pod).get("namespace", "default")
        required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution")
        for c in constraints:
            selector = merged(c.get("labelSelector"), pod_labels, c.get("matchLabelKeys") or ())
            domains: dict[str, int] = {}
            for name, n in self.nodes.items():
                nl = meta(n).get("labels") or {}
                if any(k not in nl for k in keys):
                    continue
                if c.get("nodeAffinityPolicy", "Honor") == "Honor":
                    if any(nl.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
                        continue
                    if required is not None and not node_selector(required, n):
                        continue
                if c.get("nodeTaintsPolicy") == "Honor" and any(
                        t.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(spec.get("tolerations") or (), t)
                        for t in self.taints(name)):
                    continue
                domains.setdefault(nl[c["topologyKey"]], 0)
                if selector_empty(selector):
                    continue
                for other, on in self.pods:
                    if (on == name and not meta(other).get("deletionTimestamp")
                            and meta(other).get("namespace", "default") == namespace
                            and label_selector(selector, meta(other).get("labels") or {})):
                        domains[nl[c["topologyKey"]]] += 1
            minimum = min(domains.values()) if len(domains) >= int(c.get("minDomains") or 1) and domains else 0
            own = 1 if label_selector(selector, pod_labels) else 0
            if domains.get(labels[c["topologyKey"]], 0) + own - minimum > int(c.get("maxSkew") or 1):
                return "PodTopologySpread: skew"
        return None


def host_ports(pod: Obj) -> list[tuple[int, str, str]]:
    spec = spec_of(pod)
    out = []
    for c in spec.get("containers") or ():
        for p in c.get("ports") or ():
            port = p.get("hostPort") or (p.get("containerPort") if spec.get("hostNetwork") else 0)
            if port:
                out.append((int(port), p.get("protocol") or "TCP", p.get("hostIP") or ""))
    return out


def where(pod: Obj) -> str | None:
    """The node a pod is bound, pinned (node affinity on one name) or nominated to."""
    spec = spec_of(pod)
    if spec.get("nodeName"):
        return spec["nodeName"]
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}
    names = set()
    terms = required.get("nodeSelectorTerms") or ()
    for term in terms:
        pins = [f["values"][0] for f in term.get("matchFields") or ()
                if f.get("key") == "metadata.name" and f.get("operator") == "In" and len(f.get("values") or ()) == 1]
        if not pins:
            names = set()
            break
        names.update(pins)
    if terms and len(names) == 1:
        return names.pop()
    return (pod.get("status") or {}).get("nominatedNodeName") or None


def fits_somewhere(cluster: Cluster, pods: Sequence[Obj], nodes: Sequence[str] | None = None,
                   same_label: str | None = None) -> bool:
    """Brute force: is there an assignment of the pods (in order) the filters admit? Small cases only."""
    names = list(nodes if nodes is not None else cluster.nodes)
    saved = list(cluster.pods)
    try:
        for choice in product(names, repeat=len(pods)):
            if same_label is not None:
                values = {cluster.labels(n).get(same_label) for n in choice}
                if None in values or len(values) > 1:
                    continue
            cluster.pods = list(saved)
            for pod, node in zip(pods, choice, strict=True):
                if cluster.refusal(pod, node) is not None:
                    break
                cluster.add(pod, node)
            else:
                return True
        return False
    finally:
        cluster.pods = saved


def minimal_victims(cluster: Cluster, pods: Sequence[Obj], candidates: Mapping[str, Sequence[Obj]],
                    priority: Mapping[str, int], started: Mapping[str, str],
                    same_label: str | None = None) -> list[set[str]]:
    """Every smallest-by-the-rule set of candidate groups whose removal lets the pods fit (brute force).

    The rule: fewest groups, then the highest priority among them lowest (then the next), then the
    most recently started, then ids. Returns all sets tied at the best key (normally one).
    """
    age = {g: rank for rank, g in enumerate(sorted(candidates, key=lambda g: (started[g], g), reverse=True))}
    best: list[tuple[tuple[object, ...], set[str]]] = []
    for size in range(0, len(candidates) + 1):
        for combo in combinations(sorted(candidates), size):
            removed = {(meta(p).get("namespace", "default"), meta(p)["name"]) for g in combo for p in candidates[g]}
            trial = Cluster.__new__(Cluster)
            trial.__dict__.update(cluster.__dict__)
            trial.pods = [(p, n) for p, n in cluster.pods
                          if (meta(p).get("namespace", "default"), meta(p)["name"]) not in removed]
            if fits_somewhere(trial, pods, same_label=same_label):
                key = (size, tuple(sorted((priority[g] for g in combo), reverse=True)),
                       tuple(sorted((age[g] for g in combo), reverse=True)), tuple(sorted(combo)))
                best.append((key, set(combo)))
        if best:
            top = min(k for k, _ in best)
            return [s for k, s in best if k[:3] == top[:3]]
    return []
