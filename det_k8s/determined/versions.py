"""Facts about Determined releases that det-k8s depends on: one table, one row per fact.

Determined changes shape between releases: the master's configuration keys, whether its config is a
ConfigMap or a Secret, which checkpoint storage types exist, whether task pods are bare pods or the
pods of a batch/v1 Job, what the master deletes when it starts. Everything det-k8s does differently
by version reads a row of `FACTS`, and each row names the release tag and the file in
determined-ai/determined it was read from (`../shared/research/determined-versions.md` collects
them). A fact holds for the releases from `since` (inclusive) to `until` (exclusive); a bound of
None means "every supported release on that side".

Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, order=True, slots=True)
class Version:
    """A Determined release number, compared numerically (0.9.0 < 0.17.15 < 0.38.1)."""

    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @property
    def line(self) -> str:
        """The release line, `0.38.x`."""
        return f"{self.major}.{self.minor}.x"


_VERSION = re.compile(r"v?([0-9]{1,4})\.([0-9]{1,4})\.([0-9]{1,4})")


def parse_version(text: str) -> Version | None:
    """`0.17.15` or `v0.38.1` as a Version; None for anything else (a dev build, a typo)."""
    match = _VERSION.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        return None
    return Version(int(match[1]), int(match[2]), int(match[3]))


def v(text: str) -> Version:
    """A version literal for the table (raises on a malformed one: a bug in the table)."""
    found = parse_version(text)
    if found is None:
        raise ValueError(f"not a version: {text!r}")
    return found


NEWEST = v("0.38.1")  # the newest Determined release (tag v0.38.1, 2025-03-19)
OLDEST = v("0.17.0")  # the line the product documents describe
DEFAULT = NEWEST  # appVersion when the settings do not name one


@dataclass(frozen=True, slots=True)
class Fact:
    """Something that is true of Determined from `since` until (not including) `until`.

    `key` names the fact (`master.resource_manager.default_namespace`); `value` is what it is when
    a fact carries one (an image name, a number); `source` is the tag and path it was read from.
    """

    key: str
    source: str
    since: Version | None = None
    until: Version | None = None
    value: Any = None
    note: str = ""

    def holds(self, version: Version) -> bool:
        return (self.since is None or version >= self.since) and (self.until is None or version < self.until)


FACTS: tuple[Fact, ...] = (
    # -- the master configuration the chart writes -------------------------------------------------
    Fact("master.config.secret", "0.26.2 helm/charts/determined/templates/master-config.yaml (kind: Secret)",
         since=v("0.26.2"), note="before 0.26.2 the master config is a ConfigMap (data:)"),
    Fact("master.resource_manager.namespace", "0.17.15 master/internal/config/resource_manager_config.go",
         until=v("0.35.0"), note="renamed default_namespace in 0.35.0"),
    Fact("master.resource_manager.default_namespace", "v0.38.1 master/internal/config/resource_manager_config.go",
         since=v("0.35.0")),
    # -- checkpoint storage (schemas/expconf/v0/*.json at each tag) ---------------------------------
    Fact("checkpoint_storage.s3.prefix", "0.17.3 schemas/expconf/v0/s3.json", since=v("0.17.3")),
    Fact("checkpoint_storage.gcs.prefix", "0.18.2 schemas/expconf/v0/gcs.json", since=v("0.18.2")),
    Fact("checkpoint_storage.hdfs", "0.23.0 schemas/expconf/v0/checkpoint-storage.json (hdfs removed)",
         until=v("0.23.0")),
    Fact("checkpoint_storage.directory", "0.26.3 schemas/expconf/v0/directory.json", since=v("0.26.3")),
    # -- task pods the master creates ----------------------------------------------------------------
    Fact("tasks.jobs", "0.34.0 master/internal/rm/kubernetesrm/jobs.go (batch/v1 Jobs instead of bare pods)",
         since=v("0.34.0")),
    Fact("scheduler.preemption", "0.36.0 master/internal/config/resource_manager_config.go (preemption rejected)",
         until=v("0.36.0")),
    # -- hyperparameter searches (schemas/expconf/v0/searcher-*.json at each tag) ------------------------
    Fact("searcher.max_concurrent_trials.default_16", "0.26.2 schemas/expconf/v0/searcher-random.json (default 16)",
         since=v("0.26.2"), value=16,
         note="0.17.15's schemas default it to 0 (no limit); the release that changed it lies between the two tags"),
)

_BY_KEY: dict[str, Fact] = {}
for _fact in FACTS:
    if _fact.key in _BY_KEY:
        raise ValueError(f"duplicate fact {_fact.key}")
    _BY_KEY[_fact.key] = _fact


def fact(key: str) -> Fact:
    """The row for `key` (KeyError for a key the table does not have: a bug in the caller)."""
    return _BY_KEY[key]


def has(key: str, version: Version) -> bool:
    """True when fact `key` holds for `version`."""
    return _BY_KEY[key].holds(version)


def supported(version: Version) -> bool:
    """True for the releases det-k8s supports: 0.17.0 up to the newest release's line."""
    return version >= OLDEST and (version.major, version.minor) <= (NEWEST.major, NEWEST.minor)
