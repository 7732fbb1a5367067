"""pytest fixtures for the real control plane (tests/support/realkube/cluster.py), imported by tests/conftest.py.

- `control_plane` (session): built once per machine (cached), started once per test session. Where Go is absent
  and nothing is cached, tests that need it skip with the reason; in CI (`CI=true`) they fail instead.
- `real_cluster` (function): the control plane with KUBECONFIG pointing at it as an admin, and a facade with the
  emulator's test surface (`.api.put/get/items/update/remove`), so a test written for the emulator can run on both
  (a module sets `ON_REAL_CLUSTER_TOO = True`: tests/conftest.py). Everything a test made is removed after it: kwok
  nodes, the `default` namespace's pods,
  Jobs, ConfigMaps, Leases and Events, and every namespace it created.
"""

from __future__ import annotations

import contextlib
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.needs import need
from tests.support.realkube.cluster import KWOK_ANNOTATION, ControlPlane, ControlPlaneError, Options, ready_status

# plural -> (API prefix, namespaced)
PLURALS: dict[str, tuple[str, bool]] = {
    "pods": ("/api/v1", True), "nodes": ("/api/v1", False), "events": ("/api/v1", True),
    "configmaps": ("/api/v1", True), "secrets": ("/api/v1", True), "services": ("/api/v1", True),
    "namespaces": ("/api/v1", False), "serviceaccounts": ("/api/v1", True),
    "persistentvolumeclaims": ("/api/v1", True), "persistentvolumes": ("/api/v1", False),
    "resourcequotas": ("/api/v1", True), "limitranges": ("/api/v1", True),
    "leases": ("/apis/coordination.k8s.io/v1", True), "jobs": ("/apis/batch/v1", True),
    "deployments": ("/apis/apps/v1", True), "replicasets": ("/apis/apps/v1", True),
    "statefulsets": ("/apis/apps/v1", True), "daemonsets": ("/apis/apps/v1", True),
    "priorityclasses": ("/apis/scheduling.k8s.io/v1", False),
    "storageclasses": ("/apis/storage.k8s.io/v1", False),
    "roles": ("/apis/rbac.authorization.k8s.io/v1", True), "rolebindings": ("/apis/rbac.authorization.k8s.io/v1", True),
    "clusterroles": ("/apis/rbac.authorization.k8s.io/v1", False),
    "clusterrolebindings": ("/apis/rbac.authorization.k8s.io/v1", False),
    "validatingadmissionpolicies": ("/apis/admissionregistration.k8s.io/v1", False),
    "validatingadmissionpolicybindings": ("/apis/admissionregistration.k8s.io/v1", False),
    "deviceclasses": ("/apis/resource.k8s.io/v1", False), "resourceslices": ("/apis/resource.k8s.io/v1", False),
    "runtimeclasses": ("/apis/node.k8s.io/v1", False),
}
KIND_PLURAL = {"Pod": "pods", "Node": "nodes", "Event": "events", "ConfigMap": "configmaps", "Secret": "secrets",
               "Service": "services", "Namespace": "namespaces", "ServiceAccount": "serviceaccounts",
               "PersistentVolumeClaim": "persistentvolumeclaims", "PersistentVolume": "persistentvolumes",
               "ResourceQuota": "resourcequotas", "LimitRange": "limitranges", "Lease": "leases", "Job": "jobs",
               "Deployment": "deployments", "ReplicaSet": "replicasets", "StatefulSet": "statefulsets",
               "DaemonSet": "daemonsets", "PriorityClass": "priorityclasses", "StorageClass": "storageclasses",
               "Role": "roles", "RoleBinding": "rolebindings", "ClusterRole": "clusterroles",
               "ClusterRoleBinding": "clusterrolebindings",
               "ValidatingAdmissionPolicy": "validatingadmissionpolicies",
               "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
               "DeviceClass": "deviceclasses", "ResourceSlice": "resourceslices", "RuntimeClass": "runtimeclasses"}
SYSTEM_NAMESPACES = {"default", "kube-system", "kube-public", "kube-node-lease"}


def path_of(plural: str, namespace: str | None, name: str | None = None) -> str:
    prefix, namespaced = PLURALS[plural]
    path = f"{prefix}/namespaces/{namespace}/{plural}" if namespaced and namespace else f"{prefix}/{plural}"
    return f"{path}/{urllib.parse.quote(name, safe='')}" if name else path


NODE_LOOK = 6.0  # seconds: the node lifecycle controller's period (5 s) and a margin (`let_controllers_see_new_nodes`)


def _settled(node: Mapping[str, Any] | None) -> bool:
    if node is None:
        return False
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in node["status"].get("conditions") or ())
    taints = {t["key"] for t in node.get("spec", {}).get("taints") or ()}
    return ready and not taints & {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}


@dataclass
class RealApi:
    """The emulator's test surface (tests/k8s_emulator.ApiEmulator) over a real API server, as the admin."""

    plane: ControlPlane
    namespaces: set[str] = field(default_factory=set)
    nodes_made_at: float = 0.0  # time.monotonic() when `put` last made a node

    def let_controllers_see_new_nodes(self) -> None:
        """Before pods a controller makes (a Deployment's) land on nodes just made: kube-controller-manager's node
        lifecycle controller looks at nodes every 5 s, and at its first look at new nodes it may judge them not ready
        ("all Nodes are not-Ready. Entering master disruption mode", left 5 s later) and mark the pods bound there
        meanwhile not ready, which kwok (no kubelet) never marks ready again: the Deployment would never be ready
        (DEVELOPERS.md, pods on nodes just created). Waits what is left of NODE_LOOK since the last node was made."""
        left = self.nodes_made_at + NODE_LOOK - time.monotonic()
        if left > 0:
            time.sleep(left)

    def _ok(self, status: int, body: Any, what: str) -> Any:
        if status >= 300:
            raise ControlPlaneError(f"{what}: {status} {body}")
        return body

    def put(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create `obj` (a Node becomes one of kwok's; a Pod's status is written through its subresource)."""
        obj = dict(obj)
        plural = KIND_PLURAL[obj["kind"]]
        meta = dict(obj["metadata"])
        ns = meta.get("namespace") or ("default" if PLURALS[plural][1] else None)
        if plural == "nodes":  # kwok's, and Ready from its creation (`ready_status`: what kwok would write first)
            meta["annotations"] = {**(meta.get("annotations") or {}), KWOK_ANNOTATION: "fake"}
            obj["status"] = ready_status(meta["name"], obj.get("status"))
        if plural == "namespaces":
            self.namespaces.add(meta["name"])
        elif ns and ns not in SYSTEM_NAMESPACES and ns not in self.namespaces:
            # a namespace of the same name an earlier test made may still be terminating: wait until it is gone
            self.plane.wait_for(f"namespace {ns} of an earlier test to be gone", lambda: (self.get(
                "namespaces", ns, None) or {}).get("status", {}).get("phase") != "Terminating", timeout=120)
            self.plane.request("POST", "/api/v1/namespaces",
                               {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            self.namespaces.add(ns)
        for key in ("resourceVersion", "uid", "creationTimestamp"):
            meta.pop(key, None)
        obj["metadata"] = meta
        status, body = self.plane.request("POST", path_of(plural, ns), obj)
        created = self._ok(status, body, f"create {plural}/{meta['name']}")
        if plural == "nodes":  # as the emulator's: Ready, and without the not-ready taint every new node gets at first
            name = meta["name"]
            self.plane.wait_for(f"node {name} Ready and untainted", lambda: _settled(self.get("nodes", name, None)),
                                timeout=60, interval=0.1)
            self.nodes_made_at = time.monotonic()
        if plural == "pods" and obj.get("status"):
            status, body = self.plane.request("PATCH", path_of(plural, ns, meta["name"]) + "/status",
                                              {"status": obj["status"]}, content_type="application/merge-patch+json")
            created = self._ok(status, body, f"status of pods/{meta['name']}")
        return created  # type: ignore[no-any-return]

    def get(self, plural: str, name: str, namespace: str | None = "default") -> dict[str, Any] | None:
        status, body = self.plane.request("GET", path_of(plural, namespace, name))
        return None if status == 404 else self._ok(status, body, f"get {plural}/{name}")  # type: ignore[no-any-return]

    def items(self, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        status, body = self.plane.request("GET", path_of(plural, namespace))
        return list(self._ok(status, body, f"list {plural}")["items"])

    def update(self, plural: str, name: str, patch: Mapping[str, Any], namespace: str | None = "default") -> None:
        path = path_of(plural, namespace if PLURALS[plural][1] else None, name)
        rest = {k: v for k, v in patch.items() if k != "status"}
        if rest:
            self._ok(*self.plane.request("PATCH", path, rest, content_type="application/merge-patch+json"),
                     f"patch {plural}/{name}")
        if "status" in patch:
            self._ok(*self.plane.request("PATCH", path + "/status", {"status": patch["status"]},
                                         content_type="application/merge-patch+json"), f"status of {plural}/{name}")

    def serve_discovery(self) -> None:
        """The emulator serves kubectl's discovery documents only when asked; the real API server always does."""

    def remove(self, plural: str, name: str, namespace: str | None = "default") -> None:
        path = path_of(plural, namespace if PLURALS[plural][1] else None, name)
        status, body = self.plane.request("DELETE", path, {"gracePeriodSeconds": 0, "propagationPolicy": "Background"})
        if status not in (200, 202, 404):
            raise ControlPlaneError(f"delete {plural}/{name}: {status} {body}")


@dataclass
class RealCluster:
    """What the emulator's `Cluster` (tests/conftest.py) offers, on the real control plane."""

    plane: ControlPlane
    kubeconfig: Path
    api: RealApi
    real: bool = True

    @property
    def url(self) -> str:
        return self.plane.server

    def connect(self, namespace: str | None = None) -> Any:
        from det_k8s.kube.api import KubeApi

        return KubeApi.connect(kubeconfig=str(self.kubeconfig), namespace=namespace)

    def wait_for(self, what: str, check: Any, timeout: float = 60, interval: float = 0.2) -> Any:
        return self.plane.wait_for(what, check, timeout, interval)

    def describe(self, namespace: str) -> str:
        """What a failed test needs to say why: the namespace's pods and events, the nodes, the components' state."""
        lines = []
        for pod in self.api.items("pods", namespace):
            conditions = "; ".join(f"{c['type']}={c['status']} {c.get('reason', '')} {c.get('message', '')}".strip()
                                   for c in pod["status"].get("conditions") or ())
            lines.append(f"pod {pod['metadata']['name']}: {pod['status'].get('phase')} on "
                         f"{pod['spec'].get('nodeName')}: {conditions}")
        for event in self.api.items("events", namespace)[-30:]:
            lines.append(f"event {event['involvedObject'].get('kind')}/{event['involvedObject'].get('name')}: "
                         f"{event.get('reason')}: {event.get('message')}")
        for node in self.api.items("nodes"):
            ready = [c["status"] for c in node["status"].get("conditions") or () if c["type"] == "Ready"]
            lines.append(f"node {node['metadata']['name']}: Ready={ready} taints={node['spec'].get('taints')}")
        for child in self.plane.children:
            lines.append(f"{child.name}: {'running' if child.proc.poll() is None else f'exited {child.proc.returncode}'}")
        return "\n".join(lines)


_PLANE: ControlPlane | None = None


def start_plane(options: Options | None = None, kube_version: str | None = None) -> ControlPlane:
    """A started control plane (built once per machine); skips without Go, fails in CI or when it does not start.
    Another `kube_version` than the one the tests build must be built beforehand (`DET_K8S_KUBE_VERSION=1.36.3
    python -m tests.support.realkube.cluster build`): without it the test is skipped, saying so."""
    from tests.support.realkube.components import KUBE_VERSION, BuildError, build_all, cached, go_binary

    binaries = cached(kube_version or KUBE_VERSION)
    if binaries is None and kube_version not in (None, KUBE_VERSION):
        pytest.skip(f"Kubernetes {kube_version} is not built here: DET_K8S_KUBE_VERSION={kube_version} python -m "
                    "tests.support.realkube.cluster build (about 15 minutes) runs these tests against it too")
    if binaries is None:
        need(go_binary() is not None, "the real control plane needs Go to build kube-apiserver, kube-scheduler, "
             "kube-controller-manager, etcd and kwok once (install Go 1.26; ./scripts/test then builds them into "
             "~/.cache/det-k8s)")
        try:
            binaries = build_all()
        except BuildError as e:
            pytest.fail(f"building the real control plane failed: {e}", pytrace=False)
    plane = ControlPlane(binaries, options)
    try:
        plane.start()
    except ControlPlaneError as e:
        pytest.fail(f"the real control plane did not start: {e}", pytrace=False)
    return plane


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    global _PLANE
    plane = start_plane()
    _PLANE = plane
    try:
        yield plane
    finally:
        _PLANE = None
        plane.stop()


def _force_delete_pods(plane: ControlPlane, namespace: str) -> None:
    """Every pod of the namespace gone at once: finalizers dropped, no grace (no kubelet confirms anything here)."""
    _, pods = plane.request("GET", f"/api/v1/namespaces/{namespace}/pods")
    for pod in (pods or {}).get("items", []):
        name = pod["metadata"]["name"]
        if pod["metadata"].get("finalizers"):
            plane.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}", {"metadata": {"finalizers": None}},
                          content_type="application/merge-patch+json")
        plane.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", {"gracePeriodSeconds": 0})


def _clean(plane: ControlPlane, namespaces: set[str]) -> None:
    """Remove what a test made, so the next one starts from an empty cluster (nodes and `default`)."""
    r = plane.request
    for ns in namespaces:  # their pods first, at once: a pod left bound to a node deleted below lingers for minutes
        _force_delete_pods(plane, ns)
        r("DELETE", f"/api/v1/namespaces/{ns}", {"propagationPolicy": "Background"})
    r("DELETE", "/apis/batch/v1/namespaces/default/jobs", {"propagationPolicy": "Background", "gracePeriodSeconds": 0})
    r("DELETE", "/apis/apps/v1/namespaces/default/deployments", {"propagationPolicy": "Background"})
    r("DELETE", "/api/v1/namespaces/default/pods", {"gracePeriodSeconds": 0})
    r("DELETE", "/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%21%3Dkube-root-ca.crt", None)
    r("DELETE", "/apis/coordination.k8s.io/v1/namespaces/default/leases", None)
    r("DELETE", "/api/v1/namespaces/default/events", None)
    r("DELETE", "/api/v1/namespaces/default/resourcequotas", None)
    r("DELETE", "/api/v1/namespaces/default/secrets", None)
    keep = {"services": {"kubernetes"}, "serviceaccounts": {"default"}, "configmaps": {"kube-root-ca.crt"}}
    for plural in ("services", "serviceaccounts", "persistentvolumeclaims", "roles", "rolebindings", "statefulsets",
                   "replicasets", "daemonsets", "configmaps"):
        _, listed = r("GET", path_of(plural, "default"))
        for item in (listed or {}).get("items", []):
            name = item["metadata"]["name"]
            if name not in keep.get(plural, set()):
                r("DELETE", path_of(plural, "default", name), {"propagationPolicy": "Background"})
    for plural in ("deviceclasses", "resourceslices", "runtimeclasses"):  # DRA's (tests/real/test_dra.py), and
        r("DELETE", path_of(plural, None), None)  # RuntimeClasses: none of them the system's own
    for plural in ("clusterroles", "clusterrolebindings", "priorityclasses", "storageclasses", "persistentvolumes"):
        _, listed = r("GET", path_of(plural, None))
        for item in (listed or {}).get("items", []):
            meta = item["metadata"]
            if not meta["name"].startswith("system") and "kubernetes.io/bootstrapping" not in (meta.get("labels") or {}) \
                    and meta["name"] not in ("cluster-admin", "admin", "edit", "view"):
                r("DELETE", path_of(plural, None, meta["name"]), None)
    deadline = time.monotonic() + 90  # the next test must not see this one's namespaces, terminating or not
    left: list[str] = []
    while time.monotonic() < deadline:
        _, listed = r("GET", "/api/v1/namespaces")
        left = [n["metadata"]["name"] for n in (listed or {}).get("items", [])
                if n["metadata"]["name"] in namespaces or n.get("status", {}).get("phase") == "Terminating"]
        if not left:
            break
        for ns in left:  # pods a controller made meanwhile (a Job's), or stuck on finalizers
            _force_delete_pods(plane, ns)
        time.sleep(0.5)
    holding = [f"{ns}/{pod['metadata']['name']}" for ns in left
               for pod in (r("GET", f"/api/v1/namespaces/{ns}/pods")[1] or {}).get("items", [])]
    if holding:  # a namespace still terminating is harmless; its pods would hold the next test's nodes
        raise ControlPlaneError(f"pods of an earlier test are still there after 90 s: {holding}")
    _, nodes = r("GET", "/api/v1/nodes")
    for item in (nodes or {}).get("items", []):
        r("DELETE", f"/api/v1/nodes/{item['metadata']['name']}", {"gracePeriodSeconds": 0})
    deadline = time.monotonic() + 30
    while True:
        _, pods = r("GET", "/api/v1/namespaces/default/pods")
        left = [pod["metadata"]["name"] for pod in (pods or {}).get("items", [])]
        if not left:
            break
        if time.monotonic() >= deadline:  # the next test would find them holding its nodes' resources: say so
            raise ControlPlaneError(f"pods of an earlier test are still in namespace default after 30 s: {left}")
        # a pod kwok no longer manages (its node is gone) keeps its finalizers; one a controller or a test's thread
        # made after the deletion above was never deleted: both are deleted (again) here
        _force_delete_pods(plane, "default")
        time.sleep(0.2)


@contextlib.contextmanager
def cluster_on(plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RealCluster]:
    """`plane`, empty, with KUBECONFIG pointing at it as an admin; what the test made is removed afterwards."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_bytes(plane.admin_kubeconfig.read_bytes())
    kubeconfig.chmod(0o600)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("HELM_KUBECONTEXT", raising=False)
    monkeypatch.delenv("HELM_NAMESPACE", raising=False)
    api = RealApi(plane)
    _clean(plane, set())
    try:
        yield RealCluster(plane, kubeconfig, api)
    finally:
        _clean(plane, api.namespaces)


@pytest.fixture
def real_cluster(control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                 ) -> Iterator[RealCluster]:
    """The real control plane, empty, with KUBECONFIG pointing at it as an admin."""
    with cluster_on(control_plane, tmp_path, monkeypatch) as cluster:
        yield cluster
