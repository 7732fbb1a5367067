"""RESULTS.md from the harness's JSON: the machine, every figure, each goal and whether it is met.

Verdicts are computed here from the figures, never written by hand, so the report cannot claim
more than the run measured. The prose around them describes method, not outcomes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

PLAN_GOAL = 3.0
MAP_GOAL = 1.5
HELP_GOAL = 5.0
QUALITY_GOAL = 0.97
LATENCY_P50_GOAL = 1.0  # seconds from a group's last pod appearing to its last binding
LATENCY_P99_GOAL = 2.0
BIND_RATE_GOAL = 200.0  # pods bound per second, sustained
QUEUES_GOAL = 1.3  # a pass with 50 team queues against the same pass without


def _s(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _x(ratio: float) -> str:
    return f"{ratio:.2f}x"


def _met(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines + [""]


def _median(entry: dict[str, Any]) -> float:
    return float(entry["median"])


def render(results: dict[str, Any]) -> str:
    lines: list[str] = []
    machine = results["machine"]
    baseline = results.get("baseline")
    command = "python -m benchmarks" + (" --quick" if results.get("quick") else "") + (
        f" --baseline {baseline['ref']}" if baseline else "")
    lines += ["# det-k8s benchmarks: results", ""]
    if results.get("quick"):
        lines += ["> **Quick run** (tiny sizes): this checks that the harness works; the figures mean nothing.", ""]
    lines += [f"Measured on {machine['date']} with `{command}` at commit {machine['commit']}. Reproduce with",
              "`.venv/bin/pip install -e '.[bench]' && .venv/bin/python -m benchmarks` (about 10 minutes; data is",
              "generated into the git-ignored `benchmarks/data/`); `--quick` is a smoke run, `--baseline REF` adds",
              "the before/after columns. What each benchmark does exactly is in its module's docstring.", ""]
    lines += _table(["machine", ""], [
        ["CPU", f"{machine['cpu']}, {machine['cores']} cores"], ["memory", f"{machine['memory_gib']} GiB"],
        ["Python", machine["python"]], ["OS", machine["os"]],
        ["load average (1, 5, 15 min) at start / end", f"{machine['load_at_start']} / {machine.get('load_at_end')}"],
    ])
    lines += ["The machine is shared with other work, so every time is the median of several runs (commands",
              "compared with each other run interleaved, round by round); treat differences under ~10% as noise.",
              "Child processes use Python's bytecode caches, as after `pip install`.", ""]
    lines += _goals(results)
    if baseline:
        lines += _changes(results, baseline["ref"])
    if "scheduling" in results:
        lines += _scheduling(results["scheduling"], baseline)
    if "quality" in results:
        lines += _quality(results["quality"], results.get("quality_baseline"), baseline)
    if "contention" in results:
        lines += _contention(results["contention"])
    if "submission" in results:
        lines += _submission(results["submission"], machine)
    if "startup" in results:
        lines += _startup(results["startup"], baseline)
    if "occupancy" in results:
        lines += _occupancy(results["occupancy"])
    if "constraints" in results:
        lines += _constraints(results["constraints"], baseline)
    if "binding" in results:
        lines += _binding(results["binding"], machine)
    if "queues" in results:
        lines += _queues(results["queues"], machine)
    if "scheduling" in results and "submission" in results:
        lines += _anchors(results)
    return "\n".join(lines).rstrip() + "\n"


# -- goals ------------------------------------------------------------------------------------------


def plan_ratios(row: dict[str, Any]) -> dict[str, float]:
    plan = _median(row["plan"])
    return {"process": plan / _median(row["json_load_process"]), "in_process": plan / _median(row["json_load"]),
            "gc_paused": plan / _median(row["json_load_gc_paused"])}


def _goals(results: dict[str, Any]) -> list[str]:
    rows = []
    if "scheduling" in results:
        rows_by_style = {r["style"]: r for r in results["scheduling"]["plan_cli"]}
        lean = rows_by_style["lean"]
        ratios = plan_ratios(lean)
        shapes = {style: plan_ratios(row)["process"] for style, row in rows_by_style.items()}
        fresh = "; ".join(f"{_x(ratio)} ({style} objects)" for style, ratio in shapes.items())
        rows.append([f"1. whole `det-k8s plan`, {lean['nodes']:,} nodes / {lean['pods']:,} pods / "
                     f"{lean['experiments']} experiments, within {PLAN_GOAL:g}x `json.load` of the same file",
                     f"against json.load in a fresh interpreter: {fresh}. Lean objects against json.load in "
                     f"this process: {_x(ratios['in_process'])}; with the cycle collector paused (parsing alone): "
                     f"{_x(ratios['gc_paused'])}",
                     f"{_met(max(shapes.values()) <= PLAN_GOAL)} against a fresh interpreter's json.load (what "
                     f"a user compares `plan` with); {_met(ratios['gc_paused'] <= PLAN_GOAL)} against parsing "
                     "alone (lean objects)"])
    if "quality" in results:
        default = results["quality"]["policies"]["default"]
        partial = sum(p["partial_groups"] for p in results["quality"]["policies"].values())
        rows.append([f"2. GPUs placed / exact optimum, mean >= {QUALITY_GOAL}, never a partial group "
                     f"({results['quality']['scored']} instances)",
                     f"order-free optimum {default['order_free']['mean']:.3f}; priority-first optimum "
                     f"{default['priority_first']['mean']:.3f}; partial groups {partial}",
                     f"order-free {_met(default['order_free']['mean'] >= QUALITY_GOAL)}; priority-first "
                     f"{_met(default['priority_first']['mean'] >= QUALITY_GOAL)}; partial groups "
                     f"{_met(partial == 0)}"])
    if "contention" in results:
        cases = results["contention"]["documents"] + results["contention"]["traces"]
        ours = [c[k] for c in cases for k in ("det_k8s", "det_k8s_no_guard")]
        teams = [t[k] for t in results["contention"].get("teams") or [] for k in ("with_quotas", "without_quotas")]
        ours += [{"jobs_ever_partial": o["partial_groups"], "broken_plans": o["broken_plans"],
                  "deadlocked": o["deadlocked"]} for o in teams]
        partial = sum(o["jobs_ever_partial"] for o in ours) + sum(o["broken_plans"] for o in ours)
        deadlocks = sum(o["deadlocked"] for o in ours)
        theirs = sum(c["per_pod"]["deadlocked"] for c in cases)
        rows.append(["3. contention: det-k8s shows zero partial groups and zero deadlocks",
                     f"det-k8s: {partial} partial groups, {deadlocks} deadlocks in {len(cases) + len(teams)} "
                     "simulations; "
                     f"per-pod placement: deadlocked in {theirs} of them",
                     _met(partial == 0 and deadlocks == 0)])
    if "submission" in results:
        series = results["submission"]["series"]
        best = max((row for s in series for row in s["rows"]), key=lambda r: r["pods_per_second"])
        rows.append(["4. submission of a 64-pod group (no numeric goal)",
                     f"up to {best['pods_per_second']:.0f} pods/s; see section 4", "-"])
    if "startup" in results:
        heavy = sorted({m for mods in results["startup"]["heavy_sdks_imported"].values() for m in mods})
        ratios = results["startup"]["ratios"]
        missed = [r for r in ratios if not r["met"]]
        worst = max(ratios, key=lambda r: r["paired_median"] / r["goal"])
        over = ", ".join(f"`{r['command']}` {_x(r['paired_median'])}" for r in missed)
        rows.append(["5. `det-k8s --version` within 2x `kubectl version --client`, `--help` and every `COMMAND "
                     "--help` within 3x `helm version`, `validate -f examples/gpu-cluster.yaml` within 5x; no heavy "
                     "SDK imported",
                     f"{len(ratios) - len(missed)} of {len(ratios)} within their goal; closest to its goal: "
                     f"`{worst['command']}` {_x(worst['paired_median'])} `{worst['peer']}`"
                     + (f"; over: {over}" if missed else "") + f"; heavy SDKs imported: {', '.join(heavy) or 'none'}",
                     f"{_met(not missed)}; {_met(not heavy)}"])
    if "occupancy" in results:
        by_style = {r["style"]: r for r in results["occupancy"]["rows"]}
        ratios = {style: map_ratio(row) for style, row in by_style.items()}
        lean = by_style["lean"]
        rows.append([f"6. the summarised `det-k8s nodes map` of {lean['nodes']:,} nodes / {lean['pods']:,} pods within "
                     f"{MAP_GOAL:g}x `det-k8s plan` on the same snapshot",
                     "; ".join(f"{_x(ratio)} ({style} objects)" for style, ratio in ratios.items()),
                     _met(max(ratios.values()) <= MAP_GOAL)])
    if "constraints" in results:
        row = results["constraints"]
        ratios = plan_ratios(row)
        rows.append([f"7. whole `det-k8s plan` with placement constraints (affinities, spreads, PVCs on a share of pods), "
                     f"{row['nodes']:,} nodes / {row['pods']:,} pods / {row['experiments']} experiments, within "
                     f"{PLAN_GOAL:g}x `json.load` of the same file",
                     f"against json.load in a fresh interpreter: {_x(ratios['process'])}; in this process: "
                     f"{_x(ratios['in_process'])}; with the cycle collector paused (parsing alone): "
                     f"{_x(ratios['gc_paused'])}",
                     f"{_met(ratios['process'] <= PLAN_GOAL)} against a fresh interpreter's json.load; "
                     f"{_met(ratios['gc_paused'] <= PLAN_GOAL)} against parsing alone"])
    if "binding" in results:
        data = results["binding"]
        latency, throughput, requests = data["latency"], data["throughput"], data["requests"]
        p50, p99, rate = latency["p50_s"], latency["p99_s"], throughput["pods_per_second"]
        lists = requests["full_lists_of_pods_or_nodes"]
        rows.append([f"8. binding the master's pods at {data['nodes']:,} nodes / {data['pods']:,} pods: last pod to last "
                     f"binding p50 <= {LATENCY_P50_GOAL:g} s and p99 <= {LATENCY_P99_GOAL:g} s; >= {BIND_RATE_GOAL:.0f} "
                     "pods bound/s sustained; no full list in steady state",
                     f"p50 {_s(p50)}, p99 {_s(p99)} ({latency['bound']} of {latency['groups']} groups bound); "
                     f"{rate if rate is not None else '-'} pods/s; {requests['per_bound_group']} requests per bound "
                     f"group, {lists} full lists",
                     f"p50 {_met(p50 is not None and p50 <= LATENCY_P50_GOAL)}; p99 "
                     f"{_met(p99 is not None and p99 <= LATENCY_P99_GOAL)}; rate "
                     f"{_met(rate is not None and rate >= BIND_RATE_GOAL)}; no full list {_met(lists == 0)}"])
    if "queues" in results:
        data = results["queues"]
        worst = max(max(r["ratio"], r["ratio_open"]) for r in data["rows"])
        big = max(data["rows"], key=lambda r: r["groups"])
        same = sum(1 for row in data["scenarios"] if row["same"])
        rows.append([f"9. a pass with {big['queues']} team queues in a three-level tree at {big['nodes']:,} nodes / "
                     f"{big['pods']:,} pods within {QUEUES_GOAL:g}x the same pass without queues (CPU time); "
                     "Kueue's and Volcano's documented scenarios",
                     "; ".join(f"{r['groups']:,} groups: {_x(r['ratio'])} (binding tree), {_x(r['ratio_open'])} (open "
                               "tree)" for r in data["rows"])
                     + f"; {same} of {len(data['scenarios'])} documented scenarios end as documented",
                     _met(worst <= QUEUES_GOAL)])
    return ["## Goals", ""] + _table(["goal", "measured", "verdict"], rows)


def map_ratio(row: dict[str, Any]) -> float:
    return _median(row["map"]) / _median(row["plan"])


def _changes(results: dict[str, Any], ref: str) -> list[str]:
    """Before (the baseline commit) and after, for what this run measured both ways."""
    items = []
    if "startup" in results:
        timings = results["startup"]["timings"]
        bare = _median(timings["python -c pass"])
        for name in ("det-k8s --version", "det-k8s --help", "det-k8s validate -f examples/gpu-cluster.yaml"):
            before, after = _median(timings[f"{name} (baseline)"]), _median(timings[name])
            items.append(f"- `{name}`: {_s(before)} ({_x(before / bare)} python) -> {_s(after)} ({_x(after / bare)})")
    if "scheduling" in results:
        for row in results["scheduling"]["plan_cli"]:
            if "plan_baseline" in row:
                before, after = _median(row["plan_baseline"]), _median(row["plan"])
                items.append(f"- `det-k8s plan`, {row['style']} objects: {_s(before)} -> {_s(after)}")
    for row in (results.get("scheduling") or {}).get("pass_baseline") or ():
        items.append(f"- one pass, {row['nodes']:,} nodes, {row['groups']:,} queued groups (each in a child process, "
                     f"rounds interleaved): {_s(row['baseline'])} -> {_s(row['now'])} ({_x(row['now'] / row['baseline'])}): "
                     "inter-pod rules, topology domains, volumes and admission read for every pass; why-pending "
                     "with holders, in-use/reserved and the preemption hint")
    if "constraints" in results and "plan_baseline" in results["constraints"]:
        row = results["constraints"]
        before, after = _median(row["plan_baseline"]), _median(row["plan"])
        items.append(f"- `det-k8s plan` on the constrained cluster: {_s(before)} -> {_s(after)} (before, most of the "
                     "constraints were not read at all)")
    if "quality" in results and "quality_baseline" in results:
        now, then = results["quality"]["policies"], results["quality_baseline"]["policies"]
        items.append(
            f"- placement quality, default policy on a fresh queue (order-free / priority-first): "
            f"{then['default']['order_free']['mean']:.3f} / {then['default']['priority_first']['mean']:.3f} -> "
            f"{now['default']['order_free']['mean']:.3f} / {now['default']['priority_first']['mean']:.3f}. Of that, "
            f"`reserve_after` (no reservation for groups that have not waited) gives "
            f"{then['reservations_off']['order_free']['mean']:.3f} / "
            f"{then['reservations_off']['priority_first']['mean']:.3f} (what the older pass placed without reservations), "
            "repacking the rest.")
    return [f"## Before and after (at {ref} -> now)", "", *items, ""] if items else []


# -- 1 ----------------------------------------------------------------------------------------------


def _scheduling(data: dict[str, Any], baseline: dict[str, Any] | None) -> list[str]:
    lines = ["## 1. One scheduling pass, and the whole `det-k8s plan`", "",
             "Snapshots from `benchmarks/generate.py` (25% 8-GPU, 35% 4-GPU, 40% CPU-only nodes, a DaemonSet-like pod",
             "per node, running det-k8s groups on about 70% of the GPUs, finished and ordinary pods; 6 pods per",
             "node). Queues of generated experiments (1-32 slots, priorities 10-90, six users, submitted up to an",
             "hour before the pass, so the starvation guard engages as in a live pass). In-process, the cycle",
             "collector paused as `plan` pauses it.", ""]
    rows = []
    for r in data["passes"]:
        load = _median(r["json_load"])
        rows.append([f"{r['nodes']:,}", f"{r['pods']:,}", r["snapshot_mb"], _s(load), _s(_median(r["json_load_gc_paused"])),
                     _s(_median(r["build_snapshot"])), f"{r['groups']:,}", _s(_median(r["schedule"])),
                     _x(_median(r["schedule"]) / load), _x((_median(r["schedule"]) + _median(r["build_snapshot"])) / load),
                     f"{r['placed']} / {r['waiting']} / {r['reserved']}"])
    lines += _table(["nodes", "pods", "MB", "json.load", "json.load, GC paused", "build Snapshot", "queued groups",
                     "pass", "pass / json.load", "(build + pass) / json.load", "placed / waiting / reserving"], rows)
    lines += ["The whole command: the console script in a fresh process, `det-k8s plan` with 200 experiment files,",
              "`-f site.yaml -o json`, against `json.load` of the same file in a fresh interpreter of the same Python,",
              "in this process, and in this process with the cycle collector paused. `lean` objects carry only what",
              "a scheduler reads; `kubectl` objects are what `kubectl get -o json` prints (uids, owner references,",
              "defaulted fields, conditions, container statuses, node images).", ""]
    rows = []
    for r in data["plan_cli"]:
        ratios = plan_ratios(r)
        row = [r["style"], r["snapshot_mb"], _s(_median(r["plan"])), _s(_median(r["json_load_process"])),
               _x(ratios["process"]), _s(_median(r["json_load"])), _x(ratios["in_process"]),
               _s(_median(r["json_load_gc_paused"])), _x(ratios["gc_paused"])]
        if "plan_baseline" in r:
            before = _median(r["plan_baseline"])
            row.append(f"{_s(before)} ({_x(before / _median(r['json_load_process']))})")
        rows.append(row)
    header = ["objects", "MB", "det-k8s plan", "json.load, fresh interpreter", "ratio", "json.load", "ratio",
              "json.load, GC paused", "ratio"]
    if baseline:
        header.append(f"plan at {baseline['ref']} (ratio)")
    lines += _table(header, rows)
    lines += ["`json.load` in this process runs with the cycle collector on, as Python's default, in a process that",
              "already holds earlier measurements' objects, so the collector costs more there than in a fresh one.",
              ""]
    lean = next(r for r in data["plan_cli"] if r["style"] == "lean")
    phases = lean["phases"]
    total = _median(lean["plan"])
    lines += ["Where the lean command's time goes (one in-process run of the same steps; the rest is interpreter",
              "start-up, imports, Typer's argument handling and tearing the objects down at exit):", ""]
    lines += _table(["step", "time"], [[name.replace("_", " "), _s(seconds)] for name, seconds in phases.items()]
                    + [["everything else", _s(max(total - sum(phases.values()), 0.0))]])
    yaml = data["yaml"]
    lines += [f"The same {yaml['nodes']:,}-node snapshot as YAML ({yaml['yaml_mb']} MB, what `kubectl get -o yaml` "
              f"writes) takes {_s(_median(yaml['yaml']))} to read, against {_s(_median(yaml['json']))} as JSON "
              f"({_median(yaml['yaml']) / _median(yaml['json']):.0f}x): for big clusters, give `plan` a snapshot "
              "taken with `-o json`.", ""]
    return lines


# -- 7 ----------------------------------------------------------------------------------------------


def _constraints(row: dict[str, Any], baseline: dict[str, Any] | None) -> list[str]:
    ratios = plan_ratios(row)
    kinds = ", ".join(f"{count:,} {kind}" for kind, count in sorted(row["kinds"].items()))
    lines = ["## 7. `det-k8s plan` with placement constraints", "",
             "Benchmark 1's cluster with the constraints real clusters carry (`benchmarks/constraints.py`): 200",
             "deployments, of whose pods 40% keep one per node (required pod anti-affinity), 30% spread over zones",
             "(DoNotSchedule), 50% require the CPU pool, 10% mount a local volume; 20% of the running det-k8s pods",
             "pinned by node affinity and not bound yet; claims, volumes, storage classes and namespaces listed.",
             "Of the experiments, 30% keep one pod per node (anti-affinity on their own group through",
             "`matchLabelKeys`), 20% spread over zones, 30% require A100 nodes, 30% mount a shared dataset claim.",
             f"The snapshot: {kinds} ({row['snapshot_mb']} MB); {row['constrained_pods']:,} pods and "
             f"{row['constrained_experiments']} experiments carry constraints. Plan outcome: "
             + ", ".join(f"{n} {status}" for status, n in row["outcome"].items())
             + f"; {row['warnings']} warnings.", ""]
    cells = [_s(_median(row["plan"])), _s(_median(row["json_load_process"])), _x(ratios["process"]),
             _s(_median(row["json_load"])), _x(ratios["in_process"]), _s(_median(row["json_load_gc_paused"])),
             _x(ratios["gc_paused"])]
    header = ["det-k8s plan", "json.load, fresh interpreter", "ratio", "json.load", "ratio", "json.load, GC paused",
              "ratio"]
    if baseline and "plan_baseline" in row:
        before = _median(row["plan_baseline"])
        cells.append(f"{_s(before)} ({_x(before / _median(row['json_load_process']))})")
        header.append(f"plan at {baseline['ref']} (ratio)")
    lines += _table(header, [cells])
    lines += ["Where the time goes (one in-process run of the same steps):", ""]
    lines += _table(["step", "time"], [[name.replace("_", " "), _s(seconds)] for name, seconds in row["phases"].items()]
                    + [["everything else", _s(max(_median(row["plan"]) - sum(row["phases"].values()), 0.0))]])
    return lines


# -- 2 ----------------------------------------------------------------------------------------------


POLICY_NAMES = {"default": "default policy, fresh queue",
                "guard_engaged": "starvation guard engaged for every group (reserve_after 0)",
                "reservations_off": "reservations off"}


def _quality(data: dict[str, Any], before: dict[str, Any] | None, baseline: dict[str, Any] | None) -> list[str]:
    lines = ["## 2. Placement quality against an exact optimum", "",
             f"{data['instances']} random small instances (seed {data['seed']}; {data['scored']} scored, "
             f"{data['skipped_no_room']} without room for any group left out), defined in `benchmarks/quality.py`:",
             "2-6 nodes, each an 8-GPU a100 or a 4-GPU v100, each already busy with 0, 0, 1, 2, 4 or all",
             "of its GPUs (a pod det-k8s does not manage, or a running det-k8s group); 2-8 queued groups of",
             "1, 2, 4, 8, 8 or 16 slots (pods of maxSlotsPerPod GPUs), priority 40, 50 or 60, users a and b,",
             "one in five pinned to a pool, all submitted together. Optima by HiGHS (integer programs, whole",
             "groups, eligible free GPUs): *order-free* (the most GPUs any set of groups can use) and",
             "*priority-first* (lexicographic: the most GPUs at the highest priority, then the next, ...).",
             "The ratio is GPUs placed by one pass / optimum, per instance.",
             ""]
    rows = []
    for name, summary in data["policies"].items():
        rows.append([POLICY_NAMES.get(name, name), f"{summary['order_free']['mean']:.4f}",
                     f"{summary['order_free']['worst']:.2f}", summary["order_free"]["below"],
                     f"{summary['priority_first']['mean']:.4f}", f"{summary['priority_first']['worst']:.2f}",
                     summary["priority_first"]["below"], summary["partial_groups"], summary["overcommitted_nodes"]])
    if before and baseline:
        for name, summary in before["policies"].items():
            label = "default policy (the guard reserved at once)" if name == "default" else POLICY_NAMES.get(name, name)
            rows.append([f"*at {baseline['ref']}:* {label}",
                         f"{summary['order_free']['mean']:.4f}", f"{summary['order_free']['worst']:.2f}",
                         summary["order_free"]["below"], f"{summary['priority_first']['mean']:.4f}",
                         f"{summary['priority_first']['worst']:.2f}", summary["priority_first"]["below"],
                         summary["partial_groups"], summary["overcommitted_nodes"]])
    lines += _table(["policy", "order-free: mean", "worst", "instances below", "priority-first: mean", "worst",
                     "instances below", "partial groups", "over-committed nodes"], rows)
    lines += ["Partial groups and over-committed nodes are counted from each plan (every placed group has a node",
              "for each pod, all eligible, no node's free GPUs exceeded), not assumed.", ""]
    default = data["policies"]["default"]
    lines += [f"**Against the order-free optimum the goal ({QUALITY_GOAL}) is "
              f"{'met' if default['order_free']['mean'] >= QUALITY_GOAL else 'not met'}; against the priority-first "
              f"optimum it is {'met' if default['priority_first']['mean'] >= QUALITY_GOAL else 'not met'}.** "
              "The difference is the policy's first rule, not packing. One pass decides groups in priority order, then",
              "fair share, then submission order, and never skips a group that fits in favour of a later one; the",
              "order-free optimum may leave a higher-priority group out to place more GPUs of lower ones. The",
              "smallest such instance of this run:", ""]
    example = data.get("example")
    if example:
        lines += [f"- nodes: {', '.join(example['nodes'])}",
                  "- queue, in the order the pass decided it: " + "; ".join(example["queue"]),
                  "- the pass placed " + ", ".join(f"{g} on {'+'.join(n)}" for g, n in example["placed"].items())
                  + f": {example['placed_gpus']} GPUs, which is the priority-first optimum; the order-free optimum is "
                  f"{example['optimum']} GPUs, reached only by placing fewer GPUs of a higher priority.", ""]
    own = default.get("own_order")
    if own:
        lines += ["What remains below the priority-first optimum is split by a third optimum, *own order*: the",
                  "pass's own decision order with perfect packing (each group placed if it can be, together with",
                  "every earlier one). The rules within one priority (fair share and submission order choose which",
                  f"of two equal groups goes first) give {own['optimum_vs_priority_first']:.4f} of the priority-first "
                  "optimum; the pass",
                  f"reaches {own['mean']:.4f} of its own-order optimum (below it in {own['below']} of "
                  f"{data['scored']} instances, worst {own['worst']:.2f}):",
                  "that is all the packing heuristic loses. The starvation guard, when engaged, costs placements on",
                  "purpose: it holds nodes idle for a group that has waited `reserve_after` (300 s by default) so",
                  "smaller groups cannot take them forever.", ""]
    else:
        lines += ["What remains below the priority-first optimum is the same rule within one priority (fair share and",
                  "submission order choose which of two equal groups goes first) and the packing heuristic. The",
                  "starvation guard, when engaged, costs placements on purpose: it holds nodes idle for a group that",
                  "has waited `reserve_after` (300 s by default) so smaller groups cannot take them forever.", ""]
    return lines


# -- 3 ----------------------------------------------------------------------------------------------


WHO = {"det_k8s": "det-k8s", "det_k8s_no_guard": "det-k8s, no starvation guard", "per_pod": "per pod (plain Kubernetes)"}


def _wait(summary: dict[str, Any], key: str) -> str:
    value = summary[key]
    return "-" if value is None else f"{value:.2f} h"


def _contention(data: dict[str, Any]) -> list[str]:
    lines = ["## 3. Contention: det-k8s against per-pod placement", "",
             "A discrete-event simulation (`benchmarks/contention.py`): det-k8s runs the real `schedule()` at every",
             "arrival and job end; the per-pod baseline binds pending pods one by one in FIFO order to the node with",
             "the most free GPUs (kube-scheduler's LeastAllocated), a job starting once all its pods are bound and",
             "its bound pods holding their GPUs idle until then; pods of trials submitted together interleave.",
             "Partial GPU-hours are counted from the first arrival until 24 hours after the last.", ""]
    rows = []
    for case in data["documents"]:
        for key in ("det_k8s", "per_pod"):
            s = case[key]
            outcome = ("rejected at once: it can never fit" if s["rejected"] else
                       f"deadlock: {s['deadlock']['gpus_held']} GPUs held idle for good" if s["deadlocked"] else
                       f"{s['finished']} of {s['jobs']} finished")
            rows.append([case["scenario"], WHO[key], s["partial_gpu_hours"], s["jobs_ever_partial"],
                         "yes" if s["deadlocked"] else "no", outcome, _wait(s, "mean_wait_h")])
    lines += ["The documents' two deadlocks (each job runs 2 hours once started; 24-hour window):", ""]
    lines += _table(["scenario", "scheduler", "partial GPU-hours", "jobs ever partial", "deadlock", "outcome",
                     "mean wait"], rows)
    traces = data["traces"]
    cluster = data["cluster"]
    lines += [f"Random traces: {len(traces)} seed(s), {data['jobs_per_trace']} jobs each, on {cluster['nodes_8gpu']} "
              f"8-GPU and {cluster['nodes_4gpu']} 4-GPU nodes ({cluster['gpus']} GPUs). Experiments arrive as a",
              f"Poisson process at {data['load']:g} of the cluster's GPUs and submit 1-4 equal trials at once (a",
              "small hyperparameter search); 1-32 slots per trial; durations lognormal, median 1 hour. Totals and",
              "means over the traces:", ""]
    rows = []
    for key in ("det_k8s", "det_k8s_no_guard", "per_pod"):
        outs = [t[key] for t in traces]
        waits = [o["mean_wait_h"] for o in outs if o["mean_wait_h"] is not None]
        large = [o["mean_wait_16plus_gpus_h"] for o in outs if o["mean_wait_16plus_gpus_h"] is not None]
        rows.append([WHO[key], f"{sum(o['partial_gpu_hours'] for o in outs):.0f}",
                     sum(o["jobs_ever_partial"] for o in outs), f"{sum(o['deadlocked'] for o in outs)} of {len(outs)}",
                     sum(o["never_started"] for o in outs),
                     f"{sum(waits) / len(waits):.2f} h" if waits else "-",
                     f"{max(o['max_wait_h'] or 0 for o in outs):.1f} h",
                     f"{sum(large) / len(large):.2f} h" if large else "-"])
    lines += _table(["scheduler", "partial GPU-hours", "jobs ever partial", "traces deadlocked", "jobs never started",
                     "mean wait (of started jobs)", "longest wait", "mean wait, jobs of 16+ GPUs"], rows)
    lines += ["Per trace:", ""]
    rows = []
    for t in traces:
        p, d = t["per_pod"], t["det_k8s"]
        rows.append([t["scenario"].removeprefix("random trace, "), f"{p['partial_gpu_hours']:.0f}",
                     f"at {p['deadlock']['since_h']} h, {p['deadlock']['gpus_held']} GPUs held" if p["deadlocked"]
                     else "no", p["never_started"], _wait(p, "mean_wait_h"), d["partial_gpu_hours"],
                     "yes" if d["deadlocked"] else "no", _wait(d, "mean_wait_h"), _wait(d, "max_wait_h")])
    lines += _table(["trace", "per pod: partial GPU-h", "per pod: deadlock", "never started", "mean wait",
                     "det-k8s: partial GPU-h", "deadlock", "mean wait", "longest wait"], rows)
    lines += ["Waits of the per-pod baseline count only the jobs that started; after a deadlock nothing starts.",
              "The starvation guard trades mean wait for a bound on the longest one: it holds nodes for a group",
              "that has waited 300 s, which smaller jobs then cannot use.", ""]
    return lines + _teams(data.get("teams") or [])


def _teams(teams: list[dict[str, Any]]) -> list[str]:
    """Team queues in the simulation: shares against entitlements, fairness, owed guarantees, utilisation."""
    if not teams:
        return []
    first = teams[0]["with_quotas"]
    entitled = ", ".join(f"{team} {share:.0%}" for team, share in first["entitled"].items())
    lines = ["### Teams: det-k8s with and without team queues", "",
             f"Four teams entitled to {entitled} of the GPUs submit 10/20/30/40% of the jobs of an overloaded",
             "trace (load 1.2, same cluster). With quotas each team's queue is guaranteed its share: it borrows",
             "what others leave idle and reclaims its share (whole groups; a reclaimed job starts over). The",
             "shares are of the GPU-hours between the first and the last arrival; Jain's index is over what each",
             "team got of what it was owed (its entitlement, or what it asked when less, capped at 1); owed",
             "team-hours: a team below its guarantee had a waiting job that fit what the guarantee leaves.", ""]
    rows = []
    for t in teams:
        for key, who in (("with_quotas", "det-k8s, team queues"), ("without_quotas", "det-k8s, no queues"),
                         ("per_pod", "per pod")):
            f = t[key]
            shares = " / ".join(f"{f['share'][team]:.0%}" for team in f["entitled"])
            owed = "-" if f["owed_team_hours"] is None else f"{f['owed_team_hours']:.1f}"
            rows.append([t["scenario"].removeprefix("teams, "), who, shares, f"{f['jain']:.3f}", owed,
                         f"{f['utilisation']:.0%}" if f["utilisation"] is not None else "-", f["reclaimed_runs"],
                         f["partial_groups"], "yes" if f["deadlocked"] else "no"])
    lines += _table(["trace", "scheduler", "shares (" + " / ".join(first["entitled"]) + ")", "Jain",
                     "owed team-hours", "utilisation", "runs reclaimed", "partial groups", "deadlock"], rows)
    return lines


# -- 4 ----------------------------------------------------------------------------------------------


def _submission(data: dict[str, Any], machine: dict[str, Any]) -> list[str]:
    lines = ["## 4. Submission: a 64-pod group through the real client", "",
             "`create_group(api, namespace, pods, service, workers=N)` through `KubeApi` and the official `kubernetes`",
             "client, against the Kubernetes API emulator of the tests running in its own process on 127.0.0.1",
             f"(`benchmarks/submission.py`). Client and emulator share this machine's {machine['cores']} cores, so with",
             "no added latency both are CPU-bound and threads have little to overlap; the second series adds a",
             "fixed delay to every request in the emulator, a round trip to a remote API server. The partial window",
             "runs from the first pod's create call returning to the last one's. Median of several rounds.", ""]
    rows = []
    for series in data["series"]:
        base = next(r for r in series["rows"] if r["workers"] == 1)
        for r in series["rows"]:
            rows.append([f"{series['latency_ms']} ms", r["workers"], _s(r["seconds"]), f"{r['pods_per_second']:.0f}",
                         f"{r['partial_window_ms']:.0f} ms", _x(base["seconds"] / r["seconds"]),
                         r["pool_full_warnings"]])
    lines += _table(["added latency", "workers", "64 pods in", "pods/s", "partial window", "speed-up",
                     "'connection pool is full' warnings"], rows)
    lines += [f"The official client keeps {data['pool_size']} connections per host here (5 per core): more workers",
              "than that open and discard extra connections (urllib3's warnings above). The live scheduler uses 8.", ""]
    return lines


# -- 5 ----------------------------------------------------------------------------------------------


def _startup(data: dict[str, Any], baseline: dict[str, Any] | None) -> list[str]:
    return ["## 5. Start-up", "", *startup_table({"startup": data})[1:]]


def startup_table(results: dict[str, Any]) -> list[str]:
    """Section 5: det-k8s's start-up against kubectl's and helm's, measured in the same run (benchmarks/startup.py)."""
    data = results.get("startup", results)
    timings, versions, load = data["timings"], data["versions"], data["load"]
    bare = _median(timings["python -c pass"])
    lines = ["# det-k8s start-up against kubectl and helm", "",
             f"{versions['det-k8s']}, Typer {versions['typer']}, Python {versions['python']}; {versions['kubectl']}; "
             f"helm {versions['helm']}; load average {load['before']} before, {load['after']} after"
             + (f"; {results['machine']['cpu']}, {results['machine']['cores']} cores, {results['machine']['date']}"
                if "machine" in results else "") + ".",
             "Each command in a fresh process (det-k8s through its console script, which itself imports `re`),",
             "COLUMNS=80, stdout not a terminal, every command once per round, rounds interleaved after two",
             "warm-up rounds; a ratio is the median over the rounds of det-k8s's time over the peer's in the",
             f"same round ({next(iter(timings.values()))['runs']} rounds).", ""]
    rows = [[f"`{r['command']}`", f"`{r['peer']}`", _s(_median(timings[r["command"]])), _s(_median(timings[r["peer"]])),
             _x(r["paired_median"]), f"{r['goal']:g}x", _met(r["met"])] for r in data["ratios"]]
    lines += _table(["det-k8s", "peer", "det-k8s median", "peer median", "paired ratio", "goal", ""], rows)
    lines += ["", "Every command timed (median, fastest, against `python -c pass`):", ""]
    lines += _table(["command", "median", "fastest", "/ python -c pass"],
                    [[name, _s(_median(t)), _s(float(t["min"])), _x(_median(t) / bare)] for name, t in timings.items()])
    lines.append("")
    for name, modules in data["heavy_sdks_imported"].items():
        lines.append(f"- `{name}` imported {', '.join(modules) if modules else 'no heavy SDK'} "
                     "(kubernetes, boto3, botocore, google.cloud, azure)")
    lines += ["", "`--version` is printed before anything is imported; `--help` is Typer's own text from a cache",
              "(`det_k8s/cli/root_help.py`), alike with every allowed Typer (tests/cli/test_typer_versions.py); the",
              "root group imports only the module of the command that runs (`det_k8s/cli/app.py`, `LazyGroup`), and",
              "a value Typer's pydantic-based conversion would leave as it is (an option not given, `-f FILE`, `-o`)",
              "does not go through it (`PlainOption`).", ""]
    return lines


def _occupancy(data: dict[str, Any]) -> list[str]:
    lines = ["## 6. The occupancy map", "",
             "The console script in a fresh process, output piped, on the snapshots of section 1: `det-k8s nodes map",
             "--snapshot S -f site.yaml` (beyond 200 nodes each pool is summarised: nodes by free slots, the largest",
             "free blocks, the largest holders), `nodes map -o json` (every cell of every node) and `plan --map` (the",
             "plan of 200 experiments, then the map after it), each against `det-k8s plan -o json` with the same",
             "experiments, settings and snapshot; all four interleaved, round by round.", ""]
    rows = []
    for r in data["rows"]:
        plan = _median(r["plan"])
        rows.append([r["style"], r["snapshot_mb"], _s(plan), _s(_median(r["map"])), _x(map_ratio(r)),
                     _s(_median(r["map_json"])), _x(_median(r["map_json"]) / plan), _s(_median(r["plan_map"])),
                     _x(_median(r["plan_map"]) / plan)])
    lines += _table(["objects", "MB", "det-k8s plan", "nodes map (summary)", "/ plan", "nodes map -o json", "/ plan",
                     "plan --map", "/ plan"], rows)
    lean = next(r for r in data["rows"] if r["style"] == "lean")
    shape, seconds = lean["phases"]["map"], lean["phases"]["seconds"]
    lines += [f"The lean map: {shape['rows']:,} nodes with slots in {shape['pools']} pools ({shape['cells']:,} cells, "
              f"{shape['holders']:,} holders), {shape['without_slots']:,} nodes without GPUs; "
              f"{'summarised' if shape['summarised'] else 'one row per node'}, {shape['lines']} lines. Where its time "
              "goes (one in-process run, cycle collector paused as the command pauses it):", ""]
    lines += _table(["step", "time"], [[name.replace("_", " "), _s(value)] for name, value in seconds.items()])
    return lines


# -- 8 ----------------------------------------------------------------------------------------------


def _binding(data: dict[str, Any], machine: dict[str, Any]) -> list[str]:
    throughput, latency, requests = data["throughput"], data["latency"], data["requests"]
    lines = ["## 8. Binding the Determined master's pods", "",
             "### On the API emulator (`benchmarks/binding.py`)", "",
             "The real `det-k8s scheduler run` (its own process, listing once, then watching) against the API emulator",
             f"(its own process, schema validation on) holding {data['nodes']:,} nodes and {data['pods']:,} pods "
             "(`generate.snapshot`, half of",
             "the GPUs taken), while this process creates trials as the v0.38.1 master does (a Job and its pods,",
             "`schedulerName: coscheduler`, gang labels, a PriorityClass). The three share the machine's "
             f"{machine['cores']} cores.", "",
             "Sustained throughput: a backlog of trials (4 pods x 2 GPUs each) waits while the scheduler starts; it",
             "lists the cluster once and binds them, each group all or none.", ""]
    lines += _table(["groups", "pods", "first binding after start", "binding window", "pods bound/s",
                     "pods/s from start (listing included)"],
                    [[throughput["groups"], throughput["pods"], _s(throughput["first_binding_after_start_s"]),
                      _s(throughput["binding_window_s"]), throughput["pods_per_second"],
                      throughput["pods_per_second_from_start"]]])
    lines += ["Latency: trials of 1-4 pods x 4 GPUs (and one in four a single 1-GPU pod) arrive one every "
              f"{latency['interval_s']:g} s;",
              "for each, from its last pod's creation (its create call returning) to its last binding (the emulator's",
              "clock at the binding; the same machine's clock).", ""]
    lines += _table(["groups", "bound", "p50", "p99", "max"],
                    [[latency["groups"], latency["bound"], _s(latency["p50_s"]), _s(latency["p99_s"]),
                      _s(latency["max_s"])]])
    lines += ["API requests the scheduler's credentials made during the latency phase (its watches were opened",
              "before it; a re-opened watch would count as one `watch`), by verb and resource:", ""]
    lines += _table(["request", "count"], [[key, count] for key, count in requests["by_kind"].items()])
    lines += [f"{requests['total']} requests for {latency['bound']} bound groups: **{requests['per_bound_group']} per "
              f"group** ({requests['bindings_per_group']} bindings per group, one per pod; one Scheduled event per pod; "
              "the Lease taken and given back once per pass), of them "
              f"{requests['full_lists_of_pods_or_nodes']} full lists of pods or nodes.", ""]
    return lines + real_side_by_side()


SIDE_BY_SIDE = Path(__file__).resolve().parent / "SIDEBYSIDE.md"


def real_side_by_side() -> list[str]:
    """The real control plane's figures (`python -m benchmarks.sidebyside`, which needs Go and runs apart), as its
    last run wrote them, under their own heading."""
    if not SIDE_BY_SIDE.is_file():
        return []
    body = SIDE_BY_SIDE.read_text().splitlines()
    title = body[0].lstrip("# ") if body and body[0].startswith("# ") else "Side by side on one real control plane"
    rest = "\n".join(body[1:]).strip().splitlines()
    return [f"### {title[0].upper() + title[1:]}", "", *rest, ""]


# -- anchors ----------------------------------------------------------------------------------------


def _queues(data: dict[str, Any], machine: dict[str, Any]) -> list[str]:
    lines = ["## 9. Team queues", "",
             "`benchmarks/queues.py`: one pass over benchmark 1's cluster and queue with 50 team queues (2 organisations,",
             "8 departments, 40 teams; the six users in six teams with guarantees both below and above what they run)",
             "against the same pass without queues, the variants interleaved round by round. The binding tree's limits",
             "and lending limits hold groups back (which also spares the pass their placement attempts); the open tree",
             "has the same guarantees and limits that hold nothing, so the pass does all it does without queues plus",
             "their bookkeeping, ordering and reclaim attempts. Ratios are of the medians of the pass's CPU time",
             "(the machine's other load swings wall time by 2x); wall-time ratios beside them.", ""]
    rows = []
    for r in data["rows"]:
        rows.append([f"{r['nodes']:,}", f"{r['pods']:,}", f"{r['groups']:,}", r["rounds"],
                     _s(r["cpu_without"]), _s(r["cpu_with"]), _s(r["cpu_with_open"]),
                     f"{_x(r['ratio'])} / {_x(r['ratio_open'])}", f"{_x(r['wall_ratio'])} / {_x(r['wall_ratio_open'])}",
                     " / ".join(f"{o['placed']} placed, {o['queue_limit']} held by a queue"
                                for o in (r["outcome"]["without"], r["outcome"]["with"], r["outcome"]["with_open"]))])
    lines += _table(["nodes", "pods", "groups", "rounds", "CPU without", "CPU binding", "CPU open",
                     "ratio binding / open", "wall-time ratio binding / open", "outcome without / binding / open"],
                    rows)
    lines += ["Kueue's and Volcano's documented scenarios (`benchmarks/queue_scenarios.py`; asserted in",
              "`tests/unit/scheduling/test_queue_scenarios.py`): Kueue's CPUs of a cohort are GPUs of 1-GPU nodes here,",
              "each workload a single-pod group of 1 GPU.", ""]
    lines += _table(["source", "scenario", "documented outcome", "det-k8s's outcome", "same"],
                    [[r["source"], r["scenario"], r["documented"], r["det_k8s"], "yes" if r["same"] else "**no**"]
                     for r in data["scenarios"]])
    lines += ["Where they differ, DEVELOPERS.md (\"Team queues, and where they differ from Kueue\") says why.", ""]
    return lines


def _anchors(results: dict[str, Any]) -> list[str]:
    passes = results["scheduling"]["passes"]
    big = max(passes, key=lambda r: (r["nodes"], r["groups"]))
    at_5000 = [r for r in passes if r["nodes"] == 5000] or [big]
    decided = max(at_5000, key=lambda r: r["groups"])
    rate = decided["groups"] / _median(decided["schedule"])
    created = max(row["pods_per_second"] for s in results["submission"]["series"] for row in s["rows"])
    return ["## Against the published anchors", "",
            "From `../shared/research/schedulers.md` section 8: kube-scheduler's CI floor is 680 pods/s at 5,000 nodes",
            "(SchedulingBasic 5000Nodes_10000Pods, in-process API server), Kueue's admission loop runs about 40",
            "workloads/s, YuniKorn reports 833 pods/s; all of them are finally bounded by API-server writes.", "",
            f"- Deciding: one pass over {decided['nodes']:,} nodes decided {decided['groups']:,} queued groups in "
            f"{_s(_median(decided['schedule']))}, {rate:,.0f} groups/s (placed, or waiting with a reason). The largest "
            f"case, {big['nodes']:,} nodes and {big['groups']:,} groups, took {_s(_median(big['schedule']))}.",
            f"- Writing: {created:.0f} pods/s at best against the local emulator (section 4). As for the others, the "
            "API server's write rate, not the decision, bounds how fast det-k8s starts pods.", *(
                [f"- Binding the master's pods (section 8): {results['binding']['throughput']['pods_per_second']} pods/s "
                 "sustained through one Python API emulator on this machine, against kube-scheduler's CI floor of 680 "
                 "pods/s with an in-process API server and its real-cluster 306-578 pods/s at 5,000 nodes."]
                if "binding" in results else []), ""]
