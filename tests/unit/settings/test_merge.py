"""helm's merge rules: maps merge, everything else is replaced, null deletes against defaults."""

from det_k8s.settings.merge import deep_merge, strip_nulls


def test_later_file_wins_and_maps_merge_key_by_key():
    base = {"db": {"name": "a", "user": "u"}, "list": [1, 2], "x": 1}
    over = {"db": {"name": "b"}, "list": [3], "y": 2}
    assert deep_merge(base, over) == {"db": {"name": "b", "user": "u"}, "list": [3], "x": 1, "y": 2}


def test_inputs_are_not_modified():
    base = {"a": {"b": 1}}
    over = {"a": {"c": 2}}
    deep_merge(base, over)
    assert base == {"a": {"b": 1}} and over == {"a": {"c": 2}}


def test_null_deletes_a_default_only_when_asked():
    defaults = {"db": {"hostAddress": None, "storageSize": "30Gi"}, "t": 1}
    assert deep_merge(defaults, {"t": None}) == {"db": {"hostAddress": None, "storageSize": "30Gi"}, "t": None}
    assert deep_merge(defaults, {"t": None, "db": {"storageSize": None}}, null_deletes=True) == {
        "db": {"hostAddress": None}}


def test_a_new_map_loses_its_nulls_when_nulls_delete():
    assert deep_merge({}, {"a": {"b": None, "c": 1}}, null_deletes=True) == {"a": {"c": 1}}
    assert strip_nulls({"a": {"b": None}, "c": None}) == {"a": {}}
