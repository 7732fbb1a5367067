"""Benchmark 2: GPUs placed by one pass, divided by the best any whole-group placement could do.

Random small instances (`instance`, seeded): 2-6 nodes, each an 8-GPU `a100` or a 4-GPU `v100`
(equally likely); maxSlotsPerPod is 4 when there is a v100 and 8 otherwise (the GCD rule `plan`
uses). Each node is already busy with 0, 0, 1, 2, 4 or all of its GPUs (equally likely), held
by a pod det-k8s does not manage or, half the time, by a running det-k8s group (priority 30, 50
or 70). The queue holds 2-8 groups of 1, 2, 4, 8, 8 or 16 slots (as maxSlotsPerPod pods), at
priority 40, 50 or 60, from users a and b; one group in five asks for one pool by nodeSelector.
All are submitted together at the time of the pass (a fresh queue).

Two exact optima (HiGHS, integer programs over the same free GPUs, eligible nodes, whole groups):

- order-free: the most GPUs any set of whole groups can use, ignoring priority and order;
- priority-first: lexicographic, as the policy's first rule asks: the most GPUs for the highest
  priority, then, keeping that, the most for the next priority, and so on.

A third, for the default policy only, splits what remains: *own order*, lexicographic over the
exact order the pass decided the groups in (place the first if it can be placed at all, then the
second if it can be placed too, ...). That is the pass's own rules with perfect packing, so the
pass against it measures the packing heuristic alone, and it against priority-first measures the
rules within one priority (fair share, submission order).

One pass is run with the default policy (a fresh queue: the starvation guard has nothing to
hold), with the guard engaged for every group (`reserve_after=0`, what every pass did before
`reserve_after` existed, and what a pass does for groups that have waited) and with reservations
off. Partial groups and over-committed nodes are counted from each plan itself. Run as a module
(`python -m benchmarks.quality`) it prints its JSON; the harness does that with an older commit's
det_k8s first on PYTHONPATH for the before/after comparison.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from det_k8s.cluster.model import GPU, PODS, Constraints, Node, Pod, Snapshot
from det_k8s.scheduling import labels as L
from det_k8s.scheduling.model import Plan, PodGroup, PodRequest, Policy
from det_k8s.scheduling.plan import schedule

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
SUBMITTED = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")


def policies() -> dict[str, Policy]:
    """The policies compared; an older det_k8s (`--baseline`) has no reserve_after: it reserved at once."""
    if "reserve_after" not in {f.name for f in dataclasses.fields(Policy)}:
        return {"default": Policy(), "reservations_off": Policy(reservations=False)}
    return {"default": Policy(), "guard_engaged": Policy(reserve_after=0),
            "reservations_off": Policy(reservations=False)}


def one_pass(case: Instance, policy: Policy) -> Plan:
    if "now" in inspect.signature(schedule).parameters:
        return schedule(case.snapshot, case.queue, policy, now=NOW)
    return schedule(case.snapshot, case.queue, policy)  # an older det_k8s (`--baseline`)


@dataclass(frozen=True)
class Instance:
    snapshot: Snapshot
    queue: list[PodGroup]
    free: dict[str, int]  # free GPUs per node
    pools: dict[str, str]

    def eligible(self, group: PodGroup) -> list[str]:
        wanted = group.pods[0].constraints.node_selector.get("pool")
        return [name for name in self.free if wanted is None or self.pools[name] == wanted]

    def gpus(self, group: PodGroup) -> int:
        return group.total_request.get(GPU, 0) // 1000


def instance(rng: random.Random) -> Instance:
    nodes, pods, pools = [], [], {}
    for i in range(rng.randint(2, 6)):
        pool = rng.choice(["a100", "v100"])
        gpus = 8 if pool == "a100" else 4
        name = f"n{i}"
        pools[name] = pool
        nodes.append(Node(name, {GPU: gpus * 1000, "cpu": 64000, PODS: 110000}, {"pool": pool}))
        used = min(rng.choice([0, 0, 1, 2, 4, gpus]), gpus)
        if not used:
            continue
        if rng.random() < 0.5:
            pods.append(Pod(f"other-{i}", "default", name, "Running", {GPU: used * 1000}, {"app": "inference"}))
        else:
            group_id = f"run-{i}"
            labels = {L.MANAGED_BY: L.MANAGER, L.GROUP: group_id, L.USER: rng.choice("ab"),
                      L.PRIORITY: str(rng.choice([30, 50, 70])), L.RANK: "0", L.SIZE: "1"}
            pods.append(Pod(f"{group_id}-0", "research", name, "Running", {GPU: used * 1000}, labels))
    per_pod = 4 if "v100" in pools.values() else 8
    queue = []
    for k in range(rng.randint(2, 8)):
        slots = rng.choice([1, 2, 4, 8, 8, 16])
        size, per = (1, slots) if slots <= per_pod else (slots // per_pod, per_pod)
        constraints = Constraints(node_selector={"pool": rng.choice(["a100", "v100"])}) if rng.random() < 0.2 \
            else Constraints()
        queue.append(PodGroup(f"g{k}", f"g{k}", rng.choice("ab"), rng.choice([40, 50, 60]), SUBMITTED, k,
                              tuple(PodRequest(f"g{k}-{r}", r, {GPU: per * 1000}, constraints) for r in range(size)),
                              slots))
    cluster = Snapshot(tuple(nodes), tuple(pods))
    free = {n.name: max(n.allocatable[GPU] - cluster.used[n.name].get(GPU, 0), 0) // 1000 for n in nodes}
    return Instance(cluster, queue, free, pools)


def _model(case: Instance) -> tuple[Any, dict[str, Any]]:
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    chosen = {g.id: h.addBinary() for g in case.queue}
    pods: dict[tuple[str, str], Any] = {}
    for g in case.queue:
        eligible = case.eligible(g)
        for n in eligible:
            pods[(g.id, n)] = h.addIntegral(lb=0, ub=g.size)
        h.addConstr(sum((pods[(g.id, n)] for n in eligible), 0) == g.size * chosen[g.id])
    for n, gpus in case.free.items():
        used = [pods[(g.id, n)] * (g.pods[0].requests[GPU] // 1000) for g in case.queue if (g.id, n) in pods]
        if used:
            h.addConstr(sum(used, 0) <= gpus)
    return h, chosen


def _solve(h: Any, expression: Any) -> float:
    import highspy

    h.maximize(expression)
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise RuntimeError(f"HiGHS did not find the optimum: {h.modelStatusToString(h.getModelStatus())}")
    return round(h.getInfo().objective_function_value)


def optimum(case: Instance) -> int:
    """The most GPUs whole groups can use, in any order."""
    h, chosen = _model(case)
    return _solve(h, sum((chosen[g.id] * case.gpus(g) for g in case.queue), 0))


def priority_optimum(case: Instance) -> int:
    """Lexicographic: the most GPUs at the highest priority, then at the next one given that, and so on."""
    h, chosen = _model(case)
    total = 0
    for level in sorted({g.priority for g in case.queue}, reverse=True):
        expression = sum((chosen[g.id] * case.gpus(g) for g in case.queue if g.priority == level), 0)
        best = _solve(h, expression)
        h.addConstr(expression >= best)
        total += best
    return total


def order_optimum(case: Instance, order: Sequence[str]) -> int:
    """Lexicographic over `order`: each group placed if it can be, together with every earlier one placed."""
    h, chosen = _model(case)
    by_id = {g.id: g for g in case.queue}
    total = 0
    for gid in order:
        if gid not in chosen:
            continue
        best = _solve(h, chosen[gid] * 1)
        h.addConstr(chosen[gid] >= best)
        total += best * case.gpus(by_id[gid])
    return total


def check(case: Instance, plan: Plan) -> tuple[int, int, int]:
    """(GPUs placed, partial groups, over-committed nodes), read from the plan itself."""
    by_id = {g.id: g for g in case.queue}
    load: dict[str, int] = {}
    partial = placed = 0
    for gid, placement in plan.placements.items():
        group = by_id[gid]
        nodes = [node for _, node in placement]
        if len(nodes) != group.size or not all(nodes) or any(n not in case.eligible(group) for n in nodes):
            partial += 1
            continue
        for pod, node in zip(group.pods, nodes, strict=True):
            load[node] = load.get(node, 0) + pod.requests[GPU] // 1000
        placed += case.gpus(group)
    over = sum(1 for node, gpus in load.items() if gpus > case.free[node])
    return placed, partial, over


def describe(case: Instance, plan: Plan) -> dict[str, Any]:
    """An instance and what one pass did with it, for the report."""
    return {
        "nodes": [f"{n} ({case.pools[n]}, {case.free[n]} of {8 if case.pools[n] == 'a100' else 4} GPUs free)"
                  for n in case.free],
        "queue": [f"{g.id}: {case.gpus(g)} GPUs as {g.size} pod(s), priority {g.priority}"
                  + (f", pool {g.pods[0].constraints.node_selector['pool']}" if g.pods[0].constraints.node_selector
                     else "") for g in sorted(case.queue, key=lambda g: plan.order.index(g.id))],
        "placed": {gid: sorted({node for _, node in placement}) for gid, placement in plan.placements.items()},
    }


def run(config: dict[str, Any]) -> dict[str, Any]:
    rng = random.Random(config.get("seed", 1))
    compared = policies()
    ratios: dict[str, dict[str, list[float]]] = {name: {"order_free": [], "priority_first": []} for name in compared}
    partial = dict.fromkeys(compared, 0)
    over = dict.fromkeys(compared, 0)
    skipped = 0
    example: dict[str, Any] | None = None
    own_order: list[float] = []  # default policy: GPUs placed / own-order optimum
    order_vs_priority: list[float] = []  # own-order optimum / priority-first optimum
    for _ in range(config["instances"]):
        case = instance(rng)
        best, best_first = optimum(case), priority_optimum(case)
        if best == 0:
            skipped += 1  # nothing can be placed: the ratio is undefined
            continue
        for name, policy in compared.items():
            plan = one_pass(case, policy)
            placed, broken, overcommitted = check(case, plan)
            partial[name] += broken
            over[name] += overcommitted
            ratios[name]["order_free"].append(placed / best)
            ratios[name]["priority_first"].append(placed / best_first if best_first else 1.0)
            if name == "default":
                best_own = order_optimum(case, plan.order)
                own_order.append(placed / best_own if best_own else 1.0)
                order_vs_priority.append(best_own / best_first if best_first else 1.0)
            if (name == "default" and placed < best and placed == best_first
                    and (example is None or len(case.queue) + len(case.free) < example["size"])):
                example = {"size": len(case.queue) + len(case.free), "placed_gpus": placed, "optimum": best,
                           **describe(case, plan)}
    summary = {}
    for name, by_optimum in ratios.items():
        summary[name] = {
            optimum_name: {"mean": round(statistics.fmean(values), 4), "worst": round(min(values), 4),
                           "below": sum(v < 1 - 1e-9 for v in values), "above": sum(v > 1 + 1e-9 for v in values)}
            for optimum_name, values in by_optimum.items()
        }
        summary[name]["partial_groups"] = partial[name]
        summary[name]["overcommitted_nodes"] = over[name]
    summary["default"]["own_order"] = {"mean": round(statistics.fmean(own_order), 4), "worst": round(min(own_order), 4),
                                       "below": sum(v < 1 - 1e-9 for v in own_order),
                                       "above": sum(v > 1 + 1e-9 for v in own_order),
                                       "optimum_vs_priority_first": round(statistics.fmean(order_vs_priority), 4)}
    return {"instances": config["instances"], "scored": config["instances"] - skipped, "skipped_no_room": skipped,
            "seed": config.get("seed", 1), "policies": summary, "example": example}


def main() -> None:
    parser = argparse.ArgumentParser(description="placement quality (JSON on stdout)")
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(json.dumps(run({"instances": args.instances, "seed": args.seed})))


if __name__ == "__main__":
    main()
