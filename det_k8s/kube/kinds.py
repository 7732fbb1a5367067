"""The Kubernetes resources det-k8s reads and writes, and where they live in the API."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from ..errors import UsageError


@dataclass(frozen=True)
class Kind:
    name: str  # for messages: "pod", "config map"
    prefix: str  # "/api/v1" or "/apis/<group>/<version>"
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The URL path; a namespaced kind without a namespace lists across all namespaces.

        Every segment that comes from outside (namespace, name, subresource) is percent-encoded, and
        one that would change the path's meaning ("", ".", "..") is refused: a name can never reach
        another resource than the one it names.
        """
        parts = [self.prefix]
        if self.namespaced and namespace is not None:
            parts.append(f"namespaces/{segment(namespace, 'namespace')}")
        parts.append(self.plural)
        if name is not None:
            parts.append(segment(name, f"{self.name} name"))
        if subresource is not None:
            parts.append(segment(subresource, "subresource"))
        return "/".join(parts)


def segment(value: str, what: str) -> str:
    """One URL path segment, percent-encoded; UsageError for one that is empty or a dot segment."""
    text = str(value)
    if text in ("", ".", ".."):
        raise UsageError(f"{what} {text!r} cannot be used in a Kubernetes API path")
    return quote(text, safe="")


PODS = Kind("pod", "/api/v1", "pods")
NODES = Kind("node", "/api/v1", "nodes", namespaced=False)
NAMESPACES = Kind("namespace", "/api/v1", "namespaces", namespaced=False)
SERVICES = Kind("service", "/api/v1", "services")
CONFIGMAPS = Kind("config map", "/api/v1", "configmaps")
SECRETS = Kind("secret", "/api/v1", "secrets")
EVENTS = Kind("event", "/api/v1", "events")
PVCS = Kind("persistent volume claim", "/api/v1", "persistentvolumeclaims")
PVS = Kind("persistent volume", "/api/v1", "persistentvolumes", namespaced=False)
RESOURCEQUOTAS = Kind("resource quota", "/api/v1", "resourcequotas")
DEPLOYMENTS = Kind("deployment", "/apis/apps/v1", "deployments")
LEASES = Kind("lease", "/apis/coordination.k8s.io/v1", "leases")
STORAGECLASSES = Kind("storage class", "/apis/storage.k8s.io/v1", "storageclasses", namespaced=False)
PRIORITYCLASSES = Kind("priority class", "/apis/scheduling.k8s.io/v1", "priorityclasses", namespaced=False)
JOBS = Kind("job", "/apis/batch/v1", "jobs")
DEVICECLASSES = Kind("device class", "/apis/resource.k8s.io/v1", "deviceclasses", namespaced=False)
RESOURCESLICES = Kind("resource slice", "/apis/resource.k8s.io/v1", "resourceslices", namespaced=False)


def pod_groups(version: str) -> Kind:
    """Kubernetes' own gang-scheduling PodGroups (KEP-4671) at `version` of scheduling.k8s.io (live/native.py)."""
    return Kind("pod group", f"/apis/scheduling.k8s.io/{version}", "podgroups")
