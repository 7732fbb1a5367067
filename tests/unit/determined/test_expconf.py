"""The experiment-config key table: which tags a release is read as, keys between tags, the version table's say.

(The table itself is proven against Determined's schema files in tests/integration/test_experiment_schemas.py.)
"""

from __future__ import annotations

import pytest

from det_k8s.determined import expconf
from det_k8s.determined.versions import v


@pytest.mark.parametrize(("version", "basis"), [
    ("0.17.0", ("0.17.15",)), ("0.17.15", ("0.17.15",)), ("0.20.3", ("0.17.15", "0.26.2")),
    ("0.26.0", ("0.26.2",)), ("0.31.1", ("0.26.2", "v0.38.1")), ("0.38.0", ("v0.38.1",)), ("0.38.9", ("v0.38.1",)),
])
def test_a_release_is_read_as_its_lines_tag_or_the_two_tags_around_it(version, basis):
    assert expconf.release(v(version)).basis == basis


def test_between_tags_a_key_only_one_tag_has_may_exist():
    between = expconf.release(v("0.31.1")).keys("resources")
    assert between is not None
    assert "slots_per_trial" in between.known and between.maybe == {"is_single_node"}
    assert "is_single_node" in between  # neither an error nor silently known
    assert expconf.release(v("0.26.2")).keys("resources").maybe == frozenset()


def test_a_level_the_release_lacks_is_not_checked_and_one_of_one_neighbour_is_that_neighbours():
    assert expconf.release(v("0.26.2")).keys("integrations") is None
    assert expconf.release(v("0.31.1")).keys("integrations") == expconf.Verdict(frozenset({"pachyderm", "webhooks"}))


def test_the_version_table_decides_the_keys_it_knows_exactly():
    """gcs prefix since 0.18.2, s3 prefix since 0.17.3, hdfs until 0.23.0, directory since 0.26.3."""
    assert "prefix" not in expconf.release(v("0.18.1")).keys("checkpoint_storage[type=gcs]")
    assert "prefix" in expconf.release(v("0.18.2")).keys("checkpoint_storage[type=gcs]").known
    assert "prefix" not in expconf.release(v("0.17.2")).keys("checkpoint_storage[type=s3]")
    storage = {version: expconf.release(v(version)).choices("checkpoint_storage") for version in
               ("0.22.9", "0.23.0", "0.26.2", "0.26.3")}
    assert {version: ("hdfs" in found[1].known, "directory" in found[1].known, found[1].maybe)
            for version, found in storage.items() if found} == {
        "0.22.9": (True, False, frozenset()), "0.23.0": (False, False, frozenset()),
        "0.26.2": (False, False, frozenset()), "0.26.3": (False, True, frozenset())}
    assert expconf.release(v("0.20.0")).refinement("checkpoint_storage[type=gcs]", "prefix") is None
    assert expconf.release(v("0.18.0")).refinement("checkpoint_storage[type=gcs]", "prefix") == (
        "Determined 0.18.0 has no prefix for gcs (added in 0.18.2)", "set appVersion to 0.18.2 or later, or remove it")


def test_union_choices_and_where_a_key_lives():
    release = expconf.release(v("0.26.2"))
    key, names = release.choices("searcher")
    assert key == "name" and "custom" in names.known and "pbt" not in names
    assert release.elsewhere("searcher", "name", "pbt") == ("0.17.15",)
    assert release.elsewhere("", "workspace") == ("0.26.2", "v0.38.1")
    assert release.choices("resources") is None


def test_every_row_names_tags_read_and_a_schema_file():
    for row in (*expconf.KEYS, *expconf.CHOICES):
        assert row.tags and set(row.tags) <= set(expconf.TAGS), row
        assert row.source.startswith("schemas/expconf/v0/") and ".json" in row.source, row
