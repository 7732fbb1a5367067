"""The master's task pods, as each supported version creates them, read back into pod groups."""

from __future__ import annotations

import copy

import pytest

from det_k8s.cluster.model import GPU
from det_k8s.scheduling.master import State, as_pod_group, as_running_group, master_groups
from tests.support.master_pods import VERSIONS, master_task


def as_stored(task, *, priority: int = 50, created: str = "2026-01-01T10:00:00Z", node: str | None = None):
    """The task's pods as the API server returns them: priority resolved, metadata filled, Pending."""
    pods = []
    for i, pod in enumerate(copy.deepcopy(task.pods)):
        pod["metadata"].update(uid=f"uid-{i}", resourceVersion=str(100 + i), creationTimestamp=created)
        pod["spec"]["priority"] = priority
        if node:
            pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running" if node else "Pending"}
        pods.append(pod)
    return pods


@pytest.mark.parametrize("version", VERSIONS)
def test_a_distributed_trial_is_one_gang_of_all_its_pods(version):
    task = master_task(version, experiment=3, trial=7, slots_per_trial=16, max_slots_per_pod=4, priority=60,
                       user="alice")
    (group,) = master_groups(as_stored(task, priority=60))
    assert group.state is State.READY
    assert group.size == 4 and len(group.pending) == 4
    assert group.priority == 60 and group.trial
    # fair share: by the user where the master labels it (0.32+), else by the experiment
    assert group.user == ("alice" if version == "0.38.1" else "experiment 3")
    queued = as_pod_group(group)
    assert queued.size == 4 and queued.slots == 16
    assert all(p.requests[GPU] == 4000 for p in queued.pods)
    assert queued.submitted_at == "2026-01-01T10:00:00Z" and queued.sequence == 1_767_261_600_000_000
    if version == "0.38.1":
        assert group.name.startswith("det-") and group.name.endswith("-exp-3-trial-7-attempt-1")
        assert group.id == f"default/{group.name}"
    else:
        assert group.name == "exp3trial7"
        assert group.id == f"default/exp3trial7#{task.allocation}"


@pytest.mark.parametrize("version", ["0.26.2", "0.38.1"])
def test_placement_constraints_come_from_the_shared_pod_reader(version):
    task = master_task(version, slots_per_trial=4)
    (group,) = master_groups(as_stored(task))
    (pod,) = as_pod_group(group).pods
    (term,) = pod.constraints.required_terms  # the master's node-disable affinity
    assert term[0].operator == "DoesNotExist" and term[0].key.startswith("determined.ai/cluster-id-")


def test_a_pod_pinned_by_its_pod_spec_is_pending_until_det_k8s_binds_it():
    """matchFields `metadata.name In [gpu-1]` (what a user's pod spec can say) does not put a pod det-k8s binds on
    that node: it is queued, holds nothing there yet, and keeps its labels and namespace for the pod rules."""
    from det_k8s.cluster.read import snapshot_from_objects
    from det_k8s.scheduling.master import master_pod

    task = master_task("0.38.1", slots_per_trial=4, namespace="det")
    stored = as_stored(task)
    stored[0]["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-1"]}]}]}}}
    (group,) = master_groups(stored)
    assert group.state is State.READY and not group.bound
    (pod,) = as_pod_group(group).pods
    assert pod.constraints.pinned_node == "gpu-1"
    assert pod.namespace == "det" and pod.labels["determined"] == task.allocation
    served = master_pod(stored[0]).pod
    assert served.node is None and not served.active
    assert snapshot_from_objects([stored[0]]).pods[0].node == "gpu-1"  # read as any pod, it would hold gpu-1


@pytest.mark.parametrize("version", VERSIONS)
def test_a_gang_waits_until_every_pod_exists(version):
    task = master_task(version, slots_per_trial=12, max_slots_per_pod=4)
    (group,) = master_groups(as_stored(task)[:2])
    assert group.state is State.INCOMPLETE and group.size == 3


@pytest.mark.parametrize("version", ["0.17.15", "0.26.2"])
def test_a_restarted_trials_new_pods_are_not_mixed_with_its_old_ones(version):
    old = master_task(version, experiment=5, trial=1, slots_per_trial=8, run=1)
    new = master_task(version, experiment=5, trial=1, slots_per_trial=8, run=2)
    leaving = as_stored(old, node="gpu-0")
    for pod in leaving:
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T10:05:00Z"
    groups = {g.allocation: g for g in master_groups(leaving + as_stored(new))}
    assert groups[old.allocation].name == groups[new.allocation].name == "exp5trial1"  # the same gang name
    assert groups[old.allocation].state is State.LEAVING
    assert groups[new.allocation].state is State.READY and len(groups[new.allocation].pending) == 2


@pytest.mark.parametrize("version", VERSIONS)
def test_cpu_slots_and_commands_are_single_pod_groups(version):
    cpu = master_task(version, slots_per_trial=2, max_slots_per_pod=1, slot_type="cpu")
    command = master_task(version, task_type="COMMAND", slots_per_trial=1)
    groups = master_groups(as_stored(cpu) + as_stored(command, created="2026-01-01T11:00:00Z"))
    assert [g.size for g in groups] == [1] * len(groups)
    if version == "0.17.15":  # the master leaves `cmd` tasks to kube-scheduler: no schedulerName, no gang
        assert len(groups) == 2 and not command.pods[0]["spec"].get("schedulerName")
        return
    assert len(groups) == 3  # two CPU pods alone, and the command
    running = as_running_group(master_groups(as_stored(command, node="cpu-0"))[0])
    assert not running.preemptible  # a command cannot checkpoint: never a victim


def test_only_pods_naming_the_served_scheduler_are_taken():
    plain = master_task("0.38.1", scheduler=None)
    preempting = master_task("0.26.2", scheduler="preemption")
    assert master_groups(as_stored(plain)) == ()
    assert master_groups(as_stored(preempting)) == ()
    assert len(master_groups(as_stored(preempting), "preemption")) == 1


def test_finished_pods_are_left_out():
    task = master_task("0.38.1", slots_per_trial=8)
    pods = as_stored(task, node="gpu-0")
    for pod in pods:
        pod["status"]["phase"] = "Succeeded"
    assert master_groups(pods) == ()


@pytest.mark.parametrize("version", VERSIONS)
def test_partly_bound_and_preempted_groups_are_recognised(version):
    task = master_task(version, slots_per_trial=8)
    pods = as_stored(task)
    pods[0]["spec"]["nodeName"] = "gpu-0"
    (group,) = master_groups(pods)
    assert group.state is State.PARTIAL
    bound = as_stored(task, node="gpu-0")
    bound[1]["metadata"]["labels"]["determined-preemption"] = "true"
    (group,) = master_groups(bound)
    assert group.state is State.LEAVING
    running = as_running_group(group)
    assert running.terminating and running.preemptible and len(running.pods) == 2


def test_the_why_pending_condition_det_k8s_wrote_is_read_back():
    task = master_task("0.38.1")
    (pod,) = as_stored(task)
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                    "message": "det-k8s: waits", "lastTransitionTime": "2026-01-01T10:00:01Z"}]
    (group,) = master_groups([pod])
    assert group.pods[0].waiting == "det-k8s: waits"
    assert group.pods[0].waiting_since == "2026-01-01T10:00:01Z"


def test_pods_beyond_a_smaller_min_available_are_queued_not_torn_down():
    # the master keeps gang labels a user's pod spec already has: min-available 1 for a trial of two pods
    task = master_task("0.26.2", slots_per_trial=8)
    pods = as_stored(task)
    for pod in pods:
        pod["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io/min-available"] = "1"
    pods[0]["spec"]["nodeName"] = "gpu-0"
    (group,) = master_groups(pods)
    assert group.state is State.RUNNING  # min-available is met: nothing is partly bound
    more = group.extra
    assert more is not None and [p.name for p in more.pending] == [pods[1]["metadata"]["name"]]
    assert as_pod_group(more).id == f"{group.id}+more"


def test_a_running_trial_started_when_it_was_bound_and_is_the_newest_victim():
    """The victim rule's "newest first" (least work lost) across both kinds: a trial created at 10:00 that waited
    in the queue and was bound at 10:50 has run for less time than a det-k8s group created at 10:30."""
    from det_k8s.cluster.read import constraints_from_spec, effective_requests, snapshot_from_objects
    from det_k8s.scheduling.model import PodGroup, PodRequest, Policy
    from det_k8s.scheduling.plan import running_in, schedule
    from tests.support.kube_objects import node, running, spec

    task = master_task("0.38.1", slots_per_trial=4, priority=10)
    (bound,) = as_stored(task, priority=10, created="2026-01-01T10:00:00Z", node="gpu-0")
    bound["status"]["conditions"] = [{"type": "PodScheduled", "status": "True",
                                      "lastTransitionTime": "2026-01-01T10:50:00Z"}]
    bound["status"]["startTime"] = "2026-01-01T10:50:02Z"
    (group,) = master_groups([bound])
    trial = as_running_group(group)
    assert trial.started_at == "2026-01-01T10:50:00Z"
    del bound["status"]["conditions"]
    assert as_running_group(master_groups([bound])[0]).started_at == "2026-01-01T10:50:02Z"  # the kubelet's
    ours = running("mine", ["gpu-1"], gpus=4, priority=10, created="2026-01-01T10:30:00Z")
    objects = [node("gpu-0", 4), node("gpu-1", 4), bound, *ours]
    snapshot = snapshot_from_objects(objects)
    body = spec(4)
    urgent = PodGroup("urgent", "urgent", "carol", 90, "2026-01-01T11:00:00Z", 1, (PodRequest(
        "urgent-0", 0, effective_requests(body), constraints_from_spec(body, "research", {}), {}, "research"),), 4)
    plan = schedule(snapshot, [urgent], Policy(preemption=True),
                    [*running_in(snapshot, "research"), trial])
    assert plan.victims == (group.id,)


def test_a_rocm_masters_task_counts_its_amd_gpus_as_slots():
    # slotType rocm (0.36+): the master asks for amd.com/gpu and adds no gang labels; the group's slots are its GPUs
    task = master_task("0.38.1", slots_per_trial=4, max_slots_per_pod=4, slot_type="rocm")
    (group,) = master_groups(as_stored(task))
    queued = as_pod_group(group)
    assert queued.size == 1 and queued.slots == 4
    assert queued.pods[0].requests["amd.com/gpu"] == 4000 and GPU not in queued.pods[0].requests


FOREIGN = {  # what each other gang mechanism puts on its pods (cluster/gangs.py has the sources)
    "Kubernetes": ("spec", {"schedulingGroup": {"podGroupName": "pg-1"}}),
    "KAI": ("annotations", {"pod-group-name": "pg-1"}),
    "Volcano": ("annotations", {"scheduling.k8s.io/group-name": "pg-1"}),
    "coscheduling": ("labels", {"scheduling.x-k8s.io/pod-group": "pg-1"}),
}


@pytest.mark.parametrize("mechanism", sorted(FOREIGN))
def test_a_pod_of_another_gang_mechanism_is_never_the_masters_even_naming_its_scheduler(mechanism):
    from det_k8s.cluster.gangs import foreign_gang
    from det_k8s.cluster.read import pod_from_object

    task = master_task("0.38.1", slots_per_trial=4)
    pods = as_stored(task)
    where, marks = FOREIGN[mechanism]
    for pod in pods:
        if where == "spec":
            pod["spec"].update(marks)
        else:
            pod["metadata"].setdefault(where, {}).update(marks)
    assert master_groups(pods) == ()
    assert foreign_gang(pods[0]).startswith(mechanism)
    assert pod_from_object(pods[0]).gang.startswith(mechanism)
    assert len(master_groups(as_stored(task))) == 1  # the master's own pod-group labels are its, and served


def test_groups_of_unchanged_pods_are_reused_and_a_changed_pod_makes_its_group_anew():
    """The loop groups every served pod each pass (issue 24): a group whose pods are the same objects as in the last
    call is that call's group (its state and running form already worked out); any change makes it anew, and the
    answer is always the one a first call gives."""
    from det_k8s.scheduling import master as M
    from det_k8s.scheduling.master import master_pod

    stored = as_stored(master_task("0.38.1", experiment=1, slots_per_trial=8, max_slots_per_pod=4), node="n1")
    bound = [master_pod(p) for p in stored]
    ready = [master_pod(p) for p in as_stored(master_task("0.38.1", experiment=2, slots_per_trial=8,
                                                          max_slots_per_pod=4))]

    def changed(**parts):
        obj = copy.deepcopy(stored[0])
        for part, fields in parts.items():
            obj[part].update(fields)
        return master_pod(obj)

    def fresh(pods):
        M._LAST = None
        return master_groups(pods)

    first = master_groups([*bound, *ready])
    again = master_groups([*ready, *bound])  # (order does not matter)
    assert [a is b for a, b in zip(first, again, strict=True)] == [True, True]
    assert first[0].running is as_running_group(again[0])  # worked out once
    assert [g.state for g in first] == [State.RUNNING, State.READY]

    # one pod of the bound gang being deleted (the watch's new object for it): its group is made anew, leaving
    deleting = changed(metadata={"deletionTimestamp": "2026-01-01T11:00:00Z"})
    now = master_groups([deleting, bound[1], *ready])
    assert now[0] is not first[0] and now[0].state is State.LEAVING and now[1] is first[1]
    assert now == fresh([deleting, bound[1], *ready])
    # one pod gone: partly bound; that pod ended instead (Succeeded): counted as finished, still running
    assert master_groups([bound[1], *ready])[0].state is State.PARTIAL
    ended = changed(status={"phase": "Succeeded"})
    group = master_groups([ended, bound[1], *ready])[0]
    assert group.finished == 1 and group.state is State.RUNNING and len(group.running.pods) == 1
    assert master_groups([ended, bound[1], *ready]) == fresh([ended, bound[1], *ready])


def test_the_same_tuple_of_pods_is_answered_at_once_and_any_other_afresh():
    """A view hands out the same tuple of served pods until one changes: grouping it again answers the same groups
    without looking at its pods; a list (or a tuple of objects that may change) is always grouped afresh."""
    from det_k8s.scheduling.master import master_pod

    pods = tuple(master_pod(p) for p in as_stored(master_task("0.38.1", experiment=1, slots_per_trial=8,
                                                              max_slots_per_pod=4)))
    first = master_groups(pods)
    assert master_groups(pods) is first and master_groups(pods, "default-scheduler") == ()
    assert master_groups(list(pods)) == first and master_groups(list(pods)) is not first
    stored = tuple(as_stored(master_task("0.38.1", experiment=2, slots_per_trial=4)))  # dicts: never remembered
    once = master_groups(stored)
    stored[0]["metadata"]["deletionTimestamp"] = "2026-01-01T11:00:00Z"
    assert once[0].state is State.READY and master_groups(stored)[0].state is State.LEAVING


@pytest.mark.parametrize("seed", range(12))
def test_grouping_from_the_last_call_answers_what_a_first_call_answers(seed):
    """The loop's pods change a few at a time (issue 24): each call groups only what appeared and went since the
    last one. Over random changes (gangs arriving, bound, ending, deleted, a new attempt beside a gang's old pods,
    pods of another scheduler and det-k8s's own), every answer equals a first call's, group for group."""
    import random

    from det_k8s.scheduling import master as M
    from det_k8s.scheduling.master import master_pod

    rng = random.Random(seed)
    pods: dict[str, object] = {}  # name -> MasterPod, as a view holds them (a new object when the pod changes)
    objects: dict[str, dict] = {}  # name -> the pod as the API server returns it
    serial = [0]

    def put(obj):
        objects[obj["metadata"]["name"]] = obj
        pods[obj["metadata"]["name"]] = master_pod(obj)

    def arrive():
        serial[0] += 1
        task = master_task(rng.choice(["0.26.2", "0.38.1"]), experiment=rng.randrange(1, 4),
                           trial=rng.randrange(1, 3), slots_per_trial=rng.choice([1, 4, 8]), max_slots_per_pod=4,
                           run=serial[0], scheduler=rng.choice(["coscheduler"] * 5 + ["default-scheduler"]),
                           task_type=rng.choice(["TRIAL", "TRIAL", "COMMAND"]))
        stored = as_stored(task, node=rng.choice([None, None, "n1"]))
        for obj in stored[:rng.choice([len(stored), len(stored), max(1, len(stored) - 1)])]:  # (some still coming)
            obj["metadata"]["name"] += f"-{serial[0]}"
            if rng.random() < 0.05:
                obj["metadata"].setdefault("labels", {})["app.kubernetes.io/managed-by"] = "det-k8s"
            put(obj)

    def again():  # a new attempt of a gang whose pods are still there: the same gang name, another allocation
        gangs = sorted({p.key for p in pods.values() if p.key[2]})
        if not gangs:
            return
        key = rng.choice(gangs)
        serial[0] += 1
        for name in sorted(n for n, p in pods.items() if p.key == key):
            obj = copy.deepcopy(objects[name])
            obj["metadata"]["name"] += f"-again{serial[0]}"
            obj["metadata"]["labels"][M.ALLOCATION] = f"{key[2]}.{serial[0]}"
            obj["spec"].pop("nodeName", None)
            obj["status"] = {"phase": "Pending"}
            put(obj)

    def change():
        if not pods:
            return
        ended = sorted(n for n, p in pods.items() if p.pod.phase in ("Succeeded", "Failed"))
        name = rng.choice(ended if ended and rng.random() < 0.3 else sorted(pods))
        what = rng.random()
        if what < 0.3:
            del pods[name], objects[name]
            return
        obj = copy.deepcopy(objects[name])
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1000)
        if what < 0.6:
            obj["spec"]["nodeName"] = "n2"
            obj["status"]["phase"] = "Running"
        elif what < 0.8:
            obj["status"]["phase"] = rng.choice(["Succeeded", "Failed"])
        else:
            obj["metadata"]["deletionTimestamp"] = "2026-01-01T11:00:00Z"
        put(obj)

    M._LAST = None
    updated = 0
    for _ in range(60):
        for _ in range(rng.choice([1, 1, 2, 5])):
            (arrive if rng.random() < 0.35 else again if rng.random() < 0.1 else change)()
        now = list(pods.values())
        if rng.random() < 0.3:
            rng.shuffle(now)  # (the order of the pods is no part of the answer)
        if now and rng.random() < 0.1:
            now.append(rng.choice(now))  # (an object given twice counts once)
        now = tuple(now)
        name = rng.choice(["coscheduler", "coscheduler", "coscheduler", "default-scheduler"])
        before = M._LAST
        answer = master_groups(now, name)
        updated += before is not None and M._LAST is before  # (grouped from the last call's grouping)
        assert master_groups(now, name) is answer  # the same tuple: at once
        kept = M._LAST
        M._LAST = None
        first = master_groups(now, name)
        assert answer == first
        assert [g.state for g in answer] == [g.state for g in first]
        M._LAST = kept  # (the next call goes on from the grouping the calls so far made)
    assert updated >= 10, updated  # (many calls took the short way)


def test_the_answer_never_depends_on_the_order_or_history_of_calls():
    """Groups whose ids are alike (a gang named like a single pod) come in one order, and an object given twice counts
    once, whether a call groups the pods afresh or from the last call's grouping (a review found both differing)."""
    from det_k8s.cluster.model import Pod
    from det_k8s.scheduling import master as M
    from det_k8s.scheduling.master import MasterPod

    def pod(name, gang="", size=0, phase="Pending"):
        labels = {M.GANG_NAME: gang, M.MIN_AVAILABLE: str(size)} if gang else {}
        return MasterPod(Pod(name, "default", phase=phase, labels=labels, bound_by_det_k8s=True), f"uid-{name}", "1",
                         0, "coscheduler")

    def first(pods):
        M._LAST = None
        return master_groups(pods)

    single, gang0, gang1 = pod("zz"), pod("zz-0", gang="zz", size=2), pod("zz-1", gang="zz", size=2)
    rest = tuple(pod(f"other-{i}") for i in range(10))
    first((gang0, single, gang1, *rest))
    after = master_groups((single, gang1, *rest))  # zz-0 gone: grouped from the last call
    assert after == first((single, gang1, *rest)) == first((*rest, gang1, single))
    assert [g.size for g in after if g.id == "default/zz"] == [1, 2]  # (alike ids: by their group key)
    done = pod("zz-2", gang="zz", size=2, phase="Succeeded")
    twice = (gang1, done, done, *rest)
    assert master_groups(twice) == first(twice) == first(list(twice))
    (group,) = [g for g in first(twice) if g.size == 2]
    assert group.finished == 1 and group.pods == (gang1,)
    stored = as_stored(master_task("0.38.1", slots_per_trial=4))  # dicts with one MasterPod given twice
    assert len(master_groups([*stored, gang1, gang1])) == 2
    assert [g.pods for g in master_groups([*stored, gang1, gang1]) if g.name == "zz"] == [(gang1,)]
