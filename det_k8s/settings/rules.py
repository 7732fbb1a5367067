"""Validation rules: every problem in the settings, each with its key path and what to do.

Two passes. `check_structure` walks what the user wrote and finds unknown keys (with a
suggestion) and values of the wrong type. `check_semantics` reads the effective values (chart
defaults merged in) and applies the cross-key rules of the Determined chart and its documents.
Both return lists; nothing raises, so a user sees all problems at once.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlparse

from ..determined import versions
from ..errors import Problem, Severity
from ..names import is_image_reference
from ..quantity import QuantityError, parse_quantity
from ..safe_read import type_name
from .podspec import check_settings_pod_specs, settings_pod_specs
from .podvalues import MAIN_CONTAINER
from .problems import ProblemCollector, get_path
from .schema import (
    DEFAULT_SCHEDULER_IMAGE,
    DET_K8S_SCHEDULER_NAME,
    SCHEMA,
    Key,
    Kind,
    deploys_det_k8s_scheduler,
    walk,
)
from .secret_settings import clip, mask_url
from .source import Path, SourceMap, format_path

DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
PORT_RANGE = re.compile(r"^(\d{1,5}):(\d{1,5})$")
VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)([-+.][0-9A-Za-z.+-]*)?$")
COMMIT = re.compile(r"^[0-9a-f]{7,40}$")

_STORAGE_KEYS = {
    "shared_fs": {"hostPath", "mountToServer"},
    "s3": {"bucket", "accessKey", "secretKey", "endpointUrl", "prefix"},
    "gcs": {"bucket", "prefix"},
    "azure": {"container", "connection_string", "account_url", "credential"},
    "directory": {"containerPath"},
    "hdfs": {"hdfsUrl", "hdfsPath", "user"},
}
# checkpointStorage.type values that exist only in some releases (rows of determined.versions)
_STORAGE_TYPE_FACTS = {"hdfs": "checkpoint_storage.hdfs", "directory": "checkpoint_storage.directory"}
_PREFIX_FACTS = {"s3": "checkpoint_storage.s3.prefix", "gcs": "checkpoint_storage.gcs.prefix"}
_PASSWORD_RULES = ((re.compile(r"[A-Z]"), "an uppercase letter"), (re.compile(r"[a-z]"), "a lowercase letter"),
                   (re.compile(r"[0-9]"), "a number"))
_COMMON_STORAGE_KEYS = {"type", "saveExperimentBest", "saveTrialBest", "saveTrialLatest"}


# ---------------------------------------------------------------------------------------------
# pass 1: structure and types of what the user wrote


def _suggest(name: str, siblings: Mapping[str, Key], path: Path) -> str | None:
    def norm(text: str) -> str:
        return text.replace("_", "").replace("-", "").lower()

    for candidate in siblings:
        if norm(candidate) == norm(name):
            return f"did you mean {format_path((*path, candidate))}?"
    close = difflib.get_close_matches(name, list(siblings), n=1, cutoff=0.7)
    if close:
        return f"did you mean {format_path((*path, close[0]))}?"
    # The right name in the wrong place: `bucket` at the top level belongs to checkpointStorage.
    elsewhere = [p for p, _ in walk() if norm(p[-1]) == norm(name) and len(p) > 1]
    if elsewhere:
        return f"did you mean {format_path(elsewhere[0])}?"
    return None


def _check_value(key: Key, value: Any, path: Path, out: ProblemCollector) -> None:
    if value is None:
        return  # null means "unset": the chart's default applies
    if key.secret and key.kind is Kind.STRING and not isinstance(value, str):
        out.error(path, f"expected a string, found {type_name(value)}", "quote the value")  # never echo a secret
        return
    kind = key.kind
    if kind is Kind.SECTION:
        if not isinstance(value, dict):
            out.error(path, f"expected a mapping, found {type_name(value)}")
            return
        _check_mapping(key.children, value, path, out)
    elif kind is Kind.STRING:
        if not isinstance(value, str):
            hint = f'quote it: "{_yaml_scalar(value)}"' if isinstance(value, int | float | bool) else None
            out.error(path, f"expected a string, found {type_name(value)}", hint)
    elif kind is Kind.INTEGER:
        if isinstance(value, bool) or not isinstance(value, int):
            hint = "write it without quotes" if isinstance(value, str) and value.strip().lstrip("-").isdigit() else None
            out.error(path, f"expected an integer, found {type_name(value)}", hint)
        elif key.minimum is not None and value < key.minimum:
            out.error(path, f"must be at least {key.minimum}, found {value}")
        elif key.maximum is not None and value > key.maximum:
            out.error(path, f"must be at most {key.maximum}, found {value}")
    elif kind is Kind.BOOLEAN:
        if not isinstance(value, bool):
            hint = "write true or false without quotes" if str(value).lower() in ("true", "false") else None
            out.error(path, f"expected true or false, found {type_name(value)}", hint)
    elif kind in (Kind.QUANTITY, Kind.CPU):
        try:
            amount = parse_quantity(value)
        except QuantityError:
            scalar = _yaml_scalar(value)
            out.error(path, f"expected {key.expected}, found {clip(scalar) if isinstance(scalar, str) else scalar!r}")
            return
        if amount < 0:
            out.error(path, f"must not be negative, found {clip(str(_yaml_scalar(value)))}")
    elif kind is Kind.ENUM:
        if not isinstance(value, str) or value not in key.choices:
            shown = _yaml_scalar(value) if not isinstance(value, list | dict) else type_name(value)
            hint = None
            if isinstance(value, str) and key.trim and value.strip() in key.choices:
                return  # the official chart trims defaultScheduler; so does det-k8s's
            if isinstance(value, str):
                close = [c for c in key.choices if c and c.lower() == value.lower()]
                close = close or difflib.get_close_matches(value, [c for c in key.choices if c], n=1, cutoff=0.6)
                hint = f"did you mean {close[0]}?" if close else None
            choices = ", ".join(c if c else '"" (empty)' for c in key.choices)
            found = shown if isinstance(value, list | dict) else repr(shown)
            out.error(path, f"must be one of {choices}; found {found}", hint)
    elif kind is Kind.OBJECT and not isinstance(value, dict):
        out.error(path, f"expected a mapping, found {type_name(value)}")
    elif kind is Kind.LIST and not isinstance(value, list):
        out.error(path, f"expected a list, found {type_name(value)}")


def _check_mapping(schema: Mapping[str, Key], data: Mapping[str, Any], path: Path, out: ProblemCollector) -> None:
    for name, value in data.items():
        child = (*path, name)
        if name not in schema:
            out.error(child, "unknown key", _suggest(name, schema, path))
            continue
        _check_value(schema[name], value, child, out)


def check_structure(user_values: Mapping[str, Any], sources: SourceMap) -> list[Problem]:
    """Unknown keys and wrong types in what the user wrote (before defaults are merged in)."""
    out = ProblemCollector(sources)
    _check_mapping(SCHEMA, user_values, (), out)
    return out.problems


def _yaml_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# ---------------------------------------------------------------------------------------------
# pass 2: rules across keys, on the effective values


def _map(values: Any, key: str) -> Mapping[str, Any]:
    """The mapping under `key`, or an empty one when it is unset or mistyped (reported elsewhere)."""
    node = values.get(key) if isinstance(values, Mapping) else None
    return node if isinstance(node, Mapping) else {}


def _is_url(text: str) -> bool:
    try:
        parsed = urlparse(text)
        parsed.port  # noqa: B018 - validates the port and an IPv6 host, raising ValueError when malformed
    except ValueError:
        return False
    return parsed.scheme in ("http", "https") and bool(parsed.netloc)


def _rule_slots(v: Mapping[str, Any], user: Mapping[str, Any], out: ProblemCollector) -> None:
    if v.get("maxSlotsPerPod") is None:
        out.error(("maxSlotsPerPod",), "required",
                  "set it to the GPUs per node (the greatest common divisor of the node sizes)")
    slot_type = v.get("slotType") or "gpu"
    cpu = get_path(v, ("slotResourceRequests", "cpu"))
    if slot_type == "cpu":
        if cpu is None or isinstance(cpu, bool):
            out.error(("slotResourceRequests", "cpu"), "required when slotType is cpu",
                      "set the CPUs per slot, below a node's allocatable CPU (e.g. 7.5 for 8 cores)")
        else:
            try:
                if parse_quantity(cpu) <= 0:
                    out.error(("slotResourceRequests", "cpu"), "must be greater than 0 when slotType is cpu")
            except QuantityError:
                pass  # already reported by the structure pass
    elif get_path(user, ("slotResourceRequests", "cpu")) is not None:
        out.warning(("slotResourceRequests", "cpu"), "ignored unless slotType is cpu")


def _rule_storage(v: Mapping[str, Any], user: Mapping[str, Any], out: ProblemCollector) -> None:
    if any(not isinstance(values.get("checkpointStorage", {}), Mapping | None) for values in (v, user)):
        return  # `checkpointStorage: 7`: reported by the structure pass, and no rule about keys the user never wrote
    cs = _map(v, "checkpointStorage")
    kind = cs.get("type") or "shared_fs"
    if not isinstance(kind, str) or kind not in _STORAGE_KEYS:
        return  # reported by the structure pass
    base = ("checkpointStorage",)
    user_cs = _map(user, "checkpointStorage")
    for name in sorted(set(user_cs) - _STORAGE_KEYS[kind] - _COMMON_STORAGE_KEYS):
        if user_cs.get(name) is not None and name in set().union(*_STORAGE_KEYS.values()):
            out.warning((*base, name), f"ignored when checkpointStorage.type is {kind}")
    if kind == "shared_fs":
        host_path = cs.get("hostPath")
        if not host_path:
            out.error((*base, "hostPath"), "required when checkpointStorage.type is shared_fs")
        elif isinstance(host_path, str) and not host_path.startswith("/"):
            out.error((*base, "hostPath"), f"must be an absolute path, found {host_path!r}")
        out.warning((*base, "type"), "shared_fs is for testing only: most clusters' nodes share no file system",
                    "use s3, gcs or azure for real deployments")
    if kind == "directory" and not cs.get("containerPath"):
        out.error((*base, "containerPath"), "required when checkpointStorage.type is directory")
    if kind == "hdfs":
        for name in ("hdfsUrl", "hdfsPath"):
            if not cs.get(name):
                out.error((*base, name), "required when checkpointStorage.type is hdfs")
    if kind in ("s3", "gcs") and not cs.get("bucket"):
        out.error((*base, "bucket"), f"required when checkpointStorage.type is {kind}")
    elif kind in ("s3", "gcs") and isinstance(cs.get("bucket"), str) and "/" in cs["bucket"]:
        _bucket_not_a_name(cs["bucket"], base, out)
    if kind == "s3":
        has_access, has_secret = bool(cs.get("accessKey")), bool(cs.get("secretKey"))
        if has_access != has_secret:
            missing = "secretKey" if has_access else "accessKey"
            other = "accessKey" if has_access else "secretKey"
            out.error((*base, missing), f"required when checkpointStorage.{other} is set",
                      "set both, or neither to use the pods' default AWS credentials")
        endpoint = cs.get("endpointUrl")
        if isinstance(endpoint, str) and endpoint and not _is_url(endpoint):
            out.error((*base, "endpointUrl"), f"must be an http(s) URL, found {mask_url(endpoint)!r}",
                      "for example http://minio.example.com:9000")
        elif isinstance(endpoint, str) and "@" in urlparse(endpoint).netloc:
            out.error((*base, "endpointUrl"), "must not carry credentials (user:password@): it is written into the "
                      "master's ConfigMap", "put them in checkpointStorage.accessKey and secretKey")
    if kind in ("s3", "gcs"):
        prefix = cs.get("prefix")
        if isinstance(prefix, str) and ".." in prefix.split("/"):
            out.error((*base, "prefix"), "must not contain '..' path segments")
    if kind == "azure":
        if not cs.get("container"):
            out.error((*base, "container"), "required when checkpointStorage.type is azure")
        has_conn, has_url = bool(cs.get("connection_string")), bool(cs.get("account_url"))
        if has_conn == has_url:
            out.error((*base, "connection_string" if not has_conn else "account_url"),
                      "exactly one of connection_string or account_url must be set when type is azure"
                      + (" (both are set)" if has_conn else ""))
        if cs.get("credential") and not has_url:
            out.error((*base, "credential"), "only allowed together with account_url")
        url = cs.get("account_url")
        if isinstance(url, str) and url and not _is_url(url):
            out.error((*base, "account_url"), f"must be an http(s) URL, found {mask_url(url)!r}",
                      "for example https://myaccount.blob.core.windows.net")
        elif isinstance(url, str) and (urlparse(url).query or "@" in urlparse(url).netloc):
            out.error((*base, "account_url"), "must not carry a SAS token or credentials: it is written into the "
                      "master's ConfigMap", "put the SAS token in checkpointStorage.credential")


def _bucket_not_a_name(bucket: str, base: tuple[str, ...], out: ProblemCollector) -> None:
    """The master hands `bucket` to the cloud SDK as a name, and bucket names hold no '/': `gs://b` or `b/dir`
    validated and then failed every checkpoint."""
    scheme, _, rest = bucket.partition("://")
    name, _, prefix = (rest if scheme in ("s3", "gs") else bucket if not rest else "").partition("/")
    hint = (f"set bucket: {name}" + (f" and prefix: {prefix}" if prefix else "") if name else
            "give the bucket's name alone, and the path inside it as prefix")
    out.error((*base, "bucket"), f"must be the bucket's name, found {bucket!r}", hint)


def _database_host(host: str, out: ProblemCollector) -> None:
    """db.hostAddress is a host name or address: the master joins it with db.port into its connection, so a port or
    a URL in it (`pg:5433`, `postgres://...`) makes one it cannot open."""
    if "://" in host or "@" in host or "/" in host:
        out.error(("db", "hostAddress"), f"must be the database's host name or address, not a URL ({mask_url(host)!r})",
                  "put the host in db.hostAddress and the rest in db.port, db.name, db.user and db.password")
        return
    try:
        ipaddress.ip_address(host.strip("[]"))
        return  # an IPv6 address holds colons
    except ValueError:
        pass
    name, _, port = host.rpartition(":")
    if name and port.isdigit():
        out.error(("db", "hostAddress"), f"holds a port; set db.hostAddress: {name} and db.port: {port}")


def _rule_network(v: Mapping[str, Any], user: Mapping[str, Any], out: ProblemCollector) -> None:
    route = _map(v, "openshiftRoute").get("enabled")  # the Route reaches the Service whatever its type
    if v.get("tlsSecret") and not v.get("useNodePortForMaster") and not route:
        out.error(("tlsSecret",), "requires useNodePortForMaster: true",
                  "TLS terminates in the master behind a NodePort Service; set useNodePortForMaster: true")
    for path in (("imagePullSecretName",), ("tlsSecret",), ("db", "storageClassName")):
        name = get_path(v, path)
        if isinstance(name, str) and name and not DNS1123_SUBDOMAIN.fullmatch(name):
            out.error(path, f"{name!r} is not a valid Kubernetes object name",
                      "use lowercase letters, digits, '-' and '.'")
    if v.get("enterpriseEdition") and not v.get("imagePullSecretName"):
        out.warning(("imagePullSecretName",), "the enterprise edition image is private",
                    "create a docker-registry Secret and set imagePullSecretName")
    db = _map(v, "db")
    host = db.get("hostAddress")
    if isinstance(host, str) and host:
        _database_host(host, out)
    for name in ("name", "user", "password"):
        if db.get(name) in (None, ""):
            out.error(("db", name), "required", "the master cannot reach its database without it")
    if v.get("masterPort") is None:
        out.error(("masterPort",), "required", "the port of the master Service, e.g. 8080")
    if db.get("hostAddress"):
        user_db = _map(user, "db")
        for name in ("storageSize", "storageClassName", "useNodePortForDB", "cpuRequest", "memRequest"):
            if user_db.get(name) is not None:
                out.warning(("db", name), "ignored with an external database (db.hostAddress is set)")


# The Go names validatePodSpec's messages use, for the fields it refuses in `determined-container`.
_GO_NAMES = {"image": "Image", "command": "Command", "args": "Args", "workingDir": "WorkingDir", "ports": "Ports",
             "livenessProbe": "LivenessProbe", "readinessProbe": "ReadinessProbe", "startupProbe": "StartupProbe",
             "lifecycle": "Lifecycle", "terminationMessagePath": "TerminationMessagePath",
             "terminationMessagePolicy": "TerminationMessagePolicy", "imagePullPolicy": "ImagePullPolicy",
             "securityContext": "SecurityContext"}
_POINTERS = frozenset({"livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "securityContext"})


def _rule_master_pod_specs(v: Mapping[str, Any], version: versions.Version, out: ProblemCollector) -> None:
    """What the master's validatePodSpec refuses in the settings' pod specs: it does not start on one (a real
    0.38.1 master: "Check Failed! ... container Lifecycle is not configurable")."""
    fixed = versions.value_of("master.pod_spec.fixed_container_fields", version) or ()
    stops = f"the Determined {version} master refuses to start"
    for path, spec in settings_pod_specs(v):
        if not isinstance(spec, Mapping):
            continue
        meta = spec.get("metadata")
        for name in ("name", "namespace"):
            if isinstance(meta, Mapping) and meta.get(name):
                out.error((*path, "metadata", name), f"{stops}: pod {name.title()} is not a configurable option",
                          "remove it: the master names its task pods and places them in their namespace")
        inner = spec.get("spec")
        if not isinstance(inner, Mapping):
            continue
        if inner.get("hostNetwork") is True:
            out.error((*path, "spec", "hostNetwork"), f"{stops}: host networking must be configured via master.yaml",
                      "remove it, and set taskContainerDefaults.networkMode: host")
        containers = inner.get("containers")
        for index, container in enumerate(containers if isinstance(containers, list) else ()):
            if not isinstance(container, Mapping) or container.get("name") != MAIN_CONTAINER:
                continue
            for field in fixed:
                value = container.get(field)
                if value is None or (field not in _POINTERS and value in ("", [], {})):
                    continue
                out.error((*path, "spec", "containers", index, field),
                          f"{stops}: container {_GO_NAMES[field]} is not configurable in {MAIN_CONTAINER}",
                          "remove it: the master sets it" + (" (the image and its pull policy: in the experiment's "
                          "environment)" if field in ("image", "imagePullPolicy") else "")
                          + "; another container of the pod may have it")


def _rule_tasks(v: Mapping[str, Any], version: versions.Version | None, out: ProblemCollector) -> None:
    tcd = _map(v, "taskContainerDefaults")
    base = ("taskContainerDefaults",)
    together = version is None or not versions.has("chart.task_images_independent", version)
    if together and bool(tcd.get("cpuImage")) != bool(tcd.get("gpuImage")):
        missing = "gpuImage" if tcd.get("cpuImage") else "cpuImage"
        out.error((*base, missing), "required when " + ("cpuImage" if missing == "gpuImage" else "gpuImage")
                  + " is set", "set both task images, or neither to use the default images")
    for name in ("ncclPortRange", "glooPortRange"):
        text = tcd.get(name)
        if isinstance(text, str):
            match = PORT_RANGE.fullmatch(text)
            if not match or not (1 <= int(match[1]) <= int(match[2]) <= 65535):
                out.error((*base, name), f"expected MIN:MAX ports, found {text!r}", "for example 29400:29500")
    out.problems.extend(check_settings_pod_specs(v, out.sources))  # the Kubernetes Pod schema (podspec.py)
    _rule_master_pod_specs(v, version or versions.DEFAULT, out)
    for name in ("cpuPodSpec", "gpuPodSpec"):
        spec = tcd.get(name)
        inner = spec.get("spec") if isinstance(spec, Mapping) else None
        if isinstance(inner, Mapping) and inner.get("initContainers"):
            out.warning((*base, name, "spec", "initContainers"),
                        "init containers are not supported by Determined on Kubernetes")
        if isinstance(inner, Mapping) and inner.get("resourceClaims"):  # DRA: only kube-scheduler allocates claims
            out.warning((*base, name, "spec", "resourceClaims"),
                        "det-k8s never binds nor pins a pod with ResourceClaims (only kube-scheduler allocates them): "
                        "task pods from this spec wait under `det-k8s scheduler run` and `experiment create`",
                        "ask for GPUs as resources (nvidia.com/gpu) served by a device plugin, or let kube-scheduler "
                        "place these pods (no defaultScheduler)")


def _rule_default_images(v: Mapping[str, Any], user: Mapping[str, Any], version: versions.Version | None,
                         out: ProblemCollector) -> None:
    """The official chart of each release names its own default task images; det-k8s read them at 0.17.15, 0.26.2
    and v0.38.1 only. Between those tags the nearest tag's are used: say so where a user sees it, with the fix."""
    if version is None:
        return
    tcd, images = _map(user, "taskContainerDefaults"), _map(user, "defaultImages")
    by_registry = versions.has("chart.image_registry_prefixes_task_images", version)
    from_table = [device for device in ("cpu", "gpu") if not tcd.get(f"{device}Image")
                  and (by_registry or not images.get(f"{device}Image"))]
    if not from_table or versions.exact("chart.image.cpu", version):
        return
    found = versions.row("chart.image.cpu", version)
    tag = versions.read_at(found) if found is not None else None
    prefix = f"{v.get('imageRegistry') or 'determinedai'}/" if by_registry else ""
    shown = ", ".join(f"{device}: {prefix}{versions.value_of(f'chart.image.{device}', version)}"
                      for device in from_table)
    where, keys = (("taskContainerDefaults",), "taskContainerDefaults.cpuImage and gpuImage") if by_registry else (
        ("defaultImages",), "defaultImages.cpuImage and gpuImage")
    out.warning(where, f"the default task images of Determined {version} are not known to det-k8s (it read the "
                f"official charts of 0.17.15, 0.26.2 and 0.38.1): its master is given {tag}'s ({shown})",
                f"set {keys} to the images your release's chart names (its values.yaml), or pull these")


def _rule_images(v: Mapping[str, Any], app_version: Any, out: ProblemCollector) -> None:
    """Every image the chart gives the kubelet is a reference it parses (else InvalidImageName): the master image
    `<imageRegistry>/determined-master:<appVersion>`, the default and task images."""
    registry = v.get("imageRegistry")
    if isinstance(registry, str) and registry and not is_image_reference(f"{registry}/determined-master:0"):
        image = f"{registry}/determined-master:{app_version}"
        out.error(("imageRegistry",), f"makes the master image {image!r}, not a valid image reference (the kubelet "
                  "refuses it: InvalidImageName)", "give host[:port]/path without a scheme or a trailing '/', the "
                  "path in lower case, e.g. registry.example.com/determined")
    for path in (*(("defaultImages", n) for n in ("postgreSQL", "kubeScheduler", "kubeSchedulerPreemption", "cpuImage",
                                                   "gpuImage", "rocmImage")),
                 *(("taskContainerDefaults", n) for n in ("cpuImage", "gpuImage", "rocmImage"))):
        image = get_path(v, path)
        if isinstance(image, str) and image and not is_image_reference(image):
            out.error(path, f"{image!r} is not a valid image reference (the kubelet refuses it: InvalidImageName)",
                      "e.g. registry.example.com/environments:cpu-1.0, lower-case, without a scheme")


def _rule_logging(v: Mapping[str, Any], out: ProblemCollector) -> None:
    logging = _map(v, "logging")
    if logging.get("type") == "elastic":
        for name in ("host", "port"):
            if logging.get(name) in (None, ""):
                out.error(("logging", name), "required when logging.type is elastic")


def parse_app_version(app_version: Any) -> versions.Version | None:
    """The release appVersion names, or None when it names none det-k8s supports (reported by _rule_version)."""
    found = versions.parse_version(app_version) if isinstance(app_version, str) else None
    return found if found is not None and versions.supported(found) else None


def _rule_version(v: Mapping[str, Any], app_version: Any, out: ProblemCollector) -> None:
    if not isinstance(app_version, str) or not app_version:
        return  # the structure pass reports a non-string
    found = versions.parse_version(app_version)
    supported = f"det-k8s supports Determined {versions.SUPPORTED_RANGE}"
    if found is None:
        what = ("a development build, whose image cannot be pulled" if "dev" in app_version else
                "a commit, whose configuration det-k8s cannot know" if COMMIT.fullmatch(app_version) else
                "not a Determined release number")
        out.error(("appVersion",), f"{app_version!r} is {what}; {supported}",
                  f"use a release such as {versions.DEFAULT} (the default)")
    elif not versions.supported(found):
        out.error(("appVersion",), f"Determined {found} is not supported: {supported}",
                  f"use a release from {versions.OLDEST} to {versions.NEWEST} (the default is {versions.DEFAULT})")
    elif app_version != str(found):
        out.error(("appVersion",), f"{app_version!r} is not an image tag of Determined's; use {str(found)!r}",
                  "appVersion is the master image's tag (determined-master:<appVersion>), and Determined's images "
                  "are tagged like 0.38.1, not like the git tag v0.38.1")


def _rule_keys_of_the_release(v: Mapping[str, Any], user: Mapping[str, Any], version: versions.Version | None,
                              out: ProblemCollector) -> None:
    """Keys that exist only in some releases; keys det-k8s's chart accepts but ignores."""

    def walk_user(schema: Mapping[str, Key], data: Mapping[str, Any], path: Path) -> None:
        for name, value in data.items():
            key = schema.get(name)
            if key is None or value is None:
                continue
            where = (*path, name)
            if version is not None and key.fact is not None and not versions.has(key.fact, version):
                message, hint = versions.missing(key.fact, version)
                out.error(where, message, hint)
                continue
            if not key.implemented:
                out.warning(where, f"has no effect with det-k8s's chart ({key.doc})",
                            "remove it, or render into the official chart: det-k8s render --chart DIR")
                continue
            if key.kind is Kind.SECTION and isinstance(value, dict):
                walk_user(key.children, value, where)

    walk_user(SCHEMA, user, ())
    if version is None:
        return
    cs = _map(v, "checkpointStorage")
    kind = cs.get("type")
    if isinstance(kind, str) and kind in _STORAGE_TYPE_FACTS and not versions.has(_STORAGE_TYPE_FACTS[kind], version):
        message, hint = versions.missing(_STORAGE_TYPE_FACTS[kind], version)
        out.error(("checkpointStorage", "type"), message, hint)
    if isinstance(kind, str) and kind in _PREFIX_FACTS and cs.get("prefix") not in (None, "") and not versions.has(
            _PREFIX_FACTS[kind], version):
        message, hint = versions.missing(_PREFIX_FACTS[kind], version)
        out.error(("checkpointStorage", "prefix"), message, hint)
    if v.get("slotType") == "rocm" and not versions.has("master.resource_manager.slot_type.rocm", version):
        message, hint = versions.missing("master.resource_manager.slot_type.rocm", version)
        out.error(("slotType",), message, hint)
    pools = v.get("resourcePools")
    if versions.has("master.resource_pools", version) and not versions.has(
            "master.resource_pools.kubernetes_namespace", version):
        for index, pool in enumerate(pools if isinstance(pools, list) else ()):
            namespace = pool.get("kubernetes_namespace") if isinstance(pool, Mapping) else None
            if namespace:
                out.warning(("resourcePools", index, "kubernetes_namespace"), f"Determined {version} ignores it "
                            "(removed in 0.35.0): the pool's tasks run in the default namespace",
                            f"bind a workspace to namespace {namespace} instead, or remove it")
    scheduler = v.get("defaultScheduler")
    if isinstance(scheduler, str) and scheduler.strip() == "preemption" and not versions.has(
            "master.resource_manager.default_scheduler.preemption", version):
        message, _ = versions.missing("master.resource_manager.default_scheduler.preemption", version)
        out.error(("defaultScheduler",), message + "; its master refuses to start with it",
                  "use coscheduler, or leave it empty and use det-k8s's own preemption")


def _rule_passwords(v: Mapping[str, Any], user: Mapping[str, Any], version: versions.Version | None,
                    out: ProblemCollector) -> None:
    if version is None or not versions.has("master.security.initial_user_password", version):
        return
    key = "initialUserPassword" if v.get("initialUserPassword") else "defaultPassword"
    password = v.get(key)
    if not password:
        return  # required on a fresh install only: `install` checks it (missing_initial_password), the chart too
    if not isinstance(password, str):
        return  # reported by the structure pass
    broken = (["at least 8 characters"] if len(password) < 8 else []) + [
        what for pattern, what in _PASSWORD_RULES if not pattern.search(password)]
    if broken:
        out.error((key,), f"must have {', '.join(broken)} (Determined {version}'s chart refuses it otherwise)")
    if key == "defaultPassword" and user.get("defaultPassword") is not None:
        out.warning(("defaultPassword",), f"deprecated in Determined {version}: it becomes the initial password",
                    "rename it to initialUserPassword")


def _rule_schedulers(v: Mapping[str, Any], user: Mapping[str, Any], out: ProblemCollector) -> None:
    scheduler = (v.get("defaultScheduler") or "") if isinstance(v.get("defaultScheduler"), str) else ""
    if user.get("gangScheduler") == "plugin":
        if not scheduler.strip():
            out.warning(("gangScheduler",), "plugin has no effect without defaultScheduler (coscheduler or "
                        "preemption)")
        else:
            out.warning(("gangScheduler",), "plugin deploys kube-scheduler 1.18.9 (scheduler-plugins v0.18.9): "
                        "Kubernetes supports a scheduler at most one minor version older than its API server, so it "
                        "is outside the skew policy on any API server newer than 1.19, and it fails on 1.25 and "
                        "later (policy/v1beta1 and events.k8s.io/v1beta1 are gone)",
                        "use gangScheduler: det-k8s and run `det-k8s scheduler run`")


def _rule_deployed_scheduler(v: Mapping[str, Any], user: Mapping[str, Any], out: ProblemCollector) -> None:
    """The scheduler the bundled chart deploys (gangScheduler: det-k8s): the master's pods must name it, and its image
    must be one somebody built and pushed."""
    if not deploys_det_k8s_scheduler(v):
        return
    raw = v.get("defaultScheduler")
    scheduler = raw.strip() if isinstance(raw, str) else ""
    if not scheduler and user.get("defaultScheduler") is not None:
        out.warning(("defaultScheduler",), "is empty, so the master gives its task pods the default Kubernetes "
                    "scheduler, which places them one pod at a time, and the det-k8s scheduler this chart deploys "
                    "(gangScheduler: det-k8s) binds none of them: a trial can start in part and hold its GPUs waiting",
                    f"remove defaultScheduler (unset, it is {DET_K8S_SCHEDULER_NAME}, which det-k8s's scheduler "
                    "serves), or set detK8sScheduler.enabled: false if you want no gang scheduling")
    if get_path(user, ("detK8sScheduler", "image")) in (None, "") and get_path(
            v, ("detK8sScheduler", "image")) in (None, "", DEFAULT_SCHEDULER_IMAGE):
        waiting = f" and the master's task pods (schedulerName {scheduler}) would stay Pending" if scheduler else ""
        out.warning(("detK8sScheduler", "image"), f"unset: the chart's scheduler would run {DEFAULT_SCHEDULER_IMAGE}, "
                    f"a placeholder no registry serves; its pods would wait in ImagePullBackOff{waiting}",
                    "build the image (scripts/image in det-k8s's checkout, or docker build -f deploy/Dockerfile), "
                    "push it where the nodes pull from and set detK8sScheduler.image to it; or set "
                    "detK8sScheduler.enabled: false and run `det-k8s scheduler run` yourself")


def _rule_database_tls(v: Mapping[str, Any], out: ProblemCollector) -> None:
    db = _map(v, "db")
    if db.get("sslMode"):
        for name in ("sslRootCert", "resourceType", "certResourceName"):
            if not db.get(name):
                out.error(("db", name), "required when db.sslMode is set",
                          "create a Secret or ConfigMap holding the CA certificate and name it here")
    cert = db.get("certResourceName")
    if isinstance(cert, str) and cert and not DNS1123_SUBDOMAIN.match(cert):
        out.error(("db", "certResourceName"), f"{cert!r} is not a valid Kubernetes object name")
    route = _map(v, "openshiftRoute")
    if route.get("enabled") and route.get("termination") not in (None, "", "edge", "passthrough", "reencrypt"):
        out.error(("openshiftRoute", "termination"), f"must be edge, passthrough or reencrypt, found "
                  f"{route.get('termination')!r}")
    elif route.get("enabled") and v.get("tlsSecret") and route.get("termination") in (None, "", "edge"):
        shown = route.get("termination") or "none"
        out.error(("openshiftRoute", "termination"), f"{shown} sends the master plain HTTP, and with tlsSecret it "
                  "serves only TLS", "use passthrough or reencrypt, or leave tlsSecret unset to end TLS at the router")


def _rendered(value: Any) -> bool:
    """Whether the chart's `{{- with .Values.x }}` renders a value (Go templates skip 0, "" and null)."""
    return value is not None and value != "" and value != 0 and value is not False


def _request_not_above_limit(v: Mapping[str, Any], request: Path, limit: Path, resource: str,
                             out: ProblemCollector) -> None:
    """pkg/apis/core/validation/validation.go: ValidateResourceRequirements ("must be less than or equal to cpu
    limit"), for a request and a limit the chart writes into a container's resources."""
    wanted, most = get_path(v, request), get_path(v, limit)
    if not _rendered(most) or wanted is None:
        return
    try:
        if parse_quantity(wanted) <= parse_quantity(most):
            return
    except QuantityError:
        return  # the structure pass reports it
    out.error(request, f"{_yaml_scalar(wanted)} is above {format_path(limit)} {_yaml_scalar(most)}: the API server "
              f"refuses a container whose {resource} request exceeds its limit (helm fails part-way through)",
              f"lower {format_path(request)} to {_yaml_scalar(most)} or less, or raise {format_path(limit)}")


def _rule_chart_objects(v: Mapping[str, Any], out: ProblemCollector) -> None:
    """Quantities the chart renders into its own objects, checked as the API server checks those objects."""
    _request_not_above_limit(v, ("masterCpuRequest",), ("masterCpuLimit",), "cpu", out)
    _request_not_above_limit(v, ("masterMemRequest",), ("masterMemLimit",), "memory", out)
    db = _map(v, "db")
    if db.get("hostAddress"):
        return  # an external database: the chart deploys none
    _request_not_above_limit(v, ("db", "cpuRequest"), ("db", "cpuLimit"), "cpu", out)
    _request_not_above_limit(v, ("db", "memRequest"), ("db", "memLimit"), "memory", out)
    size = db.get("storageSize")
    if db.get("disablePVC") or size is None:
        return
    try:
        amount = parse_quantity(size)
    except QuantityError:
        return  # the structure pass reports it
    if amount == 0:  # validation.go: ValidatePersistentVolumeClaimSpec, "must be greater than zero"
        out.error(("db", "storageSize"), "must be greater than 0: the API server refuses a PersistentVolumeClaim "
                  "requesting no storage", "e.g. 30Gi (the default), or db.disablePVC: true for a database without "
                  "a volume")


def _rule_resource_pools(v: Mapping[str, Any], version: versions.Version | None, out: ProblemCollector) -> None:
    """What the Determined master checks of `resource_pools` at start-up (master/internal/config/
    resource_config.go: ResourceConfig.Validate, duplicate names; resource_pool_config.go:
    ResourcePoolConfig.Validate, `resource pool name cannot be empty`): it refuses to start otherwise."""
    pools = v.get("resourcePools")
    if not isinstance(pools, list) or (version is not None and not versions.has("master.resource_pools", version)):
        return
    seen: dict[str, int] = {}
    for index, pool in enumerate(pools):
        where: Path = ("resourcePools", index)
        if not isinstance(pool, Mapping):
            out.error(where, f"expected a mapping with pool_name, found {type_name(pool)}: the master refuses to "
                      "start", "remove the entry, or give it a pool_name (--set resourcePools[N].x=y leaves every "
                      "entry before N null)")
            continue
        name = pool.get("pool_name")
        if name is None or (isinstance(name, str) and not name.strip()):
            out.error((*where, "pool_name"), "required: the master refuses to start with a resource pool without "
                      "a name (resource pool name cannot be empty)", "e.g. pool_name: default")
        elif not isinstance(name, str):
            out.error((*where, "pool_name"), f"expected a string, found {type_name(name)}")
        elif name in seen:
            out.error((*where, "pool_name"), f"duplicate pool name {name!r} (also resourcePools[{seen[name]}]): the "
                      "master refuses to start", "give every pool its own name")
        else:
            seen[name] = index


RULES: tuple[Callable[[Mapping[str, Any], Mapping[str, Any], ProblemCollector], None], ...] = (
    _rule_slots,
    _rule_storage,
    _rule_network,
)


def check_semantics(values: Mapping[str, Any], user_values: Mapping[str, Any], app_version: Any,
                    sources: SourceMap, *, bundled_chart: bool = True) -> list[Problem]:
    """Cross-key rules on the effective values; `user_values` tells what the user set explicitly; `bundled_chart`:
    for det-k8s's own chart (the rules about the scheduler it deploys apply)."""
    out = ProblemCollector(sources)
    version = parse_app_version(app_version)
    for rule in RULES:
        rule(values, user_values, out)
    _rule_tasks(values, version, out)
    _rule_default_images(values, user_values, version, out)
    _rule_logging(values, out)
    _rule_images(values, app_version, out)
    _rule_version(values, app_version, out)
    _rule_keys_of_the_release(values, user_values, version, out)
    _rule_passwords(values, user_values, version, out)
    _rule_schedulers(values, user_values, out)
    if bundled_chart:
        _rule_deployed_scheduler(values, user_values, out)
    _rule_database_tls(values, out)
    _rule_chart_objects(values, out)
    _rule_resource_pools(values, version, out)
    return _storage_type_first(out.problems)


def _storage_type_first(problems: list[Problem]) -> list[Problem]:
    """A checkpoint storage type the release does not have (hdfs on 0.38.1) is the one storage problem worth
    reading: it comes first, and the others under checkpointStorage (hdfsUrl required, bucket ignored), which
    would only send the user filling in keys of a type they cannot use, are left out."""
    fundamental = [p for p in problems if p.path == "checkpointStorage.type" and p.is_error
                   and "has no" in p.message and "checkpoint storage" in p.message]
    if not fundamental:
        return problems
    rest = [p for p in problems if p not in fundamental and not (p.path == "checkpointStorage"
                                                               or p.path.startswith("checkpointStorage."))]
    return [*fundamental, *rest]


def missing_initial_password(values: Mapping[str, Any], app_version: Any) -> Problem | None:
    """An error when installing (not upgrading) a release that needs an initial password and has none."""
    version = parse_app_version(app_version)
    if version is None or not versions.has("master.security.initial_user_password", version):
        return None
    if values.get("initialUserPassword") or values.get("defaultPassword"):
        return None
    return Problem(Severity.ERROR, "initialUserPassword", f"required to install Determined {version}: the first "
                   "password of the admin and determined users (the chart refuses a fresh install without it)",
                   "set initialUserPassword: 8 or more characters with an upper- and a lower-case letter and a digit")
