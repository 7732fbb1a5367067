"""Benchmark 9: team queues' cost, one pass with 50 queues in a three-level tree against the same pass without
queues; and Kueue's and Volcano's documented scenarios (`queue_scenarios.py`).

`python -m benchmarks.queues [--nodes 5000] [--pods 30000] [--groups 1000 10000] [--rounds 7]` prints JSON.

The cluster is benchmark 1's (benchmarks/generate.py: 5,000 nodes, 30,000 pods, det-k8s groups of the six users
holding about 70% of the GPUs in namespace `research`), the queued groups benchmark 1's too (`build_queue`). The
tree: 2 organisations, 8 departments, 40 teams (50 queues); the first team of six departments holds one user each
(the running and the queued groups of that user), the others hold namespaces and labels no group has. Guarantees
and limits are set so that every path is taken: teams below their guarantee, teams above it that borrow, limits
that hold groups back, and four idle teams with a lendingLimit that keep part of their guarantee from borrowers.

Two trees are timed: the binding one above (its limits and lending limits hold groups back, which also spares the
pass their placement attempts), and an open one with the same guarantees whose limits hold nothing back (the pass
does all the work it does without queues, plus the queues' bookkeeping, ordering and reclaim attempts): the goal
is judged on the larger ratio. Each round times the three variants in this process, one after the other (each
first in turn), with the cycle collector paused as `plan` pauses it. A ratio is of the medians of the pass's CPU
time (`time.process_time`): other processes share this 2-core machine, and the wall time of one pass swings by 2x
with their load (interleaving spreads that load, but it still widens every median); the wall-time ratios are kept
beside them.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from . import generate, machine
from .scheduling import NOW, PODS_PER_NODE, USERS, build_queue, site_settings

GPU = "nvidia.com/gpu"


def tree(total_gpus: int, binding: bool = True) -> dict[str, Any]:
    """50 queues, three levels; amounts are shares of the cluster's GPUs. Not `binding`: the same guarantees, but
    no limit or lendingLimit holds any group back (queues then change little but the order and reclaim: what is
    left is their bookkeeping, the pass's work otherwise being the same as without queues)."""
    def share(fraction: float) -> int:
        return int(total_gpus * fraction)

    def cap(fraction: float) -> int:
        return share(fraction) if binding else total_gpus

    orgs = []
    team = 0
    for org in range(2):
        departments = []
        for department in range(4):
            teams = []
            for _ in range(5):
                item: dict[str, Any] = {"name": f"team-{team:02d}"}
                user = team // 5
                if team % 5 == 0 and user < len(USERS):  # a user's team, the first of six departments: guarantees
                    item["members"] = {"users": [USERS[user]]}  # below and above what they run
                    item["guarantee"] = {GPU: share(0.06 + 0.02 * user)}
                    item["limit"] = {GPU: cap(0.2)}
                else:  # idle teams: some keep part of their guarantee from borrowers
                    item["members"] = {"namespaces": [f"idle-{team}"], "labels": {"team": f"t{team}"}}
                    item["guarantee"] = {GPU: share(0.002)}
                    if team % 10 == 9 and binding:
                        item["lendingLimit"] = {GPU: share(0.001)}
                teams.append(item)
                team += 1
            departments.append({"name": f"dept-{org}-{department}", "limit": {GPU: cap(0.25)},
                                "guarantee": {GPU: sum(t["guarantee"][GPU] for t in teams)}, "children": teams})
        orgs.append({"name": f"org-{org}", "weight": 1 + org,
                     "guarantee": {GPU: sum(d["guarantee"][GPU] for d in departments)}, "children": departments})
    return {"version": 1, "queues": orgs, "defaultQueue": "team-39"}


def measure(data: Path, nodes: int, pods: int, groups_list: list[int], rounds: int) -> dict[str, Any]:
    from det_k8s.cluster.read import snapshot_from_objects
    from det_k8s.live.policy import checked_queues
    from det_k8s.scheduling.labels import running_groups
    from det_k8s.scheduling.model import Policy
    from det_k8s.scheduling.plan import schedule

    path = generate.write_snapshot(data, nodes, pods)
    with path.open(encoding="utf-8") as handle:
        snapshot = snapshot_from_objects([json.load(handle)])
    total = sum(n.allocatable.get(GPU, 0) for n in snapshot.nodes) // 1000
    queues = checked_queues(tree(total), "benchmark")
    open_queues = checked_queues(tree(total, binding=False), "benchmark")
    running = running_groups(snapshot.pods)
    settings = site_settings(data)
    rows = []
    for count in groups_list:
        queue = build_queue(count, settings, seed=count)
        policies = {"without": Policy(), "with": Policy(queues=queues), "with_open": Policy(queues=open_queues)}
        samples: dict[str, list[float]] = {name: [] for name in policies}  # wall time
        cpu: dict[str, list[float]] = {name: [] for name in policies}  # this process's CPU time
        outcome: dict[str, dict[str, int]] = {}
        for round_ in range(rounds + 1):  # the first round warms up
            order = list(policies)[round_ % 3:] + list(policies)[:round_ % 3]  # each goes first in turn
            for name in order:
                gc.collect()
                gc.disable()
                try:
                    start, start_cpu = time.perf_counter(), time.process_time()
                    plan = schedule(snapshot, queue, policies[name], running, now=NOW)
                    elapsed, used = time.perf_counter() - start, time.process_time() - start_cpu
                finally:
                    gc.enable()
                if round_:
                    samples[name].append(elapsed)
                    cpu[name].append(used)
                outcome[name] = {"placed": len(plan.placements), "waiting": len(plan.waiting),
                                 "queue_limit": sum(1 for r in plan.waiting.values() if r.queue is not None),
                                 "reclaimed": len(plan.reclaimed), "victims": len(plan.victims)}
        medians = {name: statistics.median(values) for name, values in samples.items()}
        cpu_medians = {name: statistics.median(values) for name, values in cpu.items()}
        rows.append({"nodes": nodes, "pods": len(snapshot.pods), "groups": count, "queues": len(queues.queues),
                     "rounds": rounds, **{f"median_{name}": round(value, 4) for name, value in medians.items()},
                     **{f"cpu_{name}": round(value, 4) for name, value in cpu_medians.items()},
                     "ratio": round(cpu_medians["with"] / cpu_medians["without"], 3),
                     "ratio_open": round(cpu_medians["with_open"] / cpu_medians["without"], 3),
                     "wall_ratio": round(medians["with"] / medians["without"], 3),
                     "wall_ratio_open": round(medians["with_open"] / medians["without"], 3),
                     **{f"samples_{name}": [round(s, 4) for s in values] for name, values in samples.items()},
                     "outcome": outcome})
    return {"machine": machine.describe(), "rows": rows}


def run(config: dict[str, Any]) -> dict[str, Any]:
    """For `python -m benchmarks` (section 9): the pass with and without queues, and the documented scenarios."""
    from .queue_scenarios import run_scenarios

    data = Path(config["data"])
    result = measure(data, config["nodes"], config["nodes"] * PODS_PER_NODE, config["groups"], config["rounds"])
    return {"rows": result["rows"], "scenarios": run_scenarios()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.queues", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parent / "data")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=0, help="default: 6 per node")
    parser.add_argument("--groups", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    args.data.mkdir(parents=True, exist_ok=True)
    result = measure(args.data, args.nodes, args.pods or args.nodes * PODS_PER_NODE, args.groups, args.rounds)
    result["machine"]["load_at_end"] = machine.load()
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
