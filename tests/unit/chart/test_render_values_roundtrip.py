"""values.yaml keeps every string as it was given, whatever characters it holds."""

from __future__ import annotations

import yaml

from det_k8s.chart.render import render_values


def test_unicode_line_breaks_survive_rendering():
    # Found by tests/property/test_settings_never_crash.py: PyYAML wrote NEL (U+0085) inside single quotes, where a
    # reader folds it into a space, so a key of an unimplemented section came back as " ".
    values = {"maxSlotsPerPod": 4, "checkpointStorage": {"type": "s3", "bucket": "b"},
              "oidc": {"\x85": False, "a\u2028b": "x\u2029y"}}
    rendered = yaml.safe_load(render_values(values, "0.38.1"))
    assert rendered["oidc"] == {"\x85": False, "a\u2028b": "x\u2029y"}
