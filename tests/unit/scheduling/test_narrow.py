"""A fast pass plans a ready gang on the tightest nodes that can take it (scheduling/narrow.py, issue 24): only where
that finds what a plan on the whole snapshot finds, and never a placement the whole snapshot would refuse."""

from __future__ import annotations

import heapq
import random
from collections import Counter
from dataclasses import replace

import pytest

from det_k8s.cluster.model import NO_CONSTRAINTS, HostPort, LabelSelector, PodAffinityTerm, Snapshot
from det_k8s.scheduling.labels import running_groups
from det_k8s.scheduling.model import Policy
from det_k8s.scheduling.narrow import MIN_NODES, NodeIndex, clean, narrowed
from det_k8s.scheduling.plan import schedule
from tests.support.builders import gang as new_gang
from tests.support.builders import node, other_pod, snapshot, task_pods


def gang(*args, **kwargs):
    """A gang of pods that exist (the master's): admission has had its say."""
    group = new_gang(*args, **kwargs)
    return replace(group, pods=tuple(replace(pod, admitted=True) for pod in group.pods))


def busy_cluster(seed: int, nodes: int = 600) -> Snapshot:
    """Nodes of 8 GPUs, each with 0-8 of them taken by other pods or det-k8s groups, at random."""
    rng = random.Random(seed)
    pods = []
    for i in range(nodes):
        taken = rng.choice([0, 0, 1, 2, 4, 6, 7, 8])
        if taken and rng.random() < 0.5:
            pods += task_pods(f"run-{i}", [f"n{i:04d}"], gpus=taken, user=rng.choice(["bob", "carol"]))
        elif taken:
            pods.append(other_pod(f"x{i}", f"n{i:04d}", gpus=taken))
    return snapshot([node(f"n{i:04d}", 8, cpu=64) for i in range(nodes)], pods)


@pytest.mark.parametrize("seed", range(20))
def test_the_tightest_nodes_give_the_plan_the_whole_cluster_gives(seed):
    cluster = busy_cluster(seed)
    rng = random.Random(seed)
    queue = [gang(f"g{k}", rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 4, 8]), sequence=k, user=rng.choice(["a", "b"]))
             for k in range(rng.choice([1, 1, 2, 3]))]
    running = running_groups(cluster.pods)
    narrow = narrowed(cluster, queue, Policy(), running)
    assert narrow is not None
    small = narrow.snapshot
    assert MIN_NODES <= len(small.nodes) < len(cluster.nodes)
    names = {n.name for n in small.nodes}
    # every pod on a kept node is kept (its usage counts), none of another node's; running groups wholly on kept nodes
    assert {p.name for p in small.pods} == {p.name for p in cluster.pods if p.node in names}
    assert {g.id for g in narrow.running} == {g.id for g in running if all(p.node in names for p in g.pods)}
    whole = schedule(cluster, queue, Policy(), running)
    part = schedule(small, queue, Policy(), narrow.running)
    # (pods asking only for GPUs, on nodes with room: the narrowed plan is clean in every such case, and the same)
    assert clean(part, queue, narrow) and clean(whole, queue)
    assert part.placements == whole.placements


def test_the_candidates_are_the_tightest_nodes_with_room_for_each_pod_size():
    # 400 nodes of 8 GPUs: 1 GPU free on n0000-n0199, 4 free on n0200-n0299, n0300-n0399 empty
    pods = [other_pod(f"x{i}", f"n{i:04d}", gpus=7 if i < 200 else 4) for i in range(300)]
    cluster = snapshot([node(f"n{i:04d}", 8) for i in range(400)], pods)
    queue = [gang("small", 2, 1), gang("wide", 1, 4, sequence=1)]
    narrow = narrowed(cluster, queue, Policy(), ())
    assert narrow is not None
    small = narrow.snapshot
    assert [n.name for n in small.nodes] == [f"n{i:04d}" for i in (*range(64), *range(200, 264))]
    plan = schedule(small, queue, Policy())
    assert plan.placements == schedule(cluster, queue, Policy()).placements
    assert plan.placements == {"small": (("small-0", "n0000"), ("small-1", "n0001")), "wide": (("wide-0", "n0200"),)}
    assert clean(plan, queue, narrow)
    # 40 pods of 8 GPUs want 80 candidates among the 100 empty nodes; 60 would want 120: planned whole
    assert narrowed(cluster, [gang("whole", 40, 8)], Policy(), ()) is not None
    assert narrowed(cluster, [gang("whole", 60, 8)], Policy(), ()) is None
    # and a cluster not much larger than the candidates is planned whole
    assert narrowed(snapshot(cluster.nodes[:250], pods), queue, Policy(), ()) is None


def test_what_reaches_beyond_the_candidate_nodes_plans_on_the_whole_cluster():
    cluster = busy_cluster(1)
    ports = replace(NO_CONSTRAINTS, host_ports=(HostPort(8080),))
    assert narrowed(cluster, [gang("g", 2, 1)], Policy(), ()) is not None
    assert narrowed(cluster, [gang("g", 2, 1, constraints=ports)], Policy(), ()) is None  # a pod-level rule
    apart = replace(NO_CONSTRAINTS, anti_affinity=(PodAffinityTerm(LabelSelector(), "topology.kubernetes.io/zone"),))
    with_rule = replace(cluster, pods=(*cluster.pods, replace(other_pod("web", "n0001"), constraints=apart)))
    assert narrowed(with_rule, [gang("g", 2, 1)], Policy(), ()) is None  # another pod's anti-affinity reaches it
    with_ports = replace(cluster, pods=(*cluster.pods, replace(other_pod("exporter", "n0001"), constraints=ports)))
    assert narrowed(with_ports, [gang("g", 2, 1)], Policy(), ()) is not None  # (a host port stays on its node)
    assert narrowed(cluster, [gang("g", 2, 1)], Policy(topology_required=True), ()) is None
    assert narrowed(snapshot([node(f"n{i}", 8) for i in range(100)]), [gang("g", 2, 1)], Policy(), ()) is None  # small
    assert narrowed(cluster, [gang("g", 2, cpu=1)], Policy(), ()) is not None  # (CPU only: CPU is the key)
    assert narrowed(cluster, [gang("g", 2)], Policy(), ()) is None  # (a pod asking nothing may go anywhere)
    assert narrowed(cluster, [new_gang("g", 2, 1)], Policy(), ()) is None  # (pods to be created: admission judges)
    assert narrowed(cluster, [], Policy(), ()) is None


def test_a_plan_that_evicts_or_waits_is_not_clean():
    cluster = snapshot([node(f"n{i}", 8) for i in range(4)])
    queue = [gang("a", 2, 8), gang("b", 4, 8)]
    plan = schedule(cluster, queue, Policy())
    assert "a" in plan.placements and not clean(plan, queue)
    assert clean(schedule(cluster, queue[:1], Policy()), queue[:1])


def test_a_gang_across_topology_domains_is_planned_on_whole_domains():
    """The preferred domain of a gang (policy.topology_key, zone by default) is chosen by what the whole domain has
    free: with nodes in several zones a gang of several pods is planned on the whole snapshot (found by a review:
    the tightest nodes, scattered over ten zones, put a gang in all ten)."""
    nodes = [node(f"n{i:03d}", 8, labels={"topology.kubernetes.io/zone": f"z{i % 10}"}) for i in range(400)]
    cluster = snapshot(nodes, [other_pod(f"x{i}", f"n{i:03d}", gpus=6) for i in range(100)])
    assert narrowed(cluster, [gang("g", 16, 2)], Policy(), ()) is None
    assert narrowed(cluster, [gang("one", 1, 2)], Policy(), ()) is not None  # (one pod: no domain to keep it in)
    assert narrowed(cluster, [gang("g", 16, 2)], Policy(topology_key=""), ()) is not None
    one_zone = snapshot([replace(n, labels={"topology.kubernetes.io/zone": "z0"}) for n in nodes], cluster.pods)
    assert narrowed(one_zone, [gang("g", 16, 2)], Policy(), ()) is not None


def test_a_pod_that_spilled_onto_another_sizes_candidates_is_not_clean():
    """Pods of 1 GPU whose tightest nodes lack CPU land on the candidates of the 8-GPU pod (empty nodes) in the
    narrowed plan, while the whole snapshot has tighter nodes for them: that plan is not used (found by a review)."""
    nodes = [node(f"n{i:03d}", 8, cpu=64) for i in range(400)]
    pods = ([other_pod(f"x{i}", f"n{i:03d}", gpus=7, cpu=60) for i in range(100)]
            + [other_pod(f"y{i}", f"n{i:03d}", gpus=4, cpu=16) for i in range(100, 200)])
    cluster = snapshot(nodes, pods)
    queue = [gang("small", 2, 1, cpu=16), gang("big", 1, 8, sequence=1)]
    narrow = narrowed(cluster, queue, Policy(), ())
    assert narrow is not None
    part = schedule(narrow.snapshot, queue, Policy(), narrow.running)
    whole = schedule(cluster, queue, Policy())
    assert clean(part, queue) and not clean(part, queue, narrow)  # placed, but not where the whole snapshot would
    assert {node for _, node in whole.placements["small"]} <= {f"n{i:03d}" for i in range(100, 200)}


def reference_tightest(nodes, key: str, amount: int, held: dict[str, int], wanted: int) -> list[tuple[int, int]]:
    """What `NodeIndex.tightest` must answer, worked out from every node afresh (the algorithm it replaced)."""
    rooms = [(n.allocatable.get(key, 0) - held.get(n.name, 0), i) for i, n in enumerate(nodes)
             if n.ready and not n.unschedulable]
    return heapq.nsmallest(wanted, ((free, i) for free, i in rooms if free >= amount))


@pytest.mark.parametrize("seed", range(12))
def test_the_node_index_followed_from_snapshot_to_snapshot_answers_as_one_built_afresh(seed):
    """The index is moved from one snapshot's nodes to the next by the nodes that are other objects (as the watch's
    view hands them out); whatever changed (allocatable, ready, cordoned, zone, a node added or gone, most nodes at
    once), it must name the same tightest nodes and domains as an index, and the old algorithm, working from scratch."""
    rng = random.Random(seed)
    key = rng.choice(["nvidia.com/gpu", "cpu"])
    scale = 1 if key == "nvidia.com/gpu" else 1000
    zones = ["a", "b", None]

    def fresh(name: str):
        labels = {"topology.kubernetes.io/zone": z} if (z := rng.choice(zones)) else None
        # (amounts from a wide range too: following makes and empties the index's levels)
        wide = rng.random() < 0.3
        return node(name, rng.randint(0, 16) if wide else rng.choice([4, 8, 8, 8]),
                    cpu=rng.randint(1, 96) if wide else rng.choice([16, 32, 64]), labels=labels,
                    ready=rng.random() > 0.05, cordoned=rng.random() < 0.05)

    nodes = [fresh(f"n{i:04d}") for i in range(rng.choice([150, 400]))]
    index = NodeIndex(tuple(nodes), key, "topology.kubernetes.io/zone")
    for _ in range(40):
        move = rng.random()
        if move < 0.6:  # a few nodes replaced by new objects (an event each), some identical in content
            for i in rng.sample(range(len(nodes)), rng.choice([1, 2, 5])):
                nodes[i] = fresh(nodes[i].name) if rng.random() < 0.8 else replace(nodes[i])
        elif move < 0.75:  # a node comes or goes
            if rng.random() < 0.5:
                nodes.insert(rng.randrange(len(nodes) + 1), fresh(f"m{rng.randrange(10**6):06d}"))
            else:
                del nodes[rng.randrange(len(nodes))]
        elif move < 0.85:  # most nodes at once (a relist)
            nodes = [fresh(n.name) for n in nodes]
        current = tuple(nodes)
        index.follow(current)
        afresh = NodeIndex(current, key, "topology.kubernetes.io/zone")
        assert dict(index.domains) == dict(afresh.domains) == dict(
            Counter(n.labels.get("topology.kubernetes.io/zone") for n in current))
        held = {n.name: rng.choice([1, 2, 4, 8]) * scale for n in rng.sample(current, len(current) // 3)}
        held["gone-node"] = scale  # (a pod on a node the snapshot lacks counts nowhere)
        for amount in (1 * scale, 2 * scale, 8 * scale):
            wanted = rng.choice([8, 64, len(current)])
            expected = reference_tightest(current, key, amount, held, wanted)
            assert index.tightest(amount, held, wanted) == expected == afresh.tightest(amount, held, wanted)
