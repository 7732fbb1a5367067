"""deploy/Dockerfile's build checks its image by importing the modules `scheduler run` needs: they must exist (a
module moved without the Dockerfile following broke the image build, which only the real image tests would see)."""

from __future__ import annotations

import importlib
import re

from tests.conftest import ROOT


def test_the_modules_the_image_build_imports_exist():
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    found = re.findall(r"python -c '(import [^']+)'", text)
    assert found, "the Dockerfile no longer checks its image with `python -c 'import ...'`"
    modules = [name.strip() for line in found for name in line.removeprefix("import ").split(",")]
    ours = [name for name in modules if name.startswith("det_k8s.")]
    assert "det_k8s.live.scheduler" in ours
    for name in ours:
        importlib.import_module(name)
