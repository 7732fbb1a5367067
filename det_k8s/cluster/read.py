"""Turn Kubernetes objects (plain dicts, as the API or `kubectl get -o yaml` gives them) into the model.

Effective pod requests follow Kubernetes: a container's limit stands in for a missing request;
the pod asks for max(sum of app containers + sidecars, the largest init container + the sidecars
started before it), or for cpu and memory what its pod-level `spec.resources` asks, plus the
RuntimeClass overhead.

A 30,000-pod snapshot repeats a few dozen distinct pod templates, so the two costly readings
are memoised by value: a container's resources (the common single-container pod takes a fast
path to it) and a pod's constraints without node affinity. Only inputs made of plain strings
are remembered (what the API returns), so a memo hit is always what reading afresh would give;
anything else is read the long way. Results are fresh dicts or frozen values: nothing shared
can be changed by a caller.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..errors import InputError, MalformedObject
from ..labels import BINDING_FENCE, PLANNED_NODE
from ..quantity import QuantityError, format_milli, parse_milli
from .gangs import foreign_gang, may_belong
from .model import (
    NO_CONSTRAINTS,
    NOTHING,
    PODS,
    RUNTIME_CLASS_MERGE,
    Claim,
    Constraints,
    DeviceClass,
    DeviceSlice,
    HostPort,
    LabelSelector,
    Node,
    Pod,
    PodAffinityTerm,
    Requirement,
    Resources,
    Snapshot,
    SpreadConstraint,
    StorageClass,
    Taint,
    Term,
    Toleration,
    Volume,
    VolumeClaim,
)
from .quota import ResourceQuota, containers_total, quota_from_object
from .shapes import find_problem, object_name

POD_LEVEL_RESOURCES = ("cpu", "memory")  # what `spec.resources` may set (resourcehelper.IsSupportedPodLevelResource)
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
            and not spec.get("initContainers") and not spec.get("overhead") and not spec.get("resources")):
        # one app container, nothing else: its requests are the pod's (the general rule below, shortened)
        return {name: amount for name, amount in container_requests(containers[0], where).items() if amount}
    return _effective_requests(spec, where)


def _effective_requests(spec: Mapping[str, Any], where: str) -> dict[str, int]:
    """The general rule: the containers' (`quota.containers_total`, shared with the effective limits), pod-level
    resources and overhead."""
    total = containers_total(spec.get("containers") or (), spec.get("initContainers") or (),
                             lambda container: container_requests(container, where))
    pod_level = spec.get("resources")
    if isinstance(pod_level, Mapping):  # pod-level resources (PodLevelResources, on by default since 1.34)
        pod_requests = _quantities(pod_level.get("requests"), f"{where}: spec.resources")
        pod_limits = _quantities(pod_level.get("limits"), f"{where}: spec.resources")
        for name in POD_LEVEL_RESOURCES:  # the pod's request replaces its containers' total
            if name in pod_requests:
                total[name] = pod_requests[name]
            elif name in pod_limits and name not in total:  # API defaulting: no container asks, the limit stands in
                total[name] = pod_limits[name]
    for name, amount in _quantities(spec.get("overhead"), where).items():
        total[name] = total.get(name, 0) + amount
    return {name: amount for name, amount in total.items() if amount}


def _requirements(raw: Any, field: bool = False) -> tuple[Requirement, ...]:
    return tuple(
        Requirement(str(expr.get("key", "")), str(expr.get("operator", "In")),
                    tuple(str(v) for v in expr.get("values") or ()), field)
        for expr in raw or ()
        if isinstance(expr, Mapping)
    )


def node_terms(raw: Any) -> tuple[tuple[Requirement, ...], ...]:
    """A NodeSelector's terms: matchExpressions and matchFields ANDed per term; an empty term matches nothing.

    A selector that is present but holds no term (or only empty ones) matches no node: `((),)`.
    """
    terms = tuple(
        _requirements(term.get("matchExpressions")) + _requirements(term.get("matchFields"), field=True)
        for term in (raw.get("nodeSelectorTerms") if isinstance(raw, Mapping) else None) or ()
        if isinstance(term, Mapping)
    )
    return terms or ((),)


def _has_host_ports(spec: Mapping[str, Any]) -> bool:
    for container in spec.get("containers") or ():
        if isinstance(container, Mapping):
            for port in container.get("ports") or ():
                if not isinstance(port, Mapping) or port.get("hostPort"):
                    return True
    return False


def _has_claims(volumes: Any) -> bool:
    for volume in volumes or ():
        if not isinstance(volume, Mapping) or "persistentVolumeClaim" in volume or "ephemeral" in volume:
            return True
    return False


def constraints_from_spec(spec: Mapping[str, Any], namespace: str = "default",
                          labels: Mapping[str, str] | None = None) -> Constraints:
    """Everything in a pod spec that decides where it may run (see `Constraints`).

    `namespace` and `labels` are the pod's own: pod affinity terms without namespaces mean the pod's
    namespace, and `matchLabelKeys` take their values from its labels.
    """
    selector, tolerations = spec.get("nodeSelector"), spec.get("tolerations")
    if (spec.get("affinity") or not (selector is None or type(selector) is dict)
            or not (tolerations is None or type(tolerations) is list) or spec.get("topologySpreadConstraints")
            or spec.get("hostNetwork") or spec.get("os") or spec.get("resourceClaims") or spec.get("schedulingGates")
            or spec.get("runtimeClassName")
            or _has_claims(spec.get("volumes")) or _has_host_ports(spec)):
        return _constraints(spec, namespace, labels or {})
    if not selector and not tolerations:
        return NO_CONSTRAINTS
    try:
        key = (tuple(selector.items()) if selector else (),
               tuple((t.get("key"), t.get("operator"), t.get("value"), t.get("effect")) for t in tolerations or ()))
    except AttributeError:  # a toleration that is not a mapping: the long way skips it
        return _constraints(spec, namespace, labels or {})
    if not (_all_strings(key[0]) and all(value is None or type(value) is str for fields in key[1] for value in fields)):
        return _constraints(spec, namespace, labels or {})  # odd values are not memoised, some not even hashable
    found = _CONSTRAINTS_MEMO.get(key)
    if found is None:
        found = _constraints(spec, namespace, labels or {})
        if len(_CONSTRAINTS_MEMO) < MEMO_LIMIT:
            _CONSTRAINTS_MEMO[key] = found
    return found


def label_selector(raw: Any, labels: Mapping[str, str] | None = None, match_keys: Any = None,
                   mismatch_keys: Any = None) -> LabelSelector:
    """A metav1.LabelSelector (None: matches nothing), with matchLabelKeys/mismatchLabelKeys merged in
    from the pod's own labels as the API server does when the pod is created."""
    if not isinstance(raw, Mapping):
        return NOTHING
    requirements = [Requirement(str(k), "In", (str(v),)) for k, v in (raw.get("matchLabels") or {}).items()]
    requirements += _requirements(raw.get("matchExpressions"))
    for key in match_keys or ():
        if labels is not None and key in labels:
            requirements.append(Requirement(str(key), "In", (labels[key],)))
    for key in mismatch_keys or ():
        if labels is not None and key in labels:
            requirements.append(Requirement(str(key), "NotIn", (labels[key],)))
    return LabelSelector(tuple(requirements))


def _pod_terms(raw: Any, namespace: str, labels: Mapping[str, str]) -> tuple[PodAffinityTerm, ...]:
    terms = []
    for term in raw or ():
        if not isinstance(term, Mapping):
            continue
        names = tuple(str(n) for n in term.get("namespaces") or ())
        chooser_raw = term.get("namespaceSelector")
        chooser = label_selector(chooser_raw) if isinstance(chooser_raw, Mapping) else None
        if not names and chooser is None:
            names = (namespace,)
        terms.append(PodAffinityTerm(
            label_selector(term.get("labelSelector"), labels, term.get("matchLabelKeys"), term.get("mismatchLabelKeys")),
            str(term.get("topologyKey") or ""), names, chooser))
    return tuple(terms)


def _spread(raw: Any, labels: Mapping[str, str]) -> tuple[SpreadConstraint, ...]:
    out = []
    for item in raw or ():
        if not isinstance(item, Mapping) or item.get("whenUnsatisfiable") == "ScheduleAnyway":
            continue
        try:
            skew, domains = int(item.get("maxSkew") or 1), int(item.get("minDomains") or 1)
        except (TypeError, ValueError):
            skew, domains = 1, 1
        out.append(SpreadConstraint(
            max(skew, 1), str(item.get("topologyKey") or ""),
            label_selector(item.get("labelSelector"), labels, item.get("matchLabelKeys")), max(domains, 1),
            item.get("nodeAffinityPolicy") != "Ignore", item.get("nodeTaintsPolicy") == "Honor"))
    return tuple(out)


def _host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """Ports the app containers take on the node: `hostPort`, which on a hostNetwork pod defaults to the port."""
    host_network = bool(spec.get("hostNetwork"))
    ports = []
    for container in spec.get("containers") or ():
        for port in (container.get("ports") if isinstance(container, Mapping) else None) or ():
            if not isinstance(port, Mapping):
                continue
            number = port.get("hostPort") or (port.get("containerPort") if host_network else None)
            try:
                number = int(number or 0)
            except (TypeError, ValueError):
                number = 0
            if number > 0:
                ports.append(HostPort(number, str(port.get("protocol") or "TCP"), str(port.get("hostIP") or "")))
    return tuple(dict.fromkeys(ports))


def _claims(volumes: Any) -> tuple[VolumeClaim, ...]:
    out = []
    for volume in volumes or ():
        if not isinstance(volume, Mapping):
            continue
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, Mapping) and claim.get("claimName"):
            out.append(VolumeClaim(str(claim["claimName"])))
        ephemeral = volume.get("ephemeral")
        if isinstance(ephemeral, Mapping):
            template = ((ephemeral.get("volumeClaimTemplate") or {}).get("spec") or {})
            klass = template.get("storageClassName")
            modes = template.get("accessModes") or ()
            out.append(VolumeClaim(str(volume.get("name") or ""), True, None if klass is None else str(klass),
                                   "ReadWriteOncePod" in modes))
    return tuple(out)


def _constraints(spec: Mapping[str, Any], namespace: str = "default",
                 labels: Mapping[str, str] | None = None) -> Constraints:
    labels = labels or {}
    selector = spec.get("nodeSelector") or {}
    affinity = spec.get("affinity") or {}
    node_affinity = affinity.get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = node_terms(required) if isinstance(required, Mapping) else ()
    preferred = tuple(
        (int(item.get("weight") or 0), node_terms(item.get("preference") and
                                                  {"nodeSelectorTerms": [item.get("preference")]})[0])
        for item in node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
        if isinstance(item, Mapping) and isinstance(item.get("weight"), int)
    )
    tolerations = tuple(
        Toleration(str(t.get("key") or ""), str(t.get("operator") or "Equal"), str(t.get("value") or ""),
                   str(t.get("effect") or ""))
        for t in spec.get("tolerations") or ()
        if isinstance(t, Mapping)
    )
    pod_affinity = (affinity.get("podAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    pod_anti = (affinity.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    unmodelled = []
    claims = spec.get("resourceClaims")  # allocated by kube-scheduler only: such a pod waits (ReasonCode.DRA)
    resource_claims = tuple(str(c.get("name") or "") if isinstance(c, Mapping) else "" for c in claims
                            ) if isinstance(claims, list) else (("",) if claims else ())
    if spec.get("schedulingGates"):
        unmodelled.append("scheduling gates (spec.schedulingGates)")
    if spec.get("runtimeClassName"):
        unmodelled.append(f"{RUNTIME_CLASS_MERGE} {spec['runtimeClassName']} adds at admission")
    os_name = (spec.get("os") or {}).get("name") if isinstance(spec.get("os"), Mapping) else None
    return Constraints(
        {str(k): str(v) for k, v in selector.items()} if isinstance(selector, Mapping) else {},
        terms, tolerations, tuple(p for p in preferred if p[1]),
        _pod_terms(pod_affinity, namespace, labels), _pod_terms(pod_anti, namespace, labels),
        _spread(spec.get("topologySpreadConstraints"), labels), _host_ports(spec), _claims(spec.get("volumes")),
        str(os_name or ""), tuple(unmodelled), resource_claims,
    )


CONDITION_TAINTS = {  # what the node lifecycle controller taints a node with while a condition holds
    "MemoryPressure": "node.kubernetes.io/memory-pressure",
    "DiskPressure": "node.kubernetes.io/disk-pressure",
    "PIDPressure": "node.kubernetes.io/pid-pressure",
    "NetworkUnavailable": "node.kubernetes.io/network-unavailable",
}


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
    taints = [  # det-k8s's own binding fence (live/fence.py) is not the node's: it holds only while det-k8s binds
        Taint(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect") or "NoSchedule"))
        for t in spec.get("taints") or () if t.get("key") != BINDING_FENCE
    ]
    if conditions:  # a node object without conditions (hand-written snapshot) counts as Ready
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        for condition in conditions:  # the taints TaintNodesByCondition adds, if the snapshot predates them
            key = CONDITION_TAINTS.get(condition.get("type"))
            if key and condition.get("status") == "True" and not any(t.key == key for t in taints):
                taints.append(Taint(key, "", "NoSchedule"))
    return Node(
        name=name,
        allocatable=allocatable,
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        taints=tuple(taints),
        ready=ready,
        unschedulable=bool(spec.get("unschedulable")),
        capacity=_quantities(status.get("capacity"), f"node {name}"),
        fence=next((str(t.get("value") or "") for t in spec.get("taints") or ()
                    if isinstance(t, Mapping) and t.get("key") == BINDING_FENCE), ""),
    )


def _scheduling_failure(status: Mapping[str, Any]) -> tuple[str, str]:
    """(message, since) of a PodScheduled=False condition kube-scheduler set with reason Unschedulable."""
    for condition in status.get("conditions") or ():
        if (isinstance(condition, Mapping) and condition.get("type") == "PodScheduled"
                and condition.get("status") == "False" and condition.get("reason") == "Unschedulable"):
            return str(condition.get("message") or "unschedulable"), str(condition.get("lastTransitionTime") or "")
    return "", ""


def _read_pod(obj: Mapping[str, Any]) -> Pod:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    name = str(meta.get("name") or "")
    namespace = str(meta.get("namespace") or "default")
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    node_name = spec.get("nodeName") or None
    if node_name is not None and type(node_name) is not str:
        raise TypeError(f"spec.nodeName: expected a string, found {type(node_name).__name__}")
    unschedulable, since = ("", "") if node_name else _scheduling_failure(status)
    annotations = meta.get("annotations")
    return Pod(
        name=name,
        namespace=namespace,
        node_name=node_name,
        phase=str(status.get("phase") or "Pending"),
        requests=effective_requests(spec, f"pod {name}"),
        labels=labels,
        constraints=constraints_from_spec(spec, namespace, labels),
        created=str(meta.get("creationTimestamp") or ""),
        deleting=bool(meta.get("deletionTimestamp")),
        reason=str(status.get("reason") or ""),
        owner=_controller(meta.get("ownerReferences")),
        priority=priority if type(priority := spec.get("priority")) is int else None,
        nominated_node=None if node_name else (str(status.get("nominatedNodeName") or "") or _planned(annotations)),
        unschedulable=unschedulable,
        unschedulable_since=since,
        mirror=bool(annotations and isinstance(annotations, Mapping) and MIRROR_ANNOTATION in annotations),
        scheduler=str(spec.get("schedulerName") or "default-scheduler"),
        gang=foreign_gang(obj) if may_belong(meta, spec) else "",
    )


def _planned(annotations: Any) -> str | None:
    """The node a det-k8s pass planned for a pod it handed to kube-scheduler (live/native.py): the pod holds its
    resources there until bound, as a nominated pod does, so the next pass does not hand them out again."""
    if not annotations or not isinstance(annotations, Mapping):
        return None
    return str(annotations.get(PLANNED_NODE) or "") or None


def _controller(refs: Any) -> str:
    """`Kind/name` of the controlling ownerReference (a DaemonSet's pods land on every node they tolerate)."""
    if type(refs) is not list:
        return ""
    for ref in refs:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return f"{ref.get('kind') or ''}/{ref.get('name') or ''}"
    return ""


MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def _storage_bytes(raw: Any, where: str) -> int:
    try:
        return parse_milli((raw or {}).get("storage") or "0") if isinstance(raw, Mapping) else 0
    except QuantityError as exc:
        raise InputError(f"{where}: storage: {exc}") from exc


def claim_from_object(obj: Mapping[str, Any]) -> Claim:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    name = str(meta.get("name") or "")
    klass = spec.get("storageClassName")
    annotations = meta.get("annotations") or {}
    return Claim(
        namespace=str(meta.get("namespace") or "default"), name=name, volume=str(spec.get("volumeName") or ""),
        storage_class=None if klass is None else str(klass), phase=str(status.get("phase") or "Pending"),
        deleting=bool(meta.get("deletionTimestamp")), access_modes=tuple(map(str, spec.get("accessModes") or ())),
        request=_storage_bytes((spec.get("resources") or {}).get("requests"), f"persistentvolumeclaim {name}"),
        selected_node=str(annotations.get("volume.kubernetes.io/selected-node") or ""),
    )


def volume_from_object(obj: Mapping[str, Any]) -> Volume:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    name = str(meta.get("name") or "")
    required = (spec.get("nodeAffinity") or {}).get("required")
    ref = spec.get("claimRef")
    csi = spec.get("csi")
    attacher = (str(csi.get("driver") or "csi") if isinstance(csi, Mapping)
                else next((kind for kind in IN_TREE_ATTACHED if spec.get(kind)), ""))
    return Volume(
        name=name, node_terms=node_terms(required) if isinstance(required, Mapping) else (),
        labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
        storage_class=str(spec.get("storageClassName") or ""), phase=str(status.get("phase") or "Available"),
        claim=(str(ref.get("namespace") or ""), str(ref.get("name") or "")) if isinstance(ref, Mapping) else None,
        capacity=_storage_bytes(spec.get("capacity"), f"persistentvolume {name}"),
        access_modes=tuple(map(str, spec.get("accessModes") or ())), attacher=attacher,
    )


# in-tree volume types kube-scheduler's NodeVolumeLimits counts against a node's attach limit (CSI-migrated)
IN_TREE_ATTACHED = ("awsElasticBlockStore", "gcePersistentDisk", "azureDisk", "cinder")


def storage_class_from_object(obj: Mapping[str, Any]) -> StorageClass:
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    topologies = tuple(
        tuple(Requirement(str(expr.get("key", "")), "In", tuple(map(str, expr.get("values") or ())))
              for expr in term.get("matchLabelExpressions") or () if isinstance(expr, Mapping))
        for term in obj.get("allowedTopologies") or () if isinstance(term, Mapping)
    )
    default = "true" in (annotations.get("storageclass.kubernetes.io/is-default-class"),
                         annotations.get("storageclass.beta.kubernetes.io/is-default-class"))
    return StorageClass(str(meta.get("name") or ""), str(obj.get("provisioner") or ""),
                        str(obj.get("volumeBindingMode") or "Immediate"), topologies, default)


KINDS = ("Node", "Pod", "PersistentVolumeClaim", "PersistentVolume", "StorageClass", "Namespace", "ResourceQuota",
         "DeviceClass", "ResourceSlice")


def _items(document: Any, name: str, listed: set[str]) -> Iterable[Mapping[str, Any]]:
    if isinstance(document, Mapping) and isinstance(document.get("items"), list):
        list_kind = str(document.get("kind") or "List")
        implied = list_kind[:-4] if list_kind.endswith("List") and list_kind != "List" else None
        if implied in KINDS:
            listed.add(implied)
        for item in document["items"]:
            if isinstance(item, Mapping):
                yield item if item.get("kind") or implied is None else {**item, "kind": implied}
    elif isinstance(document, Mapping) and document.get("kind") in KINDS:
        yield document
    elif isinstance(document, list):
        for item in document:
            yield from _items(item, name, listed)
    else:
        raise InputError(f"{name}: expected a Kubernetes List of Nodes and Pods "
                         "(as `kubectl get nodes,pods -A -o yaml` prints it)")


def snapshot_from_objects(documents: Sequence[Any], name: str = "snapshot",
                          read_pod: Callable[[Mapping[str, Any]], Pod] | None = None) -> Snapshot:
    """Build a Snapshot from Lists (or single objects) of Nodes and Pods, and the PersistentVolumeClaims,
    PersistentVolumes, StorageClasses, Namespaces and ResourceQuotas placement also reads; other kinds are skipped.
    `read_pod` reads each pod (default `pod_from_object`; `plan` reads the master's as a pass does)."""
    read_pod = read_pod or pod_from_object
    nodes: list[Node] = []
    pods: list[Pod] = []
    claims: list[Claim] = []
    volumes: list[Volume] = []
    classes: list[StorageClass] = []
    namespaces: dict[str, dict[str, str]] = {}
    quotas: list[ResourceQuota] = []
    device_classes: list[DeviceClass] = []
    slices: list[DeviceSlice] = []
    listed: set[str] = set()
    try:
        for document in documents:
            for item in _items(document, name, listed):
                kind = item.get("kind")
                if kind == "Pod":
                    pods.append(read_pod(item))
                elif kind == "Node":
                    nodes.append(node_from_object(item))
                elif kind in ("PersistentVolumeClaim", "PersistentVolume", "StorageClass"):
                    try:
                        if kind == "PersistentVolumeClaim":
                            claims.append(claim_from_object(item))
                        elif kind == "PersistentVolume":
                            volumes.append(volume_from_object(item))
                        else:
                            classes.append(storage_class_from_object(item))
                    except _SHAPE_ERRORS as exc:
                        raise _malformed(str(kind), item, exc) from exc
                elif kind == "ResourceQuota":
                    quotas.append(quota_from_object(item))
                elif kind == "DeviceClass":
                    device_classes.append(device_class_from_object(item))
                elif kind == "ResourceSlice":
                    slices.append(device_slice_from_object(item))
                elif kind == "Namespace":
                    meta = item.get("metadata") or {}
                    labels = meta.get("labels") if isinstance(meta, Mapping) else None
                    namespaces[str(meta.get("name") or "") if isinstance(meta, Mapping) else ""] = (
                        {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {})
                else:
                    continue
                listed.add(str(kind))
    except MalformedObject as exc:
        raise exc.at(name) from exc
    _one_node_per_name(nodes, name)
    return Snapshot(tuple(nodes), tuple(pods), tuple(claims), tuple(volumes), tuple(classes), namespaces,
                    frozenset(listed | {"Node", "Pod"}), tuple(sorted(quotas, key=lambda q: (q.namespace, q.name))),
                    tuple(device_classes), tuple(slices))


def _one_node_per_name(nodes: Sequence[Node], source: str) -> None:
    """Plans and maps know a node by its name: a nameless Node, or two of one name (two listings concatenated), would
    be drawn twice and planned onto whichever comes first. The API server holds neither."""
    seen: set[str] = set()
    for node in nodes:
        if not node.name:
            raise MalformedObject("Node", '""', "metadata.name: empty; every Node has a name", source=source)
        if node.name in seen:
            raise InputError(f"{source}: Node {node.name} is listed twice",
                             hint="take the snapshot in one command: kubectl get nodes,pods -A -o json > snapshot.json")
        seen.add(node.name)


def describe_resources(resources: Resources) -> str:
    """`cpu=7910m, nvidia.com/gpu=4` for messages."""
    return ", ".join(f"{name}={format_milli(name, amount)}" for name, amount in sorted(resources.items()))


# -- DRA objects (the model: model.py) ------------------------------------------------------------------------------

_DRIVER_IS = re.compile(r"""^\s*device\.driver\s*==\s*(?:"([^"]+)"|'([^']+)')\s*$""")


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _name(obj: Mapping[str, Any]) -> str:
    return str(_mapping(obj.get("metadata")).get("name") or "")


def device_class_from_object(obj: Mapping[str, Any]) -> DeviceClass:
    """A DeviceClass object read leniently (a field of another shape reads as absent)."""
    spec = _mapping(obj.get("spec"))
    drivers: set[str] = set()
    unread = False
    selectors = spec.get("selectors")
    for selector in selectors if isinstance(selectors, list) else ():
        expression = str(_mapping(_mapping(selector).get("cel")).get("expression") or "")
        match = _DRIVER_IS.match(expression)
        if match:
            drivers.add(match.group(1) or match.group(2))
        else:
            unread = True  # a selector det-k8s cannot evaluate: the class may select any driver's devices
    name = spec.get("extendedResourceName")
    return DeviceClass(_name(obj), name if isinstance(name, str) else "",
                       None if unread or not drivers else frozenset(drivers))


def device_slice_from_object(obj: Mapping[str, Any]) -> DeviceSlice:
    """A ResourceSlice object read leniently (a field of another shape reads as absent)."""
    spec = _mapping(obj.get("spec"))
    pool = _mapping(spec.get("pool"))
    raw_devices = spec.get("devices")
    devices: list[Any] = raw_devices if isinstance(raw_devices, list) else []
    generation = pool.get("generation")
    selector = spec.get("nodeSelector")
    per_device: list[str] = []
    if spec.get("perDeviceNodeSelection") is True:
        for device in devices:
            node = _mapping(device).get("nodeName")
            if isinstance(node, str) and node:
                per_device.append(node)
    terms: tuple[Term, ...] = ()
    if isinstance(selector, Mapping):
        try:
            terms = node_terms(selector)
        except (TypeError, AttributeError, ValueError):  # not a NodeSelector's shape: it selects no node
            terms = ((),)
    node = spec.get("nodeName")
    return DeviceSlice(
        _name(obj), str(spec.get("driver") or ""), str(pool.get("name") or ""),
        generation if isinstance(generation, int) and not isinstance(generation, bool) else 0,
        node if isinstance(node, str) else "", terms,
        spec.get("allNodes") is True, len(devices), tuple(per_device))
