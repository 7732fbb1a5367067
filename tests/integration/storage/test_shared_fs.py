"""shared_fs: probed when hostPath exists on this machine, otherwise reported as not checkable from here."""

from __future__ import annotations

import os

import pytest

from det_k8s.storage import Reason, Status, Step, check_storage
from tests.support.emulators import storage_settings


def shared_fs(path):
    return storage_settings(type="shared_fs", hostPath=str(path))


def test_a_local_hostpath_is_probed_and_left_clean(tmp_path):
    report = check_storage(shared_fs(tmp_path))
    assert report.ok and report.checked
    assert [r.status for r in report.steps] == [Status.OK] * 4
    assert list(tmp_path.iterdir()) == []
    assert any("for testing only" in w for w in report.warnings)
    assert any("may still be a different directory" in w for w in report.warnings)


def test_a_hostpath_not_on_this_machine_is_not_checked_and_says_so(tmp_path):
    missing = tmp_path / "on-the-nodes"
    report = check_storage(shared_fs(missing))
    assert report.ok and not report.checked
    assert all(r.status is Status.SKIPPED for r in report.steps)
    assert report.steps[0].message == (
        f"cannot check hostPath from here: {missing} is a directory on the nodes and does not exist "
        "on this machine")
    assert not missing.exists()


def test_a_hostpath_that_is_a_file_fails_the_write(tmp_path):
    target = tmp_path / "file"
    target.write_text("not a directory")
    report = check_storage(shared_fs(target))
    assert not report.ok
    assert report.result(Step.WRITE).message == (
        f"{target} is not a directory; checkpointStorage.hostPath must name one")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write to any directory")
def test_a_read_only_hostpath_is_access_denied(tmp_path):
    tmp_path.chmod(0o555)
    try:
        report = check_storage(shared_fs(tmp_path))
    finally:
        tmp_path.chmod(0o755)
    assert (report.result(Step.WRITE).status, report.result(Step.WRITE).reason) == (Status.FAILED,
                                                                                   Reason.ACCESS_DENIED)
