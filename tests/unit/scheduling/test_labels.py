"""Reading running det-k8s groups back from pod labels, and label values that Kubernetes accepts."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from det_k8s.cluster.model import Pod
from det_k8s.scheduling import labels as L
from det_k8s.scheduling.model import RunningPod
from tests.support.builders import other_pod, requests, task_pods

LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@given(st.text(max_size=100))
def test_any_text_becomes_a_valid_label_value(text):
    value = L.label_value(text)
    assert len(value) <= 63 and LABEL_VALUE.match(value)


def test_label_values_keep_what_is_allowed():
    assert L.label_value("My Exp (v2)") == "My-Exp-v2"
    assert L.label_value("alice@example.com") == "alice-example.com"


def test_running_groups_are_read_from_det_k8s_pods_only():
    pods = [
        *task_pods(
            "g1",
            ["n0", "n1"],
            gpus=4,
            priority=70,
            user="carol",
            experiment="bert",
            created="2024-01-02T00:00:00Z",
        ),
        other_pod("web", "n0", gpus=1),
    ]
    (group,) = L.running_groups(pods)
    assert (group.id, group.experiment, group.user, group.priority, group.size) == (
        "g1",
        "bert",
        "carol",
        70,
        2,
    )
    assert group.pods == (
        RunningPod("g1-0", "n0", requests(gpus=4)),
        RunningPod("g1-1", "n1", requests(gpus=4)),
    )
    assert group.started_at == "2024-01-02T00:00:00Z" and not group.terminating


def test_finished_pods_hold_nothing_and_a_group_of_finished_pods_is_not_running():
    pods = task_pods("done", ["n0"], gpus=4, phase="Succeeded") + task_pods("half", ["n0", "n1"], gpus=4)
    pods[-1] = Pod(**{**{f: getattr(pods[-1], f) for f in pods[-1].__slots__}, "phase": "Failed"})
    (group,) = L.running_groups(pods)
    assert group.id == "half" and [p.name for p in group.pods] == ["half-0"] and group.size == 2


def test_a_group_with_a_pod_being_deleted_is_terminating():
    (group,) = L.running_groups(task_pods("g", ["n0"], gpus=1, deleting=True))
    assert group.terminating


def test_a_garbled_priority_label_falls_back_to_the_default():
    pods = task_pods("g", ["n0"], gpus=1)
    broken = Pod(
        **{
            **{f: getattr(pods[0], f) for f in pods[0].__slots__},
            "labels": {**pods[0].labels, L.PRIORITY: "high"},
        }
    )
    assert L.running_groups([broken])[0].priority == 50


def test_pods_labelled_determined_by_someone_else_are_not_ours():
    pod = Pod("foreign", node_name="n0", phase="Running", labels={"determined": "x", L.GROUP: "x"})
    assert L.running_groups([pod]) == ()


def test_no_det_k8s_pod_carries_a_label_the_master_acts_on():
    """The 0.17 master deletes `determined` pods at start; `determined-system` pods shrink its CPU slots."""
    from tests.support.builders import gang

    group = gang("g", 2, gpus=4)
    assert not set(L.pod_labels(group, 0)) & set(L.MASTER_LABELS)
    assert not set(L.group_labels(group)) & set(L.MASTER_LABELS)
