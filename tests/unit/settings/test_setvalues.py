"""helm's --set syntax: nesting, lists, indexes, escapes and typing, and clear errors."""

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from det_k8s.errors import UsageError
from det_k8s.settings.setvalues import apply_assignment, parse_set


def applied(*expressions: str, as_string: bool = False) -> dict:
    out: dict = {}
    for expression in expressions:
        for assignment in parse_set(expression, as_string=as_string):
            apply_assignment(out, assignment)
    return out


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("a=b", {"a": "b"}),
        ("a.b.c=d", {"a": {"b": {"c": "d"}}}),
        ("a=1,b=2", {"a": 1, "b": 2}),
        ("maxSlotsPerPod=4", {"maxSlotsPerPod": 4}),
        ("x=true", {"x": True}),
        ("x=FALSE", {"x": False}),
        ("x=null", {"x": None}),
        ("x=1.5", {"x": "1.5"}),
        ("x=007", {"x": "007"}),
        ("x=0", {"x": 0}),
        ("x=-3", {"x": -3}),
        ("x=", {"x": ""}),
        ("list={a,b,c}", {"list": ["a", "b", "c"]}),
        ("list={}", {"list": []}),
        ("list={1,true}", {"list": [1, True]}),
        ("s[0].port=80", {"s": [{"port": 80}]}),
        ("s[1]=x", {"s": [None, "x"]}),
        ("m[0][1]=x", {"m": [[None, "x"]]}),
        (r"a=one\,two", {"a": "one,two"}),
        (r"nodeSelector.kubernetes\.io/role=gpu", {"nodeSelector": {"kubernetes.io/role": "gpu"}}),
        ("url=http://x:9000/a=b", {"url": "http://x:9000/a=b"}),
        ("list={a,b},c=d", {"list": ["a", "b"], "c": "d"}),
    ],
)
def test_parses_like_helm(expression, expected):
    assert applied(expression) == expected


def test_set_string_keeps_every_value_a_string():
    assert applied("a=1,b=true,c=null", as_string=True) == {"a": "1", "b": "true", "c": "null"}


def test_later_assignments_replace_earlier_ones_and_merge_maps():
    assert applied("a.b=1", "a.c=2", "a.b=3") == {"a": {"b": 3, "c": 2}}


def test_a_scalar_is_replaced_by_a_map_when_a_subkey_is_set():
    assert applied("a=1", "a.b=2") == {"a": {"b": 2}}


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("", "empty expression"),
        ("novalue", "has no value"),
        ("a,b=c", "has no value"),
        ("=x", "empty key"),
        ("a..b=c", "empty key"),
        ("a[x]=1", "bad list index"),
        ("a[99999999]=1", "larger than"),
        ("a={x,y", "closing"),
        ("a={x}y", "after '}'"),
        ("[0]=1", "needs a key"),
        ("a[0]b=1", "expected"),
    ],
)
def test_malformed_expressions_are_usage_errors_naming_the_argument(expression, reason):
    with pytest.raises(UsageError) as info:
        parse_set(expression)
    assert reason in info.value.message
    assert repr(expression) in info.value.message
    assert info.value.exit_code == 2


keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC_-", min_size=1, max_size=8)
plain = st.text(alphabet="abcdefghij xyz:/@", min_size=1, max_size=12).filter(
    lambda s: s.lower() not in ("true", "false", "null"))


@given(st.lists(keys, min_size=1, max_size=4), plain)
def test_any_nested_key_round_trips(path, value):
    out = applied(".".join(path) + "=" + value)
    node = out
    for part in path:
        node = node[part]
    assert node == value


@given(st.text(max_size=30))
def test_never_crashes_on_arbitrary_text(text):
    with contextlib.suppress(UsageError):  # a malformed expression is a clean usage error, anything else fails
        applied(text)
