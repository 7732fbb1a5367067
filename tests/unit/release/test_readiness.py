"""What install --wait, upgrade and rollback wait for (det_k8s/release/readiness.py): kubectl rollout status's rules."""

from __future__ import annotations

from det_k8s.release.readiness import claim_waiting, deployment_waiting, readiness


def deployment(generation=2, observed=2, replicas=1, updated=1, available=1, total=None, conditions=()):
    return {"metadata": {"generation": generation}, "spec": {"replicas": replicas},
            "status": {"observedGeneration": observed, "updatedReplicas": updated, "availableReplicas": available,
                       "replicas": updated if total is None else total, "conditions": list(conditions)}}


def test_a_rolled_out_deployment_is_ready():
    assert deployment_waiting(deployment(), "m") is None


def test_each_way_of_not_being_rolled_out_is_named():
    assert deployment_waiting(None, "m") == "Deployment m does not exist yet"
    assert "has not seen the new spec" in deployment_waiting(deployment(observed=1), "m")
    assert deployment_waiting(deployment(updated=0, available=0), "m") == "Deployment m: 0 of 1 replica(s) updated"
    assert deployment_waiting(deployment(total=2), "m") == "Deployment m: 1 old replica(s) still terminating"
    assert deployment_waiting(deployment(available=0), "m") == "Deployment m: 0 of 1 replica(s) available"
    stalled = deployment(available=0, conditions=[{"type": "Progressing", "reason": "ProgressDeadlineExceeded",
                                                   "message": "ReplicaSet x has timed out progressing."}])
    assert deployment_waiting(stalled, "m") == "Deployment m: rollout stalled (ReplicaSet x has timed out progressing.)"


def test_a_claim_must_be_bound_and_everything_waiting_is_listed():
    assert claim_waiting({"status": {"phase": "Bound"}}, "c") is None
    assert claim_waiting({}, "c") == "PersistentVolumeClaim c is Pending"
    state = readiness([("m", deployment()), ("db", deployment(available=0))], [("c", {"status": {"phase": "Pending"}})])
    assert not state.ready
    assert state.waiting == ("Deployment db: 0 of 1 replica(s) available", "PersistentVolumeClaim c is Pending")
    assert readiness([("m", deployment())]).ready
