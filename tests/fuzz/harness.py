"""The fuzz suite's harness: every case runs under a time bound and must end as the README documents.

The bound is a hang detector, not a speed assertion: a case that has not finished after
`CASE_SECONDS` (far beyond anything a correct run takes) is interrupted by SIGALRM and fails as a
hang. Every case must exit 0, 1 or 2 with no "internal error" and no traceback.
"""

from __future__ import annotations

import contextlib
import io
import signal
import sys
from collections.abc import Iterator
from typing import Any

import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

CASE_SECONDS = 60.0
DOCUMENTED_EXITS = (0, 1, 2)
FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])


class CaseHung(BaseException):  # a BaseException: det-k8s's own error mapping must not swallow it
    pass


@contextlib.contextmanager
def time_bound(seconds: float = CASE_SECONDS) -> Iterator[None]:
    def hung(signum: int, frame: Any) -> None:
        raise CaseHung(f"the case did not finish within {seconds:g}s: a hang")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check(result: Any, *, exits: tuple[int, ...] = DOCUMENTED_EXITS) -> Any:
    """The documented outcome: an exit code in `exits`, one-line errors, never an internal error or a traceback."""
    text = result.out + result.err
    assert result.code in exits, (result.code, text[-2000:])
    assert "internal error" not in text, text[-2000:]
    assert "Traceback (most recent call last)" not in text, text[-2000:]
    return result


def run(run_cli: Any, *args: Any, stdin: bytes | None = None, exits: tuple[int, ...] = DOCUMENTED_EXITS) -> Any:
    """One CLI case, in process, under the time bound (stdin from bytes when given)."""
    saved = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    try:
        with time_bound():
            return check(run_cli(*args), exits=exits)
    finally:
        sys.stdin = saved


# -- strategies ------------------------------------------------------------------------------

SPECIAL_TEXT = st.sampled_from(["", " ", "\n", "\x07", "\x1b[2J", "\ufeff", "../x", "a\nb", "-", "--all", "null", "~",
                                "0x1F", "1e36", "9" * 5000, "&a", "*a", "!!python/object:os.system", "{", "[", "\\",
                                "é", "\U0001F600", "\ud800"[:0], "%00", "%2F..%2F"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40), SPECIAL_TEXT)


def values(keys: st.SearchStrategy[str] | None = None, leaves: st.SearchStrategy[Any] = SCALARS) -> st.SearchStrategy:
    """Nested data of any shape, with keys from `keys` (known keys find the deep code paths)."""
    key = st.one_of(keys, st.text(max_size=12)) if keys is not None else st.text(max_size=12)
    return st.recursive(leaves, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(key, inner, max_size=5)), max_leaves=25)


DEPTHS = st.integers(90, 40_000)  # 30,000 levels crashed libyaml's composer


def nested_text(depth: st.SearchStrategy[int] = DEPTHS) -> st.SearchStrategy[str]:
    """Deep nesting in the syntaxes parsers recurse on: flow YAML/JSON, block YAML, --set keys."""
    return st.builds(lambda n, kind: {"flow": "a: " + "[" * n + "]" * n, "map": "{a: " * n + "1" + "}" * n,
                                      "json": '{"a":' * n + "1" + "}" * n,
                                      "block": "".join(" " * i + "k:\n" for i in range(min(n, 3000)))}[kind],
                     depth, st.sampled_from(["flow", "map", "json", "block"]))


def dump(data: Any, style: str) -> str:
    import json

    if style == "json":
        return json.dumps(data, default=str)
    try:
        return yaml.safe_dump(data, default_flow_style=style == "flow", allow_unicode=True)
    except yaml.YAMLError:
        return json.dumps(data, default=str)


def documents(keys: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[str]:
    """Text of a file: structured data dumped as YAML or JSON, deep nesting, or raw text."""
    return st.one_of(
        st.builds(dump, values(keys), st.sampled_from(["block", "flow", "json"])),
        nested_text(),
        st.text(max_size=300),
        st.builds(lambda a, b: a + b, st.builds(dump, values(keys), st.just("block")), SPECIAL_TEXT),
    )
