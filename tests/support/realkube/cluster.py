"""A real Kubernetes control plane on 127.0.0.1, envtest-style, with the real scheduler and controllers beside it.

    etcd  ->  kube-apiserver (client certificates and tokens, Node,RBAC, a managed cluster's admission plugins,
              service account issuer and keys)  ->  kube-controller-manager (each controller as its own service
              account), kube-scheduler, kwok (fake kubelets: nodes Ready, pods Running, Jobs' pods completing)

Every component is a child process in its own process group, on free loopback ports, with its state in one
temporary directory; `stop()` ends each by PID (SIGTERM, then SIGKILL) and removes the directory. Start-up talks:
one line per component, and what a component printed is shown when it fails to become ready.

Kubeconfigs: `admin` (system:masters, a client certificate), and `service_account_kubeconfig(ns, name)` writes one
for a ServiceAccount (a token from the TokenRequest API), so a test runs det-k8s with exactly the RBAC it ships.
Nodes are kwok's when annotated `kwok.x-k8s.io/node: fake` (`fake_node()` builds one).
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.realkube.components import STAGES_FILE, Binaries, say

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
SERVICE_CIDR = "10.96.0.0/16"  # addresses allocated to Services inside the API server: never routed, never dialled

# The admission plugins a managed cluster enables (GKE/EKS/AKS all run these), on top of the defaults.
ADMISSION = ("NamespaceLifecycle,LimitRanger,ServiceAccount,TaintNodesByCondition,PodSecurity,Priority,"
             "DefaultTolerationSeconds,DefaultStorageClass,StorageObjectInUseProtection,PersistentVolumeClaimResize,"
             "RuntimeClass,CertificateApproval,CertificateSigning,ClusterTrustBundleAttest,CertificateSubjectRestriction,"
             "DefaultIngressClass,MutatingAdmissionPolicy,MutatingAdmissionWebhook,ValidatingAdmissionPolicy,"
             "ValidatingAdmissionWebhook,ResourceQuota,NodeRestriction")


def admission_plugins(kube_version: str) -> str:
    """ADMISSION, less the plugins the release does not have (MutatingAdmissionPolicy came with 1.32)."""
    minor = int(kube_version.split(".")[1])
    return ",".join(p for p in ADMISSION.split(",") if not (p == "MutatingAdmissionPolicy" and minor < 32))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- PKI --------------------------------------------------------------------------------------


@dataclass
class Pki:
    directory: Path
    ca_cert: Path = field(init=False)
    ca_key: Any = field(init=False, repr=False)
    ca: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self.directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "det-k8s-test-ca")])
        now = datetime.datetime.now(datetime.UTC)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
                .not_valid_after(now + datetime.timedelta(days=7))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False, data_encipherment=False,
                                             key_agreement=False, encipher_only=False, decipher_only=False),
                               critical=True)
                .sign(key, hashes.SHA256()))
        self.ca, self.ca_key = cert, key
        self.ca_cert = self.directory / "ca.crt"
        self.ca_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self._write_key(self.directory / "ca.key", key)

    @staticmethod
    def _write_key(path: Path, key: Any) -> None:
        from cryptography.hazmat.primitives import serialization

        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
        path.chmod(0o600)

    def issue(self, name: str, common_name: str, *, organizations: Sequence[str] = (), server: bool = False
              ) -> tuple[Path, Path]:
        """A certificate signed by the CA: a client's (CN = user, O = groups) or the API server's (127.0.0.1)."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        now = datetime.datetime.now(datetime.UTC)
        builder = (x509.CertificateBuilder().subject_name(x509.Name(attrs)).issuer_name(self.ca.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=7))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(
                       [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.DNSName("kubernetes"), x509.DNSName("kubernetes.default.svc"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(ipaddress.ip_address("10.96.0.1"))]),
                critical=False)
        cert = builder.sign(self.ca_key, hashes.SHA256())
        crt, keyfile = self.directory / f"{name}.crt", self.directory / f"{name}.key"
        crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self._write_key(keyfile, key)
        return crt, keyfile

    def service_account_keys(self) -> tuple[Path, Path]:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        private, public = self.directory / "sa.key", self.directory / "sa.pub"
        self._write_key(private, key)
        public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                         serialization.PublicFormat.SubjectPublicKeyInfo))
        return private, public


def write_kubeconfig(path: Path, server: str, ca: Path, *, cert: Path | None = None, key: Path | None = None,
                     token: str | None = None, namespace: str = "default", context: str = "real") -> Path:
    user: dict[str, str] = {}
    if cert is not None and key is not None:
        user = {"client-certificate": str(cert), "client-key": str(key)}
    if token is not None:
        user = {"token": token}
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": context, "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": context, "user": user}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context, "namespace": namespace}}],
    }
    path.write_text(json.dumps(config, indent=1) + "\n")
    path.chmod(0o600)
    return path


# -- processes --------------------------------------------------------------------------------


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace: float = 10.0) -> None:
        if self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


class ControlPlaneError(RuntimeError):
    pass


@dataclass
class Options:
    """What a test needs of the control plane beyond the defaults: feature gates and API groups (DRA, PodGroup)."""

    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    runtime_config: Sequence[str] = ()
    scheduler: bool = True
    controller_manager: bool = True
    kwok: bool = True
    compaction_interval: str = "5m"  # the API server's default
    apiserver_args: Sequence[str] = ()  # e.g. --watch-cache=false, so a watch from a compacted version gets 410 Gone
    controller_manager_args: Sequence[str] = ()  # after the defaults, so a flag given here wins (e.g. a longer grace)
    kwok_args: Sequence[str] = ()  # e.g. --node-lease-duration-seconds, or `-c FILE` for more Stages/configuration
    kwok_stages: Path | None = None  # a Stages file instead of the cached default (e.g. slower node heartbeats)
    # kwok serves every container's log (this ClusterLogs file) on 127.0.0.1, as the nodes' kubelet API: the Determined
    # master follows its pods' logs, and the API server dials the nodes' InternalIP (127.0.0.1) for them
    kwok_logs: Path | None = None


class ControlPlane:
    def __init__(self, binaries: Binaries, options: Options | None = None, workdir: Path | None = None) -> None:
        self.binaries = binaries
        self.options = options or Options()
        self._own_dir = workdir is None
        self.dir = workdir or Path(tempfile.mkdtemp(prefix="det-k8s-real-"))
        self.children: list[Child] = []
        self.pki = Pki(self.dir / "pki")
        self.port = 0
        self.server = ""
        self.admin_kubeconfig = self.dir / "admin.kubeconfig"
        self.admin_token = base64.urlsafe_b64encode(os.urandom(24)).decode().rstrip("=")
        self.kwok_port = 0  # kwok's server: with Options.kwok_logs, the nodes' kubelet API

    # -- start/stop --

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        t0 = time.monotonic()
        try:
            self._start_etcd()
            self._start_apiserver()
            self._wait_ready()
            if self.options.controller_manager:
                self._start_controller_manager()
            if self.options.scheduler:
                self._start_scheduler()
            if self.options.kwok:
                self._start_kwok()
            self._wait_default_service_account()
        except BaseException:
            self.stop()
            raise
        say(f"real control plane (Kubernetes {self.binaries.kube_version}) ready at {self.server} in "
            f"{time.monotonic() - t0:.1f} s")
        return self

    def stop(self) -> None:
        for child in reversed(self.children):
            child.stop()
        self.children.clear()
        if self._own_dir and os.environ.get("DET_K8S_KEEP_CLUSTER_DIR") is None:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _spawn(self, name: str, argv: list[str], env: Mapping[str, str] | None = None) -> Child:
        log = self.dir / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, env=dict(env) if env is not None else None, cwd=self.dir)
        child = Child(name, proc, log)
        self.children.append(child)
        return child

    def _check_alive(self) -> None:
        for child in self.children:
            if child.proc.poll() is not None:
                raise ControlPlaneError(f"{child.name} exited {child.proc.returncode}:\n{child.tail()}")

    def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        say(f"  starting etcd {self.binaries.etcd_version} on 127.0.0.1:{client}")
        self._spawn("etcd", [
            str(self.binaries.etcd), "--data-dir", str(self.dir / "etcd"), "--name", "det-k8s-test",
            "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
            "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls",
            f"http://127.0.0.1:{peer}", "--initial-cluster", f"det-k8s-test=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync", "--quota-backend-bytes", str(4 * 2**30), "--log-level", "warn"])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                with urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2) as resp:
                    if b"true" in resp.read():
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise ControlPlaneError(f"etcd not healthy within 30 s:\n{self.children[-1].tail()}")

    def _start_apiserver(self) -> None:
        self.port = free_port()
        self.server = f"https://127.0.0.1:{self.port}"
        serving_crt, serving_key = self.pki.issue("apiserver", "kube-apiserver", server=True)
        self.sa_key, self.sa_pub = self.pki.service_account_keys()
        admin_crt, admin_key = self.pki.issue("admin", "det-k8s-admin", organizations=["system:masters"])
        write_kubeconfig(self.admin_kubeconfig, self.server, self.pki.ca_cert, cert=admin_crt, key=admin_key)
        tokens = self.dir / "pki" / "tokens.csv"
        tokens.write_text(f"{self.admin_token},det-k8s-token-admin,1001,\"system:masters\"\n")
        tokens.chmod(0o600)
        # An audit log of every request a ServiceAccount outside kube-system makes (the controllers' are left out),
        # so a test can prove that RBAC det-k8s ships refused nothing (`forbidden()`).
        self.audit_log = self.dir / "audit.log"
        policy = self.dir / "audit-policy.yaml"
        policy.write_text(json.dumps({
            "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
            "rules": [{"level": "None", "userGroups": ["system:serviceaccounts:kube-system"]},
                      {"level": "Metadata", "userGroups": ["system:serviceaccounts"]},
                      {"level": "None"}]}))
        gates = ",".join(f"{k}={'true' if v else 'false'}" for k, v in self.options.feature_gates.items())
        argv = [
            str(self.binaries.kube_apiserver),
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.port}",
            f"--etcd-servers={self.etcd_url}",
            f"--tls-cert-file={serving_crt}", f"--tls-private-key-file={serving_key}",
            f"--client-ca-file={self.pki.ca_cert}", f"--token-auth-file={tokens}",
            "--authorization-mode=Node,RBAC", f"--enable-admission-plugins={admission_plugins(self.binaries.kube_version)}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self.sa_pub}", f"--service-account-signing-key-file={self.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--allow-privileged=true",
            f"--etcd-compaction-interval={self.options.compaction_interval}",
            "--endpoint-reconciler-type=none",  # the reconciler refuses a loopback advertise address
            f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}", "--audit-log-mode=blocking",
            "--profiling=false", "--enable-priority-and-fairness=false", "--v=1",
        ]
        argv += list(self.options.apiserver_args)
        if self.options.kwok_logs is not None:
            argv.append("--kubelet-preferred-address-types=InternalIP")
        if gates:
            argv.append(f"--feature-gates={gates}")
        if self.options.runtime_config:
            argv.append(f"--runtime-config={','.join(self.options.runtime_config)}")
        say(f"  starting kube-apiserver {self.binaries.kube_version} on 127.0.0.1:{self.port}")
        self._spawn("kube-apiserver", argv)

    def _ssl(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        return ctx

    def request(self, method: str, path: str, body: Any = None, *, token: str | None = None,
                content_type: str = "application/json", timeout: float = 30) -> tuple[int, Any]:
        """One call to the API server as the admin (or with `token`); returns (status, parsed JSON or text)."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {token or self.admin_token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self._ssl(), timeout=timeout) as resp:
                raw, status = resp.read(), resp.status
        except urllib.error.HTTPError as e:
            raw, status = e.read(), e.code
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 120
        last = ""
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                status, body = self.request("GET", "/readyz", timeout=3)
                if status == 200:
                    return
                last = str(body)[-300:]
            except OSError as e:
                last = str(e)
            time.sleep(0.3)
        raise ControlPlaneError(f"kube-apiserver not ready within 120 s ({last}):\n{self.children[-1].tail()}")

    def _component_kubeconfig(self, name: str, user: str, groups: Sequence[str] = ()) -> Path:
        crt, key = self.pki.issue(name, user, organizations=groups)
        return write_kubeconfig(self.dir / f"{name}.kubeconfig", self.server, self.pki.ca_cert, cert=crt, key=key)

    def _start_controller_manager(self) -> None:
        kubeconfig = self._component_kubeconfig("kube-controller-manager", "system:kube-controller-manager")
        say(f"  starting kube-controller-manager {self.binaries.kube_version}")
        self._spawn("kube-controller-manager", [
            str(self.binaries.kube_controller_manager), f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={free_port()}", "--leader-elect=false",
            "--use-service-account-credentials=true", f"--service-account-private-key-file={self.sa_key}",
            f"--root-ca-file={self.pki.ca_cert}", f"--cluster-signing-cert-file={self.pki.ca_cert}",
            f"--cluster-signing-key-file={self.pki.directory / 'ca.key'}",
            # kwok renews node heartbeats every ~20 s; on a loaded 2-core machine that can lag past the default 40 s grace,
            # and a node marked NotReady marks its pods NotReady (a Deployment then has 0 available)
            "--node-monitor-grace-period=300s", "--concurrent-gc-syncs=5", "--v=1", *self._gates(),
            *self.options.controller_manager_args])

    def _start_scheduler(self, extra_args: Sequence[str] = ()) -> Child:
        kubeconfig = self._component_kubeconfig("kube-scheduler", "system:kube-scheduler")
        say(f"  starting kube-scheduler {self.binaries.kube_version}")
        return self._spawn("kube-scheduler", [
            str(self.binaries.kube_scheduler), f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}", f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={free_port()}", "--leader-elect=false", "--v=1", *self._gates(),
            *extra_args])

    def _gates(self) -> list[str]:
        """The feature gates for kube-scheduler and kube-controller-manager too (GenericWorkload: the gang plugin and
        the PodGroup protection controller)."""
        gates = ",".join(f"{k}={'true' if v else 'false'}" for k, v in self.options.feature_gates.items())
        return [f"--feature-gates={gates}"] if gates else []

    def _start_kwok(self) -> None:
        # kwok acts as every fake node's kubelet; it needs to read and write nodes, pods and leases everywhere.
        kubeconfig = self._component_kubeconfig("kwok", "kwok-controller", ["system:masters"])
        say(f"  starting kwok {self.binaries.kwok_version} (fake kubelets for nodes annotated {KWOK_ANNOTATION})")
        for attempt in range(5):
            port = free_port()  # picked now, and again if another process took it meanwhile
            where = ["--node-ip=10.244.0.1"]
            if self.options.kwok_logs is not None:
                where = ["--node-ip=127.0.0.1", f"--node-port={port}", "-c", str(self.options.kwok_logs)]
            child = self._spawn("kwok", [
                str(self.binaries.kwok), f"--kubeconfig={kubeconfig}",
                "-c", str(self.options.kwok_stages or self.binaries.kwok.parent / STAGES_FILE),
                f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake", "--cidr=10.244.0.0/16",
                *where, f"--server-address=127.0.0.1:{port}", *self.options.kwok_args])
            if not self._taken(child, port) or attempt == 4:
                self.kwok_port = port
                return
            self.children.remove(child)

    @staticmethod
    def _taken(child: Child, port: int, within: float = 3.0) -> bool:
        """Whether the child exited at once because its port was taken (a free port is only free when picked)."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if child.proc.poll() is not None:
                return "address already in use" in child.tail(50)
            time.sleep(0.1)
        return False

    def _wait_default_service_account(self) -> None:
        if not self.options.controller_manager:
            return
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self._check_alive()
            status, _ = self.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")
            if status == 200:
                return
            time.sleep(0.3)
        raise ControlPlaneError("the default ServiceAccount was not created within 60 s "
                                "(kube-controller-manager):\n" + self.children[-1].tail())

    # -- helpers for tests --

    def start_scheduler(self, extra_args: Sequence[str] = ()) -> Child:
        """Start kube-scheduler (default profile) now, on a plane started without it (`Options(scheduler=False)`),
        with `extra_args` after the plane's own (e.g. `--kube-api-qps=1000`)."""
        return self._start_scheduler(extra_args)

    def spawn(self, name: str, argv: list[str], env: Mapping[str, str] | None = None) -> Child:
        """Start a process beside the control plane (its log in the plane's directory); `stop()` stops it too."""
        return self._spawn(name, argv, env)

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create `obj` as the admin (server-side apply, so calling it twice is fine); returns what the server has."""
        path = object_path(obj)
        status, body = self.request("PATCH", path + "?fieldManager=det-k8s-tests&force=true", obj,
                                    content_type="application/apply-patch+yaml")
        if status >= 300:
            raise ControlPlaneError(f"apply {path}: {status} {body}")
        return body  # type: ignore[no-any-return]

    def service_account_kubeconfig(self, namespace: str, name: str, path: Path, *, seconds: int = 24 * 3600) -> Path:
        """A kubeconfig authenticating as ServiceAccount namespace/name (a bound token from the TokenRequest API)."""
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        self.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}})
        status, body = self.request(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
             "spec": {"expirationSeconds": seconds}})
        if status >= 300:
            raise ControlPlaneError(f"token for {namespace}/{name}: {status} {body}")
        return write_kubeconfig(path, self.server, self.pki.ca_cert, token=body["status"]["token"],
                                namespace=namespace, context=f"sa-{name}")

    def compact_etcd(self) -> int:
        """Compact etcd at its current revision (what the API server does every 5 minutes); returns the revision.
        A watch started afterwards from an older resourceVersion is answered 410 Gone (with the watch cache off)."""
        def post(path: str, body: dict[str, Any]) -> Any:
            req = urllib.request.Request(self.etcd_url + path, data=json.dumps(body).encode(), method="POST")
            with urllib.request.urlopen(req, timeout=10) as resp:
                return json.loads(resp.read())
        revision = int(post("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"])
        post("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    def audit(self, user: str) -> list[dict[str, Any]]:
        """The audit events of requests `user` made (a ServiceAccount: system:serviceaccount:NS:NAME)."""
        if not self.audit_log.exists():
            return []
        events = []
        for line in self.audit_log.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if (event.get("user") or {}).get("username") == user and event.get("stage") == "ResponseComplete":
                    events.append(event)
        return events

    def forbidden(self, user: str) -> list[str]:
        """Every request of `user` that was refused 403, as 'VERB URI'."""
        # (a namespace being deleted answers 403 too: admission's, not RBAC's, so not counted)
        return [f"{e['verb']} {e['requestURI']}" for e in self.audit(user)
                if (e.get("responseStatus") or {}).get("code") == 403
                and "being terminated" not in str((e.get("responseStatus") or {}).get("message", ""))]

    def wait_for(self, what: str, check: Any, timeout: float = 60, interval: float = 0.2) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(interval)

    def logs(self) -> Iterator[tuple[str, str]]:
        for child in self.children:
            yield child.name, child.tail(200)


# Where each kind lives in the API (the few the tests apply directly).
_PATHS = {
    ("v1", "Namespace"): "/api/v1/namespaces", ("v1", "Node"): "/api/v1/nodes",
    ("v1", "PersistentVolume"): "/api/v1/persistentvolumes",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    ("storage.k8s.io/v1", "StorageClass"): "/apis/storage.k8s.io/v1/storageclasses",
    ("scheduling.k8s.io/v1", "PriorityClass"): "/apis/scheduling.k8s.io/v1/priorityclasses",
}


def object_path(obj: Mapping[str, Any]) -> str:
    api, kind = obj["apiVersion"], obj["kind"]
    name = obj["metadata"]["name"]
    if (api, kind) in _PATHS:
        return f"{_PATHS[api, kind]}/{name}"
    ns = obj["metadata"].get("namespace", "default")
    plural = kind.lower() + ("es" if kind.endswith("s") else "s")
    prefix = "/api/v1" if api == "v1" else f"/apis/{api}"
    return f"{prefix}/namespaces/{ns}/{plural}/{name}"


# What kwok's node-initialize Stage writes (kwok's NodeConditions, phase Running, its --node-ip), written by the test
# when it creates the node instead: see `ready_status`.
NODE_CONDITIONS = (("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
                   ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                   ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                   ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                   ("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route"))


def ready_status(name: str, status: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`status` as kwok's node-initialize Stage leaves it: kwok's conditions (Ready) with a heartbeat of now, phase
    Running and addresses, for a node created with them (a `status` whose Ready is not True is left to kwok).

    kwok renews the heartbeat only of a node in phase Running and Ready (its node-heartbeat Stage), and initialises
    only one not Ready: a node created Ready without a phase (`tests.support.k8s_emulator.node()`) was never touched by kwok,
    its heartbeat never renewed. kube-controller-manager's node lifecycle controller (a look every 5 s) never sees a
    node deleted and made again under the same name within one look (one test's cleaning, the next test's nodes), so
    it judged each new gpu-0 by the probe time of the first, which a heartbeat that never changes never moved: once
    the tests using that name had run for its grace (300 s here), the node was Unknown at its first look, tainted
    node.kubernetes.io/unreachable, and "all Nodes are not-Ready. Entering master disruption mode" (reproduced: such
    nodes remade every 3 s were tainted at 355 s; created by this function, none in 400 s). A node created without a
    Ready condition meets the same at kwok's first Stage against the 60 s start-up grace. A heartbeat of now that
    kwok renews moves the probe time at every look."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = dict(status or {})
    ready = next((c.get("status") for c in out.get("conditions") or () if c.get("type") == "Ready"), "True")
    if ready != "True":
        return out
    out["conditions"] = [{"type": t, "status": v, "reason": r, "message": m, "lastHeartbeatTime": now,
                          "lastTransitionTime": now} for t, v, r, m in NODE_CONDITIONS]
    out["phase"] = "Running"
    out.setdefault("addresses", [{"type": "InternalIP", "address": "10.244.0.1"}, {"type": "Hostname", "address": name}])
    return out


def fake_node(name: str, *, gpus: int = 0, cpu: str = "8", memory: str = "32Gi", pods: int = 110,
              labels: Mapping[str, str] | None = None, taints: Sequence[Mapping[str, str]] = (),
              gpu_resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    """A Node kwok keeps Ready (its annotation), with the capacity a test gives it."""
    capacity = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if gpus:
        capacity[gpu_resource] = str(gpus)
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "annotations": {KWOK_ANNOTATION: "fake"},
                     "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                "kubernetes.io/arch": "amd64", "type": "kwok", **(labels or {})}},
        "spec": {"taints": [dict(t) for t in taints]} if taints else {},
        "status": ready_status(name, {"capacity": capacity, "allocatable": capacity}),
    }


def main(argv: Sequence[str]) -> int:
    """`python -m tests.support.realkube.cluster up`: start one, print its kubeconfig, wait for Ctrl-C."""
    from tests.support.realkube.components import BuildError, build_all

    if not argv or argv[0] not in ("up", "build"):
        print("usage: python -m tests.support.realkube.cluster build|up [--nodes N]", file=sys.stderr)
        return 2
    try:
        binaries = build_all()
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if argv[0] == "build":
        return 0
    nodes = int(argv[argv.index("--nodes") + 1]) if "--nodes" in argv else 4
    with ControlPlane(binaries) as cp:
        for i in range(nodes):
            cp.apply(fake_node(f"gpu-{i}", gpus=4))
        say(f"{nodes} kwok nodes of 4 GPUs each; KUBECONFIG={cp.admin_kubeconfig} (Ctrl-C stops everything)")
        print(cp.admin_kubeconfig, flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            say("stopping")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
