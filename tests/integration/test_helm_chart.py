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
RELEASES = ["0.17.15", "0.26.2", "0.38.1"]  # the tags whose official chart and master were read
K8S_VERSION = "1.31.0"
LEGACY = "0.17.15"  # a release whose master configuration is a ConfigMap (before 0.26.2)


def render(tmp_path: Path, name: str, *sets: str, version: str | None = None) -> Path:
    """The example as the bundled chart for `version` (the example's own, the default release, when None)."""
    extra = (f"appVersion={version}",) if version else ()
    loaded = load_settings([Document(name, example(f"{name}.yaml").read_text())], (*sets, *extra))
    if version and version < "0.31":
        loaded.values.pop("initialUserPassword", None)  # a key of 0.31 and later
    out = tmp_path / f"{name}-{version or 'default'}"
    return write_chart(out, loaded.values, str(loaded.app_version)).directory


def helm_run(helm: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "HELM_CACHE_HOME": str(home / "cache"),
           "HELM_CONFIG_HOME": str(home / "config"), "HELM_DATA_HOME": str(home / "data"),
           "KUBECONFIG": str(home / "nokubeconfig")}
    return subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120, env=env)


def manifests(text: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


@pytest.mark.parametrize("version", RELEASES)
@pytest.mark.parametrize("name", EXAMPLES)
def test_lint_passes(helm, tmp_path, name, version):
    chart = render(tmp_path, name, version=version)
    result = helm_run(helm, "lint", str(chart), home=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout


@pytest.mark.parametrize("version", RELEASES)
@pytest.mark.parametrize("name", EXAMPLES)
def test_every_rendered_manifest_is_a_valid_kubernetes_object(helm, tmp_path, name, version):
    chart = render(tmp_path, name, version=version)
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
    objs = objects(helm, render(tmp_path, "gpu-cluster", "defaultPassword=Ch4nge-me-now", version=LEGACY), tmp_path)
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
    objs = objects(helm, render(tmp_path, "external-db-tls-gcs", version=LEGACY), tmp_path)
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
    # 0.17.15 has no prefix for gcs (validate refuses it; the chart never writes what this master rejects)
    assert master["checkpoint_storage"] == {"type": "gcs", "bucket": "det-checkpoints-prod",
                                            "save_experiment_best": 0, "save_trial_best": 1, "save_trial_latest": 1}
    assert master["resource_manager"]["default_scheduler"] == "coscheduler"
    assert ("Deployment", "coscheduler-demo") not in objs  # gangScheduler det-k8s (the default): not the plugin


def test_cpu_slots_and_azure(helm, tmp_path):
    objs = objects(helm, render(tmp_path, "cpu-azure", version=LEGACY), tmp_path)
    master = assembled_master_config(objs)  # the connection string makes checkpoint_storage a secret block
    assert master["resource_manager"]["slot_type"] == "cpu"
    assert master["resource_manager"]["slot_resource_requests"] == {"cpu": 7.5}
    assert master["checkpoint_storage"]["container"] == "checkpoints"
    assert master["task_container_defaults"]["cpu_pod_spec"]["spec"]["nodeSelector"] == {"node-pool": "cpu"}


@pytest.mark.parametrize("version", RELEASES)
@pytest.mark.parametrize("name", EXAMPLES)
def test_secrets_live_only_in_secrets(helm, tmp_path, name, version):
    sets = ("db.password=Unique-DB-Pass-42", "logging.type=elastic", "logging.host=es", "logging.port=9200",
            "logging.security.password=ES-Unique-Pass")
    loaded = load_settings([Document(name, example(f"{name}.yaml").read_text())], sets)
    secrets = [s for s in (loaded.values["db"]["password"], loaded.values.get("defaultPassword"),
                           loaded.values.get("initialUserPassword"), "ES-Unique-Pass",
                           *loaded.settings().checkpoint.secrets) if s]
    if version < "0.31":
        secrets.remove(loaded.values["initialUserPassword"])  # not rendered for these releases
    for (kind, _), obj in objects(helm, render(tmp_path, name, *sets, version=version), tmp_path).items():
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
                   "checkpointStorage.secretKey=SK-UNIQUE", version=LEGACY)
    objs = objects(helm, chart, tmp_path)
    config = assembled_master_config(objs)
    assert config["checkpoint_storage"]["access_key"] == "AKIA-UNIQUE"
    assert config["checkpoint_storage"]["secret_key"] == "SK-UNIQUE"
    assert config["resource_manager"]["max_slots_per_pod"] == 4 and config["port"] == 8081
    public = objs[("ConfigMap", "determined-master-config-demo")]["data"]["master.yaml"]
    assert "SK-UNIQUE" not in public and "checkpoint_storage:" not in public
    pod = objs[("Deployment", "determined-master-deployment-demo")]["spec"]["template"]["spec"]
    env = pod["containers"][0]["env"]
    # the one secret the master takes from its environment (and its namespace, as v0.38.1's chart gives it)
    assert [e["name"] for e in env] == ["DET_RELEASE_NAMESPACE", "DET_DB_PASSWORD"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["master-config"]["emptyDir"] == {"medium": "Memory"}


def test_without_keys_the_whole_config_is_in_the_configmap(helm, tmp_path):
    objs = objects(helm, render(tmp_path, "external-db-tls-gcs", version=LEGACY), tmp_path)
    public = yaml.safe_load(objs[("ConfigMap", "determined-master-config-demo")]["data"]["master.yaml"])
    assert public["checkpoint_storage"]["bucket"] == "det-checkpoints-prod"
    assert assembled_master_config(objs) == public


def test_azure_connection_string_and_elastic_password_are_secret(helm, tmp_path):
    chart = render(tmp_path, "cpu-azure", "logging.type=elastic", "logging.host=es", "logging.port=9200",
                   "logging.security.password=ES-PASS-UNIQUE", version=LEGACY)
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
    chart = render(tmp_path, "gpu-cluster", version=LEGACY)
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
    chart = render(tmp_path, "gpu-cluster", version=LEGACY)
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
    chart = render(tmp_path, "gpu-cluster", version=LEGACY)
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
    chart = render(tmp_path, "gpu-cluster", f"db.password={value}", f"clusterName={value}", version=LEGACY)
    objs = objects(helm, chart, tmp_path)  # helm's schema check passes: they are strings to helm too
    assert objs[("Secret", "determined-master-secrets-demo")]["stringData"]["db-password"] == value
    assert yaml.safe_load(objs[("ConfigMap", "determined-master-config-demo")]["data"]["master.yaml"])[
        "cluster_name"] == value


def master_config(objs: dict, release: str = "demo") -> dict:
    """The master's configuration from 0.26.2: the whole file in the Secret the master mounts."""
    secret = objs[("Secret", f"determined-master-config-{release}")]
    assert ("ConfigMap", f"determined-master-config-{release}") not in objs
    return yaml.safe_load(secret["stringData"]["master.yaml"])


@pytest.mark.parametrize("version", ["0.26.2", "0.38.1"])
def test_from_0_26_2_the_master_config_is_one_secret_mounted_as_the_official_chart_mounts_it(helm, tmp_path,
                                                                                           version):
    chart = render(tmp_path, "gpu-cluster", "checkpointStorage.accessKey=AKIA-UNIQUE",
                   "checkpointStorage.secretKey=SK-UNIQUE", version=version)
    objs = objects(helm, chart, tmp_path)
    config = master_config(objs)
    assert config["checkpoint_storage"]["secret_key"] == "SK-UNIQUE"
    assert config["db"]["password"] == "postgres"
    pod = objs[("Deployment", "determined-master-deployment-demo")]["spec"]["template"]
    assert "initContainers" not in pod["spec"]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["master-config"] == {"name": "master-config", "secret": {"secretName": "determined-master-config-demo"}}
    assert "checksum/config" not in pod["metadata"]["annotations"]  # no plain hash of a Secret on the pod
    changed = objects(helm, chart, tmp_path, "--set", "maxSlotsPerPod=2")
    other = changed[("Deployment", "determined-master-deployment-demo")]["spec"]["template"]["metadata"]
    assert other["annotations"]["fingerprint/secret"] != pod["metadata"]["annotations"]["fingerprint/secret"]
    assert not [k for k in objs if k[0] == "ConfigMap"]


@pytest.mark.parametrize(("version", "key", "absent"), [("0.17.15", "namespace", "default_namespace"),
                                                        ("0.34.2", "namespace", "default_namespace"),
                                                        ("0.35.0", "default_namespace", "namespace"),
                                                        ("0.38.1", "default_namespace", "namespace")])
def test_namespace_key_per_release(helm, tmp_path, version, key, absent):
    objs = objects(helm, render(tmp_path, "gpu-cluster", version=version), tmp_path)
    config = assembled_master_config(objs) if version < "0.26.2" else master_config(objs)
    assert config["resource_manager"][key] == "det" and absent not in config["resource_manager"]


def test_default_namespace_and_cluster_name_from_resource_manager(helm, tmp_path):
    chart = render(tmp_path, "gpu-cluster", "resourceManager.defaultNamespace=ml", "resourceManager.clusterName=east")
    rm = master_config(objects(helm, chart, tmp_path))["resource_manager"]
    assert rm["default_namespace"] == "ml" and rm["cluster_name"] == "east"


@pytest.mark.parametrize("version", RELEASES)
def test_priority_classes_as_the_official_chart_creates_them_owned_by_the_release(helm, tmp_path, version):
    objs = objects(helm, render(tmp_path, "gpu-cluster", version=version), tmp_path)
    system = objs[("PriorityClass", "determined-system-priority")]
    medium = objs[("PriorityClass", "determined-medium-priority")]
    assert (system["value"], system["preemptionPolicy"], system["globalDefault"]) == (1000000, "Never", False)
    assert (medium["value"], medium["preemptionPolicy"]) == (50, "Never")
    assert system["metadata"]["labels"]["app.kubernetes.io/instance"] == "demo"
    for deployment in ("determined-master-deployment-demo", "determined-db-deployment-demo"):
        spec = objs[("Deployment", deployment)]["spec"]["template"]["spec"]
        assert spec["priorityClassName"] == "determined-system-priority"
    without = objects(helm, render(tmp_path, "gpu-cluster", version=version), tmp_path,
                      "--set", "createNonNamespacedObjects=false")
    assert not [k for k in without if k[0] == "PriorityClass"]


@pytest.mark.parametrize(("version", "registry", "cpu"), [
    ("0.17.15", "registry.local/det",
     "registry.local/det/environments:py-3.8-pytorch-1.10-lightning-1.5-tf-2.8-cpu-ed66d8a"),
    ("0.26.2", "registry.local/det", "determinedai/environments:py-3.8-pytorch-1.12-tf-2.8-cpu-9d07809"),
    ("0.38.1", "registry.local/det", "determinedai/pytorch-ngc:0.38.1"),
])
def test_task_images_as_the_official_chart_of_the_release_makes_them(helm, tmp_path, version, registry, cpu):
    chart = render(tmp_path, "gpu-cluster", f"imageRegistry={registry}", version=version)
    objs = objects(helm, chart, tmp_path)
    config = assembled_master_config(objs) if version < "0.26.2" else master_config(objs)
    assert config["task_container_defaults"]["image"]["cpu"] == cpu
    if version >= "0.26.2":  # defaultImages.* reach the task images verbatim
        chart = render(tmp_path, "gpu-cluster", "defaultImages.cpuImage=mirror/cpu:1",
                       "defaultImages.gpuImage=mirror/gpu:1", version=version)
        image = master_config(objects(helm, chart, tmp_path))["task_container_defaults"]["image"]
        assert (image["cpu"], image["gpu"]) == ("mirror/cpu:1", "mirror/gpu:1")


def test_initial_password_from_0_31_with_the_official_rules(helm, tmp_path):
    chart = render(tmp_path, "gpu-cluster")
    objs = objects(helm, chart, tmp_path)
    assert master_config(objs)["security"]["initial_user_password"] == "Ch4nge-me-now"
    assert ("Job", "determined-pw-change-demo") not in objs  # the post-install Job is gone from 0.31
    weak = helm_run(helm, "template", "demo", str(chart), "--set", "initialUserPassword=short", home=tmp_path)
    assert weak.returncode != 0 and "at least 8 characters" in weak.stderr
    missing = helm_run(helm, "template", "demo", str(chart), "--set", "initialUserPassword=null", home=tmp_path)
    assert missing.returncode != 0 and "initial password" in missing.stderr


def test_official_chart_keys_reach_the_master_and_the_pods(helm, tmp_path):
    chart = render(tmp_path, "gpu-cluster", "db.sslMode=verify-ca", "db.sslRootCert=ca.crt",
                   "db.resourceType=configMap", "db.certResourceName=db-ca", "openshiftRoute.enabled=true",
                   "openshiftRoute.termination=edge", "fluent.image=fluent/fluent-bit:1.9", "slotType=cuda",
                   "db.disablePVC=true", "tlsSecret=det-tls", "useNodePortForMaster=true")
    objs = objects(helm, chart, tmp_path)
    config = master_config(objs)
    assert config["db"]["ssl_mode"] == "verify-ca"
    assert config["db"]["ssl_root_cert"] == "/mount/determined/secrets/ca.crt"
    assert config["resource_manager"]["fluent"] == {"image": "fluent/fluent-bit:1.9"}
    assert config["resource_manager"]["slot_type"] == "cuda"
    route = objs[("Route", "determined-master-route-demo")]
    assert route["spec"]["tls"] == {"termination": "edge"}
    assert route["spec"]["to"]["name"] == "determined-master-service-demo"
    assert ("PersistentVolumeClaim", "determined-db-pvc-demo") not in objs
    pod = objs[("Deployment", "determined-master-deployment-demo")]["spec"]["template"]["spec"]
    (secrets,) = [v for v in pod["volumes"] if v["name"] == "determined-secrets"]
    assert secrets["projected"]["sources"] == [{"secret": {"name": "det-tls"}}, {"configMap": {"name": "db-ca"}}]
    for doc in objs.values():
        if doc["kind"] != "Route":  # an OpenShift kind: not in the Kubernetes schema
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


@pytest.mark.parametrize(("version", "setting", "scheduler"), [
    ("0.17.15", "preemption", "coscheduler"), ("0.17.15", "coscheduler", "coscheduler"),
    ("0.26.2", "preemption", "preemption"), ("0.26.2", " coscheduler ", "coscheduler"),
    ("0.38.1", "coscheduler", "coscheduler")])
def test_default_scheduler_as_the_official_chart_writes_it_and_det_k8s_serves_it_by_default(helm, tmp_path, version,
                                                                                    setting, scheduler):
    objs = objects(helm, render(tmp_path, "gpu-cluster", version=version), tmp_path,
                   "--set-string", f"defaultScheduler={setting}")
    config = assembled_master_config(objs) if version < "0.26.2" else master_config(objs)
    assert config["resource_manager"]["default_scheduler"] == scheduler
    assert not [k for k in objs if k[1].startswith(f"{scheduler}-demo")]  # no plugin by default: det-k8s's own
    args = objs[("Deployment", "det-k8s-scheduler-demo")]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[4:] == ["--scheduler-name", scheduler, "--health-port", "8081",
                        *(["--preemption"] if scheduler == "preemption" else [])]
    plugin = objects(helm, render(tmp_path, "gpu-cluster", version=version), tmp_path,
                     "--set-string", f"defaultScheduler={setting}", "--set", "gangScheduler=plugin")
    deployment = plugin[("Deployment", f"{scheduler}-demo")]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert f"--scheduler-name={scheduler}" in container["command"]
    assert "determined-system" not in deployment["spec"]["template"]["metadata"]["labels"]
    profile = yaml.safe_load(plugin[("ConfigMap", f"{scheduler}-demo-config")]["data"]["config.yaml"])
    assert profile["profiles"][0]["schedulerName"] == scheduler


def scheduler_objects(objs: dict[tuple[str, str], dict]) -> dict[tuple[str, str], dict]:
    return {key: obj for key, obj in objs.items()
            if (obj["metadata"].get("labels") or {}).get("app.kubernetes.io/name") == "det-k8s-scheduler"}


@pytest.mark.parametrize("version", RELEASES)
def test_one_install_deploys_det_k8s_scheduler_as_scheduler_manifest_does(helm, tmp_path, version):
    """gangScheduler: det-k8s (the default): the scheduler's ServiceAccount, RBAC, Lease Role and Deployment,
    the very objects `det-k8s scheduler manifest` prints, named and labelled for the release."""
    from det_k8s.chart.deploy import scheduler_manifests

    chart = render(tmp_path, "gpu-cluster", version=version)
    found = scheduler_objects(objects(helm, chart, tmp_path))
    expected = scheduler_manifests("registry.example.com/det-k8s:0.1.0", "det", name="det-k8s-scheduler-demo",
                                   cluster_name="det-k8s-scheduler-det-demo", instance="demo",
                                   scheduler_name="coscheduler")
    assert found == {(doc["kind"], doc["metadata"]["name"]): doc for doc in expected}
    lease_role = found[("Role", "det-k8s-scheduler-det-demo-lease")]
    assert lease_role["metadata"]["namespace"] == "default"
    assert lease_role["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                    "verbs": ["get", "create", "update"]}]
    for doc in found.values():
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_the_scheduler_settings_reach_its_deployment(helm, tmp_path):
    chart = render(tmp_path, "gpu-cluster", "defaultScheduler=preemption", "appVersion=0.30.0",
                   "detK8sScheduler.image=registry.example.com/det-k8s:0.1", "detK8sScheduler.replicas=3",
                   "detK8sScheduler.leaseNamespace=det-system", "detK8sScheduler.imagePullSecretName=regcred",
                   "initialUserPassword=null")
    objs = scheduler_objects(objects(helm, chart, tmp_path))
    deployment = objs[("Deployment", "det-k8s-scheduler-demo")]
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["image"] == "registry.example.com/det-k8s:0.1" and deployment["spec"]["replicas"] == 3
    assert container["args"] == ["scheduler", "run", "--namespace", "det", "--scheduler-name", "preemption",
                                 "--health-port", "8081", "--preemption"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert container["ports"] == [{"name": "health", "containerPort": 8081, "protocol": "TCP"}]
    assert {"name": "DET_K8S_LEASE_NAMESPACE", "value": "det-system"} in container["env"]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert objs[("Role", "det-k8s-scheduler-det-demo-lease")]["metadata"]["namespace"] == "det-system"


@pytest.mark.parametrize("setting", ["detK8sScheduler.enabled=false", "gangScheduler=plugin"])
def test_the_scheduler_can_be_left_out(helm, tmp_path, setting):
    chart = render(tmp_path, "gpu-cluster", setting, "defaultScheduler=coscheduler")
    objs = objects(helm, chart, tmp_path)
    assert scheduler_objects(objs) == {}
    if setting.startswith("gangScheduler"):
        assert ("Deployment", "coscheduler-demo") in objs  # the plugin instead, never both


@pytest.mark.parametrize("version", RELEASES)
def test_by_default_the_masters_task_pods_go_to_the_scheduler_the_chart_deploys(helm, tmp_path, version):
    """No defaultScheduler in the settings (gpu-cluster.yaml names none): with gangScheduler det-k8s, the default,
    it is coscheduler, so the master names the scheduler the chart's Deployment serves (issue 37: it was empty, and
    kube-scheduler placed a trial's pods one by one while the deployed scheduler had nothing to do)."""
    assert "defaultScheduler" not in example("gpu-cluster.yaml").read_text()
    objs = objects(helm, render(tmp_path, "gpu-cluster", version=version), tmp_path)
    config = assembled_master_config(objs) if version < "0.26.2" else master_config(objs)
    assert config["resource_manager"]["default_scheduler"] == "coscheduler"
    (container,) = objs[("Deployment", "det-k8s-scheduler-demo")]["spec"]["template"]["spec"]["containers"]
    assert container["args"][container["args"].index("--scheduler-name") + 1] == "coscheduler"
    assert "--preemption" not in container["args"]
    assert not [k for k in objs if k[1].startswith("coscheduler-demo")]  # det-k8s's scheduler, not the plugin


@pytest.mark.parametrize("setting", ["detK8sScheduler.enabled=false", "gangScheduler=plugin"])
def test_without_det_k8s_scheduler_in_the_chart_the_master_keeps_kubernetes_default_scheduler(helm, tmp_path,
                                                                                               setting):
    objs = objects(helm, render(tmp_path, "gpu-cluster", setting), tmp_path)
    assert "default_scheduler" not in master_config(objs)["resource_manager"]
    assert scheduler_objects(objs) == {}
    assert not [k for k in objs if k[1].startswith("coscheduler-demo")]  # nor the plugin, with nothing to serve


def test_an_empty_default_scheduler_is_the_users_word(helm, tmp_path):
    """defaultScheduler: "" set by the user stays empty (validate explains that the deployed scheduler then binds
    none of the master's pods: tests/unit/settings/test_rules.py)."""
    objs = objects(helm, render(tmp_path, "gpu-cluster", "defaultScheduler="), tmp_path)
    assert "default_scheduler" not in master_config(objs)["resource_manager"]
    assert ("Deployment", "det-k8s-scheduler-demo") in objs


def test_the_scheduler_runs_the_image_the_settings_name_else_the_placeholder(helm, tmp_path):
    from det_k8s import __version__
    from det_k8s.settings.schema import DEFAULT_SCHEDULER_IMAGE

    def image(*sets: str) -> str:
        objs = objects(helm, render(tmp_path, "gpu-cluster", *sets), tmp_path)
        (container,) = objs[("Deployment", "det-k8s-scheduler-demo")]["spec"]["template"]["spec"]["containers"]
        return str(container["image"])

    assert image() == "registry.example.com/det-k8s:0.1.0"  # examples/gpu-cluster.yaml's
    assert image("detK8sScheduler.image=null") == DEFAULT_SCHEDULER_IMAGE == f"det-k8s:{__version__}"
