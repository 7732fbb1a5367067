"""Properties of the occupancy map on random clusters, queues and plans, GPU and CPU slots alike.

For any snapshot and plan: every node has exactly its allocatable slots as cells (net of the
master's own pods, as the master counts them), whatever holds them; each running holder has the
cells its pods' requests make; each planned group has the cells `plan -o json` gives it, in
place of free slots or of the groups the plan evicts; evicted groups are whole; reserved cells
lie on the nodes reserved; and what is left free is what the snapshot leaves free.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from det_k8s.cli.planning import Entry, report
from det_k8s.cluster.model import Pod, Snapshot
from det_k8s.scheduling import labels as L
from det_k8s.scheduling.experiments import Experiment
from det_k8s.scheduling.model import PodGroup, Policy
from det_k8s.scheduling.occupancy import SYSTEM_LABEL, CellKind, SlotUnit, build
from det_k8s.scheduling.plan import schedule
from tests.property.test_scheduling_invariants import NOW, clusters, policies, queues
from tests.support.builders import determined_pod, gang, node, other_pod, task_pods

UNITS = (SlotUnit(), SlotUnit("cpu", 2000), SlotUnit("cpu", 500))
CASES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def busy_clusters(draw) -> Snapshot:
    """The scheduling properties' clusters, plus Determined's own pods, terminating pods and its master."""
    cluster = draw(clusters())
    names = [node.name for node in cluster.nodes]
    extra: list[Pod] = []
    for i in range(draw(st.integers(0, 3))):
        pod = determined_pod(f"exp-{i}-trial-1-0-a{i}.1-x", draw(st.sampled_from(names)),
                             draw(st.sampled_from([1, 2, 4])), f"a{i}.1")
        extra.append(Pod(pod.name, pod.namespace, pod.node_name, pod.phase,
                         {**pod.requests, "cpu": draw(st.sampled_from([0, 1000, 2000, 4000]))}, pod.labels,
                         deleting=draw(st.integers(0, 5)) == 0))
    if draw(st.booleans()):
        extra.append(Pod("determined-master-x", "det", draw(st.sampled_from(names)), "Running", {"cpu": 1500},
                         {SYSTEM_LABEL: "master"}))
    return Snapshot(cluster.nodes, cluster.pods + tuple(extra))


@st.composite
def crowded(draw) -> tuple[Snapshot, list[PodGroup], Policy]:
    """Nodes mostly full of lower-priority det-k8s groups, and urgent groups queued: preemption and
    reservations happen often, where the general strategies rarely get there."""
    nodes = [node(f"n{i}", draw(st.sampled_from([4, 8])), cpu=64) for i in range(draw(st.integers(2, 6)))]
    pods: list[Pod] = []
    for i, each in enumerate(nodes):
        left = each.gpus
        while left > 0 and draw(st.integers(0, 4)) > 0:
            gpus = min(left, draw(st.sampled_from([1, 2, 4])))
            if draw(st.integers(0, 3)) == 0:
                pods.append(other_pod(f"o{i}-{left}", each.name, gpus=gpus, cpu=draw(st.sampled_from([0, 0.5]))))
            else:
                pods += task_pods(f"r{i}-{left}", [each.name], gpus=gpus, cpu=draw(st.sampled_from([0, 2, 2.5])),
                                  priority=draw(st.sampled_from([10, 30, 70])),
                                  deleting=draw(st.integers(0, 9)) == 0)
            left -= gpus
    groups = [gang(f"q{i}", draw(st.integers(1, 3)), draw(st.sampled_from([1, 2, 4, 8])),
                   cpu=draw(st.sampled_from([0, 2, 4])), priority=draw(st.sampled_from([50, 90])), sequence=i)
              for i in range(draw(st.integers(1, 4)))]
    policy = Policy(preemption=True, reserve_after=draw(st.sampled_from([0.0, 300.0])))
    return Snapshot(tuple(nodes), tuple(pods)), groups, policy


def slots(amount: int, unit: SlotUnit) -> int:
    return max(amount, 0) // unit.size


def node_facts(cluster: Snapshot, unit: SlotUnit) -> dict[str, tuple[int, int, bool]]:
    """node -> (its slots, free slots, over-committed), from the snapshot alone."""
    out = {}
    for each in cluster.nodes:
        active = [p for p in cluster.pods if p.active and p.node_name == each.name]
        base = each.allocatable.get(unit.resource, 0) - sum(
            p.requests.get(unit.resource, 0) for p in active if SYSTEM_LABEL in p.labels)
        used = sum(p.requests.get(unit.resource, 0) for p in active if SYSTEM_LABEL not in p.labels)
        taken = sum(slots(p.requests.get(unit.resource, 0), unit) for p in active if SYSTEM_LABEL not in p.labels)
        out[each.name] = (slots(base, unit), slots(base - used, unit), taken > slots(base, unit))
    return out


def holder_id(pod: Pod) -> str | None:
    if L.is_managed(pod.labels):
        return pod.labels[L.GROUP]
    return pod.labels.get(L.DETERMINED)


def plan_json_slots(queue: list[PodGroup], plan) -> dict[str, int]:
    """What `det-k8s plan -o json` says each placed experiment gets: the sum of its pods' slots."""
    entries = [Entry(Experiment(group.experiment), group) for group in queue]
    return {record["name"]: sum(pod["slots"] for pod in record["pods"])
            for record in report(entries, plan, {}) if record["pods"]}


@CASES
@given(st.one_of(st.tuples(busy_clusters(), queues(), policies), crowded()), st.sampled_from(UNITS))
def test_cells_are_the_slots_and_holders_count_what_the_snapshot_and_plan_say(case, unit):
    cluster, queue, policy = case
    plan = schedule(cluster, queue, policy, now=NOW)
    omap = build(cluster, unit, plan=plan, queue=queue)
    facts = node_facts(cluster, unit)
    rows = {row.name: row for row in omap.rows}
    assert set(rows) | set(omap.without_slots) == set(facts) and not set(rows) & set(omap.without_slots)
    for name, (total, _, _) in facts.items():
        assert (rows[name].slots if name in rows else 0) == total

    exact = {name for name, (_, _, over) in facts.items() if not over}
    by_key = omap.holders
    key_of = {(h.id, h.status in ("planned", "reserving")): key for key, h in by_key.items()}

    # running holders: the cells their active pods' requests make, on every node that is not over-committed
    expected: dict[str, int] = {}
    for pod in cluster.pods:
        ident = holder_id(pod)
        if pod.active and ident and pod.node_name in exact and SYSTEM_LABEL not in pod.labels:
            expected[ident] = expected.get(ident, 0) + slots(pod.requests.get(unit.resource, 0), unit)
    for ident, count in expected.items():
        key = key_of.get((ident, False))
        found = sum(c.holder == key for name in exact if name in rows for c in rows[name].cells) if key else 0
        assert found == count, ident

    # planned groups: the cells their pods' requests make, which for GPUs is what plan -o json says
    victims = set(plan.victims)
    by_id = {g.id: g for g in queue}
    json_slots = plan_json_slots(queue, plan)
    for gid, placement in plan.placements.items():
        group = by_id[gid]
        wanted = sum(slots(pod.requests.get(unit.resource, 0), unit) for pod in group.pods)
        key = key_of.get((gid, True))
        if not wanted:
            assert key is None or by_key[key].slots == 0
            continue
        if all(node in exact for _, node in placement):
            cells = [c for row in omap.rows for c in row.cells
                     if (c.kind is CellKind.PLANNED and c.holder == key) or c.planned == key]
            assert len(cells) == by_key[key].slots == wanted, gid
            shapes = {tuple(sorted(p.requests.items())) for p in group.pods}
            if unit.slot_type == "gpu" and len(shapes) == 1 and group.slots == group.slots_per_pod * group.size:
                assert json_slots[group.experiment] == wanted

    # evicted groups are whole: every cell they hold is a victim's, and nothing else is
    for key, holder in by_key.items():
        kinds = {c.kind for row in omap.rows for c in row.cells if c.holder == key}
        if holder.id in victims and holder.status == "evicted":
            assert kinds == {CellKind.VICTIM}
        else:
            assert CellKind.VICTIM not in kinds
    assert {by_key[c.holder].id for row in omap.rows for c in row.cells if c.kind is CellKind.VICTIM} <= victims

    # reserved cells lie on the reserved nodes, and only a reservation makes them
    reserved_nodes = {node for held in plan.reservations.values() for node in held}
    for row in omap.rows:
        if row.count(CellKind.RESERVED):
            assert row.name in reserved_nodes

    # what is left free, reserved or newly planned on free slots is what the snapshot leaves free
    if unit.slot_type == "gpu":
        for name in exact & set(rows):
            row = rows[name]
            assert row.count(CellKind.FREE) + row.count(CellKind.RESERVED) + row.count(CellKind.PLANNED) == \
                facts[name][1]
