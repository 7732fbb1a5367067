"""The bundled chart with the real helm 3 and helm 4 binaries: lint, template, schema, Kubernetes schemas."""

from __future__ import annotations

import hashlib
import hmac
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from det_k8s.chart.assemble import write_chart
from det_k8s.settings import Document, load_settings
from tests.conftest import example

pytestmark = pytest.mark.helm

EXAMPLES = ["gpu-cluster", "external-db-tls-gcs", "cpu-azure"]
K8S_VERSION = "1.31.0"


def render(tmp_path: Path, name: str, *sets: str) -> Path:
    loaded = load_settings([Document(name, example(f"{name}.yaml").read_text())], sets)
    return write_chart(tmp_path / name, loaded.values, loaded.settings().app_version).directory


def helm_run(helm: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "HELM_CACHE_HOME": str(home / "cache"),
           "HELM_CONFIG_HOME": str(home / "config"), "HELM_DATA_HOME": str(home / "data"),
           "KUBECONFIG": str(home / "nokubeconfig")}
    return subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120, env=env)


def manifests(text: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


@pytest.mark.parametrize("name", EXAMPLES)
def test_lint_passes(helm, tmp_path, name):
    chart = render(tmp_path, name)
    result = helm_run(helm, "lint", str(chart), home=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_rendered_manifest_is_a_valid_kubernetes_object(helm, tmp_path, name):
    chart = render(tmp_path, name)
    result = helm_run(helm, "template", "demo", str(chart), "-n", "det", home=tmp_path)
    assert result.returncode == 0, result.stderr
    docs = manifests(result.stdout)
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def objects(helm: Path, chart: Path, home: Path, *extra: str) -> dict[tuple[str, str], dict]:
    result = helm_run(helm, "template", "demo", str(chart), "-n", "det", *extra, home=home)
    assert result.returncode == 0, result.stderr
    return {(d["kind"], d["metadata"]["name"]): d for d in manifests(result.stdout)}


def test_bundled_postgres_with_a_load_balancer(helm, tmp_path):
    objs = objects(helm, render(tmp_path, "gpu-cluster"), tmp_path)
    deployment = objs[("Deployment", "determined-master-deployment-demo")]
    assert deployment["metadata"]["labels"]["app"] == "determined-master-demo"
    assert deployment["metadata"]["labels"]["release"] == "demo"
    assert objs[("Service", "determined-master-service-demo")]["spec"]["type"] == "LoadBalancer"
    for kind, obj_name in [("Deployment", "determined-db-deployment-demo"), ("Service", "determined-db-service-demo"),
                           ("PersistentVolumeClaim", "determined-db-pvc-demo"), ("ServiceAccount", "determined-master-demo"),
                           ("ClusterRole", "determined-master-demo"), ("ClusterRoleBinding", "determined-master-demo"),
                           ("ConfigMap", "determined-master-config-demo"), ("Job", "determined-pw-change-demo")]:
        assert (kind, obj_name) in objs, (kind, obj_name)
    job = objs[("Job", "determined-pw-change-demo")]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install"
    assert "Ch4nge-me-now" not in yaml.safe_dump(job)  # the password comes from the Secret


def test_external_db_node_port_and_tls(helm, tmp_path):
    objs = objects(helm, render(tmp_path, "external-db-tls-gcs"), tmp_path)
    assert not [k for k in objs if k[1].startswith("determined-db-")]
    assert objs[("Service", "determined-master-service-demo")]["spec"]["type"] == "NodePort"
    assert objs[("Service", "determined-master-service-demo")]["spec"]["ports"][0]["port"] == 8443
    pod = objs[("Deployment", "determined-master-deployment-demo")]["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert {"name": "tls-secret", "secret": {"secretName": "determined-tls"}} in pod["volumes"]
    assert pod["containers"][0]["image"] == "registry.example.com/determined/determined-master:0.17.15"
    master = yaml.safe_load(objs[("ConfigMap", "determined-master-config-demo")]["data"]["master.yaml"])
    assert master["db"]["host"] == "10.20.0.5"
    assert master["security"]["tls"]["cert"] == "/mount/determined/secrets/tls.crt"
    assert master["checkpoint_storage"] == {"type": "gcs", "bucket": "det-checkpoints-prod", "prefix": "prod/",
                                            "save_experiment_best": 0, "save_trial_best": 1, "save_trial_latest": 1}
    assert master["resource_manager"]["default_scheduler"] == "coscheduler"
    assert ("Deployment", "coscheduler-demo") in objs


def test_cpu_slots_and_azure(helm, tmp_path):
    objs = objects(helm, render(tmp_path, "cpu-azure"), tmp_path)
    master = assembled_master_config(objs)  # the connection string makes checkpoint_storage a secret block
    assert master["resource_manager"]["slot_type"] == "cpu"
    assert master["resource_manager"]["slot_resource_requests"] == {"cpu": 7.5}
    assert master["checkpoint_storage"]["container"] == "checkpoints"
    assert master["task_container_defaults"]["cpu_pod_spec"]["spec"]["nodeSelector"] == {"node-pool": "cpu"}


@pytest.mark.parametrize("name", EXAMPLES)
def test_secrets_live_only_in_secrets(helm, tmp_path, name):
    sets = ("db.password=Unique-DB-Pass-42",)
    loaded = load_settings([Document(name, example(f"{name}.yaml").read_text())], sets)
    secrets = [s for s in (loaded.values["db"]["password"], loaded.values.get("defaultPassword"),
                           *loaded.settings().checkpoint.secrets) if s]
    for (kind, _), obj in objects(helm, render(tmp_path, name, *sets), tmp_path).items():
        if kind == "Secret":
            continue
        text = yaml.safe_dump(obj)
        for secret in secrets:
            assert secret not in text, f"{kind} holds a secret"


def assembled_master_config(objs: dict, release: str = "demo") -> dict:
    """The file the master reads: what the init container makes of the ConfigMap and the Secret."""
    deployment = objs[("Deployment", f"determined-master-deployment-{release}")]["spec"]["template"]["spec"]
    (init,) = deployment["initContainers"]
    assert "cat /config/public/master.yaml /config/secret/master-secrets.yaml > /etc/determined/master.yaml" in \
        init["args"][0]
    public = objs[("ConfigMap", f"determined-master-config-{release}")]["data"]["master.yaml"]
    secret = objs[("Secret", f"determined-master-secrets-{release}")]["stringData"]["master-secrets.yaml"]
    return yaml.safe_load(public + secret)


def test_storage_keys_reach_the_master_config_through_the_secret_only(helm, tmp_path):
    chart = render(tmp_path, "gpu-cluster", "checkpointStorage.accessKey=AKIA-UNIQUE",
                   "checkpointStorage.secretKey=SK-UNIQUE")
    objs = objects(helm, chart, tmp_path)
    config = assembled_master_config(objs)
    assert config["checkpoint_storage"]["access_key"] == "AKIA-UNIQUE"
    assert config["checkpoint_storage"]["secret_key"] == "SK-UNIQUE"
    assert config["resource_manager"]["max_slots_per_pod"] == 4 and config["port"] == 8081
    public = objs[("ConfigMap", "determined-master-config-demo")]["data"]["master.yaml"]
    assert "SK-UNIQUE" not in public and "checkpoint_storage:" not in public
    pod = objs[("Deployment", "determined-master-deployment-demo")]["spec"]["template"]["spec"]
    env = pod["containers"][0]["env"]
    assert [e["name"] for e in env] == ["DET_DB_PASSWORD"]  # the one secret the master takes from its environment
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["master-config"]["emptyDir"] == {"medium": "Memory"}


def test_without_keys_the_whole_config_is_in_the_configmap(helm, tmp_path):
    objs = objects(helm, render(tmp_path, "external-db-tls-gcs"), tmp_path)
    public = yaml.safe_load(objs[("ConfigMap", "determined-master-config-demo")]["data"]["master.yaml"])
    assert public["checkpoint_storage"]["bucket"] == "det-checkpoints-prod"
    assert assembled_master_config(objs) == public


def test_azure_connection_string_and_elastic_password_are_secret(helm, tmp_path):
    chart = render(tmp_path, "cpu-azure", "logging.type=elastic", "logging.host=es", "logging.port=9200",
                   "logging.security.password=ES-PASS-UNIQUE")
    objs = objects(helm, chart, tmp_path)
    config = assembled_master_config(objs)
    assert config["checkpoint_storage"]["connection_string"].startswith("DefaultEndpointsProtocol=https")
    assert config["logging"]["security"]["password"] == "ES-PASS-UNIQUE"
    public = objs[("ConfigMap", "determined-master-config-demo")]["data"]["master.yaml"]
    assert "ES-PASS-UNIQUE" not in public and "AccountKey" not in public


def test_values_schema_makes_helm_reject_bad_values(helm, tmp_path):
    chart = render(tmp_path, "gpu-cluster")
    result = helm_run(helm, "template", "demo", str(chart), "--set", "maxSlotsPerPod=zero", home=tmp_path)
    assert result.returncode != 0
    assert "maxSlotsPerPod" in result.stderr
    unknown = helm_run(helm, "template", "demo", str(chart), "--set", "maxSlotPerPod=4", home=tmp_path)
    assert unknown.returncode != 0 and "maxSlotPerPod" in unknown.stderr


def test_chart_fails_without_max_slots_per_pod(helm, tmp_path):
    chart = render(tmp_path, "gpu-cluster")
    result = helm_run(helm, "template", "demo", str(chart), "--set", "maxSlotsPerPod=null", home=tmp_path)
    assert result.returncode != 0 and "maxSlotsPerPod" in result.stderr


def test_a_changed_config_changes_the_master_pod_annotation(helm, tmp_path):
    chart = render(tmp_path, "gpu-cluster")
    key = ("Deployment", "determined-master-deployment-demo")
    first = objects(helm, chart, tmp_path)[key]["spec"]["template"]["metadata"]["annotations"]
    second = objects(helm, chart, tmp_path, "--set", "maxSlotsPerPod=2")[key]["spec"]["template"]["metadata"][
        "annotations"]
    assert first["checksum/config"] != second["checksum/config"]


PROBE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: probe
data:
  config: {{ include (print $.Template.BasePath "/master-config.yaml") . | quote }}
  secret: {{ include (print $.Template.BasePath "/master-secret.yaml") . | quote }}
  release: {{ printf "%s/%s" .Release.Namespace .Release.Name | quote }}
"""

_MPW = b"com.lyndir.masterpassword"
_MAXIMUM = ("anoxxxxxxxxxxxxxxxxx", "axxxxxxxxxxxxxxxxxno")
_CLASSES = {"a": "AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz", "n": "0123456789",
            "o": "@&%?,=[]_:-+*$#!'^~;()/.",
            "x": "AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz0123456789!@#$%^&*()"}


def master_password(password: str, user: str, site: str, counter: int = 1) -> str:
    """Sprig's derivePassword (the Master Password algorithm, "maximum" type), written out independently:
    the scrypt salt is made from `user`, and `site` only enters the cheap HMAC afterwards."""
    salt = _MPW + len(user.encode()).to_bytes(4, "big") + user.encode()
    key = hashlib.scrypt(password.encode(), salt=salt, n=32768, r=8, p=2, dklen=64, maxmem=128 * 1024 * 1024)
    message = _MPW + len(site.encode()).to_bytes(4, "big") + site.encode() + counter.to_bytes(4, "big")
    seed = hmac.new(key, message, hashlib.sha256).digest()
    template = _MAXIMUM[seed[0] % len(_MAXIMUM)]
    return "".join(_CLASSES[c][seed[i + 1] % len(_CLASSES[c])] for i, c in enumerate(template))


def _rendered(helm: Path, chart: Path, home: Path, *extra: str) -> tuple[dict[str, str], dict[str, str]]:
    """(the exact text `include` gives for the config and the secret, the master pod's annotations)."""
    objs = objects(helm, chart, home, *extra)
    annotations = objs[("Deployment", "determined-master-deployment-demo")]["spec"]["template"]["metadata"]["annotations"]
    return objs[("ConfigMap", "probe")]["data"], annotations


def test_the_master_pod_carries_no_plain_hash_of_the_secret_yet_restarts_when_it_changes(helm, tmp_path):
    """A bare sha256 of the Secret on the pod would let anyone who can read pods test password guesses."""
    chart = render(tmp_path, "gpu-cluster")
    (chart / "templates" / "zz-probe.yaml").write_text(PROBE)  # shows what the annotations are computed from
    texts, annotations = _rendered(helm, chart, tmp_path)
    def sha256(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()
    assert annotations["checksum/config"] == sha256(texts["config"])  # the config's plain checksum, as before
    assert sha256(texts["secret"]) not in annotations.values()
    again = _rendered(helm, chart, tmp_path)[1]
    changed = _rendered(helm, chart, tmp_path, "--set", "db.password=another-password")[1]
    assert again["fingerprint/secret"] == annotations["fingerprint/secret"]  # no restart when nothing changed
    assert changed["fingerprint/secret"] != annotations["fingerprint/secret"]
    assert changed["checksum/config"] == annotations["checksum/config"]


def test_the_secret_fingerprint_is_salted_per_release(helm, tmp_path):
    """scrypt's salt is the release's namespace/name, so one guessing run cannot cover every installation."""
    chart = render(tmp_path, "gpu-cluster")
    (chart / "templates" / "zz-probe.yaml").write_text(PROBE)
    texts, annotations = _rendered(helm, chart, tmp_path)
    assert texts["release"].endswith("/demo")
    expected = master_password(texts["secret"], user=texts["release"], site="det-k8s/master-secret")
    assert annotations["fingerprint/secret"] == hashlib.sha256(expected.encode()).hexdigest()


def test_helm4_client_dry_run_install_needs_no_cluster(helm4, tmp_path):
    chart = render(tmp_path, "gpu-cluster")
    result = helm_run(helm4, "install", "demo", str(chart), "-n", "det", "--dry-run=client", home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "determined-master-deployment-demo" in result.stdout


@pytest.mark.parametrize("value", ["1e3", "8e7438", "0o17", "0x1F", "yes", "on", "12:30", "1_000"])
def test_strings_that_look_like_numbers_reach_helm_as_strings(helm, tmp_path, value):
    chart = render(tmp_path, "gpu-cluster", f"db.password={value}", f"clusterName={value}")
    objs = objects(helm, chart, tmp_path)  # helm's schema check passes: they are strings to helm too
    assert objs[("Secret", "determined-master-secrets-demo")]["stringData"]["db-password"] == value
    assert yaml.safe_load(objs[("ConfigMap", "determined-master-config-demo")]["data"]["master.yaml"])[
        "cluster_name"] == value
