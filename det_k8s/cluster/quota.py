"""Kubernetes ResourceQuotas as the API server's quota admission applies them to a pod being created.

A quota in a namespace lists hard limits (`spec.hard`, copied by the quota controller to
`status.hard`) and what is in use (`status.used`). Creating a pod adds its usage to `status.used`
of every quota of its namespace whose scopes match the pod, and is refused (403 `exceeded quota`)
when any resource the pod uses and the quota limits would then exceed the limit. Usage of a pod
(Kubernetes' pod evaluator, `pkg/quota/v1/evaluator/core/pods.go`):

- `pods` and `count/pods`: 1;
- `requests.cpu`, `requests.memory`, `requests.ephemeral-storage` and their bare forms `cpu`,
  `memory`, `ephemeral-storage`: the pod's effective request; `limits.*` its effective limit;
- hugepages: `hugepages-<size>` and `requests.hugepages-<size>`;
- extended resources (`nvidia.com/gpu`): only `requests.<name>`.

Scopes (`spec.scopes`, each the same as a `scopeSelector` requirement with `Exists`, and
`spec.scopeSelector`; all must match): `Terminating` / `NotTerminating` (`activeDeadlineSeconds`
set or not), `BestEffort` / `NotBestEffort` (no container asks for or limits cpu or memory),
`PriorityClass` (the pod's `priorityClassName`: `Exists`, `In`, `NotIn`, `DoesNotExist`),
`CrossNamespacePodAffinity` (a pod (anti-)affinity term naming namespaces or a namespace
selector). Scopes that never select pods (`VolumeAttributesClass`) make the quota not apply.

Everything here is pure and in integer milli-units, like the rest of the model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError, MalformedObject
from ..quantity import QuantityError, format_milli, parse_milli

ONE = 1000  # one, in milli-units
COMPUTE = ("cpu", "memory", "ephemeral-storage")  # standard resources quota tracks as requests.X, limits.X and X
QOS = ("cpu", "memory")  # what makes a pod BestEffort or not
CONTAINER_CHECKED = ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory")
POD_SCOPES = frozenset({"Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass",
                        "CrossNamespacePodAffinity"})


@dataclass(frozen=True, slots=True)
class ScopeRequirement:
    """One scope a quota is restricted to: `scope` with `operator` (Exists, DoesNotExist, In, NotIn) and `values`."""

    scope: str
    operator: str = "Exists"
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """A namespace's ResourceQuota: `hard` (status.hard as admission reads it, else spec.hard) and `used`
    (status.used), both resource name -> milli-units, and the scopes it is restricted to."""

    namespace: str
    name: str
    hard: Mapping[str, int] = field(default_factory=dict)
    used: Mapping[str, int] = field(default_factory=dict)
    scopes: tuple[ScopeRequirement, ...] = ()

    @property
    def selects_pods(self) -> bool:
        return all(scope.scope in POD_SCOPES for scope in self.scopes)

    def matches(self, pod: QuotaFacts) -> bool:
        """Does this quota count the pod (every scope requirement matches it)?"""
        return self.selects_pods and all(_scope_matches(scope, pod) for scope in self.scopes)

    def charge_of(self, pod: QuotaFacts) -> dict[str, int]:
        """What creating the pod adds to this quota's use: its usage of the resources the quota limits."""
        if not self.matches(pod):
            return {}
        return {name: amount for name, amount in pod.usage.items() if name in self.hard and amount}


@dataclass(frozen=True, slots=True)
class QuotaFacts:
    """What quota admission reads of a pod: its usage (quota resource name -> milli-units) and its scopes.

    `unset` lists, per compute quota resource (`limits.cpu`, `requests.memory`, ...), the containers
    that do not set it: the API server refuses such a pod under a quota on that resource unless a
    LimitRange gives it a default.
    """

    usage: Mapping[str, int] = field(default_factory=dict)
    best_effort: bool = False
    terminating: bool = False
    priority_class: str = ""
    cross_namespace: bool = False
    unset: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def _scope_matches(scope: ScopeRequirement, pod: QuotaFacts) -> bool:
    name, operator = scope.scope, scope.operator
    if name == "Terminating":
        return pod.terminating
    if name == "NotTerminating":
        return not pod.terminating
    if name == "BestEffort":
        return pod.best_effort
    if name == "NotBestEffort":
        return not pod.best_effort
    if name == "CrossNamespacePodAffinity":
        return pod.cross_namespace
    if name == "PriorityClass":
        if operator == "Exists":
            return bool(pod.priority_class)
        if operator == "DoesNotExist":
            return not pod.priority_class
        if operator == "In":
            return pod.priority_class in scope.values
        if operator == "NotIn":
            return pod.priority_class not in scope.values
    return False


def usage_of(requests: Mapping[str, int], limits: Mapping[str, int] | None = None) -> dict[str, int]:
    """A pod's usage in quota resource names, from its effective requests and limits (milli-units)."""
    usage = {"pods": ONE, "count/pods": ONE}
    for name, amount in requests.items():
        if name == "pods" or not amount:
            continue
        if name in COMPUTE or name.startswith("hugepages-"):
            usage[name] = amount
            usage[f"requests.{name}"] = amount
        elif "/" in name and not name.startswith("kubernetes.io/"):  # an extended resource: requests.<name> only
            usage[f"requests.{name}"] = amount
    for name, amount in (limits or {}).items():
        if name in COMPUTE and amount:
            usage[f"limits.{name}"] = amount
    return usage


def facts_from_requests(requests: Mapping[str, int]) -> QuotaFacts:
    """Quota facts when only the effective requests are known (queue entries written before quotas were read)."""
    return QuotaFacts(usage_of(requests), best_effort=not any(requests.get(name) for name in QOS))


def _quantities(raw: Any, where: str) -> dict[str, int]:
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, int] = {}
    for name, text in raw.items():
        try:
            out[str(name)] = parse_milli(text)
        except (QuantityError, TypeError, ValueError) as exc:
            raise InputError(f"{where}: {name}: not a quantity ({exc})") from exc
    return out


def _mapping(raw: Any) -> Mapping[str, Any]:
    return raw if isinstance(raw, Mapping) else {}


def _containers(spec: Mapping[str, Any], key: str) -> Iterable[Mapping[str, Any]]:
    raw = spec.get(key)
    return [c for c in raw if isinstance(c, Mapping)] if isinstance(raw, list) else []


def containers_total(apps: Iterable[Any], inits: Iterable[Any],
                     amounts: Callable[[Any], Mapping[str, int]]) -> dict[str, int]:
    """The containers' part of a pod's effective request or limit (resourcehelper's rule): per resource, the larger
    of the app containers plus the sidecars (init containers with restartPolicy Always) and the largest other init
    container plus the sidecars started before it. `amounts` gives one container's requests or limits."""
    total: dict[str, int] = {}
    for container in apps:
        for name, amount in amounts(container).items():
            total[name] = total.get(name, 0) + amount
    sidecars: dict[str, int] = {}
    peak: dict[str, int] = {}
    for container in inits:
        own = amounts(container)
        if container.get("restartPolicy") == "Always":  # a sidecar keeps running beside the app
            for name, amount in own.items():
                sidecars[name] = sidecars.get(name, 0) + amount
            continue
        for name, amount in own.items():
            peak[name] = max(peak.get(name, 0), amount + sidecars.get(name, 0))
    for name, amount in sidecars.items():
        total[name] = total.get(name, 0) + amount
    for name, amount in peak.items():
        total[name] = max(total.get(name, 0), amount)
    return total


def effective_limits(spec: Mapping[str, Any], where: str = "pod") -> dict[str, int]:
    """The pod's effective limit per resource (resourcehelper.PodLimits): the containers' (`containers_total`), a
    pod-level limit for cpu and memory, plus the overhead."""
    total = containers_total(_containers(spec, "containers"), _containers(spec, "initContainers"),
                             lambda c: _quantities(_mapping(c.get("resources")).get("limits"), where))
    pod_level = spec.get("resources")
    if isinstance(pod_level, Mapping):
        for name, amount in _quantities(pod_level.get("limits"), where).items():
            if name in QOS:
                total[name] = amount
    if total:
        for name, amount in _quantities(spec.get("overhead"), where).items():
            if name in total:
                total[name] += amount
    return {name: amount for name, amount in total.items() if amount}


def facts_from_spec(spec: Mapping[str, Any], requests: Mapping[str, int], where: str = "pod") -> QuotaFacts:
    """Quota facts of a pod spec whose effective requests are `requests` (`read.effective_requests`)."""
    limits = effective_limits(spec, where)
    everything = [*_containers(spec, "containers"), *_containers(spec, "initContainers")]
    best_effort = True
    unset: dict[str, list[str]] = {}
    for container in everything:
        resources = _mapping(container.get("resources"))
        own_requests = _quantities(resources.get("requests"), where)
        own_limits = _quantities(resources.get("limits"), where)
        if any(own_requests.get(name) or own_limits.get(name) for name in QOS):
            best_effort = False
        for name in QOS:  # API defaulting: a limit without a request sets the request
            if name not in own_requests and name not in own_limits:
                for form in (name, f"requests.{name}"):
                    unset.setdefault(form, []).append(str(container.get("name") or "?"))
            if name not in own_limits:
                unset.setdefault(f"limits.{name}", []).append(str(container.get("name") or "?"))
    pod_level = spec.get("resources")
    if isinstance(pod_level, Mapping) and any(
            name in _mapping(pod_level.get("requests")) or name in _mapping(pod_level.get("limits")) for name in QOS):
        best_effort = False
    deadline = spec.get("activeDeadlineSeconds")
    terminating = isinstance(deadline, int) and not isinstance(deadline, bool) and deadline >= 0
    return QuotaFacts(usage_of(requests, limits), best_effort, terminating, str(spec.get("priorityClassName") or ""),
                      _cross_namespace(spec.get("affinity")), {k: tuple(v) for k, v in sorted(unset.items())})


def _cross_namespace(affinity: Any) -> bool:
    """A pod (anti-)affinity term, required or preferred, that names namespaces or selects them by label."""
    if not isinstance(affinity, Mapping):
        return False
    for kind in ("podAffinity", "podAntiAffinity"):
        rules = affinity.get(kind)
        if not isinstance(rules, Mapping):
            continue
        terms = list(rules.get("requiredDuringSchedulingIgnoredDuringExecution") or ())
        terms += [t.get("podAffinityTerm") for t in rules.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
                  if isinstance(t, Mapping)]
        for term in terms:
            if isinstance(term, Mapping) and (term.get("namespaces") or term.get("namespaceSelector") is not None):
                return True
    return False


def quota_from_object(obj: Mapping[str, Any]) -> ResourceQuota:
    """A ResourceQuota object (as the API or kubectl gives it) in the model."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = str(meta.get("name") or "")
    spec = _mapping(obj.get("spec"))
    status = _mapping(obj.get("status"))
    try:
        hard = _quantities(status.get("hard"), "status.hard") or _quantities(spec.get("hard"), "spec.hard")
        used = _quantities(status.get("used"), "status.used")
    except InputError as exc:
        raise MalformedObject("ResourceQuota", name, exc.message) from exc
    raw_scopes = spec.get("scopes")
    scopes = [ScopeRequirement(str(scope)) for scope in (raw_scopes if isinstance(raw_scopes, list) else ())]
    selector = spec.get("scopeSelector")
    expressions = selector.get("matchExpressions") if isinstance(selector, Mapping) else None
    for expression in expressions if isinstance(expressions, list) else ():
        if isinstance(expression, Mapping):
            values = expression.get("values")
            scopes.append(ScopeRequirement(str(expression.get("scopeName") or ""),
                                           str(expression.get("operator") or "Exists"),
                                           tuple(map(str, values)) if isinstance(values, list) else ()))
    return ResourceQuota(str(meta.get("namespace") or "default"), name, hard, used, tuple(scopes))


def amount(resource: str, milli: int) -> str:
    """A quota amount as Kubernetes writes it (`requests.memory` formatted as memory)."""
    bare = resource.removeprefix("requests.").removeprefix("limits.")
    return format_milli("pods" if bare.startswith("count/") else bare, milli)
