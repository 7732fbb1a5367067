"""The scheduler loop's watch against the real API server: 410 Gone after etcd compacts, and a list that follows.

Its own control plane: the watch cache off (`--watch-cache=false`), so a watch resumed from a compacted
resourceVersion is answered 410 Gone by etcd's own rule, as on an API server whose cache window has passed."""

from __future__ import annotations

import time

import pytest

from det_k8s.kube.api import KubeApi
from det_k8s.kube.watch import ClusterView
from tests.needs import need
from tests.realkube.cluster import ControlPlane, Options, fake_node
from tests.realkube.components import cached

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def uncached():
    binaries = cached()
    need(binaries is not None, "the real control plane is not built (./scripts/test builds it where Go is installed)")
    with ControlPlane(binaries, Options(apiserver_args=["--watch-cache=false"], scheduler=False)) as plane:
        yield plane


def until(condition, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds  # a guard against hanging, not a speed assertion
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def test_a_watch_resumed_after_compaction_gets_410_lists_again_and_misses_nothing(uncached):
    plane = uncached
    plane.apply(fake_node("gpu-0", gpus=4))
    api = KubeApi.connect(kubeconfig=str(plane.admin_kubeconfig), namespace="default")
    view = ClusterView(api, "coscheduler", queue_namespace="default")
    view.watch_timeout = 2  # the server ends each watch after 2 s; the view resumes from its last version
    view.start()
    try:
        assert view.wait_synced()
        lists_before = view.stats.lists.get("pods", 0)
        for i in range(3):  # etcd's revision moves on without the pods' watch seeing an event
            plane.request("POST", "/api/v1/namespaces/default/configmaps",
                          {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"}})
        plane.compact_etcd()
        until(lambda: view.stats.expired >= 1, "410 Gone on a resumed watch")
        until(lambda: view.stats.lists.get("pods", 0) > lists_before, "a list after 410 Gone")
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "late", "namespace": "default"},
               "spec": {"nodeName": "gpu-0", "containers": [{"name": "c", "image": "x"}]}}
        status, body = plane.request("POST", "/api/v1/namespaces/default/pods", pod)
        assert status == 201, body
        until(lambda: "late" in {p.name for p in view.state().snapshot.pods}, "the pod made after the relist")
    finally:
        view.stop()
