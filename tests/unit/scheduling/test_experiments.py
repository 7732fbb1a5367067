"""Experiment files: Determined's keys, strict where det-k8s reads them, problems with key and file:line."""

from __future__ import annotations

import pytest

from det_k8s.errors import ExperimentError
from det_k8s.scheduling.experiments import parse_experiment
from tests.conftest import EXAMPLES


def parse(text: str):
    return parse_experiment(text, "exp.yaml", default_name="exp")


def rendered(parsed) -> list[str]:
    return [p.render() for p in parsed.problems]


def test_a_full_determined_config_is_read_and_the_rest_ignored():
    parsed = parse("""
name: resnet
description: ignored
hyperparameters: {lr: 0.1}
searcher: {name: single, metric: loss, max_length: {epochs: 1}}
resources: {slots_per_trial: 8, priority: 70, resource_pool: gpu}
environment:
  image: {cpu: img-cpu, gpu: img-gpu}
  environment_variables: [NCCL_DEBUG=INFO, "EMPTY="]
  force_pull_image: true
  pod_spec: {kind: Pod, spec: {nodeSelector: {pool: a}}}
entrypoint: python3 train.py --lr "0.1 0.2"
""")
    assert parsed.problems == []
    experiment = parsed.get()
    assert (experiment.name, experiment.slots_per_trial, experiment.priority) == ("resnet", 8, 70)
    assert (experiment.image(gpu=False), experiment.image(gpu=True)) == ("img-cpu", "img-gpu")
    assert experiment.environment_variables(gpu=True) == (("NCCL_DEBUG", "INFO"), ("EMPTY", ""))
    assert experiment.entrypoint == ("python3", "train.py", "--lr", "0.1 0.2")
    assert experiment.force_pull_image and experiment.pod_spec == {
        "kind": "Pod",
        "spec": {"nodeSelector": {"pool": "a"}},
    }


def test_defaults_follow_determined():
    experiment = parse("hyperparameters: {}").get()
    assert (experiment.name, experiment.slots_per_trial, experiment.priority, experiment.entrypoint) == (
        "exp",
        1,
        50,
        (),
    )


def test_variables_as_a_mapping_or_per_device_type():
    plain = parse("environment: {environment_variables: {A: 1, B: x, C: true}}").get()
    assert plain.environment_variables(gpu=False) == (("A", "1"), ("B", "x"), ("C", "true"))
    typed = parse("environment: {environment_variables: {cpu: [A=1], cuda: [B=2]}}").get()
    assert (typed.environment_variables(gpu=False), typed.environment_variables(gpu=True)) == (
        (("A", "1"),),
        (("B", "2"),),
    )


def test_a_single_image_serves_both_device_types_and_a_list_entrypoint_is_kept():
    experiment = parse("environment: {image: one}\nentrypoint: [python3, -c, 'print(1)']").get()
    assert experiment.image(gpu=True) == experiment.image(gpu=False) == "one"
    assert experiment.entrypoint == ("python3", "-c", "print(1)")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "resources: {slots_per_trial: '8'}",
            "error: resources.slots_per_trial: expected an integer, found a string; "
            "write it without quotes (exp.yaml:1)",
        ),
        (
            "resources:\n  slots_per_trial: -1",
            "error: resources.slots_per_trial: must be at least 0, found -1 (exp.yaml:2)",
        ),
        (
            "resources: {priority: 100}",
            "error: resources.priority: must be between 1 and 99, found 100 (exp.yaml:1)",
        ),
        ("resources: 4", "error: resources: expected a mapping, found an integer (exp.yaml:1)"),
        ("name: 12", "error: name: expected a non-empty string, found an integer (exp.yaml:1)"),
        (
            "environment: {image: {tpu: x}}",
            "error: environment.image.tpu: unknown device type; use cpu and gpu (or cuda) (exp.yaml:1)",
        ),
        (
            "environment: {environment_variables: [NOVALUE]}",
            "error: environment.environment_variables[0]: expected "
            "KEY=VALUE, found 'NOVALUE'; for example NCCL_DEBUG=INFO (exp.yaml:1)",
        ),
        (
            "environment: {environment_variables: ['1BAD=x']}",
            "error: environment.environment_variables: '1BAD' is not a valid environment variable name; "
            "use letters, digits, '_', '-' and '.', not starting with a digit (exp.yaml:1)",
        ),
        (
            "environment: {pod_spec: {kind: Deployment}}",
            "error: environment.pod_spec.kind: must be Pod, found 'Deployment' (exp.yaml:1)",
        ),
        (
            "environment: {pod_spec: {spec: {containers: {}}}}",
            "error: environment.pod_spec.spec.containers: expected a list, found a mapping (exp.yaml:1)",
        ),
        (
            "environment: {force_pull_image: 'yes'}",
            "error: environment.force_pull_image: expected true or false, found a string (exp.yaml:1)",
        ),
        (
            "entrypoint: 'python3 \"unbalanced'",
            "error: entrypoint: cannot split into a command: No closing quotation; "
            "balance the quotes (exp.yaml:1)",
        ),
        (
            "entrypoint: {a: b}",
            "error: entrypoint: expected a command string or a list of strings, found a mapping (exp.yaml:1)",
        ),
        ("- a list", "error: exp.yaml: expected a mapping of experiment config keys, found a list; "
                     "an experiment file is YAML with keys such as name, resources and entrypoint"),
    ],
)
def test_wrong_types_in_keys_det_k8s_reads_are_errors_naming_key_and_line(text, expected):
    parsed = parse(text)
    assert rendered(parsed) == [expected]
    with pytest.raises(ExperimentError, match="experiment is invalid: 1 error"):
        parsed.get()


def test_typos_are_warnings_with_a_suggestion():
    parsed = parse("resources:\n  slots_per_trail: 8\nenviroment: {}\nentrypoint: model_def:MyTrial")
    assert rendered(parsed) == [
        "warning: enviroment: not a key of Determined's experiment config; ignored; "
        "did you mean environment? (exp.yaml:3)",
        "warning: resources.slots_per_trail: not a key of Determined's resources; ignored; did you mean "
        "resources.slots_per_trial? (exp.yaml:2)",
        "warning: entrypoint: 'model_def:MyTrial' looks like a Trial class; det-k8s runs entrypoint as the "
        "container command; use a launcher command, e.g. python3 train.py (exp.yaml:4)",
    ]
    assert parsed.get().slots_per_trial == 1


def test_every_error_is_reported_at_once():
    parsed = parse("resources: {slots_per_trial: x, priority: 0}\nentrypoint: 3")
    assert len(parsed.errors) == 3


def test_yaml_syntax_errors_name_the_line():
    from det_k8s.errors import InputError

    with pytest.raises(InputError, match=r"exp.yaml:2: YAML syntax error"):
        parse("name: a\n  slots_per_trial: 8\n")


@pytest.mark.parametrize("path", sorted((EXAMPLES / "experiments").glob("*.yaml")), ids=lambda p: p.name)
def test_the_example_experiments_are_clean(path):
    parsed = parse_experiment(path.read_text(), str(path), default_name=path.stem)
    assert parsed.problems == [] and parsed.get().name == path.stem
