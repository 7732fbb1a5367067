"""Kubernetes' ResourceQuota admission for pods, written from its sources, never importing det_k8s.

`pkg/quota/v1/evaluator/core/pods.go` (usage of a pod, scopes) and
`plugin/pkg/admission/resourcequota/controller.go` (the check): every quota of the pod's namespace
whose scopes match the pod limits the resources it lists; the pod is refused when one it uses
would exceed status.hard once its usage is added to status.used. The emulator enforces it on pod
create and keeps status.used as the quota controller does; tests use it as the oracle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from tests.support.kube_model import quantity, requests

Obj = Mapping[str, Any]
COMPUTE = ("cpu", "memory", "ephemeral-storage")


def _limits(spec: Obj) -> dict[str, Fraction]:
    """resourcehelper.PodLimits: max(sum of app containers + sidecars, each init container + sidecars before it)."""
    def own(container: Obj) -> dict[str, Fraction]:
        return {k: quantity(v) for k, v in ((container.get("resources") or {}).get("limits") or {}).items()}

    total: dict[str, Fraction] = {}
    for container in spec.get("containers") or ():
        for k, v in own(container).items():
            total[k] = total.get(k, Fraction(0)) + v
    sidecars: dict[str, Fraction] = {}
    for container in spec.get("initContainers") or ():
        if container.get("restartPolicy") == "Always":
            for k, v in own(container).items():
                sidecars[k] = sidecars.get(k, Fraction(0)) + v
                total[k] = total.get(k, Fraction(0)) + v
            continue
        for k, v in own(container).items():
            total[k] = max(total.get(k, Fraction(0)), v + sidecars.get(k, Fraction(0)))
    for k, v in (((spec.get("resources") or {}).get("limits")) or {}).items():
        if k in ("cpu", "memory"):
            total[k] = quantity(v)
    for k, v in (spec.get("overhead") or {}).items():
        if k in total:
            total[k] += quantity(v)
    return {k: v for k, v in total.items() if v}


def usage(pod: Obj) -> dict[str, Fraction]:
    """What the pod adds to a quota's use, by quota resource name."""
    spec = pod.get("spec") or {}
    out: dict[str, Fraction] = {"pods": Fraction(1), "count/pods": Fraction(1)}
    for name, amount in requests(spec).items():
        if name == "pods":
            continue
        if name in COMPUTE or name.startswith("hugepages-"):
            out[name] = out[f"requests.{name}"] = amount
        elif "/" in name and not name.split("/")[0].endswith("kubernetes.io"):
            out[f"requests.{name}"] = amount
    for name, amount in _limits(spec).items():
        if name in COMPUTE:
            out[f"limits.{name}"] = amount
    return out


def _best_effort(spec: Obj) -> bool:
    for container in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        resources = container.get("resources") or {}
        for part in ("requests", "limits"):
            if any(k in ("cpu", "memory") and quantity(v) for k, v in (resources.get(part) or {}).items()):
                return False
    level = spec.get("resources") or {}
    return not any(k in ("cpu", "memory") for part in ("requests", "limits") for k in (level.get(part) or {}))


def _cross_namespace(spec: Obj) -> bool:
    affinity = spec.get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        rules = affinity.get(kind) or {}
        terms = list(rules.get("requiredDuringSchedulingIgnoredDuringExecution") or ())
        terms += [t.get("podAffinityTerm") or {} for t in rules.get("preferredDuringSchedulingIgnoredDuringExecution") or ()]
        if any(t.get("namespaces") or t.get("namespaceSelector") is not None for t in terms):
            return True
    return False


def _scope(pod: Obj, scope: str, operator: str, values: Iterable[str]) -> bool:
    spec = pod.get("spec") or {}
    deadline = spec.get("activeDeadlineSeconds")
    terminating = deadline is not None and deadline >= 0
    klass = spec.get("priorityClassName") or ""
    return {
        "Terminating": lambda: terminating,
        "NotTerminating": lambda: not terminating,
        "BestEffort": lambda: _best_effort(spec),
        "NotBestEffort": lambda: not _best_effort(spec),
        "CrossNamespacePodAffinity": lambda: _cross_namespace(spec),
        "PriorityClass": lambda: {"Exists": bool(klass), "DoesNotExist": not klass, "In": klass in set(values),
                                  "NotIn": klass not in set(values)}[operator],
    }.get(scope, lambda: False)()


def matches(quota: Obj, pod: Obj) -> bool:
    spec = quota.get("spec") or {}
    wanted = [(s, "Exists", ()) for s in spec.get("scopes") or ()]
    wanted += [(e["scopeName"], e["operator"], e.get("values") or ())
               for e in (spec.get("scopeSelector") or {}).get("matchExpressions") or ()]
    return all(_scope(pod, *w) for w in wanted)


def hard(quota: Obj) -> dict[str, Fraction]:
    limits = (quota.get("status") or {}).get("hard") or (quota.get("spec") or {}).get("hard") or {}
    return {k: quantity(v) for k, v in limits.items()}


def charge(quota: Obj, pod: Obj) -> dict[str, Fraction]:
    """The pod's usage of the resources the quota limits (nothing when its scopes do not match the pod)."""
    if not matches(quota, pod):
        return {}
    limited = hard(quota)
    return {k: v for k, v in usage(pod).items() if k in limited and v}


def text(amount: Fraction) -> str:
    if amount.denominator == 1:
        return str(amount.numerator)
    return f"{int(amount * 1000)}m"


def _pretty(values: Mapping[str, Fraction]) -> str:
    return ",".join(f"{k}={text(v)}" for k, v in sorted(values.items()))


def refusal(quotas: Iterable[Obj], pod: Obj) -> str | None:
    """The API server's message when quota admission refuses the pod (None: admitted)."""
    name = (pod.get("metadata") or {}).get("name")
    for quota in sorted(quotas, key=lambda q: q["metadata"]["name"]):
        asked = charge(quota, pod)
        if not asked:
            continue
        limited = hard(quota)
        used = {k: quantity(v) for k, v in ((quota.get("status") or {}).get("used") or {}).items()}
        exceeded = sorted(k for k, v in asked.items() if used.get(k, Fraction(0)) + v > limited[k])
        if exceeded:
            return (f'pods "{name}" is forbidden: exceeded quota: {quota["metadata"]["name"]}, requested: '
                    f"{_pretty({k: asked[k] for k in exceeded})}, used: "
                    f"{_pretty({k: used.get(k, Fraction(0)) for k in exceeded})}, limited: "
                    f"{_pretty({k: limited[k] for k in exceeded})}")
    return None


def used_by(quota: Obj, pods: Iterable[Obj]) -> dict[str, str]:
    """status.used as the quota controller computes it: the quota's resources over the namespace's unfinished pods."""
    total = {k: Fraction(0) for k in hard(quota)}
    namespace = quota["metadata"].get("namespace") or "default"
    for pod in pods:
        if (pod.get("metadata") or {}).get("namespace", "default") != namespace:
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for k, v in charge(quota, pod).items():
            total[k] += v
    return {k: text(v) for k, v in sorted(total.items())}
