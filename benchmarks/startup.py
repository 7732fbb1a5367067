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


def versions(tools: dict[str, str], console: str, typer_path: str | None = None) -> dict[str, str]:
    typer = typer_version(typer_path)
    return {"kubectl": _first_line([tools["kubectl"], "version", "--client"]),
            "helm": _first_line([tools["helm"], "version", "--short"]),
            "det-k8s": _first_line([console, "--version"]), "typer": typer,
            "python": sys.version.split()[0]}


ALSO_LINES = ("det-k8s --version", "det-k8s --help", "det-k8s validate --help", "det-k8s install --help",
              "det-k8s validate -f examples/gpu-cluster.yaml")


def typer_version(path: str | Path | None) -> str:
    env = child_env(pythonpath=Path(path)) if path else child_env()
    return subprocess.run([sys.executable, "-c", "import typer; print(typer.__version__)"], capture_output=True,
                          text=True, timeout=60, check=False, env=env).stdout.strip()


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
            argv = [settings if word == "examples/gpu-cluster.yaml" else word for word in line.split()[1:]]
            commands[line] = [console, *argv]
        commands["det-k8s render"] = [console, "render", "-f", settings, "-o", str(work / "chart")]
        envs = {name: child_env(pythonpath=ROOT) if name.startswith("det-k8s") else child_env() for name in commands}
        typer_path = config.get("typer_path")  # another Typer (a `pip install --target` directory) first on the path
        if typer_path:
            for name in envs:
                if name.startswith("det-k8s"):
                    envs[name]["PYTHONPATH"] = os.pathsep.join([str(typer_path), envs[name]["PYTHONPATH"]])
        also = {typer_version(path): path for path in config.get("also_typers") or ()}
        for version, path in also.items():  # the lines most at stake, with other Typers, in the same rounds
            for line in ALSO_LINES:
                commands[f"{line} [typer {version}]"] = commands[line]
                envs[f"{line} [typer {version}]"] = child_env(pythonpath=ROOT, extra={
                    "PYTHONPATH": os.pathsep.join([str(path), str(ROOT)])})
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
    also_goals = [(f"{line} [typer {version}]", peer, goal) for version in also
                  for line, peer, goal in goals() if line in ALSO_LINES]
    for line, peer, goal in goals() + also_goals:
        paired = [mine / theirs for mine, theirs in zip(samples[line], samples[peer], strict=True)]
        ratios.append({"command": line, "peer": peer, "goal": goal, "paired_median": round(statistics.median(paired), 3),
                       "median_ratio": round(statistics.median(samples[line]) / statistics.median(samples[peer]), 3),
                       "met": statistics.median(paired) <= goal})
    return {"timings": {name: {"median": round(statistics.median(s), 6), "min": round(min(s), 6), "runs": len(s)}
                        for name, s in samples.items()},
            "argv": {name: [Path(argv[0]).name, *argv[1:]] for name, argv in commands.items()},
            "ratios": ratios, "versions": versions(tools, console, config.get("typer_path")),
            "load": {"before": load_before, "after": machine.load()}, "heavy_sdks_imported": heavy}


def main(argv: list[str] | None = None) -> int:
    """`python -m benchmarks.startup [--runs N]`: this benchmark alone, its table on stdout."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m benchmarks.startup", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="paired rounds after 2 warm-up rounds (default 20)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--typer", metavar="DIR", help="run det-k8s with the Typer installed in DIR (pip install "
                        "--target DIR typer==X; tests/cli/test_typer_versions.py caches them in ~/.cache/det-k8s/typer)")
    parser.add_argument("--also-typer", metavar="DIR", action="append", default=[],
                        help="also run the lines most at stake with the Typer in DIR, in the same rounds (repeatable)")
    parser.add_argument("--baseline", metavar="DIR", type=Path, help="also time an older det_k8s (its parent dir)")
    args = parser.parse_args(argv)
    from .report import startup_table

    results = {"machine": machine.describe(),
               **run({"runs": args.runs, "typer_path": args.typer, "baseline": args.baseline,
                       "also_typers": args.also_typer})}
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    print("\n".join(startup_table(results)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
