"""The memoised fast paths of cluster/read.py read exactly what the plain rules read.

`reference_*` below are the straightforward readings (as they were before the fast paths), kept
here as the specification. Random pod specs mix API-shaped values (strings) with what hand-written
YAML can hold (ints, floats, bools, None, nonsense) and repeat resources and tolerations across
pods, so memo hits between equal-looking but different-typed values would show.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from det_k8s.cluster import read
from det_k8s.cluster.model import Constraints, Toleration
from det_k8s.errors import InputError
from det_k8s.quantity import QuantityError, parse_milli


def reference_quantities(raw: Any, where: str) -> dict[str, int]:
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, int] = {}
    for name, text in raw.items():
        try:
            out[str(name)] = parse_milli(text)
        except QuantityError as exc:
            raise InputError(f"{where}: {name}: {exc}") from exc
    return out


def reference_container(container: Mapping[str, Any], where: str) -> dict[str, int]:
    resources = container.get("resources") or {}
    requests = reference_quantities(resources.get("requests"), where)
    for name, amount in reference_quantities(resources.get("limits"), where).items():
        requests.setdefault(name, amount)
    return requests


def reference_requests(spec: Mapping[str, Any], where: str = "pod") -> dict[str, int]:
    apps: dict[str, int] = {}
    for container in spec.get("containers") or ():
        for name, amount in reference_container(container, where).items():
            apps[name] = apps.get(name, 0) + amount
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in spec.get("initContainers") or ():
        req = reference_container(container, where)
        if container.get("restartPolicy") == "Always":
            for name, amount in req.items():
                sidecars[name] = sidecars.get(name, 0) + amount
            continue
        for name, amount in req.items():
            init_peak[name] = max(init_peak.get(name, 0), amount + sidecars.get(name, 0))
    total = {name: apps.get(name, 0) + sidecars.get(name, 0) for name in set(apps) | set(sidecars)}
    for name, amount in init_peak.items():
        total[name] = max(total.get(name, 0), amount)
    for name, amount in reference_quantities(spec.get("overhead"), where).items():
        total[name] = total.get(name, 0) + amount
    return {name: amount for name, amount in total.items() if amount}


def reference_constraints(spec: Mapping[str, Any]) -> Constraints:
    selector = spec.get("nodeSelector") or {}
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = tuple(read._requirements(term.get("matchExpressions"))
                  for term in affinity.get("nodeSelectorTerms") or () if isinstance(term, Mapping))
    tolerations = tuple(
        Toleration(str(t.get("key") or ""), str(t.get("operator") or "Equal"), str(t.get("value") or ""),
                   str(t.get("effect") or ""))
        for t in spec.get("tolerations") or () if isinstance(t, Mapping))
    return Constraints({str(k): str(v) for k, v in selector.items()}, tuple(t for t in terms if t), tolerations)


SCALARS = st.sampled_from(["1", "500m", "2Gi", "0", "lots", 1, 0, 2, 1.0, 0.5, True, False, None, "True", "1.0"])
NAMES = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods"])
QUANTITIES = st.one_of(st.none(), st.dictionaries(NAMES, SCALARS, max_size=3), st.just(["cpu"]), st.just("1"))
CONTAINERS = st.fixed_dictionaries(
    {"name": st.just("c")},
    optional={"resources": st.one_of(st.none(), st.fixed_dictionaries(
        {}, optional={"requests": QUANTITIES, "limits": QUANTITIES})),
        "restartPolicy": st.sampled_from(["Always", "Never"])})
TOLERATION = st.one_of(
    st.fixed_dictionaries({}, optional={
        "key": st.sampled_from(["gpu", "", None, 1, True]), "operator": st.sampled_from(["Exists", "Equal", None]),
        "value": st.sampled_from(["1", 1, True, "True", None, 1.0]), "effect": st.sampled_from(["NoSchedule", ""]),
        "tolerationSeconds": st.sampled_from([300, None])}),
    st.just("not a mapping"))
AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}
SPECS = st.fixed_dictionaries({}, optional={
    "containers": st.one_of(st.lists(CONTAINERS, max_size=3), st.none()),
    "initContainers": st.lists(CONTAINERS, max_size=2),
    "overhead": QUANTITIES,
    "nodeSelector": st.one_of(st.none(), st.dictionaries(st.sampled_from(["pool", "zone"]), SCALARS, max_size=2)),
    "tolerations": st.one_of(st.none(), st.lists(TOLERATION, max_size=3)),
    "affinity": st.sampled_from([None, {}, AFFINITY]),
})
PORTS = st.lists(st.fixed_dictionaries({"containerPort": st.sampled_from([80, 29500])},
                                       optional={"hostPort": st.sampled_from([0, 80, None])}), max_size=2)
VOLUMES = st.lists(st.sampled_from([{"name": "a", "configMap": {"name": "c"}}, {"name": "p", "projected": {}},
                                    {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
                                    {"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]), max_size=3)
FULL_SPECS = st.fixed_dictionaries({}, optional={
    "containers": st.lists(st.fixed_dictionaries({"name": st.just("c")}, optional={"ports": PORTS}), max_size=2),
    "nodeSelector": st.one_of(st.none(), st.dictionaries(st.sampled_from(["pool", "zone"]), SCALARS, max_size=2)),
    "tolerations": st.one_of(st.none(), st.lists(TOLERATION, max_size=2)),
    "volumes": VOLUMES,
    "hostNetwork": st.booleans(),
    "os": st.sampled_from([{"name": "linux"}, None]),
    "topologySpreadConstraints": st.sampled_from([None, [{"maxSkew": 1, "topologyKey": "zone",
                                                          "whenUnsatisfiable": "DoNotSchedule"}]]),
    "schedulingGates": st.sampled_from([None, [{"name": "wait"}]]),
    "runtimeClassName": st.sampled_from([None, "nvidia"]),
})


def outcome(function: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "ok", function(*args)
    except Exception as exc:  # the same failure, with the same message, is part of the behaviour
        return type(exc).__name__, str(exc)


@settings(max_examples=400, deadline=None)
@given(st.lists(SPECS, min_size=1, max_size=8))
def test_effective_requests_match_the_plain_rule(specs):
    for spec in specs + specs:  # the second round reads through warm memos
        assert outcome(read.effective_requests, spec, "pod p") == outcome(reference_requests, spec, "pod p")


@settings(max_examples=400, deadline=None)
@given(st.lists(SPECS, min_size=1, max_size=8))
def test_constraints_match_the_plain_reading(specs):
    for spec in specs + specs:
        assert outcome(read.constraints_from_spec, spec) == outcome(reference_constraints, spec)


@settings(max_examples=400, deadline=None)
@given(st.lists(FULL_SPECS, min_size=1, max_size=8))
def test_the_fast_path_reads_what_the_full_reading_reads(specs):
    """Memoised or not, every field that places a pod is read: host ports, claims, OS, spread, gates."""
    for spec in specs + specs:
        assert outcome(read.constraints_from_spec, spec) == outcome(read._constraints, spec)


def test_memo_results_cannot_be_changed_through_a_pod():
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    first = read.effective_requests(spec)
    first["cpu"] = 99
    assert read.effective_requests(spec) == {"cpu": 1000}


def test_values_that_only_look_equal_are_not_confused():
    # 1 == True == 1.0 in Python; as quantities, tolerations and selectors they differ
    assert read.effective_requests({"containers": [{"resources": {"requests": {"cpu": 1}}}]}) == {"cpu": 1000}
    assert outcome(read.effective_requests, {"containers": [{"resources": {"requests": {"cpu": True}}}]})[0] \
        == "InputError"
    one = read.constraints_from_spec({"tolerations": [{"key": "k", "value": 1}]})
    true = read.constraints_from_spec({"tolerations": [{"key": "k", "value": True}]})
    assert (one.tolerations[0].value, true.tolerations[0].value) == ("1", "True")
