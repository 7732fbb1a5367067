"""Every settings key det-k8s knows, with its type, default and meaning.

This table is the single source of truth: validation reads it to find unknown keys and wrong
types, rendering reads its defaults ("unset keys keep the chart's defaults"), and the chart's
`values.schema.json` is generated from it so that `helm install` checks the same things. The keys
are exactly the Determined chart's values keys of the 0.17 line, plus `appVersion`, which goes to
Chart.yaml.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Kind(str, Enum):
    STRING = "string"
    INTEGER = "integer"
    BOOLEAN = "boolean"
    QUANTITY = "quantity"  # a Kubernetes quantity: "2", "8Gi", "7910m" or a number
    CPU = "cpu"  # a number of CPUs: 7.5, or a quantity such as "7500m" (normalised to 7.5)
    ENUM = "enum"
    OBJECT = "object"  # free-form mapping (a pod spec)
    SECTION = "section"  # a mapping of known keys


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
        }[self.kind]


def _s(doc: str, default: Any = None, **kw: Any) -> Key:
    return Key(Kind.STRING, doc, default, **kw)


def _section(doc: str, **children: Key) -> Key:
    return Key(Kind.SECTION, doc, children=children)


CHECKPOINT_TYPES = ("shared_fs", "s3", "gcs", "azure")
SLOT_TYPES = ("gpu", "cpu")
SCHEDULERS = ("", "coscheduler", "preemption")

SCHEMA: Mapping[str, Key] = {
    "appVersion": _s("Determined version to install: the master image tag (goes to Chart.yaml)",
                     "0.17.15", chart_yaml=True),
    "imageRegistry": _s("Registry (or Docker Hub organisation) holding the Determined images", "determinedai"),
    "enterpriseEdition": Key(Kind.BOOLEAN, "Install the enterprise edition master image", False),
    "imagePullSecretName": _s("Existing docker-registry Secret used to pull the master image"),
    "masterPort": Key(Kind.INTEGER, "Port of the master Service", 8080, minimum=1, maximum=65535),
    "useNodePortForMaster": Key(Kind.BOOLEAN, "Expose the master with a NodePort Service instead of a LoadBalancer",
                                False),
    "tlsSecret": _s("Existing kubernetes.io/tls Secret; the master terminates TLS itself"),
    "db": _section(
        "Database. Without hostAddress the chart runs its own Postgres",
        hostAddress=_s("Address of an external Postgres; when set, no database is deployed"),
        name=_s("Database name", "determined"),
        user=_s("Database user", "postgres"),
        password=_s("Database password (stored in a Secret)", "postgres", secret=True),
        port=Key(Kind.INTEGER, "Database port", 5432, minimum=1, maximum=65535),
        storageSize=Key(Kind.QUANTITY, "Size of the bundled database's volume", "30Gi"),
        cpuRequest=Key(Kind.QUANTITY, "CPU request of the bundled database", "2"),
        memRequest=Key(Kind.QUANTITY, "Memory request of the bundled database", "8Gi"),
        storageClassName=_s("StorageClass of the database volume (cluster default when unset)"),
        useNodePortForDB=Key(Kind.BOOLEAN, "Expose the bundled database with a NodePort Service", False),
    ),
    "checkpointStorage": _section(
        "Where checkpoints and TensorBoard events go",
        type=Key(Kind.ENUM, "Storage backend", "shared_fs", choices=CHECKPOINT_TYPES),
        hostPath=_s("shared_fs: directory on every node (testing only)", "/checkpoints"),
        bucket=_s("s3, gcs: bucket name"),
        accessKey=_s("s3: access key id (default credential chain when unset)", secret=True),
        secretKey=_s("s3: secret access key", secret=True),
        endpointUrl=_s("s3: endpoint of an S3 clone such as MinIO, e.g. http://minio:9000"),
        prefix=_s("s3, gcs: key prefix inside the bucket"),
        container=_s("azure: blob container name"),
        connection_string=_s("azure: storage account connection string", secret=True),
        account_url=_s("azure: storage account URL (instead of connection_string)"),
        credential=_s("azure: credential for account_url (optional)", secret=True),
        saveExperimentBest=Key(Kind.INTEGER, "Best checkpoints kept per experiment", 0, minimum=0),
        saveTrialBest=Key(Kind.INTEGER, "Best checkpoints kept per trial", 1, minimum=0),
        saveTrialLatest=Key(Kind.INTEGER, "Latest checkpoints kept per trial", 1, minimum=0),
    ),
    "maxSlotsPerPod": Key(Kind.INTEGER, "Most slots (GPUs) one task pod gets; the GCD of the GPU node sizes",
                          minimum=1, maximum=4096),  # no node has more; bounds the arithmetic it feeds
    "slotType": Key(Kind.ENUM, "What a slot is: a GPU, or slotResourceRequests.cpu CPUs", "gpu",
                    choices=SLOT_TYPES),
    "slotResourceRequests": _section(
        "Resources of one slot when slotType is cpu",
        cpu=Key(Kind.CPU, "CPUs per slot; must fit a node's allocatable CPU (e.g. 7.5 on an 8-core node)"),
    ),
    "masterCpuRequest": Key(Kind.QUANTITY, "CPU request of the master", "2"),
    "masterMemRequest": Key(Kind.QUANTITY, "Memory request of the master", "8Gi"),
    "taskContainerDefaults": _section(
        "Defaults for the pods that run tasks",
        cpuPodSpec=Key(Kind.OBJECT, "Default pod spec of CPU tasks (an experiment's pod_spec replaces it)"),
        gpuPodSpec=Key(Kind.OBJECT, "Default pod spec of GPU tasks (an experiment's pod_spec replaces it)"),
        cpuImage=_s("Default image of CPU tasks (set together with gpuImage)"),
        gpuImage=_s("Default image of GPU tasks (set together with cpuImage)"),
        forcePullImage=Key(Kind.BOOLEAN, "Always pull task images", False),
        networkMode=Key(Kind.ENUM, "Task network mode; host uses the node's network", choices=("bridge", "host")),
        dtrainNetworkInterface=_s("Network interface for distributed training"),
        ncclPortRange=_s("Ports for NCCL, as MIN:MAX"),
        glooPortRange=_s("Ports for GLOO, as MIN:MAX"),
    ),
    "defaultPassword": _s("Password set for the admin and determined users after install", secret=True),
    "defaultScheduler": Key(Kind.ENUM, "Kubernetes scheduler for tasks: empty (default), coscheduler or preemption",
                            choices=SCHEDULERS),
    "telemetry": _section("Anonymous usage telemetry",
                          enabled=Key(Kind.BOOLEAN, "Send anonymous telemetry", True)),
    "clusterName": _s("Name shown in the web UI"),
    "logging": _section(
        "Where task logs go",
        type=Key(Kind.ENUM, "default (the database) or elastic", choices=("default", "elastic")),
        host=_s("elastic: Elasticsearch host"),
        port=Key(Kind.INTEGER, "elastic: Elasticsearch port", minimum=1, maximum=65535),
        security=_section(
            "elastic: authentication and TLS",
            username=_s("Elasticsearch user"),
            password=_s("Elasticsearch password", secret=True),
            tls=_section(
                "TLS to Elasticsearch",
                enabled=Key(Kind.BOOLEAN, "Use TLS"),
                skipVerify=Key(Kind.BOOLEAN, "Skip certificate verification"),
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


def defaults(schema: Mapping[str, Key] = SCHEMA, *, include_chart_yaml: bool = False) -> dict[str, Any]:
    """The chart's default values (null defaults are left out, as helm leaves them unset)."""
    out: dict[str, Any] = {}
    for name, key in schema.items():
        if key.chart_yaml and not include_chart_yaml:
            continue
        if key.kind is Kind.SECTION:
            inner = defaults(key.children)
            if inner:  # a section without any default is left out, as helm would leave it unset
                out[name] = inner
        elif key.default is not None:
            out[name] = key.default
    return out


def secret_paths() -> frozenset[tuple[str, ...]]:
    """Key paths whose values are secrets: never printed, written only to 0600 files."""
    return frozenset(path for path, key in walk() if key.secret)


def all_names() -> frozenset[str]:
    """Every key name at any depth, for 'did you mean' suggestions."""
    return frozenset(path[-1] for path, _ in walk())
