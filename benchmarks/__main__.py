"""`python -m benchmarks [--quick] [--baseline REF]`: generate the data, run the nine benchmarks, write RESULTS.md.

Data goes to benchmarks/data/ (git-ignored); the full run writes benchmarks/RESULTS.md, a quick run
(tiny sizes, a smoke test of the harness, figures meaningless) writes benchmarks/data/RESULTS-quick.md
unless --out says otherwise. --baseline REF also measures the `det-k8s plan` and start-up commands
and the placement quality with the det_k8s package of an older commit (exported with `git archive`),
for a before/after comparison.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

from . import (
    binding,
    constraints,
    contention,
    machine,
    occupancy,
    quality,
    queues,
    report,
    scheduling,
    startup,
    submission,
)
from .timing import child_env

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("scheduling", "quality", "contention", "submission", "startup", "occupancy", "constraints", "binding",
         "queues")

FULL: dict[str, dict[str, Any]] = {
    "scheduling": {"pass_nodes": [1000, 5000, 10000], "pass_groups": [1000, 10000], "runs": 3, "cli_runs": 5,
                   "plan_cli": {"nodes": 5000, "pods": 30000, "experiments": 200}},
    "quality": {"instances": 1000, "seed": 1},
    "contention": {"nodes_8gpu": 8, "nodes_4gpu": 8, "jobs": 300, "traces": 10, "load": 0.9, "team_traces": 3,
                   "team_load": 1.2},
    "submission": {"latencies_ms": [0, 10], "workers": [1, 4, 8, 16], "pods": 64, "rounds": 5},
    "startup": {"runs": 20},
    "occupancy": {"nodes": 5000, "pods": 30000, "experiments": 200, "runs": 5},
    "constraints": {"nodes": 5000, "pods": 30000, "experiments": 200, "runs": 5},
    "binding": {"nodes": 5000, "pods": 30000, "backlog_groups": 500, "arrivals": 200, "interval": 0.5, "seed": 1,
                "limit": 900},
    "queues": {"nodes": 5000, "groups": [1000, 10000], "rounds": 7},
}
QUICK: dict[str, dict[str, Any]] = {
    "scheduling": {"pass_nodes": [60, 120], "pass_groups": [20, 100], "runs": 1, "cli_runs": 1,
                   "plan_cli": {"nodes": 100, "pods": 600, "experiments": 10}},
    "quality": {"instances": 20, "seed": 1},
    "contention": {"nodes_8gpu": 2, "nodes_4gpu": 2, "jobs": 30, "traces": 1, "load": 0.9, "team_traces": 1,
                   "team_load": 1.2},
    "submission": {"latencies_ms": [0], "workers": [1, 4], "pods": 8, "rounds": 1},
    "startup": {"runs": 2},
    "occupancy": {"nodes": 400, "pods": 2400, "experiments": 10, "runs": 1},
    "constraints": {"nodes": 100, "pods": 600, "experiments": 10, "runs": 1},
    "binding": {"nodes": 60, "pods": 300, "backlog_groups": 5, "arrivals": 6, "interval": 0.2, "seed": 1,
                "limit": 120},
    "queues": {"nodes": 60, "groups": [20], "rounds": 1},
}


def export(ref: str, data: Path) -> Path:
    """det_k8s and templates of commit `ref`, unpacked under data/ (no checkout, no worktree)."""
    commit = subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, capture_output=True, text=True,
                            check=True, timeout=30).stdout.strip()
    target = data / f"baseline-{commit}"
    if not (target / "det_k8s" / "__init__.py").exists():
        archive = subprocess.run(["git", "archive", "--format=tar", commit, "det_k8s", "templates"], cwd=ROOT,
                                 capture_output=True, check=True, timeout=120).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(target, filter="data")
    return target


def baseline_quality(baseline: Path, config: dict[str, Any], data: Path) -> dict[str, Any]:
    """The quality benchmark against the older det_k8s (first on PYTHONPATH, this harness after it)."""
    env = child_env(pythonpath=baseline)
    env["PYTHONPATH"] = f"{baseline}:{ROOT}"
    result = subprocess.run([sys.executable, "-m", "benchmarks.quality", "--instances", str(config["instances"]),
                             "--seed", str(config["seed"])], cwd=data, env=env, capture_output=True, text=True,
                            check=True, timeout=3600)
    return dict(json.loads(result.stdout))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks the harness, not the speed")
    parser.add_argument("--data", type=Path, default=ROOT / "benchmarks" / "data", help="generated data (ignored)")
    parser.add_argument("--out", type=Path, help="the report (default: benchmarks/RESULTS.md; quick: in --data)")
    parser.add_argument("--baseline", metavar="REF", help="also measure this older commit (before/after)")
    parser.add_argument("--only", nargs="+", choices=NAMES, default=list(NAMES), help="run only these")
    args = parser.parse_args(argv)
    data = args.data.resolve()
    data.mkdir(parents=True, exist_ok=True)
    out = args.out or (data / "RESULTS-quick.md" if args.quick else ROOT / "benchmarks" / "RESULTS.md")
    configs = QUICK if args.quick else FULL
    baseline = export(args.baseline, data) if args.baseline else None
    results: dict[str, Any] = {"machine": machine.describe(), "quick": args.quick, "configs": configs,
                               "baseline": {"ref": args.baseline, "path": str(baseline)} if baseline else None}
    modules = {"scheduling": scheduling, "quality": quality, "contention": contention, "submission": submission,
               "startup": startup, "occupancy": occupancy, "constraints": constraints, "binding": binding,
               "queues": queues}
    for name in args.only:
        print(f"benchmarks: {name} ...", file=sys.stderr, flush=True)
        config = {**configs[name], "data": str(data), "baseline": baseline}
        start = time.perf_counter()
        results[name] = modules[name].run(config)
        if name == "quality" and baseline is not None:
            results["quality_baseline"] = baseline_quality(baseline, configs[name], data)
        results[name + "_seconds"] = round(time.perf_counter() - start, 1)
    results["machine"]["load_at_end"] = machine.load()
    (data / ("results-quick.json" if args.quick else "results.json")).write_text(
        json.dumps(results, indent=1, default=str))
    out.write_text(report.render(results))
    print(f"benchmarks: wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
