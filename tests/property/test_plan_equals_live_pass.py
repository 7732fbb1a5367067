"""The offline what-if equals the live pass (issue 40, item 2): over random cluster states, `plan --snapshot`'s
function (`cli.planning.plan_pass`, on the snapshot file's objects) and one live pass of `scheduler run` on the API
emulator make the same decisions: placements up to equivalent nodes, victims (the master's trials too), reclaims,
what each placed group waits for, and why the others wait or are rejected.

A state: 2 or 3 GPU nodes (4 or 8 GPUs, two zones), and 0 to 2 nodes whose 8 GPUs DRA manages; the Determined
master's trials and commands in the shape of one
supported release (tests/support/master_pods.py: 0.17.15 and 0.26.2 bare pods, 0.38.1 Jobs), in namespace default or team-a,
some gangs still missing a pod; det-k8s's own experiments in the queues of both namespaces; priorities 10, 50 or 90;
a team queue with a guarantee for one namespace, or none; a ResourceQuota of GPUs in team-a, or none; preemption on
or off. A first live pass of each namespace places what fits (the master's bound, det-k8s's created), then more of
both arrive and default's pass runs again, and once more while its victims leave, and team-a's past the preemption
grace (victims overdue); the plan (`-n` the pass's namespace) and each live pass are compared. And the loop's fast
pass (a watch-fed view; a gang of the master's that became complete, planned on the tightest candidate nodes) against
the plan of that moment: the full pass, the fast pass and `plan` decide with one function (`scheduling.plan`).

CI runs a bounded, derandomized budget (PLAN_EQUALS_LIVE_EXAMPLES, default 30); a long campaign:
`PLAN_EQUALS_LIVE_EXAMPLES=2000 PLAN_EQUALS_LIVE_RANDOM=1 .venv/bin/python -m pytest
tests/property/test_plan_equals_live_pass.py -q -p no:cacheprovider` (Hypothesis prints the failing example and its
reproduce blob). Every disagreement found is a named case in tests/cli/test_plan_master_victims.py or below.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from det_k8s.cli.planning import plan_pass
from det_k8s.cluster.read import snapshot_from_objects
from det_k8s.errors import Forbidden
from det_k8s.kube.watch import ClusterView
from det_k8s.live.policy import checked_queues
from det_k8s.live.queue import QUEUED, QueueStore
from det_k8s.live.scheduler import LiveScheduler
from det_k8s.scheduling.experiments import parse_experiment
from det_k8s.scheduling.explain import describe
from det_k8s.scheduling.groups import build_group
from det_k8s.scheduling.master import ServedReader
from det_k8s.scheduling.model import Plan, Policy
from det_k8s.scheduling.serialize import group_from_dict
from det_k8s.settings.loader import Document, load_settings
from tests.conftest import Cluster
from tests.support.dra_objects import device_class, resource_slice
from tests.support.k8s_emulator import RunningEmulator, node
from tests.support.master_pods import VERSIONS, create_task, master_task

EXAMPLES = int(os.environ.get("PLAN_EQUALS_LIVE_EXAMPLES", "30"))
RANDOM = bool(os.environ.get("PLAN_EQUALS_LIVE_RANDOM"))
SETTINGS = load_settings([Document("s.yaml", "maxSlotsPerPod: 4\n")]).settings()
SERVED = "coscheduler"
ZONE = "topology.kubernetes.io/zone"
PRIORITIES = (10, 50, 90)


@dataclass(frozen=True)
class Task:
    """A task of the master: a trial of `slots` GPUs, or a command (one pod, no GPU: never a victim)."""

    slots: int
    priority: int
    namespace: str
    command: bool = False
    partial: bool = False  # a gang whose last pod the master has not created yet (waits for it, never placed)


@dataclass(frozen=True)
class Own:
    """One of det-k8s's own experiments, submitted to the queue of its namespace."""

    slots: int
    priority: int
    old: bool  # submitted an hour ago (it may reserve nodes), else just now
    namespace: str = "default"


@dataclass(frozen=True)
class State:
    version: str
    nodes: tuple[int, ...]  # GPUs per node
    first: tuple[Task | Own, ...]  # before the first pass
    then: tuple[Task | Own, ...]  # arriving before the second
    preemption: bool
    guarantee: int | None  # the guaranteed queue's GPUs (None: no team queues)
    guaranteed: str = "team-a"  # the namespace whose queue has the guarantee; the other's borrows
    quota: int | None = None  # a ResourceQuota of team-a on requests.nvidia.com/gpu (None: none)
    dra: int = 0  # nodes whose 8 GPUs DRA manages (a ResourceSlice, a DeviceClass naming nvidia.com/gpu)


def arrivals(priorities: tuple[int, ...], at_least: int = 0) -> st.SearchStrategy[tuple[Task | Own, ...]]:
    namespaces = st.sampled_from(("default", "team-a"))
    tasks = st.builds(Task, st.sampled_from((1, 2, 4, 8)), st.sampled_from(priorities), namespaces, st.just(False),
                      st.integers(0, 4).map(lambda n: n == 0))
    commands = st.builds(Task, st.just(0), st.sampled_from(priorities), namespaces, st.just(True))
    owns = st.builds(Own, st.sampled_from((1, 2, 4, 8)), st.sampled_from(priorities), st.booleans(),
                     st.sampled_from(("default", "default", "team-a")))
    return st.lists(st.one_of(tasks, tasks, owns, owns, commands), min_size=at_least, max_size=4).map(tuple)


# the first arrivals mostly lower, the later ones mostly higher, on a small cluster: it is full at the second pass often
# enough that preemption and reclaims happen
states = st.builds(State, st.sampled_from(VERSIONS), st.sampled_from(((4, 4), (4, 4), (8, 4), (4, 4, 4), (8, 8))),
                   arrivals((10, 10, 50, 90), at_least=2), arrivals((10, 50, 90, 90), at_least=1), st.booleans(),
                   st.one_of(st.none(), st.sampled_from((4, 8, 16))), st.sampled_from(("default", "team-a")),
                   st.one_of(st.none(), st.none(), st.sampled_from((2, 4, 8))), st.sampled_from((0, 0, 1, 2)))


# The named states, run before the random ones (and on the real control plane too: tests/real/
# test_plan_equals_live_pass_real.py). A higher-priority experiment preempts the master's trial in its namespace; a
# gang of the master's in team-a, below its guarantee, reclaims what the master's trial in default borrowed; one of
# det-k8s's in default, the guaranteed queue, reclaims from the master's trial in team-a (plan said "no lower-priority
# group in this queue to evict" for each: it planned without the master's pods); DRA-managed nodes beside
# device-plugin ones: a trial only they could hold waits with the same reason in both.
SAMPLE = (
    State("0.38.1", (4, 4), (Task(8, 10, "default"),), (Own(8, 90, False),), True, None),
    State("0.17.15", (4, 4), (Task(8, 50, "default"),), (Task(8, 50, "team-a"),), False, 8, "team-a"),
    State("0.26.2", (4, 4), (Task(8, 50, "team-a"),), (Own(8, 50, False),), False, 8, "default"),
    State("0.38.1", (4,), (Task(4, 50, "default"),), (Task(8, 50, "default"), Own(8, 90, False)), True, None, dra=2),
)


class Clock:
    def __init__(self) -> None:
        self.now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)

    def __call__(self) -> datetime.datetime:
        return self.now


def policy_of(state: State) -> Policy:
    queues = None
    if state.guarantee is not None:
        queues = checked_queues({"version": 1, "defaultQueue": "shared", "queues": [
            {"name": "team", "guarantee": {"nvidia.com/gpu": state.guarantee},
             "members": {"namespaces": [state.guaranteed]}},
            {"name": "shared"}]}, "test")
    return Policy(preemption=state.preemption, queues=queues)


def submit(cluster: Cluster, own: Own, index: int, clock: Clock) -> None:
    from det_k8s.cli.live import entry_for

    text = f"name: exp-{index}\nresources: {{slots_per_trial: {own.slots}, priority: {own.priority}}}\n"
    experiment = parse_experiment(text, f"exp-{index}.yaml").get()
    submitted = clock.now - datetime.timedelta(hours=1 if own.old else 0)
    group = build_group(experiment, SETTINGS, group_id=f"own{index:04d}", user=f"user-{index % 2}",
                        submitted_at=submitted.strftime("%Y-%m-%dT%H:%M:%SZ"), sequence=index,
                        namespace=own.namespace)
    QueueStore(cluster.connect(), own.namespace).add(entry_for(experiment, text, SETTINGS, group, own.namespace))


def arrive(cluster: Cluster, state: State, items: tuple[Task | Own, ...], start: int, clock: Clock) -> None:
    api = cluster.connect()
    for offset, item in enumerate(items):
        index = start + offset
        if isinstance(item, Own):
            submit(cluster, item, index, clock)
        elif item.command:
            with contextlib.suppress(Forbidden):
                create_task(api, master_task(state.version, experiment=index, priority=item.priority,
                                             namespace=item.namespace, slots_per_trial=0, task_type="COMMAND",
                                             user=f"user-{index % 2}"))
        else:
            task = master_task(state.version, experiment=index, slots_per_trial=item.slots, priority=item.priority,
                               namespace=item.namespace, user=f"user-{index % 2}")
            real = getattr(cluster, "real", False)  # the real Job controller makes a Job's pods (all of them)
            assert not (real and item.partial), "a partial gang needs the emulator (no Job controller)"
            with contextlib.suppress(Forbidden):  # team-a's quota refused a pod: the gang stays incomplete
                create_task(api, task, pods=len(task.pods) - 1 if item.partial and len(task.pods) > 1 else None,
                            job_controller=real)


def snapshot_objects(cluster: Cluster) -> list[dict[str, Any]]:
    """What `kubectl get nodes,pods,resourcequotas,deviceclasses,resourceslices -A -o json` prints (finished pods
    included, as kubectl lists them)."""
    return [{**o, "kind": kind} for plural, kind in (("nodes", "Node"), ("pods", "Pod"),
                                                     ("resourcequotas", "ResourceQuota"),
                                                     ("deviceclasses", "DeviceClass"),
                                                     ("resourceslices", "ResourceSlice"))
            for o in cluster.api.items(plural)]


def add_nodes(running: RunningEmulator | None, cluster: Any, state: State) -> None:
    """The device-plugin GPU nodes, and the DRA-managed ones (no nvidia.com/gpu of their own: their devices are in a
    ResourceSlice, and a DeviceClass names nvidia.com/gpu, KEP-5004), on an API server that serves resource.k8s.io/v1
    (the live pass finds DRA by discovery: the emulator announces it when asked, the real API server does)."""
    if running is not None:
        running.emulator.serve_discovery()
    for i, gpus in enumerate(state.nodes):
        cluster.api.put(node(f"gpu-{i}", gpus=gpus, labels={ZONE: f"zone-{i % 2}"}))
    for i in range(state.dra):
        cluster.api.put(node(f"dra-{i}", labels={ZONE: f"zone-{i % 2}"}))
        cluster.api.put(resource_slice(f"dra-{i}", 8))
    if state.dra:
        cluster.api.put(device_class())


def offline(cluster: Cluster, policy: Policy, clock: Clock, namespace: str) -> Plan:
    """`plan --snapshot -n namespace`'s answer for that namespace's queue as it stands."""
    reader = ServedReader(SERVED)
    snapshot = snapshot_from_objects([{"apiVersion": "v1", "kind": "List", "items": snapshot_objects(cluster)}],
                                     "snapshot", reader)
    queue = [group_from_dict(e.group) for e in QueueStore(cluster.connect(), namespace).entries() if e.state == QUEUED]
    return plan_pass(snapshot, reader.served, queue, policy, namespace, now=clock(), scheduler_name=SERVED).plan


def node_classes(cluster: Cluster) -> dict[str, tuple[Any, ...]]:
    """Nodes alike for scheduling (allocatable, zone) are equivalent: a placement may take either."""
    return {n["metadata"]["name"]: (tuple(sorted(n["status"]["allocatable"].items())),
                                    n["metadata"]["labels"].get(ZONE, "")) for n in cluster.api.items("nodes")}


def decisions(plan: Plan, classes: Mapping[str, tuple[Any, ...]]) -> dict[str, Any]:
    return {
        "placements": {g: sorted(classes.get(node, (node,)) for _, node in pods) for g, pods in plan.placements.items()},
        "victims": sorted(plan.victims),
        "preempting": {g: sorted(v) for g, v in plan.preempting.items()},
        "reclaims": {g: sorted((r.lender, r.resource, r.amount) for r in items)
                     for g, items in plan.reclaims.items() if items},
        "waiting": {g: describe(r) for g, r in plan.waiting.items()},
        "rejected": {g: describe(r) for g, r in plan.rejected.items()},
    }


def agree(cluster: Cluster, scheduler: LiveScheduler, policy: Policy, clock: Clock) -> None:
    """The plan made offline first (the pass changes the cluster), then the pass: the same decisions."""
    classes = node_classes(cluster)
    offline_plan = offline(cluster, policy, clock, scheduler.namespace)
    report = scheduler.run_pass()
    assert report.plan is not None
    assert decisions(offline_plan, classes) == decisions(report.plan, classes)
    for what, found in (("a victim of the master's", any("/" in v for v in offline_plan.victims)),
                        ("a victim of det-k8s's", any("/" not in v for v in offline_plan.victims)),
                        ("a reclaim", any(offline_plan.reclaims.values())),
                        ("a master group placed", any("/" in g for g in offline_plan.placements)),
                        ("a group waiting", bool(offline_plan.waiting)), ("a group rejected", bool(offline_plan.rejected))):
        if found and currently_in_test_context():  # (not when tests/real plays a state outside Hypothesis)
            event(what)


def play(cluster: Any, state: State, running: RunningEmulator | None = None,
         settle: Callable[[], None] = lambda: None) -> None:
    """The passes of one state on `cluster`, each compared with the plan of that moment (`settle` first: on the real
    control plane, kwok and the controllers act on what the last pass did, and both must read what they left)."""
    add_nodes(running, cluster, state)
    if state.quota is not None:
        cluster.api.put({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": "team-a"},
                         "spec": {"hard": {"requests.nvidia.com/gpu": str(state.quota)}}})
    clock = Clock()
    policy = policy_of(state)
    # `plan` answers what `scheduler run` (which serves the master's pods) does in the namespace planned
    default, team_a = (LiveScheduler(cluster.connect(namespace=ns), ns, policy, f"sched-{ns}", serve=SERVED,
                                     clock=clock, fence=False) for ns in ("default", "team-a"))
    arrive(cluster, state, state.first, 1, clock)
    for scheduler in (default, team_a):
        settle()
        agree(cluster, scheduler, policy, clock)
    clock.now += datetime.timedelta(seconds=30)
    arrive(cluster, state, state.then, 1 + len(state.first), clock)
    settle()
    agree(cluster, default, policy, clock)
    # the victims it marked are leaving (the master checkpoints them); past the preemption grace, overdue
    clock.now += datetime.timedelta(seconds=30)
    settle()
    agree(cluster, default, policy, clock)
    clock.now += datetime.timedelta(minutes=31)
    settle()
    agree(cluster, team_a, policy, clock)


def run_state(state: State) -> None:
    running = RunningEmulator().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            play(Cluster(running, running.write_kubeconfig(Path(tmp) / "kubeconfig")), state, running)
    finally:
        running.stop()


@pytest.mark.timeout(max(300, EXAMPLES * 15))
@settings(max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(states)
@example(SAMPLE[0])
@example(SAMPLE[1])
@example(SAMPLE[2])
@example(SAMPLE[3])
def test_plan_and_the_live_pass_make_the_same_decisions(state):
    run_state(state)


def run_fast(state: State, gang: Task) -> None:
    """A loop's scheduler (a watch-fed view): a full pass on the first arrivals, then, when it left nothing waiting
    (the fast path is open), one gang of the master's arrives and the fast pass (narrowed to the tightest candidate
    nodes on its own) plans it: as `plan` does on the snapshot of that moment."""
    running = RunningEmulator().start()
    view = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cluster = Cluster(running, running.write_kubeconfig(Path(tmp) / "kubeconfig"))
            add_nodes(running, cluster, state)
            clock = Clock()
            policy = policy_of(state)
            api = cluster.connect()
            view = ClusterView(api.clone(), SERVED, queue_namespace="default").start()
            assert view.wait_synced()
            loop = LiveScheduler(api, "default", policy, "loop", serve=SERVED, view=view, clock=clock, fence=False)
            arrive(cluster, state, state.first, 1, clock)
            wait_for(lambda: len(view.served()) == sum(
                1 for p in cluster.api.items("pods") if p["spec"].get("schedulerName") == SERVED), "the view")
            loop.run_pass()
            if not loop.can_go_fast():
                return  # something waits: the loop's next pass is a full one (compared by the test above)
            event("a fast pass")
            clock.now += datetime.timedelta(seconds=30)
            served = len(view.served())
            arrive(cluster, state, (gang,), 1 + len(state.first), clock)
            made = sum(1 for p in cluster.api.items("pods") if p["spec"].get("schedulerName") == SERVED)
            wait_for(lambda: len(view.served()) == made, "the view to see the gang")
            if made == served:
                return
            classes = node_classes(cluster)
            offline_plan = offline(cluster, policy, clock, "default")
            report = loop.run_pass(fast=True)
            if report.plan is None:  # no gang ready (incomplete): nothing planned, as `plan` places nothing of it
                assert not offline_plan.placements or all("/" not in g for g in offline_plan.placements)
                return
            assert decisions(offline_plan, classes) == decisions(report.plan, classes)
            event("the fast pass placed the gang" if report.plan.placements else "the fast pass left it waiting")
    finally:
        if view is not None:
            view.stop()
        running.emulator.expire_watches()
        running.stop()


def wait_for(condition: Any, what: str) -> None:
    import time

    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


@pytest.mark.timeout(max(300, EXAMPLES * 15))
@settings(max_examples=max(10, EXAMPLES // 2), deadline=None, derandomize=not RANDOM, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(states, st.builds(Task, st.sampled_from((1, 2, 4, 8)), st.sampled_from(PRIORITIES),
                         st.sampled_from(("default", "team-a")), st.just(False), st.integers(0, 4).map(lambda n: n == 0)))
def test_plan_and_the_loops_fast_pass_make_the_same_decisions(state, gang):
    run_fast(state, gang)
