"""Determined's experiment-config keys, release by release: which keys each level of an experiment file may hold.

Determined's master validates an experiment against its JSON schemas (`schemas/expconf/v0/*.json` in
determined-ai/determined). Nearly every object in them has `additionalProperties: false`, so a key the release
does not know makes the master refuse the experiment. det-k8s does not ship those files: this is its own compact
listing of their key names, read at the tags 0.17.15, 0.26.2 and v0.38.1 (each row names the tags and the schema
file). `tests/integration/test_experiment_schemas.py` walks the real schemas of each tag and proves this table
equal to them, level by level: the same levels, the same keys, the same union choices.

Levels: `""` is the top level; `resources` or `environment.registry_auth` a nested object; `bind_mounts[]` the
objects of a list; `searcher[name=single]` the keys of one variant of a union (Determined picks the variant by
the value of `name`; without that key only the level `searcher` applies, which lists every variant's keys).
A union's choices (the searcher names, the checkpoint storage types) are rows of `CHOICES`; a choice without a
level of its own (the `custom` searcher) takes any key its union's level allows.

Not listed, because their keys are not fixed names or are not checked here: `hyperparameters` (the names are the
user's), `data` (free-form), `tensorboard_storage` and `data_layer` (deprecated, ignored by the master),
`environment.image` and `environment.environment_variables` (det-k8s's own readers check their device keys,
`DEVICE_KEYS`), `environment.pod_spec` (a Kubernetes Pod), lengths such as `min_validation_period`, and
`log_policies[].action`.

Releases between the tags read: a key both neighbouring tags have is known, a key neither has is not, and a key
only one of them has may or may not exist (`Release.keys` returns it as "maybe"). A release of a line that was
read (0.17.x, 0.26.x, 0.38.x) is taken as that tag. Where the version table (`versions.py`) knows the exact
release a key came or went (`REFINED`: s3 and gcs `prefix`, `hdfs`, `directory`), that row decides instead.

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import versions
from .versions import Version, v

TAGS: dict[str, Version] = {"0.17.15": v("0.17.15"), "0.26.2": v("0.26.2"), "v0.38.1": v("0.38.1")}
_ALL = ("0.17.15", "0.26.2", "v0.38.1")
_LATER = ("0.26.2", "v0.38.1")
_FIRST = ("0.17.15",)
_NEWEST = ("v0.38.1",)
_V0 = "schemas/expconf/v0/"


@dataclass(frozen=True, slots=True)
class Keys:
    """Keys `level` holds at each tag of `tags`, read from the schema file `source` at those tags."""

    level: str
    tags: tuple[str, ...]
    keys: frozenset[str]
    source: str


@dataclass(frozen=True, slots=True)
class Choices:
    """Values of the union key `key` at `level` (a searcher's `name`) that the release knows, per tag."""

    level: str
    key: str
    tags: tuple[str, ...]
    values: frozenset[str]
    source: str


def _k(level: str, tags: tuple[str, ...], source: str, keys: str) -> Keys:
    return Keys(level, tags, frozenset(keys.split()), _V0 + source)


def _c(level: str, key: str, tags: tuple[str, ...], source: str, values: str) -> Choices:
    return Choices(level, key, tags, frozenset(values.split()), _V0 + source)


_SEARCHER_COMMON = "max_length metric name smaller_is_better source_checkpoint_uuid source_trial_id"
_SAVE = "save_experiment_best save_trial_best save_trial_latest type"

KEYS: tuple[Keys, ...] = (
    _k("", _ALL, "experiment.json", "bind_mounts checkpoint_policy checkpoint_storage data data_layer debug "
       "description entrypoint environment hyperparameters internal labels max_restarts min_checkpoint_period "
       "min_validation_period name optimizations perform_initial_validation profiling records_per_epoch "
       "reproducibility resources scheduling_unit searcher security tensorboard_storage"),
    _k("", _LATER, "experiment.json", "pbs project slurm workspace"),
    _k("", _NEWEST, "experiment.json", "integrations log_policies preemption_timeout retention_policy"),
    _k("resources", _ALL, "resources.json", "agent_label devices max_slots native_parallel priority resource_pool "
       "shm_size slots slots_per_trial weight"),
    _k("resources", _NEWEST, "resources.json", "is_single_node"),
    _k("resources.devices[]", _ALL, "device.json (the object form of devices.json's items)",
       "container_path host_path mode"),
    _k("environment", _ALL, "environment.json", "add_capabilities drop_capabilities environment_variables "
       "force_pull_image image pod_spec ports registry_auth"),
    _k("environment", _LATER, "environment.json", "proxy_ports"),
    _k("environment.registry_auth", _ALL, "registry-auth.json",
       "auth email identitytoken password registrytoken serveraddress username"),
    _k("environment.proxy_ports[]", _LATER, "proxy-port.json",
       "default_service_id proxy_port proxy_tcp unauthenticated"),
    _k("bind_mounts[]", _ALL, "bind-mount.json", "container_path host_path propagation read_only"),
    _k("optimizations", _ALL, "optimizations.json", "aggregation_frequency auto_tune_tensor_fusion "
       "average_aggregated_gradients average_training_metrics grad_updates_size_file gradient_compression "
       "mixed_precision tensor_fusion_cycle_time tensor_fusion_threshold"),
    _k("profiling", _ALL, "profiling.json", "begin_on_batch enabled end_after_batch sync_timings"),
    _k("reproducibility", _ALL, "reproducibility.json", "experiment_seed"),
    _k("security", _ALL, "security.json", "kerberos"),
    _k("security.kerberos", _ALL, "kerberos.json", "config_file"),
    _k("internal", _FIRST, "internal.json", "native"),
    _k("internal", _LATER, "experiment.json (internal: type null, so no key)", ""),
    _k("internal.native", _FIRST, "native.json", "command"),
    _k("pbs", _LATER, "hpc-cluster-pbs.json", "pbsbatch_args slots_per_node"),
    _k("slurm", _LATER, "hpc-cluster-slurm.json", "gpu_type sbatch_args slots_per_node"),
    _k("retention_policy", _NEWEST, "retention-policy.json", "log_retention_days"),
    _k("log_policies[]", _NEWEST, "log-policy.json", "action name pattern"),
    _k("integrations", _NEWEST, "integrations.json", "pachyderm webhooks"),
    _k("integrations.webhooks", _NEWEST, "webhooks.json", "exclude webhook_id webhook_name"),
    _k("integrations.pachyderm", _NEWEST, "pachyderm.json", "dataset pachd proxy"),
    _k("integrations.pachyderm.dataset", _NEWEST, "pachyderm-dataset.json", "branch commit project repo token"),
    _k("integrations.pachyderm.pachd", _NEWEST, "pachyderm-pachd.json", "host port"),
    _k("integrations.pachyderm.proxy", _NEWEST, "pachyderm-proxy.json", "host port scheme"),
    # the searcher: searcher.json lists every variant's keys; the variant named by `name` is stricter
    _k("searcher", _ALL, "searcher.json", "bracket_rungs budget divisor max_concurrent_trials max_length max_rungs "
       "max_trials metric mode name num_rungs smaller_is_better source_checkpoint_uuid source_trial_id stop_once "
       "train_stragglers"),
    _k("searcher", _FIRST, "searcher.json", "explore_function length_per_round num_rounds population_size "
       "replace_function"),
    _k("searcher", _LATER, "searcher.json", "unit"),
    _k("searcher", _NEWEST, "searcher.json", "max_time time_metric"),
    _k("searcher[name=single]", _ALL, "searcher-single.json", _SEARCHER_COMMON),
    _k("searcher[name=random]", _ALL, "searcher-random.json", _SEARCHER_COMMON + " max_concurrent_trials max_trials"),
    _k("searcher[name=grid]", _ALL, "searcher-grid.json", _SEARCHER_COMMON + " max_concurrent_trials"),
    _k("searcher[name=adaptive_asha]", _ALL, "searcher-adaptive-asha.json", _SEARCHER_COMMON + " bracket_rungs "
       "divisor max_concurrent_trials max_rungs max_trials mode stop_once"),
    _k("searcher[name=adaptive_asha]", _NEWEST, "searcher-adaptive-asha.json", "max_time time_metric"),
    _k("searcher[name=async_halving]", _ALL, "searcher-async-halving.json", _SEARCHER_COMMON + " divisor "
       "max_concurrent_trials max_trials num_rungs stop_once"),
    _k("searcher[name=async_halving]", _NEWEST, "searcher-async-halving.json", "max_time time_metric"),
    _k("searcher[name=adaptive]", _ALL, "searcher-adaptive.json", _SEARCHER_COMMON + " bracket_rungs budget divisor "
       "max_rungs mode train_stragglers"),
    _k("searcher[name=adaptive_simple]", _ALL, "searcher-adaptive-simple.json", _SEARCHER_COMMON + " divisor "
       "max_rungs max_trials mode"),
    _k("searcher[name=sync_halving]", _ALL, "searcher-sync-halving.json", _SEARCHER_COMMON + " budget divisor "
       "num_rungs train_stragglers"),
    _k("searcher[name=pbt]", _FIRST, "searcher-pbt.json", "explore_function length_per_round metric name num_rounds "
       "population_size replace_function smaller_is_better source_checkpoint_uuid source_trial_id"),
    _k("searcher.explore_function", _FIRST, "searcher-pbt.json", "perturb_factor resample_probability"),
    # checkpoint storage: checkpoint-storage.json lists every type's keys; the variant named by `type` is stricter
    _k("checkpoint_storage", _ALL, "checkpoint-storage.json", "access_key account_url bucket checkpoint_path "
       "connection_string container container_path credential endpoint_url host_path prefix propagation "
       "save_experiment_best save_trial_best save_trial_latest secret_key storage_path tensorboard_path type user"),
    _k("checkpoint_storage", _FIRST, "checkpoint-storage.json", "hdfs_path hdfs_url"),
    _k("checkpoint_storage[type=shared_fs]", _ALL, "shared-fs.json", _SAVE + " checkpoint_path container_path "
       "host_path propagation storage_path tensorboard_path"),
    _k("checkpoint_storage[type=s3]", _ALL, "s3.json", _SAVE + " access_key bucket endpoint_url prefix secret_key"),
    _k("checkpoint_storage[type=gcs]", _ALL, "gcs.json", _SAVE + " bucket"),
    _k("checkpoint_storage[type=gcs]", _LATER, "gcs.json", "prefix"),
    _k("checkpoint_storage[type=azure]", _ALL, "azure.json", _SAVE + " account_url connection_string container "
       "credential"),
    _k("checkpoint_storage[type=hdfs]", _FIRST, "hdfs.json", _SAVE + " hdfs_path hdfs_url user"),
    _k("checkpoint_storage[type=directory]", _NEWEST, "directory.json", _SAVE + " container_path"),
)

CHOICES: tuple[Choices, ...] = (
    _c("searcher", "name", _ALL, "searcher.json", "single random grid adaptive_asha async_halving adaptive "
       "adaptive_simple sync_halving"),
    _c("searcher", "name", _FIRST, "searcher.json", "pbt"),
    _c("searcher", "name", _LATER, "searcher.json (searcher-custom.json allows any key)", "custom"),
    _c("checkpoint_storage", "type", _ALL, "checkpoint-storage.json", "shared_fs s3 gcs azure"),
    _c("checkpoint_storage", "type", _FIRST, "checkpoint-storage.json", "hdfs"),
    _c("checkpoint_storage", "type", _NEWEST, "checkpoint-storage.json", "directory"),
)

# The keys of environment.image and environment.environment_variables when they are mappings, at every tag
# (environment-image-map.json, environment-variables-map.json): det-k8s reads both itself.
DEVICE_KEYS = frozenset({"cpu", "cuda", "gpu", "rocm"})

# (level, key, choice) whose release the version table knows exactly: that row decides between the tags read.
# A choice of "" means the key itself; otherwise the key is the union key and the choice one of its values.
REFINED: dict[tuple[str, str, str], str] = {
    ("checkpoint_storage[type=s3]", "prefix", ""): "checkpoint_storage.s3.prefix",
    ("checkpoint_storage[type=gcs]", "prefix", ""): "checkpoint_storage.gcs.prefix",
    ("checkpoint_storage", "type", "hdfs"): "checkpoint_storage.hdfs",
    ("checkpoint_storage", "hdfs_path", ""): "checkpoint_storage.hdfs",
    ("checkpoint_storage", "hdfs_url", ""): "checkpoint_storage.hdfs",
    ("checkpoint_storage", "type", "directory"): "checkpoint_storage.directory",
}


def _at(tag: str) -> tuple[dict[str, frozenset[str]], dict[tuple[str, str], frozenset[str]]]:
    levels: dict[str, frozenset[str]] = {}
    for row in KEYS:
        if tag in row.tags:
            levels[row.level] = levels.get(row.level, frozenset()) | row.keys
    choices: dict[tuple[str, str], frozenset[str]] = {}
    for choice in CHOICES:
        if tag in choice.tags:
            choices[(choice.level, choice.key)] = choices.get((choice.level, choice.key), frozenset()) | choice.values
    return levels, choices


_TABLES = {tag: _at(tag) for tag in TAGS}


def levels_at(tag: str) -> dict[str, frozenset[str]]:
    """Every level the schema of `tag` has in this table, with its keys."""
    return dict(_TABLES[tag][0])


def choices_at(tag: str) -> dict[tuple[str, str], frozenset[str]]:
    """Every union of `tag`: (level, key) -> the values its schema accepts."""
    return dict(_TABLES[tag][1])


@dataclass(frozen=True, slots=True)
class Verdict:
    """Known keys (the release has them), maybe keys (only one neighbouring tag has them) of one level."""

    known: frozenset[str]
    maybe: frozenset[str] = frozenset()

    def __contains__(self, key: object) -> bool:
        return key in self.known or key in self.maybe


@dataclass(frozen=True, slots=True)
class Release:
    """What an experiment config of Determined `version` may hold, read as the tags in `basis`."""

    version: Version
    basis: tuple[str, ...]  # one tag (the release's line was read) or the two tags around it

    def keys(self, level: str) -> Verdict | None:
        """The keys of `level`; None when the release has no such level in this table (not checked)."""
        found = [keys for tag in self.basis if (keys := _TABLES[tag][0].get(level)) is not None]
        return self._verdict(level, "", found) if found else None

    def choices(self, level: str) -> tuple[str, Verdict] | None:
        """(the union key, the values it may take) of `level`, or None when `level` is not a union."""
        keys = sorted({key for tag in self.basis for (lvl, key) in _TABLES[tag][1] if lvl == level})
        if not keys:
            return None
        found = [values for tag in self.basis if (values := _TABLES[tag][1].get((level, keys[0]))) is not None]
        return keys[0], self._verdict(level, keys[0], found)

    def _verdict(self, level: str, key: str, found: list[frozenset[str]]) -> Verdict:
        """Known: in every tag of the basis; maybe: in some. Then the version table's exact rows decide theirs."""
        known = set(frozenset.intersection(*found))
        maybe = set(frozenset.union(*found)) - known
        for (fact_level, fact_key, choice), fact in REFINED.items():
            item = choice if key else fact_key
            if fact_level != level or (key and fact_key != key) or (not key and choice):
                continue
            maybe.discard(item)
            (known.add if versions.has(fact, self.version) else known.discard)(item)
        return Verdict(frozenset(known), frozenset(maybe))

    def refinement(self, level: str, key: str, choice: str = "") -> tuple[str, str] | None:
        """(message, hint) from the version table when it knows the release `key` (or the union key's value
        `choice`) came or went in and this release lacks it; None otherwise."""
        fact = REFINED.get((level, key, choice))
        if fact is None or versions.has(fact, self.version):
            return None
        return versions.missing(fact, self.version)

    def elsewhere(self, level: str, key: str, choice: str = "") -> tuple[str, ...]:
        """The tags read whose schema has `key` at `level` (or `choice` among the union key's values)."""
        if choice:
            return tuple(tag for tag in TAGS if choice in _TABLES[tag][1].get((level, key), frozenset()))
        return tuple(tag for tag in TAGS if key in _TABLES[tag][0].get(level, frozenset()))


def release(version: Version) -> Release:
    """The experiment-config keys of Determined `version` (the tag of its line, or the two tags around it)."""
    ordered = sorted(TAGS.items(), key=lambda item: item[1])
    for tag, known in ordered:
        if (known.major, known.minor) == (version.major, version.minor):
            return Release(version, (tag,))
    below = [tag for tag, known in ordered if known < version]
    above = [tag for tag, known in ordered if known > version]
    if below and above:
        return Release(version, (below[-1], above[0]))
    return Release(version, (below[-1] if below else above[0],))

