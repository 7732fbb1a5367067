"""Objects of another shape than the API gives are refused naming kind, name and field, never a traceback."""

from __future__ import annotations

import re

import pytest

from det_k8s.cluster.read import node_from_object, pod_from_object, snapshot_from_objects
from det_k8s.cluster.shapes import find_problem
from det_k8s.errors import MalformedObject

NODE = {"kind": "Node", "metadata": {"name": "gpu-0"}, "status": {"allocatable": {"nvidia.com/gpu": "4"}}}


def with_(obj: dict, path: str, value: object) -> dict:
    import copy

    out = copy.deepcopy(obj)
    node = out
    *parents, last = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return out


@pytest.mark.parametrize(("path", "value", "expected"), [
    ("status.conditions", "ready", "status.conditions: expected a list, found a string"),
    ("status.conditions", ["ready"], "status.conditions[0]: expected a mapping, found a string"),
    ("spec.taints", "all", "spec.taints: expected a list, found a string"),
    ("spec.taints", [1], "spec.taints[0]: expected a mapping, found an integer"),
    ("metadata.labels", ["a"], "metadata.labels: expected a mapping, found a list"),
    ("status.allocatable", "4", "status.allocatable: expected a mapping, found a string"),
])
def test_nodes_of_the_wrong_shape_name_the_field(path, value, expected):
    with pytest.raises(MalformedObject) as info:
        node_from_object(with_(NODE, path, value))
    assert info.value.message == f"Node gpu-0: {expected}"


@pytest.mark.parametrize(("spec", "expected"), [
    ({"containers": "x"}, "spec.containers: expected a list, found a string"),
    ({"containers": ["x"]}, "spec.containers[0]: expected a mapping, found a string"),
    ({"containers": [{"resources": "lots"}]}, "spec.containers[0].resources: expected a mapping, found a string"),
    ({"containers": [], "tolerations": "all"}, "spec.tolerations: expected a list, found a string"),
    ({"containers": [], "affinity": []}, None),  # an empty affinity is no affinity: read as before
    ({"containers": [], "affinity": {"nodeAffinity": "x"}}, "spec.affinity.nodeAffinity: expected a mapping"),
    ("x", "spec: expected a mapping, found a string"),
])
def test_pods_of_the_wrong_shape_name_the_field(spec, expected):
    obj = {"kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": spec}
    if expected is None:
        pod_from_object(obj)
        return
    with pytest.raises(MalformedObject, match="^" + re.escape(f"Pod ml/p: {expected}")):
        pod_from_object(obj)


def test_a_snapshot_names_its_file():
    with pytest.raises(MalformedObject, match=r"^snap.json: Node gpu-0: spec.taints: expected a list"):
        snapshot_from_objects([{"kind": "List", "items": [with_(NODE, "spec.taints", "all")]}], "snap.json")


def test_well_formed_objects_have_no_problem():
    assert find_problem(NODE, "Node") is None
    assert find_problem({"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}}, "Pod") is None
    assert find_problem("x", "Pod") == "expected a mapping, found a string"
