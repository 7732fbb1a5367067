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


def test_typos_are_errors_with_a_suggestion_naming_file_and_line():
    parsed = parse("resources:\n  slot_per_trial: 16\nenviroment: {}\nentrypoint: model_def:MyTrial")
    assert rendered(parsed) == [
        "error: resources.slot_per_trial: not a key of Determined 0.38.1's experiment config: its master refuses "
        "the experiment; did you mean resources.slots_per_trial? (exp.yaml:2)",
        "error: enviroment: not a key of Determined 0.38.1's experiment config: its master refuses the experiment; "
        "did you mean environment? (exp.yaml:3)",
        "warning: entrypoint: 'model_def:MyTrial' looks like a Trial class; det-k8s runs entrypoint as the "
        "container command; use a launcher command, e.g. python3 train.py (exp.yaml:4)",
    ]
    with pytest.raises(ExperimentError, match="2 errors"):
        parsed.get()  # never a 1-slot experiment


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


def at(text: str, version: str):
    from det_k8s.determined.versions import v

    return parse_experiment(text, "exp.yaml", default_name="exp", version=v(version))


@pytest.mark.parametrize(("text", "version", "expected"), [
    ("workspace: research", "0.17.15",
     "error: workspace: Determined 0.17.15 has no such key (the schemas of 0.26.2 and v0.38.1 have it): its master "
     "refuses the experiment; set appVersion to a release that has it, or remove it (exp.yaml:1)"),
    ("resources: {is_single_node: true}", "0.26.2",
     "error: resources.is_single_node: Determined 0.26.2 has no such key (the schema of v0.38.1 has it): its master "
     "refuses the experiment; set appVersion to a release that has it, or remove it (exp.yaml:1)"),
    ("checkpoint_storage: {type: gcs, bucket: b, prefix: p}", "0.17.15",
     "error: checkpoint_storage.prefix: Determined 0.17.15 has no prefix for gcs (added in 0.18.2); set appVersion "
     "to 0.18.2 or later, or remove it (exp.yaml:1)"),
    ("checkpoint_storage: {type: directory, container_path: /c}", "0.26.2",
     "error: checkpoint_storage.type: Determined 0.26.2 has no directory checkpoint storage (added in 0.26.3); set "
     "appVersion to 0.26.3 or later, or remove it (exp.yaml:1)"),
    ("searcher: {name: pbt, metric: loss}", "0.38.1",
     "error: searcher.name: Determined 0.38.1 has no searcher 'pbt' (the schema of 0.17.15 has it): its master "
     "refuses the experiment; set appVersion to a release that has it, or choose another (exp.yaml:1)"),
    ("searcher: {name: single, metric: loss,\n  max_trials: 4}", "0.38.1",
     "error: searcher.max_trials: not a key of the single searcher in Determined 0.38.1: its master refuses the "
     "experiment; it takes max_length, metric, name, smaller_is_better, source_checkpoint_uuid, source_trial_id "
     "(exp.yaml:2)"),
    ("searcher: {name: adaptive_ashaa}", "0.38.1",
     "error: searcher.name: Determined 0.38.1 has no searcher 'adaptive_ashaa': its master refuses the experiment; "
     "did you mean adaptive_asha? (exp.yaml:1)"),
    ("bind_mounts:\n- {host_path: /a, container_path: /b}\n- {host_path: /a, container_pth: /b}", "0.38.1",
     "error: bind_mounts[1].container_pth: not a key of Determined 0.38.1's experiment config: its master refuses "
     "the experiment; did you mean bind_mounts[1].container_path? (exp.yaml:3)"),
    ("resources: {is_single_node: true}", "0.31.0",
     "warning: resources.is_single_node: Determined 0.31.0 may not know this key: the schema of v0.38.1 has it, the "
     "schema of 0.26.2 has not, and the master refuses what it does not know; set appVersion to the release you "
     "run, or check its documentation (exp.yaml:1)"),
])
def test_keys_are_checked_against_the_releases_schema(text, version, expected):
    assert rendered(at(text, version)) == [expected]


def test_keys_of_free_form_sections_and_of_levels_not_listed_are_never_flagged():
    text = ("hyperparameters: {anything: {type: const, val: 1}, nested: {deep: 1}}\ndata: {my_key: 1}\n"
            "tensorboard_storage: {whatever: 1}\nenvironment: {pod_spec: {metadata: {labels: {a: b}}}}")
    assert at(text, "0.38.1").problems == []


def test_a_plain_mapping_of_variables_is_read_but_warned_as_det_k8s_only():
    parsed = parse("environment: {environment_variables: {NCCL_DEBUG: INFO}}")
    assert parsed.get().environment_variables(gpu=True) == (("NCCL_DEBUG", "INFO"),)
    assert rendered(parsed) == [
        "warning: environment.environment_variables: a mapping of names to values is det-k8s's own form: "
        "Determined's master refuses it (environment-variables.json takes a list, or a mapping of cpu, cuda and rocm "
        "to lists); write a list of KEY=VALUE, e.g. [NCCL_DEBUG=INFO], so the file also runs with det experiment "
        "create (exp.yaml:1)"]


def test_max_slots_below_slots_per_trial_is_an_error_since_no_trial_ever_starts():
    # The master's resource manager never starts a trial that alone exceeds the experiment's resources.max_slots; it
    # stays queued for ever. det-k8s planned it as placed.
    parsed = parse("name: e\nresources:\n  slots_per_trial: 4\n  max_slots: 2\n")
    assert rendered(parsed) == [
        "error: resources.max_slots: 2 is below resources.slots_per_trial 4: the Determined master never starts a "
        "trial of this experiment (it keeps an experiment's running trials within max_slots); raise max_slots to at "
        "least 4, or remove it (exp.yaml:4)"]


def test_a_pod_spec_label_the_master_acts_on_is_an_error():
    # det-k8s's pods never carry a label the Determined master acts on: the 0.17 master deletes every pod labelled
    # `determined` when it starts (a helm upgrade killed the experiment), and one labelled determined-preemption is
    # asked to give its resources back. An experiment's pod_spec put them on det-k8s's pods unchecked.
    parsed = parse("name: e\nenvironment:\n  pod_spec:\n    metadata:\n      labels:\n        determined: mine\n"
                   "        team: a\n")
    assert rendered(parsed) == [
        "error: environment.pod_spec.metadata.labels.determined: a label the Determined master acts on (it deletes "
        "pods labelled determined when it starts, preempts those labelled determined-preemption, counts "
        "determined-system pods as its own); det-k8s's pods must not carry it; remove it, or use another label "
        "(exp.yaml:6)"]
