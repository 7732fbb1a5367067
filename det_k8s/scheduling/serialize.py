"""A PodGroup as plain JSON data and back, for the queue entries kept in the cluster.

Every placement constraint round-trips (node affinity with matchFields, preferences, pod
affinity and anti-affinity, spread, host ports, claims), with each pod's labels and namespace.
Entries written before these existed read back with the defaults (no such constraints).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..cluster.model import (
    Constraints,
    HostPort,
    LabelSelector,
    PodAffinityTerm,
    Requirement,
    SpreadConstraint,
    Term,
    Toleration,
    VolumeClaim,
)
from ..cluster.quota import QuotaFacts
from .model import PodGroup, PodRequest


def _req(r: Requirement) -> dict[str, Any]:
    data: dict[str, Any] = {"key": r.key, "operator": r.operator, "values": list(r.values)}
    if r.field:
        data["field"] = True
    return data


def _req_back(data: Mapping[str, Any]) -> Requirement:
    return Requirement(str(data["key"]), str(data["operator"]), tuple(map(str, data.get("values") or ())),
                       bool(data.get("field", False)))


def _terms(terms: Sequence[Term]) -> list[list[dict[str, Any]]]:
    return [[_req(r) for r in term] for term in terms]


def _terms_back(data: Any) -> tuple[Term, ...]:
    return tuple(tuple(_req_back(r) for r in term) for term in data or ())


def _selector(selector: LabelSelector | None) -> dict[str, Any] | None:
    if selector is None:
        return None
    return {"requirements": [_req(r) for r in selector.requirements], "nothing": selector.nothing}


def _selector_back(data: Any) -> LabelSelector | None:
    if data is None:
        return None
    return LabelSelector(tuple(_req_back(r) for r in data.get("requirements") or ()), bool(data.get("nothing")))


def _pod_term(term: PodAffinityTerm) -> dict[str, Any]:
    return {"selector": _selector(term.selector), "topologyKey": term.topology_key,
            "namespaces": list(term.namespaces), "namespaceSelector": _selector(term.namespace_selector)}


def _pod_term_back(data: Mapping[str, Any]) -> PodAffinityTerm:
    return PodAffinityTerm(_selector_back(data.get("selector")) or LabelSelector(nothing=True),
                           str(data.get("topologyKey") or ""), tuple(map(str, data.get("namespaces") or ())),
                           _selector_back(data.get("namespaceSelector")))


def _constraints_to_dict(c: Constraints) -> dict[str, Any]:
    return {
        "nodeSelector": dict(c.node_selector),
        "requiredTerms": _terms(c.required_terms),
        "tolerations": [{"key": t.key, "operator": t.operator, "value": t.value, "effect": t.effect}
                        for t in c.tolerations],
        "preferredTerms": [{"weight": w, "term": [_req(r) for r in term]} for w, term in c.preferred_terms],
        "affinity": [_pod_term(t) for t in c.affinity],
        "antiAffinity": [_pod_term(t) for t in c.anti_affinity],
        "spread": [{"maxSkew": s.max_skew, "topologyKey": s.topology_key, "selector": _selector(s.selector),
                    "minDomains": s.min_domains, "honorAffinity": s.honor_affinity, "honorTaints": s.honor_taints}
                   for s in c.spread],
        "hostPorts": [{"port": p.port, "protocol": p.protocol, "ip": p.ip} for p in c.host_ports],
        "claims": [{"name": v.name, "ephemeral": v.ephemeral, "storageClass": v.storage_class,
                    "readWriteOncePod": v.read_write_once_pod} for v in c.claims],
        "os": c.os,
        "unmodelled": list(c.unmodelled),
        **({"resourceClaims": list(c.resource_claims)} if c.resource_claims else {}),
    }


def _constraints_from_dict(data: Mapping[str, Any]) -> Constraints:
    return Constraints(
        {str(k): str(v) for k, v in (data.get("nodeSelector") or {}).items()},
        _terms_back(data.get("requiredTerms")),
        tuple(Toleration(str(t.get("key", "")), str(t.get("operator", "Equal")), str(t.get("value", "")),
                         str(t.get("effect", ""))) for t in data.get("tolerations") or ()),
        tuple((int(p["weight"]), tuple(_req_back(r) for r in p["term"])) for p in data.get("preferredTerms") or ()),
        tuple(_pod_term_back(t) for t in data.get("affinity") or ()),
        tuple(_pod_term_back(t) for t in data.get("antiAffinity") or ()),
        tuple(SpreadConstraint(int(s["maxSkew"]), str(s["topologyKey"]),
                               _selector_back(s.get("selector")) or LabelSelector(nothing=True),
                               int(s.get("minDomains", 1)), bool(s.get("honorAffinity", True)),
                               bool(s.get("honorTaints", False))) for s in data.get("spread") or ()),
        tuple(HostPort(int(p["port"]), str(p.get("protocol") or "TCP"), str(p.get("ip") or ""))
              for p in data.get("hostPorts") or ()),
        tuple(VolumeClaim(str(v["name"]), bool(v.get("ephemeral")), v.get("storageClass"),
                          bool(v.get("readWriteOncePod"))) for v in data.get("claims") or ()),
        str(data.get("os") or ""),
        tuple(map(str, data.get("unmodelled") or ())),
        tuple(map(str, data.get("resourceClaims") or ())),
    )


def _quota(facts: QuotaFacts) -> dict[str, Any]:
    return {"usage": dict(facts.usage), "bestEffort": facts.best_effort, "terminating": facts.terminating,
            "priorityClass": facts.priority_class, "crossNamespace": facts.cross_namespace,
            "unset": {name: list(containers) for name, containers in facts.unset.items()}}


def _quota_back(data: Any) -> QuotaFacts | None:
    if not isinstance(data, Mapping):
        return None  # written before quotas were read: its requests stand in (`PodRequest.quota_facts`)
    return QuotaFacts({str(k): int(v) for k, v in (data.get("usage") or {}).items()}, bool(data.get("bestEffort")),
                      bool(data.get("terminating")), str(data.get("priorityClass") or ""),
                      bool(data.get("crossNamespace")),
                      {str(k): tuple(map(str, v)) for k, v in (data.get("unset") or {}).items()})


def _pod(p: PodRequest) -> dict[str, Any]:
    data = {"name": p.name, "rank": p.rank, "requests": dict(p.requests),
            "constraints": _constraints_to_dict(p.constraints), "labels": dict(p.labels), "namespace": p.namespace}
    if p.quota is not None:
        data["quota"] = _quota(p.quota)
    return data


def group_to_dict(group: PodGroup) -> dict[str, Any]:
    return {
        "id": group.id, "experiment": group.experiment, "user": group.user, "priority": group.priority,
        "submittedAt": group.submitted_at, "sequence": group.sequence, "slots": group.slots,
        "pods": [_pod(p) for p in group.pods],
    }


def group_from_dict(data: Mapping[str, Any]) -> PodGroup:
    return PodGroup(
        id=str(data["id"]), experiment=str(data["experiment"]), user=str(data["user"]),
        priority=int(data["priority"]), submitted_at=str(data["submittedAt"]), sequence=int(data["sequence"]),
        pods=tuple(PodRequest(str(p["name"]), int(p["rank"]), {str(k): int(v) for k, v in p["requests"].items()},
                              _constraints_from_dict(p.get("constraints") or {}),
                              {str(k): str(v) for k, v in (p.get("labels") or {}).items()},
                              str(p.get("namespace") or ""), quota=_quota_back(p.get("quota")))
                   for p in data["pods"]),
        slots=int(data.get("slots", 0)),
    )
