"""Pod specs checked against the Kubernetes schema in every command that reads them (the newcomer's typos).

Offline commands check against --kube-version or the newest schema det-k8s has; commands that
talk to a cluster check against the cluster's own version (the emulator answers /version).
"""

from __future__ import annotations

import pytest

from tests.conftest import example
from tests.support.k8s_emulator import node

TYPO_SETTINGS = """maxSlotsPerPod: 4
taskContainerDefaults:
  gpuPodSpec:
    spec:
      nodeselector: {gpu: a100}
      tolerations:
        - key: accelerator
          operater: Equal
          efect: NoSchedule
"""
GATES_SETTINGS = """maxSlotsPerPod: 4
taskContainerDefaults:
  gpuPodSpec:
    spec:
      schedulingGates: [{name: quota}]
"""
TYPO_EXPERIMENT = """name: typo
resources: {slots_per_trial: 4}
environment:
  pod_spec:
    spec:
      containers: [{name: determined-container}]
    tolerations: [{key: accelerator, operator: Exists}]
"""
GATES_EXPERIMENT = """name: gated
resources: {slots_per_trial: 4}
environment:
  pod_spec:
    spec:
      schedulingGates: [{name: quota}]
"""


@pytest.fixture
def files(tmp_path):
    out = {}
    for name, text in (("typo.yaml", TYPO_SETTINGS), ("gates.yaml", GATES_SETTINGS), ("typo-exp.yaml", TYPO_EXPERIMENT),
                       ("gates-exp.yaml", GATES_EXPERIMENT)):
        (tmp_path / name).write_text(text)
        out[name] = tmp_path / name
    return out


def errors(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:")]


def test_validate_reports_every_typo_with_its_line(run_cli, files):
    result = run_cli("validate", "--upgrade", "-f", files["typo.yaml"])
    assert result.code == 1
    found = errors(result.out)
    assert len(found) == 3, result.out
    assert any(".spec.nodeselector: not a field of PodSpec" in e and "did you mean nodeSelector?" in e
               and e.endswith("typo.yaml:5)") for e in found)
    assert any(".spec.tolerations[0].operater: not a field of Toleration" in e and "did you mean operator?" in e
               and e.endswith("typo.yaml:8)") for e in found)
    assert any(".spec.tolerations[0].efect:" in e and "did you mean effect?" in e for e in found)


def test_install_dry_run_refuses_a_bad_pod_spec_before_helm(run_cli, files, fake_helm):
    result = run_cli("install", "demo", "-f", files["typo.yaml"], "--dry-run")
    assert result.code == 1
    assert "error: taskContainerDefaults.gpuPodSpec.spec.nodeselector: not a field of PodSpec" in result.err
    assert fake_helm.calls == []


def test_kube_version_picks_the_schema_offline(run_cli, files):
    assert run_cli("validate", "--upgrade", "-f", files["gates.yaml"]).code == 0
    result = run_cli("validate", "--upgrade", "-f", files["gates.yaml"], "--kube-version", "v1.25.3")
    assert result.code == 1
    assert ("error: taskContainerDefaults.gpuPodSpec.spec.schedulingGates: not a field of PodSpec in Kubernetes 1.25 "
            "(--kube-version)") in result.out
    usage = run_cli("validate", "-f", files["gates.yaml"], "--kube-version", "latest")
    assert usage.code == 2 and "--kube-version 'latest': not a Kubernetes version" in usage.err


def test_plan_reports_a_dedented_key_in_an_experiments_pod_spec(run_cli, files):
    result = run_cli("plan", files["typo-exp.yaml"], "--snapshot", example("snapshots") / "three-4gpu-nodes.yaml")
    assert result.code == 1
    (line,) = errors(result.err)
    assert line.startswith("error: environment.pod_spec.tolerations: not a field of Pod in Kubernetes ")
    assert "did you mean spec.tolerations? (tolerations belongs under spec: check its indentation)" in line
    assert line.endswith("typo-exp.yaml:7)")


def test_validate_against_a_cluster_uses_its_version(run_cli, cluster, files):
    cluster.api.version = {"major": "1", "minor": "25", "gitVersion": "v1.25.9"}
    cluster.api.put(node("gpu-0", gpus=4))
    result = run_cli("validate", "--upgrade", "-f", files["gates.yaml"], "--kube-context", "emulator")
    assert result.code == 1
    assert "schedulingGates: not a field of PodSpec in Kubernetes 1.25 (the cluster's)" in result.out


def test_install_checks_pod_specs_against_the_clusters_version_before_helm(run_cli, cluster, files, fake_helm):
    cluster.api.version = {"major": "1", "minor": "25", "gitVersion": "v1.25.9"}
    cluster.api.put({"kind": "Namespace", "metadata": {"name": "default"}})
    cluster.api.put(node("gpu-0", gpus=4))
    result = run_cli("install", "demo", "-f", files["gates.yaml"], "--set", "initialUserPassword=Gates-Pass-1",
                     "--skip-storage-check")
    assert result.code == 1
    assert ("error: taskContainerDefaults.gpuPodSpec.spec.schedulingGates: not a field of PodSpec in Kubernetes 1.25 "
            "(the cluster's)") in result.err
    assert not [c for c in fake_helm.cluster_calls if c[0] == "install"]


def test_experiment_create_checks_the_pod_spec_against_the_clusters_version(run_cli, cluster, files, tmp_path):
    cluster.api.version = {"major": "1", "minor": "25", "gitVersion": "v1.25.9"}
    cluster.api.put(node("gpu-0", gpus=4))
    settings = tmp_path / "s.yaml"
    settings.write_text("maxSlotsPerPod: 4\n")
    result = run_cli("experiment", "create", files["gates-exp.yaml"], "-f", settings)
    assert result.code == 1
    assert ("error: environment.pod_spec.spec.schedulingGates: not a field of PodSpec in Kubernetes 1.25 "
            "(the cluster's)") in result.err
    assert cluster.api.items("pods") == [] and cluster.api.items("configmaps") == []
