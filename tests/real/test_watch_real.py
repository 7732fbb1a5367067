"""The scheduler loop's watch against the real API server: 410 Gone after etcd compacts, and a list that follows.

Its own control plane: the watch cache off (`--watch-cache=false`), so a watch resumed from a compacted
resourceVersion is answered 410 Gone by etcd's own rule, as on an API server whose cache window has passed."""

from __future__ import annotations

import time

import pytest

from det_k8s.kube.api import KubeApi
from det_k8s.kube.watch import ClusterView
from tests.support.needs import need
from tests.support.realkube.cluster import ControlPlane, Options, fake_node
from tests.support.realkube.components import cached

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


def test_a_quiet_pod_watch_advances_by_the_real_servers_bookmarks(real_cluster):
    """With the watch cache on (the default), kube-apiserver sends BOOKMARK events to a watch that asked for them
    (2 s before the watch's timeout, and about once a minute: cacher/cache_watcher.go nextBookmarkTime): the pods'
    watch of a quiet cluster moves its resourceVersion on without any pod event, so a resumed watch starts from a
    recent version rather than the list's (which the cache may have forgotten).

    A bookmark carries the version the server's pods cache has reached, and on a quiet cluster that moves only when
    etcd tells the cache how far it is (a progress notification): when a list without a resourceVersion (a
    consistent read, served from the cache) asks for one, or on etcd's own period (10 min by default). Nothing else
    moves it, on 1.31.13 as on 1.37.2 (a bare API server sent none in 90 s and 35 s); so another client lists the pods
    here, as one on a real cluster would. The view neither lists again nor sees a pod event."""
    plane = real_cluster.plane
    api = real_cluster.connect("default")
    view = ClusterView(api, "coscheduler", queue_namespace="default")
    view.watch_timeout = 10  # a bookmark 2 s before each watch ends, then the watch resumes from it
    view.start()
    try:
        assert view.wait_synced()
        listed = int(view.pods_version)
        events_seen = view.stats.events
        for i in range(3):  # the revision moves on elsewhere: Secrets, which no watch of the view reads
            status, body = plane.request("POST", "/api/v1/namespaces/default/secrets",
                                         {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"bump-{i}"}})
            assert status == 201, body
        bumped = int(body["metadata"]["resourceVersion"])
        assert bumped > listed
        assert not real_cluster.api.items("pods", "default")  # another client's consistent list of the pods
        until(lambda: int(view.pods_version) >= bumped, "a bookmark carrying the pods' watch past the Secrets",
              seconds=120)
        assert view.stats.lists.get("pods") == 1 and view.stats.expired == 0  # no list again: the watch moved on
        assert view.stats.events > events_seen  # (what moved it: events, and no pod changed, so bookmarks)
        assert not [p for p in real_cluster.api.items("pods", "default")]
    finally:
        view.stop()
        for i in range(3):
            real_cluster.api.remove("secrets", f"bump-{i}")
