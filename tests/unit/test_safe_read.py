"""The one reading layer: sizes, depths, aliases, numbers, file kinds; every failure one InputError."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from det_k8s import safe_read
from det_k8s.errors import InputError
from det_k8s.settings.source import load_yaml_text


def nested(depth: int, flow: bool = True) -> str:
    return "a: " + "[" * depth + "]" * depth + "\n" if flow else "".join("  " * i + "k:\n" for i in range(depth)) + \
        "  " * depth + "k: 1\n"


@pytest.mark.parametrize("flow", [True, False])
def test_depth_is_refused_before_the_composer_runs(flow):
    safe_read.check_yaml(nested(safe_read.MAX_DEPTH - 1, flow), "ok.yaml")
    with pytest.raises(InputError, match=r"deep.yaml:\d+: nested more than 100 levels deep"):
        safe_read.check_yaml(nested(safe_read.MAX_DEPTH + 5, flow), "deep.yaml")


def test_thirty_thousand_levels_are_an_error_not_a_crash():
    # libyaml's composer recurses in C without a guard: this used to kill the interpreter (SIGSEGV)
    code = ("import sys; from det_k8s.settings.source import load_yaml_text\n"
            "try:\n    load_yaml_text('a: ' + '[' * 30000 + ']' * 30000, 'deep.yaml')\n"
            "except Exception as exc:\n    print(type(exc).__name__, exc)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("InputError deep.yaml:1: nested more than 100 levels deep")


def test_an_alias_counts_as_deep_as_what_it_names():
    half = safe_read.MAX_DEPTH // 2 + 5
    text = f"a: &x {'[' * half}1{']' * half}\nb: {'[' * half}*x{']' * half}\n"
    with pytest.raises(InputError, match=r"nested more than 100 levels deep \(through an alias\)"):
        safe_read.check_yaml(text, "alias.yaml")


def test_alias_expansion_is_bounded():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, "
              f"*a{i - 1}, *a{i - 1}]" for i in range(1, 9)]
    with pytest.raises(InputError, match="more than 1,000,000 values once YAML aliases are expanded"):
        safe_read.load_yaml("\n".join(lines), "bomb.yaml")


def test_a_control_character_is_located():
    with pytest.raises(InputError, match=r"^snap.yaml:3: the control character 0x07 is not allowed in YAML"):
        safe_read.load_yaml_all("kind: List\nitems: []\nx: \x07\n", "snap.yaml")


def test_a_number_python_will_not_convert_is_an_error_on_its_line():
    with pytest.raises(InputError, match=r"s.yaml:2: maxSlotsPerPod: a number with more than 4300 digits"):
        load_yaml_text("a: 1\nmaxSlotsPerPod: " + "9" * 5000 + "\n", "s.yaml")
    with pytest.raises(InputError, match="more than 4300 digits"):
        safe_read.load_json("[" + "9" * 5000 + "]", "x.json")


def test_json_depth_and_recursion_are_clear_errors():
    with pytest.raises(InputError, match="nested more than 100 levels deep"):
        safe_read.load_json("[" * 101 + "]" * 101, "entry.json")
    with pytest.raises(InputError, match="nested more than"):
        safe_read.load_json("[" * 100_000 + "]" * 100_000, "entry.json", max_depth=None, limit=None)
    assert safe_read.load_json("[" * 100 + "]" * 100, "ok.json") is not None
    with pytest.raises(InputError, match=r"^bad.json:2: not valid JSON"):
        safe_read.load_json('{\n"a": }', "bad.json")


def test_deeper_than_never_recurses():
    data: list = []
    for _ in range(50_000):
        data = [data]
    assert safe_read.deeper_than(data, 100) and not safe_read.deeper_than([[{"a": [1]}]], 4)


def test_text_size_is_bounded():
    with pytest.raises(InputError, match="larger than 1 MiB"):
        safe_read.load_json(" " * (2**20 + 1), "helm list -o json", limit=2**20)


def test_only_regular_files_are_read(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="a named pipe, not a regular file"):
        safe_read.read_file(fifo, "settings file")  # returns at once: never opened, so never blocks
    with pytest.raises(InputError, match="is a directory"):
        safe_read.read_file(tmp_path, "settings file")
    with pytest.raises(InputError, match="a device"):
        safe_read.read_file("/dev/zero", "settings file")
    with pytest.raises(InputError, match="cannot read the settings file: File name too long"):
        safe_read.read_file(tmp_path / ("a" * 300), "settings file")


def test_stdin_is_read_bounded(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"maxSlotsPerPod: 4\n")))
    assert safe_read.read_file("-", "settings file") == "maxSlotsPerPod: 4\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x" * 100)))
    with pytest.raises(InputError, match="stdin: larger than"):
        safe_read.read_file("-", "settings file", limit=10)


def _event_depth(text: str) -> int:
    import yaml

    depth = deepest = 0
    for event in yaml.parse(text, Loader=safe_read.Loader):
        if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            depth += 1
            deepest = max(deepest, depth)
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            depth -= 1
    return deepest


def test_the_shortcut_bound_holds_for_every_yaml_style():
    """check_yaml skips the events for a text whose line breaks and indicators cannot reach the limit."""
    import yaml
    from hypothesis import given, settings
    from hypothesis import strategies as st

    data = st.recursive(st.none() | st.integers() | st.text(max_size=5), lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=30)

    @settings(max_examples=300, deadline=None)
    @given(data, st.sampled_from([None, True, False]), st.integers(1, 8))
    def check(value, flow, indent):
        text = yaml.safe_dump(value, default_flow_style=flow, indent=max(indent, 2), width=10**6)
        assert _event_depth(text) <= 1 + sum(text.count(c) for c in "\n[{-?")

    check()
    assert _event_depth("- - - - - x") == 5 <= 1 + "- - - - - x".count("-")
