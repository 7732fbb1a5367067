"""Issue 20: "valid" means the API server and the master accept it. The issue's examples, through the CLI.

Values inside pod specs (settings and experiments), the chart's own objects, resource pools, and what the next
step (a fresh install) needs: each is an error naming its key path and file:line, all of them at once.
"""

from __future__ import annotations

import pytest

from tests.conftest import example

BAD_POD_SPEC = """maxSlotsPerPod: 4
taskContainerDefaults:
  gpuPodSpec:
    spec:
      tolerations:
        - key: nvidia.com/gpu
          operator: Equals
          effect: NoSchedul
        - key: accelerator
          operator: Exists
          value: a100
      containers:
        - name: determined-container
          resources:
            requests: {memory: 64GB, cpu: "8 cores"}
            limits: {cpu: abc, memory: "8 GiB"}
initialUserPassword: Secret-Pass-1
"""

BAD_EXPERIMENT = """name: typo
resources: {slots_per_trial: 4}
environment:
  pod_spec:
    spec:
      tolerations:
        - key: nvidia.com/gpu
          operator: Exists
          effect: NoSchedul
      containers:
        - name: determined-container
          resources:
            requests: {memory: 64GB, cpu: "8 cores"}
entrypoint: python3 train.py
"""


def errors(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:") and "settings are invalid" not in line
            and "invalid experiment" not in line]


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_every_bad_value_in_a_settings_pod_spec_is_one_line_with_key_and_line(run_cli, tmp_path):
    site = write(tmp_path, "site.yaml", BAD_POD_SPEC)
    result = run_cli("validate", "-f", site)
    assert result.code == 1
    found = errors(result.out + result.err)
    base = "error: taskContainerDefaults.gpuPodSpec.spec."
    expected = {
        "tolerations[0].operator: must be Exists or Equal, found 'Equals'; did you mean Equal?": 7,
        "tolerations[0].effect: must be NoSchedule, PreferNoSchedule, NoExecute or empty, found 'NoSchedul'; "
        "did you mean NoSchedule?": 8,
        "tolerations[1].value: must be empty when operator is Exists": 11,
        "containers[0].resources.requests.memory: '64GB' is not a Kubernetes quantity; did you mean 64G": 15,
        "containers[0].resources.requests.cpu: '8 cores' is not a Kubernetes quantity; did you mean 8?": 15,
        "containers[0].resources.limits.cpu: 'abc' is not a Kubernetes quantity": 16,
        "containers[0].resources.limits.memory: '8 GiB' is not a Kubernetes quantity; did you mean 8Gi?": 16,
    }
    for text, line in expected.items():
        matching = [f for f in found if f.startswith(base + text)]
        assert matching, (text, found)
        assert matching[0].endswith(f"({site}:{line})"), matching[0]
    assert len(found) == len(expected), found
    assert "Traceback" not in result.out + result.err


def test_64G_is_a_quantity_and_64GB_is_not(run_cli, tmp_path):
    good = BAD_POD_SPEC.split("      tolerations:")[0] + (
        "      containers:\n        - name: determined-container\n          resources:\n"
        "            requests: {memory: 64G, cpu: 7500m}\n            limits: {memory: 64G}\n"
        "initialUserPassword: Secret-Pass-1\n")
    assert run_cli("validate", "-f", write(tmp_path, "good.yaml", good)).code == 0


def test_set_leaving_a_null_container_is_an_error_naming_the_flag(run_cli, tmp_path):
    site = write(tmp_path, "site.yaml", "maxSlotsPerPod: 4\ninitialUserPassword: Secret-Pass-1\n")
    flag = "taskContainerDefaults.cpuPodSpec.spec.containers[1].name=determined-container"
    result = run_cli("validate", "-f", site, "--set", flag)
    assert result.code == 1
    (null,) = errors(result.out + result.err)
    assert null.startswith("error: taskContainerDefaults.cpuPodSpec.spec.containers[0]: an empty entry (null)")
    assert null.endswith(f"(--set {flag})")


def test_requests_above_limits_and_an_empty_volume_are_refused_like_the_api_server(run_cli, tmp_path):
    site = write(tmp_path, "site.yaml", "maxSlotsPerPod: 4\nmasterCpuRequest: 4\nmasterCpuLimit: 1\n"
                 "masterMemRequest: 8Gi\nmasterMemLimit: 4Gi\ndb:\n  storageSize: \"0\"\n"
                 "initialUserPassword: Secret-Pass-1\n")
    result = run_cli("validate", "-f", site)
    assert result.code == 1
    found = errors(result.out + result.err)
    assert any(f.startswith("error: masterCpuRequest: 4 is above masterCpuLimit 1") and f.endswith(f"({site}:2)")
               for f in found), found
    assert any(f.startswith("error: masterMemRequest: 8Gi is above masterMemLimit 4Gi") for f in found), found
    assert any(f.startswith("error: db.storageSize: must be greater than 0") and f.endswith(f"({site}:7)")
               for f in found), found
    assert len(found) == 3
    fine = write(tmp_path, "fine.yaml", "maxSlotsPerPod: 4\nmasterCpuRequest: 1\nmasterCpuLimit: 1\n"
                 "initialUserPassword: Secret-Pass-1\n")
    assert run_cli("validate", "-f", fine).code == 0


def test_resource_pools_one_error_per_bad_entry(run_cli, tmp_path):
    site = write(tmp_path, "site.yaml", "maxSlotsPerPod: 4\nresourcePools:\n  - null\n  - pool_name: a\n  - 5\n"
                 "  - pool_name: a\n  - pool_name: ''\n  - {description: x}\ninitialUserPassword: Secret-Pass-1\n")
    result = run_cli("validate", "-f", site)
    assert result.code == 1
    found = errors(result.out + result.err)
    assert [f.split(":")[1].strip() for f in found] == [
        "resourcePools[0]", "resourcePools[2]", "resourcePools[3].pool_name", "resourcePools[4].pool_name",
        "resourcePools[5].pool_name"], found
    assert "duplicate pool name 'a' (also resourcePools[1])" in found[2]


def test_set_resource_pool_index_renders_no_null(run_cli, tmp_path):
    site = write(tmp_path, "site.yaml", "maxSlotsPerPod: 4\ninitialUserPassword: Secret-Pass-1\n")
    result = run_cli("render", "-f", site, "--set", "resourcePools[2].pool_name=y", "-o", tmp_path / "chart")
    assert result.code == 1
    assert "resourcePools[1]: expected a mapping with pool_name, found null" in result.err
    assert not (tmp_path / "chart").exists()


@pytest.mark.parametrize("app_version", ["0.38.1", "0.31.0"])
def test_a_fresh_install_needs_the_initial_password_unless_upgrading(run_cli, tmp_path, app_version):
    site = write(tmp_path, "site.yaml", f"maxSlotsPerPod: 4\nappVersion: {app_version}\n")
    fresh = run_cli("validate", "-f", site)
    assert fresh.code == 1
    (line,) = errors(fresh.out + fresh.err)
    assert line.startswith(f"error: initialUserPassword: required to install Determined {app_version}")
    assert "--upgrade if the release is already installed" in line
    upgrade = run_cli("validate", "-f", site, "--upgrade")
    assert upgrade.code == 0, upgrade.out + upgrade.err
    assert "settings are valid for an upgrade" in upgrade.err
    with_password = write(tmp_path, "pw.yaml", f"maxSlotsPerPod: 4\nappVersion: {app_version}\n"
                          "initialUserPassword: Secret-Pass-1\n")
    assert run_cli("validate", "-f", with_password).code == 0


def test_before_0_31_no_initial_password_is_needed(run_cli, tmp_path):
    site = write(tmp_path, "site.yaml", "maxSlotsPerPod: 4\nappVersion: 0.30.0\n")
    assert run_cli("validate", "-f", site).code == 0


def test_experiment_pod_spec_every_bad_value_with_key_and_line_not_blamed_on_the_cluster(run_cli, tmp_path):
    experiment = write(tmp_path, "exp.yaml", BAD_EXPERIMENT)
    result = run_cli("plan", experiment, "--snapshot", example("nodes-mixed-gpu.yaml"), "-f",
                     example("gpu-cluster.yaml"))
    assert result.code == 1
    found = errors(result.out + result.err)
    assert f"error: environment.pod_spec.spec.tolerations[0].effect: must be NoSchedule, PreferNoSchedule, NoExecute " \
           f"or empty, found 'NoSchedul'; did you mean NoSchedule? ({experiment}:9)" in found
    assert any(f.startswith("error: environment.pod_spec.spec.containers[0].resources.requests.memory: '64GB'")
               and f.endswith(f"({experiment}:13)") for f in found), found
    assert any(f.startswith("error: environment.pod_spec.spec.containers[0].resources.requests.cpu: '8 cores'")
               for f in found), found
    assert "never fits this cluster" not in result.out + result.err


def test_pod_specs_of_resource_pools_and_checkpoint_gc_are_checked_too(run_cli, tmp_path):
    site = write(tmp_path, "site.yaml", """maxSlotsPerPod: 4
initialUserPassword: Secret-Pass-1
taskContainerDefaults:
  checkpointGcPodSpec:
    spec:
      containers: [{name: determined-container, resources: {limits: {memory: 1GB}}}]
resourcePools:
  - pool_name: a100
    task_container_defaults:
      gpu_pod_spec:
        spec:
          tolerations: [{key: nvidia.com/gpu, operator: Equals}]
""")
    result = run_cli("validate", "-f", site)
    assert result.code == 1
    found = errors(result.out + result.err)
    assert any(f.startswith("error: taskContainerDefaults.checkpointGcPodSpec.spec.containers[0].resources.limits."
                            "memory: '1GB' is not a Kubernetes quantity") and f.endswith(f"({site}:6)") for f in found)
    assert any(f.startswith("error: resourcePools[0].task_container_defaults.gpu_pod_spec.spec.tolerations[0]."
                            "operator: must be Exists or Equal, found 'Equals'") and f.endswith(f"({site}:12)")
               for f in found), found
    assert len(found) == 2


@pytest.mark.parametrize("value", ["7", "[s3]", "shared_fs"])
def test_a_checkpoint_storage_that_is_no_mapping_is_one_error_about_it_alone(run_cli, tmp_path, value):
    settings = tmp_path / "settings.yaml"
    settings.write_text(f"maxSlotsPerPod: 4\ninitialUserPassword: Secret-Pass-1\ncheckpointStorage: {value}\n")
    result = run_cli("validate", "-f", settings)
    assert result.code == 1
    said = [line for line in (result.out + result.err).splitlines() if "checkpointStorage" in line]
    assert len(said) == 1 and said[0].startswith("error: checkpointStorage: expected a mapping, found "), said
    assert "hostPath" not in result.out + result.err and "shared_fs is for testing" not in result.out + result.err
