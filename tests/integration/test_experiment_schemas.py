"""Determined's experiment-config schemas as the oracle for det-k8s's own table of their keys, release by release.

- The table (det_k8s/determined/expconf.py) against the real schema files of each tag read
  (../shared/determined/schemas/<tag>/): a walk of experiment.json finds every level the table lists and no
  other, with the same keys, and the same union choices (searcher names, checkpoint storage types).
- A sample of valid and invalid experiment files, run through Determined's own validator (tests/support/determined_oracle.py,
  the 0.17.15 wheel's validator and the schema files of each tag) and through det-k8s's parse_experiment at the
  same release: both accept the same files and refuse the same ones, at the same keys.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from det_k8s.determined import expconf, versions
from det_k8s.scheduling.experiments import DEVICE_TYPES, parse_experiment
from tests.conftest import EXAMPLES
from tests.integration.test_determined_schemas import SHARED, oracle
from tests.support.needs import need

V0 = "http://determined.ai/schemas/expconf/v0/"
# Levels the table does not check, as its module docstring says (free names, deprecated, det-k8s's own readers).
NOT_CHECKED = {"hyperparameters", "tensorboard_storage", "data_layer", "environment.image",
               "environment.environment_variables", "log_policies[].action"}


@pytest.fixture(autouse=True)
def _shared() -> None:
    need((SHARED / "schemas").is_dir(), f"{SHARED} is absent: Determined's schemas are read from there")


def schemas(tag: str) -> dict[str, Any]:
    out = {}
    for path in sorted((SHARED / "schemas" / tag).glob("*.json")):
        loaded = json.loads(path.read_text())
        out[loaded["$id"]] = loaded
    return out


def _resolve(schema: Any, by_id: dict[str, Any]) -> Any:
    while isinstance(schema, dict) and (schema.get("$ref") or schema.get("optionalRef")):
        schema = by_id[schema.get("$ref") or schema["optionalRef"]]
    return schema


def _union(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The items of the schema's union keyword, also inside `then` (0.26.2+) or `conditional.enforce` (0.17.15)."""
    for holder in (schema, schema.get("then") or {}, (schema.get("conditional") or {}).get("enforce") or {}):
        if "union" in holder:
            items: list[dict[str, Any]] = holder["union"]["items"]
            return items
    return []


def walk(tag: str) -> tuple[dict[str, set[str]], dict[tuple[str, str], set[str]]]:
    """Every level of experiment.json whose keys are fixed (an object with additionalProperties: false), and every
    union choice: what the master checks a key against, read from the schema files alone."""
    by_id = schemas(tag)
    levels: dict[str, set[str]] = {}
    choices: dict[tuple[str, str], set[str]] = {}

    def visit(path: str, schema: Any) -> None:
        schema = _resolve(schema, by_id)
        if path in NOT_CHECKED or not isinstance(schema, dict):
            return
        if schema.get("type") == "null":  # a key that must stay empty: no key at all under it
            levels[path] = set()
            return
        if isinstance(schema.get("items"), dict):
            visit(f"{path}[]", schema["items"])
            return
        props = schema.get("properties")
        if props and schema.get("additionalProperties") is False:
            levels[path] = set(props)
            for key, sub in props.items():
                visit(f"{path}.{key}" if path else key, sub)
        for item in _union(schema):
            union_key = item.get("unionKey", "")
            target = _resolve(item, by_id)
            if union_key.startswith("const:"):
                key, value = union_key.removeprefix("const:").split("=")
                choices.setdefault((path, key), set()).add(value)
                if target.get("additionalProperties") is False and target.get("properties"):
                    levels[f"{path}[{key}={value}]"] = set(target["properties"])
                    for name, sub in target["properties"].items():
                        if name != key:
                            visit(f"{path}.{name}", sub)
            elif union_key == "never" and target.get("additionalProperties") is False:
                levels[path] = set(target["properties"])  # the object form of a value that may also be a string

    visit("", by_id[V0 + "experiment.json"])
    return levels, choices


@pytest.mark.parametrize("tag", list(expconf.TAGS))
def test_the_key_table_is_the_releases_schema_level_by_level(tag):
    levels, choices = walk(tag)
    table = {level: set(keys) for level, keys in expconf.levels_at(tag).items()}
    assert sorted(table) == sorted(levels)  # the same levels: none missing, none extra
    assert {level: sorted(keys) for level, keys in table.items()} == {level: sorted(keys) for level, keys in
                                                                      levels.items()}
    assert {k: set(v) for k, v in expconf.choices_at(tag).items()} == choices
    assert len(levels) > 20 and "resources" in levels and ("searcher", "name") in choices  # the walk saw them


@pytest.mark.parametrize("tag", list(expconf.TAGS))
def test_the_device_keys_det_k8s_reads_are_the_schemas(tag):
    by_id = schemas(tag)
    for name in ("environment-image-map.json", "environment-variables-map.json"):
        assert set(by_id[V0 + name]["properties"]) == set(expconf.DEVICE_KEYS) == set(DEVICE_TYPES)


@pytest.mark.parametrize("tag", list(expconf.TAGS))
def test_the_version_tables_exact_rows_agree_with_each_tag(tag):
    """REFINED hands a key to the version table between tags; at the tags both must say the same."""
    levels, choices = expconf.levels_at(tag), expconf.choices_at(tag)
    version = expconf.TAGS[tag]
    for (level, key, choice), fact in expconf.REFINED.items():
        present = choice in choices.get((level, key), ()) if choice else key in levels.get(level, ())
        assert present is versions.has(fact, version), (level, key, choice, fact)


# -- det-k8s against Determined's validator, file by file ----------------------------------------------------

BASE: dict[str, Any] = {
    "name": "sample", "entrypoint": "python3 train.py", "hyperparameters": {"lr": 0.1, "layers": 4},
    "resources": {"slots_per_trial": 8, "priority": 50},
    "environment": {"image": {"cpu": "img-cpu", "gpu": "img-gpu"}, "environment_variables": ["NCCL_DEBUG=INFO"]},
    "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 100}},
}


def with_(**changes: Any) -> dict[str, Any]:
    """BASE with top-level keys replaced (a dotted key sets a nested one)."""
    config = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = config
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return config


SAMPLES: dict[str, dict[str, Any]] = {
    "base": BASE,
    "kitchen-sink": with_(
        description="all common sections", labels=["a"], max_restarts=2, records_per_epoch=1000,
        min_validation_period={"batches": 10}, min_checkpoint_period={"epochs": 1}, scheduling_unit=50,
        checkpoint_policy="best", perform_initial_validation=True, data={"anything": {"goes": 1}},
        bind_mounts=[{"host_path": "/data", "container_path": "/data", "read_only": True, "propagation": "rprivate"}],
        optimizations={"aggregation_frequency": 2, "mixed_precision": "O0", "average_training_metrics": True},
        profiling={"enabled": True, "begin_on_batch": 1}, reproducibility={"experiment_seed": 7},
        security={"kerberos": {"config_file": "/etc/krb5.conf"}},
        resources__devices=[{"host_path": "/dev/fuse", "container_path": "/dev/fuse", "mode": "mrw"}],
        resources__resource_pool="gpu", resources__shm_size=4096, resources__max_slots=16,
        environment__registry_auth={"username": "u", "password": "p", "serveraddress": "r"},
        environment__force_pull_image=True, environment__add_capabilities=["SYS_ADMIN"],
        environment__pod_spec={"kind": "Pod", "spec": {"nodeSelector": {"pool": "a"}}},
        searcher={"name": "adaptive_asha", "metric": "loss", "max_length": {"batches": 100}, "max_trials": 16,
                  "max_concurrent_trials": 4, "max_rungs": 4, "mode": "standard", "smaller_is_better": True},
        checkpoint_storage={"type": "s3", "bucket": "b", "prefix": "p/", "save_trial_best": 1}),
    "random-searcher": with_(searcher={"name": "random", "metric": "loss", "max_length": {"batches": 10},
                                       "max_trials": 4, "max_concurrent_trials": 2}),
    "grid-searcher": with_(searcher={"name": "grid", "metric": "loss", "max_length": {"batches": 10},
                                     "max_concurrent_trials": 2}),
    "a-searcher-without-name": with_(searcher={"metric": "loss", "max_trials": 3}),
    "shared-fs": with_(checkpoint_storage={"type": "shared_fs", "host_path": "/ckpt", "storage_path": "x"}),
    "gcs": with_(checkpoint_storage={"type": "gcs", "bucket": "b"}),
    "azure": with_(checkpoint_storage={"type": "azure", "container": "c", "connection_string": "x"}),
    "checkpoint-storage-without-type": with_(checkpoint_storage={"bucket": "b", "prefix": "p"}),
    # keys and choices only some releases have
    "gcs-prefix": with_(checkpoint_storage={"type": "gcs", "bucket": "b", "prefix": "p/"}),
    "hdfs": with_(checkpoint_storage={"type": "hdfs", "hdfs_url": "hdfs://nn:8020", "hdfs_path": "/c"}),
    "directory": with_(checkpoint_storage={"type": "directory", "container_path": "/ckpt"}),
    "workspace-project": with_(workspace="research", project="nlp"),
    "is-single-node": with_(resources__is_single_node=True),
    "proxy-ports": with_(environment__proxy_ports=[{"proxy_port": 8888, "proxy_tcp": False}]),
    "pbt-searcher": with_(searcher={"name": "pbt", "metric": "loss", "population_size": 4, "num_rounds": 2,
                                    "length_per_round": {"batches": 10},
                                    "replace_function": {"truncate_fraction": 0.5},
                                    "explore_function": {"resample_probability": 0.5, "perturb_factor": 0.2}}),
    "custom-searcher": with_(searcher={"name": "custom", "metric": "loss", "unit": "batches"}),
    "searcher-unit": with_(searcher={"name": "single", "metric": "loss", "max_length": {"batches": 1}}, slurm={},
                           pbs={"slots_per_node": 8}),
    "asha-max-time": with_(searcher={"name": "adaptive_asha", "metric": "loss", "max_time": 100,
                                     "time_metric": "batches", "max_trials": 4}),
    "internal-native": with_(internal={"native": {"command": ["python3", "train.py"]}}),
    "retention-and-log-policies": with_(retention_policy={"log_retention_days": 30},
                                        log_policies=[{"pattern": ".*OOM.*", "name": "oom"}],
                                        preemption_timeout=60),
    "webhooks": with_(integrations={"webhooks": {"webhook_id": [1], "webhook_name": ["a"]}}),
    # typos: refused by every release
    "typo-slot-per-trial": with_(resources__slot_per_trial=16),
    "typo-top-level": with_(searche={"name": "single"}),
    "typo-environment": with_(environment__force_pull=True),
    "typo-single-searcher-key": with_(searcher={"name": "single", "metric": "loss", "max_trials": 3}),
    "typo-searcher-name": with_(searcher={"name": "singel", "metric": "loss"}),
    "typo-s3": with_(checkpoint_storage={"type": "s3", "bucket": "b", "prefx": "p"}),
    "typo-storage-type": with_(checkpoint_storage={"type": "nfs", "bucket": "b"}),
    "typo-shared-fs-key-of-s3": with_(checkpoint_storage={"type": "s3", "bucket": "b", "host_path": "/x"}),
    "typo-bind-mount": with_(bind_mounts=[{"host_path": "/a", "container_path": "/b", "readonly": True}]),
    "typo-optimizations": with_(optimizations={"mixed_precison": "O1"}),
    "typo-registry-auth": with_(environment__registry_auth={"user": "u"}),
    "typo-kerberos": with_(security={"kerberos": {"config": "x"}}),
    "typo-profiling": with_(profiling={"enable": True}),
    "typo-reproducibility": with_(reproducibility={"seed": 1}),
    "typo-device": with_(resources__devices=[{"host_path": "/a", "container_path": "/b", "mod": "r"}]),
    "typo-webhooks": with_(integrations={"webhooks": {"webhook_nam": ["a"]}}),
}
# Determined refuses these for their values, which det-k8s does not check (only keys): never sampled for a verdict.
# ("is not of type 'null'" is a level that takes no key at all: internal from 0.26.2.)
_VALUE_ERRORS = re.compile(r"is not of type (?!'null')|is not one of|is not valid under|must specify|is less than")


def _oracle_paths(messages: list[str]) -> set[str]:
    """Where Determined's validator found an unknown key (`resources.slot_per_trial`), an unknown union choice
    (`searcher.name`), or an object matching no form (`resources.devices[0]`, a location only)."""
    paths = set()
    for message in messages:
        where, _, text = message.partition(": ")
        where = where.removeprefix("<config>").removeprefix(".")
        extra = re.search(r"Additional properties are not allowed \((.*) (?:was|were) unexpected\)", text)
        choice = re.search(r'is not an object where object\["(\w+)"\]', text)
        if extra:
            for key in re.findall(r"'([^']+)'", extra.group(1)):
                paths.add(f"{where}.{key}" if where else key)
        elif choice:
            paths.add(f"{where}.{choice.group(1)}")
        else:
            paths.add(where + "/")  # a location: det-k8s names a key under it
    return paths


@pytest.fixture(scope="module")
def verdicts() -> dict[str, list[list[str]]]:
    """Determined's validator on every sample, per tag (one subprocess per tag)."""
    need((SHARED / "schemas").is_dir(), f"{SHARED} is absent: Determined's schemas are read from there")
    return {tag: oracle(tag, "experiment.json", list(SAMPLES.values())) for tag in expconf.TAGS}


@pytest.mark.parametrize("tag", list(expconf.TAGS))
@pytest.mark.parametrize("name", list(SAMPLES))
def test_det_k8s_refuses_exactly_the_keys_determined_refuses(verdicts, tag, name):
    found = verdicts[tag][list(SAMPLES).index(name)]
    assert not [m for m in found if _VALUE_ERRORS.search(m)], f"sample {name} has a value error at {tag}: {found}"
    parsed = parse_experiment(yaml.safe_dump(SAMPLES[name]), f"{name}.yaml", version=expconf.TAGS[tag])
    ours = {p.path for p in parsed.errors}
    theirs = _oracle_paths(found)
    unmatched = {p for p in theirs if not (p in ours or (p.endswith("/") and any(
        o.startswith(p.removesuffix("/")) for o in ours)))}
    extra = {o for o in ours if not (o in theirs or any(t.endswith("/") and o.startswith(t.removesuffix("/"))
                                                        for t in theirs))}
    assert (unmatched, extra) == (set(), set()), (found, [p.render() for p in parsed.errors])
    assert not [w for w in parsed.warnings if "may not know" in w.message]  # exact at a tag


def test_the_sample_is_not_one_sided(verdicts):
    """Both verdicts at every tag, and files whose verdict changes with the release."""
    for tag in expconf.TAGS:
        refused = {name for name, found in zip(SAMPLES, verdicts[tag], strict=True) if found}
        assert 15 <= len(refused) <= len(SAMPLES) - 8, (tag, refused)
    changes = {name for i, name in enumerate(SAMPLES) if len({bool(verdicts[t][i]) for t in expconf.TAGS}) > 1}
    assert {"gcs-prefix", "hdfs", "directory", "workspace-project", "is-single-node", "pbt-searcher",
            "custom-searcher", "internal-native", "webhooks"} <= changes


@pytest.mark.parametrize("path", sorted((EXAMPLES / "experiments").glob("*.yaml")), ids=lambda p: p.name)
def test_the_example_experiments_pass_the_default_releases_own_validator(path):
    config = yaml.safe_load(Path(path).read_text())
    assert oracle("v0.38.1", "experiment.json", [config]) == [[]]
