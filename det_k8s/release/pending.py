"""A release helm left half-changed: pending-install, pending-upgrade or pending-rollback.

helm writes a new revision's record as pending-* before it applies anything and marks it deployed (or failed) at the
end. A helm killed in between (SIGKILL, or a SIGTERM whose cleanup did not finish: det-k8s ends helm's process group
with TERM, then KILL 2 s later; a request held by a slow API server outlives that) leaves the record pending-*, and
then helm itself refuses the next change: `helm upgrade` with "another operation (install/upgrade/rollback) is in
progress", `helm install` with "cannot re-use a name that is still in use". Nothing expires it. What does recover it:
`helm rollback` to the last revision that was deployed (a pending-upgrade or pending-rollback), `helm uninstall` (a
pending-install: there is no revision to go back to). det-k8s reads the records (the labels of helm's release
Secrets) and names the one det-k8s command that recovers, instead of helm's message.

A pending record is also what a helm at work right now shows: det-k8s says since when it is pending, and recovers
only when asked (the user runs the command it names).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

PENDING = ("pending-install", "pending-upgrade", "pending-rollback")
_GOOD = ("deployed", "superseded")


@dataclass(frozen=True)
class Record:
    """One revision of a release, as helm's release Secret (or ConfigMap) labels say."""

    revision: int
    status: str
    modified: datetime.datetime | None = None


@dataclass(frozen=True)
class Stuck:
    release: str
    namespace: str
    revision: int
    status: str
    modified: datetime.datetime | None
    back_to: int | None  # the latest earlier revision that was deployed, for a pending-upgrade or pending-rollback

    @property
    def operation(self) -> str:
        return self.status.removeprefix("pending-")

    @property
    def recovery(self) -> str:
        """The det-k8s command that takes the release out of its pending state."""
        if self.back_to is None:
            return f"det-k8s uninstall {self.release} -n {self.namespace}"
        return f"det-k8s rollback {self.release} {self.back_to} -n {self.namespace}"

    @property
    def message(self) -> str:
        since = f" since {self.modified:%Y-%m-%d %H:%M:%S} UTC" if self.modified else ""
        return (f"release {self.release} in namespace {self.namespace} is {self.status} (revision {self.revision}"
                f"{since}): a helm {self.operation} was stopped before it finished, or one is running now; helm "
                "refuses every other change until it is recovered")

    @property
    def hint(self) -> str:
        then = "; then install again" if self.back_to is None else ""
        return f"if no other helm command is working on it, run: {self.recovery}{then}"


def records(items: Iterable[Mapping[str, Any]], release: str) -> list[Record]:
    """The release's revisions from helm's storage objects (Secrets or ConfigMaps labelled owner=helm), oldest
    first; objects that are not helm's records of `release` are ignored."""
    found = []
    for item in items:
        labels = (item.get("metadata") or {}).get("labels") or {}
        version = str(labels.get("version") or "")
        if labels.get("owner") != "helm" or labels.get("name") != release or not version.isdigit():
            continue
        modified = None
        stamp = str(labels.get("modifiedAt") or labels.get("createdAt") or "")
        if stamp.isdigit():
            modified = datetime.datetime.fromtimestamp(int(stamp), datetime.UTC)
        found.append(Record(int(version), str(labels.get("status") or ""), modified))
    return sorted(found, key=lambda r: r.revision)


def stuck(found: list[Record], release: str, namespace: str) -> Stuck | None:
    """The release's latest revision if it is pending-*, with the revision to go back to."""
    if not found or found[-1].status not in PENDING:
        return None
    last = found[-1]
    earlier = [r.revision for r in found[:-1] if r.status in _GOOD]
    back_to = earlier[-1] if earlier and last.status != "pending-install" else None
    return Stuck(release, namespace, last.revision, last.status, last.modified, back_to)
