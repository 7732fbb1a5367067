"""The manifests that run `det-k8s scheduler run` inside the cluster, with the RBAC it needs (pure).

`det-k8s scheduler manifest --image IMAGE -n NAMESPACE | kubectl apply -f -` installs:

- a ServiceAccount `det-k8s-scheduler` in the namespace;
- a ClusterRole (bound cluster-wide): nodes get/list/watch, patch (a taint fencing a node for the moment det-k8s
  binds the master's pods to it: live/fence.py); pods get/list/watch (every namespace: the
  scheduler counts every pod on a node), delete (the master's pods of a binding that failed part-way,
  det-k8s's own groups), patch (the `determined-preemption` label); `pods/binding` create (binding the
  master's pods); `pods/status` patch (the PodScheduled condition); events create/get/patch (why-pending,
  counted repeats);
- a Role in the namespace: pods create (det-k8s's own groups), configmaps (the queue and its policy) and
  services (det-k8s's own groups' headless services);
- a Role in the Lease's namespace: leases get/create/update (one Lease for every det-k8s client of the cluster);
- a Deployment of `replicas` pods running the loop (two by default: the Lease lets one bind at a time and
  the other take over within its 30 s duration), as a non-root user with a read-only root file system, with
  readiness (`/readyz`: the first pass done, not stopping) and liveness (`/healthz`: the loop moves) probes on
  port 8081.
  A replica stopped by SIGTERM (a rolling update, a drain) finishes or undoes the binding in flight and
  releases the Lease before it exits, within terminationGracePeriodSeconds (`TERMINATION_GRACE_SECONDS`), so
  the other replica takes over at once; with maxSurge 0 two replicas of a rollout never both bind (the Lease).

The pod itself is placed by kube-scheduler (it names no scheduler).

The bundled chart deploys the same objects with the release (gangScheduler: det-k8s): `chart_template` turns these
manifests into its `templates/det-k8s-scheduler.yaml`, which `chart/assemble.py` writes with the chart, so the
two never differ in RBAC or Deployment shape.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from .. import __version__
from ..labels import APP_INSTANCE, APP_NAME, MANAGED_BY, MANAGER
from ..stopping import GRACE_SECONDS

NAME = "det-k8s-scheduler"
LABELS = {APP_NAME: NAME, MANAGED_BY: MANAGER}

CLUSTER_RULES: list[dict[str, Any]] = [
    # patch: the short-lived `det-k8s.io/binding` taint that fences a node while the master's pods are bound to it
    # (live/fence.py), so kube-scheduler places nothing there meanwhile
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete", "patch"]},
    {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "get", "patch"]},
    # what placement also reads: claims, volumes, classes (volume binding), namespaces (pod affinity's selectors),
    # resource quotas (what pod creation is refused for)
    {"apiGroups": [""], "resources": ["persistentvolumeclaims", "persistentvolumes", "namespaces", "resourcequotas"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": ["get", "list", "watch"]},
    # DRA (cluster/dra.py): which nodes' GPUs a claim allocation would hand out, which det-k8s does not perform
    {"apiGroups": ["resource.k8s.io"], "resources": ["deviceclasses", "resourceslices"], "verbs": ["get", "list", "watch"]},
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
    # native placement (live/native.py): a det-k8s group's PodGroup, where the cluster serves the API
    {"apiGroups": ["scheduling.k8s.io"], "resources": ["podgroups"], "verbs": ["get", "create", "delete"]},
]
HEALTH_PORT = 8081  # `scheduler run --health-port`: /readyz and /healthz, as controller-runtime serves them
TERMINATION_GRACE_SECONDS = int(GRACE_SECONDS) + 25  # the undo's grace, then a request's timeout and the exit
LEASE_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
]


def _meta(name: str, namespace: str | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(labels or LABELS)}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def _binding(kind: str, name: str, namespace: str | None, role_kind: str, sa_namespace: str, sa_name: str = NAME,
             labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": _meta(name, namespace, labels),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": sa_name, "namespace": sa_namespace}]}


# Memory from what was measured (benchmarks/SIDEBYSIDE.md, the figures in benchmarks/sidebyside-5000.json): the peak
# RSS (VmHWM) of `det-k8s scheduler run` was 929 MiB binding a backlog of 30,000 pods on 5,000 nodes of the real
# control plane (Kubernetes 1.37.2), its first pass planning all of it (915 and 938 MiB in earlier runs; 154 MiB at
# 2,000 nodes / 2,800 pods). The request is that peak + 25 %, the limit twice it (room for transients such as listing the
# cluster again, not measured), rounded up to 128 and 256 MiB; tests/kube/test_deploy_manifest.py holds them to the
# recorded peak.
MEMORY_REQUEST = "1280Mi"
MEMORY_LIMIT = "2Gi"


def scheduler_manifests(image: str, namespace: str, *, scheduler_name: str = "coscheduler", replicas: int | str = 2,
                        lease_namespace: str = "default", preemption: bool | str = False,
                        image_pull_secret: str | None = None, name: str = NAME, cluster_name: str | None = None,
                        instance: str | None = None) -> list[dict[str, Any]]:
    """ServiceAccount, RBAC and Deployment for `det-k8s scheduler run -n namespace` in the cluster.

    `name` names the namespaced objects and `cluster_name` the cluster-scoped ones and the Lease Role (both `NAME`
    for `scheduler manifest`; the chart's carry the release); `instance` adds that label to the objects and the
    Deployment's selector. `replicas` and `preemption` may be placeholders (the chart's template is made from
    these manifests, see `chart_template`)."""
    cluster_name = cluster_name or name
    labels = {**LABELS, **({APP_INSTANCE: instance} if instance else {})}
    args = ["scheduler", "run", "--namespace", namespace, "--scheduler-name", scheduler_name,
            "--health-port", str(HEALTH_PORT)]
    if preemption:
        args.append(preemption if isinstance(preemption, str) else "--preemption")
    env = [{"name": "USER", "value": NAME},  # the Lease holder is <user>@<pod name>-<random>
           {"name": "DET_K8S_LEASE_NAMESPACE", "value": lease_namespace},
           {"name": "NO_COLOR", "value": "1"}]
    container: dict[str, Any] = {
        "name": "scheduler", "image": image, "args": args, "env": env,
        "resources": {"requests": {"cpu": "250m", "memory": MEMORY_REQUEST}, "limits": {"memory": MEMORY_LIMIT}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
        "ports": [{"name": "health", "containerPort": HEALTH_PORT, "protocol": "TCP"}],
        # ready once the first pass (or the standby's first wait) is done, not while stopping: a rolling update
        # (maxSurge 0) replaces the next replica only then; alive while the loop moves (det_k8s/health.py)
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "health"}, "periodSeconds": 5,
                           "failureThreshold": 2},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "health"}, "periodSeconds": 30,
                          "failureThreshold": 3},
    }
    pod_spec: dict[str, Any] = {
        "serviceAccountName": name, "containers": [container],
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
    selector = {APP_NAME: NAME, **({APP_INSTANCE: instance} if instance else {})}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(name, namespace, labels),
        "spec": {"replicas": replicas, "selector": {"matchLabels": selector},
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
                 "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec}},
    }
    lease = f"{cluster_name}-lease"
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, namespace, labels)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": _meta(cluster_name,
                                                                                               labels=labels),
         "rules": CLUSTER_RULES},
        _binding("ClusterRoleBinding", cluster_name, None, "ClusterRole", namespace, name, labels),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _meta(name, namespace, labels),
         "rules": NAMESPACE_RULES},
        _binding("RoleBinding", name, namespace, "Role", namespace, name, labels),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _meta(lease, lease_namespace, labels),
         "rules": LEASE_RULES},
        _binding("RoleBinding", lease, lease_namespace, "Role", namespace, name, labels),
        deployment,
    ]


# The chart's template, made from the same manifests: each placeholder a Helm expression (`chart_template`).
_HELM = {
    "ZZNAMESPACEZZ": "{{ .Release.Namespace }}",
    "ZZNAMEZZ": "det-k8s-scheduler-{{ .Release.Name }}",
    "ZZCLUSTERNAMEZZ": "det-k8s-scheduler-{{ .Release.Namespace }}-{{ .Release.Name }}",
    "ZZINSTANCEZZ": "{{ .Release.Name }}",
    "ZZIMAGEZZ": '{{ dig "image" "" $s | default "det-k8s:' + __version__ + '" | quote }}',
    "ZZREPLICASZZ": '{{ dig "replicas" 2 $s }}',
    "ZZLEASENAMESPACEZZ": '{{ dig "leaseNamespace" "default" $s | default "default" }}',
    "ZZSCHEDULERZZ": '{{ include "determined.masterScheduler" . | default "coscheduler" }}',
}
CHART_FILE = "det-k8s-scheduler.yaml"


def chart_name(release: str) -> str:
    """The chart's scheduler Deployment (and ServiceAccount, Role) of a release."""
    return f"{NAME}-{release}"


def chart_template() -> str:
    """The bundled chart's templates/det-k8s-scheduler.yaml, generated from `scheduler_manifests` so that the
    chart and `scheduler manifest` deploy the same RBAC and Deployment: rendered with gangScheduler: det-k8s
    (the default) unless detK8sScheduler.enabled is false, serving the scheduler name the master gives its
    task pods (coscheduler when defaultScheduler is unset), with --preemption for defaultScheduler: preemption."""
    documents = scheduler_manifests(
        "ZZIMAGEZZ", "ZZNAMESPACEZZ", scheduler_name="ZZSCHEDULERZZ", replicas="ZZREPLICASZZ",
        lease_namespace="ZZLEASENAMESPACEZZ", preemption="ZZPREEMPTIONZZ", image_pull_secret="ZZPULLSECRETZZ",
        name="ZZNAMEZZ", cluster_name="ZZCLUSTERNAMEZZ", instance="ZZINSTANCEZZ")
    text = yaml.safe_dump_all(documents, sort_keys=False, default_flow_style=False, width=1 << 16)
    text = re.sub(r"^( *)- ZZPREEMPTIONZZ$", lambda m: (
        f'{m[1]}{{{{- if eq (include "determined.masterScheduler" .) "preemption" }}}}\n'
        f"{m[1]}- --preemption\n{m[1]}{{{{- end }}}}"), text, flags=re.MULTILINE)
    text = re.sub(r"^( *)imagePullSecrets:\n( *)- name: ZZPULLSECRETZZ$", lambda m: (
        f'{m[1]}{{{{- with dig "imagePullSecretName" "" $s }}}}\n{m[1]}imagePullSecrets:\n{m[2]}- name: {{{{ . }}}}\n'
        f"{m[1]}{{{{- end }}}}"), text, flags=re.MULTILINE)
    for placeholder, expression in _HELM.items():
        text = text.replace(placeholder, expression)
    if "ZZ" in text:
        raise AssertionError("a placeholder of the chart's scheduler template was left: " + text)
    return (
        "{{- /* Generated by det-k8s from det_k8s/chart/deploy.py (the manifests `det-k8s scheduler manifest` prints),\n"
        "       written when the chart is rendered: det-k8s's gang scheduler, `det-k8s scheduler run` in the release's\n"
        "       namespace, with gangScheduler: det-k8s unless detK8sScheduler.enabled is false. */ -}}\n"
        '{{- $s := .Values.detK8sScheduler | default dict }}\n'
        '{{- if and (eq (.Values.gangScheduler | default "det-k8s") "det-k8s") (ne (toString (dig "enabled" true $s)) '
        '"false") }}\n'
        + text + "{{- end }}\n")
