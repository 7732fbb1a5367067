"""Status diagnosis in the documents' terms: image pulls, Pending volumes, a crashing master."""

from __future__ import annotations

import yaml

from det_k8s.release.diagnose import Observed, diagnose, pod_state
from det_k8s.release.gpu_check import gpu_check_pod, scheduling_problem
from det_k8s.release.manifests import redact_secrets
from tests.support.k8s_emulator import pod

IMAGE = "registry.example.com/determined/determined-master:0.17.99"


def master(reason: str, *, message: str = "", restarts: int = 0, phase: str = "Pending", image: str = IMAGE):
    obj = pod("determined-master-deployment-demo-abc", phase=phase, container_statuses=[
        {"name": "determined-master", "restartCount": restarts, "state": {"waiting": {"reason": reason,
                                                                                      "message": message}}}])
    obj["spec"]["containers"][0]["image"] = image
    return pod_state(obj)


def test_image_pull_names_version_registry_and_missing_secret():
    obs = Observed("demo", "det", [master("ImagePullBackOff", message="manifest unknown")], pull_secrets=["regcred"],
                   secrets={"regcred": False})
    (finding,) = diagnose(obs)
    assert finding.problem.startswith(f"pod determined-master-deployment-demo-abc cannot pull image {IMAGE} "
                                      "(ImagePullBackOff): manifest unknown")
    assert finding.checks[0].startswith("appVersion 0.17.99: is it a released Determined version?")
    assert finding.checks[1] == "imageRegistry registry.example.com/determined: does it host determined-master:0.17.99?"
    assert "imagePullSecretName regcred: the Secret is MISSING in det" in finding.checks[2]


def test_image_pull_without_a_pull_secret_says_so():
    (finding,) = diagnose(Observed("demo", "det", [master("ErrImagePull", image="determinedai/determined-master:abc")]))
    assert finding.checks[1] == "imageRegistry determinedai: does it host determined-master:abc?"
    assert finding.checks[2].startswith("imagePullSecretName is not set")


def test_pending_volume_names_the_storage_class():
    pvc = {"metadata": {"name": "determined-db-pvc-demo"}, "spec": {"storageClassName": "fast"},
           "status": {"phase": "Pending"}}
    classes = [{"metadata": {"name": "standard", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}}}]
    (finding,) = diagnose(Observed("demo", "det", [], pvc=pvc, storage_classes=classes))
    assert "determined-db-pvc-demo is Pending" in finding.problem
    assert finding.checks == ("storage class fast does not exist (classes: standard); set db.storageClassName to one "
                              "of them",)
    no_default = {**pvc, "spec": {}}
    (finding,) = diagnose(Observed("demo", "det", [], pvc=no_default, storage_classes=[]))
    assert "no default storage class" in finding.checks[0]


def test_crash_loop_points_at_the_database_and_quotes_the_log():
    db = pod_state(pod("determined-db-deployment-demo-x", phase="Pending"))
    obs = Observed("demo", "det", [master("CrashLoopBackOff", restarts=5, phase="Running")], db_pods=[db],
                   logs="starting\nerror: failed to connect to database: dial tcp 10.1.2.3:5432: connection refused\n")
    (finding,) = diagnose(obs)
    assert "keeps crashing (CrashLoopBackOff, 5 restarts)" in finding.problem
    assert "the bundled database pod determined-db-deployment-demo-x is Pending" in finding.checks
    assert finding.checks[-1] == ("the master's log says: error: failed to connect to database: dial tcp "
                                  "10.1.2.3:5432: connection refused")
    external = Observed("demo", "det", obs.master_pods, bundled_db=False, external_db_host="10.20.0.5")
    assert "external database at 10.20.0.5" in diagnose(external)[0].checks[0]


def test_a_healthy_master_has_no_findings():
    ok = pod("determined-master-deployment-demo-abc", phase="Running")
    ok["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert diagnose(Observed("demo", "det", [pod_state(ok)])) == []


def test_scheduling_events():
    events = [{"reason": "Scheduled"}, {"reason": "FailedScheduling",
                                        "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}]
    assert scheduling_problem(events).startswith("no node offers nvidia.com/gpu to this pod (0/3 nodes")
    assert scheduling_problem([]) is None


def test_gpu_check_pod_requests_one_gpu_and_can_be_pinned():
    spec = gpu_check_pod("gpu-3")["spec"]
    assert spec["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
    assert spec["containers"][0]["command"] == ["nvidia-smi"] and spec["restartPolicy"] == "Never"
    term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": ["gpu-3"]}]
    assert {"key": "nvidia.com/gpu", "operator": "Exists"} in spec["tolerations"]
    assert "determined" not in gpu_check_pod()["metadata"]["labels"]  # the master would delete it


def test_secret_values_are_redacted_and_other_documents_kept_verbatim():
    stream = ("---\n# Source: determined/templates/master-secret.yaml\napiVersion: v1\nkind: Secret\nmetadata:\n"
              "  name: s\nstringData:\n  db-password: \"hunter2\"\ndata:\n  key: aHVudGVyMg==\n"
              "---\n# Source: x.yaml\nkind: ConfigMap\ndata:\n  a: \"1\"\n")
    text = redact_secrets(stream)
    assert "hunter2" not in text and "aHVudGVyMg" not in text
    assert "db-password: <redacted>" in text and "# Source: determined/templates/master-secret.yaml" in text
    assert "---\n# Source: x.yaml\nkind: ConfigMap\ndata:\n  a: \"1\"\n" in text
    assert "hunter2" not in redact_secrets("kind: Secret\nstringData: {a: hunter2\n")  # unparseable: dropped


def test_a_master_yaml_in_a_secret_is_shown_with_only_its_secrets_masked():
    stream = ("---\n# Source: determined/templates/master-config.yaml\napiVersion: v1\nkind: Secret\nmetadata:\n"
              "  name: determined-master-config-demo\nstringData:\n  master.yaml: |\n    port: 8081\n    db:\n"
              "      password: hunter2-db\n      host: db\n    checkpoint_storage:\n      type: s3\n"
              "      secret_key: s3cr3t-key\n      endpoint_url: http://me:pw@minio:9000\n    cluster_name: c1\n"
              "    task_container_defaults:\n      gpu_pod_spec:\n        spec:\n          tolerations:\n"
              "          - {key: nvidia.com/gpu, operator: Exists}\n    webhook: hunter2-db-copy\n"
              "  plain: hunter2\n")
    text = redact_secrets(stream, known=("hunter2-db-copy",))
    for secret in ("hunter2", "s3cr3t-key", "me:pw"):
        assert secret not in text
    secret = yaml.safe_load(text)
    assert secret["stringData"]["plain"] == "<redacted>"
    master = yaml.safe_load(secret["stringData"]["master.yaml"])
    assert master["db"] == {"password": "<redacted>", "host": "db"}
    assert master["checkpoint_storage"]["secret_key"] == "<redacted>" and master["cluster_name"] == "c1"
    assert master["task_container_defaults"]["gpu_pod_spec"]["spec"]["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert master["webhook"] == "<redacted>"  # a known secret, whatever its key
    assert "# Source: determined/templates/master-config.yaml" in text
