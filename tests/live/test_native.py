"""Native placement's pure parts (det_k8s/live/native.py) and its discovery against the API emulator, which serves no
PodGroup API (the real one, with the API on, is tests/real/test_native_gang.py)."""

from __future__ import annotations

import pytest

from det_k8s.cluster.read import pod_from_object
from det_k8s.errors import InputError
from det_k8s.live.native import member, pod_group_manifest, served_version, why_unplaced
from det_k8s.live.policy import policy_from_data
from det_k8s.scheduling.groups import pin

ON_REAL_CLUSTER_TOO = True

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "g-0", "namespace": "ml", "labels": {"a": "b"}},
       "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "4"},
                                                                            "limits": {"nvidia.com/gpu": "4"}}}]}}


def test_the_pod_group_is_a_gang_of_every_pod_owned_by_the_queue_entry():
    manifest = pod_group_manifest("det-k8s-g", "ml", "v1alpha2", 3, "g", {"name": "det-k8s-queue-g", "uid": "u-1"})
    assert manifest["apiVersion"] == "scheduling.k8s.io/v1alpha2" and manifest["kind"] == "PodGroup"
    assert manifest["spec"] == {"schedulingPolicy": {"gang": {"minCount": 3}}}
    assert manifest["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "det-k8s-queue-g", "uid": "u-1"}]
    assert "ownerReferences" not in pod_group_manifest("n", "ml", "v1beta1", 1, "g", {"name": "x", "uid": ""})["metadata"]


def test_a_member_names_its_pod_group_is_not_pinned_and_counts_on_its_planned_node_until_bound():
    pod = member(POD, "det-k8s-g", "gpu-1")
    assert pod["spec"]["schedulingGroup"] == {"podGroupName": "det-k8s-g"}
    assert "affinity" not in pod["spec"] and "nodeName" not in pod["spec"]
    assert pod["metadata"]["labels"] == {"a": "b"} and POD["spec"].get("schedulingGroup") is None  # not changed
    read = pod_from_object(pod)
    assert read.node == "gpu-1" and read.node_name is None  # the next pass does not hand out its GPUs again
    bound = pod_from_object({**pod, "spec": {**pod["spec"], "nodeName": "gpu-2"}})
    assert bound.node == "gpu-2"  # where kube-scheduler put it wins
    assert pod_from_object(POD).node is None
    assert pod_from_object({**POD, "spec": pin(POD["spec"], "gpu-0")}).node == "gpu-0"


def test_why_a_released_group_is_not_placed_comes_from_the_pod_group_and_the_pods():
    refused = {"status": {"conditions": [
        {"type": "PodGroupInitiallyScheduled", "status": "False", "reason": "Unschedulable",
         "message": "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining"}]}}
    text = why_unplaced(refused, [("g-0", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."),
                                  ("g-1", "minCount (3) cannot be satisfied"), ("g-2", "minCount (3) cannot be satisfied")])
    assert text == ("waiting for kube-scheduler to place the whole group: pod group Unschedulable: minCount (3) cannot "
                    "be satisfied: 0 scheduled, 2 remaining; pod g-0: 0/3 nodes are available: 3 Insufficient "
                    "nvidia.com/gpu.; pod g-1: minCount (3) cannot be satisfied")
    old = {"status": {"conditions": [{"type": "PodGroupScheduled", "status": "False", "reason": "Unschedulable"}]}}
    assert why_unplaced(old, []) == "waiting for kube-scheduler to place the whole group: pod group Unschedulable"
    done = {"status": {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled"}]}}
    assert why_unplaced(done, [("g-0", "")]) == "" and why_unplaced(None, []) == ""


def test_discovery_finds_no_pod_group_api_on_a_server_without_it(cluster):
    assert served_version(cluster.connect("default")) is None


@pytest.mark.parametrize("value", ["kai", 3, "NATIVE"])
def test_a_stored_policy_with_an_unknown_placement_is_one_line_naming_it(value):
    with pytest.raises(InputError, match="placement .* is not one of auto, native, det-k8s"):
        policy_from_data({"placement": value}, "configmap ml/det-k8s-scheduler-policy")


def test_policies_stored_before_have_auto_placement():
    assert policy_from_data({"preemption": True}, "x").placement == "auto"
