"""`det-k8s nodes map` and `plan --map` through the real entry point: golden plain renderings of the
documents' deadlocks, a fragmented cluster and a mixed 4/8-GPU cluster (a reservation, a victim);
the JSON behind the map against the plan's own JSON; SVG and HTML through Rich's export; the width
deciding between rows and the pool summary; colour only on a colour terminal; one-line errors.

Golden files are in tests/golden/maps; after an intended change run
`UPDATE_GOLDEN=1 ./scripts/test tests/cli/test_nodes_map.py` and review the diff.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

import pytest

from det_k8s.cli.mapview import Note, View, render
from det_k8s.scheduling.explain import describe
from det_k8s.scheduling.model import Policy
from det_k8s.scheduling.occupancy import build
from det_k8s.scheduling.plan import schedule
from tests.cli.test_consent_on_a_terminal import run_in_pty
from tests.conftest import example
from tests.support.builders import mixed_4_8_gpu_scenario

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "maps"
EXPERIMENTS = example("experiments")
SNAPSHOTS = example("snapshots")
FRAGMENTED = SNAPSHOTS / "fragmented.yaml"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with UPDATE_GOLDEN=1 once and review it"
    assert text == path.read_text(), f"{name} changed; if intended, rerun with UPDATE_GOLDEN=1 and review the diff"


@pytest.fixture
def wide(monkeypatch):
    """A 100-column width, as COLUMNS says when piped."""
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.delenv("NO_COLOR", raising=False)


def plan_map(run_cli, *args):
    result = run_cli("plan", *args, "--user", "alice", "--map")
    assert result.code == 0, result.err
    assert "\x1b[" not in result.out and result.out.isascii()
    return result


def test_golden_the_16_gpu_deadlock(run_cli, wide):
    result = plan_map(run_cli, EXPERIMENTS / "distributed-16gpu.yaml", "--snapshot", SNAPSHOTS / "three-4gpu-nodes.yaml")
    check_golden("deadlock-16gpu.txt", result.out)
    assert "distributed-16gpu  rejected" in result.out and "0 placed, 0 queued, 1 rejected" in result.err


def test_golden_two_12_gpu_experiments(run_cli, wide):
    result = plan_map(run_cli, EXPERIMENTS / "distributed-12gpu-a.yaml", EXPERIMENTS / "distributed-12gpu-b.yaml",
                      "--snapshot", SNAPSHOTS / "twelve-gpus.yaml")
    check_golden("deadlock-12gpu.txt", result.out)
    rows = dict(re.findall(r"^  (gpu-[ab])  (\S+)", result.out, re.M))
    assert rows == {"gpu-a": "aaaaaaaa", "gpu-b": "aaaa"}  # all 3 pods of one, none of the other


def test_golden_a_fragmented_cluster(run_cli, wide):
    result = run_cli("nodes", "map", "--snapshot", FRAGMENTED)
    assert result.code == 0, result.err
    check_golden("fragmented.txt", result.out)
    root = Path(__file__).resolve().parents[2]
    for page in ("README.md", "docs/gpu-map.md"):  # the README's example and the map's own page
        assert "```text\n" + result.out + "```" in (root / page).read_text(), f"{page}'s map example is this golden file"
    planned = plan_map(run_cli, EXPERIMENTS / "distributed-16gpu.yaml", "--snapshot", FRAGMENTED)
    check_golden("fragmented-plan.txt", planned.out)
    assert "needs 2 pods x 8 nvidia.com/gpu;" in planned.out and "largest free blocks: gpu-0 4, gpu-3 3" in planned.out


def mixed_map():
    cluster, groups = mixed_4_8_gpu_scenario()
    plan = schedule(cluster, groups, Policy(preemption=True, reserve_after=0),
                    now=datetime(2024, 1, 1, 1, 0, tzinfo=UTC))
    notes = [Note(g.experiment, plan.status(g.id), describe(plan.waiting[g.id])) for g in groups
             if g.id in plan.waiting]
    names = {pod.labels["det-k8s.io/group"]: pod.labels["det-k8s.io/experiment"] for pod in cluster.pods
             if "det-k8s.io/group" in pod.labels}
    notes += [Note(g.experiment, "placed", "after preempting " + ", ".join(names[v] for v in plan.preempting[g.id]))
              for g in groups if g.id in plan.preempting]
    return build(cluster, group_by="node-pool", plan=plan, queue=groups), notes


def test_golden_a_mixed_4_and_8_gpu_cluster_with_a_reservation_and_a_victim():
    omap, notes = mixed_map()
    text = "".join(line.plain.rstrip() + "\n" for line in render(omap, View(True, 100), after_plan=True, notes=notes))
    check_golden("mixed-4-8-gpu.txt", text)
    assert "  small-0  gggg      0 free" in text and "  big-3    DDgggg~~  0 free" in text
    assert "nightly-eval" in text and "evicted" in text and "waiting; nodes reserved for it" in text


def test_the_counts_of_a_summary_and_a_title_add_up_to_the_slots():
    omap, notes = mixed_map()
    lines = [line.plain for line in render(omap, View(True, 200, summary=True), after_plan=True, notes=notes)]
    headers = [line for line in lines if re.match(r"^(a100|v100): ", line)]
    assert len(headers) == 2
    for header in headers:
        slots = int(re.search(r"(\d+) slots:", header)[1])
        counted = header.split("slots: ")[1].split(";")[0]
        assert sum(int(n) for n in re.findall(r"(\d+) [a-z]", counted)) == slots, header
    title = lines[1]
    assert sum(int(n) for n in re.findall(r"(?<!\()(\d+) (?!in place)", title)) == 48, title


def cells_of(data: dict, key: str) -> int:
    return sum(1 for row in data["nodes"] for cell in row["cells"] if key in (cell["holder"], cell.get("planned")))


def test_the_json_is_the_map_and_agrees_with_the_plans_json(run_cli):
    result = run_cli("plan", EXPERIMENTS / "high-priority-8gpu.yaml", EXPERIMENTS / "small-4gpu.yaml",
                     EXPERIMENTS / "distributed-16gpu.yaml", "--snapshot", SNAPSHOTS / "mixed-cluster.yaml",
                     "-f", example("gpu-cluster.yaml"), "-n", "determined", "--preemption", "--map", "-o", "json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert list(data) == ["namespace", "experiments", "victims", "warnings", "map"]  # plan's own JSON, and the map
    omap = data["map"]
    assert all(len(row["cells"]) == row["slots"] == 8 for row in omap["nodes"])
    by_name = {h["name"]: h for h in omap["holders"].values()}
    for record in data["experiments"]:
        placed = sum(pod["slots"] for pod in record["pods"])
        if placed:
            holder = by_name[record["name"]]
            assert (holder["status"], holder["slots"], cells_of(omap, holder["key"])) == ("planned", placed, placed)
        else:
            assert record["name"] not in by_name or by_name[record["name"]]["status"] == "reserving"
    evicted = [h for h in omap["holders"].values() if h["status"] == "evicted"]
    assert [h["name"] for h in evicted] == ["hp-sweep-trial-3"]
    victim_cells = [c for row in omap["nodes"] for c in row["cells"] if c["kind"] == "victim"]
    assert len(victim_cells) == 16 == evicted[0]["slots"]


def test_nodes_map_json_counts_what_the_snapshot_says(run_cli):
    data = json.loads(run_cli("nodes", "map", "--snapshot", FRAGMENTED, "-o", "json").out)
    assert data["groupBy"] == "node-pool" and data["slotType"] == "gpu"
    rows = {row["name"]: row for row in data["nodes"]}
    assert [rows[f"gpu-{i}"]["free"] for i in range(8)] == [4, 2, 2, 3, 1, 2, 2, 0]
    assert sum(row["free"] for row in rows.values()) == 16
    kinds = {(c["kind"], c["pod"]) for row in rows.values() for c in row["cells"]}
    assert ("foreign", "serving/triton-inference-5c7d9") in kinds
    assert ("terminating", "default/stress-test-q8w2z") in kinds
    holders = {h["name"]: (h["kind"], h["slots"], h["user"], h["priority"]) for h in data["holders"].values()}
    assert holders["exp 15 trial 41"] == ("determined", 6, "carol", 60)
    assert holders["vit-large"] == ("det-k8s", 7, "erin", 70)
    assert data["pools"][0]["freeSlotsPerNode"] == {"0": 1, "1": 1, "2": 4, "3": 1, "4": 1}


def svg_rows(svg: str) -> dict[int, list[tuple[float, str]]]:
    """Per text line of the picture: (x, text) of each <text> element."""
    root = ET.fromstring(svg)
    lines: dict[int, list[tuple[float, str]]] = {}
    for element in root.iter("{http://www.w3.org/2000/svg}text"):
        y = float(element.get("y", "0"))
        x = float(element.get("x", "0").split()[0])  # det-k8s places each glyph: x lists one position per glyph
        lines.setdefault(round(y), []).append((x, (element.text or "").replace("\xa0", " ")))
    return lines


def test_the_svg_parses_and_holds_one_cell_per_slot(run_cli, tmp_path, wide):
    svg, html = tmp_path / "map.svg", tmp_path / "map.html"
    result = run_cli("nodes", "map", "--snapshot", FRAGMENTED, "--svg", svg, "--html", html)
    assert result.code == 0, result.err
    assert f"wrote {svg}" in result.err and f"wrote {html}" in result.err
    lines = svg_rows(svg.read_text())
    plain = result.out.splitlines()
    found = 0
    for texts in lines.values():
        row = "".join(text for _, text in sorted(texts))
        match = re.match(r"^\s*(gpu-\d)\s", row)
        if not match:
            continue
        found += 1
        name = match[1]
        cells = [text for x, text in sorted(texts) if len(text) == 1 and text in "ABCDEFG.#-"]
        expected = next(line for line in plain if line.startswith(f"  {name}  ")).split()[1]
        assert "".join(cells) == expected and len(cells) == 8, name
    assert found == 8
    page = html.read_text()
    assert page.lstrip().startswith("<!DOCTYPE html>") and "gpu-7" in page and "resnet-sweep-7" in page


def test_the_svg_loads_nothing_and_puts_every_glyph_at_its_cell_whatever_the_font(run_cli, tmp_path, wide):
    svg = tmp_path / "map.svg"
    result = run_cli("nodes", "map", "--snapshot", FRAGMENTED, "--svg", svg)
    assert result.code == 0, result.err
    text = svg.read_text()
    assert "@font-face" not in text and "@import" not in text and "textLength" not in text
    assert re.findall(r"https?://[^\s\"')]+", text) == ["http://www.w3.org/2000/svg"]  # the namespace, not fetched
    assert all(ref.startswith("#") for ref in re.findall(r"url\(([^)]*)\)", text))  # clip paths of its own
    family = re.search(r"-matrix \{[^}]*font-family: ([^;]*);", text)[1]
    assert family.endswith("monospace") and "Fira Code" not in family  # no web font to fall back from
    root = ET.fromstring(text)
    cell = None
    columns: dict[int, str] = {}
    for element in root.iter("{http://www.w3.org/2000/svg}text"):
        if "matrix" in (element.get("class") or "") or element.get("clip-path") is None:
            continue
        xs = [float(x) for x in element.get("x", "").split()]
        body = element.text or ""
        assert len(xs) == len(body), body  # one position per character: no font decides where a cell goes
        steps = {round(b - a, 2) for a, b in zip(xs, xs[1:], strict=False)}
        assert len(steps) <= 1
        cell = cell or (steps.pop() if steps else None)
        if cell:
            for x, char in zip(xs, body, strict=True):
                column = round(x / cell)
                assert abs(x - column * cell) < 0.01  # every glyph on the grid
                columns.setdefault(round(float(element.get("y", "0"))) * 1000 + column, char)
    assert cell == 12.2
    rows = svg_rows(text)
    gpu3 = next(y for y, texts in rows.items() if any("gpu-3" in t for _, t in texts))
    assert "".join(columns.get(gpu3 * 1000 + 9 + i, "?") for i in range(8)) == "DDDD#..."  # at columns 9 to 16


def test_map_styles_contrast_at_least_wcag_aa():
    """Every letter on its colour, and every cell glyph, reads at 4.5:1 or more (WCAG AA) in the SVG's colours."""
    from rich.color import Color
    from rich.style import Style
    from rich.terminal_theme import SVG_EXPORT_THEME

    from det_k8s.cli import mapview

    def luminance(color: Color | None, default: object) -> float:
        triplet = default if color is None else color.get_truecolor(SVG_EXPORT_THEME)
        def channel(v: int) -> float:
            v = v / 255
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
        return 0.2126 * channel(triplet.red) + 0.7152 * channel(triplet.green) + 0.0722 * channel(triplet.blue)

    styles = [mapview.holder_style(i) for i in range(len(mapview.PALETTE))]
    styles += [*mapview.STYLE.values(), mapview.PLANNED_STYLE, mapview.REPLACING_STYLE, mapview.VICTIM_STYLE]
    for text in styles:
        style = Style.parse(text)
        fg = luminance(style.color, SVG_EXPORT_THEME.foreground_color)
        bg = luminance(style.bgcolor, SVG_EXPORT_THEME.background_color)
        ratio = (max(fg, bg) + 0.05) / (min(fg, bg) + 0.05)
        assert ratio >= 4.5, f"{text}: {ratio:.2f}"


def test_the_plan_svg_marks_planned_and_evicted_cells(run_cli, tmp_path):
    svg = tmp_path / "plan.svg"
    result = run_cli("plan", EXPERIMENTS / "high-priority-8gpu.yaml", "--snapshot", SNAPSHOTS / "mixed-cluster.yaml",
                     "-f", example("gpu-cluster.yaml"), "-n", "determined", "--preemption", "--svg", svg)
    assert result.code == 0, result.err
    assert result.out.startswith("Placed (all pods start together)")  # --svg alone keeps the tables
    text = svg.read_text()
    root = ET.fromstring(text)
    strikes = [style for style in re.findall(r"\.([\w-]+-r\d+) \{([^}]*)\}", text) if "line-through" in style[1]]
    assert strikes, "evicted slots are struck through"
    classes = {s[0] for s in strikes}
    struck = [e for e in root.iter("{http://www.w3.org/2000/svg}text") if e.get("class") in classes]
    assert len([e for e in struck if e.text == "A"]) == 9  # gpu-1 (8 slots nobody takes) and the legend, struck


def test_a_narrow_terminal_gets_the_pool_summary_not_wrapped_rows(run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "24")
    narrow = run_cli("nodes", "map", "--snapshot", FRAGMENTED)
    assert narrow.code == 0
    assert "free slots" in narrow.out and "largest free blocks" in narrow.out and "gpu-5  ######" not in narrow.out
    assert max(len(line) for line in narrow.out.splitlines()) <= 24
    forced = run_cli("nodes", "map", "--snapshot", FRAGMENTED, "--no-summary")
    assert "  gpu-5  ######..  2 free" in forced.out
    monkeypatch.setenv("COLUMNS", "120")
    summary = run_cli("nodes", "map", "--snapshot", FRAGMENTED, "--summary").out
    assert "  free slots  0  1  2  3  4" in summary and "  nodes       1  1  4  1  1" in summary
    assert "largest free blocks: gpu-0 4, gpu-3 3, gpu-1 2" in summary


def test_plan_map_takes_the_summary_flag_and_names_why_nodes_are_unavailable(run_cli, wide):
    result = run_cli("plan", EXPERIMENTS / "high-priority-8gpu.yaml", "--snapshot", SNAPSHOTS / "mixed-cluster.yaml",
                     "--user", "alice", "--map", "--summary")
    assert result.code == 0, result.err
    assert "gpu: 6 nodes, 48 slots: 28 held, 2 other, 18 free;" in result.out
    assert "unavailable: 1 NotReady, 1 cordoned, 4 taint" in result.out  # no -f: no toleration of accelerator=gpu
    assert "  gpu-0  " not in result.out


def test_selector_and_group_by(run_cli, wide):
    result = run_cli("nodes", "map", "--snapshot", SNAPSHOTS / "mixed-cluster.yaml", "-l",
                     "node-pool in (gpu),!dedicated", "--group-by", "accelerator", "-o", "json")
    data = json.loads(result.out)
    assert data["groupBy"] == "accelerator"
    assert [row["name"] for row in data["nodes"]] == [f"gpu-{i}" for i in range(6)]
    bad = run_cli("nodes", "map", "--snapshot", FRAGMENTED, "-l", "pool in (a")
    assert bad.code == 2 and bad.err.count("\n") == 1 and "cannot parse 'pool in (a'" in bad.err


def test_cpu_slots_on_a_cpu_slot_cluster(run_cli, tmp_path, wide):
    snapshot = tmp_path / "cpu.yaml"
    snapshot.write_text(json.dumps({"kind": "List", "items": [
        {"kind": "Node", "metadata": {"name": "cpu-0", "labels": {"node-pool": "cpu"}},
         "status": {"allocatable": {"cpu": "31910m", "pods": "110"}}},
        {"kind": "Pod", "metadata": {"name": "determined-master-demo-x", "namespace": "det",
                                     "labels": {"determined-system": "master"}},
         "spec": {"nodeName": "cpu-0", "containers": [{"name": "m", "resources": {"requests": {"cpu": "2"}}}]},
         "status": {"phase": "Running"}},
        {"kind": "Pod", "metadata": {"name": "exp-1-trial-1-0-a.1-x", "namespace": "det",
                                     "labels": {"determined": "a.1"}},
         "spec": {"nodeName": "cpu-0", "containers": [{"name": "d", "resources": {"requests": {"cpu": "15"}}}]},
         "status": {"phase": "Running"}},
    ]}))
    result = run_cli("nodes", "map", "--snapshot", snapshot, "-f", example("cpu-azure.yaml"))
    assert result.code == 0, result.err
    # (31.91 - 2 for the master) / 7.5 = 3 slots (3.98, as the master truncates); the trial holds 2
    assert result.out.startswith("Now: 3 CPU slots (7.5 CPUs each) on 1 node, by node-pool\n")
    assert "  cpu-0  AA.  1 free" in result.out
    plan = run_cli("plan", EXPERIMENTS / "cpu-experiment.yaml", "--snapshot", snapshot, "-f",
                   example("cpu-azure.yaml"), "--map", "--user", "alice")
    assert "0 placed, 1 queued, 0 rejected" in plan.err  # 2 pods x 1 slot do not fit one free slot: it waits
    assert "  cpu-0  AA.  1 free" in plan.out and "needs 2 pods x 7500m cpu" in plan.out


def test_colour_only_on_a_colour_terminal(tmp_path):
    base = {**os.environ, "COLUMNS": "100"}
    base.pop("NO_COLOR", None)
    args = ["nodes", "map", "--snapshot", str(FRAGMENTED)]
    code, screen = run_in_pty(args, "", {**base, "TERM": "xterm-256color"})
    assert code == 0 and "\x1b[" in screen and "resnet-sweep-7" in screen
    for env in ({**base, "TERM": "xterm-256color", "NO_COLOR": "1"}, {**base, "TERM": "dumb"}):
        code, screen = run_in_pty(args, "", env)
        assert code == 0 and "\x1b[" not in screen and "  gpu-5  ######..  2 free" in screen


def test_an_unwritable_picture_is_one_line_and_exit_1(run_cli, tmp_path):
    result = run_cli("nodes", "map", "--snapshot", FRAGMENTED, "--svg", tmp_path / "missing" / "map.svg")
    assert result.code == 1 and result.err.startswith(f"error: {tmp_path / 'missing' / 'map.svg'}: cannot write")
    assert result.err.count("\n") == 1


# -- live, through the real client against the API emulator -------------------------------------------------


@pytest.fixture
def gpus(cluster, tmp_path):
    """Three 4-GPU nodes and a settings file with maxSlotsPerPod 4."""
    from tests.support.k8s_emulator import node

    for i in range(3):
        cluster.api.put(node(f"gpu-{i}", gpus=4, cpu="31910m", memory="240Gi", labels={"node-pool": "v100"}))
    settings = tmp_path / "settings.yaml"
    settings.write_text("maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")
    return settings


def test_live_map_reads_the_cluster_through_the_api(run_cli, cluster, gpus, wide):
    from tests.support.k8s_emulator import node, pod

    cluster.api.put(node("cpu-0", labels={"node-pool": "cpu"}))
    cluster.api.put(node("gpu-9", gpus=4, unschedulable=True, labels={"node-pool": "v100", "broken": "yes"}))
    cluster.api.put(pod("exp-4-trial-7-0-c1.1-calm-owl", namespace="det", node_name="gpu-1",
                        labels={"determined": "c1.1"}, requests={"nvidia.com/gpu": "4"}))
    cluster.api.put(pod("notebook", namespace="alice", node_name="gpu-2", requests={"nvidia.com/gpu": "1"}))
    cluster.api.put(pod("done", namespace="alice", node_name="gpu-2", phase="Succeeded",
                        requests={"nvidia.com/gpu": "3"}))
    result = run_cli("nodes", "map")
    assert result.code == 0, result.err
    assert "note: no settings: no Determined master configuration in namespace default" in result.err
    rows = dict(re.findall(r"^  (gpu-\d)  (\S+)", result.out, re.M))
    assert rows == {"gpu-0": "....", "gpu-1": "AAAA", "gpu-2": "#...", "gpu-9": "...."}
    assert "  gpu-9  ....  4 free  cordoned" in result.out and "cpu-0" in result.out  # not shown, named
    assert ("GET", "/api/v1/pods", {"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed",
                                    "limit": "500"}) in cluster.api.calls
    selected = json.loads(run_cli("nodes", "map", "-l", "!broken", "-f", gpus, "-o", "json").out)
    assert [row["name"] for row in selected["nodes"]] == ["gpu-0", "gpu-1", "gpu-2"]


def test_live_map_and_describe_show_the_nodes_reserved_for_a_starving_group(run_cli, cluster, gpus, wide):
    from tests.cli.test_experiment_commands import entries

    assert run_cli("experiment", "create", EXPERIMENTS / "small-4gpu.yaml", "-f", gpus).code == 0
    assert run_cli("scheduler", "policy", "--reserve-after", "0").code == 0
    assert run_cli("experiment", "create", EXPERIMENTS / "distributed-12gpu-b.yaml", "-f", gpus).code == 0
    state = entries(cluster)
    small, big = state["small-4gpu"]["id"], state["distributed-12gpu-b"]["id"]
    assert state["distributed-12gpu-b"]["state"] == "queued"
    result = run_cli("nodes", "map", "-f", gpus)
    assert result.code == 0, result.err
    rows = dict(re.findall(r"^  (gpu-\d)  (\S+)", result.out, re.M))
    assert sorted(rows.values()) == ["AAAA", "~~~~", "~~~~"]
    assert "distributed-12gpu-b" in result.out and "waiting; nodes reserved for it" in result.out
    described = run_cli("experiment", "describe", big)
    assert described.code == 0, described.err
    assert sorted(re.findall(r"^  gpu-\d  (\S+)", described.out, re.M)) == ["AAAA", "~~~~", "~~~~"]
    running = run_cli("experiment", "describe", small, "-o", "json")
    data = json.loads(running.out)
    (row,) = data["map"]["nodes"]
    assert row["name"] == data["pods"][0]["node"] and [c["kind"] for c in row["cells"]] == ["det-k8s"] * 4


def test_names_from_a_hand_edited_snapshot_never_drive_the_terminal(run_cli, tmp_path, wide):
    snapshot = tmp_path / "odd.json"
    snapshot.write_text(json.dumps({"kind": "List", "items": [
        {"kind": "Node", "metadata": {"name": "gpu-0", "labels": {"node-pool": "a\x1b[2Jb"}},
         "status": {"allocatable": {"nvidia.com/gpu": "2"}}},
        {"kind": "Pod", "metadata": {"name": "p", "labels": {"app.kubernetes.io/managed-by": "det-k8s",
                                                             "det-k8s.io/group": "g", "det-k8s.io/experiment": "e\x07"}},
         "spec": {"nodeName": "gpu-0", "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
         "status": {"phase": "Running"}}]}))
    result = run_cli("nodes", "map", "--snapshot", snapshot)
    assert result.code == 0, result.err
    assert "\x1b" not in result.out and "\x07" not in result.out
    assert "a?[2Jb: 1 node, 2 slots, 1 free" in result.out and "  A  e?  " in result.out


CLOUDS = Path(__file__).resolve().parents[1] / "data" / "clouds"


@pytest.mark.parametrize("cloud", ["gke", "eks", "aks"])
def test_a_clouds_gpu_taint_that_admission_tolerates_does_not_keep_determined_off(run_cli, cloud, tmp_path):
    """GKE taints GPU pools `nvidia.com/gpu=present:NoSchedule` and its API server's ExtendedResourceToleration
    plugin adds the toleration to every pod asking for GPUs: the map's node states agree with `plan` (issue 12's
    admission detection), they do not call every GPU node blocked. AKS's `sku=gpu:NoSchedule` is no resource's
    name: there both keep Determined's pods off (until the pod spec tolerates it)."""
    snapshot = str(CLOUDS / f"{cloud}.yaml")
    data = json.loads(run_cli("nodes", "map", "--snapshot", snapshot, "-o", "json").out)
    gpu_rows = [row for row in data["nodes"] if row["slots"]]
    assert gpu_rows and not [row for row in gpu_rows if any(s.startswith("taint nvidia.com/gpu") for s in row["state"])]
    usable = {row["name"] for row in gpu_rows if not row["state"] and row["free"]}
    experiment = tmp_path / "e.yaml"
    experiment.write_text("name: one-gpu\nresources: {slots_per_trial: 1}\n")
    plan = json.loads(run_cli("plan", str(experiment), "--snapshot", snapshot, "-o", "json").out)
    placed = {pod["node"] for e in plan["experiments"] for pod in e.get("pods") or ()}
    assert bool(usable) == bool(placed) == (cloud != "aks") and placed <= usable, (usable, plan)


def test_the_map_by_queue_colours_each_slot_by_its_team_queue_and_groups_nodes_by_it(run_cli, tmp_path):
    queues = tmp_path / "queues.yaml"
    queues.write_text("queues:\n- {name: nlp, members: {users: [alice]}}\n"
                      "- {name: vision, members: {users: [bob, carol]}}\n")
    by_group = json.loads(run_cli("nodes", "map", "--snapshot", FRAGMENTED, "-o", "json").out)
    result = run_cli("nodes", "map", "--snapshot", FRAGMENTED, "--by", "queue", "--policy", queues, "-o", "json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    slots = {h["id"]: h["slots"] for h in data["holders"].values()}
    assert {h["kind"] for h in data["holders"].values()} == {"queue"}
    # nlp: alice's two det-k8s groups; vision: bob's group and carol's trial; default: erin's and the trials of no user
    expected = {"nlp": 0, "vision": 0, "default": 0}
    for holder in by_group["holders"].values():
        team = {"alice": "nlp", "bob": "vision", "carol": "vision"}.get(holder["user"], "default")
        expected[team] += holder["slots"]
    assert slots == expected
    cells = [c for row in data["nodes"] for c in row["cells"] if c["holder"]]
    assert sum(1 for _ in cells) == sum(expected.values())
    pools = [row["pool"] for row in data["nodes"]]
    assert pools == sorted(pools, key=lambda p: (p == "(no queue)", p))  # rows grouped by their main queue
    assert {"nlp", "vision", "default"} <= set(pools)
    text = run_cli("nodes", "map", "--snapshot", FRAGMENTED, "--by", "queue", "--policy", queues, "--no-summary").out
    assert "queue nlp" in text and "team queue" in text


def test_the_map_by_queue_from_a_snapshot_needs_the_queues(run_cli):
    result = run_cli("nodes", "map", "--snapshot", FRAGMENTED, "--by", "queue")
    assert result.code == 2 and result.err.splitlines()[-1].startswith(
        "error: --by queue with --snapshot needs --policy FILE")
    assert run_cli("nodes", "map", "--snapshot", FRAGMENTED, "--by", "team").code == 2
