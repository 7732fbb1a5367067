"""`det-k8s scheduler run` as the scheduler of the master's pods: the console script in its own process, the
cluster watched (listed once), a pass on each change, a relist after 410 Gone."""

from __future__ import annotations

import signal
import threading

from tests.cli.test_scheduler_loop import start, wait_until
from tests.support.k8s_emulator import node
from tests.support.master_pods import create_task, master_task


def full_lists(cluster, plural: str) -> int:
    """GETs of the whole collection (not watches, not one object, not one node's pods: the binding fence reads
    those, which the API server answers from its pods-by-node index)."""
    return sum(1 for method, path, params in cluster.api.calls
               if method == "GET" and path.endswith(f"/{plural}") and params.get("watch") not in ("true", "1")
               and not str(params.get("fieldSelector", "")).startswith("spec.nodeName="))


def bound(cluster, task) -> bool:
    pods = [p for p in cluster.api.items("pods") if p["metadata"]["labels"].get("determined") == task.allocation]
    return len(pods) == len(task.pods) and all(p["spec"].get("nodeName") for p in pods)


def test_the_loop_binds_the_masters_pods_on_arrival_from_its_watch(cluster):
    cluster.api.bookmark_interval = 0.2
    for i in range(4):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    # a long interval: a pass that binds within the guard below was started by the change, not the timer
    loop = start(["scheduler", "run", "--interval", "3600"], cluster.kubeconfig)
    lines: list[str] = []  # its stderr as it comes (messages go to stderr, as kubectl's)
    reader = threading.Thread(target=lambda: lines.extend(iter(loop.stderr.readline, "")), daemon=True)
    reader.start()
    try:
        wait_until(lambda: cluster.api.get("leases", "det-k8s-scheduler") is not None, "a first pass")
        api = cluster.connect()
        first = create_task(api, master_task("0.38.1", experiment=1, slots_per_trial=8))
        wait_until(lambda: bound(cluster, first), "the first trial to be bound")
        second = create_task(api, master_task("0.26.2", experiment=2, slots_per_trial=8))
        wait_until(lambda: bound(cluster, second), "the second trial to be bound")
        assert full_lists(cluster, "pods") == 1 and full_lists(cluster, "nodes") == 1  # then only the watch
        cluster.api.expire_watches()  # 410 Gone on the open watches: list again, go on
        wait_until(lambda: full_lists(cluster, "pods") == 2, "a relist after 410 Gone")
        third = create_task(api, master_task("0.17.15", experiment=3, slots_per_trial=8))
        waiting = [p for p in cluster.api.items("pods") if p["metadata"]["labels"].get("determined") == third.allocation]
        wait_until(lambda: all(
            any(c["type"] == "PodScheduled" and c["status"] == "False" for c in
                (cluster.api.get("pods", p["metadata"]["name"])["status"].get("conditions") or ()))
            for p in waiting), "the third trial's reason (no GPUs left)")
        # the pass writes the pods' condition, then prints: wait for the line before stopping it
        wait_until(lambda: any("waiting: det-k8s: gang exp3trial1" in line for line in lines), "the printed reason")
    finally:
        loop.send_signal(signal.SIGINT)
        assert loop.wait(60) == 130
    reader.join(10)
    out = "".join(lines)
    assert "placed, 2 pod(s) started together" in out
    assert "waiting: det-k8s: gang exp3trial1 waiting for resources" in out
    assert not cluster.api.get("leases", "det-k8s-scheduler")["spec"].get("holderIdentity")
