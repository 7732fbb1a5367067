#!/usr/bin/env python3
"""GPUs placed by one scheduling pass vs an exact optimum (HiGHS MIP) on random small instances.

    .venv/bin/pip install -e '.[bench]' && .venv/bin/python scripts/measure_quality.py [--instances 500]

The optimum places whole groups only, on eligible free capacity, ignoring priority and order;
one pass follows the policy (priority, fair share, and by default the starvation guard, which
deliberately leaves reserved capacity idle). Prints the mean ratio with and without reservations.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import highspy  # noqa: E402

from det_k8s.cluster.model import GPU, PODS, Node, Pod, Snapshot  # noqa: E402
from det_k8s.scheduling.model import PodGroup, PodRequest, Policy  # noqa: E402
from det_k8s.scheduling.plan import schedule  # noqa: E402


def instance(rng: random.Random) -> tuple[Snapshot, list[PodGroup]]:
    max_per_pod = rng.choice([4, 8])
    nodes, pods = [], []
    for i in range(rng.randint(2, 6)):
        gpus = rng.choice([max_per_pod, 8]) if max_per_pod == 4 else 8
        nodes.append(Node(f"n{i}", {GPU: gpus * 1000, "cpu": 64000, PODS: 110000}))
        used = rng.choice([0, 0, 1, 2, 4, gpus])
        if used:
            pods.append(Pod(f"busy{i}", "default", f"n{i}", "Running", {GPU: used * 1000}))
    queue = []
    for k in range(rng.randint(2, 8)):
        slots = rng.choice([1, 2, 4, 8, 8, 16])
        size, per = (1, slots) if slots <= max_per_pod else (slots // max_per_pod, max_per_pod)
        queue.append(
            PodGroup(
                f"g{k}",
                f"g{k}",
                rng.choice("ab"),
                rng.choice([40, 50, 60]),
                "",
                k,
                tuple(PodRequest(f"g{k}-{r}", r, {GPU: per * 1000}) for r in range(size)),
                slots,
            )
        )
    return Snapshot(tuple(nodes), tuple(pods)), queue


def optimum(cluster: Snapshot, queue: list[PodGroup]) -> float:
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    free = {n.name: (n.allocatable[GPU] - cluster.used[n.name].get(GPU, 0)) // 1000 for n in cluster.nodes}
    x = {g.id: h.addIntegral(lb=0, ub=1) for g in queue}
    y = {(g.id, n): h.addIntegral(lb=0, ub=g.size) for g in queue for n in free}
    for g in queue:
        h.addConstr(sum(y[(g.id, n)] for n in free) == g.size * x[g.id])
    for n, gpus in free.items():
        h.addConstr(sum(y[(g.id, n)] * (g.pods[0].requests[GPU] // 1000) for g in queue) <= max(gpus, 0))
    h.maximize(sum(x[g.id] * (g.total_request[GPU] // 1000) for g in queue))
    return float(h.getInfo().objective_function_value)


def placed(cluster: Snapshot, queue: list[PodGroup], policy: Policy) -> int:
    plan = schedule(cluster, queue, policy)
    return sum(g.total_request[GPU] // 1000 for g in queue if g.id in plan.placements)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--instances", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    ratios: dict[str, list[float]] = {"default policy": [], "reservations off": []}
    for _ in range(args.instances):
        cluster, queue = instance(rng)
        best = optimum(cluster, queue)
        if best <= 0:
            continue
        ratios["default policy"].append(placed(cluster, queue, Policy()) / best)
        ratios["reservations off"].append(placed(cluster, queue, Policy(reservations=False)) / best)
    for name, values in ratios.items():
        worst = min(values)
        print(
            f"{name:17}: mean {sum(values) / len(values):.4f} of the optimum over {len(values)} instances "
            f"(worst {worst:.2f}; {sum(v < 1 for v in values)} below optimum)"
        )


if __name__ == "__main__":
    main()
