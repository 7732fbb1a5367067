"""Ask the cluster: a task pod built from each pod spec the settings hold, sent as a server-side dry run.

det-k8s checks pod specs offline (settings/podspec.py, settings/podvalues.py); when a cluster is reachable, its API
server is the last word, admission included (a webhook, Pod Security, a LimitRange, a policy). `validate
--kube-context` and the `install`/`upgrade` preflight build a pod as the master builds a task pod from the pod spec
(its `determined-container` merged with the master's, the other containers kept) and create it with `dryRun=All`:
nothing is stored. A refusal is one error naming the settings key and the field the API server named.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from ..errors import DetK8sError, Forbidden, Location, NotFound, Problem, Rejected, Severity
from ..kube.api import KubeApi
from ..kube.kinds import PODS, Kind
from ..settings.podspec import settings_pod_specs
from ..settings.source import SourceMap, format_path

MAIN = "determined-container"  # the container the master fills in (facts: tasks.container_name)
PLACEHOLDER_IMAGE = "determinedai/pytorch-ngc:0.38.1"


def task_pod(spec: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """A pod as the master builds one from a pod spec: its metadata and spec kept, the main container completed."""
    pod_spec = copy.deepcopy(dict(spec))
    meta = dict(pod_spec.pop("metadata", None) or {})
    inner = pod_spec.pop("spec", None)
    body: dict[str, Any] = dict(inner) if isinstance(inner, Mapping) else {}
    containers = [dict(c) for c in body.get("containers") or () if isinstance(c, Mapping)]
    main = next((c for c in containers if c.get("name") == MAIN), None)
    if main is None:
        main = {"name": MAIN}
        containers.insert(0, main)
    main.setdefault("image", PLACEHOLDER_IMAGE)
    for other in containers:
        other.setdefault("image", PLACEHOLDER_IMAGE)  # (offline checks already require one where the master needs it)
    body["containers"] = containers
    meta["name"] = "det-k8s-dry-run"
    meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body}


def dry_run_pod_specs(api: KubeApi, values: Mapping[str, Any], sources: SourceMap | None,
                      namespace: str) -> list[Problem]:
    """The API server's verdict on a task pod from each pod spec in the settings (nothing is created)."""
    problems: list[Problem] = []
    for path, spec in settings_pod_specs(values):
        if not isinstance(spec, Mapping):
            continue
        key = format_path(path)
        where = sources.find(path) if sources else None
        try:
            api.request("POST", PODS.path(namespace), query=[("dryRun", "All")], body=task_pod(spec, namespace),
                        what=f"a task pod from {key} (dry run)")
        except Rejected as exc:
            problems.append(Problem(Severity.ERROR, key, f"the API server of {api.target.context} refuses a task pod "
                                    f"built from it: {exc.message}", "fix the field it names", where))
        except Forbidden as exc:
            if "forbidden" in exc.message and ("webhook" in exc.message or "violates" in exc.message.lower()):
                problems.append(Problem(Severity.ERROR, key, f"admission in {api.target.context} refuses a task pod "
                                        f"built from it: {exc.message}", None, where))
            else:
                problems.append(Problem(Severity.WARNING, key, f"not checked by the API server (no permission to "
                                        f"create pods in {namespace}, even as a dry run): {exc.message}", None, where))
                break
        except NotFound:
            problems.append(Problem(Severity.WARNING, key, f"not checked by the API server: namespace {namespace} "
                                    "does not exist yet", None, where))
            break
        except DetK8sError as exc:
            problems.append(Problem(Severity.WARNING, key, f"not checked by the API server: {exc.message}", None,
                                    where))
            break
    return problems


# -- the chart's own objects -------------------------------------------------------------------------------------

APPLY_PATCH = "application/apply-patch+yaml"
DRY_RUN_MANAGER = "det-k8s-dry-run"

# What the settings key behind a refused field of the bundled chart's objects is: (kind, name prefix, field prefix
# in the API server's message, key). The first row that matches names the key; otherwise the object is named.
CHART_KEYS: tuple[tuple[str, str, str, str], ...] = (
    ("PersistentVolumeClaim", "determined-db-pvc", "spec.storageClassName", "db.storageClassName"),
    ("PersistentVolumeClaim", "determined-db-pvc", "", "db.storageSize"),
    ("Deployment", "determined-master-deployment", "spec.template.spec.containers[0].resources.requests.cpu",
     "masterCpuRequest"),
    ("Deployment", "determined-master-deployment", "spec.template.spec.containers[0].resources.requests.memory",
     "masterMemRequest"),
    ("Deployment", "determined-master-deployment", "spec.template.spec.containers[0].resources.limits.cpu",
     "masterCpuLimit"),
    ("Deployment", "determined-master-deployment", "spec.template.spec.containers[0].resources.limits.memory",
     "masterMemLimit"),
    ("Deployment", "determined-master-deployment", "spec.template.spec.containers[0].resources", "masterCpuRequest"),
    ("Deployment", "determined-db-deployment", "spec.template.spec.containers[0].resources.requests.cpu",
     "db.cpuRequest"),
    ("Deployment", "determined-db-deployment", "spec.template.spec.containers[0].resources.requests.memory",
     "db.memRequest"),
    ("Deployment", "determined-db-deployment", "spec.template.spec.containers[0].resources.limits.cpu",
     "db.cpuLimit"),
    ("Deployment", "determined-db-deployment", "spec.template.spec.containers[0].resources.limits.memory",
     "db.memLimit"),
    ("Service", "determined-master-service", "spec.type", "useNodePortForMaster"),
    ("Service", "determined-master-service", "spec.ports", "masterPort"),
    ("Service", "determined-db-service", "spec.type", "db.useNodePortForDB"),
)


@dataclass(frozen=True)
class _Resource:
    prefix: str  # "/api/v1" or "/apis/<group>/<version>"
    plural: str
    namespaced: bool

    def url(self, namespace: str | None, name: str) -> str:
        return Kind(self.plural, self.prefix, self.plural, self.namespaced).path(
            namespace if self.namespaced else None, name)


def _resources(api: KubeApi, api_version: str, cache: dict[str, dict[str, _Resource] | None]) -> dict[str, _Resource]:
    """kind -> resource of one group/version, from discovery (a version the server does not serve: none)."""
    if api_version not in cache:
        prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        try:
            listing = api.request("GET", prefix, what=f"the API server's {api_version} resources")
        except NotFound:
            cache[api_version] = None
        else:
            found: dict[str, _Resource] = {}
            for item in listing.get("resources") or () if isinstance(listing, Mapping) else ():
                name = str(item.get("name") or "") if isinstance(item, Mapping) else ""
                if name and "/" not in name and item.get("kind"):
                    found[str(item["kind"])] = _Resource(prefix, name, bool(item.get("namespaced")))
            cache[api_version] = found
    return cache[api_version] or {}


def chart_objects(manifests: str) -> list[dict[str, Any]]:
    """The objects of a rendered chart (`helm template`'s YAML stream): mappings with a kind and a name."""
    objects = []
    for document in yaml.safe_load_all(manifests):
        if isinstance(document, Mapping) and document.get("kind") and isinstance(document.get("metadata"), Mapping) \
                and document["metadata"].get("name"):
            objects.append(dict(document))
    return objects


def chart_key(kind: str, name: str, message: str) -> str | None:
    """The settings key behind a refusal of the bundled chart's object, where one row of CHART_KEYS says so."""
    fields = re.findall(r"(spec(?:\.[A-Za-z]+|\[\d+\])+)", message)
    for row_kind, row_name, row_field, key in CHART_KEYS:
        if kind == row_kind and name.startswith(row_name) and (
                not row_field or any(f.startswith(row_field) for f in fields)):
            return key
    return None


def dry_run_chart_objects(api: KubeApi, manifests: str, namespace: str, sources: SourceMap | None = None, *,
                          user_chart: bool = False, namespace_exists: bool = True) -> list[Problem]:
    """The API server's verdict on every object the chart would create or change: a server-side apply with
    `dryRun=All` (nothing is stored), so validation, immutable fields, quota, webhooks and admission policies are
    judged as at `helm install`/`upgrade`. Refusals name the settings key (bundled chart) or the object. Where the
    namespace does not exist yet (an install that creates it), only the cluster-scoped objects are judged."""
    problems: list[Problem] = []
    cache: dict[str, dict[str, _Resource] | None] = {}
    missing_namespace = not namespace_exists
    unchecked: list[str] = []  # objects these credentials may not apply, even as a dry run: one warning for all
    unserved: list[str] = []  # objects of kinds the API server's discovery does not list: one warning for all
    for obj in chart_objects(manifests):
        kind, meta = str(obj["kind"]), dict(obj["metadata"])
        name = str(meta["name"])
        label = f"the chart's {kind} {name}"
        resource = _resources(api, str(obj.get("apiVersion") or ""), cache).get(kind)
        if resource is None:
            unserved.append(f"{obj.get('apiVersion')} {kind} {name}")
            continue
        ns = str(meta.get("namespace") or namespace) if resource.namespaced else None
        if ns is not None:
            meta["namespace"] = ns
        if ns is not None and missing_namespace:
            continue
        body = json.dumps({**obj, "metadata": meta})
        try:
            api.request("PATCH", resource.url(ns, name), body=body, content_type=APPLY_PATCH,
                        query=[("dryRun", "All"), ("fieldManager", DRY_RUN_MANAGER), ("force", "true")],
                        what=f"{label} (dry run)")
        except Rejected as exc:
            key = None if user_chart else chart_key(kind, name, exc.message)
            problems.append(Problem(Severity.ERROR, key or label, f"the API server of {api.target.context} refuses "
                                    f"{label}" + (" built from it" if key else "") + f": {exc.message}",
                                    "helm would fail part-way through; fix the field it names", _where(sources, key)))
        except Forbidden as exc:
            refused = ("exceeded quota" in exc.message or "webhook" in exc.message
                       or "violates" in exc.message.lower() or "denied request" in exc.message
                       or "ValidatingAdmissionPolicy" in exc.message)
            if refused:
                key = None if user_chart else chart_key(kind, name, exc.message)
                problems.append(Problem(Severity.ERROR, key or label, f"admission in {api.target.context} refuses "
                                        f"{label}: {exc.message}", "helm would fail part-way through",
                                        _where(sources, key)))
            else:
                unchecked.append(f"{kind} {name}")
        except NotFound:
            if ns is not None:
                missing_namespace = True
                problems.append(Problem(Severity.WARNING, f"the chart's objects in {ns}", "not checked by the API "
                                        f"server: namespace {ns} does not exist yet", None))
            else:
                problems.append(Problem(Severity.WARNING, label, "not checked by the API server (not found)", None))
        except DetK8sError as exc:
            problems.append(Problem(Severity.WARNING, label, f"not checked by the API server: {exc.message}", None))
            break
    if unserved:
        problems.append(Problem(Severity.WARNING, "the chart's objects", f"{len(unserved)} not checked by the API "
                                f"server ({api.target.context}'s discovery does not list their kinds): "
                                + ", ".join(unserved), None))
    if unchecked:
        problems.append(Problem(Severity.WARNING, "the chart's objects", f"{len(unchecked)} not checked by the API "
                                f"server (no permission to apply them, even as a dry run): {', '.join(unchecked)}",
                                "helm needs the same permissions to install them"))
    return problems


def _where(sources: SourceMap | None, key: str | None) -> Location | None:
    return sources.find(tuple(key.split("."))) if sources is not None and key else None
