"""Manifests compared object by object, secrets as keyed hashes (release/diff.py) and values masked (values.py)."""

from __future__ import annotations

import base64
import hashlib

from det_k8s.release.diff import ADDED, CHANGED, REMOVED, diff_manifests, parse_manifests, secret_token, summary
from det_k8s.release.values import MASK, redact_values


def stream(*docs: str) -> str:
    return "".join(f"---\n# Source: determined/templates/x.yaml\n{d.strip()}\n" for d in docs)


DEPLOY = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: master, namespace: det}}
spec:
  template:
    spec:
      containers:
        - name: master
          image: determinedai/determined-master:{version}
          env: [{{name: DB_HOST, value: db}}]
"""
CONFIG = """apiVersion: v1
kind: ConfigMap
metadata: {{name: master-config}}
data:
  master.yaml: |
    db:
      host: db
      password: {password}
    checkpoint_storage:
      bucket: {bucket}
"""
SECRET_DATA = """apiVersion: v1
kind: Secret
metadata: {{name: secrets}}
data:
  db-password: {encoded}
"""
SECRET_STRING = """apiVersion: v1
kind: Secret
metadata: {{name: secrets}}
stringData:
  db-password: "{plain}"
  master.yaml: |
    db:
      password: {inner}
    checkpoint_storage:
      type: s3
      bucket: {bucket}
      secret_key: {inner}
"""


def changes(old: str, new: str, **kw):
    return diff_manifests(parse_manifests(old, "default", **kw), parse_manifests(new, "default", **kw))


def test_objects_are_matched_by_namespace_name_kind_and_group_and_changes_are_unified_diffs():
    (change,) = changes(stream(DEPLOY.format(version="0.17.15")), stream(DEPLOY.format(version="0.26.2")))
    assert change.action == CHANGED and change.title == "det, master, Deployment (apps) has changed:"
    assert "-          image: determinedai/determined-master:0.17.15" in change.lines
    assert "+          image: determinedai/determined-master:0.26.2" in change.lines
    assert change.lines[0].startswith("@@")


def test_added_and_removed_objects_and_kept_ones():
    config = CONFIG.format(password="p", bucket="b")
    kept = config.replace("metadata: {name: master-config}",
                          "metadata: {name: db-pvc, annotations: {helm.sh/resource-policy: keep}}")
    found = changes(stream(kept, DEPLOY.format(version="1")), stream(config))
    assert [(c.action, c.name) for c in found] == [(ADDED, "master-config"), (REMOVED, "master")]
    assert summary(found) == "0 changed, 1 added, 1 removed"
    assert all(line.startswith("+") for line in found[0].lines[1:])


def test_the_master_configuration_shows_line_by_line_with_its_password_hashed():
    old = stream(CONFIG.format(password="Hunter2-secret", bucket="old-bucket"))
    new = stream(CONFIG.format(password="Hunter2-secret", bucket="new-bucket"))
    (change,) = changes(old, new)
    text = "\n".join(change.lines)
    assert "-      bucket: old-bucket" in text and "+      bucket: new-bucket" in text
    assert "Hunter2-secret" not in text and "password: <secret 14 bytes, hash" in text


def test_a_secret_in_data_equals_the_same_in_string_data():
    plain = "S3cret: with colon"
    old = stream(SECRET_DATA.format(encoded=base64.b64encode(plain.encode()).decode()))
    new = stream(SECRET_STRING.format(plain=plain, bucket="b", inner="x").split("  master.yaml")[0])
    assert changes(old, new) == []


def test_secrets_show_only_as_hashes_even_a_password_that_looks_like_yaml():
    old = stream(SECRET_STRING.format(plain="a: b", bucket="b1", inner="Inner-Old-1"))
    new = stream(SECRET_STRING.format(plain="c: d", bucket="b2", inner="Inner-New-2"))
    (change,) = changes(old, new)
    text = "\n".join(change.lines)
    assert "a: b" not in text and "c: d" not in text and "Inner-" not in text
    assert "-  db-password: <secret 4 bytes, hash" in text and "+  db-password: <secret 4 bytes, hash" in text
    assert "-      bucket: b1" in text and "+      bucket: b2" in text  # master.yaml inside a Secret, masked
    assert "secret_key: <secret 11 bytes, hash" in text


def test_known_secrets_are_hashed_wherever_they_appear():
    deploy = DEPLOY.format(version="1").replace("value: db", "value: Plain-Pass-99")
    parsed = parse_manifests(stream(deploy), "default", secrets=["Plain-Pass-99"])
    (only,) = parsed.values()
    assert "Plain-Pass-99" not in only.text and "<secret 13 bytes, hash" in only.text


def test_the_hash_is_keyed_so_it_cannot_be_looked_up():
    token = secret_token("password")
    assert token == secret_token("password") != secret_token("passw0rd")
    assert hashlib.sha256(b"password").hexdigest()[:12] not in token


def test_get_values_masks_secret_keys_but_not_the_names_of_secrets():
    values = {"db": {"password": "p", "hostAddress": "postgres://u:pw@db:5432/x", "name": "determined"},
              "checkpointStorage": {"type": "s3", "accessKey": "AKIA", "secretKey": "s", "bucket": "b"},
              "imagePullSecretName": "regcred", "tlsSecret": "det-tls", "defaultPassword": "",
              "taskContainerDefaults": {"gpuPodSpec": {"spec": {"containers": [
                  {"name": "c", "env": [{"name": "HF_TOKEN", "value": "hf_x"}, {"name": "MODE", "value": "fast"}]}]}}},
              "myOwnApiToken": "t"}
    shown = redact_values(values)
    assert shown["db"]["password"] == shown["checkpointStorage"]["secretKey"] == MASK
    assert shown["checkpointStorage"]["accessKey"] == MASK and shown["myOwnApiToken"] == MASK
    assert shown["imagePullSecretName"] == "regcred" and shown["tlsSecret"] == "det-tls"
    assert shown["defaultPassword"] == ""  # nothing to hide
    assert "pw" not in shown["db"]["hostAddress"] and shown["db"]["name"] == "determined"
    env = shown["taskContainerDefaults"]["gpuPodSpec"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "HF_TOKEN", "value": MASK}, {"name": "MODE", "value": "fast"}]


def test_get_values_shows_a_pod_specs_field_names_and_masks_its_secret_env():
    # Inside a pod spec the field names are Kubernetes's: a toleration's `key` (nvidia.com/gpu) is no secret, and
    # was shown as <redacted>; an env entry named like a secret is still masked.
    spec = {"spec": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                     "containers": [{"name": "c", "env": [{"name": "DB_PASSWORD", "value": "pw"},
                                                          {"name": "x", "valueFrom": {"secretKeyRef": {
                                                              "name": "s", "key": "token"}}}]}]}}
    shown = redact_values({"taskContainerDefaults": {"gpuPodSpec": spec}})["taskContainerDefaults"]["gpuPodSpec"]
    assert shown["spec"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    env = shown["spec"]["containers"][0]["env"]
    assert env[0] == {"name": "DB_PASSWORD", "value": MASK}
    assert env[1]["valueFrom"] == {"secretKeyRef": {"name": "s", "key": "token"}}

