"""Queue order: higher priority first, then the lowest weighted dominant share, then submission order."""

from __future__ import annotations

from det_k8s.scheduling.model import Policy
from det_k8s.scheduling.plan import schedule
from tests.support.builders import gang, node, queue, snapshot, task_pods

EIGHT = snapshot([node("n", 8)])


def test_higher_priority_goes_first_whatever_the_submission_order():
    plan = schedule(EIGHT, queue(gang("low", 1, 8, priority=10), gang("high", 1, 8, priority=90)), Policy())
    assert plan.order == ("high", "low")
    assert set(plan.placements) == {"high"}


def test_the_default_priority_is_in_the_middle():
    groups = queue(gang("low", 1, 1, priority=10), gang("default", 1, 1), gang("high", 1, 1, priority=90))
    assert schedule(EIGHT, groups, Policy()).order == ("high", "default", "low")


def test_same_priority_same_user_goes_in_submission_order():
    groups = queue(*(gang(f"g{i}", 1, 1) for i in range(5)))
    assert schedule(EIGHT, groups, Policy()).order == ("g0", "g1", "g2", "g3", "g4")


def test_fair_share_alternates_between_users():
    groups = queue(
        gang("a1", 1, 1, user="a"),
        gang("a2", 1, 1, user="a"),
        gang("a3", 1, 1, user="a"),
        gang("b1", 1, 1, user="b"),
        gang("b2", 1, 1, user="b"),
    )
    assert schedule(EIGHT, groups, Policy()).order == ("a1", "b1", "a2", "b2", "a3")


def test_a_user_already_running_more_goes_after():
    cluster = snapshot([node("n0", 8), node("n1", 8)], task_pods("running", ["n0"], gpus=4, user="a"))
    groups = queue(gang("a1", 1, 1, user="a"), gang("b1", 1, 1, user="b"))
    assert schedule(cluster, groups, Policy()).order == ("b1", "a1")


def test_the_dominant_resource_counts():
    # a holds 1 of 16 GPUs (6%) but 48 of 64 cores (75%); b holds 8 GPUs (50%): a is the heavier user
    cluster = snapshot(
        [node("n0", 8, cpu=32), node("n1", 8, cpu=32)],
        task_pods("a-job", ["n0", "n1"], gpus=0.5, cpu=24, user="a")
        + task_pods("b-job", ["n0"], gpus=8, user="b"),
    )
    groups = queue(gang("a1", 1, cpu=1, user="a"), gang("b1", 1, cpu=1, user="b"))
    assert schedule(cluster, groups, Policy()).order == ("b1", "a1")


def test_weights_scale_shares():
    cluster = snapshot(
        [node("n0", 8), node("n1", 8)],
        task_pods("a-job", ["n0"], gpus=4, user="a") + task_pods("b-job", ["n1"], gpus=2, user="b"),
    )
    groups = queue(gang("a1", 1, 1, user="a"), gang("b1", 1, 1, user="b"))
    assert schedule(cluster, groups, Policy()).order == ("b1", "a1")
    assert schedule(cluster, groups, Policy(weights={"a": 4})).order == ("a1", "b1")


def test_shares_grow_as_the_pass_places_groups():
    groups = queue(
        gang("a-big", 1, 4, user="a"),
        gang("a-small", 1, 1, user="a"),
        gang("b1", 1, 1, user="b"),
        gang("b2", 1, 1, user="b"),
    )
    # after a-big (4 of 8 GPUs), user b goes twice before a's next group
    assert schedule(EIGHT, groups, Policy()).order == ("a-big", "b1", "b2", "a-small")


def test_priority_beats_fair_share():
    cluster = snapshot([node("n0", 8)], task_pods("hog", ["n0"], gpus=8, user="a"))
    groups = queue(gang("b-low", 1, 1, user="b", priority=10), gang("a-high", 1, 1, user="a", priority=90))
    assert schedule(cluster, groups, Policy()).order == ("a-high", "b-low")
