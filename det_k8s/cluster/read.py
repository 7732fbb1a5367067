"""Turn Kubernetes objects (plain dicts, as the API or `kubectl get -o yaml` gives them) into the model.

Effective pod requests follow Kubernetes: a container's limit stands in for a missing request;
the pod asks for max(sum of app containers + sidecars, the largest init container + the sidecars
started before it) plus the RuntimeClass overhead.

A 30,000-pod snapshot repeats a few dozen distinct pod templates, so the two costly readings
are memoised by value: a container's resources (the common single-container pod takes a fast
path to it) and a pod's constraints without node affinity. Only inputs made of plain strings
are remembered (what the API returns), so a memo hit is always what reading afresh would give;
anything else is read the long way. Results are fresh dicts or frozen values: nothing shared
can be changed by a caller.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import InputError, MalformedObject
from ..quantity import QuantityError, format_milli, parse_milli
from .model import (
    NO_CONSTRAINTS,
    PODS,
    Constraints,
    Node,
    Pod,
    Requirement,
    Resources,
    Snapshot,
    Taint,
    Toleration,
)
from .shapes import find_problem, object_name

DEFAULT_MAX_PODS = 110  # kubelet's default when a node object does not say
MEMO_LIMIT = 4096  # distinct entries kept per memo; beyond that, new shapes are read without memo

_RESOURCES_MEMO: dict[tuple[Any, ...], dict[str, int]] = {}
_CONSTRAINTS_MEMO: dict[tuple[Any, ...], Constraints] = {}


def _is_mapping(raw: Any) -> bool:
    return type(raw) is dict or isinstance(raw, Mapping)  # the exact-type test skips the slow ABC check


def _quantities(raw: Any, where: str) -> dict[str, int]:
    if not _is_mapping(raw):
        return {}
    out: dict[str, int] = {}
    for name, text in raw.items():
        try:
            out[str(name)] = parse_milli(text)
        except QuantityError as exc:
            raise InputError(f"{where}: {name}: {exc}") from exc
    return out


def _all_strings(items: tuple[Any, ...]) -> bool:
    """True when every (key, value) pair is made of str: only such inputs are memoised."""
    return all(type(key) is str and type(value) is str for key, value in items)


def container_requests(container: Mapping[str, Any], where: str) -> dict[str, int]:
    """A container's requests, with limits standing in for missing requests (API defaulting)."""
    resources = container.get("resources") or {}
    raw_requests, raw_limits = resources.get("requests"), resources.get("limits")
    key: tuple[Any, ...] | None = None
    if (raw_requests is None or type(raw_requests) is dict) and (raw_limits is None or type(raw_limits) is dict):
        key = (tuple(raw_requests.items()) if raw_requests else (), tuple(raw_limits.items()) if raw_limits else ())
        if not (_all_strings(key[0]) and _all_strings(key[1])):
            key = None  # odd values (lists, numbers) are not memoised, and some are not even hashable
        else:
            found = _RESOURCES_MEMO.get(key)
            if found is not None:
                return dict(found)
    requests = _quantities(raw_requests, where)
    for name, amount in _quantities(raw_limits, where).items():
        requests.setdefault(name, amount)
    if key is not None and len(_RESOURCES_MEMO) < MEMO_LIMIT:
        _RESOURCES_MEMO[key] = dict(requests)
    return requests


def effective_requests(spec: Mapping[str, Any], where: str = "pod") -> dict[str, int]:
    """The pod's effective request per resource, as kube-scheduler computes it."""
    containers = spec.get("containers")
    if (type(containers) is list and len(containers) == 1 and type(containers[0]) is dict
            and not spec.get("initContainers") and not spec.get("overhead")):
        # one app container, nothing else: its requests are the pod's (the general rule below, shortened)
        return {name: amount for name, amount in container_requests(containers[0], where).items() if amount}
    return _effective_requests(spec, where)


def _effective_requests(spec: Mapping[str, Any], where: str) -> dict[str, int]:
    """The general rule: app containers, sidecars, init containers and overhead."""
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
    selector, tolerations = spec.get("nodeSelector"), spec.get("tolerations")
    if spec.get("affinity") or not (selector is None or type(selector) is dict) or not (
            tolerations is None or type(tolerations) is list):
        return _constraints(spec)
    if not selector and not tolerations:
        return NO_CONSTRAINTS
    try:
        key = (tuple(selector.items()) if selector else (),
               tuple((t.get("key"), t.get("operator"), t.get("value"), t.get("effect")) for t in tolerations or ()))
    except AttributeError:  # a toleration that is not a mapping: the long way skips it
        return _constraints(spec)
    if not (_all_strings(key[0]) and all(value is None or type(value) is str for fields in key[1] for value in fields)):
        return _constraints(spec)  # odd values are not memoised, and some are not even hashable
    found = _CONSTRAINTS_MEMO.get(key)
    if found is None:
        found = _constraints(spec)
        if len(_CONSTRAINTS_MEMO) < MEMO_LIMIT:
            _CONSTRAINTS_MEMO[key] = found
    return found


def _constraints(spec: Mapping[str, Any]) -> Constraints:
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


# What a reader raises on an object of another shape than the API gives (a hand-written snapshot).
_SHAPE_ERRORS = (AttributeError, TypeError, ValueError, KeyError, RecursionError)


def node_from_object(obj: Mapping[str, Any]) -> Node:
    """A Node object read into the model; MalformedObject (naming the field) when it has another shape."""
    try:
        node = _read_node(obj)
    except MalformedObject:
        raise
    except _SHAPE_ERRORS as exc:
        raise _malformed("Node", obj, exc) from exc
    status = obj.get("status")
    if type(status) is dict and not all(status.get(key) is None or type(status[key]) is dict
                                        for key in ("allocatable", "capacity")):
        raise _malformed("Node", obj, None)  # read leniently as "no resources"; refused rather than misread
    return node


def pod_from_object(obj: Mapping[str, Any]) -> Pod:
    """A Pod object read into the model; MalformedObject (naming the field) when it has another shape."""
    try:
        pod = _read_pod(obj)
    except MalformedObject:
        raise
    except InputError:
        raise  # a quantity that is not one: already names the pod and the resource
    except _SHAPE_ERRORS as exc:
        raise _malformed("Pod", obj, exc) from exc
    tolerations = (obj.get("spec") or {}).get("tolerations")
    if not (tolerations is None or type(tolerations) is list):
        raise _malformed("Pod", obj, None)  # read leniently as "tolerates nothing"; refused rather than misread
    return pod


def _malformed(kind: str, obj: Any, exc: BaseException | None) -> MalformedObject:
    """The shape table names the field (walked only once reading failed: the common case pays nothing)."""
    problem = find_problem(obj, kind) or (f"cannot be read ({type(exc).__name__}: {str(exc)[:200]})" if exc else
                                          "cannot be read")
    return MalformedObject(kind, object_name(obj), problem)


def _read_node(obj: Mapping[str, Any]) -> Node:
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


def _read_pod(obj: Mapping[str, Any]) -> Pod:
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
        owner=_controller(meta.get("ownerReferences")),
        priority=priority if type(priority := spec.get("priority")) is int else None,
    )


def _controller(refs: Any) -> str:
    """`Kind/name` of the controlling ownerReference (a DaemonSet's pods land on every node they tolerate)."""
    if type(refs) is not list:
        return ""
    for ref in refs:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return f"{ref.get('kind') or ''}/{ref.get('name') or ''}"
    return ""


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
    try:
        for document in documents:
            for item in _items(document, name):
                kind = item.get("kind")
                if kind == "Node":
                    nodes.append(node_from_object(item))
                elif kind == "Pod":
                    pods.append(pod_from_object(item))
    except MalformedObject as exc:
        raise exc.at(name) from exc
    return Snapshot(tuple(nodes), tuple(pods))


def describe_resources(resources: Resources) -> str:
    """`cpu=7910m, nvidia.com/gpu=4` for messages."""
    return ", ".join(f"{name}={format_milli(name, amount)}" for name, amount in sorted(resources.items()))
