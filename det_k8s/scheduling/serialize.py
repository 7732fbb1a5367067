"""A PodGroup as plain JSON data and back, for the queue entries kept in the cluster."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..cluster.model import Constraints, Requirement, Toleration
from .model import PodGroup, PodRequest


def _constraints_to_dict(constraints: Constraints) -> dict[str, Any]:
    return {
        "nodeSelector": dict(constraints.node_selector),
        "requiredTerms": [[{"key": r.key, "operator": r.operator, "values": list(r.values)} for r in term]
                          for term in constraints.required_terms],
        "tolerations": [{"key": t.key, "operator": t.operator, "value": t.value, "effect": t.effect}
                        for t in constraints.tolerations],
    }


def _constraints_from_dict(data: Mapping[str, Any]) -> Constraints:
    return Constraints(
        {str(k): str(v) for k, v in (data.get("nodeSelector") or {}).items()},
        tuple(tuple(Requirement(str(r["key"]), str(r["operator"]), tuple(map(str, r.get("values") or ())))
                    for r in term) for term in data.get("requiredTerms") or ()),
        tuple(Toleration(str(t.get("key", "")), str(t.get("operator", "Equal")), str(t.get("value", "")),
                         str(t.get("effect", ""))) for t in data.get("tolerations") or ()),
    )


def group_to_dict(group: PodGroup) -> dict[str, Any]:
    return {
        "id": group.id, "experiment": group.experiment, "user": group.user, "priority": group.priority,
        "submittedAt": group.submitted_at, "sequence": group.sequence, "slots": group.slots,
        "pods": [{"name": p.name, "rank": p.rank, "requests": dict(p.requests),
                  "constraints": _constraints_to_dict(p.constraints)} for p in group.pods],
    }


def group_from_dict(data: Mapping[str, Any]) -> PodGroup:
    return PodGroup(
        id=str(data["id"]), experiment=str(data["experiment"]), user=str(data["user"]),
        priority=int(data["priority"]), submitted_at=str(data["submittedAt"]), sequence=int(data["sequence"]),
        pods=tuple(PodRequest(str(p["name"]), int(p["rank"]), {str(k): int(v) for k, v in p["requests"].items()},
                              _constraints_from_dict(p.get("constraints") or {})) for p in data["pods"]),
        slots=int(data.get("slots", 0)),
    )
