"""Property: no experiment file makes parsing or building a group crash; problems are reported instead."""

from __future__ import annotations

import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from det_k8s.errors import Unschedulable
from det_k8s.scheduling.experiments import parse_experiment
from det_k8s.scheduling.groups import build_group, headless_service_manifest, pod_manifests
from det_k8s.settings import Document, load_settings

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 200),
    st.floats(allow_nan=False, width=32),
    st.text(max_size=12),
    st.sampled_from(["A=1", "x:y", "python3 train.py", "'", "gpu", "cpu"]),
)
anything = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
resources = st.fixed_dictionaries(
    {},
    optional={
        "slots_per_trial": st.one_of(st.integers(-1, 40), anything),
        "priority": st.one_of(st.integers(0, 100), anything),
        "slots_per_trail": anything,
    },
)
environment = st.fixed_dictionaries(
    {},
    optional={
        "image": st.one_of(
            st.text(min_size=1, max_size=8),
            st.dictionaries(st.sampled_from(["cpu", "gpu", "cuda", "x"]), anything, max_size=3),
            anything,
        ),
        "environment_variables": st.one_of(
            st.lists(st.one_of(st.sampled_from(["A=1", "B=", "=x", "1A=2"]), anything), max_size=3),
            st.dictionaries(st.sampled_from(["cpu", "gpu", "K", "V"]), anything, max_size=3),
        ),
        "pod_spec": st.one_of(
            anything,
            st.fixed_dictionaries(
                {},
                optional={
                    "kind": st.sampled_from(["Pod", "Job"]),
                    "metadata": anything,
                    "spec": st.one_of(
                        anything,
                        st.fixed_dictionaries(
                            {},
                            optional={
                                "containers": st.one_of(
                                    anything,
                                    st.lists(
                                        st.fixed_dictionaries(
                                            {"name": st.sampled_from(["determined-container", "side"])},
                                            optional={
                                                "resources": st.fixed_dictionaries(
                                                    {},
                                                    optional={
                                                        "requests": st.dictionaries(
                                                            st.sampled_from(["cpu", "memory"]),
                                                            st.sampled_from(["1", "2Gi"]),
                                                        ),
                                                    },
                                                )
                                            },
                                        ),
                                        max_size=2,
                                    ),
                                ),
                                "tolerations": st.one_of(
                                    anything, st.just([{"key": "a", "operator": "Exists"}])
                                ),
                            },
                        ),
                    ),
                },
            ),
        ),
        "force_pull_image": anything,
    },
)
configs = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(st.text(max_size=70), anything),
        "resources": st.one_of(resources, anything),
        "environment": st.one_of(environment, anything),
        "entrypoint": anything,
        "hyperparameters": anything,
        "enviroment": anything,
    },
)
SETTINGS = load_settings([Document("s.yaml", "maxSlotsPerPod: 4")]).settings()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs)
def test_any_config_parses_to_an_experiment_or_problems_and_valid_ones_build(config):
    parsed = parse_experiment(yaml.safe_dump(config), "exp.yaml", default_name="exp")
    if parsed.errors:
        event("invalid")
        assert all(p.path or p.message for p in parsed.errors)
        return
    event("valid")
    experiment = parsed.get()
    try:
        group = build_group(
            experiment, SETTINGS, group_id="0123456789ab", user="u", submitted_at="", sequence=0
        )
    except Unschedulable as exc:
        assert "maxSlotsPerPod" in exc.message
        return
    placement = [(pod.name, "node") for pod in group.pods]
    assert len(pod_manifests(group, experiment, SETTINGS, placement, "ml")) == group.size
    assert headless_service_manifest(group, "ml")["spec"]["clusterIP"] == "None"
