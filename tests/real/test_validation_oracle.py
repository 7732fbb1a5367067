"""The validation corpus (tests/support/validation_corpus.py) judged twice: by det-k8s offline, and by the real
kube-apiserver (1.37, or the release DET_K8S_KUBE_VERSION builds) as a server-side dry run of the Pod each case
makes (`as_pod`, as Determined's master builds its task pods). Agreement is reported as a number; the goal is every
case (issue 20)."""

from __future__ import annotations

import json
import sys

import pytest

from tests.support import validation_corpus as corpus
from tests.unit.settings.test_validation_corpus import judge

pytestmark = pytest.mark.real


# Where det-k8s and an older API server (DET_K8S_KUBE_VERSION=1.31.x) differ on purpose: a field the release does
# not have is refused by det-k8s ("not a field of PodSpec in Kubernetes 1.31"), while that API server drops it
# silently (its decoder ignores unknown fields; the pod then runs without it).
DROPPED_BEFORE = {"spec.resources": (1, 32)}  # pod-level resources: PodLevelResources, alpha in 1.32


def _dropped(case: corpus.Case, kube: tuple[int, int]) -> bool:
    spec = (case["value"] or {}).get("spec") or {}
    return any(field.split(".")[1] in spec and kube < since for field, since in DROPPED_BEFORE.items())


def test_det_k8s_and_the_real_api_server_judge_every_pod_spec_alike(real_cluster):
    from det_k8s.settings.podspec import checking_against, cluster_version

    status, answer = real_cluster.plane.request("GET", "/version")
    version = cluster_version(answer)
    assert status == 200 and version is not None and version.wanted is not None, answer
    kube = tuple(int(x) for x in version.wanted.split("."))
    newest = kube >= (1, 37)  # the corpus's `expected` is the verdict of kube-apiserver 1.37
    disagreements, dropped = [], 0
    cases = corpus.podspec_cases()
    for i, case in enumerate(cases):
        pod = corpus.as_pod(case, name=f"corpus-{i}")
        status, body = real_cluster.plane.request("POST", "/api/v1/namespaces/default/pods?dryRun=All", pod)
        theirs = corpus.ACCEPT if status < 300 else corpus.REFUSE
        with checking_against(version):  # det-k8s judges as for a cluster of that version
            ours, lines = judge(case)
        if theirs != ours and _dropped(case, kube):
            dropped += 1
            continue
        if theirs != ours or (newest and theirs != case["expected"]):
            message = body.get("message") if isinstance(body, dict) else body
            disagreements.append(f"{case['name']}: API server {theirs} ({status}: {str(message)[:200]}), det-k8s "
                                 f"{ours} {lines[:1]}, corpus {case['expected']}")
    agreed = len(cases) - len(disagreements) - dropped
    print(f"validation oracle: det-k8s and kube-apiserver {version.wanted} agree on {agreed} of {len(cases)} pod "
          f"specs ({dropped} refused by det-k8s as not fields of {version.wanted}, which that API server drops)",
          file=sys.stderr)
    assert disagreements == [], json.dumps(disagreements, indent=1)
    assert real_cluster.api.items("pods", "default") == []  # a dry run creates nothing
