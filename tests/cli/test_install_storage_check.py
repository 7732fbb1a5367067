"""install and upgrade probe the checkpoint bucket before helm runs (real S3 emulator, recording helm)."""

from __future__ import annotations

import pytest

from tests.cli.test_install_upgrade import GPU, ready_cluster

pytestmark = pytest.mark.emulator


def s3_settings(moto_s3, bucket: str) -> tuple[str, ...]:
    return ("-f", GPU, "--set", f"checkpointStorage.bucket={bucket}",
            "--set", f"checkpointStorage.endpointUrl={moto_s3.endpoint}",
            "--set", "checkpointStorage.accessKey=AKIAMOTOADMIN", "--set", "checkpointStorage.secretKey=moto-admin")


def test_install_proceeds_when_the_bucket_works_and_leaves_no_probe(run_cli, cluster, fake_helm, moto_s3):
    ready_cluster(cluster)
    bucket = moto_s3.new_bucket()
    result = run_cli("install", "demo", *s3_settings(moto_s3, bucket))
    assert result.code == 0, result.err
    assert [c[0] for c in fake_helm.cluster_calls].count("install") == 1
    assert moto_s3.keys(bucket) == []


def test_install_stops_before_helm_when_the_bucket_is_missing(run_cli, cluster, fake_helm, moto_s3):
    ready_cluster(cluster)
    result = run_cli("install", "demo", *s3_settings(moto_s3, "no-such-bucket-here"))
    assert result.code == 1
    assert "error: checkpointStorage: write failed:" in result.err
    assert "no-such-bucket-here" in result.err
    assert "install" not in [c[0] for c in fake_helm.cluster_calls]
    assert "moto-admin" not in result.out + result.err


def test_upgrade_checks_storage_too(run_cli, cluster, fake_helm, moto_s3):
    ready_cluster(cluster)
    fake_helm.respond("list", stdout='[{"name": "demo", "namespace": "default", "revision": "1", '
                                     '"status": "deployed", "chart": "determined-0.1.0", "app_version": "0.17.15"}]')
    result = run_cli("upgrade", "demo", *s3_settings(moto_s3, "missing-bucket"), "--yes")
    assert result.code == 1
    assert "checkpointStorage: write failed" in result.err
    assert "upgrade" not in [c[0] for c in fake_helm.cluster_calls]


def test_skip_storage_check_never_touches_the_bucket(run_cli, cluster, fake_helm):
    ready_cluster(cluster)
    result = run_cli("install", "demo", "-f", GPU, "--set", "checkpointStorage.endpointUrl=http://127.0.0.1:9",
                     "--skip-storage-check")
    assert result.code == 0, result.err
    assert "checkpointStorage" not in result.err


@pytest.mark.parametrize("here", [True, False])
def test_shared_fs_is_said_to_be_for_testing_once(run_cli, cluster, fake_helm, tmp_path, here):
    ready_cluster(cluster)
    path = tmp_path if here else tmp_path / "only-on-the-nodes"
    result = run_cli("install", "demo", "-f", GPU, "--set", "checkpointStorage.type=shared_fs",
                     "--set", f"checkpointStorage.hostPath={path}", "--set", "checkpointStorage.bucket=null",
                     "--set", "checkpointStorage.prefix=null")
    assert result.code == 0, result.err
    assert result.err.count("for testing only") == 1, result.err
    assert ("warning: checkpointStorage.type: shared_fs is for testing only: most clusters' nodes share no file "
            "system; use s3, gcs or azure for real deployments") in result.err
    assert ("was probed here" if here else "cannot check hostPath from here") in result.err
