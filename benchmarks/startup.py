"""Benchmark 5: start-up, against the tools an operator runs beside det-k8s: `kubectl` and `helm`.

The goals (issue 41): `det-k8s --version` within 2x `kubectl version --client`; `det-k8s --help`
and every `det-k8s COMMAND --help` within 3x `helm version`; `det-k8s validate -f
examples/gpu-cluster.yaml` within 5x `helm version`. The real kubectl and helm come from
.tools/bin (scripts/fetch_tools.py). Every command runs in a fresh process, det-k8s through the
installed console script (what users type), all of them interleaved round by round after warm-up
rounds that let Python write its bytecode caches (as `pip install` does); COLUMNS=80, stdout not a
terminal. A ratio is the median over the rounds of det-k8s's time over the peer's in the same round
(paired), so a burst of load elsewhere hits both alike. `python -c pass` is timed too: the floor
any Python program starts from. With `--baseline`, `--help`, `--version` and `validate` also run
an older commit's code (PYTHONPATH), interleaved too. A probe then runs the same command lines
in-process and lists the heavy SDKs they imported (there must be none).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from . import machine
from .timing import child_env, run_once

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / ".tools" / "bin"
HEAVY = ("kubernetes", "boto3", "botocore", "google.cloud", "azure")
PROBE = """
import sys
from det_k8s.cli import main
main({args!r})
heavy = sorted({{name for name in sys.modules for prefix in {heavy!r} if name == prefix or name.startswith(prefix + ".")}})
print("HEAVY=" + ",".join(sorted({{name.split(".")[0] if not name.startswith("google.") else "google.cloud"
                                   for name in heavy}})), file=sys.stderr)
"""
# (det-k8s command, peer, at most this many times the peer)
VERSION_GOAL, HELP_GOAL, VALIDATE_GOAL = 2.0, 3.0, 5.0


def heavy_imports(args: list[str], cwd: Path) -> list[str]:
    result = subprocess.run([sys.executable, "-c", PROBE.format(args=args, heavy=HEAVY)], capture_output=True,
                            text=True, cwd=cwd, env=child_env(), timeout=120, check=False)
    line = [ln for ln in result.stderr.splitlines() if ln.startswith("HEAVY=")]
    if not line:
        raise RuntimeError(f"probe failed for {args}: {result.stderr[-500:]}")
    return [m for m in line[-1].removeprefix("HEAVY=").split(",") if m]


def peers() -> dict[str, str]:
    """kubectl and helm from .tools/bin: an error naming the script that fetches them when they are missing."""
    found = {name: str(TOOLS / name) for name in ("kubectl", "helm")}
    missing = [name for name, path in found.items() if not os.access(path, os.X_OK)]
    if missing:
        raise RuntimeError(f"{', '.join(missing)} not in {TOOLS}: run `python scripts/fetch_tools.py` first")
    return found


def _first_line(argv: list[str]) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    return (result.stdout.strip() or result.stderr.strip()).splitlines()[0] if (result.stdout or result.stderr) else ""


def versions(tools: dict[str, str], console: str) -> dict[str, str]:
    typer = subprocess.run([sys.executable, "-c", "import typer; print(typer.__version__)"], capture_output=True,
                           text=True, timeout=60, check=False).stdout.strip()
    return {"kubectl": _first_line([tools["kubectl"], "version", "--client"]),
            "helm": _first_line([tools["helm"], "version", "--short"]),
            "det-k8s": _first_line([console, "--version"]), "typer": typer,
            "python": sys.version.split()[0]}


def goals() -> list[tuple[str, str, float]]:
    """(det-k8s command line, peer, goal) for every goal of issue 41's item 3."""
    from det_k8s.cli.app import COMMANDS

    rows = [("det-k8s --version", "kubectl version --client", VERSION_GOAL),
            ("det-k8s --help", "helm version", HELP_GOAL)]
    rows += [(f"det-k8s {name} --help", "helm version", HELP_GOAL) for name in COMMANDS]
    rows.append(("det-k8s validate -f examples/gpu-cluster.yaml", "helm version", VALIDATE_GOAL))
    return rows


def run(config: dict[str, Any]) -> dict[str, Any]:
    console = str(Path(sys.executable).with_name("det-k8s"))
    settings = str(ROOT / "examples" / "gpu-cluster.yaml")
    tools = peers()
    load_before = machine.load()
    with tempfile.TemporaryDirectory(prefix="det-k8s-bench-") as tmp:
        work = Path(tmp)
        commands: dict[str, list[str]] = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "kubectl version --client": [tools["kubectl"], "version", "--client"],
            "helm version": [tools["helm"], "version"],
        }
        for line, _, _ in goals():
            argv = line.split()[1:]
            if argv[0] == "validate":
                argv = ["validate", "-f", settings]
            commands[line] = [console, *argv]
        commands["det-k8s render"] = [console, "render", "-f", settings, "-o", str(work / "chart")]
        envs = {name: child_env(pythonpath=ROOT) if name.startswith("det-k8s") else child_env() for name in commands}
        baseline = config.get("baseline")
        if baseline is not None:
            for line in ("det-k8s --version", "det-k8s --help", "det-k8s validate -f examples/gpu-cluster.yaml"):
                commands[line + " (baseline)"] = commands[line]
                envs[line + " (baseline)"] = child_env(pythonpath=baseline)
        helm_home = work / "helm-home"  # helm version reads no repository; its config and cache dirs stay here
        for name in ("kubectl version --client", "helm version"):
            envs[name] = {**envs[name], "HELM_CONFIG_HOME": str(helm_home / "config"),
                          "HELM_CACHE_HOME": str(helm_home / "cache"), "HELM_DATA_HOME": str(helm_home / "data")}
        samples: dict[str, list[float]] = {name: [] for name in commands}
        runs, warmup = int(config["runs"]), 2
        for round_ in range(warmup + runs):
            for name, argv in commands.items():
                elapsed = run_once(argv, envs[name], work)
                if round_ >= warmup:
                    samples[name].append(elapsed)
        heavy = {"det-k8s --help": heavy_imports(["--help"], work),
                 "det-k8s validate": heavy_imports(["validate", "-f", settings], work),
                 "det-k8s render": heavy_imports(["render", "-f", settings, "-o", str(work / "probe")], work)}
    ratios = []
    for line, peer, goal in goals():
        paired = [mine / theirs for mine, theirs in zip(samples[line], samples[peer], strict=True)]
        ratios.append({"command": line, "peer": peer, "goal": goal, "paired_median": round(statistics.median(paired), 3),
                       "median_ratio": round(statistics.median(samples[line]) / statistics.median(samples[peer]), 3),
                       "met": statistics.median(paired) <= goal})
    return {"timings": {name: {"median": round(statistics.median(s), 6), "min": round(min(s), 6), "runs": len(s)}
                        for name, s in samples.items()},
            "ratios": ratios, "versions": versions(tools, console),
            "load": {"before": load_before, "after": machine.load()}, "heavy_sdks_imported": heavy}


def main(argv: list[str] | None = None) -> int:
    """`python -m benchmarks.startup [--runs N]`: this benchmark alone, its table on stdout."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m benchmarks.startup", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="paired rounds after 2 warm-up rounds (default 20)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    from .report import startup_table

    results = {"machine": machine.describe(), **run({"runs": args.runs})}
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    print("\n".join(startup_table(results)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
