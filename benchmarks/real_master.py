"""The real Determined master on the real control plane: the documents' deadlocks and the time to place an experiment,
det-k8s against kube-scheduler alone (the master's default), in one run.

The master is built from ../shared/vendor/determined (tests/support/realkube/determined.py), runs outside the cluster on the
bundled chart's configuration, and every experiment is submitted with the real `det experiment create`. kwok stands in
for the kubelets (nothing runs in the pods; the master sees them Running and follows their logs).

- Deadlocks (tests/support/realkube/deadlocks.py), ROUNDS rounds each: two 12-GPU experiments at once on 3 nodes of 4 GPUs,
  and a 16-GPU experiment beside an 8-GPU one on 4 nodes of 4 GPUs. A round "starts in part" when an experiment has
  some, not all, of its pods bound for 4 s on end. With det-k8s each round also frees room and counts whether the
  waiting experiment is then placed whole ("placed after").
- Preemption, N times: a priority-90 experiment of 8 GPUs beside a priority-10 one holding all 16: from the start
  of its `det experiment create` to its pods all bound (det-k8s with --preemption).
- Latency, N experiments of 8 GPUs one after the other on 4 nodes of 4 GPUs (each killed before the next): from the
  start of `det experiment create` to the last pod bound, and to the master reporting RUNNING; p50 and p99.

    python -m benchmarks.real_master [--rounds 20] [--latency 50] [--preemption 5] [--json out.json]
    DET_K8S_MASTER_VERSION=0.32.1 python -m benchmarks.real_master ...    # a master of bare pods (built on first use)

Prints a line per round, then a Markdown table for RESULTS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.realkube.cluster import ControlPlane
from tests.support.realkube.components import KUBE_VERSION, build_all
from tests.support.realkube.deadlocks import SCENARIOS
from tests.support.realkube.determined import MASTER_VERSION, DeterminedOnKube, kwok_serving_logs
from tests.support.realkube.scheduler_run import scheduler_run


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def wait_until(det: DeterminedOnKube, check: Any, timeout: float = 180) -> bool:
    try:
        det.plane.wait_for("the experiment", check, timeout=timeout, interval=0.2)
        return True
    except AssertionError:
        return False


def latency(det: DeterminedOnKube, count: int) -> dict[str, list[float]]:
    det.nodes(4)
    bound_s: list[float] = []
    running_s: list[float] = []
    for n in range(count):
        t0 = time.monotonic()
        (exp,) = det.submit(8)
        if wait_until(det, lambda e=exp: det.bound(e) == (2, 2)):
            bound_s.append(time.monotonic() - t0)
        if wait_until(det, lambda e=exp: det.state(e) == "STATE_RUNNING"):
            running_s.append(time.monotonic() - t0)
        det.kill_all()
        if (n + 1) % 10 == 0:
            say(f"  latency: {n + 1}/{count} experiments")
    return {"bound": bound_s, "running": running_s}


def preemption(det: DeterminedOnKube, count: int) -> list[float]:
    """Seconds from the start of a priority-90 experiment's `det experiment create` to its pods all bound, while a
    priority-10 experiment holds every GPU (det-k8s with --preemption; the victim checkpoints nothing under kwok)."""
    det.nodes(4)
    took = []
    for _ in range(count):
        (low,) = det.submit(16, priority=10)
        wait_until(det, lambda e=low: det.bound(e) == (4, 4))
        t0 = time.monotonic()
        (high,) = det.submit(8, priority=90)
        if wait_until(det, lambda e=high: det.bound(e) == (2, 2)):
            took.append(time.monotonic() - t0)
        det.kill_all()
    return took


def pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def run(rounds: int, latency_count: int, preemptions: int = 0) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="det-k8s-real-master-"))
    plane = ControlPlane(build_all(), kwok_serving_logs(work)).start()
    det = DeterminedOnKube(plane, work).start()
    results: dict[str, Any] = {"rounds": rounds, "latency_experiments": latency_count}
    try:
        if preemptions:
            with scheduler_run(det, work / "preemption", "--preemption"):
                results["preemption"] = preemption(det, preemptions)
                say(f"preemption: {results['preemption']}")
        for mode in ("det-k8s", "kube-scheduler") if rounds or latency_count else ():
            gang = mode == "det-k8s"
            with contextlib.ExitStack() as stack:
                if gang:
                    stack.enter_context(scheduler_run(det, work / "rounds"))
                else:
                    det.reconfigure(default_scheduler="")
                    stack.callback(det.reconfigure, default_scheduler="coscheduler")
                row: dict[str, Any] = {}
                for name, scenario in SCENARIOS.items():
                    outcomes = []
                    for r in range(rounds):
                        outcomes.append(scenario(det, gang=gang))
                        say(f"{mode}: {name}: round {r + 1}/{rounds}: {outcomes[-1]}")
                    row[name] = {"partial": sum(o.partial for o in outcomes),
                                 "placed_after": sum(o.placed_after for o in outcomes)}
                if latency_count:
                    row["latency"] = latency(det, latency_count)
                results[mode] = row
    finally:
        det.stop()
        plane.stop()
    results["versions"] = {"determined": MASTER_VERSION, "kubernetes": KUBE_VERSION, "python": platform.python_version()}
    results["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform(),
                          "load": os.getloadavg()}
    results["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return results


def table(results: dict[str, Any]) -> str:
    rounds = results["rounds"]
    lines = ["| | det-k8s | kube-scheduler alone |", "|---|---|---|"]
    if results.get("preemption"):
        took = results["preemption"]
        how = "a notice pod named as its Job" if tuple(map(int, MASTER_VERSION.split("."))) >= (0, 34) else \
            "the label on its pods"
        lines.append(f"| priority-90 experiment's create -> bound, preempting a priority-10 one through {how}, "
                     f"p50 / max ({len(took)}) | {pct(took, 50):.2f} / {max(took):.2f} s | - (no preemption) |")
    if not rounds and not results["latency_experiments"]:
        return "\n".join(lines)
    for name in SCENARIOS:
        d, k = results["det-k8s"][name], results["kube-scheduler"][name]
        lines.append(f"| {name}: rounds started in part | {d['partial']} of {rounds} | {k['partial']} of {rounds} |")
        lines.append(f"| {name}: placed whole once room appeared | {d['placed_after']} of {rounds} | - |")
    if results["latency_experiments"]:
        for what, label in (("bound", "create -> last pod bound"), ("running", "create -> RUNNING")):
            cells = []
            for mode in ("det-k8s", "kube-scheduler"):
                values = results[mode]["latency"][what]
                p50, p99 = pct(values, 50), pct(values, 99)
                cells.append(f"{p50:.2f} / {p99:.2f} s ({len(values)})" if p50 is not None and p99 is not None
                             else "-")
            lines.append(f"| {label}, p50 / p99 (experiments) | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--latency", type=int, default=50, help="experiments for the latency figures (0: none)")
    parser.add_argument("--preemption", type=int, default=5, help="preemptions to time (0: none)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    results = run(args.rounds, args.latency, args.preemption)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    print(table(results))
    print(f"\nDetermined {MASTER_VERSION}, Kubernetes {KUBE_VERSION}, {results['date']}, "
          f"{results['machine']['cpus']} CPUs, load {results['machine']['load']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
