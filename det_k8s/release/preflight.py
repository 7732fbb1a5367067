"""Live preflight checks for install and upgrade, as pure functions over what the cluster said.

`live.py` fetches (server version, nodes, namespace, secrets, other releases); these decide. The
node rules themselves (`maxSlotsPerPod` against GPU nodes, a CPU slot against allocatable CPU)
are `settings.node_rules.check_nodes`, shared with `det-k8s validate`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..cluster.model import Constraints, limiting
from ..cluster.quota import QuotaFacts, amount, usage_of
from ..errors import Problem, Severity, ToolFailed
from ..labels import APP_INSTANCE, APP_VERSION
from ..quantity import QuantityError, format_milli, parse_quantity
from ..settings import Settings
from ..settings.source import SourceMap

CHART_PREFIX = "determined-"


@dataclass(frozen=True)
class ReleaseRef:
    """One Determined release, from `helm list -o json` or from a labelled master Deployment."""

    name: str
    namespace: str
    chart: str = ""
    app_version: str = ""
    status: str = ""
    revision: str = ""

    @property
    def where(self) -> str:
        return f"{self.name} in namespace {self.namespace}"


def determined_releases(helm_list: Any) -> list[ReleaseRef]:
    """The entries of `helm list -o json` whose chart is Determined (`determined-<version>`).

    helm prints a list of objects; anything else (another helm's format, a plugin's output) is
    refused with one line rather than read as if it were one.
    """
    if helm_list is None:
        return []
    if not isinstance(helm_list, list):
        raise ToolFailed("helm list -o json printed JSON of another shape (expected a list of releases)",
                         returncode=0, hint="is --helm-binary / DET_K8S_HELM really helm 3 or 4?")
    out = []
    for entry in helm_list:
        if not isinstance(entry, dict):
            continue
        chart = str(entry.get("chart") or "")
        if chart.startswith(CHART_PREFIX):
            out.append(ReleaseRef(str(entry.get("name") or ""), str(entry.get("namespace") or ""), chart,
                                  str(entry.get("app_version") or ""), str(entry.get("status") or ""),
                                  str(entry.get("revision") or "")))
    return out


def releases_from_deployments(deployments: Sequence[Mapping[str, Any]]) -> list[ReleaseRef]:
    """Masters labelled app.kubernetes.io/name=determined (catches releases helm cannot list for us)."""
    out = []
    for obj in deployments:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        name = labels.get(APP_INSTANCE) or labels.get("release")
        if name and str(meta.get("name", "")).startswith("determined-master-deployment-"):
            out.append(ReleaseRef(str(name), str(meta.get("namespace") or ""),
                                  app_version=str(labels.get(APP_VERSION) or "")))
    return out


def merge_releases(*groups: Sequence[ReleaseRef]) -> list[ReleaseRef]:
    seen: dict[tuple[str, str], ReleaseRef] = {}
    for group in groups:
        for ref in group:
            seen.setdefault((ref.name, ref.namespace), ref)
    return sorted(seen.values(), key=lambda r: (r.namespace, r.name))


def check_namespace(namespace: str, exists: bool, create_namespace: bool) -> list[Problem]:
    if exists or create_namespace:
        return []
    return [Problem(Severity.ERROR, "", f"namespace {namespace} does not exist",
                    f"pass --create-namespace, or create it: kubectl create namespace {namespace}")]


def check_secrets(settings: Settings, namespace: str, existing: Collection[str],
                  sources: SourceMap | None = None) -> list[Problem]:
    """imagePullSecretName and tlsSecret must name Secrets in the release's namespace."""
    problems = []
    wanted = [
        ("imagePullSecretName", settings.image_pull_secret,
         f"kubectl create secret docker-registry {{name}} -n {namespace} --docker-server=REGISTRY "
         "--docker-username=USER --docker-password=PASSWORD"),
        ("tlsSecret", settings.tls_secret,
         f"kubectl create secret tls {{name}} -n {namespace} --cert=tls.crt --key=tls.key"),
    ]
    for key, name, command in wanted:
        if name and name not in existing:
            what = "the master image cannot be pulled" if key == "imagePullSecretName" else "the master cannot start"
            problems.append(Problem(Severity.ERROR, key, f"Secret {name} does not exist in namespace {namespace}: "
                                    f"{what}", f"create it first: {command.format(name=name)}",
                                    sources.find((key,)) if sources else None))
    return problems


def check_other_releases(release: str, namespace: str, releases: Sequence[ReleaseRef], *,
                         upgrading: bool) -> list[Problem]:
    """Install: this name must be free; upgrade: it must exist. Any other release: one per cluster."""
    problems = []
    mine = [r for r in releases if (r.name, r.namespace) == (release, namespace)]
    others = [r for r in releases if (r.name, r.namespace) != (release, namespace)]
    if mine and not upgrading:
        problems.append(Problem(Severity.ERROR, "", f"release {release} already exists in namespace {namespace}",
                                f"change it with det-k8s upgrade {release} -f ..."))
    if not mine and upgrading:
        problems.append(Problem(Severity.ERROR, "", f"no Determined release {release} in namespace {namespace}",
                                "det-k8s list -A shows the releases; det-k8s install creates one"))
    if others:
        names = ", ".join(r.where for r in others)
        problems.append(Problem(Severity.WARNING, "", f"the cluster already runs Determined ({names}); the documents "
                                "recommend one instance per cluster", "two masters compete for the same GPUs"))
    return problems


PRIORITY_CLASSES = ("determined-system-priority", "determined-medium-priority")  # the official chart's names


def check_priority_classes(existing: Sequence[Mapping[str, Any]], release: str, namespace: str, *, create: bool,
                           upgrading: bool) -> list[Problem]:
    """The chart creates determined-system-priority and determined-medium-priority (cluster-wide, owned by the
    release) unless createNonNamespacedObjects is false. helm refuses to create one that exists and belongs to
    another release (or to none: the official chart of another installation); without them the master and
    database pods, and every checkpoint-GC pod, are refused by the API server."""
    found = {str((pc.get("metadata") or {}).get("name")): pc for pc in existing}
    problems = []
    for name in PRIORITY_CLASSES:
        pc = found.get(name)
        if not create:
            if pc is None:
                problems.append(Problem(Severity.ERROR, "createNonNamespacedObjects", f"PriorityClass {name} does "
                                        "not exist, and with createNonNamespacedObjects: false the chart does not "
                                        "create it: the master and database pods would be refused",
                                        "set createNonNamespacedObjects: true (the first release in a cluster must)"))
            continue
        if pc is None:
            continue
        annotations = (pc.get("metadata") or {}).get("annotations") or {}
        owner = (annotations.get("meta.helm.sh/release-name"), annotations.get("meta.helm.sh/release-namespace"))
        if owner == (release, namespace):
            continue
        held = (f"release {owner[0]} in namespace {owner[1]}" if owner[0] else
                "no helm release (created by hand or by another tool)")
        problems.append(Problem(Severity.ERROR, "createNonNamespacedObjects", f"PriorityClass {name} already exists, "
                                f"owned by {held}: helm would refuse to install over it",
                                "set createNonNamespacedObjects: false to use the existing PriorityClasses (one "
                                "installation per cluster owns them)"))
    return problems


DEFAULT_CLASS_ANNOTATIONS = ("storageclass.kubernetes.io/is-default-class",
                             "storageclass.beta.kubernetes.io/is-default-class")
NO_PROVISIONER = "kubernetes.io/no-provisioner"


def _is_default(storage_class: Mapping[str, Any]) -> bool:
    annotations = (storage_class.get("metadata") or {}).get("annotations") or {}
    return any(str(annotations.get(a, "")).lower() == "true" for a in DEFAULT_CLASS_ANNOTATIONS)


def _volumes_for(volumes: Sequence[Mapping[str, Any]], class_name: str, size: int | None) -> list[str]:
    """PersistentVolumes of `class_name` ("" = no class) still Available and at least `size` bytes."""
    found = []
    for pv in volumes:
        spec, status = pv.get("spec") or {}, pv.get("status") or {}
        if (spec.get("storageClassName") or "") != class_name or status.get("phase") != "Available":
            continue
        try:
            capacity = parse_quantity(str((spec.get("capacity") or {}).get("storage", "0")))
        except QuantityError:  # a PV the API server accepted; an odd capacity is not ours to judge
            continue
        if size is None or capacity >= size:
            found.append(str((pv.get("metadata") or {}).get("name")))
    return found


def check_database_volume(values: Mapping[str, Any], storage_classes: Sequence[Mapping[str, Any]],
                          volumes: Sequence[Mapping[str, Any]], existing_claim: Mapping[str, Any] | None,
                          sources: SourceMap | None = None) -> list[Problem]:
    """The bundled database's PersistentVolumeClaim must be able to bind, or it stays Pending forever and the
    database never starts (found on a real cluster: no default StorageClass and db.storageClassName unset).

    Nothing to check with an external database (db.hostAddress), db.disablePVC, or a claim that is bound already.
    A named class must exist; without one the cluster needs a default class; a class with no provisioner (and no
    class at all) binds only to a PersistentVolume made by hand, so one must be Available and large enough.
    """
    db = values.get("db") if isinstance(values.get("db"), Mapping) else {}
    assert isinstance(db, Mapping)
    if db.get("hostAddress") or db.get("disablePVC"):
        return []
    if existing_claim is not None and ((existing_claim.get("status") or {}).get("phase") == "Bound"):
        return []
    try:
        size: int | None = int(parse_quantity(str(db.get("storageSize") or "0"))) or None
    except QuantityError:  # the settings rules report a bad size
        size = None
    where = sources.find(("db", "storageClassName")) if sources else None
    named = str(db.get("storageClassName") or "")
    by_name = {str((c.get("metadata") or {}).get("name")): c for c in storage_classes}
    names = ", ".join(sorted(by_name)) or "none"
    if named:
        chosen = by_name.get(named)
        if chosen is None:
            return [Problem(Severity.ERROR, "db.storageClassName", f"StorageClass {named} does not exist: the database "
                            "volume would stay Pending and the database never start",
                            f"set db.storageClassName to one of the cluster's classes ({names})", where)]
        if chosen.get("provisioner") != NO_PROVISIONER or _volumes_for(volumes, named, size):
            return []
        return [Problem(Severity.ERROR, "db.storageClassName", f"StorageClass {named} provisions nothing "
                        f"({NO_PROVISIONER}) and no PersistentVolume of that class is Available"
                        + (f" with {db.get('storageSize')}" if size else "") + ": the database volume would stay "
                        "Pending", "create a PersistentVolume of that class first, or choose a class that provisions",
                        where)]
    defaults = [name for name, c in by_name.items() if _is_default(c)]
    if defaults:
        chosen = by_name[sorted(defaults)[0]]
        if chosen.get("provisioner") != NO_PROVISIONER or _volumes_for(volumes, sorted(defaults)[0], size):
            return []
        return [Problem(Severity.ERROR, "db.storageClassName", f"the default StorageClass {sorted(defaults)[0]} "
                        f"provisions nothing ({NO_PROVISIONER}) and no PersistentVolume of it is Available: the "
                        "database volume would stay Pending", "set db.storageClassName to a class that provisions, or "
                        "create a PersistentVolume first", where)]
    if _volumes_for(volumes, "", size):
        return []  # binds to a PersistentVolume without a class, made by hand
    return [Problem(Severity.ERROR, "db.storageClassName", "db.storageClassName is unset and the cluster has no "
                    "default StorageClass: the database volume would stay Pending and the database never start",
                    f"set db.storageClassName to one of the cluster's classes ({names}), or use an external database "
                    "(db.hostAddress)", where)]


SYSTEM_PRIORITY = "determined-system-priority"  # the bundled chart's master and database pods


@dataclass(frozen=True)
class SystemPod:
    """The master's or the bundled database's pod, as the bundled chart makes it from the settings."""

    what: str  # "master", "database"
    keys: Mapping[str, str]  # resource -> the settings key of its request (cpu, memory)
    requests: Mapping[str, int]  # milli-units
    limits: Mapping[str, int]


def _milli(value: Any) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(parse_quantity(str(value)) * 1000)
    except QuantityError:
        return None


def system_pods(values: Mapping[str, Any], *, upgrading: bool) -> list[SystemPod]:
    """The pods of the chart's own that the nodes must hold: the master's, and for a fresh install the bundled
    database's (an upgrade replaces it, Recreate: its request is already counted)."""
    db = values.get("db") if isinstance(values.get("db"), Mapping) else {}
    db = db if isinstance(db, Mapping) else {}
    rows = [("master", values, {"cpu": "masterCpuRequest", "memory": "masterMemRequest"},
             {"cpu": "masterCpuLimit", "memory": "masterMemLimit"}, "")]
    if not upgrading and not db.get("hostAddress"):
        rows.append(("database", db, {"cpu": "cpuRequest", "memory": "memRequest"},
                     {"cpu": "cpuLimit", "memory": "memLimit"}, "db."))
    out = []
    for what, where, requests, limits, prefix in rows:
        asked = {r: m for r, key in requests.items() if (m := _milli(where.get(key))) is not None}
        capped = {r: m for r, key in limits.items() if (m := _milli(where.get(key))) is not None}
        out.append(SystemPod(what, {r: prefix + key for r, key in requests.items()}, asked, capped))
    return out


def check_system_pods(pods: Sequence[SystemPod], nodes: Sequence[Any], quotas: Sequence[Any], namespace: str,
                      sources: SourceMap | None = None, origin: str = "the cluster") -> list[Problem]:
    """Does each of the chart's own pods fit a node's allocatable resources (nodes it may run on: ready or not,
    not cordoned, no taint it does not tolerate), and do they all fit the namespace's ResourceQuotas? The same
    question det-k8s asks of task slots; the answer now rather than a master Pending for ever."""
    def where(key: str) -> Any:
        return sources.find(tuple(key.split("."))) if sources is not None else None

    problems: list[Problem] = []
    usable = [n for n in nodes if Constraints().node_cause(n, lasting=True) is None]
    for pod in pods:
        if not usable or not pod.requests:
            break
        if any(all(n.allocatable.get(r, 0) >= m for r, m in pod.requests.items()) for n in usable):
            continue
        best = max(usable, key=lambda n: tuple(n.allocatable.get(r, 0) for r in sorted(pod.requests)))
        short = limiting(pod.requests, best.allocatable) or sorted(pod.requests)[0]
        key = pod.keys.get(short, "")
        largest = max(n.allocatable.get(short, 0) for n in usable)
        problems.append(Problem(
            Severity.ERROR, key, f"{format_milli(short, pod.requests[short])}: the {pod.what}'s pod asks more {short} "
            f"than any node of {origin} can give (the most allocatable {short}: {format_milli(short, largest)}, of "
            f"{len(usable)} node(s) it may run on); it would stay Pending and the {pod.what} never start",
            f"lower {key}, or add a node with more allocatable {short}", where(key)))
    for quota in quotas:
        if quota.namespace != namespace:
            continue
        charged: dict[str, int] = {}
        brought: dict[str, list[SystemPod]] = {}
        for pod in pods:
            facts = QuotaFacts(usage_of(pod.requests, pod.limits), best_effort=not pod.requests,
                               priority_class=SYSTEM_PRIORITY)
            for resource, extra in quota.charge_of(facts).items():
                charged[resource] = charged.get(resource, 0) + extra
                brought.setdefault(resource, []).append(pod)
        for resource, extra in sorted(charged.items()):
            hard, used = quota.hard.get(resource, 0), quota.used.get(resource, 0)
            if used + extra <= hard:
                continue
            bare = resource.removeprefix("requests.").removeprefix("limits.")
            first = brought[resource][0]
            key = first.keys.get(bare, "") if not resource.startswith("limits.") else ""
            who = " and ".join(f"the {p.what}'s pod" for p in brought[resource])
            problems.append(Problem(
                Severity.ERROR, key, f"ResourceQuota {quota.name} in namespace {namespace} would refuse {who}: "
                f"{resource} {amount(resource, used)} used of {amount(resource, hard)}, and {who} add "
                f"{amount(resource, extra)}; the {first.what} would never start",
                f"raise the quota's {resource}, free some of it, or lower what the chart's pods ask",
                where(key) if key else None))
            break  # one line per quota
    return problems
