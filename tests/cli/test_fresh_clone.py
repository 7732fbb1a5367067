"""A clone with nothing beside it (no ../shared, as a user's `git clone` has): the tests that need ../shared skip with
their reason instead of erroring (issue 25: 115 errors from one fixture), and collection of the whole suite succeeds.

CI runs this too: it clones HEAD of this checkout into an empty directory and runs there, without CI=true (in CI the
same tests must not skip, which tests/support/needs.py enforces)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from tests.conftest import ROOT
from tests.support.needs import need

SHARED_USERS = ("tests/integration/test_experiment_schemas.py", "tests/integration/test_determined_schemas.py",
                "tests/integration/test_searcher_values_oracle.py", "tests/integration/test_official_charts.py",
                "tests/live/test_master_scheduling_edge_cases.py")


def test_a_clone_without_shared_skips_what_needs_it_and_collects_everything(tmp_path):
    git = shutil.which("git")
    need(git is not None and (ROOT / ".git").exists(), "this checkout is not a git clone")
    clone = tmp_path / "empty" / "det-k8s"
    clone.parent.mkdir()
    assert git is not None
    subprocess.run([git, "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=300, capture_output=True)
    assert not (clone.parent / "shared").exists()
    (clone / ".tools").symlink_to(ROOT / ".tools", target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = str(clone)  # this clone's det_k8s and tests, not the checkout's
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *SHARED_USERS],
                         cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    tail = ran.stdout[-2000:]
    assert ran.returncode == 0, tail
    assert " skipped" in tail and "error" not in tail.lower().replace("errors", "")
    assert f"{clone.parent / 'shared' / 'determined'}" in ran.stdout or "is absent" in ran.stdout + tail
    collected = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider"],
                               cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    assert collected.returncode == 0, collected.stdout[-2000:]
    assert "error" not in collected.stdout.lower().split("\n")[-2]

