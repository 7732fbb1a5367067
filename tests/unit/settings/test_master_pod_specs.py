"""What the Determined master's validatePodSpec refuses in the settings' pod specs (it does not start on them): found
by starting the real 0.38.1 master on the validation corpus's pod specs as taskContainerDefaults.cpuPodSpec
(tests/real/test_master_accepts.py), which det-k8s accepted ("Check Failed! ... container Lifecycle is not
configurable")."""

from __future__ import annotations

import textwrap

import pytest

from det_k8s.settings import Document, load_settings

BASE = "maxSlotsPerPod: 4\ncheckpointStorage:\n  type: s3\n  bucket: b\ndetK8sScheduler: {image: r.example.com/d:1}\n"


def errors(text: str) -> list[str]:
    loaded = load_settings([Document("s.yaml", BASE + textwrap.dedent(text))])
    return [p.render() for p in loaded.errors]


def main_container(field: str, value: str, key: str = "taskContainerDefaults:\n  cpuPodSpec") -> str:
    return f"""\
{key}:
    spec:
      containers:
      - name: determined-container
        {field}: {value}
"""


@pytest.mark.parametrize(("field", "value", "go"), [
    ("livenessProbe", "{exec: {command: [\"true\"]}}", "LivenessProbe"),
    ("readinessProbe", "{httpGet: {port: 80}}", "ReadinessProbe"),
    ("startupProbe", "{tcpSocket: {port: 22}}", "StartupProbe"),
    ("lifecycle", "{preStop: {sleep: {seconds: 5}}}", "Lifecycle"),
    ("imagePullPolicy", "Always", "ImagePullPolicy"),
    ("terminationMessagePolicy", "File", "TerminationMessagePolicy"),
    ("ports", "[{containerPort: 8080}]", "Ports"),
    ("image", "busybox", "Image"),
    ("command", "[sleep]", "Command"),
    ("workingDir", "/w", "WorkingDir"),
])
def test_a_field_the_master_sets_in_its_container_is_refused(field, value, go):
    assert errors(main_container(field, value)) == [
        f"error: taskContainerDefaults.cpuPodSpec.spec.containers[0].{field}: the Determined 0.38.1 master refuses to "
        f"start: container {go} is not configurable in determined-container; remove it: the master sets it"
        + (" (the image and its pull policy: in the experiment's environment)" if field in ("image", "imagePullPolicy")
           else "") + f"; another container of the pod may have it (s.yaml:{BASE.count(chr(10)) + 6})"]


def test_the_same_fields_are_fine_in_another_container_and_empty_ones_in_the_masters():
    assert errors("""\
taskContainerDefaults:
  gpuPodSpec:
    spec:
      containers:
      - name: determined-container
        imagePullPolicy: ""
        ports: []
        resources: {limits: {nvidia.com/gpu: 4}}
      - name: sidecar
        image: busybox
        ports: [{containerPort: 80}]
        livenessProbe: {exec: {command: ["true"]}}
""") == []


def test_pod_name_namespace_and_host_network_are_refused_in_every_settings_pod_spec():
    found = errors("""\
taskContainerDefaults:
  checkpointGcPodSpec:
    metadata: {name: gc, namespace: other}
resourcePools:
- pool_name: a
  task_container_defaults:
    gpu_pod_spec:
      spec: {hostNetwork: true}
""")
    assert [line.split(":")[1].strip() for line in found] == [
        "taskContainerDefaults.checkpointGcPodSpec.metadata.name",
        "taskContainerDefaults.checkpointGcPodSpec.metadata.namespace",
        "resourcePools[0].task_container_defaults.gpu_pod_spec.spec.hostNetwork"]
    assert "host networking must be configured via master.yaml; remove it, and set taskContainerDefaults.networkMode: " \
           "host" in found[2]


def test_determined_0_17_also_refuses_a_security_context_there():
    spec = main_container("securityContext", "{runAsUser: 1000}")
    assert errors(spec) == []
    assert errors("appVersion: 0.17.15\n" + spec)[0].startswith(
        "error: taskContainerDefaults.cpuPodSpec.spec.containers[0].securityContext: the Determined 0.17.15 master "
        "refuses to start: container SecurityContext is not configurable")
