"""Property: a secret planted in every secret key never reaches any output, in any form it can take.

Markers go into every secret key at once (db.password, defaultPassword, the storage keys, the
connection string, logging.security.password). helm then misbehaves the way real tools do: it
quotes the values in its stderr as they are, base64-encoded as a Secret's data holds them (alone,
and inside a longer encoded text at every alignment), URL-encoded, JSON-escaped, as the
`AccountKey=` part of the connection string and as the password of a URL. Every output path that
can carry them is run (install, upgrade, install --dry-run's manifests and its failure, validate,
render -v) for helm 3 and helm 4, and no derived form of any marker may appear anywhere.
"""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from det_k8s.settings.schema import secret_paths
from tests.cli.test_install_upgrade import ready_cluster
from tests.conftest import example
from tests.fuzz.harness import FUZZ, check, time_bound

KEYS = sorted(".".join(path) for path in secret_paths())
ALPHABET = st.sampled_from(list("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghjkmnpqrstuvwxyz23456789+/=&;:@%!_-"))
MARKERS = st.lists(ALPHABET, min_size=10, max_size=24).map(lambda chars: "Zq" + "".join(chars))
COMMANDS = ["install", "upgrade", "dry-run-failure", "dry-run-manifests", "validate", "render"]


def value_for(key: str, marker: str) -> str:
    if key.endswith("connection_string"):
        return f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={marker};EndpointSuffix=core.windows.net"
    return marker


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def cores(secret: str) -> set[str]:
    """The characters of a longer base64 text that encode nothing but `secret`, at each of the three alignments."""
    out = set()
    raw = secret.encode()
    for pad in range(3):
        encoded = base64.b64encode(b"\x01" * pad + raw + b"\x01\x01\x01").decode()
        first, last = (pad * 8 + 5) // 6, (pad + len(raw)) * 8 // 6
        if last - first >= 8:
            out.add(encoded[first:last])
    return out


def forms(marker: str) -> set[str]:
    return {marker, b64(marker), quote(marker, safe=""), json.dumps(marker)[1:-1], *cores(marker)} - {""}


def leaky_stderr(markers: dict[str, str]) -> str:
    """helm's stderr quoting every planted value in every form."""
    lines = ["Error: INSTALLATION FAILED: template: determined/templates/master-secret.yaml:7: rendering failed"]
    for key, marker in markers.items():
        value = value_for(key, marker)
        lines += [f"  {key}: {value}", f"  data.{key}: {b64(value)}", f"  config: {b64('user=x password=' + value)}",
                  f"  url: postgres://determined:{quote(marker, safe='')}@db:5432/determined?sslmode=disable",
                  f"  json: {json.dumps({'password': value})}", f"  AccountKey part: AccountKey={marker};x"]
    return "\n".join(lines) + "\n"


def secret_manifest(markers: dict[str, str]) -> str:
    data = {key.replace(".", "-"): b64(value_for(key, m)) for key, m in markers.items()}
    string_data = {key.replace(".", "-"): value_for(key, m) for key, m in markers.items()}
    config = "\n".join(f"{key}: {value_for(key, m)}" for key, m in markers.items())
    return (f"---\napiVersion: v1\nkind: Secret\nmetadata: {{name: s}}\ndata: {json.dumps(data)}\n"
            f"stringData: {json.dumps(string_data)}\n"
            f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\ndata:\n  master.yaml: {json.dumps(config)}\n"
            f"  encoded: {b64(config)}\n")


@pytest.fixture
def markers_cli(run_cli, cluster, fake_helm):
    ready_cluster(cluster)
    fake_helm.respond("list", stdout=json.dumps([{"name": "demo", "namespace": "default", "chart": "determined-0.17.15",
                                                 "status": "deployed", "revision": "1", "app_version": "0.17.15"}]))
    return run_cli, fake_helm


@settings(FUZZ, max_examples=40)
@given(st.lists(MARKERS, min_size=len(KEYS), max_size=len(KEYS), unique=True), st.sampled_from(COMMANDS))
def test_no_form_of_a_planted_secret_is_ever_printed(markers_cli, tmp_path, planted, command):
    run_cli, fake = markers_cli
    markers = dict(zip(KEYS, planted, strict=True))
    sets = [arg for key, m in markers.items() for arg in ("--set-string", f"{key}={value_for(key, m)}")]
    base = ["-f", example("gpu-cluster.yaml"), *sets]
    stderr = leaky_stderr(markers)
    manifests = secret_manifest(markers)
    if command in ("install", "upgrade"):
        fake.respond(command, stderr=stderr, rc=1)
        args = [command, "demo", *base, "--skip-storage-check", "--yes"] if command == "upgrade" else \
            [command, "demo", *base, "--skip-storage-check"]
    elif command == "dry-run-failure":
        fake.respond("template", stderr=stderr, rc=1)
        fake.respond("install", stderr=stderr, rc=1)
        args = ["install", "demo", *base, "--dry-run"]
    elif command == "dry-run-manifests":
        fake.respond("template", stdout=manifests, stderr=stderr)
        fake.respond("install", stdout=json.dumps({"manifest": manifests, "hooks": []}), stderr=stderr)
        args = ["install", "demo", *base, "--dry-run"]
    elif command == "validate":
        args = ["validate", *base, "--set", "db.port=x", "-o", "json"]
    else:
        args = ["render", *base, "--output-dir", tmp_path / "chart", "-v"]
    with time_bound():
        result = check(run_cli(*args))
    text = result.out + result.err
    for key, marker in markers.items():
        for form in forms(marker):
            assert form not in text, (key, command, form)
