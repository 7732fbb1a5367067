"""Rendering values.yaml and Chart.yaml: golden files, the round trip, comments, secrets."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from det_k8s.chart.render import normalise, render_chart_yaml, render_values
from det_k8s.settings import Document, load_settings

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "golden"
EXAMPLES = ["gpu-cluster", "external-db-tls-gcs", "cpu-azure"]


def loaded(name: str):
    return load_settings([Document(f"examples/{name}.yaml", (ROOT / "examples" / f"{name}.yaml").read_text())])


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with UPDATE_GOLDEN=1 once and review it"
    assert text == path.read_text(), f"{name} changed; if intended, rerun with UPDATE_GOLDEN=1 and review the diff"


@pytest.mark.parametrize("name", EXAMPLES)
def test_values_yaml_matches_golden(name):
    check_golden(f"{name}.values.yaml", render_values(loaded(name).values))


@pytest.mark.parametrize("name", EXAMPLES)
def test_chart_yaml_matches_golden(name):
    check_golden(f"{name}.Chart.yaml", render_chart_yaml(loaded(name).app_version))


@pytest.mark.parametrize("name", EXAMPLES)
def test_values_yaml_loads_back_to_exactly_the_effective_values(name):
    settings = loaded(name)
    assert yaml.safe_load(render_values(settings.values)) == normalise(settings.values)


def test_unset_optional_keys_appear_as_commented_examples():
    text = render_values(loaded("gpu-cluster").values)
    assert "# tlsSecret: determined-tls" in text
    assert "# hostAddress: 10.0.0.5" in text
    assert "\nmaxSlotsPerPod: 4\n" in text


def test_every_section_is_explained_by_a_comment():
    text = render_values(loaded("gpu-cluster").values)
    for heading in ("## Images", "## Database", "## Checkpoint storage", "## Slots", "## Task pods", "## Scheduling"):
        assert heading in text


def test_cpu_quantities_become_numbers_the_master_can_read():
    settings = load_settings([Document("s", "maxSlotsPerPod: 1\nslotType: cpu\nslotResourceRequests:\n  cpu: 7910m\n")])
    assert yaml.safe_load(render_values(settings.values))["slotResourceRequests"]["cpu"] == 7.91


def test_strings_that_look_like_other_types_stay_strings():
    settings = load_settings([Document("s", 'maxSlotsPerPod: 1\nclusterName: "true"\nappVersion: "0.20"\n')])
    assert yaml.safe_load(render_values(settings.values))["clusterName"] == "true"
    assert yaml.safe_load(render_chart_yaml(settings.app_version))["appVersion"] == "0.20"


def test_chart_yaml_keeps_a_user_charts_fields_and_changes_only_app_version():
    base = {"apiVersion": "v1", "name": "determined", "version": "0.17.15", "appVersion": "0.17.15",
            "icon": "https://x/icon.png", "maintainers": [{"name": "ops"}]}
    data = yaml.safe_load(render_chart_yaml("0.17.14", base))
    assert data == {**base, "appVersion": "0.17.14", "description": data["description"]}
    assert data["apiVersion"] == "v1" and "type" not in data  # helm lint refuses `type` in an apiVersion v1 chart
    assert yaml.safe_load(render_chart_yaml("0.38.1", {**base, "apiVersion": "v2"}))["type"] == "application"


def test_the_file_warns_that_it_holds_secrets():
    assert "holds secrets" in render_values(loaded("cpu-azure").values)
