"""Preemption: whole lower-priority det-k8s groups only, as few and as low as possible."""

from __future__ import annotations

from det_k8s.scheduling.explain import describe
from det_k8s.scheduling.model import Policy, ReasonCode
from det_k8s.scheduling.plan import schedule
from tests.support.builders import gang, node, other_pod, queue, snapshot, task_pods

PREEMPT = Policy(preemption=True)


def cluster(*pods_lists, nodes=4, gpus=8, extra=()):
    return snapshot(
        [node(f"n{i}", gpus) for i in range(nodes)], [p for pods in pods_lists for p in pods] + list(extra)
    )


def test_without_preemption_a_higher_priority_group_just_waits():
    full = cluster(task_pods("low", ["n0", "n1", "n2", "n3"], gpus=8, priority=10))
    plan = schedule(full, [gang("urgent", 1, 8, priority=90)], Policy())
    assert plan.victims == () and plan.status("urgent") == "queued"


def test_a_whole_lower_priority_group_is_evicted_and_the_preemptor_placed_on_its_nodes():
    full = cluster(
        task_pods("low", ["n0", "n1"], gpus=8, priority=10),
        task_pods("other", ["n2", "n3"], gpus=8, priority=60),
    )
    plan = schedule(full, [gang("urgent", 1, 8, priority=90)], PREEMPT)
    assert plan.victims == ("low",)
    assert plan.preempting == {"urgent": ("low",)}
    assert plan.placements["urgent"][0][1] in {"n0", "n1"}


def test_equal_and_higher_priorities_are_never_evicted():
    full = cluster(
        task_pods("same", ["n0", "n1"], gpus=8, priority=50),
        task_pods("higher", ["n2", "n3"], gpus=8, priority=70),
    )
    plan = schedule(full, [gang("g", 1, 8, priority=50)], PREEMPT)
    assert plan.victims == ()
    reason = plan.waiting["g"]
    assert reason.preemptible == 0 and "no lower-priority group in this queue to evict" in describe(reason)


def test_the_lowest_priority_goes_first():
    full = cluster(
        task_pods("p30", ["n0"], gpus=8, priority=30),
        task_pods("p10", ["n1"], gpus=8, priority=10),
        task_pods("p20", ["n2"], gpus=8, priority=20),
        task_pods("p40", ["n3"], gpus=8, priority=40),
    )
    plan = schedule(full, [gang("g", 2, 8, priority=90)], PREEMPT)
    assert sorted(plan.victims) == ["p10", "p20"]


def test_within_a_priority_the_most_recently_started_goes_first():
    full = cluster(
        task_pods("old", ["n0"], gpus=8, priority=10, created="2024-01-01T00:00:00Z"),
        task_pods("new", ["n1"], gpus=8, priority=10, created="2024-06-01T00:00:00Z"),
        task_pods("x", ["n2", "n3"], gpus=8, priority=80),
    )
    assert schedule(full, [gang("g", 1, 8, priority=90)], PREEMPT).victims == ("new",)


def test_victims_not_needed_are_dropped_again():
    # p10 is tried first but frees too little alone; once p20 is added, p10 is not needed
    full = cluster(
        task_pods("p10", ["n0"], gpus=2, priority=10),
        task_pods("p20", ["n1"], gpus=8, priority=20),
        task_pods("p90", ["n2", "n3"], gpus=8, priority=90),
        extra=[other_pod("x", "n0", gpus=6)],
    )
    plan = schedule(full, [gang("g", 1, 8, priority=50)], PREEMPT)
    assert plan.victims == ("p20",)


def test_a_victim_is_evicted_whole_even_if_one_pod_would_do():
    full = cluster(task_pods("wide", ["n0", "n1", "n2", "n3"], gpus=8, priority=10))
    plan = schedule(full, [gang("g", 1, 8, priority=50)], PREEMPT)
    assert plan.victims == ("wide",)


def test_pods_det_k8s_does_not_manage_are_never_victims():
    full = cluster(extra=[other_pod(f"x{i}", f"n{i}", gpus=8) for i in range(4)])
    plan = schedule(full, [gang("g", 1, 8, priority=99)], PREEMPT)
    assert plan.victims == () and plan.status("g") == "queued"


def test_groups_already_terminating_are_not_victims():
    full = cluster(task_pods("leaving", ["n0", "n1", "n2", "n3"], gpus=8, priority=10, deleting=True))
    assert schedule(full, [gang("g", 1, 8, priority=90)], PREEMPT).victims == ()


def test_when_evicting_every_candidate_is_not_enough_nobody_is_evicted():
    full = cluster(
        task_pods("low", ["n0"], gpus=8, priority=10),
        task_pods("high", ["n1", "n2", "n3"], gpus=8, priority=90),
    )
    plan = schedule(full, [gang("g", 2, 8, priority=50)], PREEMPT)
    assert plan.victims == ()
    assert plan.waiting["g"].preemptible == 1 and "would not free enough" in describe(plan.waiting["g"])


def test_groups_that_fit_free_capacity_preempt_nobody():
    full = cluster(task_pods("low", ["n0"], gpus=8, priority=10))
    plan = schedule(full, [gang("g", 1, 8, priority=90)], PREEMPT)
    assert plan.victims == () and plan.preempting == {}


def test_later_preemptors_reuse_capacity_victims_already_free():
    full = cluster(
        task_pods("low", ["n0", "n1"], gpus=8, priority=10),
        task_pods("mid", ["n2", "n3"], gpus=8, priority=30),
    )
    plan = schedule(full, queue(gang("a", 1, 8, priority=90), gang("b", 1, 8, priority=80)), PREEMPT)
    assert plan.victims == ("low",)
    assert plan.preempting == {"a": ("low",), "b": ("low",)}
    assert {plan.placements["a"][0][1], plan.placements["b"][0][1]} == {"n0", "n1"}


def test_nobody_waits_for_capacity_freed_from_an_equal_or_higher_priority_victim():
    full = cluster(
        task_pods("p60", ["n0", "n1"], gpus=8, priority=60),
        task_pods("p90", ["n2", "n3"], gpus=8, priority=95),
    )
    plan = schedule(full, queue(gang("a", 1, 8, priority=90), gang("b", 1, 8, priority=60)), PREEMPT)
    assert plan.victims == ("p60",) and "b" not in plan.placements


def test_normal_placements_never_use_capacity_that_victims_still_hold():
    full = cluster(task_pods("low", ["n0", "n1"], gpus=8, priority=10), nodes=2)
    plan = schedule(full, queue(gang("a", 1, 8, priority=90), gang("b", 1, 8, priority=5)), PREEMPT)
    assert plan.status("b") == "queued"


def test_preemption_switches_on_the_fair_share_of_the_victims_user():
    full = cluster(task_pods("low", ["n0", "n1", "n2", "n3"], gpus=8, priority=10, user="bob"))
    groups = queue(
        gang("urgent", 4, 8, priority=90, user="alice"),
        gang("a2", 1, 1, priority=5, user="alice"),
        gang("b2", 1, 1, priority=5, user="bob"),
    )
    plan = schedule(full, groups, PREEMPT)
    assert plan.victims == ("low",)
    assert plan.order[1:] == ("b2", "a2")  # bob holds nothing once his group is preempted


def test_the_preemptor_is_reported_with_its_reason_empty():
    full = cluster(task_pods("low", ["n0", "n1", "n2", "n3"], gpus=8, priority=10))
    plan = schedule(full, [gang("g", 1, 8, priority=90)], PREEMPT)
    assert plan.reason("g") is None and plan.status("g") == "placed"
    assert ReasonCode.INSUFFICIENT not in {r.code for r in plan.waiting.values()}


def test_a_group_already_leaving_is_waited_for_not_joined_by_a_second_victim():
    # "low" was preempted by an earlier pass and is still checkpointing (its pods are being deleted): the
    # preemptor waits for it instead of evicting "spare" for the same GPUs
    full = cluster(
        task_pods("low", ["n0"], gpus=8, priority=10, deleting=True),
        task_pods("spare", ["n1"], gpus=8, priority=10),
        task_pods("other", ["n2", "n3"], gpus=8, priority=60),
    )
    plan = schedule(full, [gang("urgent", 1, 8, priority=90)], PREEMPT)
    assert plan.victims == ()
    assert plan.preempting == {"urgent": ("low",)}
    assert plan.placements["urgent"] == (("urgent-0", "n0"),)


def test_a_leaving_group_of_any_priority_gives_its_capacity_back_without_a_victim():
    # "same" is leaving whatever this pass does (killed, or preempted earlier): its GPUs are coming back, so they
    # cost no victim, whatever its priority (the rule of docs/scheduling.md, "Preemption": capacity coming back is
    # counted first)
    full = cluster(
        task_pods("same", ["n0"], gpus=8, priority=90, deleting=True),
        task_pods("low", ["n1"], gpus=8, priority=10),
        task_pods("other", ["n2", "n3"], gpus=8, priority=95),
    )
    plan = schedule(full, [gang("urgent", 1, 8, priority=90)], PREEMPT)
    assert plan.victims == () and plan.preempting == {"urgent": ("same",)}


def test_a_running_group_that_is_not_preemptible_is_never_a_victim():
    from dataclasses import replace

    from det_k8s.scheduling.labels import running_groups

    full = cluster(task_pods("notebook", ["n0", "n1", "n2", "n3"], gpus=8, priority=10))
    running = [replace(g, preemptible=False) for g in running_groups(full.pods)]
    plan = schedule(full, [gang("urgent", 1, 8, priority=90)], PREEMPT, running)
    assert plan.victims == () and plan.status("urgent") == "queued"


def test_on_a_node_over_its_allocatable_the_preemptor_waits_until_there_is_room_for_it():
    # the device plugin now reports 7 GPUs (one went bad) under 8 GPUs of running pods: the node is 1 GPU in debt.
    # Two 1-GPU groups are already leaving; the first one's GPU only pays the debt back, so a 1-GPU preemptor
    # placed there must wait for both (it waited for one and the kubelet refused it: OutOfnvidia.com/gpu)
    full = snapshot([node("n0", 7)], [
        *task_pods("a-leaving", ["n0"], gpus=1, priority=10, deleting=True),
        *task_pods("b-leaving", ["n0"], gpus=1, priority=10, deleting=True),
        *task_pods("stays", ["n0"], gpus=6, priority=90)])
    plan = schedule(full, [gang("urgent", 1, 1, priority=80)], PREEMPT)
    assert plan.placements["urgent"] == (("urgent-0", "n0"),)
    assert plan.preempting == {"urgent": ("a-leaving", "b-leaving")} and plan.victims == ()


def test_what_paid_a_nodes_debt_back_is_not_promised_to_a_second_preemptor():
    # 2 GPUs leave a node 1 GPU in debt: room for one 1-GPU preemptor, not two
    full = snapshot([node("n0", 7)], [
        *task_pods("leaving", ["n0"], gpus=2, priority=10, deleting=True),
        *task_pods("stays", ["n0"], gpus=6, priority=90)])
    plan = schedule(full, queue(gang("first", 1, 1, priority=80), gang("second", 1, 1, priority=70)), PREEMPT)
    assert "first" in plan.placements and "second" not in plan.placements
