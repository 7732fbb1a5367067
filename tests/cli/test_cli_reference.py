"""docs/reference/cli.md is what scripts/cli_reference.py writes from the Typer app today: a changed command, option or
help text without the page regenerated fails here."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "cli_reference.py"


def _reference_module():
    spec = importlib.util.spec_from_file_location("cli_reference", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("cli_reference", module)
    spec.loader.exec_module(module)
    return module


def test_the_committed_cli_reference_is_what_the_app_generates(monkeypatch: pytest.MonkeyPatch):
    reference = _reference_module()
    for name, value in reference.FIXED_ENV.items():  # generate() sets them; the test's environment gets them back
        monkeypatch.setenv(name, value)
    generated = reference.generate()
    committed = (ROOT / "docs" / "reference" / "cli.md").read_text()
    assert generated == committed, (
        "docs/reference/cli.md is out of date with the CLI; run `.venv/bin/python scripts/cli_reference.py` and "
        "commit the result")


def test_the_reference_has_every_command_and_subcommand():
    text = (ROOT / "docs" / "reference" / "cli.md").read_text()
    for heading in ("## det-k8s\n", "### det-k8s install\n", "#### det-k8s nodes map\n",
                    "#### det-k8s experiment create\n", "#### det-k8s scheduler manifest\n",
                    "#### det-k8s checkpoint check\n", "#### det-k8s get values\n"):
        assert heading in text, heading
    assert "\x1b[" not in text  # no colour
