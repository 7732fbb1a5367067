"""The binding fence (det_k8s/live/fence.py) against the real kube-scheduler: while det-k8s binds the master's pods to
a node, kube-scheduler places nothing there, and a node taken meanwhile is seen before anything is bound.

benchmarks/race.py measures the race it closes over hundreds of rounds (fence off and on, side by side)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from det_k8s.kube.events import EventRecorder
from det_k8s.live.binder import Binder
from det_k8s.live.fence import KEY, Fence
from det_k8s.scheduling.master import master_groups, master_pod
from tests.support.k8s_emulator import node
from tests.support.master_pods import create_task, master_task

pytestmark = pytest.mark.real


def ordinary(name: str, node_name: str | None = None) -> dict:
    spec = {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def refused_for_the_fence(real_cluster, name: str) -> bool:
    pod = real_cluster.api.get("pods", name)
    return any(c["type"] == "PodScheduled" and c["status"] == "False" and "untolerated taint" in c.get("message", "")
               for c in pod["status"].get("conditions") or ())


@pytest.mark.timeout(300 + 7 * 60)  # on 1.31 kube-scheduler tries the pod again only after 5 minutes (retry_within)
def test_kube_scheduler_places_nothing_on_a_fenced_node_and_the_node_is_released(real_cluster):
    real_cluster.api.put(node("gpu-0", gpus=4))
    api = real_cluster.connect("default")
    task = create_task(api, master_task("0.26.2", slots_per_trial=4))

    def meanwhile(seconds: float) -> None:  # an ordinary pod arrives while det-k8s is about to bind
        real_cluster.api.put(ordinary("ordinary"))
        real_cluster.wait_for("kube-scheduler to refuse it for the fence",
                              lambda: refused_for_the_fence(real_cluster, "ordinary"), timeout=30)

    fence = Fence(api, sleep=meanwhile)
    fence.raise_on(["gpu-0"])
    (group,) = master_groups([master_pod(p) for p in real_cluster.api.items("pods") if p["metadata"]["name"] in
                              task.names])
    placement = [(p.name, "gpu-0") for p in group.pending]
    assert fence.still_fits([(group.id, placement, {p.name: dict(p.pod.requests) for p in group.pending})]) == set()
    result = Binder(api, EventRecorder(api, "test")).bind(group, placement)
    fence.lower()
    assert result.failure == "" and fence.problems == []
    assert not any(t["key"] == KEY for t in real_cluster.api.get("nodes", "gpu-0", None)["spec"].get("taints") or ())
    real_cluster.wait_for("kube-scheduler to retry the ordinary pod (the node is full now)", lambda: any(
        c["type"] == "PodScheduled" and "Insufficient nvidia.com/gpu" in c.get("message", "")
        for c in real_cluster.api.get("pods", "ordinary")["status"].get("conditions") or ()),
        timeout=retry_within(real_cluster.plane.binaries.kube_version))
    assert not real_cluster.api.get("pods", "ordinary")["spec"].get("nodeName")  # never both on the node


def retry_within(kube_version: str) -> float:
    """How long kube-scheduler may take to try a pod again that the fence's taint turned away, once the taint is gone.

    From 1.32 (SchedulerQueueingHints on by default) the node update that lifts the taint sends the pod back to the
    queue at once: TaintToleration's hint asks only whether the taint is gone. Before (1.31: the gate is off), the
    node update moves it only if the pod would fit the node then (`preCheckForNode`: resources, then taints); the
    node is full of the group's pods by then, so the pod stays among the unschedulable until the queue's flush of
    pods held there longer than 5 minutes (checked every 30 s), and is tried then."""
    major, minor = (int(x) for x in kube_version.split(".")[:2])
    return 30 if (major, minor) >= (1, 32) else 5 * 60 + 30 + 60  # + the flush's period + room for a loaded machine


def test_a_node_taken_before_the_fence_went_up_is_seen_and_nothing_is_bound(real_cluster):
    real_cluster.api.put(node("gpu-0", gpus=4))
    api = real_cluster.connect("default")
    task = create_task(api, master_task("0.26.2", slots_per_trial=4))
    (group,) = master_groups([master_pod(p) for p in real_cluster.api.items("pods") if p["metadata"]["name"] in
                              task.names])
    real_cluster.api.put(ordinary("early", node_name="gpu-0"))  # placed after det-k8s planned, before it binds
    fence = Fence(api)
    fence.raise_on(["gpu-0"])
    placement = [(p.name, "gpu-0") for p in group.pending]
    assert fence.still_fits([(group.id, placement, {p.name: dict(p.pod.requests) for p in group.pending})]) == {group.id}
    fence.lower()


def fenced(real_cluster, name: str) -> bool:
    return any(t["key"] == KEY for t in real_cluster.api.get("nodes", name, None)["spec"].get("taints") or ())


def frozen_clock() -> Callable[[], float]:
    """The fence's wall clock stopped at now: its value never ages past REFRESH (10 s) while the test waits on the real
    components in between, so the fence is never written again because those waits took long on a loaded machine."""
    now = time.time()
    return lambda: now


def test_a_fence_raised_ahead_is_honoured_without_a_second_settle_and_lowered_once_it_has_lingered(real_cluster):
    """The loop's fence (issue 24): raised ahead on the node a coming gang is likely to get, it has settled when the
    gang comes (no wait then); kube-scheduler places nothing there meanwhile; it lingers after the binding and is
    lowered once due."""
    real_cluster.api.put(node("gpu-0", gpus=4))
    api = real_cluster.connect("default")
    waits: list[float] = []
    fence = Fence(api, sleep=waits.append, linger=0.5, clock=frozen_clock())
    fence.raise_ahead(["gpu-0"])
    real_cluster.wait_for("the fence raised ahead", lambda: fenced(real_cluster, "gpu-0"), timeout=30)
    real_cluster.api.put(ordinary("ordinary"))
    real_cluster.wait_for("kube-scheduler to refuse it for the fence",
                          lambda: refused_for_the_fence(real_cluster, "ordinary"), timeout=30)
    task = create_task(api, master_task("0.26.2", slots_per_trial=4))
    (group,) = master_groups([master_pod(p) for p in real_cluster.api.items("pods") if p["metadata"]["name"] in
                              task.names])
    real_cluster.wait_for("the fence raised ahead to have settled", lambda: fence.settled(["gpu-0"]), timeout=30)
    fence.raise_on(["gpu-0"])  # up for longer than the settle already: no wait
    assert waits == []
    placement = [(p.name, "gpu-0") for p in group.pending]
    assert fence.still_fits([(group.id, placement, {p.name: dict(p.pod.requests) for p in group.pending})]) == set()
    result = Binder(api, EventRecorder(api, "test")).bind(group, placement)
    fence.finish()
    assert result.failure == "" and fenced(real_cluster, "gpu-0")  # lingering for the next gang
    due = fence.next_due()
    assert due is not None
    real_cluster.wait_for("the linger to pass", lambda: fence.monotonic() >= due, timeout=30)
    fence.lower_due()
    assert not fenced(real_cluster, "gpu-0") and fence.next_due() is None and fence.problems == []
    assert not real_cluster.api.get("pods", "ordinary")["spec"].get("nodeName")  # never both on the node


def test_a_lingering_fence_removed_by_someone_else_is_not_trusted(real_cluster):
    real_cluster.api.put(node("gpu-0", gpus=4))
    api = real_cluster.connect("default")
    task = create_task(api, master_task("0.26.2", slots_per_trial=4))
    (group,) = master_groups([master_pod(p) for p in real_cluster.api.items("pods") if p["metadata"]["name"] in
                              task.names])
    fence = Fence(api, linger=30.0, settle=0.0, clock=frozen_clock())
    fence.raise_on(["gpu-0"])
    fence.finish()  # lingers
    # an admin (`kubectl taint nodes gpu-0 det-k8s.io/binding-`) removes the taint meanwhile
    real_cluster.api.update("nodes", "gpu-0", {"spec": {"taints": None}}, namespace=None)
    assert not fenced(real_cluster, "gpu-0")
    fence.raise_on(["gpu-0"])  # believed up: no write, no wait
    placement = [(p.name, "gpu-0") for p in group.pending]
    assert fence.still_fits([(group.id, placement, {p.name: dict(p.pod.requests) for p in group.pending})]) == {group.id}
    fence.lower()


def test_a_fence_left_by_a_process_that_died_is_removed_by_the_next_pass(real_cluster):
    from det_k8s.live.scheduler import LiveScheduler
    from det_k8s.scheduling.model import Policy

    real_cluster.api.put(node("gpu-0", gpus=4))
    real_cluster.api.update("nodes", "gpu-0", {"spec": {"taints": [{"key": KEY, "value": "1000", "effect": "NoSchedule"}]}},
                            None)
    task = create_task(real_cluster.connect(), master_task("0.26.2", slots_per_trial=4))
    report = LiveScheduler(real_cluster.connect(), "default", Policy(), "t", serve="coscheduler").run_pass()
    assert "removed a binding taint left on node gpu-0 by a det-k8s that stopped" in report.problems
    assert all(p["spec"].get("nodeName") == "gpu-0" for p in real_cluster.api.items("pods")
               if p["metadata"]["name"] in task.names)
    assert not fenced(real_cluster, "gpu-0")  # (the node lifecycle controller's own taints are not det-k8s's)


def test_a_node_checked_under_a_settled_fence_is_read_again_once_the_watch_shows_the_taint_gone(real_cluster):
    """With the loop's watch (`Fence.confirms`), a node read once our taint had settled is not read again for the next
    gang there; but once the watch shows the taint removed (an admin's `kubectl taint ... det-k8s.io/binding-`),
    kube-scheduler may have placed a pod there: the node is read again and the gang waits."""
    from det_k8s.kube.watch import ClusterView

    real_cluster.api.put(node("gpu-0", gpus=8))
    api = real_cluster.connect("default")
    view = ClusterView(api.clone(), "coscheduler").start()
    try:
        assert view.wait_synced()
        fence = Fence(api, settle=0.0, linger=60.0, confirms=view.confirms, clock=frozen_clock())
        tasks = [create_task(api, master_task("0.26.2", experiment=n, slots_per_trial=4, max_slots_per_pod=2))
                 for n in (1, 2)]
        first, second = (master_groups([master_pod(p) for p in real_cluster.api.items("pods")
                                        if p["metadata"]["name"] in task.names])[0] for task in tasks)
        fence.raise_on(["gpu-0"])
        assert fence.still_fits([(first.id, [(p.name, "gpu-0") for p in first.pending],
                                  {p.name: dict(p.pod.requests) for p in first.pending})]) == set()
        stamp = _value(real_cluster, "gpu-0")
        real_cluster.wait_for("the watch to show our taint",
                              lambda: any(n.name == "gpu-0" and n.fence == stamp for n in view.state().snapshot.nodes),
                              timeout=30)
        real_cluster.api.update("nodes", "gpu-0", {"spec": {"taints": None}}, namespace=None)  # the admin
        real_cluster.wait_for("the watch to show it gone",
                              lambda: any(n.name == "gpu-0" and not n.fence for n in view.state().snapshot.nodes),
                              timeout=30)
        fence.raise_on(["gpu-0"])  # believed up: no write
        assert fence.still_fits([(second.id, [(p.name, "gpu-0") for p in second.pending],
                                  {p.name: dict(p.pod.requests) for p in second.pending})]) == {second.id}
        fence.lower()
    finally:
        view.stop()


def _value(real_cluster, name: str) -> str:
    return next(str(t["value"]) for t in real_cluster.api.get("nodes", name, None)["spec"].get("taints") or ()
                if t["key"] == KEY)
