"""The race between det-k8s binding the master's pods and kube-scheduler placing ordinary pods on the same node.

On the real control plane (tests/support/realkube): one free node of 4 GPUs; each round creates, at the same moment, a
Determined task pod of 4 GPUs (schedulerName coscheduler, which det-k8s serves) and an ordinary pod of 4 GPUs
(kube-scheduler's), runs det-k8s passes until the task pod is bound or waits, lets kube-scheduler finish, and
counts the rounds where both pods were bound to the node: an over-commit (a real kubelet then refuses one).

    python -m benchmarks.race [--rounds N]    # prints one line per 25 rounds and the total
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from tests.support.realkube.cluster import ControlPlane, fake_node
from tests.support.realkube.components import build_all


def ordinary_pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {
                "requests": {"nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": "4"}}}]}}


class _Rounds:
    """What the rounds found, said every 25 rounds, and the result line of a mode."""

    def __init__(self, say: Any, spread: float, fence: bool) -> None:
        self.say, self.spread, self.fence = say, spread, fence
        self.overcommits = self.det_wins = self.kube_wins = 0
        self.passes: list[float] = []

    def count(self, done: int, *, overcommit: bool, kube_first: bool, det_first: bool) -> None:
        if overcommit:
            self.overcommits += 1
        elif kube_first:
            self.kube_wins += 1
        elif det_first:
            self.det_wins += 1
        if done % 25 == 0:
            self.say(f"  {done} rounds: {self.overcommits} over-committed, det-k8s first {self.det_wins}, "
                     f"kube-scheduler first {self.kube_wins}")

    def result(self, rounds: int, **more: Any) -> dict[str, Any]:
        passes = sorted(self.passes)
        return {"rounds": rounds, "overcommits": self.overcommits, "det_k8s_first": self.det_wins,
                "kube_scheduler_first": self.kube_wins, "pass_p50_ms": round(1000 * passes[len(passes) // 2]),
                "spread_ms": round(1000 * self.spread), "fence": self.fence, **more}


def _node(plane: ControlPlane, name: str, gpus: int) -> None:
    plane.apply(fake_node(name, gpus=gpus))
    plane.wait_for(f"{name} ready", lambda: not (plane.request("GET", f"/api/v1/nodes/{name}")[1]["spec"].get("taints")))


def _arrive_later(plane: ControlPlane, name: str, wait: float) -> threading.Thread:
    """An ordinary pod created `wait` seconds from now (started)."""
    def arrive() -> None:
        time.sleep(wait)
        plane.request("POST", "/api/v1/namespaces/default/pods", ordinary_pod(name))
    thread = threading.Thread(target=arrive)
    thread.start()
    return thread


def _clear(plane: ControlPlane, pods: list[dict[str, Any]]) -> None:
    for p in pods:
        plane.request("DELETE", f"/api/v1/namespaces/default/pods/{p['metadata']['name']}", {"gracePeriodSeconds": 0})
    plane.wait_for("pods gone", lambda: not plane.request("GET", "/api/v1/namespaces/default/pods")[1]["items"])


def run(plane: ControlPlane, rounds: int, say: Any = print, *, spread: float = 0.4, seed: int = 1,
        fence: bool = True) -> dict[str, Any]:
    from det_k8s.kube.api import KubeApi
    from det_k8s.live.scheduler import LiveScheduler
    from det_k8s.scheduling.model import Policy
    from tests.support.master_pods import create_task, master_task

    _node(plane, "race-0", 4)
    api = KubeApi.connect(kubeconfig=str(plane.admin_kubeconfig), namespace="default")
    tally = _Rounds(say, spread, fence)
    rng = random.Random(seed)
    for i in range(rounds):
        task = master_task("0.26.2", experiment=i + 1, slots_per_trial=4)
        other = f"ordinary-{uuid.uuid4().hex[:8]}"
        create_task(api, task)
        started = time.monotonic()
        t = _arrive_later(plane, other, rng.uniform(0, spread))  # at some moment of det-k8s's pass
        LiveScheduler(api.clone(), "default", Policy(), "race", serve="coscheduler", fence=fence).run_pass()
        tally.passes.append(time.monotonic() - started)
        t.join()
        time.sleep(0.3)  # kube-scheduler finishes its cycle
        _, pods = plane.request("GET", "/api/v1/namespaces/default/pods")
        on_node = [p["metadata"]["name"] for p in pods["items"] if p["spec"].get("nodeName") == "race-0"]
        tally.count(i + 1, overcommit=len(on_node) > 1, kube_first=on_node == [other], det_first=bool(on_node))
        _clear(plane, pods["items"])
    return tally.result(rounds)


def run_loop(plane: ControlPlane, rounds: int, say: Any = print, *, spread: float = 0.4, seed: int = 1,
             fence: bool = True) -> dict[str, Any]:
    """The loop's fence (`scheduler run`'s fast path, issue 24): a node of 8 GPUs on which a first gang of 4 GPUs was
    just bound by a fast pass, its taint lingering and the node's pods read under it; a second gang of 4 GPUs and an
    ordinary pod of 4 GPUs then arrive (the ordinary pod at a random moment within `spread` of the second gang), and
    the second gang is bound by the next fast pass, whose check of the node is the watch's. An over-commit: both."""
    from det_k8s.kube.api import KubeApi
    from det_k8s.kube.watch import ClusterView
    from det_k8s.live.fence import LINGER
    from det_k8s.live.scheduler import LiveScheduler
    from det_k8s.scheduling.model import Policy
    from tests.support.master_pods import create_task, master_task

    _node(plane, "race-8", 8)
    api = KubeApi.connect(kubeconfig=str(plane.admin_kubeconfig), namespace="default")
    tally = _Rounds(say, spread, fence)
    rng = random.Random(seed)
    for i in range(rounds):
        view = ClusterView(api.clone(), "coscheduler", queue_namespace="default").start()
        try:
            assert view.wait_synced()
            loop = LiveScheduler(api.clone(), "default", Policy(), "race-loop", serve="coscheduler", view=view,
                                 fence=fence, linger=LINGER)
            loop.run_pass()  # the loop's first pass, a full one
            first = create_task(api, master_task("0.26.2", experiment=2 * i + 1, slots_per_trial=4))
            plane.wait_for("the first gang seen", lambda v=view: len(v.served()) == 1)
            assert loop.run_pass(fast=True).placed, "the first gang was not bound"
            second = master_task("0.26.2", experiment=2 * i + 2, slots_per_trial=4)
            other = f"ordinary-{uuid.uuid4().hex[:8]}"
            started = time.monotonic()
            t = _arrive_later(plane, other, rng.uniform(0, spread))
            create_task(api, second)
            plane.wait_for("the second gang seen", lambda v=view: len(v.served()) == 2)
            loop.run_pass(fast=loop.can_go_fast())
            tally.passes.append(time.monotonic() - started)
            t.join()
            time.sleep(0.3)  # kube-scheduler finishes its cycle
            _, pods = plane.request("GET", "/api/v1/namespaces/default/pods")
            on_node = {p["metadata"]["name"] for p in pods["items"] if p["spec"].get("nodeName") == "race-8"}
            mine = set(second.names) & on_node
            tally.count(i + 1, overcommit=bool(mine) and other in on_node, kube_first=other in on_node,
                        det_first=bool(mine))
            assert set(first.names) <= on_node
            loop.lower_fences(everything=True)
        finally:
            view.stop()
        _clear(plane, pods["items"])
    return tally.result(rounds, mode="loop")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--spread", type=float, default=0.4, help="seconds over which the ordinary pod may arrive")
    parser.add_argument("--output", default="benchmarks/RACE.md", help="where the results go (Markdown)")
    parser.add_argument("--loop", action="store_true",
                        help="the loop's fast path instead: a second gang beside a first on a node fenced since")
    args = parser.parse_args(argv)
    results = []
    with ControlPlane(build_all()) as plane:
        for fence in (False, True):  # side by side in one run, on the same control plane
            print(f"fence {'on' if fence else 'off'}:", file=sys.stderr, flush=True)
            results.append((run_loop if args.loop else run)(
                plane, args.rounds, lambda s: print(s, file=sys.stderr, flush=True), spread=args.spread, fence=fence))
    for result in results:
        print(result)
    write_results(results, plane.binaries, args.output)
    return 0


def write_results(results: list[dict[str, Any]], binaries: Any, path: str) -> None:
    """The figures, with the machine, the date and every component's version, as Markdown."""
    from benchmarks.machine import describe

    machine = describe()
    lines = ["# The binding race: det-k8s and kube-scheduler on one free node (`python -m benchmarks.race`)", "",
             f"Run {machine['date']} at {machine['commit']} on {machine['cpu']} ({machine['cores']} cores, "
             f"{machine['memory_gib']} GiB), {machine['python']}, load at start {machine['load_at_start']}.",
             f"Kubernetes {binaries.kube_version} (kube-apiserver, kube-scheduler, kube-controller-manager built from "
             f"k8s.io/kubernetes), etcd {binaries.etcd_version}, kwok {binaries.kwok_version}.", "",
             "Each round: a Determined 0.26.2 task pod (4 GPUs, schedulerName coscheduler, bound by det-k8s) and an "
             "ordinary pod (4 GPUs, placed by kube-scheduler) for one free 4-GPU node; the ordinary pod arrives at a "
             f"random moment within {results[0]['spread_ms']} ms of the start of det-k8s's pass. An over-commit is a "
             "round where both were bound to the node (a real kubelet then refuses one).", "",
             "| binding fence | rounds | over-committed | det-k8s bound first | kube-scheduler bound first | "
             "pass p50 |", "|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {'on' if r['fence'] else 'off'} | {r['rounds']} | {r['overcommits']} | {r['det_k8s_first']} "
                     f"| {r['kube_scheduler_first']} | {r['pass_p50_ms']} ms |")
    Path(path).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
