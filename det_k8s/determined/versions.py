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
    a fact carries one (an image name, a number); `source` is the tag and path it was read from;
    `what` names it for a user ("prefix for gcs"), in "Determined 0.17.15 has no {what}".
    Several rows may share a key when the value changes between releases (`value_of` picks one).
    """

    key: str
    source: str
    since: Version | None = None
    until: Version | None = None
    value: Any = None
    note: str = ""
    what: str = ""

    def holds(self, version: Version) -> bool:
        return (self.since is None or version >= self.since) and (self.until is None or version < self.until)


_CHART = "helm/charts/determined"
MASTER_KEY = "master.yaml:"  # prefix of the rows that list master.yaml keys


def _keys(source: str, since: Version | None, until: Version | None, types: dict[str, str]) -> tuple[Fact, ...]:
    """Rows for master.yaml keys: `value` is the type (str, int, num, bool, map, list), `note` says "required"."""
    return tuple(Fact(MASTER_KEY + path, source, since, until, value=kind.rstrip("!"),
                      note="required" if kind.endswith("!") else "") for path, kind in types.items())
_RM = "master/internal/config/resource_manager_config.go"

FACTS: tuple[Fact, ...] = (
    # -- the master configuration the chart writes (what each master parses) -------------------------
    Fact("master.config.secret", f"0.26.2 {_CHART}/templates/master-config.yaml (kind: Secret)",
         since=v("0.26.2"), note="before 0.26.2 the master config is a ConfigMap (data:)"),
    Fact("master.resource_manager.namespace", f"0.17.15 {_RM}", until=v("0.35.0"),
         note="renamed default_namespace in 0.35.0; unknown keys under resource_manager stop the master"),
    Fact("master.resource_manager.default_namespace", f"v0.38.1 {_RM}", since=v("0.35.0"),
         what="resourceManager.defaultNamespace"),
    Fact("master.resource_manager.cluster_name", f"v0.38.1 {_RM}", since=v("0.35.0"),
         what="resourceManager.clusterName"),
    Fact("master.resource_manager.default_scheduler.preemption", "0.36.0 master/internal/config/config.go "
         "(Validate: preemption rejected)",
         until=v("0.36.0"), what="preemption scheduler"),
    Fact("master.resource_manager.slot_type.rocm", f"0.36.0 {_RM} (rocm slot type)", since=v("0.36.0"),
         what="rocm slot type"),
    Fact("master.resource_manager.determined_master_host", f"v0.38.0 {_CHART}/values.yaml (determinedMasterHost)",
         since=v("0.38.0"), what="determinedMasterHost"),
    Fact("master.resource_manager.fluent.uid_gid", f"0.26.2 {_CHART}/templates/master-config.yaml (fluent: toYaml)",
         since=v("0.26.2"), what="fluent.uid or fluent.gid", note="0.17.15 writes fluent.image only; first seen at 0.26.2"),
    Fact("master.resource_pools", f"0.19.10 {_CHART}/values.yaml (resourcePools)", since=v("0.19.10"),
         what="resource pools on Kubernetes", note="0.17.x has one dummy pool named kubernetes"),
    Fact("master.resource_pools.max_slots_per_pod", "0.26.2 master/internal/rm/kubernetesrm/"
         "kubernetes_resource_manager.go (a pool's task_container_defaults.kubernetes.max_slots_per_pod over the "
         "resource manager's)", since=v("0.26.1"), note="task_container_defaults.kubernetes exists from 0.26.1; "
         "the same at v0.38.1"),
    Fact("master.resource_pools.kubernetes_namespace", "0.19.11 master/internal/config/resource_pool_config.go",
         since=v("0.19.11"), until=v("0.35.0"), note="ignored from 0.35.0 (workspace bindings replace it)"),
    Fact("master.log", f"0.23.2 {_CHART}/values.yaml (logLevel, logColor)", since=v("0.23.2"),
         what="logLevel and logColor"),
    Fact("master.security.initial_user_password", f"0.31.0 {_CHART}/templates/master-config.yaml",
         since=v("0.31.0"), what="initialUserPassword",
         note="the chart refuses a fresh install without it: 8+ characters, upper, lower, digit"),
    Fact("master.security.default_task", f"0.26.2 {_CHART}/values.yaml (security.defaultTask)", since=v("0.26.2"),
         what="security settings", note="first seen at 0.26.2; absent from the 0.17.15 chart"),
    Fact("master.observability", f"0.26.2 {_CHART}/values.yaml (observability)", since=v("0.26.2"),
         what="observability settings", note="first seen at 0.26.2"),
    Fact("master.idle_timeouts", f"0.26.2 {_CHART}/values.yaml (tensorboardTimeout, notebookTimeout)",
         since=v("0.26.2"), what="tensorboardTimeout and notebookTimeout", note="first seen at 0.26.2"),
    Fact("master.retention_policy", f"0.32.0 {_CHART}/values.yaml (retentionPolicy)", since=v("0.32.0"),
         what="retentionPolicy"),
    Fact("master.additional_resource_managers", f"0.32.0 {_CHART}/values.yaml (additional_resource_managers)",
         since=v("0.32.0"), what="additional_resource_managers"),
    Fact("master.task_container_defaults.port_ranges", f"0.26.2 {_CHART}/templates/master-config.yaml "
         "(nccl/gloo port ranges dropped)", until=v("0.26.2"), what="ncclPortRange or glooPortRange",
         note="last seen at 0.17.15, gone from the 0.26.2 chart"),
    Fact("master.task_container_defaults.v0_38", f"v0.38.1 {_CHART}/templates/master-config.yaml "
         "(startup_hook, checkpoint_gc_pod_spec, log_policies)", since=v("0.38.0"),
         what="startupHook, checkpointGcPodSpec or logPolicies", note="first seen at v0.38.1; absent from the 0.26.2 chart"),
    # -- master.yaml keys and their types: what the official chart of each tag writes, so what that master
    #    parses (unknown keys stop it: facts section 5.1). `value` is the type; note "required" marks the keys
    #    a config cannot go without. checkpoint_storage is checked against the release's JSON schemas instead.
    *_keys(f"0.17.15 {_CHART}/templates/master-config.yaml", None, None, {
        "port": "int!", "db.user": "str!", "db.password": "str!", "db.host": "str!", "db.port": "int!",
        "db.name": "str!", "db.ssl_mode": "str", "db.ssl_root_cert": "str", "security.tls.cert": "str",
        "security.tls.key": "str", "checkpoint_storage": "map!", "resource_manager.type": "str!",
        "resource_manager.max_slots_per_pod": "int!", "resource_manager.master_service_name": "str!",
        "resource_manager.default_scheduler": "str", "resource_manager.slot_type": "str",
        "resource_manager.slot_resource_requests.cpu": "num", "resource_manager.fluent.image": "str",
        "task_container_defaults.image.cpu": "str", "task_container_defaults.image.gpu": "str",
        "task_container_defaults.force_pull_image": "bool", "task_container_defaults.network_mode": "str",
        "task_container_defaults.dtrain_network_interface": "str", "task_container_defaults.cpu_pod_spec": "map",
        "task_container_defaults.gpu_pod_spec": "map", "telemetry.enabled": "bool", "cluster_name": "str",
        "logging.type": "str", "logging.host": "str", "logging.port": "int", "logging.security.username": "str",
        "logging.security.password": "str", "logging.security.tls.enabled": "bool",
        "logging.security.tls.skip_verify": "bool", "logging.security.tls.certificate": "str",
        "logging.security.tls.certificate_name": "str"}),
    *_keys(f"0.17.15 {_CHART}/templates/master-config.yaml", None, v("0.35.0"), {"resource_manager.namespace": "str!"}),
    *_keys(f"0.17.15 {_CHART}/templates/master-config.yaml", None, v("0.26.2"), {
        "task_container_defaults.nccl_port_range": "str", "task_container_defaults.gloo_port_range": "str"}),
    *_keys(f"0.26.2 {_CHART}/values.yaml (resourcePools; chart since 0.19.10)", v("0.19.10"), None, {
        "resource_pools": "list", "resource_manager.default_aux_resource_pool": "str",
        "resource_manager.default_compute_resource_pool": "str"}),
    *_keys(f"0.26.2 {_CHART}/templates/master-config.yaml (log; chart since 0.23.2)", v("0.23.2"), None, {
        "log.level": "str", "log.color": "bool"}),
    *_keys(f"0.26.2 {_CHART}/templates/master-config.yaml", v("0.26.2"), None, {
        "security.default_task.user": "str", "security.default_task.uid": "int", "security.default_task.group": "str",
        "security.default_task.gid": "int", "security.authz": "map", "observability.enable_prometheus": "bool",
        "tensorboard_timeout": "int", "notebook_timeout": "int", "resource_manager.fluent.uid": "int",
        "resource_manager.fluent.gid": "int"}),
    *_keys(f"0.31.0 {_CHART}/templates/master-config.yaml", v("0.31.0"), None, {
        "security.initial_user_password": "str"}),
    *_keys(f"v0.38.1 {_CHART}/templates/master-config.yaml (retention_policy; since 0.32.0)", v("0.32.0"), None, {
        "retention_policy.log_retention_days": "int", "retention_policy.schedule": "str"}),
    *_keys(f"v0.38.1 {_RM}", v("0.35.0"), None, {
        "resource_manager.default_namespace": "str!", "resource_manager.cluster_name": "str"}),
    *_keys(f"v0.38.1 {_CHART}/templates/master-config.yaml (image.rocm; rocm since 0.36.0)", v("0.36.0"), None, {
        "task_container_defaults.image.rocm": "str"}),
    *_keys(f"v0.38.1 {_CHART}/templates/master-config.yaml (first seen at v0.38.1)", v("0.38.0"), None, {
        "resource_manager.determined_master_scheme": "str", "resource_manager.determined_master_host": "str",
        "resource_manager.determined_master_port": "int", "task_container_defaults.checkpoint_gc_pod_spec": "map",
        "task_container_defaults.log_policies": "list", "task_container_defaults.startup_hook": "str"}),
    # -- checkpoint storage (schemas/expconf/v0/*.json at each tag) ---------------------------------
    Fact("checkpoint_storage.s3.prefix", "0.17.3 schemas/expconf/v0/s3.json", since=v("0.17.3"),
         what="prefix for s3"),
    Fact("checkpoint_storage.gcs.prefix", "0.18.2 schemas/expconf/v0/gcs.json", since=v("0.18.2"),
         what="prefix for gcs"),
    Fact("checkpoint_storage.hdfs", "0.23.0 schemas/expconf/v0/checkpoint-storage.json (hdfs removed)",
         until=v("0.23.0"), what="hdfs checkpoint storage"),
    Fact("checkpoint_storage.directory", "0.26.3 schemas/expconf/v0/directory.json", since=v("0.26.3"),
         what="directory checkpoint storage"),
    # -- the official chart: how it turns values into objects ----------------------------------------
    Fact("chart.image_registry_prefixes_task_images", f"0.17.15 {_CHART}/templates/master-config.yaml "
         "(split \"/\" ... re-prefixed with imageRegistry)", until=v("0.23.2"),
         note="from 0.23.2 the task images are defaultImages.cpuImage/gpuImage, used verbatim"),
    Fact("chart.default_images", f"0.23.2 {_CHART}/values.yaml (defaultImages)", since=v("0.23.2"),
         what="defaultImages"),
    Fact("chart.task_images_independent", f"v0.38.1 {_CHART}/templates/master-config.yaml (image.cpu, .gpu, .rocm)",
         since=v("0.38.0"), note="before, cpuImage and gpuImage must be set together (0.26.2 fails otherwise); "
         "first seen at v0.38.1"),
    Fact("chart.default_scheduler.passthrough", f"0.18.1 {_CHART}/templates/master-config.yaml",
         since=v("0.18.1"), note="0.17.x writes default_scheduler: coscheduler for coscheduler and preemption"),
    Fact("chart.create_non_namespaced_objects", f"0.26.0 {_CHART}/values.yaml (createNonNamespacedObjects)",
         since=v("0.26.0"), note="before 0.26.0 the PriorityClasses are always created"),
    Fact("chart.default_password_job", f"0.31.0 {_CHART}/templates (change-password.yaml removed)",
         until=v("0.31.0"), note="from 0.31.0 defaultPassword falls back into security.initial_user_password"),
    Fact("chart.route_service_cluster_ip", f"v0.38.1 {_CHART}/templates/master-service.yaml (ClusterIP behind a Route)",
         since=v("0.38.0"), note="0.26.2 keeps LoadBalancer/NodePort; first seen at v0.38.1"),
    Fact("chart.enterprise_image.hpe_mlde", f"0.26.2 {_CHART}/templates/master-deployment.yaml (hpe-mlde-master)",
         since=v("0.26.2"), note="0.17.15 names hpecaide-master; first seen at 0.26.2"),
    # default task images: the official chart's, per release line. Known exactly at the tags read; between
    # them the nearest known value is used (the master accepts any image; air-gapped sites mirror these).
    Fact("chart.image.cpu", f"0.17.15 {_CHART}/templates/master-config.yaml", until=v("0.23.2"),
         value="environments:py-3.8-pytorch-1.10-lightning-1.5-tf-2.8-cpu-ed66d8a",
         note="under imageRegistry; 0.17.15's build, nearest known for 0.17.0-0.23.1"),
    Fact("chart.image.cpu", f"0.26.2 {_CHART}/values.yaml (defaultImages.cpuImage)", since=v("0.23.2"),
         until=v("0.38.0"), value="determinedai/environments:py-3.8-pytorch-1.12-tf-2.8-cpu-9d07809",
         note="0.26.2's build, nearest known for 0.23.2-0.37.x"),
    Fact("chart.image.cpu", f"v0.38.1 {_CHART}/values.yaml (defaultImages.cpuImage)", since=v("0.38.0"),
         value="determinedai/pytorch-ngc:0.38.1"),
    Fact("chart.image.gpu", f"0.17.15 {_CHART}/templates/master-config.yaml", until=v("0.23.2"),
         value="environments:cuda-11.3-pytorch-1.10-lightning-1.5-tf-2.8-gpu-ed66d8a",
         note="under imageRegistry; 0.17.15's build, nearest known for 0.17.0-0.23.1"),
    Fact("chart.image.gpu", f"0.26.2 {_CHART}/values.yaml (defaultImages.gpuImage)", since=v("0.23.2"),
         until=v("0.38.0"), value="determinedai/environments:cuda-11.3-pytorch-1.12-tf-2.11-gpu-2b7e2a1",
         note="0.26.2's build, nearest known for 0.23.2-0.37.x"),
    Fact("chart.image.gpu", f"v0.38.1 {_CHART}/values.yaml (defaultImages.gpuImage)", since=v("0.38.0"),
         value="determinedai/pytorch-ngc:0.38.1"),
    Fact("chart.image.rocm", f"v0.38.1 {_CHART}/values.yaml (defaultImages.rocmImage)", since=v("0.36.0"),
         value="determinedai/environments:rocm-5.6-pytorch-1.3-tf-2.10-rocm-mpich-0736b6d", what="rocmImage",
         note="absent at 0.26.2; taken to arrive with the rocm slot type (0.36.0)"),
    Fact("chart.image.postgres", f"0.26.2 {_CHART}/values.yaml (defaultImages.postgreSQL)",
         value="postgres:10.14", note="the same at 0.17.15 (hard-coded) and v0.38.1"),
    Fact("chart.image.kube_scheduler", f"0.26.2 {_CHART}/values.yaml (defaultImages.kubeScheduler)",
         value="k8s.gcr.io/scheduler-plugins/kube-scheduler:v0.18.9",
         note="the same at 0.17.15 and v0.38.1: a kube-scheduler 1.18.9 (scheduler-plugins v0.18.9 go.mod)"),
    Fact("chart.image.kube_scheduler_preemption", f"0.17.15 {_CHART}/templates/scheduler-deployment.yaml",
         until=v("0.18.0"), value="determinedai/kube-scheduler:0.16.0"),
    Fact("chart.image.kube_scheduler_preemption", f"0.26.2 {_CHART}/values.yaml (kubeSchedulerPreemption)",
         since=v("0.18.0"), until=v("0.36.0"), value="determinedai/kube-scheduler:0.17.0",
         what="kubeSchedulerPreemption"),
    # -- task pods the master creates ----------------------------------------------------------------
    # What validatePodSpec (master/pkg/model/environment_config.go) refuses in a task_container_defaults pod spec:
    # the master does not start on one (and refuses an experiment's environment.pod_spec holding one). `value`: the
    # fields of the `determined-container` entry the master sets itself (JSON names). Read at 0.17.15 (which also
    # fixes securityContext) and at 0.26.2, 0.29.1, 0.32.1 and 0.38.1 (the same list at each).
    Fact("master.pod_spec.fixed_container_fields", "0.17.15 master/pkg/model/environment_config.go (validatePodSpec)",
         until=v("0.18.0"), value=("image", "command", "args", "workingDir", "ports", "livenessProbe",
                                   "readinessProbe", "startupProbe", "lifecycle", "terminationMessagePath",
                                   "terminationMessagePolicy", "imagePullPolicy", "securityContext")),
    Fact("master.pod_spec.fixed_container_fields", "0.38.1 master/pkg/model/environment_config.go (validatePodSpec)",
         since=v("0.18.0"), value=("image", "command", "args", "workingDir", "ports", "livenessProbe",
                                   "readinessProbe", "startupProbe", "lifecycle", "terminationMessagePath",
                                   "terminationMessagePolicy", "imagePullPolicy")),
    Fact("tasks.jobs", "0.34.0 master/internal/rm/kubernetesrm/jobs.go (batch/v1 Jobs instead of bare pods)",
         since=v("0.34.0")),
    Fact("scheduler.preemption", "0.36.0 master/internal/config/config.go (Validate: preemption rejected)",
         until=v("0.36.0")),
    # -- hyperparameter searches (schemas/expconf/v0/searcher-*.json at each tag) ------------------------
    Fact("searcher.max_concurrent_trials.default_16", "0.26.2 schemas/expconf/v0/searcher-random.json (default 16)",
         since=v("0.26.2"), value=16,
         note="0.17.15's schemas default it to 0 (no limit); the release that changed it lies between the two tags"),
    # -- task pods: what det-k8s reads when it schedules the master's pods (`det_k8s/scheduling/master.py`)
    #    and what the tests' master-shaped pods carry (`tests/support/master_pods.py`); facts section 6 --------
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
    Fact("tasks.preemption_label", "0.17.15 master/internal/resourcemanagers/kubernetes/preemptions.go "
         "(startPreemptionListener); 0.26.2 master/internal/rm/kubernetesrm/pods.go (startPreemptionListeners); "
         "v0.38.1 master/internal/rm/kubernetesrm/jobs.go (startPreemptionListeners, determinedPreemptionLabel)",
         value="determined-preemption",
         note="the master watches pods carrying this label (any value) in each namespace it manages and asks the "
              "task the pod's name leads to to release its resources: a trial checkpoints, stops and asks again"),
    Fact("tasks.preemption_lookup.pod_name", "0.17.15 master/internal/resourcemanagers/kubernetes/pods.go "
         "(receivePodPreemption); 0.26.2 and 0.32.1 master/internal/rm/kubernetesrm/pods.go (preemptionCallback: "
         "podNameToPodHandler[pod.Name])", until=v("0.34.0"),
         note="the labelled pod's own name finds its task: labelling the task's pods preempts it"),
    Fact("tasks.preemption_lookup.job_name", "v0.38.1 master/internal/rm/kubernetesrm/jobs.go (preemptionCallback: "
         "jobNameToJobHandler[pod.Name]); the same from 0.34.0, where Jobs came (checked at every tag to v0.38.1)",
         since=v("0.34.0"),
         note="the labelled pod's name is looked up among the master's Job names, so a labelled task pod "
              "(<job>-<5 chars>) is never heard ('received preemption command for unregistered pod', seen with the "
              "real 0.38.1 master); a pod named as the Job, carrying the label, in a namespace the master manages, is "
              "heard (det-k8s's preemption notice)"),
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

_BY_KEY: dict[str, tuple[Fact, ...]] = {}
for _fact in FACTS:
    _BY_KEY[_fact.key] = (*_BY_KEY.get(_fact.key, ()), _fact)
for _key, _rows in _BY_KEY.items():
    for _i, _a in enumerate(_rows):
        for _b in _rows[_i + 1:]:
            if (_a.until is None or _b.since is None or _a.until > _b.since) and (
                    _b.until is None or _a.since is None or _b.until > _a.since):
                raise ValueError(f"fact {_key}: rows overlap")


def fact(key: str) -> Fact:
    """The row for `key` (KeyError for a key the table does not have: a bug in the caller)."""
    rows = _BY_KEY[key]
    if len(rows) != 1:
        raise ValueError(f"fact {key} has one row per release range: use value_of or row")
    return rows[0]


def rows(key: str) -> tuple[Fact, ...]:
    """Every row of `key`, oldest range first."""
    return _BY_KEY[key]


def row(key: str, version: Version) -> Fact | None:
    """The row of `key` that holds for `version`, or None."""
    return next((r for r in _BY_KEY[key] if r.holds(version)), None)


def has(key: str, version: Version) -> bool:
    """True when fact `key` holds for `version`."""
    return row(key, version) is not None


def value_of(key: str, version: Version) -> Any:
    """The value fact `key` has at `version` (None when no row holds)."""
    found = row(key, version)
    return found.value if found is not None else None


def read_at(found: Fact) -> Version | None:
    """The release whose source a row was read from (the tag its `source` starts with), or None."""
    return parse_version(found.source.split(" ", 1)[0])


def exact(key: str, version: Version) -> bool:
    """True when the value of `key` at `version` was read at that very release; False when it is a neighbouring
    tag's, taken for the releases between (the default task images: each release's chart names its own builds)."""
    found = row(key, version)
    return found is not None and read_at(found) == version


def needs(key: str, version: Version) -> str | None:
    """Why `version` lacks fact `key`, for messages: "added in 0.18.2" or "removed in 0.23.0"; None if it has it."""
    if has(key, version):
        return None
    all_rows = _BY_KEY[key]
    later = [r.since for r in all_rows if r.since is not None and r.since > version]
    if later:
        return f"added in {min(later)}"
    earlier = [r.until for r in all_rows if r.until is not None and r.until <= version]
    return f"removed in {max(earlier)}" if earlier else "not in this release"


def missing(key: str, version: Version) -> tuple[str, str]:
    """(message, hint) for a setting `version` cannot have: the issue's shape,
    `Determined 0.17.15 has no prefix for gcs (added in 0.18.2)` / `set appVersion to 0.18.2 or later, or remove it`."""
    why = needs(key, version) or ""
    all_rows = _BY_KEY[key]
    what = next((r.what for r in all_rows if r.what), key)
    message = f"Determined {version} has no {what} ({why})"
    if why.startswith("added in "):
        hint = f"set appVersion to {why.removeprefix('added in ')} or later, or remove it"
    elif why.startswith("removed in "):
        hint = f"set appVersion below {why.removeprefix('removed in ')}, or remove it"
    else:
        hint = "remove it"
    return message, hint


def supported(version: Version) -> bool:
    """True for the releases det-k8s supports: 0.17.0 up to the newest release's line."""
    return version >= OLDEST and (version.major, version.minor) <= (NEWEST.major, NEWEST.minor)


SUPPORTED_RANGE = f"{OLDEST} to {NEWEST.line}"


def master_keys(version: Version) -> dict[str, Fact]:
    """The master.yaml keys (dotted paths) `version` parses, each with its row (type in `value`)."""
    return {row.key.removeprefix(MASTER_KEY): row for row in FACTS
            if row.key.startswith(MASTER_KEY) and row.holds(version)}
