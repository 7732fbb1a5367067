"""One voice for errors (the newcomer's reproductions): no kubeconfig, a dead or odd server, helm or kubectl
failing: one det-k8s line naming the context and what to do; the tools' raw stderr only with -v."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import write_kubeconfig

KLOG = ("E0312 10:00:00.123456   12345 memcache.go:265] couldn't get current server API group list: Get "
        '"https://10.0.0.9:6443/api?timeout=32s": dial tcp 10.0.0.9:6443: connect: connection refused\n')
KUBECTL_UNREACHABLE = KLOG * 2 + ("The connection to the server 10.0.0.9:6443 was refused - did you specify the right "
                                  "host or port?\n")


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.fixture
def no_kubeconfig(isolated_home):
    return isolated_home


def test_list_without_a_kubeconfig_is_the_same_line_as_every_command(run_cli, no_kubeconfig, fake_helm):
    listed = run_cli("list")
    status = run_cli("status", "demo")
    assert listed.code == status.code == 1
    assert error_lines(listed.err) == error_lines(status.err)
    (line,) = error_lines(listed.err)
    assert line.startswith("error: no kubeconfig found (") and "pass --kubeconfig PATH or set KUBECONFIG" in line
    assert fake_helm.all_calls == []


@pytest.mark.parametrize("args", [["label", "gpu-0"], ["unlabel", "gpu-0"], ["taint", "gpu-0", "a=b:NoSchedule"]])
def test_node_commands_without_a_kubeconfig_never_run_kubectl(run_cli, no_kubeconfig, fake_kubectl, args):
    result = run_cli("nodes", *args)
    assert result.code == 1 and error_lines(result.err)[0].startswith("error: no kubeconfig found (")
    assert fake_kubectl.all_calls == []


def test_kubectl_unreachable_is_one_line_naming_the_context(run_cli, kubeconfig, fake_kubectl):
    fake_kubectl.respond("label", stderr=KUBECTL_UNREACHABLE, rc=1)
    result = run_cli("nodes", "label", "gpu-0", "--kube-context", "prod")
    assert result.code == 1
    assert error_lines(result.err) == [
        "error: kubectl label nodes: cannot reach the Kubernetes API (context prod): 10.0.0.9:6443: connection "
        "refused; is the cluster up? check --kube-context and your kubeconfig"]
    verbose = run_cli("nodes", "label", "gpu-0", "-v")
    assert "memcache.go:265" in verbose.err and "kubectl said:" in verbose.err  # the raw stderr, only with -v
    assert verbose.err.strip().splitlines()[-1].startswith("error: kubectl label nodes: cannot reach the Kubernetes "
                                                           "API (context dev)")


def test_helm_unreachable_and_forbidden_say_the_same_as_det_k8s_does(run_cli, kubeconfig, fake_helm):
    fake_helm.respond("list", rc=1, stderr='Error: Kubernetes cluster unreachable: Get "https://10.0.0.9:6443/version":'
                                          " dial tcp 10.0.0.9:6443: i/o timeout\n")
    result = run_cli("list")
    assert error_lines(result.err) == ["error: helm list: cannot reach the Kubernetes API (context dev): "
                                       "10.0.0.9:6443: i/o timeout; is the cluster up? check --kube-context and your "
                                       "kubeconfig"]
    fake_helm.respond("list", rc=1, stderr='Error: list: failed to list: secrets is forbidden: User "bob" cannot list '
                                          'resource "secrets" in API group "" in the namespace "ml"\n')
    result = run_cli("list", "--kube-context", "prod")
    (line,) = error_lines(result.err)
    assert line.startswith("error: helm list: Error: list: failed to list: secrets is forbidden") and \
        "(context prod); ask a cluster admin for the RBAC permission" in line


def test_a_context_from_helm_kubecontext_is_named_as_such(run_cli, kubeconfig, fake_helm, monkeypatch):
    monkeypatch.setenv("HELM_KUBECONTEXT", "nope")
    result = run_cli("list")
    assert result.code == 2
    assert error_lines(result.err)[0].startswith("error: HELM_KUBECONTEXT nope: no such context in ")
    assert "--kube-context nope" not in result.err and fake_helm.all_calls == []


class _Odd(http.server.BaseHTTPRequestHandler):
    body = b"<html>not found</html>"
    status = 404

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(self.status)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def odd_server(tmp_path, monkeypatch):
    """A web server that is not a Kubernetes API server, and a kubeconfig pointing at it."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Odd)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    kubeconfig = write_kubeconfig(tmp_path / "odd", url, "odd")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    yield url
    server.shutdown()


@pytest.mark.parametrize("args", [["status", "demo"], ["pods", "list"], ["nodes", "list"], ["experiment", "list"]])
def test_an_odd_server_is_named_as_not_kubernetes_whatever_the_command(run_cli, odd_server, args):
    result = run_cli(*args)
    assert result.code == 1
    assert error_lines(result.err) == [
        f"error: the server at {odd_server} (context odd) answered 404 for /version: it does not look like a "
        "Kubernetes API server; check the cluster's server address in your kubeconfig"]


def test_an_odd_server_answering_html_is_not_an_internal_error(run_cli, odd_server, monkeypatch):
    monkeypatch.setattr(_Odd, "status", 200)
    result = run_cli("pods", "list")
    assert result.code == 1
    (line,) = error_lines(result.err)
    assert line.startswith(f"error: server version: the server at {odd_server} (context odd) answered something that "
                           "is not JSON") and "internal error" not in line


def _self_signed(directory: Path) -> tuple[Path, Path]:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "odd")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    cert_file, key_file = directory / "tls.crt", directory / "tls.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def test_insecure_skip_tls_verify_is_one_det_k8s_warning_not_urllib3s(tmp_path, cluster):
    import ssl

    from tests.support.k8s_emulator import node

    cluster.api.put(node("gpu-0", gpus=4))
    # A TLS front for the emulator: a tiny proxy would be more code than this; run the emulator's own app over TLS.
    cert, key = _self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    port = _tls_forwarder(cluster.url, context)
    kubeconfig = write_kubeconfig(tmp_path / "insecure", f"https://127.0.0.1:{port}", "lab", insecure=True)
    result = subprocess.run([sys.executable, "-m", "det_k8s", "nodes", "list", "--kubeconfig", str(kubeconfig)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "gpu-0" in result.stdout
    assert "InsecureRequestWarning" not in result.stderr and "warnings.warn" not in result.stderr
    assert error_lines(result.stderr) == [
        f"warning: context lab skips TLS verification (insecure-skip-tls-verify): the identity of "
        f"https://127.0.0.1:{port} is not checked"]


@pytest.mark.parametrize("authority", ["empty file", "junk data", "another CA"])
def test_a_certificate_authority_that_does_not_verify_is_named_not_the_cluster_being_down(tmp_path, cluster, run_cli,
                                                                                        authority):
    import base64
    import ssl

    cert, key = _self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    port = _tls_forwarder(cluster.url, context)
    (tmp_path / "other").mkdir()
    if authority == "empty file":
        (tmp_path / "empty.crt").write_text("")
        field = f"certificate-authority: {tmp_path / 'empty.crt'}"
    elif authority == "junk data":
        field = f"certificate-authority-data: {base64.b64encode(b'not a certificate').decode()}"
    else:
        field = f"certificate-authority: {_self_signed(tmp_path / 'other')[0]}"
    kubeconfig = tmp_path / "kubeconfig-ca"
    kubeconfig.write_text(f"""apiVersion: v1
kind: Config
current-context: lab
clusters: [{{name: lab, cluster: {{server: "https://127.0.0.1:{port}", {field}}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: lab, context: {{cluster: lab, user: u}}}}]
""")
    result = run_cli("nodes", "list", "--kubeconfig", kubeconfig)
    assert result.code == 1
    reason = ("self-signed certificate" if authority == "another CA" else
              "the certificate authority holds no certificate (an empty file, or data that is not PEM)")
    assert error_lines(result.err) == [
        f"error: the Kubernetes API at https://127.0.0.1:{port} (context lab): the TLS certificate was not accepted: "
        f"{reason}; check certificate-authority(-data) for this cluster in your kubeconfig"]


def _tls_forwarder(upstream: str, context) -> int:
    """HTTPS on a free port, forwarding each request to the plain-HTTP emulator."""
    import urllib.request

    class Forward(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            with urllib.request.urlopen(upstream + self.path, timeout=10) as answer:  # noqa: S310 (loopback)
                body = answer.read()
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return int(server.server_address[1])


def test_a_cluster_whose_rbac_hides_its_version_still_works(run_cli, cluster):
    from tests.support.k8s_emulator import node

    cluster.api.version_forbidden = True
    cluster.api.put(node("gpu-0", gpus=4))
    result = run_cli("nodes", "list")
    assert result.code == 0, result.err
    assert "gpu-0" in result.out


def test_install_on_a_cluster_whose_rbac_hides_its_version_skips_those_checks(run_cli, cluster, fake_helm):
    from tests.cli.test_install_upgrade import SETTINGS, ready_cluster

    ready_cluster(cluster)
    cluster.api.version_forbidden = True
    result = run_cli("install", "demo", *SETTINGS)
    assert result.code == 0, result.err
    assert "warning: Kubernetes version checks (and pod specs against its version) skipped: " in result.err
    assert [c for c in fake_helm.calls if c[0] == "install"]
