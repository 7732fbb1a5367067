"""The loop's own CPU per pod event and per fast pass (issue 24), replayed from the side-by-side benchmark's state.

`python -m benchmarks.grouping [--baseline REV]`

- grouping: `master_groups` over N served pods (gangs of 4, all bound but one ready gang) when one pod changed since
  the last call, as the loop calls it on every pod event;
- fast pass: at 5,000 nodes of 8 GPUs with 300 bound gangs and one ready, what a fast pass computes before its
  bindings: the snapshot, the master's groups (`MasterPods.collect`), the running groups and the plan
  (`LiveScheduler._plan`, narrowed where it may be).

Medians of repeated calls, in this process. With `--baseline REV`, the same measurements run first in a child whose
`det_k8s` is REV's (extracted with `git archive`), so the two are compared on one machine in one run.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # (run as a file by --baseline's child: benchmarks and tests from this checkout)
    sys.path.append(str(ROOT))


def served_pods(groups: int) -> list[Any]:
    """`groups` bound gangs of 4 pods of 1 GPU (two gangs a node) and one ready gang, as the view holds them."""
    from benchmarks.sidebyside import group_objects
    from det_k8s.scheduling.master import master_pod

    found = []
    for g in range(groups + 1):
        _, pods, _ = group_objects("det-k8s", "ns", g, 4)
        for j, pod in enumerate(pods):
            pod["metadata"].update(uid=f"u{g}-{j}", resourceVersion="1", creationTimestamp="2026-11-27T00:00:00Z")
            pod["metadata"]["name"] += f"-{j}"
            if g < groups:
                pod["spec"]["nodeName"] = f"bench-{(g * 4 + j) // 8:05d}"
                pod["status"] = {"phase": "Running"}
            found.append(master_pod(pod))
    return found


def grouping_ms(groups: int, calls: int = 60) -> float:
    """Median ms of `master_groups` when one pod (a new object, as a watch event makes) changed since the last call."""
    from det_k8s.scheduling.master import State, master_groups

    served = served_pods(groups)
    master_groups(tuple(served), "coscheduler")
    times = []
    for k in range(calls):
        served[k] = dataclasses.replace(served[k], resource_version=str(k + 100))
        started = time.perf_counter()
        answer = master_groups(tuple(served), "coscheduler")
        any(g.state is State.READY for g in answer)  # (what the loop asks of it on a pod event)
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


def fast_pass_ms(nodes: int = 5000, groups: int = 300, calls: int = 20) -> tuple[float, int]:
    """Median ms of a fast pass's computing before its bindings; how many gangs it placed."""
    from det_k8s.cluster.read import node_from_object
    from det_k8s.kube.snapshot import snapshot_of
    from det_k8s.kube.watch import ClusterState
    from det_k8s.live.master_pods import MasterPods
    from det_k8s.live.scheduler import LiveScheduler, PassReport
    from det_k8s.scheduling.model import Policy
    from det_k8s.scheduling.plan import running_in
    from tests.support.realkube.cluster import fake_node

    by_name = {f"bench-{i:05d}": node_from_object(fake_node(f"bench-{i:05d}", gpus=8, cpu="64", memory="512Gi"))
               for i in range(nodes)}
    order = sorted(by_name)
    served = tuple(served_pods(groups))
    pods = tuple(p.pod for p in served)
    live = LiveScheduler(None, "default", Policy(), "bench")  # type: ignore[arg-type]  # (nothing it calls writes)
    placed, times = 0, []
    for _ in range(calls):
        started = time.perf_counter()
        state = ClusterState(snapshot_of(tuple(map(by_name.__getitem__, order)), pods, {}), served, "1")
        if "fast" in MasterPods.__dataclass_fields__:  # the kernel's observe -> decide (live/decide.py)
            from det_k8s.live.decide import Observed, decide

            master = MasterPods(None, None, "coscheduler", None, fast=True, fence=False)  # type: ignore[arg-type]
            found = master.collect(master.observe(state))
            plan = decide(Observed("default", (), {}, state.snapshot, live.policy, live.clock(), 3, found.queue,
                                   found.running, frozenset(found.groups), found.groups, fast=True)).plan
            placed = len(plan.placements) if plan is not None else 0
        else:  # (a baseline's det_k8s from before it)
            master = MasterPods(None, None, "coscheduler", None, quick=True, fence=False)  # type: ignore[arg-type]
            queue, running = master.collect(state, PassReport())
            placed = len(live._plan(state.snapshot, queue, [*running_in(state.snapshot, "default"), *running])
                         .placements)
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times), placed


def measure() -> dict[str, Any]:
    pass_ms, placed = fast_pass_ms()
    return {"grouping_ms": {str(n * 4 + 4): round(grouping_ms(n), 3) for n in (300, 3000)},
            "fast_pass_ms_5000_nodes": round(pass_ms, 2), "fast_pass_placed": placed}


def baseline(rev: str) -> dict[str, Any]:
    """The same measurements with REV's det_k8s, in a child process."""
    with tempfile.TemporaryDirectory(prefix="det-k8s-grouping-") as tmp:
        archive = Path(tmp) / "rev.tar"
        with archive.open("wb") as out:
            subprocess.run(["git", "-C", str(ROOT), "archive", rev, "det_k8s"], stdout=out, check=True, timeout=120)
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        env = {**os.environ, "PYTHONPATH": tmp}
        child = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child"], capture_output=True,
                               text=True, env=env, timeout=900, check=True)
        result: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="", help="also measure this git revision's det_k8s (e.g. e97cfc1)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure()))
        return 0
    from benchmarks.machine import describe

    report: dict[str, Any] = {"machine": describe(), "python": sys.version.split()[0],
                              "when": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}
    if args.baseline:
        print(f"measuring {args.baseline}'s det_k8s in a child process ...", file=sys.stderr, flush=True)
        report["baseline"] = {"revision": args.baseline, **baseline(args.baseline)}
    print("measuring this checkout ...", file=sys.stderr, flush=True)
    report["this"] = measure()
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
