"""What a binding of the master's pods interrupted at any point leaves, repaired the same way by every det-k8s entry
point that serves them next (`scheduler run --once`, the loop's pass, a pass with `serve`); `experiment create`
plans them read-only and `doctor` only reports (DEVELOPERS.md, "A live pass is a reconcile")."""

from __future__ import annotations

import time

import pytest

from det_k8s.kube.kinds import PODS
from det_k8s.live.fence import KEY
from det_k8s.live.lease import LEASE_NAME
from det_k8s.live.scheduler import LiveScheduler
from det_k8s.scheduling.model import Policy
from tests.live.test_intents import _loop_pass
from tests.support.k8s_emulator import node
from tests.support.master_pods import create_task, master_task

ON_REAL_CLUSTER_TOO = True


def _pass(cluster, run_cli) -> None:
    LiveScheduler(cluster.connect(), "default", Policy(), "successor", lease_wait=0, serve="coscheduler").run_pass()


def _scheduler_once(cluster, run_cli) -> None:
    result = run_cli("scheduler", "run", "--once", "--scheduler-name", "coscheduler")
    assert result.code == 0, result.err


SUCCESSORS = [_pass, _scheduler_once, _loop_pass]


def bind(cluster, name: str, node_name: str) -> None:
    uid = cluster.api.get("pods", name)["metadata"]["uid"]
    cluster.connect().create_subresource(PODS, name, "binding", {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "uid": uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}})


def trial(cluster):
    """Two 4-GPU nodes and a 0.26.2 trial of two 4-GPU pods the master created."""
    for i in range(2):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    return create_task(cluster.connect(), master_task("0.26.2", slots_per_trial=8),
                       job_controller=getattr(cluster, "real", False))


def placement(cluster, task) -> dict[str, str | None]:
    pods = {p["metadata"]["name"]: p for p in cluster.api.items("pods")}
    return {name: pods[name]["spec"].get("nodeName") if name in pods else "deleted" for name in task.names}


# Every state an interrupted binding can leave the gang in, and what the next serving pass makes of it.
def none_bound(cluster, task) -> None:
    pass


def one_bound(cluster, task) -> None:
    bind(cluster, task.names[0], "gpu-0")


def all_bound(cluster, task) -> None:
    bind(cluster, task.names[0], "gpu-0")
    bind(cluster, task.names[1], "gpu-1")


def fence_left(cluster, task) -> None:
    """Stopped between raising the fence and binding: the planned nodes still tainted, nothing bound."""
    for i in range(2):
        cluster.api.update("nodes", f"gpu-{i}", {"spec": {"taints": [
            {"key": KEY, "value": str(int(time.time()) - 120), "effect": "NoSchedule"}]}}, None)
    assert all(n["spec"]["taints"][0]["key"] == KEY for n in cluster.api.items("nodes"))


CRASHES = {
    "nothing bound": (none_bound, "bound whole"),
    "one pod of two bound": (one_bound, "repaired"),
    "all bound": (all_bound, "left running"),
    "a stale fence, nothing bound": (fence_left, "bound whole"),
}


@pytest.mark.parametrize("crash", list(CRASHES))
@pytest.mark.parametrize("successor", SUCCESSORS)
def test_an_interrupted_binding_is_finished_or_undone_the_same_way_by_every_serving_entry_point(
        cluster, run_cli, crash, successor):
    task = trial(cluster)
    leave, outcome = CRASHES[crash]
    leave(cluster, task)
    successor(cluster, run_cli)
    where = placement(cluster, task)
    deadline = time.monotonic() + 60  # a guard against hanging, not a speed assertion
    while outcome == "repaired" and where[task.names[0]] != "deleted" and time.monotonic() < deadline:
        pod = cluster.api.get("pods", task.names[0])  # on a real cluster kwok confirms the deletion a moment later
        assert pod is None or pod["metadata"].get("deletionTimestamp"), where
        time.sleep(0.05)
        where = placement(cluster, task)
    if outcome == "bound whole":
        assert sorted(where.values()) == ["gpu-0", "gpu-1"]
    elif outcome == "left running":
        assert where == {task.names[0]: "gpu-0", task.names[1]: "gpu-1"}
    else:  # the bound pod deleted so that Determined restarts the trial whole; the unbound one never bound
        assert where == {task.names[0]: "deleted", task.names[1]: None}
    assert all(not (n["spec"].get("taints") or []) for n in cluster.api.items("nodes"))  # no fence left
    assert not (cluster.api.get("leases", LEASE_NAME) or {"spec": {}})["spec"].get("holderIdentity")


def test_experiment_create_plans_the_masters_pods_read_only_and_doctor_only_reports(cluster, run_cli):
    task = trial(cluster)
    one_bound(cluster, task)
    LiveScheduler(cluster.connect(), "default", Policy(), "create", lease_wait=0).run_pass()  # as experiment create
    assert run_cli("doctor").code == 1
    assert placement(cluster, task) == {task.names[0]: "gpu-0", task.names[1]: None}  # left for a serving pass


@pytest.mark.parametrize("successor", [_scheduler_once, _loop_pass])
def test_a_partly_bound_gang_is_repaired_the_same_way_on_the_real_api_server(real_cluster, run_cli, successor):
    cluster = real_cluster
    task = trial(cluster)
    one_bound(cluster, task)
    successor(cluster, run_cli)
    where = placement(cluster, task)
    assert where[task.names[1]] is None
    assert where[task.names[0]] == "deleted" or cluster.api.get("pods", task.names[0])["metadata"].get(
        "deletionTimestamp")  # (kwok may still be confirming it stopped)
