"""All-or-nothing group creation: every pod, or none left behind."""

from __future__ import annotations

import time

import pytest

from det_k8s.errors import GroupCreationFailed
from det_k8s.live.submit import create_group, delete_group
from tests.support.k8s_emulator import node, pod

ON_REAL_CLUSTER_TOO = True


def group_pods(n: int) -> list[dict]:
    return [pod(f"exp-abc-{i}", node_name=f"gpu-{i}", labels={"determined": "abc", "det-k8s.io/group": "abc"},
                requests={"nvidia.com/gpu": "4"}) for i in range(n)]


SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "exp-abc"},
           "spec": {"clusterIP": "None", "selector": {"det-k8s.io/group": "abc"}}}


@pytest.mark.parametrize("workers", [1, 4])
def test_creates_every_pod_and_the_service(cluster, workers):
    created = create_group(cluster.connect(), "default", group_pods(4), SERVICE, workers=workers)
    assert sorted(created.pods) == [f"exp-abc-{i}" for i in range(4)]
    assert [p["spec"]["nodeName"] for p in cluster.api.items("pods")] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert cluster.api.get("services", "exp-abc") is not None


@pytest.mark.emulator_only  # the emulator fails API calls on demand: fault injection
@pytest.mark.parametrize("workers", [1, 4])
def test_a_failed_creation_removes_everything_already_created(cluster, workers):
    cluster.api.fail("POST", "pods", 403, 'pods "exp-abc-2" is forbidden: exceeded quota: gpu-quota')
    with pytest.raises(GroupCreationFailed) as info:
        create_group(cluster.connect(), "default", group_pods(4), SERVICE, workers=workers)
    assert "exceeded quota" in str(info.value)
    assert cluster.api.items("pods") == []
    assert cluster.api.get("services", "exp-abc") is None
    assert info.value.leftovers == ()


@pytest.mark.emulator_only  # the emulator fails API calls on demand: fault injection
def test_a_pod_that_cannot_be_removed_is_named(cluster):
    cluster.api.put(pod("exp-abc-0"))  # already exists: creating it again conflicts
    cluster.api.fail("DELETE", "pods", 500, "etcd unavailable", name="exp-abc-1")
    pod0, pod1 = group_pods(2)
    with pytest.raises(GroupCreationFailed) as info:
        create_group(cluster.connect(), "default", [pod1, pod0])  # pod 1 is created, pod 0 fails
    assert info.value.leftovers == ("exp-abc-1",) and info.value.remaining == ("exp-abc-1",)
    assert "could not remove exp-abc-1 (pod default/exp-abc-1: API server answered 500: etcd unavailable " \
           "(context emulator)): they remain" in str(info.value)
    assert "deleted by the next det-k8s command that sees them" in (info.value.hint or "")
    assert cluster.api.get("pods", "exp-abc-0") is not None  # not ours: never deleted


@pytest.mark.emulator_only  # the emulator fails API calls on demand and counts them: fault injection
def test_nothing_is_created_when_the_first_pod_fails(cluster):
    cluster.api.fail("POST", "pods", 500, "etcd unavailable")
    with pytest.raises(GroupCreationFailed, match="etcd unavailable"):
        create_group(cluster.connect(), "default", group_pods(3))
    assert cluster.api.items("pods") == []
    assert cluster.api.count("POST", "pods") == 1


@pytest.mark.emulator_only  # the emulator fails API calls on demand and counts them: fault injection
def test_parallel_creation_stops_submitting_after_the_first_failure(cluster):
    cluster.api.fail("POST", "pods", 403, "exceeded quota", name="exp-abc-0")
    with pytest.raises(GroupCreationFailed):
        create_group(cluster.connect(), "default", group_pods(40), SERVICE, workers=2)
    assert cluster.api.count("POST", "pods") < 40  # at most the requests already in flight follow the failure
    assert cluster.api.items("pods") == []


def test_delete_group_tolerates_pods_already_gone(cluster):
    for i in range(2):  # the pods' nodes: on a real cluster their kubelet (kwok) confirms a deleted pod is gone
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    create_group(cluster.connect(), "default", group_pods(2), SERVICE)
    cluster.api.remove("pods", "exp-abc-0")
    assert delete_group(cluster.connect(), "default", ["exp-abc-0", "exp-abc-1"], "exp-abc") == []
    assert cluster.api.get("services", "exp-abc") is None
    deadline = time.monotonic() + 60  # a guard against hanging, not a speed assertion: a real pod ends gracefully
    while cluster.api.items("pods"):
        assert time.monotonic() < deadline, f"pods left: {[p['metadata']['name'] for p in cluster.api.items('pods')]}"
        time.sleep(0.05)


@pytest.mark.emulator_only  # the emulator fails API calls on demand: fault injection
def test_a_creation_whose_answer_was_lost_is_removed_too(cluster):
    # the server creates exe-abc-1 but the client is told it failed (e.g. the answer timed out)
    cluster.api.fail("POST", "pods", 500, "etcdserver: request timed out", name="exp-abc-1", after_write=True)
    with pytest.raises(GroupCreationFailed) as info:
        create_group(cluster.connect(), "default", group_pods(3), SERVICE)
    assert cluster.api.items("pods") == []  # pod 1 existed on the server: it was deleted as well
    assert str(info.value).endswith("removed the 2 pods exp-abc-0, exp-abc-1 that had been created")
    assert info.value.remaining == ()  # pod 1 was there and is gone: nothing can appear later
    assert cluster.api.get("services", "exp-abc") is None


@pytest.mark.emulator_only  # the emulator fails API calls on demand: fault injection
def test_a_creation_that_times_out_is_removed_too(cluster):
    from det_k8s.kube.api import KubeApi

    api = KubeApi.connect(kubeconfig=str(cluster.kubeconfig), timeout=(2.0, 0.5))
    cluster.api.fail("POST", "pods", 500, "slow", name="exp-abc-1", after_write=True, delay=2.0)
    with pytest.raises(GroupCreationFailed, match="did not answer"):
        create_group(api, "default", group_pods(3), SERVICE, workers=1)
    assert cluster.api.items("pods") == []
