"""An experiment file's `workspace` and `resources.resource_pool` put it in the team queue that names them (issue 40,
item 3), as the master's pod labels `determined.ai/workspace` and `determined.ai/resource_pool` do for its pods; a
workspace that no queue names is said once."""

from __future__ import annotations

import json

import yaml

from det_k8s.scheduling.experiments import parse_experiment
from det_k8s.scheduling.groups import build_group, pod_manifests
from det_k8s.settings.loader import Document, load_settings
from tests.conftest import example

SNAPSHOTS = example("snapshots")
EXPERIMENT = """\
name: {name}
{workspace}resources:
  slots_per_trial: 12
{pool}entrypoint: python3 train.py
searcher: {{name: single, metric: loss, max_length: {{batches: 10}}}}
"""
QUEUES = """\
version: 1
defaultQueue: everyone
queues:
- name: nlp
  limit: {nvidia.com/gpu: 4}
  members: {workspaces: [nlp]}
- name: a100
  limit: {nvidia.com/gpu: 8}
  members: {resourcePools: [a100]}
- name: everyone
"""


def experiment_file(tmp_path, name: str, workspace: str | None = None, pool: str | None = None):
    path = tmp_path / f"{name}.yaml"
    path.write_text(EXPERIMENT.format(name=name, workspace=f"workspace: {workspace}\n" if workspace else "",
                                      pool=f"  resource_pool: {pool}\n" if pool else ""))
    return path


def plan(run_cli, tmp_path, *files):
    policy = tmp_path / "queues.yaml"
    policy.write_text(QUEUES)
    result = run_cli("plan", *files, "--snapshot", SNAPSHOTS / "twelve-gpus.yaml", "--policy", policy, "-o", "json")
    assert result.code == 0, result.err
    return {r["name"]: r for r in json.loads(result.out)["experiments"]}, result.err


def test_an_experiments_workspace_puts_it_in_the_queue_that_names_it(run_cli, tmp_path):
    records, _ = plan(run_cli, tmp_path, experiment_file(tmp_path, "bert", workspace="nlp"))
    assert records["bert"]["status"] == "queued"
    assert records["bert"]["reason"].startswith("queue nlp: 0 of 4 GPUs (its limit), the group needs 12")
    records, _ = plan(run_cli, tmp_path, experiment_file(tmp_path, "plain"))
    assert records["plain"]["status"] == "placed"  # in no queue's members: the default queue, no limit


def test_an_experiments_resource_pool_puts_it_in_the_queue_that_names_it(run_cli, tmp_path):
    records, _ = plan(run_cli, tmp_path, experiment_file(tmp_path, "big", pool="a100"))
    assert records["big"]["status"] == "queued"
    assert records["big"]["reason"].startswith("queue a100: 0 of 8 GPUs (its limit), the group needs 12")


def test_a_workspace_no_queue_names_is_said_once(run_cli, tmp_path):
    first = experiment_file(tmp_path, "one", workspace="vision")
    second = experiment_file(tmp_path, "two", workspace="vision")
    _, err = plan(run_cli, tmp_path, first, second)
    lines = [line for line in err.splitlines() if "'vision'" in line]
    assert lines == ["warning: workspace 'vision' is named by no team queue (members.workspaces): its experiments go "
                     "to the queue their user, resource pool, labels or namespace match, else 'everyone'"]
    _, err = plan(run_cli, tmp_path, experiment_file(tmp_path, "three", workspace="nlp"))
    assert "named by no team queue" not in err


def test_the_running_pods_carry_the_workspace_and_pool_so_the_queue_still_holds_them():
    text = EXPERIMENT.format(name="bert", workspace="workspace: nlp\n", pool="  resource_pool: a100\n")
    experiment = parse_experiment(text, "bert.yaml").get()
    assert (experiment.workspace, experiment.resource_pool) == ("nlp", "a100")
    settings = load_settings([Document("s.yaml", "maxSlotsPerPod: 4\n")]).settings()
    group = build_group(experiment, settings, group_id="g1", user="u", submitted_at="2026-12-07T12:00:00Z",
                        sequence=1)
    wanted = {"determined.ai/workspace": "nlp", "determined.ai/resource_pool": "a100"}
    assert all(wanted.items() <= dict(pod.labels).items() for pod in group.pods)
    manifests = pod_manifests(group, experiment, settings, {p.name: "gpu-0" for p in group.pods}, "default")
    assert all(wanted.items() <= m["metadata"]["labels"].items() for m in manifests)


def test_a_workspace_that_cannot_be_a_label_is_said_and_left_off_the_pods():
    text = EXPERIMENT.format(name="bert", workspace="workspace: NLP team\n", pool="")
    parsed = parse_experiment(text, "bert.yaml")
    assert not parsed.errors
    assert parsed.get().workspace is None
    assert any("workspace 'NLP team' cannot be a Kubernetes label value" in w.message for w in parsed.warnings)
    assert yaml.safe_load(text)["workspace"] == "NLP team"
