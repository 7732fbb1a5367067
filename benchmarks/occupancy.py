"""Benchmark 6: the occupancy map at cluster scale, against `det-k8s plan` on the same snapshot.

- map: the console script, `det-k8s nodes map --snapshot S -f site.yaml` in a fresh process, its
  output piped (plain text; 5,000 nodes are more than a screen of rows, so each pool is
  summarised), against `det-k8s plan` with the benchmark's 200 experiment files on the same
  snapshot and settings (`-o json`, exactly as benchmark 1 runs it), runs interleaved round by
  round, for lean and for kubectl-shaped objects. Also timed in the same rounds: `nodes map -o
  json` (every cell of every node) and `plan --map` (the plan and the map after it).
- phases: one run in this process, the cycle collector paused as the commands pause it: reading
  and parsing, building the Snapshot, building the map (`occupancy.build`), drawing the summary.
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path
from typing import Any

from . import generate
from .scheduling import _root, plan_command, timed_snapshot
from .timing import child_env, time_commands


def map_command(console: Path, snapshot: Path, settings: Path, *extra: str) -> list[str]:
    return [str(console), "nodes", "map", "--snapshot", str(snapshot), "-f", str(settings), *extra]


def phases(snapshot: Path, settings_file: Path) -> dict[str, Any]:
    """Where `nodes map`'s time goes, and what the map holds (one run in this process)."""
    from det_k8s.cli.inputs import load_settings_from_cli
    from det_k8s.cli.mapview import View, render
    from det_k8s.scheduling.occupancy import build, default_group_by, slot_unit, task_pod_constraints

    marks: dict[str, float] = {}
    enabled = gc.isenabled()
    gc.disable()
    try:
        cluster = timed_snapshot(snapshot, marks)
        settings = load_settings_from_cli([settings_file], None, None).settings()
        start = time.perf_counter()
        omap = build(cluster, slot_unit(settings), constraints=task_pod_constraints(settings),
                     group_by=default_group_by(cluster.nodes))
        marks["build_map"] = time.perf_counter() - start
        start = time.perf_counter()
        lines = render(omap, View(True, 80))
        text = "".join(line.plain + "\n" for line in lines)
        marks["draw_summary"] = time.perf_counter() - start
    finally:
        if enabled:
            gc.enable()
    shape = {"rows": len(omap.rows), "cells": sum(row.slots for row in omap.rows),
             "without_slots": len(omap.without_slots), "holders": len(omap.holders),
             "pools": len(omap.pools()), "summarised": "free slots" in text, "lines": len(lines)}
    del cluster, omap
    gc.collect()
    return {"seconds": {name: round(seconds, 4) for name, seconds in marks.items()}, "map": shape}


def run(config: dict[str, Any]) -> dict[str, Any]:
    data = Path(config["data"])
    nodes, pods, experiments = config["nodes"], config["pods"], config["experiments"]
    console = Path(sys.executable).with_name("det-k8s")
    settings = generate.write_settings(data)
    files = generate.write_experiments(data, experiments)
    env = child_env(pythonpath=_root())
    rows = []
    for style in ("lean", "kubectl"):
        snapshot = generate.write_snapshot(data, nodes, pods, style=style)
        commands = {
            "plan": plan_command(console, files, snapshot, settings),
            "map": map_command(console, snapshot, settings),
            "map_json": map_command(console, snapshot, settings, "-o", "json"),
            "plan_map": [*plan_command(console, files, snapshot, settings)[:-2], "--map"],
        }
        timings = time_commands(commands, runs=config["runs"], warmup=1, cwd=data,
                                envs=dict.fromkeys(commands, env))
        rows.append({"style": style, "nodes": nodes, "pods": pods, "experiments": experiments,
                     "snapshot_mb": round(snapshot.stat().st_size / 1e6, 1),
                     **{name: timing.data() for name, timing in timings.items()},
                     "phases": phases(snapshot, settings)})
    return {"rows": rows}
