"""The validation corpus (`tests/support/validation_corpus.py`) judged by det-k8s offline: agreement with what the real API
server (and the Determined master) do, reported as a number; the goal is every case.

A pod-spec case is checked as `validate` and `plan` check one (`check_pod_spec`: the OpenAPI schema and the values);
a chart case as `validate` checks settings for a fresh install (`load_settings` and `missing_initial_password`).
"""

from __future__ import annotations

import json

import pytest
import yaml

from det_k8s.settings.loader import Document, load_settings
from det_k8s.settings.podspec import check_pod_spec
from det_k8s.settings.rules import missing_initial_password
from det_k8s.settings.source import load_yaml_text
from tests.support import validation_corpus as corpus


def judge(case: corpus.Case) -> tuple[str, list[str]]:
    """det-k8s's verdict on a case offline: ("accept" or "refuse", the error lines)."""
    if case["kind"] == "podspec":
        text = yaml.safe_dump({"pod": case["value"]})
        loaded = load_yaml_text(text, "corpus.yaml")
        errors = [p.render() for p in check_pod_spec(loaded.data["pod"], ("pod",), loaded.sources) if p.is_error]
    else:
        settings = load_settings([Document("corpus.yaml", yaml.safe_dump(corpus.as_settings(case)))])
        errors = [p.render() for p in settings.errors]
        missing = missing_initial_password(settings.values, settings.app_version)
        errors += [missing.render()] if missing is not None else []
    return (corpus.REFUSE if errors else corpus.ACCEPT), errors


def test_the_corpus_is_big_enough_and_well_formed():
    names = [case["name"] for case in corpus.CASES]
    assert len(names) == len(set(names)), "case names are unique"
    assert len(corpus.CASES) >= 200
    for case in corpus.CASES:
        assert case["kind"] in ("podspec", "chart") and case["expected"] in (corpus.ACCEPT, corpus.REFUSE), case
        assert case["expected"] == corpus.ACCEPT or case["why"], f"{case['name']}: a refusal names its rule"
        json.dumps(case["value"])  # plain data, ready to send
    kinds = {(c["kind"], c["expected"]) for c in corpus.CASES}
    assert kinds == {("podspec", "accept"), ("podspec", "refuse"), ("chart", "accept"), ("chart", "refuse")}


def test_every_podspec_case_becomes_a_complete_pod_as_the_master_builds_it():
    for case in corpus.podspec_cases():
        pod = corpus.as_pod(case, name="corpus-1")
        assert pod["apiVersion"] == "v1" and pod["kind"] == "Pod" and pod["metadata"]["name"] == "corpus-1"
        mains = [c for c in pod["spec"]["containers"] if isinstance(c, dict) and c.get("name") == corpus.MAIN]
        assert len(mains) == 1 and mains[0]["image"], case["name"]
        if case["expected"] == corpus.ACCEPT:  # a whole Pod, containers required: still accepted
            loaded = load_yaml_text(yaml.safe_dump({"pod": pod}), "pod.yaml")
            assert check_pod_spec(loaded.data["pod"], ("pod",), loaded.sources) == [], case["name"]
    sidecar = next(c for c in corpus.podspec_cases() if c["name"] == "container sidecar with image")
    assert [c["name"] for c in corpus.as_pod(sidecar)["spec"]["containers"]] == [corpus.MAIN, "sidecar"]
    null = next(c for c in corpus.podspec_cases() if c["name"].startswith("container null entry"))
    assert corpus.as_pod(null)["spec"]["containers"][0] is None  # passed on as it is


def test_det_k8s_agrees_with_the_api_server_on_every_case(capsys):
    disagreements = []
    for case in corpus.CASES:
        verdict, errors = judge(case)
        if verdict != case["expected"]:
            disagreements.append(f"{case['kind']} {case['name']!r}: expected {case['expected']}, det-k8s {verdict}"
                                 + (f" ({errors[0]})" if errors else ""))
    agreed = len(corpus.CASES) - len(disagreements)
    with capsys.disabled():
        print(f"\nvalidation corpus: det-k8s agrees on {agreed}/{len(corpus.CASES)} cases "
              f"({len(corpus.podspec_cases())} pod specs, {len(corpus.chart_cases())} chart values)")
    assert not disagreements, "\n".join(disagreements)


@pytest.mark.parametrize("case", [c for c in corpus.CASES if c["expected"] == corpus.REFUSE][:40],
                         ids=lambda c: c["name"])
def test_a_refusal_is_one_line_with_the_key_path(case):
    _, errors = judge(case)
    for line in errors:
        assert "\n" not in line and line.startswith("error: ")
    if case["kind"] == "podspec":
        assert all(line.startswith("error: pod.") for line in errors), errors
