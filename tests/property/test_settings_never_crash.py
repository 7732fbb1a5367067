"""Property: no settings file makes `validate` or `render` crash; valid settings always render and round-trip."""

from __future__ import annotations

import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from det_k8s.chart.render import normalise, render_chart_yaml, render_values
from det_k8s.errors import InputError, UsageError
from det_k8s.settings import Document, load_settings
from det_k8s.settings.schema import SCHEMA, Key, Kind

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-10, max_value=70000),
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
    st.text(max_size=12), st.sampled_from(["s3", "gcs", "azure", "shared_fs", "cpu", "gpu", "7910m", "8Gi",
                                           "http://minio:9000", "coscheduler", "elastic", "/checkpoints", "a:b"]),
)
anything = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                        max_leaves=8)


def value_for(key: Key, wild: bool = True) -> st.SearchStrategy:
    """Well-typed values for the key; with `wild`, sometimes anything at all."""
    typed = {
        Kind.STRING: st.text(alphabet="abc-./:0123456789", min_size=1, max_size=20),
        Kind.INTEGER: st.integers(min_value=-1, max_value=70000),
        Kind.BOOLEAN: st.booleans(),
        Kind.QUANTITY: st.sampled_from(["1", "500m", "8Gi", "7910m", 2, 0.5, "bad"]),
        Kind.CPU: st.sampled_from([7.5, "7910m", 1, 0, "x"]),
        Kind.ENUM: st.sampled_from([*key.choices, "other"]),
        Kind.OBJECT: st.dictionaries(st.sampled_from(["kind", "spec", "apiVersion"]), anything, max_size=3),
        Kind.LIST: st.lists(st.dictionaries(st.sampled_from(["pool_name", "pattern"]), scalars, max_size=2),
                            max_size=2),
        Kind.ANY: anything,
    }
    if key.kind is Kind.SECTION:
        return section(key.children, wild)
    if not wild:
        return st.one_of(typed[key.kind], st.none())
    return st.one_of(typed[key.kind], st.none(), anything)


def section(children, wild: bool = True) -> st.SearchStrategy:
    return st.fixed_dictionaries({}, optional={name: value_for(key, wild) for name, key in children.items()})


VALID_BASES = [
    {"maxSlotsPerPod": 4, "checkpointStorage": {"type": "s3", "bucket": "b"}},
    {"maxSlotsPerPod": 1, "slotType": "cpu", "slotResourceRequests": {"cpu": "7500m"},
     "checkpointStorage": {"type": "azure", "container": "c", "connection_string": "x"}},
    {"maxSlotsPerPod": 8, "useNodePortForMaster": True, "tlsSecret": "tls", "db": {"hostAddress": "10.0.0.1"},
     "checkpointStorage": {"type": "gcs", "bucket": "b"}},
]


def _overlay(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _overlay(out[key], value)
        elif value is not None:
            out[key] = value
    return out


def canonical(value):
    """For the chart, an empty section, a null and a missing key all mean "unset"."""
    if isinstance(value, dict):
        out = {k: canonical(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not None and v != {}}
    return value


near_valid = st.builds(_overlay, st.sampled_from(VALID_BASES), section(SCHEMA, wild=False))
settings_data = st.one_of(near_valid, near_valid, near_valid, section(SCHEMA),
                          st.dictionaries(st.text(max_size=10), anything, max_size=5))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(settings_data, st.lists(st.text(max_size=20), max_size=2))
def test_validate_and_render_never_crash(data, sets):
    text = yaml.safe_dump(data)
    try:
        loaded = load_settings([Document("fuzz.yaml", text)], sets)
    except UsageError:
        return  # a malformed --set: a clean usage error
    for problem in loaded.problems:
        assert problem.render().startswith(("error: ", "warning: "))
    if loaded.errors:
        return
    event("rendered")
    rendered = render_values(loaded.values, str(loaded.app_version))
    assert canonical(yaml.safe_load(rendered)) == canonical(normalise(loaded.values))
    assert yaml.safe_load(render_chart_yaml(loaded.settings().app_version))["appVersion"] == str(loaded.app_version)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_is_either_loaded_or_a_clean_input_error(text):
    try:
        loaded = load_settings([Document("fuzz.yaml", text)])
    except InputError as exc:
        assert exc.message.startswith("fuzz.yaml")
        return
    assert isinstance(loaded.problems, list)
