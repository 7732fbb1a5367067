"""The pure decisions a pass makes for the Determined master's pods (det_k8s/live/master_actions.py): which
groups are repaired, queued or running (`collect`), and what the plan means for them (`intents`)."""

from __future__ import annotations

import copy
import datetime

from det_k8s.live import binder as B
from det_k8s.live.master_actions import Bind, MarkPreempted, Repair, ReportWaiting, Seen, collect, intents, reason_text
from det_k8s.scheduling.master import State, master_groups
from det_k8s.scheduling.model import Policy
from det_k8s.scheduling.plan import schedule
from tests.support.builders import node, snapshot
from tests.support.master_pods import master_task

NOW = datetime.datetime(2026, 11, 27, 12, 0, tzinfo=datetime.UTC)


def gang(trial: int, *, bound: int = 0, slots: int = 8, priority: int = 50, only: int | None = None):
    """A 0.38.1 trial of `slots` GPUs in 4-GPU pods, `bound` of them bound (pod i to gpu-i); `only`: the first pods
    the master has created so far."""
    task = master_task("0.38.1", trial=trial, slots_per_trial=slots, priority=priority)
    pods = []
    for i, pod in enumerate(copy.deepcopy(task.pods[:only])):
        pod["metadata"].update(uid=f"uid-{trial}-{i}", resourceVersion=str(100 + i),
                               creationTimestamp="2026-11-27T11:00:00Z")
        pod["spec"]["priority"] = priority
        if i < bound:
            pod["spec"]["nodeName"] = f"gpu-{i}"
        pod["status"] = {"phase": "Running" if i < bound else "Pending"}
        pods.append(pod)
    (group,) = master_groups(pods, "coscheduler")
    return group


def test_ready_groups_are_queued_bound_ones_run_and_partly_bound_or_orphaned_ones_are_repaired():
    ready, running, partial, orphaned = gang(1), gang(2, bound=2), gang(3, bound=1), gang(4, bound=2)
    assert (ready.state, running.state, partial.state) == (State.READY, State.RUNNING, State.PARTIAL)
    seen = [Seen(ready), Seen(running), Seen(partial), Seen(orphaned, ("gpu-1",))]
    found = collect(seen)
    assert found.repairs == (Repair(partial), Repair(orphaned, ("gpu-1",)))
    assert [g.id for g in found.queue] == [ready.id] and [g.id for g in found.running] == [running.id]
    assert all(g.preemptible for g in found.running) and set(found.groups) == {g.id for g in (ready, running,
                                                                                                 partial, orphaned)}
    planned = collect(seen, read_only=True)  # `experiment create` while a loop serves them: never repairs
    assert planned.repairs == ()
    assert not any(g.preemptible for g in planned.running)
    quick = collect(seen, fast=True)  # the loop's fast pass leaves repairs to a full pass
    assert quick.repairs == () and quick.skipped == (partial.id, orphaned.id)


def test_the_plan_marks_victims_binds_the_placed_and_reports_why_the_rest_wait():
    low, high, big = gang(1, bound=2, priority=10), gang(2, priority=90), gang(3, slots=16)
    found = collect([Seen(low), Seen(high), Seen(big)])
    holding = snapshot([node(f"gpu-{i}", gpus=4) for i in range(2)], [p.pod for p in low.pods])
    plan = schedule(holding, list(found.queue), Policy(preemption=True), list(found.running), now=NOW)
    priorities = {g.id: g.priority for g in found.queue}
    decided = intents(plan, found.groups, priorities)
    assert decided[0] == MarkPreempted(low, high.id, 90)
    assert isinstance(decided[1], ReportWaiting) and decided[1].event == B.PREEMPTING
    assert "waits for preempted group(s) to stop" in decided[1].text
    (never,) = [i for i in decided[2:] if isinstance(i, ReportWaiting)]
    assert never.group == big and never.event == B.UNSCHEDULABLE_EVENT and never.warning
    assert never.text == reason_text(big, plan.rejected[big.id])
    assert intents(plan, found.groups, priorities, fast=True) == ()  # nothing to bind: a fast pass writes nothing


def test_placed_groups_are_bound_together_in_one_fence_and_incomplete_ones_are_reported():
    one, two = gang(1), gang(2)
    incomplete = gang(3, only=1)
    found = collect([Seen(one), Seen(two), Seen(incomplete)])
    plan = schedule(snapshot([node(f"gpu-{i}", gpus=4) for i in range(4)]), list(found.queue), Policy(),
                    list(found.running), now=NOW)
    bind, waits = intents(plan, found.groups, {})
    assert isinstance(bind, Bind) and [g.id for g, _ in bind.groups] == [one.id, two.id]
    assert isinstance(waits, ReportWaiting) and waits.event == B.INCOMPLETE and "1 of 2 exist" in waits.text
    assert intents(plan, found.groups, {}, fast=True) == (bind,)
