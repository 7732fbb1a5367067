"""The occupancy map's data: who holds each slot, counted as the Determined master counts slots.

Holders are told apart by their labels (det-k8s by det-k8s.io/group + managed-by, never by the
`determined` label; Determined tasks by `determined`), a node has exactly its slots as cells,
CPU slots are allocatable CPU net of the master's own pods over slotResourceRequests.cpu, and a
plan adds planned, evicted and reserved cells without changing any node's cell count.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from det_k8s.cluster.model import Constraints, Pod, Taint, Toleration
from det_k8s.scheduling import labels as L
from det_k8s.scheduling.model import Policy
from det_k8s.scheduling.occupancy import (
    ALPHABET,
    GPU_SLOTS,
    CellKind,
    SlotUnit,
    build,
    default_group_by,
    group_unit,
    keys,
    natural,
    slot_unit,
)
from det_k8s.scheduling.plan import schedule
from det_k8s.settings import Document, load_settings
from tests.support.builders import (
    GPU_TAINT,
    TOLERATE_GPU,
    determined_pod,
    gang,
    mixed_4_8_gpu_scenario,
    node,
    other_pod,
    requests,
    snapshot,
    task_pods,
)


def glyphs(row) -> str:
    marks = {CellKind.FREE: ".", CellKind.FOREIGN: "#", CellKind.TERMINATING: "-", CellKind.RESERVED: "~"}
    out = []
    for cell in row.cells:
        if cell.kind is CellKind.PLANNED:
            out.append(cell.holder.lower())
        elif cell.kind is CellKind.VICTIM:
            out.append(cell.planned.lower() if cell.planned else "x")
        else:
            out.append(marks.get(cell.kind) or cell.holder)
    return "".join(out)


def rows(omap) -> dict[str, str]:
    return {row.name: glyphs(row) for row in omap.rows}


def test_each_node_has_one_cell_per_gpu_and_each_holder_its_own_key():
    cluster = snapshot(
        [node("gpu-0", 8), node("gpu-1", 4), node("cpu-0")],
        task_pods("g1", ["gpu-0", "gpu-0"], gpus=2, experiment="sweep", user="ann", priority=30)
        + [determined_pod("exp-3-trial-9-0-ab12.1-calm-owl", "gpu-1", 2, "ab12.1"),
           other_pod("triton", "gpu-0", gpus=1), other_pod("done", "gpu-1", gpus=2, phase="Succeeded")],
    )
    omap = build(cluster)
    assert rows(omap) == {"gpu-0": "AAAA#...", "gpu-1": "BB.."}
    assert omap.without_slots == ("cpu-0",)
    first, second = omap.holders["A"], omap.holders["B"]
    assert (first.kind, first.id, first.name, first.user, first.priority, first.pods, first.slots) == (
        "det-k8s", "g1", "sweep", "ann", 30, 2, 4)
    assert (second.kind, second.id, second.name, second.priority, second.slots) == (
        "determined", "ab12.1", "exp 3 trial 9", None, 2)
    assert omap.rows[0].cells[4].pod == "default/triton"


def test_det_k8s_groups_are_known_by_their_own_labels_not_by_the_determined_label():
    ours = [replace(p, labels={k: v for k, v in p.labels.items() if k != L.DETERMINED})
            for p in task_pods("g1", ["n"], gpus=2)]
    imposter = Pod("fake", "default", "n", "Running", requests(1), {L.GROUP: "g9", L.DETERMINED: "alloc"})
    omap = build(snapshot([node("n", 4)], ours + [imposter]))
    kinds = {h.id: h.kind for h in omap.holders.values()}
    assert kinds == {"g1": "det-k8s", "alloc": "determined"}  # no managed-by: a det-k8s.io label alone is not ours


def test_determined_tasks_are_named_from_newer_labels_then_from_pod_names():
    pods = [
        determined_pod("det-0f3a9c1e-exp-15-trial-41-attempt-1-x8k2p", "n", 1, "a.1",
                       **{"determined.ai/experiment_id": "15", "determined.ai/trial_id": "41",
                          "determined.ai/user": "carol"}),
        determined_pod("exp-7-trial-2-0-b.2-brave-otter", "n", 1, "b.2"),
        determined_pod("cmd-5f-0-c.3-quiet-lynx", "n", 1, "c.3",
                       **{"determined.ai/task_type": "COMMAND", "determined.ai/task_id": "5f"}),
        determined_pod("gc-x", "n", 1, "d.4"),
    ]
    omap = build(snapshot([node("n", 4)], pods))
    assert [(h.name, h.user) for h in omap.holders.values()] == [
        ("exp 15 trial 41", "carol"), ("exp 7 trial 2", ""), ("command 5f", ""), ("d.4", "")]


def test_terminating_pods_still_hold_their_slots():
    pods = task_pods("g1", ["n"], gpus=2, deleting=True) + [
        replace(other_pod("old", "n", gpus=1), deleting=True)]
    omap = build(snapshot([node("n", 4)], pods))
    assert rows(omap) == {"n": "---."}
    assert omap.holders["A"].status == "terminating"
    assert {c.holder for c in omap.rows[0].cells if c.kind is CellKind.TERMINATING} == {"A", None}


def test_a_node_that_lost_a_gpu_never_shows_more_cells_than_it_has():
    omap = build(snapshot([node("n", 3)], task_pods("g1", ["n"], gpus=4)))
    assert rows(omap) == {"n": "AAA"}
    assert omap.rows[0].states == ("over-committed: pods hold 4 of 3 slots",)
    assert omap.rows[0].available  # over-committed is a fact, not a reason to keep pods off


def test_a_node_whose_pod_capacity_is_taken_says_so_and_plan_agrees():
    """4 GPUs free, but the kubelet's maxPods (allocatable pods) is reached: no task pod starts there, whatever the
    GPUs say (kube-scheduler's NodeResourcesFit counts pods). The map names it; plan places nothing there."""
    full = node("full", 4, pods=2)
    omap = build(snapshot([full, node("room", 4)], [other_pod("a", "full"), other_pod("b", "full")]))
    states = {r.name: r.states for r in omap.rows}
    assert states == {"full": ("pods full (2 of 2)",), "room": ()}
    assert not omap.rows[0].available and omap.pools()[0].unavailable == (("pods full", 1),)
    assert rows(omap)["full"] == "...."  # the GPUs themselves are free: drawn as they are
    plan = schedule(snapshot([full], [other_pod("a", "full"), other_pod("b", "full")]), [gang("g", 1, gpus=1)],
                    Policy())
    assert plan.placements == {} and "g" in plan.waiting


def test_node_states_name_what_keeps_determineds_pods_off():
    nodes = [node("a", 4, ready=False), node("b", 4, cordoned=True), node("c", 4, taints=[GPU_TAINT]),
             node("d", 4, labels={"pool": "x"}), node("e", 4, taints=[Taint("soft", "", "PreferNoSchedule")])]
    pinned = Constraints(node_selector={"pool": "y"})
    states = {r.name: r.states for r in build(snapshot(nodes), constraints=pinned).rows}
    assert states == {"a": ("NotReady", "not selected (task pod nodeSelector/affinity)"),
                      "b": ("cordoned", "not selected (task pod nodeSelector/affinity)"),
                      "c": ("taint accelerator=gpu:NoSchedule", "not selected (task pod nodeSelector/affinity)"),
                      "d": ("not selected (task pod nodeSelector/affinity)",),
                      "e": ("not selected (task pod nodeSelector/affinity)",)}
    tolerated = {r.name: r.states for r in build(snapshot(nodes), constraints=TOLERATE_GPU).rows}
    assert tolerated["c"] == () and tolerated["e"] == ()


def cpu_settings(per_slot: str):
    text = f"slotType: cpu\nslotResourceRequests: {{cpu: {per_slot}}}\nmaxSlotsPerPod: 1\n"
    return load_settings([Document("s.yaml", text)]).settings()


def test_cpu_slots_are_allocatable_cpu_net_of_the_masters_pods_over_the_slot_request():
    unit = slot_unit(cpu_settings("2"))
    assert unit == SlotUnit("cpu", 2000) and unit.slot_type == "cpu"
    assert slot_unit(cpu_settings("0.0001")) == SlotUnit("cpu", 1)  # below a millicore: one, never zero
    assert slot_unit(None) == GPU_SLOTS
    master = Pod("determined-master-x", "det", "n", "Running", {"cpu": 2000}, {"determined-system": "master"})
    daemons = [other_pod(f"ds-{i}", "n", cpu=0.1) for i in range(3)]  # 300m: no whole slot, but one fewer fits
    trial = Pod("exp-1-trial-1-0-a.1-x", "det", "n", "Running", {"cpu": 4000}, {"determined": "a.1"})
    omap = build(snapshot([node("n", cpu=11.9)], [master, trial, *daemons]), unit)
    # (11.9 - 2 master) / 2 = 4 slots; the trial holds 2; 9.9 - 4 - 0.3 = 5.6 CPUs free: 2 slots; 0 left to fractions
    assert rows(omap) == {"n": "AA.."}
    crowded = build(snapshot([node("n", cpu=12)], [trial, *daemons, other_pod("big", "n", cpu=3)]), unit)
    # 12 / 2 = 6 slots: trial 2, big 1 whole (3 CPUs), free (12 - 4 - 3.3) / 2 = 2, fractions 1
    assert rows(crowded) == {"n": "AA##.."}
    assert [c.pod for c in crowded.rows[0].cells if c.kind is CellKind.FOREIGN] == ["default/big", None]


def test_a_groups_unit_is_read_from_its_pods():
    assert group_unit(gang("g", 2, 4)) == GPU_SLOTS
    cpu_group = replace(gang("g", 2, cpu=15), slots=4)  # 2 pods x 2 slots of 7.5 CPUs
    assert group_unit(cpu_group) == SlotUnit("cpu", 7500)


def test_keys_are_letters_without_x_then_pairs():
    assert "X" not in ALPHABET and len(set(ALPHABET)) == 25
    assert keys(3) == ["A", "B", "C"]
    many = keys(26)
    assert many[:2] == ["AA", "AB"] and many[-1] == "BA" and len(set(many)) == 26


def test_rows_are_grouped_by_a_pool_label_and_names_sort_as_numbers():
    nodes = [node("gpu-10", 4, labels={"node-pool": "b"}), node("gpu-2", 4, labels={"node-pool": "b"}),
             node("gpu-1", 4, labels={"node-pool": "a"}), node("odd", 4)]
    assert default_group_by(nodes) == "node-pool"
    omap = build(snapshot(nodes), group_by="node-pool")
    assert [(r.pool, r.name) for r in omap.rows] == [("a", "gpu-1"), ("b", "gpu-2"), ("b", "gpu-10"), ("", "odd")]
    assert natural("n-9") < natural("n-10")
    assert default_group_by([node("z", 4, labels={"topology.kubernetes.io/zone": "z1",
                                                  "cloud.google.com/gke-nodepool": "p"})]) == \
        "cloud.google.com/gke-nodepool"


def test_pool_summary_counts_nodes_by_free_slots_and_names_the_largest_blocks():
    nodes = [node(f"n{i}", 8) for i in range(5)] + [node("off", 8, cordoned=True)]
    pods = task_pods("g1", ["n0", "n1"], gpus=8) + task_pods("g2", ["n2"], gpus=6)
    (pool,) = build(snapshot(nodes, pods)).pools()
    assert pool.histogram == ((0, 2), (2, 1), (8, 2))
    assert pool.unavailable == (("cordoned", 1),)
    assert pool.largest == (("n3", 8), ("n4", 8), ("n2", 2))
    assert (pool.nodes, pool.slots, pool.free) == (6, 48, 26)
    (pinned,) = build(snapshot(nodes, pods), constraints=Constraints(node_selector={"pool": "x"})).pools()
    assert pinned.unavailable == (("cordoned", 1), ("not selected", 5)) and pinned.histogram == ()


NOW = datetime(2024, 1, 1, 1, 0, tzinfo=UTC)


def test_a_plan_highlights_placements_evictions_and_the_reservation():
    cluster, groups = mixed_4_8_gpu_scenario()
    plan = schedule(cluster, groups, Policy(preemption=True, reserve_after=0), now=NOW)
    assert plan.victims == ("low",) and plan.preempting == {"urgent": ("low",)}
    assert set(plan.placements) == {"urgent", "tiny"} and "wide" in plan.reservations
    omap = build(cluster, plan=plan, queue=groups)
    by_id = {h.id: h for h in omap.holders.values()}
    assert [by_id[g].status for g in ("low", "urgent", "wide", "tiny")] == ["evicted", "planned", "reserving", "planned"]
    for row, before in zip(omap.rows, build(cluster).rows, strict=True):
        assert row.slots == before.slots
    urgent, tiny = by_id["urgent"].key, by_id["tiny"].key
    cells = [(row.name, cell) for row in omap.rows for cell in row.cells]
    assert sum(cell.holder == urgent or cell.planned == urgent for _, cell in cells) == 20 == by_id["urgent"].slots
    assert sum(cell.holder == tiny for _, cell in cells) == 2
    assert [(c.kind, c.planned) for c in omap.rows[4].cells] == [(CellKind.VICTIM, urgent)] * 4  # small-0
    reserved = {name for name, cell in cells if cell.kind is CellKind.RESERVED}
    assert reserved == {"big-3"} and set(plan.reservations["wide"]) >= reserved
    assert rows(omap) == {"big-0": "AAAAgggg", "big-1": "BBBBBBBB", "big-2": "CCCCgggg", "big-3": "DDgggg~~",
                          "small-0": "gggg", "small-1": "FFFF", "small-2": "##ii", "small-3": "gggg"}


def test_selected_nodes_only():
    cluster = snapshot([node("a", 4), node("b", 4)], task_pods("g", ["a", "b"], gpus=4))
    omap = build(cluster, nodes=["b"])
    assert rows(omap) == {"b": "AAAA"} and omap.holders["A"].slots == 4


def test_a_slot_must_be_positive():
    with pytest.raises(ValueError):
        SlotUnit("cpu", 0)


def test_the_map_data_is_plain_json():
    import json

    omap = build(snapshot([node("n", 2)], task_pods("g", ["n"], gpus=1)), group_by="node-pool")
    data = json.loads(json.dumps(omap.to_dict()))
    assert data["slotType"] == "gpu" and data["slotSize"] == "1"
    assert data["nodes"][0]["cells"] == [{"kind": "det-k8s", "holder": "A", "pod": "determined/g-0"},
                                         {"kind": "free", "holder": None, "pod": None}]
    assert data["holders"]["A"]["id"] == "g" and data["pools"][0]["freeSlotsPerNode"] == {"1": 1}


def test_tolerations_used_for_states_are_the_task_pods():
    toleration = Toleration("dedicated", "Exists")
    nodes = [node("n", 4, taints=[Taint("dedicated", "ml", "NoExecute")])]
    assert build(snapshot(nodes), constraints=Constraints(tolerations=(toleration,))).rows[0].states == ()
