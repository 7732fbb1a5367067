"""The scheduling policy, kept in the cluster so every client's passes decide alike.

Preemption and fair-share weights are decisions about other people's work: if one user's client
preempted and another's did not, the outcome would depend on who happened to run the pass. So the
policy lives in one ConfigMap in the namespace, set by an admin with `det-k8s scheduler policy`.
Its team queues (`scheduling/queues.py`) are a versioned document under the key `queues`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from ..errors import InputError, Location, NotFound, PolicyError, Problem, Severity
from ..kube.api import KubeApi
from ..kube.kinds import CONFIGMAPS
from ..labels import MANAGED_BY, MANAGER
from ..safe_read import load_json
from ..scheduling.model import DEFAULT_RESERVE_AFTER, PLACEMENTS, ZONE, Policy
from ..scheduling.queues import QueueTree, parse_queues, queues_data

POLICY_NAME = "det-k8s-scheduler-policy"


def read_policy(api: KubeApi, namespace: str) -> Policy:
    """The namespace's policy (defaults when none was set)."""
    try:
        data = (api.get(CONFIGMAPS, POLICY_NAME, namespace).get("data") or {}).get("policy.json") or "{}"
    except NotFound:
        return Policy()
    where = f"configmap {namespace}/{POLICY_NAME}"
    try:
        raw = load_json(str(data), where)
    except InputError as exc:
        raise InputError(f"{where}: not a readable scheduling policy ({exc})",
                         hint="set it again with `det-k8s scheduler policy ...`, or delete the ConfigMap") from exc
    return policy_from_data(raw, where)


def policy_from_data(raw: object, where: str) -> Policy:
    """A policy from its data (the ConfigMap's policy.json, or a file `plan --policy` reads); keys left out keep their
    defaults. The queues are checked like settings: PolicyError lists every problem with its key path."""
    try:
        if not isinstance(raw, dict):
            raise TypeError("not a JSON object")
        weights = {str(k): float(v) for k, v in (raw.get("weights") or {}).items()}
        reserve_after = float(raw.get("reserve_after", DEFAULT_RESERVE_AFTER))
        topology_key = str(raw.get("topology_key", ZONE))
        toleration = raw.get("extended_resource_toleration")
        placement = str(raw.get("placement") or "auto")
        if placement not in PLACEMENTS:
            raise ValueError(f"placement {placement!r} is not one of {', '.join(PLACEMENTS)}")
    except (InputError, ValueError, TypeError, AttributeError) as exc:
        raise InputError(f"{where}: not a readable scheduling policy ({exc})",
                         hint="set it again with `det-k8s scheduler policy ...`, or delete the ConfigMap") from exc
    bad = [user for user, weight in weights.items() if not math.isfinite(weight) or weight <= 0]
    if bad or not math.isfinite(reserve_after) or reserve_after < 0:
        what = f"weight of {bad[0]}" if bad else "reserve_after"
        raise InputError(f"{where}: the {what} must be a finite positive number",
                         hint="set it again with `det-k8s scheduler policy ...`")
    queues = None
    if raw.get("queues") is not None:
        queues = checked_queues(raw["queues"], where, "queues")
    return Policy(preemption=bool(raw.get("preemption", False)), weights=weights,
                  autoscaling=bool(raw.get("autoscaling", False)), backfill=bool(raw.get("backfill", True)),
                  reserve_after=reserve_after, topology_key=topology_key,
                  topology_required=bool(raw.get("topology_required", False)),
                  extended_resource_toleration=None if toleration is None else bool(toleration), queues=queues,
                  placement=placement)


def checked_queues(raw: object, where: str, key: str = "") -> QueueTree:
    """The queue tree of a queue document (under `key` of a policy document), or PolicyError naming every problem
    (`queues[0].limit.nvidia.com/gpu: ...`); `where` names the file or ConfigMap."""
    tree, problems = parse_queues(raw, key)
    if tree is None:
        found = []
        for line in problems:
            path, _, message = line.partition(": ")
            found.append(Problem(Severity.ERROR, path, message, location=Location(where)))
        raise PolicyError(found)
    return tree


def policy_data(policy: Policy) -> dict[str, object]:
    return {"preemption": policy.preemption, "weights": dict(policy.weights), "autoscaling": policy.autoscaling,
            "backfill": policy.backfill, "reserve_after": policy.reserve_after, "topology_key": policy.topology_key,
            "topology_required": policy.topology_required,
            "extended_resource_toleration": policy.extended_resource_toleration,
            "queues": queues_data(policy.queues) if policy.queues is not None else None,
            "placement": policy.placement}


def write_policy(api: KubeApi, namespace: str, policy: Policy) -> None:
    body: Mapping[str, object] = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": POLICY_NAME, "namespace": namespace,
                     "labels": {MANAGED_BY: MANAGER}},
        "data": {"policy.json": json.dumps(policy_data(policy), sort_keys=True)},
    }
    if api.exists(CONFIGMAPS, POLICY_NAME, namespace):
        api.patch(CONFIGMAPS, POLICY_NAME, {"data": body["data"]}, namespace)
    else:
        api.create(CONFIGMAPS, body, namespace)
