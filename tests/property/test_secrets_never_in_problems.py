"""Property: a value under a secret key, however the key is misspelt, never appears in a problem."""

from __future__ import annotations

import json

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from det_k8s.errors import UsageError
from det_k8s.settings import Document, load_settings
from det_k8s.settings.schema import secret_paths

MARKER = "ZQX-PLANTED-9931"
SECRETS = sorted(secret_paths())


def typo(name: str, how: int) -> str:
    """The name as people get it wrong: snake_case, lower case, a letter dropped or doubled."""
    snake = "".join("_" + c.lower() if c.isupper() else c for c in name)
    variants = [name, snake, name.lower(), name[:-1], name + name[-1], name[: len(name) // 2] + name[len(name) // 2 + 1:]]
    return variants[how % len(variants)]


paths = st.builds(lambda path, how, where: (*path[:-1], typo(path[-1], how)) if where else path,
                  st.sampled_from(SECRETS), st.integers(0, 5), st.booleans())
values = st.sampled_from([MARKER, f"x{MARKER}x", f"{{{MARKER},y}}", f"https://u:{MARKER}@h/?sig={MARKER}", "1" + MARKER])
channels = st.sampled_from(["set", "set-string", "file", "file-list", "set-malformed"])


@settings(max_examples=300, deadline=None)
@given(paths, values, channels)
def test_a_planted_secret_never_appears_in_any_problem(path, value, channel):
    key = ".".join(path)
    base = "maxSlotsPerPod: 4\ncheckpointStorage: {type: gcs, bucket: b}\n"
    documents, sets, set_strings = [Document("base.yaml", base)], [], []
    if channel == "set":
        sets.append(f"{key}={value}")
    elif channel == "set-string":
        set_strings.append(f"{key}={value}")
    elif channel == "set-malformed":
        sets.append(f"{key}={value}" + "{,=")
    else:
        data: dict = {}
        node = data
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = [value] if channel == "file-list" else value
        documents.append(Document("planted.yaml", yaml.safe_dump(data)))
    try:
        loaded = load_settings(documents, sets, set_strings)
    except UsageError as exc:
        assert MARKER not in exc.message + (exc.hint or "")
        return
    text = json.dumps([p.render() for p in loaded.problems])
    assert MARKER not in text
