"""`check_storage` against GCS: fake-gcs-server on 127.0.0.1, reached through STORAGE_EMULATOR_HOST.

fake-gcs-server checks no permissions, so "access denied" for GCS is covered only by the probe's
unit tests (tests/unit/storage) and the adapter's mapping of 403, not against an emulator.
"""

from __future__ import annotations

import pytest

from det_k8s.storage import Reason, Status, Step, check_storage
from tests.support.emulators import storage_settings

pytestmark = pytest.mark.emulator


def gcs(bucket, prefix=None):
    return storage_settings(type="gcs", bucket=bucket, prefix=prefix)


def steps(report):
    return {r.step: (r.status, r.reason) for r in report.steps}


@pytest.mark.parametrize("prefix", [None, "prod/", "prod/run-1"])
def test_a_working_bucket_passes_and_keeps_no_probe(fake_gcs, prefix):
    bucket = fake_gcs.new_bucket()
    report = check_storage(gcs(bucket, prefix))
    assert report.ok, report.to_dict()
    directory = (prefix or "").strip("/")
    assert report.location == f"gs://{bucket}/{directory + '/' if directory else ''}"
    assert fake_gcs.keys(bucket) == []


def test_a_missing_bucket_is_named(fake_gcs):
    report = check_storage(gcs("no-such-bucket-here"))
    assert steps(report)[Step.WRITE] == (Status.FAILED, Reason.NO_SUCH_BUCKET)
    assert report.result(Step.WRITE).message == (
        f"no such bucket 'no-such-bucket-here' at {fake_gcs.url}; create it or fix checkpointStorage.bucket")
    assert steps(report)[Step.DELETE] == (Status.SKIPPED, None)


def test_an_unreachable_emulator_is_named(closed_port, monkeypatch):
    endpoint = f"http://127.0.0.1:{closed_port}"
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint)
    report = check_storage(gcs("ckpt"))
    assert steps(report)[Step.WRITE] == (Status.FAILED, Reason.UNREACHABLE)
    assert report.result(Step.WRITE).message == (
        f"endpoint {endpoint} unreachable (connection refused); check STORAGE_EMULATOR_HOST")


def test_a_silent_endpoint_times_out_once_per_call_and_the_probe_is_named(tarpit, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", tarpit.url)
    report = check_storage(gcs("ckpt"), timeout=0.5)
    assert steps(report)[Step.WRITE] == (Status.FAILED, Reason.TIMEOUT)
    assert steps(report)[Step.DELETE] == (Status.FAILED, Reason.TIMEOUT)
    assert report.left_behind == report.probe
    assert tarpit.connections == 2  # one write, one delete: retry=None on every call


def test_without_application_default_credentials_it_says_how_to_get_them(tmp_path, monkeypatch):
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    report = check_storage(gcs("ckpt"))
    assert steps(report)[Step.WRITE] == (Status.FAILED, Reason.BAD_CREDENTIALS)
    assert "GOOGLE_APPLICATION_CREDENTIALS" in report.result(Step.WRITE).message
