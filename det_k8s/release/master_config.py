"""The installed master's configuration and release, read from the cluster as each chart writes them.

Both charts (det-k8s's and the official one) keep `master.yaml` in an object named
`determined-master-config-<release>`: a ConfigMap (`data`) before Determined 0.26.2 and a Secret from 0.26.2
(the version table's `master.config.secret`, from the official chart's templates/master-config.yaml). The
installed release is the tag of the master Deployment's image (`<registry>/determined-master:<appVersion>`,
`detVersion` included), which both charts set.

The Secret holds passwords and keys: its text is only ever parsed, never printed, and no message here quotes it.
Reading it needs `get`/`list` on secrets in the namespace, which namespace users often lack; that is one clear
error saying what to grant, or to pass the settings with -f instead.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..determined import versions
from ..determined.versions import Version
from ..errors import Forbidden, InputError, NotFound, UsageError
from ..kube.api import KubeApi
from ..kube.kinds import CONFIGMAPS, DEPLOYMENTS, SECRETS
from .names import master_config, master_deployment

CONFIG_PREFIX = "determined-master-config-"
CONFIG_KEY = "master.yaml"
_MASTER_IMAGES = ("determined-master", "hpe-mlde-master", "hpecaide-master")


@dataclass(frozen=True)
class MasterConfig:
    """One installed master's configuration: where it was read from, the release, the version it runs."""

    release: str
    namespace: str
    kind: str  # "Secret" or "ConfigMap"
    version: Version | None  # of the master image; None when it could not be told
    text: str = field(repr=False)  # master.yaml: may hold passwords, never printed

    @property
    def where(self) -> str:
        return f"{self.kind.lower()} {self.namespace}/{master_config(self.release)}"


def master_version(deployment: Mapping[str, Any] | None) -> Version | None:
    """The Determined release the master Deployment runs: the tag of its master image (None if not a release)."""
    spec = (((deployment or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
    for container in spec.get("containers") or []:
        image = str(container.get("image") or "").split("@", 1)[0]
        repository, _, tag = image.rpartition(":")
        if "/" in tag or not repository:
            continue
        if repository.rsplit("/", 1)[-1] in _MASTER_IMAGES:
            return versions.parse_version(tag)
    return None


def config_kind(version: Version | None) -> str:
    """The kind of object the chart of `version` keeps master.yaml in (unknown version: the newest's)."""
    return "Secret" if versions.has("master.config.secret", version or versions.DEFAULT) else "ConfigMap"


def config_text(obj: Mapping[str, Any]) -> str:
    """master.yaml from a ConfigMap's `data` or a Secret's (base64) `data`; '' when absent."""
    data = obj.get("data") or {}
    value = data.get(CONFIG_KEY)
    if not value:
        return ""
    if obj.get("kind") != "Secret":
        return str(value)
    try:
        return base64.b64decode(str(value), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as exc:  # the message never quotes the value
        raise InputError(f"secret {((obj.get('metadata') or {}).get('namespace'))}/"
                         f"{(obj.get('metadata') or {}).get('name')}: {CONFIG_KEY} is not base64 UTF-8 text") from exc


def secrets_forbidden(namespace: str, exc: Forbidden, verb: str,
                      instead: str = "or pass -f with the settings Determined was installed with") -> UsageError:
    """The one line for RBAC refusing the Secret that holds master.yaml from Determined 0.26.2 (never its data)."""
    return UsageError(
        f"cannot read the Determined master configuration: {verb} secrets in namespace {namespace} is forbidden "
        f"({exc.message.split(' (context')[0]}); from Determined 0.26.2 the chart keeps master.yaml in Secret "
        f"{CONFIG_PREFIX}<release>",
        hint=f"ask for get and list on secrets in namespace {namespace} (a Role), {instead}")


def installed_version(api: KubeApi, release: str, namespace: str) -> Version | None:
    """The release the master Deployment of `release` runs; None when it cannot be read or told."""
    try:
        return master_version(api.get(DEPLOYMENTS, master_deployment(release), namespace))
    except (NotFound, Forbidden):
        return None


def read_release_config(api: KubeApi, release: str, namespace: str,
                        version: Version | None = None) -> MasterConfig | None:
    """The configuration of `release` (which runs `version`, read from its Deployment when not given): the
    object that version's chart writes, else the other kind (another chart, an unknown version). None when
    neither exists; Forbidden when RBAC hides the one that may hold it."""
    if version is None:
        version = installed_version(api, release, namespace)
    first = config_kind(version)
    forbidden: Forbidden | None = None
    for kind in (first, "ConfigMap" if first == "Secret" else "Secret"):
        try:
            obj = api.get(SECRETS if kind == "Secret" else CONFIGMAPS, master_config(release), namespace)
        except NotFound:
            continue
        except Forbidden as exc:
            forbidden = forbidden or exc
            continue
        return MasterConfig(release, namespace, kind, version, config_text({"kind": kind, **obj}))
    if forbidden is not None:
        raise forbidden
    return None


def find_master_config(api: KubeApi, namespace: str) -> MasterConfig:
    """The one Determined installation's configuration in `namespace` (no release name needed).

    Lists the ConfigMaps and Secrets named `determined-master-config-*` and takes the kind the installed
    master's chart writes. UsageError (one line) when there is none, more than one, or the Secret is needed and
    RBAC forbids reading Secrets.
    """
    found: dict[str, dict[str, Mapping[str, Any]]] = {}
    forbidden: dict[str, Forbidden] = {}
    for kind, plural in (("ConfigMap", CONFIGMAPS), ("Secret", SECRETS)):
        try:
            listed = api.list(plural, namespace)
        except Forbidden as exc:
            forbidden[kind] = exc
            continue
        for obj in listed:
            name = str((obj.get("metadata") or {}).get("name") or "")
            if name.startswith(CONFIG_PREFIX):
                found.setdefault(name.removeprefix(CONFIG_PREFIX), {})[kind] = obj
    if not found:
        if "Secret" in forbidden:
            raise secrets_forbidden(namespace, forbidden["Secret"], "listing")
        if "ConfigMap" in forbidden:
            raise forbidden["ConfigMap"]
        raise UsageError(f"no settings: no Determined master configuration in namespace {namespace}",
                         hint="pass -f with the settings Determined was installed with, or use -n")
    if len(found) > 1:
        names = ", ".join(master_config(r) for r in sorted(found))
        raise UsageError(f"several Determined installations in namespace {namespace} ({names})",
                         hint="pass -f with the settings of the one to use")
    release, objects = next(iter(found.items()))  # kind -> object
    version = installed_version(api, release, namespace)
    wanted = config_kind(version)
    if wanted not in objects and wanted == "Secret" and "Secret" in forbidden and version is not None:
        try:  # listing is forbidden; reading the one Secret may not be
            objects[wanted] = api.get(SECRETS, master_config(release), namespace)
        except NotFound:
            pass
        except Forbidden as exc:
            raise secrets_forbidden(namespace, exc, "reading") from exc
    kind = wanted if wanted in objects else next(iter(objects))
    return MasterConfig(release, namespace, kind, version, config_text({"kind": kind, **objects[kind]}))
