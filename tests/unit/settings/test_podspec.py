"""Pod specs against the Kubernetes OpenAPI schema (kubernetes-validate's strict schemas, per version).

The schema is the third party's: these tests pin how det-k8s reports what it finds (key path,
file:line, did-you-mean, which Kubernetes version) and that the version matters, with fields
Kubernetes added in a known release (schedulingGates in 1.26, a container's resizePolicy in 1.27).
"""

from __future__ import annotations

import textwrap

import pytest

from det_k8s.errors import UsageError
from det_k8s.settings import Document, load_settings
from det_k8s.settings.podspec import (
    CLUSTER,
    DEFAULT,
    KubeVersion,
    check_pod_spec,
    checking_against,
    cluster_version,
    parse_kube_version,
    schema_versions,
)
from det_k8s.settings.source import load_yaml_text

NEWCOMER = """maxSlotsPerPod: 4
taskContainerDefaults:
  gpuPodSpec:
    apiVersion: v1
    kind: Pod
    spec:
      nodeselector:
        gpu: a100
      containers:
        - name: determined-container
    tolerations:
      - key: accelerator
        operater: Equal
        value: gpu
        efect: NoSchedule
"""


def problems(text: str, name: str = "site.yaml", version: KubeVersion | None = None) -> list[str]:
    """The pod spec `text` as the value of `pod:` on line 1 (so its own lines are numbered from 2)."""
    loaded = load_yaml_text("pod:\n" + textwrap.indent(text, "  "), name)
    return [p.render() for p in check_pod_spec(loaded.data["pod"], ("pod",), loaded.sources, version)]


def test_the_newcomers_typos_are_errors_with_key_path_line_and_did_you_mean():
    loaded = load_settings([Document("site.yaml", NEWCOMER)])
    found = [p.render() for p in loaded.errors]
    base = "error: taskContainerDefaults.gpuPodSpec"
    default = "Kubernetes " + schema_versions()[-1] + " (the default; --kube-version to change)"
    assert found == [
        f"{base}.tolerations: not a field of Pod in {default}; did you mean spec.tolerations? (tolerations belongs "
        "under spec: check its indentation) (site.yaml:11)",
        f"{base}.spec.nodeselector: not a field of PodSpec in {default}; did you mean nodeSelector? (site.yaml:7)",
    ]
    # Once `tolerations` is indented under spec, its own typos show.
    fixed = NEWCOMER.replace("    tolerations:", "      tolerations:").replace("      - key", "        - key").replace(
        "        operater", "          operater").replace("        value", "          value").replace(
        "        efect", "          efect")
    found = [p.render() for p in load_settings([Document("site.yaml", fixed)]).errors]
    assert f"{base}.spec.tolerations[0].operater: not a field of Toleration in {default}; did you mean operator? " \
           "(site.yaml:13)" in found
    assert f"{base}.spec.tolerations[0].efect: not a field of Toleration in {default}; did you mean effect? " \
           "(site.yaml:15)" in found


def test_wrong_types_are_named_without_echoing_values():
    found = problems("""spec:
  priority: high
  containers:
    - name: determined-container
      env: [{name: DB_PASSWORD, value: 12345}]
      resources: {limits: {cpu: [2]}}
  nodeSelector: {gpu: true}
""")
    assert found == [
        "error: pod.spec.containers[0].env[0].value: expected a string, found an integer (site.yaml:6)",
        "error: pod.spec.containers[0].resources.limits.cpu: expected a string or a number, found a list (site.yaml:7)",
        "error: pod.spec.nodeSelector.gpu: expected a string, found a boolean (site.yaml:8)",
        "error: pod.spec.priority: expected an integer, found a string (site.yaml:3)",
    ]
    assert "12345" not in "".join(found)


def test_a_key_one_level_too_deep_points_to_where_it_belongs():
    (found,) = problems("spec:\n  containers:\n    - name: c\n      image: busybox\n      tolerations: []\n")
    assert "pod.spec.containers[0].tolerations: not a field of Container" in found
    assert "did you mean spec.tolerations? (tolerations belongs under spec" in found


def test_kind_and_required_fields_follow_kubernetes_but_containers_may_be_left_to_determined():
    assert problems("spec:\n  tolerations: [{key: a}]\n") == []
    assert problems("{}") == []
    (kind,) = problems("kind: Deployment\n")
    assert kind == "error: pod.kind: must be Pod, found 'Deployment' (site.yaml:2)"
    (name,) = problems("spec:\n  containers:\n    - image: busybox\n")
    assert name.startswith("error: pod.spec.containers[0]: Container needs name")


def test_not_a_mapping_is_left_to_the_callers_type_check():
    assert check_pod_spec([1], ("pod",), load_yaml_text("pod: [1]", "x").sources) == []


def test_the_version_decides_which_fields_exist():
    gates = "spec:\n  schedulingGates: [{name: quota}]\n"
    (too_new,) = problems(gates, version=KubeVersion("1.25", CLUSTER))
    assert too_new == ("error: pod.spec.schedulingGates: not a field of PodSpec in Kubernetes 1.25 (the cluster's) "
                       "(site.yaml:3)")
    assert problems(gates, version=KubeVersion("1.26", CLUSTER)) == []
    resize = ("spec:\n  containers: [{name: c, image: busybox, resizePolicy: [{resourceName: cpu, restartPolicy: "
              "NotRequired}]}]\n")
    assert problems(resize, version=KubeVersion("1.26", "--kube-version")) != []
    assert problems(resize, version=KubeVersion("1.27", "--kube-version")) == []
    with checking_against(KubeVersion("1.26", "--kube-version")):
        assert problems(resize) != []
    assert problems(resize) == []  # back to the default (newest) outside the block


def test_a_version_outside_the_schemas_says_which_schema_was_used():
    oldest, newest = schema_versions()[0], schema_versions()[-1]
    assert KubeVersion("1.19", CLUSTER).schema == oldest
    assert KubeVersion("1.19", CLUSTER).describe() == f"Kubernetes {oldest} (the oldest det-k8s has; the cluster's is 1.19)"
    assert KubeVersion("1.99", CLUSTER).describe() == f"Kubernetes {newest} (the newest det-k8s has; the cluster's is 1.99)"
    assert DEFAULT.schema == newest


@pytest.mark.parametrize(("text", "expected"), [("1.31", "1.31"), ("v1.31.2", "1.31"), ("v1.29.3-eks-1234", "1.29"),
                                                ("1.30+", "1.30"), ("latest", None), ("131", None)])
def test_kubernetes_versions_are_read_like_helm_reads_them(text, expected):
    assert parse_kube_version(text) == expected


def test_the_clusters_version_comes_from_its_version_answer():
    assert cluster_version({"major": "1", "minor": "31+", "gitVersion": "v1.31.4-gke.100"}) == KubeVersion("1.31", CLUSTER)
    assert cluster_version({"major": "1", "minor": "28"}) == KubeVersion("1.28", CLUSTER)
    assert cluster_version({}) is None


def test_kube_version_option_is_a_usage_error_when_it_is_no_version():
    from det_k8s.cli.options import pod_spec_version

    assert pod_spec_version(None) is DEFAULT
    assert pod_spec_version("v1.28.1") == KubeVersion("1.28", "--kube-version")
    with pytest.raises(UsageError, match="--kube-version 'banana': not a Kubernetes version"):
        pod_spec_version("banana")
