"""The installed master's configuration as each release's chart writes it (ConfigMap before Determined 0.26.2,
Secret from it), read through the real `kubernetes` client against the API emulator: `experiment create` without
-f, `status`; RBAC refusing Secrets is one line saying what to grant; the Secret's contents are never printed."""

from __future__ import annotations

import pytest

from det_k8s.determined.versions import v
from det_k8s.release.master_config import master_version
from tests.conftest import example
from tests.support.k8s_emulator import node

PASSWORD = "s3cr3t-Db-pw"  # noqa: S105 - a test value that must never be printed
MASTER_YAML = f"""db: {{user: postgres, password: {PASSWORD}, host: db.example.com, port: 5432, name: determined}}
checkpoint_storage: {{type: s3, bucket: b, secret_key: {PASSWORD}}}
resource_manager:
  type: kubernetes
  max_slots_per_pod: 4
  master_service_name: determined-master-service-demo
"""


def installed(cluster, version: str, *, kind: str | None = None, official: bool = False) -> None:
    """A release `demo` as the chart of `version` leaves it: the master Deployment and its configuration."""
    kind = kind or ("Secret" if v(version) >= v("0.26.2") else "ConfigMap")
    name = "determined-master-demo" if official else "determined-master"  # the official chart names it so
    cluster.api.put({"kind": "Deployment", "metadata": {"name": "determined-master-deployment-demo",
                                                        "namespace": "default", "labels": {"release": "demo"}},
                     "spec": {"replicas": 1, "template": {"spec": {"containers": [
                         {"name": name, "image": f"determinedai/determined-master:{version}"}]}}},
                     "status": {"readyReplicas": 1}})
    body = {"stringData": {"master.yaml": MASTER_YAML}} if kind == "Secret" else {"data": {"master.yaml": MASTER_YAML}}
    cluster.api.put({"kind": kind, "metadata": {"name": "determined-master-config-demo", "namespace": "default",
                                                "labels": {"app": "determined-master-demo", "release": "demo"}},
                     **body})


@pytest.fixture
def gpus(cluster):
    for i in range(3):
        cluster.api.put(node(f"gpu-{i}", gpus=4, cpu="31910m", memory="240Gi"))


def never_printed(result) -> None:
    assert PASSWORD not in result.out + result.err
    assert "czNjcjN0" not in result.out + result.err  # nor its base64


@pytest.mark.parametrize(("version", "official"), [("0.38.1", False), ("0.26.2", True), ("0.17.15", True),
                                                   ("0.25.1", False)])
def test_experiment_create_reads_the_object_that_releases_chart_writes(run_cli, cluster, gpus, version, official):
    installed(cluster, version, official=official)
    result = run_cli("experiment", "create", example("experiments/distributed-12gpu-a.yaml"))
    assert result.code == 0, result.err
    assert len(cluster.api.items("pods")) == 3  # maxSlotsPerPod 4 from master.yaml: 12 slots in 3 pods
    secret_reads = cluster.api.count("GET", "secrets")
    assert secret_reads >= 1  # the Secret was looked for (listed), whatever the release
    never_printed(result)


@pytest.mark.parametrize("version", ["0.38.1", "0.25.1"])
def test_with_both_kinds_present_the_releases_own_is_read(run_cli, cluster, gpus, version):
    """A leftover of the other kind (maxSlotsPerPod 12 there: one pod) never wins over what the release's chart
    writes (maxSlotsPerPod 4: three pods)."""
    installed(cluster, version)
    stale = MASTER_YAML.replace("max_slots_per_pod: 4", "max_slots_per_pod: 12")
    other = "ConfigMap" if version == "0.38.1" else "Secret"
    body = {"data": {"master.yaml": stale}} if other == "ConfigMap" else {"stringData": {"master.yaml": stale}}
    cluster.api.put({"kind": other, "metadata": {"name": "determined-master-config-demo", "namespace": "default"},
                     **body})
    cluster.api.put(node("gpu-big", gpus=12, cpu="95", memory="700Gi"))
    result = run_cli("experiment", "create", example("experiments/distributed-12gpu-a.yaml"))
    assert result.code == 0, result.err
    assert len(cluster.api.items("pods")) == 3


def test_the_secret_is_stored_base64_as_a_real_api_server_stores_it(cluster):
    installed(cluster, "0.38.1")
    stored = cluster.api.get("secrets", "determined-master-config-demo")
    assert "stringData" not in stored and PASSWORD not in str(stored)


def test_experiment_keys_are_checked_against_the_installed_masters_release(run_cli, cluster, gpus, tmp_path):
    experiment = tmp_path / "ws.yaml"
    experiment.write_text("name: ws\nworkspace: research\nresources: {slots_per_trial: 4}\n")
    installed(cluster, "0.17.15")
    result = run_cli("experiment", "create", experiment)
    assert result.code == 1
    assert (f"error: workspace: Determined 0.17.15 has no such key (the schemas of 0.26.2 and v0.38.1 have it): its "
            f"master refuses the experiment; set appVersion to a release that has it, or remove it ({experiment}:2)"
            in result.err)
    assert cluster.api.items("pods") == []


def test_a_master_of_unknown_release_is_checked_as_the_default_with_a_warning(run_cli, cluster, gpus):
    installed(cluster, "0.38.1")
    cluster.api.update("deployments", "determined-master-deployment-demo", {"spec": {"template": {"spec": {
        "containers": [{"name": "determined-master", "image": "registry:5000/determined-master:dev-1a2b3c"}]}}}})
    result = run_cli("experiment", "create", example("experiments/small-4gpu.yaml"))
    assert result.code == 0, result.err
    assert ("warning: cannot tell which Determined release secret default/determined-master-config-demo belongs to"
            in result.err)


def test_rbac_refusing_secrets_is_one_line_saying_what_to_grant(run_cli, cluster, gpus):
    installed(cluster, "0.38.1")
    cluster.api.fail("GET", "secrets", 403, 'secrets is forbidden: User "alice" cannot list resource "secrets" in '
                     'API group "" in the namespace "default"', times=5)
    result = run_cli("experiment", "create", example("experiments/small-4gpu.yaml"))
    assert result.code == 2
    assert result.err.strip().splitlines() == [
        'error: cannot read the Determined master configuration: listing secrets in namespace default is forbidden '
        '(secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" in the namespace '
        '"default"); from Determined 0.26.2 the chart keeps master.yaml in Secret determined-master-config-<release>; '
        'ask for get and list on secrets in namespace default (a Role), or pass -f with the settings Determined was '
        'installed with']
    assert cluster.api.items("pods") == []


def test_with_f_no_secret_is_read(run_cli, cluster, gpus, tmp_path):
    installed(cluster, "0.38.1")
    settings = tmp_path / "site.yaml"
    settings.write_text("maxSlotsPerPod: 4\n")
    assert run_cli("experiment", "create", example("experiments/small-4gpu.yaml"), "-f", settings).code == 0
    assert cluster.api.count("GET", "secrets") == 0


def test_status_reads_the_external_database_host_from_the_secret(run_cli, cluster):
    installed(cluster, "0.38.1")
    result = run_cli("status", "demo", "-o", "json")
    assert '"external_host": "db.example.com"' in result.out
    assert ("GET", "/api/v1/namespaces/default/secrets/determined-master-config-demo", {}) in cluster.api.calls
    never_printed(result)


def test_status_of_a_release_before_0_26_2_reads_its_config_map(run_cli, cluster):
    installed(cluster, "0.17.15", official=True)
    result = run_cli("status", "demo", "-o", "json")
    assert '"external_host": "db.example.com"' in result.out
    # its chart writes no Secret: none asked for (the list of helm's own release records, labelled owner=helm, is
    # `status`'s look for a release a killed helm left pending: release/pending.py)
    asked = [path for method, path, _ in cluster.api.calls if method == "GET" and "/secrets" in path]
    assert not [path for path in asked if "determined-master-config" in path], asked
    assert all(path.endswith("/secrets") for path in asked), asked


def test_status_says_in_one_line_when_rbac_hides_the_secret_and_goes_on(run_cli, cluster):
    installed(cluster, "0.38.1")
    cluster.api.fail("GET", "secrets", 403, 'secrets "determined-master-config-demo" is forbidden: User "bob" cannot '
                     'get resource "secrets"', times=2)
    result = run_cli("status", "demo")
    assert "Database: external (?)" in result.out
    warnings = [line for line in result.err.splitlines() if line.startswith("warning:")]
    assert warnings == [
        'warning: cannot read the Determined master configuration: reading secrets in namespace default is forbidden '
        '(secrets "determined-master-config-demo" is forbidden: User "bob" cannot get resource "secrets"); from '
        'Determined 0.26.2 the chart keeps master.yaml in Secret determined-master-config-<release>; ask for get and '
        'list on secrets in namespace default (a Role), to see the external database host here']
    never_printed(result)


@pytest.mark.parametrize(("image", "expected"), [
    ("determinedai/determined-master:0.38.1", "0.38.1"),
    ("registry.local:5000/mirror/determined-master:0.26.2", "0.26.2"),
    ("determinedai/hpe-mlde-master:0.31.0", "0.31.0"),
    ("determinedai/hpecaide-master:0.17.15@sha256:abc", "0.17.15"),
    ("determinedai/determined-master:0.17.99-dev", None),
    ("determinedai/determined-master", None),
    ("determinedai/something-else:0.38.1", None),
])
def test_the_masters_release_is_its_image_tag(image, expected):
    deployment = {"spec": {"template": {"spec": {"containers": [{"name": "m", "image": image}]}}}}
    assert master_version(deployment) == (v(expected) if expected else None)


def test_rbac_refusing_config_maps_is_not_blamed_on_secrets(run_cli, cluster, gpus):
    cluster.api.fail("GET", "configmaps", 403, 'configmaps is forbidden: User "alice" cannot list resource '
                     '"configmaps"', times=5)
    result = run_cli("experiment", "create", example("experiments/small-4gpu.yaml"))
    assert result.code == 1 and len(result.err.strip().splitlines()) == 1
    assert result.err.startswith('error: configmaps is forbidden: User "alice" cannot list resource "configmaps"')


def test_a_secret_that_is_not_base64_text_is_one_line_naming_it_never_its_value(run_cli, cluster, gpus):
    installed(cluster, "0.38.1")
    cluster.api.update("secrets", "determined-master-config-demo", {"data": {"master.yaml": f"not base64 {PASSWORD}"}})
    result = run_cli("experiment", "create", example("experiments/small-4gpu.yaml"))
    assert (result.code, result.err.strip().splitlines()) == (1, [
        "error: secret default/determined-master-config-demo: master.yaml is not base64 UTF-8 text"])
    status = run_cli("status", "demo")
    assert "Database: external (?)" in status.out and "Traceback" not in status.err
    never_printed(result)
    never_printed(status)
