"""Shared fixtures: real helm/kubectl binaries, storage emulators (tests/support/emulators.py), the CLI in-process."""

from __future__ import annotations

import os
import shutil
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.support.k8s_emulator import RunningEmulator

from tests.support.emulators import (  # noqa: F401
    azurite,
    blackhole,
    closed_port,
    fake_gcs,
    gcs_server,
    moto_s3,
    moto_server,
    tarpit,
)
from tests.support.realkube.fixtures import control_plane, real_cluster  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / ".tools"
EXAMPLES = ROOT / "examples"


@pytest.fixture(autouse=True)
def _forget_secrets():
    """Each test starts with no registered secrets (commands run in one process share the scrubber's registry)."""
    from det_k8s.scrub_output import forget

    forget()
    yield


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    """Run `det-k8s ARGS` in this process through the real entry point; returns code, stdout, stderr."""
    from det_k8s.cli import main

    monkeypatch.delenv("HELM_NAMESPACE", raising=False)
    monkeypatch.delenv("HELM_KUBECONTEXT", raising=False)

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def _tool(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"{path} missing: run scripts/fetch_tools.py (./scripts/test does it)")
    return path


@pytest.fixture(scope="session", params=["helm3", "helm4"])
def helm(request: pytest.FixtureRequest) -> Path:
    """The real helm binary, once for helm 3.17 and once for helm 4.1."""
    return _tool(TOOLS / request.param / "helm")


@pytest.fixture(scope="session")
def helm3() -> Path:
    return _tool(TOOLS / "helm3" / "helm")


@pytest.fixture(scope="session")
def helm4() -> Path:
    return _tool(TOOLS / "helm4" / "helm")


@pytest.fixture(scope="session")
def kubectl() -> Path:
    return _tool(TOOLS / "kubectl35" / "kubectl")


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME with no kubeconfig and no helm state, so no test touches the developer's files."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KUBECONFIG", str(home / ".kube" / "config"))
    for var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
        monkeypatch.setenv(var, str(home / var.lower()))
    return home


def example(name: str) -> Path:
    return EXAMPLES / name


def which_or_none(name: str) -> str | None:
    return shutil.which(name, path=os.environ.get("PATH"))


@dataclass
class Cluster:
    """A running API emulator, a kubeconfig pointing at it, and the emulator's state."""

    running: RunningEmulator
    kubeconfig: Path

    @property
    def api(self):
        return self.running.emulator

    @property
    def url(self) -> str:
        return self.running.url

    def connect(self, namespace: str | None = None):
        from det_k8s.kube.api import KubeApi

        return KubeApi.connect(kubeconfig=str(self.kubeconfig), namespace=namespace)


def _stop_as_on_ctrl_c(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM (a timeout's kill, scripts/flakes, a cancelled CI job) ends the run as Ctrl-C does: pytest then tears its
    session fixtures down, which stop the real control plane and the master they started, instead of leaving them
    running with no parent."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _stop_as_on_ctrl_c)


def pytest_collection(session: pytest.Session) -> None:
    """Say that collection started (it imports every test module: tens of seconds with nothing else printed)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and session.config.option.verbose < 0:
        reporter.write_line("==> collecting the tests (importing every test module)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module with `ON_REAL_CLUSTER_TOO = True` runs each test that uses `cluster` twice: on the API emulator and on
    the real control plane (tests/support/realkube), but for tests marked `emulator_only` (fault injection the real API
    server cannot be made to do on demand)."""
    if "cluster" not in metafunc.fixturenames or not getattr(metafunc.module, "ON_REAL_CLUSTER_TOO", False):
        return
    backends = ["emulator"] if metafunc.definition.get_closest_marker("emulator_only") else ["emulator", "real"]
    metafunc.parametrize("cluster_backend", backends, indirect=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that runs on the real control plane carries the `real` marker, so `-m real` selects them all
    (scripts/flakes): those marked in their module, those using its fixtures, and the `real` half of the modules with
    `ON_REAL_CLUSTER_TOO`."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "control_plane" in getattr(item, "fixturenames", ()) or params.get("cluster_backend") == "real":
            item.add_marker(pytest.mark.real)


@pytest.fixture
def cluster_backend(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "emulator"))


@pytest.fixture
def cluster(cluster_backend: str, request: pytest.FixtureRequest):
    """The API emulator (tests/support/k8s_emulator.py), or in modules that also run on it, the real control plane."""
    return request.getfixturevalue("emulator_cluster" if cluster_backend == "emulator" else "real_cluster")


@pytest.fixture
def emulator_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A fresh Kubernetes API emulator on 127.0.0.1 with KUBECONFIG pointing at it."""
    from tests.support.k8s_emulator import RunningEmulator

    running = RunningEmulator().start()
    kubeconfig = running.write_kubeconfig(tmp_path / "kubeconfig")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("HELM_KUBECONTEXT", raising=False)
    monkeypatch.delenv("HELM_NAMESPACE", raising=False)
    try:
        yield Cluster(running, kubeconfig)
    finally:
        running.stop()


KUBECONFIG_TWO_CONTEXTS = """apiVersion: v1
kind: Config
current-context: dev
clusters:
- {name: dev, cluster: {server: "https://127.0.0.1:9"}}
- {name: prod, cluster: {server: "https://127.0.0.1:9"}}
users:
- {name: me, user: {token: not-used}}
contexts:
- {name: dev, context: {cluster: dev, user: me}}
- {name: prod, context: {cluster: prod, user: me, namespace: ml}}
"""


def write_kubeconfig(path: Path, server: str, context: str, *, insecure: bool = False) -> Path:
    """A kubeconfig of one context (with a token) for `server`; `insecure` sets insecure-skip-tls-verify."""
    skip = ", insecure-skip-tls-verify: true" if insecure else ""
    path.write_text(f"""apiVersion: v1
kind: Config
current-context: {context}
clusters: [{{name: {context}, cluster: {{server: "{server}"{skip}}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: {context}, context: {{cluster: {context}, user: u}}}}]
""")
    return path


@pytest.fixture
def kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A kubeconfig (contexts dev, the current one, and prod) for commands whose cluster calls all go through the
    helm/kubectl fakes: det-k8s reads it before running them, as it does for every cluster command."""
    path = tmp_path / "kubeconfig-fakes"
    path.write_text(KUBECONFIG_TWO_CONTEXTS)
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.delenv("HELM_KUBECONTEXT", raising=False)
    return path


@pytest.fixture(params=[3, 4], ids=["helm3", "helm4"])
def fake_helm(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A recording `helm` first on PATH, answering `version --short` as helm 3.17 and as helm 4.1."""
    from det_k8s.tools.locate import forget_versions
    from tests.support.tool_fakes import HELM_VERSIONS, make_fake, put_first_on_path

    fake = make_fake(tmp_path / "fake-helm", "helm", HELM_VERSIONS[request.param])
    fake.respond("list", stdout="[]\n")
    fake.major = request.param
    fake.render_with(_tool(TOOLS / f"helm{request.param}" / "helm"))  # the preflight renders the chart offline
    put_first_on_path(fake.directory, monkeypatch)
    monkeypatch.delenv("DET_K8S_HELM", raising=False)
    forget_versions()
    return fake


@pytest.fixture
def fake_kubectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A recording `kubectl` first on PATH."""
    from det_k8s.tools.locate import forget_versions
    from tests.support.tool_fakes import KUBECTL_VERSION, make_fake, put_first_on_path

    fake = make_fake(tmp_path / "fake-kubectl", "kubectl", KUBECTL_VERSION)
    put_first_on_path(fake.directory, monkeypatch)
    monkeypatch.delenv("DET_K8S_KUBECTL", raising=False)
    forget_versions()
    return fake


@pytest.fixture
def handlers():
    """det-k8s's signal handling in this process (det_k8s/stopping.py: a signal becomes `Stopped` in the main thread),
    given back afterwards."""
    from det_k8s import stopping

    restore = stopping.install()
    try:
        yield
    finally:
        restore()
        stopping.reset()


@pytest.fixture
def patient_handlers():
    """`handlers` with a grace of 600 s: a test's own second signal cuts the undo, and a failing run meets no grace's
    signal (one raised into pytest itself) while it waits."""
    from det_k8s import stopping

    restore = stopping.install(grace=600.0)
    try:
        yield
    finally:
        restore()
        stopping.reset()
