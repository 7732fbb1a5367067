"""Bad input on the URL, search, map and helm-output surfaces: each reproduction failed before its fix.

URLs for `-f`, searches in experiment files, the GPU map, helm's `history`/`get manifest`/`get values` output of
another shape, the scheduler's manifest and names. Every case ends as docs/usage.md documents: one `error:` line
naming what is wrong, exit 1 (2 for usage), never a traceback, an `internal error` or a hang.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator

import pytest

from tests.conftest import example

GPU = example("gpu-cluster.yaml")
SNAPSHOT = example("snapshots") / "three-4gpu-nodes.yaml"


def one_error(result, code: int = 1) -> str:
    """The single `error:` line of a failed command (no traceback, no internal error)."""
    assert result.code == code, (result.code, result.out[-2000:], result.err[-2000:])
    text = result.out + result.err
    assert "internal error" not in text and "Traceback" not in text, text[-2000:]
    errors = [line for line in result.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.err
    return errors[0]


# -- `-f https://...` ----------------------------------------------------------------------------------------


class _Hostile(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/loop":
            self._redirect("/loop")
        elif self.path == "/nowhere":
            self.send_response(302)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/drip":  # a byte at a time, each well within the read timeout, forever
            self.send_response(200)
            self.send_header("Content-Length", str(2**20))
            self.end_headers()
            try:
                for _ in range(600):
                    self.wfile.write(b"#")
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:
                pass
        elif self.path == "/garbage":
            self.wfile.write(b"NOT HTTP AT ALL\r\n\r\n")
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    def _redirect(self, where: str) -> None:
        self.send_response(302)
        self.send_header("Location", where)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hostile_web() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(("url", "secret", "expected"), [
    ("https://admin:My Secret@127.0.0.1:9/site.yaml", "My Secret", "error: https://***@127.0.0.1:9/site.yaml: not a "
     "valid URL: it holds a space or a control character"),
    ("https://127.0.0.1:9/site.yaml?sig=abc def", "abc", "error: https://127.0.0.1:9/site.yaml?***: not a valid URL"),
    ("https://127.0.0.1:9/a\nb.yaml", "", "error: https://127.0.0.1:9/a\\nb.yaml: not a valid URL"),
])
def test_a_url_with_a_space_or_a_control_character_is_refused_without_showing_it(run_cli, url, secret, expected):
    line = one_error(run_cli("validate", "-f", url))
    assert line.startswith(expected), line
    assert not secret or secret not in line


@pytest.mark.parametrize(("path", "message"), [
    ("/loop", "redirected more than 5 times (or in a loop); not followed further"),
    ("/nowhere", "the server answered HTTP 302 Found without saying where to (no Location)"),
    ("/garbage", "the answer is not HTTP"),
])
def test_url_redirect_loops_and_odd_answers_are_named(run_cli, hostile_web, path, message):
    line = one_error(run_cli("validate", "-f", f"{hostile_web}{path}"))
    assert line == f"error: {hostile_web}{path}: {message}"


def test_a_url_that_drips_forever_stops_at_the_overall_limit(run_cli, hostile_web, monkeypatch):
    from det_k8s.cli import inputs

    monkeypatch.setattr(inputs, "URL_DEADLINE", 1.0)
    line = one_error(run_cli("validate", "-f", f"{hostile_web}/drip"))
    assert line == f"error: {hostile_web}/drip: not read completely within 1s (the server sends too slowly)"


# -- searches in experiment files ----------------------------------------------------------------------------


def experiment(tmp_path, searcher: str, extra: str = ""):
    path = tmp_path / "search.yaml"
    path.write_text(f"name: search\nresources: {{slots_per_trial: 4}}\nsearcher: {searcher}\n{extra}")
    return path


@pytest.mark.parametrize(("searcher", "extra", "expected"), [
    ("{name: adaptive_asha, metric: x, max_trials: 5, divisor: 1}", "",
     "error: searcher.divisor: must be a number above 1, found 1"),
    ("{name: adaptive_asha, metric: x, max_trials: 5, divisor: -2}", "",
     "error: searcher.divisor: must be a number above 1, found -2"),
    ("{name: adaptive_asha, metric: x, max_trials: 5, divisor: .nan}", "",
     "error: searcher.divisor: must be a number above 1, found nan"),
    ("{name: grid, metric: x}", "hyperparameters: {a: {type: int, minval: 0, maxval: .inf, count: 5}}\n",
     "error: hyperparameters.a.maxval: expected an integer, found a number"),
    ("{name: random, metric: x, max_trials: 0}", "", "error: searcher.max_trials: must be at least 1, found 0"),
])
def test_searcher_values_determined_refuses_are_errors_not_crashes(run_cli, tmp_path, searcher, extra, expected):
    result = run_cli("plan", experiment(tmp_path, searcher, extra), "--snapshot", SNAPSHOT, "-f", GPU)
    assert one_error(result).startswith(expected), result.err
    assert "Determined's master refuses the experiment (" in result.err + result.out


@pytest.mark.parametrize("searcher", [
    "{name: async_halving, metric: x, max_trials: 5, num_rungs: 1000000000, max_concurrent_trials: 0}",
    "{name: adaptive_asha, metric: x, max_trials: 5, bracket_rungs: [100000]}",
    "{name: adaptive_asha, metric: x, max_trials: 100, divisor: 1.0e+300, max_rungs: 1000000000}",
])
def test_huge_but_valid_searcher_values_are_planned(run_cli, tmp_path, searcher):
    result = run_cli("plan", experiment(tmp_path, searcher), "--snapshot", SNAPSHOT, "-f", GPU)
    assert result.code == 0, result.err
    assert "search, " in result.err and "internal error" not in result.err


def test_a_search_of_a_billion_trials_at_once_is_answered_at_once(run_cli, tmp_path):
    path = experiment(tmp_path, "{name: random, metric: x, max_trials: 1000000000, max_concurrent_trials: 0}")
    result = run_cli("plan", path, "--snapshot", SNAPSHOT, "-f", GPU, "-o", "json")  # ran for minutes
    assert result.code == 0, result.err
    assert "random search, 1000 trials at once (max_trials 1000000000, max_concurrent_trials 0: 1000000000 at " \
           "once, of which det-k8s plans the first 1000)" in result.err


# -- the GPU map ---------------------------------------------------------------------------------------------


def huge_node_snapshot(tmp_path):
    import json

    path = tmp_path / "huge.json"
    path.write_text(json.dumps({"kind": "List", "items": [
        {"kind": "Node", "metadata": {"name": "huge", "labels": {"node-pool": "a"}},
         "status": {"allocatable": {"nvidia.com/gpu": str(10**9), "cpu": "64", "pods": "110"}}},
        {"kind": "Node", "metadata": {"name": "n2", "labels": {"node-pool": "a"}},
         "status": {"allocatable": {"nvidia.com/gpu": "4", "cpu": "8", "pods": "110"}}},
        {"kind": "Pod", "metadata": {"name": "p", "namespace": "x"}, "status": {"phase": "Running"},
         "spec": {"nodeName": "huge", "containers": [{"name": "c", "resources": {
             "requests": {"nvidia.com/gpu": str(10**9 - 1)}}}]}}]}))
    return path


@pytest.mark.parametrize("args", [[], ["--no-summary"], ["--summary"]])
def test_the_map_of_a_node_with_a_billion_gpus_is_drawn_at_once(run_cli, tmp_path, args):
    result = run_cli("nodes", "map", "--snapshot", huge_node_snapshot(tmp_path), *args)  # took minutes and 11 GB
    assert result.code == 0, result.err
    assert result.out.startswith("Now: 1,000,000,004 GPU slots (nvidia.com/gpu) on 2 nodes, by node-pool\n"
                                 "0 held by det-k8s and Determined, 999,999,999 by other pods, 5 free\n")
    assert max(len(line) for line in result.out.splitlines()) < 2000


def test_the_maps_data_counts_every_slot_and_draws_the_first_1024(run_cli, tmp_path):
    import json

    result = run_cli("nodes", "map", "--snapshot", huge_node_snapshot(tmp_path), "-o", "json")
    assert result.code == 0, result.err
    huge = json.loads(result.out)["nodes"][0]
    assert (huge["name"], huge["slots"], huge["free"], len(huge["cells"])) == ("huge", 10**9, 1, 1024)
    assert huge["notDrawn"] == {"foreign": 10**9 - 1 - 1024, "free": 1}
    assert huge["state"] == ["only the first 1,024 of its 1,000,000,000 slots drawn (no real node has that many)"]


def test_plan_map_and_pictures_of_a_huge_node(run_cli, tmp_path):
    result = run_cli("plan", example("experiments") / "distributed-16gpu.yaml", "--snapshot",
                     huge_node_snapshot(tmp_path), "--map", "--svg", tmp_path / "m.svg", "--html", tmp_path / "m.html")
    assert result.code == 0, result.err
    assert (tmp_path / "m.svg").stat().st_size < 2**20 and (tmp_path / "m.html").stat().st_size < 2**20


@pytest.mark.parametrize(("option", "path", "message"), [
    ("--svg", ".", "cannot write the SVG file: Is a directory"),
    ("--html", "/nonexistent-dir/map.html", "cannot write the HTML file: No such file or directory"),
])
def test_pictures_to_a_directory_or_nowhere_are_one_line(run_cli, option, path, message):
    line = one_error(run_cli("nodes", "map", "--snapshot", example("snapshots") / "fragmented.yaml", option, path))
    assert line == f"error: {path}: {message}"


@pytest.mark.parametrize(("args", "message"), [
    (["--group-by", "a b"], "error: --group-by 'a b': not a node label key"),
    (["--group-by", "pool\n"], "error: --group-by 'pool\\n': not a node label key"),
    (["-l", "a in ()"], "error: label selector 'a in ()': 'a in ()' names no value"),
    (["-l", "Upper.Case/pool=a"], "error: label selector 'Upper.Case/pool=a': 'Upper.Case/pool' is not a label key"),
    (["-l", "pool=" + "v" * 64], "is not a label value"),
    (["-l", "k" * 64], "is not a label key"),
])
def test_selectors_and_group_by_kubectl_would_refuse_are_usage_errors(run_cli, args, message):
    line = one_error(run_cli("nodes", "map", "--snapshot", example("snapshots") / "fragmented.yaml", *args), code=2)
    assert line.startswith(message) or message in line, line


# -- helm's history, manifests and values of another shape ---------------------------------------------------


@pytest.fixture
def demo(cluster, fake_helm):
    """Release demo at revision 3, as tests/cli/test_release_ops.py's `released`."""
    import json

    from tests.cli.test_install_upgrade import DETERMINED, ready_cluster
    from tests.cli.test_release_ops import HISTORY, MANIFEST, NS, VALUES

    ready_cluster(cluster)
    fake_helm.respond("list", stdout=json.dumps(DETERMINED))
    fake_helm.respond("history", "demo", stdout=json.dumps(HISTORY))
    fake_helm.respond("get", "manifest", "demo", stdout=MANIFEST.format(version="0.26.2", password="Pw-Three-333"))
    fake_helm.respond("get", "hooks", "demo", stdout="")
    for revision in (1, 2):
        fake_helm.respond("get", "manifest", "demo", *NS, "--revision", str(revision),
                          stdout=MANIFEST.format(version="0.17.15", password=f"Pw-Old-{revision}{revision}"))
        fake_helm.respond("get", "values", "demo", "--output", "json", *NS, "--revision", str(revision),
                          stdout=json.dumps(VALUES))
    return fake_helm


HISTORIES = ['[{"revision": "abc"}]', '[{"revision": [1]}]', "[1, 2]", '{"a": 1}', '[{"revision": 1.5}]',
             '[{"revision": 100000000000000000000000000000}]']


@pytest.mark.parametrize("text", HISTORIES)
def test_helm_history_of_another_shape_is_one_line(run_cli, demo, text):
    demo.respond("history", "demo", stdout=text)
    for args in (["history", "demo"], ["rollback", "demo", "--skip-storage-check", "--dry-run"]):
        line = one_error(run_cli(*args))  # internal error: ValueError, TypeError, IndexError
        assert line.startswith("error: helm history -o json printed JSON of another shape ("), line


def test_helm_history_fields_of_another_type_are_shown_empty(run_cli, demo):
    import json

    demo.respond("history", "demo", stdout=json.dumps([{"revision": 1, "chart": ["determined-1"], "app_version": 5,
                                                        "updated": {"x": 1}, "status": None}]))
    result = run_cli("history", "demo", "-o", "json")
    assert result.code == 0, result.err
    assert json.loads(result.out) == [{"revision": 1, "updated": "", "status": "", "chart": "", "app_version": "",
                                       "description": ""}]


MANIFESTS = {
    "a Secret whose data is a list": "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: [1, 2]\n",
    "a Secret whose stringData is text": "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: x\n",
    "annotations that are text": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, annotations: x}\n",
    "a document nested 3000 deep": "a: " + "[" * 3000 + "]" * 3000 + "\n",
    "a ConfigMap value nested 3000 deep": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k: 'a: "
                                          + "[" * 3000 + "]" * 3000 + "'}\n",
    "a Secret value nested 3000 deep": "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {k: \"x: 1\\n"
                                       "y: " + "[" * 3000 + "]" * 3000 + "\"}\n",
    "a control character": "\x07\n",
}


@pytest.mark.parametrize("name", list(MANIFESTS))
def test_manifests_of_another_shape_are_diffed_not_crashed_on(run_cli, demo, name):
    from tests.cli.test_release_ops import NS

    demo.respond("get", "manifest", "demo", *NS, "--revision", "2", stdout=MANIFESTS[name])
    result = run_cli("rollback", "demo", "--skip-storage-check", "--dry-run", "--diff")  # AttributeError, RecursionError
    assert result.code == 0, result.err
    assert "internal error" not in result.err and "Rolling back release demo" in result.err


# -- secrets on the release paths ----------------------------------------------------------------------------

PLANTED = "Planted-Db-Pass-99"
LEAKY = f"""---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: determined-db-deployment-demo, annotations: {{checksum: "{__import__('base64').b64encode(
    PLANTED.encode()).decode()}"}}}}
spec:
  template:
    spec:
      containers:
      - name: determined-db
        image: postgres:10.14
        env: [{{name: POSTGRES_PASSWORD, value: "{PLANTED}"}}, {{name: URL, value: "postgres://u:{PLANTED}@db/x"}}]
      - name: change-password
        image: determinedai/determined-master:0.17.15
        args: ["8080", "false", "{PLANTED}"]
"""


def planted_forms(secret: str) -> list[str]:
    import base64

    return [secret, base64.b64encode(secret.encode()).decode()]


@pytest.mark.parametrize("invalid", [False, True], ids=["valid-values", "values-det-k8s-refuses"])
def test_rollback_never_shows_the_target_revisions_secrets(run_cli, demo, invalid):
    import json

    from tests.cli.test_release_ops import NS, VALUES

    values = {**VALUES, "db": {**VALUES.get("db", {}), "password": PLANTED}}
    if invalid:
        values["maxSlotsPerPod"] = "x"  # its secrets were not registered at all: shown in plain text
    demo.respond("get", "values", "demo", "--output", "json", *NS, "--revision", "2", stdout=json.dumps(values))
    demo.respond("get", "manifest", "demo", *NS, "--revision", "2", stdout=LEAKY)
    result = run_cli("rollback", "demo", "--skip-storage-check", "--dry-run", "--diff")
    assert result.code == (1 if invalid else 0), result.err
    assert "determined-db-deployment-demo, Deployment (apps) has been added:" in result.out
    for form in planted_forms(PLANTED):
        assert form not in result.out + result.err, form


def test_rollback_never_shows_the_current_revisions_secrets(run_cli, demo):
    import json

    from tests.cli.test_release_ops import MANIFEST, NS, VALUES

    demo.respond("get", "manifest", "demo", stdout=LEAKY)  # the current revision holds it
    demo.respond("get", "manifest", "demo", *NS, "--revision", "2",
                 stdout=MANIFEST.format(version="0.17.15", password="Pw-Old-22"))
    demo.respond("get", "values", "demo", "--output", "json", "--namespace", "default",
                 stdout=json.dumps({"db": {"password": PLANTED}}))
    demo.respond("get", "values", "demo", "--output", "json", *NS, "--revision", "2", stdout=json.dumps(VALUES))
    result = run_cli("rollback", "demo", "--skip-storage-check", "--dry-run", "--diff")
    assert result.code == 0, result.err
    assert "determined-db-deployment-demo, Deployment (apps) has been removed:" in result.out
    for form in planted_forms(PLANTED):
        assert form not in result.out + result.err, form


def test_diff_hides_the_installed_revisions_old_password_and_secret_env_values(run_cli, cluster, fake_helm, helm3,
                                                                               helm4):
    import json

    from tests.cli.test_install_upgrade import DETERMINED, ready_cluster

    ready_cluster(cluster)
    fake_helm.delegate_to(helm3 if fake_helm.major == 3 else helm4)
    fake_helm.respond("list", stdout=json.dumps(DETERMINED))
    fake_helm.respond("get", "manifest", "demo", stdout=LEAKY)
    fake_helm.respond("get", "hooks", "demo", stdout="")
    fake_helm.respond("get", "values", "demo", stdout=json.dumps({"db": {"password": PLANTED}}))
    result = run_cli("diff", "demo", "-f", GPU, "--detailed-exitcode")
    assert result.code == 2, result.err
    assert "determined-db-deployment-demo, Deployment (apps) has changed:" in result.out
    for form in planted_forms(PLANTED):
        assert form not in result.out + result.err, form
    fake_helm.respond("get", "values", "demo", stderr="Error: forbidden\n", rc=1)  # unknown: hidden by its name
    blind = run_cli("diff", "demo", "-f", GPU, "--detailed-exitcode")
    assert blind.code == 2, blind.err
    assert "name: POSTGRES_PASSWORD\n" in blind.out and "value: <secret 18 bytes, hash " in blind.out
