"""The Determined master's address, from its Service, the way the documents tell admins to find it.

LoadBalancer: the ingress IP or hostname and the Service port (cloud load balancers take a few
minutes; until then the address is pending). NodePort: any node's address and the node port,
preferring an ExternalIP over an InternalIP, and a Ready node over one that is not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MasterAddress:
    kind: str  # LoadBalancer, NodePort, ClusterIP, or "missing"
    url: str | None
    note: str
    pending: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.kind, "url": self.url, "pending": self.pending, "note": self.note}


def _ready(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def node_address(nodes: Sequence[Mapping[str, Any]]) -> str | None:
    """An address clients can try: ExternalIP first, then InternalIP, Ready nodes first."""
    for wanted in ("ExternalIP", "InternalIP"):
        for node in sorted(nodes, key=lambda n: (not _ready(n), (n.get("metadata") or {}).get("name", ""))):
            for address in (node.get("status") or {}).get("addresses") or []:
                if address.get("type") == wanted and address.get("address"):
                    return str(address["address"])
    return None


def master_address(service: Mapping[str, Any] | None, nodes: Sequence[Mapping[str, Any]], *, tls: bool = False,
                   release: str = "RELEASE", namespace: str = "default") -> MasterAddress:
    scheme = "https" if tls else "http"
    if service is None:
        return MasterAddress("missing", None, f"no Service determined-master-service-{release} in namespace "
                             f"{namespace}")
    name = (service.get("metadata") or {}).get("name", "")
    spec = service.get("spec") or {}
    kind = str(spec.get("type") or "ClusterIP")
    ports = spec.get("ports") or [{}]
    port = ports[0].get("port")
    watch = f"kubectl get service {name} -n {namespace} --watch"
    if kind == "LoadBalancer":
        ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        host = next((i.get("ip") or i.get("hostname") for i in ingress if i.get("ip") or i.get("hostname")), None)
        if host is None:
            return MasterAddress(kind, None, f"the load balancer has no address yet (cloud load balancers take a "
                                 f"few minutes); check with: {watch}", pending=True)
        return MasterAddress(kind, f"{scheme}://{host}:{port}", "load balancer")
    if kind == "NodePort":
        node_port = ports[0].get("nodePort")
        host = node_address(nodes)
        if node_port is None or host is None:
            return MasterAddress(kind, None, f"the NodePort is not assigned yet; check with: {watch}", pending=True)
        return MasterAddress(kind, f"{scheme}://{host}:{node_port}",
                             "NodePort: any node's address works; put an Ingress in front for a stable name")
    forward = f"kubectl port-forward service/{name} {port}:{port} -n {namespace}" if port else watch
    return MasterAddress(kind, None, f"a {kind} Service is reachable only inside the cluster; try: {forward}")
