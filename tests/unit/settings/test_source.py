"""YAML loading with line numbers: every key knows its file and line; syntax errors name both."""

import pytest

from det_k8s.errors import InputError
from det_k8s.settings.source import SourceMap, format_path, load_yaml_text, require_mapping


def test_records_the_line_of_every_key():
    loaded = load_yaml_text("a: 1\nb:\n  c: 2\n  d:\n    - x\n    - e: 3\n", "s.yaml")
    where = {format_path(p): str(loc) for p, loc in loaded.sources.locations.items()}
    assert where["a"] == "s.yaml:1"
    assert where["b.c"] == "s.yaml:3"
    assert where["b.d[1].e"] == "s.yaml:6"
    assert loaded.data == {"a": 1, "b": {"c": 2, "d": ["x", {"e": 3}]}}


def test_syntax_errors_name_file_and_line():
    with pytest.raises(InputError) as info:
        load_yaml_text("a: 1\nb: [1, 2\nc: 3\n", "bad.yaml")
    assert info.value.message.startswith("bad.yaml:")
    assert "YAML syntax error" in info.value.message


def test_duplicate_keys_are_reported_with_the_second_line():
    loaded = load_yaml_text("maxSlotsPerPod: 4\nmaxSlotsPerPod: 8\n", "dup.yaml")
    assert [(p.path, str(p.location)) for p in loaded.problems] == [("maxSlotsPerPod", "dup.yaml:2")]


def test_merge_keys_are_resolved():
    loaded = load_yaml_text("base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\n", "m.yaml")
    assert loaded.data["other"] == {"x": 1, "y": 2}


def test_non_mapping_top_level_is_an_input_error():
    with pytest.raises(InputError, match="expected a mapping"):
        require_mapping(load_yaml_text("- a\n- b\n", "list.yaml"), "list.yaml")
    assert require_mapping(load_yaml_text("", "empty.yaml"), "empty.yaml") == {}


def test_find_falls_back_to_the_nearest_ancestor():
    loaded = load_yaml_text("db:\n  name: x\n", "f.yaml")
    assert str(loaded.sources.find(("db", "password"))) == "f.yaml:1"
    assert SourceMap().find(("nothing",)) is None


def test_format_path_writes_indexes_in_brackets():
    assert format_path(("a", 0, "b", 2)) == "a[0].b[2]"


def test_an_alias_bomb_is_a_clean_input_error():
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]']
    for prev, name in zip("abcdefg", "bcdefgh", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 10) + "]")
    with pytest.raises(InputError, match="more than 1,000,000 values once YAML aliases are expanded"):
        load_yaml_text("\n".join(lines), "bomb.yaml")
