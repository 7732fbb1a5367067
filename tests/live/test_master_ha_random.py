"""30 randomized rounds of the master's task pods arriving and finishing, scheduled by two det-k8s loops at once.

Two loops, each with its own watch-fed view and its own Lease identity (two `scheduler run` processes for
high availability), pass whenever their view changes; the Lease lets one of them bind at a time, and the
fence it leaves makes the other's view catch up first. Rounds add trials of every supported master version
(random sizes and priorities), finish some running ones, kill some (their pods vanish, as when the master
stops a task), and let the master honour preemption marks. After each round, once both loops have nothing
left to do: no node holds more GPUs than it has (also checked at every single binding, by the emulator), no
group is partly bound, no binding ever failed (a loop planning from a stale view would meet pods the other
bound), and every pod still waiting carries det-k8s's reason. One loop's watches lag behind writes, so if it
took the Lease without catching up with the fence it would plan on a stale view.

Emulator-only: it delays watches per client and checks every single binding for overcommit, which only the emulator
can do (the real plane's Lease and fence are proved in tests/live/test_lease.py and test_fence_batches.py).
"""

from __future__ import annotations

import random
import threading
import time

from det_k8s.kube.watch import ClusterView
from det_k8s.live.lease import LeaseHeld
from det_k8s.live.scheduler import LiveScheduler
from det_k8s.scheduling.model import Policy
from tests.support.k8s_emulator import node
from tests.support.master_pods import VERSIONS, create_task, honour_preemption, master_task

ROUNDS = 30


class Loop(threading.Thread):
    """What `det-k8s scheduler run` does, in a thread: a pass on every change of its own view."""

    def __init__(self, cluster, name: str, kubeconfig=None) -> None:
        super().__init__(name=name, daemon=True)
        from det_k8s.kube.api import KubeApi

        api = KubeApi.connect(kubeconfig=str(kubeconfig or cluster.kubeconfig))
        self.view = ClusterView(api.clone(), "coscheduler", queue_namespace="default").start()
        self.scheduler = LiveScheduler(api, "default", Policy(preemption=True, reserve_after=0), name, lease_wait=0,
                                       serve="coscheduler", view=self.view, renew_every=10.0)
        self.errors: list[BaseException] = []
        self.passes = 0
        self.done = threading.Event()

    def run(self) -> None:
        self.view.wait_synced()
        while not self.done.is_set():
            try:
                self.scheduler.run_pass()
                self.passes += 1
            except LeaseHeld:
                pass
            except Exception as exc:  # collected for the assertion at the end
                self.errors.append(exc)
            self.view.wait_for_change(0.05, debounce=0.02, max_delay=0.2)  # often: a timer, too

    def stop(self) -> None:
        self.done.set()
        self.view.stop()


def served(cluster):
    return [p for p in cluster.api.items("pods") if p["spec"].get("schedulerName") == "coscheduler"
            and p["status"].get("phase") not in ("Succeeded", "Failed")]


def allocations(cluster) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for pod in served(cluster):
        found.setdefault(pod["metadata"]["labels"]["determined"], []).append(pod)
    return found


def has_reason(pod) -> bool:
    return any(c["type"] == "PodScheduled" and c["status"] == "False" and c.get("message", "").startswith("det-k8s:")
               for c in pod["status"].get("conditions") or ())


def settled(cluster) -> bool:
    """Every served pod bound or carrying its reason; no allocation partly bound."""
    for pods in allocations(cluster).values():
        bound = [p for p in pods if p["spec"].get("nodeName")]
        if bound and len(bound) < len(pods):
            return False
        if not bound and not all(has_reason(p) for p in pods):
            return False
    return True


def node_use(cluster) -> dict[str, int]:
    used: dict[str, int] = {}
    for pod in cluster.api.items("pods"):
        where = pod["spec"].get("nodeName")
        if where and pod["status"].get("phase") not in ("Succeeded", "Failed"):
            for container in pod["spec"]["containers"]:
                asked = int(container.get("resources", {}).get("requests", {}).get("nvidia.com/gpu", 0))
                used[where] = used.get(where, 0) + asked
    return used


def test_thirty_random_rounds_with_two_schedulers_never_overcommit_a_node(cluster, tmp_path):
    cluster.api.bookmark_interval = 0.2
    cluster.api.observe_overcommits = True
    # watches lag behind writes (a loaded API server), the second loop's more (a slow link): when it takes the
    # Lease right after the first loop bound pods, only the fence keeps it from planning on a stale view
    cluster.api.watch_delay = 0.3
    cluster.api.watch_delays["slow-link"] = 0.7
    slow = cluster.running.write_kubeconfig(tmp_path / "slow-kubeconfig", token="slow-link")
    capacity = {}
    for i in range(6):
        gpus = 8 if i < 2 else 4
        cluster.api.put(node(f"gpu-{i}", gpus=gpus))
        capacity[f"gpu-{i}"] = gpus
    loops = [Loop(cluster, "ha-a"), Loop(cluster, "ha-b", slow)]
    for loop in loops:
        loop.start()
    rng = random.Random(11)
    api = cluster.connect()
    experiment = 0
    try:
        for round_ in range(ROUNDS):
            for _ in range(rng.randint(0, 3)):  # arrivals
                experiment += 1
                create_task(api, master_task(rng.choice(VERSIONS), experiment=experiment, trial=1,
                                             slots_per_trial=rng.choice([1, 2, 4, 4, 8, 8, 12, 16]),
                                             max_slots_per_pod=4, priority=rng.choice([20, 50, 50, 80])))
            for allocation, pods in allocations(cluster).items():  # completions and kills of running trials
                if all(p["spec"].get("nodeName") for p in pods) and rng.random() < 0.3:
                    for pod in pods:
                        if rng.random() < 0.5:
                            cluster.api.update("pods", pod["metadata"]["name"], {"status": {"phase": "Succeeded"}})
                        else:
                            cluster.api.remove("pods", pod["metadata"]["name"])
                    del allocation
            honour_preemption(cluster.api)  # the master checkpoints and stops what det-k8s marked
            deadline = time.monotonic() + 60  # a guard against hanging, not a speed assertion
            while not settled(cluster):
                assert time.monotonic() < deadline, f"round {round_}: no fixed point"
                honour_preemption(cluster.api)
                time.sleep(0.05)
            use = node_use(cluster)
            assert all(use.get(name, 0) <= gpus for name, gpus in capacity.items()), (round_, use)
            assert cluster.api.overcommits == [], round_
            # a loop binding from a stale view would meet pods the other one bound (409): none may have
            assert [e["message"] for e in cluster.api.items("events") if e["type"] == "Warning"] == [], round_
    finally:
        for loop in loops:
            loop.stop()
        for loop in loops:
            loop.join(10)
    assert [e for loop in loops for e in loop.errors] == []
    assert all(loop.passes for loop in loops)  # both really scheduled, taking turns under the Lease
    assert len({holder for holder in (loop.scheduler.holder for loop in loops)}) == 2
    assert cluster.api.bindings  # and something was bound
