"""The starvation guard: a large group that has waited reserves nodes; smaller groups backfill only elsewhere.

The groups here were submitted an hour before the pass (`NOW`), well past `reserve_after`; the
threshold itself is tested at the end.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from det_k8s.scheduling.explain import describe
from det_k8s.scheduling.model import DEFAULT_RESERVE_AFTER, Policy, ReasonCode
from det_k8s.scheduling.plan import schedule
from tests.support.builders import gang, node, other_pod, queue, snapshot, task_pods

SUBMITTED = datetime(2024, 1, 1, tzinfo=UTC)  # tests.support.builders.gang's submitted_at
NOW = SUBMITTED + timedelta(hours=1)

# four 4-GPU nodes; det-k8s groups hold 3 of them; n3 is free
BUSY = snapshot(
    [node(f"n{i}", 4) for i in range(4)],
    task_pods("r0", ["n0"], gpus=4) + task_pods("r1", ["n1"], gpus=2) + task_pods("r2", ["n2"], gpus=4),
)


def test_the_blocked_head_reserves_the_nodes_that_free_up_soonest():
    plan = schedule(BUSY, queue(gang("big", 2, 4), gang("small", 1, 2)), Policy(), now=NOW)
    assert plan.waiting["big"].code is ReasonCode.RESERVING
    assert plan.reservations == {"big": ("n3", "n1")}  # the free node, then the half-free one


def test_smaller_groups_do_not_backfill_onto_reserved_nodes():
    plan = schedule(BUSY, queue(gang("big", 2, 4), gang("small", 1, 2)), Policy(), now=NOW)
    assert "small" not in plan.placements
    reason = plan.waiting["small"]
    assert reason.code is ReasonCode.BEHIND_RESERVATION and reason.reserved_for == "big"
    assert "reserved for big" in describe(reason) and "delay" in describe(reason)


def test_smaller_groups_backfill_outside_the_reservation():
    cluster = snapshot([*BUSY.nodes, node("n4", 4)], [*BUSY.pods, other_pod("notebook", "n4", gpus=2)])
    plan = schedule(cluster, queue(gang("big", 2, 4), gang("small", 1, 2)), Policy(), now=NOW)
    assert plan.reservations == {"big": ("n3", "n1")}
    assert plan.placements["small"] == (("small-0", "n4"),)


def test_only_the_first_blocked_group_reserves():
    plan = schedule(BUSY, queue(gang("big", 2, 4), gang("bigger", 3, 4)), Policy(), now=NOW)
    assert list(plan.reservations) == ["big"]
    assert plan.waiting["bigger"].code is ReasonCode.INSUFFICIENT


def test_without_reservations_small_groups_take_any_free_capacity():
    plan = schedule(BUSY, queue(gang("big", 2, 4), gang("small", 1, 2)), Policy(reservations=False), now=NOW)
    assert "small" in plan.placements and plan.reservations == {}


def test_capacity_held_by_pods_det_k8s_does_not_manage_is_not_reserved_for():
    # only other pods hold the GPUs: they may never leave, so reserving would block backfill for nothing
    cluster = snapshot([node("n0", 4), node("n1", 4)], [other_pod("inference", "n0", gpus=4)])
    plan = schedule(cluster, queue(gang("big", 2, 4), gang("small", 1, 4)), Policy(), now=NOW)
    assert plan.reservations == {}
    assert "small" in plan.placements


def test_without_backfill_nothing_passes_a_waiting_group():
    plan = schedule(BUSY, queue(gang("big", 2, 4), gang("small", 1, 1)), Policy(backfill=False), now=NOW)
    assert plan.placements == {}
    assert plan.waiting["small"].code is ReasonCode.STRICT_ORDER
    assert "backfill is off" in describe(plan.waiting["small"])


def test_rejected_groups_never_reserve_or_block():
    plan = schedule(BUSY, queue(gang("huge", 5, 4), gang("small", 1, 4)), Policy(backfill=False), now=NOW)
    assert plan.status("huge") == "rejected" and "small" in plan.placements


def test_groups_ahead_are_named():
    plan = schedule(BUSY, queue(gang("big", 2, 4), gang("bigger", 3, 4), gang("small", 1, 2)), Policy(), now=NOW)
    reason = plan.waiting["small"]
    assert (reason.ahead, reason.ahead_count) == (("big", "bigger"), 2)
    assert "2 groups ahead: big, bigger" in describe(reason)


# two 8-GPU nodes, one busy with a det-k8s group: a 3 x 4-GPU group reserves both, needing 3 of their 4 slots
SLACK = snapshot([node("n0", 8), node("n1", 8)], task_pods("r0", ["n0"], gpus=8))


def test_smaller_groups_may_use_a_reservations_slack_but_not_more():
    plan = schedule(SLACK, queue(gang("big", 3, 4), gang("s1", 1, 4), gang("s2", 1, 4)), Policy(), now=NOW)
    assert plan.reservations == {"big": ("n1", "n0")}
    assert plan.placements["s1"] == (("s1-0", "n1"),)  # big still fits n0 + n1 once r0 finishes
    assert plan.waiting["s2"].code is ReasonCode.BEHIND_RESERVATION


def test_slack_counts_backfilled_pods_as_staying():
    groups = queue(gang("big", 3, 4), *(gang(f"s{i}", 1, 2) for i in range(3)))
    plan = schedule(SLACK, groups, Policy(), now=NOW)
    assert {"s0", "s1"} <= set(plan.placements) and "s2" in plan.waiting  # 2 + 2 on n1 leaves one 4-GPU slot


def test_without_backfill_the_slack_stays_unused():
    plan = schedule(SLACK, queue(gang("big", 3, 4), gang("s1", 1, 4)), Policy(backfill=False), now=NOW)
    assert plan.placements == {}


# -- the threshold: only a group that has waited reserve_after seconds reserves ------------------------


def submitted(group, moment):
    return replace(group, submitted_at=moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))


def test_a_group_that_just_arrived_reserves_nothing_and_smaller_groups_use_the_free_node():
    fresh = submitted(gang("big", 2, 4), NOW - timedelta(seconds=10))
    plan = schedule(BUSY, queue(fresh, gang("small", 1, 2)), Policy(), now=NOW)
    assert plan.reservations == {} and plan.waiting["big"].code is ReasonCode.INSUFFICIENT
    assert "small" in plan.placements


def test_the_guard_engages_once_the_group_has_waited_reserve_after_seconds():
    policy = Policy(reserve_after=600)
    for age, reserves in ((599, False), (600, True), (3600, True)):
        big = submitted(gang("big", 2, 4), NOW - timedelta(seconds=age))
        plan = schedule(BUSY, queue(big, gang("small", 1, 2)), policy, now=NOW)
        assert ("big" in plan.reservations) is reserves, age
        assert ("small" in plan.placements) is not reserves, age


def test_the_default_threshold_is_five_minutes():
    assert Policy().reserve_after == DEFAULT_RESERVE_AFTER == 300


def test_an_older_group_behind_a_fresh_one_reserves():
    fresh = submitted(gang("fresh", 2, 4, priority=60), NOW - timedelta(seconds=5))
    old = submitted(gang("old", 2, 4), NOW - timedelta(hours=2))
    plan = schedule(BUSY, queue(fresh, old, gang("small", 1, 2)), Policy(), now=NOW)
    assert plan.order[:2] == ("fresh", "old")
    assert list(plan.reservations) == ["old"] and plan.waiting["fresh"].code is ReasonCode.INSUFFICIENT


def test_reserve_after_zero_reserves_at_once_even_without_a_clock():
    fresh = submitted(gang("big", 2, 4), NOW)
    plan = schedule(BUSY, queue(fresh, gang("small", 1, 2)), Policy(reserve_after=0))
    assert plan.reservations == {"big": ("n3", "n1")}


def test_without_a_clock_or_a_readable_submission_time_no_group_has_waited():
    plan = schedule(BUSY, queue(gang("big", 2, 4), gang("small", 1, 2)), Policy())
    assert plan.reservations == {}
    unknown = replace(gang("big", 2, 4), submitted_at="not a time")
    assert schedule(BUSY, queue(unknown, gang("small", 1, 2)), Policy(), now=NOW).reservations == {}


def test_submission_times_with_offsets_and_naive_clocks_compare_as_utc():
    big = replace(gang("big", 2, 4), submitted_at="2024-01-01T02:00:00+02:00")  # midnight UTC, an hour ago
    assert "big" in schedule(BUSY, queue(big), Policy(), now=NOW).reservations
    assert "big" in schedule(BUSY, queue(big), Policy(), now=NOW.replace(tzinfo=None)).reservations
