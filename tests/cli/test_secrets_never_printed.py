"""Planted secrets never appear in anything det-k8s prints, whatever path the value takes."""

from __future__ import annotations

import pytest

from det_k8s.settings.secret_settings import mask_set_expression, mask_url, set_location
from tests.conftest import example

SECRETS = {
    "db.password": "PLANTED-DB-7731",
    "defaultPassword": "PLANTED-PW-7732",
    "checkpointStorage.accessKey": "PLANTED-AK-7733",
    "checkpointStorage.secretKey": "PLANTED-SK-7734",
    "checkpointStorage.connection_string": "AccountKey=PLANTED-CS-7735",
    "checkpointStorage.credential": "PLANTED-CRED-7736",
    "logging.security.password": "PLANTED-ES-7737",
}


def assert_clean(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS.values():
            assert secret not in text
        assert "7731" not in text and "PLANTED" not in text


def sets(**extra: str) -> list[str]:
    args = []
    for key, value in {**SECRETS, **extra}.items():
        args += ["--set", f"{key}={value}"]
    return args


def test_validate_names_secret_keys_without_their_values(run_cli):
    # gcs ignores S3 and Azure keys: warnings that name each of them, never their values
    result = run_cli("validate", "-f", example("external-db-tls-gcs.yaml"), *sets())
    assert "checkpointStorage.secretKey: ignored when checkpointStorage.type is gcs (--set " \
           "checkpointStorage.secretKey=***)" in result.out
    assert_clean(result.out, result.err)


def test_render_and_its_errors_show_no_secret(run_cli, tmp_path):
    ok = run_cli("render", "-f", example("gpu-cluster.yaml"), *sets(), "--output-dir", tmp_path / "c", "-v")
    bad = run_cli("render", "-f", example("gpu-cluster.yaml"), *sets(maxSlotsPerPod="zero"), "--output-dir", tmp_path / "d")
    assert ok.code == 0 and bad.code == 1
    assert_clean(ok.out, ok.err, bad.out, bad.err)


def test_install_dry_run_shows_no_secret(run_cli, helm):
    result = run_cli("install", "demo", "-f", example("gpu-cluster.yaml"), *sets(), "--dry-run", "--helm-binary", helm)
    assert result.code == 0, result.err
    assert "determined-master-secrets-demo" in result.out
    assert_clean(result.out, result.err)


@pytest.mark.parametrize("value", ["12345", "true", "{PLANTED-LIST-1,x}"])
def test_a_mistyped_secret_is_not_quoted_back(run_cli, value):
    result = run_cli("validate", "-f", example("gpu-cluster.yaml"), "--set", f"db.password={value}")
    assert result.code == 1
    assert "db.password: expected a string" in result.out
    assert value.strip("{}").split(",")[0] not in result.out + result.err


@pytest.mark.parametrize("expression", ["db.password={PLANTED-DB-7731,x", "a=1,checkpointStorage.secretKey=PLANTED-SK,T,b"])
def test_a_malformed_set_with_a_secret_masks_the_rest(run_cli, expression):
    result = run_cli("validate", "-f", example("gpu-cluster.yaml"), "--set", expression)
    assert result.code == 2
    assert "***" in result.err and "not shown" in result.err
    assert_clean(result.err, result.out)


def test_urls_lose_credentials_and_tokens():
    assert mask_url("ftp://user:PLANTED@minio:9000/x") == "ftp://***@minio:9000/x"
    assert mask_url("https://acct.blob.core.windows.net/?sv=1&sig=PLANTED") == "https://acct.blob.core.windows.net/?***"
    assert mask_url("http://minio:9000") == "http://minio:9000"
    assert set_location("--set", ("checkpointStorage", "endpointUrl"), "http://u:PLANTED@h") == \
        "--set checkpointStorage.endpointUrl=http://***@h"


def test_set_locations_keep_ordinary_values():
    assert set_location("--set", ("maxSlotsPerPod",), 3) == "--set maxSlotsPerPod=3"
    assert set_location("--set", ("db", "password"), "x") == "--set db.password=***"
    assert set_location("--set", ("telemetry", "enabled"), False) == "--set telemetry.enabled=false"
    assert mask_set_expression("maxSlotsPerPod=4,clusterName=x") == "maxSlotsPerPod=4,clusterName=x"


def test_a_pod_specs_toleration_key_is_not_taken_for_a_secret(run_cli, tmp_path):
    # `key` looks secret-like to the name heuristic, so the toleration key nvidia.com/gpu (the ExtendedResourceToleration
    # every GPU cluster uses) was registered as a secret: every "nvidia.com/gpu" in plan's output became *** (even the
    # JSON's keys), and `gpu` in messages (***PodSpec) for a toleration keyed gpu.
    from tests.conftest import example

    settings = tmp_path / "s.yaml"
    settings.write_text("maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\ntaskContainerDefaults:\n"
                        "  gpuPodSpec:\n    spec:\n      tolerations:\n"
                        "        - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n"
                        "        - {key: gpu, operator: Exists}\n      priorityClassName: 5\n")
    result = run_cli("validate", "-f", settings)
    assert "error: taskContainerDefaults.gpuPodSpec.spec.priorityClassName: expected a string" in result.out, result.out
    settings.write_text(settings.read_text().replace("      priorityClassName: 5\n", ""))
    result = run_cli("plan", example("experiments") / "distributed-16gpu.yaml", "--snapshot",
                     example("snapshots") / "three-4gpu-nodes.yaml", "-f", settings, "-o", "json")
    assert '"resource": "nvidia.com/gpu"' in result.out and "***" not in result.out, result.out


def test_a_short_password_does_not_mask_the_words_that_contain_it(run_cli, helm):
    # `det` inside det-k8s and determined, `ster` inside cluster: masking them would spell the password out
    result = run_cli("-v", "install", "demo", "-f", example("gpu-cluster.yaml"), "--set", "db.password=det",
                     "--set", "defaultPassword=ster", "--dry-run", "--helm-binary", helm)
    assert result.code == 0, result.err
    text = result.out + result.err
    assert "***-k8s" not in text and "<redacted>ermined" not in text and "clu***" not in text
    assert "name: determined-system-priority" in result.out and "nothing was sent to a cluster" in result.err
    assert "det-k8s-" in result.err  # the private copy's directory, named as it is
