"""The namespaces' ResourceQuotas in one pass: a group starts only if quota admission will take every pod of it.

The API server admits pods one at a time, so a group whose third pod exceeds a quota would be
created in part and torn down again. A pass asks first: for each quota of a namespace the group's
pods go to (only pods not created yet: pods that exist were counted when they were), the pods the
quota's scopes match add their usage of the resources it limits to `status.used` and to what this
pass's earlier placements added; the group waits when any resource it uses would exceed the hard
limit (`Hold`: the first quota and resource, by namespace, quota name and resource). Resources the
group does not use are not checked, as admission does not (a quota lowered below its use blocks only
what asks for more). A victim's usage is returned to its quota only once its pods are gone, so a
preemptor is not credited with it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..cluster.quota import CONTAINER_CHECKED, ResourceQuota
from .model import PodGroup, QuotaHold

Needs = dict[tuple[str, str], dict[str, int]]  # (namespace, quota name) -> resource -> milli-units


class QuotaBook:
    """The quotas of a pass and what its placements have charged to them."""

    def __init__(self, quotas: Sequence[ResourceQuota]) -> None:
        self.quotas: dict[str, list[ResourceQuota]] = {}
        for quota in sorted(quotas, key=lambda q: (q.namespace, q.name)):
            self.quotas.setdefault(quota.namespace, []).append(quota)
        self.by_key = {(q.namespace, q.name): q for q in quotas}
        self.charged: Needs = {}
        self._needs: dict[str, Needs] = {}

    def needs(self, group: PodGroup) -> Needs:
        """What creating the group's pods charges to each quota."""
        found = self._needs.get(group.id)
        if found is None:
            found = {}
            for pod in group.pods:
                if pod.admitted:
                    continue
                for quota in self.quotas.get(pod.namespace or "default", ()):
                    charge = quota.charge_of(pod.quota_facts)
                    if charge:
                        bucket = found.setdefault((quota.namespace, quota.name), {})
                        for name, amount in charge.items():
                            bucket[name] = bucket.get(name, 0) + amount
            self._needs[group.id] = found
        return found

    def hold(self, group: PodGroup) -> QuotaHold | None:
        """The first quota that would refuse a pod of the group, or None when all admit it."""
        if not self.quotas:
            return None
        for key, asked in sorted(self.needs(group).items()):
            quota = self.by_key[key]
            charged = self.charged.get(key, {})
            for name, amount in sorted(asked.items()):
                used = quota.used.get(name, 0) + charged.get(name, 0)
                if used + amount > quota.hard[name]:
                    return QuotaHold(quota.namespace, quota.name, name, used, quota.hard[name], amount)
        return None

    def charge(self, group: PodGroup) -> None:
        """The group is placed: its pods will be created and counted by these quotas."""
        for key, asked in self.needs(group).items():
            bucket = self.charged.setdefault(key, {})
            for name, amount in asked.items():
                bucket[name] = bucket.get(name, 0) + amount

    def warnings(self, group: PodGroup) -> list[str]:
        """Pods a quota on cpu or memory will refuse for a container that sets no request or limit of it, unless a
        LimitRange (which det-k8s does not read) gives one."""
        found: list[str] = []
        for pod in group.pods:
            if pod.admitted or pod.quota is None:
                continue
            for quota in self.quotas.get(pod.namespace or "default", ()):
                if not quota.matches(pod.quota):
                    continue
                for name in CONTAINER_CHECKED:
                    containers = pod.quota.unset.get(name)
                    if name in quota.hard and containers:
                        found.append(f"{group.experiment}: pod {pod.name}: ResourceQuota {quota.namespace}/{quota.name} "
                                     f"limits {name} and container {', '.join(containers)} sets none: the API server "
                                     "refuses the pod unless a LimitRange gives it a default")
        return found
