"""The pure decide step of a live pass (det_k8s/live/decide.py): each kind of intent decided from what a
pass observed, with no cluster at all. What acting on them does is tested against the emulator (tests/kube)."""

from __future__ import annotations

import datetime
from dataclasses import replace
from types import MappingProxyType

from det_k8s.cli.live import entry_for
from det_k8s.cluster.model import Pod
from det_k8s.cluster.read import pod_from_object
from det_k8s.live.decide import (
    QUOTA_REFUSED,
    Adopt,
    ClearLeftovers,
    ClearRejections,
    ClearStale,
    Complete,
    Create,
    Evict,
    NoteUnplaced,
    Observed,
    TearDown,
    Wait,
    decide,
)
from det_k8s.live.queue import FAILED, PAUSED, QUEUED, RUNNING, QueueEntry
from det_k8s.scheduling.experiments import parse_experiment
from det_k8s.scheduling.explain import describe
from det_k8s.scheduling.groups import build_group
from det_k8s.scheduling.model import Policy
from det_k8s.settings import Document, load_settings
from tests.support.builders import node, snapshot

SETTINGS = load_settings([Document("s", "maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")]).settings()
NOW = datetime.datetime(2026, 11, 27, 12, 0, tzinfo=datetime.UTC)
DEFAULT = Policy()
NODES = [node(f"gpu-{i}", gpus=4) for i in range(3)]


def entry(group_id: str, slots: int, sequence: int = 1, priority: int = 50, **changes) -> QueueEntry:
    text = f"name: exp-{group_id}\nresources: {{slots_per_trial: {slots}, priority: {priority}}}\n"
    experiment = parse_experiment(text, f"{group_id}.yaml").get()
    group = build_group(experiment, SETTINGS, group_id=group_id, user="u", submitted_at="2026-11-27T11:00:00Z",
                        sequence=sequence)
    return replace(entry_for(experiment, text, SETTINGS, group, "default"), **changes)


def pods(of: QueueEntry, phase: str = "Running", *, only: int | None = None, deleting: bool = False) -> tuple[Pod, ...]:
    """The entry's pods as the API would return them, pod i bound to gpu-i."""
    out = []
    for i, manifest in enumerate(of.pods[:only]):
        meta = {**manifest["metadata"], "namespace": "default"}
        if deleting:
            meta["deletionTimestamp"] = "2026-11-27T11:59:00Z"
        out.append(pod_from_object({**manifest, "metadata": meta, "spec": {**manifest["spec"], "nodeName": f"gpu-{i}"},
                                    "status": {"phase": phase}}))
    return tuple(out)


def observe(*entries: QueueEntry, by_group: dict[str, tuple[Pod, ...]] | None = None, policy: Policy = DEFAULT,
            now: datetime.datetime = NOW, **more) -> Observed:
    found = by_group or {}
    holding = [p for group in found.values() for p in group if p.phase in ("Running", "Pending")]
    return Observed("default", entries, MappingProxyType(found), snapshot(NODES, holding), policy, now, 3, **more)


def kinds(decision) -> list[str]:
    return [type(intent).__name__ for intent in decision.intents]


def test_a_queued_group_with_room_is_created_and_one_without_room_waits_with_its_reason():
    small, big = entry("aaaa0001", 8), entry("bbbb0002", 8, sequence=2)
    decision = decide(observe(small, big))
    (create, wait) = decision.intents
    assert isinstance(create, Create) and create.group == "aaaa0001"
    assert sorted(node for _, node in create.placement) == ["gpu-0", "gpu-1"]
    assert isinstance(wait, Wait) and wait.group == "bbbb0002" and wait.record
    assert wait.text == describe(decision.plan.waiting["bbbb0002"])
    assert decide(observe(small, big)) == decision  # pure: the same observation, the same decision


def test_a_running_group_that_runs_needs_nothing_and_one_whose_rejections_were_races_has_them_cleared():
    running = entry("aaaa0001", 8, state=RUNNING)
    assert decide(observe(running, by_group={"aaaa0001": pods(running)})).intents == ()
    rejected = replace(running, rejections=1)
    assert decide(observe(rejected, by_group={"aaaa0001": pods(rejected)})).intents == (ClearRejections("aaaa0001"),)
    native = replace(running, pod_group="v1alpha2/aaaa0001")
    (note,) = decide(observe(native, by_group={"aaaa0001": pods(native, "Pending")})).intents
    assert isinstance(note, NoteUnplaced) and note.unbound == ()  # bound (pinned here): nothing to ask why


def test_a_finished_group_completes_and_a_lost_one_is_torn_down_charged_and_waits_for_its_pods():
    done = entry("aaaa0001", 8, state=RUNNING)
    assert decide(observe(done, by_group={"aaaa0001": pods(done, "Succeeded")})).intents == (
        Complete("aaaa0001", "completed"),)
    lost = entry("aaaa0001", 8, state=RUNNING, attempts=0)
    half = pods(lost, only=1)
    decision = decide(observe(lost, by_group={"aaaa0001": half}))
    (down,) = decision.intents  # its remaining pod still stops: not planned again in this pass
    assert isinstance(down, TearDown) and down.again and down.attempts == 1 and down.pods == (half[0].name,)
    assert down.why.endswith("the group was torn down and requeued (attempt 2 of 3)")
    assert decision.after["aaaa0001"].state == QUEUED and decision.after["aaaa0001"].reason == down.why
    last = replace(lost, attempts=2)
    (gave_up,) = decide(observe(last, by_group={"aaaa0001": half})).intents
    assert isinstance(gave_up, TearDown) and not gave_up.again and gave_up.why.endswith("gave up after 3 attempts")


def test_a_lost_group_with_no_pod_left_is_requeued_and_created_again_in_the_same_pass():
    gone = entry("aaaa0001", 8, state=RUNNING)
    down, create = decide(observe(gone)).intents
    assert isinstance(down, TearDown) and down.pods == () and isinstance(create, Create)


def test_stale_pods_of_a_paused_or_failed_group_are_cleared():
    paused = entry("aaaa0001", 8, state=PAUSED)
    (stale,) = decide(observe(paused, by_group={"aaaa0001": pods(paused, "Pending")})).intents
    assert stale == ClearStale("aaaa0001", tuple(p.name for p in pods(paused)), "exp-aaaa0001-aaaa0001", None)
    failed = entry("aaaa0001", 8, state=FAILED)
    assert decide(observe(failed, by_group={"aaaa0001": pods(failed, "Succeeded")})).intents == ()  # not active
    assert decide(observe(failed, by_group={"aaaa0001": pods(failed, deleting=True)})).intents == ()  # stopping


def test_leftovers_of_a_queued_group_are_adopted_completed_torn_down_or_cleared():
    queued = entry("aaaa0001", 8)
    (adopt,) = decide(observe(queued, by_group={"aaaa0001": pods(queued)})).intents
    assert isinstance(adopt, Adopt) and [n for _, n in adopt.placement] == ["gpu-0", "gpu-1"]
    (found,) = decide(observe(queued, by_group={"aaaa0001": pods(queued, "Succeeded")})).intents
    assert found == Complete("aaaa0001", "found all its pods finished; completed", found=True)
    (lost,) = decide(observe(queued, by_group={"aaaa0001": pods(queued, "Failed")})).intents
    assert isinstance(lost, TearDown) and lost.again
    some = pods(queued, only=1)
    (clear,) = decide(observe(queued, by_group={"aaaa0001": some})).intents
    assert clear == ClearLeftovers("aaaa0001", (some[0].name,), f"waiting for its previous pods to stop: {some[0].name}")
    stopping = pods(queued, deleting=True)
    (wait,) = decide(observe(queued, by_group={"aaaa0001": stopping})).intents
    assert isinstance(wait, ClearLeftovers) and wait.pods == ()  # already asked to stop: nothing more to delete


def test_a_higher_priority_group_evicts_a_victim_which_is_requeued_and_waits_for_it():
    low = entry("aaaa0001", 12, priority=10, state=RUNNING)
    high = entry("bbbb0002", 8, sequence=2, priority=90)
    decision = decide(observe(low, high, by_group={"aaaa0001": pods(low)}, policy=Policy(preemption=True)))
    evict, wait = decision.intents
    assert isinstance(evict, Evict) and evict.group == "aaaa0001" and evict.by == "bbbb0002"
    assert evict.why == "preempted by bbbb0002 (higher priority); back in the queue" and len(evict.pods) == 3
    assert wait == Wait("bbbb0002", "waiting for preempted group(s) to stop: aaaa0001")
    assert decision.after["aaaa0001"].state == QUEUED
    master = decide(observe(low, high, by_group={"aaaa0001": pods(low)}, policy=Policy(preemption=True),
                            master_groups=frozenset({"aaaa0001"})))
    assert kinds(master) == ["Wait"]  # a victim of the master's: marked by master_pods.py, never deleted here


def test_a_group_a_quota_refused_a_moment_ago_waits_out_its_pause_unrecorded():
    why = f"creating its pods failed, nothing was left running: exceeded quota: q; {QUOTA_REFUSED}: trying again once"
    refused = entry("aaaa0001", 8, reason=why, events=(f"2026-11-27T11:59:55Z {why}",))
    (wait,) = decide(observe(refused)).intents
    assert wait == Wait("aaaa0001", f"{why}; next try in 25 s", record=False)
    (create,) = decide(observe(refused, now=NOW + datetime.timedelta(seconds=30))).intents
    assert isinstance(create, Create)


def test_intents_come_in_the_order_they_are_acted_on():
    done = entry("aaaa0001", 4, state=RUNNING)
    paused = entry("bbbb0002", 4, sequence=2, state=PAUSED)
    leftover = entry("cccc0003", 8, sequence=3)
    fresh = entry("dddd0004", 4, sequence=4)
    found = {"aaaa0001": pods(done, "Succeeded"), "bbbb0002": pods(paused), "cccc0003": pods(leftover, only=1)}
    assert kinds(decide(observe(done, paused, leftover, fresh, by_group=found))) == [
        "Complete", "ClearStale", "ClearLeftovers", "Create"]
