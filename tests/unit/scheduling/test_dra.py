"""DRA-managed GPUs (issue 21): det-k8s tells them from device-plugin GPUs and never places a pod that needs a
claim allocation it does not perform; the rest of the pass goes on."""

from __future__ import annotations

from det_k8s.cluster.read import snapshot_from_objects
from det_k8s.scheduling.explain import describe, to_dict
from det_k8s.scheduling.model import ReasonCode
from tests.support.dra_objects import device_class, resource_slice
from tests.support.kube_objects import node, plan, queued, spec

DRA_CLUSTER = [node("dp-1", 4), node("dp-2", 4), node("dra-1"), node("dra-2"), device_class(),
               resource_slice("dra-1"), resource_slice("dra-2")]


def test_device_plugin_nodes_keep_working_while_a_group_that_needs_dra_waits_saying_so():
    result = plan(DRA_CLUSTER, {"big": queued("big", 2, spec(8)), "small": queued("small", 2, spec(4))})
    assert sorted(node for _, node in result.placements["small"]) == ["dp-1", "dp-2"]
    assert "big" not in result.rejected  # kube-scheduler could place it with a claim: waiting, not "never"
    reason = result.waiting["big"]
    assert reason.code is ReasonCode.DRA and reason.dra is not None
    assert (reason.dra.resource, reason.dra.device_class, reason.dra.nodes, reason.dra.devices) == (
        "nvidia.com/gpu", "gpu.example.com", 2, 16)
    line = describe(reason)
    assert line.startswith("2 nodes serve nvidia.com/gpu through DRA (DeviceClass gpu.example.com, 16 devices)")
    assert "run the device plugin on those nodes" in line and "never fits the device-plugin nodes" in line
    assert "nodes are available" not in line  # the master would rewrite it
    assert to_dict(reason)["dra"]["without_dra"] == "exceeds-cluster"


def test_a_group_that_only_waits_for_device_plugin_capacity_keeps_its_code_and_names_the_dra_nodes():
    result = plan(DRA_CLUSTER, {"a": queued("a", 2, spec(4)), "b": queued("b", 1, spec(4))})
    reason = result.waiting["b"]
    assert reason.code is ReasonCode.INSUFFICIENT and reason.dra is not None and reason.dra.nodes == 2
    assert "2 nodes serve nvidia.com/gpu through DRA" in describe(reason)


def test_without_dra_objects_the_reasons_are_as_before():
    plain = [obj for obj in DRA_CLUSTER if obj["kind"] == "Node"]
    result = plan(plain, {"big": queued("big", 2, spec(8))})
    assert result.rejected["big"].code is ReasonCode.EXCEEDS_CLUSTER and result.rejected["big"].dra is None


def test_a_node_whose_allocatable_lists_the_resource_is_the_device_plugins_even_with_slices():
    """kube-scheduler's shouldDelegateResourceToDRA: allocatable > 0 means the device plugin serves it there."""
    objects = [node("both", 8), device_class(), resource_slice("both")]
    result = plan(objects, {"g": queued("g", 1, spec(8))})
    assert result.placements["g"] == (("g-0", "both"),)


def test_only_the_newest_generation_of_a_pool_counts_and_other_drivers_do_not():
    objects = [node("dra-1"), device_class(), resource_slice("dra-1", 8, generation=1),
               resource_slice("dra-1", 2, generation=2), resource_slice("dra-1", 4, driver="nic.example.com")]
    snapshot = snapshot_from_objects([{"kind": "List", "items": objects}])
    assert snapshot.devices.dra_nodes("nvidia.com/gpu") == {"dra-1": 2}
    assert snapshot.devices.gpus("dra-1") == 2 and snapshot.devices.gpu_class("dra-1") == "gpu.example.com"
    assert {"DeviceClass", "ResourceSlice"} <= snapshot.listed


def test_the_implicit_extended_resource_name_and_a_selector_det_k8s_cannot_read():
    """Every class serves `deviceclass.resource.kubernetes.io/<name>`; a CEL selector other than `device.driver ==`
    is taken to select any driver's devices (it only widens what a refusal names)."""
    objects = [node("dra-1"), device_class("fancy", extended=None, expression="device.attributes['x'].y > 2"),
               resource_slice("dra-1", 4, driver="other.example.com")]
    snapshot = snapshot_from_objects([{"kind": "List", "items": objects}])
    assert snapshot.devices.dra_nodes("deviceclass.resource.kubernetes.io/fancy") == {"dra-1": 4}
    assert snapshot.devices.dra_nodes("nvidia.com/gpu") == {}


def test_a_node_selector_cannot_make_dra_nodes_usable_or_named():
    objects = [*DRA_CLUSTER, node("cpu", labels={"pool": "cpu"})]
    body = spec(8, nodeSelector={"kubernetes.io/hostname": "dp-1"})
    result = plan(objects, {"g": queued("g", 1, body)})
    assert result.rejected["g"].code is ReasonCode.EXCEEDS_CLUSTER  # its only eligible node is a device-plugin one
