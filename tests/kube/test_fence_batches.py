"""The binding fence goes up batch by batch (kube/fence.py `batches`): a pass placing many gangs never taints more than
`fence_batch` nodes at once, so kube-scheduler keeps the rest and a stopped det-k8s has at most one batch to lower
(issue 24's 5,000-node run left the taint on 3,656 nodes when the whole backlog was fenced at once)."""

from __future__ import annotations

from det_k8s.kube.fence import batches
from det_k8s.kube.scheduler import LiveScheduler
from det_k8s.scheduling.model import Policy
from tests.k8s_emulator import node
from tests.master_pods import create_task, master_task


def _fenced(cluster) -> list[str]:
    return [n["metadata"]["name"] for n in cluster.api.items("nodes")
            if any(t.get("key") == "det-k8s.io/binding" for t in (n.get("spec") or {}).get("taints") or ())]


def test_batches_keep_order_and_hold_at_most_the_limit_of_distinct_nodes():
    groups = [("a", [("a-0", "n1"), ("a-1", "n2")]), ("b", [("b-0", "n2"), ("b-1", "n3")]),
              ("c", [("c-0", "n4"), ("c-1", "n5"), ("c-2", "n6"), ("c-3", "n7")]), ("d", [("d-0", "n1")])]
    cut = batches(groups, 3)
    assert [[g for g, _ in run] for run in cut] == [["a", "b"], ["c"], ["d"]]  # c alone names more than 3
    assert all(len({n for _, placement in run for _, n in placement}) <= 3 for run in cut if len(run) > 1)
    assert [g for run in batches(groups, 256) for g, _ in run] == ["a", "b", "c", "d"]  # one batch when it fits
    assert batches([], 3) == []


def test_a_pass_binding_many_gangs_fences_one_batch_at_a_time_and_binds_them_all(cluster):
    for i in range(6):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    api = cluster.connect()
    tasks = [create_task(api, master_task("0.26.2", experiment=n, slots_per_trial=8)) for n in (1, 2, 3)]  # 2 x 4 GPUs
    scheduler = LiveScheduler(api, "default", Policy(), "pass", serve="coscheduler", fence_batch=2)
    report = scheduler.run_pass()
    assert len(report.placed) == 3
    assert all(cluster.api.get("pods", name)["spec"].get("nodeName") for task in tasks for name in task.names)
    assert _fenced(cluster) == []  # every batch lowered
    # the order of writes: never more than 2 nodes tainted before a batch's bindings, and lowered before the next
    fenced: set[str] = set()
    most = 0
    for method, path, _ in cluster.api.calls:
        if method == "PATCH" and path.startswith("/api/v1/nodes/"):
            name = path.rsplit("/", 1)[-1]
            fenced ^= {name}  # raised, then lowered: each node is patched twice per batch it is in
            most = max(most, len(fenced))
    assert most == 2 and not fenced
    bindings = [i for i, (method, path, _) in enumerate(cluster.api.calls) if path.endswith("/binding")]
    patches = [i for i, (method, path, _) in enumerate(cluster.api.calls)
               if method == "PATCH" and path.startswith("/api/v1/nodes/")]
    assert len(patches) == 12  # 3 batches x 2 nodes x (raise, lower)
    assert sum(1 for i in patches if i < bindings[0]) == 2  # only the first batch was up before the first binding


def _fence_values(cluster, name: str) -> list[str]:
    return [str(t.get("value")) for t in (cluster.api.get("nodes", name).get("spec") or {}).get("taints") or ()
            if t.get("key") == "det-k8s.io/binding"]


def test_a_lingering_fence_lowered_later_never_removes_another_schedulers_fence(cluster):
    """Lingering taints are lowered outside the Lease: another det-k8s may hold it by then and have fenced the node
    for a binding of its own. Its taint is not ours to remove (the review of issue 24's lingering fence)."""
    from det_k8s.kube.fence import Fence

    cluster.api.put(node("gpu-0", gpus=4))
    now = [100.0]
    a = Fence(cluster.connect(), settle=0, linger=2.0, monotonic=lambda: now[0], clock=lambda: 1000.0)
    b = Fence(cluster.connect(), settle=0, clock=lambda: 2000.0)
    a.raise_on(["gpu-0"])
    a.finish()  # lingers until 102
    assert _fence_values(cluster, "gpu-0") == ["1000.000"]
    b.raise_on(["gpu-0"])  # the next Lease holder fences the node for its binding
    assert _fence_values(cluster, "gpu-0") == ["2000.000"]
    now[0] = 103.0
    a.lower_due()
    assert _fence_values(cluster, "gpu-0") == ["2000.000"]  # still up for b's binding
    b.lower()
    assert _fence_values(cluster, "gpu-0") == []


def test_a_fence_raised_ahead_in_the_background_never_replaces_another_schedulers_fence(cluster):
    from det_k8s.kube.fence import Fence

    cluster.api.put(node("gpu-0", gpus=4))
    b = Fence(cluster.connect(), settle=0, clock=lambda: 2000.0)
    b.raise_on(["gpu-0"])
    a = Fence(cluster.connect(), settle=0, linger=2.0, clock=lambda: 1000.0)
    a.raise_ahead(["gpu-0"])  # a loop's guess, written after it gave the Lease to b
    a.lower()  # (waits for the background write first)
    assert _fence_values(cluster, "gpu-0") == ["2000.000"]
    b.lower()
    assert _fence_values(cluster, "gpu-0") == []
