"""helm's own record of a release, kept truthful: a change det-k8s saw fail is marked failed there.

det-k8s waits for the master itself instead of passing helm `--wait` (release/readiness.py says why), so helm marks
a revision `deployed` as soon as it applied the objects; a master that then never became ready stayed `deployed` in
`helm history`, `helm status` and for `helm rollback`. det-k8s writes its verdict into what helm already keeps, no
store of its own:

- each revision is an object helm's storage driver writes in the release's namespace (the default: a Secret
  `sh.helm.release.v1.<name>.v<revision>`, or a ConfigMap with HELM_DRIVER=configmap), labelled `owner=helm`,
  `name`, `version` and `status`, its `release` data base64(gzip(JSON of the release)) (a Secret's data is base64
  once more on the wire) with `info.status` and `info.description`, what `helm history` and `helm status` print;
- failed: `info.status` and the `status` label become `failed` (helm queries by the label: its `deployed` revision
  is found by `status=deployed`), `info.description` says what det-k8s saw;
- seen ready: the label `det-k8s.io/seen-ready` holds the revision's own number. helm 3.13+ and 4 keep labels it
  does not own (`rls.Labels`) when they rewrite a record (marking it superseded), and copy them to the next
  revision on upgrade: a label whose value is another revision's number was copied, and says nothing.

The storage drivers helm 3.17 and 4.1 use (pkg/storage/driver/secrets.go and cfgmaps.go, util.go's
encodeRelease/decodeRelease) were read for this, and tests/real/test_release_lifecycle.py checks the result with
the real helm 3 and 4 (`helm history` and `helm status` then say failed).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..labels import SEEN_READY

_GZIP_MAGIC = b"\x1f\x8b\x08"
DESCRIPTION_LIMIT = 400  # characters of det-k8s's reason kept in info.description (helm prints it in one cell)


class RecordError(ValueError):
    """A record det-k8s cannot read (not helm's encoding)."""


@dataclass(frozen=True)
class Revision:
    """One of helm's records of a release, as the storage object (Secret or ConfigMap) holds it."""

    kind: str  # "Secret" or "ConfigMap"
    name: str
    revision: int
    status: str
    seen_ready: bool
    obj: Mapping[str, Any]


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def revisions(items: Iterable[Mapping[str, Any]], release: str, kind: str) -> list[Revision]:
    """`release`'s records among `items` (objects of `kind`), oldest first."""
    found = []
    for item in items:
        labels = _labels(item)
        version = str(labels.get("version") or "")
        if labels.get("owner") != "helm" or labels.get("name") != release or not version.isdigit():
            continue
        found.append(Revision(kind, str((item.get("metadata") or {}).get("name") or ""), int(version),
                              str(labels.get("status") or ""), labels.get(SEEN_READY) == version, item))
    return sorted(found, key=lambda r: r.revision)


def decode(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The release JSON a record holds."""
    text = str((obj.get("data") or {}).get("release") or "")
    try:
        raw = base64.b64decode(text, validate=True)
        if kind == "Secret":  # the API's base64 of the bytes helm stored, themselves base64
            raw = base64.b64decode(raw, validate=True)
        if raw[:3] == _GZIP_MAGIC:
            raw = gzip.decompress(raw)
        release = json.loads(raw)
    except (binascii.Error, ValueError, OSError, EOFError) as exc:
        raise RecordError(f"not helm's release encoding: {exc}") from exc
    if not isinstance(release, dict):
        raise RecordError("not helm's release encoding: the JSON is not an object")
    return release


def encode(release: Mapping[str, Any], kind: str) -> str:
    """What a record's `release` data holds for this JSON, as helm writes it (gzip, base64)."""
    text = base64.b64encode(gzip.compress(json.dumps(release, separators=(",", ":")).encode("utf-8"), 9))
    return base64.b64encode(text).decode("ascii") if kind == "Secret" else text.decode("ascii")


def failed_patch(record: Revision, description: str) -> dict[str, Any]:
    """The merge patch that marks `record` failed (status label and info.status), saying why; resourceVersion set,
    so a record helm changed meanwhile makes it a Conflict."""
    release = decode(record.obj, record.kind)
    info = release.setdefault("info", {})
    info["status"] = "failed"
    info["description"] = description[:DESCRIPTION_LIMIT]
    labels: dict[str, Any] = {"status": "failed"}
    if SEEN_READY in _labels(record.obj):
        labels[SEEN_READY] = None  # copied from an earlier revision, or this one's no longer true
    return {"metadata": {"labels": labels, "resourceVersion": (record.obj.get("metadata") or {}).get("resourceVersion")},
            "data": {"release": encode(release, record.kind)}}


def ready_patch(record: Revision) -> dict[str, Any]:
    return {"metadata": {"labels": {SEEN_READY: str(record.revision)}}}


def last_seen_ready(records: Iterable[Revision], before: int) -> Revision | None:
    """The latest revision before `before` that det-k8s saw ready and helm has not marked failed since."""
    ready = [r for r in records if r.revision < before and r.seen_ready and r.status != "failed"]
    return ready[-1] if ready else None


@dataclass(frozen=True)
class State:
    """Where a release stands, from helm's record and the master's Deployment: one phrase, and the det-k8s command
    that restores service (None when the master serves)."""

    phrase: str
    restore: str | None
    revision: int | None = None
    status: str | None = None

    @property
    def line(self) -> str:
        return self.phrase + (f"; to restore service, run: {self.restore}" if self.restore else "")


def _back_to(records: list[Revision], latest: Revision) -> Revision | None:
    """What a rollback from `latest` should go to: the last revision det-k8s saw ready, else the last one helm
    deployed or superseded (a release installed before det-k8s labelled revisions)."""
    seen = last_seen_ready(records, latest.revision)
    if seen is not None:
        return seen
    good = [r for r in records if r.revision < latest.revision and r.status in ("deployed", "superseded")]
    return good[-1] if good else None


def state(records: list[Revision], release: str, namespace: str, master: str | None, master_waiting: str | None) -> State:
    """`master`: the master Deployment's name when it exists; `master_waiting`: why it is not rolled out
    (release/readiness.py), None when it serves."""
    where = f"release {release} in namespace {namespace}"
    serving = master is not None and master_waiting is None
    how = (f"the master serves (Deployment {master})" if serving
           else f"no master Deployment {master_waiting or ''}".strip() if master is None else str(master_waiting))
    if not records:
        if serving:
            return State(f"{where} has no helm record; {how}", None)
        return State(f"{where} has no helm record (nothing of it is installed); {how}",
                     f"det-k8s install {release} -n {namespace} with the same settings")
    latest = records[-1]
    said = f"{where} is {latest.status} at revision {latest.revision} in helm's record"
    back = _back_to(records, latest)
    rollback = f"det-k8s rollback {release} {back.revision} -n {namespace}" if back is not None else None
    uninstall = f"det-k8s uninstall {release} -n {namespace}; then install again"
    if latest.status == "deployed" and serving:
        return State(f"{said}; {how}", None, latest.revision, latest.status)
    if latest.status == "pending-install" or back is None:
        return State(f"{said}; {how}", uninstall, latest.revision, latest.status)
    return State(f"{said}; {how}", rollback, latest.revision, latest.status)
