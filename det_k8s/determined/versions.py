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
    # -- task pods: what det-k8s reads when it schedules the master's pods (`det_k8s/scheduling/master.py`)
    #    and what the tests' master-shaped pods carry (`tests/master_pods.py`); facts section 6 --------
    Fact("tasks.pod_name.bare", "0.17.15 master/internal/resourcemanagers/kubernetes/pod.go; 0.26.2 "
         "master/internal/rm/kubernetesrm/pod.go", until=v("0.34.0"),
         value="{description}-{rank}-{allocation}-{petname}",
         note="one bare Pod (and one ConfigMap of the same name) per pod; trials: description exp-<E>-trial-<T>"),
    Fact("tasks.pod_name.job", "v0.38.1 master/internal/rm/kubernetesrm/jobs.go, job.go", since=v("0.34.0"),
         value="det-{cluster8}-{description}",
         note="the Job (and its ConfigMap) is named so; its pods come from the Job controller as <job>-<5 chars>, "
              "labelled batch.kubernetes.io/job-name (Kubernetes >= 1.27) and job-name"),
    Fact("tasks.description.cmd_suffix", "0.26.2 master/internal/rm/kubernetesrm/spec.go (Description cmd-<id>, "
         "gc-<exp>)", since=v("0.24.0"),
         note="before 0.24.0 commands are described `cmd` and GC `gc` and get no gang labels; from 0.24.0 the "
              "special cases no longer match [inferred in the facts document]"),
    Fact("tasks.label.allocation", "0.17.15 master/internal/resourcemanagers/kubernetes/spec.go; v0.38.1 "
         "master/internal/rm/kubernetesrm/spec.go", value="determined",
         note="value: the allocation id (<task id>.<run>): unique per attempt of a trial"),
    Fact("tasks.label.user", "0.32.0 master/internal/rm/kubernetesrm/spec.go (userLabel)", since=v("0.32.0"),
         value="determined.ai/user"),
    Fact("tasks.label.task_type", "0.32.0 master/internal/rm/kubernetesrm/spec.go (taskTypeLabel)",
         since=v("0.32.0"), value="determined.ai/task_type", note="TRIAL, NOTEBOOK, SHELL, COMMAND, TENSORBOARD..."),
    Fact("tasks.label.experiment", "0.32.0 master/internal/rm/kubernetesrm/spec.go (ExtraPodLabels of trials)",
         since=v("0.32.0"), value="determined.ai/experiment_id"),
    Fact("tasks.label.allocation_id", "0.34.0 master/internal/rm/kubernetesrm/jobs.go", since=v("0.34.0"),
         value="determined.ai/allocation_id"),
    Fact("tasks.label.job_name", "v0.38.1 master/internal/rm/kubernetesrm/jobs.go (kubernetesJobNameLabel)",
         since=v("0.34.0"), value=("batch.kubernetes.io/job-name", "job-name")),
    Fact("tasks.gang.name", "0.17.15 master/internal/resourcemanagers/kubernetes/spec.go (trialNameFromPod)",
         until=v("0.34.0"), value="pod-group.scheduling.sigs.k8s.io/name",
         note="the first four dash-separated fields of the pod name joined (exp-12-trial-34-... -> exp12trial34): the "
              "same for every attempt of a trial, so attempts are told apart by the `determined` label"),
    Fact("tasks.gang.job_name", "v0.38.1 master/internal/rm/kubernetesrm/spec.go (configureCoscheduler)",
         since=v("0.34.0"), value="pod-group.scheduling.sigs.k8s.io/name",
         note="the group name is the Job name: unique per attempt"),
    Fact("tasks.gang.min_available", "0.17.15 master/internal/resourcemanagers/kubernetes/spec.go; v0.38.1 "
         "master/internal/rm/kubernetesrm/spec.go", value="pod-group.scheduling.sigs.k8s.io/min-available",
         note="ceil(slots_per_trial / slots per pod) for CUDA slots with slots per pod > 0, else 0 (no gang)"),
    Fact("tasks.scheduler_name.preemption", "0.26.2 master/internal/rm/kubernetesrm/spec.go (modifyPodSpec)",
         until=v("0.36.0"), value="preemption",
         note="with default_scheduler: preemption the master names that scheduler; the 0.17.x chart writes coscheduler "
              "for both choices, the chart passes the value through from 0.18.1"),
    Fact("tasks.priority_class", "0.17.15 master/internal/resourcemanagers/kubernetes/spec.go (createPriorityClass)",
         value="{id}-priorityclass",
         note="value = resources.priority (default 50), preemptionPolicy Never; id = container id before 0.34.0, "
              "allocation id from 0.34.0; without a priority: determined-medium-priority (50)"),
    Fact("tasks.fluent_sidecar", "0.17.15 master/internal/resourcemanagers/kubernetes/spec.go "
         "(determined-fluent-container)", until=v("0.25.1"), value="determined-fluent-container"),
    Fact("tasks.node_disable_affinity", "0.26.2 master/internal/rm/kubernetesrm/spec.go "
         "(addNodeDisabledAffinityToPodSpec)", since=v("0.26.0"),
         note="required node affinity: <cluster-id node label> DoesNotExist [the exact first release is inferred]"),
    Fact("tasks.preemption_label", "0.17.15 master/internal/resourcemanagers/kubernetes/preemptions.go; v0.38.1 "
         "master/internal/rm/kubernetesrm/preemptions.go", value="determined-preemption",
         note="the master watches pods carrying this label (any value) and asks their task to release its "
              "resources: a trial checkpoints and stops"),
    Fact("tasks.events.not_running_only", "0.17.15 master/internal/resourcemanagers/kubernetes/pod.go; 0.26.2 "
         "master/internal/rm/kubernetesrm/pod.go", until=v("0.34.0"),
         note="core/v1 Events of a pod go to the trial log only while the pod is not Running (v0.38.1: always; the "
              "change is placed at 0.34.0, where Jobs came, but was read only at 0.26.2 and v0.38.1)"),
    Fact("tasks.events.rewrite", "0.17.15 master/internal/resourcemanagers/kubernetes/pod.go; v0.38.1 "
         "master/internal/rm/kubernetesrm/job.go (preparePodUpdateMessage)",
         value=("nodes are available", "Successfully assigned", "pod triggered scale-up", "skip schedule deleting pod"),
         note="an event message matching any of these (regular expressions, anywhere in the text) is replaced "
              "by the master's own text before it reaches the trial log"),
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
