"""Turn Kubernetes objects (plain dicts, as the API or `kubectl get -o yaml` gives them) into the model.

Effective pod requests follow Kubernetes: a container's limit stands in for a missing request;
the pod asks for max(sum of app containers + sidecars, the largest init container + the sidecars
started before it) plus the RuntimeClass overhead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import InputError
from ..quantity import QuantityError, format_milli, parse_milli
from .model import PODS, Constraints, Node, Pod, Requirement, Resources, Snapshot, Taint, Toleration

DEFAULT_MAX_PODS = 110  # kubelet's default when a node object does not say


def _quantities(raw: Any, where: str) -> dict[str, int]:
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, int] = {}
    for name, text in raw.items():
        try:
            out[str(name)] = parse_milli(text)
        except QuantityError as exc:
            raise InputError(f"{where}: {name}: {exc}") from exc
    return out


def container_requests(container: Mapping[str, Any], where: str) -> dict[str, int]:
    """A container's requests, with limits standing in for missing requests (API defaulting)."""
    resources = container.get("resources") or {}
    requests = _quantities(resources.get("requests"), where)
    for name, amount in _quantities(resources.get("limits"), where).items():
        requests.setdefault(name, amount)
    return requests


def effective_requests(spec: Mapping[str, Any], where: str = "pod") -> dict[str, int]:
    """The pod's effective request per resource, as kube-scheduler computes it."""
    apps: dict[str, int] = {}
    for container in spec.get("containers") or ():
        for name, amount in container_requests(container, where).items():
            apps[name] = apps.get(name, 0) + amount
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in spec.get("initContainers") or ():
        req = container_requests(container, where)
        if container.get("restartPolicy") == "Always":  # a sidecar keeps running beside the app
            for name, amount in req.items():
                sidecars[name] = sidecars.get(name, 0) + amount
            continue
        for name, amount in req.items():
            init_peak[name] = max(init_peak.get(name, 0), amount + sidecars.get(name, 0))
    total = {name: apps.get(name, 0) + sidecars.get(name, 0) for name in set(apps) | set(sidecars)}
    for name, amount in init_peak.items():
        total[name] = max(total.get(name, 0), amount)
    for name, amount in _quantities(spec.get("overhead"), where).items():
        total[name] = total.get(name, 0) + amount
    return {name: amount for name, amount in total.items() if amount}


def _requirements(raw: Any) -> tuple[Requirement, ...]:
    return tuple(
        Requirement(str(expr.get("key", "")), str(expr.get("operator", "In")),
                    tuple(str(v) for v in expr.get("values") or ()))
        for expr in raw or ()
        if isinstance(expr, Mapping)
    )


def constraints_from_spec(spec: Mapping[str, Any]) -> Constraints:
    """nodeSelector, required node affinity and tolerations of a pod spec."""
    selector = spec.get("nodeSelector") or {}
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = tuple(
        _requirements(term.get("matchExpressions"))
        for term in affinity.get("nodeSelectorTerms") or ()
        if isinstance(term, Mapping)
    )
    tolerations = tuple(
        Toleration(str(t.get("key") or ""), str(t.get("operator") or "Equal"), str(t.get("value") or ""),
                   str(t.get("effect") or ""))
        for t in spec.get("tolerations") or ()
        if isinstance(t, Mapping)
    )
    return Constraints({str(k): str(v) for k, v in selector.items()}, tuple(t for t in terms if t), tolerations)


def node_from_object(obj: Mapping[str, Any]) -> Node:
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    allocatable = _quantities(status.get("allocatable") or status.get("capacity"), f"node {name}")
    allocatable.setdefault(PODS, DEFAULT_MAX_PODS * 1000)
    conditions = status.get("conditions")
    ready = True
    if conditions:  # a node object without conditions (hand-written snapshot) counts as Ready
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    taints = tuple(
        Taint(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect") or "NoSchedule"))
        for t in spec.get("taints") or ()
    )
    return Node(
        name=name,
        allocatable=allocatable,
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        taints=taints,
        ready=ready,
        unschedulable=bool(spec.get("unschedulable")),
        capacity=_quantities(status.get("capacity"), f"node {name}"),
    )


def pod_from_object(obj: Mapping[str, Any]) -> Pod:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    name = str(meta.get("name") or "")
    return Pod(
        name=name,
        namespace=str(meta.get("namespace") or "default"),
        node_name=spec.get("nodeName") or None,
        phase=str(status.get("phase") or "Pending"),
        requests=effective_requests(spec, f"pod {name}"),
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        constraints=constraints_from_spec(spec),
        created=str(meta.get("creationTimestamp") or ""),
        deleting=bool(meta.get("deletionTimestamp")),
        reason=str(status.get("reason") or ""),
    )


def _items(document: Any, name: str) -> Iterable[Mapping[str, Any]]:
    if isinstance(document, Mapping) and isinstance(document.get("items"), list):
        list_kind = str(document.get("kind") or "List")
        implied = list_kind[:-4] if list_kind.endswith("List") and list_kind != "List" else None
        for item in document["items"]:
            if isinstance(item, Mapping):
                yield item if item.get("kind") or implied is None else {**item, "kind": implied}
    elif isinstance(document, Mapping) and document.get("kind") in ("Node", "Pod"):
        yield document
    elif isinstance(document, list):
        for item in document:
            yield from _items(item, name)
    else:
        raise InputError(f"{name}: expected a Kubernetes List of Nodes and Pods "
                         "(as `kubectl get nodes,pods -A -o yaml` prints it)")


def snapshot_from_objects(documents: Sequence[Any], name: str = "snapshot") -> Snapshot:
    """Build a Snapshot from Lists (or single objects) of Nodes and Pods; other kinds are skipped."""
    nodes: list[Node] = []
    pods: list[Pod] = []
    for document in documents:
        for item in _items(document, name):
            kind = item.get("kind")
            if kind == "Node":
                nodes.append(node_from_object(item))
            elif kind == "Pod":
                pods.append(pod_from_object(item))
    return Snapshot(tuple(nodes), tuple(pods))


def describe_resources(resources: Resources) -> str:
    """`cpu=7910m, nvidia.com/gpu=4` for messages."""
    return ", ".join(f"{name}={format_milli(name, amount)}" for name, amount in sorted(resources.items()))
