"""The manifests that run `det-k8s scheduler run` inside the cluster, with the RBAC it needs (pure).

`det-k8s scheduler manifest --image IMAGE -n NAMESPACE | kubectl apply -f -` installs:

- a ServiceAccount `det-k8s-scheduler` in the namespace;
- a ClusterRole (bound cluster-wide): nodes get/list/watch; pods get/list/watch (every namespace: the
  scheduler counts every pod on a node), delete (the master's pods of a binding that failed part-way,
  det-k8s's own groups), patch (the `determined-preemption` label); `pods/binding` create (binding the
  master's pods); `pods/status` patch (the PodScheduled condition); events create/get/patch (why-pending,
  counted repeats);
- a Role in the namespace: pods create (det-k8s's own groups), configmaps (the queue and its policy) and
  services (det-k8s's own groups' headless services);
- a Role in the Lease's namespace: leases get/create/update (one Lease for every det-k8s client of the cluster);
- a Deployment of `replicas` pods running the loop (two by default: the Lease lets one bind at a time and
  the other take over within its 30 s duration), as a non-root user with a read-only root file system.
  A replica stopped by SIGTERM (a rolling update, a drain) finishes or undoes the binding in flight and
  releases the Lease before it exits, within terminationGracePeriodSeconds (`TERMINATION_GRACE_SECONDS`), so
  the other replica takes over at once; with maxSurge 0 two replicas of a rollout never both bind (the Lease).

The pod itself is placed by kube-scheduler (it names no scheduler).
"""

from __future__ import annotations

from typing import Any

from ..stopping import GRACE_SECONDS

NAME = "det-k8s-scheduler"
LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/managed-by": "det-k8s"}

CLUSTER_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete", "patch"]},
    {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "get", "patch"]},
    # what placement also reads: claims, volumes, classes (volume binding), namespaces (pod affinity's selectors)
    {"apiGroups": [""], "resources": ["persistentvolumeclaims", "persistentvolumes", "namespaces"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": ["get", "list", "watch"]},
    # one Lease location for every client: a scheduler checks no other det-k8s Lease is in use elsewhere
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["list"]},
    # a kube-scheduler Deployment serving the same scheduler name (the official charts' coscheduler), at start-up
    {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list"]},
]
NAMESPACE_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["configmaps"],
     "verbs": ["get", "list", "watch", "create", "update", "delete"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "create", "delete"]},
]
TERMINATION_GRACE_SECONDS = int(GRACE_SECONDS) + 25  # the undo's grace, then a request's timeout and the exit
LEASE_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
]


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(LABELS)}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def _binding(kind: str, name: str, namespace: str | None, role_kind: str, sa_namespace: str) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": _meta(name, namespace),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": sa_namespace}]}


def scheduler_manifests(image: str, namespace: str, *, scheduler_name: str = "coscheduler", replicas: int = 2,
                        lease_namespace: str = "default", preemption: bool = False,
                        image_pull_secret: str | None = None) -> list[dict[str, Any]]:
    """ServiceAccount, RBAC and Deployment for `det-k8s scheduler run -n namespace` in the cluster."""
    args = ["scheduler", "run", "--namespace", namespace, "--scheduler-name", scheduler_name]
    if preemption:
        args.append("--preemption")
    env = [{"name": "USER", "value": NAME},  # the Lease holder is <user>@<pod name>-<random>
           {"name": "DET_K8S_LEASE_NAMESPACE", "value": lease_namespace},
           {"name": "NO_COLOR", "value": "1"}]
    container: dict[str, Any] = {
        "name": "scheduler", "image": image, "args": args, "env": env,
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "2Gi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    pod_spec: dict[str, Any] = {
        "serviceAccountName": NAME, "containers": [container],
        # SIGTERM (a rollout, a drain, an eviction) ends the loop as every det-k8s command ends: the binding in
        # flight finished or undone, the Lease released for the other replica at once (det_k8s/stopping.py). The
        # kubelet waits this long before SIGKILL: the grace det-k8s gives itself, and room for the last requests.
        "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 10001, "runAsGroup": 10001,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "volumes": [{"name": "tmp", "emptyDir": {}}],
    }
    if image_pull_secret:
        pod_spec["imagePullSecrets"] = [{"name": image_pull_secret}]
    selector = {"app.kubernetes.io/name": NAME}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(NAME, namespace),
        "spec": {"replicas": replicas, "selector": {"matchLabels": selector},
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
                 "template": {"metadata": {"labels": dict(LABELS)}, "spec": pod_spec}},
    }
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(NAME, namespace)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": _meta(NAME),
         "rules": CLUSTER_RULES},
        _binding("ClusterRoleBinding", NAME, None, "ClusterRole", namespace),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _meta(NAME, namespace),
         "rules": NAMESPACE_RULES},
        _binding("RoleBinding", NAME, namespace, "Role", namespace),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _meta(f"{NAME}-lease", lease_namespace),
         "rules": LEASE_RULES},
        {**_binding("RoleBinding", f"{NAME}-lease", lease_namespace, "Role", namespace),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{NAME}-lease"}},
        deployment,
    ]
