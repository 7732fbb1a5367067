"""A test run stopped by SIGTERM (a timeout's kill, scripts/flakes, a cancelled CI job) tears its session fixtures
down, as on Ctrl-C, so the real control plane and the master they started do not outlive it (tests/conftest.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.conftest import ROOT

MODULE = '''
import time
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def plane():
    Path("{marker}").write_text("up")
    yield
    Path("{marker}").write_text("torn down")


def test_waits(plane):
    time.sleep(120)
'''


def test_sigterm_tears_session_fixtures_down(tmp_path):
    marker = tmp_path / "marker"
    (tmp_path / "test_slow.py").write_text(MODULE.format(marker=marker))
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
                            "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_slow.py")],
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists(), "the session fixture never started"
        run.send_signal(signal.SIGTERM)
        out, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert marker.read_text() == "torn down", out
    assert "KeyboardInterrupt" in out
