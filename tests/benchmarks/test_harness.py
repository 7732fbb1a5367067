"""The benchmark harness runs end to end on tiny sizes and writes well-formed results (never judging speed).

`python -m benchmarks --quick` exercises every benchmark: snapshot generation, the pass and the
`plan` command, the exact optimum (HiGHS, in the test extra for this), the contention simulation,
submission against the API emulator in its own process, and start-up. What is checked is the shape of
the data and the behaviour it records (whole groups, no deadlock for det-k8s, no heavy SDK at
start-up), not how long anything took.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory):
    data = tmp_path_factory.mktemp("bench")
    out = data / "RESULTS.md"
    result = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--data", str(data), "--out", str(out)],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((data / "results-quick.json").read_text()), out.read_text()


def timing(entry) -> bool:
    return entry["runs"] >= 1 and 0 < entry["min"] <= entry["median"]


pytestmark = pytest.mark.emulator


def test_the_report_has_the_machine_every_section_and_a_verdict_per_goal(quick_run):
    results, report = quick_run
    assert results["quick"] is True and results["machine"]["cores"] >= 1 and results["machine"]["python"]
    for heading in ("## Goals", "## 1.", "## 2.", "## 3.", "## 4.", "## 5.", "## 6.", "## 7.", "## 8.", "## 9.",
                    "## Against the published anchors"):
        assert heading in report, heading
    goals = report.split("## Goals")[1].split("## 1.")[0].splitlines()
    rows = [line for line in goals if line.startswith("| ") and line[2].isdigit()]
    assert [row[2] for row in rows] == ["1", "2", "3", "4", "5", "6", "7", "8", "9"]
    assert all("**met**" in row or "**not met**" in row for row in rows if not row.startswith("| 4."))
    assert "Quick run" in report


def test_the_scheduling_benchmark_times_every_size_and_the_whole_command(quick_run):
    data = quick_run[0]["scheduling"]
    config = quick_run[0]["configs"]["scheduling"]
    assert [(r["nodes"], r["groups"]) for r in data["passes"]] == [
        (n, g) for n in config["pass_nodes"] for g in config["pass_groups"]]
    for row in data["passes"]:
        assert all(timing(row[key]) for key in ("json_load", "json_load_gc_paused", "build_snapshot", "schedule"))
        assert row["placed"] + row["waiting"] + row["rejected"] == row["groups"]
    assert {r["style"] for r in data["plan_cli"]} == {"lean", "kubectl"}
    for row in data["plan_cli"]:
        assert timing(row["plan"]) and timing(row["json_load_process"])
        assert set(row["phases"]) >= {"read_and_parse", "build_snapshot", "schedule"}
    assert timing(data["yaml"]["yaml"]) and timing(data["yaml"]["json"])


def test_the_map_benchmark_times_the_summary_against_plan_on_the_same_snapshot(quick_run):
    data = quick_run[0]["occupancy"]
    config = quick_run[0]["configs"]["occupancy"]
    assert {r["style"] for r in data["rows"]} == {"lean", "kubectl"}
    for row in data["rows"]:
        assert all(timing(row[key]) for key in ("plan", "map", "map_json", "plan_map"))
        shape = row["phases"]["map"]
        assert shape["rows"] + shape["without_slots"] == config["nodes"] and shape["rows"] > 200
        assert shape["summarised"] and shape["cells"] > shape["rows"] and shape["holders"] > 0
        assert set(row["phases"]["seconds"]) == {"read_and_parse", "build_snapshot", "free_parsed_objects",
                                                 "build_map", "draw_summary"}


def test_the_constrained_plan_is_timed_and_every_experiment_decided(quick_run):
    data = quick_run[0]["constraints"]
    assert timing(data["plan"]) and timing(data["json_load_process"])
    assert sum(data["outcome"].values()) == data["experiments"]
    assert data["constrained_pods"] > 0 and data["constrained_experiments"] > 0
    assert {"PersistentVolumeClaim", "PersistentVolume", "StorageClass", "Namespace"} <= set(data["kinds"])


def test_quality_is_scored_against_both_optima_and_no_plan_is_partial(quick_run):
    data = quick_run[0]["quality"]
    assert data["scored"] + data["skipped_no_room"] == data["instances"] and data["scored"] > 0
    assert set(data["policies"]) == {"default", "guard_engaged", "reservations_off"}
    for summary in data["policies"].values():
        assert summary["partial_groups"] == 0 and summary["overcommitted_nodes"] == 0
        for optimum in ("order_free", "priority_first"):
            assert 0 <= summary[optimum]["worst"] <= summary[optimum]["mean"] <= 1
    own = data["policies"]["default"]["own_order"]  # the pass's own order, packed perfectly
    assert 0 < own["worst"] <= own["mean"] and own["below"] + own["above"] <= data["scored"]
    assert own["optimum_vs_priority_first"] > 0


def test_contention_shows_the_documents_deadlocks_for_per_pod_placement_only(quick_run):
    data = quick_run[0]["contention"]
    assert len(data["documents"]) == 2 and len(data["traces"]) == 1
    for case in data["documents"] + data["traces"]:
        for ours in (case["det_k8s"], case["det_k8s_no_guard"]):
            assert ours["jobs_ever_partial"] == ours["broken_plans"] == 0 and not ours["deadlocked"]
            assert ours["partial_gpu_hours"] == 0
    for case in data["documents"]:
        assert case["per_pod"]["deadlocked"] and case["per_pod"]["partial_gpu_hours"] > 0


def test_submission_creates_the_group_for_each_worker_count(quick_run):
    data = quick_run[0]["submission"]
    rows = data["series"][0]["rows"]
    assert [r["workers"] for r in rows] == quick_run[0]["configs"]["submission"]["workers"]
    assert all(r["pods_per_second"] > 0 and r["partial_window_ms"] >= 0 for r in rows)


def test_startup_times_the_commands_against_kubectl_and_helm_and_finds_no_heavy_sdk(quick_run):
    from det_k8s.cli.app import COMMANDS

    data = quick_run[0]["startup"]
    assert {"python -c pass", "kubectl version --client", "helm version", "det-k8s --version", "det-k8s --help",
            "det-k8s validate -f examples/gpu-cluster.yaml", "det-k8s render"} <= set(data["timings"])
    assert {f"det-k8s {name} --help" for name in COMMANDS} <= set(data["timings"])
    assert all(timing(t) for t in data["timings"].values())
    for line, argv in data["argv"].items():  # each runs the command line it is named after
        if line.startswith("det-k8s") and "(baseline)" not in line and line != "det-k8s render":
            assert [Path(a).name if a.endswith(".yaml") else a for a in argv] == line.replace(
                "examples/", "").split(), line
    assert [(r["peer"], r["goal"]) for r in data["ratios"]][:2] == [("kubectl version --client", 2.0),
                                                                     ("helm version", 3.0)]
    assert all(r["paired_median"] > 0 and r["met"] == (r["paired_median"] <= r["goal"]) for r in data["ratios"])
    assert data["versions"]["helm"].startswith("v") and data["versions"]["typer"]
    assert data["heavy_sdks_imported"] == {"det-k8s --help": [], "det-k8s validate": [], "det-k8s render": []}


def test_the_own_order_optimum_follows_the_order_it_is_given():
    """Two groups of the same size competing for one node: whichever comes first in the order is the one placed."""
    from benchmarks.quality import Instance, order_optimum
    from det_k8s.cluster.model import GPU, PODS, Constraints, Node, Snapshot
    from det_k8s.scheduling.model import PodGroup, PodRequest

    def group(gid: str, gpus: int) -> PodGroup:
        return PodGroup(gid, gid, "a", 50, "2026-11-21T12:00:00Z", 0,
                        (PodRequest(f"{gid}-0", 0, {GPU: gpus * 1000}, Constraints()),), gpus)

    node = Node("n0", {GPU: 8000, "cpu": 64000, PODS: 110000}, {"pool": "a100"})
    case = Instance(Snapshot((node,), ()), [group("small", 2), group("big", 8)], {"n0": 8}, {"n0": "a100"})
    assert order_optimum(case, ["small", "big"]) == 2  # the small one first: the big one no longer fits
    assert order_optimum(case, ["big", "small"]) == 8


def test_the_binding_benchmark_binds_every_group_whole_from_a_watch(quick_run):
    data = quick_run[0]["binding"]
    config = quick_run[0]["configs"]["binding"]
    assert data["throughput"]["pods"] == config["backlog_groups"] * 4 and data["throughput"]["pods_per_second"] > 0
    assert data["latency"]["bound"] == data["latency"]["groups"] == config["arrivals"]
    assert 0 < data["latency"]["p50_s"] <= data["latency"]["p99_s"] <= data["latency"]["max_s"]
    requests = data["requests"]
    assert requests["full_lists_of_pods_or_nodes"] == 0  # listed once at the start, then only the watch
    assert requests["by_kind"]["create pods/binding"] >= config["arrivals"] and requests["per_bound_group"] > 0


def test_contention_with_teams_never_breaks_a_group_and_reports_each_teams_share(quick_run):
    for case in quick_run[0]["contention"]["teams"]:
        for key in ("with_quotas", "without_quotas"):
            ours = case[key]
            assert ours["partial_groups"] == ours["broken_plans"] == 0 and not ours["deadlocked"]
            assert set(ours["share"]) == set(ours["entitled"]) and 0 <= ours["jain"] <= 1
            assert ours["owed_team_hours"] is not None and ours["owed_team_hours"] >= 0
        assert case["per_pod"]["owed_team_hours"] is None


def test_the_queue_benchmark_times_three_variants_and_runs_the_documented_scenarios(quick_run):
    data = quick_run[0]["queues"]
    (row,) = data["rows"]
    assert row["queues"] == 50 and set(row["outcome"]) == {"without", "with", "with_open"}
    assert row["outcome"]["with_open"]["queue_limit"] == 0  # the open tree holds nothing back
    assert all(row[f"cpu_{name}"] > 0 for name in ("without", "with", "with_open"))
    assert [s["scenario"] for s in data["scenarios"]][:2] == ["borrowing example", "borrowingLimit"]
    assert sum(not s["same"] for s in data["scenarios"]) == 1  # a parent's weight is not used (DEVELOPERS.md)
    assert "## 9. Team queues" in quick_run[1]


def test_the_grouping_replay_runs_against_an_older_revision_too():
    """`python -m benchmarks.grouping --baseline REV` (the loop's CPU per pod event and per fast pass, replayed): it
    measures REV's det_k8s in a child and this checkout's, and both fast passes place the replayed ready gang (the
    figures themselves are not judged)."""
    result = subprocess.run([sys.executable, "-m", "benchmarks.grouping", "--baseline", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    for run in (report["baseline"], report["this"]):
        assert run["fast_pass_placed"] == 1 and set(run["grouping_ms"]) == {"1204", "12004"}
        assert run["fast_pass_ms_5000_nodes"] > 0
    assert report["machine"]["commit"] and report["baseline"]["revision"] == "HEAD"


def test_the_side_by_side_stages_see_a_busy_machine_and_wait_for_quiet_at_most_their_limit():
    """benchmarks/sidebyside.py starts each paced stage on a quiet machine (`wait_quiet`): its measure of busy must see
    every core spinning, and its wait must end at its limit when the machine stays busy."""
    import os

    from benchmarks.sidebyside import QUIET_BUSY, cpu_busy, wait_quiet

    spin = "import time\nend = time.monotonic() + 20\nwhile time.monotonic() < end: pass\n"
    spinners = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(os.cpu_count() or 1)]
    try:
        assert cpu_busy(1.0) > 0.75
        said: list[str] = []
        waited, busy = wait_quiet(2.0, said.append)
        assert busy > QUIET_BUSY and 2.0 <= waited < 15.0  # (gave up at its limit, after a window or two)
        assert said and "busy after" in said[0]
    finally:
        for child in spinners:
            child.kill()
            child.wait()


def test_the_side_by_side_ratios_are_against_the_tuned_peers_first_and_its_table_names_each_run():
    """benchmarks/sidebyside.py runs each peer twice, with its client limit lifted ("-tuned") and with its defaults;
    every ratio names which, the tuned ones (with the goals) first."""
    from benchmarks.sidebyside import SCHEDULERS, TUNED_BURST, TUNED_QPS, label, markdown, ratios

    def run(which: str, pods_s: float, p99: float, cpu_ms: float) -> dict[str, object]:
        return {"scheduler": which, "pods_per_s": pods_s, "p99_s": p99, "p50_s": p99 / 2, "max_s": p99 * 2,
                "apiserver_cpu_ms_per_pod": cpu_ms, "paced_partial": 0, "backlog_partial": 0, "backlog_groups": 10,
                "requests_per_group": 9.0, "apiserver_cpu_s": 1.0, "scheduler_cpu_s": 2.0, "client_throttled_lines": 0,
                "throttled_429": 0, "peak_mib": 100.0, "load_paced": [1.0], "load_backlog": [1.0],
                "requests_by_verb": {"create pods/binding": 40}}

    results = [run("det-k8s", 120.0, 0.1, 3.0), run("kube-scheduler-tuned", 240.0, 0.04, 2.0),
               run("coscheduling-tuned", 150.0, 0.05, 2.5), run("kube-scheduler", 50.0, 0.05, 2.0),
               run("coscheduling", 50.0, 0.2, 2.5)]
    got = ratios(results)
    keys = list(got)
    assert keys[0] == "pods/s det-k8s / kube-scheduler tuned (>= 1.0)" and got[keys[0]] == 0.5
    assert got["p99 det-k8s / coscheduling tuned (<= 1.0)"] == 2.0
    assert got["API server CPU per bound pod det-k8s / kube-scheduler tuned (<= 1.0)"] == 1.5
    assert got["pods/s det-k8s / kube-scheduler defaults"] == 2.4
    assert got["p99 det-k8s / coscheduling defaults"] == 0.5
    assert keys.index("pods/s det-k8s / kube-scheduler defaults") > keys.index("p99 det-k8s / coscheduling tuned (<= 1.0)")
    assert set(SCHEDULERS) == {r["scheduler"] for r in results}
    assert [label(s) for s in SCHEDULERS] == ["det-k8s", "kube-scheduler (tuned)", "coscheduling (tuned)",
                                              "kube-scheduler (defaults)", "coscheduling (defaults)"]
    report = {"machine": {"date": "d", "commit": "c", "cpu": "cpu", "cores": 2, "memory_gib": 24, "python": "3.11",
                          "load_at_start": [0.1]},
              "kubernetes": "1.37.2", "etcd": "3.6.16", "kwok": "0.8.0", "scheduler_plugins": "0.34.7",
              "args": {"pods_per_group": 4, "nodes": 10, "paced_groups": 5, "rate": 4.0, "node_lease": 0},
              "results": results, "ratios": got}
    text = markdown(report)
    assert f"QPS {TUNED_QPS}, burst {TUNED_BURST}" in text
    assert "| kube-scheduler (tuned) | 0.02 s | 0.04 s |" in text
