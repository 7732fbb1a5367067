"""The report: when it is ok, its one-line summary, its JSON shape."""

from __future__ import annotations

import json

from det_k8s.storage.report import STEPS, Reason, Status, Step, StepResult, StorageReport
from det_k8s.storage.shared_fs import not_checked


def report(*results: StepResult, **kw) -> StorageReport:
    done = {r.step: r for r in results}
    steps = tuple(done.get(step, StepResult(step, Status.OK, "fine")) for step in STEPS)
    return StorageReport(storage_type="s3", location="s3://b/p/", probe="s3://b/p/det-k8s-probe-x",
                         steps=steps, **kw)


def test_ok_only_when_all_four_steps_pass():
    assert report().ok
    assert not report(StepResult(Step.LIST, Status.FAILED, "denied", Reason.ACCESS_DENIED)).ok
    assert not report(StepResult(Step.READ, Status.SKIPPED, "skipped")).ok


def test_summary_names_the_failed_steps_and_the_first_reason():
    denied = Reason.ACCESS_DENIED
    failed = report(StepResult(Step.LIST, Status.FAILED, "access denied: s3:ListBucket", denied),
                    StepResult(Step.DELETE, Status.FAILED, "access denied: s3:DeleteObject", denied))
    assert failed.summary() == "s3 storage at s3://b/p/ failed (list, delete): access denied: s3:ListBucket"


def test_json_shape_is_stable():
    data = report(StepResult(Step.DELETE, Status.FAILED, "gone wrong", Reason.OTHER),
                  left_behind="s3://b/p/det-k8s-probe-x").to_dict()
    assert list(data) == ["ok", "checked", "type", "location", "probe", "steps", "leftBehind", "warnings"]
    assert data["steps"][3] == {"step": "delete", "status": "failed", "reason": "other",
                                "message": "gone wrong"}
    assert data["leftBehind"] == "s3://b/p/det-k8s-probe-x"
    json.dumps(data)


def test_a_hostpath_not_on_this_machine_is_not_checked_and_not_a_failure():
    result = not_checked("/mnt/checkpoints")
    assert result.ok and not result.checked
    assert all(r.status is Status.SKIPPED for r in result.steps)
    assert "cannot check hostPath from here" in result.steps[0].message
    assert any("for testing only" in w for w in result.warnings)
    assert result.summary() == "shared_fs storage at /mnt/checkpoints/ was not checked from here"
