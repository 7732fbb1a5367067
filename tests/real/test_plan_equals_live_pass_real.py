"""The offline what-if equals the live pass on the real control plane too, for a sample of states: the named states
of tests/property/test_plan_equals_live_pass.py (the master's trials as victims and lenders, team queues, a quota,
DRA-managed nodes), played on the real API server, kube-controller-manager (the Job controller makes 0.38's pods)
and kwok. Before each comparison the cluster is let settle (kwok runs what was bound, the controllers act on what
was deleted), so `plan --snapshot` and the live pass read the same state, as an admin's `kubectl get -o json` and the
next pass would."""

from __future__ import annotations

import time

import pytest

from tests.property.test_plan_equals_live_pass import SAMPLE, State, play

pytestmark = pytest.mark.real


def settled(cluster) -> None:
    """Until the pods (name, node, phase, terminating) and the Jobs' pod counts have not changed for 1.5 s."""
    def state() -> tuple:
        pods = tuple(sorted((p["metadata"]["namespace"], p["metadata"]["name"], p["spec"].get("nodeName", ""),
                             p["status"].get("phase", ""), bool(p["metadata"].get("deletionTimestamp")))
                            for p in cluster.api.items("pods")))
        jobs = tuple(sorted((j["metadata"]["name"], (j.get("status") or {}).get("active", 0))
                            for j in cluster.api.items("jobs")))
        return pods, jobs

    deadline, last, since = time.monotonic() + 60, None, time.monotonic()
    while True:
        now = state()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= 1.5:
            return
        assert time.monotonic() < deadline, f"the cluster did not settle: {now}"
        time.sleep(0.1)


@pytest.mark.parametrize("state", SAMPLE, ids=[f"{s.version}-dra{s.dra}-{i}" for i, s in enumerate(SAMPLE)])
def test_plan_and_the_live_pass_make_the_same_decisions_on_the_real_control_plane(real_cluster, state: State):
    real_cluster.api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    play(real_cluster, state, settle=lambda: settled(real_cluster))
