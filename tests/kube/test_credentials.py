"""kubeconfig exec credential plugins run by det-k8s: bounded in time, errors naming context and plugin, scrubbed."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
import yaml

from det_k8s.errors import ClusterError, OperationTimeout
from det_k8s.kube.api import KubeApi
from det_k8s.kube.credentials import run_plugin
from det_k8s.kube.kinds import NODES

TOKEN = "eyJhbGciOiJSUzI1NiJ9.PLANTED-PLUGIN-TOKEN-5521.c2lnbmF0dXJlLXBhcnQ"


def plugin(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "plugin.py"
    script.write_text(f"#!{sys.executable}\nimport json, os, sys, time\n{body}\n")
    script.chmod(0o755)
    return script


def kubeconfig(tmp_path: Path, server: str, script: Path, *, api_version: str = "client.authentication.k8s.io/v1",
               env: list | None = None) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "eks-prod",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"exec": {"apiVersion": api_version, "command": str(script),
                                                  "args": ["token", "-i", "prod"], "env": env or [],
                                                  "installHint": "install the plugin"}}}],
        "contexts": [{"name": "eks-prod", "context": {"cluster": "c", "user": "u", "namespace": "default"}}],
    }))
    return path


def credential(token: str = TOKEN, expires: str | None = None) -> str:
    status = {"token": token, **({"expirationTimestamp": expires} if expires else {})}
    return json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status})


def test_the_plugins_token_is_used_and_never_printed(cluster, tmp_path, run_cli):
    script = plugin(tmp_path, f"assert json.loads(os.environ['KUBERNETES_EXEC_INFO'])['kind'] == 'ExecCredential'\n"
                              f"print({credential()!r})")
    config = kubeconfig(tmp_path, cluster.url, script)
    api = KubeApi.connect(kubeconfig=str(config))
    api.list(NODES)
    assert cluster.api.count("GET", "nodes") == 1
    assert api._client.configuration.api_key["BearerToken"] == f"Bearer {TOKEN}"
    result = run_cli("--kubeconfig", config, "experiment", "describe", "zzzz")
    assert TOKEN not in result.out + result.err and "PLANTED" not in result.out + result.err


def test_a_failing_plugin_is_an_error_naming_context_and_plugin_with_stderr_scrubbed(cluster, tmp_path, run_cli):
    script = plugin(tmp_path, f"sys.stderr.write('error: token {TOKEN} expired; Authorization: Bearer abcdefghijkl\\n')\n"
                              "sys.exit(3)")
    config = kubeconfig(tmp_path, cluster.url, script)
    with pytest.raises(ClusterError) as info:
        KubeApi.connect(kubeconfig=str(config))
    message = info.value.message
    assert message.startswith(f"context eks-prod: the credential plugin {script} failed (exit 3): error: token ***")
    assert "PLANTED" not in message and "abcdefghijkl" not in message
    result = run_cli("--kubeconfig", config, "experiment", "list")
    assert result.code == 1 and "context eks-prod: the credential plugin" in result.err and "PLANTED" not in result.err
    assert cluster.api.calls == []  # nothing was sent without credentials


def test_a_plugin_that_never_returns_is_stopped_with_its_children(tmp_path):
    pids = tmp_path / "pids"
    script = plugin(tmp_path, "import subprocess\n"
                              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
                              f"open({str(pids)!r}, 'w').write(str(child.pid))\n"
                              "time.sleep(300)")
    exec_config = yaml.safe_load(kubeconfig(tmp_path, "http://127.0.0.1:9", script).read_text())["users"][0]["user"]
    with pytest.raises(OperationTimeout, match="context eks-prod: the credential plugin .* did not answer within 2s"):
        run_plugin(exec_config["exec"], "eks-prod", timeout=2)
    grandchild = int(pids.read_text())
    for _ in range(100):
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        with open(f"/proc/{grandchild}/stat") as handle:
            assert handle.read().split(") ", 1)[1][0] == "Z"


@pytest.mark.parametrize(("body", "expected"), [
    ("print('not json')", "printed something that is not an ExecCredential"),
    ("print(json.dumps({'kind': 'ExecCredential', 'apiVersion': 'client.authentication.k8s.io/v1', 'status': {}}))",
     "returned neither a token nor a client certificate and key"),
    ("print('[' * 5000 + ']' * 5000)", "nested more than 100 levels deep"),
])
def test_a_plugin_answering_nonsense_is_named(tmp_path, body, expected):
    script = plugin(tmp_path, body)
    exec_config = yaml.safe_load(kubeconfig(tmp_path, "http://127.0.0.1:9", script).read_text())["users"][0]["user"]
    with pytest.raises(ClusterError, match=expected):
        run_plugin(exec_config["exec"], "eks-prod")


def test_a_missing_plugin_gives_its_install_hint(tmp_path):
    exec_config = {"apiVersion": "client.authentication.k8s.io/v1", "command": str(tmp_path / "aws-missing"),
                   "installHint": "install the AWS CLI"}
    with pytest.raises(ClusterError) as info:
        run_plugin(exec_config, "eks-prod")
    assert "context eks-prod: the credential plugin" in info.value.message and info.value.hint == "install the AWS CLI"


def test_an_expired_token_is_renewed_before_a_request(cluster, tmp_path):
    count = tmp_path / "count"
    script = plugin(tmp_path, f"n = int(open({str(count)!r}).read()) + 1 if os.path.exists({str(count)!r}) else 1\n"
                              f"open({str(count)!r}, 'w').write(str(n))\n"
                              "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': "
                              "'ExecCredential', 'status': {'token': f'token-number-{n}', "
                              "'expirationTimestamp': '2000-01-01T00:00:00Z'}}))")
    api = KubeApi.connect(kubeconfig=str(kubeconfig(tmp_path, cluster.url, script)))
    api.list(NODES)
    assert api._client.configuration.api_key["BearerToken"] == "Bearer token-number-2"
