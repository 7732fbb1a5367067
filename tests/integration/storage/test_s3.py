"""`check_storage` against S3: moto's server on 127.0.0.1, with its IAM enforcement for denials."""

from __future__ import annotations

import boto3
import pytest
from botocore.config import Config

from det_k8s.errors import SettingsError
from det_k8s.storage import Reason, Status, Step, check_storage
from tests.support.emulators import report_text, storage_settings

pytestmark = pytest.mark.emulator

KEYS = {"accessKey": "AKIAPROBE00000000000", "secretKey": "probe-secret-key-0123456789"}


def s3(endpoint, bucket, prefix=None, **keys):
    return storage_settings(type="s3", bucket=bucket, prefix=prefix, endpointUrl=endpoint, **(keys or KEYS))


def steps(report):
    return {r.step: (r.status, r.reason) for r in report.steps}


@pytest.mark.parametrize("prefix", [None, "research", "research/", "/deep/er/"])
def test_a_working_bucket_passes_and_keeps_no_probe(moto_s3, prefix):
    bucket = moto_s3.new_bucket()
    report = check_storage(s3(moto_s3.endpoint, bucket, prefix))
    assert report.ok, report.to_dict()
    assert [r.status for r in report.steps] == [Status.OK] * 4
    directory = (prefix or "").strip("/")
    assert report.probe.startswith(f"s3://{bucket}/{directory + '/' if directory else ''}det-k8s-probe-")
    assert moto_s3.keys(bucket) == []


def test_a_missing_bucket_is_named_and_nothing_else_is_tried(moto_s3):
    report = check_storage(s3(moto_s3.endpoint, "no-such-bucket-here"))
    assert steps(report)[Step.WRITE] == (Status.FAILED, Reason.NO_SUCH_BUCKET)
    assert report.result(Step.WRITE).message == (
        f"no such bucket 'no-such-bucket-here' at {moto_s3.endpoint}; "
        "create it or fix checkpointStorage.bucket")
    assert {steps(report)[s][0] for s in (Step.READ, Step.LIST, Step.DELETE)} == {Status.SKIPPED}
    assert not report.ok and report.left_behind is None


def test_an_unreachable_endpoint_is_named(closed_port):
    endpoint = f"http://127.0.0.1:{closed_port}"
    report = check_storage(s3(endpoint, "ckpt"))
    assert steps(report)[Step.WRITE] == (Status.FAILED, Reason.UNREACHABLE)
    assert report.result(Step.WRITE).message == (
        f"endpoint {endpoint} unreachable (connection refused); check checkpointStorage.endpointUrl")


def test_a_silent_endpoint_times_out_once_per_call_and_the_probe_is_named(tarpit):
    report = check_storage(s3(tarpit.url, "ckpt"), timeout=0.5)
    assert steps(report)[Step.WRITE] == (Status.FAILED, Reason.TIMEOUT)
    assert steps(report)[Step.DELETE] == (Status.FAILED, Reason.TIMEOUT)  # the write may have landed
    assert report.result(Step.WRITE).message == f"no answer from {tarpit.url} within 0.5s"
    assert report.left_behind == report.probe
    assert tarpit.connections == 2  # one write, one delete: no retries


def least_privilege(bucket, directory="research"):
    """The policy the docs ask for: the four object permissions under the prefix, nothing more."""
    return [
        {"Effect": "Allow", "Action": ["s3:PutObject", "s3:GetObject", "s3:DeleteObject"],
         "Resource": f"arn:aws:s3:::{bucket}/{directory}/*"},
        {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{bucket}"},
    ]


def test_the_least_privilege_policy_is_enough(moto_s3):
    bucket = moto_s3.new_bucket()
    keys = moto_s3.user_with_policy(least_privilege(bucket))
    moto_s3.set_auth(True)
    report = check_storage(s3(moto_s3.endpoint, bucket, "research/", **keys))
    assert report.ok, report.to_dict()


def test_each_missing_permission_is_named_and_an_undeletable_probe_is_reported(moto_s3):
    bucket = moto_s3.new_bucket()
    keys = moto_s3.user_with_policy([{"Effect": "Allow", "Action": ["s3:PutObject", "s3:GetObject"],
                                      "Resource": f"arn:aws:s3:::{bucket}/research/*"}])
    moto_s3.set_auth(True)
    report = check_storage(s3(moto_s3.endpoint, bucket, "research", **keys))
    moto_s3.set_auth(False)
    assert steps(report) == {Step.WRITE: (Status.OK, None), Step.READ: (Status.OK, None),
                             Step.LIST: (Status.FAILED, Reason.ACCESS_DENIED),
                             Step.DELETE: (Status.FAILED, Reason.ACCESS_DENIED)}
    assert report.result(Step.LIST).message == (
        f"access denied: the credentials need s3:ListBucket on arn:aws:s3:::{bucket} (for prefix research/)")
    assert report.result(Step.DELETE).message.startswith(
        f"access denied: the credentials need s3:DeleteObject on arn:aws:s3:::{bucket}/research/*; "
        f"the probe object {report.probe} may be left behind")
    key = report.probe.removeprefix(f"s3://{bucket}/")
    assert report.left_behind == report.probe and moto_s3.keys(bucket) == [key]  # it really is there
    moto_s3.client().delete_object(Bucket=bucket, Key=key)


def test_a_write_outside_the_allowed_prefix_is_denied_with_the_permission_named(moto_s3):
    bucket = moto_s3.new_bucket()
    keys = moto_s3.user_with_policy(least_privilege(bucket, "research"))
    moto_s3.set_auth(True)
    report = check_storage(s3(moto_s3.endpoint, bucket, "production/", **keys))
    assert steps(report)[Step.WRITE] == (Status.FAILED, Reason.ACCESS_DENIED)
    assert report.result(Step.WRITE).message == (
        f"access denied: the credentials need s3:PutObject on arn:aws:s3:::{bucket}/production/*")
    assert steps(report)[Step.DELETE] == (Status.SKIPPED, None)


def test_a_wrong_secret_key_is_bad_credentials_and_never_shown(moto_s3):
    bucket = moto_s3.new_bucket()
    keys = moto_s3.user_with_policy(least_privilege(bucket))
    moto_s3.set_auth(True)
    wrong = {"accessKey": keys["accessKey"], "secretKey": "Wrong/Secret+Key=0123456789abcdef"}
    report = check_storage(s3(moto_s3.endpoint, bucket, "research", **wrong))
    assert steps(report)[Step.WRITE] == (Status.FAILED, Reason.BAD_CREDENTIALS)
    assert "secret key does not match" in report.result(Step.WRITE).message
    text = report_text(report)
    assert wrong["secretKey"] not in text and keys["accessKey"] not in text


def test_an_unknown_access_key_is_bad_credentials(moto_s3):
    bucket = moto_s3.new_bucket()
    moto_s3.set_auth(True)
    report = check_storage(s3(moto_s3.endpoint, bucket, accessKey="AKIANOBODY0000000000", secretKey="x" * 40))
    assert steps(report)[Step.WRITE] == (Status.FAILED, Reason.BAD_CREDENTIALS)
    assert "access key ID is not known" in report.result(Step.WRITE).message


def test_a_key_whose_sdk_error_quotes_it_is_scrubbed(moto_s3):
    """A key pasted with its line break makes botocore quote the whole Authorization header."""
    bucket = moto_s3.new_bucket()
    access_key, secret_key = "AKIASCRUBME000000000\n", "scrub-me-secret-0123456789"
    raw = boto3.client("s3", endpoint_url=moto_s3.endpoint, region_name="us-east-1",
                       aws_access_key_id=access_key, aws_secret_access_key=secret_key,
                       config=Config(retries={"total_max_attempts": 1}))
    with pytest.raises(Exception) as excinfo:
        raw.put_object(Bucket=bucket, Key="k", Body=b"x")
    assert "AKIASCRUBME000000000" in str(excinfo.value) and "Signature=" in str(excinfo.value)  # the hazard

    report = check_storage(s3(moto_s3.endpoint, bucket, accessKey=access_key, secretKey=secret_key))
    assert steps(report)[Step.WRITE] == (Status.FAILED, Reason.BAD_CREDENTIALS)
    assert "line break" in report.result(Step.WRITE).message
    text = report_text(report)
    assert "AKIASCRUBME" not in text and secret_key not in text


def test_no_credentials_anywhere_is_bad_credentials(moto_s3, tmp_path, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    bucket = moto_s3.new_bucket()
    report = check_storage(storage_settings(type="s3", bucket=bucket, endpointUrl=moto_s3.endpoint))
    assert steps(report)[Step.WRITE] == (Status.FAILED, Reason.BAD_CREDENTIALS)
    assert report.result(Step.WRITE).message.startswith("no AWS credentials: set checkpointStorage.accessKey")


def test_an_endpoint_that_is_not_s3_is_named_and_nothing_is_left(fake_gcs):
    report = check_storage(s3(fake_gcs.url, "ckpt"))  # a live HTTP server, but not an S3 one
    assert steps(report)[Step.WRITE] == (Status.FAILED, Reason.OTHER)
    assert report.result(Step.WRITE).message == (
        f"{fake_gcs.url} answered 404 Not Found without an S3 error code; "
        "is checkpointStorage.endpointUrl an S3 endpoint?")
    assert steps(report)[Step.DELETE] == (Status.SKIPPED, None) and report.left_behind is None


def test_an_unusable_endpoint_url_is_named_and_nothing_is_attempted():
    """botocore's "Invalid endpoint" error is turned into one line naming the key."""
    report = check_storage(s3("http://minio example:9000", "ckpt"))
    assert report.result(Step.WRITE).message == (
        "checkpointStorage.endpointUrl http://minio example:9000 is not a usable URL")
    assert steps(report)[Step.DELETE] == (Status.SKIPPED, None)


def test_credentials_in_the_endpoint_url_are_refused_before_any_probe_and_not_shown():
    """botocore would quote user:password@ whole; validation refuses such a URL first (it would land in the ConfigMap)."""
    with pytest.raises(SettingsError) as refused:
        s3("http://admin:pw-in-the-url@minio example:9000", "ckpt")
    (problem,) = refused.value.problems
    assert problem.path == "checkpointStorage.endpointUrl"
    assert "pw-in-the-url" not in repr(problem)
