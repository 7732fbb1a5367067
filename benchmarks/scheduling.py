"""Benchmark 1: one scheduling pass at cluster scale, and the whole `det-k8s plan`, against json.load.

The floor is what merely reading the snapshot costs: `json.load` of the same file. Three of them
are reported, from the most lenient to the strictest: `json.load` in a fresh interpreter (the
same start-up cost `det-k8s plan` pays), `json.load` in this process with the cycle collector on
(Python's default) and with it paused (pure parsing; `plan` pauses it too).

- pass: snapshots of N nodes and 6N pods (benchmarks/generate.py, lean objects) and queues of Q
  groups built from generated experiments (slots 1-32, priorities 10-90, six users, submitted up
  to an hour ago so that the starvation guard engages as in a live pass). Timed in-process as
  `plan` runs it: the cycle collector paused, `schedule()` alone, then also building the
  Snapshot from the parsed objects.
- plan: the console script, `det-k8s plan` on 200 experiment files and a 5,000-node,
  30,000-pod snapshot in a fresh process, for lean and for kubectl-shaped objects; optionally
  the same command from an older commit (`--baseline`), runs interleaved.
- yaml: the same snapshot as YAML (`kubectl get -o yaml`) read by det-k8s, against JSON.
"""

from __future__ import annotations

import gc
import json
import random
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from . import generate
from .timing import child_env, time_call, time_commands

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
USERS = ("alice", "bob", "carol", "dave", "erin", "frank")
PODS_PER_NODE = 6


def _paused_gc(function: Any) -> Any:
    def run() -> Any:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return function()
        finally:
            if enabled:
                gc.enable()
    return run


def json_floors(path: Path, runs: int) -> dict[str, Any]:
    def load() -> Any:
        with path.open(encoding="utf-8") as handle:
            return json.load(handle)

    gc.collect()
    default, _ = time_call(load, runs=runs)
    paused, _ = time_call(_paused_gc(load), runs=runs)
    gc.collect()
    return {"json_load": default.data(), "json_load_gc_paused": paused.data()}


def build_queue(count: int, settings: Any, seed: int) -> list[Any]:
    """`count` groups from generated experiment texts (parsed once per distinct text)."""
    from det_k8s.scheduling.experiments import parse_experiment
    from det_k8s.scheduling.groups import build_group

    rng = random.Random(seed)
    parsed: dict[str, Any] = {}
    queue = []
    for sequence in range(count):
        text = generate.experiment(0, rng)
        experiment = parsed.get(text)
        if experiment is None:
            experiment = parsed[text] = parse_experiment(text, "bench.yaml").get()
        submitted = NOW - timedelta(seconds=rng.randrange(3600))
        group = build_group(experiment, settings, group_id=f"g{sequence:06d}", user=rng.choice(USERS),
                            submitted_at=submitted.strftime("%Y-%m-%dT%H:%M:%SZ"), sequence=sequence)
        queue.append(replace(group, experiment=f"bench-{sequence}"))
    return queue


def site_settings(data: Path) -> Any:
    from det_k8s.settings import Document, load_settings

    path = generate.write_settings(data)
    return load_settings([Document(str(path), path.read_text())]).settings()


def measure_passes(data: Path, nodes_list: list[int], groups_list: list[int], runs: int) -> list[dict[str, Any]]:
    from det_k8s.cluster.read import snapshot_from_objects
    from det_k8s.scheduling.labels import running_groups
    from det_k8s.scheduling.model import Policy
    from det_k8s.scheduling.plan import schedule

    settings = site_settings(data)
    rows = []
    for nodes in nodes_list:
        path = generate.write_snapshot(data, nodes, nodes * PODS_PER_NODE)
        floors = json_floors(path, runs)
        with path.open(encoding="utf-8") as handle:
            document = json.load(handle)
        build, snapshot = time_call(_paused_gc(partial(snapshot_from_objects, [document])), runs=runs)
        del document
        running = running_groups(snapshot.pods)
        for count in groups_list:
            queue = build_queue(count, settings, seed=count)
            one_pass = partial(schedule, snapshot, queue, Policy(), running, now=NOW)
            timing, plan = time_call(_paused_gc(one_pass), runs=runs)
            gc.collect()
            rows.append({
                "nodes": nodes, "pods": len(snapshot.pods), "groups": count, "snapshot_mb": round(
                    path.stat().st_size / 1e6, 1),
                **floors, "build_snapshot": build.data(), "schedule": timing.data(),
                "placed": len(plan.placements), "waiting": len(plan.waiting), "rejected": len(plan.rejected),
                "reserved": len(plan.reservations),
            })
        del snapshot, running
        gc.collect()
    return rows


def compare_passes(data: Path, nodes: int, groups_list: list[int], runs: int, baseline: Path,
                   rounds: int = 3) -> list[dict[str, Any]]:
    """The same pass with this det_k8s and the baseline's, each in a child process, rounds interleaved."""
    import statistics
    import subprocess

    path = generate.write_snapshot(data, nodes, nodes * PODS_PER_NODE)
    rows = []
    for count in groups_list:
        samples: dict[str, list[float]] = {"now": [], "baseline": []}
        for _ in range(rounds):
            for name, pythonpath in (("now", _root()), ("baseline", baseline)):
                env = child_env(pythonpath=pythonpath)
                env["PYTHONPATH"] = f"{pythonpath}:{_root()}"
                result = subprocess.run([sys.executable, "-m", "benchmarks.pass_child", str(path), str(count),
                                         str(runs), str(data)], cwd=_root(), env=env, capture_output=True,
                                        text=True, check=True, timeout=1800)
                samples[name].append(json.loads(result.stdout)["schedule"]["median"])
        rows.append({"nodes": nodes, "groups": count, **{name: round(statistics.median(values), 6)
                                                         for name, values in samples.items()}})
    return rows


def plan_command(console: Path, files: list[Path], snapshot: Path, settings: Path) -> list[str]:
    return [str(console), "plan", *map(str, files), "--snapshot", str(snapshot), "-f", str(settings), "-o", "json"]


def measure_plan_cli(data: Path, nodes: int, pods: int, experiments: int, runs: int,
                     baseline: Path | None) -> list[dict[str, Any]]:
    console = Path(sys.executable).with_name("det-k8s")
    settings = generate.write_settings(data)
    files = generate.write_experiments(data, experiments)
    rows = []
    for style in ("lean", "kubectl"):
        snapshot = generate.write_snapshot(data, nodes, pods, style=style)
        commands = {
            "plan": plan_command(console, files, snapshot, settings),
            "json_load_process": [sys.executable, "-c", "import json, sys; json.load(open(sys.argv[1]))",
                                  str(snapshot)],
        }
        envs = {"plan": child_env(pythonpath=_root()), "json_load_process": child_env()}
        if baseline is not None:
            commands["plan_baseline"] = commands["plan"]
            envs["plan_baseline"] = child_env(pythonpath=baseline)
        timings = time_commands(commands, runs=runs, warmup=1, cwd=data, envs=envs)
        floors = json_floors(snapshot, runs)
        rows.append({"style": style, "nodes": nodes, "pods": pods, "experiments": experiments,
                     "snapshot_mb": round(snapshot.stat().st_size / 1e6, 1),
                     **{name: timing.data() for name, timing in timings.items()}, **floors,
                     "phases": plan_phases(snapshot, files, settings)})
    return rows


def plan_phases(snapshot: Path, files: list[Path], settings_file: Path, namespace: str = "default") -> dict[str, float]:
    """Where `det-k8s plan`'s time goes, one run in this process, cycle collector paused as plan does
    (for the queue of `namespace`, as `plan -n` plans)."""
    import time

    from det_k8s.cli.inputs import load_settings_from_cli
    from det_k8s.cli.planning import build_entries, read_experiments
    from det_k8s.scheduling.model import Policy
    from det_k8s.scheduling.plan import running_in, schedule

    marks: dict[str, float] = {}
    enabled = gc.isenabled()
    gc.disable()
    try:
        cluster = timed_snapshot(snapshot, marks)
        start = time.perf_counter()
        settings = load_settings_from_cli([settings_file], None, None).settings()
        entries = build_entries(read_experiments(files), settings, "bench", NOW, namespace)
        marks["settings_and_experiments"] = time.perf_counter() - start
        start = time.perf_counter()
        running = running_in(cluster, namespace)
        schedule(cluster, [e.group for e in entries if e.group is not None], Policy(), running, now=NOW)
        marks["schedule"] = time.perf_counter() - start
    finally:
        if enabled:
            gc.enable()
    del cluster
    gc.collect()
    return {name: round(seconds, 4) for name, seconds in marks.items()}


def timed_snapshot(snapshot: Path, marks: dict[str, float]) -> Any:
    """The Snapshot of a file as the commands build it, timing reading and parsing, building it from the
    parsed objects and freeing those into `marks` (the caller pauses the cycle collector, as they do)."""
    import time

    from det_k8s.cli.inputs import load_documents
    from det_k8s.cluster.read import snapshot_from_objects

    start = time.perf_counter()
    documents = load_documents(snapshot)
    marks["read_and_parse"] = time.perf_counter() - start
    start = time.perf_counter()
    cluster = snapshot_from_objects(documents, str(snapshot))
    marks["build_snapshot"] = time.perf_counter() - start
    start = time.perf_counter()
    del documents
    marks["free_parsed_objects"] = time.perf_counter() - start
    return cluster


def measure_yaml(data: Path, nodes: int) -> dict[str, Any]:
    """Reading the snapshot as YAML (what `kubectl get -o yaml` writes) against the same as JSON."""
    import yaml

    from det_k8s.cli.inputs import load_documents

    source = generate.write_snapshot(data, nodes, nodes * PODS_PER_NODE)
    target = source.with_suffix(".yaml")
    if not target.exists():
        with source.open(encoding="utf-8") as handle:
            target.write_text(yaml.safe_dump(json.load(handle), sort_keys=False))
    as_yaml, _ = time_call(_paused_gc(lambda: load_documents(target)), runs=1)
    as_json, _ = time_call(_paused_gc(lambda: load_documents(source)), runs=1)
    gc.collect()
    return {"nodes": nodes, "yaml_mb": round(target.stat().st_size / 1e6, 1), "yaml": as_yaml.data(),
            "json": as_json.data()}


def _root() -> Path:
    return Path(__file__).resolve().parent.parent


def run(config: dict[str, Any]) -> dict[str, Any]:
    data = Path(config["data"])
    cli = config["plan_cli"]
    baseline = config.get("baseline")
    return {
        "passes": measure_passes(data, config["pass_nodes"], config["pass_groups"], config["runs"]),
        "pass_baseline": compare_passes(data, config["plan_cli"]["nodes"], config["pass_groups"], config["runs"],
                                        baseline) if baseline is not None else [],
        "plan_cli": measure_plan_cli(data, cli["nodes"], cli["pods"], cli["experiments"], config["cli_runs"],
                                     config.get("baseline")),
        "yaml": measure_yaml(data, config["pass_nodes"][0]),
    }
