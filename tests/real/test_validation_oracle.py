"""The validation corpus (tests/validation_corpus.py) judged twice: by det-k8s offline, and by the real
kube-apiserver 1.37 as a server-side dry run of the Pod each case makes (`as_pod`, as Determined's master builds its
task pods). Agreement is reported as a number; the goal is every case (issue 20)."""

from __future__ import annotations

import json
import sys

import pytest

from tests import validation_corpus as corpus
from tests.unit.settings.test_validation_corpus import judge

pytestmark = pytest.mark.real


def test_det_k8s_and_the_real_api_server_judge_every_pod_spec_alike(real_cluster):
    disagreements = []
    cases = corpus.podspec_cases()
    for i, case in enumerate(cases):
        pod = corpus.as_pod(case, name=f"corpus-{i}")
        status, body = real_cluster.plane.request("POST", "/api/v1/namespaces/default/pods?dryRun=All", pod)
        theirs = corpus.ACCEPT if status < 300 else corpus.REFUSE
        ours, lines = judge(case)
        if theirs != ours or theirs != case["expected"]:
            message = body.get("message") if isinstance(body, dict) else body
            disagreements.append(f"{case['name']}: API server {theirs} ({status}: {str(message)[:200]}), det-k8s "
                                 f"{ours} {lines[:1]}, corpus {case['expected']}")
    agreed = len(cases) - len(disagreements)
    print(f"validation oracle: det-k8s and kube-apiserver agree on {agreed} of {len(cases)} pod specs", file=sys.stderr)
    assert disagreements == [], json.dumps(disagreements, indent=1)
    assert real_cluster.api.items("pods", "default") == []  # a dry run creates nothing
