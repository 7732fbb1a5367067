"""Determined's own artifacts as the oracle for what the bundled chart writes, release by release.

- Every storage type of every release: the `checkpoint_storage` that `helm template` (helm 3 and 4) renders
  into the master's configuration is validated against that release's JSON schemas by Determined's own
  validator (tests/support/determined_oracle.py in .tools/determined-oracle: the 0.17.15 wheel's schemas, and the
  0.26.2 and v0.38.1 schema files read from ../shared/determined/schemas/<tag>/).
- Conformance: every key of the master configuration rendered for the examples and a kitchen-sink settings
  file is a key that release parses, with that key's type, and every key it requires is there (the rows of
  det_k8s/determined/versions.py, each citing the official chart template it was read from).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from det_k8s.chart.assemble import write_chart
from det_k8s.determined import versions
from det_k8s.settings import Document, load_settings
from tests.conftest import example
from tests.integration.test_helm_chart import helm_run, manifests
from tests.support.needs import need

pytestmark = pytest.mark.helm

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "determined"
ORACLE = ROOT / ".tools" / "determined-oracle" / "bin" / "python"
TAGS = {"0.17.15": "0.17.15", "0.26.2": "0.26.2", "0.38.1": "v0.38.1"}
def base(version: str) -> str:
    return "maxSlotsPerPod: 4\n" + ("initialUserPassword: Abcdefg1\n" if version >= "0.31" else "")

# every storage type each release has, as settings (the chart must turn each into what the schema accepts)
STORAGE: dict[str, dict[str, Any]] = {
    "shared_fs": {"type": "shared_fs", "hostPath": "/mnt/checkpoints"},
    "s3": {"type": "s3", "bucket": "b"},
    "s3-keys-prefix-endpoint": {"type": "s3", "bucket": "b", "accessKey": "AK", "secretKey": "SK", "prefix": "p/",
                                "endpointUrl": "http://minio:9000"},
    "gcs": {"type": "gcs", "bucket": "b"},
    "gcs-prefix": {"type": "gcs", "bucket": "b", "prefix": "p/"},
    "azure-connection-string": {"type": "azure", "container": "c", "connection_string": "DefaultEndpointsProtocol=x"},
    "azure-account-url": {"type": "azure", "container": "c", "account_url": "https://a.blob.core.windows.net",
                          "credential": "sas"},
    "directory": {"type": "directory", "containerPath": "/checkpoints"},
    "hdfs": {"type": "hdfs", "hdfsUrl": "hdfs://namenode:8020", "hdfsPath": "/ckpt", "user": "det"},
}


def settings_for(version: str, text: str, sets: tuple[str, ...] = ()) -> Any:
    loaded = load_settings([Document("settings", text)], (*sets, f"appVersion={version}"))
    return loaded


def storage_cases(version: str) -> dict[str, dict[str, Any]]:
    """The storage settings `version` accepts (det-k8s's validation decides, per the version table)."""
    out = {}
    for name, storage in STORAGE.items():
        loaded = settings_for(version, yaml.safe_dump({"maxSlotsPerPod": 4, "checkpointStorage": storage}))
        if not loaded.errors:
            out[name] = storage
    return out


def render_config(helm: Path, tmp: Path, version: str, text: str, sets: tuple[str, ...] = ()) -> tuple[dict, dict]:
    """(the master's configuration as the master reads it, the master Deployment), via helm template."""
    loaded = settings_for(version, text, sets)
    assert not loaded.errors, [str(p) for p in loaded.errors]
    chart = write_chart(tmp / "chart", loaded.values, str(loaded.app_version)).directory
    result = helm_run(helm, "template", "demo", str(chart), "-n", "det", home=tmp)
    assert result.returncode == 0, result.stderr
    objs = {(d["kind"], d["metadata"]["name"]): d for d in manifests(result.stdout)}
    deployment = objs[("Deployment", "determined-master-deployment-demo")]
    if ("Secret", "determined-master-config-demo") in objs:
        text = objs[("Secret", "determined-master-config-demo")]["stringData"]["master.yaml"]
    else:  # before 0.26.2: what the init container assembles from the ConfigMap and the release Secret
        public = objs[("ConfigMap", "determined-master-config-demo")]["data"]["master.yaml"]
        secret = objs[("Secret", "determined-master-secrets-demo")]["stringData"]["master-secrets.yaml"]
        text = public + secret
    return yaml.safe_load(text), deployment


def oracle(tag: str, schema: str, instances: list[Any]) -> list[list[str]]:
    if not ORACLE.exists():
        pytest.fail(f"{ORACLE} missing: run ./scripts/test, which installs Determined's validator there")
    request = {"tag": tag, "schemas": str(SHARED / "schemas" / tag), "schema": schema, "instances": instances}
    oracle = ROOT / "tests" / "support" / "determined_oracle.py"
    result = subprocess.run([str(ORACLE), str(oracle)], input=json.dumps(request),
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    found: list[list[str]] = json.loads(result.stdout)
    return found


@pytest.fixture(autouse=True)
def _shared() -> None:
    need((SHARED / "schemas").is_dir(), f"{SHARED} is absent: Determined's schemas are read from there")


@pytest.mark.parametrize("version", list(TAGS))
def test_every_storage_type_the_chart_renders_passes_the_releases_own_schema(helm, tmp_path, version):
    cases = storage_cases(version)
    rendered = {}
    for name, storage in cases.items():
        config, _ = render_config(helm, tmp_path / name, version,
                                  base(version) + yaml.safe_dump({"checkpointStorage": storage}))
        rendered[name] = config["checkpoint_storage"]
    verdicts = oracle(TAGS[version], "checkpoint-storage.json", list(rendered.values()))
    assert dict(zip(rendered, verdicts, strict=True)) == {name: [] for name in rendered}
    expected = {"0.17.15": {"hdfs"}, "0.26.2": set(), "0.38.1": {"directory"}}[version]
    assert {n for n in cases if n in ("hdfs", "directory")} == expected  # the version table decided, not the test
    assert ("gcs-prefix" in cases) is (version != "0.17.15")


def test_the_oracle_refuses_what_a_release_refuses():
    """It can fail: 0.17.15's schema has no gcs prefix; v0.38.1 none of hdfs; 0.26.2 no directory."""
    assert oracle("0.17.15", "checkpoint-storage.json", [{"type": "gcs", "bucket": "b", "prefix": "p"}])[0]
    assert oracle("v0.38.1", "checkpoint-storage.json", [{"type": "hdfs", "hdfs_url": "u", "hdfs_path": "p"}])[0]
    assert oracle("0.26.2", "checkpoint-storage.json", [{"type": "directory", "container_path": "/c"}])[0]


def test_settings_refuse_what_the_oracle_refuses_and_the_chart_never_writes_it(helm, tmp_path):
    text = "maxSlotsPerPod: 4\ncheckpointStorage: {type: gcs, bucket: b, prefix: team/}\n"
    (error,) = settings_for("0.17.15", text).errors
    assert error.path == "checkpointStorage.prefix" and "added in 0.18.2" in error.message
    loaded = settings_for("0.17.15", text)  # forced through anyway (as `helm --set` could): the chart drops it
    chart = write_chart(tmp_path / "c", loaded.values, "0.17.15").directory
    result = helm_run(helm, "template", "demo", str(chart), home=tmp_path)
    (config,) = [yaml.safe_load(d["data"]["master.yaml"]) for d in manifests(result.stdout) if d["kind"] == "ConfigMap"]
    assert oracle("0.17.15", "checkpoint-storage.json", [config["checkpoint_storage"]]) == [[]]


KITCHEN_SINK = {
    "all": """
maxSlotsPerPod: 4
appVersion: "0.17.15"
clusterName: sink
imageRegistry: registry.local/det
imagePullSecretName: regcred
tlsSecret: det-tls
useNodePortForMaster: true
db: {hostAddress: pg.local, sslMode: verify-full, sslRootCert: ca.crt, resourceType: secret, certResourceName: pg-ca}
checkpointStorage: {type: s3, bucket: b, accessKey: AK, secretKey: SK, endpointUrl: "http://minio:9000"}
slotType: cpu
slotResourceRequests: {cpu: 7.5}
defaultScheduler: coscheduler
fluent: {image: "fluent/fluent-bit:1.9"}
taskContainerDefaults:
  networkMode: host
  dtrainNetworkInterface: eth0
  forcePullImage: true
  cpuImage: mirror/cpu:1
  gpuImage: mirror/gpu:1
  cpuPodSpec: {apiVersion: v1, kind: Pod, spec: {nodeSelector: {pool: cpu}}}
  gpuPodSpec: {apiVersion: v1, kind: Pod, spec: {nodeSelector: {pool: gpu}}}
telemetry: {enabled: false}
logging:
  type: elastic
  host: es.local
  port: 9200
  security: {username: u, password: p, tls: {enabled: true, skipVerify: false, certificateName: es,
             certificate: "-----BEGIN CERTIFICATE-----"}}
""",
    "0.17.15": "taskContainerDefaults: {ncclPortRange: '29400:29500', glooPortRange: '29600:29700'}\n"
               "checkpointStorage: {prefix: team/}\n",
    "0.26.2": """
logLevel: debug
logColor: false
security: {defaultTask: {user: det-nobody, uid: 65533, group: det-nobody, gid: 65533}, authz: {type: basic}}
observability: {enable_prometheus: true}
tensorboardTimeout: 300
notebookTimeout: 1800
resourcePools: [{pool_name: default}, {pool_name: big, kubernetes_namespace: big}]
defaultAuxResourcePool: default
defaultComputeResourcePool: big
fluent: {uid: 0, gid: 0}
checkpointStorage: {prefix: team/}
""",
    "0.38.1": """
initialUserPassword: Abcdefg1
logLevel: debug
security: {defaultTask: {user: det-nobody, uid: 65533, group: det-nobody, gid: 65533}}
observability: {enable_prometheus: true}
tensorboardTimeout: 300
resourcePools: [{pool_name: default}]
resourceManager: {defaultNamespace: tasks, clusterName: east}
determinedMasterHost: det.example.com
determinedMasterPort: 443
retentionPolicy: {logRetentionDays: 7, schedule: 24h}
taskContainerDefaults:
  rocmImage: mirror/rocm:1
  startupHook: echo hi
  logPolicies: [{pattern: oom, action: {type: exclude_node}}]
  checkpointGcPodSpec: {apiVersion: v1, kind: Pod, spec: {nodeSelector: {pool: cpu}}}
checkpointStorage: {prefix: team/}
""",
}

_TYPES = {"str": str, "int": int, "bool": bool, "map": dict, "list": list}
_FREE_FORM = {"checkpoint_storage", "security.authz", "resource_pools", "task_container_defaults.cpu_pod_spec",
              "task_container_defaults.gpu_pod_spec", "task_container_defaults.checkpoint_gc_pod_spec",
              "task_container_defaults.log_policies"}


def leaves(config: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted path -> value for every leaf; the free-form parts (pod specs, pools, storage) as one leaf."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and path not in _FREE_FORM:
            out.update(leaves(value, path + "."))
        else:
            out[path] = value
    return out


def conforms(config: dict, version: str, env: list[dict]) -> list[str]:
    table = versions.master_keys(versions.v(version))
    problems = []
    found = leaves(config)
    if any(e.get("name") == "DET_DB_PASSWORD" for e in env):
        found.setdefault("db.password", "(from the environment)")  # the master binds DET_DB_PASSWORD
    for path, value in found.items():
        row = table.get(path)
        if row is None:
            problems.append(f"{path}: not a key of Determined {version}'s master")
        elif row.value == "num" and not (isinstance(value, int | float) and not isinstance(value, bool)):
            problems.append(f"{path}: {value!r} is not a number")
        elif row.value in _TYPES and not isinstance(value, _TYPES[row.value]) or (
                row.value == "int" and isinstance(value, bool)):
            problems.append(f"{path}: {value!r} is not a {row.value}")
    for path, row in table.items():
        if row.note == "required" and path not in found:
            problems.append(f"{path}: required by Determined {version}, missing")
    return problems


@pytest.mark.parametrize("version", list(TAGS))
@pytest.mark.parametrize("source", ["gpu-cluster", "external-db-tls-gcs", "cpu-azure", "kitchen-sink"])
def test_the_master_configuration_has_exactly_the_keys_the_release_parses(helm, tmp_path, version, source):
    if source == "kitchen-sink":
        docs = [Document("sink", KITCHEN_SINK["all"]), Document("sink-" + version, KITCHEN_SINK[version])]
        text = yaml.safe_dump({k: v for k, v in load_settings(docs).user_values.items() if k != "appVersion"})
    else:
        text = example(f"{source}.yaml").read_text()
        if version < "0.31":
            text = "\n".join(line for line in text.splitlines() if not line.startswith("initialUserPassword"))
        if version == "0.17.15" and "gcs" in text:
            text = text.replace("  prefix: prod/\n", "")  # 0.17.15 has no prefix for gcs
    config, deployment = render_config(helm, tmp_path, version, text)
    env = deployment["spec"]["template"]["spec"]["containers"][0].get("env") or []
    assert conforms(config, version, env) == []
    if source == "kitchen-sink":  # it really is a kitchen sink: most of the release's keys are there
        assert len(leaves(config)) >= 0.6 * len(versions.master_keys(versions.v(version)))


def test_conformance_can_fail():
    assert conforms({"port": 8081, "resource_manager": {"namespace": "x"}}, "0.38.1", []) != []
    problems = conforms({"port": "8081"}, "0.17.15", [])
    assert "port: '8081' is not a int" in problems
    assert any("db.user: required" in p for p in problems)
