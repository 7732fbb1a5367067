"""Every settings key det-k8s knows, with its type, default and meaning.

This table is the single source of truth: validation reads it to find unknown keys and wrong
types, rendering reads its defaults ("unset keys keep the chart's defaults"), and the chart's
`values.schema.json` is generated from it so that `helm install` checks the same things. The keys
are the official Determined chart's values keys of every supported release (0.17.15, 0.26.2 and
v0.38.1 read; tests compare this table with those charts), plus `appVersion`, which goes to
Chart.yaml, and `gangScheduler`, det-k8s's own. A key with a `fact` exists only in the releases
where that row of `determined.versions` holds; a key that is not `implemented` is accepted (a
values file copied from the official chart validates) and warned about: det-k8s's chart ignores it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .. import __version__
from ..determined import versions


class Kind(str, Enum):
    STRING = "string"
    INTEGER = "integer"
    BOOLEAN = "boolean"
    QUANTITY = "quantity"  # a Kubernetes quantity: "2", "8Gi", "7910m" or a number
    CPU = "cpu"  # a number of CPUs: 7.5, or a quantity such as "7500m" (normalised to 7.5)
    ENUM = "enum"
    OBJECT = "object"  # free-form mapping (a pod spec)
    SECTION = "section"  # a mapping of known keys
    LIST = "list"  # a list (resource pools, log policies)
    ANY = "any"  # anything: keys det-k8s's chart accepts but does not implement


@dataclass(frozen=True)
class Key:
    kind: Kind
    doc: str
    default: Any = None
    secret: bool = False
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    children: Mapping[str, Key] = field(default_factory=dict)
    chart_yaml: bool = False  # lives in Chart.yaml, not values.yaml
    fact: str | None = None  # a row of determined.versions: the key exists only in the releases where it holds
    implemented: bool = True  # False: the official chart's key, accepted, but det-k8s's chart does nothing with it
    version_default: str | None = None  # a determined.versions row whose value is the default at each release
    trim: bool = False  # ENUM: surrounding spaces allowed (the official chart trims defaultScheduler)

    @property
    def expected(self) -> str:
        """What a user should write, for 'expected ...' messages."""
        return {
            Kind.STRING: "a string",
            Kind.INTEGER: "an integer",
            Kind.BOOLEAN: "true or false",
            Kind.QUANTITY: "a Kubernetes quantity such as 2, 500m or 8Gi",
            Kind.CPU: "a number of CPUs such as 7.5 or 7500m",
            Kind.ENUM: "one of " + ", ".join(repr(c) for c in self.choices),
            Kind.OBJECT: "a mapping",
            Kind.SECTION: "a mapping",
            Kind.LIST: "a list",
            Kind.ANY: "a value",
        }[self.kind]


def _s(doc: str, default: Any = None, **kw: Any) -> Key:
    return Key(Kind.STRING, doc, default, **kw)


def _b(doc: str, default: Any = None, **kw: Any) -> Key:
    return Key(Kind.BOOLEAN, doc, default, **kw)


def _i(doc: str, default: Any = None, **kw: Any) -> Key:
    return Key(Kind.INTEGER, doc, default, **kw)


def _q(doc: str, default: Any = None, **kw: Any) -> Key:
    return Key(Kind.QUANTITY, doc, default, **kw)


def _section(doc: str, fact: str | None = None, implemented: bool = True, **children: Key) -> Key:
    return Key(Kind.SECTION, doc, children=children, fact=fact, implemented=implemented)


def _unimplemented(doc: str) -> Key:
    return Key(Kind.ANY, doc, implemented=False)


CHECKPOINT_TYPES = ("shared_fs", "s3", "gcs", "azure", "directory", "hdfs")
SLOT_TYPES = ("gpu", "cuda", "cpu", "rocm")
SCHEDULERS = ("", "coscheduler", "preemption")
GANG_SCHEDULERS = ("det-k8s", "plugin")
# The chart's scheduler Deployment's image when detK8sScheduler.image is unset: a placeholder no registry serves
# (scripts/image or `docker build -f deploy/Dockerfile` builds the image; the user pushes it and names it).
DEFAULT_SCHEDULER_IMAGE = f"det-k8s:{__version__}"
# defaultScheduler when the bundled chart deploys det-k8s's scheduler and the user left it unset: the scheduler
# name the master then gives its task pods, which that scheduler serves.
DET_K8S_SCHEDULER_NAME = "coscheduler"
# The master image tag, the release whose configuration the chart writes; `appVersion` in Chart.yaml.
DEFAULT_APP_VERSION = str(versions.DEFAULT)

SCHEMA: Mapping[str, Key] = {
    "appVersion": _s(f"Determined release to install ({versions.SUPPORTED_RANGE}): the master image tag, and the "
                     "release whose configuration the chart writes (goes to Chart.yaml)",
                     DEFAULT_APP_VERSION, chart_yaml=True),
    "imageRegistry": _s("Registry (or Docker Hub organisation) holding the master image (and, before Determined "
                        "0.23.2, the default task images)", "determinedai"),
    "defaultImages": _section(
        "Default images (Determined 0.23.2 and later)", fact="chart.default_images",
        postgreSQL=_s("Image of the bundled database", version_default="chart.image.postgres"),
        kubeScheduler=_s("Image of the scheduler-plugins kube-scheduler (gangScheduler: plugin)",
                         version_default="chart.image.kube_scheduler"),
        kubeSchedulerPreemption=_s("Image of Determined's preemption kube-scheduler (gangScheduler: plugin)",
                                   version_default="chart.image.kube_scheduler_preemption",
                                   fact="chart.image.kube_scheduler_preemption"),
        cpuImage=_s("Default image of CPU tasks", version_default="chart.image.cpu"),
        gpuImage=_s("Default image of GPU tasks", version_default="chart.image.gpu"),
        rocmImage=_s("Default image of ROCm tasks", version_default="chart.image.rocm", fact="chart.image.rocm"),
    ),
    "enterpriseEdition": _b("Install the enterprise edition master image", False),
    "imagePullSecretName": _s("Existing docker-registry Secret used to pull the master image"),
    "logLevel": Key(Kind.ENUM, "Master log level", "info", choices=("trace", "debug", "info", "warn", "error", "fatal"),
                    fact="master.log"),
    "logColor": _b("Colour in the master's log", True, fact="master.log"),
    "masterPort": _i("Port of the master Service", 8080, minimum=1, maximum=65535),
    "createNonNamespacedObjects": _b("Create the cluster-wide PriorityClasses (false for a second release: the "
                                     "first one's are used)", True),
    "externalCaCertSecretName": _s("Secret with extra CA certificates the master trusts (installed by an init "
                                   "container)"),
    "useNodePortForMaster": _b("Expose the master with a NodePort Service instead of a LoadBalancer", False),
    "masterService": _section("The master Service",
                              annotations=Key(Kind.OBJECT, "Annotations on the master Service")),
    "loadBalancerSourceRanges": Key(Kind.LIST, "CIDRs allowed to reach the master's LoadBalancer Service"),
    "openshiftRoute": _section(
        "An OpenShift Route to the master Service",
        enabled=_b("Create the Route determined-master-route-<release>"),
        host=_s("Host name of the Route"),
        termination=_s("TLS termination of the Route (edge, passthrough, reencrypt)"),
    ),
    "tlsSecret": _s("Existing kubernetes.io/tls Secret; the master terminates TLS itself"),
    "security": _section(
        "Master security settings", fact="master.security.default_task",
        defaultTask=_section("User and group tasks run as",
                             user=_s("User name"), uid=_i("User id"), group=_s("Group name"), gid=_i("Group id")),
        authz=Key(Kind.OBJECT, "Authorization mode (enterprise edition), e.g. type: rbac"),
        token=_unimplemented("Access tokens (enterprise edition; no template of the official chart reads it)"),
    ),
    "oidc": _unimplemented("OpenID Connect (enterprise edition)"),
    "scim": _section("SCIM (enterprise edition)", implemented=False,
                     enabled=_b("Enable SCIM"),
                     auth=_section("SCIM authentication", type=_s("basic"), username=_s("User"),
                                   password=_s("Password", secret=True))),
    "saml": _unimplemented("SAML (enterprise edition)"),
    "db": _section(
        "Database. Without hostAddress the chart runs its own Postgres",
        hostAddress=_s("Address of an external Postgres; when set, no database is deployed"),
        name=_s("Database name", "determined"),
        user=_s("Database user", "postgres"),
        password=_s("Database password (stored in a Secret)", "postgres", secret=True),
        port=_i("Database port", 5432, minimum=1, maximum=65535),
        storageSize=_q("Size of the bundled database's volume", "30Gi"),
        cpuRequest=_q("CPU request of the bundled database", "2"),
        memRequest=_q("Memory request of the bundled database", "8Gi"),
        cpuLimit=_q("CPU limit of the bundled database"),
        memLimit=_q("Memory limit of the bundled database"),
        storageClassName=_s("StorageClass of the database volume (cluster default when unset)"),
        useNodePortForDB=_b("Expose the bundled database with a NodePort Service", False),
        disablePVC=_b("Run the bundled database without a volume (its data is lost with the pod)"),
        sslMode=_s("TLS to the database: the master's db.ssl_mode (e.g. verify-ca)"),
        sslRootCert=_s("File name of the CA certificate inside certResourceName"),
        resourceType=Key(Kind.ENUM, "Kind of object holding the certificate", choices=("secret", "configMap")),
        certResourceName=_s("Secret or ConfigMap holding the certificate"),
        claimSuffix=_unimplemented("Use PVC determined-db-pvc-<suffix>"),
        snapshotSuffix=_unimplemented("Snapshot the database volume on upgrade"),
        restoreSnapshotSuffix=_unimplemented("Restore the database volume from a snapshot on upgrade"),
    ),
    "checkpointStorage": _section(
        "Where checkpoints and TensorBoard events go",
        type=Key(Kind.ENUM, "Storage backend", "shared_fs", choices=CHECKPOINT_TYPES),
        hostPath=_s("shared_fs: directory on every node (testing only)", "/checkpoints"),
        mountToServer=_b("shared_fs: also mount hostPath into the master at /determined_shared_fs"),
        containerPath=_s("directory: path inside the task containers"),
        bucket=_s("s3, gcs: bucket name"),
        accessKey=_s("s3: access key id (default credential chain when unset)", secret=True),
        secretKey=_s("s3: secret access key", secret=True),
        endpointUrl=_s("s3: endpoint of an S3 clone such as MinIO, e.g. http://minio:9000"),
        prefix=_s("s3, gcs: key prefix inside the bucket"),
        container=_s("azure: blob container name"),
        connection_string=_s("azure: storage account connection string", secret=True),
        account_url=_s("azure: storage account URL (instead of connection_string)"),
        credential=_s("azure: credential for account_url (optional)", secret=True),
        hdfsUrl=_s("hdfs: the namenode URL (Determined before 0.23.0)"),
        hdfsPath=_s("hdfs: the directory"),
        user=_s("hdfs: the user"),
        saveExperimentBest=_i("Best checkpoints kept per experiment", 0, minimum=0),
        saveTrialBest=_i("Best checkpoints kept per trial", 1, minimum=0),
        saveTrialLatest=_i("Latest checkpoints kept per trial", 1, minimum=0),
    ),
    "maxSlotsPerPod": _i("Most slots (GPUs) one task pod gets; the GCD of the GPU node sizes", minimum=1,
                         maximum=4096),  # no node has more; bounds the arithmetic it feeds
    "slotType": Key(Kind.ENUM, "What a slot is: a GPU (gpu or cuda), slotResourceRequests.cpu CPUs (cpu), or an AMD "
                    "GPU (rocm)", "gpu", choices=SLOT_TYPES),
    "slotResourceRequests": _section(
        "Resources of one slot when slotType is cpu",
        cpu=Key(Kind.CPU, "CPUs per slot; must fit a node's allocatable CPU (e.g. 7.5 on an 8-core node)"),
    ),
    "masterCpuRequest": _q("CPU request of the master", "2"),
    "masterMemRequest": _q("Memory request of the master", "8Gi"),
    "masterCpuLimit": _q("CPU limit of the master"),
    "masterMemLimit": _q("Memory limit of the master"),
    "taskContainerDefaults": _section(
        "Defaults for the pods that run tasks",
        cpuPodSpec=Key(Kind.OBJECT, "Default pod spec of CPU tasks (an experiment's pod_spec replaces it)"),
        gpuPodSpec=Key(Kind.OBJECT, "Default pod spec of GPU tasks (an experiment's pod_spec replaces it)"),
        checkpointGcPodSpec=Key(Kind.OBJECT, "Pod spec of checkpoint-GC tasks",
                                fact="master.task_container_defaults.v0_38"),
        cpuImage=_s("Default image of CPU tasks"),
        gpuImage=_s("Default image of GPU tasks"),
        rocmImage=_s("Default image of ROCm tasks", fact="chart.image.rocm"),
        forcePullImage=_b("Always pull task images", False),
        networkMode=Key(Kind.ENUM, "Task network mode; host uses the node's network", choices=("bridge", "host")),
        dtrainNetworkInterface=_s("Network interface for distributed training"),
        ncclPortRange=_s("Ports for NCCL, as MIN:MAX", fact="master.task_container_defaults.port_ranges"),
        glooPortRange=_s("Ports for GLOO, as MIN:MAX", fact="master.task_container_defaults.port_ranges"),
        logPolicies=Key(Kind.LIST, "Log policies (pattern and action)", fact="master.task_container_defaults.v0_38"),
        startupHook=_s("Shell script run at the start of every task", fact="master.task_container_defaults.v0_38"),
    ),
    "defaultPassword": _s("Password of the admin and determined users: set by a post-install Job before Determined "
                          "0.31, the initial password from 0.31 (deprecated there: use initialUserPassword)",
                          secret=True),
    "initialUserPassword": _s("Initial password of the admin and determined users (Determined 0.31 and later; "
                              "required on a fresh install: 8+ characters with upper, lower and digit)",
                              secret=True, fact="master.security.initial_user_password"),
    "defaultScheduler": Key(Kind.ENUM, "Gang scheduling of the master's task pods: coscheduler, preemption (before "
                            "0.36), or empty (the default Kubernetes scheduler, one pod at a time); unset: "
                            "coscheduler where the bundled chart deploys det-k8s's scheduler (gangScheduler: det-k8s, "
                            "detK8sScheduler.enabled), else empty", choices=SCHEDULERS, trim=True),
    "gangScheduler": Key(Kind.ENUM, "det-k8s (default): the chart deploys det-k8s's scheduler (detK8sScheduler), "
                         "which binds the pods of defaultScheduler; plugin: the chart deploys the official chart's "
                         "kube-scheduler 1.18 plugin (unsupported on Kubernetes 1.20 and later)", "det-k8s",
                         choices=GANG_SCHEDULERS),
    "detK8sScheduler": _section(
        "det-k8s's gang scheduler, which the chart deploys with gangScheduler: det-k8s (`det-k8s scheduler run` in "
        "the release's namespace: ServiceAccount, RBAC, a Deployment holding the scheduling Lease)",
        enabled=_b("Deploy it; false: run `det-k8s scheduler run` elsewhere, or apply `det-k8s scheduler manifest`",
                   True),
        image=_s("The det-k8s image, as deploy/Dockerfile builds it (push it where the nodes pull from)",
                 DEFAULT_SCHEDULER_IMAGE),
        replicas=_i("Scheduler pods: the Lease lets one bind at a time, another takes over within 30 s", 2,
                    minimum=1, maximum=5),
        leaseNamespace=_s("Namespace of the scheduling Lease every det-k8s client of the cluster shares (the "
                          "clients' DET_K8S_LEASE_NAMESPACE)", "default"),
        imagePullSecretName=_s("Secret to pull the det-k8s image with"),
    ),
    "fluent": _section("Fluent Bit sidecar of task pods (deprecated in the master from 0.26)",
                       image=_s("Fluent Bit image"),
                       uid=_i("User id", fact="master.resource_manager.fluent.uid_gid"),
                       gid=_i("Group id", fact="master.resource_manager.fluent.uid_gid")),
    "telemetry": _section("Anonymous usage telemetry",
                          enabled=_b("Send anonymous telemetry", True)),
    "observability": _section("Prometheus endpoints", fact="master.observability",
                              enable_prometheus=_b("Serve Prometheus metrics")),
    "clusterName": _s("Name shown in the web UI"),
    "tensorboardTimeout": _i("Seconds before an idle TensorBoard is stopped", minimum=1, fact="master.idle_timeouts"),
    "notebookTimeout": _i("Seconds before an idle notebook is stopped", minimum=1, fact="master.idle_timeouts"),
    "resourcePools": Key(Kind.LIST, "Resource pools (pool_name, task_container_defaults, ...)",
                         fact="master.resource_pools"),
    "defaultAuxResourcePool": _s("Pool of CPU tasks", fact="master.resource_pools"),
    "defaultComputeResourcePool": _s("Pool of GPU tasks", fact="master.resource_pools"),
    "resourceManager": _section(
        "Kubernetes resource manager (Determined 0.35 and later)",
        defaultNamespace=_s("Namespace task pods go to by default (the release's namespace when unset)",
                            fact="master.resource_manager.default_namespace"),
        clusterName=_s("Name of this Kubernetes cluster in the master", fact="master.resource_manager.cluster_name"),
    ),
    "determinedMasterHost": _s("Host task pods reach the master at", fact="master.resource_manager.determined_master_host"),
    "determinedMasterPort": _i("Port for determinedMasterHost", minimum=1, maximum=65535,
                               fact="master.resource_manager.determined_master_host"),
    "determinedMasterScheme": _s("Scheme for determinedMasterHost (http or https)",
                                 fact="master.resource_manager.determined_master_host"),
    "retentionPolicy": _section("Trial log retention", fact="master.retention_policy",
                                logRetentionDays=_i("Days trial logs are kept", minimum=-1),
                                schedule=_s("When logs are cleaned up: a duration (24h) or a cron expression")),
    "additional_resource_managers": _unimplemented("More Kubernetes clusters (multi-cluster)"),
    "genai": _unimplemented("GenAI (enterprise edition)"),
    "sharedPVCName": _unimplemented("GenAI shared volume"),
    "detVersion": _unimplemented("Master image tag overriding appVersion (the official chart's CI switch); "
                                 "use appVersion"),
    "logging": _section(
        "Where task logs go",
        type=Key(Kind.ENUM, "default (the database) or elastic", choices=("default", "elastic")),
        host=_s("elastic: Elasticsearch host"),
        port=_i("elastic: Elasticsearch port", minimum=1, maximum=65535),
        security=_section(
            "elastic: authentication and TLS",
            username=_s("Elasticsearch user"),
            password=_s("Elasticsearch password", secret=True),
            tls=_section(
                "TLS to Elasticsearch",
                enabled=_b("Use TLS"),
                skipVerify=_b("Skip certificate verification"),
                certificateName=_s("Server name on the certificate"),
                certificate=_s("PEM certificate contents"),
            ),
        ),
    ),
}


def walk(schema: Mapping[str, Key] = SCHEMA, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Key]]:
    """Every (path, key) in the schema, sections included, depth first."""
    for name, key in schema.items():
        path = (*prefix, name)
        yield path, key
        if key.kind is Kind.SECTION:
            yield from walk(key.children, path)


def lookup(path: tuple[str | int, ...]) -> Key | None:
    """The schema entry for a path, or None when the path is unknown or inside a free-form object."""
    node: Mapping[str, Key] = SCHEMA
    key: Key | None = None
    for part in path:
        if not isinstance(part, str) or part not in node:
            return None
        key = node[part]
        node = key.children
    return key


def exists_in(key: Key, version: versions.Version | None) -> bool:
    """True when `key` is a setting of Determined `version` (any release when version is None)."""
    return version is None or key.fact is None or versions.has(key.fact, version)


def default_of(key: Key, version: versions.Version | None) -> Any:
    if key.version_default is not None and version is not None:
        return versions.value_of(key.version_default, version)
    return key.default


def defaults(schema: Mapping[str, Key] = SCHEMA, *, include_chart_yaml: bool = False,
             version: versions.Version | None = None) -> dict[str, Any]:
    """The chart's default values for Determined `version` (null defaults are left out, as helm leaves them
    unset; keys that release does not have are left out too)."""
    out: dict[str, Any] = {}
    for name, key in schema.items():
        if (key.chart_yaml and not include_chart_yaml) or not exists_in(key, version):
            continue
        if key.kind is Kind.SECTION:
            inner = defaults(key.children, version=version)
            if inner:  # a section without any default is left out, as helm would leave it unset
                out[name] = inner
        elif default_of(key, version) is not None:
            out[name] = default_of(key, version)
    return out


def secret_paths() -> frozenset[tuple[str, ...]]:
    """Key paths whose values are secrets: never printed, written only to 0600 files."""
    return frozenset(path for path, key in walk() if key.secret)


def all_names() -> frozenset[str]:
    """Every key name at any depth, for 'did you mean' suggestions."""
    return frozenset(path[-1] for path, _ in walk())


def deploys_det_k8s_scheduler(values: Mapping[str, Any]) -> bool:
    """Whether the bundled chart deploys det-k8s's scheduler with these effective values (its template's own test:
    gangScheduler det-k8s, the default, and detK8sScheduler.enabled not false)."""
    section = values.get("detK8sScheduler")
    enabled = section.get("enabled", True) if isinstance(section, Mapping) else True
    return (values.get("gangScheduler") or "det-k8s") == "det-k8s" and str(enabled).lower() != "false"
