"""The shapes of the Kubernetes object fields det-k8s reads, to name the field when an object has another.

A real API server only returns objects of these shapes, but a snapshot file may be hand-written,
and a field such as `status.conditions: "ready"` would otherwise surface as an AttributeError
deep inside a reader. The readers in `read.py` run on their fast path unchecked; only when one
fails does `find_problem` walk this table to say which field is wrong (kind, name, field,
expected and found), so the common case pays nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..safe_read import type_name

# field path -> expected type; "[]" in a path means "every item of that list"
MAPPING, LIST, STRING = dict, list, str
_META: dict[str, type] = {"metadata": MAPPING, "metadata.name": STRING, "metadata.namespace": STRING,
                          "metadata.labels": MAPPING}
NODE: dict[str, type] = {
    **_META,
    "spec": MAPPING, "spec.taints": LIST, "spec.taints[]": MAPPING,
    "status": MAPPING, "status.allocatable": MAPPING, "status.capacity": MAPPING,
    "status.conditions": LIST, "status.conditions[]": MAPPING,
}
_CONTAINER: dict[str, type] = {"": MAPPING, ".resources": MAPPING, ".resources.requests": MAPPING,
                               ".resources.limits": MAPPING}
POD: dict[str, type] = {
    **_META,
    "spec": MAPPING, "spec.nodeName": STRING,
    "spec.containers": LIST, **{f"spec.containers[]{k}": v for k, v in _CONTAINER.items()},
    "spec.initContainers": LIST, **{f"spec.initContainers[]{k}": v for k, v in _CONTAINER.items()},
    "spec.overhead": MAPPING, "spec.nodeSelector": MAPPING, "spec.tolerations": LIST, "spec.tolerations[]": MAPPING,
    "spec.affinity": MAPPING, "spec.affinity.nodeAffinity": MAPPING,
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution": MAPPING,
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms": LIST,
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[]": MAPPING,
    "status": MAPPING, "status.phase": STRING,
}
SHAPES = {"Node": NODE, "Pod": POD}
_NAMES: dict[type, str] = {dict: "a mapping", list: "a list", str: "a string"}


def _split(path: str) -> list[str]:
    """`spec.containers[].resources` -> ["spec", "containers", "[]", "resources"]."""
    out: list[str] = []
    for part in path.split("."):
        if part.endswith("[]"):
            out += [part[:-2], "[]"] if part[:-2] else ["[]"]
        elif part:
            out.append(part)
    return out


def _values(obj: Any, parts: list[str], shown: str) -> list[tuple[str, Any]]:
    """The values at a path (several under `[]`), with the path as shown in messages (`spec.taints[2]`)."""
    found: list[tuple[str, Any]] = [(shown, obj)]
    for part in parts:
        following: list[tuple[str, Any]] = []
        for where, value in found:
            if part == "[]":
                if isinstance(value, list):
                    following += [(f"{where}[{i}]", item) for i, item in enumerate(value)]
            elif isinstance(value, Mapping) and value.get(part) is not None:
                following.append((f"{where}.{part}" if where else part, value[part]))
        found = following
    return found


def find_problem(obj: Any, kind: str) -> str | None:
    """`spec.taints: expected a list, found a string` for the first field of the wrong shape, else None."""
    if not isinstance(obj, Mapping):
        return f"expected a mapping, found {type_name(obj)}"
    for path, expected in SHAPES[kind].items():
        for where, value in _values(obj, _split(path), ""):
            if not isinstance(value, expected):
                return f"{where}: expected {_NAMES[expected]}, found {type_name(value)}"
    return None


def object_name(obj: Any) -> str:
    """The name (namespace/name for namespaced objects) for messages, whatever the object's shape."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return "(no name)"
    name, namespace = meta.get("name"), meta.get("namespace")
    shown = str(name)[:253] if isinstance(name, str) and name else "(no name)"
    return f"{namespace}/{shown}" if isinstance(namespace, str) and namespace else shown
