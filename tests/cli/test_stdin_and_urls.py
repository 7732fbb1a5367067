"""`-f -` and `--snapshot -` read stdin (once); `-f https://...` is fetched like helm fetches it, bounded in time and
size, or refused in one line that keeps the URL whole (the newcomer's `-f https://...` was mangled to https:/)."""

from __future__ import annotations

import base64
import http.server
import io
import subprocess
import sys
import threading

import pytest

from tests.conftest import example

GPU = example("gpu-cluster.yaml")
SNAPSHOT = example("snapshots") / "three-4gpu-nodes.yaml"


BASIC = "Basic " + base64.b64encode(b"det@ops:Pa55:w0rd").decode()  # user det@ops, password Pa55:w0rd


def stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_settings_from_stdin(run_cli, monkeypatch):
    stdin(monkeypatch, GPU.read_bytes() + b"slotTyp: gpu\n")
    result = run_cli("validate", "-f", "-")
    assert result.code == 1
    line = GPU.read_text().count("\n") + 1
    assert f"error: slotTyp: unknown key; did you mean slotType? (stdin:{line})" in result.out.splitlines()


def test_a_snapshot_and_an_experiment_from_stdin_in_a_real_pipe():
    snapshot = subprocess.run([sys.executable, "-m", "det_k8s", "plan", str(example("experiments") / "small-4gpu.yaml"),
                               "--snapshot", "-", "-o", "json"], input=SNAPSHOT.read_bytes(), capture_output=True,
                              timeout=60)
    assert snapshot.returncode == 0, snapshot.stderr.decode()
    assert b'"status": "placed"' in snapshot.stdout
    experiment = subprocess.run([sys.executable, "-m", "det_k8s", "plan", "-", "--snapshot", str(SNAPSHOT), "-o",
                                 "json"], input=(example("experiments") / "small-4gpu.yaml").read_bytes(),
                                capture_output=True, timeout=60)
    assert experiment.returncode == 0 and b'"name": "small-4gpu"' in experiment.stdout


def test_stdin_named_twice_is_a_usage_error(run_cli, monkeypatch):
    stdin(monkeypatch, SNAPSHOT.read_bytes())
    result = run_cli("plan", "-", "--snapshot", "-", "-f", GPU)
    assert result.code == 2 and "error: - (stdin) is named twice; it can be read only once" in result.err


@pytest.mark.parametrize("argv", [
    ("plan", example("experiments") / "small-4gpu.yaml", "--snapshot", "-", "-f", "-"),
    ("nodes", "map", "--snapshot", "-", "-f", "-"),
    ("validate", "-f", "-", "--nodes", "-"),
    ("experiment", "create", "-", "-f", "-"),
])
def test_stdin_named_in_two_options_is_refused_before_either_is_read(run_cli, monkeypatch, argv):
    # Before, the first reader parsed stdin and blamed its content (a settings file read as a snapshot:
    # "expected a Kubernetes List"; a snapshot read as settings: "apiVersion: unknown key").
    stdin(monkeypatch, GPU.read_bytes())
    result = run_cli(*argv)
    assert result.code == 2
    assert result.err.strip().splitlines() == [
        "error: - (stdin) is named twice; it can be read only once; pipe one input in and pass the others as files"]
    assert sys.stdin.read() == GPU.read_text()  # nothing was read


def test_binary_on_stdin_is_named_as_stdin(run_cli, monkeypatch):
    stdin(monkeypatch, b"\x00\x01")
    result = run_cli("validate", "-f", "-")
    assert result.code == 1 and result.err.startswith("error: stdin: binary data (a NUL byte), not text")


class _Files(http.server.BaseHTTPRequestHandler):
    routes: dict[str, tuple[int, bytes, dict[str, str]]] = {}
    seen: list[tuple[str, str | None]] = []  # (path, Authorization header) of every request

    def do_GET(self) -> None:  # noqa: N802
        self.seen.append((self.path, self.headers.get("Authorization")))
        status, body, headers = self.routes.get(self.path, (404, b"not here", {}))
        if self.path.startswith("/private/") and self.headers.get("Authorization") != BASIC:
            status, body, headers = 401, b"", {"WWW-Authenticate": 'Basic realm="values"'}
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", headers.get("Content-Length", str(len(body))))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Files.routes = {
        "/site.yaml": (200, GPU.read_bytes(), {}),
        "/typo.yaml": (200, b"maxSlotsPerPod: 4\nslotTyp: gpu\n", {}),
        "/moved": (302, b"", {"Location": "file:///etc/passwd"}),
        "/huge.yaml": (200, b"", {"Content-Length": str(64 * 2**20)}),
        "/loop": (302, b"", {"Location": "/loop-again"}),
        "/loop-again": (302, b"", {"Location": "/loop"}),
        "/private/site.yaml": (200, GPU.read_bytes(), {}),
        "/private/elsewhere": (302, b"", {"Location": "/site.yaml"}),
    }
    _Files.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_settings_from_a_url_like_helm(run_cli, web):
    result = run_cli("validate", "-f", f"{web}/site.yaml")
    assert result.code == 0, result.err
    typo = run_cli("validate", "-f", f"{web}/typo.yaml")
    assert typo.code == 1 and f"error: slotTyp: unknown key; did you mean slotType? ({web}/typo.yaml:2)" in typo.out


@pytest.mark.parametrize(("path", "message"), [
    ("/missing.yaml", "the server answered HTTP 404 Not Found"),
    ("/moved", "redirected to a URL that is not http(s); not followed"),
    ("/huge.yaml", "64 MiB, more than a settings file can be (16 MiB)"),
    ("/loop", "redirected more than 5 times (or in a loop); not followed further"),  # was: "not http(s)"
])
def test_url_failures_are_one_line_with_the_url_whole(run_cli, web, path, message):
    result = run_cli("validate", "-f", f"{web}{path}")
    assert result.code == 1
    assert result.err.strip().splitlines() == [f"error: {web}{path}: {message}"]


def test_a_silent_url_times_out(run_cli, tarpit, monkeypatch):
    from det_k8s.cli import inputs

    monkeypatch.setattr(inputs, "URL_TIMEOUT", 0.5)
    result = run_cli("validate", "-f", f"{tarpit.url}/site.yaml")
    assert result.code == 1 and result.err.strip() == f"error: {tarpit.url}/site.yaml: no answer within 0.5s"


def test_other_schemes_are_refused_naming_the_url_and_credentials_are_masked(run_cli):
    result = run_cli("validate", "-f", "s3://bucket/site.yaml")
    assert result.code == 1
    assert result.err.startswith("error: s3://bucket/site.yaml: det-k8s reads a settings file from a file, - (stdin) or "
                                 "an http(s) URL, not s3://")
    secret = run_cli("validate", "-f", "https://user:Pa55word@127.0.0.1:9/site.yaml?sig=abc")
    assert "Pa55word" not in secret.err and "sig=abc" not in secret.err and "https://***@127.0.0.1:9" in secret.err


def test_credentials_in_the_url_are_sent_as_basic_auth_like_helm_and_never_shown(run_cli, web):
    # Go's HTTP client (so helm -f URL) sends user:password@ as Basic authentication; det-k8s sent the user info as
    # part of the host name ("Name or service not known"). The password is percent-encoded in the URL.
    host = web.removeprefix("http://")
    result = run_cli("validate", "-f", f"http://det%40ops:Pa55%3Aw0rd@{host}/private/site.yaml")
    assert result.code == 0, result.err
    assert _Files.seen == [("/private/site.yaml", BASIC)]
    wrong = run_cli("validate", "-f", f"http://det%40ops:Wr0ng-pass@{host}/private/site.yaml")
    assert wrong.code == 1
    assert wrong.err.strip().splitlines() == [f"error: http://***@{host}/private/site.yaml: the server answered "
                                              "HTTP 401 Unauthorized"]
    assert "Wr0ng-pass" not in wrong.out + wrong.err


def test_basic_auth_from_the_url_never_follows_a_redirect(run_cli, web):
    host = web.removeprefix("http://")
    result = run_cli("validate", "-f", f"http://det%40ops:Pa55%3Aw0rd@{host}/private/elsewhere")
    assert result.code == 0, result.err
    assert _Files.seen == [("/private/elsewhere", BASIC), ("/site.yaml", None)]


@pytest.mark.parametrize("chart", ["https://helm.example.com/charts/determined-0.38.1.tgz", "oci://registry.example.com/charts/determined"])
def test_a_chart_url_is_refused_in_one_line_that_keeps_it_whole(run_cli, tmp_path, chart):
    # `--chart https://...` read as a path lost a slash ("https:/helm...: no such chart directory"); helm users pass
    # URLs and OCI references there. det-k8s renders into a chart on disk: it says so, with the URL intact.
    result = run_cli("render", "-f", GPU, "--chart", chart, "--output-dir", tmp_path / "out")
    assert result.code == 1
    assert result.err.strip().splitlines()[-1] == (
        f"error: --chart {chart}: det-k8s renders into a chart on disk, not one fetched from a URL or registry; "
        f"download it first (helm pull {chart}) and pass the .tgz or its directory")


def test_a_chart_that_is_not_there_suggests_helm_pull(run_cli, tmp_path):
    result = run_cli("render", "-f", GPU, "--chart", "determined-ai/determined", "--output-dir", tmp_path / "out")
    assert result.code == 1
    assert result.err.strip().splitlines()[-1] == (
        "error: determined-ai/determined: no such chart directory or archive; a chart of a helm repository? "
        "helm pull determined-ai/determined, then pass the .tgz")


def test_a_snapshot_or_experiment_url_is_refused_with_the_url_whole(run_cli, tmp_path):
    # Only -f fetches URLs; a URL given for a snapshot or an experiment file was read as a path and lost a slash
    # ("https:/example.com/snap.json: no such snapshot file").
    url = "https://example.com/snap.json"
    result = run_cli("plan", example("experiments") / "small-4gpu.yaml", "--snapshot", url)
    assert result.code == 1
    assert result.err.strip().splitlines()[-1] == (
        f"error: {url}: det-k8s reads a snapshot file from a file or - (stdin), not from a URL; download it first, "
        f"or pipe it in: curl -fsSL {url} | det-k8s ... -")
