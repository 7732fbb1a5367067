"""Benchmark 5: start-up. `det-k8s --help` and `det-k8s render` against `python -c pass`, same interpreter.

Each command runs in a fresh process through the installed console script (what users type),
its runs interleaved with the others', after a warm-up run that lets Python write its bytecode
caches (as `pip install` does). COLUMNS=80, stdout not a terminal. With `--baseline`, the same
console script runs an older commit's code (PYTHONPATH), interleaved too. A probe then runs the
same command lines in-process and lists the heavy SDKs they imported (there must be none).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from .timing import child_env, time_commands

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("kubernetes", "boto3", "botocore", "google.cloud", "azure")
PROBE = """
import sys
from det_k8s.cli import main
main({args!r})
heavy = sorted({{name for name in sys.modules for prefix in {heavy!r} if name == prefix or name.startswith(prefix + ".")}})
print("HEAVY=" + ",".join(sorted({{name.split(".")[0] if not name.startswith("google.") else "google.cloud"
                                   for name in heavy}})), file=sys.stderr)
"""


def heavy_imports(args: list[str], cwd: Path) -> list[str]:
    result = subprocess.run([sys.executable, "-c", PROBE.format(args=args, heavy=HEAVY)], capture_output=True,
                            text=True, cwd=cwd, env=child_env(), timeout=120, check=False)
    line = [ln for ln in result.stderr.splitlines() if ln.startswith("HEAVY=")]
    if not line:
        raise RuntimeError(f"probe failed for {args}: {result.stderr[-500:]}")
    return [m for m in line[-1].removeprefix("HEAVY=").split(",") if m]


def run(config: dict[str, Any]) -> dict[str, Any]:
    console = str(Path(sys.executable).with_name("det-k8s"))
    settings = str(ROOT / "examples" / "gpu-cluster.yaml")
    with tempfile.TemporaryDirectory(prefix="det-k8s-bench-") as tmp:
        work = Path(tmp)
        commands: dict[str, list[str]] = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "det-k8s --help": [console, "--help"],
            "det-k8s render": [console, "render", "-f", settings, "-o", str(work / "chart")],
        }
        envs = {name: child_env(pythonpath=ROOT) for name in commands}
        envs["python -c pass"] = child_env()
        baseline = config.get("baseline")
        if baseline is not None:
            commands["det-k8s --help (baseline)"] = [console, "--help"]
            commands["det-k8s render (baseline)"] = [console, "render", "-f", settings, "-o", str(work / "chart-b")]
            envs["det-k8s --help (baseline)"] = envs["det-k8s render (baseline)"] = child_env(pythonpath=baseline)
        timings = time_commands(commands, runs=config["runs"], warmup=2, cwd=work, envs=envs)
        heavy = {"det-k8s --help": heavy_imports(["--help"], work),
                 "det-k8s render": heavy_imports(["render", "-f", settings, "-o", str(work / "probe")], work)}
    return {"timings": {name: t.data() for name, t in timings.items()}, "heavy_sdks_imported": heavy}
