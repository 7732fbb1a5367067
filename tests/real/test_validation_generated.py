"""Differential testing of `validate` against the real kube-apiserver (issue 40, item 1): Hypothesis generates pod specs
biased to the edges of Kubernetes' validation (names and their lengths, duplicates of volumes, containers and ports,
quantities, enums, label and annotation syntax, env names, probes, pod and container security contexts, sysctls, host
aliases, volume mounts, tolerations, node affinity, topology spread), and each is judged twice: by det-k8s offline
(`check_pod_spec`, as `validate` and `plan` judge a gpuPodSpec or an experiment's pod_spec) and by a server-side dry
run of the task pod the master would build from it (`validation_corpus.as_pod`). Every disagreement found becomes a
named case of tests/support/validation_corpus.py
(the first: two volumes of one name, `spec.volumes[1].name: Duplicate value`).

CI: a bounded, derandomized budget (VALIDATION_ORACLE_EXAMPLES, default 150). A long campaign:
`VALIDATION_ORACLE_EXAMPLES=20000 VALIDATION_ORACLE_RANDOM=1 .venv/bin/python -m pytest
tests/real/test_validation_generated.py -q -p no:cacheprovider` (DET_K8S_KUBE_VERSION=1.31.x for that release).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import validation_corpus as corpus
from tests.unit.settings.test_validation_corpus import judge

pytestmark = pytest.mark.real

EXAMPLES = int(os.environ.get("VALIDATION_ORACLE_EXAMPLES", "150"))
RANDOM = bool(os.environ.get("VALIDATION_ORACLE_RANDOM"))

# names at the edges of a DNS-1123 label (volumes, containers) and of an IANA service name (ports)
LABEL_NAMES = ["data", "cache", "a", "a-b", "a" * 63, "a" * 64, "Data", "my_data", "-a", "a-", "1a", "a.b", ""]
PORT_NAMES = ["http", "metrics", "a" * 15, "a" * 16, "HTTP", "1234", "a--b", "-http", "h-1", ""]
QUANTITIES = corpus.GOOD_QUANTITIES + corpus.BAD_QUANTITIES
LABEL_KEYS = ["team", "a/b", "example.com/team", "a" * 63, "a" * 64, "-team", "team-", "Team_1", "a/b/c", "/a", ""]
LABEL_VALUES = ["nlp", "", "a" * 63, "a" * 64, "-nlp", "nlp-", "a b", "a.b_c-d"]

volume_sources = st.sampled_from([{"emptyDir": {}}, {"hostPath": {"path": "/data"}}, {"configMap": {"name": "cm"}},
                                  {"secret": {"secretName": "s"}}])
volumes = st.lists(st.builds(lambda name, source: {"name": name, **source}, st.sampled_from(LABEL_NAMES),
                             volume_sources), max_size=3)
ports = st.lists(st.fixed_dictionaries(
    {"containerPort": st.sampled_from([80, 1, 65535, 0, 65536, 8080])},
    optional={"name": st.sampled_from(PORT_NAMES), "protocol": st.sampled_from(["TCP", "UDP", "SCTP", "tcp", "HTTP"]),
              "hostPort": st.sampled_from([8080, 0, 70000])}), max_size=3)
resources = st.fixed_dictionaries({}, optional={
    "requests": st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), st.sampled_from(QUANTITIES),
                                max_size=2),
    "limits": st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), st.sampled_from(QUANTITIES),
                              max_size=2)})
ENV_NAMES = ["A", "A_B", "a.b", "a-b", "1A", "a=b", "", "A B", "-a", "_a"]
env = st.lists(st.fixed_dictionaries({"name": st.sampled_from(ENV_NAMES), "value": st.just("x")}), max_size=3)
probe = st.fixed_dictionaries({}, optional={
    "exec": st.just({"command": ["true"]}), "tcpSocket": st.sampled_from([{"port": 80}, {"port": "http"},
                                                                          {"port": 0}, {"port": "HTTP"}]),
    "periodSeconds": st.sampled_from([0, 1, 10, -1]), "successThreshold": st.sampled_from([1, 2, 0]),
    "timeoutSeconds": st.sampled_from([1, 0, -1]), "failureThreshold": st.sampled_from([1, 0]),
    "initialDelaySeconds": st.sampled_from([0, -1])})
security = st.fixed_dictionaries({}, optional={
    "runAsUser": st.sampled_from([0, 1000, -1]), "runAsGroup": st.sampled_from([0, -1]),
    "privileged": st.booleans(), "allowPrivilegeEscalation": st.booleans(),
    "capabilities": st.fixed_dictionaries({}, optional={"add": st.lists(st.sampled_from(["NET_ADMIN", "net_admin",
                                                                                         "", "SYS_PTRACE"]),
                                                                        max_size=2)}),
    "procMount": st.sampled_from(["Default", "Unmasked", "default"])})
mounts = st.lists(st.fixed_dictionaries({"name": st.sampled_from(["data", "cache", "missing", ""]),
                                         "mountPath": st.sampled_from(["/data", "", "data", "/cache"])},
                                        optional={"readOnly": st.booleans(), "subPath": st.sampled_from(
                                            ["", "a", "../a", "/a"])}), max_size=2)
main = st.fixed_dictionaries({"name": st.just(corpus.MAIN)}, optional={
    "ports": ports, "resources": resources, "env": env, "livenessProbe": probe, "readinessProbe": probe,
    "securityContext": security, "volumeMounts": mounts,
    "imagePullPolicy": st.sampled_from(["Always", "IfNotPresent", "Never", "always", ""])})
expressions = st.lists(st.fixed_dictionaries({
    "key": st.sampled_from(["zone", "a/b", "", "a/b/c"]),
    "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Equals"])},
    optional={"values": st.sampled_from([[], ["a"], ["1"], ["a", "b"], ["a" * 64]])}), min_size=1, max_size=2)
affinity = st.builds(lambda e: {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": e}]}}}, expressions)
spread = st.lists(st.fixed_dictionaries({
    "maxSkew": st.sampled_from([1, 0, -1, 2]), "topologyKey": st.sampled_from(["zone", "", "a/b/c"]),
    "whenUnsatisfiable": st.sampled_from(["DoNotSchedule", "ScheduleAnyway", "Never", ""])},
    optional={"labelSelector": st.just({"matchLabels": {"app": "x"}}), "minDomains": st.sampled_from([1, 0, 2])}),
    max_size=2)
sidecars = st.lists(st.fixed_dictionaries({"name": st.sampled_from(LABEL_NAMES + [corpus.MAIN]),
                                           "image": st.just("busybox")}, optional={"ports": ports}), max_size=2)
tolerations = st.lists(st.fixed_dictionaries({}, optional={
    "key": st.sampled_from(["nvidia.com/gpu", "", "a/b/c", "team"]),
    "operator": st.sampled_from(list(corpus.OPERATORS)), "effect": st.sampled_from(list(corpus.EFFECTS)),
    "value": st.sampled_from(["", "x", "a" * 64])}), max_size=2)
labels = st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES), max_size=2)


pod_security = st.fixed_dictionaries({}, optional={
    "runAsUser": st.sampled_from([0, 1000, -1]), "fsGroup": st.sampled_from([0, -1, 2000]),
    "supplementalGroups": st.lists(st.sampled_from([0, 1, -1]), max_size=2),
    "runAsNonRoot": st.booleans(), "fsGroupChangePolicy": st.sampled_from(["Always", "OnRootMismatch", "always"]),
    "sysctls": st.lists(st.fixed_dictionaries({"name": st.sampled_from(
        ["net.ipv4.ip_forward", "kernel.shm_rmid_forced", "bad name", "a", "net/ipv4/ip_forward", ""]),
        "value": st.just("1")}), max_size=2)})
host_aliases = st.lists(st.fixed_dictionaries({"ip": st.sampled_from(["10.0.0.1", "::1", "not-an-ip", "", "0.0.0.0"])},
                                              optional={"hostnames": st.lists(st.sampled_from(
                                                  ["db", "db.local", "DB", "a_b", ""]), max_size=2)}), max_size=2)
ANNOTATION_KEYS = ["a", "example.com/a", "a/b/c", "-a", "A_b", "a" * 64, ""]


@st.composite
def pod_specs(draw: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    containers = [draw(main), *draw(sidecars)]
    spec["containers"] = containers
    if draw(st.booleans()):
        spec["volumes"] = draw(volumes)
    if draw(st.booleans()):
        spec["tolerations"] = draw(tolerations)
    if draw(st.booleans()):
        spec["nodeSelector"] = draw(labels)
    if draw(st.booleans()):
        spec["restartPolicy"] = draw(st.sampled_from(["Never", "OnFailure", "Always", "never", "Sometimes"]))
    if draw(st.booleans()):
        spec["affinity"] = draw(affinity)
    if draw(st.booleans()):
        spec["topologySpreadConstraints"] = draw(spread)
    if draw(st.booleans()):
        spec["securityContext"] = draw(pod_security)
    if draw(st.integers(0, 3)) == 0:
        spec["hostAliases"] = draw(host_aliases)
    if draw(st.integers(0, 3)) == 0:
        spec["activeDeadlineSeconds"] = draw(st.sampled_from([1, 0, -1, 2**31]))
    if draw(st.integers(0, 3)) == 0:
        spec["terminationGracePeriodSeconds"] = draw(st.sampled_from([0, 30, -1]))
    document: dict[str, Any] = {"spec": spec}
    if draw(st.booleans()):
        document["metadata"] = {"labels": draw(labels)}
    if draw(st.integers(0, 3)) == 0:
        document.setdefault("metadata", {})["annotations"] = draw(st.dictionaries(
            st.sampled_from(ANNOTATION_KEYS), st.just("x"), max_size=2))
    return document


@pytest.fixture(scope="module")
def kube(control_plane) -> tuple[Any, Any]:
    from det_k8s.settings.podspec import cluster_version

    status, answer = control_plane.request("GET", "/version")
    version = cluster_version(answer)
    assert status == 200 and version is not None and version.wanted is not None, answer
    return control_plane, version


SEEN = {"cases": 0, "disagreements": 0}


@settings(max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(document=pod_specs())
def test_det_k8s_and_the_real_api_server_judge_generated_pod_specs_alike(kube, document):
    from det_k8s.settings.podspec import checking_against

    plane, version = kube
    case: corpus.Case = {"name": "generated", "kind": "podspec", "value": document, "expected": "", "why": ""}
    pod = corpus.as_pod(case, name="generated")
    status, body = plane.request("POST", "/api/v1/namespaces/default/pods?dryRun=All", pod)
    theirs = corpus.ACCEPT if status < 300 else corpus.REFUSE
    with checking_against(version):
        ours, lines = judge(case)
    SEEN["cases"] += 1
    if theirs != ours:
        SEEN["disagreements"] += 1
    message = body.get("message") if isinstance(body, dict) else body
    print(f"validation oracle (generated): {SEEN['cases']} cases, {SEEN['disagreements']} disagreements on "
          f"kube-apiserver {version.wanted}", file=sys.stderr, end="\r")
    assert theirs == ours, f"API server {theirs} ({status}: {str(message)[:300]}); det-k8s {ours} {lines[:2]}"
