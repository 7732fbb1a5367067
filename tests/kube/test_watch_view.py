"""The scheduler loop's view of the cluster: listed once, then kept by watches, through the real client."""

from __future__ import annotations

import time

import pytest

from det_k8s.kube.kinds import PODS
from det_k8s.kube.watch import ClusterView, read_cluster
from tests.support.k8s_emulator import node, pod
from tests.support.master_pods import create_task, master_task


def until(condition, what: str = "the view to catch up") -> None:
    deadline = time.monotonic() + 20  # a guard against hanging, not a speed assertion
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def view(cluster):
    cluster.api.bookmark_interval = 0.1
    for i in range(2):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    cluster.api.put(pod("agent-0", node_name="gpu-0", requests={"cpu": "100m"}))
    found = ClusterView(cluster.connect(), "coscheduler", queue_namespace="default").start()
    assert found.wait_synced()
    yield found
    found.stop()


def names(view) -> set[str]:
    return {p.name for p in view.state().snapshot.pods}


def test_it_lists_once_then_follows_the_watch(cluster, view):
    task = create_task(cluster.connect(), master_task("0.38.1", slots_per_trial=8))
    until(lambda: len(view.state().served) == 2)
    assert names(view) == {"agent-0", *task.names}
    cluster.api.update("pods", "agent-0", {"status": {"phase": "Succeeded"}})  # a finished pod leaves the view
    until(lambda: "agent-0" not in names(view))
    assert view.stats.lists == {"nodes": 1, "pods": 1, "configmaps": 1, "persistentvolumeclaims": 1,  # once each
                                "persistentvolumes": 1, "storageclasses": 1, "namespaces": 1, "resourcequotas": 1}
    state = view.state()
    fresh = read_cluster(cluster.connect(), "coscheduler")  # what a one-shot pass lists: the same cluster
    assert {p.name for p in fresh.snapshot.pods} == {p.name for p in state.snapshot.pods}
    assert {n.name for n in fresh.snapshot.nodes} == {n.name for n in state.snapshot.nodes}


def test_only_relevant_changes_wake_the_loop(cluster, view):
    view.wait_for_change(0)  # consume the initial listing
    before = view.stats.relevant
    cluster.api.update("pods", "agent-0", {"status": {"containerStatuses": [{"name": "main", "ready": True}]}})
    cluster.api.update("nodes", "gpu-0", {"status": {"conditions": [{"type": "Ready", "status": "True",
                                                                     "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]}})
    cluster.api.put(pod("web-1", node_name="gpu-1", requests={"cpu": "1"}))  # someone else's pod, bound
    assert view.catch_up(cluster.api.get("pods", "web-1")["metadata"]["resourceVersion"], timeout=20)
    assert view.stats.relevant == before  # heartbeats, container statuses, other pods arriving: nothing to do
    task = create_task(cluster.connect(), master_task("0.38.1", slots_per_trial=4))  # a served pod: a pass
    assert view.wait_for_change(20)
    assert view.stats.relevant > before
    cluster.api.remove("pods", "web-1")  # capacity freed: a pass
    until(lambda: "web-1" not in names(view))
    assert view.wait_for_change(20)
    del task


def test_410_gone_lists_again_and_misses_nothing(cluster, view):
    cluster.api.compact()
    cluster.api.expire_watches()
    cluster.api.put(pod("late", node_name="gpu-1", requests={"cpu": "1"}))
    until(lambda: view.stats.lists.get("pods", 0) >= 2, "a relist after 410 Gone")
    until(lambda: "late" in names(view))
    assert view.stats.expired >= 1


def test_its_own_bindings_count_at_once_and_older_events_do_not_undo_them(cluster, view):
    task = create_task(cluster.connect(), master_task("0.38.1", slots_per_trial=4))
    until(lambda: len(view.state().served) == 1)
    (served,) = view.state().served
    cluster.api.watch_delay = 0.5  # the binding's own event arrives late
    view.assume_bound(served.namespace, served.name, "gpu-1")
    cluster.api.update("pods", served.name, {"metadata": {"labels": {"determined-queue-position": "3"}}})
    (still,) = view.state().served
    assert still.pod.node_name == "gpu-1"  # the label event is newer, but shows no binding: ours holds
    cluster.connect().create_subresource(PODS, served.name, "binding", {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": served.name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-1"}})
    version = view.settled_version(timeout=20)  # waits for the watch to confirm the binding
    assert int(version) >= int(cluster.api.get("pods", served.name)["metadata"]["resourceVersion"])
    del task


def test_catching_up_with_a_fence_waits_for_the_watch_or_lists_again(cluster, view, tmp_path):
    cluster.api.watch_delay = 1.0
    cluster.api.put(pod("behind", node_name="gpu-1", requests={"cpu": "1"}))
    fence = cluster.api.get("pods", "behind")["metadata"]["resourceVersion"]
    lists = view.stats.lists["pods"]
    assert not view.catch_up(fence, timeout=0.01)  # not there in time: listed afresh instead
    assert view.stats.lists["pods"] == lists + 1 and "behind" in names(view)
    cluster.api.put(pod("later", node_name="gpu-1", requests={"cpu": "1"}))
    assert view.catch_up(cluster.api.get("pods", "later")["metadata"]["resourceVersion"], timeout=20)
    assert "later" in names(view)


def test_a_loop_is_not_sent_to_list_every_pod_again_after_another_clients_pass_created_pods(cluster):
    """`experiment create` (a pass without a view) leaves a fence for the loop: the revision of its own pod writes.
    The loop's watch delivers exactly those, so it catches up without listing 30,000 pods again (a global revision
    newer than every pod event was only reached by a bookmark, a minute later on a real API server, or a relist)."""
    from det_k8s.live.scheduler import LiveScheduler
    from det_k8s.scheduling.model import Policy
    from tests.live.test_live_scheduler import submit

    cluster.api.bookmark_interval = 3600
    cluster.api.put(node("gpu-0", gpus=4))
    api = cluster.connect()
    view = ClusterView(api.clone(), "coscheduler", queue_namespace="default").start()
    try:
        assert view.wait_synced()
        loop = LiveScheduler(api, "default", Policy(), "loop", serve="coscheduler", view=view)
        loop.run_pass()
        submit(cluster, "aaaa0001", 4, 1)
        created = LiveScheduler(cluster.connect(), "default", Policy(), "someone").run_pass()
        assert list(created.placed) == ["aaaa0001"]
        loop.run_pass()
        assert view.stats.lists["pods"] == 1  # caught up from the watch, not listed again
        trial = create_task(cluster.connect(), master_task("0.38.1", slots_per_trial=4, priority=90))
        report = loop.run_pass()
        assert report.placed == {} and all(not p["spec"].get("nodeName") for p in cluster.api.items("pods")
                                           if p["metadata"]["name"] in trial.names)  # it saw the pinned pod
    finally:
        view.stop()
        cluster.api.expire_watches()  # end the quiet watches now, not at their next bookmark


def test_a_scheduling_gate_removed_from_a_served_pod_wakes_the_loop(cluster, view):
    task = master_task("0.38.1", slots_per_trial=4)
    task.pods[0]["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    create_task(cluster.connect(), task)
    until(lambda: [p.gates for p in view.state().served] == [("kueue.x-k8s.io/admission",)])
    while view.wait_for_change(0.3):  # consume the arrival
        pass
    before = view.stats.relevant
    cluster.api.update("pods", task.names[0], {"spec": {"schedulingGates": None}})  # the queue controller admits it
    assert view.wait_for_change(20)  # before the fix: nothing until the --interval timer
    assert view.stats.relevant > before and [p.gates for p in view.state().served] == [()]


def test_a_server_without_dra_is_not_a_problem(view):
    """The emulator does not serve resource.k8s.io (an API server before 1.34 alike): discovery says so, the kinds are
    neither listed nor watched, and no problem is reported (where served: tests/real/test_dra.py)."""
    state = view.state()
    assert not {"DeviceClass", "ResourceSlice"} & state.snapshot.listed
    assert view.problems == []
    assert not {"DeviceClass", "ResourceSlice"} & read_cluster(view.api).snapshot.listed


def test_what_it_hands_out_is_built_once_until_a_node_or_pod_changes(cluster, view):
    """A pass reads the view several times (issue 24: every build of the snapshot at 5,000 nodes cost milliseconds
    per gang): the same snapshot and served pods come back until something in them changes, and then the new
    ones, never an old one."""
    create_task(cluster.connect(), master_task("0.38.1", slots_per_trial=4))
    until(lambda: len(view.served()) == 1)
    first = view.state()
    assert view.state().snapshot is first.snapshot and view.served() is first.served is view.state().served
    (served,) = first.served
    view.assume_bound(served.namespace, served.name, "gpu-1")  # our own binding: seen at once
    bound = view.state()
    assert bound.snapshot is not first.snapshot and bound.served is not first.served
    assert bound.served[0].pod.node_name == "gpu-1" and {p.node_name for p in bound.snapshot.pods} >= {"gpu-1"}
    cluster.api.put(node("gpu-2", gpus=4))  # a node: a new snapshot, the same served pods
    until(lambda: "gpu-2" in {n.name for n in view.state().snapshot.nodes}, "the new node")
    assert view.state().served is bound.served and view.state().snapshot is view.state().snapshot
    cluster.api.update("pods", "agent-0", {"status": {"phase": "Succeeded"}})  # another pod finished: a new
    until(lambda: "agent-0" not in names(view), "the finished pod to leave")  # snapshot, the same served pods
    assert view.state().snapshot.used["gpu-0"] == {}  # (worked out from the new snapshot, not the old one)
    assert view.state().served is bound.served
    cluster.api.remove("pods", served.name)  # a served pod gone: served pods anew
    until(lambda: view.served() == (), "the served pod to leave")
    assert served.name not in names(view)
