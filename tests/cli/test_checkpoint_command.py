"""`det-k8s checkpoint check` through the real entry point, against the emulators: output, exit codes,
JSON, one `error:` line, no tracebacks, no secrets."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.support.emulators import AZURITE_KEY, settings_file

pytestmark = pytest.mark.emulator


def s3_file(tmp_path, moto_s3, bucket, **extra):
    return settings_file(tmp_path, type="s3", bucket=bucket, prefix="research/", endpointUrl=moto_s3.endpoint,
                         accessKey="AKIACLITEST000000000", secretKey="cli-secret-key-0123456789", **extra)


def test_a_working_bucket_prints_the_table_and_exits_0(run_cli, tmp_path, moto_s3):
    bucket = moto_s3.new_bucket()
    result = run_cli("checkpoint", "check", "-f", s3_file(tmp_path, moto_s3, bucket))
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0] == f"checkpoint storage: s3 s3://{bucket}/research/"
    assert lines[1].split() == ["STEP", "RESULT", "REASON", "DETAIL"]
    assert [line.split()[:2] for line in lines[2:]] == [["write", "ok"], ["read", "ok"], ["list", "ok"],
                                                       ["delete", "ok"]]
    assert result.err == f"s3 storage at s3://{bucket}/research/ works: write, read, list and delete pass\n"
    assert moto_s3.keys(bucket) == []


def test_json_output_is_the_report(run_cli, tmp_path, moto_s3):
    bucket = moto_s3.new_bucket()
    result = run_cli("checkpoint", "check", "-f", s3_file(tmp_path, moto_s3, bucket), "-o", "json")
    assert result.code == 0
    data = json.loads(result.out)
    assert data["ok"] is True and [s["status"] for s in data["steps"]] == ["ok"] * 4
    assert data["probe"].startswith(f"s3://{bucket}/research/det-k8s-probe-")
    assert result.err == ""


def test_a_missing_bucket_exits_1_with_one_error_line(run_cli, tmp_path, moto_s3):
    path = s3_file(tmp_path, moto_s3, "no-such-bucket-here")
    result = run_cli("checkpoint", "check", "-f", path, "-o", "yaml")
    assert result.code == 1
    data = yaml.safe_load(result.out)
    assert data["ok"] is False and data["steps"][0]["reason"] == "no_such_bucket"
    assert result.err.splitlines() == [
        f"error: checkpoint storage check failed: write: no such bucket 'no-such-bucket-here' at "
        f"{moto_s3.endpoint}; create it or fix checkpointStorage.bucket"]


def test_an_unreachable_endpoint_exits_1_without_a_traceback(run_cli, tmp_path, closed_port):
    path = settings_file(tmp_path, type="s3", bucket="ckpt", endpointUrl=f"http://127.0.0.1:{closed_port}",
                         accessKey="AKIACLITEST000000000", secretKey="cli-secret-key-0123456789")
    result = run_cli("checkpoint", "check", "-f", path, "--timeout", "2")
    assert result.code == 1
    assert "unreachable (connection refused)" in result.out
    assert result.err.startswith("error: checkpoint storage check failed: write: endpoint http://127.0.0.1:")
    assert "Traceback" not in result.out + result.err


def test_secrets_never_reach_stdout_or_stderr(run_cli, tmp_path, moto_s3, azurite):
    bad_s3 = settings_file(tmp_path, type="s3", bucket=moto_s3.new_bucket(), endpointUrl=moto_s3.endpoint,
                           accessKey="AKIALEAKCHECK0000000\n", secretKey="leak-check-secret-0123456789")
    s3_result = run_cli("checkpoint", "check", "-f", bad_s3, "-v")
    assert s3_result.code == 1
    assert "AKIALEAKCHECK" not in s3_result.out + s3_result.err
    assert "leak-check-secret" not in s3_result.out + s3_result.err

    wrong_key = AZURITE_KEY[::-1]
    container = azurite.new_container()
    az_file = settings_file(tmp_path, type="azure", container=container,
                            connection_string=azurite.connection_string(key=wrong_key))
    az_result = run_cli("checkpoint", "check", "-f", az_file, "-o", "json")
    assert az_result.code == 1
    assert json.loads(az_result.out)["steps"][0]["reason"] == "bad_credentials"
    assert wrong_key not in az_result.out + az_result.err
    assert "AccountKey=" not in az_result.out + az_result.err


def test_invalid_settings_list_every_error_and_touch_no_storage(run_cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("maxSlotsPerPod: 1\ncheckpointStorage:\n  type: azure\n")
    result = run_cli("checkpoint", "check", "-f", bad)
    assert result.code == 1 and result.out == ""
    assert result.err.splitlines() == [
        f"error: checkpointStorage.container: required when checkpointStorage.type is azure ({bad}:2)",
        "error: checkpointStorage.connection_string: exactly one of connection_string or account_url "
        f"must be set when type is azure ({bad}:2)",
    ]


def test_help_states_the_real_default_timeout(run_cli):
    from det_k8s.storage import DEFAULT_TIMEOUT

    result = run_cli("checkpoint", "check", "--help")
    assert result.code == 0 and f"default {DEFAULT_TIMEOUT:g}s)" in " ".join(result.out.split())


def test_usage_errors_exit_2(run_cli, tmp_path):
    assert run_cli("checkpoint", "check").code == 2
    path = settings_file(tmp_path, type="shared_fs", hostPath="/nowhere")
    result = run_cli("checkpoint", "check", "-f", path, "--timeout", "0")
    assert result.code == 2 and "--timeout" in result.err


def test_shared_fs_off_this_machine_warns_and_exits_0(run_cli, tmp_path):
    path = settings_file(tmp_path, type="shared_fs", hostPath=str(tmp_path / "on-the-nodes"))
    result = run_cli("checkpoint", "check", "-f", path)
    assert result.code == 0
    assert [line.split()[1] for line in result.out.splitlines()[2:]] == ["skipped"] * 4
    warnings = result.err.splitlines()
    assert warnings[0].startswith("warning: shared_fs is for testing only")
    assert warnings[1].startswith("warning: cannot check hostPath from here")


@pytest.mark.parametrize("value", ["1.5x", "-3", "nan"])
def test_a_bad_timeout_is_a_usage_error(run_cli, tmp_path, value):
    path = tmp_path / "s.yaml"
    path.write_text("maxSlotsPerPod: 1\ncheckpointStorage: {type: s3, bucket: b, endpointUrl: 'http://127.0.0.1:9'}\n")
    result = run_cli("checkpoint", "check", "-f", path, "--timeout", value)
    assert result.code == 2 and "--timeout" in result.err


def test_timeout_takes_a_go_duration_like_every_other_timeout():
    from det_k8s.cli.commands.checkpoint import storage_timeout

    assert (storage_timeout("2"), storage_timeout("2s"), storage_timeout("1m30s"), storage_timeout(None)) == (
        2.0, 2.0, 90.0, None)


@pytest.mark.parametrize("signum", [15, 1])
def test_sigterm_after_the_write_still_deletes_the_probe_object(run_cli, tmp_path, moto_s3, monkeypatch, signum):
    """Issue 19: SIGTERM (or SIGHUP) after the write used to exit 143 with the probe object left in the bucket."""
    import os
    import time

    from det_k8s.storage.s3 import S3Backend

    bucket = moto_s3.new_bucket()
    written: list[str] = []
    original_read = S3Backend.read

    def read(self, key):
        written.extend(moto_s3.keys(bucket))
        os.kill(os.getpid(), signum)
        time.sleep(5)
        return original_read(self, key)

    monkeypatch.setattr(S3Backend, "read", read)
    result = run_cli("checkpoint", "check", "-f", s3_file(tmp_path, moto_s3, bucket))
    assert result.code == 128 + signum
    assert written and moto_s3.keys(bucket) == []
    name = "SIGTERM" if signum == 15 else "SIGHUP"
    assert result.err.strip().splitlines()[-1] == (f"stopped by {name}: deleted the storage probe object "
                                                    f"s3://{bucket}/{written[0]}")
    assert "Traceback" not in result.err and "cli-secret-key" not in result.err + result.out
